"""Kernel SVD as a restricted kernel machine (Suykens 2017 section 3.5, eqs. 3.29-3.32)."""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import scipy.linalg
from numpy.typing import ArrayLike
from scipy.sparse.linalg import ArpackNoConvergence, LinearOperator, svds
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin, _fit_context
from sklearn.utils import check_array, check_random_state
from sklearn.utils._param_validation import StrOptions
from sklearn.utils.extmath import svd_flip
from sklearn.utils.validation import _num_samples, check_is_fitted, validate_data

from rkm._utils import eigen
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
    check_matrix,
    check_memory,
    kernel_constraints,
    kernel_name_options,
)
from rkm._utils.warn import warn
from rkm.exceptions import ConvergenceWarning
from rkm.kernels import Kernel, kernel_matrix, kernel_product, model_kernel_spec

# Below this many singular values (min(n_x, n_z)) a full LAPACK SVD is as fast as ARPACK.
_DENSE_MAX_RANK = 200
# LAPACK's divide-and-conquer SVD (gesdd) needs about 7 k^2 workspace entries for k = min(n_x, n_z).
_GESDD_WORKSPACE_FACTOR = 7


def _fit_memory_bytes(n_x, n_z, n_components, dtype, solver, copies_gram):
    """Peak bytes of a fit besides the inputs: the cross-Gram (and a copy of a precomputed one, which must
    not be overwritten), the SVD's factors and workspace."""
    item = np.dtype(dtype).itemsize
    k = min(n_x, n_z)
    gram = n_x * n_z * (2 if copies_gram else 1)
    if solver == "dense":
        solver_entries = k * (n_x + n_z) + _GESDD_WORKSPACE_FACTOR * k * k
    else:  # ARPACK's Lanczos basis of 2 s + 1 vectors of length k, then U, V and G V
        solver_entries = (2 * n_components + 1) * k + 2 * n_components * (n_x + n_z)
    return item * (gram + solver_entries) + eigen.MEMORY_SLACK_BYTES


class KernelSVD(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Kernel singular value decomposition in the restricted kernel machine (RKM) formulation.

    Two data sources, x_1..x_N (``X``) and z_1..z_M (``Z``), with feature maps phi and psi, give the
    cross-Gram matrix G = [phi(x_i)^T psi(z_j)] (N x M). The stationary points of the RKM objective of
    Suykens 2017 eq. 3.29 (the SVD objective of eq. 2.17 with conjugated hidden features h_e, h_r) are
    the eigenpairs of eq. 3.31::

        [ 0            (1/eta) G ] [H_e^T]   [H_e^T]
        [ (1/eta) G^T  0         ] [H_r^T] = [H_r^T] Lambda

    With the SVD G = U diag(sigma) V^T, its nonzero eigenvalues are +sigma_k / eta, with eigenvector
    [u_k; v_k], and -sigma_k / eta, with [u_k; -v_k]. The model keeps the positive half, the s leading
    singular triplets: Lambda = diag(sigma_1..sigma_s) / eta, H_e^T = U and H_r^T = V (the eigenvectors
    of eq. 3.31 scaled by sqrt(2), so that H_e and H_r each have orthonormal rows). The mirrored
    eigenpairs carry no further information.

    New points are encoded by the dual model of eq. 3.32,
    e(x) = (1/eta) sum_j h_rj psi(z_j)^T phi(x) and r(z) = (1/eta) sum_i h_ei phi(x_i)^T psi(z),
    with hidden features h_e(x) = e(x) / lambda and h_r(z) = r(z) / lambda (eq. 3.30:
    W^T phi(x_i) = lambda h_ei). On the training points, e = lambda h_e and r = lambda h_r: the
    hidden features are the rows of ``H_e_`` and ``H_r_``.

    Feature maps: ``kernel="linear"`` takes phi(x) = C^T x and psi(z) = z with an optional compatibility
    matrix C (``compatibility``, d_x x d_z; identity when None), so G = X C Z^T. For a matrix A
    (N x M), X = A, Z = A^T and C = pinv(A) (so that A C A = A) give G = A: the model is the SVD of A
    (Suykens 2016; eq. 2.18). The other kernels of :mod:`rkm.kernels` take phi = psi, the feature map of
    k, between sources of the same dimension: G = [k(x_i, z_j)]. ``"precomputed"`` takes G itself.

    The second source is a keyword argument, ``fit(X, Z=Z)``: fit's second positional argument is
    scikit-learn's ``y``, which the model ignores, so that KernelSVD works as a transformer in a
    ``Pipeline`` (the one-source model Z = X). Both sources may be scipy.sparse CSR/CSC matrices (for
    every named kernel and a callable; the cross-Gram matrix is formed through sparse products); they are
    copied when the model keeps them.

    Parameters
    ----------
    n_components : int, default=None
        Number of singular triplets s, at most min(N, M). None keeps every singular value above the
        rounding level max(N, M) eps sigma_1 (the numerical rank of G, as ``numpy.linalg.matrix_rank``);
        singular values below it count as 0, and their hidden features are 0.
    kernel : {"rbf", "linear", "poly", "laplacian", "cosine", "tanimoto", "precomputed"}, Kernel or \
callable, default="rbf"
        Aliases "gaussian" (rbf) and "polynomial" (poly) are accepted. A callable is called as
        ``kernel(X, Z)`` and returns the cross-Gram matrix G (N x M), as :func:`rkm.kernels.kernel_matrix`
        documents (scikit-learn's SVC convention); the model then keeps both sources for the dual encoders. "precomputed": ``fit`` takes the
        cross-Gram G (N x M) as X, ``transform`` the kernel rows [phi(x)^T psi(z_j)] (n x M) and
        ``transform_z`` the rows [phi(x_i)^T psi(z)] (n x N). The SVD of a matrix A (eq. 2.18) is
        ``kernel="linear"`` with a compatibility matrix.
    gamma : float, default=None
        Kernel bandwidth for rbf/laplacian/poly; None means 1 / n_features.
    degree : float, default=3
        Degree of the poly kernel.
    coef0 : float, default=1.0
        Constant of the poly kernel.
    compatibility : array-like of shape (d_x, d_z), default=None
        The compatibility matrix C of the linear feature map phi(x) = C^T x (kernel="linear" only).
        None: C = I, which needs d_x = d_z.
    eta : float, default=1.0
        Regularization constant eta of eq. 3.29; ``eigenvalues_`` are sigma / eta.
    solver : {"auto", "dense", "arpack"}, default="auto"
        "dense": LAPACK's full SVD of G (``scipy.linalg.svd``). "arpack": the s leading triplets by
        ``scipy.sparse.linalg.svds`` (Lanczos on G^T G or G G^T, whichever is smaller; needs
        s < min(N, M)). "auto": "arpack" when s is given, min(N, M) > 200 and s <= min(N, M) / 5,
        else "dense".
    tol : float, default=None
        Relative accuracy of the ARPACK singular values (None: machine precision).
    max_iter : int, default=None
        Most ARPACK restarts (None: ARPACK's default). When ARPACK does not converge, the fit warns with a
        ``ConvergenceWarning`` and falls back to the dense SVD.
    scaling : {"hidden", "score"}, default="hidden"
        What ``transform`` and ``transform_z`` return: "hidden" the hidden features h = e / lambda (rows
        of ``H_e_`` and ``H_r_`` on training data); "score" the error variables e and r of eq. 3.32
        (lambda h on training data).
    n_threads : int, default=None
        Threads for the kernel core and BLAS (None: OpenMP's default; -1: all cores; 0 is an error).
    random_state : int, RandomState or None, default=None
        Seeds ARPACK's start vector.
    verbose : int, default=0
        When positive, ``fit`` prints the solver it chose and the time of the SVD.

    Attributes
    ----------
    singular_values_ : ndarray of shape (s,)
        Singular values sigma of the cross-Gram G, descending.
    eigenvalues_ : ndarray of shape (s,)
        The positive eigenvalues lambda = sigma / eta of eq. 3.31 (the diagonal of Lambda).
    H_e_ : ndarray of shape (N, s)
        Hidden features of the first source, H_e^T of eq. 3.31: the left singular vectors of G
        (orthonormal columns, each oriented so that its entry of largest magnitude is positive).
    H_r_ : ndarray of shape (M, s)
        Hidden features of the second source, H_r^T: the right singular vectors (signs matched to ``H_e_``).
    gamma_ : float or None
        The kernel bandwidth used.
    solver_ : str
        The solver used: "dense" or "arpack" ("dense" also after an ARPACK fallback).
    n_iter_ : int
        Products with G^T G (or G G^T) that ARPACK used; 1 for the dense SVD.
    n_features_in_ : int
        Features of X (for a precomputed kernel: M, the columns of G).
    n_features_z_in_ : int
        Features of Z (for a precomputed kernel: N, the length of the rows ``transform_z`` takes).
    W_, V_ : ndarray of shape (d_z, s)
        kernel="linear" only: the primal weights of eq. 3.30, W = (1/eta) sum_j psi(z_j) h_rj^T and
        V = (1/eta) sum_i phi(x_i) h_ei^T; e(x) = W^T C^T x and r(z) = V^T z (the primal model of eq. 3.32).
    compatibility_ : ndarray of shape (d_x, d_z) or None
        kernel="linear" only: the compatibility matrix C used.
    X_fit_, Z_fit_ : ndarray or sparse matrix
        Copies of the training sources (kernels other than linear and precomputed), for the dual model of
        eq. 3.32.

    Examples
    --------
    >>> import numpy as np
    >>> from rkm import KernelSVD
    >>> A = np.random.default_rng(0).standard_normal((6, 4))
    >>> model = KernelSVD(kernel="linear", compatibility=np.linalg.pinv(A)).fit(A, Z=A.T)
    >>> bool(np.allclose(model.singular_values_, np.linalg.svd(A, compute_uv=False)))
    True
    >>> X, Z = np.random.default_rng(1).standard_normal((2, 50, 3))
    >>> KernelSVD(2, gamma=0.5).fit(X, Z=Z).transform(X).shape
    (50, 2)
    >>> from sklearn.linear_model import Ridge
    >>> from sklearn.pipeline import make_pipeline
    >>> make_pipeline(KernelSVD(3, gamma=0.5), Ridge()).fit(X, Z[:, 0]).predict(X).shape
    (50,)
    """

    _parameter_constraints: dict = {
        "n_components": [None, *COUNT],
        **kernel_constraints(precomputed=True),
        "kernel": [kernel_name_options(precomputed=True), callable],
        "compatibility": ["array-like", None],
        "eta": POSITIVE,
        "solver": [StrOptions({"auto", "dense", "arpack"})],
        "tol": TOL,
        "max_iter": MAX_ITER,
        "scaling": [StrOptions({"hidden", "score"})],
        "n_threads": N_THREADS,
        "random_state": RANDOM_STATE,
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
        compatibility: ArrayLike | None = None,
        eta: float = 1.0,
        solver: str = "auto",
        tol: float | None = None,
        max_iter: int | None = None,
        scaling: str = "hidden",
        n_threads: int | None = None,
        random_state: int | np.random.RandomState | None = None,
        verbose: int = 0,
    ):
        self.n_components = n_components
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.compatibility = compatibility
        self.eta = eta
        self.solver = solver
        self.tol = tol
        self.max_iter = max_iter
        self.scaling = scaling
        self.n_threads = n_threads
        self.random_state = random_state
        self.verbose = verbose

    # ------------------------------------------------------------------ parameters

    def _kernel_spec(self, n_features):
        """(name, gamma, degree, coef0) of the kernel in use; name is "precomputed" or canonical."""
        return model_kernel_spec(self.kernel, self.gamma, self.degree, self.coef0, n_features)

    def _check_params_vs_input(self, name, n_x, n_z, d_x, d_z):
        """The rules that need the data: the compatibility matrix against the two sources (given X, Z of
        n_x x d_x and n_z x d_z; d_x = d_z = None for a precomputed cross-Gram), n_components against
        min(n_x, n_z), and ARPACK's truncation."""
        if d_x is not None and not (isinstance(name, str) and name == "linear"):
            if self.compatibility is not None:
                raise ValueError(f"compatibility: only for kernel='linear', got kernel={self.kernel!r}")
            if d_x != d_z:
                raise ValueError(
                    f"Z: has {d_z} features but X has {d_x}; kernel {name!r} compares the two sources in one "
                    "input space (use kernel='linear' with a compatibility matrix, or 'precomputed')"
                )
        elif d_x is not None and self.compatibility is None and d_x != d_z:
            raise ValueError(
                f"Z: has {d_z} features but X has {d_x}; give a compatibility matrix C of shape ({d_x}, {d_z})"
            )
        elif d_x is not None and self.compatibility is not None:
            shape = check_matrix(self.compatibility, "compatibility").shape
            if shape != (d_x, d_z):
                raise ValueError(f"compatibility: must have shape (d_x, d_z) = ({d_x}, {d_z}), got {shape}")
        rank = min(n_x, n_z)
        if self.n_components is not None and self.n_components > rank:
            raise ValueError(
                f"n_components: must be between 1 and min(n_samples of X, n_samples of Z) = {rank}, "
                f"got {self.n_components}"
            )
        if self.solver == "arpack" and (self.n_components is None or self.n_components >= rank):
            one = " (one sample: no truncated SVD exists)" if rank == 1 else ""
            raise ValueError(
                f"solver: 'arpack' needs n_components < min(n_samples of X, n_samples of Z) = {rank}{one}, "
                f"got n_components={self.n_components!r}; use solver='dense'"
            )

    def _resolve_solver(self, n_x, n_z):
        rank = min(n_x, n_z)
        if self.solver != "auto":
            return self.solver
        truncated = self.n_components is not None and rank > _DENSE_MAX_RANK and 5 * self.n_components <= rank
        return "arpack" if truncated else "dense"

    def _compatibility_matrix(self, name, dtype):
        """The compatibility matrix C in the sources' dtype (None: the identity), checked by
        ``_check_params_vs_input``."""
        if not (isinstance(name, str) and name == "linear") or self.compatibility is None:
            return None
        return check_matrix(self.compatibility, "compatibility").astype(dtype, copy=False)

    # ------------------------------------------------------------------ fitting

    def _precomputed(self):
        return isinstance(self.kernel, str) and self.kernel == "precomputed"

    def _validate_sources(self, X, Z):
        """(X, Z, kernel spec): the two sources in one float dtype, or X = G and Z = None when precomputed.
        Sources that the model may keep are copied (a precomputed G is not kept)."""
        precomputed = self._precomputed()
        X = validate_data(
            self,
            X,
            dtype=list(FLOAT_DTYPES),
            order="C",
            ensure_min_samples=1,
            accept_sparse=False if precomputed else ("csr", "csc"),
            copy=not precomputed,
        )
        spec = self._kernel_spec(X.shape[1])
        if spec[0] == "precomputed":
            if Z is not None:
                raise ValueError("Z: must be None with kernel='precomputed' (X is the cross-Gram matrix)")
            self.n_features_z_in_ = X.shape[0]
            return X, None, spec
        Z = X if Z is None else self._check_z(Z, copy=True)
        dtype = np.result_type(X.dtype, Z.dtype)
        X, Z = X.astype(dtype, copy=False), Z.astype(dtype, copy=False)
        self.n_features_z_in_ = Z.shape[1]
        return X, Z, spec

    def _mapped_x(self, X):
        """phi(x) = C^T x for every row of X (linear kernel; X itself when C is the identity)."""
        if self.compatibility_ is None:
            return X
        with blas_threads(thread_count(self.n_threads)):
            return X @ self.compatibility_

    @staticmethod
    def _check_y(y, n_samples):
        """y is ignored, but one of another length than X cannot be a target: it is a second source passed
        positionally (the signature before fit(X, Z=Z)), which would otherwise be dropped silently."""
        if y is None:
            return
        n_y = _num_samples(y)
        if n_y != n_samples:
            raise ValueError(
                f"y: has {n_y} samples but X has {n_samples}; KernelSVD ignores y (scikit-learn's target) and takes "
                "the second source by keyword: fit(X, Z=Z)"
            )

    @staticmethod
    def _check_z(Z, copy=False):
        """The second source: 2-D, finite, float32/float64, dense or CSR/CSC."""
        return check_array(
            Z, accept_sparse=("csr", "csc"), dtype=list(FLOAT_DTYPES), order="C", copy=copy, input_name="Z"
        )

    def _dense_svd(self, G, overwrite):
        """All singular triplets by LAPACK. G^T is Fortran-ordered, so LAPACK decomposes it in place when G
        may be overwritten (no second N x M array): G^T = V S U^T."""
        with blas_threads(thread_count(self.n_threads)):
            V, sigma, Ut = scipy.linalg.svd(G.T, full_matrices=False, overwrite_a=overwrite, check_finite=False)
        return Ut.T, sigma, V, 1

    def _arpack_svd(self, G, n_components):
        """The leading singular triplets by ARPACK from a seeded start vector, counting the products."""
        n_products = 0

        def count(product):
            def counted(B):
                nonlocal n_products
                n_products += 1
                return product(B)

            return counted

        multiply, multiply_transposed = count(G.__matmul__), count(G.T.__matmul__)
        operator = LinearOperator(
            G.shape,
            matvec=multiply,
            rmatvec=multiply_transposed,
            matmat=multiply,
            rmatmat=multiply_transposed,
            dtype=G.dtype,
        )
        v0 = check_random_state(self.random_state).uniform(-1.0, 1.0, min(G.shape)).astype(G.dtype)
        with blas_threads(thread_count(self.n_threads)):
            U, sigma, Vt = svds(operator, k=n_components, v0=v0, tol=self.tol or 0.0, maxiter=self.max_iter)
        order = np.argsort(sigma)[::-1]
        # Each ARPACK step multiplies by G and by G^T: count steps of G^T G.
        return U[:, order], sigma[order], Vt[order].T, max(1, n_products // 2)

    def _svd(self, G, n_components, overwrite):
        if self.solver_ == "arpack":
            try:
                return self._arpack_svd(G, n_components)
            except ArpackNoConvergence:
                warn(
                    f"KernelSVD: ARPACK did not converge within max_iter={self.max_iter} restarts; "
                    "falling back to the dense SVD",
                    ConvergenceWarning,
                )
                self.solver_ = "dense"
        return self._dense_svd(G, overwrite)

    @staticmethod
    def _numerically_positive(sigma, n_rows, n_cols, dtype):
        """Singular values with those below the rounding level max(N, M) eps sigma_1 (as
        ``numpy.linalg.matrix_rank``) set to zero: their hidden features are then 0 instead of noise / noise."""
        threshold = max(n_rows, n_cols) * np.finfo(dtype).eps * sigma.max(initial=0.0)
        return np.where(sigma > threshold, sigma, 0.0).astype(sigma.dtype)

    def _store(self, U, sigma, V, dtype):
        sigma = self._numerically_positive(sigma, U.shape[0], V.shape[0], dtype)
        s = int(np.count_nonzero(sigma)) if self.n_components is None else self.n_components
        U, Vt = svd_flip(U[:, :s], V[:, :s].T)
        with np.errstate(over="ignore"):
            eigenvalues = sigma[:s].astype(np.float64) / self.eta
        if not np.all(np.isfinite(eigenvalues)):
            raise ValueError(f"eta: the eigenvalues sigma / eta overflow (eta = {self.eta!r}); use a larger eta")
        self.singular_values_ = sigma[:s].astype(dtype)
        self.eigenvalues_ = eigenvalues.astype(dtype)
        self.H_e_ = np.ascontiguousarray(U, dtype=dtype)
        self.H_r_ = np.ascontiguousarray(Vt.T, dtype=dtype)

    def _store_model(self, X_phi, Z, name):
        """What the encoders of eq. 3.32 need: the primal weights W, V of eq. 3.30 (linear kernel, from the
        mapped first source X_phi = X C), or the two sources (the dual model of the other kernels)."""
        for attribute in ("W_", "V_", "X_fit_", "Z_fit_"):
            if hasattr(self, attribute):
                delattr(self, attribute)
        if isinstance(name, str) and name == "linear":
            with blas_threads(thread_count(self.n_threads)):
                self.W_ = np.asarray(Z.T @ self.H_r_) / self.eta
                self.V_ = np.asarray(X_phi.T @ self.H_e_) / self.eta
        elif not (isinstance(name, str) and name == "precomputed"):
            self.X_fit_, self.Z_fit_ = X_phi, Z

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: ArrayLike, y: None = None, *, Z: ArrayLike | None = None) -> KernelSVD:
        """Fit the model to the two sources (Suykens 2017 eq. 3.31).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (N, d_x)
            The first source x_1..x_N; for kernel="precomputed" the cross-Gram G (N x M) (dense).
        y : ignored
            scikit-learn's target, so that the model fits in a Pipeline. The second source is ``Z``; a y
            whose length differs from X's raises ValueError (a second source passed positionally, as before
            ``Z`` became keyword-only).
        Z : {array-like, sparse matrix} of shape (M, d_z), default=None
            Keyword-only: the second source z_1..z_M. None: Z = X, one source: the symmetric case, where the
            model is the uncentred kernel PCA of X (section 2.2.2). Must be None for kernel="precomputed".

        Returns
        -------
        self
        """
        progress = Progress(type(self).__name__, self.verbose)
        X, Z, spec = self._validate_sources(X, Z)
        self._check_y(y, X.shape[0])
        name = spec[0]
        self.gamma_ = spec[1]
        n_x, n_z = X.shape if name == "precomputed" else (X.shape[0], Z.shape[0])
        d_x, d_z = (None, None) if name == "precomputed" else (X.shape[1], Z.shape[1])
        self._check_params_vs_input(name, n_x, n_z, d_x, d_z)
        self.compatibility_ = self._compatibility_matrix(name, X.dtype)
        self.solver_ = self._resolve_solver(n_x, n_z)
        mapped_entries = 0 if self.compatibility_ is None else n_x * self.compatibility_.shape[1]
        check_memory(
            _fit_memory_bytes(n_x, n_z, self.n_components, X.dtype, self.solver_, name == "precomputed")
            + mapped_entries * X.dtype.itemsize,
            "X",
            f"a kernel SVD fit of a {n_x} x {n_z} cross-Gram matrix ({self.solver_} SVD, {X.dtype.name})",
            advice="use fewer samples, float32, or a small n_components (ARPACK)",
        )
        progress(f"solver {self.solver_!r} for a {n_x} x {n_z} cross-Gram matrix ({X.dtype.name})")
        if name == "precomputed":
            G = X_phi = X
        else:
            X_phi = self._mapped_x(X) if isinstance(name, str) and name == "linear" else X
            G = kernel_matrix(X_phi, Z, *spec, n_threads=self.n_threads)
        started = time.perf_counter()
        U, sigma, V, self.n_iter_ = self._svd(G, self.n_components, overwrite=name != "precomputed")
        products = f" ({self.n_iter_} products with G^T G)" if self.solver_ == "arpack" else ""
        progress(f"{self.solver_} SVD in {time.perf_counter() - started:.2f} s{products}")
        self._store(U, sigma, V, X.dtype)
        self._store_model(X_phi, Z, name)
        return self

    # ------------------------------------------------------------------ encoding

    @property
    def _n_features_out(self):
        return self.eigenvalues_.shape[0]

    def _to_output(self, scores):
        """Error variables e (or r) to the convention of ``scaling``: h = e / lambda, 0 where lambda = 0."""
        if self.scaling == "score":
            return scores
        hidden = np.divide(scores, self.eigenvalues_, out=np.zeros_like(scores), where=self.eigenvalues_ > 0)
        return eigen.finite_or_raise(hidden, "transform")

    def _validate_z(self, Z):
        Z = check_matrix(Z, "Z") if self._precomputed() else self._check_z(Z)
        if Z.shape[1] != self.n_features_z_in_:
            what = "kernel rows of length" if self._precomputed() else "features:"
            raise ValueError(
                f"Z: has {Z.shape[1]} columns, but KernelSVD was fitted with {what} {self.n_features_z_in_}"
            )
        return Z

    def _scores_x(self, X):
        """e(x) = (1/eta) sum_j h_rj psi(z_j)^T phi(x) (eq. 3.32)."""
        name, gamma, degree, coef0 = self._kernel_spec(self.n_features_in_)
        if self._precomputed():
            return (X @ self.H_r_) / self.eta
        if isinstance(name, str) and name == "linear":  # the primal model e = W^T phi(x) with phi(x) = C^T x
            with blas_threads(thread_count(self.n_threads)):
                return np.asarray(self._mapped_x(X) @ self.W_)
        product = kernel_product(X, self.Z_fit_, self.H_r_, name, gamma, degree, coef0, n_threads=self.n_threads)
        return product / self.eta

    def _scores_z(self, Z):
        """r(z) = (1/eta) sum_i h_ei phi(x_i)^T psi(z) (eq. 3.32)."""
        name, gamma, degree, coef0 = self._kernel_spec(self.n_features_in_)
        if self._precomputed():
            return (Z @ self.H_e_) / self.eta
        if isinstance(name, str) and name == "linear":  # the primal model r = V^T psi(z) with psi(z) = z
            with blas_threads(thread_count(self.n_threads)):
                return np.asarray(Z @ self.V_)
        product = kernel_product(Z, self.X_fit_, self.H_e_, name, gamma, degree, coef0, n_threads=self.n_threads)
        return product / self.eta

    def _encode(self, A, scores):
        """Encodes A (already validated) by `scores`; float32 only when both A and the model are."""
        dtype = np.result_type(A.dtype, self.H_e_.dtype)
        return self._to_output(scores(A.astype(self.H_e_.dtype, copy=False))).astype(dtype, copy=False)

    def transform(self, X: ArrayLike) -> np.ndarray:
        """Encode points of the first source (eq. 3.32): hidden features h_e or error variables e.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, d_x)
            For kernel="precomputed": the kernel rows [phi(x)^T psi(z_j)] of shape (n_samples, M).

        Returns
        -------
        ndarray of shape (n_samples, n_components)
        """
        check_is_fitted(self)
        sparse = False if self._precomputed() else ("csr", "csc")
        X = validate_data(self, X, dtype=list(FLOAT_DTYPES), order="C", reset=False, accept_sparse=sparse)
        return self._encode(X, self._scores_x)

    def transform_z(self, Z: ArrayLike) -> np.ndarray:
        """Encode points of the second source (eq. 3.32): hidden features h_r or error variables r.

        Parameters
        ----------
        Z : array-like of shape (n_samples, d_z)
            For kernel="precomputed": the kernel rows [phi(x_i)^T psi(z)] of shape (n_samples, N).

        Returns
        -------
        ndarray of shape (n_samples, n_components)
        """
        check_is_fitted(self)
        return self._encode(self._validate_z(Z), self._scores_z)

    @_fit_context(prefer_skip_nested_validation=True)
    def fit_transform(self, X: ArrayLike, y: None = None, *, Z: ArrayLike | None = None) -> np.ndarray:
        """Fit and return the hidden features of the first source (``H_e_``, scaled per ``scaling``).

        Equal to ``fit(X, Z=Z).transform(X)`` up to rounding; components with lambda = 0 give 0 there. y is
        ignored (scikit-learn's target, as in ``fit``).
        """
        self.fit(X, y, Z=Z)
        return self._to_output(self.H_e_ * self.eigenvalues_)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # A precomputed cross-Gram (N x M) is not pairwise: its columns belong to the second source, and
        # cross-validation splits its rows only.
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        tags.input_tags.sparse = not self._precomputed()
        return tags
