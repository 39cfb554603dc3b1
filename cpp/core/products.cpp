#include "core/products.hpp"

#include "core/blas.hpp"
#include "core/isa.hpp"
#include "core/simd.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

namespace rkm {

namespace {
using Eigen::Index;

// How the streaming products walk A (see walk_for): row tiles in blocks of kBlockTiles, each block sweeping
// its columns in panels whose rows of X (and Y) take at most kPanelBytes, so they stay in L2 while the
// block's rows of A stream past them; or, while X (and Y) fit in kCacheResidentBytes, every row tile
// sweeping its whole row.
constexpr Index kPanelBytes = Index(384) << 10;
constexpr Index kBlockTiles = 64;
constexpr Index kCacheResidentBytes = Index(4) << 20;
constexpr Index kRows = 6;  // rows of A per register tile

// Accumulates Y[r0..r0+kRows, c0..c0+2L) += A[r0..r0+kRows, j0..j1) X[j0..j1, c0..c0+2L) with a register
// tile of kRows x 2 vectors of L lanes. GCC vector types keep the tile in registers; the code is
// compiled for the target of the function it is inlined into (simd.hpp).
template <typename T, int VectorBytes>
RKM_ALWAYS_INLINE void thin_tile_full(const T* A, Index lda, const T* X, Index ldx, T* Y, Index ldy, Index r0, Index j0,
                                      Index j1, Index c0) {
  using V = simd::Vector<T, VectorBytes>;
  constexpr int L = VectorBytes / static_cast<int>(sizeof(T));
  V acc[kRows][2] = {};
  for (Index j = j0; j < j1; ++j) {
    V x0, x1;
    std::memcpy(&x0, X + j * ldx + c0, sizeof(V));
    std::memcpy(&x1, X + j * ldx + c0 + L, sizeof(V));
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r) {
      const T a = A[(r0 + r) * lda + j];
      acc[r][0] += a * x0;
      acc[r][1] += a * x1;
    }
  }
  for (int r = 0; r < kRows; ++r)
    for (int c = 0; c < 2 * L; ++c) Y[(r0 + r) * ldy + c0 + c] += acc[r][c / L][c % L];
}

// All column tiles of a row tile; b is a multiple of the tile width (the caller pads).
template <typename T, int VectorBytes>
RKM_ALWAYS_INLINE void thin_tile(const T* A, Index lda, const T* X, Index ldx, T* Y, Index ldy, Index r0, Index j0,
                                 Index j1, Index b) {
  constexpr Index width = 2 * VectorBytes / static_cast<Index>(sizeof(T));
  for (Index c0 = 0; c0 < b; c0 += width) thin_tile_full<T, VectorBytes>(A, lda, X, ldx, Y, ldy, r0, j0, j1, c0);
}

template <typename T>
void thin_tile_baseline(const T* A, Index lda, const T* X, Index ldx, T* Y, Index ldy, Index r0, Index j0,
                        Index j1, Index b) {
  thin_tile<T, 16>(A, lda, X, ldx, Y, ldy, r0, j0, j1, b);  // SSE2 vectors
}

// The symmetric counterpart for a row tile below the diagonal (j1 <= r0): every element a_rj read once
// serves y_r += a_rj x_j (when Direct) and y_j += a_rj x_r. A tile of Rows rows against a column tile of
// `Vectors` vectors of L lanes. Without Direct it accumulates A^T X alone, for the projections of the
// eigensolver. Each column j of the tile loads and stores y_j once for all its rows, so more rows mean less
// of that traffic per element of A, as far as the registers hold the tile: kSymmetricRows (fewer than kRows:
// the transposed sums need registers too) with 16 vector registers, kWideSymmetricRows for one-vector tiles
// with AVX-512's 32 (measured 1.6x faster than 4 rows with b = 8, float64, N = 20000).
constexpr Index kSymmetricRows = 4;
[[maybe_unused]] constexpr Index kWideSymmetricRows = 8;  // used by the AVX-512 tiles only

template <typename T, int VectorBytes, int Vectors, bool Direct, int Rows>
RKM_ALWAYS_INLINE void symmetric_tile_full(const T* A, Index lda, const T* X, Index ldx, T* Y, Index ldy, Index r0,
                                           Index j0, Index j1, Index c0) {
  using V = simd::Vector<T, VectorBytes>;
  constexpr int L = VectorBytes / static_cast<int>(sizeof(T));
  V acc[Rows][Vectors] = {}, x_rows[Rows][Vectors];
  (void)acc;
  for (int r = 0; r < Rows; ++r)
    for (int v = 0; v < Vectors; ++v) std::memcpy(&x_rows[r][v], X + (r0 + r) * ldx + c0 + v * L, sizeof(V));
  for (Index j = j0; j < j1; ++j) {
    V x[Vectors], t[Vectors] = {};
    if constexpr (Direct)
      for (int v = 0; v < Vectors; ++v) std::memcpy(&x[v], X + j * ldx + c0 + v * L, sizeof(V));
#pragma GCC unroll 8
    for (int r = 0; r < Rows; ++r) {
      const T a = A[(r0 + r) * lda + j];
      for (int v = 0; v < Vectors; ++v) {
        if constexpr (Direct) acc[r][v] += a * x[v];
        t[v] += a * x_rows[r][v];
      }
    }
    for (int v = 0; v < Vectors; ++v) {
      V y;
      std::memcpy(&y, Y + j * ldy + c0 + v * L, sizeof(V));
      y += t[v];
      std::memcpy(Y + j * ldy + c0 + v * L, &y, sizeof(V));
    }
  }
  if constexpr (Direct)
    for (int r = 0; r < Rows; ++r)
      for (int c = 0; c < Vectors * L; ++c) Y[(r0 + r) * ldy + c0 + c] += acc[r][c / L][c % L];
}

// A block of one vector's width (b == L) takes one-vector tiles, which keep every operand in registers;
// wider blocks take tiles of two vectors.
template <typename T, int VectorBytes, bool Direct>
RKM_ALWAYS_INLINE void symmetric_tile(const T* A, Index lda, const T* X, Index ldx, T* Y, Index ldy, Index r0, Index j0,
                                      Index j1, Index b) {
  constexpr Index lanes = VectorBytes / static_cast<Index>(sizeof(T));
  if (b == lanes) {
    symmetric_tile_full<T, VectorBytes, 1, Direct, kSymmetricRows>(A, lda, X, ldx, Y, ldy, r0, j0, j1, 0);
    return;
  }
  for (Index c0 = 0; c0 < b; c0 += 2 * lanes)
    symmetric_tile_full<T, VectorBytes, 2, Direct, kSymmetricRows>(A, lda, X, ldx, Y, ldy, r0, j0, j1, c0);
}

template <typename T>
void symmetric_tile_baseline(const T* A, Index lda, const T* X, Index ldx, T* Y, Index ldy, Index r0, Index j0,
                             Index j1, Index b) {
  symmetric_tile<T, 16, true>(A, lda, X, ldx, Y, ldy, r0, j0, j1, b);
}

template <typename T>
void transposed_tile_baseline(const T* A, Index lda, const T* X, Index ldx, T* Y, Index ldy, Index r0, Index j0,
                              Index j1, Index b) {
  symmetric_tile<T, 16, false>(A, lda, X, ldx, Y, ldy, r0, j0, j1, b);
}

#ifdef RKM_HAVE_AVX2_DISPATCH
template <typename T>
__attribute__((target("avx2,fma"))) void thin_tile_avx2(const T* A, Index lda, const T* X, Index ldx, T* Y,
                                                       Index ldy, Index r0, Index j0, Index j1, Index b) {
  thin_tile<T, 32>(A, lda, X, ldx, Y, ldy, r0, j0, j1, b);  // AVX vectors
}

template <typename T>
__attribute__((target("avx2,fma"))) void symmetric_tile_avx2(const T* A, Index lda, const T* X, Index ldx, T* Y,
                                                            Index ldy, Index r0, Index j0, Index j1, Index b) {
  symmetric_tile<T, 32, true>(A, lda, X, ldx, Y, ldy, r0, j0, j1, b);
}

template <typename T>
__attribute__((target("avx2,fma"))) void transposed_tile_avx2(const T* A, Index lda, const T* X, Index ldx, T* Y,
                                                             Index ldy, Index r0, Index j0, Index j1, Index b) {
  symmetric_tile<T, 32, false>(A, lda, X, ldx, Y, ldy, r0, j0, j1, b);
}

// AVX-512's 32 registers for symmetric and transposed tiles of kWideSymmetricRows rows and one vector of
// VectorBytes (64: a zmm; 32: a ymm, which AVX-512VL gives 32 registers too).
template <typename T, int VectorBytes>
__attribute__((target("avx512f,avx512vl,fma"))) void wide_symmetric_tile_avx512(const T* A, Index lda, const T* X,
                                                                               Index ldx, T* Y, Index ldy,
                                                                               Index r0, Index j0, Index j1, Index) {
  symmetric_tile_full<T, VectorBytes, 1, true, kWideSymmetricRows>(A, lda, X, ldx, Y, ldy, r0, j0, j1, 0);
}

template <typename T, int VectorBytes>
__attribute__((target("avx512f,avx512vl,fma"))) void wide_transposed_tile_avx512(const T* A, Index lda,
                                                                                const T* X, Index ldx, T* Y,
                                                                                Index ldy, Index r0, Index j0,
                                                                                Index j1, Index) {
  symmetric_tile_full<T, VectorBytes, 1, false, kWideSymmetricRows>(A, lda, X, ldx, Y, ldy, r0, j0, j1, 0);
}
#endif

template <typename T>
using TileKernel = void (*)(const T*, Index, const T*, Index, T*, Index, Index, Index, Index, Index);

// The tile kernels, the column width of their tiles and the rows of a symmetric or transposed tile.
template <typename T>
struct TileKernels {
  TileKernel<T> general, symmetric, transposed;
  Index width, symmetric_rows;
};

// The tile kernels for this CPU, for blocks of b columns: the wide symmetric tiles where AVX-512 runs and b
// fills one zmm or one ymm (the blocks of the eigensolver); the general tiles stay AVX2's, whose width (two
// ymm) pads such blocks no further.
template <typename T>
TileKernels<T> tile_kernels([[maybe_unused]] Index b) {
  constexpr Index lanes = 64 / static_cast<Index>(sizeof(T));  // of a zmm
#ifdef RKM_HAVE_AVX2_DISPATCH
  if (use_avx512() && b == lanes)
    return {&thin_tile_avx2<T>, &wide_symmetric_tile_avx512<T, 64>, &wide_transposed_tile_avx512<T, 64>, lanes,
            kWideSymmetricRows};
  if (use_avx512() && b == lanes / 2)
    return {&thin_tile_avx2<T>, &wide_symmetric_tile_avx512<T, 32>, &wide_transposed_tile_avx512<T, 32>, lanes,
            kWideSymmetricRows};
  if (use_avx2())
    return {&thin_tile_avx2<T>, &symmetric_tile_avx2<T>, &transposed_tile_avx2<T>, lanes, kSymmetricRows};
#endif
  return {&thin_tile_baseline<T>, &symmetric_tile_baseline<T>, &transposed_tile_baseline<T>, lanes / 2,
          kSymmetricRows};
}

Index round_up(Index value, Index multiple) { return (value + multiple - 1) / multiple * multiple; }

// Columns of the padded blocks that symmetric and transposed tiles take: one vector (half a general tile)
// for narrow blocks, else whole tiles.
Index padded_columns(Index b, Index width) { return b <= width / 2 ? width / 2 : round_up(b, width); }

struct Walk {
  Index block_tiles, panel;
};

// The walk for products touching `operands` padded blocks (n_columns x padded) of T. Whole-row sweeps give
// the hardware prefetcher long streams of A (measured 10% faster with 8 columns at N = 20000) as long as the
// operand rows they touch stay in cache; beyond that they would come from memory for every row tile, and
// blocked panels win (1.4x faster with 32 columns at N = 20000).
template <typename T>
Walk walk_for(Index n_columns, Index padded, Index operands) {
  const Index row_bytes = operands * padded * static_cast<Index>(sizeof(T));
  if (n_columns * row_bytes <= kCacheResidentBytes) return {1, std::max<Index>(n_columns, 1)};
  return {kBlockTiles, std::max<Index>(64, kPanelBytes / row_bytes)};
}

template <typename T>
void thin_product(const ConstMatrixRef<T>& A, const ConstMatrixRef<T>& X, MatrixRef<T> Y) {
  const Index n = A.rows(), m = A.cols(), b = X.cols();
  const TileKernels<T> kernels = tile_kernels<T>(b);
  const auto kernel = kernels.general;
  // Zero-padded copies make every column tile full width; they are tiny next to A.
  const Index padded = round_up(b, kernels.width);
  RowMatrix<T> Xp = RowMatrix<T>::Zero(m, padded), Yp = RowMatrix<T>::Zero(n, padded);
  Xp.leftCols(b) = X;
  const Walk walk = walk_for<T>(m, padded, 1);
  const Index full_tiles = n / kRows, n_blocks = (full_tiles + walk.block_tiles - 1) / walk.block_tiles;
#pragma omp parallel for schedule(static)
  for (Index block = 0; block < n_blocks; ++block) {
    const Index t0 = block * walk.block_tiles, t1 = std::min(t0 + walk.block_tiles, full_tiles);
    for (Index j0 = 0; j0 < m; j0 += walk.panel) {
      const Index j1 = std::min(j0 + walk.panel, m);
      for (Index t = t0; t < t1; ++t)
        kernel(A.data(), A.outerStride(), Xp.data(), padded, Yp.data(), padded, t * kRows, j0, j1, padded);
    }
  }
  Y.topRows(full_tiles * kRows) = Yp.topLeftCorner(full_tiles * kRows, b);
  // The last n mod kRows rows are too few for a tile.
  for (Index r = full_tiles * kRows; r < n; ++r) Y.row(r).noalias() = A.row(r) * X;
}

// Adds the products of the lower triangle of A's rows r0..r1-1 that lie in columns r0..r (the diagonal
// block of a row tile, or the last rows) to Y, both ways, with X and Y padded to `ld` columns.
template <typename T>
void add_diagonal_block(const ConstMatrixRef<T>& A, const T* X, T* Y, Index ld, Index r0, Index r1) {
  for (Index r = r0; r < r1; ++r) {
    for (Index c = r0; c <= r; ++c) {
      const T a = A(r, c);
      for (Index k = 0; k < ld; ++k) Y[r * ld + k] += a * X[c * ld + k];
      if (c != r)
        for (Index k = 0; k < ld; ++k) Y[c * ld + k] += a * X[r * ld + k];
    }
  }
}

// First tile of each of `parts` consecutive tile ranges holding equal shares of the lower triangle (row
// tile t holds about t tiles' worth of it), so that a static split balances the threads.
std::vector<Index> triangle_split(Index n_tiles, int parts) {
  std::vector<Index> first(static_cast<size_t>(parts) + 1);
  for (int p = 0; p <= parts; ++p)
    first[static_cast<size_t>(p)] =
        static_cast<Index>(std::llround(static_cast<double>(n_tiles) * std::sqrt(static_cast<double>(p) / parts)));
  return first;
}

// Y = A X reading only the lower triangle of the symmetric A. Each thread owns a range of row tiles and
// accumulates into its own copy of Y (its tiles scatter transposed products into earlier rows); the
// copies are summed in thread order, so the result repeats for a given thread count.
template <typename T>
void symmetric_product(const ConstMatrixRef<T>& A, const ConstMatrixRef<T>& X, MatrixRef<T> Y, int threads) {
  const Index n = A.rows(), b = X.cols();
  const TileKernels<T> kernels = tile_kernels<T>(b);
  const Index padded = padded_columns(b, kernels.width);
  RowMatrix<T> Xp = RowMatrix<T>::Zero(n, padded);
  Xp.leftCols(b) = X;
  const Walk walk = walk_for<T>(n, padded, 2);
  const Index rows = kernels.symmetric_rows, full_tiles = n / rows;
  const int parts = static_cast<int>(std::clamp<Index>(full_tiles, 1, threads));
  const std::vector<Index> first = triangle_split(full_tiles, parts);
  std::vector<RowMatrix<T>> partial(static_cast<size_t>(parts), RowMatrix<T>::Zero(n, padded));
  const T* a = A.data();
  const Index lda = A.outerStride();
#pragma omp parallel for schedule(static, 1) num_threads(parts)
  for (int p = 0; p < parts; ++p) {
    T* y = partial[static_cast<size_t>(p)].data();
    const Index last = first[static_cast<size_t>(p) + 1];
    for (Index t0 = first[static_cast<size_t>(p)]; t0 < last; t0 += walk.block_tiles) {
      const Index t1 = std::min(t0 + walk.block_tiles, last), block_start = t0 * rows;
      for (Index j0 = 0; j0 < block_start; j0 += walk.panel) {
        const Index j1 = std::min(j0 + walk.panel, block_start);
        for (Index t = t0; t < t1; ++t)
          kernels.symmetric(a, lda, Xp.data(), padded, y, padded, t * rows, j0, j1, padded);
      }
      // Inside the block: each tile's columns from the block's start to its diagonal block, then that block.
      for (Index t = t0; t < t1; ++t) {
        const Index r0 = t * rows;
        if (r0 > block_start) kernels.symmetric(a, lda, Xp.data(), padded, y, padded, r0, block_start, r0, padded);
        add_diagonal_block<T>(A, Xp.data(), y, padded, r0, r0 + rows);
      }
    }
  }
  RowMatrix<T>& sum = partial[0];
  for (size_t p = 1; p < partial.size(); ++p) sum += partial[p];
  // The last n mod rows rows: their parts left of the diagonal, then their diagonal block.
  const Index tail = full_tiles * rows;
  for (Index r = tail; r < n; ++r) {
    sum.row(r).noalias() += A.row(r).head(tail) * Xp.topRows(tail);
    sum.topRows(tail).noalias() += A.row(r).head(tail).transpose() * Xp.row(r);
  }
  add_diagonal_block<T>(A, Xp.data(), sum.data(), padded, tail, n);
  Y = sum.leftCols(b);
}

}  // namespace

template <typename T>
void block_product(const ConstMatrixRef<T>& A, const ConstMatrixRef<T>& X, MatrixRef<T> Y, int n_threads,
                   bool symmetric) {
  require(!symmetric || A.rows() == A.cols(), "A: must be square for a symmetric product");
  require(A.cols() == X.rows(), "X: must have as many rows as A has columns");
  require(Y.rows() == A.rows() && Y.cols() == X.cols(), "Y: has the wrong shape");
  if (Y.size() == 0) return;
  ThreadGuard guard(n_threads);
  if (symmetric) {
    symmetric_product<T>(A, X, Y, guard.threads());
  } else if (X.cols() <= kThinBlockColumns) {
    thin_product<T>(A, X, Y);
  } else {
    blas::gemm<T>(blas::Op::none, blas::Op::none, A, X, Y, T(1), T(0));
  }
}

template <typename T>
void transposed_product(const ConstMatrixRef<T>& A, const ConstMatrixRef<T>& B, MatrixRef<T> C, int n_threads) {
  require(A.rows() == B.rows(), "B: must have as many rows as A");
  require(C.rows() == A.cols() && C.cols() == B.cols(), "C: has the wrong shape");
  if (C.size() == 0) return;
  ThreadGuard guard(n_threads);
  if (B.cols() > kThinBlockColumns) {
    blas::gemm<T>(blas::Op::transpose, blas::Op::none, A, B, C, T(1), T(0));
    return;
  }
  // Below this many rows per part, splitting costs more than it saves.
  constexpr Index kMinRowsPerPart = 2048;
  const Index n = A.rows(), k = A.cols(), b = B.cols();
  const TileKernels<T> kernels = tile_kernels<T>(b);
  const Index padded = padded_columns(b, kernels.width);
  RowMatrix<T> Bp = RowMatrix<T>::Zero(n, padded);
  Bp.leftCols(b) = B;
  const Index rows = kernels.symmetric_rows, full_tiles = n / rows;
  const int parts = static_cast<int>(std::clamp<Index>(n / kMinRowsPerPart, 1, guard.threads()));
  std::vector<RowMatrix<T>> partial(static_cast<size_t>(parts), RowMatrix<T>::Zero(k, padded));
#pragma omp parallel for schedule(static, 1) num_threads(parts)
  for (int p = 0; p < parts; ++p) {
    T* c = partial[static_cast<size_t>(p)].data();
    for (Index t = full_tiles * p / parts; t < full_tiles * (p + 1) / parts; ++t)
      kernels.transposed(A.data(), A.outerStride(), Bp.data(), padded, c, padded, t * rows, 0, k, padded);
  }
  RowMatrix<T>& sum = partial[0];
  for (size_t p = 1; p < partial.size(); ++p) sum += partial[p];
  // The last n mod rows rows are too few for a tile.
  for (Index r = full_tiles * rows; r < n; ++r) sum.noalias() += A.row(r).transpose() * Bp.row(r);
  C = sum.leftCols(b);
}

template void block_product<float>(const ConstMatrixRef<float>&, const ConstMatrixRef<float>&, MatrixRef<float>,
                                   int, bool);
template void block_product<double>(const ConstMatrixRef<double>&, const ConstMatrixRef<double>&,
                                    MatrixRef<double>, int, bool);
template void transposed_product<float>(const ConstMatrixRef<float>&, const ConstMatrixRef<float>&,
                                        MatrixRef<float>, int);
template void transposed_product<double>(const ConstMatrixRef<double>&, const ConstMatrixRef<double>&,
                                         MatrixRef<double>, int);

}  // namespace rkm
