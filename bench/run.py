"""Run the full benchmark suite and record it in bench/RESULTS.md (same as `rkm bench --output ...`)."""

import sys

from _common import RESULTS

from rkm.cli.bench import main

if __name__ == "__main__":
    command = " ".join(["python bench/run.py", *sys.argv[1:]])
    sys.exit(main(["--output", str(RESULTS), *sys.argv[1:]], command=command))
