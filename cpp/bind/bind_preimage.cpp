#include "bind/bind.hpp"

#include "core/preimage.hpp"

namespace rkm::bind {

namespace {

template <typename T>
RowMatrix<T> smoother_preimage_py(ConstMatrixRef<T> latents, ConstMatrixRef<T> projection, ConstVectorRef<T> offsets,
                                  ConstMatrixRef<T> X_train, Eigen::Index n_neighbors, std::optional<int> n_threads) {
  const int threads = thread_count(n_threads);
  // Safe without the GIL: only views of NumPy buffers the caller keeps alive, and the result.
  py::gil_scoped_release release;
  return with_memory_context(
      [&] {
        return "decoding " + std::to_string(latents.rows()) + " latents by the kernel smoother over " +
               std::to_string(projection.rows()) + " training points (a band of similarities per thread)";
      },
      [&] {
        RowMatrix<T> out(latents.rows(), X_train.cols());
        smoother_preimage<T>(latents, projection, offsets, X_train, n_neighbors, out, threads);
        return out;
      });
}

template <typename T>
void def_preimage(py::module_& m) {
  m.def("smoother_preimage", &smoother_preimage_py<T>, py::arg("latents").noconvert(),
        py::arg("projection").noconvert(), py::arg("offsets").noconvert(), py::arg("X_train").noconvert(),
        py::arg("n_neighbors"), py::arg("n_threads") = py::none(),
        "Kernel-smoother pre-images (Gen-RKM eq. 8) of latents (n, s), shape (n, d): each the weighted mean of the "
        "n_neighbors rows of X_train (N, d) of largest similarity latents @ projection.T + offsets (projection "
        "(N, s), offsets (N,)), weighted by their similarity above the next one's, scaled to sum 1. Formed a band "
        "of rows at a time.");
}

}  // namespace

void bind_preimage(py::module_& m) {
  m.def("smoother_band_rows", &smoother_band_rows, py::arg("n_train"), py::arg("value_bytes"),
        "Rows of latents per band of smoother_preimage for n_train training points and similarities of "
        "value_bytes each (8: float64; 4: float32 and the float32 screen of float64).");
  def_preimage<double>(m);
  def_preimage<float>(m);
}

}  // namespace rkm::bind
