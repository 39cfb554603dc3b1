"""Deep feedforward network trained in the deep RKM framework (model M2 of Suykens 2017).

Model (eq. 5.6), one hidden layer per level, in the row layout of the package (one row per sample)::

    S1 = s(X U1^T + 1 beta1^T),   E1 = S1 W1,   Z1 = E1 Lambda1^-1
    S2 = s(Z1 U2^T + 1 beta2^T),  E2 = S2 W2,   Z2 = E2 Lambda2^-1
    S3 = s(Z2 U3^T + 1 beta3^T),  Yhat = S3 W3 + 1 b^T

with X (N x d), U_l (nh_l x n_in), beta_l (nh_l), W_l (nh_l x n_out), the level widths
(n_in, n_out) = (d, s1), (s1, s2), (s2, p), Lambda_l = diag(l_l) and s = tanh by default. Training minimizes
eq. 5.5, the stabilised deep RKM objective in the primal::

    J1 = -(1/2) sum_{i,k} E1[i, k]^2 / l1[k] + (eta1/2) ||W1||_F^2          (kernel PCA level 1)
    J2 = -(1/2) sum_{i,k} E2[i, k]^2 / l2[k] + (eta2/2) ||W2||_F^2          (kernel PCA level 2)
    J3 = ||Y - Yhat||_F^2 / (2 lam3) + (eta3/2) ||W3||_F^2                   (LS-SVM regression level 3)
    f  = J1 + J2 + J3 + (c_stab/2)(J1^2 + J2^2) - c0 (sum l1 + sum l2)     (objective="full")
    f  = J3                                                                  (objective="level3")

The sums run over all N training rows (the paper's "j = 1..M" in eq. 5.5 is read as the training set: M2 has
no reduced set). U_l and beta_l are not regularised. Without c_stab the kernel PCA terms are unbounded below
(l -> 0 or ||W|| -> inf); g(J) = J + (c/2) J^2 is bounded below by -1/(2c), which is what stabilises them
(appendix A.1).

Flat parameter vector theta (float64), blocks in this order, each row-major::

    U1 | beta1 | W1 | U2 | beta2 | W2 | U3 | beta3 | W3 | b (p) | l1 (s1) | l2 (s2)

dims = (d, nh1, nh2, nh3, s1, s2, p). With ``toeplitz=True`` the blocks U1 and U2 are replaced by their
generators t1 (nh1 + d - 1 entries) and t2 (nh2 + s1 - 1 entries), U[i, j] = t[i - j + n_in - 1]: U3 stays
dense, as in M2,b,T ("Toeplitz matrices ... in all levels, except for the last level", sec. 6.1). The
eigenvalue entries l1, l2 are last so that an optimizer can bound them as one trailing block (``n_eigen``).

Variants of sec. 6.1 as arguments of :func:`feedforward_objective`:

- M2,a: ``objective="full"``, ``c_stab > 0``, ``c0 > 0`` (the paper uses c0 = 0.1);
- M2,b: ``objective="full"``, ``c0 = 0``;
- M2,c: ``objective="level3"`` (only J3; c_stab and c0 do not enter);
- M2,b,T: M2,b with ``toeplitz=True``.

``rkm._utils.optimize.minimize_objective`` (the L-BFGS driver shared with the reduced-set model M1) runs scipy's
L-BFGS-B (the paper used Matlab's quasi-Newton ``fminunc``) with the eigenvalue entries bounded below, and stops with
:class:`rkm.deep.DivergenceError` as soon as the objective runs away; :data:`DIVERGENCE_ADVICE` is what
:class:`rkm.DeepRKM` appends to that error.

References
----------
J. A. K. Suykens, "Deep restricted kernel machines using conjugate feature duality", Neural Computation
29(8), 2017.
"""

import math
import numbers
from dataclasses import astuple, dataclass

import numpy as np
import scipy.special

from rkm._utils.validation import check_choices, check_nonnegative, check_positive

OBJECTIVES = ("full", "level3")

# Activation s of eq. 5.6 and its derivative written in terms of s's output (the backward pass keeps only S).
ACTIVATIONS = {
    "tanh": (np.tanh, lambda S: 1.0 - S * S),
    "logistic": (scipy.special.expit, lambda S: S * (1.0 - S)),
}

# Standard deviation of the random initial U and W (sec. 6.1: "normal distribution with zero mean and standard
# deviation 0.1").
INIT_SCALE = 0.1

# What DeepRKM appends to a DivergenceError of its primal solvers: the parameters that bound the objective.
DIVERGENCE_ADVICE = "use a larger c_stab, a smaller c0 or objective='level3'"


# --------------------------------------------------------------------------------------------------------------
# Parameter layout


@dataclass(frozen=True)
class FeedforwardDims:
    """The widths of M2: inputs d, hidden units nh1..nh3, components s1, s2 and outputs p."""

    d: int
    nh1: int
    nh2: int
    nh3: int
    s1: int
    s2: int
    p: int

    def levels(self):
        """(nh, n_in, n_out) of levels 1, 2, 3."""
        return ((self.nh1, self.d, self.s1), (self.nh2, self.s1, self.s2), (self.nh3, self.s2, self.p))


def check_dims(dims):
    """dims as a FeedforwardDims of seven positive ints (d, nh1, nh2, nh3, s1, s2, p)."""
    if isinstance(dims, FeedforwardDims):
        return dims
    valid = not isinstance(dims, (str, bytes)) and hasattr(dims, "__len__") and len(dims) == 7
    if not valid or not all(
        isinstance(value, numbers.Integral) and not isinstance(value, bool) and value >= 1 for value in dims
    ):
        raise ValueError(f"dims: must be a sequence of 7 positive ints (d, nh1, nh2, nh3, s1, s2, p), got {dims!r}")
    return FeedforwardDims(*(int(value) for value in dims))


def _check_toeplitz(toeplitz):
    if not isinstance(toeplitz, (bool, np.bool_)):
        raise ValueError(f"toeplitz: must be a bool, got {toeplitz!r}")
    return bool(toeplitz)


def _blocks(dims, toeplitz):
    """(name, shape) of the blocks of theta, in layout order."""
    blocks = []
    for level, (nh, n_in, n_out) in enumerate(dims.levels(), start=1):
        if toeplitz and level < 3:
            blocks.append((f"t{level}", (nh + n_in - 1,)))
        else:
            blocks.append((f"U{level}", (nh, n_in)))
        blocks += [(f"beta{level}", (nh,)), (f"W{level}", (nh, n_out))]
    return blocks + [("b", (dims.p,)), ("l1", (dims.s1,)), ("l2", (dims.s2,))]


def _views(vector, dims, toeplitz):
    """Name -> view of each block of the flat vector (writes through, so the gradient fills in place)."""
    views, start = {}, 0
    for name, shape in _blocks(dims, toeplitz):
        size = math.prod(shape)
        views[name] = vector[start : start + size].reshape(shape)
        start += size
    return views


def feedforward_size(dims, toeplitz=False):
    """Number of unknowns of M2: the length of theta.

    Parameters
    ----------
    dims : sequence of 7 ints
        (d, nh1, nh2, nh3, s1, s2, p).
    toeplitz : bool, default=False
        Whether U1 and U2 are Toeplitz (generators of nh + n_in - 1 entries instead of nh * n_in).

    Returns
    -------
    int
        nh1 (s1 + d + 1) + nh2 (s2 + s1 + 1) + nh3 (p + s2 + 1) + s1 + s2 + p for dense U (sec. 5.3, where the
        paper's "+ 1" is p = 1); with Toeplitz U1, U2 smaller by (nh1 - 1)(d - 1) + (nh2 - 1)(s1 - 1).
    """
    dims, toeplitz = check_dims(dims), _check_toeplitz(toeplitz)
    return sum(math.prod(shape) for _, shape in _blocks(dims, toeplitz))


def toeplitz_matrix(t, n_rows, n_cols):
    """The n_rows x n_cols Toeplitz matrix U[i, j] = t[i - j + n_cols - 1] (constant along each diagonal).

    Parameters
    ----------
    t : ndarray of shape (n_rows + n_cols - 1,)
        The generator: t[0] is the top-right corner, t[n_cols - 1] the main diagonal, t[-1] the bottom-left.
    n_rows, n_cols : int

    Returns
    -------
    ndarray of shape (n_rows, n_cols)
    """
    return t[_diagonal_index(n_rows, n_cols)]


def _diagonal_index(n_rows, n_cols):
    return np.subtract.outer(np.arange(n_rows), np.arange(n_cols)) + (n_cols - 1)


def _diagonal_sums(G):
    """Gradient with respect to a Toeplitz generator: the dense gradient summed along each diagonal."""
    n_rows, n_cols = G.shape
    return np.bincount(_diagonal_index(n_rows, n_cols).ravel(), weights=G.ravel(), minlength=n_rows + n_cols - 1)


def unpack_feedforward(theta, dims, toeplitz=False):
    """The named parameters of M2 in theta, with Toeplitz U1, U2 expanded to dense matrices.

    Parameters
    ----------
    theta : ndarray of shape (feedforward_size(dims, toeplitz),)
    dims : sequence of 7 ints
        (d, nh1, nh2, nh3, s1, s2, p).
    toeplitz : bool, default=False

    Returns
    -------
    dict of ndarray
        "U1", "beta1", "W1", "U2", "beta2", "W2", "U3", "beta3", "W3", "b", "l1", "l2" with the shapes of the
        module docstring (views into theta, except the expanded Toeplitz U1, U2).
    """
    dims, toeplitz = check_dims(dims), _check_toeplitz(toeplitz)
    return _unpack(_check_theta(theta, dims, toeplitz), dims, toeplitz)


def _unpack(theta, dims, toeplitz):
    params = _views(theta, dims, toeplitz)
    if toeplitz:
        for level, (nh, n_in, _) in enumerate(dims.levels()[:2], start=1):
            params[f"U{level}"] = toeplitz_matrix(params.pop(f"t{level}"), nh, n_in)
    return params


def initial_feedforward(dims, toeplitz, rng):
    """A random starting point: U (or its Toeplitz generator) and W ~ N(0, 0.1^2), beta = 0, b = 0, l = 1.

    Parameters
    ----------
    dims : sequence of 7 ints
        (d, nh1, nh2, nh3, s1, s2, p).
    toeplitz : bool
    rng : None, int, numpy.random.Generator or numpy.random.RandomState
        Source of the normal draws (an int or None seeds a new Generator). Blocks are drawn in layout order.

    Returns
    -------
    theta : ndarray of shape (feedforward_size(dims, toeplitz),), float64
    """
    dims, toeplitz = check_dims(dims), _check_toeplitz(toeplitz)
    if not isinstance(rng, (np.random.Generator, np.random.RandomState)):
        rng = np.random.default_rng(rng)
    theta = np.zeros(feedforward_size(dims, toeplitz))
    views = _views(theta, dims, toeplitz)
    for name, block in views.items():
        if name[0] in "tUW":
            block[...] = rng.normal(0.0, INIT_SCALE, size=block.shape)
    views["l1"][...] = 1.0
    views["l2"][...] = 1.0
    return theta


# --------------------------------------------------------------------------------------------------------------
# Forward pass, objective and gradient


def _check_theta(theta, dims, toeplitz):
    theta = np.asarray(theta, dtype=np.float64)
    expected = feedforward_size(dims, toeplitz)
    if theta.ndim != 1 or theta.size != expected:
        raise ValueError(
            f"theta: must be a 1-D array of {expected} entries for dims {astuple(dims)} and "
            f"toeplitz={toeplitz}, got shape {theta.shape}"
        )
    if not np.all(np.isfinite(theta)):
        raise ValueError("theta: must be finite")
    tail = theta[theta.size - dims.s1 - dims.s2 :]
    if np.any(tail <= 0):
        raise ValueError("theta: the eigenvalue entries l1, l2 must be positive")
    return theta


def _check_rows(A, name, n_columns, n_rows=None):
    try:
        A = np.ascontiguousarray(A, dtype=np.float64)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{name}: must be a numeric 2-D array ({error})") from None
    if A.ndim != 2 or A.shape[0] == 0 or A.shape[1] != n_columns:
        raise ValueError(f"{name}: must be a 2-D array of shape (n_samples >= 1, {n_columns}), got shape {A.shape}")
    if n_rows is not None and A.shape[0] != n_rows:
        raise ValueError(f"{name}: must have {n_rows} rows (as X), got shape {A.shape}")
    if not np.all(np.isfinite(A)):
        raise ValueError(f"{name}: must be finite (no NaN or infinity)")
    return A


def _check_activation(activation):
    check_choices([("activation", activation, tuple(ACTIVATIONS))])
    return ACTIVATIONS[activation]


def _check_etas(etas):
    if isinstance(etas, (str, bytes)) or not hasattr(etas, "__len__") or len(etas) != 3:
        raise ValueError(f"etas: must be a sequence of 3 positive numbers (eta1, eta2, eta3), got {etas!r}")
    return tuple(check_positive(eta, "etas") for eta in etas)


def _forward(params, X, activation):
    """All intermediate arrays of eq. 5.6 the gradient needs."""
    s = activation[0]
    S1 = s(X @ params["U1"].T + params["beta1"])
    E1 = S1 @ params["W1"]
    Z1 = E1 / params["l1"]
    S2 = s(Z1 @ params["U2"].T + params["beta2"])
    E2 = S2 @ params["W2"]
    Z2 = E2 / params["l2"]
    S3 = s(Z2 @ params["U3"].T + params["beta3"])
    Yhat = S3 @ params["W3"] + params["b"]
    return {"S1": S1, "E1": E1, "Z1": Z1, "S2": S2, "E2": E2, "Z2": Z2, "S3": S3, "Yhat": Yhat}


def feedforward_forward(theta, X, dims, toeplitz=False, *, activation="tanh"):
    """Outputs of M2 (eq. 5.6) for any rows X.

    Parameters
    ----------
    theta : ndarray of shape (feedforward_size(dims, toeplitz),)
        Flat parameters (module docstring).
    X : array-like of shape (n_samples, d)
    dims : sequence of 7 ints
        (d, nh1, nh2, nh3, s1, s2, p).
    toeplitz : bool, default=False
        Whether theta holds Toeplitz generators for U1, U2.
    activation : {"tanh", "logistic"}, default="tanh"
        The nonlinearity s of every hidden layer.

    Returns
    -------
    Yhat : ndarray of shape (n_samples, p)
    E1 : ndarray of shape (n_samples, s1)
        Level-1 errors e^(1) (rows); the level-2 input is E1 / l1.
    E2 : ndarray of shape (n_samples, s2)
        Level-2 errors e^(2) (rows); the level-3 input is E2 / l2.
    """
    dims, toeplitz = check_dims(dims), _check_toeplitz(toeplitz)
    theta = _check_theta(theta, dims, toeplitz)
    X = _check_rows(X, "X", dims.d)
    cache = _forward(_unpack(theta, dims, toeplitz), X, _check_activation(activation))
    return cache["Yhat"], cache["E1"], cache["E2"]


def feedforward_objective(
    theta, X, Y, dims, etas, lam3, c_stab, c0, objective="full", toeplitz=False, *, activation="tanh"
):
    """Objective of eq. 5.5 for M2, its analytic gradient and its level terms.

    Parameters
    ----------
    theta : ndarray of shape (feedforward_size(dims, toeplitz),)
        Flat parameters (module docstring); l1, l2 entries must be positive.
    X : array-like of shape (n_samples, d)
        Training inputs.
    Y : array-like of shape (n_samples, p)
        Training targets.
    dims : sequence of 7 ints
        (d, nh1, nh2, nh3, s1, s2, p).
    etas : sequence of 3 floats
        (eta1, eta2, eta3) > 0, the weights of the (eta_l/2) ||W_l||_F^2 terms.
    lam3 : float
        lambda_3 > 0 of the regression level.
    c_stab : float
        Stabilisation weight >= 0 (appendix A.1); unused with objective="level3".
    c0 : float
        Weight >= 0 of -c0 (Tr Lambda1 + Tr Lambda2) (variant a); unused with objective="level3".
    objective : {"full", "level3"}, default="full"
        "full": J1 + J2 + J3 + (c_stab/2)(J1^2 + J2^2) - c0 (sum l1 + sum l2) (variants a, b);
        "level3": J3 only (variant c).
    toeplitz : bool, default=False
        Whether theta holds Toeplitz generators for U1, U2 (variant b,T); U3 is always dense.
    activation : {"tanh", "logistic"}, default="tanh"
        The nonlinearity s of every hidden layer.

    Returns
    -------
    f : float
    grad : ndarray of shape theta.shape
        df/dtheta, same layout as theta.
    terms : ndarray of shape (3,)
        [J1, J2, J3] (computed for both objectives).
    """
    dims, toeplitz = check_dims(dims), _check_toeplitz(toeplitz)
    theta = _check_theta(theta, dims, toeplitz)
    X = _check_rows(X, "X", dims.d)
    Y = _check_rows(Y, "Y", dims.p, n_rows=X.shape[0])
    etas = _check_etas(etas)
    lam3 = check_positive(lam3, "lam3")
    c_stab, c0 = check_nonnegative(c_stab, "c_stab"), check_nonnegative(c0, "c0")
    check_choices([("objective", objective, OBJECTIVES)])
    activation = _check_activation(activation)

    params = _unpack(theta, dims, toeplitz)
    cache = _forward(params, X, activation)
    R = Y - cache["Yhat"]
    terms = np.array(
        [
            -0.5 * np.sum(cache["E1"] * cache["Z1"]) + 0.5 * etas[0] * np.sum(params["W1"] ** 2),
            -0.5 * np.sum(cache["E2"] * cache["Z2"]) + 0.5 * etas[1] * np.sum(params["W2"] ** 2),
            np.sum(R * R) / (2.0 * lam3) + 0.5 * etas[2] * np.sum(params["W3"] ** 2),
        ]
    )
    if objective == "full":
        trace = params["l1"].sum() + params["l2"].sum()
        f = terms.sum() + 0.5 * c_stab * (terms[0] ** 2 + terms[1] ** 2) - c0 * trace
        # df/dJ_l of the stabilised kernel PCA terms, and df/d(sum l).
        weights, trace_weight = (1.0 + c_stab * terms[0], 1.0 + c_stab * terms[1]), c0
    else:
        f, weights, trace_weight = terms[2], (0.0, 0.0), 0.0

    grad = np.empty_like(theta)
    grads = _views(grad, dims, toeplitz)
    _backward(params, cache, X, R / -lam3, etas, weights, trace_weight, activation[1], grads, toeplitz)
    return float(f), grad, terms


def _backward(params, cache, X, GY, etas, weights, trace_weight, derivative, grads, toeplitz):
    """Fill grads (views into the flat gradient) by reverse-mode differentiation of eq. 5.6 through 5.5.

    GY = df/dYhat. Going down a level, df/dZ_l (from the level above) turns into df/dE_l by the chain rule
    through Z_l = E_l / l_l, plus the direct dependence of the kernel PCA term weights[l] * J_l on E_l.
    """
    grads["b"][...] = GY.sum(axis=0)
    GZ = _layer_backward(3, params, cache["S3"], cache["Z2"], GY, etas[2], 1.0, derivative, grads, toeplitz)
    for level, inputs in ((2, cache["Z1"]), (1, X)):
        Z, eig, w = cache[f"Z{level}"], params[f"l{level}"], weights[level - 1]
        GE = GZ / eig - w * Z
        # Z = E / l and J_l's -(1/2) E^2 / l both depend on l directly.
        grads[f"l{level}"][...] = -np.sum(GZ * Z, axis=0) / eig + 0.5 * w * np.sum(Z * Z, axis=0) - trace_weight
        S, eta = cache[f"S{level}"], etas[level - 1]
        GZ = _layer_backward(level, params, S, inputs, GE, eta, w, derivative, grads, toeplitz)


def _layer_backward(level, params, S, inputs, GE, eta, weight, derivative, grads, toeplitz):
    """Gradients of one level E = s(inputs U^T + beta) W given GE = df/dE; returns df/dinputs.

    weight multiplies the regulariser (eta/2) ||W||^2: it enters f through weight * J_l.
    """
    W, U = params[f"W{level}"], params[f"U{level}"]
    grads[f"W{level}"][...] = S.T @ GE + (weight * eta) * W
    GP = (GE @ W.T) * derivative(S)
    grads[f"beta{level}"][...] = GP.sum(axis=0)
    GU = GP.T @ inputs
    if toeplitz and level < 3:
        grads[f"t{level}"][...] = _diagonal_sums(GU)
    else:
        grads[f"U{level}"][...] = GU
    # The level-1 input X is data: its gradient is not needed.
    return GP @ U if level > 1 else None
