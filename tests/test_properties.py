"""Property-based tests of the public API.

The contract: every call either returns results of the documented shape and dtype, all finite, or raises a
documented exception (ValueError, TypeError or MemoryError; scikit-learn's NotFittedError before ``fit``) —
never a crash, a hang, another exception or silent non-finite output. The inputs span shapes (empty, one
sample or feature, 1-D and 3-D), dtypes, memory layouts, values (NaN, infinities, values that overflow when
squared or summed, tiny and subnormal ones, constant and duplicated rows) and hyperparameters (zero,
negative, non-finite, non-integer, of the wrong type).

The compiled core trusts its callers on argument values (the Python layer validates them), so for ``_core``
the finiteness half of the contract applies to finite data with valid hyperparameters; other input must
still give a documented exception or results of the right shape, never a crash. Linear-algebra routines
(products, eigensolvers, centring) owe finite results only where the exact result is representable.

The number of examples comes from the hypothesis profile registered in tests/conftest.py: "ci" (the default)
draws the same examples on every run; ``--hypothesis-profile=thorough`` searches longer with fresh ones.
"""

import contextlib
import faulthandler
import functools
import math
import sys

import numpy as np
import pytest
from hypothesis import event, example, given
from hypothesis import strategies as st
from sklearn.exceptions import NotFittedError

from rkm import KernelPCA, _core
from rkm.kernels import (
    KERNEL_NAMES,
    RBF,
    Cosine,
    Laplacian,
    Linear,
    Polynomial,
    Tanimoto,
    kernel_gradient,
    kernel_matrix,
)

DOCUMENTED_ERRORS = (ValueError, TypeError, MemoryError)
# A single example taking this long has hung: dump every thread's stack and end the run rather than wait.
WATCHDOG_SECONDS = 120

# Names the API accepts as aliases, and names it must reject.
OTHER_KERNEL_NAMES = ("polynomial", "gaussian", "sigmoid", "RBF", "", "precomputed")

# Values that break naive arithmetic: non-finite ones, ones that overflow float32 or float64 when squared or
# summed, and tiny or subnormal ones (float64 and float32).
SPECIAL_VALUES = (
    math.nan,
    math.inf,
    -math.inf,
    0.0,
    -0.0,
    1e20,
    -1e20,
    3e38,
    1e150,
    -1e150,
    1e200,
    -1e200,
    1e300,
    1e-300,
    -1e-300,
    1e-310,
    5e-324,
    1e-40,
    1e-45,
)
# Scales of whole arrays, beyond 1: zero, tiny, huge.
UNUSUAL_SCALES = (0.0, 1e-300, 1e-30, 1e-3, 1e3, 1e20, 1e150, 1e200)
DISTRIBUTIONS = ("normal", "counts", "constant", "duplicates")
OTHER_DTYPES = (np.int64, np.int32, np.float16, np.bool_, np.complex128)
LAYOUTS = ("C", "F", "rows_strided", "cols_strided", "readonly", "list")

N_THREADS = (None, 1, 2, -1)
BAD_N_THREADS = (-2, -100, 0, True, 1.5, "2")
REAL_HYPERPARAMETERS = (0.0, -0.0, -1.0, math.nan, math.inf, -math.inf, 1e-300, 5e-324, 1e300, True, "0.5")


# ---------------------------------------------------------------------------------------------- the contract


@contextlib.contextmanager
def watchdog():
    """End the run with every thread's stack if the body hangs, even inside C++ (faulthandler's timer is a
    C thread that needs no GIL). The stacks go to the process's own stderr, which pytest may be capturing."""
    faulthandler.dump_traceback_later(WATCHDOG_SECONDS, exit=True, file=sys.__stderr__)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()


def contract(test):
    """Run each example under the watchdog; a documented exception ends it as a pass.

    Outcomes are recorded as hypothesis events (``--hypothesis-show-statistics``). NotFittedError is a
    ValueError, but only unfitted use may raise it, so it fails here.
    """

    @functools.wraps(test)
    def run(*args, **kwargs):
        with watchdog():
            try:
                test(*args, **kwargs)
            except NotFittedError:
                raise
            except DOCUMENTED_ERRORS as error:
                event(f"raised {outcome(error)}")
            else:
                event("returned")

    return run


def outcome(error):
    """The exception type and the head of its message (the argument it names, by the project's convention)."""
    return f"{type(error).__name__} ({str(error).split(':')[0][:40]})"


def check_result(name, result, shape, dtype, finite=True, lower_only=False):
    """Assert that a result is an array of the given shape and dtype, finite unless told otherwise."""
    assert isinstance(result, np.ndarray), f"{name}: returned {type(result).__name__}, not an ndarray"
    assert result.shape == shape, f"{name}: shape {result.shape}, expected {shape}"
    assert result.dtype == dtype, f"{name}: dtype {result.dtype}, expected {np.dtype(dtype)}"
    if finite:
        checked = np.tril(result) if lower_only else result
        bad = np.argwhere(~np.isfinite(checked))
        first = tuple(bad[0]) if bad.size else None
        assert bad.size == 0, f"{name}: {len(bad)} non-finite entries, the first {checked[first]} at {first}"


def is_finite(*inputs):
    """Whether every entry of every array-like input is a finite number (None counts as finite)."""
    for A in inputs:
        if A is None:
            continue
        try:
            values = np.asarray(A, dtype=np.complex128)
        except (TypeError, ValueError):
            return False
        if not np.isfinite(values).all():
            return False
    return True


def magnitude(A):
    """Largest absolute entry of an array (0 for an empty one)."""
    return float(np.abs(np.asarray(A)).max(initial=0.0))


def api_dtype(*inputs):
    """The dtype the Python API returns: float32 when every array input is float32, float64 otherwise."""
    arrays = [A for A in inputs if A is not None]
    return np.float32 if all(isinstance(A, np.ndarray) and A.dtype == np.float32 for A in arrays) else np.float64


def n_rows(A):
    """Rows of a 2-D array-like; 0 for anything else (used to size companion inputs and expected results)."""
    try:
        shape = np.shape(A)
    except ValueError:  # ragged nested lists
        return 0
    return shape[0] if len(shape) == 2 else 0


def n_cols(A):
    """Columns of a 2-D array-like; 1 for anything else."""
    try:
        shape = np.shape(A)
    except ValueError:
        return 1
    return shape[1] if len(shape) == 2 else 1


def valid_real(value, *, positive):
    """Whether a hyperparameter is a finite real number (and positive, where asked)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        return False
    return math.isfinite(value) and (value > 0 or not positive)


# ---------------------------------------------------------------------------------------------- strategies


def _cast(values, dtype):
    """values in dtype: integers rounded and clipped to their range, booleans where values are nonzero."""
    with np.errstate(all="ignore"):
        if np.dtype(dtype).kind in "iu":
            info = np.iinfo(dtype)
            return np.clip(np.nan_to_num(np.rint(values)), info.min, info.max).astype(dtype)
        if dtype is np.bool_:
            return values != 0
        return values.astype(dtype)


def _in_layout(A, layout):
    """A in a memory layout (or as nested lists); the strided ones are views into a larger buffer."""
    if layout == "F":
        return np.asfortranarray(A)
    if layout == "rows_strided" and A.ndim == 2:
        return np.repeat(A, 2, axis=0)[::2]
    if layout == "cols_strided" and A.ndim == 2:
        return np.repeat(A, 2, axis=1)[:, ::2]
    if layout == "readonly":
        A = A.copy()
        A.flags.writeable = False
        return A
    if layout == "list":
        return A.tolist()
    return np.ascontiguousarray(A)


def _base_values(draw, shape, structure, distribution):
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if structure == "data":
        if distribution == "counts":
            return rng.poisson(1.0, size=shape).astype(np.float64)
        if distribution == "constant":
            return np.full(shape, rng.normal())
        if distribution == "duplicates" and shape[0] > 1:
            return rng.normal(size=(2, shape[1]))[rng.integers(0, 2, size=shape[0])]
        return rng.normal(size=shape)
    n = shape[0]
    B = rng.normal(size=(n, n))
    if structure == "gram":  # positive semi-definite, rank up to 4
        F = rng.normal(size=(n, 4))
        return F @ F.T
    if structure == "symmetric":
        return (B + B.T) / 2
    return B


def sometimes(usual, unusual, one_in):
    """`usual`, or one time in `one_in` `unusual`; examples shrink towards `usual`."""
    return st.sampled_from([False] * (one_in - 1) + [True]).flatmap(lambda rare: unusual if rare else usual)


def sizes(high):
    """Sizes from 1 to high, one time in ten 0."""
    return sometimes(st.integers(1, high), st.just(0), 10)


@st.composite
def matrices(
    draw,
    rows,
    cols,
    dtypes=None,
    layouts=st.sampled_from(LAYOUTS),
    structure="data",
    poison=True,
    scaled=True,
    distributions=DISTRIBUTIONS,
):
    """2-D arrays (or lists) of data, or square matrices with structure "gram", "symmetric" or "general".

    One time in three the values are scaled by one of UNUSUAL_SCALES (when `scaled`), and one time in three
    up to three entries are replaced by SPECIAL_VALUES (when `poison`).
    """
    if not isinstance(structure, str):
        structure = draw(structure)
    n = draw(rows)
    shape = (n, n) if structure != "data" else (n, draw(cols))
    if dtypes is None:
        dtypes = sometimes(st.sampled_from((np.float64, np.float32)), st.sampled_from(OTHER_DTYPES), 4)
    dtype = draw(dtypes)
    values = _base_values(draw, shape, structure, draw(st.sampled_from(distributions)))
    if scaled:
        values *= draw(sometimes(st.just(1.0), st.sampled_from(UNUSUAL_SCALES), 3))
    entries = st.tuples(st.floats(0, 1, exclude_max=True), st.sampled_from(SPECIAL_VALUES))
    poisoned = draw(sometimes(st.just([]), st.lists(entries, min_size=1, max_size=3), 3)) if poison else []
    for position, value in poisoned:
        if values.size:
            values.flat[int(position * values.size)] = value
    return _in_layout(_cast(values, dtype), draw(layouts))


ILL_SHAPED = st.sampled_from(
    [
        np.zeros(0),
        np.arange(5.0),
        np.float64(3.0),
        np.ones((2, 2, 2)),
        [[1.0, 2.0], [3.0]],
        "abc",
        None,
        np.zeros((0, 0)),
        np.zeros((3, 0)),
        np.zeros((0, 3), dtype=np.float32),
        np.array([["a", "b"]]),
    ]
)


def inputs(rows, cols, **kwargs):
    """Mostly 2-D data from `matrices`, one time in ten something ill-shaped."""
    return sometimes(matrices(rows, cols, **kwargs), ILL_SHAPED, 10)


def reals(low, high, specials=REAL_HYPERPARAMETERS, one_in=10):
    """Ordinary values in [low, high], one time in `one_in` special ones."""
    return sometimes(st.floats(low, high), st.sampled_from(specials), one_in)


GAMMAS = st.one_of(st.none(), reals(1e-3, 10.0))
DEGREES = sometimes(
    st.integers(0, 5), st.sampled_from([2.5, 0.5, -1, -0.5, math.nan, math.inf, 1000, np.int64(3), True, "3"]), 10
)
COEF0S = reals(-2.0, 2.0, REAL_HYPERPARAMETERS + (1e200, -1e200))
THREADS = sometimes(st.sampled_from(N_THREADS), st.sampled_from(BAD_N_THREADS), 10)


@st.composite
def kernel_objects(draw):
    """Kernel instances; the dataclasses take any parameters and validate them when called."""
    kind = draw(st.sampled_from([RBF, Polynomial, Laplacian, Linear, Cosine, Tanimoto]))
    if kind is Polynomial:
        return Polynomial(degree=draw(DEGREES), gamma=draw(GAMMAS), coef0=draw(COEF0S))
    if kind in (RBF, Laplacian):
        return kind(gamma=draw(GAMMAS))
    return kind()


KERNELS = sometimes(
    st.one_of(st.sampled_from(KERNEL_NAMES), kernel_objects()), st.sampled_from(OTHER_KERNEL_NAMES + (None, 3)), 10
)

DATA = dict(rows=sizes(60), cols=sizes(8))


# ---------------------------------------------------------------------------------------------- rkm.kernels


@given(
    X=inputs(**DATA),
    Y=st.one_of(st.none(), inputs(sizes(20), sizes(8))),
    kernel=KERNELS,
    gamma=GAMMAS,
    degree=DEGREES,
    coef0=COEF0S,
    n_threads=THREADS,
    lower_only=st.booleans(),
)
# Found by this property: Y given without X.
@example(X=None, Y=np.ones((1, 1)), kernel="rbf", gamma=None, degree=3, coef0=1.0, n_threads=None, lower_only=False)
@contract
def test_kernel_matrix_is_finite_or_raises(X, Y, kernel, gamma, degree, coef0, n_threads, lower_only):
    K = kernel_matrix(X, Y, kernel, gamma, degree, coef0, n_threads, lower_only)
    n_y = n_rows(X) if Y is None else n_rows(Y)
    check_result("K", K, (n_rows(X), n_y), api_dtype(X, Y), lower_only=lower_only and Y is None)


@st.composite
def gradient_operands(draw):
    """(X, Y, W): Y with the features of X, W of shape (n_samples_X, n_samples_Y) one time in five not."""
    X = draw(inputs(sizes(30), sizes(8)))
    Y = draw(inputs(sizes(20), st.just(n_cols(X))))
    W = draw(inputs(sometimes(st.just(n_rows(X)), sizes(5), 5), st.just(n_rows(Y))))
    return X, Y, W


@given(operands=gradient_operands(), kernel=KERNELS, gamma=GAMMAS, degree=DEGREES, coef0=COEF0S, n_threads=THREADS)
# Found by this property: Y missing.
@example(
    operands=(np.ones((1, 1)), None, np.ones((1, 1))), kernel="rbf", gamma=None, degree=3, coef0=1.0, n_threads=None
)
@contract
def test_kernel_gradient_is_finite_or_raises(operands, kernel, gamma, degree, coef0, n_threads):
    X, Y, W = operands
    G = kernel_gradient(X, Y, W, kernel, gamma, degree, coef0, n_threads)
    check_result("G", G, (n_rows(X), n_cols(X)), api_dtype(X, Y, W))


BANDWIDTHS = reals(1e-3, 1e3, REAL_HYPERPARAMETERS + (1e-200, 1e200, 1e-320, 1e-308), one_in=5)


@given(
    # (sigma, sigma2): one of them, one time in ten both or neither.
    sigmas=sometimes(
        st.one_of(st.tuples(BANDWIDTHS, st.none()), st.tuples(st.none(), BANDWIDTHS)),
        st.tuples(st.none() | BANDWIDTHS, st.none() | BANDWIDTHS),
        10,
    ),
    convention=sometimes(st.sampled_from(["suykens", "gaussian"]), st.sampled_from(["sklearn", None]), 10),
    X=matrices(
        st.integers(1, 20),
        st.integers(1, 5),
        dtypes=st.just(np.float64),
        layouts=st.just("C"),
        poison=False,
        scaled=False,
    ),
)
# Found by this property: bandwidths whose square underflows or overflows, or whose inverse overflows.
@example(sigmas=(1e-300, None), convention="suykens", X=np.ones((2, 1)))
@example(sigmas=(1e200, None), convention="suykens", X=np.ones((2, 1)))
@example(sigmas=(None, 1e-320), convention="suykens", X=np.ones((2, 1)))
@contract
def test_rbf_from_sigma_gives_a_usable_kernel_or_raises(sigmas, convention, X):
    sigma, sigma2 = sigmas
    kernel = RBF.from_sigma(sigma, sigma2=sigma2, convention=convention)
    assert math.isfinite(kernel.gamma) and kernel.gamma > 0, f"from_sigma returned gamma={kernel.gamma!r}"
    check_result("K", kernel(X), (len(X), len(X)), np.float64)


def _ordinary(X):
    """X as an array with entries within [-4, 4] (dtype and memory layout kept)."""
    X = np.asarray(X)
    return X / max(magnitude(X), 1.0) * 4.0


@given(
    X=matrices(
        st.integers(1, 60),
        st.integers(1, 8),
        dtypes=st.sampled_from([np.float64, np.float32]),
        layouts=st.sampled_from(["C", "F", "list"]),
        poison=False,
        scaled=False,
    ),
    kernel=st.sampled_from(KERNEL_NAMES),
    gamma=st.one_of(st.none(), st.floats(1e-3, 10.0)),
    degree=st.integers(0, 5),
    coef0=st.floats(-2.0, 2.0),
    n_threads=st.sampled_from([None, 1, 2, -1]),
)
def test_kernel_matrix_accepts_ordinary_input(X, kernel, gamma, degree, coef0, n_threads):
    """Finite data of moderate size with valid hyperparameters never raises (the contract is not vacuous)."""
    X = _ordinary(X)
    with watchdog():
        K = kernel_matrix(X, X[:5], kernel, gamma, degree, coef0, n_threads)
        G = kernel_gradient(X, X[:5], np.ones_like(K), kernel, gamma, degree, coef0, n_threads)
    check_result("K", K, (len(X), min(5, len(X))), X.dtype)
    check_result("G", G, X.shape, X.dtype)


# ---------------------------------------------------------------------------------------------- rkm.KernelPCA

# Invalid kernel arguments one time in twenty, so that most examples get as far as the numerics.
PCA_KERNEL_PARAMS = dict(
    kernel=sometimes(
        st.one_of(st.sampled_from(KERNEL_NAMES), kernel_objects()), st.sampled_from(OTHER_KERNEL_NAMES), 20
    ),
    gamma=st.one_of(st.none(), reals(1e-3, 10.0, one_in=20)),
    degree=sometimes(st.integers(0, 5), st.sampled_from([2.5, -1, math.nan, 1000]), 20),
    coef0=reals(-2.0, 2.0, REAL_HYPERPARAMETERS + (1e200, -1e200), one_in=20),
)
# Each parameter is invalid one time in twenty.
PCA_PARAMS = dict(
    n_components=sometimes(
        st.one_of(st.none(), st.integers(1, 8)), st.sampled_from([0, -1, 61, 1.5, True, np.int64(2)]), 20
    ),
    eta=reals(0.1, 10.0, one_in=20),
    center=st.booleans(),
    solver=sometimes(st.sampled_from(["auto", "dense", "krylov"]), st.just("arpack"), 20),
    n_threads=sometimes(st.sampled_from(N_THREADS), st.sampled_from(BAD_N_THREADS), 20),
    random_state=st.integers(0, 2**32 - 1),
    tol=st.one_of(
        st.none(),
        sometimes(st.sampled_from([1e-10, 1e-4, 1e-300]), st.sampled_from([0.0, -1.0, math.nan, math.inf]), 20),
    ),
    max_iter=sometimes(st.sampled_from([None, 1, 3, 50]), st.sampled_from([0, -1, 2.5]), 20),
    scaling=sometimes(st.sampled_from(["hidden", "score", "sklearn"]), st.just("pca"), 20),
    preimage=sometimes(st.sampled_from(["auto", "fixed_point", "smoother", "ridge"]), st.just("none"), 20),
    n_neighbors=sometimes(st.sampled_from([10, 1, 3, 100]), st.just(0), 20),
    preimage_alpha=reals(1e-3, 10.0, one_in=20),
    preimage_max_iter=sometimes(st.sampled_from([100, 1, 10]), st.just(0), 20),
)
PCA_DEFAULTS = dict(
    n_components=None,
    eta=1.0,
    center=True,
    solver="auto",
    n_threads=None,
    random_state=0,
    tol=None,
    max_iter=None,
    scaling="hidden",
    preimage="auto",
    n_neighbors=10,
    preimage_alpha=1.0,
    preimage_max_iter=100,
)
# Projections come with more columns than any fitted model has; each test cuts them to the model's width.
MAX_COMPONENTS = 61


@st.composite
def fit_inputs(draw, precomputed=False):
    """(X, X_new, Z): training data (a Gram matrix when precomputed), new input of the width transform
    expects (one time in four one column more) and projections with MAX_COMPONENTS columns."""
    if precomputed:
        structures = st.sampled_from(["gram", "gram", "symmetric", "general"])
        X = draw(sometimes(matrices(sizes(60), None, structure=structures), ILL_SHAPED, 20))
        width = n_rows(X)
    else:
        X = draw(sometimes(matrices(sizes(60), sizes(8)), ILL_SHAPED, 20))
        width = n_cols(X)
    X_new = draw(inputs(sizes(10), sometimes(st.just(width), st.just(width + 1), 4)))
    Z = draw(inputs(sizes(10), st.just(MAX_COMPONENTS)))
    return X, X_new, Z


def _first_columns(Z, k):
    """The first k columns of a 2-D array or nested list; anything else unchanged."""
    if isinstance(Z, np.ndarray) and Z.ndim == 2:
        return Z[:, :k]
    if isinstance(Z, list) and n_rows(Z):
        return [row[:k] for row in Z]
    return Z


def _fit_dtype(X):
    return np.float32 if isinstance(X, np.ndarray) and X.dtype == np.float32 else np.float64


def _check_fitted(model, X, n_components):
    """The fitted state after fit(X): s eigenvalues and an (n, s) H_, finite, in the dtype of X."""
    s = model.eigenvalues_.shape[0]
    if isinstance(n_components, int) and not isinstance(n_components, bool):
        assert s == n_components, f"eigenvalues_: {s} components, asked for {n_components}"
    assert s <= n_rows(X), f"eigenvalues_: {s} components from {n_rows(X)} samples"
    check_result("eigenvalues_", model.eigenvalues_, (s,), _fit_dtype(X))
    check_result("H_", model.H_, (n_rows(X), s), _fit_dtype(X))
    return s


def _check_encodings(model, X, X_new, Z):
    """transform(X_new), inverse_transform(Z) and denoise(X_new) of a model fitted on X: each returns finite
    results of its shape or raises a documented exception."""
    s, d = model.eigenvalues_.shape[0], n_cols(X)
    calls = (
        ("transform", lambda: model.transform(X_new), (n_rows(X_new), s)),
        ("inverse_transform", lambda: model.inverse_transform(Z), (n_rows(Z), d)),
        ("denoise", lambda: model.denoise(X_new), (n_rows(X_new), d)),
    )
    for name, call, shape in calls:
        try:
            result = call()
        except NotFittedError:
            raise
        except DOCUMENTED_ERRORS as error:
            event(f"{name} raised {outcome(error)}")
            continue
        event(f"{name} returned")
        # transform follows the API's dtype rule; pre-images come back in a float dtype.
        dtype = api_dtype(X, X_new) if name == "transform" else result.dtype
        assert dtype in (np.float32, np.float64), f"{name}: dtype {dtype}"
        check_result(name, result, shape, dtype)


def _fit_and_encode(model, X, X_new, Z, fit_transform, z_extra):
    if fit_transform:
        projections = model.fit_transform(X)
    else:
        assert model.fit(X) is model
    s = _check_fitted(model, X, model.n_components)
    if fit_transform:
        check_result("fit_transform", projections, (n_rows(X), s), _fit_dtype(X))
    _check_encodings(model, X, X_new, _first_columns(Z, s + z_extra))


@given(
    data=fit_inputs(),
    fit_transform=st.booleans(),
    z_extra=st.sampled_from([0, 0, 0, 1]),
    **PCA_KERNEL_PARAMS,
    **PCA_PARAMS,
)
# Found by this property: a subnormal eta, by which the eigenvalues are divided.
@example(
    data=(np.ones((1, 1)), np.ones((1, 1)), np.ones((1, MAX_COMPONENTS))),
    fit_transform=False,
    z_extra=0,
    kernel="linear",
    gamma=None,
    degree=3,
    coef0=1.0,
    **{**PCA_DEFAULTS, "eta": 5e-324, "center": False},
)
@contract
def test_kernel_pca_is_finite_or_raises(data, fit_transform, z_extra, **params):
    _fit_and_encode(KernelPCA(**params), *data, fit_transform, z_extra)


@given(
    data=fit_inputs(precomputed=True),
    fit_transform=st.booleans(),
    z_extra=st.sampled_from([0, 0, 0, 1]),
    **{**PCA_PARAMS, "preimage": sometimes(st.just("auto"), st.sampled_from(["smoother", "ridge"]), 10)},
)
# Found by this property: a float32 Gram matrix whose eigenvalue / eta overflows float32; a subnormal
# eigenvalue that new kernel rows are divided by.
@example(
    data=(np.array([[3e38]], np.float32), np.ones((1, 1), np.float32), np.ones((1, MAX_COMPONENTS))),
    fit_transform=False,
    z_extra=0,
    **{**PCA_DEFAULTS, "eta": 0.5, "center": False},
)
@example(
    data=(np.array([[1e-310]]), np.array([[0.125]]), np.ones((1, MAX_COMPONENTS))),
    fit_transform=False,
    z_extra=0,
    **{**PCA_DEFAULTS, "center": False},
)
@contract
def test_precomputed_kernel_pca_is_finite_or_raises(data, fit_transform, z_extra, **params):
    _fit_and_encode(KernelPCA(kernel="precomputed", **params), *data, fit_transform, z_extra)


@given(
    X=matrices(
        st.integers(2, 60),
        st.integers(1, 8),
        dtypes=st.sampled_from([np.float64, np.float32]),
        layouts=st.sampled_from(["C", "F", "list"]),
        poison=False,
        scaled=False,
        distributions=("normal",),
    ),
    kernel=st.sampled_from(KERNEL_NAMES),
    n_components=st.one_of(st.none(), st.integers(1, 8)),
    solver=st.sampled_from(["auto", "dense", "krylov"]),
    scaling=st.sampled_from(["hidden", "score", "sklearn"]),
    preimage=st.sampled_from(["auto", "smoother", "ridge"]),
    center=st.booleans(),
    new_as=st.sampled_from(["same", "float64", "float32", "list"]),
)
# Found by this property: float32 training data with float64 new data; a model left with no component.
@example(
    X=np.array([[0.5], [-0.5], [1.0]], np.float32),
    kernel="rbf",
    n_components=1,
    solver="auto",
    scaling="hidden",
    preimage="auto",
    center=True,
    new_as="float64",
)
@example(
    X=np.array([[1.0], [2.0], [3.0]]),
    kernel="cosine",
    n_components=None,
    solver="auto",
    scaling="hidden",
    preimage="ridge",
    center=True,
    new_as="same",
)
def test_kernel_pca_accepts_ordinary_input(X, kernel, n_components, solver, scaling, preimage, center, new_as):
    """Gaussian samples of moderate size with valid hyperparameters never raise (the contract is not vacuous),
    whatever float dtype or list the new data comes in."""
    X = _ordinary(X)
    n_components = None if n_components is None else min(n_components, len(X))
    model = KernelPCA(
        n_components,
        kernel=kernel,
        gamma=0.5,
        degree=2,
        solver=solver,
        scaling=scaling,
        preimage=preimage,
        center=center,
        random_state=0,
    )
    m = min(7, len(X))
    X_new = X[:m] if new_as == "same" else X[:m].tolist() if new_as == "list" else X[:m].astype(new_as)
    with watchdog():
        Z = model.fit_transform(X)
        s = _check_fitted(model, X, n_components)
        check_result("fit_transform", Z, (len(X), s), X.dtype)
        check_result("transform", model.transform(X_new), (m, s), api_dtype(X, X_new))
        check_result("inverse_transform", model.inverse_transform(Z[:m]), (m, X.shape[1]), X.dtype)
        denoised = model.denoise(X_new)
        # Pre-images of new data in another dtype may come back in either float dtype.
        same_dtype = isinstance(X_new, np.ndarray) and X_new.dtype == X.dtype
        check_result("denoise", denoised, (m, X.shape[1]), X.dtype if same_dtype else denoised.dtype)
        assert denoised.dtype in (np.float32, np.float64), f"denoise: dtype {denoised.dtype}"


@given(
    method=st.sampled_from(["transform", "inverse_transform", "denoise"]),
    X=inputs(sizes(10), sizes(8)),
    kernel=KERNELS,
)
def test_unfitted_kernel_pca_raises_not_fitted(method, X, kernel):
    with watchdog(), pytest.raises(NotFittedError):
        getattr(KernelPCA(kernel=kernel), method)(X)


# ---------------------------------------------------------------------------------------------- rkm._core

CORE_DTYPES = sometimes(
    st.sampled_from((np.float64, np.float32)), st.sampled_from((np.int64, np.float16, np.complex128)), 10
)
CORE_THREADS = sometimes(st.sampled_from((None, 1, 2, -1)), st.sampled_from((-5, 0)), 10)
SQUARE_STRUCTURES = st.sampled_from(["gram", "symmetric", "general"])
CORE_KERNELS = sometimes(st.sampled_from(KERNEL_NAMES), st.sampled_from(["gaussian", "sigmoid"]), 8)
CORE_KERNEL_PARAMS = dict(
    gamma=st.one_of(st.none(), reals(1e-3, 10.0)),
    degree=st.one_of(st.integers(0, 5), reals(0.0, 5.0)),
    coef0=reals(-2.0, 2.0),
    n_threads=CORE_THREADS,
)


def core_matrices(rows, cols=None, structure="data", like=None):
    """Arrays for the core: mostly C-contiguous float64/float32, in the dtype of `like` where given."""
    dtypes = CORE_DTYPES
    if isinstance(like, np.ndarray) and like.dtype in (np.float32, np.float64):
        dtypes = sometimes(st.just(like.dtype.type), CORE_DTYPES, 5)
    layouts = sometimes(st.just("C"), st.sampled_from(LAYOUTS), 5)
    return matrices(rows, cols, dtypes=dtypes, layouts=layouts, structure=structure)


def representable(dtype, bound):
    """Whether a result bounded by `bound` in magnitude is comfortably representable in float dtype."""
    return np.dtype(dtype).kind == "f" and bound < np.finfo(dtype).max / 16


def _contiguous(A):
    return None if A is None else np.ascontiguousarray(A)


def _core_kernel_valid(kernel, gamma, degree, coef0):
    """Whether the arguments are ones the Python layer passes on to the core."""
    gamma_ok = gamma is None or valid_real(gamma, positive=kernel != "poly")
    degree_ok = valid_real(degree, positive=False) and degree >= 0
    return kernel in KERNEL_NAMES and gamma_ok and degree_ok and valid_real(coef0, positive=False)


def _tolerance(dtype, scale):
    eps = np.finfo(dtype).eps
    return dict(rtol=64 * eps, atol=64 * eps * scale)


@st.composite
def core_kernel_operands(draw, max_rows, cross):
    """(X, Y, W): Y (None one time in two unless `cross`) with the features of X, and W of shape
    (n_samples_X, n_samples_Y); one time in ten Y has a feature more or W a row too few."""
    X = draw(core_matrices(sizes(max_rows), sizes(8)))
    d = n_cols(X)
    with_y = cross or draw(st.booleans())
    Y = draw(core_matrices(sizes(40), sometimes(st.just(d), st.just(d + 1), 10), like=X)) if with_y else None
    W = (
        draw(
            core_matrices(sometimes(st.just(n_rows(X)), st.just(max(n_rows(X) - 1, 0)), 10), st.just(n_rows(Y)), like=X)
        )
        if with_y
        else None
    )
    return X, Y, W


@given(
    operands=core_kernel_operands(200, cross=False), kernel=CORE_KERNELS, lower_only=st.booleans(), **CORE_KERNEL_PARAMS
)
@contract
def test_core_kernel_matrix_is_finite_or_raises(operands, kernel, gamma, degree, coef0, n_threads, lower_only):
    X, Y, _ = operands
    K = _core.kernel_matrix(X, Y, kernel, gamma, degree, coef0, n_threads, lower_only)
    finite = is_finite(X, Y) and _core_kernel_valid(kernel, gamma, degree, coef0)
    triangle = lower_only and Y is None
    check_result("K", K, (len(X), len(X) if Y is None else len(Y)), X.dtype, finite, triangle)
    # Strided and read-only views give the results of contiguous copies.
    expected = _core.kernel_matrix(_contiguous(X), _contiguous(Y), kernel, gamma, degree, coef0, n_threads, lower_only)
    keep = np.tril(np.ones(K.shape, bool)) if triangle else np.ones(K.shape, bool)
    np.testing.assert_allclose(K[keep], expected[keep], **_tolerance(K.dtype, magnitude(expected[keep])))


@given(operands=core_kernel_operands(60, cross=True), kernel=CORE_KERNELS, **CORE_KERNEL_PARAMS)
@contract
def test_core_kernel_gradient_is_finite_or_raises(operands, kernel, gamma, degree, coef0, n_threads):
    X, Y, W = operands
    G = _core.kernel_gradient(X, Y, W, kernel, gamma, degree, coef0, n_threads)
    finite = is_finite(X, Y, W) and _core_kernel_valid(kernel, gamma, degree, coef0)
    check_result("G", G, X.shape, X.dtype, finite)


@given(
    K=core_matrices(sizes(200), structure=SQUARE_STRUCTURES),
    n_threads=CORE_THREADS,
    lower_only=st.booleans(),
    square=st.sampled_from([True, True, True, False]),
)
@contract
def test_core_center_kernel_is_finite_or_raises(K, n_threads, lower_only, square):
    if not square and isinstance(K, np.ndarray):
        K = K[:, : max(len(K) - 1, 0)]
    n, before = len(K), magnitude(K) if is_finite(K) else math.inf
    means, grand_mean = _core.center_kernel(K, n_threads, lower_only)
    finite = representable(K.dtype, 4 * n * before)
    check_result("column_means", means, (n,), K.dtype, finite)
    assert isinstance(grand_mean, float) and (math.isfinite(grand_mean) or not finite), f"grand_mean={grand_mean}"
    check_result("K (centred)", K, (n, n), K.dtype, finite, lower_only)


@given(
    K_rows=core_matrices(sizes(40), sizes(60)),
    means_size=st.sampled_from([0, 0, 0, 1, -1]),
    grand_mean=reals(-2.0, 2.0, (0.0, math.nan, math.inf, 1e300)),
    seed=st.integers(0, 2**32 - 1),
    n_threads=CORE_THREADS,
)
@contract
def test_core_center_kernel_rows_is_finite_or_raises(K_rows, means_size, grand_mean, seed, n_threads):
    dtype = K_rows.dtype if isinstance(K_rows, np.ndarray) else np.float64
    means = np.random.default_rng(seed).normal(size=max(n_cols(K_rows) + means_size, 0)).astype(dtype)
    before = magnitude(K_rows) if is_finite(K_rows) else math.inf
    assert _core.center_kernel_rows(K_rows, means, grand_mean, n_threads) is None
    bound = 4 * max(before, magnitude(means), abs(grand_mean))
    finite = valid_real(grand_mean, positive=False) and representable(dtype, bound)
    check_result("K_rows (centred)", K_rows, K_rows.shape, dtype, finite)


@given(A=core_matrices(sizes(120), structure=SQUARE_STRUCTURES), n_threads=CORE_THREADS)
@contract
def test_core_eigh_is_finite_or_raises(A, n_threads):
    w, V = _core.eigh(A, n_threads)
    n = len(A)
    finite = is_finite(A) and representable(A.dtype, n * magnitude(A))
    check_result("w", w, (n,), A.dtype, finite)
    check_result("V", V, (n, n), A.dtype, finite)
    if finite:
        assert np.all(np.diff(w) <= 0), "w: not in descending order"


@st.composite
def eigsh_operands(draw):
    """(A, start): a square matrix and a start block with as many rows (one time in ten one more)."""
    A = draw(core_matrices(sizes(200), structure=SQUARE_STRUCTURES))
    n = n_rows(A)
    start = draw(core_matrices(sometimes(st.just(n), st.just(n + 1), 10), sizes(10), like=A))
    return A, start


def _symmetric(n, seed, dtype=np.float64):
    B = np.random.default_rng(seed).normal(size=(n, n))
    return ((B + B.T) / 2).astype(dtype)


def _with_entry(A, value):
    A = A.copy()
    A[0, 0] = value
    return A


@given(
    operands=eigsh_operands(),
    n_components=sometimes(st.integers(1, 12), st.sampled_from([-1, 0, 10**6]), 10),
    tol=st.one_of(
        st.none(),
        sometimes(st.sampled_from([1e-10, 1e-4, 1e-2, 1e-300]), st.sampled_from([0.0, -1.0, math.nan, math.inf]), 10),
    ),
    max_iter=sometimes(st.sampled_from([None, 1, 2, 10]), st.sampled_from([0, -1]), 10),
    n_threads=CORE_THREADS,
)
# Found by this property: entries near 1e200 (residuals overflow), and a start block or matrix that the
# Krylov iteration cannot orthogonalize (RuntimeError).
@example(
    operands=(np.array([[2.0, 1.0], [1.0, 2.0]]) * 1e200, np.ones((2, 1))),
    n_components=1,
    tol=None,
    max_iter=None,
    n_threads=None,
)
@example(
    operands=(_symmetric(65, 0), _with_entry(np.ones((65, 1)), 1e200)),
    n_components=1,
    tol=None,
    max_iter=None,
    n_threads=None,
)
@example(
    operands=(_with_entry(_symmetric(65, 0, np.float32), np.inf), np.ones((65, 1), np.float32)),
    n_components=1,
    tol=None,
    max_iter=2,
    n_threads=None,
)
@contract
def test_core_top_eigsh_is_finite_or_raises(operands, n_components, tol, max_iter, n_threads):
    A, start = operands
    w, V, residuals, n_iter, converged = _core.top_eigsh(A, n_components, start, tol, max_iter, n_threads)
    n = len(A)
    finite = is_finite(A, start) and representable(A.dtype, n * magnitude(A))
    check_result("w", w, (n_components,), A.dtype, finite)
    check_result("V", V, (n, n_components), A.dtype, finite)
    check_result("residuals", residuals, (n_components,), residuals.dtype, finite)
    assert residuals.dtype in (A.dtype, np.float64), f"residuals: dtype {residuals.dtype}"
    assert isinstance(n_iter, int) and n_iter >= 1, f"n_iter={n_iter!r}"
    assert isinstance(converged, bool)
    if finite and converged:
        stop = tol or (1e-4 if A.dtype == np.float32 else 1e-10)
        assert residuals.max() <= stop, f"converged with residuals {residuals} above tol {stop}"


def _products_are_representable(dtype, inner, *factors):
    return representable(dtype, max(inner, 1) * math.prod(magnitude(F) for F in factors))


def _check_product(result, A, B):
    """|result - A B| within the rounding-error bound of a length-k dot product."""
    A64, B64 = A.astype(np.float64), B.astype(np.float64)
    eps, k = np.finfo(result.dtype).eps, A.shape[1]
    bound = 2 * (k + 2) * eps * (np.abs(A64) @ np.abs(B64)) + (k + 2) * np.finfo(result.dtype).tiny
    error = np.abs(result - A64 @ B64)
    assert np.all(error <= bound), f"product error {error.max()} beyond its bound"


@st.composite
def product_operands(draw, transposed=False):
    """(A, B, symmetric) for A @ B, with a square A read by its lower triangle when `symmetric` (half the
    time), or for A.T @ B when `transposed`; one time in ten B has a row too many."""
    symmetric = not transposed and draw(st.booleans())
    if symmetric:
        A = draw(core_matrices(sizes(200), structure=SQUARE_STRUCTURES))
    else:
        A = draw(core_matrices(sizes(200), sizes(12) if transposed else sizes(200)))
    inner = n_rows(A) if transposed else n_cols(A)
    B = draw(core_matrices(sometimes(st.just(inner), st.just(inner + 1), 10), sizes(12), like=A))
    return A, B, symmetric


@given(operands=product_operands(), n_threads=CORE_THREADS)
@contract
def test_core_block_product_is_finite_or_raises(operands, n_threads):
    A, X, symmetric = operands
    Y = _core.block_product(A, X, n_threads, symmetric)
    finite = is_finite(A, X) and _products_are_representable(A.dtype, n_cols(A), A, X)
    check_result("Y", Y, (len(A), X.shape[1]), A.dtype, finite)
    if finite:
        _check_product(Y, np.tril(A) + np.tril(A, -1).T if symmetric else A, X)


@given(operands=product_operands(transposed=True), n_threads=CORE_THREADS)
@contract
def test_core_transposed_product_is_finite_or_raises(operands, n_threads):
    A, B, _ = operands
    C = _core.transposed_product(A, B, n_threads)
    finite = is_finite(A, B) and _products_are_representable(A.dtype, len(A), A, B)
    check_result("C", C, (A.shape[1], B.shape[1]), A.dtype, finite)
    if finite:
        _check_product(C, A.T, B)
