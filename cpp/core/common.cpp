#include "core/common.hpp"

#include <algorithm>
#include <atomic>
#include <thread>

namespace rkm {

namespace {
std::atomic<InterruptChecker> g_interrupt_checker{nullptr};
}

void set_interrupt_checker(InterruptChecker checker) { g_interrupt_checker.store(checker); }

bool interrupt_pending() {
  InterruptChecker checker = g_interrupt_checker.load();
  return checker != nullptr && checker();
}

void throw_if_interrupted() {
  if (interrupt_pending()) throw interrupted_error();
}

bool have_openmp() {
#ifdef RKM_HAVE_OPENMP
  return true;
#else
  return false;
#endif
}

int max_threads() {
#ifdef RKM_HAVE_OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

int thread_index() {
#ifdef RKM_HAVE_OPENMP
  return omp_get_thread_num();
#else
  return 0;
#endif
}

bool in_parallel_region() {
#ifdef RKM_HAVE_OPENMP
  return omp_in_parallel() != 0;
#else
  return false;
#endif
}

int available_cores() {
#ifdef RKM_HAVE_OPENMP
  return std::max(1, omp_get_num_procs());
#else
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
#endif
}

int resolve_threads(int n_threads) {
  return std::clamp(n_threads > 0 ? n_threads : max_threads(), 1, available_cores());
}

ThreadGuard::ThreadGuard(int n_threads) : previous_(max_threads()), active_(resolve_threads(n_threads)) {
#ifdef RKM_HAVE_OPENMP
  omp_set_num_threads(active_);
#else
  active_ = 1;
#endif
}

ThreadGuard::~ThreadGuard() {
#ifdef RKM_HAVE_OPENMP
  omp_set_num_threads(previous_);
#endif
}

}  // namespace rkm
