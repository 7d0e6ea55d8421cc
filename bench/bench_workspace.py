#!/usr/bin/env python3
"""Tick cost with the web workspace open, plotting 20 signals, against no page: A/B in one run.

Each run is ``gearbox-hil serve powershift --mode realtime --rate RATE
--duration D --web 0`` with ZeroMQ on free ports.  Variant ``none``: no page
connects (the adapter's pump finds no client and only moves its cursor);
variant ``page``: a page (aiohttp's WebSocket client, which receives the
same messages as the browser page) subscribes to 20 outputs and reads every
update until the run ends.  The variants alternate ``--rounds`` times so both
see the same machine load; the table lists TET, lateness and missed ticks
from each run's summary, and the rows the page received.

    python bench/bench_workspace.py --rounds 2 --duration 15 --rate 1000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
IO = """[loop]
status_line = false
[[adapters]]
type = "zmq"
name = "zmq"
state_endpoint = "tcp://127.0.0.1:*"
command_endpoint = "tcp://127.0.0.1:*"
control_endpoint = "tcp://127.0.0.1:*"
"""
SIGNALS = ["w_1", "w_2", "w_3", "w_4", "w_out", "gear", "ratio", *(f"slip_c{k}" for k in range(1, 9)),
           *(f"pressure_c{k}" for k in range(1, 6))]  # 20 outputs


async def page(url: str, proc: subprocess.Popen) -> dict:
    """Subscribe to :data:`SIGNALS` and read every update until the server exits; what arrived."""
    import aiohttp

    got = {"messages": 0, "rows": 0, "values": 0}
    async with aiohttp.ClientSession() as http:
        async with http.ws_connect(url + "ws") as ws:
            await ws.send_str(json.dumps({"op": "subscribe", "signals": SIGNALS}))
            while proc.poll() is None:
                try:
                    msg = await ws.receive(timeout=1.0)
                except asyncio.TimeoutError:
                    continue
                if msg.type != aiohttp.WSMsgType.TEXT:
                    break
                m = json.loads(msg.data)
                got["messages"] += 1
                if m["op"] == "rows":
                    got["rows"] += len(m["tick"])
                    got["values"] += sum(len(v) for v in m["values"].values())
    return got


def run(tmp: Path, variant: str, rate: float, duration: float) -> dict:
    io, ready, summary = tmp / "io.toml", tmp / f"ready_{variant}.json", tmp / f"summary_{variant}.json"
    io.write_text(IO)
    for p in (ready, summary):
        p.unlink(missing_ok=True)
    proc = subprocess.Popen([sys.executable, "-m", "server.cli", "serve", "powershift", "--io", str(io), "--mode",
                             "realtime", "--rate", str(rate), "--duration", str(duration), "--web", "0", "--quiet",
                             "--ready-file", str(ready), "--summary-json", str(summary)], cwd=ROOT,
                            stdout=subprocess.DEVNULL, env=dict(os.environ, PYTHONUNBUFFERED="1"))
    while not ready.exists():
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited with {proc.returncode}")
        time.sleep(0.02)
    url = json.loads(ready.read_text())["endpoints"]["web.url"]
    got = asyncio.run(page(url, proc)) if variant == "page" else None
    proc.wait(timeout=duration + 120)
    st = json.loads(summary.read_text())
    t = st["timing"]
    return {"variant": variant, "tet_us": t["tet_us"], "lateness_us": t["lateness_us"], "ticks": t["ticks"],
            "missed_ticks": t["missed_ticks"], "rate_hz_actual": t["rate_hz_actual"], "page": got,
            "web": st["adapters"]["web"], "load_avg": os.getloadavg()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--duration", type=float, default=15.0, help="seconds of each run")
    ap.add_argument("--rate", type=float, default=1000.0)
    ap.add_argument("--json", type=Path, default=None, help="write every run's numbers here")
    args = ap.parse_args()
    results = []
    with tempfile.TemporaryDirectory(prefix="gearbox-hil-ws-") as tmp:
        for rnd in range(args.rounds):
            for variant in ("none", "page"):
                print(f"round {rnd + 1}: {variant} ...", file=sys.stderr, flush=True)
                results.append(dict(run(Path(tmp), variant, args.rate, args.duration), round=rnd + 1))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    print(f"powershift, realtime {args.rate:g} Hz, {args.duration:g} s a run; page: 20 signals over the WebSocket\n")
    print("| round | page | load | TET p50 us | p99 | p99.9 | max | lateness p99 us | missed ticks | rows to the page |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in results:
        t, lt = r["tet_us"], r["lateness_us"]
        rows = "-" if r["page"] is None else f"{r['page']['rows']} ({r['web']['rows_shown']} shown, " \
            f"{r['web']['rows_lost']} lost, {r['web']['rows_dropped']} dropped)"
        print(f"| {r['round']} | {r['variant']} | {r['load_avg'][0]:.2f} | {t['p50']:.1f} | {t['p99']:.1f} | "
              f"{t['p999']:.1f} | {t['max']:.1f} | {lt['p99']:.1f} | {r['missed_ticks']} of {r['ticks']} | {rows} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
