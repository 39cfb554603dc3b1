#include "core/vector_math.hpp"

#include "core/isa.hpp"
#include "core/simd.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#ifdef RKM_HAVE_AVX2_DISPATCH
#include <immintrin.h>
#endif

// Clang checks the calls between the always-inlined templates below before it inlines them, and a 64-byte vector
// passed from a template without the AVX-512 target into Lanes<64>'s AVX-512 functions is an error there:
// Clang builds run the AVX2 code on AVX-512 CPUs.
#if defined(RKM_HAVE_AVX2_DISPATCH) && !defined(__clang__)
#define RKM_HAVE_AVX512_VECTOR_MATH 1
#endif

namespace rkm {

namespace {

using Eigen::Index;

// The SIMD code below passes vectors only between inlined functions, which end up inside the *_avx2 and
// *_avx512 functions of their target: no such vector crosses a call, so the -Wpsabi note (GCC) or warning
// (Clang) that passing one "changes the ABI" does not apply. Not popped: GCC reports the templates' instances at
// the end of the file.
#if defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

// Comparisons and selects on vectors of VectorBytes / 8 doubles. GCC's vector extensions lower them well for
// 16 and 32 bytes, but (GCC 12) compile comparisons of 64-byte vectors lane by lane, which made the AVX-512
// exp twice as slow as the AVX2 one; the 64-byte lanes use AVX-512's mask registers instead.
template <int VectorBytes>
struct Lanes {
  using V = simd::Vector<double, VectorBytes>;
  using Mask = simd::Vector<std::int64_t, VectorBytes>;
#ifdef RKM_HAVE_VECTOR_EXTENSIONS
  RKM_ALWAYS_INLINE static Mask less(V a, double b) { return a < b; }
  RKM_ALWAYS_INLINE static Mask greater(V a, double b) { return a > b; }
  RKM_ALWAYS_INLINE static V select(Mask m, V if_set, V otherwise) { return m ? if_set : otherwise; }
#else
  // The emulated vectors' lanes one by one, with GCC's mask convention (all bits set where true).
  RKM_ALWAYS_INLINE static Mask less(V a, double b) {
    Mask m;
    for (int i = 0; i < V::kLanes; ++i) m[i] = a[i] < b ? -1 : 0;
    return m;
  }
  RKM_ALWAYS_INLINE static Mask greater(V a, double b) {
    Mask m;
    for (int i = 0; i < V::kLanes; ++i) m[i] = a[i] > b ? -1 : 0;
    return m;
  }
  RKM_ALWAYS_INLINE static V select(Mask m, V if_set, V otherwise) {
    for (int i = 0; i < V::kLanes; ++i) otherwise[i] = m[i] ? if_set[i] : otherwise[i];
    return otherwise;
  }
#endif
  RKM_ALWAYS_INLINE static Mask either(Mask a, Mask b) { return a | b; }
};

#ifdef RKM_HAVE_AVX512_VECTOR_MATH
template <>
struct Lanes<64> {
  typedef double V __attribute__((vector_size(64)));
  typedef __mmask8 Mask;
  __attribute__((target("avx512f"))) static Mask less(V a, double b) {
    return _mm512_cmp_pd_mask(__m512d(a), _mm512_set1_pd(b), _CMP_LT_OQ);
  }
  __attribute__((target("avx512f"))) static Mask greater(V a, double b) {
    return _mm512_cmp_pd_mask(__m512d(a), _mm512_set1_pd(b), _CMP_GT_OQ);
  }
  static Mask either(Mask a, Mask b) { return a | b; }
  __attribute__((target("avx512f"))) static V select(Mask m, V if_set, V otherwise) {
    return V(_mm512_mask_blend_pd(m, __m512d(otherwise), __m512d(if_set)));
  }
};
#endif

// exp of one vector of L doubles. Range reduction x = k ln2 + r with |r| <= ln2 / 2 (k by the
// round-to-nearest of adding 1.5 * 2^52, whose low mantissa bits then hold k; ln2 split in two so that
// k * ln2_hi is exact), a degree-13 Taylor polynomial for exp(r) (its truncation error is below 2^-58
// on that interval), and the scaling by 2^k built from exponent bits.
template <int VectorBytes>
RKM_ALWAYS_INLINE void exp_vector(const double* x, double* out) {
  using L = Lanes<VectorBytes>;
  typedef typename L::V V;
  using I = simd::Vector<std::int64_t, VectorBytes>;
  constexpr double kShifter = 0x1.8p52, kLog2e = 1.4426950408889634, kLn2Hi = 6.93145751953125e-1,
                   kLn2Lo = 1.42860682030941723212e-6;
  V v;
  std::memcpy(&v, x, sizeof v);
  // exp underflows to 0 below the first bound and overflows above the second; clamp so the bits stay sane.
  const typename L::Mask zero = L::less(v, -745.2), big = L::greater(v, 709.79);
  v = L::select(L::either(zero, big), V{}, v);
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
  p = L::select(zero, V{}, L::select(big, V{} + std::numeric_limits<double>::infinity(), p));
  std::memcpy(out, &p, sizeof p);
}

template <int VectorBytes>
RKM_ALWAYS_INLINE void exp_array(const double* x, double* out, Index n) {
  constexpr Index L = VectorBytes / static_cast<Index>(sizeof(double));
  Index i = 0;
  for (; i + L <= n; i += L) exp_vector<VectorBytes>(x + i, out + i);
  if (i == n) return;
  double tail[L] = {}, result[L];
  std::memcpy(tail, x + i, static_cast<size_t>(n - i) * sizeof(double));
  exp_vector<VectorBytes>(tail, result);
  std::memcpy(out + i, result, static_cast<size_t>(n - i) * sizeof(double));
}

template <int VectorBytes>
RKM_ALWAYS_INLINE void rbf_vector(const double* g, double nx, const double* ny, double gamma, double* out) {
  using L = Lanes<VectorBytes>;
  typedef typename L::V V;
  V gv, nyv;
  std::memcpy(&gv, g, sizeof gv);
  std::memcpy(&nyv, ny, sizeof nyv);
  V distance = nx + nyv - 2.0 * gv;
  distance = L::select(L::less(distance, 0.0), V{}, distance);  // rounding can make it slightly negative; NaN stays
  const V exponent = -gamma * distance;
  double buffer[VectorBytes / sizeof(double)];
  std::memcpy(buffer, &exponent, sizeof exponent);
  exp_vector<VectorBytes>(buffer, out);
}

template <int VectorBytes>
RKM_ALWAYS_INLINE void rbf_array(const double* g, double nx, const double* ny, double gamma, double* out, Index n) {
  constexpr Index L = VectorBytes / static_cast<Index>(sizeof(double));
  Index i = 0;
  for (; i + L <= n; i += L) rbf_vector<VectorBytes>(g + i, nx, ny + i, gamma, out + i);
  if (i == n) return;
  double g_tail[L] = {}, ny_tail[L] = {}, result[L];
  std::memcpy(g_tail, g + i, static_cast<size_t>(n - i) * sizeof(double));
  std::memcpy(ny_tail, ny + i, static_cast<size_t>(n - i) * sizeof(double));
  rbf_vector<VectorBytes>(g_tail, nx, ny_tail, gamma, result);
  std::memcpy(out + i, result, static_cast<size_t>(n - i) * sizeof(double));
}

// cos of one vector of L doubles. x = k pi/2 + r with |r| <= pi/4 (k rounded as in exp_vector; pi/2 in
// three parts, the first of 33 bits so that k times it is exact for |k| < 2^20), then fdlibm's minimax
// polynomials for sin r and cos r on [-pi/4, pi/4], chosen and signed by k mod 4.
template <int VectorBytes>
RKM_ALWAYS_INLINE void cos_vector(const double* x, double* out) {
  using V = simd::Vector<double, VectorBytes>;
  using I = simd::Vector<std::int64_t, VectorBytes>;
  constexpr double kShifter = 0x1.8p52, kTwoOverPi = 6.36619772367581382433e-01;
  constexpr double kPio2A = 1.57079632673412561417e+00, kPio2B = 6.07710050630396597660e-11,
                   kPio2C = 2.02226624871116645580e-21;
  V v;
  std::memcpy(&v, x, sizeof v);
  V kd = v * kTwoOverPi + kShifter;
  I k_bits;
  std::memcpy(&k_bits, &kd, sizeof kd);
  kd -= kShifter;
  const V r = ((v - kd * kPio2A) - kd * kPio2B) - kd * kPio2C;
  const V z = r * r;
  const V sin_r = r + r * z * (-1.66666666666666324348e-01 +
                               z * (8.33333333332248946124e-03 +
                                    z * (-1.98412698298579493134e-04 +
                                         z * (2.75573137070700676789e-06 +
                                              z * (-2.50507602534068634195e-08 + z * 1.58969099521155010221e-10)))));
  const V cos_r = 1.0 - 0.5 * z +
                  z * z * (4.16666666666666019037e-02 +
                           z * (-1.38888888888741095749e-03 +
                                z * (2.48015872894767294178e-05 +
                                     z * (-2.75573143513906633035e-07 +
                                          z * (2.08757232129817482790e-09 + z * -1.13596475577881948265e-11)))));
  // By the bits of k mod 4, without comparisons (see Lanes): sin r for odd k, and the sign flipped for k mod 4
  // in {1, 2}, where (k + 1) & 2 is set.
  using U = simd::Vector<std::uint64_t, VectorBytes>;
  U quadrant, cos_bits, sin_bits;
  std::memcpy(&quadrant, &k_bits, sizeof k_bits);
  std::memcpy(&cos_bits, &cos_r, sizeof cos_r);
  std::memcpy(&sin_bits, &sin_r, sizeof sin_r);
  const U odd = -(quadrant & 1);
  U bits = (sin_bits & odd) | (cos_bits & ~odd);
  bits ^= ((quadrant + 1) & 2) << 62;
  V result;
  std::memcpy(&result, &bits, sizeof bits);
  std::memcpy(out, &result, sizeof result);
}

template <int VectorBytes>
RKM_ALWAYS_INLINE void cos_array(const double* x, double* out, Index n) {
  // static: the lambda below names both without capturing them, which Clang refuses for automatic variables.
  static constexpr Index L = VectorBytes / static_cast<Index>(sizeof(double));
  static constexpr double kLargest = 1e5;  // beyond it the reduction loses accuracy
  // Lane by lane, so that an element's result never depends on its neighbours or on the vector width: the
  // vector code for every lane, then std::cos for the lanes it cannot serve.
  const auto cos_lanes = [](const double* x, double* out, Index m) {
    double in[L] = {};
    std::memcpy(in, x, static_cast<size_t>(m) * sizeof(double));  // a copy: out may be x
    double result[L];
    cos_vector<VectorBytes>(in, result);
    for (Index j = 0; j < m; ++j) out[j] = std::abs(in[j]) < kLargest ? result[j] : std::cos(in[j]);  // NaN too
  };
  Index i = 0;
  for (; i + L <= n; i += L) {
    bool ordinary = true;
    for (Index j = 0; j < L; ++j) ordinary &= std::abs(x[i + j]) < kLargest;  // false for NaN too
    if (ordinary) {
      cos_vector<VectorBytes>(x + i, out + i);
    } else {
      cos_lanes(x + i, out + i, L);
    }
  }
  if (i < n) cos_lanes(x + i, out + i, n - i);
}

void exp_baseline(const double* x, double* out, Index n) { exp_array<16>(x, out, n); }

void cos_baseline(const double* x, double* out, Index n) { cos_array<16>(x, out, n); }

void rbf_baseline(const double* g, double nx, const double* ny, double gamma, double* out, Index n) {
  rbf_array<16>(g, nx, ny, gamma, out, n);
}

#ifdef RKM_HAVE_AVX2_DISPATCH
__attribute__((target("avx2,fma"))) void exp_avx2(const double* x, double* out, Index n) {
  exp_array<32>(x, out, n);
}

__attribute__((target("avx2,fma"))) void cos_avx2(const double* x, double* out, Index n) {
  cos_array<32>(x, out, n);
}

__attribute__((target("avx2,fma"))) void rbf_avx2(const double* g, double nx, const double* ny, double gamma,
                                                   double* out, Index n) {
  rbf_array<32>(g, nx, ny, gamma, out, n);
}
#endif

#ifdef RKM_HAVE_AVX512_VECTOR_MATH
// flatten: GCC inlines a target function (Lanes<64>'s) only into a caller of that target, and the templates
// between them have none; flattening inlines the whole tree into this function at once.
__attribute__((target("avx512f,avx512dq,fma"), flatten)) void exp_avx512(const double* x, double* out, Index n) {
  exp_array<64>(x, out, n);
}

__attribute__((target("avx512f,avx512dq,fma"), flatten)) void cos_avx512(const double* x, double* out, Index n) {
  cos_array<64>(x, out, n);
}

__attribute__((target("avx512f,avx512dq,fma"), flatten)) void rbf_avx512(const double* g, double nx,
                                                                         const double* ny, double gamma,
                                                                         double* out, Index n) {
  rbf_array<64>(g, nx, ny, gamma, out, n);
}
#endif

}  // namespace

void vector_exp(const double* x, double* out, Index n) {
#ifdef RKM_HAVE_AVX512_VECTOR_MATH
  if (use_avx512()) return exp_avx512(x, out, n);
#endif
#ifdef RKM_HAVE_AVX2_DISPATCH
  if (use_avx2()) return exp_avx2(x, out, n);
#endif
  exp_baseline(x, out, n);
}

void vector_rbf(const double* g, double nx, const double* ny, double gamma, double* out, Index n) {
#ifdef RKM_HAVE_AVX512_VECTOR_MATH
  if (use_avx512()) return rbf_avx512(g, nx, ny, gamma, out, n);
#endif
#ifdef RKM_HAVE_AVX2_DISPATCH
  if (use_avx2()) return rbf_avx2(g, nx, ny, gamma, out, n);
#endif
  rbf_baseline(g, nx, ny, gamma, out, n);
}

void vector_cos(const double* x, double* out, Index n) {
#ifdef RKM_HAVE_AVX512_VECTOR_MATH
  if (use_avx512()) return cos_avx512(x, out, n);
#endif
#ifdef RKM_HAVE_AVX2_DISPATCH
  if (use_avx2()) return cos_avx2(x, out, n);
#endif
  cos_baseline(x, out, n);
}

}  // namespace rkm
