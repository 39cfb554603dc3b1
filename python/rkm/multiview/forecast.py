"""Recursive time-series forecasting with a two-view restricted kernel machine (Achten et al. 2023, section 5).

A nonlinear autoregressive model x_{t+1} = f(x_t, ..., x_{t-lag+1}) is learned as a :class:`rkm.MultiViewRKM`
of two views: the lagged window (input) and the next value (output). Forecasting infers the output view of the
last window (eq. 15 or 16), appends it to the series, and repeats.
"""

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from rkm._utils.validation import check_choices, check_int
from rkm.features import Nystroem, RandomFourierFeatures
from rkm.kernels import Kernel, canonical_kernel_name, kernel_spec
from rkm.multiview.multiview_rkm import MultiViewRKM

__all__ = ["RKMForecaster"]

FEATURES = (None, "rff", "nystroem")


def _check_series(series, lag):
    """The series as a finite float64 (T, n_series) array with at least two training pairs."""
    A = np.asarray(series)
    if A.dtype.kind not in "biuf":
        raise ValueError(f"series: must be an array of real numbers, got dtype {A.dtype}")
    A = A.astype(np.float64, copy=False)
    if A.ndim not in (1, 2) or A.size == 0:
        raise ValueError(f"series: must be a non-empty 1-D or 2-D array (time along axis 0), got shape {A.shape}")
    if not np.all(np.isfinite(A)):
        raise ValueError("series: contains NaN or infinity")
    if A.shape[0] < lag + 2:
        raise ValueError(
            f"series: needs at least lag + 2 = {lag + 2} time steps (two windows of lag = {lag} values and the "
            f"values that follow them), got {A.shape[0]}"
        )
    return np.ascontiguousarray(A.reshape(A.shape[0], -1))


def _check_kernels(kernel, gamma, degree, coef0, output_kernel):
    """Errors in the kernels named after this estimator's arguments (kernel, gamma, ..., output_kernel)."""
    kernel_spec(kernel, gamma, degree, coef0)
    if isinstance(output_kernel, (str, Kernel)):
        try:
            kernel_spec(output_kernel, None, degree, coef0)
        except ValueError as error:
            raise ValueError(str(error).replace("kernel:", "output_kernel:", 1)) from None


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
    values x_{t+1}: two views of a :class:`rkm.MultiViewRKM` (input: ``kernel``, or explicit random Fourier or
    Nyström features of it; output: ``output_kernel``, linear by default so that its pre-image is exact).
    ``predict(steps)`` forecasts recursively: it infers the output view of the last window (eq. 15 in the primal,
    eq. 16 in the dual), appends the prediction to the window and repeats. With ``standardize`` each series is
    scaled by its training mean and standard deviation before the windows are formed, and the forecasts are
    scaled back.

    The window holds ``lag`` values: the paper's lag p (windows x_{t-p}, ..., x_t of p + 1 values) is lag = p + 1.

    Parameters
    ----------
    lag : int
        Values per window (per series).
    n_components : int
        Number of components s of the model.
    kernel : str or rkm.kernels.Kernel, default="rbf"
        Kernel of the input view. With ``features=None`` an implicit kernel (the dual solvers) unless "linear".
    gamma : float, default=None
        Bandwidth of ``kernel``, on the standardized series (None: 1 / (lag * n_series)). The paper's
        exp(-d^2 / (2 sigma^2)) is gamma = 1 / (2 sigma^2).
    solver : {"auto", "primal_eig", "dual_eig", "primal_stiefel", "dual_stiefel"}, default="auto"
        See :class:`rkm.MultiViewRKM`; the primal solvers need explicit input features (``features`` or a
        linear ``kernel``).
    features : {None, "rff", "nystroem"}, default=None
        Explicit input features approximating ``kernel``: ``n_features`` random Fourier features
        (:class:`rkm.features.RandomFourierFeatures`, orthogonal for rbf; rbf and laplacian only) or Nyström
        features with ``n_features`` landmarks (:class:`rkm.features.Nystroem`).
    n_features : int, default=1000
        Number of explicit features.
    output_kernel : str or rkm.kernels.Kernel, default="linear"
        Kernel of the output view; a non-linear one is inverted by the model's ``preimage`` method.
    standardize : bool, default=True
        Scale each series by its training mean and standard deviation (a constant series by 1).
    degree, coef0, rotate, rescale, stiefel_method, max_iter, tol, preimage, n_neighbors, n_threads, verbose :
        Passed to :class:`rkm.MultiViewRKM`.
    random_state : int, RandomState or None
        Seeds the explicit features and the model's solver.

    Attributes
    ----------
    model_ : rkm.MultiViewRKM
        The fitted two-view model.
    eigenvalues_ : ndarray of shape (s,)
        The model's eigenvalues.
    solver_ : str
        The solver the model used.
    mean_, scale_ : ndarray of shape (n_series,)
        Standardization statistics (0 and 1 without ``standardize``).
    n_series_ : int
    window_ : ndarray of shape (lag, n_series)
        The last ``lag`` standardized values of the training series: where forecasting starts.

    Notes
    -----
    ``fit`` takes a series, not (X, y): the estimator does not follow scikit-learn's fit/predict signature.
    """

    def __init__(
        self,
        lag,
        n_components,
        kernel="rbf",
        gamma=None,
        solver="auto",
        features=None,
        *,
        n_features=1000,
        output_kernel="linear",
        standardize=True,
        degree=3,
        coef0=1.0,
        rotate=True,
        rescale=True,
        stiefel_method="cayley_bb",
        max_iter=None,
        tol=None,
        preimage="auto",
        n_neighbors=10,
        random_state=None,
        n_threads=None,
        verbose=0,
    ):
        self.lag = lag
        self.n_components = n_components
        self.kernel = kernel
        self.gamma = gamma
        self.solver = solver
        self.features = features
        self.n_features = n_features
        self.output_kernel = output_kernel
        self.standardize = standardize
        self.degree = degree
        self.coef0 = coef0
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

    def _input_kernel(self):
        """The input view's entry of MultiViewRKM's kernels: the kernel itself or its explicit feature map."""
        if self.features is None:
            return self.kernel
        if self.features == "rff":
            return RandomFourierFeatures(
                n_components=self.n_features, kernel=self.kernel, gamma=self.gamma,
                orthogonal=isinstance(self.kernel, str) and canonical_kernel_name(self.kernel) == "rbf",
                random_state=self.random_state, n_threads=self.n_threads,
            )
        return Nystroem(
            n_components=self.n_features, kernel=self.kernel, gamma=self.gamma, degree=self.degree, coef0=self.coef0,
            random_state=self.random_state, n_threads=self.n_threads,
        )

    def _model(self):
        return MultiViewRKM(
            self.n_components, kernels=(self._input_kernel(), self.output_kernel), gammas=(self.gamma, None),
            solver=self.solver, degree=self.degree, coef0=self.coef0, rotate=self.rotate, rescale=self.rescale,
            stiefel_method=self.stiefel_method, max_iter=self.max_iter, tol=self.tol, preimage=self.preimage,
            n_neighbors=self.n_neighbors, n_threads=self.n_threads, random_state=self.random_state,
            verbose=self.verbose,
        )

    def fit(self, series, y=None):
        """Fit the autoregressive model on a series.

        Parameters
        ----------
        series : array-like of shape (T,) or (T, n_series)
            Time along axis 0; T >= lag + 2.
        y : ignored

        Returns
        -------
        self
        """
        lag = check_int(self.lag, "lag")
        check_choices((("features", self.features, FEATURES),))
        check_int(self.n_features, "n_features")
        _check_kernels(self.kernel, self.gamma, self.degree, self.coef0, self.output_kernel)
        if not isinstance(self.standardize, (bool, np.bool_)):
            raise ValueError(f"standardize: must be True or False, got {self.standardize!r}")
        values = _check_series(series, lag)
        self._one_dimensional = np.ndim(series) == 1
        self.n_series_ = values.shape[1]
        if self.standardize:
            self.mean_, scale = values.mean(axis=0), values.std(axis=0)
            self.scale_ = np.where(scale > 0, scale, 1.0)
        else:
            self.mean_, self.scale_ = np.zeros(self.n_series_), np.ones(self.n_series_)
        standardized = (values - self.mean_) / self.scale_
        self.model_ = self._model().fit(list(_lagged_pairs(standardized, lag)))
        self.eigenvalues_ = self.model_.eigenvalues_
        self.solver_ = self.model_.solver_
        self.window_ = standardized[-lag:].copy()
        return self

    def predict(self, steps):
        """Forecast the next `steps` values after the training series, feeding each prediction back.

        Parameters
        ----------
        steps : int
            Number of values to forecast.

        Returns
        -------
        ndarray of shape (steps,) for a 1-D training series, (steps, n_series) otherwise
        """
        check_is_fitted(self)
        steps = check_int(steps, "steps")
        window = self.window_.copy()
        forecast = np.empty((steps, self.n_series_))
        for t in range(steps):
            forecast[t] = self.model_.predict_view([window.reshape(1, -1), None], missing=1)[0]
            window = np.vstack([window[1:], forecast[t]])
        forecast = forecast * self.scale_ + self.mean_
        return forecast[:, 0] if self._one_dimensional else forecast
