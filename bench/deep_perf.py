"""Deep RKM performance (Suykens 2017, sections 5.1-5.2): the M1 objective and the level-wise fit.

Writes (or replaces) the section "Deep RKM performance" of bench/RESULTS.md. Ratios compare cases of the
same run, with the thread count given (default 2) for OpenMP and BLAS alike; every figure is the median of
the repeats, taken in interleaved rounds so that the machine's load drifts affect both sides alike.

- ``objective``: the M1 objective and gradient (eq. 5.3, all three kernels rbf) at N = 5000, M = 200
  reduced-set points, d = 16, (s1, s2) = (5, 2), p = 1: the core's ``DeepReducedSetObjective`` (data held
  across calls, as in an L-BFGS fit) against ``rkm.reference.deep_reduced_set_objective`` (target: the core
  10x faster). Also N = 20 000 for the trend.
- ``levelwise``: ``DeepRKM`` (architecture "lssvm_kpca_kpca", 3 forward-backward passes, (s2, s3) = (1, 1)
  and (7, 2), 1/eta2 = 1/eta3 = 1e5) against one ``LSSVMRegressor`` fit (Cholesky) on the same data at
  N = 5000 (target: the deep fit at most 3x the LS-SVM fit).

Data: X with d = 16 standard normal inputs, y = sin(x.a) + 0.1 noise; RBF gamma = 1 / (2 d), lambda = 1e-2.

    python bench/deep_perf.py                # about 2 minutes
    python bench/deep_perf.py --quick        # N = 1000: seconds
"""

import argparse

import numpy as np
from _common import RESULTS, blas_threads, quiet_convergence, time_calls

# The core's M1 objective itself is what this benchmark times (held across calls, as in an L-BFGS fit); DeepRKM
# builds it inside fit and has no public constructor for it.
from rkm import DeepRKM, LSSVMRegressor, _core, reference
from rkm.cli.report import markdown_table, provenance, write_section
from rkm.kernels import kernel_matrix

HEADING = "## Deep RKM performance: M1 objective and level-wise fit"


def regression_data(n, d=16, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    direction = rng.standard_normal(d)
    y = np.sin(X @ direction / np.linalg.norm(direction)) + 0.1 * rng.standard_normal(n)
    return X, y


def interleaved_medians(functions, rounds, calls=None):
    """Median time per call of each function over `rounds` rounds that time every function in turn
    (calls[name] consecutive calls each, default 1: short functions are timed over several calls)."""
    calls = calls or {}
    for function in functions.values():
        function()  # warm-up: caches, thread pools, first-touch pages
    times = {name: [] for name in functions}
    for _ in range(rounds):
        for name, function in functions.items():
            times[name].append(time_calls(function, calls.get(name, 1)))
    return {name: float(np.median(values)) for name, values in times.items()}


def objective_case(n, M, threads, rounds):
    X, y = regression_data(n)
    d = X.shape[1]
    s1, s2, p = 5, 2, 1
    gamma = 1.0 / (2 * d)
    rng = np.random.default_rng(1)
    reduced = X[rng.choice(n, M, replace=False)]
    K1 = kernel_matrix(X, reduced, kernel="rbf", gamma=gamma)
    G1 = kernel_matrix(reduced, kernel="rbf", gamma=gamma)
    Y = y[:, None]
    theta = np.concatenate([0.1 * rng.standard_normal(M * (s1 + s2 + p)), np.zeros(p), np.ones(s1 + s2)])
    kernel = ("rbf", 1.0, 3.0, 1.0)
    args = ((M, s1, s2, p), kernel, kernel, (1.0, 1.0, 1.0), 1e-2, 10.0, 0.1, "H", "full")
    core = _core.DeepReducedSetObjective(K1, G1, Y, *args, threads)
    f_core, g_core, _ = core(theta)
    f_ref, g_ref, _ = reference.deep_reduced_set_objective(theta, K1, G1, Y, *args, n_threads=threads)
    gradient_error = np.abs(g_core - g_ref).max() / np.abs(g_ref).max()
    with blas_threads(threads):
        medians = interleaved_medians(
            {
                "core": lambda: core(theta),
                "reference": lambda: reference.deep_reduced_set_objective(theta, K1, G1, Y, *args, n_threads=threads),
            },
            rounds,
            calls={"core": 10},
        )
    return medians, abs(f_core - f_ref) / abs(f_ref), gradient_error


def levelwise_case(n, threads, rounds):
    X, y = regression_data(n)
    gamma = 1.0 / (2 * X.shape[1])
    # The passes of section 5.1 (phases="forward_backward") at 1/eta2 = 1/eta3 = 1e5, as timed before the joint
    # solve became DeepRKM's default.
    passes = dict(gamma=gamma, lam=1e-2, eta=(1.0, 1e-5, 1e-5), n_passes=3, phases="forward_backward")
    models = {
        "LSSVMRegressor": LSSVMRegressor(gamma=gamma, lam=1e-2, n_threads=threads),
        "DeepRKM (1+1), 3 passes": DeepRKM(n_components=(1, 1), **passes, n_threads=threads),
        "DeepRKM (7+2), 3 passes": DeepRKM(n_components=(7, 2), **passes, n_threads=threads),
    }
    # 1/eta = 1e5 alternates between two states (DeepRKM.pass_changes_); timed as it is.
    with quiet_convergence():
        return interleaved_medians({name: (lambda m=model: m.fit(X, y)) for name, model in models.items()}, rounds)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="N = 1000 only, one round")
    args = parser.parse_args()
    threads = args.threads
    sizes = [1000] if args.quick else [5000, 20000]
    rounds = 1 if args.quick else 5

    rows = []
    for n in sizes:
        medians, f_error, g_error = objective_case(n, 200, threads, rounds)
        ratio = medians["reference"] / medians["core"]
        print(
            f"objective N={n}: core {medians['core'] * 1e3:.1f} ms, reference {medians['reference'] * 1e3:.1f} ms, "
            f"{ratio:.1f}x",
            flush=True,
        )
        rows.append(
            [
                f"{n}",
                "200",
                f"{medians['core'] * 1e3:.1f}",
                f"{medians['reference'] * 1e3:.1f}",
                f"**{ratio:.1f}x**",
                f"{f_error:.1e} / {g_error:.1e}",
            ]
        )
    objective_table = markdown_table(
        ["N", "M", "core (ms)", "reference (ms)", "speed-up", "rel. difference f / grad"], rows
    )

    n_fit = 1000 if args.quick else 5000
    fit_medians = levelwise_case(n_fit, threads, 1 if args.quick else 3)
    base = fit_medians["LSSVMRegressor"]
    fit_rows = [[name, f"{seconds:.3f}", f"{seconds / base:.2f}x"] for name, seconds in fit_medians.items()]
    for row in fit_rows:
        print("levelwise", *row, flush=True)
    fit_table = markdown_table([f"fit (N = {n_fit})", "seconds", "vs one LS-SVM fit"], fit_rows)

    section = "\n\n".join(
        [
            HEADING,
            provenance("bench/deep_perf.py", threads),
            "M1 objective and gradient (eq. 5.3; rbf in all levels, d = 16, (s1, s2) = (5, 2), p = 1, variant a "
            "with c_stab = 10, c0 = 0.1), the core's `DeepReducedSetObjective` (data copied once per fit, as in "
            f"L-BFGS) against `rkm.reference.deep_reduced_set_objective`; medians of {rounds} interleaved rounds (the core "
            "timed over 10 consecutive calls per round). "
            "Target: at least 10x at N = 5000, M = 200.",
            objective_table,
            "Level-wise deep fit (eq. 4.18, 3 forward-backward passes, 1/eta2 = 1/eta3 = 1e5) against one LS-SVM "
            "fit (`LSSVMRegressor`, Cholesky) on the same data, end to end (kernel matrix included); medians of "
            "interleaved rounds. Target: at most 3x.",
            fit_table,
        ]
    )
    if not args.quick:
        write_section(RESULTS, HEADING, section)
    else:
        print(section)


if __name__ == "__main__":
    main()
