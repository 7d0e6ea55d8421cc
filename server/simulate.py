"""``gearbox-hil simulate``: run a plant offline through a scenario.

::

    gearbox-hil simulate CONFIG --scenario SCENARIO --out DIR [--dt SECONDS] [--plot]

writes ``DIR/trace.csv`` (``t`` then every output signal, one row per step
including t = 0, floats written so they read back bit for bit),
``DIR/events.json`` (every stick, breakaway and reversal with its time and
clutch, plus the run's metadata) and, with ``--plot``, PNG figures in the
style of the papers (:mod:`server.plots`).

The per-step sequence is :func:`server.scenario.offline_step`: write the
scenario's inputs for step k (:meth:`CompiledScenario.apply`), then
``plant.step(dt)``.  The server's scenario playback calls the same function
after the same ``plant.reset(compiled.initial_inputs())``, so a lockstep run
and an offline run produce identical outputs bit for bit.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from plant_models.core import layout as L
from plant_models.config import ConfigError
from plant_models.plant import Plant
from plant_models.registry import load_plant

from .scenario import CompiledScenario, load_scenario, offline_step

EVENTS_FORMAT = 1  # version of the events.json layout


@dataclass
class Trace:
    """The result of an offline run.

    ``time`` [steps + 1] in s; ``values`` [steps + 1, n_out], row k = the
    plant outputs at ``time[k]`` (row 0 after the reset); ``events`` the
    stick/breakaway/reversal events as dicts (time, clutch, row, type);
    ``status_or`` the OR of all step status words; ``counters`` the core's
    diagnostic counters at the end.
    """

    names: list[str]
    units: list[str]
    time: np.ndarray
    values: np.ndarray
    events: list[dict] = field(default_factory=list)
    status_or: int = 0
    start_status: int = 0
    wall_time_s: float = 0.0
    counters: dict = field(default_factory=dict)

    def column(self, name: str) -> np.ndarray:
        """One output signal over time (a view)."""
        try:
            return self.values[:, self.names.index(name)]
        except ValueError:
            raise KeyError(f"no output {name!r} in the trace") from None

    def __contains__(self, name: str) -> bool:
        return name in self.names

    def write_csv(self, path: str | Path) -> None:
        """``t`` then one column per output; each float as its shortest repr (reads back exactly)."""
        with open(path, "w", newline="") as fh:
            fh.write(",".join(["t"] + self.names) + "\n")
            data = np.column_stack([self.time, self.values]).tolist()
            fh.writelines(",".join(map(repr, row)) + "\n" for row in data)


def read_trace_csv(path: str | Path) -> tuple[list[str], np.ndarray]:
    """Read a trace.csv back: (column names including ``t``, float array)."""
    with open(path) as fh:
        header = fh.readline().strip().split(",")
        rows = [[float(x) for x in line.split(",")] for line in fh if line.strip()]
    return header, np.array(rows, dtype=float).reshape(len(rows), len(header))


def run_offline(plant: Plant, compiled: CompiledScenario) -> Trace:
    """Reset the plant to the scenario's initial inputs and run all its steps.

    The outputs go into one preallocated array; events are drained from the
    core's ring buffer whenever its counter moved (events are rare; nothing
    else is allocated per step).
    """
    n_steps = compiled.n_steps
    names = [s.name for s in plant.outputs]
    values = np.empty((n_steps + 1, plant.n_out))
    time_s = np.arange(n_steps + 1, dtype=float) * compiled.dt
    try:
        start_status = plant.reset(compiled.initial_inputs())
    except ValueError as exc:  # an input value the plant refuses (Signal.check)
        raise ConfigError(compiled.scenario.source, "inputs", f"initial value rejected: {exc}") from None
    values[0] = plant.y
    counters = plant.counters
    events = plant.new_events()  # a row engaged at reset that cannot hold breaks away at t = 0
    seen = int(counters[L.CNT_EVENTS])
    status_or = start_status
    y = plant.y
    t0 = time.perf_counter()
    for k in range(n_steps):
        status_or |= offline_step(plant, compiled, k)
        values[k + 1] = y
        if counters[L.CNT_EVENTS] != seen:
            events.extend(plant.new_events())
            seen = int(counters[L.CNT_EVENTS])
    wall = time.perf_counter() - t0
    names_c = ("steps", "events", "solver_iter_max", "solver_iter_last", "substeps_max", "budget_hits",
               "rollbacks", "locate_iter_max")
    return Trace(names=names, units=[s.unit for s in plant.outputs], time=time_s, values=values, events=events,
                 status_or=int(status_or), start_status=int(start_status), wall_time_s=wall,
                 counters={nm: int(v) for nm, v in zip(names_c, counters)})


def status_bit_names(plant: Plant, status: int) -> list[str]:
    """Names of the status bits set in ``status`` (core bits and the plant's own)."""
    names = dict(L.STATUS_NAMES)
    names.update(getattr(plant, "extra_status_names", {}))
    return [nm for bit, nm in sorted(names.items()) if status & bit]


def events_document(plant: Plant, trace: Trace, config: str, scenario: str, dt: float) -> dict:
    """The content of events.json."""
    return {
        "format": EVENTS_FORMAT,
        "plant": plant.kind,
        "config": str(config),
        "scenario": str(scenario),
        "dt_s": dt,
        "steps": len(trace.time) - 1,
        "duration_s": float(trace.time[-1]),
        "wall_time_s": trace.wall_time_s,
        "realtime_factor": (float(trace.time[-1]) / trace.wall_time_s) if trace.wall_time_s > 0 else None,
        "status_bits_seen": status_bit_names(plant, trace.status_or),
        "start_status_bits": status_bit_names(plant, trace.start_status),
        "counters": trace.counters,
        "clutches": plant.row_names(),
        "events": [dict(time=e["time"], clutch=e["clutch"], type=e["type"]) for e in trace.events],
    }


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
    p.add_argument("--plot", action="store_true", help="also write PNG figures (needs matplotlib)")
    p.add_argument("--quiet", action="store_true", help="print nothing on success")


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


def _silent(line: str) -> None:
    pass


def run(args: argparse.Namespace) -> int:
    if args.plot:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise ConfigError("--plot", "", "needs matplotlib (pip install 'gearbox-hil[plot]')") from None
    from plant_models.compiling import CompileProgress  # loads numba: not for --help

    # a first run on a machine compiles the plant's code: a line per function on stderr
    with CompileProgress(_progress_line if not args.quiet else _silent):
        plant = load_plant(args.config)
    scenario = load_scenario(args.scenario)
    compiled = scenario.compile(plant, args.dt)
    out = _prepare_out(args.out)
    trace = run_offline(plant, compiled)
    try:
        trace.write_csv(out / "trace.csv")
        doc = events_document(plant, trace, plant.source or args.config, scenario.source, compiled.dt)
        with open(out / "events.json", "w") as fh:
            json.dump(doc, fh, indent=1)
            fh.write("\n")
        figures = []
        if args.plot:
            from .plots import plot_trace
            figures = plot_trace(plant, trace, out, title=scenario.description or Path(scenario.source).stem)
    except OSError as exc:
        raise ConfigError(str(out), "--out", f"cannot write the results ({exc.strerror})") from None
    if not args.quiet:
        bits = ", ".join(doc["status_bits_seen"]) or "none"
        print(f"{plant.kind}: {compiled.n_steps} steps of {compiled.dt:g} s ({trace.time[-1]:g} s simulated) "
              f"in {trace.wall_time_s:.3f} s wall; {len(trace.events)} events; status bits: {bits}")
        print(f"wrote {out / 'trace.csv'}, {out / 'events.json'}" + "".join(f", {f}" for f in figures))
    return 0
