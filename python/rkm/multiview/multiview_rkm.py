"""Multi-view kernel PCA as a restricted kernel machine, in the primal or the dual, by eigendecomposition or on
the Stiefel manifold, with inference of a missing view.

Equation, algorithm and figure numbers refer to S. Achten, A. Pandey, H. De Meulemeester, B. De Moor and
J. A. K. Suykens, "Duality in multi-view restricted kernel machines" (2023). Each of V views has a feature map
phi_v, explicit (the identity of a linear view, a fitted transformer such as
:class:`rkm.features.RandomFourierFeatures`, or a callable) or implicit through a kernel k_v. With
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

import numbers
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from sklearn.base import BaseEstimator, _fit_context, clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils._param_validation import HasMethods, StrOptions
from sklearn.utils.validation import check_is_fitted

from rkm import _core, stiefel
from rkm._utils import eigen
from rkm._utils.eigen import sign_flips
from rkm._utils.primal import FeatureMoments
from rkm._utils.progress import Progress
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
    kernel_constraints,
)
from rkm.kernels import Kernel, kernel_matrix, kernel_spec
from rkm.preimage import kernel_smoother, ridge_preimage_coefficients

__all__ = ["MultiViewRKM"]

SOLVERS = ("auto", "primal_eig", "dual_eig", "primal_stiefel", "dual_stiefel")
PREIMAGES = ("auto", "smoother", "ridge")
# An explicit feature map of a view: a transformer (cloned, then fitted on the view) or a callable returning features.
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

    kind is "linear" (identity map), "map" (explicit features from a fitted transformer or a callable) or "kernel"
    (implicit). ``projection`` is K_c,v H (dual) or Phi_c,v U_v (primal), n x s; with ``column_means`` (those of
    the uncentred training kernel) it gives the predicted similarities of a missing view to the training points.
    ``coupling`` is B_v = U_v^T U_v (primal) or H^T K_c,v H (dual), the view's share of Gamma, and
    ``inference`` the eigendecomposition of Gamma - B_v that infers the view from the others (eqs. 15-16).
    ``name`` is the entry of the ``kernel`` parameter that messages about the view's map cite.
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
    name: str = "kernel"

    @property
    def explicit(self):
        return self.kind != "kernel"


def _check_view(X, name, n_columns=None):
    """A finite float64 2-D view (a 1-D array is one column)."""
    if X is None:
        raise ValueError(f"{name}: an array is required, got None")
    A = np.asarray(X)
    if A.dtype.kind not in "biuf":
        raise ValueError(f"{name}: must be an array of real numbers, got dtype {A.dtype}")
    A = A.astype(np.float64, copy=False)
    if A.ndim == 1:
        A = A[:, None]
    if A.ndim != 2 or 0 in A.shape:
        raise ValueError(f"{name}: must be a non-empty 1-D or 2-D array, got shape {A.shape}")
    if not np.all(np.isfinite(A)):
        raise ValueError(f"{name}: contains NaN or infinity")
    if n_columns is not None and A.shape[1] != n_columns:
        raise ValueError(f"{name}: has {A.shape[1]} columns but the model was fitted with {n_columns}")
    return np.ascontiguousarray(A)


def _check_views(views, n_views=None, missing=None, n_columns=None, why=""):
    """The views as finite float64 2-D arrays with one common number of rows; entry `missing` is ignored (None).
    n_views=None accepts any number of views; `why` follows the count in the message of a wrong one."""
    if not isinstance(views, (list, tuple)) or len(views) == 0:
        raise ValueError(f"views: must be a non-empty list or tuple of arrays (one per view), got {views!r:.80}")
    if n_views is not None and len(views) != n_views:
        raise ValueError(f"views: got {len(views)} views but the model has {n_views}{why}")
    arrays = [
        None if v == missing else _check_view(X, f"views[{v}]", None if n_columns is None else n_columns[v])
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
    """phi(X) of a fitted transformer or a callable, checked: 2-D, one row per sample, finite."""
    Phi = source.transform(X) if hasattr(source, "transform") else source(X)
    Phi = np.asarray(Phi.toarray() if hasattr(Phi, "toarray") else Phi, dtype=np.float64)
    if Phi.ndim != 2 or Phi.shape[0] != X.shape[0] or Phi.shape[1] == 0:
        raise ValueError(
            f"{name}: the feature map must return a 2-D array with one row per sample ({X.shape[0]}), "
            f"got shape {Phi.shape}"
        )
    if not np.all(np.isfinite(Phi)):
        raise ValueError(f"{name}: the feature map returned NaN or infinity")
    return np.ascontiguousarray(Phi)


def _symmetric_power(vectors, values, power):
    """O diag(values**power) O^T."""
    return (vectors * values**power) @ vectors.T


class MultiViewRKM(BaseEstimator):
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
        ``fit``/``transform`` (cloned, then fitted on the view's training data, e.g.
        :class:`rkm.features.RandomFourierFeatures` or :class:`rkm.features.Nystroem`), or a callable mapping an
        (n, p) array to its (n, d) features. The default makes every view an implicit rbf view, the vocabulary's
        default kernel; the paper's forecasting set-up is ``kernel=("rbf", "linear")`` (a linear output view is
        its own pre-image).
    gamma : float, None, or a list or tuple of them, default=None
        Bandwidth of the named kernels, one for every view or one per view (None: 1 / n_features of that view);
        ignored for kernels without one, for Kernel objects and for explicit maps.
    degree : float or a list or tuple of them, default=3
        Degree of the named polynomial kernels, one for every view or one per view.
    coef0 : float or a list or tuple of them, default=1.0
        Constant of the named polynomial kernels, one for every view or one per view.
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
    preimage : {"auto", "smoother", "ridge"}, default="auto"
        Pre-image of an inferred view that is not linear (a linear view is its own pre-image): the kernel
        smoother over the ``n_neighbors`` training points most similar by the predicted kernel row
        (Gen-RKM eq. 8), or a kernel ridge map from the scaled hidden features H Gamma^(1/2) to the view's inputs
        learned at fit time (penalty ``preimage_alpha``; the view's kernel, or rbf with gamma 1/s for an
        explicit map, as scikit-learn's ``fit_inverse_transform``). "auto": smoother.
    n_neighbors : int, default=10
        Training points the kernel smoother averages.
    preimage_alpha : float, default=1.0
        Ridge penalty of the learned pre-image map.
    n_threads : int or None, default=None
        Threads for the core and BLAS (None: OpenMP's default; -1: all cores).
    random_state : int, RandomState or None, default=None
        Seeds the Stiefel start (:func:`rkm.stiefel.random_point`) and the Krylov start block.
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
        Stiefel solvers: O with gamma_matrix_ = O diag(eigenvalues_) O^T; with ``rotate`` it has been applied
        (H_ = H_trained O). None for the eig solvers.
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

    Notes
    -----
    Inputs are taken in float64. MultiViewRKM takes a list of views, so it is not a scikit-learn transformer
    and does not support pipelines or ``clone``-based grid searches over views.

    Examples
    --------
    >>> import numpy as np
    >>> from rkm import MultiViewRKM
    >>> t = np.linspace(0.0, 6.0, 100)[:, None]
    >>> model = MultiViewRKM(2, kernel=("rbf", "linear"), gamma=(0.5, None)).fit([t, np.sin(t)])
    >>> model.transform([t, np.sin(t)]).shape, model.predict_view([t[:3], None], missing=1).shape
    ((100, 2), (3, 1))
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
        "preimage": [StrOptions(set(PREIMAGES))],
        "n_neighbors": POSITIVE_INT,
        "preimage_alpha": POSITIVE,
        "n_threads": N_THREADS,
        "random_state": RANDOM_STATE,
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
        solver: str = "auto",
        rotate: bool = True,
        rescale: bool = True,
        stiefel_method: str = "cayley_bb",
        max_iter: int | None = None,
        tol: float | None = None,
        preimage: str = "auto",
        n_neighbors: int = 10,
        preimage_alpha: float = 1.0,
        n_threads: int | None = None,
        random_state=None,
        verbose: int = 0,
    ):
        self.n_components = n_components
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.solver = solver
        self.rotate = rotate
        self.rescale = rescale
        self.stiefel_method = stiefel_method
        self.max_iter = max_iter
        self.tol = tol
        self.preimage = preimage
        self.n_neighbors = n_neighbors
        self.preimage_alpha = preimage_alpha
        self.n_threads = n_threads
        self.random_state = random_state
        self.verbose = verbose

    # ------------------------------------------------------------------ parameters

    def _check_params_vs_input(self, arrays):
        """The rules that need the views: one entry per view in each per-view parameter, each view's kernel entry
        resolved and checked (with its gamma, degree and coef0), and no implicit view for a primal solver.

        Returns the (kind, source, gamma, name) of each view: kind "kernel" with the spec (name, gamma, degree,
        coef0), "linear" (source None) or "map" (an unfitted transformer clone or a callable); name is the
        parameter entry that messages about the view's map cite ("kernel" or "kernel[1]")."""
        n_views = len(arrays)
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
                sources.append(("map", entry, None, cited))
            else:
                raise ValueError(
                    f"{cited}: must be a kernel name, an rkm.kernels.Kernel, a transformer with fit and transform, "
                    f"or a callable returning features, got {entry!r}"
                )
        implicit = [index for index, source in enumerate(sources) if source[0] == "kernel"]
        if self.solver.startswith("primal") and implicit:
            index = implicit[0]
            raise ValueError(
                f"solver: {self.solver!r} needs explicit feature maps, but view {index} has the implicit kernel "
                f"{sources[index][1][0]!r}; use a dual solver, or an explicit map such as "
                "rkm.features.RandomFourierFeatures"
            )
        return sources

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
    def fit(self, views: Sequence[ArrayLike], y: None = None) -> MultiViewRKM:
        """Fit the model on the training views.

        Parameters
        ----------
        views : list or tuple of array-like
            One (n_samples, p_v) array per view (per entry of ``kernel`` when it is a sequence; a 1-D array is one
            column), all with the same n_samples >= 2.
        y : None
            Ignored.

        Returns
        -------
        self : MultiViewRKM
            The fitted model.
        """
        self._progress = Progress(type(self).__name__, self.verbose)
        try:
            self._fit(views)
        except BaseException:  # errors and Ctrl-C alike: never leave a half-fitted model
            self._forget_fit()
            raise
        self._progress(f"fitted {self.n_components} components")
        return self

    def _forget_fit(self):
        for name in [name for name in vars(self) if name.endswith("_") and not name.startswith("__")]:
            delattr(self, name)

    def _fit(self, views):
        n_views = len(self.kernel) if isinstance(self.kernel, (list, tuple)) and self.kernel else None
        arrays = _check_views(views, n_views, why=" (one per entry of kernel)")
        n = arrays[0].shape[0]
        if n < 2:
            raise ValueError(f"views: centring needs at least 2 samples (rows), got {n}")
        sources = self._check_params_vs_input(arrays)
        views = [self._fitted_view(source, X) for source, X in zip(sources, arrays, strict=True)]
        self.solver_ = self._resolve_solver(views, n)
        self._progress(f"solver {self.solver_!r} for {n} samples and {len(views)} views")
        with blas_threads(thread_count(self.n_threads)):
            if self.solver_.startswith("primal"):
                self._fit_primal(views)
            else:
                self._fit_dual(views)
        self._views = views
        self.n_views_ = len(views)
        self.U_ = [view.U for view in views]
        self.view_dims_ = [view.dim for view in views]
        self.input_dims_ = [view.X.shape[1] for view in views]
        self.gamma_ = [view.gamma for view in views]
        self.objective_ = -0.5 * float(np.trace(self._gamma))
        self.preimages_ = ["identity" if view.kind == "linear" else self._resolved_preimage() for view in views]
        for view in views:
            view.inference = np.linalg.eigh(self._gamma - view.coupling)
        if self.preimage == "ridge":
            self._fit_ridge_preimages(views)

    def _resolved_preimage(self):
        return "smoother" if self.preimage == "auto" else self.preimage

    def _fitted_view(self, source, X):
        """The view of a resolved source and, for an explicit view, its training features and their mean."""
        kind, source, gamma, name = source
        view = _View(kind, source, X, gamma, name=name)
        if kind == "linear":
            view.features = X
        elif kind == "map":
            if hasattr(source, "fit"):
                source.fit(X)
            view.features = _explicit_features(source, X, name)
        if view.explicit:
            view.mean = view.features.mean(axis=0)
            view.dim = view.features.shape[1]
        return view

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
            warnings.warn(
                f"MultiViewRKM: the Stiefel method {self.stiefel_method!r} stopped ({result.status}) after "
                f"{result.nit} iterations at ||A X - X Gamma||_F = {result.grad_norm:.3g}, above tol ||A||_F = "
                f"{tol:.3g}: {result.message}; increase max_iter or tol",
                ConvergenceWarning,
                stacklevel=7,  # the user's call of fit (through _fit_context's wrapper)
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

    def _fit_primal(self, views):
        """Algorithms 1 and 3: C from the centred concatenated features, U = U~ Gamma^(1/2), H by eq. 6."""
        Phi = np.hstack([view.features for view in views])
        Phi -= np.concatenate([view.mean for view in views])
        C = np.ascontiguousarray(FeatureMoments.from_block(Phi).scatter)
        self._progress(f"covariance of {C.shape[0]} features")
        U_tilde, Gamma = self._solve(C, "covariance C")
        self._store_gamma(Gamma)
        U = U_tilde @ self._gamma_sqrt if self.rescale else U_tilde
        H = np.linalg.solve(Gamma, (Phi @ U).T).T
        flips = self._flip_signs(H)
        H, U = H * flips, U * flips
        self.H_ = np.ascontiguousarray(H)
        start = 0
        for view in views:
            stop = start + view.features.shape[1]
            view.U = np.ascontiguousarray(U[start:stop])
            view.coupling = view.U.T @ view.U
            if view.kind == "map":
                view.projection = Phi[:, start:stop] @ view.U
                view.column_means = view.features @ view.mean
            # New points' features come from the map itself: the training ones are not needed any more.
            view.features = None
            start = stop

    def _centred_training_kernel(self, view):
        """M K_v M of one view, its column means and grand mean (Algorithm 2, steps 3-4)."""
        if view.kind == "kernel":
            name, gamma, degree, coef0 = view.source
            K = kernel_matrix(view.X, None, name, gamma, degree, coef0, n_threads=self.n_threads)
        elif view.kind == "linear":
            K = kernel_matrix(view.X, None, "linear", n_threads=self.n_threads)
        else:
            K = view.features @ view.features.T
        view.column_means, view.grand_mean = _core.center_kernel(K, self.n_threads)
        return K

    def _fit_dual(self, views):
        """Algorithms 2 and 4: K = sum_v M K_v M, H; U_v = Phi_c,v^T H for explicit views (eq. 5)."""
        kernels = [self._centred_training_kernel(view) for view in views]
        K = kernels[0].copy() if len(kernels) > 1 else kernels[0]
        for K_v in kernels[1:]:
            K += K_v
        self._progress(f"summed centred kernel of {K.shape[0]} samples")
        H, Gamma = self._solve(K, "kernel matrix K")
        del K
        self._store_gamma(Gamma)
        H = H * self._flip_signs(H)
        self.H_ = np.ascontiguousarray(H)
        column_sums = H.sum(axis=0)
        for view, K_v in zip(views, kernels, strict=True):
            view.projection = K_v @ H
            view.coupling = H.T @ view.projection
            view.coupling = (view.coupling + view.coupling.T) / 2
            if view.explicit:
                view.U = view.features.T @ H - np.outer(view.mean, column_sums)

    # ------------------------------------------------------------------ pre-images

    def _ridge_spec(self, view):
        return view.source if view.kind == "kernel" else ("rbf", 1.0 / self.n_components, 3, 1.0)

    def _fit_ridge_preimages(self, views):
        """Kernel ridge maps from H Gamma^(1/2) to the inputs of each non-linear view (KernelPCA's "ridge")."""
        Z = self.H_ @ self._gamma_sqrt
        for view in views:
            if view.kind == "linear":
                continue
            view.ridge = ridge_preimage_coefficients(
                Z, view.X, self._ridge_spec(view), self.preimage_alpha, self.n_threads
            )
        self._ridge_inputs = Z

    def _preimage(self, h, view):
        """Inputs of `view` from hidden features h inferred without it."""
        if view.kind == "linear":
            return h @ view.U.T + view.mean
        if view.ridge is not None:
            name, gamma, degree, coef0 = self._ridge_spec(view)
            K = kernel_matrix(
                h @ self._gamma_sqrt, self._ridge_inputs, name, gamma, degree, coef0, n_threads=self.n_threads
            )
            return K @ view.ridge
        # Predicted centred kernel row (eq. 16, or Phi_c phi~ in the primal) plus the column means: the similarities
        # up to a constant per point, which the smoother's scaling removes.
        similarities = h @ view.projection.T + view.column_means
        return kernel_smoother(similarities, view.X, self.n_neighbors)

    # ------------------------------------------------------------------ inference

    def _centred_rows(self, view, X):
        """Kernel rows k_v(x*, X_train) fully centred with the training statistics (dual); an explicit map's rows
        are phi(x*) Phi_train^T."""
        if view.kind == "kernel":
            name, gamma, degree, coef0 = view.source
            rows = kernel_matrix(X, view.X, name, gamma, degree, coef0, n_threads=self.n_threads)
        elif view.kind == "linear":
            rows = kernel_matrix(X, view.X, "linear", n_threads=self.n_threads)
        else:
            rows = np.ascontiguousarray(_explicit_features(view.source, X, view.name) @ view.features.T)
        _core.center_kernel_rows(rows, view.column_means, view.grand_mean, self.n_threads)
        return rows

    def _view_scores(self, view, X):
        """U_v^T phi_c,v(x*) (primal) or H^T k~_v(x*) (dual) for the rows of X: shape (n*, s)."""
        if self.solver_.startswith("primal"):
            Phi = X if view.kind == "linear" else _explicit_features(view.source, X, view.name)
            return (Phi - view.mean) @ view.U
        n_train = self.H_.shape[0]
        step = max(1, ROW_BLOCK_BYTES // (8 * n_train))
        return np.vstack(
            [self._centred_rows(view, X[start : start + step]) @ self.H_ for start in range(0, X.shape[0], step)]
        )

    def _scores(self, arrays, skip=None):
        with blas_threads(thread_count(self.n_threads)):
            return sum(
                self._view_scores(view, X)
                for v, (view, X) in enumerate(zip(self._views, arrays, strict=True))
                if v != skip
            )

    def _check_new_views(self, views, missing=None):
        return _check_views(views, self.n_views_, missing, self.input_dims_)

    def transform(self, views: Sequence[ArrayLike]) -> np.ndarray:
        """Hidden features of new points from all their views, eq. 6.

        h* = Gamma^(-1) sum_v U_v^T phi_c,v(x*) in the primal, Gamma^(-1) H^T sum_v k~_v(x*) in the dual; on the
        training views these are the rows of H_.

        Parameters
        ----------
        views : list or tuple of array-like
            One (n*, p_v) array per view.

        Returns
        -------
        ndarray of shape (n*, n_components)
        """
        check_is_fitted(self)
        arrays = self._check_new_views(views)
        return np.linalg.solve(self._gamma, self._scores(arrays).T).T

    def _check_missing(self, missing):
        if not isinstance(missing, numbers.Integral) or isinstance(missing, bool) or not 0 <= missing < self.n_views_:
            raise ValueError(f"missing: must be an int in [0, {self.n_views_}), got {missing!r}")
        if self.n_views_ == 1:
            raise ValueError("missing: a model of one view has no other view to infer it from")
        return int(missing)

    def _missing_latents(self, scores, missing):
        """h* = (Gamma - B_k)^(-1) scores (eqs. 15-16), refusing a singular Gamma - B_k."""
        values, vectors = self._views[missing].inference
        smallest = values[0]
        if smallest <= SINGULAR_RATIO * self.eigenvalues_[0]:
            raise ValueError(
                f"missing: Gamma - B_{missing} of eqs. 15-16 is singular (smallest eigenvalue {smallest:.3g}): the "
                f"other views do not determine every component (view {missing} carries all of the variance of "
                "some of them); use fewer components or infer another view"
            )
        return ((scores @ vectors) / values) @ vectors.T

    def predict_latent(self, views: Sequence[ArrayLike], missing: int) -> np.ndarray:
        """Hidden features of new points inferred without view `missing` (the h* of eqs. 15-16).

        Parameters
        ----------
        views : list or tuple
            One array per view; entry `missing` may be None (it is ignored).
        missing : int
            Index of the view to leave out.

        Returns
        -------
        ndarray of shape (n*, n_components)
        """
        check_is_fitted(self)
        missing = self._check_missing(missing)
        arrays = self._check_new_views(views, missing)
        return self._missing_latents(self._scores(arrays, skip=missing), missing)

    def predict_view(self, views: Sequence[ArrayLike], missing: int) -> np.ndarray:
        """Infer view `missing` of new points from their other views, eq. 15 (primal) or 16 (dual), then map it
        to the view's input space: exactly for a linear view (the feature plus the training mean), else by the
        pre-image method ``preimage``.

        Parameters
        ----------
        views : list or tuple
            One (n*, p_v) array per view; entry `missing` may be None (it is ignored).
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
        h = self.predict_latent(views, missing)
        return self._preimage(h, self._views[int(missing)])
