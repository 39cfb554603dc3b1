"""Kernel functions and kernel matrices.

Kernels by name: "linear", "poly" (alias "polynomial"), "rbf" (alias "gaussian"), "laplacian", "cosine" and
"tanimoto". Canonical parameters follow scikit-learn: ``rbf`` is exp(-gamma ||x - y||^2), ``laplacian`` is
exp(-gamma ||x - y||_1), ``poly`` is (gamma x^T y + coef0)^degree; ``gamma=None`` means 1 / n_features.
The papers write the Gaussian bandwidth differently; :meth:`RBF.from_sigma` maps each convention:

==================================  ==========================  ======================
convention                          kernel                      gamma
==================================  ==========================  ======================
``"sklearn"`` (KAE, scikit-learn)   exp(-gamma d^2)             gamma
``"suykens"`` (Suykens 2017,        exp(-d^2 / sigma^2)         1 / sigma^2
LS-SVMlab ``sig2``)
``"gaussian"`` (Constr-DRKM code,   exp(-d^2 / (2 sigma^2))     1 / (2 sigma^2)
Gen-RKM, Mika et al. pre-images)
==================================  ==========================  ======================

For example Constr-DRKM's sigma^2 = 50 on MNIST in [0, 1] is ``RBF.from_sigma(sigma2=50,
convention="gaussian")``, i.e. gamma = 0.01.

Callable kernels and sparse input
---------------------------------
:func:`kernel_matrix` and :func:`kernel_product` also take

- ``kernel=callable``: a function called **once per kernel matrix** as ``kernel(X, Y)`` with the validated
  inputs (Y is X itself when Y is None), returning the (n_samples_X, n_samples_Y) Gram matrix: the convention
  of ``sklearn.svm.SVC(kernel=callable)``. (scikit-learn's ``KernelPCA`` / ``pairwise_kernels`` call a
  callable per pair of rows instead; wrap such a function ``f(x, y) -> float`` as
  ``functools.partial(sklearn.metrics.pairwise_kernels, metric=f)``.) The result is checked (shape, finite,
  numeric) and copied, so a cached array of the caller is never changed by in-place centring;
- scipy.sparse X and Y (CSR or CSC; other sparse formats are converted to CSR) for every named kernel:
  linear, poly, cosine and tanimoto through one sparse product X Y^T, rbf through squared norms and that
  product, laplacian through scikit-learn's sparse L1 distances. The result is a dense array. A callable
  receives sparse inputs unchanged.

:func:`kernel_gradient` takes neither (it raises ValueError naming the argument).
"""

import numbers
from dataclasses import asdict, dataclass

import numpy as np
import scipy.sparse as sp
from sklearn.metrics.pairwise import manhattan_distances
from sklearn.utils import check_array

from rkm import _core
from rkm._kernel_table import ALIASES, KERNEL_NAMES, KERNELS, KernelInfo, names_with  # noqa: F401 (re-exported)
from rkm._utils import device as _device
from rkm._utils.device import check_device, require_cuda
from rkm._utils.threads import blas_threads, check_n_threads
from rkm._utils.validation import FLOAT_DTYPES, check_fits_in_memory, check_matrix, check_positive

_GAMMA_KERNELS = names_with("has_gamma")
# Rows of X per block when a callable or sparse kernel product is formed from kernel matrices (kernel_product).
_PRODUCT_BLOCK_BYTES = 64 * 2**20


def is_callable_kernel(kernel):
    """Whether `kernel` is a user function kernel(X, Y) -> Gram matrix (a :class:`Kernel` instance is not)."""
    return callable(kernel) and not isinstance(kernel, Kernel)


def _kernel_input(A, name):
    """A (dense or scipy.sparse CSR/CSC) checked for a callable or sparse kernel: float32/float64, finite, 2-D."""
    return check_array(
        A, accept_sparse=("csr", "csc"), dtype=list(FLOAT_DTYPES), order="C", input_name=name, ensure_min_samples=1
    )


def _validated_general(arrays, required=("X",)):
    """Validate the arrays of a callable or sparse kernel call; returns them and their common dtype."""
    for key in required:
        if arrays[key] is None:
            raise ValueError(f"{key}: an array is required, got None")
    checked = {}
    for key, A in arrays.items():
        if A is None:
            checked[key] = None
        elif key in ("X", "Y"):
            checked[key] = _kernel_input(A, key)
        else:
            checked[key] = check_matrix(A, key)
    X, Y = checked["X"], checked.get("Y")
    if Y is not None and Y.shape[1] != X.shape[1]:
        raise ValueError(f"Y: has {Y.shape[1]} features but X has {X.shape[1]}")
    dtype = np.result_type(*(A.dtype for A in checked.values() if A is not None))
    return checked, dtype


def _callable_matrix(kernel, X, Y, dtype):
    """K = kernel(X, Y or X), checked: numeric, 2-D of shape (n_X, n_Y), finite; a copy in `dtype`."""
    Y_arg = X if Y is None else Y
    K = kernel(X, Y_arg)
    if sp.issparse(K):
        K = K.toarray()
    try:
        K = np.array(K, dtype=dtype, order="C", copy=True)
    except (TypeError, ValueError) as error:
        raise ValueError(f"kernel: the callable must return a numeric array, got {type(K).__name__}") from error
    expected = (X.shape[0], Y_arg.shape[0])
    if K.shape != expected:
        raise ValueError(
            f"kernel: the callable must return the Gram matrix of shape (n_samples_X, n_samples_Y) = {expected}, "
            f"got shape {K.shape}"
        )
    if not np.all(np.isfinite(K)):
        raise ValueError("kernel: the callable returned NaN or infinite entries")
    return K


def _row_squared_norms(A):
    if sp.issparse(A):
        return np.asarray(A.multiply(A).sum(axis=1), dtype=np.float64).ravel()
    return np.einsum("ij,ij->i", A, A, dtype=np.float64)


def _as_float64(A):
    return A.astype(np.float64) if A.dtype != np.float64 else A


def _int32_indexed(A):
    """A sparse A as CSR with 32-bit indices (scikit-learn's sparse L1 distances take no others)."""
    if not sp.issparse(A):
        return A
    A = A.tocsr()
    if A.indices.dtype != np.int32 or A.indptr.dtype != np.int32:
        if A.nnz >= 2**31 or A.shape[1] >= 2**31:
            raise ValueError("X: the laplacian kernel of sparse input needs fewer than 2**31 stored entries")
        A = sp.csr_matrix((A.data, A.indices.astype(np.int32), A.indptr.astype(np.int32)), shape=A.shape)
    return A


def _sparse_matrix(name, gamma, degree, coef0, X, Y, dtype):
    """A named kernel of sparse (or mixed sparse and dense) inputs, computed in float64 from X Y^T."""
    symmetric = Y is None
    X = _as_float64(X)
    Y = X if symmetric else _as_float64(Y)
    if name == "laplacian":
        K = np.exp(-gamma * manhattan_distances(_int32_indexed(X), _int32_indexed(Y)))
    else:
        G = X @ Y.T
        G = G.toarray() if sp.issparse(G) else np.asarray(G)
        if name == "linear":
            K = G
        elif name == "poly":
            base = gamma * G + coef0
            if float(degree) != int(degree) and base.min(initial=0.0) < 0:
                raise ValueError(
                    f"degree: a non-integer degree ({degree}) needs gamma x^T y + coef0 >= 0, but some pairs of "
                    "samples give a negative base; use an integer degree or a larger coef0"
                )
            with np.errstate(over="ignore", invalid="ignore"):
                K = base**degree
        else:
            sq_x = _row_squared_norms(X)
            sq_y = sq_x if symmetric else _row_squared_norms(Y)
            if name == "rbf":
                d2 = np.maximum(sq_x[:, None] + sq_y[None, :] - 2.0 * G, 0.0)
                if symmetric:
                    np.fill_diagonal(d2, 0.0)
                K = np.exp(-gamma * d2)
            elif name == "cosine":
                norms = np.outer(np.sqrt(sq_x), np.sqrt(sq_y))
                K = np.divide(G, norms, out=np.zeros_like(G), where=norms > 0)
            else:  # tanimoto: x^T y / (|x|^2 + |y|^2 - x^T y); two empty fingerprints give 0
                denominator = sq_x[:, None] + sq_y[None, :] - G
                K = np.divide(G, denominator, out=np.zeros_like(G), where=denominator > 0)
    with np.errstate(over="ignore"):
        K = K.astype(dtype, copy=False)
    if not np.all(np.isfinite(K)):
        raise ValueError(
            f"X: the {name} kernel overflows {np.dtype(dtype).name} (some entries are infinite or NaN); "
            "scale the inputs down"
        )
    return np.ascontiguousarray(K)


def canonical_kernel_name(kernel, extra_names=()):
    """Return the canonical name of a kernel given by name; the aliases "polynomial" and "gaussian" give
    "poly" and "rbf". `extra_names` (such as "precomputed") are further names the caller accepts."""
    if not isinstance(kernel, str):
        raise ValueError(f"kernel: must be a string or an rkm.kernels.Kernel, got {kernel!r}")
    name = ALIASES.get(kernel, kernel)
    if name not in KERNEL_NAMES + tuple(extra_names):
        choices = ", ".join(KERNEL_NAMES + tuple(extra_names))
        aliases = ", ".join(f"{alias} = {name}" for alias, name in ALIASES.items())
        raise ValueError(f"kernel: unknown kernel {kernel!r}; choose one of {choices} (aliases: {aliases})")
    return name


def resolve_gamma(kernel, gamma, n_features):
    """The gamma actually used: 1 / n_features when None, validated otherwise."""
    if gamma is None:
        return 1.0 / max(n_features, 1)
    if kernel == "poly":
        if isinstance(gamma, bool) or not isinstance(gamma, numbers.Real) or not np.isfinite(gamma):
            raise ValueError(f"gamma: must be a finite number, got {gamma!r}")
        return float(gamma)
    return check_positive(gamma, "gamma")


def _check_kernel_arguments(kernel, degree, coef0):
    if not KERNELS[kernel].has_degree:
        return
    if isinstance(degree, bool) or not isinstance(degree, numbers.Real) or not np.isfinite(degree) or degree < 0:
        raise ValueError(f"degree: must be a non-negative number, got {degree!r}")
    if isinstance(coef0, bool) or not isinstance(coef0, numbers.Real) or not np.isfinite(coef0):
        raise ValueError(f"coef0: must be a finite number, got {coef0!r}")


def kernel_spec(kernel, gamma=None, degree=3, coef0=1.0, n_features=1, allowed=KERNEL_NAMES):
    """(name, gamma, degree, coef0) of a kernel given by name or as a :class:`Kernel` (whose own parameters
    then apply): the canonical name, one of `allowed`; gamma resolved (1 / n_features when None; None for the
    kernels without one); degree and coef0 checked. The one place models resolve their kernel parameters."""
    if isinstance(kernel, Kernel):
        name, params = kernel.name, kernel.params()
        gamma, degree, coef0 = params.get("gamma"), params.get("degree", 3), params.get("coef0", 1.0)
    else:
        name = canonical_kernel_name(kernel)
    if name not in allowed:
        raise ValueError(f"kernel: must be one of {', '.join(allowed)}, got {kernel!r}")
    _check_kernel_arguments(name, degree, coef0)
    gamma = resolve_gamma(name, gamma, n_features) if name in _GAMMA_KERNELS else None
    return name, gamma, degree, coef0


def model_kernel_spec(kernel, gamma, degree, coef0, n_features):
    """(name, gamma, degree, coef0) of an estimator's kernel parameters: a :class:`Kernel` (its own parameters
    apply), "precomputed" (returned as ("precomputed", None, None, None)), or a kernel name with the
    estimator's gamma, degree and coef0, resolved by :func:`kernel_spec`. A callable kernel (see
    :func:`kernel_matrix`) comes back in the name's place as (kernel, None, None, None): pass it on to
    :func:`kernel_matrix` / :func:`kernel_product`, which call it; the compiled core cannot."""
    if isinstance(kernel, Kernel):
        return kernel_spec(kernel, n_features=n_features)
    if is_callable_kernel(kernel):
        return kernel, None, None, None
    name = canonical_kernel_name(kernel, extra_names=("precomputed",))
    if name == "precomputed":
        return "precomputed", None, None, None
    return kernel_spec(name, gamma, degree, coef0, n_features)


def _validated(kernel, gamma, degree, coef0, n_threads, arrays, required=("X",)):
    """Validate a kernel call: canonical name, resolved gamma, n_threads, and the named 2-D arrays.

    `arrays` maps argument names to arrays (None entries stay None, except the `required` ones, which raise);
    the first is X. The arrays come back
    C-contiguous in one common float dtype, with matching feature counts for X and Y.
    """
    canonical_kernel_name(kernel)  # a bad name is reported before bad arrays
    n_threads = check_n_threads(n_threads)
    for key in required:
        if arrays[key] is None:
            raise ValueError(f"{key}: an array is required, got None")
    checked = {key: None if A is None else check_matrix(A, key) for key, A in arrays.items()}
    X, Y = checked["X"], checked.get("Y")
    if Y is not None and Y.shape[1] != X.shape[1]:
        raise ValueError(f"Y: has {Y.shape[1]} features but X has {X.shape[1]}")
    dtype = np.result_type(*(A.dtype for A in checked.values() if A is not None))
    checked = {key: None if A is None else A.astype(dtype, copy=False) for key, A in checked.items()}
    name, gamma, _, _ = kernel_spec(kernel, gamma, degree, coef0, X.shape[1])
    return name, 1.0 if gamma is None else gamma, n_threads, checked


def kernel_matrix(
    X, Y=None, kernel="rbf", gamma=None, degree=3, coef0=1.0, n_threads=None, lower_only=False, *, device="cpu"
):
    """Kernel matrix K(X, Y), or K(X, X) built from one triangle when Y is None.

    Parameters
    ----------
    X : {array-like, scipy.sparse matrix} of shape (n_samples_X, n_features)
        Sparse CSR/CSC input is accepted by every named kernel and passed as is to a callable.
    Y : {array-like, scipy.sparse matrix} of shape (n_samples_Y, n_features), default=None
    kernel : {"linear", "poly", "rbf", "laplacian", "cosine", "tanimoto"}, Kernel or callable, default="rbf"
        Aliases "gaussian" (rbf) and "polynomial" (poly) are accepted. A :class:`Kernel` instance brings
        its own parameters (gamma, degree, coef0 are then ignored). A callable is called once as
        ``kernel(X, Y)`` (``kernel(X, X)`` when Y is None) and must return the Gram matrix of shape
        (n_samples_X, n_samples_Y), finite (ValueError naming ``kernel`` otherwise); gamma, degree, coef0
        and n_threads do not apply to it (see the module docstring).
    gamma : float, default=None
        Canonical bandwidth (see the module docstring); None means 1 / n_features.
    degree, coef0 : float
        Polynomial kernel parameters.
    n_threads : int, default=None
        Threads for the core and the BLAS library (None: OpenMP's default; -1: all cores).
    lower_only : bool, default=False
        With Y=None, write only the lower triangle and leave the strict upper triangle unspecified: for
        consumers that read one triangle (``center_kernel(..., lower_only=True)``, the Krylov solver),
        it saves the mirrored writes.
    device : {"cpu", "cuda", "cuda:N"}, default="cpu"
        Where K is computed. "cuda" runs on an NVIDIA GPU (rkm built with ``-Ccmake.define.RKM_CUDA=ON``):
        named kernels and dense arrays only; n_threads and lower_only do not apply. NumPy in, NumPy out; or
        CuPy arrays / PyTorch CUDA tensors in (float32 or float64, C-contiguous, all on one device, which
        ``device`` must name), read in place through DLPack, and K out as the same library's array on that
        device, never copied to the host.

    Returns
    -------
    K : ndarray of shape (n_samples_X, n_samples_Y)
        float32 when the inputs are float32, float64 otherwise.

    Raises
    ------
    ValueError
        For invalid parameters or non-finite inputs, and when the kernel itself is not finite: entries that
        overflow the dtype, or a poly kernel with a non-integer degree where some gamma x^T y + coef0 < 0.
    """
    cuda_device = check_device(device)
    if _device.cuda_tensor_device(X) is not None:
        return _tensor_kernel_matrix(X, Y, kernel, gamma, degree, coef0, device)
    if isinstance(kernel, Kernel):
        if cuda_device is not None:
            return kernel_matrix(X, Y, kernel.name, device=device, **kernel.params())
        return kernel(X, Y, n_threads=n_threads)
    if is_callable_kernel(kernel) or sp.issparse(X) or sp.issparse(Y):
        if cuda_device is not None:
            raise ValueError("device: 'cuda' takes a named kernel and dense arrays (not a callable or sparse input)")
        return _general_kernel_matrix(X, Y, kernel, gamma, degree, coef0, n_threads)
    name, gamma, n_threads, arrays = _validated(kernel, gamma, degree, coef0, n_threads, {"X": X, "Y": Y})
    X, Y = arrays["X"], arrays["Y"]
    n_y = X.shape[0] if Y is None else Y.shape[0]
    check_fits_in_memory((X.shape[0], n_y), X.dtype, "X")
    if cuda_device is not None:
        require_cuda(cuda_device, cublas=True)
        return _core.cuda_kernel_matrix(X, Y, name, gamma, float(degree), float(coef0), cuda_device)
    # The core runs one single-threaded GEMM per band on each of its own threads.
    with blas_threads(1):
        return _core.kernel_matrix(X, Y, name, gamma, float(degree), float(coef0), n_threads, lower_only)


def _tensor_spec(kernel, gamma, degree, coef0, n_features):
    """(name, gamma, degree, coef0) of a named kernel (or Kernel) for CUDA tensors, checked as for NumPy input."""
    if isinstance(kernel, Kernel):
        params = {"gamma": None, "degree": 3, "coef0": 1.0, **kernel.params()}
        return _tensor_spec(kernel.name, params["gamma"], params["degree"], params["coef0"], n_features)
    if is_callable_kernel(kernel):
        raise ValueError("device: 'cuda' takes a named kernel and dense arrays (not a callable or sparse input)")
    name, gamma, degree, coef0 = kernel_spec(kernel, gamma, degree, coef0, n_features)
    return name, 1.0 if gamma is None else gamma, float(degree), float(coef0)


def _tensor_kernel_matrix(X, Y, kernel, gamma, degree, coef0, device):
    """kernel_matrix for CuPy arrays or PyTorch CUDA tensors: computed on their device, returned there."""
    index = _device.check_cuda_tensors(device, {"X": X, "Y": Y})
    spec = _tensor_spec(kernel, gamma, degree, coef0, X.shape[1])
    capsule = _core.cuda_kernel_matrix_dlpack(
        _device.dlpack_capsule(X), None if Y is None else _device.dlpack_capsule(Y), *spec
    )
    return _device.tensor_like(capsule, index, X)


def _general_kernel_matrix(X, Y, kernel, gamma, degree, coef0, n_threads):
    """kernel_matrix for a callable kernel or sparse inputs (computed in Python, not by the core)."""
    if not is_callable_kernel(kernel):
        canonical_kernel_name(kernel)  # a bad name is reported before bad arrays
    check_n_threads(n_threads)
    arrays, dtype = _validated_general({"X": X, "Y": Y})
    X, Y = arrays["X"], arrays["Y"]
    n_y = X.shape[0] if Y is None else Y.shape[0]
    check_fits_in_memory((X.shape[0], n_y), np.float64, "X")
    if is_callable_kernel(kernel):
        return _callable_matrix(kernel, X, Y, dtype)
    name, gamma, degree, coef0 = kernel_spec(kernel, gamma, degree, coef0, X.shape[1])
    return _sparse_matrix(name, 1.0 if gamma is None else gamma, degree, coef0, X, Y, dtype)


def _general_kernel_product(X, Y, B, kernel, gamma, degree, coef0, n_threads):
    """kernel_product for a callable kernel or sparse inputs: K(X_block, Y) @ B by blocks of rows of X."""
    if not is_callable_kernel(kernel):
        canonical_kernel_name(kernel)
    arrays, dtype = _validated_general({"X": X, "Y": Y, "B": B}, required=("X", "B"))
    X, Y, B = arrays["X"], arrays["Y"], arrays["B"]
    n_y = X.shape[0] if Y is None else Y.shape[0]
    if B.shape[0] != n_y:
        raise ValueError(f"B: must have one row per sample of {'X' if Y is None else 'Y'} ({n_y}), got {B.shape[0]}")
    Y = X if Y is None else Y
    rows = max(1, _PRODUCT_BLOCK_BYTES // (8 * max(n_y, 1)))
    out = np.empty((X.shape[0], B.shape[1]), dtype=dtype)
    for start in range(0, X.shape[0], rows):
        K = _general_kernel_matrix(X[start : start + rows], Y, kernel, gamma, degree, coef0, n_threads)
        out[start : start + rows] = K @ B
    return out


def kernel_product(X, Y=None, B=None, kernel="rbf", gamma=None, degree=3, coef0=1.0, n_threads=None, *, device="cpu"):
    """K(X, Y) @ B without storing K: the kernel is evaluated a tile at a time.

    Memory is that of X, Y and B (in double) plus one tile and one accumulator of the result per thread,
    instead of the n_samples_X x n_samples_Y matrix. With Y None the symmetric K(X, X) is evaluated one
    triangle at a time, each tile serving two products. The products of matrix-free kernel PCA.

    Parameters
    ----------
    X : {array-like, scipy.sparse matrix} of shape (n_samples_X, n_features)
    Y : {array-like, scipy.sparse matrix} of shape (n_samples_Y, n_features), default=None (Y = X)
    B : array-like of shape (n_samples_Y, n_columns)
    kernel, gamma, degree, coef0, n_threads : as in :func:`kernel_matrix`
        A callable kernel or sparse X / Y is evaluated in Python by blocks of rows of X (each block's
        kernel matrix then multiplies B), not tile by tile in the core.
    device : {"cpu", "cuda", "cuda:N"}, default="cpu"
        "cuda": K is evaluated on an NVIDIA GPU a band of rows at a time and multiplied there (cuBLAS, in the
        inputs' precision); named kernels and dense arrays only; n_threads does not apply. NumPy in, NumPy
        out, or CuPy / PyTorch CUDA tensors in and out without a host copy, as in :func:`kernel_matrix`.

    Returns
    -------
    ndarray of shape (n_samples_X, n_columns), float32 when all inputs are float32.
    """
    cuda_device = check_device(device)
    if _device.cuda_tensor_device(X) is not None:
        index = _device.check_cuda_tensors(device, {"X": X, "Y": Y, "B": B})
        spec = _tensor_spec(kernel, gamma, degree, coef0, X.shape[1])
        capsules = [None if A is None else _device.dlpack_capsule(A) for A in (X, Y, B)]
        return _device.tensor_like(_core.cuda_kernel_product_dlpack(*capsules, *spec), index, X)
    if isinstance(kernel, Kernel):
        return kernel_product(X, Y, B, kernel.name, n_threads=n_threads, device=device, **kernel.params())
    if is_callable_kernel(kernel) or sp.issparse(X) or sp.issparse(Y):
        if cuda_device is not None:
            raise ValueError("device: 'cuda' takes a named kernel and dense arrays (not a callable or sparse input)")
        return _general_kernel_product(X, Y, B, kernel, gamma, degree, coef0, n_threads)
    name, gamma, n_threads, arrays = _validated(
        kernel, gamma, degree, coef0, n_threads, {"X": X, "Y": Y, "B": B}, required=("X", "B")
    )
    X, Y, B = arrays["X"], arrays["Y"], arrays["B"]
    n_y = X.shape[0] if Y is None else Y.shape[0]
    if B.shape[0] != n_y:
        raise ValueError(f"B: must have one row per sample of {'X' if Y is None else 'Y'} ({n_y}), got {B.shape[0]}")
    if cuda_device is not None:
        require_cuda(cuda_device, cublas=True)
        return _core.cuda_kernel_product(X, Y, B, name, gamma, float(degree), float(coef0), cuda_device)
    # The core runs single-threaded GEMMs on each of its own threads.
    with blas_threads(1):
        return _core.kernel_product(X, Y, B, name, gamma, float(degree), float(coef0), n_threads)


def kernel_gradient(X, Y, W, kernel="rbf", gamma=None, degree=3, coef0=1.0, n_threads=None):
    """Weighted gradients of k with respect to its first argument: G_i = sum_j W_ij d/dx k(x, y_j) at x_i.

    The building block of pre-image optimisation and of kernel autoencoder back-propagation. The laplacian
    kernel uses its subgradient (sign(0) = 0).

    Parameters
    ----------
    X : array-like of shape (n_samples_X, n_features)
    Y : array-like of shape (n_samples_Y, n_features)
    W : array-like of shape (n_samples_X, n_samples_Y)
    kernel, gamma, degree, coef0, n_threads : as in :func:`kernel_matrix`

    Returns
    -------
    G : ndarray of shape (n_samples_X, n_features)
    """
    if isinstance(kernel, Kernel):
        return kernel_gradient(X, Y, W, kernel.name, n_threads=n_threads, **kernel.params())
    if is_callable_kernel(kernel):
        raise ValueError("kernel: a callable kernel has no gradient; kernel_gradient needs a named kernel")
    for key, A in (("X", X), ("Y", Y), ("W", W)):
        if sp.issparse(A):
            raise ValueError(f"{key}: sparse input is not supported by kernel_gradient; pass {key}.toarray()")
    name, gamma, n_threads, arrays = _validated(
        kernel, gamma, degree, coef0, n_threads, {"X": X, "Y": Y, "W": W}, required=("X", "Y", "W")
    )
    X, Y, W = arrays["X"], arrays["Y"], arrays["W"]
    if W.shape != (X.shape[0], Y.shape[0]):
        raise ValueError(f"W: must have shape {(X.shape[0], Y.shape[0])}, got {W.shape}")
    with blas_threads(1):
        return _core.kernel_gradient(X, Y, W, name, gamma, float(degree), float(coef0), n_threads)


class Kernel:
    """A kernel function with explicit parameters; calling it returns a kernel matrix."""

    name = ""

    def params(self):
        """The keyword arguments this kernel passes to :func:`kernel_matrix`."""
        return asdict(self)

    def __call__(self, X, Y=None, n_threads=None):
        return kernel_matrix(X, Y, kernel=self.name, n_threads=n_threads, **self.params())


@dataclass(frozen=True)
class Linear(Kernel):
    """k(x, y) = x^T y."""

    name = "linear"


@dataclass(frozen=True)
class Polynomial(Kernel):
    """k(x, y) = (gamma x^T y + coef0)^degree."""

    degree: float = 3
    gamma: float = None
    coef0: float = 1.0
    name = "poly"


@dataclass(frozen=True)
class RBF(Kernel):
    """Gaussian kernel k(x, y) = exp(-gamma ||x - y||^2); see the module docstring for sigma conventions."""

    gamma: float = None
    name = "rbf"

    @classmethod
    def from_sigma(cls, sigma=None, *, sigma2=None, convention="suykens"):
        """Build from a bandwidth sigma (or its square sigma2) in a paper's convention.

        ``"suykens"``: exp(-d^2 / sigma^2); ``"gaussian"``: exp(-d^2 / (2 sigma^2)).
        """
        if (sigma is None) == (sigma2 is None):
            raise ValueError("sigma, sigma2: give exactly one of them")
        name = "sigma2" if sigma is None else "sigma"
        value = check_positive(sigma2 if sigma is None else sigma, name)
        factors = {"suykens": 1.0, "gaussian": 2.0}
        if convention not in factors:
            raise ValueError(f"convention: must be one of {sorted(factors)}, got {convention!r}")
        with np.errstate(over="ignore", divide="ignore"):
            gamma = 1.0 / (factors[convention] * np.float64(value) ** (1 if sigma is None else 2))
        if not (np.isfinite(gamma) and gamma > 0):
            raise ValueError(f"{name}: {value!r} gives gamma = {gamma}, outside the floating-point range")
        return cls(gamma=float(gamma))


@dataclass(frozen=True)
class Laplacian(Kernel):
    """k(x, y) = exp(-gamma ||x - y||_1)."""

    gamma: float = None
    name = "laplacian"


@dataclass(frozen=True)
class Cosine(Kernel):
    """k(x, y) = x^T y / (||x|| ||y||); 0 when either vector is zero."""

    name = "cosine"


@dataclass(frozen=True)
class Tanimoto(Kernel):
    """k(x, y) = x^T y / (||x||^2 + ||y||^2 - x^T y), for binary or count fingerprints.

    Two all-zero fingerprints have similarity 0, as RDKit's ``TanimotoSimilarity`` (they share no bit), so
    k(0, 0) = 0 and an empty fingerprint is orthogonal to everything in feature space.
    """

    name = "tanimoto"
