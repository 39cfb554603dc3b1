// Products with kernel matrices that are never stored: matrix-free kernel PCA and out-of-sample projections.
#pragma once

#include "core/eigs.hpp"
#include "core/kernels.hpp"

#include <functional>

namespace rkm {

// Y = K(X, Z) B, or K(X, X) B when Z == nullptr, with the kernel evaluated a square tile at a time and never
// stored: besides X, Z and B in double, each thread holds one tile and an accumulator of Y. The symmetric
// product evaluates each tile of the lower triangle once and uses it twice (Y_I += K_IJ B_J and
// Y_J += K_IJ^T B_I). Tiles are dealt to threads cyclically and the accumulators added in thread order, so
// results repeat bit for bit for a given thread count. Ctrl-C is honoured between tiles.
template <typename T>
void kernel_product(const ConstMatrixRef<T>& X, const ConstMatrixRef<T>* Z, const KernelSpec& spec,
                    const ConstMatrixRef<T>& B, MatrixRef<T> Y, int n_threads);

template <typename T>
struct KernelEigenResult {
  EigenResult<T> eigen;
  Vector<T> column_means;  // column means of the training kernel matrix (zeros without centring)
  double grand_mean = 0.0;
};

// KB = K B for a block B (n x c) in double: the uncentred product a kernel operator provides (tiles on the CPU,
// a matrix or tiles on a GPU).
using KernelTimes = std::function<void(const RowMatrix<double>& B, RowMatrix<double>& KB)>;

// The n_components largest eigenpairs of the kernel operator `times` of order n, double-centred when `center`,
// as kernel_top_eigsh below describes; the one place where its centring rule lives, whatever computes K B.
template <typename T>
KernelEigenResult<T> centred_top_eigsh(const KernelTimes& times, Eigen::Index n, bool center, int n_components,
                                       const ConstMatrixRef<T>& start, double tol, int max_iter, int n_threads,
                                       const std::function<void(int)>& on_product = {});

// The n_components largest eigenpairs of the kernel matrix of X, double-centred when `center`
// (K_c = K - 1 c^T - c 1^T + g 1 1^T for the column means c and grand mean g), by top_eigsh with the
// block products computed as above: memory O(n (d + b)) instead of n^2. Centring costs no extra pass: the
// first product carries a column of ones, whose product gives c; later products subtract the rank-two
// correction. `start` (n x b) fixes the block width and the first block. `on_product`, when set, is called
// with the number of products done after each one (progress reports of fits that take minutes).
template <typename T>
KernelEigenResult<T> kernel_top_eigsh(const ConstMatrixRef<T>& X, const KernelSpec& spec, bool center,
                                      int n_components, const ConstMatrixRef<T>& start, double tol, int max_iter,
                                      int n_threads, const std::function<void(int)>& on_product = {});

// Bytes kernel_product holds besides its inputs and output, for K(X, Z) B with X (n_rows x n_features),
// Z (n_columns x n_features; Z = X when symmetric) and B with b columns.
Eigen::Index kernel_product_workspace_bytes(Eigen::Index n_rows, Eigen::Index n_columns, Eigen::Index n_features,
                                            Eigen::Index b, int n_threads, bool symmetric);

}  // namespace rkm
