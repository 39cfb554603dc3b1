// Shared types and small utilities of the rkm numerical core (no Python headers here).
#pragma once

#include <Eigen/Dense>

#include <cstddef>
#include <stdexcept>
#include <string>

#ifdef RKM_HAVE_OPENMP
#include <omp.h>
#endif

namespace rkm {

template <typename T>
using RowMatrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <typename T>
using Vector = Eigen::Matrix<T, Eigen::Dynamic, 1>;

template <typename T>
using ConstMatrixRef = Eigen::Ref<const RowMatrix<T>>;
template <typename T>
using MatrixRef = Eigen::Ref<RowMatrix<T>>;
template <typename T>
using ConstVectorRef = Eigen::Ref<const Vector<T>>;

// The CUDA path cannot run: rkm was built without it, no driver or device is present, or a CUDA call failed.
// The module raises rkm.exceptions.DeviceError (a RuntimeError) with the message.
struct device_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// What must live on the GPU does not fit its free memory (checked before allocating): raised as MemoryError.
struct device_memory_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Thrown when the interrupt checker reports a pending Ctrl-C; the bindings turn it into KeyboardInterrupt.
struct interrupted_error : std::runtime_error {
  interrupted_error() : std::runtime_error("interrupted") {}
};

// The bindings install a checker that briefly takes the GIL and asks Python for pending signals.
// The core itself never touches Python; without a checker nothing is ever interrupted.
using InterruptChecker = bool (*)();
void set_interrupt_checker(InterruptChecker checker);
// Whether a checker is installed and reports a pending interrupt. Call only from the thread that entered
// the core (outside OpenMP regions, or as thread 0 of a region it started).
bool interrupt_pending();
// Throws interrupted_error when interrupt_pending(); outside OpenMP regions only.
void throw_if_interrupted();

// Bytes of each thread's buffer of inner products (a band of rows of a kernel or similarity matrix), sized to stay
// in the last-level cache between the GEMM that fills it and the pass that consumes it.
constexpr Eigen::Index kBandBytes = Eigen::Index(4) << 20;

inline void require(bool condition, const std::string& message) {
  if (!condition) throw std::invalid_argument(message);
}

// Number of OpenMP threads to use for a request: <= 0 means OpenMP's current maximum. Never more than the
// processors available to the process (available_cores()): OpenMP cannot create absurd teams (n_threads =
// 100000 crashed inside libgomp) and more threads than cores only compete with each other.
int resolve_threads(int n_threads);
bool have_openmp();
int max_threads();
// The processors this process may run on (OpenMP's count, which follows the affinity mask), at least 1.
int available_cores();
// The calling thread's index inside an OpenMP parallel region (0 outside one or without OpenMP).
int thread_index();
// Whether the calling thread runs inside an active OpenMP parallel region.
bool in_parallel_region();

// Sets the calling thread's OpenMP thread count for its lifetime and restores the previous one.
class ThreadGuard {
 public:
  explicit ThreadGuard(int n_threads);
  ~ThreadGuard();
  ThreadGuard(const ThreadGuard&) = delete;
  ThreadGuard& operator=(const ThreadGuard&) = delete;
  int threads() const { return active_; }

 private:
  int previous_;
  int active_;
};

}  // namespace rkm
