#include "core/isa.hpp"

#include <atomic>

namespace rkm {

namespace {

std::atomic<bool> g_force_baseline{false};

bool cpu_has_avx2() {
#ifdef RKM_HAVE_AVX2_DISPATCH
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has;
#else
  return false;
#endif
}

}  // namespace

bool use_avx2() { return cpu_has_avx2() && !g_force_baseline.load(); }

const char* active_isa() { return use_avx2() ? "avx2" : "baseline"; }

void force_baseline_isa(bool force) { g_force_baseline.store(force); }

}  // namespace rkm
