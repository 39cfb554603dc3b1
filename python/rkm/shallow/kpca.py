"""Kernel PCA as a restricted kernel machine (Suykens 2017 section 3.4; Constr-DRKM section 4)."""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike
from sklearn.base import (
    BaseEstimator,
    ClassNamePrefixFeaturesOutMixin,
    TransformerMixin,
    _fit_context,
    clone,
)
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import StrOptions
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted, validate_data

from rkm import _core
from rkm._utils import eigen, primal
from rkm._utils.dask_arrays import is_dask_collection
from rkm._utils.device import check_device, cuda_for_input, require_cuda
from rkm._utils.progress import Progress
from rkm._utils.streaming import RESERVOIR_ROWS, DeferredSolveMixin, Reservoir
from rkm._utils.threads import blas_threads
from rkm._utils.validation import (
    COUNT,
    FLOAT_DTYPES,
    MAX_ITER,
    N_THREADS,
    POSITIVE,
    POSITIVE_INT,
    RANDOM_STATE,
    TOL,
    VERBOSE,
    available_memory_bytes,
    check_memory,
    kernel_constraints,
    kernel_name_options,
)
from rkm.features import ExplicitFeatureMap, Nystroem
from rkm.kernels import Kernel, is_callable_kernel, kernel_matrix, kernel_product, kernel_spec, model_kernel_spec
from rkm.preimage import gaussian_fixed_point, kernel_smoother, ridge_preimage_coefficients, with_feature_mean

_DENSE_MAX_SAMPLES = eigen.DENSE_MAX_SAMPLES
# Beyond this many samples an explicitly requested dense solve warns with its expected time: LAPACK runs for
# minutes and cannot be interrupted.
_DENSE_WARN_SAMPLES = 8000
# kernel_storage="auto" stores the kernel matrix when a fit needs at most this fraction of the available memory.
_AUTO_MEMORY_FRACTION = 0.5


def _primal_memory_bytes(n_samples, n_features_out, n_components):
    """Peak bytes of a primal fit besides X: the hidden features, two blocks of features in float64 and a few
    m x m matrices (scatter, its eigenvectors, the landmarks' kernel and its square root)."""
    s = n_components or n_features_out
    return 8 * (n_samples * (s + 1) + 6 * n_features_out**2) + 2 * primal.BLOCK_BYTES + eigen.MEMORY_SLACK_BYTES


def _transform_block(block, model):
    """model.transform on one partition of a Dask array (a module-level function, so that it pickles)."""
    return model.transform(block)


class KernelPCA(DeferredSolveMixin, ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
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

    Sparse X (scipy.sparse CSR/CSC: text features, molecular fingerprints with ``kernel="tanimoto"``) is
    accepted by every named kernel and a callable with kernel_storage "dense" (the kernel matrix is formed
    through sparse products, then centred and decomposed as usual); ``transform`` then takes sparse or dense
    rows. A sparse fit has no input-space pre-images (``preimage`` "auto" resolves to none), and a
    ``feature_map``, kernel_storage "matrix_free" or a Dask array with sparse X raise ValueError.

    Large N: the exact kernel is held as a matrix or recomputed at every product (``kernel_storage``); an
    explicit ``feature_map`` of m features (Nyström, random Fourier features) approximates it instead, and
    the fit solves the m x m primal problem (Suykens 2017 sec. 3.4) in one streamed pass over the data. A
    trained neural network as ``feature_map`` (``rkm.torch.FeatureMap``) is kernel PCA with the kernel
    phi(x)^T phi(y) of its features, solved the same way. A
    Dask array as X is fitted as Dask tasks: the feature map's pass as a map-reduce over its partitions,
    the matrix-free products one task per partition. With a feature map, :meth:`partial_fit` adds batches of
    rows to the features' moments instead (a memory map, a zarr store, a generator), keeping a uniform sample
    of rows for the pre-images.

    Parameters
    ----------
    n_components : int, default=None
        Number of components s. None keeps every component with a positive eigenvalue (with a feature map,
        every one of its m features).
    kernel : {"rbf", "linear", "poly", "laplacian", "cosine", "tanimoto", "precomputed"}, Kernel or \
callable, default="rbf"
        Aliases "gaussian" (rbf) and "polynomial" (poly) are accepted.
        "rbf" is exp(-gamma ||x - y||^2) as in scikit-learn; see :mod:`rkm.kernels` for the papers'
        sigma conventions. A callable is called as ``kernel(A, B)`` and returns the Gram matrix of shape
        (len(A), len(B)) (the convention of ``sklearn.svm.SVC``; scikit-learn's KernelPCA calls a callable
        per pair of rows, which ``functools.partial(sklearn.metrics.pairwise_kernels, metric=f)`` turns
        into this one): the kernel matrix is built in Python, then centred and decomposed as a precomputed
        one (it must be symmetric and PSD); kernel_storage "dense" only, no ``fixed_point`` pre-image. "precomputed" takes a symmetric Gram matrix in ``fit`` (the Krylov solver
        reads its lower triangle only) and kernel rows k(x*, X_train) in ``transform``. With a
        ``feature_map``, its own kernel applies and ``kernel``, ``gamma``, ``degree`` and ``coef0`` do not
        enter the fit (a feature map with kernel="precomputed" is an error).
    gamma : float, default=None
        Kernel bandwidth for rbf/laplacian/poly; None means 1 / n_features.
    degree : float, default=3
        Degree of the poly kernel.
    coef0 : float, default=1.0
        Constant of the poly kernel.
    eta : float, default=1.0
        Regularisation constant eta of the RKM; ``eigenvalues_`` are those of K_c / eta.
    center : bool, default=True
        Centre the kernel matrix (feature-space mean removal, Suykens eq. 2.16).
    kernel_storage : {"auto", "dense", "matrix_free"}, default="auto"
        How the exact kernel matrix is held. "dense": stored (N x N), then decomposed by ``solver``.
        "matrix_free": never stored; each block product of the Krylov solver recomputes the kernel in tiles
        (memory O(N (d + b)), the same eigenpairs as "dense" to solver tolerance; needs ``n_components``;
        not for a precomputed kernel). "auto": "dense" when the fit needs at most half of the available
        memory, else "matrix_free" (for a Dask array: "matrix_free"; for a callable kernel or sparse X:
        "dense"). "auto" never approximates the kernel:
        pass a ``feature_map`` for that. Must stay "auto" with a feature map, which holds no kernel matrix.
    feature_map : rkm.features.ExplicitFeatureMap, default=None
        None: the exact kernel. Else an explicit feature map phi of m features, whose inner products
        phi(x)^T phi(y) are the kernel: :class:`rkm.features.Nystroem` or
        :class:`rkm.features.RandomFourierFeatures` (approximations of their own kernel, with their own
        gamma and size ``n_components``), or ``rkm.torch.FeatureMap`` (a trained PyTorch network). It is
        cloned and fitted on X, and the m x m covariance of the centred features is accumulated in one
        streamed pass and eigen-decomposed (the primal of the dual problem above). Pre-images use the
        feature map's kernel; a network approximates no input-space kernel, so its pre-images are the kernel
        smoother's (preimage "auto" or "smoother"), and ``gamma_`` is None.
    solver : {"auto", "dense", "krylov"}, default="auto"
        Eigensolver of kernel_storage="dense": "dense": LAPACK on the whole matrix; "krylov": restarted block
        Krylov for the top s pairs; "auto": dense for at most 200 samples or when s exceeds a fifth of
        them. A dense solve of more than 8000 samples asked for explicitly warns with its expected time:
        LAPACK cannot be interrupted once it runs. kernel_storage="matrix_free" always uses the Krylov
        solver, and a feature map's m x m problem the dense one.
    n_threads : int, default=None
        Threads for the core and BLAS (None: OpenMP's default; -1: all cores; 0 is an error).
    random_state : int, RandomState or None, default=None
        Seeds the Krylov starting block (a feature map has its own ``random_state``).
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
        scikit-learn's ``fit_inverse_transform``; kernel_storage "dense" only). "auto" is fixed_point for
        rbf, else smoother.
    n_neighbors : int, default=10
        Training points the kernel smoother averages.
    preimage_alpha : float, default=1.0
        Ridge penalty of the learned pre-image map.
    preimage_max_iter : int, default=100
        Iterations of the fixed-point pre-image.
    device : {"cpu", "cuda", "cuda:N"}, default="cpu"
        Where the kernel matrix lives (rkm built with ``-Ccmake.define.RKM_CUDA=ON``, an NVIDIA GPU and
        cuBLAS, e.g. ``pip install nvidia-cublas``). "cuda": kernel_storage "dense" builds K on the GPU and
        keeps it there (solver "krylov": the block products run there as cuBLAS GEMMs; solver "dense": K is
        copied to the host for LAPACK); "matrix_free" evaluates K on the GPU a band of rows at a time at every
        block product; ``transform`` evaluates its kernel rows there too. The Krylov iteration runs there as
        well (its N x b blocks, orthogonalisation and residuals); only its small projected problems run on the
        host. "auto" storage then means "dense" when K takes at most half of the GPU's free memory. Named
        kernels and dense, in-memory X only (no feature_map, callable, precomputed, sparse or Dask input).
    verbose : int, default=0
        When positive, ``fit`` prints the kernel storage or feature map it resolved and its time, and for
        kernel_storage="matrix_free" a line per block product (each recomputes the kernel: at N = 200 000
        about 1.5 minutes apiece).

    Attributes
    ----------
    eigenvalues_ : ndarray of shape (s,)
        Eigenvalues lambda of K_c / eta, descending (with eta=1 and centring, those of the centred
        kernel matrix, as ``sklearn.decomposition.KernelPCA.eigenvalues_``).
    H_ : ndarray of shape (n_samples, s)
        Hidden features, orthonormal columns (the eigenvectors); ``eigenvectors_`` is the same array.
    gamma_ : float
        The kernel bandwidth used (the feature map's with a feature map).
    column_means_, grand_mean_ : training kernel statistics used to centre new kernel rows.
    X_fit_ : ndarray or sparse matrix, a copy of the training data (absent for a precomputed kernel).
    kernel_storage_ : {"dense", "matrix_free"} or None
        How the kernel matrix was held; None for a fit through a feature map.
    solver_ : {"dense", "krylov"}
        The eigensolver used ("dense" for the m x m problem of a feature map).
    preimage_ : str or None
        The pre-image method ``inverse_transform`` uses.
    feature_map_ : the fitted clone of ``feature_map`` (with a feature map).
    feature_mean_ : ndarray of shape (m,), mean of the training features (with a feature map).
    primal_vectors_ : ndarray of shape (m, s), eigenvectors U of the features' covariance; hidden
        features are h = (phi(x) - ``feature_mean_``) U / sqrt(eta lambda) (with a feature map).
    n_iter_ : int, block products the Krylov solver used (1 for dense).
    n_samples_seen_ : int, rows added by :meth:`partial_fit` since its stream started (absent after ``fit``).
    eigen_residuals_ : ndarray of shape (s,), relative residuals reached.

    Examples
    --------
    >>> import numpy as np
    >>> from rkm import KernelPCA
    >>> X = np.random.default_rng(0).standard_normal((100, 3))
    >>> model = KernelPCA(2, gamma=0.5).fit(X)
    >>> model.transform(X).shape
    (100, 2)
    >>> from rkm.features import Nystroem
    >>> KernelPCA(2, feature_map=Nystroem(50, gamma=0.5, random_state=0)).fit_transform(X).shape
    (100, 2)
    """

    _parameter_constraints: dict = {
        "n_components": [None, *COUNT],
        **kernel_constraints(precomputed=True),
        "kernel": [kernel_name_options(precomputed=True), callable],
        "eta": POSITIVE,
        "center": ["boolean"],
        "kernel_storage": [StrOptions({"auto", "dense", "matrix_free"})],
        "feature_map": [None, ExplicitFeatureMap],
        "solver": [StrOptions({"auto", "dense", "krylov"})],
        "n_threads": N_THREADS,
        "random_state": RANDOM_STATE,
        "tol": TOL,
        "max_iter": MAX_ITER,
        "scaling": [StrOptions({"hidden", "score", "sklearn"})],
        "preimage": [StrOptions({"auto", "fixed_point", "smoother", "ridge"})],
        "n_neighbors": POSITIVE_INT,
        "preimage_alpha": POSITIVE,
        "preimage_max_iter": POSITIVE_INT,
        "device": [str],
        "verbose": VERBOSE,
    }

    def __init__(
        self,
        n_components: int | None = None,
        *,
        kernel: str | Kernel | Callable = "rbf",
        gamma: float | None = None,
        degree: float = 3,
        coef0: float = 1.0,
        eta: float = 1.0,
        center: bool = True,
        kernel_storage: str = "auto",
        feature_map: ExplicitFeatureMap | None = None,
        solver: str = "auto",
        n_threads: int | None = None,
        random_state: int | np.random.RandomState | None = None,
        tol: float | None = None,
        max_iter: int | None = None,
        scaling: str = "hidden",
        preimage: str = "auto",
        n_neighbors: int = 10,
        preimage_alpha: float = 1.0,
        preimage_max_iter: int = 100,
        device: str = "cpu",
        verbose: int = 0,
    ):
        self.n_components = n_components
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.eta = eta
        self.center = center
        self.kernel_storage = kernel_storage
        self.feature_map = feature_map
        self.solver = solver
        self.n_threads = n_threads
        self.random_state = random_state
        self.tol = tol
        self.max_iter = max_iter
        self.scaling = scaling
        self.preimage = preimage
        self.n_neighbors = n_neighbors
        self.preimage_alpha = preimage_alpha
        self.preimage_max_iter = preimage_max_iter
        self.device = device
        self.verbose = verbose

    # ------------------------------------------------------------------ parameters

    def _kernel_spec(self, n_features):
        """(name, gamma, degree, coef0) of the model's kernel; name is "precomputed" or canonical."""
        return model_kernel_spec(self.kernel, self.gamma, self.degree, self.coef0, n_features)

    def _fit_kernel_spec(self, n_features):
        """(name, gamma, degree, coef0) of the kernel the fit uses: the feature map's own with a feature map,
        else the model's. A feature map without a ``kernel`` (a network, rkm.torch.FeatureMap) approximates no
        input-space kernel: name None (its kernel is phi(x)^T phi(y) itself)."""
        fm = self.feature_map
        if fm is None:
            return self._kernel_spec(n_features)
        if getattr(fm, "kernel", None) is None:
            return None, None, None, None
        return kernel_spec(fm.kernel, fm.gamma, getattr(fm, "degree", 3), getattr(fm, "coef0", 1.0), n_features)

    def _cuda_device(self):
        """The CUDA device's index, or None for the CPU (ValueError naming ``device`` for anything else)."""
        return check_device(self.device)

    def _check_params_vs_input(self, n_samples, n_features, dtype, in_memory=True, sparse=False):
        """The rules that need the data or tie parameters together; returns the resolved kernel storage
        ("dense" or "matrix_free"; None with a feature map), which some of them depend on. n_samples None
        (partial_fit, whose total is not known) skips the rules on the number of samples."""
        if n_samples is not None and self.n_components is not None and self.n_components > n_samples:
            raise ValueError(f"n_components: must be between 1 and n_samples={n_samples}, got {self.n_components}")
        if self.center and n_samples == 1:
            raise ValueError("n_samples = 1: a centred kernel PCA needs at least 2 samples")
        model_kernel = self._kernel_spec(n_features)[0]
        name = self._fit_kernel_spec(n_features)[0]
        if self.preimage == "fixed_point" and name != "rbf":
            raise ValueError("preimage: 'fixed_point' needs the rbf kernel")
        if self.preimage == "ridge" and name == "precomputed":
            raise ValueError("preimage: 'ridge' needs a kernel function, not 'precomputed'")
        cuda_for_input(
            self.device, model_kernel, feature_map=self.feature_map is not None, sparse=sparse, in_memory=in_memory
        )
        if self.preimage in ("fixed_point", "smoother") and name == "precomputed":
            raise ValueError("preimage: input-space pre-images need a kernel function, not 'precomputed'")
        if sparse and model_kernel == "precomputed":
            raise ValueError("X: a precomputed kernel must be a dense array, got a sparse matrix")
        if sparse and self.preimage != "auto":
            raise ValueError(
                f"preimage: {self.preimage!r} computes input-space pre-images, which sparse X does not have; "
                "leave preimage='auto' (no pre-images) or pass X.toarray()"
            )
        if self.feature_map is not None:
            if sparse:
                raise ValueError("feature_map: sparse X is not supported with a feature_map; use feature_map=None")
            if model_kernel == "precomputed":
                raise ValueError(
                    "feature_map: maps X itself to features; with kernel='precomputed' use feature_map=None"
                )
            if self.kernel_storage != "auto":
                raise ValueError(
                    f"kernel_storage: {self.kernel_storage!r} holds the exact kernel matrix; with a feature_map "
                    "there is none (leave kernel_storage='auto')"
                )
            if self.solver == "krylov":
                raise ValueError("solver: a feature_map's m x m problem is solved by the dense solver, not 'krylov'")
            if self.preimage == "ridge":
                raise ValueError("preimage: 'ridge' solves an n_samples x n_samples system; not with a feature_map")
            return None
        storage = self._resolve_kernel_storage(n_samples, n_features, dtype, in_memory, sparse)
        if storage == "dense" and not in_memory:
            raise ValueError(
                "kernel_storage: 'dense' needs X in memory; with a dask array use 'matrix_free' or a feature_map"
            )
        if storage == "matrix_free":
            if is_callable_kernel(model_kernel):
                raise ValueError(
                    "kernel_storage: 'matrix_free' evaluates the kernel tile by tile in the compiled core, which "
                    "cannot call a Python kernel function; use kernel_storage='dense' or a named kernel"
                )
            if sparse:
                raise ValueError(
                    "kernel_storage: 'matrix_free' needs dense X (the compiled core's tiles); with sparse X use "
                    "kernel_storage='dense'"
                )
            if model_kernel == "precomputed":
                raise ValueError(
                    "kernel_storage: 'matrix_free' evaluates the kernel from X itself; with kernel='precomputed' "
                    "use kernel_storage='dense'"
                )
            if self.solver == "dense":
                raise ValueError(
                    "solver: 'dense' needs the stored kernel matrix (kernel_storage='dense'), not 'matrix_free'"
                )
            if self.preimage == "ridge":
                raise ValueError(
                    "preimage: 'ridge' solves an n_samples x n_samples system; not with kernel_storage='matrix_free'"
                )
            if self.n_components is None:
                chosen = " (chosen by 'auto': the kernel matrix does not fit)" if self.kernel_storage == "auto" else ""
                raise ValueError(
                    f"n_components: kernel_storage='matrix_free'{chosen} needs the number of components (None means "
                    "all N)"
                )
        return storage

    # ------------------------------------------------------------------ fitting

    def _training_kernel(self, X, lower_only):
        """The training kernel matrix and a bound on its entries (max |K|; for a PSD kernel, its diagonal's)."""
        name, gamma, degree, coef0 = self._kernel_spec(X.shape[1])
        if name == "precomputed":
            if X.shape[0] != X.shape[1]:
                raise ValueError(f"X: a precomputed kernel must be square, got shape {X.shape}")
            scale = eigen.check_symmetric(X)
            return (X.copy(order="C") if self.center else X), scale
        K = kernel_matrix(
            X, None, name, gamma, degree, coef0, n_threads=self.n_threads, lower_only=lower_only, device=self.device
        )
        if is_callable_kernel(name):  # a user's function: checked as a precomputed Gram matrix
            return K, eigen.check_symmetric(K, "kernel: the callable's Gram matrix K(X, X)")
        return K, float(np.abs(np.diagonal(K)).max())

    def _resolve_solver(self, n_samples, n_components, kernel_storage):
        """The eigensolver: Krylov for the matrix-free kernel, dense for a feature map's m x m problem, and for
        the stored kernel the one asked for ("auto": by size)."""
        if kernel_storage != "dense":
            return "krylov" if kernel_storage == "matrix_free" else "dense"
        if self.solver != "auto":
            return self.solver
        return "dense" if eigen.prefer_dense(n_samples, n_components) else "krylov"

    def _dense_fit_memory(self, n_samples, n_features, n_components, dtype):
        solver = self._resolve_solver(n_samples, n_components, "dense")
        return eigen.fit_memory_bytes(n_samples, n_features, n_components, dtype, solver, self.n_threads), solver

    def _resolve_kernel_storage(self, n_samples, n_features, dtype, in_memory=True, sparse=False):
        """The storage "auto" stands for: the stored kernel while the fit needs at most half the available
        memory, else matrix-free (always matrix-free for a Dask array; always stored for a precomputed or
        callable kernel and for sparse X, which the matrix-free core cannot evaluate)."""
        if self.kernel_storage != "auto":
            return self.kernel_storage
        cuda = self._cuda_device()
        if cuda is not None:
            needed = eigen.cuda_dense_memory_bytes(n_samples, n_features, self.n_components or n_samples, dtype)
            return "dense" if needed <= _AUTO_MEMORY_FRACTION * require_cuda(cuda)["free_bytes"] else "matrix_free"
        name = self._kernel_spec(n_features)[0]
        if name == "precomputed" or is_callable_kernel(name) or sparse:
            return "dense"
        if not in_memory:
            return "matrix_free"
        needed, _ = self._dense_fit_memory(n_samples, n_features, self.n_components or n_samples, dtype)
        available = available_memory_bytes()
        if available is None or needed <= _AUTO_MEMORY_FRACTION * available:
            return "dense"
        return "matrix_free"

    def _dense_eigenpairs(self, K, n_components, solver):
        return eigen.leading_eigenpairs(
            K,
            n_components,
            solver,
            n_threads=self.n_threads,
            random_state=self.random_state,
            tol=self.tol,
            max_iter=self.max_iter,
        )

    def _fit_dense(self, X, n_components, solver):
        """Eigenpairs of the stored kernel matrix, and max |K|."""
        if self._cuda_device() is not None and solver == "krylov":
            rng = check_random_state(self.random_state)
            start = rng.standard_normal((X.shape[0], eigen.krylov_block_size(n_components, X.shape[0])))
            return self._fit_cuda(X, n_components, start.astype(X.dtype), store=True)
        check_memory(
            self._dense_fit_memory(X.shape[0], X.shape[1], n_components, X.dtype)[0],
            "X",
            f"a kernel PCA fit of {X.shape[0]} samples ({solver} eigensolver, {X.dtype.name})",
        )
        if solver == "dense" and X.shape[0] > _DENSE_WARN_SAMPLES:
            eigen.warn_slow_dense(X.shape[0], n_components, self.n_threads)
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
            n_components=n_landmarks,
            kernel=name,
            gamma=gamma,
            degree=degree,
            coef0=coef0,
            random_state=self.random_state,
            n_threads=self.n_threads,
        )
        with warnings.catch_warnings():  # the approximation's own diagnostics do not concern this fit
            warnings.simplefilter("ignore")
            try:
                fm.fit(X)
            except ValueError:  # a landmark kernel matrix without a positive eigenvalue
                return start.astype(X.dtype)
            moments, raw = self._primal_moments(fm, X, primal)
            w, U = primal.primal_components(moments, min(width, fm.n_components_))
            H = primal.hidden_features(fm, X, moments.mean, U, w, raw=raw)
        columns = min(H.shape[1], width)
        start[:, :columns] = H[:, :columns]
        return start.astype(X.dtype)

    def _fit_cuda(self, X, n_components, start, store):
        """Eigenpairs of the kernel matrix with the block products and the Krylov iteration on the GPU (K stored
        there, or recomputed in bands at every product), and max |K|. The host holds X, the start block and the
        eigenvectors."""
        n_samples = X.shape[0]
        columns = start.shape[1] + 2 * n_components
        check_memory(
            n_samples * (X.shape[1] + columns) * X.dtype.itemsize + eigen.MEMORY_SLACK_BYTES,
            "X",
            f"the host side of a CUDA kernel PCA fit of {n_samples} samples ({X.dtype.name})",
        )
        return self._kernel_operator_eigenpairs(X, n_components, start, store)

    def _fit_matrix_free(self, X, n_components):
        """Eigenpairs of the kernel matrix recomputed in tiles at every block product, and max |K|."""
        n_samples = X.shape[0]
        block = eigen.matrix_free_block_size(n_components, n_samples)
        if self._cuda_device() is not None:
            return self._fit_cuda(X, n_components, self._matrix_free_start(X, block), store=False)
        check_memory(
            eigen.matrix_free_memory_bytes(n_samples, X.shape[1], n_components, X.dtype, self.n_threads),
            "X",
            f"a matrix-free kernel PCA fit of {n_samples} samples ({X.dtype.name})",
        )
        start = self._matrix_free_start(X, block)
        self._progress(f"start block of {block} columns ready; each block product recomputes the kernel")
        return self._kernel_operator_eigenpairs(X, n_components, start, store=False)

    def _kernel_operator_eigenpairs(self, X, n_components, start, store):
        """The core's kernel eigensolver from the start block: the block products on the CPU's tiles, or on the
        GPU (K stored there when `store`, else in bands). Sets the centring statistics; returns the eigenpairs and
        max |K|."""
        name, gamma, degree, coef0 = self._kernel_spec(X.shape[1])
        max_iter = self.max_iter or _core.default_max_iter(n_components, start.shape[1])
        kernel = (X, name, gamma, float(degree), float(coef0), self.center)
        solve = (n_components, start, self.tol, max_iter, self.n_threads)
        progress = (lambda k: self._progress(f"block product {k} done")) if self.verbose else None
        cuda = self._cuda_device()
        if cuda is not None:
            result = _core.cuda_kernel_top_eigsh(*kernel, store, *solve, progress, cuda)
        else:
            with blas_threads(1):  # single-threaded GEMMs on each of the core's threads
                result = _core.kernel_top_eigsh(*kernel, *solve, progress)
        w, V, residuals, n_iter, converged, column_means, grand_mean = result
        if not converged:
            eigen.warn_not_converged(residuals, n_iter, max_iter, self.tol, X.dtype)
        if self.center:
            self.column_means_, self.grand_mean_ = column_means, grand_mean
        return w, V, residuals, n_iter, eigen.kernel_diagonal_max(X, name, gamma, degree, coef0)

    def _primal_moments(self, fm, X, backend):
        """Moments of the features of X, uncentred (zero mean, scatter sum phi phi^T) without centring; and the
        raw features when the in-memory backend could keep them for the second pass (else None)."""
        if backend is primal:
            moments, raw = primal.feature_moments_and_raw(fm, X)
        else:
            moments, raw = backend.feature_moments(fm, X), None
        return (moments if self.center else moments.uncentred()), raw

    def _fit_primal(self, X, n_components, backend=primal):
        """Kernel PCA in the primal of an explicit feature map: eigenpairs of the m x m covariance of the
        centred features, hidden features from a second pass, and max |K|. `backend` streams in-memory data
        (rkm._utils.primal) or maps over Dask partitions (rkm._utils.dask_arrays)."""
        fm = clone(self.feature_map)
        # rkm.features' maps know their width before the fit; a network's is known once fitted.
        width = getattr(fm, "n_components", None)
        if width is not None:
            self._check_primal_memory(fm, X.shape[0], width, n_components)
        if backend is primal:
            fm.fit(X)
        else:
            backend.fit_feature_map(fm, X)
        if width is None:
            self._check_primal_memory(fm, X.shape[0], fm._n_features_out, n_components)
        self._check_feature_map_width(fm, n_components)
        moments, raw = self._primal_moments(fm, X, backend)
        hidden = functools.partial(primal.hidden_features, raw=raw) if raw is not None else backend.hidden_features
        w, V, residuals = self._primal_solution(fm, moments, n_components, functools.partial(hidden, fm, X))
        spec = self._fit_kernel_spec(X.shape[1])
        diagonal_max = None if spec[0] is None else eigen.kernel_diagonal_max(X, *spec)
        return w, V, residuals, 1, self._primal_scale(moments, diagonal_max)

    @staticmethod
    def _check_feature_map_width(fm, n_components):
        if n_components is not None and n_components > fm._n_features_out:
            raise ValueError(
                f"n_components: at most the {fm._n_features_out} features of the feature_map, got {n_components}"
            )

    def _primal_solution(self, fm, moments, n_components, hidden):
        """Eigenpairs of the features' scatter, their residuals, and the hidden features of the rows that
        `hidden(mean, U, eigenvalues)` maps (the training set, or partial_fit's reservoir), with the approximate
        kernel's column means over the training set at those rows."""
        w, U = primal.primal_components(moments, n_components)
        residuals = np.linalg.norm(moments.scatter @ U - U * w, axis=0) / max(w.max(initial=0.0), np.finfo(float).tiny)
        # One pass gives H and, through the extra column U = mean, the approximate kernel's column means
        # phi_j^T mean - mean^T mean (+ mean^T mean below), which the pre-images use.
        mean = moments.mean
        extended = np.asarray(hidden(mean, np.column_stack([U, mean]), np.append(w, 1.0)))
        if self.center:
            self.grand_mean_ = float(mean @ mean)
            self.column_means_ = (extended[:, -1] + self.grand_mean_).astype(extended.dtype)
        self.feature_map_, self.feature_mean_, self.primal_vectors_ = fm, mean, U
        return w, np.ascontiguousarray(extended[:, :-1]), residuals

    @staticmethod
    def _primal_scale(moments, diagonal_max):
        """The kernel's scale for the rounding checks: max k(x, x) where the kernel has an input-space formula,
        else the mean of k(x_i, x_i) = ||phi_i||^2 (the moments hold no maximum)."""
        if diagonal_max is not None:
            return diagonal_max
        return (np.trace(moments.scatter) + moments.n * float(moments.mean @ moments.mean)) / moments.n

    @staticmethod
    def _check_primal_memory(fm, n_samples, width, n_components):
        check_memory(
            _primal_memory_bytes(n_samples, width, n_components),
            "X",
            f"a {type(fm).__name__} kernel PCA fit of {n_samples} samples with {width} features",
        )

    def _fit_dask_matrix_free(self, dX, n_components):
        """Matrix-free eigenpairs with each block product run as Dask tasks over row partitions."""
        from rkm._utils import dask_arrays

        X = np.asarray(dX)
        name, gamma, degree, coef0 = self._kernel_spec(X.shape[1])
        n = X.shape[0]
        product = dask_arrays.kernel_operator(dX, X, name, gamma, degree, coef0)
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

        block = eigen.matrix_free_block_size(n_components, n)
        max_iter = self.max_iter or _core.default_max_iter(n_components, block)
        w, V, residuals, n_iter, converged = _core.top_eigsh_operator(
            centred_product, n, n_components, self._matrix_free_start(X, block), self.tol, max_iter, self.n_threads
        )
        if not converged:
            eigen.warn_not_converged(residuals, n_iter, max_iter, self.tol, X.dtype)
        if self.center:
            self.column_means_, self.grand_mean_ = column_means.astype(X.dtype), grand_mean
        self.X_fit_ = X
        return w, V, residuals, n_iter, eigen.kernel_diagonal_max(X, name, gamma, degree, coef0)

    def _store_components(self, w, V, scale, n_samples, dtype):
        """Checks the spectrum, scales it by 1 / eta and stores eigenvalues_ and H_."""
        rounding = eigen.rounding_level(n_samples, scale, dtype)
        eigen.warn_if_below_precision(float(w.max()), rounding, dtype)
        eigen.check_positive_spectrum(w, rounding, dtype)
        with np.errstate(over="ignore"):
            eigenvalues = eigen.numerically_positive(w, dtype) / self.eta
        if not np.all(np.abs(eigenvalues) <= np.finfo(dtype).max):
            raise ValueError(
                f"eta: the eigenvalues of K / eta overflow {np.dtype(dtype).name} (eta = {self.eta!r}); "
                "use a larger eta"
            )
        if self.n_components is None:
            keep = eigenvalues > 0
            eigenvalues, V = eigenvalues[keep], V[:, keep]
            self.eigen_residuals_ = self.eigen_residuals_[keep]
            if self.kernel_storage_ is None:
                self.primal_vectors_ = self.primal_vectors_[:, keep]
        self.eigenvalues_ = eigenvalues.astype(dtype)
        self.H_ = self.eigenvectors_ = np.ascontiguousarray(V, dtype=dtype)

    def _begin_fit(self, n_samples, n_features, dtype, in_memory=True, sparse=False):
        """Checks the parameters against the data and resolves gamma_, kernel_storage_ and solver_; returns the
        number of eigenpairs to compute (None: all of the primal problem)."""
        self._progress = Progress(type(self).__name__, self.verbose)
        self._forget_stream()
        self.kernel_storage_ = self._check_params_vs_input(n_samples, n_features, dtype, in_memory, sparse)
        _, self.gamma_, _, _ = self._fit_kernel_spec(n_features)
        n_wanted = self.n_components or (None if self.kernel_storage_ is None else n_samples)
        self.solver_ = self._resolve_solver(n_samples, n_wanted or 1, self.kernel_storage_)
        if self.kernel_storage_ is None:
            self._progress(f"feature_map {type(self.feature_map).__name__} for {n_samples} samples")
        else:
            self._progress(f"kernel_storage {self.kernel_storage_!r}, solver {self.solver_!r} for {n_samples} samples")
        return n_wanted

    # prefer_skip_nested_validation=False: the feature_map is not validated yet.
    @_fit_context(prefer_skip_nested_validation=False)
    def fit(self, X: ArrayLike, y: None = None) -> KernelPCA:
        """Fit the model from data X (or a Gram matrix when kernel="precomputed").

        Parameters
        ----------
        X : {array-like, scipy.sparse matrix} of shape (n_samples, n_features), or a Dask array or DataFrame
            A Dask array (chunked by rows) or DataFrame is fitted through a ``feature_map`` as a map-reduce over its
            partitions, or with kernel_storage "matrix_free" with each block product as Dask tasks. Sparse
            CSR/CSC X is fitted with the stored kernel matrix (see the class docstring). X is copied.
        y : ignored

        Returns
        -------
        self
        """
        if is_dask_collection(X):
            return self._fit_dask(X)
        # A copy: the model keeps X (X_fit_), which the caller may change after fit (a precomputed kernel is
        # not kept; the centring copies it).
        X = validate_data(
            self,
            X,
            dtype=list(FLOAT_DTYPES),
            order="C",
            ensure_min_samples=1,
            accept_sparse=("csr", "csc"),
            copy=not self._precomputed(),
        )
        n_samples = X.shape[0]
        n_wanted = self._begin_fit(n_samples, X.shape[1], X.dtype, sparse=sp.issparse(X))
        if self.kernel_storage_ is None:
            w, V, residuals, n_iter, scale = self._fit_primal(X, n_wanted)
        elif self.kernel_storage_ == "matrix_free":
            w, V, residuals, n_iter, scale = self._fit_matrix_free(X, n_wanted)
        else:
            w, V, residuals, n_iter, scale = self._fit_dense(X, n_wanted, self.solver_)
        self.eigen_residuals_, self.n_iter_ = residuals, n_iter
        self._store_components(w, V, scale, n_samples, X.dtype)
        self._progress(f"fitted {self.eigenvalues_.size} components")
        name = self._fit_kernel_spec(X.shape[1])[0]
        if name != "precomputed":
            self.X_fit_ = X
        self.preimage_ = None if sp.issparse(X) else self._resolve_preimage(name)
        if self.preimage_ == "ridge":
            self._fit_ridge_preimage(X)
        return self

    def _fit_dask(self, dX):
        """fit for a Dask array: a feature map's pass as a map-reduce, matrix-free products as Dask tasks."""
        from rkm._utils import dask_arrays

        dX = dask_arrays.validate_dask_data(self, dX, reset=True)
        n_samples, n_features = dX.shape
        n_wanted = self._begin_fit(n_samples, n_features, dX.dtype, in_memory=False)
        if self.kernel_storage_ == "matrix_free":
            w, V, residuals, n_iter, scale = self._fit_dask_matrix_free(dX, n_wanted)
            self.preimage_ = self._resolve_preimage(self._kernel_spec(n_features)[0])
        else:
            w, V, residuals, n_iter, scale = self._fit_primal(dX, n_wanted, backend=dask_arrays)
            # Input-space pre-images need the training set in memory, which a Dask fit does not gather.
            self.preimage_ = None
            if hasattr(self, "X_fit_"):
                del self.X_fit_
        self.eigen_residuals_, self.n_iter_ = residuals, n_iter
        self._store_components(w, V, scale, n_samples, dX.dtype)
        self._progress(f"fitted {self.eigenvalues_.size} components")
        return self

    # ------------------------------------------------------------------ streaming

    # What the deferred solve of partial_fit sets (rkm._utils.streaming).
    _deferred_attributes = (
        "eigenvalues_",
        "eigenvectors_",
        "H_",
        "eigen_residuals_",
        "n_iter_",
        "feature_mean_",
        "primal_vectors_",
        "column_means_",
        "grand_mean_",
        "X_fit_",
        "preimage_",
    )

    def _streams(self):
        """partial_fit exists with a feature map, whose m x m moments it accumulates."""
        if self.feature_map is None:
            raise AttributeError(
                "partial_fit is available with a feature_map (rkm.features.Nystroem, RandomFourierFeatures): it "
                "accumulates the features' m x m moments, while the exact kernel needs every row at once"
            )
        return True

    @available_if(_streams)
    @_fit_context(prefer_skip_nested_validation=False)
    def partial_fit(self, X: ArrayLike, y: None = None) -> KernelPCA:
        """Add a batch of rows to a fit through the ``feature_map``, for data that does not fit in memory at once.

        Each call adds the batch's features to their streamed mean and scatter (merged exactly, as a Dask fit
        merges its partitions), so after the last batch the eigenvalues, ``primal_vectors_`` and ``transform``
        equal those of ``fit`` on all rows (to rounding) with the same fitted feature map. The first call (on a
        new model, or after ``fit``) fits a clone of ``feature_map`` on its batch: a ``Nystroem`` map draws its
        landmarks from that batch alone (make it a shuffled, representative one; ``RandomFourierFeatures`` need
        no rows). The m x m eigenproblem runs once, when a fitted attribute or ``transform`` next needs it.

        What is kept of the rows: a uniform random sample of at most ``rkm._utils.streaming.RESERVOIR_ROWS``
        (2000) of them, drawn by reservoir sampling seeded by ``random_state``. It stands for the training set
        where one is needed: ``X_fit_`` is the sample and ``H_`` its hidden features (not those of every row),
        the kernel smoother averages its nearest rows, and the fixed-point pre-image expands the projection on
        its rows' features (weighted n / R, the sample's share of the n rows).

        Parameters
        ----------
        X : array-like of shape (n_batch, n_features)
        y : ignored

        Returns
        -------
        self
        """
        first = "_stream" not in self.__dict__
        if first:
            self._forget_fit()
        X = validate_data(self, X, dtype=list(FLOAT_DTYPES), order="C", reset=first)
        if first:
            self._start_stream(X)
        self._stream.add(X)
        self._reservoir.add(X)
        spec = self._fit_kernel_spec(X.shape[1])
        if spec[0] is not None:
            self._diagonal_max = max(self._diagonal_max, eigen.kernel_diagonal_max(X, *spec))
        self.n_samples_seen_ += X.shape[0]
        self._defer_solve()
        return self

    def _start_stream(self, X):
        """The first batch of partial_fit: checks the parameters, fits the feature map and starts the sums."""
        self._progress = Progress(type(self).__name__, self.verbose)
        self.kernel_storage_ = self._check_params_vs_input(None, X.shape[1], X.dtype)
        _, self.gamma_, _, _ = self._fit_kernel_spec(X.shape[1])
        self.solver_ = "dense"
        fm = clone(self.feature_map).fit(X)
        self._check_feature_map_width(fm, self.n_components)
        self.feature_map_, self.n_samples_seen_, self._diagonal_max = fm, 0, 0.0
        self._stream, self._stream_dtype = primal.MomentStream(fm), X.dtype
        self._reservoir = Reservoir(RESERVOIR_ROWS, self.random_state)

    def _solve_stream(self):
        """The eigenpairs of the streamed moments, and the reservoir's hidden features for the pre-images."""
        n_samples = self._stream.n
        if self.center and n_samples < 2:
            raise ValueError("n_samples = 1: a centred kernel PCA needs at least 2 samples")
        moments = self._stream.moments()
        moments = moments if self.center else moments.uncentred()
        rows = self._reservoir.rows
        hidden = functools.partial(primal.hidden_features, self.feature_map_, rows)
        w, V, residuals = self._primal_solution(self.feature_map_, moments, self.n_components, hidden)
        self.eigen_residuals_, self.n_iter_ = residuals, 1
        spec = self._fit_kernel_spec(rows.shape[1])
        scale = self._primal_scale(moments, None if spec[0] is None else self._diagonal_max)
        self._store_components(w, V, scale, n_samples, self._stream_dtype)
        self.X_fit_ = rows
        self.preimage_ = self._resolve_preimage(spec[0])
        self._progress(f"fitted {self.eigenvalues_.size} components from {n_samples} streamed rows")

    def _resolve_preimage(self, kernel_name):
        if kernel_name == "precomputed":
            return None
        if self.preimage == "auto":
            return "fixed_point" if isinstance(kernel_name, str) and kernel_name == "rbf" else "smoother"
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
        if self._precomputed():
            return self._precomputed_scores(X)
        name, gamma, degree, coef0 = self._kernel_spec(X.shape[1])
        n_train = self.H_.shape[0]
        B = np.column_stack([self.H_, np.full(n_train, 1.0 / n_train, dtype=self.H_.dtype)])
        KB = kernel_product(X, self.X_fit_, B, name, gamma, degree, coef0, n_threads=self.n_threads, device=self.device)
        scores = KB[:, :-1]
        if self.center:
            h_sums = self.H_.sum(axis=0, dtype=np.float64)
            offset = self.column_means_.astype(np.float64) @ self.H_ - self.grand_mean_ * h_sums
            scores = scores - (KB[:, -1:] * h_sums + offset).astype(scores.dtype)
        return scores

    def _validate_new(self, X):
        """New data in the model's dtype (its kernel rows meet float32 or float64 training statistics), and the
        dtype the results are returned in: float32 when both the model and X are, else float64."""
        sparse = "csr" if self.kernel_storage_ == "dense" and not self._precomputed() else False
        X = validate_data(self, X, dtype=list(FLOAT_DTYPES), order="C", reset=False, accept_sparse=sparse)
        return X.astype(self.H_.dtype, copy=False), np.result_type(X.dtype, self.H_.dtype)

    def _precomputed(self):
        return isinstance(self.kernel, str) and self.kernel == "precomputed"

    def _hidden(self, X):
        """Hidden features h* = (1/(eta lambda)) sum_j h_j k_c(x_j, x*) (Constr-DRKM eq. 4); in the primal
        h* = (phi(x*) - mean) U / sqrt(eta lambda), the same map with the approximate kernel."""
        if self.kernel_storage_ is None:
            return primal.hidden_features(
                self.feature_map_, X, self.feature_mean_, self.primal_vectors_, self.eigenvalues_ * self.eta
            ).astype(X.dtype, copy=False)
        scores = self._scores(X) / self.eta
        return np.divide(scores, self.eigenvalues_, out=np.zeros_like(scores), where=self.eigenvalues_ > 0)

    def transform(self, X: ArrayLike) -> np.ndarray:
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
        if is_dask_collection(X):
            from rkm._utils import dask_arrays

            X = dask_arrays.check_dask_array(dask_arrays.as_dask_array(X)[0])
            dtype = np.result_type(X.dtype, self.H_.dtype)
            return dask_arrays.transform_blocks(_transform_block, X, self.H_.shape[1], dtype, self)
        X, dtype = self._validate_new(X)
        return eigen.finite_or_raise(self._hidden_to_output(self._hidden(X)), "transform").astype(dtype, copy=False)

    @_fit_context(prefer_skip_nested_validation=False)
    def fit_transform(self, X: ArrayLike, y: None = None) -> np.ndarray:
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
        # After partial_fit the rows are a reservoir of R of the n training rows: the sum over all rows is
        # estimated as n / R times the sum over the reservoir (after fit, R = n).
        beta = H @ self.H_.T * (getattr(self, "n_samples_seen_", self.H_.shape[0]) / self.H_.shape[0])
        return with_feature_mean(beta) if self.center else beta

    def _preimage(self, H, X_start=None):
        if self.preimage_ is None:
            raise ValueError(
                "inverse_transform: input-space pre-images need the dense training set, which a precomputed kernel, "
                "a fit on sparse X or a fit on a dask array does not keep"
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
            self._expansion_coefficients(H),
            self.X_fit_,
            self.gamma_,
            start,
            self.preimage_max_iter,
            n_threads=self.n_threads,
        )
        return X

    def inverse_transform(self, X: ArrayLike) -> np.ndarray:
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

    def denoise(self, X: ArrayLike) -> np.ndarray:
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
        return self._preimage(eigen.finite_or_raise(self._hidden(X), "denoise"), X_start=X).astype(dtype, copy=False)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.pairwise = self._precomputed()
        tags.input_tags.sparse = (
            not self._precomputed() and self.kernel_storage != "matrix_free" and self.feature_map is None
        )
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags
