"""Build and run-time configuration, for bug reports."""

import platform

import numpy as np
from threadpoolctl import threadpool_info

from rkm import _core
from rkm._utils.openmp import wait_policy

NO_OPENMP_WARNING = (
    "warning: rkm's compiled core was built without OpenMP and runs single-threaded (n_threads has no effect); "
    "build it with a compiler that supports OpenMP for parallel fits"
)


def config():
    """The configuration as a dict: core build facts plus the Python side."""
    info = dict(_core.config())
    info.update(cuda_config())
    info["omp_wait_policy"] = wait_policy()
    info["python"] = platform.python_version()
    info["numpy"] = np.__version__
    info["blas_libraries"] = [
        f"{lib.get('internal_api')} {lib.get('version')} ({lib.get('num_threads')} threads)"
        for lib in threadpool_info()
        if lib.get("user_api") == "blas"
    ]
    return info


def cuda_config():
    """The CUDA path's lines: devices (name, memory, compute capability) or why there are none."""
    cuda = _core.cuda_info()
    if not cuda["compiled"]:
        return {}
    devices = [
        f"{d['index']}: {d['name']}, {d['total_bytes'] / 2**30:.1f} GiB, "
        f"sm_{d['compute_capability'][0]}{d['compute_capability'][1]}, {d['multiprocessors']} SMs"
        for d in cuda["devices"]
    ]
    return {
        "cuda_architectures": cuda["architectures"],
        "cuda_runtime": _version(cuda["runtime_version"]),
        "cuda_driver": _version(cuda["driver_version"]) if cuda["driver_version"] else "none",
        "cuda_devices": devices or [cuda["reason"]],
        "cuda_cublas": cuda["cublas"] or "not loaded yet (loaded at the first GPU routine)",
    }


def _version(number):
    """CUDA's major * 1000 + minor * 10 as "major.minor"."""
    return f"{number // 1000}.{number % 1000 // 10}"


def show_config():
    """Print version, compiler, OpenMP and threads, dtypes, CUDA, Eigen and BLAS in use.

    A core built without OpenMP gets a warning line after the table: its routines run on one thread whatever
    ``n_threads`` asks for.
    """
    info = config()
    width = max(map(len, info))
    for key, value in info.items():
        if isinstance(value, (list, tuple)):
            value = ", ".join(map(str, value))
        print(f"{key:>{width}}: {value}")
    if not info["openmp"]:
        print(NO_OPENMP_WARNING)
