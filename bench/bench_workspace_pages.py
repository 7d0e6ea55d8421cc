#!/usr/bin/env python3
"""What an open workspace page costs: CPU of the workspace process, the server process and headless Chromium per page.

One ``gearbox-hil serve powershift --mode realtime --rate RATE --web 0``
server runs the whole bench (the workspace at its default ``display_hz``,
100 rows a second).  Phases of ``--phase`` seconds with 0, 1, 2 ... real
pages open (``--pages 0,1,2``; each page is a headless Chromium of its own,
driven by chromedriver) alternate ``--rounds`` times, so every count sees
the same machine load.  Each page shows ``--view``: ``default`` (the page
as it opens: w_out, gear and two slips in one plot) or ``20x3`` (20 outputs
in three stacked plots, the issue's reference view), with the page's ``draws/s`` (``--draws``; its
default is 10) and its live plots' renderer (``--renderers canvas,plotly``: the page's own canvas, or
Plotly at every redraw as before it, ``?renderer=plotly``, or the canvas drawn whole at every redraw,
``canvas-full``, ``?scroll=0``; alternated in each round like the draws).
In each phase, after
``--settle`` seconds for the pages to connect and draw, the CPU time
(user + system, ``/proc/PID/stat``) of the workspace process, of the server
process (the loop and its adapters) and of all Chromium processes of the
pages is taken over the phase and given in per cent of one core; the cost
of a page is the difference to the phase with no page of the same round,
divided by the pages.  Missed ticks of each phase come from the server's
status (``timing.missed_ticks``).

    python bench/bench_workspace_pages.py --rounds 3 --phase 10 --pages 0,1,2 --view 20x3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this tree's server package, not an installed one
from _host import host_line, with_host  # noqa: E402  (bench/ is first on the path)
from _support import chromium, cpu_s, open_workspace, serve_workspace  # noqa: E402

VIEWS = {"default": None,  # the page's own choice when it opens
         "20x3": "w_1, w_2, w_3, w_4, w_out, gear, ratio; slip_c1, slip_c2, slip_c3, slip_c4, slip_c5, slip_c6, "
                 "slip_c7; slip_c8, pressure_c1, pressure_c2, pressure_c3, pressure_c4, pressure_c5"}


RENDERERS = {"canvas": "", "canvas-full": "?scroll=0", "plotly": "?renderer=plotly"}
"""The live plots' renderers and the page's URL for each: the canvas scrolling (only new pixel columns drawn), the
canvas drawn whole at every redraw (as before the scrolling), Plotly at every redraw (as before the canvas)."""


def tree_cpu_s(pid: int) -> float:
    """CPU time of a process and all its descendants now alive (Chromium's browser, renderer, GPU processes)."""
    import psutil

    try:
        procs = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    except psutil.Error:
        return 0.0
    return sum(cpu_s(p.pid) or 0.0 for p in procs)


def set_draws(drv, draws: float | None) -> None:
    """The page's redraws a second at most (0: every animation frame; None: the page's own default)."""
    if draws is not None:
        drv.execute_script("document.getElementById('draws').value = arguments[0];", draws)


def open_page(url: str, view: str, renderer: str = "canvas"):
    """A headless Chromium showing the workspace at ``url`` with ``view``; (driver, chromedriver pid)."""
    drv, pid = chromium(1600, 1000)
    open_workspace(drv, url + RENDERERS[renderer])
    if VIEWS[view]:
        drv.execute_script("document.getElementById('pattern').value = arguments[0]; pick();", VIEWS[view])
    return drv, pid


def drawn(drv) -> int:
    """The page's redraws of its plots so far."""
    return int(drv.execute_script("return workspace.drawn || 0"))


def phase(zc, pids: dict, drivers: list, seconds: float) -> dict:
    """CPU per cent of one core of the workspace, the server and the pages' Chromium over ``seconds``."""
    st0 = zc.status()["timing"]
    t0 = time.monotonic()
    ws0, srv0 = cpu_s(pids["web"]) or 0.0, cpu_s(pids["server"]) or 0.0
    br0 = sum(tree_cpu_s(p) for _, p in drivers)
    drawn0 = sum(drawn(drv) for drv, _ in drivers)
    time.sleep(seconds)
    dt = time.monotonic() - t0
    ws1, srv1 = cpu_s(pids["web"]) or 0.0, cpu_s(pids["server"]) or 0.0
    br1 = sum(tree_cpu_s(p) for _, p in drivers)
    draws_per_s = (sum(drawn(drv) for drv, _ in drivers) - drawn0) / max(1, len(drivers)) / dt
    st1 = zc.status()["timing"]
    return {"workspace_pct": 100 * (ws1 - ws0) / dt, "server_pct": 100 * (srv1 - srv0) / dt,
            "chromium_pct": 100 * (br1 - br0) / dt, "seconds": dt, "redraws_per_s": draws_per_s,
            "missed_ticks": st1["missed_ticks"] - st0["missed_ticks"], "ticks": st1["ticks"] - st0["ticks"],
            "load_avg": os.getloadavg()[0]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--phase", type=float, default=10.0, help="seconds measured per phase")
    ap.add_argument("--settle", type=float, default=3.0, help="seconds before a phase is measured")
    ap.add_argument("--pages", default="0,1,2", help="page counts, alternated in each round")
    ap.add_argument("--view", choices=sorted(VIEWS), default="20x3")
    ap.add_argument("--draws", default="",
                    help="the pages' draws/s, comma-separated variants alternated in each round (default: the "
                         "page's own, 10; 0: every animation frame)")
    ap.add_argument("--renderers", default="canvas",
                    help="the live plots' renderers, comma-separated variants alternated in each round: canvas (the "
                         "page's own), canvas-full (?scroll=0: the whole canvas drawn at every redraw) and plotly "
                         "(?renderer=plotly: Plotly at every redraw, as before the canvas)")
    ap.add_argument("--rate", type=float, default=1000.0)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    from io_adapters.zmq.client import HilClient

    counts = [int(c) for c in args.pages.split(",")]
    draws = [float(d) for d in args.draws.split(",")] if args.draws else [None]
    renderers = args.renderers.split(",")
    results = []
    with tempfile.TemporaryDirectory(prefix="gearbox-hil-pages-") as tmp:
        srv = serve_workspace(Path(tmp), "realtime", ("--rate", str(args.rate)))
        info = srv.info
        zc = HilClient(info["endpoints"]["zmq.control"], timeout_s=30).connect()
        drivers: list = []
        shown = None  # the renderer of the open pages
        try:
            zc.start()
            pids = {"server": info["pid"], "web": zc.status()["adapters"]["web"]["pid"]}
            for rnd in range(1, args.rounds + 1):
                for n, d, rr in [(n, d, rr) for n in counts for rr in (renderers if n else [None])
                                 for d in (draws if n else [None])]:
                    while drivers and (len(drivers) > n or (rr is not None and rr != shown)):
                        drivers.pop()[0].quit()
                    while len(drivers) < n:
                        drivers.append(open_page(info["endpoints"]["web.url"], args.view, rr))
                    shown = rr if n else shown
                    for drv, _ in drivers:
                        set_draws(drv, d)
                    time.sleep(args.settle)
                    r = dict(phase(zc, pids, drivers, args.phase), round=rnd, pages=n, draws=d, renderer=rr)
                    print(f"round {rnd}, {n} page(s), {rr}, draws/s {d} ({r['redraws_per_s']:.1f} done): "
                          f"workspace {r['workspace_pct']:.1f} %, "
                          f"server {r['server_pct']:.1f} %, Chromium {r['chromium_pct']:.1f} %, "
                          f"load {r['load_avg']:.1f}", file=sys.stderr, flush=True)
                    results.append(r)
        finally:
            for drv, _ in drivers:
                drv.quit()
            try:
                zc.shutdown()
            finally:
                zc.close()
                srv.shutdown()
    if args.json:
        args.json.write_text(json.dumps(with_host({"args": vars(args) | {"json": str(args.json)},
                                                   "phases": results}), indent=2))
    report(results, counts, args)
    return 0


def report(results: list[dict], counts: list[int], args) -> None:
    print(f"\npowershift, realtime {args.rate:g} Hz, workspace at its default 100 rows/s; view {args.view}; "
          f"{args.phase:g} s a phase\n")
    print("| round | pages | renderer | draws/s | redraws/s done | load | workspace % of a core | server % | Chromium % "
          "| missed ticks |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in results:
        d = "-" if not r["pages"] else "10 (default)" if r["draws"] is None else f"{r['draws']:g}"
        print(f"| {r['round']} | {r['pages']} | {r.get('renderer') or '-'} | {d} | {r.get('redraws_per_s', 0):.1f} | "
              f"{r['load_avg']:.1f} | "
              f"{r['workspace_pct']:.1f} | {r['server_pct']:.1f} | {r['chromium_pct']:.1f} | "
              f"{r['missed_ticks']} of {r['ticks']} |")
    print("\nper page, against the same round's phase with no page (median over rounds, [min, max]):\n")
    print("| pages | renderer | draws/s | workspace % of a core per page | server % per page | Chromium % per page |")
    print("| --- | --- | --- | --- | --- | --- |")
    base = {r["round"]: r for r in results if r["pages"] == 0}
    cell = lambda v: f"{statistics.median(v):.1f} [{min(v):.1f}, {max(v):.1f}]"  # noqa: E731
    keys = sorted({(r["pages"], r["draws"], r.get("renderer")) for r in results if r["pages"]},
                  key=lambda x: (x[0], x[2] or "", -(x[1] or 10)))
    for n, d, rr in keys:
        mine = [r for r in results if r["pages"] == n and r["draws"] == d and r.get("renderer") == rr]
        per = {k: [(r[k] - (base[r["round"]][k] if r["round"] in base else 0.0)) / n for r in mine]
               for k in ("workspace_pct", "server_pct")}
        per["chromium_pct"] = [r["chromium_pct"] / n for r in mine]
        label = "10 (default)" if d is None else f"{d:g}"
        print(f"| {n} | {rr} | {label} | {cell(per['workspace_pct'])} | {cell(per['server_pct'])} | "
              f"{cell(per['chromium_pct'])} |")
    for other in ("canvas-full", "plotly"):  # same round, same pages and draws: canvas over the other renderer
        ratios = [a["chromium_pct"] / b["chromium_pct"] for a in results for b in results
                  if (a["round"], a["pages"], a["draws"]) == (b["round"], b["pages"], b["draws"]) and a["pages"]
                  and a.get("renderer") == "canvas" and b.get("renderer") == other and b["chromium_pct"] > 0]
        if ratios:
            print(f"\nChromium's CPU time, canvas / {other} in the same round: median {statistics.median(ratios):.2f} "
                  f"[{min(ratios):.2f}, {max(ratios):.2f}] over {len(ratios)} pairs")


if __name__ == "__main__":
    print(host_line(), flush=True)
    sys.exit(main())
