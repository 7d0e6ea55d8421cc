#!/usr/bin/env python3
"""Soak: a realtime server under a bench's load for a long time, sampled for leaks and drift.

Starts ``gearbox-hil serve`` (the Powershift plant, 1 kHz by default, ZeroMQ
on free loopback ports, CAN on a virtual bus unless ``--no-can``) and the
bench client (``bench/load_client.py``: a subscriber that checks every
sequence number, commands at ``--command-hz``, a status request every
second).  Every ``--interval`` seconds it samples, from outside the server
(``/proc``) and through its own control connection:

* RSS (kB), open file descriptors, threads;
* the loop's ticks and missed ticks (``status()["timing"]``), from which the
  rate and the missed ticks of each interval follow.

At the end it prints a JSON summary and per-window rows (``--window`` s):
RSS growth after the warm-up (``--warmup`` s), whether fds and threads
stayed constant, missed ticks per window and the actual rate, the client's
sequence gaps and the server's timing summary.  ``--json`` keeps every sample.

    python bench/soak.py --duration 3600 --json bench/results/soak_1h.json --markdown bench/results/soak_1h.md
    python bench/soak.py --duration 120            # a short look

The numbers depend on the machine and its load (the load average is
recorded before, during and after).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _support import FREE_PORTS, ROOT, LocalServer, write_io

from io_adapters.zmq.client import HilClient
from _host import host_line, with_host  # noqa: E402  (bench/ is first on the path)

CAN = """
[[adapters]]
type = "can"
name = "can"
enabled = {can}
interface = "virtual"
channel = "soak-{pid}"
"""


def proc_status(pid: int, key: str) -> int:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def windows(samples: list[dict], width_s: float, warmup_s: float) -> list[dict]:
    """Per-window rows: RSS at its end, missed ticks and rate inside it."""
    out = []
    start = next((s for s in samples if s["t"] >= warmup_s), None)
    if start is None:
        return out
    edge = start["t"] + width_s
    prev = start
    for s in samples:
        if s["t"] < edge:
            continue
        ticks = s["ticks"] - prev["ticks"]
        dt = s["t"] - prev["t"]
        out.append({"from_s": round(prev["t"]), "to_s": round(s["t"]), "rss_kb": s["rss_kb"], "fds": s["fds"],
                    "threads": s["threads"], "ticks": ticks, "missed": s["missed"] - prev["missed"],
                    "rate_hz": round(ticks / dt, 2) if dt > 0 else None, "load1": s["load1"]})
        prev = s
        edge = s["t"] + width_s
    return out


def markdown(res: dict) -> str:
    """The result as a Markdown table for BENCHMARKS.md: the command, the acceptance checks, one row per window."""
    r = res.get("result")
    if not r:
        return "(no samples after the warm-up)\n"
    lb, la = res.get("load_avg_before") or [None], res.get("load_avg_after") or [None]
    fmt = (lambda v: f"{v:.2f}" if isinstance(v, (int, float)) else "-")
    mpm = r["missed_per_min_by_window"]
    later = mpm[1:] if len(mpm) > 1 else mpm
    lines = [
        f"`{res['command']}`; load average {fmt(lb[0])} before, median {fmt(r['load1_median'])} during, "
        f"{fmt(la[0])} after.", "",
        "| check | target | measured |", "| --- | --- | --- |",
        f"| RSS growth after the warm-up ({res['args']['warmup']:g} s) | <= 1024 kB | "
        f"{r['rss_growth_after_warmup_kb']} kB (max {r['rss_max_growth_after_warmup_kb']} kB; "
        f"{r['rss_kb_at_warmup']} -> {r['rss_kb_last']} kB) |",
        f"| open file descriptors | constant | {', '.join(map(str, r['fds']))} |",
        f"| threads | constant | {', '.join(map(str, r['threads']))} |",
        f"| missed ticks per minute, by window | no growth | {', '.join(f'{m:g}' for m in mpm)} "
        f"(median {r['missed_per_min_median']}; first window {mpm[0] if mpm else '-'}, max of the later "
        f"{max(later) if later else '-'}) |",
        f"| ticks after the warm-up | - | {r['ticks_after_warmup']} ({r['missed_ticks_after_warmup']} missed) |",
    ]
    cl = res.get("client") or {}
    if cl:
        lines.append(f"| client | - | {json.dumps(cl)[:300]} |")
    lines += ["", "| from s | to s | ticks | missed | rate Hz | RSS kB | fds | threads | load |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for w in res.get("windows", []):
        lines.append(f"| {w['from_s']:g} | {w['to_s']:g} | {w['ticks']} | {w['missed']} | {w['rate_hz']} | "
                     f"{w['rss_kb']} | {w['fds']} | {w['threads']} | {fmt(w['load1'])} |")
    return "\n".join(lines) + "\n"


def sample_server(control: str, srv, args, res: dict, samples: list[dict]) -> None:
    """Sample the server every ``args.interval`` s for ``args.duration`` s (its RSS, descriptors, threads, ticks
    and missed ticks, the load) into ``samples``; a probe that fails or a server that exits is kept in ``res``."""
    with HilClient(control, timeout_s=10.0) as probe:
        t0 = time.monotonic()
        next_t = t0
        while True:
            t = time.monotonic() - t0
            if srv.poll() is not None:
                res["server_exit"] = srv.returncode
                break
            try:
                timing = probe.status()["timing"]
                ticks, missed = timing["ticks"], timing["missed_ticks"]
            except Exception as exc:  # a late reply is a finding, not the end of the soak
                res.setdefault("probe_failures", []).append([round(t, 1), repr(exc)[:200]])
                ticks = samples[-1]["ticks"] if samples else 0
                missed = samples[-1]["missed"] if samples else 0
            samples.append({"t": round(t, 2), "rss_kb": proc_status(srv.pid, "VmRSS"),
                            "fds": open_fds(srv.pid), "threads": proc_status(srv.pid, "Threads"),
                            "ticks": ticks, "missed": missed, "load1": round(os.getloadavg()[0], 2)})
            if t >= args.duration:
                break
            if len(samples) % max(1, int(60 / args.interval)) == 0:
                s = samples[-1]
                print(f"t={t:6.0f} s  RSS {s['rss_kb']} kB  fds {s['fds']}  threads {s['threads']}  "
                      f"ticks {s['ticks']}  missed {s['missed']}  load {s['load1']}", flush=True)
            next_t += args.interval
            time.sleep(max(0.0, next_t - time.monotonic()))


def summarize(server, samples: list[dict], args, res: dict) -> None:
    """The server's own timing, the load and the soak's result (after the warm-up, and per window) into ``res``."""
    summary = server.summary
    if summary.exists():
        res["server_timing"] = json.loads(summary.read_text()).get("timing")
    res["load_avg_after"] = os.getloadavg()
    after = [s for s in samples if s["t"] >= args.warmup]
    if after:
        rows = windows(samples, args.window, args.warmup)
        missed_per_min = [60.0 * w["missed"] / (w["to_s"] - w["from_s"]) for w in rows if w["to_s"] > w["from_s"]]
        res["result"] = {
            "duration_s": samples[-1]["t"],
            "rss_kb_at_warmup": after[0]["rss_kb"], "rss_kb_last": after[-1]["rss_kb"],
            "rss_kb_max": max(s["rss_kb"] for s in samples),
            "rss_growth_after_warmup_kb": after[-1]["rss_kb"] - after[0]["rss_kb"],
            "rss_max_growth_after_warmup_kb": max(s["rss_kb"] for s in after) - after[0]["rss_kb"],
            "fds": sorted({s["fds"] for s in after}), "threads": sorted({s["threads"] for s in after}),
            "missed_ticks_after_warmup": after[-1]["missed"] - after[0]["missed"],
            "ticks_after_warmup": after[-1]["ticks"] - after[0]["ticks"],
            "missed_per_min_by_window": [round(m, 2) for m in missed_per_min],
            "missed_per_min_median": round(statistics.median(missed_per_min), 2) if missed_per_min else None,
            "load1_median": statistics.median(s["load1"] for s in after),
        }
        res["windows"] = rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration", type=float, default=3600.0, help="seconds of the soak (default 1 h)")
    ap.add_argument("--rate", type=float, default=1000.0, help="loop rate, Hz")
    ap.add_argument("--interval", type=float, default=5.0, help="seconds between samples")
    ap.add_argument("--window", type=float, default=300.0, help="seconds per summary row")
    ap.add_argument("--warmup", type=float, default=60.0, help="seconds before RSS growth is counted")
    ap.add_argument("--command-hz", type=float, default=100.0)
    ap.add_argument("--no-can", action="store_true", help="ZeroMQ only")
    ap.add_argument("--json", type=Path, help="write the summary and every sample here")
    ap.add_argument("--markdown", type=Path, help="write the result table here (it is printed too)")
    ap.add_argument("--table-from", type=Path, help="only print the table of an earlier run's --json file")
    args = ap.parse_args()
    if args.table_from:
        print(markdown(json.loads(args.table_from.read_text())), end="")
        return 0

    tmp = Path(tempfile.mkdtemp(prefix="gearbox-hil-soak-"))
    io = write_io(tmp / "io.toml", f"rate_hz = {args.rate}",
                  adapters=FREE_PORTS + CAN.format(can="false" if args.no_can else "true", pid=os.getpid()))
    server = LocalServer(tmp, "powershift", io)
    srv = server.proc
    client = None
    samples: list[dict] = []
    res: dict = {"command": " ".join(["python", "bench/soak.py"] + sys.argv[1:]),
                 "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
                 "load_avg_before": os.getloadavg()}
    try:
        control = server.control
        client = subprocess.Popen([sys.executable, str(ROOT / "bench" / "load_client.py"), "--control", control,
                                   "--subscribe", "--command-hz", str(args.command_hz), "--status-hz", "1"],
                                  cwd=ROOT, stdout=subprocess.PIPE, text=True)
        sample_server(control, srv, args, res, samples)
    finally:
        if client is not None:
            if client.poll() is None:
                client.send_signal(signal.SIGTERM)
            out, _ = client.communicate(timeout=60)
            try:
                res["client"] = json.loads(out.strip().splitlines()[-1])
            except (ValueError, IndexError):
                res["client"] = None
        if srv.poll() is None:
            srv.send_signal(signal.SIGTERM)
            srv.wait(timeout=60)
        server.kill()
    summarize(server, samples, args, res)
    print(json.dumps({k: v for k, v in res.items() if k != "windows"}, indent=2))
    for w in res.get("windows", []):
        print(json.dumps(w))
    table = markdown(res)
    print()
    print(table, end="")
    if args.markdown:
        args.markdown.parent.mkdir(parents=True, exist_ok=True)
        args.markdown.write_text(table)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(with_host(dict(res, samples=samples)), indent=1))
    return 0 if "server_exit" not in res else 1


if __name__ == "__main__":
    print(host_line(), flush=True)
    sys.exit(main())
