#include "core/constr_drkm.hpp"

#include "core/blas.hpp"
#include "core/isa.hpp"
#include "core/parallel.hpp"
#include "core/simd.hpp"
#include "core/vector_math.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

namespace rkm {

namespace {

using Eigen::Index;
using ConstBlock = ConstMatrixRef<double>;
using Block = MatrixRef<double>;

// Work is split into bands of rows of fixed size, never sized by the thread count: each band writes only its
// own rows and its partial sums are added in band order, so results repeat bit for bit for any thread count.
// Laplacian and poly levels go through a band a tile of columns at a time (rbf levels: rbf_level below); a
// tile's buffers (64 x 512 doubles, 256 KiB each) stay in the L2 cache from the kernel values through the
// products that read them.
constexpr Index kBandRows = 64;
constexpr Index kTileColumns = 512;
// Level 1 only streams K_1 through one product per band.
constexpr Index kFirstLevelBandRows = 256;

Index band_count(Index n, Index rows) { return (n + rows - 1) / rows; }

double ordered_sum(const std::vector<double>& values) {
  double sum = 0.0;
  for (double v : values) sum += v;
  return sum;
}

std::string shape(Index rows, Index cols) { return "(" + std::to_string(rows) + ", " + std::to_string(cols) + ")"; }

void check_level_kernel(const KernelSpec& k) {
  require(has_level_derivatives(k.type),
          "level_kernels: the kernels of levels 2..L must be one of " + kernel_names_where(has_level_derivatives));
  if (k.type == KernelType::linear) return;
  require(std::isfinite(k.gamma) && k.gamma > 0, "level_kernels: gamma must be a positive finite number, got " +
                                                     std::to_string(k.gamma));
  if (k.type != KernelType::polynomial) return;
  // Hidden features take both signs: a fractional power of a negative base would be undefined.
  require(std::isfinite(k.degree) && k.degree >= 0 && std::floor(k.degree) == k.degree,
          "level_kernels: the poly degree must be a non-negative integer, got " + std::to_string(k.degree));
  require(std::isfinite(k.coef0), "level_kernels: the poly coef0 must be a finite number");
}

// C K C for a symmetric K, in place: K_ij - m_i - m_j + g with m the row means and g their mean. Each row
// mean is summed along its row, so the result does not depend on the thread count.
void double_center(RowMatrix<double>& K, int threads) {
  const Index n = K.rows();
  const Vector<double> means = K.rowwise().mean();
  const double grand = means.mean();
  for_each_item(band_count(n, kFirstLevelBandRows), threads, Schedule::dynamic, [&](Index k, std::size_t) {
    const Index r0 = k * kFirstLevelBandRows, rows = std::min(kFirstLevelBandRows, n - r0);
    for (Index i = r0; i < r0 + rows; ++i) K.row(i).array() += (grand - means[i]) - means.transpose().array();
  });
}

// out = base^n elementwise for an integer n >= 0, by repeated squaring: std::pow per element took most of a
// poly level's time.
void integer_power(const ConstBlock& base, long long n, Block out) {
  out.setOnes();
  RowMatrix<double> square = base;
  for (; n > 0; n >>= 1) {
    if (n & 1) out.array() *= square.array();
    if (n > 1) square.array() *= square.array();
  }
}

// Kernel values of a tile: rows r0.. of Z against rows c0.. (values.rows() x values.cols()), Z already shifted
// for rbf. For poly also the bases gamma z^T z' + coef0.
void kernel_tile(const KernelSpec& k, const RowMatrix<double>& Z, const RowMatrix<double>& Zt,
                 const Vector<double>& norms, Index r0, Index c0, Block values, Block bases) {
  const Index rows = values.rows(), w = values.cols();
  if (k.type == KernelType::laplacian) {
    for (Index i = 0; i < rows; ++i) {
      for (Index j = 0; j < w; ++j) values(i, j) = -k.gamma * (Z.row(r0 + i) - Z.row(c0 + j)).cwiseAbs().sum();
      vector_exp(&values(i, 0), &values(i, 0), w);
    }
    return;
  }
  blas::gemm<double>(blas::Op::none, blas::Op::none, Z.middleRows(r0, rows), Zt.middleCols(c0, w), values, 1.0, 0.0);
  if (k.type == KernelType::rbf) {
    for (Index i = 0; i < rows; ++i) {
      vector_rbf(&values(i, 0), norms[r0 + i], norms.data() + c0, k.gamma, &values(i, 0), w);
    }
    return;
  }
  bases.array() = k.gamma * values.array() + k.coef0;
  integer_power(bases, static_cast<long long>(k.degree), values);
}

// weights = P o dk, the derivative factor of each pair: k itself for rbf and laplacian (their gamma and
// differences are applied per row afterwards), degree gamma base^(degree - 1) for poly.
void derivative_weights(const KernelSpec& k, const ConstBlock& values, const ConstBlock& bases, Block weights) {
  if (k.type != KernelType::polynomial) {
    weights.array() *= values.array();
  } else if (k.degree == 0.0) {  // a constant kernel; base^-1 would give 0 * inf at a zero base
    weights.setZero();
  } else {
    RowMatrix<double> power(weights.rows(), weights.cols());
    integer_power(bases, static_cast<long long>(k.degree) - 1, power);
    weights.array() *= (k.degree * k.gamma) * power.array();
  }
}

// sums(i, a) += sum_j weights_ij sign(z_ia - z_ja) over the tile's columns j = c0..: the laplacian's subgradient
// (sign 0 = 0 at ties).
void add_sign_sums(const RowMatrix<double>& Z, Index r0, Index c0, const ConstBlock& weights, Block sums) {
  for (Index i = 0; i < weights.rows(); ++i) {
    for (Index j = 0; j < weights.cols(); ++j) {
      const double w = weights(i, j);
      for (Index a = 0; a < Z.cols(); ++a) {
        const double d = Z(r0 + i, a) - Z(c0 + j, a);
        sums(i, a) += w * static_cast<double>((d > 0.0) - (d < 0.0));
      }
    }
  }
}

// Per-thread buffers of one tile and one band.
struct TileScratch {
  RowMatrix<double> values, weights, bases, sums;
  Vector<double> weight_sums;
};

// A linear level: K = Z Z^T never formed. T = Z (Z^T B); KG(Z; B B^T) = B (B^T Z). Single-threaded O(N s s').
double linear_level(double eta, const ConstBlock& Z, const ConstBlock& B, Block T, Block G_prev) {
  const RowMatrix<double> A = Z.transpose() * B;
  T.noalias() = Z * A;
  const RowMatrix<double> KG = B * A.transpose();
  G_prev -= KG / eta;
  return B.cwiseProduct(T).sum();
}

// ---- rbf levels: each symmetric tile computed once ----
//
// K and P = B B^T are symmetric, so a tile (I, J) of row bands I < J serves both: band I gets K_IJ B_J and
// M_IJ Z_J (M = P o K), band J gets K_IJ^T B_I and M_IJ^T Z_I. Band I's own sums run row by row through J = I,
// I + 1, ... in a single work item; band J's transposed parts are kept per tile and added, after all tiles,
// in the order I = 0, 1, ...: the same operations in the same order for any thread count. The products have
// inner dimensions s_l and s_{l-1} (5 to 15 in practice), too small for BLAS to run them efficiently, so each
// tile row goes through fused vector loops: inner products, kernel values, P o K, and both sides' products.
constexpr Index kRbfBandRows = 128;  // a tile's operands (15 x 128 doubles each side) stay in the L1/L2 cache

// An rbf level in transposed form, rows zero-padded to whole bands: padded columns of B are 0, so their
// kernel values (finite, at most 1) contribute exact zeros to every product.
struct RbfLevel {
  Index n = 0, padded = 0, d = 0, s = 0;  // rows; padded rows; columns of Z and of B
  double gamma = 0.0;
  RowMatrix<double> Zt, Bt;  // d x padded and s x padded
  Vector<double> norms;      // squared row norms of Z (padded: 0)
  const double* z(Index a) const { return Zt.data() + a * padded; }
  const double* b(Index c) const { return Bt.data() + c * padded; }
};

// The SIMD code below passes 32- and 64-byte vectors only between always-inlined functions, which end up inside
// rbf_band_avx2 and rbf_band_avx512 (their targets): no such vector crosses a call, so GCC's -Wpsabi note that
// passing one "changes the ABI" without AVX does not apply. The code has no comparisons, which GCC 12 would
// compile lane by lane at 64 bytes (see vector_math.cpp).
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

// A SIMD vector of VectorBytes / 8 doubles (simd.hpp).
template <int VectorBytes>
using Lanes = simd::Vector<double, VectorBytes>;

// Independent accumulators per loop: one chain of dependent vector additions would wait on each add's latency.
constexpr Index kChains = 8;
// Tile rows that go through the products together (kRbfBandRows is a multiple).
constexpr Index kRowBlock = 4;

template <int VectorBytes>
RKM_ALWAYS_INLINE Lanes<VectorBytes> load(const double* x) {
  Lanes<VectorBytes> v;
  std::memcpy(&v, x, sizeof v);
  return v;
}

template <int VectorBytes>
RKM_ALWAYS_INLINE void store(double* x, const Lanes<VectorBytes>& v) {
  std::memcpy(x, &v, sizeof v);
}

// For the kRowBlock tile rows i + r: own[r * e + c] += sum_j weights[r][j] x_c[j] for the features c < features
// (x_c[j] = rows[c * stride + c0 + j], weights[r] = weights + r * kRbfBandRows); with Cross also the transposed
// side cross[c * kRbfBandRows + j] += sum_r weights[r][j] x_c[i + r]. Rows in a block share every load of x_c
// and of cross: the loop is bound by loads and stores, not by arithmetic.
template <int VectorBytes, bool Cross>
RKM_ALWAYS_INLINE void weighted_sums(const double* weights, const double* rows, Index stride, Index features, Index i,
                                     Index c0, double* own, Index e, double* cross) {
  constexpr Index L = VectorBytes / static_cast<Index>(sizeof(double)), w = kRbfBandRows;
  for (Index c = 0; c < features; ++c) {
    const double* x = rows + c * stride + c0;
    double* cross_c = Cross ? cross + c * w : nullptr;
    double xi[kRowBlock];
    for (Index r = 0; r < kRowBlock; ++r) xi[r] = rows[c * stride + i + r];
    Lanes<VectorBytes> acc[kRowBlock][2] = {};  // two chains per row, so that each add waits on less
    for (Index j = 0; j < w; j += 2 * L) {
      for (Index h = 0; h < 2; ++h) {
        const Lanes<VectorBytes> xv = load<VectorBytes>(x + j + h * L);
        Lanes<VectorBytes> transposed{};
        if (Cross) transposed = load<VectorBytes>(cross_c + j + h * L);
        for (Index r = 0; r < kRowBlock; ++r) {
          const Lanes<VectorBytes> weight = load<VectorBytes>(weights + r * w + j + h * L);
          acc[r][h] += weight * xv;
          if (Cross) transposed += xi[r] * weight;
        }
        if (Cross) store<VectorBytes>(cross_c + j + h * L, transposed);
      }
    }
    for (Index r = 0; r < kRowBlock; ++r) {
      const Lanes<VectorBytes> both = acc[r][0] + acc[r][1];
      double sum = 0.0;
      for (Index q = 0; q < L; ++q) sum += both[q];
      own[r * e + c] += sum;
    }
  }
}

// The tile rows i .. i + kRowBlock - 1 against the columns c0.. of band J: own (rows of [T S], s + d values,
// S = M Z) accumulates sum_j k_ij b_j and sum_j m_ij z_j; with Cross, cross (s + d rows of kRbfBandRows: the
// tile's T_J^T, S_J^T) accumulates k_ij b_i and m_ij z_i. k and m are scratch blocks of kRowBlock rows.
template <int VectorBytes, bool Cross>
RKM_ALWAYS_INLINE void rbf_tile_rows(const RbfLevel& lv, Index i, Index c0, double* k, double* m, double* own,
                                     double* cross) {
  constexpr Index L = VectorBytes / static_cast<Index>(sizeof(double)), w = kRbfBandRows;
  for (Index r = 0; r < kRowBlock; ++r) {
    double* kr = k + r * w;
    double* mr = m + r * w;
    for (Index j = 0; j < w; j += kChains * L) {  // k = z_i^T z_j, then the kernel values
      Lanes<VectorBytes> acc[kChains] = {};
      for (Index a = 0; a < lv.d; ++a) {
        const double za = lv.Zt(a, i + r);
        for (Index q = 0; q < kChains; ++q) acc[q] += za * load<VectorBytes>(lv.z(a) + c0 + j + q * L);
      }
      for (Index q = 0; q < kChains; ++q) store<VectorBytes>(kr + j + q * L, acc[q]);
    }
    vector_rbf(kr, lv.norms[i + r], lv.norms.data() + c0, lv.gamma, kr, w);
    for (Index j = 0; j < w; j += kChains * L) {  // m = (b_i^T b_j) k
      Lanes<VectorBytes> acc[kChains] = {};
      for (Index c = 0; c < lv.s; ++c) {
        const double bc = lv.Bt(c, i + r);
        for (Index q = 0; q < kChains; ++q) acc[q] += bc * load<VectorBytes>(lv.b(c) + c0 + j + q * L);
      }
      for (Index q = 0; q < kChains; ++q) {
        store<VectorBytes>(mr + j + q * L, acc[q] * load<VectorBytes>(kr + j + q * L));
      }
    }
  }
  const Index e = lv.s + lv.d;
  weighted_sums<VectorBytes, Cross>(k, lv.Bt.data(), lv.padded, lv.s, i, c0, own, e, cross);
  // Without Cross there is no transposed part: offsetting the null pointer would be undefined.
  double* cross_z = Cross ? cross + lv.s * w : nullptr;
  weighted_sums<VectorBytes, Cross>(m, lv.Zt.data(), lv.padded, lv.d, i, c0, own + lv.s, e, cross_z);
}

// All tiles (I, J >= I) of band I: own holds band I's kRbfBandRows rows of [T S] (zeroed here), cross the
// transposed parts of the tiles (I, J > I), one (s + d) x kRbfBandRows block each, J = I + 1, ...
template <int VectorBytes>
RKM_ALWAYS_INLINE void rbf_band(const RbfLevel& lv, Index band, double* k, double* m, double* own, double* cross) {
  // Padded rows (beyond n) run too: their b and z are 0, so they add exact zeros to the transposed parts.
  const Index e = lv.s + lv.d, r0 = band * kRbfBandRows;
  const Index bands = lv.padded / kRbfBandRows, block = e * kRbfBandRows;
  std::fill(own, own + kRbfBandRows * e, 0.0);
  std::fill(cross, cross + (bands - band - 1) * block, 0.0);
  for (Index J = band; J < bands; ++J) {
    const Index c0 = J * kRbfBandRows;
    for (Index i = 0; i < kRbfBandRows; i += kRowBlock) {
      if (J == band) {
        rbf_tile_rows<VectorBytes, false>(lv, r0 + i, c0, k, m, own + i * e, nullptr);
      } else {
        // Only tiles right of the diagonal have a transposed part (the diagonal tile's offset would be -block).
        rbf_tile_rows<VectorBytes, true>(lv, r0 + i, c0, k, m, own + i * e, cross + (J - band - 1) * block);
      }
    }
  }
}

void rbf_band_baseline(const RbfLevel& lv, Index band, double* k, double* m, double* own, double* cross) {
  rbf_band<16>(lv, band, k, m, own, cross);
}

#ifdef RKM_HAVE_AVX2_DISPATCH
__attribute__((target("avx2,fma"))) void rbf_band_avx2(const RbfLevel& lv, Index band, double* k, double* m,
                                                        double* own, double* cross) {
  rbf_band<32>(lv, band, k, m, own, cross);
}

// Measured against AVX2 (Table 1 model, alternating): 2.4 against 3.1 ms at N = 1000, 77 against 89 ms at 5000.
__attribute__((target("avx512f,fma"))) void rbf_band_avx512(const RbfLevel& lv, Index band, double* k, double* m,
                                                          double* own, double* cross) {
  rbf_band<64>(lv, band, k, m, own, cross);
}
#endif
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

void rbf_band_dispatch(const RbfLevel& lv, Index band, double* k, double* m, double* own, double* cross) {
#ifdef RKM_HAVE_AVX2_DISPATCH
  if (use_avx512()) return rbf_band_avx512(lv, band, k, m, own, cross);
  if (use_avx2()) return rbf_band_avx2(lv, band, k, m, own, cross);
#endif
  rbf_band_baseline(lv, band, k, m, own, cross);
}

// An rbf level by symmetric tiles: T = K B, and -(1/eta) KG(Z; B B^T) added to G_prev; returns sum(B o T).
double rbf_level(double gamma, double eta, const ConstBlock& Z_raw, const ConstBlock& B, Block T, Block G_prev,
                 int threads) {
  RbfLevel lv;
  lv.n = Z_raw.rows();
  lv.d = Z_raw.cols();
  lv.s = B.cols();
  lv.gamma = gamma;
  const Index bands = band_count(lv.n, kRbfBandRows), e = lv.s + lv.d, block = e * kRbfBandRows;
  lv.padded = bands * kRbfBandRows;
  // rbf depends on differences only: rows shifted by their mean lose less to cancellation in
  // ||z||^2 + ||z'||^2 - 2 z^T z' (as KernelBlocks does), and its gradient is shift-invariant too.
  const RowMatrix<double> Z = Z_raw.rowwise() - Z_raw.colwise().mean();
  lv.Zt.setZero(lv.d, lv.padded);
  lv.Zt.leftCols(lv.n) = Z.transpose();
  lv.Bt.setZero(lv.s, lv.padded);
  lv.Bt.leftCols(lv.n) = B.transpose();
  lv.norms.setZero(lv.padded);
  lv.norms.head(lv.n) = Z.rowwise().squaredNorm();
  // Band I's transposed parts start at cross_offsets[I]; every buffer is allocated before the parallel region.
  std::vector<Index> cross_offsets(static_cast<std::size_t>(bands) + 1, 0);
  for (Index I = 0; I < bands; ++I) cross_offsets[I + 1] = cross_offsets[I] + (bands - I - 1) * block;
  std::vector<double> own(static_cast<std::size_t>(lv.padded * e)), cross(cross_offsets.back());
  constexpr Index kScratch = 2 * kRowBlock * kRbfBandRows;  // k and m of a row block
  std::vector<double> scratch(static_cast<std::size_t>(threads) * kScratch);
  for_each_item(bands, threads, Schedule::dynamic, [&](Index I, std::size_t t) {
    double* k = scratch.data() + t * kScratch;
    rbf_band_dispatch(lv, I, k, k + kRowBlock * kRbfBandRows, own.data() + I * kRbfBandRows * e, cross.data() + cross_offsets[I]);
  });
  std::vector<double> sums(static_cast<std::size_t>(bands));
  for_each_item(bands, threads, Schedule::dynamic, [&](Index J, std::size_t) {
    const Index r0 = J * kRbfBandRows, rows = std::min(kRbfBandRows, lv.n - r0);
    // [T S] rows of band J: its own tiles, then the transposed parts of the tiles (I, J), I = 0, 1, ...
    Eigen::Map<RowMatrix<double>> acc(own.data() + r0 * e, rows, e);
    for (Index I = 0; I < J; ++I) {
      const Eigen::Map<const RowMatrix<double>> part(cross.data() + cross_offsets[I] + (J - I - 1) * block, e,
                                                     kRbfBandRows);
      acc += part.leftCols(rows).transpose();
    }
    const auto Tb = acc.leftCols(lv.s);
    const auto Bb = B.middleRows(r0, rows);
    T.middleRows(r0, rows) = Tb;
    sums[static_cast<std::size_t>(J)] = Bb.cwiseProduct(Tb).sum();
    // E = -(1/eta) KG, KG = -2 gamma (diag(M 1) Z - M Z), (M 1)_i = sum_j P_ij K_ij = b_i^T (K B)_i
    const Vector<double> weight_sums = Bb.cwiseProduct(Tb).rowwise().sum();
    G_prev.middleRows(r0, rows) +=
        (2.0 * gamma / eta) * (weight_sums.asDiagonal() * Z.middleRows(r0, rows) - acc.rightCols(lv.d));
  });
  return ordered_sum(sums);
}

}  // namespace

ConstrainedDeepObjective::ConstrainedDeepObjective(const ConstMatrixRef<double>& K1,
                                                   const std::vector<KernelSpec>& level_kernels,
                                                   const std::vector<Index>& sizes, const std::vector<double>& etas,
                                                   bool center, int n_threads)
    : kernels_(level_kernels), sizes_(sizes), etas_(etas), center_(center), threads_(resolve_threads(n_threads)) {
  require(K1.rows() == K1.cols(),
          "K1: must be a square (N, N) kernel matrix, got shape " + shape(K1.rows(), K1.cols()));
  require(K1.allFinite(), "K1: contains NaN or infinity");
  const Index L = static_cast<Index>(sizes.size());
  require(L > 0, "sizes: must hold at least one level size");
  offsets_.assign(1, 0);
  for (Index s : sizes) {
    require(s > 0, "sizes: every level size must be positive, got " + std::to_string(s));
    offsets_.push_back(offsets_.back() + s);
  }
  require(offsets_.back() <= K1.rows(), "sizes: s_1 + ... + s_L = " + std::to_string(offsets_.back()) +
                                            " exceeds the number of samples N = " + std::to_string(K1.rows()));
  require(static_cast<Index>(etas.size()) == L, "etas: must hold " + std::to_string(L) +
                                                    " positive finite numbers (one per level), got " +
                                                    std::to_string(etas.size()));
  for (double eta : etas) require(std::isfinite(eta) && eta > 0, "etas: must be positive finite numbers");
  require(static_cast<Index>(level_kernels.size()) == L - 1,
          "level_kernels: must hold L - 1 = " + std::to_string(L - 1) + " kernels (levels 2..L), got " +
              std::to_string(level_kernels.size()));
  for (const KernelSpec& k : level_kernels) check_level_kernel(k);
  K1_ = K1;
  if (center_) double_center(K1_, threads_);
}

double ConstrainedDeepObjective::first_level(const ConstBlock& B1, Block T) const {
  const Index N = K1_.rows(), bands = band_count(N, kFirstLevelBandRows);
  std::vector<double> sums(static_cast<std::size_t>(bands));
  for_each_item(bands, threads_, Schedule::dynamic, [&](Index k, std::size_t) {
    const Index r0 = k * kFirstLevelBandRows, rows = std::min(kFirstLevelBandRows, N - r0);
    Block Tb = T.middleRows(r0, rows);
    blas::gemm<double>(blas::Op::none, blas::Op::none, K1_.middleRows(r0, rows), B1, Tb, 1.0, 0.0);
    sums[static_cast<std::size_t>(k)] = B1.middleRows(r0, rows).cwiseProduct(Tb).sum();
  });
  return ordered_sum(sums);
}

double ConstrainedDeepObjective::hidden_level(const KernelSpec& kernel, double eta, const ConstBlock& Z_raw,
                                              const ConstBlock& B, Block T, Block G_prev) const {
  if (kernel.type == KernelType::linear) return linear_level(eta, Z_raw, B, T, G_prev);
  if (kernel.type == KernelType::rbf) return rbf_level(kernel.gamma, eta, Z_raw, B, T, G_prev, threads_);
  const Index N = Z_raw.rows(), d = Z_raw.cols(), bands = band_count(N, kBandRows);
  const bool rbf = kernel.type == KernelType::rbf, poly = kernel.type == KernelType::polynomial;
  // rbf depends on differences only: rows shifted by their mean lose less to cancellation in
  // ||z||^2 + ||z'||^2 - 2 z^T z' (as KernelBlocks does), and its gradient is shift-invariant too.
  RowMatrix<double> Z = Z_raw;
  if (rbf) Z.rowwise() -= Z_raw.colwise().mean();
  const Vector<double> norms = Z.rowwise().squaredNorm();
  // Transposed copies make the tile products Z_rows Z_cols^T and B_rows B_cols^T plain (NN) products, which
  // OpenBLAS runs without packing its operands: with s_l columns that packing cost as much as the product.
  const RowMatrix<double> Zt = Z.transpose(), Bt = B.transpose();
  std::vector<TileScratch> scratch(static_cast<std::size_t>(threads_));
  std::vector<double> sums(static_cast<std::size_t>(bands));
  for_each_item(bands, threads_, Schedule::dynamic, [&](Index k, std::size_t t) {
    const Index r0 = k * kBandRows, rows = std::min(kBandRows, N - r0);
    TileScratch& s = scratch[t];
    s.values.resize(kBandRows, kTileColumns);
    s.weights.resize(kBandRows, kTileColumns);
    s.bases.resize(poly ? kBandRows : 0, poly ? kTileColumns : 0);
    s.sums.setZero(rows, d);
    Block Tb = T.middleRows(r0, rows);
    Tb.setZero();
    for (Index c0 = 0; c0 < N; c0 += kTileColumns) {
      const Index w = std::min(kTileColumns, N - c0);
      Block values = s.values.topLeftCorner(rows, w), weights = s.weights.topLeftCorner(rows, w);
      Block bases = poly ? Block(s.bases.topLeftCorner(rows, w)) : Block(s.bases);
      kernel_tile(kernel, Z, Zt, norms, r0, c0, values, bases);
      blas::gemm<double>(blas::Op::none, blas::Op::none, values, B.middleRows(c0, w), Tb, 1.0, 1.0);
      // weights = P tile = B_rows B_cols^T, then times the derivative factor
      blas::gemm<double>(blas::Op::none, blas::Op::none, B.middleRows(r0, rows), Bt.middleCols(c0, w), weights, 1.0,
                         0.0);
      derivative_weights(kernel, values, bases, weights);
      if (kernel.type == KernelType::laplacian) {
        add_sign_sums(Z, r0, c0, weights, s.sums);
      } else {
        blas::gemm<double>(blas::Op::none, blas::Op::none, weights, Z.middleRows(c0, w), s.sums, 1.0, 1.0);
      }
    }
    sums[static_cast<std::size_t>(k)] = B.middleRows(r0, rows).cwiseProduct(Tb).sum();
    // E = -(1/eta) KG with KG = -2 gamma (diag(M 1) Z - M Z) (rbf), -gamma sign sums (laplacian), M Z (poly).
    Block G_rows = G_prev.middleRows(r0, rows);
    if (rbf) {
      // (M 1)_i = sum_j P_ij K_ij = b_i^T (K B)_i
      s.weight_sums = B.middleRows(r0, rows).cwiseProduct(Tb).rowwise().sum();
      G_rows += (2.0 * kernel.gamma / eta) * (s.weight_sums.asDiagonal() * Z.middleRows(r0, rows) - s.sums);
    } else if (poly) {
      G_rows -= s.sums / eta;
    } else {
      G_rows += (kernel.gamma / eta) * s.sums;
    }
  });
  return ordered_sum(sums);
}

double ConstrainedDeepObjective::evaluate(const ConstMatrixRef<double>& H, RowMatrix<double>& G) {
  Vector<double> terms;
  const double f = evaluate(H, G, terms);
  const std::lock_guard<std::mutex> lock(terms_mutex_);
  terms_ = std::move(terms);
  return f;
}

Vector<double> ConstrainedDeepObjective::level_terms() const {
  const std::lock_guard<std::mutex> lock(terms_mutex_);
  return terms_;
}

double ConstrainedDeepObjective::evaluate(const ConstMatrixRef<double>& H, RowMatrix<double>& G,
                                          Vector<double>& terms) const {
  const Index N = n_samples(), p = offsets_.back(), L = static_cast<Index>(sizes_.size());
  require(H.rows() == N && H.cols() == p, "H: must have shape (N, s_1 + ... + s_L) = " + shape(N, p) + ", got " +
                                              shape(H.rows(), H.cols()));
  require(H.allFinite(), "H: contains NaN or infinity");
  // B = [B_1 ... B_L] and the products T = [K_1 B_1 ... K_L B_L]: this evaluation's own (N x p each, small
  // beside K_1), so that threads sharing the object never write each other's buffers.
  RowMatrix<double> B = H;
  if (center_) B.rowwise() -= H.colwise().mean();
  RowMatrix<double> T_all(N, p);
  G.resize(N, p);
  terms.resize(L);
  for (Index l = 0; l < L; ++l) {
    const Index o = offsets_[l], s = sizes_[l];
    const double eta = etas_[l];
    Block T = T_all.middleCols(o, s);
    const double sum = l == 0 ? first_level(B.middleCols(o, s), T)
                              : hidden_level(kernels_[l - 1], eta, H.middleCols(offsets_[l - 1], sizes_[l - 1]),
                                             B.middleCols(o, s), T, G.middleCols(offsets_[l - 1], sizes_[l - 1]));
    terms[l] = -sum / (2.0 * eta);
    // Level l's own gradient block -(1/eta) C^[center] T; level l + 1 adds its E_l to it next.
    if (center_) {
      G.middleCols(o, s) = (T.rowwise() - T.colwise().mean()) / -eta;
    } else {
      G.middleCols(o, s) = T / -eta;
    }
  }
  double f = 0.0;
  for (Index l = 0; l < L; ++l) f += terms[l];
  return f;
}

}  // namespace rkm
