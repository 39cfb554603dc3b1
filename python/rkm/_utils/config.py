"""Build and run-time configuration, for bug reports."""

import platform

import numpy as np
from threadpoolctl import threadpool_info

from rkm import _core
from rkm._utils.openmp import wait_policy


def config():
    """The configuration as a dict: core build facts plus the Python side."""
    info = dict(_core.config())
    info["omp_wait_policy"] = wait_policy()
    info["python"] = platform.python_version()
    info["numpy"] = np.__version__
    info["blas_libraries"] = [
        f"{lib.get('internal_api')} {lib.get('version')} ({lib.get('num_threads')} threads)"
        for lib in threadpool_info()
        if lib.get("user_api") == "blas"
    ]
    return info


def show_config():
    """Print version, compiler, OpenMP and threads, dtypes, CUDA, Eigen and BLAS in use."""
    info = config()
    width = max(map(len, info))
    for key, value in info.items():
        if isinstance(value, (list, tuple)):
            value = ", ".join(map(str, value))
        print(f"{key:>{width}}: {value}")
