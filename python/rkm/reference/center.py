"""Double centring of kernel matrices and of test rows (the core's ``center``)."""

import numpy as np

from rkm.reference._blocks import row_blocks, symmetric_from_lower
from rkm.reference._validation import (
    blas_threads,
    check_finite,
    check_float_ndarray,
    check_square,
    finite_number,
    real_matrix,
    real_vector,
)

__all__ = ["center_kernel", "center_kernel_rows"]


def center_kernel(K, n_threads=None, lower_only=False):
    """Double-centre a square kernel matrix in place.

    Applies ``K_c = K - 1 m^T - r 1^T + g`` = (I - 11^T/N) K (I - 11^T/N),
    where ``m`` holds the column means, ``r`` the row means (equal to ``m``
    for a symmetric K) and ``g`` the grand mean of K. For a kernel matrix this
    is the Gram matrix of the feature vectors after subtracting their mean
    (Suykens 2017, eq. 2.16; Gen-RKM, eq. 17).

    Parameters
    ----------
    K : ndarray of shape (N, N), float32 or float64
        Finite kernel matrix of the training set; overwritten by its centred
        version.
    n_threads : int, default=None
        BLAS threads for the call (None: as they are; -1: all cores).
    lower_only : bool, default=False
        Take K as the symmetric matrix given by its lower triangle: only that
        triangle is read and centred; the strict upper triangle is left as it
        was.

    Returns
    -------
    column_means : ndarray of shape (N,)
        Column means of the original K, dtype ``K.dtype``.
    grand_mean : float
        Mean of all entries of the original K.
    """
    with blas_threads(n_threads):
        check_float_ndarray(K, "K")
        real_matrix(K, "K", min_rows=0, min_cols=0, finite=False)
        check_square(K, "K")
        source = symmetric_from_lower(K) if lower_only else K
        check_finite(source, "K")
        column_means = source.mean(axis=0, dtype=np.float64)
        row_means = source.mean(axis=1, dtype=np.float64)
        grand_mean = float(column_means.mean()) if column_means.size else 0.0
        for rows in row_blocks(K.shape[0], 8 * K.shape[1]):
            stop = rows.stop if lower_only else K.shape[1]
            centred = _centred_rows(source[rows, :stop], column_means[:stop], row_means[rows], grand_mean)
            if lower_only:
                # Keep the block's strict upper triangle as it was.
                upper = np.arange(stop)[None, :] > np.arange(rows.start, rows.stop)[:, None]
                centred[upper] = K[rows, :stop][upper]
            K[rows, :stop] = centred
    return column_means.astype(K.dtype), grand_mean


def _centred_rows(K_rows, column_means, row_means, grand_mean):
    """float64 ``K_rows - column_means[None, :] - row_means[:, None] + grand_mean``, in that order."""
    work = K_rows.astype(np.float64)
    work -= column_means[None, :]
    work -= row_means[:, None]
    work += grand_mean
    return work


def center_kernel_rows(K_rows, column_means, grand_mean, n_threads=None):
    """Centre kernel rows of test points in place, consistently with training.

    ``K_rows[i, j] <- K_rows[i, j] - r_i - column_means[j] + grand_mean`` with
    ``r_i`` the mean of row i over the N training columns. This is the kernel
    between test and training feature vectors, both shifted by the training
    feature mean.

    Parameters
    ----------
    K_rows : ndarray of shape (M, N), float32 or float64
        Finite kernel between M test points and the N training points;
        overwritten.
    column_means : array-like of shape (N,)
        Column means of the uncentred training kernel, as returned by
        :func:`center_kernel`.
    grand_mean : float
        Grand mean of the uncentred training kernel.
    n_threads : int, default=None
        BLAS threads for the call (None: as they are; -1: all cores).

    Returns
    -------
    None
    """
    with blas_threads(n_threads):
        check_float_ndarray(K_rows, "K_rows")
        real_matrix(K_rows, "K_rows", min_rows=0, min_cols=0)
        column_means = real_vector(column_means, "column_means", K_rows.shape[1], "one per column of K_rows")
        grand_mean = finite_number(grand_mean, "grand_mean")
        column_means = column_means.astype(np.float64)
        for rows in row_blocks(K_rows.shape[0], 8 * K_rows.shape[1]):
            work = K_rows[rows].astype(np.float64)
            work -= work.mean(axis=1)[:, None]
            work -= column_means[None, :]
            work += grand_mean
            K_rows[rows] = work
