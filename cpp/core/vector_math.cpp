#include "core/vector_math.hpp"

#include "core/isa.hpp"

#include <cstdint>
#include <cstring>

namespace rkm {

namespace {

using Eigen::Index;

// exp of one vector of L doubles. Range reduction x = k ln2 + r with |r| <= ln2 / 2 (k by the
// round-to-nearest of adding 1.5 * 2^52, whose low mantissa bits then hold k; ln2 split in two so that
// k * ln2_hi is exact), a degree-13 Taylor polynomial for exp(r) (its truncation error is below 2^-58
// on that interval), and the scaling by 2^k built from exponent bits.
template <int VectorBytes>
__attribute__((always_inline)) inline void exp_vector(const double* x, double* out) {
  typedef double V __attribute__((vector_size(VectorBytes)));
  typedef std::int64_t I __attribute__((vector_size(VectorBytes)));
  constexpr double kShifter = 0x1.8p52, kLog2e = 1.4426950408889634, kLn2Hi = 6.93145751953125e-1,
                   kLn2Lo = 1.42860682030941723212e-6;
  V v;
  std::memcpy(&v, x, sizeof v);
  // exp underflows to 0 below the first bound and overflows above the second; clamp so the bits stay sane.
  const I zero = v < -745.2, big = v > 709.79;
  v = (zero | big) ? V{} : v;
  V kd = v * kLog2e + kShifter;
  I k_bits, half_bits;
  std::memcpy(&k_bits, &kd, sizeof kd);
  kd -= kShifter;
  const V half_kd = kd * 0.5 + kShifter;  // about k / 2, to split 2^k into two normal factors
  std::memcpy(&half_bits, &half_kd, sizeof half_kd);
  const V r = (v - kd * kLn2Hi) - kd * kLn2Lo;

  // exp(r) = 1 + r + r^2/2 + r^3 q(r): q by Estrin's scheme (short dependency chains), the leading terms
  // by Horner's, so that the rounding of the large terms comes last.
  const V r2 = r * r, r4 = r2 * r2;
  const V q01 = r * (1.0 / 24) + (1.0 / 6), q23 = r * (1.0 / 720) + (1.0 / 120),
          q45 = r * (1.0 / 40320) + (1.0 / 5040), q67 = r * (1.0 / 3628800) + (1.0 / 362880),
          q89 = r * (1.0 / 479001600) + (1.0 / 39916800), q10 = V{} + (1.0 / 6227020800.0);
  const V q03 = q23 * r2 + q01, q47 = q67 * r2 + q45, q8a = q10 * r2 + q89;
  const V q = (q8a * r4 + q47) * r4 + q03;
  V p = ((q * r + 0.5) * r + 1.0) * r + 1.0;

  // 2^k = 2^half * 2^(k - half), both factors normal, so that results in the subnormal range round once.
  std::int64_t shifter_bits;
  std::memcpy(&shifter_bits, &kShifter, sizeof kShifter);
  const I k = k_bits - shifter_bits, half = half_bits - shifter_bits;
  const I first_bits = (half + 1023) << 52, second_bits = (k - half + 1023) << 52;
  V first, second;
  std::memcpy(&first, &first_bits, sizeof first);
  std::memcpy(&second, &second_bits, sizeof second);
  p = p * first * second;
  p = zero ? V{} : big ? V{} + __builtin_inf() : p;
  std::memcpy(out, &p, sizeof p);
}

template <int VectorBytes>
__attribute__((always_inline)) inline void exp_array(const double* x, double* out, Index n) {
  constexpr Index L = VectorBytes / static_cast<Index>(sizeof(double));
  Index i = 0;
  for (; i + L <= n; i += L) exp_vector<VectorBytes>(x + i, out + i);
  if (i == n) return;
  double tail[L] = {}, result[L];
  std::memcpy(tail, x + i, static_cast<size_t>(n - i) * sizeof(double));
  exp_vector<VectorBytes>(tail, result);
  std::memcpy(out + i, result, static_cast<size_t>(n - i) * sizeof(double));
}

void exp_baseline(const double* x, double* out, Index n) { exp_array<16>(x, out, n); }

#ifdef RKM_HAVE_AVX2_DISPATCH
__attribute__((target("avx2,fma"))) void exp_avx2(const double* x, double* out, Index n) {
  exp_array<32>(x, out, n);
}
#endif

}  // namespace

void vector_exp(const double* x, double* out, Index n) {
#ifdef RKM_HAVE_AVX2_DISPATCH
  if (use_avx2()) return exp_avx2(x, out, n);
#endif
  exp_baseline(x, out, n);
}

}  // namespace rkm
