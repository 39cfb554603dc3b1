"""What the network models of rkm.torch share: views, networks, the Adam mini-batch loop, save and load.

The loop (``_NetworkModel.fit``) shuffles with a seeded generator, builds the networks under a seeded torch
RNG without touching the global one, prints progress per epoch (``verbose``), stops on Ctrl-C between batches
(keeping the weights of the last finished batch, with a warning), raises :class:`rkm.exceptions.DivergenceError`
with the last finite weights restored when the loss stops being finite, and stops early when the epoch loss has
not improved by ``tol`` (relative) for ``n_iter_no_change`` epochs, as scikit-learn's MLPs do.
"""

from __future__ import annotations

import copy
import numbers
from collections.abc import Sequence
from contextlib import contextmanager

import numpy as np
import torch
from numpy.typing import ArrayLike
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin, _fit_context
from sklearn.utils import check_array, check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted, validate_data
from torch import nn

from rkm._utils.exceptions import DivergenceError
from rkm._utils.generation import LatentGenerationMixin, check_label_views
from rkm._utils.progress import Progress
from rkm._utils.threads import thread_count
from rkm._utils.validation import N_THREADS, POSITIVE, POSITIVE_INT, RANDOM_STATE, VERBOSE, is_view_list
from rkm._utils.warn import warn
from rkm.exceptions import ConvergenceWarning
from rkm.torch.networks import default_networks

# Rows pushed through the networks at once outside training (transform, decode, the final pass).
INFERENCE_ROWS = 1024
DTYPES = {"float32": torch.float32, "float64": torch.float64}
FLOAT_TYPES = [np.float64, np.float32]
SAVE_FORMAT = 1


class _NetworkModel(LatentGenerationMixin, ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Views in, per-view feature networks phi_v and pre-image networks psi_v, trained with Adam on mini-batches.

    Subclasses define ``_build_heads(widths)`` (modules between the features and the latents, or none),
    ``_batch_loss(batch) -> (loss, {term: value})``, ``_finish(tensors)`` (the fitted latent model),
    ``_encode(tensors) -> latents`` and ``_features_from_latents(latents) -> list of feature tensors``.
    """

    _parameter_constraints: dict = {
        "n_components": POSITIVE_INT,
        "feature_networks": [StrOptions({"auto"}), list, tuple],
        "preimage_networks": [StrOptions({"auto"}), list, tuple],
        "image_shapes": [None, list, tuple],
        "label_views": [list, tuple],
        "learning_rate": POSITIVE,
        "batch_size": [Interval(numbers.Integral, 2, None, closed="left")],
        "max_epochs": POSITIVE_INT,
        "tol": [Interval(numbers.Real, 0, None, closed="left")],
        "n_iter_no_change": POSITIVE_INT,
        "device": [str, torch.device],
        "dtype": [StrOptions(set(DTYPES))],
        "n_threads": N_THREADS,
        "random_state": RANDOM_STATE,
        "verbose": VERBOSE,
    }

    # ------------------------------------------------------------------ fitting

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, views: Sequence[ArrayLike] | ArrayLike, y: None = None):
        """Train the networks (and the latent model) on the training views.

        Parameters
        ----------
        views : list or tuple of array-like of shape (n_samples, p_v), or one array (a single view)
            Flat rows; image views hold the pixels of each image (reshaped inside the networks).
        y : ignored

        Returns
        -------
        self
        """
        arrays = self._check_views(views, reset=True)
        self._check_params_vs_input(arrays)
        rng = check_random_state(self.random_state)
        seed = int(rng.randint(np.iinfo(np.int32).max))
        self.device_, self.dtype_ = torch.device(self.device), DTYPES[self.dtype]
        self._progress = Progress(type(self).__name__, self.verbose)
        with _threads(self.n_threads), _seeded(seed, self.device_):
            self._build(arrays)
            tensors = [self._tensor(X) for X in arrays]
            self._train(tensors, torch.Generator().manual_seed(seed))
            self._set_mode(train=False)
            with torch.no_grad():
                self._finish(tensors)
        return self

    def _check_params_vs_input(self, arrays):
        """Rules that need the data: batch and latent sizes, label views, one network per view."""
        n_samples = arrays[0].shape[0]
        if self.n_components >= n_samples:
            raise ValueError(f"n_components: must be below n_samples = {n_samples}, got {self.n_components}")
        if self.n_components >= min(self.batch_size, n_samples):
            raise ValueError(
                f"batch_size: a batch must hold more points than n_components = {self.n_components}, got "
                f"{min(self.batch_size, n_samples)}"
            )
        self.label_views_ = check_label_views(self.label_views, arrays)
        for name in ("feature_networks", "preimage_networks", "image_shapes"):
            value = getattr(self, name)
            if not isinstance(value, str) and value is not None and len(value) != len(arrays):
                raise ValueError(f"{name}: must have one entry per view ({len(arrays)}), got {len(value)}")

    def _build(self, arrays):
        """The fitted networks: copies of the user's modules (never trained in place) or Table 3's defaults (a
        default pre-image network takes the width of the view's feature network)."""
        encoders, decoders, widths = [], [], []
        for index, X in enumerate(arrays):
            options = {
                "image_shape": None if self.image_shapes is None else self.image_shapes[index],
                "label": index in self.label_views_,
            }
            encoder = self._network("feature_networks", index, lambda: default_networks(X.shape[1], **options)[0])
            encoder = encoder.to(self.device_, self.dtype_)
            with torch.no_grad():
                widths.append(self._checked_features(encoder, self._tensor(X[:2]), index))
            decoder = self._network(
                "preimage_networks",
                index,
                lambda: default_networks(X.shape[1], **options, n_features=widths[-1])[1],  # noqa: B023
            )
            encoders.append(encoder)
            decoders.append(decoder.to(self.device_, self.dtype_))
        self.feature_networks_, self.preimage_networks_ = nn.ModuleList(encoders), nn.ModuleList(decoders)
        self.feature_widths_ = widths
        self._build_heads(widths)
        self._check_preimage_shapes([self._tensor(X[:2]) for X in arrays], widths)

    def _network(self, name, index, default):
        """The user's module for this view (a copy), or ``default()`` for "auto"."""
        given = getattr(self, name)
        entry = "auto" if isinstance(given, str) else given[index]
        if isinstance(entry, str) and entry == "auto":
            return default()
        if not isinstance(entry, nn.Module):
            raise TypeError(f"{name}[{index}]: must be a torch.nn.Module or 'auto', got {type(entry).__name__}")
        return copy.deepcopy(entry)

    def _checked_features(self, network, x, index):
        out = network(x)
        if out.ndim != 2 or out.shape[0] != x.shape[0]:
            raise ValueError(
                f"feature_networks[{index}]: must map (n, {x.shape[1]}) rows to (n, width) features, got "
                f"{tuple(out.shape)}"
            )
        return int(out.shape[1])

    def _check_preimage_shapes(self, probe, widths):
        with torch.no_grad():
            for index, (net, x, width) in enumerate(zip(self.preimage_networks_, probe, widths, strict=True)):
                out = net(torch.zeros(x.shape[0], width, dtype=self.dtype_, device=self.device_))
                if tuple(out.shape) != tuple(x.shape):
                    raise ValueError(
                        f"preimage_networks[{index}]: must map (n, {width}) features to (n, {x.shape[1]}) rows, got "
                        f"{tuple(out.shape)}"
                    )

    def _train(self, tensors, generator):
        """Adam on mini-batches for up to max_epochs, with the stops of the module docstring."""
        optimizer = torch.optim.Adam(self._trained_parameters(), lr=self.learning_rate)
        self.objective_history_, self.term_history_ = [], {}
        snapshot, best, stale, epoch = self._state(), np.inf, 0, 0
        self._set_mode(train=True)
        try:
            for epoch in range(1, self.max_epochs + 1):
                totals = self._epoch(tensors, optimizer, generator, snapshot, epoch)
                snapshot = self._state()
                self._record(totals, epoch)
                loss = totals["objective"]
                stale = stale + 1 if loss > best - self.tol * abs(best) else 0
                best = min(best, loss)
                if stale >= self.n_iter_no_change:
                    self._progress(f"stopped: no relative improvement of {self.tol:g} for {stale} epochs")
                    break
            else:
                warn(
                    f"{type(self).__name__}: max_epochs = {self.max_epochs} reached before the loss stopped improving "
                    f"(by tol = {self.tol:g} within n_iter_no_change = {self.n_iter_no_change} epochs); raise "
                    "max_epochs for a converged fit",
                    ConvergenceWarning,
                )
        except KeyboardInterrupt:
            warn(
                f"{type(self).__name__}: interrupted during epoch {epoch}; keeping the weights of the last finished "
                "batch",
                RuntimeWarning,
            )
            epoch -= 1
        self.n_iter_ = max(epoch, 0)

    def _epoch(self, tensors, optimizer, generator, snapshot, epoch):
        order = torch.randperm(tensors[0].shape[0], generator=generator)
        totals: dict[str, float] = {}
        for batch_index, rows in enumerate(self._batches(order)):
            rows = rows.to(self.device_)
            loss, terms = self._batch_loss([t[rows] for t in tensors])
            if not bool(torch.isfinite(loss)):
                self._load_state(snapshot)
                raise DivergenceError(
                    f"{type(self).__name__}: the loss became {float(loss)} in epoch {epoch}, batch {batch_index}; "
                    "the weights of the last finished epoch are kept. Lower learning_rate or check the data's scale.",
                    fun=float(loss),
                    nit=epoch - 1,
                )
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            for name, value in {"objective": loss.item(), **terms}.items():
                totals[name] = totals.get(name, 0.0) + value * rows.numel()
        return {name: total / tensors[0].shape[0] for name, total in totals.items()}

    def _batches(self, order):
        """Mini-batches of batch_size rows; a last batch too small for the latent step joins the one before."""
        batches = list(torch.split(order, self.batch_size))
        if len(batches) > 1 and batches[-1].numel() <= self.n_components:
            batches[-2:] = [torch.cat(batches[-2:])]
        return batches

    def _record(self, totals, epoch):
        self.objective_history_.append(totals["objective"])
        for name, value in totals.items():
            if name != "objective":
                self.term_history_.setdefault(name, []).append(value)
        terms = ", ".join(f"{name} {value:.4g}" for name, value in totals.items() if name != "objective")
        self._progress(f"epoch {epoch}: loss {totals['objective']:.6g} ({terms})")

    # ------------------------------------------------------------------ state

    def _modules(self):
        """The trained modules by attribute name (the subclass adds its heads)."""
        return {"feature_networks_": self.feature_networks_, "preimage_networks_": self.preimage_networks_}

    def _trained_parameters(self):
        return [p for module in self._modules().values() for p in module.parameters()]

    def _set_mode(self, train):
        for module in self._modules().values():
            module.train(train)

    def _state(self):
        return {name: copy.deepcopy(module.state_dict()) for name, module in self._modules().items()}

    def _load_state(self, state):
        for name, module in self._modules().items():
            module.load_state_dict(state[name])

    # ------------------------------------------------------------------ inference

    def _check_views(self, views, reset=False):
        """Float arrays (n, p_v), one per view, with the same n; checked against the training widths.

        A list or tuple of arrays is a list of views (unless it is the rows of one 2-D array); anything else is
        one array, a single view, validated as scikit-learn does (``n_features_in_``, feature names).
        """
        min_samples = 2 if reset else 1
        if not is_view_list(views):
            if not reset and self.n_views_ != 1:
                raise ValueError(f"views: the model has {self.n_views_} views; pass a list of {self.n_views_} arrays")
            views = [validate_data(self, _numpy(views), dtype=FLOAT_TYPES, ensure_min_samples=min_samples, reset=reset)]
        arrays = [
            check_array(_numpy(X), dtype=FLOAT_TYPES, input_name=f"views[{index}]", ensure_min_samples=min_samples)
            for index, X in enumerate(views)
        ]
        if any(X.shape[0] != arrays[0].shape[0] for X in arrays):
            raise ValueError(f"views: must have the same number of rows, got {[X.shape[0] for X in arrays]}")
        widths = [X.shape[1] for X in arrays]
        if reset:
            self.n_views_, self.input_dims_, self.n_features_in_ = len(arrays), widths, sum(widths)
        elif widths != self.input_dims_:
            raise ValueError(f"views: must have the training widths {self.input_dims_}, got {widths}")
        return arrays

    def _tensor(self, X):
        return torch.as_tensor(np.asarray(X), dtype=self.dtype_, device=self.device_)

    def _blocks(self, n):
        return [slice(start, min(start + INFERENCE_ROWS, n)) for start in range(0, n, INFERENCE_ROWS)]

    def transform(self, views: Sequence[ArrayLike] | ArrayLike) -> np.ndarray:
        """The latents of points (one row per point).

        Parameters
        ----------
        views : list or tuple of array-like of shape (n, p_v), or one array

        Returns
        -------
        ndarray of shape (n, n_components)
        """
        check_is_fitted(self)
        arrays = self._check_views(views)
        out = np.empty((arrays[0].shape[0], self.n_components))
        with torch.no_grad(), _threads(self.n_threads):
            for rows in self._blocks(out.shape[0]):
                out[rows] = self._encode([self._tensor(X[rows]) for X in arrays]).cpu().double().numpy()
        return out

    def decode(self, latents: ArrayLike) -> list[np.ndarray]:
        """Every view generated from latents: the pre-image networks on the features the latents give.

        Parameters
        ----------
        latents : array-like of shape (n, n_components), or (n_components,) for one latent

        Returns
        -------
        list of ndarray, one (n, p_v) array per view
        """
        check_is_fitted(self)
        latents = self._check_latents(latents)
        outputs = [np.empty((latents.shape[0], dim)) for dim in self.input_dims_]
        with torch.no_grad(), _threads(self.n_threads):
            for rows in self._blocks(latents.shape[0]):
                features = self._features_from_latents(self._tensor(latents[rows]))
                for output, net, feature in zip(outputs, self.preimage_networks_, features, strict=True):
                    output[rows] = net(feature).cpu().double().numpy()
        return outputs

    def _block_rows(self):
        return INFERENCE_ROWS

    @property
    def _n_features_out(self):
        """The latents' width, for get_feature_names_out."""
        return self.n_components

    # ------------------------------------------------------------------ persistence

    def save(self, path) -> None:
        """Write the fitted model: parameters, state dicts of the networks and the fitted arrays (torch.save).

        The file is a pickle: load only files you trust (as with ``torch.load(weights_only=False)``).
        """
        check_is_fitted(self)
        fitted = {
            name: value
            for name, value in vars(self).items()
            if name.endswith("_") and not name.startswith("_") and name not in self._modules()
        }
        state = {name: module.state_dict() for name, module in self._modules().items()}
        params = self.get_params(deep=False)
        torch.save(
            {"format": SAVE_FORMAT, "class": type(self).__name__, "params": params, "fitted": fitted, "state": state},
            path,
        )

    @classmethod
    def load(cls, path, map_location=None):
        """A model written by :meth:`save` (of this class), its networks on ``map_location`` (default: as saved).

        The file is a pickle: load only files you trust.
        """
        saved = torch.load(path, map_location=map_location, weights_only=False)
        if not isinstance(saved, dict) or saved.get("format") != SAVE_FORMAT or saved.get("class") != cls.__name__:
            raise ValueError(f"path: not a {cls.__name__} written by {cls.__name__}.save")
        model = cls(**saved["params"])
        vars(model).update(saved["fitted"])
        if map_location is not None:
            model.device_ = torch.device(map_location)
        arrays = [np.zeros((2, dim)) for dim in model.input_dims_]
        model._progress = Progress(cls.__name__, 0)
        with _seeded(0, model.device_):
            model._build(arrays)
        model._load_state(saved["state"])
        model._set_mode(train=False)
        return model


def _numpy(X):
    """A torch tensor as a NumPy array (on the CPU), anything else unchanged."""
    return X.detach().cpu().numpy() if isinstance(X, torch.Tensor) else X


@contextmanager
def _seeded(seed, device):
    """torch's global generators seeded for the block (initialization, the VAE's noise) and restored after, so
    that a fit is reproducible without changing the caller's random stream."""
    devices = [device] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        yield


@contextmanager
def _threads(n_threads):
    """torch's intra-op threads set to n_threads for the block (rkm's convention: None unchanged, -1 all cores)."""
    count = thread_count(n_threads)
    if count is None:
        yield
        return
    previous = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(previous)
