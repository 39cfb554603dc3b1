"""Class probabilities by Platt scaling with an internal cross-validation, shared by rkm's classifiers.

The map is that of scikit-learn's ``SVC(probability=True)`` and of ``CalibratedClassifierCV(method="sigmoid",
ensemble=False)``: the classifier's decision values on held-out folds (``cross_val_predict`` of a clone) fit one
sigmoid 1 / (1 + exp(a f + b)) per output by Platt's regularised maximum likelihood (Platt 1999, with Lin, Lin
and Weng's 2007 targets; scikit-learn's ``_SigmoidCalibration``), and the classifier fitted on all the data
supplies the decision values at prediction. Two classes: P(classes_[1] | x) = sigmoid(f(x)) and
P(classes_[0] | x) = 1 - that. More classes: one sigmoid per class on that class's score, the C probabilities
normalised to sum to 1 (uniform where every sigmoid gives 0). The probabilities therefore equal those of
``CalibratedClassifierCV(clone, method="sigmoid", cv=cv, ensemble=False)`` on the same folds.

Use from an estimator's fit (``self`` has ``decision_function`` and ``classes_``)::

    from rkm._utils.calibration import fit_platt

    def fit(self, X, y, sample_weight=None):
        ...  # fit the model itself on (X, y)
        if self.probability:
            self.calibrator_ = fit_platt(
                clone(self).set_params(probability=False), X, y, sample_weight=sample_weight, cv=5
            )

    def predict_proba(self, X):
        return self.calibrator_.predict_proba(self.decision_function(X))

References
----------
J. C. Platt, "Probabilistic outputs for support vector machines and comparisons to regularized likelihood
methods", Advances in Large Margin Classifiers, MIT Press, 1999.
H.-T. Lin, C.-J. Lin and R. C. Weng, "A note on Platt's probabilistic outputs for support vector machines",
Machine Learning 68(3), 2007.
"""

from __future__ import annotations

from numbers import Integral

import numpy as np
from sklearn import config_context, get_config
from sklearn.calibration import _SigmoidCalibration
from sklearn.model_selection import check_cv, cross_val_predict
from sklearn.preprocessing import LabelEncoder, label_binarize

__all__ = ["PlattCalibration", "fit_platt"]


class PlattCalibration:
    """Fitted Platt sigmoids: decision values -> class probabilities (module docstring).

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    calibrators_ : list of fitted sklearn.calibration._SigmoidCalibration
        One for two classes (the score of classes_[1]), one per class beyond; ``a_``, ``b_`` are the
        sigmoid's parameters, P = 1 / (1 + exp(a_ f + b_)).
    n_splits_ : int
        Folds of the internal cross-validation.
    """

    def __init__(self, classes, calibrators, n_splits):
        self.classes_ = classes
        self.calibrators_ = calibrators
        self.n_splits_ = n_splits

    def predict_proba(self, decision):
        """Probabilities of shape (n_samples, n_classes) from the classifier's ``decision_function`` output.

        Parameters
        ----------
        decision : ndarray of shape (n_samples,) for two classes, else (n_samples, n_classes)
        """
        scores = np.asarray(decision, dtype=np.float64)
        scores = scores.reshape(-1, 1) if scores.ndim == 1 else scores
        n_classes = self.classes_.shape[0]
        if scores.shape[1] != len(self.calibrators_):
            raise ValueError(
                f"decision: expected {len(self.calibrators_)} column(s) of decision values, got {scores.shape[1]}"
            )
        proba = np.zeros((scores.shape[0], n_classes))
        if n_classes == 2:
            proba[:, 1] = self.calibrators_[0].predict(scores[:, 0])
            proba[:, 0] = 1.0 - proba[:, 1]
        else:
            for index, calibrator in enumerate(self.calibrators_):
                proba[:, index] = calibrator.predict(scores[:, index])
            total = proba.sum(axis=1, keepdims=True)
            proba = np.divide(proba, total, out=np.full_like(proba, 1.0 / n_classes), where=total != 0)
        return proba


def _n_splits(cv, y):
    if isinstance(cv, Integral):
        return int(cv)
    return getattr(cv, "n_splits", None)


def fit_platt(estimator, X, y, *, sample_weight=None, cv=5, fit_params=None):
    """Fit Platt sigmoids on the out-of-fold decision values of `estimator` (module docstring).

    Parameters
    ----------
    estimator : classifier, unfitted
        A clone of the model with ``decision_function`` (with its own probabilities turned off, so that the
        folds do not calibrate again); it is cloned again for each fold.
    X : array-like of shape (n_samples, n_features)
        The training data (or the precomputed kernel matrix of a pairwise estimator: the folds take the
        right rows and columns, as in ``cross_val_predict``).
    y : array-like of shape (n_samples,)
    sample_weight : array-like of shape (n_samples,), default=None
        Weights of the folds' fits (passed to ``estimator.fit``) and of the sigmoids' likelihood.
    cv : int or cross-validation splitter, default=5
        As ``CalibratedClassifierCV``'s cv: an int means stratified k-fold without shuffling (deterministic).
        Every class needs at least n_splits samples.
    fit_params : dict, default=None
        Further parameters of ``estimator.fit``.

    Returns
    -------
    PlattCalibration

    Raises
    ------
    ValueError
        When a class has fewer samples than folds, naming the class.
    """
    classes, counts = np.unique(y, return_counts=True)
    n_splits = _n_splits(cv, y)
    if n_splits is not None and counts.min() < n_splits:
        smallest = classes[np.argmin(counts)]
        raise ValueError(
            f"y: class probabilities need {n_splits} samples of every class for their {n_splits}-fold internal "
            f"cross-validation, class {smallest!r} has {counts.min()}"
        )
    splitter = check_cv(cv, y, classifier=True)
    params = dict(fit_params or {})
    if sample_weight is not None:
        sample_weight = np.asarray(sample_weight, dtype=np.float64)
        params["sample_weight"] = sample_weight
        if get_config().get("enable_metadata_routing", False) and hasattr(estimator, "set_fit_request"):
            estimator = estimator.set_fit_request(sample_weight=True)
    # The folds' fits are internal: parameter validation already ran for the estimator that calls this.
    with config_context(skip_parameter_validation=True):
        decision = cross_val_predict(estimator, X, y, cv=splitter, method="decision_function", params=params)
    decision = decision.reshape(-1, 1) if decision.ndim == 1 else decision
    encoded = LabelEncoder().fit(classes).transform(y)
    targets = label_binarize(encoded, classes=np.arange(classes.size))
    calibrators = [
        _SigmoidCalibration().fit(decision[:, column], targets[:, column], sample_weight)
        for column in range(decision.shape[1])
    ]
    return PlattCalibration(classes, calibrators, splitter.get_n_splits(X, y))
