"""Pre-image maps: from a point in feature space back to input space.

These are shared by every model whose feature space is only known through a kernel.
"""

from __future__ import annotations

import numpy as np

from rkm import _core
from rkm._utils.threads import blas_threads, check_n_threads
from rkm._utils.validation import check_int, check_matrix, check_positive
from rkm.kernels import kernel_matrix


def _check_rows(name, A, other_name, other, axis=0):
    """A's rows must match `other`'s size along `axis` (training points or points)."""
    if A.shape[0] != other.shape[axis]:
        raise ValueError(f"{name}: has {A.shape[0]} rows but {other_name} has {other.shape[axis]}")


def with_feature_mean(coefficients: np.ndarray) -> np.ndarray:
    """Coefficients of P phi(x) + m over the N training points, given those of the centred projection P phi(x).

    The centred projection is sum_i c_i (phi(x_i) - m) with m = (1/N) sum_i phi(x_i); adding m back gives the
    coefficients c_i + (1 - sum_j c_j) / N. coefficients: (n_points, N).
    """
    coefficients = check_matrix(coefficients, "coefficients")
    return coefficients + (1.0 - coefficients.sum(axis=1, keepdims=True)) / coefficients.shape[1]


def ridge_preimage_coefficients(
    Z: np.ndarray, X: np.ndarray, kernel: tuple, alpha: float, n_threads: int | None = None
) -> np.ndarray:
    """Dual coefficients A of the kernel ridge map z -> k(z, Z) A from points Z (n, q) to inputs X (n, d): the learned
    pre-image map of Bakir et al. (2004). kernel is a (name, gamma, degree, coef0) spec, alpha the ridge."""
    Z, X = check_matrix(Z, "Z"), check_matrix(X, "X")
    _check_rows("X", X, "Z", Z)
    alpha = check_positive(alpha, "alpha")
    K = kernel_matrix(Z, None, *kernel, n_threads=n_threads).astype(np.float64)
    K.flat[:: K.shape[0] + 1] += alpha
    return np.linalg.solve(K, X.astype(np.float64))


def kernel_smoother(similarities: np.ndarray, X_train: np.ndarray, n_neighbors: int) -> np.ndarray:
    """Kernel-smoother pre-image (Gen-RKM eq. 8).

    Each pre-image is the weighted mean of its ``n_neighbors`` most similar training points. The
    similarities of those neighbours are scaled to (0, 1] relative to the first excluded one (the
    paper's "scaled similarities between 0 and 1"), so nearer points weigh more.

    Parameters
    ----------
    similarities : ndarray of shape (n_points, n_train)
        Predicted similarities k(x_j, x*) of each point to each training point.
    X_train : ndarray of shape (n_train, n_features)
    n_neighbors : int

    Returns
    -------
    ndarray of shape (n_points, n_features)
    """
    similarities, X_train = check_matrix(similarities, "similarities"), check_matrix(X_train, "X_train")
    _check_rows("X_train", X_train, "similarities' columns", similarities, axis=1)
    n_train = X_train.shape[0]
    k = min(check_int(n_neighbors, "n_neighbors"), n_train)
    if k < n_train:
        order = np.argpartition(-similarities, k, axis=1)
        nearest, floor_index = order[:, :k], order[:, k]
        floor = np.take_along_axis(similarities, floor_index[:, None], axis=1)
    else:
        nearest = np.broadcast_to(np.arange(n_train), similarities.shape)
        floor = similarities.min(axis=1, keepdims=True)
    top = np.take_along_axis(similarities, nearest, axis=1)
    spread = top.max(axis=1, keepdims=True) - floor
    # Equal similarities (spread 0) fall back to a plain average of the neighbours.
    weights = np.where(spread > 0, (top - floor) / np.where(spread > 0, spread, 1.0), 1.0)
    weights = np.where(weights.sum(axis=1, keepdims=True) > 0, weights, 1.0)
    weights /= weights.sum(axis=1, keepdims=True)
    return np.einsum("pk,pkf->pf", weights, X_train[nearest])


def smoother_preimage(
    latents: np.ndarray,
    projection: np.ndarray,
    offsets: np.ndarray,
    X_train: np.ndarray,
    n_neighbors: int,
    n_threads: int | None = None,
) -> np.ndarray:
    """Kernel-smoother pre-images of latent points (Gen-RKM eqs. 7-8), the similarities computed block by block.

    The similarities of latent h to the training points are ``projection @ h + offsets`` (for a kernel view:
    the centred kernel matrix times H, and the column means of the uncentred one; eq. 7 up to a constant factor,
    which the smoother's scaling ignores); each pre-image is :func:`kernel_smoother` of them (ties go to the lower
    index). The core forms the similarities in bands of rows (a few MiB per thread), so that no (n_points,
    n_train) matrix is held whatever the number of points; in float64 a float32 product screens the candidates,
    which are then scored exactly. float32 when every array is float32, else float64.

    Parameters
    ----------
    latents : ndarray of shape (n_points, s)
    projection : ndarray of shape (n_train, s)
    offsets : ndarray of shape (n_train,)
    X_train : ndarray of shape (n_train, n_features)
    n_neighbors : int
    n_threads : int or None, default=None
        Threads of the core (None: OpenMP's default; -1: all cores).

    Returns
    -------
    ndarray of shape (n_points, n_features)
    """
    arrays = [
        check_matrix(A, name) for A, name in ((latents, "latents"), (projection, "projection"), (X_train, "X_train"))
    ]
    offsets = np.asarray(offsets)
    # One dtype for the four arrays, as the core takes them: float32 only when all are float32.
    dtype = np.float32 if all(A.dtype == np.float32 for A in (*arrays, offsets)) else np.float64
    latents, projection, X_train = (np.ascontiguousarray(A, dtype=dtype) for A in arrays)
    offsets = np.ascontiguousarray(offsets.reshape(-1), dtype=dtype)
    with blas_threads(1):
        return _core.smoother_preimage(
            latents, projection, offsets, X_train, check_int(n_neighbors, "n_neighbors"), check_n_threads(n_threads)
        )


def gaussian_fixed_point(
    coefficients: np.ndarray,
    X_train: np.ndarray,
    gamma: float,
    X_start: np.ndarray,
    max_iter: int = 100,
    tol: float = 1e-6,
    n_threads: int | None = None,
) -> np.ndarray:
    """Fixed-point pre-image for the Gaussian kernel (Mika et al. 1999; Constr-DRKM, iteration after eq. 11).

    Minimises ||phi(x) - sum_i c_i phi(x_i)||^2 for k(x, y) = exp(-gamma ||x - y||^2) by iterating
    x <- sum_i c_i k(x, x_i) x_i / sum_i c_i k(x, x_i). A point whose denominator vanishes keeps its
    last iterate.

    Parameters
    ----------
    coefficients : ndarray of shape (n_points, n_train)
        Expansion coefficients c of each target feature-space point over the training points.
    X_train : ndarray of shape (n_train, n_features)
    gamma : float
    X_start : ndarray of shape (n_points, n_features)
    max_iter : int
    tol : float
        A point stops when its step is below tol times (1 + its norm).

    Returns
    -------
    X : ndarray of shape (n_points, n_features)
    n_iter : int
        Iterations of the slowest point.
    """
    coefficients, X_train = check_matrix(coefficients, "coefficients"), check_matrix(X_train, "X_train")
    X_start = check_matrix(X_start, "X_start")
    _check_rows("X_train", X_train, "coefficients' columns", coefficients, axis=1)
    _check_rows("X_start", X_start, "coefficients", coefficients)
    if X_start.shape[1] != X_train.shape[1]:
        raise ValueError(f"X_start: has {X_start.shape[1]} features but X_train has {X_train.shape[1]}")
    gamma, tol = check_positive(gamma, "gamma"), check_positive(tol, "tol")
    max_iter = check_int(max_iter, "max_iter")
    X = np.array(X_start, dtype=X_train.dtype, order="C", copy=True)
    active = np.arange(X.shape[0])
    n_iter = 0
    while active.size and n_iter < max_iter:
        n_iter += 1
        weights = kernel_matrix(X[active], X_train, "rbf", gamma=gamma, n_threads=n_threads)
        weights *= coefficients[active]
        denominator = weights.sum(axis=1)
        usable = np.abs(denominator) > np.finfo(X.dtype).tiny
        updated = X[active].copy()
        updated[usable] = (weights[usable] @ X_train) / denominator[usable, None]
        step = np.linalg.norm(updated - X[active], axis=1)
        X[active] = updated
        moving = usable & (step > tol * (1.0 + np.linalg.norm(updated, axis=1)))
        active = active[moving]
    return X, n_iter
