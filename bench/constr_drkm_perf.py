"""Constr-DRKM performance (Tonin et al. 2021): the eq. 7 objective and the Stiefel solvers, core vs reference.

Writes (or replaces) the section "Constr-DRKM performance" of bench/RESULTS.md. Ratios compare cases of the
same run with the thread count given (default 2); timings of the objective are medians of interleaved rounds,
so that drifts of the machine's load affect both sides alike.

- ``objective``: f and its gradient for two RBF levels, s = (10, 5), gamma = 0.01, uncentred, at N = 1000,
  2000 and 5000 MNIST digits and a random feasible H: the core's ``ConstrainedDeepObjective`` (K1 held across
  calls, as in a solve) against ``rkm.reference.constr_drkm.ConstrainedDeepObjective`` (target: the core >= 5x
  faster). The core is timed with the BLAS at ``--threads`` threads and at 1 thread: it calls BLAS products
  inside its own OpenMP loops, where a multi-threaded BLAS nests.
- ``pg``: a full projected-gradient solve of the Table 1 problem (N = 1000, tol: gradient norm 5e-8) with
  the core's engine and objective against the reference engine with the reference objective from the same
  start (the same iterates; the reference is capped at ``--reference-iterations``, 30 in quick mode): time
  per iteration and in total (target: >= 5x).
- ``methods``: time of each method to the gradient norm 5e-8 (and to coarser thresholds) on the Table 1
  problem from several random starts, against projected gradient (target: the stronger method faster).

- ``defaults`` (its own section, "Constr-DRKM defaults"): ``ConstrainedDeepRKM`` with its default tol and a
  common iteration cap, each Stiefel method (the default "bb_pg", "pg", "cayley_bb", "pg_anderson" and
  "cayley_adam" at its default lr) on the paper's MNIST problem (Table 1: N = 1000, s = (10, 5), gamma = 0.01),
  2-D shapes (square, spiral + square: N = 400, s = (2, 1)), Gaussian blobs (N = 300, 5 features), sprites
  (N = 200, 64 x 64) and small Gaussian data (N = 80, 3 features, s = (3, 2)), from several random starts:
  converged (no ConvergenceWarning), iterations, seconds, final objective. The measurement behind the defaults.

    python bench/constr_drkm_perf.py                # objective, pg, methods: about 10 minutes
    python bench/constr_drkm_perf.py --quick        # about 2 minutes
    python bench/constr_drkm_perf.py --part defaults
"""

import argparse
import time

import numpy as np
from _common import (
    RESULTS,
    TABLE1_GAMMA,
    TABLE1_SIZES,
    TABLE1_TOL,
    blas_threads,
    load_average,
    log,
    median_seconds,
    pinned_threads,
    relative_change,
    table1_data,
    write_script_section,
)

# The core's objective and Stiefel engine themselves are what this benchmark times: rkm.stiefel.minimize runs the
# engine with a single-threaded BLAS (this script also times it with a multi-threaded one), and the objective has
# no public constructor (ConstrainedDeepRKM builds it inside fit).
from rkm import _core
from rkm.cli.report import markdown_table

HEADING = "## Constr-DRKM performance"
SPEEDUP_TARGET = 5.0
METHODS = ("pg", "pg_anderson", "cayley_bb", "cayley_adam")
# Cayley Adam's learning rate for the method comparison: the best of bench/constr_drkm.py's table1 grid.
ADAM_LR = 1.0
METHOD_MAX_ITER = {"full": 5000, "quick": 2000}
THRESHOLDS = (1e-3, 1e-5, 1e-7, 5e-8)


def require_core():
    """Stop unless the compiled core has the Stiefel engine and the Constr-DRKM objective."""
    if not (hasattr(_core, "ConstrainedDeepObjective") and hasattr(_core, "stiefel_minimize")):
        raise SystemExit("rkm._core has no ConstrainedDeepObjective / stiefel_minimize: rebuild the core first")


def table1_objective(X, backend, n_threads, gamma=TABLE1_GAMMA, sizes=TABLE1_SIZES):
    """The eq. 7 objective of the Table 1 model on X: ``backend`` "core" (``rkm._core.ConstrainedDeepObjective``)
    or "reference" (its NumPy twin, ``rkm.reference.constr_drkm.ConstrainedDeepObjective``)."""
    from rkm.kernels import kernel_matrix
    from rkm.reference import constr_drkm

    backend = {"core": _core, "reference": constr_drkm}[backend]

    K1 = kernel_matrix(X, kernel="rbf", gamma=gamma, n_threads=n_threads)
    level_kernels = [("rbf", gamma, 3.0, 1.0)] * (len(sizes) - 1)
    etas = (1.0,) * len(sizes)
    return backend.ConstrainedDeepObjective(K1, level_kernels, sizes, etas, False, n_threads)


def digits(n):
    from rkm.datasets import load_mnist_subset

    return load_mnist_subset(n).data


def objective_case(n, threads, rounds):
    """Median seconds per call of the core objective (with a BLAS of ``threads`` threads, as a default setup
    has it, and with a single-threaded BLAS) and of the reference (BLAS ``threads`` threads) at N = n, and
    the relative differences of f and G."""
    from rkm.stiefel import random_point

    X = digits(n)
    core = table1_objective(X, "core", threads)
    ref = table1_objective(X, "reference", threads)
    H = random_point(n, sum(TABLE1_SIZES), random_state=0)
    f_core, G_core, _ = core.evaluate(H)
    f_ref, G_ref, _ = ref.evaluate(H)
    cases = {"core": (threads, core, 10), "core_blas1": (1, core, 10), "reference": (threads, ref, 1)}
    times = {name: [] for name in cases}
    for _ in range(rounds):
        for name, (blas, objective, calls) in cases.items():
            with blas_threads(blas):
                times[name].append(median_seconds(lambda o=objective: o.evaluate(H), 1, calls))
    medians = {name: float(np.median(values)) for name, values in times.items()}
    return medians, abs(f_core - f_ref) / abs(f_ref), relative_change(G_core, G_ref)


def pg_case(threads, reference_iterations):
    """A full PG solve with the core's engine and objective (BLAS ``threads`` and 1 thread), and with the
    reference engine and objective (BLAS ``threads`` threads), from the same start."""
    from rkm.reference.stiefel import stiefel_minimize
    from rkm.stiefel import random_point

    X = digits(1000)
    core = table1_objective(X, "core", threads)
    ref = table1_objective(X, "reference", threads)
    H0 = random_point(X.shape[0], sum(TABLE1_SIZES), random_state=0)
    out = {}
    for name, blas in (("core", threads), ("core_blas1", 1)):
        with blas_threads(blas):
            began = time.perf_counter()
            out[name] = _core.stiefel_minimize(core, H0, "pg", TABLE1_TOL, 100000, {})
            out[name + "_seconds"] = time.perf_counter() - began
    with blas_threads(threads):
        began = time.perf_counter()
        out["reference"] = stiefel_minimize(ref, H0, "pg", TABLE1_TOL, reference_iterations or 100000, {})
        out["reference_seconds"] = time.perf_counter() - began
    shared = min(len(out["core"]["history_fun"]), len(out["reference"]["history_fun"]))
    f_core = np.asarray(out["core"]["history_fun"][:shared])
    f_ref = np.asarray(out["reference"]["history_fun"][:shared])
    out["iterate_difference"] = float(np.max(np.abs(f_core - f_ref) / np.abs(f_ref)))
    out["shared"] = shared
    return out


def methods_case(threads, seeds, max_iter):
    """Each method from each seed (core objective, single-threaded BLAS): the StiefelResults."""
    from rkm.stiefel import minimize, random_point

    X = digits(1000)
    core = table1_objective(X, "core", threads)
    runs = {}
    for method in METHODS:
        options = {"lr": ADAM_LR} if method == "cayley_adam" else {}
        runs[method] = []
        for seed in seeds:
            H0 = random_point(X.shape[0], sum(TABLE1_SIZES), random_state=seed)
            with blas_threads(1):
                result = minimize(core, H0, method, tol=TABLE1_TOL, max_iter=max_iter, options=options)
            runs[method].append(result)
            log(
                f"methods: {method} seed {seed}: {result.status}, f {result.fun:.8f}, grad {result.grad_norm:.1e}, "
                f"{result.nit} its, {result.nfev} calls, {result.time:.3f} s"
            )
    return runs


def time_to(result, threshold):
    """Seconds until grad_norm first fell to ``threshold`` (the solve's time prorated by iterations; NaN if
    never)."""
    reached = np.flatnonzero(np.asarray(result.history["grad_norm"]) <= threshold)
    if reached.size == 0:
        return float("nan")
    return result.time * reached[0] / max(result.nit, 1)


def _median_time_to(results, threshold):
    times = [time_to(r, threshold) for r in results]
    return "never" if np.all(np.isnan(times)) else f"{np.nanmedian(times):.2f}"


def _verdict(ratio):
    return f"**{ratio:.1f}x** ({'met' if ratio >= SPEEDUP_TARGET else 'missed'})"


def _objective_section(sizes, threads, rounds):
    rows = []
    for n in sizes:
        m, f_error, g_error = objective_case(n, threads, rounds)
        log(
            f"objective N={n}: core {m['core'] * 1e3:.2f} ms (BLAS 1 thread: {m['core_blas1'] * 1e3:.2f} ms), "
            f"reference {m['reference'] * 1e3:.1f} ms"
        )
        rows.append(
            [
                str(n),
                f"{m['core'] * 1e3:.2f}",
                f"{m['core_blas1'] * 1e3:.2f}",
                f"{m['reference'] * 1e3:.1f}",
                _verdict(m["reference"] / m["core"]),
                _verdict(m["reference"] / m["core_blas1"]),
                f"{f_error:.1e} / {g_error:.1e}",
            ]
        )
    return (
        f"Objective and gradient (eq. 7, two RBF levels, gamma = {TABLE1_GAMMA:g}, s = {TABLE1_SIZES}, eta = 1, "
        "uncentred; K1 from the first N digits of `load_mnist_subset`, H = `rkm.stiefel.random_point(N, 15, "
        f"random_state=0)`): the core's `ConstrainedDeepObjective.evaluate` ({threads} OpenMP threads) against "
        f"`rkm.reference.constr_drkm.ConstrainedDeepObjective.evaluate` (NumPy, {threads} BLAS threads); medians "
        f"of {rounds} interleaved rounds (the core timed over 10 consecutive calls per round). The core twice: "
        f"with the BLAS at {threads} threads (a default setup) and at 1 thread (the core calls BLAS products "
        "inside its OpenMP loops over row bands, where a multi-threaded BLAS nests). Target: the core at least "
        f"{SPEEDUP_TARGET:g}x faster.\n\n"
        + markdown_table(
            [
                "N",
                "core (ms)",
                "core, BLAS 1 thread (ms)",
                "reference (ms)",
                "speed-up",
                "speed-up, BLAS 1 thread",
                "rel. difference f / G",
            ],
            rows,
        )
    )


def _pg_row(label, out, key, capped_to=None):
    r, seconds = out[key], out[key + "_seconds"]
    per = seconds / max(r["nit"], 1)
    total = f"{seconds:.2f}"
    if capped_to:
        total += f" (at {per * 1e3:.1f} ms per iteration, {capped_to} iterations: {per * capped_to:.1f})"
    return [
        label,
        r["status"],
        str(r["nit"]),
        str(r["nfev"]),
        f"{r['fun']:.8f}",
        f"{r['grad_norm']:.1e}",
        total,
        f"{per * 1e3:.2f}",
    ], per


def _pg_section(threads, reference_iterations):
    out = pg_case(threads, reference_iterations)
    nit = out["core"]["nit"]
    capped = out["reference"]["nit"] < nit
    rows, per = [], {}
    for label, key in (
        (f"core engine + core objective, BLAS {threads} threads", "core"),
        ("core engine + core objective, BLAS 1 thread", "core_blas1"),
        ("reference engine + reference objective", "reference"),
    ):
        row, per[key] = _pg_row(label, out, key, nit if (key == "reference" and capped) else None)
        rows.append(row)
    total_ref = per["reference"] * nit if capped else out["reference_seconds"]
    for row, key in zip(rows, ("core", "core_blas1")):
        row.append(
            f"{_verdict(per['reference'] / per[key])} per iteration, "
            f"{_verdict(total_ref / out[key + '_seconds'])} in total"
        )
    rows[2].append("")
    log(
        f"pg: core {nit} its {out['core_seconds']:.2f} s (BLAS 1: {out['core_blas1_seconds']:.2f} s); reference "
        f"{out['reference']['nit']} its {out['reference_seconds']:.2f} s"
    )
    cap_text = (
        f" The reference was stopped after {reference_iterations} iterations; its total is extrapolated "
        "at its time per iteration."
        if capped
        else ""
    )
    return (
        'Projected gradient (`method="pg"`, default options, stop at grad_norm ≤ 5e-8) on the Table 1 problem '
        "(N = 1000) from `random_point(1000, 15, random_state=0)`: `rkm._core.stiefel_minimize` with the core "
        "objective (the whole solve in C++) against `rkm.reference.stiefel.stiefel_minimize` with the reference "
        "objective. Same iterates: the objective histories agree to "
        f"{out['iterate_difference']:.1e} (relative) over the {out['shared']} recorded values both have."
        f"{cap_text}\n\n"
        + markdown_table(
            [
                "solve",
                "status",
                "iterations",
                "calls",
                "final f",
                "grad_norm",
                "seconds",
                "ms / iteration",
                "speed-up vs reference",
            ],
            rows,
        )
    )


def _methods_section(threads, seeds, max_iter):
    runs = methods_case(threads, seeds, max_iter)
    pg_time = np.median([r.time for r in runs["pg"]])
    rows = []
    for method, results in runs.items():
        times = [r.time for r in results]
        median = float(np.median(times))
        label = method + (f" (lr {ADAM_LR:g})" if method == "cayley_adam" else "")
        rows.append(
            [
                label,
                f"{sum(r.success for r in results)}/{len(results)}",
                f"{np.median([r.nit for r in results]):.0f}",
                f"{np.median([r.nfev for r in results]):.0f}",
                f"{median:.2f}",
                f"{min(times):.2f}–{max(times):.2f}",
                f"{pg_time / median:.2f}x",
                *(_median_time_to(results, t) for t in THRESHOLDS),
                f"{min(r.grad_norm for r in results):.1e}–{max(r.grad_norm for r in results):.1e}",
                f"{min(r.fun for r in results):.8f} … {max(r.fun for r in results):.8f}",
            ]
        )
    return (
        f"Time to grad_norm ≤ 5e-8 on the Table 1 problem (core objective, {threads} OpenMP threads, BLAS 1 "
        "thread; solver time `StiefelResult.time`) from `random_point(1000, 15, random_state=s)`, s = "
        f"{', '.join(map(str, seeds))}, default options (Cayley Adam lr {ADAM_LR:g}), at most {max_iter} "
        "iterations; medians over the starts; speed-up = PG's median time / the method's; the time at which "
        "grad_norm first fell below each threshold (prorated by iterations; median over the starts that got "
        "there). Target: the stronger "
        "method (pg_anderson, cayley_bb) faster than PG.\n\n"
        + markdown_table(
            ["method", "converged", "iterations", "calls", "median s", "range s", "vs PG"]
            + [f"s to {t:g}" for t in THRESHOLDS]
            + ["final grad_norm", "final f (min … max)"],
            rows,
        )
    )


# ---------------------------------------------------------------------- defaults

DEFAULTS_HEADING = "## Constr-DRKM defaults"
DEFAULT_METHODS = ("bb_pg", "pg", "cayley_bb", "pg_anderson", "cayley_adam")
# Table 1's fits are the slow ones: the methods other than the default and "pg" run from fewer starts there.
TABLE1_ALL_METHODS_SEEDS = 1


def default_problems(seed):
    """(name, X, parameters) of the problems the defaults were chosen on; the data of the small ones depend on
    ``seed`` (Table 1's digits do not)."""
    from sklearn.datasets import make_blobs

    from rkm.datasets import make_spiral_square, make_sprites, make_square

    rng = np.random.default_rng(seed)
    images = make_sprites(200, random_state=seed, dtype=np.float64)[0]
    return [
        (
            "Table 1 MNIST (1000, s = (10, 5), gamma 0.01)",
            table1_data(),
            {"n_components": TABLE1_SIZES, "gamma": TABLE1_GAMMA},
        ),
        ("Gaussian (80 x 3, s = (3, 2))", rng.normal(size=(80, 3)), {"n_components": (3, 2)}),
        ("square (400, s = (2, 1))", make_square(400, 0.1, random_state=seed).data, {"n_components": (2, 1)}),
        (
            "spiral + square (400, s = (2, 1))",
            make_spiral_square(400, 0.1, random_state=seed).data,
            {"n_components": (2, 1)},
        ),
        ("blobs (300 x 5, 4 centres)", make_blobs(300, n_features=5, centers=4, random_state=seed)[0], {}),
        ("sprites (200 x 4096)", images.reshape(len(images), -1), {}),
    ]


def defaults_case(methods, seeds, max_iter):
    """Every method on every problem from every seed: {(problem, method): [(converged, nit, seconds, f), ...]}."""
    import warnings

    from rkm import ConstrainedDeepRKM
    from rkm.exceptions import ConvergenceWarning

    runs = {}
    for seed in seeds:
        for problem, X, parameters in default_problems(seed):
            for method in methods:
                if problem.startswith("Table 1") and method not in ("bb_pg", "pg") and seed >= TABLE1_ALL_METHODS_SEEDS:
                    continue
                model = ConstrainedDeepRKM(**parameters, stiefel_method=method, max_iter=max_iter, random_state=seed)
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always", ConvergenceWarning)
                    model.fit(X)
                converged = not any(issubclass(w.category, ConvergenceWarning) for w in caught)
                r = model.stiefel_result_
                runs.setdefault((problem, method), []).append((converged, r.nit, r.time, r.fun, r.status))
                log(
                    f"defaults: {problem}, {method}, seed {seed}: {r.status}, {r.nit} its, {r.time:.2f} s, f {r.fun:.10g}"
                )
    return runs


def _defaults_section(methods, seeds, max_iter):
    from rkm import ConstrainedDeepRKM

    defaults = ConstrainedDeepRKM().get_params()
    runs = defaults_case(methods, seeds, max_iter)
    rows = []
    for (problem, method), results in runs.items():
        converged, nit, seconds, f, status = zip(*results)
        failures = sorted({s for s, c in zip(status, converged) if not c})
        rows.append(
            [
                problem,
                method + (" (default)" if method == defaults["stiefel_method"] else ""),
                f"{sum(converged)}/{len(results)}" + (f" ({', '.join(failures)})" if failures else ""),
                f"{np.median(nit):.0f} ({min(nit)}–{max(nit)})",
                f"{np.median(seconds):.2f} ({min(seconds):.2f}–{max(seconds):.2f})",
                f"{min(f):.8f} … {max(f):.8f}" if len(f) > 1 else f"{f[0]:.8f}",
            ]
        )
    total = {m: [sum(c for c, *_ in runs[k]) for k in runs if k[1] == m] for m in methods}
    totals = ", ".join(f"{m} {sum(v)}/{sum(len(runs[k]) for k in runs if k[1] == m)}" for m, v in total.items())
    return (
        f"`ConstrainedDeepRKM(**parameters, stiefel_method=method, max_iter={max_iter}, random_state=seed)` with the "
        f"default tol = {defaults['tol']:g} (grad_norm) and everything else default (rbf levels, gamma 1/n_features "
        "and N/(2 s_{l-1}), uncentred, random start), seeds "
        f"{', '.join(map(str, seeds))} (the data of the small problems drawn with the same seed; on Table 1 the "
        f"methods other than bb_pg and pg from seed 0 only); cayley_adam at its default lr "
        "(`rkm.stiefel.CAYLEY_ADAM_LR`). Converged: the fit raised no ConvergenceWarning (the failing statuses in "
        "brackets); iterations and seconds (the solver's own time, `stiefel_result_.time`): median (range); the "
        "final objective f: min … max over the starts (the problems have several local minima, so methods and "
        f"starts can end at different stationary points). Converged in all: {totals}.\n\n"
        + markdown_table(["problem", "method", "converged", "iterations", "seconds", "final f"], rows)
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--part",
        nargs="+",
        choices=("perf", "defaults"),
        default=["perf"],
        help="perf: the objective, pg and methods parts (section 'Constr-DRKM performance'); defaults: the "
        "measurement of the defaults (section 'Constr-DRKM defaults')",
    )
    parser.add_argument("--seeds", type=int, default=3, help="defaults: random starts per problem (default 3)")
    parser.add_argument("--max-iter", type=int, default=2000, help="defaults: the common iteration cap (2000)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--quick", action="store_true", help="N = 1000 and 2000, 2 rounds, the reference PG capped, 2 starts per method"
    )
    parser.add_argument(
        "--reference-iterations", type=int, help="cap on the reference PG solve (default: none; quick 30)"
    )
    parser.add_argument("--output", default=str(RESULTS))
    args = parser.parse_args()
    require_core()
    if "defaults" in args.part:
        began, load = time.perf_counter(), load_average()
        with pinned_threads(args.threads):
            text = _defaults_section(DEFAULT_METHODS, list(range(args.seeds)), args.max_iter)
        seconds = time.perf_counter() - began
        note = (
            f" The run took {seconds:.0f} s; 1-minute load average {load:.1f} at its start, {load_average():.1f} at "
            "its end (other processes share the cores, and the seconds with them)."
        )
        write_script_section(
            args.output,
            DEFAULTS_HEADING,
            "bench/constr_drkm_perf.py",
            args.threads,
            text,
            note,
            seconds,
        )
    if "perf" not in args.part:
        return
    if args.quick and args.reference_iterations is None:
        args.reference_iterations = 30
    sizes = [1000, 2000] if args.quick else [1000, 2000, 5000]
    rounds = 2 if args.quick else 5
    seeds = range(2) if args.quick else range(5)
    began = time.perf_counter()
    load = load_average()
    with pinned_threads(args.threads):
        parts = [
            _objective_section(sizes, args.threads, rounds),
            _pg_section(args.threads, args.reference_iterations),
            _methods_section(args.threads, list(seeds), METHOD_MAX_ITER["quick" if args.quick else "full"]),
        ]
    seconds = time.perf_counter() - began
    note = (
        f" The run took {seconds:.0f} s; 1-minute load average {load:.1f} at its start, {load_average():.1f} at "
        "its end (other processes share the cores)."
    )
    write_script_section(
        args.output, HEADING, "bench/constr_drkm_perf.py", args.threads, "\n\n".join(parts), note, seconds
    )


if __name__ == "__main__":
    main()
