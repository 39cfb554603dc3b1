"""Command-line interface: ``rkm info``, ``rkm demo``, ``rkm bench`` and ``rkm --version``."""

import argparse
import importlib
import os
import sys

from rkm import __version__
from rkm._utils.config import show_config
from rkm.cli._args import ArgumentParser, fail, n_threads, output_folder, positive_int
from rkm.cli.demo import REFERENCE_MAX_SAMPLES, run_demo


def _run_info(args):
    show_config()
    return 0


def _run_demo(args):
    try:
        return 0 if run_demo(args)["ok"] else 1
    except OSError as error:
        # The folder was checked when parsed; it can still fail later (disk full, removed meanwhile).
        return fail("rkm demo", error)


def _run_bench(args):
    # Imported here so the other commands work without the benchmark module's dependencies.
    benchmarks = importlib.import_module("rkm.cli.bench")
    status = benchmarks.main(args.args)
    return 0 if status is None else status


def build_parser():
    """The argument parser of the ``rkm`` command."""
    parser = ArgumentParser(prog="rkm", description="Restricted kernel machines with a fast C++ core.")
    parser.add_argument("--version", action="version", version=f"rkm {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    info = commands.add_parser("info", help="print the build and run-time configuration")
    info.set_defaults(run=_run_info)

    demo_help = (
        "kernel PCA and denoising on embedded data, timed against scikit-learn and checked against it "
        "and the NumPy reference"
    )
    demo = commands.add_parser("demo", help=demo_help, description=demo_help)
    demo.add_argument(
        "--output",
        type=output_folder,
        default="rkm-demo-output",
        metavar="DIR",
        help="folder for the plots, created if needed; checked before the demo starts (default: %(default)s)",
    )
    demo.add_argument("--quick", action="store_true", help="smaller data sets (MNIST 2000, square 1000 points)")
    demo.add_argument(
        "--n-threads",
        type=n_threads,
        default=None,
        metavar="N",
        help="threads for rkm and BLAS (default: OpenMP's default; -1: all cores)",
    )
    demo.add_argument("--seed", type=int, default=0, metavar="S", help="seed of the noisy square and the solvers")
    demo.add_argument(
        "--repeats",
        type=positive_int,
        default=1,
        metavar="R",
        help="time the best of R runs of each fit (default: %(default)s)",
    )
    demo.add_argument(
        "--with-reference",
        action="store_true",
        help=f"check every data set against the slow NumPy reference (default: only those with "
        f"N <= {REFERENCE_MAX_SAMPLES})",
    )
    demo.set_defaults(run=_run_demo)

    bench = commands.add_parser("bench", add_help=False, help="run the benchmarks (rkm bench --help for options)")
    bench.add_argument("args", nargs=argparse.REMAINDER, help="arguments of rkm.cli.bench")
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
