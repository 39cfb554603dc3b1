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

import functools

import numpy as np
import scipy.linalg
import scipy.sparse as sp
from numpy.typing import ArrayLike
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin, _fit_context, clone
from sklearn.preprocessing import LabelEncoder
from sklearn.utils._param_validation import HasMethods, StrOptions
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import _check_sample_weight, check_is_fitted, validate_data

from rkm import _core
from rkm._utils import primal
from rkm._utils.calibration import fit_platt
from rkm._utils.coding import CODINGS, class_codes, class_scores
from rkm._utils.dask_arrays import is_dask_collection
from rkm._utils.device import check_device, cuda_for_input
from rkm._utils.progress import Progress
from rkm._utils.streaming import DeferredSolveMixin
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
from rkm._utils.warn import warn
from rkm.exceptions import ConvergenceWarning
from rkm.kernels import Kernel, is_callable_kernel, kernel_matrix, kernel_product, model_kernel_spec
from rkm.shallow import _pcg

# solver="auto" factorizes up to this many samples (about 40 s on 2 cores) and solves by conjugate gradients
# beyond, unless the conjugate gradients turn out too slow for the system's conditioning (below).
AUTO_CHOLESKY_MAX_SAMPLES = 20_000
# Bytes of the dense solvers besides the N x N matrix: right-hand sides, H and the kernel's row buffers.
_DENSE_SLACK_BYTES = 64 * 2**20
# The robust LS-SVM (LS-SVMlab's robustlssvm): at most this many reweighted fits, stopped when the hidden
# features change by at most ROBUST_TOL relative to their norm (LS-SVMlab: 500 and 1e-4, absolute).
ROBUST_MAX_ITER = 500
ROBUST_TOL = 1e-4
# 1.483 MAD is the standard deviation of Gaussian residuals (1 / Phi^{-1}(3/4)), LS-SVMlab's robust scale.
_MAD_TO_SIGMA = 1.483
# Weight functions of the robust LS-SVM on the standardized residuals r = e / s (LS-SVMlab's weightingscheme):
# Hampel's (Suykens et al. 2002: c1 = 2.5, c2 = 3, 1e-4 beyond c2), Huber's (c = 1.345) and the logistic
# tanh(r) / r.
HAMPEL_C1, HAMPEL_C2, HAMPEL_FLOOR = 2.5, 3.0, 1e-4
HUBER_C = 1.345
ROBUST_WEIGHTS = ("hampel", "huber", "logistic")
# Folds of the internal cross-validation of LSSVMClassifier(probability=True) (SVC's 5).
PROBABILITY_FOLDS = 5


def robust_weights(r, weights="hampel"):
    """Weights v_k of the robust LS-SVM for standardized residuals r_k = e_k / s (Suykens et al. 2002).

    "hampel": 1 for ``|r|`` <= 2.5, (3 - ``|r|``) / 0.5 for 2.5 < ``|r|`` <= 3, 1e-4 beyond (Suykens et al. 2002, eq. 16);
    "huber": 1 for ``|r|`` < 1.345, 1.345 / ``|r|`` beyond; "logistic": tanh(r) / r (1 at r = 0).
    """
    r = np.abs(np.asarray(r, dtype=np.float64))
    if weights == "hampel":
        middle = (HAMPEL_C2 - r) / (HAMPEL_C2 - HAMPEL_C1)
        return np.where(r <= HAMPEL_C1, 1.0, np.where(r <= HAMPEL_C2, middle, HAMPEL_FLOOR))
    if weights == "huber":
        return np.where(r < HUBER_C, 1.0, HUBER_C / np.maximum(r, HUBER_C))
    if weights == "logistic":
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(r > 1e-8, np.tanh(r) / r, 1.0)
    raise ValueError(f"robust: must be one of {ROBUST_WEIGHTS} or None, got {weights!r}")


def _weighted_median(values, weights):
    """Column medians of values (n x p) with sample weights: np.median of the rows repeated by integer weights."""
    out = np.empty(values.shape[1])
    for column in range(values.shape[1]):
        order = np.argsort(values[:, column], kind="stable")
        sorted_values, cumulative = values[order, column], np.cumsum(weights[order])
        half = cumulative[-1] / 2
        i = min(int(np.searchsorted(cumulative, half)), len(cumulative) - 1)
        exact = cumulative[i] == half and i + 1 < len(cumulative)
        out[column] = (sorted_values[i] + sorted_values[i + 1]) / 2 if exact else sorted_values[i]
    return out


def _call_method(block, model, method):
    """model.<method>(block) on one partition of a Dask array (a module-level function, so that it pickles)."""
    return getattr(model, method)(block)


def _coded_labels(y, classes, codes):
    """The codewords (rows of codes) of labels y, each one of the sorted classes."""
    y = np.asarray(y)
    labels = np.searchsorted(classes, y)
    clipped = np.minimum(labels, classes.size - 1)
    unknown = (labels >= classes.size) | (classes[clipped] != y)
    if np.any(unknown):
        raise ValueError(f"y: holds labels not in classes: {np.unique(y[unknown]).tolist()!r}")
    return codes[clipped].astype(np.float64)


def _kernel_parameter_constraints():
    constraints = kernel_constraints(precomputed=True)
    constraints["kernel"] = [*constraints["kernel"], callable]
    return constraints


class _LSSVM(DeferredSolveMixin, BaseEstimator):
    """Fitting and prediction shared by LSSVMRegressor and LSSVMClassifier: solve eq. 3.16 for targets Y."""

    # partial_fit accumulates the primal's moments; the solve runs when one of these is first read.
    _deferred_attributes = ("coef_", "intercept_")

    _parameter_constraints: dict = {
        **_kernel_parameter_constraints(),
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
        "device": [str],
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
        preconditioner: str | None = "pivoted_cholesky",
        preconditioner_rank: int | None = None,
        kernel_storage: str = "matrix_free",
        tol: float | None = None,
        max_iter: int | None = None,
        loo: bool = False,
        n_threads: int | None = None,
        random_state: int | np.random.RandomState | None = None,
        device: str = "cpu",
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
        self.device = device
        self.verbose = verbose

    # ------------------------------------------------------------------ parameters

    def _kernel_spec(self, n_features):
        """(name, gamma, degree, coef0) of the kernel in use; name is "precomputed", canonical, or a callable."""
        return model_kernel_spec(self.kernel, self.gamma, self.degree, self.coef0, n_features)

    def _check_params_vs_input(self, X):
        """The rules that need the data or tie parameters together; returns the solver the fit uses."""
        n_samples, n_features = X.shape
        if self.preconditioner_rank is not None and self.preconditioner_rank > n_samples:
            raise ValueError(f"preconditioner_rank: at most n_samples={n_samples}, got {self.preconditioner_rank}")
        name = self._kernel_spec(n_features)[0]
        callable_kernel = is_callable_kernel(name)
        solver = self._resolve_solver(n_samples, name)
        if self.mixed_precision and solver == "cholesky" and check_device(self.device) is not None:
            raise ValueError(
                "mixed_precision: the float32 factorization with float64 refinement runs on the CPU; use "
                "device='cpu' or mixed_precision=False"
            )
        cuda_for_input(self.device, name, feature_map=solver == "primal", sparse=sp.issparse(X))
        if self.loo and solver != "cholesky":
            raise ValueError(f"loo: the closed-form leave-one-out residuals need solver='cholesky', not {solver!r}")
        if (name == "precomputed" or callable_kernel) and solver != "cholesky":
            what = "kernel='precomputed'" if name == "precomputed" else "a callable kernel"
            raise ValueError(
                f"solver: {solver!r} evaluates a named kernel from X itself (matrix-free products, preconditioner "
                f"or features); {what} needs solver='cholesky'"
            )
        if sp.issparse(X):
            if name == "precomputed":
                raise ValueError("X: a precomputed kernel matrix must be a dense array, not a scipy.sparse matrix")
            if solver != "cholesky":
                raise ValueError(
                    f"X: sparse input is solved with the stored kernel matrix (solver='cholesky'), not solver="
                    f"{solver!r}; pass X.toarray() for the conjugate-gradient or primal solvers"
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
        if (
            kernel_name == "precomputed"
            or is_callable_kernel(kernel_name)
            or self.loo
            or n_samples <= AUTO_CHOLESKY_MAX_SAMPLES
        ):
            return "cholesky"
        return "cg"

    # ------------------------------------------------------------------ fitting

    def _validate_fit_data(self, X, y, sample_weight, **options):
        """X (a copy where the model keeps it), y and the sample weights (None when absent)."""
        X, y = validate_data(self, X, y, accept_sparse=("csr", "csc"), dtype=list(FLOAT_DTYPES), order="C", **options)
        if sample_weight is not None:
            sample_weight = _check_sample_weight(sample_weight, X, dtype=np.float64, ensure_non_negative=True)
            if not np.any(sample_weight > 0):
                raise ValueError("sample_weight: at least one weight must be positive")
        return X, y, sample_weight

    def _fit_targets(self, X, Y, sample_weight=None, robust=None):
        """Solve eq. 3.16 (or 3.15 in the primal) for the targets Y (n_samples x p, float64), weighted by
        sample_weight (None: equal weights) and with robust reweighting when `robust` names a weight function."""
        self._progress = Progress(type(self).__name__, self.verbose)
        self._forget_stream()
        self.solver_ = self._check_params_vs_input(X)
        self.n_iter_ = 1
        self._progress(f"solver {self.solver_!r}, N = {X.shape[0]}, {Y.shape[1]} output(s)")
        Y = np.ascontiguousarray(Y, dtype=np.float64)
        cache = {}
        self._X_copy = None
        try:
            self._fit_weighted(X, Y, sample_weight, cache)
            if robust is not None:
                self._fit_robust(X, Y, sample_weight, robust, cache)
        finally:
            del self._X_copy

    def _fit_weighted(self, X, Y, weights, cache):
        """One fit with the per-sample weights v_k (lam / v_k on the diagonal: the weighted LS-SVM)."""
        if self.solver_ == "primal":
            self._fit_primal(X, Y, weights)
            return
        # The core's fused build-and-factorize runs on the CPU; device="cuda" builds K on the GPU instead.
        fused = self.solver_ == "cholesky" and self.device == "cpu" and not sp.issparse(X) and self._named_kernel(X)
        if weights is None and fused:
            self._fit_cholesky(X, Y)
            return
        active = None if weights is None or np.all(weights > 0) else np.flatnonzero(weights > 0)
        if self.solver_ == "cg":
            Xa, Ya, wa = (X, Y, weights) if active is None else (X[active], Y[active], weights[active])
            H, b = self._solve_cg(Xa, Ya, wa)
            residuals = None
        else:
            H, b, residuals = self._solve_kernel_matrix(X, Y, weights, active, cache)
        if active is not None:
            full = np.zeros((X.shape[0], H.shape[1]), dtype=H.dtype)
            full[active] = H
            H = full
        self._store_dual(X, H, b)
        if self.loo:
            self.loo_residuals_ = residuals

    def _named_kernel(self, X):
        name = self._kernel_spec(X.shape[1])[0]
        return name != "precomputed" and not is_callable_kernel(name)

    def _check_dense_memory(self, n_samples, itemsize, copies=1):
        check_memory(
            copies * n_samples * n_samples * itemsize + _DENSE_SLACK_BYTES,
            "X",
            f"the {n_samples} x {n_samples} kernel matrix of solver='cholesky'"
            + (f" ({copies} copies: the kernel and its factorization)" if copies > 1 else ""),
            advice="use solver='cg' (kernel products, no stored matrix) or solver='primal' with "
            "feature_map=rkm.features.Nystroem(...)",
        )

    def _fit_cholesky(self, X, Y):
        """Equal weights, a named kernel of dense X: the core builds and factorizes the kernel matrix."""
        name, gamma, degree, coef0 = self._kernel_spec(X.shape[1])
        threads = thread_count(self.n_threads)
        mixed = self.mixed_precision and X.dtype == np.float64 and not self.loo
        self._check_dense_memory(X.shape[0], 4 if mixed else X.dtype.itemsize)
        Y = np.ascontiguousarray(Y, dtype=X.dtype)
        residuals = None
        with blas_threads(threads):
            if mixed:
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

    def _kernel_matrix(self, X, cache):
        """The training kernel matrix K: X itself for kernel='precomputed', else built once (kept in `cache`
        for the reweighted fits of the robust LS-SVM)."""
        if "K" in cache:
            return cache["K"]
        name, gamma, degree, coef0 = self._kernel_spec(X.shape[1])
        if name == "precomputed":
            if X.shape[0] != X.shape[1]:
                raise ValueError(f"X: a precomputed kernel must be square, got shape {X.shape}")
            K = X
        else:
            self._check_dense_memory(X.shape[0], X.dtype.itemsize, copies=2)
            K = kernel_matrix(X, None, name, gamma, degree, coef0, n_threads=self.n_threads, device=self.device)
        cache["K"] = K
        return K

    def _solve_kernel_matrix(self, X, Y, weights, active, cache):
        """Eq. 3.16 with lam / v_k on the diagonal, by the core's Cholesky solver on K + eta lam diag(1/v - 1):
        (1/eta) of it plus lam I is (1/eta) K + lam V^{-1}. Samples of weight 0 leave the system (h_k = 0);
        their leave-one-out residuals are their plain residuals."""
        K = self._kernel_matrix(X, cache)
        dtype = K.dtype
        system = K if active is None else K[np.ix_(active, active)]
        system = np.array(system, dtype=dtype, order="C", copy=True)  # the core overwrites its lower triangle
        if weights is not None:
            w = weights if active is None else weights[active]
            system[np.diag_indices_from(system)] += (self.eta * self.lam * (1.0 / w - 1.0)).astype(dtype)
        Ya = Y if active is None else Y[active]
        with blas_threads(thread_count(self.n_threads)):
            H, b, residuals = _core.lssvm_dual_solve(
                system,
                np.ascontiguousarray(Ya, dtype=dtype),
                self.eta,
                self.lam,
                self.fit_intercept,
                self.loo,
                self.n_threads,
            )
        if self.loo and active is not None:
            out = np.empty((X.shape[0], Y.shape[1]), dtype=residuals.dtype)
            out[active] = residuals
            inactive = np.flatnonzero(weights <= 0)
            out[inactive] = Y[inactive] - (K[np.ix_(inactive, active)] @ H / self.eta + b)
            residuals = out
        return H, b, residuals

    def _solve_cg(self, X, Y, weights, product=None):
        """Conjugate gradients on eq. 3.16; `product` computes the kernel products elsewhere (Dask tasks)."""
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
            device=self.device,
            verbose=self.verbose,
            progress=self._progress,
            sample_weight=weights,
            give_up_if_slow=product is None and self.solver == "auto" and self._dense_fallback_fits(X),
            product=product,
        )
        if result.too_slow:
            # solver="auto": the conjugate gradients would not reach tol within max_iter at this conditioning
            # (small lam against the kernel's scale); the dense factorization fits in memory, so it takes over.
            self._progress(f"{result.message}; solving by the Cholesky factorization instead")
            self.solver_ = "cholesky"
            H, b, _ = self._solve_kernel_matrix(X, Y, weights, None, {})
            return H, b
        self.n_iter_ = result.n_iter
        self.cg_residuals_ = np.asarray(result.residuals)
        self.preconditioner_rank_ = result.rank
        if not result.converged:
            warn(
                f"solver='cg' stopped after {result.n_iter} iterations at relative residual "
                f"{np.max(result.residuals):.2e} > tol; increase max_iter or preconditioner_rank, or lam",
                ConvergenceWarning,
            )
        return result.H.astype(X.dtype, copy=False), result.b.astype(X.dtype, copy=False)

    def _dense_fallback_fits(self, X):
        """Whether two copies of the N x N kernel matrix fit in the memory available now."""
        try:
            self._check_dense_memory(X.shape[0], X.dtype.itemsize, copies=2)
        except MemoryError:
            return False
        return True

    def _store_dual(self, X, H, b):
        self.dual_coef_ = self.H_ = H
        self.intercept_ = b
        if self.kernel == "precomputed":
            self.X_fit_ = None
        elif self._X_copy is None or self._X_copy[0] is not X:
            # A copy: changing the caller's X after fit must not change the model (scikit-learn's copy_X).
            # The reweighted fits of the robust LS-SVM reuse the copy of the first.
            self._X_copy = (X, X.copy())
            self.X_fit_ = self._X_copy[1]

    def _fit_robust(self, X, Y, sample_weight, weights_name, cache):
        """LS-SVMlab's robustlssvm (Suykens et al. 2002, iterated): from the residuals e_k of the last fit and
        their robust scale s = 1.483 MAD(e), refit with the weights v_k = w_k v(e_k / s) until the hidden
        features settle. Several outputs: r_k is the largest |e_kj| / s_j over the outputs j."""
        base = np.ones(X.shape[0]) if sample_weight is None else sample_weight
        counted = base > 0
        weights = base.copy()
        robust = np.ones(X.shape[0])
        previous = self._coefficients()
        for iteration in range(1, ROBUST_MAX_ITER + 1):
            E = self._training_residuals(X, Y, weights)[counted]
            # Medians weighted by sample_weight: weight 2 counts as the sample twice.
            centre = _weighted_median(E, base[counted])
            scale = _MAD_TO_SIGMA * _weighted_median(np.abs(E - centre), base[counted])
            usable = scale > np.finfo(np.float64).eps * np.abs(E).max(initial=0.0)
            if not np.any(usable):  # half the residuals vanish: nothing to downweight
                break
            ratios = np.abs(E[:, usable]) / scale[usable]
            robust = np.ones(X.shape[0])
            robust[counted] = robust_weights(ratios.max(axis=1), weights_name)
            weights = base * robust
            self._fit_weighted(X, Y, weights, cache)
            current = self._coefficients()
            change = np.linalg.norm(current - previous)
            previous = current
            self._progress(
                f"robust reweighting {iteration}: relative change {change / max(np.linalg.norm(current), 1e-300):.2e}"
            )
            if change <= ROBUST_TOL * np.linalg.norm(current):
                break
        else:
            warn(
                f"robust: the reweighted fits did not settle within {ROBUST_MAX_ITER} iterations (relative change "
                f"of the coefficients above {ROBUST_TOL:g}); the weights of the last fit are kept",
                ConvergenceWarning,
            )
        self.robust_weights_ = robust
        self.n_robust_iter_ = iteration

    def _coefficients(self):
        return np.asarray(self.coef_ if self.solver_ == "primal" else self.dual_coef_, dtype=np.float64)

    def _training_residuals(self, X, Y, weights):
        """e_k = y_k - yhat(x_k) of the last fit: lam h_k / v_k from the dual's first block row, else predicted."""
        if self.solver_ == "primal":
            return Y - self._primal_outputs(X).reshape(Y.shape)
        H = np.asarray(self.dual_coef_, dtype=np.float64)
        E = np.zeros_like(H)
        active = weights > 0
        E[active] = self.lam * H[active] / weights[active, None]
        return E

    def _fit_primal(self, X, Y, weights=None):
        """Eq. 3.15 from the (weighted) moments of the features and targets (:meth:`_solve_primal`)."""
        feature_map = self._fitted_feature_map(X)
        with blas_threads(thread_count(self.n_threads)):
            moments = primal.feature_target_moments(feature_map, X, Y, weights)
        self.feature_map_ = feature_map
        self._solve_primal(moments, X.dtype)

    def _solve_primal(self, moments, dtype):
        """Eq. 3.15, centred: with mu and y_mean the (weighted) means of phi(x_i) and y_i, the bias row gives
        b = y_mean - W^T mu, and the first block row (sum_i v_i phi_c phi_c^T + lam eta I) W = sum_i v_i phi_c y_c^T
        (v_i = 1 without sample weights). Without the bias the moments are taken about the origin."""
        if not self.fit_intercept:
            moments = moments.uncentred()
        system = moments.scatter + self.lam * self.eta * np.eye(moments.scatter.shape[0])
        with blas_threads(thread_count(self.n_threads)):
            try:
                W = scipy.linalg.solve(system, moments.cross, assume_a="pos", check_finite=False)
            except np.linalg.LinAlgError as error:
                raise ValueError(
                    f"lam: the primal system is not positive definite for lam = {self.lam:g}; increase lam"
                ) from error
        b = moments.target_mean - moments.mean @ W
        self.coef_ = W.astype(dtype)
        self.intercept_ = b.astype(dtype)

    # ------------------------------------------------------------------ Dask

    def _check_dask_params(self, n_samples, n_features):
        """The solver of a Dask fit: the primal with a feature map (one map-reduce), else conjugate gradients
        with the kernel products as tasks; the options that need the data in memory are refused."""
        from rkm.features import ExplicitFeatureMap

        if check_device(self.device) is not None:
            raise ValueError("device: a Dask fit runs on the workers' CPUs; use device='cpu'")
        if self.feature_map is not None:
            if self.solver not in ("auto", "primal"):
                raise ValueError(f"feature_map: is used by solver='primal' only, not solver={self.solver!r}")
            if not isinstance(self.feature_map, (str, ExplicitFeatureMap)):
                raise ValueError(
                    "feature_map: a Dask fit streams rkm's explicit maps (rkm.features.Nystroem, "
                    f"RandomFourierFeatures, rkm.torch.FeatureMap) or 'linear', got {type(self.feature_map).__name__}"
                )
            solver = "primal"
        elif self.solver in ("auto", "cg"):
            solver = "cg"
        else:
            raise ValueError(
                f"solver: {self.solver!r} needs the data in memory; a Dask fit uses solver='cg' (kernel products as "
                "Dask tasks) or a feature_map (solver='primal')"
            )
        name = self._kernel_spec(n_features)[0]
        if solver == "cg" and (name == "precomputed" or is_callable_kernel(name)):
            raise ValueError("kernel: a Dask fit evaluates a named kernel from X, not a precomputed or callable one")
        if self.preconditioner_rank is not None and self.preconditioner_rank > n_samples:
            raise ValueError(f"preconditioner_rank: at most n_samples={n_samples}, got {self.preconditioner_rank}")
        self._refuse_options_needing(
            "the data in memory, not a Dask array (use fit on NumPy)", "the data in memory, not a Dask array"
        )
        return solver

    def _start_dask_fit(self, X):
        """A Dask fit's input as a row-chunked Dask array and its solver, checked before any pass over the data."""
        from rkm._utils import dask_arrays

        self._progress = Progress(type(self).__name__, self.verbose)
        self._forget_stream()
        dX = dask_arrays.validate_dask_data(self, X, reset=True)
        self.solver_ = self._check_dask_params(*dX.shape)
        self.n_iter_ = 1
        self._progress(f"solver {self.solver_!r} on a Dask array, N = {dX.shape[0]}")
        return dX

    def _fit_dask_targets(self, dX, dY, dw):
        """fit on Dask arrays (targets dY of shape (n, p) and weights dw with dX's row chunks, dw may be None):
        the primal's moments as one map-reduce over the partitions (the feature map fitted from the rows it
        needs), or conjugate gradients on eq. 3.16 with each kernel product as one task per partition. Returns
        the targets the conjugate gradients gathered (None for the primal)."""
        from rkm._utils import dask_arrays

        if self.solver_ == "primal":
            feature_map = None if isinstance(self.feature_map, str) else clone(self.feature_map)
            if feature_map is not None:
                dask_arrays.fit_feature_map(feature_map, dX)
            moments = dask_arrays.target_moments(feature_map, dX, dY, dw)
            self.feature_map_ = feature_map
            self._solve_primal(moments, dX.dtype)
            return None
        # The rows are gathered once: the preconditioner and the dual's predictions (X_fit_) need them.
        X = np.asarray(dX)
        Y = np.asarray(dY, dtype=np.float64).reshape(X.shape[0], -1)
        weights = None if dw is None else np.asarray(dw, dtype=np.float64)
        if weights is not None and not np.all(weights > 0):
            raise ValueError(
                "sample_weight: a Dask fit by conjugate gradients needs positive weights; drop the rows of weight 0"
            )
        name, gamma, degree, coef0 = self._kernel_spec(X.shape[1])
        product = dask_arrays.kernel_operator(
            dX.astype(np.float64), X.astype(np.float64), name, gamma, degree, coef0, self.n_threads
        )
        H, b = self._solve_cg(X, Y, weights, product)
        self.dual_coef_ = self.H_ = H
        self.intercept_ = b
        self.X_fit_ = X
        return Y

    def _map_dask(self, X, method, n_out, dtype=None):
        """``self.<method>`` over the partitions of a Dask X, as a lazy Dask array (n_out None: one value a row;
        dtype None: that of the outputs, float32 for a float32 model and X, else float64)."""
        from rkm._utils import dask_arrays

        check_is_fitted(self)
        self._solve_now()  # the workers get the solved model, not the stream
        dX = dask_arrays.validate_dask_data(self, X, reset=False)
        dtype = np.result_type(dX.dtype, self.intercept_.dtype) if dtype is None else dtype
        return dask_arrays.transform_blocks(functools.partial(_call_method, method=method), dX, n_out, dtype, self)

    # ------------------------------------------------------------------ streaming

    def _streams(self):
        """partial_fit exists with a feature map: it streams the primal (the dual needs every row at once)."""
        if self.feature_map is None:
            raise AttributeError(
                "partial_fit is available with an explicit feature_map ('linear' or a transformer such as "
                "rkm.features.Nystroem): it solves the primal (eq. 3.15) from streamed moments, while the dual needs "
                "every row at once"
            )
        return True

    def _check_partial_fit_params(self):
        """partial_fit streams the primal: none of the options that need every row."""
        if self.solver not in ("auto", "primal"):
            raise ValueError(f"solver: partial_fit solves the primal, not solver={self.solver!r}")
        self._refuse_options_needing(
            "every row at once; partial_fit streams them (use fit)", "every row at once (use fit)"
        )

    def _refuse_options_needing(self, rows, probability_rows):
        """Refuses the options that need every row at once in memory (Dask fits and partial_fit state how, in `rows`
        and, for the classifier's probability, `probability_rows`)."""
        for option, why in (("loo", "closed-form leave-one-out residuals"), ("robust", "reweighted refits")):
            if getattr(self, option, None):
                raise ValueError(f"{option}: the {why} need {rows}")
        if getattr(self, "probability", False):
            raise ValueError(f"probability: Platt scaling's internal cross-validation needs {probability_rows}")

    def _partial_fit_targets(self, X, Y, sample_weight, first):
        """Adds a batch of rows to the streamed moments of the primal; the first batch also fits the feature map
        (a Nyström map draws its landmarks from it)."""
        if first:
            self.feature_map_ = self._fitted_feature_map(X)
            self.solver_, self.n_iter_, self.n_samples_seen_ = "primal", 1, 0
            self._stream, self._stream_dtype = primal.MomentStream(self.feature_map_, Y.shape[1]), X.dtype
        elif Y.shape[1] != self._stream.n_targets:
            raise ValueError(f"y: has {Y.shape[1]} output(s), but earlier batches had {self._stream.n_targets}")
        with blas_threads(thread_count(self.n_threads)):
            self._stream.add(X, Y, sample_weight)
        self.n_samples_seen_ += X.shape[0]
        self._defer_solve()

    def _start_partial_fit(self):
        """Whether this partial_fit call starts a new stream; if so, forgets any earlier fit first."""
        if "_stream" in self.__dict__:
            return False
        self._check_partial_fit_params()
        self._forget_fit()
        return True

    def _solve_stream(self):
        self._solve_primal(self._stream.moments(), self._stream_dtype)

    def _fitted_feature_map(self, X):
        """None for the linear map phi(x) = x, else a fitted clone of the given transformer."""
        if isinstance(self.feature_map, str):  # "linear", the one name the constraints let through
            return None
        return clone(self.feature_map).fit(X)

    # ------------------------------------------------------------------ prediction

    def _outputs(self, X):
        """The models of eq. 3.17: W^T phi(x) + b in the primal, (1/eta) sum_j h_j K(x_j, x) + b in the dual."""
        check_is_fitted(self, "intercept_")
        X = validate_data(self, X, accept_sparse=("csr", "csc"), dtype=list(FLOAT_DTYPES), order="C", reset=False)
        dtype = np.result_type(X.dtype, self.intercept_.dtype)
        if self.solver_ == "primal":
            if sp.issparse(X):
                raise ValueError("X: this model was fitted by solver='primal', which takes dense X only")
            return self._primal_outputs(X).astype(dtype, copy=False)
        X = X.astype(self.dual_coef_.dtype, copy=False)
        if self.kernel == "precomputed":
            if sp.issparse(X):
                raise ValueError("X: precomputed kernel rows must be a dense array, not a scipy.sparse matrix")
            if X.shape[1] != self.dual_coef_.shape[0]:
                raise ValueError(
                    f"X: precomputed kernel rows need {self.dual_coef_.shape[0]} columns, got {X.shape[1]}"
                )
            with blas_threads(thread_count(self.n_threads)):
                scores = X @ self.dual_coef_
        else:
            name, gamma, degree, coef0 = self._kernel_spec(X.shape[1])
            scores = kernel_product(
                X, self.X_fit_, self.dual_coef_, name, gamma, degree, coef0, self.n_threads, device=self.device
            )
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
        tags.input_tags.sparse = self.kernel != "precomputed" and self.feature_map is None
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

    Beyond memory: with a ``feature_map``, :meth:`partial_fit` adds batches of rows to the primal's moments
    (from a memory map, a zarr store or a generator), and ``fit`` takes Dask arrays or DataFrames (the
    moments as one map-reduce over the partitions; without a feature map, conjugate gradients whose kernel
    products run as one task per partition, the rows gathered once for the preconditioner and ``X_fit_``);
    ``predict`` then returns a lazy Dask array. Both equal the in-memory fit to rounding.

    Parameters
    ----------
    kernel : {"rbf", "linear", "poly", "laplacian", "cosine", "tanimoto", "precomputed"}, Kernel or callable, \
default="rbf"
        "rbf" is exp(-gamma ||x - y||^2); use ``rkm.kernels.RBF.from_sigma`` for a paper's sigma.
        "precomputed" takes the N x N kernel matrix in ``fit`` and kernel rows k(X, X_train) in ``predict``.
        A callable ``kernel(A, B) -> Gram matrix`` (SVC's convention, see :mod:`rkm.kernels`) builds K in
        Python and needs solver="cholesky" (the conjugate-gradient and primal solvers evaluate named kernels
        only). Aliases "gaussian" (rbf) and "polynomial" (poly) are accepted. Sparse CSR/CSC X is accepted with
        solver="cholesky" for every named kernel.
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
    robust : {"hampel", "huber", "logistic"} or None, default=None
        The robust LS-SVM of LS-SVMlab's ``robustlssvm`` (Suykens et al. 2002, iterated): after the fit,
        the residuals e_k (lam h_k / v_k) and their robust scale s = 1.483 MAD(e) (medians weighted by
        sample_weight, so that weight 2 counts as two samples) give weights v(e_k / s),
        "hampel" Suykens et al.'s (1 up to 2.5, linear to 0 at 3, 1e-4 beyond), "huber" (1.345 / ``|r|`` beyond
        1.345), "logistic" (tanh(r) / r); the model is refitted with them (times ``sample_weight``) until
        the coefficients change by at most 1e-4 relatively (at most 500 fits; ConvergenceWarning
        otherwise). Several outputs: r_k is the largest standardized residual over the outputs. Each fit is
        one solve; with solver="cholesky" the kernel matrix is built once (two N x N arrays).
    solver : {"auto", "cholesky", "cg", "primal"}, default="auto"
        "cholesky": one Cholesky factorization of (1/eta) K + lam I in the compiled core and the bias by the
        Schur complement (N^2 values in memory). "cg": preconditioned conjugate gradients on the same system,
        with kernel products that are never stored (``kernel_storage``) — for N beyond a dense factorization.
        "primal": eq. 3.15 with the explicit ``feature_map``. "auto": "primal" when a feature_map is given,
        "cholesky" up to 20 000 samples (and for precomputed or callable kernels, or loo), "cg" beyond,
        unless the conjugate gradients prove too slow for the system's conditioning (small lam against the
        kernel's scale: the residual's rate over the last 20 iterations predicts more than max_iter with the
        largest preconditioner) and two N x N matrices fit in memory: then "cholesky" (``solver_`` says so).
    feature_map : "linear" or transformer, default=None
        The explicit feature map phi of the primal: "linear" (phi(x) = x) or a transformer such as
        ``rkm.features.Nystroem`` (including fixed-size LS-SVM's landmarks of maximal quadratic Rényi
        entropy, ``landmarks="renyi"``) or ``rkm.features.RandomFourierFeatures``; it is cloned and fitted on X.
        rkm's maps are streamed a block of rows at a time.
    mixed_precision : bool, default=False
        For float64 data, a named kernel, equal sample weights and solver="cholesky" (elsewhere the fit
        factorizes in float64): factorize in float32 (half the memory) and refine the
        solution to float64 accuracy by conjugate gradients on the exact system, whose products recompute the
        kernel in float64 tiles (LAPACK dsposv's idea), falling back to a float64 factorization when the
        float32 one fails or the refinement stalls. Half the memory, and faster where the factorization
        dominates: at N = 10 000 (d = 16) 1.5x faster than the float64 fit on 2 cores (float32 factorizes
        1.7x faster; 2-3 refinement steps of 0.3 s each), while at N = 2000 the refinement costs more than
        it saves (bench/RESULTS.md, "Performance floor"). ``n_iter_`` counts the refinement steps.
    preconditioner : {"nystrom", "pivoted_cholesky", None}, default="pivoted_cholesky"
        Low-rank preconditioner of solver="cg": F F^T + lam I from a pivoted Cholesky factorization (greedy
        pivots, stopped once its remainder's trace is below lam / 10) or a Nyström approximation (uniform
        landmarks). The pivoted one adapts to small lam, where uniform landmarks need a larger rank.
    preconditioner_rank : int, default=None
        Rank of the preconditioner, at most n_samples. None: adaptive, starting at min(n_samples, 1000,
        max(100, n_samples / 20)) and growing 4-fold (up to min(n_samples, 4000) and 1 GiB) whenever the
        residual's rate predicts that tol is not reached within max_iter; CG continues from its iterate. An
        int fixes the rank.
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
        Threads of the core and of BLAS. None: OpenMP's default, which is all cores except inside joblib
        workers (GridSearchCV(n_jobs=...), cross_val_score(n_jobs=...)), which limit it to their share;
        -1: all cores; -k: all but k - 1; 0 is an error.
    random_state : int, RandomState or None, default=None
        Seeds the preconditioner of solver="cg".
    device : {"cpu", "cuda", "cuda:N"}, default="cpu"
        Where the kernel is evaluated (rkm built with ``-Ccmake.define.RKM_CUDA=ON``, an NVIDIA GPU and
        cuBLAS): solver="cholesky" builds K on the GPU and factorizes it on the host; solver="cg" computes its
        kernel products there (kernel_storage "matrix_free": in bands at every product; "dense": K built there,
        multiplied on the host); ``predict`` evaluates its kernel rows there. The preconditioner is built on
        the host. Named kernels and dense X only (not with a feature_map).
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
    X_fit_ : ndarray or sparse matrix
        A copy of the training data of the dual (None for a precomputed kernel).
    solver_ : str
        The solver used.
    n_iter_ : int
        Iterations of the solver: conjugate gradient steps of solver="cg"; for the direct solvers 1 (the
        factorization) plus the refinement steps of mixed precision.
    loo_residuals_ : ndarray of shape (n_samples, n_outputs)
        y_i - yhat^(-i)(x_i) of the model fitted without sample i (when loo=True).
    loo_mse_ : float
        Mean of the squared leave-one-out residuals (when loo=True).
    cg_residuals_ : ndarray of shape (n_outputs,)
        Relative residuals of solver="cg" (module :mod:`rkm.shallow._pcg`).
    preconditioner_rank_ : int
        Columns of the preconditioner's factor at the end of solver="cg" (the adaptive rank's last).
    robust_weights_ : ndarray of shape (n_samples,)
        The robust weights v(e_k / s) of the last fit (robust only; ``sample_weight`` not included).
    n_robust_iter_ : int
        Reweighted fits run (robust only).
    n_samples_seen_ : int
        Rows added by :meth:`partial_fit` since its stream started (absent after ``fit``).
    n_features_in_ : int

    Examples
    --------
    >>> import numpy as np
    >>> from rkm import LSSVMRegressor
    >>> X = np.linspace(-3, 3, 50)[:, None]
    >>> model = LSSVMRegressor(gamma=1.0, lam=1e-3).fit(X, np.sin(X).ravel())
    >>> float(abs(model.predict([[1.0]])[0] - np.sin(1.0))) < 1e-2
    True

    Weighted and robust fits (LS-SVMlab's ``robustlssvm``):

    >>> y = np.sin(X).ravel()
    >>> y[[10, 30]] += 3.0  # two outliers
    >>> robust = LSSVMRegressor(gamma=1.0, lam=1e-3, robust="hampel").fit(X, y)
    >>> robust.robust_weights_[[10, 30]]
    array([0.0001, 0.0001])
    >>> weighted = LSSVMRegressor(gamma=1.0, lam=1e-3).fit(X, y, sample_weight=np.where(y > 2, 0.0, 1.0))
    """

    _parameter_constraints: dict = {
        **_LSSVM._parameter_constraints,
        "robust": [StrOptions(set(ROBUST_WEIGHTS)), None],
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
        robust: str | None = None,
        solver: str = "auto",
        feature_map: str | object | None = None,
        mixed_precision: bool = False,
        preconditioner: str | None = "pivoted_cholesky",
        preconditioner_rank: int | None = None,
        kernel_storage: str = "matrix_free",
        tol: float | None = None,
        max_iter: int | None = None,
        loo: bool = False,
        n_threads: int | None = None,
        random_state: int | np.random.RandomState | None = None,
        device: str = "cpu",
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
            device=device,
            verbose=verbose,
        )
        self.robust = robust

    # prefer_skip_nested_validation=False: the feature_map transformer is not validated yet.
    @_fit_context(prefer_skip_nested_validation=False)
    def fit(self, X: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None) -> LSSVMRegressor:
        """Fit the model (solve eq. 3.16, or eq. 3.15 in the primal).

        Parameters
        ----------
        X : {array-like, scipy.sparse matrix} of shape (n_samples, n_features)
            Or the (n_samples, n_samples) kernel matrix for kernel="precomputed". Sparse CSR/CSC X needs
            solver="cholesky" (the kernel matrix is formed by :func:`rkm.kernels.kernel_matrix`).
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights v_k of the weighted LS-SVM (Suykens et al. 2002): sample k's squared error
            counts v_k times, i.e. lam / v_k on its diagonal (LS-SVMlab's per-sample gam * v_k). Weight 2
            equals the sample twice; weight 0 removes it (h_k = 0). With ``robust``, the robust weights
            multiply these.

        Returns
        -------
        self
        """
        if is_dask_collection(X):
            return self._fit_dask(X, y, sample_weight)
        X, y, sample_weight = self._validate_fit_data(X, y, sample_weight, multi_output=True, y_numeric=True)
        Y = np.asarray(y, dtype=np.float64)
        self._single_output = Y.ndim == 1
        self._fit_targets(X, Y.reshape(X.shape[0], -1), sample_weight, robust=self.robust)
        if self.loo:
            self.loo_mse_ = float(np.mean(np.square(self.loo_residuals_, dtype=np.float64)))
            if self._single_output:
                self.loo_residuals_ = self.loo_residuals_.ravel()
        return self

    def _fit_dask(self, X, y, sample_weight):
        from rkm._utils import dask_arrays

        dX = self._start_dask_fit(X)
        dY = dask_arrays.rows_like(y, dX)
        if dY.dtype.kind not in "biuf":
            raise ValueError(f"y: must hold real numbers, got dtype {dY.dtype}")
        self._single_output = dY.ndim == 1
        dY = dY.astype(np.float64)
        dY = dY[:, None] if self._single_output else dY
        dw = None if sample_weight is None else dask_arrays.rows_like(sample_weight, dX, "sample_weight")
        if dw is not None and dw.ndim != 1:
            raise ValueError(f"sample_weight: must be 1-D, got {dw.ndim}-D")
        self._fit_dask_targets(dX, dY, dw)
        return self

    @available_if(_LSSVM._streams)
    @_fit_context(prefer_skip_nested_validation=False)
    def partial_fit(self, X: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None) -> LSSVMRegressor:
        """Add a batch of rows to a primal fit (eq. 3.15), for data that does not fit in memory at once.

        The batches' feature moments and their cross-moments with the targets are merged exactly, so after the
        last batch the model equals ``fit`` on all rows (to rounding) with the same fitted feature map. The
        first call (on a new model, or after ``fit``) fits a clone of ``feature_map`` on its batch: a
        ``Nystroem`` map draws its landmarks from that batch alone (make it a shuffled, representative one;
        ``RandomFourierFeatures`` need no rows). Each call costs the batch's features and their scatter;
        the m x m solve runs once, when ``coef_``, ``intercept_`` or a prediction is next needed. Needs a
        ``feature_map``; ``loo`` and ``robust`` need every row at once and are refused.

        Parameters
        ----------
        X : array-like of shape (n_batch, n_features)
        y : array-like of shape (n_batch,) or (n_batch, n_outputs)
            The same number of outputs in every batch.
        sample_weight : array-like of shape (n_batch,), default=None
            Non-negative weights of the batch's rows (as in :meth:`fit`).

        Returns
        -------
        self
        """
        first = self._start_partial_fit()
        X, y, sample_weight = self._validate_fit_data(
            X, y, sample_weight, reset=first, multi_output=True, y_numeric=True
        )
        Y = np.asarray(y, dtype=np.float64)
        if first:
            self._single_output = Y.ndim == 1
        elif (Y.ndim == 1) != self._single_output:
            raise ValueError(f"y: must be {'1-D' if self._single_output else '2-D'} as in the first batch")
        self._partial_fit_targets(X, Y.reshape(X.shape[0], -1), sample_weight, first)
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
        if is_dask_collection(X):
            n_out = None if self._single_output else self.intercept_.shape[0]
            return self._map_dask(X, "predict", n_out)
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
    probability : bool, default=False
        Fit Platt scaling during ``fit`` (five more fits: a 5-fold stratified internal cross-validation, as
        ``SVC(probability=True)``; fewer folds when a class has fewer than 5 samples, at least 2 needed) and
        enable :meth:`predict_proba` / :meth:`predict_log_proba`. As with SVC, the class of largest
        probability can differ from :meth:`predict` near the decision boundary.
    All other parameters are those of :class:`LSSVMRegressor` (except ``robust``, which LS-SVMlab also offers
    for regression only).

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
    calibration_ : rkm._utils.calibration.PlattCalibration
        The fitted sigmoids (probability=True): ``calibration_.calibrators_[j].a_``, ``.b_``.
    n_features_in_ : int

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from rkm import LSSVMClassifier
    >>> X, y = load_iris(return_X_y=True)
    >>> LSSVMClassifier(gamma=0.5, lam=0.1).fit(X, y).score(X, y) > 0.95
    True
    >>> model = LSSVMClassifier(gamma=0.5, lam=0.1, probability=True).fit(X, y)
    >>> model.predict_proba(X[:1]).shape
    (1, 3)
    """

    _parameter_constraints: dict = {
        **_LSSVM._parameter_constraints,
        "coding": [StrOptions(set(CODINGS))],
        "probability": ["boolean"],
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
        probability: bool = False,
        solver: str = "auto",
        feature_map: str | object | None = None,
        mixed_precision: bool = False,
        preconditioner: str | None = "pivoted_cholesky",
        preconditioner_rank: int | None = None,
        kernel_storage: str = "matrix_free",
        tol: float | None = None,
        max_iter: int | None = None,
        loo: bool = False,
        n_threads: int | None = None,
        random_state: int | np.random.RandomState | None = None,
        device: str = "cpu",
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
            device=device,
            verbose=verbose,
        )
        self.coding = coding
        self.probability = probability

    # prefer_skip_nested_validation=False: the feature_map transformer is not validated yet.
    @_fit_context(prefer_skip_nested_validation=False)
    def fit(self, X: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None) -> LSSVMClassifier:
        """Fit the classifier (solve eq. 3.22 for the coded labels).

        Parameters
        ----------
        X : {array-like, scipy.sparse matrix} of shape (n_samples, n_features)
            Or the (n_samples, n_samples) kernel matrix for kernel="precomputed".
        y : array-like of shape (n_samples,)
            Class labels (any hashable type scikit-learn accepts: ints, strings, ...).
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative per-sample weights of the weighted LS-SVM (lam / v_k on the diagonal, as in
            :meth:`LSSVMRegressor.fit`); with probability=True they also weight the Platt fits.

        Returns
        -------
        self
        """
        if is_dask_collection(X):
            return self._fit_dask(X, y, sample_weight)
        X, y, sample_weight = self._validate_fit_data(X, y, sample_weight)
        check_classification_targets(y)
        encoder = LabelEncoder().fit(y)
        self.classes_ = encoder.classes_
        if self.classes_.size < 2:
            raise ValueError(f"y: needs at least two classes, got 1 class ({self.classes_[0]!r})")
        self.codes_ = class_codes(self.classes_.size, self.coding)
        labels = encoder.transform(y)
        Y = self.codes_[labels]
        self._fit_targets(X, Y, sample_weight)
        if self.solver_ != "primal":
            self.H_ = Y.astype(self.dual_coef_.dtype) * self.dual_coef_  # h_i = D_yi h_D,i
        if self.loo:
            # The codeword nearest each leave-one-out output (+-1 codewords have equal norms).
            loo_scores = (Y - self.loo_residuals_) @ self.codes_.T
            self.loo_error_ = float(np.mean(np.argmax(loo_scores, axis=1) != labels))
        if self.probability:
            # Platt scaling on decision values of held-out folds, as SVC(probability=True) does.
            smallest = int(np.bincount(labels).min())
            if smallest < 2:
                raise ValueError(
                    "y: probability=True needs at least 2 samples of every class for its internal "
                    f"cross-validation; class {self.classes_[np.argmin(np.bincount(labels))]!r} has 1"
                )
            folds = clone(self).set_params(probability=False, loo=False, verbose=0)
            cv = min(PROBABILITY_FOLDS, smallest)
            self.calibration_ = fit_platt(folds, X, y, sample_weight=sample_weight, cv=cv)
        return self

    def _fit_dask(self, X, y, sample_weight):
        from rkm._utils import dask_arrays

        dX = self._start_dask_fit(X)
        dy = dask_arrays.rows_like(y, dX)
        if dy.ndim != 1:
            raise ValueError(f"y: must be 1-D (one label per row), got {dy.ndim}-D")
        classes = np.unique(np.asarray(dask_arrays._import_dask().array.unique(dy)))
        check_classification_targets(classes)
        if classes.size < 2:
            raise ValueError(f"y: needs at least two classes, got 1 class ({classes[0]!r})")
        self.classes_, self.codes_ = classes, class_codes(classes.size, self.coding)
        dY = dy.map_blocks(
            functools.partial(_coded_labels, classes=self.classes_, codes=self.codes_),
            new_axis=1,
            chunks=(dy.chunks[0], (self.codes_.shape[1],)),
            dtype=np.float64,
            meta=np.empty((0, self.codes_.shape[1])),
        )
        dw = None if sample_weight is None else dask_arrays.rows_like(sample_weight, dX, "sample_weight")
        Y = self._fit_dask_targets(dX, dY, dw)
        if Y is not None:  # the dual
            self.H_ = Y.astype(self.dual_coef_.dtype) * self.dual_coef_  # h_i = D_yi h_D,i
        return self

    @available_if(_LSSVM._streams)
    @_fit_context(prefer_skip_nested_validation=False)
    def partial_fit(
        self, X: ArrayLike, y: ArrayLike, classes: ArrayLike | None = None, sample_weight: ArrayLike | None = None
    ) -> LSSVMClassifier:
        """Add a batch of rows to a primal fit (eq. 3.22 in the primal), for data that does not fit in memory.

        As :meth:`LSSVMRegressor.partial_fit`, for the coded labels: the first call (on a new model, or after
        ``fit``) fits the feature map on its batch and needs ``classes``; the model equals ``fit`` on all rows
        with the same fitted feature map. ``probability`` (its internal cross-validation) is refused.

        Parameters
        ----------
        X : array-like of shape (n_batch, n_features)
        y : array-like of shape (n_batch,)
            Labels, each one of ``classes``.
        classes : array-like of shape (n_classes,), default=None
            Every label the batches may hold (at least two): required on the first call, optional after (it
            must then name the same classes), as scikit-learn's ``partial_fit`` takes it.
        sample_weight : array-like of shape (n_batch,), default=None
            Non-negative weights of the batch's rows.

        Returns
        -------
        self
        """
        first = self._start_partial_fit()
        X, y, sample_weight = self._validate_fit_data(X, y, sample_weight, reset=first)
        check_classification_targets(y)
        if first:
            if classes is None:
                raise ValueError("classes: must be given on the first call of partial_fit (every label y may hold)")
            classes = np.unique(np.asarray(classes))
            if classes.size < 2:
                raise ValueError(f"classes: needs at least two classes, got {classes.tolist()!r}")
            self.classes_, self.codes_ = classes, class_codes(classes.size, self.coding)
        elif classes is not None and not np.array_equal(np.unique(np.asarray(classes)), self.classes_):
            raise ValueError(f"classes: must equal the classes of the first call, {self.classes_.tolist()!r}")
        self._partial_fit_targets(X, _coded_labels(y, self.classes_, self.codes_), sample_weight, first)
        return self

    def decision_function(self, X: ArrayLike) -> np.ndarray:
        """The outputs (1/eta) sum_j D_yj h_j K(x_j, x) + b of eq. 3.23 (before the sign).

        Returns
        -------
        ndarray of shape (n_samples,) for two classes (positive: ``classes_[1]``), else (n_samples, n_classes)
            For more classes: one-vs-all, each class's own output; minimum output, the outputs' inner product
            with each class's codeword. The predicted class has the largest score.
        """
        if is_dask_collection(X):
            return self._map_dask(X, "decision_function", None if self.classes_.size == 2 else self.classes_.size)
        return class_scores(self._outputs(X), self.codes_, self.coding)

    def predict(self, X: ArrayLike) -> np.ndarray:
        """Class labels: the sign of eq. 3.23 for two classes, the codeword nearest the outputs beyond."""
        if is_dask_collection(X):
            return self._map_dask(X, "predict", None, self.classes_.dtype)
        scores = self.decision_function(X)
        indices = (scores > 0).astype(int) if scores.ndim == 1 else np.argmax(scores, axis=1)
        return self.classes_[indices]

    def _check_probability(self):
        if not self.probability:
            raise AttributeError(
                "predict_proba is available when probability=True (Platt scaling fitted during fit, as SVC)"
            )
        return True

    @available_if(_check_probability)
    def predict_proba(self, X: ArrayLike) -> np.ndarray:
        """Class probabilities by Platt scaling (probability=True).

        One sigmoid 1 / (1 + exp(a f + b)) per output of :meth:`decision_function` f, fitted by Platt's
        maximum likelihood on the decision values of a 5-fold stratified internal cross-validation (clones
        fitted on four fifths, scored on the rest), as ``SVC(probability=True)`` and
        ``CalibratedClassifierCV(method="sigmoid", cv=5, ensemble=False)`` do; more than two classes: the
        classes' sigmoids normalised to sum to 1. The folds cost five more fits during ``fit``. The argmax of
        the probabilities can differ from :meth:`predict` near the decision boundary (as with SVC).

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
            Columns in the order of ``classes_``.
        """
        check_is_fitted(self, "calibration_")
        if is_dask_collection(X):
            return self._map_dask(X, "predict_proba", self.classes_.size, np.float64)
        return self.calibration_.predict_proba(self.decision_function(X))

    @available_if(_check_probability)
    def predict_log_proba(self, X: ArrayLike) -> np.ndarray:
        """Logarithm of :meth:`predict_proba`."""
        with np.errstate(divide="ignore"):
            return np.log(self.predict_proba(X))
