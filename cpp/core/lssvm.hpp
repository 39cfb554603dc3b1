// The dual linear system of LS-SVM regression and classification as restricted kernel machines
// (Suykens 2017, eqs. 3.16 and 3.22):
//
//   [ (1/eta) K + lam I   1 ] [ H   ]   [ Y ]
//   [ 1^T                 0 ] [ b^T ] = [ 0 ]
//
// solved without forming the bordered matrix: one Cholesky factorization A = L L^T of A = (1/eta) K + lam I,
// then A [U v] = [Y 1] and the bias from the Schur complement, b = U^T 1 / (1^T v), H = U - v b^T.
#pragma once

#include "core/kernels.hpp"

namespace rkm {

template <typename T>
struct LSSVMDualSolution {
  RowMatrix<T> H;              // N x p hidden features (dual variables) h_i
  Vector<T> b;                 // p biases (zeros without an intercept)
  RowMatrix<T> loo_residuals;  // N x p leave-one-out residuals y_i - yhat_i^(-i) when asked for, else empty
};

// Solves the system for the kernel matrix given by the lower triangle of K, which is overwritten (by A's
// Cholesky factor, then by its inverse when loo); the strict upper triangle is neither read nor written.
// Without fit_intercept the system is A H = Y. With loo, the closed-form leave-one-out residuals
// r_i = h_i / (M^{-1})_ii of the bordered matrix M (Cawley and Talbot 2004), where
// (M^{-1})_ii = (A^{-1})_ii - v_i^2 / (1^T v) and diag(A^{-1}) is the column norms of L^{-1}: one triangular
// inversion more, about the cost of the factorization. Throws std::invalid_argument naming lam when A is not
// numerically positive definite.
template <typename T>
LSSVMDualSolution<T> lssvm_dual_solve(MatrixRef<T> K, const ConstMatrixRef<T>& Y, double eta, double lam,
                                      bool fit_intercept, bool loo, int n_threads);

// The same for the kernel matrix of X, built in place of the factor: N^2 values of T and O(N p) besides.
template <typename T>
LSSVMDualSolution<T> lssvm_dual_fit(const ConstMatrixRef<T>& X, const KernelSpec& spec, const ConstMatrixRef<T>& Y,
                                    double eta, double lam, bool fit_intercept, bool loo, int n_threads);

// Mixed precision for float64 problems (the idea of LAPACK's dsposv, with the kernel recomputed instead of
// stored): the kernel matrix of X in float32 (half the memory and the flops' time of float64), its Cholesky
// factor as the preconditioner of conjugate gradients on the exact float64 system, whose products
// (1/eta) K B + lam B are computed in float64 tiles and never stored (kernel_product). Stops when every
// column's residual is below the backward error of a float64 factorization,
// ||r||_inf <= sqrt(N) eps ||A||_inf ||x||_inf, as dsposv does. When the float32 factorization fails or 30
// iterations do not get there, solves by lssvm_dual_fit in float64 instead (iterations = -1 then).
template <typename T>
struct LSSVMRefinedSolution {
  LSSVMDualSolution<T> solution;
  int iterations = 0;  // conjugate-gradient steps after the preconditioned start; -1 after the fallback
};

LSSVMRefinedSolution<double> lssvm_dual_fit_mixed(const ConstMatrixRef<double>& X, const KernelSpec& spec,
                                                  const ConstMatrixRef<double>& Y, double eta, double lam,
                                                  bool fit_intercept, int n_threads);

}  // namespace rkm
