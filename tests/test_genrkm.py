"""rkm.GenRKM (Pandey, Schreurs & Suykens 2021): training (eq. 3), generation (eqs. 6-8), the latent walks
(Fig. 5, Appendix A.6), and MultiViewRKM's pieces it added (eta, several missing views, the fixed-point
pre-image)."""

import numpy as np
import pytest
import scipy.linalg
from sklearn.exceptions import NotFittedError

from rkm import GenRKM, MultiViewRKM
from rkm.preimage import kernel_smoother
from rkm.reference.center import center_kernel
from rkm.reference.kernels import kernel_matrix


@pytest.fixture
def rng():
    return np.random.default_rng(0)


@pytest.fixture
def labelled(rng):
    """Three well separated 4-D clusters and their one-hot labels."""
    labels = np.repeat(np.arange(3), 40)
    centres = np.array([[0.0, 0.0, 0.0, 0.0], [6.0, 0.0, 0.0, 0.0], [0.0, 6.0, 0.0, 0.0]])
    images = centres[labels] + rng.normal(size=(labels.size, 4))
    return images, np.eye(3)[labels], labels


def _centred(K):
    Kc = K.copy()
    center_kernel(Kc)
    return Kc


def _model(**params):
    return GenRKM(**{"n_components": 5, "gamma": (0.1, None), "n_mixture": 3, "random_state": 0, **params})


# ---------------------------------------------------------------------------------------------- training


@pytest.mark.parametrize("eta", [(1.0, 1.0), (0.5, 3.0)])
def test_training_solves_eq_3(labelled, eta):
    images, onehot, _ = labelled
    model = _model(eta=eta).fit([images, onehot])
    K = _centred(kernel_matrix(images, None, "rbf", gamma=0.1)) / eta[0] + _centred(onehot @ onehot.T) / eta[1]
    top = scipy.linalg.eigh(K, eigvals_only=True)[::-1][:5]
    np.testing.assert_allclose(model.eigenvalues_, top, rtol=1e-9)
    H = model.H_
    np.testing.assert_allclose(K @ H, H * model.eigenvalues_, atol=1e-8 * top[0])
    np.testing.assert_allclose(H.T @ H, np.eye(5), atol=1e-10)


def test_only_the_ratio_of_the_etas_changes_the_latents(labelled):
    images, onehot, _ = labelled
    base = _model().fit([images, onehot])
    scaled = _model(eta=4.0).fit([images, onehot])
    np.testing.assert_allclose(scaled.eigenvalues_, base.eigenvalues_ / 4.0, rtol=1e-10)
    np.testing.assert_allclose(scaled.H_, base.H_, atol=1e-9)
    for generated, expected in zip(scaled.decode(base.H_[:5]), base.decode(base.H_[:5]), strict=True):
        np.testing.assert_allclose(generated, expected, atol=1e-9)


def test_eta_primal_equals_dual(rng):
    views = [rng.normal(size=(50, 3)), rng.normal(size=(50, 2))]
    common = dict(n_components=3, kernel=("linear", "linear"), eta=(0.3, 2.0), random_state=0)
    primal = MultiViewRKM(solver="primal_eig", **common).fit(views)
    dual = MultiViewRKM(solver="dual_eig", **common).fit(views)
    np.testing.assert_allclose(primal.eigenvalues_, dual.eigenvalues_, rtol=1e-10)
    np.testing.assert_allclose(primal.H_, dual.H_, atol=1e-9)
    for U_primal, U_dual in zip(primal.U_, dual.U_, strict=True):
        np.testing.assert_allclose(U_primal, U_dual, atol=1e-9)
    new = [rng.normal(size=(6, 3)), rng.normal(size=(6, 2))]
    np.testing.assert_allclose(primal.transform(new), dual.transform(new), atol=1e-9)
    np.testing.assert_allclose(primal.predict_view([new[0], None], 1), dual.predict_view([new[0], None], 1), atol=1e-9)


def test_eta_weights_the_views(rng):
    """A small eta_v makes view v's direction the leading component."""
    views = [rng.normal(size=(80, 1)), rng.normal(size=(80, 1))]
    for favoured in (0, 1):
        eta = [1.0, 1.0]
        eta[1 - favoured] = 100.0
        model = MultiViewRKM(1, kernel="linear", eta=eta).fit(views)
        centred = views[favoured][:, 0] - views[favoured].mean()
        correlation = abs(np.corrcoef(model.H_[:, 0], centred)[0, 1])
        assert correlation > 0.999


# ---------------------------------------------------------------------------------------------- generation


def test_decoding_follows_eqs_7_and_8(labelled):
    images, onehot, _ = labelled
    model = _model(eta=(0.5, 2.0)).fit([images, onehot])
    latents = model.H_[[0, 50, 100]] + 0.01
    K = kernel_matrix(images, None, "rbf", gamma=0.1)
    # Eq. 7 on the centred kernel, plus the column means of the uncentred one (a constant per point, which the
    # smoother ignores, kept so that the similarities are those of the uncentred kernel).
    similarities = latents @ (model.H_.T @ _centred(K)) / 0.5 + K.mean(axis=0) / 0.5
    expected_images = kernel_smoother(similarities, images, 4)
    # The linear label view is its own pre-image: the projection of the centred one-hot rows plus their mean.
    centred = onehot - onehot.mean(axis=0)
    expected_labels = latents @ model.H_.T @ centred + onehot.mean(axis=0)
    generated_images, generated_labels = model.decode(latents)
    np.testing.assert_allclose(generated_images, expected_images, atol=1e-10)
    np.testing.assert_allclose(generated_labels, expected_labels, atol=1e-10)


@pytest.mark.parametrize("solver", ["primal_eig", "dual_eig"])
def test_all_components_reconstruct_a_linear_view_exactly(rng, solver):
    X = rng.normal(size=(12, 3))
    model = GenRKM(3, kernel="linear", solver=solver, n_mixture=2, n_neighbors=2).fit([X])
    np.testing.assert_allclose(model.decode(model.H_)[0], X, atol=1e-9)


def test_generated_labels_match_the_generated_images(labelled):
    images, onehot, labels = labelled
    model = _model(n_components=3).fit([images, onehot])
    generated_images, generated_labels = model.sample(300, random_state=1)
    centres = np.array([images[labels == c].mean(axis=0) for c in range(3)])
    nearest = np.argmin(((generated_images[:, None, :] - centres) ** 2).sum(axis=2), axis=1)
    assert np.mean(nearest == generated_labels.argmax(axis=1)) >= 0.95
    assert set(generated_labels.argmax(axis=1)) == {0, 1, 2}


def test_sample_is_seeded_and_streams_in_blocks(labelled, monkeypatch):
    images, onehot, _ = labelled
    model = _model().fit([images, onehot])
    first, latents = model.sample(23, random_state=3, return_latents=True)
    again = model.sample(23, random_state=3)
    other = model.sample(23, random_state=4)
    for a, b in zip(first, again, strict=True):
        np.testing.assert_array_equal(a, b)
    assert not np.allclose(first[0], other[0])
    assert latents.shape == (23, 5)
    for generated, decoded in zip(first, model.decode(latents), strict=True):
        np.testing.assert_allclose(generated, decoded, atol=1e-12)
    # Blocks of 4 latents: every decode sees at most 4 rows, and the outputs are those of their latents.
    sizes = []
    decode = model.decode
    monkeypatch.setattr(model, "_block_rows", lambda: 4)
    monkeypatch.setattr(model, "decode", lambda h: sizes.append(len(h)) or decode(h))
    blocked, blocked_latents = model.sample(10, random_state=3, return_latents=True)
    assert sizes == [4, 4, 2]
    for generated, decoded in zip(blocked, decode(blocked_latents), strict=True):
        np.testing.assert_allclose(generated, decoded, atol=1e-12)


def test_the_mixture_is_fitted_to_the_scaled_training_latents(labelled):
    images, onehot, _ = labelled
    model = _model().fit([images, onehot])
    np.testing.assert_allclose(np.mean((model.H_ * model.latent_scale_) ** 2), 1.0)
    assert model.mixture_.n_components == 3 and model.mixture_.converged_
    _, latents = model.sample(4000, random_state=0, return_latents=True)
    np.testing.assert_allclose(latents.std(axis=0), model.H_.std(axis=0), rtol=0.1)


def test_reconstruct_is_decode_of_transform(labelled):
    images, onehot, _ = labelled
    model = _model().fit([images, onehot])
    for generated, expected in zip(
        model.reconstruct([images[:7], onehot[:7]]),
        model.decode(model.transform([images[:7], onehot[:7]])),
        strict=True,
    ):
        np.testing.assert_allclose(generated, expected, atol=1e-12)
    # From the image alone: the label view is inferred (eqs. 15-16), and it is the right one.
    labels_from_images = model.reconstruct([images, None])[1].argmax(axis=1)
    assert np.mean(labels_from_images == onehot.argmax(axis=1)) >= 0.95


def test_traverse_walks_one_component(labelled):
    images, onehot, _ = labelled
    model = _model().fit([images, onehot])
    values = np.linspace(-0.1, 0.1, 5)
    start = model.H_[3]
    walked = model.traverse(2, values, start=start)
    latents = np.repeat(start[None, :], 5, axis=0)
    latents[:, 2] += values
    for generated, expected in zip(walked, model.decode(latents), strict=True):
        np.testing.assert_allclose(generated, expected, atol=1e-12)
    from_origin = model.traverse(0, values)
    expected = model.decode(np.outer(values, np.eye(5)[0]))
    np.testing.assert_allclose(from_origin[0], expected[0], atol=1e-12)


def test_interpolate_is_bilinear(labelled):
    images, onehot, _ = labelled
    model = _model().fit([images, onehot])
    corners = model.H_[[0, 40, 80, 119]]
    grid = model.interpolate(corners, 3)
    expected_latents = [corners[0], corners[1], corners[2], corners[3], corners.mean(axis=0)]
    rows = [0, 2, 6, 8, 4]
    for view, generated in enumerate(grid):
        assert generated.shape[0] == 9
        np.testing.assert_allclose(generated[rows], model.decode(np.array(expected_latents))[view], atol=1e-12)


def test_fixed_point_preimage_is_closer_in_feature_space(labelled):
    images, onehot, _ = labelled
    smoother = _model().fit([images, onehot])
    fixed = _model(preimage=("fixed_point", "auto")).fit([images, onehot])
    assert fixed.preimages_ == ["fixed_point", "identity"]
    latents = smoother.H_[::10]
    start, end = smoother.decode(latents)[0], fixed.decode(latents)[0]
    # ||phi(x) - t||^2 = 1 - 2 k(x, X) c + const for the target t = sum_i c_i phi(x_i) (rbf: k(x, x) = 1).
    c = latents @ smoother.H_.T
    c = c + (1.0 - c.sum(axis=1, keepdims=True)) / c.shape[1]

    def distance(points):
        return 1.0 - 2.0 * np.sum(kernel_matrix(points, images, "rbf", gamma=0.1) * c, axis=1)

    assert np.all(distance(end) <= distance(start) + 1e-12)
    assert np.mean(distance(end) < distance(start) - 1e-6) > 0.5


# ---------------------------------------------------------------------------------------------- missing views


def test_transform_with_missing_views_infers_them(rng):
    views = [rng.normal(size=(40, 3)), rng.normal(size=(40, 2)), rng.normal(size=(40, 4))]
    model = MultiViewRKM(3, kernel="linear").fit(views)
    new = [rng.normal(size=(5, 3)), rng.normal(size=(5, 2)), rng.normal(size=(5, 4))]
    np.testing.assert_allclose(model.transform([new[0], None, new[2]]), model.predict_latent(new, 1), atol=1e-12)
    # Two views missing: h* = (Gamma - B_1 - B_2)^(-1) times the scores of view 0 (eqs. 15-16).
    h = model.transform([new[0], None, None])
    B0 = model.H_.T @ _centred(views[0] @ views[0].T) @ model.H_
    mean = views[0].mean(axis=0)
    scores = (new[0] - mean) @ (views[0] - mean).T @ model.H_  # H^T k~_0(x*) of the linear view
    np.testing.assert_allclose(h, np.linalg.solve(B0, scores.T).T, atol=1e-9)
    np.testing.assert_allclose(h, model.predict_latent([new[0], None, None], [2, 1]), atol=1e-12)


# ---------------------------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "params,match",
    [
        (dict(n_neighbors=121), "^n_neighbors: must be at most n_samples = 120"),
        (dict(n_mixture=121), "^n_mixture: must be at most n_samples = 120"),
        (dict(label_views=(2,)), r"^label_views: must hold view indices in \[0, 2\)"),
        (dict(label_views=(1, 1)), "^label_views: must hold distinct"),
        (dict(eta=(1.0, -1.0)), r"^eta\[1\]: must be a positive finite number"),
        (dict(eta=(1.0,)), "^eta: must be one value or a list or tuple with one entry per view"),
        (dict(preimage=("fixed_point", "fixed_point")), None),
        (dict(kernel=("laplacian", "linear"), preimage="fixed_point"), r"^preimage: 'fixed_point' needs an rbf view"),
        (dict(preimage=("auto", "newton")), r"^preimage\[1\]: must be one of"),
    ],
)
def test_bad_parameters(labelled, params, match):
    images, onehot, _ = labelled
    model = _model(**params)
    if match is None:  # the identity of the linear view wins over its entry
        assert model.fit([images, onehot]).preimages_ == ["fixed_point", "identity"]
        return
    with pytest.raises(ValueError, match=match):
        model.fit([images, onehot])


def test_bad_views(labelled):
    images, onehot, _ = labelled
    with pytest.raises(ValueError, match=r"^views: all views need the same number of rows, got \[120, 119\]"):
        _model().fit([images, onehot[1:]])
    no_label = onehot.copy()
    no_label[7] = 0.0
    with pytest.raises(ValueError, match=r"^views\[1\]: a label view .* 1 row\(s\) have none \(the first: row 7\)"):
        _model(label_views=[1]).fit([images, no_label])
    assert _model(label_views=[1]).fit([images, onehot]).n_views_ == 2


def test_generation_before_fit_and_bad_latents(labelled):
    model = _model()
    for call in (lambda: model.sample(3), lambda: model.decode(np.zeros((1, 5))), lambda: model.traverse(0, [0.1])):
        with pytest.raises(NotFittedError):
            call()
    images, onehot, _ = labelled
    model.fit([images, onehot])
    with pytest.raises(ValueError, match=r"^latents: must have n_components = 5 columns .* got shape \(2, 3\)"):
        model.decode(np.zeros((2, 3)))
    with pytest.raises(ValueError, match="^latents: contains NaN"):
        model.decode(np.full((1, 5), np.nan))
    with pytest.raises(ValueError, match="^latents: must be an array of real numbers"):
        model.decode(np.array([["a"] * 5]))
    for n_samples in (0, -1, 2.0, True):
        with pytest.raises(ValueError, match="^n_samples: must be a positive int"):
            model.sample(n_samples)
    for component in (5, -1, 1.0):
        with pytest.raises(ValueError, match=r"^component: must be an int in \[0, 5\)"):
            model.traverse(component, [0.1])
    with pytest.raises(ValueError, match="^values: must be a non-empty 1-D array"):
        model.traverse(0, [])
    with pytest.raises(ValueError, match=r"^start: must have n_components = 5 columns"):
        model.traverse(0, [0.1], start=np.zeros(4))
    with pytest.raises(ValueError, match="^corners: must hold 4 latents"):
        model.interpolate(np.zeros((3, 5)), 3)
    with pytest.raises(ValueError, match="^n_steps: must be an int >= 2"):
        model.interpolate(np.zeros((4, 5)), 1)
