// The Constr-DRKM objective (Tonin, Patrinos & Suykens 2021, eq. 7 for L levels) and its gradient, minimised over
// the Stiefel manifold H^T H = I by the engine of stiefel.hpp. Row layout: H = [H_1 ... H_L] (N x p), H_l of
// shape N x s_l,
//
//   f(H) = sum_l t_l,   t_l = -(1 / (2 eta_l)) Tr(B_l^T K_l B_l),   B_l = C H_l if center else H_l,
//
// C = I - 1 1^T / N, K_1 fixed (given), K_l = k_l(H_{l-1}, H_{l-1}) for l >= 2 on the raw rows of H_{l-1}.
// With P_l = B_l B_l^T and KG_l(Z; P)_i = sum_j P_ij d/dz k_l(z, z_j) at z = z_i:
//
//   df/dH_l = C^[center] (-(1/eta_l) K_l B_l) + [l < L] (-(1/eta_{l+1}) KG_{l+1}(H_l; P_{l+1})).
//
// Level kernels (l >= 2): rbf, laplacian (subgradient, sign(0) = 0), polynomial and linear.
#pragma once

#include "core/kernels.hpp"
#include "core/stiefel.hpp"

#include <mutex>
#include <vector>

namespace rkm {

class ConstrainedDeepObjective : public StiefelObjective {
 public:
  // K1 (N x N, symmetry assumed) is copied and, if center, double-centred once; level_kernels holds the L - 1
  // kernels of levels 2..L (rbf, laplacian, polynomial with a non-negative integer degree, or linear); sizes
  // the L positive s_l with sum <= N; etas the L positive eta_l. n_threads <= 0: OpenMP's maximum.
  ConstrainedDeepObjective(const ConstMatrixRef<double>& K1, const std::vector<KernelSpec>& level_kernels,
                           const std::vector<Eigen::Index>& sizes, const std::vector<double>& etas, bool center,
                           int n_threads);

  // f(H), with the gradient written to G (resized to N x p) and the level terms kept for level_terms().
  // Throws std::invalid_argument for an H of the wrong shape or with NaN or infinity. The result does not
  // depend on the thread count: work is split in fixed bands of rows, and their partial sums are added in
  // band order. Safe to call from several threads at once on one object: every evaluation has its own
  // buffers, so concurrent calls return exactly what serial ones do.
  double evaluate(const ConstMatrixRef<double>& H, RowMatrix<double>& G) override;
  // The same with the level terms t_1, ..., t_L of this evaluation written to terms (which the binding returns:
  // level_terms() may already hold another thread's).
  double evaluate(const ConstMatrixRef<double>& H, RowMatrix<double>& G, Vector<double>& terms) const;

  // t_1, ..., t_L of the last evaluation by evaluate(H, G) (empty before the first).
  Vector<double> level_terms() const;
  Eigen::Index n_samples() const { return K1_.rows(); }
  const std::vector<Eigen::Index>& sizes() const { return sizes_; }

 private:
  // T = K_1 B_1 for level 1; returns sum(B_1 o T).
  double first_level(const ConstMatrixRef<double>& B1, MatrixRef<double> T) const;
  // T = K_l B_l for a level l >= 2 with Z = H_{l-1}, and -(1/eta_l) KG_l(Z; B_l B_l^T) added to G_prev (the
  // gradient block of level l - 1); returns sum(B_l o T).
  double hidden_level(const KernelSpec& kernel, double eta, const ConstMatrixRef<double>& Z,
                      const ConstMatrixRef<double>& B, MatrixRef<double> T, MatrixRef<double> G_prev) const;

  RowMatrix<double> K1_;  // C K_1 C if center
  std::vector<KernelSpec> kernels_;
  std::vector<Eigen::Index> sizes_, offsets_;
  std::vector<double> etas_;
  bool center_;
  int threads_;
  mutable std::mutex terms_mutex_;  // guards terms_ only: evaluations share nothing else that they write
  Vector<double> terms_;
};

}  // namespace rkm
