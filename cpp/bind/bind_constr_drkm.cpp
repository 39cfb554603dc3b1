#include "bind/bind.hpp"

#include "core/constr_drkm.hpp"

#include <memory>
#include <tuple>
#include <vector>

namespace rkm::bind {

namespace {

// (name, gamma, degree, coef0); gamma may be None for the linear kernel, which has none.
using KernelTuple = std::tuple<std::string, std::optional<double>, double, double>;

KernelSpec level_spec(const KernelTuple& k) {
  const auto& [name, gamma, degree, coef0] = k;
  KernelSpec spec;
  spec.type = parse_kernel(name, "level_kernels");
  const std::string canonical = kernel_name(spec.type);
  if (!has_level_derivatives(spec.type)) {
    throw std::invalid_argument("level_kernels: the " + canonical + " kernel has no derivatives for levels 2..L; "
                                "choose one of " + kernel_names_where(has_level_derivatives));
  }
  if (spec.type == KernelType::linear) return spec;
  require(gamma.has_value(), "level_kernels: the " + canonical + " kernel needs a gamma, got None");
  spec.gamma = *gamma;
  spec.degree = degree;
  spec.coef0 = coef0;
  return spec;
}

std::unique_ptr<ConstrainedDeepObjective> make_objective(ConstMatrixRef<double> K1,
                                                         const std::vector<KernelTuple>& level_kernels,
                                                         const std::vector<Eigen::Index>& sizes,
                                                         const std::vector<double>& etas, bool center,
                                                         std::optional<int> n_threads) {
  std::vector<KernelSpec> specs;
  for (const KernelTuple& k : level_kernels) specs.push_back(level_spec(k));
  const int threads = thread_count(n_threads);
  // Safe without the GIL: K1 is a view of a buffer the caller keeps alive; the copy and its centring are ours.
  py::gil_scoped_release release;
  return with_memory_context(
      [&] { return "copying the level-1 kernel matrix of a Constr-DRKM objective: " +
                   square_matrix_text(K1.rows(), sizeof(double)); },
      [&] { return std::make_unique<ConstrainedDeepObjective>(K1, specs, sizes, etas, center, threads); });
}

py::tuple evaluate(ConstrainedDeepObjective& objective, ConstMatrixRef<double> H) {
  RowMatrix<double> G;
  Vector<double> terms;
  double f;
  {
    // Safe without the GIL: H is a view of a buffer the caller keeps alive; G and terms are this call's, and
    // the objective's evaluation writes nothing it shares (other threads may evaluate it at the same time).
    py::gil_scoped_release release;
    f = objective.evaluate(H, G, terms);
  }
  return py::make_tuple(f, std::move(G), std::move(terms));
}

py::tuple sizes(const ConstrainedDeepObjective& objective) {
  py::tuple out(objective.sizes().size());
  for (std::size_t l = 0; l < objective.sizes().size(); ++l) out[l] = objective.sizes()[l];
  return out;
}

}  // namespace

void bind_constr_drkm(py::module_& m) {
  py::class_<ConstrainedDeepObjective, StiefelObjective>(
      m, "ConstrainedDeepObjective",
      "The Constr-DRKM objective (Tonin et al. 2021, eq. 7 for L levels) of one problem: "
      "f(H) = -sum_l Tr(B_l^T K_l B_l) / (2 eta_l), B_l = C H_l if center else H_l, H = [H_1 ... H_L] (N x p), "
      "K_1 given (copied, centred once if center), K_l = k_l(H_{l-1}, H_{l-1}) for l >= 2. level_kernels: L - 1 "
      "tuples (name, gamma, degree, coef0), name rbf, laplacian, poly or linear. evaluate(H) returns "
      "(f, G = df/dH, terms) without forming any N x N matrix besides K_1, bit-identical for any thread count; "
      "stiefel_minimize runs it without Python. Safe to share between threads: each evaluation has its own buffers.")
      .def(py::init(&make_objective), py::arg("K1"), py::arg("level_kernels"), py::arg("sizes"), py::arg("etas"),
           py::arg("center"), py::arg("n_threads") = py::none())
      .def("evaluate", &evaluate, py::arg("H"), "(f, G, terms) at H of shape (N, sum(sizes)).")
      .def_property_readonly("n_samples", &ConstrainedDeepObjective::n_samples)
      .def_property_readonly("sizes", &sizes);
}

}  // namespace rkm::bind
