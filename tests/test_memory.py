"""The memory guard reads every limit the process runs under: MemAvailable, the cgroup, RLIMIT_AS."""

import subprocess
import sys
import textwrap

import pytest

from rkm._utils import validation

_FIT_UNDER_ULIMIT = textwrap.dedent(
    """
    import resource, numpy as np, rkm
    X = np.random.default_rng(0).normal(size=(20_000, 2))
    resource.setrlimit(resource.RLIMIT_AS, (3 * 2**30, resource.RLIM_INFINITY))
    try:
        rkm.LSSVMRegressor().fit(X, X[:, 0])
    except MemoryError as error:
        print("MemoryError:", error)
    """
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS and /proc are Linux's")
def test_an_address_space_limit_stops_the_fit_with_the_guards_message():
    # The 20 000 x 20 000 kernel (3.2 GB) fits the machine's memory but not the 3 GiB address space.
    result = subprocess.run([sys.executable, "-c", _FIT_UNDER_ULIMIT], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "MemoryError:" in result.stdout and "GiB" in result.stdout and "available" in result.stdout


def test_the_least_of_the_limits_is_available(monkeypatch):
    monkeypatch.setattr(validation, "_meminfo_available", lambda: 8 * 2**30)
    monkeypatch.setattr(validation, "_cgroup_available", lambda: 2 * 2**30)
    monkeypatch.setattr(validation, "_address_space_available", lambda: None)
    assert validation.available_memory_bytes() == 2 * 2**30
    with pytest.raises(MemoryError, match="X: a 30000 x 30000 float64 matrix needs"):
        validation.check_fits_in_memory((30_000, 30_000), "float64", "X")


def test_cgroup_limits_are_read_from_v2_and_v1_files(monkeypatch, tmp_path):
    v2 = tmp_path / "v2"
    v2.mkdir()
    (v2 / "memory.max").write_text("1073741824\n")
    (v2 / "memory.current").write_text("73741824\n")
    monkeypatch.setattr(validation, "_cgroup_dirs", lambda: ([str(v2)], []))
    assert validation._cgroup_available() == 1_000_000_000
    (v2 / "memory.max").write_text("max\n")
    v1 = tmp_path / "v1"
    v1.mkdir()
    (v1 / "memory.limit_in_bytes").write_text("2000000000\n")
    (v1 / "memory.usage_in_bytes").write_text("500000000\n")
    monkeypatch.setattr(validation, "_cgroup_dirs", lambda: ([str(v2)], [str(v1)]))
    assert validation._cgroup_available() == 1_500_000_000
