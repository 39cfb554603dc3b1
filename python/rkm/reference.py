"""Pure NumPy/SciPy reference implementations of the ``rkm._core`` routines.

This module is the NumPy twin of the compiled extension ``rkm._core``: every
public function here has the same name, signature and output convention as
its C++ counterpart.  It is written for clarity and correctness rather than
speed, and serves as the oracle the compiled core is tested against.

Conventions shared with the core
--------------------------------
* Floating outputs keep the dtype of the main input when it is ``float32`` or
  ``float64``; all arithmetic is carried out in ``float64``.
* Eigenvalues are returned in descending order and every eigenvector is
  oriented so that its entry of largest absolute value is positive (the first
  such entry on ties), which makes eigenvectors comparable across solvers.
* ``n_threads`` is accepted for signature compatibility and ignored.
"""

import numpy as np
import scipy.linalg
from scipy.spatial.distance import cdist

__all__ = [
    "kernel_matrix",
    "center_kernel",
    "center_kernel_rows",
    "eigh",
    "top_eigsh",
    "top_eigsh_operator",
    "block_product",
    "transposed_product",
    "kernel_gradient",
]

_KERNELS = ("linear", "poly", "rbf", "laplacian", "cosine", "tanimoto")
_GAMMA_KERNELS = ("poly", "rbf", "laplacian")


def _output_dtype(a):
    """Return ``a.dtype`` if it is float32/float64, else float64."""
    if a.dtype in (np.float32, np.float64):
        return a.dtype
    return np.dtype(np.float64)


def _as_2d_float64(a, name):
    a64 = np.asarray(a, dtype=np.float64)
    if a64.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array, got shape {a64.shape}")
    return a64


def _rbf(X, Y, gamma, symmetric):
    # Shifting both sets by the mean of X leaves distances unchanged but keeps
    # the norms small, which limits cancellation in ||x||^2 + ||y||^2 - 2x'y.
    mean = X.mean(axis=0)
    Xs = X - mean
    Ys = Xs if symmetric else Y - mean
    sq_dist = (
        np.einsum("ij,ij->i", Xs, Xs)[:, None]
        + np.einsum("ij,ij->i", Ys, Ys)[None, :]
        - 2.0 * (Xs @ Ys.T)
    )
    np.maximum(sq_dist, 0.0, out=sq_dist)
    if symmetric:
        np.fill_diagonal(sq_dist, 0.0)
    return np.exp(-gamma * sq_dist)


def _unit_rows(A):
    # Zero rows stay zero, so their cosine similarity with anything is 0.
    norms = np.linalg.norm(A, axis=1)
    norms[norms == 0.0] = 1.0
    return A / norms[:, None]


def _tanimoto(X, Y):
    dot = X @ Y.T
    denom = (
        np.einsum("ij,ij->i", X, X)[:, None]
        + np.einsum("ij,ij->i", Y, Y)[None, :]
        - dot
    )
    # denom >= (||x||^2 + ||y||^2) / 2, so it vanishes only when both vectors
    # are zero; two identical (empty) fingerprints have similarity 1.
    out = np.ones_like(dot)
    np.divide(dot, denom, out=out, where=denom != 0.0)
    return out


def kernel_matrix(X, Y=None, kernel="rbf", gamma=None, degree=3, coef0=1.0,
                  n_threads=None, lower_only=False):
    """Compute the kernel (Gram) matrix between the rows of X and Y.

    Parameters
    ----------
    X : array-like of shape (n_x, n_features)
        First set of samples.
    Y : array-like of shape (n_y, n_features), default=None
        Second set of samples. ``None`` means ``Y = X`` (symmetric result).
    kernel : {"linear", "poly", "rbf", "laplacian", "cosine", "tanimoto"}
        Kernel function:

        * ``"linear"``: ``x^T y``
        * ``"poly"``: ``(gamma x^T y + coef0)^degree``
        * ``"rbf"``: ``exp(-gamma ||x - y||_2^2)``
        * ``"laplacian"``: ``exp(-gamma ||x - y||_1)``
        * ``"cosine"``: ``x^T y / (||x|| ||y||)``, 0 when either norm is 0
        * ``"tanimoto"``: ``x^T y / (||x||^2 + ||y||^2 - x^T y)``, 1 when
          both vectors are 0
    gamma : float, default=None
        Kernel coefficient of "poly", "rbf" and "laplacian". ``None`` means
        ``1 / n_features``.
    degree : float, default=3
        Degree of the "poly" kernel.
    coef0 : float, default=1.0
        Independent term of the "poly" kernel.
    n_threads : int, default=None
        Ignored.
    lower_only : bool, default=False
        With ``Y=None``, only the lower triangle of the result is promised
        (the core then leaves the strict upper triangle unwritten); this
        oracle always returns the whole matrix.

    Returns
    -------
    K : ndarray of shape (n_x, n_y)
        Kernel matrix, of dtype ``X.dtype`` if that is float32 or float64 and
        float64 otherwise.

    Raises
    ------
    ValueError
        If ``kernel`` is unknown or X and Y have different numbers of features.
    """
    if kernel not in _KERNELS:
        raise ValueError(f"kernel must be one of {_KERNELS}, got {kernel!r}")
    out_dtype = _output_dtype(np.asarray(X))
    X = _as_2d_float64(X, "X")
    symmetric = Y is None
    Y = X if symmetric else _as_2d_float64(Y, "Y")
    if X.shape[1] != Y.shape[1]:
        raise ValueError(
            f"X and Y must have the same number of features, "
            f"got {X.shape[1]} and {Y.shape[1]}"
        )
    if gamma is None and kernel in _GAMMA_KERNELS:
        gamma = 1.0 / X.shape[1]

    if kernel == "linear":
        K = X @ Y.T
    elif kernel == "poly":
        K = (gamma * (X @ Y.T) + coef0) ** degree
    elif kernel == "rbf":
        K = _rbf(X, Y, gamma, symmetric)
    elif kernel == "laplacian":
        K = np.exp(-gamma * cdist(X, Y, metric="cityblock"))
    elif kernel == "cosine":
        K = _unit_rows(X) @ _unit_rows(Y).T
    else:
        K = _tanimoto(X, Y)
    return K.astype(out_dtype, copy=False)


def _symmetric_from_lower(A):
    """The float64 symmetric matrix whose lower triangle is that of the square A."""
    lower = np.tril(A.astype(np.float64))
    return lower + np.tril(lower, -1).T


def _check_square(K, name):
    if not isinstance(K, np.ndarray) or K.ndim != 2 or K.shape[0] != K.shape[1]:
        raise ValueError(f"{name} must be a square 2-D ndarray")


def _check_float_ndarray(A, name):
    # In-place routines need a floating array to write centred values into.
    if not isinstance(A, np.ndarray) or A.dtype not in (np.float32, np.float64):
        raise TypeError(f"{name} must be a float32 or float64 ndarray")


def center_kernel(K, n_threads=None, lower_only=False):
    """Double-centre a square kernel matrix in place.

    Applies ``K_c = K - 1 m^T - m 1^T + g``, where ``m`` holds the column
    means and ``g`` the grand mean of K. This is the Gram matrix of the
    feature vectors after subtracting their mean (Suykens 2017, eq. 2.16;
    Gen-RKM, eq. 17).

    Parameters
    ----------
    K : ndarray of shape (N, N), float32 or float64
        Kernel matrix of the training set; overwritten by its centred version.
    n_threads : int, default=None
        Ignored.
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
    _check_float_ndarray(K, "K")
    _check_square(K, "K")
    if lower_only:
        full = _symmetric_from_lower(K)
        column_means, grand_mean = center_kernel(full)
        rows, cols = np.tril_indices(K.shape[0])
        K[rows, cols] = full[rows, cols]
        return column_means.astype(K.dtype), grand_mean
    column_means = K.mean(axis=0, dtype=np.float64)
    grand_mean = float(column_means.mean())
    # For float64 input `work` is K itself, so the update is truly in place.
    work = K.astype(np.float64, copy=False)
    work -= column_means[None, :]
    work -= column_means[:, None]
    work += grand_mean
    if work is not K:
        K[...] = work
    return column_means.astype(K.dtype), grand_mean


def center_kernel_rows(K_rows, column_means, grand_mean, n_threads=None):
    """Centre kernel rows of test points in place, consistently with training.

    ``K_rows[i, j] <- K_rows[i, j] - r_i - column_means[j] + grand_mean`` with
    ``r_i`` the mean of row i over the N training columns. This is the kernel
    between test and training feature vectors, both shifted by the training
    feature mean.

    Parameters
    ----------
    K_rows : ndarray of shape (M, N), float32 or float64
        Kernel between M test points and the N training points; overwritten.
    column_means : array-like of shape (N,)
        Column means of the uncentred training kernel, as returned by
        :func:`center_kernel`.
    grand_mean : float
        Grand mean of the uncentred training kernel.
    n_threads : int, default=None
        Ignored.

    Returns
    -------
    None
    """
    _check_float_ndarray(K_rows, "K_rows")
    column_means = np.asarray(column_means, dtype=np.float64)
    if K_rows.ndim != 2 or column_means.shape != (K_rows.shape[1],):
        raise ValueError(
            f"K_rows of shape (M, N) needs column_means of shape (N,), got "
            f"{K_rows.shape} and {column_means.shape}"
        )
    work = K_rows.astype(np.float64, copy=False)
    row_means = work.mean(axis=1)
    work -= row_means[:, None]
    work -= column_means[None, :]
    work += float(grand_mean)
    if work is not K_rows:
        K_rows[...] = work


def _fix_signs(V):
    """Flip columns of V in place so their largest-magnitude entry is positive."""
    if V.size == 0:
        return V
    rows = np.argmax(np.abs(V), axis=0)  # first maximum on ties
    signs = np.sign(V[rows, np.arange(V.shape[1])])
    V *= signs[None, :]
    return V


def eigh(A, n_threads=None):
    """Compute all eigenpairs of a symmetric matrix.

    Parameters
    ----------
    A : ndarray of shape (N, N)
        Symmetric matrix.
    n_threads : int, default=None
        Ignored.

    Returns
    -------
    w : ndarray of shape (N,)
        Eigenvalues in descending order, dtype ``A.dtype``.
    V : ndarray of shape (N, N)
        Orthonormal eigenvectors as columns, ``V[:, i]`` belonging to ``w[i]``,
        each oriented so that its entry of largest absolute value is positive.
    """
    _check_square(A, "A")
    out_dtype = _output_dtype(A)
    w, V = scipy.linalg.eigh(A.astype(np.float64, copy=False))
    w = np.ascontiguousarray(w[::-1], dtype=out_dtype)
    V = np.ascontiguousarray(V[:, ::-1], dtype=out_dtype)
    return w, _fix_signs(V)


def _default_tol(dtype):
    return 1e-4 if dtype == np.float32 else 1e-10


def top_eigsh(A, n_components, start, tol=None, max_iter=None,
              n_threads=None):
    """Compute the largest algebraic eigenpairs of a symmetric matrix.

    Dense oracle of the core's iterative block solver: the result is exact up
    to rounding, so ``start`` and ``max_iter`` are only validated/ignored.

    Parameters
    ----------
    A : ndarray of shape (N, N)
        Symmetric matrix.
    n_components : int
        Number s of eigenpairs, ``1 <= s <= N``.
    start : ndarray of shape (N, b)
        Starting block of the iterative solver, ``b >= 1`` columns.
        Unused here.
    tol : float, default=None
        Convergence threshold on the relative residuals. ``None`` means 1e-10
        for float64 input and 1e-4 for float32 input.
    max_iter : int, default=None
        Ignored.
    n_threads : int, default=None
        Ignored.

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
    _check_square(A, "A")
    n = A.shape[0]
    if not 1 <= n_components <= n:
        raise ValueError(
            f"n_components must be in [1, {n}], got {n_components}"
        )
    start_shape = np.shape(start)
    if len(start_shape) != 2 or start_shape[0] != n or start_shape[1] < 1:
        raise ValueError(
            f"start must have shape ({n}, b) with b >= 1, got {start_shape}"
        )
    out_dtype = _output_dtype(A)
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
    residuals = np.linalg.norm(A64 @ V64 - V64 * w64[None, :], axis=0) / scale
    converged = bool(np.all(residuals <= tol))
    return w, V, residuals, 1, converged


def top_eigsh_operator(matmat, n, n_components, start, tol=None,
                       max_iter=None, n_threads=None):
    """Compute the largest eigenpairs of a symmetric operator given by products.

    The oracle materialises ``A = matmat(I)``, symmetrises it and defers to
    :func:`top_eigsh`.

    Parameters
    ----------
    matmat : callable
        ``matmat(B)`` returns ``A @ B`` for B of shape (n, b).
    n : int
        Order of the operator A.
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
    start = np.asarray(start)
    A = np.asarray(matmat(np.eye(n, dtype=start.dtype)))
    A = (A + A.T) / 2
    return top_eigsh(A, n_components, start, tol=tol, max_iter=max_iter,
                     n_threads=n_threads)


def block_product(A, X, n_threads=None, symmetric=False):
    """Product ``A @ X`` of a matrix and a block (the Krylov solver's product).

    Parameters
    ----------
    A : ndarray of shape (n, m)
    X : ndarray of shape (m, b)
    n_threads : ignored
    symmetric : bool, default=False
        Take the square A as symmetric and read only its lower triangle.

    Returns
    -------
    ndarray of shape (n, b), in the dtype of A, computed in float64.
    """
    A, X = np.asarray(A), np.asarray(X)
    if A.shape[1] != X.shape[0]:
        raise ValueError(f"X must have {A.shape[1]} rows, got {X.shape[0]}")
    if symmetric:
        _check_square(A, "A")
    A64 = _symmetric_from_lower(A) if symmetric else A.astype(np.float64)
    return (A64 @ X.astype(np.float64)).astype(_output_dtype(A))


def transposed_product(A, B, n_threads=None):
    """Product ``A.T @ B`` of a tall matrix and a block (the Krylov solver's projections).

    Parameters
    ----------
    A : ndarray of shape (n, k)
    B : ndarray of shape (n, b)
    n_threads : ignored

    Returns
    -------
    ndarray of shape (k, b), in the dtype of A, computed in float64.
    """
    A, B = np.asarray(A), np.asarray(B)
    if A.shape[0] != B.shape[0]:
        raise ValueError(f"B must have {A.shape[0]} rows, got {B.shape[0]}")
    return (A.astype(np.float64).T @ B.astype(np.float64)).astype(_output_dtype(A))


def kernel_gradient(X, Y, W, kernel="rbf", gamma=None, degree=3, coef0=1.0, n_threads=None):
    """Weighted gradients of a kernel with respect to its first argument.

    ``G[i] = sum_j W[i, j] * d/dx k(x, Y[j])`` at ``x = X[i]``; laplacian uses the subgradient with
    sign(0) = 0.

    Parameters
    ----------
    X : ndarray of shape (n_x, d)
    Y : ndarray of shape (n_y, d)
    W : ndarray of shape (n_x, n_y)
    kernel, gamma, degree, coef0 : as in :func:`kernel_matrix`
    n_threads : ignored

    Returns
    -------
    ndarray of shape (n_x, d), in X's dtype, computed in float64.
    """
    out_dtype = _output_dtype(np.asarray(X))
    X = _as_2d_float64(X, "X")
    Y = _as_2d_float64(Y, "Y")
    W = _as_2d_float64(W, "W")
    if kernel not in _KERNELS:
        raise ValueError(f"kernel must be one of {_KERNELS}, got {kernel!r}")
    if gamma is None:
        gamma = 1.0 / X.shape[1]
    diff = X[:, None, :] - Y[None, :, :]  # (n_x, n_y, d)
    dot = X @ Y.T
    nx = np.einsum("ij,ij->i", X, X)[:, None]
    ny = np.einsum("ij,ij->i", Y, Y)[None, :]
    if kernel == "linear":
        grad = np.broadcast_to(Y[None, :, :], diff.shape)
    elif kernel == "poly":
        factor = degree * gamma * (gamma * dot + coef0) ** (degree - 1)
        grad = factor[:, :, None] * Y[None, :, :]
    elif kernel == "rbf":
        k = np.exp(-gamma * np.sum(diff**2, axis=2))
        grad = -2.0 * gamma * k[:, :, None] * diff
    elif kernel == "laplacian":
        k = np.exp(-gamma * np.sum(np.abs(diff), axis=2))
        grad = -gamma * k[:, :, None] * np.sign(diff)
    elif kernel == "cosine":
        norms = np.sqrt(nx * ny)
        safe = np.where(norms > 0, norms, 1.0)
        k = np.where(norms > 0, dot / safe, 0.0)
        x_term = np.where(nx > 0, k / np.where(nx > 0, nx, 1.0), 0.0)
        grad = (np.where(norms > 0, 1.0 / safe, 0.0)[:, :, None] * Y[None, :, :]
                - x_term[:, :, None] * X[:, None, :])
    else:  # tanimoto: k = s / D with D = |x|^2 + |y|^2 - s
        denom = nx + ny - dot
        inv_sq = np.where(denom > 0, 1.0 / np.where(denom > 0, denom, 1.0) ** 2, 0.0)
        grad = ((nx + ny) * inv_sq)[:, :, None] * Y[None, :, :] - (2.0 * dot * inv_sq)[:, :, None] * X[:, None, :]
    return np.einsum("ij,ijd->id", W, grad).astype(out_dtype)
