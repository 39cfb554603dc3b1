// The kernel-matrix kernel of the CUDA path (see launch.hpp).
#include "cuda/launch.hpp"

#include <cfloat>
#include <cstddef>

namespace rkm::cuda {

namespace {

constexpr int kTile = 16;

// One thread per entry of a kTile x kTile block of K; the features stream through shared memory in tiles of
// kTile columns. Every sum is in double, so float32 inputs lose nothing beyond the final rounding.
template <typename T>
__global__ void kernel_matrix_tiles(const T* X, int n_x, const T* Y, int n_y, int d, KernelCode type, double gamma,
                                    double degree, double coef0, long long diagonal_offset, T* out, unsigned* flags) {
  __shared__ double xs[kTile][kTile + 1];
  __shared__ double ys[kTile][kTile + 1];
  const int row = blockIdx.y * kTile + threadIdx.y;
  const int col = blockIdx.x * kTile + threadIdx.x;
  const int y_row = blockIdx.x * kTile + threadIdx.y;  // the row of Y this thread loads
  double dot = 0.0, squared = 0.0, l1 = 0.0, xx = 0.0, yy = 0.0;
  for (int k0 = 0; k0 < d; k0 += kTile) {
    const int k = k0 + threadIdx.x;
    xs[threadIdx.y][threadIdx.x] = (row < n_x && k < d) ? static_cast<double>(X[std::size_t(row) * d + k]) : 0.0;
    ys[threadIdx.y][threadIdx.x] = (y_row < n_y && k < d) ? static_cast<double>(Y[std::size_t(y_row) * d + k]) : 0.0;
    __syncthreads();
    for (int j = 0; j < kTile; ++j) {
      const double a = xs[threadIdx.y][j], b = ys[threadIdx.x][j], difference = a - b;
      dot += a * b;
      squared += difference * difference;
      l1 += fabs(difference);
      xx += a * a;
      yy += b * b;
    }
    __syncthreads();
  }
  if (row >= n_x || col >= n_y) return;
  const bool diagonal = diagonal_offset >= 0 && row + diagonal_offset == col;
  double value = 0.0;
  switch (type) {
    case KernelCode::linear:
      value = dot;
      break;
    case KernelCode::polynomial: {
      const double base = gamma * dot + coef0;
      if (base < 0.0 && degree != floor(degree)) atomicOr(flags, kNegativeBaseFlag);
      value = pow(base, degree);
      break;
    }
    case KernelCode::rbf:
      value = diagonal ? 1.0 : exp(-gamma * squared);
      break;
    case KernelCode::laplacian:
      value = diagonal ? 1.0 : exp(-gamma * l1);
      break;
    case KernelCode::cosine: {
      const double denominator = sqrt(xx) * sqrt(yy);  // not sqrt(xx yy), which overflows first
      value = denominator > 0.0 ? (diagonal ? 1.0 : dot / denominator) : 0.0;
      break;
    }
    case KernelCode::tanimoto: {  // two all-zero fingerprints share no bit: 0, as on the CPU
      const double denominator = xx + yy - dot;
      value = denominator > 0.0 ? (diagonal ? 1.0 : dot / denominator) : 0.0;
      break;
    }
  }
  const double largest = sizeof(T) == 4 ? double(FLT_MAX) : DBL_MAX;
  if (!(fabs(value) <= largest)) atomicOr(flags, kNonFiniteFlag);
  out[std::size_t(row) * n_y + col] = static_cast<T>(value);
}

}  // namespace

template <typename T>
cudaError_t launch_kernel_matrix(const T* X, int n_x, const T* Y, int n_y, int d, KernelCode type, double gamma,
                                 double degree, double coef0, long long diagonal_offset, T* out, unsigned* flags) {
  const dim3 threads(kTile, kTile);
  const dim3 blocks((n_y + kTile - 1) / kTile, (n_x + kTile - 1) / kTile);
  kernel_matrix_tiles<T><<<blocks, threads>>>(X, n_x, Y, n_y, d, type, gamma, degree, coef0, diagonal_offset, out,
                                              flags);
  return cudaGetLastError();
}

template cudaError_t launch_kernel_matrix<float>(const float*, int, const float*, int, int, KernelCode, double,
                                                 double, double, long long, float*, unsigned*);
template cudaError_t launch_kernel_matrix<double>(const double*, int, const double*, int, int, KernelCode, double,
                                                  double, double, long long, double*, unsigned*);

}  // namespace rkm::cuda
