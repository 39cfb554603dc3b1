"""Tests of rkm.metrics: loop-based oracles, known answers, invariances and bad input."""

import functools
import math
from collections import Counter

import numpy as np
import pytest

from rkm import metrics

# A warning (convergence, division by zero, empty slice) is a defect of the metric here.
pytestmark = pytest.mark.filterwarnings("error")

SIZES = (2, 3, 4, 3)


def make_factors(n_samples=1500, sizes=SIZES, seed=0):
    """Independent uniform discrete factors, one column per size."""
    rng = np.random.default_rng(seed)
    return np.column_stack([rng.integers(0, size, n_samples) for size in sizes])


def factor_codes(factors):
    """The factors themselves as codes, each scaled to [0, 1]."""
    return factors / factors.max(axis=0)


def hadamard_codes(factors):
    """Four centred factor codes mixed by a Hadamard rotation: every code weighs every factor by +-1/2."""
    hadamard = np.array([[1, 1, 1, 1], [1, -1, 1, -1], [1, 1, -1, -1], [1, -1, -1, 1]]) / 2
    codes = factor_codes(factors)
    return (codes - codes.mean(axis=0)) @ hadamard


def noisy_codes(factors, seed=2):
    """Continuous codes: factors randomly rotated plus noise, and one pure-noise column (no value on a bin edge)."""
    rng = np.random.default_rng(seed)
    rotation, _ = np.linalg.qr(rng.normal(size=(factors.shape[1],) * 2))
    mixed = factor_codes(factors) @ rotation + 0.2 * rng.normal(size=factors.shape)
    return np.column_stack([mixed, rng.normal(size=len(factors))])


# ---------------------------------------------------------------------------------------------------------------
# Oracles: disentanglement_lib's definitions written with plain loops.


def histogram_bins(column, n_bins=20):
    """disentanglement_lib's histogram discretizer for one column (bins 1 .. n_bins)."""
    return np.digitize(column, np.histogram(column, n_bins)[1][:-1])


def mig_oracle(codes, factors, n_bins=20):
    """MIG from counted mutual information and entropies (nats), one pair of variables at a time."""
    n = len(codes)

    def mutual_info(a, b):
        joint, count_a, count_b = Counter(zip(a, b)), Counter(a), Counter(b)
        return sum(c / n * math.log(c * n / (count_a[x] * count_b[y])) for (x, y), c in joint.items())

    binned = [histogram_bins(column, n_bins).tolist() for column in codes.T]
    gaps = []
    for factor in factors.T:
        factor = factor.tolist()
        informations = sorted((mutual_info(code, factor) for code in binned), reverse=True)
        gaps.append((informations[0] - informations[1]) / mutual_info(factor, factor))
    return sum(gaps) / len(gaps)


def irs_oracle(codes, factors, diff_quantile=0.99, factor_bins=20):
    """IRS with one boolean mask and one numpy.quantile per factor value."""
    if factor_bins is not None:
        factors = np.column_stack([histogram_bins(column, factor_bins) for column in factors.T])
    active = codes[:, codes.max(axis=0) > codes.min(axis=0)]
    max_deviations = np.abs(active - active.mean(axis=0)).max(axis=0)
    irs_matrix = np.empty((active.shape[1], factors.shape[1]))
    for k, factor in enumerate(factors.T):
        values = np.unique(factor)
        total = np.zeros(active.shape[1])
        for value in values:
            group = active[factor == value]
            total += np.quantile(np.abs(group - group.mean(axis=0)), diff_quantile, axis=0)
        irs_matrix[:, k] = 1 - total / len(values) / max_deviations
    return np.average(irs_matrix.max(axis=1), weights=max_deviations)


def test_discretize_of_no_samples_is_empty():
    assert metrics.discretize(np.empty((0, 3))).shape == (0, 3)
    assert metrics.discretize([]).shape == (0,)


def test_discretize_matches_histogram_definition():
    values = np.random.default_rng(3).normal(size=(500, 3))
    values[:, 2] = 7.0
    bins = metrics.discretize(values)
    for column, column_bins in zip(values.T, bins.T):
        np.testing.assert_array_equal(column_bins, histogram_bins(column) - 1)
    assert bins[:, 0].min() == 0 and bins[:, 0].max() == 19
    assert np.unique(bins[:, 2]).size == 1
    np.testing.assert_array_equal(metrics.discretize(values[:, 0], n_bins=5), histogram_bins(values[:, 0], 5) - 1)


@pytest.mark.parametrize("n_bins", [20, 7])
def test_mig_matches_loop_oracle(n_bins):
    factors = make_factors(400, sizes=(2, 5, 3), seed=4)
    codes = noisy_codes(factors)
    assert metrics.mig(codes, factors, n_bins=n_bins) == pytest.approx(mig_oracle(codes, factors, n_bins), rel=1e-12)


@pytest.mark.parametrize(("diff_quantile", "factor_bins"), [(0.99, 20), (1.0, 20), (0.5, None), (0.99, 4)])
def test_irs_matches_loop_oracle(diff_quantile, factor_bins):
    # Unequal group sizes, a factor with more values than 20 bins, and a constant code.
    rng = np.random.default_rng(5)
    skewed = rng.choice(4, 300, p=[0.1, 0.2, 0.3, 0.4])
    factors = np.column_stack([rng.integers(0, 3, 300), rng.integers(0, 30, 300), skewed])
    codes = np.column_stack([noisy_codes(factors), np.full(300, 2.5)])
    expected = irs_oracle(codes, factors, diff_quantile, factor_bins)
    actual = metrics.irs(codes, factors, diff_quantile=diff_quantile, factor_bins=factor_bins)
    assert actual == pytest.approx(expected, rel=1e-12)


# ---------------------------------------------------------------------------------------------------------------
# Known answers.


def test_factors_as_codes_score_near_one():
    factors = make_factors()
    codes = factor_codes(factors)
    # Measured: MIG 0.998 (the other codes share a little spurious information with each factor), IRS 1 exactly.
    assert metrics.mig(codes, factors) > 0.99
    assert metrics.irs(codes, factors) == 1.0
    # Measured: D = C = 1 - 6e-10 (the 1e-11 smoothing), informativeness 1.
    d, c, i = metrics.dci(codes, factors)
    assert d > 0.999 and c > 0.999 and i == 1.0


def test_sap_of_factors_is_the_accuracy_gap_over_chance():
    # SAP compares raw accuracies: a factor's own code scores at most 1 while an unrelated code scores about chance
    # (1/2 for a binary factor under balanced class weights), so even perfect codes stay well below 1. On the
    # standardized integer factor values, one-code linear SVMs reach accuracy 1 on every factor and the runners-up
    # 0.55, 0.34, 0.27, 0.37; measured SAP 0.620 (0.569 without standardizing, where the four ordered classes of the
    # raw values 0-3 are not all separated at C = 0.01).
    factors = make_factors()
    assert metrics.sap(factors.astype(float), factors) == pytest.approx(0.62, abs=0.03)
    # Squared correlations (continuous scoring) give the factors themselves 1 minus a runner-up near 0.
    assert metrics.sap(factor_codes(factors), factors, continuous_factors=True) > 0.99


def test_rotation_lowers_scores():
    factors = make_factors()
    codes, rotated = factor_codes(factors), hadamard_codes(factors)
    # Measured on the rotation: MIG 0.016, SAP 0.019, DCI disentanglement 0.007 (from 0.998, 0.338, 1).
    assert metrics.mig(rotated, factors) < 0.5 * metrics.mig(codes, factors)
    assert metrics.sap(rotated, factors) < 0.5 * metrics.sap(codes, factors)
    assert metrics.dci(rotated, factors).disentanglement < 0.5


def test_pure_noise_scores_near_zero():
    factors = make_factors()
    noise = np.random.default_rng(6).uniform(size=(len(factors), 5))
    # Measured: MIG 0.002, SAP 0.007, IRS 0.013 (uniform codes: the 0.99-quantile of |z - E z| is almost the
    # maximum; Gaussian codes score 0.26), DCI disentanglement and completeness 1e-4.
    assert metrics.mig(noise, factors) < 0.01
    assert metrics.sap(noise, factors) < 0.03
    assert metrics.irs(noise, factors) < 0.05
    d, c, _ = metrics.dci(noise, factors, estimator="random_forest")
    assert d < 0.05 and c < 0.05


def test_duplicated_factor():
    factors = make_factors()
    codes = factor_codes(factors)
    duplicated = np.column_stack([codes[:, :1], codes])
    # Two identical codes share factor 0's information: its MIG and SAP gaps are exactly 0.
    assert metrics.mig(duplicated[:, :2], factors[:, 0]) == 0.0
    assert metrics.sap(duplicated[:, :2], factors[:, 0]) == 0.0
    n_factors = factors.shape[1]
    assert metrics.mig(duplicated, factors) < metrics.mig(codes, factors) - 0.9 / n_factors
    assert metrics.sap(duplicated, factors) < metrics.sap(codes, factors) - 0.4 / n_factors
    # Factor 0's importance spreads over two codes: completeness drops (measured 1 -> 0.90), disentanglement stays.
    d, c, _ = metrics.dci(duplicated, factors)
    assert c < 0.95 and d > 0.99


# ---------------------------------------------------------------------------------------------------------------
# Invariances.


def test_permuting_codes_changes_nothing():
    factors = make_factors()
    codes = noisy_codes(factors)
    permuted = codes[:, [3, 0, 4, 2, 1]]
    assert metrics.mig(permuted, factors) == metrics.mig(codes, factors)
    assert metrics.sap(permuted, factors) == metrics.sap(codes, factors)
    assert metrics.irs(permuted, factors) == pytest.approx(metrics.irs(codes, factors), rel=1e-14)
    # A random forest draws its candidate features by position, so permuted codes grow other trees: DCI agrees to a
    # tolerance only.
    np.testing.assert_allclose(
        metrics.dci(permuted, factors, estimator="random_forest"),
        metrics.dci(codes, factors, estimator="random_forest"),
        atol=0.02,
    )


def test_affine_maps_of_codes():
    factors = make_factors(800)
    codes = noisy_codes(factors)
    scale, shift = np.array([3.0, -0.5, 20.0, -1e-3, 1.0]), np.array([1.0, -4.0, 0.0, 100.0, 0.5])
    mapped = codes * scale + shift
    # MIG's equal-width bins move with any affine map of a code (a negative scale reverses their order).
    assert metrics.mig(mapped, factors) == pytest.approx(metrics.mig(codes, factors), rel=1e-12)
    # Squared correlations are affine invariant.
    assert metrics.sap(mapped, factors, continuous_factors=True) == pytest.approx(
        metrics.sap(codes, factors, continuous_factors=True), rel=1e-12
    )
    # IRS weighs codes by their spread: invariant to shifts, sign flips and one common scale only.
    flipped = 2.5 * codes * np.sign(scale) + shift
    assert metrics.irs(flipped, factors) == pytest.approx(metrics.irs(codes, factors), rel=1e-12)
    assert metrics.irs(mapped, factors) != pytest.approx(metrics.irs(codes, factors), rel=1e-3)
    # SAP's classifiers see standardized codes: a positive scale and a shift per code change nothing.
    positive = codes * np.abs(scale) + shift
    assert metrics.sap(positive, factors) == metrics.sap(codes, factors)
    # Trees split on order only: an increasing map of every code leaves DCI unchanged (a map that merges values
    # once the trees round the codes to float32 would not).
    increasing = codes * np.array([3.0, 0.5, 20.0, 2.0, 1.0]) + np.array([1.0, -4.0, 0.0, 10.0, 0.5])
    np.testing.assert_allclose(metrics.dci(increasing, factors), metrics.dci(codes, factors), atol=1e-6)


# ---------------------------------------------------------------------------------------------------------------
# Edge cases with defined values.


def test_single_factor_as_1d_array():
    factors = make_factors()
    codes = noisy_codes(factors)
    for metric in (metrics.mig, metrics.sap, metrics.irs):
        assert metric(codes, factors[:, 1]) == metric(codes, factors[:, [1]])
    d, c, i = metrics.dci(codes, factors[:, 1], estimator="random_forest")
    assert d == pytest.approx(1.0, rel=1e-12)  # with one factor every code is specific to it
    assert 0 <= c <= 1 and 0 <= i <= 1


def test_constant_factors_are_left_out():
    factors = make_factors()
    codes = noisy_codes(factors)
    with_constant = np.column_stack([factors[:, 0], np.full(len(factors), 3), factors[:, 1:]])
    for metric in (metrics.mig, metrics.sap, metrics.irs):
        assert metric(codes, with_constant) == metric(codes, factors)
    assert metrics.dci(codes, with_constant, estimator="random_forest") == metrics.dci(
        codes, factors, estimator="random_forest"
    )


def test_constant_codes():
    factors = make_factors()
    codes = factor_codes(factors)
    constant = np.zeros((len(factors), 2))
    # A constant code carries no information: it does not change MIG or IRS.
    assert metrics.mig(np.column_stack([codes, constant]), factors) == metrics.mig(codes, factors)
    assert metrics.irs(np.column_stack([codes, constant]), factors) == metrics.irs(codes, factors)
    # Only constant codes: IRS is 0 by definition, MIG and SAP 0, DCI's importances vanish.
    assert metrics.irs(constant, factors) == 0.0
    assert metrics.mig(constant, factors) == 0.0
    assert metrics.sap(constant, factors) == 0.0
    assert metrics.sap(constant, factors, continuous_factors=True) == 0.0
    d, c, i = metrics.dci(constant, factors, estimator="random_forest")
    assert d == pytest.approx(0, abs=1e-9) and c == pytest.approx(0, abs=1e-9) and 0 < i < 1


@pytest.mark.parametrize("scale", [1e100, 1e300, 1e-300, 1e-310])
def test_sap_of_codes_at_extreme_scales(scale):
    # Standardized before the classifiers: liblinear would iterate for minutes on codes of scale 1e100, and the
    # moments of codes near the overflow or underflow limits are computed after dividing by the largest value.
    factors = make_factors(600)
    codes = factor_codes(factors)
    assert metrics.sap(codes * scale, factors) == metrics.sap(codes, factors)


def test_sap_standardizes_on_the_training_split():
    factors = make_factors(600)
    codes = noisy_codes(factors)
    rng = np.random.RandomState(0)
    train, test = metrics._split(600, 1 / 3, rng)
    standardized_train, standardized_test = metrics._standardize(codes[train], codes[test])
    np.testing.assert_allclose(standardized_train.mean(axis=0), 0, atol=1e-14)
    np.testing.assert_allclose(standardized_train.std(axis=0), 1, rtol=1e-13)
    mean, std = codes[train].mean(axis=0), codes[train].std(axis=0)
    np.testing.assert_allclose(standardized_test, (codes[test] - mean) / std, rtol=1e-12, atol=1e-13)
    # A code constant on the training split is centred only; the test split keeps its offsets from that constant.
    constant = np.column_stack([np.full(len(train), 5.0), codes[train, 0]])
    new = np.column_stack([np.linspace(4.0, 6.0, len(test)), codes[test, 0]])
    standardized_train, standardized_test = metrics._standardize(constant, new)
    assert np.all(standardized_train[:, 0] == 0.0)
    np.testing.assert_allclose(standardized_test[:, 0], np.linspace(-1.0, 1.0, len(test)) / 6.0, atol=1e-15)
    assert np.isfinite(standardized_test).all()


def test_random_forest_dci_is_not_disentanglement_libs():
    # Perfectly disentangled codes (each code one factor of six values): boosted trees give D = C = 1 (measured
    # 1.000, as test_factors_as_codes_score_near_one checks on other factors), random forests spread importance over
    # the codes their random feature subsets offer: measured D 0.664, C 0.664 here (0.49 on the five dSprites
    # factors).
    factors = make_factors(600, sizes=(6, 6, 6, 6))
    d, c, i = metrics.dci(factor_codes(factors), factors, estimator="random_forest")
    assert d < 0.8 and c < 0.8 and i > 0.99


def test_factor_value_missing_from_the_training_split():
    # The only sample with factor value 1 falls in the test split (the split that random_state=0 draws), so the
    # classifiers see one class: they predict it everywhere, 9 of the 10 test samples right, and learn no importance.
    factor = np.zeros(30, dtype=int)
    _, test = metrics._split(30, 1 / 3, np.random.RandomState(0))
    factor[test[0]] = 1
    codes = np.random.default_rng(8).normal(size=(30, 3))
    assert metrics.sap(codes, factor, random_state=0) == 0.0
    d, c, i = metrics.dci(codes, factor, random_state=0)
    assert d == pytest.approx(1.0, rel=1e-12) and c == pytest.approx(0.0, abs=1e-12) and i == 0.9


def test_deterministic_for_a_seed():
    factors = make_factors(600)
    codes = noisy_codes(factors)
    assert metrics.sap(codes, factors, random_state=3) == metrics.sap(codes, factors, random_state=3)
    assert metrics.dci(codes[:, :2], factors, random_state=3) == metrics.dci(codes[:, :2], factors, random_state=3)


def test_float_and_bool_factors_are_discrete_labels():
    factors = make_factors(600)
    codes = noisy_codes(factors)
    as_floats = factors * 0.37 - 5
    assert metrics.mig(codes, as_floats) == metrics.mig(codes, factors)
    assert metrics.sap(codes, factors[:, 0].astype(bool)) == metrics.sap(codes, factors[:, 0])


# ---------------------------------------------------------------------------------------------------------------
# DCI with regressors (Eastwood & Williams' qedr set-up).


def continuous_factors(n_samples=600, n_factors=2, seed=10):
    """Independent uniform factors in [0, 1], continuous (every value distinct)."""
    return np.random.default_rng(seed).uniform(size=(n_samples, n_factors))


def standardized_split(array, random_state=0, test_size=1 / 3):
    """The training and test rows of `array` standardized with the training rows' mean and standard deviation."""
    train, test = metrics._split(len(array), test_size, np.random.RandomState(random_state))
    mean, std = array[train].mean(axis=0), array[train].std(axis=0)
    return (array[train] - mean) / std, (array[test] - mean) / std


def qedr_lasso_oracle(codes, factors, alpha=0.02):
    """DCI as Eastwood & Williams' notebook computes it: one Lasso per standardized factor, R = |coef|, entropies
    in base n of R's normalized columns and rows, disentanglement weighted by the codes' shares, completeness the
    plain mean, informativeness the mean test NRMSE (RMSE over the test targets' standard deviation)."""
    from sklearn.linear_model import Lasso

    codes_train, codes_test = standardized_split(codes)
    factors_train, factors_test = standardized_split(factors)
    columns, errors = [], []
    for k in range(factors.shape[1]):
        model = Lasso(alpha=alpha).fit(codes_train, factors_train[:, k])
        columns.append(np.abs(model.coef_))
        residual = model.predict(codes_test) - factors_test[:, k]
        errors.append(math.sqrt(np.mean(residual**2)) / np.std(factors_test[:, k]))
    R = np.column_stack(columns)

    def one_minus_entropy(p):
        p = p / p.sum()
        return 1 - sum(-q * math.log(q) for q in p if q > 0) / math.log(len(p))

    disentanglement = sum(one_minus_entropy(row) * row.sum() / R.sum() for row in R)
    completeness = sum(one_minus_entropy(column) for column in R.T) / R.shape[1]
    return disentanglement, completeness, sum(errors) / len(errors)


@pytest.mark.parametrize("seed", [10, 11])
def test_lasso_dci_matches_qedr_oracle(seed):
    # A partial mix: code 0 is factor 0, code 1 mixes both factors, code 2 is factor 2 plus noise.
    factors = continuous_factors(500, 3, seed=seed)
    noise = np.random.default_rng(seed + 100).normal(size=500)
    codes = np.column_stack([factors[:, 0], factors[:, 0] + factors[:, 1], factors[:, 2] + 0.3 * noise])
    expected = qedr_lasso_oracle(codes, factors)
    assert all(value > 0 for value in expected[:2])  # every entropy term is defined (no zero in R)
    np.testing.assert_allclose(metrics.dci(codes, factors, estimator="lasso"), expected, rtol=1e-9, atol=1e-9)


def test_lasso_dci_of_factors_is_one_with_the_lasso_shrinkage_as_error():
    # Each code an affine map of one factor: standardized, factor k is code k exactly. The Lasso's coefficient is
    # then 1 - alpha = 0.98 on its own code and 0 elsewhere (the other codes' correlation with the residual
    # 0.02 code_k stays below alpha), so D = C = 1 (up to the 1e-11 smoothing) and the test error is
    # 0.02 code_k: NRMSE_k = 0.02 sqrt(mean(code_k^2)) / std(code_k) over the test split.
    factors = continuous_factors()
    codes = factors[:, ::-1] * np.array([3.0, -0.5]) + np.array([1.0, 7.0])
    d, c, i = metrics.dci(codes, factors, estimator="lasso")
    assert d == pytest.approx(1.0, abs=1e-9) and c == pytest.approx(1.0, abs=1e-9)
    _, test_factors = standardized_split(factors)
    expected = np.mean(0.02 * np.sqrt(np.mean(test_factors**2, axis=0)) / test_factors.std(axis=0))
    assert i == pytest.approx(expected, rel=1e-6)


def test_lasso_dci_of_mixed_codes_is_low():
    # Codes (f0 + f1, f0 - f1) on the full 32 x 32 grid of positions: every factor weighs both codes equally, so
    # every row and column of R is (nearly) uniform. Measured: D 2e-5, C 2e-5 (the split breaks the exact balance),
    # prediction still near exact (the Lasso's shrinkage only).
    x, y = np.meshgrid(np.linspace(0, 1, 32), np.linspace(0, 1, 32))
    factors = np.column_stack([x.ravel(), y.ravel()])
    mixed = factors @ np.array([[1.0, 1.0], [1.0, -1.0]])
    d, c, i = metrics.dci(mixed, factors, estimator="lasso")
    assert d < 0.01 and c < 0.01 and i < 0.05
    # Half mixed (code 1 = f0 + f1): lower than the disentangled codes, higher than the full mix.
    d_half, c_half, _ = metrics.dci(np.column_stack([factors[:, 0], factors.sum(axis=1)]), factors, estimator="lasso")
    assert 0.1 < d_half < 0.9 and 0.1 < c_half < 0.9


def test_regressor_dci_of_noise():
    # Codes that carry nothing: the predictions are about the test mean, NRMSE about 1 (measured 0.9999 Lasso,
    # 1.006 forest). The Lasso keeps only the codes whose chance correlation passes alpha, so its D and C are
    # whatever those few coefficients give (measured 0.54, 0.49: a caveat of the Lasso form, not tested); the
    # forest spreads its importance over all codes: measured D 0.23, C 0.14.
    factors = continuous_factors()
    noise = np.random.default_rng(12).normal(size=(len(factors), 4))
    for estimator in ("lasso", "random_forest_regressor"):
        _, _, i = metrics.dci(noise, factors, estimator=estimator)
        assert 0.99 < i < 1.15
    d, c, _ = metrics.dci(noise, factors, estimator="random_forest_regressor")
    assert d < 0.35 and c < 0.35


def test_forest_regressor_dci_of_factors_plus_noise_codes():
    # Unlike RandomForestClassifier's sqrt(n_codes) candidates per split, the regressor tries every code, so a
    # code that is the factor wins every split: D and C near 1 even beside pure-noise codes (measured 0.9994, 0.9991,
    # NRMSE 0.009).
    factors = continuous_factors()
    noise = np.random.default_rng(13).normal(size=(len(factors), 3))
    d, c, i = metrics.dci(np.column_stack([factors, noise]), factors, estimator="random_forest_regressor")
    assert d > 0.99 and c > 0.99 and i < 0.05


def test_forest_depth_is_chosen_on_validation():
    # A noisy step of code 0 (signal-to-noise 1/4 in variance): a stump fits the step, deeper trees fit the noise,
    # and the validation quarter picks depth 1 (measured for noise seeds 0-4). A smooth factor (the code itself)
    # needs the deepest trees.
    codes = continuous_factors(400, 2, seed=14)
    noisy_step = (codes[:, 0] > 0.5) + np.random.default_rng(0).normal(size=400)
    assert metrics._forest_depth(codes, noisy_step, np.random.RandomState(0)) == 1
    assert metrics._forest_depth(codes, codes[:, 0], np.random.RandomState(0)) == max(metrics._FOREST_DEPTHS)


@pytest.mark.parametrize("estimator", ["lasso", "random_forest_regressor"])
def test_regressor_dci_takes_continuous_factors_in_any_units(estimator):
    factors = continuous_factors()
    codes = noisy_codes(factors)
    scores = metrics.dci(codes, factors, estimator=estimator)
    # Factors are standardized on the training split: their units do not matter; a constant factor is left out.
    rescaled = np.column_stack([factors[:, 0] * 1e3 - 5.0, np.full(len(factors), 2.0), factors[:, 1] * 1e-3])
    np.testing.assert_allclose(metrics.dci(codes, rescaled, estimator=estimator), scores, rtol=1e-7, atol=1e-9)
    assert scores == metrics.dci(codes, factors, estimator=estimator)  # deterministic for the default seed


def test_regressor_dci_of_constant_codes():
    # No importance at all: every code and factor weighs the same, the uniform smoothing gives D = C = 0, and the
    # prediction is the training mean (NRMSE >= 1).
    factors = continuous_factors()
    for estimator in ("lasso", "random_forest_regressor"):
        d, c, i = metrics.dci(np.zeros((len(factors), 3)), factors, estimator=estimator)
        assert d == pytest.approx(0, abs=1e-9) and c == pytest.approx(0, abs=1e-9) and i >= 1.0


def test_regressor_dci_with_a_factor_constant_on_the_test_split():
    # Factor 1 varies only on training rows: its error is normalized by its spread over all samples.
    factors = continuous_factors(60, 2)
    _, test = metrics._split(60, 1 / 3, np.random.RandomState(0))
    factors[test, 1] = 0.5
    d, c, i = metrics.dci(factors, factors, estimator="lasso")
    assert np.isfinite(i) and d > 0.99


# ---------------------------------------------------------------------------------------------------------------
# Bad input.

GOOD_CODES = np.random.default_rng(7).normal(size=(40, 3))
GOOD_FACTORS = np.arange(40).reshape(-1, 1) % 4
ALL_METRICS = [
    metrics.mig,
    metrics.sap,
    metrics.irs,
    metrics.dci,
    pytest.param(functools.partial(metrics.dci, estimator="lasso"), id="dci_lasso"),
]


def with_value(array, index, value):
    array = np.array(array, dtype=float)
    array[index] = value
    return array


@pytest.mark.parametrize("metric", ALL_METRICS)
@pytest.mark.parametrize(
    ("codes", "factors", "message"),
    [
        (GOOD_CODES[:30], GOOD_FACTORS, "codes: has 30 rows but factors has 40"),
        (GOOD_CODES[:, 0], GOOD_FACTORS, r"codes: must be a 2-D array, got shape \(40,\)"),
        (GOOD_CODES[..., None], GOOD_FACTORS, "codes: must be a 2-D array"),
        (GOOD_CODES, GOOD_FACTORS[..., None], "factors: must be a 1-D or 2-D array"),
        (with_value(GOOD_CODES, (3, 1), np.nan), GOOD_FACTORS, "codes: contains NaN or infinite values"),
        (GOOD_CODES, with_value(GOOD_FACTORS, (0, 0), np.inf), "factors: contains NaN or infinite values"),
        (GOOD_CODES.astype(str), GOOD_FACTORS, "codes: must hold real numbers"),
        (GOOD_CODES, GOOD_FACTORS.astype(complex), "factors: must hold real numbers"),
        ([[1.0, 2.0], [3.0]], GOOD_FACTORS[:2], "codes: cannot be read as a numeric array"),
        (GOOD_CODES[:1], GOOD_FACTORS[:1], "codes: .* needs at least 2 samples, got 1"),
        (GOOD_CODES, np.ones((40, 2)), "factors: every factor column is constant"),
        (GOOD_CODES, np.empty((40, 0)), "factors: needs at least one factor column"),
        (GOOD_CODES[:, :0], GOOD_FACTORS, "codes: .* needs at least . code columns, got 0"),
        (GOOD_CODES[:0], GOOD_FACTORS[:0], "codes: .* needs at least 2 samples, got 0"),
        (np.empty((0, 3)), np.empty(0), "codes: .* needs at least 2 samples, got 0"),
        (GOOD_CODES, GOOD_FACTORS[:0], "codes: has 40 rows but factors has 0"),
        (GOOD_CODES[:0], GOOD_FACTORS, "codes: has 0 rows but factors has 40"),
        ([], [], r"codes: must be a 2-D array, got shape \(0,\)"),
    ],
)
def test_bad_data_raises(metric, codes, factors, message):
    with pytest.raises(ValueError, match=message):
        metric(codes, factors)


@pytest.mark.parametrize("metric", [metrics.mig, metrics.sap, metrics.dci])
def test_continuous_factors_rejected_where_discrete_needed(metric):
    factors = np.column_stack([GOOD_FACTORS[:, 0], np.linspace(0, 1, 40)])
    with pytest.raises(ValueError, match=r"factors: column 1 has 40 distinct values in 40 samples.*discretize"):
        metric(GOOD_CODES, factors)


def test_continuous_factors_accepted_where_defined():
    factors = np.column_stack([GOOD_FACTORS[:, 0], np.linspace(0, 1, 40)])
    assert 0 <= metrics.sap(GOOD_CODES, factors, continuous_factors=True) <= 1
    assert 0 <= metrics.irs(GOOD_CODES, factors) <= 1
    with pytest.raises(ValueError, match="factors: column 1 has 40 distinct values"):
        metrics.irs(GOOD_CODES, factors, factor_bins=None)


@pytest.mark.parametrize("metric", [metrics.mig, metrics.sap])
def test_top_two_metrics_need_two_codes(metric):
    with pytest.raises(ValueError, match="codes: (MIG|SAP) needs at least 2 code columns, got 1"):
        metric(GOOD_CODES[:, :1], GOOD_FACTORS)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: metrics.mig(GOOD_CODES, GOOD_FACTORS, n_bins=0), "n_bins: must be a positive int"),
        (lambda: metrics.discretize(GOOD_CODES, n_bins=2.5), "n_bins: must be a positive int"),
        (lambda: metrics.discretize([[np.nan]]), "values: contains NaN"),
        (lambda: metrics.sap(GOOD_CODES, GOOD_FACTORS, test_size=0), r"test_size: must be a fraction in \(0, 1\)"),
        (lambda: metrics.dci(GOOD_CODES, GOOD_FACTORS, test_size=1.0), r"test_size: must be a fraction in \(0, 1\)"),
        (
            lambda: metrics.sap(GOOD_CODES[:2], GOOD_FACTORS[:2], test_size=0.6),
            "test_size: 0.6 of 2 samples leaves none",
        ),
        (lambda: metrics.sap(GOOD_CODES, GOOD_FACTORS, random_state="a"), "random_state: must be None, an int"),
        (lambda: metrics.sap(GOOD_CODES, GOOD_FACTORS, continuous_factors="yes"), "continuous_factors: must be True"),
        (lambda: metrics.dci(GOOD_CODES, GOOD_FACTORS, estimator="svm"), "estimator: must be one of"),
        (lambda: metrics.dci(GOOD_CODES, GOOD_FACTORS, estimator="Lasso"), "estimator: must be one of"),
        (
            lambda: metrics.dci(GOOD_CODES, GOOD_FACTORS, estimator="lasso", test_size=0.0),
            r"test_size: must be a fraction in \(0, 1\)",
        ),
        (
            lambda: metrics.dci(GOOD_CODES, GOOD_FACTORS, estimator="random_forest_regressor", random_state="a"),
            "random_state: must be None, an int",
        ),
        (
            lambda: metrics.irs(GOOD_CODES, GOOD_FACTORS, diff_quantile=1.5),
            r"diff_quantile: must be a number in \[0, 1\]",
        ),
        (lambda: metrics.irs(GOOD_CODES, GOOD_FACTORS, factor_bins=0), "factor_bins: must be a positive int or None"),
    ],
)
def test_bad_parameters_raise(call, message):
    with pytest.raises(ValueError, match=message):
        call()
