"""rkm.preimage's public functions: their results on cases with a known answer, and clear errors on bad input."""

import numpy as np
import pytest

from rkm.preimage import (
    gaussian_fixed_point,
    kernel_smoother,
    ridge_preimage_coefficients,
    smoother_preimage,
    with_feature_mean,
)

RNG = np.random.default_rng(0)
X_TRAIN = RNG.normal(size=(12, 3))


def test_the_fixed_point_of_one_training_point_is_that_point():
    coefficients = np.eye(12)[[4, 7]]
    X, n_iter = gaussian_fixed_point(coefficients, X_TRAIN, 0.5, X_TRAIN[[4, 7]] + 0.01)
    np.testing.assert_allclose(X, X_TRAIN[[4, 7]], atol=1e-12)
    assert n_iter <= 2


def test_the_smoother_with_every_neighbour_and_one_similar_point_returns_its_neighbours_mean():
    similarities = np.zeros((1, 12))
    similarities[0, 3] = 1.0
    np.testing.assert_allclose(kernel_smoother(similarities, X_TRAIN, 1), X_TRAIN[[3]], atol=1e-15)


def test_ridge_coefficients_solve_the_regularised_system():
    Z = RNG.normal(size=(12, 2))
    A = ridge_preimage_coefficients(Z, X_TRAIN, ("linear", None, 3, 1.0), 0.5)
    np.testing.assert_allclose((Z @ Z.T + 0.5 * np.eye(12)) @ A, X_TRAIN, atol=1e-12)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: kernel_smoother(np.full((2, 12), np.nan), X_TRAIN, 3), "similarities"),
        (lambda: kernel_smoother(np.ones((2, 5)), X_TRAIN, 3), "X_train"),
        (lambda: kernel_smoother(np.ones(12), X_TRAIN, 3), "similarities"),
        (lambda: kernel_smoother(np.ones((2, 12)), X_TRAIN, 0), "n_neighbors"),
        (lambda: gaussian_fixed_point(np.ones((2, 12)), X_TRAIN, -1.0, X_TRAIN[:2]), "gamma"),
        (lambda: gaussian_fixed_point(np.ones((2, 12)), X_TRAIN, 0.5, X_TRAIN[:3]), "X_start"),
        (lambda: gaussian_fixed_point(np.ones((2, 12)), X_TRAIN[:, :2], 0.5, X_TRAIN[:2]), "X_start"),
        (lambda: gaussian_fixed_point(np.ones((2, 10)), X_TRAIN, 0.5, X_TRAIN[:2]), "X_train"),
        (lambda: ridge_preimage_coefficients(X_TRAIN[:5], X_TRAIN, ("rbf", 1.0, 3, 1.0), 0.1), "X"),
        (lambda: ridge_preimage_coefficients(X_TRAIN, X_TRAIN, ("rbf", 1.0, 3, 1.0), 0.0), "alpha"),
        (lambda: with_feature_mean(np.array([[np.inf, 1.0]])), "coefficients"),
    ],
)
def test_bad_input_names_the_argument(call, match):
    with pytest.raises(ValueError, match=match):
        call()


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_smoother_preimage_of_latents_is_the_smoother_of_their_similarities(dtype):
    rng = np.random.default_rng(0)
    latents, projection = rng.normal(size=(30, 4)), rng.normal(size=(50, 4))
    offsets, X_train = rng.normal(size=50), rng.normal(size=(50, 3))
    expected = kernel_smoother(latents @ projection.T + offsets, X_train, 4)
    arrays = [A.astype(dtype) for A in (latents, projection, offsets, X_train)]
    generated = smoother_preimage(*arrays, 4, n_threads=2)
    assert generated.dtype == dtype
    np.testing.assert_allclose(generated, expected, atol=1e-10 if dtype == np.float64 else 1e-3)
    # Mixed dtypes compute in float64.
    assert smoother_preimage(arrays[0], projection, offsets, X_train, 4).dtype == np.float64


def test_smoother_preimage_names_bad_arguments():
    rng = np.random.default_rng(0)
    latents, projection, offsets, X_train = (
        rng.normal(size=(3, 4)),
        rng.normal(size=(5, 4)),
        np.zeros(5),
        np.ones((5, 2)),
    )
    with pytest.raises(ValueError, match="n_neighbors"):
        smoother_preimage(latents, projection, offsets, X_train, 0)
    with pytest.raises(ValueError, match="offsets"):
        smoother_preimage(latents, projection, np.zeros(4), X_train, 2)
    with pytest.raises(ValueError, match="X_train"):
        smoother_preimage(latents, projection, offsets, np.ones((4, 2)), 2)
    with pytest.raises(ValueError, match="latents|projection"):
        smoother_preimage(latents[:, :3], projection, offsets, X_train, 2)
