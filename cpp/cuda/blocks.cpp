// The Krylov blocks in GPU memory (see blocks.hpp): cuBLAS GEMMs for the products with small matrices, the kernels
// of blocks.cu for the rest, the host for the rare steps (pseudo-random directions, Householder QR).
#include "cuda/blocks.hpp"

#include "core/krylov.hpp"
#include "cuda/cublas.hpp"
#include "cuda/launch.hpp"
#include "cuda/memory.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>

namespace rkm::cuda {

namespace {

int as_int(Index value) { return static_cast<int>(value); }

// Row strides as cuBLAS and the kernels take them: cuBLAS wants ld >= 1 even for empty blocks.
template <typename T>
int stride_of(const DeviceView<T>& view) {
  return as_int(std::max<Index>(1, view.stride));
}

template <typename T>
int stride_of(const DeviceMatrix<T>& M) {
  return as_int(std::max<Index>(1, M.cols()));
}

}  // namespace

BlockPool::BlockPool(int device) : device_(device) {
  check(cudaSetDevice(device), "cudaSetDevice");
  int supported = 0;
  cudaDeviceGetAttribute(&supported, cudaDevAttrMemoryPoolsSupported, device);
  if (supported) {
    cudaMemPoolProps properties{};
    properties.allocType = cudaMemAllocationTypePinned;
    properties.location.type = cudaMemLocationTypeDevice;
    properties.location.id = device;
    cudaMemPool_t pool = nullptr;
    check(cudaMemPoolCreate(&pool, &properties), "cudaMemPoolCreate");
    std::uint64_t keep = std::numeric_limits<std::uint64_t>::max();  // freed blocks stay for the next step
    cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep);
    pool_ = pool;
  }
  try {
    flags_ = static_cast<unsigned*>(allocate(sizeof(unsigned)));
  } catch (...) {
    if (pool_) cudaMemPoolDestroy(static_cast<cudaMemPool_t>(pool_));
    throw;
  }
}

BlockPool::~BlockPool() {
  release(flags_);
  cudaStreamSynchronize(nullptr);  // the pool's blocks are free once the work that used them is done
  if (pool_) cudaMemPoolDestroy(static_cast<cudaMemPool_t>(pool_));
}

void* BlockPool::allocate(std::size_t bytes) const {
  void* pointer = nullptr;
  bytes = std::max<std::size_t>(bytes, 1);
  if (pool_) {
    check(cudaMallocFromPoolAsync(&pointer, bytes, static_cast<cudaMemPool_t>(pool_), nullptr),
          "cudaMallocFromPoolAsync");
  } else {
    check(cudaMalloc(&pointer, bytes), "cudaMalloc");
  }
  return pointer;
}

void BlockPool::release(void* pointer) const {
  if (!pointer) return;
  if (pool_) {
    cudaFreeAsync(pointer, nullptr);
  } else {
    cudaFree(pointer);
  }
}

template <typename T>
DeviceMatrix<T>::DeviceMatrix(std::shared_ptr<const BlockPool> pool, Index rows, Index cols)
    : pool_(std::move(pool)), rows_(rows), cols_(cols) {
  data_ = static_cast<T*>(pool_->allocate(std::size_t(rows) * std::size_t(cols) * sizeof(T)));
}

template <typename T>
DeviceMatrix<T>::~DeviceMatrix() {
  if (pool_) pool_->release(data_);
}

template <typename T>
DeviceMatrix<T> CudaOps<T>::clone(const ConstView& Z) const {
  Matrix out = matrix(Z.rows(), Z.cols());
  copy(Z, out);
  return out;
}

template <typename T>
void CudaOps<T>::copy(const ConstView& from, View to) const {
  // A kernel rather than cudaMemcpy2D, whose rows here are a few values wide.
  check(launch_convert<T, T>(from.data, stride_of(from), as_int(from.rows()), as_int(from.cols()), to.data,
                             stride_of(to)),
        "launching a copy");
}

template <typename T>
DeviceMatrix<T> CudaOps<T>::upload(const ConstMatrixRef<T>& A) const {
  Matrix out = matrix(A.rows(), A.cols());
  if (A.size() == 0) return out;
  check(cudaMemcpy2D(out.data(), std::size_t(A.cols()) * sizeof(T), A.data(), std::size_t(A.outerStride()) * sizeof(T),
                     std::size_t(A.cols()) * sizeof(T), std::size_t(A.rows()), cudaMemcpyHostToDevice),
        "copying a block to the device");
  return out;
}

template <typename T>
RowMatrix<T> CudaOps<T>::download(const ConstView& Z) const {
  RowMatrix<T> out(Z.rows(), Z.cols());
  if (out.size() == 0) return out;
  check(cudaMemcpy2D(out.data(), std::size_t(Z.cols()) * sizeof(T), Z.data, std::size_t(Z.stride) * sizeof(T),
                     std::size_t(Z.cols()) * sizeof(T), std::size_t(Z.rows()), cudaMemcpyDeviceToHost),
        "copying a block from the device");
  return out;
}

template <typename T>
Eigen::VectorXd CudaOps<T>::column_norms(const ConstView& Z) const {
  DeviceMatrix<double> norms(pool_, 1, Z.cols());
  check(launch_column_norms<T>(Z.data, as_int(Z.rows()), as_int(Z.cols()), stride_of(Z), norms.data()),
        "launching the column norms");
  return CudaOps<double>(pool_, n_threads_).download(norms).transpose();
}

template <typename T>
void CudaOps<T>::scale_columns(View Z, const Eigen::VectorXd& factors) const {
  const Matrix device_factors = upload(factors.transpose().template cast<T>());
  check(launch_scale_columns<T>(Z.data, as_int(Z.rows()), as_int(Z.cols()), stride_of(Z), device_factors.data()),
        "launching the column scaling");
}

template <typename T>
Eigen::MatrixXd CudaOps<T>::gram_in_double(const ConstView& A, const ConstView& B) const {
  const CudaOps<double> in_double(pool_, n_threads_);
  DeviceMatrix<double> C(pool_, A.cols(), B.cols());
  if constexpr (std::is_same_v<T, double>) {
    gemm<double>(pool_->device(), true, false, as_int(A.cols()), as_int(B.cols()), as_int(A.rows()), 1.0, A.data,
                 stride_of(A), B.data, stride_of(B), 0.0, C.data(), stride_of(C));
  } else {
    // float32 sums over n terms lose about sqrt(n) ulps: the rows go through double copies, a band at a time, and
    // the products accumulate in C.
    const bool same = A.data == B.data && A.cols() == B.cols() && A.stride == B.stride;
    const Index band = std::max<Index>(
        1, Index(kConversionBytes / (sizeof(double) * std::size_t(std::max<Index>(1, A.cols() + B.cols())))));
    DeviceMatrix<double> Ad(pool_, std::min(band, A.rows()), A.cols());
    DeviceMatrix<double> Bd(pool_, same ? 0 : std::min(band, B.rows()), B.cols());
    if (A.rows() == 0) check(cudaMemsetAsync(C.data(), 0, std::size_t(C.rows() * C.cols()) * sizeof(double), nullptr),
                             "cudaMemsetAsync");
    for (Index r0 = 0; r0 < A.rows(); r0 += band) {
      const Index rows = std::min(band, A.rows() - r0);
      check(launch_convert<float, double>(A.data + r0 * A.stride, stride_of(A), as_int(rows), as_int(A.cols()),
                                          Ad.data(), stride_of(Ad)),
            "launching a conversion");
      if (!same)
        check(launch_convert<float, double>(B.data + r0 * B.stride, stride_of(B), as_int(rows), as_int(B.cols()),
                                            Bd.data(), stride_of(Bd)),
              "launching a conversion");
      const double* b_rows = same ? Ad.data() : Bd.data();
      gemm<double>(pool_->device(), true, false, as_int(A.cols()), as_int(B.cols()), as_int(rows), 1.0, Ad.data(),
                   stride_of(Ad), b_rows, stride_of(Bd), r0 == 0 ? 0.0 : 1.0, C.data(), stride_of(C));
    }
  }
  return in_double.download(C);
}

template <typename T>
RowMatrix<T> CudaOps<T>::transposed_product(const ConstView& A, const ConstView& B) const {
  Matrix C = matrix(A.cols(), B.cols());
  gemm<T>(pool_->device(), true, false, as_int(A.cols()), as_int(B.cols()), as_int(A.rows()), T(1), A.data,
          stride_of(A), B.data, stride_of(B), T(0), C.data(), stride_of(C));
  return download(C);
}

template <typename T>
void CudaOps<T>::times(const ConstView& A, const Eigen::MatrixXd& M, View out) const {
  const Matrix device_M = upload(M.template cast<T>());
  gemm<T>(pool_->device(), false, false, as_int(A.rows()), as_int(M.cols()), as_int(A.cols()), T(1), A.data,
          stride_of(A), device_M.data(), stride_of(device_M), T(0), out.data, stride_of(out));
}

template <typename T>
void CudaOps<T>::remove_span(const ConstView& Q, View Z) const {
  if (Q.cols() == 0 || Z.cols() == 0) return;
  Matrix C = matrix(Q.cols(), Z.cols());  // Q^T Z, then Z - Q C
  const int c_stride = as_int(Z.cols());
  gemm<T>(pool_->device(), true, false, as_int(Q.cols()), as_int(Z.cols()), as_int(Q.rows()), T(1), Q.data,
          stride_of(Q), Z.data, stride_of(Z), T(0), C.data(), c_stride);
  gemm<T>(pool_->device(), false, false, as_int(Z.rows()), as_int(Z.cols()), as_int(Q.cols()), T(-1), Q.data,
          stride_of(Q), C.data(), c_stride, T(1), Z.data, stride_of(Z));
}

template <typename T>
DeviceMatrix<T> CudaOps<T>::residuals(const ConstView& AU, const ConstView& U, const Eigen::VectorXd& theta) const {
  Matrix R = matrix(U.rows(), U.cols());
  const Matrix device_theta = upload(theta.transpose().template cast<T>());
  check(launch_residuals<T>(AU.data, stride_of(AU), U.data, stride_of(U), device_theta.data(), as_int(U.rows()),
                            as_int(U.cols()), R.data(), stride_of(R)),
        "launching the residuals");
  return R;
}

template <typename T>
bool CudaOps<T>::all_finite(const ConstView& Z) const {
  check(cudaMemsetAsync(pool_->flags(), 0, sizeof(unsigned), nullptr), "cudaMemsetAsync");
  check(launch_check_finite<T>(Z.data, as_int(Z.rows()), as_int(Z.cols()), stride_of(Z), pool_->flags()),
        "launching the finiteness check");
  unsigned found = 0;
  check(cudaMemcpy(&found, pool_->flags(), sizeof(unsigned), cudaMemcpyDeviceToHost), "copying the flags");
  return (found & kNonFiniteFlag) == 0;
}

template <typename T>
void CudaOps<T>::fill_random(View Z, std::uint64_t seed) const {
  RowMatrix<T> directions(Z.rows(), Z.cols());
  krylov::fill_random<T>(directions, seed);  // the host's sequence, so that both paths start from the same
  copy(upload(directions), Z);
}

template <typename T>
void CudaOps<T>::householder_qr(View Z) const {
  RowMatrix<T> values = download(Z);
  krylov::householder_qr<T>(values);
  copy(upload(values), Z);
}

template <typename T>
DeviceMatrix<double> CudaOps<T>::to_double(const ConstView& Z) const {
  DeviceMatrix<double> out(pool_, Z.rows(), Z.cols());
  check(launch_convert<T, double>(Z.data, stride_of(Z), as_int(Z.rows()), as_int(Z.cols()), out.data(),
                                  stride_of(out)),
        "launching a conversion");
  return out;
}

template <typename T>
DeviceMatrix<T> CudaOps<T>::from_double(const DeviceMatrix<double>& Z) const {
  Matrix out = matrix(Z.rows(), Z.cols());
  check(launch_convert<double, T>(Z.data(), stride_of(Z), as_int(Z.rows()), as_int(Z.cols()), out.data(),
                                  stride_of(out)),
        "launching a conversion");
  return out;
}

template class DeviceMatrix<float>;
template class DeviceMatrix<double>;
template class CudaOps<float>;
template class CudaOps<double>;

}  // namespace rkm::cuda
