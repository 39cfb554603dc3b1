#include "core/blas.hpp"

#include <Eigen/Cholesky>
#include <Eigen/Eigenvalues>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <vector>

namespace rkm::blas {

namespace {
using Eigen::Index;

std::atomic<bool> g_use_external{true};

int as_int(Eigen::Index value) { return static_cast<int>(value); }

template <typename T>
const typename Routines<T>::gemm_t external_gemm() {
  return use_external() ? routines<T>().gemm : nullptr;
}
}  // namespace

template <typename T>
Routines<T>& routines() {
  static Routines<T> table;
  return table;
}

ThreadControls& thread_controls() {
  static ThreadControls controls;
  return controls;
}

namespace {
// The scopes open across threads and the count the last to close restores.
std::mutex g_scope_mutex;
int g_open_scopes = 0;
int g_scoped_count = 0;
}  // namespace

SingleThreadedScope::SingleThreadedScope(bool active) {
  const ThreadControls& controls = thread_controls();
  if (!active || controls.get == nullptr || controls.set == nullptr) return;
  const std::lock_guard<std::mutex> lock(g_scope_mutex);
  if (g_open_scopes++ == 0) {
    g_scoped_count = controls.get();
    if (g_scoped_count > 1) controls.set(1);
  }
  engaged_ = true;
}

SingleThreadedScope::~SingleThreadedScope() {
  if (!engaged_) return;
  const std::lock_guard<std::mutex> lock(g_scope_mutex);
  if (--g_open_scopes == 0 && g_scoped_count > 1) thread_controls().set(g_scoped_count);
}

int scoped_thread_count() {
  const std::lock_guard<std::mutex> lock(g_scope_mutex);
  return g_open_scopes > 0 ? g_scoped_count : 0;
}

void rebase_scoped_thread_count(int threads) {
  const std::lock_guard<std::mutex> lock(g_scope_mutex);
  if (g_open_scopes == 0) return;
  g_scoped_count = threads;
  if (threads > 1) thread_controls().set(1);
}

void set_use_external(bool use) { g_use_external.store(use); }
bool use_external() { return g_use_external.load(); }

template <typename T>
bool external_available() {
  const Routines<T>& r = routines<T>();
  return r.gemm != nullptr && r.syevd != nullptr && r.potrf != nullptr && r.potrs != nullptr && r.trtri != nullptr &&
         r.trsm != nullptr && r.trmm != nullptr && r.syrk != nullptr;
}

template <typename T>
void gemm(Op op_a, Op op_b, const ConstMatrixRef<T>& A, const ConstMatrixRef<T>& B, MatrixRef<T> C, T alpha, T beta) {
  if (C.size() == 0) return;
  const Index k = op_a == Op::transpose ? A.rows() : A.cols();
  if (k == 0) {  // an empty sum: beta C, where beta = 0 must not keep NaN from an uninitialized C (BLAS's rule)
    if (beta == T(0)) {
      C.setZero();
    } else {
      C *= beta;
    }
    return;
  }
  if (auto gemm_fn = external_gemm<T>()) {
    // Row-major C is the column-major C^T = op_b(B)^T op_a(A)^T, and a row-major operand read column-major
    // is its own transpose: so the operands swap places and keep their transpose flags.
    char ta = op_b == Op::transpose ? 'T' : 'N', tb = op_a == Op::transpose ? 'T' : 'N';
    int m = as_int(C.cols()), n = as_int(C.rows()), kk = as_int(k);
    int lda = as_int(B.outerStride()), ldb = as_int(A.outerStride()), ldc = as_int(C.outerStride());
    gemm_fn(&ta, &tb, &m, &n, &kk, &alpha, const_cast<T*>(B.data()), &lda, const_cast<T*>(A.data()), &ldb, &beta,
            C.data(), &ldc);
    return;
  }
  const auto accumulate = [&](const auto& product) {
    if (beta == T(0)) {
      C.noalias() = alpha * product;
    } else {
      C *= beta;
      C.noalias() += alpha * product;
    }
  };
  if (op_a == Op::transpose) {
    accumulate(A.transpose() * B);
  } else if (op_b == Op::transpose) {
    accumulate(A * B.transpose());
  } else {
    accumulate(A * B);
  }
}

template <typename T>
void syevd(RowMatrix<T>& A, Vector<T>& w, RowMatrix<T>& V) {
  int n = as_int(A.rows());
  w.resize(n);
  if (n == 0) {
    V.resize(0, 0);
    return;
  }
  auto syevd_fn = use_external() ? routines<T>().syevd : nullptr;
  if (syevd_fn == nullptr) {
    Eigen::SelfAdjointEigenSolver<RowMatrix<T>> solver(A, Eigen::ComputeEigenvectors);
    require(solver.info() == Eigen::Success, "eigh: the eigensolver did not converge");
    w = solver.eigenvalues();
    V = solver.eigenvectors();
    return;
  }
  char jobz = 'V', uplo = 'L';
  int lda = as_int(A.outerStride()), info = 0, lwork = -1, liwork = -1, iwork_query = 0;
  T work_query = 0;
  syevd_fn(&jobz, &uplo, &n, A.data(), &lda, w.data(), &work_query, &lwork, &iwork_query, &liwork, &info);
  lwork = std::max(1, static_cast<int>(work_query));
  liwork = std::max(1, iwork_query);
  std::vector<T> work(static_cast<size_t>(lwork));
  std::vector<int> iwork(static_cast<size_t>(liwork));
  syevd_fn(&jobz, &uplo, &n, A.data(), &lda, w.data(), work.data(), &lwork, iwork.data(), &liwork, &info);
  require(info == 0, "eigh: LAPACK syevd failed with info=" + std::to_string(info));
  // LAPACK wrote column-major eigenvectors, i.e. the rows of the row-major buffer.
  V = A.transpose();
}

// The row-major lower triangle is LAPACK's column-major upper triangle: A = L L^T row-major is A = U^T U
// column-major with U = L^T, so the routines below pass uplo = 'U' and the factor read back row-major is L.
template <typename T>
int potrf_lower(MatrixRef<T> A) {
  int n = as_int(A.rows());
  if (n == 0) return 0;
  if (auto potrf_fn = use_external() ? routines<T>().potrf : nullptr) {
    char uplo = 'U';
    int lda = as_int(A.outerStride()), info = 0;
    potrf_fn(&uplo, &n, A.data(), &lda, &info);
    require(info >= 0, "potrf: invalid argument " + std::to_string(-info));
    return info;
  }
  Eigen::LLT<Eigen::Ref<RowMatrix<T>>, Eigen::Lower> llt(A);
  if (llt.info() == Eigen::Success) return 0;
  // Eigen reports no column: find the first non-positive pivot of the partly factored matrix.
  for (Index k = 0; k < A.rows(); ++k)
    if (!(A(k, k) > T(0))) return as_int(k + 1);
  return as_int(A.rows());
}

namespace {

// B <- B L^{-T} for the lower-triangular L (row-major views; B is m x b, L b x b).
template <typename T>
void trsm_right_lower_transposed(const ConstMatrixRef<T>& L, MatrixRef<T> B) {
  if (B.size() == 0) return;
  if (auto trsm_fn = use_external() ? routines<T>().trsm : nullptr) {
    // Column-major, B^T <- L^{-1} B^T = U^{-T} B^T with U = L^T the column-major upper triangle.
    char side = 'L', uplo = 'U', trans = 'T', diag = 'N';
    int m = as_int(B.cols()), n = as_int(B.rows());
    int lda = as_int(L.outerStride()), ldb = as_int(B.outerStride());
    T one = 1;
    trsm_fn(&side, &uplo, &trans, &diag, &m, &n, &one, const_cast<T*>(L.data()), &lda, B.data(), &ldb);
    return;
  }
  L.transpose().template triangularView<Eigen::Upper>().template solveInPlace<Eigen::OnTheRight>(B);
}

// B <- -B L^{-1} for the lower-triangular L (row-major views; B is m x b, L b x b).
template <typename T>
void trsm_right_lower_negated(const ConstMatrixRef<T>& L, MatrixRef<T> B) {
  if (B.size() == 0) return;
  if (auto trsm_fn = use_external() ? routines<T>().trsm : nullptr) {
    // Column-major, B^T <- -L^{-T} B^T = -U^{-1} B^T with U = L^T the column-major upper triangle.
    char side = 'L', uplo = 'U', trans = 'N', diag = 'N';
    int m = as_int(B.cols()), n = as_int(B.rows());
    int lda = as_int(L.outerStride()), ldb = as_int(B.outerStride());
    T minus_one = -1;
    trsm_fn(&side, &uplo, &trans, &diag, &m, &n, &minus_one, const_cast<T*>(L.data()), &lda, B.data(), &ldb);
    return;
  }
  L.template triangularView<Eigen::Lower>().template solveInPlace<Eigen::OnTheRight>(B);
  B = -B;
}

// B <- M B for the lower-triangular M (row-major views; B is m x b, M m x m).
template <typename T>
void trmm_left_lower(const ConstMatrixRef<T>& M, MatrixRef<T> B) {
  if (B.size() == 0) return;
  if (auto trmm_fn = use_external() ? routines<T>().trmm : nullptr) {
    // Column-major, B^T <- B^T M^T = B^T U with U = M^T the column-major upper triangle.
    char side = 'R', uplo = 'U', trans = 'N', diag = 'N';
    int m = as_int(B.cols()), n = as_int(B.rows());
    int lda = as_int(M.outerStride()), ldb = as_int(B.outerStride());
    T one = 1;
    trmm_fn(&side, &uplo, &trans, &diag, &m, &n, &one, const_cast<T*>(M.data()), &lda, B.data(), &ldb);
    return;
  }
  const RowMatrix<T> product = M.template triangularView<Eigen::Lower>() * B;
  B = product;
}

// Lower triangle of C <- C - A A^T (row-major views; A is m x b, C m x m).
template <typename T>
void syrk_lower_subtract(const ConstMatrixRef<T>& A, MatrixRef<T> C) {
  if (C.size() == 0) return;
  if (auto syrk_fn = use_external() ? routines<T>().syrk : nullptr) {
    // Column-major, the upper triangle of C^T <- C^T - (A^T)^T A^T.
    char uplo = 'U', trans = 'T';
    int n = as_int(C.rows()), k = as_int(A.cols());
    int lda = as_int(A.outerStride()), ldc = as_int(C.outerStride());
    T alpha = -1, beta = 1;
    syrk_fn(&uplo, &trans, &n, &k, &alpha, const_cast<T*>(A.data()), &lda, &beta, C.data(), &ldc);
    return;
  }
  C.template selfadjointView<Eigen::Lower>().rankUpdate(A, T(-1));
}

// Ctrl-C checks between the steps of a long factorization, at most every 50 ms (each takes the GIL).
class InterruptPoll {
 public:
  void operator()() {
    const auto now = std::chrono::steady_clock::now();
    if (now - last_ < std::chrono::milliseconds(50)) return;
    last_ = now;
    throw_if_interrupted();
  }

 private:
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
};

}  // namespace

template <typename T>
int potrf_lower_interruptible(MatrixRef<T> A) {
  // Panels of 512 columns: the trailing updates have an inner dimension large enough for BLAS's full speed and
  // rewrite the trailing matrix n / 512 times (with 256, 12% slower than one potrf call at n = 8000 on two
  // cores); the diagonal blocks' own potrf calls are a small part of the work. Strips of 2048 rows bound one
  // call's time (about 1 s at n = 12000 on two cores) without many calls.
  constexpr Index kPanel = 512, kStrip = 2048, kOneCall = 2048;
  const Index n = A.rows();
  throw_if_interrupted();
  if (n <= kOneCall) return potrf_lower<T>(A);
  InterruptPoll poll;
  for (Index k = 0; k < n; k += kPanel) {
    const Index b = std::min(kPanel, n - k), rest = n - k - b;
    const int info = potrf_lower<T>(A.block(k, k, b, b));
    if (info != 0) return as_int(k) + info;
    if (rest == 0) break;
    poll();
    MatrixRef<T> panel = A.block(k + b, k, rest, b);  // L21 = A21 L11^{-T}
    trsm_right_lower_transposed<T>(A.block(k, k, b, b), panel);
    // A22 <- A22 - L21 L21^T, lower triangle, a strip of rows at a time: its diagonal block by syrk, the part
    // left of it by gemm.
    for (Index i0 = 0; i0 < rest; i0 += kStrip) {
      poll();
      const Index w = std::min(kStrip, rest - i0);
      MatrixRef<T> trailing = A.block(k + b, k + b, rest, rest);
      if (i0 > 0) {
        gemm<T>(Op::none, Op::transpose, panel.middleRows(i0, w), panel.topRows(i0), trailing.block(i0, 0, w, i0),
                T(-1), T(1));
      }
      syrk_lower_subtract<T>(panel.middleRows(i0, w), trailing.block(i0, i0, w, w));
    }
  }
  return 0;
}

template <typename T>
void trtri_lower_interruptible(MatrixRef<T> L) {
  constexpr Index kBlock = 256, kOneCall = 2048;
  const Index n = L.rows();
  throw_if_interrupted();
  if (n <= kOneCall) return trtri_lower<T>(L);
  InterruptPoll poll;
  // Block columns from the last: with the trailing block M22 = L22^{-1} done, the block column below the
  // diagonal block becomes -M22 L21 L11^{-1}, then L11 becomes L11^{-1}.
  for (Index j = (n - 1) / kBlock * kBlock; j >= 0; j -= kBlock) {
    poll();
    const Index b = std::min(kBlock, n - j), rest = n - j - b;
    if (rest > 0) {
      MatrixRef<T> panel = L.block(j + b, j, rest, b);
      trmm_left_lower<T>(L.block(j + b, j + b, rest, rest), panel);
      trsm_right_lower_negated<T>(L.block(j, j, b, b), panel);
    }
    trtri_lower<T>(L.block(j, j, b, b));
  }
}

template <typename T>
void potrs_lower(const ConstMatrixRef<T>& L, Eigen::Ref<Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>> B) {
  int n = as_int(L.rows()), nrhs = as_int(B.cols());
  if (n == 0 || nrhs == 0) return;
  if (auto potrs_fn = use_external() ? routines<T>().potrs : nullptr) {
    char uplo = 'U';
    int lda = as_int(L.outerStride()), ldb = as_int(B.outerStride()), info = 0;
    potrs_fn(&uplo, &n, &nrhs, const_cast<T*>(L.data()), &lda, B.data(), &ldb, &info);
    require(info == 0, "potrs: LAPACK failed with info=" + std::to_string(info));
    return;
  }
  const auto lower = L.template triangularView<Eigen::Lower>();
  lower.solveInPlace(B);
  lower.transpose().solveInPlace(B);
}

template <typename T>
void trtri_lower(MatrixRef<T> L) {
  int n = as_int(L.rows());
  if (n == 0) return;
  if (auto trtri_fn = use_external() ? routines<T>().trtri : nullptr) {
    char uplo = 'U', diag = 'N';
    int lda = as_int(L.outerStride()), info = 0;
    trtri_fn(&uplo, &diag, &n, L.data(), &lda, &info);
    require(info == 0, "trtri: the factor is singular at column " + std::to_string(info));
    return;
  }
  RowMatrix<T> inverse = RowMatrix<T>::Identity(L.rows(), L.cols());
  L.template triangularView<Eigen::Lower>().solveInPlace(inverse);
  L.template triangularView<Eigen::Lower>() = inverse;
}

#define RKM_INSTANTIATE_BLAS(T)                                                                            \
  template Routines<T>& routines<T>();                                                                     \
  template bool external_available<T>();                                                                   \
  template void gemm<T>(Op, Op, const ConstMatrixRef<T>&, const ConstMatrixRef<T>&, MatrixRef<T>, T, T);   \
  template void syevd<T>(RowMatrix<T>&, Vector<T>&, RowMatrix<T>&);                                       \
  template int potrf_lower<T>(MatrixRef<T>);                                                               \
  template int potrf_lower_interruptible<T>(MatrixRef<T>);                                                 \
  template void potrs_lower<T>(const ConstMatrixRef<T>&, Eigen::Ref<Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>>); \
  template void trtri_lower<T>(MatrixRef<T>);                                                              \
  template void trtri_lower_interruptible<T>(MatrixRef<T>);

RKM_INSTANTIATE_BLAS(float)
RKM_INSTANTIATE_BLAS(double)

}  // namespace rkm::blas
