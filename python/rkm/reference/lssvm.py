"""The LS-SVM dual system of Suykens 2017 (eqs. 3.16 and 3.22), the core's ``lssvm``.

    [ (1/eta) K + lam I   1 ] [ H   ]   [ Y ]
    [ 1^T                 0 ] [ b^T ] = [ 0 ]

solved as the textbook does: a Cholesky factorization of A = (1/eta) K + lam I (``scipy.linalg.cho_factor``),
A [U v] = [Y 1], then the bias from the Schur complement b = U^T 1 / (1^T v) and H = U - v b^T. The
leave-one-out residuals are r_i = h_i / (M^{-1})_ii for the bordered matrix M, with the diagonal of M^{-1}
taken from the explicit inverse of A (Cawley and Talbot 2004). :func:`lssvm_dual_fit_mixed` factorizes in
float32 and refines to float64 accuracy by preconditioned conjugate gradients.
"""

import numpy as np
import scipy.linalg

from rkm.reference._validation import blas_threads, check_square, finite_number, output_dtype, real_matrix
from rkm.reference.kernels import kernel_matrix

__all__ = ["lssvm_dual_solve", "lssvm_dual_fit", "lssvm_dual_fit_mixed"]


def _targets(Y, n_rows):
    Y = real_matrix(Y, "Y")
    if Y.shape[0] != n_rows:
        raise ValueError(f"Y: has {Y.shape[0]} rows, expected {n_rows}")
    return Y.astype(np.float64)


def _factor(A, lam):
    try:
        return scipy.linalg.cho_factor(A, lower=True, overwrite_a=True, check_finite=False)
    except np.linalg.LinAlgError as error:
        raise ValueError(
            f"lam: (1/eta) K + lam I is not numerically positive definite for lam = {lam:g}; increase lam"
        ) from error


def lssvm_dual_solve(K, Y, eta=1.0, lam=1.0, fit_intercept=True, loo=False, n_threads=None):
    """Solve the dual system for a given kernel matrix (read, not overwritten: the core overwrites it).

    Parameters
    ----------
    K : ndarray of shape (N, N)
        Symmetric kernel matrix; only its lower triangle is read.
    Y : ndarray of shape (N, p)
        Targets.
    eta, lam : float
        The paper's eta and lambda, both positive.
    fit_intercept : bool, default=True
        Whether the system has the bias row and column (else A H = Y).
    loo : bool, default=False
        Whether to return the leave-one-out residuals y_i - yhat_i^(-i).
    n_threads : int, default=None
        BLAS threads for the call.

    Returns
    -------
    H : ndarray of shape (N, p)
    b : ndarray of shape (p,)
        Zeros without an intercept.
    loo_residuals : ndarray of shape (N, p) or None
        All three in K's dtype (float64 for other dtypes).
    """
    K = real_matrix(K, "K")
    check_square(K, "K")
    Y = _targets(Y, K.shape[0])
    eta = finite_number(eta, "eta", positive=True)
    lam = finite_number(lam, "lam", positive=True)
    dtype = output_dtype(K)
    with blas_threads(n_threads):
        A = np.tril(K.astype(np.float64)) / eta
        A[np.diag_indices_from(A)] += lam
        factor = _factor(A, lam)
        U = scipy.linalg.cho_solve(factor, Y, check_finite=False)
        b = np.zeros(Y.shape[1])
        if fit_intercept:
            v = scipy.linalg.cho_solve(factor, np.ones(K.shape[0]), check_finite=False)
            b = U.sum(axis=0) / v.sum()
            U -= np.outer(v, b)
        if not (np.isfinite(U).all() and np.isfinite(b).all()):
            raise ValueError("lam: the solution is not finite; increase lam")
        residuals = None
        if loo:
            diagonal = np.diag(scipy.linalg.cho_solve(factor, np.eye(K.shape[0]), check_finite=False)).copy()
            if fit_intercept:
                diagonal -= v**2 / v.sum()
            residuals = (U / diagonal[:, None]).astype(dtype)
    return U.astype(dtype), b.astype(dtype), residuals


def lssvm_dual_fit(
    X,
    Y,
    kernel="rbf",
    gamma=None,
    degree=3.0,
    coef0=1.0,
    eta=1.0,
    lam=1.0,
    fit_intercept=True,
    loo=False,
    n_threads=None,
):
    """Solve the dual system for the kernel matrix of X (see :func:`lssvm_dual_solve`).

    Parameters
    ----------
    X : ndarray of shape (N, d)
    Y : ndarray of shape (N, p)
    kernel, gamma, degree, coef0
        As :func:`rkm.reference.kernel_matrix`.
    eta, lam, fit_intercept, loo, n_threads
        As :func:`lssvm_dual_solve`.

    Returns
    -------
    H, b, loo_residuals
        As :func:`lssvm_dual_solve`, in X's dtype.
    """
    X = real_matrix(X, "X")
    _targets(Y, X.shape[0])
    K = kernel_matrix(X, kernel=kernel, gamma=gamma, degree=degree, coef0=coef0, n_threads=n_threads)
    return lssvm_dual_solve(K, Y, eta, lam, fit_intercept, loo, n_threads)


def _backward_error_small(R, U, tolerance):
    """Whether every column's residual is within tolerance * ||u||_inf (LAPACK dsposv's criterion)."""
    return bool(np.all(np.abs(R).max(axis=0) <= tolerance * np.abs(U).max(axis=0)))


def lssvm_dual_fit_mixed(
    X, Y, kernel="rbf", gamma=None, degree=3.0, coef0=1.0, eta=1.0, lam=1.0, fit_intercept=True, n_threads=None
):
    """:func:`lssvm_dual_fit` by a float32 factorization refined to float64 accuracy.

    The kernel matrix of X rounded to float32 is factorized in float32 (``scipy.linalg.cho_factor``) and
    preconditions conjugate gradients on the exact float64 system A [U v] = [Y 1], one recurrence per column,
    until every column's residual satisfies ||r||_inf <= sqrt(N) eps ||A||_inf ||u||_inf (LAPACK dsposv's
    criterion, ||A||_inf taken from the float32 matrix); after 30 steps without it, or when the float32
    factorization fails, the float64 solve of :func:`lssvm_dual_fit` is returned with iterations = -1.

    Returns
    -------
    H, b : ndarrays
        As :func:`lssvm_dual_fit`, float64.
    iterations : int
        Conjugate gradient steps after the preconditioned start, or -1 after the float64 fallback.
    """
    X = real_matrix(X, "X").astype(np.float64)
    Y = _targets(Y, X.shape[0])
    eta = finite_number(eta, "eta", positive=True)
    lam = finite_number(lam, "lam", positive=True)
    n = X.shape[0]
    with blas_threads(n_threads):
        K = kernel_matrix(X, kernel=kernel, gamma=gamma, degree=degree, coef0=coef0)
        A = K / eta + lam * np.eye(n)
        A32 = np.tril(kernel_matrix(X.astype(np.float32), kernel=kernel, gamma=gamma, degree=degree, coef0=coef0))
        A32 = A32 / np.float32(eta) + np.float32(lam) * np.eye(n, dtype=np.float32)
        a_norm = np.abs(A32 + np.tril(A32, -1).T).astype(np.float64).sum(axis=1).max()
        rhs = np.column_stack([Y, np.ones(n)]) if fit_intercept else Y
        try:
            factor = scipy.linalg.cho_factor(A32, lower=True, check_finite=False)
        except np.linalg.LinAlgError:
            return (*lssvm_dual_fit(X, Y, kernel, gamma, degree, coef0, eta, lam, fit_intercept)[:2], -1)

        def precondition(R):
            scale = np.abs(R).max(axis=0)
            scale[scale == 0] = 1.0
            return scipy.linalg.cho_solve(factor, (R / scale).astype(np.float32), check_finite=False) * scale

        tolerance = np.sqrt(n) * np.finfo(np.float64).eps * a_norm
        U = precondition(rhs)
        iterations, limit = 0, 30
        while True:
            R = rhs - A @ U
            if _backward_error_small(R, U, tolerance):
                break
            if iterations == limit:
                return (*lssvm_dual_fit(X, Y, kernel, gamma, degree, coef0, eta, lam, fit_intercept)[:2], -1)
            Z = precondition(R)
            D, rz = Z, np.sum(R * Z, axis=0)
            while iterations < limit:
                iterations += 1
                AD = A @ D
                curvature = np.sum(D * AD, axis=0)
                alpha = np.divide(rz, curvature, out=np.zeros_like(rz), where=curvature > 0)
                U = U + alpha * D
                R = R - alpha * AD
                if _backward_error_small(R, U, tolerance):
                    break
                Z = precondition(R)
                rz_next = np.sum(R * Z, axis=0)
                D = Z + np.divide(rz_next, rz, out=np.zeros_like(rz), where=rz > 0) * D
                rz = rz_next
        b = np.zeros(Y.shape[1])
        if fit_intercept:
            v = U[:, -1]
            U = U[:, :-1]
            b = U.sum(axis=0) / v.sum()
            U = U - np.outer(v, b)
    return U, b, iterations
