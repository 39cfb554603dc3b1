"""Deep restricted kernel machines (Suykens 2017, sections 4-5): three levels coupled through their hidden features.

Two architectures:

- ``"lssvm_kpca_kpca"`` (§4.2, eqs. 4.12-4.18): LS-SVM regression (or classification on +-1 codes) in level 1
  followed by two kernel PCA levels on its hidden features. Solved level by level (eq. 4.18): the level-1
  system fuses the data kernel K1 with the linear kernel of level 2 (weight 1/eta2), level 2 fuses the linear
  kernels of levels 1 and 3. Out of sample it predicts as an LS-SVM with the deep H1 (eq. 4.16).
- ``"kpca_kpca_lssvm"`` (§4.1, eqs. 4.1-4.11): two kernel PCA levels followed by LS-SVM regression. Solved level
  by level for linear levels 2-3 (eq. 4.11), or in the primal (§5): ``solver="reduced_set"`` is M1 (eqs.
  5.2-5.4, kernels in all levels, W_l written on a reduced set of M training points) and
  ``solver="feedforward"`` is M2 (eqs. 5.5-5.6, a deep feedforward network), both trained with L-BFGS on the
  stabilized objective J = J1 + J2 + J3 + (c_stab/2)(J1^2 + J2^2) of eq. 5.3 (appendix: the kernel PCA terms
  are unbounded below on their own). Out of sample: eqs. 4.9, 5.4 and 5.6.

The readings of steps the paper leaves open are listed in the class docstring.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin, _fit_context, clone
from sklearn.metrics import accuracy_score, r2_score
from sklearn.preprocessing import LabelEncoder
from sklearn.utils import ClassifierTags, RegressorTags, check_random_state
from sklearn.utils._param_validation import StrOptions
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import check_classification_targets, type_of_target
from sklearn.utils.validation import check_is_fitted, column_or_1d, validate_data

from rkm import _core
from rkm._utils.calibration import fit_platt
from rkm._utils.coding import CODINGS, class_codes, class_scores
from rkm._utils.exceptions import DivergenceError
from rkm._utils.optimize import minimize_objective
from rkm._utils.progress import Progress
from rkm._utils.threads import blas_threads, thread_count
from rkm._utils.validation import (
    FINITE,
    N_THREADS,
    NONNEGATIVE,
    PER_LEVEL,
    POSITIVE,
    POSITIVE_INT,
    RANDOM_STATE,
    VERBOSE,
    check_int,
    check_matrix,
    check_memory,
    check_positive,
    kernel_constraints,
)
from rkm._utils.warn import warn
from rkm.deep import _levelwise, _primal
from rkm.exceptions import ConvergenceWarning
from rkm.kernels import Kernel, kernel_matrix, kernel_product, kernel_spec, names_with

ARCHITECTURES = ("lssvm_kpca_kpca", "kpca_kpca_lssvm")
SOLVERS = ("levelwise", "reduced_set", "feedforward")
PHASES = ("joint", "forward_backward", "forward")
TASKS = ("auto", "regression", "classification")
INITS = ("zeros", "random")
REGULARIZERS = ("H", "W")
OBJECTIVES = ("full", "level3")
# Kernels of levels 2-3 of the reduced-set model: its gradient needs derivatives in both arguments.
SMOOTH_KERNELS = names_with("layer_derivatives")
# Folds of the internal cross-validation of DeepRKMClassifier(probability=True) (SVC's 5, as LSSVMClassifier).
PROBABILITY_FOLDS = 5

__all__ = ["DeepRKM", "DeepRKMClassifier", "DeepRKMRegressor", "DivergenceError"]


class DeepRKM(BaseEstimator):
    """Deep restricted kernel machine with three levels (Suykens 2017, sections 4-5).

    Parameters
    ----------
    architecture : {"lssvm_kpca_kpca", "kpca_kpca_lssvm"}, default="lssvm_kpca_kpca"
        Regression level first and two kernel PCA levels after it (§4.2, the model of Table 2 and §6.2.2), or
        two kernel PCA levels and the regression level last (§4.1, the model of Table 1).
    n_components : int or sequence of two ints, default=(1, 1)
        The kernel PCA levels' numbers of components in level order: (s2, s3) for "lssvm_kpca_kpca",
        (s1, s2) for "kpca_kpca_lssvm"; an int is the same number for both.
    kernel : str, rkm.kernels.Kernel or sequence of three of them, default="rbf"
        Level 1's kernel (the data level) for solver="levelwise", whose levels 2-3 are linear (eqs. 4.11,
        4.18); for solver="reduced_set", one kernel for all three levels or one per level (levels 2-3:
        "rbf", "linear" or "poly"). Unused by solver="feedforward".
    gamma : float, None or sequence of three of them, default=None
        rbf/poly parameter, one for all levels or one per level as ``kernel``; None means 1 / (the level's input
        width). The paper's exp(-||x - y||^2 / sigma^2) is ``gamma = 1 / sigma^2``
        (``rkm.RBF.from_sigma(sigma)``).
    degree : float, default=3
        Polynomial kernel degree (all levels).
    coef0 : float, default=1.0
        Polynomial kernel offset (all levels).
    lam : float, default=1.0
        The regression level's lambda (lam1 of eq. 4.18, lam3 of eqs. 4.11 and 5.3).
    eta : float, sequence of three floats or None, default=None
        eta1, eta2, eta3, or one value for all three levels. In eqs. 4.11 and 4.18, 1/eta2 and 1/eta3 weigh the
        linear kernels fused into levels 1 and 2 (the "kernel fusion" of §4.2); small values couple the levels
        strongly. None: (1, 1, 1) for solver="levelwise" and (1, 1e-5, 1e-5) for the primal solvers; the
        resolved values are ``eta_``. For "lssvm_kpca_kpca" with phases="joint" and s2 >= p, the solution's
        level 1 is the LS-SVM with ridge lam + 1/eta2 (see phases), so the paper's strong coupling
        1/eta2 = 1e5 (§6.2.1) makes it nearly a constant: the level-wise default is the weak coupling of the
        shallow models. The primal objectives (eqs. 5.3, 5.6) need the strong coupling: with (1, 1, 1) their
        regularization wins and M2 ends at a constant predictor (R^2 = 0 on scikit-learn's diabetes data,
        against 0.60 with (1, 1e-5, 1e-5)).
    n_passes : int, default=10
        solver="levelwise": the most passes of forward (and backward) level steps (eq. 5.1); the passes stop
        once one changes the hidden features by at most tol (relative).
    solver : {"levelwise", "reduced_set", "feedforward"}, default="levelwise"
        Level-wise solving (eqs. 4.11, 4.18), M1 (eqs. 5.2-5.4) or M2 (eqs. 5.5-5.6); the last two need
        architecture="kpca_kpca_lssvm".
    phases : {"joint", "forward_backward", "forward"}, default="joint"
        solver="levelwise". "joint": for "lssvm_kpca_kpca" with s2 >= p (outputs), the coupled equations 4.18
        solved together: with linear levels 2-3, every solution has level 1 equal to the LS-SVM with lam + 1/eta2
        along the singular directions of H1 that level 2 keeps and lam along the others; keeping its leading
        components, level 2 keeps all of them, so H1 is one LS-SVM solve with lam + 1/eta2, and levels 2-3
        follow (a few steps). The result satisfies eq. 4.18 and does not depend on n_passes. Otherwise
        (s2 < p, or "kpca_kpca_lssvm") "joint" runs forward-backward passes. "forward_backward": each pass is
        forward (L1, L2, L3) then backward (L2, L1), the heuristic of §5.1; "forward": forward only. With
        strong coupling the passes of eq. 4.18 do not converge: each level-1 step makes H1 nearly orthogonal to
        the H2 built from the previous H1, and the unknowns alternate between two states (a period-2 cycle,
        neither a solution of eq. 4.18; an even number of passes ends within about 1e-6 of the plain LS-SVM).
        A cycle or a pass limit reached unsettled raises a ConvergenceWarning.
    init : {"zeros", "random"}, default="zeros"
        solver="levelwise" with passes: initial H2, H3. With zeros the first level-1 step of "lssvm_kpca_kpca"
        is the plain LS-SVM; "random" draws orthonormal columns.
    task : {"auto", "regression", "classification"}, default="auto"
        "auto" follows scikit-learn's ``type_of_target``: "binary" and "multiclass" targets (booleans, strings,
        integers, and floats that are all integral, such as 0.0 ... 9.0) are classification, "continuous" ones
        regression. Integer-valued regression targets therefore need task="regression", or
        ``DeepRKMRegressor``; ``DeepRKMRegressor`` and ``DeepRKMClassifier`` fix the task and are what
        scikit-learn's ``is_regressor`` / ``is_classifier`` recognize.
    coding : {"one_vs_all", "minimum_output"}, default="one_vs_all"
        Classification: the +-1 output code of the regression level (as LSSVMClassifier; §6.2.2 uses one
        output per class).
    c_stab : float, default=10.0
        Stabilization constant of eq. 5.3 (primal solvers).
    c0 : float, default=0.0
        Weight of the -c0 (Tr Lambda1 + Tr Lambda2) term (§5.2; variant a of §6.1 uses 0.1).
    regularizer : {"H", "W"}, default="H"
        Primal solvers' regularization: (eta_l/2) ||H~_l||^2 in place of (eta_l/2) Tr(W_l^T W_l) ("H", §5.2)
        or the latter itself ("W"). M2 always regularizes its W_l.
    objective : {"full", "level3"}, default="full"
        The whole stabilized objective, or J3 alone (variant c of §6.1).
    n_reduced : int, default=20
        M1: size M of the reduced set (a uniformly drawn subset of the training inputs, per initialization).
    hidden_layer_sizes : int or sequence of three ints, default=(3, 3, 3)
        M2: hidden units nh1, nh2, nh3 of the three levels' hidden layers, or one number for all three.
    toeplitz : bool, default=False
        M2: Toeplitz interconnection matrices U1, U2 (M2,b,T of Table 1; the last level's U3 stays dense).
    n_init : int, default=1
        Primal solvers: random initializations; the one with the lowest validation error (fit's X_val, y_val)
        or, without validation data, the lowest objective is kept.
    max_iter : int, default=400
        Primal solvers: L-BFGS iterations per initialization (the paper's fminunc limit).
    tol : float, default=1e-6
        Primal solvers: L-BFGS gradient tolerance. Level-wise: the passes stop once one changes the hidden
        features by at most tol (relative); a ConvergenceWarning is raised when they do not.
    n_threads : int or None, default=None
        Threads for the core and BLAS (None: OpenMP's default; -1: all cores).
    random_state : int, RandomState instance or None, default=None
        Seeds initializations, reduced sets and random starts.
    verbose : int, default=0
        0: silent; 1: one line per stage (fit, initialization); 2: also the objective after each level step or
        L-BFGS iteration.

    Attributes
    ----------
    H_ : list of three ndarrays
        Per-level hidden features. "levelwise": H1, H2, H3 at the training points (N rows); for classification
        H1 solves the regression system on the +-1 codes (LSSVMClassifier's ``dual_coef_``, not its ``H_``). "reduced_set": the
        reduced-set hidden features H~1, H~2, H~3 (M rows). "feedforward": Lambda1^-1 e1, Lambda2^-1 e2 and
        e3 / lam at the training points (the stationarity conditions of the kernel PCA and LS-SVM levels).
    intercept_ : ndarray of shape (n_outputs,)
    eta_ : tuple of three floats
        The eta1, eta2, eta3 used (eta, or its per-solver default).
    eigenvalues_ : list of two ndarrays
        The diagonals of Lambda of the two kernel PCA levels, in level order.
    n_effective_components_ : tuple of two ints
        "levelwise": components with a non-zero eigenvalue per kernel PCA level. A level's fused matrix has
        rank at most the width of its inputs; the other components are returned as zero columns.
    objective_ : float
        The final objective: J_deep (eqs. 4.6, 4.13, W eliminated) or the minimized primal objective.
    objective_history_ : list of float
        objective after each level step (levelwise) or each L-BFGS iteration (primal, selected init).
    n_iter_ : int
        Passes run (levelwise) or L-BFGS iterations of the selected initialization.
    pass_changes_ : ndarray of shape (``n_iter_`` - 1,)
        "levelwise": the largest relative change of H1, H2, H3 over each pass after the first.
    converged_ : bool
        "levelwise": whether the last pass changed the hidden features by at most tol.
    cycle_ : bool
        "levelwise": whether the passes alternate between two states (see phases).
    init_results_ : list of dict
        Primal solvers: per initialization, its objective, iterations, validation score and status.
    terms_ : ndarray of shape (3,)
        Primal solvers: the level terms J1, J2, J3 at the solution.
    reduced_set_ : ndarray of shape (n_reduced, n_features)
        M1: the reduced-set points.
    classes_, codes_ : ndarray
        Classification: the labels and their +-1 codewords.
    task_ : str
        "regression" or "classification" (``task="auto"`` resolved).
    n_features_in_ : int

    Notes
    -----
    Readings of steps the paper leaves open:

    - level-wise: eigenvectors have unit norm and the sign that makes their largest entry positive; L3 of eq.
      4.18 is a multiple of the projector onto span(H2), solved by H3 = H2[:, :s3]; eq. 4.11's level 1 is
      uncentred, as printed; classification trains level 1 on +-1 codes (eq. 3.22) and predicts the code with
      the largest output. Eigenvalues below 1e-12 of the largest give zero columns (the fused levels have rank
      at most the width of their inputs); tied eigenvalues (within 1e-8) take the basis that follows the order
      of the level's input columns (in eq. 4.11's first pass, level 2 is then H1[:, :s2]).
    - eq. 4.9 out of sample: e1(x) = (1/eta1) sum_j h1_j K1(x_j, x), then linear levels 2-3 on Lambda^-1 e; on
      training points this differs from the coupled solution's h, since the coupling terms of eq. 4.10 are
      absent out of sample. "kpca_kpca_lssvm" level-wise therefore re-solves level 3 after the passes on the
      features F2 = Lambda2^-1 e2 that eq. 4.9 computes at the training points (``H_``[2] and ``intercept_`` are that
      solve's; W3 = F2^T H3 / eta3): regressing Y on the coupled H2, which level 2's fused term
      (1/eta3) H3 H3^T fills with the targets, fitted the training set to ~0 while predicting a near-constant.
      predict(X_train) is the training-time output F2 W3 + b.
    - primal solvers: the sums of eq. 5.3 run over all N training points (the reduced set only parametrizes
      W_l); H~, U, W ~ N(0, 0.1^2), biases 0, Lambda = I, Lambda bounded below by 1e-8 in L-BFGS-B; M2's
      activation is tanh; -c0 (Tr Lambda1 + Tr Lambda2) is added outside the stabilizing squares. A diverging
      objective stops the fit with ``rkm.deep.DivergenceError``, which carries the last finite iterate.

    Examples
    --------
    >>> import numpy as np
    >>> from rkm import DeepRKM
    >>> X = np.linspace(-3, 3, 80)[:, None]
    >>> model = DeepRKM(n_components=(1, 1), gamma=1.0, lam=1e-3, eta=(1.0, 1e3, 1e3)).fit(X, np.sin(X).ravel())
    >>> model.predict(X).shape, model.converged_  # the joint solve: the LS-SVM with lam + 1/eta2 = 2e-3
    ((80,), True)
    >>> float(np.max(np.abs(model.predict(X) - np.sin(X).ravel()))) < 0.05
    True
    """

    _parameter_constraints: dict = {
        "architecture": [StrOptions(set(ARCHITECTURES))],
        "n_components": [*POSITIVE_INT, *PER_LEVEL],
        **kernel_constraints(precomputed=False, per_level=True),
        # One polynomial degree and offset for all levels.
        "degree": NONNEGATIVE,
        "coef0": FINITE,
        "lam": POSITIVE,
        "eta": [None, *POSITIVE, *PER_LEVEL],
        "n_passes": POSITIVE_INT,
        "solver": [StrOptions(set(SOLVERS))],
        "phases": [StrOptions(set(PHASES))],
        "init": [StrOptions(set(INITS))],
        "task": [StrOptions(set(TASKS))],
        "coding": [StrOptions(set(CODINGS))],
        "c_stab": NONNEGATIVE,
        "c0": NONNEGATIVE,
        "regularizer": [StrOptions(set(REGULARIZERS))],
        "objective": [StrOptions(set(OBJECTIVES))],
        "n_reduced": POSITIVE_INT,
        "hidden_layer_sizes": [*POSITIVE_INT, *PER_LEVEL],
        "toeplitz": ["boolean"],
        "n_init": POSITIVE_INT,
        "max_iter": POSITIVE_INT,
        "tol": POSITIVE,
        "n_threads": N_THREADS,
        "random_state": RANDOM_STATE,
        "verbose": VERBOSE,
    }

    def __init__(
        self,
        architecture: str = "lssvm_kpca_kpca",
        *,
        n_components: int | Sequence[int] = (1, 1),
        kernel: str | Kernel | Sequence[str | Kernel] = "rbf",
        gamma: float | None | Sequence[float | None] = None,
        degree: float = 3,
        coef0: float = 1.0,
        lam: float = 1.0,
        eta: float | Sequence[float] | None = None,
        n_passes: int = 10,
        solver: str = "levelwise",
        phases: str = "joint",
        init: str = "zeros",
        task: str = "auto",
        coding: str = "one_vs_all",
        c_stab: float = 10.0,
        c0: float = 0.0,
        regularizer: str = "H",
        objective: str = "full",
        n_reduced: int = 20,
        hidden_layer_sizes: int | Sequence[int] = (3, 3, 3),
        toeplitz: bool = False,
        n_init: int = 1,
        max_iter: int = 400,
        tol: float = 1e-6,
        n_threads: int | None = None,
        random_state: int | np.random.RandomState | None = None,
        verbose: int = 0,
    ) -> None:
        self.architecture = architecture
        self.n_components = n_components
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.lam = lam
        self.eta = eta
        self.n_passes = n_passes
        self.solver = solver
        self.phases = phases
        self.init = init
        self.task = task
        self.coding = coding
        self.c_stab = c_stab
        self.c0 = c0
        self.regularizer = regularizer
        self.objective = objective
        self.n_reduced = n_reduced
        self.hidden_layer_sizes = hidden_layer_sizes
        self.toeplitz = toeplitz
        self.n_init = n_init
        self.max_iter = max_iter
        self.tol = tol
        self.n_threads = n_threads
        self.random_state = random_state
        self.verbose = verbose

    # ------------------------------------------------------------------ parameters

    def _check_params_vs_input(self, n_samples, n_features, n_outputs):
        """The rules that need the data or combine parameters (types and ranges are in _parameter_constraints).

        Sets the resolved per-level values: _components (two ints), _etas (three floats), _hidden_layer_sizes
        (three ints) and _kernels ((name, gamma, degree, coef0) of the three levels).
        """
        if self.solver != "levelwise" and self.architecture != "kpca_kpca_lssvm":
            raise ValueError(
                f"solver: {self.solver!r} is the primal model of architecture='kpca_kpca_lssvm' "
                "(eqs. 5.3-5.6); use solver='levelwise' for 'lssvm_kpca_kpca'"
            )
        eta = self.eta if self.eta is not None else (1.0, 1.0, 1.0) if self.solver == "levelwise" else (1.0, 1e-5, 1e-5)
        self._etas = self.eta_ = tuple(check_positive(v, "eta") for v in _per_level(eta, "eta", 3))
        self._components = tuple(check_int(v, "n_components") for v in _per_level(self.n_components, "n_components", 2))
        self._check_component_limits(n_samples)
        if self.solver == "reduced_set" and self.n_reduced > n_samples:
            raise ValueError(f"n_reduced: at most n_samples={n_samples}, got {self.n_reduced}")
        self._hidden_layer_sizes = tuple(
            check_int(v, "hidden_layer_sizes") for v in _per_level(self.hidden_layer_sizes, "hidden_layer_sizes", 3)
        )
        self._kernels = self._level_kernels(n_features, n_outputs)

    def _check_component_limits(self, n_samples):
        first, second = self._components
        if self.architecture == "lssvm_kpca_kpca":
            # H2's columns are eigenvectors orthogonal to 1 (H1^T 1 = 0): at most N - 1 of them.
            if first > n_samples - 1:
                raise ValueError(f"n_components: s2 = {first} exceeds n_samples - 1 = {n_samples - 1}")
            if second > first:
                raise ValueError(
                    f"n_components: s3 = {second} exceeds s2 = {first} (level 3 takes its components "
                    "from level 2's span, eq. 4.18)"
                )
        elif self.solver == "levelwise" and max(first, second) > n_samples:
            raise ValueError(f"n_components: ({first}, {second}) exceeds n_samples = {n_samples}")

    def _level_kernels(self, n_features, n_outputs):
        """(name, gamma, degree, coef0) of the three levels."""
        names = self.kernel if isinstance(self.kernel, (tuple, list)) else None
        if names is not None and len(names) != 3:
            raise ValueError(f"kernel: a str or one kernel per level (3), got {self.kernel!r}")
        gammas = self.gamma if isinstance(self.gamma, (tuple, list)) else (self.gamma,) * 3
        if len(gammas) != 3:
            raise ValueError(f"gamma: a number, None or one per level (3), got {self.gamma!r}")
        if names is None:
            names = (self.kernel, "linear", "linear") if self.solver == "levelwise" else (self.kernel,) * 3
        widths = self._level_input_widths(n_features, n_outputs)
        specs = [
            kernel_spec(kernel, gamma, self.degree, self.coef0, width)
            for kernel, gamma, width in zip(names, gammas, widths)
        ]
        level_names = tuple(spec[0] for spec in specs)
        if self.solver == "levelwise" and level_names[1:] != ("linear", "linear"):
            raise ValueError(
                f"kernel: solver='levelwise' needs linear kernels in levels 2 and 3 (eqs. 4.11, "
                f"4.18), got {level_names}"
            )
        if self.solver == "reduced_set" and not set(level_names[1:]) <= set(SMOOTH_KERNELS):
            raise ValueError(
                f"kernel: solver='reduced_set' needs differentiable kernels in levels 2-3 "
                f"{SMOOTH_KERNELS}, got {level_names[1:]}"
            )
        return specs

    def _level_input_widths(self, n_features, n_outputs):
        first, second = self._components
        if self.architecture == "lssvm_kpca_kpca":
            return (n_features, n_outputs, first)
        return (n_features, first, second)

    # ------------------------------------------------------------------ fitting

    def _targets(self, X, y):
        """Validated X and the regression targets Y (N x p, float64): y itself or its +-1 class codes."""
        X, y = validate_data(self, X, y, dtype=np.float64, order="C", multi_output=True, ensure_min_samples=2)
        task = self._task_param()
        if task == "auto":
            # scikit-learn's rule: integral values (of any dtype), booleans and strings are class labels.
            task = "classification" if type_of_target(y, input_name="y") in ("binary", "multiclass") else "regression"
        self.task_ = task
        if task == "regression":
            Y = np.asarray(y, dtype=np.float64)
            if not np.all(np.isfinite(Y)):
                raise ValueError("y: must not contain NaN or infinity")
            self._single_output = Y.ndim == 1
            return X, Y.reshape(X.shape[0], -1)
        y = column_or_1d(y, warn=True)
        check_classification_targets(y)
        encoder = LabelEncoder().fit(y)
        self.classes_ = encoder.classes_
        if self.classes_.size < 2:
            raise ValueError(f"y: needs at least two classes, got 1 class ({self.classes_[0]!r})")
        self.codes_ = class_codes(self.classes_.size, self.coding)
        return X, self.codes_[encoder.transform(y)]

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(
        self, X: ArrayLike, y: ArrayLike, X_val: ArrayLike | None = None, y_val: ArrayLike | None = None
    ) -> DeepRKM:
        """Fit the deep RKM.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
            Targets (regression) or class labels (classification).
        X_val, y_val : array-like or None, default=None
            Validation data on which the primal solvers select among their n_init initializations (the paper's
            protocol); without it the lowest objective wins.

        Returns
        -------
        self : DeepRKM
            The fitted model.
        """
        self._progress = Progress(type(self).__name__, self.verbose)
        X, Y = self._targets(X, y)
        self._training_targets = Y
        self._check_params_vs_input(*X.shape, Y.shape[1])
        rng = check_random_state(self.random_state)
        threads = thread_count(self.n_threads)
        self._progress(f"{self.architecture}, solver {self.solver!r}, N = {X.shape[0]}, {Y.shape[1]} output(s)")
        # M2's GEMMs are small (N x a few hidden units): one BLAS thread runs them fastest.
        with blas_threads(1 if self.solver == "feedforward" else threads):
            if self.solver == "levelwise":
                self._fit_levelwise(X, Y, rng)
            else:
                self._fit_primal(X, Y, rng, X_val, y_val)
        return self

    def _initial_hidden(self, n_samples, rng):
        s_next, s_last = self._components if self.architecture == "lssvm_kpca_kpca" else (self._components[1], 0)
        if self.init == "zeros":
            return np.zeros((n_samples, s_next)), np.zeros((n_samples, s_last))
        Q, _ = np.linalg.qr(rng.standard_normal((n_samples, s_next)))
        return Q, Q[:, :s_last].copy()

    def _fit_levelwise(self, X, Y, rng):
        name, gamma, degree, coef0 = self._kernels[0]
        n = X.shape[0]
        copies = 1 if self.architecture == "lssvm_kpca_kpca" else 2
        check_memory(
            copies * n * n * 8,
            "X",
            f"{copies} {n} x {n} float64 matrices of the level-wise solver",
            advice="use fewer samples or solver='reduced_set'",
        )
        K = kernel_matrix(X, kernel=name, gamma=gamma, degree=degree, coef0=coef0, n_threads=self.n_threads)
        H2, H3 = self._initial_hidden(n, rng)
        if self.architecture == "lssvm_kpca_kpca":
            result = _levelwise.lssvm_kpca_kpca(
                K,
                Y,
                self._etas,
                float(self.lam),
                self._components,
                self.n_passes,
                self.phases,
                H2,
                H3,
                True,
                callback=self._report_step,
                tol=self.tol,
            )
            self.eigenvalues_ = [result.eigenvalues["level2"], result.eigenvalues["level3"]]
        else:
            H3 = np.zeros((n, Y.shape[1]))
            result = _levelwise.kpca_kpca_lssvm(
                K,
                Y,
                self._etas,
                float(self.lam),
                self._components,
                self.n_passes,
                self.phases,
                H2,
                H3,
                True,
                rng,
                self.n_threads,
                callback=self._report_step,
                tol=self.tol,
            )
            self.eigenvalues_ = [result.eigenvalues["level1"], result.eigenvalues["level2"]]
        self.H_ = result.H
        self.intercept_ = result.intercept
        if self.architecture == "kpca_kpca_lssvm":
            H1, H2, _ = result.H
            H3, self.intercept_, self._W3, _ = _levelwise.refit_last_level(
                H1, H2, self.eigenvalues_, result.K1_H1, self._etas, float(self.lam), Y, True
            )
            self.H_ = [H1, H2, H3]
        self.objective_history_ = [value for _, value in result.history]
        self.objective_ = self.objective_history_[-1]
        self.n_iter_ = result.n_passes
        self.n_effective_components_ = tuple(int(np.count_nonzero(w)) for w in self.eigenvalues_)
        self.pass_changes_ = np.asarray(result.pass_changes)
        self.converged_, self.cycle_ = result.converged, result.cycle
        self.X_fit_ = check_matrix(X, "X", copy=True)
        self._progress(f"{self.n_iter_} passes: J_deep = {self.objective_:.6g}")
        if self.cycle_:
            warn(
                f"{type(self).__name__}: the level-wise passes alternate between two states (a period-2 cycle: "
                f"each pass changes the hidden features by {self.pass_changes_[-1]:.2g} relative, two passes "
                f"return them to within tol = {self.tol:g}), so the result depends on the parity of n_passes and "
                "neither state solves the coupled equations. Strong coupling (large 1/eta2) makes each level-1 "
                "step nearly orthogonal to the H2 built from the step before; use phases='joint' (the coupled "
                "equations solved together) or weaker coupling (larger eta2)",
                ConvergenceWarning,
            )
        elif not self.converged_ and self.n_iter_ > 1:
            warn(
                f"{type(self).__name__}: the level-wise passes have not settled after n_passes = {self.n_passes}: "
                f"the last pass changed the hidden features by {self.pass_changes_[-1]:.2g} (relative) > tol = "
                f"{self.tol:g}, so the result depends on n_passes; see pass_changes_",
                ConvergenceWarning,
            )

    def _report_step(self, step, value):
        self._progress(f"{step}: J_deep = {value:.6g}", level=2)

    # ------------------------------------------------------------------ primal solvers (M1, M2)

    def _fit_primal(self, X, Y, rng, X_val, y_val):
        validation = None
        if X_val is not None or y_val is not None:
            if X_val is None or y_val is None:
                raise ValueError("X_val: give both X_val and y_val, or neither")
            validation = (validate_data(self, X_val, dtype=np.float64, order="C", reset=False), y_val)
        fit_one = self._fit_reduced_set_once if self.solver == "reduced_set" else self._fit_feedforward_once
        results = []
        for index in range(self.n_init):
            try:
                result = fit_one(X, Y, rng)
            except DivergenceError as error:
                if self.n_init == 1:
                    raise
                self._progress(f"init {index}: diverged ({error})")
                results.append({"init": index, "status": "diverged", "objective": None, "n_iter": error.nit})
                continue
            result["init"] = index
            result["status"] = "converged" if result["converged"] else "max_iter"
            if validation is not None:
                result["validation_score"] = self._score_outputs(
                    self._primal_outputs(validation[0], result), validation[1]
                )
            results.append(result)
            self._progress(
                f"init {index}: objective {result['objective']:.6g}, {result['n_iter']} iterations "
                f"({result['message']})"
            )
        finished = [r for r in results if r["status"] != "diverged"]
        if not finished:
            raise DivergenceError(
                f"all {self.n_init} initializations diverged; {_primal.DIVERGENCE_ADVICE}",
                iterate=None,
                fun=None,
                nit=0,
            )
        best = min(finished, key=self._selection_key(validation is not None))
        self.init_results_ = [
            {k: r.get(k) for k in ("init", "status", "objective", "n_iter", "validation_score")} for r in results
        ]
        self._store_primal(best, X)
        if not best["converged"]:
            warn(
                f"{type(self).__name__}: L-BFGS stopped after {best['n_iter']} iterations ({best['message']}); "
                "increase max_iter or tol",
                ConvergenceWarning,
            )

    def _lbfgs_verbose(self):
        """The L-BFGS driver prints one line per iteration: at verbose >= 2."""
        return 1 if self.verbose >= 2 else 0

    @staticmethod
    def _selection_key(by_validation):
        if by_validation:
            return lambda r: (-r["validation_score"], r["objective"])
        return lambda r: r["objective"]

    def _score_outputs(self, outputs, y):
        """Validation score of raw outputs: accuracy (classification) or R^2."""
        if self.task_ == "classification":
            return accuracy_score(y, self._labels(outputs))
        y = np.asarray(y, dtype=np.float64)
        return r2_score(y, outputs.ravel() if y.ndim == 1 else outputs)

    def _primal_options(self):
        return dict(
            etas=self._etas,
            lam3=float(self.lam),
            c_stab=float(self.c_stab),
            c0=float(self.c0),
            objective=self.objective,
        )

    def _fit_reduced_set_once(self, X, Y, rng):
        M = self.n_reduced
        s1, s2 = self._components
        p = Y.shape[1]
        reduced = X[np.sort(rng.choice(X.shape[0], size=M, replace=False))]
        name, gamma, degree, coef0 = self._kernels[0]
        K1 = kernel_matrix(X, reduced, kernel=name, gamma=gamma, degree=degree, coef0=coef0, n_threads=self.n_threads)
        G1 = kernel_matrix(reduced, kernel=name, gamma=gamma, degree=degree, coef0=coef0, n_threads=self.n_threads)
        dims = (M, s1, s2, p)
        options = self._primal_options()
        objective = _core.DeepReducedSetObjective(
            K1,
            G1,
            Y,
            dims,
            self._kernels[1],
            self._kernels[2],
            options["etas"],
            options["lam3"],
            options["c_stab"],
            options["c0"],
            self.regularizer,
            self.objective,
            self.n_threads,
        )
        theta0 = np.concatenate([0.1 * rng.standard_normal(M * (s1 + s2 + p)), np.zeros(p), np.ones(s1 + s2)])
        result = minimize_objective(
            lambda t: objective(t)[:2],
            theta0,
            n_eigen=s1 + s2,
            max_iter=self.max_iter,
            tol=self.tol,
            verbose=self._lbfgs_verbose(),
            advice=_primal.DIVERGENCE_ADVICE,
        )
        return {
            "theta": result.theta,
            "objective": float(result.fun),
            "n_iter": int(result.nit),
            "converged": result.converged,
            "message": result.message,
            "history": list(result.history),
            "dims": dims,
            "reduced_set": reduced,
            "terms": objective(result.theta)[2],
        }

    def _feedforward_dims(self, n_features, n_outputs):
        s1, s2 = self._components
        nh1, nh2, nh3 = self._hidden_layer_sizes
        return (n_features, nh1, nh2, nh3, s1, s2, n_outputs)

    def _fit_feedforward_once(self, X, Y, rng):
        dims = self._feedforward_dims(X.shape[1], Y.shape[1])
        options = self._primal_options()
        theta0 = _primal.initial_feedforward(dims, self.toeplitz, rng)

        def fun(theta):
            f, grad, _ = _primal.feedforward_objective(
                theta,
                X,
                Y,
                dims,
                options["etas"],
                options["lam3"],
                options["c_stab"],
                options["c0"],
                options["objective"],
                self.toeplitz,
            )
            return f, grad

        result = minimize_objective(
            fun,
            theta0,
            n_eigen=dims[4] + dims[5],
            max_iter=self.max_iter,
            tol=self.tol,
            verbose=self._lbfgs_verbose(),
            advice=_primal.DIVERGENCE_ADVICE,
        )
        terms = _primal.feedforward_objective(
            result.theta,
            X,
            Y,
            dims,
            options["etas"],
            options["lam3"],
            options["c_stab"],
            options["c0"],
            options["objective"],
            self.toeplitz,
        )[2]
        return {
            "theta": result.theta,
            "objective": float(result.fun),
            "n_iter": int(result.nit),
            "converged": result.converged,
            "message": result.message,
            "history": list(result.history),
            "dims": dims,
            "terms": terms,
        }

    def _primal_forward(self, X, result):
        """(Yhat, E1, E2) of the model of one primal fit at the rows of X (eqs. 5.4, 5.6)."""
        if self.solver == "reduced_set":
            name, gamma, degree, coef0 = self._kernels[0]
            K1 = kernel_matrix(
                X, result["reduced_set"], kernel=name, gamma=gamma, degree=degree, coef0=coef0, n_threads=self.n_threads
            )
            return _core.deep_reduced_set_forward(
                result["theta"], K1, result["dims"], self._kernels[1], self._kernels[2], self._etas, self.n_threads
            )
        return _primal.feedforward_forward(result["theta"], X, result["dims"], self.toeplitz)

    def _primal_outputs(self, X, result):
        return self._primal_forward(X, result)[0]

    def _store_primal(self, best, X):
        self._primal = best
        theta = best["theta"]
        self.objective_ = best["objective"]
        self.objective_history_ = best["history"]
        self.n_iter_ = best["n_iter"]
        self.terms_ = np.asarray(best["terms"])
        if self.solver == "reduced_set":
            M, s1, s2, p = best["dims"]
            blocks = np.split(theta, np.cumsum([M * s1, M * s2, M * p, p, s1]))
            self.H_ = [blocks[0].reshape(M, s1), blocks[1].reshape(M, s2), blocks[2].reshape(M, p)]
            self.intercept_, l1, l2 = blocks[3], blocks[4], blocks[5]
            self.reduced_set_ = best["reduced_set"]
        else:
            *_, s1, s2, p = best["dims"]
            l1, l2 = theta[-(s1 + s2) : -s2], theta[-s2:]
            self.intercept_ = theta[-(p + s1 + s2) : -(s1 + s2)]
            Yhat, E1, E2 = _primal.feedforward_forward(theta, X, best["dims"], self.toeplitz)
            self.H_ = [E1 / l1, E2 / l2, (self._training_targets - Yhat) / self.lam]
        self.eigenvalues_ = [l1, l2]

    # ------------------------------------------------------------------ prediction

    def _outputs(self, X):
        check_is_fitted(self, "H_")
        X = validate_data(self, X, dtype=np.float64, order="C", reset=False)
        if self.solver != "levelwise":
            return self._primal_outputs(X, self._primal)
        eta1, eta2, eta3 = self._etas
        name, gamma, degree, coef0 = self._kernels[0]
        H1, H2, H3 = self.H_
        E1 = (
            kernel_product(
                X, self.X_fit_, H1, kernel=name, gamma=gamma, degree=degree, coef0=coef0, n_threads=self.n_threads
            )
            / eta1
        )
        if self.architecture == "lssvm_kpca_kpca":
            return E1 + self.intercept_  # eq. 4.16
        # Eq. 4.9 with linear levels 2-3: e2 = (1/eta2) H2^T H1 Lambda1^-1 e1,
        # yhat = (1/eta3) H3^T H2 Lambda2^-1 e2 + b.
        # Level 3 was solved on these features at the training points (refit_last_level): W3 = F2^T H3 / eta3.
        l1, l2 = (_levelwise.pseudo_inverse(w) for w in self.eigenvalues_)
        E2 = (E1 * l1) @ (H1.T @ H2) / eta2
        return (E2 * l2) @ self._W3 + self.intercept_

    def _labels(self, outputs):
        scores = class_scores(outputs, self.codes_, self.coding)
        indices = (scores > 0).astype(int) if scores.ndim == 1 else np.argmax(scores, axis=1)
        return self.classes_[indices]

    def _is_classifier(self):
        return getattr(self, "task_", self._task_param()) == "classification"

    def _task_param(self):
        """The task asked for: the ``task`` parameter here, fixed in DeepRKMRegressor and DeepRKMClassifier."""
        return self.task

    @available_if(_is_classifier)
    def decision_function(self, X: ArrayLike) -> np.ndarray:
        """Classification scores: the output (two classes; positive means ``classes_[1]``) or one score per
        class, as LSSVMClassifier.decision_function.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,) or (n_samples, n_classes)
        """
        return class_scores(self._outputs(X), self.codes_, self.coding)

    def predict(self, X: ArrayLike) -> np.ndarray:
        """Predicted targets (regression) or class labels (classification) through all levels (eqs. 4.9,
        4.16, 5.4, 5.6).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,) or (n_samples, n_outputs)
        """
        outputs = self._outputs(X)
        if self.task_ == "classification":
            return self._labels(outputs)
        return outputs.ravel() if self._single_output else outputs

    def score(self, X: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None) -> float:
        """Accuracy (classification) or R^2 (regression) on (X, y).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
        sample_weight : array-like of shape (n_samples,) or None, default=None

        Returns
        -------
        float
        """
        predictions = self.predict(X)
        if self.task_ == "classification":
            return accuracy_score(y, predictions, sample_weight=sample_weight)
        return r2_score(y, predictions, sample_weight=sample_weight)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # task="auto" decides at fit time; scikit-learn's tools see a classifier or regressor only when it is set.
        task = self._task_param()
        if task == "classification":
            tags.estimator_type, tags.classifier_tags = "classifier", ClassifierTags()
        elif task == "regression":
            tags.estimator_type, tags.regressor_tags = "regressor", RegressorTags()
        tags.target_tags.required = True
        tags.target_tags.multi_output = task != "classification"
        return tags


class DeepRKMRegressor(RegressorMixin, DeepRKM):
    """Deep RKM regression: DeepRKM with the targets always read as regression targets.

    Takes DeepRKM's parameters except ``task`` and ``coding`` (see DeepRKM); scikit-learn's ``is_regressor``
    recognizes it, and integer-valued targets (counts, ratings) stay regression targets.

    Examples
    --------
    >>> import numpy as np
    >>> from rkm import DeepRKMRegressor
    >>> X = np.linspace(-3, 3, 80)[:, None]
    >>> y = np.round(3 * np.sin(X).ravel())  # integer-valued targets, still regression
    >>> model = DeepRKMRegressor(gamma=1.0, lam=1e-3).fit(X, y)
    >>> model.predict(X).shape
    (80,)
    """

    _parameter_constraints: dict = {
        k: v for k, v in DeepRKM._parameter_constraints.items() if k not in ("task", "coding")
    }

    def __init__(
        self,
        architecture: str = "lssvm_kpca_kpca",
        *,
        n_components: int | Sequence[int] = (1, 1),
        kernel: str | Kernel | Sequence[str | Kernel] = "rbf",
        gamma: float | None | Sequence[float | None] = None,
        degree: float = 3,
        coef0: float = 1.0,
        lam: float = 1.0,
        eta: float | Sequence[float] | None = None,
        n_passes: int = 10,
        solver: str = "levelwise",
        phases: str = "joint",
        init: str = "zeros",
        c_stab: float = 10.0,
        c0: float = 0.0,
        regularizer: str = "H",
        objective: str = "full",
        n_reduced: int = 20,
        hidden_layer_sizes: int | Sequence[int] = (3, 3, 3),
        toeplitz: bool = False,
        n_init: int = 1,
        max_iter: int = 400,
        tol: float = 1e-6,
        n_threads: int | None = None,
        random_state: int | np.random.RandomState | None = None,
        verbose: int = 0,
    ) -> None:
        self.architecture = architecture
        self.n_components = n_components
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.lam = lam
        self.eta = eta
        self.n_passes = n_passes
        self.solver = solver
        self.phases = phases
        self.init = init
        self.c_stab = c_stab
        self.c0 = c0
        self.regularizer = regularizer
        self.objective = objective
        self.n_reduced = n_reduced
        self.hidden_layer_sizes = hidden_layer_sizes
        self.toeplitz = toeplitz
        self.n_init = n_init
        self.max_iter = max_iter
        self.tol = tol
        self.n_threads = n_threads
        self.random_state = random_state
        self.verbose = verbose

    def _task_param(self):
        return "regression"


class DeepRKMClassifier(ClassifierMixin, DeepRKM):
    """Deep RKM classification: DeepRKM with the targets always read as class labels (+-1 codes, eq. 3.22).

    Takes DeepRKM's parameters except ``task`` (see DeepRKM), and ``probability``; scikit-learn's
    ``is_classifier`` recognizes it, and float labels such as 0.0 ... 9.0 are classes.

    Parameters
    ----------
    probability : bool, default=False
        Fit class probabilities for ``predict_proba``: Platt scaling of ``decision_function`` with a 5-fold
        internal cross-validation (stratified, not shuffled), as ``CalibratedClassifierCV(method="sigmoid",
        ensemble=False)`` and ``SVC(probability=True)``, as LSSVMClassifier(probability=True); the fit then costs
        five more fits. Fewer folds when a class has fewer than 5 samples (at least 2 needed). ``predict`` is
        unchanged (the largest output), so the class of largest probability can differ from it near the
        decision boundary.

    Attributes
    ----------
    calibration_ : rkm._utils.calibration.PlattCalibration
        With probability=True: the fitted sigmoids (``calibration_.calibrators_[j].a_``, ``.b_``).

    Examples
    --------
    >>> import numpy as np
    >>> from rkm import DeepRKMClassifier
    >>> rng = np.random.default_rng(0)
    >>> X = np.vstack([rng.normal(-2, 1, (30, 2)), rng.normal(2, 1, (30, 2))])
    >>> y = np.repeat([0.0, 1.0], 30)  # float labels, still classes
    >>> model = DeepRKMClassifier(gamma=0.5, lam=0.1, probability=True).fit(X, y)
    >>> model.classes_
    array([0., 1.])
    >>> model.predict_proba(X[:2]).shape
    (2, 2)
    """

    _parameter_constraints: dict = {
        **{k: v for k, v in DeepRKM._parameter_constraints.items() if k != "task"},
        "probability": ["boolean"],
    }

    def __init__(
        self,
        architecture: str = "lssvm_kpca_kpca",
        *,
        n_components: int | Sequence[int] = (1, 1),
        kernel: str | Kernel | Sequence[str | Kernel] = "rbf",
        gamma: float | None | Sequence[float | None] = None,
        degree: float = 3,
        coef0: float = 1.0,
        lam: float = 1.0,
        eta: float | Sequence[float] | None = None,
        n_passes: int = 10,
        solver: str = "levelwise",
        phases: str = "joint",
        init: str = "zeros",
        coding: str = "one_vs_all",
        c_stab: float = 10.0,
        c0: float = 0.0,
        regularizer: str = "H",
        objective: str = "full",
        n_reduced: int = 20,
        hidden_layer_sizes: int | Sequence[int] = (3, 3, 3),
        toeplitz: bool = False,
        n_init: int = 1,
        max_iter: int = 400,
        tol: float = 1e-6,
        n_threads: int | None = None,
        random_state: int | np.random.RandomState | None = None,
        verbose: int = 0,
        probability: bool = False,
    ) -> None:
        self.architecture = architecture
        self.n_components = n_components
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.lam = lam
        self.eta = eta
        self.n_passes = n_passes
        self.solver = solver
        self.phases = phases
        self.init = init
        self.coding = coding
        self.c_stab = c_stab
        self.c0 = c0
        self.regularizer = regularizer
        self.objective = objective
        self.n_reduced = n_reduced
        self.hidden_layer_sizes = hidden_layer_sizes
        self.toeplitz = toeplitz
        self.n_init = n_init
        self.max_iter = max_iter
        self.tol = tol
        self.n_threads = n_threads
        self.random_state = random_state
        self.verbose = verbose
        self.probability = probability

    def _task_param(self):
        return "classification"

    def fit(self, X, y, X_val=None, y_val=None):
        """Fit the deep RKM classifier (DeepRKM.fit), then its Platt sigmoids with probability=True.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
            Class labels.
        X_val, y_val : array-like or None, default=None
            As DeepRKM.fit.

        Returns
        -------
        self : DeepRKMClassifier
        """
        super().fit(X, y, X_val, y_val)
        if self.probability:
            base = clone(self).set_params(probability=False)
            fit_params = {} if X_val is None and y_val is None else {"X_val": X_val, "y_val": y_val}
            # Plain arrays for the folds (y as 1-D labels: fit already warned about a column vector).
            y = column_or_1d(np.asarray(y))
            smallest = int(np.unique(y, return_counts=True)[1].min())
            if smallest < 2:
                raise ValueError(
                    "y: probability=True needs at least 2 samples of every class for its internal "
                    "cross-validation; a class has 1"
                )
            cv = min(PROBABILITY_FOLDS, smallest)
            self.calibration_ = fit_platt(base, np.asarray(X), y, cv=cv, fit_params=fit_params)
        return self

    def _has_probability(self):
        return self.probability

    @available_if(_has_probability)
    def predict_proba(self, X: ArrayLike) -> np.ndarray:
        """Class probabilities by Platt scaling of decision_function (see ``probability``).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
            Columns in the order of ``classes_``.
        """
        check_is_fitted(self, "calibration_")
        return self.calibration_.predict_proba(self.decision_function(X))

    @available_if(_has_probability)
    def predict_log_proba(self, X: ArrayLike) -> np.ndarray:
        """Logarithm of predict_proba.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
        """
        with np.errstate(divide="ignore"):
            return np.log(self.predict_proba(X))


def _per_level(value, name, n_levels):
    """A parameter given once for all levels or as a sequence with one entry per level, as a tuple."""
    if isinstance(value, (tuple, list)):
        if len(value) != n_levels:
            raise ValueError(f"{name}: must be one value or a sequence of {n_levels} (one per level), got {value!r}")
        return tuple(value)
    return (value,) * n_levels
