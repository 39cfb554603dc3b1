"""Products of a matrix and a block, the Krylov solver's work (the core's ``products``)."""

from rkm.reference._blocks import symmetric_from_lower, times_transpose
from rkm.reference._validation import blas_threads, check_finite, check_square, output_dtype, real_matrix

__all__ = ["block_product", "transposed_product"]


def block_product(A, X, n_threads=None, symmetric=False):
    """Product ``A @ X`` of a matrix and a block (the Krylov solver's product).

    Parameters
    ----------
    A : array-like of shape (n, m)
        Finite matrix (with ``symmetric``, only its lower triangle need be).
    X : array-like of shape (m, b)
        Finite block.
    n_threads : int, default=None
        BLAS threads for the call (None: as they are; -1: all cores).
    symmetric : bool, default=False
        Take the square A as symmetric and read only its lower triangle.

    Returns
    -------
    ndarray of shape (n, b), in the dtype of A, computed in float64.
    """
    with blas_threads(n_threads):
        A = real_matrix(A, "A", min_rows=0, min_cols=0, finite=not symmetric)
        X = real_matrix(X, "X", min_rows=0, min_cols=0)
        if symmetric:
            check_square(A, "A")
        if A.shape[1] != X.shape[0]:
            raise ValueError(f"X: must have as many rows as A has columns ({A.shape[1]}), got {X.shape[0]}")
        out_dtype = output_dtype(A)
        if symmetric:
            A = symmetric_from_lower(A)
            check_finite(A, "A")
        return times_transpose(A, X.T, out_dtype)


def transposed_product(A, B, n_threads=None):
    """Product ``A.T @ B`` of a tall matrix and a block (the Krylov solver's projections).

    Parameters
    ----------
    A : array-like of shape (n, k)
        Finite matrix.
    B : array-like of shape (n, b)
        Finite block.
    n_threads : int, default=None
        BLAS threads for the call (None: as they are; -1: all cores).

    Returns
    -------
    ndarray of shape (k, b), in the dtype of A, computed in float64.
    """
    with blas_threads(n_threads):
        A = real_matrix(A, "A", min_rows=0, min_cols=0)
        B = real_matrix(B, "B", min_rows=0, min_cols=0)
        if A.shape[0] != B.shape[0]:
            raise ValueError(f"B: must have as many rows as A ({A.shape[0]}), got {B.shape[0]}")
        return times_transpose(A.T, B.T, output_dtype(A))
