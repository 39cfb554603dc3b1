"""Constr-DRKM (Tonin, Patrinos & Suykens, 2021), section 5 with rkm.ConstrainedDeepRKM: Tables 1-2, Figs. 2-3.

Writes (or replaces) one subsection per part in the section "Constr-DRKM (Tonin et al. 2021)" of
bench/RESULTS.md, our numbers beside the paper's:

- ``table1`` (section 5.1): the training algorithms (projected gradient, Cayley Adam at the paper's and a
  tuned learning rate, the quadratic penalty of Algorithm 1, and the stronger Anderson-accelerated PG and
  Wen-Yin Cayley-BB) on N = 1000 MNIST digits, two RBF levels with sigma^2 = 50, s = (10, 5), from 5 random
  initializations and the level-wise one: final cost, feasibility, gradient norm, iterations, runtime; the
  agreement between methods and the runtime against 1% of the paper's (bench/_constr_table1.py).
- ``table2`` (section 5.2): denoising error ratio kernel PCA (3 components) / Constr-DRKM (s = (2, 1)) on the
  four 2-D shapes at noise 0.05, 0.1 and 0.2, bandwidths chosen on validation points
  (bench/_constr_table2.py).
- ``figures``: Figs. 2-3 style panels (one component at a time, and all) for the square + spiral and the
  two squares, spiral and ring, saved as bench/figures/constr_drkm_*.png (needs matplotlib).

Everything runs in this process with ``--n-threads`` OpenMP threads and a single-threaded BLAS (``core_threads`` in
bench/_common.py).

    python bench/constr_drkm.py                     # full: Table 1 about 25 min, Table 2 about 20 min
    python bench/constr_drkm.py --quick             # a few minutes
    python bench/constr_drkm.py --part table1
"""

import time

from _common import RESULTS, core_threads, load_average, log, script_parser, write_subsection
from _constr_table1 import part_table1
from _constr_table2 import part_figures, part_table2

from rkm.cli.report import provenance

HEADING = "## Constr-DRKM (Tonin et al. 2021)"
INTRODUCTION = (
    "Tonin, Patrinos & Suykens (2021), section 5, with `rkm.ConstrainedDeepRKM` and `rkm.stiefel.minimize` "
    "(bench/constr_drkm.py). Each part below was written by its own run; its first line names the command."
)
TITLES = {
    "table1": "### Table 1: training algorithms on MNIST (N = 1000, s = (10, 5))",
    "table2": "### Table 2: denoising error ratio, kernel PCA (3) / Constr-DRKM (2, 1)",
    "figures": "### Figs. 2-3: denoising with one component at a time",
}
PARTS = tuple(TITLES)


def main():
    parser = script_parser(
        __doc__,
        PARTS,
        quick="fewer initializations and iteration caps (Table 1), fewer points and a smaller grid (Table 2)",
    )
    parser.add_argument("--random-inits", type=int, help="Table 1 random initializations (default 5, quick 2)")
    parser.add_argument("--seed", type=int, default=0, help="Table 2 data seed offset")
    parser.add_argument("--output", default=str(RESULTS))
    args = parser.parse_args()
    args.random_inits = args.random_inits or (2 if args.quick else 5)

    cache = {}
    parts = {
        "table1": lambda: part_table1(args),
        "table2": lambda: part_table2(args, cache),
        "figures": lambda: part_figures(args, cache),
    }
    with core_threads(args.n_threads):
        for name in args.part:
            began, load = time.perf_counter(), load_average()
            text = parts[name]()
            seconds = time.perf_counter() - began
            header = (
                provenance("bench/constr_drkm.py", args.n_threads)
                + f" BLAS inside the solves: 1 thread (see bench/_common.py, `core_threads`). This part "
                f"took {seconds:.0f} s; 1-minute load average {load:.1f} at its start, {load_average():.1f} at "
                "its end (other processes share the cores)."
            )
            write_subsection(
                args.output, HEADING, INTRODUCTION, list(TITLES.values()), TITLES[name], header + "\n\n" + text
            )
            log(f'wrote "{TITLES[name][4:]}" to {args.output} ({seconds:.0f} s)')


if __name__ == "__main__":
    main()
