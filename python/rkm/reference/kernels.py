"""Kernel matrices, matrix-free kernel products and kernel gradients (the core's ``kernels``)."""

import numbers

import numpy as np
from scipy.spatial.distance import cdist

from rkm._kernel_table import ALIASES as _ALIASES
from rkm._kernel_table import KERNEL_NAMES as _KERNELS
from rkm._kernel_table import names_with
from rkm.reference._blocks import blockwise
from rkm.reference._validation import (
    blas_threads,
    check_fits,
    common_output_dtype,
    finite_number,
    overflow_error,
    real_matrix,
)

__all__ = ["kernel_matrix", "kernel_product", "kernel_gradient"]

_GAMMA_KERNELS = names_with("has_gamma")


def _kernel_name(kernel):
    if not isinstance(kernel, str):
        raise ValueError(f"kernel: must be a string, got {kernel!r}")
    name = _ALIASES.get(kernel, kernel)
    if name not in _KERNELS:
        raise ValueError(f"kernel: unknown kernel {kernel!r}; choose one of {', '.join(_KERNELS)}")
    return name


def _kernel_parameters(name, gamma, degree, coef0, n_features):
    """Validated (gamma, degree, coef0) as kernels.py checks them; gamma None means 1 / n_features."""
    if name in _GAMMA_KERNELS:
        gamma = 1.0 / n_features if gamma is None else finite_number(gamma, "gamma", positive=name != "poly")
    if name == "poly":
        valid = not isinstance(degree, bool) and isinstance(degree, numbers.Real) and np.isfinite(degree)
        if not valid or degree < 0:
            raise ValueError(f"degree: must be a non-negative number, got {degree!r}")
        coef0 = finite_number(coef0, "coef0")
    return gamma, degree, coef0


def _kernel_operands(arrays):
    """The named 2-D arrays (None stays None) as float64, checked, and the output dtype of the result.

    The output dtype is the common float dtype of the inputs (float32 only when all are float32); the first
    array is X, whose feature count the one named Y must match.
    """
    checked = {name: None if A is None else real_matrix(A, name) for name, A in arrays.items()}
    X, Y = checked["X"], checked.get("Y")
    if Y is not None and Y.shape[1] != X.shape[1]:
        raise ValueError(f"Y: has {Y.shape[1]} features but X has {X.shape[1]}")
    dtype = common_output_dtype(*(A for A in checked.values() if A is not None))
    as_float64 = {name: None if A is None else A.astype(np.float64, copy=False) for name, A in checked.items()}
    return as_float64, dtype


def _squared_norms(A):
    return np.einsum("ij,ij->i", A, A)


def _check_degree_base(base, degree):
    # A negative base to a non-integer power is not a real number.
    if not float(degree).is_integer() and base.min() < 0:
        raise ValueError(
            f"degree: a non-integer degree ({float(degree):g}) needs gamma x^T y + coef0 >= 0, but some pairs of "
            "samples give a negative base; use an integer degree or a larger coef0"
        )


def _unit_rows(A, name, dtype):
    # Zero rows stay zero, so their cosine similarity with anything is 0.
    norms = np.linalg.norm(A, axis=1)
    if not np.all(np.isfinite(norms)):
        raise overflow_error(name, dtype)
    norms[norms == 0.0] = 1.0
    return A / norms[:, None]


def _kernel_blocks(name, X, Y, gamma, degree, coef0, dtype):
    """``block(rows, stop)``: the float64 kernel values between X[rows] and Y[:stop] (Y None: Y = X).

    `dtype` is the output's, named by overflow errors.
    """
    symmetric = Y is None
    if name == "rbf":
        # Shifting both sets by the mean of X leaves distances unchanged but keeps
        # the norms small, which limits cancellation in ||x||^2 + ||y||^2 - 2x'y.
        mean = X.mean(axis=0)
        X, Y = X - mean, None if symmetric else Y - mean
    elif name == "cosine":
        X, Y = _unit_rows(X, name, dtype), None if symmetric else _unit_rows(Y, name, dtype)
    Y = X if symmetric else Y
    x_norms, y_norms = _squared_norms(X), _squared_norms(Y)
    if name == "rbf" and symmetric and not np.all(np.isfinite(x_norms)):
        # The diagonal, set to 1 below, would be NaN: the core reports that as an overflow.
        raise overflow_error(name, dtype)

    def block(rows, stop):
        if name == "laplacian":
            return np.exp(-gamma * cdist(X[rows], Y[:stop], metric="cityblock"))
        dot = X[rows] @ Y[:stop].T
        if name in ("linear", "cosine"):
            return dot
        if name == "poly":
            base = gamma * dot + coef0
            _check_degree_base(base, degree)
            return base**degree
        sums = x_norms[rows, None] + y_norms[None, :stop]
        if name == "tanimoto":
            # denominator >= (||x||^2 + ||y||^2) / 2 vanishes only when both vectors are zero; two empty
            # fingerprints share no bit, so their similarity is 0 (RDKit's convention). An overflowed
            # (NaN) denominator passes the test, so the NaN reaches the overflow check.
            denom = sums - dot
            return np.divide(dot, denom, out=np.zeros_like(dot), where=denom != 0.0)
        sq_dist = sums - 2.0 * dot
        np.maximum(sq_dist, 0.0, out=sq_dist)
        if symmetric:
            sq_dist[np.arange(rows.stop - rows.start), np.arange(rows.start, rows.stop)] = 0.0
        return np.exp(-gamma * sq_dist)

    return block


def kernel_matrix(X, Y=None, kernel="rbf", gamma=None, degree=3, coef0=1.0, n_threads=None, lower_only=False):
    """Compute the kernel (Gram) matrix between the rows of X and Y.

    Parameters
    ----------
    X : array-like of shape (n_x, n_features)
        First set of samples.
    Y : array-like of shape (n_y, n_features), default=None
        Second set of samples. ``None`` means ``Y = X`` (symmetric result).
    kernel : {"linear", "poly", "rbf", "laplacian", "cosine", "tanimoto"}
        Kernel function ("polynomial" and "gaussian" are aliases of "poly"
        and "rbf"):

        * ``"linear"``: ``x^T y``
        * ``"poly"``: ``(gamma x^T y + coef0)^degree``
        * ``"rbf"``: ``exp(-gamma ||x - y||_2^2)``
        * ``"laplacian"``: ``exp(-gamma ||x - y||_1)``
        * ``"cosine"``: ``x^T y / (||x|| ||y||)``, 0 when either norm is 0
        * ``"tanimoto"``: ``x^T y / (||x||^2 + ||y||^2 - x^T y)``, 0 when
          both vectors are 0 (RDKit's convention: they share no bit)
    gamma : float, default=None
        Kernel coefficient of "poly" (any finite number), "rbf" and
        "laplacian" (positive). ``None`` means ``1 / n_features``.
    degree : float, default=3
        Degree of the "poly" kernel, ``>= 0``; a non-integer degree needs
        ``gamma x^T y + coef0 >= 0`` for every pair.
    coef0 : float, default=1.0
        Independent term of the "poly" kernel.
    n_threads : int, default=None
        BLAS threads for the call (None: as they are; -1: all cores).
    lower_only : bool, default=False
        With ``Y=None``, only the lower triangle of the result is promised
        (the core then leaves the strict upper triangle unwritten); this
        oracle always returns the whole matrix.

    Returns
    -------
    K : ndarray of shape (n_x, n_y)
        Kernel matrix, float32 when the inputs are float32 and float64
        otherwise; exactly symmetric when ``Y`` is None.

    Raises
    ------
    ValueError
        If ``kernel`` is unknown, a parameter is out of range, X or Y is not
        a non-empty finite 2-D array, X and Y have different numbers of
        features, or the kernel overflows the output dtype.
    """
    with blas_threads(n_threads):
        name = _kernel_name(kernel)
        arrays, out_dtype = _kernel_operands({"X": X, "Y": Y})
        X, Y = arrays["X"], arrays["Y"]
        gamma, degree, coef0 = _kernel_parameters(name, gamma, degree, coef0, X.shape[1])
        n_y = X.shape[0] if Y is None else Y.shape[0]
        # Overflow shows up as NaN or infinity in the result, which check_fits turns into an error.
        with np.errstate(all="ignore"):
            values = _kernel_blocks(name, X, Y, gamma, degree, coef0, out_dtype)
            return blockwise(
                X.shape[0],
                n_y,
                lambda rows, stop: check_fits(values(rows, stop), name, out_dtype),
                out_dtype,
                lower=Y is None,
            )


def kernel_product(X, Y, B, kernel="rbf", gamma=None, degree=3.0, coef0=1.0, n_threads=None):
    """Product ``K(X, Y) @ B`` of a kernel matrix and a block, a block of kernel rows at a time.

    The oracle of the core's matrix-free product: no more than a block of rows of
    the kernel matrix exists at any time.

    Parameters
    ----------
    X : array-like of shape (n_samples_X, n_features)
        First set of samples.
    Y : array-like of shape (n_samples_Y, n_features) or None
        Second set of samples. ``None`` means ``Y = X`` (with the exact
        diagonal of :func:`kernel_matrix`).
    B : array-like of shape (n_samples_Y, b)
        Finite block, ``b >= 1`` columns (``n_samples_X`` rows when Y is None).
    kernel, gamma, degree, coef0 : as in :func:`kernel_matrix`
    n_threads : int, default=None
        BLAS threads for the call (None: as they are; -1: all cores).

    Returns
    -------
    ndarray of shape (n_samples_X, b)
        float32 when all the inputs are float32 and float64 otherwise, computed
        in float64.

    Raises
    ------
    ValueError
        As :func:`kernel_matrix`, and when B's shape does not fit or the product
        overflows the output dtype.
    """
    with blas_threads(n_threads):
        name = _kernel_name(kernel)
        arrays, out_dtype = _kernel_operands({"X": X, "Y": Y, "B": B})
        X, Y, B = arrays["X"], arrays["Y"], arrays["B"]
        n_y = X.shape[0] if Y is None else Y.shape[0]
        if B.shape[0] != n_y:
            rows = "n_samples_X" if Y is None else "n_samples_Y"
            raise ValueError(f"B: must have shape ({rows}, b) = ({n_y}, b), got {B.shape}")
        gamma, degree, coef0 = _kernel_parameters(name, gamma, degree, coef0, X.shape[1])
        # As in kernel_matrix, check_fits reports what went wrong.
        with np.errstate(all="ignore"):
            values = _kernel_blocks(name, X, Y, gamma, degree, coef0, out_dtype)

            def block(rows, stop):
                K_rows = values(rows, n_y)
                check_fits(K_rows, name, out_dtype)
                return check_fits(K_rows @ B, name, out_dtype, what="kernel product")

            # Blocks sized by their kernel rows and products, the largest temporaries.
            return blockwise(X.shape[0], B.shape[1], block, out_dtype, row_bytes=8 * (n_y + B.shape[1]))


def _gradient_terms(name, X_rows, Y, y_norms, gamma, degree, coef0):
    """d/dx k(x, Y[j]) at x = X_rows[i], of shape (rows, n_y, d), in float64."""
    if name == "linear":
        return np.broadcast_to(Y[None, :, :], (X_rows.shape[0],) + Y.shape)
    if name in ("rbf", "laplacian"):
        diff = X_rows[:, None, :] - Y[None, :, :]
        if name == "rbf":
            k = np.exp(-gamma * np.sum(diff**2, axis=2))
            return -2.0 * gamma * k[:, :, None] * diff
        k = np.exp(-gamma * np.sum(np.abs(diff), axis=2))
        return -gamma * k[:, :, None] * np.sign(diff)
    dot = X_rows @ Y.T
    if name == "poly":
        base = gamma * dot + coef0
        _check_degree_base(base, degree)
        # A constant kernel (degree 0) has zero gradient, also where the base vanishes.
        factor = degree * gamma * base ** (degree - 1) if degree != 0 else np.zeros_like(base)
        return factor[:, :, None] * Y[None, :, :]
    nx, ny = _squared_norms(X_rows)[:, None], y_norms[None, :]
    if name == "cosine":
        norms = np.sqrt(nx * ny)
        safe = np.where(norms > 0, norms, 1.0)
        k = np.where(norms > 0, dot / safe, 0.0)
        x_term = np.where(nx > 0, k / np.where(nx > 0, nx, 1.0), 0.0)
        return (
            np.where(norms > 0, 1.0 / safe, 0.0)[:, :, None] * Y[None, :, :] - x_term[:, :, None] * X_rows[:, None, :]
        )
    # tanimoto: k = s / D with D = |x|^2 + |y|^2 - s
    denom = nx + ny - dot
    inv_sq = np.where(denom > 0, 1.0 / np.where(denom > 0, denom, 1.0) ** 2, 0.0)
    return ((nx + ny) * inv_sq)[:, :, None] * Y[None, :, :] - (2.0 * dot * inv_sq)[:, :, None] * X_rows[:, None, :]


def kernel_gradient(X, Y, W, kernel="rbf", gamma=None, degree=3, coef0=1.0, n_threads=None):
    """Weighted gradients of a kernel with respect to its first argument.

    ``G[i] = sum_j W[i, j] * d/dx k(x, Y[j])`` at ``x = X[i]``; laplacian uses the subgradient with
    sign(0) = 0.

    Parameters
    ----------
    X : array-like of shape (n_x, d)
    Y : array-like of shape (n_y, d)
    W : array-like of shape (n_x, n_y)
        Finite, non-empty arrays.
    kernel, gamma, degree, coef0 : as in :func:`kernel_matrix`
    n_threads : int, default=None
        BLAS threads for the call (None: as they are; -1: all cores).

    Returns
    -------
    ndarray of shape (n_x, d), float32 when the inputs are float32 and float64 otherwise, computed in
    float64.

    Raises
    ------
    ValueError
        As :func:`kernel_matrix`, and when W's shape is not (n_x, n_y) or the gradient overflows.
    """
    with blas_threads(n_threads):
        name = _kernel_name(kernel)
        arrays, out_dtype = _kernel_operands({"X": X, "Y": Y, "W": W})
        X, Y, W = arrays["X"], arrays["Y"], arrays["W"]
        if W.shape != (X.shape[0], Y.shape[0]):
            raise ValueError(f"W: must have shape {(X.shape[0], Y.shape[0])}, got {W.shape}")
        gamma, degree, coef0 = _kernel_parameters(name, gamma, degree, coef0, X.shape[1])
        y_norms = _squared_norms(Y)

        def block(rows, stop):
            terms = _gradient_terms(name, X[rows], Y, y_norms, gamma, degree, coef0)
            return check_fits(np.einsum("ij,ijd->id", W[rows], terms), name, out_dtype, what="kernel gradient")

        # As in kernel_matrix, check_fits reports what went wrong.
        with np.errstate(all="ignore"):
            # Blocks sized by their (rows, n_y, d) pairwise terms, the largest temporaries.
            return blockwise(X.shape[0], X.shape[1], block, out_dtype, row_bytes=8 * Y.shape[0] * X.shape[1])
