"""Kernel pmf (Parzen-type model) as a restricted kernel machine (Suykens 2017 section 3.6, eqs. 3.33-3.35)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike
from scipy.spatial.distance import cdist
from scipy.special import logsumexp
from sklearn.base import BaseEstimator, _fit_context
from sklearn.metrics.pairwise import euclidean_distances, manhattan_distances
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted, validate_data

from rkm._utils.validation import FLOAT_DTYPES, N_THREADS, POSITIVE, kernel_name_options
from rkm.kernels import Kernel, is_callable_kernel, kernel_matrix, kernel_product, model_kernel_spec, names_with

# Kernels that are nonnegative on every input (so that p_i >= 0, eq. 3.35) and integrable, so that they also
# give a density.
_DENSITY_KERNELS = names_with("density")


# Kernel sums below this are recomputed in the log domain (log-sum-exp over -gamma d(x, x_j)): far from the data
# the single kernel values underflow, to subnormals (losing digits) and then to 0.
_LOG_DOMAIN_BELOW = 1e-200
# Bytes of one block of distances in the log-domain pass.
_BLOCK_BYTES = 32 * 2**20


def _distances(name, A, B):
    """-log k / gamma for the rows of A against those of B: squared Euclidean (rbf) or L1 (laplacian)."""
    if sp.issparse(A) or sp.issparse(B):
        if name == "rbf":
            return euclidean_distances(A, B, squared=True)
        return manhattan_distances(A, B)
    return cdist(A, B, metric="sqeuclidean" if name == "rbf" else "cityblock")


def _log_kernel_integral(name, gamma, n_features):
    """log of the integral of k(x, y) over x in R^d: (pi / gamma)^(d/2) for exp(-gamma ||x - y||^2),
    (2 / gamma)^d for exp(-gamma ||x - y||_1)."""
    if name == "rbf":
        return 0.5 * n_features * np.log(np.pi / gamma)
    return n_features * np.log(2.0 / gamma)


class KernelPMF(BaseEstimator):
    """Kernel probability mass function (Parzen-type model) in the restricted kernel machine formulation.

    The RKM objective of Suykens 2017 eq. 3.33, J = sum_i (p_i - phi(x_i)^T w) h_i - sum_i p_i +
    (eta/2) w^T w, has its stationary point (eq. 3.34) at h_i = 1 and w = (1/eta) sum_i phi(x_i), so that
    (eq. 3.35)

        p_i = (1/eta) sum_j K(x_j, x_i).

    eta is chosen to normalize sum_i p_i = 1 over the training points, eta = sum_ij K(x_i, x_j) (``eta_``),
    and a nonnegative kernel makes p_i >= 0: ``p_`` is then a pmf on the training points. New points are
    scored by the same kernel sums p(x) proportional to sum_j K(x_j, x):

    - ``pmf(X)``: a pmf over a given set of candidate points, normalized to sum to 1 over that set. For
      discrete data, the candidates are the support (each distinct value once), and as the bandwidth
      narrows p(x) tends to the empirical frequency of x. (On the training points themselves, a value seen
      n_k times holds the mass n_k p_i ~ n_k^2 / sum_l n_l^2 of ``p_``: use ``pmf`` on the distinct values.)
    - ``score_samples(X)``: the log of the Parzen density f(x) = (1 / (N Z_k)) sum_j K(x_j, x), normalized by
      the kernel's integral Z_k = int K(x, y) dx so that it integrates to 1 (rbf: (pi / gamma)^(d/2);
      laplacian: (2 / gamma)^d). With gamma = 1 / (2 h^2) the rbf density equals
      ``sklearn.neighbors.KernelDensity(bandwidth=h, kernel="gaussian")``; in one dimension the laplacian one
      with gamma = 1 / h equals its ``kernel="exponential"``.

    The kernel sums are streamed: the N_new x N kernel matrix is never stored. They are accumulated in double
    precision whatever the input dtype, and the results are float64. Where a sum underflows (a point far from
    every training point: below 1e-200), ``score_samples`` and ``pmf`` recompute it in the log domain,
    log sum_j exp(-gamma d(x_j, x)) by log-sum-exp, so that the log-density stays finite, as
    scikit-learn's KernelDensity.

    Sparse X (scipy.sparse CSR/CSC) is accepted by the named kernels and a callable; a callable kernel
    ``kernel(A, B) -> Gram matrix`` (the convention of :func:`rkm.kernels.kernel_matrix`) must be
    nonnegative; like a precomputed kernel it has no density (no ``score_samples`` / ``score``). The
    training points are copied (``X_fit_``).

    The model has no defining parameter: every parameter is keyword-only.

    Parameters
    ----------
    kernel : {"rbf", "laplacian", "precomputed"}, Kernel or callable, default="rbf"
        Alias "gaussian" (rbf) is accepted. "rbf" is exp(-gamma ||x - y||^2), "laplacian" exp(-gamma
        ||x - y||_1): the kernels that are nonnegative everywhere (so that p_i >= 0) and integrable (so that
        they give a density). "precomputed": ``fit`` takes the N x N kernel matrix of the training points
        and ``pmf`` the kernel rows K(x*, X_train) (n x N); entries must be nonnegative. A precomputed kernel
        has no density: the model then has no ``score_samples`` and ``score`` (AttributeError). A callable
        ``kernel(A, B)`` returns the Gram matrix of A against B; its entries must be nonnegative (ValueError
        naming ``kernel``), and it has no density either.
    gamma : float, default=None
        Kernel bandwidth, > 0; None means 1 / n_features.
    n_threads : int, default=None
        Threads for the kernel core (None: OpenMP's default; -1: all cores; 0 is an error).

    Attributes
    ----------
    eta_ : float
        The normalizing eta = sum_ij K(x_i, x_j) of eq. 3.35.
    p_ : ndarray of shape (n_samples,)
        The kernel pmf on the training points, p_i = (1/eta) sum_j K(x_j, x_i); sums to 1.
    gamma_ : float or None
        The kernel bandwidth used.
    X_fit_ : ndarray or sparse matrix of shape (n_samples, n_features)
        A copy of the training points (absent for a precomputed kernel).
    n_features_in_ : int

    Examples
    --------
    >>> import numpy as np
    >>> from rkm import KernelPMF
    >>> x = np.random.default_rng(0).choice(3, size=(1000, 1), p=[0.2, 0.5, 0.3]).astype(float)
    >>> model = KernelPMF(gamma=20.0).fit(x)
    >>> np.round(model.pmf([[0.0], [1.0], [2.0]]), 1)
    array([0.2, 0.5, 0.3])
    """

    _parameter_constraints: dict = {
        "kernel": [kernel_name_options(_DENSITY_KERNELS, precomputed=True), callable],
        "gamma": [None, *POSITIVE],
        "n_threads": N_THREADS,
    }

    def __init__(
        self, *, kernel: str | Kernel | Callable = "rbf", gamma: float | None = None, n_threads: int | None = None
    ):
        self.kernel = kernel
        self.gamma = gamma
        self.n_threads = n_threads

    def _kernel_spec(self, n_features):
        """(name, gamma) of the kernel in use; name is "precomputed", "rbf" or "laplacian"."""
        name, gamma, _, _ = model_kernel_spec(self.kernel, self.gamma, 3, 1.0, n_features)
        if is_callable_kernel(name):
            return name, None
        if name not in (*_DENSITY_KERNELS, "precomputed"):
            raise ValueError(
                f"kernel: must be {', '.join(_DENSITY_KERNELS)} or precomputed (a kernel that is nonnegative "
                f"everywhere, so that p_i >= 0), got {self.kernel!r}"
            )
        return name, gamma

    def _precomputed(self):
        return isinstance(self.kernel, str) and self.kernel == "precomputed"

    def _row_blocks(self, n_rows):
        rows = max(1, _BLOCK_BYTES // (8 * self.X_fit_.shape[0]))
        return (slice(start, start + rows) for start in range(0, n_rows, rows))

    def _kernel_sums(self, X):
        """sum_j K(x_j, x) for every row x of X (float64), streaming the training set in tiles (a callable
        kernel: by blocks of rows, each checked nonnegative)."""
        name, gamma = self._kernel_spec(self.n_features_in_)
        X64, fit64 = X.astype(np.float64, copy=False), self.X_fit_.astype(np.float64, copy=False)
        if is_callable_kernel(name):
            sums = np.empty(X.shape[0])
            for rows in self._row_blocks(X.shape[0]):
                K = kernel_matrix(X64[rows], fit64, name)
                if K.min(initial=0.0) < 0:
                    raise ValueError("kernel: the callable returned negative values; a pmf needs K >= 0 (p_i >= 0)")
                sums[rows] = K.sum(axis=1)
            return sums
        ones = np.ones((self.X_fit_.shape[0], 1))
        return kernel_product(X64, fit64, ones, name, gamma, n_threads=self.n_threads)[:, 0]

    def _log_sums(self, X, sums):
        """log sum_j K(x_j, x): log(sums), recomputed by log-sum-exp where a sum underflowed (named kernels)."""
        with np.errstate(divide="ignore"):
            log_sums = np.log(sums)
        name, gamma = self._kernel_spec(self.n_features_in_)
        far = np.flatnonzero(sums < _LOG_DOMAIN_BELOW)
        if far.size == 0 or not isinstance(name, str) or name not in _DENSITY_KERNELS:
            return log_sums
        X_far = X[far].astype(np.float64)
        fit64 = self.X_fit_.astype(np.float64)
        for rows in self._row_blocks(far.size):
            log_sums[far[rows]] = logsumexp(-gamma * _distances(name, X_far[rows], fit64), axis=1)
        return log_sums

    def _check_precomputed(self, K, n_columns):
        if K.shape[1] != n_columns:
            raise ValueError(
                f"X: a precomputed kernel needs {n_columns} columns (one per training point), got {K.shape[1]}"
            )
        if K.min(initial=0.0) < 0:
            raise ValueError(
                "X: Negative values in data: a precomputed kernel must be nonnegative for a pmf (p_i >= 0)"
            )
        return K.astype(np.float64, copy=False)

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: ArrayLike, y: None = None) -> KernelPMF:
        """Fit the kernel pmf on the training points (eq. 3.35).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training points; for kernel="precomputed" their kernel matrix (n_samples, n_samples).
        y : ignored

        Returns
        -------
        self
        """
        precomputed = self._precomputed()
        # The training points are kept (X_fit_): a copy, so that changing X after fit leaves the model as it is.
        X = validate_data(
            self,
            X,
            dtype=list(FLOAT_DTYPES),
            order="C",
            accept_sparse=False if precomputed else ("csr", "csc"),
            copy=not precomputed,
        )
        name, self.gamma_ = self._kernel_spec(X.shape[1])
        if precomputed:
            column_sums = self._check_precomputed(X, X.shape[0]).sum(axis=0)
            if hasattr(self, "X_fit_"):
                del self.X_fit_
        else:
            self.X_fit_ = X
            column_sums = self._kernel_sums(X)
        eta = float(column_sums.sum())
        if not eta > 0:
            raise ValueError("X: the kernel matrix sums to 0, so no eta normalizes the pmf (eq. 3.35)")
        self.eta_ = eta
        self.p_ = column_sums / eta
        return self

    def _new_sums(self, X):
        """(X, sum_j K(x_j, x*)) for new points X (or from given kernel rows when precomputed)."""
        check_is_fitted(self)
        sparse = False if self._precomputed() else ("csr", "csc")
        X = validate_data(self, X, dtype=list(FLOAT_DTYPES), order="C", reset=False, accept_sparse=sparse)
        if self._precomputed():
            return X, self._check_precomputed(X, self.p_.shape[0]).sum(axis=1)
        return X, self._kernel_sums(X)

    def pmf(self, X: ArrayLike) -> np.ndarray:
        """The kernel pmf over a set of candidate points, normalized so that it sums to 1 over them.

        p(x*_k) = sum_j K(x_j, x*_k) / sum_l sum_j K(x_j, x*_l): eq. 3.35 with eta taken over the candidates.
        Candidates so far from the data that their kernel sums underflow are normalized in the log domain
        (rbf and laplacian kernels).

        Parameters
        ----------
        X : array-like of shape (n_candidates, n_features)
            The candidate points (for discrete data, the support); for kernel="precomputed", their kernel
            rows K(X, X_train) of shape (n_candidates, n_train).

        Returns
        -------
        ndarray of shape (n_candidates,), float64
        """
        X, sums = self._new_sums(X)
        if sums.max(initial=0.0) < _LOG_DOMAIN_BELOW:
            log_sums = self._log_sums(X, sums)
            if np.isfinite(log_sums.max(initial=-np.inf)):
                p = np.exp(log_sums - log_sums.max())
                return p / p.sum()
        total = sums.sum()
        if not total > 0:
            raise ValueError(
                "X: the kernel vanishes between every candidate and every training point (to double precision); "
                "the candidates are too far from the data for this gamma"
            )
        return sums / total

    def _has_density(self):
        """The density methods exist for the integrable kernels only (not for a precomputed kernel)."""
        return not self._precomputed() and not is_callable_kernel(self.kernel)

    @available_if(_has_density)
    def score_samples(self, X: ArrayLike) -> np.ndarray:
        """Log of the Parzen density at each point of X (rbf and laplacian kernels).

        log f(x) = log(sum_j K(x_j, x)) - log(N) - log(Z_k), Z_k the kernel's integral, so that f integrates
        to 1. Far from the data, where the kernel sum underflows, it is computed in the log domain
        (log-sum-exp of -gamma d(x_j, x)): the result stays finite, as KernelDensity's.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,), float64
        """
        check_is_fitted(self)
        name, gamma = self._kernel_spec(self.n_features_in_)
        X, sums = self._new_sums(X)
        log_sums = self._log_sums(X, sums)
        return log_sums - np.log(self.X_fit_.shape[0]) - _log_kernel_integral(name, gamma, self.n_features_in_)

    @available_if(_has_density)
    def score(self, X: ArrayLike, y: None = None) -> float:
        """Total log-likelihood of X under the density (the sum of ``score_samples``), as KernelDensity.score.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : ignored

        Returns
        -------
        float
        """
        return float(np.sum(self.score_samples(X)))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.pairwise = self._precomputed()
        # A precomputed kernel must be nonnegative (p_i >= 0, eq. 3.35).
        tags.input_tags.positive_only = self._precomputed()
        tags.input_tags.sparse = not self._precomputed()
        return tags
