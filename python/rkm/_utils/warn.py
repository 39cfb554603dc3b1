"""Warnings attributed to the user's line, wherever in rkm they are raised."""

import os
import sys
import warnings

import sklearn

_RKM_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_INTERNAL_DIRS = (_RKM_DIR + os.sep, os.path.dirname(os.path.abspath(sklearn.__file__)) + os.sep)


def warn(message, category):
    """warnings.warn with the stack level of the first frame outside rkm and scikit-learn.

    A fixed stacklevel points into rkm whenever the call depth differs between paths (a fit reached through
    scikit-learn's _fit_context, a helper called from two places); users then cannot filter by module or see
    which of their lines warned. Frames inside scikit-learn are skipped too, so a warning raised in a fit
    that GridSearchCV runs names the user's GridSearchCV call.
    """
    frame, level = sys._getframe(1), 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_INTERNAL_DIRS):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level + 1)
