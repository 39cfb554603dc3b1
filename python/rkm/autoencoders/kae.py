"""Kernel autoencoders: multi-layer KAE with decomposable operator-valued kernels, and K²AE on Gram matrices.

Equation, section and appendix numbers refer to P. Laforgue, S. Clémençon and F. d'Alché-Buc, "Autoencoding any
data through kernel autoencoders" (AISTATS 2019). Layer l = 1..L is a function f_l of a vector-valued RKHS with
the kernel k_l(x, x') A_l; by the representer theorem (Theorem 6) f_l = sum_i k_l(., x_i^(l-1)) A_l phi_{l,i},
so with X^(0) = X, K_l = k_l(X^(l-1), X^(l-1)) and X^(l) = K_l Phi_l A_l the model minimizes (eq. 4)

    ||X - X^(L)||_F^2 / n + sum_l lambda_l ||f_l||^2,    ||f_l||^2 = Tr(Phi_l^T K_l Phi_l A_l)  (eq. 10),

over the coefficient matrices Phi_l; by default the last layer is solved by kernel ridge regression inside every
evaluation (``last_layer="ridge"``) and the optimizer moves the hidden layers. The objective and gradient come
from the core (``rkm._core.kae_loss_and_grad``), by reverse mode (``gradient="adjoint"``, O(n^2 sum_l d_l)) or by
the paper's Jacobian recursions of Appendix B (``gradient="jacobian"``, O(n^3 L^2 p^3));
:func:`rkm.reference.kae_loss_and_grad` is their NumPy twin.

K²AE (``kernel="precomputed"``, §2.5, §4.3, Algorithm 1): the input is a Gram matrix K_in of any data, the first
layer uses K_1 = K_in and the last one maps back into the input's RKHS. That layer is the kernel ridge regression
of eq. 13, solved exactly at every evaluation, so the optimizer sees the objective minimized over it (its gradient
is eq. 14 with N_L of eq. 54: Algorithm 1 with N_L refreshed after every step); test distortions come from Gram
blocks alone (Appendix B.7).
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from scipy import linalg
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin, _fit_context
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import StrOptions
from sklearn.utils.validation import check_is_fitted, validate_data

from rkm import _core
from rkm._utils.optimize import minimize_objective
from rkm._utils.progress import Progress
from rkm._utils.threads import blas_threads
from rkm._utils.validation import (
    N_THREADS,
    NONNEGATIVE,
    PER_LEVEL,
    POSITIVE_INT,
    RANDOM_STATE,
    VERBOSE,
    check_choices,
    check_matrix,
    check_nonnegative,
    kernel_constraints,
    kernel_name_options,
)
from rkm._utils.warn import warn
from rkm.exceptions import ConvergenceWarning, DivergenceError
from rkm.kernels import Kernel, kernel_matrix, kernel_spec, names_with

__all__ = ["KernelAutoencoder"]

LAYER_KERNELS = names_with("layer_derivatives")
# Armijo's sufficient-decrease constant and the memory of the non-monotone Barzilai-Borwein safeguard.
_ARMIJO = 1e-4
_BB_MEMORY = 10
_MAX_BACKTRACKS = 60
# L-BFGS iterations spent on one layer in each sweep of layer-wise updates.
_LAYERWISE_INNER = 5
# The preconditioner's floor: (K_l + delta I)^(-1/2) with delta this fraction of K_l's largest eigenvalue.
_WHITENING_FLOOR = 1e-8
# A stop is a minimum when the relative gradient ||g|| ||theta_0|| / scale (the first-order change of the objective,
# in units of its scale, for a move as large as the start) is at most this; above it, a plateau.
_STATIONARY = 3e-2
# Appended to the error of a diverging L-BFGS run (the fit turns it into a ConvergenceWarning).
_DIVERGENCE_ADVICE = (
    "use a larger lam or a smaller gamma (the kernels' arguments grow with the codes), or scale the data down"
)


# --------------------------------------------------------------------------------------------------------------
# argument checks
# --------------------------------------------------------------------------------------------------------------


def _hidden_layer_sizes(sizes):
    valid = (
        isinstance(sizes, (tuple, list))
        and len(sizes) > 0
        and all(isinstance(s, numbers.Integral) and not isinstance(s, bool) and s > 0 for s in sizes)
    )
    if not valid:
        raise ValueError(f"hidden_layer_sizes: must be a non-empty sequence of positive ints, got {sizes!r}")
    return tuple(int(s) for s in sizes)


def _per_layer(value, name, n_layers):
    """A per-layer parameter: one value for all layers, or a list/tuple of n_layers values."""
    if isinstance(value, (list, tuple)):
        if len(value) != n_layers:
            raise ValueError(f"{name}: must be one value or {n_layers} values (one per layer), got {value!r}")
        return list(value)
    return [value] * n_layers


def _is_precomputed(kernel):
    first = kernel[0] if isinstance(kernel, (list, tuple)) and kernel else kernel
    return isinstance(first, str) and first == "precomputed"


def _check_symmetric_psd(A, what, rtol):
    """Raise ValueError (`what` leading the message) unless A is symmetric and PSD to rtol of its largest entry."""
    scale = max(np.abs(A).max(), 1e-300)
    if np.abs(A - A.T).max() > rtol * scale:
        raise ValueError(f"{what} must be symmetric")
    smallest = np.linalg.eigvalsh(A)[0]
    if smallest < -rtol * scale:
        raise ValueError(f"{what} must be positive semidefinite, its smallest eigenvalue is {smallest:.3g}")


def _inputs(X, precomputed, name="X", copy=False):
    """X as a finite float64 array with at least 2 samples (scikit-learn's checks and messages); a Gram matrix
    must also be square, symmetric and PSD (to 1e-8 of its largest entry: rounding of real Gram matrices).
    copy=True for the array a fit keeps (the caller may change X afterwards)."""
    A = check_matrix(X, name, min_samples=2, copy=copy).astype(np.float64, copy=False)
    if precomputed:
        if A.shape[0] != A.shape[1]:
            raise ValueError(f"{name}: a precomputed Gram matrix must be square, got shape {A.shape}")
        _check_symmetric_psd(A, f"{name}: a precomputed Gram matrix", 1e-8)
    return A


def _operator(A, size, index):
    if A is None:
        return None
    A = np.asarray(A)
    if A.dtype.kind not in "biuf" or A.shape != (size, size):
        raise ValueError(f"operators: entry {index} must be a real ({size}, {size}) array or None, got {A!r:.60}")
    A = A.astype(np.float64)
    if not np.all(np.isfinite(A)):
        raise ValueError(f"operators: entry {index} contains NaN or infinity")
    _check_symmetric_psd(A, f"operators: entry {index}", 1e-12)
    return A


def _times(B, A):
    return B if A is None else B @ A


def _times_left(P, B):
    return B if P is None else P @ B


class _Spectral:
    """V diag(scale) V^T as a product (`@`), from eigenvectors V that P_l and P_l^-1 share (one n x n array)."""

    def __init__(self, vectors, scale):
        self.vectors, self.scale = vectors, scale

    def __matmul__(self, B):
        return self.vectors @ (self.scale[:, None] * (self.vectors.T @ B))


# --------------------------------------------------------------------------------------------------------------
# optimizers
# --------------------------------------------------------------------------------------------------------------


class _Tracked:
    """Wraps fun(theta) -> (f, grad): a non-finite point or value becomes +inf (a rejected trial), and the best
    finite point is remembered, so that a diverging optimizer still leaves a usable iterate."""

    def __init__(self, fun):
        self.fun, self.best_f, self.best_theta = fun, np.inf, None

    def __call__(self, theta):
        if not np.all(np.isfinite(theta)):
            return np.inf, np.zeros_like(theta)
        f, grad = self.fun(theta)
        if not (np.isfinite(f) and np.all(np.isfinite(grad))):
            return np.inf, np.zeros_like(theta)
        if f < self.best_f:
            self.best_f, self.best_theta = f, theta.copy()
        return f, grad


def _stalled(curve, threshold, patience):
    """Whether the best objective so far fell by less than `threshold` per iteration, on average, over the last
    `patience` iterations (an increase, which non-monotone steps allow, counts as no decrease)."""
    if len(curve) <= patience:
        return False
    best = np.minimum.accumulate(np.asarray(curve, dtype=np.float64))
    return bool(best[-patience - 1] - best[-1] < threshold * patience)


def _decrease_rate(curve, patience):
    """Mean decrease per iteration of the best objective so far over the last `patience` iterations (or all)."""
    best = np.minimum.accumulate(np.asarray(curve, dtype=np.float64))
    window = min(patience, len(best) - 1)
    return float(best[-window - 1] - best[-1]) / window if window > 0 else 0.0


def _objective_scale(X, precomputed):
    """The scale the stopping rule measures the objective against: the data's total variance
    mean_i ||x_i - mean(x)||^2 (the distortion of the best constant reconstruction), in the input's RKHS for
    K²AE (trace of the centred Gram matrix / n). 1 for data without variance."""
    if precomputed:
        scale = np.trace(X) / X.shape[0] - X.sum() / X.shape[0] ** 2
    else:
        scale = X.var(axis=0).sum()
    return float(scale) if scale > 0 else 1.0


class _Descent:
    """Gradient descent on one block of variables: Armijo backtracking (the trial step doubles after each accepted
    one) or Barzilai-Borwein steps (BB1 and BB2 alternating) with a non-monotone Armijo safeguard."""

    def __init__(self, step):
        self.step, self.t, self.history, self.previous, self.count = step, None, [], None, 0

    def _trial_step(self, theta, grad):
        if self.t is None:  # a first step that moves the largest entry by about 1e-3 of the largest coefficient
            self.t = 1e-3 * max(np.abs(theta).max(), 1.0) / max(np.abs(grad).max(), 1e-300)
        if self.step == "bb" and self.previous is not None:
            s, y = theta - self.previous[0], grad - self.previous[1]
            sy = float(s @ y)
            if sy > 0:
                self.t = float(s @ s) / sy if self.count % 2 == 0 else sy / float(y @ y)
        return self.t

    def iterate(self, fun, theta, f, grad):
        """One accepted step from theta (value f, gradient grad); returns (theta, f, grad, accepted)."""
        t = self._trial_step(theta, grad)
        reference = max(self.history[-_BB_MEMORY:] + [f]) if self.step == "bb" else f
        squared = float(grad @ grad)
        for _ in range(_MAX_BACKTRACKS):
            candidate = theta - t * grad
            f_new, g_new = fun(candidate)
            if f_new <= reference - _ARMIJO * t * squared:
                # Copies: theta and grad may be views of the caller's arrays, which the caller updates in place.
                self.previous, self.count = (theta.copy(), grad.copy()), self.count + 1
                self.history.append(f_new)
                self.t = 2.0 * t if self.step == "armijo" else t
                return candidate, f_new, g_new, True
            t *= 0.5
        self.t = t
        return theta, f, grad, False


@dataclass
class _Setup:
    """A fit's resolved settings and the arrays the core evaluates its loss from.

    sizes are d_0..d_L (None for an RKHS); specs the L layer kernels (the first ("precomputed", None, None, None)
    for K²AE); operators one per layer with coefficients. With `solved` the last layer is the kernel ridge
    regression of eq. 13, done inside every evaluation: the core then takes the first layer's Gram matrix (K_in,
    or k_1(X, X)) and the outputs (K²AE: their inner products K_in; a finite-dimensional KAE: X itself, so that the
    core solves for X's d_0 columns rather than an n x n right-hand side), and the optimizer sees
    Phi_1..Phi_{L-1}."""

    X: np.ndarray
    sizes: list
    specs: list
    operators: list
    lam: list
    precomputed: bool
    solved: bool
    n_threads: object = None

    def __post_init__(self):
        self.n_optimized = len(self.sizes) - 2 if self.solved else len(self.sizes) - 1
        self.scale = _objective_scale(self.X, self.precomputed)
        self.core_input, self.output_features = self.X, None
        if self.solved and not self.precomputed:
            name, gamma, degree, coef0 = self.specs[0]
            self.core_input = kernel_matrix(
                self.X, kernel=name, gamma=gamma, degree=degree, coef0=coef0, n_threads=self.n_threads
            )
            self.output_features = self.X

    def evaluate(self, coefficients, gradient):
        """(loss, grads, terms) of the optimized coefficients from the core."""
        kernels = self.specs[1:] if self.solved else self.specs
        # The core runs single-threaded BLAS products on each of its own OpenMP threads.
        with blas_threads(1):
            return _core.kae_loss_and_grad(
                self.core_input,
                coefficients,
                kernels,
                self.operators[: self.n_optimized],
                self.lam,
                self.solved,
                gradient,
                self.n_threads,
                output_features=self.output_features,
            )


# --------------------------------------------------------------------------------------------------------------
# estimator
# --------------------------------------------------------------------------------------------------------------


class KernelAutoencoder(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Multi-layer kernel autoencoder (KAE), or K²AE on a precomputed Gram matrix.

    Parameters
    ----------
    hidden_layer_sizes : list or tuple of int, default=(1,)
        Sizes d_1, ..., d_{L-1} of the hidden layers; L = len(hidden_layer_sizes) + 1 layers (the last one maps
        back to the input space).
    kernel : str, Kernel, or a list or tuple of L of them, default="rbf"
        Scalar kernel of every layer, or one per layer: "rbf", "poly", "linear" or an :class:`rkm.kernels.Kernel`
        of these kinds. "precomputed" (alone, or as the first entry) makes a K²AE: `X` is then the Gram matrix
        K_in of the training data and the later layers default to "rbf".
    gamma : float, None, or a list or tuple of L of them, default=None
        Kernel parameter of every layer, or one per layer. None: 1 / (d_0 Var(X)) for layer 1, 1 / d_{l-1} for
        later layers (the initialization gives every hidden layer unit variance), rather than the 1 / n_features
        of the other models, which would ignore the scale of the data that the first layer sees.
    degree : float or a list or tuple of L of them, default=3
        Degree of "poly" layers, one for all or one per layer (a non-negative integer: codes take both signs).
    coef0 : float or a list or tuple of L of them, default=1.0
        Constant of "poly" layers, one for all or one per layer.
    operators : list or tuple of (array or None), or None, default=None
        The PSD matrices A_l of the decomposable operator-valued kernels k_l(x, x') A_l, one per layer with
        coefficients (L for KAE, L - 1 for K²AE, whose last layer uses the identity); None (or None entries):
        identities.
    lam : float or a list or tuple of L of them, default=1e-3
        lambda_l >= 0 of eq. 4, one for all layers or one per layer; lambda_L is the ridge penalty of the last
        layer when it is solved. Smaller than the LS-SVM's default of 1: each lambda_l weighs a layer's RKHS norm
        against the mean squared reconstruction error per sample, and the paper's experiments use 1e-4 to 1e-2.
    last_layer : {"ridge", "gradient"}, default="ridge"
        "ridge": the last layer (A_L = identity) is the kernel ridge regression of eq. 13 onto X, solved inside
        every evaluation, and the optimizer moves the hidden layers only (Algorithm 1's scheme, which K²AE always
        uses; its gradient is eq. 14). "gradient": Phi_L is learned with the others (§4.2), as the paper does for
        finite-dimensional outputs. Eliminating Phi_L makes the problem much better conditioned: on 300 points of
        three circles (gamma (2, 4), lam 1e-3, seed 0) 300 L-BFGS iterations take the objective from 0.2423 to
        0.1165 with "ridge" and to 0.2383 with "gradient" from the same start.
    gradient : {"adjoint", "jacobian"}, default="adjoint"
        Reverse-mode gradient, or the paper's Jacobian recursions (the same values, O(n^3) slower: for checks).
    solver : {"lbfgs", "gd"}, default="lbfgs"
        scipy's L-BFGS-B, or gradient descent with the steps of `step`. The model has no "auto": L-BFGS is the
        better choice wherever the objective is smooth, gradient descent the paper's reference.
    step : {"armijo", "bb"}, default="armijo"
        Gradient-descent steps: Armijo backtracking, or Barzilai-Borwein with a non-monotone safeguard.
    update : {"joint", "layerwise"}, default="joint"
        Update all coefficients together, or sweep over the layers one at a time (Algorithm 1's inner loop).
        Layer-wise, one iteration is a sweep: one gradient step per layer ("gd") or a few L-BFGS iterations.
    preconditioner : {"rkhs", None}, default="rkhs"
        "rkhs": once `tol`'s rule stops the optimizer in the coefficients Phi_l, it continues (same rule, the
        rest of max_iter) in the whitened coordinates Psi_l = (K_l + delta I)^(1/2) Phi_l (delta = 1e-8 of K_l's
        largest eigenvalue; K_l at the starting codes, exact for layer 1): the coordinates of f_l in an
        orthonormal basis of its RKHS span, where the objective's curvature no longer carries the square of K_l's
        condition number. The first phase, in the paper's parametrization, finds the basin; the second brings the
        gradient down in a few dozen iterations. On 300 standardized points of the circles (seeds 0 and 1, gammas
        (0.5, 1), lam 1e-3) the two phases stopped after 195 and 210 iterations at objectives 0.48017 and
        0.50011, where L-BFGS in Phi alone was at 0.4887 and 0.5036 after 200 iterations and at 0.48018 and
        0.50006 after 3000; started in Psi from the beginning, L-BFGS converged within 100 iterations but, on 3 of
        5 seeds, in a worse minimum (0.5435 on seed 1). None: Phi only (the paper's parametrization).
    max_iter : int, default=1000
        Most iterations (sweeps when layer-wise). Not None, unlike the models whose solver picks a budget: the
        fit always stops by its own rule (`tol`) or at this count (with a ConvergenceWarning).
    tol : float, default=1e-5
        Stopping rule, relative to the objective's scale s = the data's total variance mean_i ||x_i - mean||^2
        (the distortion of the best constant reconstruction; for K²AE the trace of the centred K_in over n): the
        fit stops when the best objective so far fell by less than tol * s per iteration, on average, over the
        last `n_iter_no_change` iterations (sweeps), whatever the solver. The stop is a minimum (``status_ ==
        "converged"``) when the relative gradient ``gradient_ratio_`` is at most 3e-2; otherwise it is a plateau
        (``status_ == "plateau"``) and the fit warns (ConvergenceWarning), as it does at max_iter. 0 never
        declares convergence. With the defaults, every fit of a 2-1-2 KAE converged on section 5.1's sets (three
        circles, three clusters, two moons; 300 standardized points, seeds 0-4, and 150 raw points, seeds 0-2):
        98 to 352 iterations, relative gradients 4e-4 to 7e-3; the former defaults (tol 1e-7 relative to the
        objective itself, max_iter 200) stopped each of the 9 fits on 300 points, seeds 0-2, at max_iter.
    n_iter_no_change : int, default=10
        The window of `tol`'s rule.
    init : {"random", "kpca"}, default="random"
        Starting coefficients. "random": Gaussian hidden coefficients scaled to unit-variance codes (seeded by
        `random_state`). "kpca": layer 1 starts at the kernel PCA map of K_1 (§3.2.1). Either way the last KAE
        layer starts at the kernel ridge regression of X on the previous layer's codes.
    code_layer : int or None, default=None
        The hidden layer (1..L-1) that :meth:`transform` returns; None: the smallest one (the first on ties).
    random_state : int, RandomState or None, default=None
        Seeds the random starting coefficients.
    n_threads : int or None, default=None
        Threads of the core (None: OpenMP's default; -1: all cores).
    verbose : int, default=0
        1 prints the fit's stages, 2 also the objective at every iteration (sweep).

    Attributes
    ----------
    coefficients_ : list of ndarray
        Phi_1, ..., Phi_L (the last one solved or learned per `last_layer`; K²AE: Phi_1, ..., Phi_{L-1}, its last
        layer is given by `ridge_inverse_`).
    representations_ : list
        The training codes X^(0), ..., X^(L-1) (X^(0) is None for K²AE): the supports of the layers.
    objective_ : float
        The final objective of eq. 4 (eq. 5 for K²AE).
    terms_ : ndarray of shape (L + 1,)
        Its terms [distortion, ||f_1||^2, ..., ||f_L||^2].
    objective_history_ : list of float
        The objective at the start and after every iteration (sweep).
    n_iter_ : int
        Iterations (sweeps) run, both phases of ``preconditioner="rkhs"`` together (at most max_iter).
    status_ : {"converged", "plateau", "max_iter", "diverged"}
        Why the fit stopped: `tol`'s rule at a minimum; `tol`'s rule (or no step decreasing the objective) with a
        relative gradient above 3e-2; the iteration cap; a non-finite objective (the best iterate is kept). All
        but "converged" warn.
    converged_ : bool
        ``status_ == "converged"``.
    gradient_ratio_ : float
        ||g|| ||Psi_0|| / s at the end: the gradient with respect to the whitened coordinates Psi_l of
        `preconditioner` (whichever coordinates the optimizer used) times the norm of their start, over the
        objective's scale s of `tol`: the first-order change of the objective, in units of s, for a move of the
        layer functions as large as their start.
    gamma_ : tuple
        The kernel parameter of each layer (None for linear layers and K²AE's first layer).
    lam_ : list of float
        lambda_l of each layer.
    hidden_layer_sizes_ : tuple of int
        d_1, ..., d_{L-1}.
    code_layer_, n_layers_, n_features_in_ : int
    ridge_inverse_, ridge_gram_ : ndarray (K²AE only)
        (K_L + n lambda_L I)^-1 (the pseudo-inverse of K_L when lambda_L = 0) and N_L of eq. 54.
    diag_mean_ : float (K²AE only)
        Mean of the training Gram matrix's diagonal: the k(x, x) that :meth:`score` and
        :meth:`reconstruction_error` take for test points when `diag` is not given.

    Examples
    --------
    >>> import numpy as np
    >>> from rkm import KernelAutoencoder
    >>> X = np.random.default_rng(0).standard_normal((40, 2))
    >>> model = KernelAutoencoder((1,), random_state=0).fit(X)
    >>> model.status_, model.transform(X).shape, model.inverse_transform(model.transform(X)).shape
    ('converged', (40, 1), (40, 2))
    >>> model.get_feature_names_out()
    array(['kernelautoencoder0'], dtype=object)
    """

    _parameter_constraints: dict = {
        "hidden_layer_sizes": PER_LEVEL,
        **kernel_constraints(precomputed=True, per_level=True),
        # The layer kernels: those of LAYER_KERNELS by name, "precomputed" for K²AE's first layer.
        "kernel": [
            kernel_name_options(LAYER_KERNELS, precomputed=True),
            Kernel,
            *PER_LEVEL,
        ],
        "operators": [None, *PER_LEVEL],
        "lam": [*NONNEGATIVE, *PER_LEVEL],
        "last_layer": [StrOptions({"ridge", "gradient"})],
        "gradient": [StrOptions({"adjoint", "jacobian"})],
        "solver": [StrOptions({"lbfgs", "gd"})],
        "step": [StrOptions({"armijo", "bb"})],
        "update": [StrOptions({"joint", "layerwise"})],
        "preconditioner": [StrOptions({"rkhs"}), None],
        "max_iter": POSITIVE_INT,
        "tol": NONNEGATIVE,
        "n_iter_no_change": POSITIVE_INT,
        "init": [StrOptions({"random", "kpca"})],
        "code_layer": [None, *POSITIVE_INT],
        "random_state": RANDOM_STATE,
        "n_threads": N_THREADS,
        "verbose": VERBOSE,
    }

    def __init__(
        self,
        hidden_layer_sizes: list | tuple = (1,),
        *,
        kernel="rbf",
        gamma: float | None | list | tuple = None,
        degree: float | list | tuple = 3,
        coef0: float | list | tuple = 1.0,
        operators: list | tuple | None = None,
        lam: float | list | tuple = 1e-3,
        last_layer: str = "ridge",
        gradient: str = "adjoint",
        solver: str = "lbfgs",
        step: str = "armijo",
        update: str = "joint",
        preconditioner: str | None = "rkhs",
        max_iter: int = 1000,
        tol: float = 1e-5,
        n_iter_no_change: int = 10,
        init: str = "random",
        code_layer: int | None = None,
        random_state=None,
        n_threads: int | None = None,
        verbose: int = 0,
    ):
        self.hidden_layer_sizes = hidden_layer_sizes
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.operators = operators
        self.lam = lam
        self.last_layer = last_layer
        self.gradient = gradient
        self.solver = solver
        self.step = step
        self.update = update
        self.preconditioner = preconditioner
        self.max_iter = max_iter
        self.tol = tol
        self.n_iter_no_change = n_iter_no_change
        self.init = init
        self.code_layer = code_layer
        self.random_state = random_state
        self.n_threads = n_threads
        self.verbose = verbose

    # ---- configuration -------------------------------------------------------------------------------------

    def _layer_kernels(self, X, sizes, precomputed):
        """(name, gamma, degree, coef0) per layer; the first is ("precomputed", None, None, None) for K²AE."""
        n_layers = len(sizes) - 1
        kernels = _per_layer(self.kernel, "kernel", n_layers)
        if precomputed and not isinstance(self.kernel, (list, tuple)):
            kernels = ["precomputed"] + ["rbf"] * (n_layers - 1)
        gammas = _per_layer(self.gamma, "gamma", n_layers)
        degrees = _per_layer(self.degree, "degree", n_layers)
        coef0s = _per_layer(self.coef0, "coef0", n_layers)
        specs = []
        for layer, (kernel, gamma, degree, coef0) in enumerate(zip(kernels, gammas, degrees, coef0s)):
            if layer == 0 and precomputed:
                specs.append(("precomputed", None, None, None))
                continue
            if isinstance(kernel, str) and kernel == "precomputed":
                raise ValueError("kernel: only the first layer can be 'precomputed'")
            if gamma is None and not isinstance(kernel, Kernel):
                variance = float(X.var()) if layer == 0 else 1.0
                gamma = 1.0 / (sizes[layer] * (variance if variance > 0 else 1.0))
            try:
                specs.append(kernel_spec(kernel, gamma, degree, coef0, sizes[layer], allowed=LAYER_KERNELS))
            except ValueError as error:
                raise ValueError(f"{error} (layer {layer + 1})") from None
            name, _, degree, _ = specs[-1]
            if name == "poly" and not float(degree).is_integer():
                raise ValueError(f"degree: must be a non-negative integer for a poly layer, got {degree!r}")
        return specs

    def _check_params_vs_input(self, X):
        """The rules that need the data or tie parameters together, and the layer settings they resolve.

        Checks the entries of the per-layer sequences (hidden_layer_sizes; kernel, gamma, degree, coef0, lam: one
        value or one per layer), the operators' shapes (from X's width) and PSD-ness, the last layer that ridge
        regression can solve, and code_layer against the hidden layers. X is the validated data (or K_in).

        Returns
        -------
        _Setup
        """
        hidden = _hidden_layer_sizes(self.hidden_layer_sizes)
        precomputed = _is_precomputed(self.kernel)
        # sizes[l] is d_l; K²AE's input and output live in an RKHS and have no size (None).
        sizes = [None if precomputed else X.shape[1], *hidden, None if precomputed else X.shape[1]]
        n_layers = len(hidden) + 1
        specs = self._layer_kernels(X, sizes, precomputed)
        n_coefficients = n_layers - precomputed
        operators = [None] * n_coefficients if self.operators is None else self.operators
        if len(operators) != n_coefficients:
            raise ValueError(
                f"operators: must be None or a list of {n_coefficients} arrays or None (one per layer "
                f"with coefficients), got {self.operators!r:.80}"
            )
        operators = [_operator(A, sizes[layer + 1], layer) for layer, A in enumerate(operators)]
        lam = [check_nonnegative(value, "lam") for value in _per_layer(self.lam, "lam", n_layers)]
        solved = precomputed or self.last_layer == "ridge"
        if solved and lam[-1] == 0 and specs[-1][0] == "rbf":
            # An rbf K_L has full rank: without a penalty the regression reproduces every training point.
            raise ValueError("lam: a last layer solved by ridge regression needs lambda_L > 0 with an rbf kernel")
        if solved and not precomputed and operators[-1] is not None:
            raise ValueError(
                "operators: the last layer solved by ridge regression uses A_L = identity; set "
                "last_layer='gradient' to learn it with a PSD A_L"
            )
        if self.code_layer is not None and self.code_layer > len(hidden):
            raise ValueError(f"code_layer: must be a hidden layer, 1..{len(hidden)}, got {self.code_layer}")
        return _Setup(X, sizes, specs, operators, lam, precomputed, solved, n_threads=self.n_threads)

    def _configuration(self, X, copy=False):
        """Validated data and resolved layer settings, as a _Setup (the parameters' own checks done before);
        copy=True for a fit, which keeps the data."""
        return self._check_params_vs_input(_inputs(X, _is_precomputed(self.kernel), copy=copy))

    # ---- initialization ------------------------------------------------------------------------------------

    def _gram(self, Z, spec, Y=None):
        name, gamma, degree, coef0 = spec
        return kernel_matrix(Z, Y, kernel=name, gamma=gamma, degree=degree, coef0=coef0, n_threads=self.n_threads)

    def _initial_coefficients(self, setup):
        """Starting Phi_l of the optimized layers: hidden layers scaled to unit-variance codes and, when the last
        layer is learned, its kernel ridge regression onto X."""
        rng = check_random_state(self.random_state)
        X, sizes, specs, operators = setup.X, setup.sizes, setup.specs, setup.operators
        coefficients, codes = [], X
        for layer in range(len(sizes) - 2):  # the hidden layers
            K = X if (setup.precomputed and layer == 0) else self._gram(codes, specs[layer])
            if self.init == "kpca" and layer == 0:
                values, vectors = np.linalg.eigh(K)
                top = np.argsort(values)[::-1][: sizes[1]]
                Phi = vectors[:, top] / np.sqrt(np.maximum(values[top], values[top].max() * 1e-12))
            else:
                Phi = rng.standard_normal((X.shape[0], sizes[layer + 1]))
            new_codes = K @ _times(Phi, operators[layer])
            scale = np.sqrt(np.mean(new_codes.var(axis=0)))
            if not scale > 0:
                raise ValueError(
                    f"X: the codes of layer {layer + 1} are constant at the start; check the kernels' parameters"
                )
            coefficients.append(Phi / scale)
            codes = new_codes / scale
        if not setup.solved:
            coefficients.append(self._ridge_last_layer(X, codes, specs[-1], setup.lam[-1], operators[-1]))
        return coefficients

    def _ridge_last_layer(self, X, codes, spec, penalty, A=None):
        """Phi_L of the kernel ridge regression of X on the codes of layer L - 1 (eq. 13, with A_L)."""
        n = X.shape[0]
        K = self._gram(codes, spec)
        target = X if A is None else X @ np.linalg.pinv(A)
        if penalty > 0:
            return linalg.solve(K + n * penalty * np.eye(n), target, assume_a="pos")
        return linalg.lstsq(K, target)[0]

    # ---- optimization --------------------------------------------------------------------------------------

    def _whitening(self, setup, coefficients):
        """(P_l, P_l^-1) for each optimized layer, P_l = (K_l + delta I)^(-1/2) with K_l the layer's Gram matrix
        at the starting codes (exact for layer 1, whose K_1 is fixed). The preconditioner="rkhs" optimizer moves
        in these coordinates; every fit measures its final gradient in them.

        The optimizer moves Psi_l = P_l^-1 Phi_l: for layer 1, ||f_1||^2 = Tr(Psi^T P K_1 P Psi) ~ ||Psi||_F^2, the
        coordinates of f_1 in an orthonormal basis of its RKHS span, where the objective's curvature no longer
        carries the square of K_1's condition number."""
        pairs, codes = [], setup.X
        for layer in range(setup.n_optimized):
            if layer == 0 and (setup.precomputed or setup.solved):
                K = setup.core_input
            else:
                K = self._gram(codes, setup.specs[layer])
            if np.all(np.isfinite(K)):
                values, vectors = np.linalg.eigh(K)
                values = np.maximum(values, 0.0)
                root = np.sqrt(values + _WHITENING_FLOOR * max(values[-1], np.finfo(np.float64).tiny))
                pairs.append((_Spectral(vectors, 1.0 / root), _Spectral(vectors, root)))
            else:  # a Gram matrix that overflows at the start: this layer keeps its own coordinates
                pairs.append((None, None))
            codes = K @ _times(coefficients[layer], setup.operators[layer])
        return pairs

    def _minimize(self, objective, theta0, blocks, threshold, max_iter):
        """Minimize objective(theta) -> (f, grad) from theta0; returns (theta, objective history, n_iter, end),
        end being "stopped" (the stopping rule, or no step decreased the objective), "max_iter" or "diverged".

        The result is the best point evaluated: non-monotone steps and a diverging run cannot lose it."""
        tracked = _Tracked(objective)
        curve = [tracked(theta0)[0]]
        if not np.isfinite(curve[0]):
            raise ValueError("X: the objective is not finite at the starting point; check the kernels' parameters")

        def rule(history):
            return _stalled(history, threshold, self.n_iter_no_change)

        try:
            if self.update == "joint" and self.solver == "lbfgs":
                result = self._lbfgs(tracked, theta0, max_iter, stop=rule)
                curve.extend(result.history[1:])
                n_iter = result.nit
                end = "max_iter" if not result.converged and n_iter >= max_iter else "stopped"
            elif self.update == "joint":
                n_iter, end = self._descent(tracked, theta0, curve, [slice(0, theta0.size)], rule, max_iter)
            else:
                n_iter, end = self._sweeps(tracked, theta0, curve, blocks, rule, max_iter)
        except DivergenceError as error:
            warn(
                f"KernelAutoencoder: the optimizer diverged ({error}); the best iterate (objective "
                f"{tracked.best_f:.6g}) is kept",
                ConvergenceWarning,
            )
            n_iter, end = len(curve) - 1, "diverged"
        return tracked.best_theta, [float(f) for f in curve], n_iter, end

    def _lbfgs(self, fun, theta0, max_iter, stop=None):
        def watch(history):  # a progress line per iteration; then the caller's stopping rule, if any
            self._progress(f"L-BFGS iteration {len(history) - 1:4d}  objective {history[-1]: .10e}", level=2)
            return stop is not None and stop(history)

        # scipy's own relative-decrease test divides by max(|f|, 1), an absolute test for objectives below 1:
        # it is switched off (ftol = eps) in favour of _stalled's.
        return minimize_objective(
            fun,
            theta0,
            n_eigen=0,
            max_iter=max_iter,
            tol=1e-12,
            ftol=np.finfo(np.float64).eps,
            stop=watch,
            verbose=0,
            advice=_DIVERGENCE_ADVICE,
        )

    def _descent(self, tracked, theta0, curve, blocks, rule, max_iter):
        """Gradient descent, on all variables (one block) or block by block (layer-wise sweeps)."""
        steppers = [_Descent(self.step) for _ in blocks]
        theta = theta0.copy()
        f, grad = tracked(theta)
        for iteration in range(1, max_iter + 1):
            moved = False
            for block, stepper in zip(blocks, steppers):

                def restricted(values, block=block):
                    trial = theta.copy()
                    trial[block] = values
                    value, full = tracked(trial)
                    return value, full[block]

                part, f, part_grad, accepted = stepper.iterate(restricted, theta[block], f, grad[block])
                if accepted:
                    theta[block] = part
                    f, grad = tracked(theta)
                moved |= accepted
            curve.append(float(f))
            self._progress(f"gradient descent iteration {iteration:4d}  objective {f: .10e}", level=2)
            if not moved or rule(curve):
                return iteration, "stopped"
        return max_iter, "max_iter"

    def _sweeps(self, tracked, theta0, curve, blocks, rule, max_iter):
        if self.solver == "gd":
            return self._descent(tracked, theta0, curve, blocks, rule, max_iter)
        theta = theta0.copy()
        for sweep in range(1, max_iter + 1):
            for block in blocks:

                def restricted(values, block=block):
                    trial = theta.copy()
                    trial[block] = values
                    value, full = tracked(trial)
                    return value, full[block]

                theta[block] = self._lbfgs(restricted, theta[block], _LAYERWISE_INNER).theta
            curve.append(float(tracked(theta)[0]))
            self._progress(f"layer-wise sweep {sweep:4d}  objective {curve[-1]: .10e}", level=2)
            if rule(curve):
                return sweep, "stopped"
        return max_iter, "max_iter"

    # ---- fit -----------------------------------------------------------------------------------------------

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: ArrayLike, y: None = None) -> KernelAutoencoder:
        """Fit the autoencoder to X, or to the Gram matrix K_in for K²AE.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), or (n_samples, n_samples) for K²AE
            Training data, or K_in (square, symmetric, positive semidefinite) with ``kernel="precomputed"``.
            Copied: changing X after the fit leaves the model as it is.
        y : None
            Ignored.

        Returns
        -------
        self : KernelAutoencoder
            The fitted autoencoder.
        """
        self._progress = Progress(type(self).__name__, self.verbose)
        setup = self._configuration(X, copy=True)
        validate_data(self, setup.X, dtype=np.float64, order="C", ensure_min_samples=2)  # sets n_features_in_
        start = self._initial_coefficients(setup)
        whitening = self._whitening(setup, start)
        shapes = [P.shape for P in start]
        bounds = np.cumsum([0] + [P.size for P in start])
        blocks = [slice(a, b) for a, b in zip(bounds[:-1], bounds[1:])]

        def coordinates(pairs):
            """(unpack, objective) for the optimizer's variables: Phi_l (pairs None) or Psi_l = P_l^-1 Phi_l."""

            def unpack(theta):
                parts = [theta[block].reshape(shape) for block, shape in zip(blocks, shapes)]
                return parts if pairs is None else [_times_left(P, part) for (P, _), part in zip(pairs, parts)]

            def objective(theta):
                loss, grads, _ = setup.evaluate(unpack(theta), self.gradient)
                if pairs is not None:
                    grads = [_times_left(P, g) for (P, _), g in zip(pairs, grads)]
                return loss, np.concatenate([g.ravel() for g in grads])

            return unpack, objective

        unpack, objective = coordinates(None)
        theta0 = np.concatenate([P.ravel() for P in start])
        threshold = self.tol * setup.scale
        self._progress(
            f"{setup.X.shape[0]} samples, {len(setup.sizes) - 1} layers ({setup.n_optimized} optimized): "
            f"{self.solver} with {self.update} updates from a {self.init} start"
        )
        theta, curve, n_iter, end = self._minimize(objective, theta0, blocks, threshold, self.max_iter)
        if self.preconditioner == "rkhs" and end == "stopped" and n_iter < self.max_iter:
            # Second phase: from where the rule stopped the first, on in the whitened coordinates.
            self._progress(f"stopped after {n_iter} iterations; continuing in the whitened coordinates")
            psi = np.concatenate([_times_left(Q, P).ravel() for (_, Q), P in zip(whitening, unpack(theta))])
            unpack, objective = coordinates(whitening)
            theta, more, n_more, end = self._minimize(objective, psi, blocks, threshold, self.max_iter - n_iter)
            curve, n_iter = curve + more[1:], n_iter + n_more
        # The relative gradient in the whitened coordinates Psi (whatever the optimizer's): the first-order change
        # of the objective, in units of its scale, for a move of f_l in its RKHS as large as the start's; it tells
        # a minimum from a plateau.
        final = setup.evaluate(unpack(theta), "adjoint")[1]
        gradient = np.concatenate([_times_left(P, g).ravel() for (P, _), g in zip(whitening, final)])
        start_norm = np.linalg.norm(np.concatenate([_times_left(Q, P).ravel() for (_, Q), P in zip(whitening, start)]))
        gradient_ratio = float(np.linalg.norm(gradient) * start_norm / setup.scale)
        status = end if end != "stopped" else ("converged" if gradient_ratio <= _STATIONARY else "plateau")
        rate = _decrease_rate(curve, self.n_iter_no_change) / setup.scale
        if status == "max_iter":
            warn(
                f"KernelAutoencoder: stopped after max_iter = {self.max_iter} iterations before converging: the "
                f"objective still fell by {rate:.3g} of its scale per iteration over the last "
                f"{self.n_iter_no_change} (tol = {self.tol:g}); increase max_iter",
                ConvergenceWarning,
            )
        elif status == "plateau":
            warn(
                f"KernelAutoencoder: the objective stopped decreasing after {n_iter} iterations (by {rate:.3g} of "
                f"its scale per iteration over the last {self.n_iter_no_change}) while its relative gradient is "
                f"{gradient_ratio:.3g} (at most {_STATIONARY:g} at a minimum): a plateau, not a minimum; the fit has "
                "not converged (solver='lbfgs' with preconditioner='rkhs' moves through it)",
                ConvergenceWarning,
            )
        self._store(setup, unpack(theta))
        self.objective_history_, self.n_iter_ = curve, int(n_iter)
        self.status_, self.converged_, self.gradient_ratio_ = status, status == "converged", gradient_ratio
        self._progress(f"{status} after {self.n_iter_} iterations: objective {curve[0]:.6g} -> {self.objective_:.6g}")
        return self

    def _store(self, setup, coefficients):
        self.objective_, _, self.terms_ = setup.evaluate(coefficients, "adjoint")
        self.kernels_, self.operators_, self.lam_ = setup.specs, setup.operators, setup.lam
        self.gamma_ = tuple(spec[1] for spec in setup.specs)
        self.n_layers_ = len(setup.sizes) - 1
        self.hidden_layer_sizes_ = tuple(setup.sizes[1:-1])
        self.code_layer_ = self.code_layer or 1 + int(np.argmin(self.hidden_layer_sizes_))
        self.coefficients_ = list(coefficients)
        self.representations_ = self._forward_training(setup.X, setup.precomputed)
        if setup.precomputed:
            diagonal = np.diag(setup.X)
            self.diag_mean_ = float(diagonal.mean())
            self._constant_diagonal = bool(np.ptp(diagonal) <= 1e-12 * max(np.abs(diagonal).max(), 1e-300))
            K_L = self._gram(self.representations_[-1], setup.specs[-1])
            self.ridge_inverse_ = self._ridge_inverse(K_L, setup.lam[-1])
            self.ridge_gram_ = self.ridge_inverse_ @ setup.X @ self.ridge_inverse_
        elif setup.solved:
            self.coefficients_.append(
                self._ridge_last_layer(setup.X, self.representations_[-1], setup.specs[-1], setup.lam[-1])
            )

    def _forward_training(self, X, precomputed):
        reps = [None if precomputed else X]
        for layer in range(self.n_layers_ - 1):
            K = X if (precomputed and layer == 0) else self._gram(reps[-1], self.kernels_[layer])
            reps.append(K @ _times(self.coefficients_[layer], self.operators_[layer]))
        return reps

    @staticmethod
    def _ridge_inverse(K_L, penalty):
        n = K_L.shape[0]
        if penalty > 0:
            return linalg.inv(K_L + n * penalty * np.eye(n), overwrite_a=True)
        values, vectors = np.linalg.eigh(K_L)
        kept = values > max(values[-1], 0.0) * n * np.finfo(np.float64).eps
        return (vectors[:, kept] / values[kept]) @ vectors[:, kept].T

    # ---- out of sample -------------------------------------------------------------------------------------

    @property
    def _precomputed(self):
        return self.kernels_[0][0] == "precomputed"

    def _check_new(self, X):
        check_is_fitted(self, "coefficients_")
        # For K²AE the "features" are the columns of k(X_test, X_train): one per training sample.
        return validate_data(self, X, dtype=np.float64, order="C", reset=False)

    def _layer(self, layer, Z):
        """Codes of layer `layer` (0-based) for inputs Z of that layer (for K²AE's first: the kernel block)."""
        if layer == 0 and self._precomputed:
            K = Z
        else:
            K = self._gram(Z, self.kernels_[layer], self.representations_[layer])
        return K @ _times(self.coefficients_[layer], self.operators_[layer])

    def _encode(self, X, last):
        Z = X
        for layer in range(last):
            Z = self._layer(layer, Z)
        return Z

    def transform(self, X: ArrayLike) -> np.ndarray:
        """Codes of layer `code_layer_` for X (n, n_features), or for K²AE the kernel block k(X, X_train)."""
        return self._encode(self._check_new(X), self.code_layer_)

    def inverse_transform(self, Z: ArrayLike) -> np.ndarray:
        """Decode codes of layer `code_layer_` back to the input space (KAE only)."""
        check_is_fitted(self, "coefficients_")
        if self._precomputed:
            raise ValueError(
                "Z: a K²AE decodes into the input's RKHS, which has no explicit coordinates; use "
                "reconstruction_error or score"
            )
        size = self.hidden_layer_sizes_[self.code_layer_ - 1]
        Z = np.asarray(Z, dtype=np.float64)
        if Z.ndim != 2 or Z.shape[1] != size or not np.all(np.isfinite(Z)):
            raise ValueError(
                f"Z: must be a finite 2-D array with {size} columns (the code layer's size), got shape {Z.shape}"
            )
        for layer in range(self.code_layer_, self.n_layers_):
            Z = self._layer(layer, Z)
        return Z

    def reconstruct(self, X: ArrayLike) -> np.ndarray:
        """X passed through all layers (KAE only)."""
        return self.inverse_transform(self.transform(X))

    def reconstruction_error(self, X: ArrayLike, diag: ArrayLike | None = None) -> np.ndarray:
        """Squared reconstruction error of each sample.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), or (n_samples, n_train) for K²AE
            Data, or for K²AE the kernel block k(X_test, X_train).
        diag : array-like of shape (n_samples,) or None, default=None
            K²AE only (ignored otherwise): the test points' k(x, x), the constant term of their distortion
            ||phi(x)||^2 + k_L N_L k_L^T - 2 k_L W^-1 k_in (Appendix B.7, k_L the last layer's kernel row).
            None: every k(x, x) is taken as ``diag_mean_``, the mean of the training Gram matrix's diagonal.
            That is exact for kernels with a constant diagonal (rbf, Laplacian, any normalized kernel:
            k(x, x) = 1); otherwise each error is off by k(x, x) - ``diag_mean_``, the same amount for every model
            fitted on the same training Gram matrix (so comparisons between them, as in a grid search, keep
            their order), and the errors are not clipped at 0.

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        X = self._check_new(X)
        if not self._precomputed:
            return np.sum((X - self.reconstruct(X)) ** 2, axis=1)
        exact = diag is not None
        if not exact:
            diag = np.full(X.shape[0], self.diag_mean_)
        diag = np.asarray(diag, dtype=np.float64)
        if diag.shape != (X.shape[0],) or not np.all(np.isfinite(diag)):
            raise ValueError(f"diag: must be a finite 1-D array of {X.shape[0]} values k(x, x), got shape {diag.shape}")
        codes = self._encode(X, self.n_layers_ - 1)
        k_L = self._gram(codes, self.kernels_[-1], self.representations_[-1])
        errors = (
            diag
            + np.einsum("ij,ij->i", k_L @ self.ridge_gram_, k_L)
            - 2.0 * np.einsum("ij,ij->i", k_L @ self.ridge_inverse_, X)
        )
        return np.maximum(errors, 0.0) if exact or self._constant_diagonal else errors

    def score(self, X: ArrayLike, y: None = None, diag: ArrayLike | None = None) -> float:
        """Negative mean squared reconstruction error (higher is better).

        Parameters
        ----------
        X : array-like
            As in :meth:`reconstruction_error`.
        y : None
            Ignored.
        diag : array-like of shape (n_samples,) or None, default=None
            K²AE: the test points' k(x, x); None takes ``diag_mean_`` (see :meth:`reconstruction_error`), so that
            K²AE scores in a Pipeline or a grid search without it.

        Returns
        -------
        float
        """
        return -float(np.mean(self.reconstruction_error(X, diag)))

    @property
    def _n_features_out(self):
        """Width of :meth:`transform`'s output: the code layer's size (get_feature_names_out's prefix names)."""
        return self.hidden_layer_sizes_[self.code_layer_ - 1]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.pairwise = _is_precomputed(self.kernel)
        return tags

    def loss_and_grad(
        self, X: ArrayLike, coefficients: list | None = None, gradient: str | None = None
    ) -> tuple[float, list]:
        """The training objective (eq. 4, or eq. 5 for K²AE) and its gradient with respect to the coefficients.

        Parameters
        ----------
        X : array-like
            Training data (or K_in); the settings (kernels, gammas, operators, lam) are checked and resolved from
            it as :meth:`fit` does.
        coefficients : list of arrays or None
            The optimized Phi_l: all L with ``last_layer="gradient"``, the L - 1 hidden ones when the last layer
            is solved (the loss is then minimized over Phi_L, and the gradient is that of this reduced loss).
            None: the fitted ones.
        gradient : {"adjoint", "jacobian"} or None
            None: the estimator's `gradient`.

        Returns
        -------
        loss : float
            The objective.
        grads : list of ndarray shaped like `coefficients`
        """
        self._validate_params()
        setup = self._configuration(X)
        if coefficients is None:
            check_is_fitted(self, "coefficients_")
            coefficients = self.coefficients_[: setup.n_optimized]
        gradient = self.gradient if gradient is None else gradient
        check_choices([("gradient", gradient, ("adjoint", "jacobian"))])
        if not isinstance(coefficients, (list, tuple)):
            raise ValueError(f"coefficients: must be a list of arrays, got {type(coefficients).__name__}")
        coefficients = [np.ascontiguousarray(P, dtype=np.float64) for P in coefficients]
        loss, grads, _ = setup.evaluate(coefficients, gradient)
        return loss, grads
