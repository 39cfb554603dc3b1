"""Every routine of the compiled core against its NumPy twin in rkm.reference."""

import ast
import pathlib
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import rkm
from rkm import _core, reference
from rkm.kernels import ALIASES, KERNEL_NAMES, KERNELS as KERNEL_TABLE, names_with

KERNELS = list(KERNEL_NAMES)
SHAPES = [(1, 1), (1, 5), (7, 1), (33, 3), (300, 17), (701, 64)]


def _data(rng, shape, dtype, kernel):
    X = rng.normal(size=shape)
    if kernel == "tanimoto":  # count fingerprints
        X = rng.poisson(1.0, size=shape).astype(float)
    return X.astype(dtype)


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("shape", SHAPES)
def test_kernel_matrix_symmetric_matches_reference(rng, dtype, tol, kernel, shape):
    X = _data(rng, shape, dtype, kernel)
    gamma = 0.3 if kernel != "poly" else 0.1
    K = _core.kernel_matrix(X, None, kernel, gamma, 3, 1.0)
    expected = reference.kernel_matrix(X, None, kernel, gamma, 3, 1.0)
    assert K.dtype == dtype and K.shape == (shape[0], shape[0])
    np.testing.assert_allclose(K, expected, **tol)
    assert np.array_equal(K, K.T)


@pytest.mark.parametrize("kernel", KERNELS)
def test_kernel_matrix_cross_matches_reference(rng, dtype, tol, kernel):
    X, Y = _data(rng, (120, 9), dtype, kernel), _data(rng, (45, 9), dtype, kernel)
    K = _core.kernel_matrix(X, Y, kernel)
    np.testing.assert_allclose(K, reference.kernel_matrix(X, Y, kernel), **tol)


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("n", [1, 5, 700])  # 700 rows take two bands
def test_kernel_matrix_lower_only_writes_the_lower_triangle(rng, dtype, tol, kernel, n):
    X = _data(rng, (n, 6), dtype, kernel)
    K = _core.kernel_matrix(X, None, kernel, 0.2, 3, 1.0, None, lower_only=True)
    expected = reference.kernel_matrix(X, None, kernel, 0.2, 3, 1.0, None, lower_only=True)
    np.testing.assert_allclose(np.tril(K), np.tril(expected), **tol)


def test_the_kernel_table_lists_the_cores_kernels():
    assert _core.kernel_names() == list(KERNEL_NAMES) == list(KERNEL_TABLE)
    X = np.ones((2, 3))
    for alias, name in ALIASES.items():
        np.testing.assert_array_equal(_core.kernel_matrix(X, None, alias, 0.5), _core.kernel_matrix(X, None, name, 0.5))


@pytest.mark.parametrize("capability", ["has_gamma", "nystroem", "fourier_features", "level_derivatives",
                                        "layer_derivatives", "density", "distance"])
def test_every_capability_names_kernels_of_the_table(capability):
    assert set(names_with(capability)) <= set(KERNEL_NAMES)


def test_an_unknown_kernel_names_itself_and_the_valid_ones():
    with pytest.raises(ValueError, match="^kernel: unknown kernel 'sigmoid'; choose one of " + ", ".join(KERNEL_NAMES)):
        _core.kernel_matrix(np.ones((2, 2)), None, "sigmoid")
    # Every binding takes kernel names through the same parser.
    with pytest.raises(ValueError, match="^level_kernels: unknown kernel 'sigmoid'; choose one of"):
        _core.ConstrainedDeepObjective(np.eye(3), [("sigmoid", 1.0, 3.0, 1.0)], [1, 1], [1.0, 1.0], True)
    with pytest.raises(ValueError, match="^kernels: unknown kernel 'sigmoid'; choose one of"):
        _core.kae_loss_and_grad(np.ones((3, 2)), [np.ones((3, 2))], [("sigmoid", 1.0, 3.0, 1.0)], None, [0.1])


@pytest.mark.parametrize("kernel", sorted(set(KERNEL_NAMES) - set(names_with("level_derivatives"))))
def test_level_kernels_without_derivatives_are_refused(kernel):
    with pytest.raises(ValueError, match=f"^level_kernels: the {kernel} kernel"):
        _core.ConstrainedDeepObjective(np.eye(3), [(kernel, 1.0, 3.0, 1.0)], [1, 1], [1.0, 1.0], True)


@pytest.mark.parametrize("kernel", sorted(set(KERNEL_NAMES) - set(names_with("layer_derivatives"))))
def test_layer_kernels_without_derivatives_are_refused(kernel):
    with pytest.raises(ValueError, match=f"^kernels: the {kernel} kernel"):
        _core.kae_loss_and_grad(np.ones((3, 2)), [np.ones((3, 2))], [(kernel, 1.0, 3.0, 1.0)], None, [0.1])


def test_the_type_stub_covers_every_public_name_of_the_core():
    stub = pathlib.Path(rkm.__file__).with_name("_core.pyi")
    tree = ast.parse(stub.read_text())
    names = {node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
    names |= {node.target.id for node in tree.body if isinstance(node, ast.AnnAssign)}
    public = {name for name in dir(_core) if not name.startswith("_")}
    assert public <= names, sorted(public - names)
    assert (stub.parent / "py.typed").is_file()


def test_kernel_matrix_spans_several_bands(rng):
    # Large enough that the banded build runs several GEMM bands and column chunks.
    X = rng.normal(size=(2600, 8))
    np.testing.assert_allclose(_core.kernel_matrix(X, None, "rbf", 0.2), reference.kernel_matrix(X, None, "rbf", 0.2),
                               rtol=1e-12, atol=1e-12)


def test_kernel_matrix_default_gamma_is_inverse_features(rng):
    X = rng.normal(size=(20, 4))
    np.testing.assert_allclose(_core.kernel_matrix(X), reference.kernel_matrix(X, None, "rbf", 0.25), rtol=1e-12)


def test_rbf_float32_keeps_precision_far_from_origin(rng):
    # ||x||^2 + ||y||^2 - 2 x^T y cancels badly for data far from the origin unless it is shifted.
    X = (1000.0 + rng.normal(size=(200, 5))).astype(np.float32)
    exact = reference.kernel_matrix(X.astype(np.float64), None, "rbf", 0.5)
    np.testing.assert_allclose(_core.kernel_matrix(X, None, "rbf", 0.5), exact, atol=1e-5)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("kernel,gamma,power", [("laplacian", 0.47, 1), ("rbf", 2.94e-4, 2)])
def test_exponential_kernels_are_within_an_ulp_of_numpy_over_the_whole_range(isa, threads, kernel, gamma, power):
    # Integer points on a line give exact distances, so these kernels are exp of exactly the arguments
    # NumPy sees, from 0 through the subnormal results (below about -708) to 0 (below about -745).
    X = np.arange(1600.0)[:, None]
    expected = np.exp(-gamma * np.abs(X - X.T) ** power)
    assert expected[-1, 0] == 0 and np.any((expected > 0) & (expected < np.finfo(float).tiny))
    np.testing.assert_array_max_ulp(_core.kernel_matrix(X, None, kernel, gamma, 3, 1.0, threads), expected, maxulp=1)
    np.testing.assert_array_max_ulp(_core.kernel_matrix(X[:7], X, kernel, gamma, 3, 1.0, threads), expected[:7], maxulp=1)


def test_kernel_matrix_rejects_unknown_kernel(rng):
    with pytest.raises(ValueError, match="kernel"):
        _core.kernel_matrix(rng.normal(size=(3, 2)), None, "sigmoid")


def test_kernel_matrix_rejects_mismatched_features(rng):
    with pytest.raises(ValueError, match="features"):
        _core.kernel_matrix(rng.normal(size=(3, 2)), rng.normal(size=(3, 4)))


@pytest.mark.parametrize("n", [1, 2, 50, 333])
def test_center_kernel_matches_reference(rng, dtype, tol, n):
    K = reference.kernel_matrix(rng.normal(size=(n, 4)).astype(dtype), None, "rbf", 0.5)
    K_core, K_ref = K.copy(), K.copy()
    means_core, grand_core = _core.center_kernel(K_core)
    means_ref, grand_ref = reference.center_kernel(K_ref)
    np.testing.assert_allclose(K_core, K_ref, **tol)
    np.testing.assert_allclose(means_core, means_ref, **tol)
    assert grand_core == pytest.approx(grand_ref, rel=1e-6)
    assert means_core.dtype == dtype


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("n", [1, 2, 50, 333])
def test_center_kernel_lower_only_matches_full_centring(rng, dtype, tol, threads, n):
    K = reference.kernel_matrix(rng.normal(size=(n, 4)).astype(dtype), None, "rbf", 0.5)
    full = K.copy()
    means, grand = _core.center_kernel(full, threads)
    lower = K.copy()
    lower[np.triu_indices(n, 1)] = np.nan  # must be neither read nor written
    lower_ref = lower.copy()
    means_lower, grand_lower = _core.center_kernel(lower, threads, lower_only=True)
    means_ref, grand_ref = reference.center_kernel(lower_ref, lower_only=True)
    np.testing.assert_allclose(np.tril(lower), np.tril(full), **tol)
    np.testing.assert_allclose(np.tril(lower), np.tril(lower_ref), **tol)
    assert np.all(np.isnan(lower[np.triu_indices(n, 1)]))
    np.testing.assert_allclose(means_lower, means, **tol)
    np.testing.assert_allclose(means_ref, means, **tol)
    assert grand_lower == pytest.approx(grand, rel=1e-6) and grand_ref == pytest.approx(grand, rel=1e-6)


def test_center_kernel_rows_matches_reference(rng, dtype, tol):
    X, Xt = rng.normal(size=(80, 3)).astype(dtype), rng.normal(size=(13, 3)).astype(dtype)
    means, grand = reference.center_kernel(reference.kernel_matrix(X, None, "rbf", 0.5))
    rows_core = reference.kernel_matrix(Xt, X, "rbf", 0.5)
    rows_ref = rows_core.copy()
    _core.center_kernel_rows(rows_core, means, grand)
    reference.center_kernel_rows(rows_ref, means, grand)
    np.testing.assert_allclose(rows_core, rows_ref, **tol)


def test_center_kernel_requires_square(rng):
    with pytest.raises(ValueError, match="square"):
        _core.center_kernel(rng.normal(size=(3, 4)))


@pytest.mark.parametrize("n", [1, 2, 40, 257])
def test_eigh_matches_reference(rng, dtype, n):
    A = rng.normal(size=(n, n))
    A = (A + A.T).astype(dtype)
    w, V = _core.eigh(A)
    w_ref, V_ref = reference.eigh(A)
    scale = max(1.0, np.abs(w_ref).max())
    atol = 1e-10 * scale if dtype == np.float64 else 1e-3 * scale
    np.testing.assert_allclose(w, w_ref, atol=atol)
    assert np.all(np.diff(w) <= 0)
    np.testing.assert_allclose(A @ V, V * w, atol=atol * 10)
    # Signs are fixed the same way: the largest-magnitude entry of each eigenvector is positive.
    rows = np.abs(V).argmax(axis=0)
    assert np.all(V[rows, np.arange(n)] > 0)


def _spd_with_decay(rng, n, decay=0.9):
    Q, _ = np.linalg.qr(rng.normal(size=(n, n)))
    return (Q * decay ** np.arange(n)) @ Q.T


def _subspace_angle(U, V):
    return np.linalg.norm(U @ (U.T @ V) - V, 2)


@pytest.mark.parametrize("n,s", [(1, 1), (5, 5), (64, 3), (300, 10), (800, 25)])
def test_top_eigsh_matches_dense(rng, n, s):
    A = _spd_with_decay(rng, n)
    start = rng.normal(size=(n, min(n, s + 10)))
    w, V, residuals, n_iter, converged = _core.top_eigsh(A, s, start)
    w_ref, V_ref, *_ = reference.top_eigsh(A, s, start)
    assert converged and n_iter >= 1
    np.testing.assert_allclose(w, w_ref, rtol=1e-8, atol=1e-12)
    assert _subspace_angle(V, V_ref) < 1e-6
    assert np.all(residuals <= 1e-10)
    np.testing.assert_allclose(V.T @ V, np.eye(s), atol=1e-10)


@pytest.mark.parametrize("n,s,b", [(400, 10, 1), (600, 30, 4), (900, 40, 8)])
def test_top_eigsh_blocks_narrower_than_wanted_pairs(rng, isa, n, s, b):
    A = _spd_with_decay(rng, n, decay=0.97)
    w, V, residuals, n_iter, converged = _core.top_eigsh(A, s, rng.normal(size=(n, b)))
    w_ref, V_ref = reference.eigh(A)
    assert converged and n_iter > s // b
    np.testing.assert_allclose(w, w_ref[:s], rtol=1e-8, atol=1e-12)
    assert _subspace_angle(V, V_ref[:, :s]) < 1e-6
    np.testing.assert_allclose(V.T @ V, np.eye(s), atol=1e-10)


@pytest.mark.parametrize("rank", [0, 3])
def test_top_eigsh_finds_pairs_beyond_an_invariant_subspace(rng, rank):
    # Once the basis spans the range of A every residual vanishes; the solver must still return the
    # wanted number of orthonormal pairs (the extra ones with eigenvalue 0).
    B = rng.normal(size=(300, rank))
    A = B @ B.T
    w, V, residuals, _, converged = _core.top_eigsh(A, 8, rng.normal(size=(300, 2)))
    assert converged
    np.testing.assert_allclose(w, np.linalg.eigvalsh(A)[::-1][:8], atol=1e-10 * max(1.0, np.abs(w).max()))
    np.testing.assert_allclose(V.T @ V, np.eye(8), atol=1e-10)
    np.testing.assert_allclose(A @ V, V * w, atol=1e-8 * max(1.0, np.abs(w).max()))


def test_top_eigsh_on_kernel_matrix_float32(rng):
    X = rng.normal(size=(1200, 6)).astype(np.float32)
    K = reference.kernel_matrix(X, None, "rbf", 0.5)
    reference.center_kernel(K)
    start = rng.normal(size=(1200, 20)).astype(np.float32)
    w, V, residuals, _, converged = _core.top_eigsh(K, 8, start)
    w_ref, V_ref = reference.eigh(K.astype(np.float64))
    assert converged and w.dtype == np.float32 and V.dtype == np.float32
    np.testing.assert_allclose(w, w_ref[:8], rtol=1e-4)
    assert _subspace_angle(V.astype(float), V_ref[:, :8]) < 1e-2


def test_top_eigsh_reports_non_convergence(rng):
    A = _spd_with_decay(rng, 600, decay=0.9999)  # nearly flat spectrum: hard for any Krylov method
    w, V, residuals, n_iter, converged = _core.top_eigsh(A, 5, rng.normal(size=(600, 6)), 1e-12, 2)
    assert not converged and n_iter == 2
    assert residuals.shape == (5,) and residuals.max() > 1e-12


def test_top_eigsh_max_iter_still_returns_every_wanted_pair(rng):
    # Blocks of 2 columns need 4 products to span 8 pairs; max_iter=1 must not cut the basis short.
    A = _spd_with_decay(rng, 500)
    w, V, residuals, n_iter, converged = _core.top_eigsh(A, 8, rng.normal(size=(500, 2)), 1e-12, 1)
    assert not converged and n_iter == 4 and w.shape == (8,) and residuals.shape == (8,)
    np.testing.assert_allclose(V.T @ V, np.eye(8), atol=1e-10)
    assert np.all(np.isfinite(w)) and np.all(np.diff(w) <= 0)


def test_top_eigsh_is_deterministic(rng):
    A = _spd_with_decay(rng, 400)
    start = rng.normal(size=(400, 15))
    first, second = _core.top_eigsh(A, 5, start), _core.top_eigsh(A, 5, start)
    assert np.array_equal(first[0], second[0]) and np.array_equal(first[1], second[1])


def test_top_eigsh_operator_matches_matrix(rng):
    A = _spd_with_decay(rng, 500)
    start = rng.normal(size=(500, 16))
    w_op, V_op, *_ = _core.top_eigsh_operator(lambda B: A @ B, 500, 6, start)
    w, V, *_ = _core.top_eigsh(A, 6, start)
    np.testing.assert_allclose(w_op, w, rtol=1e-10)
    w_ref, V_ref, *_ = reference.top_eigsh_operator(lambda B: A @ B, 500, 6, start)
    np.testing.assert_allclose(w_op, w_ref, rtol=1e-8)


def test_top_eigsh_operator_propagates_callback_errors(rng):
    def broken(B):
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        _core.top_eigsh_operator(broken, 200, 3, rng.normal(size=(200, 8)))
    with pytest.raises(ValueError, match="matmat"):
        _core.top_eigsh_operator(lambda B: B[:, :1], 200, 3, rng.normal(size=(200, 8)))


@pytest.mark.parametrize(
    "bad",
    [dict(n_components=0), dict(n_components=9), dict(tol=-1.0), dict(max_iter=0), dict(start=np.ones((8, 0))),
     dict(start=np.ones((7, 2)))],
)
def test_top_eigsh_validates_arguments(rng, bad):
    A = _spd_with_decay(rng, 8)
    args = dict(n_components=2, start=rng.normal(size=(8, 3)), tol=None, max_iter=None) | bad
    with pytest.raises(ValueError):
        _core.top_eigsh(A, **args)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_results_do_not_depend_on_thread_count(rng, threads):
    X = rng.normal(size=(900, 12))
    K1 = _core.kernel_matrix(X, None, "rbf", 0.1, n_threads=1)
    Kt = _core.kernel_matrix(X, None, "rbf", 0.1, n_threads=threads)
    np.testing.assert_allclose(Kt, K1, rtol=1e-13, atol=1e-14)
    C1, Ct = K1.copy(), Kt.copy()
    _core.center_kernel(C1, n_threads=1)
    _core.center_kernel(Ct, n_threads=threads)
    np.testing.assert_allclose(Ct, C1, rtol=1e-12, atol=1e-13)


def test_same_thread_count_is_bit_identical(rng):
    X = rng.normal(size=(700, 5))
    K = _core.kernel_matrix(X, None, "laplacian", 0.3, n_threads=2)
    assert np.array_equal(K, _core.kernel_matrix(X, None, "laplacian", 0.3, n_threads=2))
    C1, C2 = K.copy(), K.copy()
    _core.center_kernel(C1, n_threads=2)
    _core.center_kernel(C2, n_threads=2)
    assert np.array_equal(C1, C2)


def test_n_threads_zero_is_rejected(rng):
    with pytest.raises(ValueError, match="n_threads"):
        _core.kernel_matrix(rng.normal(size=(3, 2)), n_threads=0)


def test_two_python_threads_run_the_core_concurrently(rng):
    # Each call releases the GIL; both threads must finish with correct results.
    X = rng.normal(size=(1500, 16))
    expected = reference.kernel_matrix(X, None, "rbf", 0.05)
    results = [None, None]

    def work(slot):
        results[slot] = _core.kernel_matrix(X, None, "rbf", 0.05, n_threads=1)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for result in results:
        np.testing.assert_allclose(result, expected, rtol=1e-12, atol=1e-12)


@pytest.fixture
def eigen_backend():
    _core.set_blas_backend("eigen")
    yield
    _core.set_blas_backend("scipy")


def test_eigen_fallback_agrees_with_scipy_blas(rng, eigen_backend):
    assert _core.blas_backend() == "eigen"
    X = rng.normal(size=(400, 7))
    K = _core.kernel_matrix(X, None, "rbf", 0.2)
    np.testing.assert_allclose(K, reference.kernel_matrix(X, None, "rbf", 0.2), rtol=1e-12, atol=1e-12)
    w, V = _core.eigh(K)
    np.testing.assert_allclose(w, reference.eigh(K)[0], atol=1e-10)
    w_top, *_ , converged = _core.top_eigsh(K, 5, rng.normal(size=(400, 15)))
    assert converged
    np.testing.assert_allclose(w_top, w[:5], rtol=1e-8)


def test_unknown_blas_backend_is_rejected():
    with pytest.raises(ValueError, match="backend"):
        _core.set_blas_backend("mkl")


def test_core_version_matches_package():
    import rkm

    assert _core.__version__ == rkm.__version__
    assert _core.config()["version"] == rkm.__version__


def test_baseline_isa_is_reported_and_unknown_isa_rejected(isa):
    assert _core.config()["simd_isa"] == "baseline" or isa == "auto"
    with pytest.raises(ValueError, match="isa"):
        _core.set_simd_isa("avx512")


@pytest.mark.parametrize("n,m,b", [(1, 1, 1), (5, 7, 3), (13, 2000, 17), (600, 1500, 48), (64, 64, 49), (7, 3, 100)])
def test_block_product_matches_reference(rng, dtype, isa, n, m, b):
    # Covers the streaming kernel's partial tiles and panels, and the BLAS path for wide blocks.
    A, X = rng.normal(size=(n, m)).astype(dtype), rng.normal(size=(m, b)).astype(dtype)
    atol = (1e-11 if dtype == np.float64 else 2e-4) * np.sqrt(m)
    np.testing.assert_allclose(_core.block_product(A, X), reference.block_product(A, X), rtol=1e-5, atol=atol)
    assert _core.config()["simd_isa"] in ("avx2", "baseline")


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("n,b", [(1, 1), (3, 2), (7, 9), (1030, 8), (2051, 17), (300, 40)])
def test_symmetric_block_product_reads_the_lower_triangle(rng, dtype, isa, threads, n, b):
    # Tiles, the diagonal blocks, the rows after the last tile and the split between threads; the upper
    # triangle holds garbage that must not be read.
    L = np.tril(rng.normal(size=(n, n)))
    A = (L + np.tril(L, -1).T).astype(dtype)
    garbage = A.copy()
    garbage[np.triu_indices(n, 1)] = np.nan
    X = rng.normal(size=(n, b)).astype(dtype)
    atol = (1e-11 if dtype == np.float64 else 2e-4) * np.sqrt(n)
    got = _core.block_product(garbage, X, threads, symmetric=True)
    np.testing.assert_allclose(got, reference.block_product(garbage, X, symmetric=True), rtol=1e-5, atol=atol)
    np.testing.assert_allclose(got, reference.block_product(A, X), rtol=1e-5, atol=atol)


def test_block_products_with_operands_beyond_cache_walk_a_in_blocks(rng, dtype, isa):
    # Operand rows beyond 4 MiB (4200 rows x 128 columns x 2 operands; 33000 x 32 padded columns) make the
    # products walk A in row blocks and column panels, with partial blocks and panels at the ends.
    threads, n, b = 2, 4200, 128
    L = np.tril(rng.uniform(-1, 1, size=(n, n)).astype(dtype))
    X = rng.normal(size=(n, b)).astype(dtype)
    atol = (1e-11 if dtype == np.float64 else 2e-4) * np.sqrt(n)
    np.testing.assert_allclose(_core.block_product(L, X, threads, symmetric=True),
                               reference.block_product(L, X, symmetric=True), rtol=1e-5, atol=atol)
    del L
    A, X = rng.normal(size=(50, 33000)).astype(dtype), rng.normal(size=(33000, 30)).astype(dtype)
    np.testing.assert_allclose(_core.block_product(A, X, threads), reference.block_product(A, X), rtol=1e-5,
                               atol=atol * 2)


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("n,k,b", [(1, 1, 1), (3, 5, 2), (4099, 7, 8), (5000, 130, 9), (4100, 20, 33), (10, 0, 3)])
def test_transposed_product_matches_reference(rng, dtype, isa, threads, n, k, b):
    # Several row parts, the rows after the last tile, one- and two-vector tiles, and the BLAS path.
    A, B = rng.normal(size=(n, k)).astype(dtype), rng.normal(size=(n, b)).astype(dtype)
    atol = (1e-11 if dtype == np.float64 else 2e-4) * np.sqrt(n)
    got = _core.transposed_product(A, B, threads)
    assert got.shape == (k, b) and got.dtype == dtype
    np.testing.assert_allclose(got, reference.transposed_product(A, B), rtol=1e-5, atol=atol)


def test_symmetric_block_product_needs_a_square_matrix(rng):
    with pytest.raises(ValueError, match="square"):
        _core.block_product(rng.normal(size=(4, 5)), rng.normal(size=(5, 2)), symmetric=True)


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("shape", [(1, 1, 1), (9, 4, 3), (150, 70, 6)])
def test_kernel_gradient_matches_reference(rng, dtype, kernel, shape):
    n, m, d = shape
    X, Y = _data(rng, (n, d), dtype, kernel), _data(rng, (m, d), dtype, kernel)
    W = rng.normal(size=(n, m)).astype(dtype)
    gamma = 0.3 if kernel != "poly" else 0.1
    G = _core.kernel_gradient(X, Y, W, kernel, gamma, 3, 1.0)
    expected = reference.kernel_gradient(X, Y, W, kernel, gamma, 3, 1.0)
    atol = 1e-10 if dtype == np.float64 else 1e-3
    assert G.dtype == dtype and G.shape == (n, d)
    np.testing.assert_allclose(G, expected, rtol=1e-5, atol=atol * max(1.0, np.abs(expected).max()))


@pytest.mark.parametrize("kernel", KERNELS)
def test_kernel_gradient_reference_matches_finite_differences(rng, kernel):
    X, Y = _data(rng, (4, 3), np.float64, kernel) + 0.1, _data(rng, (6, 3), np.float64, kernel)
    W = rng.normal(size=(4, 6))
    gamma = 0.3 if kernel != "poly" else 0.1
    G = reference.kernel_gradient(X, Y, W, kernel, gamma)
    step = 1e-6
    for i in range(4):
        for f in range(3):
            plus, minus = X.copy(), X.copy()
            plus[i, f] += step
            minus[i, f] -= step
            value = lambda Z: np.sum(W[i] * reference.kernel_matrix(Z[i : i + 1], Y, kernel, gamma)[0])
            np.testing.assert_allclose(G[i, f], (value(plus) - value(minus)) / (2 * step), rtol=1e-5, atol=1e-7)


# (n_x, n_y, n_features, b); n_y = None means Y is None. 1100 rows take several tiles of the symmetric product.
PRODUCT_SHAPES = [(1, None, 1, 1), (1, 3, 2, 1), (5, None, 1, 1), (7, 4, 3, 2), (300, None, 17, 8), (257, 700, 9, 5),
                  (1100, None, 6, 3)]


def _product_tolerance(tol, K, B):
    # Entries of K @ B may cancel: the absolute tolerance scales with |K| @ |B|.
    scale = (np.abs(K) @ np.abs(B.astype(np.float64))).max()
    return dict(rtol=tol["rtol"], atol=max(tol["atol"], tol["rtol"]) * scale)


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("shape", PRODUCT_SHAPES)
def test_kernel_product_matches_reference(rng, dtype, tol, kernel, shape):
    n_x, n_y, d, b = shape
    X = _data(rng, (n_x, d), dtype, kernel)
    Y = None if n_y is None else _data(rng, (n_y, d), dtype, kernel)
    B = rng.normal(size=(n_x if n_y is None else n_y, b)).astype(dtype)
    gamma = 0.3 if kernel != "poly" else 0.1
    got = _core.kernel_product(X, Y, B, kernel, gamma, 3.0, 1.0)
    expected = reference.kernel_product(X, Y, B, kernel, gamma, 3.0, 1.0)
    K = reference.kernel_matrix(X.astype(np.float64), None if Y is None else Y.astype(np.float64), kernel, gamma)
    assert got.dtype == dtype and got.shape == (n_x, b)
    np.testing.assert_allclose(got, expected, **_product_tolerance(tol, K, B))


@pytest.mark.parametrize("kernel", ["rbf", "tanimoto"])
def test_kernel_product_of_x_with_itself_equals_the_cross_product(rng, dtype, tol, kernel):
    X, B = _data(rng, (400, 5), dtype, kernel), rng.normal(size=(400, 3)).astype(dtype)
    K = reference.kernel_matrix(X.astype(np.float64), None, kernel, 0.3)
    np.testing.assert_allclose(_core.kernel_product(X, None, B, kernel, 0.3),
                               _core.kernel_product(X, X.copy(), B, kernel, 0.3), **_product_tolerance(tol, K, B))


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("symmetric", [True, False])
def test_kernel_product_thread_counts_agree_and_repeat(rng, threads, symmetric):
    X, B = rng.normal(size=(900, 7)), rng.normal(size=(900, 4))
    Y = None if symmetric else X[::-1].copy()
    one = _core.kernel_product(X, Y, B, "laplacian", 0.2, n_threads=1)
    many = _core.kernel_product(X, Y, B, "laplacian", 0.2, n_threads=threads)
    np.testing.assert_allclose(many, one, rtol=1e-12, atol=1e-12 * np.abs(one).max())
    assert np.array_equal(many, _core.kernel_product(X, Y, B, "laplacian", 0.2, n_threads=threads))


def test_kernel_product_default_gamma_is_inverse_features(rng):
    X, B = rng.normal(size=(30, 4)), rng.normal(size=(30, 2))
    np.testing.assert_allclose(_core.kernel_product(X, None, B), reference.kernel_product(X, None, B, "rbf", 0.25),
                               rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("args, match", [
    (lambda X, B: (X, None, B[:5]), "B"),
    (lambda X, B: (X, X[:4], B), "B"),
    (lambda X, B: (X, X[:, :2].copy(), B), "features"),
    (lambda X, B: (X, None, B, "sigmoid"), "kernel"),
])
def test_kernel_product_rejects_bad_arguments(rng, args, match):
    X, B = rng.normal(size=(6, 3)), rng.normal(size=(6, 2))
    with pytest.raises(ValueError, match=match):
        _core.kernel_product(*args(X, B))


@pytest.mark.parametrize("n,d,D", [(1, 1, 1), (1, 3, 4), (5, 1, 3), (300, 17, 64), (1000, 8, 257)])
def test_fourier_features_match_reference(rng, dtype, n, d, D):
    X = rng.normal(size=(n, d)).astype(dtype)
    W = rng.normal(scale=0.7, size=(d, D)).astype(dtype)
    offset = rng.uniform(0, 2 * np.pi, size=D).astype(dtype)
    got = _core.fourier_features(X, W, offset)
    assert got.dtype == dtype and got.shape == (n, D)
    # The core forms the phases X @ W + offset in the working dtype (d roundings of their magnitude) and
    # rounds the features to it.
    phase_scale = (np.abs(X.astype(np.float64)) @ np.abs(W.astype(np.float64)) + np.abs(offset)).max()
    atol = np.sqrt(2.0 / D) * 4 * np.finfo(dtype).eps * (d * phase_scale + 1)
    np.testing.assert_allclose(got, reference.fourier_features(X, W, offset), rtol=0, atol=atol)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_fourier_features_do_not_depend_on_thread_count(rng, threads):
    X, W, offset = rng.normal(size=(2000, 9)), rng.normal(size=(9, 70)), rng.uniform(0, 2 * np.pi, size=70)
    np.testing.assert_allclose(_core.fourier_features(X, W, offset, threads), _core.fourier_features(X, W, offset, 1),
                               rtol=0, atol=1e-12)


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("center", [True, False])
@pytest.mark.parametrize("n,s", [(1, 1), (6, 6), (60, 3), (400, 8)])
def test_kernel_top_eigsh_matches_reference(rng, dtype, tol, kernel, center, n, s):
    X = _data(rng, (n, 6), dtype, kernel)
    start = rng.normal(size=(n, min(n, s + 10))).astype(dtype)
    gamma = 0.3 if kernel != "poly" else 0.1
    w, V, residuals, n_iter, converged, means, grand = _core.kernel_top_eigsh(X, kernel, gamma, 3.0, 1.0, center, s,
                                                                              start)
    w_ref, V_ref, _, _, _, means_ref, grand_ref = reference.kernel_top_eigsh(X, kernel, gamma, 3.0, 1.0, center, s,
                                                                             start)
    single = dtype == np.float32
    scale = max(1.0, np.abs(w_ref).max())
    assert converged and n_iter >= 1 and w.dtype == V.dtype == means.dtype == dtype
    np.testing.assert_allclose(w, w_ref, rtol=1e-4 if single else 1e-8, atol=(1e-4 if single else 1e-10) * scale)
    K = reference.kernel_matrix(X.astype(np.float64), None, kernel, gamma)
    # Kernel statistics are means of entries of K: their rounding errors scale with its largest entry.
    k_scale = np.abs(K).max()
    np.testing.assert_allclose(means, means_ref, rtol=tol["rtol"], atol=tol["atol"] * k_scale)
    assert grand == pytest.approx(grand_ref, rel=tol["rtol"], abs=tol["atol"] * k_scale)
    # Eigenpairs of the explicitly built (centred) kernel matrix, whatever the gaps between eigenvalues.
    if center:
        reference.center_kernel(K)
    V64, w64 = V.astype(np.float64), w.astype(np.float64)
    np.testing.assert_allclose(V64.T @ V64, np.eye(s), atol=1e-4 if single else 1e-10)
    assert np.linalg.norm(K @ V64 - V64 * w64, axis=0).max() <= (1e-3 if single else 1e-8) * scale
    if not single:
        # The spectra here have relative gaps above 8e-4, except beyond the rank (6) of linear and cosine.
        distinct = s if kernel not in ("linear", "cosine") else min(s, 5)
        assert _subspace_angle(V, V_ref[:, :distinct]) < 1e-6


def test_kernel_top_eigsh_equals_the_stored_kernel_route(rng):
    # The matrix-free solve and kernel_matrix + center_kernel + top_eigsh find the same pairs.
    X, start = rng.normal(size=(500, 4)), rng.normal(size=(500, 12))
    w, V, *_, means, grand = _core.kernel_top_eigsh(X, "rbf", 0.5, 3.0, 1.0, True, 6, start)
    K = _core.kernel_matrix(X, None, "rbf", 0.5)
    means_stored, grand_stored = _core.center_kernel(K)
    w_stored, V_stored, *_ = _core.top_eigsh(K, 6, start)
    np.testing.assert_allclose(w, w_stored, rtol=1e-8)
    assert _subspace_angle(V, V_stored) < 1e-6
    np.testing.assert_allclose(means, means_stored, rtol=1e-12)
    assert grand == pytest.approx(grand_stored, rel=1e-12)


@pytest.mark.parametrize("bad", [dict(n_components=0), dict(n_components=9), dict(tol=-1.0), dict(max_iter=0),
                                 dict(start=np.ones((8, 0))), dict(start=np.ones((7, 2)))])
def test_kernel_top_eigsh_validates_arguments(rng, bad):
    args = dict(n_components=2, start=rng.normal(size=(8, 3)), tol=None, max_iter=None) | bad
    with pytest.raises(ValueError):
        _core.kernel_top_eigsh(rng.normal(size=(8, 3)), "rbf", 0.5, 3.0, 1.0, True, **args)


def _interrupt_after_ready(body, seconds=1.0):
    """Runs `body` in a child Python, sends Ctrl-C `seconds` after it prints 'ready', returns its output.

    The child installs Python's Ctrl-C handler itself: a shell that starts the suite in the background
    passes SIGINT down as ignored, and Python then leaves it ignored.
    """
    script = (
        "import signal; signal.signal(signal.SIGINT, signal.default_int_handler)\n"
        "import numpy as np, sys; from rkm import _core\n" + body + "\n"
        "print('ready', flush=True)\n"
        "try:\n"
        "    run()\n"
        "    print('completed', flush=True)\n"
        "except KeyboardInterrupt:\n"
        "    print('interrupted', flush=True)\n"
    )
    process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        # An editable install may print its rebuild log first.
        assert any(line.strip() == "ready" for line in process.stdout)
        time.sleep(seconds)
        process.send_signal(signal.SIGINT)
        output, _ = process.communicate(timeout=60)
    finally:
        process.kill()
    return output


def test_ctrl_c_interrupts_the_eigensolver():
    # Products with a random perturbation each time never converge nor stagnate near rounding, so the
    # solve runs until Ctrl-C; most of its time is the core's orthogonalization of a 20000-row basis.
    body = (
        "rng = np.random.default_rng(0); d = np.linspace(1, 2, 20000)\n"
        "matmat = lambda B: d[:, None] * B + 1e-3 * rng.standard_normal(B.shape)\n"
        "start = np.random.default_rng(1).normal(size=(20000, 8))\n"
        "def run(): _core.top_eigsh_operator(matmat, 20000, 40, start, 1e-12, 10**9)"
    )
    assert "interrupted" in _interrupt_after_ready(body)


def test_ctrl_c_interrupts_a_kernel_build_inside_its_parallel_region():
    # A 20000 x 20000 float32 build at d = 784 takes several seconds; the check runs between bands.
    body = (
        "X = np.random.default_rng(0).random((20000, 784), dtype=np.float32)\n"
        "def run(): _core.kernel_matrix(X, None, 'rbf', 0.01, 3.0, 1.0, 2)"
    )
    assert "interrupted" in _interrupt_after_ready(body)


def test_ctrl_c_interrupts_a_matrix_free_product_between_tiles():
    # K(X, X) B for N = 60000 recomputes 1.8e9 kernel entries (many seconds); the check runs between tiles.
    body = (
        "X = np.random.default_rng(0).random((60000, 64))\n"
        "B = np.ones((60000, 8))\n"
        "def run(): _core.kernel_product(X, None, B, 'rbf', 0.01, 3.0, 1.0, 2)"
    )
    assert "interrupted" in _interrupt_after_ready(body)
