"""The L-BFGS driver with a divergence guard, shared by the deep RKMs, the Stiefel penalty method and the
kernel autoencoders."""

import time
from dataclasses import dataclass

import numpy as np
import scipy.optimize

from rkm._utils.exceptions import DivergenceError
from rkm._utils.validation import check_int, check_positive

# Divergence guard of minimize_objective: values past these are never a fit, only a runaway.
MAX_ABS_OBJECTIVE = 1e100
MAX_ABS_THETA = 1e8

# Lower bound of the trailing eigenvalue entries (l1, l2 of the deep RKMs): keeps Lambda^-1 finite; a sign flip
# through 0 would cross the pole of E^2 / l.
EIGEN_LOWER_BOUND = 1e-8


@dataclass(frozen=True, eq=False)
class MinimizeResult:
    """Outcome of :func:`minimize_objective`.

    Attributes
    ----------
    theta : ndarray of shape theta0.shape
        The parameters with the lowest objective evaluated (L-BFGS-B's final iterate unless a line-search trial
        went lower).
    fun : float
        The objective at theta.
    nit : int
        L-BFGS iterations run.
    nfev : int
        Objective and gradient evaluations.
    converged : bool
        Whether L-BFGS-B met its tolerance (False when it reached max_iter or stopped abnormally, e.g. in a line
        search that could not decrease f any further at the working precision).
    message : str
        L-BFGS-B's reason for stopping.
    history : ndarray of shape (nit + 1,)
        history[0] = f at the (bound-projected) start, history[k] = f after iteration k.
    """

    theta: np.ndarray
    fun: float
    nit: int
    nfev: int
    converged: bool
    message: str
    history: np.ndarray


class _Diverged(Exception):
    """Raised inside the objective so that L-BFGS-B stops at the first runaway evaluation."""

    def __init__(self, reason):
        super().__init__(reason)
        self.reason = reason


class _GuardedObjective:
    """Wraps fun: checks every evaluation, remembers the last good and the best point, counts iterations."""

    def __init__(self, fun, verbose, stop=None):
        self.fun, self.verbose, self.stop, self.stopped = fun, verbose, stop, False
        self.nfev, self.nit, self.history = 0, 0, []
        self.last_theta, self.last_f = None, np.nan
        self.best_theta, self.best_f = None, np.inf
        self.start = time.perf_counter()

    def __call__(self, theta):
        largest = np.max(np.abs(theta), initial=0.0)
        if not largest <= MAX_ABS_THETA:
            raise _Diverged(f"max|theta| = {largest:.3g} exceeds {MAX_ABS_THETA:g}")
        f, grad = self.fun(theta)[:2]
        self.nfev += 1
        f, grad = float(f), np.asarray(grad, dtype=np.float64)
        if not np.isfinite(f):
            raise _Diverged(f"the objective is {f}")
        if abs(f) > MAX_ABS_OBJECTIVE:
            raise _Diverged(f"|f| = {abs(f):.3g} exceeds {MAX_ABS_OBJECTIVE:g}")
        if grad.shape != theta.shape:
            raise ValueError(f"fun: must return a gradient of shape {theta.shape}, got {grad.shape}")
        if not np.all(np.isfinite(grad)):
            raise _Diverged("the gradient is not finite")
        # L-BFGS-B reuses its x buffer: copy what is kept.
        self.last_theta, self.last_f = theta.copy(), f
        if f < self.best_f:
            self.best_theta, self.best_f = self.last_theta, f
        if not self.history:
            self.history.append(f)
            self._report(f)
        return f, grad

    def callback(self, theta):
        """Called by L-BFGS-B after each iteration with the accepted point, which it evaluated last."""
        self.nit += 1
        f = self.last_f if np.array_equal(theta, self.last_theta) else self(theta)[0]
        self.history.append(f)
        self._report(f)
        if self.stop is not None and self.stop(self.history):
            self.stopped = True
            raise StopIteration  # L-BFGS-B ends the run and returns the current point

    def _report(self, f):
        if self.verbose > 0:
            elapsed = time.perf_counter() - self.start
            print(f"L-BFGS iteration {self.nit:4d}  objective {f: .10e}  ({elapsed:.2f} s)", flush=True)


def _check_start(theta0):
    theta0 = np.array(theta0, dtype=np.float64)
    if theta0.ndim != 1 or theta0.size == 0:
        raise ValueError(f"theta0: must be a non-empty 1-D array, got shape {theta0.shape}")
    if not np.all(np.isfinite(theta0)):
        raise ValueError("theta0: must be finite")
    return theta0


def minimize_objective(fun, theta0, *, n_eigen, max_iter=400, tol=1e-6, ftol=None, stop=None, verbose=0, advice=None):
    """Minimize a smooth objective with L-BFGS-B, the trailing n_eigen entries bounded below by 1e-8.

    Parameters
    ----------
    fun : callable
        fun(theta) -> (f, grad, ...): the objective and its gradient (further returned items, such as the
        level terms of the deep RKM objective, are ignored).
    theta0 : array-like of shape (n,)
        Starting point; entries of the bounded block below 1e-8 are raised to it (L-BFGS-B's projection).
    n_eigen : int
        Number of trailing entries that are eigenvalues (l1, l2): bounded below by 1e-8 so that Lambda^-1 stays
        finite. 0 for no bounds.
    max_iter : int, default=400
        Most L-BFGS iterations (the paper's fminunc limit).
    tol : float, default=1e-6
        Stops when the largest entry of the projected gradient falls to tol (L-BFGS-B's gtol). The relative
        decrease test keeps scipy's default ftol (about 2.2e-9): ftol = 1e-6 stops the paper's M2 runs after
        a few iterations on the flat objective near their 0.1-scale starting point.
    ftol : float or None, default=None
        L-BFGS-B's relative decrease test, (f_k - f_{k+1}) / max(|f_k|, |f_{k+1}|, 1) <= ftol; None keeps
        scipy's default.
    stop : callable or None, default=None
        stop(history) after every iteration, with the objective values so far (the start first): True ends the
        run as converged (a caller's own stopping rule).
    verbose : int, default=0
        > 0 prints the objective at the start and after every iteration, and the reason for stopping.
    advice : str or None, default=None
        What the caller's user can change when the objective diverges, appended to the DivergenceError.

    Returns
    -------
    MinimizeResult

    Raises
    ------
    DivergenceError
        As soon as an evaluation gives a non-finite objective or gradient, |f| > 1e100, or a point with
        |theta|_inf > 1e8. Carries the last good point; no NaN is ever returned.
    ValueError
        On bad arguments, or when the objective at theta0 already fails the guard.
    """
    if not callable(fun):
        raise ValueError(f"fun: must be callable, got {fun!r}")
    theta0 = _check_start(theta0)
    n_eigen = check_int(n_eigen, "n_eigen", low=0)
    if n_eigen > theta0.size:
        raise ValueError(f"n_eigen: must be at most len(theta0) = {theta0.size}, got {n_eigen}")
    max_iter = check_int(max_iter, "max_iter")
    tol = check_positive(tol, "tol")
    verbose = check_int(verbose, "verbose", low=0)

    bounds = [(None, None)] * (theta0.size - n_eigen) + [(EIGEN_LOWER_BOUND, None)] * n_eigen
    guarded = _GuardedObjective(fun, verbose, stop)
    # L-BFGS-B tries at most 20 line-search points per iteration: with this budget, max_iter is what binds.
    options = {"maxiter": max_iter, "maxfun": 21 * max_iter + 1, "gtol": tol}
    if ftol is not None:
        options["ftol"] = check_positive(ftol, "ftol")
    try:
        result = scipy.optimize.minimize(
            guarded, theta0, jac=True, method="L-BFGS-B", bounds=bounds, options=options, callback=guarded.callback
        )
    except _Diverged as diverged:
        if guarded.last_theta is None:
            raise ValueError(f"theta0: the objective fails at the starting point: {diverged.reason}") from None
        raise DivergenceError(
            f"the objective diverged after {guarded.nit} L-BFGS iterations: {diverged.reason}; the last finite "
            f"point (objective {guarded.last_f:.6g}) is kept in .iterate" + (f"; {advice}" if advice else ""),
            iterate=guarded.last_theta,
            fun=guarded.last_f,
            nit=guarded.nit,
        ) from None
    message = result.message if isinstance(result.message, str) else result.message.decode()
    if verbose > 0:
        print(f"L-BFGS stopped after {result.nit} iterations: {message}", flush=True)
    return MinimizeResult(
        theta=guarded.best_theta,
        fun=guarded.best_f,
        nit=int(result.nit),
        nfev=guarded.nfev,
        converged=bool(result.success or guarded.stopped),
        message=message,
        history=np.array(guarded.history),
    )
