"""Helpers shared by the parts of bench/deep_rkm.py (worker pool, metrics, formatting), in one place so that
bench/_deep_table1.py, bench/_deep_table2.py and bench/deep_rkm.py import them without a cycle."""

import contextlib
import multiprocessing
import warnings
from concurrent.futures import ProcessPoolExecutor

import numpy as np
from sklearn.exceptions import ConvergenceWarning


def _one_thread():
    """Worker initializer: one OpenMP and BLAS thread per worker process."""
    from threadpoolctl import threadpool_limits

    global _THREAD_LIMIT
    _THREAD_LIMIT = threadpool_limits(1)


def parallel_map(function, tasks, jobs):
    """``[function(t) for t in tasks]`` in ``jobs`` single-threaded worker processes (spawned: the
    parent's OpenMP runtime is not forked)."""
    if jobs <= 1:
        return [function(t) for t in tasks]
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(jobs, mp_context=context, initializer=_one_thread) as pool:
        return list(pool.map(function, tasks))


@contextlib.contextmanager
def quiet_convergence():
    """Silence ``ConvergenceWarning`` inside the block: the bench fits many models that stop at max_iter or
    whose level-wise iteration alternates on purpose, and measures that itself (status counts, the change of
    H1 between passes) rather than reading the warnings."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        yield


def coded_mse(model, X, y):
    """Mean squared distance of a classifier's decision values to the +-1 codewords of the true labels."""
    codes = model.codes_[np.searchsorted(model.classes_, y)]
    scores = np.asarray(model.decision_function(X), dtype=np.float64).reshape(codes.shape)
    return float(np.mean((scores - codes) ** 2))


def relative_change(new, old):
    """||new - old|| / ||old|| over all entries."""
    return float(np.linalg.norm(np.ravel(new) - np.ravel(old)) / np.linalg.norm(np.ravel(old)))


def format_grid(grid):
    """A parameter grid as text: "name ∈ {v1, v2, ...}; ..."."""
    return "; ".join(f"{k} ∈ {{{', '.join(f'{v:g}' for v in values)}}}" for k, values in grid.items())
