"""Kernel PCA in the primal: the centred covariance of explicit features, streamed, and its eigenvectors.

With an explicit feature map phi (:mod:`rkm.features`) of m features, kernel PCA needs the m x m centred
scatter matrix C = sum_i (phi_i - mu)(phi_i - mu)^T instead of the n x n kernel matrix. C and the centred
approximate kernel matrix Phi_c Phi_c^T share their nonzero eigenvalues: with C U = U Lambda, the hidden
features H = Phi_c U Lambda^{-1/2} are the eigenvectors of Phi_c Phi_c^T, with orthonormal columns (the
primal/dual pair of Suykens 2017, sec. 3.4). C is accumulated a block of rows at a time, and per-block
moments merge exactly in any order (Chan, Golub and LeVeque 1979), so partitions of distributed data reduce
in a tree.

References
----------
T. F. Chan, G. H. Golub and R. J. LeVeque, "Updating formulae and a pairwise algorithm for computing sample
variances", Technical report STAN-CS-79-773, Stanford University, 1979.
J. A. K. Suykens, "Deep restricted kernel machines using conjugate feature duality", Neural Computation
29(8), 2017.
"""

import numbers
from dataclasses import dataclass

import numpy as np
import scipy.linalg
import scipy.linalg.blas
import scipy.sparse as sp
from sklearn.utils import check_array
from sklearn.utils.validation import check_is_fitted

from rkm import _core
from rkm._utils.eigen import fix_signs
from rkm._utils.threads import blas_threads, thread_count
from rkm._utils.validation import FLOAT_DTYPES

# Float64 bytes of one block of features phi(X) (and of its centred copy).
BLOCK_BYTES = 128 * 2**20


@dataclass(frozen=True, eq=False)
class FeatureMoments:
    """Count, mean and centred scatter matrix of a set of feature vectors, and optionally their cross-scatter
    with targets.

    Attributes
    ----------
    n : int or float
        Number of feature vectors (with sample weights: their total weight).
    mean : ndarray of shape (m,), float64
        mu = (1/n) sum_i phi_i (weighted: (1/n) sum_i v_i phi_i).
    scatter : ndarray of shape (m, m), float64
        C = sum_i (phi_i - mu)(phi_i - mu)^T (not divided by n; weighted: each term times v_i).
    target_mean : ndarray of shape (p,), float64, or None
        The targets' mean y_mean, when the moments have targets.
    cross : ndarray of shape (m, p), float64, or None
        sum_i (phi_i - mu)(y_i - y_mean)^T (weighted: each term times v_i), when the moments have targets.
    """

    n: int
    mean: np.ndarray
    scatter: np.ndarray
    target_mean: np.ndarray | None = None
    cross: np.ndarray | None = None

    @classmethod
    def from_block(cls, Phi, overwrite=False):
        """Moments of the rows of Phi, in float64.

        The block is converted to float64, centred on its own mean and its scatter is a float64 SYRK, so
        float32 features lose nothing more in the accumulation and the result does not depend on how the
        rows are split into blocks beyond float64 rounding.

        Parameters
        ----------
        Phi : array-like of shape (n, m)
        overwrite : bool, default=False
            Whether Phi, when already a float64 array, may be centred in place (saves a copy).

        Returns
        -------
        FeatureMoments
        """
        Phi = np.asarray(Phi, dtype=np.float64) if overwrite else np.array(Phi, dtype=np.float64, ndmin=2)
        if Phi.ndim != 2:
            raise ValueError(f"Phi: must be a 2-D array, got {Phi.ndim}-D")
        sums = _ShiftedSums(Phi.shape[1])
        sums.add(Phi)
        return sums.moments()

    @property
    def has_targets(self):
        return self.cross is not None

    def combine(self, other):
        """Moments of the union of both sets, by Chan et al.'s pairwise update.

        With delta = mu_b - mu_a and n = n_a + n_b: mu = mu_a + delta n_b / n and
        C = C_a + C_b + delta delta^T n_a n_b / n; the cross-scatter likewise, with delta_y of the targets'
        means. Exact in exact arithmetic and stable in floating point, in any order of merging.

        Parameters
        ----------
        other : FeatureMoments

        Returns
        -------
        FeatureMoments
        """
        if other.mean.shape != self.mean.shape:
            raise ValueError(f"other: has {other.mean.shape[0]} features, expected {self.mean.shape[0]}")
        if other.has_targets != self.has_targets or (
            self.has_targets and other.target_mean.shape != self.target_mean.shape
        ):
            raise ValueError("other: must have targets of the same width as these moments, or neither have targets")
        if other.n == 0:
            return self
        if self.n == 0:
            return other
        n = self.n + other.n
        weight = self.n * other.n / n
        delta = other.mean - self.mean
        mean = self.mean + delta * (other.n / n)
        scatter = self.scatter + other.scatter + np.outer(delta, delta * weight)
        if not self.has_targets:
            return FeatureMoments(n, mean, scatter)
        delta_y = other.target_mean - self.target_mean
        target_mean = self.target_mean + delta_y * (other.n / n)
        cross = self.cross + other.cross + np.outer(delta, delta_y * weight)
        return FeatureMoments(n, mean, scatter, target_mean, cross)

    def uncentred(self):
        """The moments about the origin instead of the mean (a model without a bias term): the scatter
        sum_i phi_i phi_i^T and cross sum_i phi_i y_i^T, with zero means."""
        scatter = self.scatter + self.n * np.outer(self.mean, self.mean)
        if not self.has_targets:
            return FeatureMoments(self.n, np.zeros_like(self.mean), scatter)
        cross = self.cross + self.n * np.outer(self.mean, self.target_mean)
        return FeatureMoments(self.n, np.zeros_like(self.mean), scatter, np.zeros_like(self.target_mean), cross)


class _ShiftedSums:
    """Count (or total weight), sums and scatter of blocks of m features, shifted by the mean of the first nonempty
    block, and optionally their cross-scatter with p targets (shifted likewise).

    The shift keeps the cancellation in scatter - n mean mean^T small. The scatter's upper triangle is
    accumulated in place by SciPy's SYRK on each block's transposed view (no copy); NumPy would send
    A.T @ A to its own OpenBLAS's SYRK, whose multi-threaded version has crashed on large outputs. Sample
    weights v_i scale the rows by sqrt(v_i) for the SYRK, so weighted sums keep its speed.
    """

    def __init__(self, m, p=0):
        self.n, self.shift, self.target_shift = 0, None, None
        self.has_targets = p > 0
        self.sums, self.upper = np.zeros(m), np.zeros((m, m), order="F")
        self.target_sums, self.cross = np.zeros(p), np.zeros((m, p))

    def add(self, Psi, Y=None, weights=None):
        """Adds the rows of the C-contiguous float64 block Psi, which is shifted in place, with their targets Y
        (float64, one row per row of Psi) when the sums have targets, and their weights (None: 1 each)."""
        count = Psi.shape[0] if weights is None else float(weights.sum())
        if Psi.shape[0] == 0 or count == 0:
            return
        # The sums of the shifted rows from those of the raw ones: one pass over the block fewer (it streams
        # from memory), at a rounding error of eps |shift| in the mean, which the shift is there to keep.
        column_sums = Psi.sum(axis=0) if weights is None else weights @ Psi
        if self.shift is None:
            self.shift = column_sums / count
            if self.has_targets:
                self.target_shift = (Y.sum(axis=0) if weights is None else weights @ Y) / count
        self.n += count
        self.sums += column_sums - count * self.shift
        Psi -= self.shift
        rows = Psi if weights is None else Psi * np.sqrt(weights)[:, None]
        scipy.linalg.blas.dsyrk(1.0, rows.T, beta=1.0, c=self.upper, trans=0, overwrite_c=True)
        if self.has_targets:
            Y = Y - self.target_shift
            weighted = Psi if weights is None else Psi * weights[:, None]
            self.target_sums += Y.sum(axis=0) if weights is None else weights @ Y
            self.cross += weighted.T @ Y

    def moments(self):
        m, p = self.sums.size, self.target_sums.size
        if self.n == 0:
            targets = (np.zeros(p), np.zeros((m, p))) if self.has_targets else ()
            return FeatureMoments(0, np.zeros(m), np.zeros((m, m)), *targets)
        offset = self.sums / self.n
        scatter = self.upper + np.triu(self.upper, 1).T - self.n * np.outer(offset, offset)
        if not self.has_targets:
            return FeatureMoments(self.n, self.shift + offset, scatter)
        target_offset = self.target_sums / self.n
        cross = self.cross - self.n * np.outer(offset, target_offset)
        return FeatureMoments(self.n, self.shift + offset, scatter, self.target_shift + target_offset, cross)


def check_block_rows(block_rows, n_features_out):
    """Rows per block: given, or as many as BLOCK_BYTES of float64 features hold."""
    if block_rows is None:
        return max(1, BLOCK_BYTES // (8 * max(n_features_out, 1)))
    if not isinstance(block_rows, numbers.Integral) or isinstance(block_rows, bool) or block_rows < 1:
        raise ValueError(f"block_rows: must be a positive int or None, got {block_rows!r}")
    return int(block_rows)


def _blocks(feature_map, X, block_rows):
    """The data as an array (possibly with no rows, as a partition may be), and the slices of its row blocks."""
    check_is_fitted(feature_map)
    X = check_array(X, dtype=list(FLOAT_DTYPES), order="C", ensure_min_samples=0, input_name="X")
    step = check_block_rows(block_rows, feature_map._n_features_out)
    return X, [slice(start, min(start + step, X.shape[0])) for start in range(0, X.shape[0], step)]


def _raw_blocks(feature_map, X, block_rows):
    """The raw features psi(X) (phi = psi A for the map's linear map A, or psi itself) block by block, with the
    block's row slice."""
    X, blocks = _blocks(feature_map, X, block_rows)
    X = X.astype(feature_map._model_dtype, copy=False)
    for rows in blocks:
        yield rows, feature_map._raw_block(X[rows])


def feature_moments(feature_map, X, block_rows=None):
    """Moments of the features phi(X) of a fitted feature map, a block of rows at a time.

    Features of the form phi = psi A (Nyström: psi = k(x, landmarks), A = K_LL^{-1/2}) are accumulated as
    psi's moments and mapped at the end (mean A^T mu_psi, scatter A^T C_psi A): that saves the n m^2 product
    of forming phi, the largest cost besides the scatter itself.

    Parameters
    ----------
    feature_map : fitted rkm.features.Nystroem or rkm.features.RandomFourierFeatures
    X : array-like of shape (n_samples, n_features)
    block_rows : int, default=None
        Rows per block (None: as many as BLOCK_BYTES (128 MiB) of float64 features hold).

    Returns
    -------
    FeatureMoments
        Of the features in the model's dtype, accumulated in float64.
    """
    stream = MomentStream(feature_map)
    stream.add(X, block_rows=block_rows)
    return stream.moments()


class MomentStream:
    """The moments of the features phi(X) of a fitted feature map, and their cross-moments with targets Y,
    accumulated over batches of rows: a fit adds its data once, ``partial_fit`` one batch per call, a Dask
    partition its own rows (and the partitions' moments merge by ``FeatureMoments.combine``).

    Parameters
    ----------
    feature_map : fitted ExplicitFeatureMap, fitted transformer, or None
        rkm's maps (:func:`streams`) are evaluated a block of rows at a time and accumulated as their raw
        features psi (phi = psi A, mapped by A once in :meth:`moments`); another transformer's features are
        formed per batch (and copied, unless its attribute ``_returns_new_arrays`` is true: the sums shift them in
        place); None is the identity phi(x) = x.
    n_targets : int, default=0
        Columns p of the targets (0: no targets).
    """

    def __init__(self, feature_map, n_targets=0):
        self.feature_map, self.n_targets = feature_map, n_targets
        self._sums = None

    def _sums_for(self, width):
        if self._sums is None:
            self._sums = _ShiftedSums(width, self.n_targets)
        elif self._sums.sums.size != width:
            raise ValueError(f"X: its features have {width} columns, but earlier rows had {self._sums.sums.size}")
        return self._sums

    def add(self, X, Y=None, weights=None, block_rows=None, keep=False):
        """Adds the rows of X, with their targets Y (float64, (n, p)) and weights (float64, (n,); None: 1 each).

        With `keep`, returns the raw features psi(X) as a RawFeatures when X made a single block (else None).
        """
        fm = self.feature_map
        if fm is not None and streams(fm):
            A = fm._linear_map
            kept = None
            with blas_threads(thread_count(fm.n_threads)):
                for rows, Psi in _raw_blocks(fm, X, block_rows):
                    Psi = np.ascontiguousarray(Psi, dtype=np.float64)
                    sums = self._sums_for(fm._n_features_out if A is None else A.shape[0])
                    sums.add(Psi, None if Y is None else Y[rows], None if weights is None else weights[rows])
                    kept = RawFeatures(Psi, sums.shift) if keep and rows.start == 0 and Psi.size else None
            return kept
        Phi = X if fm is None else fm.transform(X)
        if sp.issparse(Phi):
            Phi = Phi.toarray()
        elif fm is None or not getattr(fm, "_returns_new_arrays", False):
            # A copy: the sums shift their block in place, and it may be the caller's array.
            Phi = np.array(Phi, dtype=np.float64, order="C", ndmin=2)
        Phi = np.ascontiguousarray(Phi, dtype=np.float64)
        self._sums_for(Phi.shape[1]).add(Phi, Y, weights)
        return None

    @property
    def n(self):
        """Rows added so far (with weights: their total weight)."""
        return 0 if self._sums is None else self._sums.n

    def moments(self):
        """The FeatureMoments of the features phi (with ``target_mean`` and ``cross`` when there are targets)."""
        if self._sums is None:
            raise ValueError("X: no rows have been added")
        return _mapped_moments(self.feature_map, self._sums.moments())


@dataclass(frozen=True, eq=False)
class RawFeatures:
    """The raw features psi(X) of a whole data set as the moments' pass left them: psi(X) - shift, float64."""

    shifted: np.ndarray
    shift: np.ndarray


def feature_moments_and_raw(feature_map, X):
    """:func:`feature_moments`, and the raw features psi(X) (a RawFeatures) when X fits one block (BLOCK_BYTES of
    float64 features: the block the pass computes anyway), else None. A second pass over the same X
    (``hidden_features(..., raw=...)``) is then one product instead of another evaluation of the feature map: for
    Nyström, of the kernel between X and the landmarks."""
    stream = MomentStream(feature_map)
    kept = stream.add(X, keep=True)
    return stream.moments(), kept


def _mapped_moments(feature_map, moments):
    """Moments of phi = psi A from those of psi: mean A^T mu_psi, scatter A^T C_psi A, cross A^T C_psi,y (psi's own
    without A)."""
    A = None if feature_map is None or not streams(feature_map) else feature_map._linear_map
    if A is None:
        return moments
    A = A.astype(np.float64)
    with blas_threads(thread_count(feature_map.n_threads)):
        mean, scatter = moments.mean @ A, A.T @ moments.scatter @ A
        if not moments.has_targets:
            return FeatureMoments(moments.n, mean, scatter)
        return FeatureMoments(moments.n, mean, scatter, moments.target_mean, A.T @ moments.cross)


def feature_target_moments(feature_map, X, Y, weights=None, block_rows=None):
    """Moments of the features phi(X) and their cross-scatter with targets Y, a block of rows at a time (the
    normal equations of a primal model, Suykens 2017 eq. 3.15, centred).

    Parameters
    ----------
    feature_map : fitted ExplicitFeatureMap, fitted transformer, or None
        As :class:`MomentStream` takes it (None: phi(x) = x).
    X : array-like of shape (n_samples, n_features)
    Y : ndarray of shape (n_samples, p)
    weights : ndarray of shape (n_samples,), default=None
        Sample weights v_i (None: 1 each): the moments' sums weigh row i by v_i.
    block_rows : int, default=None
        Rows per block (None: as many as BLOCK_BYTES (128 MiB) of float64 features hold).

    Returns
    -------
    FeatureMoments
        With ``target_mean`` (y_mean) and ``cross`` (sum_i v_i (phi_i - mu)(y_i - y_mean)^T, m x p).
    """
    Y = np.asarray(Y, dtype=np.float64)
    stream = MomentStream(feature_map, Y.shape[1])
    stream.add(X, Y, None if weights is None else np.asarray(weights, dtype=np.float64), block_rows)
    return stream.moments()


def streams(feature_map):
    """Whether the fitted feature map computes its features a block of rows at a time (rkm.features' maps)."""
    return hasattr(feature_map, "_raw_block")


def linear_outputs(feature_map, X, P, offset, block_rows=None, raw=None):
    """phi(X) P - offset for a fitted feature map, a block of rows at a time, as psi(X) (A P) - offset for
    maps of the form phi = psi A (each block then costs n m s rather than the n m^2 of forming phi). `raw`: the
    RawFeatures of this X (:func:`feature_moments_and_raw`), used instead of evaluating psi(X) again.

    Returns
    -------
    ndarray of shape (n_samples, P.shape[1])
        In the dtype of the features (float32 for a float32 model and float32 X).
    """
    A = feature_map._linear_map
    raw_projection = P if A is None else A.astype(np.float64) @ P
    X = check_array(X, dtype=list(FLOAT_DTYPES), ensure_min_samples=0, input_name="X")
    out = np.empty((X.shape[0], P.shape[1]), dtype=np.result_type(X.dtype, feature_map._model_dtype))
    with blas_threads(thread_count(feature_map.n_threads)):
        if raw is not None:
            # the core's streaming product: the BLAS's GEMM packs the tall operand for a few columns (2x slower
            # for 20000 x 500 times 500 x 10)
            projection = np.ascontiguousarray(raw_projection)
            out[:] = _core.block_product(raw.shifted, projection, thread_count(feature_map.n_threads))
            out += raw.shift @ raw_projection - offset
            return out
        for rows, Psi in _raw_blocks(feature_map, X, block_rows):
            out[rows] = Psi.astype(np.float64, copy=False) @ raw_projection - offset
    return out


def primal_components(moments, n_components=None):
    """Leading eigenpairs of the centred scatter matrix C of the features.

    The eigenvalues of C are the nonzero eigenvalues of the centred approximate kernel matrix Phi_c Phi_c^T
    (the eigenvalues of kernel PCA with eta = 1).

    Parameters
    ----------
    moments : FeatureMoments
    n_components : int, default=None
        Number of eigenpairs s, at most m (None: all m).

    Returns
    -------
    eigenvalues : ndarray of shape (s,), float64
        Descending; those at or below the rounding level m eps lambda_max of C are set to 0.
    U : ndarray of shape (m, s), float64
        Orthonormal eigenvectors, each with its entry of largest magnitude positive.
    """
    m = moments.scatter.shape[0]
    s = m if n_components is None else n_components
    if not isinstance(s, numbers.Integral) or isinstance(s, bool) or not 1 <= s <= m:
        raise ValueError(f"n_components: must be between 1 and the number of features {m}, got {n_components!r}")
    w, U = scipy.linalg.eigh(moments.scatter, subset_by_index=[m - s, m - 1], check_finite=False)
    w, U = w[::-1], U[:, ::-1]
    rounding = m * np.finfo(np.float64).eps * max(w[0], 0.0)
    eigenvalues = np.where(w > rounding, w, 0.0)
    return eigenvalues, np.ascontiguousarray(fix_signs(U))


def hidden_features(feature_map, X, mean, U, eigenvalues, block_rows=None, raw=None):
    """Hidden features H = (phi(X) - mean) U diag(eigenvalues)^{-1/2}, 0 where an eigenvalue is 0.

    On the data the moments came from, H has orthonormal columns (those with a positive eigenvalue): the
    eigenvectors of the centred approximate kernel matrix. Computed as psi(X) (A P) - mean P with
    P = U diag(eigenvalues)^{-1/2}, so each block costs n m s rather than the n m^2 of forming phi.

    Parameters
    ----------
    feature_map : fitted rkm.features.Nystroem or rkm.features.RandomFourierFeatures
    X : array-like of shape (n_samples, n_features)
    mean : array-like of shape (m,)
        The features' mean (``FeatureMoments.mean``).
    U : array-like of shape (m, s)
    eigenvalues : array-like of shape (s,)
        As :func:`primal_components` returns them.
    block_rows : int, default=None
        Rows per block (None: as many as BLOCK_BYTES (128 MiB) of float64 features hold).
    raw : RawFeatures, default=None
        The raw features of this X from :func:`feature_moments_and_raw`, instead of a second evaluation.

    Returns
    -------
    H : ndarray of shape (n_samples, s)
        In the dtype of the features (float32 for a float32 model and float32 X).
    """
    m = feature_map._n_features_out
    mean = np.asarray(mean, dtype=np.float64)
    U = np.asarray(U, dtype=np.float64)
    eigenvalues = np.asarray(eigenvalues, dtype=np.float64)
    if mean.shape != (m,):
        raise ValueError(f"mean: must have shape ({m},), got {mean.shape}")
    if U.ndim != 2 or U.shape[0] != m:
        raise ValueError(f"U: must have shape ({m}, s), got {U.shape}")
    if eigenvalues.shape != (U.shape[1],):
        raise ValueError(f"eigenvalues: must have shape ({U.shape[1]},), got {eigenvalues.shape}")
    positive = eigenvalues > 0
    scale = np.divide(1.0, np.sqrt(np.where(positive, eigenvalues, 1.0))) * positive
    projection = U * scale
    return linear_outputs(feature_map, X, projection, mean @ projection, block_rows, raw)
