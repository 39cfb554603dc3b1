"""Threads inside joblib workers: GridSearchCV(n_jobs=2) over LS-SVM fits with n_threads None, 1 and 2.

A joblib (loky) worker runs under a thread budget (cores / n_jobs: 1 here). With the default n_threads=None
the core and BLAS follow it. An explicit n_threads used to raise the BLAS pool of every worker too, and
spinning BLAS threads of two workers competed for the same cores (a warm grid of 0.45 s took 1.0-14 s).
Now an explicit n_threads sets the core's OpenMP team (passive waiting) and never raises BLAS above the
worker's budget. The table gives the median wall time of the whole grid search over ``--repeats`` runs, each
setting in turn within one run, and the ratio to n_threads=None.

    python bench/threads_in_workers.py              # about 2 minutes on 2 cores
"""

import time

import numpy as np
from _common import RESULTS, load_average, log, script_parser, write_script_section
from sklearn.model_selection import GridSearchCV

import rkm

HEADING = "## Threads inside joblib workers: GridSearchCV(n_jobs=2) over LS-SVM fits"
SETTINGS = (None, 1, 2)


def grid_seconds(n_threads, X, y):
    search = GridSearchCV(
        rkm.LSSVMRegressor(n_threads=n_threads),
        {"gamma": [0.05, 0.1, 0.2, 0.5], "lam": [1e-3, 1e-2, 1e-1]},
        cv=3,
        n_jobs=2,
    )
    start = time.perf_counter()
    search.fit(X, y)
    return time.perf_counter() - start


def main():
    parser = script_parser(__doc__, parts=("grid",), option="--part", n_threads=2)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--n-samples", type=int, default=1500)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    X = rng.normal(size=(args.n_samples, 8))
    y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=args.n_samples)
    grid_seconds(None, X, y)  # start the workers once
    load_before = load_average()
    runs = {setting: [] for setting in SETTINGS}
    for repeat in range(args.repeats):
        for setting in SETTINGS:
            runs[setting].append(grid_seconds(setting, X, y))
        log(f"repeat {repeat + 1}: " + ", ".join(f"{s}: {runs[s][-1]:.2f} s" for s in SETTINGS))
    base = float(np.median(runs[None]))
    rows = ["| n_threads | median s | min s | max s | ratio to None |", "|---|---:|---:|---:|---:|"]
    for setting in SETTINGS:
        times = runs[setting]
        rows.append(
            f"| {setting} | {np.median(times):.2f} | {min(times):.2f} | {max(times):.2f} | "
            f"{np.median(times) / base:.2f} |"
        )
    note = (
        f" {args.n_samples} samples, 8 features, 4 x 3 grid, 3-fold CV (36 fits), {args.repeats} repeats; load "
        f"average {load_before:.1f} before, {load_average():.1f} after."
    )
    write_script_section(RESULTS, HEADING, "bench/threads_in_workers.py", 2, "\n".join(rows), note=note)


if __name__ == "__main__":
    main()
