"""Argument checks and the n_threads knob shared by the reference routines."""

import contextlib
import numbers
import os

import numpy as np
from threadpoolctl import threadpool_limits


def check_n_threads(n_threads):
    """Validate the n_threads knob (None, k > 0, or -k for all cores but k - 1)."""
    if n_threads is None:
        return None
    if isinstance(n_threads, bool) or not isinstance(n_threads, numbers.Integral) or n_threads == 0:
        raise ValueError(f"n_threads: must be None, a positive int, or negative (-1 = all cores), got {n_threads!r}")
    return int(n_threads)


@contextlib.contextmanager
def blas_threads(n_threads):
    """Validate n_threads and limit the BLAS threads to it for the duration (None: leave them)."""
    n_threads = check_n_threads(n_threads)
    if n_threads is None:
        yield
        return
    count = n_threads if n_threads > 0 else max(1, (os.cpu_count() or 1) + 1 + n_threads)
    with threadpool_limits(limits=count, user_api="blas"):
        yield


def check_finite(A, name):
    # min and max propagate NaN and expose infinities without a boolean temporary of A's size.
    if A.size and A.dtype.kind == "f" and not (np.isfinite(A.min()) and np.isfinite(A.max())):
        raise ValueError(f"{name}: contains NaN or infinity")


def real_matrix(A, name, *, min_rows=1, min_cols=1, finite=True):
    """A as a 2-D ndarray of real numbers, with at least the given size and (if `finite`) no NaN or infinity."""
    A = np.asarray(A)
    if A.dtype.kind not in "biuf":
        raise ValueError(f"{name}: must hold real numbers, got dtype {A.dtype}")
    if A.ndim != 2:
        raise ValueError(f"{name}: must be a 2-D array, got shape {A.shape}")
    if A.shape[0] < min_rows or A.shape[1] < min_cols:
        raise ValueError(f"{name}: needs at least {min_rows} row(s) and {min_cols} column(s), got shape {A.shape}")
    if finite:
        check_finite(A, name)
    return A


def real_vector(v, name, length, meaning):
    """v as a finite 1-D ndarray of `length` real numbers; `meaning` says what each one stands for."""
    v = np.asarray(v)
    if v.dtype.kind not in "biuf" or v.shape != (length,):
        raise ValueError(
            f"{name}: must hold {length} real numbers ({meaning}), got shape {v.shape} and dtype {v.dtype}"
        )
    check_finite(v, name)
    return v


def check_square(A, name):
    if A.shape[0] != A.shape[1]:
        raise ValueError(f"{name}: must be square, got shape {A.shape}")


def check_float_ndarray(A, name):
    # In-place routines need a floating array to write centred values into.
    if not isinstance(A, np.ndarray) or A.dtype not in (np.float32, np.float64):
        kind = A.dtype if isinstance(A, np.ndarray) else type(A).__name__
        raise TypeError(f"{name}: must be a float32 or float64 ndarray, got {kind}")


def finite_number(value, name, *, positive=False):
    valid = not isinstance(value, bool) and isinstance(value, numbers.Real) and np.isfinite(value)
    if not valid or (positive and value <= 0):
        kind = "a positive finite number" if positive else "a finite number"
        raise ValueError(f"{name}: must be {kind}, got {value!r}")
    return float(value)


def int_in_range(value, name, low, high=None):
    valid = not isinstance(value, bool) and isinstance(value, numbers.Integral)
    if not valid or value < low or (high is not None and value > high):
        bounds = f">= {low}" if high is None else f"between {low} and {high}"
        raise ValueError(f"{name}: must be an int {bounds}, got {value!r}")
    return int(value)


def output_dtype(a):
    """Return ``a.dtype`` if it is float32/float64, else float64."""
    if a.dtype in (np.float32, np.float64):
        return a.dtype
    return np.dtype(np.float64)


def common_output_dtype(*arrays):
    """The output dtype of a routine of several arrays: float32 only when all of them are float32."""
    return np.result_type(*(output_dtype(a) for a in arrays))


def overflow_error(name, dtype, what="kernel"):
    remedy = "scale the inputs down" + (" or use float64" if np.dtype(dtype) == np.float32 else "")
    return ValueError(
        f"X: the {name} {what} overflows {np.dtype(dtype).name} (some entries are infinite or NaN); {remedy}"
    )


def check_fits(values, name, dtype, what="kernel"):
    """Raise when float64 `values` hold NaN or infinity, or do not fit `dtype`; return them cast to it."""
    stored = values.astype(dtype, copy=False)
    if stored.size and not (np.isfinite(stored.min()) and np.isfinite(stored.max())):
        raise overflow_error(name, dtype, what)
    return stored
