"""The CUDA path: its error paths everywhere, its numerics against the CPU core where a GPU is present."""

import numpy as np
import pytest

from rkm import _core
from rkm._utils.config import config
from rkm.exceptions import DeviceError
from rkm.kernels import KERNEL_NAMES, RBF, kernel_matrix

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
    free = CUDA["devices"][0]["free_bytes"]
    n = int(np.sqrt(free / 8)) + 1000  # n x n float64 values exceed the free memory
    X = np.zeros((n, 1))
    with pytest.raises(MemoryError, match="GPU memory"):  # the core's check, before any host allocation
        _core.cuda_kernel_matrix(X, None, "rbf", None, 3.0, 1.0, 0)
