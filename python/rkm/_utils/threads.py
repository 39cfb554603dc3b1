"""The n_threads knob and the BLAS thread limits shared by every estimator."""

import contextlib
import functools
import numbers
import os

from threadpoolctl import ThreadpoolController


def check_n_threads(n_threads):
    """Validate the n_threads knob (None, k > 0, or -k for all cores but k - 1)."""
    if n_threads is None:
        return None
    if not isinstance(n_threads, numbers.Integral) or isinstance(n_threads, bool) or n_threads == 0:
        raise ValueError(f"n_threads: must be None, a positive int, or negative (-1 = all cores), got {n_threads!r}")
    return int(n_threads)


def thread_count(n_threads):
    """The number of threads n_threads asks for, or None for the libraries' defaults."""
    if n_threads is None:
        return None
    return n_threads if n_threads > 0 else max(1, (os.cpu_count() or 1) + 1 + n_threads)


@functools.cache
def _threadpool_controller():
    # Scanning the loaded libraries costs milliseconds: do it once.
    return ThreadpoolController()


@contextlib.contextmanager
def blas_threads(count):
    """Limit the BLAS libraries to `count` threads for the duration (None: leave them as they are)."""
    if count is None:
        yield
        return
    with _threadpool_controller().limit(limits=count, user_api="blas"):
        yield
