"""Explicit feature maps: random Fourier features (the core's ``fourier_features``)."""

import numpy as np

from rkm.reference._blocks import blockwise
from rkm.reference._validation import blas_threads, check_fits, common_output_dtype, real_matrix, real_vector

__all__ = ["fourier_features"]


def fourier_features(X, W, offset, n_threads=None):
    """Random Fourier features ``sqrt(2 / D) cos(X @ W + offset)``.

    With the columns of W drawn from the spectral density of a shift-invariant
    kernel and the offsets uniform on [0, 2 pi), ``phi(x)^T phi(y)``
    approximates ``k(x, y)`` (Rahimi and Recht 2007).

    Parameters
    ----------
    X : array-like of shape (n_samples, d)
        Finite samples.
    W : array-like of shape (d, D)
        Finite random weights, one column per feature, ``D >= 1``.
    offset : array-like of shape (D,)
        Finite random phases.
    n_threads : int, default=None
        BLAS threads for the call (None: as they are; -1: all cores).

    Returns
    -------
    ndarray of shape (n_samples, D)
        float32 when all the inputs are float32 and float64 otherwise, computed
        in float64.

    Raises
    ------
    ValueError
        If an input is not a non-empty finite array of the right shape, or
        ``X @ W + offset`` overflows the output dtype.
    """
    with blas_threads(n_threads):
        X = real_matrix(X, "X")
        W = real_matrix(W, "W")
        if W.shape[0] != X.shape[1]:
            raise ValueError(f"W: must have shape (n_features, D) = ({X.shape[1]}, D), got {W.shape}")
        n_components = W.shape[1]
        offset = real_vector(offset, "offset", n_components, "one per column of W")
        out_dtype = common_output_dtype(X, W, offset)
        X, W, offset = (A.astype(np.float64, copy=False) for A in (X, W, offset))
        scale = np.sqrt(2.0 / n_components)

        def block(rows, stop):
            phases = X[rows] @ W + offset
            # The core forms the phases in the working dtype: they must fit it.
            check_fits(phases, "Fourier feature", out_dtype, what="phase X @ W + offset")
            return scale * np.cos(phases)

        # Overflow shows up as infinity or NaN in the phases, which check_fits turns into an error.
        with np.errstate(all="ignore"):
            # Blocks sized by their rows of X and of the result.
            return blockwise(X.shape[0], n_components, block, out_dtype, row_bytes=8 * (X.shape[1] + n_components))
