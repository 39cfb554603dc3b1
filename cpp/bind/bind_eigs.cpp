#include "bind/bind.hpp"

#include "core/eigs.hpp"
#include "core/products.hpp"

#include <algorithm>

namespace rkm::bind {

// Block products allowed by default: enough for slowly converging spectra, growing with the number of
// blocks the wanted pairs span.
int default_max_iter(int n_components, Eigen::Index block_columns) {
  const Eigen::Index width = std::max<Eigen::Index>(block_columns, 1);  // a bad start is rejected later
  return static_cast<int>(100 + 10 * ((n_components + width - 1) / width));
}

namespace {

template <typename T>
py::tuple result_tuple(EigenResult<T>&& r) {
  return py::make_tuple(std::move(r.values), std::move(r.vectors), std::move(r.residuals), r.n_iter, r.converged);
}

template <typename T>
py::tuple eigh_py(ConstMatrixRef<T> A, std::optional<int> n_threads) {
  const int threads = thread_count(n_threads);
  Vector<T> w;
  RowMatrix<T> V;
  {
    // Safe without the GIL: A is a view of a NumPy buffer the caller keeps alive.
    py::gil_scoped_release release;
    with_memory_context(
        [&] { return "computing all eigenpairs of a dense matrix: its eigenvectors and work space hold " +
                     square_matrix_text(A.rows(), sizeof(T)) + " each"; },
        [&] { dense_eigh<T>(A, w, V, threads); });
  }
  return py::make_tuple(std::move(w), std::move(V));
}

template <typename T>
py::tuple top_eigsh_py(ConstMatrixRef<T> A, int n_components, ConstMatrixRef<T> start, std::optional<double> tol,
                       std::optional<int> max_iter, std::optional<int> n_threads) {
  const int threads = thread_count(n_threads);
  EigenResult<T> result;
  {
    // Safe without the GIL: only views of NumPy buffers the caller keeps alive.
    py::gil_scoped_release release;
    result = top_eigsh<T>(A, n_components, start, tol.value_or(default_tol<T>()),
                          max_iter.value_or(default_max_iter(n_components, start.cols())), threads);
  }
  return result_tuple<T>(std::move(result));
}

// The product callback runs Python code, so it takes the GIL back for the duration of each call.
template <typename T>
py::tuple top_eigsh_operator_py(py::function matmat, Eigen::Index n, int n_components, ConstMatrixRef<T> start,
                                std::optional<double> tol, std::optional<int> max_iter,
                                std::optional<int> n_threads) {
  const int threads = thread_count(n_threads);
  const BlockProduct<T> apply = [&matmat](const ConstMatrixRef<T>& X, MatrixRef<T> Y) {
    py::gil_scoped_acquire gil;
    const RowMatrix<T> block = X;
    py::object product = matmat(block);
    const auto array = py::array_t<T, py::array::c_style | py::array::forcecast>::ensure(product);
    if (!array || array.ndim() != 2 || array.shape(0) != Y.rows() || array.shape(1) != Y.cols())
      throw std::invalid_argument("matmat: must return an array of shape (n, b) for an (n, b) block");
    Y = Eigen::Map<const RowMatrix<T>>(array.data(), Y.rows(), Y.cols());
  };
  EigenResult<T> result;
  {
    py::gil_scoped_release release;
    result = top_eigsh<T>(apply, n, n_components, start, tol.value_or(default_tol<T>()),
                          max_iter.value_or(default_max_iter(n_components, start.cols())), threads);
  }
  return result_tuple<T>(std::move(result));
}

template <typename T>
RowMatrix<T> transposed_product_py(ConstMatrixRef<T> A, ConstMatrixRef<T> B, std::optional<int> n_threads) {
  const int threads = thread_count(n_threads);
  RowMatrix<T> C(A.cols(), B.cols());
  // Safe without the GIL: only views of NumPy buffers the caller keeps alive, and C.
  py::gil_scoped_release release;
  transposed_product<T>(A, B, C, threads);
  return C;
}

template <typename T>
RowMatrix<T> block_product_py(ConstMatrixRef<T> A, ConstMatrixRef<T> X, std::optional<int> n_threads,
                              bool symmetric) {
  const int threads = thread_count(n_threads);
  RowMatrix<T> Y(A.rows(), X.cols());
  // Safe without the GIL: only views of NumPy buffers the caller keeps alive, and Y.
  py::gil_scoped_release release;
  block_product<T>(A, X, Y, threads, symmetric);
  return Y;
}

template <typename T>
void def_eigs(py::module_& m) {
  m.def("block_product", &block_product_py<T>, py::arg("A").noconvert(), py::arg("X").noconvert(),
        py::arg("n_threads") = py::none(), py::arg("symmetric") = false,
        "A @ X for a large A and a thin block X (the Krylov solver's product); with symmetric=True, A is "
        "taken as symmetric and only its lower triangle is read.");
  m.def("transposed_product", &transposed_product_py<T>, py::arg("A").noconvert(), py::arg("B").noconvert(),
        py::arg("n_threads") = py::none(),
        "A.T @ B for a tall A and a thin block B (the Krylov solver's projections on its basis).");
  m.def("eigh", &eigh_py<T>, py::arg("A").noconvert(), py::arg("n_threads") = py::none(),
        "All eigenpairs (w descending, V columns, sign-fixed) of a symmetric matrix.");
  m.def("top_eigsh", &top_eigsh_py<T>, py::arg("A").noconvert(), py::arg("n_components"),
        py::arg("start").noconvert(), py::arg("tol") = py::none(), py::arg("max_iter") = py::none(),
        py::arg("n_threads") = py::none(),
        "Largest eigenpairs of a symmetric matrix by restarted block Krylov iteration from the block `start` "
        "(b >= 1 columns, the width of every product with A). Returns (w, V, residuals, n_iter, converged).");
  m.def("top_eigsh_operator", &top_eigsh_operator_py<T>, py::arg("matmat"), py::arg("n"), py::arg("n_components"),
        py::arg("start").noconvert(), py::arg("tol") = py::none(), py::arg("max_iter") = py::none(),
        py::arg("n_threads") = py::none(),
        "top_eigsh for an operator given by matmat(B) -> A @ B; the dtype follows `start`.");
}

}  // namespace

void bind_eigs(py::module_& m) {
  m.attr("THIN_BLOCK_COLUMNS") = static_cast<int>(kThinBlockColumns);
  m.def("default_max_iter", &default_max_iter, py::arg("n_components"), py::arg("block_columns"),
        "The block products top_eigsh allows when max_iter is None.");
  m.def("krylov_workspace_columns", &krylov_workspace_columns, py::arg("n_components"), py::arg("block_columns"),
        "Columns of n-vectors (in the working dtype) that top_eigsh allocates besides the operator.");
  def_eigs<double>(m);
  def_eigs<float>(m);
}

}  // namespace rkm::bind
