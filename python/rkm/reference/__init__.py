"""Pure NumPy/SciPy reference implementations of the ``rkm._core`` routines.

This package is the NumPy twin of the compiled extension ``rkm._core``: every
public function here has the same name, signature and output convention as
its C++ counterpart, and validates its arguments as the core's Python layer
does.  It is written for clarity and correctness rather than speed, and
serves as the oracle the compiled core is tested against.

Its modules mirror the core's (``cpp/core``): :mod:`~rkm.reference.kernels`
(kernel matrices, products and gradients), :mod:`~rkm.reference.center`,
:mod:`~rkm.reference.eigs`, :mod:`~rkm.reference.products`,
:mod:`~rkm.reference.features` (random Fourier features) and
:mod:`~rkm.reference.lssvm` (the LS-SVM dual system), :mod:`~rkm.reference.deep` (the deep RKM's
reduced-set objective and level-wise solvers), :mod:`~rkm.reference.stiefel` (optimization on the Stiefel
manifold), :mod:`~rkm.reference.constr_drkm` (the constrained deep RKM's objective) and
:mod:`~rkm.reference.kae` (the kernel autoencoder's loss and gradients) and
:mod:`~rkm.reference.preimage` (the kernel-smoother pre-image of latent points); every public
function is importable from the package itself.

Conventions shared with the core
--------------------------------
* Floating outputs keep the dtype of the main input when it is ``float32`` or
  ``float64`` (kernels: float32 when all their array inputs are float32);
  all arithmetic is carried out in ``float64``.
* Eigenvalues are returned in descending order and every eigenvector is
  oriented so that its entry of largest absolute value is positive (the first
  such entry on ties), which makes eigenvectors comparable across solvers.
* Bad input raises ``ValueError`` (``TypeError`` for the wrong kind of array
  in the in-place routines) whose message starts with the argument's name.
  Inputs must not hold NaN or infinity, and a kernel matrix that comes out
  non-finite is an error, not a result.
* ``n_threads`` (None, a positive count, or negative: -1 = all cores) limits
  the BLAS library's threads for the duration of the call; None leaves them
  as they are.

Products run a block of rows at a time (``_blocks.blockwise``): that bounds the
temporaries by the block rather than the whole matrix, and it never hands
NumPy the product of a large matrix with its own transpose, which NumPy sends
to BLAS's SYRK routine, whose multi-threaded OpenBLAS version crashes on some
large inputs (e.g. ``X @ X.T`` for X of shape (20000, 256), float64).
"""

from rkm.reference.center import center_kernel, center_kernel_rows
from rkm.reference.constr_drkm import (
    ConstrainedDeepObjective,
    constr_drkm_objective,
    levelwise_init,
)
from rkm.reference.deep import (
    deep_levelwise_kpca_kpca_lssvm,
    deep_levelwise_lssvm_kpca_kpca,
    deep_reduced_set_forward,
    deep_reduced_set_objective,
)
from rkm.reference.eigs import eigh, kernel_top_eigsh, top_eigsh, top_eigsh_operator
from rkm.reference.features import fourier_features
from rkm.reference.kae import kae_loss_and_grad
from rkm.reference.kernels import kernel_gradient, kernel_matrix, kernel_product
from rkm.reference.lssvm import lssvm_dual_fit, lssvm_dual_fit_mixed, lssvm_dual_solve
from rkm.reference.preimage import smoother_preimage
from rkm.reference.products import block_product, transposed_product
from rkm.reference.stiefel import polar_orthonormalize, stiefel_minimize

__all__ = [
    "kernel_matrix",
    "kernel_product",
    "kernel_gradient",
    "center_kernel",
    "center_kernel_rows",
    "eigh",
    "top_eigsh",
    "top_eigsh_operator",
    "kernel_top_eigsh",
    "block_product",
    "transposed_product",
    "fourier_features",
    "lssvm_dual_solve",
    "lssvm_dual_fit",
    "lssvm_dual_fit_mixed",
    "deep_reduced_set_objective",
    "deep_reduced_set_forward",
    "deep_levelwise_lssvm_kpca_kpca",
    "deep_levelwise_kpca_kpca_lssvm",
    "polar_orthonormalize",
    "stiefel_minimize",
    "constr_drkm_objective",
    "ConstrainedDeepObjective",
    "levelwise_init",
    "kae_loss_and_grad",
    "smoother_preimage",
]
