"""Pre-images from latent points (the core's ``preimage``): the kernel smoother of Gen-RKM eq. 8."""

import numbers

import numpy as np

from rkm.reference._blocks import row_blocks
from rkm.reference._validation import blas_threads, check_finite, common_output_dtype, real_matrix

__all__ = ["smoother_preimage"]


def _check_shapes(latents, projection, offsets, X_train, n_neighbors):
    """The core's checks, in its order and with its messages."""
    n_train = projection.shape[0]
    if projection.shape[1] != latents.shape[1]:
        raise ValueError(f"projection: has {projection.shape[1]} columns but latents has {latents.shape[1]}")
    if n_train < 1:
        raise ValueError("projection: needs at least one row (one per training point)")
    if offsets.shape != (n_train,):
        raise ValueError(f"offsets: has {offsets.size} entries but projection has {n_train} rows")
    if X_train.shape[0] != n_train:
        raise ValueError(f"X_train: has {X_train.shape[0]} rows but projection has {n_train}")
    if X_train.shape[1] < 1:
        raise ValueError("X_train: needs at least one column (feature)")
    valid = not isinstance(n_neighbors, bool) and isinstance(n_neighbors, numbers.Integral)
    if not valid or n_neighbors < 1:
        raise ValueError(f"n_neighbors: must be at least 1, got {n_neighbors!r}")
    for A, name in ((latents, "latents"), (projection, "projection"), (offsets, "offsets"), (X_train, "X_train")):
        check_finite(A, name)


def _overflow_error(dtype):
    single = np.dtype(dtype) == np.float32
    return ValueError(
        f"latents: the similarities latents @ projection.T + offsets overflow {np.dtype(dtype).name} (some are "
        "infinite or NaN); scale the inputs down" + (" or use float64" if single else "")
    )


def _nearest(similarities, k):
    """Indices (rows, k) of each row's k largest similarities, ties to the lower index, ascending; and the floor.

    The floor is the (k+1)-th largest similarity of the row. Among the similarities equal to it, the lowest
    indices fill the k places that the strictly larger ones leave.
    """
    n_train = similarities.shape[1]
    floor = np.partition(similarities, n_train - k - 1, axis=1)[:, n_train - k - 1, None]
    above = similarities > floor
    tied = similarities == floor
    wanted = k - above.sum(axis=1, keepdims=True)
    chosen = above | (tied & (np.cumsum(tied, axis=1) <= wanted))
    return np.nonzero(chosen)[1].reshape(-1, k), floor


def smoother_preimage(latents, projection, offsets, X_train, n_neighbors, n_threads=None):
    """Kernel-smoother pre-images of latent points (Gen-RKM, Pandey et al. 2021, eqs. 7-8).

    The similarities of latent ``i`` to the training points are
    ``latents[i] @ projection.T + offsets`` (eq. 7: ``projection`` holds the training points' rows of
    ``(1/eta) K H^T``; ``offsets`` adds what the model needs, e.g. what centring the kernel removed). With ``k = min(n_neighbors, N)``: when
    ``k < N`` the neighbours are the k largest similarities (ties go to the lower index) and the floor is
    the (k+1)-th largest; otherwise every training point is a neighbour and the floor is the smallest
    similarity. Each neighbour weighs ``(sim - floor) / (max - floor)`` (all 1 when ``max == floor``),
    the weights are scaled to sum 1, and the pre-image is the weighted mean of the neighbours' rows of
    ``X_train`` (eq. 8). This is ``rkm.preimage.kernel_smoother(latents @ projection.T + offsets, X_train,
    n_neighbors)``, formed a block of rows at a time: no more than a block of similarities exists at once.

    Parameters
    ----------
    latents : array-like of shape (n_samples, s)
        Finite latent points.
    projection : array-like of shape (N, s)
        Finite projection of the training points, ``N >= 1``.
    offsets : array-like of shape (N,)
        Finite offsets of the similarities.
    X_train : array-like of shape (N, d)
        Finite training points in input space, ``d >= 1``.
    n_neighbors : int
        Neighbours per pre-image, ``>= 1``; ``N`` or more averages over every training point.
    n_threads : int, default=None
        BLAS threads for the call (None: as they are; -1: all cores).

    Returns
    -------
    ndarray of shape (n_samples, d)
        float32 when all the inputs are float32 and float64 otherwise, computed in float64.

    Raises
    ------
    ValueError
        If the shapes disagree, an input holds NaN or infinity, ``N`` or ``d`` is 0, ``n_neighbors < 1``,
        or the similarities overflow the output dtype.
    """
    with blas_threads(n_threads):
        latents = real_matrix(latents, "latents", min_rows=0, min_cols=0, finite=False)
        projection = real_matrix(projection, "projection", min_rows=0, min_cols=0, finite=False)
        X_train = real_matrix(X_train, "X_train", min_rows=0, min_cols=0, finite=False)
        offsets = np.asarray(offsets)
        if offsets.dtype.kind not in "biuf":
            raise ValueError(f"offsets: must hold real numbers, got dtype {offsets.dtype}")
        _check_shapes(latents, projection, offsets, X_train, n_neighbors)
        out_dtype = common_output_dtype(latents, projection, offsets, X_train)
        latents, projection, offsets, X_train = (
            A.astype(np.float64, copy=False) for A in (latents, projection, offsets, X_train)
        )
        n_train, n_features = X_train.shape
        k = min(int(n_neighbors), n_train)
        largest = np.finfo(out_dtype).max
        out = np.empty((latents.shape[0], n_features), out_dtype)
        # A block holds its similarities, their masks and the gathered neighbours (or the dense weights).
        gathered = n_train if k == n_train else k * n_features
        with np.errstate(all="ignore"):
            for rows in row_blocks(latents.shape[0], 8 * (latents.shape[1] + 3 * n_train + gathered)):
                similarities = latents[rows] @ projection.T + offsets
                # The core forms the similarities in the working dtype: they must fit it.
                if similarities.size and not np.abs(similarities).max() <= largest:
                    raise _overflow_error(out_dtype)
                if k < n_train:
                    nearest, floor = _nearest(similarities, k)
                    top = np.take_along_axis(similarities, nearest, axis=1)
                else:
                    top, floor = similarities, similarities.min(axis=1, keepdims=True)
                spread = top.max(axis=1, keepdims=True) - floor
                if not np.all(np.isfinite(spread)):
                    raise _overflow_error(out_dtype)
                # Equal similarities (spread 0) fall back to the plain mean of the neighbours.
                weights = np.where(spread > 0, (top - floor) / np.where(spread > 0, spread, 1.0), 1.0)
                weights /= weights.sum(axis=1, keepdims=True)
                if k < n_train:
                    out[rows] = np.einsum("pk,pkf->pf", weights, X_train[nearest])
                else:
                    out[rows] = weights @ X_train
        return out
