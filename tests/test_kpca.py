"""rkm.KernelPCA: the RKM formulation against scikit-learn, identities, pre-images and bad input."""

import warnings

import numpy as np
import pytest
from sklearn.decomposition import PCA
from sklearn.decomposition import KernelPCA as SklearnKernelPCA
from sklearn.exceptions import ConvergenceWarning, PositiveSpectrumWarning
from sklearn.metrics.pairwise import pairwise_kernels

from rkm import KernelPCA, _core, datasets, exceptions
from rkm._utils import validation
from rkm._utils.eigen import fit_memory_bytes as _fit_memory_bytes
from rkm.features import Nystroem, RandomFourierFeatures
from rkm.kernels import KERNEL_NAMES, RBF, kernel_matrix
from rkm.shallow import kpca


def _align_signs(A, B):
    """Flip the columns of A to best match B."""
    return A * np.sign(np.sum(A * B, axis=0))


@pytest.fixture
def blobs(rng):
    centers = rng.normal(scale=3.0, size=(4, 6))
    return centers[rng.integers(0, 4, size=1500)] + rng.normal(size=(1500, 6))


@pytest.mark.parametrize("solver", ["dense", "krylov"])
@pytest.mark.parametrize(
    "kernel,params",
    [
        ("rbf", dict(gamma=0.05)),
        ("poly", dict(gamma=0.1, degree=2)),
        ("linear", {}),
        ("laplacian", dict(gamma=0.05)),
        ("cosine", {}),
    ],
)
def test_matches_sklearn_kernel_pca(blobs, solver, kernel, params):
    metric = dict(metric="polynomial" if kernel == "poly" else kernel, **params)
    ours = KernelPCA(8, kernel=kernel, solver=solver, scaling="sklearn", random_state=0, **params).fit(blobs)
    # scikit-learn's KernelPCA has no laplacian kernel: give it the Gram matrix instead.
    theirs = SklearnKernelPCA(8, kernel="precomputed", eigen_solver="dense").fit(pairwise_kernels(blobs, **metric))
    np.testing.assert_allclose(ours.eigenvalues_, theirs.eigenvalues_, rtol=1e-8)
    Xt = blobs[:200] + 0.1
    Z, Z_ref = ours.transform(Xt), theirs.transform(pairwise_kernels(Xt, blobs, **metric))
    np.testing.assert_allclose(_align_signs(Z, Z_ref), Z_ref, rtol=1e-6, atol=1e-6 * np.abs(Z_ref).max())


def test_hidden_features_satisfy_the_rkm_eigenproblem(blobs):
    eta = 2.5
    model = KernelPCA(5, gamma=0.05, eta=eta, random_state=0).fit(blobs)
    K = kernel_matrix(blobs, gamma=0.05)
    n = K.shape[0]
    J = np.eye(n) - 1.0 / n
    K_c = J @ K @ J
    H = model.H_
    # (1/eta) K_c H^T = H^T Lambda (Suykens 2017 eq. 3.27) with orthonormal hidden features.
    np.testing.assert_allclose(K_c @ H / eta, H * model.eigenvalues_, atol=1e-8)
    np.testing.assert_allclose(H.T @ H, np.eye(5), atol=1e-10)
    # Out-of-sample encoding of the training points (Constr-DRKM eq. 4) returns their hidden features.
    np.testing.assert_allclose(model.transform(blobs), H, atol=1e-8)
    assert np.array_equal(model.fit_transform(blobs), model.H_)


def test_scalings_are_consistent(blobs):
    hidden = KernelPCA(4, gamma=0.05, eta=3.0, random_state=0).fit(blobs)
    score = KernelPCA(4, gamma=0.05, eta=3.0, scaling="score", random_state=0).fit(blobs)
    sk = KernelPCA(4, gamma=0.05, eta=3.0, scaling="sklearn", random_state=0).fit(blobs)
    Xt = blobs[:50] * 1.1
    h = hidden.transform(Xt)
    for model, factor in ((score, hidden.eigenvalues_), (sk, np.sqrt(3.0 * hidden.eigenvalues_))):
        expected = h * factor
        np.testing.assert_allclose(model.transform(Xt), expected, rtol=1e-8, atol=1e-10 * np.abs(expected).max())


def test_linear_centered_dual_equals_primal_pca(blobs):
    # Centring K in feature space equals removing the mean of explicit (here: identity) features.
    ours = KernelPCA(3, kernel="linear", scaling="sklearn", random_state=0).fit(blobs)
    pca = PCA(3).fit(blobs)
    Xt = blobs[:100] + 1.0
    Z, Z_ref = ours.transform(Xt), pca.transform(Xt)
    np.testing.assert_allclose(_align_signs(Z, Z_ref), Z_ref, atol=1e-8)
    np.testing.assert_allclose(ours.eigenvalues_, pca.explained_variance_ * (len(blobs) - 1), rtol=1e-8)


def test_precomputed_equals_explicit(blobs):
    explicit = KernelPCA(6, gamma=0.05, random_state=0).fit(blobs)
    K = kernel_matrix(blobs, gamma=0.05)
    pre = KernelPCA(6, kernel="precomputed", random_state=0).fit(K)
    np.testing.assert_allclose(pre.eigenvalues_, explicit.eigenvalues_, rtol=1e-10)
    Xt = blobs[:30] - 0.5
    K_rows = kernel_matrix(Xt, blobs, gamma=0.05)
    np.testing.assert_allclose(pre.transform(K_rows), explicit.transform(Xt), atol=1e-10)
    with pytest.raises(ValueError, match="precomputed"):
        pre.inverse_transform(pre.transform(K_rows))


def test_kernel_object_and_uncentered(blobs):
    model = KernelPCA(4, kernel=RBF(gamma=0.05), center=False, random_state=0).fit(blobs)
    K = kernel_matrix(blobs, gamma=0.05)
    np.testing.assert_allclose(model.eigenvalues_, np.linalg.eigvalsh(K)[::-1][:4], rtol=1e-9)
    assert model.gamma_ == 0.05


def test_float32_preserved_and_close(blobs):
    m64 = KernelPCA(5, gamma=0.05, solver="krylov", random_state=0).fit(blobs)
    m32 = KernelPCA(5, gamma=0.05, solver="krylov", random_state=0).fit(blobs.astype(np.float32))
    assert m32.eigenvalues_.dtype == np.float32 and m32.H_.dtype == np.float32
    assert m32.transform(blobs[:10].astype(np.float32)).dtype == np.float32
    np.testing.assert_allclose(m32.eigenvalues_, m64.eigenvalues_, rtol=1e-4)


def test_n_components_none_keeps_positive_spectrum(rng):
    X = rng.normal(size=(40, 3))
    model = KernelPCA(kernel="linear", random_state=0).fit(X)
    assert model.eigenvalues_.shape == (3,)  # a rank-3 centred linear kernel
    assert model.transform(X).shape == (40, 3)


def test_random_state_makes_krylov_deterministic(blobs):
    a = KernelPCA(5, gamma=0.05, solver="krylov", random_state=7).fit(blobs)
    b = KernelPCA(5, gamma=0.05, solver="krylov", random_state=7).fit(blobs)
    assert np.array_equal(a.H_, b.H_)


def test_krylov_non_convergence_warns(blobs):
    with pytest.warns(exceptions.ConvergenceWarning, match="block products") as record:
        model = KernelPCA(5, gamma=0.05, solver="krylov", max_iter=1, tol=1e-14, random_state=0).fit(blobs)
    assert model.n_iter_ == 1 and model.eigen_residuals_.max() > 1e-14
    # rkm's class (a subclass of scikit-learn's), attributed to the user's line, not to rkm's code
    assert issubclass(exceptions.ConvergenceWarning, ConvergenceWarning)
    assert all(w.filename == __file__ for w in record if issubclass(w.category, exceptions.ConvergenceWarning))


# The learned ridge map is fitted on the noisy points themselves, so it removes less noise than the
# pre-images that work in feature space.
@pytest.mark.parametrize("preimage,max_ratio", [("fixed_point", 0.7), ("smoother", 0.7), ("ridge", 0.9)])
def test_denoising_reduces_error_on_noisy_shape(preimage, max_ratio):
    shape = datasets.make_square(n_samples=800, noise=0.1, random_state=0)
    # Tangential noise cannot be removed, so about half of the squared error is the floor.
    model = KernelPCA(16, gamma=1 / (2 * 0.3**2), preimage=preimage, random_state=0).fit(shape.data)
    denoised = model.denoise(shape.data)
    noisy_error = np.mean(np.sum((shape.data - shape.clean) ** 2, axis=1))
    denoised_error = np.mean(np.sum((denoised - shape.clean) ** 2, axis=1))
    assert denoised.shape == shape.data.shape
    assert denoised_error < max_ratio * noisy_error


def test_inverse_transform_of_training_projection_is_near_data(blobs):
    model = KernelPCA(8, gamma=0.05, preimage="fixed_point", random_state=0).fit(blobs)
    recon = model.inverse_transform(model.transform(blobs[:50]))
    spread = np.mean(np.linalg.norm(blobs[:50] - blobs.mean(0), axis=1))
    assert np.mean(np.linalg.norm(recon - blobs[:50], axis=1)) < spread
    with pytest.raises(ValueError, match="X"):
        model.inverse_transform(np.ones((3, 2)))


def test_fixed_point_needs_rbf(blobs):
    with pytest.raises(ValueError, match="fixed_point"):
        KernelPCA(3, kernel="linear", preimage="fixed_point", random_state=0).fit(blobs)


@pytest.mark.parametrize("bad_value", [np.nan, np.inf])
def test_rejects_non_finite(blobs, bad_value):
    X = blobs.copy()
    X[3, 2] = bad_value
    with pytest.raises(ValueError):
        KernelPCA(2, random_state=0).fit(X)
    model = KernelPCA(2, random_state=0).fit(blobs)
    with pytest.raises(ValueError):
        model.transform(X)


def test_rejects_bad_shapes(blobs):
    with pytest.raises(ValueError):
        KernelPCA(2, random_state=0).fit(np.empty((0, 3)))
    with pytest.raises(ValueError):
        KernelPCA(2, random_state=0).fit(np.arange(10.0))
    model = KernelPCA(2, random_state=0).fit(blobs)
    with pytest.raises(ValueError, match="features"):
        model.transform(blobs[:, :3])


@pytest.mark.parametrize(
    "params,match",
    [
        (dict(n_components=2000), "n_components: must be between 1 and n_samples=1500"),
        (dict(n_components=0), "The 'n_components' parameter of KernelPCA"),
        (dict(n_components=True), "The 'n_components' parameter of KernelPCA"),
        (dict(n_components=2, gamma=0.0), "gamma: must be a positive finite number"),
        (dict(n_components=2, gamma=-1.0), "gamma: must be a positive finite number"),
        (dict(n_components=2, eta=0.0), "The 'eta' parameter of KernelPCA"),
        (dict(n_components=2, solver="arpack"), "The 'solver' parameter of KernelPCA"),
        (dict(n_components=2, n_threads=0), "The 'n_threads' parameter of KernelPCA"),
        (dict(n_components=2, scaling="x"), "The 'scaling' parameter of KernelPCA"),
        (dict(n_components=2, kernel="sigmoid"), "The 'kernel' parameter of KernelPCA"),
        (dict(n_components=2, max_iter=0), "The 'max_iter' parameter of KernelPCA"),
        (dict(n_components=2, center="yes"), "The 'center' parameter of KernelPCA"),
        (dict(n_components=2, feature_map="nystrom"), "The 'feature_map' parameter of KernelPCA"),
        (dict(n_components=2, n_neighbors=0), "The 'n_neighbors' parameter of KernelPCA"),
        (dict(n_components=2, preimage_alpha=0.0), "The 'preimage_alpha' parameter of KernelPCA"),
    ],
)
def test_rejects_invalid_hyperparameters(blobs, params, match):
    with pytest.raises(ValueError, match=match):
        KernelPCA(**params, random_state=0).fit(blobs)


def test_rejects_non_square_precomputed(rng):
    with pytest.raises(ValueError, match="square"):
        KernelPCA(2, kernel="precomputed", random_state=0).fit(rng.normal(size=(5, 4)))


def test_converts_integer_fortran_and_strided_input(rng):
    X = rng.integers(0, 10, size=(300, 5))
    reference_model = KernelPCA(3, gamma=0.01, random_state=0).fit(X.astype(float))
    for variant in (X, np.asfortranarray(X.astype(float)), np.repeat(X.astype(float), 2, axis=1)[:, ::2]):
        model = KernelPCA(3, gamma=0.01, random_state=0).fit(variant)
        np.testing.assert_allclose(model.eigenvalues_, reference_model.eigenvalues_, rtol=1e-10)


def test_kernel_too_large_for_memory_raises_memory_error():
    X = np.zeros((2_000_000, 1))
    with pytest.raises(MemoryError, match="GiB"):
        KernelPCA(2, kernel_storage="dense", random_state=0).fit(X)


def test_single_sample_needs_uncentered_model():
    with pytest.raises(ValueError, match="n_samples = 1"):
        KernelPCA(random_state=0).fit(np.ones((1, 3)))
    model = KernelPCA(1, center=False, random_state=0).fit(np.ones((1, 3)))
    np.testing.assert_allclose(model.eigenvalues_, [1.0])


def test_fit_transform_equals_transform_for_zero_eigenvalues(rng):
    # 20 samples in 3 dimensions: with s = N most centred eigenvalues are 0, whose hidden features are 0.
    X = rng.normal(size=(20, 3))
    for scaling in ("hidden", "score", "sklearn"):
        model = KernelPCA(20, kernel="linear", scaling=scaling, random_state=0)
        Z = model.fit_transform(X)
        assert np.sum(model.eigenvalues_ > 0) == 3
        np.testing.assert_allclose(Z, model.transform(X), atol=1e-9 * np.abs(Z).max())
        assert np.all(Z[:, model.eigenvalues_ == 0] == 0)


def _indefinite_gram(rng, negative):
    """A symmetric 60 x 60 matrix with 26 positive eigenvalues (10 down to 1) and 34 equal to `negative`."""
    Q, _ = np.linalg.qr(rng.normal(size=(60, 60)))
    K = (Q * np.r_[np.linspace(10, 1, 26), np.full(34, negative)]) @ Q.T
    return (K + K.T) / 2


@pytest.mark.parametrize("n_components", [30, None])
def test_indefinite_precomputed_kernel_is_rejected(rng, n_components):
    K = _indefinite_gram(rng, -0.5)
    with pytest.raises(ValueError, match=r"not positive semi-definite: \d+ of the \d+ computed eigenvalues"):
        KernelPCA(n_components, kernel="precomputed", center=False, random_state=0).fit(K)


def test_small_negative_eigenvalues_warn_and_become_zero(rng):
    K = _indefinite_gram(rng, -1e-7)
    with pytest.warns(PositiveSpectrumWarning, match="4 of the 30 computed eigenvalues are negative"):
        model = KernelPCA(30, kernel="precomputed", center=False, random_state=0).fit(K)
    assert np.all(model.eigenvalues_[26:] == 0)


def test_rounding_sized_negative_eigenvalues_are_silent(rng):
    X = rng.normal(size=(80, 3))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        KernelPCA(kernel="linear").fit(X)  # 77 of 80 centred eigenvalues are rounding noise around 0


def test_asymmetric_precomputed_kernel_is_rejected(rng):
    X = rng.normal(size=(40, 3))
    K = X @ X.T
    with pytest.raises(ValueError, match="must be symmetric"):
        KernelPCA(3, kernel="precomputed").fit(K + 0.1 * rng.normal(size=K.shape))
    perturbed = K + 1e-13 * np.abs(K).max() * rng.normal(size=K.shape)  # rounding-sized asymmetry passes
    model = KernelPCA(3, kernel="precomputed", random_state=0).fit(perturbed)
    np.testing.assert_allclose(model.eigenvalues_, KernelPCA(3, kernel="linear").fit(X).eigenvalues_, rtol=1e-9)


@pytest.mark.parametrize("gamma", [1e-12, 1e-8])
def test_float32_kernel_below_precision_warns(gamma):
    X = (datasets.load_digits().data[:600] / 16.0).astype(np.float32)
    with pytest.warns(exceptions.PrecisionWarning, match="float32 rounding error.*use float64") as record:
        KernelPCA(5, gamma=gamma, random_state=0).fit(X)
    assert {w.filename for w in record if w.category is exceptions.PrecisionWarning} == {__file__}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        KernelPCA(5, gamma=gamma, random_state=0).fit(X.astype(np.float64))
        KernelPCA(5, gamma=0.02, random_state=0).fit(X)


@pytest.mark.parametrize(
    "kernel,params,match",
    [
        ("poly", dict(degree=2.5), "degree: a non-integer degree"),
        ("linear", dict(scale=1e160), "X: the linear kernel overflows float64"),
        ("rbf", dict(scale=1e200), "X: the rbf kernel overflows float64"),
    ],
)
def test_non_finite_kernels_are_rejected_by_fit(blobs, kernel, params, match):
    X = blobs[:300] * params.pop("scale", 1.0)
    with pytest.raises(ValueError, match=match):
        KernelPCA(3, kernel=kernel, random_state=0, **params).fit(X)


def test_krylov_stagnation_warns_with_the_attainable_accuracy(blobs):
    with pytest.warns(ConvergenceWarning, match="stagnated at up to .* float64 can reach"):
        model = KernelPCA(5, gamma=0.05, solver="krylov", tol=1e-300, random_state=0).fit(blobs)
    assert model.n_iter_ < _core.default_max_iter(5, 8)
    assert model.eigen_residuals_.max() < 1e-12


def test_memory_guard_counts_the_solver_workspace(monkeypatch, rng):
    X = rng.normal(size=(500, 4))
    krylov = _fit_memory_bytes(500, 4, 5, np.float64, "krylov", 2)
    dense = _fit_memory_bytes(500, 4, 5, np.float64, "dense", 2)
    assert krylov > 500**2 * 8 and dense >= 5 * 500**2 * 8
    monkeypatch.setattr(validation, "available_memory_bytes", lambda: krylov - 1)
    with pytest.raises(
        MemoryError,
        match=r"X: a kernel PCA fit of 500 samples \(krylov eigensolver, float64\) "
        r"needs \d+\.\d\d GiB but only \d+\.\d\d GiB",
    ):
        KernelPCA(5, solver="krylov", random_state=0, n_threads=2).fit(X)
    monkeypatch.setattr(validation, "available_memory_bytes", lambda: krylov)
    KernelPCA(5, solver="krylov", random_state=0, n_threads=2).fit(X)


def test_large_dense_solve_warns_with_its_expected_time(monkeypatch, blobs):
    monkeypatch.setattr(kpca, "_DENSE_WARN_SAMPLES", 1000)
    with pytest.warns(exceptions.PerformanceWarning, match=r"about \d+ min here .* cannot be interrupted") as record:
        KernelPCA(5, gamma=0.05, solver="dense").fit(blobs)
    assert {w.filename for w in record if w.category is exceptions.PerformanceWarning} == {__file__}


def test_unknown_kernel_error_lists_precomputed(blobs):
    with pytest.raises(ValueError, match="The 'kernel' parameter of KernelPCA must be a str among .*'precomputed'"):
        KernelPCA(2, kernel="foo").fit(blobs)


# ---------------------------------------------------------------------------------------------- large-N methods

# Parameters of each kernel of rkm.kernels.KERNEL_NAMES (a new kernel needs an entry here).
KERNEL_PARAMS = {
    "rbf": dict(gamma=0.05),
    "laplacian": dict(gamma=0.05),
    "poly": dict(gamma=0.1, degree=2),
    "linear": {},
    "cosine": {},
    "tanimoto": {},
}
KERNELS = [(name, KERNEL_PARAMS[name]) for name in KERNEL_NAMES]


@pytest.mark.parametrize("center", [True, False])
@pytest.mark.parametrize("kernel,params", KERNELS)
def test_matrix_free_equals_the_stored_kernel(blobs, kernel, params, center):
    X = np.abs(blobs[:600]) if kernel == "tanimoto" else blobs[:600]
    options = dict(kernel=kernel, center=center, random_state=0, **params)
    dense = KernelPCA(6, kernel_storage="dense", solver="dense", **options).fit(X)
    free = KernelPCA(6, kernel_storage="matrix_free", **options).fit(X)
    assert free.kernel_storage_ == "matrix_free" and free.solver_ == "krylov"
    np.testing.assert_allclose(free.eigenvalues_, dense.eigenvalues_, rtol=1e-9, atol=1e-9 * dense.eigenvalues_[0])
    np.testing.assert_allclose(_align_signs(free.H_, dense.H_), dense.H_, atol=1e-6)
    if center:
        atol = 1e-12 * np.abs(dense.column_means_).max()
        np.testing.assert_allclose(free.column_means_, dense.column_means_, atol=atol)
    Xt = X[:50] * 1.01 + 0.01
    Z = dense.transform(Xt)
    np.testing.assert_allclose(_align_signs(free.transform(Xt), Z), Z, atol=1e-6 * np.abs(Z).max())


def test_matrix_free_float32_matches_float64(blobs):
    X = blobs[:800]
    f64 = KernelPCA(5, gamma=0.05, kernel_storage="matrix_free", random_state=0).fit(X)
    f32 = KernelPCA(5, gamma=0.05, kernel_storage="matrix_free", random_state=0).fit(X.astype(np.float32))
    assert f32.H_.dtype == np.float32 and f32.transform(X[:10].astype(np.float32)).dtype == np.float32
    np.testing.assert_allclose(f32.eigenvalues_, f64.eigenvalues_, rtol=1e-4)


def test_transform_streams_the_training_set_like_explicit_kernel_rows(blobs):
    # The tiled product with its rank-two centring equals centring explicit kernel rows (the former path).
    model = KernelPCA(5, gamma=0.05, random_state=0).fit(blobs)
    Xt = blobs[:40] + 0.3
    K_rows = kernel_matrix(Xt, blobs, gamma=0.05)
    K_c = K_rows - K_rows.mean(axis=1, keepdims=True) - model.column_means_ + model.grand_mean_
    expected = K_c @ model.H_ / model.eigenvalues_
    np.testing.assert_allclose(model.transform(Xt), expected, atol=1e-10 * np.abs(expected).max())


def test_nystroem_with_every_point_a_landmark_is_exact(blobs):
    X = blobs[:400]
    dense = KernelPCA(6, gamma=0.05, kernel_storage="dense", random_state=0).fit(X)
    primal = KernelPCA(6, feature_map=Nystroem(400, gamma=0.05, random_state=0)).fit(X)
    np.testing.assert_allclose(primal.eigenvalues_, dense.eigenvalues_, rtol=1e-8)
    np.testing.assert_allclose(_align_signs(primal.H_, dense.H_), dense.H_, atol=1e-6)
    Xt = X[:30] + 0.05
    Z = dense.transform(Xt)
    np.testing.assert_allclose(_align_signs(primal.transform(Xt), Z), Z, atol=1e-6 * np.abs(Z).max())
    np.testing.assert_allclose(primal.column_means_, dense.column_means_, atol=1e-9)


def _feature_map(method, m, gamma=0.05):
    """The feature maps of the former method="nystrom" and "rff" (orthogonal random features for rbf)."""
    if method == "nystrom":
        return Nystroem(m, gamma=gamma, random_state=0)
    return RandomFourierFeatures(m, gamma=gamma, orthogonal=True, random_state=0)


@pytest.mark.parametrize("method", ["nystrom", "rff"])
def test_primal_approximation_improves_with_rank(blobs, method):
    exact = KernelPCA(5, gamma=0.05, kernel_storage="dense", random_state=0).fit(blobs).eigenvalues_
    errors = [
        np.abs(KernelPCA(5, feature_map=_feature_map(method, m)).fit(blobs).eigenvalues_ - exact).max() / exact[0]
        for m in (50, 1000)
    ]
    assert errors[1] < errors[0] / 3
    assert errors[1] < (1e-3 if method == "nystrom" else 0.1)


@pytest.mark.parametrize("method", ["nystrom", "rff"])
def test_primal_training_projections_are_the_hidden_features(blobs, method):
    model = KernelPCA(4, feature_map=_feature_map(method, 200 if method == "nystrom" else 300))
    H = model.fit_transform(blobs)
    np.testing.assert_allclose(H.T @ H, np.eye(4), atol=1e-10)
    np.testing.assert_allclose(model.transform(blobs), H, atol=1e-8)
    assert model.feature_map_.n_components_ == (200 if method == "nystrom" else 300)
    assert model.primal_vectors_.shape == (model.feature_map_.n_components_, 4)
    assert model.kernel_storage_ is None and model.solver_ == "dense"
    assert model.feature_map_ is not model.feature_map and not hasattr(model.feature_map, "n_components_")


def test_primal_uncentred_matches_the_uncentred_kernel(blobs):
    X = blobs[:300]
    dense = KernelPCA(4, gamma=0.05, center=False, kernel_storage="dense", random_state=0).fit(X)
    primal = KernelPCA(4, center=False, feature_map=Nystroem(300, gamma=0.05, random_state=0)).fit(X)
    np.testing.assert_allclose(primal.eigenvalues_, dense.eigenvalues_, rtol=1e-8)


def test_the_feature_maps_kernel_applies(blobs):
    # The model's kernel parameters do not enter a fit through a feature map: its own kernel does.
    X = blobs[:300]
    fm = Nystroem(300, gamma=0.05, random_state=0)
    expected = KernelPCA(4, feature_map=fm).fit(X)
    ignored = KernelPCA(4, kernel="laplacian", gamma=7.0, feature_map=fm).fit(X)
    np.testing.assert_array_equal(ignored.eigenvalues_, expected.eigenvalues_)
    assert ignored.gamma_ == 0.05 and ignored.preimage_ == "fixed_point"


@pytest.mark.parametrize("method", ["matrix_free", "nystrom"])
def test_large_n_methods_have_pre_images(blobs, method):
    if method == "matrix_free":
        options = dict(kernel_storage="matrix_free")
    else:
        options = dict(feature_map=_feature_map(method, 300))
    model = KernelPCA(6, gamma=0.05, random_state=0, **options).fit(blobs)
    dense = KernelPCA(6, gamma=0.05, kernel_storage="dense", random_state=0).fit(blobs)
    X_new = blobs[:20] + 0.2
    denoised = model.denoise(X_new)
    assert denoised.shape == X_new.shape and np.all(np.isfinite(denoised))
    scale = np.abs(blobs).max()
    tolerance = 1e-6 if method == "matrix_free" else 0.3
    np.testing.assert_allclose(denoised, dense.denoise(X_new), atol=tolerance * scale)


def test_auto_picks_by_memory_and_never_approximates(blobs, monkeypatch):
    model = KernelPCA(3, gamma=0.05, random_state=0).fit(blobs)
    assert model.kernel_storage_ == "dense" and not hasattr(model, "feature_map_")
    # With too little memory for the N x N kernel, "auto" recomputes it; it never approximates unasked.
    monkeypatch.setattr(kpca, "available_memory_bytes", lambda: 4 * blobs.shape[0] ** 2)
    model = KernelPCA(3, gamma=0.05, random_state=0).fit(blobs)
    assert model.kernel_storage_ == "matrix_free" and not hasattr(model, "feature_map_")
    with pytest.raises(ValueError, match=r"n_components: kernel_storage='matrix_free' \(chosen by 'auto'"):
        KernelPCA(gamma=0.05).fit(blobs)
    assert KernelPCA(3, kernel="precomputed").fit(kernel_matrix(blobs[:50], gamma=0.05)).kernel_storage_ == "dense"


def test_matrix_free_memory_is_checked_before_allocating(monkeypatch):
    monkeypatch.setattr(validation, "available_memory_bytes", lambda: 2**20)
    with pytest.raises(MemoryError, match=r"X: a matrix-free kernel PCA fit of 3000 samples .* GiB"):
        KernelPCA(2, kernel_storage="matrix_free").fit(np.ones((3000, 4)))


def test_primal_memory_is_checked_before_allocating(monkeypatch):
    monkeypatch.setattr(validation, "available_memory_bytes", lambda: 2**20)
    with pytest.raises(MemoryError, match=r"X: a Nystroem kernel PCA fit of 3000 samples with 100 features"):
        KernelPCA(2, feature_map=Nystroem(100)).fit(np.random.default_rng(0).random((3000, 4)))


@pytest.mark.parametrize(
    "params,message",
    [
        (dict(kernel_storage="fast"), "The 'kernel_storage' parameter of KernelPCA must be a str among"),
        (dict(kernel_storage="nystrom"), "The 'kernel_storage' parameter of KernelPCA must be a str among"),
        (dict(kernel_storage="matrix_free", kernel="precomputed"), "kernel_storage: 'matrix_free' evaluates the"),
        (
            dict(feature_map=Nystroem(10), kernel="precomputed"),
            "feature_map: maps X itself to features; with kernel='precomputed'",
        ),
        (dict(feature_map=RandomFourierFeatures(10, kernel="poly")), "The 'kernel' parameter of RandomFourierFeatures"),
        (dict(feature_map=Nystroem(500)), "n_components: 500 landmarks need at least as many samples, got n_samples"),
        (dict(feature_map=Nystroem(0)), "The 'n_components' parameter of Nystroem must be an int"),
        (dict(feature_map=RandomFourierFeatures(0)), "The 'n_components' parameter of RandomFourierFeatures"),
        (dict(feature_map=RandomFourierFeatures(2.5)), "The 'n_components' parameter of RandomFourierFeatures"),
        (dict(feature_map=Nystroem(10, landmarks="random")), "The 'landmarks' parameter of Nystroem"),
        (dict(feature_map=Nystroem(10), kernel_storage="matrix_free"), "kernel_storage: 'matrix_free' holds the exact"),
        (dict(feature_map=Nystroem(10), solver="krylov"), "solver: a feature_map's m x m problem is solved by the"),
        (dict(kernel_storage="matrix_free", solver="dense"), "solver: 'dense' needs the stored kernel"),
        (dict(feature_map=Nystroem(10), preimage="ridge"), "preimage: 'ridge' solves an n_samples x n_samples"),
        (dict(kernel_storage="matrix_free", preimage="ridge"), "preimage: 'ridge' solves an n_samples x n_samples"),
        (dict(feature_map=RandomFourierFeatures(3), n_components=5), "n_components: at most the 3 features"),
    ],
)
def test_large_n_methods_reject_bad_parameters(params, message):
    X = np.random.default_rng(0).random((100, 4))
    params = {"n_components": 2, **params}
    with pytest.raises(ValueError, match=message):
        KernelPCA(random_state=0, **params).fit(X)


@pytest.mark.parametrize("kernel", ["linear", "cosine", "tanimoto"])
def test_matrix_free_on_a_zero_kernel_behaves_as_dense(kernel):
    # All-zero rows give a zero kernel: no Nyström start, and the same warning and zero spectrum as "dense".
    X = np.zeros((300, 3))
    with pytest.warns(RuntimeWarning, match="barely varies"):
        free = KernelPCA(2, kernel=kernel, kernel_storage="matrix_free", random_state=0).fit(X)
    np.testing.assert_array_equal(free.eigenvalues_, [0.0, 0.0])


def test_verbose_matrix_free_fit_reports_each_block_product(blobs, capsys):
    model = KernelPCA(3, gamma=0.05, kernel_storage="matrix_free", verbose=1, random_state=0).fit(blobs[:500])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("KernelPCA [")
    assert "kernel_storage 'matrix_free', solver 'krylov' for 500 samples" in lines[0]
    products = [line for line in lines if "block product" in line and line.endswith("done")]
    assert len(products) == model.n_iter_ and products[-1].endswith(f"block product {model.n_iter_} done")
    assert lines[-1].endswith("fitted 3 components")
    KernelPCA(3, gamma=0.05, kernel_storage="matrix_free", random_state=0).fit(blobs[:500])
    assert capsys.readouterr().out == ""
    KernelPCA(3, feature_map=Nystroem(50, random_state=0), verbose=1).fit(blobs[:500])
    lines = capsys.readouterr().out.splitlines()
    assert "feature_map Nystroem for 500 samples" in lines[0] and lines[-1].endswith("fitted 3 components")
    with pytest.raises(ValueError, match="The 'verbose' parameter of KernelPCA must be an int in the range"):
        KernelPCA(3, verbose=-1).fit(blobs[:50])


def test_an_error_in_the_progress_callback_stops_the_solver(blobs):
    def failing(products):
        raise RuntimeError(f"stop after {products}")

    start = np.random.default_rng(0).standard_normal((500, 8))
    with pytest.raises(RuntimeError, match="stop after 1"):
        _core.kernel_top_eigsh(blobs[:500], "rbf", 0.05, 3.0, 1.0, True, 3, start, None, None, None, failing)


def test_matrix_free_needs_a_number_of_components():
    with pytest.raises(ValueError, match="n_components: kernel_storage='matrix_free' needs"):
        KernelPCA(kernel_storage="matrix_free").fit(np.random.default_rng(0).random((50, 3)))


# ------------------------------------------------------------------ callable kernels, sparse input, copies


def _pairwise(f):
    """scikit-learn's per-pair callable f(x, y) as rkm's Gram-matrix callable."""
    return lambda A, B: pairwise_kernels(A, B, metric=f)


def _chi2_like(x, y):
    return float(np.exp(-0.5 * np.sum(np.abs(x - y))) + 0.1 * np.dot(x, y))


@pytest.mark.parametrize("solver", ["dense", "krylov"])
def test_callable_kernel_matches_sklearn_kernel_pca(rng, solver):
    X = rng.normal(size=(120, 4))
    Xt = rng.normal(size=(30, 4))
    ours = KernelPCA(5, kernel=_pairwise(_chi2_like), solver=solver, scaling="sklearn", random_state=0).fit(X)
    theirs = SklearnKernelPCA(5, kernel=_chi2_like, eigen_solver="dense").fit(X)
    np.testing.assert_allclose(ours.eigenvalues_, theirs.eigenvalues_, rtol=1e-9)
    Z, Z_ref = ours.transform(Xt), theirs.transform(Xt)
    np.testing.assert_allclose(_align_signs(Z, Z_ref), Z_ref, rtol=1e-7, atol=1e-9 * np.abs(Z_ref).max())
    assert ours.kernel_storage_ == "dense" and ours.preimage_ == "smoother"
    assert ours.inverse_transform(Z).shape == Xt.shape


def test_callable_kernel_equals_the_named_kernel(blobs):
    X = blobs[:300]
    named = KernelPCA(4, gamma=0.05, random_state=0).fit(X)
    func = KernelPCA(4, kernel=lambda A, B: kernel_matrix(A, B, gamma=0.05), random_state=0).fit(X)
    np.testing.assert_allclose(func.eigenvalues_, named.eigenvalues_, rtol=1e-12)
    np.testing.assert_allclose(func.transform(X[:20]), named.transform(X[:20]), rtol=1e-8, atol=1e-10)


def test_callable_kernel_errors_name_the_argument(rng):
    X = rng.normal(size=(30, 3))
    with pytest.raises(ValueError, match="kernel: the callable's Gram matrix .* must be symmetric"):
        KernelPCA(2, kernel=lambda A, B: rng.random((A.shape[0], B.shape[0]))).fit(X)
    with pytest.raises(ValueError, match="kernel: the callable must return the Gram matrix of shape"):
        KernelPCA(2, kernel=lambda A, B: np.eye(3)).fit(X)
    with pytest.raises(ValueError, match="kernel_storage: 'matrix_free' .* cannot call a Python kernel function"):
        KernelPCA(2, kernel=lambda A, B: A @ B.T, kernel_storage="matrix_free").fit(X)
    with pytest.raises(ValueError, match="preimage: 'fixed_point' needs the rbf kernel"):
        KernelPCA(2, kernel=lambda A, B: A @ B.T, preimage="fixed_point").fit(X)


def _sparse_counts(rng, n, d=40):
    return rng.poisson(0.3, size=(n, d)).astype(float)


@pytest.mark.parametrize(
    "kernel, params", [("rbf", dict(gamma=0.1)), ("linear", {}), ("poly", dict(gamma=0.1, degree=2)), ("cosine", {})]
)
@pytest.mark.parametrize("fmt", ["csr", "csc"])
def test_sparse_input_matches_sklearn_kernel_pca(rng, kernel, params, fmt):
    import scipy.sparse as sp

    X, Xt = _sparse_counts(rng, 150), _sparse_counts(rng, 20)
    Xs = sp.csr_matrix(X).asformat(fmt)
    ours = KernelPCA(5, kernel=kernel, scaling="sklearn", random_state=0, **params).fit(Xs)
    theirs = SklearnKernelPCA(5, kernel=kernel, eigen_solver="dense", **params).fit(Xs)
    np.testing.assert_allclose(ours.eigenvalues_, theirs.eigenvalues_, rtol=1e-9)
    Z_ref = theirs.transform(sp.csr_matrix(Xt))
    for Xnew in (sp.csr_matrix(Xt), Xt):
        Z = ours.transform(Xnew)
        np.testing.assert_allclose(_align_signs(Z, Z_ref), Z_ref, rtol=1e-7, atol=1e-9 * np.abs(Z_ref).max())
    dense = KernelPCA(5, kernel=kernel, scaling="sklearn", random_state=0, **params).fit(X)
    np.testing.assert_allclose(ours.transform(Xt), dense.transform(Xt), rtol=1e-9, atol=1e-10)


def test_sparse_fingerprints_with_the_tanimoto_kernel(rng):
    import scipy.sparse as sp

    fp = (rng.random((200, 512)) < 0.03).astype(float)
    ours = KernelPCA(4, kernel="tanimoto", random_state=0).fit(sp.csr_matrix(fp))
    dense = KernelPCA(4, kernel="tanimoto", random_state=0).fit(fp)
    np.testing.assert_allclose(ours.eigenvalues_, dense.eigenvalues_, rtol=1e-12)
    np.testing.assert_allclose(ours.transform(sp.csr_matrix(fp[:10])), dense.transform(fp[:10]), atol=1e-10)
    assert ours.preimage_ is None
    with pytest.raises(ValueError, match="inverse_transform: input-space pre-images need the dense training set"):
        ours.inverse_transform(ours.transform(sp.csr_matrix(fp[:2])))


@pytest.mark.parametrize(
    "params, match",
    [
        (dict(kernel_storage="matrix_free"), "kernel_storage: 'matrix_free' needs dense X"),
        (dict(feature_map=Nystroem(10, random_state=0)), "feature_map: sparse X is not supported"),
        (dict(preimage="smoother"), "preimage: 'smoother' computes input-space pre-images"),
        (dict(kernel="precomputed"), "X: a precomputed kernel must be a dense array"),
    ],
)
def test_sparse_input_errors_name_the_argument(rng, params, match):
    import scipy.sparse as sp

    with pytest.raises((ValueError, TypeError), match=match):
        KernelPCA(2, **params).fit(sp.csr_matrix(_sparse_counts(rng, 30, 30)))


@pytest.mark.parametrize(
    "params",
    [
        dict(),
        dict(kernel_storage="matrix_free"),
        dict(feature_map=Nystroem(20, gamma=0.05, random_state=0)),
        dict(preimage="ridge"),
    ],
)
def test_training_data_is_copied(blobs, params):
    X = blobs[:250].copy()
    model = KernelPCA(3, gamma=0.05, random_state=0, **params).fit(X)
    X_new = blobs[250:270].copy()
    before, before_pre = model.transform(X_new), model.inverse_transform(model.transform(X_new))
    assert model.X_fit_ is not X
    X[:] = 0.0
    np.testing.assert_array_equal(model.transform(X_new), before)
    np.testing.assert_array_equal(model.inverse_transform(model.transform(X_new)), before_pre)
