"""rkm: restricted kernel machines, deep RKMs and kernel autoencoders with a fast C++ core."""

from rkm._openmp import passive_wait_policy

with passive_wait_policy():
    from rkm import _core

from rkm import features, metrics, stiefel
from rkm._config import show_config
from rkm.kernel_svd import KernelSVD
from rkm.kae import KernelAutoencoder
from rkm.kpca import KernelPCA
from rkm.constr_drkm import ConstrainedDeepRKM
from rkm.deep import DeepRKM
from rkm.lssvm import LSSVMClassifier, LSSVMRegressor
from rkm.multiview import MultiViewRKM
from rkm.forecast import RKMForecaster
from rkm.pmf import KernelPMF

__version__ = _core.__version__

__all__ = [
    "KernelPCA",
    "LSSVMRegressor",
    "LSSVMClassifier",
    "DeepRKM",
    "ConstrainedDeepRKM",
    "KernelSVD",
    "KernelPMF",
    "MultiViewRKM",
    "RKMForecaster",
    "KernelAutoencoder",
    "features",
    "metrics",
    "stiefel",
    "show_config",
    "__version__",
]
