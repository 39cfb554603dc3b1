"""Eigen-solver support shared by the kernel models: block widths, memory and time estimates, and the checks
of a computed spectrum (positive semi-definiteness, rounding level, convergence)."""

import functools
import os
import time

import numpy as np
from sklearn.utils import check_random_state

from rkm import _core
from rkm._utils.threads import blas_threads, thread_count
from rkm._utils.warn import warn
from rkm.exceptions import ConvergenceWarning, PerformanceWarning, PositiveSpectrumWarning, PrecisionWarning

# Allowance for the interpreter's and NumPy's transient allocations during a fit, beyond the arrays counted.
MEMORY_SLACK_BYTES = 128 * 2**20
# Bytes of each kernel-build thread's buffers (the core's kBandBytes chunk and its tiles).
KERNEL_BUILD_THREAD_BYTES = 5 * 2**20
# Below this many rows a full LAPACK decomposition is as fast as the Krylov solver.
DENSE_MAX_SAMPLES = 200


def numerically_positive(eigenvalues, dtype):
    """Eigenvalues of a PSD matrix with rounding noise set to zero (scikit-learn's thresholds).

    Values below 1e-12 (float64) or 2e-7 (float32) times the largest one are indistinguishable from zero;
    their components then project to zero instead of dividing by noise.
    """
    ratio = 1e-12 if dtype == np.float64 else 2e-7
    largest = eigenvalues.max(initial=0.0)
    return np.where(eigenvalues > largest * ratio, eigenvalues, 0.0)


def check_symmetric(K, what="X: a precomputed kernel"):
    """Raise unless the square K is symmetric to rounding; return max |K|. `what` names the matrix in the
    error (the argument first).

    The Krylov solver reads one triangle and the centring the whole matrix, so an asymmetric Gram matrix
    would be decomposed inconsistently. Walked in blocks of rows so no second N x N array is made.
    """
    scale = asymmetry = 0.0
    for start in range(0, K.shape[0], 1024):
        rows = K[start : start + 1024]
        scale = max(scale, float(np.abs(rows).max()))
        asymmetry = max(asymmetry, float(np.abs(rows - K[:, start : start + 1024].T).max()))
    if asymmetry > np.sqrt(np.finfo(K.dtype).eps) * scale:
        raise ValueError(
            f"{what} must be symmetric, but max |K - K^T| = {asymmetry:.3g} "
            f"({asymmetry / scale:.2g} of max |K|); symmetrize it, e.g. (K + K.T) / 2"
        )
    return scale


def rounding_level(n_samples, scale, dtype):
    """Worst-case spectral norm of the rounding error in an n x n kernel matrix whose entries are <= scale."""
    return n_samples * np.finfo(dtype).eps * scale


def warn_if_below_precision(largest, rounding, dtype, model="KernelPCA"):
    """Warn (PrecisionWarning) when the centred kernel's spectrum is no larger than the rounding of its entries."""
    if largest > 10 * rounding:
        return
    advice = "use float64 input" if dtype == np.float32 else "rescale the kernel (e.g. a larger gamma)"
    warn(
        f"{model}: the largest eigenvalue of the centred kernel ({largest:.3g}) is within a factor 10 of the "
        f"{np.dtype(dtype).name} rounding error of the kernel matrix ({rounding:.3g}): the kernel barely varies "
        f"across the data (a very small gamma?) and its components are mostly rounding; {advice}",
        PrecisionWarning,
    )


def check_positive_spectrum(w, rounding, dtype, model="KernelPCA"):
    """Reject an indefinite kernel as scikit-learn does; zero small negative eigenvalues with a warning.

    Negative eigenvalues below the matrix's rounding level are noise. Beyond it, one more negative than
    1e-5 (float64) or 5e-3 (float32) of the largest eigenvalue raises, and smaller ones above 1e-10 / 1e-6
    warn (scikit-learn's ``_check_psd_eigenvalues`` thresholds). Only the computed (top) eigenvalues are seen.
    """
    negative = w[w < 0]
    worst = -negative.min(initial=0.0)
    if worst <= rounding:
        return
    double = dtype == np.float64
    largest = max(float(w.max(initial=0.0)), 0.0)
    summary = f"{negative.size} of the {w.size} computed eigenvalues are negative, down to {-worst:.3g}"
    if worst > (1e-5 if double else 5e-3) * largest:
        raise ValueError(
            f"X: the kernel matrix is not positive semi-definite: {summary} (largest {largest:.3g}); kernel PCA "
            "needs a PSD kernel (check a precomputed Gram matrix, or the poly kernel's gamma and coef0)"
        )
    if worst > (1e-10 if double else 1e-6):
        warn(
            f"{model}: {summary} ({worst / largest:.2g} of the largest); they are set to zero", PositiveSpectrumWarning
        )


@functools.cache
def dense_seconds_per_cube(n_threads):
    """Seconds per n^3 of LAPACK's full eigendecomposition here, timed once on a 600 x 600 matrix."""
    n = 600
    A = np.random.default_rng(0).standard_normal((n, n))
    A += A.T
    with blas_threads(thread_count(n_threads)):
        start = time.perf_counter()
        _core.eigh(A, n_threads)
        return (time.perf_counter() - start) / n**3


def warn_slow_dense(n_samples, n_components, n_threads, model="KernelPCA"):
    """Warn (PerformanceWarning) that a full dense eigendecomposition of n_samples rows will be slow."""
    minutes = dense_seconds_per_cube(n_threads) * n_samples**3 / 60
    warn(
        f"{model}: solver='dense' decomposes the whole {n_samples} x {n_samples} matrix, about "
        f"{minutes:.0f} min here (scaled from a 600-sample run), and LAPACK cannot be interrupted by Ctrl-C once "
        f"it runs; solver='krylov' finds the {n_components} leading components far faster",
        PerformanceWarning,
    )


def fit_memory_bytes(n_samples, n_features, n_components, dtype, solver, n_threads):
    """Peak bytes a fit allocates: the kernel matrix, the eigensolver's workspace and the kernel build's buffers.

    The dense solver holds a copy of K, LAPACK syevd's 2 n^2 workspace and then two n^2 eigenvector arrays
    (4 n^2 in all besides K); the Krylov solver holds a fixed number of n-vectors.
    """
    n, item = n_samples, np.dtype(dtype).itemsize
    if solver == "dense":
        solver_bytes = 4 * n * n * item
    else:
        block = krylov_block_size(n_components, n)
        solver_bytes = (_core.krylov_workspace_columns(n_components, block) + block) * n * item
    threads = thread_count(n_threads) or os.cpu_count() or 1
    # Double copies of X (kernel build), per-thread band buffers, per-thread column sums (centring).
    build_bytes = 2 * n * n_features * 8 + threads * (KERNEL_BUILD_THREAD_BYTES + 8 * n)
    return n * n * item + solver_bytes + build_bytes + MEMORY_SLACK_BYTES


def krylov_block_size(n_components, n_samples):
    """Columns the Krylov solver multiplies by K per pass: 8 (the width of the core's product tiles) up to
    64 components, 16 up to 128, then 32.

    Products with few columns stream K at memory speed, so the cost of the eigen step follows the total
    number of columns multiplied; narrow blocks need the fewest (measured on RBF spectra, N = 10000:
    s = 10 took 96 columns with blocks of 8 against 160 with 16; s = 50 took 256 against 304 with 16 and
    616 with 56). Wider blocks for many components bound the number of orthogonalization steps. Widths of
    8, 16 and 32 columns are also the ones the product tiles run fastest per column (24 took 1.6x longer
    per column than 32, N = 3000 to 20000)."""
    width = 8 if n_components <= 64 else 16 if n_components <= 128 else 32
    return min(n_samples, width)


def matrix_free_block_size(n_components, n_samples):
    """Columns per matrix-free block product: 16 up to 16 components, 32 up to 64, then 64.

    Each matrix-free product recomputes the whole kernel, which costs as much as multiplying it with a few
    dozen columns, so the blocks are wider than the stored matrix's: fewer passes over the kernel in all
    (bench/RESULTS.md, "Large-N kernel PCA: matrix-free block width"). For 10 components, blocks of 16 and 32
    took the same time (N = 20000: 5 and 4 products at tol 1e-6) and 16 holds 40% fewer basis columns."""
    width = 16 if n_components <= 16 else 32 if n_components <= 64 else 64
    return min(n_samples, width)


def matrix_free_memory_bytes(n_samples, n_features, n_components, dtype, n_threads):
    """Peak bytes of a matrix-free fit: X and the block in double, per-thread tiles and accumulators, and the
    Krylov solver's workspace."""
    item = np.dtype(dtype).itemsize
    block = matrix_free_block_size(n_components, n_samples)
    threads = thread_count(n_threads) or os.cpu_count() or 1
    product = _core.kernel_product_workspace_bytes(n_samples, n_samples, n_features, block + 1, threads, True)
    solver = (_core.krylov_workspace_columns(n_components, block) + 2 * block) * n_samples * item
    return product + solver + MEMORY_SLACK_BYTES


def cuda_dense_memory_bytes(n_samples, n_features, n_components, dtype):
    """GPU bytes of a CUDA fit with the kernel matrix stored on the device, as the core's kernel_operator_bytes and
    krylov_device_bytes count them: K, the Krylov iteration's blocks and the first product's block in the dtype;
    X with its norms and the column means in double; a 256 MiB band of inner products, 64 MiB of conversions and
    the core's 256 MiB margin."""
    block = krylov_block_size(n_components, n_samples)
    columns = _core.krylov_workspace_columns(n_components, block) + 2 * (block + 1)
    values = n_samples * (n_samples + columns)
    return values * np.dtype(dtype).itemsize + 8 * n_samples * (n_features + 2) + (2 * 256 + 64) * 2**20


def kernel_diagonal_max(X, name, gamma, degree, coef0):
    """max_i k(x_i, x_i), the largest entry of a PSD kernel matrix: 1 for the normalised kernels, from the
    squared norms for linear and poly (X may be a Dask array; that costs one pass)."""
    if name not in ("linear", "poly"):
        return 1.0
    largest = float((X.astype(np.float64) ** 2).sum(axis=1).max())
    if name == "linear":
        return largest
    smallest = float((X.astype(np.float64) ** 2).sum(axis=1).min())
    return max(abs(gamma * value + coef0) ** degree for value in (largest, smallest))


def finite_or_raise(values, method):
    """Hidden features divide by eigenvalues: refuse results that overflow rather than return infinities."""
    if not np.all(np.isfinite(values)):
        raise ValueError(
            f"X: {method} overflows: the hidden features h = e / lambda exceed the floating-point range (the model "
            "has eigenvalues too small for these inputs)"
        )
    return values


def warn_not_converged(residuals, n_iter, max_iter, tol, dtype, model="KernelPCA"):
    """Warn (rkm's ConvergenceWarning, attributed to the user's line) that the Krylov solver stopped short of
    tol."""
    tol = f"tol {tol:g}" if tol is not None else "the default tol"
    if n_iter < max_iter:
        advice = "use float64 or a larger tol" if dtype == np.float32 else "use a larger tol"
        reason = (
            f"stopped after {n_iter} block products: the relative residuals stagnated at up to "
            f"{residuals.max():.2e}, the accuracy {np.dtype(dtype).name} can reach here, above {tol}; {advice}"
        )
    else:
        reason = (
            f"reached max_iter = {max_iter} block products with relative residuals up to {residuals.max():.2e} "
            f"({tol}); increase max_iter"
        )
    warn(f"{model}: the Krylov eigensolver {reason}", ConvergenceWarning)


def prefer_dense(n, n_components):
    """Whether a full LAPACK decomposition of an n x n matrix beats the Krylov solver for n_components pairs:
    up to DENSE_MAX_SAMPLES rows, or when more than a fifth of the spectrum is wanted."""
    return n <= DENSE_MAX_SAMPLES or 5 * n_components > n


def leading_eigenpairs(
    A, n_components, solver, *, n_threads=None, random_state=None, tol=None, max_iter=None, model="KernelPCA"
):
    """The n_components largest eigenpairs of the symmetric matrix A, descending, signs fixed.

    solver "dense": LAPACK on the whole matrix; "krylov": the core's restarted block Krylov solver (it reads the
    lower triangle of A only) from a Gaussian start block seeded by random_state, warning with
    ConvergenceWarning (naming `model`) when it stops short of tol.

    Returns
    -------
    w : ndarray of shape (n_components,)
    V : ndarray of shape (n, n_components)
    residuals : ndarray of shape (n_components,)
        ||A v - w v|| / max |w|.
    n_iter : int
        Block products of the Krylov solver (1 for dense).
    """
    if solver == "dense":
        with blas_threads(thread_count(n_threads)):
            w, V = _core.eigh(A, n_threads)
        w, V = w[:n_components], np.ascontiguousarray(V[:, :n_components])
        residuals = np.linalg.norm(A @ V - V * w, axis=0) / max(abs(w).max(), np.finfo(float).tiny)
        return w, V, residuals, 1
    rng = check_random_state(random_state)
    block = krylov_block_size(n_components, A.shape[0])
    start = rng.standard_normal((A.shape[0], block)).astype(A.dtype)
    max_iter = max_iter or _core.default_max_iter(n_components, block)
    # Thin blocks are multiplied by the core's own OpenMP kernel: BLAS then only does small products and
    # runs single-threaded, so that its idle threads do not spin against the OpenMP ones.
    blas = 1 if block <= _core.THIN_BLOCK_COLUMNS else thread_count(n_threads)
    with blas_threads(blas):
        w, V, residuals, n_iter, converged = _core.top_eigsh(A, n_components, start, tol, max_iter, n_threads)
    if not converged:
        warn_not_converged(residuals, n_iter, max_iter, tol, A.dtype, model)
    return w, V, residuals, n_iter


def sign_flips(V):
    """+-1 per column of V: the sign that makes the column's entry of largest magnitude positive (the first one on
    ties), as the core's eigensolvers and scikit-learn's svd_flip orient eigenvectors."""
    largest = V[np.argmax(np.abs(V), axis=0), np.arange(V.shape[1])]
    return np.where(largest < 0, -1.0, 1.0)


def fix_signs(V):
    """V with each column oriented by :func:`sign_flips`: eigenvectors then repeat across solvers."""
    return V * sign_flips(V)
