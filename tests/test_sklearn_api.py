"""scikit-learn's estimator contract for every rkm estimator: parametrize_with_checks on each (every expected
failure with its reason) and rkm's own conventions (keyword-only parameters, names from the vocabulary table of
CONTRIBUTING.md, scikit-learn's parameter validation)."""

import inspect
import pathlib
import re
import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics.pairwise import rbf_kernel
from sklearn.utils.estimator_checks import parametrize_with_checks

import rkm
from rkm import (
    ConstrainedDeepRKM,
    DeepRKM,
    DeepRKMClassifier,
    DeepRKMRegressor,
    KernelAutoencoder,
    KernelPCA,
    KernelPMF,
    KernelSVD,
    LSSVMClassifier,
    LSSVMClassifierCV,
    LSSVMRegressor,
    LSSVMRegressorCV,
)
from rkm.features import Nystroem, RandomFourierFeatures

# A callable kernel (kernel(A, B) -> Gram matrix) at module level, so that the checks can pickle the estimators.


def _rbf_gram(A, B):
    return rbf_kernel(A, B, gamma=0.5)


ESTIMATORS = [
    KernelPCA(n_components=2, random_state=0),
    KernelPCA(n_components=2, solver="krylov", random_state=0),
    KernelPCA(n_components=2, kernel="precomputed"),
    KernelPCA(n_components=2, kernel=_rbf_gram),
    KernelPCA(n_components=2, kernel_storage="matrix_free", random_state=0),
    KernelPCA(n_components=2, feature_map=Nystroem(n_components=5, random_state=0)),
    KernelPCA(n_components=2, feature_map=RandomFourierFeatures(n_components=50, orthogonal=True, random_state=0)),
    LSSVMRegressor(),
    LSSVMRegressor(loo=True),
    LSSVMRegressor(mixed_precision=True),
    LSSVMRegressor(kernel="precomputed"),
    LSSVMRegressor(feature_map="linear"),
    LSSVMRegressor(feature_map=RandomFourierFeatures(n_components=50, random_state=0)),
    LSSVMClassifier(),
    LSSVMClassifier(coding="minimum_output", loo=True),
    LSSVMClassifier(kernel="precomputed"),
    LSSVMRegressor(robust="hampel"),
    LSSVMClassifier(probability=True),
    LSSVMRegressorCV(lams=[1e-3, 1e-1, 1.0], gammas=[0.1, 1.0]),
    LSSVMClassifierCV(lams=[1e-3, 1e-1, 1.0], gammas=[0.1, 1.0]),
    KernelSVD(kernel="linear"),
    KernelSVD(),
    KernelSVD(2, kernel="rbf", scaling="score"),
    KernelSVD(kernel="precomputed"),
    KernelSVD(1, kernel="rbf", solver="arpack", random_state=0),
    KernelSVD(2, kernel=_rbf_gram),
    KernelPMF(),
    KernelPMF(kernel="laplacian", gamma=0.5),
    KernelPMF(kernel="precomputed"),
    KernelPMF(kernel=_rbf_gram),
    DeepRKM(task="regression", n_passes=2),
    DeepRKM(task="classification", n_passes=2),
    DeepRKM("kpca_kpca_lssvm", n_components=(2, 2), task="regression", n_passes=2),
    DeepRKM(
        "kpca_kpca_lssvm",
        solver="reduced_set",
        n_components=(2, 1),
        n_reduced=10,
        max_iter=50,
        task="classification",
        random_state=0,
    ),
    DeepRKM(
        "kpca_kpca_lssvm", solver="feedforward", n_components=(2, 1), max_iter=200, task="regression", random_state=0
    ),
    DeepRKMRegressor(n_passes=2),
    DeepRKMClassifier(n_passes=2),
    DeepRKMClassifier(n_components=(3, 1), probability=True),
    ConstrainedDeepRKM((2, 1), max_iter=50),
    KernelAutoencoder(max_iter=20, random_state=0),
    KernelAutoencoder(kernel="precomputed", max_iter=20, random_state=0),
    Nystroem(5, random_state=0),
    Nystroem(5, landmarks="kmeans++", random_state=0),
    Nystroem(5, landmarks="renyi", random_state=0),
    RandomFourierFeatures(20, random_state=0),
    RandomFourierFeatures(20, orthogonal=True, random_state=0),
    # The multi-view model on one array: view_columns splits its columns into views (None: one view).
    rkm.MultiViewRKM(2),
    rkm.MultiViewRKM(2, kernel=("rbf", "linear"), view_columns=2),
    rkm.MultiViewRKM(2, kernel="linear", solver="primal_eig", view_columns=2),
    rkm.MultiViewRKM(2, kernel=("rbf", "linear"), solver="dual_stiefel", view_columns=2, random_state=0),
    rkm.MultiViewRKM(2, kernel=(RandomFourierFeatures(20, random_state=0), "linear"), view_columns=2),
    rkm.GenRKM(2, view_columns=2, n_neighbors=2, n_mixture=2, random_state=0),
    rkm.RKMForecaster(3, n_components=2),
]

# rkm.torch's estimators when the optional PyTorch is installed (float64, so that a transform of a subset equals
# that of the whole at the checks' 1e-7: float32 matrix products round differently by batch size).
try:
    import torch
except ImportError:
    TORCH_ESTIMATORS = []
else:
    from rkm.torch import VAE, BetaVAE, ExplicitGenRKM, FeatureMap

    TORCH_ESTIMATORS = [
        ExplicitGenRKM(2, max_epochs=2, n_mixture=2, dtype="float64", random_state=0),
        VAE(2, max_epochs=2, dtype="float64", random_state=0),
        BetaVAE(2, max_epochs=2, dtype="float64", random_state=0),
        FeatureMap(torch.nn.Tanh()),
    ]
ESTIMATORS += TORCH_ESTIMATORS

# RKMForecaster.fit reads a 2-D X as n_features series (time along the rows) and predict takes a number of
# steps: the checks that call predict with an X, or that expect a 1-D X to be refused, cannot apply.
_PREDICT_TAKES_STEPS = "predict takes a number of steps (or steps and a context segment), not an X"
_FORECASTER_FAILURES = {
    **dict.fromkeys(
        (
            "check_estimators_dtypes",
            "check_dtype_object",
            "check_estimators_nan_inf",
            "check_estimators_pickle",
            "check_f_contiguous_array_estimator",
            "check_methods_sample_order_invariance",
            "check_methods_subset_invariance",
            "check_dict_unchanged",
            "check_fit_idempotent",
            "check_fit2d_predict1d",
            "check_n_features_in_after_fitting",
        ),
        _PREDICT_TAKES_STEPS,
    ),
    "check_fit1d": "a 1-D array is a univariate series, which fit accepts",
}


# The LS-SVM dual system needs (1/eta) K + lam I positive definite: these checks pass as "precomputed kernels"
# matrices that are not kernel matrices (centred by a scalar, or cast to integers), and the fit refuses them.
_INDEFINITE_PRECOMPUTED = {
    "check_positive_only_tag_during_fit": "X - mean(X) of a Gram matrix is indefinite: lam too small for it",
    "check_estimators_dtypes": "a Gram matrix truncated to integers is indefinite: lam too small for it",
}

# The checks pass K²AE "Gram matrices" that are not kernel matrices (centred by a scalar, or cast to integers),
# which the fit refuses.
_K2AE_FAILURES = {
    "check_positive_only_tag_during_fit": "X - mean(X) of a Gram matrix is indefinite",
    "check_estimators_dtypes": "a Gram matrix truncated to integers is indefinite",
}

# The checks' training-score thresholds (R^2 > 0.5 / accuracy > 0.83 on their toy sets) measure fit quality:
# the level-wise kpca_kpca_lssvm regresses on two kernel PCA features of eq. 4.9, and M1 stops after max_iter
# L-BFGS steps (kept small here so that the checks run fast).
_WEAK_TRAINING_FIT = {
    "levelwise": {"check_regressors_train": "level 3 regresses on 2 kernel PCA features of eq. 4.9: R^2 below 0.5"},
    "reduced_set": {"check_classifiers_train": "M1 after 50 L-BFGS steps: a training accuracy below 0.83"},
}


# Platt scaling fits its sigmoids on out-of-fold decision values, as SVC(probability=True) does.
_PLATT_FAILURES = {
    "check_classifiers_train": "as SVC(probability=True): sigmoids fitted on out-of-fold decisions can move the "
    "argmax of predict_proba off predict near the boundary",
    "check_sample_weight_equivalence_on_dense_data": "the internal CV of Platt scaling splits repeated samples "
    "differently from weighted ones",
    "check_sample_weight_equivalence_on_sparse_data": "the internal CV of Platt scaling splits repeated samples "
    "differently from weighted ones",
}


def _expected_failures(estimator):
    if isinstance(estimator, LSSVMClassifier) and estimator.probability:
        return _PLATT_FAILURES
    if isinstance(estimator, DeepRKMClassifier) and estimator.probability:
        return {"check_classifiers_train": _PLATT_FAILURES["check_classifiers_train"]}
    if isinstance(estimator, (LSSVMRegressor, LSSVMClassifier)) and estimator.kernel == "precomputed":
        return _INDEFINITE_PRECOMPUTED
    if isinstance(estimator, KernelAutoencoder) and estimator.kernel == "precomputed":
        return _K2AE_FAILURES
    if isinstance(estimator, rkm.RKMForecaster):
        return _FORECASTER_FAILURES
    if isinstance(estimator, DeepRKM) and estimator.architecture == "kpca_kpca_lssvm":
        return _WEAK_TRAINING_FIT.get(estimator.solver, {})
    return {}


@parametrize_with_checks(ESTIMATORS, expected_failed_checks=_expected_failures)
def test_sklearn_compatible_estimator(estimator, check):
    with warnings.catch_warnings():
        # The iterative fits run a few iterations on the checks' data (ConstrainedDeepRKM 50, the KAE 20).
        warnings.simplefilter("ignore", ConvergenceWarning)
        check(estimator)


def test_every_public_estimator_is_checked():
    checked = {type(estimator) for estimator in ESTIMATORS}
    assert set(PUBLIC_ESTIMATORS) <= checked


def test_get_set_params_round_trip():
    model = KernelPCA(3, gamma=0.5, eta=2.0)
    assert model.get_params()["eta"] == 2.0
    model.set_params(eta=4.0, scaling="score")
    assert clone(model).get_params()["eta"] == 4.0
    assert clone(model).get_params()["scaling"] == "score"


# ------------------------------------------------------------------------------------------------ conventions

PUBLIC_ESTIMATORS = [getattr(rkm, name) for name in rkm.__all__ if isinstance(getattr(rkm, name), type)] + [
    Nystroem,
    RandomFourierFeatures,
    *(type(estimator) for estimator in TORCH_ESTIMATORS),
]


def _vocabulary():
    """Every backticked identifier in the vocabulary section of CONTRIBUTING.md."""
    text = (pathlib.Path(__file__).parents[1] / "CONTRIBUTING.md").read_text()
    section = text.split("## Vocabulary", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"`([a-z_][a-z0-9_]*)`", section))


@pytest.mark.parametrize("cls", PUBLIC_ESTIMATORS, ids=lambda cls: cls.__name__)
def test_parameters_after_the_first_are_keyword_only(cls):
    parameters = list(inspect.signature(cls.__init__).parameters.values())[1:]
    kinds = [parameter.kind for parameter in parameters]
    assert all(kind == inspect.Parameter.KEYWORD_ONLY for kind in kinds[1:]), cls.__name__


@pytest.mark.parametrize("cls", PUBLIC_ESTIMATORS, ids=lambda cls: cls.__name__)
def test_parameter_names_come_from_the_vocabulary(cls):
    names = set(inspect.signature(cls.__init__).parameters) - {"self"}
    assert names <= _vocabulary(), sorted(names - _vocabulary())


@pytest.mark.parametrize("cls", PUBLIC_ESTIMATORS, ids=lambda cls: cls.__name__)
def test_validate_params_is_scikit_learns(cls):
    estimator = _default_instance(cls)
    assert set(cls._parameter_constraints) == set(estimator.get_params(deep=False))
    assert estimator._validate_params() is None
    first = next(iter(estimator.get_params(deep=False)))
    with pytest.raises(ValueError, match=first):
        estimator.set_params(**{first: object()})._validate_params()


def _default_instance(cls):
    """An instance with the parameters that have no default filled in."""
    parameters = inspect.signature(cls.__init__).parameters.values()
    required = {p.name for p in parameters if p.default is inspect.Parameter.empty and p.name != "self"}
    values = {"n_components": 2, "lag": 3}
    if "module" in required:  # rkm.torch.FeatureMap
        import torch

        values["module"] = torch.nn.Tanh()
    return cls(**{name: values[name] for name in required})


# ------------------------------------------------------------------------------- array layouts and ownership

_LAYOUT_ESTIMATORS = [
    KernelPCA(n_components=2, random_state=0),
    LSSVMRegressor(),
    LSSVMClassifier(),
    KernelSVD(2, kernel="rbf"),
    KernelPMF(),
    DeepRKM(task="regression", n_passes=2),
    ConstrainedDeepRKM((2, 1), max_iter=30, random_state=0),
    KernelAutoencoder(max_iter=10, random_state=0),
    Nystroem(5, random_state=0),
    RandomFourierFeatures(20, random_state=0),
]


def _layout_data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 3))
    return X, np.where(X[:, 0] + 0.3 * rng.normal(size=30) > 0, 1, 0)


def _output(estimator, X):
    """What the fitted estimator gives for X: predictions where it predicts, else its transform or scores."""
    for method in ("predict", "transform", "score_samples"):
        if hasattr(estimator, method):
            return np.asarray(getattr(estimator, method)(X), dtype=float)
    raise AssertionError(f"{type(estimator).__name__} has no output method")


def _fit(estimator, X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return clone(estimator).fit(X, y)


@pytest.mark.parametrize("estimator", _LAYOUT_ESTIMATORS, ids=lambda est: type(est).__name__)
def test_fortran_and_strided_inputs_give_the_c_ordered_result(estimator):
    X, y = _layout_data()
    expected = _output(_fit(estimator, X, y), X)
    wide = np.repeat(X, 2, axis=1)  # columns 0, 2, 4 of it are X: a strided, non-contiguous view
    for layout in (np.asfortranarray(X), wide[:, ::2]):
        assert not layout.flags.c_contiguous
        np.testing.assert_allclose(_output(_fit(estimator, layout, y), layout), expected, rtol=1e-10, atol=1e-12)


def test_two_column_targets_in_fortran_order_are_accepted():
    # A two-column pandas DataFrame's values are Fortran-ordered.
    X, _ = _layout_data()
    Y = np.asfortranarray(np.column_stack([X[:, 0], X[:, 1] ** 2]))
    expected = LSSVMRegressor().fit(X, np.ascontiguousarray(Y)).predict(X)
    np.testing.assert_allclose(LSSVMRegressor().fit(X, Y).predict(X), expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(LSSVMRegressor().fit(X, Y[:, ::-1]).predict(X), expected[:, ::-1], rtol=1e-12)


@pytest.mark.parametrize("estimator", _LAYOUT_ESTIMATORS, ids=lambda est: type(est).__name__)
def test_changing_the_training_arrays_after_fit_does_not_change_the_model(estimator):
    X, y = _layout_data()
    X_train, y_train = X.copy(), y.copy()
    fitted = _fit(estimator, X_train, y_train)
    before = _output(fitted, X)
    X_train[:] = 0.0
    y_train[:] = 0
    np.testing.assert_array_equal(_output(fitted, X), before)


def test_multiview_models_keep_copies_of_their_training_data():
    rng = np.random.default_rng(0)
    views = [rng.normal(size=(25, 3)), rng.normal(size=(25, 2))]
    model = rkm.MultiViewRKM(2).fit([view.copy() for view in views])
    kept = [view.copy() for view in views]
    model_b = rkm.MultiViewRKM(2).fit(kept)
    for view in kept:
        view[:] = 0.0
    np.testing.assert_array_equal(model_b.transform(views), model.transform(views))
    series = np.sin(np.linspace(0, 12, 80))
    forecaster = rkm.RKMForecaster(5, n_components=2).fit(series.copy())
    mutable = series.copy()
    forecaster_b = rkm.RKMForecaster(5, n_components=2).fit(mutable)
    mutable[:] = 0.0
    np.testing.assert_array_equal(forecaster_b.predict(10), forecaster.predict(10))
