"""Command-line interface: ``rkm info``, ``rkm demo``, ``rkm bench`` and ``rkm --version``."""

import argparse
import importlib
import os
import sys
import time
from pathlib import Path

import numpy as np
from scipy.spatial import cKDTree
from sklearn.base import clone
from sklearn.decomposition import KernelPCA as SklearnKernelPCA

from rkm import __version__, reference
from rkm._base import blas_threads, check_n_threads, thread_count
from rkm._config import show_config
from rkm.datasets import load_digits, load_mnist_subset, make_square
from rkm.kernels import RBF
from rkm.kpca import KernelPCA

# Eigenvalues of the three implementations must agree to this relative accuracy.
EIGENVALUE_RTOL = 1e-6
# Components kept for the digit sets.
DIGIT_COMPONENTS = 10
# Constr-DRKM's MNIST bandwidth: sigma^2 = 50 in exp(-d^2 / (2 sigma^2)), i.e. gamma = 0.01.
MNIST_GAMMA = RBF.from_sigma(sigma2=50, convention="gaussian").gamma
# Noise level sigma_n and bandwidth (sigma = 0.3 in the gaussian convention) for the unit-scale square.
SHAPE_NOISE = 0.1
SHAPE_GAMMA = 1.0 / (2 * 0.3**2)
# The square's four sides and corners need more components than a smooth curve to be rebuilt.
SHAPE_COMPONENTS = 16
PREIMAGES = ("fixed_point", "smoother")
# Eigenvalues shown in the spectrum plots.
SPECTRUM_SHOWN = 50


def _say(message=""):
    """Print a line at once, so progress shows while a long step runs."""
    print(message, flush=True)


def _best_time(function, repeats):
    """Run ``function`` ``repeats`` times; return the fastest wall-clock time and the last result."""
    best = np.inf
    for _ in range(repeats):
        start = time.perf_counter()
        result = function()
        best = min(best, time.perf_counter() - start)
    return best, result


def _max_relative_difference(values, expected):
    return float(np.max(np.abs(values - expected) / np.abs(expected)))


# ---------------------------------------------------------------------------------------- fitting


def _reference_spectrum(X, gamma):
    """All eigenvalues of the centred rbf kernel matrix by the pure NumPy path, descending."""
    K = reference.kernel_matrix(X, None, "rbf", gamma)
    reference.center_kernel(K)
    return reference.eigh(K)[0]


def compare_fits(X, gamma, n_components, settings):
    """Fit rbf kernel PCA with rkm, the NumPy reference and scikit-learn and compare them.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
    gamma : float
        rbf bandwidth, exp(-gamma ||x - y||^2).
    n_components : int
    settings : argparse.Namespace
        ``n_threads``, ``seed`` and ``repeats`` of the demo.

    Returns
    -------
    dict
        ``n_samples``, ``n_features``, ``n_components``, ``gamma``; ``model``, the fitted
        :class:`rkm.KernelPCA`; ``times`` (seconds per implementation); ``relative_difference`` of
        rkm's eigenvalues to the reference's and scikit-learn's; ``agree``; ``spectrum``, the full
        reference spectrum; ``explained_variance``, the kept eigenvalues over trace(K_c).
    """
    model = KernelPCA(n_components, gamma=gamma, n_threads=settings.n_threads, random_state=settings.seed)
    sklearn_model = SklearnKernelPCA(
        n_components, kernel="rbf", gamma=gamma, eigen_solver="arpack", random_state=settings.seed
    )
    times = {}
    times["rkm"], _ = _best_time(lambda: model.fit(X), settings.repeats)
    _say(f"  rkm.KernelPCA.fit          {times['rkm']:8.3f} s  ({model.eigen_solver_} solver)")
    # The other two use BLAS directly; holding them to the same threads keeps the comparison fair.
    with blas_threads(thread_count(settings.n_threads)):
        times["reference"], spectrum = _best_time(lambda: _reference_spectrum(X, gamma), settings.repeats)
        _say(f"  reference (NumPy, eigh)    {times['reference']:8.3f} s")
        times["sklearn"], _ = _best_time(lambda: sklearn_model.fit(X), settings.repeats)
        _say(f"  sklearn KernelPCA (arpack) {times['sklearn']:8.3f} s")
    difference = {
        "reference": _max_relative_difference(model.eigenvalues_, spectrum[:n_components]),
        "sklearn": _max_relative_difference(model.eigenvalues_, sklearn_model.eigenvalues_),
    }
    agree = max(difference.values()) <= EIGENVALUE_RTOL
    verdict = "agree" if agree else f"DISAGREE (tolerance {EIGENVALUE_RTOL:g})"
    _say(
        f"  eigenvalues {verdict}: max relative difference {difference['reference']:.1e} to the reference, "
        f"{difference['sklearn']:.1e} to scikit-learn"
    )
    return {
        "n_samples": X.shape[0],
        "n_features": X.shape[1],
        "n_components": n_components,
        "gamma": gamma,
        "model": model,
        "times": times,
        "relative_difference": difference,
        "agree": agree,
        "spectrum": spectrum,
        # trace(K_c) is the sum of all its eigenvalues, so no kernel diagonal is needed.
        "explained_variance": float(model.eigenvalues_.sum() / spectrum.sum()),
    }


# ---------------------------------------------------------------------------------------- steps


def _digits_step(settings):
    digits = load_digits()
    X = digits.data
    # scikit-learn's gamma="scale" of SVC: unit kernel argument for a typical squared distance.
    gamma = 1.0 / (X.shape[1] * X.var())
    _say(f"  {digits.description}; rbf gamma = 1 / (d var(X)) = {gamma:.4f}")
    result = compare_fits(X, gamma, DIGIT_COMPONENTS, settings)
    result["target"] = digits.target
    return result


def _mnist_step(settings):
    n_samples = 2000 if settings.quick else None
    try:
        mnist = load_mnist_subset(n_samples)
    except ImportError as error:
        _say(f"  skipped: {error}")
        return None
    _say(f"  {mnist.description}; rbf sigma^2 = 50 (gaussian convention), gamma = {MNIST_GAMMA:g}")
    return compare_fits(mnist.data, MNIST_GAMMA, DIGIT_COMPONENTS, settings)


def _distance_to_curve(points, curve):
    """Mean squared distance from each point to the nearest point sampled on the clean curve."""
    return float(np.mean(cKDTree(curve).query(points)[0] ** 2))


def _shape_step(settings):
    n_samples = 1000 if settings.quick else 3000
    square = make_square(n_samples, noise=SHAPE_NOISE, random_state=settings.seed)
    _say(f"  {square.description}; rbf sigma = 0.3 (gamma = {SHAPE_GAMMA:.3f})")
    result = compare_fits(square.data, SHAPE_GAMMA, SHAPE_COMPONENTS, settings)
    errors = {"noisy": _distance_to_curve(square.data, square.clean)}
    denoised, denoise_times = {}, {}
    for preimage in PREIMAGES:
        model = clone(result["model"]).set_params(preimage=preimage).fit(square.data)
        denoise_times[preimage], denoised[preimage] = _best_time(lambda: model.denoise(square.data), 1)
        errors[preimage] = _distance_to_curve(denoised[preimage], square.clean)
        _say(
            f"  denoise ({preimage + ')':12} {denoise_times[preimage]:8.3f} s  mean squared distance to the "
            f"curve {errors['noisy']:.5f} -> {errors[preimage]:.5f} ({errors['noisy'] / errors[preimage]:.1f}x lower)"
        )
    result.update(data=square.data, clean=square.clean, denoised=denoised, errors=errors, denoise_times=denoise_times)
    result["improved"] = all(errors[preimage] < errors["noisy"] for preimage in PREIMAGES)
    return result


# ---------------------------------------------------------------------------------------- report


def format_table(header, rows):
    """Align rows of strings in columns: the first left-aligned, the others right-aligned."""
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]

    def line(row):
        return "  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths)))

    return "\n".join([line(header), "  ".join("-" * w for w in widths), *map(line, rows)])


def _fit_row(name, result):
    times = result["times"]
    return [
        name,
        str(result["n_samples"]),
        str(result["n_features"]),
        str(result["n_components"]),
        f"{result['explained_variance']:.1%}",
        f"{times['rkm']:.3f}",
        f"{times['reference']:.3f}",
        f"{times['sklearn']:.3f}",
        f"{times['reference'] / times['rkm']:.1f}x",
        f"{times['sklearn'] / times['rkm']:.1f}x",
    ]


def _report(results):
    header = ["dataset", "N", "d", "s", "expl.var", "rkm [s]", "ref [s]", "sklearn [s]", "ref/rkm", "sklearn/rkm"]
    rows = [_fit_row(name, result) for name, result in results["datasets"].items() if result is not None]
    _say("\nKernel PCA fits (rbf; times are the best of --repeats runs)")
    _say(format_table(header, rows))
    shape = results["datasets"]["square"]
    errors = shape["errors"]
    denoise_rows = [["noisy input", f"{errors['noisy']:.5f}", "1.0x", "-"]] + [
        [preimage, f"{errors[preimage]:.5f}", f"{errors['noisy'] / errors[preimage]:.1f}x",
         f"{shape['denoise_times'][preimage]:.3f}"]
        for preimage in PREIMAGES
    ]
    _say(f"\nDenoising the square (noise {SHAPE_NOISE:g}, {shape['n_components']} components)")
    _say(format_table(["pre-image", "mean sq. distance to curve", "reduction", "time [s]"], denoise_rows))


# ---------------------------------------------------------------------------------------- plots


def _plot_spectrum(figure_class, name, result, path):
    figure = figure_class(figsize=(6, 4))
    ax = figure.subplots()
    shown = result["spectrum"][:SPECTRUM_SHOWN]
    shown = shown[shown > 0]
    index = np.arange(1, shown.size + 1)
    kept = index <= result["n_components"]
    ax.semilogy(index[kept], shown[kept], "o", label=f"kept ({result['n_components']})")
    ax.semilogy(index[~kept], shown[~kept], "o", mfc="none", color="grey", label="discarded")
    ax.set(xlabel="index", ylabel="eigenvalue of $K_c$",
           title=f"{name}: rbf kernel PCA spectrum (N = {result['n_samples']})")
    ax.legend()
    figure.savefig(path, dpi=100, bbox_inches="tight")


def _plot_embedding(figure_class, result, path):
    figure = figure_class(figsize=(6, 5))
    ax = figure.subplots()
    hidden = result["model"].H_
    points = ax.scatter(hidden[:, 0], hidden[:, 1], c=result["target"], cmap="tab10", s=6,
                        vmin=-0.5, vmax=9.5)  # one colour band centred on each digit
    figure.colorbar(points, ax=ax, label="digit", ticks=range(10))
    ax.set(xlabel="$h_1$", ylabel="$h_2$", title="digits: first two hidden features")
    figure.savefig(path, dpi=100, bbox_inches="tight")


def _plot_denoising(figure_class, result, path):
    figure = figure_class(figsize=(13, 4.5))
    panels = [("noisy", result["data"])] + [(f"denoised ({p})", result["denoised"][p]) for p in PREIMAGES]
    error_keys = ["noisy", *PREIMAGES]
    for ax, (title, points), key in zip(figure.subplots(1, 3, sharex=True, sharey=True), panels, error_keys):
        ax.plot(*result["clean"].T, ".", color="lightgrey", ms=2)
        ax.plot(*points.T, ".", ms=3)
        ax.set(title=f"{title}\nmean sq. distance {result['errors'][key]:.5f}", aspect="equal")
    figure.savefig(path, dpi=100, bbox_inches="tight")


def save_plots(results, output):
    """Write the demo's PNG plots into ``output``; return their paths (none without matplotlib)."""
    try:
        # Figure without pyplot renders with Agg and leaves the caller's backend alone.
        from matplotlib.figure import Figure
    except ImportError:
        _say("plots skipped: matplotlib is not installed (pip install 'rkm[plot]')")
        return []
    datasets = results["datasets"]
    paths = []
    for name in ("digits", "mnist"):
        if datasets[name] is not None:
            paths.append(output / f"spectrum_{name}.png")
            _plot_spectrum(Figure, name, datasets[name], paths[-1])
    paths.append(output / "embedding_digits.png")
    _plot_embedding(Figure, datasets["digits"], paths[-1])
    paths.append(output / "denoising_square.png")
    _plot_denoising(Figure, datasets["square"], paths[-1])
    _say("plots: " + ", ".join(path.name for path in paths))
    return paths


# ---------------------------------------------------------------------------------------- demo


def run_demo(settings):
    """Run the demo: fits and timings on digits, MNIST and a noisy square, a report and plots.

    Parameters
    ----------
    settings : argparse.Namespace
        ``output`` (folder), ``quick``, ``n_threads``, ``seed`` and ``repeats``.

    Returns
    -------
    dict
        ``datasets``: the result of each step by name ("digits", "mnist" (None when skipped),
        "square"); ``plots``: the PNG paths written; ``output``: the output folder; ``ok``: whether
        all eigenvalues agreed and denoising lowered the error.
    """
    output = Path(settings.output).resolve()
    output.mkdir(parents=True, exist_ok=True)
    steps = [
        ("digits", "Kernel PCA on the digits", _digits_step),
        ("mnist", "Kernel PCA on the MNIST subset", _mnist_step),
        ("square", "Denoising a noisy square", _shape_step),
    ]
    datasets = {}
    for number, (name, title, step) in enumerate(steps, 1):
        _say(f"[{number}/{len(steps)}] {title}")
        elapsed, datasets[name] = _best_time(lambda: step(settings), 1)
        _say(f"  step done in {elapsed:.1f} s")
    results = {"datasets": datasets, "output": output}
    _report(results)
    results["plots"] = save_plots(results, output)
    fitted = [result for result in datasets.values() if result is not None]
    results["ok"] = all(result["agree"] for result in fitted) and datasets["square"]["improved"]
    if not results["ok"]:
        _say("FAILED: eigenvalues disagree or denoising did not lower the error")
    _say(f"output folder: {output}")
    return results


# ---------------------------------------------------------------------------------------- commands


def _run_info(args):
    show_config()
    return 0


def _run_demo(args):
    return 0 if run_demo(args)["ok"] else 1


def _run_bench(args):
    # Imported here so the other commands work without the benchmark module's dependencies.
    benchmarks = importlib.import_module("rkm.benchmarks")
    status = benchmarks.main(args.args)
    return 0 if status is None else status


def _threads(text):
    try:
        return check_n_threads(int(text))
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from error


def _positive_int(text):
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def build_parser():
    """The argument parser of the ``rkm`` command."""
    parser = argparse.ArgumentParser(prog="rkm", description="Restricted kernel machines with a fast C++ core.")
    parser.add_argument("--version", action="version", version=f"rkm {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    info = commands.add_parser("info", help="print the build and run-time configuration")
    info.set_defaults(run=_run_info)

    demo_help = "kernel PCA and denoising on embedded data, timed against NumPy and scikit-learn"
    demo = commands.add_parser("demo", help=demo_help, description=demo_help)
    demo.add_argument("--output", default="rkm-demo-output", metavar="DIR",
                      help="folder for the plots, created if needed (default: %(default)s)")
    demo.add_argument("--quick", action="store_true", help="smaller data sets (MNIST 2000, square 1000 points)")
    demo.add_argument("--n-threads", type=_threads, default=None, metavar="N",
                      help="threads for rkm and BLAS (default: OpenMP's default; -1: all cores)")
    demo.add_argument("--seed", type=int, default=0, metavar="S", help="seed of the noisy square and the solvers")
    demo.add_argument("--repeats", type=_positive_int, default=1, metavar="R",
                      help="time the best of R runs of each fit (default: %(default)s)")
    demo.set_defaults(run=_run_demo)

    bench = commands.add_parser("bench", add_help=False, help="run the benchmarks (rkm bench --help for options)")
    bench.add_argument("args", nargs=argparse.REMAINDER, help="arguments of rkm.benchmarks")
    bench.set_defaults(run=_run_bench)
    return parser


def main(argv=None):
    """Run the ``rkm`` command with ``argv`` (default: the process arguments); return the exit code."""
    argv = sys.argv[1:] if argv is None else [os.fspath(arg) for arg in argv]
    if argv[:1] == ["bench"]:
        # argparse.REMAINDER drops options that come first ("rkm bench --quick"), so all that follows
        # "bench" goes to the benchmarks untouched.
        args = argparse.Namespace(run=_run_bench, args=argv[1:])
    else:
        args = build_parser().parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
