// Dense linear-algebra primitives on row-major Eigen views.
//
// Eigen's own GEMM is compiled for the baseline instruction set of a portable wheel (SSE2), while the
// OpenBLAS that SciPy ships picks AVX2/AVX-512 kernels at run time and is 2-4x faster on the large products
// that dominate kernel builds and block eigensolvers. The bindings therefore register SciPy's exported
// BLAS/LAPACK routines (scipy.linalg.cython_blas / cython_lapack) here; without them every primitive falls
// back to Eigen, so the core never depends on Python.
#pragma once

#include "core/common.hpp"

namespace rkm::blas {

// Fortran BLAS/LAPACK signatures as exported by SciPy (LP64 integers).
template <typename T>
struct Routines {
  using gemm_t = void (*)(char*, char*, int*, int*, int*, T*, T*, int*, T*, int*, T*, T*, int*);
  using syevd_t = void (*)(char*, char*, int*, T*, int*, T*, T*, int*, int*, int*, int*);
  using potrf_t = void (*)(char*, int*, T*, int*, int*);
  using potrs_t = void (*)(char*, int*, int*, T*, int*, T*, int*, int*);
  using trtri_t = void (*)(char*, char*, int*, T*, int*, int*);
  using trsm_t = void (*)(char*, char*, char*, char*, int*, int*, T*, T*, int*, T*, int*);
  using trmm_t = trsm_t;  // the same arguments
  using syrk_t = void (*)(char*, char*, int*, int*, T*, T*, int*, T*, T*, int*);
  gemm_t gemm = nullptr;
  syevd_t syevd = nullptr;
  potrf_t potrf = nullptr;
  potrs_t potrs = nullptr;
  trtri_t trtri = nullptr;
  trsm_t trsm = nullptr;
  trmm_t trmm = nullptr;
  syrk_t syrk = nullptr;
};

template <typename T>
Routines<T>& routines();

// The BLAS library's own (process-wide) thread count, where the bindings found its controls: OpenBLAS's
// openblas_get_num_threads / openblas_set_num_threads. Unset, the core leaves the count alone.
struct ThreadControls {
  int (*get)() = nullptr;
  void (*set)(int) = nullptr;
};
ThreadControls& thread_controls();

// While alive, BLAS runs on one thread (where its controls are known). The core's OpenMP teams call BLAS from
// each of their threads: a multi-threaded BLAS nested in them makes the callers wait on one pool whose
// threads spin on the cores the team needs (the matrix-free kernel product took 2.2x as long, N = 10 000,
// 2 cores). for_each_item holds one around its items, whatever the team's size. The count is the process's:
// the first scope to open records it and the last to close restores it, so overlapping scopes of concurrent
// calls leave it as they found it; meanwhile other threads' BLAS calls run single-threaded (slower, never
// wrong). Construct outside parallel regions only.
class SingleThreadedScope {
 public:
  explicit SingleThreadedScope(bool active);
  ~SingleThreadedScope();
  SingleThreadedScope(const SingleThreadedScope&) = delete;
  SingleThreadedScope& operator=(const SingleThreadedScope&) = delete;

 private:
  bool engaged_ = false;
};
// The count the last open scope will restore, or 0 when none is open: what another controller of the same
// library (the Python layer's BLAS limits) must take for the current count.
int scoped_thread_count();
// Another controller changed the count to `threads`: with scopes open, that becomes the count they restore
// and the library goes back to one thread; with none open, nothing happens.
void rebase_scoped_thread_count(int threads);

// When false, registered routines are ignored and Eigen is used (for testing both paths).
void set_use_external(bool use);
bool use_external();
template <typename T>
bool external_available();

enum class Op { none, transpose };

// C = alpha * op_a(A) * op_b(B) + beta * C on row-major views.
template <typename T>
void gemm(Op op_a, Op op_b, const ConstMatrixRef<T>& A, const ConstMatrixRef<T>& B, MatrixRef<T> C, T alpha, T beta);
// All eigenpairs of the symmetric matrix A (overwritten): ascending eigenvalues w, eigenvectors in the
// columns of V.
template <typename T>
void syevd(RowMatrix<T>& A, Vector<T>& w, RowMatrix<T>& V);

// Cholesky factorization A = L L^T of the symmetric positive definite A, given by its lower triangle and
// overwritten there by L (the strict upper triangle is neither read nor written). Returns 0, or the order
// k >= 1 of the first leading minor that is not positive definite (LAPACK's info).
template <typename T>
int potrf_lower(MatrixRef<T> A);
// The same factorization in panels of columns (right-looking: the diagonal block by potrf, the panel below it
// by a triangular solve, the trailing matrix updated by syrk and gemm in strips of rows), with
// throw_if_interrupted() between the steps, at most every 50 ms: one LAPACK call on a 12000 x 12000 matrix
// ignored Ctrl-C for half a minute. Small matrices go through one potrf call. Call only from the thread that
// entered the core, outside OpenMP regions. Agrees with potrf_lower to rounding and runs about as fast.
template <typename T>
int potrf_lower_interruptible(MatrixRef<T> A);
// Solves A X = B in place for the factor L that potrf_lower left in A; B is column-major (one column per
// right-hand side).
template <typename T>
void potrs_lower(const ConstMatrixRef<T>& L, Eigen::Ref<Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>> B);
// Replaces the lower-triangular factor L (in the lower triangle of A) by L^{-1}.
template <typename T>
void trtri_lower(MatrixRef<T> L);
// The same in block columns of 256, last to first (the trailing inverse times the panel, a triangular solve by
// the diagonal block, the block's own inverse), with throw_if_interrupted() between them, at most every 50 ms.
// Small matrices go through one trtri call. Call only from the thread that entered the core.
template <typename T>
void trtri_lower_interruptible(MatrixRef<T> L);

}  // namespace rkm::blas
