#!/usr/bin/env python3
"""The tick's cost of an XCP DAQ: 1 kHz realtime TET with a 200-entry DAQ running vs not, in the same run.

Starts ``gearbox-hil serve powershift`` in realtime mode with the ZeroMQ and
XCP adapters on free loopback ports, connects pyxcp over TCP, configures a
DAQ list of 200 float64 entries (``time_s`` and the outputs, repeated) on the
tick event with timestamps, then alternates phases with the DAQ stopped and
running (``--rounds`` of each, ``--phase`` seconds each).  The TET of each
phase is the difference of the server's cumulative TET histograms
(``timing_histograms``) read at the phase's two ends, so both sides come from
one process on the same machine load.  Packets received and the server's
lost-packet counts per event are reported per phase.

    python bench/bench_xcp.py --rounds 4 --phase 10 --json bench/results/xcp_daq.json
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _support import FREE_PORTS, LocalServer, write_io  # noqa: E402
from _host import host_line, with_host  # noqa: E402

ENTRIES = 200
ODT0 = (1400 - 1 - 4) // 8


def hist(status: dict) -> dict[float, int]:
    h = status["timing_histograms"]["tet_us"]
    return {up if up is not None else float("inf"): n for up, n in zip(h["upper_us"], h["count"])}


def percentile(h: dict[float, int], q: float) -> float:
    total = sum(h.values())
    if total == 0:
        return float("nan")
    rank = max(1, int(-(-q / 100.0 * total // 1)))
    seen = 0
    for up in sorted(h):
        seen += h[up]
        if seen >= rank:
            return up
    return float("inf")


def diff(a: dict, b: dict) -> dict:
    return {k: b.get(k, 0) - a.get(k, 0) for k in b if b.get(k, 0) - a.get(k, 0) > 0}


def configure(x, columns: list[int]) -> None:
    """One DAQ list of float64 entries (measurement columns) on the tick event, with timestamps, not started."""
    x.freeDaq()
    x.allocDaq(1)
    x.allocOdt(0, 2)
    x.allocOdtEntry(0, 0, ODT0)
    x.allocOdtEntry(0, 1, ENTRIES - ODT0)
    x.setDaqPtr(0, 0, 0)
    for k, col in enumerate(columns):
        if k == ODT0:
            x.setDaqPtr(0, 1, 0)
        x.writeDaq(0xFF, 8, 0, 0x10000 + 8 * col)
    x.setDaqListMode(0x10, 0, 0, 1, 0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--phase", type=float, default=10.0, help="seconds per phase")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()

    from pyxcp.config import create_application_from_config
    from pyxcp.master import Master
    from pyxcp.transport.transport_ext import FrameAcquisitionPolicy, FrameCategory

    class Count(FrameAcquisitionPolicy):
        def __init__(self):
            super().__init__(filtered_out=None)
            self.n = 0

        def feed(self, category, counter, timestamp, payload):
            if category == FrameCategory.DAQ:
                self.n += 1

        def finalize(self, *a):
            pass

    tmp = Path(tempfile.mkdtemp(prefix="bench-xcp-"))
    io = write_io(tmp / "io.toml", "", "", FREE_PORTS + '\n[[adapters]]\ntype = "xcp"\nname = "xcp"\nport = 0\n')
    srv = LocalServer(tmp, "powershift", io, "realtime")
    phases = []
    try:
        port = int(srv.endpoints["xcp.tcp"].rsplit(":", 1)[1])
        app = create_application_from_config({"Transport": {"Eth": {"host": "127.0.0.1", "port": port,
                                                                    "protocol": "TCP"}}}, log_level=logging.WARNING)
        policy = Count()
        with srv.client() as c, Master("eth", config=app, policy=policy) as x:
            x.connect()
            configure(x, [k % (1 + len(c.get()["y"])) for k in range(ENTRIES)])
            time.sleep(3.0)  # start-up grace
            for r in range(args.rounds):
                for daq in (False, True):
                    if daq:
                        x.startStopDaqList(1, 0)
                    st0 = c.status()
                    n0 = policy.n
                    time.sleep(args.phase)
                    st1 = c.status()
                    n1 = policy.n
                    if daq:
                        x.startStopDaqList(0, 0)
                    h = diff(hist(st0), hist(st1))
                    phases.append({"round": r, "daq": daq, "load": round(os.getloadavg()[0], 2),
                                   "ticks": sum(h.values()),
                                   "tet_p50_us": percentile(h, 50), "tet_p99_us": percentile(h, 99),
                                   "tet_p999_us": percentile(h, 99.9), "dto_received": n1 - n0,
                                   "overruns": st1["timing"]["overruns"] - st0["timing"]["overruns"],
                                   "daq_lost": st1["adapters"]["xcp"]["daq_lost"]})
                    print(json.dumps(phases[-1]), flush=True)
            x.disconnect()
    finally:
        srv.shutdown()
    off = [p for p in phases if not p["daq"]]
    on = [p for p in phases if p["daq"]]
    summary = {k: {"off": statistics.median(p[k] for p in off), "on": statistics.median(p[k] for p in on)}
               for k in ("tet_p50_us", "tet_p99_us", "tet_p999_us")}
    summary["p99_rise_us_per_round"] = [b["tet_p99_us"] - a["tet_p99_us"] for a, b in zip(off, on)]
    summary["p99_rise_us_median"] = statistics.median(summary["p99_rise_us_per_round"])
    cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), "?")
    out = {"cpu": cpu, "rounds": args.rounds, "phase_s": args.phase, "phases": phases, "summary": summary}
    print(json.dumps(summary, indent=1))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(with_host(out), indent=1))
    return 0


if __name__ == "__main__":
    print(host_line(), flush=True)
    sys.exit(main())
