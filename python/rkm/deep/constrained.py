"""Constrained deep restricted kernel machines (Constr-DRKM; Tonin, Patrinos & Suykens 2021, sections 3-4).

L kernel PCA levels stacked on each other's hidden features and trained end to end on the Stiefel manifold
(eq. 7): level 1 works on the data, level l >= 2 on the hidden features of level l - 1, and all hidden features
together have orthonormal columns. The readings of steps the paper leaves open are listed in the class docstring.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from numbers import Integral

import numpy as np
import scipy.optimize
from numpy.typing import ArrayLike
from sklearn.base import (
    BaseEstimator,
    ClassNamePrefixFeaturesOutMixin,
    TransformerMixin,
    _fit_context,
)
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted, validate_data

from rkm import _core, stiefel
from rkm._utils.eigen import numerically_positive, sign_flips
from rkm._utils.progress import Progress
from rkm._utils.threads import blas_threads, thread_count
from rkm._utils.validation import (
    N_THREADS,
    PER_LEVEL,
    POSITIVE,
    POSITIVE_INT,
    RANDOM_STATE,
    VERBOSE,
    check_choices,
    check_int,
    check_matrix,
    check_positive,
    kernel_constraints,
)
from rkm._utils.warn import warn
from rkm.deep._constr_levels import bandwidth_objective, levelwise_init
from rkm.exceptions import ConvergenceWarning
from rkm.kernels import (
    Kernel,
    canonical_kernel_name,
    kernel_gradient,
    kernel_matrix,
    kernel_product,
    kernel_spec,
    names_with,
)
from rkm.preimage import gaussian_fixed_point, kernel_smoother, with_feature_mean

__all__ = ["ConstrainedDeepRKM"]

STIEFEL_METHODS = ("bb_pg", "pg", "cayley_adam", "penalty", "cayley_bb", "pg_anderson")
INITS = ("random", "levelwise")
PREIMAGE_PATHS = ("expansion", "kpca", "chained")
# Kernels of levels l >= 2, which the objective differentiates with respect to the previous level's features.
LEVEL_KERNELS = names_with("level_derivatives")
# Kernels whose bandwidth learn_gamma can learn.
BANDWIDTH_KERNELS = names_with("distance")
# learn_gamma: most rounds of (hidden features, bandwidths) alternation.
MAX_GAMMA_ROUNDS = 20
# learn_gamma without centring: bandwidths stay within this factor of their starting values (the uncentred
# objective keeps decreasing as gamma -> 0, where every kernel matrix tends to 1 1^T).
UNCENTRED_GAMMA_RANGE = 100.0
# learn_gamma with centring: a wide safety range only (the centred objective has an interior optimum).
CENTRED_GAMMA_RANGE = 1e8
# Training points the kernel smoother averages for the starting points of inverse_transform.
SMOOTHER_NEIGHBORS = 10


class ConstrainedDeepRKM(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Constrained deep restricted kernel machine (Constr-DRKM): L kernel PCA levels trained end to end.

    With hidden features H_l (n_samples x s_l, row i the hidden vector of sample i at level l) and
    H = [H_1 ... H_L], training solves (Tonin et al. 2021, eq. 7 for L levels)

        minimize  f(H) = - sum_l (1/(2 eta_l)) Tr(B_l^T K_l B_l)   subject to  H^T H = I,

    with K_1 = k_1(X, X), K_l = k_l(H_{l-1}, H_{l-1}) for l >= 2 (the kernel of level l on the rows of the
    previous level's hidden features), B_l = C H_l with C = I - 11^T/N when ``center`` and B_l = H_l otherwise
    (centring acts on the kernel matrices; level l >= 2 takes the raw rows of H_{l-1}). The constraint makes
    the hidden features orthonormal within and across levels. The problem is solved by a Riemannian method
    on the Stiefel manifold (:func:`rkm.stiefel.minimize`); with L = 1 its solution is kernel PCA.

    A new point x* is encoded level by level (eqs. 4-5):

        h_1* = A_1^+ H_1^T k~_1(X, x*),   h_l* = A_l^+ H_l^T k~_l(H_{l-1}, h_{l-1}*),

    with k~ the kernel rows (centred with the training statistics when ``center``) and A_l = H_l^T K~_l H_l, so
    that for L = 1 it equals :class:`rkm.KernelPCA`'s hidden features (``transform``); ``lam=<float>`` gives the
    printed 1/(lam eta_l) in place of A_l^+.

    Training codes and out-of-sample codes differ for L >= 2. ``transform(X_train)`` is not ``H_``: the
    training solves the levels jointly, and at a stationary point of eq. 7 level 1 satisfies
    K~_1 H_1 / eta_1 = D_1 - H S_1, with D_1 the gradient of the later levels' terms with respect to H_1 and
    S_1 the constraint's multipliers: K~_1 H_1 leaves the span of H_1 unless D_1 lies in H's span, so h_1*(x_i),
    row i of K~_1 H_1 A_1^+, equals row i of H_1 only when the later levels do not pull on H_1 (L = 1, or
    nearly decoupled levels such as a very large eta_2); deeper levels then encode these h_1*, not the rows
    of H_1. (Relative differences of 0.7-1.4 were seen on Gaussian data and digits.) Eqs. 4-5 are the
    paper's out-of-sample map and ``transform`` applies it to every input, the training points included, so
    that ``fit_transform(X)`` equals ``fit(X).transform(X)`` as scikit-learn requires. The training codes the
    fit found are ``embedding_`` (``np.hstack(H_)``, as scikit-learn's manifold learners name them): use them
    where the codes of the training points themselves are wanted.

    Parameters
    ----------
    n_components : int or sequence of ints, default=(10, 5)
        Hidden features per level (s_1, ..., s_L); the number of levels L is the sequence's length (an int is
        one level). The default is the paper's MNIST model (section 5). When their sum exceeds n_samples (the
        hidden features must be orthonormal), the sizes are scaled down in proportion, at least 1 per level
        (e.g. (10, 5) -> (6, 3) for 10 samples), with a UserWarning; ``n_components_`` holds the sizes used.
        Fewer samples than levels is an error.
    kernel : str, rkm.kernels.Kernel or sequence of L of them, default="rbf"
        One kernel for every level or one per level. Level 1 takes any rkm kernel ("rbf", "laplacian",
        "poly", "linear", "cosine", "tanimoto"); levels 2 and above "rbf", "laplacian", "poly" or "linear".
        A linear level l >= 2 without centring contributes nothing: H_{l-1}^T H_l = 0 on the constraint set,
        so its term is 0 and its hidden features are arbitrary.
    gamma : float, None or sequence of L of them, default=None
        Bandwidths (rbf, laplacian) or poly scale, "rbf" being exp(-gamma ||x - y||^2). None: 1 / n_features
        for level 1 and N / (2 s_{l-1}) for level l >= 2 (orthonormal columns put squared distances between
        hidden vectors near 2 s_{l-1} / N, so gamma d^2 is near 1). The paper's sigma^2 = 50 is gamma = 0.01.
    degree : float or sequence of L floats, default=3
        Polynomial kernel degree, one for all levels or one per level.
    coef0 : float or sequence of L floats, default=1.0
        Polynomial kernel offset, one for all levels or one per level.
    eta : float or sequence of L floats, default=1.0
        The levels' regularization constants eta_l (eq. 3); level l's term is weighed by 1/eta_l.
    lam : float or None, default=None
        None: out-of-sample features scaled so that the training points' encodings project onto the training
        hidden features as the identity (A_l^+ above); a float: the paper's literal 1/(lam eta_l) of eqs. 4-5
        (lam does not enter training).
    stiefel_method : {"bb_pg", "pg", "cayley_adam", "penalty", "cayley_bb", "pg_anderson"}, default="bb_pg"
        Method of :func:`rkm.stiefel.minimize`: Wen-Yin's Cayley method with Barzilai-Borwein steps switching to
        projected gradient (and back) when it stops making progress ("bb_pg"), projected gradient with
        backtracking (section 4.1), Cayley Adam (default learning rate 10; ``stiefel_options={"lr": "paper"}``
        for the paper's 5e-5, which needs tens of thousands of iterations), the quadratic penalty of Algorithm 1
        (its result projected onto the constraint set), Cayley-BB alone, or projected gradient with Anderson
        acceleration. The default was chosen by measurement (bench/constr_drkm_perf.py ``--part defaults``,
        bench/RESULTS.md): "pg" stops at its cap on 2-D shapes, Gaussian blobs, sprites and small Gaussian
        data (its doubled steps wander at grad_norm 1e-5..1e-4), "cayley_bb" and "pg_anderson" stall near
        grad_norm 1.5e-7 on the paper's MNIST problem (N = 1000, s = (10, 5), gamma = 0.01), "bb_pg" converged
        on all of them.
    init : {"random", "levelwise"} or ndarray of shape (n_samples, sum s_l), default="random"
        Starting point: standard normal entries made orthonormal (seeded by ``random_state``); level-wise
        kernel PCA (H_1 the top eigenvectors of K~_1, H_l those of P K~_l P with P the projector onto the
        complement of the previous levels' features: feasible and independent of the seed); or an array,
        projected onto the constraint set (its nearest orthonormal matrix).
    center : bool, default=False
        Centre the kernel matrices of all levels (the paper trains uncentred).
    learn_gamma : bool, default=False
        Learn the rbf/laplacian bandwidths of all levels with the hidden features: alternating a solve for H
        with the bandwidths fixed and an L-BFGS-B step on log(gamma) with H fixed, until the objective
        changes by less than ``tol`` (relative) or after 20 rounds; ``gamma`` is the start. Meant for
        ``center=True``: uncentred, the objective keeps decreasing as gamma -> 0 (every kernel matrix tends to
        1 1^T), so the bandwidths are kept within a factor 100 of their start, with a warning when they hit it.
    max_iter : int, default=5000
        Iterations of the Stiefel method (per round with ``learn_gamma``); 0 keeps the starting point. The
        default fits converged within 2000 iterations on the measured problems.
    tol : float, default=5e-8
        Tolerance on the norm of the Riemannian gradient (the paper's value; ``stiefel_options`` can select
        the paper's step-based test).
    stiefel_options : dict or None, default=None
        Further options of :func:`rkm.stiefel.minimize` (e.g. ``{"max_step": 1.0}``, ``{"lr": "paper"}``).
    preimage_path : {"expansion", "kpca", "chained"}, default="expansion"
        How ``denoise`` maps selected components back to input space (eqs. 8-11), see ``denoise``.
    preimage_max_iter : int, default=100
        Iterations of the pre-image (fixed point or L-BFGS).
    n_threads : int or None, default=None
        Threads for the core (None: OpenMP's default; -1: all cores).
    random_state : int, RandomState instance or None, default=None
        Seeds the random starting point.
    verbose : int, default=0
        0: silent; 1: one line per stage (the fit's summary, each bandwidth round); 2: also the Stiefel
        method's progress, one line per iteration.

    Attributes
    ----------
    n_components_ : tuple of L ints
        The levels' sizes used (``n_components``, scaled down when their sum exceeded n_samples).
    embedding_ : ndarray of shape (n_samples, sum s_l)
        The training codes [H_1 ... H_L] that the fit found (``np.hstack(H_)``). For L >= 2 they differ from
        ``transform(X_train)``, the out-of-sample map of eqs. 4-5 (see above).
    H_ : list of L ndarrays of shape (n_samples, s_l)
        Hidden features per level, each level rotated to its principal axes: H_l^T K~_l H_l is diagonal and
        descending, each column's largest entry positive. The rotation leaves the objective and the
        constraint unchanged; a level followed by a laplacian level is not rotated (that kernel is not
        rotation invariant).
    eigenvalues_ : list of L ndarrays of shape (s_l,)
        diag(H_l^T K~_l H_l) / eta_l (for L = 1, the eigenvalues of K~ / eta, as KernelPCA's).
    objective_ : float
        f(H) at the solution.
    level_objectives_ : ndarray of shape (L,)
        The levels' terms -(1/(2 eta_l)) Tr(B_l^T K_l B_l); their sum is ``objective_``.
    feasibility_ : float
        ||H^T H - I||_F.
    grad_norm_ : float
        Norm of the Riemannian gradient at the solution.
    n_iter_, n_evaluations_ : int
        Solver iterations and objective evaluations (summed over rounds with ``learn_gamma``).
    gamma_ : tuple of L floats or None
        Bandwidths used (learned with ``learn_gamma``); None for the linear kernel.
    column_means_, grand_mean_ : lists of L entries
        ``center=True``: the training kernel statistics of each level, used to centre new kernel rows.
    X_fit_ : ndarray of shape (n_samples, n_features)
    stiefel_result_ : rkm.stiefel.StiefelResult
        The Stiefel method's result (the last round's with ``learn_gamma``).
    fit_time_ : float
        Seconds the fit took.
    n_features_in_ : int

    Notes
    -----
    Readings of steps the paper leaves open:

    - Denoising keeps, for each level, the hidden features of the selected components and maps them back
      through the expansion of every hidden column over the training points (``preimage_path="expansion"``):
      each column H_l[:, k] is a direction Phi_1^T H_l[:, k] in level 1's feature space, so the projection is
      P phi_1(x*) = sum_i beta_i phi_1(x_i) with beta = sum_l H_l[:, S_l] h_l*[S_l], plus (1 - 1^T beta) / N
      when centred (the feature-space mean). For L = 1 this is kernel PCA denoising.
    - The coefficients beta of eq. 11 use the point being denoised, x*, not the pre-image iterate.
    - The rbf pre-image iterates the fixed point of Mika et al. from x* itself; the linear kernel has the
      closed form X^T beta; other kernels minimize ||phi(x) - P phi(x*)||^2 by L-BFGS from x*.

    Examples
    --------
    >>> import numpy as np
    >>> from rkm import ConstrainedDeepRKM
    >>> X = np.random.default_rng(0).normal(size=(60, 2))
    >>> model = ConstrainedDeepRKM((2, 1), gamma=(0.5, None), init="levelwise", stiefel_method="pg_anderson")
    >>> model = model.fit(X)
    >>> model.transform(X[:5]).shape
    (5, 3)
    >>> bool(model.feasibility_ < 1e-10)
    True
    >>> model.denoise(X[:5], components=((0,), (0,))).shape
    (5, 2)
    """

    _parameter_constraints: dict = {
        "n_components": [*POSITIVE_INT, *PER_LEVEL],
        **kernel_constraints(precomputed=False, per_level=True),
        "eta": [*POSITIVE, *PER_LEVEL],
        "lam": [None, *POSITIVE],
        "stiefel_method": [StrOptions(set(STIEFEL_METHODS))],
        "init": [StrOptions(set(INITS)), "array-like"],
        "center": ["boolean"],
        "learn_gamma": ["boolean"],
        "max_iter": [Interval(Integral, 0, None, closed="left")],
        "tol": POSITIVE,
        "stiefel_options": [None, dict],
        "preimage_path": [StrOptions(set(PREIMAGE_PATHS))],
        "preimage_max_iter": POSITIVE_INT,
        "n_threads": N_THREADS,
        "random_state": RANDOM_STATE,
        "verbose": VERBOSE,
    }

    def __init__(
        self,
        n_components: int | Sequence[int] = (10, 5),
        *,
        kernel: str | Kernel | Sequence[str | Kernel] = "rbf",
        gamma: float | None | Sequence[float | None] = None,
        degree: float | Sequence[float] = 3,
        coef0: float | Sequence[float] = 1.0,
        eta: float | Sequence[float] = 1.0,
        lam: float | None = None,
        stiefel_method: str = "bb_pg",
        init: str | ArrayLike = "random",
        center: bool = False,
        learn_gamma: bool = False,
        max_iter: int = 5000,
        tol: float = 5e-8,
        stiefel_options: dict | None = None,
        preimage_path: str = "expansion",
        preimage_max_iter: int = 100,
        n_threads: int | None = None,
        random_state: int | np.random.RandomState | None = None,
        verbose: int = 0,
    ) -> None:
        self.n_components = n_components
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.eta = eta
        self.lam = lam
        self.stiefel_method = stiefel_method
        self.init = init
        self.center = center
        self.learn_gamma = learn_gamma
        self.max_iter = max_iter
        self.tol = tol
        self.stiefel_options = stiefel_options
        self.preimage_path = preimage_path
        self.preimage_max_iter = preimage_max_iter
        self.n_threads = n_threads
        self.random_state = random_state
        self.verbose = verbose

    # ------------------------------------------------------------------ parameters

    def _check_params_vs_input(self, n_samples, n_features):
        """The rules that need the data or combine parameters (types and ranges are in _parameter_constraints).

        Returns (sizes, etas, kernel specs, starting array or None) of the levels.
        """
        components = self.n_components if isinstance(self.n_components, (tuple, list)) else (self.n_components,)
        if len(components) == 0:
            raise ValueError(
                f"n_components: must be a positive int or a sequence of them (one per level), got {self.n_components!r}"
            )
        sizes = tuple(check_int(s, "n_components") for s in components)
        n_levels = len(sizes)
        if n_samples < n_levels:
            raise ValueError(
                f"n_components: {n_levels} levels need at least {n_levels} samples (one orthonormal hidden "
                f"feature per level), got n_samples={n_samples}"
            )
        if sum(sizes) > n_samples:
            clamped = _clamp_sizes(sizes, n_samples)
            warn(
                f"n_components: the levels' components sum to {sum(sizes)}, more than n_samples={n_samples} (the "
                f"hidden features must be orthonormal); using n_components={clamped}, the sizes scaled down in "
                "proportion (at least 1 per level)",
                UserWarning,
            )
            sizes = clamped
        etas = tuple(check_positive(v, "eta") for v in _per_level(self.eta, "eta", n_levels))
        specs = self._level_specs(n_samples, n_features, sizes)
        if self.learn_gamma:
            for level, spec in enumerate(specs, start=1):
                if spec[0] not in BANDWIDTH_KERNELS:
                    raise ValueError(
                        f"learn_gamma: bandwidths are learned for {' and '.join(BANDWIDTH_KERNELS)} "
                        f"levels only; level {level} is {spec[0]!r}"
                    )
        H0 = None if isinstance(self.init, str) else self._check_init_array(n_samples, sum(sizes))
        return sizes, etas, specs, H0

    def _check_init_array(self, n_samples, p):
        H0 = np.asarray(self.init, dtype=np.float64)
        if H0.shape != (n_samples, p):
            raise ValueError(
                f"init: an array must have shape (n_samples, sum of n_components) = {(n_samples, p)}, got {H0.shape}"
            )
        if not np.all(np.isfinite(H0)):
            raise ValueError("init: the array contains NaN or infinity")
        singular = np.linalg.svd(H0, compute_uv=False)
        if singular[-1] <= 1e-12 * singular[0]:
            raise ValueError(
                f"init: the array has rank below {p} (its smallest singular value is "
                f"{singular[-1]:.3g}, its largest {singular[0]:.3g}); no orthonormal matrix is near it"
            )
        return np.ascontiguousarray(H0)

    def _level_specs(self, n_samples, n_features, sizes):
        """(name, gamma, degree, coef0) per level, gammas resolved."""
        n_levels = len(sizes)
        columns = zip(
            *(_per_level(getattr(self, name), name, n_levels) for name in ("kernel", "gamma", "degree", "coef0"))
        )
        specs = []
        for level, (kernel, gamma, degree, coef0) in enumerate(columns):
            if isinstance(kernel, Kernel):
                params = kernel.params()
                kernel, gamma = kernel.name, params.get("gamma")
                degree, coef0 = params.get("degree", degree), params.get("coef0", coef0)
            if level == 0:
                specs.append(kernel_spec(kernel, gamma, degree, coef0, n_features))
                continue
            name = canonical_kernel_name(kernel)
            if name not in LEVEL_KERNELS:
                raise ValueError(
                    f"kernel: level {level + 1} works on hidden features and must be one of "
                    f"{', '.join(LEVEL_KERNELS)}, got {kernel!r}"
                )
            if gamma is None:
                gamma = n_samples / (2.0 * sizes[level - 1])
            specs.append(kernel_spec(name, gamma, degree, coef0, sizes[level - 1]))
        return specs

    # ------------------------------------------------------------------ fitting

    def _objective(self, X, specs, sizes, etas):
        """(core objective, K_1) for the levels' kernels."""
        name, gamma, degree, coef0 = specs[0]
        K1 = kernel_matrix(X, kernel=name, gamma=gamma, degree=degree, coef0=coef0, n_threads=self.n_threads)
        level_kernels = [_core_spec(spec) for spec in specs[1:]]
        objective = _core.ConstrainedDeepObjective(
            K1, level_kernels, list(sizes), list(etas), bool(self.center), self.n_threads
        )
        return objective, K1

    def _initial_point(self, K1, specs, sizes, n_samples, H0):
        """The starting point: the validated array H0 of ``init``, or the random or level-wise start."""
        if H0 is not None:
            return H0
        if self.init == "random":
            return stiefel.random_point(n_samples, sum(sizes), random_state=check_random_state(self.random_state))
        return levelwise_init(K1, specs[1:], sizes, self.center, self.n_threads)

    def _solve(self, objective, H0):
        # The core objective runs its own threads and calls BLAS from each of them: one BLAS thread apiece.
        with blas_threads(1):
            # The method's own lines are one per iteration: verbose >= 2.
            return stiefel.minimize(
                objective,
                H0,
                method=self.stiefel_method,
                tol=self.tol,
                max_iter=self.max_iter,
                options=None if self.stiefel_options is None else dict(self.stiefel_options),
                verbose=self.verbose if self.verbose >= 2 else 0,
            )

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: ArrayLike, y: None = None) -> ConstrainedDeepRKM:
        """Train the hidden features of all levels (eq. 7).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : None
            Ignored.

        Returns
        -------
        self : ConstrainedDeepRKM
            The fitted model.
        """
        self._progress = Progress(type(self).__name__, self.verbose)
        X = validate_data(self, X, dtype=np.float64, order="C")
        sizes, etas, specs, H0 = self._check_params_vs_input(*X.shape)
        with blas_threads(thread_count(self.n_threads)):
            objective, K1 = self._objective(X, specs, sizes, etas)
            H0 = self._initial_point(K1, specs, sizes, X.shape[0], H0)
            if self.learn_gamma:
                result, objective, K1, specs, counts = self._fit_bandwidths(X, H0, specs, sizes, etas, objective)
            else:
                result = self._solve(objective, H0)
                counts = (result.nit, result.nfev)
            self._store(X, result, objective, K1, specs, sizes, etas, counts)
        self.fit_time_ = self._progress.elapsed()
        self._progress(
            f"objective {self.objective_:.10g}, grad_norm {self.grad_norm_:.2e}, feasibility "
            f"{self.feasibility_:.2e}, {self.n_iter_} iterations"
        )
        if not result.success:
            warn(_not_converged_message(self.stiefel_method, result, self.tol), ConvergenceWarning)
        return self

    def _fit_bandwidths(self, X, H0, specs, sizes, etas, objective):
        """Alternate solves for H (bandwidths fixed) and L-BFGS-B on log(gamma) (H fixed)."""
        start = np.log([spec[1] for spec in specs])
        spread = np.log(CENTRED_GAMMA_RANGE if self.center else UNCENTRED_GAMMA_RANGE)
        bounds = list(zip(start - spread, start + spread))
        result = self._solve(objective, H0)
        n_iter, n_evaluations = result.nit, result.nfev
        for round_index in range(MAX_GAMMA_ROUNDS):
            log_gammas = self._bandwidth_step(X, result.x, specs, sizes, etas, bounds)
            specs = [(name, float(np.exp(t)), degree, coef0) for (name, _, degree, coef0), t in zip(specs, log_gammas)]
            objective, K1 = self._objective(X, specs, sizes, etas)
            previous, result = result.fun, self._solve(objective, result.x)
            n_iter, n_evaluations = n_iter + result.nit, n_evaluations + result.nfev
            self._progress(
                f"bandwidth round {round_index + 1}: gamma {tuple(spec[1] for spec in specs)}, "
                f"objective {result.fun:.10g}"
            )
            if abs(previous - result.fun) <= self.tol * abs(result.fun):
                break
        at_bound = [
            level + 1
            for level, (t, (low, high)) in enumerate(zip(np.log([s[1] for s in specs]), bounds))
            if np.isclose(t, low, rtol=0, atol=1e-6) or np.isclose(t, high, rtol=0, atol=1e-6)
        ]
        if at_bound and not self.center:
            warn(
                f"ConstrainedDeepRKM: the learned bandwidths of levels {at_bound} reached the limit of a factor "
                f"{UNCENTRED_GAMMA_RANGE:g} from their start: without centring the objective keeps decreasing "
                "as gamma -> 0; use center=True to learn bandwidths",
                ConvergenceWarning,
            )
        return result, objective, K1, specs, (n_iter, n_evaluations)

    def _bandwidth_step(self, X, H, specs, sizes, etas, bounds):
        """log(gamma) minimizing f with H fixed (L-BFGS-B within bounds)."""

        def fun(log_gammas):
            current = [
                (name, float(np.exp(t)), degree, coef0) for (name, _, degree, coef0), t in zip(specs, log_gammas)
            ]
            return bandwidth_objective(H, X, current, sizes, etas, self.center, self.n_threads)

        start = np.log([spec[1] for spec in specs])
        found = scipy.optimize.minimize(
            fun, start, jac=True, method="L-BFGS-B", bounds=bounds, options={"maxiter": self.max_iter or 1}
        )
        return found.x if found.fun <= fun(start)[0] else start

    def _store(self, X, result, objective, K1, specs, sizes, etas, counts):
        """Fitted attributes: canonical rotation per level, level statistics, objective terms."""
        blocks = np.split(np.asarray(result.x, dtype=np.float64), np.cumsum(sizes)[:-1], axis=1)
        products = [lambda B: K1 @ B]
        for level in range(1, len(sizes)):
            products.append(_kernel_product_of(blocks, level, specs[level], self.n_threads))
        levels = []
        for level, block in enumerate(blocks):
            rotate = level + 1 == len(sizes) or specs[level + 1][0] != "laplacian"
            # Later levels' kernel products read the rotated block, which rotation leaves their kernels unchanged.
            blocks[level], statistics = _level_statistics(products[level], block, rotate, self.center)
            levels.append(statistics)
        H = np.ascontiguousarray(np.hstack(blocks))
        f, G, terms = objective.evaluate(H)
        self.H_ = blocks
        self.eigenvalues_ = [np.diag(A) / eta for (A, _, _), eta in zip(levels, etas)]
        self._encoders = [_pseudo_inverse(A) for A, _, _ in levels]
        if self.center:
            self.column_means_ = [means for _, means, _ in levels]
            self.grand_mean_ = [grand for _, _, grand in levels]
        self.objective_ = float(f)
        self.level_objectives_ = np.asarray(terms, dtype=np.float64)
        self.feasibility_ = float(stiefel.feasibility(H))
        self.grad_norm_ = float(np.linalg.norm(stiefel.riemannian_gradient(H, np.asarray(G))))
        self.n_iter_, self.n_evaluations_ = int(counts[0]), int(counts[1])
        self.gamma_ = tuple(spec[1] for spec in specs)
        self._specs, self._etas = [tuple(spec) for spec in specs], etas
        # A copy: the caller changing X after fit must not change the model's encodings.
        self.X_fit_ = check_matrix(X, "X", copy=True)
        self.n_components_ = tuple(sizes)
        self.embedding_ = H
        self.stiefel_result_ = result

    # ------------------------------------------------------------------ encoding

    @property
    def _n_features_out(self):
        return sum(block.shape[1] for block in self.H_)

    def _training_inputs(self, level):
        return self.X_fit_ if level == 0 else self.H_[level - 1]

    def _scores(self, inputs, level, H):
        """sum_j H[j] k~_l(y_j, x*) for the rows x* of `inputs`, y_j the training inputs of `level` (0-based):
        with k~(x*, y_j) = k(x*, y_j) - r(x*) - c_j + g, it is k H - r (1^T H) - c^T H + g (1^T H), r from the
        same streamed product as a column of 1/N."""
        name, gamma, degree, coef0 = self._specs[level]
        n_train = H.shape[0]
        B = np.column_stack([H, np.full(n_train, 1.0 / n_train)])
        KB = kernel_product(
            inputs, self._training_inputs(level), B, name, gamma, degree, coef0, n_threads=self.n_threads
        )
        scores = KB[:, :-1]
        if self.center:
            sums = H.sum(axis=0)
            offset = self.column_means_[level] @ H - self.grand_mean_[level] * sums
            scores = scores - (KB[:, -1:] * sums + offset)
        return scores

    def _encode(self, X):
        """Hidden features h_l* of every level for the rows of X (eqs. 4-5)."""
        levels, inputs = [], X
        for level, H in enumerate(self.H_):
            scores = self._scores(inputs, level, H)
            if self.lam is None:
                hidden = scores @ self._encoders[level]
            else:
                hidden = scores / (self.lam * self._etas[level])
            levels.append(hidden)
            inputs = hidden
        return levels

    def _validate_new(self, X):
        check_is_fitted(self)
        return validate_data(self, X, dtype=np.float64, order="C", reset=False)

    def transform(self, X: ArrayLike) -> np.ndarray:
        """Hidden features [h_1* ... h_L*] of new points (eqs. 4-5, scaled as described by ``lam``).

        Every input goes through the out-of-sample map, the training points included: with two or more levels
        ``transform(X_train)`` differs from the training codes ``embedding_`` (see the class documentation);
        for one level they coincide.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples, sum of n_components)
        """
        return np.hstack(self._encode(self._validate_new(X)))

    # ------------------------------------------------------------------ pre-images

    def _selected(self, components):
        """Per level, the sorted component indices that ``components`` selects (None: all)."""
        sizes = [H.shape[1] for H in self.H_]
        if components is None:
            return [np.arange(s) for s in sizes]
        if not isinstance(components, (tuple, list)) or len(components) != len(sizes):
            raise ValueError(
                f"components: must be None or one sequence of indices per level ({len(sizes)}), "
                f"e.g. ((0,), ()), got {components!r}"
            )
        selected = []
        for level, (indices, size) in enumerate(zip(components, sizes), start=1):
            if not isinstance(indices, (tuple, list, np.ndarray)) or not all(
                isinstance(k, numbers.Integral) and not isinstance(k, bool) and 0 <= k < size for k in indices
            ):
                raise ValueError(f"components: level {level} has components 0..{size - 1}, got {indices!r}")
            selected.append(np.unique(np.asarray(indices, dtype=np.intp)))
        return selected

    def _with_mean(self, beta):
        """Expansion coefficients including the feature-space mean when the kernels are centred."""
        return with_feature_mean(beta) if self.center else beta

    def _preimage(self, beta, level, start):
        """Pre-image in the input space of `level` (0: the data; l: the hidden space of level l) of the point
        sum_i beta_i phi(y_i) of its feature space."""
        return _preimage(
            beta, self._training_inputs(level), self._specs[level], start, self.preimage_max_iter, self.n_threads
        )

    def _expansion(self, levels, selected):
        """beta = sum_l H_l[:, S_l] h_l*[S_l]: the selected components as coefficients over the training points."""
        beta = np.zeros((levels[0].shape[0], self.H_[0].shape[0]))
        for hidden, H, keep in zip(levels, self.H_, selected):
            beta += hidden[:, keep] @ H[:, keep].T
        return beta

    def _chained(self, X, levels, selected, components):
        """Pre-images level by level from the deepest selected level down to the input space."""
        if components is None:
            selected = [np.arange(0)] * (len(self.H_) - 1) + [selected[-1]]
        chosen = [level for level, keep in enumerate(selected) if keep.size]
        if len(chosen) > 1:
            raise ValueError(
                f"components: preimage path 'chained' decodes the components of one level, got "
                f"components in levels {[level + 1 for level in chosen]}"
            )
        if not chosen:
            return self._preimage(self._with_mean(self._expansion(levels, selected)), 0, X)
        level = chosen[0]
        keep = selected[level]
        coefficients = levels[level][:, keep]
        H = self.H_[level][:, keep]
        while level > 0:
            # The level's feature-space point is an expansion over the rows of H_{level-1}: its pre-image there
            # is a hidden vector of the previous level, decoded through all of that level's columns.
            hidden = self._preimage(self._with_mean(coefficients @ H.T), level, levels[level - 1])
            level -= 1
            coefficients, H = hidden, self.H_[level]
        return self._preimage(self._with_mean(coefficients @ H.T), 0, X)

    def denoise(
        self, X: ArrayLike, components: Sequence[Sequence[int]] | None = None, path: str | None = None
    ) -> np.ndarray:
        """Encode X, keep the selected components and map them back to input space (eqs. 8-11).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        components : None or sequence of L index sequences, default=None
            Components kept per level, e.g. ``((0,), ())`` for the first component of level 1 alone; None
            keeps all.
        path : {"expansion", "kpca", "chained"} or None, default=None (``preimage_path``)
            "expansion": every hidden column is a direction in level 1's feature space (the expansion of
            H_l[:, k] over the training points), weighted by the point's hidden feature h_l*[k] (with L = 1,
            kernel PCA denoising). "kpca": the paper's eq. 11 literally for the selected columns H_S of all
            levels: beta = H_S H_S^T k~_1(X, x*), without the eigenvalue scaling. "chained": the selected
            components of one level l are mapped to a pre-image in level l - 1's hidden space (by level l's
            kernel, starting from h_{l-1}*), which is decoded through all of level l - 1's columns, and so on
            down to the input space; components=None selects all components of the last level. A linear
            level 2 makes the chained level-1 point 0, as H_1^T H_2 = 0.
            The input-space pre-image starts from x* itself.

        Returns
        -------
        ndarray of shape (n_samples, n_features)
        """
        X = self._validate_new(X)
        path = self.preimage_path if path is None else path
        check_choices((("path", path, PREIMAGE_PATHS),))
        selected = self._selected(components)
        if path == "kpca":
            H = np.hstack([H[:, keep] for H, keep in zip(self.H_, selected)])
            beta = self._scores(X, 0, H) @ H.T
        else:
            levels = self._encode(X)
            if path == "chained":
                return self._chained(X, levels, selected, components)
            beta = self._expansion(levels, selected)
        return self._preimage(self._with_mean(beta), 0, X)

    def inverse_transform(self, X: ArrayLike) -> np.ndarray:
        """Map hidden features (as ``transform`` returns them) back to input space.

        The point sum_l H_l z_l in level 1's feature space (the expansion of ``denoise``) is mapped back by
        the pre-image of level 1's kernel, starting from the kernel smoother over the 10 most similar
        training points.

        Parameters
        ----------
        X : array-like of shape (n_samples, sum of n_components)

        Returns
        -------
        ndarray of shape (n_samples, n_features)
        """
        check_is_fitted(self)
        Z = np.asarray(X, dtype=np.float64)
        p = self._n_features_out
        if Z.ndim != 2 or Z.shape[1] != p:
            raise ValueError(f"X: expected shape (n_samples, {p}), got {Z.shape}")
        if not np.all(np.isfinite(Z)):
            raise ValueError("X: contains NaN or infinity")
        beta = self._with_mean(Z @ np.hstack(self.H_).T)
        name, gamma, degree, coef0 = self._specs[0]
        similarities = kernel_product(
            self.X_fit_, None, np.ascontiguousarray(beta.T), name, gamma, degree, coef0, n_threads=self.n_threads
        ).T
        start = kernel_smoother(similarities, self.X_fit_, SMOOTHER_NEIGHBORS)
        return self._preimage(beta, 0, start)


# ---------------------------------------------------------------------- helpers


def _not_converged_message(method, result, tol):
    others = [name for name in ("bb_pg", "pg", "cayley_bb", "pg_anderson") if name != method]
    if result.status in ("max_iter", "max_outer"):
        advice = "increase max_iter or try stiefel_method=" + " or ".join(repr(name) for name in others)
    elif result.status == "non_finite":
        advice = "the kernels give non-finite values near this point (e.g. a poly kernel with a fractional degree)"
    else:
        advice = (
            "the tolerance is below what this method reaches in floating point on this problem; use a larger tol "
            "or try stiefel_method=" + " or ".join(repr(name) for name in others)
        )
    return (
        f"ConstrainedDeepRKM: the Stiefel method {method!r} stopped with status {result.status!r} "
        f"({result.message}); grad_norm {result.grad_norm:.3g}, tol {tol:g}: {advice}"
    )


def _clamp_sizes(sizes, n_samples):
    """Levels' sizes scaled down in proportion so that they sum to at most n_samples, each at least 1 (largest
    remainders first), e.g. (10, 5) -> (6, 3) for 10 samples; n_samples >= len(sizes)."""
    total = sum(sizes)
    scaled = [max(1, (s * n_samples) // total) for s in sizes]
    while sum(scaled) > n_samples:
        largest = max(range(len(scaled)), key=lambda level: scaled[level])
        scaled[largest] -= 1
    return tuple(int(s) for s in scaled)


def _per_level(value, name, n_levels):
    """A parameter given once for all levels or as a tuple with one entry per level."""
    if isinstance(value, (tuple, list)):
        if len(value) != n_levels:
            raise ValueError(f"{name}: must be one value or a tuple of {n_levels} (one per level), got {value!r}")
        return tuple(value)
    return (value,) * n_levels


def _core_spec(spec):
    """(name, gamma, degree, coef0) as the core objective takes it (linear: gamma unused, 1.0)."""
    name, gamma, degree, coef0 = spec
    return (name, 1.0 if gamma is None else float(gamma), float(degree), float(coef0))


def _kernel_product_of(blocks, level, spec, n_threads):
    """B -> K_l B for level l >= 1 (0-based), K_l the kernel of the rows of blocks[level - 1], streamed."""
    name, gamma, degree, coef0 = spec
    return lambda B: kernel_product(blocks[level - 1], None, B, name, gamma, degree, coef0, n_threads=n_threads)


def _level_statistics(product, H, rotate, center):
    """(H, (A, column_means, grand_mean)) of one level: A = H^T K~ H with K~ the (centred) kernel matrix, whose
    product with a matrix is `product`. With `rotate`, H is first turned to the eigenvectors of A (descending,
    signs fixed), which makes A diagonal."""
    n = H.shape[0]
    B = H - H.mean(axis=0) if center else H
    KB = product(np.column_stack([B, np.full(n, 1.0 / n)]))
    column_means = KB[:, -1]
    A = B.T @ KB[:, :-1]
    A = (A + A.T) / 2
    if rotate:
        _, Q = np.linalg.eigh(A)
        Q = Q[:, ::-1]
        HQ = H @ Q
        signs = sign_flips(HQ)
        H, Q = HQ * signs, Q * signs
        A = Q.T @ A @ Q
    # Centring's column means: those of K (K is symmetric, K 1/N); B's columns sum to 0 so K~ B = C K B.
    return H, (A, column_means, float(column_means.mean()))


def _pseudo_inverse(A):
    """A^+ of the symmetric positive semi-definite A, with eigenvalues at rounding level taken as zero."""
    w, V = np.linalg.eigh(A)
    w = numerically_positive(w, np.float64)
    inverse = np.divide(1.0, w, out=np.zeros_like(w), where=w > 0)
    return (V * inverse) @ V.T


def _self_kernel(Z, spec):
    """(k(z, z), d k(z, z) / dz) for the rows z of Z."""
    name, gamma, degree, coef0 = spec
    squared = np.einsum("ij,ij->i", Z, Z)
    if name == "poly":
        base = gamma * squared + coef0
        return base**degree, (2.0 * degree * gamma * base ** (degree - 1.0))[:, None] * Z
    if name == "linear":
        return squared, 2.0 * Z
    if name in ("cosine", "tanimoto"):
        return (squared > 0).astype(np.float64), np.zeros_like(Z)
    return np.ones(Z.shape[0]), np.zeros_like(Z)


def _preimage(beta, Y, spec, start, max_iter, n_threads):
    """argmin_x ||phi(x) - sum_i beta_i phi(y_i)||^2 per row of beta, starting from the rows of `start`: the
    Gaussian fixed point (rbf), the closed form Y^T beta (linear), or L-BFGS on r(x) = k(x, x) - 2 beta^T k(Y, x)
    (other kernels; the terms of the rows are independent, so one L-BFGS runs on their sum)."""
    name, gamma, degree, coef0 = spec
    beta = np.ascontiguousarray(beta)
    if name == "rbf":
        return gaussian_fixed_point(beta, Y, gamma, start, max_iter, n_threads=n_threads)[0]
    if name == "linear":
        return beta @ Y
    shape = start.shape

    def residual(x):
        Z = x.reshape(shape)
        K = kernel_matrix(Z, Y, name, gamma, degree, coef0, n_threads=n_threads)
        value, gradient = _self_kernel(Z, spec)
        gradient = gradient - 2.0 * kernel_gradient(Z, Y, beta, name, gamma, degree, coef0, n_threads=n_threads)
        return float(value.sum() - 2.0 * np.sum(beta * K)), gradient.ravel()

    found = scipy.optimize.minimize(
        residual,
        np.asarray(start, dtype=np.float64).ravel(),
        jac=True,
        method="L-BFGS-B",
        options={"maxiter": max_iter},
    )
    return found.x.reshape(shape)
