"""Cost of fitting on a Dask array instead of a NumPy array of the same data: kernel PCA, the LS-SVM and the
multi-view RKM.

Fits each case on seeded synthetic data (200 000 x 64 float64 by default; the matrix-free case on its first
20 000 rows, the conjugate-gradient one on 10 000) in memory, then on the same data as Dask arrays of row chunks on a local cluster
of one worker with two threads and of two single-threaded workers (same two cores):

- KernelPCA(10) with Nystroem(1000) (a map-reduce of the features' moments, then the hidden features), and with
  kernel_storage="matrix_free" (tol 1e-6; each block product one task per partition);
- LSSVMRegressor with Nystroem(1000) (the primal's moments with the targets as one map-reduce), and without a
  feature map (solver="cg", lam 1, a pivoted Cholesky preconditioner of rank 300 built on the client, tol 1e-6;
  each kernel product one task per partition);
- MultiViewRKM(10) with a RandomFourierFeatures(1000) view of X and a linear view of the target (the
  covariance as one map-reduce, then H of every row).

The Dask arrays are persisted on the cluster before timing, so the times count the fit, not the transfer of the
data; a lazy H_ is computed within the time. Each time is the median of --repeats fits after a warm-up fit; each
Dask fit's eigenvalues (or the LS-SVM's predictions on 1000 rows) are asserted equal to the in-memory ones.

    python bench/dask_overhead.py [--n-samples 200000] [--repeats 3]

Writes (or replaces) the section "Large N: Dask" of bench/RESULTS.md.
"""

import argparse
import datetime
import os
import platform

import numpy as np
from _common import RESULTS, timed_median

import rkm
from rkm.cli.report import markdown_table, write_section

N_FEATURES = 64
HEADING = "## Large N: Dask"
GAMMA = 1.0 / (2 * N_FEATURES)
# (case, samples (None: all), chunk rows, model, estimator options)
CASES = (
    ("nystrom", None, 25_000, "kpca", dict(feature_map=rkm.features.Nystroem(1000, gamma=GAMMA, random_state=0))),
    ("matrix_free", 20_000, 5_000, "kpca", dict(kernel_storage="matrix_free", gamma=GAMMA, tol=1e-6)),
    ("nystrom", None, 25_000, "lssvm", dict(feature_map=rkm.features.Nystroem(1000, gamma=GAMMA, random_state=0))),
    (
        "cg",
        10_000,
        2_500,
        "lssvm",
        dict(solver="cg", gamma=GAMMA, lam=1.0, preconditioner_rank=300, tol=1e-6, random_state=0),
    ),
    (
        "rff + linear",
        None,
        25_000,
        "multiview",
        dict(kernel=(rkm.features.RandomFourierFeatures(1000, gamma=GAMMA, random_state=0), "linear")),
    ),
)
MODELS = {"kpca": "KernelPCA", "lssvm": "LSSVMRegressor", "multiview": "MultiViewRKM"}
# The Dask fits agree with the in-memory fits to rounding (the reduction order differs).
RTOL = 1e-8


def make_data(n_samples, seed=0):
    """Gaussian blobs in 64 dimensions, so the spectrum has a few leading components, and a smooth target."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=3.0, size=(8, N_FEATURES))
    X = centres[rng.integers(0, len(centres), n_samples)] + rng.normal(size=(n_samples, N_FEATURES))
    y = np.sin(X[:, 0] / 3) + 0.1 * X[:, 1] + 0.1 * rng.normal(size=n_samples)
    return X, y


def estimator(model, options):
    if model == "kpca":
        return rkm.KernelPCA(n_components=10, random_state=0, **options)
    if model == "lssvm":
        return rkm.LSSVMRegressor(**options)
    return rkm.MultiViewRKM(10, random_state=0, **options)


def fit(model, options, X, y):
    arguments = {"kpca": (X,), "lssvm": (X, y), "multiview": ([X, y[:, None]],)}[model]
    fitted = estimator(model, options).fit(*arguments)
    if hasattr(getattr(fitted, "H_", None), "compute"):  # a lazy Dask array
        fitted.H_.compute()
    return fitted


def summary(model, fitted, X):
    """What the fits are compared by: the eigenvalues, or the LS-SVM's predictions on the first 1000 rows."""
    return fitted.predict(X[:1000]) if model == "lssvm" else fitted.eigenvalues_


def time_on_cluster(X, y, n_workers, threads_per_worker, repeats, chunk_rows, model, options):
    import dask.array as da
    from distributed import Client, LocalCluster, wait

    with (
        LocalCluster(
            n_workers=n_workers, threads_per_worker=threads_per_worker, processes=True, dashboard_address=None
        ) as cluster,
        Client(cluster) as client,
    ):
        dX = client.persist(da.from_array(X, chunks=(chunk_rows, N_FEATURES)))
        dy = client.persist(da.from_array(y, chunks=chunk_rows))
        wait([dX, dy])
        return timed_median(lambda: fit(model, options, dX, dy), repeats)


def max_relative_difference(values, expected):
    return float(np.max(np.abs(values - expected)) / np.max(np.abs(expected)))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n-samples", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--output", default=str(RESULTS))
    args = parser.parse_args(argv)

    X_all, y_all = make_data(args.n_samples)
    rows = []
    for case, n_samples, chunk_rows, model, options in CASES:
        X, y = (X_all[:n_samples], y_all[:n_samples]) if n_samples else (X_all, y_all)
        base_time, base = timed_median(
            lambda X=X, y=y, model=model, options=options: fit(model, options, X, y), args.repeats
        )
        expected = summary(model, base, X)
        rows.append((MODELS[model], case, X.shape[0], "in memory (NumPy)", "-", base_time, 1.0, 0.0))
        for n_workers, threads in ((1, 2), (2, 1)):
            elapsed, fitted = time_on_cluster(X, y, n_workers, threads, args.repeats, chunk_rows, model, options)
            difference = max_relative_difference(summary(model, fitted, X), expected)
            assert difference < RTOL, f"{model} {case}: the Dask fit differs by {difference:.1e} (relative)"
            setup = f"{n_workers} worker{'s' if n_workers > 1 else ''} x {threads} thread{'s' if threads > 1 else ''}"
            rows.append(
                (
                    MODELS[model],
                    case,
                    X.shape[0],
                    f"Dask, {setup}",
                    str(chunk_rows),
                    elapsed,
                    elapsed / base_time,
                    difference,
                )
            )
            print(rows[-1], flush=True)

    lines = [
        HEADING,
        "",
        f"Written by `python bench/dask_overhead.py` on {datetime.date.today().isoformat()}: {platform.machine()}, "
        f"{os.cpu_count()} cores, rkm {rkm.__version__}, dask {__import__('dask').__version__}. "
        f"Gaussian blobs (d = {N_FEATURES}, float64), gamma = 1/{2 * N_FEATURES}: KernelPCA(10) with Nystroem(1000) "
        "or matrix-free (tol 1e-6); LSSVMRegressor with Nystroem(1000) (the primal) or without (solver='cg', lam 1, "
        "preconditioner rank 300, tol 1e-6); MultiViewRKM(10) with a RandomFourierFeatures(1000) view of X and a "
        "linear view of the target. The Dask arrays are persisted on a LocalCluster before timing; medians "
        f"of {args.repeats} fits after a warm-up. Each Dask fit is checked against the in-memory fit: its "
        "eigenvalues, or the LS-SVM's predictions on 1000 rows (largest difference relative to the largest value).",
        "",
        markdown_table(
            ["model", "case", "N", "run", "chunk rows", "fit s", "vs in memory", "max rel. difference"],
            [
                [model, case, str(n), name, chunks, f"{elapsed:.2f}", f"{ratio:.2f}x", f"{difference:.1e}"]
                for model, case, n, name, chunks, elapsed, ratio, difference in rows
            ],
        ),
    ]
    write_section(args.output, HEADING, "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
