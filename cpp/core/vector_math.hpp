// Elementwise transcendental functions on contiguous arrays, vectorized for the running CPU.
#pragma once

#include <Eigen/Core>

namespace rkm {

// out[i] = exp(x[i]) for i < n; out may be x. Within 1 ulp of std::exp, including the subnormal range;
// 0 below about -745.13 and +inf above about 709.78, as std::exp. Runs AVX-512 or AVX2/FMA code where the
// CPU has it (see isa.hpp), with the same results bit for bit. The kernel transforms spend most of their time
// here: Eigen's exp, compiled for the portable baseline, took about 4x longer.
void vector_exp(const double* x, double* out, Eigen::Index n);

// out[i] = cos(x[i]); out may be x. Within 2 ulp of std::cos for |x| < 1e5 (Cody-Waite reduction by pi/2 and
// fdlibm's polynomials); larger or non-finite arguments go to std::cos. Vectorized as vector_exp: the random
// Fourier features spend most of their time here.
void vector_cos(const double* x, double* out, Eigen::Index n);

// out[i] = exp(-gamma max(nx + ny[i] - 2 g[i], 0)): a row segment of an rbf kernel from its inner products g
// and squared norms, in one vectorized pass (out may be g). NaN distances stay NaN, so that overflowing
// inputs are reported rather than read as distance 0.
void vector_rbf(const double* g, double nx, const double* ny, double gamma, double* out, Eigen::Index n);

}  // namespace rkm
