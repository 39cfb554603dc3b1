#include "bind/bind.hpp"

#include "core/features.hpp"

namespace rkm::bind {

namespace {

template <typename T>
RowMatrix<T> fourier_features_py(ConstMatrixRef<T> X, ConstMatrixRef<T> W, ConstVectorRef<T> offset,
                                 std::optional<int> n_threads) {
  const int threads = thread_count(n_threads);
  RowMatrix<T> out(X.rows(), W.cols());
  // Safe without the GIL: only views of NumPy buffers the caller keeps alive, and out.
  py::gil_scoped_release release;
  fourier_features<T>(X, W, offset, out, threads);
  return out;
}

template <typename T>
void def_features(py::module_& m) {
  m.def("fourier_features", &fourier_features_py<T>, py::arg("X").noconvert(), py::arg("W").noconvert(),
        py::arg("offset").noconvert(), py::arg("n_threads") = py::none(),
        "Random Fourier features sqrt(2 / D) cos(X @ W + offset) for W of shape (d, D).");
}

}  // namespace

void bind_features(py::module_& m) {
  def_features<double>(m);
  def_features<float>(m);
}

}  // namespace rkm::bind
