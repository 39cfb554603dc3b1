#include "bind/bind.hpp"

#include "core/stiefel.hpp"

#include <algorithm>
#include <climits>
#include <string>

namespace rkm::bind {

namespace {

std::string repr_text(const py::handle& value) { return py::repr(value).cast<std::string>(); }

bool is_bool(const py::handle& value) {
  return py::isinstance<py::bool_>(value) || py::isinstance(value, py::module_::import("numpy").attr("bool_"));
}

// numbers.Real / numbers.Integral, bools excluded: the reference's rules for option values.
bool is_real(const py::handle& value) {
  return !is_bool(value) && py::isinstance(value, py::module_::import("numbers").attr("Real"));
}
bool is_integer(const py::handle& value) {
  return !is_bool(value) && py::isinstance(value, py::module_::import("numbers").attr("Integral"));
}

// An integral Python value clamped to the range of int (no count here comes near it).
int clamped_int(const py::handle& value) {
  const py::int_ number(py::reinterpret_borrow<py::object>(value));
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(number.ptr(), &overflow);
  if (overflow != 0) return overflow > 0 ? INT_MAX : INT_MIN;
  return static_cast<int>(std::clamp<long long>(v, INT_MIN, INT_MAX));
}

// A 2-D array of real numbers as float64 in C order (copied only when it is not one already).
py::array_t<double, py::array::c_style | py::array::forcecast> as_matrix(const py::object& value,
                                                                         const std::string& name) {
  const py::array raw = py::array::ensure(value);
  const std::string real_kinds = "biuf";
  if (!raw || raw.ndim() != 2 || real_kinds.find(raw.dtype().kind()) == std::string::npos) {
    const py::object array = py::module_::import("numpy").attr("asarray")(value);
    throw std::invalid_argument(name + ": must be a 2-D array of real numbers, got shape " +
                                py::str(array.attr("shape")).cast<std::string>() + " and dtype " +
                                py::str(array.attr("dtype")).cast<std::string>());
  }
  return py::array_t<double, py::array::c_style | py::array::forcecast>::ensure(raw);
}

Eigen::Map<const RowMatrix<double>> view(const py::array_t<double, py::array::c_style | py::array::forcecast>& a) {
  return {a.data(), a.shape(0), a.shape(1)};
}

// A Python fun(H) -> (f, G, ...) as a StiefelObjective. The engine runs without the GIL, so each call takes it
// back; exceptions raised by fun (KeyboardInterrupt included) pass through the engine unchanged.
class PythonObjective final : public StiefelObjective {
 public:
  PythonObjective(py::object fun, Eigen::Index n, Eigen::Index p) : fun_(std::move(fun)), n_(n), p_(p) {}

  double evaluate(const ConstMatrixRef<double>& H, RowMatrix<double>& G) override {
    py::gil_scoped_acquire gil;
    const py::object out = fun_(RowMatrix<double>(H));  // a copy: fun may keep its argument
    const double f = py::float_(out[py::int_(0)]).cast<double>();
    const py::object gradient = out[py::int_(1)];
    const auto array = py::array_t<double, py::array::c_style | py::array::forcecast>::ensure(gradient);
    if (!array) {
      throw std::invalid_argument("fun: the gradient must be an array of real numbers, got " + repr_text(gradient));
    }
    if (array.ndim() != 2 || array.shape(0) != n_ || array.shape(1) != p_) {
      throw std::invalid_argument("fun: gradient has shape " + py::str(array.attr("shape")).cast<std::string>() +
                                  ", expected (" + std::to_string(n_) + ", " + std::to_string(p_) + ")");
    }
    G = view(array);
    return f;
  }

 private:
  py::object fun_;
  Eigen::Index n_, p_;
};

StiefelCriterion parse_criterion(const py::handle& value) {
  if (py::isinstance<py::str>(value)) {
    const std::string name = value.cast<std::string>();
    if (name == "grad") return StiefelCriterion::grad;
    if (name == "step") return StiefelCriterion::step;
  }
  throw std::invalid_argument("options: 'criterion' must be 'grad' or 'step', got " + repr_text(value));
}

// The options dict: keys and value types here, value ranges in the core (validate_stiefel_options).
StiefelOptions parse_options(const py::object& options) {
  StiefelOptions o;
  if (options.is_none()) return o;
  const py::dict entries(options);
  for (const auto& item : entries) {
    static const char* known[] = {"criterion", "max_step", "sigma", "max_backtracks", "lr", "beta1", "beta2", "eps",
                                  "q", "cayley_iters", "memory", "rho", "delta", "nonmonotone", "history"};
    const bool found = py::isinstance<py::str>(item.first) &&
                       std::find(std::begin(known), std::end(known), item.first.cast<std::string>()) != std::end(known);
    if (!found) throw std::invalid_argument("options: unknown key " + repr_text(item.first));
  }
  const auto bad = [](const char* key, const char* what, const py::handle& value) {
    return std::invalid_argument(std::string("options: '") + key + "' must be " + what + ", got " + repr_text(value));
  };
  const auto real = [&](const char* key, double& target, const char* what) {
    if (!entries.contains(key)) return;
    const py::object value = entries[key];
    if (!is_real(value)) throw bad(key, what, value);
    target = value.cast<double>();
  };
  const auto integer = [&](const char* key, int& target, const char* what) {
    if (!entries.contains(key)) return;
    const py::object value = entries[key];
    if (!is_integer(value)) throw bad(key, what, value);
    target = clamped_int(value);
  };
  if (entries.contains("criterion")) o.criterion = parse_criterion(entries["criterion"]);
  real("max_step", o.max_step, "a positive number (inf allowed)");
  real("sigma", o.sigma, "in (0, 1)");
  real("rho", o.rho, "in (0, 1)");
  real("delta", o.delta, "in (0, 1)");
  real("beta1", o.beta1, "in [0, 1)");
  real("beta2", o.beta2, "in [0, 1)");
  real("nonmonotone", o.nonmonotone, "in [0, 1)");
  real("lr", o.lr, "a positive finite number");
  real("eps", o.eps, "a positive finite number");
  real("q", o.q, "a positive finite number");
  integer("max_backtracks", o.max_backtracks, "an int >= 0");
  integer("cayley_iters", o.cayley_iters, "an int >= 0");
  integer("memory", o.memory, "an int >= 1");
  if (entries.contains("history")) {
    const py::object value = entries["history"];
    if (!is_bool(value)) throw std::invalid_argument("options: 'history' must be a bool, got " + repr_text(value));
    o.history = py::bool_(value);
  }
  validate_stiefel_options(o);
  return o;
}

StiefelMethod parse_method(const py::object& method) {
  if (py::isinstance<py::str>(method)) {
    try {
      return parse_stiefel_method(method.cast<std::string>());
    } catch (const std::invalid_argument&) {
      // reported below with the value's repr
    }
  }
  throw std::invalid_argument("method: must be one of ('pg', 'cayley_adam', 'cayley_bb', 'pg_anderson'), got " +
                              repr_text(method));
}

double parse_tol(const py::object& tol) {
  if (!is_real(tol)) throw std::invalid_argument("tol: must be a positive finite number, got " + repr_text(tol));
  return tol.cast<double>();  // the range is checked by the core
}

int parse_max_iter(const py::object& max_iter) {
  if (!is_integer(max_iter) || clamped_int(max_iter) < 0)
    throw std::invalid_argument("max_iter: must be a non-negative int, got " + repr_text(max_iter));
  return clamped_int(max_iter);
}

py::array_t<double> as_array(const std::vector<double>& values) {
  return py::array_t<double>(static_cast<py::ssize_t>(values.size()), values.data());
}

py::dict result_dict(StiefelResult&& r) {
  py::dict d;
  d["x"] = py::cast(std::move(r.x));
  d["fun"] = r.fun;
  d["grad_norm"] = r.grad_norm;
  d["feasibility"] = r.feasibility;
  d["step_measure"] = r.step_measure;
  d["nit"] = r.nit;
  d["nfev"] = r.nfev;
  d["success"] = r.success;
  d["status"] = r.status;
  d["message"] = r.message;
  d["history_fun"] = as_array(r.history_fun);
  d["history_grad_norm"] = as_array(r.history_grad_norm);
  return d;
}

py::dict stiefel_minimize_py(const py::object& fun, const py::object& H0, const py::object& method,
                             const py::object& tol, const py::object& max_iter, const py::object& options) {
  const StiefelMethod parsed_method = parse_method(method);
  const auto start = as_matrix(H0, "H0");
  const double parsed_tol = parse_tol(tol);
  const int parsed_max_iter = parse_max_iter(max_iter);
  const StiefelOptions parsed_options = parse_options(options);
  const Eigen::Map<const RowMatrix<double>> H = view(start);
  StiefelResult result;
  if (py::isinstance<StiefelObjective>(fun)) {
    // A core objective: the whole run stays in C++. Safe without the GIL: the objective is owned by `fun`, which
    // the caller keeps alive, and the start is a view of a NumPy buffer held by `start`.
    StiefelObjective& objective = fun.cast<StiefelObjective&>();
    py::gil_scoped_release release;
    result = stiefel_minimize(objective, H, parsed_method, parsed_tol, parsed_max_iter, parsed_options);
  } else {
    const py::object callable = py::hasattr(fun, "evaluate") ? py::object(fun.attr("evaluate")) : fun;
    if (!PyCallable_Check(callable.ptr()))
      throw std::invalid_argument("fun: must be callable or have an evaluate method, got " + repr_text(fun));
    PythonObjective objective(callable, H.rows(), H.cols());
    // Safe without the GIL: the engine holds Eigen objects only; each call of fun takes the GIL back.
    py::gil_scoped_release release;
    result = stiefel_minimize(objective, H, parsed_method, parsed_tol, parsed_max_iter, parsed_options);
  }
  return result_dict(std::move(result));
}

RowMatrix<double> polar_orthonormalize_py(const py::object& Z) {
  const auto matrix = as_matrix(Z, "Z");
  // Safe without the GIL: only a view of the NumPy buffer held by `matrix`.
  py::gil_scoped_release release;
  return polar_orthonormalize(view(matrix));
}

}  // namespace

void bind_stiefel(py::module_& m) {
  // The base of the core objectives (e.g. ConstrainedDeepObjective): stiefel_minimize runs them without Python.
  py::class_<StiefelObjective>(m, "StiefelObjective",
                               "Base of the compiled objectives that stiefel_minimize evaluates without the GIL.");
  m.def("stiefel_minimize", &stiefel_minimize_py, py::arg("fun"), py::arg("H0"), py::arg("method"), py::arg("tol"),
        py::arg("max_iter"), py::arg("options") = py::none(),
        "Minimize f(H) over H^T H = I from an orthonormal N x p H0 with method 'pg', 'cayley_adam', 'cayley_bb' or "
        "'pg_anderson'. fun: a callable H -> (f, G) (G the Euclidean gradient), an object with evaluate(H) -> (f, G, "
        "...), or a compiled StiefelObjective. Returns a dict: x, fun, grad_norm, feasibility, step_measure, nit, "
        "nfev, success, status, message, history_fun, history_grad_norm (see "
        "rkm.reference.stiefel.stiefel_minimize).");
  m.def("polar_orthonormalize", &polar_orthonormalize_py, py::arg("Z"),
        "The orthonormal polar factor Z (Z^T Z)^(-1/2) of an N x p matrix of rank p (1 <= p <= N).");
}

}  // namespace rkm::bind
