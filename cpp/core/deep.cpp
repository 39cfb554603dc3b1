#include "core/deep.hpp"

#include "core/parallel.hpp"
#include "core/vector_math.hpp"

#include <cmath>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

namespace rkm {

namespace {

using ConstBlock = Eigen::Ref<const RowMatrix<double>>;
using Block = Eigen::Ref<RowMatrix<double>>;
using ConstMap = Eigen::Map<const RowMatrix<double>>;
using ConstVecMap = Eigen::Map<const Vector<double>>;

// Rows per work item: the block's N x M kernel values (256 x M doubles) stay in the L2 cache between the
// forward products and the elementwise transforms.
constexpr Eigen::Index kBlockRows = 256;

// Views of the blocks of theta = [A1 | A2 | A3 | b | l1 | l2].
struct Parameters {
  ConstMap A1, A2, A3;
  ConstVecMap b, l1, l2;
  Parameters(const double* t, const ReducedSetDims& d)
      : A1(t, d.M, d.s1),
        A2(t + d.M * d.s1, d.M, d.s2),
        A3(t + d.M * (d.s1 + d.s2), d.M, d.p),
        b(t + d.M * (d.s1 + d.s2 + d.p), d.p),
        l1(t + d.M * (d.s1 + d.s2 + d.p) + d.p, d.s1),
        l2(t + d.M * (d.s1 + d.s2 + d.p) + d.p + d.s1, d.s2) {}
};

void check_theta(const ConstVectorRef<double>& theta, const ReducedSetDims& dims) {
  require(theta.size() == dims.size(), "theta: expected " + std::to_string(dims.size()) +
                                           " entries (M (s1 + s2 + p) + p + s1 + s2), got " +
                                           std::to_string(theta.size()));
  const Parameters P(theta.data(), dims);
  require((P.l1.array() > 0).all() && (P.l2.array() > 0).all(),
          "theta: the eigenvalue entries l1, l2 must be positive");
}

// Kernel values k(z_i, a_j) of a block of rows Z against all rows of A, and the polynomial bases
// gamma z^T a + coef0 that the backward pass needs (left untouched for the other kernels).
void kernel_values(const KernelSpec& spec, const ConstBlock& Z, const ConstBlock& A, const Vector<double>& a_norms,
                   Block K, Block bases) {
  K.noalias() = Z * A.transpose();
  switch (spec.type) {
    case KernelType::rbf:
      for (Eigen::Index i = 0; i < K.rows(); ++i) {
        vector_rbf(K.row(i).data(), Z.row(i).squaredNorm(), a_norms.data(), spec.gamma, K.row(i).data(), K.cols());
      }
      break;
    case KernelType::polynomial:
      bases = (spec.gamma * K.array() + spec.coef0).matrix();
      K = bases.array().pow(spec.degree).matrix();
      break;
    case KernelType::linear:  // the inner products themselves
      break;
    case KernelType::laplacian:
    case KernelType::cosine:
    case KernelType::tanimoto:  // refused by SmoothKernel
      throw std::logic_error(std::string("kernel_values: no layer derivatives for the ") + kernel_name(spec.type) +
                             " kernel");
  }
}

// Backward step through k(Z, A) for the weights O_ij on k(z_i, a_j): GZ = d/dZ sum_ij O_ij k(z_i, a_j), and
// the derivative with respect to A added to GA. O is overwritten. rbf: d/dz k = -2 gamma (z - a) k,
// d/da k = -d/dz k; linear: d/dz k = a; polynomial: d/dz k = degree gamma base^(degree - 1) a.
void kernel_backward(const KernelSpec& spec, const ConstBlock& K, const ConstBlock& bases, const ConstBlock& Z,
                     const ConstBlock& A, Block O, Block GZ, Block GA) {
  switch (spec.type) {
    case KernelType::rbf: {
      O.array() *= 2.0 * spec.gamma * K.array();
      const Vector<double> row_sums = O.rowwise().sum();
      const Vector<double> col_sums = O.colwise().sum().transpose();
      GZ.noalias() = O * A;
      GZ -= row_sums.asDiagonal() * Z;
      GA.noalias() += O.transpose() * Z;
      GA -= col_sums.asDiagonal() * A;
      return;
    }
    case KernelType::polynomial:
      O.array() *= spec.degree * spec.gamma * bases.array().pow(spec.degree - 1.0);
      break;
    case KernelType::linear:
      break;
    case KernelType::laplacian:
    case KernelType::cosine:
    case KernelType::tanimoto:  // refused by SmoothKernel
      throw std::logic_error(std::string("kernel_backward: no layer derivatives for the ") + kernel_name(spec.type) +
                             " kernel");
  }
  GZ.noalias() = O * A;
  GA.noalias() += O.transpose() * Z;
}

// What one block of rows leaves behind in the forward pass.
struct BlockForward {
  RowMatrix<double> E1, E2;
};

// The forward pass of eq. 5.4 for one block of rows. Z1, Z2, K2, K3 (and the polynomial bases) are written
// to the given blocks; E1, E2, Yhat to out.
void forward_block(const ConstBlock& K1, const Parameters& P, const KernelSpec& k2, const KernelSpec& k3,
                   const std::array<double, 3>& etas, const Vector<double>& a1_norms,
                   const Vector<double>& a2_norms, Block Z1, Block Z2, Block K2, Block K3, Block bases2,
                   Block bases3, BlockForward& out, Block Yhat) {
  out.E1.noalias() = K1 * P.A1;
  out.E1 /= etas[0];
  Z1 = out.E1 * P.l1.cwiseInverse().asDiagonal();
  kernel_values(k2, Z1, P.A1, a1_norms, K2, bases2);
  out.E2.noalias() = K2 * P.A2;
  out.E2 /= etas[1];
  Z2 = out.E2 * P.l2.cwiseInverse().asDiagonal();
  kernel_values(k3, Z2, P.A2, a2_norms, K3, bases3);
  Yhat.noalias() = K3 * P.A3;
  Yhat /= etas[2];
  Yhat.rowwise() += P.b.transpose();
}

Vector<double> row_norms(const ConstMap& A) { return A.rowwise().squaredNorm(); }

Eigen::Index block_count(Eigen::Index n) { return (n + kBlockRows - 1) / kBlockRows; }

// Per-thread sums of the forward pass.
struct ForwardSums {
  double V1 = 0.0, V2 = 0.0, squared_residuals = 0.0;
};

// Per-thread sums of the backward pass: gradient blocks and the column sums the l-gradients need.
struct BackwardSums {
  RowMatrix<double> gA1, gA2, gA3;
  Vector<double> gb, l1_sums, l2_sums;
  BackwardSums(const ReducedSetDims& d)
      : gA1(RowMatrix<double>::Zero(d.M, d.s1)),
        gA2(RowMatrix<double>::Zero(d.M, d.s2)),
        gA3(RowMatrix<double>::Zero(d.M, d.p)),
        gb(Vector<double>::Zero(d.p)),
        l1_sums(Vector<double>::Zero(d.s1)),
        l2_sums(Vector<double>::Zero(d.s2)) {}
  void add(const BackwardSums& o) {
    gA1 += o.gA1;
    gA2 += o.gA2;
    gA3 += o.gA3;
    gb += o.gb;
    l1_sums += o.l1_sums;
    l2_sums += o.l2_sums;
  }
};

// A regularizer (1 / (2 eta)) Tr(A_next^T k(A, A) A_next) with weight w: its value, and w times its
// gradients, added to gA (through the kernel, both arguments) and gA_next.
double weight_regularizer(const KernelSpec& spec, const ConstMap& A, const ConstMap& A_next, double eta, double w,
                          Block gA, Block gA_next) {
  const Eigen::Index M = A.rows();
  RowMatrix<double> G(M, M), bases(spec.type == KernelType::polynomial ? M : 0, M);
  kernel_values(spec, A, A, row_norms(A), G, bases);
  const RowMatrix<double> GA_next = G * A_next;
  gA_next += (w / eta) * GA_next;
  RowMatrix<double> O = (w / (2.0 * eta)) * (A_next * A_next.transpose());
  RowMatrix<double> GZ(M, A.cols());
  kernel_backward(spec, G, bases, A, A, O, GZ, gA);
  gA += GZ;
  return A_next.cwiseProduct(GA_next).sum() / (2.0 * eta);
}

}  // namespace

SmoothKernel::SmoothKernel(const KernelSpec& s) : spec(s) {
  require(has_layer_derivatives(s.type), "kernel: levels 2 and 3 of the reduced-set model need a differentiable "
                                         "kernel: " + kernel_names_where(has_layer_derivatives));
}

DeepReducedSetObjective::DeepReducedSetObjective(const ConstMatrixRef<double>& K1, const ConstMatrixRef<double>& G1,
                                                 const ConstMatrixRef<double>& Y, const ReducedSetDims& dims,
                                                 const KernelSpec& kernel2, const KernelSpec& kernel3,
                                                 const ReducedSetOptions& options, int n_threads)
    : K1_(K1), G1_(G1), Y_(Y), dims_(dims), kernel2_(kernel2), kernel3_(kernel3), options_(options),
      threads_(resolve_threads(n_threads)) {
  const Eigen::Index N = K1.rows();
  require(dims.M > 0 && dims.s1 > 0 && dims.s2 > 0 && dims.p > 0, "dims: M, s1, s2 and p must be positive");
  require(K1.cols() == dims.M, "K1: expected " + std::to_string(dims.M) + " columns (M), got " +
                                   std::to_string(K1.cols()));
  require(G1.rows() == dims.M && G1.cols() == dims.M, "G1: expected an M x M matrix");
  require(Y.rows() == N && Y.cols() == dims.p, "Y: expected shape (N, p) matching K1 and dims");
  for (double eta : options.etas) require(eta > 0 && std::isfinite(eta), "etas: must be positive and finite");
  require(options.lam3 > 0 && std::isfinite(options.lam3), "lam3: must be positive and finite");
  require(options.c_stab >= 0 && options.c0 >= 0, "c_stab: c_stab and c0 must be non-negative");
  Z1_.resize(N, dims.s1);
  Z2_.resize(N, dims.s2);
  R_.resize(N, dims.p);
  K2_.resize(N, dims.M);
  K3_.resize(N, dims.M);
  base2_.resize(kernel2.type == KernelType::polynomial ? N : 0, dims.M);
  base3_.resize(kernel3.type == KernelType::polynomial ? N : 0, dims.M);
}

ReducedSetValue DeepReducedSetObjective::evaluate(const ConstVectorRef<double>& theta) {
  check_theta(theta, dims_);
  // The work buffers are the object's: concurrent calls take turns.
  const std::lock_guard<std::mutex> lock(mutex_);
  const ReducedSetDims& d = dims_;
  const Parameters P(theta.data(), d);
  const auto& etas = options_.etas;
  const KernelSpec& k2 = kernel2_.spec;
  const KernelSpec& k3 = kernel3_.spec;
  const Eigen::Index N = K1_.rows();
  const Eigen::Index blocks = block_count(N);
  const Vector<double> a1_norms = row_norms(P.A1), a2_norms = row_norms(P.A2);
  const bool poly2 = k2.type == KernelType::polynomial, poly3 = k3.type == KernelType::polynomial;
  auto rows_of = [](RowMatrix<double>& A, bool used, Eigen::Index r0, Eigen::Index r) {
    return used ? A.middleRows(r0, r) : A.middleRows(0, 0);
  };

  // Forward pass: Z1, Z2, K2, K3, R for all rows, and the sums of J1, J2, J3 (cyclic: sums repeat exactly).
  std::vector<ForwardSums> fsums(threads_);
  std::vector<BlockForward> fbuf(threads_);
  for_each_item(blocks, threads_, Schedule::cyclic, [&](Eigen::Index k, std::size_t t) {
    const Eigen::Index r0 = k * kBlockRows, r = std::min(kBlockRows, N - r0);
    RowMatrix<double> Yhat(r, d.p);
    forward_block(K1_.middleRows(r0, r), P, k2, k3, etas, a1_norms, a2_norms, Z1_.middleRows(r0, r),
                  Z2_.middleRows(r0, r), K2_.middleRows(r0, r), K3_.middleRows(r0, r), rows_of(base2_, poly2, r0, r),
                  rows_of(base3_, poly3, r0, r), fbuf[t], Yhat);
    R_.middleRows(r0, r) = Y_.middleRows(r0, r) - Yhat;
    fsums[t].V1 -= 0.5 * fbuf[t].E1.cwiseProduct(Z1_.middleRows(r0, r)).sum();
    fsums[t].V2 -= 0.5 * fbuf[t].E2.cwiseProduct(Z2_.middleRows(r0, r)).sum();
    fsums[t].squared_residuals += R_.middleRows(r0, r).squaredNorm();
  });
  ForwardSums total;
  for (const auto& s : fsums) {
    total.V1 += s.V1;
    total.V2 += s.V2;
    total.squared_residuals += s.squared_residuals;
  }

  // Regularizers: their values, and their unweighted gradients (reg_l: dRg_l/dA_l, reg1_from2: dRg2/dA1,
  // reg2_from3: dRg3/dA2), weighted by df/dJ_l below.
  ReducedSetValue out;
  RowMatrix<double> reg1 = RowMatrix<double>::Zero(d.M, d.s1), reg2 = RowMatrix<double>::Zero(d.M, d.s2),
                    reg3 = RowMatrix<double>::Zero(d.M, d.p);
  RowMatrix<double> reg2_from3 = RowMatrix<double>::Zero(d.M, d.s2), reg1_from2 = RowMatrix<double>::Zero(d.M, d.s1);
  double Rg1, Rg2, Rg3;
  if (options_.weight_regularizer) {
    const RowMatrix<double> G1A1 = G1_ * P.A1;
    Rg1 = P.A1.cwiseProduct(G1A1).sum() / (2.0 * etas[0]);
    reg1 = G1A1 / etas[0];
    Rg2 = weight_regularizer(k2, P.A1, P.A2, etas[1], 1.0, reg1_from2, reg2);
    Rg3 = weight_regularizer(k3, P.A2, P.A3, etas[2], 1.0, reg2_from3, reg3);
  } else {
    Rg1 = 0.5 * etas[0] * P.A1.squaredNorm();
    Rg2 = 0.5 * etas[1] * P.A2.squaredNorm();
    Rg3 = 0.5 * etas[2] * P.A3.squaredNorm();
    reg1 = etas[0] * P.A1;
    reg2 = etas[1] * P.A2;
    reg3 = etas[2] * P.A3;
  }
  const double J1 = total.V1 + Rg1, J2 = total.V2 + Rg2;
  const double J3 = total.squared_residuals / (2.0 * options_.lam3) + Rg3;
  out.terms = {J1, J2, J3};
  const bool full = !options_.level3_only;
  const double w1 = full ? 1.0 + options_.c_stab * J1 : 0.0;
  const double w2 = full ? 1.0 + options_.c_stab * J2 : 0.0;
  const double c0 = full ? options_.c0 : 0.0;
  out.f = full ? J1 + J2 + J3 + 0.5 * options_.c_stab * (J1 * J1 + J2 * J2) - c0 * (P.l1.sum() + P.l2.sum()) : J3;

  // Backward pass: df/dZ2 from J3, then through level 2 (plus w2 dJ2) and level 1 (plus w1 dJ1).
  std::vector<BackwardSums> bsums(threads_, BackwardSums(d));
  for_each_item(blocks, threads_, Schedule::cyclic, [&](Eigen::Index k, std::size_t t) {
    const Eigen::Index r0 = k * kBlockRows, r = std::min(kBlockRows, N - r0);
    BackwardSums& g = bsums[t];
    const auto Z1 = Z1_.middleRows(r0, r);
    const auto Z2 = Z2_.middleRows(r0, r);
    const auto K2 = K2_.middleRows(r0, r);
    const auto K3 = K3_.middleRows(r0, r);
    // df/dYhat = -R / lam3; every upstream gradient is divided by its level's eta before the products, so
    // that Eigen runs them as plain matrix products (a product divided by a scalar is evaluated lazily).
    const RowMatrix<double> GY = R_.middleRows(r0, r) / (-options_.lam3);
    g.gb += GY.colwise().sum().transpose();
    const RowMatrix<double> GY_scaled = GY / etas[2];
    g.gA3.noalias() += K3.transpose() * GY_scaled;
    RowMatrix<double> O(r, d.M);
    O.noalias() = GY_scaled * P.A3.transpose();
    RowMatrix<double> GZ2(r, d.s2);
    kernel_backward(k3, K3, rows_of(base3_, poly3, r0, r), Z2, P.A2, O, GZ2, g.gA2);
    g.l2_sums += GZ2.cwiseProduct(Z2).colwise().sum().transpose();
    const RowMatrix<double> GE2 = (GZ2 * P.l2.cwiseInverse().asDiagonal() - w2 * Z2) / etas[1];
    g.gA2.noalias() += K2.transpose() * GE2;
    O.noalias() = GE2 * P.A2.transpose();
    RowMatrix<double> GZ1(r, d.s1);
    kernel_backward(k2, K2, rows_of(base2_, poly2, r0, r), Z1, P.A1, O, GZ1, g.gA1);
    g.l1_sums += GZ1.cwiseProduct(Z1).colwise().sum().transpose();
    const RowMatrix<double> GE1 = (GZ1 * P.l1.cwiseInverse().asDiagonal() - w1 * Z1) / etas[0];
    g.gA1.noalias() += K1_.middleRows(r0, r).transpose() * GE1;
  });
  BackwardSums g(d);
  for (const auto& s : bsums) g.add(s);

  // dV_l/dl_l = (1/2) sum_i Z_l[i, k]^2; the Z-path: dZ/dl = -Z / l.
  const Vector<double> z1_squares = Z1_.colwise().squaredNorm().transpose();
  const Vector<double> z2_squares = Z2_.colwise().squaredNorm().transpose();
  out.grad.resize(d.size());
  double* gp = out.grad.data();
  Eigen::Map<RowMatrix<double>> gA1(gp, d.M, d.s1), gA2(gp + d.M * d.s1, d.M, d.s2),
      gA3(gp + d.M * (d.s1 + d.s2), d.M, d.p);
  const Eigen::Index tail = d.M * (d.s1 + d.s2 + d.p);
  Eigen::Map<Vector<double>> gb(gp + tail, d.p), gl1(gp + tail + d.p, d.s1), gl2(gp + tail + d.p + d.s1, d.s2);
  gA1 = g.gA1 + w1 * reg1 + w2 * reg1_from2;
  gA2 = g.gA2 + w2 * reg2 + reg2_from3;
  gA3 = g.gA3 + reg3;
  gb = g.gb;
  gl1 = -g.l1_sums.cwiseQuotient(P.l1) + 0.5 * w1 * z1_squares - Vector<double>::Constant(d.s1, c0);
  gl2 = -g.l2_sums.cwiseQuotient(P.l2) + 0.5 * w2 * z2_squares - Vector<double>::Constant(d.s2, c0);
  return out;
}

ReducedSetForward deep_reduced_set_forward(const ConstVectorRef<double>& theta, const ConstMatrixRef<double>& K1,
                                           const ReducedSetDims& dims, const KernelSpec& kernel2,
                                           const KernelSpec& kernel3, const std::array<double, 3>& etas,
                                           int n_threads) {
  const SmoothKernel k2(kernel2), k3(kernel3);
  check_theta(theta, dims);
  require(K1.cols() == dims.M, "K1: expected " + std::to_string(dims.M) + " columns (M), got " +
                                   std::to_string(K1.cols()));
  const Parameters P(theta.data(), dims);
  const Eigen::Index N = K1.rows();
  const int threads = resolve_threads(n_threads);
  const Vector<double> a1_norms = row_norms(P.A1), a2_norms = row_norms(P.A2);
  ReducedSetForward out{RowMatrix<double>(N, dims.p), RowMatrix<double>(N, dims.s1), RowMatrix<double>(N, dims.s2)};
  for_each_item(block_count(N), threads, Schedule::dynamic, [&](Eigen::Index k, std::size_t) {
    const Eigen::Index r0 = k * kBlockRows, r = std::min(kBlockRows, N - r0);
    RowMatrix<double> Z1(r, dims.s1), Z2(r, dims.s2), K2(r, dims.M), K3(r, dims.M);
    RowMatrix<double> B2(k2.spec.type == KernelType::polynomial ? r : 0, dims.M);
    RowMatrix<double> B3(k3.spec.type == KernelType::polynomial ? r : 0, dims.M);
    BlockForward f;
    forward_block(K1.middleRows(r0, r), P, k2.spec, k3.spec, etas, a1_norms, a2_norms, Z1, Z2, K2, K3, B2, B3, f,
                  out.Yhat.middleRows(r0, r));
    out.E1.middleRows(r0, r) = f.E1;
    out.E2.middleRows(r0, r) = f.E2;
  });
  return out;
}

}  // namespace rkm
