"""Smoke test of an installed wheel: the compiled core imports, computes a kernel matrix that agrees with
scikit-learn's, fits a KernelPCA, and `rkm info` runs. cibuildwheel runs it after each wheel (pyproject.toml,
test-command) and .ci/wheel after installing the repaired wheel where no compiler is on the PATH.

Run it from outside the source tree, so that `import rkm` finds the installed wheel, not python/rkm.
"""

import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import numpy as np
from sklearn.metrics.pairwise import rbf_kernel

import rkm
from rkm import _core
from rkm.kernels import kernel_matrix


def check_installed_wheel():
    source_tree = Path(__file__).resolve().parents[1]
    location = Path(rkm.__file__).resolve()
    assert source_tree not in location.parents, f"rkm imported from the source tree ({location}), not the wheel"
    print(f"rkm {rkm.__version__} from {location.parent}")


def check_openmp():
    # Every wheel is built with OpenMP: a wheel whose build lost it would run single-threaded unnoticed.
    assert _core.config()["openmp"], "the wheel's core was built without OpenMP"


def check_kernel_matrix():
    X = np.random.default_rng(0).standard_normal((50, 4))
    K = kernel_matrix(X, kernel="rbf", gamma=0.5)
    np.testing.assert_allclose(K, rbf_kernel(X, gamma=0.5), rtol=1e-10, atol=1e-12)


def check_kernel_pca():
    X = np.random.default_rng(1).standard_normal((80, 5))
    H = rkm.KernelPCA(n_components=3, kernel="rbf", gamma=0.2).fit_transform(X)
    assert H.shape == (80, 3) and np.isfinite(H).all()


def check_info_command():
    # The installed entry point, not `python -m`: the wheel must ship the console script too.
    command = shutil.which("rkm", path=sysconfig.get_path("scripts"))
    assert command is not None, f"no rkm command in {sysconfig.get_path('scripts')}"
    result = subprocess.run([command, "info"], capture_output=True, text=True, timeout=120, check=True)
    print(result.stdout, end="")
    assert rkm.__version__ in result.stdout


def main():
    check_installed_wheel()
    check_openmp()
    check_kernel_matrix()
    check_kernel_pca()
    check_info_command()
    print("wheel smoke test passed")


if __name__ == "__main__":
    sys.exit(main())
