"""Minimization over the Stiefel manifold St(p, N) = {H in R^(N x p): H^T H = I_p}.

:func:`minimize` finds a local minimizer of a smooth f(H) among N x p matrices with orthonormal columns, as the
Constr-DRKM objective of Tonin, Patrinos & Suykens (2021, eq. 7) needs. ``f`` is given with its Euclidean
gradient G = df/dH; the methods use the Riemannian gradient ``G - H sym(H^T G)`` (sym(M) = (M + M^T) / 2), whose
Frobenius norm ``grad_norm`` measures stationarity on the manifold, and ``feasibility = ||H^T H - I||_F``.

Methods
-------
``"pg"`` (default)
    Projected gradient (the paper's section 4.1): ``H+ = polar(H - gamma G)`` with Armijo backtracking, the step
    doubled after each accepted one (capped by ``options["max_step"]``). Monotone, one call per iteration when the
    step is accepted, robust. For concave objectives such as eq. 7 the step grows until the method becomes the
    orthogonal (subspace) iteration, whose rate is linear.
``"pg_anderson"``
    Anderson acceleration (memory ``options["memory"]``, default 5) of the same projected-gradient map with a fixed
    step, safeguarded by the objective (a candidate that raises f is replaced by a "pg" step and the memory is
    cleared; the memory is also cleared when grad_norm stalls for ``memory`` iterations).
``"cayley_bb"``
    Wen & Yin's (2013) Cayley-transform curve with Barzilai-Borwein steps and a non-monotone (Zhang-Hager) line
    search. The returned point is the best one seen.
``"cayley_adam"``
    Cayley Adam of Li, Li & Todorovic (2020, their Algorithm 2), as used by the paper: Adam moments moved to the
    tangent space and an iterative Cayley retraction. Scalar second moment (so the method stays invariant under
    rotations of H), 5 Cayley iterations, no random re-orthonormalization (a deterministic polar re-projection
    whenever the feasibility exceeds 1e-13 instead). No line search: ``options["lr"]`` decides speed and
    stability; a non-finite objective stops it with :class:`DivergenceError`. The moments are divided by the
    gradient's RMS and the step is min(lr, 2q / ||W||), so lr is a rotation per iteration that does not depend
    on the objective's scale: the default lr 10 (measured: lr 3 to 30 converge alike on the problems of
    bench/constr_drkm_perf.py, 100 oscillates near the optimum; lr 10 was the fastest on the paper's Table 1).
    ``options["lr"] = "paper"`` is the paper's 5e-5, which moves H by about 5e-5 per iteration and needs tens of
    thousands of iterations (the paper: 41 005): use it only to reproduce the paper's Table 1. Use Cayley Adam
    where its cheap iteration (one call, no line search, no SVD) matters more than the iteration count.
``"bb_pg"``
    Stretches of 100 "cayley_bb" iterations, switching to "pg" from the best point so far (and back) whenever a
    stretch makes no progress (the lowest grad_norm does not halve and the lowest f does not fall by 1e-9
    relative) or its line search fails; "stagnated" after 4 stretches in a row without progress. "cayley_bb"
    is fast where the objective is far from concave (the projected gradient's doubled steps then wander at
    grad_norm 1e-5..1e-4), but its f-based line search cannot resolve the nearly flat directions of a nearly
    concave objective (it stalls near grad_norm 1.5e-7 on the paper's MNIST problem), where "pg", which turns
    into the subspace iteration, converges in tens of iterations from its point. The default of
    :class:`rkm.ConstrainedDeepRKM`.
``"penalty"``
    The paper's Algorithm 1: minimize f(H) + (mu/2) ||H^T H - I||_F^2 by L-BFGS (or Adam) for a growing mu until
    the feasibility is below ``options["outer_tol"]``. Its iterates are only approximately feasible: the result
    is projected onto St(p, N) (``polish``) and reports the unprojected feasibility too. Slow; kept for
    comparison with the paper.

Which method is fastest depends on the problem; try "pg", "cayley_bb" and "pg_anderson" (no tuning needed).
On min -1/2 Tr(H^T A H) (N = 60, p = 5) "cayley_bb" needs about 100 iterations to grad_norm 1e-8 where "pg"
needs about 660; on a two-level Constr-DRKM of a 2-D shape (N = 400, s = (2, 1)) "cayley_bb" and "pg_anderson"
reached 5e-8 in 114 and 217 iterations while "pg" stalled near 4e-5; on the paper's MNIST problem (N = 1000,
s = (10, 5)) "pg" was the fastest, while "cayley_bb" and "pg_anderson" stalled near 1.6e-7 (bench/RESULTS.md).
"bb_pg" converged on all of these (section "Constr-DRKM defaults" of bench/RESULTS.md: 18 of 18 fits on MNIST,
2-D shapes, blobs, sprites and Gaussian data, against "pg" 3, "cayley_bb" 15 of 16, "pg_anderson" 13 of 16).
"cayley_adam" and "penalty" reproduce the paper's comparison; both are much slower.

Stopping criteria
-----------------
``options["criterion"] = "grad"`` (default) stops when grad_norm <= tol. ``"step"`` is the paper's test
``||H_{k+1} - H_k||_F / step_k <= tol`` (step_k the step size used). The step test can be fooled by large steps:
with an unbounded step the projected gradient moves H by ``polar(-G) - H`` whatever gamma is, so the ratio falls
like 1/gamma while the gradient stays large (e.g. 3e-14 with grad_norm 0.045); use it with
``options["max_step"]`` bounded. grad_norm is its gamma -> 0 limit and does not depend on the step. Every method
also stops after ``max_iter`` iterations, when a line search finds no decrease ("line_search_failed", or
"non_finite" when its last trial points gave a non-finite f or G), or when neither f (to rounding) nor the
lowest grad_norm has changed for 10 iterations ("stagnated"): a tol below what float64 can attain ends with
``success=False`` rather than a hang. "penalty" stops as "stagnated" when its projected iterate is feasible but
its grad_norm has not fallen for 3 outer iterations (the inner L-BFGS-B can no longer lower the penalized
objective at the working precision), and as "max_outer" after ``max_outer`` outer iterations; its message names
the test that failed and the inner solver's last reason for stopping. The returned point is the one that met the
tolerance, otherwise the best (lowest f) point seen.

Readings of the paper made here
-------------------------------
* A start ``H0`` that is not orthonormal (feasibility > 1e-8) is replaced by its nearest orthonormal matrix
  (the polar factor) and ``x0_feasibility`` reports how far it was; a rank-deficient start is an error.
* The penalty method's inner test ||grad Q|| <= tau_k is met through L-BFGS-B's inf-norm test with
  tau_k / sqrt(N p), which implies it; the outer test "||H^T H|| <= 1e-9" is read ||H^T H - I||_F <= 1e-9;
  ``nit`` counts all inner iterations (as the paper's table does).
* Cayley Adam uses a scalar second moment, beta = (0.9, 0.99), eps 1e-8, q 0.5 and 5 Cayley iterations.
"""

import dataclasses
import time

import numpy as np
import scipy.optimize
from sklearn.utils import check_random_state

from rkm import _core
from rkm._utils.exceptions import DivergenceError
from rkm._utils.threads import blas_threads
from rkm._utils.validation import check_int, check_positive

__all__ = [
    "DivergenceError",
    "StiefelResult",
    "feasibility",
    "minimize",
    "project",
    "random_point",
    "riemannian_gradient",
]

ENGINE_METHODS = ("pg", "cayley_adam", "cayley_bb", "pg_anderson")
METHODS = ENGINE_METHODS + ("penalty", "bb_pg")
# "bb_pg": the engine methods it alternates between, the iterations of one stretch, and what counts as progress
# over a stretch (the lowest grad_norm falls by this factor, or the lowest f by this much relative).
SWITCHING_METHODS = ("cayley_bb", "pg")
SWITCH_STRETCH = 100
SWITCH_GRAD_FACTOR = 0.5
SWITCH_F_RTOL = 1e-9
SWITCH_IDLE_STRETCHES = 4
START_FEASIBILITY = 1e-8  # a start farther than this from St(p, N) is projected
PENALTY_DEFAULTS = {
    "mu0": 1.0,
    "tau0": 1e-5,
    "growth": 8.0,
    "max_outer": 30,
    "outer_tol": 1e-9,
    "inner": "lbfgs",
    "polish": True,
    "lr": 1e-3,
    "history": True,
}
ADAM_INNER_MAX_ITER = 500
# Cayley Adam's default learning rate, and the paper's (section 5.1, Table 1), kept as options["lr"] = "paper".
# The step is alpha = min(lr, 2 q / ||W||) with the moments divided by the gradient's RMS, so lr is a rotation
# per iteration, independent of the objective's scale. Measured (bench/constr_drkm_perf.py --part defaults, and
# the lr grid of bench/constr_drkm.py --part table1): lr 3 to 30 reach the optimum of min -1/2 Tr(H^T A H)
# (N = 60, p = 5) in about 415 iterations, 100 oscillates; lr 10 was the fastest on Table 1 and on 2-D shapes.
CAYLEY_ADAM_LR = 10.0
CAYLEY_ADAM_PAPER_LR = 5e-5
# The penalty method stops as "stagnated" when, with the iterate feasible, grad_norm has not fallen below this
# fraction of its lowest value for this many outer iterations in a row.
PENALTY_STALL_FACTOR = 0.99
PENALTY_STALL_OUTER = 3


@dataclasses.dataclass(frozen=True, eq=False)
class StiefelResult:
    """Outcome of :func:`minimize`.

    Attributes
    ----------
    x : ndarray of shape (N, p)
        The solution: the iterate that met the tolerance, else the best one seen (the last finite one never
        comes back: divergence raises).
    fun : float
        f(x).
    grad_norm : float
        ||G - x sym(x^T G)||_F at x (the Riemannian gradient's norm).
    feasibility : float
        ||x^T x - I||_F.
    step_measure : float
        ||H_k - H_{k-1}||_F / step of the last iteration (NaN before the first, and for "penalty").
    nit : int
        Iterations (accepted steps; "penalty": all inner iterations).
    nfev : int
        Calls of the objective.
    time : float
        Seconds spent in :func:`minimize`.
    success : bool
        Whether the tolerance was met.
    status : str
        "converged"; "max_iter" (the iteration cap); "line_search_failed" (no step with sufficient decrease, at
        finite trial points); "non_finite" (the line search's last trial points had a non-finite objective or
        gradient: f is undefined or overflows next to the iterate); "stagnated" (neither f nor grad_norm
        improves; "penalty": grad_norm of the feasible, projected iterate stalls over outer iterations); or
        "max_outer" ("penalty": ``max_outer`` outer iterations, the message naming the test that failed).
    message : str
        Why the method stopped, in words.
    method : str
        The method used.
    history : dict of ndarray
        "fun" and "grad_norm": the start, then one value per iteration ("penalty": per outer iteration);
        empty when ``options["history"]`` is False.
    x0_feasibility : float
        ||H0^T H0 - I||_F of the start as given (H0 was projected when it exceeded 1e-8).
    n_outer : int
        Outer (penalty-parameter) iterations of "penalty", 0 otherwise.
    feasibility_unpolished : float or None
        "penalty": the feasibility of the last inner iterate before projection; None otherwise.
    """

    x: np.ndarray
    fun: float
    grad_norm: float
    feasibility: float
    step_measure: float
    nit: int
    nfev: int
    time: float
    success: bool
    status: str
    message: str
    method: str
    history: dict
    x0_feasibility: float
    n_outer: int = 0
    feasibility_unpolished: float | None = None


# --------------------------------------------------------------------------------------------------------------
# Points of the manifold


def _check_points(Z, name):
    Z = np.asarray(Z)
    if Z.dtype.kind not in "biuf" or Z.ndim != 2:
        raise ValueError(f"{name}: must be a 2-D array of real numbers, got shape {Z.shape} and dtype {Z.dtype}")
    if not 1 <= Z.shape[1] <= Z.shape[0]:
        raise ValueError(f"{name}: must have shape (N, p) with 1 <= p <= N, got {Z.shape}")
    Z = np.ascontiguousarray(Z, dtype=np.float64)
    if not np.all(np.isfinite(Z)):
        raise ValueError(f"{name}: contains NaN or infinity")
    return Z


def _polar(Z, name):
    try:
        return _core.polar_orthonormalize(Z)
    except ValueError:
        raise ValueError(f"{name}: has rank below p = {Z.shape[1]}: it has no nearest orthonormal matrix") from None


def _polish(H):
    """The penalty's final iterate mapped onto the constraint set: its polar factor, or for a rank-deficient
    iterate (few outer iterations with a small mu can shrink columns to zero) U V^T of its thin SVD, one of its
    nearest orthonormal matrices (the nearest one is not unique then)."""
    try:
        return _core.polar_orthonormalize(H)
    except ValueError:
        U, _, Vt = np.linalg.svd(H, full_matrices=False)
        return U @ Vt


def project(Z):
    """The nearest matrix with orthonormal columns: the polar factor Z (Z^T Z)^(-1/2) = U V^T.

    Parameters
    ----------
    Z : array-like of shape (N, p)
        Finite, 1 <= p <= N, rank p.

    Returns
    -------
    ndarray of shape (N, p)
        U V^T for the thin SVD Z = U S V^T (feasibility at rounding level).

    Raises
    ------
    ValueError
        "Z: ..." for a non-finite or wrongly shaped Z, or one of rank below p.
    """
    return _polar(_check_points(Z, "Z"), "Z")


def random_point(n, p, random_state=None):
    """A random point of St(p, n): standard normal entries made orthonormal by :func:`project`.

    Parameters
    ----------
    n, p : int
        Rows and columns, 1 <= p <= n.
    random_state : int, RandomState instance or None, default=None
        Seed of the normal entries (scikit-learn's convention).

    Returns
    -------
    ndarray of shape (n, p)
        Uniformly distributed on St(p, n) (the polar factor of a Gaussian matrix is Haar distributed).
    """
    n = check_int(n, "n")
    p = check_int(p, "p")
    if p > n:
        raise ValueError(f"p: must be at most n = {n}, got {p}")
    return _polar(check_random_state(random_state).standard_normal((n, p)), "Z")


def feasibility(H):
    """||H^T H - I_p||_F: how far H is from having orthonormal columns.

    Parameters
    ----------
    H : array-like of shape (N, p)

    Returns
    -------
    float
    """
    H = _check_points(H, "H")
    with np.errstate(over="ignore", invalid="ignore"):
        distance = float(np.linalg.norm(H.T @ H - np.eye(H.shape[1])))
    if not np.isfinite(distance):
        raise ValueError("H: H^T H overflows float64; its entries are far too large for a point of the manifold")
    return distance


def riemannian_gradient(H, G):
    """The Riemannian gradient G - H sym(H^T G) of the embedded metric at a point H of St(p, N).

    Parameters
    ----------
    H : array-like of shape (N, p)
        A point with orthonormal columns.
    G : array-like of shape (N, p)
        The Euclidean gradient of f at H.

    Returns
    -------
    ndarray of shape (N, p)
        Tangent at H; its Frobenius norm is the ``grad_norm`` of :func:`minimize`.
    """
    H = _check_points(H, "H")
    G = np.asarray(G)
    if G.shape != H.shape:
        raise ValueError(f"G: must have the shape of H {H.shape}, got {G.shape}")
    if G.dtype.kind not in "biuf" or not np.all(np.isfinite(G)):
        raise ValueError("G: must be finite real numbers")
    with np.errstate(over="ignore", invalid="ignore"):
        tangent = _tangent(H, G.astype(np.float64))
    if not np.all(np.isfinite(tangent)):
        raise ValueError("H, G: the Riemannian gradient overflows float64; scale the objective or the point")
    return tangent


def _tangent(H, G):
    """G - H sym(H^T G), unchecked (the optimizers' inner loops)."""
    HtG = H.T @ G
    return G - H @ ((HtG + HtG.T) / 2)


# --------------------------------------------------------------------------------------------------------------
# minimize


def minimize(fun_and_grad, H0, method="pg", tol=1e-6, max_iter=1000, *, options=None, verbose=0):
    """Minimize f(H) subject to H^T H = I_p.

    Parameters
    ----------
    fun_and_grad : callable or objective
        ``fun_and_grad(H) -> (f, G)``: the objective (float) and its Euclidean gradient, shape (N, p); or an
        object with ``evaluate(H) -> (f, G, ...)``. A compiled objective (``rkm._core.ConstrainedDeepObjective``)
        computes f and G in compiled code without the GIL; the engine reaches every objective through a thin
        Python layer that counts non-finite values (for the "non_finite" status). H is passed read-only in
        spirit: do not modify it.
    H0 : array-like of shape (N, p)
        Start, 1 <= p <= N. Projected onto St(p, N) when ||H0^T H0 - I||_F > 1e-8 (see ``x0_feasibility``).
    method : {"pg", "pg_anderson", "cayley_bb", "cayley_adam", "penalty", "bb_pg"}, default="pg"
        See the module documentation.
    tol : float, default=1e-6
        Stopping tolerance on grad_norm (or on the step measure with ``criterion="step"``); "penalty": on the
        grad_norm of the projected result, together with ``outer_tol`` on the feasibility.
    max_iter : int, default=1000
        Most iterations ("penalty": most inner iterations in all).
    options : dict or None, default=None
        Method options (unknown keys are errors). Engine methods: ``criterion`` "grad" | "step",
        ``max_step`` inf, ``sigma`` 1e-4 (sufficient decrease), ``max_backtracks`` 60, ``history`` True;
        cayley_adam: ``lr`` 10 (or "paper": the paper's 5e-5), ``beta1`` 0.9, ``beta2`` 0.99, ``eps`` 1e-8,
        ``q`` 0.5, ``cayley_iters`` 5;
        pg_anderson: ``memory`` 5; cayley_bb: ``rho`` 1e-4, ``delta`` 0.1, ``nonmonotone`` 0.85.
        penalty: ``mu0`` 1, ``tau0`` 1e-5, ``growth`` 8, ``max_outer`` 30, ``outer_tol`` 1e-9, ``inner``
        "lbfgs" | "adam", ``lr`` 1e-3 (adam), ``polish`` True, ``history`` True.
    verbose : int, default=0
        > 0 prints the progress: "penalty" one line per outer iteration as it runs, the engine methods the
        recorded history after the run (every iteration when verbose >= 2, about 20 lines otherwise), and the
        reason for stopping.

    Returns
    -------
    StiefelResult

    Raises
    ------
    ValueError
        On bad arguments, each message naming its argument ("H0: ..." also for a rank-deficient start); when f
        or G is not finite at the start ("fun: not finite at H0") or G has the wrong shape ("fun: ...").
    DivergenceError
        When the objective becomes non-finite at an accepted iterate ("cayley_adam", "penalty"); ``.iterate``
        holds the last finite iterate (N x p), ``.fun`` its objective and ``.nit`` the iterations done.
        Line-search methods treat a non-finite trial as a failed trial and shrink the step instead; when the
        last trials of a search are all non-finite they return with status "non_finite".

    Examples
    --------
    The two leading eigenvectors of A maximize Tr(H^T A H) on St(2, 4):

    >>> import numpy as np
    >>> from rkm import stiefel
    >>> A = np.diag([3.0, 2.0, 1.0, 0.5])
    >>> H0 = stiefel.random_point(4, 2, random_state=0)
    >>> result = stiefel.minimize(lambda H: (-0.5 * np.trace(H.T @ A @ H), -A @ H), H0)
    >>> round(result.fun, 6), result.success, bool(result.feasibility < 1e-12)
    (-2.5, True, True)
    """
    start = time.perf_counter()
    if method not in METHODS:
        raise ValueError(f"method: must be one of {METHODS}, got {method!r}")
    fun_and_grad = _check_objective(fun_and_grad)
    H0 = _check_points(H0, "H0")
    tol = check_positive(tol, "tol")
    max_iter = check_int(max_iter, "max_iter", low=0)
    verbose = check_int(verbose, "verbose", low=0)
    if options is not None and not isinstance(options, dict):
        raise ValueError(f"options: must be a dict or None, got {type(options).__name__}")
    x0_feasibility = float(np.linalg.norm(H0.T @ H0 - np.eye(H0.shape[1])))
    if x0_feasibility > START_FEASIBILITY:
        H0 = _polar(H0, "H0")
    if method == "penalty":
        fields = _penalty(fun_and_grad, H0, tol, max_iter, dict(options or {}), verbose)
    elif method == "bb_pg":
        fields = _switching(fun_and_grad, H0, tol, max_iter, options, verbose)
    else:
        fields = _engine(fun_and_grad, H0, method, tol, max_iter, options, verbose)
    return StiefelResult(**fields, method=method, x0_feasibility=x0_feasibility, time=time.perf_counter() - start)


def _check_objective(fun_and_grad):
    if not (callable(fun_and_grad) or callable(getattr(fun_and_grad, "evaluate", None))):
        raise ValueError(f"fun_and_grad: must be callable or have an evaluate method, got {fun_and_grad!r}")
    return fun_and_grad


class _Watched:
    """The objective as the engine calls it, counting the non-finite evaluations: a line search that ends on
    non-finite trials failed because f or G is not finite there, not for want of decrease. The engine passes H
    (and takes G) as NumPy arrays either way; a compiled objective keeps its own threads inside ``evaluate``."""

    def __init__(self, fun_and_grad):
        self.fun = getattr(fun_and_grad, "evaluate", fun_and_grad)
        self.streak, self.total, self.last = 0, 0, float("nan")

    def __call__(self, H):
        out = self.fun(H)
        f, G = out[0], out[1]
        if np.isfinite(f) and np.all(np.isfinite(G)):
            self.streak = 0
        else:
            self.streak, self.total, self.last = self.streak + 1, self.total + 1, float(f)
        return f, G


def _engine_options(method, options):
    """The engine's options: Cayley Adam's lr defaults to CAYLEY_ADAM_LR, "paper" gives the paper's 5e-5."""
    options = dict(options or {})
    if method == "cayley_adam":
        lr = options.get("lr", CAYLEY_ADAM_LR)
        if isinstance(lr, str):
            if lr != "paper":
                raise ValueError(f"options: 'lr' must be a positive number or 'paper', got {lr!r}")
            lr = CAYLEY_ADAM_PAPER_LR
        options["lr"] = lr
    return options


def _engine(fun_and_grad, H0, method, tol, max_iter, options, verbose):
    # A compiled objective runs its own OpenMP threads and calls BLAS inside them: one BLAS thread apiece, or
    # BLAS's threads would nest in them (2-4x slower on 2 cores).
    compiled = isinstance(fun_and_grad, _core.StiefelObjective)
    watched = _Watched(fun_and_grad)
    with blas_threads(1 if compiled else None):
        out = _core.stiefel_minimize(watched, H0, method, tol, max_iter, _engine_options(method, options))
    if out["status"] == "line_search_failed" and watched.streak > 0:
        # The search's last (smallest) trials were not finite: say so rather than "no sufficient decrease".
        out["status"] = "non_finite"
        out["message"] = (
            f"the objective or its gradient was not finite (f = {watched.last:g}) at the last {watched.streak} "
            f"trial points of the line search ({watched.total} non-finite evaluations in all): f is undefined or "
            "overflows next to the returned iterate"
        )
    if out["status"] == "diverged":
        raise DivergenceError(
            f"{method}: the objective diverged after {out['nit']} iterations: {out['message']}; the last finite "
            f"iterate (objective {out['fun']:.6g}) is kept in .iterate; try a smaller options['lr']",
            iterate=np.asarray(out["x"]),
            fun=float(out["fun"]),
            nit=int(out["nit"]),
        )
    history = {
        "fun": np.asarray(out["history_fun"], dtype=np.float64),
        "grad_norm": np.asarray(out["history_grad_norm"], dtype=np.float64),
    }
    if verbose > 0:
        _print_history(method, history, verbose)
        print(f"{method}: {out['status']} after {out['nit']} iterations: {out['message']}", flush=True)
    return {
        "x": np.asarray(out["x"]),
        "fun": float(out["fun"]),
        "grad_norm": float(out["grad_norm"]),
        "feasibility": float(out["feasibility"]),
        "step_measure": float(out["step_measure"]),
        "nit": int(out["nit"]),
        "nfev": int(out["nfev"]),
        "success": bool(out["success"]),
        "status": str(out["status"]),
        "message": str(out["message"]),
        "history": history,
    }


def _switching(fun_and_grad, H0, tol, max_iter, options, verbose):
    """ "bb_pg": stretches of SWITCH_STRETCH iterations of "cayley_bb", switching to "pg" (and back) from the
    best point so far whenever a stretch makes no progress (neither the lowest grad_norm halves nor the lowest f
    falls by 1e-9 relative) or its line search fails; "stagnated" after SWITCH_IDLE_STRETCHES stretches in a row
    without progress."""
    options = dict(options or {})
    keep = options.get("history", True)
    options["history"] = True
    x, which, nit, nfev, idle = H0, 0, 0, 0, 0
    history = {"fun": [], "grad_norm": []}
    stretches, last = [], None
    lowest_g, lowest_f = np.inf, np.inf
    while True:
        method = SWITCHING_METHODS[which]
        out = _engine(fun_and_grad, x, method, tol, min(SWITCH_STRETCH, max_iter - nit), options, 0)
        first = 0 if not history["fun"] else 1
        history["fun"].extend(out["history"]["fun"][first:])
        history["grad_norm"].extend(out["history"]["grad_norm"][first:])
        if stretches and stretches[-1][0] == method:
            stretches[-1][2] = nit + out["nit"]
        else:
            stretches.append([method, nit, nit + out["nit"]])
        nit, nfev, last = nit + out["nit"], nfev + out["nfev"], out
        g, f = float(np.min(out["history"]["grad_norm"])), out["fun"]
        progress = g < SWITCH_GRAD_FACTOR * lowest_g or f < lowest_f - SWITCH_F_RTOL * abs(lowest_f)
        if not np.isfinite(lowest_g):  # the first stretch compares with the start
            start_g, start_f = out["history"]["grad_norm"][0], out["history"]["fun"][0]
            progress = g < SWITCH_GRAD_FACTOR * start_g or f < start_f - SWITCH_F_RTOL * abs(start_f)
        lowest_g, lowest_f = min(lowest_g, g), min(lowest_f, f)
        x = out["x"]
        if verbose > 0:
            print(
                f"bb_pg: {method} to iteration {nit}: {out['status']}, objective {f: .12e}, lowest grad_norm {g:.3e}",
                flush=True,
            )
        if out["success"]:
            status, message = (
                "converged",
                f"tolerance met after {nit} iterations ({out['message'].split(' after ')[0]})",
            )
            break
        if out["status"] == "non_finite":
            status, message = out["status"], out["message"]
            break
        if nit >= max_iter:
            status, message = "max_iter", f"max_iter = {max_iter} iterations reached before the tolerance"
            break
        idle = 0 if progress else idle + 1
        if idle >= SWITCH_IDLE_STRETCHES:
            status = "stagnated"
            message = (
                f"no progress over {SWITCH_IDLE_STRETCHES} stretches in a row, alternating "
                f"{' and '.join(SWITCHING_METHODS)}; grad_norm {out['grad_norm']:.3g} > tol {tol:g}"
            )
            break
        if not progress or out["status"] in ("line_search_failed", "stagnated"):
            which = 1 - which
    used = ", ".join(f"{name} {a + 1}-{b}" for name, a, b in stretches if b > a)
    message = f"{message} (iterations: {used or 'none'})"
    if verbose > 0:
        _print_history("bb_pg", history, verbose)
        print(f"bb_pg: {status}: {message}", flush=True)
    return {
        **{key: last[key] for key in ("x", "fun", "grad_norm", "feasibility", "step_measure")},
        "nit": nit,
        "nfev": nfev,
        "success": status == "converged",
        "status": status,
        "message": message,
        "history": {key: np.asarray(values if keep else [], dtype=np.float64) for key, values in history.items()},
    }


def _print_history(method, history, verbose):
    n = len(history["fun"])
    stride = 1 if verbose >= 2 else max(1, n // 20)
    for k in range(0, n, stride):
        f, grad_norm = history["fun"][k], history["grad_norm"][k]
        print(f"{method} iteration {k:5d}  objective {f: .12e}  grad_norm {grad_norm:.3e}")


# --------------------------------------------------------------------------------------------------------------
# Penalty method (Algorithm 1)


def _penalty_options(options):
    for key in options:
        if key not in PENALTY_DEFAULTS:
            raise ValueError(f"options: unknown key {key!r} for method 'penalty'")
    o = {**PENALTY_DEFAULTS, **options}
    for key in ("mu0", "tau0", "outer_tol", "lr"):
        o[key] = check_positive(o[key], f"options: {key!r}")
    o["growth"] = check_positive(o["growth"], "options: 'growth'")
    if o["growth"] <= 1:
        raise ValueError(f"options: 'growth' must exceed 1, got {o['growth']!r}")
    o["max_outer"] = check_int(o["max_outer"], "options: 'max_outer'")
    if o["inner"] not in ("lbfgs", "adam"):
        raise ValueError(f"options: 'inner' must be 'lbfgs' or 'adam', got {o['inner']!r}")
    for key in ("polish", "history"):
        if not isinstance(o[key], (bool, np.bool_)):
            raise ValueError(f"options: {key!r} must be a bool, got {o[key]!r}")
    return o


class _Counted:
    """f, G = evaluate(H) with a call count and a check of G's shape."""

    def __init__(self, fun_and_grad, shape):
        self.fun = getattr(fun_and_grad, "evaluate", fun_and_grad)
        self.shape, self.nfev = shape, 0

    def __call__(self, H):
        out = self.fun(H)
        self.nfev += 1
        f, G = float(out[0]), np.asarray(out[1], dtype=np.float64)
        if G.shape != self.shape:
            raise ValueError(f"fun: gradient has shape {G.shape}, expected {self.shape}")
        return f, G


def _penalized(objective, mu):
    """theta -> (Q, grad Q) for Q(H) = f(H) + (mu / 2) ||H^T H - I||_F^2, H = theta reshaped."""
    N, p = objective.shape

    def Q(theta):
        H = theta.reshape(N, p)
        f, G = objective(H)
        E = H.T @ H - np.eye(p)
        return f + 0.5 * mu * float(np.sum(E * E)), (G + 2.0 * mu * (H @ E)).ravel()

    return Q


def _adam_inner(Q, theta, tau, max_iter, lr):
    """Plain Adam (entry-wise moments, beta 0.9 / 0.999) on Q until ||grad Q|| <= tau: (theta, nit, why it
    stopped)."""
    m, v = np.zeros_like(theta), np.zeros_like(theta)
    for t in range(1, max_iter + 1):
        q, g = Q(theta)
        if not (np.isfinite(q) and np.all(np.isfinite(g))):
            raise DivergenceError("adam", iterate=theta, nit=t - 1)
        if np.linalg.norm(g) <= tau:
            return theta, t - 1, "||grad Q|| <= tau"
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        theta = theta - lr * (m / (1 - 0.9**t)) / (np.sqrt(v / (1 - 0.999**t)) + 1e-8)
    return theta, max_iter, f"{max_iter} Adam iterations without ||grad Q|| <= tau"


class _NotFinite(Exception):
    """Raised inside the penalized objective so that L-BFGS-B stops at the first non-finite value."""


def _lbfgs_inner(Q, theta, tau, max_iter):
    """L-BFGS-B on Q until ||grad Q||_inf <= tau / sqrt(n) (which implies ||grad Q||_2 <= tau): (theta, nit,
    L-BFGS-B's reason for stopping).

    ftol = 0: the relative-decrease test of L-BFGS-B (scipy's default 2.2e-9) stops long before the gradient
    test on these objectives; the gradient test, max_iter or a failed line search end the solve.
    """
    last = {"theta": theta, "nit": 0}

    def guarded(x):
        q, g = Q(x)
        if not (np.isfinite(q) and np.all(np.isfinite(g))):
            raise _NotFinite
        last["theta"] = x.copy()
        return q, g

    def count(_):
        last["nit"] += 1

    options = {"maxiter": max_iter, "maxfun": 21 * max_iter + 1, "gtol": tau / np.sqrt(theta.size), "ftol": 0.0}
    try:
        out = scipy.optimize.minimize(guarded, theta, jac=True, method="L-BFGS-B", options=options, callback=count)
    except _NotFinite:
        raise DivergenceError("lbfgs", iterate=last["theta"], nit=last["nit"]) from None
    message = out.message if isinstance(out.message, str) else out.message.decode()
    return out.x, int(out.nit), f"L-BFGS-B: {message}"


def _inner_solve(objective, H, mu, tau, max_iter, o):
    """Minimize the penalized objective from H to ||grad Q|| <= tau: (H, iterations, why the inner solve
    stopped)."""
    Q = _penalized(objective, mu)
    if o["inner"] == "adam":
        theta, nit, why = _adam_inner(Q, H.ravel(), tau, min(max_iter, ADAM_INNER_MAX_ITER), o["lr"])
    else:
        theta, nit, why = _lbfgs_inner(Q, H.ravel(), tau, max_iter)
    return theta.reshape(H.shape), nit, why


def _penalty_shortfall(unpolished, grad_norm, outer_tol, tol, why):
    """Which of the penalty's two tests failed at the last outer iteration, with the inner solver's last stop."""
    failed = []
    if unpolished > outer_tol:
        failed.append(f"feasibility {unpolished:.3g} > outer_tol {outer_tol:g}")
    if grad_norm > tol:
        failed.append(f"grad_norm {grad_norm:.3g} > tol {tol:g}")
    return " and ".join(failed) + f" (last inner solve: {why})"


def _penalty(fun_and_grad, H0, tol, max_iter, options, verbose):
    o = _penalty_options(options)
    objective = _Counted(fun_and_grad, H0.shape)
    f, G = objective(H0)
    if not (np.isfinite(f) and np.all(np.isfinite(G))):
        raise ValueError("fun: not finite at H0")
    H, mu, tau, nit, n_outer = H0, o["mu0"], o["tau0"], 0, 0
    history = {"fun": [f], "grad_norm": [float(np.linalg.norm(_tangent(H0, G)))]}
    status, message, why, stalled, lowest = "max_iter", "", "", 0, np.inf
    unpolished, grad_norm = float(np.linalg.norm(H0.T @ H0 - np.eye(H0.shape[1]))), history["grad_norm"][0]
    while True:
        if n_outer >= o["max_outer"]:
            status = "max_outer"
            message = (
                f"max_outer = {o['max_outer']} outer iterations reached before the tolerances: "
                + _penalty_shortfall(unpolished, grad_norm, o["outer_tol"], tol, why)
            )
            break
        if nit >= max_iter:
            message = f"max_iter = {max_iter} inner iterations reached before the tolerances" + (
                ": " + _penalty_shortfall(unpolished, grad_norm, o["outer_tol"], tol, why) if n_outer else ""
            )
            break
        try:
            H, inner_nit, why = _inner_solve(objective, H, mu, tau, max_iter - nit, o)
        except DivergenceError as diverged:
            last = H if diverged.iterate is None else diverged.iterate.reshape(H.shape)
            raise DivergenceError(
                f"penalty: the objective diverged in outer iteration {n_outer + 1} (mu = {mu:.3g}); the last "
                "finite iterate is kept in .iterate",
                iterate=last,
                fun=diverged.fun,
                nit=nit + diverged.nit,
            ) from None
        nit, n_outer = nit + inner_nit, n_outer + 1
        x = _polish(H) if o["polish"] else H
        f, G = objective(x)
        grad_norm = float(np.linalg.norm(_tangent(x, G)))
        unpolished = float(np.linalg.norm(H.T @ H - np.eye(H.shape[1])))
        history["fun"].append(f)
        history["grad_norm"].append(grad_norm)
        if verbose > 0:
            print(
                f"penalty outer {n_outer:3d}  mu {mu:.3e}  objective {f: .12e}  grad_norm {grad_norm:.3e}  "
                f"feasibility {unpolished:.3e}  inner iterations {inner_nit}",
                flush=True,
            )
        if unpolished <= o["outer_tol"] and grad_norm <= tol:
            status, message = (
                "converged",
                (
                    f"feasibility {unpolished:.3g} <= outer_tol and grad_norm "
                    f"{grad_norm:.3g} <= tol after {n_outer} outer iterations"
                ),
            )
            break
        # Feasible, but grad_norm no longer falls: the inner solver cannot lower Q at the working precision, and
        # further outer iterations (smaller tau) only repeat it. Stop and say so.
        if unpolished <= o["outer_tol"] and grad_norm >= PENALTY_STALL_FACTOR * lowest:
            stalled += 1
        else:
            stalled = 0
        lowest = min(lowest, grad_norm)
        if stalled >= PENALTY_STALL_OUTER:
            status = "stagnated"
            message = (
                f"grad_norm of the projected iterate stalled at {grad_norm:.3g} > tol {tol:g} over the last "
                f"{PENALTY_STALL_OUTER} outer iterations, the iterate feasible (feasibility {unpolished:.3g} <= "
                f"outer_tol); the inner solver cannot lower the penalized objective further at the working "
                f"precision (last inner solve: {why}); use a larger tol or an engine method (e.g. 'pg')"
            )
            break
        # Algorithm 1 raises mu every outer iteration; once the iterate is feasible to outer_tol a larger mu only
        # worsens the inner conditioning, so then only the inner tolerance tightens.
        mu, tau = (mu if unpolished <= o["outer_tol"] else mu * o["growth"]), tau / 2
    if n_outer == 0:
        x, unpolished = H0, float(np.linalg.norm(H0.T @ H0 - np.eye(H0.shape[1])))
        grad_norm = history["grad_norm"][0]
    if verbose > 0:
        print(f"penalty: {status}: {message}", flush=True)
    keep = o["history"]
    return {
        "x": x,
        "fun": float(f),
        "grad_norm": grad_norm,
        "feasibility": float(np.linalg.norm(x.T @ x - np.eye(x.shape[1]))),
        "step_measure": float("nan"),
        "nit": nit,
        "nfev": objective.nfev,
        "success": status == "converged",
        "status": status,
        "message": message,
        "history": {key: np.asarray(values if keep else [], dtype=np.float64) for key, values in history.items()},
        "n_outer": n_outer,
        "feasibility_unpolished": unpolished,
    }
