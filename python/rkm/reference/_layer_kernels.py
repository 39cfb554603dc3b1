"""Kernels between the rows of one hidden representation, shared by the deep models' references.

A layer kernel is a tuple ``(name, gamma, degree, coef0)``, name one of "rbf", "laplacian", "poly", "linear",
checked into a dict of floats by :func:`layer_kernel`; :func:`pairwise` gives k(Z, Z) and
:func:`weighted_derivative` the weighted sums of its derivatives that back-propagation through k needs. The
poly degree must be a non-negative integer: hidden features take both signs, so a fractional power of a
negative base would be undefined.
"""

import numbers

import numpy as np

from rkm._kernel_table import names_with

LAYER_KERNELS = names_with("level_derivatives")


def _kernel_number(value, what, argument, positive=False):
    valid = not isinstance(value, bool) and isinstance(value, numbers.Real) and np.isfinite(value)
    if not valid or (positive and value <= 0):
        kind = "a positive finite number" if positive else "a finite number"
        raise ValueError(f"{argument}: {what} must be {kind}, got {value!r}")
    return float(value)


def layer_kernel(spec, argument, allowed=LAYER_KERNELS):
    """A layer kernel tuple (name, gamma, degree, coef0), validated, as a dict of floats; errors name
    `argument`."""
    if not isinstance(spec, (tuple, list)) or len(spec) != 4:
        raise ValueError(f"{argument}: each entry must be a (name, gamma, degree, coef0) tuple, got {spec!r}")
    name, gamma, degree, coef0 = spec
    if not isinstance(name, str) or name not in allowed:
        raise ValueError(f"{argument}: unknown kernel {name!r}; choose one of {', '.join(allowed)}")
    kernel = dict(name=name, gamma=1.0, degree=1.0, coef0=0.0)
    if name == "linear":
        return kernel
    kernel["gamma"] = _kernel_number(gamma, f"the {name} gamma", argument, positive=True)
    if name == "poly":
        kernel["degree"] = _kernel_number(degree, "the poly degree", argument)
        if kernel["degree"] < 0 or not float(kernel["degree"]).is_integer():
            raise ValueError(f"{argument}: the poly degree must be a non-negative integer, got {degree!r}")
        kernel["coef0"] = _kernel_number(coef0, "the poly coef0", argument)
    return kernel


def pairwise(Z, kernel):
    """The level kernel matrix k(Z, Z) and, for poly, the bases gamma Z Z^T + coef0 (else None)."""
    name, gamma = kernel["name"], kernel["gamma"]
    if name in ("rbf", "laplacian"):
        return np.exp(-gamma * distances(Z, name)), None
    inner = Z @ Z.T
    if name == "linear":
        return inner, None
    base = gamma * inner + kernel["coef0"]
    return base ** kernel["degree"], base


def weighted_derivative(Z, P, K, base, kernel):
    """KG(Z; P)_i = sum_j P_ij d/dz k(z, z_j) at z = z_i, for the level kernel matrix K = k(Z, Z)."""
    name, gamma = kernel["name"], kernel["gamma"]
    if name == "rbf":
        M = P * K
        return -2.0 * gamma * (M.sum(axis=1)[:, None] * Z - M @ Z)
    if name == "laplacian":
        M = P * K
        return -gamma * np.column_stack([(M * np.sign(z[:, None] - z[None, :])).sum(axis=1) for z in Z.T])
    if name == "linear":
        return P @ Z
    degree = kernel["degree"]
    if degree == 0:  # a constant kernel
        return np.zeros_like(Z)
    return (P * (degree * gamma * base ** (degree - 1))) @ Z


def distances(Z, name):
    """Squared Euclidean (rbf) or L1 (laplacian) distances between the rows of Z."""
    if name == "laplacian":
        return sum(np.abs(z[:, None] - z[None, :]) for z in Z.T)
    Z = Z - Z.mean(axis=0)  # distances do not change; the shift removes most of the cancellation below
    norms = np.einsum("ia,ia->i", Z, Z)
    squared = np.maximum(norms[:, None] + norms[None, :] - 2.0 * (Z @ Z.T), 0.0)
    np.fill_diagonal(squared, 0.0)  # exact, as the core's kernels: rounding would leave ~eps ||z||^2 there
    return squared
