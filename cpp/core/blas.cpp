#include "core/blas.hpp"

#include <Eigen/Cholesky>
#include <Eigen/Eigenvalues>

#include <algorithm>
#include <atomic>
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

void set_use_external(bool use) { g_use_external.store(use); }
bool use_external() { return g_use_external.load(); }

template <typename T>
bool external_available() {
  const Routines<T>& r = routines<T>();
  return r.gemm != nullptr && r.syevd != nullptr && r.potrf != nullptr && r.potrs != nullptr && r.trtri != nullptr;
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
  template void potrs_lower<T>(const ConstMatrixRef<T>&, Eigen::Ref<Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>>); \
  template void trtri_lower<T>(MatrixRef<T>);

RKM_INSTANTIATE_BLAS(float)
RKM_INSTANTIATE_BLAS(double)

}  // namespace rkm::blas
