#!/usr/bin/env python3
"""Where the tick's time goes: a per-stage breakdown of the real-time tick, with and without clients.

For each rate and client set-up, in one invocation:

1. a plain run of the loop (the server's own tick), whose task execution
   time (TET) and missed ticks are the figures to compare;
2. an instrumented run: the same tick with a time stamp between its stages
   (read adapters, inputs and watchdog, plant step, the state-ring row,
   the adapters' writes, the rest, and the loop's telemetry update after
   the tick), which gives the breakdown, and the time of every between-tick
   pump (states packed and sent, commands decoded: outside the TET).  The
   stamps cost about 0.1 us each, so the instrumented TET is a little higher
   than the plain one.

Clients (``--clients``) run in a separate process (``bench/load_client.py``):
``none``, or ``sub`` (a subscriber that checks every sequence number, a
command every 10 ms and a status request every second).  The server is the
Powershift plant with the ZeroMQ adapter publishing every tick
(``--can`` adds the CAN adapter on python-can's virtual bus, as in the
built-in default configuration).

    python bench/bench_tick_stages.py --duration 20 --rate 1000 --rate 10000
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
import server.realtime.loop as loop_module  # noqa: E402
from io_adapters.base import TI_STATUS  # noqa: E402
from io_adapters.zmq.adapter import ZmqAdapter  # noqa: E402
from plant_models.registry import load_plant  # noqa: E402
from server.realtime.loop_config import LoopConfig  # noqa: E402
from server.realtime.runtime import assemble  # noqa: E402
from server.offline.scenario import offline_step  # noqa: E402
from _host import host_line, with_host  # noqa: E402  (bench/ is first on the path)

STAGES = ("read", "inputs", "step", "ring", "writes", "rest", "telemetry")
INITIAL = {"p_c1": 16.0, "p_c3": 16.0, "p_c6": 16.0, "engine_torque": 300.0, "load_torque": 3500.0}


def pct(x) -> dict:
    x = np.asarray(x, dtype=float)
    if x.size == 0:
        return {"p50": None, "p99": None, "p999": None, "max": None, "mean": None}
    return {"p50": float(np.percentile(x, 50)), "p99": float(np.percentile(x, 99)),
            "p999": float(np.percentile(x, 99.9)), "max": float(x.max()), "mean": float(x.mean())}


class StageClock:
    """Per-tick stage durations (ns), preallocated; and the between-tick pumps (duration, ns)."""

    def __init__(self, n: int):
        self.a = np.zeros((n, len(STAGES)), dtype=np.int64)
        self.k = 0
        self.pumps = np.zeros(4 * n, dtype=np.int64)
        self.n_pumps = 0


def instrument(loop, clock: StageClock) -> None:
    """Replace the loop's tick by a copy with time stamps between its stages (same work, same order)."""
    mono = time.monotonic_ns
    a = clock.a
    n_rows = a.shape[0]
    plant = loop.plant
    player = loop.player
    tick_info = loop.tick_info

    def tick(now_ns: int) -> int:
        t0 = mono()
        k = loop.tick
        for ad in loop.adapters:
            ad.read(k, now_ns)
        t1 = mono()
        n = loop._queued_n
        if n:
            for j in range(n):
                plant.u[loop._queued_idx[j]] = loop._queued_val[j]
                plant.u_rate[loop._queued_idx[j]] = 0.0
            loop._queued_n = 0
        if k == player.swap_at:
            player.swap()
        sc = player.active
        if sc is not None and k < sc.n_steps:
            t2 = mono()
            st = offline_step(plant, sc, k)
        else:
            if sc is not None:
                player.release(k)
            elif loop._watchdog_in_mode:
                loop.watchdog.update(now_ns, loop.dt)
            t2 = mono()
            st = plant.step(loop.dt)
        t3 = mono()
        loop._step_ns = t3 - t2
        loop.tick = k + 1
        tick_info[TI_STATUS] = st
        if sc is not None and k + 1 >= sc.n_steps:
            player.release(k + 1)
        t4 = mono()
        loop._ring_push(k + 1, now_ns, plant.time)
        t5 = mono()
        for ad in loop._writers:
            ad.write(k + 1, now_ns)
        t6 = mono()
        j = clock.k
        if j < n_rows:
            row = a[j]
            row[0] = t1 - t0
            row[1] = t2 - t1
            row[2] = t3 - t2
            row[3] = t5 - t4
            row[4] = t6 - t5
            row[5] = t4 - t3
        return st

    loop._tick = tick
    record = loop_module.record_tick

    def record_tick(c, hist, samples, lateness, tet, step, status, timed):
        t0 = mono()
        record(c, hist, samples, lateness, tet, step, status, timed)
        j = clock.k
        if j < n_rows:
            a[j, 6] = mono() - t0
        clock.k = j + 1

    loop_module.record_tick = record_tick
    pump = loop._pump
    pumps = clock.pumps

    def timed_pump(until_ns: int) -> None:
        t0 = mono()
        pump(until_ns)
        j = clock.n_pumps
        if j < pumps.shape[0]:
            pumps[j] = mono() - t0
            clock.n_pumps = j + 1

    loop._pump = timed_pump


def start_clients(control: str, kind: str, tick_step: int = 1) -> subprocess.Popen | None:
    """The client process; it connects while the loop idles, then sends ``start`` (the timed run begins)."""
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


def one_run(rate: float, duration: float, wait: str, clients: str, can: bool, instrumented: bool) -> dict:
    n = int(duration * rate) + 100
    cfg = LoopConfig(mode="realtime", rate_hz=rate, wait=wait, duration_s=duration, status_interval_s=0.5,
                     status_line=False, sample_capacity=n, startup_grace_s=1.0,
                     autostart=clients == "none")
    zmqa = ZmqAdapter("zmq", {**FREE_ENDPOINTS, "status_publish_s": 1.0})
    adapters = [zmqa]
    if can:
        from io_adapters.can.adapter import CanAdapter
        adapters.append(CanAdapter("can", {"interface": "virtual", "channel": f"bench-{os.getpid()}"}))
    server = assemble(load_plant("powershift"), adapters, cfg, initial_inputs=INITIAL)
    loop = server.loop
    clock = StageClock(n)
    record_saved = loop_module.record_tick
    loop.open()
    proc = None
    try:
        if instrumented:
            instrument(loop, clock)
        proc = start_clients(zmqa.endpoints["control"], clients)
        la0 = os.getloadavg()[0]
        loop.run()
        la1 = os.getloadavg()[0]
    finally:
        loop_module.record_tick = record_saved
        client = stop_clients(proc)
        loop.close()
    s = loop.telemetry.sample_array() / 1000.0
    tm = loop.telemetry.summary()
    out = {"rate": rate, "clients": clients, "can": can, "instrumented": instrumented, "load_avg": [la0, la1],
           "tet_us": pct(s[:, 1]), "step_us": pct(s[:, 2]), "lateness_us": pct(s[:, 0]), "ticks": tm["ticks"],
           "missed_ticks": tm["missed_ticks"],
           "missed_pct": 100.0 * tm["missed_ticks"] / max(1, tm["ticks"] + tm["missed_ticks"]),
           "state_sent": zmqa.sent, "state_dropped": zmqa.cursor.lost, "send_errors": zmqa.send_errors,
           "client": client}
    if instrumented:
        st = clock.a[:min(clock.k, n)] / 1000.0
        out["stages_us"] = {name: pct(st[:, j]) for j, name in enumerate(STAGES)}
        out["stages_sum_us"] = pct(st[:, :6].sum(axis=1))
        out["pump_us"] = pct(clock.pumps[:clock.n_pumps] / 1000.0)
        out["pumps"] = clock.n_pumps
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration", type=float, default=20.0)
    ap.add_argument("--rate", type=float, action="append", help="rates to run (default 1000 and 10000)")
    ap.add_argument("--clients", action="append", choices=("none", "sub"), help="default: none and sub")
    ap.add_argument("--can", action="store_true", help="add the CAN adapter on a virtual bus")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    rates = args.rate or [1000.0, 10000.0]
    kinds = args.clients or ["none", "sub"]
    res = {"args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
           "load_avg_before": os.getloadavg(), "runs": []}
    for rate in rates:
        wait = "spin" if rate > 2000 else "sleep_spin"
        for kind in kinds:
            for instrumented in (False, True):
                print(f"{rate:g} Hz, wait {wait}, clients {kind}, {'instrumented' if instrumented else 'plain'} "
                      f"({args.duration:g} s) ...", file=sys.stderr, flush=True)
                res["runs"].append(one_run(rate, args.duration, wait, kind, args.can, instrumented))
    res["load_avg_after"] = os.getloadavg()
    print(json.dumps(res, indent=2))
    print("\n| rate | clients | load | TET p50 | p99 | p99.9 | missed % | states lost |"
          "\n| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in res["runs"]:
        if r["instrumented"]:
            continue
        c = r["client"]
        lost = "-" if c is None else f"{c['lost']} of {c['states'] + c['lost']}"
        t = r["tet_us"]
        print(f"| {r['rate']:g} | {r['clients']} | {r['load_avg'][0]:.2f} | {t['p50']:.1f} | {t['p99']:.1f} | "
              f"{t['p999']:.1f} | {r['missed_pct']:.3f} | {lost} |")
    print("\nstage breakdown (instrumented runs), us: p50 / p99 / mean")
    print("\n| rate | clients | " + " | ".join(STAGES) + " | sum | TET p50 / p99 | pump between ticks |")
    print("| --- | --- |" + " --- |" * (len(STAGES) + 3))
    for r in res["runs"]:
        if not r["instrumented"]:
            continue
        cells = [f"{v['p50']:.2f} / {v['p99']:.2f} / {v['mean']:.2f}" for v in r["stages_us"].values()]
        s = r["stages_sum_us"]
        print(f"| {r['rate']:g} | {r['clients']} | " + " | ".join(cells)
              + f" | {s['p50']:.1f} / {s['p99']:.1f} | {r['tet_us']['p50']:.1f} / {r['tet_us']['p99']:.1f} | "
              + f"{r['pump_us']['p50']:.1f} / {r['pump_us']['p99']:.1f} / {r['pump_us']['mean']:.1f} |")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(with_host(res), indent=2))
    return 0


if __name__ == "__main__":
    print(host_line(), flush=True)
    sys.exit(main())
