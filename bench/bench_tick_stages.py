#!/usr/bin/env python3
"""Where the tick's time goes: the real tick both ways (compiled, Python stepper) in the same run, A/B blocks.

Two parts, both on the Powershift plant with the ZeroMQ adapter (``--can``
adds the CAN adapter on python-can's virtual bus, as the built-in default
configuration has it):

1. **In-process tick cost** (no clock, no sockets): the server's own tick
   (``Loop._tick``) called back to back, in alternating blocks of the
   compiled path and the Python stepper
   (``Loop.choose_tick_path("python")``), timed in groups of ten ticks with a
   command handed over before each group (outside the timing); beside it, in the same blocks, the plant's step alone
   (``plant.step``: one compiled call from Python) and the compiled tick's
   own call (``CompiledTick.run``, without the loop's Python wrapper).  The
   difference between them is where the rest of the tick goes: the loop's
   Python wrapper (one attribute look-up and call), the call's dispatch (its
   array arguments), the stages.  Wall-clock and CPU time per tick, medians
   over the blocks.
2. **The 1 kHz loop** (``--duration`` s per run; ``--clients sub``: a
   subscriber that checks every sequence number, a command every 10 ms, a
   status request every second, in a process of its own,
   ``bench/load_client.py``): TET and missed ticks, compiled and Python
   runs alternating (``--blocks`` of each).

On a loaded machine the absolute figures move with the load; compare the
ratios of the same run.

    python bench/bench_tick_stages.py --duration 20 --clients none --clients sub --blocks 2
"""

from __future__ import annotations

import argparse
import json
import os
import signal
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
from _host import host_line, with_host  # noqa: E402  (bench/ is first on the path)

INITIAL = {"p_c1": 16.0, "p_c3": 16.0, "p_c6": 16.0, "engine_torque": 300.0, "load_torque": 3500.0}
PATHS = ("compiled", "python")


def pct(x) -> dict:
    x = np.asarray(x, dtype=float)
    if x.size == 0:
        return {"p50": None, "p99": None, "p999": None, "max": None, "mean": None}
    return {"p50": float(np.percentile(x, 50)), "p99": float(np.percentile(x, 99)),
            "p999": float(np.percentile(x, 99.9)), "max": float(x.max()), "mean": float(x.mean())}


def _adapters(can: bool) -> list:
    adapters = [ZmqAdapter("zmq", {**FREE_ENDPOINTS, "status_publish_s": 1.0})]
    if can:
        from io_adapters.can.adapter import CanAdapter
        adapters.append(CanAdapter("can", {"interface": "virtual", "channel": f"bench-{os.getpid()}"}))
    return adapters


def _per_tick(fn, n: int) -> tuple[float, float]:
    """(wall, CPU) us per call of ``fn(i)`` over n calls."""
    c0, t0 = time.process_time_ns(), time.perf_counter_ns()
    for i in range(n):
        fn(i)
    return (time.perf_counter_ns() - t0) / n / 1e3, (time.process_time_ns() - c0) / n / 1e3


def tick_cost(blocks: int, n: int, can: bool) -> dict:
    """Part 1: the tick in-process, compiled and Python in alternating blocks (a lockstep server: no clock)."""
    server = assemble(load_plant("powershift"), _adapters(can),
                      LoopConfig(mode="lockstep", rate_hz=1000.0, status_interval_s=0.0), initial_inputs=INITIAL)
    loop = server.loop
    loop.open()
    try:
        if can:
            loop.adapters[1]._queue_tx = True  # as in realtime: the tick queues the frames (pumped below)
            loop.choose_tick_path("auto")
        plant = loop.plant
        rows = loop.adapters[0].rows
        idx = np.array([plant.input_index("p_c1")], dtype=np.int64)
        val = np.array([16.0])
        period = loop.period_ns
        out: dict = {p: {"tick": [], "tick_cpu": [], "run": [], "run_cpu": [], "step": [], "step_cpu": [],
                         "step_inside": []} for p in PATHS}
        out["reason"] = loop.tick_path_reason

        def ticks(n_ticks: int, inside: np.ndarray | None = None) -> tuple[float, float]:
            """(wall, CPU) us per tick over ``n_ticks`` ticks: timed in groups of 10, a command handed over
            before each group and the states pumped out after every 10th group, both outside the timing."""
            wall = cpu = 0
            tick = loop._tick
            for g in range(n_ticks // 10):
                rows.put(g, idx, val, 1)
                c0, t0 = time.process_time_ns(), time.perf_counter_ns()
                for _ in range(10):
                    tick(loop.tick * period)
                wall += time.perf_counter_ns() - t0
                cpu += time.process_time_ns() - c0
                if inside is not None:
                    inside[g] = loop._step_ns
                if g % 10 == 9:
                    loop._pump(0)
            return wall / n_ticks / 1e3, cpu / n_ticks / 1e3

        for _ in range(blocks):
            for path in PATHS:
                loop.choose_tick_path("auto" if path == "compiled" else "python")
                ticks(n // 10)  # warm
                inside = np.empty(n // 10)
                w, c = ticks(n, inside)
                out[path]["tick"].append(w)
                out[path]["tick_cpu"].append(c)
                out[path]["step_inside"].append(float(np.median(inside)) / 1e3)
                w, c = _per_tick(lambda i: plant.step(1e-3), n)
                out[path]["step"].append(w)
                out[path]["step_cpu"].append(c)
                if path == "compiled":
                    run = loop.compiled_tick.run
                    w, c = _per_tick(lambda i: run(loop.tick, loop.tick * period, 1e-3), n)
                    out[path]["run"].append(w)
                    out[path]["run_cpu"].append(c)
                loop.reset()
        for path in PATHS:
            out[path] = {k: (float(np.median(v)) if v else None) for k, v in out[path].items()}
        return out
    finally:
        loop.close()


def start_clients(control: str, kind: str, tick_step: int = 1) -> subprocess.Popen | None:
    """The client process; it connects while the loop idles, then sends ``start`` (the timed run begins).
    ``tick_step``: the states' tick step it expects (the server's ``publish_every``; bench_loop.py)."""
    if kind == "none":
        return None
    ready = Path(tempfile.mkdtemp()) / "ready"
    cmd = [sys.executable, str(ROOT / "bench" / "load_client.py"), "--control", control, "--subscribe",
           "--command-hz", "100", "--status-hz", "1", "--ready", str(ready), "--start",
           "--tick-step", str(tick_step)]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, cwd=ROOT)


def stop_clients(proc: subprocess.Popen | None) -> dict | None:
    if proc is None:
        return None
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=30)
    return json.loads(out.strip().splitlines()[-1])


def loop_run(path: str, rate: float, duration: float, clients: str, can: bool) -> dict:
    """Part 2: one real-time run of the server's loop on the given tick path."""
    n = int(duration * rate) + 100
    wait = "spin" if rate > 2000 else "sleep_spin"
    cfg = LoopConfig(mode="realtime", rate_hz=rate, wait=wait, duration_s=duration, status_interval_s=0.5,
                     status_line=False, sample_capacity=n, startup_grace_s=1.0, autostart=clients == "none")
    adapters = _adapters(can)
    server = assemble(load_plant("powershift"), adapters, cfg, initial_inputs=INITIAL)
    loop = server.loop
    loop.open()
    loop.choose_tick_path("auto" if path == "compiled" else "python")
    proc = None
    try:
        proc = start_clients(adapters[0].endpoints["control"], clients)
        la0, c0 = os.getloadavg()[0], time.process_time()
        loop.run()
        la1, cpu = os.getloadavg()[0], time.process_time() - c0
    finally:
        client = stop_clients(proc)
        loop.close()
    s = loop.telemetry.sample_array() / 1000.0
    tm = loop.telemetry.summary()
    return {"path": loop.tick_path, "reason": loop.tick_path_reason, "rate": rate, "clients": clients, "can": can,
            "load_avg": [la0, la1], "cpu_s": cpu, "tet_us": pct(s[:, 1]), "step_us": pct(s[:, 2]),
            "lateness_us": pct(s[:, 0]), "ticks": tm["ticks"], "missed_ticks": tm["missed_ticks"],
            "missed_pct": 100.0 * tm["missed_ticks"] / max(1, tm["ticks"] + tm["missed_ticks"]),
            "state_sent": adapters[0].sent, "state_dropped": adapters[0].cursor.lost, "client": client}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration", type=float, default=20.0, help="s per loop run (0: part 1 only)")
    ap.add_argument("--rate", type=float, default=1000.0)
    ap.add_argument("--clients", action="append", choices=("none", "sub"), help="default: sub")
    ap.add_argument("--blocks", type=int, default=2, help="A/B blocks of each path (part 1: 5 x this)")
    ap.add_argument("--ticks", type=int, default=20000, help="ticks per block of part 1")
    ap.add_argument("--can", action="store_true", help="add the CAN adapter on a virtual bus")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    res = {"args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
           "load_avg_before": os.getloadavg()}
    print("part 1: the tick in-process ...", file=sys.stderr, flush=True)
    res["tick_cost"] = tc = tick_cost(5 * args.blocks, args.ticks, args.can)
    res["runs"] = []
    if args.duration > 0:
        for kind in args.clients or ["sub"]:
            for b in range(args.blocks):
                for path in PATHS:
                    print(f"part 2: {args.rate:g} Hz, clients {kind}, {path} tick, block {b + 1} "
                          f"({args.duration:g} s) ...", file=sys.stderr, flush=True)
                    res["runs"].append(loop_run(path, args.rate, args.duration, kind, args.can))
    res["load_avg_after"] = os.getloadavg()
    print(json.dumps(res, indent=2))
    c, p = tc["compiled"], tc["python"]
    print(f"\ntick in-process ({tc['reason']}), us per tick, medians of {5 * args.blocks} blocks of "
          f"{args.ticks} (CPU time; wall time in the JSON):\n\n| path | tick | plant step alone (a call from "
          f"Python) | step inside the tick (clock) | compiled call alone |\n| --- | --- | --- | --- | --- |")
    for name, r in (("compiled", c), ("python", p)):
        run = f"{r['run_cpu']:.2f}" if r["run_cpu"] is not None else "-"
        print(f"| {name} | {r['tick_cpu']:.2f} | {r['step_cpu']:.2f} | {r['step_inside']:.2f} | {run} |")
    print(f"\npython / compiled tick: {p['tick_cpu'] / c['tick_cpu']:.2f}x; compiled tick / plant step alone: "
          f"{c['tick_cpu'] / c['step_cpu']:.2f}x (CPU time)")
    if res["runs"]:
        print(f"\n| path | clients | load | TET p50 | p99 | p99.9 | step p50 | missed % | CPU s | states lost |"
              "\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        for r in res["runs"]:
            cl = r["client"]
            lost = "-" if cl is None else f"{cl['lost']} of {cl['states'] + cl['lost']}"
            t = r["tet_us"]
            print(f"| {r['path']} | {r['clients']} | {r['load_avg'][0]:.2f} | {t['p50']:.1f} | {t['p99']:.1f} | "
                  f"{t['p999']:.1f} | {r['step_us']['p50']:.1f} | {r['missed_pct']:.3f} | {r['cpu_s']:.1f} | {lost} |")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(with_host(res), indent=2))
    return 0


if __name__ == "__main__":
    print(host_line(), flush=True)
    sys.exit(main())
