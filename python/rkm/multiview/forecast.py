"""Recursive time-series forecasting with a two-view restricted kernel machine (Achten et al. 2023, section 5).

A nonlinear autoregressive model x_{t+1} = f(x_t, ..., x_{t-lag+1}) is learned as a :class:`rkm.MultiViewRKM`
of two views: the lagged window (input) and the next value (output). Forecasting infers the output view of the
last window (eq. 15 or 16), appends it to the series, and repeats.
"""

from __future__ import annotations

import numbers

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike
from sklearn.base import BaseEstimator, _fit_context
from sklearn.utils._param_validation import HasMethods, Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from rkm import stiefel
from rkm._utils.dask_arrays import is_dask_collection
from rkm._utils.progress import Progress
from rkm._utils.validation import (
    COUNT,
    MAX_ITER,
    N_THREADS,
    POSITIVE_INT,
    RANDOM_STATE,
    TOL,
    VERBOSE,
    check_int,
    kernel_constraints,
)
from rkm.kernels import Kernel, kernel_spec
from rkm.multiview.multiview_rkm import PREIMAGES, SOLVERS, VIEW_MAPS, MultiViewRKM

__all__ = ["RKMForecaster"]


def _check_series(series, name="series"):
    """The series as a finite float64 (T, n_series) array."""
    if sp.issparse(series):
        raise TypeError(f"{name}: sparse input is not supported: a time series is a dense 1-D or 2-D array")
    A = np.asarray(series)
    if A.dtype == object:
        try:
            A = A.astype(np.float64)
        except (TypeError, ValueError) as error:
            raise type(error)(f"{name}: {error}") from None
    if A.dtype.kind == "c":
        raise ValueError(f"{name}: Complex data not supported, got dtype {A.dtype}")
    if A.dtype.kind not in "biuf":
        raise ValueError(f"{name}: must be an array of real numbers, got dtype {A.dtype}")
    A = A.astype(np.float64, copy=False)
    if A.ndim == 2 and A.shape[0] > 0 and A.shape[1] == 0:
        raise ValueError(
            f"{name}: a 2-D series needs at least one column (series); found array with 0 feature(s) "
            f"(shape={A.shape}) while a minimum of 1 is required."
        )
    if A.ndim not in (1, 2) or A.size == 0:
        raise ValueError(f"{name}: must be a non-empty 1-D or 2-D array (time along axis 0), got shape {A.shape}")
    if not np.all(np.isfinite(A)):
        raise ValueError(f"{name}: contains NaN or infinity")
    return np.ascontiguousarray(A.reshape(A.shape[0], -1))


def _mean_and_std(values, ddof):
    """Per-column mean and standard deviation (divisor T - ddof), computed on the values divided by their largest
    magnitude so that neither the squares of huge values overflow nor those of tiny ones underflow."""
    magnitude = np.abs(values).max(axis=0)
    magnitude = np.where(magnitude > 0, magnitude, 1.0)
    scaled = values / magnitude
    return scaled.mean(axis=0) * magnitude, scaled.std(axis=0, ddof=ddof) * magnitude


def _lagged_pairs(series, lag):
    """Windows [x_{t-lag+1}, ..., x_t] (flattened, oldest first) and targets x_{t+1} of a (T, m) series.

    Returns
    -------
    windows : ndarray of shape (T - lag, lag * m)
    targets : ndarray of shape (T - lag, m)
    """
    T, m = series.shape
    windows = np.lib.stride_tricks.sliding_window_view(series[:-1], lag, axis=0)  # (T - lag, m, lag)
    return np.ascontiguousarray(windows.transpose(0, 2, 1).reshape(T - lag, lag * m)), series[lag:].copy()


class RKMForecaster(BaseEstimator):
    """Nonlinear autoregressive forecasting with a two-view RKM (Achten et al. 2023, section 5).

    The training pairs are the windows (x_{t-lag+1}, ..., x_t), flattened to lag * n_series values, and the next
    values x_{t+1}: two views of a :class:`rkm.MultiViewRKM` (input: ``kernel``, or the explicit features of
    ``feature_map``; output: ``output_kernel``, linear by default so that its pre-image is exact).
    ``predict(steps)`` forecasts recursively: it infers the output view of the last window (eq. 15 in the primal,
    eq. 16 in the dual), appends the prediction to the window and repeats; ``predict(steps, context=segment)``
    does the same from the last ``lag`` values of any other segment of the series (or of a new series of the same
    kind). With ``standardize`` each series is scaled by its training mean and standard deviation (divisor
    T - ``ddof``) before the windows are formed, and the forecasts are scaled back.

    The window holds ``lag`` values: the paper's lag p (windows x_{t-p}, ..., x_t of p + 1 values) is lag = p + 1.

    Parameters
    ----------
    lag : int
        Values per window (per series).
    n_components : int
        Number of components s of the model (required, keyword-only).
    kernel : str or rkm.kernels.Kernel, default="rbf"
        Kernel of the input view: implicit (the dual solvers) unless "linear". Ignored when ``feature_map`` is
        given.
    gamma : float or None, default=None
        Bandwidth of ``kernel``, on the standardized series (None: 1 / (lag * n_series)). The paper's
        exp(-d^2 / (2 sigma^2)) is gamma = 1 / (2 sigma^2). Ignored when ``feature_map`` is given.
    degree : float, default=3
        Degree of a named polynomial ``kernel`` or ``output_kernel``.
    coef0 : float, default=1.0
        Constant of a named polynomial ``kernel`` or ``output_kernel``.
    feature_map : transformer or None, default=None
        None: the input view uses ``kernel`` itself. Otherwise an explicit feature map of the windows, such as
        ``rkm.features.RandomFourierFeatures(n_components=1000, orthogonal=True, random_state=0)`` or
        ``rkm.features.Nystroem(n_components=1000)``: cloned, then fitted on the training windows. It carries its
        own kernel and kernel parameters (``kernel``, ``gamma``, ``degree`` and ``coef0`` of the forecaster do not
        apply to it; its gamma is on the standardized series too) and its own ``random_state``. Explicit
        features allow the primal solvers.
    output_kernel : str, rkm.kernels.Kernel, transformer or callable, default="linear"
        Feature map of the output view, as an entry of :class:`rkm.MultiViewRKM`'s ``kernel``; a non-linear one is
        inverted by the model's ``preimage`` method.
    standardize : bool, default=True
        Scale each series by its training mean and standard deviation (a constant series by 1).
    ddof : int, default=0
        Delta degrees of freedom of that standard deviation, whose divisor is T - ddof: 0 (the default) is
        NumPy's and scikit-learn's ``StandardScaler``'s convention, 1 the sample standard deviation of MATLAB's
        ``std`` and PyTorch's ``torch.std``, which the authors' released code uses: with ddof=1 the model's
        eigenvalues are theirs. The forecasts of linear kernels do not depend on it; those of an rbf kernel
        with a fixed ``gamma`` do (slightly), through the scale of the windows.
    solver : {"auto", "primal_eig", "dual_eig", "primal_stiefel", "dual_stiefel"}, default="auto"
        See :class:`rkm.MultiViewRKM`; the primal solvers need explicit input features (``feature_map`` or a
        linear ``kernel``).
    rotate : bool, default=True
        Passed to :class:`rkm.MultiViewRKM`.
    rescale : bool, default=True
        Passed to :class:`rkm.MultiViewRKM`; False is the ablation of the paper's Fig. 7.
    stiefel_method : {"cayley_bb", "pg", "pg_anderson", "cayley_adam", "penalty"}, default="cayley_bb"
        Passed to :class:`rkm.MultiViewRKM`.
    max_iter : int or None, default=None
        Passed to :class:`rkm.MultiViewRKM`.
    tol : float or None, default=None
        Passed to :class:`rkm.MultiViewRKM`.
    preimage : {"auto", "smoother", "ridge"}, default="auto"
        Passed to :class:`rkm.MultiViewRKM`: the pre-image of a non-linear ``output_kernel``.
    n_neighbors : int, default=10
        Passed to :class:`rkm.MultiViewRKM`.
    random_state : int, RandomState or None, default=None
        Seeds the model's solver (the Stiefel start and the Krylov start block); ``feature_map`` has its own.
    n_threads : int or None, default=None
        Passed to :class:`rkm.MultiViewRKM`.
    verbose : int, default=0
        Passed to :class:`rkm.MultiViewRKM`, which prints the fit's stages (> 1: also the Stiefel method's
        history).

    Attributes
    ----------
    model_ : rkm.MultiViewRKM
        The fitted two-view model.
    feature_map_ : transformer or None
        The fitted clone of ``feature_map`` (None without one).
    eigenvalues_ : ndarray of shape (s,)
        The model's eigenvalues.
    solver_ : str
        The solver the model used.
    mean_, scale_ : ndarray of shape (n_series,)
        Standardization statistics (0 and 1 without ``standardize``): the mean and the standard deviation with
        divisor T - ``ddof``.
    n_series_ : int
        The number of series (columns of a 2-D series; 1 for a 1-D one).
    n_features_in_ : int
        The same number, under scikit-learn's name for the columns of fit's input.
    window_ : ndarray of shape (lag, n_series)
        The last ``lag`` standardized values of the training series: where forecasting starts.

    Notes
    -----
    ``fit`` takes a series, not (X, y), and ``predict`` a number of steps, not X: the estimator does not follow
    scikit-learn's fit/predict signature, and is neither a regressor nor a transformer. scikit-learn's
    estimator checks run on it (a 2-D X is read as ``n_features_in_`` series, time along the rows) and pass, but
    for 12 that cannot apply: 11 call ``predict(X)`` with a data array, which ``steps`` cannot take
    (``check_estimators_dtypes``, ``check_dtype_object``, ``check_estimators_nan_inf``,
    ``check_estimators_pickle``, ``check_f_contiguous_array_estimator``, ``check_methods_sample_order_invariance``,
    ``check_methods_subset_invariance``, ``check_dict_unchanged``, ``check_fit_idempotent``,
    ``check_fit2d_predict1d``, ``check_n_features_in_after_fitting``), and ``check_fit1d`` expects a 1-D X to be
    refused, where a 1-D array is the forecaster's univariate series.

    Forecasting a new segment of the series (the same process, or another series of the same kind) needs no
    refit: ``predict(steps, context=segment)`` starts from the segment's last ``lag`` values.

    Examples
    --------
    >>> import numpy as np
    >>> from rkm import RKMForecaster
    >>> series = np.sin(0.3 * np.arange(200))
    >>> model = RKMForecaster(10, n_components=2, kernel="linear").fit(series)
    >>> model.predict(5).shape
    (5,)
    >>> other = np.sin(0.3 * np.arange(50) + 1.0)  # another segment: forecast what follows it
    >>> model.predict(5, context=other).shape
    (5,)
    """

    _parameter_constraints: dict = {
        "lag": COUNT,
        "n_components": COUNT,
        **kernel_constraints(precomputed=False),
        "feature_map": [None, HasMethods(["fit", "transform"])],
        "output_kernel": [*kernel_constraints(precomputed=False)["kernel"], *VIEW_MAPS],
        "standardize": ["boolean"],
        "ddof": [Interval(numbers.Integral, 0, None, closed="left")],
        "solver": [StrOptions(set(SOLVERS))],
        "rotate": ["boolean"],
        "rescale": ["boolean"],
        "stiefel_method": [StrOptions(set(stiefel.METHODS))],
        "max_iter": MAX_ITER,
        "tol": TOL,
        "preimage": [StrOptions(set(PREIMAGES))],
        "n_neighbors": POSITIVE_INT,
        "random_state": RANDOM_STATE,
        "n_threads": N_THREADS,
        "verbose": VERBOSE,
    }

    def __init__(
        self,
        lag: int,
        *,
        n_components: int,
        kernel: str | Kernel = "rbf",
        gamma: float | None = None,
        degree: float = 3,
        coef0: float = 1.0,
        feature_map=None,
        output_kernel="linear",
        standardize: bool = True,
        ddof: int = 0,
        solver: str = "auto",
        rotate: bool = True,
        rescale: bool = True,
        stiefel_method: str = "cayley_bb",
        max_iter: int | None = None,
        tol: float | None = None,
        preimage: str = "auto",
        n_neighbors: int = 10,
        random_state=None,
        n_threads: int | None = None,
        verbose: int = 0,
    ):
        self.lag = lag
        self.n_components = n_components
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.feature_map = feature_map
        self.output_kernel = output_kernel
        self.standardize = standardize
        self.ddof = ddof
        self.solver = solver
        self.rotate = rotate
        self.rescale = rescale
        self.stiefel_method = stiefel_method
        self.max_iter = max_iter
        self.tol = tol
        self.preimage = preimage
        self.n_neighbors = n_neighbors
        self.random_state = random_state
        self.n_threads = n_threads
        self.verbose = verbose

    def _check_params_vs_input(self, n_steps, n_series, largest):
        """The rules that need the series (n_steps x n_series, of largest magnitude `largest`): enough time steps
        for two training pairs, values whose kernels fit in float64 when they are not standardized; and the
        kernels' parameters (named after this estimator's arguments: kernel, gamma, ..., output_kernel)."""
        if n_steps < self.lag + 2:
            raise ValueError(
                f"series: needs at least lag + 2 = {self.lag + 2} time steps (two windows of lag = {self.lag} values "
                f"and the values that follow them), got {n_steps} sample(s)"
            )
        # A window's squared norm (and squared distance, up to 4x that) must stay below the largest float64.
        limit = np.sqrt(np.finfo(np.float64).max / (4.0 * self.lag * n_series))
        if not self.standardize and largest > limit:
            raise ValueError(
                f"series: values up to {largest:.3g} overflow float64 in the kernels of the windows (their squared "
                f"norms exceed {np.finfo(np.float64).max:.3g} above |x| = {limit:.3g} for lag {self.lag}); use "
                "standardize=True or scale the series down"
            )
        if self.feature_map is None:
            kernel_spec(self.kernel, self.gamma, self.degree, self.coef0)
        if isinstance(self.output_kernel, (str, Kernel)):
            try:
                kernel_spec(self.output_kernel, None, self.degree, self.coef0)
            except ValueError as error:
                raise ValueError(str(error).replace("kernel:", "output_kernel:", 1)) from None

    def _model(self):
        return MultiViewRKM(
            self.n_components,
            kernel=(self.kernel if self.feature_map is None else self.feature_map, self.output_kernel),
            gamma=(self.gamma, None),
            degree=self.degree,
            coef0=self.coef0,
            solver=self.solver,
            rotate=self.rotate,
            rescale=self.rescale,
            stiefel_method=self.stiefel_method,
            max_iter=self.max_iter,
            tol=self.tol,
            preimage=self.preimage,
            n_neighbors=self.n_neighbors,
            n_threads=self.n_threads,
            random_state=self.random_state,
            verbose=self.verbose,
        )

    @_fit_context(prefer_skip_nested_validation=False)  # feature_map is a transformer: it validates its own
    def fit(self, series: ArrayLike, y: None = None) -> RKMForecaster:
        """Fit the autoregressive model on a series.

        Parameters
        ----------
        series : array-like of shape (T,) or (T, n_series), or a Dask array (or DataFrame)
            Time along axis 0; T >= lag + 2. A Dask series chunked along time is fitted as Dask tasks (with an
            explicit ``feature_map`` or a linear ``kernel``: the model's primal): its statistics in one pass,
            the windows as shifted slices of it, and the multi-view model's map-reduce over them.
        y : None
            Ignored.

        Returns
        -------
        self : RKMForecaster
            The fitted forecaster.
        """
        self._progress = Progress(type(self).__name__, self.verbose)
        self._one_dimensional = np.ndim(series) == 1
        if is_dask_collection(series):
            standardized, pairs = self._dask_pairs(series)
        else:
            values = _check_series(series)
            self._check_params_vs_input(*values.shape, float(np.abs(values).max()))
            self._standardization(*_mean_and_std(values, self.ddof), values.shape[1])
            standardized = (values - self.mean_) / self.scale_
            pairs = list(_lagged_pairs(standardized, self.lag))
        self._progress(f"{pairs[0].shape[0]} windows of {self.lag} values of {self.n_series_} series")
        self.model_ = self._model().fit(pairs)
        self.feature_map_ = None if self.feature_map is None else self.model_._views[0].source
        self.eigenvalues_ = self.model_.eigenvalues_
        self.solver_ = self.model_.solver_
        self.window_ = np.array(standardized[-self.lag :], dtype=np.float64)
        return self

    def _standardization(self, mean, std, n_series):
        """n_series_, and mean_ and scale_ from the series' mean and standard deviation (0 and 1 without
        standardize)."""
        self.n_series_ = self.n_features_in_ = n_series
        if self.standardize:
            self.mean_, self.scale_ = mean, np.where(std > 0, std, 1.0)
        else:
            self.mean_, self.scale_ = np.zeros(n_series), np.ones(n_series)

    def _dask_pairs(self, series):
        """A Dask series (T,) or (T, n_series), chunked along time: its statistics from one pass, and the lagged
        windows and next values as Dask views with the same row chunks (each window column a shifted slice)."""
        import dask

        from rkm._utils import dask_arrays

        values, _ = dask_arrays.as_dask_array(series, "series")
        values = dask_arrays.check_dask_array(values.reshape(values.shape[0], -1), "series")
        # Dask's reductions fail on empty partitions: leave them out.
        values = values.rechunk({0: tuple(size for size in values.chunks[0] if size) or values.shape[0]})
        n_steps, n_series = values.shape
        magnitude, finite = dask.compute(abs(values).max(axis=0), dask_arrays.is_finite(values))
        if not finite:
            raise ValueError("series: contains NaN or infinity")
        self._check_params_vs_input(n_steps, n_series, float(magnitude.max()))
        # As _mean_and_std: the statistics of the values divided by their largest magnitude.
        magnitude = np.where(magnitude > 0, magnitude, 1.0)
        scaled = values / magnitude
        mean, std = dask.compute(scaled.mean(axis=0), scaled.std(axis=0, ddof=self.ddof))
        self._standardization(mean * magnitude, std * magnitude, n_series)
        standardized = (values - self.mean_) / self.scale_
        lag, n_pairs = self.lag, n_steps - self.lag
        windows = dask_arrays.concatenate_columns([standardized[k : k + n_pairs] for k in range(lag)])
        return standardized, [windows, standardized[lag:]]

    def predict(self, steps: int, context: ArrayLike | None = None) -> np.ndarray:
        """Forecast the next `steps` values, feeding each prediction back: after the training series, or after
        the segment `context`.

        Parameters
        ----------
        steps : int
            Number of values to forecast.
        context : array-like of shape (T_c,) or (T_c, n_series), default=None
            A segment of the series (time along axis 0, T_c >= lag, in the units of the training series) whose
            continuation to forecast: its last ``lag`` values start the recursion, standardized with the
            training statistics ``mean_`` and ``scale_`` (no refit). None starts from the end of the training
            series (``window_``); the training series' last ``lag`` values give the same forecast.

        Returns
        -------
        forecast : ndarray of shape (steps,) for a 1-D training series, (steps, n_series) otherwise
            The forecasts, in the units of the training series.
        """
        check_is_fitted(self)
        steps = check_int(steps, "steps")
        window = self.window_.copy() if context is None else self._context_window(context)
        forecast = np.empty((steps, self.n_series_))
        for t in range(steps):
            forecast[t] = self.model_.predict_view([window.reshape(1, -1), None], missing=1)[0]
            window = np.vstack([window[1:], forecast[t]])
        forecast = forecast * self.scale_ + self.mean_
        return forecast[:, 0] if self._one_dimensional else forecast

    def _context_window(self, context):
        """The last lag values of `context`, standardized with the training statistics."""
        values = _check_series(context, "context")
        if values.shape[1] != self.n_series_:
            raise ValueError(
                f"context: has {values.shape[1]} series (columns) but the model was fitted on {self.n_series_}"
            )
        if values.shape[0] < self.lag:
            raise ValueError(
                f"context: needs at least lag = {self.lag} time steps (the window that starts the forecast), got "
                f"{values.shape[0]}"
            )
        return (values[-self.lag :] - self.mean_) / self.scale_
