"""``gearbox-hil simulate`` end to end: the compiled whole run and Parquet traces against the code before them.

Two measurements, each against a baseline in the same invocation:

1. **10 s of ``powershift_swaps`` at dt = 1 ms, in this process** (the
   scenario with its duration set to 10 s: its inputs hold their last
   values after 3.5 s).  ``run_stepwise`` (the per-step Python loop that was
   ``run_offline`` before the compiled run; the server's lockstep sequence)
   against ``run_offline`` (compiled), both without file writing; then the
   whole command, ``server.cli.main(["simulate", ..., "--format",
   "parquet"])`` in a warm process (plant load, scenario, run, Parquet and
   events.json), and with ``--format csv``.  Real-time factors are
   simulated time / wall time, medians of ``--repeat`` runs.  A new process
   also pays Python's start and numba's import (about a second, measured
   separately as ``gearbox-hil simulate`` in a subprocess).

2. **120 s at 50 us** (2.4 million steps, the ``powershift_swaps`` inputs
   held after 3.5 s), as subprocesses, whole wall time from the spawn to the
   exit: the previous code (``--before DIR``, a checkout of the commit
   before the compiled run, full-rate CSV, the only output it had) against
   this code with ``--every 20 --format parquet`` (and, to separate the
   effects, this code at full rate with CSV and with Parquet).  Each
   command runs once after a short warm-up run of the same code, so the JIT
   cache is warm.

Run: ``.venv/bin/python bench/bench_traces.py --before /path/to/checkout [--repeat 5] [--skip-long]``.
The checkout before needs its own warm JIT cache (the warm-up run builds it).
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from plant_models.config import repo_root
from plant_models.registry import load_plant
from server.cli import main as cli
from server.offline.scenario import load_scenario
from server.offline.run import run_offline, run_stepwise
from _host import host_line  # noqa: E402  (bench/ is first on the path)

ROOT = repo_root()


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def scenario_of(duration: float, folder: Path) -> Path:
    text = (ROOT / "scenarios" / "powershift_swaps.toml").read_text()
    path = folder / f"powershift_swaps_{duration:g}s.toml"
    path.write_text(text.replace("duration_s = 3.5", f"duration_s = {duration}"))
    return path


def in_process(repeat: int, folder: Path) -> None:
    scen = scenario_of(10.0, folder)
    plant = load_plant("powershift")
    compiled = load_scenario(scen).compile(plant)
    sim = compiled.n_steps * compiled.dt
    run_offline(plant, compiled)
    run_stepwise(plant, compiled)
    walls: dict[str, list[float]] = {k: [] for k in ("stepwise", "compiled", "parquet", "csv")}
    for _ in range(repeat):
        walls["stepwise"].append(run_stepwise(plant, compiled).wall_time_s)
        walls["compiled"].append(run_offline(plant, compiled).wall_time_s)
        for fmt in ("parquet", "csv"):
            out = folder / f"out_{fmt}"
            t0 = time.perf_counter()
            assert cli(["simulate", "powershift", "--scenario", str(scen), "--out", str(out), "--format", fmt,
                        "--quiet"]) == 0
            walls[fmt].append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "server.cli", "simulate", "powershift", "--scenario", str(scen), "--out",
                    str(folder / "out_proc"), "--format", "parquet", "--quiet"], check=True, cwd=ROOT)
    proc = time.perf_counter() - t0
    med = {k: statistics.median(v) for k, v in walls.items()}
    print(f"## 10 s of powershift_swaps at dt = 1 ms ({compiled.n_steps} steps), {repeat} repeats, load {load()}")
    print()
    print("| what | wall (median) | real-time factor | vs stepwise |")
    print("| --- | --- | --- | --- |")
    rows = (("run_stepwise: per-step Python loop, no file (baseline: run_offline before)", "stepwise"),
            ("run_offline: whole run compiled, no file", "compiled"),
            ("whole command in a warm process, Parquet trace + events.json", "parquet"),
            ("whole command in a warm process, CSV trace + events.json", "csv"))
    for text, k in rows:
        print(f"| {text} | {med[k] * 1e3:.2f} ms | {sim / med[k]:.0f} | {med['stepwise'] / med[k]:.2f} |")
    print(f"| the same command as a new process (Python start, numba import, cache load) | {proc:.2f} s | "
          f"{sim / proc:.1f} | - |")
    print()


def timed(cmd: list[str], cwd: Path, env: dict) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, cwd=cwd, env=env, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def long_run(before: Path, folder: Path, before_cache: str) -> None:
    scen = scenario_of(120.0, folder)
    short = scenario_of(1.0, folder)
    env_after = dict(os.environ, PYTHONPATH=str(ROOT))
    env_before = dict(os.environ, PYTHONPATH=str(before), NUMBA_CACHE_DIR=before_cache)
    base = ["simulate", "powershift", "--scenario"]
    # warm-up: the JIT caches of both checkouts
    timed([sys.executable, "-m", "server.cli", *base, str(short), "--out", str(folder / "w0")], before, env_before)
    timed([sys.executable, "-m", "server.cli", *base, str(short), "--out", str(folder / "w1")], ROOT, env_after)
    print(f"## 120 s at 50 us (2 400 000 steps), whole command as a new process, load before {load()}")
    print()
    print("| code, options | wall | trace file | vs before |")
    print("| --- | --- | --- | --- |")
    runs = [("before (full-rate CSV, its only output)", before, env_before, []),
            ("this code, --every 20 --format parquet", ROOT, env_after, ["--every", "20", "--format", "parquet"]),
            ("this code, --every 20 --format csv", ROOT, env_after, ["--every", "20", "--format", "csv"]),
            ("this code, full rate, --format parquet", ROOT, env_after, ["--format", "parquet"]),
            ("this code, full rate, --format csv", ROOT, env_after, ["--format", "csv"])]
    ref = None
    for k, (text, cwd, env, extra) in enumerate(runs):
        out = folder / f"long{k}"
        wall = timed([sys.executable, "-m", "server.cli", *base, str(scen), "--dt", "5e-5", "--out", str(out),
                      *extra], cwd, env)
        ref = ref or wall
        trace = next(out.glob("trace.*"))
        print(f"| {text} | {wall:.1f} s | {trace.name}, {trace.stat().st_size / 1e6:.0f} MB | {ref / wall:.1f}x |")
        shutil.rmtree(out)
    print()
    print(f"load average after: {load()}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", type=Path, help="checkout of the code before the compiled run (for part 2)")
    ap.add_argument("--before-cache", default=os.path.join(tempfile.gettempdir(), "gearbox-hil-before-cache"),
                    help="NUMBA_CACHE_DIR for the checkout before")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--skip-long", action="store_true", help="only part 1")
    args = ap.parse_args()
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, Python "
          f"{platform.python_version()}, numpy {np.__version__}")
    print()
    with tempfile.TemporaryDirectory() as tmp:
        in_process(args.repeat, Path(tmp))
        if not args.skip_long:
            if args.before is None:
                ap.error("part 2 needs --before DIR (or --skip-long)")
            long_run(args.before.resolve(), Path(tmp), args.before_cache)


if __name__ == "__main__":
    print(host_line(), flush=True)
    main()
