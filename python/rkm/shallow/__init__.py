"""Shallow RKMs of Suykens 2017 section 3: kernel PCA, LS-SVM regression and classification, kernel SVD and the
kernel pmf, with their private solvers (conjugate gradients)."""

from rkm.shallow.kernel_svd import KernelSVD
from rkm.shallow.kpca import KernelPCA
from rkm.shallow.lssvm import LSSVMClassifier, LSSVMRegressor
from rkm.shallow.lssvm_cv import LSSVMClassifierCV, LSSVMRegressorCV
from rkm.shallow.pmf import KernelPMF

__all__ = [
    "KernelPCA",
    "KernelPMF",
    "KernelSVD",
    "LSSVMClassifier",
    "LSSVMClassifierCV",
    "LSSVMRegressor",
    "LSSVMRegressorCV",
]
