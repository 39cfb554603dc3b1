"""Multi-view kernel PCA as a restricted kernel machine, in the primal or the dual, by eigendecomposition or on
the Stiefel manifold, with inference of a missing view.

Equation, algorithm and figure numbers refer to S. Achten, A. Pandey, H. De Meulemeester, B. De Moor and
J. A. K. Suykens, "Duality in multi-view restricted kernel machines" (2023). Each of V views has a feature map
phi_v, explicit (the identity of a linear view, or a fitted transformer such as
:class:`rkm.features.RandomFourierFeatures`) or implicit through a kernel k_v (named, or a callable k(X, Y)). With
Phi = [Phi_1 ... Phi_V] the centred features (n x d) and K = sum_v M K_v M the summed double-centred kernels
(M = I - 11^T / n):

- primal (Algorithms 1 and 3): the top s eigenvectors U~ of C = Phi^T Phi, or a minimizer of -1/2 Tr(U~^T C U~)
  over U~^T U~ = I (eq. 8), Gamma = U~^T C U~ (eq. 9), U = U~ Gamma^(1/2) (Corollary 3.4) and the hidden features
  H = Phi U Gamma^(-1) (eq. 6);
- dual (Algorithms 2 and 4): the top s eigenvectors H of K (eq. 14), or a minimizer of -1/2 Tr(H^T K H) over
  H^T H = I (eq. 12), Gamma = H^T K H (eq. 13), and for explicit maps U_v = Phi_v^T H (eq. 5).

A Stiefel solution is a rotation of the eigen solution; ``rotate=True`` turns it into it (O, Lambda = eig(Gamma),
steps 7-9 of Algorithms 3 and 4). New points get hidden features from all views by eq. 6, and a missing view k is
inferred from the others by eq. 15 (primal) or eq. 16 (dual) followed by a pre-image.
"""

from __future__ import annotations

import dataclasses
import functools
import numbers
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin, _fit_context, clone
from sklearn.utils import get_tags
from sklearn.utils._param_validation import HasMethods, Interval, StrOptions
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted, validate_data

from rkm import _core, stiefel
from rkm._utils import eigen, primal
from rkm._utils.device import check_device, require_cuda
from rkm._utils.eigen import sign_flips
from rkm._utils.progress import Progress
from rkm._utils.streaming import RESERVOIR_ROWS, DeferredSolveMixin, Reservoir
from rkm._utils.threads import blas_threads, thread_count
from rkm._utils.validation import (
    COUNT,
    MAX_ITER,
    N_THREADS,
    POSITIVE,
    POSITIVE_INT,
    RANDOM_STATE,
    TOL,
    VERBOSE,
    check_matrix,
    is_view_list,
    kernel_constraints,
)
from rkm._utils.warn import warn
from rkm.exceptions import ConvergenceWarning
from rkm.kernels import Kernel, kernel_matrix, kernel_spec
from rkm.preimage import gaussian_fixed_point, ridge_preimage_coefficients, smoother_preimage, with_feature_mean

__all__ = ["MultiViewRKM"]

SOLVERS = ("auto", "primal_eig", "dual_eig", "primal_stiefel", "dual_stiefel")
PREIMAGES = ("auto", "smoother", "ridge", "fixed_point")
# A view's entry of `kernel` beyond the named kernels: an explicit feature map (a transformer, cloned, then fitted on
# the view) or a kernel function k(X, Y) returning the kernel matrix (as scikit-learn's SVC takes one).
VIEW_MAPS = [HasMethods(["fit", "transform"]), callable]
# The kernel parameters that take one value for every view or a sequence with one per view.
PER_VIEW = ("kernel", "gamma", "degree", "coef0")
# solver="auto" with explicit maps only: the dual while n_samples <= AUTO_DUAL_FEATURE_RATIO * d (the summed
# feature dimension), the primal beyond. Measured fits (one thread, an RFF view and a 1-D linear view): at n = 1000
# primal/dual time ratios 0.15, 0.55, 0.86, 2.9, 7.0 for d = 101, 501, 1001, 2001, 5001 (s = 10) and 0.66, 0.51,
# 1.04, 1.8, 6.9 (s = 100); n = 2000, d = 1001: 0.46 (s = 10), 0.95 (s = 100); n = 5000, d = 201: 0.03, 0.19.
AUTO_DUAL_FEATURE_RATIO = 1.0
# Stiefel solvers stop when ||A X - X Gamma||_F <= tol ||A||_F (A = C or K): the Riemannian gradient's norm.
DEFAULT_STIEFEL_TOL = 1e-10
DEFAULT_STIEFEL_MAX_ITER = 1000
# Gamma - B_k (eqs. 15-16) counts as singular below this fraction of Gamma's largest eigenvalue.
SINGULAR_RATIO = 1e-12
# Bytes of the test kernel rows computed at once.
ROW_BLOCK_BYTES = 64 * 2**20


@dataclass(eq=False)
class _View:
    """The fitted state of one view.

    kind is "linear" (identity map), "map" (explicit features from a fitted transformer), "kernel" (implicit, a
    named kernel; source is its (name, gamma, degree, coef0) spec) or "callable" (implicit, a kernel function
    k(X, Y)). X is the view's training input (a copy: float64 C-ordered, or a CSR array for sparse input).
    ``projection`` is K_c,v H (dual) or Phi_c,v U_v (primal), n x s; with ``column_means`` (those of the
    uncentred training kernel) it gives the predicted similarities of a missing view to the training points.
    ``coupling`` is B_v = U_v^T U_v (primal) or H^T K_c,v H (dual), the view's share of Gamma, and
    ``inference`` the eigendecomposition of Gamma - B_v that infers the view from the others (eqs. 15-16).
    ``eta`` is the view's RKM constant: K = sum_v (1/eta_v) K_v (U_v, projection and the pre-images stay those of
    the unweighted features: the weight only sets the view's share of the hidden features). ``preimage`` is the
    resolved pre-image of the view ("identity" for a linear view).
    ``name`` is the entry of the ``kernel`` parameter that messages about the view's map cite, ``label`` the
    argument that messages about its data cite ("views[1]", or "X (view 1)" for a split array).
    """

    kind: str
    source: object
    X: np.ndarray
    gamma: float = None
    dim: int = None
    features: np.ndarray = None
    mean: np.ndarray = None
    column_means: np.ndarray = None
    grand_mean: float = None
    U: np.ndarray = None
    projection: np.ndarray = None
    coupling: np.ndarray = None
    inference: tuple = None
    ridge: tuple = None
    eta: float = 1.0
    preimage: str = None
    name: str = "kernel"
    label: str = "views[0]"

    @property
    def explicit(self):
        return self.kind in ("linear", "map")

    def dense_inputs(self):
        """The training inputs as a dense array (the pre-images average or regress onto them)."""
        return self.X.toarray() if sp.issparse(self.X) else self.X


def _check_view(X, name, n_columns=None, copy=False):
    """A finite float64 2-D view (a 1-D array is one column): C-ordered dense, or a CSR array for scipy sparse
    input. copy=True for the arrays a fitted model keeps (changing the caller's array then changes nothing)."""
    if X is None:
        raise ValueError(f"{name}: an array is required, got None")
    if sp.issparse(X):
        if X.dtype.kind not in "biuf":
            raise ValueError(f"{name}: must be a sparse array of real numbers, got dtype {X.dtype}")
        if X.ndim != 2 or 0 in X.shape:
            raise ValueError(f"{name}: must be a non-empty 2-D sparse array, got shape {X.shape}")
        A = sp.csr_array(X, dtype=np.float64, copy=copy)
        if not np.all(np.isfinite(A.data)):
            raise ValueError(f"{name}: contains NaN or infinity")
    else:
        A = np.asarray(X)
        if A.dtype.kind not in "biuf":
            raise ValueError(f"{name}: must be an array of real numbers, got dtype {A.dtype}")
        if A.ndim == 1:
            A = A[:, None]
        if A.ndim != 2 or 0 in A.shape:
            raise ValueError(f"{name}: must be a non-empty 1-D or 2-D array, got shape {A.shape}")
        if not np.all(np.isfinite(A)):
            raise ValueError(f"{name}: contains NaN or infinity")
        A = check_matrix(A, name, copy=copy).astype(np.float64, copy=False)
    if n_columns is not None and A.shape[1] != n_columns:
        raise ValueError(f"{name}: has {A.shape[1]} columns but the model was fitted with {n_columns}")
    return A


def _check_views(views, n_views=None, missing=(), n_columns=None, why="", names=None, copy=False):
    """The views as finite float64 2-D arrays with one common number of rows; the entries `missing` (indices) are
    ignored (None).
    n_views=None accepts any number of views; `why` follows the count in the message of a wrong one; `names`
    are the arguments that messages cite (default "views[v]")."""
    if not isinstance(views, (list, tuple)) or len(views) == 0:
        raise ValueError(f"views: must be a non-empty list or tuple of arrays (one per view), got {views!r:.80}")
    if n_views is not None and len(views) != n_views:
        raise ValueError(f"views: got {len(views)} views but the model has {n_views}{why}")
    names = names or [f"views[{v}]" for v in range(len(views))]
    arrays = [
        None if v in missing else _check_view(X, names[v], None if n_columns is None else n_columns[v], copy=copy)
        for v, X in enumerate(views)
    ]
    rows = [A.shape[0] for A in arrays if A is not None]
    if len(set(rows)) > 1:
        raise ValueError(f"views: all views need the same number of rows, got {rows}")
    return arrays


def _per_view(value, name, n_views):
    """A per-view parameter as a list of n_views entries: one value for every view, or a list or tuple of them."""
    if not isinstance(value, (list, tuple)):
        return [value] * n_views
    if len(value) != n_views:
        raise ValueError(
            f"{name}: must be one value or a list or tuple with one entry per view ({n_views}), got {value!r:.80}"
        )
    return list(value)


def _renamed(error, index, sequences):
    """kernel_spec's "kernel: ...", "gamma: ...", "degree: ..." and "coef0: ..." messages: a parameter given as a
    sequence (one of `sequences`) is named with the view's index, "gamma[1]: ..."."""
    message = str(error)
    for name in PER_VIEW:
        if message.startswith(f"{name}:") and name in sequences:
            return ValueError(f"{name}[{index}]:" + message[len(name) + 1 :])
    return error


def _explicit_features(source, X, name):
    """phi(X) of a fitted transformer, checked: 2-D, one row per sample, finite."""
    Phi = source.transform(X)
    Phi = np.asarray(Phi.toarray() if sp.issparse(Phi) else Phi, dtype=np.float64)
    if Phi.ndim != 2 or Phi.shape[0] != X.shape[0] or Phi.shape[1] == 0:
        raise ValueError(
            f"{name}: the feature map must return a 2-D array with one row per sample ({X.shape[0]}), "
            f"got shape {Phi.shape}"
        )
    if not np.all(np.isfinite(Phi)):
        raise ValueError(f"{name}: the feature map returned NaN or infinity")
    return np.ascontiguousarray(Phi)


def _holds_dask(views):
    """Whether views are Dask collections: one array or DataFrame, or a list with a Dask entry."""
    from rkm._utils.dask_arrays import is_dask_collection

    if isinstance(views, (list, tuple)):
        return any(is_dask_collection(X) for X in views)
    return is_dask_collection(views)


def _explicit_entry(entry):
    """Whether an entry of ``kernel`` is an explicit feature map: "linear" (or a linear Kernel) or a transformer."""
    if isinstance(entry, (str, Kernel)):
        try:
            return kernel_spec(entry)[0] == "linear"
        except ValueError:
            return False
    return hasattr(entry, "fit") and hasattr(entry, "transform")


def _without_data(view):
    """The view without its training inputs and features: what tasks on other rows need of it (its map, and once
    solved its mean and U_v), light to ship to Dask workers."""
    return dataclasses.replace(view, X=None, features=None)


def _block_features(view, X):
    """The explicit features of a block of rows of a view, dense float64: X itself for a linear view."""
    if view.kind == "linear":
        return np.asarray(X.toarray() if sp.issparse(X) else X, dtype=np.float64)
    if primal.streams(view.source) and not sp.issparse(X):
        # rkm's maps compute a block's features directly, without transform's validation and copy into a new
        # array: the rows were checked with the view, and the maps give finite features of finite rows.
        block = np.ascontiguousarray(X, dtype=view.source._model_dtype)
        return np.asarray(view.source._transform_block(block), dtype=np.float64)
    return _explicit_features(view.source, X, view.name)


def _training_features(view):
    """An explicit view's training features and their mean (the dual's K_v = Phi_v Phi_v^T and U_v)."""
    if view.kind == "linear":
        view.features = view.X
    elif view.kind == "map":
        view.features = _explicit_features(view.source, view.X, view.name)
    if view.explicit:
        view.mean = np.asarray(view.features.mean(axis=0), dtype=np.float64).reshape(-1)


class _ViewFeatures:
    """The primal's features of a block of rows of every view, [phi_1 / sqrt(eta_1), ..., phi_V / sqrt(eta_V)]
    side by side (their covariance is the primal twin of sum_v K_v / eta_v), for
    :class:`rkm._utils.primal.MomentStream`. It holds the views' maps only, not their data."""

    # transform concatenates into a new array, which the stream may shift in place.
    _returns_new_arrays = True

    def __init__(self, views):
        self.views = [_without_data(view) for view in views]
        self.width = sum(view.dim for view in views)

    def transform(self, blocks):
        Phi = np.empty((blocks[0].shape[0], self.width))
        start = 0
        for view, X in zip(self.views, blocks, strict=True):
            part = _block_features(view, X)
            stop = start + part.shape[1]
            Phi[:, start:stop] = part if view.eta == 1.0 else part * view.eta**-0.5
            start = stop
        return Phi


def _primal_rows(views, gamma, blocks):
    """For a block of rows of every view: the hidden features h = Gamma^(-1) sum_v U_v^T phi_c,v / eta_v (eq. 6),
    and for each map view its projections Phi_c,v U_v and column means phi_v^T mean_v (the predicted similarities
    of a missing view to these rows)."""
    scores, projections, column_means = 0.0, [], []
    for view, X in zip(views, blocks, strict=True):
        Phi = _block_features(view, X)
        projection = Phi @ view.U - view.mean @ view.U
        scores = scores + projection / view.eta
        if view.kind == "map":
            projections.append(projection)
            column_means.append(Phi @ view.mean)
    return np.linalg.solve(gamma, scores.T).T, projections, column_means


def _hidden_rows(blocks, views, gamma):
    """The hidden features of a block of rows of every view (a Dask task of the second pass)."""
    return _primal_rows(views, gamma, blocks)[0]


def _call_method(blocks, model, method, absent=(), **options):
    """model.<method>(views, **options) on one partition of Dask views, None at the positions `absent`."""
    views = list(blocks)
    for v in absent:
        views.insert(v, None)
    return getattr(model, method)(views, **options)


def _stacked(parts):
    """The row blocks of (H, projections, column means) of :meth:`MultiViewRKM._primal_rows` stacked."""
    parts = list(parts)
    H = np.vstack([part[0] for part in parts])
    projections = [np.vstack(blocks) for blocks in zip(*(part[1] for part in parts), strict=True)]
    column_means = [np.concatenate(blocks) for blocks in zip(*(part[2] for part in parts), strict=True)]
    return H, projections, column_means


@functools.cache
def _kernel_matrix_takes_sparse(name):
    """Whether rkm.kernels.kernel_matrix computes the named kernel on scipy sparse input."""
    try:
        kernel_matrix(sp.csr_array(np.eye(2)), None, name)
    except (TypeError, ValueError):
        return False
    return True


def _entry_takes_sparse(entry):
    """Whether a view with this entry of ``kernel`` accepts scipy sparse input."""
    if isinstance(entry, (str, Kernel)):
        try:
            name = kernel_spec(entry)[0]
        except ValueError:
            return False
        return name == "linear" or _kernel_matrix_takes_sparse(name)
    if hasattr(entry, "fit") and hasattr(entry, "transform"):
        return get_tags(entry).input_tags.sparse
    return False


def _check_finite_kernel(K, view):
    """Refuse a kernel matrix that overflowed (inputs too large for float64), naming the view."""
    if not np.all(np.isfinite(K)):
        raise ValueError(
            f"{view.label}: the kernel matrix of the view overflows float64 (entries infinite or NaN); scale the "
            "view's values down (e.g. standardize them)"
        )


def _symmetric_power(vectors, values, power):
    """O diag(values**power) O^T."""
    return (vectors * values**power) @ vectors.T


class MultiViewRKM(DeferredSolveMixin, ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Multi-view kernel PCA in the restricted kernel machine framework (Achten et al. 2023).

    Training finds s hidden features per sample shared by all views (the rows of H) and the interconnection
    matrix Gamma: the top s eigenpairs of the concatenated features' covariance C (primal, Corollary 3.4) or of
    the summed centred kernel matrices K (dual, Corollary 3.6), or a solution on the Stiefel manifold that equals
    them up to a rotation (Lemmas 3.2 and 3.5). With explicit feature maps the four solvers give the same H,
    eigenvalues, hidden features of new points and inferred views (up to the solver's tolerance; eigenvectors
    with their signs fixed so that the largest entry of each column of H is positive).

    Centring uses training statistics only: the primal subtracts the training feature means from every feature
    vector; the dual double-centres the training kernels and fully centres the kernel row k(x*) of a new point,
    k~ = k - colmeans(K_v) - mean(k) + mean(K_v), so that primal and dual agree for non-centred data too.

    Parameters
    ----------
    n_components : int
        Number of components s (hidden features per sample).
    kernel : str, Kernel, transformer, callable, or a list or tuple of them, default="rbf"
        The feature map of every view, or a sequence with one entry per view (which fixes the number of views):
        a kernel name ("rbf", "laplacian", "poly", "cosine", "tanimoto": implicit, dual only; "linear": the
        identity map, explicit), an :class:`rkm.kernels.Kernel` (its own parameters apply), a transformer with
        ``fit``/``transform`` (an explicit feature map, cloned, then fitted on the view's training data, e.g.
        :class:`rkm.features.RandomFourierFeatures`, :class:`rkm.features.Nystroem`, or a function phi wrapped
        as ``sklearn.preprocessing.FunctionTransformer(phi)``), or a callable kernel function ``k(X, Y)``
        returning the (n_X, n_Y) kernel matrix (implicit, dual only; as scikit-learn's ``SVC`` takes one). The
        default makes every view an implicit rbf view, the vocabulary's default kernel; the paper's forecasting
        set-up is ``kernel=("rbf", "linear")`` (a linear output view is its own pre-image).
    gamma : float, None, or a list or tuple of them, default=None
        Bandwidth of the named kernels, one for every view or one per view (None: 1 / n_features of that view);
        ignored for kernels without one, for Kernel objects and for explicit maps.
    degree : float or a list or tuple of them, default=3
        Degree of the named polynomial kernels, one for every view or one per view.
    coef0 : float or a list or tuple of them, default=1.0
        Constant of the named polynomial kernels, one for every view or one per view.
    eta : float or a list or tuple of them, default=1.0
        The RKM constant eta_v of each view (one for every view, or one per view): training solves the
        eigenproblem of sum_v (1/eta_v) K_v (Gen-RKM eq. 3 and its footnote 2; the primal scales view v's
        features by eta_v^(-1/2)), so a smaller eta_v gives view v more weight in the hidden features. Only
        ratios matter for H and the inferred views; the eigenvalues scale with 1/eta.
    solver : {"auto", "primal_eig", "dual_eig", "primal_stiefel", "dual_stiefel"}, default="auto"
        Algorithms 1 to 4. "auto" follows the flowchart of Fig. 1 for fixed feature maps: the dual when a view
        is implicit or when n_samples <= d (the summed feature dimension), the primal otherwise, both by
        eigendecomposition. The eigendecomposition uses LAPACK for at most 200 rows or more than a fifth of the
        spectrum, else the block Krylov solver.
    rotate : bool, default=True
        Stiefel solvers: rotate the solution by the eigenvectors O of Gamma so that Gamma becomes the diagonal
        Lambda and H, U equal the eigen solution (steps 7-9 of Algorithms 3-4). Without rotation H and U are a
        rotation of it and Gamma = O Lambda O^T is not diagonal; predictions are the same.
    rescale : bool, default=True
        Primal solvers: U = U~ Gamma^(1/2) (step 6 of Algorithm 1, step 13 of Algorithm 3). False keeps U = U~,
        the ablation of the paper's Fig. 7: the hidden features are then scaled by Gamma^(-1/2) and the inferred
        views collapse towards the training mean. No effect on the dual.
    stiefel_method : {"cayley_bb", "pg", "pg_anderson", "cayley_adam", "penalty"}, default="cayley_bb"
        Method of :func:`rkm.stiefel.minimize` for the Stiefel solvers ("cayley_adam" is the paper's optimizer).
    max_iter : int or None, default=None
        Most iterations of the Stiefel method (None: 1000), or block products of the Krylov eigensolver (None:
        its default).
    tol : float or None, default=None
        Stiefel solvers stop when ||A X - X Gamma||_F <= tol ||A||_F, A = C or K (the Riemannian gradient of
        eqs. 8 and 12; None: 1e-10). The Krylov eigensolver stops at relative residual tol (None: 1e-10).
    preimage : {"auto", "smoother", "ridge", "fixed_point"} or a list or tuple of them, default="auto"
        Pre-image of an inferred view that is not linear (a linear view is its own pre-image), one method for
        every view or one per view: the kernel smoother over the ``n_neighbors`` training points most similar by
        the predicted kernel row (Gen-RKM eq. 8); a kernel ridge map from the scaled hidden features
        H Gamma^(1/2) to the view's inputs learned at fit time (penalty ``preimage_alpha``; the view's kernel,
        or rbf with gamma 1/s for an explicit map, as scikit-learn's ``fit_inverse_transform``); or the
        fixed-point iteration of Mika et al. (1999) for an rbf view (implicit, so a dual solver), started at the
        smoother's pre-image, which minimizes the feature-space distance to the view's projection
        sum_i (H h*)_i phi~_v(x_i) plus the feature mean (at most ``preimage_max_iter`` iterations). "auto":
        smoother.
    n_neighbors : int, default=10
        Training points the kernel smoother averages.
    preimage_alpha : float, default=1.0
        Ridge penalty of the learned pre-image map.
    preimage_max_iter : int, default=100
        Iterations of the fixed-point pre-image.
    view_columns : None, int, or a list or tuple of column selections, default=None
        How a single 2-D array X given to ``fit``, ``transform``, ``predict_latent`` or ``predict_view`` (instead
        of a list of views) is split into views by its columns: None, X is one view; an int V, X's columns in V
        contiguous groups of (nearly) equal width (``numpy.array_split``); a sequence, one entry per view, each a
        slice or a list of integer column positions (views may share columns). It lets the model take the
        (n_samples, n_features) array of scikit-learn's pipelines, grid searches and estimator checks. A list or
        tuple of arrays given to those methods is a list of views, whatever this parameter (a list of lists of
        numbers is the rows of one array, as in scikit-learn).
    n_threads : int or None, default=None
        Threads for the core and BLAS (None: OpenMP's default; -1: all cores).
    random_state : int, RandomState or None, default=None
        Seeds the Stiefel start (:func:`rkm.stiefel.random_point`) and the Krylov start block.
    device : {"cpu", "cuda", "cuda:N"}, default="cpu"
        Where the Gram matrices of the views with a named kernel and dense inputs are computed (rkm built with
        ``-Ccmake.define.RKM_CUDA=ON`` and an NVIDIA GPU); they come back to the host, where centring, the
        eigenproblem or Stiefel iterations and the other views (callable kernels, sparse inputs, explicit
        feature maps) run.
    verbose : int, default=0
        Prints the resolved solver and the fit's stages; > 1 also the Stiefel method's history.

    Attributes
    ----------
    eigenvalues_ : ndarray of shape (s,)
        Lambda, descending: the eigenvalues of C or K (eig solvers), of Gamma (Stiefel solvers).
    gamma_matrix_ : ndarray of shape (s, s)
        Gamma as trained: U~^T C U~ or H^T K H before any rotation (Stiefel), diag(Lambda) (eig).
    H_ : ndarray of shape (n_samples, s)
        Hidden features of the training points, eq. 6 (orthonormal columns unless ``rescale=False``).
    U_ : list of (ndarray of shape (d_v, s) or None)
        U_v per view (eq. 5 in the dual); None for implicit views.
    rotation_ : ndarray of shape (s, s) or None
        Stiefel solvers: O with ``gamma_matrix_`` = O diag(``eigenvalues_``) O^T; with ``rotate`` it has been applied
        (``H_`` = H_trained O). None for the eig solvers.
    solver_ : str
        The solver used.
    n_views_ : int
    view_dims_ : list of (int or None)
        Feature dimension d_v of each explicit view, None for implicit ones.
    input_dims_ : list of int
        Columns of each view's input.
    gamma_ : list of (float or None)
        Bandwidth used by each view's named kernel (None where there is none).
    objective_ : float
        -1/2 Tr(Gamma), the value of eq. 8 or 12 without its constant 1/2 Tr(C) term.
    n_iter_ : int
        Iterations of the Stiefel method, block products of the Krylov solver, 1 for LAPACK.
    stiefel_result_ : rkm.stiefel.StiefelResult or None
        The Stiefel method's result (None for the eig solvers).
    preimages_ : list of str
        Pre-image of each view: "identity" for linear views, else the resolved ``preimage``.
    view_columns_ : list of ndarray or None
        For a fit on one array: the column positions of each view (from ``view_columns``); None for a list.
    n_samples_seen_ : int
        Rows added by :meth:`partial_fit` since its stream started (absent after ``fit``).
    n_features_in_ : int
        For a fit on one array: its number of columns (absent after a fit on a list of views).
    feature_names_in_ : ndarray of shape (``n_features_in_``,)
        For a fit on a DataFrame with string column names.

    Notes
    -----
    Inputs are taken in float64, and the fitted model keeps a copy of the training views (changing the caller's
    arrays after ``fit`` changes nothing). Views may be scipy sparse matrices or arrays: a "linear" view through
    sparse products (the primal solvers densify its features), an explicit feature map gets the sparse array
    as it is, a callable kernel too, and a named non-linear kernel where :func:`rkm.kernels.kernel_matrix`
    takes sparse input (otherwise a TypeError says so). The pre-image of a sparse non-linear view is dense.

    Large N: the primal solvers stream the features in blocks of rows (their covariance, then H), never
    forming the n x d feature matrix. With explicit views, :meth:`partial_fit` adds batches of rows to the
    features' moments, and ``fit`` takes Dask arrays (a list of views chunked by rows, or one array or DataFrame
    split by ``view_columns``): the covariance as one map-reduce over the partitions, H as a second map, and a
    uniform sample of 2000 rows (``rkm._utils.streaming.RESERVOIR_ROWS``) kept for the map views' pre-images;
    ``transform``, ``predict_latent`` and ``predict_view`` of Dask views return lazy Dask arrays.

    With a single array and ``view_columns``, MultiViewRKM is a scikit-learn transformer (``fit_transform``,
    ``set_output``, ``get_feature_names_out``, pipelines, ``clone``-based grid searches): it passes
    scikit-learn's estimator checks. A list of views takes the same methods, but scikit-learn's own
    utilities (pipelines, cross-validation splitters) only split arrays.

    Examples
    --------
    >>> import numpy as np
    >>> from rkm import MultiViewRKM
    >>> t = np.linspace(0.0, 6.0, 100)[:, None]
    >>> model = MultiViewRKM(2, kernel=("rbf", "linear"), gamma=(0.5, None)).fit([t, np.sin(t)])
    >>> model.transform([t, np.sin(t)]).shape, model.predict_view([t[:3], None], missing=1).shape
    ((100, 2), (3, 1))

    The same model on one array whose columns are split into the two views, as in a pipeline:

    >>> X = np.hstack([t, np.sin(t)])
    >>> model = MultiViewRKM(2, kernel=("rbf", "linear"), gamma=(0.5, None), view_columns=2).fit(X)
    >>> model.predict_view(X[:3], missing=1).shape  # the missing view's columns are ignored (may be NaN)
    (3, 1)
    """

    _parameter_constraints: dict = {
        "n_components": COUNT,
        **kernel_constraints(precomputed=False, per_level=True),
        "solver": [StrOptions(set(SOLVERS))],
        "rotate": ["boolean"],
        "rescale": ["boolean"],
        "stiefel_method": [StrOptions(set(stiefel.METHODS))],
        "max_iter": MAX_ITER,
        "tol": TOL,
        "eta": [Interval(numbers.Real, 0, None, closed="neither"), list, tuple],
        "preimage": [StrOptions(set(PREIMAGES)), list, tuple],
        "n_neighbors": POSITIVE_INT,
        "preimage_alpha": POSITIVE,
        "preimage_max_iter": POSITIVE_INT,
        "view_columns": [None, Interval(numbers.Integral, 1, None, closed="left"), list, tuple],
        "n_threads": N_THREADS,
        "random_state": RANDOM_STATE,
        "device": [str],
        "verbose": VERBOSE,
    }
    # A view's entry of `kernel` may also be an explicit feature map.
    _parameter_constraints["kernel"] = [*_parameter_constraints["kernel"], *VIEW_MAPS]

    def __init__(
        self,
        n_components: int,
        *,
        kernel="rbf",
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
        preimage: str = "auto",
        n_neighbors: int = 10,
        preimage_alpha: float = 1.0,
        preimage_max_iter: int = 100,
        view_columns=None,
        n_threads: int | None = None,
        random_state=None,
        device: str = "cpu",
        verbose: int = 0,
    ):
        self.n_components = n_components
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.eta = eta
        self.solver = solver
        self.rotate = rotate
        self.rescale = rescale
        self.stiefel_method = stiefel_method
        self.max_iter = max_iter
        self.tol = tol
        self.preimage = preimage
        self.n_neighbors = n_neighbors
        self.preimage_alpha = preimage_alpha
        self.preimage_max_iter = preimage_max_iter
        self.view_columns = view_columns
        self.n_threads = n_threads
        self.random_state = random_state
        self.device = device
        self.verbose = verbose

    # ------------------------------------------------------------------ parameters

    def _check_params_vs_input(self, arrays):
        """The rules that need the views: one entry per view in each per-view parameter, each view's kernel entry
        resolved and checked (with its gamma, degree and coef0), and no implicit view for a primal solver.

        Returns the (kind, source, gamma, name, eta, preimage) of each view: kind "kernel" with the spec (name,
        gamma, degree, coef0), "linear" (source None), "map" (an unfitted transformer clone) or "callable" (a
        kernel function); name is the parameter entry that messages about the view's map cite ("kernel" or
        "kernel[1]"); eta the view's RKM constant and preimage its resolved pre-image method."""
        n_views = len(arrays)
        cuda = check_device(self.device)
        if cuda is not None:
            require_cuda(cuda, cublas=True)
        if isinstance(self.kernel, (list, tuple)) and len(self.kernel) == 0:
            raise ValueError(
                f"kernel: must be one value or a non-empty list or tuple (one entry per view), got {self.kernel!r}"
            )
        values = {name: _per_view(getattr(self, name), name, n_views) for name in PER_VIEW}
        sequences = [name for name in PER_VIEW if isinstance(getattr(self, name), (list, tuple))]
        sources = []
        for index, X in enumerate(arrays):
            entry, gamma, degree, coef0 = (values[name][index] for name in PER_VIEW)
            cited = f"kernel[{index}]" if "kernel" in sequences else "kernel"
            if isinstance(entry, (str, Kernel)):
                try:
                    spec = kernel_spec(entry, gamma, degree, coef0, X.shape[1])
                except ValueError as error:
                    raise _renamed(error, index, sequences) from None
                linear = spec[0] == "linear"
                sources.append(("linear", None, None, cited) if linear else ("kernel", spec, spec[1], cited))
            elif hasattr(entry, "fit") and hasattr(entry, "transform"):
                sources.append(("map", clone(entry, safe=False), None, cited))
            elif callable(entry):
                sources.append(("callable", entry, None, cited))
            else:
                raise ValueError(
                    f"{cited}: must be a kernel name, an rkm.kernels.Kernel, a transformer with fit and transform, "
                    f"or a callable kernel k(X, Y), got {entry!r}"
                )
        implicit = [index for index, source in enumerate(sources) if source[0] in ("kernel", "callable")]
        if self.solver.startswith("primal") and implicit:
            index = implicit[0]
            what = "a callable" if sources[index][0] == "callable" else repr(sources[index][1][0])
            raise ValueError(
                f"solver: {self.solver!r} needs explicit feature maps, but view {index} has the implicit kernel "
                f"{what}; use a dual solver, or an explicit map such as rkm.features.RandomFourierFeatures"
            )
        etas = self._view_etas(n_views)
        preimages = self._view_preimages(sources)
        return [(*source, eta, preimage) for source, eta, preimage in zip(sources, etas, preimages, strict=True)]

    def _view_etas(self, n_views):
        """eta_v per view, each a positive finite number."""
        etas = _per_view(self.eta, "eta", n_views)
        cited = "eta[{}]" if isinstance(self.eta, (list, tuple)) else "eta"
        for index, value in enumerate(etas):
            valid = isinstance(value, numbers.Real) and not isinstance(value, bool) and np.isfinite(value)
            if not valid or value <= 0:
                raise ValueError(f"{cited.format(index)}: must be a positive finite number, got {value!r}")
        return [float(value) for value in etas]

    def _view_preimages(self, sources):
        """The resolved pre-image method of each view: "identity" for a linear view, "auto" -> "smoother", and
        "fixed_point" only for an rbf view."""
        methods = _per_view(self.preimage, "preimage", len(sources))
        cited = "preimage[{}]" if isinstance(self.preimage, (list, tuple)) else "preimage"
        resolved = []
        for index, ((kind, source, _, _), method) in enumerate(zip(sources, methods, strict=True)):
            if not isinstance(method, str) or method not in PREIMAGES:
                raise ValueError(f"{cited.format(index)}: must be one of {', '.join(PREIMAGES)}, got {method!r}")
            if kind == "linear":
                resolved.append("identity")
                continue
            if method == "fixed_point" and not (kind == "kernel" and source[0] == "rbf"):
                what = repr(source[0]) if kind == "kernel" else f"an {'explicit map' if kind == 'map' else kind}"
                raise ValueError(
                    f"{cited.format(index)}: 'fixed_point' needs an rbf view (implicit), but view {index} has {what}; "
                    "use 'smoother' or 'ridge' for it (preimage takes one method per view)"
                )
            resolved.append("smoother" if method == "auto" else method)
        return resolved

    def _resolve_solver(self, views, n_samples):
        """The solver of solver="auto" (Fig. 1), and n_components checked against the size of the problem it
        solves: n_samples in the dual, the summed dimension d of the fitted feature maps in the primal (known
        only once the maps are fitted, hence here rather than in _check_params_vs_input)."""
        solver = self.solver
        if solver == "auto":
            d = None if any(not view.explicit for view in views) else sum(view.dim for view in views)
            solver = "dual_eig" if d is None or n_samples <= AUTO_DUAL_FEATURE_RATIO * d else "primal_eig"
        size = n_samples if solver.startswith("dual") else sum(view.dim for view in views)
        if self.n_components > size:
            what = "n_samples" if solver.startswith("dual") else "the summed feature dimension d"
            raise ValueError(f"n_components: must be at most {what} = {size} for {solver!r}, got {self.n_components}")
        return solver

    # ------------------------------------------------------------------ fitting

    @_fit_context(prefer_skip_nested_validation=False)  # `kernel` may hold transformers: they validate their own
    def fit(self, views: Sequence[ArrayLike] | ArrayLike, y: None = None) -> MultiViewRKM:
        """Fit the model on the training views.

        Parameters
        ----------
        views : list or tuple of array-like, or array-like of shape (n_samples, n_features)
            One (n_samples, p_v) array per view (per entry of ``kernel`` when it is a sequence; a 1-D array is one
            column; scipy sparse allowed), all with the same n_samples >= 2; or one 2-D array (dense, sparse or a
            DataFrame) whose columns ``view_columns`` splits into the views. A list whose entries are all lists
            of numbers is the rows of one 2-D array, as in scikit-learn (give a 1-D view as a NumPy array).
        y : None
            Ignored.

        Returns
        -------
        self : MultiViewRKM
            The fitted model.
        """
        self._forget_fit()
        self._progress = Progress(type(self).__name__, self.verbose)
        try:
            if _holds_dask(views):
                self._fit_dask(views)
            else:
                self._fit(views)
        except BaseException:  # errors and Ctrl-C alike: never leave a half-fitted model
            self._forget_fit()
            raise
        self._progress(f"fitted {self.n_components} components")
        return self

    def fit_transform(self, views: Sequence[ArrayLike] | ArrayLike, y: None = None) -> np.ndarray:
        """Fit the model and return the hidden features of the training points, ``H_`` (what ``transform`` gives on
        the training views, up to rounding).

        Parameters
        ----------
        views : list or tuple of array-like, or array-like of shape (n_samples, n_features)
            As in :meth:`fit`.
        y : None
            Ignored.

        Returns
        -------
        ndarray of shape (n_samples, n_components)
        """
        return self.fit(views).H_.copy()

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        entries = self.kernel if isinstance(self.kernel, (list, tuple)) else [self.kernel]
        tags.input_tags.sparse = bool(entries) and all(_entry_takes_sparse(entry) for entry in entries)
        return tags

    @property
    def _n_features_out(self):
        return self.n_components

    def _declared_views(self):
        """The number of views that ``kernel`` fixes (a sequence), or None (one entry for every view)."""
        return len(self.kernel) if isinstance(self.kernel, (list, tuple)) and self.kernel else None

    def _split_columns(self, n_columns, n_views=None):
        """Column positions of each view in a single array of n_columns columns (``view_columns``); n_views is
        the number of views the model has or its kernel declares (None: any)."""
        selection = self.view_columns
        if selection is None:
            if n_views not in (None, 1):
                raise ValueError(
                    f"X: a single 2-D array is one view, but the model has {n_views} views; pass a list of views, "
                    f"or view_columns to split the array's columns into views (e.g. view_columns={n_views})"
                )
            return [np.arange(n_columns)]
        if isinstance(selection, numbers.Integral):
            if n_columns < selection:
                raise ValueError(
                    f"X: {n_columns} feature(s) cannot be split into view_columns = {selection} views (each needs "
                    "at least one column)"
                )
            columns = np.array_split(np.arange(n_columns), selection)
        else:
            columns = []
            for v, entry in enumerate(selection):
                if isinstance(entry, slice):
                    positions = np.arange(n_columns)[entry]
                else:
                    positions = np.asarray(entry).reshape(-1)
                    if positions.size and (positions.dtype.kind not in "iu" or positions.dtype == bool):
                        raise ValueError(
                            f"view_columns[{v}]: must be a slice or a list of integer column positions, got {entry!r}"
                        )
                    if positions.size and (positions.min() < -n_columns or positions.max() >= n_columns):
                        raise ValueError(
                            f"view_columns[{v}]: column positions {entry!r} out of range for X with {n_columns} "
                            "feature(s)"
                        )
                    positions = np.arange(n_columns)[positions.astype(np.intp)]
                if positions.size == 0:
                    raise ValueError(f"view_columns[{v}]: selects no column of X ({n_columns} feature(s))")
                columns.append(positions)
            if not columns:
                raise ValueError("view_columns: must select the columns of at least one view, got an empty sequence")
        if n_views is not None and len(columns) != n_views:
            raise ValueError(
                f"view_columns: splits X into {len(columns)} views, but the model has {n_views} views (the entries "
                "of kernel)"
            )
        return columns

    @staticmethod
    def _view_labels(n_views):
        return [f"X (view {v})" for v in range(n_views)]

    def _training_arrays(self, views):
        """The training views (copies) from a list of views or a single array split by ``view_columns``."""
        n_views = self._declared_views()
        if views is None or isinstance(views, (str, bytes, dict)):
            raise ValueError(
                f"views: must be a non-empty list or tuple of arrays (one per view), or one 2-D array, got {views!r:.80}"
            )
        if is_view_list(views):
            self.view_columns_ = None
            return _check_views(views, n_views, why=" (one per entry of kernel)", copy=True), None
        X = validate_data(self, views, accept_sparse="csr", dtype=np.float64, ensure_min_samples=2, reset=True)
        self.view_columns_ = self._split_columns(X.shape[1], n_views)
        labels = self._view_labels(len(self.view_columns_))
        arrays = _check_views([X[:, columns] for columns in self.view_columns_], names=labels, copy=True)
        return arrays, labels

    def _new_arrays(self, views, missing=()):
        """The views of new points: a list of views, or a single array split as at fit (its columns of the views
        `missing` are ignored and may be NaN)."""
        if is_view_list(views):
            return _check_views(views, self.n_views_, missing, self.input_dims_)
        X = validate_data(
            self,
            views,
            accept_sparse="csr",
            dtype=np.float64,
            reset=False,
            ensure_all_finite=not missing,
        )
        columns = self.view_columns_ or self._split_columns(X.shape[1], self.n_views_)
        if self.view_columns_ is None and sum(self.input_dims_) != X.shape[1]:
            raise ValueError(
                f"X: has {X.shape[1]} features, but MultiViewRKM is expecting {sum(self.input_dims_)} features as "
                "input (the views' columns side by side)"
            )
        views = [None if v in missing else X[:, c] for v, c in enumerate(columns)]
        return _check_views(views, self.n_views_, missing, self.input_dims_, names=self._view_labels(len(views)))

    def _fit(self, views):
        arrays, labels = self._training_arrays(views)
        n = arrays[0].shape[0]
        if n < 2:
            raise ValueError(f"views: centring needs at least 2 samples (rows), got {n} sample")
        sources = self._check_params_vs_input(arrays)
        labels = labels or [f"views[{v}]" for v in range(len(arrays))]
        views = [self._fitted_view(source, X, label) for source, X, label in zip(sources, arrays, labels, strict=True)]
        self.solver_ = self._resolve_solver(views, n)
        self._progress(f"solver {self.solver_!r} for {n} samples and {len(views)} views")
        with blas_threads(thread_count(self.n_threads)):
            if self.solver_.startswith("primal"):
                self._fit_primal(views, arrays)
            else:
                for view in views:
                    _training_features(view)
                self._fit_dual(views)
        self._finish_fit(views)

    def _finish_fit(self, views):
        """The fitted state common to every solver, once the views hold U_v, their couplings and pre-image data."""
        self._views = views
        self.n_views_ = len(views)
        self.U_ = [view.U for view in views]
        self.view_dims_ = [view.dim for view in views]
        self.input_dims_ = [view.X.shape[1] for view in views]
        self.gamma_ = [view.gamma for view in views]
        self.objective_ = -0.5 * float(np.trace(self._gamma))
        self.preimages_ = [view.preimage for view in views]
        for view in views:
            view.inference = np.linalg.eigh(self._gamma - view.coupling)
        self._fit_ridge_preimages(views)

    def _fitted_view(self, source, X, label, fit_map=None):
        """The view of a resolved source, its explicit map fitted (by ``fit_map(map, X)``; None: ``map.fit(X)``)
        and its feature dimension d_v known; the training features are formed where a solver needs them."""
        kind, source, gamma, name, eta, preimage = source
        view = _View(kind, source, X, gamma, name=name, label=label, eta=eta, preimage=preimage)
        if kind == "map":
            if fit_map is None:
                source.fit(X)
            else:
                fit_map(source, X)
            # rkm's maps know their width; another transformer's is that of its features of a first row.
            view.dim = source._n_features_out if primal.streams(source) else _block_features(view, X[:1]).shape[1]
        elif kind == "linear":
            view.dim = X.shape[1]
        return view

    def _kernel(self, view, X, Y=None):
        """k_v(X, Y) (Y=None: the training Gram matrix of X) of an implicit or linear view, by
        :func:`rkm.kernels.kernel_matrix` (dense or sparse inputs, named or callable kernels), with messages
        that name the view's argument and ``kernel`` entry."""
        if view.kind == "callable":
            kernel, gamma, degree, coef0 = view.source, None, 3, 1.0
        else:
            kernel, gamma, degree, coef0 = view.source if view.kind == "kernel" else ("linear", None, 3, 1.0)
        dense = not (sp.issparse(X) or sp.issparse(Y))
        device = self.device if view.kind == "kernel" and dense else "cpu"
        try:
            K = kernel_matrix(X, Y, kernel, gamma, degree, coef0, n_threads=self.n_threads, device=device)
        except TypeError as error:
            if view.kind != "callable":
                raise
            raise ValueError(
                f"{view.name}: a callable is a kernel function, called as kernel(X, Y) and returning the (n_X, n_Y) "
                f"kernel matrix, and calling it failed ({error}); an explicit feature map phi goes in "
                "sklearn.preprocessing.FunctionTransformer(phi)"
            ) from error
        except ValueError as error:
            message = str(error)
            for prefix, name in (("X:", view.label), ("Y:", view.label), ("kernel:", view.name)):
                if message.startswith(prefix):
                    raise ValueError(f"{name}:{message[len(prefix) :]}") from None
            raise
        K = np.asarray(K, dtype=np.float64)
        if view.kind == "callable" and Y is None:
            eigen.check_symmetric(K, f"{view.name}: the callable kernel's matrix k(X, X)")
        return K

    def _eigenpairs(self, A):
        """Top s eigenpairs of the symmetric A (C or K): (values, orthonormal vectors, n_iter)."""
        s = self.n_components
        solver = "dense" if eigen.prefer_dense(A.shape[0], s) else "krylov"
        w, V, _, n_iter = eigen.leading_eigenpairs(
            A,
            s,
            solver,
            n_threads=self.n_threads,
            random_state=self.random_state,
            tol=self.tol,
            max_iter=self.max_iter,
            model="MultiViewRKM",
        )
        return w, V, n_iter

    def _stiefel(self, A):
        """A minimizer of -1/2 Tr(X^T A X) over X^T X = I (eqs. 8 and 12) and Gamma = X^T A X."""

        def objective(X):
            AX = A @ X
            return -0.5 * float(np.sum(X * AX)), -AX

        tol = (self.tol or DEFAULT_STIEFEL_TOL) * max(float(np.linalg.norm(A)), np.finfo(float).tiny)
        start = stiefel.random_point(A.shape[0], self.n_components, random_state=self.random_state)
        result = stiefel.minimize(
            objective,
            start,
            method=self.stiefel_method,
            tol=tol,
            max_iter=self.max_iter or DEFAULT_STIEFEL_MAX_ITER,
            verbose=max(self.verbose - 1, 0),
        )
        if not result.success:
            warn(
                f"MultiViewRKM: the Stiefel method {self.stiefel_method!r} stopped ({result.status}) after "
                f"{result.nit} iterations at ||A X - X Gamma||_F = {result.grad_norm:.3g}, above tol ||A||_F = "
                f"{tol:.3g}: {result.message}; increase max_iter or tol",
                ConvergenceWarning,
            )
        X = result.x
        Gamma = X.T @ A @ X
        return X, (Gamma + Gamma.T) / 2, result

    def _solve(self, A, what):
        """Algorithm steps 5-12 on A (C or K): orthonormal X (U~ or H), the Gamma in use, and the fitted state
        eigenvalues_, gamma_matrix_, rotation_, n_iter_, stiefel_result_."""
        if self.solver_.endswith("eig"):
            values, X, self.n_iter_ = self._eigenpairs(A)
            self._check_rank(values, A.shape[0], what)
            self.eigenvalues_, self.gamma_matrix_ = values, np.diag(values)
            self.rotation_ = self.stiefel_result_ = None
            self._gamma_basis = np.eye(values.size)
            return X, self.gamma_matrix_
        X, Gamma, self.stiefel_result_ = self._stiefel(A)
        self.n_iter_ = self.stiefel_result_.nit
        values, O = np.linalg.eigh(Gamma)
        values, O = values[::-1].copy(), O[:, ::-1].copy()
        self._check_rank(values, A.shape[0], what)
        self.eigenvalues_, self.gamma_matrix_, self.rotation_ = values, Gamma, O
        if self.rotate:
            self._gamma_basis = np.eye(values.size)
            return X @ O, np.diag(values)
        self._gamma_basis = O
        return X, Gamma

    def _check_rank(self, values, size, what):
        rounding = size * np.finfo(np.float64).eps * max(values[0], 0.0)
        rank = int(np.count_nonzero(values > rounding))
        if rank < values.size:
            raise ValueError(
                f"n_components: {values.size} components exceed the numerical rank ({rank}) of the centred {what}: "
                f"eigenvalue {rank + 1} is {values[rank]:.3g}, at the rounding level {rounding:.3g}; use at most "
                f"{rank} components"
            )

    @property
    def _diagonal_gamma(self):
        """Whether the Gamma in use is diagonal (eig solvers, or rotated Stiefel ones): signs are then fixed."""
        return self.solver_.endswith("eig") or self.rotate

    def _flip_signs(self, H):
        """Flips per column so that the largest entry of each column of H is positive (with rotation_)."""
        flips = sign_flips(H) if self._diagonal_gamma else np.ones(H.shape[1])
        if self.rotation_ is not None and self.rotate:
            self.rotation_ = self.rotation_ * flips
        return flips

    def _store_gamma(self, Gamma):
        self._gamma = Gamma
        self._gamma_sqrt = _symmetric_power(self._gamma_basis, self.eigenvalues_, 0.5)

    def _fit_primal(self, views, arrays):
        """Algorithms 1 and 3, streamed over blocks of rows: C from the moments of the concatenated features,
        U = U~ Gamma^(1/2), then a second pass for H (eq. 6) and the map views' pre-image statistics."""
        features = _ViewFeatures(views)
        stream = primal.MomentStream(features)
        step = primal.check_block_rows(None, features.width)
        blocks = [slice(start, start + step) for start in range(0, arrays[0].shape[0], step)]
        for rows in blocks:
            stream.add([X[rows] for X in arrays])
        self._solve_primal(views, stream.moments())
        H, projections, column_means = _stacked(
            _primal_rows(views, self._gamma, [X[rows] for X in arrays]) for rows in blocks
        )
        self._store_primal(views, H, projections, column_means, self._flip_signs(H))

    def _solve_primal(self, views, moments):
        """The eigenproblem (or Stiefel problem) of the features' covariance C; sets each view's mean, U_v (of the
        unweighted features, as the dual's Phi_c,v^T H, so pre-images ignore eta) and Gamma."""
        C = np.ascontiguousarray(moments.scatter)
        starts = np.cumsum([0] + [view.dim for view in views])
        if not np.all(np.isfinite(C)):
            diagonal = np.diagonal(C)
            view = next(
                v for v, a, b in zip(views, starts, starts[1:], strict=False) if not np.isfinite(diagonal[a:b]).all()
            )
            raise ValueError(
                f"{view.label}: the covariance of the features overflows float64; scale the view down (e.g. "
                "standardize it)"
            )
        self._progress(f"covariance of {C.shape[0]} features from {moments.n} samples")
        U_tilde, Gamma = self._solve(C, "covariance C")
        self._store_gamma(Gamma)
        U = U_tilde @ self._gamma_sqrt if self.rescale else U_tilde
        for view, start, stop in zip(views, starts, starts[1:], strict=False):
            # The moments are those of the features scaled by eta_v^(-1/2) (the primal twin of sum_v K_v / eta_v).
            view.mean = moments.mean[start:stop] * view.eta**0.5
            view.U = np.ascontiguousarray(U[start:stop] * view.eta**0.5)

    def _store_primal(self, views, H, projections, column_means, flips):
        """H_ and each view's U_v, coupling B_v = U_v^T U_v / eta_v and pre-image data, oriented by `flips`."""
        self.H_ = np.ascontiguousarray(H * flips)
        maps = iter(zip(projections, column_means, strict=True))
        for view in views:
            view.U = view.U * flips
            view.coupling = view.U.T @ view.U / view.eta
            if view.kind == "map":
                projection, view.column_means = next(maps)
                view.projection = projection * flips

    def _centred_training_kernel(self, view):
        """M K_v M of one view, its column means and grand mean (Algorithm 2, steps 3-4)."""
        K = view.features @ view.features.T if view.kind == "map" else self._kernel(view, view.X)
        _check_finite_kernel(K, view)
        view.column_means, view.grand_mean = _core.center_kernel(K, self.n_threads)
        _check_finite_kernel(K, view)
        return K

    def _fit_dual(self, views):
        """Algorithms 2 and 4: K = sum_v M K_v M, H; U_v = Phi_c,v^T H for explicit views (eq. 5)."""
        kernels = [self._centred_training_kernel(view) for view in views]
        K = kernels[0] / views[0].eta if len(kernels) > 1 or views[0].eta != 1.0 else kernels[0]
        for view, K_v in zip(views[1:], kernels[1:], strict=True):
            K += K_v if view.eta == 1.0 else K_v / view.eta
        self._progress(f"summed centred kernel of {K.shape[0]} samples")
        H, Gamma = self._solve(K, "kernel matrix K")
        del K
        self._store_gamma(Gamma)
        H = H * self._flip_signs(H)
        self.H_ = np.ascontiguousarray(H)
        column_sums = H.sum(axis=0)
        for view, K_v in zip(views, kernels, strict=True):
            view.projection = K_v @ H
            view.coupling = H.T @ view.projection / view.eta
            view.coupling = (view.coupling + view.coupling.T) / 2
            if view.explicit:
                view.U = np.asarray(view.features.T @ H) - np.outer(view.mean, column_sums)

    # ------------------------------------------------------------------ Dask

    def _dask_arrays(self, views, reset, missing=()):
        """Views given as Dask arrays (a list, None at `missing`) or one Dask array or DataFrame split by
        ``view_columns``: row-chunked float Dask arrays with the first view's row chunks. reset=True sets the
        fitted view layout (view_columns_, n_features_in_), else checks against it."""
        from rkm._utils import dask_arrays

        if isinstance(views, (list, tuple)):
            if reset:
                self.view_columns_ = None
                self.__dict__.pop("n_features_in_", None)
            n_views = self._declared_views() if reset else self.n_views_
            if n_views is not None and len(views) != n_views:
                raise ValueError(f"views: got {len(views)} views but the model has {n_views}")
            labels = [f"views[{v}]" for v in range(len(views))]
            arrays = [
                None
                if v in missing
                else dask_arrays.check_dask_array(dask_arrays.as_dask_array(X, labels[v])[0], labels[v])
                for v, X in enumerate(views)
            ]
        else:
            dX = dask_arrays.validate_dask_data(self, views, reset)
            if reset:
                self.view_columns_ = self._split_columns(dX.shape[1], self._declared_views())
            labels = self._view_labels(len(self.view_columns_))
            arrays = [None if v in missing else dX[:, columns] for v, columns in enumerate(self.view_columns_)]
        given = [X for X in arrays if X is not None]
        if len({X.shape[0] for X in given}) > 1:
            raise ValueError(f"views: all views need the same number of rows, got {[X.shape[0] for X in given]}")
        if not reset:
            for v, X in enumerate(arrays):
                if X is not None and X.shape[1] != self.input_dims_[v]:
                    raise ValueError(f"{labels[v]}: has {X.shape[1]} columns, expected {self.input_dims_[v]}")
        chunks = given[0].chunks[0]
        arrays = [None if X is None else X.astype(np.float64).rechunk({0: chunks}) for X in arrays]
        return arrays, labels

    def _fit_dask(self, views):
        """fit on Dask views: the primal's moments as one map-reduce over the row partitions, the hidden features
        of every row from a second map, and a uniform sample of rows for the pre-images."""
        from rkm._utils import dask_arrays

        arrays, labels = self._dask_arrays(views, reset=True)
        n = arrays[0].shape[0]
        if n < 2:
            raise ValueError(f"views: centring needs at least 2 samples (rows), got {n} sample")
        sources = self._check_params_vs_input(arrays)
        self._check_streamed_sources(sources, "a Dask fit", dask=True)
        views = [
            self._fitted_view(source, X, label, fit_map=dask_arrays.fit_feature_map)
            for source, X, label in zip(sources, arrays, labels, strict=True)
        ]
        self.solver_ = self._streamed_solver(views)
        self._progress(f"solver {self.solver_!r} on Dask views, {n} samples")
        moments = dask_arrays.views_moments(_ViewFeatures(views), arrays)
        with blas_threads(thread_count(self.n_threads)):
            self._solve_primal(views, moments)
        lite = [_without_data(view) for view in views]
        H = np.asarray(dask_arrays.map_views(_hidden_rows, arrays, self.n_components, np.float64, lite, self._gamma))
        flips = self._flip_signs(H)
        rows = dask_arrays.sample_rows(arrays, RESERVOIR_ROWS, self.random_state)
        for view, X in zip(views, rows, strict=True):
            view.X = X
        _, projections, column_means = _primal_rows(views, self._gamma, rows)
        self._store_primal(views, H, projections, column_means, flips)
        self._finish_fit(views)

    def _check_streamed_sources(self, sources, what, dask=False):
        """The solver and maps a streamed (partial_fit) or Dask fit can run: the primal, on explicit views; a Dask
        fit's maps fitted from the rows they need (rkm's)."""
        if self.solver.startswith("dual"):
            raise ValueError(f"solver: {what} runs the primal, not {self.solver!r} (use fit on NumPy arrays)")
        for index, (kind, source, *_rest) in enumerate(sources):
            if kind in ("kernel", "callable"):
                raise ValueError(
                    f"kernel: {what} runs the primal, which needs explicit feature maps, but view {index} has an "
                    "implicit kernel; use 'linear' or a map such as rkm.features.RandomFourierFeatures"
                )
            if dask and kind == "map" and not hasattr(source, "_sample_indices"):
                raise ValueError(
                    f"kernel: a Dask fit fits rkm's explicit maps (rkm.features.Nystroem, RandomFourierFeatures) from "
                    f"the rows they need; view {index}'s {type(source).__name__} is not one"
                )

    def _streamed_solver(self, views):
        """The primal solver of a streamed or Dask fit ("auto": "primal_eig"), n_components checked against d."""
        solver = "primal_eig" if self.solver == "auto" else self.solver
        dimension = sum(view.dim for view in views)
        if self.n_components > dimension:
            raise ValueError(
                f"n_components: must be at most the summed feature dimension d = {dimension} for {solver!r}, got "
                f"{self.n_components}"
            )
        return solver

    def _map_dask(self, views, method, n_out, absent=(), **options):
        """``self.<method>(views, **options)`` over the row partitions of Dask views (the views `absent` are not
        read), as a lazy Dask array of shape (n, n_out)."""
        from rkm._utils import dask_arrays

        self._solve_now()  # the workers get the solved model, not the stream
        arrays, _ = self._dask_arrays(views, reset=False, missing=absent)
        given = [X for X in arrays if X is not None]
        call = functools.partial(_call_method, method=method, absent=absent, **options)
        return dask_arrays.map_views(call, given, n_out, np.float64, self)

    # ------------------------------------------------------------------ streaming

    # What the deferred solve of partial_fit sets (rkm._utils.streaming), private state included.
    _deferred_attributes = (
        "eigenvalues_",
        "gamma_matrix_",
        "H_",
        "U_",
        "rotation_",
        "objective_",
        "n_iter_",
        "stiefel_result_",
        "view_dims_",
        "gamma_",
        "preimages_",
        "_views",
        "_gamma",
        "_gamma_sqrt",
        "_gamma_basis",
        "_ridge_inputs",
    )

    def _streams(self):
        """partial_fit exists when every view's map is explicit: the primal accumulates their moments."""
        entries = self.kernel if isinstance(self.kernel, (list, tuple)) else [self.kernel]
        if not all(_explicit_entry(entry) for entry in entries):
            raise AttributeError(
                "partial_fit is available when every view has an explicit feature map ('linear' or a transformer "
                "such as rkm.features.RandomFourierFeatures): the primal accumulates their moments, while an "
                "implicit kernel needs every row at once"
            )
        return True

    @available_if(_streams)
    @_fit_context(prefer_skip_nested_validation=False)
    def partial_fit(self, views: Sequence[ArrayLike] | ArrayLike, y: None = None) -> MultiViewRKM:
        """Add a batch of rows of every view to a primal fit, for data that does not fit in memory at once.

        Each call adds the batch's concatenated features to their streamed mean and covariance C (merged
        exactly), so after the last batch ``eigenvalues_``, Gamma and the inferred views equal those of ``fit``
        on all rows with the same fitted maps (to rounding), and ``U_`` and ``transform`` equal them up to the
        sign of each component: the sign convention of ``fit`` (the largest entry of each column of H positive)
        needs every row, so a streamed fit makes the largest entry of each column of the stacked U_v positive.
        The first call (on a new model, or after ``fit``) fits each view's map on its batch (a Nyström map
        draws its landmarks from it). The eigenproblem (or Stiefel problem) runs once, when a fitted attribute
        or a prediction next needs it. solver "auto" is "primal_eig"; the dual solvers refuse.

        What is kept of the rows: a uniform random sample of at most ``rkm._utils.streaming.RESERVOIR_ROWS``
        (2000) rows of every view, drawn by reservoir sampling seeded by ``random_state``. It is the training
        set of the pre-images (the kernel smoother averages its most similar rows; the ridge map is learned on
        it), and ``H_`` holds its hidden features, not those of every row.

        Parameters
        ----------
        views : list or tuple of array-like, or array-like of shape (n_batch, n_features)
            As in :meth:`fit`, for a batch of rows; later batches must have the first one's views and columns.
        y : None
            Ignored.

        Returns
        -------
        self
        """
        first = "_stream" not in self.__dict__
        try:
            if first:
                self._forget_fit()
                self._progress = Progress(type(self).__name__, self.verbose)
                self._start_stream(views)
            else:
                self._add_batch(self._new_arrays(views))
        except BaseException:
            if first:
                self._forget_fit()
            raise
        return self

    def _start_stream(self, views):
        """The first batch: the parameters checked, each view's map fitted on it, and the streamed sums started."""
        arrays, labels = self._training_arrays(views)
        sources = self._check_params_vs_input(arrays)
        self._check_streamed_sources(sources, "partial_fit")
        labels = labels or [f"views[{v}]" for v in range(len(arrays))]
        views = [self._fitted_view(source, X, label) for source, X, label in zip(sources, arrays, labels, strict=True)]
        self.solver_ = self._streamed_solver(views)
        self.n_views_, self.input_dims_ = len(views), [X.shape[1] for X in arrays]
        self._stream_views, self._stream = views, primal.MomentStream(_ViewFeatures(views))
        self._reservoir, self.n_samples_seen_ = Reservoir(RESERVOIR_ROWS, self.random_state), 0
        self._add_batch(arrays)

    def _check_batch(self, arrays):
        """Rules on every batch of partial_fit beyond the arrays' shapes (none here)."""

    def _add_batch(self, arrays):
        self._check_batch(arrays)
        with blas_threads(thread_count(self.n_threads)):
            self._stream.add(arrays)
        self._reservoir.add(np.hstack([X.toarray() if sp.issparse(X) else X for X in arrays]))
        self.n_samples_seen_ += arrays[0].shape[0]
        self._defer_solve()

    def _solve_stream(self):
        """The primal problem of the streamed moments; the reservoir's rows give H_ and the pre-images' data."""
        if self._stream.n < 2:
            raise ValueError(f"views: centring needs at least 2 samples (rows), got {self._stream.n} sample")
        views = self._stream_views
        rows = np.split(self._reservoir.rows, np.cumsum(self.input_dims_)[:-1], axis=1)
        with blas_threads(thread_count(self.n_threads)):
            self._solve_primal(views, self._stream.moments())
            H, projections, column_means = _primal_rows(views, self._gamma, rows)
        # The sign convention on H needs every row: a streamed fit orients each component by U instead.
        flips = self._flip_signs(np.vstack([view.U for view in views]))
        for view, X in zip(views, rows, strict=True):
            view.X = X
        self._store_primal(views, H, projections, column_means, flips)
        self._finish_fit(views)
        self._progress(f"fitted {self.n_components} components from {self.n_samples_seen_} streamed rows")

    # ------------------------------------------------------------------ pre-images

    def _ridge_spec(self, view):
        """The ridge pre-image's kernel on the hidden features: the view's named kernel, else rbf with gamma 1/s."""
        return view.source if view.kind == "kernel" else ("rbf", 1.0 / self.n_components, 3, 1.0)

    def _fit_ridge_preimages(self, views):
        """Kernel ridge maps from H Gamma^(1/2) to the inputs of each view whose pre-image is "ridge" (KernelPCA's
        "ridge"; a linear view's pre-image is the identity, never "ridge")."""
        views = [view for view in views if view.preimage == "ridge"]
        if not views:
            return
        Z = self.H_ @ self._gamma_sqrt
        for view in views:
            view.ridge = ridge_preimage_coefficients(
                Z, view.dense_inputs(), self._ridge_spec(view), self.preimage_alpha, self.n_threads
            )
        self._ridge_inputs = Z

    def _preimage(self, h, view):
        """Inputs of `view` from hidden features h (inferred without it, or given), by the view's pre-image
        method; rows in blocks, so that no (n*, n_samples) matrix exceeds ROW_BLOCK_BYTES."""
        if view.preimage == "identity":
            return h @ view.U.T + view.mean
        if view.preimage == "smoother":
            # Predicted centred kernel row (eq. 16, or Phi_c phi~ in the primal) plus the column means: the
            # similarities up to a constant per point, which the smoother's scaling removes.
            return smoother_preimage(
                h, view.projection, view.column_means, view.dense_inputs(), self.n_neighbors, n_threads=self.n_threads
            )
        step = max(1, ROW_BLOCK_BYTES // (8 * self.H_.shape[0]))
        blocks = [h[start : start + step] for start in range(0, h.shape[0], step)]
        method = self._ridge_block if view.preimage == "ridge" else self._fixed_point_block
        return np.vstack([method(block, view) for block in blocks])

    def _ridge_block(self, h, view):
        name, gamma, degree, coef0 = self._ridge_spec(view)
        K = kernel_matrix(
            h @ self._gamma_sqrt, self._ridge_inputs, name, gamma, degree, coef0, n_threads=self.n_threads
        )
        return K @ view.ridge

    def _fixed_point_block(self, h, view):
        """Mika et al.'s fixed point towards the view's projection sum_i (H h)_i phi~(x_i) + mean (an rbf view,
        so a dual model: H_ has orthonormal columns), started at the smoother's pre-image."""
        X_train = view.dense_inputs()
        start = smoother_preimage(h, view.projection, view.column_means, X_train, self.n_neighbors, self.n_threads)
        coefficients = with_feature_mean(h @ self.H_.T)
        X, _ = gaussian_fixed_point(
            coefficients, X_train, view.gamma, start, self.preimage_max_iter, n_threads=self.n_threads
        )
        return X

    # ------------------------------------------------------------------ inference

    def _centred_rows(self, view, X):
        """Kernel rows k_v(x*, X_train) fully centred with the training statistics (dual); an explicit map's rows
        are phi(x*) Phi_train^T."""
        if view.kind == "map":
            rows = np.ascontiguousarray(_explicit_features(view.source, X, view.name) @ view.features.T)
        else:
            rows = np.ascontiguousarray(self._kernel(view, X, view.X))
        if not np.all(np.isfinite(rows)):
            raise ValueError(f"{view.label}: the kernel of the new points overflows float64; scale the view down")
        _core.center_kernel_rows(rows, view.column_means, view.grand_mean, self.n_threads)
        return rows

    def _view_scores(self, view, X):
        """U_v^T phi_c,v(x*) (primal) or H^T k~_v(x*) (dual) for the rows of X: shape (n*, s)."""
        if self.solver_.startswith("primal"):
            Phi = X if view.kind == "linear" else _explicit_features(view.source, X, view.name)
            return (np.asarray(Phi @ view.U) - view.mean @ view.U) / view.eta  # (Phi - mean) U, sparse Phi kept sparse
        n_train = self.H_.shape[0]
        step = max(1, ROW_BLOCK_BYTES // (8 * n_train))
        scores = np.vstack(
            [self._centred_rows(view, X[start : start + step]) @ self.H_ for start in range(0, X.shape[0], step)]
        )
        return scores / view.eta

    def _scores(self, arrays, skip=()):
        with blas_threads(thread_count(self.n_threads)):
            return sum(
                self._view_scores(view, X)
                for v, (view, X) in enumerate(zip(self._views, arrays, strict=True))
                if v not in skip
            )

    def transform(self, views: Sequence[ArrayLike] | ArrayLike) -> np.ndarray:
        """Hidden features of new points from their views, eq. 6, or from some of them (eqs. 15-16).

        h* = Gamma^(-1) sum_v U_v^T phi_c,v(x*) in the primal, Gamma^(-1) H^T sum_v k~_v(x*) in the dual; on the
        training views these are the rows of ``H_``. Views given as None are missing: h* is then inferred from the
        others, as :meth:`predict_latent` does.

        Parameters
        ----------
        views : list or tuple of array-like, or array-like of shape (n*, n_features)
            One (n*, p_v) array per view (None for a missing view, at least one given), or one array whose
            columns ``view_columns`` splits into the views.

        Returns
        -------
        ndarray of shape (n*, n_components)
        """
        check_is_fitted(self)
        if isinstance(views, (list, tuple)) and any(X is None for X in views):
            return self.predict_latent(views, [v for v, X in enumerate(views) if X is None])
        if _holds_dask(views):
            return self._map_dask(views, "transform", self.n_components)
        arrays = self._new_arrays(views)
        return np.linalg.solve(self._gamma, self._scores(arrays).T).T

    def _check_missing(self, missing):
        """The missing views as a sorted tuple of indices (an int, or a list or tuple of distinct ints), at least
        one view left."""
        entries = list(missing) if isinstance(missing, (list, tuple)) else [missing]
        for entry in entries:
            if not isinstance(entry, numbers.Integral) or isinstance(entry, bool) or not 0 <= entry < self.n_views_:
                raise ValueError(f"missing: must be an int in [0, {self.n_views_}) or a list of them, got {missing!r}")
        indices = tuple(sorted({int(entry) for entry in entries}))
        if len(indices) != len(entries) or not indices:
            raise ValueError(f"missing: must name distinct views, at least one, got {missing!r}")
        if len(indices) == self.n_views_:
            what = "a model of one view has no other view" if self.n_views_ == 1 else "every view is missing: none is"
            raise ValueError(f"missing: {what} to infer the hidden features from")
        return indices

    def _inference(self, missing):
        """Eigendecomposition of Gamma - sum_{k in missing} B_k (precomputed for one missing view)."""
        if len(missing) == 1:
            return self._views[missing[0]].inference
        return np.linalg.eigh(self._gamma - sum(self._views[k].coupling for k in missing))

    def _missing_latents(self, scores, missing):
        """h* = (Gamma - sum_k B_k)^(-1) scores (eqs. 15-16), refusing a singular Gamma - sum_k B_k."""
        values, vectors = self._inference(missing)
        smallest = values[0]
        if smallest <= SINGULAR_RATIO * self.eigenvalues_[0]:
            which = ", ".join(map(str, missing))
            raise ValueError(
                f"missing: Gamma - B_({which}) of eqs. 15-16 is singular (smallest eigenvalue {smallest:.3g}): the "
                f"other views do not determine every component (view(s) {which} carry all of the variance of "
                "some of them); use fewer components or infer from more views"
            )
        return ((scores @ vectors) / values) @ vectors.T

    def predict_latent(self, views: Sequence[ArrayLike] | ArrayLike, missing: int | Sequence[int]) -> np.ndarray:
        """Hidden features of new points inferred without the views `missing` (the h* of eqs. 15-16).

        Parameters
        ----------
        views : list or tuple, or array-like of shape (n*, n_features)
            One array per view, the entries `missing` may be None (they are ignored); or one array whose columns
            ``view_columns`` splits into the views, those of the views `missing` ignored (they may be NaN).
        missing : int or list of int
            Index of the view to leave out, or the indices of several (at least one view must be left): with
            B_k the share of view k in Gamma, h* = (Gamma - sum_k B_k)^(-1) times the scores of the others.

        Returns
        -------
        ndarray of shape (n*, n_components)
        """
        check_is_fitted(self)
        missing = self._check_missing(missing)
        if _holds_dask(views):
            return self._map_dask(views, "predict_latent", self.n_components, missing, missing=missing)
        arrays = self._new_arrays(views, missing)
        return self._missing_latents(self._scores(arrays, skip=missing), missing)

    def predict_view(self, views: Sequence[ArrayLike] | ArrayLike, missing: int) -> np.ndarray:
        """Infer view `missing` of new points from their other views, eq. 15 (primal) or 16 (dual), then map it
        to the view's input space: exactly for a linear view (the feature plus the training mean), else by the
        pre-image method ``preimage``.

        Parameters
        ----------
        views : list or tuple, or array-like of shape (n*, n_features)
            One (n*, p_v) array per view, entry `missing` may be None (it is ignored); or one array whose columns
            ``view_columns`` splits into the views, those of view `missing` ignored (they may be NaN).
        missing : int
            Index of the view to infer.

        Returns
        -------
        ndarray of shape (n*, p_missing)

        Raises
        ------
        ValueError
            For a bad `missing` or bad views, and when Gamma - B_missing is singular.
        """
        check_is_fitted(self)
        if not isinstance(missing, numbers.Integral) or isinstance(missing, bool):
            raise ValueError(f"missing: must be an int in [0, {self.n_views_}) (the view to infer), got {missing!r}")
        if _holds_dask(views):
            (missing,) = self._check_missing(missing)
            return self._map_dask(views, "predict_view", self.input_dims_[missing], (missing,), missing=missing)
        h = self.predict_latent(views, missing)
        return self._preimage(h, self._views[int(missing)])
