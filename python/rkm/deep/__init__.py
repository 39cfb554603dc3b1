"""Deep RKMs: the three-level models of Suykens 2017 (level-wise, reduced-set and feedforward training) and the
constrained deep RKMs of Tonin et al. 2021."""

from rkm.deep.constrained import ConstrainedDeepRKM
from rkm.deep.deep_rkm import DeepRKM, DeepRKMClassifier, DeepRKMRegressor
from rkm.exceptions import DivergenceError

__all__ = ["ConstrainedDeepRKM", "DeepRKM", "DeepRKMClassifier", "DeepRKMRegressor", "DivergenceError"]
