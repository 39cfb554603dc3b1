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
#include <utility>
#include <vector>

namespace rkm::cuda {

namespace {

// KernelCode mirrors KernelType, so that nvcc never sees the core's (Eigen) headers.
#define RKM_KERNEL_CODE_MATCHES(type, name) \
  static_assert(static_cast<int>(KernelType::type) == static_cast<int>(KernelCode::type), "KernelCode: " name);
RKM_KERNELS(RKM_KERNEL_CODE_MATCHES)
#undef RKM_KERNEL_CODE_MATCHES

void check(cudaError_t status, const char* what) {
  if (status == cudaErrorMemoryAllocation)  // what the check before allocating could not foresee
    throw device_memory_error(std::string("CUDA: ") + what + " failed: out of GPU memory");
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
  // Hands the memory to the caller, who frees it with free_device_memory.
  void* release() { return std::exchange(pointer_, nullptr); }
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
  int current = 0;  // the thread's device, shared with CuPy and PyTorch through the driver: restored below
  cudaGetDevice(&current);
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
  if (count > 0) cudaSetDevice(current);
  cudaGetLastError();
  return status;
}

namespace {

// Rows of K per band of the matrix-free operator: at most kBandBytes of K, and at most kMaxBandRows (the
// laplacian kernel's grid has a y extent of 65535 blocks of 16 rows). The inner products of a band come from
// cuBLAS in sub-bands of at most kGramBytes of doubles.
constexpr std::size_t kBandBytes = std::size_t(512) << 20;
constexpr std::size_t kGramBytes = std::size_t(256) << 20;
constexpr std::size_t kMaxBandRows = std::size_t(1) << 19;

std::size_t rows_within(std::size_t bytes, std::size_t n_x, std::size_t n_z, std::size_t value_bytes) {
  const std::size_t rows = bytes / std::max<std::size_t>(1, n_z * value_bytes);
  return std::max<std::size_t>(1, std::min({n_x, rows, kMaxBandRows}));
}

std::size_t band_rows(std::size_t n_x, std::size_t n_z, std::size_t value_bytes, bool store) {
  return store ? n_x : rows_within(kBandBytes, n_x, n_z, value_bytes);
}

// Every kernel but laplacian is a transform of inner products, which cuBLAS computes.
bool from_gram(KernelType type) { return type != KernelType::laplacian; }

// Device memory the checks keep free beyond what rkm allocates: cuBLAS's workspace and the modules it loads.
constexpr std::size_t kDeviceMemoryMargin = std::size_t(256) << 20;

// Throws unless device `device` exists and has `needed` bytes (and the margin) free; allocates nothing.
void require_device_memory(std::size_t needed, const std::string& what, int device) {
  needed += kDeviceMemoryMargin;
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

// The data as the kernel reads it, in double (as the CPU core's KernelBlocks): rbf shifted by X's mean, which
// removes most of the cancellation in ||x||^2 + ||z||^2 - 2 x^T z; and the squared norms.
struct KernelInputs {
  RowMatrix<double> values;
  Eigen::VectorXd squared_norms;
};

// rbf reads x - z only, so both sets shift by X's mean (an empty shift: none), as in the CPU core.
template <typename T>
Eigen::RowVectorXd kernel_shift(const T* X, std::size_t n_x, std::size_t d, KernelType type) {
  if (type != KernelType::rbf) return {};
  const Eigen::Map<const RowMatrix<T>> view(X, Eigen::Index(n_x), Eigen::Index(d));
  return view.template cast<double>().colwise().mean();
}

template <typename T>
KernelInputs kernel_inputs(const T* A, std::size_t rows, std::size_t d, const Eigen::RowVectorXd& shift) {
  const Eigen::Map<const RowMatrix<T>> view(A, Eigen::Index(rows), Eigen::Index(d));
  KernelInputs inputs{view.template cast<double>(), {}};
  if (shift.size() != 0) inputs.values.rowwise() -= shift;
  inputs.squared_norms = inputs.values.rowwise().squaredNorm();
  return inputs;
}

// Device memory freed on every exit path, holding `count` values of T.
template <typename T>
class DeviceArray : public DeviceBuffer {
 public:
  explicit DeviceArray(std::size_t count) : DeviceBuffer(count * sizeof(T) + 1) {}
  T* get() const { return as<T>(); }
  void upload(const T* from, std::size_t count, const char* what) const {
    check(cudaMemcpy(get(), from, count * sizeof(T), cudaMemcpyHostToDevice), what);
  }
};

// K(X, Z) on one device: X and Z uploaded once (in double, with their squared norms), K stored whole or evaluated
// a band of rows at a time, from cuBLAS inner products (laplacian: directly); products K B by cuBLAS in T.
// Z == nullptr means Z = X, with the exact diagonal.
template <typename T>
class DeviceKernel {
 public:
  // X and Z in host memory, or (on_device) in device `device`'s memory, which then holds B and Y of the products
  // too.
  DeviceKernel(const T* X, std::size_t n_x, const T* Z, std::size_t n_z, std::size_t d, const KernelSpec& spec,
               bool store, std::size_t max_columns, int device, bool on_device = false)
      : spec_(spec), n_x_(n_x), n_z_(Z ? n_z : n_x), d_(d), symmetric_(Z == nullptr), store_(store),
        band_(band_rows(n_x, n_z_, sizeof(T), store)), gram_rows_(rows_within(kGramBytes, band_, n_z_, 8)),
        max_columns_(max_columns), device_(device) {
    require_int_sizes(n_x_, n_z_, d_);
    require(d_ > 0, "X: needs at least one feature");
    require_device_memory(
        kernel_operator_bytes(n_x_, n_z_, d_, max_columns, sizeof(T), symmetric_, store_, from_gram(spec.type)),
        store_ ? "the kernel matrix" : "the kernel operator's bands", device_);
    check(cudaSetDevice(device_), "cudaSetDevice");
    flags_ = std::make_unique<DeviceArray<unsigned>>(1);
    if (on_device) {
      const std::unique_ptr<DeviceArray<double>> shift = device_shift(X);
      x_ = device_inputs(X, n_x_, shift.get(), "X");
      if (!symmetric_) z_ = device_inputs(Z, n_z_, shift.get(), "Y");
    } else {
      const Eigen::RowVectorXd shift = kernel_shift<T>(X, n_x_, d_, spec.type);
      x_ = upload_inputs(kernel_inputs<T>(X, n_x_, d_, shift), "copying X");
      if (!symmetric_) z_ = upload_inputs(kernel_inputs<T>(Z, n_z_, d_, shift), "copying Y");
      b_ = std::make_unique<DeviceArray<T>>(n_z_ * max_columns);
      y_ = std::make_unique<DeviceArray<T>>(n_x_ * max_columns);
    }
    if (from_gram(spec.type)) gram_ = std::make_unique<DeviceArray<double>>(gram_rows_ * n_z_);
    k_ = std::make_unique<DeviceArray<T>>(band_ * n_z_);
    clear_flags();
    if (store_) evaluate(0, n_x_, k_->get());
  }

  // The stored K, handed to the caller (free_device_memory) after the values' checks.
  T* release_kernel_matrix() {
    report_flags();
    return static_cast<T*>(k_->release());
  }

  // out (n_x x n_z, host) = the stored K.
  void download(T* out) const {
    check(cudaMemcpy(out, k_->get(), n_x_ * n_z_ * sizeof(T), cudaMemcpyDeviceToHost), "copying K");
    report_flags();
  }

  // Y (n_x x c, host, row-major) = K B for B (n_z x c, host, row-major), c <= max_columns().
  void times(const T* B, std::size_t c, T* Y) {
    if (c > max_columns_) throw std::logic_error("DeviceKernel::times: more columns than its buffers hold");
    check(cudaSetDevice(device_), "cudaSetDevice");
    b_->upload(B, n_z_ * c, "copying B");
    times_on_device(b_->get(), c, y_->get());
    check(cudaMemcpy(Y, y_->get(), n_x_ * c * sizeof(T), cudaMemcpyDeviceToHost), "copying K B");
    report_flags();
  }

  // The same with B and Y in the device's memory; returns once Y is complete.
  void times_device(const T* B, std::size_t c, T* Y) {
    check(cudaSetDevice(device_), "cudaSetDevice");
    check(launch_check_finite<T>(B, n_z_ * c, flags_->get()), "launching the finiteness check");
    if (read_flags() & kNonFiniteFlag) throw std::invalid_argument("B: contains NaN or infinity");
    times_on_device(B, c, Y);
    report_flags();
  }

 private:
  void times_on_device(const T* B, std::size_t c, T* Y) {
    // Row-major B and Y are their transposes in cuBLAS's column-major view, and a row-major band K_I is K_I^T:
    // Y_I^T (c x rows) = B^T (c x n_z) K_I^T (n_z x rows).
    for (std::size_t r0 = 0; r0 < n_x_; r0 += band_) {
      const std::size_t rows = std::min(band_, n_x_ - r0);
      const T* band = k_->get() + (store_ ? r0 * n_z_ : 0);
      if (!store_) {
        throw_if_interrupted();
        evaluate(r0, rows, k_->get());
      }
      gemm<T>(device_, false, int(c), int(rows), int(n_z_), B, int(c), band, int(n_z_), Y + r0 * c, int(c));
    }
  }

  struct DeviceInputs {
    std::unique_ptr<DeviceArray<double>> values, squared_norms;
  };

  static DeviceInputs upload_inputs(const KernelInputs& inputs, const char* what) {
    DeviceInputs device{std::make_unique<DeviceArray<double>>(std::size_t(inputs.values.size())),
                        std::make_unique<DeviceArray<double>>(std::size_t(inputs.squared_norms.size()))};
    device.values->upload(inputs.values.data(), std::size_t(inputs.values.size()), what);
    device.squared_norms->upload(inputs.squared_norms.data(), std::size_t(inputs.squared_norms.size()), what);
    return device;
  }

  // Rows r0 .. r0 + rows of K into out (rows x n_z).
  void evaluate(std::size_t r0, std::size_t rows, T* out) const {
    if (n_z_ == 0) return;  // an empty grid is a launch error
    const DeviceInputs& z = symmetric_ ? x_ : z_;
    const double* x_values = x_.values->get();
    const std::size_t step = from_gram(spec_.type) ? gram_rows_ : kMaxBandRows;
    for (std::size_t first = r0; first < r0 + rows; first += step) {
      const std::size_t count = std::min(step, r0 + rows - first);
      const DiagonalOffset diagonal = symmetric_ ? DiagonalOffset(first) : -1;
      T* target = out + (first - r0) * n_z_;
      if (!from_gram(spec_.type)) {
        check(launch_laplacian_matrix<T>(x_values + first * d_, int(count), z.values->get(), int(n_z_), int(d_),
                                         spec_.gamma, diagonal, target, flags_->get()),
              "launching the laplacian kernel");
        continue;
      }
      // G (count x n_z, row-major) = X_I Z^T, which is Z X_I^T (n_z x count) in cuBLAS's column-major view.
      const int ld = int(std::max<std::size_t>(1, d_));
      gemm<double>(device_, true, int(n_z_), int(count), int(d_), z.values->get(), ld, x_values + first * d_, ld,
                   gram_->get(), int(n_z_));
      check(launch_kernel_from_gram<T>(gram_->get(), x_.squared_norms->get() + first, z.squared_norms->get(),
                                       int(count), int(n_z_), static_cast<KernelCode>(spec_.type), spec_.gamma,
                                       spec_.degree, spec_.coef0, diagonal, target, flags_->get()),
            "launching the kernel-value kernel");
    }
  }

  // rbf's shift (X's column means) computed on the device; null for the other kernels.
  std::unique_ptr<DeviceArray<double>> device_shift(const T* X) const {
    if (spec_.type != KernelType::rbf) return nullptr;
    auto means = std::make_unique<DeviceArray<double>>(d_);
    check(launch_column_means<T>(X, int(n_x_), int(d_), means->get()), "launching the column means");
    return means;
  }

  // kernel_inputs on the device, from rows already there; `name` is the argument a NaN is reported for.
  DeviceInputs device_inputs(const T* A, std::size_t rows, const DeviceArray<double>* shift, const char* name) {
    DeviceInputs inputs{std::make_unique<DeviceArray<double>>(rows * d_),
                        std::make_unique<DeviceArray<double>>(rows)};
    clear_flags();
    check(launch_kernel_inputs<T>(A, int(rows), int(d_), shift ? shift->get() : nullptr, inputs.values->get(),
                                  inputs.squared_norms->get(), flags_->get()),
          "launching the input preparation");
    if (read_flags() & kNonFiniteFlag) throw std::invalid_argument(std::string(name) + ": contains NaN or infinity");
    return inputs;
  }

  void clear_flags() const { check(cudaMemset(flags_->get(), 0, sizeof(unsigned)), "cudaMemset"); }

  unsigned read_flags() const {
    unsigned found = 0;
    check(cudaMemcpy(&found, flags_->get(), sizeof(unsigned), cudaMemcpyDeviceToHost), "copying the flags");
    return found;
  }

  void report_flags() const {
    const unsigned found = read_flags();
    ValueFlags value_flags;
    value_flags.non_finite = (found & kNonFiniteFlag) != 0;
    value_flags.negative_base = (found & kNegativeBaseFlag) != 0;
    report_value_flags<T>(spec_, {value_flags});
  }

  KernelSpec spec_;
  std::size_t n_x_, n_z_, d_;
  bool symmetric_, store_;
  std::size_t band_, gram_rows_, max_columns_;
  int device_;
  DeviceInputs x_, z_;
  std::unique_ptr<DeviceArray<double>> gram_;
  std::unique_ptr<DeviceArray<T>> k_, b_, y_;
  std::unique_ptr<DeviceArray<unsigned>> flags_;
};

}  // namespace

std::size_t kernel_operator_bytes(std::size_t n_x, std::size_t n_z, std::size_t n_features, std::size_t b,
                                  std::size_t value_bytes, bool symmetric, bool store, bool gram) {
  if (symmetric) n_z = n_x;
  const std::size_t k_rows = band_rows(n_x, n_z, value_bytes, store);
  const std::size_t inputs = (n_x + (symmetric ? 0 : n_z)) * (n_features + 1);  // doubles, with the norms
  const std::size_t gram_values = gram ? rows_within(kGramBytes, k_rows, n_z, 8) * n_z : 0;
  const std::size_t values = (n_x + n_z) * b + k_rows * n_z;
  return (inputs + n_features + gram_values) * 8 + values * value_bytes + sizeof(unsigned);
}

void check_kernel_matrix_fits(std::size_t n_x, std::size_t n_y, std::size_t n_features, std::size_t value_bytes,
                              const KernelSpec& spec, int device) {
  const bool symmetric = n_y == 0;
  require_device_memory(
      kernel_operator_bytes(n_x, n_y, n_features, 0, value_bytes, symmetric, true, from_gram(spec.type)),
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
T* kernel_matrix_on_device(const T* X, std::size_t n_x, const T* Y, std::size_t n_y, std::size_t n_features,
                           const KernelSpec& spec, int device) {
  DeviceKernel<T> kernel(X, n_x, Y, n_y, n_features, spec, true, 0, device, true);
  return kernel.release_kernel_matrix();
}

template <typename T>
T* kernel_product_on_device(const T* X, std::size_t n_x, const T* Z, std::size_t n_z, std::size_t n_features,
                            const KernelSpec& spec, const T* B, std::size_t b, int device) {
  DeviceKernel<T> kernel(X, n_x, Z, n_z, n_features, spec, false, b, device, true);
  DeviceArray<T> out(n_x * b);
  if (n_x != 0 && b != 0) {
    if (Z && n_z == 0) {  // K has no columns: cuBLAS rejects k = 0
      check(cudaMemset(out.get(), 0, n_x * b * sizeof(T)), "cudaMemset");
    } else {
      kernel.times_device(B, b, out.get());
    }
  }
  check(cudaStreamSynchronize(nullptr), "cudaStreamSynchronize");  // the legacy default stream rkm runs on
  return static_cast<T*>(out.release());
}

void free_device_memory(void* pointer) { cudaFree(pointer); }

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
  // The solver may multiply wider blocks than its own (the final products of n_components columns, or the whole
  // identity of a small problem): those go through in chunks of the buffers' width.
  const KernelTimes times = [&](const RowMatrix<double>& B_double, RowMatrix<double>& KB_double) {
    KB_double.resize(B_double.rows(), B_double.cols());
    for (Eigen::Index c0 = 0; c0 < B_double.cols(); c0 += Eigen::Index(columns)) {
      const Eigen::Index width = std::min(Eigen::Index(columns), B_double.cols() - c0);
      B = B_double.middleCols(c0, width).template cast<T>();
      KB.resize(B.rows(), width);
      kernel.times(B.data(), std::size_t(width), KB.data());
      KB_double.middleCols(c0, width) = KB.template cast<double>();
    }
  };
  return centred_top_eigsh<T>(times, X.rows(), center, n_components, start, tol, max_iter, guard.threads(),
                              on_product);
}

template void kernel_matrix<float>(const float*, std::size_t, const float*, std::size_t, std::size_t,
                                   const KernelSpec&, float*, int);
template void kernel_matrix<double>(const double*, std::size_t, const double*, std::size_t, std::size_t,
                                    const KernelSpec&, double*, int);
template float* kernel_matrix_on_device<float>(const float*, std::size_t, const float*, std::size_t, std::size_t,
                                               const KernelSpec&, int);
template double* kernel_matrix_on_device<double>(const double*, std::size_t, const double*, std::size_t,
                                                 std::size_t, const KernelSpec&, int);
template float* kernel_product_on_device<float>(const float*, std::size_t, const float*, std::size_t, std::size_t,
                                                const KernelSpec&, const float*, std::size_t, int);
template double* kernel_product_on_device<double>(const double*, std::size_t, const double*, std::size_t,
                                                  std::size_t, const KernelSpec&, const double*, std::size_t, int);
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
