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

// Rows of the lower triangle per chunk of the round-robin schedules below: rows grow longer down the
// triangle, so chunks are dealt out in turn rather than in one contiguous range per thread.
constexpr int kTriangleChunk = 64;

// Row sums of the symmetric matrix whose lower triangle K holds: row i sums K_i0..K_ii plus the column
// K_(i+1)i..K_(n-1)i. Column parts go to per-thread accumulators added in thread order; the chunks are dealt
// out in a fixed order, so the result does not depend on scheduling.
template <typename T>
Eigen::VectorXd symmetric_row_sums(const MatrixRef<T>& K) {
  const Index n = K.rows();
  Eigen::VectorXd sums = Eigen::VectorXd::Zero(n);
  std::vector<Eigen::VectorXd> partial(static_cast<size_t>(max_threads()));
#pragma omp parallel
  {
    Eigen::VectorXd& acc = partial[static_cast<size_t>(thread_index())];
    acc.setZero(n);
#pragma omp for schedule(static, kTriangleChunk)
    for (Index i = 0; i < n; ++i) {
      const auto left = K.row(i).head(i).template cast<double>();
      sums[i] = left.sum() + static_cast<double>(K(i, i));
      acc.head(i) += left.transpose();
    }
  }
  for (const Eigen::VectorXd& acc : partial) {
    if (acc.size() == n) sums += acc;
  }
  return sums;
}
}  // namespace

// Centring of a symmetric K given by its lower triangle, which is all it reads and writes.
template <typename T>
std::pair<Vector<T>, double> center_lower_triangle(MatrixRef<T> K) {
  const Index n = K.rows();
  const Eigen::VectorXd means = symmetric_row_sums<T>(K) / static_cast<double>(n);
  const double grand = means.mean();
#pragma omp parallel for schedule(static, kTriangleChunk)
  for (Index i = 0; i < n; ++i) {
    const double shift = grand - means[i];
    K.row(i).head(i + 1) =
        ((K.row(i).head(i + 1).template cast<double>() - means.head(i + 1).transpose()).array() + shift)
            .template cast<T>();
  }
  return {means.template cast<T>(), grand};
}

template <typename T>
std::pair<Vector<T>, double> center_kernel(MatrixRef<T> K, int n_threads, bool lower_only) {
  require(K.rows() == K.cols(), "K: must be square");
  const Index n = K.rows();
  if (n == 0) return {Vector<T>(), 0.0};
  ThreadGuard guard(n_threads);
  if (lower_only) return center_lower_triangle<T>(K);
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

template std::pair<Vector<float>, double> center_kernel<float>(MatrixRef<float>, int, bool);
template std::pair<Vector<double>, double> center_kernel<double>(MatrixRef<double>, int, bool);
template void center_kernel_rows<float>(MatrixRef<float>, const ConstVectorRef<float>&, double, int);
template void center_kernel_rows<double>(MatrixRef<double>, const ConstVectorRef<double>&, double, int);

}  // namespace rkm
