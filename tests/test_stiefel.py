"""Tests of rkm.stiefel (the front and the penalty method) and rkm.reference.stiefel (the engine's oracle)."""

import dataclasses

import numpy as np
import pytest

from rkm import deep, stiefel
from rkm._utils import exceptions
from rkm.reference import stiefel as reference

N, P = 60, 5
ENGINE_METHODS = ("pg", "pg_anderson", "cayley_bb", "cayley_adam")
# cayley_adam has no line search: its rate is set by lr (0.5 reaches tol 1e-6 in about 2000 steps here).
SETTINGS = {
    "pg": (1e-8, {}),
    "pg_anderson": (1e-8, {}),
    "cayley_bb": (1e-8, {}),
    "cayley_adam": (1e-6, {"lr": 0.5}),
}


def eigen_problem(seed):
    """min -1/2 Tr(H^T A H) on St(5, 60): A has eigenvalues -15, ..., 44 (gap 1, some negative).

    The minimum is -1/2 (sum of the 5 largest eigenvalues), reached on their eigenvectors; large-step projected
    gradient must not pick the eigenvalues of largest modulus instead.
    """
    rng = np.random.default_rng(seed)
    Q, _ = np.linalg.qr(rng.standard_normal((N, N)))
    eigenvalues = np.arange(N) - 15.0
    A = (Q * eigenvalues) @ Q.T
    A = (A + A.T) / 2

    def fun(H):
        AH = A @ H
        return -0.5 * float(np.sum(H * AH)), -AH

    top = Q[:, -P:]
    H0 = reference.polar_orthonormalize(rng.standard_normal((N, P)))
    return fun, H0, -0.5 * eigenvalues[-P:].sum(), top


def sin_subspace_angle(U, H):
    cosines = np.linalg.svd(U.T @ H, compute_uv=False)
    return np.sqrt(max(0.0, 1.0 - cosines.min() ** 2))


def check_optimum(x, fun_value, grad_norm, feasibility, f_star, top, tol, rtol):
    assert abs(fun_value - f_star) <= rtol * abs(f_star)
    assert grad_norm <= tol
    assert feasibility <= 1e-12
    assert np.linalg.norm(x.T @ x - np.eye(P)) <= 1e-12
    assert sin_subspace_angle(top, x) <= 100 * tol


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("method", ENGINE_METHODS)
def test_reference_engine_reaches_the_known_optimum(method, seed):
    fun, H0, f_star, top = eigen_problem(seed)
    tol, options = SETTINGS[method]
    out = reference.stiefel_minimize(fun, H0, method, tol, 20000, options)
    assert out["success"] and out["status"] == "converged"
    rtol = 1e-6 if method == "cayley_adam" else 1e-8
    check_optimum(out["x"], out["fun"], out["grad_norm"], out["feasibility"], f_star, top, tol, rtol)
    assert len(out["history_fun"]) == len(out["history_grad_norm"]) == out["nit"] + 1
    assert out["nfev"] >= out["nit"] + 1


@pytest.mark.parametrize("method", ENGINE_METHODS)
def test_minimize_reaches_the_known_optimum(method):
    fun, H0, f_star, top = eigen_problem(3)
    tol, options = SETTINGS[method]
    result = stiefel.minimize(fun, H0, method, tol, 20000, options=options)
    assert result.success and result.method == method
    rtol = 1e-6 if method == "cayley_adam" else 1e-8
    check_optimum(result.x, result.fun, result.grad_norm, result.feasibility, f_star, top, tol, rtol)
    assert result.x0_feasibility <= 1e-13 and result.n_outer == 0 and result.feasibility_unpolished is None


def test_penalty_reaches_the_known_optimum_after_polishing():
    fun, H0, f_star, top = eigen_problem(0)
    result = stiefel.minimize(fun, H0, "penalty", 1e-6, 5000)
    assert result.success and result.status == "converged" and result.n_outer >= 1
    check_optimum(result.x, result.fun, result.grad_norm, result.feasibility, f_star, top, 1e-6, 1e-6)
    assert 0 < result.feasibility_unpolished <= 1e-9
    assert np.isnan(result.step_measure) and result.nit >= result.n_outer
    assert len(result.history["fun"]) == result.n_outer + 1


def test_object_with_evaluate_is_accepted():
    fun, H0, f_star, _ = eigen_problem(0)

    class Objective:
        def evaluate(self, H):
            return (*fun(H), "extra items are ignored")

    out = reference.stiefel_minimize(Objective(), H0, "cayley_bb", 1e-8, 1000)
    assert out["success"] and abs(out["fun"] - f_star) <= 1e-8 * abs(f_star)
    assert stiefel.minimize(Objective(), H0, "cayley_bb", 1e-8).success


def test_polar_is_the_svd_polar_factor():
    rng = np.random.default_rng(0)
    Z = rng.standard_normal((40, 6))
    U, _, Vt = np.linalg.svd(Z, full_matrices=False)
    np.testing.assert_allclose(reference.polar_orthonormalize(Z), U @ Vt, rtol=0, atol=1e-13)
    np.testing.assert_allclose(stiefel.project(Z), U @ Vt, rtol=0, atol=1e-13)


def test_polar_of_an_ill_conditioned_matrix_uses_the_svd():
    rng = np.random.default_rng(1)
    U, _ = np.linalg.qr(rng.standard_normal((40, 6)))
    V, _ = np.linalg.qr(rng.standard_normal((6, 6)))
    Z = (U * np.logspace(0, -9, 6)) @ V.T  # Z^T Z has condition 1e18: the Gram form would fail
    Y = reference.polar_orthonormalize(Z)
    np.testing.assert_allclose(Y, U @ V.T, rtol=0, atol=1e-6)
    assert np.linalg.norm(Y.T @ Y - np.eye(6)) <= 1e-13


@pytest.mark.parametrize("polar", [reference.polar_orthonormalize, stiefel.project])
def test_polar_rejects_rank_deficient_input(polar):
    Z = np.ones((10, 3))
    with pytest.raises(ValueError, match="^Z: .*rank"):
        polar(Z)


def test_non_orthonormal_start_is_projected_and_reported():
    fun, H0, _, _ = eigen_problem(0)
    scaled = 3.0 * H0 + 0.1
    projected = stiefel.project(scaled)
    from_scaled = stiefel.minimize(fun, scaled, "pg", 1e-8, 50)
    from_projected = stiefel.minimize(fun, projected, "pg", 1e-8, 50)
    assert from_scaled.x0_feasibility == pytest.approx(np.linalg.norm(scaled.T @ scaled - np.eye(P)))
    assert from_projected.x0_feasibility <= 1e-13
    np.testing.assert_array_equal(from_scaled.x, from_projected.x)
    with pytest.raises(ValueError, match="^H0: "):
        reference.stiefel_minimize(fun, scaled, "pg", 1e-8, 50)


def test_rank_deficient_start_is_an_error():
    fun, H0, _, _ = eigen_problem(0)
    H0[:, 1] = H0[:, 0]
    with pytest.raises(ValueError, match="^H0: .*rank"):
        stiefel.minimize(fun, H0)


def nan_at_call(fun, bad_call):
    calls = {"n": 0}

    def wrapped(H):
        calls["n"] += 1
        f, G = fun(H)
        return (np.nan, G) if calls["n"] == bad_call else (f, G)

    return wrapped


def test_cayley_adam_divergence_raises_with_the_last_finite_iterate():
    fun, H0, _, _ = eigen_problem(0)
    with pytest.raises(stiefel.DivergenceError) as info:
        stiefel.minimize(nan_at_call(fun, 5), H0, "cayley_adam", 1e-8, 100, options={"lr": 0.5})
    error = info.value
    assert error.nit == 3 and np.isfinite(error.fun)
    assert np.all(np.isfinite(error.iterate)) and error.iterate.shape == (N, P)
    assert np.linalg.norm(error.iterate.T @ error.iterate - np.eye(P)) <= 1e-12
    assert fun(error.iterate)[0] == error.fun
    out = reference.stiefel_minimize(nan_at_call(fun, 5), H0, "cayley_adam", 1e-8, 100, {"lr": 0.5})
    assert out["status"] == "diverged" and not out["success"] and out["nit"] == 3


@pytest.mark.parametrize("method", ["pg", "pg_anderson", "cayley_bb"])
def test_line_searches_treat_a_non_finite_trial_as_a_failed_one(method):
    fun, H0, f_star, _ = eigen_problem(0)
    result = stiefel.minimize(nan_at_call(fun, 5), H0, method, 1e-8, 20000)
    assert result.success and abs(result.fun - f_star) <= 1e-8 * abs(f_star)


def test_divergence_error_is_the_deep_rkms_class():
    assert stiefel.DivergenceError is deep.DivergenceError is exceptions.DivergenceError


@pytest.mark.parametrize("method", ENGINE_METHODS + ("penalty",))
def test_bad_objectives_are_errors(method):
    fun, H0, _, _ = eigen_problem(0)
    with pytest.raises(ValueError, match="^fun: not finite at H0"):
        stiefel.minimize(nan_at_call(fun, 1), H0, method)
    with pytest.raises(ValueError, match="^fun: gradient has shape"):
        stiefel.minimize(lambda H: (fun(H)[0], fun(H)[1][:, :2]), H0, method)


def test_bad_arguments_name_themselves():
    fun, H0, _, _ = eigen_problem(0)
    cases = [
        ({"method": "newton"}, "method"),
        ({"tol": 0.0}, "tol"),
        ({"max_iter": -1}, "max_iter"),
        ({"options": {"learning_rate": 1}}, "options"),
        ({"options": {"criterion": "f"}}, "options"),
        ({"method": "penalty", "options": {"memory": 3}}, "options"),
        ({"H0": np.full((N, P), np.nan)}, "H0"),
        ({"H0": np.ones((3, 5))}, "H0"),
        ({"fun_and_grad": 3}, "fun_and_grad"),
    ]
    for kwargs, name in cases:
        arguments = {"fun_and_grad": fun, "H0": H0, **kwargs}
        with pytest.raises(ValueError, match=f"^{name}: "):
            stiefel.minimize(**arguments)


@pytest.mark.parametrize("method", ENGINE_METHODS)
def test_unattainable_tolerance_stops_without_success(method):
    fun, H0, _, _ = eigen_problem(0)
    options = SETTINGS[method][1]
    result = stiefel.minimize(fun, H0, method, 1e-30, 50, options=options)
    assert not result.success and result.status in ("max_iter", "stagnated", "line_search_failed")
    assert result.nit <= 50
    out = reference.stiefel_minimize(fun, H0, method, 1e-30, 3000, options)
    assert not out["success"] and out["status"] in ("stagnated", "line_search_failed", "max_iter")


def test_step_criterion_is_the_papers_test():
    fun, H0, f_star, _ = eigen_problem(0)
    result = stiefel.minimize(fun, H0, "pg", 1e-8, 20000, options={"criterion": "step", "max_step": 0.05})
    assert result.success and result.step_measure <= 1e-8
    assert abs(result.fun - f_star) <= 1e-8 * abs(f_star)


def test_max_step_bounds_the_step():
    fun, H0, _, _ = eigen_problem(0)
    bounded = reference.stiefel_minimize(fun, H0, "pg", 1e-8, 5, {"max_step": 1e-3})
    assert np.all(np.diff(bounded["history_fun"]) < 0)
    unbounded = reference.stiefel_minimize(fun, H0, "pg", 1e-8, 5)
    assert unbounded["fun"] < bounded["fun"]


def test_minimize_is_deterministic():
    fun, H0, _, _ = eigen_problem(0)
    for method in ENGINE_METHODS:
        first = stiefel.minimize(fun, H0, method, 1e-8, 200, options=SETTINGS[method][1])
        second = stiefel.minimize(fun, H0, method, 1e-8, 200, options=SETTINGS[method][1])
        np.testing.assert_array_equal(first.x, second.x)
        np.testing.assert_array_equal(first.history["fun"], second.history["fun"])
        assert (first.nit, first.nfev, first.fun) == (second.nit, second.nfev, second.fun)


def test_result_fields():
    fun, H0, _, _ = eigen_problem(0)
    result = stiefel.minimize(fun, H0, "cayley_bb", 1e-8, options={"history": False})
    names = [field.name for field in dataclasses.fields(stiefel.StiefelResult)]
    assert names == [
        "x",
        "fun",
        "grad_norm",
        "feasibility",
        "step_measure",
        "nit",
        "nfev",
        "time",
        "success",
        "status",
        "message",
        "method",
        "history",
        "x0_feasibility",
        "n_outer",
        "feasibility_unpolished",
    ]
    assert result.time > 0 and isinstance(result.message, str) and result.message
    assert result.history["fun"].size == 0 and result.history["grad_norm"].size == 0
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.nit = 0


def test_verbose_prints_progress(capsys):
    fun, H0, _, _ = eigen_problem(0)
    stiefel.minimize(fun, H0, "pg", 1e-8, 30, verbose=1)
    assert "objective" in capsys.readouterr().out


def test_random_point_and_helpers():
    H = stiefel.random_point(30, 4, random_state=0)
    np.testing.assert_array_equal(H, stiefel.random_point(30, 4, random_state=0))
    assert stiefel.feasibility(H) <= 1e-13
    G = np.random.default_rng(0).standard_normal((30, 4))
    R = stiefel.riemannian_gradient(H, G)
    HtR = H.T @ R
    np.testing.assert_allclose(HtR + HtR.T, 0, atol=1e-13)  # tangent at H
    np.testing.assert_allclose(R, reference.riemannian_gradient(H, G), rtol=0, atol=1e-15)
    with pytest.raises(ValueError, match="^p: "):
        stiefel.random_point(3, 4)
    with pytest.raises(ValueError, match="^G: "):
        stiefel.riemannian_gradient(H, G[:, :2])


# ---------------------------------------------------------------------- why a method stopped


def nan_from_call(fun, first_bad):
    """fun, but NaN (f) from its first_bad-th call on: every later trial point is non-finite."""
    calls = {"n": 0}

    def wrapped(H):
        calls["n"] += 1
        f, G = fun(H)
        return (np.nan, G) if calls["n"] >= first_bad else (f, G)

    return wrapped


@pytest.mark.parametrize("method", ["pg", "pg_anderson", "cayley_bb"])
def test_a_non_finite_objective_is_reported_as_such(method):
    """A line search whose trials are all NaN failed because f is not finite there, not for want of decrease."""
    fun, H0, _, _ = eigen_problem(0)
    result = stiefel.minimize(nan_from_call(fun, 4), H0, method, 1e-8, 100)
    assert not result.success and result.status == "non_finite"
    assert "not finite (f = nan)" in result.message and "sufficient decrease" not in result.message
    assert np.isfinite(result.fun) and result.feasibility <= 1e-12


def test_a_finite_failed_line_search_keeps_its_status():
    """Finite trials without decrease are still "line_search_failed" (every point but H0 is higher than H0)."""
    fun, H0, _, _ = eigen_problem(0)
    f0 = fun(H0)[0]

    def rising(H):
        f, G = fun(H)
        return (f if np.array_equal(H, H0) else f0 + 1.0), G

    result = stiefel.minimize(rising, H0, "pg", 1e-8, 100)
    assert result.status == "line_search_failed" and "sufficient decrease" in result.message


def test_penalty_reports_a_stalled_gradient_not_the_outer_cap():
    """Below what the inner L-BFGS-B resolves, grad_norm stalls with the iterate feasible: "stagnated", with the
    inner solver's reason, long before max_outer (30)."""
    fun, H0, _, _ = eigen_problem(0)
    result = stiefel.minimize(fun, H0, "penalty", 1e-13, 100000)
    assert result.status == "stagnated" and not result.success
    assert "stalled" in result.message and "L-BFGS-B" in result.message
    assert result.n_outer < 30 and result.feasibility_unpolished <= 1e-9


def test_penalty_outer_cap_names_the_failed_test():
    fun, H0, _, _ = eigen_problem(0)
    result = stiefel.minimize(fun, H0, "penalty", 1e-6, 100000, options={"max_outer": 1})
    assert result.status == "max_outer" and result.n_outer == 1
    assert "max_outer = 1" in result.message and "feasibility" in result.message and "> outer_tol" in result.message


def test_the_public_helpers_refuse_non_finite_and_overflowing_input():
    H = stiefel.random_point(6, 2, random_state=0)
    with pytest.raises(ValueError, match="G: must be finite"):
        stiefel.riemannian_gradient(H, np.full((6, 2), np.nan))
    with pytest.raises(ValueError, match="overflows"):
        stiefel.riemannian_gradient(H * 1e160, np.ones((6, 2)) * 1e160)
    with pytest.raises(ValueError, match="H: H\\^T H overflows"):
        stiefel.feasibility(H * 1e200)
