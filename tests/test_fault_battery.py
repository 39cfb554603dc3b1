"""The fast subset of bench/fault_battery.py: every 25th scenario of the full battery (bad inputs, faults and
misuse of every public estimator, feature map and function, each in a child process) ends without a crash, a
hang, a silent NaN/inf or a result that threads or pickling changed."""

import json
import pathlib
import subprocess
import sys

BATTERY = pathlib.Path(__file__).parents[1] / "bench" / "fault_battery.py"


def test_the_quick_battery_finds_no_fault():
    result = subprocess.run(
        [sys.executable, str(BATTERY), "--quick", "--json", "--print-failures", "--timeout", "300"],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    totals = json.loads(result.stdout.strip().splitlines()[-1])
    assert totals["calls"] > 400
    faults = {outcome: totals[outcome] for outcome in ("crash", "hang", "silent non-finite", "inconsistent")}
    assert faults == dict.fromkeys(faults, 0), result.stdout[-6000:]
    assert result.returncode == 0
