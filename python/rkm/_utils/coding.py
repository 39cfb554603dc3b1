"""Class codewords of the LS-SVM classifiers (Suykens 2017 eq. 3.22), shared by the shallow and deep models."""

import math

import numpy as np

from rkm._utils.validation import check_choices

CODINGS = ("one_vs_all", "minimum_output")


def _minimum_output_codes(n_classes):
    """+-1 codewords of ceil(log2 n_classes) bits: the binary digits of the class index."""
    n_bits = max(1, math.ceil(math.log2(n_classes)))
    bits = (np.arange(n_classes)[:, None] >> np.arange(n_bits)[None, :]) & 1
    return 2.0 * bits - 1.0


def class_codes(n_classes, coding):
    """The +-1 codeword of each class (n_classes x n_outputs) for the LS-SVM classifiers' targets (eq. 3.22).

    Two classes use one output (+1 for the second class); more use one output per class ("one_vs_all") or
    ceil(log2 n_classes) outputs carrying the binary digits of the class index ("minimum_output").
    """
    check_choices((("coding", coding, CODINGS),))
    if n_classes == 2:
        return np.array([[-1.0], [1.0]])
    if coding == "one_vs_all":
        return 2.0 * np.eye(n_classes) - 1.0
    return _minimum_output_codes(n_classes)


def class_scores(outputs, codes, coding):
    """Per-class scores of coded outputs: the output itself for two classes (positive: the second class),
    each class's own output for one-vs-all, else the outputs' inner product with each codeword."""
    if codes.shape[0] == 2:
        return outputs.ravel()
    if coding == "one_vs_all":
        return outputs
    return outputs @ codes.T.astype(outputs.dtype)
