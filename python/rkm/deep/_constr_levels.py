"""Constr-DRKM numerics outside the core: the level-wise start and the bandwidth derivatives.

Both work on dense N x N matrices (kernel matrices, distances, ``B B^T``), as the training's K_1 already does;
the objective and its gradient in H are the core's (``_core.ConstrainedDeepObjective``). Level kernels are
(name, gamma, degree, coef0) tuples with gamma resolved; ``H`` is ``[H_1 ... H_L]`` in row layout.
"""

import numpy as np
import scipy.linalg
import scipy.sparse.linalg
from scipy.spatial.distance import cdist

from rkm._utils.eigen import fix_signs
from rkm._utils.threads import blas_threads, thread_count
from rkm.kernels import KERNELS, kernel_matrix, names_with

# Up to this size the start's eigenvectors come from a dense eigendecomposition with one BLAS thread (fast at
# this size, and immune to idle BLAS threads spinning against other work on a busy machine); beyond, from ARPACK
# (N = 3000: 1.5 s against 7.7 s dense), started from a fixed vector so that the start stays seed-free.
DENSE_EIGH_MAX_SAMPLES = 1000

# Kernels whose bandwidth can be learned, with the distance their exp(-gamma d) reads.
BANDWIDTH_DISTANCES = {name: KERNELS[name].distance for name in names_with("distance")}


def _centred(K, center):
    """C K C (C = I - 11^T/N) when center, else K."""
    if not center:
        return K
    rows = K.mean(axis=1, keepdims=True)
    return K - rows - rows.T + rows.mean()


def _top_eigenvectors(A, n_components, n_threads):
    """The leading eigenvectors of the symmetric A, descending, each column's largest entry positive."""
    N = A.shape[0]
    A = (A + A.T) / 2
    if N <= DENSE_EIGH_MAX_SAMPLES:
        with blas_threads(1):
            _, V = scipy.linalg.eigh(A, subset_by_index=[N - n_components, N - 1], check_finite=False)
        return fix_signs(np.ascontiguousarray(V[:, ::-1]))
    start = np.random.default_rng(0).standard_normal(N)
    with blas_threads(thread_count(n_threads)):
        w, V = scipy.sparse.linalg.eigsh(A, n_components, which="LA", v0=start)
    return fix_signs(np.ascontiguousarray(V[:, np.argsort(w)[::-1]]))


def _level_kernel(Z, spec, n_threads):
    name, gamma, degree, coef0 = spec
    return kernel_matrix(Z, kernel=name, gamma=gamma, degree=degree, coef0=coef0, n_threads=n_threads)


def levelwise_init(K1, level_specs, sizes, center, n_threads=None):
    """A feasible start by kernel PCA level by level (the paper's level-wise initialization, section 4.1).

    H_1 holds the top s_1 eigenvectors of K~_1; H_l those of Pi K~_l Pi, with K~_l the (centred when
    ``center``) kernel matrix of the rows of H_{l-1} and Pi = I - E E^T the projector onto the complement of the
    earlier levels' features E = [H_1 ... H_{l-1}], so that H^T H = I. E's directions are shifted below the
    spectrum (Pi K~_l Pi - c E E^T, c = 1 + ||K~_l||_F) so that they are never chosen, even where Pi K~_l Pi
    has fewer than s_l positive eigenvalues (an uncentred linear level: Pi K_l Pi = 0). Seed-free.

    Parameters
    ----------
    K1 : ndarray of shape (n_samples, n_samples)
        Level 1's kernel matrix, uncentred.
    level_specs : list of tuples
        (name, gamma, degree, coef0) of levels 2..L.
    sizes : sequence of int
        s_1, ..., s_L.
    center : bool
    n_threads : int or None

    Returns
    -------
    H : ndarray of shape (n_samples, sum(sizes))
    """
    levels = [_top_eigenvectors(_centred(K1, center), sizes[0], n_threads)]
    for size, spec in zip(sizes[1:], level_specs):
        K = _centred(_level_kernel(levels[-1], spec, n_threads), center)
        E = np.hstack(levels)
        KE = K @ E
        projected = K - E @ KE.T - KE @ E.T + E @ (E.T @ KE) @ E.T
        shift = 1.0 + np.linalg.norm(K)
        levels.append(_top_eigenvectors(projected - shift * (E @ E.T), size, n_threads))
    return np.hstack(levels)


def bandwidth_objective(H, X, specs, sizes, etas, center, n_threads=None):
    """The objective at H and its derivatives with respect to the log-bandwidths of all levels.

    f = sum_l -(1/(2 eta_l)) sum_ij P_l,ij K_l,ij with P_l = B_l B_l^T, so for K_l = exp(-gamma_l D_l)
    (D the squared distances for rbf, the L1 distances for laplacian, between the rows of X at level 1 or of
    H_{l-1}) df/d log(gamma_l) = (gamma_l/(2 eta_l)) sum_ij P_l,ij D_l,ij K_l,ij; other kernels' entries are 0.

    Parameters
    ----------
    H : ndarray of shape (n_samples, sum(sizes))
    X : ndarray of shape (n_samples, n_features)
    specs : list of L tuples
        (name, gamma, degree, coef0) of every level, level 1 first.
    sizes, etas : sequences of L numbers
    center : bool
    n_threads : int or None

    Returns
    -------
    f : float
    dfd_log_gamma : ndarray of shape (L,)
    """
    blocks = np.split(H, np.cumsum(sizes)[:-1], axis=1)
    inputs = [X] + blocks[:-1]
    f, gradient = 0.0, np.zeros(len(sizes))
    for level, (Z, B, spec, eta) in enumerate(zip(inputs, blocks, specs, etas)):
        B = B - B.mean(axis=0) if center else B
        P = B @ B.T
        name, gamma = spec[0], spec[1]
        if name in BANDWIDTH_DISTANCES:
            D = cdist(Z, Z, BANDWIDTH_DISTANCES[name])
            K = np.exp(-gamma * D)
            gradient[level] = gamma / (2 * eta) * float(np.sum(P * D * K))
        else:
            K = _level_kernel(Z, spec, n_threads)
        f -= float(np.sum(P * K)) / (2 * eta)
    return f, gradient
