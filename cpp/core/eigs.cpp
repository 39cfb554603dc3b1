#include "core/eigs.hpp"

#include "core/blas.hpp"
#include "core/krylov.hpp"
#include "core/products.hpp"

#include <cstdint>
#include <type_traits>

namespace rkm {

namespace {
using Eigen::Index;
using Eigen::MatrixXd;

// The Krylov iteration's blocks in host memory, operated on by the core's products with n_threads threads.
template <typename T>
class HostOps {
 public:
  using Matrix = RowMatrix<T>;
  using View = MatrixRef<T>;
  using ConstView = ConstMatrixRef<T>;

  explicit HostOps(int n_threads) : n_threads_(n_threads) {}

  int threads() const { return n_threads_; }
  Matrix matrix(Index rows, Index cols) const { return Matrix(rows, cols); }
  View columns(Matrix& M, Index first, Index count) const { return M.middleCols(first, count); }
  ConstView columns(const Matrix& M, Index first, Index count) const { return M.middleCols(first, count); }
  Matrix clone(const ConstView& Z) const { return Z; }
  void copy(const ConstView& from, View to) const { to = from; }
  Matrix upload(const ConstMatrixRef<T>& A) const { return A; }
  RowMatrix<T> download(const ConstView& Z) const { return Z; }

  // Scaled, so that entries beyond sqrt(DBL_MAX) do not overflow their squares.
  Eigen::VectorXd column_norms(const ConstView& Z) const {
    return Z.template cast<double>().colwise().stableNorm().transpose();
  }

  void scale_columns(View Z, const Eigen::VectorXd& factors) const {
    Z = Z * factors.template cast<T>().asDiagonal();
  }

  // float32 sums over n terms lose about sqrt(n) ulps, too coarse for the orthogonality tests and small Cholesky
  // factorizations that use these products.
  MatrixXd gram_in_double(const ConstView& A, const ConstView& B) const {
    RowMatrix<double> C(A.cols(), B.cols());
    if constexpr (std::is_same_v<T, double>) {
      rkm::transposed_product<double>(A, B, C, n_threads_);
    } else {
      const RowMatrix<double> Ad = A.template cast<double>(), Bd = B.template cast<double>();
      rkm::transposed_product<double>(Ad, Bd, C, n_threads_);
    }
    return C;
  }

  RowMatrix<T> transposed_product(const ConstView& A, const ConstView& B) const {
    RowMatrix<T> C(A.cols(), B.cols());
    rkm::transposed_product<T>(A, B, C, n_threads_);
    return C;
  }

  void times(const ConstView& A, const MatrixXd& M, View out) const {
    const RowMatrix<T> Mt = M.template cast<T>();
    block_product<T>(A, Mt, out, n_threads_);
  }

  void remove_span(const ConstView& Q, View Z) const {
    RowMatrix<T> C(Q.cols(), Z.cols()), QC(Z.rows(), Z.cols());
    rkm::transposed_product<T>(Q, Z, C, n_threads_);
    block_product<T>(Q, C, QC, n_threads_);
    Z -= QC;
  }

  Matrix residuals(const ConstView& AU, const ConstView& U, const Eigen::VectorXd& theta) const {
    return AU - U * theta.template cast<T>().asDiagonal();
  }

  bool all_finite(const ConstView& Z) const { return Z.allFinite(); }

  void fill_random(View Z, std::uint64_t seed) const { krylov::fill_random<T>(Z, seed); }
  void householder_qr(View Z) const { krylov::householder_qr<T>(Z); }

  HostOps<double> in_double() const { return HostOps<double>(n_threads_); }
  RowMatrix<double> to_double(const ConstView& Z) const { return Z.template cast<double>(); }
  Matrix from_double(const RowMatrix<double>& Z) const { return Z.template cast<T>(); }

 private:
  int n_threads_;
};

}  // namespace

Index krylov_workspace_columns(int n_components, Index block_columns) {
  const Index kept = krylov::kept_columns(n_components, block_columns);
  return 5 * kept + 3 * n_components + 3 * std::max<Index>(n_components, block_columns) + 8 * n_components;
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
  ThreadGuard guard(n_threads);
  return krylov::top_eigsh<T, HostOps>(HostOps<T>(n_threads), apply, n, n_components, start, tol, max_iter);
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
