"""How the core's OpenMP threads wait: passive by default, the user's policy when set."""

import json
import os
import subprocess
import sys

import pytest

_REPORT = (
    "import json, os, rkm; from rkm._utils.config import config\n"
    "print(json.dumps([config()['omp_wait_policy'], os.environ.get('OMP_WAIT_POLICY')]))"
)


def _policies(environment):
    output = subprocess.run(
        [sys.executable, "-c", _REPORT], env=environment, capture_output=True, text=True, check=True
    ).stdout
    return json.loads(output.strip().splitlines()[-1])


def test_core_loads_with_passive_waiting_and_restores_the_environment():
    environment = {key: value for key, value in os.environ.items() if key != "OMP_WAIT_POLICY"}
    assert _policies(environment) == ["passive (rkm's default)", None]


@pytest.mark.parametrize("policy", ["active", "PASSIVE"])
def test_a_policy_the_user_set_is_kept(policy):
    assert _policies({**os.environ, "OMP_WAIT_POLICY": policy}) == [policy, policy]


# The n_threads knob and the BLAS limits under concurrency.


def _blas_limits():
    from threadpoolctl import threadpool_info

    return sorted((lib["filepath"], lib["num_threads"]) for lib in threadpool_info() if lib["user_api"] == "blas")


def test_thread_counts_above_the_cores_are_clamped():
    from rkm._utils.threads import available_cores, check_n_threads, thread_count

    cores = available_cores()
    assert check_n_threads(100_000) == thread_count(100_000) == cores
    assert thread_count(-1) == cores and thread_count(1) == 1


def test_a_huge_n_threads_runs_instead_of_ending_the_process():
    import numpy as np

    import rkm
    from rkm.kernels import kernel_matrix

    X = np.random.default_rng(0).normal(size=(40, 3))
    np.testing.assert_allclose(kernel_matrix(X, n_threads=100_000), kernel_matrix(X, n_threads=1), rtol=1e-13)
    y = X[:, 0]
    big = rkm.LSSVMRegressor(n_threads=50_000).fit(X, y).predict(X)
    np.testing.assert_allclose(big, rkm.LSSVMRegressor(n_threads=1).fit(X, y).predict(X), rtol=1e-10, atol=1e-12)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_concurrent_fits_restore_the_blas_limits():
    from concurrent.futures import ThreadPoolExecutor

    import numpy as np

    import rkm

    before = _blas_limits()
    X = np.random.default_rng(0).normal(size=(60, 4))

    def fit(seed):
        return rkm.ConstrainedDeepRKM((3, 2), n_threads=1 + seed % 2, random_state=seed, max_iter=50).fit(X)

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(fit, range(16)))
    assert _blas_limits() == before


def test_n_threads_never_raises_blas_above_the_process_limit():
    from threadpoolctl import threadpool_limits

    from rkm._utils.threads import blas_threads

    with threadpool_limits(limits=1, user_api="blas"):
        with blas_threads(2):
            assert {threads for _, threads in _blas_limits()} == {1}
        assert {threads for _, threads in _blas_limits()} == {1}


# The core's OpenMP teams hold its BLAS at one thread (blas::SingleThreadedScope) and restore the count.


def _core_blas_count():
    from threadpoolctl import threadpool_info

    from rkm._utils.threads import is_core_blas_library

    counts = [lib["num_threads"] for lib in threadpool_info() if is_core_blas_library(lib["filepath"])]
    return counts[0] if counts else None


def _require_core_blas_control():
    from rkm import _core

    if _core.config()["blas_thread_control"] is None:
        pytest.skip("the core found no thread controls for its BLAS (not SciPy's OpenBLAS)")


def test_the_core_restores_its_blas_thread_count_after_each_team():
    import numpy as np
    from threadpoolctl import threadpool_limits

    from rkm import _core

    _require_core_blas_control()
    X = np.random.default_rng(0).normal(size=(600, 8))
    B = np.ones((600, 3))
    for count in (2, 1):
        with threadpool_limits(limits=count, user_api="blas"):
            _core.kernel_product(X, None, B, "rbf", 0.1, n_threads=2)
            assert _core_blas_count() == count
            assert _core._scoped_blas_threads() == 0  # no team open after the call


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_concurrent_core_teams_and_fits_restore_the_blas_limits():
    from concurrent.futures import ThreadPoolExecutor

    import numpy as np

    import rkm
    from rkm import _core

    _require_core_blas_control()
    before = _blas_limits()
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(300, 4)), rng.normal(size=300)

    def work(seed):
        if seed % 3 == 0:  # a bare core call: its teams' scopes only
            return _core.kernel_product(X, None, np.ones((300, 2)), "rbf", 0.5, n_threads=2)
        if seed % 3 == 1:  # the Python layer's limits around teams that nest BLAS calls
            return rkm.LSSVMRegressor(mixed_precision=True, solver="cholesky", n_threads=2).fit(X, y)
        return rkm.ConstrainedDeepRKM((3, 2), n_threads=1 + seed % 2, random_state=seed, max_iter=30).fit(X[:60])

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(work, range(24)))
    assert _blas_limits() == before
    assert _core._scoped_blas_threads() == 0


def test_nested_blas_calls_give_the_same_products_as_a_single_threaded_blas():
    import numpy as np
    from threadpoolctl import threadpool_limits

    from rkm import _core

    X = np.random.default_rng(1).normal(size=(700, 16))
    B = np.random.default_rng(2).normal(size=(700, 4))
    with threadpool_limits(limits=1, user_api="blas"):
        expected = _core.kernel_product(X, None, B, "rbf", 0.05, n_threads=2)
    with threadpool_limits(limits=2, user_api="blas"):
        np.testing.assert_array_equal(_core.kernel_product(X, None, B, "rbf", 0.05, n_threads=2), expected)
