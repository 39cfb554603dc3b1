// The CUDA path: devices and kernel matrices on an NVIDIA GPU. This header has no CUDA types, so the bindings
// and the CPU core include it; the definitions are in device.cu, compiled only with the RKM_CUDA option.
#pragma once

#include "core/kernels.hpp"

#include <cstddef>
#include <string>
#include <vector>

namespace rkm::cuda {

struct DeviceInfo {
  int index = 0;
  std::string name;
  std::size_t total_bytes = 0;
  std::size_t free_bytes = 0;
  int compute_major = 0;
  int compute_minor = 0;
  int multiprocessors = 0;
};

// What the CUDA runtime reports: versions (major * 1000 + minor * 10, 0 when unknown), the devices, and why
// there are none (empty when there are).
struct RuntimeStatus {
  int runtime_version = 0;
  int driver_version = 0;
  std::vector<DeviceInfo> devices;
  std::string reason;
};

RuntimeStatus runtime_status();

// Throws device_error when device `device` cannot be used, device_memory_error when K(X, Y) (n_y = 0: K(X, X))
// with its inputs does not fit the device's free memory. Allocates nothing.
void check_kernel_matrix_fits(std::size_t n_x, std::size_t n_y, std::size_t n_features, std::size_t value_bytes,
                              int device);

// K(X, Y) on device `device` (Y == nullptr: Y = X), X (n_x x d) and Y (n_y x d) row-major on the host, into the
// row-major host buffer out (n_x x n_y). Sums run in double for both dtypes; the diagonal of K(X, X) takes the
// exact k(x, x) where the kernel has one, as the CPU core does. Throws device_error when the device cannot be
// used or lacks the memory (checked before allocating), and std::invalid_argument (the CPU core's messages) for
// non-finite kernel values.
template <typename T>
void kernel_matrix(const T* X, std::size_t n_x, const T* Y, std::size_t n_y, std::size_t n_features,
                   const KernelSpec& spec, T* out, int device);

}  // namespace rkm::cuda
