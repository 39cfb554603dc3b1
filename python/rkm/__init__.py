"""rkm: restricted kernel machines, deep RKMs and kernel autoencoders with a fast C++ core."""

from rkm._openmp import passive_wait_policy

with passive_wait_policy():
    from rkm import _core

from rkm import features
from rkm._config import show_config
from rkm.kpca import KernelPCA

__version__ = _core.__version__

__all__ = ["KernelPCA", "features", "show_config", "__version__"]
