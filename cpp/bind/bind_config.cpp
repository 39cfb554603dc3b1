#include "bind/bind.hpp"

#include "core/blas.hpp"
#include "core/isa.hpp"

#if defined(__unix__) || defined(__APPLE__)
#include <dlfcn.h>
#endif

namespace rkm::bind {

namespace {

void* capsule_pointer(const py::dict& capi, const char* name) {
  py::capsule capsule = capi[name];
  return PyCapsule_GetPointer(capsule.ptr(), PyCapsule_GetName(capsule.ptr()));
}

// The file of the BLAS library whose thread count the core controls ("" when none).
std::string& thread_controlled_library() {
  static std::string path;
  return path;
}

// Finds the thread controls of the OpenBLAS behind SciPy's BLAS (blas::ThreadControls): the library that
// holds `routine` (scipy.linalg.cython_blas) and the ones it loaded are searched for OpenBLAS's functions, as
// SciPy's wheels name them (scipy_ prefix) or unprefixed. Without them (another BLAS, or no dlopen) the
// controls stay unset.
void register_blas_thread_controls([[maybe_unused]] void* routine) {
#if defined(__unix__) || defined(__APPLE__)
  Dl_info info;
  if (dladdr(routine, &info) == 0 || info.dli_fname == nullptr) return;
  void* library = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
  if (library == nullptr) return;
  for (const char* prefix : {"scipy_", ""}) {
    const std::string get = std::string(prefix) + "openblas_get_num_threads";
    const std::string set = std::string(prefix) + "openblas_set_num_threads";
    void* get_address = dlsym(library, get.c_str());
    void* set_address = dlsym(library, set.c_str());
    Dl_info owner;
    if (get_address != nullptr && set_address != nullptr && dladdr(set_address, &owner) != 0 &&
        owner.dli_fname != nullptr) {
      blas::ThreadControls& controls = blas::thread_controls();
      controls.get = reinterpret_cast<int (*)()>(get_address);
      controls.set = reinterpret_cast<void (*)(int)>(set_address);
      thread_controlled_library() = owner.dli_fname;
      break;
    }
  }
  dlclose(library);  // SciPy keeps the library loaded: the functions stay valid
#endif
}

// Registers SciPy's BLAS/LAPACK (see core/blas.hpp for why). Returns false when SciPy is unavailable.
bool register_scipy_blas() {
  try {
    const py::dict b = py::module_::import("scipy.linalg.cython_blas").attr("__pyx_capi__");
    const py::dict l = py::module_::import("scipy.linalg.cython_lapack").attr("__pyx_capi__");
    auto& d = blas::routines<double>();
    d.gemm = reinterpret_cast<blas::Routines<double>::gemm_t>(capsule_pointer(b, "dgemm"));
    d.syevd = reinterpret_cast<blas::Routines<double>::syevd_t>(capsule_pointer(l, "dsyevd"));
    d.potrf = reinterpret_cast<blas::Routines<double>::potrf_t>(capsule_pointer(l, "dpotrf"));
    d.potrs = reinterpret_cast<blas::Routines<double>::potrs_t>(capsule_pointer(l, "dpotrs"));
    d.trtri = reinterpret_cast<blas::Routines<double>::trtri_t>(capsule_pointer(l, "dtrtri"));
    d.trsm = reinterpret_cast<blas::Routines<double>::trsm_t>(capsule_pointer(b, "dtrsm"));
    d.trmm = reinterpret_cast<blas::Routines<double>::trmm_t>(capsule_pointer(b, "dtrmm"));
    d.syrk = reinterpret_cast<blas::Routines<double>::syrk_t>(capsule_pointer(b, "dsyrk"));
    auto& s = blas::routines<float>();
    s.gemm = reinterpret_cast<blas::Routines<float>::gemm_t>(capsule_pointer(b, "sgemm"));
    s.syevd = reinterpret_cast<blas::Routines<float>::syevd_t>(capsule_pointer(l, "ssyevd"));
    s.potrf = reinterpret_cast<blas::Routines<float>::potrf_t>(capsule_pointer(l, "spotrf"));
    s.potrs = reinterpret_cast<blas::Routines<float>::potrs_t>(capsule_pointer(l, "spotrs"));
    s.trtri = reinterpret_cast<blas::Routines<float>::trtri_t>(capsule_pointer(l, "strtri"));
    s.trsm = reinterpret_cast<blas::Routines<float>::trsm_t>(capsule_pointer(b, "strsm"));
    s.trmm = reinterpret_cast<blas::Routines<float>::trmm_t>(capsule_pointer(b, "strmm"));
    s.syrk = reinterpret_cast<blas::Routines<float>::syrk_t>(capsule_pointer(b, "ssyrk"));
    register_blas_thread_controls(capsule_pointer(b, "dgemm"));
    return true;
  } catch (const py::error_already_set&) {
    return false;
  }
}

std::string blas_backend() {
  return blas::use_external() && blas::external_available<double>() ? "scipy" : "eigen";
}

}  // namespace

void bind_config(py::module_& m) {
  register_scipy_blas();
  m.def(
      "config",
      []() {
        py::dict info;
        info["version"] = RKM_VERSION;
        info["compiler"] = RKM_COMPILER;
        info["openmp"] = have_openmp();
        info["max_threads"] = max_threads();
        info["dtypes"] = py::make_tuple("float32", "float64");
#ifdef RKM_HAVE_CUDA
        info["cuda"] = true;
#else
        info["cuda"] = false;
#endif
        info["eigen"] = std::to_string(EIGEN_WORLD_VERSION) + "." + std::to_string(EIGEN_MAJOR_VERSION) + "." +
                        std::to_string(EIGEN_MINOR_VERSION);
        info["eigen_simd"] = Eigen::SimdInstructionSetsInUse();
        info["blas"] = blas_backend();
        // the BLAS library the core holds to one thread inside its OpenMP teams (blas::SingleThreadedScope)
        const std::string& controlled = thread_controlled_library();
        info["blas_thread_control"] = controlled.empty() ? py::none() : py::object(py::str(controlled));
        info["simd_isa"] = active_isa();
        info["native_build"] = static_cast<bool>(RKM_NATIVE_BUILD);
        return info;
      },
      "Build and run-time configuration of the compiled core.");
  m.def("_scoped_blas_threads", &blas::scoped_thread_count,
        "The BLAS thread count the core restores when its OpenMP teams finish, or 0 when none runs (for the "
        "Python layer's BLAS limits).");
  m.def("_rebase_scoped_blas_threads", &blas::rebase_scoped_thread_count, py::arg("threads"),
        "Tells running OpenMP teams of the core that the BLAS thread count was set to `threads` meanwhile (the "
        "count they restore); nothing when none runs.");
  m.def(
      "set_blas_backend",
      [](const std::string& name) {
        if (name == "scipy") {
          if (!blas::external_available<double>() && !register_scipy_blas())
            throw std::invalid_argument("backend: SciPy's BLAS is not available");
          blas::set_use_external(true);
        } else if (name == "eigen") {
          blas::set_use_external(false);
        } else {
          throw std::invalid_argument("backend: must be 'scipy' or 'eigen'");
        }
      },
      py::arg("backend"), "Choose the dense linear algebra behind the core: 'scipy' (OpenBLAS) or 'eigen'.");
  m.def("blas_backend", &blas_backend, "The dense linear algebra in use: 'scipy' or 'eigen'.");
  m.def(
      "set_simd_isa",
      [](const std::string& name) {
        if (name == "auto") return cap_simd_isa(cpu_isa());
        for (SimdIsa level : {SimdIsa::baseline, SimdIsa::avx2, SimdIsa::avx512}) {
          if (name == isa_name(level)) return cap_simd_isa(level);
        }
        throw std::invalid_argument("isa: must be 'auto', 'avx512', 'avx2' or 'baseline'");
      },
      py::arg("isa"),
      "SIMD code of the streaming products and the kernel transforms: 'auto' (the best the CPU runs), or at most "
      "'avx512' (AVX-512F/DQ: the vector exp, cos and rbf transform), 'avx2' (AVX2/FMA) or 'baseline' (SSE2 on "
      "x86-64). A level the CPU cannot run raises ValueError.");
}

}  // namespace rkm::bind
