"""Exceptions shared by rkm's optimizers."""

import numpy as np


class DivergenceError(RuntimeError):
    """The objective ran away during minimization (non-finite, ``|f| > 1e100`` or ``|theta|_inf > 1e8``).

    Attributes
    ----------
    iterate : ndarray or None
        The last parameter vector evaluated whose objective and gradient were finite and within the guard.
    fun : float
        The objective there.
    nit : int
        L-BFGS iterations completed before the divergence.
    """

    def __init__(self, message, iterate=None, fun=np.nan, nit=0):
        super().__init__(message)
        self.iterate, self.fun, self.nit = iterate, fun, nit

    def __reduce__(self):
        # Keep the attributes when the error crosses a process boundary (joblib workers pickle exceptions).
        return type(self), (self.args[0], self.iterate, self.fun, self.nit)
