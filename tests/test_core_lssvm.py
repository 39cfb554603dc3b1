"""The LS-SVM dual solver of the compiled core (_core.lssvm_*) against rkm.reference and a dense bordered solve."""

import numpy as np
import pytest
from conftest import bordered_solution, regression_data

from rkm import LSSVMRegressor, _core, reference
from rkm.kernels import kernel_matrix


@pytest.mark.parametrize("backend", ["scipy", "eigen"])
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_core_dual_fit_matches_bordered_solve_and_reference(rng, dtype, backend, fit_intercept):
    X, Y = regression_data(rng, n=150, p=2, dtype=dtype)
    eta, lam = 2.0, 0.05
    _core.set_blas_backend(backend)
    try:
        H, b, loo = _core.lssvm_dual_fit(X, Y, "rbf", 0.4, 3.0, 1.0, eta, lam, fit_intercept, True, None)
    finally:
        _core.set_blas_backend("scipy")
    H_ref, b_ref, loo_ref = reference.lssvm_dual_fit(X, Y, "rbf", 0.4, 3.0, 1.0, eta, lam, fit_intercept, True)
    assert H.dtype == b.dtype == loo.dtype == dtype
    K = kernel_matrix(X.astype(np.float64), kernel="rbf", gamma=0.4)
    if fit_intercept:
        H_exact, b_exact = bordered_solution(K, Y.astype(np.float64), eta, lam)
    else:
        H_exact, b_exact = np.linalg.solve(K / eta + lam * np.eye(len(K)), Y), np.zeros(2)
    # float32 solves lose about cond(A) eps32 relative to the largest entry.
    rtol = 1e-10 if dtype == np.float64 else 2e-3
    scale = np.abs(H_exact).max()
    np.testing.assert_allclose(H, H_exact, atol=rtol * scale)
    np.testing.assert_allclose(b, b_exact, atol=rtol * np.abs(Y).max())
    np.testing.assert_allclose(H_ref, H_exact, atol=rtol * scale)
    np.testing.assert_allclose(b_ref, b_exact, atol=rtol * np.abs(Y).max())
    np.testing.assert_allclose(loo, loo_ref, atol=rtol * np.abs(loo_ref).max() * 10)


def test_core_dual_solve_on_a_given_kernel_matches_reference(rng):
    X, Y = regression_data(rng, n=120, p=3)
    K = kernel_matrix(X, kernel="laplacian", gamma=0.3)
    H, b, loo = _core.lssvm_dual_solve(K.copy(), Y, 0.5, 0.2, True, True, None)
    H_ref, b_ref, loo_ref = reference.lssvm_dual_solve(K, Y, 0.5, 0.2, True, True)
    np.testing.assert_allclose(H, H_ref, atol=1e-10 * np.abs(H_ref).max())
    np.testing.assert_allclose(b, b_ref, atol=1e-10 * np.abs(Y).max())
    np.testing.assert_allclose(loo, loo_ref, atol=1e-10 * np.abs(loo_ref).max())


@pytest.mark.parametrize("lam", [1e-1, 1e-4])
def test_mixed_precision_fit_reaches_float64_accuracy(rng, lam):
    X, Y = regression_data(rng, n=400, p=2)
    H, b, _ = _core.lssvm_dual_fit(X, Y, "rbf", 1.0, 3.0, 1.0, 1.0, lam, True, False, None)
    H_mixed, b_mixed, iterations = _core.lssvm_dual_fit_mixed(X, Y, "rbf", 1.0, 3.0, 1.0, 1.0, lam, True, None)
    H_ref, b_ref, iterations_ref = reference.lssvm_dual_fit_mixed(X, Y, "rbf", 1.0, 3.0, 1.0, 1.0, lam, True)
    # The same algorithm; the float32 factorizations round alike up to BLAS threading.
    assert 0 <= iterations <= 30 and 0 <= iterations_ref <= 30 and abs(iterations - iterations_ref) <= 2
    cond = 1 + kernel_matrix(X, kernel="rbf", gamma=1.0).sum(axis=1).max() / lam
    for H_, b_ in ((H_mixed, b_mixed), (H_ref, b_ref)):
        np.testing.assert_allclose(H_, H, atol=cond * 1e-14 * np.abs(H).max())
        np.testing.assert_allclose(b_, b, atol=cond * 1e-14 * np.abs(Y).max())


def test_mixed_precision_falls_back_to_float64_when_float32_cannot_factor(rng):
    X, Y = regression_data(rng, n=300)
    lam = 1e-9  # cond(A) ~ 1e11: beyond float32, within float64
    H, b, _ = _core.lssvm_dual_fit(X, Y, "rbf", 0.05, 3.0, 1.0, 1.0, lam, True, False, None)
    H_mixed, b_mixed, iterations = _core.lssvm_dual_fit_mixed(X, Y, "rbf", 0.05, 3.0, 1.0, 1.0, lam, True, None)
    assert iterations == -1
    np.testing.assert_array_equal(H_mixed, H)
    np.testing.assert_array_equal(b_mixed, b)
    assert reference.lssvm_dual_fit_mixed(X, Y, "rbf", 0.05, 3.0, 1.0, 1.0, lam, True)[2] == -1


def test_singular_system_is_a_clear_error():
    X = np.repeat(np.eye(3), 40, axis=0)  # 3 distinct points: K has rank 3
    Y = np.ones((120, 1))
    with pytest.raises(ValueError, match="lam: .*not numerically positive definite"):
        _core.lssvm_dual_fit(X, Y, "rbf", 1.0, 3.0, 1.0, 1.0, 1e-300, True, False, None)
    with pytest.raises(ValueError, match="lam: "):
        reference.lssvm_dual_fit(X, Y, "rbf", 1.0, 3.0, 1.0, 1.0, 1e-300, True, False)
    with pytest.raises(ValueError, match="lam: .*not numerically positive definite"):
        LSSVMRegressor(lam=1e-300, gamma=1.0).fit(X, Y.ravel())


@pytest.mark.parametrize(
    "kwargs, match", [(dict(eta=0.0), "eta: "), (dict(lam=-1.0), "lam: "), (dict(lam=np.inf), "lam: ")]
)
def test_core_rejects_bad_hyperparameters(rng, kwargs, match):
    X, Y = regression_data(rng, n=20)
    args = dict(eta=1.0, lam=1.0) | kwargs
    with pytest.raises(ValueError, match=match):
        _core.lssvm_dual_fit(X, Y, "rbf", 1.0, 3.0, 1.0, args["eta"], args["lam"], True, False, None)
    with pytest.raises(ValueError, match=match):
        reference.lssvm_dual_fit(X, Y, "rbf", 1.0, 3.0, 1.0, args["eta"], args["lam"], True, False)


def test_core_rejects_mismatched_targets(rng):
    X, Y = regression_data(rng, n=20)
    with pytest.raises(ValueError, match="Y: has 19 rows"):
        _core.lssvm_dual_fit(X, Y[:19], "rbf", 1.0, 3.0, 1.0, 1.0, 1.0, True, False, None)
    with pytest.raises(ValueError, match="Y: has 19 rows"):
        _core.lssvm_dual_fit_mixed(X, Y[:19], "rbf", 1.0, 3.0, 1.0, 1.0, 1.0, True, None)


@pytest.fixture(scope="module")
def panel_problem():
    """K, Y, lam and the exact (H, b, loo) of an N = 2600 system, by SciPy's Cholesky factorization."""
    from scipy import linalg

    rng = np.random.default_rng(7)
    n, lam = 2600, 0.5
    X, Y = rng.normal(size=(n, 5)), rng.normal(size=(n, 2))
    K = kernel_matrix(X, kernel="rbf", gamma=0.2)
    L = linalg.cholesky(K + lam * np.eye(n), lower=True)
    U = linalg.cho_solve((L, True), Y)
    v = linalg.cho_solve((L, True), np.ones(n))
    b = U.sum(axis=0) / v.sum()
    H = U - np.outer(v, b)
    L_inverse, _ = linalg.lapack.dtrtri(L, lower=1)
    inverse_diagonal = np.sum(L_inverse**2, axis=0) - v**2 / v.sum()
    return K, Y, lam, (H, b, H / inverse_diagonal[:, None])


@pytest.mark.parametrize("backend", ["scipy", "eigen"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_cholesky_in_panels_agrees_with_one_potrf_call(panel_problem, backend, dtype):
    # N = 2600 > 2048: the factorization runs in panels of 512 columns with the trailing updates in strips of
    # 2048 rows (a partial last panel and strip) and Ctrl-C checks between them; the factor is LAPACK's to rounding.
    K, Y, lam, exact = panel_problem
    _core.set_blas_backend(backend)
    try:
        result = _core.lssvm_dual_solve(K.astype(dtype), Y.astype(dtype), 1.0, lam, True, True, None)
    finally:
        _core.set_blas_backend("scipy")
    # A solve's rounding: eps cond(A) relative to the largest entry, cond(A) <= 1 + N max|K| / lam.
    cond = 1 + len(K) / lam
    atol = 10 * np.finfo(dtype).eps * cond
    for value, expected in zip(result, exact):
        assert value.dtype == dtype
        np.testing.assert_allclose(value, expected, atol=atol * np.abs(expected).max())


@pytest.mark.parametrize("backend", ["scipy", "eigen"])
def test_cholesky_in_panels_reports_the_failing_column(backend):
    # A negative pivot in the 5th panel: the column LAPACK reports, counted from the start of the matrix.
    n = 2600
    K = np.eye(n)
    K[2345, 2345] = -5.0
    _core.set_blas_backend(backend)
    try:
        with pytest.raises(ValueError, match="failed at column 2346 of 2600"):
            _core.lssvm_dual_solve(K, np.ones((n, 1)), 1.0, 1.0, True, False, None)
    finally:
        _core.set_blas_backend("scipy")
