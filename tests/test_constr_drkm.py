"""rkm.ConstrainedDeepRKM (Constr-DRKM, Tonin, Patrinos & Suykens 2021): training, encoding, pre-images."""

import warnings

import numpy as np
import pytest
from conftest import assert_close
from sklearn.base import clone
from sklearn.decomposition import PCA
from sklearn.exceptions import ConvergenceWarning

from rkm import KernelPCA, _core, reference, stiefel
from rkm.deep import _constr_levels
from rkm.deep._constr_levels import bandwidth_objective, levelwise_init
from rkm.deep.constrained import ConstrainedDeepRKM, _preimage
from rkm.kernels import kernel_matrix, names_with


def _data(n=60, seed=0):
    """Two noisy arcs in the plane: kernel spectra with clear gaps."""
    rng = np.random.default_rng(seed)
    t = rng.uniform(0, np.pi, n)
    side = np.arange(n) % 2
    X = np.column_stack([np.cos(t) + side, np.sin(t) * (1 - 2 * side) + 0.5 * side])
    return X + 0.05 * rng.normal(size=X.shape)


def _sin_angle(A, B):
    """Sine of the largest principal angle between the column spans of orthonormal A and B."""
    return float(np.linalg.norm(A - B @ (B.T @ A), 2))


def _fit(model, X):
    """Fit, failing on a ConvergenceWarning (the solves here must meet their tolerance)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        return model.fit(X)


def _start_only(model, X):
    """The model at its starting point (no iteration), for tests of encoding on a known H."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return model.set_params(max_iter=0).fit(X)


# ---------------------------------------------------------------------- one level is kernel PCA


def test_one_level_is_kernel_pca():
    X = _data()
    model = _fit(
        ConstrainedDeepRKM(3, gamma=0.8, eta=2.0, center=True, stiefel_method="pg_anderson", tol=1e-10, random_state=0),
        X,
    )
    kpca = KernelPCA(3, gamma=0.8, eta=2.0).fit(X)
    assert _sin_angle(model.H_[0], kpca.H_) < 1e-8
    assert_close(model.H_[0], kpca.H_, 1e-8)  # the canonical rotation and signs are KernelPCA's
    assert_close(model.eigenvalues_[0], kpca.eigenvalues_, 1e-10)
    assert model.objective_ == pytest.approx(-kpca.eigenvalues_.sum() / 2, rel=1e-12)
    X_new = _data(20, seed=1)
    assert_close(model.transform(X_new), kpca.transform(X_new), 1e-8)
    assert_close(model.denoise(X_new), kpca.denoise(X_new), 1e-8)
    assert model.feasibility_ < 1e-12


def test_large_eta_decouples_level_one():
    """With eta_2 huge the second level's term vanishes: level 1 is kernel PCA of the inputs."""
    X = _data()
    model = _fit(
        ConstrainedDeepRKM(
            (2, 1), gamma=(0.8, None), eta=(1.0, 1e8), stiefel_method="pg_anderson", tol=1e-8, random_state=0
        ),
        X,
    )
    kpca = KernelPCA(2, gamma=0.8, center=False).fit(X)
    assert _sin_angle(model.H_[0], kpca.H_) < 1e-5


def test_linear_second_level_contributes_nothing():
    """Uncentred linear level 2: Tr(H_2^T H_1 H_1^T H_2) = ||H_1^T H_2||^2 = 0 on the constraint set."""
    X = _data()
    model = _fit(
        ConstrainedDeepRKM(
            (2, 1), kernel=("rbf", "linear"), gamma=0.8, stiefel_method="pg_anderson", tol=1e-10, random_state=0
        ),
        X,
    )
    assert abs(model.level_objectives_[1]) < 1e-12 * abs(model.objective_)
    kpca = KernelPCA(2, gamma=0.8, center=False).fit(X)
    assert _sin_angle(model.H_[0], kpca.H_) < 1e-6


def test_levelwise_start_is_feasible_and_seed_free():
    X = _data()
    models = [
        _start_only(ConstrainedDeepRKM((2, 2), gamma=(0.8, None), init="levelwise", random_state=seed), X)
        for seed in (0, 1)
    ]
    np.testing.assert_array_equal(np.hstack(models[0].H_), np.hstack(models[1].H_))
    assert models[0].feasibility_ < 1e-12
    kpca = KernelPCA(2, gamma=0.8, center=False).fit(X)
    assert _sin_angle(models[0].H_[0], kpca.H_) < 1e-10


# ---------------------------------------------------------------------- Stiefel methods


# (options, max_iter, relative agreement of the objective) per Stiefel method. Cayley Adam's constant learning rate
# leaves it oscillating near the optimum (grad_norm ~0.3 after 5000 iterations here), so it is held to the descent it
# makes.
METHOD_SETTINGS = {
    "pg": (None, 2000, 1e-9),
    "pg_anderson": (None, 2000, 1e-9),
    "cayley_bb": (None, 2000, 1e-9),
    "penalty": (None, 1000, 1e-6),
    "cayley_adam": ({"lr": 1e-2}, 5000, 5e-2),
}


@pytest.fixture(scope="module")
def stiefel_problem():
    X = _data(80, seed=2)
    H0 = stiefel.random_point(80, 5, random_state=3)
    model = ConstrainedDeepRKM((3, 2), gamma=(0.8, 5.0), center=True, init=H0, stiefel_method="pg_anderson", tol=1e-9)
    return X, H0, _fit(model, X).objective_


@pytest.mark.parametrize("method", list(METHOD_SETTINGS))
def test_every_stiefel_method_reaches_the_same_objective(method, stiefel_problem):
    X, H0, expected = stiefel_problem
    options, max_iter, rtol = METHOD_SETTINGS[method]
    model = ConstrainedDeepRKM(
        (3, 2),
        gamma=(0.8, 5.0),
        center=True,
        init=H0,
        stiefel_method=method,
        tol=1e-7,
        max_iter=max_iter,
        stiefel_options=options,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # judged by the objective reached, below
        model.fit(X)
    assert model.objective_ == pytest.approx(expected, rel=rtol)
    assert model.feasibility_ <= 1e-10
    assert model.stiefel_result_.method == method


def test_learned_bandwidths_lower_the_objective():
    X = _data()
    fixed = _fit(
        ConstrainedDeepRKM(
            (2, 1), gamma=(0.2, None), center=True, stiefel_method="pg_anderson", tol=1e-8, random_state=0
        ),
        X,
    )
    learned = _fit(clone(fixed).set_params(learn_gamma=True), X)
    assert learned.objective_ < fixed.objective_ - 1e-6 * abs(fixed.objective_)
    assert learned.gamma_ != fixed.gamma_
    assert learned.feasibility_ < 1e-12


# ---------------------------------------------------------------------- encoding


def test_transform_reproduces_the_training_features():
    """Out of sample (eqs. 4-5) on the training points: at the level-wise start H_1 spans an invariant subspace of
    K_1, so level 1 returns H_1 itself; every level's encoding projects onto its training features as I."""
    X = _data()
    model = _start_only(ConstrainedDeepRKM((2, 2), gamma=(0.8, None), init="levelwise"), X)
    T = model.transform(X)
    assert T.shape == (60, 4)
    assert_close(T[:, :2], model.H_[0], 1e-10)
    assert_close(model.H_[1].T @ T[:, 2:], np.eye(2), 1e-10)


def test_transform_of_a_trained_model():
    X = _data()
    model = _fit(
        ConstrainedDeepRKM((2, 1), gamma=(0.8, None), stiefel_method="pg_anderson", tol=1e-9, random_state=0), X
    )
    T = model.transform(X)
    assert_close(model.H_[0].T @ T[:, :2], np.eye(2), 1e-10)
    assert model.transform(X[:7]).shape == (7, 3)
    assert_close(model.transform(X[:7]), T[:7], 1e-12)  # row by row
    literal = model.set_params(lam=2.0).transform(X)  # the printed 1/(lam eta) of eq. 4
    assert_close(literal[:, :2], T[:, :2] * model.eigenvalues_[0] / 2.0, 1e-10)
    H = np.hstack(model.H_)
    assert_close(H.T @ H, np.eye(3), 1e-12)
    assert np.all(np.diff(model.eigenvalues_[0]) <= 0)


# ---------------------------------------------------------------------- pre-images


@pytest.fixture(scope="module")
def deep_model():
    X = _data()
    model = _fit(
        ConstrainedDeepRKM((2, 1), gamma=(4.0, None), stiefel_method="pg_anderson", tol=1e-9, random_state=0), X
    )
    return X, model


def test_denoise_single_component_does_not_depend_on_the_scaling(deep_model):
    """One column kept: beta is a multiple of that column, and the fixed point does not depend on the multiple."""
    X, model = deep_model
    for components in (((0,), ()), ((), (0,))):
        expansion = model.denoise(X, components=components)
        assert_close(model.denoise(X, components=components, path="kpca"), expansion, 1e-9)
        assert expansion.shape == X.shape and np.all(np.isfinite(expansion))


def test_denoise_paths(deep_model):
    X, model = deep_model
    for path in ("expansion", "kpca", "chained"):
        out = model.denoise(X, path=path)
        assert out.shape == X.shape and np.all(np.isfinite(out))
    # chained on level 1 alone is the expansion of level 1
    assert_close(
        model.denoise(X, components=((0, 1), ()), path="chained"), model.denoise(X, components=((0, 1), ())), 1e-12
    )
    with pytest.raises(ValueError, match="^components: preimage path 'chained'"):
        model.denoise(X, components=((0,), (0,)), path="chained")
    with pytest.raises(ValueError, match="^path:"):
        model.denoise(X, path="bogus")


def test_denoise_of_a_linear_level_one_is_pca():
    """Linear centred level 1 (L = 1): the expansion's pre-image is the PCA reconstruction, in closed form."""
    X = np.random.default_rng(4).normal(size=(40, 4)) @ np.diag([3.0, 2.0, 1.0, 0.5])
    model = _fit(
        ConstrainedDeepRKM(2, kernel="linear", center=True, stiefel_method="pg_anderson", tol=1e-10, random_state=0), X
    )
    pca = PCA(2).fit(X)
    assert_close(model.denoise(X), pca.inverse_transform(pca.transform(X)), 1e-8)
    assert_close(model.inverse_transform(model.transform(X)), pca.inverse_transform(pca.transform(X)), 1e-8)


@pytest.mark.parametrize("kernel", ["poly", "laplacian"])
def test_gradient_preimage_lowers_the_residual(kernel):
    """Kernels without a fixed point: L-BFGS on r(x) = k(x, x) - 2 beta^T k(X, x) from the start."""
    rng = np.random.default_rng(5)
    Y = rng.normal(size=(30, 3))
    spec = (kernel, 0.3, 2.0, 1.0)
    beta = rng.normal(size=(4, 30)) / 30
    start = rng.normal(size=(4, 3))

    def residual(Z):
        K = kernel_matrix(Z, Y, kernel, gamma=0.3, degree=2.0, coef0=1.0)
        own = np.diag(kernel_matrix(Z, Z, kernel, gamma=0.3, degree=2.0, coef0=1.0))
        return own - 2 * np.sum(beta * K, axis=1)

    found = _preimage(beta, Y, spec, start, 100, None)
    assert np.all(residual(found) <= residual(start) + 1e-12)
    assert residual(found).sum() < residual(start).sum() - 1e-3


def test_denoise_with_a_poly_level_one():
    X = _data()
    model = _fit(
        ConstrainedDeepRKM(
            (2, 1),
            kernel=("poly", "rbf"),
            degree=2,
            gamma=(0.5, None),
            center=True,
            stiefel_method="pg_anderson",
            tol=1e-8,
            random_state=0,
        ),
        X,
    )
    out = model.denoise(X[:10])
    assert out.shape == (10, 2) and np.all(np.isfinite(out))


# ---------------------------------------------------------------------- bad input


def _invalid(name):
    """scikit-learn's InvalidParameterError of a type or range check, which names the parameter."""
    return f"The '{name}' parameter of ConstrainedDeepRKM must be"


BAD_PARAMS = [
    ({"n_components": (1,) * 61}, "n_components: 61 levels need at least 61 samples"),
    ({"n_components": (2, 0)}, "n_components:"),
    ({"n_components": (2, 1.5)}, "n_components:"),
    ({"n_components": ()}, "n_components:"),
    ({"n_components": "two"}, _invalid("n_components")),
    ({"n_components": 0}, _invalid("n_components")),
    ({"gamma": (0.5, 1.0, 2.0)}, "gamma: must be one value or a tuple of 2"),
    ({"eta": 0.0}, _invalid("eta")),
    ({"eta": (1.0, -1.0)}, "eta:"),
    ({"kernel": ("rbf", "cosine")}, "kernel: level 2"),
    ({"kernel": "bogus"}, _invalid("kernel")),
    ({"learn_gamma": True, "kernel": ("rbf", "poly")}, "learn_gamma: .* level 2 is 'poly'"),
    ({"learn_gamma": True, "kernel": "linear"}, "learn_gamma:"),
    ({"stiefel_method": "newton"}, _invalid("stiefel_method")),
    ({"init": "zeros"}, _invalid("init")),
    ({"init": np.ones((60, 3))}, "init: the array has rank below 3"),
    ({"init": np.ones((59, 3))}, "init: an array must have shape"),
    ({"init": np.full((60, 3), np.nan)}, "init: the array contains NaN"),
    ({"preimage_path": "direct"}, _invalid("preimage_path")),
    ({"preimage_max_iter": 0}, _invalid("preimage_max_iter")),
    ({"tol": 0.0}, _invalid("tol")),
    ({"max_iter": -1}, _invalid("max_iter")),
    ({"lam": -1.0}, _invalid("lam")),
    ({"stiefel_options": [("lr", 1.0)]}, _invalid("stiefel_options")),
    ({"center": "yes"}, _invalid("center")),
    ({"n_threads": 0}, _invalid("n_threads")),
]


@pytest.mark.parametrize("params, message", BAD_PARAMS)
def test_bad_parameters(params, message):
    with pytest.raises(ValueError, match=f"^{message}"):
        ConstrainedDeepRKM(**{"n_components": (2, 1), **params}).fit(_data())


def test_progress_lines(capsys):
    X = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ConstrainedDeepRKM((2, 1), gamma=(0.8, None), max_iter=3, random_state=0, verbose=1).fit(X)
        stages = capsys.readouterr().out.splitlines()
        ConstrainedDeepRKM((2, 1), gamma=(0.8, None), stiefel_method="pg", max_iter=3, random_state=0, verbose=2).fit(X)
        iterations = capsys.readouterr().out.splitlines()
    assert len(stages) == 1 and stages[0].startswith("ConstrainedDeepRKM [") and "3 iterations" in stages[0]
    # verbose=2 adds the Stiefel method's lines: the start and one per iteration, and why it stopped.
    assert sum(line.startswith("pg iteration") for line in iterations) == 4
    assert iterations[-1].startswith("ConstrainedDeepRKM [") and "3 iterations" in iterations[-1]


def test_parameters_after_n_components_are_keyword_only():
    with pytest.raises(TypeError):
        ConstrainedDeepRKM((2, 1), "rbf")


def test_bad_data_and_components(deep_model):
    X, model = deep_model
    bad = X.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        ConstrainedDeepRKM((2, 1)).fit(bad)
    with pytest.raises(ValueError, match="^components: level 1 has components 0..1"):
        model.denoise(X, components=((2,), ()))
    with pytest.raises(ValueError, match="^components: must be None or one sequence"):
        model.denoise(X, components=((0,),))
    with pytest.raises(ValueError, match="^X: expected shape"):
        model.inverse_transform(np.zeros((3, 2)))


# ---------------------------------------------------------------------------------------- level numerics

LEVEL_SPECS = {
    "rbf": ("rbf", 0.7, 3.0, 1.0),
    "laplacian": ("laplacian", 0.4, 3.0, 1.0),
    "poly": ("poly", 0.5, 3.0, 1.0),
    "linear": ("linear", None, 3.0, 1.0),
}


def test_level_specs_cover_every_kernel_with_level_derivatives():
    assert set(LEVEL_SPECS) == set(names_with("level_derivatives"))


@pytest.mark.parametrize("solver_limit", [1000, 10])  # dense LAPACK, or ARPACK beyond the limit
@pytest.mark.parametrize("center", [False, True])
@pytest.mark.parametrize("kernel", list(LEVEL_SPECS))
def test_levelwise_init_matches_the_reference(kernel, center, solver_limit, monkeypatch):
    monkeypatch.setattr(_constr_levels, "DENSE_EIGH_MAX_SAMPLES", solver_limit)
    X = np.random.default_rng(5).normal(size=(60, 4))
    K1 = kernel_matrix(X, kernel="rbf", gamma=0.3)
    specs, sizes = [LEVEL_SPECS[kernel], LEVEL_SPECS["rbf"]], (3, 2, 2)
    H = levelwise_init(K1, specs, sizes, center)
    expected = reference.levelwise_init(
        K1, [(n, 1.0 if g is None else g, d, c) for n, g, d, c in specs], sizes, (1.0, 1.0, 1.0), center
    )
    assert np.linalg.norm(H.T @ H - np.eye(sum(sizes))) <= 1e-12
    # Same subspaces level by level (eigenvector signs and ties may differ). A linear level 2 has
    # Pi K_2 Pi = Pi C H_1 H_1^T C Pi, of rank below s_2 (0 uncentred): its eigenvectors are not unique.
    unique = 1 if kernel == "linear" else len(sizes)
    for block in np.split(np.arange(sum(sizes)), np.cumsum(sizes)[:-1])[:unique]:
        assert _sin_angle(H[:, block], expected[:, block]) <= 1e-8


@pytest.mark.parametrize("center", [False, True])
@pytest.mark.parametrize("level1", ["rbf", "laplacian", "poly"])
def test_bandwidth_objective_matches_the_core_and_central_differences(level1, center):
    rng = np.random.default_rng(7)
    X = rng.normal(size=(25, 3))
    specs = [(level1, 0.3, 2.0, 1.0)] + [LEVEL_SPECS[k] for k in ("rbf", "laplacian", "poly", "linear")]
    sizes, etas = (3, 2, 2, 2, 1), (1.0, 0.8, 1.2, 0.9, 1.1)
    H = np.linalg.qr(rng.normal(size=(25, sum(sizes))))[0]

    def f_at(log_shift):
        shifted = [(n, None if g is None else g * np.exp(t), d, c) for (n, g, d, c), t in zip(specs, log_shift)]
        return bandwidth_objective(H, X, shifted, sizes, etas, center)[0]

    f, gradient = bandwidth_objective(H, X, specs, sizes, etas, center)
    K1 = kernel_matrix(X, kernel=level1, gamma=0.3, degree=2.0, coef0=1.0)
    core_specs = [(n, 1.0 if g is None else g, d, c) for n, g, d, c in specs[1:]]
    assert f == pytest.approx(
        _core.ConstrainedDeepObjective(K1, core_specs, sizes, etas, center).evaluate(H)[0], rel=1e-12
    )
    # Learned bandwidths are those of rbf and laplacian only: poly and linear report 0.
    learned = np.array([level1 != "poly", True, True, False, False])
    assert np.all(gradient[~learned] == 0.0)
    h = 1e-5
    numeric = [(f_at(h * e) - f_at(-h * e)) / (2 * h) for e in np.eye(len(sizes))[learned]]
    np.testing.assert_allclose(gradient[learned], numeric, rtol=1e-7, atol=1e-9 * abs(f))


def test_penalty_with_adam_survives_an_iterate_that_loses_rank():
    # Few outer iterations with mu = 1, 8: on noisy sprites the inner Adam solves shrink level 1's columns to ~0
    # (singular values 1e-14 after the second outer iteration), so the iterate has no unique polar factor.
    from rkm.datasets import make_sprites

    images, _ = make_sprites(200, random_state=0, noise="background")
    options = {"inner": "adam", "lr": 1e-3, "mu0": 1.0, "tau0": 0.1, "growth": 8, "max_outer": 2}
    model = ConstrainedDeepRKM(
        (10, 5), stiefel_method="penalty", max_iter=10**6, stiefel_options=options, random_state=0
    )
    with pytest.warns(ConvergenceWarning):
        model.fit(images.reshape(200, -1))
    assert model.stiefel_result_.feasibility_unpolished > 1.0
    assert model.feasibility_ <= 1e-12 and np.isfinite(model.objective_)


# ---------------------------------------------------------------------- defaults (issue 23)


def _default_problems():
    from sklearn.datasets import make_blobs

    from rkm.datasets import make_square

    yield np.random.default_rng(0).normal(size=(80, 3)), {"n_components": (3, 2)}
    yield make_square(200, 0.1, random_state=0).data, {"n_components": (2, 1)}
    yield make_blobs(120, n_features=4, centers=3, random_state=0)[0], {}


def test_the_default_solver_converges_on_ordinary_problems():
    """The default Stiefel method ("bb_pg"), tol and max_iter meet the tolerance without a warning on small
    Gaussian data (the issue's reproduction), a 2-D shape and blobs with the default (10, 5)."""
    from rkm.exceptions import ConvergenceWarning as RKMConvergenceWarning

    for X, parameters in _default_problems():
        with warnings.catch_warnings():
            warnings.simplefilter("error", RKMConvergenceWarning)
            model = ConstrainedDeepRKM(**parameters, random_state=0).fit(X)
        assert model.stiefel_result_.success and model.grad_norm_ <= model.tol
        assert model.feasibility_ < 1e-12


def test_the_default_reaches_what_pg_reaches_on_a_nearly_concave_problem():
    """A small bandwidth makes eq. 7 nearly concave: Cayley-BB alone stalls near grad_norm 1.5e-7 there, the
    default switches to projected gradient and converges, to projected gradient's objective."""
    X = _data(150, seed=1)
    default = _fit(ConstrainedDeepRKM((3, 2), gamma=0.05, random_state=0), X)
    pg = _fit(ConstrainedDeepRKM((3, 2), gamma=0.05, stiefel_method="pg", random_state=0), X)
    assert default.stiefel_result_.success and ", pg " in default.stiefel_result_.message  # it switched
    assert abs(default.objective_ - pg.objective_) <= 1e-8 * abs(pg.objective_)


def test_cayley_adam_default_reaches_the_projected_gradient_objective():
    """One level is kernel PCA (a unique optimum): Cayley Adam at its default lr meets the tolerance there and
    reaches projected gradient's objective; the paper's lr is still available and barely moves in 50 steps."""
    X = np.random.default_rng(0).normal(size=(120, 4))
    pg = _fit(ConstrainedDeepRKM(4, stiefel_method="pg", random_state=0), X)
    adam = _fit(ConstrainedDeepRKM(4, stiefel_method="cayley_adam", random_state=0), X)
    assert abs(adam.objective_ - pg.objective_) <= 1e-10 * abs(pg.objective_)
    assert adam.n_iter_ < 2000
    paper = ConstrainedDeepRKM(4, stiefel_method="cayley_adam", stiefel_options={"lr": "paper"}, max_iter=50)
    with pytest.warns(ConvergenceWarning):
        paper.set_params(random_state=0).fit(X)
    start = _start_only(ConstrainedDeepRKM(4, random_state=0), X)
    assert abs(paper.objective_ - start.objective_) < 0.1 * abs(pg.objective_ - start.objective_)
    with pytest.raises(ValueError, match="'lr' must be a positive number or 'paper'"):
        ConstrainedDeepRKM(4, stiefel_method="cayley_adam", stiefel_options={"lr": "fast"}).fit(X)


def test_warnings_are_rkms_and_point_at_the_callers_line():
    from rkm.exceptions import ConvergenceWarning as RKMConvergenceWarning

    X = _data()
    with pytest.warns(RKMConvergenceWarning) as record:
        ConstrainedDeepRKM((2, 1), max_iter=2, random_state=0).fit(X)
    assert record[0].filename == __file__


def test_too_many_components_are_scaled_down_with_a_warning():
    """The default (10, 5) on 10 samples (scikit-learn's small-sample checks): (6, 3), with a warning."""
    X = np.random.default_rng(0).normal(size=(10, 3))
    with pytest.warns(UserWarning, match=r"using n_components=\(6, 3\)"):
        model = _fit(ConstrainedDeepRKM(random_state=0), X)
    assert model.n_components_ == (6, 3) and model.transform(X).shape == (10, 9)
    with pytest.raises(ValueError, match="n_components: 3 levels need at least 3 samples"):
        ConstrainedDeepRKM((1, 1, 1)).fit(X[:2])


def test_training_codes_and_the_out_of_sample_map():
    """For L = 1 transform(X_train) is the training codes; for L = 2 it is the out-of-sample map of eqs. 4-5, which
    differs from them (the levels are trained jointly); the codes are embedding_, and fit_transform is
    fit().transform as scikit-learn requires."""
    X = np.random.default_rng(0).normal(size=(80, 3))
    one = _fit(ConstrainedDeepRKM(3, random_state=0), X)
    assert_close(one.transform(X), one.embedding_, 1e-8)
    two = _fit(ConstrainedDeepRKM((3, 2), random_state=0), X)
    assert_close(two.embedding_, np.hstack(two.H_), 0.0)
    T = two.transform(X)
    assert np.linalg.norm(T - two.embedding_) > 0.1 * np.linalg.norm(two.embedding_)
    assert_close(clone(two).fit_transform(X), T, 1e-10)


def test_changing_x_after_fit_does_not_change_the_model():
    X = _data()
    model = _fit(ConstrainedDeepRKM((2, 1), random_state=0), X)
    before = model.transform(X[:5].copy())
    new = X[:5].copy()
    assert model.X_fit_ is not X and not np.shares_memory(model.X_fit_, X)
    X[:] = 0.0
    assert_close(model.transform(new), before, 0.0)
