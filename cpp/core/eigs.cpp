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
#include <stdexcept>
#include <type_traits>

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

// Column norms in double, scaled so that entries beyond sqrt(DBL_MAX) do not overflow their squares.
template <typename T>
Eigen::VectorXd column_norms(const ConstMatrixRef<T>& Z) {
  return Z.template cast<double>().colwise().stableNorm().transpose();
}

template <typename T>
constexpr double unit_roundoff() {
  return std::numeric_limits<T>::epsilon();
}

// A^T B accumulated in double: float32 sums over n terms lose about sqrt(n) ulps, too coarse for the
// orthogonality tests and small Cholesky factorizations that use these products.
template <typename T>
MatrixXd product_in_double(const ConstMatrixRef<T>& A, const ConstMatrixRef<T>& B, int n_threads) {
  RowMatrix<double> C(A.cols(), B.cols());
  if constexpr (std::is_same_v<T, double>) {
    transposed_product<double>(A, B, C, n_threads);
  } else {
    const RowMatrix<double> Ad = A.template cast<double>(), Bd = B.template cast<double>();
    transposed_product<double>(Ad, Bd, C, n_threads);
  }
  return C;
}

// Pseudo-random directions, seeded so that runs repeat.
template <typename T>
void fill_random(MatrixRef<T> Z, std::uint64_t seed) {
  std::mt19937_64 generator(seed);
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  for (Index i = 0; i < Z.rows(); ++i)
    for (Index j = 0; j < Z.cols(); ++j) Z(i, j) = static_cast<T>(uniform(generator));
}

// The inverse of the upper Cholesky factor R of a Gram matrix G = R^T R, or an empty matrix when G is too
// ill-conditioned for Z R^-1 to be accurate: that loses about eps cond(Z)^2 of orthogonality, so cond(Z)
// must stay well below eps^-1/2 for a second pass to repair it.
template <typename T>
MatrixXd inverse_cholesky_factor(const MatrixXd& gram) {
  const Eigen::LLT<MatrixXd> llt(gram);
  if (llt.info() != Eigen::Success) return MatrixXd();
  const Eigen::VectorXd diagonal = llt.matrixLLT().diagonal();
  if (!(diagonal.minCoeff() > 10.0 * std::sqrt(unit_roundoff<T>()) * diagonal.maxCoeff())) return MatrixXd();
  return llt.matrixU().solve(MatrixXd::Identity(gram.rows(), gram.cols()));
}

// Z <- Z M for a small square M (in T, through the core's thin-block product).
template <typename T>
void transform_columns(MatrixRef<T> Z, const MatrixXd& M, int n_threads) {
  const RowMatrix<T> Mt = M.template cast<T>();
  RowMatrix<T> out(Z.rows(), Mt.cols());
  block_product<T>(Z, Mt, out, n_threads);
  Z = out;
}

// One Cholesky QR pass on the columns of Z, scaled to unit norm first. Returns false, leaving Z scaled,
// when Z is too ill-conditioned (or rank deficient) for it.
template <typename T>
bool cholesky_qr(MatrixRef<T> Z, int n_threads) {
  const Eigen::VectorXd norms = column_norms<T>(Z);
  if (norms.minCoeff() <= 0.0 || !norms.allFinite()) return false;
  Z = Z * norms.cwiseInverse().template cast<T>().asDiagonal();
  const MatrixXd inverse = inverse_cholesky_factor<T>(product_in_double<T>(Z, Z, n_threads));
  if (inverse.size() == 0) return false;
  transform_columns<T>(Z, inverse, n_threads);
  return true;
}

template <typename T>
void householder_qr(MatrixRef<T> Z) {
  using ColMatrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>;
  const Eigen::HouseholderQR<ColMatrix> qr{ColMatrix(Z)};
  Z = qr.householderQ() * ColMatrix::Identity(Z.rows(), Z.cols());
}

// Orthonormal columns spanning those of Z: Cholesky QR twice (the second pass removes the eps cond(Z)^2
// the first one left), or Householder QR when Z is too ill-conditioned or rank deficient. Householder
// then completes the basis with directions Z did not span; returns whether that happened.
template <typename T>
bool orthonormalize_columns(MatrixRef<T> Z, int n_threads) {
  if (cholesky_qr<T>(Z, n_threads) && cholesky_qr<T>(Z, n_threads)) return false;
  householder_qr<T>(Z);
  return true;
}

// Removes from Z its components in span(Q). Returns whether some column lost more than 1 - 1/sqrt(2) of
// its norm (the criterion of Daniel, Gragg, Kaufman and Stewart): its remaining part then carries the
// rounding errors of what was removed, relatively amplified, and needs another projection.
template <typename T>
bool project_out(const ConstMatrixRef<T>& Q, MatrixRef<T> Z, int n_threads) {
  const Eigen::VectorXd before = column_norms<T>(Z);
  RowMatrix<T> C(Q.cols(), Z.cols()), QC(Z.rows(), Z.cols());
  transposed_product<T>(Q, Z, C, n_threads);
  block_product<T>(Q, C, QC, n_threads);
  Z -= QC;
  return (column_norms<T>(Z).array() < std::sqrt(0.5) * before.array()).any();
}

// Makes Z orthonormal and orthogonal to the orthonormal columns of Q by block Gram-Schmidt with
// re-orthogonalization. The projection runs again while the last one cancelled a large part of some column
// (the column was mostly rounding noise, which normalizing has just amplified) or Householder QR brought
// in new directions. It always runs at least twice (`twice`) in float32, whose projection coefficients,
// summed over n terms in float, leave about eps sqrt(n) of span(Q) behind (a skipped second pass once let
// that accumulate until the basis collapsed), and for residual blocks far smaller than A, whose rounding
// from span(Q) is large relative to them. A block that keeps cancelling lies numerically in span(Q): it
// is replaced by seeded pseudo-random directions, which cannot, as the basis is much smaller than n.
template <typename T>
void orthonormalize_block(const ConstMatrixRef<T>& Q, MatrixRef<T> Z, int n_threads, std::uint64_t seed,
                          bool twice) {
  constexpr int kMaxRounds = 4, kMaxAttempts = 3;
  twice = twice || std::is_same_v<T, float>;
  for (int attempt = 0; attempt < kMaxAttempts; ++attempt) {
    bool another_round = true;
    for (int round = 0; round < kMaxRounds && another_round; ++round) {
      const bool cancelled = Q.cols() > 0 && project_out<T>(Q, Z, n_threads);
      const bool new_directions = orthonormalize_columns<T>(Z, n_threads);
      another_round = Q.cols() > 0 && ((twice && round == 0) || cancelled || new_directions);
    }
    if (!another_round) return;
    fill_random<T>(Z, seed * kMaxAttempts + static_cast<std::uint64_t>(attempt));
  }
  throw std::runtime_error("top_eigsh: could not extend the Krylov basis with an orthogonal block");
}

// Ritz pairs of the search space with the products of their vectors: U = Q y, AU = W y, the residuals
// R = AU - U diag(theta) and their norms relative to the largest Ritz value in magnitude.
template <typename T>
struct RitzBlock {
  RowMatrix<T> U, AU, R;
  Eigen::VectorXd theta, residuals;
};

template <typename T>
void compute_residuals(RitzBlock<T>& ritz, double scale) {
  ritz.R = ritz.AU - ritz.U * ritz.theta.template cast<T>().asDiagonal();
  ritz.residuals = column_norms<T>(ritz.R) / scale;
}

Index leading_count_below(const Eigen::VectorXd& values, double bound) {
  Index count = 0;
  while (count < values.size() && values[count] <= bound) ++count;
  return count;
}

// Watches the residual of the first Ritz pair not yet locked. It has stagnated when, already within a
// factor kNearAttainable of the attainable accuracy (eps sqrt(n) relative to |A|, the rounding of one
// product with A), it has not halved over kPatience block products: further products cannot reduce it.
class Progress {
 public:
  bool stagnated(Index pair, double residual, int products, double attainable) {
    constexpr int kPatience = 6;
    constexpr double kNearAttainable = 100.0;
    if (pair != pair_ || residual < 0.5 * reference_) {
      pair_ = pair;
      reference_ = residual;
      since_ = products;
      return false;
    }
    return products - since_ >= kPatience && residual <= kNearAttainable * attainable;
  }

 private:
  Index pair_ = -1;
  double reference_ = 0.0;
  int since_ = 0;
};

// The search space of the iterative solver: an orthonormal basis Q, the products W = A Q and the projected
// matrix H = Q^T A Q, grown a block at a time and restarted from its leading Ritz vectors. W is kept so
// that Ritz vectors' products, and hence residuals, cost no extra product with A; `drift` bounds how far
// rounding in the restarts has moved W from A Q, relative to |A|. The wanted Ritz pairs with the smallest
// largest residual seen at a restart are kept, so the solver never returns worse than its best iterate.
template <typename T>
class SearchSpace {
 public:
  SearchSpace(const BlockProduct<T>& apply, Index n, Index capacity, Index wanted, int n_threads)
      : apply_(apply), Q_(n, capacity), W_(n, capacity), H_(MatrixXd::Zero(capacity, capacity)),
        wanted_(wanted), n_threads_(n_threads) {}

  Index size() const { return k_; }
  int products() const { return products_; }

  // Appends Z, orthonormalized against the basis, multiplies it by A and extends H by one block product.
  // `small` says Z's columns are residuals below sqrt(eps) relative to A (see orthonormalize_block).
  void expand(const ConstMatrixRef<T>& Z, bool small = false) {
    const Index w = Z.cols();
    Q_.middleCols(k_, w) = Z;
    orthonormalize_block<T>(Q_.leftCols(k_), Q_.middleCols(k_, w), n_threads_, static_cast<std::uint64_t>(products_),
                            small);
    multiply(Q_.middleCols(k_, w), W_.middleCols(k_, w));
    RowMatrix<T> C(k_ + w, w);
    transposed_product<T>(Q_.leftCols(k_ + w), W_.middleCols(k_, w), C, n_threads_);
    const MatrixXd Cd = C.template cast<double>();
    H_.block(0, k_, k_ + w, w) = Cd;
    H_.block(k_, 0, w, k_) = Cd.topRows(k_).transpose();
    k_ += w;
  }

  // Ritz pairs of the current basis, descending. Residuals are relative to the largest magnitude among the
  // wanted Ritz values, the scale the result reports them in.
  void rayleigh_ritz() {
    small_eigh_descending(H_.topLeftCorner(k_, k_), theta_, Y_);
    const Index last = std::min(wanted_, k_) - 1;
    scale_ = std::max({std::abs(theta_[0]), std::abs(theta_[last]), std::numeric_limits<double>::min()});
  }

  // Ritz pairs first..last-1 of the last Rayleigh-Ritz step.
  RitzBlock<T> ritz_block(Index first, Index last) const {
    const Index w = last - first, n = Q_.rows();
    RitzBlock<T> out{RowMatrix<T>(n, w), RowMatrix<T>(n, w), RowMatrix<T>(), theta_.segment(first, w), {}};
    const RowMatrix<T> Yw = Y_.middleCols(first, w).template cast<T>();
    block_product<T>(Q_.leftCols(k_), Yw, out.U, n_threads_);
    block_product<T>(W_.leftCols(k_), Yw, out.AU, n_threads_);
    compute_residuals<T>(out, scale_);
    return out;
  }

  // Thick restart: the basis shrinks to the leading `keep` Ritz vectors, whose products follow from W.
  // Rounding in those products wears the orthogonality of Q down a little at each restart: once it
  // exceeds a few ulps it is restored (and W = A Q with it), and H is projected afresh rather than taken
  // as diag(theta).
  void restart(Index keep) {
    keep = std::min(keep, k_);
    const RowMatrix<T> Yk = Y_.leftCols(keep).template cast<T>();
    RowMatrix<T> kept(Q_.rows(), keep);
    block_product<T>(Q_.leftCols(k_), Yk, kept, n_threads_);
    Q_.leftCols(keep) = kept;
    block_product<T>(W_.leftCols(k_), Yk, kept, n_threads_);
    W_.leftCols(keep) = kept;
    drift_ += unit_roundoff<T>() * std::sqrt(static_cast<double>(k_));
    k_ = keep;
    checkpoint();
    const MatrixXd gram = product_in_double<T>(Q_.leftCols(k_), Q_.leftCols(k_), n_threads_);
    if ((gram - MatrixXd::Identity(k_, k_)).cwiseAbs().maxCoeff() > 100.0 * unit_roundoff<T>()) {
      const MatrixXd inverse = inverse_cholesky_factor<T>(gram);
      if (inverse.size() == 0) throw std::runtime_error("top_eigsh: the Krylov basis lost its rank");
      transform_columns<T>(Q_.leftCols(k_), inverse, n_threads_);
      transform_columns<T>(W_.leftCols(k_), inverse, n_threads_);
      drift_ += unit_roundoff<T>() * std::sqrt(static_cast<double>(k_));
    }
    RowMatrix<T> C(k_, k_);
    transposed_product<T>(Q_.leftCols(k_), W_.leftCols(k_), C, n_threads_);
    H_.setZero();
    H_.topLeftCorner(k_, k_) = 0.5 * (C.template cast<double>() + C.template cast<double>().transpose());
  }

  // The wanted pairs of the current basis, or those of the best restart when it had smaller residuals.
  RitzBlock<T> best_wanted() const {
    RitzBlock<T> current = ritz_block(0, wanted_);
    if (best_.residuals.size() == 0 || current.residuals.maxCoeff() <= best_.residuals.maxCoeff()) return current;
    return best_;
  }

  // The result from wanted Ritz pairs: a last Rayleigh-Ritz step on span(U), in double, makes U orthonormal
  // to working precision (float32 included) and the values consistent with it; an explicit product with A
  // replaces the kept products where their drift could be comparable to the residuals reported.
  EigenResult<T> finish(RitzBlock<T>&& ritz, double tol) {
    refine(ritz);
    if (drift_ > 0.1 * ritz.residuals.minCoeff()) {
      multiply(ritz.U, ritz.AU);
      compute_residuals<T>(ritz, scale_);
    }
    EigenResult<T> result;
    result.values = ritz.theta.template cast<T>();
    result.vectors = std::move(ritz.U);
    fix_signs<T>(result.vectors);
    result.residuals = std::move(ritz.residuals);
    result.n_iter = products_;
    result.converged = (result.residuals.array() <= tol).all();
    return result;
  }

  // Pseudo-random directions for when the basis spans an invariant subspace in which every Ritz pair has
  // converged, so residuals have nothing new to add.
  RowMatrix<T> fresh_directions(Index w) const {
    RowMatrix<T> Z(Q_.rows(), w);
    fill_random<T>(Z, static_cast<std::uint64_t>(products_));
    return Z;
  }

 private:
  void multiply(const ConstMatrixRef<T>& X, MatrixRef<T> Y) {
    apply_(X, Y);
    ++products_;
    require(Y.allFinite(), "A: its products with the Krylov basis are not finite (A holds NaN or infinity, or "
                           "its entries overflow the dtype in products)");
  }

  // Records the wanted Ritz pairs right after a restart (the leading columns of Q and W) when their largest
  // residual is the smallest seen so far.
  void checkpoint() {
    RitzBlock<T> now{Q_.leftCols(wanted_), W_.leftCols(wanted_), RowMatrix<T>(), theta_.head(wanted_), {}};
    compute_residuals<T>(now, scale_);
    if (best_.residuals.size() == 0 || now.residuals.maxCoeff() < best_.residuals.maxCoeff()) best_ = std::move(now);
  }

  // Rayleigh-Ritz on span(U) in double precision: U <- U R^-1 (R from U^T U = R^T R), then the eigenvectors
  // of U^T A U; AU follows by the same transformations, so no product with A is needed.
  void refine(RitzBlock<T>& ritz) const {
    RowMatrix<double> U = ritz.U.template cast<double>(), AU = ritz.AU.template cast<double>();
    const MatrixXd inverse = inverse_cholesky_factor<double>(product_in_double<double>(U, U, n_threads_));
    if (inverse.size() == 0) throw std::runtime_error("top_eigsh: the Ritz vectors lost their rank");
    transform_columns<double>(U, inverse, n_threads_);
    transform_columns<double>(AU, inverse, n_threads_);
    Eigen::VectorXd theta;
    MatrixXd Y;
    small_eigh_descending(product_in_double<double>(U, AU, n_threads_), theta, Y);
    transform_columns<double>(U, Y, n_threads_);
    transform_columns<double>(AU, Y, n_threads_);
    const RowMatrix<double> R = AU - U * theta.asDiagonal();
    ritz.residuals = column_norms<double>(R) / scale_;
    ritz.theta = theta;
    ritz.U = U.template cast<T>();
    ritz.AU = AU.template cast<T>();
  }

  const BlockProduct<T>& apply_;
  RowMatrix<T> Q_, W_;
  MatrixXd H_, Y_;
  Eigen::VectorXd theta_;
  RitzBlock<T> best_;
  double scale_ = 1.0;
  double drift_ = 0.0;
  Index wanted_;
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
  EigenResult<T> result;
  result.values = w.head(n_components);
  result.vectors = V.leftCols(n_components);
  const RowMatrix<T> R = symmetric * result.vectors - result.vectors * result.values.asDiagonal();
  const double scale = std::max(w.cwiseAbs().maxCoeff() * 1.0, std::numeric_limits<double>::min());
  result.residuals = column_norms<T>(R) / scale;
  require(result.residuals.allFinite(), "A: contains NaN or infinity, or entries that overflow the dtype");
  result.n_iter = 1;
  result.converged = (result.residuals.array() <= tol).all();
  return result;
}

}  // namespace

Index krylov_workspace_columns(int n_components, Index block_columns) {
  const Index capacity = 2 * kept_columns(n_components, block_columns);
  return 2 * capacity + 2 * n_components + 3 * std::max<Index>(n_components, block_columns) + 8 * n_components;
}

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
  require(start.allFinite(), "start: contains NaN or infinity");
  require(tol > 0 && std::isfinite(tol), "tol: must be a positive finite number");
  require(max_iter >= 1, "max_iter: must be >= 1");
  ThreadGuard guard(n_threads);
  const Index b = std::min<Index>(start.cols(), n), wanted = n_components;
  const Index m_max = 2 * kept_columns(wanted, b);
  if (n <= std::max<Index>(m_max, 64)) return dense_top<T>(apply, n, n_components, tol, n_threads);

  // Relative residuals much below eps sqrt(n) are out of reach: one product with A rounds that much.
  const double attainable = unit_roundoff<T>() * std::sqrt(static_cast<double>(n));
  SearchSpace<T> basis(apply, n, m_max, wanted, n_threads);
  basis.expand(start.leftCols(b));
  Index locked = 0;     // the leading Ritz pairs found converged; their residuals no longer expand the basis
  double accept = tol;  // the residual at which a pair counts as converged; raised if residuals stagnate above tol
  Progress progress;
  for (;;) {
    throw_if_interrupted();
    basis.rayleigh_ritz();
    // Residuals of the next (up to) b pairs after the locked ones; converged ones join the locked set.
    // Every pass of this loop locks more pairs or leaves it, so it ends.
    RitzBlock<T> window;
    for (;;) {
      window = basis.ritz_block(locked, std::min(locked + b, basis.size()));
      const Index newly = leading_count_below(window.residuals, accept);
      if (newly == 0) break;
      locked += newly;
      if (locked < wanted) continue;
      // Every wanted pair has converged once; confirm them together, as later steps may have moved them.
      RitzBlock<T> all = basis.ritz_block(0, wanted);
      const Index confirmed = leading_count_below(all.residuals, accept);
      if (confirmed == wanted) return basis.finish(std::move(all), tol);
      // Expand with the pairs from the first unconfirmed one on, whatever their window residuals say.
      locked = confirmed;
      window = basis.ritz_block(locked, std::min(locked + b, basis.size()));
      break;
    }
    if (window.residuals.size() > 0 &&
        progress.stagnated(locked, window.residuals[0], basis.products(), attainable)) {
      // Rounding bounds this pair's residual: accept it (and the others at that level) as converged as far
      // as the working precision allows; the result then reports converged = false if that is above tol.
      accept = std::max(accept, 2.0 * window.residuals[0]);
      continue;
    }
    if (basis.products() >= max_iter && basis.size() >= wanted) return basis.finish(basis.best_wanted(), tol);
    if (window.residuals.size() == 0) window.R = basis.fresh_directions(b);  // an invariant subspace, all converged
    if (basis.size() + window.R.cols() > m_max) basis.restart(kept_columns(wanted, b));
    const bool small = window.residuals.size() > 0 && window.residuals.maxCoeff() < std::sqrt(unit_roundoff<T>());
    basis.expand(window.R, small);
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
