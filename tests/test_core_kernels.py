"""Kernel matrices, kernel products and kernel gradients of the compiled core against rkm.reference; the kernel
table the core and the Python layer share."""

import numpy as np
import pytest
from conftest import kernel_data

from rkm import _core, reference
from rkm.kernels import ALIASES, KERNEL_NAMES, names_with
from rkm.kernels import KERNELS as KERNEL_TABLE

KERNELS = list(KERNEL_NAMES)
SHAPES = [(1, 1), (1, 5), (7, 1), (33, 3), (300, 17), (701, 64)]


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("shape", SHAPES)
def test_kernel_matrix_symmetric_matches_reference(rng, dtype, tol, kernel, shape):
    X = kernel_data(rng, shape, dtype, kernel)
    gamma = 0.3 if kernel != "poly" else 0.1
    K = _core.kernel_matrix(X, None, kernel, gamma, 3, 1.0)
    expected = reference.kernel_matrix(X, None, kernel, gamma, 3, 1.0)
    assert K.dtype == dtype and K.shape == (shape[0], shape[0])
    np.testing.assert_allclose(K, expected, **tol)
    assert np.array_equal(K, K.T)


@pytest.mark.parametrize("kernel", KERNELS)
def test_kernel_matrix_cross_matches_reference(rng, dtype, tol, kernel):
    X, Y = kernel_data(rng, (120, 9), dtype, kernel), kernel_data(rng, (45, 9), dtype, kernel)
    K = _core.kernel_matrix(X, Y, kernel)
    np.testing.assert_allclose(K, reference.kernel_matrix(X, Y, kernel), **tol)


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("n", [1, 5, 700])  # 700 rows take two bands
def test_kernel_matrix_lower_only_writes_the_lower_triangle(rng, dtype, tol, kernel, n):
    X = kernel_data(rng, (n, 6), dtype, kernel)
    K = _core.kernel_matrix(X, None, kernel, 0.2, 3, 1.0, None, lower_only=True)
    expected = reference.kernel_matrix(X, None, kernel, 0.2, 3, 1.0, None, lower_only=True)
    np.testing.assert_allclose(np.tril(K), np.tril(expected), **tol)


def test_the_kernel_table_lists_the_cores_kernels():
    assert _core.kernel_names() == list(KERNEL_NAMES) == list(KERNEL_TABLE)
    X = np.ones((2, 3))
    for alias, name in ALIASES.items():
        np.testing.assert_array_equal(_core.kernel_matrix(X, None, alias, 0.5), _core.kernel_matrix(X, None, name, 0.5))


@pytest.mark.parametrize(
    "capability",
    ["has_gamma", "nystroem", "fourier_features", "level_derivatives", "layer_derivatives", "density", "distance"],
)
def test_every_capability_names_kernels_of_the_table(capability):
    assert set(names_with(capability)) <= set(KERNEL_NAMES)


def test_an_unknown_kernel_names_itself_and_the_valid_ones():
    with pytest.raises(ValueError, match="^kernel: unknown kernel 'sigmoid'; choose one of " + ", ".join(KERNEL_NAMES)):
        _core.kernel_matrix(np.ones((2, 2)), None, "sigmoid")
    # Every binding takes kernel names through the same parser.
    with pytest.raises(ValueError, match="^level_kernels: unknown kernel 'sigmoid'; choose one of"):
        _core.ConstrainedDeepObjective(np.eye(3), [("sigmoid", 1.0, 3.0, 1.0)], [1, 1], [1.0, 1.0], True)
    with pytest.raises(ValueError, match="^kernels: unknown kernel 'sigmoid'; choose one of"):
        _core.kae_loss_and_grad(np.ones((3, 2)), [np.ones((3, 2))], [("sigmoid", 1.0, 3.0, 1.0)], None, [0.1])


@pytest.mark.parametrize("kernel", sorted(set(KERNEL_NAMES) - set(names_with("level_derivatives"))))
def test_level_kernels_without_derivatives_are_refused(kernel):
    with pytest.raises(ValueError, match=f"^level_kernels: the {kernel} kernel"):
        _core.ConstrainedDeepObjective(np.eye(3), [(kernel, 1.0, 3.0, 1.0)], [1, 1], [1.0, 1.0], True)


@pytest.mark.parametrize("kernel", sorted(set(KERNEL_NAMES) - set(names_with("layer_derivatives"))))
def test_layer_kernels_without_derivatives_are_refused(kernel):
    with pytest.raises(ValueError, match=f"^kernels: the {kernel} kernel"):
        _core.kae_loss_and_grad(np.ones((3, 2)), [np.ones((3, 2))], [(kernel, 1.0, 3.0, 1.0)], None, [0.1])


def test_kernel_matrix_spans_several_bands(rng):
    # Large enough that the banded build runs several GEMM bands and column chunks.
    X = rng.normal(size=(2600, 8))
    np.testing.assert_allclose(
        _core.kernel_matrix(X, None, "rbf", 0.2), reference.kernel_matrix(X, None, "rbf", 0.2), rtol=1e-12, atol=1e-12
    )


def test_kernel_matrix_default_gamma_is_inverse_features(rng):
    X = rng.normal(size=(20, 4))
    np.testing.assert_allclose(_core.kernel_matrix(X), reference.kernel_matrix(X, None, "rbf", 0.25), rtol=1e-12)


def test_rbf_float32_keeps_precision_far_from_origin(rng):
    # ||x||^2 + ||y||^2 - 2 x^T y cancels badly for data far from the origin unless it is shifted.
    X = (1000.0 + rng.normal(size=(200, 5))).astype(np.float32)
    exact = reference.kernel_matrix(X.astype(np.float64), None, "rbf", 0.5)
    np.testing.assert_allclose(_core.kernel_matrix(X, None, "rbf", 0.5), exact, atol=1e-5)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("kernel,gamma,power", [("laplacian", 0.47, 1), ("rbf", 2.94e-4, 2)])
def test_exponential_kernels_are_within_an_ulp_of_numpy_over_the_whole_range(isa, threads, kernel, gamma, power):
    # Integer points on a line give exact distances, so these kernels are exp of exactly the arguments
    # NumPy sees, from 0 through the subnormal results (below about -708) to 0 (below about -745).
    X = np.arange(1600.0)[:, None]
    expected = np.exp(-gamma * np.abs(X - X.T) ** power)
    assert expected[-1, 0] == 0 and np.any((expected > 0) & (expected < np.finfo(float).tiny))
    np.testing.assert_array_max_ulp(_core.kernel_matrix(X, None, kernel, gamma, 3, 1.0, threads), expected, maxulp=1)
    np.testing.assert_array_max_ulp(
        _core.kernel_matrix(X[:7], X, kernel, gamma, 3, 1.0, threads), expected[:7], maxulp=1
    )


@pytest.mark.parametrize("d", [3, 64, 784])
def test_a_float32_rbf_matrix_stays_within_float32_rounding_of_the_exact_one(d, rng):
    # float32 rbf inner products run in SGEMM: the result must stay within a few float32 ulps of the float64
    # kernel of the same data, away from the origin and with Y too.
    X = (5.0 + rng.normal(size=(300, d))).astype(np.float32)
    Y = (5.0 + rng.normal(size=(70, d))).astype(np.float32)
    gamma = 1.0 / (2 * d)
    bound = 4 * np.finfo(np.float32).eps
    exact = _core.kernel_matrix(X.astype(np.float64), None, "rbf", gamma)
    np.testing.assert_allclose(_core.kernel_matrix(X, None, "rbf", gamma), exact, rtol=0, atol=bound)
    exact = _core.kernel_matrix(X.astype(np.float64), Y.astype(np.float64), "rbf", gamma)
    np.testing.assert_allclose(_core.kernel_matrix(X, Y, "rbf", gamma), exact, rtol=0, atol=bound)
    assert np.all(np.diag(_core.kernel_matrix(X, None, "rbf", gamma)) == 1)


def test_the_core_exp_and_cos_match_numpy_elementwise(isa):
    # Every path of the vectorized code: whole vectors and a tail, overflow, underflow through the subnormal
    # range, NaN and infinities; cos beyond its reduction's range goes to std::cos.
    x = np.concatenate([np.linspace(-800.0, 800.0, 20_001), [np.nan, np.inf, -np.inf, 0.0, -0.0]])
    with np.errstate(over="ignore"):
        np.testing.assert_array_max_ulp(_core.vector_exp(x), np.exp(x), maxulp=1)
    y = np.concatenate([np.linspace(-2e5, 2e5, 20_003), [np.nan, np.inf, -np.inf]])
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_max_ulp(_core.vector_cos(y), np.cos(y), maxulp=2)
    assert _core.vector_exp(np.ones((3, 4))).shape == (3, 4)


def test_the_avx512_and_avx2_transcendentals_agree_bit_for_bit(rng):
    # One algorithm, two vector widths: the same operations on every lane, so the same bits.
    if _core.config()["simd_isa"] != "avx512":
        pytest.skip("this CPU has no AVX-512")
    x = np.concatenate([rng.uniform(-800, 800, 10_001), [np.nan, np.inf, -np.inf, -750.0, 710.0]])
    y = rng.uniform(-2e5, 2e5, 10_003)
    X = rng.normal(size=(301, 17))
    results = {}
    try:
        for level in ("avx512", "avx2"):
            _core.set_simd_isa(level)
            with np.errstate(over="ignore", invalid="ignore"):
                results[level] = (_core.vector_exp(x), _core.vector_cos(y), _core.kernel_matrix(X, None, "rbf", 0.1))
    finally:
        _core.set_simd_isa("auto")
    for wide, narrow in zip(results["avx512"], results["avx2"]):
        np.testing.assert_array_equal(wide, narrow)


def test_kernel_matrix_rejects_unknown_kernel(rng):
    with pytest.raises(ValueError, match="kernel"):
        _core.kernel_matrix(rng.normal(size=(3, 2)), None, "sigmoid")


def test_kernel_matrix_rejects_mismatched_features(rng):
    with pytest.raises(ValueError, match="features"):
        _core.kernel_matrix(rng.normal(size=(3, 2)), rng.normal(size=(3, 4)))


def test_core_rejects_non_finite_inputs(rng):
    X = rng.normal(size=(6, 3))
    X[2, 1] = np.nan
    with pytest.raises(ValueError, match="X: contains NaN"):
        _core.kernel_matrix(X)
    with pytest.raises(ValueError, match="Y: contains NaN"):
        _core.kernel_matrix(np.ones((2, 3)), X)


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("shape", [(1, 1, 1), (9, 4, 3), (150, 70, 6)])
def test_kernel_gradient_matches_reference(rng, dtype, kernel, shape):
    n, m, d = shape
    X, Y = kernel_data(rng, (n, d), dtype, kernel), kernel_data(rng, (m, d), dtype, kernel)
    W = rng.normal(size=(n, m)).astype(dtype)
    gamma = 0.3 if kernel != "poly" else 0.1
    G = _core.kernel_gradient(X, Y, W, kernel, gamma, 3, 1.0)
    expected = reference.kernel_gradient(X, Y, W, kernel, gamma, 3, 1.0)
    atol = 1e-10 if dtype == np.float64 else 1e-3
    assert G.dtype == dtype and G.shape == (n, d)
    np.testing.assert_allclose(G, expected, rtol=1e-5, atol=atol * max(1.0, np.abs(expected).max()))


@pytest.mark.parametrize("kernel", KERNELS)
def test_kernel_gradient_reference_matches_finite_differences(rng, kernel):
    X, Y = kernel_data(rng, (4, 3), np.float64, kernel) + 0.1, kernel_data(rng, (6, 3), np.float64, kernel)
    W = rng.normal(size=(4, 6))
    gamma = 0.3 if kernel != "poly" else 0.1
    G = reference.kernel_gradient(X, Y, W, kernel, gamma)
    step = 1e-6

    def value(Z, i):
        return np.sum(W[i] * reference.kernel_matrix(Z[i : i + 1], Y, kernel, gamma)[0])

    for i in range(4):
        for f in range(3):
            plus, minus = X.copy(), X.copy()
            plus[i, f] += step
            minus[i, f] -= step
            np.testing.assert_allclose(G[i, f], (value(plus, i) - value(minus, i)) / (2 * step), rtol=1e-5, atol=1e-7)


# (n_x, n_y, n_features, b); n_y = None means Y is None. 1100 rows take several tiles of the symmetric product.
PRODUCT_SHAPES = [
    (1, None, 1, 1),
    (1, 3, 2, 1),
    (5, None, 1, 1),
    (7, 4, 3, 2),
    (300, None, 17, 8),
    (257, 700, 9, 5),
    (1100, None, 6, 3),
]


def _product_tolerance(tol, K, B):
    # Entries of K @ B may cancel: the absolute tolerance scales with |K| @ |B|.
    scale = (np.abs(K) @ np.abs(B.astype(np.float64))).max()
    return dict(rtol=tol["rtol"], atol=max(tol["atol"], tol["rtol"]) * scale)


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("shape", PRODUCT_SHAPES)
def test_kernel_product_matches_reference(rng, dtype, tol, kernel, shape):
    n_x, n_y, d, b = shape
    X = kernel_data(rng, (n_x, d), dtype, kernel)
    Y = None if n_y is None else kernel_data(rng, (n_y, d), dtype, kernel)
    B = rng.normal(size=(n_x if n_y is None else n_y, b)).astype(dtype)
    gamma = 0.3 if kernel != "poly" else 0.1
    got = _core.kernel_product(X, Y, B, kernel, gamma, 3.0, 1.0)
    expected = reference.kernel_product(X, Y, B, kernel, gamma, 3.0, 1.0)
    K = reference.kernel_matrix(X.astype(np.float64), None if Y is None else Y.astype(np.float64), kernel, gamma)
    assert got.dtype == dtype and got.shape == (n_x, b)
    np.testing.assert_allclose(got, expected, **_product_tolerance(tol, K, B))


@pytest.mark.parametrize("kernel", ["rbf", "tanimoto"])
def test_kernel_product_of_x_with_itself_equals_the_cross_product(rng, dtype, tol, kernel):
    X, B = kernel_data(rng, (400, 5), dtype, kernel), rng.normal(size=(400, 3)).astype(dtype)
    K = reference.kernel_matrix(X.astype(np.float64), None, kernel, 0.3)
    np.testing.assert_allclose(
        _core.kernel_product(X, None, B, kernel, 0.3),
        _core.kernel_product(X, X.copy(), B, kernel, 0.3),
        **_product_tolerance(tol, K, B),
    )


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("symmetric", [True, False])
def test_kernel_product_thread_counts_agree_and_repeat(rng, threads, symmetric):
    X, B = rng.normal(size=(900, 7)), rng.normal(size=(900, 4))
    Y = None if symmetric else X[::-1].copy()
    one = _core.kernel_product(X, Y, B, "laplacian", 0.2, n_threads=1)
    many = _core.kernel_product(X, Y, B, "laplacian", 0.2, n_threads=threads)
    np.testing.assert_allclose(many, one, rtol=1e-12, atol=1e-12 * np.abs(one).max())
    assert np.array_equal(many, _core.kernel_product(X, Y, B, "laplacian", 0.2, n_threads=threads))


def test_kernel_product_default_gamma_is_inverse_features(rng):
    X, B = rng.normal(size=(30, 4)), rng.normal(size=(30, 2))
    np.testing.assert_allclose(
        _core.kernel_product(X, None, B), reference.kernel_product(X, None, B, "rbf", 0.25), rtol=1e-12, atol=1e-12
    )


@pytest.mark.parametrize(
    "args, match",
    [
        (lambda X, B: (X, None, B[:5]), "B"),
        (lambda X, B: (X, X[:4], B), "B"),
        (lambda X, B: (X, X[:, :2].copy(), B), "features"),
        (lambda X, B: (X, None, B, "sigmoid"), "kernel"),
    ],
)
def test_kernel_product_rejects_bad_arguments(rng, args, match):
    X, B = rng.normal(size=(6, 3)), rng.normal(size=(6, 2))
    with pytest.raises(ValueError, match=match):
        _core.kernel_product(*args(X, B))
