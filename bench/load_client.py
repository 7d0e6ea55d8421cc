#!/usr/bin/env python3
"""A client process that loads a running server the way a bench does: subscriber, commands, status requests.

Connects to a server's control endpoint, then until SIGTERM/SIGINT or
``--duration``:

* subscribes to the state stream (``--subscribe``) and checks every message:
  sequence numbers must rise by one (a jump is counted as that many lost
  messages, a repeat or a step back as out of order) and, between resets,
  ``tick`` must rise with them;
* sends a command every ``1 / --command-hz`` s (``engine_torque`` alternating
  between two valid values, with a fresh ``seq``);
* asks for the ``status`` every ``1 / --status-hz`` s.

At the end it prints one JSON object on stdout: states received, lost
(sequence gaps), out of order, commands sent, status requests answered, and
the server's ``state_sent`` / send errors from its last status.

    python bench/load_client.py --control tcp://127.0.0.1:5555 --subscribe --command-hz 100 --status-hz 1
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from pathlib import Path

import msgpack
import zmq

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from io_adapters.zmq.client import HilClient  # noqa: E402
from _host import host_line  # noqa: E402  (bench/ is first on the path)


def drain_states(sub, res: dict, last_seq, last_tick, tick_step: int):
    """Read every state message waiting on ``sub``, counting lost, reordered and broken ones in ``res``: the last
    sequence number and tick seen."""
    while True:
        try:
            _, body = sub.recv_multipart(zmq.NOBLOCK)
        except zmq.Again:
            return last_seq, last_tick
        msg = msgpack.unpackb(body)
        seq, tick = msg["seq"], msg["tick"]
        res["states"] += 1
        if last_seq is None:
            res["first_seq"] = seq
        elif seq > last_seq + 1:
            res["lost"] += seq - last_seq - 1
        elif seq <= last_seq:
            res["out_of_order"] += 1
        if last_tick is not None and seq == last_seq + 1 and tick != last_tick + tick_step and tick > tick_step:
            res["tick_breaks"] += 1  # the first message after a reset; anything else is a bug
        last_seq, last_tick = seq, tick
        res["last_seq"] = seq


def request_status(hil, res: dict, elapsed_s: float) -> None:
    """One status request: the server's ZeroMQ counters into ``res``, or a failure counted (with when)."""
    try:
        st = hil.status()
        res["status_requests"] += 1
        res["server_zmq"] = {key: st["adapters"]["zmq"].get(key) for key in
                             ("state_sent", "send_errors", "state_dropped", "received", "applied")}
    except Exception:  # a timeout under load is counted, not fatal
        res["status_failures"] += 1
        if len(res["status_failures_at_s"]) < 20:  # when: a request left as the server stops times out
            res["status_failures_at_s"].append(round(elapsed_s, 3))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--control", required=True, help="the server's control endpoint")
    ap.add_argument("--subscribe", action="store_true", help="subscribe to the state stream and check it")
    ap.add_argument("--command-hz", type=float, default=0.0, help="commands per second (0: none)")
    ap.add_argument("--status-hz", type=float, default=0.0, help="status requests per second (0: none)")
    ap.add_argument("--duration", type=float, default=0.0, help="seconds (0: until SIGTERM/SIGINT)")
    ap.add_argument("--ready", type=Path, help="touch this file once connected and subscribed")
    ap.add_argument("--start", action="store_true", help="send a start request once connected and subscribed")
    ap.add_argument("--tick-step", type=int, default=1,
                    help="ticks between two state messages (the server's publish_every)")
    args = ap.parse_args()

    stop = []
    signal.signal(signal.SIGTERM, lambda *a: stop.append(1))
    signal.signal(signal.SIGINT, lambda *a: stop.append(1))
    res = {"states": 0, "lost": 0, "out_of_order": 0, "tick_breaks": 0, "first_seq": None, "last_seq": None,
           "commands_sent": 0, "status_requests": 0, "status_failures": 0, "status_failures_at_s": [],
           "server_zmq": None}
    with HilClient(args.control, timeout_s=60.0) as hil:
        hil.timeout_s = 2.0  # connecting may wait for a server that is still starting; later requests may not
        sub = None
        if args.subscribe:
            hil.subscribe(("state",))
            sub = hil._sub
            time.sleep(0.3)  # the subscription reaches the server
        if args.ready:
            args.ready.write_text("ready")
        if args.start:
            hil.start()
        now = t_start = time.monotonic()
        end = now + args.duration if args.duration > 0 else float("inf")
        cmd_period = 1.0 / args.command_hz if args.command_hz > 0 else float("inf")
        status_period = 1.0 / args.status_hz if args.status_hz > 0 else float("inf")
        next_cmd = now + cmd_period
        next_status = now + status_period
        last_seq = last_tick = None
        k = 0
        while not stop and now < end:
            timeout_ms = max(0, int(1000 * (min(next_cmd, next_status, end) - now)))
            if sub is not None:
                if sub.poll(min(timeout_ms, 100)):
                    last_seq, last_tick = drain_states(sub, res, last_seq, last_tick, args.tick_step)
            else:
                time.sleep(min(timeout_ms, 100) / 1000.0)
            now = time.monotonic()
            if now >= next_cmd:
                hil.set_inputs(engine_torque=300.0 + 10.0 * (k % 2))
                k += 1
                res["commands_sent"] += 1
                next_cmd += cmd_period
                if next_cmd < now:  # this process was stalled: do not send a burst
                    next_cmd = now + cmd_period
            if now >= next_status:
                request_status(hil, res, now - t_start)
                next_status += status_period
                if next_status < now:
                    next_status = now + status_period
    print(json.dumps(res), flush=True)
    return 0


if __name__ == "__main__":
    print(host_line(), flush=True)
    sys.exit(main())
