// The kernel-value kernels of the CUDA path (see launch.hpp).
#include "cuda/grid.cuh"
#include "cuda/launch.hpp"

#include <cfloat>
#include <cstddef>

namespace rkm::cuda {

namespace {

constexpr int kTile = 16;

template <typename T>
__device__ void store(double value, T* out, unsigned* flags) {
  const double largest = sizeof(T) == 4 ? double(FLT_MAX) : DBL_MAX;
  if (!(fabs(value) <= largest)) atomicOr(flags, kNonFiniteFlag);
  *out = static_cast<T>(value);
}

// One thread per entry, grid-stride over the band.
template <typename T>
__global__ void kernel_from_gram(const double* G, const double* nx, const double* nz, int rows, int cols,
                                 KernelCode type, double gamma, double degree, double coef0,
                                 DiagonalOffset diagonal_offset, T* out, unsigned* flags) {
  const std::size_t count = std::size_t(rows) * cols;
  for (std::size_t k = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; k < count;
       k += std::size_t(gridDim.x) * blockDim.x) {
    const int i = int(k / cols), j = int(k % cols);
    const bool diagonal = diagonal_offset >= 0 && i + diagonal_offset == j;
    const double g = G[k];
    double value = 0.0;
    switch (type) {
      case KernelCode::linear:
        value = g;
        break;
      case KernelCode::polynomial: {
        const double base = gamma * g + coef0;
        if (base < 0.0 && degree != floor(degree)) atomicOr(flags, kNegativeBaseFlag);
        value = pow(base, degree);
        break;
      }
      case KernelCode::rbf: {
        const double distance = nx[i] + nz[j] - 2.0 * g;  // rounding can make it slightly negative; NaN stays
        value = diagonal ? 1.0 : exp(-gamma * (distance < 0.0 ? 0.0 : distance));
        break;
      }
      case KernelCode::cosine: {
        const double denominator = sqrt(nx[i]) * sqrt(nz[j]);  // not sqrt(nx nz), which overflows first
        value = denominator > 0.0 ? (diagonal ? 1.0 : g / denominator) : 0.0;
        break;
      }
      case KernelCode::tanimoto: {  // two all-zero fingerprints share no bit: 0, as on the CPU
        const double denominator = nx[i] + nz[j] - g;
        value = denominator > 0.0 ? (diagonal ? 1.0 : g / denominator) : 0.0;
        break;
      }
      case KernelCode::laplacian:  // not from inner products: launch_laplacian_matrix
        break;
    }
    store(value, out + k, flags);
  }
}

// One thread per entry of a kTile x kTile block of K; the features stream through shared memory in tiles of
// kTile columns.
template <typename T>
__global__ void laplacian_tiles(const double* X, int n_x, const double* Z, int n_z, int d, double gamma,
                                DiagonalOffset diagonal_offset, T* out, unsigned* flags) {
  __shared__ double xs[kTile][kTile + 1];
  __shared__ double zs[kTile][kTile + 1];
  const int row = blockIdx.y * kTile + threadIdx.y;
  const int col = blockIdx.x * kTile + threadIdx.x;
  const int z_row = blockIdx.x * kTile + threadIdx.y;  // the row of Z this thread loads
  double l1 = 0.0;
  for (int k0 = 0; k0 < d; k0 += kTile) {
    const int k = k0 + threadIdx.x;
    xs[threadIdx.y][threadIdx.x] = (row < n_x && k < d) ? X[std::size_t(row) * d + k] : 0.0;
    zs[threadIdx.y][threadIdx.x] = (z_row < n_z && k < d) ? Z[std::size_t(z_row) * d + k] : 0.0;
    __syncthreads();
    for (int j = 0; j < kTile; ++j) l1 += fabs(xs[threadIdx.y][j] - zs[threadIdx.x][j]);
    __syncthreads();
  }
  if (row >= n_x || col >= n_z) return;
  const bool diagonal = diagonal_offset >= 0 && row + diagonal_offset == col;
  store(diagonal ? 1.0 : exp(-gamma * l1), out + std::size_t(row) * n_z + col, flags);
}

template <typename T>
__global__ void column_means(const T* X, int n, int d, double* means) {
  for (int column = blockIdx.x * blockDim.x + threadIdx.x; column < d; column += gridDim.x * blockDim.x) {
    double sum = 0.0;
    for (int i = 0; i < n; ++i) sum += static_cast<double>(X[std::size_t(i) * d + column]);
    means[column] = n > 0 ? sum / n : 0.0;
  }
}

template <typename T>
__global__ void kernel_inputs(const T* X, int n, int d, const double* shift, double* values, double* squared_norms,
                              unsigned* flags) {
  for (int row = blockIdx.x * blockDim.x + threadIdx.x; row < n; row += gridDim.x * blockDim.x) {
    double sum = 0.0;
    for (int j = 0; j < d; ++j) {
      const double x = static_cast<double>(X[std::size_t(row) * d + j]);
      if (!isfinite(x)) atomicOr(flags, kNonFiniteFlag);
      const double value = shift ? x - shift[j] : x;
      values[std::size_t(row) * d + j] = value;
      sum += value * value;
    }
    squared_norms[row] = sum;
  }
}

}  // namespace

template <typename T>
cudaError_t launch_column_means(const T* X, int n, int d, double* means) {
  if (d == 0) return cudaSuccess;
  column_means<T><<<blocks_for(std::size_t(d)), kThreads>>>(X, n, d, means);
  return cudaGetLastError();
}

template <typename T>
cudaError_t launch_kernel_inputs(const T* X, int n, int d, const double* shift, double* values, double* squared_norms,
                                 unsigned* flags) {
  if (n == 0) return cudaSuccess;
  kernel_inputs<T><<<blocks_for(std::size_t(n)), kThreads>>>(X, n, d, shift, values, squared_norms, flags);
  return cudaGetLastError();
}

template <typename T>
cudaError_t launch_kernel_from_gram(const double* G, const double* nx, const double* nz, int rows, int cols,
                                    KernelCode type, double gamma, double degree, double coef0,
                                    DiagonalOffset diagonal_offset, T* out, unsigned* flags) {
  const std::size_t count = std::size_t(rows) * cols;
  if (count == 0) return cudaSuccess;
  kernel_from_gram<T><<<blocks_for(count), kThreads>>>(G, nx, nz, rows, cols, type, gamma, degree, coef0,
                                                       diagonal_offset, out, flags);
  return cudaGetLastError();
}

template <typename T>
cudaError_t launch_laplacian_matrix(const double* X, int n_x, const double* Z, int n_z, int d, double gamma,
                                    DiagonalOffset diagonal_offset, T* out, unsigned* flags) {
  if (n_x == 0 || n_z == 0) return cudaSuccess;
  const dim3 threads(kTile, kTile);
  const dim3 blocks((n_z + kTile - 1) / kTile, (n_x + kTile - 1) / kTile);
  laplacian_tiles<T><<<blocks, threads>>>(X, n_x, Z, n_z, d, gamma, diagonal_offset, out, flags);
  return cudaGetLastError();
}

template cudaError_t launch_kernel_from_gram<float>(const double*, const double*, const double*, int, int, KernelCode,
                                                    double, double, double, DiagonalOffset, float*, unsigned*);
template cudaError_t launch_kernel_from_gram<double>(const double*, const double*, const double*, int, int,
                                                     KernelCode, double, double, double, DiagonalOffset, double*,
                                                     unsigned*);
template cudaError_t launch_laplacian_matrix<float>(const double*, int, const double*, int, int, double,
                                                    DiagonalOffset, float*, unsigned*);
template cudaError_t launch_laplacian_matrix<double>(const double*, int, const double*, int, int, double,
                                                     DiagonalOffset, double*, unsigned*);
template cudaError_t launch_column_means<float>(const float*, int, int, double*);
template cudaError_t launch_column_means<double>(const double*, int, int, double*);
template cudaError_t launch_kernel_inputs<float>(const float*, int, int, const double*, double*, double*, unsigned*);
template cudaError_t launch_kernel_inputs<double>(const double*, int, int, const double*, double*, double*,
                                                  unsigned*);

}  // namespace rkm::cuda
