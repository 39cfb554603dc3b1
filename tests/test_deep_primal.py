"""rkm.deep._primal: the deep feedforward network M2 of Suykens 2017 (eqs. 5.5-5.6) against finite differences and
a per-sample forward pass written from the equations, and the L-BFGS driver with its divergence guard."""

import pickle

import numpy as np
import pytest
import scipy.optimize

from rkm._utils.exceptions import DivergenceError
from rkm._utils.optimize import minimize_objective
from rkm._utils.threads import blas_threads
from rkm.deep._primal import (
    DIVERGENCE_ADVICE,
    feedforward_forward,
    feedforward_objective,
    feedforward_size,
    initial_feedforward,
    unpack_feedforward,
)

ETAS = (0.7, 1.3, 0.9)
LAM3 = 0.3
C_STAB = 2.0
C0 = 0.1
# The blocks of theta in layout order (a Toeplitz theta holds t1, t2 where U1, U2 are).
BLOCK_NAMES = ("U1", "beta1", "W1", "U2", "beta2", "W2", "U3", "beta3", "W3", "b", "l1", "l2")


@pytest.fixture(autouse=True)
def _single_threaded_blas():
    """Every array here is tiny: two BLAS threads only add wake-up latency (L-BFGS-B's own small products took
    25x longer with two OpenBLAS threads than with one on a busy two-core machine)."""
    with blas_threads(1):
        yield


def _problem(p=1, toeplitz=False, n=7, seed=0):
    """Small random inputs, targets and a generic point: weights of order one and l1, l2 away from 1."""
    dims = (3, 4, 3, 2, 2, 3, p)
    rng = np.random.default_rng(seed)
    theta = rng.normal(0.0, 0.6, feedforward_size(dims, toeplitz))
    theta[-5:] = rng.uniform(0.5, 1.5, 5)
    return theta, rng.standard_normal((n, 3)), rng.standard_normal((n, p)), dims


def _split(theta, dims, toeplitz):
    """The blocks of theta by the documented layout, written out independently of the module."""
    d, nh1, nh2, nh3, s1, s2, p = dims
    shapes = []
    for level, (nh, n_in, n_out) in enumerate([(nh1, d, s1), (nh2, s1, s2), (nh3, s2, p)], start=1):
        shapes += [(nh + n_in - 1,) if toeplitz and level < 3 else (nh, n_in), (nh,), (nh, n_out)]
    shapes += [(p,), (s1,), (s2,)]
    blocks, start = [], 0
    for shape in shapes:
        size = int(np.prod(shape))
        blocks.append(theta[start : start + size].reshape(shape))
        start += size
    assert start == theta.size
    return blocks


def _toeplitz_by_loops(t, n_rows, n_cols):
    U = np.empty((n_rows, n_cols))
    for i in range(n_rows):
        for j in range(n_cols):
            U[i, j] = t[i - j + n_cols - 1]
    return U


def _dense_parameters(theta, dims, toeplitz):
    U1, beta1, W1, U2, beta2, W2, U3, beta3, W3, b, l1, l2 = _split(theta, dims, toeplitz)
    if toeplitz:
        U1 = _toeplitz_by_loops(U1, W1.shape[0], dims[0])
        U2 = _toeplitz_by_loops(U2, W2.shape[0], dims[4])
    return U1, beta1, W1, U2, beta2, W2, U3, beta3, W3, b, l1, l2


def _forward_per_sample(theta, X, dims, toeplitz):
    """Eq. 5.6 for one column vector x at a time."""
    U1, beta1, W1, U2, beta2, W2, U3, beta3, W3, b, l1, l2 = _dense_parameters(theta, dims, toeplitz)
    rows = []
    for x in X:
        e1 = W1.T @ np.tanh(U1 @ x + beta1)
        e2 = W2.T @ np.tanh(U2 @ (e1 / l1) + beta2)
        yhat = W3.T @ np.tanh(U3 @ (e2 / l2) + beta3) + b
        rows.append((yhat, e1, e2))
    return tuple(np.array(column) for column in zip(*rows))


def _central_differences(f, theta, step=1e-6):
    gradient = np.empty_like(theta)
    for k in range(theta.size):
        shift = np.zeros_like(theta)
        shift[k] = step
        gradient[k] = (f(theta + shift) - f(theta - shift)) / (2 * step)
    return gradient


# ------------------------------------------------------------------------------------------------------------
# Gradient


@pytest.mark.parametrize("activation", ["tanh", "logistic"])
@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("objective", ["full", "level3"])
@pytest.mark.parametrize("toeplitz", [False, True], ids=["dense", "toeplitz"])
def test_gradient_matches_central_differences(toeplitz, objective, p, activation):
    theta, X, Y, dims = _problem(p, toeplitz)

    def f(point):
        return feedforward_objective(
            point, X, Y, dims, ETAS, LAM3, C_STAB, C0, objective, toeplitz, activation=activation
        )[0]

    _, grad, _ = feedforward_objective(
        theta, X, Y, dims, ETAS, LAM3, C_STAB, C0, objective, toeplitz, activation=activation
    )
    expected = _central_differences(f, theta)
    # Central differences err by O(step^2 f''') + O(eps |f| / step): about 1e-8 relative to the gradient here.
    np.testing.assert_allclose(grad, expected, rtol=1e-6, atol=1e-7 * np.abs(expected).max())


def test_gradient_taylor_remainder_is_second_order():
    theta, X, Y, dims = _problem(p=2, toeplitz=True)
    direction = np.random.default_rng(1).standard_normal(theta.size)
    direction[-5:] = np.abs(direction[-5:])  # keep l1, l2 positive along the path

    def f(point):
        return feedforward_objective(point, X, Y, dims, ETAS, LAM3, C_STAB, C0, "full", True)

    f0, grad, _ = f(theta)
    steps = 1e-2 * 0.5 ** np.arange(5)
    remainders = [abs(f(theta + step * direction)[0] - f0 - step * grad @ direction) for step in steps]
    slopes = np.diff(np.log(remainders)) / np.diff(np.log(steps))
    np.testing.assert_allclose(slopes, 2.0, atol=0.1)


def test_toeplitz_gradient_is_dense_gradient_summed_along_diagonals():
    theta, X, Y, dims = _problem(p=2, toeplitz=True)
    params = unpack_feedforward(theta, dims, toeplitz=True)
    dense_theta = np.concatenate([np.ravel(params[name]) for name in BLOCK_NAMES])
    args = (X, Y, dims, ETAS, LAM3, C_STAB, C0, "full")
    f_toeplitz, g_toeplitz, _ = feedforward_objective(theta, *args, True)
    f_dense, g_dense, _ = feedforward_objective(dense_theta, *args, False)
    assert f_toeplitz == pytest.approx(f_dense, rel=1e-14)
    dense = dict(zip(BLOCK_NAMES, _split(g_dense, dims, False)))
    toeplitz = dict(zip(BLOCK_NAMES, _split(g_toeplitz, dims, True)))
    for name, n_cols in (("U1", dims[0]), ("U2", dims[4])):
        n_rows = dense[name].shape[0]
        sums = [
            sum(dense[name][i, j] for i in range(n_rows) for j in range(n_cols) if i - j + n_cols - 1 == k)
            for k in range(n_rows + n_cols - 1)
        ]
        np.testing.assert_allclose(toeplitz[name], sums, rtol=1e-12, atol=1e-14)
    for name in BLOCK_NAMES:
        if name not in ("U1", "U2"):
            np.testing.assert_allclose(toeplitz[name], dense[name], rtol=1e-12, atol=1e-14)


# ------------------------------------------------------------------------------------------------------------
# Layout, forward pass and terms


@pytest.mark.parametrize("dims", [(8, 3, 3, 3, 4, 2, 1), (6, 3, 3, 5, 4, 2, 1), (14, 10, 5, 3, 5, 2, 1)])
def test_size_is_the_papers_unknown_count(dims):
    d, nh1, nh2, nh3, s1, s2, _ = dims
    paper = nh1 * (s1 + d + 1) + nh2 * (s2 + s1 + 1) + nh3 * (1 + s2 + 1) + s1 + s2 + 1  # sec. 5.3, p = 1
    assert feedforward_size(dims) == paper
    # Toeplitz U1, U2: n1 n2 unknowns become n1 + n2 - 1 each; U3 stays dense.
    saved = nh1 * d - (nh1 + d - 1) + nh2 * s1 - (nh2 + s1 - 1)
    assert feedforward_size(dims, toeplitz=True) == paper - saved


def test_size_counts_every_output():
    d, nh1, nh2, nh3, s1, s2, p = dims = (3, 4, 3, 2, 2, 3, 5)
    assert feedforward_size(dims) == nh1 * (s1 + d + 1) + nh2 * (s2 + s1 + 1) + nh3 * (p + s2 + 1) + s1 + s2 + p


def test_toeplitz_blocks_have_constant_diagonals():
    theta, _, _, dims = _problem(p=2, toeplitz=True)
    params = unpack_feedforward(theta, dims, toeplitz=True)
    blocks = _split(theta, dims, toeplitz=True)
    for name, t in (("U1", blocks[0]), ("U2", blocks[3])):
        U = params[name]
        np.testing.assert_array_equal(U, _toeplitz_by_loops(t, *U.shape))
        for k in range(-U.shape[0] + 1, U.shape[1]):
            assert np.all(np.diagonal(U, k) == np.diagonal(U, k)[0])
    np.testing.assert_array_equal(params["U3"], blocks[6])


@pytest.mark.parametrize("toeplitz", [False, True], ids=["dense", "toeplitz"])
def test_forward_matches_per_sample_equations(toeplitz):
    theta, X, _, dims = _problem(p=2, toeplitz=toeplitz)
    for got, expected in zip(
        feedforward_forward(theta, X, dims, toeplitz), _forward_per_sample(theta, X, dims, toeplitz)
    ):
        np.testing.assert_allclose(got, expected, rtol=1e-13, atol=1e-14)


@pytest.mark.parametrize("objective", ["full", "level3"])
@pytest.mark.parametrize("toeplitz", [False, True], ids=["dense", "toeplitz"])
def test_terms_match_their_definitions(toeplitz, objective):
    theta, X, Y, dims = _problem(p=2, toeplitz=toeplitz)
    f, _, terms = feedforward_objective(theta, X, Y, dims, ETAS, LAM3, C_STAB, C0, objective, toeplitz)
    # The objective's Yhat is forward() on the training rows.
    Yhat, E1, E2 = feedforward_forward(theta, X, dims, toeplitz)
    *_, W1, _, _, W2, _, _, W3, _, l1, l2 = _split(theta, dims, toeplitz)
    J1 = -0.5 * np.sum(E1**2 / l1) + ETAS[0] / 2 * np.sum(W1**2)
    J2 = -0.5 * np.sum(E2**2 / l2) + ETAS[1] / 2 * np.sum(W2**2)
    J3 = np.sum((Y - Yhat) ** 2) / (2 * LAM3) + ETAS[2] / 2 * np.sum(W3**2)
    np.testing.assert_allclose(terms, [J1, J2, J3], rtol=1e-13)
    full = J1 + J2 + J3 + C_STAB / 2 * (J1**2 + J2**2) - C0 * (l1.sum() + l2.sum())
    assert f == pytest.approx(full if objective == "full" else J3, rel=1e-13)


def test_initial_point_follows_the_paper():
    dims = (5, 40, 30, 20, 10, 6, 2)
    theta = initial_feedforward(dims, False, 7)
    U1, beta1, W1, U2, beta2, W2, U3, beta3, W3, b, l1, l2 = _split(theta, dims, False)
    weights = np.concatenate([block.ravel() for block in (U1, W1, U2, W2, U3, W3)])
    assert weights.std() == pytest.approx(0.1, rel=0.05)
    assert abs(weights.mean()) < 0.01
    for zero in (beta1, beta2, beta3, b):
        np.testing.assert_array_equal(zero, 0.0)
    np.testing.assert_array_equal(np.concatenate([l1, l2]), 1.0)
    np.testing.assert_array_equal(theta, initial_feedforward(dims, False, np.random.default_rng(7)))
    legacy = initial_feedforward(dims, True, np.random.RandomState(7))
    assert legacy.size == feedforward_size(dims, True)
    np.testing.assert_array_equal(legacy[-16:], 1.0)


# ------------------------------------------------------------------------------------------------------------
# L-BFGS driver


def _regression(n=60, seed=3):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2.0, 2.0, (n, 2))
    y = np.sin(2 * X[:, 0]) + 0.5 * X[:, 1] ** 2
    return X, ((y - y.mean()) / y.std())[:, None]


@pytest.mark.parametrize("toeplitz", [False, True], ids=["dense", "toeplitz"])
def test_minimize_fits_a_regression(toeplitz):
    X, Y = _regression()
    dims = (2, 4, 4, 4, 3, 2, 1)
    n_eigen = dims[4] + dims[5]

    def fun(theta):
        return feedforward_objective(theta, X, Y, dims, (1.0, 1.0, 1.0), 1e-2, 10.0, 0.0, "full", toeplitz)

    theta0 = initial_feedforward(dims, toeplitz, 0)
    result = minimize_objective(fun, theta0, n_eigen=n_eigen, max_iter=150)
    mse = np.mean((Y - feedforward_forward(result.theta, X, dims, toeplitz)[0]) ** 2)
    assert mse < 0.25 * Y.var()  # the mean predictor's error is Y.var()
    assert result.fun == fun(result.theta)[0] < result.history[0] == fun(theta0)[0]
    history = result.history
    assert history.shape == (result.nit + 1,)
    # Each accepted L-BFGS step satisfies the sufficient-decrease condition.
    assert np.all(np.diff(history) <= 1e-12 * np.abs(history).max())
    assert result.fun <= history[-1]
    assert np.all(result.theta[-n_eigen:] >= 1e-8)
    assert result.nfev >= result.nit


def test_minimize_respects_the_eigenvalue_bounds():
    target = np.array([1.0, -2.0, 3.0, -4.0, 0.5])

    def fun(theta):
        return 0.5 * np.sum((theta - target) ** 2), theta - target

    result = minimize_objective(fun, np.ones(5), n_eigen=3)
    assert result.converged
    np.testing.assert_allclose(result.theta, [1.0, -2.0, 3.0, 1e-8, 0.5], atol=1e-7)
    assert result.theta[3] >= 1e-8


def test_minimize_stops_at_max_iter_unconverged():
    result = minimize_objective(
        lambda x: (scipy.optimize.rosen(x), scipy.optimize.rosen_der(x)), np.zeros(4), n_eigen=0, max_iter=2
    )
    assert not result.converged
    assert result.nit == 2
    assert result.history.shape == (3,)
    assert "ITERATIONS" in result.message


def test_minimize_prints_progress(capsys):
    minimize_objective(
        lambda x: (scipy.optimize.rosen(x), scipy.optimize.rosen_der(x)), np.zeros(3), n_eigen=0, max_iter=3, verbose=1
    )
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 5  # the start, three iterations, the reason for stopping
    assert "objective" in lines[0] and "stopped after 3 iterations" in lines[-1]


def test_diverging_objective_raises_with_the_last_finite_point():
    """f = -exp(sum theta) decreases ever faster along -grad: the first line search extrapolates until |f| passes
    1e100, before any iteration completes."""

    def fun(theta):
        value = np.exp(np.sum(theta))
        return -value, -value * np.ones_like(theta)

    with pytest.raises(DivergenceError, match="diverged after .* c_stab") as caught:
        minimize_objective(fun, np.zeros(3), n_eigen=0, advice=DIVERGENCE_ADVICE)
    error = caught.value
    assert np.all(np.isfinite(error.iterate)) and np.isfinite(error.fun)
    assert error.fun == pytest.approx(fun(error.iterate)[0])
    assert error.nit == 0
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.nit, copy.fun, str(copy)) == (error.nit, error.fun, str(error))


def test_runaway_parameters_raise():
    with pytest.raises(DivergenceError, match=r"max\|theta\|"):
        minimize_objective(lambda theta: (-np.sum(theta), -np.ones_like(theta)), np.zeros(2), n_eigen=0)


def test_unstabilised_kernel_pca_levels_diverge():
    """Without c_stab, J1 and J2 are unbounded below (l -> 0, ||W|| -> inf): the guard stops the fit."""
    X, Y = _regression()
    dims = (2, 4, 4, 4, 3, 2, 1)

    def fun(theta):
        return feedforward_objective(theta, X, Y, dims, (1.0, 1.0, 1.0), 1e-2, 0.0, 0.0, "full", False)

    with pytest.raises(DivergenceError, match="after [1-9][0-9]* L-BFGS iterations") as caught:
        minimize_objective(fun, initial_feedforward(dims, False, 0), n_eigen=5)
    error = caught.value
    assert error.nit >= 1
    assert np.all(np.isfinite(error.iterate))
    assert fun(error.iterate)[0] == error.fun


def test_non_finite_gradient_is_divergence():
    def fun(theta):
        gradient = theta - 3.0
        if theta[0] > 1.0:
            gradient[0] = np.nan
        return 0.5 * np.sum((theta - 3.0) ** 2), gradient

    with pytest.raises(DivergenceError, match="gradient is not finite"):
        minimize_objective(fun, np.zeros(2), n_eigen=0)


# ------------------------------------------------------------------------------------------------------------
# Bad input


def _objective_call(**changes):
    theta, X, Y, dims = _problem(p=2)
    args = dict(
        theta=theta, X=X, Y=Y, dims=dims, etas=ETAS, lam3=LAM3, c_stab=C_STAB, c0=C0, objective="full", toeplitz=False
    )
    args.update(changes)
    return lambda: feedforward_objective(**args)


_THETA, _X, _Y, _DIMS = _problem(p=2)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (_objective_call(theta=_THETA[:-1]), "theta: must be a 1-D array of"),
        (_objective_call(theta=_THETA, toeplitz=True), "theta: must be a 1-D array of"),
        (
            _objective_call(theta=np.where(np.arange(_THETA.size) == _THETA.size - 1, 0.0, _THETA)),
            "theta: the eigenvalue entries l1, l2 must be positive",
        ),
        (_objective_call(theta=np.where(np.arange(_THETA.size) == 0, np.nan, _THETA)), "theta: must be finite"),
        (_objective_call(dims=_DIMS[:-1]), "dims:"),
        (_objective_call(dims=(3, 4, 3, 0, 2, 3, 2)), "dims:"),
        (_objective_call(dims=(3, 4, 3, 2.0, 2, 3, 2)), "dims:"),
        (_objective_call(X=_X[:, :2]), "X: must be a 2-D array of shape"),
        (_objective_call(X=np.where(_X == _X[0, 0], np.inf, _X)), "X: must be finite"),
        (_objective_call(Y=_Y[:-1]), "Y: must have 7 rows"),
        (_objective_call(Y=_Y[:, 0]), "Y: must be a 2-D array"),
        (_objective_call(objective="level2"), "objective: must be one of"),
        (_objective_call(lam3=0.0), "lam3:"),
        (_objective_call(lam3=-1.0), "lam3:"),
        (_objective_call(etas=(1.0, 1.0)), "etas:"),
        (_objective_call(etas=(1.0, 0.0, 1.0)), "etas:"),
        (_objective_call(c_stab=-1.0), "c_stab:"),
        (_objective_call(c0=np.nan), "c0:"),
        (_objective_call(toeplitz="yes"), "toeplitz:"),
        (lambda: feedforward_forward(_THETA, _X, _DIMS, activation="relu"), "activation:"),
        (lambda: feedforward_forward(_THETA, _X.T, _DIMS), "X:"),
        (lambda: feedforward_size((1, 2, 3)), "dims:"),
        (lambda: initial_feedforward("3423", False, 0), "dims:"),
        (lambda: unpack_feedforward(_THETA[1:], _DIMS), "theta:"),
    ],
)
def test_bad_feedforward_input_names_the_argument(call, message):
    with pytest.raises(ValueError, match=message.replace("|", r"\|")):
        call()


def _quadratic(theta):
    return 0.5 * theta @ theta, theta


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(fun=None), "fun: must be callable"),
        (dict(theta0=np.zeros((2, 2))), "theta0: must be a non-empty 1-D array"),
        (dict(theta0=np.array([0.0, np.nan])), "theta0: must be finite"),
        (dict(n_eigen=4), "n_eigen: must be at most"),
        (dict(n_eigen=-1), "n_eigen:"),
        (dict(max_iter=0), "max_iter:"),
        (dict(tol=0.0), "tol:"),
        (dict(verbose=-1), "verbose:"),
        (dict(fun=lambda theta: (0.0, theta[:-1])), "fun: must return a gradient of shape"),
        (dict(fun=lambda theta: (np.nan, theta)), "theta0: the objective fails at the starting point"),
    ],
)
def test_bad_minimize_input_names_the_argument(kwargs, message):
    args = dict(fun=_quadratic, theta0=np.ones(3), n_eigen=1)
    args.update(kwargs)
    fun, theta0 = args.pop("fun"), args.pop("theta0")
    with pytest.raises(ValueError, match=message):
        minimize_objective(fun, theta0, **args)
