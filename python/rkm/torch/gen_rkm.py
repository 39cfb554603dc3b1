"""The explicit Gen-RKM (Algorithm 1): feature and pre-image networks trained through the RKM kernel PCA step.

Equation numbers refer to A. Pandey, J. Schreurs and J. A. K. Suykens, "Generative restricted kernel machines"
(2021), sections 3.2 and 4. Each mini-batch goes through the feature networks phi_v, solves the multi-view
kernel PCA of its features (eq. 3 in the dual or eq. 10 in the primal, :func:`rkm.torch.kpca`), maps the
latents back to features (eq. 6) and through the pre-image networks psi_v, and takes an Adam step on eq. 9:

    J_c = J_stab + (c_acc / 2) sum_v mean_i ||x_v,i - psi_v(phi^_v,i)||^2,   J_stab = J_t + (c_stab / 2) J_t^2.

J_t is zero at every batch's eigen-solution (Proposition 1), so J_stab adds nothing to the gradient and c_acc
only rescales the loss, which Adam ignores: training minimises the reconstruction error through each batch's
top-s projection, and neither constant needs tuning (they are kept so that eq. 9 is what is computed). That
holds to rounding: in float64 J_stab's gradient is below 1e-8 of the reconstruction's (the tests check it); in
float32 the cancelling terms of J_t leave rounding noise, measured at 2% of the reconstruction gradient's norm
on a trained MNIST model (eigenvalues about 2e4, J_t 0.016).

The pre-image networks take centred features, phi^_v = U_v h (eq. 6; the paper's feature maps are centred,
footnote 1), never the batch mean added back: that mean is a per-batch offset that no term of eq. 9 bounds, so
the feature networks grow it freely until the pre-image network's sigmoid saturates (measured on 64 x 64 sprites
at learning rate 1e-3: the mean's norm went from 0.2 to 342 in 14 Adam steps while the centred projection stayed
below 10, and every output went black). After
training, one pass over the training set gives the latents H, eigenvalues and interconnection matrices U_v; a
Gaussian mixture fitted to H gives new latents (section 5), decoded by psi_v.
"""

from __future__ import annotations

import numbers

import torch
from sklearn.utils._param_validation import Interval, StrOptions

from rkm._utils.generation import GENERATION_CONSTRAINTS
from rkm.torch._training import _NetworkModel
from rkm.torch.energy import FORMS, check_eta, kpca, stabilized_objective

__all__ = ["ExplicitGenRKM"]


class ExplicitGenRKM(_NetworkModel):
    """Generative RKM with explicit (neural) feature maps, trained by Algorithm 1 of Pandey et al. (2021).

    Per view a feature network phi_v and a pre-image network psi_v (Table 3's by default); each mini-batch
    solves the RKM kernel PCA of its features and trains both networks on the reconstruction through the
    batch's top-s subspace (eq. 9; see the module docstring for why J_stab and c_acc cannot change the
    result). Generation draws latents from a Gaussian mixture fitted to the training latents and decodes every
    view at once: an image and its label from one latent (Figs. 4b-c).

    Parameters
    ----------
    n_components : int
        The latent dimension s.
    feature_networks : "auto" or list of (nn.Module or "auto"), default="auto"
        phi_v per view, mapping flat rows (n, p_v) to features (n, f_v). "auto": Table 3's network for the view
        (convolutions for 28 x 28, 32 x 32 x 3, 64 x 64 and 64 x 64 x 3 images, found by the view's width or
        ``image_shapes``; fully connected 15-20 for label views and views of at most 20 columns; 256-128
        otherwise). Modules are copied, never trained in place.
    preimage_networks : "auto" or list of (nn.Module or "auto"), default="auto"
        psi_v per view, mapping features (n, f_v) back to rows (n, p_v) ("auto": the reverse of Table 3's).
    image_shapes : None or list of (tuple or None), default=None
        (channels, height, width) of each image view for the "auto" networks (None: by width).
    eta : float or list of float, default=1.0
        The RKM constants eta_v: each batch solves the eigenproblem of sum_v Phi_v Phi_v^T / eta_v.
    c_stab : float, default=1.0
        The stabilisation constant of J_stab (Appendix A.3).
    c_acc : float, default=1.0
        The weight of the reconstruction term of eq. 9.
    form : {"auto", "dual", "primal"}, default="auto"
        The eigenproblem of each batch: "dual" (N x N), "primal" (D x D, D the summed feature width) or
        "auto" (primal when D <= batch size, eq. 10's condition).
    label_views : list or tuple of int, default=()
        Views holding one-hot (or multi-hot) labels; ``argmax`` of a generated row gives its class.
    n_mixture : int, default=10
        Components l of the Gaussian mixture on the training latents (Table 4: 10). With about as many classes as
        latents, more components follow the class clusters better: on the 5000 MNIST digits, s = 10, 200 epochs,
        generated image-label pairs agreed for 0.85 of them with 10 components and 0.91 with 30.
    covariance_type : {"full", "tied", "diag", "spherical"}, default="full"
    learning_rate : float, default=1e-3
        Adam's step (Table 3: 1e-3 for MNIST and Fashion-MNIST; at 1e-4 a label view learns only its mean
        within a few thousand steps).
    batch_size : int, default=256
        Rows per mini-batch; each batch must hold more points than n_components.
    max_epochs : int, default=100
        Passes over the training set at most. Convolutional networks keep lowering the training loss for long: on
        the 5000 MNIST digits (batch 256) it still fell 9% between epochs 139 and 200, so a fit of that size ends
        at max_epochs with a ConvergenceWarning; generation is good well before (label consistency 0.85 after 100
        epochs).
    tol : float, default=1e-4
        Stop when the epoch loss has not fallen by this fraction for ``n_iter_no_change`` epochs.
    n_iter_no_change : int, default=10
    device : str or torch.device, default="cpu"
    dtype : {"float32", "float64"}, default="float32"
    n_threads : int or None, default=None
        torch's threads during fit and inference (None: torch's setting; -1: all cores).
    random_state : int, RandomState or None, default=None
        Seeds the networks' initialization, the batches and the mixture: fits are reproducible on the CPU.
    verbose : int, default=0
        One line per epoch (loss, J_t, reconstruction, seconds).

    Attributes
    ----------
    feature_networks_, preimage_networks_ : torch.nn.ModuleList
        The trained phi_v and psi_v.
    H_ : ndarray of shape (n_samples, n_components)
        The training latents from the final pass (orthonormal columns).
    eigenvalues_ : ndarray of shape (n_components,)
    U_ : list of ndarray of shape (f_v, n_components)
        Interconnection matrices Phi_v^T H (unweighted, as :class:`rkm.GenRKM`).
    feature_means_ : list of ndarray of shape (f_v,)
    mixture_ : sklearn.mixture.GaussianMixture
        Fitted to ``H_ * latent_scale_``.
    latent_scale_ : float
    n_iter_ : int
        Epochs run.
    objective_history_ : list of float
        Mean loss J_c per epoch.
    term_history_ : dict of list
        Mean per epoch of "J_t" and "reconstruction".
    n_views_, input_dims_, feature_widths_ :
        Number of views, their widths, and the feature widths f_v.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.datasets import load_digits
    >>> from rkm.torch import ExplicitGenRKM
    >>> X, y = load_digits(return_X_y=True)
    >>> model = ExplicitGenRKM(8, label_views=[1], max_epochs=2, random_state=0).fit([X / 16, np.eye(10)[y]])
    >>> images, labels = model.sample(4, random_state=0)
    >>> images.shape, labels.shape
    ((4, 64), (4, 10))
    """

    _parameter_constraints: dict = {
        **_NetworkModel._parameter_constraints,
        **GENERATION_CONSTRAINTS,
        "eta": [Interval(numbers.Real, 0, None, closed="neither"), list, tuple],
        "c_stab": [Interval(numbers.Real, 0, None, closed="neither")],
        "c_acc": [Interval(numbers.Real, 0, None, closed="neither")],
        "form": [StrOptions(set(FORMS))],
    }

    def __init__(
        self,
        n_components: int,
        *,
        feature_networks="auto",
        preimage_networks="auto",
        image_shapes=None,
        eta=1.0,
        c_stab: float = 1.0,
        c_acc: float = 1.0,
        form: str = "auto",
        label_views=(),
        n_mixture: int = 10,
        covariance_type: str = "full",
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
        self.feature_networks = feature_networks
        self.preimage_networks = preimage_networks
        self.image_shapes = image_shapes
        self.eta = eta
        self.c_stab = c_stab
        self.c_acc = c_acc
        self.form = form
        self.label_views = label_views
        self.n_mixture = n_mixture
        self.covariance_type = covariance_type
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

    def _check_params_vs_input(self, arrays):
        super()._check_params_vs_input(arrays)
        if self.n_mixture > arrays[0].shape[0]:
            raise ValueError(f"n_mixture: must be at most n_samples = {arrays[0].shape[0]}, got {self.n_mixture}")
        self.etas_ = check_eta(self.eta, len(arrays))

    def _build_heads(self, widths):
        """The kernel PCA step links features and latents: no trained module between them."""
        if self.form == "primal" and self.n_components > sum(widths):
            raise ValueError(
                f"n_components: the primal form has at most the {sum(widths)} summed feature widths, got "
                f"{self.n_components}"
            )

    def _batch_loss(self, batch):
        features = [net(x) for net, x in zip(self.feature_networks_, batch, strict=True)]
        try:
            step = kpca(features, self.n_components, self.etas_, form=self.form)
        except torch.linalg.LinAlgError:
            # Features so large that their covariance overflows: the loop reports it as a divergence.
            return torch.tensor(float("nan")), {}
        reconstruction = 0.0
        for x, net, U in zip(batch, self.preimage_networks_, step.U, strict=True):
            output = net(step.H @ U.mT)
            reconstruction = reconstruction + ((output - x) ** 2).sum(dim=1).mean()
        loss = stabilized_objective(step.energy, self.c_stab) + 0.5 * self.c_acc * reconstruction
        return loss, {"J_t": step.energy.item(), "reconstruction": reconstruction.item()}

    def _all_features(self, tensors):
        blocks = self._blocks(tensors[0].shape[0])
        return [torch.cat([net(x[rows]) for rows in blocks]) for net, x in zip(self.feature_networks_, tensors)]

    def _finish(self, tensors):
        """The final pass (Algorithm 1, after training): the kernel PCA of the whole training set, the mixture."""
        features = self._all_features(tensors)
        step = kpca(features, self.n_components, self.etas_, form=self._final_form(features))
        self.H_ = step.H.double().cpu().numpy()
        self.eigenvalues_ = step.eigenvalues.double().cpu().numpy()
        self.U_ = [U.double().cpu().numpy() for U in step.U]
        self.feature_means_ = [mean.double().cpu().numpy() for mean in step.means]
        self._fit_mixture(self.H_)
        self._progress(f"final pass: eigenvalues {self.eigenvalues_[0]:.4g} to {self.eigenvalues_[-1]:.4g}")

    def _final_form(self, features):
        """The primal whenever it is smaller: the dual of the whole training set would be n_samples^2."""
        return "primal" if sum(f.shape[1] for f in features) <= features[0].shape[0] else "dual"

    def _encode(self, tensors):
        """h = Lambda^-1 sum_v U_v^T (phi_v(x) - mean_v) / eta_v (eq. 2's first line with eq. 2's U_v)."""
        latents = 0.0
        for net, x, U, mean, eta in zip(
            self.feature_networks_, tensors, self.U_, self.feature_means_, self.etas_, strict=True
        ):
            latents = latents + (net(x) - self._tensor(mean)) @ self._tensor(U) / eta
        return latents / self._tensor(self.eigenvalues_)

    def _features_from_latents(self, latents):
        """Eq. 6: the centred feature phi^_v = U_v h (without the factor 1/eta_v; see rkm.GenRKM)."""
        return [latents @ self._tensor(U).mT for U in self.U_]
