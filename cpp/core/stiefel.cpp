#include "core/stiefel.hpp"

#include "core/blas.hpp"

#include <Eigen/LU>
#include <Eigen/SVD>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <memory>
#include <utility>

namespace rkm {

namespace {

using Mat = RowMatrix<double>;
using Index = Eigen::Index;

constexpr double kEps = std::numeric_limits<double>::epsilon();
constexpr double kNoise = 1e-13;           // relative allowance for rounding in f, in every sufficient-decrease test
constexpr int kStagnationIters = 10;       // iterations without progress before "stagnated"
constexpr double kReprojectAbove = 1e-13;  // cayley_adam / cayley_bb re-project a new iterate less feasible than this
constexpr double kMaxStepSize = 1e20;      // doubling or BB steps would otherwise overflow
constexpr double kMinStepSize = 1e-20;     // lower clip of the BB step
constexpr double kH0Feasibility = 1e-8;    // the engine accepts a start this close to St(p, N)
constexpr double kGramRatio = 1e-12;       // polar: eigenvalue ratio of Z^T Z below which the SVD takes over
constexpr double kRankRatio = 1e-12;       // polar: singular-value ratio at or below which Z is rank deficient

std::string format(const char* pattern, double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, pattern, value);
  return buffer;
}

// The shortest decimal form that reads back as the same double (Python's repr of a float).
std::string shortest(double value) {
  for (int digits = 1; digits < 17; ++digits) {
    const std::string text = format(("%." + std::to_string(digits) + "g").c_str(), value);
    if (std::strtod(text.c_str(), nullptr) == value) return text;
  }
  return format("%.17g", value);
}

// A^T B (p x N by N x p: the reductions over the N rows go through the optimized BLAS).
Mat transposed_product(const ConstMatrixRef<double>& A, const ConstMatrixRef<double>& B) {
  Mat C(A.cols(), B.cols());
  blas::gemm<double>(blas::Op::transpose, blas::Op::none, A, B, C, 1.0, 0.0);
  return C;
}

// C = alpha A B + beta C for a tall A and a small B.
void add_product(const ConstMatrixRef<double>& A, const ConstMatrixRef<double>& B, Mat& C, double alpha, double beta) {
  blas::gemm<double>(blas::Op::none, blas::Op::none, A, B, C, alpha, beta);
}

Mat product(const ConstMatrixRef<double>& A, const ConstMatrixRef<double>& B) {
  Mat C(A.rows(), B.cols());
  add_product(A, B, C, 1.0, 0.0);
  return C;
}

double inner(const Mat& A, const Mat& B) { return (A.array() * B.array()).sum(); }

Mat sym(const Mat& M) { return (M + M.transpose()) / 2.0; }

// One Gram pass Z (Z^T Z)^(-1/2) from the eigendecomposition Z^T Z = Q diag(w) Q^T.
Mat gram_pass(const ConstMatrixRef<double>& Z, const Vector<double>& w, const Mat& Q) {
  const Mat root = Q * w.cwiseSqrt().cwiseInverse().asDiagonal() * Q.transpose();
  return product(Z, root);
}

// polar(Z) into Y, or false when Z is not finite or has rank < p. Gram form (two passes, which bring the
// feasibility to rounding level) when Z^T Z is well conditioned, else the thin SVD Z = U S V^T gives U V^T.
bool polar(const ConstMatrixRef<double>& Z, Mat& Y) {
  if (!Z.allFinite()) return false;
  const Index p = Z.cols();
  Mat E = transposed_product(Z, Z), Q;
  Vector<double> w;
  blas::syevd<double>(E, w, Q);
  if (w(0) > kGramRatio * w(p - 1)) {
    const Mat once = gram_pass(Z, w, Q);
    Mat E1 = transposed_product(once, once);
    blas::syevd<double>(E1, w, Q);
    Y = gram_pass(once, w, Q);
    return true;
  }
  const Eigen::BDCSVD<Eigen::MatrixXd> svd(Eigen::MatrixXd(Z), Eigen::ComputeThinU | Eigen::ComputeThinV);
  const Vector<double>& s = svd.singularValues();
  if (s(p - 1) <= kRankRatio * s(0)) return false;
  Y = svd.matrixU() * svd.matrixV().transpose();
  return true;
}

// Whether f <= f_ref - required, with the rounding allowance of every line search.
bool decreased(double f, double f_ref, double required) { return f <= f_ref - required + kNoise * std::abs(f_ref); }

// An iterate with its objective, Euclidean gradient, Riemannian gradient G - H sym(H^T G) and its norm.
struct Point {
  Mat H, G, rgrad;
  double f = 0.0, grad_norm = 0.0;
  Point(Mat H_, double f_, Mat G_) : H(std::move(H_)), G(std::move(G_)), f(f_) {
    rgrad = G;
    add_product(H, sym(transposed_product(H, G)), rgrad, -1.0, 1.0);
    grad_norm = rgrad.norm();
  }
};
using PointPtr = std::shared_ptr<const Point>;

// An accepted step (the new point and the step size used: gamma, alpha or tau) or the reason none was taken.
struct Step {
  PointPtr point;
  double size = 0.0;
  std::string status, message;  // empty when a step was taken
  static Step stop(std::string status, std::string message) {
    return {nullptr, 0.0, std::move(status), std::move(message)};
  }
};

// The objective with the call count (nfev) and the shape and finiteness checks.
class Objective {
 public:
  Objective(StiefelObjective& objective, Index n, Index p) : objective_(objective), n_(n), p_(p) {}

  // f(H) and G into f, G; returns whether both are finite.
  bool operator()(const Mat& H, double& f, Mat& G) {
    f = objective_.evaluate(H, G);
    ++nfev;
    require(G.rows() == n_ && G.cols() == p_, "fun: gradient has shape (" + std::to_string(G.rows()) + ", " +
                                                  std::to_string(G.cols()) + "), expected (" + std::to_string(n_) +
                                                  ", " + std::to_string(p_) + ")");
    return std::isfinite(f) && G.allFinite();
  }

  // The point at H, or nullptr when f or G is not finite there.
  PointPtr point(Mat H) {
    double f = 0.0;
    Mat G;
    if (!(*this)(H, f, G)) return nullptr;
    return std::make_shared<const Point>(std::move(H), f, std::move(G));
  }

  int nfev = 0;

 private:
  StiefelObjective& objective_;
  Index n_, p_;
};

// The first trial step of pg, pg_anderson and cayley_bb: min(max_step, 1 / ||G0||, 1e20), 1 / ||G0|| read as 1
// when G0 = 0.
double first_step_size(const StiefelOptions& options, const Point& start) {
  const double norm = start.G.norm();
  return std::min(std::min(options.max_step, norm > 0 ? 1.0 / norm : 1.0), kMaxStepSize);
}

// Backtracking along gamma -> polar(H - gamma G) from the first trial gamma: accepted when
// f(H+) <= f(H) - (sigma / gamma) ||H+ - H||^2 (with the rounding allowance), else gamma /= 2. A failed polar
// factor costs no call; a non-finite trial is a failed one.
Step armijo_polar_search(Objective& objective, const StiefelOptions& options, const Point& point, double gamma) {
  Mat H_new;
  for (int trial = 0; trial <= options.max_backtracks; ++trial, gamma /= 2.0) {
    if (!polar(point.H - gamma * point.G, H_new)) continue;
    double f = 0.0;
    Mat G;
    const bool finite = objective(H_new, f, G);
    const double required = (options.sigma / gamma) * (H_new - point.H).squaredNorm();
    if (finite && decreased(f, point.f, required)) {
      return {std::make_shared<const Point>(std::move(H_new), f, std::move(G)), gamma, "", ""};
    }
  }
  return Step::stop("line_search_failed",
                    "no sufficient decrease after " + std::to_string(options.max_backtracks) + " step halvings");
}

class Method {
 public:
  Method(Objective& objective, const StiefelOptions& options) : objective_(objective), options_(options) {}
  virtual ~Method() = default;
  // One step from point; nit = iterations completed before it.
  virtual Step step(const Point& point, int nit) = 0;

 protected:
  Objective& objective_;
  const StiefelOptions& options_;
};

// M1: gamma starts at first_step_size and is min(max_step, 2 gamma_accepted, 1e20) at every later iteration.
class ProjectedGradient final : public Method {
 public:
  ProjectedGradient(Objective& objective, const StiefelOptions& options, const Point& start)
      : Method(objective, options), gamma_(first_step_size(options, start)) {}

  Step step(const Point& point, int nit) override {
    const double gamma = nit == 0 ? gamma_ : std::min(std::min(options_.max_step, 2.0 * gamma_), kMaxStepSize);
    Step accepted = armijo_polar_search(objective_, options_, point, gamma);
    if (accepted.point) gamma_ = accepted.size;
    return accepted;
  }

 private:
  double gamma_;
};

// M2: Cayley Adam with a scalar second moment (the reference's _CayleyAdam gives every formula). W = P H^T - H P^T
// is never formed: W Z = P (H^T Z) - H (P^T Z). One call per iteration, no line search.
class CayleyAdam final : public Method {
 public:
  CayleyAdam(Objective& objective, const StiefelOptions& options, const Point& start)
      : Method(objective, options), M_(Mat::Zero(start.H.rows(), start.H.cols())) {}

  Step step(const Point& point, int nit) override {
    const StiefelOptions& o = options_;
    const Mat& H = point.H;
    const Mat& G = point.G;
    const int t = nit + 1;
    M_ = o.beta1 * M_ + (1.0 - o.beta1) * G;
    v_ = o.beta2 * v_ + (1.0 - o.beta2) * G.squaredNorm();
    const double r = (1.0 - std::pow(o.beta1, t)) * std::sqrt(v_ / (1.0 - std::pow(o.beta2, t)) + o.eps);
    Mat P = M_;
    add_product(H, transposed_product(H, M_), P, -0.5, 1.0);
    P /= r;
    const Mat WH = apply_W(P, H, H);
    M_ = r * WH;
    const Mat HtP = transposed_product(H, P);
    const double norm_W =
        std::sqrt(std::max(0.0, 2.0 * P.squaredNorm() - 2.0 * (HtP.array() * HtP.transpose().array()).sum()));
    const double alpha = std::min(o.lr, 2.0 * o.q / (norm_W + o.eps));
    Mat Y = H - alpha * WH;
    for (int i = 0; i < o.cayley_iters; ++i) Y = H - (alpha / 2.0) * apply_W(P, H, H + Y);
    // A NaN feasibility is not above the threshold: a non-finite Y goes to fun and ends the run there.
    Mat H_new;
    if (stiefel_feasibility(Y) > kReprojectAbove) {
      if (!polar(Y, H_new)) return Step::stop("diverged", "the Cayley step left the floating-point range");
    } else {
      H_new = std::move(Y);
    }
    double f = 0.0;
    Mat G_new;
    if (!objective_(H_new, f, G_new)) {
      return Step::stop("diverged", "the objective is not finite after " + std::to_string(nit) +
                                        " iterations (f = " + shortest(f) + ")");
    }
    return {std::make_shared<const Point>(std::move(H_new), f, std::move(G_new)), alpha, "", ""};
  }

 private:
  static Mat apply_W(const Mat& P, const Mat& H, const Mat& Z) {
    Mat WZ = product(P, transposed_product(H, Z));
    add_product(H, transposed_product(P, Z), WZ, -1.0, 1.0);
    return WZ;
  }

  Mat M_;
  double v_ = 0.0;
};

// M4: Wen & Yin's Cayley curve Y(tau) = H - tau U (I + (tau / 2) V^T U)^-1 V^T H with U = [G, H], V = [H, -G],
// Barzilai-Borwein steps and the Zhang-Hager non-monotone reference C (the reference's _CayleyBB).
class CayleyBB final : public Method {
 public:
  CayleyBB(Objective& objective, const StiefelOptions& options, const Point& start)
      : Method(objective, options), tau_(first_step_size(options, start)), C_(start.f) {}

  Step step(const Point& point, int nit) override {
    const Mat D = direction(point);
    const double gd = inner(point.G, D);
    const Curve curve(point);
    double tau = tau_;
    Mat Y;
    for (int trial = 0; trial <= options_.max_backtracks; ++trial, tau *= options_.delta) {
      bool valid = curve.at(tau, Y);
      if (valid && stiefel_feasibility(Y) > kReprojectAbove) {
        Mat projected;
        valid = polar(Y, projected);
        Y = std::move(projected);
      }
      if (!valid) continue;
      double f = 0.0;
      Mat G;
      if (objective_(Y, f, G) && decreased(f, C_, options_.rho * tau * gd)) {
        auto accepted = std::make_shared<const Point>(std::move(Y), f, std::move(G));
        update(point, D, *accepted, nit + 1);
        return {std::move(accepted), tau, "", ""};
      }
    }
    return Step::stop("line_search_failed",
                      "no sufficient decrease after " + std::to_string(options_.max_backtracks) + " step reductions");
  }

 private:
  // The 2p x 2p pieces of the curve at one point; V^T U and V^T H use the computed H^T H, not I.
  struct Curve {
    const Point& point;
    Mat VtU, VtH;
    explicit Curve(const Point& x) : point(x) {
      const Index p = x.H.cols();
      const Mat HtH = transposed_product(x.H, x.H), HtG = transposed_product(x.H, x.G);
      const Mat GtG = transposed_product(x.G, x.G);
      VtU.resize(2 * p, 2 * p);
      VtU << HtG, HtH, -GtG, -HtG.transpose();
      VtH.resize(2 * p, p);
      VtH << HtH, -HtG.transpose();
    }
    // Y(tau) into Y, or false when the system is singular or Y is not finite.
    bool at(double tau, Mat& Y) const {
      const Index p = point.H.cols();
      const Mat system = Mat::Identity(2 * p, 2 * p) + (tau / 2.0) * VtU;
      const Eigen::PartialPivLU<Mat> lu(system);
      if ((lu.matrixLU().diagonal().array() == 0.0).any()) return false;
      const Mat X = lu.solve(VtH);
      Y = point.H;
      add_product(point.G, X.topRows(p), Y, -tau, 1.0);
      add_product(point.H, X.bottomRows(p), Y, -tau, 1.0);
      return Y.allFinite();
    }
  };

  // D = G - H (G^T H) (= A H with A = G H^T - H G^T).
  static Mat direction(const Point& x) {
    Mat D = x.G;
    add_product(x.H, transposed_product(x.G, x.H), D, -1.0, 1.0);
    return D;
  }

  // The non-monotone reference and the BB step for iteration k + 1 after the accepted step of iteration k.
  void update(const Point& old, const Mat& D, const Point& accepted, int k) {
    const double e = options_.nonmonotone;
    const double Q_new = e * Q_ + 1.0;
    C_ = (e * Q_ * C_ + accepted.f) / Q_new;
    Q_ = Q_new;
    const Mat S = accepted.H - old.H, Yd = direction(accepted) - D;
    const double sy = std::abs(inner(S, Yd));
    const double numerator = k % 2 == 1 ? S.squaredNorm() : sy;
    const double denominator = k % 2 == 1 ? sy : Yd.squaredNorm();
    const double bb = denominator > 0 ? numerator / denominator : kMaxStepSize;
    tau_ = std::min(options_.max_step, std::min(kMaxStepSize, std::max(kMinStepSize, bb)));
  }

  double tau_, Q_ = 1.0, C_;
};

// M5: Anderson acceleration (type II, memory m) of T(H) = polar(H - gamma G(H)), gamma fixed by the first, plain
// pg, iteration; safeguarded by f and restarted when grad_norm stops falling (the reference's _AndersonPG).
class AndersonPG final : public Method {
 public:
  AndersonPG(Objective& objective, const StiefelOptions& options, const Point& start)
      : Method(objective, options), gamma_(first_step_size(options, start)), g_ref_(start.grad_norm) {}

  Step step(const Point& point, int nit) override {
    if (nit == 0) {
      Step accepted = armijo_polar_search(objective_, options_, point, gamma_);
      if (!accepted.point) return accepted;
      gamma_ = accepted.size;
      remember(point, residual(point));
      return restart_rule(std::move(accepted));
    }
    std::unique_ptr<Mat> r = residual(point);
    if (previous_H_ && previous_r_ && r) {
      memory_.emplace_back(point.H - *previous_H_, *r - *previous_r_);
      while (static_cast<int>(memory_.size()) > options_.memory) memory_.pop_front();
    }
    Step accepted;
    if (!memory_.empty() && r) accepted = candidate(point, *r);
    remember(point, std::move(r));
    if (!accepted.point) {
      memory_.clear();
      accepted = armijo_polar_search(objective_, options_, point, gamma_);
      if (!accepted.point) return accepted;
    }
    return restart_rule(std::move(accepted));
  }

 private:
  // r = T(H) - H (no call: T needs only the gradient known at H), or null when the polar factor fails.
  std::unique_ptr<Mat> residual(const Point& point) const {
    Mat T;
    if (!polar(point.H - gamma_ * point.G, T)) return nullptr;
    return std::make_unique<Mat>(T - point.H);
  }

  void remember(const Point& point, std::unique_ptr<Mat> r) {
    previous_H_ = std::make_unique<Mat>(point.H);
    previous_r_ = std::move(r);
  }

  // The Anderson point polar(H + r - sum_a c_a (dH_a + dR_a)), c solving the Tikhonov-regularized normal
  // equations of min ||r - dR c|| by Cholesky; taken when f does not increase (with the rounding allowance).
  Step candidate(const Point& point, const Mat& r) {
    const Index j = static_cast<Index>(memory_.size());
    Eigen::MatrixXd B(j, j);
    Eigen::VectorXd rhs(j);
    for (Index a = 0; a < j; ++a) {
      for (Index b = 0; b < j; ++b) B(a, b) = inner(memory_[a].second, memory_[b].second);
      rhs(a) = inner(memory_[a].second, r);
    }
    const Eigen::LLT<Eigen::MatrixXd> llt(B + 1e-10 * B.trace() * Eigen::MatrixXd::Identity(j, j));
    if (llt.info() != Eigen::Success) return {};
    const Eigen::VectorXd c = llt.solve(rhs);
    Mat Z = point.H + r;
    for (Index a = 0; a < j; ++a) Z -= c(a) * (memory_[a].first + memory_[a].second);
    Mat H_c;
    if (!polar(Z, H_c)) return {};
    double f = 0.0;
    Mat G;
    if (!(objective_(H_c, f, G) && decreased(f, point.f, 0.0))) return {};
    return {std::make_shared<const Point>(std::move(H_c), f, std::move(G)), gamma_, "", ""};
  }

  // Clears the memory after `memory` accepted iterates in a row without a new lowest grad_norm.
  Step restart_rule(Step accepted) {
    const double grad_norm = accepted.point->grad_norm;
    if (grad_norm < g_ref_) {
      g_ref_ = grad_norm;
      no_progress_ = 0;
    } else {
      ++no_progress_;
    }
    if (no_progress_ >= options_.memory) {
      memory_.clear();
      g_ref_ = grad_norm;
      no_progress_ = 0;
    }
    return accepted;
  }

  double gamma_;
  std::deque<std::pair<Mat, Mat>> memory_;  // (dH, dR), oldest first
  std::unique_ptr<Mat> previous_H_, previous_r_;
  double g_ref_;
  int no_progress_ = 0;
};

std::unique_ptr<Method> make_method(StiefelMethod method, Objective& objective, const StiefelOptions& options,
                                    const Point& start) {
  switch (method) {
    case StiefelMethod::pg:
      return std::make_unique<ProjectedGradient>(objective, options, start);
    case StiefelMethod::cayley_adam:
      return std::make_unique<CayleyAdam>(objective, options, start);
    case StiefelMethod::cayley_bb:
      return std::make_unique<CayleyBB>(objective, options, start);
    default:
      return std::make_unique<AndersonPG>(objective, options, start);
  }
}

std::string shape_text(Index rows, Index cols) {
  return "(" + std::to_string(rows) + ", " + std::to_string(cols) + ")";
}

void check_matrix(const ConstMatrixRef<double>& Z, const std::string& name) {
  require(1 <= Z.cols() && Z.cols() <= Z.rows(),
          name + ": must have shape (N, p) with 1 <= p <= N, got " + shape_text(Z.rows(), Z.cols()));
  require(Z.allFinite(), name + ": contains NaN or infinity");
}

void check_arguments(const ConstMatrixRef<double>& H0, double tol, int max_iter) {
  check_matrix(H0, "H0");
  const double distance = stiefel_feasibility(H0);
  require(distance <= kH0Feasibility, "H0: must have orthonormal columns to " + format("%g", kH0Feasibility) +
                                          ", ||H0^T H0 - I|| = " + format("%.3g", distance));
  require(std::isfinite(tol) && tol > 0, "tol: must be a positive finite number, got " + shortest(tol));
  require(max_iter >= 0, "max_iter: must be a non-negative int, got " + std::to_string(max_iter));
}

bool converged(StiefelCriterion criterion, const Point& point, double step_measure, double tol) {
  return criterion == StiefelCriterion::grad ? point.grad_norm <= tol : step_measure <= tol;
}

// The driver's bookkeeping: history, best iterate and the result.
struct Run {
  const StiefelOptions& options;
  Objective& objective;
  std::vector<double> history_fun, history_grad_norm;
  double step_measure = std::numeric_limits<double>::quiet_NaN();
  int nit = 0;

  StiefelResult result(const Point& point, const std::string& status, const std::string& message) {
    StiefelResult r;
    r.x = point.H;
    r.fun = point.f;
    r.grad_norm = point.grad_norm;
    r.feasibility = stiefel_feasibility(point.H);
    r.step_measure = step_measure;
    r.nit = nit;
    r.nfev = objective.nfev;
    r.success = status == "converged";
    r.status = status;
    r.message = message;
    if (options.history) {
      r.history_fun = std::move(history_fun);
      r.history_grad_norm = std::move(history_grad_norm);
    }
    return r;
  }
};

}  // namespace

StiefelMethod parse_stiefel_method(const std::string& name) {
  if (name == "pg") return StiefelMethod::pg;
  if (name == "cayley_adam") return StiefelMethod::cayley_adam;
  if (name == "cayley_bb") return StiefelMethod::cayley_bb;
  if (name == "pg_anderson") return StiefelMethod::pg_anderson;
  throw std::invalid_argument("method: must be one of ('pg', 'cayley_adam', 'cayley_bb', 'pg_anderson'), got '" +
                              name + "'");
}

void validate_stiefel_options(const StiefelOptions& o) {
  using Named = std::pair<const char*, double>;
  const auto check = [](bool valid, const char* key, const std::string& what, const std::string& value) {
    require(valid, std::string("options: '") + key + "' must be " + what + ", got " + value);
  };
  check(o.max_step > 0, "max_step", "a positive number (inf allowed)", shortest(o.max_step));
  for (const auto& [key, value] : {Named{"sigma", o.sigma}, Named{"rho", o.rho}, Named{"delta", o.delta}}) {
    check(0 < value && value < 1, key, "in (0, 1)", shortest(value));
  }
  for (const auto& [key, value] :
       {Named{"beta1", o.beta1}, Named{"beta2", o.beta2}, Named{"nonmonotone", o.nonmonotone}}) {
    check(0 <= value && value < 1, key, "in [0, 1)", shortest(value));
  }
  for (const auto& [key, value] : {Named{"lr", o.lr}, Named{"eps", o.eps}, Named{"q", o.q}}) {
    check(0 < value && std::isfinite(value), key, "a positive finite number", shortest(value));
  }
  check(o.max_backtracks >= 0, "max_backtracks", "an int >= 0", std::to_string(o.max_backtracks));
  check(o.cayley_iters >= 0, "cayley_iters", "an int >= 0", std::to_string(o.cayley_iters));
  check(o.memory >= 1, "memory", "an int >= 1", std::to_string(o.memory));
}

double stiefel_feasibility(const ConstMatrixRef<double>& H) {
  const Mat E = transposed_product(H, H);
  return (E - Mat::Identity(H.cols(), H.cols())).norm();
}

RowMatrix<double> polar_orthonormalize(const ConstMatrixRef<double>& Z) {
  check_matrix(Z, "Z");
  Mat Y;
  require(polar(Z, Y), "Z: has rank below p = " + std::to_string(Z.cols()) + " (its polar factor is not defined)");
  return Y;
}

StiefelResult stiefel_minimize(StiefelObjective& fun, const ConstMatrixRef<double>& H0, StiefelMethod method,
                               double tol, int max_iter, const StiefelOptions& options) {
  check_arguments(H0, tol, max_iter);
  validate_stiefel_options(options);
  Objective objective(fun, H0.rows(), H0.cols());
  PointPtr point = objective.point(Mat(H0));
  require(point != nullptr, "fun: not finite at H0");
  const std::unique_ptr<Method> runner = make_method(method, objective, options, *point);
  Run run{options, objective, {point->f}, {point->grad_norm}};
  PointPtr best = point;
  double lowest_grad_norm = point->grad_norm;
  int unchanged = 0;

  if (options.criterion == StiefelCriterion::grad && converged(StiefelCriterion::grad, *point, run.step_measure, tol))
    return run.result(*point, "converged", "grad_norm <= tol at H0");
  while (run.nit < max_iter) {
    throw_if_interrupted();
    Step step = runner->step(*point, run.nit);
    if (!step.point) return run.result(step.status == "diverged" ? *point : *best, step.status, step.message);
    ++run.nit;
    const PointPtr& next = step.point;
    run.step_measure = (next->H - point->H).norm() / step.size;
    run.history_fun.push_back(next->f);
    run.history_grad_norm.push_back(next->grad_norm);
    // f alone stops changing (it is exact to ~1e-14 relative) while grad_norm still falls: either counts.
    const bool progress =
        std::abs(next->f - point->f) > 4 * kEps * std::abs(point->f) || next->grad_norm < lowest_grad_norm;
    unchanged = progress ? 0 : unchanged + 1;
    lowest_grad_norm = std::min(lowest_grad_norm, next->grad_norm);
    point = next;
    if (point->f < best->f) best = point;
    if (converged(options.criterion, *point, run.step_measure, tol)) {
      const char* measure = options.criterion == StiefelCriterion::grad ? "grad_norm" : "step measure";
      return run.result(*point, "converged", std::string(measure) + " <= tol " + format("%g", tol) + " after " +
                                                 std::to_string(run.nit) + " iterations");
    }
    if (unchanged >= kStagnationIters) {
      return run.result(*best, "stagnated",
                        "neither the objective (to rounding) nor the lowest grad_norm changed over " +
                            std::to_string(kStagnationIters) + " iterations; grad_norm " +
                            format("%.3g", best->grad_norm) + " > tol " + format("%g", tol));
    }
  }
  return run.result(*best, "max_iter",
                    "max_iter = " + std::to_string(max_iter) + " iterations reached before the tolerance");
}

}  // namespace rkm
