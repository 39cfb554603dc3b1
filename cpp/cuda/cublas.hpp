// cuBLAS for the CUDA path's GEMMs, loaded with dlopen at first use: building rkm needs neither cuBLAS headers nor
// its libraries, and at run time those of the CUDA toolkit or of the nvidia-cublas wheel serve (or the copy a
// PyTorch or CuPy in the same process already loaded). No CUDA types here; only host code includes this.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace rkm::cuda {

// Loads libcublasLt and libcublas (sonames .13, then .12) from the first of `directories` that has them, else
// through the dynamic linker's search; does nothing once loaded. Returns where it came from and its version;
// throws device_error naming what was tried when no copy loads.
std::string load_cublas(const std::vector<std::string>& directories);

// The loaded cuBLAS ("libcublas.so.13 13.0.2 from DIR"), or empty before load_cublas succeeded.
std::string loaded_cublas();

// C = alpha op(A) op(B) + beta C for row-major matrices (C: rows x cols, op(A): rows x inner, op(B): inner x
// cols; op(A) = A^T when transpose_a, A then stored inner x rows), rows lda, ldb, ldc values apart, on device
// `device`'s default stream, in T's precision without tensor-core shortcuts (no TF32). Pointers are device
// pointers. Throws device_error when cuBLAS is not loaded or the call fails.
template <typename T>
void gemm(int device, bool transpose_a, bool transpose_b, int rows, int cols, int inner, T alpha, const T* A, int lda,
          const T* B, int ldb, T beta, T* C, int ldc);

}  // namespace rkm::cuda
