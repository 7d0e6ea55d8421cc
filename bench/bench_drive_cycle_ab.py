#!/usr/bin/env python3
"""Same-run A/B of the whole WLTC closed loop: two versions (or two compile settings) alternating, CPU time.

Each run is a fresh process in one tree: the closed loop of
``bench/bench_drive_cycle.py`` (the 8HP car, every component, the reference
TCU's kernel in the compiled loop) compiled or loaded and warmed on 2 s of
the cycle, then ``--duration`` seconds of the cycle, timed by the process's
CPU time (``time.process_time``) less the CPU time of the same call on 10 ms
(the plant's loading and the loop's set-up, about 0.3 s, the least of three:
it varies by hundredths of a second or more under load, so compare runs of
several minutes of the cycle), and by the loop's wall time.  ``--repeat``:
that many runs in each process, the least counted (a run another process's
burst slowed is dropped).  The rows (every 1000 steps: outputs and inputs)
are hashed, so a change that moves a result shows.
The two sides alternate ``--rounds`` times, so both see the same machine
load; on a shared machine the CPU time is the figure to compare (the wall
time counts the time other processes held the core).

    python bench/bench_drive_cycle_ab.py --base 767eb7e --rounds 4
    python bench/bench_drive_cycle_ab.py --base-env NUMBA_CPU_NAME=x86-64-v3 --rounds 3   # this tree, two targets

``--base COMMIT`` exports the commit (``git archive``) with its own numba cache
(warmed by its first run); without it the base is this tree, with the
environment of ``--base-env`` and, if that is given, a cache of its own.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from _host import host_line  # noqa: E402  (bench/ is first on the path)

ROOT = Path(__file__).resolve().parent.parent

_RUN = r"""
import hashlib, json, sys, time
sys.path.insert(0, "bench")
from bench_drive_cycle import closed
closed(2.0)
setups = []
for _ in range(3):
    c0 = time.process_time(); closed(0.01); setups.append(time.process_time() - c0)
setup = min(setups)
cpus, walls = [], []
for _ in range(int(sys.argv[2])):
    c0 = time.process_time(); wall, r, tcu = closed(float(sys.argv[1])); cpus.append(time.process_time() - c0 - setup)
    walls.append(wall)
rows = hashlib.sha256(r.outputs.tobytes() + r.inputs.tobytes()).hexdigest()[:12]
print(json.dumps({"wall_s": min(walls), "cpu_s": min(cpus), "cpu_all": cpus, "shifts": tcu.shifts, "rows": rows}))
"""


def one(tree: Path, env: dict, duration: float, repeat: int = 1) -> dict:
    out = subprocess.run([sys.executable, "-c", _RUN, str(duration), str(repeat)], cwd=tree, env=env, check=True,
                         capture_output=True, text=True).stdout
    res = json.loads(out.strip().splitlines()[-1])
    res["load"] = os.getloadavg()[0]
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", help="a commit to compare against (exported with its own numba cache)")
    ap.add_argument("--base-env", action="append", default=[], help="NAME=VALUE for the base's processes")
    ap.add_argument("--this-env", action="append", default=[], help="NAME=VALUE for this tree's processes")
    ap.add_argument("--base-cache", type=Path, help="the base's numba cache folder (default: one under --work)")
    ap.add_argument("--base-tree", type=Path, help="the base's exported tree, if it exists (default: under --work)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=float, default=1800.0)
    ap.add_argument("--repeat", type=int, default=1, help="runs in each process; its figure is their least CPU time")
    ap.add_argument("--work", type=Path, help="folder for the exported base and its cache (kept between calls)")
    args = ap.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="gearbox-hil-wltc-ab-"))
    work.mkdir(parents=True, exist_ok=True)
    base_tree, base_env = ROOT, dict(os.environ, PYTHONPATH=str(ROOT))
    if args.base:
        base_tree = args.base_tree or work / f"base-{args.base}"
        if not base_tree.exists():
            base_tree.mkdir(parents=True)
            archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.base], check=True,
                                     capture_output=True).stdout
            subprocess.run(["tar", "-x", "-C", str(base_tree)], input=archive, check=True)
        base_env.update(PYTHONPATH=str(base_tree), NUMBA_CACHE_DIR=str(work / f"cache-{args.base}"))
    elif args.base_env:
        tag = "-".join(e.replace("=", "_") for e in args.base_env)
        base_env["NUMBA_CACHE_DIR"] = str(work / f"cache-{tag}")
    if args.base_cache:
        base_env["NUMBA_CACHE_DIR"] = str(args.base_cache)
    base_env.update(e.split("=", 1) for e in args.base_env)
    this_env = dict(os.environ, PYTHONPATH=str(ROOT))
    this_env.update(e.split("=", 1) for e in args.this_env)
    sides = {"base": (base_tree, base_env), "this": (ROOT, this_env)}
    for name, (tree, env) in sides.items():  # compiles what the cache lacks, outside the timed rounds
        print(f"warming {name} ...", file=sys.stderr, flush=True)
        one(tree, env, 1.0)
    res: dict[str, list[dict]] = {"base": [], "this": []}
    print(f"base {args.base or 'this tree'} {' '.join(args.base_env)}; this "
          f"{' '.join(args.this_env)}; {args.duration:g} s of the WLTC, {args.rounds} rounds alternating, "
          f"least CPU time of {args.repeat} runs a process\n")
    print("| round | side | load | CPU s (loop) | us of CPU a step | wall s | shifts | rows (sha256) |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |")
    n = args.duration / 1e-3
    for rnd in range(args.rounds):
        for name in (("base", "this") if rnd % 2 == 0 else ("this", "base")):
            r = one(*sides[name], args.duration, args.repeat)
            res[name].append(r)
            print(f"| {rnd + 1} | {name} | {r['load']:.1f} | {r['cpu_s']:.3f} | {r['cpu_s'] / n * 1e6:.3f} | "
                  f"{r['wall_s']:.3f} | {r['shifts']} | {r['rows']} |", flush=True)
    cb = statistics.median(r["cpu_s"] for r in res["base"])
    ct = statistics.median(r["cpu_s"] for r in res["this"])
    ratios = sorted(t["cpu_s"] / b["cpu_s"] for b, t in zip(res["base"], res["this"]))
    print(f"\nmedian CPU s: base {cb:.3f} ({args.duration / cb:.0f}x of CPU), this {ct:.3f} "
          f"({args.duration / ct:.0f}x); this / base {ct / cb:.3f}; per round {', '.join(f'{x:.3f}' for x in ratios)}")
    return 0


if __name__ == "__main__":
    print(host_line(), flush=True)
    sys.exit(main())
