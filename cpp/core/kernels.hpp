// Kernel matrices K(X, Y) for the kernels of the RKM papers.
#pragma once

#include "core/common.hpp"

#include <string>

namespace rkm {

enum class KernelType { linear, polynomial, rbf, laplacian, cosine, tanimoto };

// Parameters follow scikit-learn: rbf exp(-gamma ||x-y||^2), laplacian exp(-gamma ||x-y||_1),
// polynomial (gamma x^T y + coef0)^degree. gamma must already be resolved (no "None" here).
struct KernelSpec {
  KernelType type = KernelType::rbf;
  double gamma = 1.0;
  double degree = 3.0;
  double coef0 = 1.0;
};

KernelType parse_kernel(const std::string& name);

// Writes K(X, Y) into out (n_x x n_y); Y == nullptr means Y = X and builds one triangle, mirrored unless
// lower_only (then the strict upper triangle of out is left untouched, for consumers that read the lower
// triangle only, such as the kernel PCA fit).
// Built in row bands: one GEMM (or L1 sweep) per band into a cache-sized double buffer, then a fused
// elementwise pass that writes the band and, when symmetric, its mirror. Float32 input is accumulated in
// double, so ||x||^2 + ||y||^2 - 2 x^T y keeps its precision; distance kernels also shift both sets by the
// mean of X first, which removes most of that cancellation.
template <typename T>
void kernel_matrix_into(const ConstMatrixRef<T>& X, const ConstMatrixRef<T>* Y, const KernelSpec& spec,
                        MatrixRef<T> out, int n_threads, bool lower_only = false);

// Weighted gradients with respect to the first argument: G_i = sum_j W_ij d/dx k(x, y_j) at x = x_i, for
// X (n x d), Y (m x d), W (n x m), G (n x d). Every kernel except laplacian has the form
// G = (W o A) Y + diag((W o B) 1) X for elementwise A, B built from x^T y and the norms, so it runs as two
// GEMMs per row band; laplacian's subgradient (sign(x - y), 0 at ties) is summed directly.
template <typename T>
void kernel_gradient_into(const ConstMatrixRef<T>& X, const ConstMatrixRef<T>& Y, const ConstMatrixRef<T>& W,
                          const KernelSpec& spec, MatrixRef<T> G, int n_threads);

}  // namespace rkm
