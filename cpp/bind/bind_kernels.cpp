#include "bind/bind.hpp"

#include "core/kernels.hpp"

namespace rkm::bind {

namespace {

template <typename T>
py::array_t<T> kernel_matrix_py(ConstMatrixRef<T> X, std::optional<ConstMatrixRef<T>> Y, const std::string& kernel,
                                std::optional<double> gamma, double degree, double coef0,
                                std::optional<int> n_threads) {
  KernelSpec spec;
  spec.type = parse_kernel(kernel);
  spec.gamma = gamma.value_or(X.cols() > 0 ? 1.0 / static_cast<double>(X.cols()) : 1.0);
  spec.degree = degree;
  spec.coef0 = coef0;
  const int threads = thread_count(n_threads);
  const Eigen::Index n_y = Y ? Y->rows() : X.rows();
  // NumPy allocates the result: it asks the OS for transparent huge pages on large arrays, which makes
  // the first touch of an N x N matrix several times cheaper than Eigen's plain malloc.
  py::array_t<T> out({X.rows(), n_y});
  Eigen::Map<RowMatrix<T>> view(out.mutable_data(), X.rows(), n_y);
  {
    // Safe without the GIL: only Eigen views of NumPy buffers that stay referenced until we return.
    py::gil_scoped_release release;
    kernel_matrix_into<T>(X, Y ? &*Y : nullptr, spec, view, threads);
  }
  return out;
}

template <typename T>
void def_kernel_matrix(py::module_& m) {
  m.def("kernel_matrix", &kernel_matrix_py<T>, py::arg("X").noconvert(), py::arg("Y").noconvert() = py::none(),
        py::arg("kernel") = "rbf", py::arg("gamma") = py::none(), py::arg("degree") = 3.0,
        py::arg("coef0") = 1.0, py::arg("n_threads") = py::none(),
        "Kernel matrix K(X, Y) (Y=None: K(X, X), built from one triangle). C-contiguous float32 or float64 "
        "inputs of one dtype; gamma=None means 1/n_features.");
}

}  // namespace

void bind_kernels(py::module_& m) {
  def_kernel_matrix<double>(m);
  def_kernel_matrix<float>(m);
}

}  // namespace rkm::bind
