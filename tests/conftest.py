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


@pytest.fixture(params=["auto", "baseline"])
def isa(request):
    """Runs a test with the run-time choice of SIMD code and again with the baseline (SSE2) code."""
    from rkm import _core

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
