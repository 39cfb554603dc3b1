"""The Constr-DRKM objective of the compiled core (_core.ConstrainedDeepObjective) against
rkm.reference.constr_drkm, and the reference's gradient and level-wise start."""

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from conftest import assert_relatively_close
from scipy.spatial.distance import cdist
from sklearn.preprocessing import KernelCenterer

from rkm import _core
from rkm._kernel_table import names_with
from rkm.reference import constr_drkm as constr_reference

CONSTR_LEVEL_KERNELS = {
    "rbf": ("rbf", 0.7, 3.0, 1.0),
    "laplacian": ("laplacian", 0.4, 3.0, 1.0),
    "poly": ("poly", 0.5, 3.0, 1.0),
    "linear": ("linear", None, 3.0, 1.0),
}
CONSTR_OBJECTIVES = {"core": _core.ConstrainedDeepObjective, "reference": constr_reference.ConstrainedDeepObjective}


def test_constr_level_kernels_cover_every_kernel_with_level_derivatives():
    assert set(CONSTR_LEVEL_KERNELS) == set(names_with("level_derivatives"))


def _constr_problem(n, n_levels, kernel, seed=0):
    """K1 (rbf of random inputs), level kernels (kernel at level 2, the next kind at level 3), sizes, etas."""
    X = np.random.default_rng(seed).normal(size=(n, 4))
    K1 = np.exp(-0.3 * cdist(X, X, "sqeuclidean"))
    kinds = list(CONSTR_LEVEL_KERNELS)
    following = kinds[(kinds.index(kernel) + 1) % len(kinds)]
    level_kernels = [CONSTR_LEVEL_KERNELS[kernel], CONSTR_LEVEL_KERNELS[following]][: n_levels - 1]
    return K1, level_kernels, (3, 2, 2)[:n_levels], (1.0, 0.7, 1.3)[:n_levels]


def _constr_point(n, p, seed, orthonormal=False):
    # Not orthonormal by default: then no level term vanishes (a linear level on St(p, N) gives 0).
    H = np.random.default_rng(seed).normal(size=(n, p)) / np.sqrt(n)
    return np.linalg.qr(H)[0] if orthonormal else H


@pytest.mark.parametrize("center", [False, True])
@pytest.mark.parametrize("kernel", list(CONSTR_LEVEL_KERNELS))
@pytest.mark.parametrize("n_levels, n", [(1, 40), (2, 40), (3, 40), (3, 600)])
def test_constr_drkm_core_matches_the_reference(n_levels, n, kernel, center):
    # n = 600: several row bands and column tiles of the fused algorithm
    K1, level_kernels, sizes, etas = _constr_problem(n, n_levels, kernel)
    H = _constr_point(n, sum(sizes), 1)
    f, G, terms = constr_reference.constr_drkm_objective(H, K1, level_kernels, sizes, etas, center)
    core = _core.ConstrainedDeepObjective(K1, level_kernels, sizes, etas, center)
    core_f, core_G, core_terms = core.evaluate(H)
    assert core.n_samples == n and core.sizes == sizes
    assert abs(core_f - f) <= 1e-12 * abs(f)
    assert abs(terms.sum() - f) <= 1e-14 * np.abs(terms).sum()
    assert_relatively_close(core_G, G, rtol=1e-12)
    assert_relatively_close(core_terms, terms, rtol=1e-12)


def test_constr_drkm_rbf_levels_match_the_reference_with_every_simd_code(isa):
    # The rbf levels' fused tiles have a version per SIMD level (AVX-512, AVX2, SSE2).
    K1, level_kernels, sizes, etas = _constr_problem(600, 3, "rbf")
    H = _constr_point(600, sum(sizes), 1)
    f, G, _ = constr_reference.constr_drkm_objective(H, K1, level_kernels, sizes, etas, True)
    core_f, core_G, _ = _core.ConstrainedDeepObjective(K1, level_kernels, sizes, etas, True).evaluate(H)
    assert abs(core_f - f) <= 1e-12 * abs(f)
    assert_relatively_close(core_G, G, rtol=1e-12)


def _constr_fd_problem(kernel, center):
    K1, _, sizes, etas = _constr_problem(30, 3, "rbf", seed=2)
    level_kernels = [CONSTR_LEVEL_KERNELS[kernel], CONSTR_LEVEL_KERNELS["rbf" if kernel != "rbf" else "poly"]]
    return lambda H: constr_reference.constr_drkm_objective(H, K1, level_kernels, sizes, etas, center)[:2], sum(sizes)


@pytest.mark.parametrize("center", [False, True])
@pytest.mark.parametrize("kernel", list(CONSTR_LEVEL_KERNELS))
def test_constr_drkm_gradient_matches_central_differences(kernel, center):
    fun, p = _constr_fd_problem(kernel, center)
    H, D = _constr_point(30, p, 3), _constr_point(30, p, 4)
    _, G = fun(H)
    h = 1e-6
    slope = (fun(H + h * D)[0] - fun(H - h * D)[0]) / (2 * h)
    assert abs(slope - np.sum(G * D)) <= 1e-7 * np.linalg.norm(G) * np.linalg.norm(D)


@pytest.mark.parametrize("center", [False, True])
@pytest.mark.parametrize("kernel", list(CONSTR_LEVEL_KERNELS))
def test_constr_drkm_taylor_remainder_is_second_order(kernel, center):
    fun, p = _constr_fd_problem(kernel, center)
    H, D = _constr_point(30, p, 5), _constr_point(30, p, 6)
    f, G = fun(H)
    steps = np.array([1e-3, 5e-4, 2.5e-4, 1.25e-4])
    remainders = [abs(fun(H + h * D)[0] - f - h * np.sum(G * D)) for h in steps]
    order = np.polyfit(np.log(steps), np.log(remainders), 1)[0]
    assert 1.8 < order < 2.2


@pytest.mark.parametrize("center", [False, True])
@pytest.mark.parametrize("kernel", list(CONSTR_LEVEL_KERNELS))
def test_constr_drkm_core_is_bit_identical_across_thread_counts(kernel, center):
    K1, level_kernels, sizes, etas = _constr_problem(700, 3, kernel, seed=3)
    H = _constr_point(700, sum(sizes), 9)
    one, two = (
        _core.ConstrainedDeepObjective(K1, level_kernels, sizes, etas, center, n_threads=t).evaluate(H) for t in (1, 2)
    )
    assert one[0] == two[0]
    assert np.array_equal(one[1], two[1]) and np.array_equal(one[2], two[2])


@pytest.mark.parametrize("center", [False, True])
@pytest.mark.parametrize("kernel", ["rbf", "poly", "linear"])
def test_constr_drkm_objective_is_invariant_to_rotations_within_levels(kernel, center):
    # k(H_l Q) = k(H_l) for orthogonal Q and these kernels, and Tr(B^T K B) is invariant too.
    K1, level_kernels, sizes, etas = _constr_problem(50, 3, kernel, seed=4)
    level_kernels[1] = CONSTR_LEVEL_KERNELS[kernel]
    H = _constr_point(50, sum(sizes), 10, orthonormal=True)
    blocks = np.split(H, np.cumsum(sizes)[:-1], axis=1)
    rotated = np.hstack(
        [
            B @ np.linalg.qr(np.random.default_rng(11 + i).normal(size=(B.shape[1],) * 2))[0]
            for i, B in enumerate(blocks)
        ]
    )
    objective = _core.ConstrainedDeepObjective(K1, level_kernels, sizes, etas, center)
    f, _, terms = objective.evaluate(H)
    f_rotated, _, terms_rotated = objective.evaluate(rotated)
    assert f_rotated == pytest.approx(f, rel=1e-12)
    np.testing.assert_allclose(terms_rotated, terms, rtol=1e-12, atol=1e-12 * abs(f))


@pytest.mark.parametrize("center", [False, True])
@pytest.mark.parametrize("kernel", list(CONSTR_LEVEL_KERNELS))
def test_constr_drkm_levelwise_init_is_orthonormal_and_deterministic(kernel, center):
    K1, level_kernels, sizes, etas = _constr_problem(60, 3, kernel, seed=5)
    H = constr_reference.levelwise_init(K1, level_kernels, sizes, etas, center)
    assert H.shape == (60, sum(sizes))
    assert np.linalg.norm(H.T @ H - np.eye(sum(sizes))) <= 1e-13
    assert np.array_equal(H, constr_reference.levelwise_init(K1, level_kernels, sizes, etas, center))
    # Level 1 holds the leading eigenvectors of the (centred) K1.
    K = KernelCenterer().fit_transform(K1) if center else K1
    w = np.linalg.eigvalsh(K)[::-1]
    np.testing.assert_allclose(np.diag(H[:, :3].T @ K @ H[:, :3]), w[:3], rtol=1e-10)


def _constr_arguments():
    K1, level_kernels, sizes, etas = _constr_problem(12, 2, "rbf")
    return dict(K1=K1, level_kernels=level_kernels, sizes=sizes, etas=etas, center=False)


CONSTR_BAD_ARGUMENTS = [
    ("sizes", dict(sizes=(3, 0))),
    ("sizes", dict(sizes=(3, -1))),
    ("sizes", dict(sizes=(8, 5))),
    ("etas", dict(etas=(1.0,))),
    ("etas", dict(etas=(1.0, 0.0))),
    ("etas", dict(etas=(1.0, np.nan))),
    ("level_kernels", dict(level_kernels=[])),
    ("level_kernels", dict(level_kernels=[("cosine", 1.0, 3.0, 1.0)])),
    ("level_kernels", dict(level_kernels=[("rbf", 0.0, 3.0, 1.0)])),
    ("level_kernels", dict(level_kernels=[("laplacian", -1.0, 3.0, 1.0)])),
    ("level_kernels", dict(level_kernels=[("poly", 1.0, 2.5, 1.0)])),
    ("K1", dict(K1=np.ones((12, 11)))),
    ("K1", dict(K1=np.full((12, 12), np.nan))),
]


@pytest.mark.parametrize("objective", list(CONSTR_OBJECTIVES))
@pytest.mark.parametrize("name, change", CONSTR_BAD_ARGUMENTS)
def test_constr_drkm_bad_arguments_name_the_argument(objective, name, change):
    with pytest.raises(ValueError, match=f"^{name}: "):
        CONSTR_OBJECTIVES[objective](**(_constr_arguments() | change))


@pytest.mark.parametrize("objective", list(CONSTR_OBJECTIVES))
@pytest.mark.parametrize("bad", [np.ones((12, 4)), np.ones((11, 5)), np.full((12, 5), np.inf)])
def test_constr_drkm_bad_points_name_h(objective, bad):
    with pytest.raises(ValueError, match="^H: "):
        CONSTR_OBJECTIVES[objective](**_constr_arguments()).evaluate(bad)
    with pytest.raises(ValueError, match="^H: "):
        constr_reference.constr_drkm_objective(bad, **_constr_arguments())


@pytest.mark.parametrize("kernel", ["rbf", "laplacian"])  # the rbf levels' symmetric tiles; the banded levels
def test_constr_drkm_objective_shared_by_eight_threads_gives_the_serial_values(kernel):
    # Every evaluation has its own buffers: eight Python threads evaluating one object at different points (the
    # GIL released inside) each get exactly what a serial call gives.
    K1, level_kernels, sizes, etas = _constr_problem(300, 3, kernel)
    objective = _core.ConstrainedDeepObjective(K1, level_kernels, sizes, etas, True, n_threads=2)
    points = [_constr_point(300, sum(sizes), seed) for seed in range(24)]
    serial = [objective.evaluate(H) for H in points]
    with ThreadPoolExecutor(8) as pool:
        concurrent = list(pool.map(objective.evaluate, points))
    for (f, G, terms), (f_serial, G_serial, terms_serial) in zip(concurrent, serial):
        assert f == f_serial
        assert np.array_equal(G, G_serial) and np.array_equal(terms, terms_serial)


def test_stiefel_engine_runs_one_core_objective_in_eight_threads():
    # stiefel_minimize runs a compiled objective without the GIL: eight runs from different starts sharing it
    # end exactly where each ends alone.
    K1, level_kernels, sizes, etas = _constr_problem(200, 2, "rbf")
    objective = _core.ConstrainedDeepObjective(K1, level_kernels, sizes, etas, True, n_threads=1)
    starts = [_constr_point(200, sum(sizes), seed, orthonormal=True) for seed in range(8)]

    def run(H0):
        return _core.stiefel_minimize(objective, H0, "cayley_bb", 1e-8, 200)

    serial = [run(H0) for H0 in starts]
    with ThreadPoolExecutor(8) as pool:
        concurrent = list(pool.map(run, starts))
    for result, expected in zip(concurrent, serial):
        assert result["status"] == expected["status"] and result["nit"] == expected["nit"]
        assert result["fun"] == expected["fun"] and np.array_equal(result["x"], expected["x"])
