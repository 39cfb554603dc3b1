"""rkm.MultiViewRKM: the four solvers against each other and against independent constructions, centring of
non-centred data, Stiefel rotation, rescaling, missing-view inference and bad input.

MultiViewRKM.fit takes a list of views, not (X, y), so scikit-learn's estimator checks do not apply to it.
"""

import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning, NotFittedError

from rkm import KernelPCA, MultiViewRKM
from rkm.features import RandomFourierFeatures
from rkm.kernels import RBF

EIG_SOLVERS = ("primal_eig", "dual_eig")
STIEFEL_SOLVERS = ("primal_stiefel", "dual_stiefel")


def _relative_error(A, B):
    return np.abs(A - B).max() / np.abs(B).max()


def _centred(A):
    return A - A.mean(axis=0)


def _top_eigenpairs(A, s):
    w, V = np.linalg.eigh(A)
    return w[::-1][:s], V[:, ::-1][:, :s]


def _largest_entry_positive(V):
    return V * np.sign(V[np.argmax(np.abs(V), axis=0), np.arange(V.shape[1])])


@pytest.fixture
def linear_views(rng):
    """Two linear views with means around 5: the second a noisy linear function of the first."""
    X1 = rng.normal(size=(90, 4)) + 5.0
    X2 = X1 @ rng.normal(size=(4, 3)) + 0.3 * rng.normal(size=(90, 3)) + 5.0
    new = [rng.normal(size=(7, 4)) + 5.0, rng.normal(size=(7, 3)) + 5.0]
    return [X1, X2], new


@pytest.fixture
def circle_views(rng):
    """An angle and the point of the unit circle at that angle; new angles and their points."""
    t = np.sort(rng.uniform(0.0, 2.0 * np.pi, 300))
    t_new = rng.uniform(0.3, 2.0 * np.pi - 0.3, 40)
    return [t[:, None], np.column_stack([np.cos(t), np.sin(t)])], t_new, np.column_stack([np.cos(t_new), np.sin(t_new)])


def _fit(views, solver, s=3, **params):
    return MultiViewRKM(s, kernel=("linear",) * len(views), solver=solver, random_state=0, **params).fit(views)


# ---------------------------------------------------------------------------------------------- eig solvers


def test_primal_and_dual_eig_agree_on_non_centred_views(linear_views):
    views, new = linear_views
    primal, dual = _fit(views, "primal_eig"), _fit(views, "dual_eig")
    np.testing.assert_allclose(primal.eigenvalues_, dual.eigenvalues_, rtol=1e-10)
    assert _relative_error(primal.H_, dual.H_) < 1e-8
    for v in range(2):
        assert _relative_error(primal.U_[v], dual.U_[v]) < 1e-8
    # Full centring of the new points' kernel rows: the dual's latents equal the primal's for non-centred data.
    assert _relative_error(primal.transform(new), dual.transform(new)) < 1e-8
    for missing in range(2):
        query = [None if v == missing else new[v] for v in range(2)]
        assert _relative_error(primal.predict_view(query, missing), dual.predict_view(query, missing)) < 1e-10


def test_eig_solvers_match_an_independent_eigendecomposition(linear_views):
    views, new = linear_views
    s = 3
    Z = np.hstack(views)
    Zc = _centred(Z)
    # Dual: eigenvectors of the summed centred Gram matrices; primal: eigenvectors of the covariance.
    w_K, H = _top_eigenpairs(Zc @ Zc.T, s)
    w_C, U_tilde = _top_eigenpairs(Zc.T @ Zc, s)
    H = _largest_entry_positive(H)
    for solver in EIG_SOLVERS:
        model = _fit(views, solver, s)
        assert model.solver_ == solver and model.rotation_ is None and model.n_iter_ >= 1
        np.testing.assert_allclose(model.eigenvalues_, w_K, rtol=1e-10)
        np.testing.assert_allclose(model.eigenvalues_, w_C, rtol=1e-10)
        np.testing.assert_allclose(model.gamma_matrix_, np.diag(w_C), rtol=1e-10, atol=0)
        np.testing.assert_allclose(model.objective_, -0.5 * w_C.sum(), rtol=1e-12)
        assert _relative_error(model.H_, H) < 1e-8
        np.testing.assert_allclose(model.H_.T @ model.H_, np.eye(s), atol=1e-10)
        # U = U~ Lambda^(1/2) (Corollary 3.4), split by view.
        U = np.vstack(model.U_)
        assert _relative_error(np.abs(U), np.abs(U_tilde) * np.sqrt(w_C)) < 1e-8
        # h* = Lambda^(-1/2) U~^T (z* - mean) (eq. 6), and the training points give H.
        expected = (np.hstack(new) - Z.mean(axis=0)) @ (U_tilde / np.sqrt(w_C))
        assert _relative_error(np.abs(model.transform(new)), np.abs(expected)) < 1e-8
        assert _relative_error(model.transform(views), model.H_) < 1e-8


def test_predict_view_of_a_linear_view_equals_the_closed_form(linear_views):
    views, new = linear_views
    s = 3
    Z = np.hstack(views)
    w, U_tilde = _top_eigenpairs(_centred(Z).T @ _centred(Z), s)
    U = U_tilde * np.sqrt(w)
    U1, U2 = U[:4], U[4:]
    mean1, mean2 = views[0].mean(axis=0), views[1].mean(axis=0)
    # Eq. 15: phi_2 = U_2 (Gamma - U_2^T U_2)^(-1) U_1^T phi_1, on centred features.
    h = np.linalg.solve(np.diag(w) - U2.T @ U2, U1.T @ (new[0] - mean1).T).T
    expected = h @ U2.T + mean2
    for solver in EIG_SOLVERS:
        model = _fit(views, solver, s)
        np.testing.assert_allclose(model.predict_view([new[0], None], missing=1), expected, rtol=1e-9, atol=1e-9)
        latent = model.predict_latent([new[0], None], missing=1)
        np.testing.assert_allclose(np.abs(latent), np.abs(h), rtol=1e-9, atol=1e-12)


def test_a_view_that_is_a_linear_function_of_the_other_is_inferred_exactly(rng):
    X1 = rng.normal(size=(60, 3)) + 5.0
    A = rng.normal(size=(3, 2))
    X2 = X1 @ A - 2.0
    X1_new = rng.normal(size=(10, 3)) + 5.0
    for solver in EIG_SOLVERS + STIEFEL_SOLVERS:
        model = _fit([X1, X2], solver, s=3)
        np.testing.assert_allclose(model.predict_view([X1_new, None], 1), X1_new @ A - 2.0, atol=1e-7)


def test_a_single_implicit_view_is_kernel_pca(rng):
    X = rng.normal(size=(150, 4))
    model = MultiViewRKM(5, kernel=("rbf",), gamma=(0.2,)).fit([X])
    kpca = KernelPCA(5, gamma=0.2).fit(X)
    assert model.solver_ == "dual_eig"
    np.testing.assert_allclose(model.eigenvalues_, kpca.eigenvalues_, rtol=1e-10)
    np.testing.assert_allclose(model.H_, kpca.H_, atol=1e-10)
    np.testing.assert_allclose(model.transform([X[:9] + 0.1]), kpca.transform(X[:9] + 0.1), atol=1e-10)
    # A Kernel object brings its own bandwidth.
    other = MultiViewRKM(5, kernel=(RBF(gamma=0.2),)).fit([X])
    np.testing.assert_allclose(other.eigenvalues_, model.eigenvalues_, rtol=1e-12)
    assert other.gamma_ == [0.2]


def test_implicit_views_sum_their_centred_kernels(rng, circle_views):
    views, t_new, _ = circle_views
    model = MultiViewRKM(6, kernel=("rbf", "laplacian"), gamma=(2.0, 0.5)).fit(views)
    n = views[0].shape[0]
    M = np.eye(n) - 1.0 / n
    d1 = (views[0] - views[0].T) ** 2
    d2 = np.abs(views[1][:, None, :] - views[1][None, :, :]).sum(axis=2)
    K = M @ (np.exp(-2.0 * d1) + np.exp(-0.5 * d2)) @ M
    w, H = _top_eigenpairs(K, 6)
    np.testing.assert_allclose(model.eigenvalues_, w, rtol=1e-10)
    assert _relative_error(model.H_, _largest_entry_positive(H)) < 1e-8
    assert model.U_ == [None, None] and model.view_dims_ == [None, None] and model.input_dims_ == [1, 2]
    assert _relative_error(model.transform(views), model.H_) < 1e-8


# ---------------------------------------------------------------------------------------------- explicit maps


def test_random_fourier_view_primal_equals_dual(circle_views):
    views, t_new, _ = circle_views
    rff = RandomFourierFeatures(40, gamma=2.0, random_state=0)
    models = [MultiViewRKM(6, kernel=(rff, "linear"), solver=solver).fit(views) for solver in EIG_SOLVERS]
    primal, dual = models
    assert primal.view_dims_ == dual.view_dims_ == [40, 2]
    np.testing.assert_allclose(primal.eigenvalues_, dual.eigenvalues_, rtol=1e-10)
    assert _relative_error(primal.H_, dual.H_) < 1e-8
    new = [t_new[:, None], np.column_stack([np.cos(t_new), np.sin(t_new)])]
    assert _relative_error(primal.transform(new), dual.transform(new)) < 1e-8
    # The circle from the angle (a linear pre-image) and, with as many components as the circle's view has
    # dimensions, the angle from the circle (smoother pre-image).
    assert _relative_error(primal.predict_view([new[0], None], 1), dual.predict_view([new[0], None], 1)) < 1e-8
    primal, dual = (MultiViewRKM(2, kernel=(rff, "linear"), solver=solver).fit(views) for solver in EIG_SOLVERS)
    np.testing.assert_allclose(primal.predict_view([None, new[1]], 0), dual.predict_view([None, new[1]], 0), atol=1e-10)
    # The estimator clones the transformer it was given.
    assert not hasattr(rff, "random_weights_")


def test_a_callable_feature_map_primal_equals_dual(linear_views):
    views, new = linear_views

    def quadratic(X):
        return np.column_stack([X, X[:, :1] ** 2])

    primal, dual = (MultiViewRKM(3, kernel=(quadratic, "linear"), solver=s).fit(views) for s in EIG_SOLVERS)
    assert primal.view_dims_ == [5, 3]
    np.testing.assert_allclose(primal.eigenvalues_, dual.eigenvalues_, rtol=1e-10)
    assert _relative_error(primal.transform(new), dual.transform(new)) < 1e-8


def test_one_kernel_entry_serves_every_view(linear_views):
    views, new = linear_views
    single, double = MultiViewRKM(3, kernel="linear", solver="dual_eig").fit(views), _fit(views, "dual_eig", s=3)
    np.testing.assert_array_equal(single.H_, double.H_)
    np.testing.assert_array_equal(single.transform(new), double.transform(new))
    # Without a sequence the views fix the number of views; a per-view gamma then needs one entry each.
    three = MultiViewRKM(2, kernel="rbf", gamma=(0.1, 0.2, 0.3)).fit([*views, views[0][:, :1]])
    assert three.n_views_ == 3 and three.gamma_ == [0.1, 0.2, 0.3]
    assert MultiViewRKM(2, kernel="rbf", gamma=0.1).fit(views).gamma_ == [0.1, 0.1]


def test_parameters_are_validated_as_scikit_learn_does():
    model = MultiViewRKM(2)
    assert model._validate_params() is None
    with pytest.raises(ValueError, match=_invalid("stiefel_method")):
        model.set_params(stiefel_method="newton")._validate_params()


def test_auto_solver_follows_the_flowchart(rng):
    wide = [rng.normal(size=(30, 50)), rng.normal(size=(30, 2))]
    tall = [rng.normal(size=(80, 5)), rng.normal(size=(80, 2))]
    assert _fit(wide, "auto").solver_ == "dual_eig"
    assert _fit(tall, "auto").solver_ == "primal_eig"
    assert MultiViewRKM(3, kernel=("rbf", "linear")).fit(tall).solver_ == "dual_eig"


# ---------------------------------------------------------------------------------------------- Stiefel


@pytest.mark.parametrize("setting", ["primal", "dual"])
@pytest.mark.parametrize("method", ["cayley_bb", "pg_anderson"])
def test_rotated_stiefel_solution_is_the_eigen_solution(linear_views, setting, method):
    views, new = linear_views
    eig = _fit(views, f"{setting}_eig")
    model = _fit(views, f"{setting}_stiefel", stiefel_method=method)
    assert model.stiefel_result_.success and model.n_iter_ == model.stiefel_result_.nit > 0
    np.testing.assert_allclose(model.eigenvalues_, eig.eigenvalues_, rtol=1e-8)
    np.testing.assert_allclose(model.objective_, -0.5 * eig.eigenvalues_.sum(), rtol=1e-8)
    # Signs follow the same rule as the eig solvers', so the rotated H equals theirs.
    assert _relative_error(model.H_, eig.H_) < 1e-6
    assert _relative_error(model.transform(new), eig.transform(new)) < 1e-6
    assert _relative_error(model.predict_view([new[0], None], 1), eig.predict_view([new[0], None], 1)) < 1e-8
    # gamma_matrix_ is Gamma before the rotation, O Lambda O^T.
    O = model.rotation_
    np.testing.assert_allclose(O.T @ O, np.eye(3), atol=1e-12)
    np.testing.assert_allclose(
        O @ np.diag(model.eigenvalues_) @ O.T, model.gamma_matrix_, rtol=0, atol=1e-10 * model.eigenvalues_[0]
    )


@pytest.mark.parametrize("setting", ["primal", "dual"])
def test_unrotated_stiefel_solution_is_a_rotation_of_it(linear_views, setting):
    views, new = linear_views
    rotated = _fit(views, f"{setting}_stiefel")
    model = _fit(views, f"{setting}_stiefel", rotate=False)
    Gamma, O, w = model.gamma_matrix_, model.rotation_, model.eigenvalues_
    off_diagonal = np.abs(Gamma - np.diag(np.diag(Gamma))).max()
    assert off_diagonal > 1e-3 * w[0]
    np.testing.assert_allclose(O @ np.diag(w) @ O.T, Gamma, atol=1e-10 * w[0])
    np.testing.assert_allclose(w, rotated.eigenvalues_, rtol=1e-10)
    np.testing.assert_allclose(model.H_.T @ model.H_, np.eye(3), atol=1e-10)
    # H_ O is the rotated (eigen) solution up to signs; latents rotate with it and predictions do not change.
    np.testing.assert_allclose(np.abs(model.H_ @ O), np.abs(rotated.H_), atol=1e-7)
    np.testing.assert_allclose(np.abs(model.transform(new) @ O), np.abs(rotated.transform(new)), atol=1e-7)
    np.testing.assert_allclose(
        model.predict_view([new[0], None], 1), rotated.predict_view([new[0], None], 1), rtol=1e-8
    )


def test_stiefel_reports_non_convergence(linear_views):
    views, _ = linear_views
    with pytest.warns(ConvergenceWarning, match="Stiefel method"):
        model = _fit(views, "dual_stiefel", max_iter=2)
    assert model.n_iter_ == 2 and not model.stiefel_result_.success


def test_fits_are_deterministic(linear_views):
    views, new = linear_views
    first, second = (_fit(views, "dual_stiefel", rotate=False) for _ in range(2))
    np.testing.assert_array_equal(first.H_, second.H_)
    np.testing.assert_array_equal(first.transform(new), second.transform(new))


# ---------------------------------------------------------------------------------------------- rescaling


def test_without_rescaling_latents_shrink_by_the_square_roots_of_the_eigenvalues(linear_views):
    views, new = linear_views
    rescaled, plain = _fit(views, "primal_eig"), _fit(views, "primal_eig", rescale=False)
    np.testing.assert_allclose(plain.eigenvalues_, rescaled.eigenvalues_, rtol=1e-12)
    scale = np.sqrt(rescaled.eigenvalues_)
    np.testing.assert_allclose(plain.H_ * scale, rescaled.H_, atol=1e-10)
    np.testing.assert_allclose(plain.transform(new) * scale, rescaled.transform(new), atol=1e-10)
    np.testing.assert_allclose(np.vstack(plain.U_) * scale, np.vstack(rescaled.U_), atol=1e-10)
    # Inferring a view then collapses towards its training mean (the paper's Fig. 7).
    truth = views[1][:20]
    error = {
        name: np.mean((m.predict_view([views[0][:20], None], 1) - truth) ** 2)
        for name, m in (("rescaled", rescaled), ("plain", plain))
    }
    spread = np.mean((truth - views[1].mean(axis=0)) ** 2)
    assert error["rescaled"] < 0.05 * spread < error["plain"]
    # The dual has no rescaling to omit.
    np.testing.assert_array_equal(_fit(views, "dual_eig", rescale=False).H_, _fit(views, "dual_eig").H_)


# ---------------------------------------------------------------------------------------------- pre-images


@pytest.mark.parametrize("preimage", ["smoother", "ridge"])
def test_nonlinear_view_is_inferred_near_the_truth(circle_views, preimage):
    views, t_new, truth = circle_views
    model = MultiViewRKM(8, kernel=("rbf", "rbf"), gamma=(2.0, 2.0), preimage=preimage).fit(views)
    assert model.preimages_ == [preimage, preimage]
    predicted = model.predict_view([t_new[:, None], None], missing=1)
    assert predicted.shape == truth.shape
    # Measured: 0.053 (smoother over 10 neighbours), 0.059 (ridge, alpha 1).
    assert np.abs(predicted - truth).max() < 0.1
    # And the angle from the point, a 1-D view (the ridge map misses by up to 0.58 here: not checked).
    angles = model.predict_view([None, truth], missing=0)
    assert angles.shape == (t_new.size, 1)
    if preimage == "smoother":
        assert np.abs(angles[:, 0] - t_new).max() < 0.1  # measured 0.069


def test_linear_view_preimage_is_the_identity(circle_views):
    views, _, _ = circle_views
    model = MultiViewRKM(6, kernel=("rbf", "linear"), gamma=(2.0, None), preimage="ridge").fit(views)
    assert model.preimages_ == ["ridge", "identity"]


# ---------------------------------------------------------------------------------------------- bad input


def _views(rng, n=20):
    return [rng.normal(size=(n, 3)), rng.normal(size=(n, 2))]


@pytest.mark.parametrize(
    "params,views,match",
    [
        (dict(), [], "^views: must be a non-empty list"),
        (dict(), "abc", "^views: must be a non-empty list"),
        (dict(), [np.ones((5, 2))], "^views: got 1 views but the model has 2"),
        (dict(), [np.ones((5, 2)), np.ones((4, 2))], r"^views: all views need the same number of rows, got \[5, 4\]"),
        (dict(), [np.ones((5, 2)), None], r"^views\[1\]: an array is required"),
        (dict(), [np.full((5, 2), np.nan), np.ones((5, 2))], r"^views\[0\]: contains NaN or infinity"),
        (dict(), [np.ones((5, 2)), np.full((5, 1), np.inf)], r"^views\[1\]: contains NaN or infinity"),
        (dict(), [np.ones((5, 2, 2)), np.ones((5, 2))], r"^views\[0\]: must be a non-empty 1-D or 2-D array"),
        (dict(), [np.array([["a"], ["b"]]), np.ones((2, 1))], r"^views\[0\]: must be an array of real numbers"),
        (dict(), [np.ones((1, 2)), np.ones((1, 2))], "^views: centring needs at least 2 samples"),
    ],
)
def test_bad_views(params, views, match):
    with pytest.raises(ValueError, match=match):
        MultiViewRKM(1, kernel=("linear", "linear"), **params).fit(views)


def _invalid(name):
    """The start of scikit-learn's InvalidParameterError message for parameter `name`."""
    return rf"^The '{name}' parameter of MultiViewRKM must be"


@pytest.mark.parametrize(
    "params,match",
    [
        (dict(n_components=0), _invalid("n_components")),
        (dict(n_components=2.5), _invalid("n_components")),
        (dict(n_components=True), _invalid("n_components")),
        (dict(n_components=21, solver="dual_eig"), "^n_components: must be at most n_samples = 20"),
        (
            dict(n_components=6, solver="primal_eig"),
            "^n_components: must be at most the summed feature dimension d = 5",
        ),
        (dict(n_components=6, solver="dual_eig"), r"^n_components: 6 components exceed the numerical rank \(5\)"),
        (dict(kernel=()), "^kernel: must be one value or a non-empty list"),
        (dict(kernel="foo"), _invalid("kernel")),
        (dict(kernel=("linear", "foo")), r"^kernel\[1\]: unknown kernel 'foo'"),
        (dict(kernel=("linear", 3)), r"^kernel\[1\]: must be a kernel name"),
        (dict(kernel=("rbf", "linear"), gamma=(-1.0, None)), r"^gamma\[0\]: must be a positive finite number"),
        (dict(kernel="rbf", gamma=-1.0), "^gamma: must be a positive finite number"),
        (dict(kernel="poly", degree=(2, -1)), r"^degree\[1\]: must be a non-negative number"),
        (dict(gamma="0.5"), _invalid("gamma")),
        (dict(gamma=(1.0,)), r"^gamma: must be one value or a list or tuple with one entry per view \(2\)"),
        (dict(kernel="linear", coef0=(1.0, 2.0, 3.0)), r"^coef0: must be one value or a list or tuple with one entry"),
        (dict(kernel=("rbf", "linear"), solver="primal_eig"), "^solver: 'primal_eig' needs explicit feature maps"),
        (dict(kernel=("linear", "poly"), solver="primal_stiefel"), "^solver: 'primal_stiefel' needs explicit"),
        (dict(kernel="rbf", solver="primal_eig"), "^solver: 'primal_eig' needs explicit feature maps"),
        (dict(solver="svd"), _invalid("solver")),
        (dict(stiefel_method="adam"), _invalid("stiefel_method")),
        (dict(preimage="fixed_point"), _invalid("preimage")),
        (dict(rotate=1), _invalid("rotate")),
        (dict(rescale=None), _invalid("rescale")),
        (dict(max_iter=0), _invalid("max_iter")),
        (dict(tol=-1.0), _invalid("tol")),
        (dict(n_neighbors=0), _invalid("n_neighbors")),
        (dict(preimage_alpha=0.0), _invalid("preimage_alpha")),
        (dict(n_threads=0), _invalid("n_threads")),
        (dict(random_state="seed"), _invalid("random_state")),
        (dict(verbose=-1), _invalid("verbose")),
        (dict(kernel=(lambda X: X[:, 0], "linear")), r"^kernel\[0\]: the feature map must return a 2-D array"),
        (dict(kernel=(lambda X: X / 0.0, "linear")), r"^kernel\[0\]: the feature map returned NaN or infinity"),
        (dict(kernel=lambda X: X / 0.0), r"^kernel: the feature map returned NaN or infinity"),
    ],
)
def test_bad_parameters(rng, params, match):
    params = {"n_components": 2, "kernel": ("linear", "linear"), **params}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the division by zero of the failing feature map
        with pytest.raises(ValueError, match=match):
            MultiViewRKM(**params).fit(_views(rng))


def test_bad_inference_input(rng):
    model = _fit(_views(rng), "dual_eig", s=2)
    X1, X2 = rng.normal(size=(4, 3)), rng.normal(size=(4, 2))
    for missing in (2, -1, 1.0, True, "1", None):
        with pytest.raises(ValueError, match=r"^missing: must be an int in \[0, 2\)"):
            model.predict_view([X1, None], missing)
    with pytest.raises(ValueError, match=r"^views\[1\]: an array is required"):
        model.transform([X1, None])
    with pytest.raises(ValueError, match=r"^views\[0\]: has 2 columns but the model was fitted with 3"):
        model.predict_view([X2, None], 1)
    with pytest.raises(ValueError, match=r"^views\[0\]: an array is required"):
        model.predict_view([None, X2], 1)
    with pytest.raises(ValueError, match="^views: got 3 views"):
        model.transform([X1, X2, X2])
    with pytest.raises(ValueError, match=r"^views\[0\]: contains NaN"):
        model.predict_view([np.full((4, 3), np.nan), None], 1)


def test_inferring_a_view_that_carries_a_component_alone_is_refused(rng):
    # The one-column view 0 fixes one direction of the latent space: two components cannot be inferred from it.
    views = [rng.normal(size=(30, 1)), rng.normal(size=(30, 3))]
    model = _fit(views, "dual_eig", s=2)
    with pytest.raises(ValueError, match="^missing: Gamma - B_1 of eqs. 15-16 is singular"):
        model.predict_view([views[0], None], missing=1)
    assert model.predict_view([None, views[1]], missing=0).shape == (30, 1)


def test_a_failed_fit_leaves_the_model_unfitted(rng):
    views = _views(rng)
    model = _fit(views, "dual_eig", s=2)
    with pytest.raises(ValueError, match="^n_components: 6 components exceed the numerical rank"):
        model.set_params(n_components=6).fit(views)
    with pytest.raises(NotFittedError):
        model.transform(views)


def test_one_view_has_nothing_to_infer_from(rng):
    model = MultiViewRKM(2, kernel=("linear",)).fit([rng.normal(size=(10, 3))])
    with pytest.raises(ValueError, match="^missing: a model of one view"):
        model.predict_view([None], 0)


def test_progress_lines(rng, capsys):
    MultiViewRKM(2, kernel="linear", solver="dual_eig", verbose=1).fit(_views(rng))
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3 and all(line.startswith("MultiViewRKM [") for line in lines)
    assert "solver 'dual_eig'" in lines[0] and "fitted 2 components" in lines[-1]
