#include "core/features.hpp"

#include "core/blas.hpp"
#include "core/parallel.hpp"
#include "core/vector_math.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace rkm {

template <typename T>
void fourier_features(const ConstMatrixRef<T>& X, const ConstMatrixRef<T>& W, const ConstVectorRef<T>& offset,
                      MatrixRef<T> Y, int n_threads) {
  using Eigen::Index;
  const Index n = X.rows(), D = W.cols();
  require(W.rows() == X.cols(), "W: must have one row per feature of X");
  require(offset.size() == D, "offset: must have one entry per column of W");
  require(Y.rows() == n && Y.cols() == D, "out: has the wrong shape");
  require(X.allFinite(), "X: contains NaN or infinity");
  require(W.allFinite(), "W: contains NaN or infinity");
  require(offset.allFinite(), "offset: contains NaN or infinity");
  if (n == 0 || D == 0) return;
  ThreadGuard guard(n_threads);
  const double scale = std::sqrt(2.0 / static_cast<double>(D));
  // Bands of rows small enough that their block of Y stays in cache between the product and the cosines.
  const Index band_rows = std::clamp<Index>((Index(1) << 18) / std::max<Index>(D, 1), 8, 1024);
  const Index n_bands = (n + band_rows - 1) / band_rows;
  // Phases that overflow T give NaN cosines; each thread flags its own (nothing may throw in the region).
  std::vector<char> overflowed(static_cast<size_t>(guard.threads()), 0);
  for_each_item(n_bands, guard.threads(), Schedule::dynamic, [&](Index k, size_t tid) {
    const Index r0 = k * band_rows, rows = std::min(band_rows, n - r0);
    MatrixRef<T> band = Y.middleRows(r0, rows);
    blas::gemm<T>(blas::Op::none, blas::Op::none, X.middleRows(r0, rows), W, band, T(1), T(0));
    band.rowwise() += offset.transpose();
    if (!band.allFinite()) overflowed[tid] = 1;
    Eigen::VectorXd phases(D);
    for (Index i = 0; i < rows; ++i) {
      phases = band.row(i).transpose().template cast<double>();
      vector_cos(phases.data(), phases.data(), D);
      band.row(i) = (scale * phases).transpose().template cast<T>();
    }
  });
  if (std::find(overflowed.begin(), overflowed.end(), 1) != overflowed.end())
    throw std::invalid_argument(std::string("X: the Fourier feature phase X @ W + offset overflows ") +
                                (sizeof(T) == sizeof(float) ? "float32" : "float64") +
                                " (some entries are infinite or NaN); scale the inputs down" +
                                (sizeof(T) == sizeof(float) ? " or use float64" : ""));
}

template void fourier_features<float>(const ConstMatrixRef<float>&, const ConstMatrixRef<float>&,
                                      const ConstVectorRef<float>&, MatrixRef<float>, int);
template void fourier_features<double>(const ConstMatrixRef<double>&, const ConstMatrixRef<double>&,
                                       const ConstVectorRef<double>&, MatrixRef<double>, int);

}  // namespace rkm
