"""rkm.shallow._pcg: preconditioned conjugate gradients for the LS-SVM dual system (Suykens 2017, eq. 3.16), against a
dense solve of the bordered system, and the pivoted Cholesky factor against NumPy's Cholesky."""

import numpy as np
import pytest
import scipy.linalg

from rkm._utils import validation
from rkm._utils.threads import blas_threads
from rkm.kernels import kernel_matrix
from rkm.shallow._pcg import default_max_iter, default_rank, lssvm_pcg_fit, pivoted_cholesky

GAMMA = 0.5
PRECONDITIONERS = ["nystrom", "pivoted_cholesky", None]


@pytest.fixture(autouse=True)
def _single_threaded_blas():
    """The dense problems here are small: a 301 x 301 SVD took 0.37 s with two OpenBLAS threads on a busy
    two-core machine and 0.01 s with one."""
    with blas_threads(1):
        yield


def _data(n=300, d=3, seed=0, dtype=np.float64):
    """Samples and three outputs: a shifted smooth function with noise, a product, and pure noise."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    Y = np.column_stack(
        [np.sin(2 * X[:, 0]) + 3.0 + 0.1 * rng.standard_normal(n), X[:, 1] * X[:, -1], rng.standard_normal(n)]
    )
    return X.astype(dtype), Y


def _kernel_as_solved(X, storage):
    """K as the solver multiplies it: stored in X's dtype, or evaluated in double from X's values."""
    if storage == "dense":
        return kernel_matrix(X, None, "rbf", GAMMA).astype(np.float64)
    return kernel_matrix(X.astype(np.float64), None, "rbf", GAMMA)


def _bordered(K, eta, lam, fit_intercept):
    """The matrix of eq. 3.16 (without its last row and column when there is no intercept)."""
    n = K.shape[0]
    M = np.zeros((n + 1, n + 1))
    M[:n, :n] = K / eta + lam * np.eye(n)
    M[:n, n] = M[n, :n] = 1.0
    return M if fit_intercept else M[:n, :n]


def _stack(result, fit_intercept):
    return np.vstack([result.H, result.b]) if fit_intercept else result.H


def _relative_residuals(M, result, Y, fit_intercept):
    """The relative residuals of the module docstring, from the dense matrix."""
    rhs = np.vstack([Y, np.zeros((1, Y.shape[1]))]) if fit_intercept else Y
    scale = np.linalg.norm(Y - Y.mean(axis=0) if fit_intercept else Y, axis=0)
    return np.linalg.norm(M @ _stack(result, fit_intercept) - rhs, axis=0) / scale


def _fit(X, Y, **kwargs):
    options = {"eta": 1.0, "lam": 0.1, "rank": 40, "random_state": 0}
    options.update(kwargs)
    return lssvm_pcg_fit(X, Y, "rbf", GAMMA, 3, 1.0, **options)


# ---------------------------------------------------------------------- agreement with a dense solve


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("preconditioner", PRECONDITIONERS)
@pytest.mark.parametrize("storage", ["matrix_free", "dense"])
def test_solution_satisfies_eq_3_16_and_matches_a_dense_solve(storage, preconditioner, fit_intercept, dtype):
    X, Y = _data(dtype=dtype)
    tol, eta, lam = 1e-8, 2.0, 0.1
    result = _fit(
        X, Y, eta=eta, lam=lam, storage=storage, preconditioner=preconditioner, fit_intercept=fit_intercept, tol=tol
    )
    assert result.converged and result.n_iter < default_max_iter(X.shape[0])
    assert result.H.shape == Y.shape and result.b.shape == (Y.shape[1],)
    if not fit_intercept:
        np.testing.assert_array_equal(result.b, 0.0)

    M = _bordered(_kernel_as_solved(X, storage), eta, lam, fit_intercept)
    # The reported residuals are those of the returned solution, and they meet tol.
    residuals = _relative_residuals(M, result, Y, fit_intercept)
    np.testing.assert_allclose(result.residuals, residuals, rtol=1e-6, atol=1e-13)
    assert residuals.max() <= tol
    # The error of a solution with relative residual tol is at most cond(M) tol.
    rhs = np.vstack([Y, np.zeros((1, Y.shape[1]))]) if fit_intercept else Y
    exact = np.linalg.solve(M, rhs)
    error = np.linalg.norm(_stack(result, fit_intercept) - exact) / np.linalg.norm(exact)
    assert error <= np.linalg.cond(M) * tol
    assert error <= 1e-6


def test_intercept_sums_hidden_features_to_zero():
    X, Y = _data()
    result = _fit(X, Y, tol=1e-10)
    np.testing.assert_allclose(result.H.sum(axis=0), 0.0, atol=1e-10 * np.abs(result.H).sum(axis=0).max())


@pytest.mark.parametrize("preconditioner", ["nystrom", "pivoted_cholesky"])
def test_exact_preconditioner_converges_at_once(preconditioner):
    # With rank = N the Nyström factor reproduces K, so the preconditioned matrix is the identity up to
    # rounding; the pivoted Cholesky factor stops once its remainder has trace(E) / eta <= 0.1 lam, which
    # leaves the preconditioned spectrum in [1, 1.1]: at most 7 iterations to 1e-10 by the CG bound.
    X, Y = _data(n=150)
    result = _fit(X, Y, preconditioner=preconditioner, rank=150, tol=1e-10)
    assert result.converged and result.n_iter <= (3 if preconditioner == "nystrom" else 7)


def test_preconditioners_need_fewer_iterations():
    X, Y = _data(n=600)
    iterations = {pc: _fit(X, Y, lam=1e-3, rank=100, preconditioner=pc).n_iter for pc in PRECONDITIONERS}
    assert iterations["nystrom"] < iterations[None] / 2
    assert iterations["pivoted_cholesky"] < iterations[None] / 2


def test_pivoted_cholesky_of_a_low_rank_kernel_stops_at_its_rank():
    # The linear kernel of 3 features has rank 3: the factor stops there and is exact.
    X, Y = _data()
    result = lssvm_pcg_fit(
        X, Y, "linear", None, 3, 1.0, eta=1.0, lam=0.1, preconditioner="pivoted_cholesky", rank=50, tol=1e-10
    )
    assert result.rank == 3
    assert result.converged and result.n_iter <= 3


def test_default_rank_and_max_iter():
    assert default_rank(50) == 50
    assert default_rank(1000) == 100
    assert default_rank(5000) == 250
    assert default_rank(50_000) == 1000
    assert default_rank(10**6) == 134  # the float64 factor stays within 1 GiB
    assert default_max_iter(100) == 100
    assert default_max_iter(50_000) == 2237
    X, Y = _data(n=120)
    assert _fit(X, Y, rank=None).rank == 100
    assert _fit(X, Y, rank=None, preconditioner=None).rank == 0


# ---------------------------------------------------------------------- edge cases and stopping


def test_constant_and_zero_outputs_are_solved_exactly():
    X, _ = _data(n=100)
    Y = np.column_stack([np.full(100, 2.5), np.zeros(100)])
    result = _fit(X, Y)
    np.testing.assert_array_equal(result.H, 0.0)
    np.testing.assert_allclose(result.b, [2.5, 0.0], rtol=1e-15)
    np.testing.assert_array_equal(result.residuals, 0.0)
    assert result.converged


def test_one_sample():
    # The bordered system of one sample forces h = 0 and b = y.
    result = _fit(np.ones((1, 2)), np.array([[4.0, -1.0]]), rank=1)
    np.testing.assert_array_equal(result.H, 0.0)
    np.testing.assert_allclose(result.b, [4.0, -1.0])


@pytest.mark.parametrize("scale", [1e-200, 1e200])
def test_solution_scales_with_the_targets(scale):
    X, Y = _data(n=200)
    reference = _fit(X, Y, tol=1e-10)
    scaled = _fit(X, Y * scale, tol=1e-10)
    assert scaled.converged
    np.testing.assert_allclose(scaled.H / scale, reference.H, rtol=1e-8, atol=1e-8 * np.abs(reference.H).max())
    np.testing.assert_allclose(scaled.b / scale, reference.b, rtol=1e-8)


def test_float32_targets_are_accepted():
    X, Y = _data(n=200)
    result = _fit(X, Y.astype(np.float32))
    assert result.converged and result.H.dtype == np.float64


def test_max_iter_reached_is_reported():
    X, Y = _data()
    result = _fit(X, Y, tol=1e-10, max_iter=2, preconditioner=None)
    assert not result.converged
    assert result.n_iter == 2 and result.n_products == 3  # two iterations and the final residual check
    assert "max_iter = 2" in result.message
    M = _bordered(_kernel_as_solved(X, "matrix_free"), 1.0, 0.1, True)
    np.testing.assert_allclose(result.residuals, _relative_residuals(M, result, Y, True), rtol=1e-8)
    assert result.residuals.max() > 1e-10


@pytest.mark.parametrize("preconditioner", ["nystrom", None])
def test_tol_below_attainable_accuracy_stops_at_stagnation(preconditioner):
    n, max_iter = 200, 5000
    X, Y = _data(n=n)
    result = _fit(X, Y, lam=1e-2, preconditioner=preconditioner, tol=1e-18, max_iter=max_iter)
    assert not result.converged
    assert "stagnated" in result.message and result.n_iter < max_iter
    # It still returns the most accurate iterate it found: a residual at the working precision, whose level
    # (1.2e-13 to 1.5e-13 here, depending on the BLAS build's summation order) scales with eps sqrt(n).
    assert result.residuals.max() < 100 * np.finfo(np.float64).eps * np.sqrt(n)
    M = _bordered(_kernel_as_solved(X, "matrix_free"), 1.0, 1e-2, True)
    exact = np.linalg.solve(M, np.vstack([Y, np.zeros((1, 3))]))
    assert np.abs(_stack(result, True) - exact).max() <= 1e-10 * np.abs(exact).max()


def test_results_repeat():
    X, Y = _data(n=200)
    first, second = _fit(X, Y, n_threads=2), _fit(X, Y, n_threads=2)
    np.testing.assert_array_equal(first.H, second.H)
    np.testing.assert_array_equal(first.b, second.b)


def test_verbose_prints_progress(capsys):
    X, Y = _data(n=200)
    _fit(X, Y, preconditioner=None, tol=1e-10, verbose=1)
    lines = capsys.readouterr().out.splitlines()
    assert any("iteration 10: max relative residual" in line for line in lines)
    assert "converged" in lines[-1]
    _fit(X, Y)
    assert capsys.readouterr().out == ""


# ---------------------------------------------------------------------- invalid input


@pytest.mark.parametrize(
    "options, name",
    [
        ({"tol": 0.0}, "tol"),
        ({"tol": -1e-6}, "tol"),
        ({"tol": np.nan}, "tol"),
        ({"max_iter": 0}, "max_iter"),
        ({"max_iter": 2.5}, "max_iter"),
        ({"rank": 0}, "rank"),
        ({"rank": 301}, "rank"),
        ({"rank": 10.0}, "rank"),
        ({"rank": 0, "preconditioner": None}, "rank"),
        ({"preconditioner": "jacobi"}, "preconditioner"),
        ({"storage": "stored"}, "storage"),
        ({"eta": 0.0}, "eta"),
        ({"lam": -1.0}, "lam"),
        ({"fit_intercept": "yes"}, "fit_intercept"),
        ({"verbose": -1}, "verbose"),
        ({"n_threads": 0}, "n_threads"),
    ],
)
def test_invalid_arguments_name_the_argument(options, name):
    X, Y = _data()
    with pytest.raises(ValueError, match=f"^{name}: "):
        _fit(X, Y, **options)


@pytest.mark.parametrize(
    "Y, message",
    [
        (np.zeros(300), "^Y: must be a 2-D array"),
        (np.zeros((299, 1)), r"^Y: must have one row per sample of X \(300\)"),
        (np.full((300, 1), np.nan), "Y contains NaN"),
        (np.full((300, 1), np.inf), "Y contains infinity"),
    ],
)
def test_invalid_targets(Y, message):
    X, _ = _data()
    with pytest.raises(ValueError, match=message):
        _fit(X, Y)


def test_non_finite_samples():
    X, Y = _data()
    X[3, 1] = np.nan
    with pytest.raises(ValueError, match="X contains NaN"):
        _fit(X, Y)


def test_stored_kernel_that_cannot_fit_is_refused_before_allocating(monkeypatch):
    monkeypatch.setattr(validation, "available_memory_bytes", lambda: 10**5)
    X, Y = _data()
    with pytest.raises(MemoryError, match="^storage: .*300 x 300 float64 kernel matrix.*storage='matrix_free'"):
        _fit(X, Y, storage="dense")


def test_badly_scaled_system_is_a_clear_error():
    # lam = 1e-300 makes the Woodbury preconditioner divide by 1e-300: the iterates overflow.
    X, Y = _data(n=100)
    with pytest.raises(ValueError, match="^eta, lam: "):
        _fit(X, Y, lam=1e-300, rank=10)


# ---------------------------------------------------------------------- pivoted Cholesky


def _greedy_reference(K, pivots):
    """L = K[:, P] C^{-T} with C the Cholesky factor of K[P, P], and each step's remaining diagonal."""
    C = np.linalg.cholesky(K[np.ix_(pivots, pivots)])
    L = scipy.linalg.solve_triangular(C, K[:, pivots].T, lower=True).T
    remaining = np.diag(K) - np.concatenate([np.zeros((K.shape[0], 1)), np.cumsum(L**2, axis=1)], axis=1).T
    return L, remaining


@pytest.mark.parametrize("kernel, gamma", [("rbf", 0.3), ("laplacian", 0.2), ("poly", 0.2)])
def test_pivoted_cholesky_matches_numpy(kernel, gamma, dtype):
    # 6 features: the cubic kernel has rank 84, more than the 40 columns asked for.
    X = np.random.default_rng(3).standard_normal((250, 6)).astype(dtype)
    L, pivots = pivoted_cholesky(X, kernel, gamma, 3, 1.0, 40)
    assert L.shape == (250, 40) and L.dtype == np.float64
    assert len(set(pivots)) == 40
    K = kernel_matrix(X, None, kernel, gamma, 3).astype(np.float64)
    reference, remaining = _greedy_reference(K, pivots)
    scale = np.abs(K).max()
    atol = (1e-12 if dtype == np.float64 else 1e-5) * scale
    np.testing.assert_allclose(L, reference, atol=atol)
    # Column i is zero on the earlier pivots, and exact on the pivots' rows and columns of K.
    assert np.all(np.triu(L[pivots], 1) == 0.0)
    np.testing.assert_allclose(L @ L[pivots].T, K[:, pivots], atol=10 * atol)
    # Greedy: each pivot has the largest diagonal of the remainder at its step (up to rounding on ties).
    for step, j in enumerate(pivots):
        assert remaining[step, j] >= remaining[step].max() - atol


def test_pivoted_cholesky_stops_at_the_trace_tolerance():
    X = np.random.default_rng(4).standard_normal((200, 3))
    K = kernel_matrix(X, None, "rbf", 0.5)
    tol = 1e-3
    L, _ = pivoted_cholesky(X, "rbf", 0.5, 3, 1.0, 200, tol)
    remainder = np.trace(K) - (L**2).sum()
    assert remainder <= tol * np.trace(K)
    assert remainder + (L[:, -1] ** 2).sum() > tol * np.trace(K)  # one column fewer would not have done
    assert L.shape[1] < 200


def test_pivoted_cholesky_of_a_rank_deficient_kernel_is_exact():
    X = np.repeat(np.random.default_rng(5).standard_normal((7, 2)), 3, axis=0)  # 7 distinct rows
    L, _ = pivoted_cholesky(X, "rbf", 1.0, 3, 1.0, 21)
    assert L.shape == (21, 7)
    np.testing.assert_allclose(L @ L.T, kernel_matrix(X, None, "rbf", 1.0), atol=1e-12)


@pytest.mark.parametrize(
    "options, name", [({"rank": 0}, "rank"), ({"rank": 51}, "rank"), ({"tol": -0.1}, "tol"), ({"tol": np.inf}, "tol")]
)
def test_pivoted_cholesky_invalid_arguments(options, name):
    arguments = {"rank": 5, "tol": 0.0}
    arguments.update(options)
    with pytest.raises(ValueError, match=f"^{name}: "):
        pivoted_cholesky(np.ones((50, 2)), "rbf", 1.0, 3, 1.0, **arguments)


# ---------------------------------------------------------------------- issue 23: weights, adaptive rank


@pytest.mark.parametrize("preconditioner", PRECONDITIONERS)
def test_sample_weight_solves_the_weighted_system(preconditioner):
    # A = (1/eta) K + lam diag(1 / v); the weighted Woodbury preconditioner must keep CG's answer exact.
    X, Y = _data(n=200)
    weights = np.random.default_rng(3).uniform(0.1, 5.0, 200)
    result = _fit(X, Y, preconditioner=preconditioner, sample_weight=weights, tol=1e-9, eta=1.5)
    M = _bordered(_kernel_as_solved(X, "matrix_free"), 1.5, 0.1, True)
    M[:200, :200] += np.diag(0.1 / weights - 0.1)
    expected = np.linalg.solve(M, np.vstack([Y, np.zeros((1, 3))]))
    assert result.converged
    np.testing.assert_allclose(_stack(result, True), expected, atol=1e-7 * np.abs(expected).max())


def test_sample_weight_must_be_positive():
    X, Y = _data(n=20)
    with pytest.raises(ValueError, match="sample_weight"):
        _fit(X, Y, rank=10, sample_weight=np.r_[0.0, np.ones(19)])


def test_extended_pivoted_cholesky_equals_one_factorization():
    from rkm.shallow._pcg import _PivotedCholesky

    X, _ = _data(n=120)
    spec = ("rbf", GAMMA, 3, 1.0)
    grown = _PivotedCholesky(X, spec, 0.0, None)
    grown.extend(10)
    columns = grown.extend(40)
    L, pivots = pivoted_cholesky(X, "rbf", GAMMA, 3, 1.0, 40)
    np.testing.assert_array_equal(grown.pivots, pivots)
    np.testing.assert_allclose(columns.T, L, atol=1e-12)


@pytest.mark.parametrize("preconditioner", ["pivoted_cholesky", "nystrom"])
def test_adaptive_rank_grows_at_small_lam_until_cg_converges(preconditioner):
    # Issue 23: at lam = 1e-5 (gamma = 0.2, d = 5) the fixed default rank left CG at a relative residual of 0.35
    # after 300 iterations (N = 3000). The adaptive rank grows when the residual's rate predicts a miss.
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 5))
    y = np.sin(X.sum(axis=1))[:, None]
    options = dict(eta=1.0, lam=1e-5, max_iter=300, preconditioner=preconditioner, random_state=0)
    fixed = lssvm_pcg_fit(X, y, "rbf", 0.2, 3, 1.0, rank=default_rank(400), **options)
    adaptive = lssvm_pcg_fit(X, y, "rbf", 0.2, 3, 1.0, **options)
    assert not fixed.converged
    assert adaptive.converged and adaptive.rank > default_rank(400)


def test_give_up_if_slow_reports_too_slow():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 5))
    y = np.sin(X.sum(axis=1))[:, None]
    result = lssvm_pcg_fit(
        X, y, "rbf", 0.2, 3, 1.0, eta=1.0, lam=1e-7, max_iter=60, rank=20, give_up_if_slow=True, random_state=0
    )
    assert result.too_slow and not result.converged and result.n_iter < 60
