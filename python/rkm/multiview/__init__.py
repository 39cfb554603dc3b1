"""Multi-view RKMs (Achten, Pandey et al. 2023), the forecaster built on them, and the generative RKM (Pandey,
Schreurs & Suykens 2021)."""

from rkm.multiview.forecast import RKMForecaster
from rkm.multiview.gen_rkm import GenRKM
from rkm.multiview.multiview_rkm import MultiViewRKM

__all__ = ["MultiViewRKM", "RKMForecaster", "GenRKM"]
