"""The deep RKM reduced-set objective of the compiled core (M1, eqs. 5.2-5.4) against rkm.reference."""

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from conftest import assert_close

from rkm import _core, reference
from rkm.kernels import kernel_matrix

KERNELS = {"rbf": ("rbf", 0.4, 3.0, 1.0), "linear": ("linear", None, 3.0, 1.0), "poly": ("poly", 0.3, 3.0, 1.0)}


def _reduced_set_problem(p=1, M=6, s1=2, s2=2, n=40, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    K1 = kernel_matrix(X, X[:M], kernel="rbf", gamma=0.5)
    G1 = kernel_matrix(X[:M], kernel="rbf", gamma=0.5)
    Y = rng.normal(size=(n, p))
    theta = rng.normal(scale=0.5, size=M * (s1 + s2 + p) + p + s1 + s2)
    theta[-(s1 + s2) :] = rng.uniform(0.5, 2.0, s1 + s2)
    return theta, K1, G1, Y, (M, s1, s2, p)


@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("objective", ["full", "level3"])
@pytest.mark.parametrize("regularizer", ["H", "W"])
@pytest.mark.parametrize("kernel2, kernel3", [("rbf", "rbf"), ("linear", "poly"), ("poly", "rbf")])
def test_reduced_set_objective_matches_reference(p, objective, regularizer, kernel2, kernel3):
    theta, K1, G1, Y, dims = _reduced_set_problem(p=p)
    args = (
        theta,
        K1,
        G1,
        Y,
        dims,
        KERNELS[kernel2],
        KERNELS[kernel3],
        (1.2, 0.7, 1.5),
        0.05,
        3.0,
        0.2,
        regularizer,
        objective,
    )
    f, grad, terms = _core.deep_reduced_set_objective(*args)
    f_ref, grad_ref, terms_ref = reference.deep_reduced_set_objective(*args)
    assert_close(f, f_ref, 1e-11)
    assert_close(grad, grad_ref, 1e-10)
    assert_close(terms, terms_ref, 1e-11)


def test_reduced_set_forward_matches_reference_and_objective():
    theta, K1, G1, Y, dims = _reduced_set_problem(p=2)
    kernels = (KERNELS["rbf"], KERNELS["rbf"])
    Yhat, E1, E2 = _core.deep_reduced_set_forward(theta, K1, dims, *kernels, (1.0, 1.0, 1.0))
    for mine, theirs in zip(
        (Yhat, E1, E2), reference.deep_reduced_set_forward(theta, K1, dims, *kernels, (1.0, 1.0, 1.0))
    ):
        assert_close(mine, theirs, 1e-12)
    # J3 of the objective is the squared residual of this forward pass (regularizer "H": + (eta3/2)||A3||^2).
    M, s1, s2, p = dims
    A3 = theta[M * (s1 + s2) : M * (s1 + s2 + p)]
    _, _, terms = _core.deep_reduced_set_objective(
        theta, K1, G1, Y, dims, *kernels, (1.0, 1.0, 1.0), 0.1, 0.0, 0.0, "H", "full"
    )
    assert_close(terms[2], np.sum((Y - Yhat) ** 2) / 0.2 + 0.5 * np.sum(A3**2), 1e-12)


def test_reduced_set_gradient_by_finite_differences():
    theta, K1, G1, Y, dims = _reduced_set_problem(p=2, seed=3)
    args = (K1, G1, Y, dims, KERNELS["rbf"], KERNELS["poly"], (1.0, 0.8, 1.2), 0.1, 2.0, 0.3, "W", "full")
    objective = _core.DeepReducedSetObjective(*args)
    _, grad, _ = objective(theta)
    step = 1e-6
    numeric = np.array(
        [(objective(theta + step * e)[0] - objective(theta - step * e)[0]) / (2 * step) for e in np.eye(theta.size)]
    )
    assert_close(grad, numeric, 1e-7)


def test_reduced_set_objective_is_thread_invariant():
    theta, K1, G1, Y, dims = _reduced_set_problem(n=500)
    args = (theta, K1, G1, Y, dims, KERNELS["rbf"], KERNELS["rbf"], (1.0, 1.0, 1.0), 0.1, 1.0, 0.0, "H", "full")
    one = _core.deep_reduced_set_objective(*args, n_threads=1)
    two = _core.deep_reduced_set_objective(*args, n_threads=2)
    assert_close(one[0], two[0], 1e-13)
    assert_close(one[1], two[1], 1e-12)


def test_reduced_set_objective_shared_by_eight_threads_gives_the_serial_values():
    # The objective's work buffers are taken in turn: eight Python threads evaluating one object at different
    # points each get exactly what a serial call gives.
    theta, K1, G1, Y, dims = _reduced_set_problem(n=400)
    args = (K1, G1, Y, dims, KERNELS["rbf"], KERNELS["poly"], (1.0, 0.8, 1.2), 0.1, 2.0, 0.3, "W", "full")
    objective = _core.DeepReducedSetObjective(*args)
    rng = np.random.default_rng(1)
    points = [theta + np.concatenate([rng.normal(scale=0.1, size=theta.size - 4), np.zeros(4)]) for _ in range(24)]
    serial = [objective(t) for t in points]
    with ThreadPoolExecutor(8) as pool:
        concurrent = list(pool.map(objective, points))
    for (f, grad, terms), (f_serial, grad_serial, terms_serial) in zip(concurrent, serial):
        assert f == f_serial
        assert np.array_equal(grad, grad_serial) and np.array_equal(terms, terms_serial)


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda a: a.__setitem__(0, a[0][:-1]), "^theta: expected"),
        (lambda a: a.__setitem__(0, np.concatenate([a[0][:-1], [-1.0]])), "^theta: the eigenvalue entries"),
        (lambda a: a.__setitem__(1, np.ascontiguousarray(a[1][:, :-1])), "^K1: "),
        (lambda a: a.__setitem__(3, a[3][:-1]), "^Y: "),
        (lambda a: a.__setitem__(5, ("laplacian", 1.0, 3.0, 1.0)), "^kernel: "),
        (lambda a: a.__setitem__(5, ("rbf", None, 3.0, 1.0)), "^kernel2: "),
        (lambda a: a.__setitem__(7, (1.0, 0.0, 1.0)), "^etas: "),
        (lambda a: a.__setitem__(8, -1.0), "^lam3: "),
        (lambda a: a.__setitem__(11, "X"), "^regularizer: "),
        (lambda a: a.__setitem__(12, "level2"), "^objective: "),
    ],
)
def test_reduced_set_objective_rejects_bad_input(change, message):
    theta, K1, G1, Y, dims = _reduced_set_problem()
    args = [theta, K1, G1, Y, dims, KERNELS["rbf"], KERNELS["rbf"], (1.0, 1.0, 1.0), 0.1, 1.0, 0.0, "H", "full"]
    change(args)
    with pytest.raises(ValueError, match=message):
        _core.deep_reduced_set_objective(*args)
