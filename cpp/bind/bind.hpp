// Shared pieces of the pybind11 glue; the numerics live in cpp/core.
#pragma once

#include <pybind11/eigen.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "core/common.hpp"

#include <optional>

namespace rkm::bind {

namespace py = pybind11;

// scikit-learn's meaning: None -> OpenMP's current maximum, k > 0 -> k, -1 -> all cores, -k -> all but k-1.
int thread_count(const std::optional<int>& n_threads);

void bind_kernels(py::module_& m);
void bind_center(py::module_& m);
void bind_eigs(py::module_& m);
void bind_config(py::module_& m);

}  // namespace rkm::bind
