#include "core/eigs.hpp"

#include "core/blas.hpp"
#include "core/products.hpp"

#include <Eigen/Cholesky>
#include <Eigen/QR>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

namespace rkm {

namespace {
using Eigen::Index;
using Eigen::MatrixXd;

// Columns kept by a thick restart when `wanted` pairs are sought in blocks of b columns: the wanted Ritz
// vectors, a guard of 60% more and two blocks; the basis grows to twice this before the next restart.
// Measured on RBF kernel spectra (s = 10, 50; b = 8, 16): tighter bases cost more products, looser ones
// more orthogonalization without saving products.
Index kept_columns(Index wanted, Index b) {
  const Index columns = wanted * 8 / 5 + 2 * b;
  return (columns + b - 1) / b * b;
}

// Eigenpairs of a small symmetric matrix in double, descending.
void small_eigh_descending(const MatrixXd& H, Eigen::VectorXd& theta, MatrixXd& Y) {
  RowMatrix<double> A = 0.5 * (H + H.transpose());
  Vector<double> w;
  RowMatrix<double> V;
  blas::syevd<double>(A, w, V);
  theta = w.reverse();
  Y = V.rowwise().reverse();
}

template <typename T>
Eigen::VectorXd column_norms(const ConstMatrixRef<T>& Z) {
  return Z.template cast<double>().colwise().norm().transpose();
}

// Orthonormalizes the columns of Z in place by Cholesky QR (two BLAS products and a small Cholesky
// factorization), after scaling the columns to unit norm. Returns the ratio of the smallest to the largest
// diagonal entry of the Cholesky factor (about 1 / cond(Z)), or 0, leaving Z scaled, when Z is too
// ill-conditioned for Cholesky QR; Householder QR then takes over.
template <typename T>
double cholesky_qr(MatrixRef<T> Z, int n_threads) {
  const Index b = Z.cols();
  const Eigen::VectorXd norms = column_norms<T>(Z);
  if (norms.minCoeff() <= 0.0 || !norms.allFinite()) return 0.0;
  Z = Z * norms.cwiseInverse().template cast<T>().asDiagonal();
  RowMatrix<T> gram(b, b);
  transposed_product<T>(Z, Z, gram, n_threads);
  const Eigen::LLT<MatrixXd> llt(gram.template cast<double>());
  if (llt.info() != Eigen::Success) return 0.0;
  // Z = Q L^T, so Q = Z L^-T; refuse when L is too close to singular for that to be accurate.
  const Eigen::VectorXd diagonal = llt.matrixL().toDenseMatrix().diagonal();
  const double floor = std::sqrt(std::numeric_limits<T>::epsilon()) * 10.0;
  const double ratio = diagonal.minCoeff() / diagonal.maxCoeff();
  if (!(ratio > floor)) return 0.0;
  const MatrixXd inverse = llt.matrixU().solve(MatrixXd::Identity(b, b));
  const RowMatrix<T> R_inv = inverse.template cast<T>();
  RowMatrix<T> Q(Z.rows(), b);
  block_product<T>(Z, R_inv, Q, n_threads);
  Z = Q;
  return ratio;
}

template <typename T>
void householder_qr(MatrixRef<T> Z) {
  using ColMatrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>;
  const Eigen::HouseholderQR<ColMatrix> qr{ColMatrix(Z)};
  Z = qr.householderQ() * ColMatrix::Identity(Z.rows(), Z.cols());
}

// Removes from Z its components in span(Q). Returns whether some column lost more than half its norm:
// its remaining part then carries the rounding errors of what was removed, and needs another projection.
template <typename T>
bool project_out(const ConstMatrixRef<T>& Q, MatrixRef<T> Z, int n_threads) {
  const Eigen::VectorXd before = column_norms<T>(Z);
  RowMatrix<T> C(Q.cols(), Z.cols()), QC(Z.rows(), Z.cols());
  transposed_product<T>(Q, Z, C, n_threads);
  block_product<T>(Q, C, QC, n_threads);
  Z -= QC;
  return (column_norms<T>(Z).array() < 0.5 * before.array()).any();
}

// Makes Z orthonormal and orthogonal to the columns of Q: block Gram-Schmidt and QR, twice. The second
// projection is skipped when it cannot matter: no column lost more than half its norm to the first (the
// criterion of Daniel, Gragg, Kaufman and Stewart) and the QR factor was well conditioned, so the rounding
// left in span(Q) was not amplified (a Householder fallback may even bring in directions from span(Q)).
template <typename T>
void orthonormalize_block(const ConstMatrixRef<T>& Q, MatrixRef<T> Z, int n_threads) {
  constexpr double kWellConditioned = 1e-2;
  bool project = Q.cols() > 0;
  for (int round = 0; round < 2; ++round) {
    const bool cancelled = project && project_out<T>(Q, Z, n_threads);
    const double conditioning = cholesky_qr<T>(Z, n_threads);
    if (conditioning == 0.0) householder_qr<T>(Z);
    project = project && (cancelled || conditioning < kWellConditioned);
  }
}

// Ritz vectors U = Q y of consecutive Ritz pairs, their residuals R = A U - U theta and the residual norms
// relative to the largest Ritz value in magnitude.
template <typename T>
struct RitzBlock {
  RowMatrix<T> U, R;
  Eigen::VectorXd residuals;
};

Index leading_count_below(const Eigen::VectorXd& values, double bound) {
  Index count = 0;
  while (count < values.size() && values[count] <= bound) ++count;
  return count;
}

template <typename T>
EigenResult<T> finish(RitzBlock<T>&& ritz, const Eigen::VectorXd& theta, int n_iter, double tol) {
  EigenResult<T> result;
  result.values = theta.head(ritz.U.cols()).template cast<T>();
  result.vectors = std::move(ritz.U);
  fix_signs<T>(result.vectors);
  result.residuals = std::move(ritz.residuals);
  result.n_iter = n_iter;
  result.converged = (result.residuals.array() <= tol).all();
  return result;
}

// The search space of the iterative solver: an orthonormal basis Q, the products W = A Q and the projected
// matrix H = Q^T A Q, grown a block at a time and restarted from its leading Ritz vectors. W is kept so
// that Ritz vectors' products, and hence residuals, cost no extra product with A.
template <typename T>
class SearchSpace {
 public:
  SearchSpace(const BlockProduct<T>& apply, Index n, Index capacity, int n_threads)
      : apply_(apply), Q_(n, capacity), W_(n, capacity), H_(MatrixXd::Zero(capacity, capacity)),
        n_threads_(n_threads) {}

  Index size() const { return k_; }
  int products() const { return products_; }
  const Eigen::VectorXd& values() const { return theta_; }

  // Appends Z, orthonormalized against the basis, multiplies it by A and extends H by one block product.
  void expand(const ConstMatrixRef<T>& Z) {
    const Index w = Z.cols();
    Q_.middleCols(k_, w) = Z;
    orthonormalize_block<T>(Q_.leftCols(k_), Q_.middleCols(k_, w), n_threads_);
    apply_(Q_.middleCols(k_, w), W_.middleCols(k_, w));
    ++products_;
    RowMatrix<T> C(k_ + w, w);
    transposed_product<T>(Q_.leftCols(k_ + w), W_.middleCols(k_, w), C, n_threads_);
    const MatrixXd Cd = C.template cast<double>();
    H_.block(0, k_, k_ + w, w) = Cd;
    H_.block(k_, 0, w, k_) = Cd.topRows(k_).transpose();
    k_ += w;
  }

  // Ritz pairs of the current basis, descending.
  void rayleigh_ritz() {
    small_eigh_descending(H_.topLeftCorner(k_, k_), theta_, Y_);
    scale_ = std::max({std::abs(theta_[0]), std::abs(theta_[k_ - 1]), std::numeric_limits<double>::min()});
  }

  // Ritz pairs first..last-1 of the last Rayleigh-Ritz step.
  RitzBlock<T> ritz_block(Index first, Index last) const {
    const Index w = last - first, n = Q_.rows();
    RitzBlock<T> out{RowMatrix<T>(n, w), RowMatrix<T>(n, w), Eigen::VectorXd()};
    if (w == 0) return out;
    const RowMatrix<T> Yw = Y_.middleCols(first, w).template cast<T>();
    block_product<T>(Q_.leftCols(k_), Yw, out.U, n_threads_);
    block_product<T>(W_.leftCols(k_), Yw, out.R, n_threads_);
    out.R -= out.U * theta_.segment(first, w).template cast<T>().asDiagonal();
    out.residuals = column_norms<T>(out.R) / scale_;
    return out;
  }

  // Thick restart: the basis shrinks to the leading `keep` Ritz vectors, whose products follow from W.
  void restart(Index keep) {
    keep = std::min(keep, k_);
    const RowMatrix<T> Yk = Y_.leftCols(keep).template cast<T>();
    RowMatrix<T> kept(Q_.rows(), keep);
    block_product<T>(Q_.leftCols(k_), Yk, kept, n_threads_);
    Q_.leftCols(keep) = kept;
    block_product<T>(W_.leftCols(k_), Yk, kept, n_threads_);
    W_.leftCols(keep) = kept;
    H_.setZero();
    H_.topLeftCorner(keep, keep) = theta_.head(keep).asDiagonal();
    k_ = keep;
  }

  // Pseudo-random directions (seeded, so runs repeat) for when the basis spans an invariant subspace in
  // which every Ritz pair has converged, so residuals have nothing new to add.
  RowMatrix<T> fresh_directions(Index w) const {
    std::mt19937_64 generator(static_cast<std::uint64_t>(products_));
    std::uniform_real_distribution<double> uniform(-1.0, 1.0);
    RowMatrix<T> Z(Q_.rows(), w);
    for (Index i = 0; i < Z.size(); ++i) Z.data()[i] = static_cast<T>(uniform(generator));
    return Z;
  }

 private:
  const BlockProduct<T>& apply_;
  RowMatrix<T> Q_, W_;
  MatrixXd H_, Y_;
  Eigen::VectorXd theta_;
  double scale_ = 1.0;
  int n_threads_;
  Index k_ = 0;
  int products_ = 0;
};

// Small problems: the whole operator as a dense matrix, then LAPACK.
template <typename T>
EigenResult<T> dense_top(const BlockProduct<T>& apply, Index n, int n_components, double tol, int n_threads) {
  RowMatrix<T> identity = RowMatrix<T>::Identity(n, n), A(n, n);
  apply(identity, A);
  const RowMatrix<T> symmetric = (T(0.5) * (A + A.transpose())).eval();
  Vector<T> w;
  RowMatrix<T> V;
  dense_eigh<T>(symmetric, w, V, n_threads);
  RitzBlock<T> ritz{V.leftCols(n_components), RowMatrix<T>(), Eigen::VectorXd()};
  ritz.R = symmetric * ritz.U - ritz.U * w.head(n_components).asDiagonal();
  const double scale = std::max(w.cwiseAbs().maxCoeff() * 1.0, std::numeric_limits<double>::min());
  ritz.residuals = column_norms<T>(ritz.R) / scale;
  return finish<T>(std::move(ritz), w.template cast<double>(), 1, tol);
}

}  // namespace

template <typename T>
void fix_signs(MatrixRef<T> V) {
  for (Index j = 0; j < V.cols(); ++j) {
    Index row = 0;
    V.col(j).cwiseAbs().maxCoeff(&row);
    if (V(row, j) < T(0)) V.col(j) *= T(-1);
  }
}

template <typename T>
void dense_eigh(const ConstMatrixRef<T>& A, Vector<T>& values, RowMatrix<T>& vectors, int n_threads) {
  require(A.rows() == A.cols(), "A: must be square");
  ThreadGuard guard(n_threads);
  RowMatrix<T> work = A;
  Vector<T> w;
  RowMatrix<T> V;
  blas::syevd<T>(work, w, V);
  values = w.reverse();
  vectors = V.rowwise().reverse();
  fix_signs<T>(vectors);
}

template <typename T>
EigenResult<T> top_eigsh(const BlockProduct<T>& apply, Index n, int n_components, const ConstMatrixRef<T>& start,
                         double tol, int max_iter, int n_threads) {
  require(n >= 1, "n: the operator must have order >= 1");
  require(n_components >= 1 && n_components <= n, "n_components: must be between 1 and n");
  require(start.rows() == n && start.cols() >= 1, "start: must have n rows and at least one column");
  require(tol > 0 && std::isfinite(tol), "tol: must be a positive finite number");
  require(max_iter >= 1, "max_iter: must be >= 1");
  ThreadGuard guard(n_threads);
  const Index b = std::min<Index>(start.cols(), n), wanted = n_components;
  const Index m_max = 2 * kept_columns(wanted, b);
  if (n <= std::max<Index>(m_max, 64)) return dense_top<T>(apply, n, n_components, tol, n_threads);

  SearchSpace<T> basis(apply, n, m_max, n_threads);
  basis.expand(start.leftCols(b));
  Index locked = 0;  // the leading Ritz pairs found converged; their residuals no longer expand the basis
  for (;;) {
    throw_if_interrupted();
    basis.rayleigh_ritz();
    // Residuals of the next (up to) b pairs after the locked ones; converged ones join the locked set.
    // Every pass of this loop locks more pairs or leaves it, so it ends.
    RitzBlock<T> window;
    for (;;) {
      window = basis.ritz_block(locked, std::min(locked + b, basis.size()));
      const Index newly = leading_count_below(window.residuals, tol);
      if (newly == 0) break;
      locked += newly;
      if (locked < wanted) continue;
      // Every wanted pair has converged once; confirm them together, as later steps may have moved them.
      RitzBlock<T> all = basis.ritz_block(0, wanted);
      const Index confirmed = leading_count_below(all.residuals, tol);
      if (confirmed == wanted) return finish<T>(std::move(all), basis.values(), basis.products(), tol);
      // Expand with the pairs from the first unconfirmed one on, whatever their window residuals say.
      locked = confirmed;
      window = basis.ritz_block(locked, std::min(locked + b, basis.size()));
      break;
    }
    if (basis.products() >= max_iter && basis.size() >= wanted)
      return finish<T>(basis.ritz_block(0, wanted), basis.values(), basis.products(), tol);
    if (window.residuals.size() == 0) window.R = basis.fresh_directions(b);  // an invariant subspace, all converged
    if (basis.size() + window.R.cols() > m_max) basis.restart(kept_columns(wanted, b));
    basis.expand(window.R);
  }
}

template <typename T>
EigenResult<T> top_eigsh(const ConstMatrixRef<T>& A, int n_components, const ConstMatrixRef<T>& start, double tol,
                         int max_iter, int n_threads) {
  require(A.rows() == A.cols(), "A: must be square");
  const BlockProduct<T> apply = [&A, n_threads](const ConstMatrixRef<T>& X, MatrixRef<T> Y) {
    block_product<T>(A, X, Y, n_threads, /*symmetric=*/true);
  };
  return top_eigsh<T>(apply, A.rows(), n_components, start, tol, max_iter, n_threads);
}

#define RKM_INSTANTIATE_EIGS(T)                                                                           \
  template void fix_signs<T>(MatrixRef<T>);                                                               \
  template void dense_eigh<T>(const ConstMatrixRef<T>&, Vector<T>&, RowMatrix<T>&, int);                 \
  template EigenResult<T> top_eigsh<T>(const BlockProduct<T>&, Index, int, const ConstMatrixRef<T>&, double, \
                                       int, int);                                                         \
  template EigenResult<T> top_eigsh<T>(const ConstMatrixRef<T>&, int, const ConstMatrixRef<T>&, double, int, int);

RKM_INSTANTIATE_EIGS(float)
RKM_INSTANTIATE_EIGS(double)

}  // namespace rkm
