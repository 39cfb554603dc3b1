"""rkm.RKMForecaster: exact forecasts of a sum of sinusoids by all four solvers, the rescaling ablation,
multivariate series, forecasts from a new segment (context), standardization and its ddof, huge and tiny values,
shapes, bad input, and rkm.datasets.load_santafe_laser.

RKMForecaster.fit takes a series, not (X, y): scikit-learn's estimator checks run in tests/test_sklearn_api.py,
less those that call predict with an X (listed in the class's Notes).
"""

import sys

import numpy as np
import pytest

from rkm import RKMForecaster, datasets
from rkm.features import Nystroem, RandomFourierFeatures

SOLVERS = ("primal_eig", "dual_eig", "primal_stiefel", "dual_stiefel")


@pytest.fixture(scope="module")
def sines():
    """x_t = sin(2 pi t + phi_1) + 0.2 sin(2 pi 2.3 t + phi_2) sampled every 0.05: 400 values to train, 100 to
    test. It obeys an exact linear recursion of order 4, so lagged windows span a 4-dimensional space."""
    series = datasets.make_sum_of_sines(
        500, frequencies=(1.0, 2.3), amplitudes=(1.0, 0.2), dt=0.05, random_state=0
    ).data
    return series[:400], series[400:]


@pytest.fixture(scope="module")
def sine_forecasts(sines):
    train, _ = sines
    return {
        solver: RKMForecaster(40, n_components=4, kernel="linear", solver=solver, random_state=0).fit(train)
        for solver in SOLVERS
    }


def test_all_solvers_forecast_a_sum_of_sines_exactly(sines, sine_forecasts):
    _, test = sines
    forecasts = {solver: model.predict(100) for solver, model in sine_forecasts.items()}
    for solver, forecast in forecasts.items():
        assert forecast.shape == (100,)
        # Measured test MSE: about 1e-28 (eig solvers, dual Stiefel) and 1e-19 (primal Stiefel).
        assert np.mean((forecast - test) ** 2) < 1e-16
        np.testing.assert_allclose(forecast, forecasts["dual_eig"], rtol=0, atol=1e-8)
        np.testing.assert_allclose(
            sine_forecasts[solver].eigenvalues_, sine_forecasts["dual_eig"].eigenvalues_, rtol=1e-8
        )
    assert {model.solver_ for model in sine_forecasts.values()} == set(SOLVERS)


def test_latent_components_agree_across_solvers(sine_forecasts):
    reference = sine_forecasts["dual_eig"].model_.H_
    for solver, model in sine_forecasts.items():
        np.testing.assert_allclose(model.model_.H_, reference, atol=1e-6, err_msg=solver)


def test_without_rescaling_the_forecasts_collapse(sines, sine_forecasts):
    train, test = sines
    plain = RKMForecaster(40, n_components=4, kernel="linear", solver="primal_eig", rescale=False).fit(train)
    # The paper's Fig. 7: the latents are those of the rescaled model up to a scale per component...
    rescaled = sine_forecasts["primal_eig"]
    np.testing.assert_allclose(plain.model_.H_ * np.sqrt(plain.eigenvalues_), rescaled.model_.H_, atol=1e-10)
    # ... but the forecasts lose the variance of the series (measured MSE 0.516 against a variance of 0.516).
    error = np.mean((plain.predict(100) - test) ** 2)
    assert error > 0.5 * np.var(test)
    assert error > 1e10 * np.mean((rescaled.predict(100) - test) ** 2)


def test_auto_solver_and_implicit_kernels(sines):
    train, test = sines
    assert RKMForecaster(40, n_components=4, kernel="linear").fit(train).solver_ == "primal_eig"
    model = RKMForecaster(20, n_components=30, kernel="rbf", gamma=0.05).fit(train)
    assert model.solver_ == "dual_eig" and model.eigenvalues_.shape == (30,)
    assert np.mean((model.predict(50) - test[:50]) ** 2) < 1e-3 * np.var(test)


def test_random_fourier_features_primal_equals_dual(sines):
    train, _ = sines
    rff = RandomFourierFeatures(n_components=60, kernel="rbf", gamma=0.1, orthogonal=True, random_state=0)
    primal, dual = (
        RKMForecaster(10, n_components=8, feature_map=rff, solver=solver, random_state=0).fit(train)
        for solver in ("primal_eig", "dual_eig")
    )
    np.testing.assert_allclose(primal.eigenvalues_, dual.eigenvalues_, rtol=1e-10)
    np.testing.assert_allclose(primal.predict(30), dual.predict(30), atol=1e-8)
    # The forecaster fits a clone of the feature map on the windows: the same features for both solvers.
    assert not hasattr(rff, "random_weights_") and primal.feature_map_ is not rff
    np.testing.assert_array_equal(primal.feature_map_.random_weights_, dual.feature_map_.random_weights_)
    assert primal.model_.view_dims_ == [60, 1]
    nystroem = RKMForecaster(
        10, n_components=8, feature_map=Nystroem(n_components=50, gamma=0.1, random_state=0), random_state=0
    ).fit(train)
    # Nyström keeps the landmarks' numerically positive directions: at most 50 features.
    assert 0 < nystroem.model_.view_dims_[0] <= 50 and nystroem.model_.view_dims_[1] == 1
    assert np.all(np.isfinite(nystroem.predict(5)))


def test_multivariate_series(sines):
    t = 0.05 * np.arange(300)
    series = np.column_stack([np.sin(2 * np.pi * t) + 3.0, 2.0 * np.cos(2 * np.pi * 1.7 * t) - 1.0])
    model = RKMForecaster(12, n_components=4, kernel="linear", random_state=0).fit(series[:250])
    assert model.n_series_ == 2 and model.window_.shape == (12, 2)
    forecast = model.predict(50)
    assert forecast.shape == (50, 2)
    np.testing.assert_allclose(forecast, series[250:], atol=1e-8)
    # A 2-D series of one column keeps its second axis.
    assert RKMForecaster(12, n_components=2, kernel="linear").fit(series[:250, :1]).predict(5).shape == (5, 1)


def test_standardization_makes_forecasts_affine_equivariant(sines):
    train, _ = sines
    params = dict(lag=15, n_components=10, kernel="rbf", gamma=0.1)
    model = RKMForecaster(**params).fit(train)
    shifted = RKMForecaster(**params).fit(3.0 * train + 10.0)
    np.testing.assert_allclose(shifted.mean_, 3.0 * model.mean_ + 10.0)
    np.testing.assert_allclose(shifted.scale_, 3.0 * model.scale_)
    np.testing.assert_allclose(shifted.predict(20), 3.0 * model.predict(20) + 10.0, rtol=1e-9)
    raw = RKMForecaster(**params, standardize=False).fit(train)
    np.testing.assert_array_equal(raw.mean_, [0.0])
    np.testing.assert_array_equal(raw.scale_, [1.0])
    # A constant series is scaled by 1, not divided by zero.
    constant = np.column_stack([train, np.full(train.size, 2.0)])
    assert RKMForecaster(**params).fit(constant).scale_[1] == 1.0


def _invalid(name):
    """The start of scikit-learn's InvalidParameterError message for parameter `name`."""
    return rf"^The '{name}' parameter of RKMForecaster must be"


@pytest.mark.parametrize(
    "series,params,match",
    [
        (np.arange(10.0), dict(lag=10), "^series: needs at least lag [+] 2 = 12 time steps"),
        (np.arange(11.0), dict(lag=10), "^series: needs at least lag [+] 2 = 12 time steps"),
        (np.r_[np.arange(30.0), np.nan], dict(lag=5), "^series: contains NaN or infinity"),
        (np.r_[np.arange(30.0), np.inf], dict(lag=5), "^series: contains NaN or infinity"),
        (np.ones((30, 2, 2)), dict(lag=5), "^series: must be a non-empty 1-D or 2-D array"),
        (np.array(["a"] * 30), dict(lag=5), "^series: must be an array of real numbers"),
        (np.arange(30.0), dict(lag=0), _invalid("lag")),
        (np.arange(30.0), dict(lag=2.5), _invalid("lag")),
        (np.arange(30.0), dict(lag=True), _invalid("lag")),
        (np.arange(30.0), dict(lag=5, feature_map="rff"), _invalid("feature_map")),
        (np.arange(30.0), dict(lag=5, standardize="yes"), _invalid("standardize")),
        (np.arange(30.0), dict(lag=5, solver="primal_eig"), "^solver: 'primal_eig' needs explicit feature maps"),
        (np.arange(30.0), dict(lag=5, n_components=0), _invalid("n_components")),
        (np.arange(30.0), dict(lag=5, kernel="foo"), _invalid("kernel")),
        (np.arange(30.0), dict(lag=5, kernel="poly", degree=-1.0), _invalid("degree")),
        (np.arange(30.0), dict(lag=5, gamma=-1.0), "^gamma: must be a positive finite number"),
        (np.arange(30.0), dict(lag=5, output_kernel="bar"), _invalid("output_kernel")),
        (np.arange(30.0), dict(lag=5, output_kernel=3), _invalid("output_kernel")),
        (np.arange(30.0), dict(lag=5, n_neighbors=0), _invalid("n_neighbors")),
        # The feature map validates its own parameters (nested validation is not skipped).
        (
            np.arange(30.0),
            dict(lag=5, feature_map=RandomFourierFeatures(kernel="poly")),
            "^The 'kernel' parameter of RandomFourierFeatures must be|^kernel: must be one of rbf, laplacian",
        ),
    ],
)
def test_bad_input(series, params, match):
    params = {"n_components": 2, **params}
    with pytest.raises(ValueError, match=match):
        RKMForecaster(**params).fit(series)


# ------------------------------------------------------------------------------------- forecasts from a context


def test_a_context_of_the_training_tail_reproduces_predict(sines, sine_forecasts):
    train, _ = sines
    for solver, model in sine_forecasts.items():
        expected = model.predict(30)
        np.testing.assert_array_equal(model.predict(30, context=train[-40:]), expected, err_msg=solver)
        # A longer segment starts from its last lag values; a (T, 1) segment of a 1-D series is accepted too.
        np.testing.assert_array_equal(model.predict(30, context=train), expected, err_msg=solver)
        np.testing.assert_array_equal(model.predict(30, context=train[-50:, None]), expected, err_msg=solver)


def test_a_context_of_another_segment_follows_the_recursion_on_it(sines):
    train, _ = sines
    model = RKMForecaster(15, n_components=10, kernel="rbf", gamma=0.1).fit(train)
    segment = datasets.make_sum_of_sines(60, frequencies=(1.0, 2.3), amplitudes=(0.7, 0.3), random_state=5).data
    # Oracle: the recursion by hand, each step the output view inferred from the last 15 standardized values.
    window, expected = (segment[-15:] - model.mean_) / model.scale_, []
    for _ in range(20):
        z = model.model_.predict_view([window[None, :], None], missing=1)[0, 0]
        expected.append(z * model.scale_[0] + model.mean_[0])
        window = np.r_[window[1:], z]
    forecast = model.predict(20, context=segment)
    np.testing.assert_allclose(forecast, expected, rtol=1e-12, atol=1e-12)
    assert np.max(np.abs(forecast - model.predict(20))) > 0.1  # not the continuation of the training series


def test_a_context_with_other_phases_is_forecast_exactly_by_the_linear_model(sines, sine_forecasts):
    # Any sum of the same two sinusoids obeys the same order-4 recursion: the linear model trained on one series
    # forecasts another (other phases and amplitudes) exactly, without a refit.
    series = datasets.make_sum_of_sines(
        200, frequencies=(1.0, 2.3), amplitudes=(0.5, 0.4), dt=0.05, random_state=7
    ).data
    for solver, model in sine_forecasts.items():
        forecast = model.predict(50, context=series[:150])
        np.testing.assert_allclose(forecast, series[150:], atol=1e-7, err_msg=solver)


def test_multivariate_context(sines):
    t = 0.05 * np.arange(300)
    series = np.column_stack([np.sin(2 * np.pi * t) + 3.0, 2.0 * np.cos(2 * np.pi * 1.7 * t) - 1.0])
    model = RKMForecaster(12, n_components=4, kernel="linear", random_state=0).fit(series[:200])
    np.testing.assert_allclose(model.predict(40, context=series[:260]), series[260:], atol=1e-8)


@pytest.mark.parametrize(
    "context,match",
    [
        (np.arange(39.0), "^context: needs at least lag = 40 time steps"),
        (np.ones((50, 2)), r"^context: has 2 series \(columns\) but the model was fitted on 1"),
        (np.r_[np.arange(50.0), np.nan], "^context: contains NaN or infinity"),
        (np.array(["a"] * 50), "^context: must be an array of real numbers"),
        (np.ones((50, 1, 1)), "^context: must be a non-empty 1-D or 2-D array"),
    ],
)
def test_bad_context(sine_forecasts, context, match):
    with pytest.raises(ValueError, match=match):
        sine_forecasts["dual_eig"].predict(5, context=context)


# ------------------------------------------------------------------------------- standardization, ddof, range


def test_ddof_one_is_the_sample_standard_deviation(sines):
    train, _ = sines
    T, lag, s = train.size, 40, 4
    population = RKMForecaster(lag, n_components=s, kernel="linear", solver="dual_eig").fit(train)
    sample = RKMForecaster(lag, n_components=s, kernel="linear", solver="dual_eig", ddof=1).fit(train)
    assert population.ddof == 0  # the default: NumPy's and StandardScaler's convention
    np.testing.assert_allclose(population.scale_, [train.std()], rtol=1e-14)
    np.testing.assert_allclose(sample.scale_, [train.std(ddof=1)], rtol=1e-14)
    # Oracle: the summed centred linear kernels of the windows and targets standardized by hand with ddof=1.
    z = (train - train.mean()) / train.std(ddof=1)
    windows = np.lib.stride_tricks.sliding_window_view(z[:-1], lag)
    targets = z[lag:, None]
    K = sum((A - A.mean(axis=0)) @ (A - A.mean(axis=0)).T for A in (windows, targets))
    np.testing.assert_allclose(sample.eigenvalues_, np.linalg.eigvalsh(K)[::-1][:s], rtol=1e-12)
    # Linear kernels: the eigenvalues scale by (T - 1) / T and the forecasts do not change.
    np.testing.assert_allclose(sample.eigenvalues_, population.eigenvalues_ * (T - 1) / T, rtol=1e-12)
    np.testing.assert_allclose(sample.predict(50), population.predict(50), atol=1e-10)
    with pytest.raises(ValueError, match=_invalid("ddof")):
        RKMForecaster(lag, n_components=s, ddof=-1).fit(train)


@pytest.mark.parametrize("factor", [1e160, 1e-160])
def test_huge_and_tiny_series_are_standardized_without_overflow(sines, factor):
    train, _ = sines
    params = dict(lag=15, n_components=10, kernel="rbf", gamma=0.1)
    model, scaled = RKMForecaster(**params).fit(train), RKMForecaster(**params).fit(train * factor)
    np.testing.assert_allclose(scaled.scale_, model.scale_ * factor, rtol=1e-12)
    np.testing.assert_allclose(scaled.predict(20), model.predict(20) * factor, rtol=1e-8)


def test_unstandardized_overflow_is_reported(sines):
    train, _ = sines
    with pytest.raises(ValueError, match=r"^series: values up to 1e\+160 overflow float64 in the kernels"):
        RKMForecaster(15, n_components=2, standardize=False).fit(train / np.abs(train).max() * 1e160)


def test_bad_steps(sine_forecasts):
    model = sine_forecasts["dual_eig"]
    for steps in (0, -1, 2.0, True, None):
        with pytest.raises(ValueError, match="^steps: must be a positive int"):
            model.predict(steps)


def test_load_santafe_laser():
    pytest.importorskip("reservoirpy")
    series = datasets.load_santafe_laser()
    assert series.shape == (10093,) and series.dtype == np.float64
    np.testing.assert_array_equal(series[:5], [86.0, 141.0, 95.0, 41.0, 22.0])


def test_load_santafe_laser_without_reservoirpy(monkeypatch):
    monkeypatch.setitem(sys.modules, "reservoirpy", None)
    monkeypatch.setitem(sys.modules, "reservoirpy.datasets", None)
    with pytest.raises(ImportError, match="pip install reservoirpy"):
        datasets.load_santafe_laser()
