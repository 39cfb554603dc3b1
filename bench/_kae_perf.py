"""Part ``perf`` of bench/kae.py: one loss + gradient evaluation of a KAE by the adjoint (reverse-mode) gradient
of the core, the paper's Jacobian recursions (Appendix B.1-B.4) in the core, and the adjoint gradient of the NumPy
reference, on identical inputs; the issue's same-run ratios at n = 300 and the growth of each with n."""

import time

import numpy as np
from _common import FIGURES, blas_threads, core_threads, load_average, log, save_figure
from _kae_data import make_concentric_circles

# The core's loss and gradient routine itself is what this part times, by both of its methods: the public
# KernelAutoencoder.loss_and_grad returns the same numbers but resolves and validates the settings from X on every
# call (measured: 5.4 ms against 4.6 ms per call at n = 300, one thread) and does not return the terms.
from rkm import _core, reference
from rkm.cli.report import markdown_table

PERF = {
    # slope_from: the least-squares slopes use the sizes from these on, where the O(n^2) / O(n^3) terms dominate
    # the fixed costs.
    "full": {
        "n": 300,
        "repeats": 5,
        "adjoint_sizes": (100, 200, 400, 800, 1000, 1500, 2000),
        "jacobian_sizes": (100, 150, 200, 300, 400, 500, 600, 800, 1000),
        "jacobian_budget_s": 120.0,
        "min_seconds": 0.3,
        "slope_from": {"core_adjoint": 400, "reference_adjoint": 400, "core_jacobian": 200},
    },
    "quick": {
        "n": 150,
        "repeats": 3,
        "adjoint_sizes": (100, 200, 400),
        "jacobian_sizes": (50, 100, 150, 200),
        "jacobian_budget_s": 3.0,
        "min_seconds": 0.1,
        "slope_from": {"core_adjoint": 100, "reference_adjoint": 100, "core_jacobian": 50},
    },
}
HIDDEN = (10, 5)  # L = 3 layers: 2 -> 10 -> 5 -> 2
PENALTY = 1e-3
RTOL = 1e-8  # the agreement of the two gradients (relative)
TARGETS = {"jacobian": 100.0, "reference": 5.0}  # adjoint at least this many times faster than ...
OTHERS = {"jacobian": "core_jacobian", "reference": "reference_adjoint"}  # ... these backends
GROWTH_REPEATS = 3  # timings per size of the adjoint gradients (median)
BACKENDS = ("core_adjoint", "core_jacobian", "reference_adjoint")


def perf_inputs(n, seed=0):
    """Arguments of ``kae_loss_and_grad`` for a 2-10-5-2 KAE with rbf layers on n three-circles points
    (standardized): the estimator's default gammas (1 / (d_0 X.var()), then 1 / d_{l-1}), random coefficients
    of variance 1 / n (codes of order one), identity operators, penalties 1e-3."""
    rng = np.random.default_rng(seed)
    X = make_concentric_circles(n, random_state=seed).data
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    sizes = (X.shape[1], *HIDDEN, X.shape[1])
    gammas = [1.0 / (sizes[0] * X.var())] + [1.0 / d for d in sizes[1:-1]]
    kernels = [("rbf", float(g), 3, 1.0) for g in gammas]
    phis = [rng.standard_normal((n, d)) / np.sqrt(n) for d in sizes[1:]]
    return {
        "X": X,
        "phis": phis,
        "kernels": kernels,
        "operators": [None] * len(phis),
        "penalties": [PENALTY] * len(phis),
    }


def evaluate(backend, inputs, n_threads):
    """(loss, grads, terms) of one evaluation by ``backend`` (one of BACKENDS)."""
    module, method = {
        "core_adjoint": (_core, "adjoint"),
        "core_jacobian": (_core, "jacobian"),
        "reference_adjoint": (reference, "adjoint"),
    }[backend]
    return module.kae_loss_and_grad(
        inputs["X"],
        inputs["phis"],
        inputs["kernels"],
        inputs["operators"],
        inputs["penalties"],
        precomputed=False,
        method=method,
        n_threads=n_threads,
    )


def relative_difference(a, b):
    """max |a - b| / max |b| over all gradient entries (lists of arrays)."""
    a, b = np.concatenate([np.ravel(g) for g in a]), np.concatenate([np.ravel(g) for g in b])
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


def check_agreement(results):
    """The three backends' gradients against the core's adjoint one; raises when one is off by more than RTOL."""
    loss, grads, _ = results["core_adjoint"]
    differences = {}
    for backend in BACKENDS[1:]:
        other_loss, other_grads, _ = results[backend]
        differences[backend] = {
            "grad": relative_difference(other_grads, grads),
            "loss": abs(other_loss - loss) / abs(loss),
        }
        if differences[backend]["grad"] > RTOL or differences[backend]["loss"] > RTOL:
            raise RuntimeError(f"{backend} disagrees with core_adjoint: {differences[backend]}")
    return differences


def backend_threads(backend, n_threads):
    """The thread limits a backend runs under: the core with ``n_threads`` OpenMP threads and one BLAS thread (it
    calls BLAS inside its OpenMP loops, which must not nest; see ``core_threads``), the NumPy reference with
    ``n_threads`` BLAS threads."""
    if backend.startswith("core"):
        return core_threads(n_threads)
    return blas_threads(n_threads)


def seconds_per_call(backend, inputs, n_threads, min_seconds):
    """Seconds per evaluation: enough consecutive calls to last ``min_seconds`` (at least one), averaged."""
    with backend_threads(backend, n_threads):
        calls, start = 0, time.perf_counter()
        while True:
            evaluate(backend, inputs, n_threads)
            calls += 1
            elapsed = time.perf_counter() - start
            if elapsed >= min_seconds:
                return elapsed / calls


def ratios_at(config, n_threads):
    """The issue's targets at n = config["n"] with ``n_threads`` threads: interleaved repeats of the three backends
    (after one untimed warm-up call of each, which also checks their agreement), medians and same-run ratios."""
    inputs = perf_inputs(config["n"])
    results = {}
    for backend in BACKENDS:
        with backend_threads(backend, n_threads):
            results[backend] = evaluate(backend, inputs, n_threads)
    differences = check_agreement(results)
    times = {backend: [] for backend in BACKENDS}
    load_start = load_average()
    for repeat in range(config["repeats"]):
        for backend in BACKENDS:
            times[backend].append(seconds_per_call(backend, inputs, n_threads, config["min_seconds"]))
        log(
            f"n = {config['n']}, {n_threads} thread(s), repeat {repeat}: "
            + ", ".join(f"{b} {times[b][-1]:.4g} s" for b in BACKENDS)
        )
    medians = {backend: float(np.median(t)) for backend, t in times.items()}
    adjoint = np.array(times["core_adjoint"])
    return {
        "n": config["n"],
        "n_threads": n_threads,
        "times": times,
        "medians": medians,
        "differences": differences,
        "ratios": {other: medians[backend] / medians["core_adjoint"] for other, backend in OTHERS.items()},
        "ratios_per_repeat_median": {
            other: float(np.median(np.array(times[backend]) / adjoint)) for other, backend in OTHERS.items()
        },
        "load": [load_start, load_average()],
        "loss": float(results["core_adjoint"][0]),
        "terms": np.asarray(results["core_adjoint"][2]).tolist(),
    }


def _predicted(points, n):
    """Seconds the Jacobian recursion would take at n: the last measured point grown as n^3 (the paper's exponent,
    which the measured slopes match; the slope of the last two points alone follows the noise of a shared machine)."""
    n_last, seconds = points[-1]
    return seconds * (n / n_last) ** 3


def growth(config, n_threads):
    """Seconds per evaluation against n: the adjoint ones at every size of ``adjoint_sizes`` (the median of
    GROWTH_REPEATS timings after a warm-up call), the Jacobian one (a single call) from the smallest size on while
    the predicted time of the next size stays within ``jacobian_budget_s``."""
    rows = []
    for n in config["adjoint_sizes"]:
        inputs = perf_inputs(n)
        row = {"n": n}
        for backend in ("core_adjoint", "reference_adjoint"):
            seconds_per_call(backend, inputs, n_threads, 0.0)  # warm-up
            row[backend] = float(
                np.median(
                    [seconds_per_call(backend, inputs, n_threads, config["min_seconds"]) for _ in range(GROWTH_REPEATS)]
                )
            )
        rows.append(row)
        log(f"growth n = {n}: core adjoint {row['core_adjoint']:.4g} s, reference {row['reference_adjoint']:.4g} s")
    jacobian, skipped = [], None
    for n in config["jacobian_sizes"]:
        if jacobian and _predicted(jacobian, n) > config["jacobian_budget_s"]:
            skipped = {"n": n, "predicted_seconds": _predicted(jacobian, n)}
            break
        jacobian.append((n, seconds_per_call("core_jacobian", perf_inputs(n), n_threads, 0.0)))
        log(f"growth n = {n}: core jacobian {jacobian[-1][1]:.4g} s")
    return {"adjoint": rows, "jacobian": [{"n": n, "core_jacobian": t} for n, t in jacobian], "skipped": skipped}


def fitted_slope(ns, seconds, from_n):
    """Least-squares slope of log(seconds) against log(n) over the sizes >= from_n (None with fewer than 2)."""
    ns, seconds = np.asarray(ns, dtype=np.float64), np.asarray(seconds, dtype=np.float64)
    keep = ns >= from_n
    if keep.sum() < 2:
        return None
    slope, intercept = np.polyfit(np.log(ns[keep]), np.log(seconds[keep]), 1)
    return {"slope": float(slope), "intercept": float(intercept), "from_n": int(from_n)}


def series(records):
    """{backend: (ns, seconds)} of the growth measurements."""
    g = records["growth"]
    out = {
        b: ([r["n"] for r in g["adjoint"]], [r[b] for r in g["adjoint"]]) for b in ("core_adjoint", "reference_adjoint")
    }
    out["core_jacobian"] = ([r["n"] for r in g["jacobian"]], [r["core_jacobian"] for r in g["jacobian"]])
    return out


def part_perf(quick, n_threads):
    config = PERF["quick" if quick else "full"]
    # The targets at one and two threads (and n_threads): on these 2 shared cores another busy process made every
    # two-thread call of the core take ~70 ms (one OpenMP thread waiting for its descheduled partner; 1 ms at
    # n = 300 on a quiet machine), and one-thread calls hardly slower.
    thread_counts = sorted({1, 2, n_threads})
    records = {
        "settings": {**config, "hidden_sizes": HIDDEN, "penalty": PENALTY, "rtol": RTOL},
        "ratios": [ratios_at(config, t) for t in thread_counts],
        "growth": growth(config, n_threads),
    }
    records["slopes"] = {b: fitted_slope(ns, t, config["slope_from"][b]) for b, (ns, t) in series(records).items()}
    return records


# ---------------------------------------------------------------------------------------------------- report


def _verdict(value, target):
    return f"{value:.1f}x ({'meets' if value >= target else 'misses'} >= {target:g}x)"


def _growth_rows(records):
    g = records["growth"]
    jacobian = {r["n"]: r["core_jacobian"] for r in g["jacobian"]}
    sizes = sorted({r["n"] for r in g["adjoint"]} | set(jacobian))
    adjoint = {r["n"]: r for r in g["adjoint"]}
    rows = []
    for n in sizes:
        a = adjoint.get(n)
        rows.append(
            [
                str(n),
                f"{1e3 * a['core_adjoint']:.3g}" if a else "-",
                f"{1e3 * a['reference_adjoint']:.3g}" if a else "-",
                f"{jacobian[n]:.3g}" if n in jacobian else "-",
                f"{a['reference_adjoint'] / a['core_adjoint']:.1f}" if a else "-",
                f"{jacobian[n] / a['core_adjoint']:.0f}" if a and n in jacobian else "-",
            ]
        )
    return rows


def _slope_text(records):
    names = {
        "core_adjoint": "core adjoint",
        "reference_adjoint": "NumPy reference adjoint",
        "core_jacobian": "core Jacobian recursions",
    }
    parts = [f"{names[b]} {s['slope']:.2f} (n >= {s['from_n']})" for b, s in records["slopes"].items() if s]
    return "; ".join(parts)


def _duration(seconds):
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


def _extrapolation(records):
    s, points = records["slopes"]["core_jacobian"], records["growth"]["jacobian"]
    if not s or not points:
        return ""
    n_max = points[-1]["n"]
    n_far = max(r["n"] for r in records["growth"]["adjoint"])
    if n_far <= n_max:
        return ""
    seconds = points[-1]["core_jacobian"] * (n_far / n_max) ** s["slope"]
    core = next(r["core_adjoint"] for r in records["growth"]["adjoint"] if r["n"] == n_far)
    return (
        f" Extrapolated with the fitted slope from n = {n_max} (the largest measured) to n = {n_far} only: the "
        f"Jacobian recursions would take about {_duration(seconds)} per evaluation there, against "
        f"{1e3 * core:.0f} ms for the core's adjoint gradient (measured)."
    )


def _ratio_rows(ratios):
    rows = []
    for r in ratios:
        rows += [
            [
                str(r["n_threads"]),
                b.replace("_", " "),
                f"{1e3 * r['medians'][b]:.4g}",
                ", ".join(f"{1e3 * t:.4g}" for t in r["times"][b]),
                "-" if b == "core_adjoint" else _verdict(r["ratios"][other], TARGETS[other]),
                f"{r['load'][0]:.2f} / {r['load'][1]:.2f}",
            ]
            for other, b in [(None, "core_adjoint"), *((o, b) for o, b in OTHERS.items())]
        ]
    return rows


def _slower(ratios):
    """A note on the backends that ran more than 20% slower with more threads than with one."""
    by_threads = {r["n_threads"]: r["medians"] for r in ratios}
    if 1 not in by_threads or len(by_threads) < 2:
        return ""
    most = max(by_threads)
    slower = [
        f"{b.replace('_', ' ')} ({1e3 * by_threads[most][b]:.4g} ms against {1e3 * by_threads[1][b]:.4g} ms)"
        for b in BACKENDS
        if by_threads[most][b] > 1.2 * by_threads[1][b]
    ]
    if not slower:
        return ""
    return (
        f" More than 20% slower with {most} threads than with one: {', '.join(slower)}. A call of about a "
        "millisecond leaves a second thread little to gain, and the other processes on the 2 cores (see the "
        "load) compete for the second core: the one-thread rows are the ones to read."
    )


def table_perf(records, n_threads):
    ratios, c = records["ratios"], records["settings"]
    skipped = records["growth"]["skipped"]
    grad = max(d["grad"] for r in ratios for d in r["differences"].values())
    loss = max(d["loss"] for r in ratios for d in r["differences"].values())
    setting = (
        f"A 2-{HIDDEN[0]}-{HIDDEN[1]}-2 KAE (L = 3, rbf layers with the estimator's default gammas) on n standardized "
        f"three-circles points, random coefficients (seed 0), penalties {PENALTY:g}; one call of "
        "`kae_loss_and_grad(..., method=...)` = the loss and its gradient with respect to all three coefficient "
        "matrices. Threads (threadpoolctl): the core with t OpenMP threads and one BLAS thread (it calls BLAS inside "
        "its OpenMP loops), the NumPy reference with t BLAS threads. Each timing runs the call as often as it takes "
        f"to last {c['min_seconds']:g} s (once for the slow ones) and divides; the three backends alternate within "
        f"each of {c['repeats']} repeats after one untimed warm-up call each. The warm-up results agree: gradients "
        f"within {grad:.1e} and losses within {loss:.1e} of the core adjoint's (relative; the bench stops above "
        f"{RTOL:g})."
    )
    per_repeat = "; ".join(
        f"{r['n_threads']} thread(s): {r['ratios_per_repeat_median']['jacobian']:.1f}x over the Jacobian recursions, "
        f"{r['ratios_per_repeat_median']['reference']:.1f}x over the reference"
        for r in ratios
    )
    stopped = (
        ""
        if not skipped
        else (
            f" The Jacobian recursion stopped at n = {records['growth']['jacobian'][-1]['n']}: n = {skipped['n']} would "
            f"take about {skipped['predicted_seconds']:.0f} s (> {c['jacobian_budget_s']:g} s per point)."
        )
    )
    lines = [
        setting,
        "",
        f"At n = {ratios[0]['n']} (the ratio column: the core adjoint's speed-up over that backend, same run):",
        "",
        markdown_table(
            [
                "threads t",
                "backend",
                "median (ms)",
                "repeats (ms)",
                "core adjoint faster by",
                "load average before / after",
            ],
            _ratio_rows(ratios),
        ),
        "",
        f"Medians of the per-repeat ratios (the same comparison repeat by repeat): {per_repeat}.{_slower(ratios)}",
        "",
        (
            f"Growth with n at {n_threads} thread(s) (one evaluation; adjoint: median of {GROWTH_REPEATS} timings as "
            "above after a warm-up call; Jacobian: one call per size):"
        ),
        "",
        markdown_table(
            [
                "n",
                "core adjoint (ms)",
                "reference adjoint (ms)",
                "core Jacobian (s)",
                "reference / core adjoint",
                "Jacobian / adjoint",
            ],
            _growth_rows(records),
        ),
        "",
        f"Fitted log-log slopes: {_slope_text(records)}.{stopped}{_extrapolation(records)}",
        "",
        (
            "The paper (section 4.2) bounds the objective by O(n^2 L p) and its gradient by O(n^3 L^2 p^3) (n samples, "
            "L layers, p the largest layer size), i.e. slope 3 in n for the gradient by the recursions; the adjoint "
            "gradient costs O(n^2 sum_l d_l) like the objective itself, slope 2."
        ),
    ]
    return "\n".join(lines)


def plot_perf(records, directory=FIGURES):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = {
        "core_adjoint": "core, adjoint",
        "reference_adjoint": "NumPy reference, adjoint",
        "core_jacobian": "core, Jacobian recursions (App. B)",
    }
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    for k, (backend, (ns, seconds)) in enumerate(series(records).items()):
        if not ns:
            continue
        ax.loglog(ns, seconds, "o-", color=f"C{k}", label=labels[backend])
        s = records["slopes"][backend]
        if s:
            fit_n = np.array([n for n in ns if n >= s["from_n"]], dtype=np.float64)
            ax.loglog(
                fit_n,
                np.exp(s["intercept"]) * fit_n ** s["slope"],
                "--",
                color=f"C{k}",
                lw=1,
                label=f"fit, slope {s['slope']:.2f}",
            )
    ax.set_xlabel("n (samples)")
    ax.set_ylabel("seconds per loss + gradient")
    threads = records.get("run", {}).get("n_threads")
    ax.set_title(
        f"KAE 2-{HIDDEN[0]}-{HIDDEN[1]}-2: gradient time against n"
        + (f", {threads} thread(s)" if threads else "")
        + "\n(paper: O(n^3 L^2 p^3) by its recursions; adjoint: O(n^2 sum d_l))",
        fontsize=9,
    )
    ax.legend(fontsize=7)
    ax.grid(True, which="both", lw=0.3)
    return [save_figure(fig, directory / "kae_perf.png", dpi=90)]
