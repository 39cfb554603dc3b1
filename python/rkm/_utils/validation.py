"""Validation of arguments and memory checks shared by every estimator."""

import numbers
import os
from numbers import Integral, Real

import numpy as np
from sklearn.utils import check_array
from sklearn.utils._param_validation import Interval, StrOptions

from rkm._kernel_table import ALIASES, KERNEL_NAMES

FLOAT_DTYPES = (np.float64, np.float32)


def check_matrix(X, name, *, min_samples=1, min_features=1, copy=False):
    """Return X as a finite, C-contiguous float32/float64 2-D array (other dtypes become float64).

    Non-contiguous and Fortran-ordered inputs are copied into C order; everything else is a view unless
    copy=True, which estimators use for the arrays they keep (a caller changing X after fit must not change
    the fitted model, scikit-learn's copy_X=True).
    """
    return check_array(
        X,
        dtype=list(FLOAT_DTYPES),
        order="C",
        copy=copy,
        ensure_min_samples=min_samples,
        ensure_min_features=min_features,
        input_name=name,
    )


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


# ------------------------------------------------------------------------------------------------------------
# Parameter constraints (scikit-learn's `_parameter_constraints`): each estimator declares its table from these
# pieces and decorates `fit` with `sklearn.base._fit_context`, which checks the table before fitting; rules that
# need the data (n_components <= n_samples, one gamma per level, ...) live in the estimator's
# `_check_params_vs_input`. The element checks of the per-level sequences stay in the kernel helpers.

N_THREADS = [None, Interval(Integral, None, -1, closed="right"), Interval(Integral, 1, None, closed="left")]
RANDOM_STATE = ["random_state"]
VERBOSE = ["verbose"]
TOL = [None, Interval(Real, 0, None, closed="neither")]
MAX_ITER = [None, Interval(Integral, 1, None, closed="left")]
POSITIVE = [Interval(Real, 0, None, closed="neither")]
NONNEGATIVE = [Interval(Real, 0, None, closed="left")]
POSITIVE_INT = [Interval(Integral, 1, None, closed="left")]
FINITE = [Interval(Real, None, None, closed="neither")]
PER_LEVEL = [list, tuple]


def kernel_name_options(names=KERNEL_NAMES, *, precomputed=False):
    """scikit-learn's StrOptions of the kernel `names` (from the kernel table), their aliases, and with
    precomputed=True also "precomputed"."""
    aliases = {alias for alias, name in ALIASES.items() if name in names}
    return StrOptions({*names, *aliases, *(["precomputed"] if precomputed else [])})


def kernel_constraints(*, precomputed=True, per_level=False):
    """The constraints of `kernel`, `gamma`, `degree` and `coef0`: a kernel name (aliases included), an
    :class:`rkm.kernels.Kernel`, or with per_level=True also a sequence of them (one per level or view)."""
    from rkm.kernels import Kernel  # rkm.kernels imports this module

    sequences = PER_LEVEL if per_level else []
    return {
        "kernel": [kernel_name_options(precomputed=precomputed), Kernel, *sequences],
        "gamma": [None, *FINITE, *sequences],
        "degree": [*NONNEGATIVE, *sequences],
        "coef0": [*FINITE, *sequences],
    }


class _CountInterval(Interval):
    """An integer interval that refuses booleans: scikit-learn's Interval(Integral, ...) takes True as 1."""

    def is_satisfied_by(self, val):
        return not isinstance(val, (bool, np.bool_)) and super().is_satisfied_by(val)


# A count (components, landmarks, a rank): a positive int, not a bool.
COUNT = [_CountInterval(Integral, 1, None, closed="left")]
