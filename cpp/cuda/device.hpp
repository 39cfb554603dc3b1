// The CUDA path: devices, kernel matrices, kernel products and kernel eigenpairs on an NVIDIA GPU. This header
// has no CUDA types, so the bindings include it; the definitions (device.cpp, host code, and the GPU kernels in
// *.cu) are compiled only with the RKM_CUDA option.
#pragma once

#include "core/kernel_operator.hpp"
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
  bool free_known = false;  // free_bytes was queried (see runtime_status)
};

// What the CUDA runtime reports: versions (major * 1000 + minor * 10, 0 when unknown), the devices, and why
// there are none (empty when there are).
struct RuntimeStatus {
  int runtime_version = 0;
  int driver_version = 0;
  std::vector<DeviceInfo> devices;
  std::string reason;
};

// `memory_of`: the device whose free memory is queried, which creates its CUDA context (the others' cost none:
// a context holds hundreds of MiB of each GPU it is created on); -1: none.
RuntimeStatus runtime_status(int memory_of = -1);

// Throws device_error when device `device` cannot be used, device_memory_error when K(X, Y) (n_y = 0: K(X, X))
// with its inputs does not fit the device's free memory. Allocates nothing.
void check_kernel_matrix_fits(std::size_t n_x, std::size_t n_y, std::size_t n_features, std::size_t value_bytes,
                              const KernelSpec& spec, int device);

// K(X, Y) on device `device` (Y == nullptr: Y = X), X (n_x x d) and Y (n_y x d) row-major on the host, into the
// row-major host buffer out (n_x x n_y). Inner products (cuBLAS) and sums run in double for both dtypes; the
// diagonal of K(X, X) takes the exact k(x, x) where the kernel has one, as the CPU core does. cuBLAS must be
// loaded (load_cublas). Throws device_error when the device cannot be used, device_memory_error when it lacks
// the memory (checked before allocating), and std::invalid_argument (the CPU core's messages) for non-finite
// kernel values.
template <typename T>
void kernel_matrix(const T* X, std::size_t n_x, const T* Y, std::size_t n_y, std::size_t n_features,
                   const KernelSpec& spec, T* out, int device);

// Y = K(X, Z) B (Z == nullptr: K(X, X) B) with K evaluated on the device in bands of rows and never stored whole:
// X (n_x x d), Z (n_z x d), B (n_z x b) row-major on the host, Y (n_x x b) row-major on the host. The products
// run in T on cuBLAS (load_cublas first). Ctrl-C is honoured between bands.
template <typename T>
void kernel_product(const T* X, std::size_t n_x, const T* Z, std::size_t n_z, std::size_t n_features,
                    const KernelSpec& spec, const T* B, std::size_t b, T* Y, int device);

// The CPU core's kernel_top_eigsh on the GPU: K(X, X) stored on the device when `store` (built once, one GEMM per
// product), else evaluated in bands at every product. The iteration is the core's own (core/krylov.hpp) with its
// n x b blocks, orthogonalisation, Ritz vectors and residuals on the device (CudaOps, blocks.hpp); only the small
// projected problems and the result's eigenvectors come to the host. Centring follows centred_top_eigsh's rule.
template <typename T>
KernelEigenResult<T> kernel_top_eigsh(const ConstMatrixRef<T>& X, const KernelSpec& spec, bool center, bool store,
                                      int n_components, const ConstMatrixRef<T>& start, double tol, int max_iter,
                                      int n_threads, int device, const std::function<void(int)>& on_product = {});

// kernel_matrix and kernel_product for inputs already in device `device`'s memory (X, Y / Z, B: device pointers,
// row-major, C-contiguous; from DLPack tensors of CuPy or PyTorch): the result stays there, in memory the caller
// owns and frees with free_device_memory. NaN or infinity in an input raises std::invalid_argument naming it.
// Returns after the result is complete (the device synchronised), so any stream may read it.
template <typename T>
T* kernel_matrix_on_device(const T* X, std::size_t n_x, const T* Y, std::size_t n_y, std::size_t n_features,
                           const KernelSpec& spec, int device);
template <typename T>
T* kernel_product_on_device(const T* X, std::size_t n_x, const T* Z, std::size_t n_z, std::size_t n_features,
                            const KernelSpec& spec, const T* B, std::size_t b, int device);
void free_device_memory(void* pointer);

// Device bytes the block-Krylov iteration of kernel_top_eigsh holds besides the kernel operator.
std::size_t krylov_device_bytes(std::size_t n, int n_components, std::size_t block_columns, std::size_t value_bytes);

// Device bytes kernel_top_eigsh (b = block columns + 1) or kernel_product (b = columns of B) holds: X and Z in
// double with their norms, B, Y, K whole (`store`) or one band of rows, and (`gram`: every kernel but laplacian)
// a band of inner products in double.
std::size_t kernel_operator_bytes(std::size_t n_x, std::size_t n_z, std::size_t n_features, std::size_t b,
                                  std::size_t value_bytes, bool symmetric, bool store, bool gram);

}  // namespace rkm::cuda
