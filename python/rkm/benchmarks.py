"""The benchmark suite behind ``rkm bench`` and ``bench/run.py``.

Every case times rkm against its peers in the same process, on the same data and thread count, after
one warm-up run of each (first touches of fresh memory are slow on virtual machines and would otherwise
be charged to whoever runs first), reports the median of the repeats, and asserts that the results
agree with the NumPy reference before it records a ratio. Peak memory of a kernel PCA fit is measured in
a fresh child process (the resident-size high-water mark above the size after loading the data).
"""

import argparse
import datetime
import multiprocessing
import os
import platform
import statistics
import sys
import time

import numpy as np
from threadpoolctl import threadpool_limits

from rkm import _core, reference
from rkm._config import config
from rkm.kernels import kernel_matrix
from rkm.kpca import KernelPCA, krylov_block_size

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


# Relative eigenvalue error (against the dense or ARPACK solution) a peer must reach to count as equally accurate.
EQUAL_ACCURACY = 1e-8
# Largest N whose kernel PCA is also checked against the pure reference path (a dense eigh, O(N^3)).
REFERENCE_MAX_SAMPLES = 2000


def _repeats(n):
    return 3 if n <= 5000 else 1


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
            t_sk, K_sk = _timed(lambda: rbf_kernel(X, gamma=gamma), reps)
            assert np.abs(K - K_sk).max() < 1e-10
            del K, K_sk
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
        gamma = 1.0 / np.mean(np.sum((X[: n // 2] - X[n // 2 : 2 * (n // 2)]) ** 2, axis=1))
        for s in components:
            reps = _repeats(n)
            t_rkm, ours = _timed(lambda: KernelPCA(s, gamma=gamma, n_threads=n_threads, random_state=0).fit(X), reps)
            solvers = ["arpack", "randomized"] + (["dense"] if n <= 5000 else [])
            peers = {}
            for solver in solvers:
                t, model = _timed(lambda: _sklearn_fit(X, s, gamma, solver), 1 if n > 2000 else reps)
                peers[solver] = (t, model)
                log(f"kpca N={n} s={s}: sklearn {solver} {t:.2f}s")
            accurate = peers.get("dense", peers["arpack"])[1]

            def eig_error(model):
                return float(np.max(np.abs(model.eigenvalues_ - accurate.eigenvalues_) / accurate.eigenvalues_[0]))

            # Only solvers as accurate as rkm count as peers ("at equal accuracy"); randomized SVD often is not.
            equal = [k for k in peers if eig_error(peers[k][1]) <= max(EQUAL_ACCURACY, eig_error(ours))]
            best = min(equal, key=lambda k: peers[k][0])
            t_best, best_model = peers[best]
            angle = _subspace_error(accurate.eigenvectors_, ours.H_)
            assert eig_error(ours) < EQUAL_ACCURACY, f"rkm eigenvalues off by {eig_error(ours)}"
            if n <= REFERENCE_MAX_SAMPLES:
                _assert_matches_reference(X, gamma, ours.eigenvalues_)
            fastest = min(peers, key=lambda k: peers[k][0])
            rows.append((n, s, t_rkm, best, t_best, t_best / t_rkm, eig_error(ours), angle, eig_error(best_model),
                         ours.n_iter_, fastest, peers[fastest][0], eig_error(peers[fastest][1])))
            log(f"kpca N={n} s={s}: rkm {t_rkm:.2f}s ({ours.n_iter_} block products), "
                f"sklearn peer {best} {t_best:.2f}s")
    return rows


def _memory_status(field):
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"/proc/self/status has no {field}")


def _peak_fit_child(n, s, dtype, queue):
    X = noisy_digits(n).astype(dtype)
    with open("/proc/self/clear_refs", "w") as clear_refs:
        clear_refs.write("5")  # resets the peak (VmHWM) to the current resident size
    baseline = _memory_status("VmRSS")
    KernelPCA(s, gamma=0.02, random_state=0).fit(X)
    queue.put(_memory_status("VmHWM") - baseline)


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
        t64, r64 = _timed(lambda: _core.top_eigsh(K64, 10, start, None, None, n_threads), 3)
        t32, r32 = _timed(lambda: _core.top_eigsh(K32, 10, start.astype(np.float32), None, None, n_threads), 3)
        del K64, K32
        relative = float(np.max(np.abs(r32[0] - r64[0]) / r64[0][0]))
        mem64, mem32 = peak_fit_memory(n, 10, np.float64), peak_fit_memory(n, 10, np.float32)
        matrix64 = n * n * 8
        rows.append((n, t64, t32, t64 / t32, f"{r64[3]} / {r32[3]}", relative, mem64 / matrix64,
                     mem32 / (matrix64 / 2), mem64 / mem32))
        log(f"eigen N={n}: float64 {t64:.3f}s float32 {t32:.3f}s; "
            f"fit peak {mem64 / 2**20:.0f} / {mem32 / 2**20:.0f} MiB")
    return rows


def _table(header, rows, formats):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        lines.append("| " + " | ".join(f.format(v) for f, v in zip(formats, row)) + " |")
    return "\n".join(lines)


def render(results, settings):
    """The markdown report."""
    info = config()
    out = [
        "# Benchmark results",
        "",
        f"Written by `{settings['command']}` on {datetime.date.today().isoformat()}: {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} cores, {settings['n_threads']} threads for every library (OpenMP and BLAS pinned), "
        f"rkm {info['version']} ({info['compiler']}, OpenMP {info['openmp']}, BLAS {info['blas']}), "
        f"NumPy {np.__version__}. Times are medians after a warm-up run; ratios are peer time / rkm time "
        "from the same run. Measured DGEMM peak: "
        f"{results['peak']:.0f} GFLOP/s (float64).",
        "",
    ]
    if "kernels" in results:
        out += ["## RBF kernel matrix K(X, X), float64", "",
                _table(["N", "d", "rkm s", "reference s", "sklearn s", "vs reference", "vs sklearn",
                        "GEMM-equiv. GFLOP/s", "max abs. difference to ref"], results["kernels"],
                       ["{}", "{}", "{:.3f}", "{:.3f}", "{:.3f}", "{:.2f}x", "{:.2f}x", "{:.0f}", "{:.1e}"]),
                "", "GEMM-equivalent GFLOP/s counts 2 N^2 d flops; rkm builds one triangle, so half of them run.",
                ""]
    if "center" in results:
        out += ["## Centring a kernel matrix (in place) vs sklearn.preprocessing.KernelCenterer", "",
                _table(["N", "rkm s", "sklearn s", "reference s", "vs sklearn"], results["center"],
                       ["{}", "{:.3f}", "{:.3f}", "{:.3f}", "{:.2f}x"]), ""]
    if "kpca" in results:
        out += ["## KernelPCA fit (RBF, d = 64 noisy digits) vs the fastest equally accurate scikit-learn solver",
                "",
                _table(["N", "s", "rkm s", "sklearn peer", "peer s", "speed-up", "rkm eig. error",
                        "rkm subspace sine", "peer eig. error", "rkm block products", "fastest sklearn",
                        "its s", "its eig. error"], results["kpca"],
                       ["{}", "{}", "{:.2f}", "{}", "{:.2f}", "{:.2f}x", "{:.1e}", "{:.1e}", "{:.1e}", "{}", "{}",
                        "{:.2f}", "{:.1e}"]),
                "", "Errors are relative to the largest eigenvalue, against scikit-learn's dense solver where it "
                f"ran (N <= 5000), else against ARPACK. The peer is the fastest of scikit-learn's solvers (arpack, "
                f"randomized, dense up to N = 5000) whose eigenvalue error is within {EQUAL_ACCURACY:g}; the last "
                "three columns show the fastest one regardless of accuracy.", ""]
    if "eigen" in results:
        out += ["## Eigen step and fit memory: float64 vs float32", "",
                _table(["N", "eigen float64 s", "eigen float32 s", "time ratio", "block products f64 / f32",
                        "eig. difference", "fit peak / N^2 float64", "fit peak / N^2 float32", "memory ratio"],
                       results["eigen"],
                       ["{}", "{:.3f}", "{:.3f}", "{:.2f}x", "{}", "{:.1e}", "{:.2f}", "{:.2f}", "{:.2f}x"]),
                "", "Each dtype runs at its default tolerance (relative residuals 1e-10 in float64, 1e-4 in "
                "float32), so float32 also needs fewer block products; each of its products reads half the bytes.",
                ""]
    return "\n".join(out)


def main(argv=None, command="rkm bench"):
    """Run the suite and write the markdown report; `command` is how it was started, for the report."""
    parser = argparse.ArgumentParser(prog="rkm bench", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes only (about a minute)")
    parser.add_argument("--n-threads", type=int, default=2, help="threads for every library (default 2)")
    parser.add_argument("--output", default="RESULTS.md", help="markdown report to write")
    parser.add_argument("--only", nargs="*", choices=["kernels", "center", "kpca", "eigen"],
                        help="run only these parts")
    args = parser.parse_args(argv)
    sizes = QUICK if args.quick else FULL
    parts = args.only or ["kernels", "center", "kpca", "eigen"]

    def log(message):
        print(message, flush=True)

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
    with open(args.output, "w") as handle:
        handle.write(report + "\n")
    log(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
