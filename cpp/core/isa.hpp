// Run-time choice of the SIMD code paths: AVX-512 or AVX2/FMA where the CPU has them, the baseline of the
// target otherwise (SSE2 on x86-64). The default build stays portable; only functions compiled with a target
// attribute use AVX2 or AVX-512, and only after use_avx2() or use_avx512() said so.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__)
#define RKM_HAVE_AVX2_DISPATCH 1
#endif

namespace rkm {

// The SIMD levels, each including the ones before it.
enum class SimdIsa { baseline, avx2, avx512 };

// Whether the AVX2/FMA code paths run: the CPU has them and no lower level was chosen.
bool use_avx2();

// Whether the AVX-512 code paths run (the vector exp, cos and rbf transform): the CPU has AVX-512F and DQ and
// no lower level was chosen.
bool use_avx512();

// "avx512", "avx2" or "baseline".
const char* isa_name(SimdIsa level);

// The name of the level whose code paths run now.
const char* active_isa();

// The highest level the CPU runs (and the operating system saves the registers of).
SimdIsa cpu_isa();

// Makes every SIMD routine run code of at most `level`, for tests and comparisons; cpu_isa() restores the
// run-time choice. Throws std::invalid_argument for a level above cpu_isa().
void cap_simd_isa(SimdIsa level);

}  // namespace rkm
