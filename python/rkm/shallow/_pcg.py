"""Preconditioned conjugate gradients for the LS-SVM dual system at large N (Suykens 2017, eq. 3.16).

The dual of the regression RKM is the bordered system

    [(1/eta) K + lam I   1] [H  ]   [Y]
    [1^T                 0] [b^T] = [0]                                    (3.16)

for N samples and p outputs. A = (1/eta) K + lam I is symmetric positive definite (K is positive
semi-definite, lam > 0), so the bias follows from the Schur complement (Suykens et al. 1999): solve
A [U v] = [Y_c 1] for the centred targets Y_c = Y - 1 ybar^T and the ones vector, then

    c^T = (1^T U) / (1^T v),   H = U - v c^T,   b = ybar + c,

which satisfies 1^T H = 0 by construction. The p + 1 right-hand sides run as independent conjugate-gradient
recurrences (each column its own step lengths) that share one product with A per iteration, so the kernel is
evaluated once per iteration for all columns. Centring Y first makes the solution invariant to a constant shift
of the targets (it moves only b) and keeps the large constant part of Y out of the iteration. Without an
intercept the system is A H = Y.

Relative residual. For output j the residual of eq. 3.16 is r_j = [y_j - A h_j - 1 b_j; -1^T h_j] and its
relative residual is ||r_j||_2 / ||y_j - ybar_j 1||_2 (||r_j||_2 / ||y_j||_2 without an intercept; 0 when the
denominator is 0, where the solution is exact). The centred norm is never larger than ||y_j||_2, so this is at
least as strict as the textbook ||r|| / ||rhs|| and it does not change when a constant is added to y_j. In
terms of the Schur solves, y_j - A h_j - 1 b_j = R_U[:, j] - r_v c_j with the residuals R_U = Y_c - A U and
r_v = 1 - A v: each iteration estimates it from the recursively updated residuals, and when every estimate is
at most `tol` the residual of the iterate is computed afresh with one more product. The solver stops when that
true residual is at most `tol` for every output; otherwise the true residual replaces the recursive one
(residual replacement, van der Vorst and Ye 2000) and the recurrence restarts from it, to be checked again once
the estimate has fallen to max(tol, half the best true residual). When three checks in a row fail to halve the
best true residual, the attainable accuracy of double precision for this system is reached (about 1e-15 to
1e-14 relative in the tests) and the solver stops there. It returns the iterate with the smallest true residual
seen and reports those residuals; converged is whether they are all at most `tol`. A run that reaches
`max_iter` also ends with a residual check, so its reported residuals are true ones too.

Products with A. ``storage="matrix_free"`` recomputes the kernel at every product
(:func:`rkm.kernels.kernel_product`, in tiles, in double), in O(N (d + p)) memory. ``storage="dense"`` builds K
once in X's dtype (a float32 kernel halves its memory) and multiplies it with BLAS; a float32 K is converted to
double a few rows at a time, so that its products are accumulated in double (float32 GEMM accumulation errors,
about 1e-6 of the entries at N = 20 000, would floor the attainable residual). Everything else runs in double.

Preconditioners: a low-rank factor F (N x r) with (1/eta) K ~ F F^T, so that M = F F^T + lam I ~ A, applied by
the Woodbury identity M^{-1} R = (R - F S^{-1} F^T R) / lam with the Cholesky factor of the r x r matrix
S = lam I + F^T F (all eigenvalues >= lam, so well conditioned). Both factors leave a positive semi-definite
remainder E = K - eta F F^T, so the preconditioned matrix has its eigenvalues in [1, 1 + ||E|| / (eta lam)]:

- ``"nystrom"``: F = phi(X) / sqrt(eta) with the Nyström features of r uniform landmarks
  (:class:`rkm.features.Nystroem`); costs O(N r (d + r)).
- ``"pivoted_cholesky"``: the greedy partial Cholesky factor of K (:func:`pivoted_cholesky`); costs
  O(N r (d + r)) as well, with kernel columns computed one at a time, and adapts the pivots to the data.

References
----------
M. R. Hestenes and E. Stiefel, "Methods of conjugate gradients for solving linear systems", J. Res. Nat. Bur.
Standards 49(6), 1952.
J. A. K. Suykens, L. Lukas, P. Van Dooren, B. De Moor and J. Vandewalle, "Least squares support vector machine
classifiers: a large scale algorithm", ECCTD 1999.
H. A. van der Vorst and Q. Ye, "Residual replacement strategies for Krylov subspace iterative methods for the
convergence of true residuals", SIAM J. Sci. Comput. 22(3), 2000.
H. Harbrecht, M. Peters and R. Schneider, "On the low-rank approximation by the pivoted Cholesky decomposition",
Appl. Numer. Math. 62(4), 2012.
J. R. Gardner, G. Pleiss, D. Bindel, K. Q. Weinberger and A. G. Wilson, "GPyTorch: blackbox matrix-matrix
Gaussian process inference with GPU acceleration", NeurIPS 31, 2018 (pivoted Cholesky preconditioning).
Z. Frangella, J. A. Tropp and M. Udell, "Randomized Nyström preconditioning", SIAM J. Matrix Anal. Appl.
44(2), 2023.
J. A. K. Suykens, "Deep restricted kernel machines using conjugate feature duality", Neural Computation
29(8), 2017.
"""

import math
import numbers
import time
from dataclasses import dataclass

import numpy as np
import scipy.linalg
from sklearn.utils import check_array

from rkm._utils.progress import Progress
from rkm._utils.threads import blas_threads, check_n_threads, thread_count
from rkm._utils.validation import check_fits_in_memory, check_matrix, check_memory, check_nonnegative, check_positive
from rkm.features import Nystroem, _kernel_diagonal
from rkm.kernels import kernel_matrix, kernel_product, kernel_spec

__all__ = ["PCGResult", "default_max_iter", "default_rank", "lssvm_pcg_fit", "pivoted_cholesky"]

STORAGES = ("matrix_free", "dense")
PRECONDITIONERS = ("nystrom", "pivoted_cholesky", None)
DEFAULT_TOL = 1e-6
# Default max_iter = max(MIN_MAX_ITER, MAX_ITER_PER_SQRT_N sqrt(N)): unpreconditioned CG needs about
# sqrt(cond(A)) / 2 ln(2 / tol) iterations, and cond(A) <= 1 + trace(K) / (eta lam) grows like N for the
# normalised kernels, so 10 sqrt(N) covers tol = 1e-6 at eta = lam = 1; the preconditioned runs need far fewer.
MAX_ITER_PER_SQRT_N = 10
MIN_MAX_ITER = 100
# Default preconditioner rank: N / RANK_DIVISOR between MIN_RANK and MAX_RANK, at most N and at most what keeps
# the float64 factor within FACTOR_BYTES. Iterations fall steadily with the rank (RBF, d = 16, lam = 1, tol 1e-6:
# 67 without a preconditioner, 26 at rank 300 and 16 at rank 1000 for N = 20000), while the factor's setup grows
# like N r^2: at N = 5000 ranks 200-500 gave the shortest matrix-free fits, at N = 20000 ranks 300-1000 were
# about even, and the products that larger ranks save grow like N^2.
MIN_RANK = 100
MAX_RANK = 1000
RANK_DIVISOR = 20
FACTOR_BYTES = 2**30
# The pivoted Cholesky factor of the fit stops early once the trace of its remainder, divided by eta, is below
# this fraction of lam: the preconditioned spectrum then lies in [1, 1.1] and more columns cannot pay off.
PIVOT_TRACE_FRACTION_OF_LAM = 0.1
# A pivot whose remaining diagonal is below this many rounding units of the largest diagonal is rounding noise.
PIVOT_ROUNDING_UNITS = 100
# Rows of a float32 kernel matrix converted to double per GEMM: about 2 MiB of doubles, which stay in a core's L2
# cache between the conversion and the product. At N = 20000 (2 threads available) 13-row chunks ran as fast as
# float32 GEMM (0.45 s, memory-bound), 6-row chunks 20% slower, 26-row chunks with two BLAS threads 14x slower.
STORED_CHUNK_BYTES = 2**21
# Adaptive preconditioner (preconditioner_rank=None): when the residual's rate of decrease over the last
# SLOW_CHECK_ITERATIONS iterations predicts that tol is not reached within max_iter (small lam against the kernel's
# scale), the factor's rank grows ADAPTIVE_GROWTH-fold (the pivoted Cholesky factor continues its pivots, the Nystrom one is rebuilt)
# and CG restarts from its iterate; at most ADAPTIVE_MAX_RANK columns, N, and what fits in FACTOR_BYTES.
SLOW_CHECK_ITERATIONS = 20
ADAPTIVE_GROWTH = 4
ADAPTIVE_MAX_RANK = 4000
# Residual checks in a row that fail to halve the best true residual before the solver calls it stagnation.
STALLED_CHECKS = 3
# verbose=1 prints every VERBOSE_EVERY iterations; verbose >= 2 every iteration.
VERBOSE_EVERY = 10


@dataclass(frozen=True, eq=False)
class PCGResult:
    """Solution of eq. 3.16 by :func:`lssvm_pcg_fit`.

    Attributes
    ----------
    H : ndarray of shape (n_samples, n_outputs), float64
        The hidden features h_i (rows), i.e. the dual variables.
    b : ndarray of shape (n_outputs,), float64
        The bias.
    n_iter : int
        Conjugate-gradient iterations run (one product with A each).
    n_products : int
        Products with A in all: the iterations and the residual checks.
    residuals : ndarray of shape (n_outputs,)
        Relative residual of each output for the returned (H, b) (module docstring), computed with a product,
        not estimated.
    converged : bool
        Whether every residual is at most tol.
    message : str
        Why the iteration stopped.
    rank : int
        Columns of the preconditioner's low-rank factor (0 without one).
    setup_seconds, solve_seconds : float
        Wall-clock time of the setup (stored kernel, preconditioner) and of the iteration.
    too_slow : bool
        With give_up_if_slow: the iteration stopped early because its rate predicted more than max_iter
        iterations (the caller solves otherwise).
    """

    H: np.ndarray
    b: np.ndarray
    n_iter: int
    n_products: int
    residuals: np.ndarray
    converged: bool
    message: str
    rank: int
    setup_seconds: float
    solve_seconds: float
    too_slow: bool = False


def default_max_iter(n_samples):
    """max(100, ceil(10 sqrt(n_samples))): see MAX_ITER_PER_SQRT_N."""
    return max(MIN_MAX_ITER, math.ceil(MAX_ITER_PER_SQRT_N * math.sqrt(n_samples)))


def default_rank(n_samples):
    """min(n_samples, 1000, 2^27 / n_samples, max(100, n_samples / 20)): see MIN_RANK."""
    return min(n_samples, MAX_RANK, FACTOR_BYTES // (8 * n_samples), max(MIN_RANK, n_samples // RANK_DIVISOR))


def adaptive_max_rank(n_samples):
    """Largest rank of the adaptive preconditioner: min(n_samples, 4000, 2^27 / n_samples)."""
    return max(1, min(n_samples, ADAPTIVE_MAX_RANK, FACTOR_BYTES // (8 * n_samples)))


def lssvm_pcg_fit(
    X,
    Y,
    kernel,
    gamma,
    degree,
    coef0,
    *,
    eta,
    lam,
    fit_intercept=True,
    storage="matrix_free",
    preconditioner="nystrom",
    rank=None,
    tol=DEFAULT_TOL,
    max_iter=None,
    n_threads=None,
    random_state=None,
    device="cpu",
    verbose=0,
    progress=None,
    sample_weight=None,
    give_up_if_slow=False,
    product=None,
):
    """Solve the LS-SVM dual system of eq. 3.16 by preconditioned conjugate gradients.

    See the module docstring for the method, the meaning of the relative residual and the stopping rule.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        float32 or float64 (other dtypes become float64).
    Y : array-like of shape (n_samples, n_outputs)
        Targets; solved in float64.
    kernel, gamma, degree, coef0
        The kernel, as :func:`rkm.kernels.kernel_spec` resolves it.
    eta, lam : float
        eta > 0 and lam > 0 of eq. 3.16 (A = (1/eta) K + lam I).
    fit_intercept : bool, default=True
        Solve the bordered system (with b); False solves A H = Y and returns b = 0.
    storage : {"matrix_free", "dense"}, default="matrix_free"
        Recompute the kernel at each product in O(N (d + p)) memory, or store K (N^2 entries of X's dtype).
    preconditioner : {"nystrom", "pivoted_cholesky", None}, default="nystrom"
    rank : int, default=None
        Columns of the preconditioner's factor, 1 <= rank <= n_samples (the pivoted Cholesky factor may stop
        earlier). None: adaptive, starting at :func:`default_rank` and growing 4-fold, up to
        :func:`adaptive_max_rank`, whenever the residual's rate over the last 20 iterations predicts more than
        max_iter iterations (small lam against the kernel's scale); CG continues from its iterate.
    tol : float, default=1e-6
        Target relative residual, > 0.
    max_iter : int, default=None
        Most iterations, >= 1; None: :func:`default_max_iter`.
    n_threads : int, default=None
        Threads of the core and of BLAS (None: OpenMP's default, all cores except inside joblib workers, which
        limit it; -1: all cores).
    device : {"cpu", "cuda", "cuda:N"}, default="cpu"
        Where the kernel products are computed (:func:`rkm.kernels.kernel_product` / ``kernel_matrix``).
    random_state : int, RandomState or None
        Seeds the Nyström landmarks.
    verbose : int, default=0
        1: a progress line every 10 iterations and at each residual check; 2: every iteration.
    progress : rkm._utils.progress.Progress, default=None
        Prints the progress lines (an estimator passes its own, so that they carry its name and the time since
        its fit began); None: ``Progress("LS-SVM PCG", verbose)``.
    sample_weight : ndarray of shape (n_samples,), default=None
        Positive weights v_k of the weighted LS-SVM: A = (1/eta) K + lam diag(1 / v_k); the preconditioner is
        F F^T + lam diag(1 / v_k), applied by the same Woodbury identity.
    give_up_if_slow : bool, default=False
        Stop (``too_slow=True``) when the rate of the last 20 iterations predicts more than max_iter iterations
        and the preconditioner cannot grow further: ``solver="auto"`` then factorizes instead.
    product : callable, default=None
        B -> K B (float64 B of shape (n_samples, k)) computed elsewhere, such as over the partitions of a Dask
        array (:func:`rkm._utils.dask_arrays.kernel_operator`); it replaces ``storage``'s products. The
        preconditioner is still built from X.

    Returns
    -------
    PCGResult
        converged=False when max_iter is reached or the residual stagnates above tol (the caller warns).

    Raises
    ------
    ValueError
        For invalid arguments and non-finite inputs, naming the argument.
    MemoryError
        When storage="dense" and the kernel matrix cannot fit in the available memory.
    """
    _check_options(storage, preconditioner, fit_intercept, tol, max_iter, verbose)
    eta, lam = check_positive(eta, "eta"), check_positive(lam, "lam")
    n_threads = check_n_threads(n_threads)
    X = check_matrix(X, "X")
    Y = _check_targets(Y, X.shape[0])
    n_samples = X.shape[0]
    rank_was_none = rank is None
    rank = _check_rank(rank, n_samples, preconditioner)
    max_iter = default_max_iter(n_samples) if max_iter is None else int(max_iter)
    spec = kernel_spec(kernel, gamma, degree, coef0, X.shape[1])
    progress = _Progress(verbose, progress)

    system = _BorderedSystem(Y, fit_intercept)
    if product is not None:
        product = _as_float64(product)
    elif storage == "dense":
        check_memory(
            _stored_bytes(n_samples, X.dtype, rank, system.rhs.shape[1]),
            "storage",
            f"storage='dense' (the {n_samples} x {n_samples} {X.dtype.name} kernel matrix)",
            advice="use storage='matrix_free', which recomputes the kernel at each product in O(N (d + p)) memory",
        )
        product = _stored_product(kernel_matrix(X, None, *spec, n_threads=n_threads, device=device), n_threads)
        progress.say(f"stored the {n_samples} x {n_samples} {X.dtype.name} kernel matrix")
    else:
        product = _matrix_free_product(X, spec, n_threads, device)

    if sample_weight is None:
        diagonal = None

        def apply_A(B):
            return product(B) / eta + lam * B
    else:
        weights = np.asarray(sample_weight, dtype=np.float64)
        if weights.shape != (n_samples,) or not np.all(np.isfinite(weights)) or np.any(weights <= 0):
            raise ValueError("sample_weight: must hold one positive finite weight per sample")
        diagonal = (lam / weights)[:, None]

        def apply_A(B):
            return product(B) / eta + diagonal * B

    adaptive = rank_was_none and preconditioner is not None
    cap = adaptive_max_rank(n_samples) if adaptive else rank
    builder = _FactorBuilder(X, spec, preconditioner, eta, lam, random_state, n_threads)
    factor = builder.factor(rank)
    r = 0 if factor is None else factor.shape[1]
    if factor is not None:
        progress.say(f"{preconditioner} preconditioner of rank {r}")
    setup_seconds = progress.elapsed()

    U0, n_iter, n_products = None, 0, 0
    while True:
        apply_M = _LowRankPreconditioner(factor, lam, n_threads, diagonal) if factor is not None else _identity
        can_grow = adaptive and r < cap and builder.can_grow(r)
        outcome = _block_cg(
            apply_A,
            apply_M,
            system,
            tol,
            max_iter - n_iter,
            progress,
            U0=U0,
            watch_rate=can_grow or give_up_if_slow,
            iteration_offset=n_iter,
        )
        n_iter += outcome.n_iter
        n_products += outcome.n_products
        if not outcome.slow:
            break
        if can_grow:
            rank = min(ADAPTIVE_GROWTH * max(r, 1), cap)
            progress.say(f"{outcome.message}; preconditioner rank {r} -> {rank}")
            grow_start = progress.elapsed()
            factor = builder.factor(rank)
            r = factor.shape[1]
            setup_seconds += progress.elapsed() - grow_start
            U0 = outcome.U
            continue
        progress.say(outcome.message)
        return PCGResult(
            H=np.zeros((n_samples, system.n_outputs)),
            b=np.zeros(system.n_outputs),
            n_iter=n_iter,
            n_products=n_products,
            residuals=outcome.residuals,
            converged=False,
            message=outcome.message,
            rank=r,
            setup_seconds=setup_seconds,
            solve_seconds=progress.elapsed() - setup_seconds,
            too_slow=True,
        )
    H, b = system.solution(outcome.U)
    progress.say(outcome.message)
    return PCGResult(
        H=H,
        b=b,
        n_iter=n_iter,
        n_products=n_products,
        residuals=outcome.residuals,
        converged=bool(outcome.residuals.max(initial=0.0) <= tol),
        message=outcome.message,
        rank=r,
        setup_seconds=setup_seconds,
        solve_seconds=progress.elapsed() - setup_seconds,
    )


# ---------------------------------------------------------------------------------------------- validation


def _is_int(value):
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _check_options(storage, preconditioner, fit_intercept, tol, max_iter, verbose):
    if not isinstance(storage, str) or storage not in STORAGES:
        raise ValueError(f"storage: must be one of {STORAGES}, got {storage!r}")
    if preconditioner is not None and (not isinstance(preconditioner, str) or preconditioner not in PRECONDITIONERS):
        raise ValueError(f"preconditioner: must be one of {PRECONDITIONERS}, got {preconditioner!r}")
    if type(fit_intercept) not in (bool, np.bool_):
        raise ValueError(f"fit_intercept: must be True or False, got {fit_intercept!r}")
    check_positive(tol, "tol")
    if max_iter is not None and (not _is_int(max_iter) or max_iter < 1):
        raise ValueError(f"max_iter: must be a positive int or None, got {max_iter!r}")
    if not _is_int(verbose) or verbose < 0:
        raise ValueError(f"verbose: must be a non-negative int, got {verbose!r}")


def _check_rank(rank, n_samples, preconditioner):
    """The preconditioner's rank: 0 without one, the default for None."""
    if rank is not None and (not _is_int(rank) or not 1 <= rank <= n_samples):
        raise ValueError(f"rank: must be an int in [1, n_samples = {n_samples}] or None, got {rank!r}")
    if preconditioner is None:
        return 0
    return default_rank(n_samples) if rank is None else int(rank)


def _check_targets(Y, n_samples):
    """Y as a finite float64 (n_samples, n_outputs) array."""
    if np.ndim(Y) != 2:
        raise ValueError(f"Y: must be a 2-D array of shape (n_samples, n_outputs), got {np.ndim(Y)}-D")
    Y = check_array(Y, dtype=np.float64, order="C", ensure_min_samples=1, input_name="Y")
    if Y.shape[0] != n_samples:
        raise ValueError(f"Y: must have one row per sample of X ({n_samples}), got {Y.shape[0]}")
    return Y


# ---------------------------------------------------------------------------------------------- products


def _matrix_free_product(X, spec, n_threads, device="cpu"):
    """B -> K B with the kernel recomputed in tiles at each call, in double (on a GPU for device="cuda")."""
    # The core evaluates every kernel in double anyway; converting X once spares a copy per product, and double B
    # keeps the products free of float32 rounding (which would floor the attainable residual near 1e-7 cond).
    X = X.astype(np.float64, copy=False)

    def product(B):
        return kernel_product(X, None, B, *spec, n_threads=n_threads, device=device)

    return product


def _as_float64(product):
    def float64_product(B):
        return np.asarray(product(B), dtype=np.float64)

    return float64_product


def _stored_product(K, n_threads):
    """B -> K B for a stored K, in double; a float32 K is converted a few rows at a time."""
    if K.dtype == np.float64:
        threads = thread_count(n_threads)

        def product(B):
            with blas_threads(threads):
                return K @ B

        return product
    rows = max(1, STORED_CHUNK_BYTES // (8 * K.shape[1]))

    def product(B):
        out = np.empty((K.shape[0], B.shape[1]))
        # One BLAS thread: the loop streams K from memory at the speed one core reaches, and threads split GEMMs
        # of a few rows badly.
        with blas_threads(1):
            for start in range(0, K.shape[0], rows):
                np.matmul(K[start : start + rows].astype(np.float64), B, out=out[start : start + rows])
        return out

    return product


def _stored_bytes(n_samples, dtype, rank, n_columns):
    """Peak bytes of a stored-kernel solve: K, the preconditioner's factor and the solver's vectors."""
    vectors = 8 * n_samples * n_columns * 8  # U, R, Z, P, Q, the best iterate and temporaries
    return n_samples * n_samples * np.dtype(dtype).itemsize + 8 * n_samples * rank + vectors


# ---------------------------------------------------------------------------------------------- preconditioners


def _identity(R):
    return R


class _LowRankPreconditioner:
    """R -> M^{-1} R for M = F F^T + D, D = lam I (or lam diag(1 / v) with sample weights), by the Woodbury
    identity M^{-1} = D^{-1} - D^{-1} F (I + F^T D^{-1} F)^{-1} F^T D^{-1}; unweighted it is computed as
    (R - F (lam I + F^T F)^{-1} F^T R) / lam."""

    def __init__(self, F, lam, n_threads, diagonal=None):
        self.F, self.lam, self.threads = F, lam, thread_count(n_threads)
        self.inverse_diagonal = None if diagonal is None else 1.0 / diagonal
        G = F if diagonal is None else F * np.sqrt(self.inverse_diagonal)
        with blas_threads(self.threads):
            S = G.T @ G
        S[np.diag_indices_from(S)] += lam if diagonal is None else 1.0
        self.cholesky = scipy.linalg.cho_factor(S, lower=True, check_finite=False) if F.shape[1] else None

    def __call__(self, R):
        if self.inverse_diagonal is not None:
            DR = self.inverse_diagonal * R
            if self.cholesky is None:
                return DR
            with blas_threads(self.threads):
                correction = self.F @ scipy.linalg.cho_solve(self.cholesky, self.F.T @ DR, check_finite=False)
            return DR - self.inverse_diagonal * correction
        if self.cholesky is None:
            return R / self.lam
        with blas_threads(self.threads):
            correction = self.F @ scipy.linalg.cho_solve(self.cholesky, self.F.T @ R, check_finite=False)
        return (R - correction) / self.lam


class _FactorBuilder:
    """Low-rank factors F (n_samples x r, float64) with F F^T ~ (1/eta) K, of growing rank on request: the
    pivoted Cholesky factor continues its pivots, the Nystrom one is rebuilt with more landmarks."""

    def __init__(self, X, spec, preconditioner, eta, lam, random_state, n_threads):
        self.X, self.spec, self.preconditioner = X, spec, preconditioner
        self.eta, self.lam, self.random_state, self.n_threads = eta, lam, random_state, n_threads
        self.pivoted = None

    def can_grow(self, rank):
        """Whether a larger factor than `rank` columns exists (the pivoted one stops once exact enough)."""
        return self.preconditioner == "nystrom" or (self.pivoted is not None and not self.pivoted.exhausted)

    def factor(self, rank):
        if self.preconditioner is None:
            return None
        check_fits_in_memory((self.X.shape[0], rank), np.float64, "rank")
        if self.preconditioner == "nystrom":
            name, gamma, degree, coef0 = self.spec
            model = Nystroem(
                n_components=rank,
                kernel=name,
                gamma=gamma,
                degree=degree,
                coef0=coef0,
                random_state=self.random_state,
                n_threads=self.n_threads,
            )
            factor = model.fit(self.X).transform(self.X).astype(np.float64, copy=False)
        else:
            if self.pivoted is None:
                trace = float(_kernel_diagonal(self.X, _kernel_function(self.spec, self.n_threads)).sum())
                trace_tol = PIVOT_TRACE_FRACTION_OF_LAM * self.eta * self.lam / trace if trace > 0 else 0.0
                self.pivoted = _PivotedCholesky(self.X, self.spec, min(trace_tol, 1.0), self.n_threads)
            factor = self.pivoted.extend(rank).T.copy()
        factor *= 1.0 / math.sqrt(self.eta)  # in place: the factor is a fresh array either way
        return factor


def _preconditioner_factor(X, spec, preconditioner, rank, eta, lam, random_state, n_threads):
    """F (n_samples x r, float64) with F F^T ~ (1/eta) K, or None without a preconditioner."""
    return _FactorBuilder(X, spec, preconditioner, eta, lam, random_state, n_threads).factor(rank)


def _kernel_function(spec, n_threads):
    def kernel(A, B=None):
        return kernel_matrix(A, B, *spec, n_threads=n_threads)

    return kernel


class _PivotedCholesky:
    """The greedy pivoted Cholesky factor of :func:`pivoted_cholesky`, extendable: ``extend(rank)`` continues
    the pivots where the last call stopped and returns the factor's columns as rows (k x n_samples)."""

    def __init__(self, X, spec, tol, n_threads):
        self.X, self.n_threads = X, n_threads
        self.kernel = _kernel_function(spec, n_threads)
        self.remaining = _kernel_diagonal(X, self.kernel)
        self.trace = self.remaining.sum()
        self.tol = tol
        self.noise = PIVOT_ROUNDING_UNITS * np.finfo(X.dtype).eps * self.remaining.max(initial=0.0)
        self.columns = np.empty((0, X.shape[0]))
        self.pivots = []
        self.exhausted = False

    def extend(self, rank):
        X, remaining, pivots = self.X, self.remaining, self.pivots
        done = len(pivots)
        if rank > self.columns.shape[0]:
            grown = np.empty((rank, X.shape[0]))
            grown[:done] = self.columns[:done]
            self.columns = grown
        columns = self.columns
        with blas_threads(thread_count(self.n_threads)):
            for i in range(done, rank):
                j = int(np.argmax(remaining))
                if remaining[j] <= self.noise or remaining.sum() <= self.tol * self.trace:
                    self.exhausted = True
                    break
                column = self.kernel(X, X[j : j + 1])[:, 0].astype(np.float64)
                column -= columns[:i, j] @ columns[:i]
                column /= math.sqrt(remaining[j])
                column[pivots] = 0.0  # zero in exact arithmetic; rounding must not leak into solved rows
                column[j] = math.sqrt(remaining[j])
                columns[i] = column
                pivots.append(j)
                remaining -= column * column
                np.maximum(remaining, 0.0, out=remaining)  # the remainder is PSD; clamp cancellation below 0
                remaining[pivots] = 0.0
            if len(pivots) >= X.shape[0]:
                self.exhausted = True
        return columns[: len(pivots)]


def pivoted_cholesky(X, kernel, gamma, degree, coef0, rank, tol=0.0, n_threads=None):
    """Greedy partial Cholesky factor L of the kernel matrix K of X: K ~ L L^T.

    Step i pivots on the sample j with the largest diagonal of the remainder K - L L^T (the first on ties) and
    appends the column (K[:, j] - L L[j]^T) / sqrt(remainder_jj), computing only that kernel column. The
    remainder stays positive semi-definite, and L L^T equals K on the pivots' rows and columns. Costs O(n r d)
    for the kernel columns and O(n r^2) for the updates, in O(n r) memory.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
    kernel, gamma, degree, coef0
        The kernel, as :func:`rkm.kernels.kernel_matrix` takes it.
    rank : int
        Most columns, 1 <= rank <= n_samples.
    tol : float, default=0.0
        Stop early once the trace of the remainder is at most tol times the trace of K (0: only at `rank`).
        The factor also stops when the largest remaining diagonal is rounding noise (100 rounding units of
        X's dtype times the largest diagonal of K).
    n_threads : int, default=None
        Threads of the kernel evaluations and of BLAS.

    Returns
    -------
    L : ndarray of shape (n_samples, k), float64, k <= rank
        Column i is zero on pivots[:i]: L[pivots] is lower triangular.
    pivots : ndarray of shape (k,), int64
        The pivot samples, in the order chosen.
    """
    X = check_matrix(X, "X")
    n_samples = X.shape[0]
    if not _is_int(rank) or not 1 <= rank <= n_samples:
        raise ValueError(f"rank: must be an int in [1, n_samples = {n_samples}], got {rank!r}")
    tol = check_nonnegative(tol, "tol")
    n_threads = check_n_threads(n_threads)
    spec = kernel_spec(kernel, gamma, degree, coef0, X.shape[1])
    check_fits_in_memory((rank, n_samples), np.float64, "rank")
    factor = _PivotedCholesky(X, spec, tol, n_threads)
    columns = factor.extend(rank)
    return columns.T, np.array(factor.pivots, dtype=np.int64)


# ---------------------------------------------------------------------------------------------- the iteration


class _BorderedSystem:
    """The right-hand sides the conjugate gradients solve with A, and how their solutions and residuals give
    (H, b) and the relative residuals of eq. 3.16 (module docstring).

    Each right-hand side is scaled to unit norm (the centred y_j by s_j = ||y_j - ybar_j 1||, the ones vector by
    sqrt(N)), which CG does not notice but which keeps its inner products clear of overflow for any scale of Y.
    In these units the relative residual of output j is ||R_U[:, j] - r_v c_j|| with c_j = (1^T u_j) / (1^T v);
    in the original ones h_j = s_j (u_j - v c_j) and b_j = ybar_j + s_j c_j / sqrt(N).
    """

    def __init__(self, Y, fit_intercept):
        n_samples, self.n_outputs = Y.shape
        self.fit_intercept = fit_intercept
        self.offset = Y.mean(axis=0) if fit_intercept else np.zeros(self.n_outputs)
        if not np.all(np.isfinite(self.offset)):
            raise ValueError("Y: the column means overflow float64; rescale Y")
        centred = Y - self.offset
        norms = _column_norms(centred)
        self.scale = np.where(norms > 0, norms, 1.0)  # a zero column stays zero: its solution is 0
        self.rhs = centred / self.scale
        if fit_intercept:
            self.rhs = np.column_stack([self.rhs, np.full(n_samples, 1.0 / math.sqrt(n_samples))])
        self.ones_scale = math.sqrt(n_samples)

    def _bias_shift(self, U):
        """c with c^T = (1^T U) / (1^T v); 1^T v = v^T A v sqrt(N) > 0 for every CG iterate after the first step."""
        sums = U.sum(axis=0)
        return sums[:-1] / sums[-1]

    def _hidden(self, U):
        """U - v c^T in the scaled units (U itself without an intercept)."""
        if not self.fit_intercept:
            return U
        return U[:, :-1] - np.outer(U[:, -1], self._bias_shift(U))

    def solution(self, U):
        """(H, b) in the original units from the solutions of A [U v] = [Y_c 1] (or A H = Y), scaled."""
        H = self._hidden(U) * self.scale
        if not self.fit_intercept:
            return H, self.offset.copy()
        return H, self.offset + self.scale * self._bias_shift(U) / self.ones_scale

    def relative_residuals(self, U, R, with_constraint=False):
        """Relative residuals of eq. 3.16 for the iterate U whose residuals with A are R = rhs - A U.

        `with_constraint` adds the residual 1^T h_j of the last row, zero up to rounding by construction.
        """
        if self.fit_intercept:
            residual = R[:, :-1] - np.outer(R[:, -1], self._bias_shift(U))
        else:
            residual = R
        norms = np.sqrt(_column_dots(residual, residual))
        if with_constraint and self.fit_intercept:
            norms = np.hypot(norms, self._hidden(U).sum(axis=0))
        return norms


def _column_norms(A):
    """Euclidean norms of the columns of A, without overflow for entries up to the float64 maximum."""
    largest = np.abs(A).max(axis=0, initial=0.0)
    safe = np.where(largest > 0, largest, 1.0)
    return largest * np.sqrt(_column_dots(A / safe, A / safe))


@dataclass
class _Outcome:
    U: np.ndarray
    residuals: np.ndarray
    n_iter: int
    n_products: int
    message: str
    slow: bool = False


class _BestIterate:
    """The checked iterate with the smallest largest true residual, and whether the checks have stagnated."""

    def __init__(self):
        self.U, self.residuals, self.worst = None, None, np.inf
        self.checks_without_progress = 0

    def update(self, U, residuals):
        worst = residuals.max(initial=0.0)
        self.checks_without_progress = 0 if worst <= 0.5 * self.worst else self.checks_without_progress + 1
        if worst < self.worst:
            self.U, self.residuals, self.worst = U.copy(), residuals, worst

    @property
    def stagnated(self):
        return self.checks_without_progress >= STALLED_CHECKS


def _column_dots(A, B):
    return np.einsum("ij,ij->j", A, B)


def _safe_ratio(numerator, denominator):
    """numerator / denominator, 0 where the denominator is not positive (a column already solved exactly)."""
    return np.divide(numerator, denominator, out=np.zeros_like(numerator), where=denominator > 0)


def _predicted_iterations(history, tol):
    """Iterations still needed to reach tol at the rate of the last SLOW_CHECK_ITERATIONS ones (inf if none)."""
    first, last = history[-SLOW_CHECK_ITERATIONS - 1], history[-1]
    if not (0 < last < first):
        return math.inf
    rate = math.log(last / first) / SLOW_CHECK_ITERATIONS
    return max(0.0, math.log(tol / last) / rate) if last > tol else 0.0


def _block_cg(apply_A, apply_M, system, tol, max_iter, progress, U0=None, watch_rate=False, iteration_offset=0):
    """Independent preconditioned CG recurrences for the columns of system.rhs, sharing each product with A.

    U0: a starting iterate (the previous run's, when the preconditioner grew). watch_rate: every
    SLOW_CHECK_ITERATIONS iterations, stop with slow=True when the residual's rate over the last ones predicts
    that tol is not reached within max_iter."""
    rhs = system.rhs
    n_products = 0
    if U0 is None:
        U = np.zeros_like(rhs)
        R = rhs.copy()
    else:
        U = U0.copy()
        R = rhs - apply_A(U)
        n_products += 1
    Z = apply_M(R)
    P = Z.copy()
    rz = _column_dots(R, Z)
    best = _BestIterate()
    restart = False
    check_level = tol
    with np.errstate(all="ignore"):
        history = [system.relative_residuals(U, R).max(initial=0.0)]
    for iteration in range(1, max_iter + 1):
        Q = apply_A(P)
        n_products += 1
        alpha = _safe_ratio(rz, _column_dots(P, Q))
        U += P * alpha
        R -= Q * alpha
        with np.errstate(all="ignore"):  # overflow is reported just below
            estimate = system.relative_residuals(U, R)
        if not np.all(np.isfinite(estimate)):
            raise ValueError(
                "eta, lam: the conjugate-gradient iterates are no longer finite: (1/eta) K + lam I is too badly "
                "scaled for float64; bring eta and lam closer to the scale of the kernel"
            )
        progress.iteration(iteration_offset + iteration, estimate.max(initial=0.0))
        history.append(estimate.max(initial=0.0))
        if watch_rate and iteration % SLOW_CHECK_ITERATIONS == 0 and iteration < max_iter:
            needed = _predicted_iterations(history, tol)
            if iteration + needed > max_iter:
                return _Outcome(
                    U,
                    np.full(system.n_outputs, history[-1]),
                    iteration,
                    n_products,
                    f"relative residual {history[-1]:.2e} after {iteration_offset + iteration} iterations; at the "
                    f"rate of the last {SLOW_CHECK_ITERATIONS}, tol = {tol:g} needs "
                    + (
                        "more than max_iter"
                        if math.isinf(needed)
                        else f"about {iteration_offset + iteration + needed:.0f}"
                    )
                    + " iterations",
                    slow=True,
                )
        if estimate.max(initial=0.0) <= check_level or iteration == max_iter:
            R_true = rhs - apply_A(U)
            n_products += 1
            residuals = system.relative_residuals(U, R_true, with_constraint=True)
            best.update(U, residuals)
            progress.check(iteration, residuals.max(initial=0.0))
            if best.worst <= tol:
                return _Outcome(best.U, best.residuals, iteration, n_products, f"converged in {iteration} iterations")
            if best.stagnated:
                return _Outcome(
                    best.U,
                    best.residuals,
                    iteration,
                    n_products,
                    f"stagnated after {iteration} iterations at a relative residual of {best.worst:.2e}, the accuracy "
                    f"double precision reaches for this system, above tol = {tol:g}",
                )
            if iteration == max_iter:
                break
            # The recursive residuals had drifted from the true ones: go on from the true residual with a fresh
            # recurrence (beta = 0). Keeping the old direction would carry beta = ||r_true||^2 / ||r_recursive||^2,
            # huge once the recursive residual has fallen below the attainable accuracy.
            R = R_true
            restart = True
            # Check again once the estimate promises to halve the best true residual, not only at tol: near the
            # attainable accuracy the true residual stops following the estimate, and these checks tell so.
            check_level = max(tol, 0.5 * best.worst)
        Z = apply_M(R)
        rz_next = _column_dots(R, Z)
        P = Z + P * (0.0 if restart else _safe_ratio(rz_next, rz))
        rz, restart = rz_next, False
    return _Outcome(
        best.U,
        best.residuals,
        max_iter,
        n_products,
        f"reached max_iter = {max_iter} with a relative residual of {best.worst:.2e} above tol = {tol:g}",
    )


class _Progress:
    """Progress lines as verbose asks (through `lines`, an rkm._utils.progress.Progress), and the time since the
    solve began."""

    def __init__(self, verbose, lines=None):
        self.verbose = verbose
        self.lines = Progress("LS-SVM PCG", verbose) if lines is None else lines
        self.start = time.perf_counter()

    def elapsed(self):
        return time.perf_counter() - self.start

    def say(self, message):
        if self.verbose:
            self.lines(message)

    def iteration(self, iteration, estimate):
        if self.verbose >= 2 or (self.verbose and iteration % VERBOSE_EVERY == 0):
            self.say(f"iteration {iteration}: max relative residual {estimate:.2e} (recursive estimate)")

    def check(self, iteration, worst):
        self.say(f"iteration {iteration}: max relative residual {worst:.2e} (computed)")
