"""``gearbox-hil serve CONFIG``: run a plant in the real-time loop with its I/O adapters.

Shows a live status line (rate, TET, p99 lateness, overruns, speeds), shuts
down cleanly on Ctrl-C or SIGTERM and prints the timing summary.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from pathlib import Path


from .loop_config import MODES, RATE_MAX_HZ, RATE_MIN_HZ, WAITS

_T_IMPORT_NS = time.monotonic_ns()


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("config", help="plant config file (or the name of one in configs/, e.g. powershift)")
    p.add_argument("--io", metavar="IO_CONFIG", default=None,
                   help="I/O and loop config (default: configs/io_default.toml: loopback ZeroMQ, no hardware)")
    p.add_argument("--mode", choices=MODES, help="realtime (wall clock), lockstep (clients step N ticks) or afap "
                   "(as fast as possible); overrides [loop].mode")
    p.add_argument("--rate", type=float, metavar="HZ", help=f"tick rate, {RATE_MIN_HZ:g}..{RATE_MAX_HZ:g} Hz; "
                   "overrides [loop].rate_hz")
    p.add_argument("--wait", choices=WAITS, help="wait strategy; overrides [loop].wait")
    p.add_argument("--duration", type=float, metavar="S", help="stop after S seconds (wall time running in "
                   "realtime, simulated time in lockstep/afap); overrides [loop].duration_s")
    p.add_argument("--quiet", action="store_true", help="no live status line")
    p.add_argument("--ready-file", metavar="PATH", help="write a JSON file with pid and endpoints once the "
                   "sockets are bound (for scripts and tests that start the server)")
    p.add_argument("--summary-json", metavar="PATH", help="write the final status (with timing) as JSON")
    p.add_argument("--log-level", default="INFO", choices=("DEBUG", "INFO", "WARNING", "ERROR"),
                   help="log level on stderr (default INFO)")


def _process_start_monotonic_ns() -> int | None:
    """When this process started, on CLOCK_MONOTONIC (Linux: from /proc, 10 ms resolution), else None."""
    try:
        with open("/proc/self/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        start_ticks = int(fields[19])  # field 22 (starttime), counted after the ")" that ends the command name
        hz = os.sysconf("SC_CLK_TCK")
        with open("/proc/uptime") as fh:
            uptime_s = float(fh.read().split()[0])
        # /proc/uptime and starttime count from boot (CLOCK_BOOTTIME); CLOCK_MONOTONIC differs by suspend time
        boot_to_mono = time.clock_gettime_ns(time.CLOCK_MONOTONIC) - int(uptime_s * 1e9)
        return boot_to_mono + int(start_ticks * 1e9 / hz)
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def _write_json(path: str, obj: dict) -> None:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(p.name + ".tmp")
    tmp.write_text(json.dumps(obj, indent=2, default=str))
    os.replace(tmp, p)


def _progress_line(line: str) -> None:
    print(f"gearbox-hil: {line}", file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=getattr(logging, args.log_level), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    overrides = dict(mode=args.mode, rate_hz=args.rate, wait=args.wait, duration_s=args.duration)
    if args.quiet:
        overrides["status_line"] = False
    # The loop and its compiled kernels load here, not when this module is imported, so that
    # `gearbox-hil --help` and a mistyped argument load nothing compiled; a first start on a
    # machine compiles them, with a line per function on stderr.
    from plant_models.compiling import CompileProgress

    with CompileProgress(_progress_line):
        from io_adapters.base import AdapterError

        from . import runtime

        server = runtime.build(args.config, args.io, **overrides)  # checks the overrides
        try:
            server.open()
        except AdapterError as exc:
            print(f"gearbox-hil: error: {exc}", file=sys.stderr)
            return 2
    loop = server.loop
    try:
        endpoints = {}
        for a in loop.adapters:
            st = a.status()
            if isinstance(st, dict) and isinstance(st.get("endpoints"), dict):
                endpoints.update({f"{a.name}.{k}": v for k, v in st["endpoints"].items()})
        print(f"gearbox-hil serve: {server.plant.kind} plant ({server.plant.source}), {loop.mode} mode at "
              f"{1.0 / loop.dt:g} Hz, wait {loop.cfg.wait}", flush=True)
        for k, v in endpoints.items():
            print(f"  {k:<20} {v}", flush=True)
        if args.ready_file:
            _write_json(args.ready_file, {"pid": os.getpid(), "endpoints": endpoints, "mode": loop.mode,
                                          "period_s": loop.dt, "plant": server.plant.kind})
        code = server.run()
        server.report.end_status_line()
        status = server.report.status()
        t_proc = _process_start_monotonic_ns()
        status["startup"] = {
            "process_start_to_first_tick_s": (round((loop.first_tick_ns - t_proc) / 1e9, 4)
                                              if t_proc and loop.first_tick_ns else None),
            "serve_import_to_first_tick_s": (round((loop.first_tick_ns - _T_IMPORT_NS) / 1e9, 4)
                                             if loop.first_tick_ns else None),
            "first_tick_monotonic_ns": loop.first_tick_ns or None,
        }
        print(server.report.summary_text(), flush=True)
        if args.summary_json:
            _write_json(args.summary_json, status)
        return code
    finally:
        server.close()
