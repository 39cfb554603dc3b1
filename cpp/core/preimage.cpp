#include "core/preimage.hpp"

#include "core/blas.hpp"
#include "core/parallel.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

namespace rkm {

namespace {

using Eigen::Index;

// A similarity and its training point.
struct Scored {
  double value;
  Index index;
};

// Rank order of the neighbours: larger similarity first, the lower index first among equal ones.
bool ranks_before(const Scored& a, const Scored& b) {
  return a.value > b.value || (a.value == b.value && a.index < b.index);
}

// Up to this many neighbours (k + 1) are kept sorted by insertion while the row streams past; beyond it the row
// goes through std::nth_element.
constexpr Index kInsertionLimit = 64;

// Below this latent dimension the float64 similarities come straight from one float64 GEMM: the float32 screen
// saves little of so short a product and adds its passes over the row.
constexpr Index kScreenMinDimension = 16;

// The m best of the n entries entry(0), ..., entry(n - 1) in rank order into best[0..m), for 1 <= m <= n. The
// entries' indices must ascend with t: a later entry then displaces an earlier one only when strictly larger,
// which keeps the lower index among ties. pool holds n entries (used when m is large). Allocates nothing, so
// it may run inside OpenMP regions.
template <typename Entry>
void select_best(Index n, Index m, const Entry& entry, Scored* best, Scored* pool) {
  if (m <= kInsertionLimit) {
    Index filled = 0;
    for (Index t = 0; t < n; ++t) {
      const Scored e = entry(t);
      if (filled == m && !(e.value > best[m - 1].value)) continue;
      Index p = filled < m ? filled++ : m - 1;
      for (; p > 0 && e.value > best[p - 1].value; --p) best[p] = best[p - 1];
      best[p] = e;
    }
    return;
  }
  for (Index t = 0; t < n; ++t) pool[t] = entry(t);
  std::nth_element(pool, pool + (m - 1), pool + n, ranks_before);
  std::sort(pool, pool + m, ranks_before);
  std::copy(pool, pool + m, best);
}

// out_row = the weighted mean of the neighbours best[0..k) (in rank order) above `floor`; acc: d doubles.
// Returns false, writing nothing, when the spread of the similarities overflows double.
template <typename T>
bool smooth_row(const Scored* best, Index k, double floor, const ConstMatrixRef<T>& X_train, double* acc_ptr,
                T* out_ptr) {
  const Index d = X_train.cols();
  const double spread = best[0].value - floor;
  if (!std::isfinite(spread)) return false;
  // Equal similarities (spread 0) fall back to the plain mean of the neighbours.
  double total = 0.0;
  for (Index j = 0; j < k; ++j) total += spread > 0.0 ? (best[j].value - floor) / spread : 1.0;
  Eigen::Map<Eigen::VectorXd> acc(acc_ptr, d);
  acc.setZero();
  for (Index j = 0; j < k; ++j) {
    const double w = (spread > 0.0 ? (best[j].value - floor) / spread : 1.0) / total;
    if (w != 0.0) acc += w * X_train.row(best[j].index).transpose().template cast<double>();
  }
  Eigen::Map<Vector<T>>(out_ptr, d) = acc.template cast<T>();
  return true;
}

// The float32 screen of the float64 similarities: both factors are scaled by powers of two (exactly) so that
// their largest entry lies in [1/2, 1), then rounded to float32; no product or sum can overflow float32 then.
// For any summation order (BLAS with or without FMA), the float32 product g~ of latent x and projection row y
// differs from x . y by at most gamma ||x|| ||y|| with gamma = (s + 2) u / (1 - (s + 2) u), u = 2^-24 (rounding of
// both factors and of the s products and sums, Higham's bound with Cauchy-Schwarz), plus what underflow to
// subnormals or zero can lose (below 2^-120 per term in the scaled units). The bound used is twice that.
struct Screen {
  bool usable = false;
  int latent_exponent = 0, projection_exponent = 0;
  double unscale = 1.0;      // 2^(latent_exponent + projection_exponent): scaled product -> product
  double relative = 0.0;        // bound per unit of ||x|| ||y|| (unscaled: times unscale for the scaled norms)
  RowMatrix<float> projection;  // scaled, float32
  Vector<double> norms;         // of the scaled rows of projection (at most sqrt(s): no overflow, no NaN)
  Vector<double> slack;         // the rest of the bound of similarity j: underflow losses and rounding of + offsets_j
};

int scale_exponent(double largest) {
  int exponent = 0;
  if (largest > 0.0) std::frexp(largest, &exponent);  // largest = m 2^exponent, m in [1/2, 1)
  return exponent;
}

Screen make_screen(const ConstMatrixRef<double>& latents, const ConstMatrixRef<double>& projection,
                   const ConstVectorRef<double>& offsets, Index k) {
  Screen screen;
  const Index N = projection.rows(), s = projection.cols();
  constexpr double u = 1.0 / 16777216.0;  // 2^-24
  const double terms = static_cast<double>(s + 2) * u;
  if (k >= N || s < kScreenMinDimension || terms > 0.01 || latents.rows() == 0) return screen;
  screen.latent_exponent = scale_exponent(latents.cwiseAbs().maxCoeff());
  screen.projection_exponent = scale_exponent(projection.cwiseAbs().maxCoeff());
  const int exponent = screen.latent_exponent + screen.projection_exponent;
  if (exponent < -900 || exponent > 900) return screen;  // the scaled products would not map back in double
  screen.unscale = std::ldexp(1.0, exponent);
  // Adding the offset in double rounds by at most eps/2 (|product| + |offset|), with |product| <= 2 ||x|| ||y||.
  constexpr double eps = std::numeric_limits<double>::epsilon();
  screen.relative = 2.0 * terms / (1.0 - terms) + 2.0 * eps;
  const double absolute = 2.0 * static_cast<double>(s + 1) * std::ldexp(screen.unscale, -120);
  screen.projection = (projection * std::ldexp(1.0, -screen.projection_exponent)).cast<float>();
  const double projection_scale = std::ldexp(1.0, -screen.projection_exponent);
  screen.norms.resize(N);
  for (Index j = 0; j < N; ++j) screen.norms[j] = (projection.row(j) * projection_scale).norm();
  screen.slack = (absolute + eps * offsets.array().abs()).matrix();
  screen.usable = true;
  return screen;
}

// One thread's buffers; allocated before the parallel region, so nothing allocates inside it.
template <typename T>
struct Workspace {
  RowMatrix<T> products;         // exact path: a band of latents @ projection^T (weights when k = N)
  RowMatrix<float> screened;     // screened path: the float32 band
  RowMatrix<float> band_latents;  // screened path: the band's scaled float32 latents
  std::vector<double> values, upper;  // a row's similarities (or their float32 lower / upper bounds)
  std::vector<Scored> pool, best;
  std::vector<double> acc;
};

template <typename T>
std::string overflow_message() {
  const bool single = sizeof(T) == sizeof(float);
  return std::string("latents: the similarities latents @ projection.T + offsets overflow ") +
         (single ? "float32" : "float64") + " (some are infinite or NaN); scale the inputs down" +
         (single ? " or use float64" : "");
}

}  // namespace

Index smoother_band_rows(Index n_train, std::size_t value_bytes) {
  return std::max<Index>(1, kBandBytes / (static_cast<Index>(value_bytes) * std::max<Index>(n_train, 1)));
}

template <typename T>
void smoother_preimage(const ConstMatrixRef<T>& latents, const ConstMatrixRef<T>& projection,
                       const ConstVectorRef<T>& offsets, const ConstMatrixRef<T>& X_train, Index n_neighbors,
                       MatrixRef<T> out, int n_threads) {
  const Index n = latents.rows(), s = latents.cols(), N = projection.rows(), d = X_train.cols();
  require(projection.cols() == s, "projection: has " + std::to_string(projection.cols()) +
                                      " columns but latents has " + std::to_string(s));
  require(N >= 1, "projection: needs at least one row (one per training point)");
  require(offsets.size() == N, "offsets: has " + std::to_string(offsets.size()) + " entries but projection has " +
                                   std::to_string(N) + " rows");
  require(X_train.rows() == N,
          "X_train: has " + std::to_string(X_train.rows()) + " rows but projection has " + std::to_string(N));
  require(d >= 1, "X_train: needs at least one column (feature)");
  require(n_neighbors >= 1, "n_neighbors: must be at least 1, got " + std::to_string(n_neighbors));
  require(latents.allFinite(), "latents: contains NaN or infinity");
  require(projection.allFinite(), "projection: contains NaN or infinity");
  require(offsets.allFinite(), "offsets: contains NaN or infinity");
  require(X_train.allFinite(), "X_train: contains NaN or infinity");
  require(out.rows() == n && out.cols() == d, "out: has the wrong shape");
  if (n == 0) return;
  const Index k = std::min(n_neighbors, N);
  const bool all = k == N;  // every training point is a neighbour; the floor is the smallest similarity

  Screen screen;
  if constexpr (std::is_same_v<T, double>) screen = make_screen(latents, projection, offsets, k);
  // At least 8 bands where they can have 32 rows or more, so that a few threads share them evenly; the bands
  // depend on n, N and the path only, never on the thread count.
  const Index band_rows = std::min({n, smoother_band_rows(N, screen.usable ? sizeof(float) : sizeof(T)),
                                    std::max<Index>(32, (n + 7) / 8)});
  const Index n_bands = (n + band_rows - 1) / band_rows;

  ThreadGuard guard(n_threads);
  std::vector<Workspace<T>> spaces(static_cast<std::size_t>(std::min<Index>(guard.threads(), n_bands)));
  for (Workspace<T>& w : spaces) {
    if (screen.usable) {
      w.screened.resize(band_rows, N);
      w.band_latents.resize(band_rows, s);
      w.upper.resize(static_cast<std::size_t>(N));
    } else {
      w.products.resize(band_rows, N);
    }
    w.values.resize(static_cast<std::size_t>(N));
    w.pool.resize(static_cast<std::size_t>(N));
    w.best.resize(static_cast<std::size_t>(std::min(k + 1, N)));
    w.acc.resize(static_cast<std::size_t>(d));
  }
  // Each thread flags its own rows whose similarities overflow (nothing may throw inside the region).
  std::vector<char> overflowed(spaces.size(), 0);
  const Vector<double> offsets_d = offsets.template cast<double>();
  constexpr double kLargest = static_cast<double>(std::numeric_limits<T>::max());

  // Bands of rows go to the threads as they free up; each band is one single-threaded GEMM (the Python layer
  // runs BLAS on one thread here, as for kernel matrices) into the thread's buffer, consumed row by row while
  // it is still in cache.
  for_each_item(n_bands, static_cast<int>(spaces.size()), Schedule::dynamic, [&](Index b, std::size_t tid) {
    Workspace<T>& w = spaces[tid];
    const Index r0 = b * band_rows, rows = std::min(band_rows, n - r0);
    double* values = w.values.data();
    Scored* best = w.best.data();
    Scored* pool = w.pool.data();
    if (screen.usable) {
      if constexpr (std::is_same_v<T, double>) {
        auto band = w.band_latents.topRows(rows);
        band = (latents.middleRows(r0, rows) * std::ldexp(1.0, -screen.latent_exponent)).template cast<float>();
        MatrixRef<float> g = w.screened.topRows(rows);
        blas::gemm<float>(blas::Op::none, blas::Op::transpose, band, screen.projection, g, 1.0f, 0.0f);
        double* upper = w.upper.data();
        for (Index i = 0; i < rows; ++i) {
          const auto x = latents.row(r0 + i);
          const double reach = screen.relative * (x * std::ldexp(1.0, -screen.latent_exponent)).norm() * screen.unscale;
          const float* gi = &g(i, 0);
          const double *norms = screen.norms.data(), *slack = screen.slack.data(), *o = offsets_d.data();
          double largest = 0.0;  // of |approximate similarity|: the products are finite, so NaN cannot arise
          for (Index j = 0; j < N; ++j) {
            const double approx = static_cast<double>(gi[j]) * screen.unscale + o[j];
            const double bound = reach * norms[j] + slack[j];
            largest = std::max(largest, std::abs(approx));
            values[j] = approx - bound;
            upper[j] = approx + bound;
          }
          if (!(largest <= kLargest)) {
            overflowed[tid] = 1;
            continue;
          }
          // Every one of the k + 1 largest similarities is at least the (k+1)-th largest lower bound.
          select_best(N, k + 1, [&](Index j) { return Scored{values[j], j}; }, best, pool);
          const double threshold = best[k].value;
          Index candidates = 0;
          for (Index j = 0; j < N; ++j) {
            if (upper[j] >= threshold)
              pool[candidates++] = Scored{x.dot(projection.row(j)) + offsets_d[j], j};
          }
          select_best(candidates, k + 1, [&](Index t) { return pool[t]; }, best, pool);
          if (!(std::abs(best[0].value) <= kLargest && std::abs(best[k].value) <= kLargest) ||
              !smooth_row<T>(best, k, best[k].value, X_train, w.acc.data(), &out(r0 + i, 0)))
            overflowed[tid] = 1;
        }
      }
      return;
    }
    MatrixRef<T> products = w.products.topRows(rows);
    blas::gemm<T>(blas::Op::none, blas::Op::transpose, latents.middleRows(r0, rows), projection, products, T(1),
                  T(0));
    for (Index i = 0; i < rows; ++i) {
      T* p = &products(i, 0);
      bool finite = true;
      for (Index j = 0; j < N; ++j) {
        values[j] = static_cast<double>(p[j]) + offsets_d[j];
        finite &= std::abs(values[j]) <= kLargest;
      }
      if (!finite) {
        overflowed[tid] = 1;
        continue;
      }
      if (!all) {
        select_best(N, k + 1, [&](Index j) { return Scored{values[j], j}; }, best, pool);
        if (!smooth_row<T>(best, k, best[k].value, X_train, w.acc.data(), &out(r0 + i, 0))) overflowed[tid] = 1;
        continue;
      }
      // Every training point: the row's weights replace its products, and one GEMM per band averages.
      const Eigen::Map<const Eigen::ArrayXd> v(values, N);
      const double floor = v.minCoeff(), spread = v.maxCoeff() - floor;
      if (!std::isfinite(spread)) {
        overflowed[tid] = 1;
        continue;
      }
      Eigen::Map<Vector<T>> weights(p, N);
      if (spread > 0.0) {
        weights = ((v - floor) / (v - floor).sum()).template cast<T>();
      } else {
        weights.setConstant(static_cast<T>(1.0 / static_cast<double>(N)));
      }
    }
    if (all && !overflowed[tid])
      blas::gemm<T>(blas::Op::none, blas::Op::none, products, X_train, out.middleRows(r0, rows), T(1), T(0));
  });
  if (std::find(overflowed.begin(), overflowed.end(), 1) != overflowed.end())
    throw std::invalid_argument(overflow_message<T>());
}

template void smoother_preimage<float>(const ConstMatrixRef<float>&, const ConstMatrixRef<float>&,
                                       const ConstVectorRef<float>&, const ConstMatrixRef<float>&, Index,
                                       MatrixRef<float>, int);
template void smoother_preimage<double>(const ConstMatrixRef<double>&, const ConstMatrixRef<double>&,
                                        const ConstVectorRef<double>&, const ConstMatrixRef<double>&, Index,
                                        MatrixRef<double>, int);

}  // namespace rkm
