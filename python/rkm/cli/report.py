"""Markdown reports of measurements: the tables, sections and provenance lines that ``rkm bench`` and the
scripts of bench/ write into bench/RESULTS.md, and the child processes that measure peak memory."""

import datetime
import multiprocessing
import os
import platform
import sys

import numpy as np

from rkm._utils.config import config


def markdown_table(header, rows):
    """A markdown table of strings: the header row, the rule and one line per row."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def write_section(path, heading, section):
    """Put `section` (starting with the line `heading`) into the markdown file at `path`.

    It replaces the part of the file from `heading` to the next heading of the same level, or is appended
    (to a new "# Benchmark results" file when there is none), so the rest of the report stays as it was.
    """
    level = _heading_level(heading)
    try:
        with open(path) as handle:
            lines = handle.read().splitlines()
    except FileNotFoundError:
        lines = ["# Benchmark results"]
    start = lines.index(heading) if heading in lines else len(lines)
    end = next((i for i in range(start + 1, len(lines)) if 0 < _heading_level(lines[i]) <= level), len(lines))
    before, after = lines[:start], lines[end:]
    while before and not before[-1]:
        before.pop()
    lines = before + [""] + section.strip("\n").splitlines() + ([""] + after if after else [])
    with open(path, "w") as handle:
        handle.write("\n".join(lines) + "\n")


def write_report(path, report):
    """Write the suite's `report` to `path`, keeping the sections other benchmarks wrote there (the background
    load comparison, bench/large_n.py, bench/dask_overhead.py) after it."""
    try:
        with open(path) as handle:
            lines = handle.read().splitlines()
    except FileNotFoundError:
        lines = []
    headings = {line for line in report.splitlines() if _heading_level(line) == 2}
    kept = _other_sections(lines, headings)
    with open(path, "w") as handle:
        handle.write(report.rstrip("\n") + "\n" + ("\n" + "\n".join(kept).rstrip("\n") + "\n" if kept else ""))


def _other_sections(lines, headings):
    """The level-2 sections of `lines` whose headings are not in `headings`, each with its lines."""
    kept, keep = [], False
    for line in lines:
        if _heading_level(line) in (1, 2):
            keep = _heading_level(line) == 2 and line not in headings
        if keep:
            kept.append(line)
    return kept


def _heading_level(line):
    """1 for "# title", 2 for "## title" and so on; 0 for a line that is no markdown heading."""
    hashes = len(line) - len(line.lstrip("#"))
    return hashes if hashes and line[hashes : hashes + 1] == " " else 0


def provenance(script, n_threads):
    """The line that opens a section written by a bench/ script: its command line, the date, the machine (with
    the SIMD code the core runs there), the thread count and the versions."""
    info = config()
    options = " " + " ".join(sys.argv[1:]) if sys.argv[1:] else ""
    return (
        f"Written by `python {script}{options}` on {datetime.date.today().isoformat()}: {platform.machine()} "
        f"({info['simd_isa']} code), "
        f"{os.cpu_count()} cores, {n_threads} threads (OpenMP and BLAS), rkm {info['version']} "
        f"({info['compiler']}), NumPy {np.__version__}."
    )


def run_in_child(child, case, kwargs):
    """Run child(case, kwargs, queue) in a fresh (spawned) process, so that its peak memory is its own; return
    the dict it puts on the queue, raising RuntimeError when that dict reports a failure."""
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    process = context.Process(target=child, args=(case, kwargs, queue))
    process.start()
    result = queue.get()
    process.join()
    if "failure" in result:
        raise RuntimeError(f"{case} {kwargs}: {result['failure']}")
    return result


def memory_status(field):
    """A memory field of /proc/self/status (such as VmRSS, or VmHWM, the peak resident size) in bytes."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"/proc/self/status has no {field}")
