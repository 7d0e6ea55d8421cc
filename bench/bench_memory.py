#!/usr/bin/env python3
"""Memory of a running server over time: RSS, and which mappings grew when it stepped.

Starts ``gearbox-hil serve`` (default: the Powershift plant on the built-in
I/O config with free ports) and the bench client (``bench/load_client.py``:
subscriber, commands, status requests), then every ``--interval`` seconds
reads the server's RSS and its mappings (``/proc/PID/smaps``).  Whenever RSS
rises by more than ``--step-kb`` between two samples, the mappings that grew
(or appeared) are listed, so a step can be traced to the heap, a new
anonymous mapping, a thread's malloc arena, a shared library, ...

``--stall-at S --stall-s N`` stops the client process (SIGSTOP) at S seconds
for N seconds, as a machine stall or a busy client would: its subscription
stops reading while the server keeps publishing.

    python bench/bench_memory.py --duration 600 --json out/memory.json
    python bench/bench_memory.py --duration 120 --stall-at 30 --stall-s 5
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _support import FREE_PORTS, ROOT, LocalServer, write_io
from _host import host_line, with_host  # noqa: E402  (bench/ is first on the path)

CAN = """
[[adapters]]
type = "can"
name = "can"
enabled = {can}
interface = "virtual"
channel = "bench-memory-{pid}"
"""


def rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def mappings(pid: int) -> dict[str, int]:
    """Rss (kB) per mapping, keyed by address range and name."""
    out: dict[str, int] = {}
    key = None
    head = re.compile(r"^([0-9a-f]+-[0-9a-f]+) \S+ \S+ \S+ \S+\s*(.*)$")
    with open(f"/proc/{pid}/smaps") as fh:
        for line in fh:
            m = head.match(line)
            if m:
                name = m.group(2) or "[anon]"
                # the heap and the stack keep their name when they grow; other mappings by address
                key = name if name in ("[heap]", "[stack]") else f"{m.group(1)} {name}"
                out[key] = 0
            elif line.startswith("Rss:") and key is not None:
                out[key] = int(line.split()[1])
    return out


def threads(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/task"))


def sample_memory(srv, client, args, res: dict) -> None:
    """Sample the server's RSS every ``args.interval`` s until the duration ends (stalling the client once if
    asked); each step over ``args.step_kb`` is kept in ``res["steps"]`` with the mappings that grew."""
    t0 = time.monotonic()
    prev_maps = mappings(srv.pid)
    prev = rss_kb(srv.pid)
    stalled = False
    stall_done = args.stall_at <= 0
    print(f"t=0 RSS {prev} kB, {threads(srv.pid)} threads", flush=True)
    while True:
        time.sleep(args.interval)
        t = time.monotonic() - t0
        if t >= args.duration or srv.poll() is not None:
            break
        if not stall_done and not stalled and t >= args.stall_at:
            client.send_signal(signal.SIGSTOP)
            stalled = True
        if stalled and t >= args.stall_at + args.stall_s:
            client.send_signal(signal.SIGCONT)
            stalled, stall_done = False, True
        rss = rss_kb(srv.pid)
        res["samples"].append([round(t, 1), rss])
        if rss - prev > args.step_kb:
            maps = mappings(srv.pid)
            grew = {k: v - prev_maps.get(k, 0) for k, v in maps.items() if v - prev_maps.get(k, 0) > 16}
            step = {"t": round(t, 1), "from_kb": prev, "to_kb": rss, "grew_kb": grew}
            res["steps"].append(step)
            print(f"t={t:.0f} RSS {prev} -> {rss} kB: {grew}", flush=True)
        prev = rss
        prev_maps = mappings(srv.pid)


def summarize(server, res: dict) -> None:
    """The server's own timing and ZeroMQ counters, the load, and the RSS figures, into ``res``."""
    summary = server.summary
    if summary.exists():
        st = json.loads(summary.read_text())
        res["server_timing"] = st.get("timing")
        res["server_zmq"] = st.get("adapters", {}).get("zmq")
    res["load_avg_after"] = os.getloadavg()
    s = res["samples"]
    if s:
        after = [r for t, r in s if t >= 60.0] or [s[-1][1]]
        res["rss_kb"] = {"first": s[0][1], "at_60s": after[0], "last": s[-1][1], "max": max(r for _, r in s),
                         "growth_after_60s_kb": s[-1][1] - after[0]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration", type=float, default=600.0)
    ap.add_argument("--rate", type=float, default=1000.0)
    ap.add_argument("--interval", type=float, default=1.0)
    ap.add_argument("--step-kb", type=int, default=256)
    ap.add_argument("--no-can", action="store_true", help="ZeroMQ only (the default config also runs CAN)")
    ap.add_argument("--command-hz", type=float, default=100.0)
    ap.add_argument("--status-hz", type=float, default=1.0)
    ap.add_argument("--stall-at", type=float, default=0.0, help="SIGSTOP the client at this time (s)")
    ap.add_argument("--stall-s", type=float, default=5.0)
    ap.add_argument("--zmq", default="", help="extra lines for the ZeroMQ adapter's table")
    ap.add_argument("--loop", default="", help="extra lines for [loop]")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp())
    io = write_io(tmp / "io.toml", f"rate_hz = {args.rate}\n{args.loop}", adapters=FREE_PORTS + args.zmq + "\n"
                  + CAN.format(can="false" if args.no_can else "true", pid=os.getpid()))
    server = LocalServer(tmp, "powershift", io)
    srv = server.proc
    client = None
    res: dict = {"args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
                 "load_avg_before": os.getloadavg(), "samples": [], "steps": []}
    try:
        control = server.control
        client = subprocess.Popen([sys.executable, str(ROOT / "bench" / "load_client.py"), "--control", control,
                                   "--subscribe", "--command-hz", str(args.command_hz), "--status-hz",
                                   str(args.status_hz)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
        sample_memory(srv, client, args, res)
        res["threads_end"] = threads(srv.pid)
    finally:
        if client is not None:
            if client.poll() is None:
                client.send_signal(signal.SIGCONT)
                client.send_signal(signal.SIGTERM)
            out, _ = client.communicate(timeout=30)
            try:
                res["client"] = json.loads(out.strip().splitlines()[-1])
            except (ValueError, IndexError):
                res["client"] = None
        if srv.poll() is None:
            srv.send_signal(signal.SIGTERM)
            srv.wait(timeout=30)
        server.kill()
    summarize(server, res)
    print(json.dumps({k: v for k, v in res.items() if k != "samples"}, indent=2))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(with_host(res), indent=2))
    return 0


if __name__ == "__main__":
    print(host_line(), flush=True)
    sys.exit(main())
