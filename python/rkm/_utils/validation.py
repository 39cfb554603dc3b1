"""Validation of arguments and memory checks shared by every estimator."""

import numbers
import os
import re
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
    try:
        return check_array(
            X,
            dtype=list(FLOAT_DTYPES),
            order="C",
            copy=copy,
            ensure_min_samples=min_samples,
            ensure_min_features=min_features,
            input_name=name,
        )
    except ValueError as error:
        # scikit-learn names the argument in some messages only ("Expected 2D array, got 1D array" does not).
        if name and not re.search(rf"\b{re.escape(name)}\b", str(error)):
            raise ValueError(f"{name}: {error}") from None
        raise


def is_view_list(views):
    """Whether `views` is a list of views: a list or tuple, unless every entry is a list or tuple of numbers,
    which is the rows of one 2-D array (scikit-learn reads a list of lists so)."""
    if not isinstance(views, (list, tuple)) or not views:
        return isinstance(views, (list, tuple))
    rows = all(
        isinstance(entry, (list, tuple)) and all(isinstance(value, numbers.Number) for value in entry)
        for entry in views
    )
    return not rows


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


def _meminfo_available():
    """MemAvailable from /proc/meminfo, else the free physical pages; None where neither exists."""
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


def _read_number(path):
    try:
        with open(path) as file:
            text = file.read().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None  # cgroup v2 writes "max" for no limit


def _cgroup_dirs():
    """The memory cgroup directories to read, in order: v2 (unified) ones, then v1 memory ones.

    The process's own directory comes first, then the mount root (containers often show their cgroup there).
    """
    unified, v1 = [], []
    try:
        with open("/proc/self/cgroup") as cgroups:
            for line in cgroups:
                _, controllers, path = line.rstrip("\n").split(":", 2)
                if controllers == "":
                    unified.append("/sys/fs/cgroup" + path)
                elif "memory" in controllers.split(","):
                    v1.append("/sys/fs/cgroup/memory" + path)
    except (OSError, ValueError):
        pass
    return unified + ["/sys/fs/cgroup"], v1 + ["/sys/fs/cgroup/memory"]


def _cgroup_available():
    """The memory the process's cgroup (v2 or v1) still allows: limit minus usage; None without a limit.

    In a container the host's MemAvailable can be far above the container's limit, and a fit let through on it
    is killed by the OOM killer. A v1 "no limit" is a huge number and is ignored, as is v2's "max".
    """
    unified, v1 = _cgroup_dirs()
    candidates = [(directory, "memory.max", "memory.current") for directory in unified]
    candidates += [(directory, "memory.limit_in_bytes", "memory.usage_in_bytes") for directory in v1]
    for directory, limit_file, usage_file in candidates:
        limit = _read_number(os.path.join(directory, limit_file))
        if limit is not None and limit < 2**60:
            usage = _read_number(os.path.join(directory, usage_file)) or 0
            return max(limit - usage, 0)
    return None


def _address_space_available():
    """What RLIMIT_AS (ulimit -v) still allows this process to map; None without a limit."""
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    except (ImportError, OSError, ValueError):
        return None
    if soft == resource.RLIM_INFINITY:
        return None
    try:
        with open("/proc/self/statm") as statm:
            mapped = int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        mapped = 0
    return max(soft - mapped, 0)


def available_memory_bytes():
    """Memory this process can still get: the least of the OS's MemAvailable, its cgroup's remaining limit
    (v2 or v1) and its address-space limit (RLIMIT_AS); None where none of them can be read."""
    limits = [
        value for value in (_meminfo_available(), _cgroup_available(), _address_space_available()) if value is not None
    ]
    return min(limits) if limits else None


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
