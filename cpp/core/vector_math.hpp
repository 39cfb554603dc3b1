// Elementwise transcendental functions on contiguous arrays, vectorized for the running CPU.
#pragma once

#include <Eigen/Core>

namespace rkm {

// out[i] = exp(x[i]) for i < n; out may be x. Within 1 ulp of std::exp, including the subnormal range;
// 0 below about -745.13 and +inf above about 709.78, as std::exp. Runs AVX2/FMA code where the CPU has it
// (see isa.hpp). The kernel transforms spend most of their time here: Eigen's exp, compiled for the
// portable baseline, took about 4x longer.
void vector_exp(const double* x, double* out, Eigen::Index n);

}  // namespace rkm
