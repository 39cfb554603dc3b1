"""The Constr-DRKM objective (Tonin, Patrinos & Suykens 2021, eq. 7 for L levels), the core's ``constr_drkm``.

Row layout
----------
The hidden features of all levels form one N x p matrix ``H = [H_1 ... H_L]`` of column blocks, ``H_l`` of
shape (N, s_l) and ``p = s_1 + ... + s_L``; row i of ``H_l`` is the paper's ``h_i^(l)``. The objective::

    f(H) = sum_l t_l,    t_l = -(1 / (2 eta_l)) Tr(B_l^T K_l B_l),    B_l = C H_l if center else H_l,

with ``C = I - 1 1^T / N``, ``K_1`` the given kernel matrix of the inputs and ``K_l = k_l(H_{l-1}, H_{l-1})``
for l >= 2, built from the raw (uncentred) rows of ``H_{l-1}``. Centring acts through ``B_l``
(``Tr(B^T K B) = Tr(H^T C K C H)``: the centred kernel matrix). It is minimised over the Stiefel manifold
``H^T H = I_p`` (the joint constraint of eq. 3).

Gradient
--------
With ``P_l = B_l B_l^T`` and ``KG_l(Z; P)_i = sum_j P_ij d/dz k_l(z, z_j)`` at ``z = z_i``::

    df/dH_l = C^[center] (-(1/eta_l) K_l B_l) + [l < L] E_l,    E_l = -(1/eta_{l+1}) KG_{l+1}(H_l; P_{l+1})

(d/dz_m of sum_ij P_ij k(z_i, z_j) is 2 sum_j P_mj d/dz k(z_m, z_j) for symmetric P and k, which cancels the
1/2). Per level kernel, with ``M = P o (.)`` elementwise::

    rbf        exp(-gamma ||z - z'||^2)      KG = -2 gamma (diag(M 1) Z - M Z),             M = P o K
    laplacian  exp(-gamma ||z - z'||_1)      KG_ia = -gamma sum_j M_ij sign(z_ia - z_ja),   M = P o K
    poly       (gamma z^T z' + coef0)^degree KG = M Z,   M = P o (degree gamma base^(degree - 1))
    linear     z^T z'                        KG = P Z

The laplacian kernel is not differentiable where two rows share a coordinate: the subgradient with sign(0) = 0
is used (the diagonal i = j contributes nothing). A linear level l >= 2 with center=False contributes nothing
on the manifold: ``Tr(H_l^T H_{l-1} H_{l-1}^T H_l) = ||H_{l-1}^T H_l||^2 = 0`` when ``H^T H = I``, so its
``H_l`` is arbitrary there.

Level kernels (l >= 2) are tuples ``(name, gamma, degree, coef0)``, name one of "rbf", "laplacian", "poly",
"linear"; gamma must be positive for all but "linear" (where it is ignored, and may be None), and the poly degree
a non-negative integer (hidden features take both signs, so a fractional power of a negative base would be
undefined).
"""

import numbers

import numpy as np

from rkm.reference._layer_kernels import layer_kernel, pairwise, weighted_derivative
from rkm.reference._validation import blas_threads, check_n_threads, check_square, finite_number, real_matrix
from rkm.reference.eigs import _fix_signs

__all__ = [
    "constr_drkm_objective",
    "ConstrainedDeepObjective",
    "levelwise_init",
]

# --------------------------------------------------------------------------
# argument checks
# --------------------------------------------------------------------------


def _is_sequence(values):
    return isinstance(values, (tuple, list)) or (isinstance(values, np.ndarray) and values.ndim == 1)


def _sizes(sizes):
    """The level sizes (s_1, ..., s_L) as a tuple of positive ints."""
    valid = (
        _is_sequence(sizes)
        and len(sizes) > 0
        and all(not isinstance(s, bool) and isinstance(s, numbers.Integral) and s > 0 for s in sizes)
    )
    if not valid:
        raise ValueError(f"sizes: must be a non-empty sequence of positive ints (s_1, ..., s_L), got {sizes!r}")
    return tuple(int(s) for s in sizes)


def _etas(etas, n_levels):
    if not _is_sequence(etas) or len(etas) != n_levels:
        raise ValueError(f"etas: must hold {n_levels} positive finite numbers (one per level), got {etas!r}")
    return tuple(finite_number(eta, "etas", positive=True) for eta in etas)


def _level_kernels(level_kernels, n_levels):
    if not isinstance(level_kernels, (tuple, list)) or len(level_kernels) != n_levels - 1:
        raise ValueError(
            f"level_kernels: must hold L - 1 = {n_levels - 1} kernel tuples (levels 2..L), got {level_kernels!r}"
        )
    return tuple(layer_kernel(spec, "level_kernels") for spec in level_kernels)


def _center(center):
    if not isinstance(center, (bool, np.bool_)):
        raise ValueError(f"center: must be True or False, got {center!r}")
    return bool(center)


def _kernel_1(K1):
    K1 = real_matrix(K1, "K1")
    check_square(K1, "K1")
    return K1.astype(np.float64)


def _check_sizes_fit(sizes, n_samples):
    if sum(sizes) > n_samples:
        raise ValueError(f"sizes: s_1 + ... + s_L = {sum(sizes)} exceeds the number of samples N = {n_samples}")


def _hidden(H, n_samples, sizes):
    H = real_matrix(H, "H")
    expected = (n_samples, sum(sizes))
    if H.shape != expected:
        raise ValueError(f"H: must have shape (N, s_1 + ... + s_L) = {expected}, got {H.shape}")
    return H.astype(np.float64)


def _problem(K1, level_kernels, sizes, etas, center):
    """The validated constants of one objective: K1 (float64), kernels, sizes, etas, center."""
    sizes = _sizes(sizes)
    K1 = _kernel_1(K1)
    _check_sizes_fit(sizes, K1.shape[0])
    return K1, _level_kernels(level_kernels, len(sizes)), sizes, _etas(etas, len(sizes)), _center(center)


# --------------------------------------------------------------------------
# kernels of the hidden levels and their weighted derivatives
# --------------------------------------------------------------------------


def _blocks(H, sizes):
    """The column blocks H_1, ..., H_L of H."""
    return np.split(H, np.cumsum(sizes)[:-1], axis=1)


def _centred(A, center):
    """C A (column means removed) if center, else A."""
    return A - A.mean(axis=0) if center else A


# --------------------------------------------------------------------------
# objective
# --------------------------------------------------------------------------


def _centred_kernel(K, center):
    """C K C if center, else K."""
    return _centred(_centred(K, center).T, center).T


def _evaluate(H, K1, kernels, sizes, etas, center):
    """f, G and the level terms for validated float64 arguments, K1 already centred if center."""
    H_levels = _blocks(H, sizes)
    G_levels = [np.zeros_like(H_l) for H_l in H_levels]
    terms = np.zeros(len(sizes))
    for level, (H_l, eta) in enumerate(zip(H_levels, etas)):
        if level == 0:
            K = K1
        else:
            Z, kernel = H_levels[level - 1], kernels[level - 1]
            K, base = pairwise(Z, kernel)
        B = _centred(H_l, center)
        T = K @ B
        terms[level] = -np.sum(B * T) / (2.0 * eta)
        G_levels[level] -= _centred(T, center) / eta
        if level > 0:
            G_levels[level - 1] -= weighted_derivative(Z, B @ B.T, K, base, kernel) / eta
    return float(terms.sum()), np.hstack(G_levels), terms


def constr_drkm_objective(H, K1, level_kernels, sizes, etas, center, n_threads=None):
    """Constr-DRKM objective (eq. 7 for L levels), its gradient and its level terms, densely.

    Parameters
    ----------
    H : ndarray of shape (n_samples, s_1 + ... + s_L)
        Hidden features ``[H_1 ... H_L]`` (need not be orthonormal here).
    K1 : ndarray of shape (n_samples, n_samples)
        Level-1 kernel matrix ``k_1(X, X)``, uncentred (symmetry is assumed, not checked).
    level_kernels : sequence of tuple
        L - 1 tuples ``(name, gamma, degree, coef0)`` for levels 2..L, name one of "rbf", "laplacian",
        "poly", "linear".
    sizes : sequence of int
        ``(s_1, ..., s_L)``, positive, summing to at most n_samples.
    etas : sequence of float
        ``(eta_1, ..., eta_L)``, positive.
    center : bool
        Centre the kernel matrices of all levels in feature space (``B_l = C H_l``).
    n_threads : int, default=None
        BLAS threads for the call (None: as they are; -1: all cores).

    Returns
    -------
    f : float
        ``sum_l t_l``.
    G : ndarray of shape (n_samples, s_1 + ... + s_L)
        Euclidean gradient df/dH.
    terms : ndarray of shape (L,)
        ``t_l = -(1 / (2 eta_l)) Tr(B_l^T K_l B_l)``.
    """
    K1, kernels, sizes, etas, center = _problem(K1, level_kernels, sizes, etas, center)
    H = _hidden(H, K1.shape[0], sizes)
    with blas_threads(n_threads):
        return _evaluate(H, _centred_kernel(K1, center), kernels, sizes, etas, center)


class ConstrainedDeepObjective:
    """The Constr-DRKM objective of one problem, the twin of ``rkm._core.ConstrainedDeepObjective``.

    Validates and stores the constants once; ``evaluate(H)`` returns ``(f, G, terms)`` as
    :func:`constr_drkm_objective`.

    Parameters
    ----------
    K1, level_kernels, sizes, etas, center, n_threads
        As for :func:`constr_drkm_objective`.

    Attributes
    ----------
    n_samples : int
    sizes : tuple of int
    """

    def __init__(self, K1, level_kernels, sizes, etas, center, n_threads=None):
        self._K1, self._kernels, self.sizes, self._etas, self._center = _problem(K1, level_kernels, sizes, etas, center)
        self._K1 = _centred_kernel(self._K1, self._center)
        self._n_threads = check_n_threads(n_threads)
        self.n_samples = self._K1.shape[0]

    def evaluate(self, H):
        """``(f, G, terms)`` at H of shape (n_samples, sum(sizes))."""
        H = _hidden(H, self.n_samples, self.sizes)
        with blas_threads(self._n_threads):
            return _evaluate(H, self._K1, self._kernels, self.sizes, self._etas, self._center)


# --------------------------------------------------------------------------
# level-wise start
# --------------------------------------------------------------------------


def _top_eigenvectors(A, s):
    """The s leading eigenvectors of the symmetric A (descending), signs fixed."""
    _, V = np.linalg.eigh((A + A.T) / 2.0)
    return _fix_signs(V[:, ::-1][:, :s].copy())


def levelwise_init(K1, level_kernels, sizes, etas, center, n_threads=None):
    """A feasible start computed level by level with kernel PCA (the level-wise initialisation of the paper).

    ``H_1`` holds the top s_1 eigenvectors of ``K~_1`` (``C K_1 C`` if center, else ``K_1``); ``H_l`` the top
    s_l eigenvectors of ``Pi K~_l Pi`` with ``K~_l`` the (centred) ``k_l(H_{l-1}, H_{l-1})`` and
    ``Pi = I - H_<l H_<l^T`` the projector onto the complement of the earlier levels, so that ``H^T H = I``
    holds. The earlier levels' directions are pushed below the spectrum (``Pi K~_l Pi - c H_<l H_<l^T`` with
    ``c = 1 + ||K~_l||_F``), so they are never chosen even where ``Pi K~_l Pi`` has fewer than s_l positive
    eigenvalues (a linear level kernel without centring: ``Pi K_l Pi = 0``). Dense ``numpy.linalg.eigh``, no
    randomness: the same arguments give the same start. Each column's largest-magnitude entry is positive.

    Parameters
    ----------
    K1, level_kernels, sizes, etas, center
        As for :func:`constr_drkm_objective` (etas only scale the levels' eigenvalues and are validated only).
    n_threads : int, default=None
        BLAS threads during the call.

    Returns
    -------
    H : ndarray of shape (n_samples, s_1 + ... + s_L)
        Orthonormal columns ``[H_1 ... H_L]``.
    """
    K1, kernels, sizes, _, center = _problem(K1, level_kernels, sizes, etas, center)
    with blas_threads(n_threads):
        return _levelwise(K1, kernels, sizes, center)


def _levelwise(K1, kernels, sizes, center):
    n = K1.shape[0]
    levels = [_top_eigenvectors(_centred_kernel(K1, center), sizes[0])]
    for s, kernel in zip(sizes[1:], kernels):
        K = pairwise(levels[-1], kernel)[0]
        K = _centred_kernel(K, center)
        earlier = np.hstack(levels)
        Pi = np.eye(n) - earlier @ earlier.T
        shift = 1.0 + np.linalg.norm(K)
        levels.append(_top_eigenvectors(Pi @ K @ Pi - shift * (earlier @ earlier.T), s))
    return np.hstack(levels)
