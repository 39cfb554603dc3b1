"""The kernel autoencoder loss and gradient of the compiled core (_core.kae_loss_and_grad) against
rkm.reference.kae, by both gradient methods, and their errors and Ctrl-C."""

import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from conftest import assert_relatively_close
from scipy.spatial.distance import cdist

from rkm import _core
from rkm._kernel_table import names_with
from rkm.reference import kae as kae_reference

KAE_KERNELS = {"rbf": ("rbf", 0.6, 3.0, 1.0), "poly": ("poly", 0.2, 2.0, 0.5), "linear": ("linear", None, 3.0, 1.0)}
KAE_IMPLEMENTATIONS = {"core": _core.kae_loss_and_grad, "reference": kae_reference.kae_loss_and_grad}


def test_kae_kernels_cover_every_kernel_with_layer_derivatives():
    assert set(KAE_KERNELS) == set(names_with("layer_derivatives"))


# (first layer, ridge penalty lambda_L of a solved last layer or None, what it regresses onto): a KAE; a K²AE with
# its ridge layer and with its least-squares layer (lambda_L = 0); a finite-dimensional KAE whose last layer is
# solved (K_1 = k_1(X, X) given, output_gram = X X^T), likewise; the same given X itself (output_features = X: the
# last layer solved through W^-1 X).
KAE_KINDS = {
    "kae": ("data", None, None),
    "k2ae": ("gram", 0.05, None),
    "k2ae_least_squares": ("gram", 0.0, None),
    "kae_ridge": ("data_gram", 0.05, "data"),
    "kae_least_squares": ("data_gram", 0.0, "data"),
    "kae_ridge_features": ("data_gram", 0.05, "features"),
    "kae_least_squares_features": ("data_gram", 0.0, "features"),
}


def _psd_operator(d, seed):
    A = np.random.default_rng(seed).normal(size=(d, d))
    return A @ A.T / d + 0.2 * np.eye(d)


def _kae_problem(kind, n_layers, kernel, operators, n=10, seed=0):
    """((X, phis, kernels, operators, penalties), {precomputed, output_gram[, output_features]}) of a small problem of
    the kind: d_0 = 2 (a K²AE's K_in: an rbf Gram matrix), hidden sizes (3,) or (3, 2), every kernel `kernel`."""
    first, ridge, output = KAE_KINDS[kind]
    rng = np.random.default_rng(seed)
    hidden = [3, 2][: n_layers - 1]
    data = rng.normal(size=(n, 2))
    keywords = dict(precomputed=first != "data", output_gram=data @ data.T if output == "data" else None)
    if output == "features":
        keywords["output_features"] = data
    if first == "gram":
        Z = rng.normal(size=(n, 4))
        X = np.exp(-0.3 * cdist(Z, Z, "sqeuclidean"))
    else:
        X = data if first == "data" else np.exp(-0.6 * cdist(data, data, "sqeuclidean"))
    widths = hidden if keywords["precomputed"] else [*hidden, 2]
    # Codes X^(l) = K_l Phi_l A_l of order one whatever n: a poly layer would raise larger ones to its degree and
    # leave a ridge system too ill-conditioned to compare two implementations at 1e-10.
    phis = [rng.normal(size=(n, d)) * 2.0 / n for d in widths]
    ops = [_psd_operator(d, seed + 1 + i) if operators else None for i, d in enumerate(widths)]
    penalties = [0.02 * (i + 1) for i in range(len(widths))] + ([] if ridge is None else [ridge])
    return (X, phis, [KAE_KERNELS[kernel]] * len(widths), ops, penalties), keywords


def _assert_same_kae_results(actual, expected, rtol):
    loss, grads, terms = actual
    assert abs(loss - expected[0]) <= rtol * abs(expected[0])
    assert_relatively_close(terms, expected[2], rtol=rtol)
    assert len(grads) == len(expected[1])
    for grad, grad_expected in zip(grads, expected[1]):
        assert_relatively_close(grad, grad_expected, rtol=rtol)


# The least-squares layer is only as well conditioned as the kept spectrum of K_L: its tests use a linear last
# kernel (rank d_{L-1}, well separated from the dropped eigenvalues) without operators.
KAE_CASES = [
    (kind, n_layers, kernel, operators)
    for kind in KAE_KINDS
    for n_layers in (2, 3)
    for kernel in KAE_KERNELS
    for operators in (False, True)
    if "least_squares" not in kind or (kernel == "linear" and not operators)
]


@pytest.mark.parametrize("method", ["adjoint", "jacobian"])
@pytest.mark.parametrize("kind, n_layers, kernel, operators", KAE_CASES)
def test_kae_core_matches_the_reference(kind, n_layers, kernel, operators, method):
    args, keywords = _kae_problem(kind, n_layers, kernel, operators)
    expected = kae_reference.kae_loss_and_grad(*args, method=method, **keywords)
    _assert_same_kae_results(_core.kae_loss_and_grad(*args, method=method, **keywords), expected, rtol=1e-10)


@pytest.mark.parametrize("kind, n_layers, kernel, operators", KAE_CASES)
def test_kae_core_adjoint_matches_the_reference_over_several_bands(kind, n_layers, kernel, operators):
    # n = 70: the core's kernel passes run in bands of 32 rows (two whole bands and a partial one)
    args, keywords = _kae_problem(kind, n_layers, kernel, operators, n=70, seed=1)
    expected = kae_reference.kae_loss_and_grad(*args, **keywords)
    _assert_same_kae_results(_core.kae_loss_and_grad(*args, **keywords), expected, rtol=1e-10)


def test_kae_core_adjoint_matches_the_reference_with_kernel_matrices_beyond_32_mib():
    # Three 1200 x 1200 kernel matrices take 34.6 MB: the core's buffer for them then takes its other allocation.
    args, keywords = _kae_problem("kae", 3, "rbf", True, n=1200, seed=8)
    expected = kae_reference.kae_loss_and_grad(*args, **keywords)
    _assert_same_kae_results(_core.kae_loss_and_grad(*args, **keywords), expected, rtol=1e-10)


@pytest.mark.parametrize("kind, n_layers, kernel, operators", KAE_CASES)
def test_kae_adjoint_and_jacobian_gradients_agree(kind, n_layers, kernel, operators):
    args, keywords = _kae_problem(kind, n_layers, kernel, operators, n=70, seed=2)
    adjoint = _core.kae_loss_and_grad(*args, method="adjoint", **keywords)
    jacobian = _core.kae_loss_and_grad(*args, method="jacobian", **keywords)
    assert adjoint[0] == jacobian[0] and np.array_equal(adjoint[2], jacobian[2])  # the same forward pass
    for grad_adjoint, grad_jacobian in zip(adjoint[1], jacobian[1]):
        assert_relatively_close(grad_jacobian, grad_adjoint, rtol=1e-8)


@pytest.mark.parametrize("method", ["adjoint", "jacobian"])
@pytest.mark.parametrize("kind, n_layers, kernel, operators", KAE_CASES)
def test_kae_gradient_matches_central_differences(kind, n_layers, kernel, operators, method):
    # A solved last layer: the loss is the reduced objective, minimised over that layer at every evaluation; its
    # gradient with the layer held fixed is the gradient of the reduced objective (the envelope theorem).
    (X, phis, kernels, ops, penalties), keywords = _kae_problem(kind, n_layers, kernel, operators, seed=3)

    def loss(coefficients):
        return _core.kae_loss_and_grad(X, coefficients, kernels, ops, penalties, **keywords)[0]

    _, grads, _ = _core.kae_loss_and_grad(X, phis, kernels, ops, penalties, method=method, **keywords)
    h = 1e-5
    for seed in (4, 5):
        directions = [np.random.default_rng(seed + i).normal(size=P.shape) for i, P in enumerate(phis)]
        slope = (
            loss([P + h * D for P, D in zip(phis, directions)]) - loss([P - h * D for P, D in zip(phis, directions)])
        ) / (2 * h)
        expected = sum(np.sum(G * D) for G, D in zip(grads, directions))
        scale = np.sqrt(sum(np.sum(G * G) for G in grads) * sum(np.sum(D * D) for D in directions))
        assert abs(slope - expected) <= 1e-7 * scale


@pytest.mark.parametrize("method", ["adjoint", "jacobian"])
@pytest.mark.parametrize("kind", ["kae_ridge", "kae_least_squares"])
@pytest.mark.parametrize("n_layers, kernel, operators", [(2, "rbf", False), (3, "rbf", True), (3, "poly", False)])
def test_kae_output_features_solve_the_output_gram_problem(kind, n_layers, kernel, operators, method):
    # The last layer solved through W^-1 X (d_0 right-hand sides) is the one solved through W^-1 X X^T W^-1.
    if "least_squares" in kind:
        kernel, operators = "linear", False
    args, keywords = _kae_problem(kind, n_layers, kernel, operators, n=70, seed=9)
    data_gram = keywords["output_gram"]
    expected = _core.kae_loss_and_grad(*args, method=method, **keywords)
    # Any F with F F^T = X X^T gives the same problem: here a thin factor from the eigenvectors, not X itself.
    values, vectors = np.linalg.eigh(data_gram)
    F = vectors[:, -2:] * np.sqrt(values[-2:])
    for implementation in KAE_IMPLEMENTATIONS.values():
        by_features = implementation(*args, method=method, precomputed=True, output_gram=None, output_features=F)
        _assert_same_kae_results(by_features, expected, rtol=1e-10)


@pytest.mark.parametrize("method", ["adjoint", "jacobian"])
@pytest.mark.parametrize("kind", list(KAE_KINDS))
def test_kae_core_is_bit_identical_across_thread_counts(kind, method):
    kernel, operators = ("linear", False) if "least_squares" in kind else ("rbf", True)
    args, keywords = _kae_problem(kind, 3, kernel, operators, n=100, seed=6)
    one, two = (_core.kae_loss_and_grad(*args, method=method, n_threads=t, **keywords) for t in (1, 2))
    assert one[0] == two[0] and np.array_equal(one[2], two[2])
    assert all(np.array_equal(a, b) for a, b in zip(one[1], two[1]))


def test_kae_core_reports_an_overflowing_hidden_layer_as_an_infinite_loss():
    # Coefficients this large send the first hidden representation beyond float64's range through the cubic
    # kernel of layer 2: nothing after it can be evaluated, and an optimizer backs off from such a step.
    (X, phis, _, ops, penalties), keywords = _kae_problem("kae", 3, "rbf", False, seed=7)
    kernels = [KAE_KERNELS["rbf"], ("poly", 1.0, 3.0, 1.0), KAE_KERNELS["rbf"]]
    phis[0] = phis[0] * 1e120
    for method in ("adjoint", "jacobian"):
        loss, grads, terms = _core.kae_loss_and_grad(X, phis, kernels, ops, penalties, method=method, **keywords)
        assert loss == np.inf and np.isnan(terms).all() and all(np.isnan(G).all() for G in grads)


@pytest.mark.parametrize("implementation", list(KAE_IMPLEMENTATIONS))
def test_kae_rejects_a_ridge_penalty_too_small_for_the_last_layer(implementation):
    # A linear last kernel on 2-D codes has rank 2: K_L + n lambda_L I is singular to working precision.
    (X, phis, kernels, ops, _), keywords = _kae_problem("k2ae", 3, "linear", False)
    with pytest.raises(ValueError, match="^penalties: "):
        KAE_IMPLEMENTATIONS[implementation](X, phis, kernels, ops, [0.02, 0.04, 1e-300], **keywords)


def test_ctrl_c_interrupts_the_kae_jacobian_recursions():
    script = (
        "import signal; signal.signal(signal.SIGINT, signal.default_int_handler)\n"
        "import numpy as np; from rkm import _core\n"
        "rng = np.random.default_rng(0); n = 1500\n"
        "phis = [rng.normal(size=(n, d)) / n for d in (10, 5, 2)]\n"
        "kernels = [('rbf', 0.5, 3.0, 1.0), ('rbf', 0.1, 3.0, 1.0), ('rbf', 0.2, 3.0, 1.0)]\n"
        "print('ready', flush=True)\n"
        "try:\n"
        "    _core.kae_loss_and_grad(rng.normal(size=(n, 2)), phis, kernels, None, [1e-3] * 3, False, 'jacobian')\n"
        "    print('completed', flush=True)\n"
        "except KeyboardInterrupt:\n"
        "    print('interrupted', flush=True)\n"
    )
    process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        # An editable install may print its rebuild log first.
        assert any(line.strip() == "ready" for line in process.stdout)
        time.sleep(1.0)
        process.send_signal(signal.SIGINT)
        output, _ = process.communicate(timeout=60)
    finally:
        process.kill()
    assert "interrupted" in output


def _kae_arguments(kind="kae"):
    (X, phis, kernels, operators, penalties), keywords = _kae_problem(kind, 3, "rbf", True)
    return dict(X=X, phis=phis, kernels=kernels, operators=operators, penalties=penalties, **keywords)


def _without_last(key):
    return lambda a: {key: a[key][:-1]}


KAE_BAD_ARGUMENTS = [
    (
        "phis",
        lambda a: {
            "phis": a["phis"][:1],
            "kernels": a["kernels"][:1],
            "operators": a["operators"][:1],
            "penalties": a["penalties"][:1],
        },
    ),
    ("phis", lambda a: {"phis": [a["phis"][0][:-1], *a["phis"][1:]]}),
    ("phis", lambda a: {"phis": [*a["phis"][:-1], np.ones((10, 3))], "operators": None}),
    ("phis", lambda a: {"phis": [np.full((10, 3), np.inf), *a["phis"][1:]]}),
    ("kernels", _without_last("kernels")),
    ("kernels", lambda a: {"kernels": [("cosine", 1.0, 3.0, 1.0), *a["kernels"][1:]]}),
    ("kernels", lambda a: {"kernels": [("rbf", 0.0, 3.0, 1.0), *a["kernels"][1:]]}),
    ("kernels", lambda a: {"kernels": [("poly", 1.0, 2.5, 1.0), *a["kernels"][1:]]}),
    ("operators", _without_last("operators")),
    ("operators", lambda a: {"operators": [np.eye(2), *a["operators"][1:]]}),
    ("operators", lambda a: {"operators": [np.triu(np.ones((3, 3))), *a["operators"][1:]]}),
    ("operators", lambda a: {"operators": [-np.eye(3), *a["operators"][1:]]}),
    ("penalties", _without_last("penalties")),
    ("penalties", lambda a: {"penalties": [0.1, -0.1, 0.1]}),
    ("penalties", lambda a: {"penalties": [0.1, np.nan, 0.1]}),
    ("X", lambda a: {"X": np.where(np.eye(10, 2) > 0, np.nan, a["X"])}),
    ("X", lambda a: {"X": a["X"][:1], "phis": [P[:1] for P in a["phis"]]}),
    ("method", lambda a: {"method": "newton"}),
    ("precomputed", lambda a: {"precomputed": "no"}),
    ("n_threads", lambda a: {"n_threads": 0}),
    ("output_gram", lambda a: {"output_gram": a["X"] @ a["X"].T}),  # without a precomputed first layer
    ("output_features", lambda a: {"output_features": a["X"]}),  # without a precomputed first layer
]

KAE_BAD_FEATURES = [
    lambda a: {"output_gram": a["output_features"] @ a["output_features"].T},  # both
    lambda a: {"output_features": a["output_features"][:-1]},
    lambda a: {"output_features": np.where(np.eye(10, 2) > 0, np.nan, a["output_features"])},
    lambda a: {"output_features": np.ones(10)},
]


@pytest.mark.parametrize("implementation", list(KAE_IMPLEMENTATIONS))
@pytest.mark.parametrize("change", KAE_BAD_FEATURES)
def test_kae_bad_output_features_name_the_argument(implementation, change):
    arguments = _kae_arguments("kae_ridge_features")
    with pytest.raises(ValueError, match="^output_features: "):
        KAE_IMPLEMENTATIONS[implementation](**(arguments | change(arguments)))


@pytest.mark.parametrize("implementation", list(KAE_IMPLEMENTATIONS))
@pytest.mark.parametrize("name, change", KAE_BAD_ARGUMENTS)
def test_kae_bad_arguments_name_the_argument(implementation, name, change):
    arguments = _kae_arguments()
    with pytest.raises(ValueError, match=f"^{name}: "):
        KAE_IMPLEMENTATIONS[implementation](**(arguments | change(arguments)))


KAE_BAD_GRAMS = {
    "not square": lambda K: K[:, :-1],
    "not symmetric": lambda K: K + np.triu(np.ones_like(K), 1),
    "too small": lambda K: K[:-1, :-1],
    "not finite": lambda K: np.where(np.eye(len(K)) > 0, np.inf, K),
}


@pytest.mark.parametrize("implementation", list(KAE_IMPLEMENTATIONS))
@pytest.mark.parametrize(
    "argument, bad",
    [
        (argument, bad)
        for argument in ("X", "output_gram")
        for bad in KAE_BAD_GRAMS
        if (argument, bad) != ("X", "too small")
    ],
)  # X sets the number of samples
def test_kae_bad_gram_matrices_name_the_argument(implementation, argument, bad):
    arguments = _kae_arguments("kae_ridge")
    with pytest.raises(ValueError, match=f"^{argument}: "):
        KAE_IMPLEMENTATIONS[implementation](**(arguments | {argument: KAE_BAD_GRAMS[bad](arguments[argument])}))
