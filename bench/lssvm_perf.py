"""LS-SVM regression performance: dual fit, Nyström primal, conjugate gradients, leave-one-out.

Writes (or replaces) the sections "LS-SVM ..." of bench/RESULTS.md. Every case runs in a fresh
process, which generates its own data, so that its peak resident memory (VmHWM) is its own.
Timings use the thread count given (default 2) for OpenMP and BLAS alike; ratios compare
cases of the same run.

Data: X with d = 16 standard normal inputs, y = sin(x.a) + cos(x.b) + 0.1 noise for two fixed
random directions a, b of unit norm; the kernel is the RBF exp(-gamma ||x - y||^2) with gamma =
1 / (2 d) (the inverse median squared distance) and lambda = 1e-2, eta = 1 throughout.

Parts and their expected times on 2 cores (full sizes; --quick runs every part at small
sizes in about a minute; --dual-sizes, --primal-n, --cg-n and --loo-n set sizes):

- ``dual``: dual fit end to end (kernel + factorization + bias) at N = 2000, 5000, 10 000:
  ``rkm.LSSVMRegressor(solver="cholesky")`` against ``sklearn.kernel_ridge.KernelRidge``
  (kernel="rbf", no bias) and the NumPy reference ``rkm.reference.lssvm_dual_fit`` (kernel +
  ``scipy.linalg.cho_factor`` + Schur bias), float64 and float32; medians of 3 fits after a
  warm-up fit in a process, median of 3 interleaved rounds of processes; peak memory against
  N x N of the dtype. About 18 minutes (N = 10 000: 13).
- ``primal``: N = 200 000 with ``solver="primal"`` and ``rkm.features.Nystroem(n_components=
  2000)``: fit time (target under a minute) and test MSE against the exact dual fit at
  N = 10 000 and the same Nyström primal at N = 10 000. About 1 minute.
- ``cg``: ``solver="cg"`` at N = 50 000 to a relative residual of 1e-6, with the kernel stored
  in float32 (10 GiB) and matrix-free: time, iterations, the relative residual recomputed
  afterwards. About 75 iterations at lambda = 1e-2 (as at N = 5000 and 10 000); each
  matrix-free product recomputes the kernel (about 6 s at N = 50 000), each stored product
  reads 9.3 GiB: about 10-15 minutes in all (estimated; not yet run at full size).
- ``cg_lam``: issue 23's repro of conjugate gradients at small lambda: N = 3000, d = 5 standard
  normal inputs, y = sin(sum x) + 0.1 noise, RBF gamma = 0.2, lambda = 1e-5, max_iter = 300, tol 1e-6:
  the former default (Nyström of fixed rank N / 20 = 150), the adaptive ranks of both preconditioners
  (the default pivoted Cholesky and Nyström) and the Cholesky solve they approximate; iterations,
  final rank, residual, the predictions' distance to the Cholesky fit. About 5 minutes.
- ``loo``: N = 5000: fit with ``loo=True`` against a plain fit (target <= 2x), and the
  leave-one-out residuals against explicit refits without each of 20 points (target 1e-8).
  About 30 seconds.

    python bench/lssvm_perf.py --quick               # all parts at small sizes
    python bench/lssvm_perf.py --only dual loo       # full sizes of these parts
    python bench/lssvm_perf.py --only cg --cg-storage dense
"""

import os
import time

import numpy as np
from _common import (
    RESULTS,
    added_peak,
    gib,
    log,
    run_measured_case,
    script_parser,
    timed_median,
    write_script_section,
)

from rkm.cli.report import markdown_table

PARTS = ("dual", "primal", "cg", "cg_lam", "loo")
HEADINGS = {
    "dual": "## LS-SVM dual fit vs KernelRidge and the NumPy reference",
    "primal": "## LS-SVM Nyström primal at large N",
    "cg": "## LS-SVM conjugate gradients at large N",
    "cg_lam": "## LS-SVM conjugate gradients at small lambda",
    "loo": "## LS-SVM leave-one-out residuals",
}
D = 16
LAM = 1e-2
NOISE = 0.1
REPEATS = 3
DUAL_ROUNDS = 3
FULL = {
    "dual_sizes": (2000, 5000, 10000),
    "primal_n": 200_000,
    "exact_n": 10000,
    "landmarks": 2000,
    "cg_n": 50_000,
    "cg_lam_n": 3000,
    "loo_n": 5000,
}
QUICK = {
    "dual_sizes": (1000, 2000),
    "primal_n": 20000,
    "exact_n": 2000,
    "landmarks": 500,
    "cg_n": 5000,
    "cg_lam_n": 1000,
    "loo_n": 1000,
}
N_TEST = 10000
N_LOO_CHECKS = 20


def make_data(n, dtype=np.float64, random_state=0):
    """n samples of the benchmark's regression problem (module docstring); the directions are
    fixed, so sets of different seeds are training and test sets of one problem."""
    directions = np.random.default_rng(2017).standard_normal((2, D))
    a, b = directions / np.linalg.norm(directions, axis=1, keepdims=True)
    rng = np.random.default_rng(random_state)
    X = rng.standard_normal((n, D))
    y = np.sin(X @ a) + np.cos(X @ b) + NOISE * rng.standard_normal(n)
    return X.astype(dtype), y


GAMMA = 1.0 / (2 * D)
# Issue 23's repro of conjugate gradients at small lambda.
SMALL_LAM_D, SMALL_LAM_GAMMA, SMALL_LAM, SMALL_LAM_MAX_ITER = 5, 0.2, 1e-5, 300


def make_small_lam_data(n, dtype=np.float64, random_state=0):
    """The cg_lam part's data: d = 5 standard normal inputs, y = sin(sum x) + 0.1 noise."""
    rng = np.random.default_rng(random_state)
    X = rng.normal(size=(n, SMALL_LAM_D))
    return X.astype(dtype), np.sin(X.sum(axis=1)) + NOISE * rng.normal(size=n)


def _case_data(case, kwargs):
    # Imported before the baseline, so that the peak counts the case's arrays only.
    import sklearn.kernel_ridge  # noqa: F401

    import rkm.reference  # noqa: F401

    data = make_small_lam_data if case == "cg_lam" else make_data
    return data(kwargs["n"], kwargs.get("dtype", np.float64))


def run_case(case, **kwargs):
    """CASES[case](X, y, **kwargs) in a fresh process: its result dict, with the peak memory
    the case added to the process."""
    return run_measured_case(CASES, _case_data, case, kwargs)


def _timed(fit, repeats=REPEATS):
    """Median seconds of `repeats` calls after a warm-up call, the warm-up's peak memory and its
    result."""
    result = fit()
    peak = added_peak()
    seconds, _ = timed_median(fit, repeats, warm_up=False)
    return seconds, peak, result


def _regressor(n_threads, **options):
    import rkm

    return rkm.LSSVMRegressor(kernel="rbf", gamma=GAMMA, lam=LAM, eta=1.0, n_threads=n_threads, **options)


def _test_mse(model, dtype):
    X_test, y_test = make_data(N_TEST, dtype, random_state=1)
    return float(np.mean((model.predict(X_test) - y_test) ** 2))


# ----------------------------------------------------------------------------- cases


def case_dual(X, y, n_threads, library, check=False, **_):
    """A dual fit end to end by `library` ("rkm": the default float64 factorization, "rkm_mixed":
    mixed_precision=True, "sklearn", "reference"): median time, peak memory of one fit; with
    `check`, the largest difference of rkm's H and b to the reference's, relative to max |H|."""
    from sklearn.kernel_ridge import KernelRidge

    from rkm import reference

    if library.startswith("rkm"):
        mixed = library == "rkm_mixed"

        def fit():
            return _regressor(n_threads, solver="cholesky", mixed_precision=mixed).fit(X, y)

    elif library == "sklearn":

        def fit():
            return KernelRidge(alpha=LAM, kernel="rbf", gamma=GAMMA).fit(X, y)

    else:

        def fit():
            return reference.lssvm_dual_fit(X, y[:, None], "rbf", GAMMA, 3.0, 1.0, 1.0, LAM, True, False, n_threads)

    seconds, peak, model = _timed(fit)
    result = {"seconds": seconds, "peak_bytes": peak, "difference": float("nan")}
    if check:
        H, b, _ = reference.lssvm_dual_fit(
            X.astype(np.float64),
            y[:, None],
            "rbf",
            GAMMA,
            3.0,
            1.0,
            1.0,
            LAM,
            True,
            False,
            n_threads,
        )
        scale = np.abs(H).max()
        result["difference"] = float(
            max(
                np.abs(model.dual_coef_.reshape(H.shape) - H).max(),
                np.abs(model.intercept_ - b).max(),
            )
            / scale
        )
    return result


def _measured_fit(model, X, y):
    """Fit the model: its time, the process's peak memory right after the fit, and its test MSE."""
    began = time.perf_counter()
    model.fit(X, y)
    seconds = time.perf_counter() - began
    return {"seconds": seconds, "peak_bytes": added_peak(), "test_mse": _test_mse(model, X.dtype)}


def case_primal(X, y, n_threads, landmarks, **_):
    """A Nyström primal fit: time, peak memory, test MSE."""
    from rkm.features import Nystroem

    feature_map = Nystroem(
        n_components=landmarks,
        kernel="rbf",
        gamma=GAMMA,
        random_state=0,
        n_threads=n_threads,
    )
    model = _regressor(n_threads, solver="primal", feature_map=feature_map)
    return _measured_fit(model, X, y)


def case_exact(X, y, n_threads, **_):
    """An exact dual fit: time, peak memory, test MSE."""
    model = _regressor(n_threads, solver="cholesky")
    return _measured_fit(model, X, y)


def _relative_residual(X, y, model, n_threads):
    """||[y - (K H / eta + lam H + b); -1^T H]|| / ||y - mean(y)|| of eq. 3.16, with K in
    float64, recomputed matrix-free."""
    from rkm.kernels import kernel_product

    X = X.astype(np.float64)
    H = model.dual_coef_.reshape(len(y), 1).astype(np.float64)
    product = kernel_product(X, None, H, kernel="rbf", gamma=GAMMA, n_threads=n_threads)
    top = y[:, None] - (product + LAM * H + model.intercept_)
    residual = np.sqrt(np.sum(top**2) + H.sum() ** 2)
    return float(residual / np.linalg.norm(y - y.mean()))


def case_cg(X, y, n_threads, storage, tol, **_):
    """A conjugate-gradient fit: time, iterations, relative residual recomputed, test MSE."""
    model = _regressor(
        n_threads,
        solver="cg",
        kernel_storage=storage,
        tol=tol,
        preconditioner="nystrom",
        random_state=0,
    )
    result = _measured_fit(model, X, y)
    result.update(
        iterations=int(model.n_iter_),
        solver_residual=float(np.max(model.cg_residuals_)),
        residual=_relative_residual(X, y, model, n_threads),
    )
    return result


def case_cg_lam(X, y, n_threads, preconditioner, rank, **_):
    """A fit at small lambda: time, iterations, final preconditioner rank, residual, distance to Cholesky."""
    import warnings

    import rkm

    params = dict(kernel="rbf", gamma=SMALL_LAM_GAMMA, lam=SMALL_LAM, n_threads=n_threads)
    if preconditioner == "cholesky":
        model = rkm.LSSVMRegressor(solver="cholesky", **params)
    else:
        model = rkm.LSSVMRegressor(
            solver="cg",
            preconditioner=preconditioner,
            preconditioner_rank=rank,
            max_iter=SMALL_LAM_MAX_ITER,
            random_state=0,
            **params,
        )
    began = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(X, y)
    seconds = time.perf_counter() - began
    exact = rkm.LSSVMRegressor(solver="cholesky", **params).fit(X, y)
    cg = model.solver_ == "cg"
    return {
        "seconds": seconds,
        "iterations": int(model.n_iter_) if cg else 0,
        "rank": int(model.preconditioner_rank_) if cg else 0,
        "residual": float(np.max(model.cg_residuals_)) if cg else 0.0,
        "distance": float(np.abs(model.predict(X) - exact.predict(X)).max() / np.abs(y).max()),
    }


def case_loo(X, y, n_threads, **_):
    """Fit with loo=True against plain fits (the default float64 and mixed precision); the LOO
    residuals against explicit float64 refits without each of N_LOO_CHECKS points."""
    seconds_loo, peak, model = _timed(lambda: _regressor(n_threads, loo=True).fit(X, y))
    seconds_fit, _, _ = _timed(lambda: _regressor(n_threads).fit(X, y))
    seconds_mixed, _, _ = _timed(lambda: _regressor(n_threads, mixed_precision=True).fit(X, y))
    residuals = np.ravel(model.loo_residuals_)
    checked = np.random.default_rng(0).choice(len(y), N_LOO_CHECKS, replace=False)
    differences = []
    for i in checked:
        keep = np.arange(len(y)) != i
        refit = _regressor(n_threads, mixed_precision=False).fit(X[keep], y[keep])
        explicit = y[i] - refit.predict(X[i : i + 1])[0]
        differences.append(abs(explicit - residuals[i]))
    return {
        "seconds_loo": seconds_loo,
        "seconds_fit": seconds_fit,
        "seconds_mixed": seconds_mixed,
        "peak_bytes": peak,
        "difference": float(max(differences)),
        "residual_scale": float(np.abs(residuals[checked]).max()),
        "loo_mse": float(np.mean(residuals**2)),
    }


CASES = {
    "cg_lam": case_cg_lam,
    "dual": case_dual,
    "primal": case_primal,
    "exact": case_exact,
    "cg": case_cg,
    "loo": case_loo,
}


# ----------------------------------------------------------------------------- parts


RKM_VARIANTS = {
    "rkm": "default (float64)",
    "rkm_mixed": "mixed_precision=True",
}


def _median_round(results):
    """The first round's result (peak memory, difference) with the median of the rounds' times."""
    return {**results[0], "seconds": float(np.median([r["seconds"] for r in results]))}


def part_dual(args, sizes, log):
    rows = []
    for n in sizes["dual_sizes"]:
        for dtype in (np.float64, np.float32):
            variants = ["rkm", "rkm_mixed"] if dtype == np.float64 else ["rkm"]
            rounds = {library: [] for library in [*variants, "sklearn", "reference"]}
            # Rounds of one process per library, interleaved, so that the machine's slow spells (single
            # timings vary by up to 2x here) fall on every library alike; the median round counts.
            for round_ in range(DUAL_ROUNDS):
                for library in rounds:
                    rounds[library].append(
                        run_case(
                            "dual",
                            n=n,
                            dtype=dtype,
                            n_threads=args.n_threads,
                            library=library,
                            check=library in variants and round_ == 0,
                        )
                    )
                    log(f"dual N={n} {np.dtype(dtype).name} {library}: {rounds[library][-1]}")
            r = {library: _median_round(results) for library, results in rounds.items()}
            matrix = n * n * np.dtype(dtype).itemsize
            for variant in variants:
                rkm = r[variant]
                rows.append(
                    [
                        str(n),
                        np.dtype(dtype).name,
                        RKM_VARIANTS[variant] if dtype == np.float64 else "default",
                        f"{rkm['seconds']:.3f}",
                        f"{r['sklearn']['seconds']:.3f}",
                        f"{r['reference']['seconds']:.3f}",
                        f"{r['sklearn']['seconds'] / rkm['seconds']:.2f}x",
                        f"{r['reference']['seconds'] / rkm['seconds']:.2f}x",
                        f"{rkm['peak_bytes'] / matrix:.2f}",
                        f"{r['sklearn']['peak_bytes'] / matrix:.2f}",
                        f"{r['reference']['peak_bytes'] / matrix:.2f}",
                        f"{rkm['difference']:.1e}",
                    ]
                )
    return (
        "Dual fit end to end (kernel + factorization + bias; RBF, d = 16, lambda = "
        f'{LAM:g}, one output): `rkm.LSSVMRegressor(solver="cholesky")`, '
        '`sklearn.kernel_ridge.KernelRidge(kernel="rbf")` (the same system without the bias '
        "row) and the NumPy reference `rkm.reference.lssvm_dual_fit` (kernel + "
        "`scipy.linalg.cho_factor` + Schur bias), each in a fresh process with X in the dtype "
        "shown. For float64 X, rkm factorizes in float64, or with mixed_precision=True in float32 "
        "refined to float64 accuracy (half the memory). Times: "
        f"median of {REPEATS} fits after a warm-up fit in one process, and the median of "
        f"{DUAL_ROUNDS} such processes per library, run in interleaved rounds; speed-ups are peer "
        "time / rkm time. "
        "Peak: the resident memory the warm-up fit added to the process, in units of one N x N "
        "matrix of X's dtype (target for rkm: <= 1.3); rkm allocates one N x N matrix but "
        "touches only its lower triangle, so its resident peak can be below 1. Difference: max |rkm - reference| of (H, b) "
        "relative to max |H|, the reference in float64 (for float32 X it measures the float32 "
        "solve's rounding).\n\n"
        + markdown_table(
            [
                "N",
                "X dtype",
                "rkm",
                "rkm s",
                "KernelRidge s",
                "reference s",
                "vs KernelRidge",
                "vs reference",
                "rkm peak / N^2",
                "KernelRidge peak / N^2",
                "reference peak / N^2",
                "difference",
            ],
            rows,
        )
    )


def part_primal(args, sizes, log):
    m, n, n_exact = sizes["landmarks"], sizes["primal_n"], sizes["exact_n"]
    cases = [
        (f"primal, Nyström m = {m}", n, "primal"),
        (f"primal, Nyström m = {m}", n_exact, "primal"),
        ("dual, exact (cholesky)", n_exact, "exact"),
    ]
    rows = []
    for label, size, case in cases:
        r = run_case(case, n=size, n_threads=args.n_threads, landmarks=m)
        log(f"{label} N={size}: {r}")
        rows.append(
            [
                label,
                str(size),
                f"{r['seconds']:.1f}",
                gib(r["peak_bytes"]),
                f"{r['test_mse']:.4f}",
            ]
        )
    return (
        f'`rkm.LSSVMRegressor(solver="primal", feature_map=rkm.features.Nystroem(n_components='
        f"{m}))` (uniform landmarks) on N = {n} (d = 16, RBF, lambda = {LAM:g}; target: under "
        f"a minute), against the same primal and the exact dual fit at N = {n_exact}. Test "
        f"MSE on {N_TEST} fresh points of the same problem (noise variance {NOISE**2:g}, the "
        "floor). Peak: memory the fit added to the process.\n\n"
        + markdown_table(["fit", "N", "fit s", "peak GiB", "test MSE"], rows)
    )


def part_cg(args, sizes, log):
    n, rows = sizes["cg_n"], []
    for storage in args.cg_storage:
        dtype = np.float32 if storage == "dense" else np.float64
        r = run_case("cg", n=n, dtype=dtype, n_threads=args.n_threads, storage=storage, tol=1e-6)
        log(f"cg N={n} {storage}: {r}")
        rows.append(
            [
                storage,
                np.dtype(dtype).name,
                f"{r['seconds']:.1f}",
                str(r["iterations"]),
                f"{r['solver_residual']:.1e}",
                f"{r['residual']:.1e}",
                gib(r["peak_bytes"]),
                f"{r['test_mse']:.4f}",
            ]
        )
    return (
        f'`rkm.LSSVMRegressor(solver="cg", tol=1e-6, preconditioner="nystrom")` on N = {n} '
        f"(d = 16, RBF, lambda = {LAM:g}): the kernel stored in X's dtype float32 "
        f"({n * n * 4 / 2**30:.1f} GiB) or recomputed at every product (matrix_free, float64). "
        "Residuals ||[y - K H - lam H - 1 b; 1^T H]|| / ||y - mean(y)|| of eq. 3.16: the one "
        "the solver reports (`cg_residuals_`, with its own kernel) and the one recomputed after "
        "the fit with a float64 kernel (where the float32 kernel's rounding counts). Test MSE "
        f"on {N_TEST} fresh points.\n\n"
        + markdown_table(
            [
                "storage",
                "X dtype",
                "fit s",
                "iterations",
                "solver's residual",
                "residual, float64 K",
                "peak GiB",
                "test MSE",
            ],
            rows,
        )
    )


def part_cg_lam(args, sizes, log):
    from rkm.shallow._pcg import default_rank

    n, rows = sizes["cg_lam_n"], []
    settings = [
        ("nystrom", default_rank(n), "former default: Nyström, fixed rank"),
        ("pivoted_cholesky", None, "default: pivoted Cholesky, adaptive rank"),
        ("nystrom", None, "Nyström, adaptive rank"),
        ("cholesky", None, "solver='cholesky'"),
    ]
    for preconditioner, rank, label in settings:
        r = run_case("cg_lam", n=n, n_threads=args.n_threads, preconditioner=preconditioner, rank=rank)
        log(f"cg_lam N={n} {label}: {r}")
        cg = preconditioner != "cholesky"
        rows.append(
            [
                label,
                f"{r['seconds']:.1f}",
                str(r["iterations"]) if cg else "-",
                str(r["rank"]) if cg else "-",
                f"{r['residual']:.1e}" if cg else "-",
                f"{r['distance']:.1e}",
            ]
        )
    return (
        f'`rkm.LSSVMRegressor(solver="cg", gamma={SMALL_LAM_GAMMA:g}, lam={SMALL_LAM:g}, '
        f"max_iter={SMALL_LAM_MAX_ITER})` on N = {n} (d = {SMALL_LAM_D} standard normal inputs, y = sin(sum x) "
        "+ 0.1 noise; issue 23's repro), tol 1e-6, matrix-free products. The adaptive rank grows 4-fold "
        "whenever the residual's rate over the last 20 iterations predicts a miss of max_iter, and CG "
        "continues from its iterate. Residual: the solver's relative residual of eq. 3.16; distance: max "
        "|prediction - Cholesky fit's prediction| / max |y| on the training points.\n\n"
        + markdown_table(
            ["preconditioner", "fit s", "iterations", "final rank", "residual", "distance to Cholesky"], rows
        )
    )


def part_loo(args, sizes, log):
    n = sizes["loo_n"]
    r = run_case("loo", n=n, n_threads=args.n_threads)
    log(f"loo N={n}: {r}")
    row = [
        str(n),
        f"{r['seconds_fit']:.3f}",
        f"{r['seconds_mixed']:.3f}",
        f"{r['seconds_loo']:.3f}",
        f"{r['seconds_loo'] / r['seconds_fit']:.2f}x",
        f"{r['seconds_loo'] / r['seconds_mixed']:.2f}x",
        f"{r['peak_bytes'] / (n * n * 8):.2f}",
        f"{r['difference']:.1e}",
        f"{r['residual_scale']:.2f}",
        f"{r['loo_mse']:.4f}",
    ]
    return (
        "`rkm.LSSVMRegressor(loo=True)` (closed-form leave-one-out residuals, float64 "
        f"factorization) against plain fits on N = {n} (d = 16, RBF, lambda = {LAM:g}, float64 "
        "X): the default (float64) and mixed_precision=True; medians of "
        f"{REPEATS} fits after a warm-up (target: <= 2x a fit). Check: the residuals "
        f"y_i - yhat_i^(-i) of {N_LOO_CHECKS} random points against explicit float64 refits on "
        "the other N - 1 points, max absolute difference (target 1e-8) beside the largest of "
        "those residuals. Peak: memory of the loo fit in units of N x N float64.\n\n"
        + markdown_table(
            [
                "N",
                "fit s",
                "fit mixed s",
                "fit + LOO s",
                "vs fit",
                "vs fit mixed",
                "LOO peak / N^2",
                "max abs(LOO - refit)",
                "max abs(residual)",
                "LOO MSE",
            ],
            [row],
        )
    )


def main():
    parser = script_parser(__doc__, PARTS, option="--only", quick="small sizes (about a minute)")
    parser.add_argument(
        "--dual-sizes",
        type=int,
        nargs="+",
        metavar="N",
        help="sizes of the dual part (default 2000 5000 10000)",
    )
    parser.add_argument("--primal-n", type=int, help="N of the primal part (default 200000)")
    parser.add_argument("--cg-n", type=int, help="N of the cg part (default 50000)")
    parser.add_argument("--cg-lam-n", type=int, help="N of the cg_lam part (default 3000)")
    parser.add_argument("--loo-n", type=int, help="N of the loo part (default 5000)")
    parser.add_argument(
        "--cg-storage",
        nargs="+",
        choices=("dense", "matrix_free"),
        default=["dense", "matrix_free"],
    )
    parser.add_argument("--output", default=str(RESULTS))
    args = parser.parse_args()
    # Inherited by the case processes.
    os.environ["OMP_NUM_THREADS"] = str(args.n_threads)
    sizes = dict(QUICK if args.quick else FULL)
    overrides = {
        "dual_sizes": args.dual_sizes,
        "primal_n": args.primal_n,
        "cg_n": args.cg_n,
        "cg_lam_n": args.cg_lam_n,
        "loo_n": args.loo_n,
    }
    sizes.update({key: value for key, value in overrides.items() if value})

    parts = {"dual": part_dual, "primal": part_primal, "cg": part_cg, "cg_lam": part_cg_lam, "loo": part_loo}
    for name in args.only:
        section = parts[name](args, sizes, log)
        write_script_section(args.output, HEADINGS[name], "bench/lssvm_perf.py", args.n_threads, section)


if __name__ == "__main__":
    main()
