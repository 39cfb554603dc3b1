"""VAE (Kingma & Welling 2014) and beta-VAE (Higgins et al. 2017) baselines with the Gen-RKM's networks.

The Gen-RKM paper compares against both with "the same encoder/decoder architecture, optimization parameters"
(sections 5, Tables 1-2): here the encoder is the Gen-RKM's feature networks phi_v followed by linear maps of
their concatenated features to the posterior mean and log-variance, and the decoder a linear map from the
latent to the features followed by the Gen-RKM's pre-image networks psi_v; the linear maps stand where the
Gen-RKM has its kernel PCA step (h from Phi, and U_v h back). Same optimiser (Adam), batches, epochs and
reconstruction term; the loss per point is sum_v ||x_v - x^_v||^2 + beta KL(q(h | x) || N(0, I)).
"""

from __future__ import annotations

import numbers

import torch
from sklearn.utils._param_validation import Interval
from torch import nn

from rkm.torch._training import _NetworkModel

__all__ = ["VAE", "BetaVAE"]


class VAE(_NetworkModel):
    """Variational autoencoder with the explicit Gen-RKM's networks (a baseline of the Gen-RKM paper).

    Parameters
    ----------
    n_components : int
        The latent dimension.
    beta : float, default=1.0
        Weight of the KL term (1: the VAE; :class:`BetaVAE` defaults to 3, Table 2's beta).
    feature_networks, preimage_networks, image_shapes, label_views, learning_rate, batch_size, max_epochs,
    tol, n_iter_no_change, device, dtype, n_threads, random_state, verbose :
        As in :class:`rkm.torch.ExplicitGenRKM`.

    Attributes
    ----------
    feature_networks_, preimage_networks_ : torch.nn.ModuleList
    encoder_head_ : torch.nn.Linear
        Concatenated features to (mean, log-variance) of the posterior.
    decoder_head_ : torch.nn.Linear
        Latent to the concatenated features.
    n_iter_, objective_history_ :
        As in :class:`rkm.torch.ExplicitGenRKM`.
    term_history_ : dict of list
        Mean per epoch of "reconstruction" and "KL".

    Notes
    -----
    ``transform`` gives the posterior means; ``sample`` draws latents from the prior N(0, I).
    """

    _parameter_constraints: dict = {
        **_NetworkModel._parameter_constraints,
        "beta": [Interval(numbers.Real, 0, None, closed="left")],
    }

    def __init__(
        self,
        n_components: int,
        *,
        beta: float = 1.0,
        feature_networks="auto",
        preimage_networks="auto",
        image_shapes=None,
        label_views=(),
        learning_rate: float = 1e-3,
        batch_size: int = 256,
        max_epochs: int = 100,
        tol: float = 1e-4,
        n_iter_no_change: int = 10,
        device="cpu",
        dtype: str = "float32",
        n_threads: int | None = None,
        random_state=None,
        verbose: int = 0,
    ):
        self.n_components = n_components
        self.beta = beta
        self.feature_networks = feature_networks
        self.preimage_networks = preimage_networks
        self.image_shapes = image_shapes
        self.label_views = label_views
        self.learning_rate = learning_rate
        self.batch_size = batch_size
        self.max_epochs = max_epochs
        self.tol = tol
        self.n_iter_no_change = n_iter_no_change
        self.device = device
        self.dtype = dtype
        self.n_threads = n_threads
        self.random_state = random_state
        self.verbose = verbose

    def _build_heads(self, widths):
        width = sum(widths)
        heads = nn.ModuleDict(
            {"encoder": nn.Linear(width, 2 * self.n_components), "decoder": nn.Linear(self.n_components, width)}
        )
        heads = heads.to(self.device_, self.dtype_)
        self.encoder_head_, self.decoder_head_ = heads["encoder"], heads["decoder"]

    def _modules(self):
        return {**super()._modules(), "encoder_head_": self.encoder_head_, "decoder_head_": self.decoder_head_}

    def _posterior(self, tensors):
        features = torch.cat([net(x) for net, x in zip(self.feature_networks_, tensors, strict=True)], dim=1)
        mean, log_variance = self.encoder_head_(features).chunk(2, dim=1)
        return mean, log_variance

    def _batch_loss(self, batch):
        mean, log_variance = self._posterior(batch)
        latents = mean + torch.randn_like(mean) * (0.5 * log_variance).exp()
        reconstruction = 0.0
        for x, net, feature in zip(batch, self.preimage_networks_, self._features_from_latents(latents), strict=True):
            reconstruction = reconstruction + ((net(feature) - x) ** 2).sum(dim=1).mean()
        kl = 0.5 * (mean**2 + log_variance.exp() - 1.0 - log_variance).sum(dim=1).mean()
        loss = reconstruction + self.beta * kl
        return loss, {"reconstruction": reconstruction.item(), "KL": kl.item()}

    def _finish(self, tensors):
        self._progress(f"trained {self.n_iter_} epochs")

    def _encode(self, tensors):
        return self._posterior(tensors)[0]

    def _features_from_latents(self, latents):
        return list(self.decoder_head_(latents).split(self.feature_widths_, dim=1))

    def _draw(self, n, rng):
        """n latents from the prior N(0, I)."""
        return rng.standard_normal((n, self.n_components))


class BetaVAE(VAE):
    """beta-VAE (Higgins et al. 2017): :class:`VAE` with the KL term weighted by beta (default 3, as the Gen-RKM
    paper's Table 2)."""

    def __init__(
        self,
        n_components: int,
        *,
        beta: float = 3.0,
        feature_networks="auto",
        preimage_networks="auto",
        image_shapes=None,
        label_views=(),
        learning_rate: float = 1e-3,
        batch_size: int = 256,
        max_epochs: int = 100,
        tol: float = 1e-4,
        n_iter_no_change: int = 10,
        device="cpu",
        dtype: str = "float32",
        n_threads: int | None = None,
        random_state=None,
        verbose: int = 0,
    ):
        super().__init__(
            n_components,
            beta=beta,
            feature_networks=feature_networks,
            preimage_networks=preimage_networks,
            image_shapes=image_shapes,
            label_views=label_views,
            learning_rate=learning_rate,
            batch_size=batch_size,
            max_epochs=max_epochs,
            tol=tol,
            n_iter_no_change=n_iter_no_change,
            device=device,
            dtype=dtype,
            n_threads=n_threads,
            random_state=random_state,
            verbose=verbose,
        )
