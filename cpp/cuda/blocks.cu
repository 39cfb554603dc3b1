// The GPU kernels of the block-Krylov iteration's tall blocks (see launch.hpp): column reductions, scalings and
// conversions of row-major blocks whose rows are `stride` values apart (a range of a wider block's columns).
#include "cuda/grid.cuh"
#include "cuda/launch.hpp"

#include <cstddef>

namespace rkm::cuda {

namespace {

// Entry k of a rows x cols block, numbered row by row.
__device__ std::size_t offset(std::size_t k, int cols, int stride) {
  return (k / cols) * std::size_t(stride) + k % cols;
}

// The block-wide sum (maximum = false) or maximum of each thread's value; every thread gets the result.
template <bool maximum>
__device__ double block_reduce(double value) {
  __shared__ double partial[kThreads];
  partial[threadIdx.x] = value;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) {
      const double other = partial[threadIdx.x + half];
      partial[threadIdx.x] = maximum ? fmax(partial[threadIdx.x], other) : partial[threadIdx.x] + other;
    }
    __syncthreads();
  }
  const double result = partial[0];
  __syncthreads();  // partial is reused by the next reduction
  return result;
}

// One thread block per column: the largest magnitude first, then the sum of squares scaled by it, so that entries
// beyond sqrt(DBL_MAX) do not overflow (as Eigen's stableNorm on the host).
template <typename T>
__global__ void column_norms(const T* A, int rows, int stride, double* norms) {
  const int column = blockIdx.x;
  double largest = 0.0, has_nan = 0.0;  // fmax skips NaN: it is flagged apart, for a NaN norm as on the host
  for (int i = threadIdx.x; i < rows; i += kThreads) {
    const double value = static_cast<double>(A[std::size_t(i) * stride + column]);
    largest = fmax(largest, fabs(value));
    if (isnan(value)) has_nan = 1.0;
  }
  largest = block_reduce<true>(largest);
  has_nan = block_reduce<true>(has_nan);
  double sum = 0.0;
  if (largest > 0.0 && isfinite(largest)) {
    for (int i = threadIdx.x; i < rows; i += kThreads) {
      const double scaled = static_cast<double>(A[std::size_t(i) * stride + column]) / largest;
      sum += scaled * scaled;
    }
  }
  sum = block_reduce<false>(sum);
  if (threadIdx.x == 0)
    norms[column] = has_nan > 0.0 ? nan("") : largest > 0.0 && isfinite(largest) ? largest * sqrt(sum) : largest;
}

// One thread block per column: sums[column] = c^T q and sums[cols + column] = 1^T q for the column q of Q.
template <typename T>
__global__ void centring_sums(const T* Q, int rows, int cols, int stride, const double* c, double* sums) {
  const int column = blockIdx.x;
  double weighted = 0.0, plain = 0.0;
  for (int i = threadIdx.x; i < rows; i += kThreads) {
    const double q = static_cast<double>(Q[std::size_t(i) * stride + column]);
    weighted += c[i] * q;
    plain += q;
  }
  weighted = block_reduce<false>(weighted);
  plain = block_reduce<false>(plain);
  if (threadIdx.x == 0) {
    sums[column] = weighted;
    sums[cols + column] = plain;
  }
}

template <typename T>
__global__ void centre_columns(T* Y, int rows, int cols, int stride, const double* c, const double* shift,
                               const double* scale) {
  const std::size_t count = std::size_t(rows) * cols;
  for (std::size_t k = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; k < count;
       k += std::size_t(gridDim.x) * blockDim.x) {
    const int i = int(k / cols), j = int(k % cols);
    T& y = Y[std::size_t(i) * stride + j];
    y = static_cast<T>(static_cast<double>(y) - shift[j] - c[i] * scale[j]);
  }
}

template <typename T>
__global__ void scale_columns(T* A, int rows, int cols, int stride, const T* factors) {
  const std::size_t count = std::size_t(rows) * cols;
  for (std::size_t k = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; k < count;
       k += std::size_t(gridDim.x) * blockDim.x)
    A[offset(k, cols, stride)] *= factors[k % cols];
}

template <typename T>
__global__ void residuals(const T* AU, int stride_au, const T* U, int stride_u, const T* theta, int rows, int cols,
                          T* R, int stride_r) {
  const std::size_t count = std::size_t(rows) * cols;
  for (std::size_t k = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; k < count;
       k += std::size_t(gridDim.x) * blockDim.x) {
    const int j = int(k % cols);
    R[offset(k, cols, stride_r)] = AU[offset(k, cols, stride_au)] - U[offset(k, cols, stride_u)] * theta[j];
  }
}

template <typename From, typename To>
__global__ void convert(const From* A, int stride_a, int rows, int cols, To* B, int stride_b) {
  const std::size_t count = std::size_t(rows) * cols;
  for (std::size_t k = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; k < count;
       k += std::size_t(gridDim.x) * blockDim.x)
    B[offset(k, cols, stride_b)] = static_cast<To>(A[offset(k, cols, stride_a)]);
}

template <typename T>
__global__ void fill(T* A, int rows, int cols, int stride, T value) {
  const std::size_t count = std::size_t(rows) * cols;
  for (std::size_t k = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; k < count;
       k += std::size_t(gridDim.x) * blockDim.x)
    A[offset(k, cols, stride)] = value;
}

template <typename T>
__global__ void check_finite(const T* values, int rows, int cols, int stride, unsigned* flags) {
  const std::size_t count = std::size_t(rows) * cols;
  for (std::size_t k = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; k < count;
       k += std::size_t(gridDim.x) * blockDim.x) {
    if (!isfinite(static_cast<double>(values[offset(k, cols, stride)]))) atomicOr(flags, kNonFiniteFlag);
  }
}

std::size_t entries(int rows, int cols) { return rows > 0 && cols > 0 ? std::size_t(rows) * cols : 0; }

}  // namespace

template <typename T>
cudaError_t launch_column_norms(const T* A, int rows, int cols, int stride, double* norms) {
  if (cols == 0) return cudaSuccess;
  column_norms<T><<<unsigned(cols), kThreads>>>(A, rows, stride, norms);
  return cudaGetLastError();
}

template <typename T>
cudaError_t launch_centring_sums(const T* Q, int rows, int cols, int stride, const double* c, double* sums) {
  if (cols == 0) return cudaSuccess;
  centring_sums<T><<<unsigned(cols), kThreads>>>(Q, rows, cols, stride, c, sums);
  return cudaGetLastError();
}

template <typename T>
cudaError_t launch_centre_columns(T* Y, int rows, int cols, int stride, const double* c, const double* shift,
                                  const double* scale) {
  if (entries(rows, cols) == 0) return cudaSuccess;
  centre_columns<T><<<blocks_for(entries(rows, cols)), kThreads>>>(Y, rows, cols, stride, c, shift, scale);
  return cudaGetLastError();
}

template <typename T>
cudaError_t launch_scale_columns(T* A, int rows, int cols, int stride, const T* factors) {
  if (entries(rows, cols) == 0) return cudaSuccess;
  scale_columns<T><<<blocks_for(entries(rows, cols)), kThreads>>>(A, rows, cols, stride, factors);
  return cudaGetLastError();
}

template <typename T>
cudaError_t launch_residuals(const T* AU, int stride_au, const T* U, int stride_u, const T* theta, int rows, int cols,
                             T* R, int stride_r) {
  if (entries(rows, cols) == 0) return cudaSuccess;
  residuals<T><<<blocks_for(entries(rows, cols)), kThreads>>>(AU, stride_au, U, stride_u, theta, rows, cols, R,
                                                              stride_r);
  return cudaGetLastError();
}

template <typename From, typename To>
cudaError_t launch_convert(const From* A, int stride_a, int rows, int cols, To* B, int stride_b) {
  if (entries(rows, cols) == 0) return cudaSuccess;
  convert<From, To><<<blocks_for(entries(rows, cols)), kThreads>>>(A, stride_a, rows, cols, B, stride_b);
  return cudaGetLastError();
}

template <typename T>
cudaError_t launch_fill(T* A, int rows, int cols, int stride, T value) {
  if (entries(rows, cols) == 0) return cudaSuccess;
  fill<T><<<blocks_for(entries(rows, cols)), kThreads>>>(A, rows, cols, stride, value);
  return cudaGetLastError();
}

template <typename T>
cudaError_t launch_check_finite(const T* values, int rows, int cols, int stride, unsigned* flags) {
  if (entries(rows, cols) == 0) return cudaSuccess;
  check_finite<T><<<blocks_for(entries(rows, cols)), kThreads>>>(values, rows, cols, stride, flags);
  return cudaGetLastError();
}

#define RKM_INSTANTIATE_BLOCKS(T)                                                                                \
  template cudaError_t launch_column_norms<T>(const T*, int, int, int, double*);                                 \
  template cudaError_t launch_centring_sums<T>(const T*, int, int, int, const double*, double*);                 \
  template cudaError_t launch_centre_columns<T>(T*, int, int, int, const double*, const double*, const double*); \
  template cudaError_t launch_scale_columns<T>(T*, int, int, int, const T*);                                     \
  template cudaError_t launch_residuals<T>(const T*, int, const T*, int, const T*, int, int, T*, int);           \
  template cudaError_t launch_fill<T>(T*, int, int, int, T);                                                     \
  template cudaError_t launch_check_finite<T>(const T*, int, int, int, unsigned*);

RKM_INSTANTIATE_BLOCKS(float)
RKM_INSTANTIATE_BLOCKS(double)
template cudaError_t launch_convert<float, double>(const float*, int, int, int, double*, int);
template cudaError_t launch_convert<double, float>(const double*, int, int, int, float*, int);
template cudaError_t launch_convert<float, float>(const float*, int, int, int, float*, int);
template cudaError_t launch_convert<double, double>(const double*, int, int, int, double*, int);

}  // namespace rkm::cuda
