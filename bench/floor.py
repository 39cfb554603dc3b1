"""The machine's floor: rkm's routines against the least time this machine needs for their work, measured in one
process, so that every later change shows its effect on one table.

Parts (``--part``, default all):

- ``limits``: the machine's rates at the thread count: GEMM (NumPy's BLAS, float64 and float32) on a square
  3000 x 3000 product and on the shape of a kernel band ((4096 x d) @ (d x 4096), d = 64 and 784); streaming read
  (a matrix-vector product over 1 GiB, the read of one block product); streaming write (1 GiB filled by as many
  threads, into touched memory, and for context into newly allocated memory, whose page faults every new kernel
  matrix pays: the floors leave them out); exp and cos on 2^20 doubles, one thread, NumPy's against the core's
  vectorized code.
- ``kpca``: ``KernelPCA(10, kernel="rbf", kernel_storage="dense")`` on noisy digits (N = 20 000, d = 64; scikit-learn's
  digits resampled with pixel noise, as ``rkm bench``), float64 and float32. Its floor: the kernel's inner products
  at the GEMM rate of the band shape (N^2 d flops: one triangle), one write of K, and one read of K's lower
  triangle per block product (n_iter_ of the fit). Where the GEMM rate is low against the memory bandwidth (here
  1.5 flops per byte), a product of b columns takes longer to compute than to read: the second floor charges
  each product the longer of the read and its 2 N^2 b flops at the square GEMM rate.
- ``rbf``: ``rkm.kernels.kernel_matrix(X, kernel="rbf")`` for N = 5000 at d = 64 and 784 in float64 and float32:
  the float32 speed-up and each dtype's fraction of its floor (N^2 d flops at the band shape's GEMM rate, one
  write of K).
- ``nystrom``: ``KernelPCA(10, feature_map=rkm.features.Nystroem(500))`` against scikit-learn's
  ``make_pipeline(Nystroem(n_components=500), PCA(10))`` on the same noisy digits (N = 20 000), same gamma, same
  landmarks' count, alternating runs; its floor: the features' kernel (N m d flops at the band shape's GEMM rate,
  the exps at the core's rate) and their scatter (N m^2 flops at the square GEMM rate).

Seconds are medians over ``--repeats`` runs after one warm-up; the fraction of the floor is floor / measured
(1 = at the machine's limit). Written to the ``## Performance floor (bench/floor.py)`` section of RESULTS.md.

    python bench/floor.py [--part limits kpca rbf nystrom matfree lssvm constr kae multiview] [--n-threads 2] [--repeats 5]
                          [--quick]
"""

import concurrent.futures
import sys
import time

import numpy as np
from _common import RESULTS, log, median_seconds, pinned_threads, script_parser, write_script_section

from rkm.cli.report import markdown_table

HEADING = "## Performance floor (bench/floor.py)"
PARTS = ("limits", "kpca", "rbf", "nystrom", "matfree", "lssvm", "constr", "kae", "multiview")
KERNEL_DIMENSIONS = (64, 784)
BAND = 4096  # rows and columns of the kernel band whose GEMM rate the floors use
STREAM_BYTES = 2**30
# OpenBLAS's idle threads spin for about a tenth of a second after each call before they sleep: timings that
# alternate between backends wait that long first, so that one backend's spinning threads do not take the
# cores of the next one's timed calls (the core's objective at N = 1000 took 10 ms right after the reference,
# 5.5 ms alone).
BLAS_SPIN_SECONDS = 0.3


# ------------------------------------------------------------------------------------------------ machine limits


def gemm_gflops(dtype, m, k, n, repeats):
    """GFLOP/s of (m x k) @ (k x n) in dtype."""
    rng = np.random.default_rng(0)
    A, B = rng.random((m, k)).astype(dtype), rng.random((k, n)).astype(dtype)
    out = np.empty((m, n), dtype)
    seconds = median_seconds(lambda: np.matmul(A, B, out=out), repeats)
    return 2.0 * m * k * n / seconds / 1e9


def read_gbps(repeats):
    """GB/s of a matrix-vector product over STREAM_BYTES of doubles: a streaming read on every BLAS thread."""
    A = np.ones((STREAM_BYTES // 8 // 4096, 4096))
    x = np.ones(4096)
    seconds = median_seconds(lambda: A @ x, repeats)
    return A.nbytes / seconds / 1e9


def write_gbps(n_threads, repeats, fresh=False):
    """GB/s of filling STREAM_BYTES of doubles, split among n_threads threads (NumPy releases the GIL): memory
    touched before, or (`fresh`) newly allocated at each run, whose page faults a new kernel matrix pays."""

    def fill():
        A = np.empty(STREAM_BYTES // 8)
        with concurrent.futures.ThreadPoolExecutor(n_threads) as pool:
            list(pool.map(lambda part: part.fill(1.0), np.array_split(A, n_threads)))
        return A

    if fresh:
        return STREAM_BYTES / median_seconds(fill, repeats) / 1e9
    A = fill()
    parts = np.array_split(A, n_threads)
    with concurrent.futures.ThreadPoolExecutor(n_threads) as pool:
        seconds = median_seconds(lambda: list(pool.map(lambda part: part.fill(1.0), parts)), repeats)
    return A.nbytes / seconds / 1e9


def elementwise_ns(function, x, repeats):
    """Nanoseconds per element of function(x), one thread."""
    return median_seconds(lambda: function(x), repeats, calls=5) / x.size * 1e9


def transcendental_rates(repeats):
    """ns per double of exp (on [-20, 0], the kernels' range) and cos (on [-100, 100], random Fourier features'
    phases): NumPy's against the core's vectorized code (rkm._core.vector_exp / vector_cos)."""
    from rkm import _core

    x, y = np.linspace(-20.0, 0.0, 2**20), np.linspace(-100.0, 100.0, 2**20)
    return {
        "exp_ns_numpy": elementwise_ns(np.exp, x, repeats),
        "exp_ns_core": elementwise_ns(_core.vector_exp, x, repeats),
        "cos_ns_numpy": elementwise_ns(np.cos, y, repeats),
        "cos_ns_core": elementwise_ns(_core.vector_cos, y, repeats),
    }


def measure_limits(n_threads, repeats):
    limits = {"threads": n_threads}
    with pinned_threads(n_threads):
        for dtype in (np.float64, np.float32):
            name = np.dtype(dtype).name
            limits[f"gemm_{name}_square"] = gemm_gflops(dtype, 3000, 3000, 3000, repeats)
            for d in KERNEL_DIMENSIONS:
                limits[f"gemm_{name}_band_{d}"] = gemm_gflops(dtype, BAND, d, BAND, repeats)
        limits["read_gbps"] = read_gbps(repeats)
    limits["write_gbps"] = write_gbps(n_threads, repeats)
    limits["fresh_write_gbps"] = write_gbps(n_threads, repeats, fresh=True)
    with pinned_threads(1):
        limits.update(transcendental_rates(repeats))
    log(f"limits: {limits}")
    return limits


def limits_table(limits):
    rows = [
        ("GEMM float64, 3000 x 3000 x 3000", f"{limits['gemm_float64_square']:.0f} GFLOP/s"),
        ("GEMM float32, 3000 x 3000 x 3000", f"{limits['gemm_float32_square']:.0f} GFLOP/s"),
    ]
    for d in KERNEL_DIMENSIONS:
        for name in ("float64", "float32"):
            rows.append(
                (
                    f"GEMM {name}, kernel band ({BAND} x {d}) @ ({d} x {BAND})",
                    f"{limits[f'gemm_{name}_band_{d}']:.0f} GFLOP/s",
                )
            )
    rows += [
        ("streaming read (matrix-vector product over 1 GiB)", f"{limits['read_gbps']:.1f} GB/s"),
        (f"streaming write (1 GiB filled by {limits['threads']} threads)", f"{limits['write_gbps']:.1f} GB/s"),
        (
            "the same into newly allocated memory (page faults; not in the floors)",
            f"{limits['fresh_write_gbps']:.1f} GB/s",
        ),
    ]
    for function in ("exp", "cos"):
        rows += [
            (f"np.{function}, one thread", f"{limits[f'{function}_ns_numpy']:.2f} ns per double"),
            (
                f"the core's {function} (rkm._core.vector_{function}), one thread",
                f"{limits[f'{function}_ns_core']:.2f} ns per double",
            ),
        ]
    return markdown_table(("limit", "rate"), rows)


# ---------------------------------------------------------------------------------------------------- floors


def kernel_floor(n, d, dtype, limits):
    """Seconds of the inner products of K(X, X) (one triangle, N^2 d flops) at the band shape's GEMM rate and one
    write of K."""
    name = np.dtype(dtype).name
    gemm = n * n * d / (limits[f"gemm_{name}_band_{d}"] * 1e9)
    write = n * n * np.dtype(dtype).itemsize / (limits["write_gbps"] * 1e9)
    return gemm + write


def kpca_floors(n, d, dtype, n_iter, block, limits):
    """(the issue's floor, the floor with the products' flops): kernel_floor and, per block product, one read of
    K's lower triangle; or the longer of that read and the product's 2 N^2 b flops (each stored element serves
    two products) at the square GEMM rate of the dtype."""
    name, item = np.dtype(dtype).name, np.dtype(dtype).itemsize
    read = n * n / 2 * item / (limits["read_gbps"] * 1e9)
    flops = 2 * n * n * block / (limits[f"gemm_{name}_square"] * 1e9)
    kernel = kernel_floor(n, d, dtype, limits)
    return kernel + n_iter * read, kernel + n_iter * max(read, flops)


# ------------------------------------------------------------------------------------------------------ parts


def noisy_digits(n_samples, random_state=0):
    from rkm.cli.bench import noisy_digits as digits

    return digits(n_samples, random_state)


def measure_kpca(n, n_threads, repeats, limits):
    from rkm import KernelPCA
    from rkm._utils.eigen import krylov_block_size

    X64 = noisy_digits(n)
    gamma = 1.0 / (2.0 * X64.var(axis=0).sum())  # 1 / the mean squared distance between two rows
    rows = []
    for dtype in (np.float64, np.float32):
        X = X64.astype(dtype)
        model = KernelPCA(10, kernel="rbf", gamma=gamma, kernel_storage="dense", n_threads=n_threads, random_state=0)
        with pinned_threads(n_threads):
            seconds = median_seconds(lambda model=model, X=X: model.fit(X), repeats)
        block = krylov_block_size(10, n)
        floor, compute_floor = kpca_floors(n, X.shape[1], dtype, model.n_iter_, block, limits)
        rows.append(
            {
                "dtype": np.dtype(dtype).name,
                "n": n,
                "seconds": seconds,
                "n_iter": int(model.n_iter_),
                "block": block,
                "floor": floor,
                "compute_floor": compute_floor,
            }
        )
        log(f"kpca {rows[-1]}")
    return rows


def measure_rbf(n, n_threads, repeats, limits):
    from rkm.kernels import kernel_matrix

    rows = []
    for d in KERNEL_DIMENSIONS:
        X64 = np.random.default_rng(0).standard_normal((n, d))
        gamma = 1.0 / (2.0 * d)
        for dtype in (np.float64, np.float32):
            X = X64.astype(dtype)
            with pinned_threads(n_threads):
                seconds = median_seconds(
                    lambda X=X: kernel_matrix(X, kernel="rbf", gamma=gamma, n_threads=n_threads), repeats
                )
            rows.append(
                {
                    "d": d,
                    "dtype": np.dtype(dtype).name,
                    "n": n,
                    "seconds": seconds,
                    "floor": kernel_floor(n, d, dtype, limits),
                }
            )
            log(f"rbf {rows[-1]}")
    return rows


def measure_nystrom(n, rank, n_threads, repeats, limits):
    from sklearn.decomposition import PCA
    from sklearn.kernel_approximation import Nystroem
    from sklearn.pipeline import make_pipeline

    from rkm import KernelPCA, features

    X = noisy_digits(n)
    gamma = 1.0 / (2.0 * X.var(axis=0).sum())
    fits = {
        "rkm": lambda: KernelPCA(
            10,
            feature_map=features.Nystroem(rank, gamma=gamma, random_state=0, n_threads=n_threads),
            n_threads=n_threads,
        ).fit(X),
        "scikit-learn": lambda: make_pipeline(
            Nystroem(gamma=gamma, n_components=rank, random_state=0), PCA(10, random_state=0)
        ).fit(X),
    }
    times = {name: [] for name in fits}
    with pinned_threads(n_threads):
        for fit in fits.values():
            fit()  # warm-up
        for _ in range(repeats):
            for name, fit in fits.items():
                began = time.perf_counter()
                fit()
                times[name].append(time.perf_counter() - began)
    d = X.shape[1]
    floor = (
        n * rank * d * 2 / (limits["gemm_float64_band_64"] * 1e9)
        + n * rank * limits["exp_ns_core"] / n_threads * 1e-9
        + n * rank * rank / (limits["gemm_float64_square"] * 1e9)
    )
    row = {"n": n, "rank": rank, "floor": floor, **{name: float(np.median(t)) for name, t in times.items()}}
    log(f"nystrom {row}")
    return row


def measure_matfree(n, b, n_threads, repeats, limits):
    """Seconds of one matrix-free block product K(X, X) @ B per dtype, and its floor."""
    from rkm import _core

    X64 = noisy_digits(n)
    gamma = 1.0 / (2.0 * X64.var(axis=0).sum())
    B64 = np.random.default_rng(0).standard_normal((n, b))
    d, rows = X64.shape[1], []
    for dtype in (np.float64, np.float32):
        X, B = X64.astype(dtype), B64.astype(dtype)
        name = np.dtype(dtype).name
        with pinned_threads(1):  # the core's OpenMP threads call BLAS: one BLAS thread each
            seconds = median_seconds(
                lambda X=X, B=B: _core.kernel_product(X, None, B, "rbf", gamma, n_threads=n_threads), repeats
            )
        floor = (
            n * n * d / (limits[f"gemm_{name}_band_{d}"] * 1e9)
            + n * n / 2 * limits["exp_ns_core"] / n_threads * 1e-9
            + 2 * n * n * b / (limits["gemm_float64_square"] * 1e9)
        )
        rows.append({"dtype": name, "n": n, "b": b, "seconds": seconds, "floor": floor})
        log(f"matfree {rows[-1]}")
    return rows


def matfree_table(rows):
    header = ("dtype", "N", "b", "seconds", "floor seconds", "fraction of the floor")
    return markdown_table(
        header,
        [
            (
                r["dtype"],
                str(r["n"]),
                str(r["b"]),
                f"{r['seconds']:.3f}",
                f"{r['floor']:.3f}",
                f"{r['floor'] / r['seconds']:.0%}",
            )
            for r in rows
        ],
    )


def measure_lssvm(n, n_threads, repeats, limits):
    """Alternating fits of rkm (float64, mixed precision) and KernelRidge at N = n; the mixed solution's distance."""
    from lssvm_perf import GAMMA, LAM, make_data
    from sklearn.kernel_ridge import KernelRidge

    from rkm import LSSVMRegressor

    X, y = make_data(n)
    models = {
        "rkm": LSSVMRegressor(kernel="rbf", gamma=GAMMA, lam=LAM, solver="cholesky", n_threads=n_threads),
        "rkm_mixed": LSSVMRegressor(
            kernel="rbf", gamma=GAMMA, lam=LAM, solver="cholesky", mixed_precision=True, n_threads=n_threads
        ),
        # the same system without the bias row: (K + lambda I) alpha = y
        "kernel_ridge": KernelRidge(kernel="rbf", gamma=GAMMA, alpha=LAM),
    }
    times = {name: [] for name in models}
    with pinned_threads(n_threads):
        for _ in range(repeats):
            for name, model in models.items():
                began = time.perf_counter()
                model.fit(X, y)
                times[name].append(time.perf_counter() - began)
    exact, mixed = models["rkm"].dual_coef_, models["rkm_mixed"].dual_coef_
    kernel = kernel_floor(n, 64, np.float64, limits) * X.shape[1] / 64  # the d = 64 band rate, scaled to d
    row = {
        "n": n,
        "difference": float(np.max(np.abs(mixed - exact)) / np.max(np.abs(exact))),
        "floor": n**3 / 3 / (limits["gemm_float64_square"] * 1e9) + kernel,
        "floor_mixed": n**3 / 3 / (limits["gemm_float32_square"] * 1e9) + kernel,
        **{name: float(np.median(t)) for name, t in times.items()},
    }
    log(f"lssvm {row}")
    return row


def lssvm_table(row):
    header = (
        "fit",
        "seconds",
        "KernelRidge / rkm",
        "floor seconds",
        "fraction of the floor",
        "max |H - H_float64| / max |H|",
    )
    kr = row["kernel_ridge"]
    cells = [
        ("rkm, float64 Cholesky", row["rkm"], row["floor"], "-"),
        ("rkm, mixed_precision=True", row["rkm_mixed"], row["floor_mixed"], f"{row['difference']:.1e}"),
    ]
    table = [
        (label, f"{seconds:.2f}", f"{kr / seconds:.2f}x", f"{floor:.2f}", f"{floor / seconds:.0%}", difference)
        for label, seconds, floor, difference in cells
    ]
    table.append(("KernelRidge (no bias row)", f"{kr:.2f}", "-", "-", "-", "-"))
    return markdown_table(header, table)


def measure_constr(sizes, n_threads, repeats):
    """Objective and gradient per N (core with one BLAS thread, reference with n_threads) and the PG solve."""
    from _common import TABLE1_SIZES, TABLE1_TOL, blas_threads
    from constr_drkm_perf import digits, table1_objective

    from rkm import _core
    from rkm.reference.stiefel import stiefel_minimize
    from rkm.stiefel import random_point

    rows = []
    for n in sizes:
        X = digits(n)
        core, ref = (table1_objective(X, backend, n_threads) for backend in ("core", "reference"))
        H = random_point(n, sum(TABLE1_SIZES), random_state=0)
        times = {"core": [], "reference": []}
        for _ in range(repeats):
            time.sleep(BLAS_SPIN_SECONDS)
            with blas_threads(1):
                times["core"].append(median_seconds(lambda: core.evaluate(H), 1, calls=10))
            time.sleep(BLAS_SPIN_SECONDS)
            with blas_threads(n_threads):
                times["reference"].append(median_seconds(lambda: ref.evaluate(H), 1))
        rows.append({"n": n, **{name: float(np.median(t)) for name, t in times.items()}})
        log(f"constr {rows[-1]}")
    X = digits(1000)
    core, ref = (table1_objective(X, backend, n_threads) for backend in ("core", "reference"))
    H0 = random_point(1000, sum(TABLE1_SIZES), random_state=0)
    solves = {}
    with blas_threads(1):
        began = time.perf_counter()
        result = _core.stiefel_minimize(core, H0, "pg", TABLE1_TOL, 100000, {})
        solves["core"] = (time.perf_counter() - began, result["nit"], result["status"])
    with blas_threads(n_threads):
        began = time.perf_counter()
        result = stiefel_minimize(ref, H0, "pg", TABLE1_TOL, 100000, {})
        solves["reference"] = (time.perf_counter() - began, result["nit"], result["status"])
    log(f"constr pg {solves}")
    return rows, solves


def constr_tables(rows, solves):
    objective = markdown_table(
        ("N", "core ms", "reference ms", "speed-up (target 5x)"),
        [
            (str(r["n"]), f"{1e3 * r['core']:.2f}", f"{1e3 * r['reference']:.1f}", f"{r['reference'] / r['core']:.1f}x")
            for r in rows
        ],
    )
    core, ref = solves["core"], solves["reference"]
    solve = markdown_table(
        ("PG solve, N = 1000", "status", "iterations", "seconds", "ms per iteration", "speed-up (target 5x)"),
        [
            (
                label,
                str(status),
                str(nit),
                f"{seconds:.2f}",
                f"{1e3 * seconds / max(nit, 1):.2f}",
                f"{ref[0] / seconds:.1f}x" if label == "core" else "-",
            )
            for label, (seconds, nit, status) in (("core", core), ("reference", ref))
        ],
    )
    return objective, solve


def measure_kae(n, repeats, limits):
    """Seconds per loss-and-gradient call, core adjoint and NumPy reference, one thread, interleaved."""
    from _kae_perf import HIDDEN, evaluate, perf_inputs, relative_difference

    inputs = perf_inputs(n)
    results = {backend: evaluate(backend, inputs, 1) for backend in ("core_adjoint", "reference_adjoint")}
    times = {backend: [] for backend in results}
    with pinned_threads(1):
        for _ in range(repeats):
            for backend in times:
                times[backend].append(median_seconds(lambda b=backend: evaluate(b, inputs, 1), 1, calls=20))
    layers = len(HIDDEN) + 1
    row = {
        "n": n,
        "difference": relative_difference(results["reference_adjoint"][1], results["core_adjoint"][1]),
        "floor": layers * n * n / 2 * limits["exp_ns_core"] * 1e-9,
        **{backend: float(np.median(t)) for backend, t in times.items()},
    }
    log(f"kae {row}")
    return row


def kae_table(row):
    core, ref = row["core_adjoint"], row["reference_adjoint"]
    header = ("n", "core ms", "reference ms", "speed-up (target 8x)", "exp floor ms", "core's fraction of the floor")
    cells = (str(row["n"]), f"{1e3 * core:.3f}", f"{1e3 * ref:.3f}", f"{ref / core:.1f}x", f"{1e3 * row['floor']:.3f}")
    return markdown_table(header, [(*cells, f"{row['floor'] / core:.0%}")])


def measure_multiview(n_features, s, n_threads, repeats, iterations):
    """Seconds per Stiefel iteration on -1/2 Tr(U^T C U) and of one C @ U product at the square GEMM rate."""
    from rkm import stiefel

    rng = np.random.default_rng(0)
    F = rng.standard_normal((2 * n_features, n_features + 1))
    C = F.T @ F / F.shape[0]

    def objective(U):
        CU = C @ U
        return -0.5 * float(np.sum(U * CU)), -CU

    start = stiefel.random_point(n_features + 1, s, random_state=0)
    with pinned_threads(n_threads):
        per_iteration = []
        for _ in range(repeats):
            result = stiefel.minimize(objective, start, tol=1e-300, max_iter=iterations)
            per_iteration.append(result.time / max(result.nit, 1))
        product = median_seconds(lambda: C @ start, repeats)
    row = {
        "n": n_features + 1,
        "s": s,
        "iteration": float(np.median(per_iteration)),
        "evaluations": result.nfev / max(result.nit, 1),
        "product": product,
    }
    log(f"multiview {row}")
    return row


def multiview_table(row):
    header = ("U", "method", "ms per iteration", "evaluations per iteration", "one C @ U (ms)", "iteration / product")
    cells = (
        f"{row['n']} x {row['s']}",
        "cayley_bb (default)",
        f"{1e3 * row['iteration']:.1f}",
        f"{row['evaluations']:.2f}",
        f"{1e3 * row['product']:.1f}",
        f"{row['iteration'] / row['product']:.2f}x (target <= 2x)",
    )
    return markdown_table(header, [cells])


def nystrom_table(row):
    header = (
        "N",
        "m",
        "rkm seconds",
        "scikit-learn seconds",
        "speed-up",
        "floor seconds",
        "rkm's fraction of the floor",
    )
    speedup, fraction = row["scikit-learn"] / row["rkm"], row["floor"] / row["rkm"]
    cells = (row["n"], row["rank"], f"{row['rkm']:.3f}", f"{row['scikit-learn']:.3f}", f"{speedup:.2f}x")
    return markdown_table(header, [(*map(str, cells), f"{row['floor']:.3f}", f"{fraction:.0%}")])


def kpca_table(rows):
    header = (
        "dtype",
        "N",
        "fit seconds",
        "block products (b columns)",
        "floor seconds",
        "fraction of the floor",
        "floor with the products' flops",
        "fraction of that floor",
    )
    return markdown_table(
        header,
        [
            (
                r["dtype"],
                str(r["n"]),
                f"{r['seconds']:.2f}",
                f"{r['n_iter']} ({r['block']})",
                f"{r['floor']:.2f}",
                f"{r['floor'] / r['seconds']:.0%}",
                f"{r['compute_floor']:.2f}",
                f"{r['compute_floor'] / r['seconds']:.0%}",
            )
            for r in rows
        ],
    )


def rbf_table(rows):
    header = ("d", "dtype", "N", "seconds", "floor seconds", "fraction of the floor", "float32 speed-up")
    seconds = {(r["d"], r["dtype"]): r["seconds"] for r in rows}
    table = []
    for r in rows:
        speedup = f"{seconds[(r['d'], 'float64')] / r['seconds']:.2f}x" if r["dtype"] == "float32" else "-"
        fraction = f"{r['floor'] / r['seconds']:.0%}"
        table.append(
            (str(r["d"]), r["dtype"], str(r["n"]), f"{r['seconds']:.3f}", f"{r['floor']:.3f}", fraction, speedup)
        )
    return markdown_table(header, table)


def main(argv=None):
    parser = script_parser(__doc__, PARTS, quick="N divided by 4, 3 repeats: a smoke run")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    repeats = 3 if args.quick else args.repeats
    scale = 4 if args.quick else 1
    started = time.perf_counter()
    limits = measure_limits(args.n_threads, repeats)
    text = ["### Machine limits", "", limits_table(limits)]
    if "kpca" in args.part:
        rows = measure_kpca(20_000 // scale, args.n_threads, repeats, limits)
        text += ["", "### KernelPCA fit, RBF, noisy digits (d = 64), s = 10, stored kernel", "", kpca_table(rows)]
    if "rbf" in args.part:
        rows = measure_rbf(5000 // scale, args.n_threads, repeats, limits)
        text += ["", "### RBF kernel matrix K(X, X), float64 and float32", "", rbf_table(rows)]
    if "nystrom" in args.part:
        row = measure_nystrom(20_000 // scale, 500, args.n_threads, repeats, limits)
        text += ["", "### Nyström kernel PCA (m = 500) against scikit-learn's Nystroem + PCA", "", nystrom_table(row)]
    if "matfree" in args.part:
        rows = measure_matfree(20_000 // scale, 16, args.n_threads, repeats, limits)
        text += ["", "### Matrix-free block product K(X, X) @ B (noisy digits, d = 64)", "", matfree_table(rows)]
    if "lssvm" in args.part:
        row = measure_lssvm(10_000 // scale, args.n_threads, min(repeats, 3), limits)
        title = "### LS-SVM dual fit (RBF, d = 16, lambda = 0.01) against KernelRidge"
        text += ["", title, "", lssvm_table(row)]
    if "constr" in args.part:
        sizes = (250, 500) if args.quick else (1000, 2000, 5000)
        objective, solve = constr_tables(*measure_constr(sizes, args.n_threads, repeats))
        text += [
            "",
            "### Constr-DRKM objective and gradient (Table 1 model) against the NumPy reference",
            "",
            objective,
        ]
        text += ["", solve]
    if "kae" in args.part:
        row = measure_kae(300, repeats, limits)
        text += ["", "### KAE loss and adjoint gradient, one thread, against the NumPy reference", "", kae_table(row)]
    if "multiview" in args.part:
        features = 1000 if args.quick else 5000
        row = measure_multiview(features, 144, args.n_threads, repeats, 10 if args.quick else 30)
        text += ["", "### Multi-view primal Stiefel iteration against one C @ U product", "", multiview_table(row)]
    note = f" Medians of {repeats} runs; fraction of the floor = floor seconds / measured seconds."
    if args.quick:
        print("\n".join(text))
        return
    write_script_section(
        RESULTS, HEADING, "bench/floor.py", args.n_threads, "\n".join(text), note, time.perf_counter() - started
    )


if __name__ == "__main__":
    sys.exit(main())
