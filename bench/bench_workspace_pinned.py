#!/usr/bin/env python3
"""The 1 kHz tick with its loop pinned to a CPU of its own, a workspace page open on the other CPUs, against none.

One ``gearbox-hil serve powershift --mode realtime --rate RATE --web 0`` server runs the whole bench with
``[realtime] cpu_affinity = [LOOP_CPU]`` (``--loop-cpu``, default the last CPU; the workspace process then keeps
off it, docs/server.md).  This script then moves itself to the other CPUs, so what it starts runs there: a busy
process that burns one of them the whole time (``--busy``, default 1: "a busy second core") and the pages, each a
headless Chromium (bench/bench_workspace_pages.py's ``open_page``) showing the ``20x3`` view (20 outputs in three
stacked plots) with the page's default settings.  Phases of ``--phase`` seconds with no page and with one page
alternate ``--rounds`` times; for each, from the server's status at its two ends: the ticks and missed ticks, the
TET and the wake-up lateness p50 / p99 / p99.9 from the difference of the cumulative histograms (upper bin edges:
never understated), the CPU of the page's Chromium and the load average.  The summary gives, per variant, the
spread (min..max over rounds) of missed ticks per 1000 and of TET p99, and says whether each page phase lies
within the no-page spread.

    python bench/bench_workspace_pinned.py --rounds 4 --phase 10
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this tree's server package, not an installed one
from _host import host_line, with_host  # noqa: E402  (bench/ is first on the path)
from _support import serve_workspace  # noqa: E402
from bench_workspace_pages import drawn, open_page, tree_cpu_s  # noqa: E402
from bench_xcp import diff, percentile  # noqa: E402


def burn(cpus: set[int]) -> None:
    """Keep one CPU busy (a process that computes and never sleeps)."""
    os.sched_setaffinity(0, cpus)
    x = 0
    while True:
        x = (x * 1103515245 + 12345) & 0x7FFFFFFF


def tree_cpus(pid: int) -> set[int]:
    """The CPUs a process and its descendants may run on (the pages' Chromium: kept off the loop's CPU)."""
    import psutil

    try:
        procs = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
        return {c for p in procs for c in p.cpu_affinity()}
    except psutil.Error:
        return set()


def hist(status: dict, name: str) -> dict[float, int]:
    h = status["timing_histograms"][name]
    return {up if up is not None else float("inf"): n for up, n in zip(h["upper_us"], h["count"])}


def phase(zc, drivers: list, seconds: float) -> dict:
    """What the loop did over ``seconds``, and the pages' Chromium CPU in per cent of one core."""
    st0, t0 = zc.status(), time.monotonic()
    br0 = sum(tree_cpu_s(p) for _, p in drivers)
    n0 = sum(drawn(d) for d, _ in drivers)
    time.sleep(seconds)
    dt = time.monotonic() - t0
    br1 = sum(tree_cpu_s(p) for _, p in drivers)
    n1 = sum(drawn(d) for d, _ in drivers)
    st1 = zc.status()
    out = {"seconds": dt, "ticks": st1["timing"]["ticks"] - st0["timing"]["ticks"],
           "missed_ticks": st1["timing"]["missed_ticks"] - st0["timing"]["missed_ticks"],
           "chromium_pct": 100 * (br1 - br0) / dt, "redraws_per_s": (n1 - n0) / max(1, len(drivers)) / dt,
           "load_avg": os.getloadavg()[0]}
    for name in ("tet_us", "lateness_us"):
        h = diff(hist(st0, name), hist(st1, name))
        out[name] = {q: percentile(h, v) for q, v in (("p50", 50), ("p99", 99), ("p999", 99.9))}
    out["missed_per_1000"] = 1000 * out["missed_ticks"] / max(1, out["ticks"] + out["missed_ticks"])
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--phase", type=float, default=10.0, help="seconds measured per phase")
    ap.add_argument("--settle", type=float, default=3.0, help="seconds before a phase is measured")
    ap.add_argument("--rate", type=float, default=1000.0)
    ap.add_argument("--loop-cpu", type=int, default=None, help="the loop's CPU (default: the last one)")
    ap.add_argument("--busy", type=int, default=1, help="processes burning the other CPUs the whole run")
    ap.add_argument("--fifo", type=int, default=0,
                    help="the loop's SCHED_FIFO priority (realtime.sched_fifo_priority; 0: normal scheduling)")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    cpus = sorted(os.sched_getaffinity(0))
    loop_cpu = cpus[-1] if args.loop_cpu is None else args.loop_cpu
    others = set(cpus) - {loop_cpu}
    if not others:
        ap.error("needs at least two CPUs: one for the loop, one for the rest")
    results, burners, drivers = [], [], []
    with tempfile.TemporaryDirectory(prefix="gearbox-hil-pinned-") as tmp:
        srv = serve_workspace(Path(tmp), "realtime", ("--rate", str(args.rate)),
                              extra=f"[realtime]\ncpu_affinity = [{loop_cpu}]\nsched_fifo_priority = {args.fifo}\n")
        try:
            os.sched_setaffinity(0, others)  # what this script starts from now on runs beside the loop's CPU
            ctx = multiprocessing.get_context("spawn")
            burners = [ctx.Process(target=burn, args=(others,), daemon=True) for _ in range(args.busy)]
            for b in burners:
                b.start()
            with srv.client() as zc:
                zc.start()
                rt = zc.status().get("realtime", {})
                print(f"loop on CPU {loop_cpu} (status: {json.dumps(rt)}); pages and {args.busy} busy process(es) on "
                      f"{sorted(others)}", file=sys.stderr, flush=True)
                for rnd in range(1, args.rounds + 1):
                    for pages in (0, 1):
                        while len(drivers) > pages:
                            drivers.pop()[0].quit()
                        while len(drivers) < pages:
                            drivers.append(open_page(srv.info["endpoints"]["web.url"], "20x3"))
                        time.sleep(args.settle)
                        r = dict(phase(zc, drivers, args.phase), round=rnd, pages=pages,
                                 chromium_cpus=sorted({c for _, p in drivers for c in tree_cpus(p)}))
                        print(f"round {rnd}, {pages} page(s): missed {r['missed_ticks']} of "
                              f"{r['ticks'] + r['missed_ticks']}, TET p99 {r['tet_us']['p99']:g} us, lateness p99 "
                              f"{r['lateness_us']['p99']:g} us, Chromium {r['chromium_pct']:.1f} %, "
                              f"load {r['load_avg']:.1f}", file=sys.stderr, flush=True)
                        results.append(r)
                for d, _ in drivers:
                    d.quit()
                drivers = []
                zc.shutdown()
        finally:
            for d, _ in drivers:
                d.quit()
            for b in burners:
                b.terminate()
            srv.shutdown()
    if args.json:
        args.json.write_text(json.dumps(with_host({"args": vars(args) | {"json": str(args.json)}, "loop_cpu": loop_cpu,
                                                   "phases": results}), indent=2))
    report(results, args, loop_cpu, sorted(others))
    return 0


def report(results: list[dict], args, loop_cpu: int, others: list[int]) -> None:
    print(f"\npowershift, realtime {args.rate:g} Hz, loop pinned to CPU {loop_cpu}; page (20x3, defaults) and "
          f"{args.busy} busy process(es) on CPU(s) {others}; {args.phase:g} s a phase\n")
    print("| round | page | load | ticks | missed | missed per 1000 | TET p50 / p99 / p99.9 us | "
          "lateness p50 / p99 / p99.9 us | Chromium % of a core | redraws/s |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in results:
        q = lambda h: f"{h['p50']:g} / {h['p99']:g} / {h['p999']:g}"  # noqa: E731
        print(f"| {r['round']} | {'open' if r['pages'] else 'none'} | {r['load_avg']:.1f} | {r['ticks']} | "
              f"{r['missed_ticks']} | {r['missed_per_1000']:.1f} | {q(r['tet_us'])} | {q(r['lateness_us'])} | "
              f"{r['chromium_pct']:.1f} | {r['redraws_per_s']:.1f} |" if r["pages"] else
              f"| {r['round']} | none | {r['load_avg']:.1f} | {r['ticks']} | {r['missed_ticks']} | "
              f"{r['missed_per_1000']:.1f} | {q(r['tet_us'])} | {q(r['lateness_us'])} | - | - |")
    none = [r for r in results if not r["pages"]]
    page = [r for r in results if r["pages"]]
    if not none or not page:
        return
    print()
    for label, get in (("missed ticks per 1000", lambda r: r["missed_per_1000"]),
                       ("TET p99 us", lambda r: r["tet_us"]["p99"]),
                       ("lateness p99 us", lambda r: r["lateness_us"]["p99"])):
        lo, hi = min(map(get, none)), max(map(get, none))
        inside = sum(lo <= get(r) <= hi for r in page)
        below = sum(get(r) < lo for r in page)
        print(f"{label}: no page {lo:g}..{hi:g}; page open {min(map(get, page)):g}..{max(map(get, page)):g} "
              f"({inside} of {len(page)} page phases within the no-page spread, {below} below it)")


if __name__ == "__main__":
    print(host_line(), flush=True)
    sys.exit(main())
