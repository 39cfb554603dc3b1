#include "core/kernel_operator.hpp"

#include "core/blas.hpp"
#include "core/parallel.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

namespace rkm {

namespace {

using Eigen::Index;
using DoubleMatrix = RowMatrix<double>;

// Rows and columns of a kernel tile. 256 x 256 doubles (512 KiB) stay in a core's L2 cache from the kernel
// evaluation to the two products that use them.
constexpr Index kTile = 256;

// The tile pairs a product visits: all (I, J) for K(X, Z), the lower triangle J <= I for K(X, X), numbered
// row tile by row tile so that consecutive pairs share the rows of their accumulator.
class TilePairs {
 public:
  TilePairs(Index n_rows, Index n_columns, bool symmetric)
      : row_tiles_((n_rows + kTile - 1) / kTile), column_tiles_((n_columns + kTile - 1) / kTile),
        symmetric_(symmetric) {}

  Index size() const { return symmetric_ ? row_tiles_ * (row_tiles_ + 1) / 2 : row_tiles_ * column_tiles_; }

  // (I, J) of pair k.
  std::pair<Index, Index> operator[](Index k) const {
    if (!symmetric_) return {k / column_tiles_, k % column_tiles_};
    Index i = static_cast<Index>((std::sqrt(8.0 * static_cast<double>(k) + 1.0) - 1.0) / 2.0);
    while (i * (i + 1) / 2 > k) --i;  // guard the floating-point root at both ends
    while ((i + 1) * (i + 2) / 2 <= k) ++i;
    return {i, k - i * (i + 1) / 2};
  }

 private:
  Index row_tiles_, column_tiles_;
  bool symmetric_;
};

// KB = K B for the kernel `values` describes and B in double (one row per column of K).
template <typename T>
DoubleMatrix multiply(const KernelBlocks<T>& values, const DoubleMatrix& B, int threads) {
  const Index n = values.rows(), m = values.cols(), b = B.cols();
  const TilePairs pairs(n, m, values.symmetric());
  std::vector<DoubleMatrix> sums(static_cast<size_t>(threads));
  std::vector<DoubleMatrix> tiles(sums.size());
  std::vector<ValueFlags> flags(sums.size());
  for_each_item(pairs.size(), threads, Schedule::cyclic, [&](Index k, size_t tid) {
    DoubleMatrix& sum = sums[tid];
    if (sum.size() == 0) sum.setZero(n, b);  // first touch by the thread that uses it
    const auto [I, J] = pairs[k];
    const Index r0 = I * kTile, c0 = J * kTile;
    const Index rows = std::min(kTile, n - r0), cols = std::min(kTile, m - c0);
    tiles[tid].resize(kTile, kTile);
    MatrixRef<double> tile = tiles[tid].topLeftCorner(rows, cols);
    values.block(r0, c0, tile, flags[tid]);
    blas::gemm<double>(blas::Op::none, blas::Op::none, tile, B.middleRows(c0, cols), sum.middleRows(r0, rows), 1.0,
                       1.0);
    if (values.symmetric() && I != J)
      blas::gemm<double>(blas::Op::transpose, blas::Op::none, tile, B.middleRows(r0, rows), sum.middleRows(c0, cols),
                         1.0, 1.0);
  });
  report_value_flags<T>(values.spec(), flags);
  DoubleMatrix KB = DoubleMatrix::Zero(n, b);
  for (const DoubleMatrix& sum : sums) {
    if (sum.size() != 0) KB += sum;
  }
  return KB;
}

}  // namespace

template <typename T>
void kernel_product(const ConstMatrixRef<T>& X, const ConstMatrixRef<T>* Z, const KernelSpec& spec,
                    const ConstMatrixRef<T>& B, MatrixRef<T> Y, int n_threads) {
  const Index n = X.rows(), m = Z ? Z->rows() : n;
  require(!Z || Z->cols() == X.cols(), "Y: must have as many features as X");
  require(B.rows() == m, "B: must have one row per sample of Y (of X when Y is None)");
  require(Y.rows() == n && Y.cols() == B.cols(), "out: has the wrong shape");
  require(X.allFinite(), "X: contains NaN or infinity");
  require(!Z || Z->allFinite(), "Y: contains NaN or infinity");
  require(B.allFinite(), "B: contains NaN or infinity");
  if (n == 0 || B.cols() == 0) return;
  if (m == 0) {
    Y.setZero();
    return;
  }
  ThreadGuard guard(n_threads);
  const KernelBlocks<T> values(X, Z, spec);
  Y = multiply<T>(values, B.template cast<double>(), guard.threads()).template cast<T>();
}

template <typename T>
KernelEigenResult<T> centred_top_eigsh(const KernelTimes& times, Index n, bool center, int n_components,
                                       const ConstMatrixRef<T>& start, double tol, int max_iter, int n_threads,
                                       const std::function<void(int)>& on_product) {
  require(start.rows() == n, "start: must have one row per sample of X");
  KernelEigenResult<T> result;
  Eigen::VectorXd column_means = Eigen::VectorXd::Zero(n);
  bool have_means = !center;
  int products = 0;
  const BlockProduct<T> apply = [&](const ConstMatrixRef<T>& Q, MatrixRef<T> Y) {
    const Index b = Q.cols();
    DoubleMatrix B(n, have_means ? b : b + 1);
    B.leftCols(b) = Q.template cast<double>();
    if (!have_means) B.col(b).setConstant(1.0 / static_cast<double>(n));
    DoubleMatrix KB;
    times(B, KB);
    if (!have_means) {
      column_means = KB.col(b);
      result.grand_mean = column_means.mean();
      have_means = true;
    }
    if (center) {  // K_c Q = K Q - 1 (c^T Q) - c (1^T Q) + g 1 (1^T Q)
      const Eigen::RowVectorXd c_q = column_means.transpose() * B.leftCols(b);
      const Eigen::RowVectorXd sums = B.leftCols(b).colwise().sum();
      KB.leftCols(b).rowwise() -= c_q - result.grand_mean * sums;
      KB.leftCols(b) -= column_means * sums;
    }
    Y = KB.leftCols(b).template cast<T>();
    if (on_product) on_product(++products);
  };
  result.eigen = top_eigsh<T>(apply, n, n_components, start, tol, max_iter, n_threads);
  result.column_means = column_means.template cast<T>();
  return result;
}

template <typename T>
KernelEigenResult<T> kernel_top_eigsh(const ConstMatrixRef<T>& X, const KernelSpec& spec, bool center,
                                      int n_components, const ConstMatrixRef<T>& start, double tol, int max_iter,
                                      int n_threads, const std::function<void(int)>& on_product) {
  require(X.allFinite(), "X: contains NaN or infinity");
  require(start.rows() == X.rows(), "start: must have one row per sample of X");
  ThreadGuard guard(n_threads);
  const KernelBlocks<T> values(X, nullptr, spec);
  const KernelTimes times = [&](const DoubleMatrix& B, DoubleMatrix& KB) {
    KB = multiply<T>(values, B, guard.threads());
  };
  return centred_top_eigsh<T>(times, X.rows(), center, n_components, start, tol, max_iter, guard.threads(),
                              on_product);
}

Index kernel_product_workspace_bytes(Index n_rows, Index n_columns, Index n_features, Index b, int n_threads,
                                     bool symmetric) {
  const Index samples = symmetric ? n_rows : n_rows + n_columns;
  const Index threads = resolve_threads(n_threads);  // the team kernel_product runs: clamped to the cores
  const Index doubles = samples * (n_features + 1) + n_columns * b  // X, Z with their norms, and B in double
                        + (threads + 1) * n_rows * b                // accumulators and their sum
                        + threads * kTile * kTile;                  // tiles
  return 8 * doubles;
}

template void kernel_product<float>(const ConstMatrixRef<float>&, const ConstMatrixRef<float>*, const KernelSpec&,
                                    const ConstMatrixRef<float>&, MatrixRef<float>, int);
template void kernel_product<double>(const ConstMatrixRef<double>&, const ConstMatrixRef<double>*,
                                     const KernelSpec&, const ConstMatrixRef<double>&, MatrixRef<double>, int);
template KernelEigenResult<float> centred_top_eigsh<float>(const KernelTimes&, Index, bool, int,
                                                           const ConstMatrixRef<float>&, double, int, int,
                                                           const std::function<void(int)>&);
template KernelEigenResult<double> centred_top_eigsh<double>(const KernelTimes&, Index, bool, int,
                                                             const ConstMatrixRef<double>&, double, int, int,
                                                             const std::function<void(int)>&);
template KernelEigenResult<float> kernel_top_eigsh<float>(const ConstMatrixRef<float>&, const KernelSpec&, bool, int,
                                                          const ConstMatrixRef<float>&, double, int, int,
                                                          const std::function<void(int)>&);
template KernelEigenResult<double> kernel_top_eigsh<double>(const ConstMatrixRef<double>&, const KernelSpec&, bool,
                                                            int, const ConstMatrixRef<double>&, double, int, int,
                                                            const std::function<void(int)>&);

}  // namespace rkm
