"""The warnings and errors rkm raises.

Each subclasses the standard class a user already filters, so ``warnings.simplefilter("ignore",
ConvergenceWarning)`` with scikit-learn's class still silences rkm's, while rkm's own classes select only rkm's::

    >>> import warnings
    >>> from rkm.exceptions import ConvergenceWarning
    >>> warnings.simplefilter("ignore", category=ConvergenceWarning)
"""

from sklearn.exceptions import ConvergenceWarning as _SklearnConvergenceWarning
from sklearn.exceptions import PositiveSpectrumWarning

from rkm._core import DeviceError
from rkm._utils.exceptions import DivergenceError

__all__ = [
    "ConvergenceWarning",
    "DeviceError",
    "DivergenceError",
    "PerformanceWarning",
    "PositiveSpectrumWarning",
    "PrecisionWarning",
]


class ConvergenceWarning(_SklearnConvergenceWarning):
    """An iterative fit stopped before its tolerance was met (iteration cap, plateau, cycle, line search)."""


class PrecisionWarning(RuntimeWarning):
    """A result is at the level of the floating-point rounding of its inputs (e.g. a kernel that barely varies)."""


class PerformanceWarning(RuntimeWarning):
    """A requested setting will be far slower or larger than an available alternative, which the message names."""
