"""The public kernel API: validation, conversions, conventions."""

import numpy as np
import pytest
from sklearn.metrics.pairwise import pairwise_kernels

from rkm import reference
from rkm.kernels import (
    RBF,
    Cosine,
    Laplacian,
    Linear,
    Polynomial,
    Tanimoto,
    kernel_gradient,
    kernel_matrix,
    kernel_product,
)


def test_matches_sklearn_for_shared_kernels(rng):
    X, Y = rng.normal(size=(60, 5)), rng.normal(size=(20, 5))
    for name, params in [
        ("linear", {}),
        ("poly", dict(gamma=0.3, degree=2, coef0=0.5)),
        ("rbf", dict(gamma=0.4)),
        ("laplacian", dict(gamma=0.2)),
        ("cosine", {}),
    ]:
        expected = pairwise_kernels(X, Y, metric=name if name != "poly" else "polynomial", **params)
        np.testing.assert_allclose(kernel_matrix(X, Y, name, **params), expected, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize(
    "kernel", [Linear(), Polynomial(degree=2, gamma=0.5), RBF(gamma=0.7), Laplacian(gamma=0.1), Cosine(), Tanimoto()]
)
def test_kernel_objects_equal_named_kernels(rng, kernel):
    X = np.abs(rng.normal(size=(30, 4)))
    np.testing.assert_allclose(kernel(X), kernel_matrix(X, None, kernel.name, **kernel.params()))
    np.testing.assert_allclose(kernel_matrix(X, kernel=kernel), kernel(X))


def test_sigma_conventions(rng):
    X = rng.normal(size=(25, 3))
    d2 = ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)
    np.testing.assert_allclose(RBF.from_sigma(2.0, convention="suykens")(X), np.exp(-d2 / 4.0), rtol=1e-12)
    # Constr-DRKM: exp(-d^2 / (2 sigma^2)) with sigma^2 = 50.
    np.testing.assert_allclose(RBF.from_sigma(sigma2=50, convention="gaussian")(X), np.exp(-d2 / 100.0), rtol=1e-12)
    assert RBF.from_sigma(sigma2=50, convention="gaussian").gamma == pytest.approx(0.01)


@pytest.mark.parametrize(
    "args", [dict(), dict(sigma=1.0, sigma2=1.0), dict(sigma=-1.0), dict(sigma=1.0, convention="x")]
)
def test_sigma_conventions_validate(args):
    with pytest.raises(ValueError):
        RBF.from_sigma(**args)


def test_aliases_and_unknown_names(rng):
    X = rng.normal(size=(5, 2))
    np.testing.assert_allclose(kernel_matrix(X, kernel="gaussian"), kernel_matrix(X, kernel="rbf"))
    np.testing.assert_allclose(kernel_matrix(X, kernel="polynomial"), kernel_matrix(X, kernel="poly"))
    with pytest.raises(ValueError, match="kernel"):
        kernel_matrix(X, kernel="sigmoid")


def test_integer_and_noncontiguous_inputs_are_converted(rng):
    X = rng.integers(0, 5, size=(40, 6))
    K = kernel_matrix(X)
    assert K.dtype == np.float64
    np.testing.assert_allclose(K, reference.kernel_matrix(X.astype(float)), rtol=1e-12)
    Xf = np.asfortranarray(rng.normal(size=(40, 6)))
    np.testing.assert_allclose(kernel_matrix(Xf), reference.kernel_matrix(np.ascontiguousarray(Xf)), rtol=1e-12)
    Xs = rng.normal(size=(80, 12))[::2, ::2]
    np.testing.assert_allclose(kernel_matrix(Xs), reference.kernel_matrix(np.ascontiguousarray(Xs)), rtol=1e-12)


def test_float32_is_preserved_and_mixed_dtypes_upcast(rng):
    X = rng.normal(size=(10, 3)).astype(np.float32)
    assert kernel_matrix(X).dtype == np.float32
    assert kernel_matrix(X, X.astype(np.float64)).dtype == np.float64


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_input_is_rejected(rng, bad):
    X = rng.normal(size=(5, 2))
    X[2, 1] = bad
    with pytest.raises(ValueError, match="X"):
        kernel_matrix(X)
    with pytest.raises(ValueError, match="Y"):
        kernel_matrix(rng.normal(size=(5, 2)), X)


def test_shape_errors(rng):
    with pytest.raises(ValueError, match="2D array"):
        kernel_matrix(np.arange(4.0))
    with pytest.raises(ValueError):
        kernel_matrix(np.empty((0, 3)))
    with pytest.raises(ValueError, match="features"):
        kernel_matrix(rng.normal(size=(4, 3)), rng.normal(size=(4, 2)))


@pytest.mark.parametrize("gamma", [0.0, -1.0, np.nan, np.inf, "1"])
def test_invalid_gamma(rng, gamma):
    with pytest.raises(ValueError, match="gamma"):
        kernel_matrix(rng.normal(size=(4, 2)), kernel="rbf", gamma=gamma)


def test_invalid_polynomial_parameters(rng):
    X = rng.normal(size=(4, 2))
    with pytest.raises(ValueError, match="degree"):
        kernel_matrix(X, kernel="poly", degree=-1)
    with pytest.raises(ValueError, match="coef0"):
        kernel_matrix(X, kernel="poly", coef0=np.nan)


@pytest.mark.parametrize("n_threads", [0, 1.5, "2", True])
def test_invalid_n_threads(rng, n_threads):
    with pytest.raises(ValueError, match="n_threads"):
        kernel_matrix(rng.normal(size=(4, 2)), n_threads=n_threads)


def test_matrix_too_large_for_memory_fails_before_allocating():
    # A 10^6 x 10^6 float64 matrix needs 7.3 TiB; the check must fire without touching that memory.
    X = np.zeros((1_000_000, 1))
    with pytest.raises(MemoryError, match="GiB"):
        kernel_matrix(X)


def test_tanimoto_on_binary_fingerprints(rng):
    X = (rng.random(size=(30, 64)) < 0.2).astype(float)
    K = kernel_matrix(X, kernel="tanimoto")
    inter = X @ X.T
    counts = X.sum(1)
    expected = np.where(
        counts[:, None] + counts[None, :] - inter > 0,
        inter / np.maximum(counts[:, None] + counts[None, :] - inter, 1),
        0.0,
    )
    np.testing.assert_allclose(K, expected, rtol=1e-12)
    assert np.all(np.diag(K)[counts > 0] == 1.0)


def test_tanimoto_of_empty_fingerprints_is_zero_as_in_rdkit():
    # RDKit's TanimotoSimilarity of two all-zero bit vectors is 0: they share no bit.
    X = np.array([[0.0, 0.0, 0.0], [1.0, 0.0, 1.0], [0.0, 0.0, 0.0]])
    K = kernel_matrix(X, kernel="tanimoto")
    np.testing.assert_array_equal(K, [[0.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 0.0]])
    np.testing.assert_array_equal(kernel_matrix(X[:1], X, kernel="tanimoto"), [[0.0, 0.0, 0.0]])


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_non_integer_degree_on_a_negative_base_is_rejected(rng, dtype):
    X = rng.normal(size=(30, 4)).astype(dtype)
    with pytest.raises(ValueError, match=r"degree: a non-integer degree \(2\.5\) needs gamma x\^T y \+ coef0 >= 0"):
        kernel_matrix(X, kernel="poly", degree=2.5)
    positive = np.abs(X)  # every base is positive: a non-integer degree is fine
    np.testing.assert_allclose(
        kernel_matrix(positive, kernel="poly", degree=2.5, gamma=0.5),
        (0.5 * positive @ positive.T + 1.0) ** 2.5,
        rtol=1e-5,
    )


@pytest.mark.parametrize(
    "kernel,scale,dtype",
    [
        ("linear", 1e160, np.float64),
        ("rbf", 1e200, np.float64),
        ("poly", 1e100, np.float64),
        ("linear", 1e20, np.float32),
        ("cosine", 1e200, np.float64),
    ],
)
def test_overflowing_kernels_are_rejected(rng, kernel, scale, dtype):
    X = (rng.normal(size=(30, 4)) * scale).astype(dtype)
    with pytest.raises(ValueError, match=f"X: the {kernel} kernel overflows {np.dtype(dtype).name}"):
        kernel_matrix(X, kernel=kernel)
    with pytest.raises(ValueError, match=f"X: the {kernel} kernel overflows"):
        kernel_matrix(X, X[:5], kernel=kernel)


def test_overflowing_kernel_gradient_is_rejected(rng):
    from rkm.kernels import kernel_gradient

    X = rng.normal(size=(6, 3)) * 1e160
    with pytest.raises(ValueError, match="X: the linear kernel gradient overflows"):
        kernel_gradient(X, X, np.full((6, 6), 1e160), kernel="linear")


def test_unknown_kernel_error_lists_the_aliases():
    with pytest.raises(ValueError, match="polynomial = poly, gaussian = rbf"):
        kernel_matrix(np.ones((2, 2)), kernel="sigmoid")
    np.testing.assert_array_equal(
        kernel_matrix(np.eye(2), kernel="gaussian", gamma=1.0), kernel_matrix(np.eye(2), kernel="rbf", gamma=1.0)
    )


def test_kernel_gradient_validates_and_converts(rng):
    from rkm.kernels import kernel_gradient

    X, Y, W = rng.normal(size=(5, 3)), rng.normal(size=(4, 3)), rng.normal(size=(5, 4))
    np.testing.assert_allclose(
        kernel_gradient(X, Y, W, RBF(gamma=0.5)), reference.kernel_gradient(X, Y, W, "rbf", 0.5), rtol=1e-10
    )
    assert kernel_gradient(X.astype(np.float32), Y.astype(np.float32), W.astype(np.float32)).dtype == np.float32
    with pytest.raises(ValueError, match="W"):
        kernel_gradient(X, Y, W.T)
    with pytest.raises(ValueError, match="features"):
        kernel_gradient(X, Y[:, :2], W)
    with pytest.raises(ValueError, match="gamma"):
        kernel_gradient(X, Y, W, gamma=-1.0)


def test_cosine_of_large_vectors_whose_norm_product_overflows(rng):
    X = np.array([[1e100, 2e100], [3e100, 1e100]])
    expected = reference.kernel_matrix(X, X, kernel="cosine")
    np.testing.assert_allclose(kernel_matrix(X, X.copy(), kernel="cosine"), expected, rtol=1e-12)
    assert abs(expected[0, 1] - 5 / np.sqrt(50)) < 1e-12


def test_poly_gradient_edge_cases(rng):
    from rkm.kernels import kernel_gradient

    X = 3 * rng.normal(size=(8, 3))  # some gamma x^T y + 1 < 0
    with pytest.raises(ValueError, match="degree: a non-integer degree"):
        kernel_gradient(X, X, np.ones((8, 8)), kernel="poly", degree=2.5)
    # degree 0: a constant kernel, whose gradient is 0 even where gamma x^T y + coef0 = 0
    G = kernel_gradient(np.eye(2), np.eye(2), np.ones((2, 2)), kernel="poly", gamma=1.0, degree=0.0, coef0=0.0)
    np.testing.assert_array_equal(G, np.zeros((2, 2)))


# ------------------------------------------------------------------ sparse input and callable kernels

_NAMED = [
    ("linear", {}),
    ("poly", dict(gamma=0.3, degree=2, coef0=0.5)),
    ("rbf", dict(gamma=0.4)),
    ("laplacian", dict(gamma=0.2)),
    ("cosine", {}),
    ("tanimoto", {}),
]


def _sparse_data(rng, n, d=12, density=0.3):
    X = rng.random((n, d)) * (rng.random((n, d)) < density)
    X[0] = 0.0  # an empty row: cosine and tanimoto give 0 there
    return X


@pytest.mark.parametrize("name, params", _NAMED)
@pytest.mark.parametrize("fmt", ["csr", "csc"])
def test_sparse_input_equals_dense(rng, name, params, fmt):
    import scipy.sparse as sp

    X, Y = _sparse_data(rng, 40), _sparse_data(rng, 15)
    Xs, Ys = sp.csr_matrix(X).asformat(fmt), sp.csr_array(Y).asformat(fmt)
    for got, expected in [
        (kernel_matrix(Xs, None, name, **params), kernel_matrix(X, None, name, **params)),
        (kernel_matrix(Xs, Ys, name, **params), kernel_matrix(X, Y, name, **params)),
        (kernel_matrix(Xs, Y, name, **params), kernel_matrix(X, Y, name, **params)),  # mixed sparse and dense
        (kernel_matrix(X, Ys, name, **params), kernel_matrix(X, Y, name, **params)),
    ]:
        assert isinstance(got, np.ndarray) and got.shape == expected.shape
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-13)


def test_sparse_tanimoto_on_binary_fingerprints_matches_the_definition(rng):
    import scipy.sparse as sp

    fp = (rng.random((50, 256)) < 0.05).astype(float)
    fp[0] = 0.0
    common = fp @ fp.T
    counts = fp.sum(axis=1)
    union = counts[:, None] + counts[None, :] - common
    expected = np.divide(common, union, out=np.zeros_like(common), where=union > 0)
    K = kernel_matrix(sp.csr_matrix(fp), kernel="tanimoto")
    np.testing.assert_allclose(K, expected, rtol=1e-14, atol=0)
    assert K[0, 0] == 0.0 and np.all(np.diag(K)[1:] == 1.0)


def test_sparse_float32_is_preserved_and_rbf_diagonal_is_one(rng):
    import scipy.sparse as sp

    X = sp.csr_matrix(_sparse_data(rng, 20).astype(np.float32))
    K = kernel_matrix(X, kernel="rbf", gamma=3.0)
    assert K.dtype == np.float32
    assert np.all(np.diag(K) == 1.0)


def test_sparse_input_is_validated(rng):
    import scipy.sparse as sp

    X = sp.csr_matrix(_sparse_data(rng, 10))
    X.data[0] = np.nan
    with pytest.raises(ValueError, match="X"):
        kernel_matrix(X)
    with pytest.raises(ValueError, match="Y: has 3 features"):
        kernel_matrix(sp.csr_matrix(_sparse_data(rng, 10)), sp.csr_matrix(np.ones((2, 3))))
    with pytest.raises(ValueError, match="degree"):
        kernel_matrix(
            sp.csr_matrix(np.array([[1.0, 0.0], [-1.0, 0.0]])), kernel="poly", degree=1.5, coef0=0.0, gamma=1.0
        )
    with pytest.raises(ValueError, match="overflows"):
        kernel_matrix(sp.csr_matrix(np.full((2, 2), 1e200)), kernel="linear")
    with pytest.raises(ValueError, match="kernel"):
        kernel_matrix(sp.csr_matrix(np.eye(3)), kernel="sigmoid")


def test_callable_kernel_is_called_once_with_the_gram_convention(rng):
    X, Y = rng.normal(size=(30, 4)), rng.normal(size=(12, 4))
    calls = []

    def k(A, B):
        calls.append((A.shape, B.shape))
        return pairwise_kernels(A, B, metric="rbf", gamma=0.4)

    np.testing.assert_allclose(kernel_matrix(X, Y, kernel=k), kernel_matrix(X, Y, "rbf", gamma=0.4), rtol=1e-13)
    np.testing.assert_allclose(kernel_matrix(X, kernel=k), kernel_matrix(X, None, "rbf", gamma=0.4), rtol=1e-13)
    assert calls == [((30, 4), (12, 4)), ((30, 4), (30, 4))]


def test_callable_kernel_receives_sparse_input_and_its_result_is_copied(rng):
    import scipy.sparse as sp

    X = sp.csr_matrix(_sparse_data(rng, 8))
    cached = np.eye(8)
    seen = []

    def k(A, B):
        seen.append(sp.issparse(A) and sp.issparse(B))
        return cached

    K = kernel_matrix(X, kernel=k)
    K[:] = 5.0
    assert seen == [True] and np.all(cached == np.eye(8))


@pytest.mark.parametrize(
    "bad, match",
    [
        (lambda A, B: np.ones((2, 2)), "shape"),
        (lambda A, B: np.ones(A.shape[0])[:, None] * np.ones(B.shape[0]) * np.nan, "NaN or infinite"),
        (lambda A, B: "gram", "numeric"),
        (lambda A, B: np.ones((A.shape[0], B.shape[0], 1)), "shape"),
    ],
)
def test_callable_kernel_result_is_checked(rng, bad, match):
    with pytest.raises(ValueError, match=f"kernel: .*{match}"):
        kernel_matrix(rng.normal(size=(5, 2)), kernel=bad)


def test_kernel_product_with_callable_and_sparse(rng, monkeypatch):
    import scipy.sparse as sp

    import rkm.kernels

    X, Y = _sparse_data(rng, 37), _sparse_data(rng, 23)
    B = rng.normal(size=(23, 3))
    expected = kernel_matrix(X, Y, "rbf", gamma=0.5) @ B
    monkeypatch.setattr(rkm.kernels, "_PRODUCT_BLOCK_BYTES", 8 * 23 * 5)  # several row blocks
    np.testing.assert_allclose(kernel_product(sp.csr_matrix(X), Y, B, "rbf", gamma=0.5), expected, rtol=1e-12)
    k = lambda A, C: pairwise_kernels(A, C, metric="rbf", gamma=0.5)  # noqa: E731
    np.testing.assert_allclose(kernel_product(X, Y, B, k), expected, rtol=1e-12)
    with pytest.raises(ValueError, match="B: must have one row per sample"):
        kernel_product(X, Y, B[:5], k)


def test_kernel_gradient_refuses_callable_and_sparse(rng):
    import scipy.sparse as sp

    X, W = rng.normal(size=(4, 2)), rng.normal(size=(4, 4))
    with pytest.raises(ValueError, match="kernel: a callable kernel has no gradient"):
        kernel_gradient(X, X, W, kernel=lambda A, B: A @ B.T)
    with pytest.raises(ValueError, match="X: sparse input"):
        kernel_gradient(sp.csr_matrix(X), X, W)


@pytest.mark.parametrize("name", ["laplacian", "rbf", "tanimoto"])
def test_sparse_input_with_64_bit_indices(rng, name):
    import scipy.sparse as sp

    X = _sparse_data(rng, 30)
    for fmt in ("csr", "csc"):
        Xs = sp.csr_matrix(X).asformat(fmt)
        Xs.indices, Xs.indptr = Xs.indices.astype(np.int64), Xs.indptr.astype(np.int64)
        np.testing.assert_allclose(kernel_matrix(Xs, Xs, name), kernel_matrix(X, X, name), rtol=1e-12, atol=1e-13)
