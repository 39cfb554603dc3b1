"""rkm.KernelAutoencoder: KAE and K²AE (Laforgue et al. 2019)."""

import warnings

import numpy as np
import pytest
from sklearn.datasets import make_blobs
from sklearn.model_selection import GridSearchCV, cross_val_score
from sklearn.pipeline import make_pipeline

from rkm import KernelAutoencoder, KernelPCA, reference
from rkm.autoencoders.kae import _STATIONARY
from rkm.datasets import make_concentric_circles, make_moons
from rkm.exceptions import ConvergenceWarning
from rkm.kernels import kernel_matrix, names_with


def _circles(n_samples, noise=0.05, seed=0):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 3, n_samples)
    angles = rng.uniform(0.0, 2.0 * np.pi, n_samples)
    X = np.c_[np.cos(angles), np.sin(angles)] * (labels + 1.0)[:, None]
    return X + noise * rng.standard_normal(X.shape), labels


def _gram(n_samples, seed=1):
    rng = np.random.default_rng(seed)
    Z = rng.standard_normal((n_samples, 3))
    return kernel_matrix(Z, kernel="rbf", gamma=0.3), Z


def _relative(a, b):
    return np.abs(a - b).max() / max(np.abs(b).max(), 1e-300)


def _random_coefficients(model, X, seed=3, scale=0.3):
    setup = model._configuration(X)
    rng = np.random.default_rng(seed)
    return [scale * rng.standard_normal((setup.X.shape[0], d)) for d in setup.sizes[1 : 1 + setup.n_optimized]]


# --------------------------------------------------------------------------------------------------------------
# gradients
# --------------------------------------------------------------------------------------------------------------

_MODELS = {
    "kae_rbf_L3": (
        lambda: KernelAutoencoder((3, 2), gamma=[0.5, 0.4, 0.3], lam=[1e-2, 2e-2, 3e-2], last_layer="gradient"),
        False,
    ),
    "kae_mixed_A": (
        lambda: KernelAutoencoder(
            (3,),
            kernel=["poly", "rbf"],
            gamma=[0.3, 0.5],
            degree=2,
            lam=1e-2,
            last_layer="gradient",
            operators=[np.diag([1.0, 0.5, 0.0]), np.array([[2.0, 1.0], [1.0, 1.0]])],
        ),
        False,
    ),
    "kae_linear_L4": (
        lambda: KernelAutoencoder((3, 1, 2), kernel="linear", lam=[0.1, 0.0, 1e-3, 1e-2], last_layer="gradient"),
        False,
    ),
    "kae_ridge_L3": (
        lambda: KernelAutoencoder(
            (3, 2), gamma=[0.5, 0.4, 0.3], lam=[1e-2, 2e-2, 3e-2], operators=[np.diag([1.0, 0.5, 0.2]), None, None]
        ),
        False,
    ),
    "kae_ridge_poly_no_penalty": (
        lambda: KernelAutoencoder((2,), kernel=["rbf", "poly"], gamma=[0.5, 0.3], degree=2, lam=[1e-2, 0.0]),
        False,
    ),
    "k2ae_L3": (lambda: KernelAutoencoder((3, 2), kernel="precomputed", gamma=[None, 0.5, 0.7], lam=1e-2), True),
    "k2ae_linear_no_penalty": (lambda: KernelAutoencoder((2,), kernel=["precomputed", "linear"], lam=0.0), True),
}


def _data(precomputed, n_samples=14):
    return _gram(n_samples)[0] if precomputed else _circles(n_samples)[0]


@pytest.mark.parametrize("name", list(_MODELS))
def test_adjoint_and_jacobian_gradients_agree(name):
    factory, precomputed = _MODELS[name]
    model, X = factory(), _data(precomputed)
    coefficients = _random_coefficients(model, X)
    loss_a, grads_a = model.loss_and_grad(X, coefficients, gradient="adjoint")
    loss_j, grads_j = model.loss_and_grad(X, coefficients, gradient="jacobian")
    assert loss_a == pytest.approx(loss_j, rel=1e-12)
    for ga, gj in zip(grads_a, grads_j):
        assert _relative(ga, gj) < 1e-8


@pytest.mark.parametrize("name", list(_MODELS))
def test_gradient_matches_central_differences(name):
    factory, precomputed = _MODELS[name]
    model, X = factory(), _data(precomputed, 10)
    coefficients = _random_coefficients(model, X)
    _, grads = model.loss_and_grad(X, coefficients)
    rng = np.random.default_rng(5)
    eps = 1e-6
    for layer, P in enumerate(coefficients):
        direction = rng.standard_normal(P.shape)
        plus = [Q.copy() for Q in coefficients]
        minus = [Q.copy() for Q in coefficients]
        plus[layer] += eps * direction
        minus[layer] -= eps * direction
        slope = (model.loss_and_grad(X, plus)[0] - model.loss_and_grad(X, minus)[0]) / (2 * eps)
        expected = float(np.sum(grads[layer] * direction))
        assert slope == pytest.approx(expected, rel=1e-6, abs=1e-7 * max(1.0, np.abs(grads[layer]).sum()))


@pytest.mark.parametrize("name", list(_MODELS))
def test_estimator_loss_is_the_reference_loss(name):
    factory, precomputed = _MODELS[name]
    model, X = factory(), _data(precomputed)
    coefficients = _random_coefficients(model, X)
    setup = model._configuration(X)
    kernels = setup.specs[1:] if setup.solved else setup.specs
    loss, grads, _ = reference.kae_loss_and_grad(
        setup.core_input,
        coefficients,
        kernels,
        setup.operators[: setup.n_optimized],
        setup.lam,
        setup.solved,
        output_features=setup.output_features,
    )
    loss_model, grads_model = model.loss_and_grad(X, coefficients)
    assert loss_model == pytest.approx(loss, rel=1e-10)
    for a, b in zip(grads_model, grads):
        assert _relative(a, b) < 1e-9


# --------------------------------------------------------------------------------------------------------------
# fitting
# --------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "solver,step,update",
    [
        ("lbfgs", "armijo", "joint"),
        ("gd", "armijo", "joint"),
        ("gd", "bb", "joint"),
        ("lbfgs", "armijo", "layerwise"),
        ("gd", "armijo", "layerwise"),
    ],
)
def test_every_optimizer_decreases_the_loss(solver, step, update):
    X, _ = _circles(60)
    model = KernelAutoencoder(
        (2,), gamma=[1.0, 1.0], lam=1e-2, solver=solver, step=step, update=update, max_iter=40, random_state=0
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(X)
    curve = np.array(model.objective_history_)
    assert model.objective_ < 0.99 * curve[0]
    assert model.objective_ == pytest.approx(curve.min(), rel=1e-9)
    assert 1 <= model.n_iter_ <= 40 and len(curve) >= model.n_iter_
    if step == "armijo" and update == "joint":
        assert np.all(np.diff(curve) <= 1e-12 * curve[0])


def test_fit_is_deterministic_and_seeded():
    X, _ = _circles(50)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        a = KernelAutoencoder((1,), max_iter=30, random_state=4).fit(X)
        b = KernelAutoencoder((1,), max_iter=30, random_state=4).fit(X)
        c = KernelAutoencoder((1,), max_iter=30, random_state=5).fit(X)
    np.testing.assert_array_equal(a.transform(X), b.transform(X))
    assert not np.allclose(a.coefficients_[0], c.coefficients_[0])


def test_early_stopping_on_relative_decrease():
    X, _ = _circles(50)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # a loose tol stops on a plateau, a tight one at max_iter
        loose = KernelAutoencoder((1,), max_iter=500, tol=1e-2, random_state=0).fit(X)
        tight = KernelAutoencoder((1,), max_iter=500, tol=1e-9, random_state=0).fit(X)
    assert loose.n_iter_ < tight.n_iter_


def test_training_outputs_are_consistent():
    X, _ = _circles(80)
    model = KernelAutoencoder((4, 1), gamma=[1.0, 0.5, 1.0], max_iter=30, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(X)
    assert model.code_layer_ == 2 and model.n_layers_ == 3
    np.testing.assert_allclose(model.transform(X), model.representations_[2], atol=1e-12)
    errors = model.reconstruction_error(X)
    assert errors.mean() == pytest.approx(model.terms_[0], rel=1e-10)
    assert model.score(X) == pytest.approx(-model.terms_[0], rel=1e-10)
    assert model.reconstruct(X).shape == X.shape
    assert model.objective_ == pytest.approx(model.terms_[0] + np.dot(model.lam_, model.terms_[1:]), rel=1e-12)


def test_code_layer_selects_the_representation():
    X, _ = _circles(40)
    model = KernelAutoencoder((3, 1), code_layer=1, max_iter=5, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(X)
    codes = model.transform(X)
    assert codes.shape == (40, 3)
    np.testing.assert_allclose(model.inverse_transform(codes), model.reconstruct(X), atol=1e-12)


def test_k2ae_test_distortion_from_gram_blocks():
    K, Z = _gram(70)
    train, test = np.arange(50), np.arange(50, 70)
    model = KernelAutoencoder((3,), kernel="precomputed", gamma=[None, 0.5], lam=1e-3, max_iter=50, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(K[np.ix_(train, train)])
    # On the training points the formula of Appendix B.7 gives the training distortion back.
    train_errors = model.reconstruction_error(K[np.ix_(train, train)], np.diag(K)[train])
    assert train_errors.mean() == pytest.approx(model.terms_[0], rel=1e-8)
    # Out of sample it is the squared RKHS distance ||phi(x) - sum_i c_i(x) phi(x_i)||^2 with the ridge weights.
    block = K[np.ix_(test, train)]
    codes = model.transform(block)
    k_L = kernel_matrix(codes, model.representations_[-1], kernel="rbf", gamma=0.5)
    weights = k_L @ model.ridge_inverse_
    K_train = K[np.ix_(train, train)]
    expected = (
        np.diag(K)[test] - 2 * np.einsum("ij,ij->i", weights, block) + np.einsum("ij,ij->i", weights @ K_train, weights)
    )
    np.testing.assert_allclose(
        model.reconstruction_error(block, np.diag(K)[test]), expected, atol=1e-10 * np.abs(expected).max()
    )
    assert model.score(block, diag=np.diag(K)[test]) == pytest.approx(-expected.mean(), rel=1e-10)


def test_linear_k2ae_without_penalty_recovers_the_kernel_pca_subspace():
    # §3.2.1: with linear kernels and no penalty, the optimal codes span the top eigenvectors of K_in
    # (the kernel PCA map, uncentred as in the paper's analysis). K_in = F F^T is the Gram matrix of a
    # finite-dimensional feature map, the setting of §3.2.1. (With a full-rank K_in the optimizers approach the
    # same subspace ever more slowly: Phi's coordinates along the small eigenvalues of K_in have a curvature
    # of their square.)
    rng = np.random.default_rng(1)
    F = rng.standard_normal((40, 5)) * np.array([3.0, 2.0, 1.0, 0.7, 0.5])
    K = F @ F.T
    model = KernelAutoencoder(
        (2,), kernel=["precomputed", "linear"], lam=0.0, max_iter=3000, tol=1e-15, random_state=0
    ).fit(K)
    codes = model.transform(K)
    kpca = KernelPCA(n_components=2, kernel="precomputed", center=False).fit(K)
    Q_codes = np.linalg.qr(codes)[0]
    Q_kpca = np.linalg.qr(kpca.transform(K))[0]
    sines = np.sqrt(np.maximum(1.0 - np.linalg.svd(Q_codes.T @ Q_kpca, compute_uv=False) ** 2, 0.0))
    assert sines.max() < 1e-6


def test_k2ae_on_a_linear_gram_matches_the_kae_loss():
    # K_in = X X^T is the linear kernel of X: a K²AE with an rbf last layer reaches the loss of a KAE whose last
    # layer is the optimal ridge regression (the same objective once Phi_L is minimized out).
    X, _ = _circles(30)
    k2ae = KernelAutoencoder((2,), kernel=["precomputed", "rbf"], gamma=[None, 0.7], lam=[1e-3, 1e-2])
    kae = KernelAutoencoder((2,), kernel=["linear", "rbf"], gamma=[None, 0.7], lam=[1e-3, 1e-2], last_layer="gradient")
    Phi_1 = _random_coefficients(kae, X)[0]
    codes = X @ X.T @ Phi_1
    K_2 = kernel_matrix(codes, kernel="rbf", gamma=0.7)
    Phi_2 = np.linalg.solve(K_2 + 30 * 1e-2 * np.eye(30), X)
    loss_k2ae, grads_k2ae = k2ae.loss_and_grad(X @ X.T, [Phi_1])
    loss_kae, grads_kae = kae.loss_and_grad(X, [Phi_1, Phi_2])
    assert loss_k2ae == pytest.approx(loss_kae, rel=1e-9)
    assert _relative(grads_k2ae[0], grads_kae[0]) < 1e-7  # envelope theorem: Phi_2 is optimal
    assert np.abs(grads_kae[1]).max() < 1e-8 * np.abs(grads_kae[0]).max()


def test_kpca_initialization_starts_from_the_kernel_pca_map():
    X, _ = _circles(40)
    model = KernelAutoencoder((2,), kernel=["linear", "rbf"], init="kpca", max_iter=1)
    start = model._initial_coefficients(model._configuration(X))
    codes = X @ X.T @ start[0]
    top = np.linalg.eigh(X @ X.T)[1][:, ::-1][:, :2]
    assert np.linalg.svd(np.linalg.qr(codes)[0].T @ top, compute_uv=False).min() > 1 - 1e-10
    np.testing.assert_allclose(codes.var(axis=0).mean(), 1.0, rtol=1e-10)


def test_diverging_optimizer_warns_and_keeps_the_best_iterate():
    # A degree-25 polynomial layer on codes of size ~1e3 overflows at L-BFGS's first trial step.
    X, _ = _circles(30)
    X = X * 40.0
    model = KernelAutoencoder(
        (2,),
        kernel=["linear", "poly"],
        gamma=[None, 1000.0],
        degree=25,
        lam=0.0,
        last_layer="gradient",
        max_iter=50,
        random_state=0,
        preconditioner=None,
    )
    with pytest.warns(ConvergenceWarning, match="diverged"):
        model.fit(X)
    assert model.status_ == "diverged" and not model.converged_
    assert np.all(np.isfinite(model.transform(X)))
    assert np.isfinite(model.objective_) and model.objective_ <= model.objective_history_[0]
    # Preconditioned, the first step stays finite; the fit still cannot descend there, and says so.
    with pytest.warns(ConvergenceWarning):
        model.set_params(preconditioner="rkhs").fit(X)
    assert not model.converged_ and np.all(np.isfinite(model.transform(X)))


# --------------------------------------------------------------------------------------------------------------
# bad input
# --------------------------------------------------------------------------------------------------------------


def _invalid(name):
    """The start of scikit-learn's InvalidParameterError message for parameter `name`."""
    return rf"The '{name}' parameter of KernelAutoencoder must be"


@pytest.mark.parametrize(
    "params,message",
    [
        ({"hidden_layer_sizes": (0,)}, "hidden_layer_sizes: must be a non-empty sequence of positive ints"),
        ({"hidden_layer_sizes": (2, -1)}, "hidden_layer_sizes: must be a non-empty sequence of positive ints"),
        ({"hidden_layer_sizes": ()}, "hidden_layer_sizes: must be a non-empty sequence of positive ints"),
        ({"hidden_layer_sizes": 2}, _invalid("hidden_layer_sizes")),
        ({"lam": -1.0}, _invalid("lam")),
        ({"lam": [1e-3, -1.0]}, "lam: must be a non-negative finite number"),
        ({"lam": [1e-3, 1e-3, 1e-3]}, "lam: must be one value or 2 values"),
        ({"gradient": "backprop"}, _invalid("gradient")),
        ({"solver": "adam"}, _invalid("solver")),
        ({"step": "fixed"}, _invalid("step")),
        ({"update": "random"}, _invalid("update")),
        ({"init": "zeros"}, _invalid("init")),
        ({"max_iter": 0}, _invalid("max_iter")),
        ({"max_iter": None}, _invalid("max_iter")),
        ({"tol": -1.0}, _invalid("tol")),
        ({"n_iter_no_change": 0}, _invalid("n_iter_no_change")),
        ({"kernel": "laplacian"}, _invalid("kernel")),
        (
            {"kernel": ["rbf", "laplacian"]},
            rf"kernel: must be one of {', '.join(names_with('layer_derivatives'))}, got 'laplacian' \(layer 2\)",
        ),
        ({"kernel": ["rbf", "precomputed"]}, "kernel: only the first layer can be 'precomputed'"),
        ({"gamma": -1.0}, "gamma: must be a positive finite number"),
        ({"gamma": "0.5"}, _invalid("gamma")),
        ({"kernel": "poly", "degree": 2.5}, "degree: must be a non-negative integer for a poly layer"),
        ({"kernel": "poly", "degree": [2, -1]}, r"degree: must be a non-negative number, got -1 \(layer 2\)"),
        ({"degree": -1}, _invalid("degree")),
        ({"kernel": "poly", "coef0": [1.0, 2.0, 3.0]}, "coef0: must be one value or 2 values"),
        ({"operators": [np.array([[1.0, 2.0], [2.0, 1.0]]), None]}, "operators: entry 0 must be positive semidefinite"),
        ({"operators": [np.eye(2)]}, "operators: must be None or a list of 2 arrays"),
        ({"operators": [np.eye(3), None]}, r"operators: entry 0 must be a real \(2, 2\) array"),
        ({"operators": [np.array([[1.0, 0.5], [0.0, 1.0]]), None]}, "operators: entry 0 must be symmetric"),
        ({"operators": np.eye(2)}, _invalid("operators")),
        ({"code_layer": 2}, "code_layer: must be a hidden layer, 1..1"),
        ({"code_layer": 0}, _invalid("code_layer")),
        ({"last_layer": "fixed"}, _invalid("last_layer")),
        ({"n_threads": 0}, _invalid("n_threads")),
        ({"verbose": -1}, _invalid("verbose")),
        ({"random_state": "seed"}, _invalid("random_state")),
        ({"operators": [None, np.eye(2)]}, "operators: the last layer solved by ridge regression"),
        ({"lam": [1e-3, 0.0]}, "lam: a last layer solved by ridge regression needs lambda_L > 0"),
    ],
)
def test_bad_parameters_name_the_argument(params, message):
    X, _ = _circles(20)
    model = KernelAutoencoder(**{"hidden_layer_sizes": (2,), **params})
    with pytest.raises(ValueError, match=f"^{message}"):
        model.fit(X)


def test_parameters_are_validated_as_scikit_learn_does():
    model = KernelAutoencoder()
    assert model._validate_params() is None
    with pytest.raises(ValueError, match=_invalid("step")):
        model.set_params(step="newton")._validate_params()
    # loss_and_grad, which resolves the settings as fit does, checks them too.
    with pytest.raises(ValueError, match=_invalid("step")):
        model.loss_and_grad(_circles(10)[0], [np.zeros((10, 1))])


def test_per_layer_parameters_take_one_value_or_one_per_layer():
    X, _ = _circles(30)
    common = dict(max_iter=5, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        one = KernelAutoencoder((2,), kernel="poly", degree=2, coef0=0.5, lam=1e-2, **common).fit(X)
        each = KernelAutoencoder(
            (2,), kernel=["poly", "poly"], degree=[2, 2], coef0=(0.5, 0.5), lam=[1e-2, 1e-2], **common
        ).fit(X)
    np.testing.assert_array_equal(one.transform(X), each.transform(X))
    assert one.lam_ == each.lam_ == [1e-2, 1e-2] and one.hidden_layer_sizes_ == (2,)
    assert [spec[2:] for spec in each.kernels_] == [(2, 0.5), (2, 0.5)]


@pytest.mark.parametrize(
    "X,message",
    [
        (np.ones((1, 2)), "Found array with 1 sample"),
        (np.array([[0.0, np.nan], [1.0, 2.0]]), "Input X contains NaN"),
        (np.array([[0.0, np.inf], [1.0, 2.0]]), "Input X contains infinity"),
        (np.ones(5), "Expected 2D array"),
        (np.array([["a", "b"], ["c", "d"]]), "could not convert|dtype"),
    ],
)
def test_bad_data_names_the_argument(X, message):
    with pytest.raises(ValueError, match=message):
        KernelAutoencoder().fit(X)


@pytest.mark.parametrize(
    "K,message",
    [
        (np.ones((3, 4)), "must be square"),
        (np.array([[1.0, 0.5], [0.2, 1.0]]), "must be symmetric"),
        (np.array([[1.0, np.nan], [np.nan, 1.0]]), "Input X contains NaN"),
        (np.array([[1.0, 2.0], [2.0, 1.0]]), "positive semidefinite"),
        (np.ones((1, 1)), "Found array with 1 sample"),
    ],
)
def test_bad_gram_matrices_are_refused(K, message):
    with pytest.raises(ValueError, match=message):
        KernelAutoencoder(kernel="precomputed").fit(K)


def test_k2ae_refuses_what_it_cannot_do():
    K, _ = _gram(20)
    with pytest.raises(ValueError, match="^lam: a last layer solved by ridge regression needs lambda_L > 0"):
        KernelAutoencoder(kernel="precomputed", lam=0.0).fit(K)
    model = KernelAutoencoder(kernel="precomputed", max_iter=5, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(K)
    with pytest.raises(ValueError, match="^Z: a K²AE decodes into the input's RKHS"):
        model.inverse_transform(np.zeros((2, 1)))
    with pytest.raises(ValueError, match="^diag: must be a finite 1-D array of 20 values"):
        model.reconstruction_error(K, diag=np.ones(3))
    with pytest.raises(ValueError, match="^X has 19 features"):
        model.transform(K[:, :19])


def test_out_of_sample_input_is_checked():
    X, _ = _circles(20)
    model = KernelAutoencoder(max_iter=5, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(X)
    with pytest.raises(ValueError, match="^X has 3 features"):
        model.transform(np.ones((2, 3)))
    with pytest.raises(ValueError, match="Input X contains NaN"):
        model.transform(np.array([[np.nan, 1.0]]))
    with pytest.raises(ValueError, match="^Z: must be a finite 2-D array with 1 columns"):
        model.inverse_transform(np.ones((2, 2)))
    with pytest.raises(ValueError, match="^gradient:"):
        model.loss_and_grad(X, gradient="fd")


def test_barzilai_borwein_steps_use_the_previous_iterate():
    # On f = 2 x^2 the BB step is exactly 1/4 from the second step on, whatever the first: the caller's arrays
    # are updated in place, so the stepper must keep its own copies of the previous iterate and gradient.
    from rkm.autoencoders.kae import _Descent

    def fun(x):
        return 2.0 * float(x @ x), 4.0 * x

    stepper, theta = _Descent("bb"), np.array([1.0, -2.0])
    f, grad = fun(theta)
    for _ in range(2):
        part, f, grad, accepted = stepper.iterate(fun, theta[:], f, grad)
        assert accepted
        theta[:] = part
    assert stepper.t == pytest.approx(0.25, rel=1e-12)
    np.testing.assert_allclose(theta, 0.0, atol=1e-12)


def test_progress_lines_per_stage_and_per_iteration(capsys):
    X, _ = _circles(20)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        KernelAutoencoder(max_iter=3, random_state=0, verbose=1).fit(X)
        stages = capsys.readouterr().out.splitlines()
        KernelAutoencoder(max_iter=3, random_state=0, verbose=2).fit(X)
        lines = capsys.readouterr().out.splitlines()
    assert len(stages) == 2 and all(line.startswith("KernelAutoencoder [") for line in stages)
    assert "max_iter after 3 iterations" in stages[-1]
    assert all(line.startswith("KernelAutoencoder [") for line in lines)
    assert sum("L-BFGS iteration" in line for line in lines) == 3 and len(lines) == 5


# --------------------------------------------------------------------------------------------------------------
# convergence of the defaults (section 5.1's sets), plateaus, the iteration cap
# --------------------------------------------------------------------------------------------------------------


def _toy(name, n_samples, seed):
    """Section 5.1's 2-D sets as bench/_kae_data.py draws them (unstandardized)."""
    if name == "circles":
        return make_concentric_circles(n_samples, noise=0.05, random_state=seed).data
    if name == "moons":
        return make_moons(n_samples, noise=0.1, random_state=seed).data
    centers = np.array([[0.0, 0.0], [2.0, 0.0], [1.0, np.sqrt(3.0)]])
    return make_blobs(n_samples, centers=centers, cluster_std=0.3, random_state=seed)[0]


@pytest.mark.parametrize("name", ["circles", "clusters", "moons"])
@pytest.mark.parametrize("seed", [0, 1])
def test_default_fit_converges_on_the_toy_sets(name, seed):
    X = _toy(name, 150, seed)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        model = KernelAutoencoder(random_state=seed).fit(X)
    assert model.status_ == "converged" and model.converged_
    assert model.n_iter_ < model.max_iter and model.gradient_ratio_ <= _STATIONARY
    assert model.objective_ < 0.8 * model.objective_history_[0]


def test_default_stop_is_close_to_the_minimum():
    # From the default fit's coefficients, scipy's L-BFGS on the estimator's objective (loss_and_grad) for 300
    # more iterations gains little (relative to the data's variance, the scale of tol).
    from scipy.optimize import minimize

    X = _toy("circles", 150, 0)
    model = KernelAutoencoder(random_state=0).fit(X)
    shape = model.coefficients_[0].shape

    def fun(theta):
        loss, grads = model.loss_and_grad(X, [theta.reshape(shape)])
        return loss, grads[0].ravel()

    longer = minimize(fun, model.coefficients_[0].ravel(), jac=True, method="L-BFGS-B", options={"maxiter": 300})
    assert fun(model.coefficients_[0].ravel())[0] == pytest.approx(model.objective_, rel=1e-12)
    assert 0.0 <= model.objective_ - longer.fun < 1e-3 * X.var(axis=0).sum()


def test_plateau_is_not_reported_as_convergence():
    # Plain gradient descent on every layer (the last one learned, no preconditioner) crawls: the objective
    # barely moves, the gradient stays far from zero. The stop is a plateau: a warning, and status_ says so.
    X = _toy("circles", 60, 0)
    model = KernelAutoencoder(
        solver="gd", step="bb", last_layer="gradient", preconditioner=None, max_iter=500, random_state=0
    )
    with pytest.warns(ConvergenceWarning, match="a plateau, not a minimum"):
        model.fit(X)
    assert model.status_ == "plateau" and not model.converged_
    assert model.n_iter_ < 500 and model.gradient_ratio_ > _STATIONARY


def test_iteration_cap_warns_and_says_so():
    X = _toy("moons", 60, 0)
    with pytest.warns(ConvergenceWarning, match="max_iter = 3") as record:
        model = KernelAutoencoder(max_iter=3, random_state=0).fit(X)
    assert model.status_ == "max_iter" and not model.converged_ and model.n_iter_ == 3
    assert record[0].filename == __file__  # the warning points at the caller's line


def test_stopping_rule_reads_the_best_objective_so_far():
    from rkm.autoencoders.kae import _stalled

    # Non-monotone steps: increases are no progress, whatever their size.
    assert _stalled([1.0, 0.5, 2.0, 3.0, 2.5], threshold=1e-3, patience=3)
    # A steady decrease of 0.01 per iteration is progress above a threshold of 0.005, not above 0.02.
    curve = [1.0 - 0.01 * k for k in range(6)]
    assert not _stalled(curve, threshold=0.005, patience=3)
    assert _stalled(curve, threshold=0.02, patience=3)
    assert not _stalled(curve[:3], threshold=1.0, patience=3)  # too few iterations to judge


def test_tolerance_is_relative_to_the_data_scale():
    # Scaling X by c scales the distortion by c^2 and the stopping threshold with it: with lam = 0 for the
    # hidden layer (the only term that does not scale) both fits stop by the same rule near the same minimum.
    # Their paths part by rounding, and where they part depends on the CPU's BLAS kernels: the stop points were
    # 0.05% apart in objective on one machine, 0.35% on another (AVX-512 kernels). A threshold that did not
    # scale would stop the scaled fit far from the other (about 1e6 times looser or tighter).
    X = _toy("clusters", 80, 0)
    a = KernelAutoencoder(lam=[0.0, 1e-3], random_state=0).fit(X)
    b = KernelAutoencoder(lam=[0.0, 1e-3], random_state=0).fit(X * 1e3)
    assert a.converged_ and b.converged_ and abs(a.n_iter_ - b.n_iter_) <= 0.1 * a.n_iter_
    assert b.objective_ == pytest.approx(1e6 * a.objective_, rel=1e-2)


def test_tolerance_is_not_relative_to_the_objective():
    # A 2-2-2 KAE reconstructs 2-D data almost exactly: the objective falls to a small fraction of the data's
    # variance, where a decrease relative to the objective itself would never fall below tol.
    X = _toy("moons", 80, 0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        model = KernelAutoencoder((2,), lam=1e-4, random_state=0).fit(X)
    assert model.converged_ and model.objective_ < 0.05 * X.var(axis=0).sum()


def test_preconditioner_changes_the_path_not_the_objective():
    X = _toy("circles", 40, 0)
    model = KernelAutoencoder(random_state=0)
    plain = KernelAutoencoder(random_state=0, preconditioner=None, max_iter=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        plain.fit(X)
    coefficients = plain.coefficients_[:1]
    # loss_and_grad is in the coefficients Phi whatever the optimizer's coordinates.
    assert model.loss_and_grad(X, coefficients)[0] == pytest.approx(plain.objective_, rel=1e-12)


# --------------------------------------------------------------------------------------------------------------
# scikit-learn's contract: K²AE scores without diag, feature names, set_output, copies of the training data
# --------------------------------------------------------------------------------------------------------------


def _k2ae(**params):
    return KernelAutoencoder(
        (2,), kernel="precomputed", gamma=[None, 0.5], **{"lam": 1e-3, "random_state": 0, **params}
    )


def test_k2ae_score_defaults_to_the_training_diagonal():
    # An rbf input kernel has k(x, x) = 1: the default is exact.
    K, _ = _gram(60)
    model = _k2ae().fit(K[:40, :40])
    block = K[40:, :40]
    assert model.diag_mean_ == pytest.approx(1.0, rel=1e-14)
    assert model.score(block) == pytest.approx(model.score(block, diag=np.ones(20)), rel=1e-12)
    # A linear input kernel: the default is off by the same amount for every model fitted on the same Gram matrix.
    Z = np.random.default_rng(2).standard_normal((60, 3))
    G = Z @ Z.T
    diag = np.diag(G)
    fits = [_k2ae(lam=lam).fit(G[:40, :40]) for lam in (1e-3, 1e-1)]
    shifts = [m.score(G[40:, :40]) - m.score(G[40:, :40], diag=diag[40:]) for m in fits]
    assert shifts[0] == pytest.approx(diag[40:].mean() - diag[:40].mean(), rel=1e-9)
    assert shifts[1] == pytest.approx(shifts[0], rel=1e-9)


def test_k2ae_scores_in_a_pipeline_and_a_grid_search():
    K, _ = _gram(60)
    pipeline = make_pipeline(_k2ae())
    scores = cross_val_score(pipeline, K, cv=3)
    # The pairwise folds: K[train][:, train] to fit, K[test][:, train] to score, k(x, x) = 1 by default.
    folds = np.array_split(np.arange(60), 3)
    for score, test in zip(scores, folds):
        train = np.setdiff1d(np.arange(60), test)
        model = _k2ae().fit(K[np.ix_(train, train)])
        assert score == pytest.approx(model.score(K[np.ix_(test, train)], diag=np.ones(len(test))), rel=1e-10)
    search = GridSearchCV(_k2ae(), {"lam": [1e-3, 1e-1]}, cv=3).fit(K)
    assert np.all(np.isfinite(search.cv_results_["mean_test_score"]))


def test_feature_names_and_set_output():
    pd = pytest.importorskip("pandas")
    X = _toy("moons", 40, 0)
    model = KernelAutoencoder((3, 2), code_layer=1, max_iter=5, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(X)
    names = ["kernelautoencoder0", "kernelautoencoder1", "kernelautoencoder2"]
    assert list(model.get_feature_names_out()) == names
    frame = model.set_output(transform="pandas").transform(X)
    assert isinstance(frame, pd.DataFrame) and list(frame.columns) == names
    np.testing.assert_allclose(frame.to_numpy(), model.set_output(transform="default").transform(X))
    k2ae = _k2ae(max_iter=5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        k2ae.fit(_gram(20)[0])
    assert list(k2ae.get_feature_names_out()) == ["kernelautoencoder0", "kernelautoencoder1"]


def test_fit_copies_the_training_data():
    X = _toy("circles", 40, 0)
    X_new = _toy("circles", 10, 1)
    model = KernelAutoencoder(max_iter=5, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(X)
    assert model.representations_[0] is not X
    before = model.transform(X_new), model.reconstruct(X_new)
    X[:] = 0.0
    np.testing.assert_array_equal(model.transform(X_new), before[0])
    np.testing.assert_array_equal(model.reconstruct(X_new), before[1])
    K, _ = _gram(30)
    k2ae = _k2ae(max_iter=5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        k2ae.fit(K[:20, :20].copy())
        train = K[:20, :20].copy()
        k2ae.fit(train)
    block = K[20:, :20]
    before = k2ae.transform(block), k2ae.score(block)
    train[:] = 0.0
    assert np.array_equal(k2ae.transform(block), before[0]) and k2ae.score(block) == before[1]
