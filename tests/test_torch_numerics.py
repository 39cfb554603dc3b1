"""Numerics of rkm.torch's differentiable building blocks: kernel matrices against rkm.kernels, the Stiefel
retractions and Cayley Adam against rkm.stiefel, and the kernel PCA step (rkm.torch.energy) against
rkm.MultiViewRKM, Proposition 1 and the gap-regularised eigh backward."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import rkm.kernels as rk  # noqa: E402
from rkm import MultiViewRKM, stiefel  # noqa: E402
from rkm.torch import (  # noqa: E402
    CayleyAdam,
    StiefelLinear,
    center_kernel,
    eigh_descending,
    kernel_matrix,
    kpca,
    kpca_energy,
    kpca_from_kernels,
    stabilized_objective,
)
from rkm.torch import stiefel as tstiefel  # noqa: E402

KERNELS = ("linear", "poly", "rbf", "laplacian", "cosine", "tanimoto")
F64 = torch.float64


@pytest.fixture(autouse=True)
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _data(seed=0, n=30, m=20, d=5):
    rng = np.random.default_rng(seed)
    X, Y = rng.standard_normal((n, d)), rng.standard_normal((m, d))
    X[3] = 0.0  # a zero row (cosine, tanimoto)
    X[5] = X[4]  # a duplicated row (distance 0 off the diagonal)
    Y[2] = 0.0
    Y[1] = X[7]  # a shared point of X and Y
    return X, Y


def _projector(H):
    H = H.detach().numpy() if isinstance(H, torch.Tensor) else H
    return H @ H.T


# ------------------------------------------------------------------------------------------- kernel matrices


@pytest.mark.parametrize("kernel", KERNELS + ("gaussian", "polynomial"))
@pytest.mark.parametrize("with_y", [False, True])
def test_kernel_matrix_matches_core(kernel, with_y):
    X, Y = _data()
    gamma = 0.3 if kernel not in ("linear", "cosine", "tanimoto") else None
    expected = rk.kernel_matrix(X, Y if with_y else None, kernel=kernel, gamma=gamma, degree=2, coef0=0.5)
    got = kernel_matrix(torch.tensor(X), torch.tensor(Y) if with_y else None, kernel, gamma, degree=2, coef0=0.5)
    assert got.dtype == F64 and got.shape == expected.shape
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-12, atol=1e-12 * np.abs(expected).max())
    if not with_y:
        assert torch.equal(got, got.mT)


@pytest.mark.parametrize("kernel", ["rbf", "laplacian", "poly"])
def test_gamma_none_is_one_over_features(kernel):
    X, Y = _data()
    expected = rk.kernel_matrix(X, Y, kernel=kernel)
    np.testing.assert_allclose(kernel_matrix(torch.tensor(X), torch.tensor(Y), kernel).numpy(), expected, rtol=1e-12)


def test_symmetric_rbf_blocked_path_matches_core():
    # N >= 512 takes the block-triangular GEMM path.
    X = np.random.default_rng(1).random((600, 7))
    got = kernel_matrix(torch.tensor(X), gamma=0.7)
    np.testing.assert_allclose(got.numpy(), rk.kernel_matrix(X, gamma=0.7), rtol=1e-12, atol=1e-14)
    assert torch.equal(got, got.mT) and bool((got.diagonal() == 1).all())


@pytest.mark.parametrize(
    "kernel_object",
    [
        rk.RBF(gamma=0.2),
        rk.Laplacian(gamma=0.4),
        rk.Polynomial(degree=2, gamma=0.1, coef0=0.5),
        rk.Linear(),
        rk.Cosine(),
        rk.Tanimoto(),
        rk.RBF(),
    ],
    ids=repr,
)
def test_kernel_objects_bring_their_parameters(kernel_object):
    X, Y = _data()
    expected = rk.kernel_matrix(X, Y, kernel=kernel_object)
    got = kernel_matrix(torch.tensor(X), torch.tensor(Y), kernel_object, gamma=99.0)  # the object's gamma applies
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-12, atol=1e-14)


def test_float32_kernels():
    X, Y = _data()
    for kernel in KERNELS:
        got = kernel_matrix(torch.tensor(X, dtype=torch.float32), torch.tensor(Y, dtype=torch.float32), kernel, 0.3)
        assert got.dtype == torch.float32
        expected = rk.kernel_matrix(X, Y, kernel=kernel, gamma=0.3)
        np.testing.assert_allclose(got.numpy(), expected, rtol=1e-4, atol=1e-5 * np.abs(expected).max())


@pytest.mark.parametrize("kernel", KERNELS)
def test_gradients_match_core_kernel_gradient(kernel):
    """d/dX sum_ij W_ij k(x_i, y_j) against rkm.kernels.kernel_gradient, ties and zero rows included (laplacian:
    the subgradient sign(0) = 0 in both)."""
    X, Y = _data()
    W = np.random.default_rng(2).standard_normal((X.shape[0], Y.shape[0]))
    gamma = 0.3 if kernel in ("poly", "rbf", "laplacian") else None
    Xt = torch.tensor(X, requires_grad=True)
    (kernel_matrix(Xt, torch.tensor(Y), kernel, gamma, degree=2, coef0=0.5) * torch.tensor(W)).sum().backward()
    expected = rk.kernel_gradient(X, Y, W, kernel=kernel, gamma=gamma, degree=2, coef0=0.5)
    np.testing.assert_allclose(Xt.grad.numpy(), expected, rtol=1e-10, atol=1e-12 * np.abs(expected).max())


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("with_y", [False, True])
def test_gradcheck_inputs(kernel, with_y):
    rng = np.random.default_rng(3)
    X = torch.tensor(rng.standard_normal((6, 3)), requires_grad=True)
    Y = torch.tensor(rng.standard_normal((4, 3)), requires_grad=True) if with_y else None
    gamma = 0.4 if kernel in ("poly", "rbf", "laplacian") else None
    inputs = (X, Y) if with_y else (X,)
    assert torch.autograd.gradcheck(lambda *a: kernel_matrix(*a, kernel=kernel, gamma=gamma, degree=2), inputs)


@pytest.mark.parametrize("kernel", ["rbf", "laplacian", "poly"])
@pytest.mark.parametrize("with_y", [False, True])
def test_gradcheck_gamma(kernel, with_y):
    rng = np.random.default_rng(4)
    X = torch.tensor(rng.standard_normal((6, 3)), requires_grad=True)
    Y = torch.tensor(rng.standard_normal((4, 3)), requires_grad=True) if with_y else None
    gamma = torch.tensor(0.4, dtype=F64, requires_grad=True)

    def function(X, gamma, *rest):
        return kernel_matrix(X, rest[0] if rest else None, kernel, gamma, degree=3)

    assert torch.autograd.gradcheck(function, (X, gamma) + ((Y,) if with_y else ()))


def test_rbf_gradient_at_duplicated_points_is_finite():
    X = torch.tensor(np.repeat(np.random.default_rng(5).standard_normal((3, 4)), 2, axis=0), requires_grad=True)
    gamma = torch.tensor(0.5, dtype=F64, requires_grad=True)
    kernel_matrix(X, gamma=gamma).square().sum().backward()
    assert bool(torch.isfinite(X.grad).all()) and bool(torch.isfinite(gamma.grad))
    with pytest.raises(RuntimeError):  # the analytic backward is not itself differentiable: said, not silent
        Z = X.detach().requires_grad_(True)
        (grad,) = torch.autograd.grad(kernel_matrix(Z).sum(), Z, create_graph=True)
        grad.sum().backward()


def test_kernel_matrix_bad_inputs_name_the_argument():
    X = torch.randn(4, 3, dtype=F64)
    cases = [
        ((X.numpy(),), {}, TypeError, "X:"),
        ((torch.randn(4, dtype=F64),), {}, ValueError, "X:"),
        ((torch.ones(4, 3, dtype=torch.int64),), {}, TypeError, "X:"),
        ((X, torch.randn(2, 4, dtype=F64)), {}, ValueError, "Y:"),
        ((X, torch.randn(2, 3, dtype=torch.float32)), {}, ValueError, "Y:"),
        ((X,), {"kernel": "nope"}, ValueError, "kernel:"),
        ((X,), {"kernel": lambda a, b: a @ b.T}, ValueError, "kernel:"),
        ((X,), {"gamma": 0.0}, ValueError, "gamma:"),
        ((X,), {"gamma": float("nan")}, ValueError, "gamma:"),
        ((X,), {"gamma": torch.tensor(-1.0, dtype=F64)}, ValueError, "gamma:"),
        ((X,), {"gamma": torch.tensor([1.0], dtype=F64)}, TypeError, "gamma:"),
        ((X,), {"kernel": "poly", "degree": -1}, ValueError, "degree:"),
        ((X,), {"kernel": "poly", "coef0": float("inf")}, ValueError, "coef0:"),
        ((X,), {"kernel": "poly", "degree": 2.5, "coef0": -5.0}, ValueError, "degree:"),
    ]
    for args, kwargs, error, name in cases:
        with pytest.raises(error, match=name):
            kernel_matrix(*args, **kwargs)


# ---------------------------------------------------------------------------------------------------- Stiefel


def _trace_problem(n=20, p=3, seed=0):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((n, n))
    return (A + A.T) / 2, stiefel.random_point(n, p, random_state=seed + 1)


def test_project_matches_rkm():
    Z = np.random.default_rng(6).standard_normal((15, 4))
    np.testing.assert_allclose(tstiefel.project(torch.tensor(Z)).numpy(), stiefel.project(Z), atol=1e-12)
    with pytest.raises(ValueError, match="Z:"):
        tstiefel.project(torch.zeros(5, 2, dtype=F64))


def test_cayley_retraction_matches_rkm_cayley_bb_step():
    """One "cayley_bb" step of rkm.stiefel (compiled core) is the Cayley curve at tau = 1 / ||G0||."""
    A, H0 = _trace_problem()

    def fun(H):
        return -0.5 * np.trace(H.T @ A @ H), -A @ H

    result = stiefel.minimize(fun, H0, method="cayley_bb", tol=1e-300, max_iter=1)
    assert result.nit == 1 and result.fun < fun(H0)[0]  # the first trial was accepted
    G0 = -A @ H0
    Y = tstiefel.cayley_retraction(torch.tensor(H0), torch.tensor(G0), 1.0 / np.linalg.norm(G0))
    np.testing.assert_allclose(Y.numpy(), result.x, atol=1e-12)
    assert float(tstiefel.feasibility(Y)) < 1e-13
    assert torch.equal(tstiefel.cayley_retraction(torch.tensor(H0), torch.tensor(G0), 0.0), torch.tensor(H0))


def test_cayley_adam_matches_rkm_trajectory():
    A, H0 = _trace_problem()
    n_steps = 40
    result = stiefel.minimize(
        lambda H: (-0.5 * np.trace(H.T @ A @ H), -A @ H), H0, method="cayley_adam", tol=1e-300, max_iter=n_steps
    )
    At, H = torch.tensor(A), torch.nn.Parameter(torch.tensor(H0))
    optimizer = CayleyAdam([H])
    values, iterates = [], []
    for step in range(n_steps + 1):
        optimizer.zero_grad()
        loss = -0.5 * torch.trace(H.T @ At @ H)
        loss.backward()
        values.append(loss.item())
        iterates.append(H.detach().clone())
        if step < n_steps:
            optimizer.step()
    np.testing.assert_allclose(values, result.history["fun"], rtol=1e-12, atol=1e-12)
    returned = int(np.argmin(result.history["fun"]))  # rkm returns the best iterate
    np.testing.assert_allclose(iterates[returned].numpy(), result.x, atol=1e-12)


def test_cayley_adam_reaches_the_top_eigen_subspace():
    """min -1/2 Tr(H^T A H) on St(s, N) is the top-s eigen-subspace. Davis-Kahan: ||sin Theta||_F <= ||R||_F / gap
    with R = A H - H (H^T A H) (minus the Riemannian gradient) and gap = lambda_s - lambda_{s+1}, and
    ||P - P*||_F = sqrt(2) ||sin Theta||_F: the projector's tolerance follows from the residual reached."""
    n, s = 30, 3
    rng = np.random.default_rng(7)
    Q = np.linalg.qr(rng.standard_normal((n, n)))[0]
    A = torch.tensor(Q @ np.diag(np.r_[[10.0, 9.0, 8.0], rng.uniform(-3, 3, n - s)]) @ Q.T)
    layer = StiefelLinear(n, s, generator=torch.Generator().manual_seed(0))
    optimizer = CayleyAdam(layer.parameters())
    worst = 0.0
    for _ in range(600):
        optimizer.zero_grad()
        loss = -0.5 * torch.trace(layer(A.mT).mT @ layer.weight)  # layer(A^T) = A H
        loss.backward()
        optimizer.step()
        worst = max(worst, float(tstiefel.feasibility(layer.weight.detach())))
    H = layer.weight.detach()
    assert worst < 1e-10  # feasibility after every step
    w, V = torch.linalg.eigh(A)
    residual = float(torch.linalg.matrix_norm(A @ H - H @ (H.T @ A @ H)))
    bound = np.sqrt(2) * residual / float(w[-s] - w[-s - 1])
    error = np.linalg.norm(_projector(H) - _projector(V[:, -s:]))
    assert residual < 1e-8 and error <= bound + 1e-12
    assert error < 1e-8


def test_cayley_adam_on_kpca_energy_matches_eigendecomposition():
    """Training H on St(s, N) against kpca_energy reaches kpca_from_kernels's subspace and eigenvalues."""
    X = torch.tensor(np.random.default_rng(8).standard_normal((25, 4)))
    step = kpca_from_kernels(kernel_matrix(X, gamma=0.5), 2)
    K = center_kernel(kernel_matrix(X, gamma=0.5))
    H = torch.nn.Parameter(tstiefel.random_point(25, 2, generator=torch.Generator().manual_seed(1)))
    optimizer = CayleyAdam([H])
    for _ in range(800):
        optimizer.zero_grad()
        kpca_energy(H, torch.zeros(2, dtype=F64), K).backward()
        optimizer.step()
    np.testing.assert_allclose(_projector(H), _projector(step.H), atol=1e-7)
    eigenvalues = torch.linalg.eigvalsh(H.detach().T @ K @ H.detach()).flip(0)
    np.testing.assert_allclose(eigenvalues.numpy(), step.eigenvalues.numpy(), rtol=1e-10)


def test_stiefel_bad_inputs_name_the_argument():
    H = tstiefel.random_point(6, 2)
    with pytest.raises(ValueError, match="params:"):
        CayleyAdam([torch.nn.Parameter(2 * H)])
    with pytest.raises(ValueError, match="lr:"):
        CayleyAdam([torch.nn.Parameter(H)], lr=-1.0)
    with pytest.raises(ValueError, match="betas:"):
        CayleyAdam([torch.nn.Parameter(H)], betas=(0.9, 1.0))
    with pytest.raises(ValueError, match="step:"):
        tstiefel.cayley_retraction(H, H, -1.0)
    with pytest.raises(ValueError, match="G:"):
        tstiefel.cayley_retraction(H, H[:, :1], 0.1)
    with pytest.raises(ValueError, match="out_features:"):
        StiefelLinear(2, 3)
    with pytest.raises(ValueError, match="p:"):
        tstiefel.random_point(2, 3)


def test_cayley_adam_float32_and_paper_lr():
    H = torch.nn.Parameter(tstiefel.random_point(12, 2, dtype=torch.float32, generator=torch.Generator()))
    optimizer = CayleyAdam([H])
    A = torch.diag(torch.arange(12, dtype=torch.float32))
    worst = 0.0
    for _ in range(200):
        optimizer.zero_grad()
        (-0.5 * torch.trace(H.T @ A @ H)).backward()
        optimizer.step()
        worst = max(worst, float(tstiefel.feasibility(H.detach())))
    # Re-projected above 450 float32 epsilons (5.4e-5), as float64 iterates are above 1e-13.
    assert H.dtype == torch.float32 and worst < 1e-4
    np.testing.assert_allclose(_projector(H.detach().double()), np.diag([0.0] * 10 + [1.0, 1.0]), atol=1e-3)
    assert CayleyAdam([torch.nn.Parameter(H.detach().clone())], lr="paper").defaults["lr"] == 5e-5


# ------------------------------------------------------------------------------------------- kernel PCA step


def _views(n_views, n=40, seed=9, dtype=F64):
    rng = np.random.default_rng(seed)
    widths = (4, 3, 2)[:n_views]
    return [torch.tensor(rng.standard_normal((n, d)) + rng.standard_normal(d), dtype=dtype) for d in widths]


@pytest.mark.parametrize("n_views", [1, 2, 3])
def test_kpca_dual_equals_primal(n_views):
    views = _views(n_views)
    eta = [0.5, 2.0, 1.3][:n_views]
    s = 3
    dual, primal = kpca(views, s, eta, form="dual"), kpca(views, s, eta, form="primal")
    assert (dual.form, primal.form, kpca(views, s, eta).form) == ("dual", "primal", "primal")
    np.testing.assert_allclose(dual.eigenvalues.numpy(), primal.eigenvalues.numpy(), rtol=1e-12)
    np.testing.assert_allclose(_projector(dual.H), _projector(primal.H), atol=1e-12)
    for U_d, U_p in zip(dual.U, primal.U, strict=True):  # U_v H^T = Phi_v^T H H^T does not depend on signs
        np.testing.assert_allclose((U_d @ dual.H.T).numpy(), (U_p @ primal.H.T).numpy(), atol=1e-11)
    scale = float(dual.eigenvalues.detach().sum())
    assert abs(float(dual.energy.detach())) < 1e-12 * scale and abs(float(primal.energy.detach())) < 1e-12 * scale


@pytest.mark.parametrize("n_views", [1, 2, 3])
def test_kpca_equals_multiview_rkm_linear(n_views):
    views = _views(n_views)
    eta = [0.5, 2.0, 1.3][:n_views]
    model = MultiViewRKM(3, kernel=["linear"] * n_views, eta=eta).fit([V.numpy() for V in views])
    step = kpca(views, 3, eta)
    np.testing.assert_allclose(step.eigenvalues.numpy(), model.eigenvalues_, rtol=1e-10)
    np.testing.assert_allclose(_projector(step.H), _projector(model.H_), atol=1e-10)


def test_kpca_from_kernels_equals_multiview_rkm_rbf():
    views = _views(2)
    gammas, eta = [0.3, 0.8], [1.0, 0.4]
    model = MultiViewRKM(4, kernel="rbf", gamma=gammas, eta=eta).fit([V.numpy() for V in views])
    kernels = [kernel_matrix(V, gamma=g) for V, g in zip(views, gammas, strict=True)]
    step = kpca_from_kernels(kernels, 4, eta)
    np.testing.assert_allclose(step.eigenvalues.numpy(), model.eigenvalues_, rtol=1e-10)
    np.testing.assert_allclose(_projector(step.H), _projector(model.H_), atol=1e-10)
    assert abs(float(step.energy.detach())) < 1e-12 * float(step.eigenvalues.detach().sum())


@pytest.mark.parametrize("form", ["dual", "primal"])
def test_proposition_1_energy_and_its_gradient_vanish(form):
    """J_t = 0 at the eigen-solution for every batch, so its gradient to the feature network is zero: far below
    that of a reconstruction loss. A Stiefel H off the eigen-solution (the control) gives a real gradient, so
    the check can fail."""
    torch.manual_seed(0)
    x = torch.randn(64, 8, dtype=F64)
    labels = torch.nn.functional.one_hot(torch.arange(64) % 4, 4).to(F64)
    network = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 6)).to(F64)
    decoder = torch.nn.Linear(6, 8).to(F64)
    params = list(network.parameters())

    def norm(grads):
        return float(torch.sqrt(sum((g * g).sum() for g in grads)))

    features = network(x)
    step = kpca([features, labels], 5, [1.0, 0.5], form=form)
    energy_grad = norm(torch.autograd.grad(step.energy, params, retain_graph=True))
    stab_grad = norm(torch.autograd.grad(stabilized_objective(step.energy, 10.0), params, retain_graph=True))
    reconstruction = decoder(step.means[0] + step.H @ step.U[0].T)
    recon_grad = norm(torch.autograd.grad(((reconstruction - x) ** 2).mean(), params, retain_graph=True))
    assert abs(float(step.energy.detach())) < 1e-12 * float(step.eigenvalues.detach().sum())
    assert recon_grad > 1e-3
    assert energy_grad < 1e-9 * recon_grad and stab_grad < 1e-9 * recon_grad
    # The control: the same energy at a Stiefel point off the eigen-solution depends on the network.
    off = tstiefel.project(step.H.detach() + 0.3 * torch.randn_like(step.H))
    centred = [features - step.means[0], labels - step.means[1]]
    control = kpca_energy(off, step.eigenvalues, features=centred, eta=[1.0, 0.5])
    assert norm(torch.autograd.grad(control, params)) > 1e-2 * recon_grad


def test_stabilized_objective():
    J = torch.tensor(-0.3, dtype=F64, requires_grad=True)
    value = stabilized_objective(J, 2.0)
    assert float(value.detach()) == pytest.approx(-0.3 + 0.09)
    value.backward()
    assert float(J.grad) == pytest.approx(1.0 + 2.0 * -0.3)
    for bad in (0.0, -1.0, float("nan"), "1"):
        with pytest.raises(ValueError, match="c_stab:"):
            stabilized_objective(J, bad)


def _sign_free(values, vectors, k):
    """A loss of eigenvalues and the top-k eigenvectors that does not depend on their signs."""
    weights = torch.arange(1.0, vectors.shape[0] + 1, dtype=vectors.dtype)
    P = vectors[:, :k] @ vectors[:, :k].mT
    return (values[:k] * torch.arange(1.0, k + 1, dtype=values.dtype)).sum() + (weights[:, None] * P * P).sum()


def test_eigh_descending_gradient_equals_torch_on_separated_spectra():
    rng = np.random.default_rng(10)
    Q = np.linalg.qr(rng.standard_normal((6, 6)))[0]
    A = torch.tensor(Q @ np.diag([6.0, 4.5, 3.0, 2.0, 1.0, -0.5]) @ Q.T, requires_grad=True)
    assert torch.autograd.gradcheck(lambda M: _sign_free(*eigh_descending(M), 3), (A,))
    (ours,) = torch.autograd.grad(_sign_free(*eigh_descending(A), 3), A)
    values, vectors = torch.linalg.eigh(A)
    (exact,) = torch.autograd.grad(_sign_free(values.flip(0), vectors.flip(1), 3), A)
    np.testing.assert_allclose(ours.numpy(), ((exact + exact.mT) / 2).numpy(), atol=1e-9)


def test_eigh_descending_is_finite_with_repeated_eigenvalues():
    """Exactly repeated eigenvalues (below the top one): torch's exact backward gives NaN, the broadened one the
    right gradient of a loss of the top eigenvector (gradcheck), and a rank-deficient batch with duplicated rows
    trains with finite gradients."""
    A = torch.diag(torch.tensor([3.0, 1.0, 1.0, 1.0, 0.5], dtype=F64)).requires_grad_(True)
    values, vectors = torch.linalg.eigh(A)
    (exact,) = torch.autograd.grad(_sign_free(values.flip(0), vectors.flip(1), 1), A)
    assert not bool(torch.isfinite(exact).all())
    (ours,) = torch.autograd.grad(_sign_free(*eigh_descending(A), 1), A)
    assert bool(torch.isfinite(ours).all())
    assert torch.autograd.gradcheck(lambda M: _sign_free(*eigh_descending(M), 1), (A,))
    # All rows identical: the centred features vanish and every eigenvalue is exactly 0.
    weight = torch.randn(3, 5, dtype=F64, requires_grad=True)
    x = torch.ones(8, 3, dtype=F64)
    step = kpca(x @ weight, 2, form="dual")
    (grad,) = torch.autograd.grad(step.energy + (step.H**2 * torch.arange(8.0, dtype=F64)[:, None]).sum(), weight)
    assert bool(torch.isfinite(grad).all())
    # Duplicated rows (rank 3 of 12) with s = 3: finite, and the energy is still zero.
    z = torch.randn(6, 3, dtype=F64).repeat(2, 1).requires_grad_(True)
    step = kpca(z, 3, form="dual")
    (grad,) = torch.autograd.grad((step.H @ step.U[0].T - (z - z.mean(0))).square().sum() + step.energy, z)
    assert bool(torch.isfinite(grad).all()) and abs(float(step.energy.detach())) < 1e-12 * float(
        step.eigenvalues.detach().sum()
    )


def test_kpca_float32():
    views = _views(2, dtype=torch.float32)
    for form in ("dual", "primal"):
        step = kpca(views, 3, [1.0, 0.5], form=form)
        assert step.H.dtype == torch.float32 and step.eigenvalues.dtype == torch.float32
        assert abs(float(step.energy.detach())) < 1e-5 * float(step.eigenvalues.detach().sum())
    reference = kpca([V.double() for V in views], 3, [1.0, 0.5])
    np.testing.assert_allclose(step.eigenvalues.numpy(), reference.eigenvalues.numpy(), rtol=1e-4)
    kernels = [kernel_matrix(V, gamma=0.5) for V in views]
    assert kpca_from_kernels(kernels, 2).H.dtype == torch.float32


def test_energy_bad_inputs_name_the_argument():
    views = _views(2)
    cases = [
        (lambda: kpca([V.numpy() for V in views], 2), TypeError, r"features\[0\]"),
        (lambda: kpca(views, 0), ValueError, "n_components:"),
        (lambda: kpca(views, 41, form="dual"), ValueError, "n_components:"),
        (lambda: kpca(views, 2, [1.0]), ValueError, "eta:"),
        (lambda: kpca(views, 2, -1.0), ValueError, "eta:"),
        (lambda: kpca(views, 2, form="svd"), ValueError, "form:"),
        (lambda: kpca([views[0], views[1][:10]], 2), ValueError, r"features\[1\]"),
        (lambda: kpca([views[0], views[1].float()], 2), ValueError, r"features\[1\]"),
        (lambda: kpca(views[0][:, :1].repeat(1, 3), 2, form="primal"), ValueError, "n_components:"),
        (lambda: kpca_from_kernels(torch.ones(3, 4, dtype=F64), 1), ValueError, r"kernels\[0\]"),
        (lambda: eigh_descending(torch.ones(3, 4, dtype=F64)), ValueError, "A:"),
        (lambda: eigh_descending(torch.eye(3, dtype=F64), broadening=-1.0), ValueError, "broadening:"),
        (
            lambda: kpca_energy(torch.eye(3, 2, dtype=F64), torch.ones(3, dtype=F64), torch.eye(3)),
            ValueError,
            "eigenvalues:",
        ),
        (lambda: kpca_energy(torch.eye(3, 2, dtype=F64), torch.ones(2, dtype=F64)), ValueError, "kernel:"),
    ]
    for call, error, name in cases:
        with pytest.raises(error, match=name):
            call()
