#include "bind/bind.hpp"

#include "core/kae.hpp"

#include <string>
#include <vector>

namespace rkm::bind {

namespace {

using Array = py::array_t<double, py::array::c_style | py::array::forcecast>;

std::string repr_text(const py::handle& value) {
  const std::string text = py::repr(value);
  return text.size() > 80 ? text.substr(0, 77) + "..." : text;
}

// A 2-D array of real numbers as float64 in C order (copied only when it is not one already); `subject` starts
// the message otherwise ("X: must be").
Array as_matrix(const py::handle& value, const std::string& subject) {
  const py::array raw = py::array::ensure(value);
  const std::string real_kinds = "biuf";
  // Messages are built only on failure: the repr of a large array costs more than the whole evaluation.
  if (!raw || raw.ndim() != 2 || real_kinds.find(raw.dtype().kind()) == std::string::npos) {
    throw std::invalid_argument(subject + " a 2-D array of real numbers, got " + repr_text(value));
  }
  return Array::ensure(raw);
}

ConstMatrixRef<double> view(const Array& a) {
  return Eigen::Map<const RowMatrix<double>>(a.data(), a.shape(0), a.shape(1));
}

py::sequence as_list(const py::handle& value, const std::string& name, const std::string& meaning) {
  if (!py::isinstance<py::list>(value) && !py::isinstance<py::tuple>(value)) {
    throw std::invalid_argument(name + ": must be a list of " + meaning + ", got " + repr_text(value));
  }
  return py::reinterpret_borrow<py::sequence>(value);
}

double number(const py::handle& value, const std::string& what) {
  if (!py::isinstance<py::bool_>(value)) {
    try {
      return value.cast<double>();
    } catch (const py::cast_error&) {
    }
  }
  throw std::invalid_argument(what + " must be a number, got " + repr_text(value));
}

// (name, gamma, degree, coef0): the core checks the values; the linear kernel ignores the last three.
KernelSpec layer_kernel(const py::handle& entry) {
  const bool tuple = py::isinstance<py::tuple>(entry) || py::isinstance<py::list>(entry);
  if (!tuple || py::len(entry) != 4) {
    throw std::invalid_argument("kernels: each entry must be a (name, gamma, degree, coef0) tuple, got " +
                                repr_text(entry));
  }
  const auto fields = py::reinterpret_borrow<py::sequence>(entry);
  const py::object name_field = fields[0];
  if (!py::isinstance<py::str>(name_field)) {
    throw std::invalid_argument("kernels: the kernel name must be a string, got " + repr_text(name_field));
  }
  const std::string name = name_field.cast<std::string>();
  KernelSpec spec;
  spec.type = parse_kernel(name, "kernels");
  const std::string canonical = kernel_name(spec.type);
  if (!has_layer_derivatives(spec.type)) {
    throw std::invalid_argument("kernels: the " + canonical + " kernel is not differentiable in both arguments; "
                                "choose one of " + kernel_names_where(has_layer_derivatives));
  }
  if (spec.type == KernelType::linear) return spec;
  spec.gamma = number(fields[1], "kernels: the " + canonical + " gamma");
  if (spec.type == KernelType::polynomial) {
    spec.degree = number(fields[2], "kernels: the poly degree");
    spec.coef0 = number(fields[3], "kernels: the poly coef0");
  }
  return spec;
}

// None, or one entry per coefficient matrix: None (the identity, an empty matrix here) or an array.
std::vector<RowMatrix<double>> layer_operators(const py::handle& value, std::size_t count) {
  if (value.is_none()) return std::vector<RowMatrix<double>>(count);
  std::vector<RowMatrix<double>> operators;
  for (const py::handle entry : as_list(value, "operators", "arrays or None")) {
    if (entry.is_none()) {
      operators.emplace_back();
    } else {
      operators.emplace_back(view(as_matrix(entry, "operators: each entry must be None or")));
    }
  }
  return operators;
}

bool flag(const py::handle& value, const std::string& name) {
  if (py::isinstance<py::bool_>(value)) return value.cast<bool>();
  if (!py::isinstance(value, py::module_::import("numpy").attr("bool_"))) {
    throw std::invalid_argument(name + ": must be True or False, got " + repr_text(value));
  }
  return PyObject_IsTrue(value.ptr()) == 1;
}

py::tuple kae_loss_and_grad_py(const py::object& X_in, const py::object& phis_in, const py::object& kernels_in,
                               const py::object& operators_in, const py::object& penalties_in,
                               const py::object& precomputed_in, const std::string& method_name,
                               std::optional<int> n_threads, const py::object& output_gram_in,
                               const py::object& output_features_in) {
  const Array X_array = as_matrix(X_in, "X: must be");
  const Array output_array =
      output_gram_in.is_none() ? Array() : as_matrix(output_gram_in, "output_gram: must be None or");
  const Array features_array =
      output_features_in.is_none() ? Array() : as_matrix(output_features_in, "output_features: must be None or");
  std::vector<Array> phi_arrays;
  for (const py::handle entry : as_list(phis_in, "phis", "coefficient matrices")) {
    phi_arrays.push_back(as_matrix(entry, "phis: each entry must be"));
  }
  std::vector<ConstMatrixRef<double>> phis;
  for (const Array& a : phi_arrays) phis.push_back(view(a));
  std::vector<KernelSpec> kernels;
  for (const py::handle entry : as_list(kernels_in, "kernels", "(name, gamma, degree, coef0) tuples")) {
    kernels.push_back(layer_kernel(entry));
  }
  const std::vector<RowMatrix<double>> operators = layer_operators(operators_in, phis.size());
  std::vector<double> penalties;
  for (const py::handle entry : as_list(penalties_in, "penalties", "numbers")) {
    penalties.push_back(number(entry, "penalties: each penalty"));
  }
  const bool precomputed = flag(precomputed_in, "precomputed");
  const KaeGradient method = parse_kae_gradient(method_name);
  const int threads = thread_count(n_threads);
  const ConstMatrixRef<double> X = view(X_array);
  const std::optional<ConstMatrixRef<double>> output_gram =
      output_gram_in.is_none() ? std::nullopt : std::optional<ConstMatrixRef<double>>(view(output_array));
  const std::optional<ConstMatrixRef<double>> output_features =
      output_features_in.is_none() ? std::nullopt : std::optional<ConstMatrixRef<double>>(view(features_array));
  KaeResult result;
  {
    // Safe without the GIL: X, output_gram, output_features and phis view the buffers of X_array, output_array,
    // features_array and phi_arrays, which live until after this block; everything else is a C++ object.
    py::gil_scoped_release release;
    result = with_memory_context(
        [&] { return "evaluating a kernel autoencoder: each layer's kernel matrix holds " +
                     square_matrix_text(X.rows(), sizeof(double)); },
        [&] {
          return kae_loss_and_grad(X, phis, kernels, operators, penalties, precomputed, method, threads,
                                   output_gram ? &*output_gram : nullptr,
                                   output_features ? &*output_features : nullptr);
        });
  }
  py::list grads;
  for (RowMatrix<double>& g : result.grads) grads.append(py::cast(std::move(g)));
  return py::make_tuple(result.loss, grads, py::cast(std::move(result.terms)));
}

}  // namespace

void bind_kae(py::module_& m) {
  m.def("kae_loss_and_grad", &kae_loss_and_grad_py, py::arg("X"), py::arg("phis"), py::arg("kernels"),
        py::arg("operators"), py::arg("penalties"), py::arg("precomputed") = false, py::arg("method") = "adjoint",
        py::arg("n_threads") = py::none(), py::arg("output_gram") = py::none(),
        py::arg("output_features") = py::none(),
        "Loss of a kernel autoencoder (Laforgue et al. 2019, eq. 4; K²AE when precomputed) and its gradient with "
        "respect to the coefficients: (loss, grads, terms = [D, s_1, ..., s_L]). X: data (n, d_0) or, when "
        "precomputed, the input Gram matrix K_in (n, n); phis: Phi_1..Phi_L (K²AE: Phi_1..Phi_{L-1}); kernels: one "
        "(name, gamma, degree, coef0) per entry of phis, name rbf, poly or linear (K²AE: layers 2..L); operators: "
        "None or one PSD array or None (identity) per entry of phis; penalties: lambda_1..lambda_L (K²AE: lambda_L "
        "is the ridge penalty of the last layer); method: 'adjoint' (reverse mode, O(n^2 sum d_l)) or 'jacobian' "
        "(the paper's Appendix B recursions); output_gram: with precomputed, the inner products K_out of the outputs "
        "the last layer regresses onto (None: X); output_features: with precomputed, instead of output_gram, the "
        "outputs F themselves (n, d_out), K_out = F F^T, solved through W^-1 F (d_out right-hand sides, no n x n "
        "solve: a finite-dimensional KAE's ridge layer). float64; bit-identical for any n_threads; an overflowing hidden "
        "quantity gives loss = inf with NaN terms and gradients. rkm.reference.kae_loss_and_grad is its twin.");
}

}  // namespace rkm::bind
