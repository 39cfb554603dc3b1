"""Generation from a latent space, shared by the generative models (:class:`rkm.GenRKM`, and in
:mod:`rkm.torch` the explicit Gen-RKM and the VAE baselines): sampling latents from a Gaussian mixture (Gen-RKM
section 5) or a prior, walks along one component (Fig. 5), bilinear interpolation (Appendix A.6) and label views.

NumPy only: the torch models decode with their networks but share these steps.
"""

from __future__ import annotations

import copy
import numbers
from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike
from sklearn.mixture import GaussianMixture
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

COVARIANCE_TYPES = ("full", "tied", "diag", "spherical")

# The constraints of the mixin's parameters, for a host's _parameter_constraints.
GENERATION_CONSTRAINTS: dict = {
    "n_mixture": [Interval(numbers.Integral, 1, None, closed="left")],
    "covariance_type": [StrOptions(set(COVARIANCE_TYPES))],
    "label_views": [list, tuple],
}


def check_label_views(label_views, arrays):
    """The view indices of ``label_views`` (checked against the number of views), after checking that every row
    of each label view has a positive entry (one-hot or multi-hot labels)."""
    n_views = len(arrays)
    indices = list(label_views)
    for index in indices:
        if not isinstance(index, numbers.Integral) or isinstance(index, bool) or not 0 <= index < n_views:
            raise ValueError(f"label_views: must hold view indices in [0, {n_views}), got {label_views!r}")
    if len(set(indices)) != len(indices):
        raise ValueError(f"label_views: must hold distinct view indices, got {label_views!r}")
    for index in indices:
        X = arrays[index]
        largest = X.max(axis=1).toarray().ravel() if hasattr(X, "toarray") else np.asarray(X).max(axis=1)
        rows = np.flatnonzero(largest <= 0)
        if rows.size:
            raise ValueError(
                f"views[{index}]: a label view (label_views) needs a positive entry in every row (one-hot or "
                f"multi-hot labels), but {rows.size} row(s) have none (the first: row {rows[0]})"
            )
    return [int(index) for index in indices]


class LatentGenerationMixin:
    """sample, reconstruct, traverse and interpolate for a fitted model with latents of ``n_components``.

    The host defines ``decode(latents) -> list of (n, p_v) arrays``, ``transform(views)``, ``input_dims_`` (the
    views' widths), ``_block_rows()`` (latents decoded at once by ``sample``) and ``_progress(message)``; for
    the mixture, the parameters ``n_mixture``, ``covariance_type``, ``random_state`` and the training latents
    passed to ``_fit_mixture``. A host with a prior instead overrides ``_draw``.
    """

    def _fit_mixture(self, latents):
        """The Gaussian mixture of section 5 on the training latents, scaled to unit mean variance (scikit-learn's
        ``reg_covar`` is absolute, while kernel PCA latents have variance 1 / n_samples)."""
        self.latent_scale_ = 1.0 / float(np.sqrt(np.mean(latents**2)))
        seed = check_random_state(self.random_state).randint(np.iinfo(np.int32).max)
        self.mixture_ = GaussianMixture(self.n_mixture, covariance_type=self.covariance_type, random_state=seed)
        self.mixture_.fit(latents * self.latent_scale_)
        self._progress(f"Gaussian mixture of {self.n_mixture} components on the latents")

    def _check_latents(self, latents, name="latents"):
        latents = np.asarray(latents)
        if latents.ndim == 1:
            latents = latents[None, :]
        if latents.dtype.kind not in "biuf":
            raise ValueError(f"{name}: must be an array of real numbers, got dtype {latents.dtype}")
        if latents.ndim != 2 or latents.shape[1] != self.n_components:
            raise ValueError(
                f"{name}: must have n_components = {self.n_components} columns (one latent per row), got shape "
                f"{latents.shape}"
            )
        if not np.all(np.isfinite(latents)):
            raise ValueError(f"{name}: contains NaN or infinity")
        return np.ascontiguousarray(latents, dtype=np.float64)

    def reconstruct(self, views: Sequence[ArrayLike] | ArrayLike) -> list[np.ndarray]:
        """Every view of points decoded from their latents: ``decode(transform(views))``. Where the model's
        ``transform`` takes missing views (None; :class:`rkm.GenRKM`), their latents are inferred from the
        others, so that e.g. an image is generated from a label alone.

        Parameters
        ----------
        views : list or tuple of array-like, or one array (as ``transform`` takes them)

        Returns
        -------
        list of ndarray, one (n, p_v) array per view
        """
        return self.decode(self.transform(views))

    def sample(
        self, n_samples: int = 1, random_state=None, *, return_latents: bool = False
    ) -> list[np.ndarray] | tuple[list[np.ndarray], np.ndarray]:
        """Generate new points: latents drawn from the fitted Gaussian mixture, decoded into every view.

        Latents are drawn and decoded in blocks, so memory stays bounded by the outputs whatever n_samples.

        Parameters
        ----------
        n_samples : int, default=1
        random_state : int, RandomState or None, default=None
            Seeds the draws (None: NumPy's global random state, so that repeated calls differ).
        return_latents : bool, default=False
            Also return the latents drawn.

        Returns
        -------
        views : list of ndarray, one (n_samples, p_v) array per view
        latents : ndarray of shape (n_samples, n_components)
            Only with ``return_latents``.
        """
        check_is_fitted(self)
        if not isinstance(n_samples, numbers.Integral) or isinstance(n_samples, bool) or n_samples < 1:
            raise ValueError(f"n_samples: must be a positive int, got {n_samples!r}")
        rng = check_random_state(random_state)
        outputs = [np.empty((n_samples, dim)) for dim in self.input_dims_]
        latents = np.empty((n_samples, self.n_components)) if return_latents else None
        step = self._block_rows()
        for start in range(0, n_samples, step):
            stop = min(start + step, n_samples)
            block = self._draw(stop - start, rng)
            for output, generated in zip(outputs, self.decode(block), strict=True):
                output[start:stop] = generated
            if return_latents:
                latents[start:stop] = block
        return (outputs, latents) if return_latents else outputs

    def _draw(self, n, rng):
        """n latents from the mixture, in random order (GaussianMixture.sample groups them by component)."""
        mixture = copy.copy(self.mixture_)
        mixture.random_state = rng
        Z, _ = mixture.sample(n)
        return Z[rng.permutation(n)] / self.latent_scale_

    def traverse(self, component: int, values: ArrayLike, start: ArrayLike | None = None) -> list[np.ndarray]:
        """Walk along one component of the latent space (Fig. 5): decode start + v e_component for each v.

        Parameters
        ----------
        component : int
            The component walked, in [0, n_components).
        values : array-like of shape (n_steps,)
            Displacements along the component, in the units of the training latents.
        start : array-like of shape (n_components,) or None, default=None
            The latent the walk starts from (None: the origin).

        Returns
        -------
        list of ndarray, one (n_steps, p_v) array per view
        """
        check_is_fitted(self)
        s = self.n_components
        if not isinstance(component, numbers.Integral) or isinstance(component, bool) or not 0 <= component < s:
            raise ValueError(f"component: must be an int in [0, {s}), got {component!r}")
        values = np.asarray(values, dtype=np.float64) if _is_real_array(values) else values
        if not isinstance(values, np.ndarray) or values.ndim != 1 or values.size == 0:
            raise ValueError(f"values: must be a non-empty 1-D array of numbers, got {values!r:.80}")
        if not np.all(np.isfinite(values)):
            raise ValueError("values: contains NaN or infinity")
        origin = np.zeros(s) if start is None else self._check_latents(start, "start")
        if origin.ndim == 2 and origin.shape[0] != 1:
            raise ValueError(f"start: must be one latent of shape ({s},), got shape {origin.shape}")
        latents = np.repeat(origin.reshape(1, s), values.size, axis=0)
        latents[:, component] += values
        return self.decode(latents)

    def interpolate(self, corners: ArrayLike, n_steps: int) -> list[np.ndarray]:
        """Bilinear interpolation between four latents (Appendix A.6), decoded into every view.

        h* = (1 - a)(1 - c) h_1 + a (1 - c) h_2 + c (1 - a) h_3 + a c h_4 for a, c on n_steps equal steps of
        [0, 1] (the paper's alpha and gamma).

        Parameters
        ----------
        corners : array-like of shape (4, n_components)
            h_1 to h_4: h_1 at a = c = 0, h_2 at a = 1, h_3 at c = 1, h_4 at a = c = 1.
        n_steps : int
            Steps per side (>= 2).

        Returns
        -------
        list of ndarray, one (n_steps**2, p_v) array per view; row i * n_steps + j has c = i / (n_steps - 1) and
        a = j / (n_steps - 1), so reshaping to (n_steps, n_steps, p_v) gives the grid.
        """
        check_is_fitted(self)
        corners = self._check_latents(corners, "corners")
        if corners.shape[0] != 4:
            raise ValueError(f"corners: must hold 4 latents (rows), got {corners.shape[0]}")
        if not isinstance(n_steps, numbers.Integral) or isinstance(n_steps, bool) or n_steps < 2:
            raise ValueError(f"n_steps: must be an int >= 2, got {n_steps!r}")
        t = np.linspace(0.0, 1.0, n_steps)
        c, a = (grid.ravel() for grid in np.meshgrid(t, t, indexing="ij"))
        weights = np.stack([(1 - a) * (1 - c), a * (1 - c), c * (1 - a), a * c], axis=1)
        return self.decode(weights @ corners)


def _is_real_array(values):
    try:
        return np.asarray(values).dtype.kind in "biuf"
    except (TypeError, ValueError):
        return False
