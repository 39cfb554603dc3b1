"""Random Fourier features of the compiled core against rkm.reference."""

import numpy as np
import pytest

from rkm import _core, reference


@pytest.mark.parametrize("n,d,D", [(1, 1, 1), (1, 3, 4), (5, 1, 3), (300, 17, 64), (1000, 8, 257)])
def test_fourier_features_match_reference(rng, dtype, n, d, D):
    X = rng.normal(size=(n, d)).astype(dtype)
    W = rng.normal(scale=0.7, size=(d, D)).astype(dtype)
    offset = rng.uniform(0, 2 * np.pi, size=D).astype(dtype)
    got = _core.fourier_features(X, W, offset)
    assert got.dtype == dtype and got.shape == (n, D)
    # The core forms the phases X @ W + offset in the working dtype (d roundings of their magnitude) and
    # rounds the features to it.
    phase_scale = (np.abs(X.astype(np.float64)) @ np.abs(W.astype(np.float64)) + np.abs(offset)).max()
    atol = np.sqrt(2.0 / D) * 4 * np.finfo(dtype).eps * (d * phase_scale + 1)
    np.testing.assert_allclose(got, reference.fourier_features(X, W, offset), rtol=0, atol=atol)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_fourier_features_do_not_depend_on_thread_count(rng, threads):
    X, W, offset = rng.normal(size=(2000, 9)), rng.normal(size=(9, 70)), rng.uniform(0, 2 * np.pi, size=70)
    np.testing.assert_allclose(
        _core.fourier_features(X, W, offset, threads), _core.fourier_features(X, W, offset, 1), rtol=0, atol=1e-12
    )
