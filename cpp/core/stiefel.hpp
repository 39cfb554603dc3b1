// Minimization of f(H) over the Stiefel manifold St(p, N) = {H in R^(N x p): H^T H = I_p}.
//
// Four methods share one driver (plan M1, M2, M4, M5; the NumPy twin python/rkm/reference/stiefel.py writes every
// rule out and this engine takes the same decisions in the same order):
//   pg           projected gradient H+ = polar(H - gamma G) with Armijo halving of gamma;
//   cayley_adam  Li, Li & Todorovic's Cayley Adam (scalar second moment, iterative Cayley transform);
//   cayley_bb    Wen & Yin's Cayley curve with Barzilai-Borwein steps and Zhang-Hager non-monotone Armijo;
//   pg_anderson  Anderson acceleration of the fixed-point map T(H) = polar(H - gamma G(H)).
// Row layout: H and the Euclidean gradient G are N x p. Riemannian gradient (embedded metric)
// rgrad = G - H sym(H^T G); grad_norm = ||rgrad||_F; feasibility = ||H^T H - I_p||_F. Every product is
// N x p by p x p or p x N by N x p: nothing N x N is ever formed.
#pragma once

#include "core/common.hpp"

#include <limits>
#include <string>
#include <vector>

namespace rkm {

// The function to minimize: returns f(H) and writes the Euclidean gradient dF/dH into G (resized to N x p).
// Non-finite values are returned as they are (the engine treats them as failed trials).
class StiefelObjective {
 public:
  virtual ~StiefelObjective() = default;
  virtual double evaluate(const ConstMatrixRef<double>& H, RowMatrix<double>& G) = 0;
};

enum class StiefelMethod { pg, cayley_adam, cayley_bb, pg_anderson };
enum class StiefelCriterion { grad, step };

// Parses "pg", "cayley_adam", "cayley_bb" or "pg_anderson"; throws std::invalid_argument("method: ...").
StiefelMethod parse_stiefel_method(const std::string& name);

struct StiefelOptions {
  StiefelCriterion criterion = StiefelCriterion::grad;
  double max_step = std::numeric_limits<double>::infinity();  // bound on gamma / tau (pg, pg_anderson, cayley_bb)
  double sigma = 1e-4;                                        // sufficient decrease of pg and pg_anderson
  int max_backtracks = 60;
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.99, eps = 1e-8, q = 0.5;  // cayley_adam
  int cayley_iters = 5;
  int memory = 5;                                        // pg_anderson
  double rho = 1e-4, delta = 0.1, nonmonotone = 0.85;  // cayley_bb
  bool history = true;
};

// Throws std::invalid_argument("options: 'key' must be ...") for a value out of range.
void validate_stiefel_options(const StiefelOptions& options);

struct StiefelResult {
  RowMatrix<double> x;  // the converged iterate, the last finite one ("diverged"), else the best one
  double fun = 0.0, grad_norm = 0.0, feasibility = 0.0;
  double step_measure = std::numeric_limits<double>::quiet_NaN();  // last ||H_new - H|| / step size
  int nit = 0, nfev = 0;
  bool success = false;
  std::string status, message;  // status: converged, max_iter, line_search_failed, stagnated or diverged
  std::vector<double> history_fun, history_grad_norm;  // start and every iteration (empty without history)
};

// Minimizes objective from H0 (finite, 1 <= p <= N, ||H0^T H0 - I|| <= 1e-8) with at most max_iter iterations.
// Throws std::invalid_argument for bad arguments ("H0: ...", "tol: ...", "max_iter: ...", "options: ..."), for
// f or G not finite at H0 ("fun: not finite at H0") and for a gradient of the wrong shape; interrupted_error on
// Ctrl-C (checked once per iteration); exceptions of the objective pass through.
StiefelResult stiefel_minimize(StiefelObjective& objective, const ConstMatrixRef<double>& H0, StiefelMethod method,
                               double tol, int max_iter, const StiefelOptions& options);

// The orthonormal polar factor Z (Z^T Z)^(-1/2) = U V^T of an N x p matrix of rank p (1 <= p <= N): the point of
// St(p, N) nearest to Z. Throws std::invalid_argument("Z: ...") for a bad shape, NaN or infinity, or rank < p.
RowMatrix<double> polar_orthonormalize(const ConstMatrixRef<double>& Z);

// ||H^T H - I_p||_F.
double stiefel_feasibility(const ConstMatrixRef<double>& H);

}  // namespace rkm
