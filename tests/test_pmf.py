"""rkm.shallow.pmf.KernelPMF: the normalization of Suykens 2017 eq. 3.35, pmf and density estimates on data with a known
distribution, scikit-learn's KernelDensity, streaming and bad input."""

import tracemalloc

import numpy as np
import pytest
from scipy.special import logsumexp
from scipy.stats import norm
from sklearn.exceptions import NotFittedError
from sklearn.neighbors import KernelDensity

from rkm.kernels import RBF, Linear, Polynomial, kernel_matrix, names_with
from rkm.shallow.pmf import KernelPMF

SUPPORT = np.arange(5.0)[:, None]
TRUE_PMF = np.array([0.1, 0.2, 0.4, 0.2, 0.1])


def _mixture(rng, n):
    """Samples of 0.3 N(-2, 0.5^2) + 0.7 N(1, 1)."""
    first = rng.random(n) < 0.3
    return np.where(first, rng.normal(-2.0, 0.5, n), rng.normal(1.0, 1.0, n))[:, None]


def _mixture_density(x):
    return 0.3 * norm.pdf(x, -2.0, 0.5) + 0.7 * norm.pdf(x, 1.0, 1.0)


# ---------------------------------------------------------------- eq. 3.35


@pytest.mark.parametrize("kernel", names_with("density"))
def test_training_pmf_is_eq_3_35(rng, kernel, dtype):
    X = rng.normal(size=(150, 2)).astype(dtype)
    model = KernelPMF(kernel=kernel, gamma=0.7).fit(X)
    K = kernel_matrix(X.astype(np.float64), kernel=kernel, gamma=0.7)
    # p_i = (1/eta) sum_j K(x_j, x_i) with eta = sum_ij K_ij, so that sum_i p_i = 1.
    np.testing.assert_allclose(model.eta_, K.sum(), rtol=1e-12)
    np.testing.assert_allclose(model.p_, K.sum(axis=0) / K.sum(), rtol=1e-12)
    np.testing.assert_allclose(model.p_.sum(), 1.0, rtol=1e-14)
    assert np.all(model.p_ > 0) and model.p_.dtype == np.float64


def test_precomputed_kernel_equals_the_kernel(rng):
    X, candidates = rng.normal(size=(80, 2)), rng.normal(size=(10, 2))
    model = KernelPMF(gamma=0.5).fit(X)
    pre = KernelPMF(kernel="precomputed").fit(kernel_matrix(X, gamma=0.5))
    np.testing.assert_allclose(pre.eta_, model.eta_, rtol=1e-12)
    np.testing.assert_allclose(pre.p_, model.p_, rtol=1e-12)
    np.testing.assert_allclose(pre.pmf(kernel_matrix(candidates, X, gamma=0.5)), model.pmf(candidates), rtol=1e-12)
    assert not hasattr(pre, "score_samples") and not hasattr(pre, "score")  # no density without the kernel
    np.testing.assert_allclose(KernelPMF(kernel=RBF(gamma=0.5)).fit(X).p_, model.p_, rtol=1e-14)


# ---------------------------------------------------------------- known distributions


def test_discrete_pmf_converges_to_the_true_pmf():
    rng = np.random.default_rng(0)
    # gamma = 20 between integer points: each value leaks exp(-20) ~ 2e-9 of its mass to its neighbours.
    for n in (200, 2000, 20000):
        x = rng.choice(5, size=(n, 1), p=TRUE_PMF).astype(float)
        estimate = KernelPMF(gamma=20.0).fit(x).pmf(SUPPORT)
        frequencies = np.bincount(x[:, 0].astype(int), minlength=5) / n
        np.testing.assert_allclose(estimate, frequencies, atol=1e-8)
        np.testing.assert_allclose(estimate.sum(), 1.0, rtol=1e-14)
        # Within 4 standard deviations of the empirical frequencies around the true pmf.
        np.testing.assert_array_less(np.abs(estimate - TRUE_PMF), 4 * np.sqrt(TRUE_PMF * (1 - TRUE_PMF) / n))


def test_training_pmf_weights_repeated_values_by_their_count():
    """On the training points, a value seen n_k times holds n_k p_i ~ n_k^2 / sum_l n_l^2 of the mass."""
    x = np.repeat(SUPPORT, [10, 20, 40, 20, 10], axis=0)
    model = KernelPMF(gamma=30.0).fit(x)
    counts = np.array([10, 20, 40, 20, 10])
    mass = np.array([model.p_[x[:, 0] == k].sum() for k in range(5)])
    np.testing.assert_allclose(mass, counts**2 / np.sum(counts**2), atol=1e-10)
    np.testing.assert_allclose(model.pmf(SUPPORT), counts / counts.sum(), atol=1e-10)


def test_gaussian_mixture_density():
    X = _mixture(np.random.default_rng(1), 3000)
    h = 0.2
    grid = np.linspace(-6.0, 6.0, 2401)[:, None]
    # exp(-d^2 / (2 h^2)) is gamma = 1 / (2 h^2): scikit-learn's Gaussian KernelDensity of bandwidth h.
    model = KernelPMF(gamma=1.0 / (2 * h**2)).fit(X)
    log_density = model.score_samples(grid)
    reference = KernelDensity(bandwidth=h, kernel="gaussian").fit(X)
    np.testing.assert_allclose(log_density, reference.score_samples(grid), rtol=1e-12, atol=1e-10)
    np.testing.assert_allclose(model.score(X[:100]), reference.score(X[:100]), rtol=1e-12)
    density = np.exp(log_density)
    np.testing.assert_allclose(np.trapezoid(density, grid[:, 0]), 1.0, atol=1e-6)
    # The L1 distance to the true density (0.051 here; about 0.13 with 300 samples and h = 0.3).
    assert np.trapezoid(np.abs(density - _mixture_density(grid[:, 0])), grid[:, 0]) < 0.08


def test_laplacian_density_in_one_dimension_is_sklearn_exponential():
    X = _mixture(np.random.default_rng(2), 1000)
    h = 0.25
    grid = np.linspace(-6.0, 6.0, 1201)[:, None]
    # exp(-|x - y| / h) is gamma = 1 / h (the L1 and Euclidean distances agree in one dimension).
    model = KernelPMF(kernel="laplacian", gamma=1.0 / h).fit(X)
    reference = KernelDensity(bandwidth=h, kernel="exponential").fit(X)
    np.testing.assert_allclose(model.score_samples(grid), reference.score_samples(grid), rtol=1e-12, atol=1e-10)


@pytest.mark.parametrize("kernel", names_with("density"))
def test_two_dimensional_density_integrates_to_one(rng, kernel):
    X = rng.normal(size=(300, 2))
    axis = np.linspace(-7.0, 7.0, 281)
    GX, GY = np.meshgrid(axis, axis)
    grid = np.column_stack([GX.ravel(), GY.ravel()])
    log_density = KernelPMF(kernel=kernel, gamma=2.0).fit(X).score_samples(grid)
    integral = np.trapezoid(np.trapezoid(np.exp(log_density).reshape(GX.shape), axis, axis=1), axis)
    # The trapezoid rule on the laplacian kernel's cusps is accurate to about 2e-5 on this grid.
    np.testing.assert_allclose(integral, 1.0, atol=1e-4)
    # Against the formula: (1 / N) sum_j k(x_j, x) / Z_k with Z_k = pi / gamma (rbf) or (2 / gamma)^2 (laplacian).
    rows = grid[::97]
    if kernel == "rbf":
        kernel_values, normalizer = np.exp(-2.0 * ((rows[:, None] - X) ** 2).sum(-1)), np.pi / 2.0
    else:
        kernel_values, normalizer = np.exp(-2.0 * np.abs(rows[:, None] - X).sum(-1)), 1.0
    expected = np.log(kernel_values.mean(axis=1) / normalizer)
    np.testing.assert_allclose(log_density[::97], expected, rtol=1e-12)
    if kernel == "rbf":  # scikit-learn's Gaussian KernelDensity with gamma = 2 = 1 / (2 h^2), near the data
        near = X[:50] + 0.1
        reference = KernelDensity(bandwidth=0.5).fit(X).score_samples(near)
        np.testing.assert_allclose(KernelPMF(gamma=2.0).fit(X).score_samples(near), reference, rtol=1e-12)


# ---------------------------------------------------------------- streaming, threads, dtypes


def test_new_points_are_scored_without_storing_the_kernel_matrix(rng):
    X, X_new = rng.normal(size=(3000, 2)), rng.normal(size=(2000, 2))
    model = KernelPMF(gamma=0.5).fit(X)
    tracemalloc.start()
    model.score_samples(X_new)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < X_new.shape[0] * X.shape[0] * 8 / 20  # the 2000 x 3000 matrix would be 48 MB


def test_thread_counts_agree(rng):
    X, X_new = rng.normal(size=(500, 3)), rng.normal(size=(200, 3))
    one = KernelPMF(gamma=0.5, n_threads=1).fit(X)
    two = KernelPMF(gamma=0.5, n_threads=2).fit(X)
    np.testing.assert_allclose(two.p_, one.p_, rtol=1e-12)
    np.testing.assert_allclose(two.score_samples(X_new), one.score_samples(X_new), rtol=1e-12)


def test_float32_inputs_are_summed_in_double(rng):
    X, X_new = rng.normal(size=(400, 2)), rng.normal(size=(50, 2))
    m64 = KernelPMF(gamma=0.5).fit(X)
    m32 = KernelPMF(gamma=0.5).fit(X.astype(np.float32))
    assert m32.p_.dtype == m32.score_samples(X_new.astype(np.float32)).dtype == np.float64
    np.testing.assert_allclose(m32.p_, m64.p_, rtol=1e-5)
    np.testing.assert_allclose(m32.score_samples(X_new), m64.score_samples(X_new), rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "params,match",
    [
        ({"kernel": "linear"}, "The 'kernel' parameter of KernelPMF must be a str among .*Got 'linear'"),
        ({"kernel": "poly"}, "The 'kernel' parameter of KernelPMF must be a str among .*Got 'poly'"),
        ({"kernel": Linear()}, "kernel: must be rbf, laplacian or precomputed"),
        ({"kernel": Polynomial()}, "kernel: must be rbf, laplacian or precomputed"),
        ({"kernel": "sigmoid"}, "The 'kernel' parameter of KernelPMF must be a str among .*Got 'sigmoid'"),
        ({"kernel": None}, "The 'kernel' parameter of KernelPMF must be a str among .*Got None"),
        ({"gamma": -1.0}, "The 'gamma' parameter of KernelPMF must be None or a float in the range"),
        ({"gamma": 0.0}, "The 'gamma' parameter of KernelPMF must be None or a float in the range"),
        ({"gamma": float("nan")}, "The 'gamma' parameter of KernelPMF must be None or a float in the range"),
        ({"n_threads": 0}, "The 'n_threads' parameter of KernelPMF must be None"),
        ({"n_threads": 1.5}, "The 'n_threads' parameter of KernelPMF must be None"),
    ],
)
def test_bad_parameters_name_the_argument(rng, params, match):
    with pytest.raises(ValueError, match=match):
        KernelPMF(**params).fit(rng.normal(size=(20, 2)))


def test_bad_data_name_the_argument(rng):
    X = rng.normal(size=(20, 2))
    X_nan = X.copy()
    X_nan[3, 1] = np.nan
    with pytest.raises(ValueError, match="X contains NaN"):
        KernelPMF().fit(X_nan)
    with pytest.raises(ValueError, match="X contains infinity"):
        KernelPMF().fit(np.where(X > 1, np.inf, X))
    with pytest.raises(NotFittedError):
        KernelPMF().pmf(X)
    model = KernelPMF(gamma=1.0).fit(X)
    with pytest.raises(ValueError, match="X has 3 features, but KernelPMF is expecting 2"):
        model.pmf(rng.normal(size=(4, 3)))
    with pytest.raises(ValueError, match="X contains NaN"):
        model.score_samples(X_nan)
    # Far candidates: normalized in the log domain (equal points, equal mass), finite log-densities.
    np.testing.assert_allclose(model.pmf(np.full((2, 2), 1e3)), [0.5, 0.5], rtol=1e-12)
    assert np.all(np.isfinite(model.score_samples(np.full((2, 2), 1e3))))
    with pytest.raises(ValueError, match="X: the kernel vanishes between every candidate and every training point"):
        KernelPMF(kernel="precomputed").fit(kernel_matrix(X, gamma=1.0)).pmf(np.zeros((2, 20)))
    K = kernel_matrix(X, gamma=1.0)
    with pytest.raises(ValueError, match="X: Negative values in data"):
        KernelPMF(kernel="precomputed").fit(K - 0.5)
    with pytest.raises(ValueError, match="X: a precomputed kernel needs 20 columns"):
        KernelPMF(kernel="precomputed").fit(K[:, :10])
    with pytest.raises(ValueError, match="X: the kernel matrix sums to 0"):
        KernelPMF(kernel="precomputed").fit(np.zeros((3, 3)))
    pre = KernelPMF(kernel="precomputed").fit(K)
    with pytest.raises(ValueError, match="X has 10 features, but KernelPMF is expecting 20"):
        pre.pmf(K[:, :10])


# ---------------------------------------------------------------- the log domain far from the data


def _log_density_oracle(X_fit, X, gamma, name="rbf"):
    """log f(x) by log-sum-exp in NumPy: the Parzen density of the class docstring."""
    diff = X[:, None, :] - X_fit[None, :, :]
    d = (diff**2).sum(-1) if name == "rbf" else np.abs(diff).sum(-1)
    d_features = X.shape[1]
    log_integral = 0.5 * d_features * np.log(np.pi / gamma) if name == "rbf" else d_features * np.log(2.0 / gamma)
    return logsumexp(-gamma * d, axis=1) - np.log(X_fit.shape[0]) - log_integral


@pytest.mark.parametrize("kernel", ["rbf", "laplacian"])
def test_score_samples_far_from_the_data_is_finite_and_exact(kernel):
    X = np.random.default_rng(0).normal(size=(200, 10))  # the reproduction
    model = KernelPMF(kernel=kernel, gamma=0.5).fit(X)
    far = X + 20.0
    scores = model.score_samples(far)
    assert np.all(np.isfinite(scores))
    np.testing.assert_allclose(scores, _log_density_oracle(X, far, 0.5, kernel), rtol=1e-12)
    # Near the data both paths give the oracle (and scikit-learn's KernelDensity for rbf).
    np.testing.assert_allclose(model.score_samples(X), _log_density_oracle(X, X, 0.5, kernel), rtol=1e-12)
    if kernel == "rbf":
        kde = KernelDensity(bandwidth=1.0, kernel="gaussian").fit(X)
        np.testing.assert_allclose(model.score_samples(X), kde.score_samples(X), rtol=1e-12)
        assert np.all(np.isfinite(kde.score_samples(far)))


def test_log_domain_and_direct_sums_agree_where_both_apply(rng, monkeypatch):
    from rkm.shallow import pmf

    X, X_new = rng.normal(size=(300, 3)), rng.normal(scale=3.0, size=(40, 3))
    model = KernelPMF(gamma=0.7).fit(X)
    direct, direct_pmf = model.score_samples(X_new), model.pmf(X_new)
    monkeypatch.setattr(pmf, "_LOG_DOMAIN_BELOW", np.inf)  # every sum through log-sum-exp
    np.testing.assert_allclose(model.score_samples(X_new), direct, rtol=1e-12)
    np.testing.assert_allclose(model.pmf(X_new), direct_pmf, rtol=1e-10)


def test_pmf_of_far_candidates_in_the_log_domain(rng):
    X = rng.normal(size=(100, 2))
    model = KernelPMF(gamma=2.0).fit(X)
    candidates = np.array([[50.0, 0.0], [51.0, 0.0], [60.0, 0.0]])
    p = model.pmf(candidates)
    log_f = _log_density_oracle(X, candidates, 2.0)
    np.testing.assert_allclose(p, np.exp(log_f - logsumexp(log_f)), rtol=1e-10)
    assert p.sum() == pytest.approx(1.0) and p[0] > p[1] > p[2]


# ---------------------------------------------------------------- callable kernels, sparse input, copies


def test_callable_kernel_equals_the_named_kernel(rng):
    X, X_new = rng.normal(size=(150, 2)), rng.normal(size=(20, 2))
    named = KernelPMF(gamma=0.8).fit(X)
    func = KernelPMF(kernel=lambda A, B: kernel_matrix(A, B, gamma=0.8)).fit(X)
    np.testing.assert_allclose(func.p_, named.p_, rtol=1e-12)
    np.testing.assert_allclose(func.pmf(X_new), named.pmf(X_new), rtol=1e-12)
    assert not hasattr(func, "score_samples")  # no integral known: no density
    with pytest.raises(ValueError, match="kernel: the callable returned negative values"):
        KernelPMF(kernel=lambda A, B: A @ B.T).fit(X)


@pytest.mark.parametrize("kernel", ["rbf", "laplacian"])
def test_sparse_input_equals_dense(rng, kernel):
    import scipy.sparse as sp

    X = rng.random((120, 15)) * (rng.random((120, 15)) < 0.3)
    X_new = rng.random((20, 15)) * (rng.random((20, 15)) < 0.3)
    dense = KernelPMF(kernel=kernel, gamma=0.5).fit(X)
    sparse = KernelPMF(kernel=kernel, gamma=0.5).fit(sp.csr_matrix(X))
    np.testing.assert_allclose(sparse.p_, dense.p_, rtol=1e-12)
    np.testing.assert_allclose(sparse.score_samples(sp.csc_matrix(X_new)), dense.score_samples(X_new), rtol=1e-12)
    far = sp.csr_matrix(X_new + 30.0)
    np.testing.assert_allclose(sparse.score_samples(far), dense.score_samples(X_new + 30.0), rtol=1e-10)
    with pytest.raises(TypeError, match="[Ss]parse"):
        KernelPMF(kernel="precomputed").fit(sp.csr_matrix(np.eye(3)))


def test_training_points_are_copied(rng):
    X, X_new = rng.normal(size=(100, 2)), rng.normal(size=(10, 2))
    model = KernelPMF(gamma=0.5).fit(X)
    before = model.score_samples(X_new)
    assert model.X_fit_ is not X
    X[:] = 0.0
    np.testing.assert_array_equal(model.score_samples(X_new), before)
