#!/usr/bin/env python3
"""A sampling profile of the tick with ``perf``: where a compiled tick's time goes, by function.

The server's own tick (the Powershift plant, the ZeroMQ adapter, a lockstep
server ticked back to back as in ``bench/bench_tick_stages.py``, a command
handed over every ten ticks) runs for ``--seconds`` while ``perf record``
samples this process (``-e cpu-clock``: the kernel's timer, which needs no
hardware counters, so it works in a virtual machine without a PMU).  The
compiled code's symbols go into ``/tmp/perf-<pid>.map`` (perf's map for
JIT code), from numba's JIT engine: every defined symbol at its address, its
size up to the next symbol (a function the compiler made internal is counted
with the one before it).  ``--path python`` profiles the Python stepper,
``--step`` the plant's step alone called from Python.

    python bench/profile_tick.py --seconds 10 --top 30
    python bench/profile_tick.py --seconds 10 --path python

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

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _support import FREE_ENDPOINTS  # noqa: E402
from io_adapters.zmq.adapter import ZmqAdapter  # noqa: E402
from plant_models.registry import load_plant  # noqa: E402
from server.realtime.loop_config import LoopConfig  # noqa: E402
from server.realtime.runtime import assemble  # noqa: E402
from _host import host_line  # noqa: E402
from bench_tick_stages import INITIAL  # noqa: E402

_PART = re.compile(r"(\d+)")


def short_name(sym: str) -> str:
    """``module.function`` from numba's mangled name (``_ZN<len><part>...``), else the symbol."""
    prefix = ""
    for tag in ("cfunc.", "cpython.", "_ZN08NumbaEnv"):
        if sym.startswith(tag):
            prefix, sym = ("env:" if tag.startswith("_ZN08") else tag), "_ZN" + sym[len(tag):]
    if not sym.startswith("_ZN"):
        return prefix + sym
    i, parts = 3, []
    while i < len(sym) and sym[i].isdigit():
        m = _PART.match(sym, i)
        n = int(m.group(1))
        parts.append(sym[m.end():m.end() + n])
        i = m.end() + n
    return prefix + ".".join(parts) if parts else prefix + sym


def write_perf_map(path: Path) -> int:
    """Every symbol numba's JIT engine defines, with its address and the distance to the next one (at most
    1 MB); returns how many."""
    from numba.core.registry import cpu_target

    engine = cpu_target.target_context.codegen()._engine
    addrs = {}
    for name in list(engine._defined_symbols):
        try:
            a = engine.get_function_address(name)
        except Exception:  # a data symbol
            continue
        if a:
            addrs[a] = name
    keys = sorted(addrs)
    with open(path, "w") as fh:
        for a, b in zip(keys, keys[1:] + [keys[-1] + 4096]):
            fh.write(f"{a:x} {min(b - a, 1 << 20):x} {short_name(addrs[a])}\n")
    return len(keys)


def build(path: str):
    cfg = LoopConfig(mode="lockstep", rate_hz=1000.0, status_interval_s=0.0, status_line=False)
    zmq = ZmqAdapter("zmq", {**FREE_ENDPOINTS, "status_publish_s": 1.0})
    server = assemble(load_plant("powershift"), [zmq], cfg, initial_inputs=INITIAL)
    server.open()
    server.loop.choose_tick_path("auto" if path == "compiled" else "python")
    return server


def work(server, seconds: float, step_only: bool) -> int:
    """Tick back to back for ``seconds`` (a command handed over every 100 ticks; the states are not
    published: the pump is not the tick); returns the ticks."""
    loop = server.loop
    plant = loop.plant
    rows = loop.adapters[0].rows
    idx = np.array([plant.input_index("engine_torque")], dtype=np.int64)
    val = np.array([300.0])
    tick, step, dt = loop._tick, plant.step, loop.dt
    end = time.monotonic() + seconds
    n = 0
    while time.monotonic() < end:
        val[0] = 300.0 + (n % 7)
        rows.put(n + 1, idx, val, 1)
        if step_only:
            for _ in range(100):
                step(dt)
        else:
            for _ in range(100):
                tick(n)
        n += 100
    return n


CATEGORIES = (  # (name, test on (shared object, symbol)), the first that matches
    ("the plant's step (compiled)", lambda dso, sym: dso.startswith("[JIT]") and sym.startswith(
        ("plant_models.core", "plant_models.plants", "plant_models.powertrain", "cfunc.plant_models.plants"))),
    ("the tick's stages and tick_run (compiled)", lambda dso, sym: dso.startswith("[JIT]") and not sym.startswith(
        ("cpython.", "NRT_"))),
    ("numba's dispatch from Python (type checks, argument boxing)", lambda dso, sym: "_dispatcher" in dso
     or sym.startswith(("cpython.", "NRT_")) or "_helperlib" in dso or "_nrt_python" in dso),
    ("the Python interpreter", lambda dso, sym: "libpython" in dso),
    ("the C library (malloc, memcpy)", lambda dso, sym: dso.startswith("libc") or "libm" in dso),
    ("the clock (vDSO)", lambda dso, sym: "vdso" in dso),
    ("the kernel", lambda dso, sym: "kernel" in dso),
)


def by_category(report: str) -> dict[str, float]:
    """The report's shares (%) summed by :data:`CATEGORIES` (``other``: the rest)."""
    out: dict[str, float] = {}
    for ln in report.splitlines():
        m = re.match(r"\s*([\d.]+)%\s+(.+?)\s+\[[.k]\]\s+(.*)$", ln)
        if not m:
            continue
        share, dso, sym = float(m.group(1)), m.group(2).strip(), m.group(3).strip()
        name = next((c for c, test in CATEGORIES if test(dso, sym)), "other")
        out[name] = out.get(name, 0.0) + share
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--path", default="compiled", choices=("compiled", "python"))
    ap.add_argument("--step", action="store_true", help="the plant's step alone, called from Python")
    ap.add_argument("--freq", type=int, default=20000, help="samples a second of CPU time")
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--out", type=Path, help="keep perf's data and report here (a folder)")
    args = ap.parse_args()
    server = build(args.path)
    work(server, 0.5, args.step)  # warm
    print(f"tick path: {server.loop.tick_path} ({server.loop.tick_path_reason})")
    out = args.out or Path(tempfile.mkdtemp())
    out.mkdir(parents=True, exist_ok=True)
    data = out / "perf.data"
    rec = subprocess.Popen(["perf", "record", "-e", "cpu-clock", "-F", str(args.freq), "-g", "-o", str(data),
                            "-p", str(os.getpid())], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    time.sleep(1.0)  # perf attaches
    c0 = time.process_time()
    n = work(server, args.seconds, args.step)
    cpu = time.process_time() - c0
    rec.send_signal(2)
    err = rec.communicate(timeout=60)[1]
    symbols = write_perf_map(Path(f"/tmp/perf-{os.getpid()}.map"))
    print(f"{n} ticks in {args.seconds:g} s, {cpu / n * 1e6:.3f} us of CPU a tick; {symbols} compiled symbols mapped")
    if rec.returncode not in (0, -2) and not data.exists():
        print(f"perf record failed: {err.strip()}")
        return 1
    report = subprocess.run(["perf", "report", "-i", str(data), "--stdio", "--no-children", "--sort", "dso,sym",
                             "-g", "none", "--percent-limit", "0"], capture_output=True, text=True)
    (out / "report.txt").write_text(report.stdout)
    lines = [ln for ln in report.stdout.splitlines() if ln.strip() and not ln.startswith("#")]
    print("\n".join(lines[:args.top]))
    per_tick = cpu / n * 1e6
    print(f"\n| where | share of the samples | us of CPU a tick ({per_tick:.3f} us) |\n| --- | --- | --- |")
    for name, share in sorted(by_category(report.stdout).items(), key=lambda kv: -kv[1]):
        print(f"| {name} | {share:.1f} % | {share / 100 * per_tick:.3f} |")
    server.close()
    return 0


if __name__ == "__main__":
    print(host_line(), flush=True)
    sys.exit(main())
