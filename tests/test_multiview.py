"""rkm.MultiViewRKM: the four solvers against each other and against independent constructions, centring of
non-centred data, Stiefel rotation, rescaling, missing-view inference, the single-array input of scikit-learn's
API (view_columns), callable kernels, sparse views, copies of the training views, warnings and bad input.

scikit-learn's estimator checks run on the single-array input in tests/test_sklearn_api.py.
"""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.metrics.pairwise import rbf_kernel
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer, StandardScaler

from rkm import KernelPCA, MultiViewRKM
from rkm.exceptions import ConvergenceWarning
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


def test_a_function_feature_map_primal_equals_dual(linear_views):
    views, new = linear_views

    def quadratic(X):
        return np.column_stack([X, X[:, :1] ** 2])

    feature_map = FunctionTransformer(quadratic)
    primal, dual = (MultiViewRKM(3, kernel=(feature_map, "linear"), solver=s).fit(views) for s in EIG_SOLVERS)
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
    with pytest.warns(ConvergenceWarning, match="Stiefel method") as caught:
        model = _fit(views, "dual_stiefel", max_iter=2)
    assert model.n_iter_ == 2 and not model.stiefel_result_.success
    # rkm's class, attributed to the user's line (this file), not to rkm's code.
    assert [w.filename for w in caught] == [__file__]


def test_krylov_non_convergence_points_at_the_callers_line(rng):
    views = [rng.normal(size=(300, 5)), rng.normal(size=(300, 2))]
    with pytest.warns(ConvergenceWarning, match="Krylov eigensolver") as caught:
        MultiViewRKM(2, kernel="rbf", solver="dual_eig", max_iter=1, random_state=0).fit(views)
    assert {w.filename for w in caught} == {__file__}


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
        (dict(preimage="newton"), _invalid("preimage")),
        (dict(rotate=1), _invalid("rotate")),
        (dict(rescale=None), _invalid("rescale")),
        (dict(max_iter=0), _invalid("max_iter")),
        (dict(tol=-1.0), _invalid("tol")),
        (dict(n_neighbors=0), _invalid("n_neighbors")),
        (dict(preimage_alpha=0.0), _invalid("preimage_alpha")),
        (dict(n_threads=0), _invalid("n_threads")),
        (dict(random_state="seed"), _invalid("random_state")),
        (dict(verbose=-1), _invalid("verbose")),
        (
            dict(kernel=(FunctionTransformer(lambda X: X[:, 0]), "linear")),
            r"^kernel\[0\]: the feature map must return a 2-D array",
        ),
        (
            dict(kernel=(FunctionTransformer(lambda X: X / 0.0), "linear")),
            r"^kernel\[0\]: the feature map returned NaN or infinity",
        ),
        (dict(kernel=FunctionTransformer(lambda X: X / 0.0)), r"^kernel: the feature map returned NaN or infinity"),
        # A callable is a kernel function k(X, Y): a one-argument feature map is refused with the way to pass it.
        (dict(kernel=(lambda X: X, "linear")), r"^kernel\[0\]: a callable is a kernel function, .*FunctionTransformer"),
        (dict(kernel=(lambda X, Y: X, "linear")), r"^kernel\[0\]: the callable must return the Gram matrix of shape"),
        (dict(kernel=(lambda X, Y: X @ Y.T / 0.0, "linear")), r"^kernel\[0\]: the callable returned NaN or infinite"),
        (
            dict(kernel=(lambda X, Y: X @ Y.T + X[:, :1], "linear")),
            r"^kernel\[0\]: the callable kernel's matrix k\(X, X\) must be symmetric",
        ),
        (
            dict(kernel=(rbf_kernel, "linear"), solver="primal_eig"),
            "^solver: 'primal_eig' needs explicit .* a callable",
        ),
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
    for missing in ([], [0, 1], [1, 1], [2]):
        with pytest.raises(ValueError, match="^missing: "):
            model.predict_latent([X1, None], missing)
    with pytest.raises(ValueError, match="^missing: every view is missing"):
        model.transform([None, None])
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
    with pytest.raises(ValueError, match=r"^missing: Gamma - B_\(1\) of eqs. 15-16 is singular"):
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


# ------------------------------------------------------------------------------------- callable kernels, sparse


@pytest.mark.parametrize("solver", ["dual_eig", "dual_stiefel"])
def test_a_callable_kernel_equals_the_named_kernel(circle_views, solver):
    (t, circle), t_new, _ = circle_views
    new = [t_new[:, None], None]
    # Two components: the two-column linear view then determines them all (view 0 can be inferred too).
    named = MultiViewRKM(2, kernel=("rbf", "linear"), gamma=(0.7, None), solver=solver, random_state=0)
    function = MultiViewRKM(
        2, kernel=(lambda X, Y: rbf_kernel(X, Y, gamma=0.7), "linear"), solver=solver, random_state=0
    )
    named, function = named.fit([t, circle]), function.fit([t, circle])
    np.testing.assert_allclose(function.eigenvalues_, named.eigenvalues_, rtol=1e-10)
    np.testing.assert_allclose(function.H_, named.H_, atol=1e-8)
    np.testing.assert_allclose(
        function.transform([t_new[:, None], circle[:40]]), named.transform([t_new[:, None], circle[:40]]), atol=1e-8
    )
    np.testing.assert_allclose(function.predict_view(new, 1), named.predict_view(new, 1), atol=1e-8)
    # The inferred implicit view: a smoother over the training angles by the callable's predicted similarities.
    back = [None, circle[:5]]
    np.testing.assert_allclose(function.predict_view(back, 0), named.predict_view(back, 0), atol=1e-8)


@pytest.mark.parametrize("container", [sp.csr_matrix, sp.csr_array, sp.csc_array])
@pytest.mark.parametrize("solver", ["primal_eig", "dual_eig"])
def test_sparse_linear_views_equal_the_dense_ones(linear_views, container, solver):
    views, new = linear_views
    sparse = [container(np.where(np.abs(V - 5.0) > 0.5, V, 0.0)) for V in views]
    dense = [A.toarray() for A in sparse]
    sparse_model, dense_model = _fit(sparse, solver), _fit(dense, solver)
    np.testing.assert_allclose(sparse_model.eigenvalues_, dense_model.eigenvalues_, rtol=1e-12)
    np.testing.assert_allclose(sparse_model.H_, dense_model.H_, atol=1e-10)
    for query in ([container(new[0]), new[1]], new):  # sparse or dense new points
        np.testing.assert_allclose(sparse_model.transform(query), dense_model.transform(new), atol=1e-10)
        np.testing.assert_allclose(
            sparse_model.predict_view([query[0], None], 1), dense_model.predict_view([new[0], None], 1), atol=1e-10
        )


@pytest.mark.parametrize("kernel", ["rbf", "laplacian", "cosine", "tanimoto"])
def test_sparse_views_with_named_kernels_equal_the_dense_ones(rng, kernel):
    X = np.where(rng.uniform(size=(60, 8)) > 0.6, rng.uniform(size=(60, 8)), 0.0)
    views = [X, X[:, :2] @ rng.normal(size=(2, 2))]
    model = MultiViewRKM(2, kernel=(kernel, "linear"), gamma=(0.5, None), preimage="ridge")
    dense, sparse = clone_fit(model, views), clone_fit(model, [sp.csr_array(views[0]), views[1]])
    np.testing.assert_allclose(sparse.eigenvalues_, dense.eigenvalues_, rtol=1e-10)
    np.testing.assert_allclose(
        sparse.transform([sp.csr_array(X[:7]), views[1][:7]]), dense.transform([X[:7], views[1][:7]]), atol=1e-9
    )
    # The pre-image of the sparse view is dense and equals the dense model's.
    np.testing.assert_allclose(
        sparse.predict_view([None, views[1][:5]], 0), dense.predict_view([None, views[1][:5]], 0), atol=1e-9
    )


def clone_fit(model, views):
    return clone(model).fit(views)


@pytest.mark.parametrize(
    "solver,match",
    [
        ("dual_eig", r"^views\[0\]: the linear kernel overflows float64"),
        ("primal_eig", r"^views\[0\]: the covariance of the features overflows float64"),
    ],
)
def test_overflowing_views_are_reported(linear_views, solver, match):
    views, _ = linear_views
    with pytest.raises(ValueError, match=match):
        _fit([views[0] * 1e160, views[1]], solver)
    with pytest.raises(ValueError, match=r"^views\[0\]: the rbf kernel overflows float64"):
        MultiViewRKM(2, kernel=("rbf", "linear"), gamma=(1.0, None)).fit([views[0] * 1e160, views[1]])


# ---------------------------------------------------------------------------------- copies of the training views


@pytest.mark.parametrize("kernel", [("linear", "linear"), ("rbf", "linear"), ("rbf", "rbf")])
def test_changing_the_training_views_after_fit_changes_nothing(linear_views, kernel):
    views, new = linear_views
    views = [V.copy() for V in views]
    model = MultiViewRKM(2, kernel=kernel, gamma=0.1, random_state=0).fit(views)
    assert all(view.X is not V and not np.shares_memory(view.X, V) for view, V in zip(model._views, views))
    before = model.transform(new), model.predict_view([new[0], None], 1), model.predict_view([None, new[1]], 0)
    for V in views:
        V[:] = 0.0
    after = model.transform(new), model.predict_view([new[0], None], 1), model.predict_view([None, new[1]], 0)
    for a, b in zip(before, after):
        np.testing.assert_array_equal(a, b)
    # The same for a single array split into views.
    X_new = np.hstack(new)
    X = np.vstack([X_new + 1.0, X_new - 1.0, 2.0 * X_new])
    single = MultiViewRKM(2, kernel=kernel, gamma=0.1, view_columns=[range(4), range(4, 7)], random_state=0).fit(X)
    before = single.transform(X_new)
    X[:] = 0.0
    np.testing.assert_array_equal(single.transform(X_new), before)


# ------------------------------------------------------------------------------ one array split into views


def test_one_array_split_by_view_columns_equals_the_list_of_views(linear_views):
    views, new = linear_views
    X, X_new = np.hstack(views), np.hstack(new)
    listed = MultiViewRKM(3, kernel=("rbf", "linear"), gamma=(0.1, None)).fit(views)
    for view_columns in ([[0, 1, 2, 3], [4, 5, 6]], (slice(0, 4), slice(4, None)), [np.arange(4), [-3, -2, -1]]):
        split = MultiViewRKM(3, kernel=("rbf", "linear"), gamma=(0.1, None), view_columns=view_columns).fit(X)
        assert split.n_features_in_ == 7 and [list(c) for c in split.view_columns_] == [[0, 1, 2, 3], [4, 5, 6]]
        np.testing.assert_array_equal(split.H_, listed.H_)
        np.testing.assert_array_equal(split.transform(X_new), listed.transform(new))
        np.testing.assert_array_equal(split.fit_transform(X), listed.H_)
        # The missing view's columns are ignored: NaN there is fine.
        query = X_new.copy()
        query[:, 4:] = np.nan
        np.testing.assert_array_equal(split.predict_view(query, 1), listed.predict_view([new[0], None], 1))
        np.testing.assert_array_equal(split.predict_latent(query, 1), listed.predict_latent([new[0], None], 1))
        # A model fitted on a list of views splits an array the same way.
        assert listed.set_params(view_columns=view_columns).transform(X_new).shape == (7, 3)
        listed.set_params(view_columns=None)
    # An int splits the columns into that many contiguous groups (numpy.array_split): 4 and 3 columns here.
    even = MultiViewRKM(3, kernel=("rbf", "linear"), gamma=(0.1, None), view_columns=2).fit(X)
    np.testing.assert_array_equal(even.H_, listed.H_)
    # A list of lists of numbers is the rows of one array (scikit-learn's reading), not a list of views.
    np.testing.assert_array_equal(even.transform(X_new.tolist()), even.transform(X_new))


def test_one_array_in_a_pipeline_with_feature_names(linear_views):
    pd = pytest.importorskip("pandas")
    views, new = linear_views
    frame = pd.DataFrame(np.hstack(views), columns=[f"c{j}" for j in range(7)])
    pipeline = make_pipeline(StandardScaler(), MultiViewRKM(2, kernel=("rbf", "linear"), view_columns=2))
    pipeline.set_output(transform="pandas")
    H = pipeline.fit_transform(frame)
    assert list(H.columns) == ["multiviewrkm0", "multiviewrkm1"]
    assert list(pipeline[-1].feature_names_in_) == list(frame.columns)
    np.testing.assert_allclose(pipeline.transform(frame).to_numpy(), H.to_numpy(), atol=1e-10)


@pytest.mark.parametrize(
    "params,X,match",
    [
        (dict(kernel=("rbf", "linear")), np.ones((6, 4)), "^X: a single 2-D array is one view, but the model has 2"),
        (dict(kernel=("rbf", "linear"), view_columns=3), np.ones((6, 4)), "^view_columns: splits X into 3 views"),
        (dict(view_columns=5), np.ones((6, 4)), r"^X: 4 feature\(s\) cannot be split into view_columns = 5 views"),
        (dict(view_columns=[[0, 9]]), np.ones((6, 4)), r"^view_columns\[0\]: column positions \[0, 9\] out of range"),
        (dict(view_columns=[[0], []]), np.ones((6, 4)), r"^view_columns\[1\]: selects no column of X"),
        (dict(view_columns=[[0.5]]), np.ones((6, 4)), r"^view_columns\[0\]: must be a slice or a list of integer"),
        (dict(view_columns=[]), np.ones((6, 4)), "^view_columns: must select the columns of at least one view"),
        (dict(view_columns=0), np.ones((6, 4)), "^The 'view_columns' parameter of MultiViewRKM must be"),
        (dict(), np.ones((1, 4)), r"1 sample\(s\)"),
        (dict(), np.full((6, 4), np.nan), "Input X contains NaN"),
        (dict(), None, "^views: must be a non-empty list or tuple of arrays"),
    ],
)
def test_bad_single_arrays(params, X, match):
    with pytest.raises(ValueError, match=match):
        MultiViewRKM(1, **params).fit(X)


def test_a_single_array_of_the_wrong_width_is_refused(linear_views):
    views, new = linear_views
    model = MultiViewRKM(2, kernel=("rbf", "linear"), view_columns=2).fit(np.hstack(views))
    with pytest.raises(ValueError, match="X has 6 features, but MultiViewRKM is expecting 7 features"):
        model.transform(np.hstack(new)[:, :6])
    with pytest.raises(ValueError, match=r"^X \(view 0\): contains NaN or infinity"):
        model.predict_view(np.full((3, 7), np.nan), 1)
