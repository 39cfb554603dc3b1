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

import numbers
import time
import warnings
from dataclasses import dataclass

import numpy as np
from sklearn.base import BaseEstimator, clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.validation import check_is_fitted

from rkm import _core, stiefel
from rkm._utils import eigen
from rkm._utils.threads import blas_threads, check_n_threads, thread_count
from rkm._utils.validation import check_choices, check_int, check_positive
from rkm._utils.primal import FeatureMoments
from rkm._utils.eigen import sign_flips
from rkm.kernels import Kernel, kernel_matrix, kernel_spec
from rkm.preimage import kernel_smoother, ridge_preimage_coefficients

__all__ = ["MultiViewRKM"]

SOLVERS = ("auto", "primal_eig", "dual_eig", "primal_stiefel", "dual_stiefel")
PREIMAGES = ("auto", "smoother", "ridge")
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


def _check_views(views, n_views, missing=None, n_columns=None):
    """The views as finite float64 2-D arrays with one common number of rows; entry `missing` is ignored (None)."""
    if not isinstance(views, (list, tuple)) or len(views) == 0:
        raise ValueError(f"views: must be a non-empty list or tuple of arrays (one per view), got {views!r:.80}")
    if len(views) != n_views:
        raise ValueError(f"views: got {len(views)} views but the model has {n_views} (one per entry of kernels)")
    arrays = [
        None if v == missing else _check_view(X, f"views[{v}]", None if n_columns is None else n_columns[v])
        for v, X in enumerate(views)
    ]
    rows = [A.shape[0] for A in arrays if A is not None]
    if len(set(rows)) > 1:
        raise ValueError(f"views: all views need the same number of rows, got {rows}")
    return arrays


def _renamed(error, index):
    """kernel_spec's "kernel: ..." and "gamma: ..." messages renamed after this estimator's arguments."""
    message = str(error)
    for old, new in (("kernel:", f"kernels[{index}]:"), ("gamma:", f"gammas[{index}]:")):
        if message.startswith(old):
            return ValueError(new + message[len(old):])
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
    kernels : sequence, default=("rbf", "linear")
        One entry per view: a kernel name ("rbf", "laplacian", "poly", "cosine", "tanimoto": implicit, dual
        only; "linear": the identity map, explicit), an :class:`rkm.kernels.Kernel` (its own parameters apply),
        a transformer with ``fit``/``transform`` (cloned, then fitted on the view's training data, e.g.
        :class:`rkm.features.RandomFourierFeatures` or :class:`rkm.features.Nystroem`), or a callable mapping an
        (n, p) array to its (n, d) features.
    gammas : sequence or None, default=None
        Bandwidth of each named kernel (None entries, or None: 1 / n_features of that view); ignored for kernels
        without one and for the other entry types.
    solver : {"auto", "primal_eig", "dual_eig", "primal_stiefel", "dual_stiefel"}, default="auto"
        Algorithms 1 to 4. "auto" follows the flowchart of Fig. 1 for fixed feature maps: the dual when a view
        is implicit or when n_samples <= d (the summed feature dimension), the primal otherwise, both by
        eigendecomposition. The eigendecomposition uses LAPACK for at most 200 rows or more than a fifth of the
        spectrum, else the block Krylov solver.
    degree, coef0 : float
        Parameters of named polynomial kernels.
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
    max_iter : int, default=None
        Most iterations of the Stiefel method (None: 1000), or block products of the Krylov eigensolver (None:
        its default).
    tol : float, default=None
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
    n_threads : int, default=None
        Threads for the core and BLAS (None: OpenMP's default; -1: all cores).
    random_state : int, RandomState or None
        Seeds the Stiefel start (:func:`rkm.stiefel.random_point`) and the Krylov start block.
    verbose : int, default=0
        Prints the resolved solver and the fit's progress; > 1 also the Stiefel method's history.

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
    gammas_ : list of (float or None)
        Bandwidth used by each named kernel (None where there is none).
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
    """

    def __init__(
        self,
        n_components,
        kernels=("rbf", "linear"),
        gammas=None,
        solver="auto",
        *,
        degree=3,
        coef0=1.0,
        rotate=True,
        rescale=True,
        stiefel_method="cayley_bb",
        max_iter=None,
        tol=None,
        preimage="auto",
        n_neighbors=10,
        preimage_alpha=1.0,
        n_threads=None,
        random_state=None,
        verbose=0,
    ):
        self.n_components = n_components
        self.kernels = kernels
        self.gammas = gammas
        self.solver = solver
        self.degree = degree
        self.coef0 = coef0
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

    def _validate_params(self):
        check_int(self.n_components, "n_components")
        if not isinstance(self.kernels, (list, tuple)) or len(self.kernels) == 0:
            raise ValueError(f"kernels: must be a non-empty list or tuple (one entry per view), got {self.kernels!r}")
        if self.gammas is not None and (
            not isinstance(self.gammas, (list, tuple)) or len(self.gammas) != len(self.kernels)
        ):
            raise ValueError(
                f"gammas: must be None or a list or tuple with one entry per view ({len(self.kernels)}), "
                f"got {self.gammas!r}"
            )
        check_choices((
            ("solver", self.solver, SOLVERS),
            ("stiefel_method", self.stiefel_method, stiefel.METHODS),
            ("preimage", self.preimage, PREIMAGES),
        ))
        for name in ("rotate", "rescale"):
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                raise ValueError(f"{name}: must be True or False, got {getattr(self, name)!r}")
        check_int(self.max_iter, "max_iter", allow_none=True)
        check_positive(self.tol, "tol", allow_none=True)
        check_int(self.n_neighbors, "n_neighbors")
        check_positive(self.preimage_alpha, "preimage_alpha")
        check_n_threads(self.n_threads)
        check_int(self.verbose, "verbose", low=0)

    def _view_source(self, index, n_features):
        """(kind, source, gamma) of view `index`: a kernel spec for "kernel", None for "linear", an unfitted
        transformer clone or a callable for "map"."""
        entry = self.kernels[index]
        gamma = None if self.gammas is None else self.gammas[index]
        if isinstance(entry, (str, Kernel)):
            try:
                spec = kernel_spec(entry, gamma, self.degree, self.coef0, n_features)
            except ValueError as error:
                raise _renamed(error, index) from None
            return ("linear", None, None) if spec[0] == "linear" else ("kernel", spec, spec[1])
        if hasattr(entry, "fit") and hasattr(entry, "transform"):
            return "map", clone(entry, safe=False), None
        if callable(entry):
            return "map", entry, None
        raise ValueError(
            f"kernels[{index}]: must be a kernel name, an rkm.kernels.Kernel, a transformer with fit and transform, "
            f"or a callable returning features, got {entry!r}"
        )

    def _resolve_solver(self, views, n_samples):
        implicit = [v for v, view in enumerate(views) if not view.explicit]
        if self.solver.startswith("primal") and implicit:
            v = implicit[0]
            raise ValueError(
                f"solver: {self.solver!r} needs explicit feature maps, but view {v} has the implicit kernel "
                f"{views[v].source[0]!r}; use a dual solver, or an explicit map such as "
                "rkm.features.RandomFourierFeatures"
            )
        if self.solver != "auto":
            return self.solver
        if implicit:
            return "dual_eig"
        d = sum(view.dim for view in views)
        return "dual_eig" if n_samples <= AUTO_DUAL_FEATURE_RATIO * d else "primal_eig"

    def _say(self, message):
        if self.verbose:
            print(f"MultiViewRKM [{time.perf_counter() - self._fit_began:7.2f} s] {message}", flush=True)

    # ------------------------------------------------------------------ fitting

    def fit(self, views, y=None):
        """Fit the model on the training views.

        Parameters
        ----------
        views : list or tuple of array-like
            One (n_samples, p_v) array per entry of ``kernels`` (a 1-D array is one column), all with the same
            n_samples >= 2.
        y : ignored

        Returns
        -------
        self
        """
        self._validate_params()
        self._fit_began = time.perf_counter()
        try:
            self._fit(views)
        except BaseException:  # errors and Ctrl-C alike: never leave a half-fitted model
            self._forget_fit()
            raise
        self._say(f"fitted {self.n_components} components")
        return self

    def _forget_fit(self):
        for name in [name for name in vars(self) if name.endswith("_") and not name.startswith("__")]:
            delattr(self, name)

    def _fit(self, views):
        arrays = _check_views(views, len(self.kernels))
        n = arrays[0].shape[0]
        if n < 2:
            raise ValueError(f"views: centring needs at least 2 samples (rows), got {n}")
        views = [self._fitted_view(v, X) for v, X in enumerate(arrays)]
        self.solver_ = self._resolve_solver(views, n)
        self._say(f"solver {self.solver_!r} for {n} samples and {len(views)} views")
        size = n if self.solver_.startswith("dual") else sum(view.dim for view in views)
        if self.n_components > size:
            what = "n_samples" if self.solver_.startswith("dual") else "the summed feature dimension d"
            raise ValueError(
                f"n_components: must be at most {what} = {size} for {self.solver_!r}, got {self.n_components}"
            )
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
        self.gammas_ = [view.gamma for view in views]
        self.objective_ = -0.5 * float(np.trace(self._gamma))
        self.preimages_ = ["identity" if view.kind == "linear" else self._resolved_preimage() for view in views]
        for view in views:
            view.inference = np.linalg.eigh(self._gamma - view.coupling)
        if self.preimage == "ridge":
            self._fit_ridge_preimages(views)

    def _resolved_preimage(self):
        return "smoother" if self.preimage == "auto" else self.preimage

    def _fitted_view(self, index, X):
        """The view's source resolved and, for an explicit view, its training features and their mean."""
        kind, source, gamma = self._view_source(index, X.shape[1])
        view = _View(kind, source, X, gamma)
        if kind == "linear":
            view.features = X
        elif kind == "map":
            if hasattr(source, "fit"):
                source.fit(X)
            view.features = _explicit_features(source, X, f"kernels[{index}]")
        if view.explicit:
            view.mean = view.features.mean(axis=0)
            view.dim = view.features.shape[1]
        return view

    def _eigenpairs(self, A):
        """Top s eigenpairs of the symmetric A (C or K): (values, orthonormal vectors, n_iter)."""
        s = self.n_components
        solver = "dense" if eigen.prefer_dense(A.shape[0], s) else "krylov"
        w, V, _, n_iter = eigen.leading_eigenpairs(
            A, s, solver, n_threads=self.n_threads, random_state=self.random_state, tol=self.tol,
            max_iter=self.max_iter, model="MultiViewRKM",
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
            objective, start, method=self.stiefel_method, tol=tol, max_iter=self.max_iter or DEFAULT_STIEFEL_MAX_ITER,
            verbose=max(self.verbose - 1, 0),
        )
        if not result.success:
            warnings.warn(
                f"MultiViewRKM: the Stiefel method {self.stiefel_method!r} stopped ({result.status}) after "
                f"{result.nit} iterations at ||A X - X Gamma||_F = {result.grad_norm:.3g}, above tol ||A||_F = "
                f"{tol:.3g}: {result.message}; increase max_iter or tol",
                ConvergenceWarning,
                stacklevel=6,
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
        self._say(f"covariance of {C.shape[0]} features")
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
        self._say(f"summed centred kernel of {K.shape[0]} samples")
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
            view.ridge = ridge_preimage_coefficients(Z, view.X, self._ridge_spec(view), self.preimage_alpha,
                                                     self.n_threads)
        self._ridge_inputs = Z

    def _preimage(self, h, view):
        """Inputs of `view` from hidden features h inferred without it."""
        if view.kind == "linear":
            return h @ view.U.T + view.mean
        if view.ridge is not None:
            name, gamma, degree, coef0 = self._ridge_spec(view)
            K = kernel_matrix(h @ self._gamma_sqrt, self._ridge_inputs, name, gamma, degree, coef0,
                              n_threads=self.n_threads)
            return K @ view.ridge
        # Predicted centred kernel row (eq. 16, or Phi_c phi~ in the primal) plus the column means: the similarities
        # up to a constant per point, which the smoother's scaling removes.
        similarities = h @ view.projection.T + view.column_means
        return kernel_smoother(similarities, view.X, self.n_neighbors)

    # ------------------------------------------------------------------ inference

    def _centred_rows(self, view, X, index):
        """Kernel rows k_v(x*, X_train) fully centred with the training statistics (dual); an explicit map's rows
        are phi(x*) Phi_train^T."""
        if view.kind == "kernel":
            name, gamma, degree, coef0 = view.source
            rows = kernel_matrix(X, view.X, name, gamma, degree, coef0, n_threads=self.n_threads)
        elif view.kind == "linear":
            rows = kernel_matrix(X, view.X, "linear", n_threads=self.n_threads)
        else:
            rows = np.ascontiguousarray(_explicit_features(view.source, X, f"kernels[{index}]") @ view.features.T)
        _core.center_kernel_rows(rows, view.column_means, view.grand_mean, self.n_threads)
        return rows

    def _view_scores(self, view, X, index):
        """U_v^T phi_c,v(x*) (primal) or H^T k~_v(x*) (dual) for the rows of X: shape (n*, s)."""
        if self.solver_.startswith("primal"):
            Phi = X if view.kind == "linear" else _explicit_features(view.source, X, f"kernels[{index}]")
            return (Phi - view.mean) @ view.U
        n_train = self.H_.shape[0]
        step = max(1, ROW_BLOCK_BYTES // (8 * n_train))
        return np.vstack([self._centred_rows(view, X[start:start + step], index) @ self.H_
                          for start in range(0, X.shape[0], step)])

    def _scores(self, arrays, skip=None):
        with blas_threads(thread_count(self.n_threads)):
            return sum(self._view_scores(view, X, v) for v, (view, X) in enumerate(zip(self._views, arrays, strict=True))
                       if v != skip)

    def _check_new_views(self, views, missing=None):
        return _check_views(views, self.n_views_, missing, self.input_dims_)

    def transform(self, views):
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

    def predict_latent(self, views, missing):
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

    def predict_view(self, views, missing):
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
