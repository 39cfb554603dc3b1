// Shared pieces of the pybind11 glue; the numerics live in cpp/core.
#pragma once

#include <pybind11/eigen.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "core/common.hpp"
#include "core/kernels.hpp"

#include <optional>

namespace rkm::bind {

namespace py = pybind11;

// scikit-learn's meaning: None -> OpenMP's current maximum, k > 0 -> k, -1 -> all cores, -k -> all but k-1.
int thread_count(const std::optional<int>& n_threads);

// A kernel spec from the Python arguments; gamma None means 1 / n_features.
KernelSpec make_spec(const std::string& kernel, std::optional<double> gamma, Eigen::Index n_features, double degree,
                     double coef0);

// The Krylov solver's defaults when tol / max_iter are None.
template <typename T>
double default_tol() {
  return sizeof(T) == sizeof(float) ? 1e-4 : 1e-10;
}
int default_max_iter(int n_components, Eigen::Index block_columns);

void bind_kernels(py::module_& m);
void bind_kernel_operator(py::module_& m);
void bind_features(py::module_& m);
void bind_lssvm(py::module_& m);
void bind_deep(py::module_& m);
void bind_center(py::module_& m);
void bind_eigs(py::module_& m);
void bind_config(py::module_& m);

}  // namespace rkm::bind
