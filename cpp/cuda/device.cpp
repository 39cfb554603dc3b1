// The CUDA path's devices, kernel matrices and kernel operators, host side (see device.hpp); the GPU kernels are
// in *.cu, the GEMMs in cuBLAS (cublas.cpp).
#include "cuda/device.hpp"

#include "core/krylov.hpp"
#include "cuda/blocks.hpp"
#include "cuda/cublas.hpp"
#include "cuda/launch.hpp"
#include "cuda/memory.hpp"

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

std::string gib(std::size_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.3g GiB", static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
  return text;
}

}  // namespace

RuntimeStatus runtime_status(int memory_of) {
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
    if (index == memory_of) {
      int current = 0;  // the thread's device, shared with CuPy and PyTorch through the driver: restored below
      cudaGetDevice(&current);
      if (cudaSetDevice(index) == cudaSuccess)
        info.free_known = cudaMemGetInfo(&info.free_bytes, &info.total_bytes) == cudaSuccess;
      cudaSetDevice(current);
    }
    status.devices.push_back(info);
  }
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
  const RuntimeStatus status = runtime_status(device);
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

// K(X, Z) on one device: X and Z uploaded once (in double, with their squared norms), K stored whole or evaluated
// a band of rows at a time, from cuBLAS inner products (laplacian: directly); products K B by cuBLAS in T.
// Z == nullptr means Z = X, with the exact diagonal.
template <typename T>
class DeviceKernel {
 public:
  // X and Z in host memory, or (on_device) in device `device`'s memory. Products with host blocks (times) go
  // through buffers of max_columns columns; with none, only times_device serves. The memory check counts
  // `extra_bytes` that the caller will allocate besides.
  DeviceKernel(const T* X, std::size_t n_x, const T* Z, std::size_t n_z, std::size_t d, const KernelSpec& spec,
               bool store, std::size_t max_columns, int device, bool on_device = false, std::size_t extra_bytes = 0)
      : spec_(spec), n_x_(n_x), n_z_(Z ? n_z : n_x), d_(d), symmetric_(Z == nullptr), store_(store),
        band_(band_rows(n_x, n_z_, sizeof(T), store)), gram_rows_(rows_within(kGramBytes, band_, n_z_, 8)),
        max_columns_(max_columns), device_(device) {
    require_int_sizes(n_x_, n_z_, d_);
    require(d_ > 0, "X: needs at least one feature");
    require_device_memory(
        kernel_operator_bytes(n_x_, n_z_, d_, max_columns, sizeof(T), symmetric_, store_, from_gram(spec.type)) +
            extra_bytes,
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
    }
    if (max_columns > 0 && !on_device) {
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
    times_on_device(b_->get(), c, c, y_->get(), c);
    check(cudaMemcpy(Y, y_->get(), n_x_ * c * sizeof(T), cudaMemcpyDeviceToHost), "copying K B");
    report_flags();
  }

  // The same with B and Y in the device's memory; returns once Y is complete.
  void times_device(const T* B, std::size_t c, T* Y) {
    check(cudaSetDevice(device_), "cudaSetDevice");
    check(launch_check_finite<T>(B, int(n_z_), int(c), int(c), flags_->get()), "launching the finiteness check");
    if (read_flags() & kNonFiniteFlag) throw std::invalid_argument("B: contains NaN or infinity");
    times_on_device(B, c, c, Y, c);
    report_flags();
  }

  // Y = K B for B (n_z x c) and Y (n_x x c) in the device's memory, row-major with rows ldb and ldy values apart,
  // queued on the default stream; report_flags() then checks the values K had.
  void times_on_device(const T* B, std::size_t ldb, std::size_t c, T* Y, std::size_t ldy) {
    for (std::size_t r0 = 0; r0 < n_x_; r0 += band_) {
      const std::size_t rows = std::min(band_, n_x_ - r0);
      const T* band = k_->get() + (store_ ? r0 * n_z_ : 0);
      if (!store_) {
        throw_if_interrupted();
        evaluate(r0, rows, k_->get());
      }
      gemm<T>(device_, false, false, int(rows), int(c), int(n_z_), T(1), band, int(n_z_), B, int(ldb), T(0),
              Y + r0 * ldy, int(ldy));
    }
  }

  void report_flags() const {
    const unsigned found = read_flags();
    ValueFlags value_flags;
    value_flags.non_finite = (found & kNonFiniteFlag) != 0;
    value_flags.negative_base = (found & kNegativeBaseFlag) != 0;
    report_value_flags<T>(spec_, {value_flags});
  }

 private:

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
      // G (count x n_z) = X_I Z^T.
      const int ld = int(std::max<std::size_t>(1, d_));
      gemm<double>(device_, false, true, int(count), int(n_z_), int(d_), 1.0, x_values + first * d_, ld,
                   z.values->get(), ld, 0.0, gram_->get(), int(n_z_));
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

std::size_t krylov_device_bytes(std::size_t n, int n_components, std::size_t block_columns, std::size_t value_bytes) {
  const std::size_t columns = std::size_t(krylov_workspace_columns(n_components, Eigen::Index(block_columns)));
  const std::size_t first_product = 2 * n * (block_columns + 1) * value_bytes + n * sizeof(double);  // with c
  return columns * n * value_bytes + first_product + kConversionBytes;
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

namespace {

// The products of kernel_top_eigsh on the device: K Q, or the centred K_c Q by centred_top_eigsh's rule
// (cpp/core/kernel_operator.cpp), K_c Q = K Q - 1 (c^T Q) - c (1^T Q) + g 1 (1^T Q) with c the column means of K and
// g their mean. The first product carries an extra column 1/n, whose product gives c, as on the CPU.
template <typename T>
class CentredProducts {
 public:
  using Ops = CudaOps<T>;

  CentredProducts(DeviceKernel<T>& kernel, const Ops& ops, Eigen::Index n, bool center,
                  const std::function<void(int)>& on_product)
      : kernel_(kernel), ops_(ops), n_(n), center_(center), on_product_(on_product) {}

  void operator()(const typename Ops::ConstView& Q, typename Ops::View Y) {
    const Eigen::Index b = Q.cols();
    if (center_ && means_.rows() == 0) {
      typename Ops::Matrix B = ops_.matrix(n_, b + 1), KB = ops_.matrix(n_, b + 1);
      ops_.copy(Q, ops_.columns(B, 0, b));
      check(launch_fill<T>(B.data() + b, int(n_), 1, int(b + 1), T(1.0 / double(n_))), "launching a fill");
      multiply(B, KB);
      ops_.copy(ops_.columns(KB, 0, b), Y);
      means_ = ops_.in_double().matrix(n_, 1);
      check(launch_convert<T, double>(KB.data() + b, int(b + 1), int(n_), 1, means_.data(), 1),
            "launching a conversion");
      grand_mean_ = ops_.in_double().download(means_).mean();
    } else {
      multiply(Q, Y);
    }
    if (center_) centre(Q, Y);
    if (on_product_) {
      on_product_(++products_);
      check(cudaSetDevice(ops_.device()), "cudaSetDevice");  // the callback (Python) may have switched it
    }
  }

  // The column means of K (zeros without centring) and their mean.
  Vector<T> column_means() const {
    if (means_.rows() == 0) return Vector<T>::Zero(n_);
    return ops_.in_double().download(means_).col(0).template cast<T>();
  }
  double grand_mean() const { return grand_mean_; }

 private:
  void multiply(const typename Ops::ConstView& B, typename Ops::View Y) {
    kernel_.times_on_device(B.data, std::size_t(B.stride), std::size_t(B.cols()), Y.data, std::size_t(Y.stride));
    kernel_.report_flags();
  }

  // Y <- Y - 1 (c^T Q - g 1^T Q) - c (1^T Q).
  void centre(const typename Ops::ConstView& Q, typename Ops::View Y) {
    const CudaOps<double> in_double = ops_.in_double();
    const int b = int(Q.cols());
    DeviceMatrix<double> sums = in_double.matrix(2, b);
    check(launch_centring_sums<T>(Q.data, int(n_), b, int(Q.stride), means_.data(), sums.data()),
          "launching the centring sums");
    RowMatrix<double> terms = in_double.download(sums);  // rows: c^T Q, 1^T Q
    terms.row(0) -= grand_mean_ * terms.row(1);
    const DeviceMatrix<double> device_terms = in_double.upload(terms);
    check(launch_centre_columns<T>(Y.data, int(n_), b, int(Y.stride), means_.data(), device_terms.data(),
                                   device_terms.data() + b),
          "launching the centring");
  }

  DeviceKernel<T>& kernel_;
  const Ops& ops_;
  Eigen::Index n_;
  bool center_;
  const std::function<void(int)>& on_product_;
  DeviceMatrix<double> means_;
  double grand_mean_ = 0.0;
  int products_ = 0;
};

}  // namespace

template <typename T>
KernelEigenResult<T> kernel_top_eigsh(const ConstMatrixRef<T>& X, const KernelSpec& spec, bool center, bool store,
                                      int n_components, const ConstMatrixRef<T>& start, double tol, int max_iter,
                                      int n_threads, int device, const std::function<void(int)>& on_product) {
  require(X.allFinite(), "X: contains NaN or infinity");
  require(start.rows() == X.rows(), "start: must have one row per sample of X");
  ThreadGuard guard(n_threads);
  const RowMatrix<T> rows = X;  // one contiguous copy, whatever the view's strides
  const std::size_t n = static_cast<std::size_t>(X.rows());
  DeviceKernel<T> kernel(rows.data(), n, nullptr, 0, static_cast<std::size_t>(X.cols()), spec, store, 0, device,
                         false, krylov_device_bytes(n, n_components, std::size_t(start.cols()), sizeof(T)));
  const CudaOps<T> ops(std::make_shared<const BlockPool>(device), guard.threads());
  CentredProducts<T> products(kernel, ops, X.rows(), center, on_product);
  const krylov::Product<T, CudaOps> apply = [&products](const typename CudaOps<T>::ConstView& Q,
                                                        typename CudaOps<T>::View Y) { products(Q, Y); };
  KernelEigenResult<T> result;
  result.eigen = krylov::top_eigsh<T, CudaOps>(ops, apply, X.rows(), n_components, start, tol, max_iter);
  result.column_means = products.column_means();
  result.grand_mean = products.grand_mean();
  return result;
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
