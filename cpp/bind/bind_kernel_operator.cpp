#include "bind/bind.hpp"

#include "core/kernel_operator.hpp"

namespace rkm::bind {

namespace {

template <typename T>
RowMatrix<T> kernel_product_py(ConstMatrixRef<T> X, std::optional<ConstMatrixRef<T>> Y, ConstMatrixRef<T> B,
                               const std::string& kernel, std::optional<double> gamma, double degree, double coef0,
                               std::optional<int> n_threads) {
  const KernelSpec spec = make_spec(kernel, gamma, X.cols(), degree, coef0);
  const int threads = thread_count(n_threads);
  RowMatrix<T> out(X.rows(), B.cols());
  // Safe without the GIL: only views of NumPy buffers the caller keeps alive, and out.
  py::gil_scoped_release release;
  kernel_product<T>(X, Y ? &*Y : nullptr, spec, B, out, threads);
  return out;
}

template <typename T>
py::tuple kernel_top_eigsh_py(ConstMatrixRef<T> X, const std::string& kernel, std::optional<double> gamma,
                              double degree, double coef0, bool center, int n_components, ConstMatrixRef<T> start,
                              std::optional<double> tol, std::optional<int> max_iter, std::optional<int> n_threads,
                              py::object progress) {
  const KernelSpec spec = make_spec(kernel, gamma, X.cols(), degree, coef0);
  const int threads = thread_count(n_threads);
  const std::function<void(int)> on_product = product_progress(progress);
  KernelEigenResult<T> r;
  {
    // Safe without the GIL: only views of NumPy buffers the caller keeps alive.
    py::gil_scoped_release release;
    r = kernel_top_eigsh<T>(X, spec, center, n_components, start, tol.value_or(default_tol<T>()),
                            max_iter.value_or(default_max_iter(n_components, start.cols())), threads, on_product);
  }
  return kernel_eigen_tuple<T>(std::move(r));
}

template <typename T>
void def_kernel_operator(py::module_& m) {
  m.def("kernel_product", &kernel_product_py<T>, py::arg("X").noconvert(), py::arg("Y").noconvert(),
        py::arg("B").noconvert(), py::arg("kernel") = "rbf", py::arg("gamma") = py::none(),
        py::arg("degree") = 3.0, py::arg("coef0") = 1.0, py::arg("n_threads") = py::none(),
        "K(X, Y) @ B (Y=None: K(X, X) @ B) with the kernel evaluated in tiles and never stored.");
  m.def("kernel_top_eigsh", &kernel_top_eigsh_py<T>, py::arg("X").noconvert(), py::arg("kernel"), py::arg("gamma"),
        py::arg("degree"), py::arg("coef0"), py::arg("center"), py::arg("n_components"), py::arg("start").noconvert(),
        py::arg("tol") = py::none(), py::arg("max_iter") = py::none(), py::arg("n_threads") = py::none(),
        py::arg("progress") = py::none(),
        "Largest eigenpairs of the (centred) kernel matrix of X without storing it; progress(k), when given, "
        "is called after the k-th block product. Returns (w, V, residuals, n_iter, converged, column_means, "
        "grand_mean).");
}

}  // namespace

std::function<void(int)> product_progress(const py::object& progress) {
  if (progress.is_none()) return {};
  // By reference: the caller's argument outlives the solve, and copies of a py::object need the GIL.
  return [&progress](int products) {
    py::gil_scoped_acquire gil;
    progress(products);
  };
}

void bind_kernel_operator(py::module_& m) {
  m.def("kernel_product_workspace_bytes", &kernel_product_workspace_bytes, py::arg("n_rows"), py::arg("n_columns"),
        py::arg("n_features"), py::arg("b"), py::arg("n_threads"), py::arg("symmetric"),
        "Bytes kernel_product and each kernel_top_eigsh product allocate besides their inputs and output.");
  def_kernel_operator<double>(m);
  def_kernel_operator<float>(m);
}

}  // namespace rkm::bind
