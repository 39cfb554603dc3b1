"""The benchmark suite behind ``rkm bench`` and ``bench/run.py``.

Every case times rkm against its peers in the same process, on the same data and thread count, after
one warm-up run of each (first touches of fresh memory are slow on virtual machines and would otherwise
be charged to whoever runs first), reports the median of the repeats, and asserts that the results
agree with the NumPy reference before it records a ratio. Peak memory of a kernel PCA fit is measured in
a fresh child process (the resident-size high-water mark above the size after loading the data).
``--background-load N`` instead times the KernelPCA fit twice, without added load and beside N busy
processes, as a notebook running next to other work would see it.
"""

import argparse
import contextlib
import datetime
import multiprocessing
import os
import platform
import statistics
import subprocess
import sys
import time

import numpy as np
from threadpoolctl import threadpool_limits

from rkm import _core, reference
from rkm._utils.config import config
from rkm._utils.eigen import krylov_block_size
from rkm.cli._args import ArgumentParser, fail, output_file, positive_int, thread_total
from rkm.cli.report import memory_status, write_report, write_section
from rkm.kernels import kernel_matrix
from rkm.shallow.kpca import KernelPCA

FULL = dict(
    kernel_sizes=[2000, 5000, 10000, 20000],
    kernel_dims=[16, 64, 784],
    center_sizes=[2000, 5000, 10000],
    kpca_sizes=[2000, 5000, 10000, 20000],
    kpca_components=[10, 50],
    eigen_sizes=[5000, 10000],
)
QUICK = dict(
    kernel_sizes=[2000],
    kernel_dims=[16, 64],
    center_sizes=[2000],
    kpca_sizes=[2000],
    kpca_components=[10],
    eigen_sizes=[2000],
)


def _timed(function, repeats):
    """Median wall time of `repeats` calls after one warm-up call, and the last result."""
    result = function()
    times = []
    for _ in range(repeats):
        del result
        start = time.perf_counter()
        result = function()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def _timed_in_child(function, repeats, check):
    """_timed in a forked child process: the median time, or NaN if the child crashed.

    scikit-learn's rbf_kernel computes X @ X.T, which NumPy sends to OpenBLAS's multi-threaded SYRK; that
    segfaults on some large inputs (N = 20000, d = 784 on the benchmark machine). A crash is recorded as
    such instead of ending the run. `check(result)` runs in the child and must return True.
    """
    context = multiprocessing.get_context("fork")
    queue = context.Queue()

    def child():
        seconds, result = _timed(function, repeats)
        queue.put(seconds if check(result) else "mismatch")

    process = context.Process(target=child)
    process.start()
    process.join()
    if process.exitcode != 0:
        return float("nan")
    seconds = queue.get()
    assert seconds != "mismatch", "the peer's result differs from rkm's"
    return seconds


# Relative eigenvalue error (against the dense or ARPACK solution) a peer must reach to count as equally accurate.
EQUAL_ACCURACY = 1e-8
# Largest N whose kernel PCA is also checked against the pure reference path (a dense eigh, O(N^3)).
REFERENCE_MAX_SAMPLES = 2000


def _repeats(n):
    return 3 if n <= 5000 else 1


def _kpca_gamma(X):
    """1 / the mean squared distance between the two halves of X: a bandwidth of typical scale."""
    half = X.shape[0] // 2
    return 1.0 / np.mean(np.sum((X[:half] - X[half : 2 * half]) ** 2, axis=1))


def dgemm_peak(n=3000):
    """Measured DGEMM rate (GFLOP/s) of NumPy's BLAS on this machine and thread count."""
    rng = np.random.default_rng(0)
    A, B = rng.random((n, n)), rng.random((n, n))
    seconds, _ = _timed(lambda: A @ B, 3)
    return 2.0 * n**3 / seconds / 1e9


def noisy_digits(n_samples, random_state=0):
    """d = 64 data with a realistic spectrum: scikit-learn's digits resampled with pixel noise."""
    from rkm.datasets import load_digits

    rng = np.random.default_rng(random_state)
    digits = load_digits().data
    return digits[rng.integers(0, len(digits), n_samples)] + 0.1 * rng.standard_normal((n_samples, 64))


def bench_kernels(sizes, dims, n_threads, log):
    """RBF kernel matrix: rkm vs the NumPy reference vs sklearn.metrics.pairwise.rbf_kernel."""
    from sklearn.metrics.pairwise import rbf_kernel

    rows = []
    rng = np.random.default_rng(0)
    for d in dims:
        for n in sizes:
            X = rng.standard_normal((n, d))
            gamma = 1.0 / d
            reps = _repeats(n)
            t_rkm, K = _timed(lambda: kernel_matrix(X, gamma=gamma, n_threads=n_threads), reps)
            t_ref, K_ref = _timed(lambda: reference.kernel_matrix(X, None, "rbf", gamma), reps)
            error = float(np.abs(K - K_ref).max())
            assert error < 1e-10, f"rkm and the reference disagree by {error}"
            del K_ref
            t_sk = _timed_in_child(
                lambda: rbf_kernel(X, gamma=gamma), reps, lambda K_sk, K=K: np.abs(K - K_sk).max() < 1e-10
            )
            del K
            gflops = 2.0 * n * n * d / t_rkm / 1e9
            rows.append((n, d, t_rkm, t_ref, t_sk, t_ref / t_rkm, t_sk / t_rkm, gflops, error))
            log(f"kernel N={n} d={d}: rkm {t_rkm:.3f}s ref {t_ref:.3f}s sklearn {t_sk:.3f}s")
    return rows


def bench_center(sizes, n_threads, log):
    """In-place centring vs sklearn's KernelCenterer and the reference."""
    from sklearn.preprocessing import KernelCenterer

    rows = []
    rng = np.random.default_rng(1)
    for n in sizes:
        K = kernel_matrix(rng.standard_normal((n, 16)), n_threads=n_threads)
        work = K.copy()
        _core.center_kernel(work, n_threads)
        expected = K.copy()
        reference.center_kernel(expected)
        assert np.abs(work - expected).max() < 1e-10
        del expected
        # Centring is idempotent, so re-centring `work` times the in-place pass without copying K.
        t_rkm, _ = _timed(lambda: _core.center_kernel(work, n_threads), 3)
        t_sk, centred = _timed(lambda: KernelCenterer().fit_transform(K), 3)
        assert np.abs(work - centred).max() < 1e-10
        del centred
        t_ref, _ = _timed(lambda: reference.center_kernel(K.copy()), 3)
        rows.append((n, t_rkm, t_sk, t_ref, t_sk / t_rkm))
        log(f"center N={n}: rkm {t_rkm:.3f}s sklearn {t_sk:.3f}s")
    return rows


def _subspace_error(U, V):
    """Largest principal angle (sine) between the column spaces of U and V (orthonormal columns)."""
    return float(np.linalg.norm(V - U @ (U.T @ V), 2))


def _sklearn_fit(X, n_components, gamma, solver):
    from sklearn.decomposition import KernelPCA as SklearnKernelPCA

    model = SklearnKernelPCA(n_components, kernel="rbf", gamma=gamma, eigen_solver=solver, random_state=0)
    return model.fit(X)


def _sklearn_solvers(n, dense_max=5000):
    # The dense solver costs O(N^3): beyond N = 5000 it is never the fastest.
    return ["arpack", "randomized"] + (["dense"] if n <= dense_max else [])


def _eigenvalue_error(model, accurate):
    """Largest eigenvalue difference of a fitted model to `accurate`, relative to the largest eigenvalue."""
    return float(np.max(np.abs(model.eigenvalues_ - accurate.eigenvalues_) / accurate.eigenvalues_[0]))


def _fastest_equal_peer(peers, accurate, bound):
    """The fastest solver in `peers` (name -> (seconds, model)) whose eigenvalue error is within `bound`."""
    equal = [name for name, (_, model) in peers.items() if _eigenvalue_error(model, accurate) <= bound]
    return min(equal, key=lambda name: peers[name][0])


def _assert_matches_reference(X, gamma, eigenvalues):
    """The pure-NumPy path (reference kernel, centring and dense eigh) must give rkm's eigenvalues."""
    K = reference.kernel_matrix(X, None, "rbf", gamma)
    reference.center_kernel(K)
    expected = reference.eigh(K)[0][: len(eigenvalues)]
    error = float(np.max(np.abs(eigenvalues - expected)) / expected[0])
    assert error < EQUAL_ACCURACY, f"rkm and the reference disagree by {error}"


def bench_kpca(sizes, components, n_threads, log):
    """KernelPCA fit vs the fastest of scikit-learn's solvers, with accuracy against each other."""
    rows = []
    for n in sizes:
        X = noisy_digits(n)
        gamma = _kpca_gamma(X)
        for s in components:
            reps = _repeats(n)
            t_rkm, ours = _timed(lambda: KernelPCA(s, gamma=gamma, n_threads=n_threads, random_state=0).fit(X), reps)
            peers = {}
            for solver in _sklearn_solvers(n):
                t, model = _timed(lambda: _sklearn_fit(X, s, gamma, solver), 1 if n > 2000 else reps)
                peers[solver] = (t, model)
                log(f"kpca N={n} s={s}: sklearn {solver} {t:.2f}s")
            accurate = peers.get("dense", peers["arpack"])[1]

            def eig_error(model):
                return _eigenvalue_error(model, accurate)

            # Only solvers as accurate as rkm count as peers ("at equal accuracy"); randomized SVD often is not.
            best = _fastest_equal_peer(peers, accurate, max(EQUAL_ACCURACY, eig_error(ours)))
            t_best, best_model = peers[best]
            angle = _subspace_error(accurate.eigenvectors_, ours.H_)
            assert eig_error(ours) < EQUAL_ACCURACY, f"rkm eigenvalues off by {eig_error(ours)}"
            if n <= REFERENCE_MAX_SAMPLES:
                _assert_matches_reference(X, gamma, ours.eigenvalues_)
            fastest = min(peers, key=lambda k: peers[k][0])
            rows.append(
                (
                    n,
                    s,
                    t_rkm,
                    best,
                    t_best,
                    t_best / t_rkm,
                    eig_error(ours),
                    angle,
                    eig_error(best_model),
                    ours.n_iter_,
                    fastest,
                    peers[fastest][0],
                    eig_error(peers[fastest][1]),
                )
            )
            log(
                f"kpca N={n} s={s}: rkm {t_rkm:.2f}s ({ours.n_iter_} block products), sklearn peer {best} {t_best:.2f}s"
            )
    return rows


# The KernelPCA comparison under background load: sizes (10 components) and timed fits per case (median),
# more than the main suite's because times beside busy processes scatter more.
LOAD_SIZES = [2000, 3000, 5000, 10000]
LOAD_SIZES_QUICK = [2000]
LOAD_COMPONENTS = 10
LOAD_REPEATS = 3
# Largest N at which the load comparison also tries scikit-learn's dense solver, whose O(N^3) fits would
# otherwise take most of the mode's minutes (in bench/RESULTS.md arpack is the faster one at every size).
LOAD_DENSE_MAX_SAMPLES = 2000
# A background process ends by itself after this long, or as soon as its parent is gone, should the
# benchmark die before it can terminate it.
LOAD_MAX_SECONDS = 1800
# Environment variables that change how threads wait or how many run; the load report records them.
THREAD_ENVIRONMENT = (
    "OMP_NUM_THREADS",
    "OMP_WAIT_POLICY",
    "GOMP_SPINCOUNT",
    "OMP_PROC_BIND",
    "OMP_DYNAMIC",
    "OPENBLAS_NUM_THREADS",
)
_SPIN_LOOP = """
import os, sys, time
parent, deadline = int(sys.argv[1]), time.monotonic() + float(sys.argv[2])
while os.getppid() == parent and time.monotonic() < deadline:
    for _ in range(100_000):
        pass
"""


@contextlib.contextmanager
def background_load(n_processes):
    """Keep `n_processes` pure-Python busy loops running in child processes for the duration of the block."""
    processes = []
    try:
        for _ in range(n_processes):
            processes.append(
                subprocess.Popen(
                    [sys.executable, "-c", _SPIN_LOOP, str(os.getpid()), str(LOAD_MAX_SECONDS)],
                    stdin=subprocess.DEVNULL,
                )
            )
        yield processes
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _load_case(n, log):
    """Data, bandwidth, the accurate eigenvalues and the peer solver of one size, chosen without added load."""
    X = noisy_digits(n)
    gamma = _kpca_gamma(X)
    peers = {
        solver: _timed(lambda: _sklearn_fit(X, LOAD_COMPONENTS, gamma, solver), 1)
        for solver in _sklearn_solvers(n, LOAD_DENSE_MAX_SAMPLES)
    }
    accurate = peers.get("dense", peers["arpack"])[1]
    peer = _fastest_equal_peer(peers, accurate, EQUAL_ACCURACY)
    log(
        f"kpca under load, N={n}: sklearn peer {peer} ("
        + ", ".join(f"{k} {t:.2f}s" for k, (t, _) in peers.items())
        + ")"
    )
    return {"n": n, "X": X, "gamma": gamma, "accurate": accurate, "peer": peer}


def _time_load_case(case, phase, log):
    """Median fit times of rkm (default threads, then 1 thread) and of the peer; the 1-minute load average after."""
    X, gamma = case["X"], case["gamma"]
    times = {}
    for label, threads in (("rkm", None), ("rkm 1 thread", 1)):
        times[label], model = _timed(
            lambda: KernelPCA(LOAD_COMPONENTS, gamma=gamma, n_threads=threads, random_state=0).fit(X), LOAD_REPEATS
        )
        error = _eigenvalue_error(model, case["accurate"])
        assert error < EQUAL_ACCURACY, f"{label} eigenvalues off by {error} ({phase}, N={case['n']})"
    times["peer"], _ = _timed(lambda: _sklearn_fit(X, LOAD_COMPONENTS, gamma, case["peer"]), LOAD_REPEATS)
    load = os.getloadavg()[0]
    log(
        f"kpca under load, {phase}, N={case['n']}: rkm {times['rkm']:.2f}s, 1 thread {times['rkm 1 thread']:.2f}s, "
        f"sklearn {case['peer']} {times['peer']:.2f}s; load average {load:.1f}"
    )
    return (
        case["n"],
        phase,
        load,
        times["rkm"],
        times["rkm 1 thread"],
        times["rkm 1 thread"] / times["rkm"],
        case["peer"],
        times["peer"],
        times["peer"] / times["rkm"],
        times["peer"] / times["rkm 1 thread"],
    )


def bench_kpca_under_load(sizes, n_background, log):
    """KernelPCA fit at default threads and at 1 thread vs the scikit-learn peer, without and with added load.

    The peer is chosen once per size before any load is added (the fastest equally accurate solver, as in
    :func:`bench_kpca`) and the same solver is timed in both phases; every rkm fit is checked against the
    accurate eigenvalues. Returns one row per size and phase, the row without added load first.
    """
    cases = [_load_case(n, log) for n in sizes]
    unloaded = [_time_load_case(case, "no added load", log) for case in cases]
    with background_load(n_background):
        phase = f"{n_background} busy process" + ("es" if n_background > 1 else "")
        busy = [_time_load_case(case, phase, log) for case in cases]
    return [row for pair in zip(unloaded, busy) for row in pair]


def _peak_fit_child(n, s, dtype, queue):
    X = noisy_digits(n).astype(dtype)
    with open("/proc/self/clear_refs", "w") as clear_refs:
        clear_refs.write("5")  # resets the peak (VmHWM) to the current resident size
    baseline = memory_status("VmRSS")
    KernelPCA(s, gamma=0.02, random_state=0).fit(X)
    queue.put(memory_status("VmHWM") - baseline)


def peak_fit_memory(n, s, dtype):
    """Peak resident memory (bytes) a KernelPCA fit adds, measured in a fresh process."""
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    child = context.Process(target=_peak_fit_child, args=(n, s, dtype, queue))
    child.start()
    peak = queue.get()
    child.join()
    return peak


def bench_eigen_dtypes(sizes, n_threads, log):
    """The eigen step alone in float64 and float32 (time), and the fit's peak memory per dtype."""
    rows = []
    for n in sizes:
        X = noisy_digits(n)
        K64 = kernel_matrix(X, gamma=0.02, n_threads=n_threads)
        _core.center_kernel(K64, n_threads)
        K32 = K64.astype(np.float32)
        start = np.random.default_rng(0).standard_normal((n, krylov_block_size(10, n)))
        t64, r64 = _timed(lambda K64=K64: _core.top_eigsh(K64, 10, start, None, None, n_threads), 3)
        t32, r32 = _timed(lambda K32=K32: _core.top_eigsh(K32, 10, start.astype(np.float32), None, None, n_threads), 3)
        del K64, K32
        relative = float(np.max(np.abs(r32[0] - r64[0]) / r64[0][0]))
        mem64, mem32 = peak_fit_memory(n, 10, np.float64), peak_fit_memory(n, 10, np.float32)
        matrix64 = n * n * 8
        rows.append(
            (
                n,
                t64,
                t32,
                t64 / t32,
                f"{r64[3]} / {r32[3]}",
                relative,
                mem64 / matrix64,
                mem32 / (matrix64 / 2),
                mem64 / mem32,
            )
        )
        log(
            f"eigen N={n}: float64 {t64:.3f}s float32 {t32:.3f}s; "
            f"fit peak {mem64 / 2**20:.0f} / {mem32 / 2**20:.0f} MiB"
        )
    return rows


def _table(header, rows, formats):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        lines.append("| " + " | ".join(f.format(v) for f, v in zip(formats, row)) + " |")
    return "\n".join(lines)


def _provenance(settings, info):
    """Who wrote the report, when, and on what: the first sentences of each report."""
    return (
        f"Written by `{settings['command']}` on {datetime.date.today().isoformat()}: "
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, {settings['n_threads']} threads for "
        f"every library (OpenMP and BLAS pinned), rkm {info['version']} ({info['compiler']}, OpenMP {info['openmp']}, "
        f"BLAS {info['blas']}), NumPy {np.__version__}."
    )


def render(results, settings):
    """The markdown report."""
    info = config()
    out = [
        "# Benchmark results",
        "",
        _provenance(settings, info) + " Times are medians after a warm-up run; ratios are peer time / rkm time "
        f"from the same run. Measured DGEMM peak: {results['peak']:.0f} GFLOP/s (float64).",
        "",
    ]
    if "kernels" in results:
        out += [
            "## RBF kernel matrix K(X, X), float64",
            "",
            _table(
                [
                    "N",
                    "d",
                    "rkm s",
                    "reference s",
                    "sklearn s",
                    "vs reference",
                    "vs sklearn",
                    "GEMM-equiv. GFLOP/s",
                    "max abs. difference to ref",
                ],
                results["kernels"],
                ["{}", "{}", "{:.3f}", "{:.3f}", "{:.3f}", "{:.2f}x", "{:.2f}x", "{:.0f}", "{:.1e}"],
            ),
            "",
            "GEMM-equivalent GFLOP/s counts 2 N^2 d flops; rkm builds one triangle, so half of them run. "
            "scikit-learn runs in a child process; nan means it crashed there (NumPy's OpenBLAS SYRK segfault "
            "on X @ X.T, which rkm.reference avoids by working in row blocks).",
            "",
        ]
    if "center" in results:
        out += [
            "## Centring a kernel matrix (in place) vs sklearn.preprocessing.KernelCenterer",
            "",
            _table(
                ["N", "rkm s", "sklearn s", "reference s", "vs sklearn"],
                results["center"],
                ["{}", "{:.3f}", "{:.3f}", "{:.3f}", "{:.2f}x"],
            ),
            "",
        ]
    if "kpca" in results:
        out += [
            "## KernelPCA fit (RBF, d = 64 noisy digits) vs the fastest equally accurate scikit-learn solver",
            "",
            _table(
                [
                    "N",
                    "s",
                    "rkm s",
                    "sklearn peer",
                    "peer s",
                    "speed-up",
                    "rkm eig. error",
                    "rkm subspace sine",
                    "peer eig. error",
                    "rkm block products",
                    "fastest sklearn",
                    "its s",
                    "its eig. error",
                ],
                results["kpca"],
                [
                    "{}",
                    "{}",
                    "{:.2f}",
                    "{}",
                    "{:.2f}",
                    "{:.2f}x",
                    "{:.1e}",
                    "{:.1e}",
                    "{:.1e}",
                    "{}",
                    "{}",
                    "{:.2f}",
                    "{:.1e}",
                ],
            ),
            "",
            "Errors are relative to the largest eigenvalue, against scikit-learn's dense solver where it "
            f"ran (N <= 5000), else against ARPACK. The peer is the fastest of scikit-learn's solvers (arpack, "
            f"randomized, dense up to N = 5000) whose eigenvalue error is within {EQUAL_ACCURACY:g}; the last "
            "three columns show the fastest one regardless of accuracy.",
            "",
        ]
    if "eigen" in results:
        out += [
            "## Eigen step and fit memory: float64 vs float32",
            "",
            _table(
                [
                    "N",
                    "eigen float64 s",
                    "eigen float32 s",
                    "time ratio",
                    "block products f64 / f32",
                    "eig. difference",
                    "fit peak / N^2 float64",
                    "fit peak / N^2 float32",
                    "memory ratio",
                ],
                results["eigen"],
                ["{}", "{:.3f}", "{:.3f}", "{:.2f}x", "{}", "{:.1e}", "{:.2f}", "{:.2f}", "{:.2f}x"],
            ),
            "",
            "Each dtype runs at its default tolerance (relative residuals 1e-10 in float64, 1e-4 in "
            "float32), so float32 also needs fewer block products; each of its products reads half the bytes.",
            "",
        ]
    return "\n".join(out)


LOAD_SECTION = "## KernelPCA fit without and with background load"


def render_load(rows, settings):
    """The markdown section of the background-load comparison."""
    environment = (
        ", ".join(
            f"{name}={settings['environment'][name]}" for name in THREAD_ENVIRONMENT if name in settings["environment"]
        )
        or "none set"
    )
    threads = settings["n_threads"]
    return "\n".join(
        [
            LOAD_SECTION,
            "",
            _provenance(settings, config()) + f" Thread environment at start: {environment}.",
            "",
            f"Each size is fitted (RBF, d = 64 noisy digits, {LOAD_COMPONENTS} components) without added load, then "
            f"again while {settings['background_load']} pure-Python busy loops run in background processes. rkm runs "
            f"at its default thread count ({threads}, pinned as above) and at 1 thread; the scikit-learn peer is the "
            f"fastest of its solvers (arpack, randomized, dense up to N = {LOAD_DENSE_MAX_SAMPLES}) whose eigenvalue error "
            f"is within {EQUAL_ACCURACY:g} (against dense where it ran, else arpack), chosen before the load is added and "
            f"timed with {threads} BLAS threads in both phases. "
            f"Times are medians of {LOAD_REPEATS} fits after a warm-up fit; ratios are from the same phase of the same "
            "run. The load average (1 minute, read after each case) also counts whatever else ran on the machine; it "
            "lags behind a load that has just started.",
            "",
            _table(
                [
                    "N",
                    "phase",
                    "load avg.",
                    f"rkm s ({threads} threads)",
                    "rkm s (1 thread)",
                    f"{threads} threads vs 1",
                    "sklearn peer",
                    "peer s",
                    f"peer / rkm {threads} threads",
                    "peer / rkm 1 thread",
                ],
                rows,
                ["{}", "{}", "{:.1f}", "{:.3f}", "{:.3f}", "{:.2f}x", "{}", "{:.3f}", "{:.2f}x", "{:.2f}x"],
            ),
            "",
            f'"{threads} threads vs 1" is the 1-thread time over the {threads}-thread time: below 1, the extra threads '
            "made the fit slower.",
            "",
        ]
    )


def _run_load_comparison(args, command, log):
    environment = {name: os.environ[name] for name in THREAD_ENVIRONMENT if name in os.environ}
    sizes = args.load_sizes or (LOAD_SIZES_QUICK if args.quick else LOAD_SIZES)
    with threadpool_limits(args.n_threads):
        rows = bench_kpca_under_load(sizes, args.background_load, log)
    section = render_load(rows, vars(args) | {"command": command, "environment": environment})
    write_section(args.output, LOAD_SECTION, section)
    log(f'wrote the section "{LOAD_SECTION[3:]}" of {args.output}')
    return 0


def _load_size(text):
    value = positive_int(text)
    if value < 2 * LOAD_COMPONENTS:
        raise argparse.ArgumentTypeError(f"must be at least {2 * LOAD_COMPONENTS}, got {text}")
    return value


def main(argv=None, command="rkm bench"):
    """Run the suite and write the markdown report; `command` is how it was started, for the report."""
    parser = ArgumentParser(prog="rkm bench", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes only (about a minute)")
    parser.add_argument(
        "--n-threads",
        type=thread_total,
        default="2",
        metavar="N",
        help="threads for every library (default 2; -1: all cores, -k: all but k - 1; at most the cores)",
    )
    parser.add_argument(
        "--output",
        type=output_file,
        default="RESULTS.md",
        help="markdown report to write, checked before the suite runs (default: %(default)s)",
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--only", nargs="*", choices=["kernels", "center", "kpca", "eigen"], help="run only these parts")
    mode.add_argument(
        "--background-load",
        type=positive_int,
        metavar="P",
        help="instead of the suite, time the KernelPCA fit (default threads, 1 thread, scikit-learn) "
        "without added load and again beside P busy background processes; writes (or "
        f'replaces) the section "{LOAD_SECTION[3:]}" of the report file',
    )
    parser.add_argument(
        "--load-sizes",
        type=_load_size,
        nargs="+",
        metavar="N",
        help=f"sizes for --background-load (default {' '.join(map(str, LOAD_SIZES))}; "
        f"--quick: {' '.join(map(str, LOAD_SIZES_QUICK))})",
    )
    args = parser.parse_args(argv)
    if args.load_sizes and args.background_load is None:
        parser.error("--load-sizes: only applies with --background-load")
    sizes = QUICK if args.quick else FULL
    parts = args.only or ["kernels", "center", "kpca", "eigen"]

    def log(message):
        print(message, flush=True)

    try:
        return _run(args, sizes, parts, command, log)
    except OSError as error:
        # The report file was checked when parsed; writing can still fail later (disk full, removed meanwhile).
        return fail("rkm bench", error)


def _run(args, sizes, parts, command, log):
    if args.background_load is not None:
        return _run_load_comparison(args, command, log)
    os.environ["OMP_NUM_THREADS"] = str(args.n_threads)  # for the memory probes' child processes
    results = {}
    with threadpool_limits(args.n_threads):
        results["peak"] = dgemm_peak()
        log(f"DGEMM peak {results['peak']:.0f} GFLOP/s on {args.n_threads} threads")
        if "kernels" in parts:
            results["kernels"] = bench_kernels(sizes["kernel_sizes"], sizes["kernel_dims"], args.n_threads, log)
        if "center" in parts:
            results["center"] = bench_center(sizes["center_sizes"], args.n_threads, log)
        if "kpca" in parts:
            results["kpca"] = bench_kpca(sizes["kpca_sizes"], sizes["kpca_components"], args.n_threads, log)
        if "eigen" in parts:
            results["eigen"] = bench_eigen_dtypes(sizes["eigen_sizes"], args.n_threads, log)
    report = render(results, vars(args) | {"command": command})
    write_report(args.output, report)
    log(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
