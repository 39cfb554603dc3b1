"""Kernel PCA as a restricted kernel machine (Suykens 2017 section 3.4; Constr-DRKM section 4)."""

import functools
import numbers
import os
import time
import warnings

import numpy as np
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.exceptions import ConvergenceWarning, PositiveSpectrumWarning
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data

from rkm import _core
from rkm._base import (
    FLOAT_DTYPES,
    blas_threads,
    check_memory,
    check_n_threads,
    check_positive,
    thread_count,
)
from rkm.kernels import Kernel, canonical_kernel_name, kernel_matrix, resolve_gamma
from rkm.preimage import gaussian_fixed_point, kernel_smoother

_EIGEN_SOLVERS = ("auto", "dense", "krylov")
_SCALINGS = ("hidden", "score", "sklearn")
_PREIMAGES = ("auto", "fixed_point", "smoother", "ridge")
# Below this many samples a full LAPACK decomposition is as fast as the Krylov solver.
_DENSE_MAX_SAMPLES = 200
# Beyond this many samples an explicitly requested dense solve warns with its expected time: LAPACK runs for
# minutes and cannot be interrupted.
_DENSE_WARN_SAMPLES = 8000
# Allowance for the interpreter's and NumPy's transient allocations during a fit, beyond the arrays counted.
_MEMORY_SLACK_BYTES = 128 * 2**20
# Bytes of each kernel-build thread's buffers (the core's kBandBytes chunk and its tiles).
_KERNEL_BUILD_THREAD_BYTES = 5 * 2**20


def _numerically_positive(eigenvalues, dtype):
    """Eigenvalues of a PSD matrix with rounding noise set to zero (scikit-learn's thresholds).

    Values below 1e-12 (float64) or 2e-7 (float32) times the largest one are indistinguishable from zero;
    their components then project to zero instead of dividing by noise.
    """
    ratio = 1e-12 if dtype == np.float64 else 2e-7
    largest = eigenvalues.max(initial=0.0)
    return np.where(eigenvalues > largest * ratio, eigenvalues, 0.0)


def _check_symmetric(K):
    """Raise unless the square K is symmetric to rounding; return max |K|.

    The Krylov solver reads one triangle and the centring the whole matrix, so an asymmetric Gram matrix
    would be decomposed inconsistently. Walked in blocks of rows so no second N x N array is made.
    """
    scale = asymmetry = 0.0
    for start in range(0, K.shape[0], 1024):
        rows = K[start : start + 1024]
        scale = max(scale, float(np.abs(rows).max()))
        asymmetry = max(asymmetry, float(np.abs(rows - K[:, start : start + 1024].T).max()))
    if asymmetry > np.sqrt(np.finfo(K.dtype).eps) * scale:
        raise ValueError(
            f"X: a precomputed kernel must be symmetric, but max |K - K^T| = {asymmetry:.3g} "
            f"({asymmetry / scale:.2g} of max |K|); symmetrize it, e.g. (K + K.T) / 2"
        )
    return scale


def _rounding_level(n_samples, scale, dtype):
    """Worst-case spectral norm of the rounding error in an n x n kernel matrix whose entries are <= scale."""
    return n_samples * np.finfo(dtype).eps * scale


def _warn_if_below_precision(largest, rounding, dtype):
    """Warn when the centred kernel's spectrum is no larger than the rounding of its entries."""
    if largest > 10 * rounding:
        return
    advice = "use float64 input" if dtype == np.float32 else "rescale the kernel (e.g. a larger gamma)"
    warnings.warn(
        f"KernelPCA: the largest eigenvalue of the centred kernel ({largest:.3g}) is within a factor 10 of the "
        f"{np.dtype(dtype).name} rounding error of the kernel matrix ({rounding:.3g}): the kernel barely varies "
        f"across the data (a very small gamma?) and its components are mostly rounding; {advice}",
        RuntimeWarning,
        stacklevel=3,
    )


def _check_positive_spectrum(w, rounding, dtype):
    """Reject an indefinite kernel as scikit-learn does; zero small negative eigenvalues with a warning.

    Negative eigenvalues below the matrix's rounding level are noise. Beyond it, one more negative than
    1e-5 (float64) or 5e-3 (float32) of the largest eigenvalue raises, and smaller ones above 1e-10 / 1e-6
    warn (scikit-learn's ``_check_psd_eigenvalues`` thresholds). Only the computed (top) eigenvalues are seen.
    """
    negative = w[w < 0]
    worst = -negative.min(initial=0.0)
    if worst <= rounding:
        return
    double = dtype == np.float64
    largest = max(float(w.max(initial=0.0)), 0.0)
    summary = f"{negative.size} of the {w.size} computed eigenvalues are negative, down to {-worst:.3g}"
    if worst > (1e-5 if double else 5e-3) * largest:
        raise ValueError(
            f"X: the kernel matrix is not positive semi-definite: {summary} (largest {largest:.3g}); kernel PCA "
            "needs a PSD kernel (check a precomputed Gram matrix, or the poly kernel's gamma and coef0)"
        )
    if worst > (1e-10 if double else 1e-6):
        warnings.warn(
            f"KernelPCA: {summary} ({worst / largest:.2g} of the largest); they are set to zero",
            PositiveSpectrumWarning,
            stacklevel=3,
        )


@functools.cache
def _dense_seconds_per_cube(n_threads):
    """Seconds per n^3 of LAPACK's full eigendecomposition here, timed once on a 600 x 600 matrix."""
    n = 600
    A = np.random.default_rng(0).standard_normal((n, n))
    A += A.T
    with blas_threads(thread_count(n_threads)):
        start = time.perf_counter()
        _core.eigh(A, n_threads)
        return (time.perf_counter() - start) / n**3


def _warn_slow_dense(n_samples, n_components, n_threads):
    minutes = _dense_seconds_per_cube(n_threads) * n_samples**3 / 60
    warnings.warn(
        f"KernelPCA: eigen_solver='dense' decomposes the whole {n_samples} x {n_samples} matrix, about "
        f"{minutes:.0f} min here (scaled from a 600-sample run), and LAPACK cannot be interrupted by Ctrl-C once "
        f"it runs; eigen_solver='krylov' finds the {n_components} leading components far faster",
        RuntimeWarning,
        stacklevel=3,
    )


def _fit_memory_bytes(n_samples, n_features, n_components, dtype, solver, n_threads):
    """Peak bytes a fit allocates: the kernel matrix, the eigensolver's workspace and the kernel build's buffers.

    The dense solver holds a copy of K, LAPACK syevd's 2 n^2 workspace and then two n^2 eigenvector arrays
    (4 n^2 in all besides K); the Krylov solver holds a fixed number of n-vectors.
    """
    n, item = n_samples, np.dtype(dtype).itemsize
    if solver == "dense":
        solver_bytes = 4 * n * n * item
    else:
        block = krylov_block_size(n_components, n)
        solver_bytes = (_core.krylov_workspace_columns(n_components, block) + block) * n * item
    threads = thread_count(n_threads) or os.cpu_count() or 1
    # Double copies of X (kernel build), per-thread band buffers, per-thread column sums (centring).
    build_bytes = 2 * n * n_features * 8 + threads * (_KERNEL_BUILD_THREAD_BYTES + 8 * n)
    return n * n * item + solver_bytes + build_bytes + _MEMORY_SLACK_BYTES


def krylov_block_size(n_components, n_samples):
    """Columns the Krylov solver multiplies by K per pass: 8 (the width of the core's product tiles) up to
    64 components, 16 up to 128, then 32.

    Products with few columns stream K at memory speed, so the cost of the eigen step follows the total
    number of columns multiplied; narrow blocks need the fewest (measured on RBF spectra, N = 10000:
    s = 10 took 96 columns with blocks of 8 against 160 with 16; s = 50 took 256 against 304 with 16 and
    616 with 56). Wider blocks for many components bound the number of orthogonalization steps. Widths of
    8, 16 and 32 columns are also the ones the product tiles run fastest per column (24 took 1.6x longer
    per column than 32, N = 3000 to 20000)."""
    width = 8 if n_components <= 64 else 16 if n_components <= 128 else 32
    return min(n_samples, width)


def _finite_or_raise(values, method):
    """Hidden features divide by eigenvalues: refuse results that overflow rather than return infinities."""
    if not np.all(np.isfinite(values)):
        raise ValueError(
            f"X: {method} overflows: the hidden features h = e / lambda exceed the floating-point range (the model "
            "has eigenvalues too small for these inputs)"
        )
    return values


def _warn_not_converged(residuals, n_iter, max_iter, tol, dtype):
    tol = f"tol {tol:g}" if tol is not None else "the default tol"
    if n_iter < max_iter:
        advice = "use float64 or a larger tol" if dtype == np.float32 else "use a larger tol"
        reason = (
            f"stopped after {n_iter} block products: the relative residuals stagnated at up to "
            f"{residuals.max():.2e}, the accuracy {np.dtype(dtype).name} can reach here, above {tol}; {advice}"
        )
    else:
        reason = (
            f"reached max_iter = {max_iter} block products with relative residuals up to {residuals.max():.2e} "
            f"({tol}); increase max_iter"
        )
    warnings.warn(f"KernelPCA: the Krylov eigensolver {reason}", ConvergenceWarning, stacklevel=4)


class KernelPCA(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Kernel PCA in the restricted kernel machine (RKM) formulation.

    Training finds hidden features H (n_samples x s, orthonormal columns) with
    (1/eta) K_c H = H Lambda, K_c the centred kernel matrix: the centred problem of Suykens 2017
    eq. 2.16, written in the RKM form of eq. 3.27 (eqs. 3.24-3.28 state it for the uncentred K; centring
    comes from the bias term). A new point x is encoded by e = (1/eta) sum_j h_j k_c(x_j, x) (eq. 3.28)
    and h = e / lambda (Constr-DRKM eq. 4); on the training points h equals the rows of H. A component
    with lambda = 0 carries no information about a point (h = e / lambda is undefined): ``transform``
    and ``fit_transform`` both give 0 there.

    The kernel must be positive semi-definite. As scikit-learn's KernelPCA, a fit raises ValueError when a
    computed eigenvalue is negative beyond rounding and beyond 1e-5 (float64) or 5e-3 (float32) of the
    largest one, and sets smaller negative ones to zero with a ``PositiveSpectrumWarning``. A precomputed
    Gram matrix must be symmetric to rounding. A kernel that comes out NaN or infinite (overflowing inputs,
    a non-integer polynomial degree on a negative base) raises ValueError, and a kernel whose spread is
    below the rounding of its dtype (a tiny gamma in float32) warns.

    Parameters
    ----------
    n_components : int, default=None
        Number of components s. None keeps every component with a positive eigenvalue.
    kernel : {"rbf", "linear", "poly", "laplacian", "cosine", "tanimoto", "precomputed"} or Kernel
        Aliases "gaussian" (rbf) and "polynomial" (poly) are accepted.
        "rbf" is exp(-gamma ||x - y||^2) as in scikit-learn; see :mod:`rkm.kernels` for the papers'
        sigma conventions. "precomputed" takes a symmetric Gram matrix in ``fit`` (the Krylov solver
        reads its lower triangle only) and kernel rows k(x*, X_train) in ``transform``.
    gamma : float, default=None
        Kernel bandwidth for rbf/laplacian/poly; None means 1 / n_features.
    degree, coef0 : float
        Polynomial kernel parameters.
    eta : float, default=1.0
        Regularisation constant eta of the RKM; eigenvalues_ are those of K_c / eta.
    center : bool, default=True
        Centre the kernel matrix (feature-space mean removal, Suykens eq. 2.16).
    eigen_solver : {"auto", "dense", "krylov"}, default="auto"
        "dense": LAPACK on the whole matrix; "krylov": restarted block Krylov for the top s pairs;
        "auto": dense for at most 200 samples or when s exceeds a fifth of them. A dense solve of more
        than 8000 samples asked for explicitly warns with its expected time: LAPACK cannot be
        interrupted once it runs.
    n_threads : int, default=None
        Threads for the core and BLAS (None: OpenMP's default; -1: all cores).
    random_state : int, RandomState or None
        Seeds the Krylov starting block.
    tol : float, default=None
        Relative residual ||K v - mu v|| / mu_max at which the Krylov solver stops (None: 1e-10 in
        float64, 1e-4 in float32). Below the attainable accuracy (about eps sqrt(n_samples)) the solver
        stops when the residuals stagnate and warns.
    max_iter : int, default=None
        Most block products of the Krylov solver (None: 100 + 10 s / b for blocks of b columns).
    scaling : {"hidden", "score", "sklearn"}, default="hidden"
        What ``transform`` returns: "hidden" the hidden features h (Constr-DRKM eq. 4, rows of H on
        training data); "score" the error variables e = lambda h (Suykens eq. 3.28); "sklearn"
        sqrt(eta lambda) h, the projections of ``sklearn.decomposition.KernelPCA``.
    preimage : {"auto", "fixed_point", "smoother", "ridge"}, default="auto"
        Pre-image method of ``inverse_transform``: the Gaussian fixed-point iteration of Mika et al.
        (Constr-DRKM eq. 11; rbf only), the kernel smoother over the nearest training points
        (Gen-RKM eq. 8), or a kernel ridge map from projections to inputs learned at fit time (as
        scikit-learn's ``fit_inverse_transform``). "auto" is fixed_point for rbf, else smoother.
    n_neighbors : int, default=10
        Training points the kernel smoother averages.
    preimage_alpha : float, default=1.0
        Ridge penalty of the learned pre-image map.
    preimage_max_iter : int, default=100
        Iterations of the fixed-point pre-image.

    Attributes
    ----------
    eigenvalues_ : ndarray of shape (s,)
        Eigenvalues lambda of K_c / eta, descending (with eta=1 and centring, those of the centred
        kernel matrix, as ``sklearn.decomposition.KernelPCA.eigenvalues_``).
    H_ : ndarray of shape (n_samples, s)
        Hidden features, orthonormal columns (the eigenvectors); ``eigenvectors_`` is the same array.
    gamma_ : float
        The kernel bandwidth used.
    column_means_, grand_mean_ : training kernel statistics used to centre new kernel rows.
    X_fit_ : ndarray, the training data (absent for a precomputed kernel).
    eigen_solver_, preimage_ : the resolved methods.
    n_iter_ : int, block products the Krylov solver used (1 for dense).
    eigen_residuals_ : ndarray of shape (s,), relative residuals reached.
    """

    def __init__(
        self,
        n_components=None,
        kernel="rbf",
        gamma=None,
        degree=3,
        coef0=1.0,
        eta=1.0,
        center=True,
        eigen_solver="auto",
        n_threads=None,
        random_state=None,
        tol=None,
        max_iter=None,
        scaling="hidden",
        preimage="auto",
        n_neighbors=10,
        preimage_alpha=1.0,
        preimage_max_iter=100,
    ):
        self.n_components = n_components
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.eta = eta
        self.center = center
        self.eigen_solver = eigen_solver
        self.n_threads = n_threads
        self.random_state = random_state
        self.tol = tol
        self.max_iter = max_iter
        self.scaling = scaling
        self.preimage = preimage
        self.n_neighbors = n_neighbors
        self.preimage_alpha = preimage_alpha
        self.preimage_max_iter = preimage_max_iter

    # ------------------------------------------------------------------ parameters

    def _kernel_spec(self, n_features):
        """(name, gamma, degree, coef0) of the kernel in use; name is "precomputed" or canonical."""
        if isinstance(self.kernel, Kernel):
            params = self.kernel.params()
            name = self.kernel.name
            gamma = resolve_gamma(name, params.get("gamma"), n_features) if "gamma" in params else 1.0
            return name, gamma, params.get("degree", 3), params.get("coef0", 1.0)
        name = canonical_kernel_name(self.kernel, extra_names=("precomputed",))
        if name == "precomputed":
            return "precomputed", None, None, None
        gamma = resolve_gamma(name, self.gamma, n_features) if name in ("rbf", "laplacian", "poly") else None
        return name, gamma, self.degree, self.coef0

    def _validate_params(self, n_samples):
        if self.n_components is not None:
            if not isinstance(self.n_components, numbers.Integral) or isinstance(self.n_components, bool):
                raise ValueError(f"n_components: must be an int or None, got {self.n_components!r}")
            if not 1 <= self.n_components <= n_samples:
                raise ValueError(
                    f"n_components: must be between 1 and n_samples={n_samples}, got {self.n_components}"
                )
        check_positive(self.eta, "eta")
        check_n_threads(self.n_threads)
        check_positive(self.tol, "tol", allow_none=True)
        for name, value, allowed in (
            ("eigen_solver", self.eigen_solver, _EIGEN_SOLVERS),
            ("scaling", self.scaling, _SCALINGS),
            ("preimage", self.preimage, _PREIMAGES),
        ):
            if value not in allowed:
                raise ValueError(f"{name}: must be one of {allowed}, got {value!r}")
        for name in ("max_iter", "n_neighbors", "preimage_max_iter"):
            value = getattr(self, name)
            if value is None and name == "max_iter":
                continue
            if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name}: must be a positive int, got {value!r}")
        check_positive(self.preimage_alpha, "preimage_alpha")
        if self.preimage == "fixed_point" and self._kernel_spec(1)[0] != "rbf":
            raise ValueError("preimage: 'fixed_point' needs the rbf kernel")
        if self.preimage == "ridge" and self.kernel == "precomputed":
            raise ValueError("preimage: 'ridge' needs a kernel function, not 'precomputed'")
        if self.preimage in ("fixed_point", "smoother") and self.kernel == "precomputed":
            raise ValueError("preimage: input-space pre-images need a kernel function, not 'precomputed'")

    # ------------------------------------------------------------------ fitting

    def _training_kernel(self, X, lower_only):
        """The training kernel matrix and a bound on its entries (max |K|; for a PSD kernel, its diagonal's)."""
        name, gamma, degree, coef0 = self._kernel_spec(X.shape[1])
        if name == "precomputed":
            if X.shape[0] != X.shape[1]:
                raise ValueError(f"X: a precomputed kernel must be square, got shape {X.shape}")
            scale = _check_symmetric(X)
            return (X.copy(order="C") if self.center else X), scale
        K = kernel_matrix(X, None, name, gamma, degree, coef0, n_threads=self.n_threads, lower_only=lower_only)
        return K, float(np.abs(np.diagonal(K)).max())

    def _resolve_solver(self, n_samples, n_components):
        if self.eigen_solver != "auto":
            return self.eigen_solver
        dense = n_samples <= _DENSE_MAX_SAMPLES or 5 * n_components > n_samples
        return "dense" if dense else "krylov"

    def _eigenpairs(self, K, n_components, solver):
        if solver == "dense":
            with blas_threads(thread_count(self.n_threads)):
                w, V = _core.eigh(K, self.n_threads)
            w, V = w[:n_components], np.ascontiguousarray(V[:, :n_components])
            residuals = np.linalg.norm(K @ V - V * w, axis=0) / max(abs(w).max(), np.finfo(float).tiny)
            return solver, w, V, residuals, 1
        rng = check_random_state(self.random_state)
        block = krylov_block_size(n_components, K.shape[0])
        start = rng.standard_normal((K.shape[0], block)).astype(K.dtype)
        max_iter = self.max_iter or _core.default_max_iter(n_components, block)
        # Thin blocks are multiplied by the core's own OpenMP kernel: BLAS then only does small products and
        # runs single-threaded, so that its idle threads do not spin against the OpenMP ones.
        blas = 1 if block <= _core.THIN_BLOCK_COLUMNS else thread_count(self.n_threads)
        with blas_threads(blas):
            w, V, residuals, n_iter, converged = _core.top_eigsh(
                K, n_components, start, self.tol, max_iter, self.n_threads
            )
        if not converged:
            _warn_not_converged(residuals, n_iter, max_iter, self.tol, K.dtype)
        return solver, w, V, residuals, n_iter

    def fit(self, X, y=None):
        """Fit the model from data X (or a Gram matrix when kernel="precomputed").

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : ignored

        Returns
        -------
        self
        """
        X = validate_data(self, X, dtype=list(FLOAT_DTYPES), order="C", ensure_min_samples=1)
        n_samples = X.shape[0]
        self._validate_params(n_samples)
        if self.center and n_samples == 1:
            raise ValueError("n_samples = 1: a centred kernel PCA needs at least 2 samples")
        name, self.gamma_, _, _ = self._kernel_spec(X.shape[1])
        n_wanted = self.n_components or n_samples
        solver = self._resolve_solver(n_samples, n_wanted)
        n_features = 0 if name == "precomputed" else X.shape[1]
        check_memory(
            _fit_memory_bytes(n_samples, n_features, n_wanted, X.dtype, solver, self.n_threads),
            "X",
            f"a kernel PCA fit of {n_samples} samples ({solver} eigensolver, {X.dtype.name})",
        )
        if solver == "dense" and n_samples > _DENSE_WARN_SAMPLES:
            _warn_slow_dense(n_samples, n_wanted, self.n_threads)
        # The Krylov solver reads the lower triangle only, so the kernel and its centring skip the other.
        lower_only = solver == "krylov"
        K, scale = self._training_kernel(X, lower_only)
        if self.center:
            self.column_means_, self.grand_mean_ = _core.center_kernel(K, self.n_threads, lower_only)
        self.eigen_solver_, w, V, self.eigen_residuals_, self.n_iter_ = self._eigenpairs(K, n_wanted, solver)
        del K
        rounding = _rounding_level(n_samples, scale, X.dtype)
        _warn_if_below_precision(float(w.max()), rounding, X.dtype)
        _check_positive_spectrum(w, rounding, X.dtype)
        with np.errstate(over="ignore"):
            eigenvalues = _numerically_positive(w, X.dtype) / self.eta
        if not np.all(np.abs(eigenvalues) <= np.finfo(X.dtype).max):
            raise ValueError(
                f"eta: the eigenvalues of K / eta overflow {X.dtype.name} (eta = {self.eta!r}); use a larger eta"
            )
        if self.n_components is None:
            keep = eigenvalues > 0
            eigenvalues, V = eigenvalues[keep], V[:, keep]
            self.eigen_residuals_ = self.eigen_residuals_[keep]
        self.eigenvalues_ = eigenvalues.astype(X.dtype)
        self.H_ = self.eigenvectors_ = np.ascontiguousarray(V, dtype=X.dtype)
        if name != "precomputed":
            self.X_fit_ = X
        self.preimage_ = self._resolve_preimage(name)
        if self.preimage_ == "ridge":
            self._fit_ridge_preimage(X)
        return self

    def _resolve_preimage(self, kernel_name):
        if kernel_name == "precomputed":
            return None
        if self.preimage == "auto":
            return "fixed_point" if kernel_name == "rbf" else "smoother"
        return self.preimage

    # ------------------------------------------------------------------ encoding

    @property
    def _n_features_out(self):
        return self.eigenvalues_.shape[0]

    def _output_factor(self, scaling):
        """Per-component factor from hidden features to the outputs of a scaling convention."""
        if scaling == "hidden":
            return np.ones_like(self.eigenvalues_)
        if scaling == "score":
            return self.eigenvalues_
        return np.sqrt(self.eta * self.eigenvalues_)

    def _hidden_to_output(self, H, scaling=None):
        return H * self._output_factor(scaling or self.scaling)

    def _output_to_hidden(self, Z):
        factor = self._output_factor(self.scaling)
        return np.divide(Z, factor, out=np.zeros_like(Z), where=factor > 0)

    def _kernel_rows(self, X):
        """Centred kernel rows k_c(x*, X_train) for new points."""
        if self.kernel == "precomputed":
            if X.shape[1] != self.H_.shape[0]:
                raise ValueError(f"X: precomputed kernel rows need {self.H_.shape[0]} columns, got {X.shape[1]}")
            K_rows = X.copy(order="C")
        else:
            name, gamma, degree, coef0 = self._kernel_spec(X.shape[1])
            K_rows = kernel_matrix(X, self.X_fit_, name, gamma, degree, coef0, n_threads=self.n_threads)
        if self.center:
            _core.center_kernel_rows(K_rows, self.column_means_, self.grand_mean_, self.n_threads)
        return K_rows

    def _validate_new(self, X):
        """New data in the model's dtype (its kernel rows meet float32 or float64 training statistics), and the
        dtype the results are returned in: float32 when both the model and X are, else float64."""
        X = validate_data(self, X, dtype=list(FLOAT_DTYPES), order="C", reset=False)
        return X.astype(self.H_.dtype, copy=False), np.result_type(X.dtype, self.H_.dtype)

    def _hidden(self, X):
        """Hidden features h* = (1/(eta lambda)) sum_j h_j k_c(x_j, x*) (Constr-DRKM eq. 4)."""
        scores = self._kernel_rows(X) @ self.H_ / self.eta
        return np.divide(scores, self.eigenvalues_, out=np.zeros_like(scores), where=self.eigenvalues_ > 0)

    def transform(self, X):
        """Project X onto the components, in the convention chosen by ``scaling``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            For kernel="precomputed": kernel rows k(X, X_train) of shape (n_samples, n_train).

        Returns
        -------
        ndarray of shape (n_samples, n_components)
        """
        check_is_fitted(self)
        X, dtype = self._validate_new(X)
        return _finite_or_raise(self._hidden_to_output(self._hidden(X)), "transform").astype(dtype, copy=False)

    def fit_transform(self, X, y=None):
        """Fit and return the training projections (the hidden features H, scaled per ``scaling``).

        Equal to ``fit(X).transform(X)``: components with lambda = 0 give 0, as in ``transform``.
        """
        self.fit(X)
        return self._hidden_to_output(self.H_ * (self.eigenvalues_ > 0))

    # ------------------------------------------------------------------ pre-images

    def _fit_ridge_preimage(self, X):
        if self.H_.shape[1] == 0:  # no component: projections carry nothing, the pre-image is the training mean
            self.preimage_dual_coef_ = None
            return
        name, gamma, degree, coef0 = self._kernel_spec(X.shape[1])
        Z = self._hidden_to_output(self.H_, "sklearn")
        K = kernel_matrix(Z, None, name, gamma, degree, coef0, n_threads=self.n_threads).astype(np.float64)
        K.flat[:: K.shape[0] + 1] += self.preimage_alpha
        self.preimage_dual_coef_ = np.linalg.solve(K, X.astype(np.float64)).astype(X.dtype)

    def _similarities(self, H):
        """Similarities k(x_j, x*) predicted from hidden features (Gen-RKM eq. 7).

        Uncentred up to a constant per point, which the kernel smoother's scaling removes.
        """
        S = (H * self.eigenvalues_) @ self.H_.T
        return S + self.column_means_ if self.center else S

    def _expansion_coefficients(self, H):
        """Coefficients c with P phi(x*) = sum_i c_i phi(x_i), including the feature-space mean when centred."""
        beta = H @ self.H_.T
        if not self.center:
            return beta
        return beta + (1.0 - beta.sum(axis=1, keepdims=True)) / self.H_.shape[0]

    def _preimage(self, H, X_start=None):
        if self.preimage_ is None:
            raise ValueError("inverse_transform: not available for a precomputed kernel")
        if self.preimage_ == "ridge":
            if self.preimage_dual_coef_ is None:
                return np.repeat(self.X_fit_.mean(axis=0, keepdims=True), H.shape[0], axis=0)
            name, gamma, degree, coef0 = self._kernel_spec(self.X_fit_.shape[1])
            Z = self._hidden_to_output(H, "sklearn")
            Z_fit = self._hidden_to_output(self.H_, "sklearn")
            K = kernel_matrix(Z, Z_fit, name, gamma, degree, coef0, n_threads=self.n_threads)
            return K @ self.preimage_dual_coef_
        smoothed = kernel_smoother(self._similarities(H), self.X_fit_, self.n_neighbors)
        if self.preimage_ == "smoother":
            return smoothed
        start = smoothed if X_start is None else X_start
        X, _ = gaussian_fixed_point(
            self._expansion_coefficients(H), self.X_fit_, self.gamma_, start, self.preimage_max_iter,
            n_threads=self.n_threads,
        )
        return X

    def inverse_transform(self, X):
        """Map projections back to input space by the pre-image method ``preimage``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_components), in the convention of ``scaling``.

        Returns
        -------
        ndarray of shape (n_samples, n_features)
        """
        check_is_fitted(self)
        Z = np.asarray(X, dtype=self.H_.dtype)
        if Z.ndim != 2 or Z.shape[1] != self.H_.shape[1]:
            raise ValueError(f"X: expected shape (n_samples, {self.H_.shape[1]}), got {Z.shape}")
        if not np.all(np.isfinite(Z)):
            raise ValueError("X: contains NaN or infinity")
        return self._preimage(self._output_to_hidden(Z))

    def denoise(self, X):
        """Project X on the s components and map it back (for rbf, the fixed point starts at X itself).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples, n_features)
        """
        check_is_fitted(self)
        X, dtype = self._validate_new(X)
        return self._preimage(_finite_or_raise(self._hidden(X), "denoise"), X_start=X).astype(dtype, copy=False)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.pairwise = self.kernel == "precomputed"
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags
