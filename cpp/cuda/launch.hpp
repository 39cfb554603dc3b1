// Launchers of the CUDA path's GPU kernels, over raw device pointers. Kept free of Eigen and of rkm's core
// headers, so that nvcc compiles only this code; device.cpp (host C++) calls them.
#pragma once

#include <cuda_runtime.h>

namespace rkm::cuda {

// The kernels in the order of RKM_KERNELS (cpp/core/kernels.hpp); device.cpp asserts that the values agree.
enum class KernelCode : int { linear, polynomial, rbf, laplacian, cosine, tanimoto };

// Bits of the flags word the kernel-matrix kernel sets.
constexpr unsigned kNonFiniteFlag = 1u;
constexpr unsigned kNegativeBaseFlag = 2u;

// K(X, Y) into out (n_x x n_y, row-major) from X (n_x x d) and Y (n_y x d, row-major). When X is a band of rows
// of Y, starting at row `diagonal_offset` (-1: not), entry (i, i + diagonal_offset) takes the exact k(x, x)
// where the kernel has one, as the CPU core's diagonal does. Sums in double. Sets *flags bits for entries
// beyond T's range (kNonFiniteFlag) and negative polynomial bases under a non-integer degree. n_x < 2^20 (the
// grid's y extent).
template <typename T>
cudaError_t launch_kernel_matrix(const T* X, int n_x, const T* Y, int n_y, int d, KernelCode type, double gamma,
                                 double degree, double coef0, long long diagonal_offset, T* out, unsigned* flags);

}  // namespace rkm::cuda
