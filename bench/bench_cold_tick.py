#!/usr/bin/env python3
"""The tick after a sleep: what the wait does before the deadline, A/B inside one real-time run.

One 1 kHz run of the server's loop (the Powershift plant, the ZeroMQ
adapter; ``--clients sub``: a subscriber that checks every sequence number,
commands at 100 Hz and a status request a second, ``bench/load_client.py``)
whose wait changes every ``--block`` ticks, round robin over ``--variants``,
so every variant sees the same minutes of the same (loaded) host.  Per
variant: TET, the step's own time inside the tick and the wake-up lateness
(p50 / p99 / p99.9), over the ticks that variant waited for.

A variant is ``sleep`` (sleep to the deadline, no spin, no rehearsal) or
``<rehearsal>[:<lead_us>]`` for the ``sleep_spin`` wait, with the rehearsal
``none`` (only the telemetry's rehearsal), ``step`` (the plant's step and the ring row on scratch copies,
through Python) or ``tick`` (the compiled tick's own call on a scratch plan:
its step on copies, its stages' memory and code read;
``CompiledTick.rehearse``), made ``lead_us`` before the deadline (0 or none:
as soon as the sleep ends, up to the spin margin before it).

    python bench/bench_cold_tick.py --duration 60 --clients sub --variants none step tick tick:15 sleep
"""

from __future__ import annotations

import argparse
import json
import os
import sys
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
from bench_tick_stages import INITIAL, pct, start_clients, stop_clients  # noqa: E402


def parse_variant(v: str) -> tuple[str, int]:
    """``(rehearsal or "sleep", lead ns)``."""
    how, _, lead = v.partition(":")
    if how not in ("sleep", "none", "step", "tick"):
        raise SystemExit(f"variant {v!r}: sleep, none, step or tick, with an optional :lead_us")
    return how, int(float(lead or 0) * 1000)


def run(args) -> dict:
    variants = [parse_variant(v) for v in args.variants]
    n = int(args.duration * args.rate) + 100
    cfg = LoopConfig(mode="realtime", rate_hz=args.rate, wait="sleep_spin", duration_s=args.duration,
                     status_interval_s=0.5, status_line=False, sample_capacity=n, startup_grace_s=1.0,
                     autostart=args.clients == "none")
    zmq = ZmqAdapter("zmq", {**FREE_ENDPOINTS, "status_publish_s": 1.0})
    server = assemble(load_plant("powershift"), [zmq], cfg, initial_inputs=INITIAL)
    loop = server.loop
    loop.open()
    loop.choose_tick_path(args.tick_path)
    waiter = loop.waiter
    which = np.full(n, -1, dtype=np.int64)
    count = [0]
    sleep_wait, spin_wait = waiter._wait_sleep, waiter._wait_sleep_spin
    block, nv = args.block, len(variants)

    def wait(deadline: int) -> None:  # the same Python around every variant's wait
        i = count[0]
        v = (i // block) % nv
        if i < n:
            which[i] = v
        count[0] = i + 1
        how, lead = variants[v]
        if how == "sleep":
            sleep_wait(deadline)
        else:
            waiter.rehearsal = how
            waiter.rehearse_lead_ns = lead
            spin_wait(deadline)

    waiter.wait = wait
    proc = start_clients(zmq.endpoints["control"], args.clients)
    la0, c0 = os.getloadavg()[0], time.process_time()
    try:
        loop.run()
    finally:
        client = stop_clients(proc)
        loop.close()
    la1, cpu = os.getloadavg()[0], time.process_time() - c0
    s = loop.telemetry.sample_array() / 1000.0  # us
    k = min(len(s), count[0])
    s, which = s[:k], which[:k]
    skip = int(args.rate * cfg.startup_grace_s)  # the start-up's ticks left out
    s, which = s[skip:], which[skip:]
    tm = loop.telemetry.summary()
    out = {"tick_path": loop.tick_path, "ticks": tm["ticks"], "missed_ticks": tm["missed_ticks"],
           "load": [la0, la1], "cpu_s": cpu, "client": client, "waits": count[0], "samples": int(len(s)),
           "variants": {}}
    for j, v in enumerate(args.variants):
        m = which == j
        out["variants"][v] = {"ticks": int(m.sum()), "tet_us": pct(s[m, 1]), "step_us": pct(s[m, 2]),
                              "lateness_us": pct(s[m, 0])}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration", type=float, default=30.0)
    ap.add_argument("--rate", type=float, default=1000.0)
    ap.add_argument("--block", type=int, default=250, help="ticks per variant before the next one takes over")
    ap.add_argument("--variants", nargs="+", default=["none", "step", "tick", "tick:15", "sleep"])
    ap.add_argument("--clients", default="sub", choices=("none", "sub"))
    ap.add_argument("--tick-path", default="auto", choices=("auto", "python"))
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    res = run(args)
    print(f"tick path {res['tick_path']}; ticks {res['ticks']}, missed {res['missed_ticks']}; load "
          f"{res['load'][0]:.1f} -> {res['load'][1]:.1f}; subscriber lost "
          f"{(res['client'] or {}).get('lost', '-')} of {(res['client'] or {}).get('states', '-')}")
    print("\n| variant | ticks | TET p50 | p99 | p99.9 | step p50 | step p99 | lateness p50 | p99 |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for v, r in res["variants"].items():
        t, st, la = r["tet_us"], r["step_us"], r["lateness_us"]
        print(f"| {v} | {r['ticks']} | {t['p50']:.2f} | {t['p99']:.2f} | {t['p999']:.1f} | {st['p50']:.2f} | "
              f"{st['p99']:.2f} | {la['p50']:.1f} | {la['p99']:.1f} |")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(with_host({"args": {k: (str(v) if isinstance(v, Path) else v)
                                                            for k, v in vars(args).items()}, **res}), indent=2))
    return 0


if __name__ == "__main__":
    print(host_line(), flush=True)
    sys.exit(main())
