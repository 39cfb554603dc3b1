// Fixed-width SIMD vectors for the streaming products and the vector exp, cos and rbf transform.
//
// GCC and Clang (Linux, macOS, any architecture) give GCC's vector extensions: the arithmetic of a vector of
// Bytes / sizeof(T) lanes compiles to the target's SIMD instructions (SSE2 or AVX on x86-64, NEON on
// aarch64), and an always-inlined function takes the target of the function it is inlined into (isa.hpp's
// AVX2/AVX-512 paths). MSVC has neither, so there Vector is a plain array with the same element-wise
// operators, which its optimizer may or may not vectorize: the same results, lane for lane.
#pragma once

#include <cstddef>

#if defined(__GNUC__) || defined(__clang__)
#define RKM_ALWAYS_INLINE __attribute__((always_inline)) inline
#define RKM_HAVE_VECTOR_EXTENSIONS 1
#elif defined(_MSC_VER)
#define RKM_ALWAYS_INLINE __forceinline
#else
#define RKM_ALWAYS_INLINE inline
#endif

namespace rkm::simd {

#ifdef RKM_HAVE_VECTOR_EXTENSIONS

template <typename T, int Bytes>
struct VectorOf {
  typedef T type __attribute__((vector_size(Bytes)));
};

#else

// A vector of Bytes / sizeof(T) lanes as an array: sizeof, zero-initialization by {}, indexing and the
// operators the SIMD code uses, lane by lane, with a scalar on either side standing for a vector of it.
template <typename T, int Bytes>
struct Emulated {
  static constexpr int kLanes = Bytes / static_cast<int>(sizeof(T));
  T lane[kLanes];
  T& operator[](std::ptrdiff_t i) { return lane[i]; }
  const T& operator[](std::ptrdiff_t i) const { return lane[i]; }
};

// The scalar operand takes the vector's element type (GCC converts it so too): not deduced from the scalar,
// so that `bits + 1023` with 64-bit lanes compiles.
template <typename T>
struct Scalar {
  using type = T;
};

#define RKM_EMULATED_OPERATOR(op)                                                                         \
  template <typename T, int B>                                                                            \
  RKM_ALWAYS_INLINE Emulated<T, B> operator op(Emulated<T, B> a, const Emulated<T, B>& b) {               \
    for (int i = 0; i < Emulated<T, B>::kLanes; ++i) a.lane[i] = a.lane[i] op b.lane[i];                  \
    return a;                                                                                             \
  }                                                                                                       \
  template <typename T, int B>                                                                            \
  RKM_ALWAYS_INLINE Emulated<T, B> operator op(Emulated<T, B> a, typename Scalar<T>::type b) {            \
    for (int i = 0; i < Emulated<T, B>::kLanes; ++i) a.lane[i] = a.lane[i] op b;                          \
    return a;                                                                                             \
  }                                                                                                       \
  template <typename T, int B>                                                                            \
  RKM_ALWAYS_INLINE Emulated<T, B> operator op(typename Scalar<T>::type a, Emulated<T, B> b) {            \
    for (int i = 0; i < Emulated<T, B>::kLanes; ++i) b.lane[i] = a op b.lane[i];                          \
    return b;                                                                                             \
  }                                                                                                       \
  template <typename T, int B, typename U>                                                                \
  RKM_ALWAYS_INLINE Emulated<T, B>& operator op##=(Emulated<T, B>& a, const U& b) {                       \
    return a = a op b;                                                                                    \
  }

RKM_EMULATED_OPERATOR(+)
RKM_EMULATED_OPERATOR(-)
RKM_EMULATED_OPERATOR(*)
RKM_EMULATED_OPERATOR(&)
RKM_EMULATED_OPERATOR(|)
RKM_EMULATED_OPERATOR(^)
#undef RKM_EMULATED_OPERATOR

template <typename T, int B>
RKM_ALWAYS_INLINE Emulated<T, B> operator<<(Emulated<T, B> a, int shift) {
  for (int i = 0; i < Emulated<T, B>::kLanes; ++i) a.lane[i] = static_cast<T>(a.lane[i] << shift);
  return a;
}

// 0 - a rather than -a: the same for every lane type, without MSVC's warning on negating unsigned lanes.
template <typename T, int B>
RKM_ALWAYS_INLINE Emulated<T, B> operator-(Emulated<T, B> a) {
  for (int i = 0; i < Emulated<T, B>::kLanes; ++i) a.lane[i] = T(0) - a.lane[i];
  return a;
}

template <typename T, int B>
RKM_ALWAYS_INLINE Emulated<T, B> operator~(Emulated<T, B> a) {
  for (int i = 0; i < Emulated<T, B>::kLanes; ++i) a.lane[i] = ~a.lane[i];
  return a;
}

template <typename T, int Bytes>
struct VectorOf {
  using type = Emulated<T, Bytes>;
};

#endif

// Bytes / sizeof(T) lanes of T.
template <typename T, int Bytes>
using Vector = typename VectorOf<T, Bytes>::type;

}  // namespace rkm::simd
