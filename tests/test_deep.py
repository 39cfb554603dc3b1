"""rkm.DeepRKM (Suykens 2017, sections 4-5); the core's reduced-set objective (M1, eqs. 5.2-5.4) is in
test_core_deep.py."""

import warnings

import numpy as np
import pytest
from conftest import assert_close
from sklearn.base import clone, is_classifier, is_regressor
from sklearn.calibration import CalibratedClassifierCV
from sklearn.datasets import load_digits

from rkm import DeepRKM, DeepRKMClassifier, DeepRKMRegressor, LSSVMClassifier, LSSVMRegressor, _core, reference
from rkm.datasets import make_deep_rkm_regression
from rkm.deep import DivergenceError, _levelwise, _primal
from rkm.exceptions import ConvergenceWarning
from rkm.kernels import RBF, kernel_matrix


def _regression(n=60, d=3, p=1, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(n, d))
    Y = np.column_stack([np.sin(X @ rng.normal(size=d)) for _ in range(p)]) + 0.05 * rng.normal(size=(n, p))
    return X, (Y.ravel() if p == 1 else Y)


# ---------------------------------------------------------------- level-wise, eq. 4.18


def test_first_level1_step_is_the_lssvm():
    X, y = _regression()
    deep = DeepRKM(n_components=(1, 1), gamma=0.5, lam=0.01, n_passes=1, phases="forward").fit(X, y)
    basic = LSSVMRegressor(gamma=0.5, lam=0.01).fit(X, y)
    assert_close(deep.H_[0].ravel(), basic.H_.ravel(), 1e-9)
    assert_close(deep.intercept_, basic.intercept_, 1e-9)
    assert_close(deep.predict(X), basic.predict(X), 1e-9)


@pytest.mark.parametrize("inverse_eta", [1e-3, 1.0, 1e5])
def test_fused_level1_solve_matches_the_dense_bordered_system(inverse_eta):
    X, y = _regression(n=50)
    rng = np.random.default_rng(1)
    K = kernel_matrix(X, kernel="rbf", gamma=0.5)
    H2, _ = np.linalg.qr(rng.normal(size=(50, 3)))
    eta2, lam = 1 / inverse_eta, 1e-6
    level = _levelwise.FusedLSSVMLevel(K.copy(), 1.0, lam, y[:, None], True)
    H1, b, K_H1 = level.solve(H2, eta2, lam)
    A = np.block([[K + H2 @ H2.T / eta2 + lam * np.eye(50), np.ones((50, 1))], [np.ones((1, 50)), np.zeros((1, 1))]])
    dense = np.linalg.solve(A, np.concatenate([y, [0.0]]))
    assert_close(H1.ravel(), dense[:-1], 1e-7)
    assert_close(b, dense[-1:], 1e-7)
    assert_close(K_H1, K @ H1, 1e-7)


@pytest.mark.parametrize("p, components", [(1, (1, 1)), (1, (3, 2)), (2, (3, 2))])
@pytest.mark.parametrize("phases", ["forward_backward", "forward"])
def test_levelwise_lssvm_kpca_kpca_matches_reference(p, components, phases):
    X, y = _regression(p=p)
    etas = (1.0, 0.01, 0.02)
    model = DeepRKM(n_components=components, gamma=0.5, lam=0.05, eta=etas, n_passes=3, phases=phases).fit(X, y)
    K = kernel_matrix(X, kernel="rbf", gamma=0.5)
    expected = reference.deep_levelwise_lssvm_kpca_kpca(K, y.reshape(len(X), -1), etas, 0.05, components, 3, phases)
    # (3, 2) keeps a level-2 eigenvalue about 1e-10 of the largest: its eigenvector is determined only to about
    # eps * largest / gap, and it enters level 1 with weight 1/eta2 = 100.
    for mine, theirs in zip(model.H_, (expected["H1"], expected["H2"], expected["H3"])):
        assert_close(mine, theirs, 1e-5)
    assert_close(model.intercept_, expected["b"], 1e-5)
    assert_close(model.eigenvalues_[0], expected["eigenvalues2"], 1e-5)
    assert_close(model.objective_history_, [value for _, value in expected["history"]], 1e-5)
    assert_close(model.objective_, expected["objective"], 1e-5)


def test_levelwise_lssvm_kpca_kpca_solution_properties():
    X, y = _regression(p=2)
    etas, lam = (1.0, 0.1, 0.1), 0.05
    model = DeepRKM(n_components=(3, 2), kernel="linear", lam=lam, eta=etas, n_passes=2).fit(X, y)
    H1, H2, H3 = model.H_
    # Level 1 was solved last: its fused system holds with the final H2 (linear K1 = X X^T).
    fused = X @ X.T / etas[0] + H2 @ H2.T / etas[1] + lam * np.eye(len(X))
    assert_close(fused @ H1 + model.intercept_, y, 1e-8)
    assert_close(H1.sum(axis=0), np.zeros(2), 1e-9)
    kept = model.eigenvalues_[0] > 0
    assert_close(H2[:, kept].T @ H2[:, kept], np.eye(kept.sum()), 1e-10)
    assert_close(H2.T @ np.ones(len(X)), np.zeros(3), 1e-9)
    assert model.n_effective_components_[0] == kept.sum() <= 2 + 2  # rank <= p + s3
    # J_deep of eq. 4.13 with explicit W (linear kernels everywhere) at the final unknowns.
    W1 = X.T @ H1 / etas[0]
    W2, W3 = H1.T @ H2 / etas[1], H2.T @ H3 / etas[2]
    l2, l3 = model.eigenvalues_
    J1 = np.sum((y - X @ W1 - model.intercept_) * H1) - lam / 2 * np.sum(H1**2) + etas[0] / 2 * np.sum(W1**2)
    J2 = -np.sum((H1 @ W2) * H2) + 0.5 * np.sum(l2 * np.sum(H2**2, 0)) + etas[1] / 2 * np.sum(W2**2)
    J3 = -np.sum((H2 @ W3) * H3) + 0.5 * np.sum(l3 * np.sum(H3**2, 0)) + etas[2] / 2 * np.sum(W3**2)
    assert_close(model.objective_, J1 + J2 + J3, 1e-9)


def test_levelwise_is_deterministic_and_random_init_is_seeded():
    X, y = _regression()
    first = DeepRKM(n_components=(2, 1), gamma=0.5, lam=0.05, init="random", random_state=3).fit(X, y)
    second = DeepRKM(n_components=(2, 1), gamma=0.5, lam=0.05, init="random", random_state=3).fit(X, y)
    np.testing.assert_array_equal(first.predict(X), second.predict(X))


def test_levelwise_classification_with_weak_coupling_equals_the_lssvm_classifier():
    X, y = load_digits(return_X_y=True)
    X, y = X[:400] / 16, np.array(list("abcdefghij"))[y[:400]]
    deep = DeepRKM(n_components=(10, 1), gamma=0.02, lam=1e-3, eta=(1.0, 1e12, 1e12), n_passes=2).fit(X, y)
    basic = LSSVMClassifier(gamma=0.02, lam=1e-3).fit(X, y)
    assert deep.task_ == "classification"
    assert_close(deep.decision_function(X[:50]), basic.decision_function(X[:50]), 1e-6)
    np.testing.assert_array_equal(deep.predict(X), basic.predict(X))
    assert deep.score(X, y) > 0.95


def test_strong_coupling_changes_the_solution():
    X, y = _regression()
    weak = DeepRKM(gamma=0.5, lam=0.01, eta=(1.0, 1e8, 1e8), n_passes=1, phases="forward_backward").fit(X, y)
    strong = DeepRKM(gamma=0.5, lam=0.01, eta=(1.0, 1e-5, 1e-5), n_passes=1, phases="forward_backward").fit(X, y)
    assert np.abs(weak.predict(X) - strong.predict(X)).max() > 1e-3
    # The backward level-1 step with 1/eta2 = 1e5 leaves H1 nearly orthogonal to the level-2 direction.
    H1, H2 = strong.H_[0].ravel(), strong.H_[1].ravel()
    assert abs(H1 @ H2) < 1e-5 * np.linalg.norm(H1)


def test_strong_coupling_alternates_between_two_states_and_warns():
    X, y = _regression()
    passes = dict(gamma=0.5, lam=0.01, eta=(1.0, 1e-5, 1e-5), phases="forward_backward")
    with pytest.warns(ConvergenceWarning, match="period-2 cycle"):
        strong = DeepRKM(**passes, n_passes=4).fit(X, y)
    assert strong.cycle_ and not strong.converged_
    assert strong.pass_changes_.shape == (3,) and np.all(strong.pass_changes_ > 0.1)
    with pytest.warns(ConvergenceWarning, match="period-2 cycle"):
        odd = DeepRKM(**passes, n_passes=3).fit(X, y)
    first = DeepRKM(**passes, n_passes=1).fit(X, y)
    assert_close(odd.predict(X), first.predict(X), 1e-5)  # the state of pass 1 returns at passes 3, 5, ...
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        weak = DeepRKM(gamma=0.5, lam=0.01, eta=(1.0, 1e8, 1e8), n_passes=3, phases="forward_backward").fit(X, y)
    # The passes stop once one changes the unknowns by at most tol.
    assert weak.converged_ and weak.n_iter_ == 2 and np.all(weak.pass_changes_ < 1e-6)
    # A pass's forward L1 repeats the previous backward L1 (same H2): the same value, not a new solve.
    assert strong.objective_history_[4] == strong.objective_history_[5]


# ---------------------------------------------------------------- level-wise, eq. 4.11


def test_levelwise_kpca_kpca_lssvm_matches_reference_and_eq_4_9():
    X, y = _regression(p=1)
    etas = (1.0, 0.5, 2.0)
    with pytest.warns(ConvergenceWarning, match="not settled"):
        model = DeepRKM(
            "kpca_kpca_lssvm", n_components=(3, 2), gamma=0.5, lam=0.1, eta=etas, n_passes=2, phases="forward"
        ).fit(X, y)
    K = kernel_matrix(X, kernel="rbf", gamma=0.5)
    expected = reference.deep_levelwise_kpca_kpca_lssvm(K, y[:, None], etas, 0.1, (3, 2), 2, "forward")
    for mine, theirs in zip(model.H_[:2], (expected["H1"], expected["H2"])):
        assert_close(mine, theirs, 1e-7)
    assert_close(model.objective_history_, [value for _, value in expected["history"]], 1e-7)
    # Level 3 is re-solved after the passes on eq. 4.9's features at the training points, F2 = Lambda2^-1 e2:
    # the LS-SVM on their linear kernel.
    H1, H2, H3 = model.H_
    l1, l2 = model.eigenvalues_

    def features(X_new):
        e1 = kernel_matrix(X_new, X, kernel="rbf", gamma=0.5) @ H1 / etas[0]
        return ((e1 / l1) @ H1.T @ H2 / etas[1]) / l2

    F2 = features(X)
    basic = LSSVMRegressor(kernel="precomputed", eta=etas[2], lam=0.1).fit(F2 @ F2.T, y)
    assert_close(H3.ravel(), basic.H_.ravel(), 1e-8)
    assert_close(model.intercept_, basic.intercept_, 1e-8)
    # Eq. 4.9 out of sample, written out, with W3 = F2^T H3 / eta3.
    X_new = X[:7] + 0.1
    assert_close(model.predict(X_new), (features(X_new) @ F2.T @ H3 / etas[2] + model.intercept_).ravel(), 1e-9)


def test_kpca_kpca_lssvm_predicts_its_training_output():
    # Issue 23: level 3 regressed Y on the coupled H2 (training MSE ~0 through H2 H2^T H3 / eta3 + b) while
    # predict(X_train) was near a constant. Now predict(X_train) is the training-time output.
    data = make_deep_rkm_regression(0.5, random_state=3)
    X, y = data.data, data.target
    etas = (1.0, 1e-3, 1e-3)
    with pytest.warns(ConvergenceWarning):  # the passes of eq. 4.11 have not settled at this coupling
        model = DeepRKM("kpca_kpca_lssvm", n_components=(50, 50), gamma=1.0, lam=1e-3, eta=etas, phases="forward").fit(
            X, y
        )
    H1, H2, H3 = model.H_
    l1, l2 = (_levelwise.pseudo_inverse(w) for w in model.eigenvalues_)
    F2 = ((kernel_matrix(X, kernel="rbf", gamma=1.0) @ H1 / etas[0] * l1) @ H1.T @ H2 / etas[1]) * l2
    training_output = (F2 @ (F2.T @ H3) / etas[2] + model.intercept_).ravel()
    assert_close(model.predict(X), training_output, 1e-9)
    # Level 3's stationarity condition holds with those features: y = output + lam h3.
    assert_close(training_output + 1e-3 * H3.ravel(), y, 1e-8)
    basic = LSSVMRegressor(gamma=1.0, lam=0.01).fit(X, y)
    test_mse = np.mean((model.predict(data.data_test) - data.target_test) ** 2)
    assert test_mse < 2 * np.mean((basic.predict(data.data_test) - data.target_test) ** 2)


# ---------------------------------------------------------------- primal methods (M1, M2)


def _binary(n=120, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    y = (X[:, 0] + 0.5 * X[:, 1] ** 2 > 0.4).astype(int)
    return X, y


def test_reduced_set_fit_reaches_the_objective_it_reports():
    X, y = _binary()
    model = DeepRKM(
        "kpca_kpca_lssvm",
        solver="reduced_set",
        n_components=(2, 2),
        gamma=1.0,
        lam=0.01,
        eta=(1.0, 1.0, 1.0),
        c_stab=10.0,
        c0=0.1,
        n_reduced=15,
        max_iter=200,
        random_state=0,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(X, y)
    s1, s2 = 2, 2
    theta = np.concatenate(
        [model.H_[0].ravel(), model.H_[1].ravel(), model.H_[2].ravel(), model.intercept_, *model.eigenvalues_]
    )
    K1 = kernel_matrix(X, model.reduced_set_, kernel="rbf", gamma=1.0)
    G1 = kernel_matrix(model.reduced_set_, kernel="rbf", gamma=1.0)
    kernel = ("rbf", 1.0, 3.0, 1.0)
    f, _, terms = _core.deep_reduced_set_objective(
        theta,
        K1,
        G1,
        (2.0 * y - 1.0)[:, None],
        (15, s1, s2, 1),
        kernel,
        kernel,
        (1.0, 1.0, 1.0),
        0.01,
        10.0,
        0.1,
        "H",
        "full",
    )
    assert_close(model.objective_, f, 1e-12)
    assert_close(model.terms_, terms, 1e-12)
    assert model.objective_history_[-1] <= model.objective_history_[0]
    outputs, _, _ = _core.deep_reduced_set_forward(theta, K1, (15, s1, s2, 1), kernel, kernel, (1.0, 1.0, 1.0))
    assert_close(model.decision_function(X), outputs.ravel(), 1e-12)
    assert model.score(X, y) > 0.8


def test_primal_selection_on_validation_data():
    X, y = _binary(n=160)
    model = DeepRKM(
        "kpca_kpca_lssvm",
        solver="feedforward",
        n_components=(2, 2),
        hidden_layer_sizes=(3, 3, 3),
        lam=0.01,
        eta=(1.0, 1.0, 1.0),
        n_init=3,
        max_iter=100,
        random_state=0,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(X[:100], y[:100], X_val=X[100:], y_val=y[100:])
    scores = [r["validation_score"] for r in model.init_results_]
    assert len(scores) == 3
    best = model.init_results_[int(np.argmax(scores))]
    assert model.objective_ == pytest.approx(best["objective"]) or scores.count(max(scores)) > 1
    assert_close(model.score(X[100:], y[100:]), max(scores), 1e-12)


@pytest.mark.parametrize("toeplitz", [False, True])
def test_feedforward_hidden_features_follow_the_stationarity_conditions(toeplitz):
    X, y = _regression(n=80, p=1)
    lam = 0.05
    model = DeepRKM(
        "kpca_kpca_lssvm",
        solver="feedforward",
        n_components=(2, 2),
        lam=lam,
        eta=(1.0, 1.0, 1.0),
        toeplitz=toeplitz,
        max_iter=50,
        random_state=0,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(X, y)
    assert_close(model.H_[2].ravel(), (y - model.predict(X)) / lam, 1e-10)
    dims = (3, 3, 3, 3, 2, 2, 1)
    theta = model._primal["theta"]
    assert theta.size == _primal.feedforward_size(dims, toeplitz)
    _, E1, _ = _primal.feedforward_forward(theta, X, dims, toeplitz)
    assert_close(model.H_[0], E1 / model.eigenvalues_[0], 1e-12)


def test_max_iter_reached_warns():
    X, y = _binary()
    with pytest.warns(ConvergenceWarning, match="L-BFGS stopped after 2 iterations"):
        DeepRKM("kpca_kpca_lssvm", solver="reduced_set", n_reduced=10, max_iter=2, random_state=0).fit(X, y)


def test_unbounded_objective_stops_with_the_iterate_reached():
    # c_stab = 0 with c0 > 0: f decreases without bound as Lambda grows (eq. 5.3 without stabilization).
    X, y = _binary()
    model = DeepRKM(
        "kpca_kpca_lssvm", solver="reduced_set", n_reduced=10, c_stab=0.0, c0=1.0, max_iter=400, random_state=0
    )
    with pytest.raises(DivergenceError) as info:
        model.fit(X, y)
    assert np.all(np.isfinite(info.value.iterate))
    assert "c_stab" in str(info.value)


# ---------------------------------------------------------------- parameters and bad input


def test_task_auto_and_multioutput_regression():
    X, Y = _regression(p=2)
    model = DeepRKM(n_components=(2, 1), gamma=0.5, lam=0.01, n_passes=2).fit(X, Y)
    assert model.task_ == "regression" and model.predict(X).shape == (len(X), 2)
    assert not hasattr(model, "decision_function")
    labels = DeepRKM(n_passes=1).fit(X, (Y[:, 0] > 0).astype(int))
    assert labels.task_ == "classification" and set(labels.predict(X)) <= {0, 1}
    # scikit-learn's type_of_target: integral floats are class labels.
    digits = np.arange(len(X)) % 10 * 1.0
    assert DeepRKM(n_components=(10, 1), gamma=0.5).fit(X, digits).task_ == "classification"


def test_regressor_and_classifier_fix_the_task():
    X, Y = _regression()
    counts = np.round(5 * (Y + 1))  # integer-valued regression targets
    regressor = DeepRKMRegressor(gamma=0.5, lam=0.01).fit(X, counts.astype(int))
    assert regressor.task_ == "regression" and is_regressor(regressor) and not is_classifier(regressor)
    assert_close(regressor.predict(X), DeepRKM(gamma=0.5, lam=0.01, task="regression").fit(X, counts).predict(X), 1e-12)
    assert not hasattr(regressor, "decision_function") and "task" not in regressor.get_params()
    labels = (np.arange(len(X)) % 3).astype(float)
    classifier = DeepRKMClassifier(n_components=(3, 1), gamma=0.5, lam=0.01).fit(X, labels)
    assert classifier.task_ == "classification" and is_classifier(classifier) and not is_regressor(classifier)
    np.testing.assert_array_equal(classifier.classes_, [0.0, 1.0, 2.0])
    assert not hasattr(classifier, "predict_proba")


@pytest.mark.parametrize("n_classes", [2, 3])
def test_classifier_probabilities_are_platt_scaling(n_classes):
    X, y = load_digits(n_class=n_classes, return_X_y=True)
    X, y = X[:150] / 16, y[:150]
    model = DeepRKMClassifier(n_components=(n_classes, 1), gamma=0.05, lam=1.0, probability=True).fit(X, y)
    base = clone(model).set_params(probability=False)
    oracle = CalibratedClassifierCV(base, method="sigmoid", cv=5, ensemble=False).fit(X, y)
    proba = model.predict_proba(X[:40])
    assert_close(proba, oracle.predict_proba(X[:40]), 1e-8)
    assert_close(proba.sum(axis=1), np.ones(40), 1e-12)
    np.testing.assert_array_equal(model.predict(X), base.fit(X, y).predict(X))


def test_kept_training_data_is_a_copy():
    X, y = _regression()
    for model in (
        DeepRKM(gamma=0.5, lam=0.01),
        DeepRKM("kpca_kpca_lssvm", n_components=(3, 2), gamma=0.5, lam=0.1, n_passes=2),
    ):
        X_fit = X.copy()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            model.fit(X_fit, y)
        before = model.predict(X)
        assert model.X_fit_ is not X_fit
        X_fit[:] = 0.0
        np.testing.assert_array_equal(model.predict(X), before)


# ---------------------------------------------------------------- issue 23: the level-wise default converges


@pytest.mark.parametrize(
    "params",
    [
        {},  # the defaults
        dict(gamma=1.0, lam=0.01),  # the reproduction
        dict(gamma=1.0, lam=0.01, eta=(1.0, 1e-5, 1e-5)),  # section 6.2.1: (1+1) with 1/eta = 1e5
        dict(gamma=1.0, lam=0.01, eta=(1.0, 1e-5, 1e-5), n_components=(7, 2)),  # (7+2)
    ],
)
def test_default_levelwise_converges_independently_of_n_passes(params):
    data = make_deep_rkm_regression(0.5, random_state=3)
    X, y = data.data, data.target
    predictions = []
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        for n_passes in (1, 2, 3, 4):
            model = DeepRKM(**params, n_passes=n_passes).fit(X, y)
            predictions.append(model.predict(data.data_test))
    assert model.converged_ and not model.cycle_
    for other in predictions[1:]:
        assert_close(other, predictions[0], 1e-12)


@pytest.mark.parametrize("p, components", [(1, (1, 1)), (1, (7, 2)), (2, (3, 2))])
def test_joint_solution_solves_eq_4_18(p, components):
    # With linear levels 2-3 every solution of eq. 4.18 has level 1 = the LS-SVM with lam + 1/eta2 along the
    # directions of H1 that level 2 keeps; keeping its leading components, level 2 keeps all of them.
    X, y = _regression(p=p)
    etas, lam = (1.0, 0.01, 0.02), 0.05
    model = DeepRKM(n_components=components, gamma=0.5, lam=lam, eta=etas).fit(X, y)
    H1, H2, H3 = model.H_
    l2, l3 = model.eigenvalues_
    K = kernel_matrix(X, kernel="rbf", gamma=0.5)
    Y = y.reshape(len(X), -1)
    assert_close((K / etas[0] + H2 @ H2.T / etas[1] + lam * np.eye(len(X))) @ H1 + model.intercept_, Y, 1e-8)
    assert_close(H1.sum(axis=0), np.zeros(p), 1e-9)
    assert_close((H1 @ H1.T / etas[1] + H3 @ H3.T / etas[2]) @ H2, H2 * l2, 1e-8)
    assert_close(H2 @ H2.T @ H3 / etas[2], H3 * l3, 1e-8)
    # Level 2 keeps its leading eigenvalues: every direction of H1 is in span(H2).
    assert_close(H2 @ (H2.T @ H1), H1, 1e-8)
    basic = LSSVMRegressor(gamma=0.5, lam=lam + 1 / etas[1]).fit(X, y)
    assert_close(model.predict(X), basic.predict(X), 1e-8)


def test_kernel_objects_and_per_level_kernels():
    X, y = _regression()
    by_object = DeepRKM(kernel=RBF.from_sigma(2.0), lam=0.01, n_passes=1).fit(X, y)
    by_gamma = DeepRKM(gamma=0.25, lam=0.01, n_passes=1).fit(X, y)
    assert_close(by_object.predict(X), by_gamma.predict(X), 1e-12)
    model = DeepRKM(
        "kpca_kpca_lssvm",
        solver="reduced_set",
        kernel=("rbf", "poly", "linear"),
        gamma=(0.5, 0.3, None),
        n_reduced=8,
        max_iter=5,
        random_state=0,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(X, y)
    assert [spec[0] for spec in model._kernels] == ["rbf", "poly", "linear"]
    assert model.predict(X).shape == y.shape


def _invalid(name):
    """scikit-learn's InvalidParameterError of a type or range check, which names the parameter."""
    return f"^The '{name}' parameter of DeepRKM must be"


@pytest.mark.parametrize(
    "params, message",
    [
        (dict(n_components=(60, 1)), "^n_components: s2 = 60 exceeds n_samples - 1"),
        (dict(n_components=(2, 3)), "^n_components: s3 = 3 exceeds s2 = 2"),
        (dict(n_components=(0, 1)), "^n_components: "),
        (dict(n_components=(1, 1, 1)), "^n_components: "),
        (dict(n_components=0), _invalid("n_components")),
        (dict(architecture="kpca_kpca_lssvm", n_components=(61, 1)), "^n_components: "),
        (dict(lam=0.0), _invalid("lam")),
        (dict(eta=(1.0, -1.0, 1.0)), "^eta: "),
        (dict(eta=(1.0, 1.0)), "^eta: "),
        (dict(eta=0.0), _invalid("eta")),
        (dict(c_stab=-1.0), _invalid("c_stab")),
        (dict(c0=float("nan")), _invalid("c0")),
        (dict(n_passes=0), _invalid("n_passes")),
        (dict(n_init=0), _invalid("n_init")),
        (dict(architecture="deep"), _invalid("architecture")),
        (dict(solver="reduced_set"), "^solver: "),
        (dict(solver="gradient"), _invalid("solver")),
        (dict(phases="backward"), _invalid("phases")),
        (dict(kernel=("rbf", "rbf", "linear")), "^kernel: solver='levelwise' needs linear"),
        (dict(kernel="precomputed"), _invalid("kernel")),
        (dict(architecture="kpca_kpca_lssvm", solver="reduced_set", kernel="laplacian"), "^kernel: "),
        (dict(architecture="kpca_kpca_lssvm", solver="reduced_set", n_reduced=61), "^n_reduced: "),
        (dict(regularizer="L2"), _invalid("regularizer")),
        (dict(objective="level2"), _invalid("objective")),
        (dict(hidden_layer_sizes=(3, 0, 3)), "^hidden_layer_sizes: "),
        (dict(hidden_layer_sizes=(3, 3)), "^hidden_layer_sizes: "),
        (dict(hidden_layer_sizes=0), _invalid("hidden_layer_sizes")),
        (dict(toeplitz=1), _invalid("toeplitz")),
        (dict(gamma=(1.0, 1.0)), "^gamma: "),
        (dict(gamma=-1.0), "^gamma: "),
        (dict(tol=0.0), _invalid("tol")),
        (dict(coding="ecoc"), _invalid("coding")),
    ],
)
def test_bad_parameters_are_named(params, message):
    X, y = _regression()
    with pytest.raises(ValueError, match=message):
        DeepRKM(**params).fit(X, y)


def test_one_value_is_the_same_for_every_level():
    X, y = _regression()
    once = DeepRKM(gamma=0.5, lam=0.01, eta=0.5, n_passes=2).fit(X, y)
    each = DeepRKM(gamma=0.5, lam=0.01, eta=(0.5, 0.5, 0.5), n_passes=2).fit(X, y)
    np.testing.assert_array_equal(once.predict(X), each.predict(X))
    X, y = _binary()
    common = dict(solver="feedforward", n_components=(2, 1), max_iter=5, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        once = DeepRKM("kpca_kpca_lssvm", hidden_layer_sizes=4, **common).fit(X, y)
        each = DeepRKM("kpca_kpca_lssvm", hidden_layer_sizes=(4, 4, 4), **common).fit(X, y)
    assert once._primal["dims"] == each._primal["dims"] == (4, 4, 4, 4, 2, 1, 1)
    np.testing.assert_array_equal(once.decision_function(X), each.decision_function(X))


def test_progress_lines(capsys):
    X, y = _regression()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        DeepRKM(gamma=0.5, lam=0.01, n_passes=2, phases="forward_backward", verbose=1).fit(X, y)
        stages = capsys.readouterr().out.splitlines()
        DeepRKM(gamma=0.5, lam=0.01, n_passes=2, phases="forward_backward", verbose=2).fit(X, y)
        steps = capsys.readouterr().out.splitlines()
    assert len(stages) == 2 and all(line.startswith("DeepRKM [") for line in stages)
    assert len(steps) == 2 + 2 * 5 and "L1: J_deep" in steps[1]  # one line per level step at verbose=2
    DeepRKM(gamma=0.5, lam=0.01, n_passes=2, tol=10.0).fit(X, y)
    assert capsys.readouterr().out == ""


def test_parameters_after_the_architecture_are_keyword_only():
    with pytest.raises(TypeError):
        DeepRKM("lssvm_kpca_kpca", (1, 1))


@pytest.mark.parametrize(
    "X, y, message",
    [
        (np.full((5, 2), np.nan), np.ones(5), "NaN"),
        (np.ones((5, 2)), np.array([1.0, 2.0, np.inf, 1.0, 1.0]), "^y: |infinity"),
        (np.ones((5, 2)), np.ones(4), "inconsistent numbers of samples"),
        (np.ones((1, 2)), np.ones(1), "1 sample"),
    ],
)
def test_bad_data_is_refused(X, y, message):
    with pytest.raises(ValueError, match=message):
        DeepRKM().fit(X, y)


def test_single_class_is_refused():
    with pytest.raises(ValueError, match="^y: needs at least two classes"):
        DeepRKM(task="classification").fit(np.random.default_rng(0).normal(size=(10, 2)), np.zeros(10, dtype=int))


def test_singular_level1_system_names_lam():
    X = np.ones((10, 2))
    with pytest.raises(ValueError, match="^lam: "):
        DeepRKM(kernel="linear", lam=1e-300).fit(X, np.arange(10.0))


def test_validation_data_needs_both_parts():
    X, y = _binary()
    with pytest.raises(ValueError, match="^X_val: "):
        DeepRKM("kpca_kpca_lssvm", solver="feedforward", max_iter=2).fit(X, y, X_val=X)
