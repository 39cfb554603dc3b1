"""Minimization on the Stiefel manifold St(p, N) = {H in R^(N x p): H^T H = I_p}, the core's ``stiefel``.

This is the NumPy twin of ``_core.stiefel_minimize`` and ``_core.polar_orthonormalize``: the compiled engine
takes the same decisions in the same order, so that both produce the same iterates (to rounding). Every rule
that decides an iterate is written out in the docstrings and comments below; the compiled engine follows them.

Notation (one iterate H, N x p, float64 throughout)
----------------------------------------------------
* ``<A, B> = sum(A * B)`` (Frobenius inner product), ``||A|| = sqrt(<A, A>)``, ``sym(M) = (M + M^T) / 2``.
* ``f, G = fun(H)``: objective and Euclidean gradient (N x p). One call of ``fun`` is one ``nfev``; a trial
  point whose polar factor fails (rank deficient) is not evaluated and costs no ``nfev``.
* ``rgrad(H, G) = G - H sym(H^T G)`` (Riemannian gradient, embedded metric); ``grad_norm = ||rgrad||``.
* ``feasibility(H) = ||H^T H - I_p||``.
* ``polar(Z) = Z (Z^T Z)^(-1/2)`` (the nearest point of St(p, N), see :func:`polar_orthonormalize`).

Common driver (all four methods)
--------------------------------
1. Evaluate ``f0, G0 = fun(H0)`` (nfev = 1); non-finite f0 or G0 -> ``ValueError("fun: not finite at H0")``.
   ``history[0]`` holds f0 and grad_norm0. If criterion is "grad" and ``grad_norm0 <= tol``: converged, nit 0.
2. While ``nit < max_iter``: the method makes one step from the current iterate (it may call ``fun`` several
   times in a line search). A step that cannot be taken ends the run ("line_search_failed", or "diverged" for
   cayley_adam) *without* incrementing nit. Otherwise ``nit += 1``, the new iterate becomes current, its f and
   grad_norm are appended to the history, ``step_measure = ||H_new - H_old|| / step`` (step = the step size
   used: gamma, alpha or tau), and the tests run in this order:
   a. converged: criterion "grad": ``grad_norm_new <= tol``; criterion "step": ``step_measure <= tol``;
   b. stagnated: 10 consecutive iterations without progress, where an iteration makes progress when
      ``|f_new - f_old| > 4 eps |f_old|`` (eps = 2.22e-16) or grad_norm_new is below the lowest grad_norm of
      all earlier iterates (H0 included). f alone is not enough: it is exact only to ~1e-14 relative, so it
      stops changing while grad_norm still falls (grad_norm ~ 1e-7 on f ~ 100), and the run must go on to
      a small tol;
   c. the loop condition (nit == max_iter -> "max_iter").
3. Returned iterate: when converged, the iterate that met the test; when diverged, the last iterate with finite
   f and G; otherwise the best one (lowest f over H0 and all accepted iterates, the earliest on ties). ``fun``,
   ``grad_norm`` and ``feasibility`` are those of the returned iterate; ``step_measure`` is the last one
   computed (NaN before the first step).

Line searches (pg, cayley_bb, the fallback of pg_anderson) accept a trial value ``f_t`` against a reference
``f_ref`` and a required decrease ``d >= 0`` when ``f_t <= f_ref - d + NOISE * |f_ref|`` with ``NOISE = 1e-13``:
near a minimizer the decrease a step can bring (~ grad_norm^2) falls below the rounding error of f, and without
the allowance the search would shrink the step to nothing and stop before grad_norm reaches a small tol. A trial
with non-finite f or G, or with a failed polar factor, is a failed trial (the step is shrunk).
"""

import numbers

import numpy as np

from rkm.reference._validation import blas_threads

EPS = np.finfo(np.float64).eps
NOISE = 1e-13  # relative allowance for rounding in f, in every sufficient-decrease test
STAGNATION_ITERS = 10  # consecutive iterations with f unchanged to 4 eps |f| -> "stagnated"
REPROJECT_ABOVE = 1e-13  # cayley_adam / cayley_bb re-project a new iterate whose feasibility exceeds this
MAX_STEP_SIZE = 1e20  # hard upper bound of gamma / tau (doubling or BB steps would otherwise overflow)
MIN_STEP_SIZE = 1e-20  # lower clip of the BB step
H0_FEASIBILITY = 1e-8  # the engine accepts a start this close to St(p, N)
GRAM_RATIO = 1e-12  # polar: eigenvalue ratio of Z^T Z below which the Gram form gives way to the SVD
RANK_RATIO = 1e-12  # polar: singular-value ratio at or below which Z counts as rank deficient

METHODS = ("pg", "cayley_adam", "cayley_bb", "pg_anderson")
DEFAULT_OPTIONS = {
    "criterion": "grad",
    "max_step": np.inf,
    "sigma": 1e-4,
    "max_backtracks": 60,
    "lr": 1e-3,
    "beta1": 0.9,
    "beta2": 0.99,
    "eps": 1e-8,
    "q": 0.5,
    "cayley_iters": 5,
    "memory": 5,
    "rho": 1e-4,
    "delta": 0.1,
    "nonmonotone": 0.85,
    "history": True,
}


# --------------------------------------------------------------------------------------------------------------
# Shared pieces


def _polar(Z):
    """polar(Z), or None when Z is not finite or has rank < p.

    Gram form when Z^T Z is well conditioned: E = Z^T Z = Q diag(w) Q^T (symmetric eigendecomposition),
    Y = ((Z Q) diag(w^-1/2)) Q^T, followed by a second identical pass on Y (Y^T Y = Q2 diag(w2) Q2^T,
    Y <- ((Y Q2) diag(w2^-1/2)) Q2^T), which brings the feasibility to rounding level. The Gram form is used
    when min(w) > GRAM_RATIO * max(w); otherwise the thin SVD Z = U diag(s) V^T gives U V^T, unless
    min(s) <= RANK_RATIO * max(s) (rank deficient: None).
    """
    if not np.all(np.isfinite(Z)):
        return None
    w, Q = np.linalg.eigh(Z.T @ Z)
    if w[0] > GRAM_RATIO * w[-1]:
        Y = ((Z @ Q) / np.sqrt(w)) @ Q.T
        w, Q = np.linalg.eigh(Y.T @ Y)
        return ((Y @ Q) / np.sqrt(w)) @ Q.T
    U, s, Vt = np.linalg.svd(Z, full_matrices=False)
    if s[-1] <= RANK_RATIO * s[0]:
        return None
    return U @ Vt


def polar_orthonormalize(Z, n_threads=None):
    """The orthonormal polar factor Z (Z^T Z)^(-1/2) = U V^T of an N x p matrix of rank p (p <= N).

    It is the point of St(p, N) nearest to Z in the Frobenius norm.

    Parameters
    ----------
    Z : array-like of shape (N, p)
        Finite, with 1 <= p <= N and rank p.
    n_threads : int, default=None
        BLAS threads during the call.

    Returns
    -------
    ndarray of shape (N, p), float64
        Orthonormal columns (feasibility at rounding level).

    Raises
    ------
    ValueError
        "Z: ..." when Z is not a finite 2-D array with 1 <= p <= N, or its rank is below p (smallest singular
        value <= 1e-12 times the largest).
    """
    Z = _check_matrix(Z, "Z")
    with blas_threads(n_threads):
        Y = _polar(Z)
    if Y is None:
        raise ValueError(f"Z: has rank below p = {Z.shape[1]} (its polar factor is not defined)")
    return Y


def feasibility(H):
    """||H^T H - I_p||_F."""
    return float(np.linalg.norm(H.T @ H - np.eye(H.shape[1])))


def riemannian_gradient(H, G):
    """G - H sym(H^T G): the Riemannian gradient of the embedded metric."""
    HtG = H.T @ G
    return G - H @ ((HtG + HtG.T) / 2)


def _inner(A, B):
    return float(np.sum(A * B))


def _check_matrix(Z, name):
    Z = np.asarray(Z)
    if Z.dtype.kind not in "biuf" or Z.ndim != 2:
        raise ValueError(f"{name}: must be a 2-D array of real numbers, got shape {Z.shape} and dtype {Z.dtype}")
    if not 1 <= Z.shape[1] <= Z.shape[0]:
        raise ValueError(f"{name}: must have shape (N, p) with 1 <= p <= N, got {Z.shape}")
    Z = np.array(Z, dtype=np.float64)
    if not np.all(np.isfinite(Z)):
        raise ValueError(f"{name}: contains NaN or infinity")
    return Z


def _check_options(options):
    options = {} if options is None else dict(options)
    for key in options:
        if key not in DEFAULT_OPTIONS:
            raise ValueError(f"options: unknown key {key!r}")
    merged = {**DEFAULT_OPTIONS, **options}

    def bad(key, what):
        return ValueError(f"options: {key!r} must be {what}, got {merged[key]!r}")

    def real(key):
        value = merged[key]
        return not isinstance(value, bool) and isinstance(value, numbers.Real) and not np.isnan(value)

    def integer(key, low):
        value = merged[key]
        return not isinstance(value, bool) and isinstance(value, numbers.Integral) and value >= low

    if merged["criterion"] not in ("grad", "step"):
        raise bad("criterion", "'grad' or 'step'")
    if not (real("max_step") and merged["max_step"] > 0):
        raise bad("max_step", "a positive number (inf allowed)")
    for key in ("sigma", "rho", "delta"):
        if not (real(key) and 0 < merged[key] < 1):
            raise bad(key, "in (0, 1)")
    for key in ("beta1", "beta2", "nonmonotone"):
        if not (real(key) and 0 <= merged[key] < 1):
            raise bad(key, "in [0, 1)")
    for key in ("lr", "eps", "q"):
        if not (real(key) and 0 < merged[key] < np.inf):
            raise bad(key, "a positive finite number")
    if not integer("max_backtracks", 0):
        raise bad("max_backtracks", "an int >= 0")
    if not integer("cayley_iters", 0):
        raise bad("cayley_iters", "an int >= 0")
    if not integer("memory", 1):
        raise bad("memory", "an int >= 1")
    if not isinstance(merged["history"], (bool, np.bool_)):
        raise bad("history", "a bool")
    for key in ("max_step", "sigma", "rho", "delta", "beta1", "beta2", "nonmonotone", "lr", "eps", "q"):
        merged[key] = float(merged[key])
    return merged


class _Objective:
    """fun as f, G = evaluate(H): counts calls (nfev) and checks the gradient's shape."""

    def __init__(self, fun, shape):
        if hasattr(fun, "evaluate"):
            fun = fun.evaluate
        if not callable(fun):
            raise ValueError(f"fun: must be callable or have an evaluate method, got {fun!r}")
        self.fun, self.shape, self.nfev = fun, shape, 0

    def __call__(self, H):
        """(f, G, finite): finite is False when f or any entry of G is NaN or infinite."""
        out = self.fun(H)
        self.nfev += 1
        f, G = float(out[0]), np.asarray(out[1], dtype=np.float64)
        if G.shape != self.shape:
            raise ValueError(f"fun: gradient has shape {G.shape}, expected {self.shape}")
        return f, G, bool(np.isfinite(f) and np.all(np.isfinite(G)))


def _decreased(f_trial, f_ref, required):
    """The sufficient-decrease test of every line search, with the rounding allowance NOISE |f_ref|."""
    return f_trial <= f_ref - required + NOISE * abs(f_ref)


class _Point:
    """An iterate with its objective, Euclidean gradient, Riemannian gradient and grad_norm."""

    def __init__(self, H, f, G):
        self.H, self.f, self.G = H, f, G
        self.rgrad = riemannian_gradient(H, G)
        self.grad_norm = float(np.linalg.norm(self.rgrad))


class _Step:
    """An accepted step: the new point and the step size used (gamma, alpha or tau)."""

    def __init__(self, point, size):
        self.point, self.size = point, size


class _Stop(Exception):
    """A method cannot make its step: status "line_search_failed" or "diverged"."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status, self.message = status, message


# --------------------------------------------------------------------------------------------------------------
# Methods: each is a class with step(point, nit) -> _Step (nit = iterations completed before this step) or
# raising _Stop. They keep their own state (step sizes, moments, memory) between steps.


class _ProjectedGradient:
    """M1 "pg": H+ = polar(H - gamma G) with Armijo backtracking.

    First trial of iteration 1: gamma = min(max_step, 1 / ||G0||, 1e20) (1 / ||G0|| read as 1 when G0 = 0).
    First trial of every later iteration: gamma = min(max_step, 2 * gamma_accepted_before, 1e20).
    Trial: Z = H - gamma G, H+ = polar(Z); accepted when _decreased(f(H+), f(H), (sigma / gamma) ||H+ - H||^2);
    otherwise gamma /= 2. At most 1 + max_backtracks trials, then _Stop("line_search_failed").
    """

    def __init__(self, objective, options, point0):
        self.objective, self.options = objective, options
        norm_G0 = float(np.linalg.norm(point0.G))
        self.gamma = min(options["max_step"], 1.0 / norm_G0 if norm_G0 > 0 else 1.0, MAX_STEP_SIZE)

    def step(self, point, nit):
        gamma = self.gamma if nit == 0 else min(self.options["max_step"], 2.0 * self.gamma, MAX_STEP_SIZE)
        accepted = _armijo_polar_search(self.objective, self.options, point, gamma)
        self.gamma = accepted.size
        return accepted


def _armijo_polar_search(objective, options, point, gamma):
    """Backtracking along gamma -> polar(H - gamma G) from the first trial gamma (pg and pg_anderson)."""
    sigma = options["sigma"]
    for _ in range(1 + options["max_backtracks"]):
        H_new = _polar(point.H - gamma * point.G)
        if H_new is not None:
            f, G, finite = objective(H_new)
            required = (sigma / gamma) * float(np.linalg.norm(H_new - point.H)) ** 2
            if finite and _decreased(f, point.f, required):
                return _Step(_Point(H_new, f, G), gamma)
        gamma /= 2.0
    raise _Stop("line_search_failed", f"no sufficient decrease after {options['max_backtracks']} step halvings")


class _CayleyAdam:
    """M2 "cayley_adam": Li, Li & Todorovic's Cayley Adam (their Algorithm 2) with a scalar second moment.

    State: momentum M (N x p, starts 0), scalar v (starts 0). Step number t = nit + 1 (1-based, for the bias
    corrections). With G the gradient at H:

        M = beta1 M + (1 - beta1) G
        v = beta2 v + (1 - beta2) ||G||^2
        r = (1 - beta1^t) sqrt(v / (1 - beta2^t) + eps)
        P = (M - 0.5 H (H^T M)) / r
        W Z := P (H^T Z) - H (P^T Z)          (W = P H^T - H P^T, skew, never formed)
        M = r W H                              (momentum moved to the tangent space; uses the computed H^T H)
        ||W|| = sqrt(max(0, 2 ||P||^2 - 2 <H^T P, (H^T P)^T>))
        alpha = min(lr, 2 q / (||W|| + eps))
        Y = H - alpha W H
        repeat cayley_iters times:  Y = H - (alpha / 2) W (H + Y)
        H_new = Y; if feasibility(H_new) > 1e-13: H_new = polar(H_new)

    then one call of fun at H_new. Non-finite f or G there (or a failed polar) -> _Stop("diverged"); the
    driver then returns the previous iterate. No line search: one call per iteration. Step size = alpha.
    """

    def __init__(self, objective, options, point0):
        self.objective, self.options = objective, options
        self.M = np.zeros_like(point0.H)
        self.v = 0.0

    def step(self, point, nit):
        o, H, G = self.options, point.H, point.G
        t = nit + 1
        self.M = o["beta1"] * self.M + (1.0 - o["beta1"]) * G
        self.v = o["beta2"] * self.v + (1.0 - o["beta2"]) * _inner(G, G)
        r = (1.0 - o["beta1"] ** t) * np.sqrt(self.v / (1.0 - o["beta2"] ** t) + o["eps"])
        P = (self.M - 0.5 * (H @ (H.T @ self.M))) / r

        def W_times(Z):
            return P @ (H.T @ Z) - H @ (P.T @ Z)

        WH = W_times(H)
        self.M = r * WH
        HtP = H.T @ P
        norm_W = np.sqrt(max(0.0, 2.0 * _inner(P, P) - 2.0 * _inner(HtP, HtP.T)))
        alpha = min(o["lr"], 2.0 * o["q"] / (norm_W + o["eps"]))
        Y = H - alpha * WH
        for _ in range(o["cayley_iters"]):
            Y = H - (alpha / 2.0) * W_times(H + Y)
        H_new = _polar(Y) if feasibility(Y) > REPROJECT_ABOVE else Y
        if H_new is None:
            raise _Stop("diverged", "the Cayley step left the floating-point range")
        f, G_new, finite = self.objective(H_new)
        if not finite:
            raise _Stop("diverged", f"the objective is not finite after {nit} iterations (f = {f})")
        return _Step(_Point(H_new, f, G_new), alpha)


class _CayleyBB:
    """M4 "cayley_bb": Wen & Yin's curvilinear search (OptStiefelGBB) with Zhang-Hager non-monotone Armijo.

    With G the gradient at H and U = [G, H], V = [H, -G] (N x 2p; A = U V^T = G H^T - H G^T):

        D = G - H (G^T H)                                (= A H; D is the search direction's gradient)
        gd = <G, D>                                      (= -f'(0) >= 0 along the curve)
        Y(tau) = H - tau U X,   X solves (I_2p + (tau / 2) V^T U) X = V^T H,
        V^T U = [[H^T G, H^T H], [-G^T G, -G^T H]],   V^T H = [[H^T H], [-G^T H]]   (computed H^T H, not I).

    Trial: Y = Y(tau); if feasibility(Y) > 1e-13: Y = polar(Y). Accepted when
    _decreased(f(Y), C, rho * tau * gd); otherwise tau *= delta; at most 1 + max_backtracks trials, then
    _Stop("line_search_failed"). A singular or non-finite solve or a failed polar is a failed trial.
    Non-monotone reference (Zhang & Hager): Q_0 = 1, C_0 = f0; after an accepted step with value f_new,
    Q_new = e Q + 1, C = (e Q C + f_new) / Q_new (e = nonmonotone), using the old Q in both places.
    First trial of iteration 1: tau = min(max_step, 1 / ||G0||, 1e20) (1 when G0 = 0). After the accepted step
    of iteration k (k = nit after the increment, 1-based), with S = H_new - H, Yd = D_new - D, sy = |<S, Yd>|:
    tau = <S, S> / sy if k is odd, sy / <Yd, Yd> if k is even (a zero denominator gives 1e20); then
    tau = min(max_step, min(1e20, max(1e-20, tau))). Step size of the step measure = the accepted tau.
    """

    def __init__(self, objective, options, point0):
        self.objective, self.options = objective, options
        norm_G0 = float(np.linalg.norm(point0.G))
        self.tau = min(options["max_step"], 1.0 / norm_G0 if norm_G0 > 0 else 1.0, MAX_STEP_SIZE)
        self.Q, self.C = 1.0, point0.f

    @staticmethod
    def direction(point):
        return point.G - point.H @ (point.G.T @ point.H)

    def curve(self, point, tau):
        """Y(tau) before re-projection, or None when the 2p x 2p system is singular or Y is not finite."""
        H, G = point.H, point.G
        HtH, HtG, GtG = H.T @ H, H.T @ G, G.T @ G
        VtU = np.block([[HtG, HtH], [-GtG, -HtG.T]])
        VtH = np.vstack([HtH, -HtG.T])
        try:
            X = np.linalg.solve(np.eye(VtU.shape[0]) + (tau / 2.0) * VtU, VtH)
        except np.linalg.LinAlgError:
            return None
        Y = H - tau * (np.hstack([G, H]) @ X)
        return Y if np.all(np.isfinite(Y)) else None

    def step(self, point, nit):
        o = self.options
        D = self.direction(point)
        gd = _inner(point.G, D)
        tau = self.tau
        for _ in range(1 + o["max_backtracks"]):
            Y = self.curve(point, tau)
            if Y is not None and feasibility(Y) > REPROJECT_ABOVE:
                Y = _polar(Y)
            if Y is not None:
                f, G, finite = self.objective(Y)
                if finite and _decreased(f, self.C, o["rho"] * tau * gd):
                    return self.accept(point, D, _Point(Y, f, G), tau, nit + 1)
            tau *= o["delta"]
        raise _Stop("line_search_failed", f"no sufficient decrease after {o['max_backtracks']} step reductions")

    def accept(self, point, D, new, tau, k):
        e = self.options["nonmonotone"]
        Q_new = e * self.Q + 1.0
        self.C = (e * self.Q * self.C + new.f) / Q_new
        self.Q = Q_new
        S, Yd = new.H - point.H, self.direction(new) - D
        sy = abs(_inner(S, Yd))
        numerator, denominator = (_inner(S, S), sy) if k % 2 == 1 else (sy, _inner(Yd, Yd))
        bb = numerator / denominator if denominator > 0 else MAX_STEP_SIZE
        self.tau = min(self.options["max_step"], min(MAX_STEP_SIZE, max(MIN_STEP_SIZE, bb)))
        return _Step(new, tau)


class _AndersonPG:
    """M5 "pg_anderson": Anderson acceleration (type II, memory m) of T(H) = polar(H - gamma G(H)).

    gamma is fixed by the first iteration, a plain "pg" step (first trial min(max_step, 1 / ||G0||, 1e20),
    Armijo halvings): gamma = its accepted step. Residual of an iterate: r = T(H) - H (T needs only the
    gradient already known at H: no call). Memory: up to m = memory pairs (dH_j, dR_j) of consecutive
    iterates, dH = H_{k+1} - H_k, dR = r_{k+1} - r_k, oldest dropped first.

    Iteration k >= 2, at the current point H_k with residual r_k:
      1. If a previous iterate exists, append (H_k - H_{k-1}, r_k - r_{k-1}) to the memory.
      2. Memory empty: the fallback (4) directly.
      3. With j pairs: Gram matrix B = [<dR_a, dR_b>] (j x j), c solves (B + 1e-10 trace(B) I) c = [<dR_a, r_k>]
         (Cholesky); candidate H_c = polar(H_k + r_k - sum_a c_a (dH_a + dR_a)); one call of fun.
         Accepted when it is finite and _decreased(f(H_c), f(H_k), 0); step size = gamma.
      4. Otherwise (safeguard) the memory is cleared and a "pg" Armijo search from gamma is made (its first trial
         is T(H_k)); its halvings do not change gamma. Failure -> _Stop("line_search_failed").
    Memory restart: with g_ref = grad_norm0 and a counter at 0, after every accepted iterate: if its
    grad_norm < g_ref then g_ref = grad_norm and counter = 0, else counter += 1; when counter reaches m the memory
    is cleared, counter = 0 and g_ref = that grad_norm. (Step 1 of the next iteration still appends the pair
    from the iterate just left.)
    """

    def __init__(self, objective, options, point0):
        self.objective, self.options = objective, options
        norm_G0 = float(np.linalg.norm(point0.G))
        self.gamma = min(options["max_step"], 1.0 / norm_G0 if norm_G0 > 0 else 1.0, MAX_STEP_SIZE)
        self.memory = []
        self.previous = None  # (H, r) of the iterate the last step started from
        self.g_ref, self.no_progress = point0.grad_norm, 0

    def residual(self, point):
        T = _polar(point.H - self.gamma * point.G)
        return None if T is None else T - point.H

    def step(self, point, nit):
        if nit == 0:
            accepted = _armijo_polar_search(self.objective, self.options, point, self.gamma)
            self.gamma = accepted.size
            self.previous = (point.H, self.residual(point))
            return self.restart_rule(accepted)
        r = self.residual(point)
        if self.previous is not None and self.previous[1] is not None and r is not None:
            self.memory.append((point.H - self.previous[0], r - self.previous[1]))
            del self.memory[: -self.options["memory"]]
        self.previous = (point.H, r)
        accepted = self.anderson_candidate(point, r) if self.memory and r is not None else None
        if accepted is None:
            self.memory.clear()
            accepted = _armijo_polar_search(self.objective, self.options, point, self.gamma)
        return self.restart_rule(accepted)

    def anderson_candidate(self, point, r):
        dH = [pair[0] for pair in self.memory]
        dR = [pair[1] for pair in self.memory]
        B = np.array([[_inner(a, b) for b in dR] for a in dR])
        rhs = np.array([_inner(a, r) for a in dR])
        try:
            L = np.linalg.cholesky(B + 1e-10 * np.trace(B) * np.eye(len(dR)))
        except np.linalg.LinAlgError:
            return None
        c = np.linalg.solve(L.T, np.linalg.solve(L, rhs))
        Z = point.H + r
        for c_a, dH_a, dR_a in zip(c, dH, dR):
            Z = Z - c_a * (dH_a + dR_a)
        H_c = _polar(Z)
        if H_c is None:
            return None
        f, G, finite = self.objective(H_c)
        if not (finite and _decreased(f, point.f, 0.0)):
            return None
        return _Step(_Point(H_c, f, G), self.gamma)

    def restart_rule(self, accepted):
        grad_norm = accepted.point.grad_norm
        if grad_norm < self.g_ref:
            self.g_ref, self.no_progress = grad_norm, 0
        else:
            self.no_progress += 1
        if self.no_progress >= self.options["memory"]:
            self.memory.clear()
            self.g_ref, self.no_progress = grad_norm, 0
        return accepted


_METHOD_CLASSES = {
    "pg": _ProjectedGradient,
    "cayley_adam": _CayleyAdam,
    "cayley_bb": _CayleyBB,
    "pg_anderson": _AndersonPG,
}


# --------------------------------------------------------------------------------------------------------------
# Driver


def _check_arguments(H0, method, tol, max_iter):
    if method not in METHODS:
        raise ValueError(f"method: must be one of {METHODS}, got {method!r}")
    H0 = _check_matrix(H0, "H0")
    distance = feasibility(H0)
    if not distance <= H0_FEASIBILITY:
        raise ValueError(f"H0: must have orthonormal columns to {H0_FEASIBILITY:g}, ||H0^T H0 - I|| = {distance:.3g}")
    valid_tol = not isinstance(tol, bool) and isinstance(tol, numbers.Real) and np.isfinite(tol) and tol > 0
    if not valid_tol:
        raise ValueError(f"tol: must be a positive finite number, got {tol!r}")
    if isinstance(max_iter, bool) or not isinstance(max_iter, numbers.Integral) or max_iter < 0:
        raise ValueError(f"max_iter: must be a non-negative int, got {max_iter!r}")
    return H0, float(tol), int(max_iter)


def _converged(criterion, point, step_measure, tol):
    if criterion == "grad":
        return point.grad_norm <= tol
    return step_measure <= tol


def stiefel_minimize(fun, H0, method, tol, max_iter, options=None, n_threads=None):
    """Minimize f(H) over H^T H = I_p from an orthonormal H0.

    Parameters
    ----------
    fun : callable or object with ``evaluate``
        ``fun(H) -> (f, G)`` or ``fun.evaluate(H) -> (f, G, ...)``: the objective (float) and its Euclidean
        gradient (N x p); further returned items are ignored.
    H0 : array-like of shape (N, p)
        Finite start with 1 <= p <= N and ||H0^T H0 - I|| <= 1e-8 (project it first otherwise).
    method : {"pg", "cayley_adam", "cayley_bb", "pg_anderson"}
        See the classes of this module (M1, M2, M4, M5 of the design notes).
    tol : float
        Tolerance of the stopping criterion (see ``options["criterion"]``).
    max_iter : int
        Most iterations (accepted steps); 0 evaluates H0 only.
    options : dict or None
        Keys and defaults: criterion "grad" ("grad": grad_norm <= tol; "step": ||H_{k+1} - H_k|| / step <= tol);
        max_step inf; sigma 1e-4; max_backtracks 60; lr 1e-3, beta1 0.9, beta2 0.99, eps 1e-8, q 0.5,
        cayley_iters 5; memory 5; rho 1e-4, delta 0.1, nonmonotone 0.85; history True.
    n_threads : int, default=None
        BLAS threads of the engine's own products during the call (the objective's calls included).

    Returns
    -------
    dict
        x, fun, grad_norm, feasibility, step_measure, nit, nfev, success, status ("converged", "max_iter",
        "line_search_failed", "stagnated" or "diverged"), message, history_fun, history_grad_norm (arrays of
        nit + 1 values: the start, then each iteration; empty when options["history"] is False).

    Raises
    ------
    ValueError
        On bad arguments ("H0: ...", "method: ...", "tol: ...", "max_iter: ...", "options: ..."), when f or G
        is not finite at H0 ("fun: not finite at H0") or G has the wrong shape ("fun: gradient has shape ...").
    """
    H0, tol, max_iter = _check_arguments(H0, method, tol, max_iter)
    options = _check_options(options)
    with blas_threads(n_threads):
        return _minimize(fun, H0, method, tol, max_iter, options)


def _minimize(fun, H0, method, tol, max_iter, options):
    objective = _Objective(fun, H0.shape)
    f0, G0, finite = objective(H0)
    if not finite:
        raise ValueError("fun: not finite at H0")
    point = _Point(H0, f0, G0)
    runner = _METHOD_CLASSES[method](objective, options, point)
    history_fun, history_grad = [point.f], [point.grad_norm]
    best, nit, step_measure, unchanged, lowest_grad_norm = point, 0, np.nan, 0, point.grad_norm

    if options["criterion"] == "grad" and _converged("grad", point, step_measure, tol):
        return _result(
            point,
            "converged",
            "grad_norm <= tol at H0",
            nit,
            step_measure,
            objective,
            options,
            history_fun,
            history_grad,
        )
    while nit < max_iter:
        try:
            step = runner.step(point, nit)
        except _Stop as stop:
            returned = point if stop.status == "diverged" else best
            return _result(
                returned, stop.status, stop.message, nit, step_measure, objective, options, history_fun, history_grad
            )
        nit += 1
        new = step.point
        step_measure = float(np.linalg.norm(new.H - point.H)) / step.size
        history_fun.append(new.f)
        history_grad.append(new.grad_norm)
        progress = abs(new.f - point.f) > 4 * EPS * abs(point.f) or new.grad_norm < lowest_grad_norm
        unchanged = 0 if progress else unchanged + 1
        lowest_grad_norm = min(lowest_grad_norm, new.grad_norm)
        point = new
        if point.f < best.f:
            best = point
        if _converged(options["criterion"], point, step_measure, tol):
            measure = "grad_norm" if options["criterion"] == "grad" else "step measure"
            return _result(
                point,
                "converged",
                f"{measure} <= tol {tol:g} after {nit} iterations",
                nit,
                step_measure,
                objective,
                options,
                history_fun,
                history_grad,
            )
        if unchanged >= STAGNATION_ITERS:
            return _result(
                best,
                "stagnated",
                f"neither the objective (to rounding) nor the lowest grad_norm changed over "
                f"{STAGNATION_ITERS} iterations; "
                f"grad_norm {best.grad_norm:.3g} > tol {tol:g}",
                nit,
                step_measure,
                objective,
                options,
                history_fun,
                history_grad,
            )
    return _result(
        best,
        "max_iter",
        f"max_iter = {max_iter} iterations reached before the tolerance",
        nit,
        step_measure,
        objective,
        options,
        history_fun,
        history_grad,
    )


def _result(point, status, message, nit, step_measure, objective, options, history_fun, history_grad):
    keep = options["history"]
    return {
        "x": point.H,
        "fun": point.f,
        "grad_norm": point.grad_norm,
        "feasibility": feasibility(point.H),
        "step_measure": step_measure,
        "nit": nit,
        "nfev": objective.nfev,
        "success": status == "converged",
        "status": status,
        "message": message,
        "history_fun": np.array(history_fun if keep else [], dtype=np.float64),
        "history_grad_norm": np.array(history_grad if keep else [], dtype=np.float64),
    }
