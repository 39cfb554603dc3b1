#include "bind/bind.hpp"

#include "core/center.hpp"

namespace rkm::bind {

namespace {

template <typename T>
py::tuple center_kernel_py(MatrixRef<T> K, std::optional<int> n_threads, bool lower_only) {
  const int threads = thread_count(n_threads);
  std::pair<Vector<T>, double> means;
  {
    // Safe without the GIL: K is a view of a NumPy buffer the caller keeps alive.
    py::gil_scoped_release release;
    means = center_kernel<T>(K, threads, lower_only);
  }
  return py::make_tuple(std::move(means.first), means.second);
}

template <typename T>
void center_kernel_rows_py(MatrixRef<T> K_rows, ConstVectorRef<T> column_means, double grand_mean,
                           std::optional<int> n_threads) {
  const int threads = thread_count(n_threads);
  // Safe without the GIL: only views of NumPy buffers the caller keeps alive.
  py::gil_scoped_release release;
  center_kernel_rows<T>(K_rows, column_means, grand_mean, threads);
}

template <typename T>
void def_center(py::module_& m) {
  m.def("center_kernel", &center_kernel_py<T>, py::arg("K").noconvert(), py::arg("n_threads") = py::none(),
        py::arg("lower_only") = false,
        "Double-centre the square kernel matrix K in place (writeable, C-contiguous float32/float64). "
        "Returns (column_means, grand_mean) of the original K. lower_only=True takes K as symmetric, given by "
        "its lower triangle, and reads and centres only that triangle.");
  m.def("center_kernel_rows", &center_kernel_rows_py<T>, py::arg("K_rows").noconvert(),
        py::arg("column_means").noconvert(), py::arg("grand_mean"), py::arg("n_threads") = py::none(),
        "Centre test kernel rows k(x*, X_train) in place with the training column means and grand mean.");
}

}  // namespace

void bind_center(py::module_& m) {
  def_center<double>(m);
  def_center<float>(m);
}

}  // namespace rkm::bind
