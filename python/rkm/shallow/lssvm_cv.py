"""LS-SVMs tuned by exact leave-one-out over a whole lambda path: one eigendecomposition per kernel.

For the kernel matrix K of a bandwidth gamma and sample weights v (1 without), the system matrix of eq. 3.16 is
A(lam) = (1/eta) K + lam V^{-1} = S^{-1} ((1/eta) S K S + lam I) S^{-1} with S = V^{1/2}. One eigendecomposition
(1/eta) S K S = Q diag(mu) Q^T gives, for every lam at O(N^2) each,

    A^{-1} = S Q diag(1 / (mu + lam)) Q^T S,

hence the solution (H, b) by the Schur complement of the bordered system and the diagonal of the inverse of
the bordered matrix C, C^{-1}_ii = (A^{-1})_ii - (A^{-1} 1)_i^2 / (1^T A^{-1} 1) (without intercept
(A^{-1})_ii). The leave-one-out residual of sample i is h_i / C^{-1}_ii (Cawley and Talbot 2004), exactly the
residual of the model refitted without sample i (tested against such refits). This is what ``RidgeCV`` does
with its eigendecomposition; LS-SVMlab's ``tunelssvm`` searches (gam, sig2) with LOO or cross-validation costs.
gamma is searched on a grid (one eigendecomposition each), lam along its path for each gamma.

References
----------
G. C. Cawley and N. L. C. Talbot, "Fast exact leave-one-out cross-validation of sparse least-squares support
vector machines", Neural Networks 17(10), 2004.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg
import scipy.sparse as sp
from numpy.typing import ArrayLike
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin, _fit_context
from sklearn.preprocessing import LabelEncoder
from sklearn.utils._param_validation import StrOptions
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import _check_sample_weight, check_is_fitted, validate_data

from rkm._utils.coding import CODINGS, class_codes
from rkm._utils.progress import Progress
from rkm._utils.threads import blas_threads, thread_count
from rkm._utils.validation import FLOAT_DTYPES, N_THREADS, POSITIVE, VERBOSE, check_memory
from rkm.kernels import Kernel, is_callable_kernel, kernel_matrix, model_kernel_spec, names_with
from rkm.shallow.lssvm import LSSVMClassifier, LSSVMRegressor, _kernel_parameter_constraints

__all__ = ["LSSVMClassifierCV", "LSSVMRegressorCV", "loo_path"]

# Default lam path: 21 values from 1e-8 to 1e2 (log-spaced). Default gamma grid: 9 values from 1e-2 to 1e2 times
# scikit-learn's gamma="scale", 1 / (n_features Var(X)).
DEFAULT_LAMS = np.logspace(-8, 2, 21)
DEFAULT_GAMMA_FACTORS = np.logspace(-2, 2, 9)
_GAMMA_KERNELS = names_with("has_gamma")


def loo_path(K, Y, lams, *, eta=1.0, fit_intercept=True, sample_weight=None, n_threads=None):
    """Leave-one-out residuals of the LS-SVM (eq. 3.16) for every lam of a path, from one eigendecomposition.

    Parameters
    ----------
    K : ndarray of shape (n_samples, n_samples)
        The training kernel matrix (symmetric positive semi-definite).
    Y : ndarray of shape (n_samples, n_outputs)
    lams : array-like of shape (n_lams,)
        Positive values of lam.
    eta : float, default=1.0
    fit_intercept : bool, default=True
    sample_weight : ndarray of shape (n_samples,), default=None
        Positive weights of the weighted LS-SVM (lam / v_k on the diagonal).
    n_threads : int, default=None
        Threads of BLAS/LAPACK.

    Returns
    -------
    residuals : ndarray of shape (n_lams, n_samples, n_outputs)
        y_i - yhat^(-i)(x_i) for each lam.
    """
    n = K.shape[0]
    s = np.ones(n) if sample_weight is None else np.sqrt(np.asarray(sample_weight, dtype=np.float64))
    with blas_threads(thread_count(n_threads)):
        mu, Q = scipy.linalg.eigh((s[:, None] * np.asarray(K, dtype=np.float64) * s) / eta, check_finite=False)
        mu = np.maximum(mu, 0.0)  # K is PSD; rounding can leave tiny negative eigenvalues
        Q2 = Q * Q
        QtSY = Q.T @ (s[:, None] * Y)
        QtS1 = Q.T @ s
        out = np.empty((len(lams), n, Y.shape[1]))
        for index, lam in enumerate(lams):
            d = 1.0 / (mu + lam)
            Ainv_Y = s[:, None] * (Q @ (d[:, None] * QtSY))
            diagonal = s * s * (Q2 @ d)
            if fit_intercept:
                Ainv_1 = s * (Q @ (d * QtS1))
                total = Ainv_1.sum()
                b = Ainv_Y.sum(axis=0) / total
                H = Ainv_Y - np.outer(Ainv_1, b)
                diagonal = diagonal - Ainv_1 * Ainv_1 / total
            else:
                H = Ainv_Y
            out[index] = H / diagonal[:, None]
    return out


class _LSSVMCV(BaseEstimator):
    """The (gamma, lam) search shared by LSSVMRegressorCV and LSSVMClassifierCV."""

    _parameter_constraints: dict = {
        **{key: value for key, value in _kernel_parameter_constraints().items() if key != "gamma"},
        "lams": [None, "array-like"],
        "gammas": [None, "array-like"],
        "eta": POSITIVE,
        "fit_intercept": ["boolean"],
        "n_threads": N_THREADS,
        "verbose": VERBOSE,
    }

    def __init__(
        self,
        *,
        lams: ArrayLike | None = None,
        gammas: ArrayLike | None = None,
        kernel: str | Kernel = "rbf",
        degree: float = 3,
        coef0: float = 1.0,
        eta: float = 1.0,
        fit_intercept: bool = True,
        n_threads: int | None = None,
        verbose: int = 0,
    ):
        self.lams = lams
        self.gammas = gammas
        self.kernel = kernel
        self.degree = degree
        self.coef0 = coef0
        self.eta = eta
        self.fit_intercept = fit_intercept
        self.n_threads = n_threads
        self.verbose = verbose

    def _grids(self, X):
        lams = DEFAULT_LAMS if self.lams is None else np.asarray(self.lams, dtype=np.float64).ravel()
        if lams.size == 0 or not np.all(np.isfinite(lams)) or np.any(lams <= 0):
            raise ValueError(f"lams: must be a non-empty sequence of positive numbers, got {self.lams!r}")
        searches_gamma = isinstance(self.kernel, str) and self.kernel != "precomputed"
        searches_gamma = searches_gamma and model_kernel_spec(self.kernel, 1.0, 3, 1.0, 1)[0] in _GAMMA_KERNELS
        if not searches_gamma:
            if self.gammas is not None:
                raise ValueError(f"gammas: the kernel {self.kernel!r} has no gamma to search; leave gammas=None")
            return lams, np.array([np.nan])
        if self.gammas is None:
            if sp.issparse(X):
                variance = X.multiply(X).mean() - X.mean() ** 2
            else:
                variance = X.var()
            scale = 1.0 / (X.shape[1] * variance) if variance > 0 else 1.0
            return lams, scale * DEFAULT_GAMMA_FACTORS
        gammas = np.asarray(self.gammas, dtype=np.float64).ravel()
        if gammas.size == 0 or not np.all(np.isfinite(gammas)) or np.any(gammas <= 0):
            raise ValueError(f"gammas: must be a non-empty sequence of positive numbers, got {self.gammas!r}")
        return lams, gammas

    def _kernel(self, X, gamma):
        if self.kernel == "precomputed":
            if X.shape[0] != X.shape[1]:
                raise ValueError(f"X: a precomputed kernel must be square, got shape {X.shape}")
            return np.asarray(X, dtype=np.float64)
        if is_callable_kernel(self.kernel) or isinstance(self.kernel, Kernel):
            return kernel_matrix(X, None, self.kernel, n_threads=self.n_threads)
        return kernel_matrix(
            X, None, self.kernel, None if np.isnan(gamma) else gamma, self.degree, self.coef0, n_threads=self.n_threads
        )

    def _search(self, X, Y, sample_weight, score):
        """LOO residuals over the grid; `score(residuals, active)` -> (primary, secondary) per lam."""
        progress = Progress(type(self).__name__, self.verbose)
        lams, gammas = self._grids(X)
        n = X.shape[0]
        check_memory(
            4 * 8 * n * n,
            "X",
            f"the leave-one-out path (the {n} x {n} kernel matrix, its eigenvectors and their squares)",
            advice="use LSSVMRegressor(loo=True) on a few values, or fewer samples",
        )
        active = np.ones(n, dtype=bool) if sample_weight is None else sample_weight > 0
        weights = None if sample_weight is None else sample_weight[active]
        primary = np.empty((gammas.size, lams.size))
        secondary = np.empty((gammas.size, lams.size))
        for g, gamma in enumerate(gammas):
            K = self._kernel(X, gamma)[np.ix_(active, active)]
            residuals = loo_path(
                K,
                Y[active],
                lams,
                eta=self.eta,
                fit_intercept=self.fit_intercept,
                sample_weight=weights,
                n_threads=self.n_threads,
            )
            for index in range(lams.size):
                primary[g, index], secondary[g, index] = score(residuals[index], active)
            if not np.isnan(gamma):
                progress(f"gamma = {gamma:.4g}: best LOO score {primary[g].min():.4g}")
        order = np.lexsort((secondary.ravel(), primary.ravel()))
        g, index = np.unravel_index(order[0], primary.shape)
        self.lams_, self.gammas_ = lams, gammas
        self.lam_ = float(lams[index])
        self.gamma_ = None if np.isnan(gammas[g]) else float(gammas[g])
        self.best_score_ = float(primary[g, index])
        return primary, secondary

    def _final_params(self):
        params = dict(
            kernel=self.kernel,
            degree=self.degree,
            coef0=self.coef0,
            lam=self.lam_,
            eta=self.eta,
            fit_intercept=self.fit_intercept,
            solver="cholesky",
            n_threads=self.n_threads,
        )
        if self.gamma_ is not None:
            params["gamma"] = self.gamma_
        return params

    @staticmethod
    def _weighted_mean(values, weights):
        return float(np.average(values, weights=weights))

    def predict(self, X: ArrayLike) -> np.ndarray:
        """Predictions of ``estimator_``, the LS-SVM refitted on all the data with (``gamma_``, ``lam_``)."""
        check_is_fitted(self, "estimator_")
        return self.estimator_.predict(X)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.pairwise = self.kernel == "precomputed"
        tags.input_tags.sparse = self.kernel != "precomputed"
        return tags


class LSSVMRegressorCV(RegressorMixin, _LSSVMCV):
    """LS-SVM regression with gamma and lam chosen by exact leave-one-out, without refits (module docstring).

    For each gamma of the grid the kernel matrix is eigendecomposed once, and the leave-one-out residuals of
    every lam of the path follow in O(N^2) each (as ``RidgeCV``); the pair with the smallest leave-one-out
    mean squared error (weighted by sample_weight) is refitted on all the data as ``estimator_``. The
    counterpart of LS-SVMlab's ``tunelssvm(..., 'leaveoneoutlssvm')`` on a grid. Costs one N^3 eigensolver per
    gamma and four N x N float64 arrays.

    Parameters
    ----------
    lams : array-like, default=None
        The lam path (None: 21 values log-spaced from 1e-8 to 1e2).
    gammas : array-like, default=None
        The gamma grid of kernels with a gamma (None: 9 values log-spaced from 1e-2 to 1e2 times
        1 / (n_features Var(X)), scikit-learn's gamma="scale"); must stay None for kernels without one,
        ``Kernel`` instances, callables and "precomputed".
    kernel : {"rbf", "linear", "poly", "laplacian", "cosine", "tanimoto", "precomputed"}, Kernel or callable, \
default="rbf"
        As :class:`LSSVMRegressor`.
    degree, coef0 : float
        Of the poly kernel.
    eta : float, default=1.0
    fit_intercept : bool, default=True
    n_threads : int, default=None
        Threads of the core and of BLAS (None: OpenMP's default, all cores except inside joblib workers, which
        limit it; -1: all cores).
    verbose : int, default=0
        1: one line per gamma.

    Attributes
    ----------
    lam_, gamma_ : float
        The chosen pair (``gamma_`` None for kernels without a gamma).
    best_score_ : float
        Its leave-one-out mean squared error.
    loo_mse_path_ : ndarray of shape (n_gammas, n_lams)
        Leave-one-out mean squared error of every pair.
    lams_, gammas_ : ndarray
        The grids searched.
    estimator_ : LSSVMRegressor
        The model refitted on all the data with the chosen pair.
    n_features_in_ : int

    Examples
    --------
    >>> import numpy as np
    >>> from rkm import LSSVMRegressorCV
    >>> X = np.linspace(-3, 3, 80)[:, None]
    >>> y = np.sin(X).ravel() + 0.1 * np.random.default_rng(0).normal(size=80)
    >>> model = LSSVMRegressorCV().fit(X, y)
    >>> model.loo_mse_path_.shape
    (9, 21)
    """

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None) -> LSSVMRegressorCV:
        """Search the grid by leave-one-out and refit the best pair.

        Parameters
        ----------
        X : {array-like, scipy.sparse matrix} of shape (n_samples, n_features)
            Or the kernel matrix for kernel="precomputed".
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
        sample_weight : array-like of shape (n_samples,), default=None
            Weights of the weighted LS-SVM and of the leave-one-out mean; samples of weight 0 are left out.

        Returns
        -------
        self
        """
        X, y = validate_data(
            self, X, y, accept_sparse=("csr", "csc"), dtype=list(FLOAT_DTYPES), multi_output=True, y_numeric=True
        )
        if sample_weight is not None:
            sample_weight = _check_sample_weight(sample_weight, X, dtype=np.float64, ensure_non_negative=True)
            if not np.any(sample_weight > 0):
                raise ValueError("sample_weight: at least one weight must be positive")
        Y = np.ascontiguousarray(np.asarray(y, dtype=np.float64).reshape(X.shape[0], -1))

        def score(residuals, active):
            weights = None if sample_weight is None else sample_weight[active]
            return self._weighted_mean(np.mean(residuals**2, axis=1), weights), 0.0

        self.loo_mse_path_, _ = self._search(X, Y, sample_weight, score)
        self.estimator_ = LSSVMRegressor(**self._final_params()).fit(X, y, sample_weight=sample_weight)
        return self

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags


class LSSVMClassifierCV(ClassifierMixin, _LSSVMCV):
    """LS-SVM classification with gamma and lam chosen by exact leave-one-out, without refits.

    As :class:`LSSVMRegressorCV` for the coded targets of :class:`LSSVMClassifier`: the pair with the
    smallest leave-one-out misclassification rate wins (ties: the smaller leave-one-out mean squared error of
    the coded outputs), and is refitted on all the data as ``estimator_``.

    Parameters
    ----------
    coding : {"one_vs_all", "minimum_output"}, default="one_vs_all"
        As :class:`LSSVMClassifier`.
    All other parameters are those of :class:`LSSVMRegressorCV`.

    Attributes
    ----------
    lam_, gamma_, lams_, gammas_, n_features_in_
        As :class:`LSSVMRegressorCV`.
    best_score_ : float
        The chosen pair's leave-one-out misclassification rate.
    loo_error_path_ : ndarray of shape (n_gammas, n_lams)
        Leave-one-out misclassification rate of every pair.
    loo_mse_path_ : ndarray of shape (n_gammas, n_lams)
        Leave-one-out mean squared error of the coded outputs.
    classes_ : ndarray of shape (n_classes,)
    estimator_ : LSSVMClassifier

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from rkm import LSSVMClassifierCV
    >>> X, y = load_iris(return_X_y=True)
    >>> LSSVMClassifierCV().fit(X, y).best_score_ < 0.1
    True
    """

    _parameter_constraints: dict = {**_LSSVMCV._parameter_constraints, "coding": [StrOptions(set(CODINGS))]}

    def __init__(
        self,
        *,
        lams: ArrayLike | None = None,
        gammas: ArrayLike | None = None,
        kernel: str | Kernel = "rbf",
        degree: float = 3,
        coef0: float = 1.0,
        eta: float = 1.0,
        fit_intercept: bool = True,
        coding: str = "one_vs_all",
        n_threads: int | None = None,
        verbose: int = 0,
    ):
        super().__init__(
            lams=lams,
            gammas=gammas,
            kernel=kernel,
            degree=degree,
            coef0=coef0,
            eta=eta,
            fit_intercept=fit_intercept,
            n_threads=n_threads,
            verbose=verbose,
        )
        self.coding = coding

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None) -> LSSVMClassifierCV:
        """Search the grid by leave-one-out and refit the best pair.

        Parameters
        ----------
        X : {array-like, scipy.sparse matrix} of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        sample_weight : array-like of shape (n_samples,), default=None

        Returns
        -------
        self
        """
        X, y = validate_data(self, X, y, accept_sparse=("csr", "csc"), dtype=list(FLOAT_DTYPES))
        check_classification_targets(y)
        if sample_weight is not None:
            sample_weight = _check_sample_weight(sample_weight, X, dtype=np.float64, ensure_non_negative=True)
            if not np.any(sample_weight > 0):
                raise ValueError("sample_weight: at least one weight must be positive")
        encoder = LabelEncoder().fit(y)
        self.classes_ = encoder.classes_
        if self.classes_.size < 2:
            raise ValueError(f"y: needs at least two classes, got 1 class ({self.classes_[0]!r})")
        codes = class_codes(self.classes_.size, self.coding)
        labels = encoder.transform(y)
        Y = np.ascontiguousarray(codes[labels], dtype=np.float64)

        def score(residuals, active):
            weights = None if sample_weight is None else sample_weight[active]
            predicted = np.argmax((Y[active] - residuals) @ codes.T, axis=1)
            error = self._weighted_mean(predicted != labels[active], weights)
            return error, self._weighted_mean(np.mean(residuals**2, axis=1), weights)

        self.loo_error_path_, self.loo_mse_path_ = self._search(X, Y, sample_weight, score)
        params = self._final_params()
        self.estimator_ = LSSVMClassifier(coding=self.coding, **params).fit(X, y, sample_weight=sample_weight)
        return self

    def decision_function(self, X: ArrayLike) -> np.ndarray:
        """The refitted classifier's decision function (:meth:`LSSVMClassifier.decision_function`)."""
        check_is_fitted(self, "estimator_")
        return self.estimator_.decision_function(X)
