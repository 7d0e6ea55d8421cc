#!/usr/bin/env python3
"""Start-up benchmark: from starting ``gearbox-hil serve`` to its first tick, with a warm JIT cache.

Each run spawns the server (Powershift, default loop settings, ZeroMQ on free
ports) and reads the CLOCK_MONOTONIC time of its first tick from
``--summary-json``; the spawn time is taken on the same clock just before
``Popen``.  Baselines in the same run: the interpreter alone
(``python -c pass``) and the interpreter importing numba.

    python -m server.cli.warmup                      # make sure the cache is warm
    python bench/bench_loop_startup.py --runs 7
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _support import ROOT, write_io
from _host import host_line, with_host  # noqa: E402  (bench/ is first on the path)


def spawn_time(args: list[str]) -> float:
    t0 = time.monotonic()
    subprocess.run(args, check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    return time.monotonic() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp())
    io = write_io(tmp / "io.toml")
    res = {"load_avg_before": os.getloadavg()}
    first_tick, total = [], []
    for k in range(args.runs + 1):  # the first run only refreshes the OS file cache
        summ = tmp / f"s{k}.json"
        t0 = time.monotonic_ns()
        subprocess.run([sys.executable, "-m", "server.cli", "serve", "powershift", "--io", str(io), "--quiet",
                        "--duration", "0.2", "--summary-json", str(summ)], check=True, cwd=ROOT,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        t1 = time.monotonic_ns()
        s = json.loads(summ.read_text())
        if k:
            first_tick.append((s["startup"]["first_tick_monotonic_ns"] - t0) / 1e9)
            total.append((t1 - t0) / 1e9)
    res["spawn_to_first_tick_s"] = {"median": float(np.median(first_tick)), "max": float(np.max(first_tick)),
                                    "all": [round(x, 3) for x in first_tick]}
    res["baseline_python_s"] = float(np.median([spawn_time([sys.executable, "-c", "pass"]) for _ in range(5)]))
    res["baseline_python_numba_s"] = float(np.median([spawn_time([sys.executable, "-c", "import numba"])
                                                      for _ in range(5)]))
    res["load_avg_after"] = os.getloadavg()
    print(json.dumps(res, indent=2))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(with_host(res), indent=2))
    return 0


if __name__ == "__main__":
    print(host_line(), flush=True)
    sys.exit(main())
