"""The RKM kernel PCA step of a batch, differentiable: dual (Gen-RKM eq. 3) and primal (eq. 10), the energy J_t
(eq. 1) and its stabilised form (Appendix A.3).

Equation numbers refer to A. Pandey, J. Schreurs and J. A. K. Suykens, "Generative restricted kernel machines"
(2021). Conventions, shared with :class:`rkm.GenRKM`: the latents of a batch are the rows of H (N, s) with
orthonormal columns; the views' features Phi_v are centred by the batch mean, and the eigenproblem is that of
K_eta = sum_v Phi_v Phi_v^T / eta_v (dual, N x N) or of its primal twin Z^T Z with Z = [Phi_v / sqrt(eta_v)]_v
(D x D, D the summed feature width); U_v = Phi_v^T H is the unweighted projection, so the reconstruction of
view v's centred features is H U_v^T (eq. 6 without the factor 1/eta_v, which would shrink it).

Gradients flow through the eigendecomposition. Its backward pass divides by eigenvalue gaps, so it is broadened
(Lorentzian): 1/(l_j - l_i) becomes (l_j - l_i) / ((l_j - l_i)^2 + eps) with eps = (broadening max|l|)^2. This
changes gradients only where gaps are below about ``broadening`` times the spectrum's scale, and keeps them
finite for repeated eigenvalues, where the exact backward divides by zero. For losses that depend on the top-s
subspace only (reconstructions through H H^T, the energy), rotations inside the subspace do not change the loss,
so the broadened pairs inside it carry no gradient anyway.

At the eigen-solution J_t is zero for every batch (Proposition 1), whatever the feature maps: J_t and the
stabilised J_t + (c_stab/2) J_t^2 therefore contribute no gradient to the networks, and the explicit Gen-RKM
trains on the reconstruction term of eq. 9 alone (the tests check this).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import NamedTuple

import torch

from rkm.torch.kernels import center_kernel

__all__ = ["KPCAStep", "eigh_descending", "kpca", "kpca_energy", "kpca_from_kernels", "stabilized_objective"]

FORMS = ("auto", "dual", "primal")
# The s-th eigenvalue below this fraction of the largest: the batch has fewer than s informative directions.
RANK_TOLERANCE = {torch.float64: 1e-12, torch.float32: 1e-6, torch.float16: 1e-3, torch.bfloat16: 1e-2}


class KPCAStep(NamedTuple):
    """The kernel PCA step of one batch.

    H : Tensor (N, s), latents (rows), orthonormal columns.
    eigenvalues : Tensor (s,), Lambda, descending.
    U : list of Tensor (d_v, s), one per view (None from kernels): U_v = Phi_v^T H.
    means : list of Tensor (d_v,), the batch means subtracted from each view's features (None from kernels).
    energy : Tensor (), J_t of eq. 1 at this solution (zero up to rounding, Proposition 1).
    form : "dual" or "primal", the eigenproblem solved.
    """

    H: torch.Tensor
    eigenvalues: torch.Tensor
    U: list[torch.Tensor] | None
    means: list[torch.Tensor] | None
    energy: torch.Tensor
    form: str


class _SymmetricEigh(torch.autograd.Function):
    """eigh of a symmetric matrix, eigenvalues descending, with the broadened backward of the module docstring."""

    @staticmethod
    def forward(ctx, A, broadening):
        eigenvalues, vectors = torch.linalg.eigh((A + A.mT) / 2)
        eigenvalues, vectors = eigenvalues.flip(-1), vectors.flip(-1)
        ctx.save_for_backward(eigenvalues, vectors)
        ctx.broadening = broadening
        return eigenvalues, vectors

    @staticmethod
    def backward(ctx, grad_eigenvalues, grad_vectors):
        eigenvalues, vectors = ctx.saved_tensors
        inner = torch.zeros_like(vectors)
        if grad_vectors is not None:
            gaps = eigenvalues.unsqueeze(-2) - eigenvalues.unsqueeze(-1)  # gaps[i, j] = l_j - l_i
            eps = (ctx.broadening * eigenvalues.abs().max()) ** 2 + torch.finfo(eigenvalues.dtype).tiny
            inner = gaps / (gaps * gaps + eps) * (vectors.mT @ grad_vectors)
        if grad_eigenvalues is not None:
            inner = inner + torch.diag_embed(grad_eigenvalues)
        grad = vectors @ inner @ vectors.mT
        return (grad + grad.mT) / 2, None


def eigh_descending(A: torch.Tensor, broadening: float = 1e-6) -> tuple[torch.Tensor, torch.Tensor]:
    """Eigenvalues (descending) and eigenvectors (columns) of the symmetric matrix (A + A^T) / 2.

    Differentiable, with the backward pass broadened as the module docstring says.

    Parameters
    ----------
    A : Tensor of shape (n, n)
    broadening : float, default=1e-6
        Relative width eps of the broadened gaps (0: the exact backward, infinite for repeated eigenvalues).

    Returns
    -------
    eigenvalues : Tensor of shape (n,)
    vectors : Tensor of shape (n, n)
    """
    _check_tensor(A, "A", ndim=2)
    if A.shape[0] != A.shape[1]:
        raise ValueError(f"A: must be a square matrix, got shape {tuple(A.shape)}")
    if not isinstance(broadening, numbers.Real) or not broadening >= 0 or not math.isfinite(broadening):
        raise ValueError(f"broadening: must be a finite number >= 0, got {broadening!r}")
    return _SymmetricEigh.apply(A, float(broadening))


def kpca_energy(
    H: torch.Tensor,
    eigenvalues: torch.Tensor,
    kernel: torch.Tensor | None = None,
    *,
    features: Sequence[torch.Tensor] | None = None,
    eta: float | Sequence[float] = 1.0,
) -> torch.Tensor:
    """The RKM energy J_t of eq. 1 with U_v eliminated by eq. 2: -1/2 Tr(H^T K_eta H) + 1/2 Tr(Lambda H^T H).

    Any H may be passed (e.g. one trained on the Stiefel manifold); at the eigen-solution of K_eta with
    orthonormal H the energy is zero (Proposition 1).

    Parameters
    ----------
    H : Tensor of shape (N, s)
    eigenvalues : Tensor of shape (s,)
    kernel : Tensor of shape (N, N), optional
        K_eta = sum_v K_v / eta_v (centred as the caller wants).
    features : sequence of Tensor (N, d_v), optional
        Instead of ``kernel``: the (centred) features of each view; K_eta is never formed.
    eta : float or sequence of float, default=1.0
        The views' eta_v, with ``features``.

    Returns
    -------
    Tensor, a scalar
    """
    _check_tensor(H, "H", ndim=2)
    _check_tensor(eigenvalues, "eigenvalues", ndim=1)
    if eigenvalues.shape[0] != H.shape[1]:
        raise ValueError(f"eigenvalues: must have H's {H.shape[1]} entries, got {eigenvalues.shape[0]}")
    if (kernel is None) == (features is None):
        raise ValueError("kernel: pass exactly one of kernel and features")
    if kernel is not None:
        _check_tensor(kernel, "kernel", ndim=2)
        if kernel.shape != (H.shape[0], H.shape[0]):
            raise ValueError(f"kernel: must have shape {(H.shape[0], H.shape[0])}, got {tuple(kernel.shape)}")
        explained = (H * (kernel @ H)).sum()
    else:
        views = _check_views(features, "features", H.shape[0])
        etas = check_eta(eta, len(views))
        explained = sum(((Phi.mT @ H) ** 2).sum() / e for Phi, e in zip(views, etas, strict=True))
    return -0.5 * explained + 0.5 * ((H * H).sum(dim=0) * eigenvalues).sum()


def stabilized_objective(energy: torch.Tensor, c_stab: float) -> torch.Tensor:
    """J_stab = J_t + (c_stab / 2) J_t^2 (Appendix A.3): bounded below, with the same stationary points.

    Parameters
    ----------
    energy : Tensor, the scalar J_t
    c_stab : float > 0

    Returns
    -------
    Tensor, a scalar
    """
    if not isinstance(c_stab, numbers.Real) or not c_stab > 0 or not math.isfinite(c_stab):
        raise ValueError(f"c_stab: must be a finite number > 0, got {c_stab!r}")
    return energy + 0.5 * c_stab * energy * energy


def kpca(
    features: Sequence[torch.Tensor] | torch.Tensor,
    n_components: int,
    eta: float | Sequence[float] = 1.0,
    *,
    form: str = "auto",
    center: bool = True,
    broadening: float = 1e-6,
) -> KPCAStep:
    """The multi-view kernel PCA step of a batch from explicit features, dual (eq. 3) or primal (eq. 10).

    Parameters
    ----------
    features : Tensor (N, d) or a sequence of them (one per view, the same N, dtype and device)
        phi_v of the batch's points, e.g. the outputs of feature networks.
    n_components : int
        s, the number of latents.
    eta : float or sequence of float, default=1.0
        The views' eta_v: the eigenproblem of sum_v Phi_v Phi_v^T / eta_v.
    form : {"auto", "dual", "primal"}, default="auto"
        "dual": eigh of the N x N kernel matrix; "primal": of the D x D covariance (D the summed feature width);
        "auto": "primal" when D <= N (eq. 10's condition), else "dual". Both give the same H up to column signs.
    center : bool, default=True
        Centre each view's features by the batch mean first (the paper's footnote 1).
    broadening : float, default=1e-6
        See :func:`eigh_descending`.

    Returns
    -------
    KPCAStep
    """
    views = _check_views(features, "features")
    etas = check_eta(eta, len(views))
    if form not in FORMS:
        raise ValueError(f"form: must be one of {', '.join(map(repr, FORMS))}, got {form!r}")
    n_samples, width = views[0].shape[0], sum(Phi.shape[1] for Phi in views)
    if form == "auto":
        form = "primal" if width <= n_samples else "dual"
    order = width if form == "primal" else n_samples
    _check_n_components(n_components, order, f"the {order} {'features' if form == 'primal' else 'samples'}")
    means = [Phi.mean(dim=0) if center else torch.zeros_like(Phi[0]) for Phi in views]
    centred = [Phi - mean for Phi, mean in zip(views, means, strict=True)]
    scaled = [Phi / math.sqrt(e) for Phi, e in zip(centred, etas, strict=True)]
    if form == "dual":
        kernel = sum(Z @ Z.mT for Z in scaled)
        eigenvalues, vectors = eigh_descending(kernel, broadening)
        eigenvalues, H = eigenvalues[:n_components], vectors[:, :n_components]
    else:
        Z = torch.cat(scaled, dim=1)
        eigenvalues, vectors = eigh_descending(Z.mT @ Z, broadening)
        eigenvalues = eigenvalues[:n_components]
        _check_rank(eigenvalues, n_components)
        H = Z @ vectors[:, :n_components] / eigenvalues.sqrt()
    U = [Phi.mT @ H for Phi in centred]
    energy = kpca_energy(H, eigenvalues, features=centred, eta=etas)
    return KPCAStep(H, eigenvalues, U, means, energy, form)


def kpca_from_kernels(
    kernels: Sequence[torch.Tensor] | torch.Tensor,
    n_components: int,
    eta: float | Sequence[float] = 1.0,
    *,
    center: bool = True,
    broadening: float = 1e-6,
) -> KPCAStep:
    """The multi-view kernel PCA step of a batch from kernel matrices (eq. 3, implicit feature maps).

    Parameters
    ----------
    kernels : Tensor (N, N) or a sequence of them, one per view
        e.g. from :func:`rkm.torch.kernel_matrix`, differentiable in the inputs and bandwidths.
    n_components : int
    eta : float or sequence of float, default=1.0
    center : bool, default=True
        Double-centre each kernel matrix first (eq. 17).
    broadening : float, default=1e-6

    Returns
    -------
    KPCAStep with U and means None.
    """
    matrices = _check_views(kernels, "kernels")
    n_samples = matrices[0].shape[0]
    for index, K in enumerate(matrices):
        if K.shape != (n_samples, n_samples):
            raise ValueError(f"kernels[{index}]: must be square {n_samples} x {n_samples}, got {tuple(K.shape)}")
    etas = check_eta(eta, len(matrices))
    _check_n_components(n_components, n_samples, f"the {n_samples} samples")
    kernel = sum((center_kernel(K) if center else K) / e for K, e in zip(matrices, etas, strict=True))
    eigenvalues, vectors = eigh_descending(kernel, broadening)
    eigenvalues, H = eigenvalues[:n_components], vectors[:, :n_components]
    return KPCAStep(H, eigenvalues, None, None, kpca_energy(H, eigenvalues, kernel), "dual")


def _check_tensor(A, name, ndim):
    if not isinstance(A, torch.Tensor):
        raise TypeError(f"{name}: must be a torch.Tensor, got {type(A).__name__}")
    if A.ndim != ndim:
        raise ValueError(f"{name}: must be {ndim}-D, got shape {tuple(A.shape)}")
    if not A.is_floating_point():
        raise TypeError(f"{name}: must be a floating-point tensor, got {A.dtype}")


def _check_views(views, name, n_samples=None):
    views = [views] if isinstance(views, torch.Tensor) else list(views)
    if not views:
        raise ValueError(f"{name}: needs at least one view")
    for index, A in enumerate(views):
        _check_tensor(A, f"{name}[{index}]", ndim=2)
        if (A.dtype, A.device) != (views[0].dtype, views[0].device):
            raise ValueError(f"{name}[{index}]: must share the dtype and device of {name}[0]")
    n_samples = views[0].shape[0] if n_samples is None else n_samples
    for index, A in enumerate(views):
        if A.shape[0] != n_samples:
            raise ValueError(f"{name}[{index}]: must have {n_samples} rows, got {A.shape[0]}")
    return views


def check_eta(eta, n_views):
    """eta as one float per view: one number for every view, or a sequence of n_views numbers > 0."""
    etas = list(eta) if isinstance(eta, Sequence) else [eta] * n_views
    if len(etas) != n_views:
        raise ValueError(f"eta: must be one number or one per view ({n_views}), got {len(etas)}")
    for value in etas:
        if not isinstance(value, numbers.Real) or not value > 0 or not math.isfinite(value):
            raise ValueError(f"eta: must hold finite numbers > 0, got {eta!r}")
    return [float(value) for value in etas]


def _check_n_components(n_components, limit, what):
    if not isinstance(n_components, numbers.Integral) or isinstance(n_components, bool) or n_components < 1:
        raise ValueError(f"n_components: must be a positive int, got {n_components!r}")
    if n_components > limit:
        raise ValueError(f"n_components: must be at most {what}, got {n_components}")


def _check_rank(eigenvalues, n_components):
    """The primal divides by sqrt(lambda_s): refuse a batch with fewer than s informative directions."""
    tolerance = RANK_TOLERANCE.get(eigenvalues.dtype, 1e-6) * eigenvalues[0].abs()
    if not bool(eigenvalues[-1] > tolerance):
        raise ValueError(
            f"n_components: the batch's features span fewer than {n_components} directions (eigenvalue "
            f"{float(eigenvalues[-1]):.3g} of {float(eigenvalues[0]):.3g}); use fewer components, a larger batch "
            'or form="dual"'
        )
