#!/usr/bin/env python3
"""Where an open workspace page's CPU goes: one headless Chromium page, profiled through the DevTools protocol.

Starts ``gearbox-hil serve powershift --mode realtime --web 0``, opens the
page in a headless Chromium (``bench/_support.py``), shows the ``20x3``
view of ``bench/bench_workspace_pages.py`` (20 outputs in three plots) and,
after ``--settle`` seconds, measures ``--seconds`` seconds: the CPU time of
Chromium's processes by type (``/proc``), the page's main-thread totals
(``Performance.getMetrics``: task, script, layout and style time), the
time spent in the page's own functions (each wrapped with a
``performance.now()`` counter: ``drawPlot``, ``clutchPlot``,
``histograms``, ``onRows``, ...) and the functions the sampling profiler
(``Profiler``) saw most, and the CPU of each thread of Chromium's processes
(``/proc/PID/task``: the renderer's main thread, its compositor, the display compositor, the raster workers).  ``--renderer plotly`` opens the page with
``?renderer=plotly``; ``--js CODE`` runs CODE in the page first (an
experiment: ``"window.clutchPlot = function () {}"``).

``--trace`` instead records a Chromium trace (``--trace-startup``: the
timeline, cc, viz, blink and v8 categories, as DevTools' Performance panel
records them) and prints, for each busy thread of the last ``--seconds``,
its top events' self time and the inclusive time of the events that say
where a frame's time goes (``FunctionCall``, ``Layout``, ``Paint``,
``Commit``, ``Canvas2DResourceProvider::ProduceCanvasResource``,
``Display::DrawAndSwap``, ``RasterTask`` ...), in per cent of the wall
time.  Tracing itself costs Chromium time: read the split, not the sum.

    python bench/profile_workspace_page.py --seconds 8 [--renderer plotly] [--js CODE] [--trace]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this tree's server package, not an installed one
from _host import host_line  # noqa: E402  (bench/ is first on the path)
from _support import chromium, cpu_s, open_workspace, serve_workspace  # noqa: E402
from bench_workspace_pages import VIEWS  # noqa: E402

WRAP = """
window.__spent = {};
const wrap = (obj, name, label) => { const f = obj[name]; if (typeof f !== "function") return;
  obj[name] = function () { const t0 = performance.now();
    try { return f.apply(this, arguments); }
    finally { const a = window.__spent[label] || (window.__spent[label] = [0, 0]); a[0] += performance.now() - t0; a[1]++; } }; };
for (const n of ["drawPlot", "clutchPlot", "histograms", "glance", "texts", "onRows", "onStatus", "redraw"]) wrap(window, n, n);
wrap(W.tools, "frame", "tools.frame");
"""
METRICS = ("TaskDuration", "ScriptDuration", "LayoutDuration", "RecalcStyleDuration", "LayoutCount")


def by_type(pid: int) -> collections.Counter:
    """CPU seconds of chromedriver's descendants by Chromium process type (browser, renderer, gpu-process, ...)."""
    import psutil

    out: collections.Counter = collections.Counter()
    for p in psutil.Process(pid).children(recursive=True):
        try:
            line = " ".join(p.cmdline())
        except psutil.Error:
            continue
        out["browser" if "--type=" not in line else line.split("--type=")[1].split()[0]] += cpu_s(p.pid) or 0.0
    return out


def by_thread(pid: int) -> collections.Counter:
    """CPU seconds of chromedriver's descendants by process type and thread name (``renderer:chromium`` is the
    renderer's main thread, ``renderer:Compositor`` its compositor, ``gpu-process:VizCompositorTh`` the display
    compositor, ``*:ThreadPoolForeg`` raster and other workers)."""
    import psutil

    out: collections.Counter = collections.Counter()
    tick = os.sysconf("SC_CLK_TCK")
    for p in psutil.Process(pid).children(recursive=True):
        try:
            line = " ".join(p.cmdline())
        except psutil.Error:
            continue
        kind = "browser" if "--type=" not in line else line.split("--type=")[1].split()[0]
        for task in Path(f"/proc/{p.pid}/task").glob("*"):
            try:
                name = (task / "comm").read_text().strip()
                fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            out[f"{kind}:{name}"] += (int(fields[11]) + int(fields[12])) / tick
    return out


TRACE_CATEGORIES = "devtools.timeline,disabled-by-default-devtools.timeline,v8,blink,cc,viz,gpu,toplevel,benchmark"
FRAME_EVENTS = ("FunctionCall", "V8.GC", "MinorGC", "MajorGC", "Layout", "UpdateLayoutTree", "Paint", "Commit",
                "CanvasRenderingContext2D::FinalizeFrame", "Canvas2DResourceProvider::ProduceCanvasResource",
                "Canvas2DResourceProvider::Snapshot", "LayerTreeHost::DoUpdateLayers", "ProxyMain::BeginMainFrame",
                "FireAnimationFrame", "TimerFire", "EventDispatch", "Display::DrawAndSwap", "RasterTask",
                "ProxyImpl::ScheduledActionDraw")


def trace_split(path: Path, seconds: float) -> None:
    """Per thread of a Chromium JSON trace, over its last ``seconds``: the busiest events by self time and the
    inclusive time of FRAME_EVENTS, in per cent of the wall time (complete events, 'X', nested by time)."""
    data = json.loads(path.read_text())
    events = data["traceEvents"] if isinstance(data, dict) else data
    names = {(e["pid"], e.get("tid") if e["name"] == "thread_name" else None): e["args"]["name"]
             for e in events if e.get("ph") == "M" and e.get("name") in ("thread_name", "process_name")}
    t1 = max(e["ts"] for e in events if e.get("ph") == "X")
    span = seconds * 1e6
    per_thread: dict = collections.defaultdict(list)
    for e in events:
        if e.get("ph") == "X" and "dur" in e and e["ts"] >= t1 - span:
            per_thread[(e["pid"], e["tid"])].append(e)
    for key, evs in per_thread.items():
        evs.sort(key=lambda e: (e["ts"], -e["dur"]))
        own, incl, calls, stack, busy = collections.Counter(), collections.Counter(), collections.Counter(), [], 0
        for e in evs:
            while stack and e["ts"] >= stack[-1]["ts"] + stack[-1]["dur"]:
                stack.pop()
            if stack:
                own[stack[-1]["name"]] -= e["dur"]
            else:
                busy += e["dur"]
            own[e["name"]] += e["dur"]
            if not any(s["name"] == e["name"] for s in stack):  # a recursion counted once
                incl[e["name"]] += e["dur"]
                calls[e["name"]] += 1
            stack.append(e)
        if busy < 0.005 * span:
            continue
        pct = lambda us: 100 * us / span  # noqa: E731
        print(f"\n{names.get((key[0], None), '?')} / {names.get(key, '?')}: busy {pct(busy):.1f} % of the wall time")
        print("  self: " + ", ".join(f"{k} {pct(v):.2f}" for k, v in own.most_common(10)))
        print("  inclusive (calls): " + ", ".join(f"{k} {pct(incl[k]):.2f} ({calls[k]})" for k in FRAME_EVENTS
                                                  if incl[k]))


def traced(args) -> int:
    """The page at its defaults under ``--trace-startup``; the trace's split over its last ``args.seconds``."""
    with tempfile.TemporaryDirectory(prefix="gearbox-hil-trace-") as tmp:
        out = Path(tmp) / "trace.json"
        srv = serve_workspace(Path(tmp), "realtime", ("--rate", "1000"))
        drv = None
        try:
            with srv.client() as zc:
                zc.start()
            # the trace runs from the browser's start: the page's start-up, the settle time and the measured seconds
            lasts = args.settle + args.seconds + 15
            drv, _ = chromium(1600, 1000, (f"--trace-startup={TRACE_CATEGORIES}", f"--trace-startup-file={out}",
                                           f"--trace-startup-duration={lasts:g}", "--trace-startup-format=json"))
            t0 = time.monotonic()
            open_workspace(drv, srv.info["endpoints"]["web.url"] + ("?renderer=plotly" if args.renderer == "plotly"
                                                                    else ""))
            drv.execute_script("document.getElementById('pattern').value = arguments[0]; pick();", VIEWS["20x3"])
            if args.js:
                drv.execute_script(args.js)
            while time.monotonic() - t0 < lasts + 60 and not (out.exists() and out.stat().st_size):
                time.sleep(1)
            time.sleep(5)  # the file is written at the trace's end
        finally:
            if drv is not None:
                drv.quit()
            srv.shutdown()
        print(f"\nrenderer {args.renderer}, trace of the last {args.seconds:g} s")
        trace_split(out, args.seconds)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--settle", type=float, default=3.0)
    ap.add_argument("--renderer", choices=("canvas", "plotly"), default="canvas")
    ap.add_argument("--js", default="", help="JavaScript run in the page before the measurement")
    ap.add_argument("--trace", action="store_true", help="a Chromium trace's split per thread instead")
    args = ap.parse_args()
    if args.trace:
        return traced(args)
    with tempfile.TemporaryDirectory(prefix="gearbox-hil-profile-") as tmp:
        srv = serve_workspace(Path(tmp), "realtime", ("--rate", "1000"))
        drv = None
        try:
            with srv.client() as zc:
                zc.start()
            drv, pid = chromium(1600, 1000)
            open_workspace(drv, srv.info["endpoints"]["web.url"] + ("?renderer=plotly" if args.renderer == "plotly"
                                                                    else ""))
            drv.execute_script("document.getElementById('pattern').value = arguments[0]; pick();", VIEWS["20x3"])
            time.sleep(args.settle)
            drv.execute_script(WRAP)
            if args.js:
                drv.execute_script(args.js)
            drv.execute_cdp_cmd("Performance.enable", {})
            m0 = {m["name"]: m["value"] for m in drv.execute_cdp_cmd("Performance.getMetrics", {})["metrics"]}
            drv.execute_cdp_cmd("Profiler.enable", {})
            drv.execute_cdp_cmd("Profiler.setSamplingInterval", {"interval": 500})
            drv.execute_cdp_cmd("Profiler.start", {})
            th0 = by_thread(pid)
            c0, t0, drawn0 = by_type(pid), time.monotonic(), drv.execute_script("return workspace.drawn || 0")
            time.sleep(args.seconds)
            c1, dt, drawn1 = by_type(pid), time.monotonic() - t0, drv.execute_script("return workspace.drawn || 0")
            th1 = by_thread(pid)
            prof = drv.execute_cdp_cmd("Profiler.stop", {})["profile"]
            m1 = {m["name"]: m["value"] for m in drv.execute_cdp_cmd("Performance.getMetrics", {})["metrics"]}
            spent = drv.execute_script("return window.__spent")
        finally:
            if drv is not None:
                drv.quit()
            srv.shutdown()
    report(args, dt, c0, c1, m0, m1, spent, prof, (drawn1 - drawn0) / dt)
    threads = {k: 100 * (th1[k] - th0.get(k, 0.0)) / dt for k in th1}
    print("threads (% of a core): " + ", ".join(f"{k} {v:.1f}" for k, v in sorted(threads.items(), key=lambda x: -x[1])
                                                if v >= 0.2))
    return 0


def report(args, dt, c0, c1, m0, m1, spent, prof, redraws_per_s) -> None:
    cpu = {k: 100 * (c1[k] - c0[k]) / dt for k in c1}
    print(f"\nrenderer {args.renderer}, {dt:.1f} s, {redraws_per_s:.1f} redraws/s; Chromium {sum(cpu.values()):.1f} % "
          "of a core: " + ", ".join(f"{k} {v:.1f} %" for k, v in sorted(cpu.items(), key=lambda x: -x[1]) if v))
    print("main thread: " + ", ".join(f"{k} {m1[k] - m0.get(k, 0):.3g}" + (" s" if "Duration" in k else "")
                                      for k in METRICS))
    print("the page's functions (ms in total, calls, ms a call): " + json.dumps(
        {k: [round(v[0]), v[1], round(v[0] / max(1, v[1]), 2)] for k, v in sorted(spent.items(), key=lambda x: -x[1][0])}))
    nodes = {n["id"]: n["callFrame"] for n in prof["nodes"]}
    seen = collections.Counter(prof["samples"])
    where: collections.Counter = collections.Counter()
    for nid, c in seen.items():
        f = nodes[nid]
        where[f"{f['functionName'] or '(anonymous)'} {f['url'].rsplit('/', 1)[-1].split('?')[0]}"] += c
    total = sum(seen.values())
    print("sampled (self time): " + ", ".join(f"{k.strip()} {100 * c / total:.1f} %" for k, c in where.most_common(12)))


if __name__ == "__main__":
    print(host_line(), flush=True)
    sys.exit(main())
