"""Multi-view RKMs (Achten, Pandey et al. 2023) and the forecaster built on them."""

from rkm.multiview.forecast import RKMForecaster
from rkm.multiview.multiview_rkm import MultiViewRKM

__all__ = ["MultiViewRKM", "RKMForecaster"]
