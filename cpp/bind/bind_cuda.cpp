// The CUDA path's bindings. Always compiled: without the RKM_CUDA option they report that the path is missing
// and every GPU routine raises rkm.exceptions.DeviceError saying how to build it.
#include "bind/bind.hpp"

#ifdef RKM_HAVE_CUDA
#include "cuda/cublas.hpp"
#include "cuda/device.hpp"
#endif

#include <cstdint>
#include <vector>

namespace rkm::bind {

namespace {

#define RKM_NOT_BUILT                                                                                      \
  "rkm was built without CUDA (rkm.show_config() shows cuda: False); build it with "                     \
  "pip install . -Ccmake.define.RKM_CUDA=ON on a machine with the CUDA toolkit, or use device='cpu'"
[[maybe_unused]] constexpr const char* kNotBuilt = "device='cuda': " RKM_NOT_BUILT;

// The rows of a NumPy view one after another, as the device copies read them: the view's own buffer when it is
// C-contiguous (the usual case), else a copy (noconvert still accepts strided views such as X[::2]).
template <typename T>
class Contiguous {
 public:
  explicit Contiguous(const ConstMatrixRef<T>& A) { take(A); }
  explicit Contiguous(const std::optional<ConstMatrixRef<T>>& A) {
    if (A) take(*A);
  }
  Contiguous(const Contiguous&) = delete;
  Contiguous& operator=(const Contiguous&) = delete;
  const T* data() const { return data_; }  // null for an absent optional

 private:
  void take(const ConstMatrixRef<T>& A) {
    if (A.outerStride() == A.cols() || A.rows() <= 1) {
      data_ = A.data();
    } else {
      copy_ = A;
      data_ = copy_.data();
    }
  }

  RowMatrix<T> copy_;
  const T* data_ = nullptr;
};

py::dict cuda_info([[maybe_unused]] int memory_of) {
  py::dict info;
#ifdef RKM_HAVE_CUDA
  const cuda::RuntimeStatus status = cuda::runtime_status(memory_of);
  info["compiled"] = true;
  info["architectures"] = RKM_CUDA_ARCHITECTURES;
  info["runtime_version"] = status.runtime_version;
  info["driver_version"] = status.driver_version;
  py::list devices;
  for (const cuda::DeviceInfo& device : status.devices) {
    py::dict entry;
    entry["index"] = device.index;
    entry["name"] = device.name;
    entry["total_bytes"] = device.total_bytes;
    entry["free_bytes"] = device.free_known ? py::object(py::int_(device.free_bytes)) : py::object(py::none());
    entry["compute_capability"] = py::make_tuple(device.compute_major, device.compute_minor);
    entry["multiprocessors"] = device.multiprocessors;
    devices.append(entry);
  }
  info["devices"] = devices;
  info["reason"] = status.reason;
  info["cublas"] = cuda::loaded_cublas();
#else
  info["compiled"] = false;
  info["devices"] = py::list();
  info["reason"] = RKM_NOT_BUILT;
#endif
  return info;
}

template <typename T>
py::array_t<T> cuda_kernel_matrix(ConstMatrixRef<T> X, std::optional<ConstMatrixRef<T>> Y, const std::string& kernel,
                                  std::optional<double> gamma, double degree, double coef0, int device) {
  const KernelSpec spec = make_spec(kernel, gamma, X.cols(), degree, coef0);
#ifdef RKM_HAVE_CUDA
  if (Y && Y->cols() != X.cols()) throw std::invalid_argument("Y: must have as many columns as X");
  const Eigen::Index n_y = Y ? Y->rows() : X.rows();
  // Before the host allocation: a K too large for the GPU is refused without touching host memory.
  cuda::check_kernel_matrix_fits(X.rows(), Y ? Y->rows() : 0, X.cols(), sizeof(T), spec, device);
  const Contiguous<T> X_rows(X), Y_rows(Y);
  py::array_t<T> out({X.rows(), n_y});
  T* K = out.mutable_data();
  {
    // Safe without the GIL: the NumPy buffers stay referenced until we return.
    py::gil_scoped_release release;
    cuda::kernel_matrix<T>(X_rows.data(), X.rows(), Y_rows.data(), n_y, X.cols(), spec, K, device);
  }
  return out;
#else
  (void)X, (void)Y, (void)spec, (void)device;
  throw device_error(kNotBuilt);
#endif
}

std::string cuda_load_cublas(const std::vector<std::string>& directories) {
#ifdef RKM_HAVE_CUDA
  return cuda::load_cublas(directories);
#else
  (void)directories;
  throw device_error(kNotBuilt);
#endif
}

template <typename T>
RowMatrix<T> cuda_kernel_product(ConstMatrixRef<T> X, std::optional<ConstMatrixRef<T>> Y, ConstMatrixRef<T> B,
                                 const std::string& kernel, std::optional<double> gamma, double degree, double coef0,
                                 int device) {
  const KernelSpec spec = make_spec(kernel, gamma, X.cols(), degree, coef0);
  require(!Y || Y->cols() == X.cols(), "Y: must have as many features as X");
  require(B.rows() == (Y ? Y->rows() : X.rows()), "B: must have one row per sample of Y (of X when Y is None)");
  require(X.allFinite(), "X: contains NaN or infinity");
  require(!Y || Y->allFinite(), "Y: contains NaN or infinity");
  require(B.allFinite(), "B: contains NaN or infinity");
#ifdef RKM_HAVE_CUDA
  const Contiguous<T> X_rows(X), Y_rows(Y), B_rows(B);
  RowMatrix<T> out(X.rows(), B.cols());
  {
    // Safe without the GIL: the NumPy buffers stay referenced until we return.
    py::gil_scoped_release release;
    cuda::kernel_product<T>(X_rows.data(), X.rows(), Y_rows.data(), Y ? Y->rows() : 0, X.cols(), spec,
                            B_rows.data(), B.cols(), out.data(), device);
  }
  return out;
#else
  (void)spec, (void)device;
  throw device_error(kNotBuilt);
#endif
}

template <typename T>
py::tuple cuda_kernel_top_eigsh(ConstMatrixRef<T> X, const std::string& kernel, std::optional<double> gamma,
                                double degree, double coef0, bool center, bool store, int n_components,
                                ConstMatrixRef<T> start, std::optional<double> tol, std::optional<int> max_iter,
                                std::optional<int> n_threads, py::object progress, int device) {
  const KernelSpec spec = make_spec(kernel, gamma, X.cols(), degree, coef0);
#ifdef RKM_HAVE_CUDA
  const int threads = thread_count(n_threads);
  const std::function<void(int)> on_product = product_progress(progress);
  KernelEigenResult<T> r;
  {
    // Safe without the GIL: only views of NumPy buffers the caller keeps alive.
    py::gil_scoped_release release;
    r = cuda::kernel_top_eigsh<T>(X, spec, center, store, n_components, start, tol.value_or(default_tol<T>()),
                                  max_iter.value_or(default_max_iter(n_components, start.cols())), threads, device,
                                  on_product);
  }
  return kernel_eigen_tuple<T>(std::move(r));
#else
  (void)X, (void)spec, (void)center, (void)store, (void)n_components, (void)start, (void)tol, (void)max_iter;
  (void)n_threads, (void)progress, (void)device;
  throw device_error(kNotBuilt);
#endif
}

// ---- DLPack: CuPy arrays and PyTorch CUDA tensors in and out without a copy to the host

// The DLPack ABI (dlpack.h, stable since v0.6), declared here as the cuBLAS entry points are in cuda/cublas.cpp:
// a capsule named "dltensor" holds a ManagedTensor whose deleter its consumer calls when done with it.
namespace dlpack {
struct Device {
  std::int32_t device_type;
  std::int32_t device_id;
};
struct DataType {
  std::uint8_t code;
  std::uint8_t bits;
  std::uint16_t lanes;
};
struct Tensor {
  void* data;
  Device device;
  std::int32_t ndim;
  DataType dtype;
  std::int64_t* shape;
  std::int64_t* strides;  // in elements; null means C-contiguous
  std::uint64_t byte_offset;
};
struct ManagedTensor {
  Tensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(ManagedTensor*);
};
constexpr std::int32_t kCuda = 2;  // kDLCUDA
constexpr std::uint8_t kFloat = 2;  // kDLFloat
}  // namespace dlpack

// A 2-D float32 or float64 C-contiguous tensor in CUDA memory, taken from its capsule (renamed "used_dltensor",
// as the protocol asks) and handed back through its deleter when this goes out of scope, which must happen with
// the GIL held (a producer's deleter may release Python objects).
class BorrowedTensor {
 public:
  BorrowedTensor(const py::capsule& capsule, const char* name) {
    auto* managed = static_cast<dlpack::ManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), "dltensor"));
    if (!managed) {
      PyErr_Clear();
      throw std::invalid_argument(std::string(name) + ": not an unused DLPack capsule");
    }
    const dlpack::Tensor& t = managed->dl_tensor;
    require(t.device.device_type == dlpack::kCuda,
            std::string(name) + ": a DLPack tensor in CUDA memory is needed, got device type " +
                std::to_string(t.device.device_type));
    require(t.dtype.code == dlpack::kFloat && (t.dtype.bits == 32 || t.dtype.bits == 64) && t.dtype.lanes == 1,
            std::string(name) + ": must be float32 or float64");
    require(t.ndim == 2, std::string(name) + ": must be 2-D, got " + std::to_string(t.ndim) + " dimensions");
    rows = t.shape[0];
    cols = t.shape[1];
    // Strides of a dimension of extent 1 do not matter (PyTorch reports them freely).
    const bool contiguous = !t.strides || ((rows <= 1 || t.strides[0] == cols) && (cols <= 1 || t.strides[1] == 1));
    require(contiguous, std::string(name) + ": must be C-contiguous (cupy.ascontiguousarray or Tensor.contiguous())");
    require(cols > 0, std::string(name) + ": needs at least one column");
    device = t.device.device_id;
    bits = t.dtype.bits;
    // Taken only once valid: a refused capsule stays its producer's, who frees it.
    PyCapsule_SetName(capsule.ptr(), "used_dltensor");
    managed_ = managed;
  }
  BorrowedTensor(const BorrowedTensor&) = delete;
  BorrowedTensor& operator=(const BorrowedTensor&) = delete;
  ~BorrowedTensor() {
    if (managed_->deleter) managed_->deleter(managed_);
  }

  template <typename T>
  const T* data() const {
    const dlpack::Tensor& t = managed_->dl_tensor;
    return reinterpret_cast<const T*>(static_cast<const char*>(t.data) + t.byte_offset);
  }

  std::int64_t rows = 0, cols = 0;
  int device = 0, bits = 0;

 private:
  dlpack::ManagedTensor* managed_ = nullptr;
};

#ifdef RKM_HAVE_CUDA
// A result in device memory rkm allocated, as a "dltensor" capsule: the consumer's deleter call (or the capsule's
// destructor, when nobody consumed it) frees it.
struct ExportedTensor {
  dlpack::ManagedTensor managed{};
  std::int64_t shape[2] = {0, 0};
};

void delete_exported(dlpack::ManagedTensor* managed) {
  cuda::free_device_memory(managed->dl_tensor.data);
  delete static_cast<ExportedTensor*>(managed->manager_ctx);
}

void delete_unconsumed(PyObject* capsule) {
  if (!PyCapsule_IsValid(capsule, "dltensor")) return;  // renamed "used_dltensor": the consumer owns it
  auto* managed = static_cast<dlpack::ManagedTensor*>(PyCapsule_GetPointer(capsule, "dltensor"));
  managed->deleter(managed);
}

template <typename T>
py::capsule export_tensor(T* data, std::int64_t rows, std::int64_t cols, int device) {
  ExportedTensor* exported = nullptr;
  try {
    exported = new ExportedTensor;
  } catch (...) {
    cuda::free_device_memory(data);
    throw;
  }
  exported->shape[0] = rows;
  exported->shape[1] = cols;
  dlpack::Tensor& t = exported->managed.dl_tensor;
  t.data = data;
  t.device = {dlpack::kCuda, device};
  t.ndim = 2;
  t.dtype = {dlpack::kFloat, static_cast<std::uint8_t>(8 * sizeof(T)), 1};
  t.shape = exported->shape;
  t.strides = nullptr;
  t.byte_offset = 0;
  exported->managed.manager_ctx = exported;
  exported->managed.deleter = delete_exported;
  PyObject* capsule = PyCapsule_New(&exported->managed, "dltensor", delete_unconsumed);
  if (!capsule) {
    delete_exported(&exported->managed);
    throw py::error_already_set();
  }
  return py::reinterpret_steal<py::capsule>(capsule);
}
#endif

void require_same(const BorrowedTensor& a, const BorrowedTensor& b, const char* name) {
  require(b.bits == a.bits, std::string(name) + ": must have X's dtype");
  require(b.device == a.device, std::string(name) + ": must be on X's CUDA device");
}

py::capsule cuda_kernel_matrix_dlpack(const py::capsule& X_capsule, std::optional<py::capsule> Y_capsule,
                                      const std::string& kernel, std::optional<double> gamma, double degree,
                                      double coef0) {
  const BorrowedTensor X(X_capsule, "X");
  const std::optional<BorrowedTensor> Y = Y_capsule ? std::make_optional<BorrowedTensor>(*Y_capsule, "Y")
                                                    : std::nullopt;
  if (Y) {
    require_same(X, *Y, "Y");
    require(Y->cols == X.cols, "Y: must have as many columns as X");
  }
  const KernelSpec spec = make_spec(kernel, gamma, X.cols, degree, coef0);
#ifdef RKM_HAVE_CUDA
  const std::int64_t n_y = Y ? Y->rows : X.rows;
  auto compute = [&](auto zero) -> py::capsule {
    using T = decltype(zero);
    T* K;
    {
      py::gil_scoped_release release;  // the tensors stay referenced by their capsules
      K = cuda::kernel_matrix_on_device<T>(X.data<T>(), X.rows, Y ? Y->data<T>() : nullptr, n_y, X.cols, spec,
                                           X.device);
    }
    return export_tensor<T>(K, X.rows, n_y, X.device);
  };
  return X.bits == 32 ? compute(0.0f) : compute(0.0);
#else
  (void)spec;
  throw device_error(kNotBuilt);
#endif
}

py::capsule cuda_kernel_product_dlpack(const py::capsule& X_capsule, std::optional<py::capsule> Y_capsule,
                                       const py::capsule& B_capsule, const std::string& kernel,
                                       std::optional<double> gamma, double degree, double coef0) {
  const BorrowedTensor X(X_capsule, "X");
  const std::optional<BorrowedTensor> Y = Y_capsule ? std::make_optional<BorrowedTensor>(*Y_capsule, "Y")
                                                    : std::nullopt;
  const BorrowedTensor B(B_capsule, "B");
  if (Y) {
    require_same(X, *Y, "Y");
    require(Y->cols == X.cols, "Y: must have as many features as X");
  }
  require_same(X, B, "B");
  require(B.rows == (Y ? Y->rows : X.rows), "B: must have one row per sample of Y (of X when Y is None)");
  const KernelSpec spec = make_spec(kernel, gamma, X.cols, degree, coef0);
#ifdef RKM_HAVE_CUDA
  auto compute = [&](auto zero) -> py::capsule {
    using T = decltype(zero);
    T* KB;
    {
      py::gil_scoped_release release;  // the tensors stay referenced by their capsules
      KB = cuda::kernel_product_on_device<T>(X.data<T>(), X.rows, Y ? Y->data<T>() : nullptr, Y ? Y->rows : 0,
                                             X.cols, spec, B.data<T>(), B.cols, X.device);
    }
    return export_tensor<T>(KB, X.rows, B.cols, X.device);
  };
  return X.bits == 32 ? compute(0.0f) : compute(0.0);
#else
  (void)spec;
  throw device_error(kNotBuilt);
#endif
}

template <typename T>
void def_cuda_operator(py::module_& m) {
  m.def("cuda_kernel_product", &cuda_kernel_product<T>, py::arg("X").noconvert(), py::arg("Y").noconvert(),
        py::arg("B").noconvert(), py::arg("kernel") = "rbf", py::arg("gamma") = py::none(), py::arg("degree") = 3.0,
        py::arg("coef0") = 1.0, py::arg("device") = 0,
        "K(X, Y) @ B (Y=None: K(X, X) @ B) on CUDA device `device`, K evaluated in bands of rows on the GPU and "
        "never stored whole; cuBLAS must be loaded (cuda_load_cublas).");
  m.def("cuda_kernel_top_eigsh", &cuda_kernel_top_eigsh<T>, py::arg("X").noconvert(), py::arg("kernel"),
        py::arg("gamma"), py::arg("degree"), py::arg("coef0"), py::arg("center"), py::arg("store"),
        py::arg("n_components"), py::arg("start").noconvert(), py::arg("tol") = py::none(),
        py::arg("max_iter") = py::none(), py::arg("n_threads") = py::none(), py::arg("progress") = py::none(),
        py::arg("device") = 0,
        "kernel_top_eigsh with the block products on CUDA device `device`: K(X, X) stored on the GPU when "
        "`store`, else evaluated in bands at every product. Returns (w, V, residuals, n_iter, converged, "
        "column_means, grand_mean).");
}

}  // namespace

void bind_cuda(py::module_& m) {
  m.def("cuda_info", &cuda_info, py::arg("device") = -1,
        "The CUDA path: whether it was compiled, the runtime and driver versions, the devices (name, memory, "
        "compute capability) and why there are none. free_bytes is None except for device `device` (-1: none), "
        "whose query creates its CUDA context.");
  const char* doc =
      "Kernel matrix K(X, Y) computed on CUDA device `device` (C-contiguous float32 or float64 inputs of one "
      "dtype); DeviceError when rkm has no CUDA path or no usable device, MemoryError when K does not fit.";
  m.def("cuda_kernel_matrix", &cuda_kernel_matrix<double>, py::arg("X").noconvert(),
        py::arg("Y").noconvert() = py::none(), py::arg("kernel") = "rbf", py::arg("gamma") = py::none(),
        py::arg("degree") = 3.0, py::arg("coef0") = 1.0, py::arg("device") = 0, doc);
  m.def("cuda_kernel_matrix", &cuda_kernel_matrix<float>, py::arg("X").noconvert(),
        py::arg("Y").noconvert() = py::none(), py::arg("kernel") = "rbf", py::arg("gamma") = py::none(),
        py::arg("degree") = 3.0, py::arg("coef0") = 1.0, py::arg("device") = 0, doc);
  m.def("cuda_load_cublas", &cuda_load_cublas, py::arg("directories"),
        "Loads cuBLAS for the CUDA path from the first directory that has it, else from the library search path; "
        "returns which copy. DeviceError when none loads.");
  def_cuda_operator<double>(m);
  def_cuda_operator<float>(m);
  m.def("cuda_kernel_matrix_dlpack", &cuda_kernel_matrix_dlpack, py::arg("X"), py::arg("Y") = py::none(),
        py::arg("kernel") = "rbf", py::arg("gamma") = py::none(), py::arg("degree") = 3.0, py::arg("coef0") = 1.0,
        "K(X, Y) for DLPack capsules of CUDA tensors (X.__dlpack__()), computed on their device and returned "
        "there as a DLPack capsule; the inputs' capsules are consumed.");
  m.def("cuda_kernel_product_dlpack", &cuda_kernel_product_dlpack, py::arg("X"), py::arg("Y"), py::arg("B"),
        py::arg("kernel") = "rbf", py::arg("gamma") = py::none(), py::arg("degree") = 3.0, py::arg("coef0") = 1.0,
        "K(X, Y) @ B for DLPack capsules of CUDA tensors, on their device, returned as a DLPack capsule.");
}

}  // namespace rkm::bind
