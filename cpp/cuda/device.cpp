// The CUDA path's devices and kernel matrices, host side (see device.hpp); the GPU kernels are in *.cu.
#include "cuda/device.hpp"

#include "cuda/launch.hpp"

#include <cuda_runtime.h>

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

void check_kernel_matrix_fits(std::size_t n_x, std::size_t n_y, std::size_t n_features, std::size_t value_bytes,
                              int device) {
  const RuntimeStatus status = runtime_status();
  if (status.devices.empty()) throw device_error("device='cuda': " + status.reason);
  if (device < 0 || device >= static_cast<int>(status.devices.size()))
    throw device_error("device: no CUDA device " + std::to_string(device) + " (" +
                       std::to_string(status.devices.size()) + " visible)");
  const std::size_t columns = n_y == 0 ? n_x : n_y;
  const std::size_t needed = ((n_x + n_y) * n_features + n_x * columns) * value_bytes + sizeof(unsigned);
  const DeviceInfo& info = status.devices[device];
  if (needed > info.free_bytes)
    throw device_memory_error("device='cuda': the kernel matrix needs " + gib(needed) + " of GPU memory, " +
                              info.name + " has " + gib(info.free_bytes) +
                              " free; use fewer samples, float32 or device='cpu'");
}

template <typename T>
void kernel_matrix(const T* X, std::size_t n_x, const T* Y, std::size_t n_y, std::size_t n_features,
                   const KernelSpec& spec, T* out, int device) {
  const bool symmetric = Y == nullptr;
  const std::size_t limit = static_cast<std::size_t>(std::numeric_limits<int>::max());
  if (n_x > limit || n_y > limit || n_features > limit)
    throw std::invalid_argument("X: more than 2^31 - 1 rows or features for the CUDA path");
  check_kernel_matrix_fits(n_x, symmetric ? 0 : n_y, n_features, sizeof(T), device);
  if (symmetric) n_y = n_x;
  check(cudaSetDevice(device), "cudaSetDevice");
  DeviceBuffer x(n_x * n_features * sizeof(T)), k(n_x * n_y * sizeof(T)), flags(sizeof(unsigned));
  check(cudaMemcpy(x.as<T>(), X, n_x * n_features * sizeof(T), cudaMemcpyHostToDevice), "copying X");
  check(cudaMemset(flags.as<unsigned>(), 0, sizeof(unsigned)), "cudaMemset");
  const T* y_device = x.as<T>();
  std::unique_ptr<DeviceBuffer> y_buffer;
  if (!symmetric) {
    y_buffer = std::make_unique<DeviceBuffer>(n_y * n_features * sizeof(T));
    check(cudaMemcpy(y_buffer->as<T>(), Y, n_y * n_features * sizeof(T), cudaMemcpyHostToDevice), "copying Y");
    y_device = y_buffer->as<T>();
  }
  check(launch_kernel_matrix<T>(x.as<T>(), int(n_x), y_device, int(n_y), int(n_features),
                                static_cast<KernelCode>(spec.type), spec.gamma, spec.degree, spec.coef0, symmetric,
                                k.as<T>(), flags.as<unsigned>()),
        "launching the kernel-matrix kernel");
  check(cudaMemcpy(out, k.as<T>(), n_x * n_y * sizeof(T), cudaMemcpyDeviceToHost), "copying K");
  unsigned found = 0;
  check(cudaMemcpy(&found, flags.as<unsigned>(), sizeof(unsigned), cudaMemcpyDeviceToHost), "copying the flags");
  ValueFlags value_flags;
  value_flags.non_finite = (found & kNonFiniteFlag) != 0;
  value_flags.negative_base = (found & kNegativeBaseFlag) != 0;
  report_value_flags<T>(spec, {value_flags});
}

template void kernel_matrix<float>(const float*, std::size_t, const float*, std::size_t, std::size_t,
                                   const KernelSpec&, float*, int);
template void kernel_matrix<double>(const double*, std::size_t, const double*, std::size_t, std::size_t,
                                    const KernelSpec&, double*, int);

}  // namespace rkm::cuda
