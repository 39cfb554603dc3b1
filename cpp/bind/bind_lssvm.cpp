#include "bind/bind.hpp"

#include "core/blas.hpp"
#include "core/lssvm.hpp"

namespace rkm::bind {

namespace {

template <typename T>
py::tuple solution_tuple(LSSVMDualSolution<T>&& s, bool loo) {
  py::object residuals = loo ? py::cast(std::move(s.loo_residuals)) : py::none();
  return py::make_tuple(std::move(s.H), std::move(s.b), residuals);
}

template <typename T>
py::tuple lssvm_dual_fit_py(ConstMatrixRef<T> X, ConstMatrixRef<T> Y, const std::string& kernel,
                            std::optional<double> gamma, double degree, double coef0, double eta, double lam,
                            bool fit_intercept, bool loo, std::optional<int> n_threads) {
  const KernelSpec spec = make_spec(kernel, gamma, X.cols(), degree, coef0);
  const int threads = thread_count(n_threads);
  LSSVMDualSolution<T> s;
  {
    // Safe without the GIL: only views of NumPy buffers the caller keeps alive.
    py::gil_scoped_release release;
    s = with_memory_context([&] { return "fitting an LS-SVM: its kernel matrix holds " +
                                         square_matrix_text(X.rows(), sizeof(T)); },
                            [&] { return lssvm_dual_fit<T>(X, spec, Y, eta, lam, fit_intercept, loo, threads); });
  }
  return solution_tuple<T>(std::move(s), loo);
}

template <typename T>
py::tuple lssvm_dual_solve_py(MatrixRef<T> K, ConstMatrixRef<T> Y, double eta, double lam, bool fit_intercept,
                              bool loo, std::optional<int> n_threads) {
  const int threads = thread_count(n_threads);
  LSSVMDualSolution<T> s;
  {
    // Safe without the GIL: only views of NumPy buffers the caller keeps alive.
    py::gil_scoped_release release;
    s = with_memory_context([&] { return "solving an LS-SVM system of " + std::to_string(K.rows()) + " samples"; },
                            [&] { return lssvm_dual_solve<T>(K, Y, eta, lam, fit_intercept, loo, threads); });
  }
  return solution_tuple<T>(std::move(s), loo);
}

py::tuple lssvm_dual_fit_mixed_py(ConstMatrixRef<double> X, ConstMatrixRef<double> Y, const std::string& kernel,
                                  std::optional<double> gamma, double degree, double coef0, double eta, double lam,
                                  bool fit_intercept, std::optional<int> n_threads) {
  const KernelSpec spec = make_spec(kernel, gamma, X.cols(), degree, coef0);
  const int threads = thread_count(n_threads);
  LSSVMRefinedSolution<double> s;
  {
    // Safe without the GIL: only views of NumPy buffers the caller keeps alive.
    py::gil_scoped_release release;
    s = with_memory_context(
        [&] {
          return "fitting an LS-SVM in mixed precision: its float32 factor holds " +
                 square_matrix_text(X.rows(), sizeof(float)) + " (and a float64 fallback " +
                 square_matrix_text(X.rows(), sizeof(double)) + ")";
        },
        [&] { return lssvm_dual_fit_mixed(X, spec, Y, eta, lam, fit_intercept, threads); });
  }
  return py::make_tuple(std::move(s.solution.H), std::move(s.solution.b), s.iterations);
}

// The LS-SVM's Cholesky factorization alone (tests and bench/): in panels with Ctrl-C checks, or one LAPACK call.
template <typename T>
int cholesky_lower_py(MatrixRef<T> A, bool in_panels) {
  require(A.rows() == A.cols(), "A: must be square");
  // Safe without the GIL: A is a view of a NumPy buffer the caller keeps alive.
  py::gil_scoped_release release;
  return in_panels ? blas::potrf_lower_interruptible<T>(A) : blas::potrf_lower<T>(A);
}

template <typename T>
void def_lssvm(py::module_& m) {
  m.def("_cholesky_lower", &cholesky_lower_py<T>, py::arg("A").noconvert(), py::arg("in_panels") = true,
        "Cholesky factor of the symmetric positive definite A (C-contiguous, writeable) in place of its lower "
        "triangle, as lssvm_dual_solve factorizes; returns LAPACK's info (0, or the first failing column). "
        "in_panels: the panel algorithm with Ctrl-C checks (what the fits run), else one potrf call. For tests "
        "and benchmarks.");
  m.def("lssvm_dual_fit", &lssvm_dual_fit_py<T>, py::arg("X").noconvert(), py::arg("Y").noconvert(),
        py::arg("kernel") = "rbf", py::arg("gamma") = py::none(), py::arg("degree") = 3.0, py::arg("coef0") = 1.0,
        py::arg("eta") = 1.0, py::arg("lam") = 1.0, py::arg("fit_intercept") = true, py::arg("loo") = false,
        py::arg("n_threads") = py::none(),
        "LS-SVM dual system (Suykens 2017, eq. 3.16) for the kernel matrix of X: one Cholesky factorization of "
        "(1/eta) K + lam I and the bias by the Schur complement. Returns (H, b, loo_residuals or None).");
  m.def("lssvm_dual_solve", &lssvm_dual_solve_py<T>, py::arg("K").noconvert(), py::arg("Y").noconvert(),
        py::arg("eta") = 1.0, py::arg("lam") = 1.0, py::arg("fit_intercept") = true, py::arg("loo") = false,
        py::arg("n_threads") = py::none(),
        "The same for a given kernel matrix, whose lower triangle is read and overwritten (pass a copy).");
}

}  // namespace

void bind_lssvm(py::module_& m) {
  m.def("lssvm_dual_fit_mixed", &lssvm_dual_fit_mixed_py, py::arg("X").noconvert(), py::arg("Y").noconvert(),
        py::arg("kernel") = "rbf", py::arg("gamma") = py::none(), py::arg("degree") = 3.0, py::arg("coef0") = 1.0,
        py::arg("eta") = 1.0, py::arg("lam") = 1.0, py::arg("fit_intercept") = true, py::arg("n_threads") = py::none(),
        "lssvm_dual_fit for float64 data by a float32 factorization refined to float64 accuracy (conjugate "
        "gradients on the exact system, products in float64 tiles). Returns (H, b, iterations); iterations = -1 "
        "when it fell back to the float64 factorization.");
  def_lssvm<double>(m);
  def_lssvm<float>(m);
}

}  // namespace rkm::bind
