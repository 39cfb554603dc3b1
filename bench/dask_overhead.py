"""Cost of fitting kernel PCA on a Dask array instead of a NumPy array of the same data.

Fits ``rkm.KernelPCA(n_components=10, feature_map=rkm.features.Nystroem(1000))`` on seeded synthetic data
(200 000 x 64 float64 by default), and ``kernel_storage="matrix_free"`` (tol 1e-6) on its first 20 000 rows, in
memory, then on the same data as a Dask array of row chunks (25 000 rows; 5 000 for matrix-free) on a
local cluster of one worker with two threads and of two single-threaded workers (same two cores). The Dask
array is persisted on the cluster before timing, so the times count the fit, not the transfer of the data;
when the fit leaves H_ lazy, computing it is timed too. Each time is the median of --repeats fits after a
warm-up fit; the eigenvalues of every Dask fit are asserted equal to the in-memory ones.

    python bench/dask_overhead.py [--n-samples 200000] [--repeats 3]

Writes (or replaces) the section "Large-N kernel PCA: Dask" of bench/RESULTS.md.
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
HEADING = "## Large-N kernel PCA: Dask"
# (method, samples, chunk rows, estimator options)
CASES = (
    ("nystrom", None, 25_000, dict(feature_map=rkm.features.Nystroem(1000, random_state=0))),
    ("matrix_free", 20_000, 5_000, dict(kernel_storage="matrix_free", tol=1e-6)),
)
# Eigenvalues of the Dask fit agree with the in-memory fit to rounding (the reduction order differs).
EIGENVALUE_RTOL = 1e-8


def make_data(n_samples, seed=0):
    """Gaussian blobs in 64 dimensions, so the spectrum has a few leading components."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=3.0, size=(8, N_FEATURES))
    return centres[rng.integers(0, len(centres), n_samples)] + rng.normal(size=(n_samples, N_FEATURES))


def fit(X, method, options):
    model = rkm.KernelPCA(n_components=10, random_state=0, **options).fit(X)
    if hasattr(model.H_, "compute"):  # a lazy Dask array
        model.H_.compute()
    return model


def median_fit_time(X, repeats, method, options):
    """Median wall time of `repeats` fits after a warm-up fit, and the last model."""
    return timed_median(lambda: fit(X, method, options), repeats)


def time_on_cluster(X, n_workers, threads_per_worker, repeats, chunk_rows, method, options):
    import dask.array as da
    from distributed import Client, LocalCluster, wait

    with (
        LocalCluster(
            n_workers=n_workers, threads_per_worker=threads_per_worker, processes=True, dashboard_address=None
        ) as cluster,
        Client(cluster) as client,
    ):
        dX = client.persist(da.from_array(X, chunks=(chunk_rows, N_FEATURES)))
        wait(dX)
        return median_fit_time(dX, repeats, method, options)


def max_relative_difference(values, expected):
    return float(np.max(np.abs(values - expected) / np.abs(expected)))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n-samples", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--output", default=str(RESULTS))
    args = parser.parse_args(argv)

    X_all = make_data(args.n_samples)
    rows = []
    for method, n_samples, chunk_rows, options in CASES:
        X = X_all[:n_samples] if n_samples else X_all
        base_time, base = median_fit_time(X, args.repeats, method, options)
        rows.append((method, X.shape[0], "in memory (NumPy)", "-", base_time, 1.0, 0.0))
        for n_workers, threads in ((1, 2), (2, 1)):
            elapsed, model = time_on_cluster(X, n_workers, threads, args.repeats, chunk_rows, method, options)
            difference = max_relative_difference(model.eigenvalues_, base.eigenvalues_)
            assert difference < EIGENVALUE_RTOL, f"Dask fit eigenvalues differ by {difference:.1e} (relative)"
            setup = f"{n_workers} worker{'s' if n_workers > 1 else ''} x {threads} thread{'s' if threads > 1 else ''}"
            rows.append(
                (method, X.shape[0], f"Dask, {setup}", str(chunk_rows), elapsed, elapsed / base_time, difference)
            )
            print(rows[-1], flush=True)

    lines = [
        HEADING,
        "",
        f"Written by `python bench/dask_overhead.py` on {datetime.date.today().isoformat()}: {platform.machine()}, "
        f"{os.cpu_count()} cores, rkm {rkm.__version__}, dask {__import__('dask').__version__}. "
        f"KernelPCA(n_components=10, method=...) on Gaussian blobs (d = {N_FEATURES}, float64): nystrom with 1000 "
        "landmarks, matrix_free with tol 1e-6. The Dask array is persisted on a LocalCluster before timing; medians "
        f"of {args.repeats} fits after a warm-up. Each Dask fit's eigenvalues are checked against the in-memory fit.",
        "",
        markdown_table(
            ["method", "N", "run", "chunk rows", "fit s", "vs in memory", "max rel. eigenvalue difference"],
            [
                [method, str(n), name, chunks, f"{elapsed:.2f}", f"{ratio:.2f}x", f"{difference:.1e}"]
                for method, n, name, chunks, elapsed, ratio, difference in rows
            ],
        ),
    ]
    write_section(args.output, HEADING, "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
