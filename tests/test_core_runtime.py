"""The compiled core's run-time machinery: thread counts, the released GIL, the BLAS back-end, the SIMD code
choice, the version, the type stub and Ctrl-C inside long calls."""

import ast
import pathlib
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import rkm
from rkm import _core, reference


def test_the_type_stub_covers_every_public_name_of_the_core():
    stub = pathlib.Path(rkm.__file__).with_name("_core.pyi")
    tree = ast.parse(stub.read_text())
    names = {node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
    names |= {node.target.id for node in tree.body if isinstance(node, ast.AnnAssign)}
    public = {name for name in dir(_core) if not name.startswith("_")}
    assert public <= names, sorted(public - names)
    assert (stub.parent / "py.typed").is_file()


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_results_do_not_depend_on_thread_count(rng, threads):
    X = rng.normal(size=(900, 12))
    K1 = _core.kernel_matrix(X, None, "rbf", 0.1, n_threads=1)
    Kt = _core.kernel_matrix(X, None, "rbf", 0.1, n_threads=threads)
    np.testing.assert_allclose(Kt, K1, rtol=1e-13, atol=1e-14)
    C1, Ct = K1.copy(), Kt.copy()
    _core.center_kernel(C1, n_threads=1)
    _core.center_kernel(Ct, n_threads=threads)
    np.testing.assert_allclose(Ct, C1, rtol=1e-12, atol=1e-13)


def test_same_thread_count_is_bit_identical(rng):
    X = rng.normal(size=(700, 5))
    K = _core.kernel_matrix(X, None, "laplacian", 0.3, n_threads=2)
    assert np.array_equal(K, _core.kernel_matrix(X, None, "laplacian", 0.3, n_threads=2))
    C1, C2 = K.copy(), K.copy()
    _core.center_kernel(C1, n_threads=2)
    _core.center_kernel(C2, n_threads=2)
    assert np.array_equal(C1, C2)


def test_n_threads_zero_is_rejected(rng):
    with pytest.raises(ValueError, match="n_threads"):
        _core.kernel_matrix(rng.normal(size=(3, 2)), n_threads=0)


def test_two_python_threads_run_the_core_concurrently(rng):
    # Each call releases the GIL; both threads must finish with correct results.
    X = rng.normal(size=(1500, 16))
    expected = reference.kernel_matrix(X, None, "rbf", 0.05)
    results = [None, None]

    def work(slot):
        results[slot] = _core.kernel_matrix(X, None, "rbf", 0.05, n_threads=1)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for result in results:
        np.testing.assert_allclose(result, expected, rtol=1e-12, atol=1e-12)


@pytest.fixture
def eigen_backend():
    _core.set_blas_backend("eigen")
    yield
    _core.set_blas_backend("scipy")


def test_eigen_fallback_agrees_with_scipy_blas(rng, eigen_backend):
    assert _core.blas_backend() == "eigen"
    X = rng.normal(size=(400, 7))
    K = _core.kernel_matrix(X, None, "rbf", 0.2)
    np.testing.assert_allclose(K, reference.kernel_matrix(X, None, "rbf", 0.2), rtol=1e-12, atol=1e-12)
    w, V = _core.eigh(K)
    np.testing.assert_allclose(w, reference.eigh(K)[0], atol=1e-10)
    w_top, *_, converged = _core.top_eigsh(K, 5, rng.normal(size=(400, 15)))
    assert converged
    np.testing.assert_allclose(w_top, w[:5], rtol=1e-8)


def test_unknown_blas_backend_is_rejected():
    with pytest.raises(ValueError, match="backend"):
        _core.set_blas_backend("mkl")


def test_core_version_matches_package():
    import rkm

    assert _core.__version__ == rkm.__version__
    assert _core.config()["version"] == rkm.__version__


def test_chosen_isa_is_reported_and_unknown_isa_rejected(isa):
    assert _core.config()["simd_isa"] == isa or isa == "auto"
    with pytest.raises(ValueError, match="isa: must be"):
        _core.set_simd_isa("avx1024")


def test_an_isa_beyond_the_cpu_is_refused_and_changes_nothing():
    levels = ["baseline", "avx2", "avx512"]
    best = _core.config()["simd_isa"]
    try:
        for level in levels[levels.index(best) + 1 :]:
            with pytest.raises(ValueError, match=f"isa: this CPU cannot run '{level}'"):
                _core.set_simd_isa(level)
            assert _core.config()["simd_isa"] == best
        for level in levels[: levels.index(best) + 1]:
            _core.set_simd_isa(level)
            assert _core.config()["simd_isa"] == level
    finally:
        _core.set_simd_isa("auto")
    assert _core.config()["simd_isa"] == best


def _interrupt_after_ready(body, seconds=1.0):
    """Runs `body` in a child Python, sends Ctrl-C `seconds` after it prints 'ready', returns its output.

    The child installs Python's Ctrl-C handler itself: a shell that starts the suite in the background
    passes SIGINT down as ignored, and Python then leaves it ignored.
    """
    script = (
        "import signal; signal.signal(signal.SIGINT, signal.default_int_handler)\n"
        "import numpy as np, sys; from rkm import _core\n" + body + "\n"
        "print('ready', flush=True)\n"
        "try:\n"
        "    run()\n"
        "    print('completed', flush=True)\n"
        "except KeyboardInterrupt:\n"
        "    print('interrupted', flush=True)\n"
    )
    process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        # An editable install may print its rebuild log first.
        assert any(line.strip() == "ready" for line in process.stdout)
        time.sleep(seconds)
        process.send_signal(signal.SIGINT)
        output, _ = process.communicate(timeout=60)
    finally:
        process.kill()
    return output


@pytest.mark.slow
def test_ctrl_c_interrupts_the_eigensolver():
    # Products with a random perturbation each time never converge nor stagnate near rounding, so the
    # solve runs until Ctrl-C; most of its time is the core's orthogonalization of a 20000-row basis.
    body = (
        "rng = np.random.default_rng(0); d = np.linspace(1, 2, 20000)\n"
        "matmat = lambda B: d[:, None] * B + 1e-3 * rng.standard_normal(B.shape)\n"
        "start = np.random.default_rng(1).normal(size=(20000, 8))\n"
        "def run(): _core.top_eigsh_operator(matmat, 20000, 40, start, 1e-12, 10**9)"
    )
    assert "interrupted" in _interrupt_after_ready(body)


@pytest.mark.slow
def test_ctrl_c_interrupts_a_kernel_build_inside_its_parallel_region():
    # A 20000 x 20000 float32 build at d = 784 takes several seconds; the check runs between bands.
    body = (
        "X = np.random.default_rng(0).random((20000, 784), dtype=np.float32)\n"
        "def run(): _core.kernel_matrix(X, None, 'rbf', 0.01, 3.0, 1.0, 2)"
    )
    assert "interrupted" in _interrupt_after_ready(body)


@pytest.mark.slow
def test_ctrl_c_interrupts_a_matrix_free_product_between_tiles():
    # K(X, X) B for N = 60000 recomputes 1.8e9 kernel entries (many seconds); the check runs between tiles.
    body = (
        "X = np.random.default_rng(0).random((60000, 64))\n"
        "B = np.ones((60000, 8))\n"
        "def run(): _core.kernel_product(X, None, B, 'rbf', 0.01, 3.0, 1.0, 2)"
    )
    assert "interrupted" in _interrupt_after_ready(body)


def _run_child(script, timeout=300):
    """Runs `script` in a child Python; returns (returncode, its printed lines, stdout + stderr): a crash there fails
    one test only. An editable install may print its rebuild log first."""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=timeout)
    return done.returncode, done.stdout.strip().splitlines(), done.stdout + done.stderr


def test_absurd_thread_counts_are_clamped_to_the_cores():
    # n_threads = 100000 crashed inside libgomp (a segfault in kernel_matrix, "Thread creation failed" from the
    # LS-SVM fit): every count beyond the cores now runs as -1 (all of them), with the same results.
    script = """
import os
import numpy as np
from rkm import _core
rng = np.random.default_rng(0)
X, Y = rng.normal(size=(300, 4)), rng.normal(size=(300, 2))
K = _core.kernel_matrix(X, None, 'rbf', 0.5, n_threads=-1)
H0 = np.linalg.qr(rng.normal(size=(300, 5)))[0]
phis = [Y / 300, rng.normal(size=(300, 4)) / 300]
calls = {
    'kernel_matrix': lambda t: _core.kernel_matrix(X, None, 'rbf', 0.5, n_threads=t),
    'center_kernel': lambda t: _core.center_kernel(K.copy(), n_threads=t)[0],
    'kernel_product': lambda t: _core.kernel_product(X, None, Y, 'rbf', 0.5, 3.0, 1.0, t),
    'eigh': lambda t: _core.eigh(K, n_threads=t)[0],
    'lssvm_dual_fit': lambda t: _core.lssvm_dual_fit(X, Y, 'rbf', 0.5, n_threads=t)[0],
    'lssvm_dual_fit_mixed': lambda t: _core.lssvm_dual_fit_mixed(X, Y, 'rbf', 0.5, n_threads=t)[0],
    'ConstrainedDeepObjective': lambda t: _core.ConstrainedDeepObjective(
        K, [('rbf', 0.5, 3.0, 1.0)], [3, 2], [1.0, 1.0], True, n_threads=t).evaluate(H0)[1],
    'kae_loss_and_grad': lambda t: _core.kae_loss_and_grad(
        X, phis, [('rbf', 0.5, 3.0, 1.0)] * 2, None, [1e-3] * 2,
        n_threads=t)[1][0],
}
for name, call in calls.items():
    expected = call(-1)
    for threads in (100000, 50000, 2**31 - 1):
        assert np.array_equal(call(threads), expected), (name, threads)
cores = len(os.sched_getaffinity(0))  # what OpenMP counts as the processors available
workspace = lambda t: _core.kernel_product_workspace_bytes(300, 300, 4, 3, t, True)
assert workspace(10**6) == workspace(cores) and (cores == 1 or workspace(cores) > workspace(1))
print('ok')
"""
    returncode, lines, output = _run_child(script)
    assert returncode == 0 and lines[-1:] == ["ok"], output


def test_a_failed_allocation_is_a_memory_error_that_names_it():
    # Under an address-space limit (ulimit -v) that the kernel matrix of 30000 samples (6.7 GiB) cannot fit in, the
    # core's std::bad_alloc must reach Python as a MemoryError that says what failed and what to do, not as a bare
    # "std::bad_alloc".
    script = """
import resource
import numpy as np
from rkm import _core
rng = np.random.default_rng(0)
X, Y = rng.normal(size=(30000, 2)), rng.normal(size=(30000, 1))
_core.lssvm_dual_fit(X[:300], Y[:300], 'rbf', 0.5)  # threads and BLAS buffers exist before the limit
used = int(open('/proc/self/statm').read().split()[0]) * resource.getpagesize()
resource.setrlimit(resource.RLIMIT_AS, (used + 2**31, resource.getrlimit(resource.RLIMIT_AS)[1]))
for fit in (_core.lssvm_dual_fit, _core.lssvm_dual_fit_mixed):
    try:
        fit(X, Y, 'rbf', 0.5)
    except MemoryError as error:
        print(error)
"""
    returncode, lines, output = _run_child(script)
    assert returncode == 0, output
    lines = lines[-2:]
    assert lines[0].startswith("rkm core: out of memory while fitting an LS-SVM: its kernel matrix holds 30000 x")
    assert lines[1].startswith("rkm core: out of memory while fitting an LS-SVM in mixed precision")
    for line in lines:
        assert "GiB" in line and "use fewer samples, float32, or a matrix-free or approximate solver" in line


@pytest.mark.slow
def test_ctrl_c_interrupts_the_lssvm_cholesky_factorization():
    # One LAPACK potrf call on N = 12000 ignored Ctrl-C for 31 s; in panels the check runs between them. float32
    # at N = 20000 (1.6 GB, as the kernel build test): long enough for the signal to arrive inside the factorization
    # on a fast machine too (K = I: the time does not depend on the values).
    body = (
        "K = np.eye(20000, dtype=np.float32); Y = np.ones((20000, 1), dtype=np.float32)\n"
        "def run(): _core.lssvm_dual_solve(K, Y, 1.0, 1.0, True, False, None)"
    )
    assert "interrupted" in _interrupt_after_ready(body)
