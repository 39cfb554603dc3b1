// The kernel autoencoder's loss and its gradient (Laforgue, Clémençon & d'Alché-Buc 2019, eqs. 4, 9-14 and
// Appendix B). Layers l = 1..L with scalar kernels k_l, symmetric PSD operators A_l and coefficients Phi_l
// (n x d_l, the representer coefficients of Theorem 6); with X^(0) = X,
//
//   K_l = k_l(X^(l-1), X^(l-1)),   B_l = Phi_l A_l,   X^(l) = K_l B_l,
//   loss = D + sum_l lambda_l s_l,   D = ||X - X^(L)||_F^2 / n,   s_l = ||f_l||^2 = sum(Phi_l o X^(l)).
//
// K²AE (precomputed): X is the first layer's Gram matrix K_1 (K_in) and the last layer is the kernel ridge
// regression of eq. 13 onto the outputs whose inner products are K_out (output_gram; K_in by default), solved at
// every evaluation: W = K_L + n lambda_L I, N_L = W^-1 K_out W^-1 (eq. 54), D = n lambda_L^2 Tr(N_L),
// s_L = Tr(K_L N_L); for lambda_L = 0 the minimum-norm least-squares fit (K_L^+ from the eigenvalues above
// max * n * eps, P = K_L K_L^+, N_L = K_L^+ K_out K_L^+, D = Tr((I - P) K_out) / n). A finite-dimensional KAE with
// its last layer solved rather than learned is the same problem with K_1 = k_1(X, X) and K_out = X X^T; given
// the outputs F themselves (output_features, K_out = F F^T), the layer is solved through S = W^-1 F (d_out
// right-hand sides instead of n: N_L = S S^T, C = n lambda_L S S^T; for lambda_L = 0, S = K_L^+ F and
// C = ((I - P) F) S^T) and no n x n matrix besides K_L is formed: D = n lambda_L^2 ||S||^2, s_L = sum(S o K_L S),
// and the gradient's M_L + M_L^T = Q S^T + S Q^T with Q = -(2/n) R + lambda_L S (R S^T = C) goes through the
// kernel's row bands like the hidden layers'. At n = 300, d_out = 2 that is about 40 times faster.
//
// Two gradients of the same loss:
//   adjoint   reverse mode, O(n^2 sum_l d_l) (plus K²AE's O(n^3) ridge solve): with G_L = dloss/dX^(L),
//             dPhi_l = K_l (G_l + 2 lambda_l Phi_l) A_l and G_{l-1} = KG_l(X^(l-1); M_l + M_l^T),
//             M_l = dloss/dK_l = G_l B_l^T + lambda_l B_l Phi_l^T (K²AE: M_L = -(2/n) C + lambda_L N_L);
//   jacobian  the paper's recursions (Appendix B.3-B.4): for every coefficient row phi_{l0,i0} the Jacobians of
//             all later representations, combined by eqs. 9, 11, 12 and 14; O(n^3 L^2 p^2) here, the faithful
//             reference the adjoint is checked against.
#pragma once

#include "core/kernels.hpp"

#include <vector>

namespace rkm {

enum class KaeGradient { adjoint, jacobian };

// "adjoint" or "jacobian"; anything else throws std::invalid_argument naming `method`.
KaeGradient parse_kae_gradient(const std::string& name);

struct KaeResult {
  double loss = 0.0;
  std::vector<RowMatrix<double>> grads;  // shaped like the coefficients
  Vector<double> terms;                  // D, s_1, ..., s_L (unweighted norms)
};

// Loss, gradient and terms at the coefficients `phis`.
//   X          KAE: the data (n x d_0); precomputed: K_1 (n x n, symmetric; its PSD-ness is the caller's to check)
//   phis       KAE: Phi_1..Phi_L (n x d_l, d_L = d_0); K²AE: Phi_1..Phi_{L-1}
//   kernels    one per entry of phis: KAE layers 1..L; K²AE layers 2..L (layer 1 is K_in); rbf, polynomial
//              (non-negative integer degree) or linear
//   operators  one per entry of phis: A_l (d_l x d_l, symmetric PSD), or an empty matrix for the identity
//   penalties  lambda_1..lambda_L, non-negative (K²AE: lambda_L is the ridge penalty)
//   output_gram  precomputed only: K_out (n x n, symmetric), or null for X
//   output_features  precomputed only, instead of output_gram: the outputs F (n x d_out) with K_out = F F^T
// Bad arguments throw std::invalid_argument naming the argument. A hidden representation, kernel matrix or
// back-propagated quantity that overflows gives loss = +inf and NaN terms and gradients (an optimizer backs off
// from such a step). Holds the kernel matrices of the layers (n x n each) and, for K²AE, a few more n x n matrices
// of the ridge layer. Results are bit-identical for any n_threads (<= 0: OpenMP's maximum); the jacobian loop
// honours Ctrl-C between its rows.
KaeResult kae_loss_and_grad(const ConstMatrixRef<double>& X, const std::vector<ConstMatrixRef<double>>& phis,
                            const std::vector<KernelSpec>& kernels, const std::vector<RowMatrix<double>>& operators,
                            const std::vector<double>& penalties, bool precomputed, KaeGradient method,
                            int n_threads, const ConstMatrixRef<double>* output_gram = nullptr,
                            const ConstMatrixRef<double>* output_features = nullptr);

}  // namespace rkm
