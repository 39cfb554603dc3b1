#include "core/kae.hpp"

#include "core/blas.hpp"
#include "core/parallel.hpp"
#include "core/vector_math.hpp"

#include <Eigen/Eigenvalues>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <exception>
#include <limits>
#include <memory>
#include <new>
#include <sstream>
#include <string>

#ifdef __linux__
#include <sys/mman.h>
#endif

namespace rkm {

namespace {

using Eigen::Index;
using ConstBlock = ConstMatrixRef<double>;
using Block = MatrixRef<double>;
using Matrix = RowMatrix<double>;
using blas::Op;

// Products and kernel passes run in bands of rows of a fixed size, never sized by the thread count, so that results
// repeat bit for bit for any n_threads. 32 rows keep a band of K and a thread's band buffers (32 x n doubles each)
// in the L2 cache, and give several bands per thread at n = 300 (64 rows ran as fast, 128 and more slower).
constexpr Index kBandRows = 32;

// Thrown, outside OpenMP regions, when a hidden quantity overflowed: the loss cannot be evaluated there.
struct Overflow {};

std::string text(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

std::string shape_text(Index rows, Index cols) {
  return "(" + std::to_string(rows) + ", " + std::to_string(cols) + ")";
}

// ---- argument checks ----

void check_data(const ConstBlock& X, bool precomputed) {
  require(X.rows() >= 2, "X: needs at least 2 samples, got shape " + shape_text(X.rows(), X.cols()));
  require(X.cols() >= 1, "X: needs at least one column, got shape " + shape_text(X.rows(), X.cols()));
  require(X.allFinite(), "X: contains NaN or infinity");
  if (!precomputed) return;
  require(X.rows() == X.cols(),
          "X: the Gram matrix K_in must be square, got shape " + shape_text(X.rows(), X.cols()));
  const double scale = std::max(X.cwiseAbs().maxCoeff(), 1.0);
  require((X - X.transpose()).cwiseAbs().maxCoeff() <= 1e-10 * scale, "X: the Gram matrix K_in must be symmetric");
}

// K_out, the inner products of the outputs a precomputed first layer's ridge layer regresses onto.
void check_output_gram(const ConstBlock* output_gram, const ConstBlock& X, bool precomputed) {
  if (output_gram == nullptr) return;
  require(precomputed, "output_gram: only a precomputed first layer takes one, got an array");
  const ConstBlock& K = *output_gram;
  require(K.rows() == X.rows() && K.cols() == X.rows(),
          "output_gram: must be " + std::to_string(X.rows()) + " x " + std::to_string(X.rows()) +
              " (one row per sample), got shape " + shape_text(K.rows(), K.cols()));
  require(K.allFinite(), "output_gram: contains NaN or infinity");
  const double scale = std::max(K.cwiseAbs().maxCoeff(), 1.0);
  require((K - K.transpose()).cwiseAbs().maxCoeff() <= 1e-10 * scale, "output_gram: a Gram matrix must be symmetric");
}

// F, the outputs themselves (K_out = F F^T): the factored ridge layer.
void check_output_features(const ConstBlock* features, const ConstBlock* output_gram, const ConstBlock& X,
                           bool precomputed) {
  if (features == nullptr) return;
  require(precomputed, "output_features: only a precomputed first layer takes them, got an array");
  require(output_gram == nullptr, "output_features: give output_gram or output_features, not both");
  const ConstBlock& F = *features;
  require(F.rows() == X.rows() && F.cols() >= 1,
          "output_features: must have one row per sample (" + std::to_string(X.rows()) +
              ") and a column or more, got shape " + shape_text(F.rows(), F.cols()));
  require(F.allFinite(), "output_features: contains NaN or infinity");
}

void check_coefficients(const std::vector<ConstBlock>& phis, const ConstBlock& X, bool precomputed) {
  const std::size_t least = precomputed ? 1 : 2;
  require(phis.size() >= least, "phis: must hold at least " + std::to_string(least) +
                                    " coefficient matrices (one per layer" +
                                    (precomputed ? " but the last" : "") + "), got " + std::to_string(phis.size()));
  for (std::size_t l = 0; l < phis.size(); ++l) {
    const std::string entry = "phis: entry " + std::to_string(l);
    require(phis[l].rows() == X.rows() && phis[l].cols() >= 1,
            entry + " must have one row per sample (" + std::to_string(X.rows()) +
                ") and a column or more, got shape " + shape_text(phis[l].rows(), phis[l].cols()));
    require(phis[l].allFinite(), entry + " contains NaN or infinity");
  }
  require(precomputed || phis.back().cols() == X.cols(),
          "phis: the last layer must have the input's " + std::to_string(X.cols()) + " columns, got " +
              std::to_string(phis.back().cols()));
}

void check_kernels(const std::vector<KernelSpec>& kernels, std::size_t count) {
  require(kernels.size() == count, "kernels: must hold " + std::to_string(count) +
                                       " kernels (one per coefficient matrix), got " + std::to_string(kernels.size()));
  for (std::size_t l = 0; l < count; ++l) {
    const KernelSpec& k = kernels[l];
    const std::string entry = "kernels: entry " + std::to_string(l);
    require(has_layer_derivatives(k.type),
            entry + " must be one of the kernels " + kernel_names_where(has_layer_derivatives));
    if (k.type == KernelType::linear) continue;
    require(std::isfinite(k.gamma) && k.gamma > 0,
            entry + ": gamma must be a positive finite number, got " + text(k.gamma));
    if (k.type != KernelType::polynomial) continue;
    // Hidden features take both signs: a fractional power of a negative base would be undefined.
    require(std::isfinite(k.degree) && k.degree >= 0 && std::floor(k.degree) == k.degree,
            entry + ": the poly degree must be a non-negative integer, got " + text(k.degree));
    require(std::isfinite(k.coef0), entry + ": the poly coef0 must be a finite number, got " + text(k.coef0));
  }
}

void check_operators(const std::vector<Matrix>& operators, const std::vector<ConstBlock>& phis) {
  require(operators.size() == phis.size(), "operators: must hold " + std::to_string(phis.size()) +
                                               " entries (an operator or None per coefficient matrix), got " +
                                               std::to_string(operators.size()));
  for (std::size_t l = 0; l < operators.size(); ++l) {
    const Matrix& A = operators[l];
    if (A.size() == 0) continue;  // the identity
    const Index d = phis[l].cols();
    const std::string entry = "operators: entry " + std::to_string(l);
    require(A.rows() == d && A.cols() == d,
            entry + " must have shape " + shape_text(d, d) + ", got " + shape_text(A.rows(), A.cols()));
    require(A.allFinite(), entry + " contains NaN or infinity");
    const double scale = std::max(A.cwiseAbs().maxCoeff(), 1.0);
    require((A - A.transpose()).cwiseAbs().maxCoeff() <= 1e-12 * scale, entry + " must be symmetric");
    const Eigen::SelfAdjointEigenSolver<Matrix> solver(A, Eigen::EigenvaluesOnly);
    require(solver.eigenvalues()[0] >= -1e-12 * scale, entry + " must be positive semidefinite");
  }
}

void check_penalties(const std::vector<double>& penalties, std::size_t layers) {
  require(penalties.size() == layers, "penalties: must hold L = " + std::to_string(layers) +
                                          " numbers (one per layer), got " + std::to_string(penalties.size()));
  for (double p : penalties) {
    require(std::isfinite(p) && p >= 0, "penalties: must be non-negative finite numbers, got " + text(p));
  }
}

// ---- the evaluation ----

// The arguments of one evaluation. Entry l of phis (0-based) is layer l + 1; its kernel acts on X^(l), except
// K²AE's first, whose kernel matrix is the given K_in.
struct Problem {
  const ConstBlock& X;
  const ConstBlock& K_out;  // precomputed: what the ridge layer regresses onto (output_gram, or X)
  const ConstBlock* features;  // precomputed: the outputs F with K_out = F F^T (then K_out is unused), or null
  const std::vector<ConstBlock>& phis;
  const std::vector<KernelSpec>& kernels;
  const std::vector<Matrix>& operators;
  const std::vector<double>& penalties;
  bool precomputed;
  int threads;

  Index n() const { return X.rows(); }
  Index count() const { return static_cast<Index>(phis.size()); }
  Index width(Index l) const { return phis[l].cols(); }
  bool given_gram(Index l) const { return precomputed && l == 0; }
  const KernelSpec& kernel(Index l) const { return kernels[l - (precomputed ? 1 : 0)]; }
  bool identity(Index l) const { return operators[l].size() == 0; }
};

// base^exponent for an integer exponent >= 0 (the poly degrees), by repeated squaring.
double integer_power(double base, long long exponent) {
  double out = 1.0;
  for (; exponent > 0; exponent >>= 1) {
    if (exponent & 1) out *= base;
    base *= base;
  }
  return out;
}

// One thread's buffers for the backward passes over row bands of a kernel matrix (kBandRows x n each; bases only
// when a layer has a poly kernel).
struct BandScratch {
  Matrix weights, bases;
  Vector<double> sums;  // rbf: the row sums of weights
};

std::vector<BandScratch> band_scratch(const Problem& p) {
  const Index rows = std::min(kBandRows, p.n());
  const bool poly = std::any_of(p.kernels.begin(), p.kernels.end(),
                                [](const KernelSpec& k) { return k.type == KernelType::polynomial; });
  std::vector<BandScratch> scratch(static_cast<std::size_t>(p.threads));
  for (BandScratch& s : scratch) {
    s.weights.resize(rows, p.n());
    s.sums.resize(rows);
    s.bases.resize(poly ? rows : 0, poly ? p.n() : 0);
  }
  return scratch;
}

// Where back-propagation through K = k(Z, Z) goes on: with M = dloss/dK and M + M^T = left right^T, G receives
// KG(Z; M + M^T) = dloss/dZ.
struct Upstream {
  const Matrix& left;
  const Matrix& right_t;  // right^T: the band products are then plain (NN) products, which OpenBLAS runs unpacked
  Matrix& G;
};

// One layer's kernel matrix K = k(Z, Z) and the passes over its row bands, in fixed bands whatever the thread
// count. K is filled once into the caller's buffer, each band computing its columns from the diagonal on and
// mirroring them (half the kernel evaluations); the passes then read its rows, and the backward pass fuses the
// products and elementwise steps of each band while the band is in the cache, so that no other n x n matrix is
// formed.
class KernelBands {
 public:
  // K goes to `storage` (n x n, row-major). on_data: Z is the caller's X, whose overflowing kernel values are the
  // caller's error (else an Overflow).
  KernelBands(const ConstBlock& Z, const KernelSpec& spec, bool on_data, double* storage, int threads)
      : spec_(spec), on_data_(on_data), threads_(threads), K_(storage, Z.rows(), Z.rows()) {
    // rbf depends on differences only: rows shifted by their mean lose less to cancellation in
    // ||z||^2 + ||z'||^2 - 2 z^T z' (as KernelBlocks does), and its gradient is shift-invariant too.
    Z_ = Z;
    if (spec.type == KernelType::rbf) Z_.rowwise() -= Z.colwise().mean();
    Zt_ = Z_.transpose();
    norms_ = Z_.rowwise().squaredNorm();
    fill();
  }

  // out = K B.
  void multiply(const ConstBlock& B, Block out) const {
    for_each_band([&](Index r0, Index rows, std::size_t) {
      blas::gemm<double>(Op::none, Op::none, K_.middleRows(r0, rows), B, out.middleRows(r0, rows), 1.0, 0.0);
    });
  }

  // G = KG(Z; left right^T) alone (the factored ridge layer's, which has no coefficients of its own).
  void pull_all(std::vector<BandScratch>& scratch, const Upstream& up) const {
    for_each_band([&](Index r0, Index rows, std::size_t t) { pull(r0, rows, scratch[t], up); });
  }

  // dPhi = K TA and, with an upstream, its G = KG(Z; left right^T).
  void backward(const ConstBlock& TA, Block dPhi, std::vector<BandScratch>& scratch, const Upstream* up) const {
    for_each_band([&](Index r0, Index rows, std::size_t t) {
      blas::gemm<double>(Op::none, Op::none, K_.middleRows(r0, rows), TA, dPhi.middleRows(r0, rows), 1.0, 0.0);
      if (up != nullptr) pull(r0, rows, scratch[t], *up);
    });
  }

 private:
  template <typename Body>
  void for_each_band(const Body& body) const {
    const Index n = K_.rows();
    for_each_item((n + kBandRows - 1) / kBandRows, threads_, Schedule::dynamic, [&](Index k, std::size_t t) {
      const Index r0 = k * kBandRows;
      body(r0, std::min(kBandRows, n - r0), t);
    });
  }

  void fill() {
    const Index n = K_.rows();
    std::vector<char> overflowed(static_cast<std::size_t>(threads_), 0);
    for_each_band([&](Index r0, Index rows, std::size_t t) {
      if (!values(r0, K_.block(r0, r0, rows, n - r0))) overflowed[t] = 1;
      // Rows below the band take its values mirrored: they lie left of those rows' own diagonal, which no other
      // band writes.
      for (Index j = r0 + 1; j < n; ++j) {
        for (Index i = 0; i < std::min(rows, j - r0); ++i) K_(j, r0 + i) = K_(r0 + i, j);
      }
    });
    if (std::find(overflowed.begin(), overflowed.end(), 1) == overflowed.end()) return;
    if (!on_data_) throw Overflow{};
    std::vector<ValueFlags> flags(1);
    flags[0].non_finite = true;
    report_value_flags<double>(spec_, flags);  // names X and the kernel
  }

  // K = k(Z, Z) on the rows r0.. and the columns from r0 on; false when a value is beyond float64's range (only
  // poly and linear can be: rbf values lie in [0, 1]).
  bool values(Index r0, Block K) const {
    const Index c0 = r0;
    blas::gemm<double>(Op::none, Op::none, Z_.middleRows(r0, K.rows()), Zt_.middleCols(c0, K.cols()), K, 1.0, 0.0);
    if (spec_.type == KernelType::rbf) {
      for (Index i = 0; i < K.rows(); ++i) {
        vector_rbf(&K(i, 0), norms_[r0 + i], norms_.data() + c0, spec_.gamma, &K(i, 0), K.cols());
        K(i, i) = 1.0;  // exact, as the core's kernel matrices: rounding would leave exp(-gamma ~eps) there
      }
      return true;
    }
    if (spec_.type == KernelType::polynomial) {
      const auto degree = static_cast<long long>(spec_.degree);
      K = K.unaryExpr([&](double inner) { return integer_power(spec_.gamma * inner + spec_.coef0, degree); });
    }
    return K.allFinite();
  }

  // Rows r0.. of KG(Z; P), P = left right^T: with W = P o dk (dk the derivative factor of each pair),
  // KG = 2 gamma (W Z - diag(W 1) Z) for rbf and W Z for poly and linear.
  void pull(Index r0, Index rows, BandScratch& s, const Upstream& up) const {
    const auto K = K_.middleRows(r0, rows);
    Block W = s.weights.topRows(rows);
    Block G = up.G.middleRows(r0, rows);
    blas::gemm<double>(Op::none, Op::none, up.left.middleRows(r0, rows), up.right_t, W, 1.0, 0.0);
    if (spec_.type == KernelType::rbf) {
      for (Index i = 0; i < rows; ++i) {  // each row summed while it is in the L1 cache
        W.row(i).array() *= K.row(i).array();
        s.sums[i] = W.row(i).sum();
      }
    } else if (spec_.type == KernelType::polynomial) {
      if (spec_.degree == 0) {  // a constant kernel
        G.setZero();
        return;
      }
      Block bases = s.bases.topRows(rows);
      blas::gemm<double>(Op::none, Op::none, Z_.middleRows(r0, rows), Zt_, bases, spec_.gamma, 0.0);
      const auto exponent = static_cast<long long>(spec_.degree) - 1;
      const double scale = spec_.degree * spec_.gamma;
      W.array() *= bases.array().unaryExpr([&](double b) { return scale * integer_power(b + spec_.coef0, exponent); });
    }
    blas::gemm<double>(Op::none, Op::none, W, Z_, G, 1.0, 0.0);
    if (spec_.type != KernelType::rbf) return;
    G = (2.0 * spec_.gamma) * (G - s.sums.head(rows).asDiagonal() * Z_.middleRows(r0, rows));
  }

  KernelSpec spec_;
  bool on_data_;
  int threads_;
  Eigen::Map<Matrix> K_;
  Matrix Z_, Zt_;         // Z in double, shifted by its mean for rbf, and its transpose (for plain NN products)
  Vector<double> norms_;  // squared row norms of Z_
};

// An uninitialized buffer of doubles for the kernel matrices. One allocation, which the allocator hands back from
// call to call: n x n temporaries allocated one by one were faulted in afresh at every call, which at n = 300 cost
// more than the arithmetic. Beyond glibc's largest mmap threshold (32 MiB) a buffer is mapped afresh at every call
// all the same (at n = 1500, 13,000 page faults cost about as much as the arithmetic), so on Linux large buffers
// ask for transparent huge pages: 512 times fewer faults.
struct BufferFree {
  void operator()(double* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<double[], BufferFree>;

Buffer uninitialized_buffer(Index size) {
  std::size_t bytes = static_cast<std::size_t>(size) * sizeof(double);
#ifdef __linux__
  constexpr std::size_t kHugePage = std::size_t(2) << 20, kLarge = std::size_t(32) << 20;
  if (bytes >= kLarge) {
    bytes = (bytes + kHugePage - 1) / kHugePage * kHugePage;
    void* p = std::aligned_alloc(kHugePage, bytes);
    if (p == nullptr) throw std::bad_alloc();
    madvise(p, bytes, MADV_HUGEPAGE);  // a request: where refused, the buffer has ordinary pages
    return Buffer(static_cast<double*>(p));
  }
#endif
  void* p = std::malloc(std::max<std::size_t>(bytes, 1));
  if (p == nullptr) throw std::bad_alloc();
  return Buffer(static_cast<double*>(p));
}

struct Forward {
  std::vector<std::unique_ptr<KernelBands>> bands;  // entry l's kernel over X^(l); none for K²AE's K_in
  Buffer grams;  // K_l of every entry (n x n, row-major, one after the other)
  std::vector<Matrix> weights;  // B_l = Phi_l A_l
  std::vector<Matrix> outputs;  // X^(l) = K_l B_l, l = 1..count
  Matrix last_gram, N, C;       // K²AE's last layer: K_L, N_L and C[i, i'] = <x_i - x_i^(L), phi_{L,i'}>
  // The factored last layer (given output features F): its kernel's bands over K_L (in last_gram), and S, R with
  // N_L = S S^T, C = R S^T; N and C are formed only for the Jacobian recursions.
  std::unique_ptr<KernelBands> last_bands;
  Matrix S, R;
  Vector<double> terms;         // D, s_1, ..., s_L
  std::vector<BandScratch> scratch;
};

// X^(l) for l = 0..count (X^(0) is the data; K²AE has none).
ConstBlock representation(const Problem& p, const Forward& f, Index l) {
  return l == 0 ? p.X : ConstBlock(f.outputs[l - 1]);
}

ConstBlock gram(const Problem& p, const Forward& f, Index l) {
  const Index n = p.n();
  return p.given_gram(l) ? p.X : ConstBlock(Eigen::Map<const Matrix>(f.grams.get() + l * n * n, n, n));
}

// out = A B in fixed bands of rows (K²AE's products with K_in).
void banded_product(const ConstBlock& A, const ConstBlock& B, Block out, int threads) {
  const Index n = A.rows();
  for_each_item((n + kBandRows - 1) / kBandRows, threads, Schedule::dynamic, [&](Index k, std::size_t) {
    const Index r0 = k * kBandRows, rows = std::min(kBandRows, n - r0);
    blas::gemm<double>(Op::none, Op::none, A.middleRows(r0, rows), B, out.middleRows(r0, rows), 1.0, 0.0);
  });
}

// op_a(A) op_b(B) in one call, for the O(n^3) products of the ridge layer and the Jacobian set-up.
Matrix product(const ConstBlock& A, Op op_a, const ConstBlock& B, Op op_b) {
  Matrix out(op_a == Op::none ? A.rows() : A.cols(), op_b == Op::none ? B.cols() : B.rows());
  blas::gemm<double>(op_a, op_b, A, B, out, 1.0, 0.0);
  return out;
}

// The kernel of entry l (or K²AE's last layer) over Z = X^(l); a hidden representation beyond float64's range
// is an Overflow.
std::unique_ptr<KernelBands> layer_kernel(const ConstBlock& Z, const KernelSpec& spec, bool on_data, double* storage,
                                          int threads) {
  if (!on_data && !Z.allFinite()) throw Overflow{};
  return std::make_unique<KernelBands>(Z, spec, on_data, storage, threads);
}

// The ridge solution of eq. 13 (lambda > 0): N = W^-1 K_out W^-1 (eq. 54) with W = K_L + n lambda I,
// C = n lambda N; returns D = n lambda^2 Tr(N).
double ridge_solution(const ConstBlock& K_out, const Matrix& K_L, double lambda, Matrix& N, Matrix& C) {
  const Index n = K_out.rows();
  Matrix factor = K_L;
  factor.diagonal().array() += static_cast<double>(n) * lambda;
  require(blas::potrf_lower<double>(factor) == 0,
          "penalties: the last layer's ridge system K_L + n lambda_L I is not numerically positive definite; "
          "lambda_L = " + text(lambda) + " is too small");
  Eigen::MatrixXd once = K_out;  // column-major right-hand sides
  blas::potrs_lower<double>(factor, once);
  Eigen::MatrixXd twice = once.transpose();  // W^-1 (W^-1 K_out)^T = W^-1 K_out W^-1
  blas::potrs_lower<double>(factor, twice);
  N = 0.5 * (twice + twice.transpose());
  C = (static_cast<double>(n) * lambda) * N;
  return static_cast<double>(n) * lambda * lambda * N.trace();
}

// The minimum-norm least-squares fit (lambda = 0): K_L^+ from the eigenvalues above max * n * eps,
// N = K_L^+ K_out K_L^+, C = (I - P) K_out K_L^+ with P = K_L K_L^+; returns D = Tr((I - P) K_out) / n.
double least_squares_solution(const ConstBlock& K_out, const Matrix& K_L, Matrix& N, Matrix& C) {
  const Index n = K_out.rows();
  Matrix work = K_L;
  Vector<double> values;
  Matrix vectors;
  blas::syevd<double>(work, values, vectors);  // ascending
  const double cutoff =
      std::max(values[n - 1], 0.0) * static_cast<double>(n) * std::numeric_limits<double>::epsilon();
  Index first = 0;
  while (first < n && !(values[first] > cutoff)) ++first;
  const Matrix U = vectors.rightCols(n - first);
  const Matrix scaled = U * values.tail(n - first).cwiseInverse().asDiagonal();
  const Matrix pinv = product(scaled, Op::none, U, Op::transpose);
  Matrix residual = K_out;  // (I - P) K_out
  blas::gemm<double>(Op::none, Op::none, U, product(U, Op::transpose, K_out, Op::none), residual, -1.0, 1.0);
  N = product(product(pinv, Op::none, K_out, Op::none), Op::none, pinv, Op::none);
  C = product(residual, Op::none, pinv, Op::none);
  return residual.trace() / static_cast<double>(n);
}

// The ridge solution through the outputs F (lambda > 0): S = W^-1 F, d_out right-hand sides; N = S S^T,
// R = n lambda S (C = R S^T); returns D = n lambda^2 ||S||_F^2.
double factored_ridge_solution(const ConstBlock& F, const Matrix& K_L, double lambda, Matrix& S, Matrix& R) {
  const Index n = F.rows();
  Matrix factor = K_L;
  factor.diagonal().array() += static_cast<double>(n) * lambda;
  require(blas::potrf_lower<double>(factor) == 0,
          "penalties: the last layer's ridge system K_L + n lambda_L I is not numerically positive definite; "
          "lambda_L = " + text(lambda) + " is too small");
  Eigen::MatrixXd solved = F;  // column-major right-hand sides
  blas::potrs_lower<double>(factor, solved);
  S = solved;
  R = (static_cast<double>(n) * lambda) * S;
  return static_cast<double>(n) * lambda * lambda * S.squaredNorm();
}

// The minimum-norm least-squares fit through F (lambda = 0): S = K_L^+ F, R = (I - P) F; returns
// D = ||R||_F^2 / n (= Tr((I - P) F F^T) / n, I - P being an orthogonal projection).
double factored_least_squares_solution(const ConstBlock& F, const Matrix& K_L, Matrix& S, Matrix& R) {
  const Index n = F.rows();
  Matrix work = K_L;
  Vector<double> values;
  Matrix vectors;
  blas::syevd<double>(work, values, vectors);  // ascending
  const double cutoff =
      std::max(values[n - 1], 0.0) * static_cast<double>(n) * std::numeric_limits<double>::epsilon();
  Index first = 0;
  while (first < n && !(values[first] > cutoff)) ++first;
  const Matrix U = vectors.rightCols(n - first);
  const Matrix UF = product(U, Op::transpose, F, Op::none);
  S = product(U, Op::none, values.tail(n - first).cwiseInverse().asDiagonal() * UF, Op::none);
  R = F;
  blas::gemm<double>(Op::none, Op::none, U, UF, R, -1.0, 1.0);
  return R.squaredNorm() / static_cast<double>(n);
}

// K²AE's last layer, solved in closed form: K_L, N_L, C (or their factors S, R) and the terms D and s_L.
void ridge_layer(const Problem& p, Forward& f) {
  const Index n = p.n();
  const double lambda = p.penalties.back();
  f.last_gram.resize(n, n);
  // fills last_gram
  auto bands = layer_kernel(f.outputs.back(), p.kernels.back(), false, f.last_gram.data(), p.threads);
  if (p.features != nullptr) {
    f.terms[0] = lambda > 0 ? factored_ridge_solution(*p.features, f.last_gram, lambda, f.S, f.R)
                            : factored_least_squares_solution(*p.features, f.last_gram, f.S, f.R);
    Matrix KS(n, f.S.cols());
    bands->multiply(f.S, KS);
    f.terms[p.count() + 1] = f.S.cwiseProduct(KS).sum();  // Tr(K_L S S^T)
    f.last_bands = std::move(bands);
    return;
  }
  f.terms[0] = lambda > 0 ? ridge_solution(p.K_out, f.last_gram, lambda, f.N, f.C)
                          : least_squares_solution(p.K_out, f.last_gram, f.N, f.C);
  f.terms[p.count() + 1] = f.last_gram.cwiseProduct(f.N).sum();
}

// Representations, kernel matrices, loss terms and what the gradients need.
Forward forward(const Problem& p) {
  const Index n = p.n(), count = p.count();
  Forward f;
  f.bands.resize(count);
  f.weights.resize(count);
  f.outputs.resize(count);
  f.terms.setZero(count + 1 + (p.precomputed ? 1 : 0));
  f.scratch = band_scratch(p);
  // Left uninitialized: pages that no kernel fills (K²AE's first entry) are never touched.
  f.grams = uninitialized_buffer(count * n * n);
  for (Index l = 0; l < count; ++l) {
    f.weights[l] = p.identity(l) ? Matrix(p.phis[l]) : Matrix(p.phis[l] * p.operators[l]);
    f.outputs[l].resize(n, p.width(l));
    if (p.given_gram(l)) {
      banded_product(p.X, f.weights[l], f.outputs[l], p.threads);
    } else {
      f.bands[l] = layer_kernel(representation(p, f, l), p.kernel(l), l == 0, f.grams.get() + l * n * n, p.threads);
      f.bands[l]->multiply(f.weights[l], f.outputs[l]);
    }
    f.terms[l + 1] = p.phis[l].cwiseProduct(f.outputs[l]).sum();
  }
  if (p.precomputed) {
    ridge_layer(p, f);
  } else {
    f.terms[0] = (p.X - f.outputs.back()).squaredNorm() / static_cast<double>(n);
  }
  if (!f.terms.allFinite()) throw Overflow{};
  return f;
}

// ---- (a) the adjoint gradient ----

// KG(Z; P)_a = sum_j P_aj d/dz k(z, z_j) at z = z_a for a full P (K²AE's last layer, whose solve is O(n^3)
// anyway).
Matrix kernel_backward(const ConstBlock& Z, const Matrix& P, const KernelSpec& spec, int threads) {
  if (!P.allFinite()) throw Overflow{};
  Matrix G(Z.rows(), Z.cols());
  try {
    kernel_gradient_into<double>(Z, Z, P, spec, G, threads);
  } catch (const std::invalid_argument&) {  // its only complaint about finite arguments: a gradient that overflows
    throw Overflow{};
  }
  return G;
}

std::vector<Matrix> adjoint(const Problem& p, Forward& f) {
  const Index n = p.n(), count = p.count();
  Matrix G;  // dloss/dX^(l) for the layer l at hand, through the layers above it
  if (p.precomputed && p.features != nullptr) {
    // M = -(2/n) R S^T + lambda S S^T = Q S^T: M + M^T = [Q S] [S Q]^T through the kernel's bands.
    const Matrix Q = (-2.0 / static_cast<double>(n)) * f.R + p.penalties.back() * f.S;
    if (!Q.allFinite()) throw Overflow{};
    const Index d = f.S.cols();
    Matrix left(n, 2 * d), right_t(2 * d, n);
    left << Q, f.S;
    right_t << f.S.transpose(), Q.transpose();
    G.resize(n, f.outputs.back().cols());
    const Upstream up{left, right_t, G};
    f.last_bands->pull_all(f.scratch, up);
    if (!G.allFinite()) throw Overflow{};
  } else if (p.precomputed) {
    const Matrix M = (-2.0 / static_cast<double>(n)) * f.C + p.penalties.back() * f.N;
    G = kernel_backward(f.outputs.back(), M + M.transpose(), p.kernels.back(), p.threads);
  } else {
    G = (-2.0 / static_cast<double>(n)) * (p.X - f.outputs.back());
  }
  std::vector<Matrix> grads(count);
  for (Index l = count - 1; l >= 0; --l) {
    // dloss/dPhi_l = K_l (G_l + 2 lambda_l Phi_l) A_l: X^(l) = K_l Phi_l A_l and s_l = sum(Phi_l o X^(l)).
    const Matrix T = G + (2.0 * p.penalties[l]) * p.phis[l];
    const Matrix TA = p.identity(l) ? T : Matrix(T * p.operators[l]);
    grads[l].resize(n, p.width(l));
    if (p.given_gram(l)) {
      banded_product(p.X, TA, grads[l], p.threads);
    } else if (l == 0) {
      f.bands[l]->backward(TA, grads[l], f.scratch, nullptr);
    } else {
      // M_l + M_l^T = G B^T + B G^T + 2 lambda Phi A Phi^T = T B^T + B G^T: the product of [T B] and [B G].
      const Matrix& B = f.weights[l];
      Matrix left(n, 2 * B.cols()), right_t(2 * B.cols(), n), G_below(n, representation(p, f, l).cols());
      left << T, B;
      right_t << B.transpose(), G.transpose();
      const Upstream up{left, right_t, G_below};
      f.bands[l]->backward(TA, grads[l], f.scratch, &up);
      G = std::move(G_below);
    }
  }
  return grads;
}

// ---- (b) the Jacobian recursions of Appendix B.3-B.4 ----

// grad_1 k(z_i, z_i') (the rows of the paper's Delta_l(z_i), Appendix B.4) = coef[i, i'] (z_i' - z_i) for rbf
// (coef = 2 gamma K), coef[i, i'] z_i' for poly (coef = degree gamma base^(degree - 1)) and linear (coef = 1).
struct FirstArgumentGradients {
  Matrix coef;
  bool difference = false;  // rbf's z_i' - z_i
};

FirstArgumentGradients first_argument_gradients(const ConstBlock& Z, const ConstBlock& K, const KernelSpec& spec) {
  FirstArgumentGradients g;
  g.difference = spec.type == KernelType::rbf;
  if (spec.type == KernelType::rbf) {
    g.coef = (2.0 * spec.gamma) * K;
  } else if (spec.type == KernelType::linear) {
    g.coef = Matrix::Ones(K.rows(), K.cols());
  } else if (spec.degree == 0) {  // a constant kernel
    g.coef = Matrix::Zero(K.rows(), K.cols());
  } else {
    const auto exponent = static_cast<long long>(spec.degree) - 1;
    const double scale = spec.degree * spec.gamma;
    g.coef = product(Z, Op::none, Z, Op::transpose).unaryExpr([&](double inner) {
      return scale * integer_power(spec.gamma * inner + spec.coef0, exponent);
    });
  }
  return g;
}

// e_i = sum_i' W[i, i'] grad_1 k(z_i, z_i') for all i (n x d): the form of eqs. 12 and 14 once the Jacobian of z_i
// is factored out.
Matrix contracted_gradients(const Matrix& W, const FirstArgumentGradients& g, const ConstBlock& Z) {
  const Matrix weighted = W.cwiseProduct(g.coef);
  Matrix e = product(weighted, Op::none, Z, Op::none);
  if (g.difference) e -= weighted.rowwise().sum().asDiagonal() * Z;
  return e;
}

// Row i holds Phi^T Delta(z_i) = sum_i' phi_i' grad_1 k(z_i, z_i')^T (d_out x d_in, row-major): the first term of
// the higher Jacobian (B.3), the same for every (l0, i0).
Matrix delta_products(const ConstBlock& Phi, const FirstArgumentGradients& g, const ConstBlock& Z) {
  const Index n = Z.rows(), d_out = Phi.cols(), d_in = Z.cols();
  Matrix outer(n, d_out * d_in);  // row i': phi_i' z_i'^T
  for (Index i = 0; i < n; ++i) {
    for (Index c = 0; c < d_out; ++c) outer.row(i).segment(c * d_in, d_in) = Phi(i, c) * Z.row(i);
  }
  Matrix F = product(g.coef, Op::none, outer, Op::none);
  if (!g.difference) return F;
  const Matrix coef_phi = product(g.coef, Op::none, Phi, Op::none);
  for (Index i = 0; i < n; ++i) {
    for (Index c = 0; c < d_out; ++c) F.row(i).segment(c * d_in, d_in) -= coef_phi(i, c) * Z.row(i);
  }
  return F;
}

// What the recursion needs of an entry l >= 1 of phis (layer l + 1, whose kernel acts on Z = X^(l)).
struct RecursionLayer {
  Matrix Zt;           // Z^T (d_in x n)
  Matrix coef_t;       // coef^T: row i holds coef[., i], the weights of grad_1 k(z_i', z_i)
  bool difference = false;
  Matrix delta;        // delta_products
  Matrix norm_t;       // e^T for eq. 12 with W = 2 lambda_l N_l, N_l = Phi_l A_l Phi_l^T (d_in x n)
};

struct Recursion {
  std::vector<RecursionLayer> layers;  // entries 1..count-1
  // Weights of the Jacobians of the last representation: KAE: G_L^T = (-(2/n)(X - X^(L)))^T (eq. 9); K²AE: e^T
  // with W = -(2/n)(C + C^T) + 2 lambda_L N_L over layer L's kernel (eqs. 14 and 12).
  Matrix last_t;
};

Recursion recursion(const Problem& p, const Forward& f) {
  const Index n = p.n(), count = p.count();
  Recursion r;
  r.layers.resize(count);
  for (Index l = 1; l < count; ++l) {
    const ConstBlock Z = f.outputs[l - 1];
    const FirstArgumentGradients g = first_argument_gradients(Z, gram(p, f, l), p.kernel(l));
    RecursionLayer& layer = r.layers[l];
    layer.Zt = Z.transpose();
    layer.coef_t = g.coef.transpose();
    layer.difference = g.difference;
    layer.delta = delta_products(p.phis[l], g, Z);
    const Matrix norm_weights = (2.0 * p.penalties[l]) * product(f.weights[l], Op::none, p.phis[l], Op::transpose);
    layer.norm_t = contracted_gradients(norm_weights, g, Z).transpose();
  }
  if (p.precomputed) {
    const ConstBlock Z = f.outputs.back();
    const FirstArgumentGradients g = first_argument_gradients(Z, f.last_gram, p.kernels.back());
    Matrix N = f.N, C = f.C;
    if (p.features != nullptr) {  // the factored layer: N = S S^T, C = R S^T
      N = product(f.S, Op::none, f.S, Op::transpose);
      C = product(f.R, Op::none, f.S, Op::transpose);
    }
    const Matrix W = (-2.0 / static_cast<double>(n)) * (C + C.transpose()) + (2.0 * p.penalties.back()) * N;
    r.last_t = contracted_gradients(W, g, Z).transpose();
  } else {
    r.last_t = ((-2.0 / static_cast<double>(n)) * (p.X - f.outputs.back())).transpose();
  }
  return r;
}

// One thread's buffers, sized for the widest layer before the parallel region.
struct RowScratch {
  // The Jacobians of every sample's representation at one layer, stacked by component: rows a n .. a n + n - 1
  // hold row a of every J_i (a d_l n x d_l0 matrix); the other buffer receives the layer above.
  std::vector<double> J, next;
  std::vector<double> U, Y;  // n x d_l0
  Matrix Ji, T, AT;          // d_in x d_l0, d_out x d_l0, d_out x d_l0
  Eigen::RowVectorXd row;

  RowScratch(Index n, Index widest)
      : J(static_cast<std::size_t>(n * widest * widest)), next(J.size()), U(static_cast<std::size_t>(n * widest)),
        Y(U.size()), Ji(widest, widest), T(widest, widest), AT(widest, widest), row(widest) {}
};

using MatrixMap = Eigen::Map<Matrix>;
using RowRef = Eigen::Ref<Eigen::RowVectorXd>;

// row += sum_i w_i^T J_i for the weights W (given as W^T, d x n) and the stacked J.
void add_weighted_jacobians(const Matrix& weights_t, const MatrixMap& J, Index n, RowRef row) {
  for (Index a = 0; a < weights_t.rows(); ++a) row.noalias() += weights_t.row(a) * J.middleRows(a * n, n);
}

// The Jacobians of X^(l) from those of X^(l-1) (B.3, higher Jacobian), for every sample i:
//   J^(l)_i = A_l [Phi_l^T Delta_l(z_i) J_i + sum_i' phi_i' grad_1 k(z_i', z_i)^T J_i'],
// where grad_1 k(z_i', z_i)^T J_i' = coef[i', i] (z_i^T J_i' - [rbf] z_i'^T J_i').
void higher_jacobians(const Problem& p, const RecursionLayer& layer, Index l, const MatrixMap& J, MatrixMap& next,
                      RowScratch& s) {
  const Index n = p.n(), d0 = J.cols(), d_in = layer.Zt.rows(), d_out = p.width(l);
  MatrixMap U(s.U.data(), n, d0), Y(s.Y.data(), n, d0);
  if (layer.difference) {  // U_i' = z_i'^T J_i'
    U.setZero();
    for (Index a = 0; a < d_in; ++a) {
      U.array() += J.middleRows(a * n, n).array().colwise() * layer.Zt.row(a).transpose().array();
    }
  }
  auto Ji = s.Ji.topLeftCorner(d_in, d0);
  auto T = s.T.topLeftCorner(d_out, d0);
  auto AT = s.AT.topLeftCorner(d_out, d0);
  for (Index i = 0; i < n; ++i) {
    Y = layer.Zt(0, i) * J.middleRows(0, n);  // Y_i' = z_i^T J_i'
    for (Index a = 1; a < d_in; ++a) Y += layer.Zt(a, i) * J.middleRows(a * n, n);
    if (layer.difference) Y -= U;
    Y.array().colwise() *= layer.coef_t.row(i).transpose().array();
    T.noalias() = p.phis[l].transpose() * Y;
    for (Index a = 0; a < d_in; ++a) Ji.row(a) = J.row(a * n + i);
    const Eigen::Map<const Matrix> delta(layer.delta.row(i).data(), d_out, d_in);
    T.noalias() += delta * Ji;
    if (!p.identity(l)) {
      AT.noalias() = p.operators[l] * T;
      T = AT;
    }
    for (Index c = 0; c < d_out; ++c) next.row(c * n + i) = T.row(c);
  }
}

// Gradient row (l0, i0): the own Jacobians J^(l0)_i = K_l0[i, i0] A_l0, carried up through the layers, combined
// by eqs. 11 and 12 and by eq. 9 (KAE) or eqs. 14 and 12 of the last layer (K²AE).
void jacobian_row(const Problem& p, const Forward& f, const Recursion& r, Index l0, Index i0, RowScratch& s,
                  double* out) {
  const Index n = p.n(), d0 = p.width(l0);
  double* current = s.J.data();
  double* spare = s.next.data();
  MatrixMap own(current, d0 * n, d0);
  const ConstBlock K0 = gram(p, f, l0);
  for (Index a = 0; a < d0; ++a) {
    for (Index i = 0; i < n; ++i) {
      if (p.identity(l0)) {
        own.row(a * n + i).setZero();
        own(a * n + i, a) = K0(i, i0);
      } else {
        own.row(a * n + i) = K0(i, i0) * p.operators[l0].row(a);
      }
    }
  }
  auto row = s.row.head(d0);
  row = (2.0 * p.penalties[l0]) * f.outputs[l0].row(i0);  // eq. 11
  Index width = d0;
  for (Index l = l0 + 1; l < p.count(); ++l) {
    const MatrixMap J(current, width * n, d0);
    add_weighted_jacobians(r.layers[l].norm_t, J, n, row);  // eq. 12
    MatrixMap next(spare, p.width(l) * n, d0);
    higher_jacobians(p, r.layers[l], l, J, next, s);
    std::swap(current, spare);
    width = p.width(l);
  }
  add_weighted_jacobians(r.last_t, MatrixMap(current, width * n, d0), n, row);
  std::copy(row.data(), row.data() + d0, out);
}

std::vector<Matrix> jacobian(const Problem& p, const Forward& f) {
  const Index n = p.n(), count = p.count();
  const Recursion r = recursion(p, f);
  std::vector<Matrix> grads(count);
  Index widest = 0;
  for (Index l = 0; l < count; ++l) {
    grads[l].resize(n, p.width(l));
    widest = std::max(widest, p.width(l));
  }
  std::vector<RowScratch> scratch(static_cast<std::size_t>(p.threads), RowScratch(n, widest));
  // Nothing may throw inside the region: the first exception stops the remaining rows and is rethrown after it.
  std::atomic<bool> failed{false};
  std::exception_ptr error;
  for_each_item(count * n, p.threads, Schedule::dynamic, [&](Index item, std::size_t t) {
    if (failed) return;
    const Index l0 = item / n, i0 = item % n;
    try {
      jacobian_row(p, f, r, l0, i0, scratch[t], grads[l0].row(i0).data());
    } catch (...) {
      if (!failed.exchange(true)) error = std::current_exception();
    }
  });
  if (error) std::rethrow_exception(error);
  return grads;
}

KaeResult overflowed(const Problem& p) {
  KaeResult result;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  result.loss = std::numeric_limits<double>::infinity();
  result.terms = Vector<double>::Constant(p.count() + 1 + (p.precomputed ? 1 : 0), nan);
  for (const ConstBlock& phi : p.phis) result.grads.push_back(Matrix::Constant(phi.rows(), phi.cols(), nan));
  return result;
}

}  // namespace

KaeGradient parse_kae_gradient(const std::string& name) {
  if (name == "adjoint") return KaeGradient::adjoint;
  if (name == "jacobian") return KaeGradient::jacobian;
  throw std::invalid_argument("method: must be one of adjoint, jacobian, got '" + name + "'");
}

KaeResult kae_loss_and_grad(const ConstMatrixRef<double>& X, const std::vector<ConstMatrixRef<double>>& phis,
                            const std::vector<KernelSpec>& kernels, const std::vector<RowMatrix<double>>& operators,
                            const std::vector<double>& penalties, bool precomputed, KaeGradient method,
                            int n_threads, const ConstMatrixRef<double>* output_gram,
                            const ConstMatrixRef<double>* output_features) {
  check_data(X, precomputed);
  check_output_gram(output_gram, X, precomputed);
  check_output_features(output_features, output_gram, X, precomputed);
  check_coefficients(phis, X, precomputed);
  check_kernels(kernels, phis.size());
  check_operators(operators, phis);
  check_penalties(penalties, phis.size() + (precomputed ? 1 : 0));
  const Problem p{X, output_gram != nullptr ? *output_gram : X, output_features, phis, kernels, operators, penalties,
                  precomputed, resolve_threads(n_threads)};
  KaeResult result;
  try {
    Forward f = forward(p);
    result.grads = method == KaeGradient::adjoint ? adjoint(p, f) : jacobian(p, f);
    result.terms = f.terms;
  } catch (const Overflow&) {
    return overflowed(p);
  }
  result.loss = result.terms[0];
  for (std::size_t l = 0; l < penalties.size(); ++l) result.loss += penalties[l] * result.terms[l + 1];
  return result;
}

}  // namespace rkm
