"""scikit-learn's estimator contract for every rkm estimator."""

from sklearn.base import clone
from sklearn.utils.estimator_checks import parametrize_with_checks

from rkm import DeepRKM, KernelPCA, LSSVMClassifier, LSSVMRegressor
from rkm.features import RandomFourierFeatures

ESTIMATORS = [
    KernelPCA(n_components=2, random_state=0),
    KernelPCA(n_components=2, eigen_solver="krylov", random_state=0),
    KernelPCA(n_components=2, kernel="precomputed"),
    KernelPCA(n_components=2, method="matrix_free", random_state=0),
    KernelPCA(n_components=2, method="nystrom", n_landmarks=5, random_state=0),
    KernelPCA(n_components=2, method="rff", n_features=50, random_state=0),
    LSSVMRegressor(),
    LSSVMRegressor(loo=True),
    LSSVMRegressor(mixed_precision=True),
    LSSVMRegressor(kernel="precomputed"),
    LSSVMRegressor(feature_map="linear"),
    LSSVMRegressor(feature_map=RandomFourierFeatures(n_components=50, random_state=0)),
    LSSVMClassifier(),
    LSSVMClassifier(coding="minimum_output", loo=True),
    LSSVMClassifier(kernel="precomputed"),
    DeepRKM(task="regression", n_passes=2),
    DeepRKM(task="classification", n_passes=2),
    DeepRKM("kpca_kpca_lssvm", n_components=(2, 2), task="regression", n_passes=2),
    DeepRKM("kpca_kpca_lssvm", method="reduced_set", n_components=(2, 1), n_reduced=10, max_iter=50,
            task="classification", random_state=0),
    DeepRKM("kpca_kpca_lssvm", method="feedforward", n_components=(2, 1), max_iter=200, task="regression",
            random_state=0),
]


# The LS-SVM dual system needs (1/eta) K + lam I positive definite: these checks pass as "precomputed kernels"
# matrices that are not kernel matrices (centred by a scalar, or cast to integers), and the fit refuses them.
_INDEFINITE_PRECOMPUTED = {
    "check_positive_only_tag_during_fit": "X - mean(X) of a Gram matrix is indefinite: lam too small for it",
    "check_estimators_dtypes": "a Gram matrix truncated to integers is indefinite: lam too small for it",
}


# The checks' training-score thresholds (R^2 > 0.5 / accuracy > 0.83 on their toy sets) measure fit quality:
# eq. 4.9 out of sample drops the coupling that the level-wise solution of eq. 4.11 was trained with, and M1
# stops after max_iter L-BFGS steps (kept small here so that the checks run fast).
_WEAK_TRAINING_FIT = {
    "levelwise": {"check_regressors_train": "eq. 4.9 predicts without the coupling of eq. 4.11: R^2 below 0.5"},
    "reduced_set": {"check_classifiers_train": "M1 after 50 L-BFGS steps: a training accuracy below 0.83"},
}


def _expected_failures(estimator):
    if isinstance(estimator, (LSSVMRegressor, LSSVMClassifier)) and estimator.kernel == "precomputed":
        return _INDEFINITE_PRECOMPUTED
    if isinstance(estimator, DeepRKM) and estimator.architecture == "kpca_kpca_lssvm":
        return _WEAK_TRAINING_FIT.get(estimator.method, {})
    return {}


@parametrize_with_checks(ESTIMATORS, expected_failed_checks=_expected_failures)
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)


def test_get_set_params_round_trip():
    model = KernelPCA(3, gamma=0.5, eta=2.0)
    assert model.get_params()["eta"] == 2.0
    model.set_params(eta=4.0, scaling="score")
    assert clone(model).get_params()["eta"] == 4.0
    assert clone(model).get_params()["scaling"] == "score"


# ------------------------------------------------------------------------------------------------ conventions

import inspect  # noqa: E402
import pathlib  # noqa: E402
import re  # noqa: E402

import pytest  # noqa: E402

import rkm  # noqa: E402
from rkm.features import Nystroem  # noqa: E402

PUBLIC_ESTIMATORS = [getattr(rkm, name) for name in rkm.__all__ if isinstance(getattr(rkm, name), type)] + [
    Nystroem,
    RandomFourierFeatures,
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
    required = {"n_components": 2, "lag": 3}
    parameters = inspect.signature(cls.__init__).parameters.values()
    return cls(**{p.name: required[p.name] for p in parameters if p.default is inspect.Parameter.empty
                  and p.name != "self"})
