// Products of a large stored matrix with a thin block, the inner loop of the block eigensolver.
#pragma once

#include "core/common.hpp"

namespace rkm {

// Up to this many columns block_product streams A itself; wider blocks are compute-bound and go to BLAS.
constexpr Eigen::Index kThinBlockColumns = 32;

// Y = A X for a large row-major A (n x m) and a thin block X (m x b). On thin blocks BLAS GEMM reaches a
// small part of its peak (it packs all of A for a few columns; measured 1.4-2x slower than this kernel).
// This kernel streams A once from memory in column panels, with a register tile of Y, and runs AVX2/FMA
// code where the CPU has it (chosen at run time, so the portable build stays portable).
// With `symmetric`, A (square) is taken as symmetric and only its lower triangle is read: each element
// read serves two products, so A streams from memory at half its size, whatever the width of X.
template <typename T>
void block_product(const ConstMatrixRef<T>& A, const ConstMatrixRef<T>& X, MatrixRef<T> Y, int n_threads,
                   bool symmetric = false);

// C = A^T B for tall A (n x k) and B (n x w): the projections of a block on a basis. Each thread streams its
// own row range of A once through the core's transposed tile kernel (no BLAS, so no BLAS thread pool
// competes with the OpenMP threads, whatever its size) and the partial products are summed in thread
// order, so the result repeats for a given thread count. Blocks wider than kThinBlockColumns go to BLAS.
template <typename T>
void transposed_product(const ConstMatrixRef<T>& A, const ConstMatrixRef<T>& B, MatrixRef<T> C, int n_threads);

}  // namespace rkm
