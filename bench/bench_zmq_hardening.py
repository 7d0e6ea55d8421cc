#!/usr/bin/env python3
"""What misbehaving ZeroMQ peers cost a realtime loop in ticks, against a same-run control.

The timing half of ``tests/test_zmq_hardening.py`` (the tests keep the
functional half: every message counted, the plant untouched, no stall).
A realtime server at ``--rate`` Hz; each round runs, alternately, the
control and the misbehaving peers, and reads the missed ticks of each:

* ``quiet`` / ``flood``: three short peer processes that subscribe with a
  1-byte / 4 MiB prefix and push an empty / a 1 MiB command (ZeroMQ must
  drop the oversized ones before the server reads them);
* ``idle`` / ``refused``: the same wall time without requests / refused
  ``load_scenario`` requests (a FIFO, a directory, a path outside the
  folder), which must not block the loop.

Run: ``python bench/bench_zmq_hardening.py [--rounds N] [--rate HZ] [--json FILE]``.
Missed ticks depend on the machine and its load; compare the columns of
the same run.
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

from _support import LocalServer, write_io

from io_adapters.zmq.client import ServerError

from _host import host_line, with_host  # noqa: E402  (bench/ is first on the path)

# A peer's process: a subscription and a command of the given sizes (the test's FLOOD and QUIET peers).
PEER = """
import os, sys, time, zmq
ctx = zmq.Context()
sub = ctx.socket(zmq.SUB); sub.setsockopt(zmq.LINGER, 0); sub.connect(sys.argv[1])
sub.setsockopt(zmq.SUBSCRIBE, b"s" * int(sys.argv[3]))
push = ctx.socket(zmq.PUSH); push.setsockopt(zmq.LINGER, 0); push.connect(sys.argv[2])
push.send(b"\\x83\\xa1v\\x01\\xa3seq\\x03\\xa3set\\x80" + b"\\x00" * int(sys.argv[4]) if int(sys.argv[4]) else b"\\x80")
time.sleep(1.5)
os._exit(0)
"""


def missed(hil) -> int:
    return hil.status()["timing"]["missed_ticks"]


def peers(hil, sub_bytes: int, cmd_bytes: int) -> int:
    """Missed ticks while three peer processes run one after the other."""
    m0 = missed(hil)
    for _ in range(3):
        subprocess.run([sys.executable, "-c", PEER, hil.endpoints["state"], hil.endpoints["command"],
                        str(sub_bytes), str(cmd_bytes)], timeout=120, capture_output=True)
    time.sleep(0.5)
    return missed(hil) - m0


def refused(hil, folder: Path) -> tuple[int, float]:
    """Missed ticks over refused load_scenario requests, and their wall time (s)."""
    m0, t0 = missed(hil), time.monotonic()
    for path in ("fifo.toml", "adir", "../outside.toml") * 5:
        try:
            hil.load_scenario(path)
        except ServerError:
            pass
    return missed(hil) - m0, time.monotonic() - t0


def idle(hil, seconds: float) -> int:
    m0 = missed(hil)
    time.sleep(seconds)
    return missed(hil) - m0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rate", type=float, default=100.0, help="loop rate, Hz (the test's server: 100)")
    ap.add_argument("--json", type=Path, help="write the results here")
    args = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="bench-zmq-hardening-"))
    folder = tmp / "scen"
    folder.mkdir()
    os.mkfifo(folder / "fifo.toml")
    (folder / "adir").mkdir()
    io = write_io(tmp / "io.toml", f"rate_hz = {args.rate}", f'[scenarios]\nfolders = ["{folder}"]\n')
    res: dict = {"rate_hz": args.rate, "load_avg_before": os.getloadavg(), "rounds": []}
    with LocalServer(tmp, "powershift", io) as srv, srv.client(timeout_s=30.0) as hil:
        for k in range(args.rounds):
            r = {"quiet": peers(hil, 1, 0), "flood": peers(hil, 4 << 20, 1 << 20)}
            r["refused"], took = refused(hil, folder)
            r["idle"] = idle(hil, max(took, 0.2))
            r["refused_s"] = round(took, 3)
            res["rounds"].append(r)
            print(f"round {k + 1}: missed ticks quiet {r['quiet']}, flood {r['flood']}; idle {r['idle']}, "
                  f"refused requests {r['refused']} (in {took:.3f} s)", flush=True)
        res["server_timing"] = hil.status()["timing"]
        srv.shutdown()
    res["load_avg_after"] = os.getloadavg()
    print("\n| round | quiet peers | flooding peers | idle | refused scenario requests |\n| --- | --- | --- | --- | --- |")
    for k, r in enumerate(res["rounds"]):
        print(f"| {k + 1} | {r['quiet']} | {r['flood']} | {r['idle']} | {r['refused']} |")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(with_host(res), indent=2))
    return 0


if __name__ == "__main__":
    print(host_line(), flush=True)
    sys.exit(main())
