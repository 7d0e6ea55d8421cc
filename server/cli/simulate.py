"""``gearbox-hil simulate``: run a plant offline through a scenario.

::

    gearbox-hil simulate CONFIG --scenario SCENARIO --out DIR [--dt SECONDS] [--every N]
                         [--format auto|csv|parquet] [--plot]

writes ``DIR/trace.csv`` or ``DIR/trace.parquet`` (``t`` then every output
signal, one row at t = 0 and one per step, or every N-th step and the last
with ``--every N``; floats read back bit for bit; see :mod:`server.offline.traces`
for the formats), ``DIR/events.json`` (every stick, breakaway and reversal
with its time and clutch, plus the run's metadata), ``DIR/shifts.csv`` for a
plant with a ``gear`` output (a row per shift, :mod:`server.offline.shift_list`;
also printed as a table; not for a trace streamed to its file) and, with ``--plot``,
PNG figures in the style of the papers (:mod:`server.plots`).  On a
terminal a progress bar shows the simulated time and the rate; the summary
gives the time of the steps and of the whole command.  Ctrl-C during a long
run stops it and writes the trace and events up to there (``"complete":
false`` in events.json, exit code 130).  A trace larger than
:data:`server.offline.trace_stream.TRACE_MEMORY_BYTES` is never held whole: it is
written to the file in chunks as the run goes (:mod:`server.offline.trace_stream`),
and ``--plot`` is then refused up front with the ``--every`` that fits.

The run itself is :func:`server.offline.run.run_offline` (compiled as a
whole; a lockstep run of the server gives the same outputs bit for bit).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

from plant_models.config import ConfigError
from plant_models.registry import load_plant

from server.offline import shift_list, trace_stream
from server.offline.args import positive_int
from server.offline.run import events_document, run_offline
from server.offline.scenario import load_scenario
from server.offline.traces import FORMATS


# -- command line ----------------------------------------------------------------
def _step_arg(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not (math.isfinite(v) and 5e-5 <= v <= 1e-2):
        raise argparse.ArgumentTypeError(f"step must be between 5e-05 and 0.01 s, got {text}")
    return v


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("config", help="plant config file (or the name of one in configs/)")
    p.add_argument("--scenario", required=True, help="scenario file (or the name of one in scenarios/)")
    p.add_argument("--out", required=True, help="output directory (created if missing)")
    p.add_argument("--dt", type=_step_arg, default=None, metavar="SECONDS",
                   help="fixed step, overrides the scenario's dt_s (5e-05 .. 0.01 s)")
    p.add_argument("--every", type=positive_int, default=1, metavar="N",
                   help="keep the outputs of every N-th step (and the last); events are all kept (default 1)")
    p.add_argument("--format", choices=FORMATS, default="auto",
                   help="trace file: csv, parquet (needs pyarrow), or auto: csv up to 2 million values, "
                        "parquet above (default auto)")
    p.add_argument("--plot", action="store_true", help="also write PNG figures (needs matplotlib)")
    p.add_argument("--quiet", action="store_true", help="print nothing on success")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="a first start's compile progress a line per compiled function, by name")


def _prepare_out(path: str) -> Path:
    out = Path(path)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise ConfigError(path, "--out", "exists and is not a directory") from None
    except OSError as exc:
        raise ConfigError(path, "--out", f"cannot create the output directory ({exc.strerror})") from None
    if not out.is_dir():
        raise ConfigError(path, "--out", "exists and is not a directory")
    if not os.access(out, os.W_OK | os.X_OK):
        raise ConfigError(path, "--out", "output directory is not writable")
    return out


def _progress_line(line: str) -> None:
    print(f"gearbox-hil: {line}", file=sys.stderr, flush=True)


def _live(text: str) -> None:
    """On a terminal: the compile's stage line rewritten in place."""
    sys.stderr.write(text)
    sys.stderr.flush()


def _no_progress(k: int, n: int) -> None:
    pass


def _run_streamed(plant, compiled, out: Path, args: argparse.Namespace, meta: dict, progress):
    """The run with its trace written to the file in chunks (:mod:`server.offline.trace_stream`); a note says so."""
    rows = trace_stream.trace_bytes(plant, compiled.n_steps, args.every) // ((plant.n_out + 1) * 8)
    writer = trace_stream.TraceWriter(out, args.format, [s.name for s in plant.outputs],
                                      [s.unit for s in plant.outputs], rows * (plant.n_out + 1), meta)
    if not args.quiet:
        _progress_line(f"the trace has {rows} rows ({rows * (plant.n_out + 1) * 8 / 2**30:.1f} GiB): written to "
                       f"{writer.path} as the run goes; --every N keeps every N-th step")
    trace = trace_stream.run_streamed(plant, compiled, writer, args.every, progress)
    trace.path = writer.path
    return trace


def _write_shifts(trace, out: Path, streamed: bool) -> list[dict] | None:
    """The run's shifts (:mod:`server.offline.shift_list`) into ``shifts.csv`` beside the trace; None (and no
    file) for a plant without a ``gear`` output or a trace streamed to its file (not in memory: reading it back
    would undo the bound on memory).  events.json stays the same either way."""
    if streamed or "gear" not in trace.names:
        return None
    shifts = shift_list.shift_list(trace.names, trace.time, trace.values)
    shift_list.write_csv(shifts, out / "shifts.csv")
    return shifts


def run(args: argparse.Namespace) -> int:
    began = time.perf_counter()
    if args.plot:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise ConfigError("--plot", "", "needs matplotlib (pip install 'gearbox-hil[plot]')") from None
    if args.format == "parquet":
        from server.offline.traces import _pyarrow
        _pyarrow()  # a missing pyarrow is reported before anything runs
    from plant_models import offline
    from plant_models.compiling import CompileProgress, silent  # loads numba: not for --help

    from server.cli.warmup_progress import compile_progress
    from server.offline.progress_bars import simulation_bar

    # a first run on a machine compiles the plant's code: its stages and counts on stderr (-v: each function)
    live = _live if sys.stderr.isatty() and not args.verbose else None
    with (CompileProgress(silent) if args.quiet else compile_progress(_progress_line, args.verbose, live)):
        plant = load_plant(args.config)
        offline.warm_up()
    scenario = load_scenario(args.scenario)
    compiled = scenario.compile(plant, args.dt)
    streamed = trace_stream.needs_streaming(plant, compiled.n_steps, args.every)
    if streamed and args.plot:
        raise ConfigError("--plot", "", f"the trace of {compiled.n_steps} steps is too large to plot from memory "
                          f"({trace_stream.trace_bytes(plant, compiled.n_steps, args.every) / 2**30:.1f} GiB); "
                          f"keep every N-th step with --every "
                          f"{trace_stream.every_to_fit(plant, compiled.n_steps, args.every)} or more")
    out = _prepare_out(args.out)
    ready = time.perf_counter()
    meta = {"plant": plant.kind, "config": str(plant.source or args.config), "scenario": str(scenario.source),
            "dt_s": repr(compiled.dt), "every": str(args.every), "steps": str(compiled.n_steps)}
    with simulation_bar(plant.kind, compiled.dt, enabled=not args.quiet) as progress:
        # always in chunks, so that Ctrl-C stops a long run and keeps what it computed
        if streamed:  # a trace larger than memory allows goes to its file a chunk at a time
            trace = _run_streamed(plant, compiled, out, args, meta, progress or _no_progress)
        else:
            trace = run_offline(plant, compiled, every=args.every, progress=progress or _no_progress)
    ran = time.perf_counter()
    doc = events_document(plant, trace, plant.source or args.config, scenario.source, compiled.dt)
    try:
        meta["steps"] = str(trace.steps)
        trace_path = trace.path if streamed else trace.write(out, args.format, meta)
        doc["trace_file"] = trace_path.name
        shifts = _write_shifts(trace, out, streamed)
        with open(out / "events.json", "w") as fh:
            json.dump(doc, fh, indent=1)
            fh.write("\n")
        written = time.perf_counter()
        figures = []
        if args.plot:
            from server.plots import plot_trace
            figures = plot_trace(plant, trace, out, title=scenario.description or Path(scenario.source).stem)
    except OSError as exc:
        raise ConfigError(str(out), "--out", f"cannot write the results ({exc.strerror})") from None
    if not args.quiet:
        done = time.perf_counter()
        bits = ", ".join(doc["status_bits_seen"]) or "none"
        rate = trace.time[-1] / trace.wall_time_s if trace.wall_time_s > 0 else math.inf
        print(f"{plant.kind}: {trace.steps} steps of {compiled.dt:g} s ({trace.time[-1]:g} s simulated) "
              f"in {trace.wall_time_s:.3f} s of stepping ({rate:.0f}x real time); {len(trace.events)} events; "
              f"status bits: {bits}")
        plots = f", plots {done - written:.2f} s" if figures else ""
        print(f"wrote {trace_path} ({doc['rows']} rows), {out / 'events.json'}"
              + (f", {out / 'shifts.csv'}" if shifts is not None else "") + "".join(f", {f}" for f in figures))
        print(f"{done - began:.2f} s wall in all (set-up {ready - began:.2f} s, run {ran - ready:.2f} s, "
              f"writing {written - ran:.2f} s{plots})")
        if shifts:
            print(f"{len(shifts)} shift{'s' if len(shifts) > 1 else ''} (shifts.csv):")
            print("\n".join(shift_list.table(shifts)))
    if not trace.complete:
        print(f"gearbox-hil: simulate interrupted at t = {trace.time[-1]:g} s of {compiled.n_steps * compiled.dt:g} s; "
              f"the trace and events up to there are in {out}", file=sys.stderr)
        return 130
    return 0
