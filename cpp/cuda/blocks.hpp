// The block-Krylov iteration's tall blocks in GPU memory: CudaOps<T> is the Ops of core/krylov.hpp for them, so the
// core's own iteration runs its orthogonalisation, Ritz vectors and residuals on the device (cuBLAS GEMMs and the
// kernels of blocks.cu) and only the small projected problems on the host.
#pragma once

#include "core/common.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <type_traits>

namespace rkm::cuda {

using Eigen::Index;

// Bytes of the double copies through which CudaOps<float>::gram_in_double accumulates, a band of rows at a time.
constexpr std::size_t kConversionBytes = std::size_t(64) << 20;

// Rows x cols values of a row-major block in device memory, row i at data + i * stride: a range of the columns of
// a DeviceMatrix (T const for a read-only view).
template <typename T>
struct DeviceView {
  T* data = nullptr;
  Index row_count = 0, column_count = 0, stride = 0;

  DeviceView() = default;
  DeviceView(T* data_, Index rows_, Index cols_, Index stride_)
      : data(data_), row_count(rows_), column_count(cols_), stride(stride_) {}
  // A mutable view reads as a read-only one.
  template <typename U, typename = std::enable_if_t<std::is_same_v<const U, T> && !std::is_same_v<U, T>>>
  DeviceView(const DeviceView<U>& other)  // NOLINT(google-explicit-constructor): as Eigen's Ref converts
      : data(other.data), row_count(other.row_count), column_count(other.column_count), stride(other.stride) {}

  Index rows() const { return row_count; }
  Index cols() const { return column_count; }
};

// Device memory for the blocks of one solve, from a stream-ordered pool of its own: blocks come and go at every
// step, and cudaMalloc / cudaFree would synchronise the device each time. Plain cudaMalloc where the device has no
// memory pools.
class BlockPool {
 public:
  explicit BlockPool(int device);
  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;
  ~BlockPool();
  int device() const { return device_; }
  void* allocate(std::size_t bytes) const;
  void release(void* pointer) const;
  // A word of flags for the finiteness checks.
  unsigned* flags() const { return flags_; }

 private:
  int device_;
  void* pool_ = nullptr;  // cudaMemPool_t, kept opaque so that this header needs no CUDA types
  unsigned* flags_ = nullptr;
};

// An owning rows x cols row-major block in device memory (contiguous: stride = cols); empty when default-built.
template <typename T>
class DeviceMatrix {
 public:
  DeviceMatrix() = default;
  DeviceMatrix(std::shared_ptr<const BlockPool> pool, Index rows, Index cols);
  DeviceMatrix(DeviceMatrix&& other) noexcept { swap(other); }
  DeviceMatrix& operator=(DeviceMatrix&& other) noexcept {
    DeviceMatrix(std::move(other)).swap(*this);
    return *this;
  }
  DeviceMatrix(const DeviceMatrix&) = delete;
  DeviceMatrix& operator=(const DeviceMatrix&) = delete;
  ~DeviceMatrix();

  Index rows() const { return rows_; }
  Index cols() const { return cols_; }
  T* data() const { return data_; }
  operator DeviceView<T>() { return {data_, rows_, cols_, cols_}; }  // NOLINT(google-explicit-constructor)
  operator DeviceView<const T>() const { return {data_, rows_, cols_, cols_}; }  // NOLINT

 private:
  void swap(DeviceMatrix& other) noexcept {
    std::swap(pool_, other.pool_);
    std::swap(data_, other.data_);
    std::swap(rows_, other.rows_);
    std::swap(cols_, other.cols_);
  }

  std::shared_ptr<const BlockPool> pool_;
  T* data_ = nullptr;
  Index rows_ = 0, cols_ = 0;
};

// The Ops of core/krylov.hpp (see there for what each operation does) on device blocks. Everything runs on the
// legacy default stream, in order, as the kernel products do; results that the host reads are copied back, which
// waits for them.
template <typename T>
class CudaOps {
 public:
  using Matrix = DeviceMatrix<T>;
  using View = DeviceView<T>;
  using ConstView = DeviceView<const T>;

  CudaOps(std::shared_ptr<const BlockPool> pool, int n_threads) : pool_(std::move(pool)), n_threads_(n_threads) {}

  int threads() const { return n_threads_; }
  int device() const { return pool_->device(); }
  Matrix matrix(Index rows, Index cols) const { return Matrix(pool_, rows, cols); }
  View columns(Matrix& M, Index first, Index count) const { return {M.data() + first, M.rows(), count, M.cols()}; }
  ConstView columns(const Matrix& M, Index first, Index count) const {
    return {M.data() + first, M.rows(), count, M.cols()};
  }
  Matrix clone(const ConstView& Z) const;
  void copy(const ConstView& from, View to) const;
  Matrix upload(const ConstMatrixRef<T>& A) const;
  RowMatrix<T> download(const ConstView& Z) const;
  Eigen::VectorXd column_norms(const ConstView& Z) const;
  void scale_columns(View Z, const Eigen::VectorXd& factors) const;
  Eigen::MatrixXd gram_in_double(const ConstView& A, const ConstView& B) const;
  RowMatrix<T> transposed_product(const ConstView& A, const ConstView& B) const;
  void times(const ConstView& A, const Eigen::MatrixXd& M, View out) const;
  void remove_span(const ConstView& Q, View Z) const;
  Matrix residuals(const ConstView& AU, const ConstView& U, const Eigen::VectorXd& theta) const;
  bool all_finite(const ConstView& Z) const;
  void fill_random(View Z, std::uint64_t seed) const;
  void householder_qr(View Z) const;
  CudaOps<double> in_double() const { return CudaOps<double>(pool_, n_threads_); }
  DeviceMatrix<double> to_double(const ConstView& Z) const;
  Matrix from_double(const DeviceMatrix<double>& Z) const;

 private:
  std::shared_ptr<const BlockPool> pool_;
  int n_threads_;
};

}  // namespace rkm::cuda
