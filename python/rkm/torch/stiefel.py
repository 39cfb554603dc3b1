"""The Stiefel manifold St(p, N) = {H in R^(N x p): H^T H = I_p} in torch: retractions, a Stiefel-constrained
linear layer and the Cayley Adam optimizer, the twins of :mod:`rkm.stiefel`.

Train any (N, p) parameter with orthonormal columns on the manifold with any loss, e.g. the latents H of an RKM
against :func:`rkm.torch.kpca_energy`, and compare with the eigendecomposition form (:func:`rkm.torch.kpca`)::

    H = torch.nn.Parameter(random_point(N, s, dtype=torch.float64))
    optimizer = CayleyAdam([H])                      # rkm.stiefel's "cayley_adam" step, lr 10 by default
    for _ in range(1000):
        optimizer.zero_grad()
        loss = -0.5 * torch.trace(H.T @ K @ H)       # any differentiable loss of H
        loss.backward()
        optimizer.step()                             # H stays on St(p, N) to rounding

Conventions and rules are those of :mod:`rkm.stiefel` (and of its NumPy twin :mod:`rkm.reference.stiefel`, whose
docstrings spell out every rule), so that the same start and objective give the same iterates to rounding (the
tests ask 1e-12 in float64):

- :func:`project` is the polar factor Z (Z^T Z)^(-1/2) in the Gram form with a second pass, the thin SVD's U V^T
  when Z^T Z is ill conditioned (smallest eigenvalue at most 1e-12 of the largest), and an error at rank < p.
- :func:`cayley_retraction` is Wen & Yin's Cayley curve of "cayley_bb": Y(tau) = H - tau U (I + tau/2 V^T U)^-1
  V^T H with U = [G, H], V = [H, -G], i.e. (I + tau/2 A)^-1 (I - tau/2 A) H for A = G H^T - H G^T.
- :class:`CayleyAdam` is "cayley_adam": Li, Li & Todorovic (2020, Algorithm 2) with a scalar second moment,
  beta = (0.9, 0.99), eps 1e-8, q 0.5, 5 Cayley iterations, and lr a rotation per iteration (default 10: the step
  is min(lr, 2 q / ||W||) with the moments divided by the gradient's norm, so lr does not depend on the loss's
  scale; "paper" gives the paper's 5e-5).
- A new iterate farther than 1e-13 (float64; 450 machine epsilons in general) from the manifold is projected,
  so the feasibility ||H^T H - I|| stays at rounding level over any number of steps.
"""

from __future__ import annotations

import math
import numbers

import torch

from rkm._utils.exceptions import DivergenceError

__all__ = [
    "CayleyAdam",
    "StiefelLinear",
    "cayley_retraction",
    "feasibility",
    "project",
    "random_point",
    "riemannian_gradient",
]

# rkm.stiefel's constants (rkm/reference/stiefel.py): re-projection above this feasibility (float64), the Gram
# form of the polar factor while the eigenvalue ratio of Z^T Z exceeds GRAM_RATIO, rank deficient at or below
# RANK_RATIO of the singular values, Cayley Adam's learning rates.
REPROJECT_ABOVE = 1e-13
GRAM_RATIO = 1e-12
RANK_RATIO = 1e-12
CAYLEY_ADAM_LR = 10.0
CAYLEY_ADAM_PAPER_LR = 5e-5
# A parameter handed to CayleyAdam must be this close to St(p, N) (float64 as rkm.stiefel's engine; a float32
# polar factor is orthonormal to about 1e-6 only).
START_FEASIBILITY = {torch.float64: 1e-8, torch.float32: 1e-4}


def _reproject_threshold(dtype):
    return REPROJECT_ABOVE / torch.finfo(torch.float64).eps * torch.finfo(dtype).eps


def _check_point(Z, name):
    if not isinstance(Z, torch.Tensor):
        raise TypeError(f"{name}: must be a torch.Tensor, got {type(Z).__name__}")
    if Z.ndim != 2 or not 1 <= Z.shape[1] <= Z.shape[0]:
        raise ValueError(f"{name}: must have shape (N, p) with 1 <= p <= N, got {tuple(Z.shape)}")
    if not Z.is_floating_point():
        raise TypeError(f"{name}: must be a floating-point tensor, got {Z.dtype}")


def feasibility(H: torch.Tensor) -> torch.Tensor:
    """||H^T H - I_p||_F, how far H is from having orthonormal columns (a 0-d tensor).

    Parameters
    ----------
    H : Tensor of shape (N, p)

    Returns
    -------
    Tensor, a scalar
    """
    _check_point(H, "H")
    return _feasibility(H)


def _feasibility(H):
    return torch.linalg.matrix_norm(H.mT @ H - torch.eye(H.shape[1], dtype=H.dtype, device=H.device))


def riemannian_gradient(H: torch.Tensor, G: torch.Tensor) -> torch.Tensor:
    """G - H sym(H^T G): the Riemannian gradient (embedded metric) at a point H of St(p, N).

    Parameters
    ----------
    H : Tensor of shape (N, p)
        A point with orthonormal columns.
    G : Tensor of shape (N, p)
        The Euclidean gradient of the loss at H.

    Returns
    -------
    Tensor of shape (N, p)
        Tangent at H; its norm is rkm.stiefel's ``grad_norm``.
    """
    _check_point(H, "H")
    _check_like(G, H, "G")
    HtG = H.mT @ G
    return G - H @ ((HtG + HtG.mT) / 2)


def _check_like(G, H, name):
    if not isinstance(G, torch.Tensor):
        raise TypeError(f"{name}: must be a torch.Tensor, got {type(G).__name__}")
    if G.shape != H.shape or (G.dtype, G.device) != (H.dtype, H.device):
        raise ValueError(
            f"{name}: must have H's shape, dtype and device {tuple(H.shape)}, {H.dtype}, {H.device}; got "
            f"{tuple(G.shape)}, {G.dtype}, {G.device}"
        )


def project(Z: torch.Tensor) -> torch.Tensor:
    """The nearest matrix with orthonormal columns, the polar factor Z (Z^T Z)^(-1/2) = U V^T.

    The twin of :func:`rkm.stiefel.project` (same algorithm: Gram form with a second pass, the SVD when Z^T Z is
    ill conditioned). Differentiable where torch's eigh and SVD are.

    Parameters
    ----------
    Z : Tensor of shape (N, p)
        Finite, 1 <= p <= N, rank p.

    Returns
    -------
    Tensor of shape (N, p)

    Raises
    ------
    ValueError
        "Z: ..." for a wrongly shaped or non-finite Z, or one of rank below p.
    """
    _check_point(Z, "Z")
    if not bool(torch.isfinite(Z).all()):
        raise ValueError("Z: contains NaN or infinity")
    Y = _polar(Z)
    if Y is None:
        raise ValueError(f"Z: has rank below p = {Z.shape[1]}: it has no nearest orthonormal matrix")
    return Y


def _polar(Z):
    """polar(Z) as rkm.reference.stiefel._polar, or None when Z is not finite or has rank < p."""
    if not bool(torch.isfinite(Z).all()):
        return None
    w, Q = torch.linalg.eigh(Z.mT @ Z)
    if bool(w[0] > GRAM_RATIO * w[-1]):
        Y = ((Z @ Q) / w.sqrt()) @ Q.mT
        w, Q = torch.linalg.eigh(Y.mT @ Y)
        return ((Y @ Q) / w.sqrt()) @ Q.mT
    U, s, Vh = torch.linalg.svd(Z, full_matrices=False)
    if bool(s[-1] <= RANK_RATIO * s[0]):
        return None
    return U @ Vh


def random_point(
    n: int, p: int, *, generator: torch.Generator | None = None, dtype=torch.float64, device=None
) -> torch.Tensor:
    """A random point of St(p, n): standard normal entries made orthonormal by :func:`project` (Haar distributed).

    Parameters
    ----------
    n, p : int
        Rows and columns, 1 <= p <= n.
    generator : torch.Generator, optional
        Seed the draw (``torch.Generator().manual_seed(0)``); None uses torch's global generator.
    dtype : torch.dtype, default=torch.float64
    device : torch.device or str, optional

    Returns
    -------
    Tensor of shape (n, p)
    """
    for value, name in ((n, "n"), (p, "p")):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
            raise ValueError(f"{name}: must be a positive int, got {value!r}")
    if p > n:
        raise ValueError(f"p: must be at most n = {n}, got {p}")
    return project(torch.randn(n, p, generator=generator, dtype=dtype, device=device))


def cayley_retraction(H: torch.Tensor, G: torch.Tensor, step: float | torch.Tensor) -> torch.Tensor:
    """Wen & Yin's Cayley retraction of the descent direction: the point at ``step`` on the curve of
    :mod:`rkm.stiefel`'s "cayley_bb" from H along -(G - H G^T H).

    Y(tau) = (I + tau/2 A)^-1 (I - tau/2 A) H with A = G H^T - H G^T, computed as in rkm through the 2p x 2p
    system: Y = H - tau U X, (I + tau/2 V^T U) X = V^T H, U = [G, H], V = [H, -G] (with the computed H^T H, not
    I). As in rkm, a Y farther than 1e-13 (float64) from the manifold is projected (:func:`project`).
    Differentiable in H, G and a tensor ``step``.

    Parameters
    ----------
    H : Tensor of shape (N, p)
        A point with orthonormal columns.
    G : Tensor of shape (N, p)
        The Euclidean gradient of the loss at H (H's dtype and device).
    step : float or 0-d Tensor
        tau >= 0, the curve's parameter.

    Returns
    -------
    Tensor of shape (N, p)
        On St(p, N) to rounding; Y(0) = H.

    Raises
    ------
    ValueError
        Bad shapes or step (naming the argument), or a singular system or non-finite result ("step: ...").
    """
    _check_point(H, "H")
    _check_like(G, H, "G")
    tau = step.detach() if isinstance(step, torch.Tensor) else step
    if isinstance(tau, torch.Tensor):
        if tau.ndim != 0:
            raise ValueError(f"step: a tensor step must be 0-d, got shape {tuple(tau.shape)}")
        tau = float(tau)
    if isinstance(tau, bool) or not isinstance(tau, numbers.Real) or not math.isfinite(tau) or tau < 0:
        raise ValueError(f"step: must be a finite number >= 0, got {step!r}")
    HtH, HtG, GtG = H.mT @ H, H.mT @ G, G.mT @ G
    VtU = torch.cat([torch.cat([HtG, HtH], dim=1), torch.cat([-GtG, -HtG.mT], dim=1)], dim=0)
    VtH = torch.cat([HtH, -HtG.mT], dim=0)
    identity = torch.eye(VtU.shape[0], dtype=H.dtype, device=H.device)
    X, info = torch.linalg.solve_ex(identity + (step / 2.0) * VtU, VtH)
    Y = H - step * (torch.cat([G, H], dim=1) @ X)
    if int(info) != 0 or not bool(torch.isfinite(Y).all()):
        raise ValueError(f"step: the Cayley system is singular or overflows at step {tau!r}; use a smaller step")
    if float(_feasibility(Y.detach())) > _reproject_threshold(H.dtype):
        Y = project(Y)
    return Y


class StiefelLinear(torch.nn.Module):
    """y = x W (+ bias) with W (in_features, out_features) on St(out_features, in_features): orthonormal columns.

    Train ``weight`` with :class:`CayleyAdam` (which keeps it on the manifold) and the bias, if any, with any
    optimizer. With ``in_features`` = N and W = H this is the RKM latent layer: the rows of H are the latents
    and x = K gives K H.

    Parameters
    ----------
    in_features, out_features : int
        out_features <= in_features.
    bias : bool, default=False
    generator : torch.Generator, optional
        Seeds the initial weight, a random point of the manifold (:func:`random_point`).
    dtype : torch.dtype, default=torch.float64
    device : torch.device or str, optional
    """

    def __init__(self, in_features, out_features, bias=False, *, generator=None, dtype=torch.float64, device=None):
        super().__init__()
        for value, name in ((in_features, "in_features"), (out_features, "out_features")):
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
                raise ValueError(f"{name}: must be a positive int, got {value!r}")
        if out_features > in_features:
            raise ValueError(
                f"out_features: must be at most in_features = {in_features} (orthonormal columns), got {out_features}"
            )
        self.in_features, self.out_features = int(in_features), int(out_features)
        weight = random_point(self.in_features, self.out_features, generator=generator, dtype=dtype, device=device)
        self.weight = torch.nn.Parameter(weight)
        self.bias = torch.nn.Parameter(torch.zeros(out_features, dtype=dtype, device=device)) if bias else None

    def forward(self, x):
        out = x @ self.weight
        return out if self.bias is None else out + self.bias

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class CayleyAdam(torch.optim.Optimizer):
    """Cayley Adam on the Stiefel manifold: rkm.stiefel's "cayley_adam" step as a torch optimizer.

    Every parameter is a point of St(p, N) (shape (N, p), orthonormal columns) and stays on it. With M the
    momentum, v a scalar second moment, t the step number and G the gradient::

        M = beta1 M + (1 - beta1) G;   v = beta2 v + (1 - beta2) ||G||^2
        r = (1 - beta1^t) sqrt(v / (1 - beta2^t) + eps);   P = (M - H (H^T M) / 2) / r
        W = P H^T - H P^T (never formed);   M = r W H;   alpha = min(lr, 2 q / (||W|| + eps))
        Y = H - alpha W H, then cayley_iters times Y = H - (alpha / 2) W (H + Y);   H = Y (projected when
        ||Y^T Y - I|| > 1e-13 in float64)

    Parameters
    ----------
    params : iterable of Tensor or dict
        (N, p) floating-point parameters with orthonormal columns (to 1e-8 in float64, 1e-4 in float32): start
        from :func:`random_point` or :func:`project`.
    lr : float or "paper", default=10.0
        Largest rotation per step; "paper" is Li et al.'s 5e-5 (tens of thousands of steps).
    betas : (float, float), default=(0.9, 0.99)
    eps : float, default=1e-8
    q : float, default=0.5
        The step is at most 2 q / ||W|| (the Cayley iteration's contraction).
    cayley_iters : int, default=5

    Raises
    ------
    DivergenceError
        From :meth:`step`, when a new iterate is not finite or has rank < p (the parameter keeps its last value).
    """

    def __init__(self, params, lr=CAYLEY_ADAM_LR, betas=(0.9, 0.99), eps=1e-8, q=0.5, cayley_iters=5):
        if isinstance(lr, str):
            if lr != "paper":
                raise ValueError(f"lr: must be a positive number or 'paper', got {lr!r}")
            lr = CAYLEY_ADAM_PAPER_LR
        for value, name in ((lr, "lr"), (eps, "eps"), (q, "q")):
            if not _finite_real(value) or value <= 0:
                raise ValueError(f"{name}: must be a finite number > 0, got {value!r}")
        if (
            not isinstance(betas, (tuple, list))
            or len(betas) != 2
            or not all(_finite_real(b) and 0 <= b < 1 for b in betas)
        ):
            raise ValueError(f"betas: must be two numbers in [0, 1), got {betas!r}")
        if isinstance(cayley_iters, bool) or not isinstance(cayley_iters, numbers.Integral) or cayley_iters < 0:
            raise ValueError(f"cayley_iters: must be an int >= 0, got {cayley_iters!r}")
        defaults = {
            "lr": float(lr),
            "betas": (float(betas[0]), float(betas[1])),
            "eps": float(eps),
            "q": float(q),
            "cayley_iters": int(cayley_iters),
        }
        super().__init__(params, defaults)
        for group in self.param_groups:
            for H in group["params"]:
                _check_point(H, "params")
                tolerance = START_FEASIBILITY.get(H.dtype, 1e-2)
                distance = float(_feasibility(H.detach()))
                if not distance <= tolerance:
                    raise ValueError(
                        f"params: a parameter of shape {tuple(H.shape)} is not on the Stiefel manifold "
                        f"(||H^T H - I|| = {distance:.3g} > {tolerance:g}); start from rkm.torch.stiefel.project(H)"
                    )

    @torch.no_grad()
    def step(self, closure=None):
        """One Cayley Adam step of every parameter with a gradient; returns closure() when given."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            for H in group["params"]:
                if H.grad is not None:
                    self._step_one(H, group)
        return loss

    def _step_one(self, H, group):
        state = self.state[H]
        if not state:
            state["step"], state["momentum"], state["second_moment"] = 0, torch.zeros_like(H), 0.0
        beta1, beta2 = group["betas"]
        eps, t = group["eps"], state["step"] + 1
        G = H.grad
        M = state["momentum"] * beta1 + (1.0 - beta1) * G
        v = beta2 * state["second_moment"] + (1.0 - beta2) * float((G * G).sum())
        r = (1.0 - beta1**t) * math.sqrt(v / (1.0 - beta2**t) + eps)
        P = (M - 0.5 * (H @ (H.mT @ M))) / r

        def W_times(Z):
            return P @ (H.mT @ Z) - H @ (P.mT @ Z)

        WH = W_times(H)
        HtP = H.mT @ P
        norm_W = math.sqrt(max(0.0, 2.0 * float((P * P).sum()) - 2.0 * float((HtP * HtP.mT).sum())))
        alpha = min(group["lr"], 2.0 * group["q"] / (norm_W + eps))
        Y = H - alpha * WH
        for _ in range(group["cayley_iters"]):
            Y = H - (alpha / 2.0) * W_times(H + Y)
        H_new = _polar(Y) if float(_feasibility(Y)) > _reproject_threshold(H.dtype) else Y
        if H_new is None or not bool(torch.isfinite(H_new).all()):
            raise DivergenceError(
                f"CayleyAdam: step {t} left the floating-point range (or lost rank); the parameter keeps its last "
                "value; try a smaller lr or check the loss for non-finite gradients"
            )
        state["momentum"] = r * WH  # the momentum moved to the tangent space at H (rkm: M = r W H)
        state["second_moment"], state["step"] = v, t
        H.copy_(H_new)


def _finite_real(value):
    return not isinstance(value, bool) and isinstance(value, numbers.Real) and math.isfinite(value)
