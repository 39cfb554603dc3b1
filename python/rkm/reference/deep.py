"""Deep restricted kernel machines of Suykens 2017 (sections 4 and 5), the core's ``deep``.

Row layout
----------
Every matrix of hidden features holds one row per sample: ``H_l`` has shape (N, s_l) and its row i is the
paper's column ``h_i^(l)``, so the paper's ``H_l = [h_1 ... h_N]`` is our ``H_l.T`` and the paper's
linear kernel matrix ``[K_lin(h_j, h_i)]`` is our ``H_l @ H_l.T``. Inputs X are (N, d), targets Y (N, p).

Deep reduced-set model (eqs 5.2-5.4)
------------------------------------
The unknowns travel as one flat float64 vector ``theta``, each block row-major and in this order::

    A1 (M, s1) | A2 (M, s2) | A3 (M, p) | b (p) | l1 (s1) | l2 (s2)

where ``A_l`` is the paper's reduced-set matrix ``H~_l`` (one row per reduced-set point) and ``l_l`` the
diagonal of ``Lambda_l``; ``dims = (M, s1, s2, p)``. The constants are ``K1 = k1(X, Xr)`` (N, M) and
``G1 = k1(Xr, Xr)`` (M, M) for the M reduced-set points Xr. The forward pass (eq 5.4, all N rows)::

    E1 = K1 A1 / eta1,           Z1 = E1 / l1   (column-wise)
    E2 = k2(Z1, A1) A2 / eta2,   Z2 = E2 / l2
    Yhat = k3(Z2, A2) A3 / eta3 + 1 b^T

and the objective (eq 5.3 with the options of section 5.2)::

    J1 = -(1/2) sum_ik E1[i, k]^2 / l1[k] + Rg1,   J2 likewise,   J3 = ||Y - Yhat||_F^2 / (2 lam3) + Rg3
    full:   f = J1 + J2 + J3 + (c_stab/2)(J1^2 + J2^2) - c0 (sum l1 + sum l2)
    level3: f = J3

with ``Rg_l = (eta_l/2) ||A_l||_F^2`` (regularizer "H", the Tr(H~ H~^T) option) or
``Rg_l = (eta_l/2) Tr(W~_l^T W~_l) = Tr(A_l^T G_l A_l) / (2 eta_l)`` (regularizer "W"), G2 = k2(A1, A1),
G3 = k3(A2, A2). The kernels of levels 2 and 3 are ``(name, gamma, degree, coef0)`` tuples, name one of
"rbf", "linear", "poly" (``poly = (gamma <x, y> + coef0)^degree``).

Level-wise solving (eqs 4.11, 4.18 and 5.1)
-------------------------------------------
With linear kernels in levels 2 and 3 the stationarity conditions become one linear system and two
symmetric eigenproblems, solved here in turn by dense ``numpy.linalg.solve`` and ``scipy.linalg.eigh``.
"""

import numbers

import numpy as np
import scipy.linalg

from rkm._kernel_table import names_with
from rkm.reference._validation import blas_threads, check_square, finite_number, int_in_range, real_matrix, real_vector
from rkm.reference.eigs import _fix_signs
from rkm.reference.kernels import kernel_gradient, kernel_matrix

__all__ = [
    "deep_reduced_set_objective",
    "deep_reduced_set_forward",
    "deep_levelwise_lssvm_kpca_kpca",
    "deep_levelwise_kpca_kpca_lssvm",
]

_LEVEL_KERNELS = names_with("layer_derivatives")
_REGULARIZERS = ("H", "W")
_OBJECTIVES = ("full", "level3")
_PHASES = ("forward_backward", "forward")
# Eigenvalues at or below this fraction of max(1, largest) are treated as zero (their vectors as absent).
_NEGLIGIBLE_EIGENVALUE = 1e-12


# --------------------------------------------------------------------------
# argument checks
# --------------------------------------------------------------------------


def _sequence_of(values, length):
    """Whether `values` is a tuple, list or 1-D array of `length` entries (their type is checked later)."""
    if isinstance(values, np.ndarray):
        return values.shape == (length,)
    return isinstance(values, (tuple, list)) and len(values) == length


def _choice(value, name, choices):
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name}: must be one of {', '.join(repr(c) for c in choices)}, got {value!r}")
    return value


def _positive_triple(values, name):
    """The three positive finite numbers of `values` (eta1, eta2, eta3) as floats."""
    if not _sequence_of(values, 3):
        raise ValueError(f"{name}: must hold three positive finite numbers (eta1, eta2, eta3), got {values!r}")
    return tuple(finite_number(value, name, positive=True) for value in values)


def _non_negative(value, name):
    value = finite_number(value, name)
    if value < 0:
        raise ValueError(f"{name}: must be a non-negative finite number, got {value!r}")
    return value


def _level_kernel(spec, name):
    """A level's kernel tuple (name, gamma, degree, coef0), validated, as kernel_matrix arguments."""
    if not isinstance(spec, (tuple, list)) or len(spec) != 4:
        raise ValueError(f"{name}: must be a (name, gamma, degree, coef0) tuple, got {spec!r}")
    kind, gamma, degree, coef0 = spec
    _choice(kind, name, _LEVEL_KERNELS)
    kernel = dict(kernel=kind, gamma=None, degree=3.0, coef0=1.0)
    if kind == "rbf":
        kernel["gamma"] = _kernel_number(gamma, name, "gamma", positive=True)
    elif kind == "poly":
        kernel["gamma"] = _kernel_number(gamma, name, "gamma")
        kernel["degree"] = _kernel_number(degree, name, "degree")
        kernel["coef0"] = _kernel_number(coef0, name, "coef0")
        if kernel["degree"] < 0:
            raise ValueError(f"{name}: the degree must be non-negative, got {degree!r}")
    return kernel


def _kernel_number(value, name, what, positive=False):
    valid = not isinstance(value, bool) and isinstance(value, numbers.Real) and np.isfinite(value)
    if not valid or (positive and value <= 0):
        kind = "a positive finite number" if positive else "a finite number"
        raise ValueError(f"{name}: {what} must be {kind}, got {value!r}")
    return float(value)


def _dims(dims):
    """(M, s1, s2, p), each a positive int."""
    if not _sequence_of(dims, 4):
        raise ValueError(f"dims: must hold four positive ints (M, s1, s2, p), got {dims!r}")
    return tuple(int_in_range(value, "dims", 1) for value in dims)


def _theta_size(dims):
    M, s1, s2, p = dims
    return M * (s1 + s2 + p) + p + s1 + s2


def _unpack(theta, dims):
    """Views of theta's blocks: A1, A2, A3 (row-major matrices), b, l1, l2."""
    M, s1, s2, p = dims
    sizes = [M * s1, M * s2, M * p, p, s1, s2]
    A1, A2, A3, b, l1, l2 = np.split(theta, np.cumsum(sizes)[:-1])
    return A1.reshape(M, s1), A2.reshape(M, s2), A3.reshape(M, p), b, l1, l2


def _theta(theta, dims):
    theta = real_vector(theta, "theta", _theta_size(dims), "A1 | A2 | A3 | b | l1 | l2 for dims (M, s1, s2, p)")
    theta = theta.astype(np.float64)
    _, _, _, _, l1, l2 = _unpack(theta, dims)
    if np.any(l1 <= 0) or np.any(l2 <= 0):
        raise ValueError("theta: the eigenvalue entries l1, l2 must be positive")
    return theta


def _kernel_rows(K1, M):
    K1 = real_matrix(K1, "K1")
    if K1.shape[1] != M:
        raise ValueError(f"K1: must have M = {M} columns (one per reduced-set point), got shape {K1.shape}")
    return K1.astype(np.float64)


# --------------------------------------------------------------------------
# deep reduced-set model (eqs 5.2-5.4)
# --------------------------------------------------------------------------


def _forward(A1, A2, A3, b, l1, l2, K1, kernel2, kernel3, etas):
    """The forward pass of eq 5.4 on the rows of K1: a dict of its intermediate matrices."""
    eta1, eta2, eta3 = etas
    E1 = K1 @ A1 / eta1
    Z1 = E1 / l1
    K2 = kernel_matrix(Z1, A1, **kernel2)
    E2 = K2 @ A2 / eta2
    Z2 = E2 / l2
    K3 = kernel_matrix(Z2, A2, **kernel3)
    Yhat = K3 @ A3 / eta3 + b
    return dict(E1=E1, Z1=Z1, K2=K2, E2=E2, Z2=Z2, K3=K3, Yhat=Yhat)


def _regularizer(A, G, eta, regularizer):
    """Rg_l of one level: (eta/2) ||A||_F^2 ("H") or Tr(A^T G A) / (2 eta) ("W")."""
    if regularizer == "H":
        return 0.5 * eta * np.sum(A * A)
    return 0.5 * np.sum(A * (G @ A)) / eta


def _regularizer_gradient(A, G, eta, regularizer):
    """d Rg_l / d A_l with G held fixed (G symmetric)."""
    return eta * A if regularizer == "H" else G @ A / eta


def _kpca_value(E, l):
    """-(1/2) sum_ik E[i, k]^2 / l[k], the data part of J1 and J2."""
    return -0.5 * np.sum(E * E / l)


def _kpca_level_backward(GZ, Z, l, weight):
    """Gradients of f with respect to E_l and l_l for Z_l = E_l / l_l, given GZ = df/dZ_l.

    `weight` = df/dJ_l multiplies the level's own term -(1/2) sum E^2 / l; c0 is added by the caller.
    """
    GE = GZ / l - weight * Z
    g_l = -np.sum(GZ * Z, axis=0) / l + 0.5 * weight * np.sum(Z * Z, axis=0)
    return GE, g_l


def deep_reduced_set_objective(
    theta, K1, G1, Y, dims, kernel2, kernel3, etas, lam3, c_stab, c0, regularizer, objective, n_threads=None
):
    """Objective of the deep reduced-set kernel model (eq 5.3) and its analytic gradient.

    Parameters
    ----------
    theta : ndarray of shape (M (s1 + s2 + p) + p + s1 + s2,)
        A1 | A2 | A3 | b | l1 | l2, each block row-major (module docstring); l1, l2 positive.
    K1 : ndarray of shape (N, M)
        ``k1(X, Xr)`` for the training inputs X and the reduced-set points Xr.
    G1 : ndarray of shape (M, M)
        ``k1(Xr, Xr)``; used by the "W" regularizer only.
    Y : ndarray of shape (N, p)
        Targets.
    dims : tuple of int
        (M, s1, s2, p).
    kernel2, kernel3 : tuple
        (name, gamma, degree, coef0) of levels 2 and 3, name one of "rbf", "linear", "poly".
    etas : tuple of float
        (eta1, eta2, eta3), positive.
    lam3 : float
        Positive lambda of the regression level (J3).
    c_stab : float
        Non-negative weight of the stabilisation term (c_stab/2)(J1^2 + J2^2) of eq 4.4 / 5.3.
    c0 : float
        Non-negative weight of -c0 (Tr Lambda1 + Tr Lambda2) (section 5.2).
    regularizer : {"H", "W"}
        ``(eta_l/2) ||A_l||_F^2`` or ``(eta_l/2) Tr(W~_l^T W~_l)`` (eq 5.2: ``Tr(A_l^T G_l A_l) / eta_l^2``).
    objective : {"full", "level3"}
        f = J1 + J2 + J3 + (c_stab/2)(J1^2 + J2^2) - c0 (sum l1 + sum l2), or f = J3 alone (no c_stab, no c0).
    n_threads : int, default=None
        BLAS threads for the call (None: as they are; -1: all cores).

    Returns
    -------
    f : float
    grad : ndarray of the shape of theta
        df/dtheta in theta's layout.
    terms : ndarray of shape (3,)
        [J1, J2, J3] (all three, also for objective="level3").

    Notes
    -----
    The sums over samples run over all N training rows (the reduced set parametrises W~ only). The
    backward pass, with KG(X, Y, W)_i = sum_j W_ij d/dx k(x, Y_j) at X_i (:func:`kernel_gradient`) and the
    derivative in the second argument taken as KG(Y, X, W^T) (symmetric kernels), w_l = df/dJ_l
    (1 + c_stab J_l for "full", 0 for "level3")::

        GY = -(Y - Yhat) / lam3;  g_b = GY^T 1;  g_A3 = K3^T GY / eta3 + dRg3/dA3
        O3 = GY A3^T / eta3;  GZ2 = KG(Z2, A2, O3);  g_A2 = KG(A2, Z2, O3^T) [+ KG(A2, A2, A3 A3^T) / eta3: "W"]
        GE2 = GZ2 / l2 - w2 Z2;  g_l2 = -colsum(GZ2 o Z2) / l2 + (w2/2) colsum(Z2 o Z2) [- c0]
        g_A2 += K2^T GE2 / eta2 + w2 dRg2/dA2;  O2 = GE2 A2^T / eta2
        GZ1 = KG(Z1, A1, O2);  g_A1 = KG(A1, Z1, O2^T) [+ w2 KG(A1, A1, A2 A2^T) / eta2: "W"]
        GE1, g_l1 as level 2;  g_A1 += K1^T GE1 / eta1 + w1 dRg1/dA1
    """
    dims = _dims(dims)
    M, _, _, p = dims
    theta = _theta(theta, dims)
    K1 = _kernel_rows(K1, M)
    G1 = real_matrix(G1, "G1")
    if G1.shape != (M, M):
        raise ValueError(f"G1: must have shape (M, M) = {(M, M)}, got {G1.shape}")
    Y = real_matrix(Y, "Y")
    if Y.shape != (K1.shape[0], p):
        raise ValueError(f"Y: must have shape (N, p) = {(K1.shape[0], p)}, got {Y.shape}")
    kernel2, kernel3 = _level_kernel(kernel2, "kernel2"), _level_kernel(kernel3, "kernel3")
    etas = _positive_triple(etas, "etas")
    lam3 = finite_number(lam3, "lam3", positive=True)
    c_stab, c0 = _non_negative(c_stab, "c_stab"), _non_negative(c0, "c0")
    regularizer = _choice(regularizer, "regularizer", _REGULARIZERS)
    objective = _choice(objective, "objective", _OBJECTIVES)
    with blas_threads(n_threads):
        return _objective_and_gradient(
            theta,
            dims,
            K1,
            G1.astype(np.float64),
            Y.astype(np.float64),
            kernel2,
            kernel3,
            etas,
            lam3,
            c_stab,
            c0,
            regularizer,
            objective,
        )


def _objective_and_gradient(theta, dims, K1, G1, Y, kernel2, kernel3, etas, lam3, c_stab, c0, regularizer, objective):
    eta1, eta2, eta3 = etas
    A1, A2, A3, b, l1, l2 = _unpack(theta, dims)
    fw = _forward(A1, A2, A3, b, l1, l2, K1, kernel2, kernel3, etas)
    Z1, Z2 = fw["Z1"], fw["Z2"]
    # The Gram matrices of the "W" regularizer (eq 5.3: Tr(W~^T W~) = Tr(A^T G A) / eta^2).
    G2 = kernel_matrix(A1, **kernel2) if regularizer == "W" else None
    G3 = kernel_matrix(A2, **kernel3) if regularizer == "W" else None

    R = Y - fw["Yhat"]
    J1 = _kpca_value(fw["E1"], l1) + _regularizer(A1, G1, eta1, regularizer)
    J2 = _kpca_value(fw["E2"], l2) + _regularizer(A2, G2, eta2, regularizer)
    J3 = 0.5 * np.sum(R * R) / lam3 + _regularizer(A3, G3, eta3, regularizer)
    if objective == "full":
        f = J1 + J2 + J3 + 0.5 * c_stab * (J1 * J1 + J2 * J2) - c0 * (l1.sum() + l2.sum())
        w1, w2, c0_grad = 1.0 + c_stab * J1, 1.0 + c_stab * J2, c0
    else:
        f = J3
        w1, w2, c0_grad = 0.0, 0.0, 0.0

    # Level 3: Yhat = K3 A3 / eta3 + 1 b^T with K3 = k3(Z2, A2).
    GY = -R / lam3
    g_b = GY.sum(axis=0)
    g_A3 = fw["K3"].T @ GY / eta3 + _regularizer_gradient(A3, G3, eta3, regularizer)
    O3 = GY @ A3.T / eta3
    GZ2 = kernel_gradient(Z2, A2, O3, **kernel3)
    g_A2 = kernel_gradient(A2, Z2, O3.T, **kernel3)
    if regularizer == "W":
        # Tr(A3^T k3(A2, A2) A3) / (2 eta3): both arguments of k3 move with A2, hence the factor 2 / 2.
        g_A2 += kernel_gradient(A2, A2, A3 @ A3.T, **kernel3) / eta3

    # Level 2: E2 = K2 A2 / eta2 with K2 = k2(Z1, A1); J2 enters f with weight w2.
    GE2, g_l2 = _kpca_level_backward(GZ2, Z2, l2, w2)
    g_l2 -= c0_grad
    g_A2 += fw["K2"].T @ GE2 / eta2 + w2 * _regularizer_gradient(A2, G2, eta2, regularizer)
    O2 = GE2 @ A2.T / eta2
    GZ1 = kernel_gradient(Z1, A1, O2, **kernel2)
    g_A1 = kernel_gradient(A1, Z1, O2.T, **kernel2)
    if regularizer == "W":
        g_A1 += w2 * kernel_gradient(A1, A1, A2 @ A2.T, **kernel2) / eta2

    # Level 1: E1 = K1 A1 / eta1; J1 enters f with weight w1.
    GE1, g_l1 = _kpca_level_backward(GZ1, Z1, l1, w1)
    g_l1 -= c0_grad
    g_A1 += K1.T @ GE1 / eta1 + w1 * _regularizer_gradient(A1, G1, eta1, regularizer)

    grad = np.concatenate([g_A1.ravel(), g_A2.ravel(), g_A3.ravel(), g_b, g_l1, g_l2])
    return float(f), grad, np.array([J1, J2, J3])


def deep_reduced_set_forward(theta, K1, dims, kernel2, kernel3, etas, n_threads=None):
    """Predictions of the deep reduced-set model (eq 5.4) for any rows.

    Parameters
    ----------
    theta : ndarray
        As :func:`deep_reduced_set_objective`.
    K1 : ndarray of shape (n_rows, M)
        ``k1(X_new, Xr)``.
    dims, kernel2, kernel3, etas, n_threads
        As :func:`deep_reduced_set_objective`.

    Returns
    -------
    Yhat : ndarray of shape (n_rows, p)
    E1 : ndarray of shape (n_rows, s1)
        ``K1 A1 / eta1``, the level-1 score e^(1).
    E2 : ndarray of shape (n_rows, s2)
        ``k2(E1 / l1, A1) A2 / eta2``, the level-2 score e^(2).
    """
    dims = _dims(dims)
    theta = _theta(theta, dims)
    K1 = _kernel_rows(K1, dims[0])
    kernel2, kernel3 = _level_kernel(kernel2, "kernel2"), _level_kernel(kernel3, "kernel3")
    etas = _positive_triple(etas, "etas")
    with blas_threads(n_threads):
        fw = _forward(*_unpack(theta, dims), K1, kernel2, kernel3, etas)
    return fw["Yhat"], fw["E1"], fw["E2"]


# --------------------------------------------------------------------------
# level-wise solving (eqs 4.11, 4.18, 5.1)
# --------------------------------------------------------------------------


def _top_eigenpairs(A, s, B=None):
    """The s largest eigenpairs of the symmetric A, unit vectors, signs fixed, negligible ones zeroed.

    An eigenvalue <= 1e-12 times the largest belongs to the (numerical) null space, whose vectors are
    arbitrary: it is returned as 0 with a zero column rather than as an arbitrary null-space vector. When
    A = B B^T, tied eigenvalues (within 1e-8 of the largest) get the basis whose k-th vector lies in the span of
    the tie's projections of B's first k columns (Gram-Schmidt in column order), the core's rule.
    """
    n = A.shape[0]
    rank = s if B is None else min(n, max(s, B.shape[1]))
    w, V = scipy.linalg.eigh(A, subset_by_index=[n - rank, n - 1])
    w, V = w[::-1].copy(), V[:, ::-1].copy()
    negligible = w <= _NEGLIGIBLE_EIGENVALUE * w[0]
    w[negligible] = 0.0
    V[:, negligible] = 0.0
    if B is not None:
        V = _order_ties(w, V, B)
    return w[:s].copy(), _fix_signs(V[:, :s].copy())


def _order_ties(w, V, B):
    """Rotate each group of tied non-zero eigenvalues' vectors onto B's columns in order (QR of V_g^T B)."""
    V = V.copy()
    start = 0
    while start < len(w):
        stop = start + 1
        while stop < len(w) and w[start] - w[stop] <= 1e-8 * max(w[0], 1e-300):
            stop += 1
        if stop - start > 1 and w[start] > 0:
            Q, _ = np.linalg.qr(V[:, start:stop].T @ B)
            V[:, start:stop] = V[:, start:stop] @ Q[:, : stop - start]
        start = stop
    return V


def _bordered_solve(A, Y, fit_intercept):
    """Solve [A 1; 1^T 0] [H; b^T] = [Y; 0] densely (eqs 4.11 level 3, 4.18 level 1); A H = Y without bias."""
    n, p = Y.shape
    if not fit_intercept:
        return np.linalg.solve(A, Y), np.zeros(p)
    system = np.zeros((n + 1, n + 1))
    system[:n, :n] = A
    system[:n, n] = system[n, :n] = 1.0
    solution = np.linalg.solve(system, np.vstack([Y, np.zeros((1, p))]))
    return solution[:n], solution[n]


def _linear_gram(H, eta):
    """(1/eta) [K_lin(h_j, h_i)] = H H^T / eta in the row layout."""
    return H @ H.T / eta


def _coupling(H_in, H_out, eta):
    """-(1/(2 eta)) ||H_in^T H_out||_F^2: a linear-kernel level's pairing and Tr(W^T W) with W eliminated."""
    C = H_in.T @ H_out
    return -0.5 * np.sum(C * C) / eta


def _eigen_term(H, eigenvalues):
    """(1/2) sum_k l_k ||H[:, k]||^2, the level's (1/2) sum_i h_i^T Lambda h_i."""
    return 0.5 * np.sum(eigenvalues * np.sum(H * H, axis=0))


def _regression_level(K, H, Y, eta, lam):
    """Level objective of LS-SVM regression with W eliminated (eq 4.6 level 3, eq 4.13 level 1).

    sum_i (y_i - W^T phi(x_i) - b)^T h_i - (lam/2) ||H||^2 + (eta/2) Tr(W^T W), W = (1/eta) sum_i phi(x_i) h_i^T:
    Tr(Y^T H) - Tr(H^T K H) / (2 eta) - (lam/2) ||H||^2. The bias term b^T H^T 1 is left out: it is 0 in every
    state the level-wise solvers reach (H^T 1 = 0 with an intercept, b = 0 without or before the level is solved).
    """
    return np.sum(Y * H) - 0.5 * np.sum(H * (K @ H)) / eta - 0.5 * lam * np.sum(H * H)


def _levelwise_arguments(K1, Y, etas, lam, n_passes, phases, fit_intercept):
    K1 = real_matrix(K1, "K1")
    check_square(K1, "K1")
    Y = real_matrix(Y, "Y")
    if Y.shape[0] != K1.shape[0]:
        raise ValueError(f"Y: has {Y.shape[0]} rows, expected N = {K1.shape[0]} (the order of K1)")
    etas = _positive_triple(etas, "etas")
    lam = finite_number(lam, "lam", positive=True)
    n_passes = int_in_range(n_passes, "n_passes", 1)
    phases = _choice(phases, "phases", _PHASES)
    if not isinstance(fit_intercept, (bool, np.bool_)):
        raise ValueError(f"fit_intercept: must be True or False, got {fit_intercept!r}")
    return K1.astype(np.float64), Y.astype(np.float64), etas, lam, n_passes, phases, bool(fit_intercept)


def _pair_of_components(n_components, first_max, names):
    """The two KPCA levels' component counts, the first in 1..first_max, the second in 1..second_max."""
    if not _sequence_of(n_components, 2):
        raise ValueError(f"n_components: must hold two ints ({names}), got {n_components!r}")
    return tuple(int_in_range(value, "n_components", 1, first_max) for value in n_components)


def _initial_hidden(H, name, shape):
    """The initial hidden features (zeros when None) of the given shape, float64."""
    if H is None:
        return np.zeros(shape)
    H = real_matrix(H, name)
    if H.shape != shape:
        raise ValueError(f"{name}: must have shape {shape}, got {H.shape}")
    return H.astype(np.float64)


def _schedule(n_passes, phases):
    """The level steps of eq 5.1 in order: (step name, level)."""
    forward = [("forward L1", 1), ("forward L2", 2), ("forward L3", 3)]
    backward = [("backward L2", 2), ("backward L1", 1)] if phases == "forward_backward" else []
    return (forward + backward) * n_passes


def deep_levelwise_lssvm_kpca_kpca(
    K1,
    Y,
    etas,
    lam,
    n_components,
    n_passes,
    phases="forward_backward",
    H2=None,
    H3=None,
    fit_intercept=True,
    n_threads=None,
):
    """Level-wise solution (eq 5.1) of the deep RKM "LS-SVM regression, KPCA, KPCA" with linear levels 2, 3.

    Levels of eq 4.18 in the row layout, solved in the order of eq 5.1 (forward L1, L2, L3, then backward
    L2, L1, repeated ``n_passes`` times; forward only with ``phases="forward"``)::

        L1: [ (1/eta1) K1 + (1/eta2) H2 H2^T + lam I   1 ; 1^T   0 ] [ H1 ; b^T ] = [ Y ; 0 ]
        L2: ( (1/eta2) H1 H1^T + (1/eta3) H3 H3^T ) H2 = H2 diag(eigenvalues2)   (top s2 eigenpairs)
        L3: ( (1/eta3) H2 H2^T ) H3 = H3 diag(eigenvalues3)                       (top s3 eigenpairs)

    L1 is a dense solve of the bordered (N + 1) x (N + 1) system; L2 takes unit eigenvectors from
    ``scipy.linalg.eigh``, each with its entry of largest magnitude positive, and returns eigenvalues
    <= 1e-12 max(1, largest) as 0 with a zero column. L3: the effective columns of H2 are orthonormal, so
    (1/eta3) H2 H2^T is 1/eta3 times the projector onto their span and its top eigenspace is degenerate;
    among its bases H3 = H2[:, :s3] is taken (the leading level-2 components, eigenvalue 1/eta3 each, 0
    for a zero column), which ``eigh`` would return only up to an arbitrary rotation.

    Parameters
    ----------
    K1 : ndarray of shape (N, N)
        Kernel matrix of the inputs, ``K1[i, j] = k1(x_i, x_j)``.
    Y : ndarray of shape (N, p)
        Targets.
    etas : tuple of float
        (eta1, eta2, eta3), positive: 1/eta2 and 1/eta3 weigh the fused linear kernels.
    lam : float
        Positive lambda1 of the regression level.
    n_components : tuple of int
        (s2, s3) with 1 <= s2 <= N - 1 (N without intercept: with it the columns of H2 are orthogonal to 1)
        and 1 <= s3 <= s2.
    n_passes : int
        Number of passes (>= 1).
    phases : {"forward_backward", "forward"}
    H2 : ndarray of shape (N, s2), default=None
        Initial level-2 features (zeros when None: the first L1 step is then the plain LS-SVM, eq 3.16).
    H3 : ndarray of shape (N, s3), default=None
        Initial level-3 features (zeros when None).
    fit_intercept : bool, default=True
        Whether L1 has the bias row and column.
    n_threads : int, default=None
        BLAS threads for the call (None: as they are; -1: all cores).

    Returns
    -------
    dict with
        ``H1`` (N, p), ``b`` (p,), ``H2`` (N, s2), ``H3`` (N, s3), ``eigenvalues2`` (s2,), ``eigenvalues3``
        (s3,), ``objective`` (float, J_deep of the final state) and ``history`` (list of (step name,
        J_deep after the step), step names "forward L1", ..., "backward L1").

    Notes
    -----
    J_deep is eq 4.13 with W1, W2, W3 eliminated by eq 4.15, linear phi2, phi3, and lam2, lam3 replaced by
    the diagonal Lambda2, Lambda3 of eq 4.18::

        J_deep = Tr(Y^T H1) - Tr(H1^T K1 H1) / (2 eta1) - (lam/2) ||H1||_F^2
                 - ||H1^T H2||_F^2 / (2 eta2) + (1/2) sum_k eigenvalues2[k] ||H2[:, k]||^2
                 - ||H2^T H3||_F^2 / (2 eta3) + (1/2) sum_k eigenvalues3[k] ||H3[:, k]||^2

    (the pairing's bias term b^T H1^T 1 is 0: H1^T 1 = 0 with an intercept, b = 0 without), which is the
    plan's J1 + Jbar2 + Jbar3. A level not solved yet counts with zero eigenvalues.
    """
    K1, Y, etas, lam, n_passes, phases, fit_intercept = _levelwise_arguments(
        K1, Y, etas, lam, n_passes, phases, fit_intercept
    )
    n, p = Y.shape
    s2, s3 = _pair_of_components(n_components, n - 1 if fit_intercept else n, "s2, s3")
    if s3 > s2:
        raise ValueError(f"n_components: s3 = {s3} must not exceed s2 = {s2} (level 3 has rank <= s2)")
    eta1, eta2, eta3 = etas
    state = dict(
        H1=np.zeros((n, p)),
        b=np.zeros(p),
        H2=_initial_hidden(H2, "H2", (n, s2)),
        H3=_initial_hidden(H3, "H3", (n, s3)),
        eigenvalues2=np.zeros(s2),
        eigenvalues3=np.zeros(s3),
    )

    def objective():
        H1, H2, H3 = state["H1"], state["H2"], state["H3"]
        return float(
            _regression_level(K1, H1, Y, eta1, lam)
            + _coupling(H1, H2, eta2)
            + _eigen_term(H2, state["eigenvalues2"])
            + _coupling(H2, H3, eta3)
            + _eigen_term(H3, state["eigenvalues3"])
        )

    def solve_level(level):
        if level == 1:
            A = K1 / eta1 + _linear_gram(state["H2"], eta2)
            A[np.diag_indices(n)] += lam
            state["H1"], state["b"] = _bordered_solve(A, Y, fit_intercept)
        elif level == 2:
            B = np.hstack([state["H1"] / np.sqrt(eta2), state["H3"] / np.sqrt(eta3)])
            state["eigenvalues2"], state["H2"] = _top_eigenpairs(B @ B.T, s2, B)
        else:
            H3 = state["H2"][:, :s3].copy()
            present = np.any(H3 != 0.0, axis=0)
            top = 1.0 / eta3
            # The zero rule of _top_eigenpairs, for the eigenvalue 1/eta3 of the projector's eigenspace.
            present &= top > _NEGLIGIBLE_EIGENVALUE * max(1.0, top)
            H3[:, ~present] = 0.0
            state["H3"], state["eigenvalues3"] = H3, np.where(present, top, 0.0)

    history = []
    with blas_threads(n_threads):
        for step, level in _schedule(n_passes, phases):
            solve_level(level)
            history.append((step, objective()))
    return dict(state, objective=history[-1][1], history=history)


def deep_levelwise_kpca_kpca_lssvm(
    K1,
    Y,
    etas,
    lam,
    n_components,
    n_passes,
    phases="forward_backward",
    H2=None,
    H3=None,
    fit_intercept=True,
    n_threads=None,
):
    """Level-wise solution (eq 5.1) of the deep RKM "KPCA, KPCA, LS-SVM regression" with linear levels 2, 3.

    Levels of eq 4.11 in the row layout, solved in the order of eq 5.1 (forward L1, L2, L3, then backward
    L2, L1, repeated ``n_passes`` times; forward only with ``phases="forward"``)::

        L1: ( (1/eta1) K1 + (1/eta2) H2 H2^T ) H1 = H1 diag(eigenvalues1)        (top s1 eigenpairs, uncentred)
        L2: ( (1/eta2) H1 H1^T + (1/eta3) H3 H3^T ) H2 = H2 diag(eigenvalues2)   (top s2 eigenpairs)
        L3: [ (1/eta3) H2 H2^T + lam I   1 ; 1^T   0 ] [ H3 ; b^T ] = [ Y ; 0 ]  (LS-SVM, linear kernel on h^(2))

    Eigenvectors are unit columns from ``scipy.linalg.eigh``, each with its entry of largest magnitude
    positive; eigenvalues <= 1e-12 max(1, largest) are returned as 0 with a zero column. L3 is a dense
    solve of the bordered (N + 1) x (N + 1) system (the printed "f1(Y, H2)" of eq 5.1 read as f3(Y, H2)).

    Parameters
    ----------
    K1 : ndarray of shape (N, N)
        Kernel matrix of the inputs.
    Y : ndarray of shape (N, p)
        Targets.
    etas : tuple of float
        (eta1, eta2, eta3), positive.
    lam : float
        Positive lambda3 of the regression level.
    n_components : tuple of int
        (s1, s2), each between 1 and N.
    n_passes : int
        Number of passes (>= 1).
    phases : {"forward_backward", "forward"}
    H2 : ndarray of shape (N, s2), default=None
        Initial level-2 features (zeros when None).
    H3 : ndarray of shape (N, p), default=None
        Initial level-3 features (zeros when None).
    fit_intercept : bool, default=True
        Whether L3 has the bias row and column.
    n_threads : int, default=None
        BLAS threads for the call (None: as they are; -1: all cores).

    Returns
    -------
    dict with
        ``H1`` (N, s1), ``H2`` (N, s2), ``H3`` (N, p), ``b`` (p,), ``eigenvalues1`` (s1,), ``eigenvalues2``
        (s2,), ``objective`` (float, J_deep of the final state) and ``history`` (list of (step name, J_deep
        after the step)).

    Notes
    -----
    J_deep is eq 4.6 with W1, W2, W3 eliminated by eq 4.8, linear phi2, phi3, and lam1, lam2 replaced by
    the diagonal Lambda1, Lambda2 of eq 4.11 (derived here; the plan of record gives no formula)::

        J_deep = -Tr(H1^T K1 H1) / (2 eta1) + (1/2) sum_k eigenvalues1[k] ||H1[:, k]||^2
                 - ||H1^T H2||_F^2 / (2 eta2) + (1/2) sum_k eigenvalues2[k] ||H2[:, k]||^2
                 + Tr(Y^T H3) - ||H2^T H3||_F^2 / (2 eta3) - (lam/2) ||H3||_F^2

    (the pairing's bias term b^T H3^T 1 is 0: H3^T 1 = 0 with an intercept, b = 0 without or before L3 is
    solved). A level not solved yet counts with zero eigenvalues.
    """
    K1, Y, etas, lam, n_passes, phases, fit_intercept = _levelwise_arguments(
        K1, Y, etas, lam, n_passes, phases, fit_intercept
    )
    n, p = Y.shape
    s1, s2 = _pair_of_components(n_components, n, "s1, s2")
    eta1, eta2, eta3 = etas
    state = dict(
        H1=np.zeros((n, s1)),
        H2=_initial_hidden(H2, "H2", (n, s2)),
        H3=_initial_hidden(H3, "H3", (n, p)),
        b=np.zeros(p),
        eigenvalues1=np.zeros(s1),
        eigenvalues2=np.zeros(s2),
    )

    def objective():
        H1, H2, H3 = state["H1"], state["H2"], state["H3"]
        return float(
            -0.5 * np.sum(H1 * (K1 @ H1)) / eta1
            + _eigen_term(H1, state["eigenvalues1"])
            + _coupling(H1, H2, eta2)
            + _eigen_term(H2, state["eigenvalues2"])
            + _regression_level(_linear_gram(H2, 1.0), H3, Y, eta3, lam)
        )

    def solve_level(level):
        if level == 1:
            A = K1 / eta1 + _linear_gram(state["H2"], eta2)
            state["eigenvalues1"], state["H1"] = _top_eigenpairs(A, s1)
        elif level == 2:
            B = np.hstack([state["H1"] / np.sqrt(eta2), state["H3"] / np.sqrt(eta3)])
            state["eigenvalues2"], state["H2"] = _top_eigenpairs(B @ B.T, s2, B)
        else:
            A = _linear_gram(state["H2"], eta3)
            A[np.diag_indices(n)] += lam
            state["H3"], state["b"] = _bordered_solve(A, Y, fit_intercept)

    history = []
    with blas_threads(n_threads):
        for step, level in _schedule(n_passes, phases):
            solve_level(level)
            history.append((step, objective()))
    return dict(state, objective=history[-1][1], history=history)
