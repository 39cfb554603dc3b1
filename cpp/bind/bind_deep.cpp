#include "bind/bind.hpp"

#include "core/deep.hpp"

#include <memory>
#include <tuple>

namespace rkm::bind {

namespace {

// (name, gamma, degree, coef0); gamma may be None for the linear kernel, which has none.
using KernelTuple = std::tuple<std::string, std::optional<double>, double, double>;

KernelSpec smooth_spec(const KernelTuple& k, const char* name) {
  const auto& [kernel, gamma, degree, coef0] = k;
  const KernelSpec spec = SmoothKernel(make_spec(kernel, gamma.value_or(1.0), 1, degree, coef0)).spec;
  if (spec.type != KernelType::linear) {
    require(gamma.has_value() && std::isfinite(*gamma) && *gamma > 0,
            std::string(name) + ": gamma must be positive and finite");
  }
  return spec;
}

ReducedSetDims reduced_set_dims(const std::tuple<Eigen::Index, Eigen::Index, Eigen::Index, Eigen::Index>& d) {
  ReducedSetDims dims{std::get<0>(d), std::get<1>(d), std::get<2>(d), std::get<3>(d)};
  require(dims.M > 0 && dims.s1 > 0 && dims.s2 > 0 && dims.p > 0, "dims: M, s1, s2 and p must be positive");
  return dims;
}

ReducedSetOptions reduced_set_options(const std::array<double, 3>& etas, double lam3, double c_stab, double c0,
                                      const std::string& regularizer, const std::string& objective) {
  require(regularizer == "H" || regularizer == "W", "regularizer: must be 'H' or 'W', got '" + regularizer + "'");
  require(objective == "full" || objective == "level3",
          "objective: must be 'full' or 'level3', got '" + objective + "'");
  return ReducedSetOptions{etas, lam3, c_stab, c0, regularizer == "W", objective == "level3"};
}

using Dims = std::tuple<Eigen::Index, Eigen::Index, Eigen::Index, Eigen::Index>;

std::unique_ptr<DeepReducedSetObjective> make_objective(ConstMatrixRef<double> K1, ConstMatrixRef<double> G1,
                                                        ConstMatrixRef<double> Y, const Dims& dims,
                                                        const KernelTuple& kernel2, const KernelTuple& kernel3,
                                                        const std::array<double, 3>& etas, double lam3,
                                                        double c_stab, double c0, const std::string& regularizer,
                                                        const std::string& objective,
                                                        std::optional<int> n_threads) {
  return std::make_unique<DeepReducedSetObjective>(
      K1, G1, Y, reduced_set_dims(dims), smooth_spec(kernel2, "kernel2"), smooth_spec(kernel3, "kernel3"),
      reduced_set_options(etas, lam3, c_stab, c0, regularizer, objective), thread_count(n_threads));
}

py::tuple evaluate(DeepReducedSetObjective& objective, ConstVectorRef<double> theta) {
  ReducedSetValue v;
  {
    // Safe without the GIL: theta is a view of a buffer the caller keeps alive; the rest is owned here.
    py::gil_scoped_release release;
    v = objective.evaluate(theta);
  }
  return py::make_tuple(v.f, std::move(v.grad), Vector<double>(Eigen::Map<Vector<double>>(v.terms.data(), 3)));
}

py::tuple objective_py(ConstVectorRef<double> theta, ConstMatrixRef<double> K1, ConstMatrixRef<double> G1,
                       ConstMatrixRef<double> Y, const Dims& dims, const KernelTuple& kernel2,
                       const KernelTuple& kernel3, const std::array<double, 3>& etas, double lam3, double c_stab,
                       double c0, const std::string& regularizer, const std::string& objective,
                       std::optional<int> n_threads) {
  auto f = make_objective(K1, G1, Y, dims, kernel2, kernel3, etas, lam3, c_stab, c0, regularizer, objective,
                          n_threads);
  return evaluate(*f, theta);
}

py::tuple forward_py(ConstVectorRef<double> theta, ConstMatrixRef<double> K1, const Dims& dims,
                     const KernelTuple& kernel2, const KernelTuple& kernel3, const std::array<double, 3>& etas,
                     std::optional<int> n_threads) {
  for (double eta : etas) require(eta > 0 && std::isfinite(eta), "etas: must be positive and finite");
  const KernelSpec k2 = smooth_spec(kernel2, "kernel2"), k3 = smooth_spec(kernel3, "kernel3");
  const ReducedSetDims d = reduced_set_dims(dims);
  const int threads = thread_count(n_threads);
  ReducedSetForward out;
  {
    // Safe without the GIL: only views of NumPy buffers the caller keeps alive.
    py::gil_scoped_release release;
    out = deep_reduced_set_forward(theta, K1, d, k2, k3, etas, threads);
  }
  return py::make_tuple(std::move(out.Yhat), std::move(out.E1), std::move(out.E2));
}

}  // namespace

void bind_deep(py::module_& m) {
  const char* layout =
      "theta = [A1 (M x s1) | A2 (M x s2) | A3 (M x p) | b (p) | l1 (s1) | l2 (s2)], blocks row-major; "
      "dims = (M, s1, s2, p); kernel2, kernel3 = (name, gamma, degree, coef0) with name rbf, linear or poly.";
  py::class_<DeepReducedSetObjective>(m, "DeepReducedSetObjective",
                                      (std::string("The M1 objective of Suykens 2017, eq. 5.3, for one fit: K1, G1 and "
                                                   "Y are copied once; calling it with theta returns (f, grad, "
                                                   "[J1, J2, J3]); calls from several threads take turns. ") + layout).c_str())
      .def(py::init(&make_objective), py::arg("K1").noconvert(), py::arg("G1").noconvert(), py::arg("Y").noconvert(),
           py::arg("dims"), py::arg("kernel2"), py::arg("kernel3"), py::arg("etas"), py::arg("lam3"),
           py::arg("c_stab"), py::arg("c0"), py::arg("regularizer"), py::arg("objective"),
           py::arg("n_threads") = py::none())
      .def("__call__", &evaluate, py::arg("theta").noconvert());
  m.def("deep_reduced_set_objective", &objective_py, py::arg("theta").noconvert(), py::arg("K1").noconvert(),
        py::arg("G1").noconvert(), py::arg("Y").noconvert(), py::arg("dims"), py::arg("kernel2"), py::arg("kernel3"),
        py::arg("etas"), py::arg("lam3"), py::arg("c_stab"), py::arg("c0"), py::arg("regularizer"),
        py::arg("objective"), py::arg("n_threads") = py::none(),
        (std::string("The M1 objective of eq. 5.3 at theta: (f, grad, [J1, J2, J3]). ") + layout).c_str());
  m.def("deep_reduced_set_forward", &forward_py, py::arg("theta").noconvert(), py::arg("K1").noconvert(),
        py::arg("dims"), py::arg("kernel2"), py::arg("kernel3"), py::arg("etas"), py::arg("n_threads") = py::none(),
        "The M1 model of eq. 5.4 on kernel rows K1 = k1(X, Xr): (Yhat, E1, E2).");
}

}  // namespace rkm::bind
