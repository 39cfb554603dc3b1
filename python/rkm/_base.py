"""Validation, memory and thread helpers shared by the public API."""

import contextlib
import functools
import math
import numbers
import os

import numpy as np
from sklearn.utils import check_array
from threadpoolctl import ThreadpoolController

FLOAT_DTYPES = (np.float64, np.float32)


def check_matrix(X, name, *, min_samples=1, min_features=1):
    """Return X as a finite, C-contiguous float32/float64 2-D array (other dtypes become float64).

    Non-contiguous and Fortran-ordered inputs are copied into C order; everything else is a view.
    """
    return check_array(
        X,
        dtype=list(FLOAT_DTYPES),
        order="C",
        ensure_min_samples=min_samples,
        ensure_min_features=min_features,
        input_name=name,
    )


def check_n_threads(n_threads):
    """Validate the n_threads knob (None, k > 0, or -k for all cores but k - 1)."""
    if n_threads is None:
        return None
    if not isinstance(n_threads, numbers.Integral) or isinstance(n_threads, bool) or n_threads == 0:
        raise ValueError(f"n_threads: must be None, a positive int, or negative (-1 = all cores), got {n_threads!r}")
    return int(n_threads)


def check_positive(value, name, *, allow_none=False):
    """Validate a strictly positive finite real number."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not np.isfinite(value) or value <= 0:
        raise ValueError(f"{name}: must be a positive finite number, got {value!r}")
    return float(value)


def check_nonnegative(value, name):
    """Validate a finite real number >= 0."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not np.isfinite(value) or value < 0:
        raise ValueError(f"{name}: must be a non-negative finite number, got {value!r}")
    return float(value)


def check_choices(params):
    """Validate (name, value, allowed) triples: each value must be one of its allowed ones."""
    for name, value, allowed in params:
        if value not in allowed:
            raise ValueError(f"{name}: must be one of {allowed}, got {value!r}")


def check_int(value, name, *, low=1, allow_none=False):
    """Validate an int >= low (not a bool), or None when allowed."""
    if value is None and allow_none:
        return None
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < low:
        kind = {0: "a non-negative int", 1: "a positive int"}.get(low, f"an int >= {low}")
        raise ValueError(f"{name}: must be {kind}{' or None' if allow_none else ''}, got {value!r}")
    return int(value)


def available_memory_bytes():
    """Memory the OS can still hand out, from /proc/meminfo where present."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def check_memory(needed, name, what, advice="use fewer samples or float32"):
    """Raise MemoryError naming `what` when `needed` bytes exceed the memory the OS can still hand out."""
    available = available_memory_bytes()
    if available is not None and needed > available:
        raise MemoryError(
            f"{name}: {what} needs {needed / 2**30:.2f} GiB but only {available / 2**30:.2f} GiB of memory is "
            f"available; {advice}"
        )


def check_fits_in_memory(shape, dtype, name):
    """Raise MemoryError before allocating an array that cannot fit in available memory."""
    needed = int(np.prod(shape, dtype=np.float64)) * np.dtype(dtype).itemsize
    check_memory(needed, name, f"a {' x '.join(map(str, shape))} {np.dtype(dtype).name} matrix")


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


CODINGS = ("one_vs_all", "minimum_output")


def _minimum_output_codes(n_classes):
    """+-1 codewords of ceil(log2 n_classes) bits: the binary digits of the class index."""
    n_bits = max(1, math.ceil(math.log2(n_classes)))
    bits = (np.arange(n_classes)[:, None] >> np.arange(n_bits)[None, :]) & 1
    return 2.0 * bits - 1.0


def class_codes(n_classes, coding):
    """The +-1 codeword of each class (n_classes x n_outputs) for the LS-SVM classifiers' targets (eq. 3.22).

    Two classes use one output (+1 for the second class); more use one output per class ("one_vs_all") or
    ceil(log2 n_classes) outputs carrying the binary digits of the class index ("minimum_output").
    """
    check_choices((("coding", coding, CODINGS),))
    if n_classes == 2:
        return np.array([[-1.0], [1.0]])
    if coding == "one_vs_all":
        return 2.0 * np.eye(n_classes) - 1.0
    return _minimum_output_codes(n_classes)


def class_scores(outputs, codes, coding):
    """Per-class scores of coded outputs: the output itself for two classes (positive: the second class),
    each class's own output for one-vs-all, else the outputs' inner product with each codeword."""
    if codes.shape[0] == 2:
        return outputs.ravel()
    if coding == "one_vs_all":
        return outputs
    return outputs @ codes.T.astype(outputs.dtype)
