#include "core/kernels.hpp"

#include "core/blas.hpp"
#include "core/parallel.hpp"
#include "core/vector_math.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace rkm {

const char* kernel_name(KernelType type) {
  switch (type) {
#define RKM_KERNEL_NAME_CASE(type, name) \
  case KernelType::type:                 \
    return name;
    RKM_KERNELS(RKM_KERNEL_NAME_CASE)
#undef RKM_KERNEL_NAME_CASE
  }
  throw std::logic_error("kernel_name: not a KernelType");
}

std::vector<std::string> kernel_names() {
  std::vector<std::string> names;
  for (KernelType type : kKernelTypes) names.emplace_back(kernel_name(type));
  return names;
}

KernelType parse_kernel(const std::string& name, const std::string& subject) {
  for (KernelType type : kKernelTypes) {
    if (name == kernel_name(type)) return type;
  }
  for (const KernelAlias& a : kKernelAliases) {
    if (name == a.alias) return a.type;
  }
  std::string aliases;
  for (const KernelAlias& a : kKernelAliases) {
    aliases += std::string(aliases.empty() ? "" : ", ") + a.alias + " = " + kernel_name(a.type);
  }
  throw std::invalid_argument(subject + ": unknown kernel '" + name + "'; choose one of " +
                              kernel_names_where([](KernelType) { return true; }) + " (aliases: " + aliases + ")");
}

bool has_level_derivatives(KernelType type) {
  switch (type) {
    case KernelType::linear:
    case KernelType::polynomial:
    case KernelType::rbf:
    case KernelType::laplacian:
      return true;
    case KernelType::cosine:
    case KernelType::tanimoto:
      return false;
  }
  throw std::logic_error("has_level_derivatives: not a KernelType");
}

bool has_layer_derivatives(KernelType type) {
  switch (type) {
    case KernelType::linear:
    case KernelType::polynomial:
    case KernelType::rbf:
      return true;
    case KernelType::laplacian:
    case KernelType::cosine:
    case KernelType::tanimoto:
      return false;
  }
  throw std::logic_error("has_layer_derivatives: not a KernelType");
}

std::string kernel_names_where(bool (*property)(KernelType)) {
  std::string names;
  for (KernelType type : kKernelTypes) {
    if (property(type)) names += std::string(names.empty() ? "" : ", ") + kernel_name(type);
  }
  return names;
}

namespace {

using Eigen::Index;
using DoubleMatrix = RowMatrix<double>;
using Array = Eigen::ArrayXd;

// Each thread's buffer of inner products (a column chunk of a kernel band, or a gradient band) holds kBandBytes
// (common.hpp).
constexpr Index kTileColumns = 256;

template <typename T>
DoubleMatrix to_double(const ConstMatrixRef<T>& A, const Eigen::RowVectorXd& shift, bool shifted) {
  DoubleMatrix out = A.template cast<double>();
  if (shifted) out.rowwise() -= shift;
  return out;
}

// Kernel values of one row segment from its inner products g (or L1 distances for laplacian) and the
// squared norms of the row (nx) and of the columns (ny).
void transform_segment(const KernelSpec& s, const double* g_ptr, double nx, const double* ny_ptr, double* v_ptr,
                       Index n) {
  Eigen::Map<const Array> g(g_ptr, n), ny(ny_ptr, n);
  Eigen::Map<Array> v(v_ptr, n);
  switch (s.type) {
    case KernelType::linear:
      v = g;
      break;
    case KernelType::polynomial:
      v = (s.gamma * g + s.coef0).pow(s.degree);
      break;
    case KernelType::rbf:
      vector_rbf(g_ptr, nx, ny_ptr, s.gamma, v_ptr, n);
      break;
    case KernelType::laplacian:
      v = -s.gamma * g;
      vector_exp(v_ptr, v_ptr, n);
      break;
    case KernelType::cosine: {
      const Array denom = std::sqrt(nx) * ny.sqrt();  // not sqrt(nx ny), which overflows first
      v = (denom > 0.0).select(g / denom, 0.0);
      break;
    }
    case KernelType::tanimoto: {
      // Two all-zero fingerprints share no bit: similarity 0, as RDKit's TanimotoSimilarity.
      const Array denom = nx + ny - g;
      v = (denom > 0.0).select(g / denom, 0.0);
      break;
    }
  }
}

// Kernels whose k(x, x) is known exactly; the symmetric diagonal is then set rather than rounded through a GEMM.
bool has_exact_self_value(KernelType type) {
  switch (type) {
    case KernelType::linear:
    case KernelType::polynomial:
      return false;
    case KernelType::rbf:
    case KernelType::laplacian:
    case KernelType::cosine:
    case KernelType::tanimoto:
      return true;
  }
  throw std::logic_error("has_exact_self_value: not a KernelType");
}

// k(x, x) for the kernels of has_exact_self_value, from ||x||^2.
double exact_self_value(KernelType type, double squared_norm) {
  switch (type) {
    case KernelType::rbf:
    case KernelType::laplacian:
      return 1.0;
    case KernelType::cosine:
    case KernelType::tanimoto:  // 0 for the zero vector, as transform_segment gives
      return squared_norm == 0.0 ? 0.0 : 1.0;
    case KernelType::linear:
    case KernelType::polynomial:
      break;
  }
  throw std::logic_error("exact_self_value: the kernel has no exact k(x, x)");
}

void l1_chunk(const DoubleMatrix& X, const DoubleMatrix& Y, Index r0, Index c_begin, MatrixRef<double> chunk) {
  for (Index i = 0; i < chunk.rows(); ++i) {
    for (Index c = 0; c < chunk.cols(); ++c) chunk(i, c) = (X.row(r0 + i) - Y.row(c_begin + c)).cwiseAbs().sum();
  }
}

// True when every value is finite and within T's range (NaN compares false).
template <typename T>
bool representable(const double* values, Index n) {
  constexpr double kLargest = static_cast<double>(std::numeric_limits<T>::max());
  bool ok = true;
  for (Index i = 0; i < n; ++i) ok &= std::abs(values[i]) <= kLargest;
  return ok;
}

bool is_integer(double value) { return std::floor(value) == value; }

// Transforms a chunk of inner products (rows r0.., columns c_begin..) into kernel values, writing the
// lower part of the chunk and, for a symmetric matrix, its mirror in the upper triangle: element (i, j)
// belongs to the band holding row max(i, j), so concurrent bands never write the same element. Works
// through column tiles so that the mirrored writes come from a tile still in cache. Without `mirror` a
// symmetric matrix gets its lower triangle only.
template <typename T>
void write_chunk(const KernelSpec& spec, const MatrixRef<double>& chunk, Index r0, Index c_begin,
                 const Vector<double>& nx, const Vector<double>& ny, bool symmetric, bool mirror,
                 std::vector<double>& tile, ValueFlags& flags, MatrixRef<T> out) {
  const Index rows = chunk.rows(), c_stop = c_begin + chunk.cols();
  tile.resize(static_cast<size_t>(rows * kTileColumns));
  for (Index c0 = c_begin; c0 < c_stop; c0 += kTileColumns) {
    const Index c1 = std::min(c0 + kTileColumns, c_stop), w = c1 - c0;
    for (Index i = 0; i < rows; ++i) {
      const Index r = r0 + i;
      double* t = tile.data() + i * w;
      transform_segment(spec, &chunk(i, c0 - c_begin), nx[r], ny.data() + c0, t, w);
      if (!representable<T>(t, w)) flags.record(spec, &chunk(i, c0 - c_begin), w);
      if (symmetric && r >= c0 && r < c1 && has_exact_self_value(spec.type))
        t[r - c0] = exact_self_value(spec.type, nx[r]);
      const Index c_end = symmetric ? std::min(c1, r + 1) : c1;
      for (Index c = c0; c < c_end; ++c) out(r, c) = static_cast<T>(t[c - c0]);
    }
    if (!symmetric || !mirror) continue;
    for (Index c = c0; c < c1; ++c) {
      for (Index i = std::max<Index>(0, c - r0 + 1); i < rows; ++i)
        out(c, r0 + i) = static_cast<T>(tile[i * w + c - c0]);
    }
  }
}

// One row of the gradient coefficients: overwrites g with a_j = W_ij A_ij, the weights of the y_j, and
// returns sum_j W_ij B_ij, the weight of x_i (see kernel_gradient_into). Runs inside OpenMP regions, so it
// must not throw; laplacian has no such form and never comes here (kernel_gradient_into sums it directly), so
// the throw at the end is never reached.
double gradient_segment(const KernelSpec& s, double* g_ptr, double nx, const double* ny_ptr, const double* w_ptr,
                        Index n) {
  Eigen::Map<Array> g(g_ptr, n);
  Eigen::Map<const Array> ny(ny_ptr, n), w(w_ptr, n);
  switch (s.type) {
    case KernelType::linear:
      g = w;
      return 0.0;
    case KernelType::polynomial:
      if (s.degree == 0.0) {  // a constant kernel: (x^T y + coef0)^-1 would give 0 * inf at a zero base
        g.setZero();
        return 0.0;
      }
      g = w * s.degree * s.gamma * (s.gamma * g + s.coef0).pow(s.degree - 1.0);
      return 0.0;
    case KernelType::rbf:  // A = 2 gamma k, B = -A
      g = -s.gamma * (nx + ny - 2.0 * g).max(0.0);
      vector_exp(g_ptr, g_ptr, n);
      g *= 2.0 * s.gamma * w;
      return -g.sum();
    case KernelType::cosine: {  // A = 1 / (|x| |y|), B = -x^T y A / |x|^2; zero vectors contribute nothing
      const Array inverse = (nx * ny > 0.0).select((std::sqrt(nx) * ny.sqrt()).inverse(), 0.0);
      const double x_weight = nx > 0.0 ? -(w * g * inverse).sum() / nx : 0.0;
      g = w * inverse;
      return x_weight;
    }
    case KernelType::tanimoto: {  // with D = |x|^2 + |y|^2 - x^T y: A = (|x|^2 + |y|^2) / D^2, B = -2 x^T y / D^2
      const Array denom = nx + ny - g;
      const Array inverse_square = (denom > 0.0).select(denom.square().inverse(), 0.0);
      const double x_weight = -2.0 * (w * g * inverse_square).sum();
      g = w * (nx + ny) * inverse_square;
      return x_weight;
    }
    case KernelType::laplacian:  // no such form: kernel_gradient_into sums it in laplacian_gradient
      break;
  }
  throw std::logic_error("gradient_segment: the laplacian kernel has no gradient coefficients");
}

void laplacian_gradient(const DoubleMatrix& X, const DoubleMatrix& Y, const DoubleMatrix& W, double gamma,
                        DoubleMatrix& G) {
#pragma omp parallel for schedule(static)
  for (Index i = 0; i < X.rows(); ++i) {
    Eigen::RowVectorXd sum = Eigen::RowVectorXd::Zero(X.cols());
    for (Index j = 0; j < Y.rows(); ++j) {
      const Eigen::RowVectorXd diff = X.row(i) - Y.row(j);
      const double k = std::exp(-gamma * diff.cwiseAbs().sum());
      sum -= (gamma * W(i, j) * k) * diff.cwiseSign();
    }
    G.row(i) = sum;
  }
}

std::string shortest(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

template <typename T>
std::string dtype_name() {
  return sizeof(T) == sizeof(float) ? "float32" : "float64";
}

template <typename T>
std::string overflow_message(const KernelSpec& spec, const std::string& what) {
  std::string message = std::string("X: the ") + kernel_name(spec.type) + " " + what + " overflows " + dtype_name<T>() +
                        " (some entries are infinite or NaN); scale the inputs down";
  if (sizeof(T) == sizeof(float)) message += " or use float64";
  return message;
}

// G <- Gd in T, refusing gradients that overflowed (or do not fit T).
template <typename T>
void store_gradient(const KernelSpec& spec, const DoubleMatrix& Gd, MatrixRef<T> G) {
  G = Gd.template cast<T>();
  if (!G.allFinite()) throw std::invalid_argument(overflow_message<T>(spec, "kernel gradient"));
}

}  // namespace

void ValueFlags::record(const KernelSpec& spec, const double* inner_products, Index n) {
  non_finite = true;
  check_bases(spec, inner_products, n);
}

void ValueFlags::check_bases(const KernelSpec& spec, const double* inner_products, Index n) {
  if (spec.type != KernelType::polynomial || is_integer(spec.degree)) return;
  for (Index i = 0; i < n; ++i) negative_base |= spec.gamma * inner_products[i] + spec.coef0 < 0.0;
}

// A kernel matrix with NaN or infinite entries is an error, not a result: it names the cause.
template <typename T>
void report_value_flags(const KernelSpec& spec, const std::vector<ValueFlags>& flags) {
  const auto any = [&flags](bool ValueFlags::*flag) {
    return std::any_of(flags.begin(), flags.end(), [flag](const ValueFlags& f) { return f.*flag; });
  };
  if (any(&ValueFlags::negative_base))
    throw std::invalid_argument("degree: a non-integer degree (" + shortest(spec.degree) +
                                ") needs gamma x^T y + coef0 >= 0, but some pairs of samples give a negative "
                                "base; use an integer degree or a larger coef0");
  if (any(&ValueFlags::non_finite)) throw std::invalid_argument(overflow_message<T>(spec, "kernel"));
}

template <typename T>
KernelBlocks<T>::KernelBlocks(const ConstMatrixRef<T>& X, const ConstMatrixRef<T>* Y, const KernelSpec& spec,
                              bool float_products)
    : spec_(spec),
      symmetric_(Y == nullptr),
      float_products_(float_products && std::is_same_v<T, float> && spec.type == KernelType::rbf) {
  const bool shifted = spec.type == KernelType::rbf;
  const Eigen::RowVectorXd shift = shifted ? X.template cast<double>().colwise().mean() : Eigen::RowVectorXd();
  prepare_set(X, shift, shifted, x_, x_float_, nx_);
  if (symmetric_) return;
  prepare_set(*Y, shift, shifted, y_, y_float_, ny_);
}

template <typename T>
void KernelBlocks<T>::prepare_set(const ConstMatrixRef<T>& set, const Eigen::RowVectorXd& shift, bool shifted,
                                  RowMatrix<double>& exact, RowMatrix<float>& rounded, Vector<double>& norms) {
  if (!float_products_) {
    exact = to_double<T>(set, shift, shifted);
    norms = exact.rowwise().squaredNorm();
    return;
  }
  rounded = (set.template cast<double>().rowwise() - shift).template cast<float>();
  norms = rounded.template cast<double>().rowwise().squaredNorm();
}

template <typename T>
void KernelBlocks<T>::inner_products(Index r0, Index c0, MatrixRef<double> out, std::vector<float>& scratch) const {
  const Index rows = out.rows(), cols = out.cols();
  if (spec_.type == KernelType::laplacian) {
    l1_chunk(x_, y(), r0, c0, out);
  } else if (float_products_) {
    // grown, never shrunk: edge blocks alternate with full ones, and a reallocation faults in fresh pages
    if (scratch.size() < static_cast<size_t>(rows * cols)) scratch.resize(static_cast<size_t>(rows * cols));
    Eigen::Map<RowMatrix<float>> products(scratch.data(), rows, cols);
    const RowMatrix<float>& y_float = symmetric_ ? x_float_ : y_float_;
    blas::gemm<float>(blas::Op::none, blas::Op::transpose, x_float_.middleRows(r0, rows),
                      y_float.middleRows(c0, cols), products, 1.0f, 0.0f);
    out = products.template cast<double>();
  } else {
    blas::gemm<double>(blas::Op::none, blas::Op::transpose, x_.middleRows(r0, rows), y().middleRows(c0, cols), out,
                       1.0, 0.0);
  }
}

template <typename T>
void KernelBlocks<T>::block(Index r0, Index c0, MatrixRef<double> out, ValueFlags& flags) const {
  if (float_products_) throw std::logic_error("KernelBlocks::block: built with float products");
  const Index rows = out.rows(), cols = out.cols();
  std::vector<float> unused;  // float products only
  inner_products(r0, c0, out, unused);
  const Vector<double>& ny = y_norms();
  for (Index i = 0; i < rows; ++i) {
    double* row = &out(i, 0);
    flags.check_bases(spec_, row, cols);  // before the transform overwrites the inner products
    transform_segment(spec_, row, nx_[r0 + i], ny.data() + c0, row, cols);
    if (!representable<T>(row, cols)) flags.non_finite = true;
    const Index diagonal = r0 + i - c0;
    if (symmetric_ && diagonal >= 0 && diagonal < cols && has_exact_self_value(spec_.type))
      row[diagonal] = exact_self_value(spec_.type, nx_[r0 + i]);
  }
}

template <typename T>
void kernel_matrix_into(const ConstMatrixRef<T>& X, const ConstMatrixRef<T>* Y, const KernelSpec& spec,
                        MatrixRef<T> out, int n_threads, bool lower_only) {
  const bool symmetric = Y == nullptr;
  const Index n_x = X.rows(), n_y = symmetric ? n_x : Y->rows();
  require(symmetric || Y->cols() == X.cols(), "Y: must have as many features as X");
  require(out.rows() == n_x && out.cols() == n_y, "out: has the wrong shape");
  require(X.allFinite(), "X: contains NaN or infinity");
  require(symmetric || Y->allFinite(), "Y: contains NaN or infinity");
  if (n_x == 0 || n_y == 0) return;
  ThreadGuard guard(n_threads);

  const KernelBlocks<T> values(X, Y, spec, /*float_products=*/true);
  const Vector<double> &nx = values.x_norms(), &ny = values.y_norms();

  // Each thread builds whole bands of rows with its own cache-sized buffer and single-threaded GEMMs, so
  // no BLAS thread pool competes with the OpenMP threads (for_each_item holds BLAS at one thread).
  // A band goes a chunk of columns at a time, the chunk (kBandBytes) staying in cache from the GEMM to the
  // transform. Each GEMM packs its chunk of Y once for all the band's rows: with bands of 32 rows that
  // packing took as long as the multiplication itself (d = 64), so bands take up to 256 rows, fewer when
  // that would leave fewer than 8 bands per thread, and at least d/2 so that many features amortise it too.
  const Index band_rows = std::clamp<Index>(
      std::max<Index>(std::min<Index>(256, n_x / (8 * guard.threads())), X.cols() / 2), 16, 512);
  const Index chunk_columns = std::max<Index>(kTileColumns, kBandBytes / (8 * band_rows) / kTileColumns * kTileColumns);
  const Index n_bands = (n_x + band_rows - 1) / band_rows;
  // Per-thread buffers live across waves: fresh pages are expensive to fault in.
  std::vector<DoubleMatrix> scratches(static_cast<size_t>(guard.threads()),
                                      DoubleMatrix(std::min(band_rows, n_x), std::min(chunk_columns, n_y)));
  std::vector<std::vector<float>> float_scratches(scratches.size());
  std::vector<std::vector<double>> tiles(scratches.size());
  std::vector<ValueFlags> flags(scratches.size());
  for_each_item(n_bands, guard.threads(), Schedule::dynamic, [&](Index k, size_t tid) {
    const Index r0 = k * band_rows, rows = std::min(band_rows, n_x - r0);
    const Index cols = symmetric ? r0 + rows : n_y;
    for (Index c0 = 0; c0 < cols; c0 += chunk_columns) {
      const Index w = std::min(chunk_columns, cols - c0);
      MatrixRef<double> chunk = scratches[tid].topLeftCorner(rows, w);
      values.inner_products(r0, c0, chunk, float_scratches[tid]);
      write_chunk<T>(spec, chunk, r0, c0, nx, ny, symmetric, !lower_only, tiles[tid], flags[tid], out);
    }
  });
  report_value_flags<T>(spec, flags);
}

template <typename T>
void kernel_gradient_into(const ConstMatrixRef<T>& X, const ConstMatrixRef<T>& Y, const ConstMatrixRef<T>& W,
                          const KernelSpec& spec, MatrixRef<T> G, int n_threads) {
  const Index n = X.rows(), m = Y.rows(), d = X.cols();
  require(Y.cols() == d, "Y: must have as many features as X");
  require(W.rows() == n && W.cols() == m, "W: must have shape (n_samples_X, n_samples_Y)");
  require(G.rows() == n && G.cols() == d, "G: has the wrong shape");
  require(X.allFinite(), "X: contains NaN or infinity");
  require(Y.allFinite(), "Y: contains NaN or infinity");
  require(W.allFinite(), "W: contains NaN or infinity");
  if (m == 0) {  // an empty sum over Y
    G.setZero();
    return;
  }
  if (n == 0 || d == 0) return;
  ThreadGuard guard(n_threads);
  // rbf depends on x - y only, so both sets shift by the mean of X (as in kernel_matrix_into).
  const KernelBlocks<T> values(X, &Y, spec);
  const DoubleMatrix &Xd = values.x(), &Yd = values.y();
  const DoubleMatrix Wd = W.template cast<double>();
  DoubleMatrix Gd(n, d);
  if (spec.type == KernelType::laplacian) {
    laplacian_gradient(Xd, Yd, Wd, spec.gamma, Gd);
    store_gradient<T>(spec, Gd, G);
    return;
  }
  const Vector<double> &nx = values.x_norms(), &ny = values.y_norms();
  const Index band_rows = std::clamp<Index>(kBandBytes / (8 * std::max<Index>(m, 1)), 16, 512);
  const Index n_bands = (n + band_rows - 1) / band_rows;
  // Single-threaded GEMMs on each of the core's threads, as for kernel matrices.
  std::vector<DoubleMatrix> coefficients(static_cast<size_t>(guard.threads()), DoubleMatrix(std::min(band_rows, n), m));
  std::vector<ValueFlags> flags(coefficients.size());
  for_each_item(n_bands, guard.threads(), Schedule::dynamic, [&](Index k, size_t tid) {
    const Index r0 = k * band_rows, rows = std::min(band_rows, n - r0);
    MatrixRef<double> band = coefficients[tid].topRows(rows);
    blas::gemm<double>(blas::Op::none, blas::Op::transpose, Xd.middleRows(r0, rows), Yd, band, 1.0, 0.0);
    Eigen::VectorXd x_weights(rows);
    for (Index i = 0; i < rows; ++i) {
      flags[tid].check_bases(spec, &band(i, 0), m);
      x_weights[i] = gradient_segment(spec, &band(i, 0), nx[r0 + i], ny.data(), &Wd(r0 + i, 0), m);
    }
    MatrixRef<double> out = Gd.middleRows(r0, rows);
    blas::gemm<double>(blas::Op::none, blas::Op::none, band, Yd, out, 1.0, 0.0);
    out += x_weights.asDiagonal() * Xd.middleRows(r0, rows);
  });
  report_value_flags<T>(spec, flags);
  store_gradient<T>(spec, Gd, G);
}

template void kernel_gradient_into<float>(const ConstMatrixRef<float>&, const ConstMatrixRef<float>&,
                                          const ConstMatrixRef<float>&, const KernelSpec&, MatrixRef<float>, int);
template void kernel_gradient_into<double>(const ConstMatrixRef<double>&, const ConstMatrixRef<double>&,
                                           const ConstMatrixRef<double>&, const KernelSpec&, MatrixRef<double>, int);
template void kernel_matrix_into<float>(const ConstMatrixRef<float>&, const ConstMatrixRef<float>*,
                                        const KernelSpec&, MatrixRef<float>, int, bool);
template class KernelBlocks<float>;
template class KernelBlocks<double>;
template void report_value_flags<float>(const KernelSpec&, const std::vector<ValueFlags>&);
template void report_value_flags<double>(const KernelSpec&, const std::vector<ValueFlags>&);
template void kernel_matrix_into<double>(const ConstMatrixRef<double>&, const ConstMatrixRef<double>*,
                                         const KernelSpec&, MatrixRef<double>, int, bool);

}  // namespace rkm
