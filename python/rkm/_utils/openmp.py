"""How the core's OpenMP threads wait between parallel regions."""

import contextlib
import os

_VARIABLE = "OMP_WAIT_POLICY"


def wait_policy():
    """The wait policy the core's OpenMP runtime was loaded with: the user's, or rkm's passive default."""
    return _policy_at_load


@contextlib.contextmanager
def passive_wait_policy():
    """Load the core with OMP_WAIT_POLICY=passive, unless the user chose a policy.

    Spinning threads (libgomp's default) take the cores that a descheduled member of their team needs to
    finish a parallel region, so on a machine that other processes also load, a fit with 2 threads ran
    several times slower than with 1. Passive threads sleep between regions instead. libgomp reads the
    variable once, when it is loaded with the core, so it is set only for that moment: the environment of
    child processes and of other OpenMP runtimes stays the user's.
    """
    global _policy_at_load
    chosen = os.environ.get(_VARIABLE)
    _policy_at_load = chosen or "passive (rkm's default)"
    if chosen is not None:
        yield
        return
    os.environ[_VARIABLE] = "passive"
    try:
        yield
    finally:
        del os.environ[_VARIABLE]


_policy_at_load = None
