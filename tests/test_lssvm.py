"""LS-SVM regression and classification as RKMs (rkm.shallow.lssvm); the core's dual solver is in
test_core_lssvm.py."""

import warnings

import numpy as np
import pytest
from conftest import bordered_solution, regression_data
from sklearn.exceptions import ConvergenceWarning
from sklearn.kernel_ridge import KernelRidge
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import PolynomialFeatures, StandardScaler

import rkm
from rkm import LSSVMClassifier, LSSVMRegressor
from rkm.features import Nystroem, RandomFourierFeatures
from rkm.kernels import RBF, kernel_matrix

# ------------------------------------------------------------------------------------- mixed precision


def test_mixed_precision_estimator_matches_float64(rng):
    X, Y = regression_data(rng, n=300, p=2)
    mixed = LSSVMRegressor(gamma=0.5, lam=1e-3, mixed_precision=True).fit(X, Y)
    exact = LSSVMRegressor(gamma=0.5, lam=1e-3).fit(X, Y)
    assert mixed.n_iter_ >= 2 and exact.n_iter_ == 1
    np.testing.assert_allclose(mixed.predict(X), exact.predict(X), atol=1e-10 * np.abs(Y).max())


# ------------------------------------------------------------------------------------- leave-one-out


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_loo_residuals_equal_explicit_refits(rng, fit_intercept):
    X, Y = regression_data(rng, n=250, p=2)
    params = dict(gamma=0.5, lam=0.01, eta=1.5, fit_intercept=fit_intercept)
    model = LSSVMRegressor(loo=True, **params).fit(X, Y)
    held_out = rng.choice(len(X), 20, replace=False)
    for i in held_out:
        keep = np.arange(len(X)) != i
        refit = LSSVMRegressor(mixed_precision=False, **params).fit(X[keep], Y[keep])
        explicit = Y[i] - refit.predict(X[i : i + 1])[0]
        np.testing.assert_allclose(model.loo_residuals_[i], explicit, atol=1e-8)
    assert model.loo_mse_ == pytest.approx(np.mean(model.loo_residuals_**2))


def test_loo_classifier_error_matches_refits(rng):
    X = rng.standard_normal((120, 2))
    y = np.where(X[:, 0] + 0.5 * rng.standard_normal(120) > 0, "a", "b")
    model = LSSVMClassifier(gamma=1.0, lam=0.5, loo=True).fit(X, y)
    wrong = 0
    for i in range(len(X)):
        keep = np.arange(len(X)) != i
        refit = LSSVMClassifier(gamma=1.0, lam=0.5).fit(X[keep], y[keep])
        wrong += refit.predict(X[i : i + 1])[0] != y[i]
    assert model.loo_error_ == pytest.approx(wrong / len(X))


def test_loo_needs_the_cholesky_solver(rng):
    X, Y = regression_data(rng, n=30)
    with pytest.raises(ValueError, match="loo: .*solver='cholesky'"):
        LSSVMRegressor(loo=True, feature_map="linear").fit(X, Y.ravel())


# ------------------------------------------------------------------------------------- regressor


def test_regressor_equals_kernel_ridge_without_intercept(rng):
    X, Y = regression_data(rng, n=150, p=2)
    model = LSSVMRegressor(gamma=0.7, lam=0.03, eta=2.0, fit_intercept=False).fit(X, Y)
    ridge = KernelRidge(kernel="rbf", gamma=0.7, alpha=0.06).fit(X, Y)
    X_new = rng.standard_normal((40, 3))
    np.testing.assert_allclose(model.predict(X_new), ridge.predict(X_new), atol=1e-9 * np.abs(Y).max())


def test_regressor_matches_bordered_solve_and_predicts_by_eq_3_17(rng):
    X, Y = regression_data(rng, n=180)
    model = LSSVMRegressor(kernel=RBF.from_sigma(1.3), lam=0.02, eta=0.5).fit(X, Y.ravel())
    K = kernel_matrix(X, kernel="rbf", gamma=1 / 1.3**2)
    H, b = bordered_solution(K, Y, 0.5, 0.02)
    np.testing.assert_allclose(model.dual_coef_, H, atol=1e-10 * np.abs(H).max())
    np.testing.assert_allclose(model.intercept_, b, atol=1e-10)
    X_new = rng.standard_normal((30, 3))
    expected = kernel_matrix(X_new, X, kernel="rbf", gamma=1 / 1.3**2) @ H / 0.5 + b
    np.testing.assert_allclose(model.predict(X_new), expected.ravel(), atol=1e-10 * np.abs(expected).max())


def test_precomputed_kernel_matches_kernel_function(rng):
    X, Y = regression_data(rng, n=100)
    X_new = rng.standard_normal((20, 3))
    model = LSSVMRegressor(gamma=0.5, lam=0.1).fit(X, Y)
    pre = LSSVMRegressor(kernel="precomputed", lam=0.1).fit(kernel_matrix(X, kernel="rbf", gamma=0.5), Y)
    rows = kernel_matrix(X_new, X, kernel="rbf", gamma=0.5)
    np.testing.assert_allclose(pre.predict(rows), model.predict(X_new), atol=1e-10)
    with pytest.raises(ValueError, match="X: a precomputed kernel must be square"):
        LSSVMRegressor(kernel="precomputed").fit(X, Y)


def test_float32_data_give_float32_model(rng):
    X, Y = regression_data(rng, n=100, dtype=np.float32)
    model = LSSVMRegressor(gamma=0.5, lam=0.1).fit(X, Y.ravel())
    assert model.dual_coef_.dtype == np.float32
    assert model.predict(X).dtype == np.float32
    exact = LSSVMRegressor(gamma=0.5, lam=0.1).fit(X.astype(np.float64), Y.ravel().astype(np.float64))
    np.testing.assert_allclose(model.predict(X), exact.predict(X), atol=1e-4)


# ------------------------------------------------------------------------------------- primal


def test_linear_primal_equals_linear_dual(rng):
    X, Y = regression_data(rng, n=150, d=4, p=2)
    for fit_intercept in (True, False):
        params = dict(lam=0.2, eta=3.0, fit_intercept=fit_intercept)
        primal = LSSVMRegressor(feature_map="linear", **params).fit(X, Y)
        dual = LSSVMRegressor(kernel="linear", **params).fit(X, Y)
        X_new = rng.standard_normal((25, 4))
        np.testing.assert_allclose(primal.predict(X_new), dual.predict(X_new), atol=1e-8)
        assert primal.solver_ == "primal" and primal.coef_.shape == (4, 2)


@pytest.mark.parametrize(
    "feature_map",
    [
        Nystroem(kernel="rbf", gamma=0.5, n_components=40, random_state=0),
        Nystroem(kernel="rbf", gamma=0.5, n_components=40, landmarks="renyi", random_state=0),
        RandomFourierFeatures(n_components=60, gamma=0.5, random_state=0),
    ],
    ids=["nystrom", "renyi", "rff"],
)
def test_explicit_feature_map_primal_equals_dual_on_its_kernel(rng, feature_map):
    X, Y = regression_data(rng, n=300)
    primal = LSSVMRegressor(feature_map=feature_map, lam=0.01, eta=2.0).fit(X, Y.ravel())
    Phi = primal.feature_map_.transform(X)
    dual = LSSVMRegressor(kernel="precomputed", lam=0.01, eta=2.0).fit(Phi @ Phi.T, Y.ravel())
    X_new = rng.standard_normal((40, 3))
    expected = dual.predict(primal.feature_map_.transform(X_new) @ Phi.T)
    np.testing.assert_allclose(primal.predict(X_new), expected, atol=1e-8)


def test_primal_streams_blocks_like_one_block(rng, monkeypatch):
    from rkm._utils import primal

    X, Y = regression_data(rng, n=500)
    feature_map = Nystroem(kernel="rbf", gamma=0.5, n_components=30, random_state=0)
    whole = LSSVMRegressor(feature_map=feature_map, lam=0.1).fit(X, Y)
    monkeypatch.setattr(primal, "BLOCK_BYTES", 8 * 30 * 37)  # blocks of 37 rows
    blocks = LSSVMRegressor(feature_map=feature_map, lam=0.1).fit(X, Y)
    np.testing.assert_allclose(blocks.predict(X), whole.predict(X), atol=1e-10)


def test_any_sklearn_transformer_as_feature_map(rng):
    X, Y = regression_data(rng, n=120, d=2)
    model = LSSVMRegressor(feature_map=PolynomialFeatures(3), lam=1e-3).fit(X, Y.ravel())
    Phi = PolynomialFeatures(3).fit_transform(X)
    dual = LSSVMRegressor(kernel="precomputed", lam=1e-3).fit(Phi @ Phi.T, Y.ravel())
    np.testing.assert_allclose(model.predict(X), dual.predict(Phi @ Phi.T), atol=1e-8)


# ------------------------------------------------------------------------------------- classifier


def test_binary_classifier_equals_classical_ls_svm(rng):
    """Eqs. 2.10-2.11: [Omega + I/gamma, y; y^T, 0][alpha; b] = [1; 0], Omega = (y y^T) o K, gamma = 1/lam."""
    X = rng.standard_normal((150, 2))
    y = np.where(X[:, 0] * X[:, 1] + 0.2 * rng.standard_normal(150) > 0, 1.0, -1.0)
    lam, gamma_kernel = 0.1, 0.8
    model = LSSVMClassifier(gamma=gamma_kernel, lam=lam).fit(X, y)
    K = kernel_matrix(X, kernel="rbf", gamma=gamma_kernel)
    n = len(X)
    M = np.zeros((n + 1, n + 1))
    M[:n, :n] = np.outer(y, y) * K + lam * np.eye(n)
    M[:n, n] = M[n, :n] = y
    solution = np.linalg.solve(M, np.append(np.ones(n), 0.0))
    alpha, b = solution[:n], solution[n]
    X_new = rng.standard_normal((50, 2))
    expected = kernel_matrix(X_new, X, kernel="rbf", gamma=gamma_kernel) @ (alpha * y) + b
    np.testing.assert_allclose(model.decision_function(X_new), expected, atol=1e-9 * np.abs(expected).max())
    np.testing.assert_array_equal(model.predict(X_new), np.where(expected > 0, 1.0, -1.0))
    # The paper's hidden features: h_i = D_yi h_D,i with H_D solving eq. 3.22; alpha_i = h_i here.
    np.testing.assert_allclose(model.H_.ravel(), alpha, atol=1e-9 * np.abs(alpha).max())


@pytest.mark.parametrize("labels", [["cat", "dog", "emu"], [-5, 0, 7], [10, 20, 40]])
@pytest.mark.parametrize("coding", ["one_vs_all", "minimum_output"])
def test_multiclass_labels_and_codings(rng, labels, coding):
    centres = np.array([[0.0, 3.0], [3.0, 0.0], [-3.0, -3.0]])
    index = np.arange(150) % 3
    X = centres[index] + 0.5 * rng.standard_normal((150, 2))
    y = np.asarray(labels, dtype=object if isinstance(labels[0], str) else None)[index]
    model = LSSVMClassifier(gamma=0.5, lam=0.1, coding=coding).fit(X, y)
    np.testing.assert_array_equal(model.classes_, np.sort(np.asarray(labels)))
    assert model.score(X, y) == 1.0
    scores = model.decision_function(X)
    assert scores.shape == (150, 3)
    assert model.dual_coef_.shape[1] == (3 if coding == "one_vs_all" else 2)


def test_one_vs_all_outputs_are_per_class_regressions(rng):
    X = rng.standard_normal((90, 2))
    y = np.arange(90) % 3
    model = LSSVMClassifier(gamma=0.5, lam=0.2).fit(X, y)
    for k in range(3):
        regression = LSSVMRegressor(gamma=0.5, lam=0.2).fit(X, np.where(y == k, 1.0, -1.0))
        np.testing.assert_allclose(model.decision_function(X)[:, k], regression.predict(X), atol=1e-9)


def test_classifier_rejects_a_single_class(rng):
    with pytest.raises(ValueError, match="y: needs at least two classes, got 1 class"):
        LSSVMClassifier().fit(rng.standard_normal((10, 2)), np.zeros(10))
    with pytest.raises(ValueError, match="The 'coding' parameter of LSSVMClassifier must be a str among"):
        LSSVMClassifier(coding="one_vs_one").fit(rng.standard_normal((10, 2)), np.arange(10) % 3)


# ------------------------------------------------------------------------------------- model selection


def test_grid_search_and_pipeline(rng):
    X, Y = regression_data(rng, n=120)
    pipe = make_pipeline(StandardScaler(), LSSVMRegressor())
    search = GridSearchCV(
        pipe, {"lssvmregressor__lam": [1e-3, 1e-1, 10.0], "lssvmregressor__gamma": [0.1, 1.0]}, cv=3
    ).fit(X, Y.ravel())
    assert search.best_score_ > 0.8
    assert search.predict(X).shape == (120,)


def test_loo_selects_like_explicit_cross_validation(rng):
    """The closed-form LOO picks the same lam as leave-one-out refits over a small grid."""
    X, Y = regression_data(rng, n=60)
    y = Y.ravel()
    grid = [1e-4, 1e-2, 1.0, 10.0]
    closed = [LSSVMRegressor(gamma=1.0, lam=lam, loo=True).fit(X, y).loo_mse_ for lam in grid]
    explicit = []
    for lam in grid:
        errors = [
            y[i] - LSSVMRegressor(gamma=1.0, lam=lam).fit(np.delete(X, i, 0), np.delete(y, i)).predict(X[i : i + 1])[0]
            for i in range(len(X))
        ]
        explicit.append(np.mean(np.square(errors)))
    np.testing.assert_allclose(closed, explicit, rtol=1e-7)


# ------------------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "params, match",
    [
        (dict(lam=0.0), "The 'lam' parameter of LSSVMRegressor must be a float in the range"),
        (dict(eta=-1.0), "The 'eta' parameter of LSSVMRegressor must be a float in the range"),
        (dict(solver="qr"), "The 'solver' parameter of LSSVMRegressor must be a str among"),
        (dict(preconditioner="jacobi"), "The 'preconditioner' parameter of LSSVMRegressor must be a str among"),
        (dict(kernel_storage="disk"), "The 'kernel_storage' parameter of LSSVMRegressor must be a str among"),
        (dict(kernel_storage="stored"), "The 'kernel_storage' parameter of LSSVMRegressor must be a str among"),
        (dict(max_iter=0), "The 'max_iter' parameter of LSSVMRegressor must be None or an int in the range"),
        (dict(preconditioner_rank=0), "The 'preconditioner_rank' parameter of LSSVMRegressor must be None or an int"),
        (dict(preconditioner_rank=1000), "preconditioner_rank: at most n_samples=30, got 1000"),
        (dict(tol=-1.0), "The 'tol' parameter of LSSVMRegressor must be None or a float in the range"),
        (dict(kernel="sigmoid"), "The 'kernel' parameter of LSSVMRegressor must be a str among"),
        (dict(feature_map="quadratic"), "The 'feature_map' parameter of LSSVMRegressor must be None, a str among"),
        (dict(feature_map=object()), "The 'feature_map' parameter of LSSVMRegressor must be None, a str among"),
        (dict(solver="primal"), "feature_map: "),
        (dict(solver="cg", feature_map="linear"), "feature_map: "),
        (dict(loo="yes"), "The 'loo' parameter of LSSVMRegressor must be an instance of 'bool'"),
        (dict(n_threads=0), "The 'n_threads' parameter of LSSVMRegressor must be None"),
    ],
)
def test_invalid_parameters_name_the_argument(rng, params, match):
    X, Y = regression_data(rng, n=30)
    with pytest.raises(ValueError, match=match):
        LSSVMRegressor(**params).fit(X, Y.ravel())


def test_invalid_data_name_the_argument(rng):
    X, Y = regression_data(rng, n=30)
    bad = X.copy()
    bad[3, 1] = np.nan
    with pytest.raises(ValueError, match="X"):
        LSSVMRegressor().fit(bad, Y.ravel())
    with pytest.raises(ValueError, match="y"):
        LSSVMRegressor().fit(X, np.where(np.arange(30) == 4, np.inf, Y.ravel()))
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        LSSVMRegressor().fit(X, Y[:20].ravel())
    model = LSSVMRegressor().fit(X, Y.ravel())
    with pytest.raises(ValueError, match="features"):
        model.predict(X[:, :2])


def test_kernel_matrix_that_cannot_fit_is_refused_before_allocating(rng, monkeypatch):
    import rkm._utils.validation

    monkeypatch.setattr(rkm._utils.validation, "available_memory_bytes", lambda: 2**20)
    X, Y = regression_data(rng, n=1000)
    with pytest.raises(MemoryError, match="solver='cg'.*Nystroem"):
        LSSVMRegressor().fit(X, Y.ravel())


def test_non_contiguous_input_works(rng):
    X, Y = regression_data(rng, n=80, d=6)
    model = LSSVMRegressor(gamma=0.3).fit(X[:, ::2], Y.ravel())
    np.testing.assert_allclose(
        model.predict(X[:, ::2]), LSSVMRegressor(gamma=0.3).fit(X[:, ::2].copy(), Y.ravel()).predict(X[:, ::2].copy())
    )


def test_estimators_are_exported():
    assert rkm.LSSVMRegressor is LSSVMRegressor and rkm.LSSVMClassifier is LSSVMClassifier
    assert "LSSVMRegressor" in rkm.__all__ and "LSSVMClassifier" in rkm.__all__


def test_no_warning_on_a_plain_fit(rng):
    X, Y = regression_data(rng, n=50)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        LSSVMRegressor().fit(X, Y.ravel())


# ------------------------------------------------------------------------------------- conjugate gradients


@pytest.mark.parametrize("preconditioner", ["nystrom", "pivoted_cholesky", None])
@pytest.mark.parametrize("kernel_storage", ["matrix_free", "dense"])
def test_cg_solver_agrees_with_cholesky(rng, preconditioner, kernel_storage):
    X, Y = regression_data(rng, n=400, p=2)
    params = dict(gamma=0.5, lam=0.05, eta=2.0)
    exact = LSSVMRegressor(mixed_precision=False, **params).fit(X, Y)
    model = LSSVMRegressor(
        solver="cg",
        preconditioner=preconditioner,
        kernel_storage=kernel_storage,
        tol=1e-10,
        preconditioner_rank=50,
        random_state=0,
        **params,
    ).fit(X, Y)
    assert model.solver_ == "cg" and model.n_iter_ >= 1 and np.max(model.cg_residuals_) <= 1e-10
    X_new = rng.standard_normal((30, 3))
    np.testing.assert_allclose(model.predict(X_new), exact.predict(X_new), atol=1e-7 * np.abs(Y).max())


def test_verbose_lines_carry_the_estimator_name(rng, capsys):
    X, Y = regression_data(rng, n=200)
    LSSVMRegressor(solver="cg", lam=0.1, preconditioner=None, tol=1e-10, verbose=1).fit(X, Y.ravel())
    lines = capsys.readouterr().out.splitlines()
    assert all(line.startswith("LSSVMRegressor [") for line in lines)
    assert lines[0].endswith("solver 'cg', N = 200, 1 output(s)")
    assert any("iteration 10: max relative residual" in line for line in lines)
    assert "converged" in lines[-1]
    LSSVMRegressor(solver="cg", lam=0.1, preconditioner=None, tol=1e-10).fit(X, Y.ravel())
    assert capsys.readouterr().out == ""


def test_cg_solver_warns_when_it_stops_early(rng):
    X, Y = regression_data(rng, n=300)
    with pytest.warns(ConvergenceWarning, match="solver='cg' stopped after 2 iterations"):
        model = LSSVMRegressor(solver="cg", lam=1e-4, max_iter=2, preconditioner=None).fit(X, Y.ravel())
    assert model.n_iter_ == 2


def test_auto_solver_takes_cg_beyond_the_dense_limit(rng, monkeypatch):
    from rkm.shallow import lssvm

    monkeypatch.setattr(lssvm, "AUTO_CHOLESKY_MAX_SAMPLES", 100)
    X, Y = regression_data(rng, n=150)
    model = LSSVMRegressor(gamma=0.5, lam=0.1, random_state=0).fit(X, Y.ravel())
    assert model.solver_ == "cg"
    assert LSSVMRegressor(gamma=0.5, lam=0.1, loo=True).fit(X, Y.ravel()).solver_ == "cholesky"
    np.testing.assert_allclose(
        model.predict(X), LSSVMRegressor(gamma=0.5, lam=0.1, solver="cholesky").fit(X, Y.ravel()).predict(X), atol=1e-5
    )


# ------------------------------------------------------------------------------------- issue 23: weights, robust


def _weighted_oracle(K, y, weights, lam, eta=1.0):
    """NumPy solve of eq. 3.16 with lam / v_k on the diagonal, samples of weight 0 removed (h_k = 0)."""
    active = weights > 0
    n = int(active.sum())
    A = np.zeros((n + 1, n + 1))
    A[:n, :n] = K[np.ix_(active, active)] / eta + np.diag(lam / weights[active])
    A[:n, n] = A[n, :n] = 1.0
    solution = np.linalg.solve(A, np.r_[y[active], 0.0])
    H = np.zeros(len(y))
    H[active] = solution[:n]
    return H, solution[n]


@pytest.mark.parametrize("solver", ["cholesky", "cg"])
def test_sample_weight_matches_a_numpy_solve(rng, solver):
    X, Y = regression_data(rng, n=80)
    y = Y.ravel()
    weights = rng.uniform(0.2, 3.0, len(y))
    weights[:4] = 0.0
    model = LSSVMRegressor(gamma=0.5, lam=0.05, eta=1.5, solver=solver, tol=1e-12).fit(X, y, sample_weight=weights)
    H, b = _weighted_oracle(kernel_matrix(X, kernel="rbf", gamma=0.5), y, weights, 0.05, eta=1.5)
    scale = np.abs(H).max()
    np.testing.assert_allclose(model.dual_coef_.ravel(), H, atol=1e-9 * scale)
    np.testing.assert_allclose(model.intercept_[0], b, atol=1e-9 * np.abs(y).max())


def test_sample_weight_primal_equals_dual_and_integer_weights_equal_repeats(rng):
    X, Y = regression_data(rng, n=60)
    y = Y.ravel()
    weights = rng.integers(0, 3, len(y)).astype(float)
    primal = LSSVMRegressor(feature_map="linear", lam=0.1).fit(X, y, sample_weight=weights)
    dual = LSSVMRegressor(kernel="linear", lam=0.1).fit(X, y, sample_weight=weights)
    repeated = np.repeat(np.arange(len(y)), weights.astype(int))
    copies = LSSVMRegressor(kernel="linear", lam=0.1).fit(X[repeated], y[repeated])
    X_new = rng.standard_normal((20, 3))
    np.testing.assert_allclose(primal.predict(X_new), dual.predict(X_new), atol=1e-10)
    np.testing.assert_allclose(dual.predict(X_new), copies.predict(X_new), atol=1e-10)


def test_weighted_loo_residuals_equal_refits(rng):
    X, Y = regression_data(rng, n=70)
    y = Y.ravel()
    weights = rng.uniform(0.3, 2.0, len(y))
    model = LSSVMRegressor(gamma=0.5, lam=0.02, loo=True).fit(X, y, sample_weight=weights)
    for i in (0, 17, 55):
        keep = np.arange(len(y)) != i
        refit = LSSVMRegressor(gamma=0.5, lam=0.02).fit(X[keep], y[keep], sample_weight=weights[keep])
        np.testing.assert_allclose(model.loo_residuals_[i], y[i] - refit.predict(X[i : i + 1])[0], atol=1e-9)


def test_cross_val_score_routes_sample_weight(rng):
    from sklearn import config_context
    from sklearn.model_selection import KFold, cross_val_score

    X, Y = regression_data(rng, n=60)
    y = Y.ravel()
    weights = rng.uniform(0.5, 2.0, len(y))
    folds = KFold(3)
    expected = [
        LSSVMRegressor(gamma=0.5).fit(X[train], y[train], sample_weight=weights[train]).score(X[test], y[test])
        for train, test in folds.split(X)
    ]
    # Without metadata routing the params go to fit; with it, the request is explicit.
    np.testing.assert_allclose(
        cross_val_score(LSSVMRegressor(gamma=0.5), X, y, cv=folds, params={"sample_weight": weights}), expected
    )
    with config_context(enable_metadata_routing=True):
        model = LSSVMRegressor(gamma=0.5).set_fit_request(sample_weight=True).set_score_request(sample_weight=False)
        np.testing.assert_allclose(cross_val_score(model, X, y, cv=folds, params={"sample_weight": weights}), expected)


def test_robust_weights_are_suykens_2002s():
    from rkm.shallow.lssvm import robust_weights

    r = np.array([0.0, 1.0, -2.5, 2.75, -3.0, 3.5, 100.0])
    np.testing.assert_allclose(robust_weights(r, "hampel"), [1, 1, 1, 0.5, 0, 1e-4, 1e-4])
    np.testing.assert_allclose(
        robust_weights(r, "huber"), [1, 1, 1.345 / 2.5, 1.345 / 2.75, 1.345 / 3, 1.345 / 3.5, 0.01345]
    )
    np.testing.assert_allclose(robust_weights(r[1:], "logistic"), np.tanh(np.abs(r[1:])) / np.abs(r[1:]))
    assert robust_weights([0.0], "logistic")[0] == 1.0


@pytest.mark.parametrize("weights", ["hampel", "huber", "logistic"])
def test_robust_lssvm_resists_outliers(weights):
    # LS-SVMlab's robust regression demo: sinc with noise and six outliers.
    rng = np.random.default_rng(4)
    X = np.arange(-6, 6.01, 0.2)[:, None]
    clean = np.sinc(X.ravel() / np.pi)
    y = clean + 0.1 * rng.random(len(clean))
    outliers = np.array([14, 16, 18, 40, 43, 45])
    y[outliers[:3]] = 0.7 + 0.3 * rng.random(3)
    y[outliers[3:]] = 1.5 + 0.2 * rng.random(3)
    params = dict(gamma=1.0, lam=0.01)
    plain = LSSVMRegressor(**params).fit(X, y)
    robust = LSSVMRegressor(robust=weights, **params).fit(X, y)
    others = np.setdiff1d(np.arange(len(y)), outliers)
    truth = clean + 0.05
    plain_error = np.abs(plain.predict(X[others]) - truth[others]).max()
    robust_error = np.abs(robust.predict(X[others]) - truth[others]).max()
    assert robust_error < 0.5 * plain_error
    assert robust.robust_weights_[outliers].max() < robust.robust_weights_[others].min()
    assert robust.n_robust_iter_ >= 1
    if weights == "hampel":
        np.testing.assert_allclose(robust.robust_weights_[outliers], 1e-4)


def test_robust_with_cg_and_primal_agree_with_cholesky(rng):
    X, Y = regression_data(rng, n=60)
    y = Y.ravel()
    y[[3, 30]] += 4.0
    cholesky = LSSVMRegressor(kernel="linear", lam=0.1, robust="huber").fit(X, y)
    primal = LSSVMRegressor(feature_map="linear", lam=0.1, robust="huber").fit(X, y)
    # The same fixed-point iteration; each stops once its coefficients (W or H) change by 1e-4 relatively.
    np.testing.assert_allclose(primal.robust_weights_, cholesky.robust_weights_, atol=5e-3)
    np.testing.assert_allclose(primal.predict(X), cholesky.predict(X), atol=1e-3 * np.abs(y).max())


# ------------------------------------------------------------------------------------- probabilities


@pytest.mark.parametrize("n_classes", [2, 3])
def test_predict_proba_equals_calibrated_classifier_cv(rng, n_classes):
    from sklearn.base import clone
    from sklearn.calibration import CalibratedClassifierCV
    from sklearn.datasets import make_classification

    X, y = make_classification(150, 4, n_informative=3, n_redundant=0, n_classes=n_classes, random_state=1)
    model = LSSVMClassifier(gamma=0.3, lam=0.1, probability=True).fit(X, y)
    reference = CalibratedClassifierCV(
        clone(model).set_params(probability=False), method="sigmoid", cv=5, ensemble=False
    ).fit(X, y)
    X_new = rng.standard_normal((30, 4))
    np.testing.assert_allclose(model.predict_proba(X_new), reference.predict_proba(X_new), atol=1e-12)
    np.testing.assert_allclose(model.predict_proba(X_new).sum(axis=1), 1.0)
    assert np.all(np.isfinite(model.predict_log_proba(X_new)))


def test_predict_proba_needs_probability_true(rng):
    model = LSSVMClassifier().fit(rng.standard_normal((20, 2)), np.arange(20) % 2)
    assert not hasattr(model, "predict_proba")
    with pytest.raises(AttributeError, match="predict_proba"):
        model.predict_proba(np.zeros((1, 2)))


def test_predict_proba_with_small_classes(rng):
    X = rng.standard_normal((13, 2))
    model = LSSVMClassifier(probability=True).fit(X, np.r_[np.zeros(10), np.ones(3)])
    assert model.calibration_.n_splits_ == 3
    with pytest.raises(ValueError, match="y: probability=True needs at least 2 samples of every class"):
        LSSVMClassifier(probability=True).fit(X, np.r_[np.zeros(12), np.ones(1)])


# ------------------------------------------------------------------------------------- LOO path (LSSVM*CV)


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("weighted", [False, True])
def test_loo_path_equals_brute_force_refits(rng, fit_intercept, weighted):
    from rkm.shallow.lssvm_cv import loo_path

    X, Y = regression_data(rng, n=60, p=2)
    weights = rng.uniform(0.3, 2.0, len(X)) if weighted else None
    lams = [1e-4, 1e-2, 1.0]
    K = kernel_matrix(X, kernel="rbf", gamma=0.5)
    residuals = loo_path(K, Y, lams, eta=1.5, fit_intercept=fit_intercept, sample_weight=weights)
    for index, lam in enumerate(lams):
        for i in (0, 21, 59):
            keep = np.arange(len(X)) != i
            refit = LSSVMRegressor(gamma=0.5, lam=lam, eta=1.5, fit_intercept=fit_intercept).fit(
                X[keep], Y[keep], sample_weight=None if weights is None else weights[keep]
            )
            np.testing.assert_allclose(residuals[index, i], Y[i] - refit.predict(X[i : i + 1])[0], atol=1e-8)


def test_regressor_cv_picks_the_loo_minimum_and_refits(rng):
    X, Y = regression_data(rng, n=80)
    y = Y.ravel()
    lams, gammas = [1e-4, 1e-2, 1.0], [0.1, 1.0]
    model = rkm.LSSVMRegressorCV(lams=lams, gammas=gammas).fit(X, y)
    brute = np.array([[LSSVMRegressor(gamma=g, lam=lam, loo=True).fit(X, y).loo_mse_ for lam in lams] for g in gammas])
    np.testing.assert_allclose(model.loo_mse_path_, brute, rtol=1e-8)
    g, i = np.unravel_index(np.argmin(brute), brute.shape)
    assert (model.gamma_, model.lam_) == (gammas[g], lams[i])
    expected = LSSVMRegressor(gamma=gammas[g], lam=lams[i]).fit(X, y)
    np.testing.assert_allclose(model.predict(X), expected.predict(X), atol=1e-10)


def test_classifier_cv_error_path_matches_loo_error(rng):
    X = rng.standard_normal((90, 2))
    y = np.where(X[:, 0] + 0.4 * rng.standard_normal(90) > 0, "a", "b")
    model = rkm.LSSVMClassifierCV(lams=[0.01, 1.0], gammas=[0.5]).fit(X, y)
    for i, lam in enumerate([0.01, 1.0]):
        assert model.loo_error_path_[0, i] == pytest.approx(
            LSSVMClassifier(gamma=0.5, lam=lam, loo=True).fit(X, y).loo_error_
        )
    assert model.score(X, y) > 0.8


# ------------------------------------------------------------------------------------- CG at small lam


def test_cg_converges_at_small_lam_with_the_adaptive_preconditioner():
    # Issue 23's repro (N = 3000 there): gamma = .2, lam = 1e-5 stopped at relative residual 0.35 with a fixed rank.
    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 5))
    y = np.sin(X.sum(axis=1)) + 0.1 * rng.normal(size=600)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        model = LSSVMRegressor(gamma=0.2, lam=1e-5, solver="cg", max_iter=300, random_state=0).fit(X, y)
    assert model.cg_residuals_.max() <= 1e-6
    exact = LSSVMRegressor(gamma=0.2, lam=1e-5).fit(X, y)
    np.testing.assert_allclose(model.predict(X), exact.predict(X), atol=1e-4 * np.abs(y).max())


# ------------------------------------------------------------------------------------- input layouts, copies


def test_fortran_and_non_contiguous_inputs(rng):
    X = rng.random((20, 3))
    Y = rng.random((2, 20)).T  # Fortran-ordered, as a two-column DataFrame
    reference = LSSVMRegressor().fit(np.ascontiguousarray(X), np.ascontiguousarray(Y))
    for X_in, Y_in in [(X, Y), (np.asfortranarray(X), Y), (rng.random((20, 6))[:, ::2], rng.random((20, 4))[:, ::2])]:
        model = LSSVMRegressor().fit(X_in, Y_in)
        expected = LSSVMRegressor().fit(np.ascontiguousarray(X_in), np.ascontiguousarray(Y_in))
        np.testing.assert_allclose(model.predict(X_in), expected.predict(np.ascontiguousarray(X_in)), atol=1e-12)
    np.testing.assert_allclose(LSSVMRegressor().fit(X, Y).predict(X), reference.predict(X), atol=1e-12)
    labels = np.arange(20) % 2
    LSSVMClassifier(solver="cg").fit(np.asfortranarray(X), labels)


@pytest.mark.parametrize("solver", ["cholesky", "cg"])
def test_training_array_is_copied(rng, solver):
    X, Y = regression_data(rng, n=40)
    model = LSSVMRegressor(solver=solver).fit(X, Y.ravel())
    before = model.predict(X.copy())
    probe = X.copy()
    assert model.X_fit_ is not X
    X[:] = 0.0
    np.testing.assert_array_equal(model.predict(probe), before)


def test_callable_kernel_equals_the_named_kernel(rng):
    X, Y = regression_data(rng, n=50)
    model = LSSVMRegressor(kernel=lambda A, B: (A @ B.T + 1.0) ** 2, lam=0.1, loo=True).fit(X, Y.ravel())
    named = LSSVMRegressor(kernel="poly", gamma=1.0, degree=2, coef0=1.0, lam=0.1, loo=True).fit(X, Y.ravel())
    np.testing.assert_allclose(model.predict(X), named.predict(X), atol=1e-10)
    np.testing.assert_allclose(model.loo_residuals_, named.loo_residuals_, atol=1e-10)
    with pytest.raises(ValueError, match="callable kernel needs solver='cholesky'"):
        LSSVMRegressor(kernel=lambda A, B: A @ B.T, solver="cg").fit(X, Y.ravel())


def test_sparse_input_equals_dense(rng):
    import scipy.sparse as sp

    X, Y = regression_data(rng, n=50)
    X[np.abs(X) < 0.5] = 0.0
    sparse = sp.csr_matrix(X)
    model = LSSVMClassifier(gamma=0.4).fit(sparse, Y.ravel() > 0)
    dense = LSSVMClassifier(gamma=0.4).fit(X, Y.ravel() > 0)
    np.testing.assert_allclose(model.decision_function(sparse), dense.decision_function(X), atol=1e-12)
    with pytest.raises(ValueError, match="X: sparse input"):
        LSSVMRegressor(solver="cg").fit(sparse, Y.ravel())


def test_cg_convergence_warning_is_rkms_and_points_at_the_caller(rng):
    from rkm.exceptions import ConvergenceWarning as RkmConvergenceWarning

    X, Y = regression_data(rng, n=200)
    with pytest.warns(RkmConvergenceWarning) as record:
        LSSVMRegressor(solver="cg", max_iter=1, preconditioner=None, lam=1e-3).fit(X, Y.ravel())
    assert record[0].filename == __file__


def test_auto_falls_back_to_cholesky_when_cg_is_too_slow(rng, monkeypatch):
    from rkm.shallow import lssvm

    monkeypatch.setattr(lssvm, "AUTO_CHOLESKY_MAX_SAMPLES", 50)
    X = rng.normal(size=(300, 5))
    y = np.sin(X.sum(axis=1))
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        model = LSSVMRegressor(gamma=0.2, lam=1e-7, preconditioner_rank=10, max_iter=60).fit(X, y)
    assert model.solver_ == "cholesky"
    exact = LSSVMRegressor(gamma=0.2, lam=1e-7, solver="cholesky").fit(X, y)
    np.testing.assert_allclose(model.predict(X), exact.predict(X), atol=1e-10)
    assert LSSVMRegressor(gamma=0.5, lam=1.0).fit(X, y).solver_ == "cg"  # well conditioned: CG converges
