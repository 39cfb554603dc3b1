"""rkm.torch's network models: the explicit Gen-RKM (Algorithm 1), VAE and beta-VAE on one training loop."""

import subprocess
import sys
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from sklearn.datasets import load_digits  # noqa: E402
from sklearn.neighbors import KNeighborsClassifier  # noqa: E402
from torch import nn  # noqa: E402

from rkm.datasets import make_sprites  # noqa: E402
from rkm.exceptions import ConvergenceWarning, DivergenceError  # noqa: E402
from rkm.torch import VAE, BetaVAE, ExplicitGenRKM, kpca, stabilized_objective  # noqa: E402


@pytest.fixture(scope="module")
def digits():
    X, y = load_digits(return_X_y=True)
    return X / 16.0, np.eye(10)[y], y


def _small(digits, n=300):
    X, Y, y = digits
    return X[:n], Y[:n], y[:n]


def _quiet_fit(model, views):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return model.fit(views)


def test_import_rkm_does_not_import_torch():
    code = "import sys, rkm, rkm.multiview, rkm.features; sys.exit('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


def test_the_energy_gives_no_gradient_and_training_is_reconstruction(digits):
    """Proposition 1 inside a batch of the model's own networks: J_t is zero at the eigen-solution, so J_stab's
    gradient vanishes next to the reconstruction term's (the module docstring's claim)."""
    X, Y, _ = _small(digits, 256)
    model = _quiet_fit(ExplicitGenRKM(6, label_views=[1], max_epochs=1, dtype="float64", random_state=0), [X, Y])
    batch = [torch.as_tensor(X), torch.as_tensor(Y)]
    features = [net(x) for net, x in zip(model.feature_networks_, batch)]
    step = kpca(features, 6)
    parameters = list(model.feature_networks_.parameters())
    stab = torch.autograd.grad(stabilized_objective(step.energy, 10.0), parameters, retain_graph=True)
    reconstruction = sum(
        ((net(step.H @ U.mT) - x) ** 2).sum(dim=1).mean() for net, x, U in zip(model.preimage_networks_, batch, step.U)
    )
    recon = torch.autograd.grad(reconstruction, parameters)
    norm = lambda grads: float(torch.sqrt(sum((g**2).sum() for g in grads)))  # noqa: E731
    assert abs(step.energy.item()) < 1e-10 * step.eigenvalues.sum().item()
    assert norm(stab) < 1e-8 * norm(recon)
    assert norm(recon) > 1e-3


def test_the_defaults_train_image_and_label_views(digits):
    """The default networks, learning rate and batch size learn the label view: generated pairs agree with a
    k-NN on real digits, across the classes (about 1000 Adam steps; the issue's prototype needed as many)."""
    X, Y, y = digits
    model = _quiet_fit(ExplicitGenRKM(8, label_views=[1], max_epochs=150, n_threads=2, random_state=0), [X, Y])
    images, labels = model.sample(300, random_state=0)
    knn = KNeighborsClassifier(5).fit(X, y)
    generated = labels.argmax(axis=1)
    assert np.mean(knn.predict(images) == generated) >= 0.85
    assert len(set(generated)) == 10
    reconstructed_images, reconstructed_labels = model.reconstruct([X[:300], Y[:300]])
    assert np.mean(reconstructed_labels.argmax(axis=1) == y[:300]) >= 0.9
    assert np.mean((reconstructed_images - X[:300]) ** 2) < 0.5 * np.var(X[:300], axis=0).sum() / X.shape[1]
    assert model.objective_history_[-1] < 0.5 * model.objective_history_[0]


def test_binary_sprites_train_at_the_default_learning_rate():
    """Table 3's 64 x 64 networks on binary sprites: the pre-image network gets centred features, so the feature
    networks cannot inflate a batch-mean offset until the sigmoid saturates (with the mean added back, this fit
    output all-black images after 5 epochs: error = the white pixels)."""
    X = make_sprites(256, random_state=0)[0].reshape(256, -1)
    model = _quiet_fit(ExplicitGenRKM(2, batch_size=64, max_epochs=8, n_threads=2, random_state=0), X)
    (reconstructed,) = model.reconstruct(X)
    all_black = X.sum(axis=1).mean()
    assert ((reconstructed - X) ** 2).sum(axis=1).mean() < 0.9 * all_black  # 140 of 189.5 measured
    assert reconstructed.max() > 0.5
    np.testing.assert_allclose(model.decode(np.zeros(2))[0], model.preimage_networks_[0](torch.zeros(1, 128)).detach())


def test_latents_decode_and_transform_agree(digits):
    X, Y, _ = _small(digits)
    model = _quiet_fit(ExplicitGenRKM(5, label_views=[1], max_epochs=2, dtype="float64", random_state=0), [X, Y])
    assert model.H_.shape == (300, 5)
    np.testing.assert_allclose(model.H_.T @ model.H_, np.eye(5), atol=1e-10)
    np.testing.assert_allclose(model.transform([X, Y]), model.H_, atol=1e-8 * np.abs(model.H_).max())
    for decoded, reconstructed in zip(model.decode(model.H_), model.reconstruct([X, Y])):
        np.testing.assert_allclose(decoded, reconstructed, atol=1e-8)
    images, labels = model.sample(7, random_state=1)
    assert images.shape == (7, 64) and labels.shape == (7, 10)
    assert np.all((images > 0) & (images < 1))  # the sigmoid outputs of Table 3's pre-image maps
    walked = model.traverse(0, np.linspace(-0.1, 0.1, 4))
    assert [v.shape for v in walked] == [(4, 64), (4, 10)]
    grid = model.interpolate(model.H_[:4], 3)
    assert [v.shape for v in grid] == [(9, 64), (9, 10)]
    np.testing.assert_allclose(grid[0][0], model.decode(model.H_[0])[0][0], atol=1e-10)


@pytest.mark.parametrize("cls", [ExplicitGenRKM, VAE])
def test_fits_are_reproducible_and_leave_the_global_generator_alone(digits, cls):
    X, Y, _ = _small(digits)
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    first = _quiet_fit(cls(4, max_epochs=2, random_state=0), [X, Y])
    assert torch.equal(torch.rand(3), expected)
    second = _quiet_fit(cls(4, max_epochs=2, random_state=0), [X, Y])
    np.testing.assert_array_equal(first.transform([X, Y]), second.transform([X, Y]))
    np.testing.assert_array_equal(first.objective_history_, second.objective_history_)
    other = _quiet_fit(cls(4, max_epochs=2, random_state=1), [X, Y])
    assert not np.array_equal(first.transform([X, Y]), other.transform([X, Y]))


@pytest.mark.parametrize("cls", [ExplicitGenRKM, VAE, BetaVAE])
def test_save_and_load_give_the_same_model(digits, cls, tmp_path):
    X, Y, _ = _small(digits)
    model = _quiet_fit(cls(4, label_views=[1], max_epochs=2, random_state=0), [X, Y])
    model.save(tmp_path / "model.pt")
    loaded = cls.load(tmp_path / "model.pt")
    np.testing.assert_array_equal(loaded.transform([X, Y]), model.transform([X, Y]))
    for a, b in zip(loaded.sample(5, random_state=3), model.sample(5, random_state=3)):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match="path"):
        (VAE if cls is ExplicitGenRKM else ExplicitGenRKM).load(tmp_path / "model.pt")


def test_vae_and_beta_vae_train_with_the_same_networks(digits):
    X, Y, _ = _small(digits)
    vae = _quiet_fit(VAE(4, max_epochs=15, random_state=0), [X])
    beta = _quiet_fit(BetaVAE(4, max_epochs=15, random_state=0), [X])
    assert beta.beta == 3.0 and vae.beta == 1.0
    gen = _quiet_fit(ExplicitGenRKM(4, max_epochs=1, random_state=0), [X])
    shapes = lambda m: [tuple(p.shape) for p in m.feature_networks_.parameters()]  # noqa: E731
    assert shapes(vae) == shapes(gen) == shapes(beta)
    history = vae.term_history_["reconstruction"]
    assert history[-1] < 0.7 * history[0]
    # A heavier KL weight keeps the posterior closer to the prior.
    assert beta.term_history_["KL"][-1] < vae.term_history_["KL"][-1]
    assert vae.transform(X[:5]).shape == (5, 4)
    assert vae.sample(3, random_state=0)[0].shape == (3, 64)


def test_image_shapes_and_float64_give_convolutional_networks(digits):
    X, Y, _ = _small(digits)
    model = _quiet_fit(
        ExplicitGenRKM(4, image_shapes=[(1, 8, 8), None], dtype="float64", max_epochs=1, random_state=0), [X, Y]
    )
    assert any(isinstance(layer, nn.Conv2d) for layer in model.feature_networks_[0])
    assert next(model.feature_networks_.parameters()).dtype == torch.float64


def test_user_networks_are_copied_not_trained_in_place(digits):
    X, _, _ = _small(digits)
    encoder, decoder = nn.Sequential(nn.Linear(64, 12)), nn.Sequential(nn.Linear(12, 64), nn.Sigmoid())
    before = encoder[0].weight.detach().clone()
    model = _quiet_fit(
        ExplicitGenRKM(3, feature_networks=[encoder], preimage_networks=[decoder], max_epochs=2, random_state=0), X
    )
    assert torch.equal(encoder[0].weight, before)
    assert not torch.equal(model.feature_networks_[0][0].weight, before)


class _Exploding(nn.Module):
    """A feature map whose outputs overflow float32 once its scale has been stepped: the loss becomes inf."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(64, 10)
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        scale = 1e30 if self.calls > 3 else 1.0
        return self.linear(x) * scale


def test_a_non_finite_loss_stops_with_the_last_finite_weights(digits):
    X, _, _ = _small(digits)
    model = ExplicitGenRKM(3, feature_networks=[_Exploding()], batch_size=100, max_epochs=5, random_state=0)
    with pytest.raises(DivergenceError, match="loss became"):
        model.fit(X)
    weights = model.feature_networks_[0].linear.weight
    assert torch.isfinite(weights).all()


class _Interrupting(nn.Module):
    def __init__(self, after):
        super().__init__()
        self.linear, self.after, self.calls = nn.Linear(64, 10), after, 0

    def forward(self, x):
        self.calls += 1
        if self.training and self.calls == self.after:
            raise KeyboardInterrupt
        return self.linear(x)


def test_ctrl_c_between_batches_keeps_the_model(digits):
    X, _, _ = _small(digits)
    # 3 batches per epoch plus the probe call: the 9th call is in epoch 3.
    model = ExplicitGenRKM(3, feature_networks=[_Interrupting(9)], batch_size=100, max_epochs=10, random_state=0)
    with pytest.warns(RuntimeWarning, match="interrupted during epoch 3"):
        model.fit(X)
    assert model.n_iter_ == 2
    assert model.sample(2, random_state=0)[0].shape == (2, 64)


def test_convergence_warning_and_early_stop(digits):
    X, _, _ = _small(digits)
    with pytest.warns(ConvergenceWarning, match="max_epochs"):
        ExplicitGenRKM(3, max_epochs=2, random_state=0).fit(X)
    # The first epoch sets the best loss; with tol = 10 no later epoch improves on it.
    model = ExplicitGenRKM(3, max_epochs=50, tol=10.0, n_iter_no_change=2, random_state=0).fit(X)
    assert model.n_iter_ == 3


@pytest.mark.parametrize(
    ("params", "views", "match"),
    [
        ({"n_components": 50, "batch_size": 40}, None, "batch_size"),
        ({"n_components": 300}, None, "n_components"),
        ({"label_views": [2]}, None, "label_views"),
        ({"feature_networks": [nn.Linear(64, 5)]}, None, "feature_networks"),
        ({"feature_networks": ["mlp", "auto"]}, None, r"feature_networks\[0\]"),
        ({"preimage_networks": [nn.Linear(128, 3), "auto"]}, None, r"preimage_networks\[0\]"),
        ({"eta": [1.0]}, None, "eta"),
        ({"n_mixture": 400}, None, "n_mixture"),
        ({}, "rows", "rows"),
        ({}, "nan", "NaN"),
    ],
)
def test_bad_input_names_the_argument(digits, params, views, match):
    X, Y, _ = _small(digits)
    data = [X, Y]
    if views == "rows":
        data = [X, Y[:-1]]
    elif views == "nan":
        data = [np.where(np.arange(X.size).reshape(X.shape) == 5, np.nan, X), Y]
    with pytest.raises((ValueError, TypeError), match=match):
        ExplicitGenRKM(**{"n_components": 3, "max_epochs": 1, **params}).fit(data)


def test_transform_checks_the_training_widths(digits):
    X, Y, _ = _small(digits)
    model = _quiet_fit(ExplicitGenRKM(3, max_epochs=1, random_state=0), [X, Y])
    with pytest.raises(ValueError, match="training widths"):
        model.transform([X[:, :10], Y])
    with pytest.raises(ValueError, match="n_components"):
        model.decode(np.zeros((2, 4)))
