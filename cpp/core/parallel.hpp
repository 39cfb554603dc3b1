// Work loops over OpenMP threads that honour Ctrl-C and never throw inside the parallel region.
#pragma once

#include "core/blas.hpp"
#include "core/common.hpp"

#include <atomic>
#include <chrono>
#include <cstddef>

namespace rkm {

// How for_each_item deals items to threads. dynamic: each thread takes the next item when it finishes one,
// which balances uneven items and shared machines; for bodies whose results do not depend on the thread.
// cyclic: thread t of T runs items t, t + T, ... in order; for bodies that accumulate into per-thread
// buffers, so that sums repeat bit for bit for a given thread count.
enum class Schedule { dynamic, cyclic };

// Runs body(item, thread) for items 0..n_items-1 on up to `threads` OpenMP threads. Thread 0, the one that
// entered the core, checks for Ctrl-C between its items (at most every 50 ms: each check takes the GIL), so
// an interrupt waits for about one item; nothing may throw inside the region, so the other threads only
// stop taking items and interrupted_error is thrown after it. The items run with BLAS on one thread
// (blas::SingleThreadedScope): bodies call BLAS from every thread of the team, and a team of one runs the same
// BLAS code, so that results repeat for any thread count.
template <typename Body>
void for_each_item(Eigen::Index n_items, [[maybe_unused]] int threads, Schedule schedule, const Body& body) {
  const blas::SingleThreadedScope single_threaded_blas(n_items > 1 && !in_parallel_region());
  using Clock = std::chrono::steady_clock;
  constexpr auto kCheckInterval = std::chrono::milliseconds(50);
  std::atomic<Eigen::Index> next{0};
  std::atomic<bool> interrupted{false};
  Clock::time_point last_check = Clock::now();
#pragma omp parallel num_threads(threads)
  {
    const int thread = thread_index();
#ifdef RKM_HAVE_OPENMP
    const Eigen::Index stride = omp_get_num_threads();
#else
    const Eigen::Index stride = 1;
#endif
    Eigen::Index own = thread;
    for (;;) {
      if (thread == 0 && Clock::now() - last_check >= kCheckInterval) {
        last_check = Clock::now();
        if (interrupt_pending()) interrupted = true;
      }
      Eigen::Index k = n_items;
      if (!interrupted) {
        k = schedule == Schedule::dynamic ? next++ : own;
        own += stride;
      }
      if (k >= n_items) break;
      body(k, static_cast<std::size_t>(thread));
    }
  }
  if (interrupted) throw interrupted_error();
}

}  // namespace rkm
