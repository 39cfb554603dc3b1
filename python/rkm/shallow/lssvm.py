"""LS-SVM regression and classification as restricted kernel machines (Suykens 2017, sections 3.1–3.3).

The RKM writes the LS-SVM with hidden features h_i conjugate to the errors e_i. Regression (eq. 3.14) gives
the dual system of eq. 3.16,

    [ (1/eta) K + lam I   1 ] [ H   ]   [ Y ]
    [ 1^T                 0 ] [ b^T ] = [ 0 ],

and the models of eq. 3.17: primal yhat = W^T phi(x) + b, dual yhat = (1/eta) sum_j h_j K(x_j, x) + b.
Classification (eqs. 3.19–3.23) is the same system for targets coded +-1 (one output per class, or the
minimum-output code), in the hidden features H_D = D_y H.
"""

from __future__ import annotations

import warnings

import numpy as np
import scipy.linalg
from numpy.typing import ArrayLike
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin, _fit_context, clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.preprocessing import LabelEncoder
from sklearn.utils._param_validation import HasMethods, StrOptions
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from rkm import _core
from rkm._utils import primal
from rkm._utils.coding import CODINGS, class_codes, class_scores
from rkm._utils.progress import Progress
from rkm._utils.threads import blas_threads, thread_count
from rkm._utils.validation import (
    COUNT,
    FLOAT_DTYPES,
    MAX_ITER,
    N_THREADS,
    POSITIVE,
    RANDOM_STATE,
    TOL,
    VERBOSE,
    check_memory,
    kernel_constraints,
)
from rkm.kernels import Kernel, kernel_product, model_kernel_spec
from rkm.shallow import _pcg

# solver="auto" factorizes up to this many samples (about 40 s on 2 cores) and solves by conjugate gradients
# beyond, or when the factorization does not fit in memory.
AUTO_CHOLESKY_MAX_SAMPLES = 20_000
# Bytes of the dense solvers besides the N x N matrix: right-hand sides, H and the kernel's row buffers.
_DENSE_SLACK_BYTES = 64 * 2**20


class _LSSVM(BaseEstimator):
    """Fitting and prediction shared by LSSVMRegressor and LSSVMClassifier: solve eq. 3.16 for targets Y."""

    _parameter_constraints: dict = {
        **kernel_constraints(precomputed=True),
        "lam": POSITIVE,
        "eta": POSITIVE,
        "fit_intercept": ["boolean"],
        "solver": [StrOptions({"auto", "cholesky", "cg", "primal"})],
        "feature_map": [None, StrOptions({"linear"}), HasMethods(["fit", "transform"])],
        "mixed_precision": ["boolean"],
        "preconditioner": [StrOptions({"nystrom", "pivoted_cholesky"}), None],
        "preconditioner_rank": [None, *COUNT],
        "kernel_storage": [StrOptions(set(_pcg.STORAGES))],
        "tol": TOL,
        "max_iter": MAX_ITER,
        "loo": ["boolean"],
        "n_threads": N_THREADS,
        "random_state": RANDOM_STATE,
        "verbose": VERBOSE,
    }

    def __init__(
        self,
        *,
        kernel: str | Kernel = "rbf",
        gamma: float | None = None,
        degree: float = 3,
        coef0: float = 1.0,
        lam: float = 1.0,
        eta: float = 1.0,
        fit_intercept: bool = True,
        solver: str = "auto",
        feature_map: str | object | None = None,
        mixed_precision: bool = False,
        preconditioner: str | None = "nystrom",
        preconditioner_rank: int | None = None,
        kernel_storage: str = "matrix_free",
        tol: float | None = None,
        max_iter: int | None = None,
        loo: bool = False,
        n_threads: int | None = None,
        random_state: int | np.random.RandomState | None = None,
        verbose: int = 0,
    ):
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.lam = lam
        self.eta = eta
        self.fit_intercept = fit_intercept
        self.solver = solver
        self.feature_map = feature_map
        self.mixed_precision = mixed_precision
        self.preconditioner = preconditioner
        self.preconditioner_rank = preconditioner_rank
        self.kernel_storage = kernel_storage
        self.tol = tol
        self.max_iter = max_iter
        self.loo = loo
        self.n_threads = n_threads
        self.random_state = random_state
        self.verbose = verbose

    # ------------------------------------------------------------------ parameters

    def _kernel_spec(self, n_features):
        """(name, gamma, degree, coef0) of the kernel in use; name is "precomputed" or canonical."""
        return model_kernel_spec(self.kernel, self.gamma, self.degree, self.coef0, n_features)

    def _check_params_vs_input(self, n_samples, n_features):
        """The rules that need the data or tie parameters together; returns the solver the fit uses."""
        if self.preconditioner_rank is not None and self.preconditioner_rank > n_samples:
            raise ValueError(f"preconditioner_rank: at most n_samples={n_samples}, got {self.preconditioner_rank}")
        name = self._kernel_spec(n_features)[0]
        solver = self._resolve_solver(n_samples, name)
        if self.loo and solver != "cholesky":
            raise ValueError(f"loo: the closed-form leave-one-out residuals need solver='cholesky', not {solver!r}")
        if name == "precomputed" and solver != "cholesky":
            raise ValueError(
                f"solver: {solver!r} evaluates the kernel from X itself; kernel='precomputed' needs solver='cholesky'"
            )
        return solver

    def _resolve_solver(self, n_samples, kernel_name):
        if self.feature_map is not None:
            if self.solver not in ("auto", "primal"):
                raise ValueError(f"feature_map: is used by solver='primal' only, not solver={self.solver!r}")
            return "primal"
        if self.solver == "primal":
            raise ValueError(
                "feature_map: solver='primal' needs an explicit feature map ('linear' or a "
                "transformer such as rkm.features.Nystroem)"
            )
        if self.solver != "auto":
            return self.solver
        if kernel_name == "precomputed" or self.loo or n_samples <= AUTO_CHOLESKY_MAX_SAMPLES:
            return "cholesky"
        return "cg"

    # ------------------------------------------------------------------ fitting

    def _fit_targets(self, X, Y):
        """Solve eq. 3.16 (or 3.15 in the primal) for the targets Y (n_samples x p, float64)."""
        self._progress = Progress(type(self).__name__, self.verbose)
        self.solver_ = self._check_params_vs_input(*X.shape)
        self.n_iter_ = 1
        self._progress(f"solver {self.solver_!r}, N = {X.shape[0]}, {Y.shape[1]} output(s)")
        if self.solver_ == "primal":
            self._fit_primal(X, Y)
        elif self.solver_ == "cg":
            self._fit_cg(X, Y)
        else:
            self._fit_cholesky(X, Y)

    def _check_dense_memory(self, n_samples, itemsize):
        check_memory(
            n_samples * n_samples * itemsize + _DENSE_SLACK_BYTES,
            "X",
            f"the {n_samples} x {n_samples} kernel matrix of solver='cholesky'",
            advice="use solver='cg' (kernel products, no stored matrix) or solver='primal' with "
            "feature_map=rkm.features.Nystroem(...)",
        )

    def _fit_cholesky(self, X, Y):
        name, gamma, degree, coef0 = self._kernel_spec(X.shape[1])
        threads = thread_count(self.n_threads)
        mixed = self.mixed_precision and X.dtype == np.float64 and not self.loo and name != "precomputed"
        self._check_dense_memory(X.shape[0], 4 if mixed else X.dtype.itemsize)
        Y = Y.astype(X.dtype)
        residuals = None
        with blas_threads(threads):
            if name == "precomputed":
                if X.shape[0] != X.shape[1]:
                    raise ValueError(f"X: a precomputed kernel must be square, got shape {X.shape}")
                H, b, residuals = _core.lssvm_dual_solve(
                    X.copy(order="C"), Y, self.eta, self.lam, self.fit_intercept, self.loo, self.n_threads
                )
            elif mixed:
                H, b, refinements = _core.lssvm_dual_fit_mixed(
                    X, Y, name, gamma, degree, coef0, self.eta, self.lam, self.fit_intercept, self.n_threads
                )
                self.n_iter_ = 1 + max(refinements, 0)
                self._progress(
                    "float32 factorization, float64 refinement: "
                    + (f"{refinements} iteration(s)" if refinements >= 0 else "fell back to float64")
                )
            else:
                H, b, residuals = _core.lssvm_dual_fit(
                    X,
                    Y,
                    name,
                    gamma,
                    degree,
                    coef0,
                    self.eta,
                    self.lam,
                    self.fit_intercept,
                    self.loo,
                    self.n_threads,
                )
        self._store_dual(X, H, b)
        if self.loo:
            self.loo_residuals_ = residuals

    def _fit_cg(self, X, Y):
        name, gamma, degree, coef0 = self._kernel_spec(X.shape[1])
        result = _pcg.lssvm_pcg_fit(
            X,
            Y,
            name,
            gamma,
            degree,
            coef0,
            eta=self.eta,
            lam=self.lam,
            fit_intercept=self.fit_intercept,
            storage=self.kernel_storage,
            preconditioner=self.preconditioner,
            rank=self.preconditioner_rank,
            tol=_pcg.DEFAULT_TOL if self.tol is None else self.tol,
            max_iter=self.max_iter,
            n_threads=self.n_threads,
            random_state=self.random_state,
            verbose=self.verbose,
            progress=self._progress,
        )
        self.n_iter_ = result.n_iter
        self.cg_residuals_ = np.asarray(result.residuals)
        if not result.converged:
            warnings.warn(
                f"solver='cg' stopped after {result.n_iter} iterations at relative residual "
                f"{np.max(result.residuals):.2e} > tol; increase max_iter or preconditioner_rank, or lam",
                ConvergenceWarning,
                stacklevel=3,
            )
        self._store_dual(X, result.H.astype(X.dtype, copy=False), result.b.astype(X.dtype, copy=False))

    def _store_dual(self, X, H, b):
        self.dual_coef_ = self.H_ = H
        self.intercept_ = b
        self.X_fit_ = None if self.kernel == "precomputed" else X

    def _fit_primal(self, X, Y):
        """Eq. 3.15, centred: with mu and y_mean the means of phi(x_i) and y_i, the bias row gives
        b = y_mean - W^T mu, and the first block row (sum_i phi_c phi_c^T + lam eta I) W = sum_i phi_c y_c^T."""
        feature_map = self._fitted_feature_map(X)
        threads = thread_count(self.n_threads)
        with blas_threads(threads):
            if feature_map is not None and primal.streams(feature_map):
                moments, cross, y_mean = primal.feature_target_moments(feature_map, X, Y)
            else:
                moments, cross, y_mean = primal.block_target_moments(self._features(feature_map, X), Y)
        if not self.fit_intercept:
            # Without the bias the system is uncentred: add back the means' outer products.
            scatter = moments.scatter + moments.n * np.outer(moments.mean, moments.mean)
            cross = cross + moments.n * np.outer(moments.mean, y_mean)
        else:
            scatter = moments.scatter
        system = scatter + self.lam * self.eta * np.eye(scatter.shape[0])
        with blas_threads(threads):
            try:
                W = scipy.linalg.solve(system, cross, assume_a="pos", check_finite=False)
            except np.linalg.LinAlgError as error:
                raise ValueError(
                    f"lam: the primal system is not positive definite for lam = {self.lam:g}; increase lam"
                ) from error
        b = y_mean - moments.mean @ W if self.fit_intercept else np.zeros(Y.shape[1])
        self.feature_map_ = feature_map
        self.coef_ = W.astype(X.dtype)
        self.intercept_ = b.astype(X.dtype)

    def _fitted_feature_map(self, X):
        """None for the linear map phi(x) = x, else a fitted clone of the given transformer."""
        if isinstance(self.feature_map, str):  # "linear", the one name the constraints let through
            return None
        return clone(self.feature_map).fit(X)

    # ------------------------------------------------------------------ prediction

    def _outputs(self, X):
        """The models of eq. 3.17: W^T phi(x) + b in the primal, (1/eta) sum_j h_j K(x_j, x) + b in the dual."""
        check_is_fitted(self, "intercept_")
        X = validate_data(self, X, dtype=list(FLOAT_DTYPES), order="C", reset=False)
        dtype = np.result_type(X.dtype, self.intercept_.dtype)
        if self.solver_ == "primal":
            return self._primal_outputs(X).astype(dtype, copy=False)
        X = X.astype(self.dual_coef_.dtype, copy=False)
        if self.kernel == "precomputed":
            if X.shape[1] != self.dual_coef_.shape[0]:
                raise ValueError(
                    f"X: precomputed kernel rows need {self.dual_coef_.shape[0]} columns, got {X.shape[1]}"
                )
            with blas_threads(thread_count(self.n_threads)):
                scores = X @ self.dual_coef_
        else:
            name, gamma, degree, coef0 = self._kernel_spec(X.shape[1])
            scores = kernel_product(X, self.X_fit_, self.dual_coef_, name, gamma, degree, coef0, self.n_threads)
        return (scores / self.eta + self.intercept_).astype(dtype, copy=False)

    @staticmethod
    def _features(feature_map, X):
        """phi(X) of the linear map (None) or of a transformer that does not stream."""
        return X if feature_map is None else feature_map.transform(X)

    def _primal_outputs(self, X):
        if self.feature_map_ is not None and primal.streams(self.feature_map_):
            return primal.linear_outputs(self.feature_map_, X, self.coef_.astype(np.float64), -self.intercept_)
        with blas_threads(thread_count(self.n_threads)):
            return self._features(self.feature_map_, X) @ self.coef_ + self.intercept_

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.pairwise = self.kernel == "precomputed"
        return tags


class LSSVMRegressor(RegressorMixin, _LSSVM):
    """LS-SVM regression as a restricted kernel machine (Suykens 2017, eqs. 3.14–3.17).

    Solves the dual system of eq. 3.16,

        [ (1/eta) K + lam I   1 ] [ H   ]   [ Y ]
        [ 1^T                 0 ] [ b^T ] = [ 0 ],

    for any number of outputs, and predicts by eq. 3.17, yhat(x) = (1/eta) sum_j h_j K(x_j, x) + b; or the
    primal system of eq. 3.15 for an explicit feature map, yhat(x) = W^T phi(x) + b. lam is the paper's
    lambda: LS-SVMlab's gam (and the gamma of eqs. 2.10–2.11) is 1 / lam, and the fit equals
    ``KernelRidge(alpha=lam * eta)`` plus the bias.

    Every parameter is keyword-only (the model has no defining one, as scikit-learn's ``SVR``).

    Parameters
    ----------
    kernel : {"rbf", "linear", "poly", "laplacian", "cosine", "tanimoto", "precomputed"} or Kernel, default="rbf"
        "rbf" is exp(-gamma ||x - y||^2); use ``rkm.kernels.RBF.from_sigma`` for a paper's sigma.
        "precomputed" takes the N x N kernel matrix in ``fit`` and kernel rows k(X, X_train) in ``predict``.
        Aliases "gaussian" (rbf) and "polynomial" (poly) are accepted.
    gamma : float, default=None
        Kernel coefficient of rbf/laplacian/poly; None means 1 / n_features.
    degree : float, default=3
        Degree of the poly kernel (gamma x^T y + coef0)^degree.
    coef0 : float, default=1.0
        Constant of the poly kernel.
    lam : float, default=1.0
        The regularization lambda > 0 of eqs. 3.14–3.16 (the hidden features' weight).
    eta : float, default=1.0
        The weight eta > 0 of Tr(W^T W); only lam * eta matters for the predictions.
    fit_intercept : bool, default=True
        Whether the model has the bias b (the bordered system); False solves ((1/eta) K + lam I) H = Y.
    solver : {"auto", "cholesky", "cg", "primal"}, default="auto"
        "cholesky": one Cholesky factorization of (1/eta) K + lam I in the compiled core and the bias by the
        Schur complement (N^2 values in memory). "cg": preconditioned conjugate gradients on the same system,
        with kernel products that are never stored (``kernel_storage``) — for N beyond a dense factorization.
        "primal": eq. 3.15 with the explicit ``feature_map``. "auto": "primal" when a feature_map is given,
        "cholesky" up to 20 000 samples (and for precomputed kernels or loo), "cg" beyond.
    feature_map : "linear" or transformer, default=None
        The explicit feature map phi of the primal: "linear" (phi(x) = x) or a transformer such as
        ``rkm.features.Nystroem`` (including fixed-size LS-SVM's landmarks of maximal quadratic Rényi
        entropy, ``landmarks="renyi"``) or ``rkm.features.RandomFourierFeatures``; it is cloned and fitted on X.
        rkm's maps are streamed a block of rows at a time.
    mixed_precision : bool, default=False
        For float64 data and solver="cholesky": factorize in float32 (half the memory) and refine the
        solution to float64 accuracy by conjugate gradients on the exact system, whose products recompute the
        kernel in float64 tiles (LAPACK dsposv's idea), falling back to a float64 factorization when the
        float32 one fails or the refinement stalls. It takes about the time of the float64 factorization
        (float32 factorizes 1.5x faster here, and 2-3 refinement steps take the rest): a memory saver, for N
        whose N^2 float64 matrix does not fit. ``n_iter_`` counts the refinement steps.
    preconditioner : {"nystrom", "pivoted_cholesky", None}, default="nystrom"
        Low-rank preconditioner of solver="cg": F F^T + lam I from a Nyström approximation (uniform landmarks)
        or a pivoted Cholesky factorization of rank ``preconditioner_rank``.
    preconditioner_rank : int, default=None
        Rank of the preconditioner, at most n_samples (None: min(n_samples, 1000, max(100, n_samples / 20)),
        and at most what keeps the factor within 1 GiB).
    kernel_storage : {"matrix_free", "dense"}, default="matrix_free"
        For solver="cg": "matrix_free" recomputes the kernel in tiles at each product (O(N (d + p)) memory),
        "dense" stores it once in X's dtype (N^2 entries). The default differs from KernelPCA's "auto" on
        purpose: the conjugate-gradient solver exists for kernel matrices that do not fit in memory (solver
        "cholesky" stores it already).
    tol : float, default=None
        Relative residual at which solver="cg" stops (None: 1e-6).
    max_iter : int, default=None
        Iteration limit of solver="cg" (None: max(100, 10 sqrt(n_samples))).
    loo : bool, default=False
        Compute the closed-form leave-one-out residuals (solver="cholesky"): ``loo_residuals_`` and
        ``loo_mse_``, at about the cost of a second factorization.
    n_threads : int, default=None
        Threads of the core and of BLAS (None: OpenMP's default; -1: all cores; 0 is an error).
    random_state : int, RandomState or None, default=None
        Seeds the preconditioner of solver="cg".
    verbose : int, default=0
        0: silent; 1: the solver chosen and its stages (solver="cg": a line every 10 iterations and at each
        residual check); 2: every conjugate-gradient iteration.

    Attributes
    ----------
    H_ : ndarray of shape (n_samples, n_outputs)
        The hidden features H (h_i in row i) of the dual (absent for solver="primal").
    dual_coef_ : ndarray of shape (n_samples, n_outputs)
        The same array, by scikit-learn's name.
    intercept_ : ndarray of shape (n_outputs,)
        The bias b.
    coef_ : ndarray of shape (n_features_out, n_outputs)
        W of the primal (solver="primal" only).
    feature_map_ : fitted transformer or None
        The primal's feature map (None for "linear").
    X_fit_ : ndarray
        The training data of the dual (None for a precomputed kernel).
    solver_ : str
        The solver used.
    n_iter_ : int
        Iterations of the solver: conjugate gradient steps of solver="cg"; for the direct solvers 1 (the
        factorization) plus the refinement steps of mixed precision.
    loo_residuals_ : ndarray of shape (n_samples, n_outputs)
        y_i - yhat^(-i)(x_i) of the model fitted without sample i (when loo=True).
    loo_mse_ : float
        Mean of the squared leave-one-out residuals (when loo=True).
    n_features_in_ : int

    Examples
    --------
    >>> import numpy as np
    >>> from rkm import LSSVMRegressor
    >>> X = np.linspace(-3, 3, 50)[:, None]
    >>> model = LSSVMRegressor(gamma=1.0, lam=1e-3).fit(X, np.sin(X).ravel())
    >>> float(abs(model.predict([[1.0]])[0] - np.sin(1.0))) < 1e-2
    True
    """

    # prefer_skip_nested_validation=False: the feature_map transformer is not validated yet.
    @_fit_context(prefer_skip_nested_validation=False)
    def fit(self, X: ArrayLike, y: ArrayLike) -> LSSVMRegressor:
        """Fit the model (solve eq. 3.16, or eq. 3.15 in the primal).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Or the (n_samples, n_samples) kernel matrix for kernel="precomputed".
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)

        Returns
        -------
        self
        """
        X, y = validate_data(self, X, y, dtype=list(FLOAT_DTYPES), order="C", multi_output=True, y_numeric=True)
        Y = np.asarray(y, dtype=np.float64)
        self._single_output = Y.ndim == 1
        self._fit_targets(X, Y.reshape(X.shape[0], -1))
        if self.loo:
            self.loo_mse_ = float(np.mean(np.square(self.loo_residuals_, dtype=np.float64)))
            if self._single_output:
                self.loo_residuals_ = self.loo_residuals_.ravel()
        return self

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags

    def predict(self, X: ArrayLike) -> np.ndarray:
        """Predict by eq. 3.17.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Or kernel rows k(X, X_train) of shape (n_samples, n_train) for kernel="precomputed".

        Returns
        -------
        ndarray of shape (n_samples,) or (n_samples, n_outputs)
        """
        outputs = self._outputs(X)
        return outputs.ravel() if self._single_output else outputs


class LSSVMClassifier(ClassifierMixin, _LSSVM):
    """LS-SVM classification as a restricted kernel machine (Suykens 2017, eqs. 3.19–3.23).

    Each class is coded by a vector of +-1 targets; the dual system of eq. 3.22 is that of regression
    (eq. 3.16) for these targets, in the hidden features H_D = D_y H (D_y = diag(y_i)), and the classifier
    of eq. 3.23 is sign((1/eta) sum_j D_yj h_j K(x_j, x) + b). For two classes this is the classical LS-SVM
    classifier of eqs. 2.10–2.11 with gamma = 1 / lam.

    Every parameter is keyword-only (the model has no defining one, as scikit-learn's ``SVC``).

    Parameters
    ----------
    coding : {"one_vs_all", "minimum_output"}, default="one_vs_all"
        The output code of more than two classes: one output per class (+1 for the class, -1 for the
        others), or ceil(log2 C) outputs carrying the binary digits of the class index (the minimum-output
        code); two classes always use one output (+1 for ``classes_[1]``).
    All other parameters are those of :class:`LSSVMRegressor`.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    codes_ : ndarray of shape (n_classes, n_outputs)
        The +-1 codeword of each class.
    dual_coef_ : ndarray of shape (n_samples, n_outputs)
        H_D of eq. 3.22 (D_y H), the coefficients of the dual classifier.
    H_ : ndarray of shape (n_samples, n_outputs)
        The paper's hidden features h_i = D_yi h_D,i (absent for solver="primal").
    intercept_, coef_, feature_map_, X_fit_, solver_, n_iter_, loo_residuals_
        As in :class:`LSSVMRegressor`, for the coded targets.
    loo_error_ : float
        Leave-one-out misclassification rate (when loo=True), from the closed-form residuals.
    n_features_in_ : int

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from rkm import LSSVMClassifier
    >>> X, y = load_iris(return_X_y=True)
    >>> LSSVMClassifier(gamma=0.5, lam=0.1).fit(X, y).score(X, y) > 0.95
    True
    """

    _parameter_constraints: dict = {
        **_LSSVM._parameter_constraints,
        "coding": [StrOptions(set(CODINGS))],
    }

    def __init__(
        self,
        *,
        kernel: str | Kernel = "rbf",
        gamma: float | None = None,
        degree: float = 3,
        coef0: float = 1.0,
        lam: float = 1.0,
        eta: float = 1.0,
        fit_intercept: bool = True,
        coding: str = "one_vs_all",
        solver: str = "auto",
        feature_map: str | object | None = None,
        mixed_precision: bool = False,
        preconditioner: str | None = "nystrom",
        preconditioner_rank: int | None = None,
        kernel_storage: str = "matrix_free",
        tol: float | None = None,
        max_iter: int | None = None,
        loo: bool = False,
        n_threads: int | None = None,
        random_state: int | np.random.RandomState | None = None,
        verbose: int = 0,
    ):
        super().__init__(
            kernel=kernel,
            gamma=gamma,
            degree=degree,
            coef0=coef0,
            lam=lam,
            eta=eta,
            fit_intercept=fit_intercept,
            solver=solver,
            feature_map=feature_map,
            mixed_precision=mixed_precision,
            preconditioner=preconditioner,
            preconditioner_rank=preconditioner_rank,
            kernel_storage=kernel_storage,
            tol=tol,
            max_iter=max_iter,
            loo=loo,
            n_threads=n_threads,
            random_state=random_state,
            verbose=verbose,
        )
        self.coding = coding

    # prefer_skip_nested_validation=False: the feature_map transformer is not validated yet.
    @_fit_context(prefer_skip_nested_validation=False)
    def fit(self, X: ArrayLike, y: ArrayLike) -> LSSVMClassifier:
        """Fit the classifier (solve eq. 3.22 for the coded labels).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Or the (n_samples, n_samples) kernel matrix for kernel="precomputed".
        y : array-like of shape (n_samples,)
            Class labels (any hashable type scikit-learn accepts: ints, strings, ...).

        Returns
        -------
        self
        """
        X, y = validate_data(self, X, y, dtype=list(FLOAT_DTYPES), order="C")
        check_classification_targets(y)
        encoder = LabelEncoder().fit(y)
        self.classes_ = encoder.classes_
        if self.classes_.size < 2:
            raise ValueError(f"y: needs at least two classes, got 1 class ({self.classes_[0]!r})")
        self.codes_ = class_codes(self.classes_.size, self.coding)
        labels = encoder.transform(y)
        Y = self.codes_[labels]
        self._fit_targets(X, Y)
        if self.solver_ != "primal":
            self.H_ = Y.astype(self.dual_coef_.dtype) * self.dual_coef_  # h_i = D_yi h_D,i
        if self.loo:
            # The codeword nearest each leave-one-out output (+-1 codewords have equal norms).
            loo_scores = (Y - self.loo_residuals_) @ self.codes_.T
            self.loo_error_ = float(np.mean(np.argmax(loo_scores, axis=1) != labels))
        return self

    def decision_function(self, X: ArrayLike) -> np.ndarray:
        """The outputs (1/eta) sum_j D_yj h_j K(x_j, x) + b of eq. 3.23 (before the sign).

        Returns
        -------
        ndarray of shape (n_samples,) for two classes (positive: ``classes_[1]``), else (n_samples, n_classes)
            For more classes: one-vs-all, each class's own output; minimum output, the outputs' inner product
            with each class's codeword. The predicted class has the largest score.
        """
        return class_scores(self._outputs(X), self.codes_, self.coding)

    def predict(self, X: ArrayLike) -> np.ndarray:
        """Class labels: the sign of eq. 3.23 for two classes, the codeword nearest the outputs beyond."""
        scores = self.decision_function(X)
        indices = (scores > 0).astype(int) if scores.ndim == 1 else np.argmax(scores, axis=1)
        return self.classes_[indices]
