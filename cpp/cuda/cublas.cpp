// cuBLAS through dlopen (see cublas.hpp). The declarations below mirror cublas_api.h of cuBLAS 12 and 13, whose
// v2 entry points and enum values used here have not changed since CUDA 6.
#include "cuda/cublas.hpp"

#include "core/common.hpp"

#include <dlfcn.h>

#include <map>
#include <mutex>

namespace rkm::cuda {

namespace {

struct cublasContext;
using Handle = cublasContext*;
using Status = int;                      // cublasStatus_t: CUBLAS_STATUS_SUCCESS = 0
constexpr int kOpNone = 0;               // CUBLAS_OP_N
constexpr int kOpTranspose = 1;          // CUBLAS_OP_T
constexpr int kPedanticMath = 2;         // CUBLAS_PEDANTIC_MATH: no TF32 or reduced-precision shortcuts
constexpr int kMajor = 0, kMinor = 1, kPatch = 2;  // libraryPropertyType

template <typename T>
using Gemm = Status (*)(Handle, int, int, int, int, int, const T*, const T*, int, const T*, int, const T*, T*, int);

struct Api {
  Status (*create)(Handle*) = nullptr;
  Status (*set_math_mode)(Handle, int) = nullptr;
  Status (*get_property)(int, int*) = nullptr;
  const char* (*status_name)(Status) = nullptr;
  Gemm<float> sgemm = nullptr;
  Gemm<double> dgemm = nullptr;
  std::string origin;
};

std::mutex mutex;
Api api;                          // filled once, under mutex
std::map<int, Handle> handles;    // one per device, kept for the life of the process

template <typename F>
bool bind(void* library, const char* name, F& function) {
  function = reinterpret_cast<F>(dlsym(library, name));
  return function != nullptr;
}

// Opens cuBLAS of one major version: Lt first, so that libcublas finds this copy of it wherever it is.
void* open_cublas(const std::string& prefix, const std::string& version) {
  if (!dlopen((prefix + "libcublasLt.so." + version).c_str(), RTLD_NOW | RTLD_GLOBAL)) return nullptr;
  return dlopen((prefix + "libcublas.so." + version).c_str(), RTLD_NOW | RTLD_GLOBAL);
}

bool bind_api(void* library, Api& found) {
  return bind(library, "cublasCreate_v2", found.create) && bind(library, "cublasSetMathMode", found.set_math_mode) &&
         bind(library, "cublasGetProperty", found.get_property) &&
         bind(library, "cublasGetStatusName", found.status_name) && bind(library, "cublasSgemm_v2", found.sgemm) &&
         bind(library, "cublasDgemm_v2", found.dgemm);
}

std::string version_text(const Api& found) {
  int major = 0, minor = 0, patch = 0;
  found.get_property(kMajor, &major);
  found.get_property(kMinor, &minor);
  found.get_property(kPatch, &patch);
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

void check(Status status, const char* what) {
  if (status != 0)
    throw device_error(std::string("cuBLAS: ") + what + " failed: " + (api.status_name ? api.status_name(status) : "") +
                       " (status " + std::to_string(status) + ")");
}

Handle handle_for(int device) {
  std::lock_guard<std::mutex> lock(mutex);
  if (!api.create) throw device_error("cuBLAS is not loaded (rkm loads it before the first GPU product)");
  auto found = handles.find(device);
  if (found != handles.end()) return found->second;
  Handle handle = nullptr;
  check(api.create(&handle), "cublasCreate");  // on the current device, which the caller has set
  check(api.set_math_mode(handle, kPedanticMath), "cublasSetMathMode");
  handles[device] = handle;
  return handle;
}

}  // namespace

std::string load_cublas(const std::vector<std::string>& directories) {
  std::lock_guard<std::mutex> lock(mutex);
  if (api.create) return api.origin;
  std::vector<std::string> prefixes;
  for (const std::string& directory : directories) prefixes.push_back(directory + "/");
  prefixes.push_back("");  // the dynamic linker's own search, and copies already loaded
  std::string tried;
  // Directory by directory (the user's first), the newer major version first in each.
  for (const std::string& prefix : prefixes) {
    for (const char* version : {"13", "12"}) {
      void* library = open_cublas(prefix, version);
      Api found;
      if (library && bind_api(library, found)) {
        found.origin = "libcublas.so." + std::string(version) + " " + version_text(found) + " from " +
                       (prefix.empty() ? std::string("the library search path") : prefix);
        api = found;
        return api.origin;
      }
      tried += (tried.empty() ? "" : ", ") + (prefix.empty() ? std::string("the search path") : prefix) + " (." +
               version + ")";
    }
  }
  throw device_error("device='cuda': cuBLAS not found (looked in " + tried +
                     "); pip install nvidia-cublas, or set RKM_CUBLAS_DIR to the directory of libcublas.so");
}

std::string loaded_cublas() {
  std::lock_guard<std::mutex> lock(mutex);
  return api.origin;
}

template <typename T>
void gemm(int device, bool transpose_a, bool transpose_b, int rows, int cols, int inner, T alpha, const T* A, int lda,
          const T* B, int ldb, T beta, T* C, int ldc) {
  Handle handle = handle_for(device);
  // cuBLAS is column-major, where a row-major matrix reads as its transpose: C^T = op(B)^T op(A)^T.
  const int op_a = transpose_a ? kOpTranspose : kOpNone, op_b = transpose_b ? kOpTranspose : kOpNone;
  if constexpr (sizeof(T) == 4) {
    check(api.sgemm(handle, op_b, op_a, cols, rows, inner, &alpha, B, ldb, A, lda, &beta, C, ldc), "cublasSgemm");
  } else {
    check(api.dgemm(handle, op_b, op_a, cols, rows, inner, &alpha, B, ldb, A, lda, &beta, C, ldc), "cublasDgemm");
  }
}

template void gemm<float>(int, bool, bool, int, int, int, float, const float*, int, const float*, int, float, float*,
                          int);
template void gemm<double>(int, bool, bool, int, int, int, double, const double*, int, const double*, int, double,
                           double*, int);

}  // namespace rkm::cuda
