"""The core's step cost against an older checkout, in the same run: before/after figures for a change.

Runs ``bench_core.compiled_loop`` (the bare core step on the Powershift in
gear, and the Powershift and DCT plant steps through their shift scenarios,
each timed per step inside a compiled loop) of this checkout and of a
baseline checkout, alternately, in fresh processes, ``--rounds`` times, and
prints the medians of every round and their median.  The baseline is any
older checkout whose ``bench/bench_core.py`` has ``compiled_loop``, e.g.::

    git worktree add ../gearbox-hil-base 039f04c
    .venv/bin/python bench/bench_core_compare.py --baseline ../gearbox-hil-base

The first round of each checkout compiles its code if its cache is cold
(several minutes for old cores); that round is a warm-up and not counted.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

from _host import host_line  # noqa: E402  (bench/ is first on the path)

ROOT = Path(__file__).resolve().parents[1]

PROBE = """
import json, sys
root = sys.argv[1]
sys.path[:0] = [root, root + "/bench", root + "/tests"]
import bench_core
npc = bench_core.ns_per_cycle()
rows = bench_core.compiled_loop(int(sys.argv[2]), npc)
print(json.dumps([[name.split(",")[0], s["median"], s["p99"]] for name, s, _ in rows]))
"""


def measure(checkout: Path, repeat: int) -> list:
    out = subprocess.run([sys.executable, "-c", PROBE, str(checkout), str(repeat)], cwd=checkout,
                         capture_output=True, text=True, check=True, env={"PYTHONPATH": str(checkout),
                                                                          "PATH": "/usr/bin:/bin"})
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", required=True, help="checkout of the older version")
    ap.add_argument("--rounds", type=int, default=5, help="alternating rounds counted (default 5)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per measurement inside a round (default 3)")
    args = ap.parse_args(argv)
    base = Path(args.baseline).resolve()
    measure(base, 1)  # warm-up: compiles on a cold cache
    measure(ROOT, 1)
    results: dict[str, dict[str, list[float]]] = {"before": {}, "after": {}}
    for _ in range(args.rounds):
        for label, checkout in (("before", base), ("after", ROOT)):
            for name, median, _p99 in measure(checkout, args.repeat):
                results[label].setdefault(name, []).append(median)
    print("| step, median us per round | before (baseline) | after (this checkout) | after / before |")
    print("| --- | --- | --- | --- |")
    for name in results["after"]:
        b, a = results["before"].get(name, []), results["after"][name]
        mb, ma = statistics.median(b), statistics.median(a)
        print(f"| {name} | {' '.join(f'{x:.3f}' for x in b)} (median {mb:.3f}) | "
              f"{' '.join(f'{x:.3f}' for x in a)} (median {ma:.3f}) | {ma / mb:.3f} |")
    return 0


if __name__ == "__main__":
    print(host_line(), flush=True)
    sys.exit(main())
