"""Run the full benchmark suite and record it in bench/RESULTS.md (same as `rkm bench --output ...`)."""

import pathlib
import sys

from rkm.cli.bench import main

if __name__ == "__main__":
    results = pathlib.Path(__file__).with_name("RESULTS.md")
    command = " ".join(["python bench/run.py", *sys.argv[1:]])
    sys.exit(main(["--output", str(results), *sys.argv[1:]], command=command))
