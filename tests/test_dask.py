"""Dask arrays: the distributed primal and matrix-free paths against their in-memory twins."""

import subprocess
import sys

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

import rkm  # noqa: E402
from rkm import _core  # noqa: E402
from rkm._utils import dask_arrays, primal  # noqa: E402
from rkm.features import Nystroem, RandomFourierFeatures  # noqa: E402
from rkm.kernels import RBF  # noqa: E402

# Uneven row partitions, one of them empty, and the columns split in two (rechunked to one column chunk).
ROW_CHUNKS = (90, 37, 0, 150, 123)
N_SAMPLES, N_FEATURES = sum(ROW_CHUNKS), 6

needs_kernel_product = pytest.mark.skipif(
    not hasattr(_core, "kernel_product"), reason="the compiled core predates kernel_product"
)


@pytest.fixture(scope="module")
def client():
    """A two-process cluster, so that every argument really travels to the workers by pickle."""
    with (
        distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster,
        distributed.Client(cluster) as client,
    ):
        yield client


@pytest.fixture(scope="module")
def X():
    return np.random.default_rng(0).normal(size=(N_SAMPLES, N_FEATURES))


def as_dask(X, row_chunks=ROW_CHUNKS):
    return da.from_array(X, chunks=(row_chunks, (N_FEATURES // 2, N_FEATURES - N_FEATURES // 2)))


def with_nan(X, row):
    bad = X.copy()
    bad[row, 1] = np.nan
    return bad


def assert_close_to_scale(actual, expected, rtol):
    """Entries agree to rtol relative to the largest entry (tiny entries carry absolute rounding)."""
    assert_allclose(actual, expected, rtol=rtol, atol=rtol * np.abs(expected).max())


FEATURE_MAPS = {
    "nystroem-uniform": lambda: Nystroem(n_components=40, gamma=0.2, random_state=0),
    "nystroem-kmeans++": lambda: Nystroem(n_components=40, landmarks="kmeans++", random_state=1),
    "nystroem-renyi": lambda: Nystroem(n_components=40, kernel="laplacian", landmarks="renyi", random_state=2),
    "rff": lambda: RandomFourierFeatures(n_components=50, gamma=0.3, random_state=3),
    "orf": lambda: RandomFourierFeatures(n_components=50, orthogonal=True, random_state=4),
}


class FunctionTransformerLike:
    """A transformer that is not one of rkm's explicit feature maps."""

    def fit(self, X, y=None):
        return self

    def transform(self, X):
        return X


@pytest.fixture(params=sorted(FEATURE_MAPS))
def feature_map(request):
    return FEATURE_MAPS[request.param]


# ----------------------------------------------------------------------------------------------------------
# Validation (no cluster needed)


def test_is_dask_array(X):
    assert dask_arrays.is_dask_array(as_dask(X))
    assert not dask_arrays.is_dask_array(X)
    assert not dask_arrays.is_dask_array(X.tolist())


def test_rkm_imports_without_dask():
    code = (
        "import sys, numpy, rkm, rkm._utils.dask_arrays;"
        "assert not rkm._utils.dask_arrays.is_dask_array(numpy.zeros((2, 2)));"
        "assert 'dask' not in sys.modules, 'dask imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_check_dask_array_rechunks_columns_only(X):
    dX = dask_arrays.check_dask_array(as_dask(X))
    assert dX.chunks == (ROW_CHUNKS, (N_FEATURES,))
    assert dX.dtype == np.float64
    assert_array_equal(dX.compute(), X)


@pytest.mark.parametrize(
    "dtype, expected", [(np.float32, np.float32), (np.float64, np.float64), (np.int64, np.float64), (bool, np.float64)]
)
def test_check_dask_array_dtypes(X, dtype, expected):
    assert dask_arrays.check_dask_array(as_dask(X.astype(dtype))).dtype == expected


def test_check_dask_array_unknown_chunk_sizes(X):
    dX = as_dask(X)
    selected = dX[dX[:, 0] > 0]
    with pytest.raises(ValueError, match=r"^X: a dask array with unknown chunk sizes; call X.compute_chunk_sizes"):
        dask_arrays.check_dask_array(selected)
    selected.compute_chunk_sizes()
    assert dask_arrays.check_dask_array(selected).shape == (int((X[:, 0] > 0).sum()), N_FEATURES)


@pytest.mark.parametrize(
    "array, message",
    [
        (np.zeros((3, 2)), "X: must be a dask array"),
        (np.zeros(5), "X: must be a dask array"),
        ("1-D", "X: must be a 2-D array"),
        ("empty", "X: needs at least one sample"),
        ("complex", "X: must hold real numbers"),
    ],
)
def test_check_dask_array_rejects(array, message):
    arrays = {
        "1-D": da.zeros(5, chunks=2),
        "empty": da.zeros((0, 3), chunks=(1, 3)),
        "complex": da.zeros((4, 2), dtype=complex, chunks=(2, 2)),
    }
    with pytest.raises(ValueError, match=f"^{message}"):
        dask_arrays.check_dask_array(arrays.get(array, array) if isinstance(array, str) else array)


# ----------------------------------------------------------------------------------------------------------
# Primal path: fit, moments, hidden features


def test_fit_feature_map_equals_in_memory(client, X, feature_map):
    fitted = dask_arrays.fit_feature_map(feature_map(), as_dask(X))
    expected = feature_map().fit(X)
    assert_close_to_scale(fitted.transform(X), expected.transform(X), rtol=1e-12)
    assert fitted.n_features_in_ == N_FEATURES


def test_fit_feature_map_rejects_nan_in_sampled_rows(client, X):
    # With as many landmarks as samples every row is sampled.
    with pytest.raises(ValueError, match="^X: contains NaN or infinity"):
        dask_arrays.fit_feature_map(Nystroem(n_components=N_SAMPLES, random_state=0), as_dask(with_nan(X, 200)))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_feature_moments_equal_in_memory(client, X, feature_map, dtype):
    X = X.astype(dtype)
    fm = feature_map().fit(X)
    moments = dask_arrays.feature_moments(fm, as_dask(X))
    expected = primal.feature_moments(fm, X)
    rtol = 1e-10 if dtype == np.float64 else 1e-5
    assert moments.n == expected.n == N_SAMPLES
    assert_close_to_scale(moments.mean, expected.mean, rtol)
    assert_close_to_scale(moments.scatter, expected.scatter, rtol)


def test_feature_moments_single_partition(client, X):
    fm = Nystroem(n_components=20, random_state=0).fit(X)
    moments = dask_arrays.feature_moments(fm, da.from_array(X, chunks=-1))
    expected = primal.feature_moments(fm, X)
    assert_close_to_scale(moments.scatter, expected.scatter, 1e-10)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_feature_moments_rejects_non_finite_partition(client, X, bad):
    data = X.copy()
    data[300, 0] = bad  # in the last partition
    fm = Nystroem(n_components=20, random_state=0).fit(X)
    with pytest.raises(ValueError, match="^X: contains NaN or infinity"):
        dask_arrays.feature_moments(fm, as_dask(data))


def test_hidden_features_equal_in_memory(client, X, feature_map):
    fm = feature_map().fit(X)
    moments = primal.feature_moments(fm, X)
    eigenvalues, U = primal.primal_components(moments, 5)
    H = dask_arrays.hidden_features(fm, as_dask(X), moments.mean, U, eigenvalues)
    assert dask_arrays.is_dask_array(H)
    assert H.chunks == (ROW_CHUNKS, (5,))
    expected = primal.hidden_features(fm, X, moments.mean, U, eigenvalues)
    assert_close_to_scale(H.compute(), expected, 1e-10)


def test_hidden_features_reject_nan_partition(client, X):
    fm = Nystroem(n_components=20, random_state=0).fit(X)
    moments = primal.feature_moments(fm, X)
    eigenvalues, U = primal.primal_components(moments, 3)
    H = dask_arrays.hidden_features(fm, as_dask(with_nan(X, 5)), moments.mean, U, eigenvalues)
    with pytest.raises(ValueError, match="^X: contains NaN or infinity"):
        H.compute()


def test_transform_blocks_shares_arguments(client, X):
    A = np.arange(N_FEATURES * 2, dtype=np.float64).reshape(N_FEATURES, 2)
    Y = dask_arrays.transform_blocks(np.dot, as_dask(X), 2, np.float32, A)
    assert Y.dtype == np.float32 and Y.chunks == (ROW_CHUNKS, (2,))
    assert_allclose(Y.compute(), (X @ A).astype(np.float32))


@pytest.mark.parametrize("scheduler", ["threads", "sync"])
def test_local_schedulers(X, scheduler):
    """Without a distributed client the shared arguments stay in the graph, read in place by every task."""
    import dask

    fm = Nystroem(n_components=20, random_state=0).fit(X)
    with dask.config.set(scheduler=scheduler):
        assert dask_arrays._active_client() is None
        moments = dask_arrays.feature_moments(fm, as_dask(X))
        eigenvalues, U = primal.primal_components(moments, 3)
        H = dask_arrays.hidden_features(fm, as_dask(X), moments.mean, U, eigenvalues).compute()
    assert_close_to_scale(moments.scatter, primal.feature_moments(fm, X).scatter, 1e-10)
    assert_close_to_scale(H, primal.hidden_features(fm, X, moments.mean, U, eigenvalues), 1e-10)


# ----------------------------------------------------------------------------------------------------------
# Matrix-free path


@needs_kernel_product
@pytest.mark.parametrize(
    "kernel, params",
    [("rbf", dict(gamma=0.3)), ("laplacian", dict()), ("poly", dict(degree=2, coef0=0.5)), ("linear", dict())],
)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_kernel_product_equals_core(client, X, kernel, params, dtype):
    X = X.astype(dtype)
    B = np.random.default_rng(1).normal(size=(N_SAMPLES, 3)).astype(dtype)
    Y = dask_arrays.kernel_product(as_dask(X), X, B, kernel=kernel, **params)
    gamma = params.get("gamma", 1.0 / N_FEATURES)
    expected = _core.kernel_product(
        X, None, B, kernel, gamma, float(params.get("degree", 3)), float(params.get("coef0", 1.0)), None
    )
    assert isinstance(Y, np.ndarray) and Y.dtype == dtype and Y.shape == (N_SAMPLES, 3)
    assert_close_to_scale(Y, expected, 1e-10 if dtype == np.float64 else 1e-5)


@needs_kernel_product
def test_kernel_product_kernel_object_and_other_rows(client, X):
    B = np.random.default_rng(2).normal(size=(N_SAMPLES, 2))
    Y = dask_arrays.kernel_product(as_dask(X[:100], row_chunks=(60, 40)), X, B, kernel=RBF(gamma=0.5))
    assert_close_to_scale(Y, rkm.kernels.kernel_matrix(X[:100], X, gamma=0.5) @ B, 1e-10)


@needs_kernel_product
def test_kernel_operator_repeated_products(client, X):
    product = dask_arrays.kernel_operator(as_dask(X), X, kernel="laplacian", gamma=0.2)
    K = rkm.kernels.kernel_matrix(X, kernel="laplacian", gamma=0.2)
    for seed in range(3):
        B = np.random.default_rng(seed).normal(size=(N_SAMPLES, seed + 1))
        assert_close_to_scale(product(B), K @ B, 1e-10)
    # The operator works in the dtype of X and X_all, whatever B's.
    X32 = X.astype(np.float32)
    assert dask_arrays.kernel_operator(as_dask(X32), X32)(B).dtype == np.float32


@needs_kernel_product
def test_kernel_product_local_scheduler(X):
    import dask

    B = np.random.default_rng(3).normal(size=(N_SAMPLES, 2))
    with dask.config.set(scheduler="threads"):
        Y = dask_arrays.kernel_product(as_dask(X), X, B, gamma=0.4)
    assert_close_to_scale(Y, rkm.kernels.kernel_matrix(X, gamma=0.4) @ B, 1e-10)


@needs_kernel_product
def test_kernel_product_rejects(client, X):
    B = np.ones((N_SAMPLES, 2))
    with pytest.raises(ValueError, match="^X: contains NaN or infinity"):
        dask_arrays.kernel_product(as_dask(with_nan(X, 10)), X, B)
    with pytest.raises(ValueError, match="^X_all: has 5 features but X has 6"):
        dask_arrays.kernel_product(as_dask(X), X[:, :5], B)
    with pytest.raises(ValueError, match="^B: must have 400 rows"):
        dask_arrays.kernel_product(as_dask(X), X, B[:10])
    with pytest.raises(ValueError, match="^gamma: must be a positive finite number"):
        dask_arrays.kernel_product(as_dask(X), X, B, gamma=-1.0)


# ----------------------------------------------------------------------------------------------------------
# End to end: KernelPCA.fit on a Dask array equals the in-memory fit


def computed(A):
    return A.compute() if dask_arrays.is_dask_array(A) else np.asarray(A)


@pytest.mark.parametrize(
    "params, rtol",
    [
        (dict(feature_map=Nystroem(n_components=200, random_state=0)), 1e-10),
        (dict(feature_map=RandomFourierFeatures(n_components=300, orthogonal=True, random_state=0)), 1e-10),
        (dict(kernel_storage="matrix_free"), 1e-8),
    ],
    ids=["nystrom", "rff", "matrix_free"],
)
def test_kernel_pca_fit_dask_equals_in_memory(client, X, params, rtol):
    expected = rkm.KernelPCA(n_components=5, random_state=0, **params).fit(X)
    model = rkm.KernelPCA(n_components=5, random_state=0, **params).fit(as_dask(X))
    assert model.kernel_storage_ == expected.kernel_storage_
    assert_allclose(model.eigenvalues_, expected.eigenvalues_, rtol=rtol)
    assert_allclose(computed(model.H_), computed(expected.H_), atol=1e-8)
    Z = model.transform(as_dask(X[:150], row_chunks=(100, 50)))
    assert dask_arrays.is_dask_array(Z)
    assert_close_to_scale(Z.compute(), expected.transform(X[:150]), 1e-8)


def test_kernel_pca_on_dask_resolves_auto_to_matrix_free_and_refuses_dense(X):
    # "auto" never approximates: a Dask array without a feature map runs the exact matrix-free products.
    import dask

    with dask.config.set(scheduler="sync"):
        model = rkm.KernelPCA(n_components=2, random_state=0).fit(as_dask(X))
    assert model.kernel_storage_ == "matrix_free" and not hasattr(model, "feature_map_")
    with pytest.raises(ValueError, match="^kernel_storage: 'dense' needs X in memory; with a dask array use"):
        rkm.KernelPCA(n_components=2, kernel_storage="dense").fit(as_dask(X))
    with pytest.raises(ValueError, match="^The 'n_components' parameter of Nystroem"):
        rkm.KernelPCA(n_components=2, feature_map=Nystroem(n_components=0)).fit(as_dask(X))


# ----------------------------------------------------------------------------------------------------------
# End to end: the LS-SVMs on Dask arrays equal their in-memory fits


@pytest.fixture(scope="module")
def targets(X):
    rng = np.random.default_rng(11)
    y = np.sin(X[:, 0]) + 0.5 * X[:, 1] + 0.1 * rng.normal(size=N_SAMPLES)
    return y, rng.uniform(0.2, 2.0, N_SAMPLES)


def as_dask_rows(v, row_chunks=ROW_CHUNKS):
    return da.from_array(v, chunks=(row_chunks,) + ((v.shape[1],) if v.ndim == 2 else ()))


LSSVM_MAPS = {
    "nystroem": lambda: Nystroem(n_components=60, gamma=0.2, random_state=0),
    "rff": lambda: RandomFourierFeatures(n_components=80, gamma=0.2, random_state=0),
    "linear": lambda: "linear",
}


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("name", sorted(LSSVM_MAPS))
def test_lssvm_regressor_primal_on_dask_equals_in_memory(client, X, targets, name, weighted):
    y, weights = targets
    weights = weights if weighted else None
    expected = rkm.LSSVMRegressor(feature_map=LSSVM_MAPS[name](), lam=1e-2).fit(X, y, sample_weight=weights)
    dw = None if weights is None else as_dask_rows(weights)
    model = rkm.LSSVMRegressor(feature_map=LSSVM_MAPS[name](), lam=1e-2).fit(as_dask(X), as_dask_rows(y), dw)
    assert model.solver_ == "primal" and model.n_features_in_ == N_FEATURES
    assert_close_to_scale(model.coef_, expected.coef_, 1e-10)
    assert_close_to_scale(model.intercept_ + 1.0, expected.intercept_ + 1.0, 1e-10)
    predicted = model.predict(as_dask(X[:150], row_chunks=(100, 0, 50)))
    assert dask_arrays.is_dask_array(predicted) and predicted.shape == (150,)
    assert_close_to_scale(predicted.compute(), expected.predict(X[:150]), 1e-10)


def test_lssvm_multi_output_with_targets_in_memory(client, X, targets):
    Y = np.column_stack([targets[0], X[:, 2]])
    fm = RandomFourierFeatures(n_components=50, random_state=1)
    expected = rkm.LSSVMRegressor(feature_map=fm, fit_intercept=False).fit(X, Y)
    model = rkm.LSSVMRegressor(feature_map=fm, fit_intercept=False).fit(as_dask(X), Y)
    assert_close_to_scale(model.coef_, expected.coef_, 1e-10)
    assert model.predict(as_dask(X)).shape == (N_SAMPLES, 2)


def test_lssvm_cg_on_dask_runs_the_kernel_products_as_tasks(client, X, targets):
    y, weights = targets
    params = dict(gamma=0.2, lam=1e-2, tol=1e-10, random_state=0)
    expected = rkm.LSSVMRegressor(solver="cg", **params).fit(X, y, sample_weight=weights)
    model = rkm.LSSVMRegressor(**params).fit(as_dask(X), as_dask_rows(y), sample_weight=as_dask_rows(weights))
    assert model.solver_ == "cg" and model.n_iter_ == expected.n_iter_
    assert_close_to_scale(model.dual_coef_, expected.dual_coef_, 1e-8)
    assert_close_to_scale(model.predict(as_dask(X)).compute(), expected.predict(X), 1e-8)
    assert_array_equal(model.X_fit_, X)


@pytest.mark.parametrize("params", [dict(feature_map=Nystroem(n_components=50, random_state=0)), dict(gamma=0.3)])
def test_lssvm_classifier_on_dask_equals_in_memory(client, X, params):
    y = np.where(X[:, 0] + X[:, 1] > 0.5, "up", np.where(X[:, 2] > 0, "left", "down"))
    expected = rkm.LSSVMClassifier(tol=1e-10, **params).fit(X, y)
    model = rkm.LSSVMClassifier(tol=1e-10, **params).fit(as_dask(X), as_dask_rows(y))
    assert_array_equal(model.classes_, ["down", "left", "up"])
    if model.solver_ != "primal":
        assert_close_to_scale(model.H_, expected.H_, 1e-8)
    scores = model.decision_function(as_dask(X))
    assert scores.shape == (N_SAMPLES, 3)
    assert_close_to_scale(scores.compute(), expected.decision_function(X), 1e-8)
    assert_array_equal(model.predict(as_dask(X)).compute(), expected.predict(X))


def test_lssvm_on_a_dask_dataframe_keeps_the_feature_names(client, X, targets):
    dd = pytest.importorskip("dask.dataframe")
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame(X, columns=[f"x{j}" for j in range(N_FEATURES)])
    ddf = dd.from_pandas(frame, npartitions=3)
    series = dd.from_pandas(pd.Series(targets[0]), npartitions=3)
    fm = RandomFourierFeatures(n_components=40, random_state=2)
    model = rkm.LSSVMRegressor(feature_map=fm).fit(ddf, series)
    expected = rkm.LSSVMRegressor(feature_map=fm).fit(frame, targets[0])
    assert_array_equal(model.feature_names_in_, expected.feature_names_in_)
    assert_close_to_scale(model.coef_, expected.coef_, 1e-10)
    assert_close_to_scale(model.predict(ddf).compute(), expected.predict(frame), 1e-10)
    with pytest.raises(ValueError, match="^X: the feature names should match"):
        model.predict(ddf.rename(columns={"x0": "z"}))


@pytest.mark.parametrize(
    "model, message",
    [
        (rkm.LSSVMRegressor(solver="cholesky"), "^solver: 'cholesky' needs the data in memory"),
        (rkm.LSSVMRegressor(kernel="precomputed"), "^kernel: a Dask fit evaluates a named kernel"),
        (rkm.LSSVMRegressor(loo=True, solver="cg"), "^loo: the closed-form leave-one-out residuals need the data"),
        (rkm.LSSVMRegressor(robust="hampel"), "^robust: the reweighted refits need the data in memory"),
        (rkm.LSSVMRegressor(device="cuda"), "^device: a Dask fit runs on the workers' CPUs"),
        (rkm.LSSVMRegressor(feature_map=FunctionTransformerLike()), "^feature_map: a Dask fit streams rkm's"),
        (rkm.LSSVMClassifier(probability=True), "^probability: Platt scaling's internal cross-validation"),
    ],
)
def test_lssvm_on_dask_refuses_what_needs_memory(X, model, message):
    y = (X[:, 0] > 0).astype(int)
    with pytest.raises(ValueError, match=message):
        model.fit(as_dask(X), y)


def test_lssvm_on_dask_checks_its_inputs(X, targets):
    import dask

    y = targets[0]
    model = rkm.LSSVMRegressor(feature_map="linear")
    with pytest.raises(ValueError, match="^y: has 10 rows, but X has 400"):
        model.fit(as_dask(X), y[:10])
    with dask.config.set(scheduler="sync"):
        with pytest.raises(ValueError, match="^y: contains NaN or infinity"):
            model.fit(as_dask(X), np.where(np.arange(N_SAMPLES) == 7, np.nan, y))
        with pytest.raises(ValueError, match="^sample_weight: must hold non-negative finite numbers"):
            model.fit(as_dask(X), y, sample_weight=-np.ones(N_SAMPLES))
        model.fit(as_dask(X), y)
    with pytest.raises(ValueError, match="^X: has 5 features, but LSSVMRegressor is expecting 6"):
        model.predict(da.from_array(X[:, :5], chunks=(ROW_CHUNKS, 5)))


# ----------------------------------------------------------------------------------------------------------
# End to end: the multi-view and generative RKMs and the forecaster on Dask views


@pytest.fixture(scope="module")
def two_views():
    rng = np.random.default_rng(5)
    t = rng.uniform(0.0, 6.0, (N_SAMPLES, 1))
    return [np.hstack([t, t**2 / 6]), np.hstack([np.sin(t), np.cos(t)]) + 0.05 * rng.normal(size=(N_SAMPLES, 2))]


def dask_views(views):
    # Views chunked differently: the fit rechunks them alike.
    return [as_dask_rows(views[0]), as_dask_rows(views[1], (200, 200))]


@pytest.mark.parametrize("name", ["nystroem-uniform", "rff"])
def test_multiview_on_dask_equals_in_memory(client, two_views, name):
    kernel = (FEATURE_MAPS[name](), "linear")
    expected = rkm.MultiViewRKM(3, kernel=kernel, eta=(1.0, 0.5), solver="primal_eig").fit(two_views)
    model = rkm.MultiViewRKM(3, kernel=kernel, eta=(1.0, 0.5), random_state=0).fit(dask_views(two_views))
    assert model.solver_ == "primal_eig"
    assert_allclose(model.eigenvalues_, expected.eigenvalues_, rtol=1e-10)
    assert_close_to_scale(model.H_, expected.H_, 1e-10)
    transformed = model.transform(dask_views(two_views))
    assert dask_arrays.is_dask_array(transformed) and transformed.chunks[0] == ROW_CHUNKS
    assert_close_to_scale(transformed.compute(), expected.transform(two_views), 1e-10)
    inferred = model.predict_view([as_dask_rows(two_views[0]), None], missing=1)
    assert_close_to_scale(inferred.compute(), expected.predict_view([two_views[0], None], missing=1), 1e-10)
    latent = model.predict_latent([as_dask_rows(two_views[0]), None], missing=1)
    assert_close_to_scale(latent.compute(), expected.predict_latent([two_views[0], None], missing=1), 1e-10)
    # The map view's pre-images come from a sample of the rows (here all of them: fewer than RESERVOIR_ROWS).
    assert_array_equal(model._views[0].X, two_views[0])


def test_multiview_on_one_dask_array_split_by_columns(client, two_views):
    X = np.hstack(two_views)
    kernel = (RandomFourierFeatures(n_components=30, random_state=0), "linear")
    expected = rkm.MultiViewRKM(2, kernel=kernel, view_columns=2, solver="primal_eig").fit(X)
    model = rkm.MultiViewRKM(2, kernel=kernel, view_columns=2).fit(da.from_array(X, chunks=(ROW_CHUNKS, 4)))
    assert model.n_features_in_ == 4 and len(model.view_columns_) == 2
    assert_close_to_scale(model.H_, expected.H_, 1e-10)
    assert_close_to_scale(model.transform(da.from_array(X, chunks=(100, 4))).compute(), expected.transform(X), 1e-10)


def test_genrkm_on_dask_trains_and_samples(client, two_views):
    kernel = (RandomFourierFeatures(n_components=40, gamma=0.5, random_state=0), "linear")
    params = dict(kernel=kernel, n_mixture=2, random_state=0)
    expected = rkm.GenRKM(2, solver="primal_eig", **params).fit(two_views)
    model = rkm.GenRKM(2, **params).fit(dask_views(two_views))
    assert_close_to_scale(model.H_, expected.H_, 1e-10)
    assert_close_to_scale(model.mixture_.means_, expected.mixture_.means_, 1e-6)
    generated = model.sample(3, random_state=1)
    # The linear view is decoded exactly, whatever rows the smoother of view 0 averages.
    assert_close_to_scale(generated[1], expected.sample(3, random_state=1)[1], 1e-6)
    assert generated[0].shape == (3, 2)


def test_forecaster_on_a_dask_series_equals_in_memory(client):
    t = np.arange(N_SAMPLES)
    series = np.column_stack([np.sin(0.05 * t) + 0.3 * np.sin(0.21 * t), np.cos(0.07 * t)]) * 3 + 1
    params = dict(n_components=3, feature_map=RandomFourierFeatures(n_components=60, gamma=0.1, random_state=0))
    expected = rkm.RKMForecaster(6, solver="primal_eig", **params).fit(series)
    model = rkm.RKMForecaster(6, **params).fit(as_dask_rows(series))
    assert_allclose(model.mean_, expected.mean_, rtol=1e-12)
    assert_allclose(model.scale_, expected.scale_, rtol=1e-12)
    assert_allclose(model.window_, expected.window_, rtol=1e-12)
    assert_close_to_scale(model.predict(10), expected.predict(10), 1e-9)


def test_multiview_on_dask_refuses(client, two_views):
    with pytest.raises(ValueError, match="^kernel: a Dask fit runs the primal, which needs explicit feature maps"):
        rkm.MultiViewRKM(2).fit(dask_views(two_views))
    with pytest.raises(ValueError, match="^solver: a Dask fit runs the primal, not 'dual_eig'"):
        rkm.MultiViewRKM(2, kernel="linear", solver="dual_eig").fit(dask_views(two_views))
    with pytest.raises(ValueError, match="^kernel: a Dask fit fits rkm's explicit maps"):
        rkm.MultiViewRKM(2, kernel=(FunctionTransformerLike(), "linear")).fit(dask_views(two_views))
    with pytest.raises(ValueError, match=r"^views: all views need the same number of rows, got \[400, 10\]"):
        rkm.MultiViewRKM(2, kernel="linear").fit([as_dask_rows(two_views[0]), as_dask_rows(two_views[1][:10], (10,))])
    bad = two_views[1].copy()
    bad[33, 1] = np.inf
    with pytest.raises(ValueError, match="^views: contains NaN or infinity"):
        rkm.MultiViewRKM(2, kernel="linear").fit([as_dask_rows(two_views[0]), as_dask_rows(bad)])


def test_kernel_pca_on_a_dask_dataframe(client, X):
    dd = pytest.importorskip("dask.dataframe")
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame(X, columns=[f"x{j}" for j in range(N_FEATURES)])
    fm = RandomFourierFeatures(n_components=40, random_state=2)
    model = rkm.KernelPCA(3, feature_map=fm).fit(dd.from_pandas(frame, npartitions=3))
    expected = rkm.KernelPCA(3, feature_map=fm).fit(frame)
    assert_array_equal(model.feature_names_in_, expected.feature_names_in_)
    assert_allclose(model.eigenvalues_, expected.eigenvalues_, rtol=1e-10)
    Z = model.transform(dd.from_pandas(frame, npartitions=2))
    assert_close_to_scale(Z.compute(), expected.transform(frame), 1e-10)
