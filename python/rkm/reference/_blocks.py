"""Row blocks: how the reference routines bound their temporaries and avoid NumPy's SYRK path."""

import numpy as np

# Float64 bytes of one block of rows (products, or the gradient's pairwise differences). At most
# MAX_BLOCK_ROWS rows: a block is then never a whole large matrix, so NumPy's SYRK path (the product of
# a matrix with its own transpose) only ever sees at most that many rows.
BLOCK_BYTES = 32 << 20
MAX_BLOCK_ROWS = 1024
# Rows and columns of the square tiles in which a lower triangle is mirrored.
MIRROR_TILE = 256


def row_blocks(n_rows, row_bytes):
    """Slices covering range(n_rows), each of at most MAX_BLOCK_ROWS rows and about BLOCK_BYTES."""
    step = int(np.clip(BLOCK_BYTES // max(row_bytes, 1), 1, MAX_BLOCK_ROWS))
    return [slice(start, min(start + step, n_rows)) for start in range(0, n_rows, step)]


def blockwise(n_rows, n_cols, block, dtype, *, lower=False, row_bytes=None):
    """Assemble an (n_rows, n_cols) array of `dtype` a block of rows at a time.

    ``block(rows, stop)`` returns the float64 values of ``rows`` in columns ``0:stop``: all columns, or with
    ``lower=True`` (square results) those up to the block's last row, the upper triangle then being mirrored
    from the lower one. `row_bytes` (default: a float64 row) sizes the blocks.
    """
    out = np.empty((n_rows, n_cols), dtype)
    for rows in row_blocks(n_rows, 8 * n_cols if row_bytes is None else row_bytes):
        stop = rows.stop if lower else n_cols
        out[rows, :stop] = block(rows, stop)
    if lower:
        mirror_lower(out)
    return out


def times_transpose(A, B, dtype=np.float64):
    """``A @ B.T`` computed in float64 a block of A's rows at a time, stored in `dtype`."""
    B = np.asarray(B, dtype=np.float64)
    # Blocks are sized by their rows of A (cast to float64) and of the result.
    return blockwise(
        A.shape[0],
        B.shape[0],
        lambda rows, stop: np.asarray(A[rows], np.float64) @ B.T,
        dtype,
        row_bytes=8 * (A.shape[1] + B.shape[0]),
    )


def mirror_lower(S):
    """Overwrite the strict upper triangle of the square S with the transpose of its strict lower triangle."""
    # Square tiles keep each transposed copy within the caches: long strips cost one TLB miss per element.
    n = S.shape[0]
    for r0 in range(0, n, MIRROR_TILE):
        r1 = min(r0 + MIRROR_TILE, n)
        diagonal = S[r0:r1, r0:r1]
        diagonal[...] = np.tril(diagonal) + np.tril(diagonal, -1).T
        for c0 in range(r1, n, MIRROR_TILE):
            c1 = min(c0 + MIRROR_TILE, n)
            S[r0:r1, c0:c1] = S[c0:c1, r0:r1].T


def symmetric_from_lower(A):
    """The float64 symmetric matrix whose lower triangle is that of the square A."""
    S = np.array(A, dtype=np.float64)
    mirror_lower(S)
    return S
