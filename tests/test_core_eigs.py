"""Eigensolvers of the compiled core against rkm.reference: dense eigh, block Krylov top_eigsh (on a matrix and on
an operator) and the matrix-free kernel_top_eigsh."""

import numpy as np
import pytest
from conftest import kernel_data

from rkm import _core, reference
from rkm.kernels import KERNEL_NAMES

KERNELS = list(KERNEL_NAMES)


@pytest.mark.parametrize("n", [1, 2, 40, 257])
def test_eigh_matches_reference(rng, dtype, n):
    A = rng.normal(size=(n, n))
    A = (A + A.T).astype(dtype)
    w, V = _core.eigh(A)
    w_ref, V_ref = reference.eigh(A)
    scale = max(1.0, np.abs(w_ref).max())
    atol = 1e-10 * scale if dtype == np.float64 else 1e-3 * scale
    np.testing.assert_allclose(w, w_ref, atol=atol)
    assert np.all(np.diff(w) <= 0)
    np.testing.assert_allclose(A @ V, V * w, atol=atol * 10)
    # Signs are fixed the same way: the largest-magnitude entry of each eigenvector is positive.
    rows = np.abs(V).argmax(axis=0)
    assert np.all(V[rows, np.arange(n)] > 0)


def _spd_with_decay(rng, n, decay=0.9):
    Q, _ = np.linalg.qr(rng.normal(size=(n, n)))
    return (Q * decay ** np.arange(n)) @ Q.T


def _subspace_angle(U, V):
    return np.linalg.norm(U @ (U.T @ V) - V, 2)


@pytest.mark.parametrize("n,s", [(1, 1), (5, 5), (64, 3), (300, 10), (800, 25)])
def test_top_eigsh_matches_dense(rng, n, s):
    A = _spd_with_decay(rng, n)
    start = rng.normal(size=(n, min(n, s + 10)))
    w, V, residuals, n_iter, converged = _core.top_eigsh(A, s, start)
    w_ref, V_ref, *_ = reference.top_eigsh(A, s, start)
    assert converged and n_iter >= 1
    np.testing.assert_allclose(w, w_ref, rtol=1e-8, atol=1e-12)
    assert _subspace_angle(V, V_ref) < 1e-6
    assert np.all(residuals <= 1e-10)
    np.testing.assert_allclose(V.T @ V, np.eye(s), atol=1e-10)


@pytest.mark.parametrize("n,s,b", [(400, 10, 1), (600, 30, 4), (900, 40, 8)])
def test_top_eigsh_blocks_narrower_than_wanted_pairs(rng, isa, n, s, b):
    A = _spd_with_decay(rng, n, decay=0.97)
    w, V, residuals, n_iter, converged = _core.top_eigsh(A, s, rng.normal(size=(n, b)))
    w_ref, V_ref = reference.eigh(A)
    assert converged and n_iter > s // b
    np.testing.assert_allclose(w, w_ref[:s], rtol=1e-8, atol=1e-12)
    assert _subspace_angle(V, V_ref[:, :s]) < 1e-6
    np.testing.assert_allclose(V.T @ V, np.eye(s), atol=1e-10)


@pytest.mark.parametrize("rank", [0, 3])
def test_top_eigsh_finds_pairs_beyond_an_invariant_subspace(rng, rank):
    # Once the basis spans the range of A every residual vanishes; the solver must still return the
    # wanted number of orthonormal pairs (the extra ones with eigenvalue 0).
    B = rng.normal(size=(300, rank))
    A = B @ B.T
    w, V, residuals, _, converged = _core.top_eigsh(A, 8, rng.normal(size=(300, 2)))
    assert converged
    np.testing.assert_allclose(w, np.linalg.eigvalsh(A)[::-1][:8], atol=1e-10 * max(1.0, np.abs(w).max()))
    np.testing.assert_allclose(V.T @ V, np.eye(8), atol=1e-10)
    np.testing.assert_allclose(A @ V, V * w, atol=1e-8 * max(1.0, np.abs(w).max()))


def test_top_eigsh_on_kernel_matrix_float32(rng):
    X = rng.normal(size=(1200, 6)).astype(np.float32)
    K = reference.kernel_matrix(X, None, "rbf", 0.5)
    reference.center_kernel(K)
    start = rng.normal(size=(1200, 20)).astype(np.float32)
    w, V, residuals, _, converged = _core.top_eigsh(K, 8, start)
    w_ref, V_ref = reference.eigh(K.astype(np.float64))
    assert converged and w.dtype == np.float32 and V.dtype == np.float32
    np.testing.assert_allclose(w, w_ref[:8], rtol=1e-4)
    assert _subspace_angle(V.astype(float), V_ref[:, :8]) < 1e-2


def test_top_eigsh_reports_non_convergence(rng):
    A = _spd_with_decay(rng, 600, decay=0.9999)  # nearly flat spectrum: hard for any Krylov method
    w, V, residuals, n_iter, converged = _core.top_eigsh(A, 5, rng.normal(size=(600, 6)), 1e-12, 2)
    assert not converged and n_iter == 2
    assert residuals.shape == (5,) and residuals.max() > 1e-12


def test_top_eigsh_max_iter_still_returns_every_wanted_pair(rng):
    # Blocks of 2 columns need 4 products to span 8 pairs; max_iter=1 must not cut the basis short.
    A = _spd_with_decay(rng, 500)
    w, V, residuals, n_iter, converged = _core.top_eigsh(A, 8, rng.normal(size=(500, 2)), 1e-12, 1)
    assert not converged and n_iter == 4 and w.shape == (8,) and residuals.shape == (8,)
    np.testing.assert_allclose(V.T @ V, np.eye(8), atol=1e-10)
    assert np.all(np.isfinite(w)) and np.all(np.diff(w) <= 0)


def test_top_eigsh_is_deterministic(rng):
    A = _spd_with_decay(rng, 400)
    start = rng.normal(size=(400, 15))
    first, second = _core.top_eigsh(A, 5, start), _core.top_eigsh(A, 5, start)
    assert np.array_equal(first[0], second[0]) and np.array_equal(first[1], second[1])


def test_top_eigsh_operator_matches_matrix(rng):
    A = _spd_with_decay(rng, 500)
    start = rng.normal(size=(500, 16))
    w_op, V_op, *_ = _core.top_eigsh_operator(lambda B: A @ B, 500, 6, start)
    w, V, *_ = _core.top_eigsh(A, 6, start)
    np.testing.assert_allclose(w_op, w, rtol=1e-10)
    w_ref, V_ref, *_ = reference.top_eigsh_operator(lambda B: A @ B, 500, 6, start)
    np.testing.assert_allclose(w_op, w_ref, rtol=1e-8)


def test_top_eigsh_operator_propagates_callback_errors(rng):
    def broken(B):
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        _core.top_eigsh_operator(broken, 200, 3, rng.normal(size=(200, 8)))
    with pytest.raises(ValueError, match="matmat"):
        _core.top_eigsh_operator(lambda B: B[:, :1], 200, 3, rng.normal(size=(200, 8)))


@pytest.mark.parametrize(
    "bad",
    [
        dict(n_components=0),
        dict(n_components=9),
        dict(tol=-1.0),
        dict(max_iter=0),
        dict(start=np.ones((8, 0))),
        dict(start=np.ones((7, 2))),
    ],
)
def test_top_eigsh_validates_arguments(rng, bad):
    A = _spd_with_decay(rng, 8)
    args = dict(n_components=2, start=rng.normal(size=(8, 3)), tol=None, max_iter=None) | bad
    with pytest.raises(ValueError):
        _core.top_eigsh(A, **args)


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("center", [True, False])
@pytest.mark.parametrize("n,s", [(1, 1), (6, 6), (60, 3), (400, 8)])
def test_kernel_top_eigsh_matches_reference(rng, dtype, tol, kernel, center, n, s):
    X = kernel_data(rng, (n, 6), dtype, kernel)
    start = rng.normal(size=(n, min(n, s + 10))).astype(dtype)
    gamma = 0.3 if kernel != "poly" else 0.1
    w, V, residuals, n_iter, converged, means, grand = _core.kernel_top_eigsh(
        X, kernel, gamma, 3.0, 1.0, center, s, start
    )
    w_ref, V_ref, _, _, _, means_ref, grand_ref = reference.kernel_top_eigsh(
        X, kernel, gamma, 3.0, 1.0, center, s, start
    )
    single = dtype == np.float32
    scale = max(1.0, np.abs(w_ref).max())
    assert converged and n_iter >= 1 and w.dtype == V.dtype == means.dtype == dtype
    np.testing.assert_allclose(w, w_ref, rtol=1e-4 if single else 1e-8, atol=(1e-4 if single else 1e-10) * scale)
    K = reference.kernel_matrix(X.astype(np.float64), None, kernel, gamma)
    # Kernel statistics are means of entries of K: their rounding errors scale with its largest entry.
    k_scale = np.abs(K).max()
    np.testing.assert_allclose(means, means_ref, rtol=tol["rtol"], atol=tol["atol"] * k_scale)
    assert grand == pytest.approx(grand_ref, rel=tol["rtol"], abs=tol["atol"] * k_scale)
    # Eigenpairs of the explicitly built (centred) kernel matrix, whatever the gaps between eigenvalues.
    if center:
        reference.center_kernel(K)
    V64, w64 = V.astype(np.float64), w.astype(np.float64)
    np.testing.assert_allclose(V64.T @ V64, np.eye(s), atol=1e-4 if single else 1e-10)
    assert np.linalg.norm(K @ V64 - V64 * w64, axis=0).max() <= (1e-3 if single else 1e-8) * scale
    if not single:
        # The spectra here have relative gaps above 8e-4, except beyond the rank (6) of linear and cosine.
        distinct = s if kernel not in ("linear", "cosine") else min(s, 5)
        assert _subspace_angle(V, V_ref[:, :distinct]) < 1e-6


def test_kernel_top_eigsh_equals_the_stored_kernel_route(rng):
    # The matrix-free solve and kernel_matrix + center_kernel + top_eigsh find the same pairs.
    X, start = rng.normal(size=(500, 4)), rng.normal(size=(500, 12))
    w, V, *_, means, grand = _core.kernel_top_eigsh(X, "rbf", 0.5, 3.0, 1.0, True, 6, start)
    K = _core.kernel_matrix(X, None, "rbf", 0.5)
    means_stored, grand_stored = _core.center_kernel(K)
    w_stored, V_stored, *_ = _core.top_eigsh(K, 6, start)
    np.testing.assert_allclose(w, w_stored, rtol=1e-8)
    assert _subspace_angle(V, V_stored) < 1e-6
    np.testing.assert_allclose(means, means_stored, rtol=1e-12)
    assert grand == pytest.approx(grand_stored, rel=1e-12)


@pytest.mark.parametrize(
    "bad",
    [
        dict(n_components=0),
        dict(n_components=9),
        dict(tol=-1.0),
        dict(max_iter=0),
        dict(start=np.ones((8, 0))),
        dict(start=np.ones((7, 2))),
    ],
)
def test_kernel_top_eigsh_validates_arguments(rng, bad):
    args = dict(n_components=2, start=rng.normal(size=(8, 3)), tol=None, max_iter=None) | bad
    with pytest.raises(ValueError):
        _core.kernel_top_eigsh(rng.normal(size=(8, 3)), "rbf", 0.5, 3.0, 1.0, True, **args)
