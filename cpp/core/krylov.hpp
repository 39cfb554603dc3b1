// The iteration of the block-Krylov eigensolver (top_eigsh, eigs.hpp), written once for wherever its tall n-row
// blocks live: `Ops<T>` owns those blocks and the operations on them (HostOps in eigs.cpp, CudaOps in cpp/cuda),
// while the small projected problems always run here, on the host, in double. An Ops<T> provides:
//
//   Matrix, View, ConstView    an owning n x w block (Matrix() is empty), and mutable / read-only ranges of its
//                              columns; a Matrix converts to both views; all three have rows() and cols()
//   matrix(n, w)               an uninitialised block
//   columns(M, first, count)   columns first .. first + count - 1 of M, as a view
//   clone(Z), copy(from, to)   a new block equal to Z; to = from
//   upload(A), download(Z)     a block from host rows; Z on the host
//   column_norms(Z)            the columns' norms in double, safe from overflow
//   scale_columns(Z, f)        Z <- Z diag(f), f rounded to T
//   gram_in_double(A, B)       A^T B accumulated in double (a small host matrix)
//   transposed_product(A, B)   A^T B in T (a small host matrix)
//   times(A, M, out)           out = A M for a small host matrix M, rounded to T
//   remove_span(Q, Z)          Z <- Z - Q (Q^T Z)
//   residuals(AU, U, theta)    AU - U diag(theta), theta rounded to T
//   all_finite(Z), fill_random(Z, seed), householder_qr(Z) (Z <- orthonormal columns of the same span)
//   threads()                  the host threads for the small problems
//   in_double(), to_double(Z), from_double(Zd)   the same operations in double, and blocks converted to and fro
#pragma once

#include "core/blas.hpp"
#include "core/common.hpp"
#include "core/eigs.hpp"

#include <Eigen/Cholesky>
#include <Eigen/QR>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <stdexcept>
#include <type_traits>
#include <utility>

namespace rkm::krylov {

using Eigen::Index;
using Eigen::MatrixXd;

// Columns kept by a thick restart when `wanted` pairs are sought in blocks of b columns: the wanted Ritz
// vectors, a guard of 60% more and two blocks; the basis grows to twice this before the next restart.
// Measured on RBF kernel spectra (s = 10, 50; b = 8, 16): tighter bases cost more products, looser ones
// more orthogonalization without saving products.
inline Index kept_columns(Index wanted, Index b) {
  const Index columns = wanted * 8 / 5 + 2 * b;
  return (columns + b - 1) / b * b;
}

// Y = A X for blocks that live where `Ops` keeps them.
template <typename T, template <typename> class Ops>
using Product = std::function<void(const typename Ops<T>::ConstView&, typename Ops<T>::View)>;

// Eigenpairs of a small symmetric matrix in double, descending.
inline void small_eigh_descending(const MatrixXd& H, Eigen::VectorXd& theta, MatrixXd& Y) {
  RowMatrix<double> A = 0.5 * (H + H.transpose());
  Vector<double> w;
  RowMatrix<double> V;
  blas::syevd<double>(A, w, V);
  theta = w.reverse();
  Y = V.rowwise().reverse();
}

template <typename T>
constexpr double unit_roundoff() {
  return std::numeric_limits<T>::epsilon();
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

// Pseudo-random directions in host memory, seeded so that runs repeat.
template <typename T>
void fill_random(MatrixRef<T> Z, std::uint64_t seed) {
  std::mt19937_64 generator(seed);
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  for (Index i = 0; i < Z.rows(); ++i)
    for (Index j = 0; j < Z.cols(); ++j) Z(i, j) = static_cast<T>(uniform(generator));
}

// Z <- orthonormal columns spanning those of Z (completed with others where Z is rank deficient), in host memory.
template <typename T>
void householder_qr(MatrixRef<T> Z) {
  using ColMatrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>;
  const Eigen::HouseholderQR<ColMatrix> qr{ColMatrix(Z)};
  Z = qr.householderQ() * ColMatrix::Identity(Z.rows(), Z.cols());
}

// Z <- Z M for a small square M (rounded to T).
template <typename T, template <typename> class Ops>
void transform_columns(const Ops<T>& ops, typename Ops<T>::View Z, const MatrixXd& M) {
  typename Ops<T>::Matrix out = ops.matrix(Z.rows(), M.cols());
  ops.times(Z, M, out);
  ops.copy(out, Z);
}

// One Cholesky QR pass on the columns of Z, scaled to unit norm first. Returns false, leaving Z scaled,
// when Z is too ill-conditioned (or rank deficient) for it.
template <typename T, template <typename> class Ops>
bool cholesky_qr(const Ops<T>& ops, typename Ops<T>::View Z) {
  const Eigen::VectorXd norms = ops.column_norms(Z);
  if (norms.minCoeff() <= 0.0 || !norms.allFinite()) return false;
  ops.scale_columns(Z, norms.cwiseInverse());
  const MatrixXd inverse = inverse_cholesky_factor<T>(ops.gram_in_double(Z, Z));
  if (inverse.size() == 0) return false;
  transform_columns<T, Ops>(ops, Z, inverse);
  return true;
}

// Orthonormal columns spanning those of Z: Cholesky QR twice (the second pass removes the eps cond(Z)^2
// the first one left), or Householder QR when Z is too ill-conditioned or rank deficient. Householder
// then completes the basis with directions Z did not span; returns whether that happened.
template <typename T, template <typename> class Ops>
bool orthonormalize_columns(const Ops<T>& ops, typename Ops<T>::View Z) {
  if (cholesky_qr<T, Ops>(ops, Z) && cholesky_qr<T, Ops>(ops, Z)) return false;
  ops.householder_qr(Z);
  return true;
}

// Removes from Z its components in span(Q). Returns whether some column lost more than 1 - 1/sqrt(2) of
// its norm (the criterion of Daniel, Gragg, Kaufman and Stewart): its remaining part then carries the
// rounding errors of what was removed, relatively amplified, and needs another projection.
template <typename T, template <typename> class Ops>
bool project_out(const Ops<T>& ops, const typename Ops<T>::ConstView& Q, typename Ops<T>::View Z) {
  const Eigen::VectorXd before = ops.column_norms(Z);
  ops.remove_span(Q, Z);
  return (ops.column_norms(Z).array() < std::sqrt(0.5) * before.array()).any();
}

// Makes Z orthonormal and orthogonal to the orthonormal columns of Q by block Gram-Schmidt with
// re-orthogonalization. The projection runs again while the last one cancelled a large part of some column
// (the column was mostly rounding noise, which normalizing has just amplified) or Householder QR brought
// in new directions. It always runs at least twice (`twice`) in float32, whose projection coefficients,
// summed over n terms in float, leave about eps sqrt(n) of span(Q) behind (a skipped second pass once let
// that accumulate until the basis collapsed), and for residual blocks far smaller than A, whose rounding
// from span(Q) is large relative to them. A block that keeps cancelling lies numerically in span(Q): it
// is replaced by seeded pseudo-random directions, which cannot, as the basis is much smaller than n.
template <typename T, template <typename> class Ops>
void orthonormalize_block(const Ops<T>& ops, const typename Ops<T>::ConstView& Q, typename Ops<T>::View Z,
                          std::uint64_t seed, bool twice) {
  constexpr int kMaxRounds = 4, kMaxAttempts = 3;
  twice = twice || std::is_same_v<T, float>;
  for (int attempt = 0; attempt < kMaxAttempts; ++attempt) {
    bool another_round = true;
    for (int round = 0; round < kMaxRounds && another_round; ++round) {
      const bool cancelled = Q.cols() > 0 && project_out<T, Ops>(ops, Q, Z);
      const bool new_directions = orthonormalize_columns<T, Ops>(ops, Z);
      another_round = Q.cols() > 0 && ((twice && round == 0) || cancelled || new_directions);
    }
    if (!another_round) return;
    ops.fill_random(Z, seed * kMaxAttempts + static_cast<std::uint64_t>(attempt));
  }
  throw std::runtime_error("top_eigsh: could not extend the Krylov basis with an orthogonal block");
}

// Ritz pairs of the search space with the products of their vectors: U = Q y, AU = W y, the residuals
// R = AU - U diag(theta) and their norms relative to the largest Ritz value in magnitude.
template <typename T, template <typename> class Ops>
struct RitzBlock {
  typename Ops<T>::Matrix U, AU, R;
  Eigen::VectorXd theta, residuals;
};

template <typename T, template <typename> class Ops>
void compute_residuals(const Ops<T>& ops, RitzBlock<T, Ops>& ritz, double scale) {
  ritz.R = ops.residuals(ritz.AU, ritz.U, ritz.theta);
  ritz.residuals = ops.column_norms(ritz.R) / scale;
}

inline Index leading_count_below(const Eigen::VectorXd& values, double bound) {
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
template <typename T, template <typename> class Ops>
class SearchSpace {
 public:
  using Matrix = typename Ops<T>::Matrix;
  using Ritz = RitzBlock<T, Ops>;

  SearchSpace(const Ops<T>& ops, const Product<T, Ops>& apply, Index n, Index capacity, Index wanted)
      : ops_(ops), apply_(apply), Q_(ops.matrix(n, capacity)), W_(ops.matrix(n, capacity)),
        H_(MatrixXd::Zero(capacity, capacity)), wanted_(wanted) {}

  Index size() const { return k_; }
  int products() const { return products_; }

  // Appends Z, orthonormalized against the basis, multiplies it by A and extends H by one block product.
  // `small` says Z's columns are residuals below sqrt(eps) relative to A (see orthonormalize_block).
  void expand(const typename Ops<T>::ConstView& Z, bool small = false) {
    const Index w = Z.cols();
    ops_.copy(Z, ops_.columns(Q_, k_, w));
    orthonormalize_block<T, Ops>(ops_, ops_.columns(std::as_const(Q_), 0, k_), ops_.columns(Q_, k_, w),
                                 static_cast<std::uint64_t>(products_), small);
    multiply(ops_.columns(std::as_const(Q_), k_, w), ops_.columns(W_, k_, w));
    const RowMatrix<T> C = ops_.transposed_product(ops_.columns(std::as_const(Q_), 0, k_ + w),
                                                   ops_.columns(std::as_const(W_), k_, w));
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
  Ritz ritz_block(Index first, Index last) const {
    const Index w = last - first, n = Q_.rows();
    Ritz out{ops_.matrix(n, w), ops_.matrix(n, w), Matrix(), theta_.segment(first, w), {}};
    const MatrixXd Yw = Y_.middleCols(first, w);
    ops_.times(ops_.columns(Q_, 0, k_), Yw, out.U);
    ops_.times(ops_.columns(W_, 0, k_), Yw, out.AU);
    compute_residuals<T, Ops>(ops_, out, scale_);
    return out;
  }

  // Thick restart: the basis shrinks to the leading `keep` Ritz vectors, whose products follow from W.
  // Rounding in those products wears the orthogonality of Q down a little at each restart: once it
  // exceeds a few ulps it is restored (and W = A Q with it), and H is projected afresh rather than taken
  // as diag(theta).
  void restart(Index keep) {
    keep = std::min(keep, k_);
    {  // `kept` is freed before the checkpoint and the re-orthogonalization allocate theirs
      const MatrixXd Yk = Y_.leftCols(keep);
      Matrix kept = ops_.matrix(Q_.rows(), keep);
      ops_.times(ops_.columns(std::as_const(Q_), 0, k_), Yk, kept);
      ops_.copy(kept, ops_.columns(Q_, 0, keep));
      ops_.times(ops_.columns(std::as_const(W_), 0, k_), Yk, kept);
      ops_.copy(kept, ops_.columns(W_, 0, keep));
    }
    drift_ += unit_roundoff<T>() * std::sqrt(static_cast<double>(k_));
    k_ = keep;
    checkpoint();
    const MatrixXd gram = ops_.gram_in_double(ops_.columns(Q_, 0, k_), ops_.columns(Q_, 0, k_));
    if ((gram - MatrixXd::Identity(k_, k_)).cwiseAbs().maxCoeff() > 100.0 * unit_roundoff<T>()) {
      const MatrixXd inverse = inverse_cholesky_factor<T>(gram);
      if (inverse.size() == 0) throw std::runtime_error("top_eigsh: the Krylov basis lost its rank");
      transform_columns<T, Ops>(ops_, ops_.columns(Q_, 0, k_), inverse);
      transform_columns<T, Ops>(ops_, ops_.columns(W_, 0, k_), inverse);
      drift_ += unit_roundoff<T>() * std::sqrt(static_cast<double>(k_));
    }
    const RowMatrix<T> C = ops_.transposed_product(ops_.columns(Q_, 0, k_), ops_.columns(W_, 0, k_));
    H_.setZero();
    H_.topLeftCorner(k_, k_) = 0.5 * (C.template cast<double>() + C.template cast<double>().transpose());
  }

  // The wanted pairs of the current basis, or those of the best restart when it had smaller residuals.
  Ritz best_wanted() const {
    Ritz current = ritz_block(0, wanted_);
    if (best_.residuals.size() == 0 || current.residuals.maxCoeff() <= best_.residuals.maxCoeff()) return current;
    return Ritz{ops_.clone(best_.U), ops_.clone(best_.AU), ops_.clone(best_.R), best_.theta, best_.residuals};
  }

  // The result from wanted Ritz pairs: a last Rayleigh-Ritz step on span(U), in double, makes U orthonormal
  // to working precision (float32 included) and the values consistent with it; an explicit product with A
  // replaces the kept products where their drift could be comparable to the residuals reported.
  EigenResult<T> finish(Ritz&& ritz, double tol) {
    refine(ritz);
    if (drift_ > 0.1 * ritz.residuals.minCoeff()) {
      multiply(ritz.U, ritz.AU);
      compute_residuals<T, Ops>(ops_, ritz, scale_);
    }
    EigenResult<T> result;
    result.values = ritz.theta.template cast<T>();
    result.vectors = ops_.download(ritz.U);
    fix_signs<T>(result.vectors);
    result.residuals = std::move(ritz.residuals);
    result.n_iter = products_;
    result.converged = (result.residuals.array() <= tol).all();
    return result;
  }

  // Pseudo-random directions for when the basis spans an invariant subspace in which every Ritz pair has
  // converged, so residuals have nothing new to add.
  Matrix fresh_directions(Index w) const {
    Matrix Z = ops_.matrix(Q_.rows(), w);
    ops_.fill_random(Z, static_cast<std::uint64_t>(products_));
    return Z;
  }

 private:
  void multiply(const typename Ops<T>::ConstView& X, typename Ops<T>::View Y) {
    apply_(X, Y);
    ++products_;
    require(ops_.all_finite(Y), "A: its products with the Krylov basis are not finite (A holds NaN or infinity, "
                                "or its entries overflow the dtype in products)");
  }

  // Records the wanted Ritz pairs right after a restart (the leading columns of Q and W) when their largest
  // residual is the smallest seen so far.
  void checkpoint() {
    Ritz now{ops_.clone(ops_.columns(Q_, 0, wanted_)), ops_.clone(ops_.columns(W_, 0, wanted_)), Matrix(),
             theta_.head(wanted_), {}};
    compute_residuals<T, Ops>(ops_, now, scale_);
    if (best_.residuals.size() == 0 || now.residuals.maxCoeff() < best_.residuals.maxCoeff()) best_ = std::move(now);
  }

  // Rayleigh-Ritz on span(U) in double precision: U <- U R^-1 (R from U^T U = R^T R), then the eigenvectors
  // of U^T A U; AU follows by the same transformations, so no product with A is needed.
  void refine(Ritz& ritz) const {
    const Ops<double> in_double = ops_.in_double();
    typename Ops<double>::Matrix U = ops_.to_double(ritz.U), AU = ops_.to_double(ritz.AU);
    const MatrixXd inverse = inverse_cholesky_factor<double>(in_double.gram_in_double(U, U));
    if (inverse.size() == 0) throw std::runtime_error("top_eigsh: the Ritz vectors lost their rank");
    transform_columns<double, Ops>(in_double, U, inverse);
    transform_columns<double, Ops>(in_double, AU, inverse);
    Eigen::VectorXd theta;
    MatrixXd Y;
    small_eigh_descending(in_double.gram_in_double(U, AU), theta, Y);
    transform_columns<double, Ops>(in_double, U, Y);
    transform_columns<double, Ops>(in_double, AU, Y);
    ritz.residuals = in_double.column_norms(in_double.residuals(AU, U, theta)) / scale_;
    ritz.theta = theta;
    ritz.U = ops_.from_double(U);
    ritz.AU = ops_.from_double(AU);
  }

  const Ops<T>& ops_;
  const Product<T, Ops>& apply_;
  Matrix Q_, W_;
  MatrixXd H_, Y_;
  Eigen::VectorXd theta_;
  Ritz best_;
  double scale_ = 1.0;
  double drift_ = 0.0;
  Index wanted_;
  Index k_ = 0;
  int products_ = 0;
};

// Small problems: the whole operator as a dense matrix, then LAPACK.
template <typename T, template <typename> class Ops>
EigenResult<T> dense_top(const Ops<T>& ops, const Product<T, Ops>& apply, Index n, int n_components, double tol) {
  const typename Ops<T>::Matrix identity = ops.upload(RowMatrix<T>::Identity(n, n));
  typename Ops<T>::Matrix product = ops.matrix(n, n);
  apply(identity, product);
  const RowMatrix<T> A = ops.download(product);
  const RowMatrix<T> symmetric = (T(0.5) * (A + A.transpose())).eval();
  Vector<T> w;
  RowMatrix<T> V;
  dense_eigh<T>(symmetric, w, V, ops.threads());
  EigenResult<T> result;
  result.values = w.head(n_components);
  result.vectors = V.leftCols(n_components);
  const RowMatrix<T> R = symmetric * result.vectors - result.vectors * result.values.asDiagonal();
  const double scale = std::max(w.cwiseAbs().maxCoeff() * 1.0, std::numeric_limits<double>::min());
  result.residuals = R.template cast<double>().colwise().stableNorm().transpose() / scale;
  require(result.residuals.allFinite(), "A: contains NaN or infinity, or entries that overflow the dtype");
  result.n_iter = 1;
  result.converged = (result.residuals.array() <= tol).all();
  return result;
}

// top_eigsh (eigs.hpp) for an operator whose products run where `ops` keeps the blocks; `start` is on the host.
template <typename T, template <typename> class Ops>
EigenResult<T> top_eigsh(const Ops<T>& ops, const Product<T, Ops>& apply, Index n, int n_components,
                         const ConstMatrixRef<T>& start, double tol, int max_iter) {
  require(n >= 1, "n: the operator must have order >= 1");
  require(n_components >= 1 && n_components <= n, "n_components: must be between 1 and n");
  require(start.rows() == n && start.cols() >= 1, "start: must have n rows and at least one column");
  require(start.allFinite(), "start: contains NaN or infinity");
  require(tol > 0 && std::isfinite(tol), "tol: must be a positive finite number");
  require(max_iter >= 1, "max_iter: must be >= 1");
  const Index b = std::min<Index>(start.cols(), n), wanted = n_components;
  const Index m_max = 2 * kept_columns(wanted, b);
  if (n <= std::max<Index>(m_max, 64)) return dense_top<T, Ops>(ops, apply, n, n_components, tol);

  // Relative residuals much below eps sqrt(n) are out of reach: one product with A rounds that much.
  const double attainable = unit_roundoff<T>() * std::sqrt(static_cast<double>(n));
  SearchSpace<T, Ops> basis(ops, apply, n, m_max, wanted);
  basis.expand(ops.upload(start.leftCols(b)));
  Index locked = 0;     // the leading Ritz pairs found converged; their residuals no longer expand the basis
  double accept = tol;  // the residual at which a pair counts as converged; raised if residuals stagnate above tol
  Progress progress;
  for (;;) {
    throw_if_interrupted();
    basis.rayleigh_ritz();
    // Residuals of the next (up to) b pairs after the locked ones; converged ones join the locked set.
    // Every pass of this loop locks more pairs or leaves it, so it ends.
    RitzBlock<T, Ops> window;
    for (;;) {
      window = basis.ritz_block(locked, std::min(locked + b, basis.size()));
      const Index newly = leading_count_below(window.residuals, accept);
      if (newly == 0) break;
      locked += newly;
      if (locked < wanted) continue;
      // Every wanted pair has converged once; confirm them together, as later steps may have moved them.
      RitzBlock<T, Ops> all = basis.ritz_block(0, wanted);
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

}  // namespace rkm::krylov
