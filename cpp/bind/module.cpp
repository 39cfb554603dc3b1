#include "bind/bind.hpp"

#include <cstdio>

namespace rkm::bind {

void bind_stiefel(py::module_& m);
void bind_constr_drkm(py::module_& m);
void bind_kae(py::module_& m);

int thread_count(const std::optional<int>& n_threads) {
  if (!n_threads.has_value()) return 0;
  const int value = *n_threads;
  if (value == 0) throw std::invalid_argument("n_threads: must be None, a positive count or negative (-1 = all)");
  // Counts beyond the processors available are clamped to them (here and again in resolve_threads).
  const int cores = available_cores();
  if (value > 0) return std::min(value, cores);
  return std::max(1, cores + 1 + value);
}

std::string square_matrix_text(Eigen::Index n, std::size_t bytes_per_value) {
  const double gib = static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(bytes_per_value) /
                     (1024.0 * 1024.0 * 1024.0);
  char size[32];
  std::snprintf(size, sizeof(size), "%.3g", gib);
  return std::to_string(n) + " x " + std::to_string(n) + (bytes_per_value == 4 ? " float32" : " float64") +
         " values (" + size + " GiB)";
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
    } catch (const rkm::device_memory_error& e) {
      PyErr_SetString(PyExc_MemoryError, e.what());
    } catch (const rkm::bind::out_of_memory& e) {
      PyErr_SetString(PyExc_MemoryError, e.what());
    } catch (const std::bad_alloc&) {  // an allocation no binding gave a context: pybind11 would say "std::bad_alloc"
      PyErr_SetString(PyExc_MemoryError, (std::string("rkm core: out of memory (an allocation of the compiled core "
                                                      "failed); ") + rkm::bind::memory_advice())
                                             .c_str());
    }
  });
  rkm::set_interrupt_checker(&rkm::bind::python_interrupt_pending);
  py::register_exception<rkm::device_error>(m, "DeviceError", PyExc_RuntimeError);
  rkm::bind::bind_config(m);
  rkm::bind::bind_kernels(m);
  rkm::bind::bind_cuda(m);
  rkm::bind::bind_center(m);
  rkm::bind::bind_eigs(m);
  rkm::bind::bind_kernel_operator(m);
  rkm::bind::bind_features(m);
  rkm::bind::bind_lssvm(m);
  rkm::bind::bind_deep(m);
  rkm::bind::bind_stiefel(m);  // before bind_constr_drkm: it registers the base StiefelObjective
  rkm::bind::bind_constr_drkm(m);
  rkm::bind::bind_kae(m);
  rkm::bind::bind_preimage(m);
}
