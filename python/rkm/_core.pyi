"""Type stub of rkm's compiled core (cpp/bind/*.cpp).

Array arguments are C-contiguous float32 or float64 arrays of one dtype per call (float64 only where noted);
results have the dtype of the inputs.
"""

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

_Array = npt.NDArray[np.floating]
_Array64 = npt.NDArray[np.float64]
# (name, gamma, degree, coef0) of a layer or level kernel; gamma may be None for the linear kernel.
_KernelTuple = tuple[str, float | None, float, float]

__version__: str
THIN_BLOCK_COLUMNS: int

# ---- configuration (bind_config.cpp)
def config() -> dict[str, Any]: ...
def set_blas_backend(backend: str) -> None: ...
def _scoped_blas_threads() -> int: ...
def _rebase_scoped_blas_threads(threads: int) -> None: ...
def blas_backend() -> str: ...
def set_simd_isa(isa: str) -> None: ...

# ---- the CUDA path (bind_cuda.cpp; stubs raising DeviceError in a build without RKM_CUDA)
class DeviceError(RuntimeError): ...

def cuda_info(device: int = -1) -> dict[str, Any]: ...
def cuda_kernel_matrix(
    X: _Array,
    Y: _Array | None = ...,
    kernel: str = ...,
    gamma: float | None = ...,
    degree: float = ...,
    coef0: float = ...,
    device: int = ...,
) -> _Array: ...
def cuda_load_cublas(directories: list[str]) -> str: ...
def cuda_kernel_matrix_dlpack(
    X: Any,
    Y: Any | None = ...,
    kernel: str = ...,
    gamma: float | None = ...,
    degree: float = ...,
    coef0: float = ...,
) -> Any: ...
def cuda_kernel_product_dlpack(
    X: Any,
    Y: Any | None,
    B: Any,
    kernel: str = ...,
    gamma: float | None = ...,
    degree: float = ...,
    coef0: float = ...,
) -> Any: ...
def cuda_kernel_product(
    X: _Array,
    Y: _Array | None,
    B: _Array,
    kernel: str = ...,
    gamma: float | None = ...,
    degree: float = ...,
    coef0: float = ...,
    device: int = ...,
) -> _Array: ...
def cuda_kernel_top_eigsh(
    X: _Array,
    kernel: str,
    gamma: float | None,
    degree: float,
    coef0: float,
    center: bool,
    store: bool,
    n_components: int,
    start: _Array,
    tol: float | None = ...,
    max_iter: int | None = ...,
    n_threads: int | None = ...,
    progress: Callable[[int], object] | None = ...,
    device: int = ...,
) -> tuple[_Array, _Array, _Array, int, bool, _Array, float]: ...

# ---- kernels (bind_kernels.cpp)
def kernel_names() -> list[str]: ...
def vector_exp(x: npt.ArrayLike) -> _Array64: ...
def vector_cos(x: npt.ArrayLike) -> _Array64: ...
def kernel_matrix(
    X: _Array,
    Y: _Array | None = ...,
    kernel: str = ...,
    gamma: float | None = ...,
    degree: float = ...,
    coef0: float = ...,
    n_threads: int | None = ...,
    lower_only: bool = ...,
) -> _Array: ...
def kernel_gradient(
    X: _Array,
    Y: _Array,
    W: _Array,
    kernel: str = ...,
    gamma: float | None = ...,
    degree: float = ...,
    coef0: float = ...,
    n_threads: int | None = ...,
) -> _Array: ...

# ---- centring (bind_center.cpp)
def center_kernel(K: _Array, n_threads: int | None = ..., lower_only: bool = ...) -> tuple[_Array, float]: ...
def center_kernel_rows(
    K_rows: _Array, column_means: _Array, grand_mean: float, n_threads: int | None = ...
) -> None: ...

# ---- products and eigensolvers (bind_eigs.cpp)
def default_max_iter(n_components: int, block_columns: int) -> int: ...
def krylov_workspace_columns(n_components: int, block_columns: int) -> int: ...
def block_product(A: _Array, X: _Array, n_threads: int | None = ..., symmetric: bool = ...) -> _Array: ...
def transposed_product(A: _Array, B: _Array, n_threads: int | None = ...) -> _Array: ...
def eigh(A: _Array, n_threads: int | None = ...) -> tuple[_Array, _Array]: ...
def top_eigsh(
    A: _Array,
    n_components: int,
    start: _Array,
    tol: float | None = ...,
    max_iter: int | None = ...,
    n_threads: int | None = ...,
) -> tuple[_Array, _Array, _Array, int, bool]: ...
def top_eigsh_operator(
    matmat: Callable[[_Array], _Array],
    n: int,
    n_components: int,
    start: _Array,
    tol: float | None = ...,
    max_iter: int | None = ...,
    n_threads: int | None = ...,
) -> tuple[_Array, _Array, _Array, int, bool]: ...

# ---- matrix-free kernel operators (bind_kernel_operator.cpp)
def kernel_product_workspace_bytes(
    n_rows: int, n_columns: int, n_features: int, b: int, n_threads: int, symmetric: bool
) -> int: ...
def kernel_product(
    X: _Array,
    Y: _Array | None,
    B: _Array,
    kernel: str = ...,
    gamma: float | None = ...,
    degree: float = ...,
    coef0: float = ...,
    n_threads: int | None = ...,
) -> _Array: ...
def kernel_top_eigsh(
    X: _Array,
    kernel: str,
    gamma: float | None,
    degree: float,
    coef0: float,
    center: bool,
    n_components: int,
    start: _Array,
    tol: float | None = ...,
    max_iter: int | None = ...,
    n_threads: int | None = ...,
    progress: Callable[[int], object] | None = ...,
) -> tuple[_Array, _Array, _Array, int, bool, _Array, float]: ...

# ---- random Fourier features (bind_features.cpp)
def fourier_features(X: _Array, W: _Array, offset: _Array, n_threads: int | None = ...) -> _Array: ...

# ---- pre-images (bind_preimage.cpp)
def smoother_band_rows(n_train: int, value_bytes: int) -> int: ...
def smoother_preimage(
    latents: _Array,
    projection: _Array,
    offsets: _Array,
    X_train: _Array,
    n_neighbors: int,
    n_threads: int | None = ...,
) -> _Array: ...

# ---- LS-SVM (bind_lssvm.cpp)
def lssvm_dual_fit(
    X: _Array,
    Y: _Array,
    kernel: str = ...,
    gamma: float | None = ...,
    degree: float = ...,
    coef0: float = ...,
    eta: float = ...,
    lam: float = ...,
    fit_intercept: bool = ...,
    loo: bool = ...,
    n_threads: int | None = ...,
) -> tuple[_Array, _Array, _Array | None]: ...
def lssvm_dual_solve(
    K: _Array,
    Y: _Array,
    eta: float = ...,
    lam: float = ...,
    fit_intercept: bool = ...,
    loo: bool = ...,
    n_threads: int | None = ...,
) -> tuple[_Array, _Array, _Array | None]: ...
def lssvm_dual_fit_mixed(
    X: _Array64,
    Y: _Array64,
    kernel: str = ...,
    gamma: float | None = ...,
    degree: float = ...,
    coef0: float = ...,
    eta: float = ...,
    lam: float = ...,
    fit_intercept: bool = ...,
    n_threads: int | None = ...,
) -> tuple[_Array64, _Array64, int]: ...

# ---- deep RKM, reduced-set model (bind_deep.cpp); float64
class DeepReducedSetObjective:
    def __init__(
        self,
        K1: _Array64,
        G1: _Array64,
        Y: _Array64,
        dims: tuple[int, int, int, int],
        kernel2: _KernelTuple,
        kernel3: _KernelTuple,
        etas: Sequence[float],
        lam3: float,
        c_stab: float,
        c0: float,
        regularizer: str,
        objective: str,
        n_threads: int | None = ...,
    ) -> None: ...
    def __call__(self, theta: _Array64) -> tuple[float, _Array64, _Array64]: ...

def deep_reduced_set_objective(
    theta: _Array64,
    K1: _Array64,
    G1: _Array64,
    Y: _Array64,
    dims: tuple[int, int, int, int],
    kernel2: _KernelTuple,
    kernel3: _KernelTuple,
    etas: Sequence[float],
    lam3: float,
    c_stab: float,
    c0: float,
    regularizer: str,
    objective: str,
    n_threads: int | None = ...,
) -> tuple[float, _Array64, _Array64]: ...
def deep_reduced_set_forward(
    theta: _Array64,
    K1: _Array64,
    dims: tuple[int, int, int, int],
    kernel2: _KernelTuple,
    kernel3: _KernelTuple,
    etas: Sequence[float],
    n_threads: int | None = ...,
) -> tuple[_Array64, _Array64, _Array64]: ...

# ---- optimization on the Stiefel manifold (bind_stiefel.cpp); float64
class StiefelObjective: ...

def stiefel_minimize(
    fun: StiefelObjective | Callable[[_Array64], tuple[float, _Array64]] | Any,
    H0: npt.ArrayLike,
    method: str,
    tol: float,
    max_iter: int,
    options: dict[str, Any] | None = ...,
) -> dict[str, Any]: ...
def polar_orthonormalize(Z: npt.ArrayLike) -> _Array64: ...

# ---- Constr-DRKM (bind_constr_drkm.cpp); float64
class ConstrainedDeepObjective(StiefelObjective):
    def __init__(
        self,
        K1: _Array64,
        level_kernels: Sequence[_KernelTuple],
        sizes: Sequence[int],
        etas: Sequence[float],
        center: bool,
        n_threads: int | None = ...,
    ) -> None: ...
    def evaluate(self, H: _Array64) -> tuple[float, _Array64, _Array64]: ...
    @property
    def n_samples(self) -> int: ...
    @property
    def sizes(self) -> tuple[int, ...]: ...

# ---- kernel autoencoder (bind_kae.cpp); float64
def kae_loss_and_grad(
    X: npt.ArrayLike,
    phis: Sequence[npt.ArrayLike],
    kernels: Sequence[tuple[str, float | None, float | None, float | None]],
    operators: Sequence[npt.ArrayLike | None] | None,
    penalties: Sequence[float],
    precomputed: bool = ...,
    method: str = ...,
    n_threads: int | None = ...,
    output_gram: npt.ArrayLike | None = ...,
    output_features: npt.ArrayLike | None = ...,
) -> tuple[float, list[_Array64], _Array64]: ...
