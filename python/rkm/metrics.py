"""Disentanglement metrics: MIG, SAP, IRS and DCI.

Each metric compares learned codes ``codes`` of shape (n_samples, n_codes) with the ground-truth factors
``factors`` of shape (n_samples, n_factors) that generated the same samples. The definitions, estimators and
discretization follow disentanglement_lib [1]_ (``evaluation/metrics/{mig,sap_score,irs,dci,utils}.py`` with the
``unsupervised_study_v1`` metric configurations), the implementation behind most published scores:

- MIG, the mutual information gap [2]_: every code is discretized into 20 equal-width bins, I(z_i; v_k) is
  estimated by ``sklearn.metrics.mutual_info_score`` and
  ``MIG = mean_k (I_(1)k - I_(2)k) / H(v_k)``, with I_(1)k >= I_(2)k the two largest I(z_i; v_k) over the codes.
- SAP, the separated attribute predictability [3]_: ``S[i, k]`` is the test accuracy of
  ``LinearSVC(C=0.01, class_weight="balanced")`` predicting factor k from code i alone (for continuous factors, the
  squared correlation of code i and factor k); ``SAP = mean_k`` of the gap between the two largest ``S[:, k]``.
  Unlike disentanglement_lib, each code is standardized first (zero mean, unit variance on the training split), so
  the score does not depend on the codes' scale (see :func:`sap`).
- IRS, the interventional robustness score [4]_: factors are discretized into 20 equal-width bins; for factor k and
  each of its values, the 0.99-quantile of ``|z - E[z | v_k]|`` is averaged over the values and divided by the
  code's largest ``|z - E[z]|``; ``IRS[i, k] = 1 -`` that, each code scores its best factor, and the scores are
  averaged with the codes' largest deviations as weights. Constant codes are left out.
- DCI [5]_: gradient boosted trees (``GradientBoostingClassifier``, disentanglement_lib's choice and the default)
  predict each factor from all codes; their feature importances form ``R`` (n_codes, n_factors). Disentanglement is ``sum_i rho_i (1 - H_K(P_i.))`` with
  ``P_i.`` row i of R normalized, H_K the entropy in base n_factors and ``rho_i`` the row's share of R's total;
  completeness is the same over the columns (entropy in base n_codes, weights the columns' shares);
  informativeness is the mean test accuracy of the classifiers (higher is better, as disentanglement_lib
  reports it). With ``estimator="lasso"`` or ``"random_forest_regressor"`` DCI is Eastwood & Williams' original
  regression form (see below).

disentanglement_lib samples separate training (10 000) and test (5 000) sets for SAP and DCI; here one sample is
split at random, ``test_size`` (default 1/3, the same proportion) for testing, seeded by ``random_state`` so the
scores are deterministic. MIG and IRS use every sample, as disentanglement_lib does.

Random forests are not disentanglement_lib's DCI
------------------------------------------------
``dci(..., estimator="random_forest")`` is some 25 times faster, but it is another metric: a forest grows each tree
on a random subset of the codes at every split (``max_features="sqrt"``), so even a code that is useless for a
factor gets importance from the trees that could not pick the useful one. On perfectly disentangled codes (each
code one factor) its disentanglement is about 0.4-0.5 where boosted trees give 1.000 (measured: 0.488 on the five
dSprites factors as codes, 4000 samples). Compare with published DCI values only with the default
``estimator="gbt"``.

DCI with regressors (Eastwood & Williams' own set-up)
-----------------------------------------------------
Eastwood & Williams [5]_ (and their code, https://github.com/cianeastwood/qedr, which the generative RKM paper
uses for its Table 2) regress every factor on the codes instead of classifying it. ``dci(..., estimator="lasso")``
and ``dci(..., estimator="random_forest_regressor")`` do the same:

- codes and factors are standardized with the training split's mean and standard deviation (qedr's
  ``normalize``), so the factors may be continuous and their units do not matter;
- one regressor per factor: ``Lasso(alpha=0.02)`` (importance ``|coef_|``), or
  ``RandomForestRegressor(n_estimators=10, max_depth=d)`` (importance ``feature_importances_``) with d chosen per
  factor from (1, 2, 3, 5, 8, 12) by the error on a validation quarter of the training split and the forest then
  refitted on the whole training split (qedr picks d on a development split);
- disentanglement as above; completeness is the **plain mean** over the factors of ``1 - H_{n_codes}(P_.k)``
  (qedr's average; disentanglement_lib weighs the factors by their share of R);
- informativeness is the mean over the factors of the normalized root mean squared error on the test split,
  ``NRMSE_k = sqrt(mean((prediction - factor)^2)) / std(factor)``, both over the test split (qedr's ``nrmse``, a
  ratio that the standardization does not change): 0 is a perfect prediction and 1 is no better than predicting
  the test mean. **Lower is better**, unlike the classifiers' accuracy. A factor constant on the test split is
  normalized by its standard deviation over all samples instead.

Factors
-------
MIG, SAP and DCI with classifiers need discrete factors: a column may hold integers or floats but at most ``max(2, n_samples // 2)``
distinct values (each value seen twice on average); a column with more raises a ValueError that points to
:func:`discretize`. SAP with ``continuous_factors=True`` and IRS (which bins the factors itself) accept any real
factors, and so does DCI with regressors. A 1-D ``factors`` is a single factor. A constant factor column carries no information about the codes
(disentanglement_lib never meets one: its factors are sampled from the full grid), so every metric leaves it out;
MIG would otherwise divide by its zero entropy. If every factor column is constant, a ValueError is raised.

References
----------
.. [1] F. Locatello, S. Bauer, M. Lucic, G. Raetsch, S. Gelly, B. Schoelkopf, O. Bachem, "Challenging Common
   Assumptions in the Unsupervised Learning of Disentangled Representations", ICML 2019;
   https://github.com/google-research/disentanglement_lib
.. [2] R. T. Q. Chen, X. Li, R. Grosse, D. Duvenaud, "Isolating Sources of Disentanglement in Variational
   Autoencoders", NeurIPS 2018.
.. [3] A. Kumar, P. Sattigeri, A. Balakrishnan, "Variational Inference of Disentangled Latent Concepts from
   Unlabeled Observations", ICLR 2018, Section 3.
.. [4] R. Suter, D. Miladinovic, B. Schoelkopf, S. Bauer, "Robustly Disentangled Causal Mechanisms: Validating
   Deep Representations for Interventional Robustness", ICML 2019.
.. [5] C. Eastwood, C. K. I. Williams, "A Framework for the Quantitative Evaluation of Disentangled
   Representations", ICLR 2018.
"""

from __future__ import annotations

import numbers
from typing import NamedTuple

import numpy as np
import scipy.stats
from numpy.typing import ArrayLike
from sklearn.ensemble import GradientBoostingClassifier, RandomForestClassifier, RandomForestRegressor
from sklearn.linear_model import Lasso
from sklearn.metrics import mutual_info_score
from sklearn.model_selection import train_test_split
from sklearn.svm import LinearSVC
from sklearn.utils import check_random_state

from rkm._utils.validation import check_choices, check_int

__all__ = ["DCIScores", "dci", "discretize", "irs", "mig", "sap"]

# disentanglement_lib's SAP: a code whose variance is below this scores 0 against continuous factors.
_SAP_MIN_VARIANCE = 1e-12
# disentanglement_lib's DCI adds this to the importances so that all-zero rows and columns have a defined entropy.
_DCI_EPS = 1e-11
# DCI's estimator choices: disentanglement_lib's gradient boosted trees, or a faster random forest.
_CLASSIFIERS = {"gbt": GradientBoostingClassifier, "random_forest": RandomForestClassifier}
# DCI with regressors (Eastwood & Williams' qedr): the Lasso's penalty, the forest's size and the depths tried.
_REGRESSORS = ("lasso", "random_forest_regressor")
_LASSO_ALPHA = 0.02
_FOREST_N_ESTIMATORS = 10
_FOREST_DEPTHS = (1, 2, 3, 5, 8, 12)
# Fraction of the training split that validates the forest's depth.
_FOREST_VALIDATION_SIZE = 0.25


class DCIScores(NamedTuple):
    """DCI scores of a representation (Eastwood & Williams, 2018); unpacks as ``d, c, i = dci(...)``."""

    disentanglement: float
    """Importance-weighted mean over the codes of 1 - entropy of the code's importance over the factors."""
    completeness: float
    """Importance-weighted mean over the factors of 1 - entropy of the factor's importance over the codes."""
    informativeness: float
    """Mean test accuracy of the per-factor classifiers (higher is better), or with regressors their mean normalized
    root mean squared error on the test split (lower is better)."""


def discretize(values: ArrayLike, n_bins: int = 20) -> np.ndarray:
    """Bin each column into `n_bins` equal-width bins over its range (disentanglement_lib's histogram discretizer).

    The bin edges are ``numpy.histogram_bin_edges(column, n_bins)``; a value falls in bin b when
    ``edges[b] <= value < edges[b + 1]``, and the column's maximum in the last bin. A constant column falls in one bin.

    Parameters
    ----------
    values : array-like of shape (n_samples, n_columns) or (n_samples,)
        Real, finite values; with no samples the result is empty too.
    n_bins : int, default=20
        Number of bins per column.

    Returns
    -------
    bins : ndarray of int, same shape as `values`
        The bin index of every value, in ``0 .. n_bins - 1``.
    """
    n_bins = check_int(n_bins, "n_bins")
    values = _as_real_array(values, "values", ndims=(1, 2)).astype(np.float64)
    if len(values) == 0:
        return np.zeros(values.shape, dtype=np.intp)
    columns = values.reshape(len(values), -1)
    bins = np.empty(columns.shape, dtype=np.intp)
    for j, column in enumerate(columns.T):
        edges = np.histogram_bin_edges(column, bins=n_bins)
        bins[:, j] = np.digitize(column, edges[1:-1])
    return bins.reshape(values.shape)


def mig(codes: ArrayLike, factors: ArrayLike, *, n_bins: int = 20) -> float:
    """Mutual information gap (Chen et al., 2018), as computed by disentanglement_lib.

    Each code is discretized into `n_bins` equal-width bins (:func:`discretize`); ``I(z_i; v_k)`` is
    ``sklearn.metrics.mutual_info_score`` between the binned code and the factor, ``H(v_k) = I(v_k; v_k)``, and
    ``MIG = mean_k (I_(1)k - I_(2)k) / H(v_k)`` over the two codes most informative about factor k. All samples are
    used. The score is invariant to permuting the codes and to an affine map of each code (up to values that land
    exactly on a bin edge).

    Parameters
    ----------
    codes : array-like of shape (n_samples, n_codes)
        Learned representation; at least 2 codes.
    factors : array-like of shape (n_samples, n_factors) or (n_samples,)
        Discrete ground-truth factors (see the module notes); constant columns are left out.
    n_bins : int, default=20
        Bins per code.

    Returns
    -------
    float
        MIG in [0, 1].
    """
    n_bins = check_int(n_bins, "n_bins")
    codes, labels = _check_inputs(codes, factors, metric="MIG", min_codes=2)
    mutual_info = _mutual_info_matrix(discretize(codes, n_bins), labels)
    entropies = np.array([mutual_info_score(label, label) for label in labels.T])
    return float(np.mean(_top_two_gap(mutual_info) / entropies))


def sap(
    codes: ArrayLike,
    factors: ArrayLike,
    *,
    continuous_factors: bool = False,
    test_size: float = 1 / 3,
    random_state: int | np.random.RandomState | None = 0,
) -> float:
    """Separated attribute predictability (Kumar et al., 2018), as computed by disentanglement_lib.

    For discrete factors, ``S[i, k]`` is the accuracy on the test split of ``LinearSVC(C=0.01,
    class_weight="balanced")`` trained on the training split to predict factor k from code i alone; for continuous
    factors ``S[i, k] = cov(z_i, v_k)^2 / (var(z_i) var(v_k))`` on all samples (0 for a code with variance below
    1e-12). ``SAP = mean_k (S_(1)k - S_(2)k)``, the gap between the two highest scores of each factor.

    Before the classifiers, each code is standardized with the training split's mean and standard deviation (a code
    constant on the training split becomes 0). disentanglement_lib feeds the raw codes, so there the classifiers'
    regularization (``C=0.01``, intercept included) acts on each code's scale: codes of standard deviation 1e-3
    score near chance whatever they encode, and codes of scale 1e100 keep liblinear iterating for minutes. On codes
    of zero mean and unit variance the two agree. The score is invariant to permuting the codes and to any affine
    map of each code with a positive scale (a negative one mirrors the code, which a linear classifier follows up
    to rounding and the solver's tolerance).

    Parameters
    ----------
    codes : array-like of shape (n_samples, n_codes)
        Learned representation; at least 2 codes.
    factors : array-like of shape (n_samples, n_factors) or (n_samples,)
        Ground-truth factors, discrete unless `continuous_factors`; constant columns are left out.
    continuous_factors : bool, default=False
        Score with squared correlations instead of classifiers (disentanglement_lib's flag of the same name).
    test_size : float, default=1/3
        Fraction of the samples held out to test the classifiers (disentanglement_lib: 5 000 test for 10 000
        training points); unused with continuous factors.
    random_state : int, RandomState instance or None, default=0
        Seeds the split (and the classifiers), so the score is deterministic for a fixed seed; unused with
        continuous factors.

    Returns
    -------
    float
        SAP in [0, 1].
    """
    if not isinstance(continuous_factors, (bool, np.bool_)):
        raise ValueError(f"continuous_factors: must be True or False, got {continuous_factors!r}")
    codes, factors = _check_inputs(codes, factors, metric="SAP", min_codes=2, discrete=not continuous_factors)
    if continuous_factors:
        scores = _squared_correlations(codes, factors)
    else:
        rng = _check_random_state(random_state)
        train, test = _split(len(codes), test_size, rng)
        codes_train, codes_test = _standardize(codes[train], codes[test])
        scores = _single_code_accuracies(codes_train, factors[train], codes_test, factors[test], rng)
    return float(np.mean(_top_two_gap(scores)))


def irs(codes: ArrayLike, factors: ArrayLike, *, diff_quantile: float = 0.99, factor_bins: int = 20) -> float:
    """Interventional robustness score (Suter et al., 2019), as computed by disentanglement_lib.

    Factors are discretized into `factor_bins` equal-width bins and constant codes are dropped (a score of 0 if
    none is left). For factor k and each of its values g, ``d_k(g) = quantile(|z - E[z | v_k = g]|, diff_quantile)``
    over the samples with ``v_k = g``; ``IRS[i, k] = 1 - mean_g d_k(g)[i] / max|z_i - E[z_i]|``; code i scores
    ``max_k IRS[i, k]`` and the result is the average of these scores weighted by ``max|z_i - E[z_i]|``. All
    samples are used. The score is invariant to permuting the codes, shifting and flipping the sign of each code,
    and scaling all codes by one common factor (a per-code scale changes the weights).

    Parameters
    ----------
    codes : array-like of shape (n_samples, n_codes)
        Learned representation.
    factors : array-like of shape (n_samples, n_factors) or (n_samples,)
        Ground-truth factors, any real values when binned; constant columns are left out.
    diff_quantile : float, default=0.99
        Quantile of the deviations within a factor value (1.0 gives the paper's maximum; 0.99 is
        disentanglement_lib's robust choice).
    factor_bins : int or None, default=20
        Equal-width bins per factor (:func:`discretize`; disentanglement_lib's 20). A factor with at most
        `factor_bins` equally spaced values keeps its values. None uses the factor values as given (discrete
        factors only).

    Returns
    -------
    float
        IRS in [0, 1].
    """
    if isinstance(diff_quantile, bool) or not isinstance(diff_quantile, numbers.Real) or not 0 <= diff_quantile <= 1:
        raise ValueError(f"diff_quantile: must be a number in [0, 1], got {diff_quantile!r}")
    factor_bins = check_int(factor_bins, "factor_bins", allow_none=True)
    codes, factors = _check_inputs(codes, factors, metric="IRS", discrete=factor_bins is None)
    labels = factors if factor_bins is None else discretize(factors, factor_bins)
    active = codes[:, np.ptp(codes, axis=0) > 0]
    if active.shape[1] == 0:
        return 0.0
    max_deviations = np.max(np.abs(active - active.mean(axis=0)), axis=0)
    deviations = np.column_stack([_mean_group_quantile_deviation(active, label, diff_quantile) for label in labels.T])
    irs_matrix = 1.0 - deviations / max_deviations[:, np.newaxis]
    return float(np.average(irs_matrix.max(axis=1), weights=max_deviations))


def dci(
    codes: ArrayLike,
    factors: ArrayLike,
    *,
    estimator: str = "gbt",
    test_size: float = 1 / 3,
    random_state: int | np.random.RandomState | None = 0,
) -> DCIScores:
    """Disentanglement, completeness and informativeness (Eastwood & Williams, 2018).

    One model per factor, trained on the training split to predict the factor from all codes, gives the
    importance matrix ``R[i, k]``. With ``P`` the rows (or columns) of R normalized (after adding 1e-11, as
    disentanglement_lib does):

    - disentanglement ``= sum_i rho_i (1 - H_{n_factors}(P_i.))``, ``rho_i = sum_k R[i, k] / sum R``;
    - completeness ``= sum_k rho_k (1 - H_{n_codes}(P_.k))``, ``rho_k = sum_i R[i, k] / sum R`` with classifiers
      (disentanglement_lib), the plain mean over k of ``1 - H_{n_codes}(P_.k)`` with regressors (Eastwood &
      Williams' code);
    - informativeness: with classifiers (disentanglement_lib's form, discrete factors) the mean accuracy on the test
      split, higher is better; with regressors (Eastwood & Williams' own form, any real factors, codes and factors
      standardized on the training split) the mean normalized root mean squared error on the test split,
      ``sqrt(mean((prediction - factor)^2)) / std(factor)`` over the test split, **lower is better** (0: exact,
      1: no better than the test mean). See the module notes.

    ``H_m`` is the entropy in base m; with a single factor (or code) it is 0, so disentanglement (or completeness)
    is 1. An all-zero R weighs every code (factor) equally, as in disentanglement_lib; an all-zero column (a factor
    the Lasso predicts by its mean alone) has completeness 0.

    Parameters
    ----------
    codes : array-like of shape (n_samples, n_codes)
        Learned representation.
    factors : array-like of shape (n_samples, n_factors) or (n_samples,)
        Ground-truth factors, discrete with classifiers, any real values with regressors; constant columns are left
        out.
    estimator : {"gbt", "random_forest", "lasso", "random_forest_regressor"}, default="gbt"
        Classifiers (disentanglement_lib's DCI): "gbt": ``GradientBoostingClassifier()``, disentanglement_lib's
        choice; it fits one tree per class and boosting stage, so factors with many values are slow (about 5
        minutes on one core for 10 000 samples, 10 codes and factors of 3, 6, 40, 32 and 32 values).
        "random_forest": ``RandomForestClassifier()`` (impurity-based importances too), some 25 times faster there,
        but not disentanglement_lib's metric: its random feature subsets spread importance over codes that carry
        nothing about a factor, so perfectly disentangled codes score a disentanglement of about 0.4-0.5 instead of
        1 (see the module notes). Use "gbt" to compare with disentanglement_lib's published values.
        Regressors (Eastwood & Williams' DCI, the generative RKM paper's Table 2): "lasso": ``Lasso(alpha=0.02)``,
        importance ``|coef_|``; "random_forest_regressor": ``RandomForestRegressor(n_estimators=10,
        max_depth=d)``, d per factor from (1, 2, 3, 5, 8, 12) by the error on a validation quarter of the training
        split, importance ``feature_importances_``.
    test_size : float, default=1/3
        Fraction of the samples held out to measure informativeness (disentanglement_lib: 5 000 test for 10 000
        training points).
    random_state : int, RandomState instance or None, default=0
        Seeds the split and the models, so the scores are deterministic for a fixed seed.

    Returns
    -------
    DCIScores
        ``(disentanglement, completeness, informativeness)``: the first two in [0, 1]; informativeness in [0, 1]
        with classifiers, >= 0 with regressors (an error, about 1 for codes that carry nothing, and above 1 for a
        model worse than the test mean).

    Examples
    --------
    >>> import numpy as np
    >>> from rkm.metrics import dci
    >>> positions = np.random.default_rng(0).uniform(size=(600, 2))
    >>> d, c, i = dci(positions, positions, estimator="lasso")
    >>> print(f"{d:.3f} {c:.3f} {i:.3f}")
    1.000 1.000 0.020
    """
    check_choices([("estimator", estimator, (*_CLASSIFIERS, *_REGRESSORS))])
    regression = estimator in _REGRESSORS
    codes, factors = _check_inputs(codes, factors, metric="DCI", discrete=not regression)
    rng = _check_random_state(random_state)
    train, test = _split(len(codes), test_size, rng)
    if regression:
        importance, errors = _regression_importances(estimator, codes, factors, train, test, rng)
        return DCIScores(
            disentanglement=_dci_specificity(importance, axis=1),
            completeness=float(np.mean(_dci_slice_specificities(importance, axis=0))),
            informativeness=float(errors.mean()),
        )
    importance = np.zeros((codes.shape[1], factors.shape[1]))
    accuracies = np.zeros(factors.shape[1])
    for k, label in enumerate(factors.T):
        model = _CLASSIFIERS[estimator](random_state=rng)
        predictions, fitted = _fit_predict(model, codes[train], label[train], codes[test])
        if fitted is not None:
            importance[:, k] = np.abs(fitted.feature_importances_)
        accuracies[k] = np.mean(predictions == label[test])
    return DCIScores(
        disentanglement=_dci_specificity(importance, axis=1),
        completeness=_dci_specificity(importance, axis=0),
        informativeness=float(accuracies.mean()),
    )


def _regression_importances(estimator, codes, factors, train, test, rng):
    """Eastwood & Williams' regressions: the importance matrix R (n_codes, n_factors) and each factor's test NRMSE.

    Codes and factors are standardized with the training split's moments; a code constant on the training split
    becomes 0 there (it gets no importance).
    """
    codes_train, codes_test = _standardize(codes[train], codes[test])
    factors_train, factors_test = _standardize(factors[train], factors[test])
    importance = np.zeros((codes.shape[1], factors.shape[1]))
    errors = np.zeros(factors.shape[1])
    for k in range(factors.shape[1]):
        y_train, y_test = factors_train[:, k], factors_test[:, k]
        if estimator == "lasso":
            model = Lasso(alpha=_LASSO_ALPHA).fit(codes_train, y_train)
            importance[:, k] = np.abs(model.coef_)
        else:
            depth = _forest_depth(codes_train, y_train, rng)
            model = _forest(depth, rng).fit(codes_train, y_train)
            importance[:, k] = model.feature_importances_
        scale = np.std(y_test)
        if not scale > 0:
            # Constant on the test split: the factor's spread over all samples, in the same standardized units.
            scale = np.std(np.concatenate([y_train, y_test]))
        errors[k] = np.sqrt(np.mean((model.predict(codes_test) - y_test) ** 2)) / scale
    return importance, errors


def _forest(depth, rng):
    return RandomForestRegressor(n_estimators=_FOREST_N_ESTIMATORS, max_depth=depth, random_state=rng)


def _forest_depth(codes, y, rng):
    """The depth of :data:`_FOREST_DEPTHS` whose forest, fitted on 3/4 of the training split, has the lowest mean
    squared error on the other quarter (the smaller depth on a tie)."""
    fit, validation = train_test_split(np.arange(len(y)), test_size=_FOREST_VALIDATION_SIZE, random_state=rng)
    errors = []
    for depth in _FOREST_DEPTHS:
        model = _forest(depth, rng).fit(codes[fit], y[fit])
        errors.append(np.mean((model.predict(codes[validation]) - y[validation]) ** 2))
    return _FOREST_DEPTHS[int(np.argmin(errors))]


def _as_real_array(array, name, *, ndims):
    """`array` as a finite real NumPy array with one of the dimensions `ndims`, or a ValueError naming it."""
    try:
        array = np.asarray(array)
    except (ValueError, TypeError) as error:
        raise ValueError(f"{name}: cannot be read as a numeric array ({error})") from error
    if array.dtype.kind not in "biuf":
        raise ValueError(f"{name}: must hold real numbers, got an array of dtype {array.dtype}")
    if array.ndim not in ndims:
        allowed = " or ".join(f"{ndim}-D" for ndim in ndims)
        raise ValueError(f"{name}: must be a {allowed} array, got shape {array.shape}")
    if array.dtype.kind == "f" and not np.isfinite(array).all():
        raise ValueError(f"{name}: contains NaN or infinite values")
    return array


def _check_inputs(codes, factors, *, metric, min_codes=1, discrete=True):
    """Validate the arguments shared by every metric.

    Returns
    -------
    codes : ndarray of float64, shape (n_samples, n_codes)
    factors : ndarray, shape (n_samples, n_varying_factors)
        The non-constant factor columns: integer labels ``0 .. n_values - 1`` when `discrete`, else float64 values.
    """
    codes = _as_real_array(codes, "codes", ndims=(2,)).astype(np.float64)
    factors = _as_real_array(factors, "factors", ndims=(1, 2))
    n_samples, n_codes = codes.shape
    if len(factors) != n_samples:
        raise ValueError(f"codes: has {n_samples} rows but factors has {len(factors)}; both need one row per sample")
    if n_samples < 2:
        raise ValueError(f"codes: {metric} needs at least 2 samples, got {n_samples}")
    factors = factors.reshape(n_samples, -1)
    if n_codes < min_codes:
        raise ValueError(f"codes: {metric} needs at least {min_codes} code columns, got {n_codes}")
    if factors.shape[1] == 0:
        raise ValueError("factors: needs at least one factor column, got 0")
    max_values = max(2, n_samples // 2)
    varying = []
    for k, column in enumerate(factors.T):
        values, labels = np.unique(column, return_inverse=True)
        if discrete and len(values) > max_values:
            raise ValueError(
                f"factors: column {k} has {len(values)} distinct values in {n_samples} samples, but {metric} needs "
                f"discrete factors (at most {max_values} values, each seen twice on average); discretize it first, "
                f"e.g. with rkm.metrics.discretize(factors[:, {k}], n_bins=20)"
            )
        if len(values) > 1:
            varying.append(labels.reshape(-1) if discrete else column.astype(np.float64))
    if not varying:
        raise ValueError(f"factors: every factor column is constant; {metric} needs at least one that varies")
    return codes, np.column_stack(varying)


def _check_random_state(random_state):
    """numpy RandomState from an int, a RandomState or None, or a ValueError naming random_state."""
    try:
        return check_random_state(random_state)
    except ValueError as error:
        raise ValueError(f"random_state: must be None, an int or a numpy RandomState, got {random_state!r}") from error


def _split(n_samples, test_size, rng):
    """Indices of a random train/test split holding `test_size` of the samples (rounded up) for testing."""
    if isinstance(test_size, bool) or not isinstance(test_size, numbers.Real) or not 0 < test_size < 1:
        raise ValueError(f"test_size: must be a fraction in (0, 1), got {test_size!r}")
    if np.ceil(test_size * n_samples) >= n_samples:
        raise ValueError(f"test_size: {test_size!r} of {n_samples} samples leaves none for training")
    return train_test_split(np.arange(n_samples), test_size=test_size, random_state=rng)


def _standardize(train, test):
    """`train` and `test` with every column centred and scaled by the training split's mean and standard deviation.

    Each column is first divided by its largest absolute value over both splits, so codes near the overflow or
    underflow limits (1e300, 1e-300) give finite, accurate moments; the result is the same affine map. A column
    constant on the training split is only centred (it becomes 0 there).
    """
    largest = np.maximum(np.abs(train).max(axis=0, initial=0.0), np.abs(test).max(axis=0, initial=0.0))
    largest[largest == 0] = 1.0
    train, test = train / largest, test / largest
    mean, std = train.mean(axis=0), train.std(axis=0)
    constant = np.ptp(train, axis=0) == 0
    # The mean of equal values can be off by an ulp: a constant column is centred on its value exactly.
    mean[constant], std[constant] = train[0, constant], 1.0
    return (train - mean) / std, (test - mean) / std


def _fit_predict(model, x_train, y_train, x_test):
    """Fit `model` and predict `x_test`; returns (predictions, fitted model).

    A training split that holds a single class (a rare value can fall entirely in the test split) cannot be fitted
    by scikit-learn's classifiers; every prediction is then that class, and the model is None.
    """
    if np.all(y_train == y_train[0]):
        return np.full(len(x_test), y_train[0]), None
    return model.fit(x_train, y_train).predict(x_test), model


def _top_two_gap(scores):
    """Per column of `scores` (n_codes, n_factors): the largest entry minus the second largest."""
    ordered = np.sort(scores, axis=0)
    return ordered[-1] - ordered[-2]


def _mutual_info_matrix(code_bins, labels):
    """``I[i, k]`` = mutual information (nats) between discrete code i and discrete factor k."""
    return np.array([[mutual_info_score(label, code) for label in labels.T] for code in code_bins.T])


def _squared_correlations(codes, factors):
    """``S[i, k] = cov(z_i, v_k)^2 / (var z_i var v_k)``; 0 for codes of variance below 1e-12 (disentanglement_lib)."""
    centered_codes = codes - codes.mean(axis=0)
    centered_factors = factors - factors.mean(axis=0)
    n_dof = len(codes) - 1
    covariance = centered_codes.T @ centered_factors / n_dof
    code_variance = np.sum(centered_codes**2, axis=0) / n_dof
    factor_variance = np.sum(centered_factors**2, axis=0) / n_dof
    denominator = np.outer(code_variance, factor_variance)
    defined = (code_variance[:, np.newaxis] > _SAP_MIN_VARIANCE) & (denominator > 0)
    return np.divide(covariance**2, denominator, out=np.zeros_like(covariance), where=defined)


def _single_code_accuracies(codes_train, labels_train, codes_test, labels_test, rng):
    """``S[i, k]`` = test accuracy of disentanglement_lib's linear SVM predicting factor k from code i alone."""
    scores = np.zeros((codes_train.shape[1], labels_train.shape[1]))
    for i in range(codes_train.shape[1]):
        for k in range(labels_train.shape[1]):
            model = LinearSVC(C=0.01, class_weight="balanced", random_state=rng)
            predictions, _ = _fit_predict(model, codes_train[:, [i]], labels_train[:, k], codes_test[:, [i]])
            scores[i, k] = np.mean(predictions == labels_test[:, k])
    return scores


def _mean_group_quantile_deviation(values, labels, q):
    """Mean over the groups of `labels` of the q-quantile of ``|values - group mean|``, for every column of `values`.

    The groups are made contiguous by one sort; each group's deviations are then sorted within the group (sort each
    column, then regroup stably, which keeps every group in ascending order) and the quantile is interpolated
    linearly between order statistics, numpy.quantile's default method.
    """
    order = np.argsort(labels, kind="stable")
    values, labels = values[order], labels[order]
    _, starts, counts = np.unique(labels, return_index=True, return_counts=True)
    means = np.add.reduceat(values, starts, axis=0) / counts[:, np.newaxis]
    deviations = np.abs(values - np.repeat(means, counts, axis=0))
    by_deviation = np.argsort(deviations, axis=0)
    regroup = np.argsort(labels[by_deviation], axis=0, kind="stable")
    ordered = np.take_along_axis(deviations, np.take_along_axis(by_deviation, regroup, axis=0), axis=0)
    position = q * (counts - 1)
    below = np.floor(position).astype(np.intp)
    above = np.minimum(below + 1, counts - 1)
    fraction = (position - below)[:, np.newaxis]
    low, high = ordered[starts + below], ordered[starts + above]
    return np.mean(low + fraction * (high - low), axis=0)


def _dci_slice_specificities(importance, axis):
    """``1 - H(P_s)`` for every slice s of `importance` along `axis` (1: codes, 0: factors).

    ``P_s`` is the slice normalized after adding 1e-11 and H its entropy in base len(slice); a single entry gives 1.
    """
    n_outcomes = importance.shape[axis]
    if n_outcomes == 1:
        return np.ones(importance.shape[1 - axis])
    return 1.0 - scipy.stats.entropy(importance + _DCI_EPS, base=n_outcomes, axis=axis)


def _dci_specificity(importance, axis):
    """``sum_s rho_s (1 - H(P_s))`` over the slices s of `importance` along `axis` (1: codes, 0: factors).

    ``P_s`` is the slice normalized after adding 1e-11, H its entropy in base len(slice) (0 for a single entry), and
    ``rho_s`` the slice's share of the total importance (uniform when the total is 0), as in disentanglement_lib.
    """
    specificity = _dci_slice_specificities(importance, axis)
    weights = importance.sum(axis=axis)
    if weights.sum() == 0:
        weights = np.ones_like(weights)
    return float(np.sum(specificity * weights / weights.sum()))
