#include "core/isa.hpp"

#include <atomic>
#include <stdexcept>
#include <string>

namespace rkm {

namespace {

SimdIsa detect_isa() {
#ifdef RKM_HAVE_AVX2_DISPATCH
  // libgcc's checks include the operating system's support (XCR0) for the AVX and AVX-512 register state.
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq")) return SimdIsa::avx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return SimdIsa::avx2;
#endif
  return SimdIsa::baseline;
}

std::atomic<SimdIsa> g_cap{SimdIsa::avx512};

SimdIsa active_level() {
  const SimdIsa cap = g_cap.load();
  return cpu_isa() < cap ? cpu_isa() : cap;
}

}  // namespace

SimdIsa cpu_isa() {
  static const SimdIsa level = detect_isa();
  return level;
}

bool use_avx2() { return active_level() >= SimdIsa::avx2; }

bool use_avx512() { return active_level() >= SimdIsa::avx512; }

const char* isa_name(SimdIsa level) {
  switch (level) {
    case SimdIsa::avx512:
      return "avx512";
    case SimdIsa::avx2:
      return "avx2";
    case SimdIsa::baseline:
      break;
  }
  return "baseline";
}

const char* active_isa() { return isa_name(active_level()); }

void cap_simd_isa(SimdIsa level) {
  if (level > cpu_isa())
    throw std::invalid_argument(std::string("isa: this CPU cannot run '") + isa_name(level) + "' (it runs up to '" +
                                isa_name(cpu_isa()) + "')");
  g_cap.store(level);
}

}  // namespace rkm
