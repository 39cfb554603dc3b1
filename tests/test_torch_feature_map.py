"""rkm.torch.FeatureMap: a trained torch module as a fixed explicit feature map for rkm's models.

Every model given the map must equal the same model given the precomputed features phi(X) through its linear
path; the map must run the module in eval mode without changing the caller's module, clone and pickle, and
refuse bad input naming the argument.
"""

import pickle

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from sklearn.base import clone  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402
from sklearn.utils.estimator_checks import parametrize_with_checks  # noqa: E402

from rkm import GenRKM, KernelPCA, LSSVMRegressor, MultiViewRKM  # noqa: E402
from rkm.features import ExplicitFeatureMap, Nystroem  # noqa: E402
from rkm.torch import FeatureMap  # noqa: E402

N_FEATURES = 5
WIDTH = 7


def _net(dtype=torch.float64, dropout=0.0, seed=0):
    """A small MLP 5 -> 16 -> 7; with dropout, train mode would make its outputs random."""
    torch.manual_seed(seed)
    layers = [torch.nn.Linear(N_FEATURES, 16), torch.nn.Tanh()]
    if dropout:
        layers.append(torch.nn.Dropout(dropout))
    layers.append(torch.nn.Linear(16, WIDTH))
    return torch.nn.Sequential(*layers).to(dtype)


def _cnn():
    """A small CNN on 8 x 8 images: 4 channels of 4 x 4 after pooling, 64 features once flattened."""
    torch.manual_seed(1)
    return torch.nn.Sequential(
        torch.nn.Conv2d(1, 4, 3, padding=1), torch.nn.BatchNorm2d(4), torch.nn.ReLU(), torch.nn.MaxPool2d(2)
    )


def _features(net, X, input_shape=None):
    """phi(X) computed directly by torch, in eval mode, in the module's dtype."""
    dtype = next(net.parameters()).dtype
    inputs = torch.as_tensor(X, dtype=dtype)
    if input_shape is not None:
        inputs = inputs.reshape(X.shape[0], *input_shape)
    training = net.training
    net.eval()
    with torch.no_grad():
        out = net(inputs).reshape(X.shape[0], -1).numpy()
    net.train(training)
    return out


def _data(n=150, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, N_FEATURES))


def _assert_equal_up_to_signs(A, B, rtol=1e-9):
    """Columns of A equal those of B up to sign (primal and dual kernel PCA fix signs on different vectors)."""
    signs = np.sign(np.sum(A * B, axis=0))
    assert np.all(signs != 0)
    np.testing.assert_allclose(A, B * signs, rtol=0, atol=rtol * np.abs(B).max())


# ------------------------------------------------------------------ the map itself


def test_transform_is_the_module_in_eval_mode_and_the_caller_module_is_untouched():
    net = _net(dropout=0.5)
    net.train()
    net[0].weight.requires_grad_(False)  # a mixed requires_grad state must survive as it is
    state = {key: value.clone() for key, value in net.state_dict().items()}
    flags = [module.training for module in net.modules()]
    X = _data()
    fm = FeatureMap(net, batch_size=16)
    assert fm.fit(X) is fm
    Phi = fm.transform(X)
    assert Phi.shape == (X.shape[0], WIDTH) and Phi.dtype == np.float64
    assert fm.n_components_ == WIDTH and fm.output_shape_ == (WIDTH,) and fm.n_features_in_ == N_FEATURES
    # Dropout in train mode would zero about half the hidden units: eval-mode outputs, whatever the batching.
    np.testing.assert_allclose(Phi, _features(net, X), rtol=1e-13, atol=1e-13)
    np.testing.assert_array_equal(Phi, FeatureMap(net, batch_size=1000).fit(X).transform(X))
    assert [module.training for module in net.modules()] == flags
    assert [p.requires_grad for p in net.parameters()] == [False, True, True, True]
    for key, value in net.state_dict().items():
        assert torch.equal(value, state[key]), key
    assert fm.module_ is not net and not fm.module_.training
    assert not any(p.requires_grad for p in fm.module_.parameters())


def test_fit_takes_a_snapshot():
    net, X = _net(), _data()
    fm = FeatureMap(net).fit(X)
    before = fm.transform(X)
    with torch.no_grad():
        net[0].weight.mul_(2.0)  # training the module further after fit ...
    np.testing.assert_array_equal(fm.transform(X), before)  # ... does not change the fitted map
    np.testing.assert_allclose(fm.fit(X).transform(X), _features(net, X), rtol=1e-13, atol=1e-13)
    assert not np.allclose(fm.transform(X), before)


def test_get_feature_names_out_and_base_class():
    fm = FeatureMap(_net()).fit(_data())
    assert isinstance(fm, ExplicitFeatureMap) and isinstance(Nystroem(), ExplicitFeatureMap)
    assert list(fm.get_feature_names_out()) == [f"featuremap{i}" for i in range(WIDTH)]


@pytest.mark.parametrize(
    ("module_dtype", "X_dtype", "dtype", "expected"),
    [
        (torch.float32, np.float32, None, np.float32),
        (torch.float32, np.float64, None, np.float64),
        (torch.float64, np.float32, None, np.float64),
        (torch.float32, np.float32, "float64", np.float64),
        (torch.float64, np.float64, torch.float32, np.float64),
    ],
)
def test_output_dtype(module_dtype, X_dtype, dtype, expected):
    net, X = _net(module_dtype), _data().astype(X_dtype)
    fm = FeatureMap(net, dtype=dtype).fit(X)
    Phi = fm.transform(X)
    assert Phi.dtype == expected
    computes_in = next(fm.module_.parameters()).dtype
    assert fm.dtype_ == {torch.float32: np.float32, torch.float64: np.float64}[computes_in]
    assert next(net.parameters()).dtype == module_dtype  # the caller's module is not converted
    reference = _features(fm.module_, X.astype(fm.dtype_))
    tol = 1e-13 if fm.dtype_ == np.float64 else 1e-6
    np.testing.assert_allclose(Phi, reference, rtol=tol, atol=tol * np.abs(reference).max())


def test_a_module_without_parameters_follows_the_data_dtype():
    X = _data()
    assert FeatureMap(torch.nn.Tanh()).fit(X.astype(np.float32)).transform(X.astype(np.float32)).dtype == np.float32
    np.testing.assert_allclose(FeatureMap(torch.nn.Tanh()).fit_transform(X), np.tanh(X), rtol=1e-15)


def test_cnn_with_input_shape_on_digits():
    X = load_digits().data[:300] / 16.0
    cnn = _cnn()
    with torch.no_grad():  # running statistics that are not (0, 1), so that eval mode matters
        cnn[1].running_mean.fill_(0.3)
        cnn[1].running_var.fill_(2.0)
    fm = FeatureMap(cnn, input_shape=(1, 8, 8), batch_size=64).fit(X)
    assert fm.output_shape_ == (4, 4, 4) and fm.n_components_ == 64 and fm.input_shape_ == (1, 8, 8)
    Phi = fm.transform(X)
    assert Phi.dtype == np.float64  # a float32 module on float64 X: computed in float32, returned as float64
    reference = _features(cnn, X, (1, 8, 8))
    np.testing.assert_allclose(Phi, reference, rtol=1e-5, atol=1e-6 * np.abs(reference).max())
    model = KernelPCA(4, feature_map=fm).fit(X)
    expected = KernelPCA(4, kernel="linear").fit(Phi)
    np.testing.assert_allclose(model.eigenvalues_, expected.eigenvalues_, rtol=1e-8)


# ------------------------------------------------------------------ the models, against the linear path on phi(X)


@pytest.mark.parametrize("center", [True, False])
def test_kernel_pca_equals_linear_kernel_pca_on_the_features(center):
    net, X, X_new = _net(), _data(), _data(20, seed=1)
    Phi, Phi_new = _features(net, X), _features(net, X_new)
    model = KernelPCA(3, feature_map=FeatureMap(net), center=center).fit(X)
    expected = KernelPCA(3, kernel="linear", center=center).fit(Phi)
    np.testing.assert_allclose(model.eigenvalues_, expected.eigenvalues_, rtol=1e-10)
    _assert_equal_up_to_signs(model.transform(X_new), expected.transform(Phi_new))
    _assert_equal_up_to_signs(model.H_, expected.H_)
    assert model.gamma_ is None and model.preimage_ == "smoother"
    assert model.inverse_transform(model.transform(X_new[:3])).shape == (3, N_FEATURES)
    with pytest.raises(ValueError, match="^preimage: 'fixed_point' needs the rbf kernel"):
        KernelPCA(3, feature_map=FeatureMap(net), preimage="fixed_point").fit(X)


def test_kernel_pca_on_a_dask_array_equals_the_in_memory_fit():
    da = pytest.importorskip("dask.array")
    net, X = _net(), _data()
    model = KernelPCA(3, feature_map=FeatureMap(net)).fit(da.from_array(X, chunks=(40, -1)))
    expected = KernelPCA(3, feature_map=FeatureMap(net)).fit(X)
    np.testing.assert_allclose(model.eigenvalues_, expected.eigenvalues_, rtol=1e-10)
    np.testing.assert_allclose(model.H_, expected.H_, rtol=0, atol=1e-9 * np.abs(expected.H_).max())


def test_multiview_rkm_equals_linear_views_on_the_features():
    net, X = _net(), _data()
    Y = np.sin(X[:, :2])
    Phi = _features(net, X)
    model = MultiViewRKM(3, kernel=[FeatureMap(net), "linear"]).fit([X, Y])
    expected = MultiViewRKM(3, kernel=["linear", "linear"]).fit([Phi, Y])
    scale = np.abs(expected.H_).max()
    np.testing.assert_allclose(model.H_, expected.H_, rtol=0, atol=1e-10 * scale)
    np.testing.assert_allclose(
        model.transform([X[:10], Y[:10]]), expected.transform([Phi[:10], Y[:10]]), rtol=0, atol=1e-10 * scale
    )
    predicted = model.predict_view([X[:10], None], missing=1)[1]
    np.testing.assert_allclose(predicted, expected.predict_view([Phi[:10], None], missing=1)[1], atol=1e-10)


def test_gen_rkm_equals_linear_views_on_the_features():
    net, X = _net(), _data()
    Y = np.sin(X[:, :2])
    Phi = _features(net, X)
    model = GenRKM(3, kernel=[FeatureMap(net), "linear"], n_mixture=2, random_state=0).fit([X, Y])
    expected = GenRKM(3, kernel=["linear", "linear"], n_mixture=2, random_state=0).fit([Phi, Y])
    np.testing.assert_allclose(model.H_, expected.H_, rtol=0, atol=1e-10 * np.abs(expected.H_).max())
    generated, reference = model.sample(5, random_state=0), expected.sample(5, random_state=0)
    assert generated[0].shape == (5, N_FEATURES)  # the network view's pre-images are in input space
    np.testing.assert_allclose(generated[1], reference[1], rtol=0, atol=1e-10)


def test_lssvm_primal_equals_the_linear_map_on_the_features():
    net, X, X_new = _net(), _data(), _data(20, seed=1)
    y = np.sin(X[:, 0]) + X[:, 1]
    Phi = _features(net, X)
    model = LSSVMRegressor(solver="primal", feature_map=FeatureMap(net), lam=0.1).fit(X, y)
    expected = LSSVMRegressor(solver="primal", feature_map="linear", lam=0.1).fit(Phi, y)
    np.testing.assert_allclose(model.coef_, expected.coef_, rtol=0, atol=1e-10 * np.abs(expected.coef_).max())
    np.testing.assert_allclose(
        model.predict(X_new), expected.predict(_features(net, X_new)), rtol=0, atol=1e-10 * np.abs(y).max()
    )


# ------------------------------------------------------------------ clone, pickle, scikit-learn checks


def test_clone_deep_copies_the_module():
    net, X = _net(), _data()
    fm = FeatureMap(net, batch_size=8).fit(X)
    copy = clone(fm)
    assert copy.module is not net and copy.get_params()["batch_size"] == 8 and not hasattr(copy, "module_")
    for ours, theirs in zip(copy.module.parameters(), net.parameters(), strict=True):
        assert torch.equal(ours, theirs)
    np.testing.assert_array_equal(copy.fit(X).transform(X), fm.transform(X))
    with torch.no_grad():
        copy.module[0].weight.zero_()
    assert net[0].weight.abs().sum() > 0


def test_pickle_round_trip():
    X = _data()
    fm = FeatureMap(_net(), batch_size=32).fit(X)
    restored = pickle.loads(pickle.dumps(fm))
    np.testing.assert_array_equal(restored.transform(X), fm.transform(X))
    model = KernelPCA(2, feature_map=FeatureMap(_net())).fit(X)
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(model)).transform(X), model.transform(X))


@parametrize_with_checks([FeatureMap(torch.nn.Tanh()), FeatureMap(torch.nn.Tanh(), dtype="float64")])
def test_sklearn_compatible(estimator, check):
    check(estimator)


# ------------------------------------------------------------------ bad input


class _BatchMean(torch.nn.Module):
    """Returns one row for the whole batch: not a feature map."""

    def forward(self, x):
        return x.mean(dim=0)


class _Nonfinite(torch.nn.Module):
    def forward(self, x):
        return torch.log(x)


@pytest.mark.parametrize(
    ("make", "X", "message"),
    [
        (lambda: FeatureMap("net"), _data(), "'module' parameter of FeatureMap must be an instance"),
        (lambda: FeatureMap(_net(), batch_size=0), _data(), "'batch_size' parameter"),
        (lambda: FeatureMap(_net(), input_shape=(2, 2)), _data(), r"^input_shape: \(2, 2\) holds 4 values"),
        (lambda: FeatureMap(_net(), input_shape=(0, 5)), _data(), "^input_shape: must be a non-empty tuple"),
        (lambda: FeatureMap(_net(), dtype="float16"), _data(), "^dtype: must be None, 'float32' or 'float64'"),
        (lambda: FeatureMap(_net(torch.float16)), _data(), "^dtype: the module computes in torch.float16"),
        (lambda: FeatureMap(_net(), device="nowhere"), _data(), "^device: not a torch device"),
        (lambda: FeatureMap(_net()), _data()[:, :4], r"^module: failed on a batch of shape \(2, 4\)"),
        (lambda: FeatureMap(_BatchMean()), _data(), "^module: must return one tensor with a row per sample"),
        (lambda: FeatureMap(_net()), np.where(np.eye(150, 5) > 0, np.nan, _data()), "Input X contains NaN"),
        (lambda: FeatureMap(_Nonfinite()), -np.ones((3, 2)), "^module: returned NaN or infinity"),
    ],
)
def test_bad_input_raises_naming_the_argument(make, X, message):
    with pytest.raises(ValueError, match=message):
        make().fit_transform(X)


def test_transform_checks_the_width_and_finiteness():
    X = _data()
    fm = FeatureMap(_net()).fit(X)
    with pytest.raises(ValueError, match="X has 4 features, but FeatureMap is expecting 5"):
        fm.transform(X[:, :4])
    with pytest.raises(ValueError, match="Input X contains infinity"):
        fm.transform(np.where(np.eye(150, 5) > 0, np.inf, X))
    with pytest.raises(ValueError, match="feature_map"):
        KernelPCA(2, feature_map=torch.nn.Tanh()).fit(X)
