"""The feature and pre-image networks of the Gen-RKM paper (Table 3), shared by the explicit Gen-RKM and the VAE
baselines so that comparisons use exactly the same encoders and decoders.

Table 3: convolutions and transposed convolutions with 4 x 4 kernels, stride 2 and padding 1; a linear layer to
128 features; leaky ReLU with slope 0.2 after every hidden layer (the paper's "Parametric-RELU (alpha = 0.2)"
with the slope fixed, as in the authors' code); a sigmoid on the pre-image maps' outputs. The pre-image map is
the feature map reversed. Networks take and return flat rows (N, d): images are reshaped inside.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence

from torch import nn

__all__ = ["IMAGE_CHANNELS", "conv_decoder", "conv_encoder", "default_networks", "mlp_decoder", "mlp_encoder"]

# Table 3's convolution channels by image shape (channels, height, width).
IMAGE_CHANNELS = {
    (1, 28, 28): (32, 64),  # MNIST, Fashion-MNIST
    (3, 32, 32): (64, 128),  # CIFAR-10
    (1, 64, 64): (20, 40, 80),  # dSprites
    (3, 64, 64): (30, 60, 90),  # Teapot
}
# Table 3's label networks (one-hot in, 15 then 20 units); wider hidden layers for other vector views.
LABEL_WIDTHS = (15, 20)
VECTOR_WIDTHS = (256, 128)
N_FEATURES = 128
SLOPE = 0.2


def conv_encoder(image_shape: Sequence[int], channels: Sequence[int], n_features: int = N_FEATURES) -> nn.Sequential:
    """Convolutions (4 x 4, stride 2, padding 1) with the given channels, then a linear layer to n_features.

    Parameters
    ----------
    image_shape : (channels, height, width); height and width divisible by 2 ** len(channels)
    channels : output channels of each convolution
    n_features : width of the linear output (Table 3: 128)

    Returns
    -------
    nn.Sequential mapping (N, prod(image_shape)) to (N, n_features)
    """
    image_shape, channels = _check_image(image_shape, channels)
    layers: list[nn.Module] = [nn.Unflatten(1, image_shape)]
    previous = image_shape[0]
    for width in channels:
        layers += [nn.Conv2d(previous, width, 4, stride=2, padding=1), nn.LeakyReLU(SLOPE)]
        previous = width
    side = _reduced(image_shape, channels)
    layers += [nn.Flatten(), nn.Linear(previous * side[0] * side[1], _positive(n_features, "n_features"))]
    return nn.Sequential(*layers)


def conv_decoder(image_shape: Sequence[int], channels: Sequence[int], n_features: int = N_FEATURES) -> nn.Sequential:
    """The reverse of :func:`conv_encoder`: a linear layer, transposed convolutions, a sigmoid.

    Returns
    -------
    nn.Sequential mapping (N, n_features) to (N, prod(image_shape)) in (0, 1)
    """
    image_shape, channels = _check_image(image_shape, channels)
    side = _reduced(image_shape, channels)
    reverse = list(reversed(channels))
    layers: list[nn.Module] = [
        nn.Linear(_positive(n_features, "n_features"), reverse[0] * side[0] * side[1]),
        nn.LeakyReLU(SLOPE),
        nn.Unflatten(1, (reverse[0], side[0], side[1])),
    ]
    for width, following in zip(reverse, reverse[1:], strict=False):
        layers += [nn.ConvTranspose2d(width, following, 4, stride=2, padding=1), nn.LeakyReLU(SLOPE)]
    layers += [nn.ConvTranspose2d(reverse[-1], image_shape[0], 4, stride=2, padding=1), nn.Sigmoid(), nn.Flatten()]
    return nn.Sequential(*layers)


def mlp_encoder(n_inputs: int, widths: Sequence[int] = LABEL_WIDTHS) -> nn.Sequential:
    """Fully connected layers with the given widths, the last one linear (Table 3's label feature map: 15, 20)."""
    sizes = [_positive(n_inputs, "n_inputs"), *(_positive(w, "widths") for w in widths)]
    layers: list[nn.Module] = []
    for index, (fan_in, fan_out) in enumerate(zip(sizes, sizes[1:], strict=False)):
        layers.append(nn.Linear(fan_in, fan_out))
        if index < len(sizes) - 2:
            layers.append(nn.LeakyReLU(SLOPE))
    return nn.Sequential(*layers)


def mlp_decoder(n_outputs: int, widths: Sequence[int] = LABEL_WIDTHS) -> nn.Sequential:
    """The reverse of :func:`mlp_encoder`, with a sigmoid output (one-hot labels, images in [0, 1])."""
    sizes = [*(_positive(w, "widths") for w in reversed(widths)), _positive(n_outputs, "n_outputs")]
    layers: list[nn.Module] = []
    for fan_in, fan_out in zip(sizes, sizes[1:], strict=False):
        layers += [nn.Linear(fan_in, fan_out), nn.LeakyReLU(SLOPE)]
    layers[-1] = nn.Sigmoid()
    return nn.Sequential(*layers)


def image_shape_of(n_inputs: int) -> tuple[int, int, int] | None:
    """The Table 3 image shape whose pixel count is n_inputs (784: 28 x 28, 4096: 64 x 64, ...), or None."""
    matches = [shape for shape in IMAGE_CHANNELS if math.prod(shape) == n_inputs]
    return matches[0] if matches else None


def default_networks(
    n_inputs: int, image_shape: Sequence[int] | None = None, *, label: bool = False, n_features: int | None = None
) -> tuple[nn.Module, nn.Module]:
    """Table 3's feature and pre-image networks for a view of n_inputs columns.

    Parameters
    ----------
    n_inputs : int
        The view's width.
    image_shape : (channels, height, width) or None
        The image each row holds; None looks it up by pixel count among Table 3's shapes (784, 3072, 4096,
        12288 columns). An image gets Table 3's convolutions (its channels for the known shapes, else doubling
        from 32, one convolution per halving while the side stays even, at most 3).
    label : bool, default=False
        A label view: Table 3's fully connected 15-20 network (also used for views of at most 20 columns);
        other vector views get hidden layers of 256 and 128 units.
    n_features : int or None, default=None
        The feature width (None: Table 3's, 128 for images, the last hidden width otherwise); the pre-image
        network takes features of this width (e.g. those of a user's feature network).

    Returns
    -------
    (feature network, pre-image network)
    """
    n_inputs = _positive(n_inputs, "n_inputs")
    shape = None if label else (image_shape_of(n_inputs) if image_shape is None else tuple(image_shape))
    if shape is not None:
        if math.prod(shape) != n_inputs:
            raise ValueError(f"image_shape: {shape} holds {math.prod(shape)} values, the view has {n_inputs}")
        channels = IMAGE_CHANNELS.get(shape) or _doubling_channels(shape)
        width = N_FEATURES if n_features is None else n_features
        return conv_encoder(shape, channels, width), conv_decoder(shape, channels, width)
    widths = LABEL_WIDTHS if label or n_inputs <= LABEL_WIDTHS[-1] else VECTOR_WIDTHS
    if n_features is not None:
        widths = (*widths[:-1], n_features)
    return mlp_encoder(n_inputs, widths), mlp_decoder(n_inputs, widths)


def _doubling_channels(shape):
    halvings = 0
    height, width = shape[1], shape[2]
    while halvings < 3 and height % 2 == 0 and width % 2 == 0 and min(height, width) > 4:
        height, width, halvings = height // 2, width // 2, halvings + 1
    if halvings == 0:
        raise ValueError(f"image_shape: {tuple(shape)} has no even side to convolve with stride 2")
    return tuple(32 * 2**index for index in range(halvings))


def _check_image(image_shape, channels):
    shape = tuple(image_shape)
    if len(shape) != 3 or not all(isinstance(n, numbers.Integral) and n > 0 for n in shape):
        raise ValueError(f"image_shape: must be (channels, height, width) of positive ints, got {image_shape!r}")
    channels = tuple(_positive(c, "channels") for c in channels)
    if not channels:
        raise ValueError("channels: needs at least one convolution")
    factor = 2 ** len(channels)
    if shape[1] % factor or shape[2] % factor:
        raise ValueError(f"image_shape: height and width must be divisible by {factor} for {len(channels)} layers")
    return tuple(int(n) for n in shape), channels


def _reduced(image_shape, channels):
    factor = 2 ** len(channels)
    return image_shape[1] // factor, image_shape[2] // factor


def _positive(value, name):
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name}: must be a positive int, got {value!r}")
    return int(value)
