#include "bind/bind.hpp"

#include <thread>

namespace rkm::bind {

void bind_stiefel(py::module_& m);
void bind_constr_drkm(py::module_& m);
void bind_kae(py::module_& m);

int thread_count(const std::optional<int>& n_threads) {
  if (!n_threads.has_value()) return 0;
  const int value = *n_threads;
  if (value == 0) throw std::invalid_argument("n_threads: must be None, a positive count or negative (-1 = all)");
  if (value > 0) return value;
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::max(1, cores + 1 + value);
}

namespace {
// Runs between blocks of long loops on the thread that entered the core.
bool python_interrupt_pending() {
  py::gil_scoped_acquire gil;
  if (PyErr_CheckSignals() == 0) return false;
  PyErr_Clear();  // re-raised as KeyboardInterrupt by the translator below
  return true;
}
}  // namespace

}  // namespace rkm::bind

PYBIND11_MODULE(_core, m) {
  namespace py = pybind11;
  m.doc() = "rkm's compiled core: kernel matrices, centering and symmetric eigensolvers";
  m.attr("__version__") = RKM_VERSION;
  py::register_exception_translator([](std::exception_ptr error) {
    try {
      if (error) std::rethrow_exception(error);
    } catch (const rkm::interrupted_error&) {
      PyErr_SetNone(PyExc_KeyboardInterrupt);
    }
  });
  rkm::set_interrupt_checker(&rkm::bind::python_interrupt_pending);
  rkm::bind::bind_config(m);
  rkm::bind::bind_kernels(m);
  rkm::bind::bind_center(m);
  rkm::bind::bind_eigs(m);
  rkm::bind::bind_kernel_operator(m);
  rkm::bind::bind_features(m);
  rkm::bind::bind_lssvm(m);
  rkm::bind::bind_deep(m);
  rkm::bind::bind_stiefel(m);  // before bind_constr_drkm: it registers the base StiefelObjective
  rkm::bind::bind_constr_drkm(m);
  rkm::bind::bind_kae(m);
}
