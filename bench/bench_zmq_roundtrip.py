#!/usr/bin/env python3
"""End-to-end benchmark: a command sent over ZeroMQ, applied by the server, seen in the state stream.

A realtime server (1 kHz by default, publishing every tick) runs in a
subprocess.  For each sample the client drains the state stream, waits a
random fraction of a period (so commands arrive at every phase of the tick),
sends a command with a fresh ``seq`` and waits for the first state message
whose ``ack`` carries it.  Reported:

* the command-to-state round trip (send -> state received), p50/p99/p99.9/max;
* how many ticks after the newest state the client had seen the command was
  applied (1 = at the next tick);
* the baseline measured in the same run: a plain ZeroMQ REQ/REP echo between
  two processes on loopback, and the server's own ``ping`` control request.

    python bench/bench_zmq_roundtrip.py --samples 3000
    python bench/bench_zmq_roundtrip.py --samples 3000 --fifo 80
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import msgpack
import numpy as np
import zmq

from _support import LocalServer, write_io

from io_adapters.zmq.client import HilClient

from _host import host_line, with_host  # noqa: E402  (bench/ is first on the path)

ECHO = """
import sys, zmq
ctx = zmq.Context(); s = ctx.socket(zmq.REP); port = s.bind_to_random_port("tcp://127.0.0.1")
print(port, flush=True)
while True:
    m = s.recv()
    if m == b"quit":
        s.send(b""); break
    s.send(m)
"""


def pct(x) -> dict:
    x = np.asarray(x, dtype=float)
    return {"p50": float(np.percentile(x, 50)), "p99": float(np.percentile(x, 99)),
            "p999": float(np.percentile(x, 99.9)), "max": float(x.max()), "n": int(x.size)}


def echo_baseline(n: int) -> dict:
    p = subprocess.Popen([sys.executable, "-c", ECHO], stdout=subprocess.PIPE, text=True)
    port = int(p.stdout.readline())
    ctx = zmq.Context.instance()
    s = ctx.socket(zmq.REQ)
    s.setsockopt(zmq.LINGER, 0)
    s.connect(f"tcp://127.0.0.1:{port}")
    payload = msgpack.packb({"v": 1, "seq": 1, "set": {"p_c2": 0.5}})
    rtt = []
    for k in range(n + 100):
        t0 = time.perf_counter_ns()
        s.send(payload)
        s.recv()
        if k >= 100:
            rtt.append((time.perf_counter_ns() - t0) / 1000.0)
        time.sleep(random.random() * 1e-3)
    s.send(b"quit")
    s.recv()
    s.close(0)
    p.wait(timeout=10)
    return pct(rtt)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--samples", type=int, default=3000)
    ap.add_argument("--rate", type=float, default=1000.0)
    ap.add_argument("--fifo", type=int, default=0, help="SCHED_FIFO priority of the server loop (0: none)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp())
    io = write_io(tmp / "io.toml", f"rate_hz = {args.rate}",
                  f"[realtime]\nsched_fifo_priority = {args.fifo}\n[watchdog]\nenabled = false\n")
    server = LocalServer(tmp, "powershift", io)
    srv = server.proc
    res: dict = {"args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
                 "load_avg_before": os.getloadavg()}
    try:
        control = server.control
        print("baseline: ZeroMQ REQ/REP echo between two processes ...", flush=True)
        res["baseline_echo_us"] = echo_baseline(args.samples)
        with HilClient(control, timeout_s=10.0) as hil:
            ping = []
            for _ in range(min(args.samples, 1000)):
                t0 = time.perf_counter_ns()
                hil.ping()
                ping.append((time.perf_counter_ns() - t0) / 1000.0)
                time.sleep(random.random() * 1e-3)
            res["server_ping_us"] = pct(ping)
            hil.subscribe(("state",))
            hil.set_inputs(p_c1=16.0, p_c3=16.0, p_c6=16.0, engine_torque=100.0)
            time.sleep(1.0)
            period = 1.0 / args.rate
            rtt, ticks_after, lost = [], [], 0
            sub = hil._sub
            print(f"command -> state: {args.samples} samples ...", flush=True)
            for k in range(args.samples + 50):
                last = hil.latest_state(timeout_s=5.0)
                time.sleep(random.random() * period)
                while sub.poll(0):  # anything that arrived meanwhile is the newest the client knows
                    topic, body = sub.recv_multipart()
                    last = hil._decode(topic, body, 0)
                t0 = time.perf_counter_ns()
                seq = hil.set_inputs(p_c2=0.5 * (k % 2))
                s = hil.wait_for(lambda st: st.ack >= seq, 5.0)
                t1 = time.perf_counter_ns()
                if s is None:
                    lost += 1
                    continue
                if k >= 50:
                    rtt.append((t1 - t0) / 1000.0)
                    ticks_after.append(s.tick - last.tick)
            res["command_to_state_us"] = pct(rtt)
            ta = np.array(ticks_after)
            res["applied_ticks_after_newest_seen"] = {str(v): int((ta == v).sum()) for v in np.unique(ta)}
            res["lost"] = lost
            res["server_timing"] = hil.status()["timing"]
            hil.shutdown()
        srv.wait(timeout=30)
    finally:
        server.kill()
    res["load_avg_after"] = os.getloadavg()
    print(json.dumps(res, indent=2))
    print("\n| quantity (us) | p50 | p99 | p99.9 | max |\n| --- | --- | --- | --- | --- |")
    for k in ("baseline_echo_us", "server_ping_us", "command_to_state_us"):
        v = res[k]
        print(f"| {k} | {v['p50']:.0f} | {v['p99']:.0f} | {v['p999']:.0f} | {v['max']:.0f} |")
    print(f"\napplied N ticks after the newest state seen: {res['applied_ticks_after_newest_seen']}, lost {lost}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(with_host(res), indent=2))
    return 0


if __name__ == "__main__":
    print(host_line(), flush=True)
    sys.exit(main())
