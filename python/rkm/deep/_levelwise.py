"""Level-wise solving of the three-level deep RKMs with linear kernels in levels 2 and 3 (Suykens 2017, §5.1).

Row layout: H_l is N x s_l with row i = h_i^(l) (the paper's H_l transposed), so the paper's linear kernel
matrices [h_i^T h_j] are H H^T here.

"lssvm_kpca_kpca" (eq. 4.18): level 1 is LS-SVM regression fused with the linear kernel of level 2,

    L1: [ (1/eta1) K1 + (1/eta2) H2 H2^T + lam I   1 ] [ H1  ]   [ Y ]
        [ 1^T                                      0 ] [ b^T ] = [ 0 ]
    L2: ((1/eta2) H1 H1^T + (1/eta3) H3 H3^T) H2 = H2 Lambda2
    L3: (1/eta3) H2 H2^T H3 = H3 Lambda3

"kpca_kpca_lssvm" (eq. 4.11): two kernel PCA levels and LS-SVM regression on the linear kernel of level 2,

    L1: ((1/eta1) K1 + (1/eta2) H2 H2^T) H1 = H1 Lambda1
    L2: ((1/eta2) H1 H1^T + (1/eta3) H3 H3^T) H2 = H2 Lambda2
    L3: [ (1/eta3) H2 H2^T + lam I   1 ] [ H3  ]   [ Y ]
        [ 1^T                        0 ] [ b^T ] = [ 0 ]

Readings of steps the paper leaves open (each documented in the estimator):
- eigenvectors have unit norm (H^T H = I) and the sign that makes their largest entry positive;
- eigenvalues below 1e-12 of the largest are zero, and their eigenvectors zero columns: the fused matrices of
  levels 2-3 have rank at most the width of their inputs (e.g. p + s3 in eq. 4.18), and an arbitrary null-space
  direction would enter the next level with weight 1/eta (1e5 in the paper's experiments);
- L3 of eq. 4.18 is (1/eta3) times the projector onto span(H2): every basis of it solves the equation, and the
  solver takes H3 = H2[:, :s3], the leading level-2 components (eigenvalue 1/eta3 each);
- one pass is the forward phase L1, L2, L3 then the backward phase L2, L1 (eq. 5.1), or the forward phase
  only; the unknowns are never re-initialized between passes. The passes stop early once a pass changes
  H1, H2, H3 by less than tol (relative); a period-2 cycle (each pass undoing the previous one) is detected
  and reported (``LevelwiseResult.cycle``).

Why the passes of eq. 4.18 cycle, and the joint solve. With linear levels 2-3, L3 puts span(H3) inside
span(H2), and L2 then says that span(H2) is invariant under H1 H1^T: H2's columns are left singular vectors of
H1 or orthogonal to H1. So (H2 H2^T) H1 = P H1 with P the projector onto the singular directions of H1 that
H2 contains, and L1 reads ((1/eta1) K1 + lam I) H1 + P H1 / eta2 + 1 b^T = Y: at every solution of eq. 4.18,
level 1 is the LS-SVM with lam + 1/eta2 along the singular directions of H1 that level 2 keeps and lam along
the others. Level 2 keeps its leading eigenvectors, and those of H1 lead as soon as
sigma_k(H1)^2 / eta2 > 1/eta3; the level-wise passes do not reach this solution: each level-1 step with a
large 1/eta2 removes from H1 its component along H2, the normalized H1 of the step before, so the new H1 is
nearly orthogonal to H2, the next level-2 step turns H2 towards it, and the unknowns alternate between two
states from pass to pass (neither solves eq. 4.18). ``phases="joint"`` solves the coupled equations directly:
for s2 >= p, P H1 = H1 and level 1 is one LS-SVM solve with lam + 1/eta2, followed by L2 and L3 to their fixed
point; for s2 < p the passes remain (with the cycle detected).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.linalg
from scipy.linalg import blas, lapack

from rkm import _core
from rkm._utils.eigen import fix_signs, numerically_positive

# Dense eigensolver up to this many samples; the core's block Krylov solver beyond.
DENSE_EIGH_MAX_SAMPLES = 2000


# Eigenvalues within this relative distance of each other are tied (see order_ties).
TIE_TOLERANCE = 1e-8


def order_ties(values, vectors, B):
    """Resolve tied eigenvalues of B B^T by the order of B's columns.

    A tied eigenvalue has a whole eigenspace, and a solver returns an arbitrary basis of it: e.g. level 2 of
    eq. 4.11 in the first pass, (1/eta2) H1 H1^T with orthonormal H1, has the single eigenvalue 1/eta2. Within a
    group of tied eigenvalues the basis is rotated so that its k-th vector lies in the span of the group's
    projections of B's first k columns (Gram-Schmidt in column order): the example's H2 is then H1[:, :s2].
    """
    vectors = vectors.copy()
    start, n = 0, len(values)
    while start < n:
        stop = start + 1
        while stop < n and values[start] - values[stop] <= TIE_TOLERANCE * max(values[0], 1e-300):
            stop += 1
        if stop - start > 1 and values[start] > 0:
            group = vectors[:, start:stop]
            rotation, _ = np.linalg.qr(group.T @ B)
            vectors[:, start:stop] = group @ rotation[:, : stop - start]
        start = stop
    return vectors


def leading_left_vectors(B, n_components):
    """Top eigenpairs of B B^T (N x N, never formed) by the thin SVD of B: (eigenvalues, N x n_components
    vectors). Components beyond B's numerical rank are zero columns with eigenvalue 0; ties follow order_ties."""
    N = B.shape[0]
    U, singular, _ = np.linalg.svd(B, full_matrices=False)
    eigenvalues = numerically_positive(singular**2, np.float64)
    vectors = np.zeros((N, n_components))
    values = np.zeros(n_components)
    kept = min(n_components, int(np.count_nonzero(eigenvalues)))
    # Ties are resolved over all of B's non-zero eigenvalues: a group may straddle the cut at n_components.
    rank = int(np.count_nonzero(eigenvalues))
    ordered = order_ties(eigenvalues[:rank], U[:, :rank], B)
    vectors[:, :kept] = fix_signs(ordered[:, :kept])
    values[:kept] = eigenvalues[:kept]
    return values, vectors


def top_eigenpairs(A, n_components, start, n_threads):
    """Largest eigenpairs of the symmetric N x N matrix A: dense LAPACK up to DENSE_EIGH_MAX_SAMPLES, else the
    core's block Krylov solver from the block `start` (the previous pass's vectors)."""
    N = A.shape[0]
    if N <= DENSE_EIGH_MAX_SAMPLES:
        w, V = scipy.linalg.eigh(A, subset_by_index=[N - n_components, N - 1], check_finite=False)
        w, V = w[::-1], V[:, ::-1]
    else:
        w, V, _, _, converged = _core.top_eigsh(A, n_components, np.ascontiguousarray(start), None, None, n_threads)
        if not converged:
            raise RuntimeError("the level-1 eigensolver did not converge; lower n_components or use fewer samples")
    values = numerically_positive(w, np.float64)
    vectors = fix_signs(V) * (values > 0)
    return values, vectors


def bias_from_solutions(X_targets, x_ones, fit_intercept):
    """H and b of a bordered system [A 1; 1^T 0] [H; b^T] = [Y; 0] from X_targets = A^-1 Y and x_ones = A^-1 1
    (the Schur complement, as LS-SVM's eq. 3.16); without an intercept the system is A H = Y."""
    if not fit_intercept:
        return X_targets, np.zeros(X_targets.shape[1])
    b = X_targets.sum(axis=0) / x_ones.sum()
    return X_targets - np.outer(x_ones, b), b


class FusedLSSVMLevel:
    """L1 of eq. 4.18 for any H2, from one Cholesky factorization.

    A0 = (1/eta1) K1 + lam I is factorized once (its cost is that of one LS-SVM fit); each solve with the fused
    matrix A0 + U U^T, U = H2 / sqrt(eta2), is a Woodbury update of rank s2 plus one step of iterative
    refinement: with 1/eta2 as large as 1e5 the small capacitance system I + U^T A0^-1 U is ill-conditioned,
    and the refinement step restores the digits it costs. Each solve is O(N^2 (s2 + p)).
    """

    def __init__(self, K, eta1, lam, Y, fit_intercept):
        # K: a C-contiguous float64 N x N kernel matrix, overwritten by the factor.
        N = K.shape[0]
        K *= 1.0 / eta1
        K.flat[:: N + 1] += lam
        # K^T is Fortran-ordered (the same symmetric matrix): LAPACK factorizes it in place, upper triangle.
        factor, info = lapack.dpotrf(K.T, lower=0, clean=0, overwrite_a=1)
        if info != 0:
            raise ValueError(
                f"lam: (1/eta1) K + lam I is not numerically positive definite (LAPACK potrf failed at column "
                f"{info}); use a larger lam"
            )
        self._factor = factor
        self._fit_intercept = fit_intercept
        self._rhs = np.asfortranarray(np.column_stack([Y, np.ones(N)]))
        self._base_solution = self._solve_base(self._rhs)

    def _solve_base(self, B):
        return scipy.linalg.cho_solve((self._factor, False), B, check_finite=False)

    def _apply_base(self, B):
        """A0 B = R^T (R B) with the upper Cholesky factor R."""
        RB = blas.dtrmm(1.0, self._factor, np.asfortranarray(B), lower=0)
        return blas.dtrmm(1.0, self._factor, RB, lower=0, trans_a=1)

    def _woodbury(self, B, base_solution, U, Q, capacitance):
        """(A0 + U U^T)^-1 B, given A0^-1 B, Q = A0^-1 U and the Cholesky factor of I + U^T Q."""
        return base_solution - Q @ scipy.linalg.cho_solve(capacitance, U.T @ base_solution, check_finite=False)

    def solve(self, H2, eta2, lam):
        """(H1, b, (1/eta1) K1 H1) of the fused system for the level-2 features H2 (all zero: the LS-SVM).

        (1/eta1) K1 H1 comes from the system itself: (A0 + U U^T) X = [Y 1] gives A0 X = [Y 1] - U (U^T X),
        so A0 H1 and K1 H1 = eta1 (A0 H1 - lam H1) cost O(N (s2 + p)) instead of a product with the factor.
        """
        if not H2.any():
            U = np.zeros((H2.shape[0], 0))
            solution = self._base_solution
        else:
            U = H2 / np.sqrt(eta2)
            Q = self._solve_base(U)
            capacitance = scipy.linalg.cho_factor(np.eye(U.shape[1]) + U.T @ Q, check_finite=False)
            solution = self._woodbury(self._rhs, self._base_solution, U, Q, capacitance)
            residual = self._rhs - self._apply_base(solution) - U @ (U.T @ solution)
            solution = solution + self._woodbury(residual, self._solve_base(residual), U, Q, capacitance)
        H1, b = bias_from_solutions(solution[:, :-1], solution[:, -1], self._fit_intercept)
        base_times = self._rhs - U @ (U.T @ solution)  # A0 [X_y x_1]
        A0_H1 = base_times[:, :-1] - np.outer(base_times[:, -1], b) if self._fit_intercept else base_times[:, :-1]
        return H1, b, A0_H1 - lam * H1


def linear_lssvm_level(H2, eta3, lam, Y, fit_intercept):
    """L3 of eq. 4.11: LS-SVM on the linear kernel (1/eta3) H2 H2^T, solved through s2 x s2 systems:
    (lam I + U U^T)^-1 B = (B - U (lam I + U^T U)^-1 U^T B) / lam with U = H2 / sqrt(eta3)."""
    N = H2.shape[0]
    U = H2 / np.sqrt(eta3)
    B = np.column_stack([Y, np.ones(N)])
    small = scipy.linalg.cho_factor(lam * np.eye(U.shape[1]) + U.T @ U, check_finite=False)
    solution = (B - U @ scipy.linalg.cho_solve(small, U.T @ B, check_finite=False)) / lam
    return bias_from_solutions(solution[:, :-1], solution[:, -1], fit_intercept)


@dataclass
class LevelwiseResult:
    """The unknowns after the last level step: H1, H2, H3 (N x p|s1, N x s2, N x s3|p), the bias, the
    eigenvalues of the two kernel PCA levels, (step, J_deep) after every level step, the largest relative
    change of H1, H2, H3 over each pass after the first, the number of passes run, whether the last pass
    changed the unknowns by at most tol, and whether a period-2 cycle was detected (the unknowns after pass k
    equal those after pass k - 2 to within tol while pass k changed them by more)."""

    H: list
    intercept: np.ndarray
    eigenvalues: dict
    history: list = field(default_factory=list)
    pass_changes: list = field(default_factory=list)
    n_passes: int = 0
    converged: bool = False
    cycle: bool = False
    K1_H1: np.ndarray | None = None


def _kpca_terms(H_in, H_out, eta, eigenvalues):
    """-(1/(2 eta)) ||H_in^T H_out||^2 + (1/2) sum_k l_k ||H_out[:, k]||^2: a linear kernel PCA level's part of
    J_deep with W eliminated (W = (1/eta) sum_i h_in,i h_out,i^T) and lambda read as the level's Lambda."""
    return -np.sum((H_in.T @ H_out) ** 2) / (2 * eta) + 0.5 * np.sum(eigenvalues * np.sum(H_out**2, axis=0))


def _regression_terms(Y, H, kernel_part, lam):
    """Tr(Y^T H) - (1/2) Tr(H^T K H) / eta - (lam/2) ||H||^2: the regression level's part of J_deep with W
    eliminated and sum_i h_i = 0 (kernel_part = Tr(H^T K H) / eta)."""
    return np.sum(Y * H) - 0.5 * kernel_part - 0.5 * lam * np.sum(H**2)


def lssvm_kpca_kpca(K, Y, etas, lam, n_components, n_passes, phases, H2, H3, fit_intercept, callback=None, tol=1e-6):
    """Eq. 4.18 level by level (phases "forward_backward" or "forward") or jointly (phases "joint", module
    docstring). K (N x N, float64, C order) is overwritten; H2, H3: initial values of the passes."""
    eta1, eta2, eta3 = etas
    s2, s3 = n_components
    joint = phases == "joint" and s2 >= Y.shape[1]
    # Joint solve: at the solution whose level 2 keeps H1's directions, (H2 H2^T) H1 = H1 and level 1 is the
    # LS-SVM with lam + 1/eta2 (one factorization, no H2 in the system).
    lam1 = lam + 1.0 / eta2 if joint else lam
    level1 = FusedLSSVMLevel(K, eta1, lam1, Y, fit_intercept)
    state = {"H2": H2, "H3": H3, "l2": np.zeros(s2), "l3": np.zeros(s3)}

    def objective():
        H1, H2, H3 = state["H1"], state["H2"], state["H3"]
        kernel_part = np.sum(H1 * state["K1_H1"])
        return (
            _regression_terms(Y, H1, kernel_part, lam)
            + _kpca_terms(H1, H2, eta2, state["l2"])
            + _kpca_terms(H2, H3, eta3, state["l3"])
        )

    def step_1():
        if joint:
            state["H1"], state["b"], K1_H1 = level1.solve(np.zeros_like(state["H2"]), eta2, lam1)
            state["K1_H1"] = K1_H1
        else:
            state["H1"], state["b"], state["K1_H1"] = level1.solve(state["H2"], eta2, lam)

    def step_2():
        B = np.column_stack([state["H1"] / np.sqrt(eta2), state["H3"] / np.sqrt(eta3)])
        state["l2"], state["H2"] = leading_left_vectors(B, s2)

    def step_3():
        state["H3"] = state["H2"][:, :s3].copy()
        state["l3"] = np.sum(state["H3"] ** 2, axis=0) / eta3

    steps = {"L1": step_1, "L2": step_2, "L3": step_3}
    if joint:
        # H1 is fixed by the joint level-1 solve; L2 and L3 settle within span(H1) (H3 only reorders H2's
        # leading directions): at most a few forward passes.
        passes = _run_passes(steps, state, objective, max(n_passes, 5), "forward", callback, tol)
    else:
        order = "forward_backward" if phases == "joint" else phases
        passes = _run_passes(steps, state, objective, n_passes, order, callback, tol)
    return LevelwiseResult(
        [state["H1"], state["H2"], state["H3"]],
        state["b"],
        {"level2": state["l2"], "level3": state["l3"]},
        *passes,
    )


def kpca_kpca_lssvm(
    K, Y, etas, lam, n_components, n_passes, phases, H2, H3, fit_intercept, rng, n_threads, callback=None, tol=1e-6
):
    """Eq. 4.11 level by level. K (N x N, float64) is scaled by 1/eta1 in place; H2, H3: initial values."""
    eta1, eta2, eta3 = etas
    s1, s2 = n_components
    N = K.shape[0]
    K *= 1.0 / eta1
    fused = np.empty_like(K)
    state = {
        "H1": rng.standard_normal((N, s1)),
        "H2": H2,
        "H3": H3,
        "b": np.zeros(Y.shape[1]),
        "l1": np.zeros(s1),
        "l2": np.zeros(s2),
    }

    def objective():
        H1, H2, H3 = state["H1"], state["H2"], state["H3"]
        level1 = -0.5 * np.sum(H1 * state["K1_H1"]) + 0.5 * np.sum(state["l1"] * np.sum(H1**2, axis=0))
        kernel_part = np.sum((H2.T @ H3) ** 2) / eta3
        return level1 + _kpca_terms(H1, H2, eta2, state["l2"]) + _regression_terms(Y, H3, kernel_part, lam)

    def step_1():
        np.copyto(fused, K)
        if state["H2"].any():
            fused[...] += state["H2"] @ state["H2"].T / eta2
        # Warm start from the previous pass's vectors (the random block on the first).
        state["l1"], state["H1"] = top_eigenpairs(fused, s1, state["H1"], n_threads)
        # (1/eta1) K1 H1 for the objective, once per level-1 step rather than after every step.
        state["K1_H1"] = K @ state["H1"]

    def step_2():
        B = np.column_stack([state["H1"] / np.sqrt(eta2), state["H3"] / np.sqrt(eta3)])
        state["l2"], state["H2"] = leading_left_vectors(B, s2)

    def step_3():
        state["H3"], state["b"] = linear_lssvm_level(state["H2"], eta3, lam, Y, fit_intercept)

    passes = _run_passes(
        {"L1": step_1, "L2": step_2, "L3": step_3},
        state,
        objective,
        n_passes,
        "forward_backward" if phases == "joint" else phases,
        callback,
        tol,
    )
    return LevelwiseResult(
        [state["H1"], state["H2"], state["H3"]],
        state["b"],
        {"level1": state["l1"], "level2": state["l2"]},
        *passes,
        K1_H1=state["K1_H1"],
    )


def refit_last_level(H1, H2, eigenvalues, K1_H1, etas, lam, Y, fit_intercept):
    """Level 3 of eq. 4.11 re-solved on the features of the predictive model (eq. 4.9) at the training points.

    The coupled H2 of the level-wise solution is not what eq. 4.9 computes at a training point: level 2's
    fused term (1/eta3) H3 H3^T carries the targets into H2, and the coupling terms of eq. 4.10 are absent
    out of sample. Regressing Y on H2 therefore gives a training fit that no input can reproduce (training
    MSE near 0, predictions near a constant). Solving level 3 on F2 = eq. 4.9's Lambda2^-1 e2 at the training
    points makes predict(X_train) the training-time output. Returns (H3, b, W3 = F2^T H3 / eta3, F2).
    """
    _, eta2, eta3 = etas
    inverse1, inverse2 = (pseudo_inverse(w) for w in eigenvalues)
    F2 = ((K1_H1 * inverse1) @ (H1.T @ H2) / eta2) * inverse2
    H3, b = linear_lssvm_level(F2, eta3, lam, Y, fit_intercept)
    return H3, b, F2.T @ H3 / eta3, F2


def pseudo_inverse(eigenvalues):
    """1 / lambda for the non-zero eigenvalues, 0 for the zero ones (their components are zero columns)."""
    safe = np.where(eigenvalues > 0, eigenvalues, 1.0)
    return np.where(eigenvalues > 0, 1.0 / safe, 0.0)


def _run_passes(steps, state, objective, n_passes, phases, callback, tol):
    """Run the level steps of at most n_passes passes (eq. 5.1: forward L1, L2, L3, then backward L2, L1).

    Returns ([(step, J_deep after it)], the largest relative change of H1, H2, H3 over each pass after the
    first, passes run, converged, cycle). The passes stop once a pass changes the unknowns by at most tol
    (converged). A pass that changes them by more than tol while they are within tol of the state two passes
    back is a period-2 cycle: the passes continue (the caller reports it), since more passes cannot settle it.
    A pass's forward L1 repeats the previous backward L1 on the same H2: its result is reused rather than
    solved again.
    """
    order = ("L1", "L2", "L3", "L2", "L1") if phases == "forward_backward" else ("L1", "L2", "L3")
    history, changes, states = [], [], []
    converged = cycle = False
    for _ in range(n_passes):
        for name in order:
            if not (history and history[-1][0] == name):
                steps[name]()
            history.append((name, float(objective())))
            if callback is not None:
                callback(name, history[-1][1])
        states.append([state[key].copy() for key in ("H1", "H2", "H3")])
        if len(states) > 1:
            changes.append(_state_change(states[-1], states[-2]))
            converged = changes[-1] <= tol
            if len(states) > 2 and not converged:
                cycle = _state_change(states[-1], states[-3]) <= max(tol, 1e-3 * changes[-1])
            if converged:
                cycle = False
                break
        states = states[-3:]
    return history, changes, len(changes) + 1, converged, cycle


def _state_change(new, old):
    return max(_relative_change(a, b) for a, b in zip(new, old))


def _relative_change(new, old):
    scale = np.linalg.norm(old)
    return float(np.linalg.norm(new - old) / scale) if scale > 0 else float(np.linalg.norm(new) > 0)
