#include "core/eigs.hpp"

#include "core/blas.hpp"
#include "core/products.hpp"

#include <Eigen/Cholesky>
#include <Eigen/QR>

#include <algorithm>
#include <cmath>
#include <limits>

namespace rkm {

namespace {
using Eigen::Index;
using Eigen::MatrixXd;

// Basis size, in blocks, before a thick restart, and how many blocks' worth of Ritz vectors survive it.
constexpr Index kBasisBlocks = 6;
constexpr Index kKeptBlocks = 3;

// Eigenpairs of a small symmetric matrix in double, descending.
void small_eigh_descending(const MatrixXd& H, Eigen::VectorXd& theta, MatrixXd& Y) {
  RowMatrix<double> A = 0.5 * (H + H.transpose());
  Vector<double> w;
  RowMatrix<double> V;
  blas::syevd<double>(A, w, V);
  theta = w.reverse();
  Y = V.rowwise().reverse();
}

// Orthonormalizes the columns of Z in place by Cholesky QR (two BLAS products and a small Cholesky
// factorization), after scaling the columns to unit norm. Returns false, leaving Z scaled, when Z is too
// ill-conditioned for it; Householder QR then takes over.
template <typename T>
bool cholesky_qr(MatrixRef<T> Z) {
  const Index b = Z.cols();
  const Eigen::VectorXd norms = Z.template cast<double>().colwise().norm().transpose();
  if (norms.minCoeff() <= 0.0 || !norms.allFinite()) return false;
  Z = Z * norms.cwiseInverse().template cast<T>().asDiagonal();
  RowMatrix<T> gram(b, b);
  blas::gemm<T>(blas::Op::transpose, blas::Op::none, Z, Z, gram, T(1), T(0));
  const Eigen::LLT<MatrixXd> llt(gram.template cast<double>());
  if (llt.info() != Eigen::Success) return false;
  // Z = Q L^T, so Q = Z L^-T; refuse when L is too close to singular for that to be accurate.
  const Eigen::VectorXd diagonal = llt.matrixL().toDenseMatrix().diagonal();
  const double floor = std::sqrt(std::numeric_limits<T>::epsilon()) * 10.0;
  if (diagonal.minCoeff() <= floor * diagonal.maxCoeff()) return false;
  const MatrixXd inverse = llt.matrixU().solve(MatrixXd::Identity(b, b));
  const RowMatrix<T> R_inv = inverse.template cast<T>();
  RowMatrix<T> Q(Z.rows(), b);
  blas::gemm<T>(blas::Op::none, blas::Op::none, Z, R_inv, Q, T(1), T(0));
  Z = Q;
  return true;
}

template <typename T>
void householder_qr(MatrixRef<T> Z) {
  using ColMatrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>;
  const Eigen::HouseholderQR<ColMatrix> qr{ColMatrix(Z)};
  Z = qr.householderQ() * ColMatrix::Identity(Z.rows(), Z.cols());
}

// Makes Z orthonormal and orthogonal to the columns of Q. Two rounds of block Gram-Schmidt + QR keep it
// so to working precision even when Z is nearly inside span(Q) or rank deficient.
template <typename T>
void orthonormalize_block(const ConstMatrixRef<T>& Q, MatrixRef<T> Z) {
  for (int round = 0; round < 2; ++round) {
    if (Q.cols() > 0) {
      RowMatrix<T> C(Q.cols(), Z.cols());
      blas::gemm<T>(blas::Op::transpose, blas::Op::none, Q, Z, C, T(1), T(0));
      blas::gemm<T>(blas::Op::none, blas::Op::none, Q, C, Z, T(-1), T(1));
    }
    if (!cholesky_qr<T>(Z)) householder_qr<T>(Z);
  }
}

// Relative residual norms ||A u_i - theta_i u_i|| / scale of the first `count` Ritz pairs.
template <typename T>
Eigen::VectorXd residual_norms(const RowMatrix<T>& R, Index count, double scale) {
  Eigen::VectorXd out(count);
  for (Index i = 0; i < count; ++i) out[i] = R.col(i).template cast<double>().norm() / scale;
  return out;
}

template <typename T>
EigenResult<T> finish(const RowMatrix<T>& U, const Eigen::VectorXd& theta, const Eigen::VectorXd& residuals,
                      int n_components, int n_iter, double tol) {
  EigenResult<T> result;
  result.values = theta.head(n_components).template cast<T>();
  result.vectors = U.leftCols(n_components);
  fix_signs<T>(result.vectors);
  result.residuals = residuals.head(n_components);
  result.n_iter = n_iter;
  result.converged = (result.residuals.array() <= tol).all();
  return result;
}

// Small problems: the whole operator as a dense matrix, then LAPACK.
template <typename T>
EigenResult<T> dense_top(const BlockProduct<T>& apply, Index n, int n_components, double tol, int n_threads) {
  RowMatrix<T> identity = RowMatrix<T>::Identity(n, n), A(n, n);
  apply(identity, A);
  const RowMatrix<T> symmetric = (T(0.5) * (A + A.transpose())).eval();
  Vector<T> w;
  RowMatrix<T> V;
  dense_eigh<T>(symmetric, w, V, n_threads);
  const RowMatrix<T> U = V.leftCols(n_components);
  const RowMatrix<T> R = symmetric * U - U * w.head(n_components).asDiagonal();
  const double scale = std::max(w.cwiseAbs().maxCoeff() * 1.0, std::numeric_limits<double>::min());
  return finish<T>(U, w.template cast<double>(), residual_norms<T>(R, n_components, scale), n_components, 1, tol);
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
  require(start.rows() == n && start.cols() >= n_components,
          "start: must have n rows and at least n_components columns");
  require(tol > 0 && std::isfinite(tol), "tol: must be a positive finite number");
  require(max_iter >= 1, "max_iter: must be >= 1");
  ThreadGuard guard(n_threads);
  const Index b = std::min<Index>(start.cols(), n);
  if (n <= std::max<Index>(kBasisBlocks * b, 64)) return dense_top<T>(apply, n, n_components, tol, n_threads);

  const Index m_max = kBasisBlocks * b;
  RowMatrix<T> Q(n, m_max), W(n, m_max);
  MatrixXd H = MatrixXd::Zero(m_max, m_max);
  Q.leftCols(b) = start.leftCols(b);
  orthonormalize_block<T>(Q.leftCols(0), Q.leftCols(b));
  apply(Q.leftCols(b), W.leftCols(b));
  int n_iter = 1;
  {
    RowMatrix<T> C(b, b);
    blas::gemm<T>(blas::Op::transpose, blas::Op::none, Q.leftCols(b), W.leftCols(b), C, T(1), T(0));
    H.topLeftCorner(b, b) = C.template cast<double>();
  }
  Index k = b;
  Eigen::VectorXd theta;
  MatrixXd Y;
  RowMatrix<T> U(n, b), AU(n, b), R(n, b);
  for (;;) {
    throw_if_interrupted();
    small_eigh_descending(H.topLeftCorner(k, k), theta, Y);
    const RowMatrix<T> Yb = Y.leftCols(b).template cast<T>();
    blas::gemm<T>(blas::Op::none, blas::Op::none, Q.leftCols(k), Yb, U, T(1), T(0));
    blas::gemm<T>(blas::Op::none, blas::Op::none, W.leftCols(k), Yb, AU, T(1), T(0));
    R = AU - U * theta.head(b).template cast<T>().asDiagonal();
    const double scale = std::max(std::abs(theta[0]), std::abs(theta[k - 1]));
    const Eigen::VectorXd residuals = residual_norms<T>(R, b, std::max(scale, std::numeric_limits<double>::min()));
    const bool done = (residuals.head(n_components).array() <= tol).all();
    if (done || n_iter >= max_iter) return finish<T>(U, theta, residuals, n_components, n_iter, tol);

    if (k + b > m_max) {  // thick restart: keep the leading Ritz vectors, whose products are known
      const Index keep = std::min(k, kKeptBlocks * b);
      const RowMatrix<T> Yk = Y.leftCols(keep).template cast<T>();
      RowMatrix<T> kept(n, keep);
      blas::gemm<T>(blas::Op::none, blas::Op::none, Q.leftCols(k), Yk, kept, T(1), T(0));
      Q.leftCols(keep) = kept;
      blas::gemm<T>(blas::Op::none, blas::Op::none, W.leftCols(k), Yk, kept, T(1), T(0));
      W.leftCols(keep) = kept;
      H.setZero();
      H.topLeftCorner(keep, keep) = theta.head(keep).asDiagonal();
      k = keep;
    }
    // Expand with the residuals of the leading Ritz pairs: span(Q, R) = span(Q, A U).
    Q.middleCols(k, b) = R;
    orthonormalize_block<T>(Q.leftCols(k), Q.middleCols(k, b));
    apply(Q.middleCols(k, b), W.middleCols(k, b));
    ++n_iter;
    RowMatrix<T> C(k + b, b);
    blas::gemm<T>(blas::Op::transpose, blas::Op::none, Q.leftCols(k + b), W.middleCols(k, b), C, T(1), T(0));
    const MatrixXd Cd = C.template cast<double>();
    H.block(0, k, k + b, b) = Cd;
    H.block(k, 0, b, k) = Cd.topRows(k).transpose();
    k += b;
  }
}

template <typename T>
EigenResult<T> top_eigsh(const ConstMatrixRef<T>& A, int n_components, const ConstMatrixRef<T>& start, double tol,
                         int max_iter, int n_threads) {
  require(A.rows() == A.cols(), "A: must be square");
  const BlockProduct<T> apply = [&A, n_threads](const ConstMatrixRef<T>& X, MatrixRef<T> Y) {
    block_product<T>(A, X, Y, n_threads);
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
