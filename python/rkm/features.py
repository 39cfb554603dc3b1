"""Explicit feature maps phi with phi(x)^T phi(y) ~ k(x, y): Nyström and random Fourier features.

Both are scikit-learn transformers whose features turn a kernel method into a linear one: kernel PCA in the
primal (:mod:`rkm._utils.primal`), LS-SVMs in the primal, or any scikit-learn pipeline.

:class:`Nystroem` (Williams and Seeger 2001) maps x to k(x, L) K_LL^{-1/2} for m landmarks L, so that
phi(x)^T phi(y) = k(x, L) K_LL^+ k(L, y), the Nyström approximation of the kernel; it is exact on the
landmarks. The landmarks are drawn uniformly, by k-means++ seeding in the kernel's feature space (Arthur
and Vassilvitskii 2007), or as the fixed-size LS-SVM working set that maximises the quadratic Rényi entropy
of the landmarks (Suykens et al. 2002; De Brabanter et al. 2010), the subset Suykens 2017 (sec. 5.2) proposes for
reduced-set deep RKMs.

:class:`RandomFourierFeatures` (Rahimi and Recht 2007) maps x to sqrt(2/D) cos(W^T x + b) with the columns
of W drawn from the spectral density of a shift-invariant kernel (Bochner's theorem), so that
E[phi(x)^T phi(y)] = k(x, y) with an error of order 1/sqrt(D); orthogonal random features (Yu et al. 2016)
make the frequencies of each block of d orthogonal, which lowers the variance for the Gaussian kernel.

Both follow one two-step protocol so that fits over distributed data equal in-memory fits: ``fm.fit(X)`` is
``fm._fit_sample(X[fm._sample_indices(n)], n, d)``, where ``_sample_indices`` draws, from ``random_state``
only, the few rows the fit needs (the Nyström landmarks or candidate pool; none for random features), and
``_fit_sample`` fits from those rows. ``transform`` streams its input in blocks of rows of bounded memory
through the compiled core. The protocol is their public base class :class:`ExplicitFeatureMap`, which
``rkm.torch.FeatureMap`` (a trained PyTorch module as a fixed feature map) shares.

References
----------
C. K. I. Williams and M. Seeger, "Using the Nyström method to speed up kernel machines", NIPS 13, 2001.
A. Rahimi and B. Recht, "Random features for large-scale kernel machines", NIPS 20, 2007.
F. X. Yu, A. T. Suresh, K. Choromanski, D. Holtmann-Rice and S. Kumar, "Orthogonal random features",
NIPS 29, 2016.
J. A. K. Suykens, T. Van Gestel, J. De Brabanter, B. De Moor and J. Vandewalle, "Least Squares Support Vector
Machines", World Scientific, 2002 (fixed-size LS-SVM).
K. De Brabanter, J. De Brabanter, J. A. K. Suykens and B. De Moor, "Optimized fixed-size kernel models for
large data sets", Computational Statistics & Data Analysis 54(6), 2010.
M. Girolami, "Orthogonal series density estimation and the kernel eigenvalue problem", Neural Computation
14(3), 2002.
J. A. K. Suykens, "Deep restricted kernel machines using conjugate feature duality", Neural Computation
29(8), 2017.
D. Arthur and S. Vassilvitskii, "k-means++: the advantages of careful seeding", SODA 2007.
"""

from __future__ import annotations

import numbers

import numpy as np
import scipy.linalg
from numpy.typing import ArrayLike
from sklearn import get_config
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin, _fit_context
from sklearn.utils import check_array, check_random_state
from sklearn.utils._param_validation import StrOptions
from sklearn.utils.validation import check_is_fitted, validate_data

from rkm import _core
from rkm._utils.eigen import fix_signs
from rkm._utils.threads import blas_threads, thread_count
from rkm._utils.validation import (
    COUNT,
    FLOAT_DTYPES,
    N_THREADS,
    POSITIVE,
    RANDOM_STATE,
    check_fits_in_memory,
    check_matrix,
    kernel_constraints,
    kernel_name_options,
)
from rkm._utils.warn import warn
from rkm.exceptions import PositiveSpectrumWarning
from rkm.kernels import Kernel, kernel_matrix, kernel_spec, names_with

__all__ = ["ExplicitFeatureMap", "Nystroem", "RandomFourierFeatures", "renyi_entropy"]

NYSTROEM_KERNELS = names_with("nystroem")
FOURIER_KERNELS = names_with("fourier_features")
LANDMARK_METHODS = ("uniform", "kmeans++", "renyi")
# The k-means++ and Rényi selections choose among a uniform candidate pool of min(n_samples,
# max(POOL_PER_LANDMARK * m, MIN_POOL)) rows: enough candidates per landmark to choose from, while
# k-means++ evaluates a kernel row of the pool per landmark, O(POOL_PER_LANDMARK m^2 d) in all; below a
# few thousand rows the selection costs little anyway.
POOL_PER_LANDMARK = 10
MIN_POOL = 5000
# Swap trials of the Rényi selection: 10 per landmark, at most 50 000 (each costs O(m d)).
RENYI_TRIALS_PER_LANDMARK = 10
RENYI_MAX_TRIALS = 50_000
# Candidates whose kernel rows against the working set are evaluated in one core call.
_RENYI_BATCH = 256
# Proposals per batch of the k-means++ selection.
_KMEANS_PROPOSALS = 64
# Rows whose kernel diagonal is taken from one small kernel matrix.
_DIAGONAL_BLOCK = 256
# Bytes of one block of transform: the block's kernel rows (Nyström) and its output.
TRANSFORM_BLOCK_BYTES = 64 * 2**20


def _check_count(value, name):
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name}: must be a positive int, got {value!r}")
    return int(value)


def _uniform_subset(rng, n, k):
    """k distinct indices drawn uniformly from range(n), sorted.

    Draws with replacement and keeps the first occurrence of each index (sequential sampling, uniform over
    subsets) when k is small against n, so that memory is O(k) rather than a permutation of n.
    """
    if 4 * k >= n:
        return np.sort(rng.permutation(n)[:k])
    chosen = np.empty(0, dtype=np.int64)
    while chosen.size < k:
        draws = rng.randint(0, n, size=2 * (k - chosen.size), dtype=np.int64)
        _, first = np.unique(draws, return_index=True)
        fresh = draws[np.sort(first)]
        fresh = fresh[~np.isin(fresh, chosen)]
        chosen = np.concatenate([chosen, fresh[: k - chosen.size]])
    return np.sort(chosen)


def _row_blocks(n_rows, row_bytes):
    """Slices covering range(n_rows), each of about TRANSFORM_BLOCK_BYTES."""
    step = max(1, TRANSFORM_BLOCK_BYTES // max(row_bytes, 1))
    return [slice(start, min(start + step, n_rows)) for start in range(0, n_rows, step)]


class ExplicitFeatureMap(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Base class of rkm's explicit feature maps: the fit protocol, blockwise transform and scikit-learn plumbing.

    :class:`Nystroem`, :class:`RandomFourierFeatures` and ``rkm.torch.FeatureMap`` (a trained PyTorch module
    as a fixed map) derive from it. Every model that takes an explicit feature map streams the features of a
    subclass a block of rows at a time (kernel PCA's primal moments, LS-SVMs in the primal, Dask partitions)
    instead of forming them all at once, so ``isinstance(fm, ExplicitFeatureMap)`` is what
    ``KernelPCA(feature_map=fm)`` accepts.

    ``fit(X)`` is ``_fit_sample(X[_sample_indices(n_samples)], n_samples, n_features)``: ``_sample_indices``
    draws, from ``random_state`` only, the rows the fit needs, so that a fit from those rows alone (the rows a
    Dask fit gathers) equals the in-memory fit. ``transform`` validates X, converts it to the model's dtype and
    maps it in blocks of about 64 MiB.

    Subclasses define ``_parameter_constraints``, ``_check_params_vs_input(n_samples)``,
    ``_draw_sample(rng, n_samples)`` (sorted indices of the rows the fit needs),
    ``_fit_from_sample(X_sample, rng, indices, n_features)``, ``_transform_block(X)`` (the features of a
    C-contiguous block of rows in the model's dtype), ``_model_dtype`` (float32 or float64), ``_n_features_out``,
    ``_row_bytes`` (bytes per row of a block: input and features), ``_raw_block(X)`` and ``_linear_map`` (the
    features are ``_raw_block(X) @ _linear_map``, or ``_raw_block(X)`` itself when ``_linear_map`` is None),
    and the attributes ``random_state`` (seeds ``_draw_sample``) and ``n_threads`` (threads of the streamed
    products; None: the default).
    """

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: ArrayLike, y: None = None) -> ExplicitFeatureMap:
        """Fit the feature map from the rows of X it needs.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : ignored

        Returns
        -------
        self
        """
        X = validate_data(self, X, dtype=list(FLOAT_DTYPES), order="C", ensure_min_samples=1)
        indices = self._draw_indices(X.shape[0])
        return self._fit_sample(X[indices], X.shape[0], X.shape[1])

    def _sample_indices(self, n_samples):
        """Sorted indices of the rows ``_fit_sample`` needs, drawn from ``random_state`` only.

        Validates the parameters (as ``fit`` does: the constraints unless scikit-learn's
        ``skip_parameter_validation`` is set, then the rules that need n_samples). The random state continues
        into the ``_fit_sample`` call that must follow, so that a fit from these rows, wherever they come from,
        equals ``fit`` on the whole data.

        Parameters
        ----------
        n_samples : int

        Returns
        -------
        indices : ndarray of int64, sorted
        """
        if not get_config()["skip_parameter_validation"]:
            self._validate_params()
        return self._draw_indices(n_samples)

    def _draw_indices(self, n_samples):
        """``_sample_indices`` after the parameter constraints: the rules that need n_samples, then the draw."""
        n_samples = _check_count(n_samples, "n_samples")
        self._check_params_vs_input(n_samples)
        try:
            rng = check_random_state(self.random_state)
        except ValueError as error:
            raise ValueError(f"random_state: {error}") from None
        indices = self._draw_sample(rng, n_samples)
        self._pending_sample = (n_samples, indices, rng)
        return indices

    def _fit_sample(self, X_sample, n_samples, n_features):
        """Fit from the rows ``X[self._sample_indices(n_samples)]`` of data of shape (n_samples, n_features).

        Parameters
        ----------
        X_sample : array-like of shape (len(indices), n_features)
            float32 rows give a float32 model, all others float64.
        n_samples, n_features : int
            Shape of the whole data.

        Returns
        -------
        self
        """
        pending = self.__dict__.pop("_pending_sample", None)
        if pending is None or pending[0] != n_samples:
            raise ValueError(f"X_sample: call _sample_indices({n_samples}) first and pass the rows it names")
        _, indices, rng = pending
        X_sample = check_array(
            X_sample, dtype=list(FLOAT_DTYPES), order="C", ensure_min_samples=0, input_name="X_sample"
        )
        if X_sample.shape != (indices.size, n_features):
            raise ValueError(
                f"X_sample: must have shape {(indices.size, n_features)} (the rows _sample_indices named), "
                f"got {X_sample.shape}"
            )
        self.n_features_in_ = n_features
        self._fit_from_sample(X_sample, rng, indices, n_features)
        return self

    def transform(self, X: ArrayLike) -> np.ndarray:
        """Map X to its features, a block of rows at a time.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        Phi : ndarray of shape (n_samples, ``n_components_``)
            Computed in the model's dtype (that of the training data); returned as float32 when both the
            model and X are float32, float64 otherwise.
        """
        check_is_fitted(self)
        X = validate_data(self, X, dtype=list(FLOAT_DTYPES), order="C", reset=False)
        dtype = np.result_type(X.dtype, self._model_dtype)
        X = X.astype(self._model_dtype, copy=False)
        shape = (X.shape[0], self._n_features_out)
        check_fits_in_memory(shape, dtype, "X")
        Phi = np.empty(shape, dtype=dtype)
        for rows in _row_blocks(X.shape[0], self._row_bytes):
            Phi[rows] = self._transform_block(X[rows])
        return Phi

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags


class Nystroem(ExplicitFeatureMap):
    """Nyström features phi(x) = k(x, L) K_LL^{-1/2} for a set L of m landmark rows of the training data.

    With the eigendecomposition K_LL = U diag(w) U^T of the landmarks' kernel matrix, the features are
    phi(x) = k(x, L) U_r diag(w_r)^{-1/2}, keeping the r eigenvalues above the rounding level
    w_max * m * eps (eps of the data's dtype; smaller ones are rounding noise that 1/sqrt(w) would amplify).
    Then phi(x)^T phi(y) = k(x, L) K_LL^+ k(L, y) (Williams and Seeger 2001): exact when x or y is a landmark,
    and exact everywhere when the landmarks span the data (m = n_samples). The columns are ordered by
    decreasing w.

    Landmarks:

    - ``"uniform"``: m distinct training rows drawn uniformly.
    - ``"kmeans++"``: k-means++ seeding in the kernel's feature space, where the squared distance is
      D^2(x, l) = k(x, x) + k(l, l) - 2 k(x, l): the first landmark uniform, each next one drawn with
      probability proportional to D^2 to the nearest landmark chosen so far. Spreads the landmarks over
      the data.
    - ``"renyi"``: the fixed-size LS-SVM working set (Suykens et al. 2002): starting from a
      uniform draw, random swaps of a landmark with a candidate are kept when they raise the quadratic Rényi
      entropy H_R = -log((1/m^2) 1^T K_LL 1), i.e. lower the sum of K_LL; 10 trials per landmark (at most
      50 000). Spreads the landmarks over the support of the data, out into its tails, as the fixed-size
      LS-SVM wants; on compact data this can approximate the kernel matrix less well than uniform
      landmarks at small m.

    k-means++ and Rényi choose from a uniform candidate pool of min(n_samples, max(10 m, 5000)) rows.

    Parameters
    ----------
    n_components : int, default=100
        Number of landmarks m (at most n_samples).
    kernel : {"rbf", "linear", "poly", "laplacian", "cosine", "tanimoto"} or Kernel, default="rbf"
        As in :func:`rkm.kernels.kernel_matrix`; aliases "gaussian" and "polynomial" are accepted.
    gamma : float, default=None
        Bandwidth of rbf/laplacian/poly; None means 1 / n_features.
    degree : float, default=3
        Degree of the poly kernel.
    coef0 : float, default=1.0
        Constant of the poly kernel.
    landmarks : {"uniform", "kmeans++", "renyi"}, default="uniform"
        How the landmarks are chosen.
    random_state : int, RandomState or None, default=None
        Seeds the landmark selection.
    n_threads : int, default=None
        Threads for the core and BLAS (None: OpenMP's default; -1: all cores; 0 is an error).

    Attributes
    ----------
    components_ : ndarray of shape (m, n_features)
        The landmarks L.
    component_indices_ : ndarray of shape (m,)
        Their row indices in the training data, sorted.
    normalization_ : ndarray of shape (m, ``n_components_``)
        U_r diag(w_r)^{-1/2}, so that phi(X) = k(X, L) @ ``normalization_``.
    landmark_eigenvalues_ : ndarray of shape (``n_components_``,)
        The kept eigenvalues w_r of K_LL, descending.
    n_components_ : int
        Number of features r: the numerical rank of K_LL (m unless landmarks are (nearly) dependent).
    gamma_ : float or None
        The bandwidth used (None for kernels without one).
    n_features_in_ : int

    Examples
    --------
    >>> import numpy as np
    >>> from rkm.features import Nystroem
    >>> X = np.random.default_rng(0).standard_normal((100, 3))
    >>> Nystroem(20, gamma=0.5, random_state=0).fit_transform(X).shape
    (100, 20)
    """

    _parameter_constraints: dict = {
        "n_components": COUNT,
        **kernel_constraints(precomputed=False),
        "landmarks": [StrOptions(set(LANDMARK_METHODS))],
        "random_state": RANDOM_STATE,
        "n_threads": N_THREADS,
    }

    def __init__(
        self,
        n_components: int = 100,
        *,
        kernel: str | Kernel = "rbf",
        gamma: float | None = None,
        degree: float = 3,
        coef0: float = 1.0,
        landmarks: str = "uniform",
        random_state: int | np.random.RandomState | None = None,
        n_threads: int | None = None,
    ):
        self.n_components = n_components
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.landmarks = landmarks
        self.random_state = random_state
        self.n_threads = n_threads

    def _check_params_vs_input(self, n_samples):
        """The rules that need the data: at most n_samples landmarks; the kernel's own checks."""
        if self.n_components > n_samples:
            raise ValueError(
                f"n_components: {self.n_components} landmarks need at least as many samples, got n_samples = "
                f"{n_samples}"
            )
        kernel_spec(self.kernel, self.gamma, self.degree, self.coef0, allowed=NYSTROEM_KERNELS)

    def _draw_sample(self, rng, n_samples):
        if self.landmarks == "uniform":
            return _uniform_subset(rng, n_samples, self.n_components)
        pool = min(n_samples, max(POOL_PER_LANDMARK * self.n_components, MIN_POOL))
        return _uniform_subset(rng, n_samples, pool)

    def _kernel(self, X, Y=None):
        """k(X, Y) with the fitted kernel, in the dtype of the inputs."""
        return kernel_matrix(
            X, Y, self._kernel_name_, self.gamma_, self._degree_, self._coef0_, n_threads=self.n_threads
        )

    def _fit_from_sample(self, X_sample, rng, indices, n_features):
        self._kernel_name_, self.gamma_, self._degree_, self._coef0_ = kernel_spec(
            self.kernel, self.gamma, self.degree, self.coef0, n_features, NYSTROEM_KERNELS
        )
        positions = self._select_landmarks(X_sample, rng)
        self.component_indices_ = indices[positions]
        self.components_ = X_sample[positions]
        self.landmark_eigenvalues_, self.normalization_ = self._inverse_sqrt(
            self._kernel(self.components_), self.n_threads
        )
        self.n_components_ = self.normalization_.shape[1]

    def _select_landmarks(self, X_sample, rng):
        """Sorted positions in X_sample of the landmarks."""
        m = self.n_components
        if self.landmarks == "uniform":
            return np.arange(m)
        if self.landmarks == "kmeans++":
            positions = _kmeans_plus_plus(X_sample, m, self._kernel, rng)
        else:
            n_trials = min(RENYI_TRIALS_PER_LANDMARK * m, RENYI_MAX_TRIALS)
            positions = _renyi_working_set(X_sample, m, self._kernel, rng, n_trials)
        return np.sort(positions)

    @staticmethod
    def _inverse_sqrt(K, n_threads):
        """(w_r, U_r diag(w_r)^{-1/2}) from the eigenpairs of K above its rounding level, w_r descending."""
        eps = np.finfo(K.dtype).eps
        with blas_threads(thread_count(n_threads)):
            # all pairs: divide and conquer (evd) took 24-26 ms at m = 500 where the default (evr) took 35-68
            w, U = scipy.linalg.eigh(K.astype(np.float64), overwrite_a=True, check_finite=False, driver="evd")
        w, U = w[::-1], U[:, ::-1]
        rounding = K.shape[0] * eps * max(w[0], 0.0)
        if w[-1] < -max(rounding, 1e-5 * w[0]):
            warn(
                f"Nystroem: the landmarks' kernel matrix has negative eigenvalues down to {w[-1]:.3g} (largest "
                f"{w[0]:.3g}): the kernel is not positive semi-definite; the features approximate its positive "
                "part",
                PositiveSpectrumWarning,
            )
        keep = w > rounding
        if not keep.any():
            raise ValueError(
                "X: the kernel matrix of the landmarks has no positive eigenvalue (all landmarks are zero in "
                "the kernel's feature space)"
            )
        w, U = w[keep], fix_signs(U[:, keep])
        return w.astype(K.dtype), (U / np.sqrt(w)).astype(K.dtype)

    @property
    def _model_dtype(self):
        return self.components_.dtype

    @property
    def _n_features_out(self):
        return self.n_components_

    @property
    def _row_bytes(self):
        return self._model_dtype.itemsize * (self.components_.shape[0] + self.n_components_)

    def _raw_block(self, X):
        """k(X, landmarks), the features before the linear map ``normalization_``."""
        return self._kernel(X, self.components_)

    @property
    def _linear_map(self):
        return self.normalization_

    def _transform_block(self, X):
        with blas_threads(thread_count(self.n_threads)):
            return self._raw_block(X) @ self.normalization_


def _kernel_diagonal(X, kernel):
    """k(x_i, x_i) for the rows of X, in float64, from small diagonal blocks of the kernel matrix."""
    diagonal = np.empty(X.shape[0])
    for start in range(0, X.shape[0], _DIAGONAL_BLOCK):
        diagonal[start : start + _DIAGONAL_BLOCK] = np.diagonal(kernel(X[start : start + _DIAGONAL_BLOCK]))
    return diagonal


def _squared_distances(K_rows, diagonal_rows, diagonal):
    """Feature-space squared distances k(a, a) + k(x, x) - 2 k(a, x) (clamped at 0) from kernel rows k(a, X)."""
    return np.maximum(diagonal_rows[:, None] + diagonal[None, :] - 2.0 * K_rows, 0.0)


def _propose_landmarks(X, nearest, diagonal, chosen, limit, kernel, rng):
    """Up to `limit` next k-means++ landmarks, drawn exactly as one at a time, from one batch of proposals.

    Proposals are drawn with probability proportional to the squared distances `nearest` to the landmarks
    whose kernel rows are known; one is accepted with probability D^2_new / D^2_old, D^2_new counting the
    landmarks accepted earlier in the batch (from the proposals' kernel among themselves). That rejection
    step makes each accepted row a draw proportional to its current D^2 (D^2_new <= D^2_old), as sequential
    k-means++ would draw it, while the kernel rows against all of X are evaluated once per batch.
    """
    candidates = np.flatnonzero(nearest > 0)
    if candidates.size == 0:  # every row duplicates a landmark: any other row will do
        unused = np.setdiff1d(np.arange(X.shape[0]), chosen)
        return [unused[rng.randint(unused.size)]]
    cumulative = np.cumsum(nearest[candidates])
    draws = np.searchsorted(cumulative, rng.uniform(size=_KMEANS_PROPOSALS) * cumulative[-1], side="right")
    proposals = candidates[np.minimum(draws, candidates.size - 1)]
    K = kernel(X[proposals]).astype(np.float64)
    distances = _squared_distances(K, diagonal[proposals], diagonal[proposals])
    accepted = []
    for j, row in enumerate(proposals):
        if len(accepted) == limit:
            break
        if np.any(proposals[accepted] == row):  # drawn twice: its distance to itself is 0 but for rounding
            continue
        current = min(nearest[row], distances[j, accepted].min(initial=np.inf))
        if rng.uniform() * nearest[row] < current:
            accepted.append(j)
    return list(proposals[accepted])


def _kmeans_plus_plus(X, n_landmarks, kernel, rng):
    """Positions of n_landmarks rows of X chosen by k-means++ seeding in the kernel's feature space.

    D^2(x, l) = k(x, x) + k(l, l) - 2 k(x, l) (clamped at 0); each landmark after a uniform first one is drawn
    with probability proportional to the squared distance to the nearest landmark so far. Landmarks are
    drawn in batches (:func:`_propose_landmarks`) whose kernel rows against X are then evaluated in one call.
    """
    diagonal = _kernel_diagonal(X, kernel)
    nearest = np.full(X.shape[0], np.inf)
    chosen = [rng.randint(X.shape[0])]
    new = chosen
    while True:
        K_rows = kernel(X[new], X).astype(np.float64)
        np.minimum(nearest, _squared_distances(K_rows, diagonal[new], diagonal).min(axis=0), out=nearest)
        # The chosen rows must not be drawn again, whatever the rounding of their distance to themselves.
        nearest[new] = 0.0
        if len(chosen) == n_landmarks:
            return np.array(chosen)
        new = _propose_landmarks(X, nearest, diagonal, chosen, n_landmarks - len(chosen), kernel, rng)
        chosen = chosen + new


def renyi_entropy(K):
    """Quadratic Rényi entropy estimate H_R = -log((1/m^2) 1^T K 1) of m points with kernel matrix K.

    The Parzen estimate of -log of the integral of p(x)^2 dx (Girolami 2002; Suykens et al. 2002),
    the criterion the fixed-size LS-SVM working set maximises.

    Parameters
    ----------
    K : array-like of shape (m, m)

    Returns
    -------
    float
    """
    K = check_matrix(K, "K").astype(np.float64, copy=False)
    if K.shape[0] != K.shape[1]:
        raise ValueError(f"K: must be a square kernel matrix, got shape {K.shape}")
    mean = K.sum() / K.shape[0] ** 2
    if not mean > 0:
        raise ValueError(f"K: the mean kernel value must be positive for a Parzen estimate, got {mean:.3g}")
    return float(-np.log(mean))


def _renyi_working_set(X, n_landmarks, kernel, rng, n_trials):
    """Positions of n_landmarks rows of X with a high quadratic Rényi entropy, by random swap trials.

    Starting from a uniform working set, each trial proposes to replace a random member by a random
    non-member and keeps the swap when the sum S = 1^T K_LL 1 decreases (the entropy -log(S / m^2) rises).
    The change of S needs one kernel row of the candidate against the working set: with row sums r and the
    kernel row k_c of candidate c, replacing member i gives
    S' = S - 2 r_i + K_ii + 2 (sum_j k_c[j] - k_c[i]) + k(c, c).
    Candidates are drawn in batches whose kernel rows are evaluated in one call: against the working set at
    the start of the batch, and among themselves for the members a batch swaps in.
    """
    members = rng.permutation(X.shape[0])
    members, outside = members[:n_landmarks].copy(), members[n_landmarks:].copy()
    if outside.size == 0:
        return members
    K = kernel(X[members]).astype(np.float64)
    done = 0
    while done < n_trials:
        batch = min(_RENYI_BATCH, n_trials - done, outside.size)
        slots = rng.choice(outside.size, batch, replace=False)
        positions = rng.randint(n_landmarks, size=batch)
        candidates = outside[slots]
        K_cl = kernel(X[candidates], X[members]).astype(np.float64)
        K_cc = kernel(X[candidates]).astype(np.float64)
        # Batch member that occupies each position, -1 where it holds the member of the batch's start.
        occupant = np.full(n_landmarks, -1)
        row_sums = K.sum(axis=1)
        total = row_sums.sum()
        for t in range(batch):
            i = positions[t]
            row = K_cl[t].copy()
            swapped = np.flatnonzero(occupant >= 0)
            row[swapped] = K_cc[t, occupant[swapped]]
            row_sum = row.sum() - row[i] + K_cc[t, t]
            new_total = total - 2.0 * row_sums[i] + K[i, i] + 2.0 * (row_sum - K_cc[t, t]) + K_cc[t, t]
            if new_total < total:
                row_sums += row - K[i]
                row_sums[i] = row_sum
                K[i], K[:, i] = row, row
                K[i, i] = K_cc[t, t]
                total = new_total
                outside[slots[t]], members[i] = members[i], candidates[t]
                occupant[i] = t
        done += batch
    return members


class RandomFourierFeatures(ExplicitFeatureMap):
    """Random Fourier features phi(x) = sqrt(2/D) cos(W^T x + b) of a shift-invariant kernel.

    By Bochner's theorem k(x - y) = E_w[cos(w^T (x - y))] for w drawn from the kernel's spectral density,
    so with b uniform on [0, 2 pi), E[phi(x)^T phi(y)] = k(x, y) and the error is O(1/sqrt(D)) (Rahimi and
    Recht 2007):

    - ``"rbf"``, exp(-gamma ||x - y||^2): w ~ N(0, 2 gamma I).
    - ``"laplacian"``, exp(-gamma ||x - y||_1): w_j ~ Cauchy(0, gamma), independent coordinates.

    With ``orthogonal=True`` (rbf only) the frequencies come in blocks of d orthogonal vectors
    (Yu et al. 2016): each block is Q S sqrt(2 gamma), Q a uniformly random orthogonal d x d matrix (QR of a
    Gaussian matrix with the signs of R's diagonal) and S diagonal with chi(d)-distributed entries, so every
    frequency keeps the N(0, 2 gamma I) marginal while the block's variance drops; the last block is cut
    to D columns.

    Parameters
    ----------
    n_components : int, default=100
        Number of features D.
    kernel : {"rbf", "laplacian"} or Kernel, default="rbf"
        "gaussian" is an alias of "rbf".
    gamma : float, default=None
        Kernel bandwidth, > 0; None means 1 / n_features.
    orthogonal : bool, default=False
        Orthogonal random features (rbf only).
    random_state : int, RandomState or None, default=None
        Seeds W and b.
    n_threads : int, default=None
        Threads for the core (None: OpenMP's default; -1: all cores; 0 is an error).

    Attributes
    ----------
    random_weights_ : ndarray of shape (n_features, D)
        W, drawn in float64 and stored in the dtype of the training data.
    random_offset_ : ndarray of shape (D,)
        b.
    n_components_ : int
        D.
    gamma_ : float
    n_features_in_ : int

    Examples
    --------
    >>> import numpy as np
    >>> from rkm.features import RandomFourierFeatures
    >>> X = np.random.default_rng(0).standard_normal((100, 3))
    >>> RandomFourierFeatures(50, gamma=0.5, random_state=0).fit_transform(X).shape
    (100, 50)
    """

    _parameter_constraints: dict = {
        "n_components": COUNT,
        "kernel": [kernel_name_options(names_with("fourier_features")), Kernel],
        "gamma": [None, *POSITIVE],
        "orthogonal": ["boolean"],
        "random_state": RANDOM_STATE,
        "n_threads": N_THREADS,
    }

    def __init__(
        self,
        n_components: int = 100,
        *,
        kernel: str | Kernel = "rbf",
        gamma: float | None = None,
        orthogonal: bool = False,
        random_state: int | np.random.RandomState | None = None,
        n_threads: int | None = None,
    ):
        self.n_components = n_components
        self.kernel = kernel
        self.gamma = gamma
        self.orthogonal = orthogonal
        self.random_state = random_state
        self.n_threads = n_threads

    def _check_params_vs_input(self, n_samples):
        """The rules between parameters (a kernel object's type, orthogonal features for rbf only)."""
        name, _, _, _ = kernel_spec(self.kernel, self.gamma, allowed=FOURIER_KERNELS)
        if self.orthogonal and name != "rbf":
            raise ValueError(f"orthogonal: orthogonal random features need the rbf kernel, got {self.kernel!r}")

    def _draw_sample(self, rng, n_samples):
        return np.empty(0, dtype=np.int64)

    def _fit_from_sample(self, X_sample, rng, indices, n_features):
        name, self.gamma_, _, _ = kernel_spec(self.kernel, self.gamma, n_features=n_features, allowed=FOURIER_KERNELS)
        D = self.n_components
        if name == "laplacian":
            W = rng.standard_cauchy((n_features, D)) * self.gamma_
        elif self.orthogonal:
            W = _orthogonal_gaussian(rng, n_features, D) * np.sqrt(2.0 * self.gamma_)
        else:
            W = rng.standard_normal((n_features, D)) * np.sqrt(2.0 * self.gamma_)
        offset = rng.uniform(0.0, 2.0 * np.pi, size=D)
        with np.errstate(over="ignore"):
            W = np.ascontiguousarray(W, dtype=X_sample.dtype)
        if not np.all(np.isfinite(W)):
            raise ValueError(f"gamma: {self.gamma_!r} makes the random weights overflow {W.dtype.name}")
        self.random_weights_ = W
        self.random_offset_ = offset.astype(X_sample.dtype)
        self.n_components_ = D

    @property
    def _model_dtype(self):
        return self.random_weights_.dtype

    @property
    def _n_features_out(self):
        return self.n_components_

    @property
    def _row_bytes(self):
        return self._model_dtype.itemsize * (self.random_weights_.shape[0] + self.n_components_)

    def _transform_block(self, X):
        # The core runs one single-threaded GEMM per band of rows on each of its own threads.
        with blas_threads(1):
            return _core.fourier_features(X, self.random_weights_, self.random_offset_, self.n_threads)

    _raw_block = _transform_block
    # The features are their own raw features: no linear map follows.
    _linear_map = None


def _orthogonal_gaussian(rng, d, D):
    """A (d, D) matrix whose columns have the N(0, I) marginal and are orthogonal within blocks of d.

    Each block is Q diag(s): Q Haar-distributed orthogonal (QR of a Gaussian matrix, columns signed by R's
    diagonal), s_j ~ chi(d), the norm of a d-dimensional standard Gaussian vector (Yu et al. 2016).
    """
    blocks = []
    for _ in range(-(-D // d)):
        Q, R = np.linalg.qr(rng.standard_normal((d, d)))
        Q *= np.where(np.diagonal(R) < 0, -1.0, 1.0)
        blocks.append(Q * np.sqrt(rng.chisquare(d, size=d)))
    return np.hstack(blocks)[:, :D]
