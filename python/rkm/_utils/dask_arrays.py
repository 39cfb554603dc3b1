"""Kernel PCA on Dask arrays: the primal path as one map-reduce, the matrix-free product as row-block tasks.

The primal (explicit feature map) kernel PCA needs one pass over the data for its statistics and one for the
latent variables, so a row-partitioned Dask array runs it as a map-reduce:

1. Fit the feature map from the few rows it needs (``feature_map._sample_indices``: the Nyström landmarks or
   candidate pool, nothing for random Fourier features), gathered to the client.
2. Map: on each row partition, the features phi(X_p) (n_p x d_f) are reduced to their count, mean and centred
   d_f x d_f scatter (:class:`rkm._utils.primal.FeatureMoments`); the feature matrix itself never leaves the worker.
3. Reduce: the partition moments are merged pairwise in a binary tree by Chan et al.'s update
   (``FeatureMoments.combine``), exact and stable in any order, so only d_f x d_f matrices travel.
4. Solve: the small eigenproblem of the d_f x d_f scatter runs on the client
   (:func:`rkm._utils.primal.primal_components`).
5. Map again: the hidden features (phi(x) - mean) U / sqrt(lambda) of each partition, as a lazy Dask array
   with the row chunks of the input.

The matrix-free (dual) path keeps no feature map: :func:`kernel_operator` evaluates K(X, X) B as one task per
row partition, each running the compiled ``kernel_product`` of its rows against the whole data set (shipped to
every worker once), which drives a Krylov eigensolver over a cluster one product at a time.

Dask is an optional dependency (``pip install "rkm[dask]"``): this module imports it only inside the
functions that need it, so :func:`is_dask_array` works, and ``import rkm`` succeeds, without it. Inputs are
chunked by rows only; columns are gathered into one chunk, as every task needs whole samples.
"""

import functools
import math
import sys

import numpy as np
from sklearn.utils import check_random_state

from rkm import _core
from rkm._utils import primal
from rkm._utils.threads import blas_threads, check_n_threads
from rkm._utils.validation import FLOAT_DTYPES, check_matrix
from rkm.kernels import kernel_spec


def is_dask_array(X):
    """Whether X is a Dask array; False without importing Dask when Dask has not been imported."""
    dask_array = sys.modules.get("dask.array")
    return dask_array is not None and isinstance(X, dask_array.Array)


def _import_dask():
    try:
        import dask
        import dask.array
    except ImportError as error:  # pragma: no cover - the extra is installed wherever Dask arrays exist
        raise ImportError('Dask support needs dask[array]: pip install "rkm[dask]"') from error
    return dask


def check_dask_array(dX, name="X"):
    """Validate a Dask array of samples and return it chunked by rows only, in float32 or float64.

    Parameters
    ----------
    dX : dask.array.Array of shape (n_samples, n_features)
    name : str, default="X"
        The argument name used in error messages.

    Returns
    -------
    dX : dask.array.Array of shape (n_samples, n_features)
        float32 and float64 inputs keep their dtype, other numeric dtypes become float64; the row chunks are
        kept and the columns form one chunk.

    Raises
    ------
    ValueError
        If dX is not 2-D, is empty, is not numeric, or has unknown chunk sizes (such as after boolean
        indexing; ``dX.compute_chunk_sizes()`` resolves them). Non-finite values are found only when the
        partitions are computed, by the functions that read them.
    """
    if not is_dask_array(dX):
        raise ValueError(f"{name}: must be a dask array, got {type(dX).__name__}")
    if dX.ndim != 2:
        raise ValueError(f"{name}: must be a 2-D array of shape (n_samples, n_features), got {dX.ndim}-D")
    if any(math.isnan(size) for sizes in dX.chunks for size in sizes):
        raise ValueError(f"{name}: a dask array with unknown chunk sizes; call {name}.compute_chunk_sizes() first")
    if dX.shape[0] < 1 or dX.shape[1] < 1:
        raise ValueError(f"{name}: needs at least one sample and one feature, got shape {dX.shape}")
    if dX.dtype.kind not in "biuf":
        raise ValueError(f"{name}: must hold real numbers, got dtype {dX.dtype}")
    if dX.dtype not in FLOAT_DTYPES:
        dX = dX.astype(np.float64)
    if len(dX.chunks[1]) > 1:
        dX = dX.rechunk({1: -1})
    return dX


def _check_finite(block, name="X"):
    if not np.isfinite(block).all():
        raise ValueError(f"{name}: contains NaN or infinity")


def _active_client():
    """The distributed Client that dask.compute would use now, or None for a local scheduler."""
    distributed = sys.modules.get("distributed")
    if distributed is None:
        return None
    scheduler = _import_dask().base.get_scheduler()
    client = getattr(scheduler, "__self__", scheduler)
    return client if isinstance(client, distributed.Client) else None


def _shared(value):
    """`value` as a single graph dependency, so that tasks share it instead of each carrying a copy.

    On a distributed cluster it is scattered to every worker once, outside the task graph (which travels
    through the scheduler); on a local scheduler every task reads the same object in memory.
    """
    dask = _import_dask()
    client = _active_client()
    if client is not None:
        # A fresh key per call: a content-hashed key may still be in release from the previous call.
        return dask.delayed(client.scatter(value, broadcast=True, hash=False))
    return dask.delayed(value, pure=True)


def fit_feature_map(feature_map, dX):
    """Fit an explicit feature map from the few rows of a Dask array it needs.

    Only the rows ``feature_map._sample_indices(n_samples)`` are computed and gathered, so the fitted map
    equals ``feature_map.fit(dX.compute())`` for the same ``random_state``.

    Parameters
    ----------
    feature_map : rkm.features.Nystroem or rkm.features.RandomFourierFeatures
    dX : dask.array.Array of shape (n_samples, n_features)

    Returns
    -------
    feature_map : the fitted feature map (the same object).
    """
    dX = check_dask_array(dX)
    n_samples, n_features = dX.shape
    indices = feature_map._sample_indices(n_samples)
    rows = np.ascontiguousarray(dX[indices].compute())
    _check_finite(rows)
    return feature_map._fit_sample(rows, n_samples, n_features)


def _block_moments(feature_map, block, *extra, targets=False, weighted=False):
    """The moments of one partition's features (None: phi(x) = x); `extra` holds its targets (with `targets`) and
    then its weights (with `weighted`)."""
    _check_finite(block)
    extra = list(extra)
    Y = np.asarray(extra.pop(0), dtype=np.float64).reshape(block.shape[0], -1) if targets else None
    weights = np.asarray(extra.pop(0), dtype=np.float64) if weighted else None
    if Y is not None:
        _check_finite(Y, "y")
    if weights is not None and (not np.all(np.isfinite(weights)) or np.any(weights < 0)):
        raise ValueError("sample_weight: must hold non-negative finite numbers")
    stream = primal.MomentStream(feature_map, 0 if Y is None else Y.shape[1])
    stream.add(block, Y, weights)
    return stream.moments()


def _block_views_moments(features, *blocks):
    """The moments of one partition's rows of every view, through ``features.transform(blocks)``."""
    for block in blocks:
        _check_finite(block, "views")
    stream = primal.MomentStream(features)
    stream.add(list(blocks))
    return stream.moments()


def _reduced_moments(task, shared, block_tuples):
    """``task(shared, *blocks)`` on each tuple of partitions (FeatureMoments on the workers, `shared` shipped to
    them once), merged in a binary tree by ``FeatureMoments.combine``, computed."""
    dask = _import_dask()
    shared, moments = _shared(shared), dask.delayed(task, pure=True)
    parts = [moments(shared, *blocks) for blocks in block_tuples]
    (total,) = dask.compute(_tree_reduce(parts, dask.delayed(_combine, pure=True)))
    return total


def _combine(left, right):
    return left.combine(right)


def _tree_reduce(parts, combine):
    """Merge Delayed parts pairwise, level by level: a binary tree of depth log2(len(parts))."""
    while len(parts) > 1:
        merged = [combine(left, right) for left, right in zip(parts[::2], parts[1::2], strict=False)]
        parts = merged + parts[len(merged) * 2 :]
    return parts[0]


def feature_moments(feature_map, dX):
    """Count, mean and centred scatter matrix of the features phi(X) of a Dask array, computed.

    Each row partition is reduced on its worker to a :class:`rkm._utils.primal.FeatureMoments` (d_f x d_f), and
    the partition results are merged in a binary tree by ``FeatureMoments.combine``.

    Parameters
    ----------
    feature_map : fitted rkm.features.Nystroem or rkm.features.RandomFourierFeatures
        Shipped to the workers once per call.
    dX : dask.array.Array of shape (n_samples, n_features)

    Returns
    -------
    moments : rkm._utils.primal.FeatureMoments

    Raises
    ------
    ValueError
        "X: contains NaN or infinity" when a partition holds a non-finite value.
    """
    return target_moments(feature_map, dX)


def target_moments(feature_map, dX, dY=None, dw=None):
    """:func:`feature_moments` with the features' cross-moments with targets and sample weights: the normal
    equations of a primal model (LS-SVM, Suykens 2017 eq. 3.15) as one map-reduce.

    Parameters
    ----------
    feature_map : fitted rkm.features.ExplicitFeatureMap, or None (phi(x) = x)
    dX : dask.array.Array of shape (n_samples, n_features)
    dY : dask.array.Array of shape (n_samples,) or (n_samples, p), default=None
        Targets with the row chunks of dX (:func:`rows_like`).
    dw : dask.array.Array of shape (n_samples,), default=None
        Non-negative sample weights with the row chunks of dX.

    Returns
    -------
    moments : rkm._utils.primal.FeatureMoments
        With ``target_mean`` and ``cross`` when dY is given.

    Raises
    ------
    ValueError
        "X: contains NaN or infinity" (or "y: ...") when a partition holds a non-finite value; "X: no rows"
        when every partition is empty or of zero weight.
    """
    dX = check_dask_array(dX)
    task = functools.partial(_block_moments, targets=dY is not None, weighted=dw is not None)
    arrays = [array for array in (dY, dw) if array is not None]
    total = _reduced_moments(task, feature_map, _aligned_row_blocks(dX, *arrays))
    if total.n == 0:
        raise ValueError("X: no rows (every partition is empty or has zero weight)")
    return total


def _aligned_row_blocks(dX, *arrays):
    """Tuples of the Delayed row partitions of dX and of arrays with the same row chunks, empty ones left out."""
    columns = [_flat_blocks(array) for array in (dX, *arrays)]
    return [blocks for blocks, rows in zip(zip(*columns, strict=True), dX.chunks[0], strict=True) if rows > 0]


def _flat_blocks(array):
    blocks = array.to_delayed()
    return blocks.reshape(blocks.shape[0], -1)[:, 0]


def views_moments(features, arrays):
    """The moments of the features of several views chunked alike, as one map-reduce: each partition's rows of
    every view give ``features.transform(blocks)`` and their moments on a worker, merged in a binary tree.

    Parameters
    ----------
    features : object with ``transform(list of blocks) -> (n_rows, m) array``
        Such as a multi-view model's concatenated explicit features; shipped to the workers once.
    arrays : list of dask.array.Array with the same row chunks (:func:`rows_like`)

    Returns
    -------
    rkm._utils.primal.FeatureMoments
    """
    return _reduced_moments(_block_views_moments, features, _aligned_row_blocks(*arrays))


def _finite_then(func, n_arrays, name, dtype, n_out, *arguments):
    """func(blocks, *shared) on one partition of n_arrays arrays (`arguments`: the blocks, then the shared
    values), its blocks checked finite, the result cast to dtype; an empty partition gives an empty result."""
    blocks, shared = arguments[:n_arrays], arguments[n_arrays:]
    if blocks[0].shape[0] == 0:  # estimators refuse zero rows
        return np.empty((0,) if n_out is None else (0, n_out), dtype=dtype)
    for block in blocks:
        _check_finite(block, name)
    return np.asarray(func(list(blocks), *shared), dtype=dtype)


def _map_partitions(func, arrays, n_out, dtype, shared, name):
    """``func(list of blocks, *shared)`` over the row partitions of arrays chunked alike, as a lazy Dask array of
    shape (n_samples, n_out), or (n_samples,) for n_out None, with their row chunks; `name` is the argument a
    non-finite partition's error cites."""
    dask_array = _import_dask().array
    dtype = np.dtype(dtype)
    if n_out is None:
        shape, layout = (0,), {"chunks": (arrays[0].chunks[0],), "drop_axis": 1}
    else:
        shape, layout = (0, n_out), {"chunks": (arrays[0].chunks[0], (n_out,))}
    return dask_array.map_blocks(
        functools.partial(_finite_then, func, len(arrays), name, dtype, n_out),
        *arrays,
        *(_shared(value) for value in shared),
        dtype=dtype,
        meta=np.empty(shape, dtype=dtype),
        **layout,
    )


def map_views(func, arrays, n_out, dtype, *shared):
    """``func(list of blocks, *shared)`` over the row partitions of several views chunked alike, as a lazy Dask
    array of shape (n_samples, n_out) with their row chunks (the views' analogue of :func:`transform_blocks`)."""
    return _map_partitions(func, arrays, n_out, dtype, shared, "views")


def sample_rows(arrays, n_rows, random_state):
    """A uniform sample without replacement of min(n_rows, n_samples) rows of every array (the same rows),
    sorted, gathered as NumPy arrays."""
    dask = _import_dask()
    n_samples = arrays[0].shape[0]
    rng = np.random.RandomState(check_random_state(random_state).randint(np.iinfo(np.int32).max))
    indices = np.sort(rng.choice(n_samples, size=min(n_rows, n_samples), replace=False))
    return [np.ascontiguousarray(rows) for rows in dask.compute(*(array[indices] for array in arrays))]


def is_finite(dX):
    """Whether every entry of a Dask array is finite, as a lazy Dask scalar."""
    return _import_dask().array.isfinite(dX).all()


def concatenate_columns(arrays):
    """Dask arrays with the same rows side by side, rechunked to the first's row chunks (slices of one array at
    different offsets have different chunks)."""
    dask_array = _import_dask().array
    chunks = arrays[0].chunks[0]
    return dask_array.concatenate([array.rechunk({0: chunks, 1: -1}) for array in arrays], axis=1)


def is_dask_collection(X):
    """Whether X is a Dask array, DataFrame or Series (without importing Dask when it has not been imported)."""
    if is_dask_array(X):
        return True
    dataframe = sys.modules.get("dask.dataframe")
    return dataframe is not None and isinstance(X, (dataframe.DataFrame, dataframe.Series))


def as_dask_array(X, name="X"):
    """A Dask array from a Dask array, DataFrame or Series, and the DataFrame's column names (else None).

    A DataFrame's partition lengths are computed once (``to_dask_array(lengths=True)``), so that its rows have
    known chunks.
    """
    if is_dask_array(X):
        return X, None
    dataframe = sys.modules.get("dask.dataframe")
    if dataframe is None or not isinstance(X, (dataframe.DataFrame, dataframe.Series)):
        raise ValueError(f"{name}: must be a dask array or DataFrame, got {type(X).__name__}")
    names = list(X.columns) if isinstance(X, dataframe.DataFrame) else None
    return X.to_dask_array(lengths=True), names


def validate_dask_data(estimator, X, reset):
    """X, a Dask array or DataFrame, as a row-chunked Dask array (:func:`check_dask_array`), with the bookkeeping of
    scikit-learn's ``validate_data``: reset=True sets the estimator's ``n_features_in_`` (and ``feature_names_in_``
    for a DataFrame with string column names, dropping an earlier one otherwise); reset=False checks X against
    them."""
    dX, names = as_dask_array(X)
    dX = check_dask_array(dX)
    strings = names is not None and all(isinstance(name, str) for name in names)
    if reset:
        estimator.n_features_in_ = dX.shape[1]
        estimator.__dict__.pop("feature_names_in_", None)
        if strings:
            estimator.feature_names_in_ = np.asarray(names, dtype=object)
        return dX
    if dX.shape[1] != estimator.n_features_in_:
        raise ValueError(
            f"X: has {dX.shape[1]} features, but {type(estimator).__name__} is expecting {estimator.n_features_in_} "
            "features as input"
        )
    fitted = getattr(estimator, "feature_names_in_", None)
    if fitted is not None and strings and list(fitted) != list(names):
        raise ValueError("X: the feature names should match those that were passed during fit")
    return dX


def rows_like(y, dX, name="y"):
    """y (a Dask array or Series, or an in-memory array) as a Dask array with the row chunks of dX.

    Parameters
    ----------
    y : dask.array.Array, dask Series or DataFrame, or array-like of shape (n_samples,) or (n_samples, p)
    dX : dask.array.Array of shape (n_samples, n_features)
    name : str, default="y"

    Returns
    -------
    dask.array.Array of shape (n_samples,) or (n_samples, p)
        Chunked by rows as dX, its columns (if any) in one chunk; the dtype is y's.
    """
    dask_array = _import_dask().array
    if is_dask_collection(y):
        y, _ = as_dask_array(y, name)
    else:
        y = np.asarray(y)
    if y.ndim not in (1, 2):
        raise ValueError(f"{name}: must be 1-D or 2-D, got {y.ndim}-D")
    if is_dask_array(y) and any(math.isnan(size) for size in y.chunks[0]):
        raise ValueError(f"{name}: a dask array with unknown chunk sizes; call {name}.compute_chunk_sizes() first")
    if y.shape[0] != dX.shape[0]:
        raise ValueError(f"{name}: has {y.shape[0]} rows, but X has {dX.shape[0]}")
    chunks = (dX.chunks[0],) if y.ndim == 1 else (dX.chunks[0], (y.shape[1],))
    if not is_dask_array(y):
        return dask_array.from_array(y, chunks=chunks)
    return y.rechunk(chunks)


def _first_block(func, blocks, *shared):
    return func(blocks[0], *shared)


def transform_blocks(func, dX, n_out, dtype, *shared):
    """Map ``func(block, *shared)`` over the row partitions of dX into a lazy Dask array.

    Parameters
    ----------
    func : callable
        Takes a block (n_rows, n_features) and the `shared` values, returns (n_rows, n_out); it must be
        picklable to run on a distributed cluster.
    dX : dask.array.Array of shape (n_samples, n_features)
    n_out : int or None
        Columns of func's output; None: func returns one value per row (a 1-D output).
    dtype : numpy dtype
        dtype of the output (func's results are cast to it).
    *shared : objects
        Arguments every block needs (a fitted estimator, projection matrices): each is shipped to the
        workers once rather than once per task.

    Returns
    -------
    Y : dask.array.Array of shape (n_samples, n_out), or (n_samples,) for n_out None
        With the row chunks of dX and one column chunk. Computing it raises "X: contains NaN or infinity"
        when a partition holds a non-finite value. With a distributed client active, the shared values are
        scattered to its workers now: compute Y with that client.
    """
    dX = check_dask_array(dX)
    return _map_partitions(functools.partial(_first_block, func), [dX], n_out, dtype, shared, "X")


def _block_hidden_features(block, feature_map, mean, U, eigenvalues):
    return primal.hidden_features(feature_map, block, mean, U, eigenvalues)


def hidden_features(feature_map, dX, mean, U, eigenvalues):
    """The hidden features (phi(x) - mean) U / sqrt(lambda) of a Dask array, as a lazy Dask array.

    Parameters
    ----------
    feature_map : fitted rkm.features.Nystroem or rkm.features.RandomFourierFeatures
    dX : dask.array.Array of shape (n_samples, n_features)
    mean : ndarray of shape (n_feature_map_components,)
    U : ndarray of shape (n_feature_map_components, n_components)
    eigenvalues : ndarray of shape (n_components,)
        As :func:`rkm._utils.primal.primal_components` returns them.

    Returns
    -------
    H : dask.array.Array of shape (n_samples, n_components)
        Chunked by rows as dX; float32 for a float32 feature map and float32 dX, float64 otherwise.
    """
    dX = check_dask_array(dX)
    dtype = np.result_type(dX.dtype, feature_map._model_dtype)
    return transform_blocks(_block_hidden_features, dX, U.shape[1], dtype, feature_map, mean, U, eigenvalues)


def _checked_block(block, dtype):
    block = np.ascontiguousarray(block, dtype=dtype)
    _check_finite(block)
    return block


def _block_kernel_product(block, X_all, B, kernel, gamma, degree, coef0, n_threads):
    # The core runs single-threaded GEMMs on each of its own threads.
    with blas_threads(1):
        return _core.kernel_product(block, X_all, B, kernel, gamma, degree, coef0, n_threads)


def kernel_operator(dX, X_all, kernel="rbf", gamma=None, degree=3, coef0=1.0, n_threads=None):
    """The linear map B -> K(X, X_all) B over a Dask array X, for a Krylov eigensolver's repeated products.

    The arguments are validated once; X_all is shipped to the workers once, and the row partitions of X are
    checked, converted and persisted once (computed from their source once, not at every product). Each
    product then runs one task per partition, the compiled ``kernel_product`` of its rows against X_all,
    with B shipped once per product; the kernel matrix is never stored.

    Parameters
    ----------
    dX : dask.array.Array of shape (n_samples, n_features)
    X_all : array-like of shape (n_samples_all, n_features)
        With dX holding the rows of X_all, the operator is the kernel matrix K(X, X).
    kernel, gamma, degree, coef0 : as in :func:`rkm.kernels.kernel_matrix`
        gamma=None means 1 / n_features.
    n_threads : int, default=None
        Threads of each task (None: OpenMP's default, which distributed workers set to 1 thread).

    Returns
    -------
    product : callable
        ``product(B)`` takes B of shape (n_samples_all, n_vectors) and returns the NumPy array
        K(X, X_all) B of shape (n_samples, n_vectors), in the common dtype of dX and X_all (B is converted
        to it). It raises "X: contains NaN or infinity" when a partition of dX holds a non-finite value.
    """
    dask = _import_dask()
    dX = check_dask_array(dX)
    n_threads = check_n_threads(n_threads)
    X_all = check_matrix(X_all, "X_all")
    if X_all.shape[1] != dX.shape[1]:
        raise ValueError(f"X_all: has {X_all.shape[1]} features but X has {dX.shape[1]}")
    name, gamma, degree, coef0 = kernel_spec(kernel, gamma, degree, coef0, X_all.shape[1])
    gamma = 1.0 if gamma is None else gamma  # the core's placeholder for kernels without one
    dtype = np.result_type(dX.dtype, X_all.dtype)
    X_all = X_all.astype(dtype, copy=False)
    X_shared = _shared(X_all)
    checked = dask.delayed(_checked_block, pure=True)
    blocks = dask.persist(*(checked(block, dtype) for (block,) in _aligned_row_blocks(dX)))
    task = dask.delayed(_block_kernel_product, pure=True)

    def product(B):
        B = check_matrix(B, "B")
        if B.shape[0] != X_all.shape[0]:
            raise ValueError(f"B: must have {X_all.shape[0]} rows (one per row of X_all), got {B.shape[0]}")
        B_shared = _shared(B.astype(dtype, copy=False))
        arguments = (X_shared, B_shared, name, gamma, float(degree), float(coef0), n_threads)
        parts = [task(block, *arguments) for block in blocks]
        return np.concatenate(dask.compute(*parts), axis=0)

    return product


def kernel_product(dX, X_all, B, kernel="rbf", gamma=None, degree=3, coef0=1.0, n_threads=None):
    """K(X, X_all) B without storing K, one Dask task per row partition of X, computed.

    A single product of :func:`kernel_operator` (use that for repeated products with the same X).

    Parameters
    ----------
    dX : dask.array.Array of shape (n_samples, n_features)
    X_all : array-like of shape (n_samples_all, n_features)
    B : array-like of shape (n_samples_all, n_vectors)
    kernel, gamma, degree, coef0, n_threads : as in :func:`kernel_operator`

    Returns
    -------
    Y : ndarray of shape (n_samples, n_vectors)
        In the common dtype of dX, X_all and B.
    """
    X_all = check_matrix(X_all, "X_all")
    B = check_matrix(B, "B")
    X_all = X_all.astype(np.result_type(X_all.dtype, B.dtype), copy=False)
    return kernel_operator(dX, X_all, kernel, gamma, degree, coef0, n_threads)(B)
