"""The CUDA path: its error paths everywhere, its numerics against the CPU core where a GPU is present."""

import numpy as np
import pytest

from rkm import _core
from rkm._utils.config import config
from rkm.exceptions import DeviceError
from rkm.kernels import KERNEL_NAMES, RBF, kernel_matrix, kernel_product

CUDA = _core.cuda_info()
HAS_GPU = bool(CUDA["devices"])
requires_gpu = pytest.mark.skipif(not HAS_GPU, reason=f"no CUDA device: {CUDA['reason']}")


@pytest.mark.parametrize("device", ["gpu", "cuda:", "cuda:x", "CUDA", 0, None])
def test_a_bad_device_names_the_argument(device):
    with pytest.raises(ValueError, match="device"):
        kernel_matrix(np.ones((3, 2)), device=device)


def test_cuda_takes_named_kernels_and_dense_arrays_only():
    import scipy.sparse as sp

    with pytest.raises(ValueError, match="device"):
        kernel_matrix(np.ones((3, 2)), kernel=lambda X, Y: X @ Y.T, device="cuda")
    with pytest.raises(ValueError, match="device"):
        kernel_matrix(sp.csr_matrix(np.ones((3, 2))), device="cuda")


def test_device_error_is_a_runtime_error():
    assert issubclass(DeviceError, RuntimeError)


@pytest.mark.skipif(HAS_GPU, reason="a CUDA device is present")
def test_without_a_usable_gpu_cuda_says_why():
    X = np.random.default_rng(0).random((5, 3))
    expected = "built without CUDA" if not CUDA["compiled"] else "no NVIDIA driver|no CUDA device|no usable"
    with pytest.raises(DeviceError, match=expected):
        kernel_matrix(X, device="cuda")
    with pytest.raises(ValueError, match="gamma"):  # bad parameters are reported before the device
        kernel_matrix(X, gamma=-1.0, device="cuda")


def test_config_reports_the_cuda_path():
    info = config()
    assert info["cuda"] is CUDA["compiled"]
    if CUDA["compiled"]:
        assert info["cuda_devices"]
        assert info["cuda_runtime"].count(".") == 1


@requires_gpu
def test_only_the_device_asked_about_reports_its_free_memory():
    # Querying free memory creates a CUDA context, which costs every GPU it is created on hundreds of MiB.
    assert all(device["free_bytes"] is None for device in _core.cuda_info()["devices"])
    asked = _core.cuda_info(0)["devices"]
    assert 0 < asked[0]["free_bytes"] <= asked[0]["total_bytes"]
    assert all(device["free_bytes"] is None for device in asked[1:])


@requires_gpu
@pytest.mark.parametrize("dtype, tolerance", [(np.float64, 1e-12), (np.float32, 1e-5)])
@pytest.mark.parametrize("kernel", KERNEL_NAMES)
@pytest.mark.parametrize("with_y", [False, True])
def test_kernel_matrix_on_the_gpu_equals_the_cpu_core(kernel, dtype, tolerance, with_y):
    rng = np.random.default_rng(0)
    X = rng.random((70, 33)).astype(dtype)
    Y = rng.random((45, 33)).astype(dtype) if with_y else None
    params = {"gamma": 0.05, "degree": 2.0, "coef0": 0.5}
    expected = kernel_matrix(X, Y, kernel, **params)
    got = kernel_matrix(X, Y, kernel, **params, device="cuda")
    assert got.dtype == dtype and got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=0, atol=tolerance * np.abs(expected).max())


@requires_gpu
def test_kernel_objects_and_value_errors_on_the_gpu():
    X = np.random.default_rng(1).random((20, 4))
    np.testing.assert_allclose(kernel_matrix(X, kernel=RBF(0.3), device="cuda"), RBF(0.3)(X), atol=1e-12)
    with pytest.raises(ValueError, match="negative|non-integer"):
        kernel_matrix(X - 1.0, kernel="poly", gamma=1.0, coef0=-5.0, degree=1.5, device="cuda")
    with pytest.raises(ValueError, match="finite|overflow"):
        kernel_matrix(X.astype(np.float32) * 1e3, kernel="poly", gamma=1e3, degree=9.0, device="cuda")


@requires_gpu
def test_a_kernel_matrix_beyond_the_gpu_memory_raises_before_allocating():
    free = _core.cuda_info(0)["devices"][0]["free_bytes"]
    n = int(np.sqrt(free / 8)) + 1000  # n x n float64 values exceed the free memory
    X = np.zeros((n, 1))
    with pytest.raises(MemoryError, match="GPU memory"):  # the core's check, before any host allocation
        _core.cuda_kernel_matrix(X, None, "rbf", None, 3.0, 1.0, 0)


# ---------------------------------------------------------------- the estimators' device parameter, everywhere


def _blobs(n=60, d=4, dtype=np.float64, seed=0):
    return np.random.default_rng(seed).standard_normal((n, d)).astype(dtype)


@pytest.mark.parametrize("device", ["gpu", "cuda:x"])
def test_every_estimator_names_a_bad_device(device):
    from rkm import GenRKM, KernelPCA, LSSVMRegressor, MultiViewRKM

    X = _blobs()
    fits = [
        lambda: KernelPCA(2, device=device).fit(X),
        lambda: LSSVMRegressor(device=device).fit(X, X[:, 0]),
        lambda: MultiViewRKM(2, device=device).fit([X, X[:, :2]]),
        lambda: GenRKM(2, device=device).fit([X, X[:, :2]]),
    ]
    for fit in fits:
        with pytest.raises(ValueError, match="device"):
            fit()
    with pytest.raises(ValueError, match="device"):
        kernel_product(X, None, np.ones((60, 1)), device=device)


def test_what_the_gpu_path_cannot_take_is_a_value_error_before_the_device_check():
    import scipy.sparse as sp

    from rkm import KernelPCA, LSSVMRegressor
    from rkm.features import Nystroem

    X = _blobs()
    cases = [
        (lambda: KernelPCA(2, kernel="precomputed", device="cuda").fit(X @ X.T), "precomputed or callable"),
        (lambda: KernelPCA(2, kernel=lambda A, B: A @ B.T, device="cuda").fit(X), "precomputed or callable"),
        (lambda: KernelPCA(2, device="cuda").fit(sp.csr_matrix(X)), "dense in-memory"),
        (lambda: KernelPCA(2, feature_map=Nystroem(10), device="cuda").fit(X), "feature_map"),
        (lambda: LSSVMRegressor(feature_map="linear", device="cuda").fit(X, X[:, 0]), "feature_map"),
        (lambda: LSSVMRegressor(mixed_precision=True, device="cuda").fit(X, X[:, 0]), "mixed_precision"),
        (lambda: kernel_product(X, None, np.ones((60, 1)), kernel=lambda A, B: A @ B.T, device="cuda"), "device"),
    ]
    for fit, message in cases:
        with pytest.raises(ValueError, match=message):
            fit()


def test_a_dask_array_on_the_gpu_is_a_value_error():
    da = pytest.importorskip("dask.array")
    from rkm import KernelPCA

    dX = da.from_array(_blobs(), chunks=(30, 4))
    with pytest.raises(ValueError, match="device"):
        KernelPCA(2, kernel_storage="matrix_free", device="cuda").fit(dX)


@pytest.mark.skipif(HAS_GPU, reason="a CUDA device is present")
def test_without_a_usable_gpu_every_estimator_says_why():
    from rkm import GenRKM, KernelPCA, LSSVMClassifier, LSSVMRegressor, MultiViewRKM

    X = _blobs()
    expected = "built without CUDA" if not CUDA["compiled"] else "no NVIDIA driver|no CUDA device|no usable"
    fits = [
        lambda: KernelPCA(2, device="cuda").fit(X),
        lambda: KernelPCA(2, kernel_storage="matrix_free", device="cuda").fit(X),
        lambda: LSSVMRegressor(device="cuda").fit(X, X[:, 0]),
        lambda: LSSVMClassifier(solver="cg", device="cuda").fit(X, X[:, 0] > 0),
        lambda: MultiViewRKM(2, device="cuda").fit([X, X[:, :2]]),
        lambda: GenRKM(2, device="cuda").fit([X, X[:, :2]]),
        lambda: kernel_product(X, None, np.ones((60, 1)), device="cuda"),
    ]
    for fit in fits:
        with pytest.raises(DeviceError, match=expected):
            fit()


def test_cublas_is_looked_for_where_the_user_and_the_wheels_put_it(tmp_path, monkeypatch):
    from rkm._utils.device import cublas_directories

    monkeypatch.setenv("RKM_CUBLAS_DIR", f"{tmp_path}{__import__('os').pathsep}/does/not/exist")
    directories = cublas_directories()
    assert directories[0] == str(tmp_path)
    assert "/does/not/exist" not in directories  # only directories that exist are passed on


@pytest.mark.skipif(not CUDA["compiled"], reason="rkm was built without CUDA")
def test_cublas_loading_reports_where_it_looked():
    if _core.cuda_info()["cublas"]:
        pytest.skip("cuBLAS is already loaded in this process")
    try:
        origin = _core.cuda_load_cublas(["/does/not/exist"])
    except DeviceError as error:  # no cuBLAS on the library search path either
        assert "cuBLAS not found" in str(error) and "/does/not/exist/" in str(error)
    else:  # found through the library search path (a toolkit or a copy another package loaded)
        assert origin.startswith("libcublas.so.1") and _core.cuda_info()["cublas"] == origin


def test_auto_storage_on_the_gpu_follows_its_free_memory(monkeypatch):
    from rkm import KernelPCA
    from rkm._utils import device

    fake = {"compiled": True, "devices": [{"name": "test GPU", "free_bytes": 4 * 2**30}], "reason": "", "cublas": ""}
    monkeypatch.setattr(device._core, "cuda_info", lambda device=-1: fake)
    model = KernelPCA(10, device="cuda")
    assert model._resolve_kernel_storage(10_000, 64, np.float64) == "dense"  # K takes 0.75 of 4 GiB
    assert model._resolve_kernel_storage(40_000, 64, np.float32) == "matrix_free"  # K would take 6 of 4 GiB
    with pytest.raises(DeviceError, match="no CUDA device 1"):
        KernelPCA(10, device="cuda:1")._resolve_kernel_storage(100, 2, np.float64)


# ---------------------------------------------------------------- numerics against the CPU, where a GPU is present


def _assert_same_columns_up_to_sign(got, expected, atol):
    signs = np.sign(np.sum(got * expected, axis=0))
    np.testing.assert_allclose(got * signs, expected, rtol=0, atol=atol)


@requires_gpu
@pytest.mark.parametrize("dtype, tolerance", [(np.float64, 1e-12), (np.float32, 1e-5)])
@pytest.mark.parametrize("kernel", KERNEL_NAMES)
@pytest.mark.parametrize("with_y", [False, True])
def test_kernel_product_on_the_gpu_equals_the_cpu_core(kernel, dtype, tolerance, with_y):
    rng = np.random.default_rng(2)
    X = rng.random((90, 7)).astype(dtype)
    Y = rng.random((50, 7)).astype(dtype) if with_y else None
    B = rng.standard_normal((50 if with_y else 90, 3)).astype(dtype)
    params = {"gamma": 0.2, "degree": 2.0, "coef0": 0.5}
    expected = kernel_product(X, Y, B, kernel, **params)
    got = kernel_product(X, Y, B, kernel, **params, device="cuda")
    assert got.dtype == dtype and got.shape == expected.shape
    scale = np.abs(kernel_matrix(X, Y, kernel, **params)).max() * np.abs(B).sum(axis=0).max()
    np.testing.assert_allclose(got, expected, rtol=0, atol=tolerance * scale)


@requires_gpu
def test_a_kernel_product_over_several_bands_equals_the_cpu_core():
    # 9000 rows of float64 K are 72 kB each: the 512 MiB band holds 7456 of them, so two bands.
    rng = np.random.default_rng(3)
    X = rng.standard_normal((9000, 5))
    B = rng.standard_normal((9000, 4))
    expected = kernel_product(X, None, B, "rbf", gamma=0.1)
    got = kernel_product(X, None, B, "rbf", gamma=0.1, device="cuda")
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12 * 9000 * np.abs(B).max())


@requires_gpu
@pytest.mark.parametrize("dtype, tolerance", [(np.float64, 1e-10), (np.float32, 1e-4)])
@pytest.mark.parametrize("store", [True, False])
@pytest.mark.parametrize("center", [True, False])
def test_the_eigensolver_on_the_gpu_equals_the_cpu_core(dtype, tolerance, store, center):
    X = _blobs(400, 6, dtype, seed=4)
    start = np.random.default_rng(5).standard_normal((400, 8)).astype(dtype)
    args = (X, "rbf", 0.1, 3.0, 1.0, center)
    tol = 1e-10 if dtype == np.float64 else 1e-5
    w, V, _, _, converged, means, grand = _core.kernel_top_eigsh(*args, 5, start, tol, 200, None)
    w_gpu, V_gpu, _, _, converged_gpu, means_gpu, grand_gpu = _core.cuda_kernel_top_eigsh(
        *args, store, 5, start, tol, 200, None, None, 0
    )
    assert converged and converged_gpu
    np.testing.assert_allclose(w_gpu, w, rtol=0, atol=tolerance * w[0])
    _assert_same_columns_up_to_sign(V_gpu, V, np.sqrt(tolerance))
    np.testing.assert_allclose(means_gpu, means, rtol=0, atol=tolerance)
    assert abs(grand_gpu - grand) <= tolerance


@requires_gpu
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_the_gpu_eigensolver_completes_a_low_rank_kernel_as_the_cpu_core(dtype):
    # K of rank 3 with 6 pairs wanted: beyond three directions the residual blocks are rounding noise, the case of
    # the iteration's rank-deficient steps (Householder QR, pseudo-random blocks: CudaOps takes them through the host).
    X = _blobs(500, 3, dtype, seed=17)
    start = np.random.default_rng(18).standard_normal((500, 4)).astype(dtype)
    args = (X, "linear", 1.0, 3.0, 1.0, False)
    w, V, *_ = _core.kernel_top_eigsh(*args, 6, start, 1e-6, 300, None)
    w_gpu, V_gpu, residuals, *_ = _core.cuda_kernel_top_eigsh(*args, True, 6, start, 1e-6, 300, None, None, 0)
    tolerance = 1e-10 if dtype == np.float64 else 1e-4
    np.testing.assert_allclose(w_gpu, w, rtol=0, atol=tolerance * w[0])
    _assert_same_columns_up_to_sign(V_gpu[:, :3], V[:, :3], np.sqrt(tolerance))
    np.testing.assert_allclose(V_gpu.T @ V_gpu, np.eye(6), atol=np.sqrt(tolerance))
    assert np.all(residuals <= 1e-6)


@requires_gpu
@pytest.mark.parametrize("dtype, tolerance", [(np.float64, 1e-8), (np.float32, 1e-3)])
@pytest.mark.parametrize("storage, solver", [("dense", "krylov"), ("dense", "dense"), ("matrix_free", "auto")])
def test_kernel_pca_on_the_gpu_equals_the_cpu_estimator(dtype, tolerance, storage, solver):
    from rkm import KernelPCA

    X, X_new = _blobs(300, 5, dtype, seed=6), _blobs(40, 5, dtype, seed=7)
    params = {"kernel_storage": storage, "solver": solver, "gamma": 0.2, "random_state": 0}
    cpu = KernelPCA(4, **params).fit(X)
    gpu = KernelPCA(4, **params, device="cuda").fit(X)
    assert gpu.kernel_storage_ == storage and gpu.eigenvalues_.dtype == dtype
    np.testing.assert_allclose(gpu.eigenvalues_, cpu.eigenvalues_, rtol=tolerance)
    _assert_same_columns_up_to_sign(gpu.transform(X_new), cpu.transform(X_new), tolerance * 10)


@requires_gpu
@pytest.mark.parametrize("solver, storage", [("cholesky", "matrix_free"), ("cg", "matrix_free"), ("cg", "dense")])
def test_lssvm_on_the_gpu_equals_the_cpu_estimator(solver, storage):
    from rkm import LSSVMRegressor

    X = _blobs(300, 5, seed=8)
    y = np.sin(X[:, 0]) + 0.1 * X[:, 1]
    params = {"solver": solver, "kernel_storage": storage, "gamma": 0.2, "lam": 0.1, "tol": 1e-10, "random_state": 0}
    cpu = LSSVMRegressor(**params).fit(X, y)
    gpu = LSSVMRegressor(**params, device="cuda").fit(X, y)
    np.testing.assert_allclose(gpu.predict(X), cpu.predict(X), rtol=0, atol=1e-5)


@requires_gpu
def test_multiview_models_on_the_gpu_equal_the_cpu_ones():
    from rkm import GenRKM, MultiViewRKM

    X, Y = _blobs(120, 5, seed=9), _blobs(120, 3, seed=10)
    for model in (MultiViewRKM, GenRKM):
        params = {"kernel": ("rbf", "linear"), "gamma": (0.2, None), "random_state": 0}
        cpu = model(3, **params).fit([X, Y])
        gpu = model(3, **params, device="cuda").fit([X, Y])
        np.testing.assert_allclose(gpu.eigenvalues_, cpu.eigenvalues_, rtol=1e-10)


@requires_gpu
def test_strided_views_reach_the_gpu_as_their_values():
    X = _blobs(80, 6, seed=14)
    B = _blobs(40, 2, seed=15)
    expected = kernel_matrix(np.ascontiguousarray(X[::2]), None, "rbf", gamma=0.3)
    np.testing.assert_allclose(_core.cuda_kernel_matrix(X[::2], None, "rbf", 0.3, 3.0, 1.0, 0), expected, atol=1e-12)
    got = _core.cuda_kernel_product(X[::2], None, B, "rbf", 0.3, 3.0, 1.0, 0)
    np.testing.assert_allclose(got, expected @ B, atol=1e-11)


@requires_gpu
@pytest.mark.parametrize("n_samples, n_components, storage", [(3000, 30, "dense"), (60, 2, "matrix_free")])
def test_products_wider_than_the_solver_block_go_through(n_samples, n_components, storage):
    # The solver's final products have n_components columns (30 > 8 + 1), a small problem's the whole identity.
    from rkm import KernelPCA

    X = _blobs(n_samples, 5, seed=16)
    params = {"kernel_storage": storage, "solver": "krylov" if storage == "dense" else "auto", "gamma": 0.2}
    cpu = KernelPCA(n_components, **params, random_state=0).fit(X)
    gpu = KernelPCA(n_components, **params, random_state=0, device="cuda").fit(X)
    np.testing.assert_allclose(gpu.eigenvalues_, cpu.eigenvalues_, rtol=1e-8)


@requires_gpu
def test_a_stored_kernel_beyond_the_gpu_memory_raises_before_allocating():
    from rkm import KernelPCA

    n = int(np.sqrt(_core.cuda_info(0)["devices"][0]["free_bytes"] / 8)) + 1000  # K exceeds the free memory; X is small
    X = np.zeros((n, 1))
    with pytest.raises(MemoryError, match="GPU memory"):
        KernelPCA(2, kernel_storage="dense", solver="krylov", device="cuda").fit(X)


# ---------------------------------------------------------------- DLPack inputs (CuPy arrays, PyTorch CUDA tensors)


class _FakeCudaTensor:
    """A DLPack producer that claims CUDA memory but hands out NumPy's host capsule: the core must refuse it."""

    __module__ = "torch"  # checked as a PyTorch tensor would be

    def __init__(self, array):
        self._array = array
        self.shape = array.shape

    def __dlpack_device__(self):
        return (2, 0)

    def __dlpack__(self, stream=None, **kwargs):
        return self._array.__dlpack__()


def test_cuda_tensors_must_be_asked_for_by_device():
    X = _FakeCudaTensor(_blobs())
    with pytest.raises(ValueError, match="device: X is in CUDA memory"):
        kernel_matrix(X)
    with pytest.raises(ValueError, match="device: X is in CUDA memory"):
        kernel_matrix(X, device="cuda:1")
    with pytest.raises(ValueError, match="Y: must be a CUDA tensor on X's device"):
        kernel_matrix(X, _blobs(), device="cuda")
    with pytest.raises(ValueError, match="B: must be a CUDA tensor on X's device"):
        kernel_product(X, None, np.ones((60, 1)), device="cuda")


@pytest.mark.skipif(not HAS_GPU, reason="the device check comes first without a GPU")
def test_a_capsule_of_host_memory_is_refused_by_the_core():
    X = _FakeCudaTensor(_blobs())
    with pytest.raises(ValueError, match="X: a DLPack tensor in CUDA memory is needed, got device type 1"):
        kernel_matrix(X, device="cuda")


def test_the_core_reads_dlpack_capsules_and_leaves_refused_ones_to_their_producer():
    import ctypes

    capsule = _blobs().__dlpack__()  # a host capsule: refused, by every build, after it was read
    for _ in range(2):  # not consumed ("used_dltensor") by the refusal: NumPy still owns and frees it
        with pytest.raises(ValueError, match="X: a DLPack tensor in CUDA memory is needed, got device type 1"):
            _core.cuda_kernel_matrix_dlpack(capsule)
    new_capsule = ctypes.pythonapi.PyCapsule_New
    new_capsule.restype, new_capsule.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    used = new_capsule(ctypes.addressof(ctypes.c_int(0)), b"used_dltensor", None)
    with pytest.raises(ValueError, match="X: not an unused DLPack capsule"):
        _core.cuda_kernel_matrix_dlpack(used)


def _gpu_library(name):
    library = pytest.importorskip(name)
    if name == "torch" and not library.cuda.is_available():
        pytest.skip("PyTorch without CUDA")
    return library


@requires_gpu
@pytest.mark.parametrize("library", ["torch", "cupy"])
@pytest.mark.parametrize("dtype, tolerance", [("float64", 1e-12), ("float32", 1e-5)])
def test_cuda_tensors_stay_on_the_gpu_and_equal_the_cpu_results(library, dtype, tolerance):
    lib = _gpu_library(library)
    X, Y, B = _blobs(80, 6, dtype, 11), _blobs(50, 6, dtype, 12), _blobs(50, 2, dtype, 13)
    on_gpu = {"torch": lambda A: lib.from_numpy(A).cuda(), "cupy": lambda A: lib.asarray(A)}[library]
    to_host = {"torch": lambda A: A.cpu().numpy(), "cupy": lambda A: A.get()}[library]
    K = kernel_matrix(on_gpu(X), on_gpu(Y), "rbf", gamma=0.3, device="cuda")
    assert type(K).__module__.split(".")[0] == library and str(K.dtype).endswith(dtype)
    expected = kernel_matrix(X, Y, "rbf", gamma=0.3)
    np.testing.assert_allclose(to_host(K), expected, rtol=0, atol=tolerance)
    KB = kernel_product(on_gpu(X), on_gpu(Y), on_gpu(B), "rbf", gamma=0.3, device="cuda")
    np.testing.assert_allclose(to_host(KB), expected @ B, rtol=0, atol=tolerance * 50 * np.abs(B).max())
    with pytest.raises(ValueError, match="X: contains NaN"):
        bad = X.copy()
        bad[3, 2] = np.nan
        kernel_matrix(on_gpu(bad), device="cuda")
