// The CUDA path's bindings. Always compiled: without the RKM_CUDA option they report that the path is missing
// and every GPU routine raises rkm.exceptions.DeviceError saying how to build it.
#include "bind/bind.hpp"

#ifdef RKM_HAVE_CUDA
#include "cuda/device.hpp"
#endif

namespace rkm::bind {

namespace {

constexpr const char* kNotBuilt =
    "device='cuda': rkm was built without CUDA (rkm.show_config() shows cuda: False); build it with "
    "pip install . -Ccmake.define.RKM_CUDA=ON on a machine with the CUDA toolkit, or use device='cpu'";

py::dict cuda_info() {
  py::dict info;
#ifdef RKM_HAVE_CUDA
  const cuda::RuntimeStatus status = cuda::runtime_status();
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
    entry["free_bytes"] = device.free_bytes;
    entry["compute_capability"] = py::make_tuple(device.compute_major, device.compute_minor);
    entry["multiprocessors"] = device.multiprocessors;
    devices.append(entry);
  }
  info["devices"] = devices;
  info["reason"] = status.reason;
#else
  info["compiled"] = false;
  info["devices"] = py::list();
  info["reason"] = "rkm was built without CUDA";
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
  cuda::check_kernel_matrix_fits(X.rows(), Y ? Y->rows() : 0, X.cols(), sizeof(T), device);
  py::array_t<T> out({X.rows(), n_y});
  {
    // Safe without the GIL: the NumPy buffers stay referenced until we return.
    py::gil_scoped_release release;
    cuda::kernel_matrix<T>(X.data(), X.rows(), Y ? Y->data() : nullptr, n_y, X.cols(), spec, out.mutable_data(),
                           device);
  }
  return out;
#else
  (void)X, (void)Y, (void)spec, (void)device;
  throw device_error(kNotBuilt);
#endif
}

}  // namespace

void bind_cuda(py::module_& m) {
  m.def("cuda_info", &cuda_info,
        "The CUDA path: whether it was compiled, the runtime and driver versions, the devices (name, memory, "
        "compute capability) and why there are none.");
  const char* doc =
      "Kernel matrix K(X, Y) computed on CUDA device `device` (C-contiguous float32 or float64 inputs of one "
      "dtype); DeviceError when rkm has no CUDA path or no usable device, MemoryError when K does not fit.";
  m.def("cuda_kernel_matrix", &cuda_kernel_matrix<double>, py::arg("X").noconvert(),
        py::arg("Y").noconvert() = py::none(), py::arg("kernel") = "rbf", py::arg("gamma") = py::none(),
        py::arg("degree") = 3.0, py::arg("coef0") = 1.0, py::arg("device") = 0, doc);
  m.def("cuda_kernel_matrix", &cuda_kernel_matrix<float>, py::arg("X").noconvert(),
        py::arg("Y").noconvert() = py::none(), py::arg("kernel") = "rbf", py::arg("gamma") = py::none(),
        py::arg("degree") = 3.0, py::arg("coef0") = 1.0, py::arg("device") = 0, doc);
}

}  // namespace rkm::bind
