"""scikit-learn's estimator contract for every rkm estimator."""

from sklearn.base import clone
from sklearn.utils.estimator_checks import parametrize_with_checks

from rkm import KernelPCA

ESTIMATORS = [
    KernelPCA(n_components=2, random_state=0),
    KernelPCA(n_components=2, eigen_solver="krylov", random_state=0),
    KernelPCA(n_components=2, kernel="precomputed"),
    KernelPCA(n_components=2, method="matrix_free", random_state=0),
    KernelPCA(n_components=2, method="nystrom", n_landmarks=5, random_state=0),
    KernelPCA(n_components=2, method="rff", n_features=50, random_state=0),
]


@parametrize_with_checks(ESTIMATORS)
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)


def test_get_set_params_round_trip():
    model = KernelPCA(3, gamma=0.5, eta=2.0)
    assert model.get_params()["eta"] == 2.0
    model.set_params(eta=4.0, scaling="score")
    assert clone(model).get_params()["eta"] == 4.0
    assert clone(model).get_params()["scaling"] == "score"
