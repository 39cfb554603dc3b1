// Launchers of the CUDA path's GPU kernels, over raw device pointers, on the default stream. Kept free of Eigen
// and of rkm's core headers, so that nvcc compiles only this code; device.cpp (host C++) calls them.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace rkm::cuda {

// The kernels in the order of RKM_KERNELS (cpp/core/kernels.hpp); device.cpp asserts that the values agree.
enum class KernelCode : int { linear, polynomial, rbf, laplacian, cosine, tanimoto };

// Bits of the flags word the kernel-value kernels set.
constexpr unsigned kNonFiniteFlag = 1u;
constexpr unsigned kNegativeBaseFlag = 2u;

// Where rows of K sit in K(X, X): entry (i, i + diagonal_offset) of a band is on the diagonal, and takes the exact
// k(x, x) where the kernel has one, as the CPU core's diagonal does; -1 for K(X, Z).
using DiagonalOffset = long long;

// K values from inner products, as the CPU core's transform: out (rows x cols, row-major, T) from G (rows x cols,
// row-major doubles, G_ij = x_i^T z_j of the data the kernel reads, shifted by X's mean for rbf) and the squared
// norms nx (rows) and nz (cols). Every kernel except laplacian. Sets *flags bits for values beyond T's range and
// negative polynomial bases under a non-integer degree.
template <typename T>
cudaError_t launch_kernel_from_gram(const double* G, const double* nx, const double* nz, int rows, int cols,
                                    KernelCode type, double gamma, double degree, double coef0,
                                    DiagonalOffset diagonal_offset, T* out, unsigned* flags);

// The laplacian kernel exp(-gamma ||x - z||_1) directly: out (n_x x n_z, row-major) from X (n_x x d) and
// Z (n_z x d), row-major doubles, sums in double. n_x < 2^20 (the grid's y extent).
template <typename T>
cudaError_t launch_laplacian_matrix(const double* X, int n_x, const double* Z, int n_z, int d, double gamma,
                                    DiagonalOffset diagonal_offset, T* out, unsigned* flags);

// For inputs already on the device: the column means of X (n x d, row-major) in double.
template <typename T>
cudaError_t launch_column_means(const T* X, int n, int d, double* means);

// values (n x d, doubles) = X - shift (shift == nullptr: X) and squared_norms (n) = their rows' squared norms;
// sets *flags bit kNonFiniteFlag when X holds NaN or infinity.
template <typename T>
cudaError_t launch_kernel_inputs(const T* X, int n, int d, const double* shift, double* values, double* squared_norms,
                                 unsigned* flags);

// The Krylov iteration's tall blocks (blocks.cu): row-major, rows x cols, row i at A + i * stride (a range of the
// columns of a wider block).

// Sets *flags bit kNonFiniteFlag when one of the values is NaN or infinite.
template <typename T>
cudaError_t launch_check_finite(const T* values, int rows, int cols, int stride, unsigned* flags);

// norms (cols doubles) = the columns' Euclidean norms, scaled against overflow.
template <typename T>
cudaError_t launch_column_norms(const T* A, int rows, int cols, int stride, double* norms);

// A <- A diag(factors), factors (cols values) on the device.
template <typename T>
cudaError_t launch_scale_columns(T* A, int rows, int cols, int stride, const T* factors);

// R = AU - U diag(theta), theta (cols values) on the device.
template <typename T>
cudaError_t launch_residuals(const T* AU, int stride_au, const T* U, int stride_u, const T* theta, int rows, int cols,
                             T* R, int stride_r);

// B = A converted to To.
template <typename From, typename To>
cudaError_t launch_convert(const From* A, int stride_a, int rows, int cols, To* B, int stride_b);

// Every entry of A = value.
template <typename T>
cudaError_t launch_fill(T* A, int rows, int cols, int stride, T value);

// The centring of kernel products K Q (centred_top_eigsh's rule): sums (2 cols doubles) = [c^T Q, 1^T Q] in double
// for the column means c (rows doubles), and Y <- Y - 1 shift^T - c scale^T, evaluated in double.
template <typename T>
cudaError_t launch_centring_sums(const T* Q, int rows, int cols, int stride, const double* c, double* sums);
template <typename T>
cudaError_t launch_centre_columns(T* Y, int rows, int cols, int stride, const double* c, const double* shift,
                                  const double* scale);

}  // namespace rkm::cuda
