"""Kernel centring of the compiled core (center_kernel, center_kernel_rows) against rkm.reference."""

import numpy as np
import pytest

from rkm import _core, reference


@pytest.mark.parametrize("n", [1, 2, 50, 333])
def test_center_kernel_matches_reference(rng, dtype, tol, n):
    K = reference.kernel_matrix(rng.normal(size=(n, 4)).astype(dtype), None, "rbf", 0.5)
    K_core, K_ref = K.copy(), K.copy()
    means_core, grand_core = _core.center_kernel(K_core)
    means_ref, grand_ref = reference.center_kernel(K_ref)
    np.testing.assert_allclose(K_core, K_ref, **tol)
    np.testing.assert_allclose(means_core, means_ref, **tol)
    assert grand_core == pytest.approx(grand_ref, rel=1e-6)
    assert means_core.dtype == dtype


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("n", [1, 2, 50, 333])
def test_center_kernel_lower_only_matches_full_centring(rng, dtype, tol, threads, n):
    K = reference.kernel_matrix(rng.normal(size=(n, 4)).astype(dtype), None, "rbf", 0.5)
    full = K.copy()
    means, grand = _core.center_kernel(full, threads)
    lower = K.copy()
    lower[np.triu_indices(n, 1)] = np.nan  # must be neither read nor written
    lower_ref = lower.copy()
    means_lower, grand_lower = _core.center_kernel(lower, threads, lower_only=True)
    means_ref, grand_ref = reference.center_kernel(lower_ref, lower_only=True)
    np.testing.assert_allclose(np.tril(lower), np.tril(full), **tol)
    np.testing.assert_allclose(np.tril(lower), np.tril(lower_ref), **tol)
    assert np.all(np.isnan(lower[np.triu_indices(n, 1)]))
    np.testing.assert_allclose(means_lower, means, **tol)
    np.testing.assert_allclose(means_ref, means, **tol)
    assert grand_lower == pytest.approx(grand, rel=1e-6) and grand_ref == pytest.approx(grand, rel=1e-6)


def test_center_kernel_rows_matches_reference(rng, dtype, tol):
    X, Xt = rng.normal(size=(80, 3)).astype(dtype), rng.normal(size=(13, 3)).astype(dtype)
    means, grand = reference.center_kernel(reference.kernel_matrix(X, None, "rbf", 0.5))
    rows_core = reference.kernel_matrix(Xt, X, "rbf", 0.5)
    rows_ref = rows_core.copy()
    _core.center_kernel_rows(rows_core, means, grand)
    reference.center_kernel_rows(rows_ref, means, grand)
    np.testing.assert_allclose(rows_core, rows_ref, **tol)


def test_center_kernel_requires_square(rng):
    with pytest.raises(ValueError, match="square"):
        _core.center_kernel(rng.normal(size=(3, 4)))
