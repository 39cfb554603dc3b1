// Kernel matrices K(X, Y) for the kernels of the RKM papers.
#pragma once

#include "core/common.hpp"

#include <string>
#include <vector>

namespace rkm {

// The one list of kernels: X(enumerator, canonical name), in the order of python/rkm/_kernel_table.py (a test
// compares both). A kernel added here leaves every switch over KernelType without a case for it, which the
// compiler reports (-Wswitch); the switches are listed in ADDING_A_KERNEL.md.
#define RKM_KERNELS(X)      \
  X(linear, "linear")       \
  X(polynomial, "poly")     \
  X(rbf, "rbf")             \
  X(laplacian, "laplacian") \
  X(cosine, "cosine")       \
  X(tanimoto, "tanimoto")

enum class KernelType {
#define RKM_KERNEL_ENUMERATOR(type, name) type,
  RKM_KERNELS(RKM_KERNEL_ENUMERATOR)
#undef RKM_KERNEL_ENUMERATOR
};

// Every kernel, in the order of RKM_KERNELS.
inline constexpr KernelType kKernelTypes[] = {
#define RKM_KERNEL_VALUE(type, name) KernelType::type,
    RKM_KERNELS(RKM_KERNEL_VALUE)
#undef RKM_KERNEL_VALUE
};

// Further names the parser accepts, as scikit-learn's.
struct KernelAlias {
  const char* alias;
  KernelType type;
};
inline constexpr KernelAlias kKernelAliases[] = {{"polynomial", KernelType::polynomial}, {"gaussian", KernelType::rbf}};

// The canonical name of a kernel.
const char* kernel_name(KernelType type);
// The canonical names of all kernels, in the order of RKM_KERNELS.
std::vector<std::string> kernel_names();
// The kernel of a canonical name or an alias; every binding parses kernel names here. Otherwise throws
// std::invalid_argument "<subject>: unknown kernel '<name>'; choose one of ... (aliases: ...)".
KernelType parse_kernel(const std::string& name, const std::string& subject = "kernel");

// Kernels the Constr-DRKM objective can differentiate with respect to a level's hidden features (levels l >= 2,
// cpp/core/constr_drkm.cpp); laplacian by its subgradient.
bool has_level_derivatives(KernelType type);
// Kernels smooth in both arguments, as the kernel autoencoder's layers (cpp/core/kae.cpp) and levels 2-3 of the
// reduced-set deep RKM (cpp/core/deep.cpp) need.
bool has_layer_derivatives(KernelType type);
// "a, b, c": the canonical names of the kernels with the property, in the order of RKM_KERNELS.
std::string kernel_names_where(bool (*property)(KernelType));

// Parameters follow scikit-learn: rbf exp(-gamma ||x-y||^2), laplacian exp(-gamma ||x-y||_1),
// polynomial (gamma x^T y + coef0)^degree. gamma must already be resolved (no "None" here).
struct KernelSpec {
  KernelType type = KernelType::rbf;
  double gamma = 1.0;
  double degree = 3.0;
  double coef0 = 1.0;
};

// What kernel evaluation found wrong with its values. Each thread keeps its own inside OpenMP regions (nothing
// may throw there); report_value_flags raises for all of them after the region.
struct ValueFlags {
  bool non_finite = false;     // an entry is NaN, infinite or beyond the output dtype's range
  bool negative_base = false;  // a polynomial base gamma x^T y + coef0 < 0 under a non-integer degree

  // Records a segment with a non-finite value, and whether a negative polynomial base explains it.
  void record(const KernelSpec& spec, const double* inner_products, Eigen::Index n);
  // Whether some polynomial base gamma x^T y + coef0 is negative under a non-integer degree.
  void check_bases(const KernelSpec& spec, const double* inner_products, Eigen::Index n);
};

// Throws std::invalid_argument naming the cause when a thread's flags are set.
template <typename T>
void report_value_flags(const KernelSpec& spec, const std::vector<ValueFlags>& flags);

// Kernel values between the rows of X and those of Y (or of X itself), a block at a time, for routines that
// never hold the whole matrix. Keeps both sets in double (shifted by the mean of X for rbf, which removes
// most of the cancellation in ||x||^2 + ||y||^2 - 2 x^T y) with their squared norms.
//
// With float_products, a float32 rbf kernel takes its inner products from SGEMM, at twice the DGEMM rate (the
// distances and the exps stay in double): the sets are also kept as X - mean rounded to float, and the squared
// norms are those of the rounded values, so that a point's distance to itself stays 0. The SGEMM sums leave
// about sqrt(d) eps_float |x| |y| in each inner product, an error of that order in gamma |x - y|^2, which the
// float32 result's own rounding (eps_float k) matches for the kernel's typical scale gamma |x|^2 ~ 1. Routines
// whose results are accumulated further in double (gradients) leave it off.
template <typename T>
class KernelBlocks {
 public:
  // Y == nullptr means Y = X; X and Y must stay alive only during construction.
  KernelBlocks(const ConstMatrixRef<T>& X, const ConstMatrixRef<T>* Y, const KernelSpec& spec,
               bool float_products = false);

  Eigen::Index rows() const { return nx_.size(); }
  Eigen::Index cols() const { return symmetric_ ? nx_.size() : ny_.size(); }
  bool symmetric() const { return symmetric_; }
  const KernelSpec& spec() const { return spec_; }
  // The sets in double; empty with float products, whose inner products need only the rounded sets.
  const RowMatrix<double>& x() const { return x_; }
  const RowMatrix<double>& y() const { return symmetric_ ? x_ : y_; }
  const Vector<double>& x_norms() const { return nx_; }
  const Vector<double>& y_norms() const { return symmetric_ ? nx_ : ny_; }

  // out = x_r0.. y_c0..^T (L1 distances for laplacian): what the kernel transforms, for the out.rows() x
  // out.cols() block at (r0, c0). With float products, `scratch` holds the SGEMM's result (grown here as
  // needed: one per thread, reused across calls).
  void inner_products(Eigen::Index r0, Eigen::Index c0, MatrixRef<double> out, std::vector<float>& scratch) const;
  // out = K(x_r0.., y_c0..) for the out.rows() x out.cols() block at (r0, c0); on the diagonal of a
  // symmetric matrix the exact k(x, x) where the kernel has one. Values beyond T's range go to `flags`.
  // For the matrix-free products' square tiles, without float products: on a 256 x 256 tile SGEMM runs
  // little faster than DGEMM (13 against 10 GFLOP/s on one thread, d = 64), and the conversion takes the rest.
  void block(Eigen::Index r0, Eigen::Index c0, MatrixRef<double> out, ValueFlags& flags) const;

 private:
  // A set (shifted when `shifted`) in double, or with float products rounded to float, and the squared norms of
  // its rows (of the rounded rows with float products, so that a point's distance to itself stays 0).
  void prepare_set(const ConstMatrixRef<T>& set, const Eigen::RowVectorXd& shift, bool shifted,
                   RowMatrix<double>& exact, RowMatrix<float>& rounded, Vector<double>& norms);

  KernelSpec spec_;
  bool symmetric_, float_products_;
  RowMatrix<double> x_, y_;             // without float products (else empty)
  RowMatrix<float> x_float_, y_float_;  // with float products (else empty)
  Vector<double> nx_, ny_;
};

// Writes K(X, Y) into out (n_x x n_y); Y == nullptr means Y = X and builds one triangle, mirrored unless
// lower_only (then the strict upper triangle of out is left untouched, for consumers that read the lower
// triangle only, such as the kernel PCA fit).
// Built in row bands: one GEMM (or L1 sweep) per band into a cache-sized double buffer, then a fused
// elementwise pass that writes the band and, when symmetric, its mirror. Float32 input is accumulated in
// double, so ||x||^2 + ||y||^2 - 2 x^T y keeps its precision; distance kernels also shift both sets by the
// mean of X first, which removes most of that cancellation.
template <typename T>
void kernel_matrix_into(const ConstMatrixRef<T>& X, const ConstMatrixRef<T>* Y, const KernelSpec& spec,
                        MatrixRef<T> out, int n_threads, bool lower_only = false);

// Weighted gradients with respect to the first argument: G_i = sum_j W_ij d/dx k(x, y_j) at x = x_i, for
// X (n x d), Y (m x d), W (n x m), G (n x d). Every kernel except laplacian has the form
// G = (W o A) Y + diag((W o B) 1) X for elementwise A, B built from x^T y and the norms, so it runs as two
// GEMMs per row band; laplacian's subgradient (sign(x - y), 0 at ties) is summed directly.
template <typename T>
void kernel_gradient_into(const ConstMatrixRef<T>& X, const ConstMatrixRef<T>& Y, const ConstMatrixRef<T>& W,
                          const KernelSpec& spec, MatrixRef<T> G, int n_threads);

}  // namespace rkm
