#!/usr/bin/env python3
"""Tick cost with the web workspace open, plotting 20 signals, against no page: A/B in one run.

Each run is ``gearbox-hil serve powershift --mode realtime --rate RATE
--duration D --web 0`` with ZeroMQ on free ports.  Variant ``none``: no page
connects (the workspace process finds no page and only moves its cursor);
variant ``page``: a page (aiohttp's WebSocket client, which receives the
same messages as the browser page) subscribes to 20 outputs and reads every
update until the run ends; variant ``page_nice``: the same page in a
process of its own at nice 10 (``--variants none,page,page_nice``).  The
variants alternate ``--rounds`` times so both
see the same machine load; the table lists TET, lateness and missed ticks
from each run's summary, the rows the page received, and the CPU time the
workspace process and the page client used while the page was open (per
cent of one core over the run's duration).

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
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this tree's server package, not an installed one
from _host import host_line, with_host  # noqa: E402  (bench/ is first on the path)
from _support import cpu_s, serve_workspace, web_process_pid  # noqa: E402

SIGNALS = ["w_1", "w_2", "w_3", "w_4", "w_out", "gear", "ratio", *(f"slip_c{k}" for k in range(1, 9)),
           *(f"pressure_c{k}" for k in range(1, 6))]  # 20 outputs


async def page(url: str, alive, web_pid: int) -> dict:
    """Subscribe to :data:`SIGNALS` and read every update until the server exits; what arrived.

    Also the CPU time of the workspace process while the page is open (its start-up, imports and all, comes
    before the loop's first tick and is left out) and of this client.
    """
    import aiohttp

    got = {"messages": 0, "rows": 0, "values": 0, "workspace_cpu_s": None}
    cpu0, web0 = time.process_time(), cpu_s(web_pid) or 0.0
    async with aiohttp.ClientSession() as http:
        async with http.ws_connect(url + "ws") as ws:
            await ws.send_str(json.dumps({"op": "subscribe", "signals": SIGNALS}))
            while alive():
                now = cpu_s(web_pid)
                got["workspace_cpu_s"] = now - web0 if now is not None else got["workspace_cpu_s"]
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
    got["client_cpu_s"] = time.process_time() - cpu0
    return got


def run(tmp: Path, variant: str, rate: float, duration: float) -> dict:
    srv = serve_workspace(tmp / variant, "realtime", ("--rate", str(rate), "--duration", str(duration)))
    proc = srv.proc
    url = srv.info["endpoints"]["web.url"]
    web_pid = web_process_pid(srv.info["pid"])
    if variant == "page":
        got = asyncio.run(page(url, lambda: proc.poll() is None, web_pid))
    elif variant == "page_nice":  # the page client in a process of its own at nice 10, below the server
        out = tmp / "client.json"
        subprocess.run(["nice", "-n", "10", sys.executable, __file__, "--client", url, str(proc.pid), str(web_pid),
                        str(out)], check=True)
        got = json.loads(out.read_text())
    else:
        got = None
    proc.wait(timeout=duration + 120)
    srv.kill()  # gone already: closes its log
    st = json.loads(srv.summary.read_text())
    t = st["timing"]
    return {"variant": variant, "tet_us": t["tet_us"], "lateness_us": t["lateness_us"], "ticks": t["ticks"],
            "missed_ticks": t["missed_ticks"], "rate_hz_actual": t["rate_hz_actual"], "page": got,
            "web": st["adapters"]["web"], "load_avg": os.getloadavg(), "duration": duration}


def client(url: str, server_pid: int, web_pid: int, out: Path) -> int:
    """The page of variant ``page_nice``, run as ``bench_workspace.py --client URL SERVER_PID WEB_PID OUT``."""
    def alive() -> bool:
        try:
            with open(f"/proc/{server_pid}/stat") as fh:
                return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
        except OSError:
            return False

    got = asyncio.run(page(url, alive, web_pid))
    out.write_text(json.dumps(got))
    return 0


def main() -> int:
    if sys.argv[1:2] == ["--client"]:
        return client(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), Path(sys.argv[5]))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--duration", type=float, default=15.0, help="seconds of each run")
    ap.add_argument("--rate", type=float, default=1000.0)
    ap.add_argument("--json", type=Path, default=None, help="write every run's numbers here")
    ap.add_argument("--variants", default="none,page", help="of none, page, page_nice (the page client at nice 10)")
    args = ap.parse_args()
    results = []
    with tempfile.TemporaryDirectory(prefix="gearbox-hil-ws-") as tmp:
        for rnd in range(args.rounds):
            for variant in args.variants.split(","):
                print(f"round {rnd + 1}: {variant} ...", file=sys.stderr, flush=True)
                results.append(dict(run(Path(tmp), variant, args.rate, args.duration), round=rnd + 1))
    if args.json:
        args.json.write_text(json.dumps(with_host(results), indent=2))
    print(f"powershift, realtime {args.rate:g} Hz, {args.duration:g} s a run; page: 20 signals over the WebSocket\n")
    print("| round | page | load | TET p50 us | p99 | p99.9 | max | lateness p99 us | missed ticks | rows to the page "
          "| CPU workspace / page client |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in results:
        t, lt = r["tet_us"], r["lateness_us"]
        rows = "-" if r["page"] is None else f"{r['page']['rows']} ({r['web']['rows_shown']} shown, " \
            f"{r['web']['rows_lost']} lost, {r['web']['rows_dropped']} dropped)"
        cpu = "-" if r["page"] is None else \
            f"{100 * (r['page']['workspace_cpu_s'] or 0) / r['duration']:.1f} % / " \
            f"{100 * r['page']['client_cpu_s'] / r['duration']:.1f} %"
        print(f"| {r['round']} | {r['variant']} | {r['load_avg'][0]:.2f} | {t['p50']:.1f} | {t['p99']:.1f} | "
              f"{t['p999']:.1f} | {t['max']:.1f} | {lt['p99']:.1f} | {r['missed_ticks']} of {r['ticks']} | {rows} "
              f"| {cpu} |")
    return 0


if __name__ == "__main__":
    print(host_line(), flush=True)
    sys.exit(main())
