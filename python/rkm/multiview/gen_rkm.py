"""Generative restricted kernel machines with kernel (implicit) or fixed explicit feature maps.

Equation and section numbers refer to A. Pandey, J. Schreurs and J. A. K. Suykens, "Generative restricted kernel
machines" (2021). Training (eq. 3, footnote 2) is the multi-view kernel PCA that :class:`rkm.MultiViewRKM`
solves, with the RKM constants eta_v weighting the views: the eigenproblem of sum_v (1/eta_v) K_v on centred
kernels, or its primal twin (eq. 10) when every feature map is explicit and their summed dimension is below the
number of samples. Generation (section 2.2) clamps a latent h* and reads every view off it at once: the
similarities of the generated point to the training points, k_x* = K_v H^T h* (eq. 7, up to the factor 1/eta_v),
and a pre-image, by default the kernel smoother over the n_r most similar training points (eq. 8). Latents come
from a training point, from a Gaussian mixture fitted to the training latents (section 5), from a walk along one
component (Fig. 5) or from a bilinear interpolation of four latents (Appendix A.6).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike
from sklearn.utils.validation import check_is_fitted

from rkm._utils.generation import GENERATION_CONSTRAINTS, LatentGenerationMixin, check_label_views
from rkm.multiview.multiview_rkm import ROW_BLOCK_BYTES, MultiViewRKM

__all__ = ["GenRKM"]


class GenRKM(LatentGenerationMixin, MultiViewRKM):
    """Generative multi-view RKM (Pandey, Schreurs & Suykens 2021): train, sample, traverse, interpolate.

    Training finds s hidden features shared by all views, the top eigenvectors H of sum_v (1/eta_v) M K_v M
    (eq. 3; :class:`rkm.MultiViewRKM` solves it, so every solver, kernel and explicit feature map of that class
    applies). A Gaussian mixture with ``n_mixture`` components is then fitted to the training latents (the rows
    of ``H_``). Generation decodes latents h* into every view at once: one latent gives an image and its label
    together (Fig. 4a). A view's pre-image is, by ``preimage``, the kernel smoother of eq. 8 over the
    ``n_neighbors`` training points most similar by k_x* = K_v H^T h* (eq. 7), Mika et al.'s fixed point (rbf
    views), a learned kernel ridge map, or for a linear view the feature itself, U_v h* plus the mean.

    The generated features are the projections sum_i (H h*)_i phi~_v(x_i): eq. 6 with the 1/eta_v factor left
    out, so that a training latent reconstructs its point's projection whatever eta_v (the factor only rescales
    the similarities, which the smoother ignores, but it would shrink a linear view's output by 1/eta_v).

    Large N, with explicit views (as :class:`rkm.MultiViewRKM`): ``fit`` on Dask views computes the latents of
    every row (the mixture is fitted on all of them) and keeps a uniform sample of 2000 rows for the pre-images;
    :meth:`partial_fit` keeps a reservoir of 2000 rows, whose latents are ``H_`` and fit the mixture.

    Parameters
    ----------
    n_components : int
        Number s of hidden features (the latent dimension; Table 4's s).
    kernel : str, Kernel, transformer, callable, or a list or tuple of them, default=("rbf", "linear")
        The feature map of each view, as in :class:`rkm.MultiViewRKM`; the default is an image view under the
        rbf kernel and a (one-hot) label view under the identity map.
    gamma, degree, coef0 :
        Kernel parameters, one for every view or one per view, as in :class:`rkm.MultiViewRKM` (a paper's
        sigma: ``gamma=rkm.kernels.RBF.from_sigma(sigma).gamma``).
    eta : float or a list or tuple of them, default=1.0
        The RKM constants eta_v (eq. 1): training uses sum_v (1/eta_v) K_v.
    solver, rotate, rescale, stiefel_method, max_iter, tol :
        The training solver and its options, as in :class:`rkm.MultiViewRKM`.
    preimage : {"auto", "smoother", "ridge", "fixed_point"} or a list or tuple of them, default="auto"
        Pre-image of each non-linear view ("auto": the kernel smoother of eq. 8).
    n_neighbors : int, default=4
        The n_r training points the kernel smoother averages (Table 4: 4); at most n_samples.
    preimage_alpha : float, default=1.0
        Ridge penalty of the "ridge" pre-image.
    preimage_max_iter : int, default=100
        Iterations of the "fixed_point" pre-image.
    n_mixture : int, default=10
        Components l of the Gaussian mixture fitted to the training latents (Table 4: 10).
    covariance_type : {"full", "tied", "diag", "spherical"}, default="full"
        Covariance of the mixture's components, as scikit-learn's ``GaussianMixture``.
    label_views : list or tuple of int, default=()
        Views holding labels, one-hot (or multi-hot attributes): every training row must have a positive entry.
        Their generated rows are scores; ``argmax`` gives the generated class.
    view_columns : None, int, or a list or tuple of column selections, default=None
        How one 2-D array given instead of a list of views is split into views, as in :class:`rkm.MultiViewRKM`.
    n_threads : int or None, default=None
        Threads for the core and BLAS (None: OpenMP's default; -1: all cores).
    random_state : int, RandomState or None, default=None
        Seeds the eigensolver's start and the mixture's initialization (``sample`` takes its own).
    device : {"cpu", "cuda", "cuda:N"}, default="cpu"
        Where the Gram matrices of the kernel views are computed, as in :class:`rkm.MultiViewRKM`.
    verbose : int, default=0
        Progress lines of the fit.

    Attributes
    ----------
    H_ : ndarray of shape (n_samples, s)
        The training latents h_i (orthonormal columns).
    eigenvalues_ : ndarray of shape (s,)
        Lambda of eq. 3, descending.
    mixture_ : sklearn.mixture.GaussianMixture
        The mixture fitted to the training latents, in units scaled by ``latent_scale_``.
    latent_scale_ : float
        The factor that gives the training latents unit mean variance (the mixture's units: scikit-learn's
        ``reg_covar`` is absolute, while the latents' variance is 1 / n_samples).
    n_views_, solver_, U_, preimages_, gamma_, n_iter_ :
        As in :class:`rkm.MultiViewRKM`.

    Examples
    --------
    >>> import numpy as np
    >>> from rkm import GenRKM
    >>> rng = np.random.default_rng(0)
    >>> labels = rng.integers(0, 2, 60)
    >>> images = rng.normal(size=(60, 5)) + 3.0 * labels[:, None]
    >>> model = GenRKM(4, gamma=(0.1, None), n_mixture=2, random_state=0).fit([images, np.eye(2)[labels]])
    >>> generated_images, generated_labels = model.sample(3, random_state=0)
    >>> generated_images.shape, generated_labels.shape
    ((3, 5), (3, 2))
    """

    _parameter_constraints: dict = {
        **MultiViewRKM._parameter_constraints,
        **GENERATION_CONSTRAINTS,
    }

    def __init__(
        self,
        n_components: int,
        *,
        kernel=("rbf", "linear"),
        gamma: float | None | list | tuple = None,
        degree: float | list | tuple = 3,
        coef0: float | list | tuple = 1.0,
        eta: float | list | tuple = 1.0,
        solver: str = "auto",
        rotate: bool = True,
        rescale: bool = True,
        stiefel_method: str = "cayley_bb",
        max_iter: int | None = None,
        tol: float | None = None,
        preimage: str | list | tuple = "auto",
        n_neighbors: int = 4,
        preimage_alpha: float = 1.0,
        preimage_max_iter: int = 100,
        n_mixture: int = 10,
        covariance_type: str = "full",
        label_views: list | tuple = (),
        view_columns=None,
        n_threads: int | None = None,
        random_state=None,
        device: str = "cpu",
        verbose: int = 0,
    ):
        super().__init__(
            n_components,
            kernel=kernel,
            gamma=gamma,
            degree=degree,
            coef0=coef0,
            eta=eta,
            solver=solver,
            rotate=rotate,
            rescale=rescale,
            stiefel_method=stiefel_method,
            max_iter=max_iter,
            tol=tol,
            preimage=preimage,
            n_neighbors=n_neighbors,
            preimage_alpha=preimage_alpha,
            preimage_max_iter=preimage_max_iter,
            view_columns=view_columns,
            n_threads=n_threads,
            random_state=random_state,
            device=device,
            verbose=verbose,
        )
        self.n_mixture = n_mixture
        self.covariance_type = covariance_type
        self.label_views = label_views

    # ------------------------------------------------------------------ fitting

    def _check_params_vs_input(self, arrays):
        """MultiViewRKM's rules, then: n_neighbors and n_mixture at most n_samples, and label views that are
        labels (a positive entry in every row)."""
        sources = super()._check_params_vs_input(arrays)
        n_samples = arrays[0].shape[0]
        for name in ("n_neighbors", "n_mixture"):
            if getattr(self, name) > n_samples:
                raise ValueError(f"{name}: must be at most n_samples = {n_samples}, got {getattr(self, name)}")
        check_label_views(self.label_views, arrays)
        return sources

    # partial_fit's deferred solve also fits the mixture (on the reservoir's latents).
    _deferred_attributes = (*MultiViewRKM._deferred_attributes, "mixture_", "latent_scale_")

    def _finish_fit(self, views):
        super()._finish_fit(views)
        self._fit_mixture(self.H_)

    def _check_batch(self, arrays):
        check_label_views(self.label_views, arrays)

    # ------------------------------------------------------------------ generation

    def decode(self, latents: ArrayLike) -> list[np.ndarray]:
        """Every view generated from latents h* (eqs. 5-8): the pre-image of each view's generated features.

        Parameters
        ----------
        latents : array-like of shape (n, n_components), or (n_components,) for one latent

        Returns
        -------
        list of ndarray, one (n, p_v) array per view
        """
        check_is_fitted(self)
        latents = self._check_latents(latents)
        return [self._preimage(latents, view) for view in self._views]

    def _block_rows(self):
        """Latents decoded at once by sample: the smoother's similarities of a block stay within its budget."""
        return max(1, ROW_BLOCK_BYTES // (8 * self.H_.shape[0]))
