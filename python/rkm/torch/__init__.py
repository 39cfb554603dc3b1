"""The PyTorch bridge: differentiable RKM building blocks, neural feature maps, explicit Gen-RKM, VAE baselines.

Needs PyTorch (``pip install "rkm[torch]"``); ``import rkm`` never imports it. Every function takes and returns
``torch.Tensor`` on the inputs' device and dtype, so the blocks compose with anyone's ``nn.Module``.
"""

try:
    import torch  # noqa: F401 (the ImportError below must name the missing dependency)
except ImportError as error:  # pragma: no cover - exercised only without torch
    raise ImportError(
        'rkm.torch needs PyTorch: pip install "rkm[torch]" (or pick a build first, e.g. the CPU one: '
        "pip install torch --index-url https://download.pytorch.org/whl/cpu)"
    ) from error

from rkm.torch.energy import (
    KPCAStep,
    eigh_descending,
    kpca,
    kpca_energy,
    kpca_from_kernels,
    stabilized_objective,
)
from rkm.torch.feature_map import FeatureMap
from rkm.torch.gen_rkm import ExplicitGenRKM
from rkm.torch.kernels import center_kernel, kernel_matrix
from rkm.torch.networks import conv_decoder, conv_encoder, default_networks, mlp_decoder, mlp_encoder
from rkm.torch.stiefel import CayleyAdam, StiefelLinear
from rkm.torch.vae import VAE, BetaVAE

__all__ = [
    "VAE",
    "BetaVAE",
    "CayleyAdam",
    "ExplicitGenRKM",
    "FeatureMap",
    "KPCAStep",
    "StiefelLinear",
    "center_kernel",
    "conv_decoder",
    "conv_encoder",
    "default_networks",
    "eigh_descending",
    "kernel_matrix",
    "kpca",
    "kpca_energy",
    "kpca_from_kernels",
    "mlp_decoder",
    "mlp_encoder",
    "stabilized_objective",
]
