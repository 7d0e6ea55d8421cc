#!/usr/bin/env python3
"""A sampling profile of the whole WLTC closed loop with ``perf``: where a cycle step's time goes, by function.

The closed loop of ``bench/bench_drive_cycle.py`` (the 8HP car with every
component, the reference TCU's kernel every 10 steps, the compiled loop built
from the run pipeline's stage list) runs ``--duration`` seconds of the cycle
while ``perf record -e cpu-clock`` samples this process (the kernel's timer:
no hardware counters needed, so it works in a virtual machine without a PMU).
The compiled code's symbols go into ``/tmp/perf-<pid>.map`` (perf's map for
JIT code) from numba's JIT engine, as in ``bench/profile_tick.py``: a
function the optimiser inlined is counted in its caller.  The report is
grouped by area (core, force law, TCU, run loop) and by function.

    python bench/profile_drive_cycle.py --duration 600 --top 40 --out /tmp/wltc-profile

Needs ``perf`` (Debian: ``linux-perf``) and ``kernel.perf_event_paranoid`` <= 2.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _host import host_line  # noqa: E402
from bench_drive_cycle import DT, closed  # noqa: E402
from profile_tick import write_perf_map  # noqa: E402

AREAS = (  # (name, test on (shared object, symbol)), the first that matches
    ("core: integration and step (integrate, step, entry)", lambda d, s: s.startswith(
        ("plant_models.core.integrate", "plant_models.core.step", "plant_models.core.entry"))),
    ("core: forces and derivatives (dynamics, rowforces)", lambda d, s: s.startswith(
        ("plant_models.core.dynamics", "plant_models.core.rowforces"))),
    ("core: mode solve (modes, linalg, stuckset, tree)", lambda d, s: s.startswith(
        ("plant_models.core.modes", "plant_models.core.linalg", "plant_models.core.stuckset",
         "plant_models.core.tree"))),
    ("core: other", lambda d, s: s.startswith("plant_models.core")),
    ("powertrain force law and components", lambda d, s: s.startswith("plant_models.powertrain")),
    ("the described transmission (inputs, outputs)", lambda d, s: s.startswith(("plant_models.plants",
                                                                               "cfunc.plant_models.plants"))),
    ("the reference TCU's kernel", lambda d, s: "reference_tcu" in s),
    ("the run loop and its stages (compiled)", lambda d, s: d.startswith("[JIT]")),
    ("the C library (libm, memcpy)", lambda d, s: d.startswith("libc") or "libm" in d),
    ("Python, numba's dispatch, kernel, other", lambda d, s: True),
)
_LINE = re.compile(r"\s*([\d.]+)%\s+(.+?)\s+\[[.k]\]\s+(.*)$")


def rows(report: str):
    for ln in report.splitlines():
        m = _LINE.match(ln)
        if m:
            yield float(m.group(1)), m.group(2).strip(), m.group(3).strip()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration", type=float, default=600.0, help="seconds of the cycle (from its start)")
    ap.add_argument("--freq", type=int, default=20000, help="samples a second of CPU time")
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--out", type=Path, help="keep perf's data and report here (a folder)")
    args = ap.parse_args()
    closed(2.0)  # compiles (or loads) the closed loop for this process
    out = args.out or Path(tempfile.mkdtemp())
    out.mkdir(parents=True, exist_ok=True)
    data = out / "perf.data"
    rec = subprocess.Popen(["perf", "record", "-e", "cpu-clock", "-F", str(args.freq), "-g", "-o", str(data),
                            "-p", str(os.getpid())], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    time.sleep(1.0)  # perf attaches
    c0 = time.process_time()
    wall, _, tcu = closed(args.duration)
    cpu = time.process_time() - c0
    rec.send_signal(2)
    err = rec.communicate(timeout=120)[1]
    symbols = write_perf_map(Path(f"/tmp/perf-{os.getpid()}.map"))
    n = int(round(args.duration / DT))
    per_step = cpu / n * 1e6
    print(f"{n} steps, {tcu.shifts} shifts; wall {wall:.2f} s, {per_step:.3f} us of CPU a step "
          f"(perf attached); {symbols} compiled symbols mapped; load {os.getloadavg()[0]:.2f}")
    if not data.exists():
        print(f"perf record failed: {err.strip()}")
        return 1
    report = subprocess.run(["perf", "report", "-i", str(data), "--stdio", "--no-children", "--sort", "dso,sym",
                             "-g", "none", "--percent-limit", "0"], capture_output=True, text=True).stdout
    (out / "report.txt").write_text(report)
    # the process's Python set-up (loading the plant, building the loop: about 0.3 s of CPU) is sampled too;
    # the compiled code's samples are the loop's
    compiled = sum(share for share, dso, _ in rows(report) if dso.startswith("[JIT]") or "libm" in dso) or 1.0
    print(f"compiled code: {compiled:.1f} % of the samples\n")
    print("| share | of the compiled code | shared object | function |\n| ---: | ---: | --- | --- |")
    for share, dso, sym in list(rows(report))[:args.top]:
        print(f"| {share:.2f} % | {share / compiled * 100:.1f} % | {dso[:20]} | {sym} |")
    areas: dict[str, float] = {}
    for share, dso, sym in rows(report):
        name = next(a for a, test in AREAS if test(dso, sym))
        areas[name] = areas.get(name, 0.0) + share
    print(f"\n| area | share of the samples | us of CPU a step ({per_step:.3f} us) |\n| --- | ---: | ---: |")
    for name, share in sorted(areas.items(), key=lambda kv: -kv[1]):
        print(f"| {name} | {share:.1f} % | {share / 100 * per_step:.3f} |")
    return 0


if __name__ == "__main__":
    print(host_line(), flush=True)
    sys.exit(main())
