"""rkm: restricted kernel machines, deep RKMs and kernel autoencoders with a fast C++ core."""

from rkm._utils.openmp import passive_wait_policy

with passive_wait_policy():
    from rkm import _core

from rkm import exceptions, features, metrics, stiefel
from rkm._utils.config import show_config
from rkm.autoencoders import KernelAutoencoder
from rkm.deep import ConstrainedDeepRKM, DeepRKM, DeepRKMClassifier, DeepRKMRegressor
from rkm.multiview import GenRKM, MultiViewRKM, RKMForecaster
from rkm.shallow import (
    KernelPCA,
    KernelPMF,
    KernelSVD,
    LSSVMClassifier,
    LSSVMClassifierCV,
    LSSVMRegressor,
    LSSVMRegressorCV,
)

__version__ = _core.__version__

__all__ = [
    "KernelPCA",
    "LSSVMRegressor",
    "LSSVMClassifier",
    "LSSVMRegressorCV",
    "LSSVMClassifierCV",
    "DeepRKM",
    "DeepRKMRegressor",
    "DeepRKMClassifier",
    "ConstrainedDeepRKM",
    "KernelSVD",
    "KernelPMF",
    "MultiViewRKM",
    "RKMForecaster",
    "GenRKM",
    "KernelAutoencoder",
    "exceptions",
    "features",
    "metrics",
    "stiefel",
    "show_config",
    "__version__",
]
