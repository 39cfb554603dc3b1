"""The n_threads knob and the BLAS thread limits shared by every estimator."""

import contextlib
import functools
import numbers
import os
import threading

from threadpoolctl import ThreadpoolController


def check_n_threads(n_threads):
    """Validate the n_threads knob (None, k > 0, or -k for all cores but k - 1); k > cores becomes the cores."""
    if n_threads is None:
        return None
    if not isinstance(n_threads, numbers.Integral) or isinstance(n_threads, bool) or n_threads == 0:
        raise ValueError(f"n_threads: must be None, a positive int, or negative (-1 = all cores), got {n_threads!r}")
    return min(int(n_threads), available_cores()) if n_threads > 0 else int(n_threads)


def available_cores():
    """The cores this process may run on (its CPU affinity where the OS has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def thread_count(n_threads):
    """The number of threads n_threads asks for, at most the available cores, or None for the defaults.

    More threads than cores only makes OpenMP teams wait on each other, and a team of tens of thousands makes
    libgomp fail to create threads and end the process: a count above the cores is clamped to them, as
    scikit-learn's n_jobs is for its OpenMP loops.
    """
    if n_threads is None:
        return None
    cores = available_cores()
    return min(n_threads, cores) if n_threads > 0 else max(1, cores + 1 + n_threads)


@functools.cache
def _threadpool_controller():
    # Scanning the loaded libraries costs milliseconds: do it once.
    return ThreadpoolController()


class _BlasLimits:
    """The process-wide BLAS thread limit, shared by concurrent fits.

    The BLAS pool is one per process, so per-call limits entered and left out of order (fits in a thread
    pool) would each restore the value they found, which may be another fit's: the last to leave could leave
    BLAS at 1 thread for the rest of the process. Here the first fit to enter records the original limits and
    the last to leave restores them; in between the most recent active request applies.

    A request never raises the pool above the limit the process was given when the first fit entered (a joblib
    worker's budget of 1, a threadpoolctl limit, OPENBLAS_NUM_THREADS): an explicit n_threads inside
    GridSearchCV(n_jobs=2) would otherwise wake spinning BLAS threads in every worker, and the workers' pools
    would compete for the same cores (fits 2-30x slower). OpenMP teams of the core still get n_threads.
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._active = []
        self._original = None
        self._ceiling = None

    def enter(self, count):
        with self._lock:
            controller = _threadpool_controller().select(user_api="blas")
            if not self._active:
                self._original = _counts_outside_core_teams(controller.info())
                self._ceiling = min((lib["num_threads"] for lib in self._original), default=count)
            self._active.append(count)
            limit = min(count, self._ceiling)
            self._apply(lambda: controller.limit(limits=limit), limit)

    def leave(self, count):
        with self._lock:
            controller = _threadpool_controller().select(user_api="blas")
            self._active.remove(count)
            if self._active:
                limit = min(self._active[-1], self._ceiling)
                self._apply(lambda: controller.limit(limits=limit), limit)
            else:
                original = {lib["filepath"]: lib["num_threads"] for lib in self._original}
                self._apply(lambda: controller.limit(limits=original), _core_library_count(original))

    @staticmethod
    def _apply(set_limits, core_library_count):
        # threadpoolctl >= 3.8 lets only one "controlling" thread change OpenBLAS's process-wide pool and
        # silently ignores the others; the fits here take turns under the lock, so each takes control for its
        # change and hands it back.
        release = getattr(_openblas_controller_class(), "clear_controlling_thread", None)
        if release is not None:
            release(force=True)
        set_limits()
        if release is not None:
            release(force=True)
        # The core's OpenMP teams running now (other fits) hold its BLAS at one thread and restore the count
        # they found when they finish: this one, from now on.
        if core_library_count is not None:
            _core_module()._rebase_scoped_blas_threads(int(core_library_count))


def _core_module():
    from rkm import _core

    return _core


@functools.cache
def _core_blas_library():
    """The real path of the BLAS library whose thread count the core controls, or None."""
    path = _core_module().config().get("blas_thread_control")
    return os.path.realpath(path) if path else None


def is_core_blas_library(path):
    """Whether the BLAS library at ``path`` (a threadpoolctl file path) is the one whose count the core controls."""
    library = _core_blas_library()
    return library is not None and os.path.realpath(path) == library


def _core_library_count(counts_by_path):
    """The count that ``counts_by_path`` (threadpoolctl file path -> threads) gives the core's BLAS, or None."""
    return next((count for path, count in counts_by_path.items() if is_core_blas_library(path)), None)


def _counts_outside_core_teams(libraries):
    """threadpoolctl's info, with the count the core's running OpenMP teams will restore in place of the one
    they hold its BLAS at (one thread) meanwhile."""
    scoped = _core_module()._scoped_blas_threads()
    if not scoped:
        return libraries
    return [{**lib, "num_threads": scoped} if is_core_blas_library(lib["filepath"]) else lib for lib in libraries]


def _openblas_controller_class():
    import threadpoolctl

    return getattr(threadpoolctl, "OpenBLASController", None)


_BLAS_LIMITS = _BlasLimits()


@contextlib.contextmanager
def blas_threads(count):
    """Limit the BLAS libraries to `count` threads for the duration (None: leave them as they are)."""
    if count is None:
        yield
        return
    _BLAS_LIMITS.enter(count)
    try:
        yield
    finally:
        _BLAS_LIMITS.leave(count)
