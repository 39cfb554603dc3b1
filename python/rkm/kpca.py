"""Kernel PCA as a restricted kernel machine (Suykens 2017 section 3.4; Constr-DRKM section 4)."""

import numbers
import time
import warnings

import numpy as np
from sklearn.base import (
    BaseEstimator,
    ClassNamePrefixFeaturesOutMixin,
    TransformerMixin,
)
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data

from rkm import _core, _primal, _solvers
from rkm._base import (
    FLOAT_DTYPES,
    available_memory_bytes,
    blas_threads,
    check_choices,
    check_int,
    check_memory,
    check_n_threads,
    check_positive,
)
from rkm._dask import is_dask_array
from rkm.features import Nystroem, RandomFourierFeatures
from rkm.kernels import kernel_matrix, kernel_product, model_kernel_spec, names_with
from rkm.preimage import gaussian_fixed_point, kernel_smoother, ridge_preimage_coefficients, with_feature_mean

_METHODS = ("auto", "dense", "matrix_free", "nystrom", "rff")
_PRIMAL_METHODS = ("nystrom", "rff")
_LANDMARKS = ("uniform", "kmeans++", "renyi")
_EIGEN_SOLVERS = ("auto", "dense", "krylov")
_SCALINGS = ("hidden", "score", "sklearn")
_PREIMAGES = ("auto", "fixed_point", "smoother", "ridge")
_DENSE_MAX_SAMPLES = _solvers.DENSE_MAX_SAMPLES
# Beyond this many samples an explicitly requested dense solve warns with its expected time: LAPACK runs for
# minutes and cannot be interrupted.
_DENSE_WARN_SAMPLES = 8000
# method="auto" stores the kernel matrix when a fit needs at most this fraction of the available memory.
_AUTO_MEMORY_FRACTION = 0.5
# Beyond this many samples method="auto" approximates the kernel (Nyström) instead of recomputing it at every
# block product: a matrix-free fit of N = 200000 (d = 64, 10 components) already takes minutes.
_AUTO_MATRIX_FREE_MAX_SAMPLES = 200_000
# Default landmarks (Nyström) and random features (rff) of the approximate methods.
_DEFAULT_LANDMARKS = 1000
_DEFAULT_RANDOM_FEATURES = 2000
def _primal_memory_bytes(n_samples, n_features_out, n_components):
    """Peak bytes of a primal fit besides X: the hidden features, two blocks of features in float64 and a few
    m x m matrices (scatter, its eigenvectors, the landmarks' kernel and its square root)."""
    s = n_components or n_features_out
    return 8 * (n_samples * (s + 1) + 6 * n_features_out**2) + 2 * _primal.BLOCK_BYTES + _solvers.MEMORY_SLACK_BYTES


def _transform_block(block, model):
    """model.transform on one partition of a Dask array (a module-level function, so that it pickles)."""
    return model.transform(block)


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
    method : {"auto", "dense", "matrix_free", "nystrom", "rff"}, default="auto"
        How the kernel matrix is represented. "dense": stored (N x N), then decomposed by
        ``eigen_solver``. "matrix_free": never stored; each block product of the Krylov solver recomputes
        the kernel in tiles (memory O(N (d + b)), the same eigenpairs as "dense" to solver tolerance; not
        for a precomputed kernel). "nystrom" and "rff": kernel PCA in the primal with an explicit feature
        map phi of m features whose inner products approximate the kernel (:class:`rkm.features.Nystroem`
        with ``n_landmarks`` landmarks, :class:`rkm.features.RandomFourierFeatures` with ``n_features``
        orthogonal random features for rbf, plain ones for laplacian): the m x m covariance of the
        centred features is accumulated in one streamed pass and eigen-decomposed (Suykens 2017 sec. 3.4,
        the primal of the dual problem above). "auto": "dense" when the fit needs at most half of the
        available memory, else "matrix_free" up to 200 000 samples, else "nystrom". A Dask array as X
        runs "nystrom" and "rff" as a map-reduce and "matrix_free" as Dask tasks ("auto": "nystrom").
    n_landmarks : int, default=None
        Landmarks of method="nystrom" (None: min(n_samples, 1000)).
    n_features : int, default=None
        Random features of method="rff" (None: 2000).
    landmarks : {"uniform", "kmeans++", "renyi"}, default="uniform"
        Landmark selection of method="nystrom" (see :class:`rkm.features.Nystroem`).
    eigen_solver : {"auto", "dense", "krylov"}, default="auto"
        Solver of method="dense": "dense": LAPACK on the whole matrix; "krylov": restarted block Krylov
        for the top s pairs; "auto": dense for at most 200 samples or when s exceeds a fifth of them. A
        dense solve of more than 8000 samples asked for explicitly warns with its expected time: LAPACK
        cannot be interrupted once it runs. method="matrix_free" always uses the Krylov solver.
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
    verbose : int, default=0
        When positive, ``fit`` prints the method it resolved and its time, and for method="matrix_free" a
        line per block product (each recomputes the kernel: at N = 200 000 about 1.5 minutes apiece).

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
    method_, eigen_solver_, preimage_ : the resolved methods.
    feature_map_ : the fitted Nystroem or RandomFourierFeatures (methods "nystrom" and "rff").
    feature_mean_ : ndarray of shape (m,), mean of the training features (methods "nystrom" and "rff").
    primal_vectors_ : ndarray of shape (m, s), eigenvectors U of the features' covariance; hidden
        features are h = (phi(x) - feature_mean_) U / sqrt(eta lambda) (methods "nystrom" and "rff").
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
        method="auto",
        n_landmarks=None,
        n_features=None,
        landmarks="uniform",
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
        verbose=0,
    ):
        self.n_components = n_components
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.eta = eta
        self.center = center
        self.method = method
        self.n_landmarks = n_landmarks
        self.n_features = n_features
        self.landmarks = landmarks
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
        self.verbose = verbose

    # ------------------------------------------------------------------ parameters

    def _kernel_spec(self, n_features):
        """(name, gamma, degree, coef0) of the kernel in use; name is "precomputed" or canonical."""
        return model_kernel_spec(self.kernel, self.gamma, self.degree, self.coef0, n_features)

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
        check_choices((
            ("method", self.method, _METHODS),
            ("landmarks", self.landmarks, _LANDMARKS),
            ("eigen_solver", self.eigen_solver, _EIGEN_SOLVERS),
            ("scaling", self.scaling, _SCALINGS),
            ("preimage", self.preimage, _PREIMAGES),
        ))
        check_int(self.verbose, "verbose", low=0)
        for name in ("max_iter", "n_landmarks", "n_features"):
            check_int(getattr(self, name), name, allow_none=True)
        for name in ("n_neighbors", "preimage_max_iter"):
            check_int(getattr(self, name), name)
        check_positive(self.preimage_alpha, "preimage_alpha")
        if self.preimage == "fixed_point" and self._kernel_spec(1)[0] != "rbf":
            raise ValueError("preimage: 'fixed_point' needs the rbf kernel")
        if self.preimage == "ridge" and self.kernel == "precomputed":
            raise ValueError("preimage: 'ridge' needs a kernel function, not 'precomputed'")
        if self.preimage in ("fixed_point", "smoother") and self.kernel == "precomputed":
            raise ValueError("preimage: input-space pre-images need a kernel function, not 'precomputed'")
        self._validate_method(n_samples, self.method)

    def _validate_method(self, n_samples, method):
        if method in ("auto", "dense"):
            return
        if self.kernel == "precomputed":
            raise ValueError(
                f"method: {method!r} evaluates the kernel from X itself; with kernel='precomputed' use "
                "method='dense'"
            )
        if self.eigen_solver == "dense":
            raise ValueError(f"eigen_solver: 'dense' needs the stored kernel matrix (method='dense'), not {method!r}")
        if self.preimage == "ridge":
            raise ValueError(f"preimage: 'ridge' solves an n_samples x n_samples system; not with method={method!r}")
        if method == "rff" and self._kernel_spec(1)[0] not in names_with("fourier_features"):
            raise ValueError(f"method: 'rff' has random Fourier features for the "
                             f"{' and '.join(names_with('fourier_features'))} kernels only")
        if method == "nystrom" and self.n_landmarks is not None and self.n_landmarks > n_samples:
            raise ValueError(f"n_landmarks: at most n_samples={n_samples}, got {self.n_landmarks}")
        if method == "matrix_free" and self.n_components is None:
            raise ValueError("n_components: method='matrix_free' needs the number of components (None means all N)")

    # ------------------------------------------------------------------ fitting

    def _training_kernel(self, X, lower_only):
        """The training kernel matrix and a bound on its entries (max |K|; for a PSD kernel, its diagonal's)."""
        name, gamma, degree, coef0 = self._kernel_spec(X.shape[1])
        if name == "precomputed":
            if X.shape[0] != X.shape[1]:
                raise ValueError(f"X: a precomputed kernel must be square, got shape {X.shape}")
            scale = _solvers.check_symmetric(X)
            return (X.copy(order="C") if self.center else X), scale
        K = kernel_matrix(X, None, name, gamma, degree, coef0, n_threads=self.n_threads, lower_only=lower_only)
        return K, float(np.abs(np.diagonal(K)).max())

    def _resolve_solver(self, n_samples, n_components, method):
        if method != "dense":
            return method if method in _PRIMAL_METHODS else "krylov"
        if self.eigen_solver != "auto":
            return self.eigen_solver
        return "dense" if _solvers.prefer_dense(n_samples, n_components) else "krylov"

    def _dense_fit_memory(self, n_samples, n_features, n_components, dtype):
        solver = self._resolve_solver(n_samples, n_components, "dense")
        return _solvers.fit_memory_bytes(n_samples, n_features, n_components, dtype, solver, self.n_threads), solver

    def _resolve_method(self, n_samples, n_features, dtype, in_memory=True):
        """The method "auto" stands for: the stored kernel while it fits in half the available memory, then
        matrix-free up to _AUTO_MATRIX_FREE_MAX_SAMPLES samples, then Nyström (always Nyström for Dask)."""
        if self.method != "auto":
            if self.method == "dense" and not in_memory:
                raise ValueError("method: 'dense' needs X in memory; with a dask array use 'nystrom', 'rff' or 'matrix_free'")
            return self.method
        if self._kernel_spec(n_features)[0] == "precomputed":
            return "dense"
        if not in_memory:
            return "nystrom"
        needed, _ = self._dense_fit_memory(n_samples, n_features, self.n_components or n_samples, dtype)
        available = available_memory_bytes()
        if available is None or needed <= _AUTO_MEMORY_FRACTION * available:
            return "dense"
        if n_samples <= _AUTO_MATRIX_FREE_MAX_SAMPLES and self.n_components is not None:
            return "matrix_free"
        return "nystrom"

    def _dense_eigenpairs(self, K, n_components, solver):
        return _solvers.leading_eigenpairs(
            K, n_components, solver, n_threads=self.n_threads, random_state=self.random_state, tol=self.tol,
            max_iter=self.max_iter,
        )

    def _fit_dense(self, X, n_components, solver):
        """Eigenpairs of the stored kernel matrix, and max |K|."""
        check_memory(
            self._dense_fit_memory(X.shape[0], X.shape[1], n_components, X.dtype)[0],
            "X",
            f"a kernel PCA fit of {X.shape[0]} samples ({solver} eigensolver, {X.dtype.name})",
        )
        if solver == "dense" and X.shape[0] > _DENSE_WARN_SAMPLES:
            _solvers.warn_slow_dense(X.shape[0], n_components, self.n_threads)
        # The Krylov solver reads the lower triangle only, so the kernel and its centring skip the other.
        lower_only = solver == "krylov"
        K, scale = self._training_kernel(X, lower_only)
        if self.center:
            self.column_means_, self.grand_mean_ = _core.center_kernel(K, self.n_threads, lower_only)
        return (*self._dense_eigenpairs(K, n_components, solver), scale)

    def _matrix_free_start(self, X, width):
        """The first block of the matrix-free solver: the leading hidden features of a small Nyström kernel
        PCA of X (about 2 sqrt(N) uniform landmarks), seeded Gaussian columns where it has fewer components.

        Every matrix-free product recomputes the whole kernel; starting from Nyström's approximate
        eigenvectors saves 2 to 3 of them (N = 20000 noisy digits, 10 components, blocks of 32: 4 products
        instead of 6 at tol 1e-6, 6 instead of 9 at 1e-10; filling only half the block saved one fewer) for
        the cost of an n m^2 product. Landmarks without a positive eigenvalue (all-zero rows under the
        linear, cosine or tanimoto kernel) give no approximation: the solver then starts from the random block."""
        start = check_random_state(self.random_state).standard_normal((X.shape[0], width))
        n_landmarks = min(X.shape[0], max(2 * width, int(2 * np.sqrt(X.shape[0]))))
        if n_landmarks < 2 * width or X.shape[0] <= _DENSE_MAX_SAMPLES:
            return start.astype(X.dtype)
        name, gamma, degree, coef0 = self._kernel_spec(X.shape[1])
        fm = Nystroem(
            n_components=n_landmarks, kernel=name, gamma=gamma, degree=degree, coef0=coef0,
            random_state=self.random_state, n_threads=self.n_threads,
        )
        with warnings.catch_warnings():  # the approximation's own diagnostics do not concern this fit
            warnings.simplefilter("ignore")
            try:
                fm.fit(X)
            except ValueError:  # a landmark kernel matrix without a positive eigenvalue
                return start.astype(X.dtype)
            moments = self._primal_moments(fm, X, _primal)
            w, U = _primal.primal_components(moments, min(width, fm.n_components_))
            H = _primal.hidden_features(fm, X, moments.mean, U, w)
        columns = min(H.shape[1], width)
        start[:, :columns] = H[:, :columns]
        return start.astype(X.dtype)

    def _fit_matrix_free(self, X, n_components):
        """Eigenpairs of the kernel matrix recomputed in tiles at every block product, and max |K|."""
        n_samples = X.shape[0]
        check_memory(
            _solvers.matrix_free_memory_bytes(n_samples, X.shape[1], n_components, X.dtype, self.n_threads),
            "X",
            f"a matrix-free kernel PCA fit of {n_samples} samples ({X.dtype.name})",
        )
        name, gamma, degree, coef0 = self._kernel_spec(X.shape[1])
        block = _solvers.matrix_free_block_size(n_components, n_samples)
        max_iter = self.max_iter or _core.default_max_iter(n_components, block)
        start = self._matrix_free_start(X, block)
        self._say(f"start block of {block} columns ready; each block product recomputes the kernel")
        with blas_threads(1):  # single-threaded GEMMs on each of the core's threads
            w, V, residuals, n_iter, converged, column_means, grand_mean = _core.kernel_top_eigsh(
                X, name, gamma, float(degree), float(coef0), self.center, n_components, start, self.tol, max_iter,
                self.n_threads, (lambda k: self._say(f"block product {k} done")) if self.verbose else None,
            )
        if not converged:
            _solvers.warn_not_converged(residuals, n_iter, max_iter, self.tol, X.dtype)
        if self.center:
            self.column_means_, self.grand_mean_ = column_means, grand_mean
        return w, V, residuals, n_iter, _solvers.kernel_diagonal_max(X, name, gamma, degree, coef0)

    def _feature_map(self, n_samples, n_features):
        name, gamma, degree, coef0 = self._kernel_spec(n_features)
        if self.method_ == "nystrom":
            return Nystroem(
                n_components=self.n_landmarks or min(n_samples, _DEFAULT_LANDMARKS), kernel=name, gamma=gamma,
                degree=degree, coef0=coef0, landmarks=self.landmarks, random_state=self.random_state,
                n_threads=self.n_threads,
            )
        return RandomFourierFeatures(
            n_components=self.n_features or _DEFAULT_RANDOM_FEATURES, kernel=name, gamma=gamma,
            orthogonal=name == "rbf", random_state=self.random_state, n_threads=self.n_threads,
        )

    def _primal_moments(self, fm, X, backend):
        """Moments of the features of X; uncentred (zero mean, scatter sum phi phi^T) without centring."""
        moments = backend.feature_moments(fm, X)
        if self.center:
            return moments
        scatter = moments.scatter + moments.n * np.outer(moments.mean, moments.mean)
        return _primal.FeatureMoments(moments.n, np.zeros_like(moments.mean), scatter)

    def _fit_primal(self, X, n_components, backend=_primal):
        """Kernel PCA in the primal of an explicit feature map: eigenpairs of the m x m covariance of the
        centred features, hidden features from a second pass, and max |K|. `backend` streams in-memory data
        (rkm._primal) or maps over Dask partitions (rkm._dask)."""
        fm = self._feature_map(X.shape[0], X.shape[1])
        check_memory(
            _primal_memory_bytes(X.shape[0], fm.n_components, n_components),
            "X",
            f"a {self.method_} kernel PCA fit of {X.shape[0]} samples with {fm.n_components} features",
        )
        if backend is _primal:
            fm.fit(X)
        else:
            backend.fit_feature_map(fm, X)
        if n_components is not None and n_components > fm._n_features_out:
            raise ValueError(
                f"n_components: at most the {fm._n_features_out} features of method={self.method_!r}, got {n_components}"
            )
        moments = self._primal_moments(fm, X, backend)
        w, U = _primal.primal_components(moments, n_components)
        residuals = np.linalg.norm(moments.scatter @ U - U * w, axis=0) / max(w.max(initial=0.0), np.finfo(float).tiny)
        # One pass gives H and, through the extra column U = mean, the approximate kernel's column means
        # phi_j^T mean - mean^T mean (+ mean^T mean below), which the pre-images use.
        mean = moments.mean
        extended = backend.hidden_features(fm, X, mean, np.column_stack([U, mean]), np.append(w, 1.0))
        extended = np.asarray(extended)
        if self.center:
            self.grand_mean_ = float(mean @ mean)
            self.column_means_ = (extended[:, -1] + self.grand_mean_).astype(extended.dtype)
        self.feature_map_, self.feature_mean_, self.primal_vectors_ = fm, mean, U
        scale = _solvers.kernel_diagonal_max(X, *self._kernel_spec(X.shape[1]))
        return w, np.ascontiguousarray(extended[:, :-1]), residuals, 1, scale

    def _fit_dask_matrix_free(self, dX, n_components):
        """Matrix-free eigenpairs with each block product run as Dask tasks over row partitions."""
        from rkm import _dask

        X = np.asarray(dX)
        name, gamma, degree, coef0 = self._kernel_spec(X.shape[1])
        n = X.shape[0]
        product = _dask.kernel_operator(dX, X, name, gamma, degree, coef0)
        ones = np.full((n, 1), 1.0 / n, dtype=X.dtype)
        column_means = product(ones)[:, 0].astype(np.float64) if self.center else np.zeros(n)
        grand_mean = float(column_means.mean())
        sums = np.ones(n)

        def centred_product(B):
            KB = product(B).astype(np.float64)
            if self.center:
                B64 = B.astype(np.float64)
                col_sums = sums @ B64
                KB -= (column_means @ B64 - grand_mean * col_sums) + np.outer(column_means, col_sums)
            return KB.astype(X.dtype)

        block = _solvers.matrix_free_block_size(n_components, n)
        max_iter = self.max_iter or _core.default_max_iter(n_components, block)
        w, V, residuals, n_iter, converged = _core.top_eigsh_operator(
            centred_product, n, n_components, self._matrix_free_start(X, block), self.tol, max_iter, self.n_threads
        )
        if not converged:
            _solvers.warn_not_converged(residuals, n_iter, max_iter, self.tol, X.dtype)
        if self.center:
            self.column_means_, self.grand_mean_ = column_means.astype(X.dtype), grand_mean
        self.X_fit_ = X
        return w, V, residuals, n_iter, _solvers.kernel_diagonal_max(X, name, gamma, degree, coef0)

    def _say(self, message):
        """With verbose, prints a progress line with the time since the fit began."""
        if self.verbose:
            print(f"KernelPCA [{time.perf_counter() - self._fit_began:7.1f} s] {message}", flush=True)

    def _store_components(self, w, V, scale, n_samples, dtype):
        """Checks the spectrum, scales it by 1 / eta and stores eigenvalues_ and H_."""
        rounding = _solvers.rounding_level(n_samples, scale, dtype)
        _solvers.warn_if_below_precision(float(w.max()), rounding, dtype)
        _solvers.check_positive_spectrum(w, rounding, dtype)
        with np.errstate(over="ignore"):
            eigenvalues = _solvers.numerically_positive(w, dtype) / self.eta
        if not np.all(np.abs(eigenvalues) <= np.finfo(dtype).max):
            raise ValueError(
                f"eta: the eigenvalues of K / eta overflow {np.dtype(dtype).name} (eta = {self.eta!r}); use a larger eta"
            )
        if self.n_components is None:
            keep = eigenvalues > 0
            eigenvalues, V = eigenvalues[keep], V[:, keep]
            self.eigen_residuals_ = self.eigen_residuals_[keep]
            if self.method_ in _PRIMAL_METHODS:
                self.primal_vectors_ = self.primal_vectors_[:, keep]
        self.eigenvalues_ = eigenvalues.astype(dtype)
        self.H_ = self.eigenvectors_ = np.ascontiguousarray(V, dtype=dtype)

    def _begin_fit(self, n_samples, n_features, dtype, in_memory=True):
        """Validates the parameters and resolves gamma_, method_ and eigen_solver_; returns the number of
        eigenpairs to compute (None: all of the primal problem)."""
        self._validate_params(n_samples)
        self._fit_began = time.perf_counter()
        if self.center and n_samples == 1:
            raise ValueError("n_samples = 1: a centred kernel PCA needs at least 2 samples")
        _, self.gamma_, _, _ = self._kernel_spec(n_features)
        self.method_ = self._resolve_method(n_samples, n_features, dtype, in_memory)
        self._validate_method(n_samples, self.method_)
        n_wanted = self.n_components or (None if self.method_ in _PRIMAL_METHODS else n_samples)
        self.eigen_solver_ = self._resolve_solver(n_samples, n_wanted or 1, self.method_)
        self._say(f"method {self.method_!r} for {n_samples} samples")
        return n_wanted

    def fit(self, X, y=None):
        """Fit the model from data X (or a Gram matrix when kernel="precomputed").

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), or a dask.array.Array
            A Dask array (chunked by rows) is fitted by method "nystrom" or "rff" as a map-reduce over its
            partitions, or "matrix_free" with each block product as Dask tasks.
        y : ignored

        Returns
        -------
        self
        """
        if is_dask_array(X):
            return self._fit_dask(X)
        X = validate_data(self, X, dtype=list(FLOAT_DTYPES), order="C", ensure_min_samples=1)
        n_samples = X.shape[0]
        n_wanted = self._begin_fit(n_samples, X.shape[1], X.dtype)
        if self.method_ in _PRIMAL_METHODS:
            w, V, residuals, n_iter, scale = self._fit_primal(X, n_wanted)
        elif self.method_ == "matrix_free":
            w, V, residuals, n_iter, scale = self._fit_matrix_free(X, n_wanted)
        else:
            w, V, residuals, n_iter, scale = self._fit_dense(X, n_wanted, self.eigen_solver_)
        self.eigen_residuals_, self.n_iter_ = residuals, n_iter
        self._store_components(w, V, scale, n_samples, X.dtype)
        self._say(f"fitted {self.eigenvalues_.size} components")
        name = self._kernel_spec(X.shape[1])[0]
        if name != "precomputed":
            self.X_fit_ = X
        self.preimage_ = self._resolve_preimage(name)
        if self.preimage_ == "ridge":
            self._fit_ridge_preimage(X)
        return self

    def _fit_dask(self, dX):
        """fit for a Dask array: the primal methods as a map-reduce, matrix-free products as Dask tasks."""
        from rkm import _dask

        dX = _dask.check_dask_array(dX)
        n_samples, n_features = dX.shape
        self.n_features_in_ = n_features
        if hasattr(self, "feature_names_in_"):
            del self.feature_names_in_
        n_wanted = self._begin_fit(n_samples, n_features, dX.dtype, in_memory=False)
        if self.method_ == "matrix_free":
            w, V, residuals, n_iter, scale = self._fit_dask_matrix_free(dX, n_wanted)
            self.preimage_ = self._resolve_preimage(self._kernel_spec(n_features)[0])
        else:
            w, V, residuals, n_iter, scale = self._fit_primal(dX, n_wanted, backend=_dask)
            # Input-space pre-images need the training set in memory, which a Dask fit does not gather.
            self.preimage_ = None
            if hasattr(self, "X_fit_"):
                del self.X_fit_
        self.eigen_residuals_, self.n_iter_ = residuals, n_iter
        self._store_components(w, V, scale, n_samples, dX.dtype)
        self._say(f"fitted {self.eigenvalues_.size} components")
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

    def _precomputed_scores(self, K_rows):
        """sum_j h_j k_c(x_j, x*) from given kernel rows k(x*, X_train)."""
        if K_rows.shape[1] != self.H_.shape[0]:
            raise ValueError(f"X: precomputed kernel rows need {self.H_.shape[0]} columns, got {K_rows.shape[1]}")
        K_rows = K_rows.copy(order="C")
        if self.center:
            _core.center_kernel_rows(K_rows, self.column_means_, self.grand_mean_, self.n_threads)
        return K_rows @ self.H_

    def _scores(self, X):
        """sum_j h_j k_c(x_j, x*) for new points, streaming the training set in tiles: with
        k_c(x*, x_j) = k(x*, x_j) - mean_j' k(x*, x_j') - c_j + g, the scores are k H - r (1^T H) - c^T H
        + g (1^T H), and r, the rows' kernel means, comes from the same product as a column of 1/N."""
        if self.kernel == "precomputed":
            return self._precomputed_scores(X)
        name, gamma, degree, coef0 = self._kernel_spec(X.shape[1])
        n_train = self.H_.shape[0]
        B = np.column_stack([self.H_, np.full(n_train, 1.0 / n_train, dtype=self.H_.dtype)])
        KB = kernel_product(X, self.X_fit_, B, name, gamma, degree, coef0, n_threads=self.n_threads)
        scores = KB[:, :-1]
        if self.center:
            h_sums = self.H_.sum(axis=0, dtype=np.float64)
            offset = self.column_means_.astype(np.float64) @ self.H_ - self.grand_mean_ * h_sums
            scores = scores - (KB[:, -1:] * h_sums + offset).astype(scores.dtype)
        return scores

    def _validate_new(self, X):
        """New data in the model's dtype (its kernel rows meet float32 or float64 training statistics), and the
        dtype the results are returned in: float32 when both the model and X are, else float64."""
        X = validate_data(self, X, dtype=list(FLOAT_DTYPES), order="C", reset=False)
        return X.astype(self.H_.dtype, copy=False), np.result_type(X.dtype, self.H_.dtype)

    def _hidden(self, X):
        """Hidden features h* = (1/(eta lambda)) sum_j h_j k_c(x_j, x*) (Constr-DRKM eq. 4); in the primal
        h* = (phi(x*) - mean) U / sqrt(eta lambda), the same map with the approximate kernel."""
        if self.method_ in _PRIMAL_METHODS:
            return _primal.hidden_features(
                self.feature_map_, X, self.feature_mean_, self.primal_vectors_, self.eigenvalues_ * self.eta
            ).astype(X.dtype, copy=False)
        scores = self._scores(X) / self.eta
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
        if is_dask_array(X):
            from rkm import _dask

            X = _dask.check_dask_array(X)
            dtype = np.result_type(X.dtype, self.H_.dtype)
            return _dask.transform_blocks(_transform_block, X, self.H_.shape[1], dtype, self)
        X, dtype = self._validate_new(X)
        return _solvers.finite_or_raise(self._hidden_to_output(self._hidden(X)), "transform").astype(dtype, copy=False)

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
        self.preimage_dual_coef_ = ridge_preimage_coefficients(
            Z, X, (name, gamma, degree, coef0), self.preimage_alpha, self.n_threads
        ).astype(X.dtype)

    def _similarities(self, H):
        """Similarities k(x_j, x*) predicted from hidden features (Gen-RKM eq. 7).

        Uncentred up to a constant per point, which the kernel smoother's scaling removes.
        """
        S = (H * self.eigenvalues_) @ self.H_.T
        return S + self.column_means_ if self.center else S

    def _expansion_coefficients(self, H):
        """Coefficients c with P phi(x*) = sum_i c_i phi(x_i), including the feature-space mean when centred."""
        beta = H @ self.H_.T
        return with_feature_mean(beta) if self.center else beta

    def _preimage(self, H, X_start=None):
        if self.preimage_ is None:
            raise ValueError(
                "inverse_transform: input-space pre-images need the training set, which a precomputed kernel "
                "or a fit on a dask array does not keep"
            )
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
        return self._preimage(_solvers.finite_or_raise(self._hidden(X), "denoise"), X_start=X).astype(dtype, copy=False)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.pairwise = self.kernel == "precomputed"
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags
