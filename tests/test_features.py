"""rkm.features (Nyström and random Fourier features) and the primal kernel PCA helpers of rkm._utils.primal."""

import itertools
import re

import numpy as np
import pytest
from sklearn.kernel_approximation import Nystroem as SklearnNystroem
from sklearn.kernel_approximation import RBFSampler

from rkm import KernelPCA, features
from rkm._utils import primal
from rkm._utils.primal import FeatureMoments, feature_moments, hidden_features, primal_components
from rkm._utils.threads import blas_threads
from rkm.features import Nystroem, RandomFourierFeatures, renyi_entropy
from rkm.kernels import RBF, Polynomial, kernel_matrix, names_with


def _data(n=300, d=16, seed=1):
    return np.random.default_rng(seed).standard_normal((n, d))


def _relative_error(Phi, K):
    """||Phi Phi^T - K||_F / ||K||_F."""
    return np.linalg.norm(Phi @ Phi.T - K) / np.linalg.norm(K)


# ---------------------------------------------------------------------- Nyström approximation


@pytest.mark.parametrize("kernel", ["rbf", "laplacian", "poly", "cosine"])
def test_nystroem_with_every_sample_as_landmark_is_exact(kernel):
    X = _data(120, 4)
    gamma = 0.05 if kernel == "poly" else 0.3
    K = kernel_matrix(X, None, kernel, gamma)
    Phi = Nystroem(120, kernel=kernel, gamma=gamma, random_state=0).fit_transform(X)
    # Only eigenvalues below m eps w_max are dropped, which moves K by about that much.
    assert np.abs(Phi @ Phi.T - K).max() <= 1e-10 * np.abs(K).max()


@pytest.mark.parametrize("method", ["kmeans++", "renyi"])
def test_landmark_selection_with_every_sample_is_exact(method):
    X = _data(60, 3)
    model = Nystroem(60, gamma=0.3, landmarks=method, random_state=0).fit(X)
    np.testing.assert_array_equal(model.component_indices_, np.arange(60))
    Phi = model.transform(X)
    assert np.abs(Phi @ Phi.T - kernel_matrix(X, None, "rbf", 0.3)).max() <= 1e-10


@pytest.mark.parametrize("method", features.LANDMARK_METHODS)
def test_duplicated_rows_give_a_lower_rank_exact_map(method):
    # 3 distinct rows, each 4 times: 5 landmarks hold at most 3 distinct points, and the features keep the
    # rank of their kernel matrix.
    X = np.repeat(_data(3, 2), 4, axis=0)
    model = Nystroem(5, gamma=0.5, landmarks=method, random_state=0).fit(X)
    assert len(set(model.component_indices_)) == 5
    assert model.n_components_ == len({tuple(row) for row in model.components_}) == 3
    Phi = model.transform(X)
    np.testing.assert_allclose(Phi @ Phi.T, kernel_matrix(X, None, "rbf", 0.5), atol=1e-10)


def test_nystroem_is_exact_on_the_landmarks():
    X = _data()
    model = Nystroem(30, gamma=0.1, random_state=0).fit(X)
    Phi = model.transform(model.components_)
    np.testing.assert_allclose(Phi @ Phi.T, kernel_matrix(model.components_, None, "rbf", 0.1), atol=1e-12)


def test_nystroem_error_decreases_with_the_number_of_landmarks():
    X = _data()
    K = kernel_matrix(X, None, "rbf", 1 / 16)
    errors = [_relative_error(Nystroem(m, random_state=0).fit_transform(X), K) for m in (10, 40, 160, 300)]
    assert errors[0] > errors[1] > errors[2] > errors[3]
    assert errors[3] < 1e-12


def test_nystroem_drops_the_null_space_of_a_low_rank_kernel():
    # A linear kernel of 5 features has rank 5: only 5 features remain, and they reproduce X X^T.
    X = _data(60, 5)
    model = Nystroem(20, kernel="linear", random_state=0).fit(X)
    assert model.n_components_ == 5
    assert model.normalization_.shape == (20, 5)
    assert model.landmark_eigenvalues_.shape == (5,)
    assert np.all(np.diff(model.landmark_eigenvalues_) <= 0)
    Phi = model.transform(X)
    assert Phi.shape == (60, 5)
    np.testing.assert_allclose(Phi @ Phi.T, X @ X.T, atol=1e-10 * np.abs(X @ X.T).max())
    assert list(model.get_feature_names_out()) == [f"nystroem{i}" for i in range(5)]


def test_nystroem_landmarks_are_sorted_distinct_training_rows():
    X = _data()
    for method in features.LANDMARK_METHODS:
        model = Nystroem(25, landmarks=method, random_state=3).fit(X)
        indices = model.component_indices_
        assert indices.shape == (25,)
        assert np.all(np.diff(indices) > 0)
        np.testing.assert_array_equal(model.components_, X[indices])


def test_nystroem_accepts_a_kernel_object():
    X = _data()
    by_name = Nystroem(20, kernel="rbf", gamma=0.3, random_state=0).fit(X)
    by_object = Nystroem(20, kernel=RBF(gamma=0.3), random_state=0).fit(X)
    assert by_object.gamma_ == 0.3
    np.testing.assert_array_equal(by_name.transform(X), by_object.transform(X))


@pytest.mark.parametrize("m", [40, 160])
def test_nystroem_matches_scikit_learn_accuracy(m):
    # Uniform landmarks at the same rank: on average over seeds no worse than scikit-learn's Nystroem
    # (measured: within 1 % at m = 40; m = 160 draws the same permutation, hence the same landmarks).
    X = _data()
    K = kernel_matrix(X, None, "rbf", 1 / 16)
    ours = [_relative_error(Nystroem(m, random_state=s).fit_transform(X), K) for s in range(5)]
    # One BLAS thread: on a busy machine OpenBLAS's threaded SVD of a 160 x 160 matrix took a second.
    with blas_threads(1):
        theirs = [
            _relative_error(SklearnNystroem(n_components=m, random_state=s).fit_transform(X), K) for s in range(5)
        ]
    assert np.mean(ours) <= 1.05 * np.mean(theirs)


# ---------------------------------------------------------------------- landmark selection


def _clustered_data():
    """One tight cluster of 400 points and four far clusters of 10: uniform landmarks miss the small ones."""
    rng = np.random.default_rng(7)
    centres = np.array([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0], [-10.0, 0.0], [0.0, -10.0]])
    sizes = [400, 10, 10, 10, 10]
    X = np.vstack([centre + 0.1 * rng.standard_normal((size, 2)) for centre, size in zip(centres, sizes)])
    labels = np.repeat(np.arange(5), sizes)
    return X, labels


def test_kmeans_plus_plus_landmarks_cover_every_cluster():
    X, labels = _clustered_data()
    K = kernel_matrix(X, None, "rbf", 1.0)
    spread = Nystroem(8, gamma=1.0, landmarks="kmeans++", random_state=0).fit(X)
    assert set(labels[spread.component_indices_]) == set(range(5))
    uniform = Nystroem(8, gamma=1.0, landmarks="uniform", random_state=0).fit(X)
    assert len(set(labels[uniform.component_indices_])) < 5
    assert _relative_error(spread.transform(X), K) < 0.5 * _relative_error(uniform.transform(X), K)


def test_renyi_landmarks_have_higher_entropy_than_uniform_ones():
    X = _data(600, 4)

    def entropy(model):
        return renyi_entropy(kernel_matrix(model.components_, None, "rbf", 0.25))

    renyi = entropy(Nystroem(20, landmarks="renyi", random_state=0).fit(X))
    uniform = [entropy(Nystroem(20, landmarks="uniform", random_state=seed).fit(X)) for seed in range(5)]
    assert renyi > max(uniform) + 0.1


def _numpy_rbf(A, B=None):
    B = A if B is None else B
    return np.exp(-0.5 * ((A[:, None, :] - B[None, :, :]) ** 2).sum(axis=2))


def test_kmeans_plus_plus_draws_landmark_sets_with_the_exact_sequential_probabilities():
    # The batched rejection sampling must reproduce sequential k-means++: P(set) summed over the orders
    # in which sequential D^2 sampling draws it, against 3000 seeded draws (chi-square, 9 degrees of freedom;
    # 27.9 is its 99.9 % quantile).
    X = np.array([[0.0], [0.3], [1.0], [1.2], [3.0]])
    D2 = 2.0 - 2.0 * _numpy_rbf(X)
    exact = {}
    for order in itertools.permutations(range(5), 3):
        probability = 1 / 5
        for k in (1, 2):
            distances = D2[:, list(order[:k])].min(axis=1)
            probability *= distances[order[k]] / distances.sum()
        exact[frozenset(order)] = exact.get(frozenset(order), 0.0) + probability
    draws = 3000
    counts = dict.fromkeys(exact, 0)
    for seed in range(draws):
        counts[frozenset(features._kmeans_plus_plus(X, 3, _numpy_rbf, np.random.RandomState(seed)).tolist())] += 1
    chi2 = sum((counts[key] - draws * p) ** 2 / (draws * p) for key, p in exact.items())
    assert chi2 < 27.9


def test_renyi_swaps_match_a_recomputed_entropy():
    # The incremental bookkeeping (row sums, batch kernel rows, swapped-in members) against recomputing
    # 1^T K_LL 1 from scratch for every trial, with the same random draws.
    X = _data(40, 3, seed=2)
    m, n_trials = 6, 300

    def reference(rng):
        members = rng.permutation(X.shape[0])
        members, outside = members[:m].copy(), members[m:].copy()
        done = 0
        while done < n_trials:
            batch = min(features._RENYI_BATCH, n_trials - done, outside.size)
            slots = rng.choice(outside.size, batch, replace=False)
            positions = rng.randint(m, size=batch)
            candidates = outside[slots]
            for t in range(batch):
                trial = members.copy()
                trial[positions[t]] = candidates[t]
                if _numpy_rbf(X[trial]).sum() < _numpy_rbf(X[members]).sum():
                    outside[slots[t]], members[positions[t]] = members[positions[t]], candidates[t]
            done += batch
        return members

    chosen = features._renyi_working_set(X, m, _numpy_rbf, np.random.RandomState(0), n_trials)
    expected = reference(np.random.RandomState(0))
    np.testing.assert_array_equal(chosen, expected)
    assert renyi_entropy(_numpy_rbf(X[chosen])) > renyi_entropy(_numpy_rbf(X[:m])) + 0.5


def test_renyi_entropy_of_identical_points_is_zero_and_grows_with_spread():
    assert renyi_entropy(np.ones((4, 4))) == 0.0
    assert renyi_entropy(np.eye(4)) == pytest.approx(np.log(4))


def test_landmark_selection_is_limited_to_the_candidate_pool():
    n = 2 * features.MIN_POOL
    model = Nystroem(10, landmarks="kmeans++", random_state=0)
    pool = model._sample_indices(n)
    assert pool.shape == (features.MIN_POOL,)
    assert np.all(np.diff(pool) > 0) and pool[-1] < n


# ---------------------------------------------------------------------- random Fourier features


@pytest.mark.parametrize("kernel", names_with("fourier_features"))
def test_fourier_error_shrinks_as_one_over_sqrt_of_the_number_of_features(kernel):
    # Each entry of Phi Phi^T averages D terms of variance at most 1, so ||Phi Phi^T - K||_F is about
    # n / sqrt(D) (measured 0.86 to 1.09 times it here); allow a factor 2.
    X = _data()
    K = kernel_matrix(X, None, kernel, 1 / 16)
    errors = {}
    for D in (100, 400, 1600):
        Phi = RandomFourierFeatures(D, kernel=kernel, random_state=0).fit_transform(X)
        errors[D] = np.linalg.norm(Phi @ Phi.T - K)
        assert errors[D] <= 2 * X.shape[0] / np.sqrt(D)
    assert 2.5 <= errors[100] / errors[1600] <= 6.5


def test_orthogonal_features_have_lower_error_than_plain_ones():
    # Measured over 8 seeds: lower for 7 or 8 of them at every D, by 8 to 10 % on average.
    X = _data()
    K = kernel_matrix(X, None, "rbf", 1 / 16)
    for D in (64, 256):
        plain = [_relative_error(RandomFourierFeatures(D, random_state=s).fit_transform(X), K) for s in range(4)]
        orthogonal = [
            _relative_error(RandomFourierFeatures(D, orthogonal=True, random_state=s).fit_transform(X), K)
            for s in range(4)
        ]
        assert np.mean(orthogonal) < 0.97 * np.mean(plain)


def test_orthogonal_weights_are_orthogonal_within_blocks_of_d():
    d, D = 8, 20
    W = RandomFourierFeatures(D, gamma=0.5, orthogonal=True, random_state=0).fit(_data(10, d)).random_weights_
    assert W.shape == (d, D)
    for start in range(0, D, d):
        block = W[:, start : start + d]
        gram = block.T @ block
        np.testing.assert_allclose(gram - np.diag(np.diag(gram)), 0, atol=1e-12)


def test_fourier_features_match_the_formula_and_scikit_learn():
    # rkm draws W and b as RBFSampler does (normal weights, then uniform offsets): identical features.
    X = _data()
    model = RandomFourierFeatures(50, gamma=0.2, random_state=4).fit(X)
    expected = np.sqrt(2 / 50) * np.cos(X @ model.random_weights_ + model.random_offset_)
    np.testing.assert_allclose(model.transform(X), expected, atol=1e-12)
    sklearn = RBFSampler(gamma=0.2, n_components=50, random_state=4).fit(X)
    np.testing.assert_allclose(model.transform(X), sklearn.transform(X), atol=1e-12)


def test_fourier_accuracy_matches_scikit_learn_on_other_seeds():
    X = _data()
    K = kernel_matrix(X, None, "rbf", 1 / 16)
    ours = [_relative_error(RandomFourierFeatures(128, random_state=s).fit_transform(X), K) for s in range(4)]
    theirs = [
        _relative_error(RBFSampler(gamma=1 / 16, n_components=128, random_state=s + 10).fit_transform(X), K)
        for s in range(4)
    ]
    assert np.mean(ours) <= 1.15 * np.mean(theirs)


# ---------------------------------------------------------------------- shared behaviour


FEATURE_MAPS = [
    Nystroem(20, random_state=0),
    Nystroem(20, landmarks="kmeans++", random_state=0),
    Nystroem(20, landmarks="renyi", random_state=0),
    RandomFourierFeatures(30, random_state=0),
    RandomFourierFeatures(30, orthogonal=True, random_state=0),
    RandomFourierFeatures(30, kernel="laplacian", random_state=0),
]
IDS = ["uniform", "kmeans++", "renyi", "rff", "orf", "rff-laplacian"]


@pytest.mark.parametrize("model", FEATURE_MAPS, ids=IDS)
def test_float32_in_float32_out(model):
    X = _data()
    Phi64 = model.fit(X).transform(X)
    model32 = model.__class__(**model.get_params()).fit(X.astype(np.float32))
    Phi32 = model32.transform(X.astype(np.float32))
    assert Phi32.dtype == np.float32
    # Landmarks and weights are drawn from the same random state: the same model up to float32 rounding.
    np.testing.assert_allclose(Phi32, Phi64, atol=2e-3 * np.abs(Phi64).max())
    assert model32.transform(X).dtype == np.float64


@pytest.mark.parametrize("model", FEATURE_MAPS, ids=IDS)
def test_random_state_makes_fits_reproducible(model):
    X = _data()
    first = model.fit(X).transform(X)
    np.testing.assert_array_equal(model.fit(X).transform(X), first)
    clone = model.__class__(**{**model.get_params(), "random_state": np.random.RandomState(0)})
    other = model.__class__(**{**model.get_params(), "random_state": 1}).fit(X).transform(X)
    assert other.shape != first.shape or not np.allclose(other, first)
    np.testing.assert_array_equal(clone.fit(X).transform(X), first)


@pytest.mark.parametrize("model", FEATURE_MAPS, ids=IDS)
def test_fit_from_the_sampled_rows_alone_equals_fit(model):
    # The protocol distributed fits use: draw the indices, gather only those rows, fit from them.
    X = _data()
    expected = model.fit(X).transform(X)
    indices = model._sample_indices(X.shape[0])
    model._fit_sample(X[indices].copy(), X.shape[0], X.shape[1])
    np.testing.assert_array_equal(model.transform(X), expected)


def test_fit_sample_without_sample_indices_raises():
    with pytest.raises(ValueError, match=r"^X_sample: call _sample_indices\(100\) first"):
        Nystroem(5)._fit_sample(_data(5, 3), 100, 3)
    model = Nystroem(5, random_state=0)
    indices = model._sample_indices(100)
    with pytest.raises(ValueError, match=r"^X_sample: must have shape \(5, 3\)"):
        model._fit_sample(_data(5, 4), 100, 3)
    assert indices.shape == (5,)


@pytest.mark.parametrize(
    "model", [Nystroem(20, random_state=0), RandomFourierFeatures(30, random_state=0)], ids=["nystroem", "rff"]
)
def test_transform_in_small_blocks_equals_one_block(model, monkeypatch):
    X = _data()
    whole = model.fit(X).transform(X)
    monkeypatch.setattr(features, "TRANSFORM_BLOCK_BYTES", 7 * 8 * 50)
    np.testing.assert_allclose(model.transform(X), whole, rtol=1e-13, atol=1e-13)


# ---------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "model, message",
    [
        (Nystroem(0), "The 'n_components' parameter of Nystroem must be an int in the range [1, inf). Got 0"),
        (Nystroem(2.5), "The 'n_components' parameter of Nystroem must be an int in the range [1, inf). Got 2.5"),
        (Nystroem(True), "The 'n_components' parameter of Nystroem must be an int in the range [1, inf). Got True"),
        (Nystroem(11), "n_components: 11 landmarks need at least as many samples, got n_samples = 10"),
        (Nystroem(3, landmarks="random"), "The 'landmarks' parameter of Nystroem must be a str among"),
        (Nystroem(3, kernel="sigmoid"), "The 'kernel' parameter of Nystroem must be a str among"),
        (Nystroem(3, kernel="precomputed"), "The 'kernel' parameter of Nystroem must be a str among"),
        (Nystroem(3, gamma=-1.0), "gamma: must be a positive finite number"),
        (Nystroem(3, kernel="poly", degree=-1), "The 'degree' parameter of Nystroem must be a float in the range [0"),
        (Nystroem(3, n_threads=0), "The 'n_threads' parameter of Nystroem must be None"),
        (Nystroem(3, random_state="seed"), "The 'random_state' parameter of Nystroem"),
        (RandomFourierFeatures(-3), "The 'n_components' parameter of RandomFourierFeatures must be an int in"),
        (RandomFourierFeatures(3, kernel="poly"), "The 'kernel' parameter of RandomFourierFeatures must be a str"),
        (RandomFourierFeatures(3, kernel=Polynomial()), "kernel: must be one of rbf, laplacian"),
        (RandomFourierFeatures(3, kernel="laplacian", orthogonal=True), "orthogonal: orthogonal random features"),
        (RandomFourierFeatures(3, orthogonal="yes"), "The 'orthogonal' parameter of RandomFourierFeatures must be"),
        (RandomFourierFeatures(3, gamma=np.inf), "The 'gamma' parameter of RandomFourierFeatures must be None or"),
        (RandomFourierFeatures(3, gamma=1e300), "gamma: 1e+300 makes the random weights overflow float32"),
    ],
)
def test_bad_parameters_raise_naming_the_argument(model, message):
    X = _data(10, 3).astype(np.float32)
    with pytest.raises(ValueError, match="^" + re.escape(message)):
        model.fit(X)


@pytest.mark.parametrize(
    "model", [Nystroem(3, random_state=0), RandomFourierFeatures(3, random_state=0)], ids=["nystroem", "rff"]
)
def test_bad_data_raises(model):
    X = _data(10, 3)
    with pytest.raises(ValueError, match="NaN"):
        model.fit(np.where(X > 1, np.nan, X))
    model.fit(X)
    with pytest.raises(ValueError, match="3 features"):
        model.transform(_data(4, 2))
    with pytest.raises(ValueError, match="infinity"):
        model.transform(np.full((2, 3), np.inf))


def test_a_zero_kernel_raises():
    with pytest.raises(ValueError, match="^X: the kernel matrix of the landmarks has no positive eigenvalue"):
        Nystroem(3, kernel="linear", random_state=0).fit(np.zeros((5, 2)))


# ---------------------------------------------------------------------- primal kernel PCA


def test_combined_moments_equal_one_shot_moments_for_any_split():
    rng = np.random.default_rng(5)
    # A large common offset: the pairwise update must not lose the centred scatter to cancellation.
    Phi = 100.0 + rng.standard_normal((500, 12)) * rng.uniform(0.1, 3.0, 12)
    whole = FeatureMoments.from_block(Phi)
    for _ in range(5):
        cuts = np.sort(rng.choice(np.arange(1, 500), size=rng.integers(1, 8), replace=False))
        parts = [FeatureMoments.from_block(part) for part in np.split(Phi, cuts)]
        sequential = parts[0]
        for part in parts[1:]:
            sequential = sequential.combine(part)
        while len(parts) > 1:  # a binary tree, as a distributed reduction would run it
            parts = [a.combine(b) for a, b in zip(parts[::2], parts[1::2])] + parts[len(parts) // 2 * 2 :]
        for merged in (sequential, parts[0]):
            assert merged.n == 500
            np.testing.assert_allclose(merged.mean, whole.mean, rtol=1e-12)
            assert np.abs(merged.scatter - whole.scatter).max() <= 1e-12 * np.abs(whole.scatter).max()
    centred = Phi - Phi.mean(axis=0)
    np.testing.assert_allclose(whole.scatter, centred.T @ centred, rtol=1e-12)


def test_empty_moments_are_neutral():
    Phi = _data(7, 3)
    empty = FeatureMoments.from_block(np.empty((0, 3)))
    full = FeatureMoments.from_block(Phi)
    for merged in (empty.combine(full), full.combine(empty)):
        np.testing.assert_array_equal(merged.scatter, full.scatter)
    with pytest.raises(ValueError, match="^other: has 4 features, expected 3"):
        full.combine(FeatureMoments.from_block(_data(2, 4)))


@pytest.mark.parametrize(
    "model", [Nystroem(40, random_state=0), RandomFourierFeatures(50, random_state=0)], ids=["nystroem", "rff"]
)
def test_primal_eigenpairs_are_those_of_the_centred_approximate_kernel(model):
    X = _data()
    model.fit(X)
    moments = feature_moments(model, X, block_rows=64)
    eigenvalues, U = primal_components(moments, 10)
    Phi = model.transform(X)
    centred = Phi - Phi.mean(axis=0)
    dual = np.linalg.eigvalsh(centred @ centred.T)[::-1][:10]
    np.testing.assert_allclose(eigenvalues, dual, rtol=1e-10)
    np.testing.assert_allclose(U.T @ U, np.eye(10), atol=1e-12)
    assert np.all(U[np.argmax(np.abs(U), axis=0), np.arange(10)] > 0)
    H = hidden_features(model, X, moments.mean, U, eigenvalues, block_rows=50)
    np.testing.assert_allclose(H.T @ H, np.eye(10), atol=1e-10)
    # The hidden features are the eigenvectors of the centred approximate kernel matrix.
    np.testing.assert_allclose(centred @ centred.T @ H, H * eigenvalues, atol=1e-9 * eigenvalues[0])


def test_moments_do_not_depend_on_the_blocks():
    X = _data()
    model = RandomFourierFeatures(40, random_state=0).fit(X)
    one = feature_moments(model, X)
    blocks = feature_moments(model, X, block_rows=7)
    assert blocks.n == one.n == X.shape[0]
    np.testing.assert_allclose(blocks.scatter, one.scatter, rtol=1e-12, atol=1e-12 * np.abs(one.scatter).max())


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_the_kept_raw_features_give_the_hidden_features_of_a_second_pass(dtype, monkeypatch):
    X = _data().astype(dtype)
    model = Nystroem(60, gamma=0.2, random_state=0).fit(X)
    moments, raw = primal.feature_moments_and_raw(model, X)
    expected = feature_moments(model, X)
    np.testing.assert_array_equal(moments.scatter, expected.scatter)
    eigenvalues, U = primal_components(moments, 5)
    kept = hidden_features(model, X, moments.mean, U, eigenvalues, raw=raw)
    again = hidden_features(model, X, moments.mean, U, eigenvalues)
    assert kept.dtype == again.dtype == dtype
    np.testing.assert_allclose(kept, again, rtol=0, atol=(1e-12 if dtype == np.float64 else 1e-5) * np.abs(again).max())
    # X over several blocks: nothing is kept (each block is freed once summed).
    monkeypatch.setattr(primal, "BLOCK_BYTES", 8 * 60 * 50)
    assert primal.feature_moments_and_raw(model, X)[1] is None


def test_primal_with_every_landmark_equals_exact_kernel_pca():
    X = _data(150, 5)
    model = Nystroem(150, gamma=0.2, random_state=0).fit(X)
    moments = feature_moments(model, X)
    eigenvalues, U = primal_components(moments, 6)
    H = hidden_features(model, X, moments.mean, U, eigenvalues)
    exact = KernelPCA(6, gamma=0.2, solver="dense").fit(X)
    np.testing.assert_allclose(eigenvalues, exact.eigenvalues_, rtol=1e-9)
    np.testing.assert_allclose(np.abs(H.T @ exact.H_), np.eye(6), atol=1e-8)


def test_primal_zeroes_rounding_eigenvalues_and_their_hidden_features():
    # 3 features but rank 2 after centring (the third is a combination of the others plus a constant).
    rng = np.random.default_rng(0)
    Z = rng.standard_normal((50, 2))
    Phi = np.column_stack([Z, Z @ [1.0, -2.0] + 3.0])
    eigenvalues, U = primal_components(FeatureMoments.from_block(Phi))
    assert eigenvalues.shape == (3,) and eigenvalues[2] == 0.0 and eigenvalues[1] > 0


def test_float32_primal_pipeline():
    X = _data().astype(np.float32)
    model = Nystroem(30, random_state=0).fit(X)
    moments = feature_moments(model, X)
    assert moments.scatter.dtype == np.float64
    eigenvalues, U = primal_components(moments, 5)
    H = hidden_features(model, X, moments.mean, U, eigenvalues)
    assert H.dtype == np.float32
    np.testing.assert_allclose(H.T @ H, np.eye(5), atol=1e-4)


def test_primal_bad_input():
    X = _data()
    model = Nystroem(10, random_state=0).fit(X)
    moments = feature_moments(model, X)
    for bad in (0, 11, 2.0):
        with pytest.raises(ValueError, match="^n_components: must be between 1 and the number of features 10"):
            primal_components(moments, bad)
    with pytest.raises(ValueError, match="^block_rows: must be a positive int or None"):
        feature_moments(model, X, block_rows=0)
    eigenvalues, U = primal_components(moments, 3)
    with pytest.raises(ValueError, match=r"^mean: must have shape \(10,\)"):
        hidden_features(model, X, moments.mean[:5], U, eigenvalues)
    with pytest.raises(ValueError, match=r"^U: must have shape \(10, s\)"):
        hidden_features(model, X, moments.mean, U[:5], eigenvalues)
    with pytest.raises(ValueError, match=r"^eigenvalues: must have shape \(3,\)"):
        hidden_features(model, X, moments.mean, U, eigenvalues[:2])


# ---------------------------------------------------------------------- warnings and copies


def test_indefinite_landmark_kernel_warns_at_the_callers_line():
    from rkm.exceptions import PositiveSpectrumWarning

    X = np.random.default_rng(0).normal(size=(100, 3))
    with pytest.warns(PositiveSpectrumWarning, match="Nystroem: the landmarks' kernel matrix has negative") as record:
        Nystroem(20, kernel="poly", degree=3, coef0=-1.0, gamma=1.0, random_state=0).fit(X)
    assert {w.filename for w in record if w.category is PositiveSpectrumWarning} == {__file__}


@pytest.mark.parametrize("landmarks", ["uniform", "kmeans++", "renyi"])
def test_nystroem_landmarks_are_copies_of_the_training_rows(landmarks):
    X = _data(200, 4)
    model = Nystroem(10, gamma=0.3, landmarks=landmarks, random_state=0).fit(X)
    X_new = _data(20, 4, seed=5)
    before = model.transform(X_new)
    assert not np.shares_memory(model.components_, X)
    X[:] = 0.0
    np.testing.assert_array_equal(model.transform(X_new), before)


@pytest.mark.parametrize(
    "K, match",
    [
        (np.ones((3, 2)), "square"),
        (np.array([[1.0, np.nan], [np.nan, 1.0]]), "K"),
        (np.zeros((3, 3)), "positive"),
        (np.ones(3), "K"),
    ],
)
def test_renyi_entropy_refuses_what_is_not_a_kernel_matrix(K, match):
    with pytest.raises(ValueError, match=match):
        renyi_entropy(K)
