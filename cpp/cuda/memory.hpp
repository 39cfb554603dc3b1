// Device memory and error checks of the CUDA path's host code (device.cpp, blocks.cpp).
#pragma once

#include "core/common.hpp"

#include <cuda_runtime.h>

#include <cstddef>
#include <string>
#include <utility>

namespace rkm::cuda {

inline void check(cudaError_t status, const char* what) {
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

}  // namespace rkm::cuda
