"""The Stiefel engine of the compiled core (_core.stiefel_minimize, _core.polar_orthonormalize) against
rkm.reference.stiefel: the same iterates, results, options, errors and Ctrl-C."""

import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from conftest import assert_relatively_close, poisoned
from scipy.spatial.distance import cdist

from rkm import _core
from rkm.reference import stiefel as stiefel_reference

STIEFEL_METHODS = ["pg", "cayley_adam", "cayley_bb", "pg_anderson"]
STIEFEL_ENGINES = {"core": _core.stiefel_minimize, "reference": stiefel_reference.stiefel_minimize}
# Options that make each method move visibly within 10 iterations of the small problems below.
STIEFEL_OPTIONS = {"pg": {}, "cayley_adam": {"lr": 0.05}, "cayley_bb": {}, "pg_anderson": {"memory": 3}}


def _stiefel_start(n, p, seed):
    return np.linalg.qr(np.random.default_rng(seed).normal(size=(n, p)))[0]


def _stiefel_quadratic(n, seed=0):
    """f = -Tr(H^T A H) / 2 for a symmetric A with eigenvalues 1..10: minimized by its top eigenvectors."""
    Q = np.linalg.qr(np.random.default_rng(seed).normal(size=(n, n)))[0]
    A = (Q * np.linspace(1.0, 10.0, n)) @ Q.T
    A = (A + A.T) / 2

    def fun(H):
        AH = A @ H
        return -0.5 * float(np.sum(H * AH)), -AH

    return fun


def _stiefel_attraction(scale=3.0):
    """f = -sum_ij exp(-scale ||h_i - h_j||^2) over the rows h_i of H; G_i = 4 scale sum_j e_ij (h_i - h_j)."""

    def fun(H):
        squares = np.sum(H * H, axis=1)
        E = np.exp(-scale * np.maximum(squares[:, None] + squares[None, :] - 2.0 * H @ H.T, 0.0))
        return -float(E.sum()), 4.0 * scale * (E.sum(axis=1)[:, None] * H - E @ H)

    return fun


STIEFEL_PROBLEMS = {"quadratic": _stiefel_quadratic(12), "attraction": _stiefel_attraction()}


class _RecordingObjective:
    """fun with a copy of every point it is called at, to compare the trial points of both engines."""

    def __init__(self, fun):
        self.fun, self.points = fun, []

    def __call__(self, H):
        self.points.append(np.array(H))
        return self.fun(H)


def _run_both_engines(fun, H0, method, tol, max_iter, options=None):
    """{engine name: (result, points called)} for the same run of both engines."""
    runs = {}
    for name, engine in STIEFEL_ENGINES.items():
        recorder = _RecordingObjective(fun)
        runs[name] = engine(recorder, H0, method, tol, max_iter, options), recorder.points
    return runs


def _assert_same_runs(runs, fun):
    (core, core_points), (ref, ref_points) = runs["core"], runs["reference"]
    assert core.keys() == ref.keys()
    for key in ("nit", "nfev", "success", "status"):
        assert core[key] == ref[key], key
    assert len(core_points) == len(ref_points) == core["nfev"]
    for core_point, ref_point in zip(core_points, ref_points):
        assert_relatively_close(core_point, ref_point)
    for key in ("x", "fun", "history_fun"):
        assert_relatively_close(core[key], ref[key])
    # grad_norm = ||G - H sym(H^T G)|| cancels: its rounding error scales with ||G||, not with itself.
    gradient_scale = np.linalg.norm(fun(ref_points[0])[1])
    for key in ("grad_norm", "history_grad_norm"):
        assert_relatively_close(core[key], ref[key], scale=gradient_scale)
    if np.isnan(ref["step_measure"]):
        assert np.isnan(core["step_measure"])
    else:
        assert_relatively_close(core["step_measure"], ref["step_measure"], scale=gradient_scale)
    assert core["feasibility"] < 1e-13 and ref["feasibility"] < 1e-13
    assert isinstance(core["message"], str) and core["message"]


@pytest.mark.parametrize("problem", STIEFEL_PROBLEMS)
@pytest.mark.parametrize("method", STIEFEL_METHODS)
def test_stiefel_engine_iterates_match_the_reference(method, problem):
    runs = _run_both_engines(
        STIEFEL_PROBLEMS[problem], _stiefel_start(12, 3, seed=1), method, 1e-12, 10, STIEFEL_OPTIONS[method]
    )
    _assert_same_runs(runs, STIEFEL_PROBLEMS[problem])
    core, _ = runs["core"]
    assert core["nit"] == 10 and core["status"] == "max_iter"
    assert core["fun"] < core["history_fun"][0]


@pytest.mark.parametrize("method", STIEFEL_METHODS)
@pytest.mark.parametrize("options", [{"criterion": "step", "max_step": 0.5}, {"history": False, "max_backtracks": 3}])
def test_stiefel_engine_options_match_the_reference(method, options):
    runs = _run_both_engines(
        STIEFEL_PROBLEMS["attraction"],
        _stiefel_start(12, 3, seed=2),
        method,
        1e-3,
        10,
        STIEFEL_OPTIONS[method] | options,
    )
    _assert_same_runs(runs, STIEFEL_PROBLEMS["attraction"])
    if not options.get("history", True):
        assert runs["core"][0]["history_fun"].shape == (0,)


@pytest.mark.parametrize("method", STIEFEL_METHODS)
def test_stiefel_engine_converges_like_the_reference(method):
    fun = _stiefel_quadratic(12)
    options = STIEFEL_OPTIONS[method] | ({"lr": 0.5} if method == "cayley_adam" else {})
    runs = _run_both_engines(fun, _stiefel_start(12, 3, seed=3), method, 1e-2, 200, options)
    _assert_same_runs(runs, fun)
    core, _ = runs["core"]
    assert core["status"] == "converged" and core["success"] and core["grad_norm"] <= 1e-2


def _failing_after(fun, n_good_calls, value=np.nan):
    """fun whose calls after the first n_good_calls return f = value."""
    calls = []

    def wrapped(H):
        calls.append(None)
        f, G = fun(H)
        return (f if len(calls) <= n_good_calls else value), G

    return wrapped


@pytest.mark.parametrize("method", STIEFEL_METHODS)
def test_stiefel_engine_non_finite_values_match_the_reference(method):
    # cayley_adam stops as "diverged" with the last finite iterate; the line searches take the value as a failed
    # trial and shrink the step until max_backtracks ends them.
    H0 = _stiefel_start(12, 3, seed=4)
    runs = {
        name: engine(
            _failing_after(STIEFEL_PROBLEMS["quadratic"], 4),
            H0,
            method,
            1e-12,
            10,
            STIEFEL_OPTIONS[method] | {"max_backtracks": 4},
        )
        for name, engine in STIEFEL_ENGINES.items()
    }
    core, ref = runs["core"], runs["reference"]
    expected = "diverged" if method == "cayley_adam" else "line_search_failed"
    assert core["status"] == ref["status"] == expected
    for key in ("nit", "nfev"):
        assert core[key] == ref[key]
    assert_relatively_close(core["x"], ref["x"])
    assert np.isfinite(core["fun"])


@pytest.mark.parametrize("method", ["pg", "cayley_bb", "pg_anderson"])
def test_stiefel_engine_ascent_gradient_fails_the_line_search(method):
    def wrong_sign(H):
        f, G = STIEFEL_PROBLEMS["quadratic"](H)
        return f, -G

    runs = _run_both_engines(wrong_sign, _stiefel_start(12, 3, seed=5), method, 1e-12, 10, {"max_backtracks": 5})
    _assert_same_runs(runs, wrong_sign)
    assert runs["core"][0]["status"] == "line_search_failed" and runs["core"][0]["nit"] == 0


def test_stiefel_engine_stagnates_below_attainable_tolerance():
    result = _core.stiefel_minimize(_stiefel_quadratic(12), _stiefel_start(12, 3, seed=6), "pg", 1e-300, 2000)
    assert result["status"] == "stagnated" and not result["success"] and result["nit"] < 2000
    # The best iterate is the one of lowest f (the earliest on ties), at rounding level of the minimum.
    assert result["fun"] == result["history_fun"].min()
    assert result["grad_norm"] < 1e-9


def test_stiefel_engine_accepts_an_evaluate_method():
    class Objective:
        def evaluate(self, H):
            return (*STIEFEL_PROBLEMS["attraction"](H), "ignored")

    H0 = _stiefel_start(12, 3, seed=7)
    by_method = _core.stiefel_minimize(Objective(), H0, "pg", 1e-12, 5)
    by_callable = _core.stiefel_minimize(STIEFEL_PROBLEMS["attraction"], H0, "pg", 1e-12, 5)
    np.testing.assert_array_equal(by_method["x"], by_callable["x"])


def test_stiefel_engine_runs_a_core_objective_without_python():
    X = np.random.default_rng(8).normal(size=(20, 3))
    objective = _core.ConstrainedDeepObjective(
        np.exp(-0.5 * cdist(X, X, "sqeuclidean")), [("rbf", 2.0, 3.0, 1.0)], [2, 1], [1.0, 1.0], False
    )
    assert isinstance(objective, _core.StiefelObjective)
    H0 = _stiefel_start(20, 3, seed=8)
    for method in STIEFEL_METHODS:
        direct = _core.stiefel_minimize(objective, H0, method, 1e-12, 10, STIEFEL_OPTIONS[method])
        through_python = _core.stiefel_minimize(
            lambda H: objective.evaluate(H)[:2], H0, method, 1e-12, 10, STIEFEL_OPTIONS[method]
        )
        np.testing.assert_array_equal(direct["x"], through_python["x"])
        assert direct["nfev"] == through_python["nfev"]


def test_ctrl_c_interrupts_the_stiefel_engine_on_a_core_objective():
    # The run never ends by itself (tiny steps, unattainable tol); the engine checks for Ctrl-C every iteration.
    script = (
        "import signal; signal.signal(signal.SIGINT, signal.default_int_handler)\n"
        "import numpy as np; from rkm import _core\n"
        "X = np.random.default_rng(0).normal(size=(600, 3)); sq = (X * X).sum(1)\n"
        "K1 = np.exp(-0.5 * np.maximum(sq[:, None] + sq[None, :] - 2 * X @ X.T, 0))\n"
        "objective = _core.ConstrainedDeepObjective(K1, [('rbf', 2.0, 3.0, 1.0)], [2, 1], [1.0, 1.0], False)\n"
        "H0 = np.linalg.qr(np.random.default_rng(1).normal(size=(600, 3)))[0]\n"
        "print('ready', flush=True)\n"
        "try:\n"
        "    _core.stiefel_minimize(objective, H0, 'cayley_adam', 1e-300, 10**9, {'lr': 1e-9})\n"
        "    print('completed', flush=True)\n"
        "except KeyboardInterrupt:\n"
        "    print('interrupted', flush=True)\n"
    )
    process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        # An editable install may print its rebuild log first.
        assert any(line.strip() == "ready" for line in process.stdout)
        time.sleep(1.0)
        process.send_signal(signal.SIGINT)
        output, _ = process.communicate(timeout=60)
    finally:
        process.kill()
    assert "interrupted" in output


STIEFEL_BAD_OPTIONS = [
    ("criterion", "gradient"),
    ("max_step", 0.0),
    ("max_step", np.nan),
    ("max_step", "big"),
    ("sigma", 1.0),
    ("rho", 0.0),
    ("delta", 1.5),
    ("beta1", 1.0),
    ("beta2", -0.1),
    ("nonmonotone", True),
    ("lr", -1e-3),
    ("eps", np.inf),
    ("q", 0),
    ("max_backtracks", -1),
    ("cayley_iters", 2.0),
    ("memory", 0),
    ("history", 1),
]


@pytest.mark.parametrize("engine", STIEFEL_ENGINES)
@pytest.mark.parametrize("key, value", STIEFEL_BAD_OPTIONS)
def test_stiefel_engine_rejects_bad_options(engine, key, value):
    with pytest.raises(ValueError, match=f"^options: '{key}' must be "):
        STIEFEL_ENGINES[engine](STIEFEL_PROBLEMS["quadratic"], _stiefel_start(12, 3, 0), "pg", 1e-6, 5, {key: value})


@pytest.mark.parametrize("engine", STIEFEL_ENGINES)
def test_stiefel_engine_rejects_unknown_options(engine):
    with pytest.raises(ValueError, match="^options: unknown key 'learning_rate'"):
        STIEFEL_ENGINES[engine](
            STIEFEL_PROBLEMS["quadratic"], _stiefel_start(12, 3, 0), "pg", 1e-6, 5, {"lr": 0.1, "learning_rate": 0.1}
        )


def _rank_deficient_start():
    H = _stiefel_start(12, 3, 0)
    H[:, 2] = H[:, 1]
    return H


STIEFEL_BAD_ARGUMENTS = [
    ("H0", lambda H: 2.0 * H),
    ("H0", lambda H: _rank_deficient_start()),
    ("H0", lambda H: poisoned(H, np.nan)),
    ("H0", lambda H: H.T),
    ("H0", lambda H: H[:, :0]),
    ("H0", lambda H: H[:, 0]),
    ("method", "newton"),
    ("method", None),
    ("tol", 0.0),
    ("tol", np.inf),
    ("tol", np.nan),
    ("tol", True),
    ("max_iter", -1),
    ("max_iter", 1.5),
    ("max_iter", True),
]


@pytest.mark.parametrize("engine", STIEFEL_ENGINES)
@pytest.mark.parametrize("name, bad", STIEFEL_BAD_ARGUMENTS)
def test_stiefel_engine_bad_arguments_name_the_argument(engine, name, bad):
    arguments = dict(fun=STIEFEL_PROBLEMS["quadratic"], H0=_stiefel_start(12, 3, 0), method="pg", tol=1e-6, max_iter=5)
    arguments[name] = bad(arguments[name]) if callable(bad) else bad
    with pytest.raises(ValueError, match=f"^{name}: "):
        STIEFEL_ENGINES[engine](**arguments)


@pytest.mark.parametrize("engine", STIEFEL_ENGINES)
def test_stiefel_engine_checks_the_objective(engine):
    H0 = _stiefel_start(12, 3, 0)
    with pytest.raises(ValueError, match="^fun: not finite at H0"):
        STIEFEL_ENGINES[engine](lambda H: (np.inf, H), H0, "pg", 1e-6, 5)
    with pytest.raises(ValueError, match="^fun: not finite at H0"):
        STIEFEL_ENGINES[engine](lambda H: (1.0, poisoned(H, np.nan)), H0, "pg", 1e-6, 5)
    with pytest.raises(ValueError, match=r"^fun: gradient has shape \(3, 12\), expected \(12, 3\)"):
        STIEFEL_ENGINES[engine](lambda H: (1.0, H.T), H0, "pg", 1e-6, 5)
    with pytest.raises(ValueError, match="^fun: "):
        STIEFEL_ENGINES[engine](3.0, H0, "pg", 1e-6, 5)


class _StiefelTestError(Exception):
    pass


@pytest.mark.parametrize("method", STIEFEL_METHODS)
@pytest.mark.parametrize("error", [ValueError("raised by fun"), KeyboardInterrupt(), _StiefelTestError("own")])
def test_stiefel_engine_passes_on_exceptions_of_fun(method, error):
    calls = []

    def fun(H):
        calls.append(None)
        if len(calls) == 3:  # inside the run, after the start and two iterations' calls
            raise error
        return STIEFEL_PROBLEMS["quadratic"](H)

    with pytest.raises(type(error)) as raised:
        _core.stiefel_minimize(fun, _stiefel_start(12, 3, 0), method, 1e-12, 10, STIEFEL_OPTIONS[method])
    assert raised.value is error
    assert len(calls) == 3


@pytest.mark.parametrize("smallest", [1.0, 1e-4, 1e-7])
def test_polar_orthonormalize_matches_the_reference_and_the_svd(smallest):
    # 1e-7: the Gram form's eigenvalue ratio 1e-14 hands over to the SVD. The polar factor's condition number is
    # 1 / smallest singular value: the tolerance grows with it.
    U = _stiefel_start(12, 3, 9)
    V = np.linalg.qr(np.random.default_rng(10).normal(size=(3, 3)))[0]
    Z = (U * [2.0, 1.5, smallest]) @ V.T
    core = _core.polar_orthonormalize(Z)
    rtol = 100 * np.finfo(float).eps / smallest
    assert_relatively_close(core, stiefel_reference.polar_orthonormalize(Z), rtol=rtol)
    assert_relatively_close(core, U @ V.T, rtol=rtol)
    assert np.linalg.norm(core.T @ core - np.eye(3)) < 1e-14


@pytest.mark.parametrize(
    "bad",
    [
        lambda Z: np.hstack([Z[:, :2], Z[:, :1]]),
        lambda Z: poisoned(Z, np.inf),
        lambda Z: Z.T,
        lambda Z: Z[:, 0],
        lambda Z: np.zeros((4, 0)),
    ],
)
@pytest.mark.parametrize("function", [_core.polar_orthonormalize, stiefel_reference.polar_orthonormalize])
def test_polar_orthonormalize_rejects_bad_input(function, bad):
    with pytest.raises(ValueError, match="^Z: "):
        function(bad(np.random.default_rng(11).normal(size=(12, 3))))
