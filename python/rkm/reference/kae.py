"""The kernel autoencoder's loss and its gradient (Laforgue, Clémençon & d'Alché-Buc 2019), the core's ``kae``.

Model
-----
Layers l = 1..L, each with a scalar kernel k_l, a symmetric PSD operator A_l (the decomposable operator-valued
kernel k_l(x, x') A_l; identity when None) and coefficients Phi_l (n x d_l, the representer coefficients of
Theorem 6). With X^(0) = X::

    K_l = k_l(X^(l-1), X^(l-1)),   B_l = Phi_l A_l,   X^(l) = K_l B_l,
    loss = D + sum_l lambda_l s_l,   D = ||X - X^(L)||_F^2 / n,   s_l = ||f_l||^2 = Tr(Phi_l^T K_l B_l)  (eqs. 4, 10).

K²AE (``precomputed=True``, §2.5, §4.3): X is the first layer's Gram matrix K_1 (for K²AE the input Gram matrix
K_in) and the last layer, with A_L = I, is the kernel ridge regression of eq. 13 onto outputs whose inner products
are ``output_gram`` (default: X itself, K²AE's K_in; X0 X0^T for a finite-dimensional KAE whose last layer is
solved rather than learned; or, given those outputs F themselves as ``output_features``, K_out = F F^T). It is
solved at every evaluation (the loss is minimised over Phi_L, whose entries are
never formed): with W = K_L + n lambda_L I and N_L = W^-1 K_out W^-1 (eq. 54), D = n lambda_L^2 Tr(N_L) and
s_L = Tr(K_L N_L). For lambda_L = 0 the minimum-norm least-squares fit takes its place (K_L^+ from the eigenvalues of
K_L above max * n * eps, P = K_L K_L^+, N_L = K_L^+ K_out K_L^+, D = Tr((I - P) K_out) / n). With ``output_features`` the
solve takes F's d_out columns as right-hand sides instead of K_out's n: S = W^-1 F, N_L = S S^T (lambda_L = 0:
S = K_L^+ F), C = R S^T with R = n lambda_L S (lambda_L = 0: R = (I - P) F) and D = n lambda_L^2 ||S||^2
(lambda_L = 0: ||R||^2 / n).

Gradients
---------
``method="adjoint"`` runs reverse mode through the layers, O(n^2 sum_l d_l): with G_L = -(2/n)(X - X^(L)),
dPhi_l = K_l (G_l + 2 lambda_l Phi_l) A_l, M_l = dloss/dK_l = G_l B_l^T + lambda_l B_l Phi_l^T, and
G_{l-1} = KG_l(X^(l-1); M_l + M_l^T), KG_l(Z; P)_a = sum_j P_aj d/dz k_l(z, z_j) at z = z_a. For K²AE the last
layer enters through M_L = -(2/n) C + lambda_L N_L, C[i, i'] = <x_i - x_i^(L), phi_{L,i'}> (= n lambda_L N_L).

``method="jacobian"`` is the paper's Appendix B: for every coefficient row phi_{l0,i0}, the Jacobians of all
later representations (B.3: J^(l0)_i = K_l0[i, i0] A_l0, then
J^(l)_i = A_l [Phi_l^T Delta_l(x_i) J^(l-1)_i + sum_i' phi_{l,i'} grad_1 k_l(x_i', x_i)^T J^(l-1)_i'], with the
Delta_l matrices of B.4), combined by eqs. 9, 11, 12 and, for K²AE, 14. It costs O(n^3 L^2 p^3) and is the faithful
reference the adjoint is checked against.

Layer kernels are tuples (name, gamma, degree, coef0), name "rbf", "poly" (a non-negative integer degree) or
"linear" (see :mod:`rkm.reference._layer_kernels`).
"""

import numpy as np
from scipy import linalg

from rkm._kernel_table import names_with
from rkm.reference._layer_kernels import layer_kernel, pairwise, weighted_derivative
from rkm.reference._validation import blas_threads, check_n_threads, check_square, finite_number, real_matrix

__all__ = ["kae_loss_and_grad"]

KAE_KERNELS = names_with("layer_derivatives")
_METHODS = ("adjoint", "jacobian")


# --------------------------------------------------------------------------
# argument checks
# --------------------------------------------------------------------------


def _sequence(values, name, length, meaning):
    if not isinstance(values, (list, tuple)) or len(values) != length:
        raise ValueError(f"{name}: must be a list of {length} {meaning}, got {values!r}")
    return list(values)


def _gram(K, name, n_samples=None):
    K = real_matrix(K, name, min_rows=2)
    check_square(K, name)
    if n_samples is not None and K.shape[0] != n_samples:
        raise ValueError(f"{name}: must be {n_samples} x {n_samples} (one row per sample), got shape {K.shape}")
    if np.abs(K - K.T).max() > 1e-10 * max(np.abs(K).max(), 1.0):
        raise ValueError(f"{name}: a Gram matrix must be symmetric")
    return np.asarray(K, dtype=np.float64)


def _inputs(X, precomputed, output_gram, output_features):
    """(X, K_out or None, F or None): what the last layer regresses onto, as a Gram matrix or as features."""
    if not precomputed:
        if output_gram is not None:
            raise ValueError("output_gram: only a precomputed first layer takes one, got an array")
        if output_features is not None:
            raise ValueError("output_features: only a precomputed first layer takes them, got an array")
        return np.asarray(real_matrix(X, "X", min_rows=2), dtype=np.float64), None, None
    X = _gram(X, "X")
    if output_features is None:
        return X, X if output_gram is None else _gram(output_gram, "output_gram", X.shape[0]), None
    if output_gram is not None:
        raise ValueError("output_features: give output_gram or output_features, not both")
    F = np.asarray(real_matrix(output_features, "output_features"), dtype=np.float64)
    if F.shape[0] != X.shape[0]:
        raise ValueError(
            f"output_features: must have one row per sample ({X.shape[0]}) and a column or more, got shape {F.shape}"
        )
    return X, None, F


def _coefficients(phis, n_samples, n_outputs, precomputed):
    least = 1 if precomputed else 2
    if not isinstance(phis, (list, tuple)) or len(phis) < least:
        raise ValueError(f"phis: must be a list of at least {least} coefficient matrices, got {phis!r}")
    phis = [np.asarray(real_matrix(P, "phis"), dtype=np.float64) for P in phis]
    for index, P in enumerate(phis):
        if P.shape[0] != n_samples:
            raise ValueError(f"phis: entry {index} must have one row per sample ({n_samples}), got shape {P.shape}")
    if n_outputs is not None and phis[-1].shape[1] != n_outputs:
        raise ValueError(f"phis: the last layer must have the input's {n_outputs} columns, got {phis[-1].shape[1]}")
    return phis


def _operator(A, size, index):
    if A is None:
        return None
    A = np.asarray(real_matrix(A, "operators"), dtype=np.float64)
    if A.shape != (size, size):
        raise ValueError(f"operators: entry {index} must have shape {(size, size)}, got {A.shape}")
    scale = max(np.abs(A).max(), 1.0)
    if np.abs(A - A.T).max() > 1e-12 * scale:
        raise ValueError(f"operators: entry {index} must be symmetric")
    if np.linalg.eigvalsh(A)[0] < -1e-12 * scale:
        raise ValueError(f"operators: entry {index} must be positive semidefinite")
    return A


def _problem(X, phis, kernels, operators, penalties, precomputed, method, output_gram, output_features=None):
    if method not in _METHODS:
        raise ValueError(f"method: must be one of {', '.join(_METHODS)}, got {method!r}")
    if not isinstance(precomputed, (bool, np.bool_)):
        raise ValueError(f"precomputed: must be True or False, got {precomputed!r}")
    X, output_gram, output_features = _inputs(X, precomputed, output_gram, output_features)
    if output_features is not None:
        output_gram = _Features(output_features)
    phis = _coefficients(phis, X.shape[0], None if precomputed else X.shape[1], precomputed)
    count = len(phis)
    kernels = [
        layer_kernel(k, "kernels", KAE_KERNELS)
        for k in _sequence(kernels, "kernels", count, "(name, gamma, degree, coef0) tuples")
    ]
    operators = [None] * count if operators is None else operators
    operators = [
        _operator(A, P.shape[1], index)
        for index, (A, P) in enumerate(zip(_sequence(operators, "operators", count, "arrays or None"), phis))
    ]
    n_layers = count + bool(precomputed)
    penalties = [finite_number(p, "penalties") for p in _sequence(penalties, "penalties", n_layers, "numbers")]
    if min(penalties) < 0:
        raise ValueError(f"penalties: must be non-negative, got {penalties!r}")
    return X, phis, kernels, operators, penalties, output_gram


# --------------------------------------------------------------------------
# forward pass
# --------------------------------------------------------------------------


def _times(B, A):
    return B if A is None else B @ A


class _Features:
    """The outputs F of a finite-dimensional last layer (K_out = F F^T), solved through F's columns."""

    def __init__(self, F):
        self.F = F


def _ridge_layer(K_L, K_out, penalty):
    """N_L and C of the K²AE's last layer (eq. 54 and the quantity of eq. 14), with its distortion.

    K_out is a Gram matrix, or _Features: then the solves take F's d_out columns as right-hand sides (S = W^-1 F)
    rather than K_out's n, and N_L = S S^T, C = R S^T."""
    n = K_L.shape[0]
    features = K_out.F if isinstance(K_out, _Features) else None
    if penalty > 0:
        try:
            factor = linalg.cho_factor(K_L + n * penalty * np.eye(n))
        except linalg.LinAlgError:
            raise ValueError(
                "penalties: the last layer's ridge system K_L + n lambda_L I is not positive definite "
                "(K_L indefinite); use a larger lambda_L"
            ) from None
        if features is not None:
            S = linalg.cho_solve(factor, features)
            N = S @ S.T
            return N, n * penalty * N, n * penalty**2 * np.sum(S**2)
        N = linalg.cho_solve(factor, linalg.cho_solve(factor, K_out).T)
        N = 0.5 * (N + N.T)
        return N, n * penalty * N, n * penalty**2 * np.trace(N)
    values, vectors = np.linalg.eigh(K_L)
    kept = values > max(values[-1], 0.0) * n * np.finfo(np.float64).eps
    U = vectors[:, kept]
    if features is not None:
        UF = U.T @ features
        S = U @ (UF / values[kept, None])  # K_L^+ F
        R = features - U @ UF  # (I - P) F
        return S @ S.T, R @ S.T, np.sum(R**2) / n
    pinv = (U / values[kept]) @ U.T
    residual = K_out - U @ (U.T @ K_out)  # (I - P) K_out
    return pinv @ K_out @ pinv, residual @ pinv, np.trace(residual) / n


def _forward(X, phis, kernels, operators, penalties, output_gram, precomputed):
    """Representations, kernel matrices and loss terms; for K²AE also the last layer's (K, base, N, C)."""
    count = len(phis)
    reps = [None if precomputed else X]
    grams = []
    terms = [0.0]
    for layer in range(count):
        if precomputed and layer == 0:
            K, base = X, None
        else:
            K, base = pairwise(reps[layer], kernels[layer - precomputed])
        grams.append((K, base))
        reps.append(K @ _times(phis[layer], operators[layer]))
        terms.append(float(np.sum(phis[layer] * reps[-1])))
    last = None
    if precomputed:
        K_L, base = pairwise(reps[-1], kernels[-1])
        N, C, distortion = _ridge_layer(K_L, output_gram, penalties[-1])
        last = (K_L, base, N, C)
        terms[0] = float(distortion)
        terms.append(float(np.sum(K_L * N)))
    else:
        terms[0] = float(np.sum((X - reps[-1]) ** 2) / X.shape[0])
    return reps, grams, last, np.array(terms)


# --------------------------------------------------------------------------
# gradients
# --------------------------------------------------------------------------


def _adjoint(X, phis, kernels, operators, penalties, output_gram, precomputed, reps, grams, last):
    n = X.shape[0]
    count = len(phis)
    if precomputed:
        K_L, base, N, C = last
        M = -2.0 / n * C + penalties[-1] * N
        G = weighted_derivative(reps[-1], M + M.T, K_L, base, kernels[-1])
    else:
        G = -2.0 / n * (X - reps[-1])
    grads = [None] * count
    for layer in reversed(range(count)):
        K, base = grams[layer]
        A, P, penalty = operators[layer], phis[layer], penalties[layer]
        grads[layer] = K @ _times(G + 2.0 * penalty * P, A)
        if layer > 0:
            B = _times(P, A)
            M = G @ B.T + penalty * (B @ P.T)
            G = weighted_derivative(reps[layer], M + M.T, K, base, kernels[layer - precomputed])
    return grads


def _first_argument_gradients(Z, K, base, kernel):
    """D1[i, i'] = grad_1 k(z_i, z_i'), the rows of the paper's Delta(z_i) (Appendix B.4), shape (n, n, d)."""
    name = kernel["name"]
    if name == "rbf":
        return -2.0 * kernel["gamma"] * K[:, :, None] * (Z[:, None, :] - Z[None, :, :])
    n = Z.shape[0]
    if name == "linear":
        return np.broadcast_to(Z[None, :, :], (n, n, Z.shape[1]))
    degree = kernel["degree"]
    scale = np.zeros_like(K) if degree == 0 else degree * kernel["gamma"] * base ** (degree - 1)
    return scale[:, :, None] * Z[None, :, :]


def _contract(weights, D1, J):
    """sum_{i,i'} weights[i, i'] D1[i, i']^T J_i, the form of eqs. 12 and 14."""
    return np.einsum("ik,ika,iab->b", weights, D1, J, optimize=True)


def _jacobian(X, phis, kernels, operators, penalties, output_gram, precomputed, reps, grams, last):
    n = X.shape[0]
    count = len(phis)
    D1 = [None] + [
        _first_argument_gradients(reps[layer], *grams[layer], kernels[layer - precomputed]) for layer in range(1, count)
    ]
    if precomputed:
        K_L, base, N_L, C = last
        D1_L = _first_argument_gradients(reps[-1], K_L, base, kernels[-1])
    grads = [np.empty_like(P) for P in phis]
    for layer0 in range(count):
        A0 = operators[layer0]
        own = np.eye(phis[layer0].shape[1]) if A0 is None else A0
        for i0 in range(n):
            J = grams[layer0][0][:, i0, None, None] * own[None]  # own Jacobian (B.3)
            row = 2.0 * penalties[layer0] * reps[layer0 + 1][i0]  # eq. 11
            for layer in range(layer0 + 1, count):
                P, A = phis[layer], operators[layer]
                row += 2.0 * penalties[layer] * _contract(_times(P, A) @ P.T, D1[layer], J)  # eq. 12
                inner = np.einsum("pc,ipa,iab->icb", P, D1[layer], J, optimize=True) + np.einsum(
                    "pc,pia,pab->icb", P, D1[layer], J, optimize=True
                )
                J = inner if A is None else np.einsum("cd,idb->icb", A, inner)  # higher Jacobian (B.3)
            if precomputed:
                row += -2.0 / n * _contract(C + C.T, D1_L, J)  # eq. 14
                row += 2.0 * penalties[-1] * _contract(N_L, D1_L, J)  # eq. 12 for the last layer
            else:
                row += -2.0 / n * np.einsum("ic,icb->b", X - reps[-1], J)  # eq. 9
            grads[layer0][i0] = row
    return grads


# --------------------------------------------------------------------------
# public routine
# --------------------------------------------------------------------------


def kae_loss_and_grad(
    X,
    phis,
    kernels,
    operators,
    penalties,
    precomputed=False,
    method="adjoint",
    n_threads=None,
    output_gram=None,
    output_features=None,
):
    """Loss of a kernel autoencoder (eq. 4; eq. 5 for K²AE) and its gradient with respect to the coefficients.

    Parameters
    ----------
    X : array-like of shape (n, d_0), or the first layer's Gram matrix (n, n) when `precomputed` (K²AE: K_in)
    phis : list of arrays
        Phi_1, ..., Phi_L, each (n, d_l) with d_L = d_0; for K²AE Phi_1, ..., Phi_{L-1} (the last layer is solved).
    kernels : list of (name, gamma, degree, coef0)
        One per entry of `phis`: the kernels of layers 1..L (K²AE: of layers 2..L; layer 1 uses K_in).
    operators : list of arrays or None, or None
        The PSD operators A_l of the entries of `phis` (None: identity).
    penalties : list of float
        lambda_1, ..., lambda_L, non-negative (K²AE: lambda_L is the ridge penalty of the last layer).
    precomputed : bool
        Whether X is the first layer's Gram matrix and the last layer a kernel ridge regression (K²AE).
    method : {"adjoint", "jacobian"}
    n_threads : int or None
        BLAS threads for the call.
    output_gram : array-like of shape (n, n) or None
        With `precomputed`: the inner products of the outputs the last layer regresses onto (None: X).
    output_features : array-like of shape (n, d_out) or None
        With `precomputed`, instead of `output_gram`: the outputs F themselves (output_gram = F F^T), e.g. the data
        X of a finite-dimensional KAE whose last layer is solved; the ridge layer then solves for F's d_out columns
        rather than n (the same loss and gradient, much faster for d_out << n).

    Returns
    -------
    loss : float
    grads : list of ndarray, shaped like `phis`
    terms : ndarray of shape (L + 1,)
        The distortion D and the unweighted squared norms ||f_l||^2.
    """
    check_n_threads(n_threads)
    problem = _problem(X, phis, kernels, operators, penalties, precomputed, method, output_gram, output_features)
    with blas_threads(n_threads):
        reps, grams, last, terms = _forward(*problem, bool(precomputed))
        gradient = _adjoint if method == "adjoint" else _jacobian
        grads = gradient(*problem, bool(precomputed), reps, grams, last)
    penalties = problem[4]
    loss = float(terms[0] + np.dot(penalties, terms[1:]))
    return loss, grads, terms
