"""A trained PyTorch module as an explicit feature map: neural features for rkm's models.

:class:`FeatureMap` wraps a ``torch.nn.Module`` phi as a scikit-learn transformer x -> phi(x), flattened to one
row per sample. It derives from :class:`rkm.features.ExplicitFeatureMap`, the base of rkm's Nyström and random
Fourier features, so every model that takes an explicit feature map takes a network too, and streams its
features a block of rows at a time: ``KernelPCA(feature_map=...)`` (the primal problem of the kernel
k(x, y) = phi(x)^T phi(y), also on Dask arrays), ``LSSVMRegressor(solver="primal", feature_map=...)``, and a
``kernel=`` entry of ``MultiViewRKM`` or ``GenRKM``.

The map is fixed: ``fit`` does not train the module. It takes a snapshot of it (a copy in evaluation mode, on
``device`` in the model's dtype) and runs it once on X's first rows to learn the output width; ``transform``
runs the snapshot under ``torch.no_grad`` in batches of rows. The caller's module is never changed: not its
weights, its train/eval mode, its ``requires_grad`` flags nor its device.
"""

from __future__ import annotations

import copy
import itertools
import math
import numbers

import numpy as np
import torch

from rkm._utils.validation import COUNT
from rkm.features import ExplicitFeatureMap

__all__ = ["FeatureMap"]

# Rows of X that fit runs through the module: two, so that a module whose output does not have one row per
# sample (a reduction or a broadcast over the batch) is caught by its leading dimension.
PROBE_ROWS = 2
_NUMPY_DTYPES = {torch.float32: np.dtype(np.float32), torch.float64: np.dtype(np.float64)}
_TORCH_DTYPES = {value: key for key, value in _NUMPY_DTYPES.items()}


class FeatureMap(ExplicitFeatureMap):
    """A trained ``torch.nn.Module`` phi as a fixed feature map x -> phi(x) (a scikit-learn transformer).

    Each row of X is reshaped to ``input_shape`` (when given) and run through the module; its output is
    flattened to one row of features. Inner products of the features define the kernel
    k(x, y) = phi(x)^T phi(y) that rkm's models then use in the primal: pass the map as
    ``KernelPCA(feature_map=...)``, ``LSSVMRegressor(solver="primal", feature_map=...)`` or as a ``kernel=``
    entry of ``MultiViewRKM`` and ``GenRKM``. Their results equal those of the same model on the precomputed
    features phi(X) with the linear kernel, without forming phi(X) for all rows at once.

    The map is fixed: nothing here trains the module. ``fit`` takes a snapshot of it, a deep copy in evaluation
    mode (dropout off, batch normalisation on its running statistics) with ``requires_grad`` off, moved to
    ``device`` and converted to the model's dtype, and runs it on X's first two rows to learn the output shape.
    ``transform`` runs the snapshot under ``torch.no_grad`` in batches of ``batch_size`` rows. The caller's
    module is not changed in any way (weights, train/eval mode, ``requires_grad``, device); training it further
    does not change a fitted map, refitting takes the new weights. The snapshot doubles the memory of the
    weights while the map is fitted.

    Parameters
    ----------
    module : torch.nn.Module
        The network phi. It receives a floating-point tensor of shape ``(batch, n_features)``, or
        ``(batch, *input_shape)``, and must return one tensor whose first dimension is the batch.
    input_shape : tuple of int, default=None
        Shape of one sample as the module expects it, e.g. ``(1, 28, 28)`` for a CNN on flattened 28 x 28
        images; its product must equal n_features. None: rows are passed as they are.
    batch_size : int, default=1024
        Rows per forward pass (bounds the memory of the module's activations).
    device : str or torch.device, default="cpu"
        Where the module runs ("cpu", "cuda", "cuda:1", ...). Inputs and outputs are NumPy arrays on the CPU.
    dtype : {None, "float32", "float64"} or a torch/NumPy float dtype, default=None
        The dtype the module computes in (the model's dtype). None: that of the module's floating-point
        parameters and buffers; for a module without any, that of the training data, as for
        :mod:`rkm.features`' maps.

    Attributes
    ----------
    module_ : torch.nn.Module
        The snapshot the map runs: a copy of ``module`` in eval mode, on ``device_``, in ``dtype_``.
    n_components_ : int
        Number of features: the product of ``output_shape_``.
    output_shape_ : tuple of int
        Shape of the module's output for one sample (before flattening).
    input_shape_ : tuple of int
        Shape each sample is given to the module in: ``input_shape``, or (n_features,).
    dtype_ : numpy.dtype
        float32 or float64: the dtype the module computes in. ``transform`` returns float32 when both this and X
        are float32, float64 otherwise.
    device_ : torch.device
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Defined when X has feature names that are all strings.

    Examples
    --------
    >>> import numpy as np
    >>> import torch
    >>> from rkm import KernelPCA
    >>> from rkm.torch import FeatureMap
    >>> _ = torch.manual_seed(0)
    >>> net = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.Tanh(), torch.nn.Linear(16, 8))
    >>> X = np.random.default_rng(0).standard_normal((100, 4))
    >>> FeatureMap(net).fit_transform(X).shape
    (100, 8)
    >>> KernelPCA(3, feature_map=FeatureMap(net)).fit_transform(X).shape
    (100, 3)

    A CNN on flattened 8 x 8 images (its output, 4 channels of 4 x 4, is flattened to 64 features):

    >>> cnn = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2))
    >>> fm = FeatureMap(cnn, input_shape=(1, 8, 8)).fit(np.zeros((5, 64)))
    >>> fm.output_shape_, fm.n_components_
    ((4, 4, 4), 64)
    """

    _parameter_constraints: dict = {
        "module": [torch.nn.Module],
        "input_shape": [None, tuple, list],
        "batch_size": COUNT,
        "device": [str, torch.device],
        "dtype": [None, str, torch.dtype, type, np.dtype],
    }

    # The base's fit protocol seeds its row draw with random_state, and rkm's streamed moments size their BLAS
    # threads by n_threads: the map draws nothing (fit reads X's first rows) and leaves threads to the defaults
    # (torch's own threads run the module).
    random_state = None
    n_threads = None

    def __init__(
        self,
        module: torch.nn.Module,
        *,
        input_shape: tuple[int, ...] | None = None,
        batch_size: int = 1024,
        device: str | torch.device = "cpu",
        dtype: str | torch.dtype | None = None,
    ):
        self.module = module
        self.input_shape = input_shape
        self.batch_size = batch_size
        self.device = device
        self.dtype = dtype

    # ------------------------------------------------------------------ parameters

    def _check_params_vs_input(self, n_samples):
        """The parameter rules beyond the constraints (input_shape's entries, device, dtype), before any pass."""
        self._checked_input_shape()
        self._torch_device()
        self._requested_dtype()

    def _checked_input_shape(self):
        if self.input_shape is None:
            return None
        shape = tuple(self.input_shape)
        if not shape or not all(isinstance(n, numbers.Integral) and not isinstance(n, bool) and n >= 1 for n in shape):
            raise ValueError(f"input_shape: must be a non-empty tuple of positive ints, got {self.input_shape!r}")
        return tuple(int(n) for n in shape)

    def _torch_device(self):
        try:
            return torch.device(self.device)
        except (RuntimeError, TypeError, ValueError) as error:
            raise ValueError(f"device: not a torch device: {self.device!r} ({error})") from None

    def _requested_dtype(self):
        """The torch dtype asked for by ``dtype`` (None when not given)."""
        if self.dtype is None:
            return None
        if isinstance(self.dtype, torch.dtype):
            resolved = self.dtype
        else:
            try:
                resolved = _TORCH_DTYPES.get(np.dtype(self.dtype))
            except TypeError:
                resolved = None
        if resolved not in _NUMPY_DTYPES:
            raise ValueError(
                f"dtype: must be None, 'float32' or 'float64' (or the torch or NumPy type), got {self.dtype!r}"
            )
        return resolved

    def _model_torch_dtype(self, data_dtype):
        """dtype, else the module's floating-point dtype, else the training data's."""
        requested = self._requested_dtype()
        if requested is not None:
            return requested
        own = _module_float_dtype(self.module)
        if own is None:
            return _TORCH_DTYPES[np.dtype(data_dtype)]
        if own not in _NUMPY_DTYPES:
            raise ValueError(
                f"dtype: the module computes in {own}, but rkm's models work in float32 or float64; pass "
                "dtype='float32' to run a converted copy"
            )
        return own

    # ------------------------------------------------------------------ fit

    def _draw_sample(self, rng, n_samples):
        return np.arange(min(n_samples, PROBE_ROWS), dtype=np.int64)

    def _fit_from_sample(self, X_sample, rng, indices, n_features):
        input_shape = self._checked_input_shape()
        if input_shape is not None and math.prod(input_shape) != n_features:
            raise ValueError(
                f"input_shape: {input_shape} holds {math.prod(input_shape)} values per sample, but X has "
                f"{n_features} features"
            )
        torch_dtype = self._model_torch_dtype(X_sample.dtype)
        device = self._torch_device()
        self.module_ = _snapshot(self.module, device, torch_dtype)
        self.device_ = device
        self.dtype_ = _NUMPY_DTYPES[torch_dtype]
        self.input_shape_ = input_shape or (n_features,)
        with torch.no_grad():
            outputs = self._forward(X_sample.astype(self.dtype_, copy=False))
        self.output_shape_ = tuple(outputs.shape[1:])
        self.n_components_ = math.prod(self.output_shape_)
        if self.n_components_ == 0:
            raise ValueError(f"module: returns no features (output shape per sample {self.output_shape_})")

    # ------------------------------------------------------------------ transform

    def _forward(self, X):
        """The module's outputs (rows, *output shape) for a block of rows X (NumPy, the model's dtype)."""
        # A copy: the module may work in place on its input (e.g. ReLU(inplace=True) first), and X may be the
        # caller's (possibly read-only) array.
        inputs = torch.tensor(X, device=self.device_).reshape(X.shape[0], *self.input_shape_)
        self.module_.eval()  # the snapshot stays in evaluation mode whatever is done to module_
        try:
            outputs = self.module_(inputs)
        except Exception as error:  # the module's own error (shapes, dtypes), reported as the module's
            raise ValueError(
                f"module: failed on a batch of shape {tuple(inputs.shape)} ({inputs.dtype}, {inputs.device}): "
                f"{type(error).__name__}: {error}"
            ) from error
        if not isinstance(outputs, torch.Tensor) or outputs.ndim == 0 or outputs.shape[0] != X.shape[0]:
            got = tuple(outputs.shape) if isinstance(outputs, torch.Tensor) else type(outputs).__name__
            raise ValueError(f"module: must return one tensor with a row per sample (batch of {X.shape[0]}), got {got}")
        if outputs.is_complex():
            raise ValueError(f"module: must return real numbers, got {outputs.dtype}")
        return outputs

    def _transform_block(self, X):
        Phi = np.empty((X.shape[0], self.n_components_), dtype=self.dtype_)
        torch_dtype = _TORCH_DTYPES[self.dtype_]
        with torch.no_grad():
            for start in range(0, X.shape[0], self.batch_size):
                rows = slice(start, min(start + self.batch_size, X.shape[0]))
                outputs = self._forward(X[rows])
                if tuple(outputs.shape[1:]) != self.output_shape_:
                    raise ValueError(
                        f"module: returned samples of shape {tuple(outputs.shape[1:])}, but {self.output_shape_} "
                        "when fitted"
                    )
                Phi[rows] = outputs.reshape(outputs.shape[0], -1).to(device="cpu", dtype=torch_dtype).numpy()
        if not np.all(np.isfinite(Phi)):
            raise ValueError("module: returned NaN or infinity for some rows of X")
        return Phi

    # The features are the module's outputs themselves: no linear map follows (rkm._utils.primal streams
    # _raw_block @ _linear_map).
    _raw_block = _transform_block
    _linear_map = None

    @property
    def _model_dtype(self):
        return self.dtype_

    @property
    def _n_features_out(self):
        return self.n_components_

    @property
    def _row_bytes(self):
        return self.dtype_.itemsize * (self.n_features_in_ + self.n_components_)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # float32 X stays float32 unless the module computes in float64.
        try:
            float64 = self._model_torch_dtype(np.float32) == torch.float64
        except (AttributeError, ValueError):
            float64 = False
        tags.transformer_tags.preserves_dtype = ["float64"] if float64 else ["float64", "float32"]
        return tags


def _module_float_dtype(module):
    """The dtype of the module's first floating-point parameter or buffer; None without any."""
    for tensor in itertools.chain(module.parameters(), module.buffers()):
        if tensor.is_floating_point():
            return tensor.dtype
    return None


def _snapshot(module, device, dtype):
    """A frozen copy of module: on device, its floating-point tensors in dtype, eval mode, no gradients."""
    snapshot = copy.deepcopy(module)
    try:
        snapshot.to(device=device, dtype=dtype)
    except (RuntimeError, AssertionError) as error:  # an unavailable device (torch asserts for CUDA)
        raise ValueError(f"device: cannot move the module to {device}: {error}") from error
    snapshot.eval()
    for parameter in snapshot.parameters():
        parameter.grad = None  # a copied gradient would only hold memory
    snapshot.requires_grad_(False)
    return snapshot
