// The CUDA path's devices, kernel matrices and kernel operators, host side (see device.hpp); the GPU kernels are
// in *.cu, the GEMMs in cuBLAS (cublas.cpp).
#include "cuda/device.hpp"

#include "cuda/cublas.hpp"
#include "cuda/launch.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <string>
#include <vector>

namespace rkm::cuda {

namespace {

// KernelCode mirrors KernelType, so that nvcc never sees the core's (Eigen) headers.
#define RKM_KERNEL_CODE_MATCHES(type, name) \
  static_assert(static_cast<int>(KernelType::type) == static_cast<int>(KernelCode::type), "KernelCode: " name);
RKM_KERNELS(RKM_KERNEL_CODE_MATCHES)
#undef RKM_KERNEL_CODE_MATCHES

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess)
    throw device_error(std::string("CUDA: ") + what + " failed: " + cudaGetErrorString(status));
}

// Device memory freed on every exit path.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t bytes) { check(cudaMalloc(&pointer_, bytes), "cudaMalloc"); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { cudaFree(pointer_); }
  template <typename T>
  T* as() const {
    return static_cast<T*>(pointer_);
  }

 private:
  void* pointer_ = nullptr;
};

std::string gib(std::size_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.3g GiB", static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
  return text;
}

}  // namespace

RuntimeStatus runtime_status() {
  RuntimeStatus status;
  cudaRuntimeGetVersion(&status.runtime_version);
  cudaDriverGetVersion(&status.driver_version);
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    status.reason = status.driver_version == 0 ? "no NVIDIA driver found (libcuda.so.1)"
                                                : std::string("no usable CUDA device: ") + cudaGetErrorString(error);
    cudaGetLastError();  // clear the sticky error for later calls
    return status;
  }
  if (count == 0) status.reason = "no CUDA device visible (check CUDA_VISIBLE_DEVICES)";
  for (int index = 0; index < count; ++index) {
    cudaDeviceProp properties{};
    if (cudaGetDeviceProperties(&properties, index) != cudaSuccess) continue;
    DeviceInfo info;
    info.index = index;
    info.name = properties.name;
    info.total_bytes = properties.totalGlobalMem;
    info.compute_major = properties.major;
    info.compute_minor = properties.minor;
    info.multiprocessors = properties.multiProcessorCount;
    if (cudaSetDevice(index) == cudaSuccess) cudaMemGetInfo(&info.free_bytes, &info.total_bytes);
    status.devices.push_back(info);
  }
  cudaGetLastError();
  return status;
}

namespace {

// Rows of K per band of the matrix-free operator: at most kBandBytes of K, and at most kMaxBandRows (the kernel
// grid's y extent is 65535 blocks of 16 rows).
constexpr std::size_t kBandBytes = std::size_t(512) << 20;
constexpr std::size_t kMaxBandRows = std::size_t(1) << 19;

std::size_t band_rows(std::size_t n_x, std::size_t n_z, std::size_t value_bytes) {
  const std::size_t rows = kBandBytes / std::max<std::size_t>(1, n_z * value_bytes);
  return std::max<std::size_t>(1, std::min({n_x, rows, kMaxBandRows}));
}

// Throws unless device `device` exists and has `needed` bytes free; allocates nothing.
void require_device_memory(std::size_t needed, const std::string& what, int device) {
  const RuntimeStatus status = runtime_status();
  if (status.devices.empty()) throw device_error("device='cuda': " + status.reason);
  if (device < 0 || device >= static_cast<int>(status.devices.size()))
    throw device_error("device: no CUDA device " + std::to_string(device) + " (" +
                       std::to_string(status.devices.size()) + " visible)");
  const DeviceInfo& info = status.devices[device];
  if (needed > info.free_bytes)
    throw device_memory_error("device='cuda': " + what + " needs " + gib(needed) + " of GPU memory, " + info.name +
                              " has " + gib(info.free_bytes) + " free; use fewer samples, float32 or device='cpu'");
}

void require_int_sizes(std::size_t n_x, std::size_t n_z, std::size_t n_features) {
  const std::size_t limit = static_cast<std::size_t>(std::numeric_limits<int>::max());
  if (n_x > limit || n_z > limit || n_features > limit)
    throw std::invalid_argument("X: more than 2^31 - 1 rows or features for the CUDA path");
}

// K(X, Z) on one device: X and Z uploaded once, K stored whole or evaluated a band of rows at a time; products
// K B by cuBLAS. Z == nullptr means Z = X, with the exact diagonal.
template <typename T>
class DeviceKernel {
 public:
  DeviceKernel(const T* X, std::size_t n_x, const T* Z, std::size_t n_z, std::size_t d, const KernelSpec& spec,
               bool store, std::size_t max_columns, int device)
      : spec_(spec), n_x_(n_x), n_z_(Z ? n_z : n_x), d_(d), symmetric_(Z == nullptr), store_(store),
        band_(store ? n_x : band_rows(n_x, n_z_, sizeof(T))), device_(device) {
    require_int_sizes(n_x_, n_z_, d_);
    require_device_memory(kernel_operator_bytes(n_x_, n_z_, d_, max_columns, sizeof(T), symmetric_, store_),
                          store_ ? "the kernel matrix" : "the kernel operator's bands", device_);
    check(cudaSetDevice(device_), "cudaSetDevice");
    x_ = std::make_unique<DeviceBuffer>(n_x_ * d_ * sizeof(T) + 1);
    upload(x_->as<T>(), X, n_x_ * d_, "copying X");
    if (!symmetric_) {
      z_ = std::make_unique<DeviceBuffer>(n_z_ * d_ * sizeof(T) + 1);
      upload(z_->as<T>(), Z, n_z_ * d_, "copying Y");
    }
    k_ = std::make_unique<DeviceBuffer>(band_ * n_z_ * sizeof(T) + 1);
    b_ = std::make_unique<DeviceBuffer>(n_z_ * max_columns * sizeof(T) + 1);
    y_ = std::make_unique<DeviceBuffer>(n_x_ * max_columns * sizeof(T) + 1);
    flags_ = std::make_unique<DeviceBuffer>(sizeof(unsigned));
    check(cudaMemset(flags_->as<unsigned>(), 0, sizeof(unsigned)), "cudaMemset");
    if (store_) evaluate(0, n_x_, k_->as<T>());
  }

  // out (n_x x n_z, host) = the stored K.
  void download(T* out) const {
    check(cudaMemcpy(out, k_->as<T>(), n_x_ * n_z_ * sizeof(T), cudaMemcpyDeviceToHost), "copying K");
    report_flags();
  }

  // Y (n_x x c, host, row-major) = K B for B (n_z x c, host, row-major).
  void times(const T* B, std::size_t c, T* Y) {
    check(cudaSetDevice(device_), "cudaSetDevice");
    upload(b_->as<T>(), B, n_z_ * c, "copying B");
    // Row-major B and Y are their transposes in cuBLAS's column-major view, and a row-major band K_I is K_I^T:
    // Y_I^T (c x rows) = B^T (c x n_z) K_I^T (n_z x rows).
    for (std::size_t r0 = 0; r0 < n_x_; r0 += band_) {
      const std::size_t rows = std::min(band_, n_x_ - r0);
      const T* band = k_->as<T>() + (store_ ? r0 * n_z_ : 0);
      if (!store_) {
        throw_if_interrupted();
        evaluate(r0, rows, k_->as<T>());
      }
      gemm<T>(device_, int(c), int(rows), int(n_z_), b_->as<T>(), int(c), band, int(n_z_), y_->as<T>() + r0 * c,
              int(c));
    }
    check(cudaMemcpy(Y, y_->as<T>(), n_x_ * c * sizeof(T), cudaMemcpyDeviceToHost), "copying K B");
    report_flags();
  }

 private:
  static void upload(T* to, const T* from, std::size_t count, const char* what) {
    check(cudaMemcpy(to, from, count * sizeof(T), cudaMemcpyHostToDevice), what);
  }

  // Rows r0 .. r0 + rows of K into out (rows x n_z).
  void evaluate(std::size_t r0, std::size_t rows, T* out) const {
    if (n_z_ == 0) return;  // an empty grid is a launch error
    const T* z = symmetric_ ? x_->as<T>() : z_->as<T>();
    for (std::size_t first = r0; first < r0 + rows; first += kMaxBandRows) {  // the grid's y extent
      const std::size_t count = std::min(kMaxBandRows, r0 + rows - first);
      check(launch_kernel_matrix<T>(x_->as<T>() + first * d_, int(count), z, int(n_z_), int(d_),
                                    static_cast<KernelCode>(spec_.type), spec_.gamma, spec_.degree, spec_.coef0,
                                    symmetric_ ? static_cast<long long>(first) : -1,
                                    out + (first - r0) * n_z_, flags_->as<unsigned>()),
            "launching the kernel-matrix kernel");
    }
  }

  void report_flags() const {
    unsigned found = 0;
    check(cudaMemcpy(&found, flags_->as<unsigned>(), sizeof(unsigned), cudaMemcpyDeviceToHost),
          "copying the flags");
    ValueFlags value_flags;
    value_flags.non_finite = (found & kNonFiniteFlag) != 0;
    value_flags.negative_base = (found & kNegativeBaseFlag) != 0;
    report_value_flags<T>(spec_, {value_flags});
  }

  KernelSpec spec_;
  std::size_t n_x_, n_z_, d_;
  bool symmetric_, store_;
  std::size_t band_;
  int device_;
  std::unique_ptr<DeviceBuffer> x_, z_, k_, b_, y_, flags_;
};

}  // namespace

std::size_t kernel_operator_bytes(std::size_t n_x, std::size_t n_z, std::size_t n_features, std::size_t b,
                                  std::size_t value_bytes, bool symmetric, bool store) {
  if (symmetric) n_z = n_x;
  const std::size_t k_rows = store ? n_x : band_rows(n_x, n_z, value_bytes);
  const std::size_t values = (n_x + (symmetric ? 0 : n_z)) * n_features + (n_x + n_z) * b + k_rows * n_z;
  return values * value_bytes + sizeof(unsigned);
}

void check_kernel_matrix_fits(std::size_t n_x, std::size_t n_y, std::size_t n_features, std::size_t value_bytes,
                              int device) {
  const bool symmetric = n_y == 0;
  require_device_memory(kernel_operator_bytes(n_x, n_y, n_features, 0, value_bytes, symmetric, true),
                        "the kernel matrix", device);
}

template <typename T>
void kernel_matrix(const T* X, std::size_t n_x, const T* Y, std::size_t n_y, std::size_t n_features,
                   const KernelSpec& spec, T* out, int device) {
  const DeviceKernel<T> kernel(X, n_x, Y, n_y, n_features, spec, true, 0, device);
  kernel.download(out);
}

template <typename T>
void kernel_product(const T* X, std::size_t n_x, const T* Z, std::size_t n_z, std::size_t n_features,
                    const KernelSpec& spec, const T* B, std::size_t b, T* Y, int device) {
  DeviceKernel<T> kernel(X, n_x, Z, n_z, n_features, spec, false, b, device);
  if (n_x == 0 || b == 0) return;
  if (Z && n_z == 0) {  // K has no columns: cuBLAS rejects k = 0
    std::fill(Y, Y + n_x * b, T(0));
    return;
  }
  kernel.times(B, b, Y);
}

template <typename T>
KernelEigenResult<T> kernel_top_eigsh(const ConstMatrixRef<T>& X, const KernelSpec& spec, bool center, bool store,
                                      int n_components, const ConstMatrixRef<T>& start, double tol, int max_iter,
                                      int n_threads, int device, const std::function<void(int)>& on_product) {
  require(X.allFinite(), "X: contains NaN or infinity");
  require(start.rows() == X.rows(), "start: must have one row per sample of X");
  ThreadGuard guard(n_threads);
  const RowMatrix<T> rows = X;  // one contiguous copy, whatever the view's strides
  const std::size_t n = static_cast<std::size_t>(X.rows()), columns = static_cast<std::size_t>(start.cols()) + 1;
  DeviceKernel<T> kernel(rows.data(), n, nullptr, 0, static_cast<std::size_t>(X.cols()), spec, store, columns,
                         device);
  RowMatrix<T> B, KB;
  const KernelTimes times = [&](const RowMatrix<double>& B_double, RowMatrix<double>& KB_double) {
    B = B_double.cast<T>();
    KB.resize(B.rows(), B.cols());
    kernel.times(B.data(), static_cast<std::size_t>(B.cols()), KB.data());
    KB_double = KB.template cast<double>();
  };
  return centred_top_eigsh<T>(times, X.rows(), center, n_components, start, tol, max_iter, guard.threads(),
                              on_product);
}

template void kernel_matrix<float>(const float*, std::size_t, const float*, std::size_t, std::size_t,
                                   const KernelSpec&, float*, int);
template void kernel_matrix<double>(const double*, std::size_t, const double*, std::size_t, std::size_t,
                                    const KernelSpec&, double*, int);
template void kernel_product<float>(const float*, std::size_t, const float*, std::size_t, std::size_t,
                                    const KernelSpec&, const float*, std::size_t, float*, int);
template void kernel_product<double>(const double*, std::size_t, const double*, std::size_t, std::size_t,
                                     const KernelSpec&, const double*, std::size_t, double*, int);
template KernelEigenResult<float> kernel_top_eigsh<float>(const ConstMatrixRef<float>&, const KernelSpec&, bool, bool,
                                                          int, const ConstMatrixRef<float>&, double, int, int, int,
                                                          const std::function<void(int)>&);
template KernelEigenResult<double> kernel_top_eigsh<double>(const ConstMatrixRef<double>&, const KernelSpec&, bool,
                                                            bool, int, const ConstMatrixRef<double>&, double, int,
                                                            int, int, const std::function<void(int)>&);

}  // namespace rkm::cuda
