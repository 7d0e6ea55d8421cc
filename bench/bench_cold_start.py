"""A new user's first start, measured on fresh clones: set-up, --help, first ./demo.sh to its first tick.

Each run clones the repository into a new folder (no virtual environment,
no numba cache) and measures, in order:

1. set-up: ``source scripts/bootstrap.sh`` (virtual environment and
   install; pip's download cache is whatever this machine has);
2. ``gearbox-hil --help`` three times, with nothing compiled yet (it must
   compile nothing);
3. the first ``./demo.sh``: its warm-up (compiling the core and the
   Powershift plant, with progress), then the server's first tick, timed
   from the start of ``demo.sh`` to the server's first tick (the
   ``first_tick_monotonic_ns`` of its summary);
4. a second ``./demo.sh``: everything cached, start of ``demo.sh`` and start
   of the server process to the first tick;
5. the same-run baseline: ``python -c "import numba"`` in the new
   environment, five times (how fast this machine is right now), and the
   load average before the run.

CPU time (user + system, of every process each stage started) is
reported next to the wall time: on a machine shared with other work the
wall time of a compile depends on the load, its CPU time much less.  The
largest gap between two lines of the first demo's output while it compiles
is reported too (the progress promises none over 2 s).

Run: ``.venv/bin/python bench/bench_cold_start.py [--runs N] [--json PATH]``
(about two minutes per run).  Results go to stdout as a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _cpu() -> float:
    """User + system CPU s of the finished child processes (and theirs) so far."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _timed(cmd: list[str] | str, cwd: Path, shell: bool = False, cpu: list | None = None) -> tuple[float, str]:
    t0, c0 = time.monotonic(), _cpu()
    out = subprocess.run(cmd, cwd=cwd, shell=shell, executable="/bin/bash" if shell else None,
                         capture_output=True, text=True, check=True)
    if cpu is not None:
        cpu.append(_cpu() - c0)
    return time.monotonic() - t0, out.stdout + out.stderr


def _demo(clone: Path) -> dict:
    """Run ./demo.sh, time-stamping its output lines; returns the phases in s from its start."""
    env = dict(os.environ)
    env.pop("NUMBA_CACHE_DIR", None)
    t0_ns, c0 = time.monotonic_ns(), _cpu()
    # the start is measured, not the real-time run's timing: on a busy machine the demo's timing check
    # (5 % by default) fails while the start-up figures are still good (--timing-tolerance goes to serve)
    proc = subprocess.Popen(["./demo.sh", "--timing-tolerance", "100"], cwd=clone, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env, bufsize=1)
    marks: dict[str, float] = {}
    lines = []
    last, gap = 0.0, 0.0
    for line in proc.stdout:
        now = (time.monotonic_ns() - t0_ns) / 1e9
        if "compile_start" in marks and "warmup_done" not in marks:
            gap = max(gap, now - last)
        last = now
        lines.append(f"{now:7.2f} {line.rstrip()}")
        if line.startswith("warmup: first start") and "compile_start" not in marks:
            marks["compile_start"] = now
        if line.startswith("warmup: ready in"):
            marks["warmup_done"] = now
        if line.startswith("gearbox-hil serve:") and "server_bound" not in marks:
            marks["server_bound"] = now
    code = proc.wait()
    marks["cpu_s"] = _cpu() - c0
    marks["max_gap_compiling_s"] = gap
    if code != 0:
        raise RuntimeError("demo.sh failed:\n" + "\n".join(lines[-40:]))
    status = json.loads((clone / "out" / "demo" / "server_status.json").read_text())
    first_tick_ns = status["startup"]["first_tick_monotonic_ns"]
    marks["first_tick"] = (first_tick_ns - t0_ns) / 1e9
    marks["server_process_to_first_tick"] = status["startup"]["process_start_to_first_tick_s"]
    marks["lines"] = lines
    return marks


def one_run(repo: Path) -> dict:
    load = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="gearbox-hil-cold-") as tmp:
        clone = Path(tmp) / "gearbox-hil"
        subprocess.run(["git", "clone", "--quiet", str(repo), str(clone)], check=True)
        setup_cpu: list[float] = []
        setup_s, _ = _timed("source scripts/bootstrap.sh", clone, shell=True, cpu=setup_cpu)
        gbh = str(clone / ".venv" / "bin" / "gearbox-hil")
        helps = [_timed([gbh, "--help"], clone)[0] for _ in range(3)]
        cold = _demo(clone)
        warm = _demo(clone)
        py = str(clone / ".venv" / "bin" / "python")
        numba_import = [_timed([py, "-c", "import numba"], clone)[0] for _ in range(5)]
    return {
        "load_average_1min": load[0],
        "setup_s": setup_s,
        "setup_cpu_s": setup_cpu[0],
        "first_demo_cpu_s": cold["cpu_s"],
        "first_demo_max_gap_compiling_s": cold["max_gap_compiling_s"],
        "help_s": helps,
        "first_demo_compile_start_s": cold.get("compile_start"),
        "first_demo_warmup_done_s": cold["warmup_done"],
        "first_demo_first_tick_s": cold["first_tick"],
        "setup_plus_first_demo_to_first_tick_s": setup_s + cold["first_tick"],
        "warm_demo_first_tick_s": warm["first_tick"],
        "warm_server_process_to_first_tick_s": warm["server_process_to_first_tick"],
        "import_numba_s": numba_import,
        "first_demo_log": cold["lines"],
    }


def _stats(values: list[float]) -> str:
    return f"{min(values):.2f} / {statistics.median(values):.2f} / {max(values):.2f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3, help="fresh clones to measure (default 3)")
    ap.add_argument("--repo", default=str(ROOT), help="repository to clone (default: this checkout's)")
    ap.add_argument("--json", help="also write every figure (and the first demo's log) to this file")
    args = ap.parse_args(argv)
    runs = []
    for k in range(args.runs):
        r = one_run(Path(args.repo))
        runs.append(r)
        print(f"run {k + 1}: set-up {r['setup_s']:.1f} s, first demo to first tick {r['first_demo_first_tick_s']:.1f} s"
              f" (warm-up done at {r['first_demo_warmup_done_s']:.1f} s), warm demo {r['warm_demo_first_tick_s']:.1f} s,"
              f" load {r['load_average_1min']:.2f}", file=sys.stderr)
    rows = [
        ("load average (1 min) before the run", [r["load_average_1min"] for r in runs]),
        ("`python -c \"import numba\"` (baseline), s", [statistics.median(r["import_numba_s"]) for r in runs]),
        ("set-up: virtual environment and install, s", [r["setup_s"] for r in runs]),
        ("set-up: CPU time (user + system), s", [r["setup_cpu_s"] for r in runs]),
        ("`gearbox-hil --help`, nothing compiled yet, s", [statistics.median(r["help_s"]) for r in runs]),
        ("first `./demo.sh`: warm-up done (compiling included), s", [r["first_demo_warmup_done_s"] for r in runs]),
        ("first `./demo.sh`: start to the server's first tick, s", [r["first_demo_first_tick_s"] for r in runs]),
        ("first `./demo.sh`: CPU time (user + system, to its end: compiling, server, shift), s",
         [r["first_demo_cpu_s"] for r in runs]),
        ("first `./demo.sh`: largest gap between two lines while compiling, s",
         [r["first_demo_max_gap_compiling_s"] for r in runs]),
        ("set-up + first `./demo.sh` to the first tick, s", [r["setup_plus_first_demo_to_first_tick_s"] for r in runs]),
        ("second `./demo.sh`: start to the first tick, s", [r["warm_demo_first_tick_s"] for r in runs]),
        ("second run: server process start to the first tick, s", [r["warm_server_process_to_first_tick_s"] for r in runs]),
    ]
    print(f"| measured on {len(runs)} fresh clones | min / median / max |\n| --- | --- |")
    for name, values in rows:
        print(f"| {name} | {_stats(values)} |")
    if args.json:
        Path(args.json).write_text(json.dumps(runs, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
