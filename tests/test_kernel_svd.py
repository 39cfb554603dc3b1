"""rkm.shallow.kernel_svd.KernelSVD: matrix SVD, the eigenproblem of Suykens 2017 eq. 3.31, out-of-sample encoding by
eq. 3.32, solvers, memory and bad input."""

import re

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from sklearn.metrics.pairwise import pairwise_kernels
from sklearn.utils.extmath import svd_flip

from rkm._utils import validation
from rkm.shallow import kernel_svd
from rkm.shallow.kernel_svd import KernelSVD
from rkm.shallow.kpca import KernelPCA

# Per-dtype tolerances relative to the largest singular value (or to 1 for unit vectors).
RTOL = {np.float64: 1e-10, np.float32: 2e-4}


def _sources(rng, n_x=40, n_z=30, d=3):
    return rng.normal(size=(n_x, d)), rng.normal(size=(n_z, d))


def _numpy_svd(A):
    """numpy.linalg.svd with the singular vectors oriented as KernelSVD orients them (svd_flip on U)."""
    U, sigma, Vt = np.linalg.svd(A, full_matrices=False)
    U, Vt = svd_flip(U, Vt)
    return U, sigma, Vt.T


# ---------------------------------------------------------------- matrix SVD (Suykens 2016; eq. 2.18)


@pytest.mark.parametrize("shape", [(8, 5), (5, 8), (6, 6)])
def test_linear_compatible_maps_reproduce_the_matrix_svd(rng, shape, dtype):
    A = rng.normal(size=shape)
    # phi(x) = C^T x, psi(z) = z with X = A, Z = A^T and C = pinv(A): the cross-Gram is A C A = A.
    model = KernelSVD(kernel="linear", compatibility=np.linalg.pinv(A)).fit(A.astype(dtype), Z=A.T.astype(dtype))
    U, sigma, V = _numpy_svd(A)
    tol = RTOL[dtype]
    np.testing.assert_allclose(model.singular_values_, sigma, rtol=tol, atol=tol * sigma[0])
    np.testing.assert_allclose(model.eigenvalues_, sigma, rtol=tol, atol=tol * sigma[0])  # eta = 1
    np.testing.assert_allclose(model.H_e_, U, atol=10 * tol)
    np.testing.assert_allclose(model.H_r_, V, atol=10 * tol)
    assert model.H_e_.dtype == model.H_r_.dtype == model.singular_values_.dtype == dtype


def test_rank_deficient_matrix_keeps_its_rank(rng):
    A = rng.normal(size=(9, 3)) @ rng.normal(size=(3, 6))
    model = KernelSVD(kernel="linear", compatibility=np.linalg.pinv(A)).fit(A, Z=A.T)
    U, sigma, V = _numpy_svd(A)
    assert model.singular_values_.shape == (3,)  # n_components=None: the numerical rank
    np.testing.assert_allclose(model.singular_values_, sigma[:3], rtol=1e-10)
    np.testing.assert_allclose(model.H_e_, U[:, :3], atol=1e-9)
    np.testing.assert_allclose(model.H_r_, V[:, :3], atol=1e-9)
    # Asking for more components than the rank gives zero singular values, whose hidden features are 0.
    full = KernelSVD(5, kernel="linear", compatibility=np.linalg.pinv(A)).fit(A, Z=A.T)
    assert np.all(full.singular_values_[3:] < 1e-12 * sigma[0])
    np.testing.assert_array_equal(full.transform(A)[:, 3:], 0.0)


def test_eta_scales_lambda_only(rng):
    A = rng.normal(size=(7, 4))
    plain = KernelSVD(kernel="linear", compatibility=np.linalg.pinv(A)).fit(A, Z=A.T)
    scaled = KernelSVD(kernel="linear", compatibility=np.linalg.pinv(A), eta=4.0).fit(A, Z=A.T)
    np.testing.assert_allclose(scaled.eigenvalues_, plain.singular_values_ / 4.0, rtol=1e-12)
    np.testing.assert_allclose(scaled.singular_values_, plain.singular_values_, rtol=1e-12)
    np.testing.assert_allclose(scaled.H_e_, plain.H_e_, atol=1e-12)


# ---------------------------------------------------------------- eq. 3.31 and eq. 3.32


@pytest.mark.parametrize(
    "kernel,params",
    [("rbf", {"gamma": 0.3}), ("poly", {"gamma": 0.5, "degree": 2}), ("laplacian", {"gamma": 0.4}), ("linear", {})],
)
def test_hidden_features_solve_eq_3_31(rng, kernel, params):
    X, Z = _sources(rng)
    eta = 2.5
    model = KernelSVD(kernel=kernel, eta=eta, **params).fit(X, Z=Z)
    G = pairwise_kernels(X, Z, metric="polynomial" if kernel == "poly" else kernel, **params)
    sigma = np.linalg.svd(G, compute_uv=False)
    s = model.singular_values_.size
    np.testing.assert_allclose(model.singular_values_, sigma[:s], rtol=1e-10, atol=1e-10 * sigma[0])
    # [[0, G / eta], [G^T / eta, 0]] [H_e^T; H_r^T] = [H_e^T; H_r^T] Lambda, each block with orthonormal columns.
    n_x, n_z = G.shape
    augmented = np.block([[np.zeros((n_x, n_x)), G / eta], [G.T / eta, np.zeros((n_z, n_z))]])
    H = np.vstack([model.H_e_, model.H_r_])
    np.testing.assert_allclose(augmented @ H, H * model.eigenvalues_, atol=1e-10 * sigma[0])
    np.testing.assert_allclose(model.H_e_.T @ model.H_e_, np.eye(s), atol=1e-10)
    np.testing.assert_allclose(model.H_r_.T @ model.H_r_, np.eye(s), atol=1e-10)
    # The spectrum of eq. 3.31 is +-sigma / eta and zeros; the model keeps the positive half.
    spectrum = np.linalg.eigvalsh(augmented)
    np.testing.assert_allclose(spectrum[::-1][:s], model.eigenvalues_, rtol=1e-9, atol=1e-12 * sigma[0])
    np.testing.assert_allclose(spectrum[:s], -model.eigenvalues_, rtol=1e-9, atol=1e-12 * sigma[0])


@pytest.mark.parametrize(
    "kernel,params",
    [("rbf", {"gamma": 0.3}), ("poly", {"gamma": 0.5, "degree": 2}), ("laplacian", {"gamma": 0.4}), ("cosine", {})],
)
def test_out_of_sample_encoding_is_eq_3_32(rng, kernel, params):
    X, Z = _sources(rng)
    eta = 1.7
    # 3 components: the cosine cross-Gram of 3-D sources has rank 3.
    score = KernelSVD(3, kernel=kernel, eta=eta, scaling="score", **params).fit(X, Z=Z)
    hidden = KernelSVD(3, kernel=kernel, eta=eta, **params).fit(X, Z=Z)
    metric = dict(metric="polynomial" if kernel == "poly" else kernel, **params)
    X_new, Z_new = rng.normal(size=(7, 3)), rng.normal(size=(5, 3))
    # e(x) = (1/eta) sum_j h_rj psi(z_j)^T phi(x), r(z) = (1/eta) sum_i h_ei phi(x_i)^T psi(z).
    e = pairwise_kernels(X_new, Z, **metric) @ score.H_r_ / eta
    r = pairwise_kernels(Z_new, X, **metric) @ score.H_e_ / eta
    np.testing.assert_allclose(score.transform(X_new), e, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(score.transform_z(Z_new), r, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(hidden.transform(X_new), e / score.eigenvalues_, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(hidden.transform_z(Z_new), r / score.eigenvalues_, rtol=1e-10, atol=1e-12)
    # On the training sources, e = lambda h_e and r = lambda h_r (eq. 3.30): the eigen-relation of eq. 3.31.
    lam = score.eigenvalues_
    np.testing.assert_allclose(score.transform(X), score.H_e_ * lam, atol=1e-10 * lam[0])
    np.testing.assert_allclose(score.transform_z(Z), score.H_r_ * lam, atol=1e-10 * lam[0])
    np.testing.assert_allclose(hidden.transform(X), hidden.H_e_, atol=1e-9)
    np.testing.assert_allclose(hidden.transform_z(Z), hidden.H_r_, atol=1e-9)
    np.testing.assert_allclose(hidden.fit_transform(X, Z=Z), hidden.H_e_, atol=1e-12)


def test_linear_primal_weights_equal_the_dual_model(rng):
    """With phi(x) = C^T x the primal model of eq. 3.32 (e = W^T phi(x), r = V^T psi(z)) equals the dual."""
    X, Z = rng.normal(size=(30, 4)), rng.normal(size=(25, 6))
    C = rng.normal(size=(4, 6))
    eta = 3.0
    model = KernelSVD(4, kernel="linear", compatibility=C, eta=eta, scaling="score").fit(X, Z=Z)  # X C Z^T: rank 4
    np.testing.assert_allclose(model.W_, Z.T @ model.H_r_ / eta, rtol=1e-12)
    np.testing.assert_allclose(model.V_, (X @ C).T @ model.H_e_ / eta, rtol=1e-12)
    X_new, Z_new = rng.normal(size=(6, 4)), rng.normal(size=(3, 6))
    np.testing.assert_allclose(model.transform(X_new), (X_new @ C @ Z.T) @ model.H_r_ / eta, rtol=1e-10)
    np.testing.assert_allclose(model.transform_z(Z_new), (Z_new @ (X @ C).T) @ model.H_e_ / eta, rtol=1e-10)
    np.testing.assert_allclose(model.singular_values_, np.linalg.svd(X @ C @ Z.T, compute_uv=False)[:4], rtol=1e-10)


def test_precomputed_cross_gram_equals_the_kernel(rng):
    X, Z = _sources(rng)
    kernel = KernelSVD(5, kernel="rbf", gamma=0.3, eta=2.0).fit(X, Z=Z)
    G = pairwise_kernels(X, Z, metric="rbf", gamma=0.3)
    pre = KernelSVD(5, kernel="precomputed", eta=2.0).fit(G)
    np.testing.assert_allclose(pre.singular_values_, kernel.singular_values_, rtol=1e-12)
    np.testing.assert_allclose(pre.H_e_, kernel.H_e_, atol=1e-10)
    np.testing.assert_allclose(pre.H_r_, kernel.H_r_, atol=1e-10)
    X_new, Z_new = rng.normal(size=(6, 3)), rng.normal(size=(4, 3))
    rows_x = pairwise_kernels(X_new, Z, metric="rbf", gamma=0.3)  # [phi(x)^T psi(z_j)], (n, M)
    rows_z = pairwise_kernels(Z_new, X, metric="rbf", gamma=0.3)  # [phi(x_i)^T psi(z)], (n, N)
    np.testing.assert_allclose(pre.transform(rows_x), kernel.transform(X_new), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(pre.transform_z(rows_z), kernel.transform_z(Z_new), rtol=1e-9, atol=1e-12)
    with pytest.raises(ValueError, match="Z: has 3 columns, but KernelSVD was fitted with kernel rows of length 40"):
        pre.transform_z(Z_new)


def test_one_source_is_uncentred_kernel_pca(rng):
    """Z = X (Z=None): the symmetric case of section 2.2.2, kernel PCA without centring."""
    X = rng.normal(size=(60, 3))
    svd = KernelSVD(6, kernel="rbf", gamma=0.2, eta=2.0).fit(X)
    pca = KernelPCA(6, kernel="rbf", gamma=0.2, eta=2.0, center=False, solver="dense").fit(X)
    np.testing.assert_allclose(svd.eigenvalues_, pca.eigenvalues_, rtol=1e-10)
    np.testing.assert_allclose(svd.H_e_, pca.H_, atol=1e-9)
    np.testing.assert_allclose(svd.H_r_, pca.H_, atol=1e-9)
    np.testing.assert_allclose(svd.transform(X[:10] + 0.1), pca.transform(X[:10] + 0.1), atol=1e-9)


# ---------------------------------------------------------------- solvers, threads, dtypes


@pytest.fixture
def large_sources(rng):
    return rng.normal(size=(400, 3)), rng.normal(size=(300, 3))


def test_arpack_matches_dense(large_sources, dtype):
    X, Z = (A.astype(dtype) for A in large_sources)
    truncated = KernelSVD(5, kernel="rbf", gamma=0.5, random_state=0).fit(X, Z=Z)
    dense = KernelSVD(5, kernel="rbf", gamma=0.5, solver="dense").fit(X, Z=Z)
    assert truncated.solver_ == "arpack" and dense.solver_ == "dense"  # "auto": 5 of min(N, M) = 300
    assert truncated.n_iter_ > 1 and dense.n_iter_ == 1
    tol = RTOL[dtype]
    sigma = dense.singular_values_
    np.testing.assert_allclose(truncated.singular_values_, sigma, rtol=tol, atol=tol * sigma[0])
    np.testing.assert_allclose(truncated.H_e_, dense.H_e_, atol=20 * tol)
    np.testing.assert_allclose(truncated.H_r_, dense.H_r_, atol=20 * tol)
    assert truncated.H_e_.dtype == dtype
    again = KernelSVD(5, kernel="rbf", gamma=0.5, random_state=0).fit(X, Z=Z)
    np.testing.assert_array_equal(again.H_e_, truncated.H_e_)  # seeded start vector: reproducible


def test_arpack_not_converged_warns_and_falls_back_to_dense(rng):
    G = rng.normal(size=(400, 300))  # a flat spectrum: one ARPACK restart is not enough
    with pytest.warns(ConvergenceWarning, match="ARPACK did not converge within max_iter=1"):
        model = KernelSVD(10, kernel="precomputed", solver="arpack", max_iter=1, random_state=0).fit(G)
    assert model.solver_ == "dense"
    np.testing.assert_allclose(model.singular_values_, np.linalg.svd(G, compute_uv=False)[:10], rtol=1e-10)


def test_thread_counts_agree(large_sources):
    X, Z = large_sources
    one = KernelSVD(4, kernel="rbf", gamma=0.5, n_threads=1, random_state=0).fit(X, Z=Z)
    two = KernelSVD(4, kernel="rbf", gamma=0.5, n_threads=2, random_state=0).fit(X, Z=Z)
    np.testing.assert_allclose(two.singular_values_, one.singular_values_, rtol=1e-12)
    np.testing.assert_allclose(two.transform(X[:20]), one.transform(X[:20]), atol=1e-10)
    np.testing.assert_allclose(two.transform_z(Z[:20]), one.transform_z(Z[:20]), atol=1e-10)


def test_verbose_reports_the_solver_and_the_svd_time(large_sources, capsys):
    X, Z = large_sources
    model = KernelSVD(5, gamma=0.5, random_state=0, verbose=1).fit(X, Z=Z)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and all(line.startswith("KernelSVD [") for line in lines)
    assert lines[0].endswith("solver 'arpack' for a 400 x 300 cross-Gram matrix (float64)")
    assert re.search(rf"arpack SVD in \d+\.\d\d s \({model.n_iter_} products with G\^T G\)$", lines[1])
    KernelSVD(5, gamma=0.5, random_state=0).fit(X, Z=Z)
    assert capsys.readouterr().out == ""


def test_float32_model_and_mixed_inputs(rng):
    X, Z = _sources(rng)
    m64 = KernelSVD(3, kernel="rbf", gamma=0.3).fit(X, Z=Z)
    m32 = KernelSVD(3, kernel="rbf", gamma=0.3).fit(X.astype(np.float32), Z=Z.astype(np.float32))
    assert m32.H_e_.dtype == m32.transform(X.astype(np.float32)).dtype == np.float32
    assert m32.transform(X).dtype == np.float64  # float32 only when both the model and the input are
    np.testing.assert_allclose(m32.singular_values_, m64.singular_values_, rtol=1e-5)
    np.testing.assert_allclose(m32.transform_z(Z), m64.transform_z(Z), atol=1e-4)
    mixed = KernelSVD(3, kernel="rbf", gamma=0.3).fit(X.astype(np.float32), Z=Z)  # common dtype: float64
    assert mixed.H_e_.dtype == np.float64


# ---------------------------------------------------------------- memory and bad input


def test_cross_gram_that_cannot_fit_is_refused_before_allocating(rng, monkeypatch):
    X, Z = rng.normal(size=(300, 3)), rng.normal(size=(200, 3))

    def never(*args, **kwargs):
        raise AssertionError("the cross-Gram matrix was computed")

    monkeypatch.setattr(kernel_svd, "kernel_matrix", never)
    monkeypatch.setattr(validation, "available_memory_bytes", lambda: 2**20)
    with pytest.raises(
        MemoryError, match=r"X: a kernel SVD fit of a 300 x 200 cross-Gram matrix \(dense SVD, float64\)"
    ):
        KernelSVD(kernel="rbf").fit(X, Z=Z)


def _bad_parameter_cases():
    bad = [
        ({"eta": 0.0}, "The 'eta' parameter of KernelSVD must be a float in the range"),
        ({"eta": -1.0}, "The 'eta' parameter of KernelSVD must be a float in the range"),
        ({"eta": float("nan")}, "The 'eta' parameter of KernelSVD must be a float in the range"),
        ({"eta": float("inf")}, "The 'eta' parameter of KernelSVD must be a float in the range"),
        ({"eta": 1e-320}, "eta: the eigenvalues sigma / eta overflow"),
        ({"n_components": 0}, "The 'n_components' parameter of KernelSVD must be None or an int"),
        ({"n_components": 2.5}, "The 'n_components' parameter of KernelSVD must be None or an int"),
        ({"n_components": True}, "The 'n_components' parameter of KernelSVD must be None or an int"),
        ({"n_components": 31}, r"n_components: must be between 1 and min\(n_samples of X, n_samples of Z\) = 30"),
        ({"kernel": "sigmoid"}, "The 'kernel' parameter of KernelSVD must be a str among .*Got 'sigmoid'"),
        ({"kernel": 3}, "The 'kernel' parameter of KernelSVD must be"),
        ({"kernel": "rbf", "gamma": -1.0}, "gamma: must be a positive finite number"),
        ({"kernel": "poly", "degree": -2}, "The 'degree' parameter of KernelSVD must be a float in the range"),
        ({"solver": "lanczos"}, "The 'solver' parameter of KernelSVD must be a str among"),
        ({"solver": "arpack"}, "solver: 'arpack' needs n_components < "),
        ({"solver": "arpack", "n_components": 30}, "solver: 'arpack' needs n_components < "),
        ({"scaling": "sklearn"}, "The 'scaling' parameter of KernelSVD must be a str among"),
        ({"n_threads": 0}, "The 'n_threads' parameter of KernelSVD must be None"),
        ({"tol": -1.0}, "The 'tol' parameter of KernelSVD must be None or a float in the range"),
        ({"max_iter": 0}, "The 'max_iter' parameter of KernelSVD must be None or an int in the range"),
        ({"verbose": -1}, "The 'verbose' parameter of KernelSVD must be an int in the range"),
        ({"kernel": "rbf", "compatibility": np.eye(3)}, "compatibility: only for kernel='linear'"),
        (
            {"kernel": "linear", "compatibility": np.eye(2)},
            r"compatibility: must have shape \(d_x, d_z\) = \(3, 3\), got \(2, 2\)",
        ),
        ({"kernel": "linear", "compatibility": np.full((3, 3), np.nan)}, "compatibility contains NaN"),
    ]
    ids = [re.findall(r"'(\w+)' parameter|^(\w+)", match)[0] for _, match in bad]
    return [pytest.param(params, match, id="".join(ids[i]) + str(i)) for i, (params, match) in enumerate(bad)]


@pytest.mark.parametrize("params,match", _bad_parameter_cases())
def test_bad_parameters_name_the_argument(rng, params, match):
    X, Z = _sources(rng)
    with pytest.raises(ValueError, match=match):
        KernelSVD(**params).fit(X, Z=Z)


def test_bad_sources_name_the_argument(rng):
    X, Z = _sources(rng)
    X_nan, Z_inf = X.copy(), Z.copy()
    X_nan[0, 0], Z_inf[1, 1] = np.nan, np.inf
    with pytest.raises(ValueError, match="X contains NaN"):
        KernelSVD().fit(X_nan, Z=Z)
    with pytest.raises(ValueError, match="Z contains infinity"):
        KernelSVD().fit(X, Z=Z_inf)
    with pytest.raises(ValueError, match="Z: has 2 features but X has 3; kernel 'rbf' compares"):
        KernelSVD(kernel="rbf").fit(X, Z=Z[:, :2])
    with pytest.raises(
        ValueError, match=r"Z: has 2 features but X has 3; give a compatibility matrix C of shape \(3, 2\)"
    ):
        KernelSVD(kernel="linear").fit(X, Z=Z[:, :2])
    with pytest.raises(ValueError, match="Expected 2D array"):
        KernelSVD().fit(X, Z=Z[:, 0])
    with pytest.raises(ValueError, match="Z: must be None with kernel='precomputed'"):
        KernelSVD(kernel="precomputed").fit(X @ Z.T, Z=Z)
    model = KernelSVD(kernel="rbf").fit(X, Z=Z)
    with pytest.raises(ValueError, match="X has 2 features, but KernelSVD is expecting 3"):
        model.transform(X[:, :2])
    with pytest.raises(ValueError, match="Z: has 2 columns, but KernelSVD was fitted with features: 3"):
        model.transform_z(Z[:, :2])
    with pytest.raises(ValueError, match="Z contains NaN"):
        model.transform_z(np.full((2, 3), np.nan))
    with pytest.raises(NotFittedError):
        KernelSVD().transform_z(Z)


# ---------------------------------------------------------------- scikit-learn contract: y, Z by keyword


def test_fit_ignores_y_and_takes_the_second_source_by_keyword(rng):
    X, Z = _sources(rng)
    y = rng.normal(size=X.shape[0])
    two = KernelSVD(3, gamma=0.5).fit(X, Z=Z)
    with_y = KernelSVD(3, gamma=0.5).fit(X, y, Z=Z)
    np.testing.assert_array_equal(two.H_e_, with_y.H_e_)
    one = KernelSVD(3, gamma=0.5).fit(X, y)  # y ignored: the one-source model
    np.testing.assert_allclose(one.H_e_, KernelSVD(3, gamma=0.5).fit(X).H_e_, atol=0)
    assert one.H_r_.shape[0] == X.shape[0]
    np.testing.assert_allclose(
        KernelSVD(3, gamma=0.5).fit_transform(X, y, Z=Z), two.transform(X), rtol=1e-9, atol=1e-12
    )


def test_kernel_svd_in_a_pipeline(rng):
    from sklearn.linear_model import Ridge
    from sklearn.model_selection import cross_val_score
    from sklearn.pipeline import make_pipeline

    X = rng.normal(size=(60, 4))
    y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=60)
    pipe = make_pipeline(KernelSVD(3, kernel="rbf"), Ridge()).fit(X, y)
    features = KernelSVD(3, kernel="rbf").fit(X).transform(X)
    np.testing.assert_allclose(pipe.predict(X), Ridge().fit(features, y).predict(features), rtol=1e-10)
    assert np.all(np.isfinite(cross_val_score(make_pipeline(KernelSVD(3), Ridge()), X, y, cv=3)))


# ---------------------------------------------------------------- callable kernels, sparse sources, copies


def test_callable_kernel_equals_the_named_kernel(rng):
    X, Z = _sources(rng)
    named = KernelSVD(4, kernel="rbf", gamma=0.3, eta=2.0).fit(X, Z=Z)
    func = KernelSVD(4, kernel=lambda A, B: pairwise_kernels(A, B, metric="rbf", gamma=0.3), eta=2.0).fit(X, Z=Z)
    np.testing.assert_allclose(func.singular_values_, named.singular_values_, rtol=1e-12)
    np.testing.assert_allclose(func.transform(X[:7]), named.transform(X[:7]), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(func.transform_z(Z[:7]), named.transform_z(Z[:7]), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("kernel, params", [("linear", {}), ("tanimoto", {}), ("rbf", dict(gamma=0.5))])
def test_sparse_sources_equal_dense(rng, kernel, params):
    import scipy.sparse as sp

    X = rng.random((40, 20)) * (rng.random((40, 20)) < 0.3)
    Z = rng.random((30, 20)) * (rng.random((30, 20)) < 0.3)
    dense = KernelSVD(4, kernel=kernel, **params).fit(X, Z=Z)
    sparse = KernelSVD(4, kernel=kernel, **params).fit(sp.csr_matrix(X), Z=sp.csc_matrix(Z))
    np.testing.assert_allclose(sparse.singular_values_, dense.singular_values_, rtol=1e-12)
    np.testing.assert_allclose(sparse.transform(sp.csr_matrix(X[:5])), dense.transform(X[:5]), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(sparse.transform(X[:5]), dense.transform(X[:5]), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(
        sparse.transform_z(sp.csr_matrix(Z[:5])), dense.transform_z(Z[:5]), rtol=1e-9, atol=1e-12
    )


def test_sparse_precomputed_is_refused(rng):
    import scipy.sparse as sp

    with pytest.raises(TypeError, match="[Ss]parse"):
        KernelSVD(kernel="precomputed").fit(sp.csr_matrix(np.eye(4)))


def test_training_sources_are_copied(rng):
    X, Z = _sources(rng)
    model = KernelSVD(3, gamma=0.5).fit(X, Z=Z)
    assert model.X_fit_ is not X and model.Z_fit_ is not Z
    before = model.transform(X[:5].copy())
    X_new = X[:5].copy()
    X[:] = 0.0
    Z[:] = 0.0
    np.testing.assert_array_equal(model.transform(X_new), before)


def test_a_second_source_passed_positionally_is_not_dropped_silently(rng):
    X, Z = _sources(rng)  # 40 and 30 samples
    with pytest.raises(ValueError, match=r"y: has 30 samples but X has 40; .* fit\(X, Z=Z\)"):
        KernelSVD(3).fit(X, Z)
    with pytest.raises(ValueError, match="y: has 30 samples"):
        KernelSVD(3).fit_transform(X, Z)
