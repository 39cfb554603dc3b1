#include "core/lssvm.hpp"

#include "core/blas.hpp"
#include "core/kernel_operator.hpp"
#include "core/parallel.hpp"

#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

namespace rkm {

namespace {

using Eigen::Index;
template <typename T>
using ColMatrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>;

constexpr Index kRowsPerItem = 64;

// Lower triangle of K <- (1/eta) K + lam I, in parallel row bands.
template <typename T>
void scale_and_shift(MatrixRef<T> K, double eta, double lam, int threads) {
  const Index n = K.rows();
  const T scale = static_cast<T>(1.0 / eta), shift = static_cast<T>(lam);
  for_each_item((n + kRowsPerItem - 1) / kRowsPerItem, threads, Schedule::dynamic, [&](Index item, std::size_t) {
    const Index end = std::min(n, (item + 1) * kRowsPerItem);
    for (Index i = item * kRowsPerItem; i < end; ++i) {
      K.row(i).head(i + 1) *= scale;
      K(i, i) += shift;
    }
  });
}

std::string format_number(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", value);
  return text;
}

template <typename T>
void factorize(MatrixRef<T> A, double lam) {
  const int info = blas::potrf_lower_interruptible<T>(A);  // Ctrl-C between its panels
  require(info == 0, "lam: (1/eta) K + lam I is not numerically positive definite (the Cholesky factorization "
                     "failed at column " + std::to_string(info) + " of " + std::to_string(A.rows()) +
                     ") for lam = " + format_number(lam) +
                     "; increase lam, use float64, or check the kernel (an indefinite kernel matrix needs a "
                     "larger lam)");
}

void check_arguments(Index n_rows, Index y_rows, double eta, double lam) {
  require(n_rows > 0, "X: must have at least one row");
  require(y_rows == n_rows, "Y: has " + std::to_string(y_rows) + " rows, expected " + std::to_string(n_rows) +
                                " (one per row of X)");
  require(eta > 0 && std::isfinite(eta), "eta: must be a positive finite number");
  require(lam > 0 && std::isfinite(lam), "lam: must be a positive finite number");
}

// Right-hand sides [Y 1], column-major for LAPACK; the column of ones gives v = A^{-1} 1 for the bias.
ColMatrix<double> right_hand_sides(const ConstMatrixRef<double>& Y, bool fit_intercept) {
  ColMatrix<double> rhs(Y.rows(), Y.cols() + (fit_intercept ? 1 : 0));
  rhs.leftCols(Y.cols()) = Y;
  if (fit_intercept) rhs.col(Y.cols()).setOnes();
  return rhs;
}

// H and b from the solutions [U v] of A [U v] = [Y 1]: b = U^T 1 / (1^T v), H = U - v b^T; U is replaced
// by H. Returns 1^T v (0 without an intercept).
template <typename T>
double apply_schur_bias(ColMatrix<T>& solved, Index p, bool fit_intercept, LSSVMDualSolution<T>& out) {
  out.b = Vector<T>::Zero(p);
  double ones_v = 0.0;
  if (fit_intercept) {
    const auto v = solved.col(p);
    ones_v = v.template cast<double>().sum();
    const Eigen::VectorXd b = solved.leftCols(p).template cast<double>().colwise().sum().transpose() / ones_v;
    out.b = b.cast<T>();
    solved.leftCols(p) -= v * out.b.transpose();
  }
  out.H = solved.leftCols(p);
  require(out.H.allFinite() && out.b.allFinite(),
          "lam: the solution is not finite: (1/eta) K + lam I is too ill-conditioned for this dtype; increase "
          "lam or use float64");
  return ones_v;
}

// max_i sum_j |A_ij| of the symmetric matrix given by its lower triangle.
template <typename T>
double infinity_norm_lower(const ConstMatrixRef<T>& A) {
  const Index n = A.rows();
  Eigen::VectorXd sums = Eigen::VectorXd::Zero(n);
  for (Index i = 0; i < n; ++i) {
    const auto row = A.row(i).head(i + 1).template cast<double>().cwiseAbs();
    sums(i) += row.sum();
    sums.head(i) += row.head(i).transpose();
  }
  return sums.maxCoeff();
}

// Conjugate gradients on A x = rhs for each column, preconditioned by the float32 Cholesky factor L of A
// (lower triangle), with the products A B = (1/eta) K B + lam B in float64 tiles. Returns the iterations
// after the preconditioned start, or -1 when kMaxRefinements do not reach the backward-error criterion.
class MixedRefinement {
 public:
  static constexpr int kMaxRefinements = 30;

  MixedRefinement(const ConstMatrixRef<double>& X, const KernelSpec& spec, const RowMatrix<float>& L, double eta,
                  double lam, double a_norm, int threads)
      : X_(X), spec_(spec), L_(L), eta_(eta), lam_(lam), threads_(threads),
        tolerance_(std::sqrt(static_cast<double>(X.rows())) * std::numeric_limits<double>::epsilon() * a_norm) {}

  int solve(const ColMatrix<double>& rhs, ColMatrix<double>& x) const {
    const Index q = rhs.cols();
    x = precondition(rhs);
    ColMatrix<double> r = rhs - apply(x);
    for (int iteration = 0; iteration <= kMaxRefinements;) {
      if (converged(r, x)) return iteration;
      // A restart from the true residual: conjugate gradients until the recurred residual says converged.
      ColMatrix<double> z = precondition(r), d = z;
      Eigen::VectorXd rz = r.cwiseProduct(z).colwise().sum().transpose();
      while (iteration < kMaxRefinements) {
        throw_if_interrupted();
        ++iteration;
        const ColMatrix<double> Ad = apply(d);
        for (Index j = 0; j < q; ++j) {
          const double curvature = d.col(j).dot(Ad.col(j));
          if (!(curvature > 0)) continue;  // a column already solved exactly, or an indefinite A
          const double alpha = rz(j) / curvature;
          x.col(j) += alpha * d.col(j);
          r.col(j) -= alpha * Ad.col(j);
        }
        if (converged(r, x)) break;
        z = precondition(r);
        for (Index j = 0; j < q; ++j) {
          const double rz_next = r.col(j).dot(z.col(j));
          d.col(j) = z.col(j) + (rz(j) > 0 ? rz_next / rz(j) : 0.0) * d.col(j);
          rz(j) = rz_next;
        }
      }
      r = rhs - apply(x);
      if (iteration == kMaxRefinements) return converged(r, x) ? iteration : -1;
    }
    return -1;
  }

 private:
  bool converged(const ColMatrix<double>& r, const ColMatrix<double>& x) const {
    for (Index j = 0; j < r.cols(); ++j)
      if (!(r.col(j).lpNorm<Eigen::Infinity>() <= tolerance_ * x.col(j).lpNorm<Eigen::Infinity>())) return false;
    return true;
  }

  // L^{-T} L^{-1} r in float32, each column scaled to unit maximum first so that small residuals keep their
  // digits in float32's range.
  ColMatrix<double> precondition(const ColMatrix<double>& r) const {
    Eigen::VectorXd scale = r.cwiseAbs().colwise().maxCoeff().transpose();
    for (Index j = 0; j < scale.size(); ++j) scale(j) = scale(j) > 0 ? scale(j) : 1.0;
    ColMatrix<float> z = (r * scale.cwiseInverse().asDiagonal()).cast<float>();
    blas::potrs_lower<float>(L_, z);
    return z.cast<double>() * scale.asDiagonal();
  }

  ColMatrix<double> apply(const ColMatrix<double>& B) const {
    const RowMatrix<double> rows = B;
    RowMatrix<double> product(B.rows(), B.cols());
    kernel_product<double>(X_, nullptr, spec_, rows, product, threads_);
    return product / eta_ + lam_ * B;
  }

  const ConstMatrixRef<double>& X_;
  const KernelSpec& spec_;
  const RowMatrix<float>& L_;
  double eta_, lam_;
  int threads_;
  double tolerance_;
};

// (A^{-1})_ii from the inverse factor L^{-1} (lower triangle of Linv): A^{-1} = L^{-T} L^{-1}, so the i-th
// diagonal entry is the squared norm of column i of L^{-1}.
template <typename T>
Vector<double> inverse_diagonal(const ConstMatrixRef<T>& Linv) {
  const Index n = Linv.rows();
  Vector<double> d = Vector<double>::Zero(n);
  for (Index k = 0; k < n; ++k)
    d.head(k + 1) += Linv.row(k).head(k + 1).transpose().template cast<double>().cwiseAbs2();
  return d;
}

// The lower triangle of the kernel matrix of X in float32; false when the data or the kernel's values do not
// fit float32 (the float64 solve then reports what float64 cannot do).
bool float_kernel_into(const ConstMatrixRef<double>& X, const KernelSpec& spec, MatrixRef<float> out, int threads) {
  const RowMatrix<float> X32 = X.cast<float>();
  try {
    kernel_matrix_into<float>(X32, nullptr, spec, out, threads, /*lower_only=*/true);
    return true;
  } catch (const std::invalid_argument&) {
    return false;
  }
}

}  // namespace

template <typename T>
LSSVMDualSolution<T> lssvm_dual_solve(MatrixRef<T> K, const ConstMatrixRef<T>& Y, double eta, double lam,
                                      bool fit_intercept, bool loo, int n_threads) {
  const Index n = K.rows(), p = Y.cols();
  require(K.cols() == n, "K: must be square, got " + std::to_string(n) + " x " + std::to_string(K.cols()));
  check_arguments(n, Y.rows(), eta, lam);
  const int threads = resolve_threads(n_threads);
  scale_and_shift<T>(K, eta, lam, threads);
  throw_if_interrupted();
  factorize<T>(K, lam);
  ColMatrix<T> solved = right_hand_sides(Y.template cast<double>(), fit_intercept).template cast<T>();
  blas::potrs_lower<T>(K, solved);
  LSSVMDualSolution<T> out;
  const double ones_v = apply_schur_bias<T>(solved, p, fit_intercept, out);
  if (loo) {
    throw_if_interrupted();
    blas::trtri_lower_interruptible<T>(K);  // Ctrl-C between its block columns
    Vector<double> diagonal = inverse_diagonal<T>(K);
    if (fit_intercept) diagonal -= solved.col(p).template cast<double>().cwiseAbs2() / ones_v;
    out.loo_residuals = (out.H.template cast<double>().array().colwise() / diagonal.array()).template cast<T>();
  }
  return out;
}

template <typename T>
LSSVMDualSolution<T> lssvm_dual_fit(const ConstMatrixRef<T>& X, const KernelSpec& spec, const ConstMatrixRef<T>& Y,
                                    double eta, double lam, bool fit_intercept, bool loo, int n_threads) {
  check_arguments(X.rows(), Y.rows(), eta, lam);
  RowMatrix<T> K(X.rows(), X.rows());
  kernel_matrix_into<T>(X, nullptr, spec, K, n_threads, /*lower_only=*/true);
  return lssvm_dual_solve<T>(K, Y, eta, lam, fit_intercept, loo, n_threads);
}

LSSVMRefinedSolution<double> lssvm_dual_fit_mixed(const ConstMatrixRef<double>& X, const KernelSpec& spec,
                                                  const ConstMatrixRef<double>& Y, double eta, double lam,
                                                  bool fit_intercept, int n_threads) {
  check_arguments(X.rows(), Y.rows(), eta, lam);
  const int threads = resolve_threads(n_threads);
  const ColMatrix<double> rhs = right_hand_sides(Y, fit_intercept);
  ColMatrix<double> solved;
  int iterations = -1;
  {
    RowMatrix<float> L(X.rows(), X.rows());
    if (float_kernel_into(X, spec, L, threads)) {
      scale_and_shift<float>(L, eta, lam, threads);
      const double a_norm = infinity_norm_lower<float>(L);
      throw_if_interrupted();
      if (blas::potrf_lower_interruptible<float>(L) == 0)
        iterations = MixedRefinement(X, spec, L, eta, lam, a_norm, threads).solve(rhs, solved);
    }
  }  // the float32 factor is freed before a float64 fallback allocates its own
  if (iterations < 0) return {lssvm_dual_fit<double>(X, spec, Y, eta, lam, fit_intercept, false, n_threads), -1};
  LSSVMRefinedSolution<double> out;
  apply_schur_bias<double>(solved, Y.cols(), fit_intercept, out.solution);
  out.iterations = iterations;
  return out;
}

#define RKM_INSTANTIATE_LSSVM(T)                                                                             \
  template LSSVMDualSolution<T> lssvm_dual_solve<T>(MatrixRef<T>, const ConstMatrixRef<T>&, double, double, \
                                                    bool, bool, int);                                       \
  template LSSVMDualSolution<T> lssvm_dual_fit<T>(const ConstMatrixRef<T>&, const KernelSpec&,               \
                                                  const ConstMatrixRef<T>&, double, double, bool, bool, int);

RKM_INSTANTIATE_LSSVM(float)
RKM_INSTANTIATE_LSSVM(double)

}  // namespace rkm
