"""Kernel autoencoders (Laforgue, Clémençon & d'Alché-Buc 2019): section 5.1 and the gradient's speed.

Parts, each writing one subsection of "Kernel autoencoders (Laforgue et al. 2019)" in bench/RESULTS.md (the
section bench/kae_molecules.py also writes to), its records as bench/figures/kae_<part>.json and PNG plots:

- ``toy`` (section 5.1, Fig. 3, Appendix C.1): three noisy concentric circles, three Gaussian clusters and two
  moons; a 2-1-2 KAE against PCA (the optimal linear 2-1-2 autoencoder) and an MLP autoencoder, held-out
  reconstruction error over seeds, fit times, hyperparameters chosen on validation data; plots
  bench/figures/kae_circles.png (the Fig. 3 panels), kae_clusters.png, kae_moons.png (bench/_kae_toy.py).
- ``perf`` (the issue's performance targets): one loss + gradient of a 2-10-5-2 KAE at n = 300 by the core's
  adjoint gradient, the core's Jacobian recursions and the NumPy reference's adjoint gradient, same-run ratios,
  and the growth with n as a log-log plot bench/figures/kae_perf.png (bench/_kae_perf.py).

Threads (threadpoolctl): the core (KAE fits, the core's gradients) with ``--n-threads`` OpenMP threads and one BLAS
thread (it calls BLAS inside its OpenMP loops), the NumPy reference with ``--n-threads`` BLAS threads, PCA and the
MLP with one BLAS thread; the perf part's targets also at 1 and 2 threads. The default is one thread: on these 2
cores, shared with other work, any other busy process made each two-thread call of the core wait ~70 ms (against
1 ms for the whole call at n = 300 on a quiet machine) and two BLAS threads made the MLP 10-30x slower.

    python bench/kae.py                       # both parts: about 6-7 minutes on 2 cores (toy 3.5-5, perf 2.5)
    python bench/kae.py --part perf
    python bench/kae.py --quick               # small sizes, about 30 s: a smoke test that prints its text and
                                              # leaves RESULTS.md and bench/figures alone
    python bench/kae.py --from-records        # re-render text and plots from bench/figures/kae_<part>.json
"""

import json
import pathlib
import tempfile
import time

from _common import (
    FIGURES,
    KAE_HEADING,
    KAE_INTRODUCTION,
    KAE_ORDER,
    KAE_PERF_TITLE,
    KAE_TOY_TITLE,
    load_average,
    log,
    pinned_threads,
    script_parser,
    write_bench_part,
)

from rkm.cli.report import provenance

SCRIPT = "bench/kae.py"
TITLES = {"toy": KAE_TOY_TITLE, "perf": KAE_PERF_TITLE}
PARTS = tuple(TITLES)


def run_part(part, quick, n_threads):
    if part == "toy":
        from _kae_toy import part_toy

        return part_toy(quick, n_threads)
    from _kae_perf import part_perf

    return part_perf(quick, n_threads)


def render(part, records, directory=FIGURES):
    """(text, figures) of a part from its records; the figures are written to ``directory``."""
    if part == "toy":
        from _kae_toy import plot_toy, table_toy

        return table_toy(records), plot_toy(records, directory)
    from _kae_perf import plot_perf, table_perf

    return table_perf(records, records["run"]["n_threads"]), plot_perf(records, directory)


def write_part(part, records, n_threads, rerendered):
    text, figures = render(part, records)
    run = records["run"]
    facts = (
        f"1-minute load average {run['load_start']:.2f} at the start, {run['load_end']:.2f} at the end; "
        f"{run['minutes']:.1f} min"
    )
    if rerendered:
        facts += f". Text and plots re-rendered from the records of the run: {run['provenance'].rstrip('.')}"
    section = (KAE_HEADING, KAE_INTRODUCTION, KAE_ORDER, TITLES[part])
    write_bench_part(SCRIPT, f"kae_{part}", records, text, figures, facts, n_threads, section)


def show_quick(part, records):
    """A quick run's output: text on stdout, records and plots in a fresh temporary folder, so that the full
    run's subsection, records and plots stay as they are."""
    directory = pathlib.Path(tempfile.mkdtemp(prefix=f"kae_{part}_quick_"))
    (directory / f"kae_{part}.json").write_text(json.dumps(records, indent=0, default=float))
    print(render(part, records, directory)[0])
    log(f"quick run of part {part}: records and plots in {directory}")


def measure(part, args):
    """Run a part and add what the report says about the run."""
    start, load_start = time.perf_counter(), load_average()
    with pinned_threads(args.n_threads):
        records = run_part(part, args.quick, args.n_threads)
    records["run"] = {
        "n_threads": args.n_threads,
        "quick": args.quick,
        "load_start": load_start,
        "load_end": load_average(),
        "minutes": (time.perf_counter() - start) / 60,
        "provenance": provenance(SCRIPT, args.n_threads),
    }
    return records


def main():
    parser = script_parser(
        __doc__,
        PARTS,
        n_threads=1,
        from_records=True,
        quick="small sizes, 2 seeds, short caps (a smoke test: prints, leaves RESULTS.md alone)",
    )
    args = parser.parse_args()
    FIGURES.mkdir(exist_ok=True)
    for part in args.part:
        log(f"part {part}")
        if args.from_records:
            records = json.loads((FIGURES / f"kae_{part}.json").read_text())
            write_part(part, records, records["run"]["n_threads"], rerendered=True)
        elif args.quick:
            show_quick(part, measure(part, args))
        else:
            write_part(part, measure(part, args), args.n_threads, rerendered=False)
        log(f"part {part} done")


if __name__ == "__main__":
    main()
