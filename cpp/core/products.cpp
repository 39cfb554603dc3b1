#include "core/products.hpp"

#include "core/blas.hpp"

#include <algorithm>
#include <cstring>
#include <utility>

namespace rkm {

namespace {
using Eigen::Index;

// Columns of A per panel: a panel of X (kPanel x b) stays in L2 while rows of A stream past it.
constexpr Index kPanel = 1024;
constexpr Index kRows = 6;  // rows of A per register tile

// Accumulates Y[r0..r0+kRows, c0..c0+2L) += A[r0..r0+kRows, j0..j1) X[j0..j1, c0..c0+2L) with a register
// tile of kRows x 2 vectors of L lanes. GCC vector types keep the tile in registers; the code is
// compiled for the target of the function it is inlined into.
template <typename T, int VectorBytes>
__attribute__((always_inline)) inline void thin_tile_full(const T* A, Index lda, const T* X, Index ldx, T* Y,
                                                          Index ldy, Index r0, Index j0, Index j1, Index c0) {
  typedef T V __attribute__((vector_size(VectorBytes)));
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
__attribute__((always_inline)) inline void thin_tile(const T* A, Index lda, const T* X, Index ldx, T* Y, Index ldy,
                                                     Index r0, Index j0, Index j1, Index b) {
  constexpr Index width = 2 * VectorBytes / static_cast<Index>(sizeof(T));
  for (Index c0 = 0; c0 < b; c0 += width) thin_tile_full<T, VectorBytes>(A, lda, X, ldx, Y, ldy, r0, j0, j1, c0);
}

template <typename T>
void thin_tile_baseline(const T* A, Index lda, const T* X, Index ldx, T* Y, Index ldy, Index r0, Index j0,
                        Index j1, Index b) {
  thin_tile<T, 16>(A, lda, X, ldx, Y, ldy, r0, j0, j1, b);  // SSE2 vectors
}

#if defined(__x86_64__) && defined(__GNUC__)
#define RKM_HAVE_AVX2_DISPATCH 1
template <typename T>
__attribute__((target("avx2,fma"))) void thin_tile_avx2(const T* A, Index lda, const T* X, Index ldx, T* Y,
                                                       Index ldy, Index r0, Index j0, Index j1, Index b) {
  thin_tile<T, 32>(A, lda, X, ldx, Y, ldy, r0, j0, j1, b);  // AVX vectors
}

bool cpu_has_avx2() {
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has;
}
#endif

template <typename T>
using TileKernel = void (*)(const T*, Index, const T*, Index, T*, Index, Index, Index, Index, Index);

template <typename T>
std::pair<TileKernel<T>, Index> tile_kernel() {
#ifdef RKM_HAVE_AVX2_DISPATCH
  if (cpu_has_avx2()) return {&thin_tile_avx2<T>, 64 / static_cast<Index>(sizeof(T))};
#endif
  return {&thin_tile_baseline<T>, 32 / static_cast<Index>(sizeof(T))};
}

template <typename T>
void thin_product(const ConstMatrixRef<T>& A, const ConstMatrixRef<T>& X, MatrixRef<T> Y) {
  const Index n = A.rows(), m = A.cols(), b = X.cols();
  const auto [kernel, width] = tile_kernel<T>();
  // Zero-padded copies make every column tile full width; they are tiny next to A.
  const Index padded = (b + width - 1) / width * width;
  RowMatrix<T> Xp = RowMatrix<T>::Zero(m, padded), Yp = RowMatrix<T>::Zero(n, padded);
  Xp.leftCols(b) = X;
  const Index full_tiles = n / kRows;
#pragma omp parallel for schedule(static)
  for (Index t = 0; t < full_tiles; ++t) {
    for (Index j0 = 0; j0 < m; j0 += kPanel)
      kernel(A.data(), A.outerStride(), Xp.data(), padded, Yp.data(), padded, t * kRows, j0, std::min(j0 + kPanel, m),
             padded);
  }
  Y.topRows(full_tiles * kRows) = Yp.topLeftCorner(full_tiles * kRows, b);
  // The last n mod kRows rows are too few for a tile.
  for (Index r = full_tiles * kRows; r < n; ++r) Y.row(r).noalias() = A.row(r) * X;
}

}  // namespace

template <typename T>
void block_product(const ConstMatrixRef<T>& A, const ConstMatrixRef<T>& X, MatrixRef<T> Y, int n_threads) {
  require(A.cols() == X.rows(), "X: must have as many rows as A has columns");
  require(Y.rows() == A.rows() && Y.cols() == X.cols(), "Y: has the wrong shape");
  if (Y.size() == 0) return;
  ThreadGuard guard(n_threads);
  if (X.cols() <= kThinBlockColumns) {
    thin_product<T>(A, X, Y);
  } else {
    blas::gemm<T>(blas::Op::none, blas::Op::none, A, X, Y, T(1), T(0));
  }
}

const char* block_product_isa() {
#ifdef RKM_HAVE_AVX2_DISPATCH
  if (cpu_has_avx2()) return "avx2";
#endif
  return "baseline";
}

template void block_product<float>(const ConstMatrixRef<float>&, const ConstMatrixRef<float>&, MatrixRef<float>,
                                   int);
template void block_product<double>(const ConstMatrixRef<double>&, const ConstMatrixRef<double>&,
                                    MatrixRef<double>, int);

}  // namespace rkm
