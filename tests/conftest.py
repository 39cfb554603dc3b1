import numpy as np
import pytest


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


# Per-dtype tolerances for comparisons of the compiled core with the NumPy reference.
TOLERANCES = {np.float64: dict(rtol=1e-10, atol=1e-10), np.float32: dict(rtol=2e-5, atol=2e-5)}


@pytest.fixture(params=[np.float64, np.float32], ids=["float64", "float32"])
def dtype(request):
    return request.param


@pytest.fixture
def tol(dtype):
    return TOLERANCES[dtype]


# Per-dtype tolerances for comparisons of the NumPy reference with third-party code (tests/test_reference.py).
REFERENCE_TOLERANCES = {np.float64: dict(rtol=1e-10, atol=1e-12), np.float32: dict(rtol=1e-4, atol=1e-5)}


@pytest.fixture
def reference_tol(dtype):
    return REFERENCE_TOLERANCES[dtype]


@pytest.fixture(params=["auto", "avx2", "baseline"])
def isa(request):
    """Runs a test with the run-time choice of SIMD code, with the AVX2 code where AVX-512 is that choice, and
    with the baseline (SSE2) code."""
    from rkm import _core

    if request.param == "avx2" and _core.config()["simd_isa"] != "avx512":
        pytest.skip("the run-time choice is AVX2 or lower here: 'auto' runs the same code")
    _core.set_simd_isa(request.param)
    yield request.param
    _core.set_simd_isa("auto")


def pytest_configure(config):
    """Budgets of the property-based tests (test_properties.py); "ci" unless --hypothesis-profile says otherwise.

    "ci" draws the same 300 examples per property on every run (derandomized): the file takes well under a
    minute on two cores. "thorough" searches longer with fresh examples.
    """
    from hypothesis import HealthCheck, settings

    common = dict(deadline=None, database=None, print_blob=True, suppress_health_check=[HealthCheck.too_slow])
    settings.register_profile("ci", max_examples=300, derandomize=True, **common)
    settings.register_profile("thorough", max_examples=2000, **common)
    if not config.getoption("--hypothesis-profile", None):
        settings.load_profile("ci")


# Helpers shared by several test files: `from conftest import kernel_data` (pytest puts tests/ on sys.path).


def kernel_data(rng, shape, dtype, kernel):
    """Normal inputs of the given shape and dtype; count fingerprints (Poisson) for the tanimoto kernel."""
    X = rng.normal(size=shape)
    if kernel == "tanimoto":  # count fingerprints
        X = rng.poisson(1.0, size=shape).astype(float)
    return X.astype(dtype)


def poisoned(A, value, index=(1, 0)):
    """A float64 copy of A with the entry at index set to value."""
    A = np.array(A, dtype=np.float64)
    A[index] = value
    return A


def assert_relatively_close(actual, expected, rtol=1e-10, scale=None):
    """||actual - expected|| <= rtol * scale, scale = ||expected|| unless given."""
    actual, expected = np.asarray(actual, dtype=float), np.asarray(expected, dtype=float)
    assert actual.shape == expected.shape
    assert np.linalg.norm(actual - expected) <= rtol * (np.linalg.norm(expected) if scale is None else scale)


def assert_close(actual, expected, rtol=1e-9):
    """Entrywise agreement with a tolerance tied to the largest value."""
    actual, expected = np.asarray(actual, dtype=float), np.asarray(expected, dtype=float)
    np.testing.assert_allclose(actual, expected, rtol=0, atol=rtol * max(1.0, np.abs(expected).max()))


def regression_data(rng, n=200, d=3, p=1, dtype=np.float64):
    """X and p smooth noisy targets Y (n x p) for the LS-SVM tests."""
    X = rng.standard_normal((n, d))
    Y = np.column_stack([np.sin(X[:, 0] + k) + 0.1 * rng.standard_normal(n) for k in range(p)])
    return X.astype(dtype), Y.astype(dtype)


def bordered_solution(K, Y, eta, lam):
    """[H; b^T] of eq. 3.16 by a dense solve of the bordered system."""
    n = K.shape[0]
    M = np.zeros((n + 1, n + 1))
    M[:n, :n] = K / eta + lam * np.eye(n)
    M[:n, n] = M[n, :n] = 1.0
    solution = np.linalg.solve(M, np.vstack([Y, np.zeros((1, Y.shape[1]))]))
    return solution[:n], solution[n]
