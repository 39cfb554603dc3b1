"""Check the NumPy reference implementations against third-party code."""

import json
import os
import signal
import subprocess
import sys

import numpy as np
import pytest
import scipy.linalg
from conftest import poisoned
from scipy.spatial.distance import cdist
from sklearn.metrics.pairwise import pairwise_kernels
from sklearn.preprocessing import KernelCenterer
from threadpoolctl import threadpool_info

from rkm import reference
from rkm._kernel_table import KERNEL_NAMES, names_with
from rkm.reference import _blocks, _validation

SKLEARN_KERNELS = ["linear", "poly", "rbf", "laplacian", "cosine"]
# (n_x, n_y, n_features); n_y = None means Y is omitted.
SHAPES = [(1, None, 1), (1, 1, 1), (7, None, 1), (1, 5, 3), (6, 4, 1), (20, 13, 5), (30, None, 8)]


def _data(n_x, n_y, d, dtype, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_x, d)).astype(dtype)
    Y = None if n_y is None else rng.normal(size=(n_y, d)).astype(dtype)
    return X, Y


def _random_symmetric(n, seed=0, dtype=np.float64):
    A = np.random.default_rng(seed).normal(size=(n, n))
    return ((A + A.T) / 2).astype(dtype)


# --------------------------------------------------------------------------
# kernel_matrix
# --------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("kernel", SKLEARN_KERNELS)
def test_kernel_matrix_matches_sklearn(kernel, shape, dtype, reference_tol):
    X, Y = _data(*shape, dtype)
    K = reference.kernel_matrix(X, Y, kernel=kernel)
    expected = pairwise_kernels(X, Y, metric=kernel)
    n_y = shape[0] if shape[1] is None else shape[1]
    assert K.shape == (shape[0], n_y)
    assert K.dtype == dtype
    np.testing.assert_allclose(K, expected, **reference_tol)


@pytest.mark.parametrize(
    "kernel, params",
    [
        ("poly", dict(gamma=0.3, degree=2, coef0=0.5)),
        ("poly", dict(gamma=1.0, degree=5, coef0=0.0)),
        ("rbf", dict(gamma=2.5)),
        ("laplacian", dict(gamma=0.7)),
    ],
)
def test_kernel_matrix_parameters_match_sklearn(kernel, params):
    X, Y = _data(15, 9, 4, np.float64)
    K = reference.kernel_matrix(X, Y, kernel=kernel, **params)
    np.testing.assert_allclose(K, pairwise_kernels(X, Y, metric=kernel, **params), rtol=1e-10, atol=1e-12)


def test_kernel_matrix_integer_input_gives_float64():
    X = np.arange(12).reshape(4, 3)
    K = reference.kernel_matrix(X, kernel="linear")
    assert K.dtype == np.float64
    np.testing.assert_array_equal(K, X @ X.T)


def test_rbf_symmetric_has_unit_diagonal():
    X, _ = _data(25, None, 6, np.float64)
    K = reference.kernel_matrix(X + 1e3, kernel="rbf", gamma=10.0)
    np.testing.assert_array_equal(np.diag(K), 1.0)
    np.testing.assert_array_equal(K, K.T)


@pytest.mark.parametrize("same", [True, False])
def test_rbf_is_translation_invariant_far_from_origin(same):
    # Large offsets make the plain GEMM formula lose all digits; shifting by
    # the mean of X must keep the result close to scipy's direct distances.
    X, Y = _data(20, 10, 3, np.float64)
    X, Y = X + 1e6, (X if same else Y) + 1e6
    K = reference.kernel_matrix(X, Y, kernel="rbf", gamma=0.5)
    expected = np.exp(-0.5 * cdist(X, Y, "sqeuclidean"))
    np.testing.assert_allclose(K, expected, rtol=1e-8, atol=1e-12)


def _tanimoto_loop(X, Y):
    K = np.empty((len(X), len(Y)))
    for i, x in enumerate(X):
        for j, y in enumerate(Y):
            dot = float(np.dot(x, y))
            denom = float(np.dot(x, x) + np.dot(y, y)) - dot
            K[i, j] = 0.0 if denom == 0.0 else dot / denom
    return K


@pytest.mark.parametrize("fingerprint", ["binary", "count"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_tanimoto_matches_double_loop(fingerprint, dtype, reference_tol):
    rng = np.random.default_rng(3)
    if fingerprint == "binary":
        X, Y = rng.random((12, 32)) < 0.3, rng.random((7, 32)) < 0.3
    else:
        X, Y = rng.poisson(1.0, (12, 32)), rng.poisson(1.0, (7, 32))
    X, Y = X.astype(dtype), Y.astype(dtype)
    for Y_arg, Y_ref in [(Y, Y), (None, X)]:
        K = reference.kernel_matrix(X, Y_arg, kernel="tanimoto")
        assert K.dtype == dtype
        np.testing.assert_allclose(K, _tanimoto_loop(X, Y_ref), **reference_tol)


def test_tanimoto_zero_vectors():
    # Two empty fingerprints share no bit: similarity 0 (RDKit's convention), also on the diagonal.
    X = np.array([[0.0, 0.0, 0.0], [1.0, 0.0, 1.0]])
    K = reference.kernel_matrix(X, kernel="tanimoto")
    np.testing.assert_array_equal(K, [[0.0, 0.0], [0.0, 1.0]])
    np.testing.assert_array_equal(reference.kernel_matrix(X, X.copy(), kernel="tanimoto"), K)
    np.testing.assert_array_equal(K, _tanimoto_loop(X, X))


def test_cosine_zero_rows_give_zero():
    X = np.array([[0.0, 0.0], [3.0, 4.0]])
    K = reference.kernel_matrix(X, kernel="cosine")
    np.testing.assert_allclose(K, [[0.0, 0.0], [0.0, 1.0]])
    np.testing.assert_allclose(K, pairwise_kernels(X, metric="cosine"))


def test_kernel_matrix_rejects_unknown_kernel():
    with pytest.raises(ValueError, match="kernel"):
        reference.kernel_matrix(np.ones((2, 2)), kernel="sigmoid-ish")


def test_kernel_matrix_rejects_feature_mismatch():
    with pytest.raises(ValueError, match="features"):
        reference.kernel_matrix(np.ones((2, 3)), np.ones((2, 4)))


# --------------------------------------------------------------------------
# centring
# --------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n_train, n_test", [(1, 1), (2, 3), (40, 11)])
def test_centering_matches_kernel_centerer(n_train, n_test, dtype, reference_tol):
    X, Xt = _data(n_train, n_test, 3, np.float64, seed=1)
    K_train = pairwise_kernels(X, metric="rbf", gamma=0.4)
    K_test = pairwise_kernels(Xt, X, metric="rbf", gamma=0.4)
    centerer = KernelCenterer()
    expected_train = centerer.fit_transform(K_train)
    expected_test = centerer.transform(K_test)

    K, K_rows = K_train.astype(dtype), K_test.astype(dtype)
    column_means, grand_mean = reference.center_kernel(K)
    reference.center_kernel_rows(K_rows, column_means, grand_mean)

    assert K.dtype == K_rows.dtype == column_means.dtype == dtype
    assert isinstance(grand_mean, float)
    tol = reference_tol
    np.testing.assert_allclose(column_means, centerer.K_fit_rows_, **tol)
    np.testing.assert_allclose(grand_mean, centerer.K_fit_all_, **tol)
    np.testing.assert_allclose(K, expected_train, **tol)
    np.testing.assert_allclose(K_rows, expected_test, **tol)


def test_centered_linear_kernel_equals_centered_features():
    X, Xt = _data(30, 8, 5, np.float64, seed=2)
    X, Xt = X + 3.0, Xt + 3.0
    mean = X.mean(axis=0)
    K = X @ X.T
    K_rows = Xt @ X.T

    column_means, grand_mean = reference.center_kernel(K)
    reference.center_kernel_rows(K_rows, column_means, grand_mean)

    np.testing.assert_allclose(K, (X - mean) @ (X - mean).T, atol=1e-10)
    np.testing.assert_allclose(K_rows, (Xt - mean) @ (X - mean).T, atol=1e-10)
    np.testing.assert_allclose(K.sum(axis=0), 0.0, atol=1e-9)


# --------------------------------------------------------------------------
# eigensolvers
# --------------------------------------------------------------------------


def _assert_sign_rule(V):
    for v in V.T:
        assert v[np.argmax(np.abs(v))] > 0


def _assert_eigenpairs(A, w, V, atol):
    A = A.astype(np.float64)
    w, V = w.astype(np.float64), V.astype(np.float64)
    np.testing.assert_allclose(A @ V, V * w, atol=atol)
    np.testing.assert_allclose(V.T @ V, np.eye(V.shape[1]), atol=atol)
    assert np.all(np.diff(w) <= 0)
    _assert_sign_rule(V)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [1, 2, 9, 50])
def test_eigh_matches_numpy(n, dtype):
    A = _random_symmetric(n, seed=n, dtype=dtype)
    w, V = reference.eigh(A)
    assert w.shape == (n,) and V.shape == (n, n)
    assert w.dtype == V.dtype == dtype
    atol = 1e-4 if dtype == np.float32 else 1e-10
    w_np, V_np = np.linalg.eigh(A.astype(np.float64))
    np.testing.assert_allclose(w, w_np[::-1], atol=atol)
    _assert_eigenpairs(A, w, V, atol)
    # Distinct eigenvalues: eigenvectors agree with numpy's up to sign.
    np.testing.assert_allclose(np.abs(V), np.abs(V_np[:, ::-1]), atol=10 * atol)


def test_eigh_degenerate_spectrum():
    Q, _ = np.linalg.qr(np.random.default_rng(4).normal(size=(6, 6)))
    A = Q @ np.diag([3.0, 3.0, 1.0, 1.0, 1.0, -2.0]) @ Q.T
    w, V = reference.eigh(A)
    np.testing.assert_allclose(w, [3, 3, 1, 1, 1, -2], atol=1e-12)
    _assert_eigenpairs(A, w, V, 1e-12)


def test_eigh_sign_rule_tie_uses_first_entry():
    # Eigenvector (-1, 1)/sqrt(2) has a tie in magnitude: the first entry wins.
    A = np.array([[0.0, -1.0], [-1.0, 0.0]])
    w, V = reference.eigh(A)
    np.testing.assert_allclose(w, [1.0, -1.0])
    np.testing.assert_allclose(V[:, 0], np.array([1.0, -1.0]) / np.sqrt(2))
    np.testing.assert_allclose(V[:, 1], np.array([1.0, 1.0]) / np.sqrt(2))


def _start(n, b, dtype=np.float64):
    return np.random.default_rng(9).normal(size=(n, b)).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n, s", [(1, 1), (5, 5), (30, 1), (30, 4)])
def test_top_eigsh_matches_eigh(n, s, dtype):
    A = _random_symmetric(n, seed=n + s, dtype=dtype)
    w, V, residuals, n_iter, converged = reference.top_eigsh(A, s, _start(n, s + 2, dtype))
    w_all, V_all = reference.eigh(A)
    assert w.shape == (s,) and V.shape == (n, s) and residuals.shape == (s,)
    assert w.dtype == V.dtype == dtype
    assert residuals.dtype == np.float64
    assert isinstance(n_iter, int) and isinstance(converged, bool)
    assert converged
    atol = 1e-4 if dtype == np.float32 else 1e-10
    np.testing.assert_allclose(w, w_all[:s], atol=atol)
    np.testing.assert_allclose(V, V_all[:, :s], atol=10 * atol)
    _assert_sign_rule(V)


def test_top_eigsh_is_largest_algebraic():
    Q, _ = np.linalg.qr(np.random.default_rng(5).normal(size=(8, 8)))
    A = Q @ np.diag([2.0, 1.0, 0.5, 0.0, -0.5, -1.0, -3.0, -10.0]) @ Q.T
    w, *_ = reference.top_eigsh(A, 3, _start(8, 3))
    np.testing.assert_allclose(w, [2.0, 1.0, 0.5], atol=1e-12)


def test_top_eigsh_residuals():
    A = _random_symmetric(20, seed=6)
    w, V, residuals, _, _ = reference.top_eigsh(A, 3, _start(20, 3))
    expected = np.linalg.norm(A @ V - V * w, axis=0) / np.abs(w).max()
    np.testing.assert_allclose(residuals, expected, rtol=1e-6, atol=1e-18)
    assert np.all(residuals < 1e-12)
    *_, converged = reference.top_eigsh(A, 3, _start(20, 3), tol=1e-300)
    assert not converged


@pytest.mark.parametrize("s", [0, 6])
def test_top_eigsh_rejects_bad_n_components(s):
    with pytest.raises(ValueError, match="n_components"):
        reference.top_eigsh(_random_symmetric(5), s, _start(5, 6))


@pytest.mark.parametrize("shape", [(4, 2), (5, 0)])
def test_top_eigsh_rejects_bad_start(shape):
    with pytest.raises(ValueError, match="start"):
        reference.top_eigsh(_random_symmetric(5), 3, np.ones(shape))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_top_eigsh_operator_equals_top_eigsh(dtype):
    A = _random_symmetric(25, seed=7, dtype=dtype)
    start = _start(25, 5, dtype)
    expected = reference.top_eigsh(A, 3, start)
    result = reference.top_eigsh_operator(lambda B: A @ B, 25, 3, start)
    for got, want in zip(result[:3], expected[:3]):
        assert got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    assert result[3:] == expected[3:]


# --------------------------------------------------------------------------
# matrix-free kernel products, Fourier features and kernel eigenpairs
# --------------------------------------------------------------------------

# (n_x, n_y, n_features, b); n_y = None means Y is omitted. 30 rows take several blocks of small_blocks.
PRODUCT_SHAPES = [(1, None, 1, 1), (1, 4, 2, 1), (7, None, 1, 2), (6, 4, 3, 1), (30, None, 4, 5), (30, 11, 4, 3)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", PRODUCT_SHAPES)
@pytest.mark.parametrize("kernel", KERNEL_NAMES)
def test_kernel_product_is_kernel_matrix_times_block(small_blocks, kernel, shape, dtype):
    n_x, n_y, d, b = shape
    X, Y = _data(n_x, n_y, d, dtype, seed=21)
    B = np.random.default_rng(22).normal(size=(n_x if n_y is None else n_y, b)).astype(dtype)
    got = reference.kernel_product(X, Y, B, kernel=kernel, gamma=0.3)
    X64, B64 = X.astype(np.float64), B.astype(np.float64)
    K = _direct_kernel(kernel, X64, X64 if Y is None else Y.astype(np.float64), 0.3)
    # Entries of K @ B may cancel: tolerances scale with |K| @ |B|.
    scale = (np.abs(K) @ np.abs(B64)).max()
    tol = dict(rtol=1e-4, atol=1e-5 * scale) if dtype == np.float32 else dict(rtol=1e-10, atol=1e-12 * scale)
    assert got.shape == (n_x, b) and got.dtype == dtype
    np.testing.assert_allclose(got, K @ B64, **tol)
    np.testing.assert_allclose(got, reference.kernel_matrix(X, Y, kernel=kernel, gamma=0.3) @ B64, **tol)


def test_kernel_product_is_float32_only_when_every_input_is():
    X, Y = _data(5, 4, 2, np.float32)
    B = np.ones((4, 2))
    assert reference.kernel_product(X, Y, B.astype(np.float32)).dtype == np.float32
    assert reference.kernel_product(X, Y, B).dtype == np.float64
    assert reference.kernel_product(X, Y.astype(np.float64), B.astype(np.float32)).dtype == np.float64
    assert reference.kernel_product(np.ones((3, 2), int), None, np.ones((3, 1), int), "linear").dtype == np.float64


def test_kernel_product_has_the_exact_rbf_diagonal():
    # Far from the origin ||x||^2 + ||y||^2 - 2 x^T y cancels; the diagonal k(x, x) = 1 stays exact.
    X = np.array([[1e8, 0.0], [1e8 + 1e3, 0.0]])
    np.testing.assert_array_equal(reference.kernel_product(X, None, np.eye(2), kernel="rbf", gamma=1.0), np.eye(2))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n, d, D", [(1, 1, 1), (1, 3, 4), (6, 1, 3), (30, 4, 9)])
def test_fourier_features_match_their_formula(small_blocks, n, d, D, dtype, reference_tol):
    rng = np.random.default_rng(23)
    X, W = rng.normal(size=(n, d)).astype(dtype), rng.normal(size=(d, D)).astype(dtype)
    offset = rng.uniform(0, 2 * np.pi, size=D).astype(dtype)
    Z = reference.fourier_features(X, W, offset)
    expected = np.sqrt(2.0 / D) * np.cos(X.astype(np.float64) @ W.astype(np.float64) + offset.astype(np.float64))
    assert Z.shape == (n, D) and Z.dtype == dtype
    np.testing.assert_allclose(Z, expected, **reference_tol)


def test_fourier_features_are_float32_only_when_every_input_is():
    X, W, offset = np.ones((2, 3), np.float32), np.ones((3, 4), np.float32), np.zeros(4, np.float32)
    assert reference.fourier_features(X, W, offset).dtype == np.float32
    assert reference.fourier_features(X, W, offset.astype(np.float64)).dtype == np.float64
    assert reference.fourier_features(X.astype(int), W, offset).dtype == np.float64


def test_fourier_features_approximate_the_rbf_kernel():
    # Rahimi and Recht 2007: w ~ N(0, 2 gamma I), b ~ U[0, 2 pi) give E[phi(x)^T phi(y)] = exp(-gamma ||x - y||^2);
    # the error of D = 20000 features is of order 1 / sqrt(D).
    rng, gamma, D = np.random.default_rng(24), 0.5, 20000
    X = rng.normal(size=(6, 3))
    W = rng.normal(scale=np.sqrt(2 * gamma), size=(3, D))
    Z = reference.fourier_features(X, W, rng.uniform(0, 2 * np.pi, size=D))
    np.testing.assert_allclose(Z @ Z.T, pairwise_kernels(X, metric="rbf", gamma=gamma), atol=0.05)


def _centred(K):
    H = np.eye(len(K)) - 1.0 / len(K)
    return H @ K @ H


def _oriented(V):
    """V with each column's largest-magnitude entry positive, as the reference returns eigenvectors."""
    rows = np.argmax(np.abs(V), axis=0)
    return V * np.sign(V[rows, np.arange(V.shape[1])])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("center", [True, False])
@pytest.mark.parametrize("n, s", [(1, 1), (20, 3)])
@pytest.mark.parametrize("kernel", KERNEL_NAMES)
def test_kernel_top_eigsh_matches_scipy_on_the_explicit_kernel(kernel, n, s, center, dtype, reference_tol):
    X, _ = _data(n, None, 4, dtype, seed=25)
    start = _start(n, s + 2, dtype)
    w, V, residuals, n_iter, converged, column_means, grand_mean = reference.kernel_top_eigsh(
        X, kernel, 0.3, 3, 1.0, center, s, start
    )
    K = _direct_kernel(kernel, X.astype(np.float64), X.astype(np.float64), 0.3)
    w_all, V_all = scipy.linalg.eigh(_centred(K) if center else K)
    atol = (1e-4 if dtype == np.float32 else 1e-10) * max(1.0, np.abs(w_all).max())
    assert w.dtype == V.dtype == column_means.dtype == dtype and isinstance(grand_mean, float)
    assert (n_iter, converged) == (1, True) and residuals.shape == (s,)
    np.testing.assert_allclose(w, w_all[::-1][:s], atol=atol)
    # The spectra at these shapes are simple: the eigenvectors are those of scipy, oriented.
    np.testing.assert_allclose(V, _oriented(V_all[:, ::-1][:, :s]), atol=1e-3 if dtype == np.float32 else 1e-8)
    np.testing.assert_allclose(column_means, K.mean(axis=0) if center else 0.0, **reference_tol)
    assert grand_mean == (pytest.approx(K.mean(), rel=1e-6) if center else 0.0)


# --------------------------------------------------------------------------
# row blocks
# --------------------------------------------------------------------------


@pytest.fixture
def small_blocks(monkeypatch):
    """Blocks and mirrored tiles of at most 7 rows: small inputs take several, and a partial last one."""
    monkeypatch.setattr(_blocks, "MAX_BLOCK_ROWS", 7)
    monkeypatch.setattr(_blocks, "MIRROR_TILE", 7)
    assert len(_blocks.row_blocks(30, 8 * 30)) == 5


def _direct_kernel(kernel, X, Y, gamma):
    if kernel == "tanimoto":
        return _tanimoto_loop(X, Y)
    params = dict(gamma=gamma) if kernel in names_with("has_gamma") else {}
    return pairwise_kernels(X, Y, metric=kernel, **params)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n_y", [None, 11])
@pytest.mark.parametrize("kernel", KERNEL_NAMES)
def test_kernel_matrix_in_several_blocks(small_blocks, kernel, n_y, dtype, reference_tol):
    X, Y = _data(30, n_y, 4, dtype, seed=11)
    K = reference.kernel_matrix(X, Y, kernel=kernel, gamma=0.3)
    expected = _direct_kernel(kernel, X.astype(float), X.astype(float) if Y is None else Y.astype(float), 0.3)
    assert K.dtype == dtype
    np.testing.assert_allclose(K, expected, **reference_tol)
    if Y is None:
        assert np.array_equal(K, K.T)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_products_in_several_blocks(small_blocks, dtype, reference_tol):
    rng = np.random.default_rng(12)
    A, B = rng.normal(size=(30, 20)).astype(dtype), rng.normal(size=(20, 3)).astype(dtype)
    T = rng.normal(size=(30, 3)).astype(dtype)
    S = _random_symmetric(30, seed=12, dtype=dtype)
    lower = S.copy()
    lower[np.triu_indices(30, 1)] = np.nan  # must not be read
    A64, B64, T64, S64 = (M.astype(np.float64) for M in (A, B, T, S))
    for got, want in [
        (reference.block_product(A, B), A64 @ B64),
        (reference.block_product(lower, T[:, :2], symmetric=True), S64 @ T64[:, :2]),
        (reference.transposed_product(A, T), A64.T @ T64),
    ]:
        assert got.dtype == dtype
        np.testing.assert_allclose(got, want, **reference_tol)


def test_centering_in_several_blocks(small_blocks):
    X, Xt = _data(30, 9, 3, np.float64, seed=13)
    K, K_rows = pairwise_kernels(X, metric="rbf", gamma=0.4), pairwise_kernels(Xt, X, metric="rbf", gamma=0.4)
    centerer = KernelCenterer()
    expected, expected_rows = centerer.fit_transform(K), centerer.transform(K_rows)
    upper = np.triu_indices(30, 1)
    full, lower = K.copy(), K.copy()
    lower[upper] = np.nan  # neither read nor written

    means, grand = reference.center_kernel(full)
    means_lower, grand_lower = reference.center_kernel(lower, lower_only=True)
    reference.center_kernel_rows(K_rows, means, grand)

    np.testing.assert_allclose(full, expected, atol=1e-12)
    np.testing.assert_allclose(np.tril(lower), np.tril(expected), atol=1e-12)
    assert np.all(np.isnan(lower[upper]))
    np.testing.assert_allclose(means_lower, means, rtol=1e-14)
    assert grand_lower == pytest.approx(grand, rel=1e-14)
    np.testing.assert_allclose(K_rows, expected_rows, atol=1e-12)


@pytest.mark.parametrize("kernel", KERNEL_NAMES)
def test_kernel_gradient_in_several_blocks(monkeypatch, kernel):
    rng = np.random.default_rng(14)
    X, Y, W = rng.normal(size=(30, 3)), rng.normal(size=(8, 3)), rng.normal(size=(30, 8))
    whole = reference.kernel_gradient(X, Y, W, kernel, 0.3)
    monkeypatch.setattr(_blocks, "MAX_BLOCK_ROWS", 7)
    np.testing.assert_allclose(reference.kernel_gradient(X, Y, W, kernel, 0.3), whole, rtol=1e-13, atol=1e-15)


_LARGE_KERNEL_SCRIPT = """
import json
import numpy as np
from rkm import reference

X = np.random.default_rng(0).normal(size=(20000, 256)).astype(np.float32)
gamma = 1.0 / 256
# Two BLAS threads: the crash happens in the multi-threaded routine.
K = reference.kernel_matrix(X, None, "rbf", gamma, n_threads=2)
rng = np.random.default_rng(1)
rows = np.concatenate([rng.integers(0, 20000, 200), [0, 19999, 12345]])
cols = np.concatenate([rng.integers(0, 20000, 200), [19999, 0, 12345]])
X64 = X.astype(np.float64)
exact = np.exp(-gamma * np.sum((X64[rows] - X64[cols]) ** 2, axis=1))
print(json.dumps({"shape": K.shape, "dtype": K.dtype.name,
                  "error": float(np.max(np.abs(K[rows, cols] - exact) / exact)),
                  "symmetric": bool(np.array_equal(K[rows, cols], K[cols, rows]))}))
"""


def _exit_description(result):
    if result.returncode < 0:
        cause = f"was killed by {signal.Signals(-result.returncode).name}"
    else:
        cause = f"exited with status {result.returncode}"
    return f"the child process {cause}; stderr:\n{result.stderr[-3000:]}"


@pytest.mark.slow
def test_kernel_matrix_at_a_size_where_numpy_x_xt_crashes():
    # NumPy sends X @ X.T to BLAS's SYRK, whose multi-threaded OpenBLAS version segfaulted on inputs of this
    # shape (20000, 256), float32 too since the reference computes in float64. The reference works in row
    # blocks instead; a child process turns a crash into a test failure.
    result = subprocess.run([sys.executable, "-c", _LARGE_KERNEL_SCRIPT], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, _exit_description(result)
    # An editable install may print its rebuild log before the result.
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["shape"] == [20000, 20000] and summary["dtype"] == "float32"
    assert summary["error"] < 1e-6
    assert summary["symmetric"]


# --------------------------------------------------------------------------
# the kernel rules: tanimoto of zero vectors (above), non-finite results
# --------------------------------------------------------------------------


def test_poly_non_integer_degree_needs_a_non_negative_base():
    X = np.array([[1.0, 0.0], [-1.0, 2.0]])
    W = np.ones((2, 2))
    for call in (
        lambda: reference.kernel_matrix(X, kernel="poly", gamma=1.0, degree=2.5, coef0=0.0),
        lambda: reference.kernel_gradient(X, X, W, kernel="poly", gamma=1.0, degree=2.5, coef0=0.0),
    ):
        with pytest.raises(ValueError, match="^degree: a non-integer degree"):
            call()
    # An integer degree, even given as a float, takes any base; a non-negative base takes any degree.
    np.testing.assert_allclose(
        reference.kernel_matrix(X, kernel="poly", gamma=1.0, degree=3.0, coef0=0.0), (X @ X.T) ** 3
    )
    np.testing.assert_allclose(
        reference.kernel_matrix(X, kernel="poly", gamma=1.0, degree=2.5, coef0=1.0), (X @ X.T + 1.0) ** 2.5
    )


@pytest.mark.filterwarnings("error")  # the overflow is reported by the error alone
@pytest.mark.parametrize("cross", [False, True])
@pytest.mark.parametrize(
    "kernel, scale, dtype",
    [
        ("linear", 1e160, np.float64),
        ("poly", 1e100, np.float64),
        ("rbf", 1e200, np.float64),
        ("cosine", 1e200, np.float64),
        ("tanimoto", 1e160, np.float64),
        ("linear", 1e20, np.float32),
        ("poly", 1e10, np.float32),
    ],
)
def test_overflowing_kernel_is_an_error(kernel, scale, dtype, cross):
    X = (_data(6, None, 3, np.float64, seed=15)[0] * scale).astype(dtype)
    dtype_name = np.dtype(dtype).name
    with pytest.raises(ValueError, match=f"^X: the {kernel} kernel overflows {dtype_name}") as error:
        reference.kernel_matrix(X, X.copy() if cross else None, kernel=kernel)
    assert "scale the inputs down" in str(error.value)
    if dtype == np.float32:
        # The float64 result exists but does not fit float32.
        assert str(error.value).endswith("or use float64")
        assert np.all(np.isfinite(reference.kernel_matrix(X.astype(np.float64), kernel=kernel)))


@pytest.mark.filterwarnings("error")
def test_symmetric_rbf_with_overflowing_norms_is_an_error():
    # Only the diagonal, whose value 1 is known, would come out NaN; the core reports that too.
    X = np.array([[1e200, 0.0], [-1e200, 0.0]])
    with pytest.raises(ValueError, match="^X: the rbf kernel overflows"):
        reference.kernel_matrix(X, kernel="rbf")


@pytest.mark.filterwarnings("error")
def test_overflowing_kernel_gradient_is_an_error():
    X = _data(6, None, 3, np.float64, seed=16)[0] * 1e100
    with pytest.raises(ValueError, match="^X: the poly kernel gradient overflows float64"):
        reference.kernel_gradient(X, X, np.ones((6, 6)), kernel="poly", gamma=1.0)
    # (x^T y)^0.5 has an unbounded derivative where x^T y = 0.
    with pytest.raises(ValueError, match="^X: the poly kernel gradient overflows float64"):
        reference.kernel_gradient(
            np.eye(2), np.eye(2), np.ones((2, 2)), kernel="poly", gamma=1.0, degree=0.5, coef0=0.0
        )


@pytest.mark.filterwarnings("error")
@pytest.mark.parametrize("cross", [False, True])
def test_overflowing_kernel_product_is_an_error(cross):
    X = _data(6, None, 3, np.float64, seed=18)[0]
    Y = X.copy() if cross else None
    with pytest.raises(ValueError, match="^X: the linear kernel overflows float64"):
        reference.kernel_product(X * 1e160, None if Y is None else Y * 1e160, np.ones((6, 2)), kernel="linear")
    # Finite kernel values (all near 1 with this gamma) whose products with B do not fit.
    with pytest.raises(ValueError, match="^X: the rbf kernel product overflows float64"):
        reference.kernel_product(X, Y, np.full((6, 2), 1e308), kernel="rbf", gamma=1e-6)
    X32, Y32 = X.astype(np.float32), None if Y is None else Y.astype(np.float32)
    with pytest.raises(ValueError, match="^X: the rbf kernel product overflows float32") as error:
        reference.kernel_product(X32, Y32, np.full((6, 2), 1e38, np.float32), kernel="rbf", gamma=1e-6)
    assert str(error.value).endswith("or use float64")


@pytest.mark.filterwarnings("error")
def test_overflowing_fourier_phases_are_an_error():
    X, W, offset = np.full((2, 3), 1e20, np.float32), np.full((3, 4), 1e20, np.float32), np.zeros(4, np.float32)
    with pytest.raises(ValueError, match="^X: the Fourier feature phase X @ W \\+ offset overflows float32"):
        reference.fourier_features(X, W, offset)
    # In float64 the phases fit: cos of a large finite number is a number.
    assert np.all(np.isfinite(reference.fourier_features(X.astype(np.float64), W, offset)))
    with pytest.raises(ValueError, match="^X: the Fourier feature phase X @ W \\+ offset overflows float64"):
        reference.fourier_features(X.astype(np.float64) * 1e280, W, offset)


def test_constant_poly_kernel_has_zero_gradient():
    # degree 0 makes the kernel 1 everywhere, also where the base x^T y vanishes.
    G = reference.kernel_gradient(np.eye(2), np.eye(2), np.ones((2, 2)), kernel="poly", gamma=1.0, degree=0, coef0=0.0)
    np.testing.assert_array_equal(G, 0.0)


def test_large_finite_kernels_are_not_errors():
    # Far from overflow: values near float32's limit and rbf distances so large that the kernel underflows.
    X = np.array([[1e19, 0.0], [0.0, 1e19]], dtype=np.float32)
    K = reference.kernel_matrix(X, kernel="linear")
    assert K[0, 0] == np.float32(1e38) and K[0, 1] == 0
    np.testing.assert_array_equal(reference.kernel_matrix(X.astype(float) * 1e100, kernel="rbf"), np.eye(2))


# --------------------------------------------------------------------------
# validation
# --------------------------------------------------------------------------


def _inputs():
    rng = np.random.default_rng(17)
    X, Y = rng.normal(size=(6, 3)), rng.normal(size=(4, 3))
    return dict(
        X=X,
        Y=Y,
        W=rng.normal(size=(6, 4)),
        A=_random_symmetric(6, seed=17),
        start=rng.normal(size=(6, 2)),
        K=pairwise_kernels(X, metric="rbf"),
        K_rows=pairwise_kernels(Y, X, metric="rbf"),
        weights=rng.normal(size=(3, 5)),
        offset=rng.uniform(0, 2 * np.pi, size=5),
    )


# (argument named in the error, call with that argument poisoned by the given value)
NON_FINITE_CASES = {
    "kernel_matrix-X": ("X", lambda d, v: reference.kernel_matrix(poisoned(d["X"], v), d["Y"])),
    "kernel_matrix-Y": ("Y", lambda d, v: reference.kernel_matrix(d["X"], poisoned(d["Y"], v))),
    "kernel_gradient-X": ("X", lambda d, v: reference.kernel_gradient(poisoned(d["X"], v), d["Y"], d["W"])),
    "kernel_gradient-Y": ("Y", lambda d, v: reference.kernel_gradient(d["X"], poisoned(d["Y"], v), d["W"])),
    "kernel_gradient-W": ("W", lambda d, v: reference.kernel_gradient(d["X"], d["Y"], poisoned(d["W"], v))),
    "center_kernel-K": ("K", lambda d, v: reference.center_kernel(poisoned(d["K"], v))),
    "center_kernel-lower-K": ("K", lambda d, v: reference.center_kernel(poisoned(d["K"], v), lower_only=True)),
    "center_kernel_rows-K_rows": (
        "K_rows",
        lambda d, v: reference.center_kernel_rows(poisoned(d["K_rows"], v), d["K"].mean(0), 0.5),
    ),
    "center_kernel_rows-column_means": (
        "column_means",
        lambda d, v: reference.center_kernel_rows(d["K_rows"], poisoned(d["K"].mean(0), v, 1), 0.5),
    ),
    "center_kernel_rows-grand_mean": (
        "grand_mean",
        lambda d, v: reference.center_kernel_rows(d["K_rows"], d["K"].mean(0), v),
    ),
    "eigh-A": ("A", lambda d, v: reference.eigh(poisoned(d["A"], v))),
    "top_eigsh-A": ("A", lambda d, v: reference.top_eigsh(poisoned(d["A"], v), 2, d["start"])),
    "top_eigsh-start": ("start", lambda d, v: reference.top_eigsh(d["A"], 2, poisoned(d["start"], v))),
    "top_eigsh_operator-start": (
        "start",
        lambda d, v: reference.top_eigsh_operator(lambda B: d["A"] @ B, 6, 2, poisoned(d["start"], v)),
    ),
    "top_eigsh_operator-matmat": (
        "matmat",
        lambda d, v: reference.top_eigsh_operator(lambda B: poisoned(d["A"], v), 6, 2, d["start"]),
    ),
    "block_product-A": ("A", lambda d, v: reference.block_product(poisoned(d["A"], v), d["start"])),
    "block_product-lower-A": (
        "A",
        lambda d, v: reference.block_product(poisoned(d["A"], v), d["start"], symmetric=True),
    ),
    "block_product-X": ("X", lambda d, v: reference.block_product(d["A"], poisoned(d["start"], v))),
    "transposed_product-A": ("A", lambda d, v: reference.transposed_product(poisoned(d["A"], v), d["start"])),
    "transposed_product-B": ("B", lambda d, v: reference.transposed_product(d["A"], poisoned(d["start"], v))),
    "kernel_product-X": ("X", lambda d, v: reference.kernel_product(poisoned(d["X"], v), d["Y"], d["W"].T)),
    "kernel_product-Y": ("Y", lambda d, v: reference.kernel_product(d["X"], poisoned(d["Y"], v), d["W"].T)),
    "kernel_product-B": ("B", lambda d, v: reference.kernel_product(d["X"], None, poisoned(d["start"], v))),
    "fourier_features-X": (
        "X",
        lambda d, v: reference.fourier_features(poisoned(d["X"], v), d["weights"], d["offset"]),
    ),
    "fourier_features-W": (
        "W",
        lambda d, v: reference.fourier_features(d["X"], poisoned(d["weights"], v), d["offset"]),
    ),
    "fourier_features-offset": (
        "offset",
        lambda d, v: reference.fourier_features(d["X"], d["weights"], poisoned(d["offset"], v, 1)),
    ),
    "kernel_top_eigsh-X": (
        "X",
        lambda d, v: reference.kernel_top_eigsh(poisoned(d["X"], v), "rbf", 0.5, 3, 1.0, True, 2, d["start"]),
    ),
    "kernel_top_eigsh-start": (
        "start",
        lambda d, v: reference.kernel_top_eigsh(d["X"], "rbf", 0.5, 3, 1.0, True, 2, poisoned(d["start"], v)),
    ),
}


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("case", sorted(NON_FINITE_CASES))
def test_non_finite_inputs_are_rejected(case, value):
    name, call = NON_FINITE_CASES[case]
    with pytest.raises(ValueError, match=f"^{name}: "):
        call(_inputs(), value)


def test_the_ignored_upper_triangle_may_hold_anything():
    d = _inputs()
    A, K = d["A"].copy(), d["K"].copy()
    A[0, 1] = K[0, 1] = np.nan
    np.testing.assert_allclose(reference.block_product(A, d["start"], symmetric=True), d["A"] @ d["start"])
    reference.center_kernel(K, lower_only=True)
    assert np.isnan(K[0, 1])


@pytest.mark.parametrize("gamma", [0, -1.0, np.nan, np.inf, "0.5", True])
@pytest.mark.parametrize("kernel", names_with("distance"))  # exp(-gamma d): gamma > 0
def test_gamma_must_be_positive_and_finite(kernel, gamma):
    d = _inputs()
    with pytest.raises(ValueError, match="^gamma: must be a positive finite number"):
        reference.kernel_matrix(d["X"], kernel=kernel, gamma=gamma)
    with pytest.raises(ValueError, match="^gamma: "):
        reference.kernel_gradient(d["X"], d["Y"], d["W"], kernel=kernel, gamma=gamma)


@pytest.mark.parametrize("gamma", [np.nan, np.inf, "0.5", True])
def test_poly_gamma_must_be_finite(gamma):
    with pytest.raises(ValueError, match="^gamma: must be a finite number"):
        reference.kernel_matrix(_inputs()["X"], kernel="poly", gamma=gamma)


@pytest.mark.parametrize("gamma", [-0.5, 0.0])
def test_poly_takes_any_finite_gamma(gamma):
    X = _inputs()["X"]
    np.testing.assert_allclose(
        reference.kernel_matrix(X, kernel="poly", gamma=gamma),
        pairwise_kernels(X, metric="poly", gamma=gamma, degree=3, coef0=1.0),
        rtol=1e-12,
    )


@pytest.mark.parametrize(
    "argument, value",
    [
        ("degree", -1),
        ("degree", np.nan),
        ("degree", np.inf),
        ("degree", "3"),
        ("degree", True),
        ("degree", None),
        ("coef0", np.nan),
        ("coef0", -np.inf),
        ("coef0", "1"),
        ("coef0", None),
    ],
)
def test_poly_degree_and_coef0_are_validated(argument, value):
    d = _inputs()
    with pytest.raises(ValueError, match=f"^{argument}: "):
        reference.kernel_matrix(d["X"], kernel="poly", **{argument: value})
    with pytest.raises(ValueError, match=f"^{argument}: "):
        reference.kernel_gradient(d["X"], d["Y"], d["W"], kernel="poly", **{argument: value})


def test_other_kernels_ignore_poly_parameters():
    # As in rkm.kernels: degree and coef0 only belong to the poly kernel, gamma not to linear.
    X = _inputs()["X"]
    K = reference.kernel_matrix(X, kernel="rbf", degree=-1, coef0=np.nan)
    np.testing.assert_array_equal(K, reference.kernel_matrix(X, kernel="rbf"))
    np.testing.assert_array_equal(reference.kernel_matrix(X, kernel="linear", gamma=-1), X @ X.T)


@pytest.mark.parametrize("kernel", ["sigmoid", "RBF", 3, None])
def test_unknown_kernels_are_rejected(kernel):
    d = _inputs()
    with pytest.raises(ValueError, match="^kernel: "):
        reference.kernel_matrix(d["X"], kernel=kernel)
    with pytest.raises(ValueError, match="^kernel: "):
        reference.kernel_gradient(d["X"], d["Y"], d["W"], kernel=kernel)


@pytest.mark.parametrize("alias, name", [("polynomial", "poly"), ("gaussian", "rbf")])
def test_kernel_aliases(alias, name):
    X = _inputs()["X"]
    np.testing.assert_array_equal(reference.kernel_matrix(X, kernel=alias), reference.kernel_matrix(X, kernel=name))


BAD_SHAPE_CASES = {
    "X 1-D": ("X", lambda d: reference.kernel_matrix(np.ones(3))),
    "X 3-D": ("X", lambda d: reference.kernel_matrix(np.ones((2, 2, 2)))),
    "X no rows": ("X", lambda d: reference.kernel_matrix(np.ones((0, 3)))),
    "X no features": ("X", lambda d: reference.kernel_matrix(np.ones((3, 0)))),
    "X complex": ("X", lambda d: reference.kernel_matrix(d["X"] + 1j)),
    "X strings": ("X", lambda d: reference.kernel_matrix(np.array([["a", "b"]]))),
    "Y features": ("Y", lambda d: reference.kernel_matrix(d["X"], d["Y"][:, :2])),
    "gradient Y features": ("Y", lambda d: reference.kernel_gradient(d["X"], d["Y"][:, :2], d["W"])),
    "gradient W": ("W", lambda d: reference.kernel_gradient(d["X"], d["Y"], d["W"].T)),
    "center K": ("K", lambda d: reference.center_kernel(d["K"][:, :5].copy())),
    "center K 1-D": ("K", lambda d: reference.center_kernel(d["K"][0].copy())),
    "center rows column_means": ("column_means", lambda d: reference.center_kernel_rows(d["K_rows"], np.ones(5), 0.0)),
    "eigh A": ("A", lambda d: reference.eigh(d["W"])),
    "top_eigsh A": ("A", lambda d: reference.top_eigsh(d["W"], 2, d["start"])),
    "top_eigsh start rows": ("start", lambda d: reference.top_eigsh(d["A"], 2, d["start"][:5])),
    "top_eigsh start 1-D": ("start", lambda d: reference.top_eigsh(d["A"], 2, d["start"][:, 0])),
    "operator n": ("n", lambda d: reference.top_eigsh_operator(lambda B: B, 0, 1, d["start"])),
    "operator matmat shape": ("matmat", lambda d: reference.top_eigsh_operator(lambda B: B[:, :1], 6, 2, d["start"])),
    "operator matmat callable": ("matmat", lambda d: reference.top_eigsh_operator(d["A"], 6, 2, d["start"])),
    "block_product X": ("X", lambda d: reference.block_product(d["A"], d["start"][:5])),
    "block_product square": ("A", lambda d: reference.block_product(d["W"], d["W"].T, symmetric=True)),
    "transposed_product B": ("B", lambda d: reference.transposed_product(d["A"], d["start"][:5])),
    "kernel_product B rows": ("B", lambda d: reference.kernel_product(d["X"], d["Y"], d["start"])),
    "kernel_product B rows symmetric": ("B", lambda d: reference.kernel_product(d["X"], None, d["W"].T)),
    "kernel_product B 1-D": ("B", lambda d: reference.kernel_product(d["X"], None, d["start"][:, 0])),
    "kernel_product B no columns": ("B", lambda d: reference.kernel_product(d["X"], None, d["start"][:, :0])),
    "kernel_product Y features": ("Y", lambda d: reference.kernel_product(d["X"], d["Y"][:, :2], d["W"].T)),
    "fourier W rows": ("W", lambda d: reference.fourier_features(d["X"], d["weights"][:2], d["offset"])),
    "fourier W no columns": ("W", lambda d: reference.fourier_features(d["X"], d["weights"][:, :0], d["offset"][:0])),
    "fourier offset length": ("offset", lambda d: reference.fourier_features(d["X"], d["weights"], d["offset"][:4])),
    "fourier offset 2-D": ("offset", lambda d: reference.fourier_features(d["X"], d["weights"], d["offset"][None])),
    "fourier offset complex": ("offset", lambda d: reference.fourier_features(d["X"], d["weights"], d["offset"] + 1j)),
    "kernel_top_eigsh X 1-D": (
        "X",
        lambda d: reference.kernel_top_eigsh(d["X"][0], "rbf", 0.5, 3, 1.0, True, 1, d["start"]),
    ),
    "kernel_top_eigsh start rows": (
        "start",
        lambda d: reference.kernel_top_eigsh(d["X"], "rbf", 0.5, 3, 1.0, True, 2, d["start"][:5]),
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_SHAPE_CASES))
def test_bad_shapes_and_dtypes_are_rejected(case):
    name, call = BAD_SHAPE_CASES[case]
    with pytest.raises(ValueError, match=f"^{name}: "):
        call(_inputs())


@pytest.mark.parametrize("function", ["center_kernel", "center_kernel_rows"])
def test_in_place_routines_need_float_ndarrays(function):
    d = _inputs()
    args = {"center_kernel": (), "center_kernel_rows": (d["K"].mean(0), 0.5)}[function]
    name = {"center_kernel": "K", "center_kernel_rows": "K_rows"}[function]
    array = d["K"] if function == "center_kernel" else d["K_rows"]
    for bad in (array.astype(int), array.tolist()):
        with pytest.raises(TypeError, match=f"^{name}: "):
            getattr(reference, function)(bad, *args)


@pytest.mark.parametrize(
    "argument, value",
    [
        ("n_components", 0),
        ("n_components", 7),
        ("n_components", 2.0),
        ("n_components", True),
        ("tol", 0.0),
        ("tol", -1e-3),
        ("tol", np.nan),
        ("max_iter", 0),
        ("max_iter", 1.5),
    ],
)
def test_top_eigsh_arguments_are_validated(argument, value):
    d = _inputs()
    args = dict(n_components=2, start=d["start"]) | {argument: value}
    with pytest.raises(ValueError, match=f"^{argument}: "):
        reference.top_eigsh(d["A"], **args)
    with pytest.raises(ValueError, match=f"^{argument}: "):
        reference.top_eigsh_operator(lambda B: d["A"] @ B, 6, **args)
    with pytest.raises(ValueError, match=f"^{argument}: "):
        reference.kernel_top_eigsh(d["X"], "rbf", 0.5, 3, 1.0, True, **args)


@pytest.mark.parametrize("center", [None, 1, "yes", np.array([True])])
def test_kernel_top_eigsh_center_must_be_a_bool(center):
    d = _inputs()
    with pytest.raises(ValueError, match="^center: "):
        reference.kernel_top_eigsh(d["X"], "rbf", 0.5, 3, 1.0, center, 2, d["start"])


@pytest.mark.parametrize("argument, value", [("kernel", "sigmoid"), ("gamma", -1.0), ("degree", -1), ("coef0", np.nan)])
def test_kernel_top_eigsh_validates_the_kernel(argument, value):
    d = _inputs()
    kernel_args = dict(kernel="poly" if argument in ("degree", "coef0") else "rbf", gamma=0.5, degree=3, coef0=1.0)
    with pytest.raises(ValueError, match=f"^{argument}: "):
        reference.kernel_top_eigsh(
            d["X"], **(kernel_args | {argument: value}), center=True, n_components=2, start=d["start"]
        )


# Every public function, called with valid inputs and the given n_threads.
THREADED_CALLS = {
    "kernel_matrix": lambda d, t: reference.kernel_matrix(d["X"], n_threads=t),
    "kernel_gradient": lambda d, t: reference.kernel_gradient(d["X"], d["Y"], d["W"], n_threads=t),
    "center_kernel": lambda d, t: reference.center_kernel(d["K"], n_threads=t),
    "center_kernel_rows": lambda d, t: reference.center_kernel_rows(d["K_rows"], d["K"].mean(0), 0.5, n_threads=t),
    "eigh": lambda d, t: reference.eigh(d["A"], n_threads=t),
    "top_eigsh": lambda d, t: reference.top_eigsh(d["A"], 2, d["start"], n_threads=t),
    "top_eigsh_operator": lambda d, t: reference.top_eigsh_operator(
        lambda B: d["A"] @ B, 6, 2, d["start"], n_threads=t
    ),
    "block_product": lambda d, t: reference.block_product(d["A"], d["start"], n_threads=t),
    "transposed_product": lambda d, t: reference.transposed_product(d["A"], d["start"], n_threads=t),
    "kernel_product": lambda d, t: reference.kernel_product(d["X"], d["Y"], d["W"].T, n_threads=t),
    "fourier_features": lambda d, t: reference.fourier_features(d["X"], d["weights"], d["offset"], n_threads=t),
    "kernel_top_eigsh": lambda d, t: reference.kernel_top_eigsh(
        d["X"], "rbf", 0.5, 3, 1.0, True, 2, d["start"], n_threads=t
    ),
    "lssvm_dual_solve": lambda d, t: reference.lssvm_dual_solve(d["K"], d["start"], n_threads=t),
    "lssvm_dual_fit": lambda d, t: reference.lssvm_dual_fit(d["X"], d["start"], n_threads=t),
    "lssvm_dual_fit_mixed": lambda d, t: reference.lssvm_dual_fit_mixed(d["X"], d["start"], n_threads=t),
    "deep_levelwise_lssvm_kpca_kpca": lambda d, t: reference.deep_levelwise_lssvm_kpca_kpca(
        d["K"], d["start"][:, :1], (1, 1, 1), 0.1, (2, 1), 1, n_threads=t
    ),
    "deep_levelwise_kpca_kpca_lssvm": lambda d, t: reference.deep_levelwise_kpca_kpca_lssvm(
        d["K"], d["start"][:, :1], (1, 1, 1), 0.1, (2, 1), 1, n_threads=t
    ),
    "deep_reduced_set_objective": lambda d, t: reference.deep_reduced_set_objective(
        *_deep_threaded_problem(d), n_threads=t
    ),
    "deep_reduced_set_forward": lambda d, t: reference.deep_reduced_set_forward(
        _deep_threaded_problem(d)[0],
        _deep_threaded_problem(d)[1],
        (2, 1, 1, 1),
        ("rbf", 0.5, 3, 1.0),
        ("rbf", 0.5, 3, 1.0),
        (1, 1, 1),
        n_threads=t,
    ),
    "polar_orthonormalize": lambda d, t: reference.polar_orthonormalize(d["start"], n_threads=t),
    "stiefel_minimize": lambda d, t: reference.stiefel_minimize(
        lambda H: (-0.5 * np.sum(H * (d["A"] @ H)), -d["A"] @ H),
        np.linalg.qr(d["start"])[0],
        "pg",
        1e-6,
        2,
        n_threads=t,
    ),
    "constr_drkm_objective": lambda d, t: reference.constr_drkm_objective(
        d["start"], d["K"], [("rbf", 0.5, 3, 1.0)], (1, 1), (1.0, 1.0), False, n_threads=t
    ),
    "ConstrainedDeepObjective": lambda d, t: reference.ConstrainedDeepObjective(
        d["K"], [("rbf", 0.5, 3, 1.0)], (1, 1), (1.0, 1.0), False, n_threads=t
    ).evaluate(d["start"]),
    "levelwise_init": lambda d, t: reference.levelwise_init(
        d["K"], [("rbf", 0.5, 3, 1.0)], (1, 1), (1.0, 1.0), False, n_threads=t
    ),
    "kae_loss_and_grad": lambda d, t: reference.kae_loss_and_grad(
        d["X"], [d["start"], 0.1 * d["X"]], [("rbf", 0.5, 3, 1.0)] * 2, None, [1e-3, 1e-3], n_threads=t
    ),
    "smoother_preimage": lambda d, t: reference.smoother_preimage(d["Y"], d["X"], d["X"][:, 0], d["W"], 2, n_threads=t),
}


def _deep_threaded_problem(d):
    """A small reduced-set problem (M = 2, s1 = s2 = p = 1) from the shared inputs."""
    K1 = np.ascontiguousarray(d["K"][:, :2])
    theta = np.concatenate([np.full(2 * 3, 0.1), [0.0], [1.0, 1.0]])
    kernel = ("rbf", 0.5, 3, 1.0)
    return (
        theta,
        K1,
        np.ascontiguousarray(d["K"][:2, :2]),
        d["start"][:, :1],
        (2, 1, 1, 1),
        kernel,
        kernel,
        (1, 1, 1),
        0.1,
        1.0,
        0.0,
        "H",
        "full",
    )


def test_every_public_function_takes_n_threads():
    assert sorted(THREADED_CALLS) == sorted(reference.__all__)


@pytest.mark.parametrize("n_threads", [0, 1.5, True, "2"])
@pytest.mark.parametrize("function", sorted(THREADED_CALLS))
def test_n_threads_is_validated(function, n_threads):
    with pytest.raises(ValueError, match="^n_threads: "):
        THREADED_CALLS[function](_inputs(), n_threads)


@pytest.mark.parametrize("n_threads, expected", [(None, None), (1, 1), (3, 3), (-1, os.cpu_count()), (-(10**6), 1)])
@pytest.mark.parametrize("function", sorted(THREADED_CALLS))
def test_n_threads_limits_the_blas_threads(monkeypatch, function, n_threads, expected):
    calls = []
    original = _validation.threadpool_limits

    def recording(limits=None, user_api=None):
        calls.append((limits, user_api))
        return original(limits=limits, user_api=user_api)

    monkeypatch.setattr(_validation, "threadpool_limits", recording)
    THREADED_CALLS[function](_inputs(), n_threads)
    if expected is None:
        assert calls == []
    else:
        assert calls and all(call == (expected, "blas") for call in calls)


def test_n_threads_holds_during_the_call_and_is_restored():
    def blas_threads():
        return [info["num_threads"] for info in threadpool_info() if info["user_api"] == "blas"]

    before = blas_threads()
    if not before:
        pytest.skip("threadpoolctl finds no BLAS library to limit")
    d, seen = _inputs(), []

    def matmat(B):
        seen.append(blas_threads())
        return d["A"] @ B

    reference.top_eigsh_operator(matmat, 6, 2, d["start"], n_threads=1)
    assert seen == [[1] * len(before)]
    assert blas_threads() == before


# --------------------------------------------------------------------------
# deep RKM: reduced-set objective (eqs 5.2-5.4) and level-wise solving (eqs 4.11, 4.18)
# --------------------------------------------------------------------------

from rkm.reference.deep import (  # noqa: E402
    deep_levelwise_kpca_kpca_lssvm,
    deep_levelwise_lssvm_kpca_kpca,
    deep_reduced_set_forward,
    deep_reduced_set_objective,
)

DEEP_KERNELS = {"rbf": ("rbf", 0.5, 3, 1.0), "linear": ("linear", None, 3, 1.0), "poly": ("poly", 0.3, 3, 1.0)}
DEEP_ETAS = (1.3, 0.8, 1.1)
DEEP_LAM3, DEEP_C_STAB, DEEP_C0 = 0.5, 0.7, 0.3


def _deep_problem(p, kernel1="rbf", n=30, m=5, s1=2, s2=2, seed=0):
    """K1, G1 (reduced set = the first m rows), Y, dims, theta (l entries in [0.5, 2]) and the inputs X."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    gamma = 0.5 if kernel1 == "rbf" else None
    K1 = reference.kernel_matrix(X, X[:m], kernel1, gamma=gamma)
    G1 = reference.kernel_matrix(X[:m], None, kernel1, gamma=gamma)
    n_free = m * (s1 + s2 + p) + p
    theta = np.concatenate([0.5 * rng.normal(size=n_free), rng.uniform(0.5, 2.0, size=s1 + s2)])
    return dict(K1=K1, G1=G1, Y=rng.normal(size=(n, p)), dims=(m, s1, s2, p), theta=theta, X=X)


def _deep_objective(problem, kernel2, kernel3, regularizer, objective, theta=None):
    theta = problem["theta"] if theta is None else theta
    return deep_reduced_set_objective(
        theta,
        problem["K1"],
        problem["G1"],
        problem["Y"],
        problem["dims"],
        DEEP_KERNELS[kernel2],
        DEEP_KERNELS[kernel3],
        DEEP_ETAS,
        DEEP_LAM3,
        DEEP_C_STAB,
        DEEP_C0,
        regularizer,
        objective,
    )


def _deep_blocks(theta, dims):
    m, s1, s2, p = dims
    sizes = np.cumsum([m * s1, m * s2, m * p, p, s1])
    A1, A2, A3, b, l1, l2 = np.split(theta, sizes)
    return A1.reshape(m, s1), A2.reshape(m, s2), A3.reshape(m, p), b, l1, l2


@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("kernel3", sorted(DEEP_KERNELS))
@pytest.mark.parametrize("kernel2", sorted(DEEP_KERNELS))
@pytest.mark.parametrize("regularizer", ["H", "W"])
@pytest.mark.parametrize("objective", ["full", "level3"])
def test_deep_reduced_set_gradient_matches_central_differences(objective, regularizer, kernel2, kernel3, p):
    problem = _deep_problem(p, seed=p)
    _, grad, _ = _deep_objective(problem, kernel2, kernel3, regularizer, objective)
    step, differences = 1e-6, np.empty_like(problem["theta"])
    for i in range(problem["theta"].size):
        shift = np.zeros_like(problem["theta"])
        shift[i] = step
        up = _deep_objective(problem, kernel2, kernel3, regularizer, objective, problem["theta"] + shift)[0]
        down = _deep_objective(problem, kernel2, kernel3, regularizer, objective, problem["theta"] - shift)[0]
        differences[i] = (up - down) / (2 * step)
    assert np.abs(differences - grad).max() <= 1e-6 * np.abs(grad).max()


def test_deep_reduced_set_taylor_remainder_is_second_order():
    problem = _deep_problem(2, seed=3)
    f, grad, _ = _deep_objective(problem, "rbf", "poly", "W", "full")
    direction = np.random.default_rng(4).normal(size=grad.size)
    direction /= np.linalg.norm(direction)
    # Small enough for the quadratic term to dominate, large enough for it to stand above rounding.
    steps = np.array([1e-3, 1e-4, 1e-5])
    remainders = np.array(
        [
            abs(
                _deep_objective(problem, "rbf", "poly", "W", "full", problem["theta"] + t * direction)[0]
                - f
                - t * grad @ direction
            )
            for t in steps
        ]
    )
    slopes = np.log10(remainders[:-1] / remainders[1:])
    np.testing.assert_allclose(slopes, 2.0, atol=0.05)


def _deep_terms_from_explicit_maps(problem, regularizer):
    """J1, J2, J3 with every level linear: explicit W~ of eq 5.2 and e_i = W~^T phi(input_i) (eq 5.4)."""
    eta1, eta2, eta3 = DEEP_ETAS
    X, Xr = problem["X"], problem["X"][: problem["dims"][0]]
    A1, A2, A3, b, l1, l2 = _deep_blocks(problem["theta"], problem["dims"])
    W1, W2, W3 = Xr.T @ A1 / eta1, A1.T @ A2 / eta2, A2.T @ A3 / eta3
    E1 = X @ W1
    E2 = (E1 / l1) @ W2
    Yhat = (E2 / l2) @ W3 + b
    if regularizer == "W":
        Rg = [eta / 2 * np.sum(W * W) for eta, W in zip(DEEP_ETAS, (W1, W2, W3))]
    else:
        Rg = [eta / 2 * np.sum(A * A) for eta, A in zip(DEEP_ETAS, (A1, A2, A3))]
    J1 = -0.5 * sum(e @ np.diag(1 / l1) @ e for e in E1) + Rg[0]
    J2 = -0.5 * sum(e @ np.diag(1 / l2) @ e for e in E2) + Rg[1]
    J3 = np.sum((problem["Y"] - Yhat) ** 2) / (2 * DEEP_LAM3) + Rg[2]
    return np.array([J1, J2, J3])


@pytest.mark.parametrize("objective", ["full", "level3"])
@pytest.mark.parametrize("regularizer", ["H", "W"])
def test_deep_reduced_set_terms_match_explicit_feature_maps(regularizer, objective):
    problem = _deep_problem(2, kernel1="linear", seed=5)
    f, _, terms = _deep_objective(problem, "linear", "linear", regularizer, objective)
    expected = _deep_terms_from_explicit_maps(problem, regularizer)
    np.testing.assert_allclose(terms, expected, rtol=1e-12)
    J1, J2, J3 = expected
    l_sum = problem["theta"][-4:].sum()
    full = J1 + J2 + J3 + DEEP_C_STAB / 2 * (J1**2 + J2**2) - DEEP_C0 * l_sum
    assert f == pytest.approx(full if objective == "full" else J3, rel=1e-12)


@pytest.mark.parametrize("kernel2, kernel3", [("rbf", "poly"), ("poly", "rbf")])
def test_deep_reduced_set_terms_match_eq_5_4_sample_by_sample(kernel2, kernel3):
    problem = _deep_problem(2, seed=6)
    eta1, eta2, eta3 = DEEP_ETAS
    A1, A2, A3, b, l1, l2 = _deep_blocks(problem["theta"], problem["dims"])
    k2, k3 = DEEP_KERNELS[kernel2], DEEP_KERNELS[kernel3]

    def k(spec, U, V):
        name, gamma, degree, coef0 = spec
        return pairwise_kernels(
            U,
            V,
            metric=name,
            **({} if name == "linear" else dict(gamma=gamma)),
            **(dict(degree=degree, coef0=coef0) if name == "poly" else {}),
        )

    E1, E2, Yhat = [], [], []
    for k1_row in problem["K1"]:
        e1 = sum(A1[j] * k1_row[j] for j in range(len(A1))) / eta1
        k2_row = k(k2, A1, (e1 / l1)[None])[:, 0]
        e2 = sum(A2[j] * k2_row[j] for j in range(len(A2))) / eta2
        k3_row = k(k3, A2, (e2 / l2)[None])[:, 0]
        E1.append(e1)
        E2.append(e2)
        Yhat.append(sum(A3[j] * k3_row[j] for j in range(len(A3))) / eta3 + b)
    E1, E2, Yhat = map(np.array, (E1, E2, Yhat))
    # Tr(W~_l^T W~_l) = Tr(A_l^T G_l A_l) / eta_l^2 (eq 5.2).
    G = [problem["G1"], k(k2, A1, A1), k(k3, A2, A2)]
    Rg = [eta / 2 * np.trace(A.T @ Gl @ A) / eta**2 for eta, A, Gl in zip(DEEP_ETAS, (A1, A2, A3), G)]
    expected = [
        -0.5 * np.sum(E1**2 / l1) + Rg[0],
        -0.5 * np.sum(E2**2 / l2) + Rg[1],
        np.sum((problem["Y"] - Yhat) ** 2) / (2 * DEEP_LAM3) + Rg[2],
    ]
    _, _, terms = _deep_objective(problem, kernel2, kernel3, "W", "full")
    np.testing.assert_allclose(terms, expected, rtol=1e-11)

    forward = deep_reduced_set_forward(problem["theta"], problem["K1"], problem["dims"], k2, k3, DEEP_ETAS)
    for got, want in zip(forward, (Yhat, E1, E2)):
        np.testing.assert_allclose(got, want, rtol=1e-11, atol=1e-13)


def test_deep_reduced_set_forward_gives_the_objectives_predictions():
    problem = _deep_problem(2, seed=7)
    k2, k3 = DEEP_KERNELS["rbf"], DEEP_KERNELS["poly"]
    Yhat, E1, E2 = deep_reduced_set_forward(problem["theta"], problem["K1"], problem["dims"], k2, k3, DEEP_ETAS)
    A3 = _deep_blocks(problem["theta"], problem["dims"])[2]
    _, _, terms = _deep_objective(problem, "rbf", "poly", "H", "full")
    misfit = terms[2] - DEEP_ETAS[2] / 2 * np.sum(A3**2)
    assert np.sum((problem["Y"] - Yhat) ** 2) / (2 * DEEP_LAM3) == pytest.approx(misfit, rel=1e-12)
    assert Yhat.shape == (30, 2) and E1.shape == (30, 2) and E2.shape == (30, 2)
    # Rows are predicted independently: any subset of kernel rows gives the same rows.
    rows = [3, 17, 29]
    subset = deep_reduced_set_forward(problem["theta"], problem["K1"][rows], problem["dims"], k2, k3, DEEP_ETAS)
    for got, full in zip(subset, (Yhat, E1, E2)):
        np.testing.assert_allclose(got, full[rows], rtol=1e-12, atol=1e-14)


def _levelwise_problem(n=25, p=1, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    Y = np.column_stack([np.sin(X.sum(axis=1)) + 0.1 * rng.normal(size=n) for _ in range(p)])
    return dict(X=X, K1=reference.kernel_matrix(X, kernel="rbf", gamma=0.7), Y=Y, rng=rng)


def _assert_small(residual, scale, rtol=1e-10):
    assert np.abs(residual).max() <= rtol * max(np.abs(scale).max(), 1.0)


def _assert_unit_effective_columns(H, eigenvalues):
    """Columns with a nonzero eigenvalue orthonormal, the others zero; eigenvalues descending."""
    present = eigenvalues > 0
    assert np.all(np.diff(eigenvalues) <= 0)
    np.testing.assert_allclose(H[:, present].T @ H[:, present], np.eye(present.sum()), atol=1e-10)
    assert np.all(H[:, ~present] == 0)
    # Sign convention: each column's entry of largest magnitude is positive.
    columns = H[:, present]
    assert np.all(columns[np.argmax(np.abs(columns), axis=0), np.arange(columns.shape[1])] > 0)


def _assert_eigen_equation(A, H, eigenvalues):
    _assert_small(A @ H - H * eigenvalues, A)


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_deep_levelwise_4_18_first_level_1_step_is_the_ls_svm(fit_intercept):
    d = _levelwise_problem(p=2)
    etas, lam = (1.5, 0.2, 0.3), 0.05
    result = deep_levelwise_lssvm_kpca_kpca(
        d["K1"], d["Y"], etas, lam, (2, 1), 1, "forward", fit_intercept=fit_intercept
    )
    H, b, _ = reference.lssvm_dual_solve(d["K1"], d["Y"], etas[0], lam, fit_intercept)
    np.testing.assert_allclose(result["H1"], H, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(result["b"], b, rtol=1e-10, atol=1e-12)
    assert [step for step, _ in result["history"]] == ["forward L1", "forward L2", "forward L3"]


def test_deep_levelwise_4_18_each_level_solves_its_equation():
    # One forward pass from random H2, H3: L1 uses H2_0, L2 uses (H1, H3_0), L3 uses the new H2. s2 = 4 exceeds
    # the rank p + s3 = 2 of level 2, so two of its components are zero columns.
    d = _levelwise_problem()
    n, (eta1, eta2, eta3), lam = 25, (1.0, 0.5, 0.25), 0.1
    H2_0, H3_0 = d["rng"].normal(size=(n, 4)), d["rng"].normal(size=(n, 1))
    r = deep_levelwise_lssvm_kpca_kpca(d["K1"], d["Y"], (eta1, eta2, eta3), lam, (4, 1), 1, "forward", H2_0, H3_0)
    A1 = d["K1"] / eta1 + H2_0 @ H2_0.T / eta2 + lam * np.eye(n)
    _assert_small(A1 @ r["H1"] + r["b"] - d["Y"], A1)
    _assert_small(r["H1"].sum(axis=0), r["H1"])
    A2 = r["H1"] @ r["H1"].T / eta2 + H3_0 @ H3_0.T / eta3
    _assert_eigen_equation(A2, r["H2"], r["eigenvalues2"])
    _assert_unit_effective_columns(r["H2"], r["eigenvalues2"])
    assert np.count_nonzero(r["eigenvalues2"]) == 2
    np.testing.assert_allclose(r["eigenvalues2"][:2], scipy.linalg.eigvalsh(A2)[::-1][:2], rtol=1e-10)
    A3 = r["H2"] @ r["H2"].T / eta3
    _assert_eigen_equation(A3, r["H3"], r["eigenvalues3"])
    np.testing.assert_allclose(r["eigenvalues3"], scipy.linalg.eigvalsh(A3)[::-1][:1], rtol=1e-10)
    _assert_unit_effective_columns(r["H3"], r["eigenvalues3"])


def _j_deep_4_13(K_features, Y, r, eta1, eta2, eta3, lam):
    """Eq 4.13 with explicit W1, W2, W3 of eq 4.15 (linear phi1 = the rows of K_features, linear phi2, phi3)."""
    H1, H2, H3, b = r["H1"], r["H2"], r["H3"], r["b"]
    W1, W2, W3 = K_features.T @ H1 / eta1, H1.T @ H2 / eta2, H2.T @ H3 / eta3
    level1 = np.sum((Y - K_features @ W1 - b) * H1) - lam / 2 * np.sum(H1**2) + eta1 / 2 * np.sum(W1**2)
    level2 = (
        -np.sum((H1 @ W2) * H2) + 0.5 * np.sum(r["eigenvalues2"] * np.sum(H2**2, axis=0)) + eta2 / 2 * np.sum(W2**2)
    )
    level3 = (
        -np.sum((H2 @ W3) * H3) + 0.5 * np.sum(r["eigenvalues3"] * np.sum(H3**2, axis=0)) + eta3 / 2 * np.sum(W3**2)
    )
    return level1 + level2 + level3


def test_deep_levelwise_4_18_passes():
    d = _levelwise_problem(p=2, seed=1)
    X = d["X"]
    K1 = X @ X.T
    n, (eta1, eta2, eta3), lam = 25, (1.0, 0.5, 0.25), 0.1
    result = deep_levelwise_lssvm_kpca_kpca(K1, d["Y"], (eta1, eta2, eta3), lam, (3, 2), 3)
    assert [step for step, _ in result["history"]] == [
        "forward L1",
        "forward L2",
        "forward L3",
        "backward L2",
        "backward L1",
    ] * 3
    assert result["objective"] == result["history"][-1][1]
    # The last step is level 1, so its equation holds with the final H2.
    A1 = K1 / eta1 + result["H2"] @ result["H2"].T / eta2 + lam * np.eye(n)
    _assert_small(A1 @ result["H1"] + result["b"] - d["Y"], A1)
    _assert_small(result["H1"].sum(axis=0), result["H1"])
    _assert_unit_effective_columns(result["H2"], result["eigenvalues2"])
    _assert_small(result["H2"].sum(axis=0), result["H2"])
    assert result["objective"] == pytest.approx(_j_deep_4_13(X, d["Y"], result, eta1, eta2, eta3, lam), rel=1e-10)
    again = deep_levelwise_lssvm_kpca_kpca(K1, d["Y"], (eta1, eta2, eta3), lam, (3, 2), 3)
    for key in ("H1", "b", "H2", "H3", "eigenvalues2", "eigenvalues3"):
        np.testing.assert_array_equal(again[key], result[key])
    assert again["history"] == result["history"]


def test_deep_levelwise_4_11_each_level_solves_its_equation():
    d = _levelwise_problem(p=2, seed=2)
    n, (eta1, eta2, eta3), lam = 25, (1.0, 0.5, 0.25), 0.1
    H2_0, H3_0 = d["rng"].normal(size=(n, 2)), d["rng"].normal(size=(n, 2))
    r = deep_levelwise_kpca_kpca_lssvm(d["K1"], d["Y"], (eta1, eta2, eta3), lam, (3, 2), 1, "forward", H2_0, H3_0)
    A1 = d["K1"] / eta1 + H2_0 @ H2_0.T / eta2
    _assert_eigen_equation(A1, r["H1"], r["eigenvalues1"])
    _assert_unit_effective_columns(r["H1"], r["eigenvalues1"])
    np.testing.assert_allclose(r["eigenvalues1"], scipy.linalg.eigvalsh(A1)[::-1][:3], rtol=1e-10)
    A2 = r["H1"] @ r["H1"].T / eta2 + H3_0 @ H3_0.T / eta3
    _assert_eigen_equation(A2, r["H2"], r["eigenvalues2"])
    _assert_unit_effective_columns(r["H2"], r["eigenvalues2"])
    # Level 3 is the LS-SVM of eq 3.16 on the linear kernel of h^(2) with eta = eta3.
    H, b, _ = reference.lssvm_dual_solve(r["H2"] @ r["H2"].T, d["Y"], eta3, lam)
    np.testing.assert_allclose(r["H3"], H, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(r["b"], b, rtol=1e-10, atol=1e-12)


def _j_deep_4_6(K_features, Y, r, eta1, eta2, eta3, lam):
    """Eq 4.6 with explicit W1, W2, W3 of eq 4.8 and Lambda1, Lambda2 for lam1, lam2 (linear phi1, phi2, phi3)."""
    H1, H2, H3, b = r["H1"], r["H2"], r["H3"], r["b"]
    W1, W2, W3 = K_features.T @ H1 / eta1, H1.T @ H2 / eta2, H2.T @ H3 / eta3
    level1 = (
        -np.sum((K_features @ W1) * H1)
        + 0.5 * np.sum(r["eigenvalues1"] * np.sum(H1**2, axis=0))
        + eta1 / 2 * np.sum(W1**2)
    )
    level2 = (
        -np.sum((H1 @ W2) * H2) + 0.5 * np.sum(r["eigenvalues2"] * np.sum(H2**2, axis=0)) + eta2 / 2 * np.sum(W2**2)
    )
    level3 = np.sum((Y - H2 @ W3 - b) * H3) - lam / 2 * np.sum(H3**2) + eta3 / 2 * np.sum(W3**2)
    return level1 + level2 + level3


@pytest.mark.parametrize("phases", ["forward_backward", "forward"])
def test_deep_levelwise_4_11_passes(phases):
    d = _levelwise_problem(p=2, seed=3)
    X = d["X"]
    K1 = X @ X.T
    (eta1, eta2, eta3), lam = (1.0, 0.5, 0.25), 0.1
    result = deep_levelwise_kpca_kpca_lssvm(K1, d["Y"], (eta1, eta2, eta3), lam, (2, 3), 2, phases)
    steps = ["forward L1", "forward L2", "forward L3"] + (
        ["backward L2", "backward L1"] if phases == "forward_backward" else []
    )
    assert [step for step, _ in result["history"]] == steps * 2
    assert result["objective"] == result["history"][-1][1]
    assert result["objective"] == pytest.approx(_j_deep_4_6(X, d["Y"], result, eta1, eta2, eta3, lam), rel=1e-10)
    _assert_unit_effective_columns(result["H1"], result["eigenvalues1"])
    _assert_unit_effective_columns(result["H2"], result["eigenvalues2"])
    if phases == "forward_backward":
        A1 = K1 / eta1 + result["H2"] @ result["H2"].T / eta2
        _assert_eigen_equation(A1, result["H1"], result["eigenvalues1"])
    else:
        H, b, _ = reference.lssvm_dual_solve(result["H2"] @ result["H2"].T, d["Y"], eta3, lam)
        np.testing.assert_allclose(result["H3"], H, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(result["b"], b, rtol=1e-10, atol=1e-12)
    again = deep_levelwise_kpca_kpca_lssvm(K1, d["Y"], (eta1, eta2, eta3), lam, (2, 3), 2, phases)
    for key in ("H1", "H2", "H3", "b", "eigenvalues1", "eigenvalues2"):
        np.testing.assert_array_equal(again[key], result[key])


def _deep_valid_arguments():
    problem = _deep_problem(2)
    objective = dict(
        theta=problem["theta"],
        K1=problem["K1"],
        G1=problem["G1"],
        Y=problem["Y"],
        dims=problem["dims"],
        kernel2=DEEP_KERNELS["rbf"],
        kernel3=DEEP_KERNELS["poly"],
        etas=DEEP_ETAS,
        lam3=DEEP_LAM3,
        c_stab=DEEP_C_STAB,
        c0=DEEP_C0,
        regularizer="W",
        objective="full",
    )
    d = _levelwise_problem(n=8, p=1)
    levelwise = dict(K1=d["K1"], Y=d["Y"], etas=(1.0, 1.0, 1.0), lam=0.1, n_components=(2, 1), n_passes=1)
    return objective, levelwise


def _with_l_entry(theta, value):
    theta = theta.copy()
    theta[-1] = value
    return theta


# (argument named in the error, the bad value or a function of the valid arguments giving it)
DEEP_OBJECTIVE_BAD = [
    ("theta", lambda a: a["theta"][:-1]),
    ("theta", lambda a: _with_l_entry(a["theta"], 0.0)),
    ("theta", lambda a: _with_l_entry(a["theta"], -1.0)),
    ("theta", lambda a: _with_l_entry(a["theta"], np.nan)),
    ("theta", lambda a: a["theta"][None]),
    ("K1", lambda a: a["K1"][:, :4]),
    ("K1", lambda a: a["K1"][0]),
    ("G1", lambda a: a["G1"][:4]),
    ("Y", lambda a: a["Y"][:, :1]),
    ("Y", lambda a: a["Y"][:-1]),
    ("dims", (5, 2, 2)),
    ("dims", (5, 0, 2, 2)),
    ("dims", (5, 2.0, 2, 2)),
    ("dims", [5, [2, 2], 2]),
    ("kernel2", ("sigmoid", 0.5, 3, 1.0)),
    ("kernel2", "rbf"),
    ("kernel3", ("rbf", -0.5, 3, 1.0)),
    ("kernel3", ("poly", 0.5, -1, 1.0)),
    ("kernel3", ("poly", 0.5, 3, np.nan)),
    ("etas", (1.0, 0.0, 1.0)),
    ("etas", (1.0, 1.0)),
    ("etas", [1.0, [1.0], 1.0]),
    ("lam3", 0.0),
    ("lam3", np.inf),
    ("c_stab", -1.0),
    ("c0", -0.1),
    ("regularizer", "Tr"),
    ("objective", "b"),
    ("n_threads", 0),
]


@pytest.mark.parametrize("name, bad", DEEP_OBJECTIVE_BAD)
def test_deep_reduced_set_bad_input_names_the_argument(name, bad):
    arguments, _ = _deep_valid_arguments()
    arguments[name] = bad(arguments) if callable(bad) else bad
    with pytest.raises(ValueError, match=f"^{name}: "):
        deep_reduced_set_objective(**arguments)
    if name in ("theta", "K1", "dims", "kernel2", "kernel3", "etas", "n_threads"):
        forward_arguments = {key: arguments[key] for key in ("theta", "K1", "dims", "kernel2", "kernel3", "etas")}
        with pytest.raises(ValueError, match=f"^{name}: "):
            deep_reduced_set_forward(**forward_arguments, n_threads=arguments.get("n_threads"))


DEEP_LEVELWISE_BAD = [
    ("K1", lambda a: a["K1"][:, :7]),
    ("K1", lambda a: poisoned(a["K1"], np.nan)),
    ("Y", lambda a: a["Y"][:7]),
    ("etas", (1.0, -1.0, 1.0)),
    ("lam", 0.0),
    ("n_components", (0, 1)),
    ("n_components", (9, 1)),
    ("n_components", (2,)),
    ("n_passes", 0),
    ("n_passes", 1.5),
    ("phases", "backward"),
    ("H2", lambda a: np.zeros((8, 3))),
    ("H3", lambda a: np.zeros((7, 1))),
    ("fit_intercept", "yes"),
    ("n_threads", 0),
]


@pytest.mark.parametrize("function", [deep_levelwise_lssvm_kpca_kpca, deep_levelwise_kpca_kpca_lssvm])
@pytest.mark.parametrize("name, bad", DEEP_LEVELWISE_BAD)
def test_deep_levelwise_bad_input_names_the_argument(function, name, bad):
    _, arguments = _deep_valid_arguments()
    arguments[name] = bad(arguments) if callable(bad) else bad
    with pytest.raises(ValueError, match=f"^{name}: "):
        function(**arguments)


def test_deep_levelwise_component_bounds():
    _, arguments = _deep_valid_arguments()
    # 4.18: s3 <= s2, and with an intercept s2 <= N - 1 (the columns of H2 are orthogonal to 1).
    for bad in [(1, 2), (8, 1)]:
        with pytest.raises(ValueError, match="^n_components: "):
            deep_levelwise_lssvm_kpca_kpca(**(arguments | dict(n_components=bad)))
    deep_levelwise_lssvm_kpca_kpca(**(arguments | dict(n_components=(8, 1), fit_intercept=False)))
    deep_levelwise_kpca_kpca_lssvm(**(arguments | dict(n_components=(8, 8))))
