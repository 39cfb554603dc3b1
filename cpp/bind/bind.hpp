// Shared pieces of the pybind11 glue; the numerics live in cpp/core.
#pragma once

#include <pybind11/eigen.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "core/common.hpp"
#include "core/kernel_operator.hpp"
#include "core/kernels.hpp"

#include <new>
#include <optional>
#include <stdexcept>
#include <string>

namespace rkm::bind {

namespace py = pybind11;

// scikit-learn's meaning: None -> OpenMP's current maximum, k > 0 -> k, -1 -> all cores, -k -> all but k-1;
// counts beyond the cores available are clamped to them.
int thread_count(const std::optional<int>& n_threads);

// A failed allocation of the core with what it was for; the module's translator raises MemoryError with the
// message (a bare std::bad_alloc becomes a MemoryError with a generic one).
struct out_of_memory : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// What every out-of-memory message ends with.
inline const char* memory_advice() {
  return "use fewer samples, float32, or a matrix-free or approximate solver (e.g. Nystroem or random features)";
}

// "n x n float64 values (x.y GiB)": the size of a square work matrix, for the messages.
std::string square_matrix_text(Eigen::Index n, std::size_t bytes_per_value);

// Runs body(); a std::bad_alloc thrown by it becomes out_of_memory("rkm core: out of memory while " + task()
// + "; " + advice). task is called only then.
template <typename Task, typename Body>
auto with_memory_context(const Task& task, Body&& body) -> decltype(body()) {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    throw out_of_memory("rkm core: out of memory while " + task() + "; " + memory_advice());
  }
}

// A kernel spec from the Python arguments; gamma None means 1 / n_features.
KernelSpec make_spec(const std::string& kernel, std::optional<double> gamma, Eigen::Index n_features, double degree,
                     double coef0);

// The Krylov solver's defaults when tol / max_iter are None.
template <typename T>
double default_tol() {
  return sizeof(T) == sizeof(float) ? 1e-4 : 1e-10;
}
int default_max_iter(int n_components, Eigen::Index block_columns);

// The on_product callback of a kernel eigensolver from a Python progress(k) (None: none), valid while `progress`
// is. It runs between products on the thread that entered the core, so it takes the GIL back for the call.
std::function<void(int)> product_progress(const py::object& progress);

// (w, V, residuals, n_iter, converged, column_means, grand_mean), what the kernel eigensolvers return to Python.
template <typename T>
py::tuple kernel_eigen_tuple(KernelEigenResult<T>&& r) {
  return py::make_tuple(std::move(r.eigen.values), std::move(r.eigen.vectors), std::move(r.eigen.residuals),
                        r.eigen.n_iter, r.eigen.converged, std::move(r.column_means), r.grand_mean);
}

void bind_kernels(py::module_& m);
void bind_kernel_operator(py::module_& m);
void bind_features(py::module_& m);
void bind_lssvm(py::module_& m);
void bind_deep(py::module_& m);
void bind_center(py::module_& m);
void bind_eigs(py::module_& m);
void bind_config(py::module_& m);
void bind_preimage(py::module_& m);
void bind_cuda(py::module_& m);

}  // namespace rkm::bind
