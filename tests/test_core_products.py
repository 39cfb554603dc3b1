"""Dense block products of the compiled core (block_product, transposed_product) against rkm.reference."""

import numpy as np
import pytest

from rkm import _core, reference


@pytest.mark.parametrize("n,m,b", [(1, 1, 1), (5, 7, 3), (13, 2000, 17), (600, 1500, 48), (64, 64, 49), (7, 3, 100)])
def test_block_product_matches_reference(rng, dtype, isa, n, m, b):
    # Covers the streaming kernel's partial tiles and panels, and the BLAS path for wide blocks.
    A, X = rng.normal(size=(n, m)).astype(dtype), rng.normal(size=(m, b)).astype(dtype)
    atol = (1e-11 if dtype == np.float64 else 2e-4) * np.sqrt(m)
    np.testing.assert_allclose(_core.block_product(A, X), reference.block_product(A, X), rtol=1e-5, atol=atol)
    assert _core.config()["simd_isa"] in ("avx512", "avx2", "baseline")


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize(
    "n,b", [(1, 1), (3, 2), (7, 9), (1030, 8), (2051, 17), (300, 40), (1029, 4), (1031, 16), (13, 8)]
)
def test_symmetric_block_product_reads_the_lower_triangle(rng, dtype, isa, threads, n, b):
    # Tiles, the diagonal blocks, the rows after the last tile and the split between threads; the upper
    # triangle holds garbage that must not be read. Blocks of 4, 8 and 16 columns take AVX-512's 8-row tiles
    # in one of the dtypes, where the CPU has it.
    L = np.tril(rng.normal(size=(n, n)))
    A = (L + np.tril(L, -1).T).astype(dtype)
    garbage = A.copy()
    garbage[np.triu_indices(n, 1)] = np.nan
    X = rng.normal(size=(n, b)).astype(dtype)
    atol = (1e-11 if dtype == np.float64 else 2e-4) * np.sqrt(n)
    got = _core.block_product(garbage, X, threads, symmetric=True)
    np.testing.assert_allclose(got, reference.block_product(garbage, X, symmetric=True), rtol=1e-5, atol=atol)
    np.testing.assert_allclose(got, reference.block_product(A, X), rtol=1e-5, atol=atol)


def test_block_products_with_operands_beyond_cache_walk_a_in_blocks(rng, dtype, isa):
    # Operand rows beyond 4 MiB (4200 rows x 128 columns x 2 operands; 33000 x 32 padded columns) make the
    # products walk A in row blocks and column panels, with partial blocks and panels at the ends.
    threads, n, b = 2, 4200, 128
    L = np.tril(rng.uniform(-1, 1, size=(n, n)).astype(dtype))
    X = rng.normal(size=(n, b)).astype(dtype)
    atol = (1e-11 if dtype == np.float64 else 2e-4) * np.sqrt(n)
    np.testing.assert_allclose(
        _core.block_product(L, X, threads, symmetric=True),
        reference.block_product(L, X, symmetric=True),
        rtol=1e-5,
        atol=atol,
    )
    del L
    A, X = rng.normal(size=(50, 33000)).astype(dtype), rng.normal(size=(33000, 30)).astype(dtype)
    np.testing.assert_allclose(
        _core.block_product(A, X, threads), reference.block_product(A, X), rtol=1e-5, atol=atol * 2
    )


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize(
    "n,k,b",
    [(1, 1, 1), (3, 5, 2), (4099, 7, 8), (5000, 130, 9), (4100, 20, 33), (10, 0, 3), (4101, 9, 4), (4103, 6, 16)],
)
def test_transposed_product_matches_reference(rng, dtype, isa, threads, n, k, b):
    # Several row parts, the rows after the last tile, one- and two-vector tiles, and the BLAS path.
    A, B = rng.normal(size=(n, k)).astype(dtype), rng.normal(size=(n, b)).astype(dtype)
    atol = (1e-11 if dtype == np.float64 else 2e-4) * np.sqrt(n)
    got = _core.transposed_product(A, B, threads)
    assert got.shape == (k, b) and got.dtype == dtype
    np.testing.assert_allclose(got, reference.transposed_product(A, B), rtol=1e-5, atol=atol)


def test_symmetric_block_product_needs_a_square_matrix(rng):
    with pytest.raises(ValueError, match="square"):
        _core.block_product(rng.normal(size=(4, 5)), rng.normal(size=(5, 2)), symmetric=True)
