#include "core/center.hpp"

#include <vector>

namespace rkm {

namespace {
using Eigen::Index;

// Row sums and column sums of K in one sweep, accumulated in double. Each thread sums its own row range
// into a private column accumulator; the accumulators are added in thread order, so the result does not
// depend on scheduling.
template <typename T>
void row_and_column_sums(const MatrixRef<T>& K, Eigen::VectorXd& row_sums, Eigen::VectorXd& col_sums) {
  const Index n = K.rows(), m = K.cols();
  row_sums.setZero(n);
  col_sums.setZero(m);
  std::vector<Eigen::VectorXd> partial(static_cast<size_t>(max_threads()));
#pragma omp parallel
  {
    Eigen::VectorXd& acc = partial[static_cast<size_t>(thread_index())];
    acc.setZero(m);
#pragma omp for schedule(static)
    for (Index i = 0; i < n; ++i) {
      const auto row = K.row(i).template cast<double>();
      row_sums[i] = row.sum();
      acc += row.transpose();
    }
  }
  for (const Eigen::VectorXd& acc : partial) {
    if (acc.size() == m) col_sums += acc;
  }
}
}  // namespace

template <typename T>
std::pair<Vector<T>, double> center_kernel(MatrixRef<T> K, int n_threads) {
  require(K.rows() == K.cols(), "K: must be square");
  const Index n = K.rows();
  if (n == 0) return {Vector<T>(), 0.0};
  ThreadGuard guard(n_threads);
  Eigen::VectorXd row_means, col_means;
  row_and_column_sums<T>(K, row_means, col_means);
  row_means /= static_cast<double>(n);
  col_means /= static_cast<double>(n);
  const double grand = col_means.mean();
#pragma omp parallel for schedule(static)
  for (Index i = 0; i < n; ++i) {
    const double shift = grand - row_means[i];
    K.row(i) = ((K.row(i).template cast<double>() - col_means.transpose()).array() + shift).template cast<T>();
  }
  return {col_means.template cast<T>(), grand};
}

template <typename T>
void center_kernel_rows(MatrixRef<T> K_rows, const ConstVectorRef<T>& column_means, double grand_mean,
                        int n_threads) {
  require(K_rows.cols() == column_means.size(), "column_means: must have one entry per column of K_rows");
  const Index n = K_rows.rows(), m = K_rows.cols();
  if (n == 0 || m == 0) return;
  ThreadGuard guard(n_threads);
  const Eigen::RowVectorXd means = column_means.template cast<double>().transpose();
#pragma omp parallel for schedule(static)
  for (Index i = 0; i < n; ++i) {
    const Eigen::RowVectorXd row = K_rows.row(i).template cast<double>();
    const double shift = grand_mean - row.mean();
    K_rows.row(i) = ((row - means).array() + shift).template cast<T>();
  }
}

template std::pair<Vector<float>, double> center_kernel<float>(MatrixRef<float>, int);
template std::pair<Vector<double>, double> center_kernel<double>(MatrixRef<double>, int);
template void center_kernel_rows<float>(MatrixRef<float>, const ConstVectorRef<float>&, double, int);
template void center_kernel_rows<double>(MatrixRef<double>, const ConstVectorRef<double>&, double, int);

}  // namespace rkm
