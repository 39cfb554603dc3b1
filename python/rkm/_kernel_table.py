"""The one table of rkm's kernels and what each supports; every other list of kernel names derives from it.

Pure Python with no import of the compiled core, so that :mod:`rkm.reference` (NumPy and SciPy only) reads it
too. The compiled core keeps the same names in ``cpp/core/kernels.hpp`` (``RKM_KERNELS``); a test checks that
both agree.
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class KernelInfo:
    """What a kernel supports.

    has_gamma: takes a bandwidth or scale gamma (None resolves to 1 / n_features).
    has_degree: takes degree and coef0 (the polynomial kernel).
    nystroem: usable by :class:`rkm.features.Nystroem`.
    fourier_features: has random Fourier features (:class:`rkm.features.RandomFourierFeatures`).
    level_derivatives: differentiable (or subdifferentiable) in its arguments as the Constr-DRKM objective
        needs for levels l >= 2.
    layer_derivatives: smooth in both arguments as the kernel autoencoder's layers and the reduced-set deep
        RKM's levels 2-3 need.
    density: nonnegative everywhere and integrable over R^d (:class:`rkm.KernelPMF`).
    distance: for kernels exp(-gamma d(x, y)), the :func:`scipy.spatial.distance.cdist` metric d (their
        bandwidth can be learned); None otherwise.
    """

    has_gamma: bool = False
    has_degree: bool = False
    nystroem: bool = True
    fourier_features: bool = False
    level_derivatives: bool = False
    layer_derivatives: bool = False
    density: bool = False
    distance: str | None = None


# Canonical names, in the order of the core's list.
KERNELS = {
    "linear": KernelInfo(level_derivatives=True, layer_derivatives=True),
    "poly": KernelInfo(has_gamma=True, has_degree=True, level_derivatives=True, layer_derivatives=True),
    "rbf": KernelInfo(
        has_gamma=True,
        fourier_features=True,
        level_derivatives=True,
        layer_derivatives=True,
        density=True,
        distance="sqeuclidean",
    ),
    "laplacian": KernelInfo(
        has_gamma=True, fourier_features=True, level_derivatives=True, density=True, distance="cityblock"
    ),
    "cosine": KernelInfo(),
    "tanimoto": KernelInfo(),
}

# Other accepted names and the canonical name each stands for.
ALIASES = {"polynomial": "poly", "gaussian": "rbf"}

KERNEL_NAMES = tuple(KERNELS)


def names_with(capability):
    """The canonical names (in table order) of the kernels whose `capability`, a :class:`KernelInfo` field,
    is true (or not None, for ``distance``)."""
    if capability not in KernelInfo.__dataclass_fields__:
        raise ValueError(
            f"capability: unknown capability {capability!r}; choose one of {', '.join(KernelInfo.__dataclass_fields__)}"
        )
    return tuple(name for name, info in KERNELS.items() if getattr(info, capability) not in (False, None))
