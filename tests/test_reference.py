"""Check the NumPy reference implementations against third-party code."""

import numpy as np
import pytest
from scipy.spatial.distance import cdist
from sklearn.metrics.pairwise import pairwise_kernels
from sklearn.preprocessing import KernelCenterer

from rkm import reference

SKLEARN_KERNELS = ["linear", "poly", "rbf", "laplacian", "cosine"]
# (n_x, n_y, n_features); n_y = None means Y is omitted.
SHAPES = [(1, None, 1), (1, 1, 1), (7, None, 1), (1, 5, 3), (6, 4, 1),
          (20, 13, 5), (30, None, 8)]


def _rng(seed=0):
    return np.random.default_rng(seed)


def _data(n_x, n_y, d, dtype, seed=0):
    rng = _rng(seed)
    X = rng.normal(size=(n_x, d)).astype(dtype)
    Y = None if n_y is None else rng.normal(size=(n_y, d)).astype(dtype)
    return X, Y


def _tol(dtype):
    return dict(rtol=1e-4, atol=1e-5) if dtype == np.float32 \
        else dict(rtol=1e-10, atol=1e-12)


def _random_symmetric(n, seed=0, dtype=np.float64):
    A = _rng(seed).normal(size=(n, n))
    return ((A + A.T) / 2).astype(dtype)


# --------------------------------------------------------------------------
# kernel_matrix
# --------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("kernel", SKLEARN_KERNELS)
def test_kernel_matrix_matches_sklearn(kernel, shape, dtype):
    X, Y = _data(*shape, dtype)
    K = reference.kernel_matrix(X, Y, kernel=kernel)
    expected = pairwise_kernels(X, Y, metric=kernel)
    n_y = shape[0] if shape[1] is None else shape[1]
    assert K.shape == (shape[0], n_y)
    assert K.dtype == dtype
    np.testing.assert_allclose(K, expected, **_tol(dtype))


@pytest.mark.parametrize("kernel, params", [
    ("poly", dict(gamma=0.3, degree=2, coef0=0.5)),
    ("poly", dict(gamma=1.0, degree=5, coef0=0.0)),
    ("rbf", dict(gamma=2.5)),
    ("laplacian", dict(gamma=0.7)),
])
def test_kernel_matrix_parameters_match_sklearn(kernel, params):
    X, Y = _data(15, 9, 4, np.float64)
    K = reference.kernel_matrix(X, Y, kernel=kernel, **params)
    np.testing.assert_allclose(K, pairwise_kernels(X, Y, metric=kernel, **params),
                               rtol=1e-10, atol=1e-12)


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
            K[i, j] = 1.0 if denom == 0.0 else dot / denom
    return K


@pytest.mark.parametrize("fingerprint", ["binary", "count"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_tanimoto_matches_double_loop(fingerprint, dtype):
    rng = _rng(3)
    if fingerprint == "binary":
        X, Y = rng.random((12, 32)) < 0.3, rng.random((7, 32)) < 0.3
    else:
        X, Y = rng.poisson(1.0, (12, 32)), rng.poisson(1.0, (7, 32))
    X, Y = X.astype(dtype), Y.astype(dtype)
    for Y_arg, Y_ref in [(Y, Y), (None, X)]:
        K = reference.kernel_matrix(X, Y_arg, kernel="tanimoto")
        assert K.dtype == dtype
        np.testing.assert_allclose(K, _tanimoto_loop(X, Y_ref), **_tol(dtype))


def test_tanimoto_zero_vectors():
    X = np.array([[0.0, 0.0, 0.0], [1.0, 0.0, 1.0]])
    K = reference.kernel_matrix(X, kernel="tanimoto")
    np.testing.assert_array_equal(K, [[1.0, 0.0], [0.0, 1.0]])


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
def test_centering_matches_kernel_centerer(n_train, n_test, dtype):
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
    tol = _tol(dtype)
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
    Q, _ = np.linalg.qr(_rng(4).normal(size=(6, 6)))
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
    return _rng(9).normal(size=(n, b)).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n, s", [(1, 1), (5, 5), (30, 1), (30, 4)])
def test_top_eigsh_matches_eigh(n, s, dtype):
    A = _random_symmetric(n, seed=n + s, dtype=dtype)
    w, V, residuals, n_iter, converged = reference.top_eigsh(
        A, s, _start(n, s + 2, dtype))
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
    Q, _ = np.linalg.qr(_rng(5).normal(size=(8, 8)))
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
