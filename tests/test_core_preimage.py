"""The kernel-smoother pre-image of the compiled core (Gen-RKM eq. 8) against rkm.reference and rkm.preimage."""

import threading

import numpy as np
import pytest

import rkm.reference._blocks as reference_blocks
from rkm import _core, reference
from rkm.preimage import kernel_smoother


def _problem(rng, n, n_train, s, d, dtype=np.float64):
    latents = rng.normal(size=(n, s))
    projection = rng.normal(size=(n_train, s))
    offsets = rng.normal(size=n_train)
    X_train = rng.normal(size=(n_train, d))
    return tuple(A.astype(dtype) for A in (latents, projection, offsets, X_train))


def _tolerance(dtype, latents, projection, offsets, X_train, k):
    """How far each row of the core's result may be from the float64 reference's: shape (n, 1).

    The core forms the similarities in the working dtype (float64: to its rounding, through a float32 screen
    and float64 scores): each is off by at most about delta = (s + 2) eps |latent| . |projection row| + eps |offset|.
    The weights (sim - floor) / sum(top - floor) then move by at most 4 k delta / sum(top - floor) in all, and
    the pre-image by that times the largest |X_train| entry, plus the rounding of the mean itself.
    """
    latents, projection, offsets, X_train = (A.astype(np.float64) for A in (latents, projection, offsets, X_train))
    eps = np.finfo(dtype).eps
    n_train = X_train.shape[0]
    k = min(k, n_train)
    similarities = latents @ projection.T + offsets
    ordered = -np.sort(-similarities, axis=1)
    floor = ordered[:, k] if k < n_train else ordered[:, -1]
    mass = (ordered[:, :k] - floor[:, None]).sum(axis=1)
    delta = (latents.shape[1] + 2) * eps * (np.abs(latents) @ np.abs(projection).T).max(axis=1)
    delta += eps * np.abs(offsets).max()
    with np.errstate(divide="ignore", invalid="ignore"):
        weights = np.where(mass > 0, 4 * 4 * k * delta / mass, np.inf)
    return ((weights + 4 * k * eps) * np.abs(X_train).max())[:, None]


def _assert_within(got, expected, tolerance):
    excess = np.abs(got.astype(np.float64) - expected.astype(np.float64)) - tolerance
    assert not np.any(excess > 0), (
        f"{np.count_nonzero(excess > 0)} entries beyond the tolerance, by up to {excess.max()}"
    )


@pytest.mark.parametrize(
    "n,n_train,s,d",
    [(1, 1, 1, 1), (7, 5, 3, 2), (40, 300, 3, 6), (40, 300, 20, 6), (25, 150, 64, 1), (0, 10, 4, 2), (5, 8, 0, 3)],
)
@pytest.mark.parametrize("neighbors", [1, 4, 70, "N", "N+5"])
def test_smoother_preimage_matches_reference_and_kernel_smoother(rng, dtype, n, n_train, s, d, neighbors):
    # s >= 16 with fewer neighbours than training points takes the core's float32 screen in float64; the
    # others its direct path; 70 neighbours go through nth_element rather than insertion.
    k = {"N": n_train, "N+5": n_train + 5}.get(neighbors, neighbors)
    operands = _problem(rng, n, n_train, s, d, dtype)
    got = _core.smoother_preimage(*operands, k)
    assert got.dtype == dtype and got.shape == (n, d)
    expected = reference.smoother_preimage(*operands, k)
    assert expected.dtype == dtype and expected.shape == (n, d)
    if n:  # the oracle wants at least one point
        latents, projection, offsets, X_train = (A.astype(np.float64) for A in operands)
        oracle = kernel_smoother(latents @ projection.T + offsets, X_train, k)
        np.testing.assert_allclose(expected, oracle.astype(dtype), rtol=0, atol=1e-12 if dtype == np.float64 else 1e-6)
    _assert_within(got, expected, _tolerance(dtype, *operands, k))


@pytest.mark.parametrize("s", [4, 24])
def test_smoother_preimage_spans_several_bands_and_blocks(rng, dtype, s, monkeypatch):
    # N = 20000 training points: a band of the core holds at most 4 MiB of similarities, 26 to 38 rows here.
    n, n_train, k = 300, 20000, 4
    operands = _problem(rng, n, n_train, s, 3, dtype)
    screened = dtype == np.float64 and s >= 16
    band = _core.smoother_band_rows(n_train, 4 if screened or dtype == np.float32 else 8)
    assert n >= 5 * band
    got = _core.smoother_preimage(*operands, k, n_threads=2)
    expected = reference.smoother_preimage(*operands, k)
    _assert_within(got, expected, _tolerance(dtype, *operands, k))
    # The reference in blocks of 7 rows gives what it gives in one block of 300 (to BLAS's rounding).
    monkeypatch.setattr(reference_blocks, "BLOCK_BYTES", 8 * 7 * (s + 3 * n_train + 4 * 3))
    assert len(reference_blocks.row_blocks(n, 8 * (s + 3 * n_train + 4 * 3))) > 40
    np.testing.assert_allclose(reference.smoother_preimage(*operands, k), expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize("k", [3, 100, 400])
def test_smoother_preimage_does_not_depend_on_thread_count(rng, dtype, k):
    operands = _problem(rng, 700, 400, 32, 5, dtype)
    one = _core.smoother_preimage(*operands, k, n_threads=1)
    for threads in (2, 3, None, -1):
        np.testing.assert_array_equal(_core.smoother_preimage(*operands, k, n_threads=threads), one)


@pytest.mark.parametrize("k", [1, 3, 9, 40])
def test_equal_similarities_average_the_lowest_indices(rng, dtype, k):
    # projection 0: every similarity is its offset. All equal (spread 0): the plain mean of the first k training
    # points (ties go to the lower index), or of all of them.
    n_train, s = 9, 20
    latents = rng.normal(size=(6, s)).astype(dtype)
    projection = np.zeros((n_train, s), dtype)
    X_train = rng.normal(size=(n_train, 4)).astype(dtype)
    offsets = np.full(n_train, 0.5, dtype)
    expected = np.broadcast_to(X_train[: min(k, n_train)].astype(np.float64).mean(axis=0), (6, 4))
    for result in (
        _core.smoother_preimage(latents, projection, offsets, X_train, k),
        reference.smoother_preimage(latents, projection, offsets, X_train, k),
    ):
        np.testing.assert_allclose(result, expected, rtol=0, atol=8 * np.finfo(dtype).eps)
    if k >= n_train:
        oracle = kernel_smoother(np.full((6, n_train), 0.5), X_train.astype(np.float64), k)
        np.testing.assert_allclose(oracle, expected, rtol=0, atol=1e-15)
    # Ties straddling the k-th place: offsets 3, 1, 3, 2, 3, ... with k = 2 keep the first two 3s, the floor is
    # the third 3 (spread 0), so the pre-image is the mean of training points 0 and 2.
    offsets = np.array([3, 1, 3, 2, 3, 0, 1, 2, 0], dtype)
    for result in (
        _core.smoother_preimage(latents, projection, offsets, X_train, 2),
        reference.smoother_preimage(latents, projection, offsets, X_train, 2),
    ):
        np.testing.assert_allclose(result, np.broadcast_to(X_train[[0, 2]].mean(axis=0), (6, 4)), atol=1e-6)


def test_the_float32_screen_keeps_clustered_similarities_exact(rng):
    # Projection rows that differ by 1e-9 relative: the float32 screen cannot tell them apart, so every one is a
    # candidate and the float64 scores decide, as the reference's.
    n_train, s = 500, 40
    base = rng.normal(size=s)
    projection = base + 1e-9 * rng.normal(size=(n_train, s))
    latents = rng.normal(size=(30, s))
    offsets = 1e-9 * rng.normal(size=n_train)
    X_train = rng.normal(size=(n_train, 3))
    for k in (1, 4, 80):
        got = _core.smoother_preimage(latents, projection, offsets, X_train, k)
        expected = reference.smoother_preimage(latents, projection, offsets, X_train, k)
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-5)
        oracle = kernel_smoother(latents @ projection.T + offsets, X_train, k)
        np.testing.assert_allclose(expected, oracle, rtol=0, atol=1e-12)


@pytest.mark.parametrize("latent_scale,projection_scale,offset_scale", [(1e160, 1e-160, 1.0), (1e-130, 1e-130, 0.0)])
def test_the_float32_screen_handles_extreme_scales(rng, latent_scale, projection_scale, offset_scale):
    # Factors far outside float32's range: the screen scales them by powers of two (norms of 1e160 would overflow
    # their squares), so the float64 result is the reference's, relative to the similarities' spread.
    latents, projection, offsets, X_train = _problem(rng, 40, 300, 24, 3)
    latents, projection, offsets = latents * latent_scale, projection * projection_scale, offsets * offset_scale
    for k in (1, 4, 100):
        got = _core.smoother_preimage(latents, projection, offsets, X_train, k)
        expected = reference.smoother_preimage(latents, projection, offsets, X_train, k)
        _assert_within(got, expected, _tolerance(np.float64, latents, projection, offsets, X_train, k))


def _bad_inputs(rng, dtype):
    latents, projection, offsets, X_train = _problem(rng, 6, 10, 3, 2, dtype)

    def poisoned(A, value):
        A = A.copy()
        A.flat[1] = value
        return A

    huge = np.float32(1e20) if dtype == np.float32 else 1e160
    return [
        ((latents, projection[:, :2], offsets, X_train, 4), "projection: has 2 columns but latents has 3"),
        ((latents, projection[:0], offsets[:0], X_train[:0], 4), "projection: needs at least one row"),
        ((latents, projection, offsets[:9], X_train, 4), "offsets: has 9 entries but projection has 10 rows"),
        ((latents, projection, offsets, X_train[:9], 4), "X_train: has 9 rows but projection has 10"),
        ((latents, projection, offsets, X_train[:, :0], 4), r"X_train: needs at least one column"),
        ((latents, projection, offsets, X_train, 0), "n_neighbors: must be at least 1, got 0"),
        ((latents, projection, offsets, X_train, -3), "n_neighbors: must be at least 1, got -3"),
        ((poisoned(latents, np.nan), projection, offsets, X_train, 4), "latents: contains NaN or infinity"),
        ((latents, poisoned(projection, np.inf), offsets, X_train, 4), "projection: contains NaN or infinity"),
        ((latents, projection, poisoned(offsets, -np.inf), X_train, 4), "offsets: contains NaN or infinity"),
        ((latents, projection, offsets, poisoned(X_train, np.nan), 4), "X_train: contains NaN or infinity"),
        ((latents * huge, projection * huge, offsets, X_train, 4), "latents: the similarities .* overflow"),
    ]


@pytest.mark.parametrize("case", range(12))
def test_bad_inputs_are_rejected_with_the_same_message(rng, dtype, case):
    arguments, match = _bad_inputs(rng, dtype)[case]
    arguments = tuple(np.ascontiguousarray(A) if isinstance(A, np.ndarray) else A for A in arguments)
    with pytest.raises(ValueError, match=match):
        _core.smoother_preimage(*arguments)
    with pytest.raises(ValueError, match=match):
        reference.smoother_preimage(*arguments)


@pytest.mark.parametrize("s", [3, 24])
def test_a_spread_beyond_float64_is_rejected_on_both_paths(rng, s):
    # Finite similarities whose spread max - floor passes float64's range: the direct path (s = 3) and the float32
    # screen (s = 24) both refuse them.
    latents, projection, _, X_train = _problem(rng, 5, 30, s, 2)
    largest = np.finfo(np.float64).max
    offsets = np.full(30, -largest)
    offsets[:2] = largest
    for decode in (_core.smoother_preimage, reference.smoother_preimage):
        with pytest.raises(ValueError, match="latents: the similarities .* overflow float64"):
            decode(latents, projection, offsets, X_train, 4)


def test_n_threads_zero_and_mixed_dtypes_are_rejected(rng):
    operands = _problem(rng, 4, 6, 2, 2)
    with pytest.raises(ValueError, match="n_threads"):
        _core.smoother_preimage(*operands, 2, n_threads=0)
    with pytest.raises(ValueError, match="n_threads"):
        reference.smoother_preimage(*operands, 2, n_threads=0)
    with pytest.raises(TypeError):
        _core.smoother_preimage(operands[0].astype(np.float32), *operands[1:], 2)
    assert reference.smoother_preimage(operands[0].astype(np.float32), *operands[1:], 2).dtype == np.float64


def test_two_python_threads_decode_concurrently(rng):
    operands = _problem(rng, 400, 3000, 32, 8)
    expected = _core.smoother_preimage(*operands, 4, n_threads=1)
    results = [None, None]

    def work(slot):
        results[slot] = _core.smoother_preimage(*operands, 4, n_threads=1)

    workers = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    for result in results:
        np.testing.assert_array_equal(result, expected)


def test_a_result_too_large_to_allocate_is_a_memory_error():
    # 10^9 latents of dimension 0 cost nothing; their 10^9 x 2000 float64 pre-images (16 TB) cannot be allocated.
    latents = np.empty((10**9, 0))
    with pytest.raises(MemoryError, match="out of memory while decoding 1000000000 latents"):
        _core.smoother_preimage(latents, np.empty((1, 0)), np.zeros(1), np.zeros((1, 2000)), 1)


@pytest.mark.slow
def test_ctrl_c_interrupts_a_long_decode_between_bands():
    # 100 000 latents over N = 5000 training points (s = 500): tens of seconds in one call, bounded memory (a band of
    # similarities per thread); Ctrl-C is honoured between bands.
    from test_core_runtime import _interrupt_after_ready

    body = (
        "rng = np.random.default_rng(0)\n"
        "latents, projection = rng.normal(size=(100_000, 500)), rng.normal(size=(5000, 500))\n"
        "offsets, X_train = rng.normal(size=5000), rng.random((5000, 16))\n"
        "def run(): _core.smoother_preimage(latents, projection, offsets, X_train, 4, 2)"
    )
    assert "interrupted" in _interrupt_after_ready(body)
