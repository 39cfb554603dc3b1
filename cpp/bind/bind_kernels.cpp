#include "bind/bind.hpp"

#include "core/kernels.hpp"
#include "core/vector_math.hpp"

namespace rkm::bind {

KernelSpec make_spec(const std::string& kernel, std::optional<double> gamma, Eigen::Index n_features, double degree,
                     double coef0) {
  KernelSpec spec;
  spec.type = parse_kernel(kernel);
  spec.gamma = gamma.value_or(n_features > 0 ? 1.0 / static_cast<double>(n_features) : 1.0);
  spec.degree = degree;
  spec.coef0 = coef0;
  return spec;
}

namespace {

template <typename T>
py::array_t<T> kernel_matrix_py(ConstMatrixRef<T> X, std::optional<ConstMatrixRef<T>> Y, const std::string& kernel,
                                std::optional<double> gamma, double degree, double coef0,
                                std::optional<int> n_threads, bool lower_only) {
  const KernelSpec spec = make_spec(kernel, gamma, X.cols(), degree, coef0);
  const int threads = thread_count(n_threads);
  const Eigen::Index n_y = Y ? Y->rows() : X.rows();
  // NumPy allocates the result: it asks the OS for transparent huge pages on large arrays, which makes
  // the first touch of an N x N matrix several times cheaper than Eigen's plain malloc.
  py::array_t<T> out({X.rows(), n_y});
  Eigen::Map<RowMatrix<T>> view(out.mutable_data(), X.rows(), n_y);
  {
    // Safe without the GIL: only Eigen views of NumPy buffers that stay referenced until we return.
    py::gil_scoped_release release;
    kernel_matrix_into<T>(X, Y ? &*Y : nullptr, spec, view, threads, lower_only);
  }
  return out;
}

template <typename T>
RowMatrix<T> kernel_gradient_py(ConstMatrixRef<T> X, ConstMatrixRef<T> Y, ConstMatrixRef<T> W,
                                const std::string& kernel, std::optional<double> gamma, double degree, double coef0,
                                std::optional<int> n_threads) {
  const KernelSpec spec = make_spec(kernel, gamma, X.cols(), degree, coef0);
  const int threads = thread_count(n_threads);
  RowMatrix<T> G(X.rows(), X.cols());
  // Safe without the GIL: only views of NumPy buffers the caller keeps alive, and G.
  py::gil_scoped_release release;
  kernel_gradient_into<T>(X, Y, W, spec, G, threads);
  return G;
}

template <typename T>
void def_kernel_matrix(py::module_& m) {
  m.def("kernel_gradient", &kernel_gradient_py<T>, py::arg("X").noconvert(), py::arg("Y").noconvert(),
        py::arg("W").noconvert(), py::arg("kernel") = "rbf", py::arg("gamma") = py::none(), py::arg("degree") = 3.0,
        py::arg("coef0") = 1.0, py::arg("n_threads") = py::none(),
        "Weighted gradients G_i = sum_j W_ij d/dx k(x, y_j) at x = x_i, shape (n_samples_X, n_features).");
  m.def("kernel_matrix", &kernel_matrix_py<T>, py::arg("X").noconvert(), py::arg("Y").noconvert() = py::none(),
        py::arg("kernel") = "rbf", py::arg("gamma") = py::none(), py::arg("degree") = 3.0,
        py::arg("coef0") = 1.0, py::arg("n_threads") = py::none(), py::arg("lower_only") = false,
        "Kernel matrix K(X, Y) (Y=None: K(X, X), built from one triangle). C-contiguous float32 or float64 "
        "inputs of one dtype; gamma=None means 1/n_features. lower_only=True (with Y=None) writes the lower "
        "triangle only and leaves the rest of the result unspecified.");
}

// exp and cos as the kernels, the KAE and the random Fourier features evaluate them (one thread).
template <void (*Function)(const double*, double*, Eigen::Index)>
py::array_t<double> elementwise_py(py::array_t<double, py::array::c_style | py::array::forcecast> x) {
  py::array_t<double> out(x.request().shape);
  {
    py::gil_scoped_release release;
    Function(x.data(), out.mutable_data(), x.size());
  }
  return out;
}

}  // namespace

void bind_kernels(py::module_& m) {
  m.def("vector_exp", &elementwise_py<vector_exp>, py::arg("x"),
        "exp(x) elementwise in the core's vectorized code (one thread): what its kernels evaluate.");
  m.def("vector_cos", &elementwise_py<vector_cos>, py::arg("x"),
        "cos(x) elementwise in the core's vectorized code (one thread): what its random Fourier features evaluate.");
  m.def("kernel_names", &kernel_names,
        "The canonical names of the core's kernels (cpp/core/kernels.hpp), in order; every kernel argument also "
        "takes the aliases 'polynomial' (poly) and 'gaussian' (rbf).");
  def_kernel_matrix<double>(m);
  def_kernel_matrix<float>(m);
}

}  // namespace rkm::bind
