"""Pure NumPy/SciPy reference implementations of the ``rkm._core`` routines.

This module is the NumPy twin of the compiled extension ``rkm._core``: every
public function here has the same name, signature and output convention as
its C++ counterpart, and validates its arguments as the core's Python layer
does.  It is written for clarity and correctness rather than speed, and
serves as the oracle the compiled core is tested against.

Conventions shared with the core
--------------------------------
* Floating outputs keep the dtype of the main input when it is ``float32`` or
  ``float64`` (kernels: float32 when all their array inputs are float32);
  all arithmetic is carried out in ``float64``.
* Eigenvalues are returned in descending order and every eigenvector is
  oriented so that its entry of largest absolute value is positive (the first
  such entry on ties), which makes eigenvectors comparable across solvers.
* Bad input raises ``ValueError`` (``TypeError`` for the wrong kind of array
  in the in-place routines) whose message starts with the argument's name.
  Inputs must not hold NaN or infinity, and a kernel matrix that comes out
  non-finite is an error, not a result.
* ``n_threads`` (None, a positive count, or negative: -1 = all cores) limits
  the BLAS library's threads for the duration of the call; None leaves them
  as they are.

Products run a block of rows at a time (:func:`_blockwise`): that bounds the
temporaries by the block rather than the whole matrix, and it never hands
NumPy the product of a large matrix with its own transpose, which NumPy sends
to BLAS's SYRK routine, whose multi-threaded OpenBLAS version crashes on some
large inputs (e.g. ``X @ X.T`` for X of shape (20000, 256), float64).
"""

import contextlib
import numbers
import os

import numpy as np
import scipy.linalg
from scipy.spatial.distance import cdist
from threadpoolctl import threadpool_limits

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
_ALIASES = {"polynomial": "poly", "gaussian": "rbf"}
_GAMMA_KERNELS = ("poly", "rbf", "laplacian")

# Float64 bytes of one block of rows (products, or the gradient's pairwise differences). At most
# _MAX_BLOCK_ROWS rows: a block is then never a whole large matrix, so NumPy's SYRK path (the product of
# a matrix with its own transpose) only ever sees at most that many rows.
_BLOCK_BYTES = 32 << 20
_MAX_BLOCK_ROWS = 1024
# Rows and columns of the square tiles in which a lower triangle is mirrored.
_MIRROR_TILE = 256


# --------------------------------------------------------------------------
# validation and threads
# --------------------------------------------------------------------------

def _check_n_threads(n_threads):
    """Validate the n_threads knob (None, k > 0, or -k for all cores but k - 1)."""
    if n_threads is None:
        return None
    if isinstance(n_threads, bool) or not isinstance(n_threads, numbers.Integral) or n_threads == 0:
        raise ValueError(
            f"n_threads: must be None, a positive int, or negative (-1 = all cores), got {n_threads!r}"
        )
    return int(n_threads)


@contextlib.contextmanager
def _blas_threads(n_threads):
    """Validate n_threads and limit the BLAS threads to it for the duration (None: leave them)."""
    n_threads = _check_n_threads(n_threads)
    if n_threads is None:
        yield
        return
    count = n_threads if n_threads > 0 else max(1, (os.cpu_count() or 1) + 1 + n_threads)
    with threadpool_limits(limits=count, user_api="blas"):
        yield


def _check_finite(A, name):
    # min and max propagate NaN and expose infinities without a boolean temporary of A's size.
    if A.size and A.dtype.kind == "f" and not (np.isfinite(A.min()) and np.isfinite(A.max())):
        raise ValueError(f"{name}: contains NaN or infinity")


def _real_matrix(A, name, *, min_rows=1, min_cols=1, finite=True):
    """A as a 2-D ndarray of real numbers, with at least the given size and (if `finite`) no NaN or infinity."""
    A = np.asarray(A)
    if A.dtype.kind not in "biuf":
        raise ValueError(f"{name}: must hold real numbers, got dtype {A.dtype}")
    if A.ndim != 2:
        raise ValueError(f"{name}: must be a 2-D array, got shape {A.shape}")
    if A.shape[0] < min_rows or A.shape[1] < min_cols:
        raise ValueError(f"{name}: needs at least {min_rows} row(s) and {min_cols} column(s), got shape {A.shape}")
    if finite:
        _check_finite(A, name)
    return A


def _check_square(A, name):
    if A.shape[0] != A.shape[1]:
        raise ValueError(f"{name}: must be square, got shape {A.shape}")


def _check_float_ndarray(A, name):
    # In-place routines need a floating array to write centred values into.
    if not isinstance(A, np.ndarray) or A.dtype not in (np.float32, np.float64):
        kind = A.dtype if isinstance(A, np.ndarray) else type(A).__name__
        raise TypeError(f"{name}: must be a float32 or float64 ndarray, got {kind}")


def _finite_number(value, name, *, positive=False):
    valid = not isinstance(value, bool) and isinstance(value, numbers.Real) and np.isfinite(value)
    if not valid or (positive and value <= 0):
        kind = "a positive finite number" if positive else "a finite number"
        raise ValueError(f"{name}: must be {kind}, got {value!r}")
    return float(value)


def _int_in_range(value, name, low, high=None):
    valid = not isinstance(value, bool) and isinstance(value, numbers.Integral)
    if not valid or value < low or (high is not None and value > high):
        bounds = f">= {low}" if high is None else f"between {low} and {high}"
        raise ValueError(f"{name}: must be an int {bounds}, got {value!r}")
    return int(value)


def _output_dtype(a):
    """Return ``a.dtype`` if it is float32/float64, else float64."""
    if a.dtype in (np.float32, np.float64):
        return a.dtype
    return np.dtype(np.float64)


# --------------------------------------------------------------------------
# row blocks
# --------------------------------------------------------------------------

def _row_blocks(n_rows, row_bytes):
    """Slices covering range(n_rows), each of at most _MAX_BLOCK_ROWS rows and about _BLOCK_BYTES."""
    step = int(np.clip(_BLOCK_BYTES // max(row_bytes, 1), 1, _MAX_BLOCK_ROWS))
    return [slice(start, min(start + step, n_rows)) for start in range(0, n_rows, step)]


def _blockwise(n_rows, n_cols, block, dtype, *, lower=False, row_bytes=None):
    """Assemble an (n_rows, n_cols) array of `dtype` a block of rows at a time.

    ``block(rows, stop)`` returns the float64 values of ``rows`` in columns ``0:stop``: all columns, or with
    ``lower=True`` (square results) those up to the block's last row, the upper triangle then being mirrored
    from the lower one. `row_bytes` (default: a float64 row) sizes the blocks.
    """
    out = np.empty((n_rows, n_cols), dtype)
    for rows in _row_blocks(n_rows, 8 * n_cols if row_bytes is None else row_bytes):
        stop = rows.stop if lower else n_cols
        out[rows, :stop] = block(rows, stop)
    if lower:
        _mirror_lower(out)
    return out


def _products(A, B, dtype=np.float64):
    """``A @ B.T`` computed in float64 a block of A's rows at a time, stored in `dtype`."""
    B = np.asarray(B, dtype=np.float64)
    # Blocks are sized by their rows of A (cast to float64) and of the result.
    return _blockwise(A.shape[0], B.shape[0], lambda rows, stop: np.asarray(A[rows], np.float64) @ B.T, dtype,
                      row_bytes=8 * (A.shape[1] + B.shape[0]))


def _mirror_lower(S):
    """Overwrite the strict upper triangle of the square S with the transpose of its strict lower triangle."""
    # Square tiles keep each transposed copy within the caches: long strips cost one TLB miss per element.
    n = S.shape[0]
    for r0 in range(0, n, _MIRROR_TILE):
        r1 = min(r0 + _MIRROR_TILE, n)
        diagonal = S[r0:r1, r0:r1]
        diagonal[...] = np.tril(diagonal) + np.tril(diagonal, -1).T
        for c0 in range(r1, n, _MIRROR_TILE):
            c1 = min(c0 + _MIRROR_TILE, n)
            S[r0:r1, c0:c1] = S[c0:c1, r0:r1].T


def _symmetric_from_lower(A):
    """The float64 symmetric matrix whose lower triangle is that of the square A."""
    S = np.array(A, dtype=np.float64)
    _mirror_lower(S)
    return S


# --------------------------------------------------------------------------
# kernels
# --------------------------------------------------------------------------

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
        gamma = 1.0 / n_features if gamma is None else _finite_number(gamma, "gamma", positive=name != "poly")
    if name == "poly":
        valid = not isinstance(degree, bool) and isinstance(degree, numbers.Real) and np.isfinite(degree)
        if not valid or degree < 0:
            raise ValueError(f"degree: must be a non-negative number, got {degree!r}")
        coef0 = _finite_number(coef0, "coef0")
    return gamma, degree, coef0


def _kernel_operands(arrays):
    """The named 2-D arrays (None stays None) as float64, checked, and the output dtype of the result.

    The output dtype is the common float dtype of the inputs (float32 only when all are float32); the first
    array is X, whose feature count the one named Y must match.
    """
    checked = {name: None if A is None else _real_matrix(A, name) for name, A in arrays.items()}
    X, Y = checked["X"], checked.get("Y")
    if Y is not None and Y.shape[1] != X.shape[1]:
        raise ValueError(f"Y: has {Y.shape[1]} features but X has {X.shape[1]}")
    dtype = np.result_type(*(_output_dtype(A) for A in checked.values() if A is not None))
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


def _overflow_error(name, dtype, what="kernel"):
    remedy = "scale the inputs down" + (" or use float64" if np.dtype(dtype) == np.float32 else "")
    return ValueError(
        f"X: the {name} {what} overflows {np.dtype(dtype).name} (some entries are infinite or NaN); {remedy}"
    )


def _check_fits(values, name, dtype, what="kernel"):
    """Raise when float64 `values` hold NaN or infinity, or do not fit `dtype`; return them cast to it."""
    stored = values.astype(dtype, copy=False)
    if stored.size and not (np.isfinite(stored.min()) and np.isfinite(stored.max())):
        raise _overflow_error(name, dtype, what)
    return stored


def _unit_rows(A, name, dtype):
    # Zero rows stay zero, so their cosine similarity with anything is 0.
    norms = np.linalg.norm(A, axis=1)
    if not np.all(np.isfinite(norms)):
        raise _overflow_error(name, dtype)
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
        raise _overflow_error(name, dtype)

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
    with _blas_threads(n_threads):
        name = _kernel_name(kernel)
        arrays, out_dtype = _kernel_operands({"X": X, "Y": Y})
        X, Y = arrays["X"], arrays["Y"]
        gamma, degree, coef0 = _kernel_parameters(name, gamma, degree, coef0, X.shape[1])
        n_y = X.shape[0] if Y is None else Y.shape[0]
        # Overflow shows up as NaN or infinity in the result, which _check_fits turns into an error.
        with np.errstate(all="ignore"):
            values = _kernel_blocks(name, X, Y, gamma, degree, coef0, out_dtype)
            return _blockwise(X.shape[0], n_y, lambda rows, stop: _check_fits(values(rows, stop), name, out_dtype),
                              out_dtype, lower=Y is None)


# --------------------------------------------------------------------------
# centring
# --------------------------------------------------------------------------

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
    with _blas_threads(n_threads):
        _check_float_ndarray(K, "K")
        _real_matrix(K, "K", min_rows=0, min_cols=0, finite=False)
        _check_square(K, "K")
        source = _symmetric_from_lower(K) if lower_only else K
        _check_finite(source, "K")
        column_means = source.mean(axis=0, dtype=np.float64)
        row_means = source.mean(axis=1, dtype=np.float64)
        grand_mean = float(column_means.mean()) if column_means.size else 0.0
        for rows in _row_blocks(K.shape[0], 8 * K.shape[1]):
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
    with _blas_threads(n_threads):
        _check_float_ndarray(K_rows, "K_rows")
        _real_matrix(K_rows, "K_rows", min_rows=0, min_cols=0)
        column_means = np.asarray(column_means)
        if column_means.dtype.kind not in "biuf" or column_means.shape != (K_rows.shape[1],):
            raise ValueError(
                f"column_means: must hold {K_rows.shape[1]} real numbers (one per column of K_rows), got "
                f"shape {column_means.shape} and dtype {column_means.dtype}"
            )
        _check_finite(column_means, "column_means")
        grand_mean = _finite_number(grand_mean, "grand_mean")
        column_means = column_means.astype(np.float64)
        for rows in _row_blocks(K_rows.shape[0], 8 * K_rows.shape[1]):
            work = K_rows[rows].astype(np.float64)
            work -= work.mean(axis=1)[:, None]
            work -= column_means[None, :]
            work += grand_mean
            K_rows[rows] = work


# --------------------------------------------------------------------------
# eigensolvers
# --------------------------------------------------------------------------

def _fix_signs(V):
    """Flip columns of V in place so their largest-magnitude entry is positive."""
    if V.size == 0:
        return V
    rows = np.argmax(np.abs(V), axis=0)  # first maximum on ties
    signs = np.sign(V[rows, np.arange(V.shape[1])])
    V *= signs[None, :]
    return V


def _square_matrix(A, name):
    A = _real_matrix(A, name, min_rows=0, min_cols=0)
    _check_square(A, name)
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
    with _blas_threads(n_threads):
        A = _square_matrix(A, "A")
        out_dtype = _output_dtype(A)
        w, V = scipy.linalg.eigh(A.astype(np.float64, copy=False))
    w = np.ascontiguousarray(w[::-1], dtype=out_dtype)
    V = np.ascontiguousarray(V[:, ::-1], dtype=out_dtype)
    return w, _fix_signs(V)


def _default_tol(dtype):
    return 1e-4 if dtype == np.float32 else 1e-10


def _check_solver_arguments(n, n_components, start, tol, max_iter):
    """Validate the iterative solver's arguments for an operator of order n; return n_components and tol."""
    n_components = _int_in_range(n_components, "n_components", 1, n)
    start = _real_matrix(start, "start", min_rows=0, min_cols=0, finite=False)
    if start.shape[0] != n or start.shape[1] < 1:
        raise ValueError(f"start: must have shape ({n}, b) with b >= 1, got {start.shape}")
    _check_finite(start, "start")
    if tol is not None:
        tol = _finite_number(tol, "tol", positive=True)
    if max_iter is not None:
        _int_in_range(max_iter, "max_iter", 1)
    return n_components, tol


def top_eigsh(A, n_components, start, tol=None, max_iter=None,
              n_threads=None):
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
    with _blas_threads(n_threads):
        A = _square_matrix(A, "A")
        n = A.shape[0]
        n_components, tol = _check_solver_arguments(n, n_components, start, tol, max_iter)
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
        residuals = np.linalg.norm(_products(A64, V64.T) - V64 * w64[None, :], axis=0) / scale
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
    n = _int_in_range(n, "n", 1)
    with _blas_threads(n_threads):
        _check_solver_arguments(n, n_components, start, tol, max_iter)
        start = np.asarray(start)
        A = np.asarray(matmat(np.eye(n, dtype=start.dtype)))
    if A.shape != (n, n):
        raise ValueError(f"matmat: must return an array of shape (n, b) for an (n, b) block, got {A.shape}")
    if A.dtype.kind not in "biuf":
        raise ValueError(f"matmat: must return real numbers, got dtype {A.dtype}")
    _check_finite(A, "matmat")
    A = (A + A.T) / 2
    return top_eigsh(A, n_components, start, tol=tol, max_iter=max_iter,
                     n_threads=n_threads)


# --------------------------------------------------------------------------
# products
# --------------------------------------------------------------------------

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
    with _blas_threads(n_threads):
        A = _real_matrix(A, "A", min_rows=0, min_cols=0, finite=not symmetric)
        X = _real_matrix(X, "X", min_rows=0, min_cols=0)
        if symmetric:
            _check_square(A, "A")
        if A.shape[1] != X.shape[0]:
            raise ValueError(f"X: must have as many rows as A has columns ({A.shape[1]}), got {X.shape[0]}")
        out_dtype = _output_dtype(A)
        if symmetric:
            A = _symmetric_from_lower(A)
            _check_finite(A, "A")
        return _products(A, X.T, out_dtype)


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
    with _blas_threads(n_threads):
        A = _real_matrix(A, "A", min_rows=0, min_cols=0)
        B = _real_matrix(B, "B", min_rows=0, min_cols=0)
        if A.shape[0] != B.shape[0]:
            raise ValueError(f"B: must have as many rows as A ({A.shape[0]}), got {B.shape[0]}")
        return _products(A.T, B.T, _output_dtype(A))


# --------------------------------------------------------------------------
# kernel gradients
# --------------------------------------------------------------------------

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
        return (np.where(norms > 0, 1.0 / safe, 0.0)[:, :, None] * Y[None, :, :]
                - x_term[:, :, None] * X_rows[:, None, :])
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
    with _blas_threads(n_threads):
        name = _kernel_name(kernel)
        arrays, out_dtype = _kernel_operands({"X": X, "Y": Y, "W": W})
        X, Y, W = arrays["X"], arrays["Y"], arrays["W"]
        if W.shape != (X.shape[0], Y.shape[0]):
            raise ValueError(f"W: must have shape {(X.shape[0], Y.shape[0])}, got {W.shape}")
        gamma, degree, coef0 = _kernel_parameters(name, gamma, degree, coef0, X.shape[1])
        y_norms = _squared_norms(Y)

        def block(rows, stop):
            terms = _gradient_terms(name, X[rows], Y, y_norms, gamma, degree, coef0)
            return _check_fits(np.einsum("ij,ijd->id", W[rows], terms), name, out_dtype, what="kernel gradient")

        # As in kernel_matrix, _check_fits reports what went wrong.
        with np.errstate(all="ignore"):
            # Blocks sized by their (rows, n_y, d) pairwise terms, the largest temporaries.
            return _blockwise(X.shape[0], X.shape[1], block, out_dtype, row_bytes=8 * Y.shape[0] * X.shape[1])
