"""Exact command timeouts and watchdog trips over the local virtual bus, N runs in a row beside a CPU hog.

Runs ``tests/test_can_vbus.py::test_deliberate_silences_are_counted_exactly_on_the_local_virtual_bus``
(the plant server and the ECU emulator in two processes on ``vbus``; the TCU is silent twice on purpose,
so the plant must count exactly 3 timeouts per command message and 2 watchdog trips) ``--runs`` times,
with ``--hogs`` busy-looping processes beside it (one per core the acceptance names: "a CPU hog on one
core").  A run passes (counts exact), fails (a count differs although nothing stalled), or is undefined
(the test skips when the TCU's task, the bus's delivery or the plant's loop stalled for 80 ms or more,
and says which): the table lists each run's outcome and the worst stall.

Run::

    python bench/check_vbus_hog.py --runs 20 --hogs 1

Exit status 0 only if every run passed.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import re
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _host import host_line, with_host  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
TEST = "tests/test_can_vbus.py::test_deliberate_silences_are_counted_exactly_on_the_local_virtual_bus"


def _hog() -> None:
    """Spin a core for ever (killed by the parent)."""
    x = 0
    while True:
        x += 1


def one_run() -> tuple[str, str]:
    """Run the test once: its outcome (passed, failed, undefined) and the line that says why."""
    r = subprocess.run([sys.executable, "-m", "pytest", TEST, "-q", "-rs", "-p", "no:cacheprovider"],
                       cwd=ROOT, capture_output=True, text=True, timeout=600)
    out = r.stdout + r.stderr
    if r.returncode == 0 and re.search(r"\b1 passed\b", out):
        return "passed", ""
    skip = re.search(r"SKIPPED \[1\] [^:]+:\d+: (.*)", out)
    if r.returncode == 0 and skip:
        return "undefined", skip.group(1)
    err = [line for line in out.splitlines() if line.startswith("E ")]
    return "failed", " / ".join(err[:3]) or out[-400:]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=20, help="runs in a row")
    ap.add_argument("--hogs", type=int, default=1, help="busy-looping processes beside the runs")
    ap.add_argument("--json", action="store_true", help="print the result as JSON too")
    args = ap.parse_args(argv)
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    hogs = [multiprocessing.Process(target=_hog, daemon=True) for _ in range(args.hogs)]
    for h in hogs:
        h.start()
    rows = []
    try:
        for k in range(args.runs):
            t0 = time.monotonic()
            outcome, why = one_run()
            rows.append({"run": k + 1, "outcome": outcome, "seconds": round(time.monotonic() - t0, 1), "why": why})
            print(f"| {k + 1:2d} | {outcome:9s} | {rows[-1]['seconds']:5.1f} s | {why}", flush=True)
    finally:
        for h in hogs:
            h.kill()
    counts = {o: sum(r["outcome"] == o for r in rows) for o in ("passed", "failed", "undefined")}
    print(f"{args.runs} runs beside {args.hogs} CPU hog(s): {counts['passed']} exact, {counts['failed']} wrong "
          f"counts, {counts['undefined']} undefined (a stall of 80 ms or more); load average after: "
          f"{os.getloadavg()[0]:.2f}")
    if args.json:
        print(json.dumps(with_host({"runs": rows, "counts": counts, "hogs": args.hogs})))
    return 0 if counts["passed"] == args.runs else 1


if __name__ == "__main__":
    print(host_line())
    sys.exit(main())
