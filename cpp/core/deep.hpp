// M1 of Suykens 2017 (section 5.2, eqs. 5.2-5.4): the deep reduced-set kernel model estimated in the primal.
// Two kernel PCA levels and a regression level, each W_l written on M reduced-set points:
//
//   E1 = K1 A1 / eta1,             Z1 = E1 Lambda1^-1,   K1 = k1(X, Xr)  (N x M, fixed)
//   E2 = k2(Z1, A1) A2 / eta2,     Z2 = E2 Lambda2^-1
//   Yhat = k3(Z2, A2) A3 / eta3 + 1 b^T
//
// (row layout: A_l is the paper's H~_l transposed, one row per reduced-set point). The objective of eq. 5.3,
//
//   f = J1 + J2 + J3 + (c_stab / 2)(J1^2 + J2^2) - c0 (Tr Lambda1 + Tr Lambda2)      (objective "full")
//   f = J3                                                                            (objective "level3")
//   J1 = -1/2 sum_i e1_i^T Lambda1^-1 e1_i + Rg1,  J2 likewise,  J3 = ||Y - Yhat||^2 / (2 lam3) + Rg3,
//
// with Rg_l = (eta_l / 2) ||A_l||^2 (regularizer "H") or (1 / (2 eta_l)) Tr(A_l^T G_l A_l) = (eta_l / 2) Tr(W_l^T W_l)
// (regularizer "W"; G1 = k1(Xr, Xr), G2 = k2(A1, A1), G3 = k3(A2, A2)), and its gradient, for L-BFGS.
// The parameters are one flat vector theta = [A1 | A2 | A3 | b | l1 | l2] (blocks row-major, l_l = diag Lambda_l).
#pragma once

#include "core/kernels.hpp"

#include <array>
#include <mutex>

namespace rkm {

// The kernels of levels 2 and 3 need derivatives in both arguments: rbf, linear and polynomial.
struct SmoothKernel {
  KernelSpec spec;
  explicit SmoothKernel(const KernelSpec& s);
};

struct ReducedSetDims {
  Eigen::Index M = 0, s1 = 0, s2 = 0, p = 0;
  Eigen::Index size() const { return M * (s1 + s2 + p) + p + s1 + s2; }
};

struct ReducedSetOptions {
  std::array<double, 3> etas{1.0, 1.0, 1.0};
  double lam3 = 1.0;
  double c_stab = 0.0;
  double c0 = 0.0;
  bool weight_regularizer = false;  // "W" (true) or "H" (false)
  bool level3_only = false;         // objective "level3" (variant c)
};

struct ReducedSetValue {
  double f = 0.0;
  Vector<double> grad;
  std::array<double, 3> terms{0.0, 0.0, 0.0};  // J1, J2, J3
};

// Holds the fixed data of one fit (K1, G1, Y are copied once) and the N x M work buffers that the backward
// pass reads, so that the L-BFGS evaluations allocate nothing large.
class DeepReducedSetObjective {
 public:
  DeepReducedSetObjective(const ConstMatrixRef<double>& K1, const ConstMatrixRef<double>& G1,
                          const ConstMatrixRef<double>& Y, const ReducedSetDims& dims, const KernelSpec& kernel2,
                          const KernelSpec& kernel3, const ReducedSetOptions& options, int n_threads);

  // Objective, gradient and the three level terms at theta. Non-finite values are returned as they are (the
  // optimizer's caller stops on them); throws std::invalid_argument for a wrong theta or non-positive l entries.
  // Safe to call from several threads on one object: the evaluations take turns on the work buffers (a mutex;
  // the bindings wait for it without the GIL), so each returns exactly what a serial call does.
  ReducedSetValue evaluate(const ConstVectorRef<double>& theta);

 private:
  RowMatrix<double> K1_, G1_, Y_;
  ReducedSetDims dims_;
  SmoothKernel kernel2_, kernel3_;
  ReducedSetOptions options_;
  int threads_;
  // Training-set quantities of the last forward pass: Z1, Z2, the residual R, the kernel values of levels 2
  // and 3 and, for the polynomial kernel, their bases gamma z^T a + coef0.
  RowMatrix<double> Z1_, Z2_, R_, K2_, K3_, base2_, base3_;
  std::mutex mutex_;  // held by each evaluation: the buffers above belong to one evaluation at a time
};

// Outputs and level-1/2 scores (Yhat, E1, E2) of the model at theta for kernel rows K1 = k1(X, Xr) of any X.
struct ReducedSetForward {
  RowMatrix<double> Yhat, E1, E2;
};
ReducedSetForward deep_reduced_set_forward(const ConstVectorRef<double>& theta, const ConstMatrixRef<double>& K1,
                                           const ReducedSetDims& dims, const KernelSpec& kernel2,
                                           const KernelSpec& kernel3, const std::array<double, 3>& etas,
                                           int n_threads);

}  // namespace rkm
