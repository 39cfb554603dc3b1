"""partial_fit: streamed moments merged exactly, the deferred solve, the reservoir, and each streaming model
against its one-shot fit."""

import pickle
from types import SimpleNamespace

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from rkm import GenRKM, KernelPCA, LSSVMClassifier, LSSVMRegressor, MultiViewRKM
from rkm._utils import primal
from rkm._utils.streaming import RESERVOIR_ROWS, Reservoir
from rkm.features import Nystroem, RandomFourierFeatures


def _data(n=1200, d=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = np.sin(X[:, 0]) + X[:, 1] ** 2 / 4 + 0.1 * rng.normal(size=n)
    return X, y


def _batches(n, n_batches, seed=1):
    """Uneven row batches covering 0..n-1 in order."""
    cuts = np.sort(np.random.default_rng(seed).choice(np.arange(1, n), size=n_batches - 1, replace=False))
    return np.split(np.arange(n), cuts)


def assert_close_to_scale(actual, expected, rtol=1e-10):
    assert_allclose(actual, expected, rtol=rtol, atol=rtol * np.abs(expected).max())


# ---------------------------------------------------------------------------------------------- moments


def test_combined_target_moments_equal_one_shot_for_any_split():
    rng = np.random.default_rng(3)
    # Large common offsets: the pairwise update must not lose the centred (cross-)scatter to cancellation.
    Phi = 50.0 + rng.standard_normal((400, 7)) * rng.uniform(0.1, 3.0, 7)
    Y = -20.0 + rng.standard_normal((400, 2))
    weights = rng.uniform(0.0, 3.0, 400)
    whole = primal.feature_target_moments(None, Phi, Y, weights)
    for batches in (_batches(400, 2), _batches(400, 9, seed=2)):
        parts = [primal.feature_target_moments(None, Phi[rows], Y[rows], weights[rows]) for rows in batches]
        merged = parts[0]
        for part in parts[1:]:
            merged = merged.combine(part)
        assert merged.n == pytest.approx(weights.sum(), rel=1e-13)
        for name in ("mean", "scatter", "target_mean", "cross"):
            assert_close_to_scale(getattr(merged, name), getattr(whole, name), 1e-12)
    mean, target_mean = weights @ Phi / weights.sum(), weights @ Y / weights.sum()
    assert_close_to_scale(whole.scatter, ((Phi - mean) * weights[:, None]).T @ (Phi - mean), 1e-12)
    assert_close_to_scale(whole.cross, ((Phi - mean) * weights[:, None]).T @ (Y - target_mean), 1e-12)


def test_uncentred_moments_are_about_the_origin():
    Phi, Y = _data(50, 3)[0], _data(50, 3)[0][:, :1]
    moments = primal.feature_target_moments(None, Phi, Y).uncentred()
    assert_close_to_scale(moments.scatter, Phi.T @ Phi, 1e-12)
    assert_close_to_scale(moments.cross, Phi.T @ Y, 1e-12)
    assert not moments.mean.any() and not moments.target_mean.any()


def test_moments_with_and_without_targets_do_not_combine():
    Phi = _data(10, 3)[0]
    with pytest.raises(ValueError, match="^other: must have targets of the same width"):
        primal.FeatureMoments.from_block(Phi).combine(primal.feature_target_moments(None, Phi, Phi[:, :1]))


def test_moment_stream_of_a_nystroem_map_equals_its_features_moments():
    X, y = _data(600)
    fm = Nystroem(40, gamma=0.3, random_state=0).fit(X)
    stream = primal.MomentStream(fm, 1)
    for rows in _batches(600, 5):
        stream.add(X[rows], y[rows, None])
    direct = primal.feature_target_moments(None, fm.transform(X), y[:, None])
    assert stream.n == 600
    for name in ("mean", "scatter", "target_mean", "cross"):
        assert_close_to_scale(getattr(stream.moments(), name), getattr(direct, name), 1e-10)


# ---------------------------------------------------------------------------------------------- reservoir


def test_reservoir_keeps_every_row_until_full_then_a_uniform_sample():
    X = np.arange(30, dtype=float)[:, None]
    reservoir = Reservoir(50, random_state=0)
    reservoir.add(X)
    assert_array_equal(reservoir.rows, X)
    # Each of 10 000 rows lands in a sample of 100 with probability 1 / 100: over 200 seeds, the share of
    # sampled rows in the first half is close to 1/2.
    shares = []
    for seed in range(200):
        reservoir = Reservoir(100, random_state=seed)
        for rows in np.array_split(np.arange(10_000), 7):
            reservoir.add(rows[:, None].astype(float))
        assert reservoir.rows.shape == (100, 1) and reservoir.seen == 10_000
        assert np.unique(reservoir.rows).size == 100
        shares.append(np.mean(reservoir.rows < 5000))
    assert abs(np.mean(shares) - 0.5) < 0.02


def test_reservoir_depends_on_the_seed_not_on_the_batches():
    X = np.random.default_rng(0).normal(size=(5000, 2))
    samples = []
    for n_batches in (1, 4, 13):
        reservoir = Reservoir(60, random_state=7)
        for rows in _batches(5000, n_batches) if n_batches > 1 else [np.arange(5000)]:
            reservoir.add(X[rows])
        samples.append(reservoir.rows)
    assert_array_equal(samples[0], samples[1])
    assert_array_equal(samples[0], samples[2])


# ---------------------------------------------------------------------------------------------- LS-SVMs

REGRESSION_MAPS = {
    "nystroem": lambda: Nystroem(60, gamma=0.3, random_state=0),
    "rff": lambda: RandomFourierFeatures(80, gamma=0.3, random_state=0),
    "linear": lambda: "linear",
}


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("name", sorted(REGRESSION_MAPS))
def test_regressor_partial_fit_equals_fit(name, weighted, fit_intercept):
    X, y = _data()
    Y = np.column_stack([y, X[:, 2]])
    weights = np.random.default_rng(4).uniform(0.0, 2.0, X.shape[0]) if weighted else None
    model = LSSVMRegressor(feature_map=REGRESSION_MAPS[name](), lam=1e-3, fit_intercept=fit_intercept)
    batches = np.split(np.arange(X.shape[0]), [300, 450, 800, 1000, 1100])  # Nyström's 60 landmarks in the first
    for rows in batches:
        model.partial_fit(X[rows], Y[rows], sample_weight=None if weights is None else weights[rows])
    # Nyström's landmarks come from the first batch: the one-shot fit with the same map is the reference.
    reference = LSSVMRegressor(feature_map=REGRESSION_MAPS[name](), lam=1e-3, fit_intercept=fit_intercept)
    if name == "nystroem":
        reference.set_params(feature_map=_FixedMap(model.feature_map_))
    reference.fit(X, Y, sample_weight=weights)
    assert model.n_samples_seen_ == X.shape[0]
    assert_close_to_scale(model.coef_, reference.coef_)
    assert_close_to_scale(model.intercept_ + 1.0, reference.intercept_ + 1.0)
    assert_close_to_scale(model.predict(X), reference.predict(X))


class _FixedMap:
    """A fitted feature map that fit leaves as it is: the one-shot reference of a partial_fit whose map was
    fitted on the first batch (scikit-learn's clone deep-copies the namespace, so the map stays fitted)."""

    def __init__(self, fitted):
        self.holder = fitted if isinstance(fitted, SimpleNamespace) else SimpleNamespace(map=fitted)

    def get_params(self, deep=True):
        return {"fitted": self.holder}

    def fit(self, X, y=None):
        return self

    def transform(self, X):
        return self.holder.map.transform(X)


def test_partial_fit_defers_the_solve_until_it_is_read():
    X, y = _data(300)
    model = LSSVMRegressor(feature_map="linear").partial_fit(X[:100], y[:100])
    assert "coef_" not in vars(model) and model.n_samples_seen_ == 100
    first = model.coef_.copy()  # reading it solves
    assert "coef_" in vars(model)
    model.partial_fit(X[100:], y[100:])
    assert "coef_" not in vars(model)
    assert not np.allclose(model.predict(X), X @ first + model.intercept_)
    restored = pickle.loads(pickle.dumps(model.partial_fit(X[:10], y[:10])))
    assert_allclose(restored.predict(X), model.predict(X))


def test_partial_fit_after_fit_starts_over():
    X, y = _data(400)
    model = LSSVMRegressor(feature_map="linear").fit(X[:200] * 100, y[:200])
    model.partial_fit(X, y)
    assert_close_to_scale(model.coef_, LSSVMRegressor(feature_map="linear").fit(X, y).coef_)
    refitted = model.fit(X[:50], y[:50])
    assert "_stream" not in vars(refitted) and not hasattr(refitted, "n_samples_seen_")


def test_partial_fit_from_a_memory_map(tmp_path):
    X, y = _data(3000)
    path = tmp_path / "X.npy"
    np.save(path, X)
    rows = np.load(path, mmap_mode="r")
    model = LSSVMRegressor(feature_map=RandomFourierFeatures(50, random_state=0))
    for start in range(0, 3000, 700):
        model.partial_fit(rows[start : start + 700], y[start : start + 700])
    reference = LSSVMRegressor(feature_map=RandomFourierFeatures(50, random_state=0)).fit(X, y)
    assert_close_to_scale(model.predict(X), reference.predict(X))


def test_classifier_partial_fit_equals_fit():
    X, _ = _data(900)
    y = np.where(X[:, 0] > 0.5, "high", np.where(X[:, 1] > 0, "mid", "low"))
    fm = RandomFourierFeatures(60, random_state=1)
    model = LSSVMClassifier(feature_map=fm, coding="minimum_output")
    for index, rows in enumerate(_batches(900, 4)):
        model.partial_fit(X[rows], y[rows], classes=["low", "mid", "high"] if index == 0 else None)
    reference = LSSVMClassifier(feature_map=fm, coding="minimum_output").fit(X, y)
    assert_array_equal(model.classes_, reference.classes_)
    assert_close_to_scale(model.decision_function(X), reference.decision_function(X))
    assert_array_equal(model.predict(X), reference.predict(X))


def test_classifier_partial_fit_labels():
    X, _ = _data(40)
    y = np.array([0, 1] * 20)
    model = LSSVMClassifier(feature_map="linear")
    with pytest.raises(ValueError, match="^classes: must be given on the first call"):
        model.partial_fit(X, y)
    model.partial_fit(X[:10], y[:10], classes=[0, 1, 2])
    assert_array_equal(model.classes_, [0, 1, 2])
    with pytest.raises(ValueError, match=r"^y: holds labels not in classes: \[5\]"):
        model.partial_fit(X[:2], [0, 5])
    with pytest.raises(ValueError, match="^classes: must equal the classes of the first call"):
        model.partial_fit(X[:2], [0, 1], classes=[0, 1])
    with pytest.raises(ValueError, match="^classes: needs at least two classes"):
        LSSVMClassifier(feature_map="linear").partial_fit(X, np.zeros(40), classes=[0])


@pytest.mark.parametrize(
    "model, message",
    [
        (LSSVMRegressor(), "This 'LSSVMRegressor' has no attribute 'partial_fit'"),
        (LSSVMRegressor(feature_map="linear", loo=True), "^loo: the closed-form leave-one-out residuals need every"),
        (LSSVMRegressor(feature_map="linear", robust="huber"), "^robust: the reweighted refits need every row"),
        (LSSVMRegressor(feature_map="linear", solver="cg"), "^solver: partial_fit solves the primal"),
        (LSSVMClassifier(feature_map="linear", probability=True), "^probability: Platt scaling's internal"),
    ],
)
def test_partial_fit_refuses_what_needs_every_row(model, message):
    X, y = _data(20)
    error = AttributeError if "no attribute" in message else ValueError
    with pytest.raises(error, match=message):
        model.partial_fit(X, (y > 0).astype(int), **({"classes": [0, 1]} if isinstance(model, LSSVMClassifier) else {}))


def test_partial_fit_checks_each_batch():
    X, y = _data(30)
    model = LSSVMRegressor(feature_map="linear").partial_fit(X[:10], y[:10])
    with pytest.raises(ValueError, match="X has 3 features, but LSSVMRegressor is expecting 4 features"):
        model.partial_fit(X[10:20, :3], y[10:20])
    with pytest.raises(ValueError, match="^y: must be 1-D as in the first batch"):
        model.partial_fit(X[10:20], np.column_stack([y[10:20], y[10:20]]))
    with pytest.raises(ValueError, match="Input X contains NaN"):
        model.partial_fit(np.full((2, 4), np.nan), y[:2])
    two = LSSVMRegressor(feature_map="linear").partial_fit(X[:10], np.ones((10, 2)))
    with pytest.raises(ValueError, match=r"^y: has 3 output\(s\), but earlier batches had 2"):
        two.partial_fit(X[:10], np.ones((10, 3)))


# ---------------------------------------------------------------------------------------------- KernelPCA


@pytest.mark.parametrize("center", [True, False])
def test_kernel_pca_partial_fit_equals_fit(center):
    X, _ = _data(3000, 5)
    fm = RandomFourierFeatures(150, gamma=0.2, random_state=0)
    model = KernelPCA(6, feature_map=fm, center=center, random_state=0)
    for rows in _batches(3000, 7):
        model.partial_fit(X[rows])
    reference = KernelPCA(6, feature_map=fm, center=center).fit(X)
    assert model.n_samples_seen_ == 3000
    assert_close_to_scale(model.eigenvalues_, reference.eigenvalues_)
    assert_close_to_scale(model.primal_vectors_, reference.primal_vectors_)
    assert_close_to_scale(model.transform(X[:200]), reference.transform(X[:200]))


def test_kernel_pca_partial_fit_with_nystroem_solves_its_features_covariance():
    X, _ = _data(2000, 3)
    model = KernelPCA(4, feature_map=Nystroem(50, gamma=0.5, random_state=0))
    for rows in _batches(2000, 5):
        model.partial_fit(X[rows])
    Phi = model.feature_map_.transform(X)
    # The landmarks are rows of the first batch.
    first = X[_batches(2000, 5)[0]]
    assert all((first == landmark).all(axis=1).any() for landmark in model.feature_map_.components_)
    centred = Phi - Phi.mean(axis=0)
    expected = np.linalg.eigvalsh(centred.T @ centred)[::-1][:4]
    assert_close_to_scale(model.eigenvalues_, expected)


def test_kernel_pca_partial_fit_keeps_a_reservoir_for_the_preimages():
    X, _ = _data(RESERVOIR_ROWS + 1500, 3)
    model = KernelPCA(3, feature_map=RandomFourierFeatures(100, gamma=0.3, random_state=0), random_state=0)
    for rows in _batches(X.shape[0], 3):
        model.partial_fit(X[rows])
    assert model.X_fit_.shape == (RESERVOIR_ROWS, 3)
    assert all((X == row).all(axis=1).any() for row in model.X_fit_[:50])
    assert_close_to_scale(model.H_, model.transform(model.X_fit_))
    reference = KernelPCA(3, feature_map=RandomFourierFeatures(100, gamma=0.3, random_state=0)).fit(X)
    assert model.preimage_ == reference.preimage_ == "fixed_point"
    error = np.linalg.norm(model.denoise(X[:20]) - X[:20])
    assert error <= 1.2 * np.linalg.norm(reference.denoise(X[:20]) - X[:20])
    model.partial_fit(X[:500])
    assert model.n_samples_seen_ == X.shape[0] + 500 and model.X_fit_.shape == (RESERVOIR_ROWS, 3)


def test_kernel_pca_partial_fit_needs_a_feature_map():
    with pytest.raises(AttributeError, match="has no attribute 'partial_fit'"):
        KernelPCA(2).partial_fit(np.zeros((5, 2)))
    model = KernelPCA(20, feature_map=RandomFourierFeatures(10, random_state=0))
    with pytest.raises(ValueError, match="^n_components: at most the 10 features of the feature_map"):
        model.partial_fit(np.zeros((5, 2)))
    one_row = KernelPCA(1, feature_map=RandomFourierFeatures(10, random_state=0)).partial_fit(np.ones((1, 2)))
    for _ in range(2):  # a failed deferred solve stays pending
        with pytest.raises(ValueError, match="^n_samples = 1: a centred kernel PCA needs at least 2 samples"):
            one_row.transform(np.ones((1, 2)))
    assert one_row.partial_fit(np.zeros((1, 2))).eigenvalues_.shape == (1,)


# ---------------------------------------------------------------------------------------------- multi-view


def _two_views(n=3000, seed=0):
    rng = np.random.default_rng(seed)
    t = rng.uniform(0.0, 6.0, (n, 1))
    return [np.hstack([t, t**2 / 6]), np.sin(t) + 0.05 * rng.normal(size=(n, 1))]


def _aligned(actual, expected):
    """actual with each column's sign matched to expected's (a streamed fit orients components by U)."""
    return actual * np.where(np.sum(actual * expected, axis=0) < 0, -1.0, 1.0)


@pytest.mark.parametrize("solver", ["auto", "primal_stiefel"])
def test_multiview_partial_fit_equals_fit(solver):
    views = _two_views()
    kernel = (RandomFourierFeatures(120, gamma=0.5, random_state=0), "linear")
    model = MultiViewRKM(3, kernel=kernel, eta=(1.0, 0.5), solver=solver, random_state=0)
    for rows in _batches(3000, 6, seed=3):
        model.partial_fit([V[rows] for V in views])
    reference = MultiViewRKM(3, kernel=kernel, eta=(1.0, 0.5), solver="primal_eig" if solver == "auto" else solver)
    reference.set_params(random_state=0).fit(views)
    assert model.solver_ == ("primal_eig" if solver == "auto" else solver) and model.n_samples_seen_ == 3000
    rtol = 1e-10 if solver == "auto" else 1e-7
    assert_close_to_scale(model.eigenvalues_, reference.eigenvalues_, rtol)
    new = [V[:100] for V in _two_views(100, seed=1)]
    assert_close_to_scale(_aligned(model.transform(new), reference.transform(new)), reference.transform(new), rtol)
    for v in range(2):
        assert_close_to_scale(_aligned(model.U_[v], reference.U_[v]), reference.U_[v], rtol)
    # The inferred output view does not depend on the signs.
    assert_close_to_scale(model.predict_view([new[0], None], 1), reference.predict_view([new[0], None], 1), rtol)


def test_multiview_partial_fit_keeps_a_reservoir_and_orients_by_u():
    views = _two_views(RESERVOIR_ROWS + 1000)
    views[1] = np.hstack([views[1], np.cos(views[0][:, :1])])  # two output columns determine two components
    model = MultiViewRKM(2, kernel=(RandomFourierFeatures(60, random_state=0), "linear"), random_state=0)
    for rows in _batches(views[0].shape[0], 3):
        model.partial_fit([V[rows] for V in views])
    assert model.H_.shape == (RESERVOIR_ROWS, 2)
    stacked = np.vstack(model.U_)
    assert np.all(stacked[np.argmax(np.abs(stacked), axis=0), [0, 1]] > 0)
    sample = model._views[0].X
    assert sample.shape == (RESERVOIR_ROWS, 2) and all((views[0] == row).all(axis=1).any() for row in sample[:20])
    assert_close_to_scale(model.H_, model.transform([sample, model._views[1].X]))
    assert model.predict_view([None, views[1][:5]], 0).shape == (5, 2)  # the smoother over the reservoir


def test_multiview_partial_fit_on_one_array_and_its_checks():
    views = _two_views(500)
    X = np.hstack(views)
    model = MultiViewRKM(2, kernel=("linear", "linear"), view_columns=[[0, 1], [2]])
    model.partial_fit(X[:200]).partial_fit(X[200:])
    reference = MultiViewRKM(2, kernel=("linear", "linear"), view_columns=[[0, 1], [2]], solver="primal_eig").fit(X)
    assert_close_to_scale(model.eigenvalues_, reference.eigenvalues_)
    with pytest.raises(ValueError, match="X has 2 features, but MultiViewRKM is expecting 3 features"):
        model.partial_fit(X[:10, :2])
    with pytest.raises(AttributeError, match="has no attribute 'partial_fit'"):
        MultiViewRKM(2).partial_fit(views)
    with pytest.raises(ValueError, match="^solver: partial_fit runs the primal, not 'dual_eig'"):
        MultiViewRKM(2, kernel="linear", solver="dual_eig").partial_fit(views)
    with pytest.raises(ValueError, match="^n_components: must be at most the summed feature dimension d = 3"):
        MultiViewRKM(4, kernel="linear").partial_fit(views)


def test_genrkm_partial_fit_samples_from_the_reservoirs_latents():
    views = _two_views(1500)
    labels = np.eye(2)[(views[1][:, 0] > 0).astype(int)]
    model = GenRKM(
        3,
        kernel=(RandomFourierFeatures(60, gamma=0.5, random_state=0), "linear"),
        n_mixture=2,
        label_views=[1],
        random_state=0,
    )
    for rows in _batches(1500, 4):
        model.partial_fit([views[0][rows], labels[rows]])
    generated, generated_labels = model.sample(5, random_state=0)
    assert generated.shape == (5, 2) and generated_labels.shape == (5, 2)
    assert model.mixture_.means_.shape == (2, 3)
    with pytest.raises(ValueError, match=r"^views\[1\]: a label view"):
        model.partial_fit([views[0][:3], np.zeros((3, 2))])
