// Run-time choice of the SIMD code paths: AVX2/FMA where the CPU has it, the baseline of the target
// otherwise (SSE2 on x86-64). The default build stays portable; only functions compiled with a target
// attribute use AVX2, and only after use_avx2() said so.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__)
#define RKM_HAVE_AVX2_DISPATCH 1
#endif

namespace rkm {

// Whether the AVX2/FMA code paths run: the CPU has them and the baseline has not been forced.
bool use_avx2();

// "avx2" or "baseline": which code paths run now.
const char* active_isa();

// Makes every SIMD routine run its baseline code even where AVX2 is available, or restores the run-time
// choice; for tests and comparisons.
void force_baseline_isa(bool force);

}  // namespace rkm
