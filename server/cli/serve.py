"""``gearbox-hil serve CONFIG``: run a plant in the real-time loop with its I/O adapters.

Prints where it listens (the same endpoints go into ``--ready-file``),
shows a live status line (rate, TET, p99 lateness, overruns, speeds), shuts
down cleanly on Ctrl-C or SIGTERM and prints the timing summary, with a
warning when a real-time run's actual rate or missed ticks fall outside
``--timing-tolerance`` (exit code 4 with ``--strict-timing``).  The adapter
types add their own options (:mod:`io_adapters.declaration`): ``--zmq-port``,
``--zmq-control/-state/-command`` and ``--can-share`` move the sockets, so
that two servers can run on one machine (port 0: any free port).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from pathlib import Path


from io_adapters.declaration import declarations

from server.realtime.loop_config import MODES, RATE_MAX_HZ, RATE_MIN_HZ, WAITS

_T_IMPORT_NS = time.monotonic_ns()

EXIT_TIMING = 4  # --strict-timing: the real-time run fell outside its timing tolerance
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
DEFAULT_TOLERANCE_PCT = 5.0  # a realtime run may lose this much of its rate and miss this share of its ticks


def _tolerance_arg(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0.0 <= v <= 100.0:
        raise argparse.ArgumentTypeError(f"must be between 0 and 100 %, got {text}")
    return v


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
    p.add_argument("--quiet", action="store_true", help="no live status line, no log lines below warnings, no "
                   "compile progress per function; the endpoints, warnings, errors and the final summary remain")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="a first start's compile progress a line per compiled function, by name")
    for decl in declarations():  # each adapter type's own options (light modules: no transport is imported)
        for opt in decl.cli_options:
            extra = {"nargs": "?", "const": opt.const} if opt.optional_value else {}
            p.add_argument(opt.flag, type=opt.parse, metavar=opt.metavar, help=opt.help, **extra)
    p.add_argument("--timing-tolerance", type=_tolerance_arg, default=DEFAULT_TOLERANCE_PCT, metavar="PCT",
                   help="warn at the end of a realtime run whose actual rate is more than PCT %% below the target "
                   "or that missed more than PCT %% of its ticks (default %(default)g)")
    p.add_argument("--strict-timing", action="store_true", help="exit with code 4 when the realtime run falls "
                   "outside --timing-tolerance")
    p.add_argument("--ready-file", metavar="PATH", help="write a JSON file with pid and endpoints once the "
                   "sockets are bound (for scripts and tests that start the server)")
    p.add_argument("--summary-json", metavar="PATH", help="write the final status (with timing) as JSON")
    p.add_argument("--log-level", default=None, choices=("DEBUG", "INFO", "WARNING", "ERROR"),
                   help="log level on stderr (default INFO; WARNING with --quiet)")


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


def _quiet_progress_line(line: str) -> None:
    if not line.startswith(" "):  # the first and the last line of a compile, not one per function
        _progress_line(line)


def _adapter_options(args: argparse.Namespace) -> dict[str, dict]:
    """The adapter types' options given on the command line: type -> {flag: value}."""
    out = {}
    for decl in declarations():
        given = {o.flag: getattr(args, o.dest) for o in decl.cli_options if getattr(args, o.dest, None) is not None}
        if given:
            out[decl.type_name] = given
    return out


def run(args: argparse.Namespace) -> int:
    level = args.log_level or ("WARNING" if args.quiet else "INFO")
    # While the loop runs, status lines and log records go through writer threads (server.realtime.console): a
    # reader that stops reading our stdout or stderr must not stall the loop.
    from server.realtime.console import ConsoleLogHandler, ConsoleWriter

    stdout_writer, stderr_writer = ConsoleWriter(sys.stdout, name="stdout"), ConsoleWriter(sys.stderr, name="stderr")
    log_handler = ConsoleLogHandler(stderr_writer)
    log_handler.setFormatter(logging.Formatter(LOG_FORMAT))
    logging.basicConfig(level=getattr(logging, level), handlers=[log_handler], force=True)
    try:
        return _run(args, stdout_writer, stderr_writer)
    finally:
        for w in (stdout_writer, stderr_writer):
            w.close(timeout_s=2.0)
        # later log records of this process (it may be a test's) are written directly again
        logging.basicConfig(level=getattr(logging, level), stream=sys.stderr, force=True, format=LOG_FORMAT)


def _run(args: argparse.Namespace, stdout_writer, stderr_writer) -> int:
    # python-can-remote's own start-up lines name a port before it is chosen and a web page the CAN share
    # does not serve; the share logs the URL to connect to itself
    logging.getLogger("can_remote").setLevel(max(logging.WARNING, logging.getLogger().level))
    # numexpr (imported by pandas through asammdf or cantools) logs its thread count at INFO when first
    # imported: the first line of a server's log, about nothing the server does
    logging.getLogger("numexpr").setLevel(max(logging.WARNING, logging.getLogger().level))
    overrides = dict(mode=args.mode, rate_hz=args.rate, wait=args.wait, duration_s=args.duration)
    if args.quiet:
        overrides["status_line"] = False
    # The loop and its compiled kernels load here, not when this module is imported, so that
    # `gearbox-hil --help` and a mistyped argument load nothing compiled; a first start on a
    # machine compiles them, its stages and counts on stderr (-v: a line per function).
    from plant_models.compiling import CompileProgress

    from server.cli.warmup_progress import compile_progress

    # a line every few seconds, not one rewritten in place: the server's log lines go to the same stderr
    with (CompileProgress(_quiet_progress_line) if args.quiet else compile_progress(_progress_line, args.verbose)):
        from io_adapters.base import AdapterError

        from server.realtime import runtime

        server = runtime.build(args.config, args.io, _adapter_options(args), **overrides)  # checks them
        runtime.check_reachable(server)
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
        # the start-up lines name the endpoints actually bound (a port 0 or * is resolved here)
        print(f"gearbox-hil serve: {server.plant.kind} plant ({server.plant.source}), {loop.mode} mode at "
              f"{1.0 / loop.dt:g} Hz, wait {loop.cfg.wait}", flush=True)
        for k, v in endpoints.items():
            print(f"  {k:<20} {v}", flush=True)
        if args.ready_file:
            _write_json(args.ready_file, {"pid": os.getpid(), "endpoints": endpoints, "mode": loop.mode,
                                          "period_s": loop.dt, "plant": server.plant.kind})
        server.report.console = stdout_writer
        server.report.extra["console"] = lambda: {"stdout": stdout_writer.status(), "stderr": stderr_writer.status()}
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
        check = server.report.timing_check(args.timing_tolerance)
        status["timing_check"] = check
        stdout_writer.write(server.report.summary_text() + "\n")
        if check and check["problems"]:
            stderr_writer.write(f"gearbox-hil: warning: the real-time run is outside its timing tolerance "
                                f"({check['tolerance_pct']:g} %): " + "; ".join(check["problems"]) + "\n")
            if args.strict_timing and code == 0:
                code = EXIT_TIMING
        if args.summary_json:
            _write_json(args.summary_json, status)
        return code
    finally:
        server.close()
