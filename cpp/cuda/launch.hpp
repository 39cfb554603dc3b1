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

// Sets *flags bit kNonFiniteFlag when one of the count values is NaN or infinite.
template <typename T>
cudaError_t launch_check_finite(const T* values, std::size_t count, unsigned* flags);

}  // namespace rkm::cuda
