"""Dense eigensolvers standing in for the core's iterative ones (the core's ``eigs``)."""

import numpy as np
import scipy.linalg

from rkm.reference._blocks import times_transpose
from rkm.reference._validation import (
    blas_threads,
    check_finite,
    check_square,
    finite_number,
    int_in_range,
    output_dtype,
    real_matrix,
)
from rkm.reference.center import center_kernel
from rkm.reference.kernels import kernel_matrix

__all__ = ["eigh", "top_eigsh", "top_eigsh_operator", "kernel_top_eigsh"]


def _fix_signs(V):
    """Flip columns of V in place so their largest-magnitude entry is positive."""
    if V.size == 0:
        return V
    rows = np.argmax(np.abs(V), axis=0)  # first maximum on ties
    signs = np.sign(V[rows, np.arange(V.shape[1])])
    V *= signs[None, :]
    return V


def _square_matrix(A, name):
    A = real_matrix(A, name, min_rows=0, min_cols=0)
    check_square(A, name)
    return A


def eigh(A, n_threads=None):
    """Compute all eigenpairs of a symmetric matrix.

    Parameters
    ----------
    A : array-like of shape (N, N)
        Finite symmetric matrix.
    n_threads : int, default=None
        BLAS threads for the call (None: as they are; -1: all cores).

    Returns
    -------
    w : ndarray of shape (N,)
        Eigenvalues in descending order, dtype ``A.dtype``.
    V : ndarray of shape (N, N)
        Orthonormal eigenvectors as columns, ``V[:, i]`` belonging to ``w[i]``,
        each oriented so that its entry of largest absolute value is positive.
    """
    with blas_threads(n_threads):
        A = _square_matrix(A, "A")
        out_dtype = output_dtype(A)
        w, V = scipy.linalg.eigh(A.astype(np.float64, copy=False))
    w = np.ascontiguousarray(w[::-1], dtype=out_dtype)
    V = np.ascontiguousarray(V[:, ::-1], dtype=out_dtype)
    return w, _fix_signs(V)


def _default_tol(dtype):
    return 1e-4 if dtype == np.float32 else 1e-10


def _check_solver_arguments(n, n_components, start, tol, max_iter):
    """Validate the iterative solver's arguments for an operator of order n; return n_components and tol."""
    n_components = int_in_range(n_components, "n_components", 1, n)
    start = real_matrix(start, "start", min_rows=0, min_cols=0, finite=False)
    if start.shape[0] != n or start.shape[1] < 1:
        raise ValueError(f"start: must have shape ({n}, b) with b >= 1, got {start.shape}")
    check_finite(start, "start")
    if tol is not None:
        tol = finite_number(tol, "tol", positive=True)
    if max_iter is not None:
        int_in_range(max_iter, "max_iter", 1)
    return n_components, tol


def top_eigsh(A, n_components, start, tol=None, max_iter=None, n_threads=None):
    """Compute the largest algebraic eigenpairs of a symmetric matrix.

    Dense oracle of the core's iterative block solver: the result is exact up
    to rounding, so ``start`` and ``max_iter`` are only validated.

    Parameters
    ----------
    A : array-like of shape (N, N)
        Finite symmetric matrix.
    n_components : int
        Number s of eigenpairs, ``1 <= s <= N``.
    start : array-like of shape (N, b)
        Finite starting block of the iterative solver, ``b >= 1`` columns.
        Unused here.
    tol : float, default=None
        Positive convergence threshold on the relative residuals. ``None``
        means 1e-10 for float64 input and 1e-4 for float32 input.
    max_iter : int, default=None
        Positive; ignored.
    n_threads : int, default=None
        BLAS threads for the call (None: as they are; -1: all cores).

    Returns
    -------
    w : ndarray of shape (s,)
        The s largest eigenvalues in descending order, dtype ``A.dtype``.
    V : ndarray of shape (N, s)
        Matching orthonormal eigenvectors, oriented as in :func:`eigh`.
    residuals : ndarray of shape (s,), float64
        ``||A v_i - w_i v_i||_2 / max(|w_0|, tiny)`` where ``|w_0|`` is the
        largest magnitude among the returned eigenvalues.
    n_iter : int
        Number of iterations (always 1).
    converged : bool
        Whether every residual is ``<= tol``.
    """
    with blas_threads(n_threads):
        A = _square_matrix(A, "A")
        n = A.shape[0]
        n_components, tol = _check_solver_arguments(n, n_components, start, tol, max_iter)
        out_dtype = output_dtype(A)
        if tol is None:
            tol = _default_tol(out_dtype)

        A64 = A.astype(np.float64, copy=False)
        w, V = scipy.linalg.eigh(A64, subset_by_index=[n - n_components, n - 1])
        w = np.ascontiguousarray(w[::-1], dtype=out_dtype)
        V = _fix_signs(np.ascontiguousarray(V[:, ::-1], dtype=out_dtype))

        # Residuals of the vectors actually returned, so float32 rounding counts.
        w64 = w.astype(np.float64)
        V64 = V.astype(np.float64)
        scale = max(np.abs(w64).max(), np.finfo(np.float64).tiny)
        residuals = np.linalg.norm(times_transpose(A64, V64.T) - V64 * w64[None, :], axis=0) / scale
    converged = bool(np.all(residuals <= tol))
    return w, V, residuals, 1, converged


def top_eigsh_operator(matmat, n, n_components, start, tol=None, max_iter=None, n_threads=None):
    """Compute the largest eigenpairs of a symmetric operator given by products.

    The oracle materialises ``A = matmat(I)``, symmetrises it and defers to
    :func:`top_eigsh`.

    Parameters
    ----------
    matmat : callable
        ``matmat(B)`` returns ``A @ B`` for B of shape (n, b).
    n : int
        Order of the operator A, ``>= 1``.
    n_components : int
        Number s of eigenpairs, ``1 <= s <= n``.
    start : ndarray of shape (n, b)
        Starting block; its dtype is the working dtype.
    tol, max_iter, n_threads
        As in :func:`top_eigsh`.

    Returns
    -------
    w, V, residuals, n_iter, converged
        As in :func:`top_eigsh`.
    """
    if not callable(matmat):
        raise ValueError(f"matmat: must be callable, got {matmat!r}")
    n = int_in_range(n, "n", 1)
    with blas_threads(n_threads):
        _check_solver_arguments(n, n_components, start, tol, max_iter)
        start = np.asarray(start)
        A = np.asarray(matmat(np.eye(n, dtype=start.dtype)))
    if A.shape != (n, n):
        raise ValueError(f"matmat: must return an array of shape (n, b) for an (n, b) block, got {A.shape}")
    if A.dtype.kind not in "biuf":
        raise ValueError(f"matmat: must return real numbers, got dtype {A.dtype}")
    check_finite(A, "matmat")
    A = (A + A.T) / 2
    return top_eigsh(A, n_components, start, tol=tol, max_iter=max_iter, n_threads=n_threads)


def kernel_top_eigsh(
    X, kernel, gamma, degree, coef0, center, n_components, start, tol=None, max_iter=None, n_threads=None, progress=None
):
    """Compute the largest eigenpairs of the (centred) kernel matrix of X.

    Dense oracle of the core's matrix-free solver: it builds the whole kernel
    matrix with :func:`kernel_matrix`, centres it with :func:`center_kernel`
    and defers to :func:`top_eigsh`.

    Parameters
    ----------
    X : array-like of shape (N, n_features)
        Training samples.
    kernel, gamma, degree, coef0
        As in :func:`kernel_matrix`.
    center : bool
        Double-centre the kernel matrix first.
    n_components, start, tol, max_iter, n_threads
        As in :func:`top_eigsh`, for a matrix of order N.
    progress : callable, optional
        Called as ``progress(k)`` for k = 1 .. n_iter once the dense solve is done (the core calls it
        after each block product).

    Returns
    -------
    w, V, residuals, n_iter, converged
        As in :func:`top_eigsh`, of the centred kernel matrix when ``center``.
    column_means : ndarray of shape (N,)
        Column means of the uncentred kernel matrix as :func:`center_kernel`
        returns them; zeros when not ``center``.
    grand_mean : float
        Grand mean of the uncentred kernel matrix; 0.0 when not ``center``.
    """
    with blas_threads(n_threads):
        if not isinstance(center, (bool, np.bool_)):
            raise ValueError(f"center: must be True or False, got {center!r}")
        K = kernel_matrix(X, None, kernel, gamma, degree, coef0)
        if center:
            column_means, grand_mean = center_kernel(K)
        else:
            column_means, grand_mean = np.zeros(K.shape[0], K.dtype), 0.0
        w, V, residuals, n_iter, converged = top_eigsh(K, n_components, start, tol, max_iter)
    for products in range(1, n_iter + 1) if progress is not None else ():
        progress(products)
    return w, V, residuals, n_iter, converged, column_means, grand_mean
