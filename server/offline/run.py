"""Offline runs of a plant through a scenario: the library under ``gearbox-hil simulate`` and the campaigns.

:func:`run_offline` compiles the run as a whole (the scenario's inputs
evaluated, the plant stepped, outputs and events collected in one compiled
loop, :mod:`plant_models.offline`).  Its inputs and steps are those of the
run pipeline's stages (:mod:`plant_models.run.stages`), which the server's
scenario playback runs tick by tick after the same
``plant.reset(compiled.initial_inputs())``, so a lockstep run and an offline
run produce identical outputs bit for bit (:func:`run_stepwise` is that
sequence from Python through the same stepper, for tests and benchmarks).
:func:`events_document` is the content of ``events.json``.  The command line
is :mod:`server.cli.simulate`.
"""

from __future__ import annotations

import time
from typing import Callable

import numpy as np

from plant_models.config import ConfigError
from plant_models.contract.vocabulary import CNT_EVENTS
from plant_models.plant import Plant
from plant_models.run.stepper import Stepper

from server.offline.scenario import CompiledScenario
from server.offline.traces import Trace, read_trace, read_trace_csv, run_trace  # noqa: F401  (read_* re-exported for callers)

EVENTS_FORMAT = 1  # version of the events.json layout


def run_offline(plant: Plant, compiled: CompiledScenario, every: int = 1,
                progress: Callable[[int, int], None] | None = None, faults=None) -> Trace:
    """Reset the plant to the scenario's initial inputs and run all its steps in compiled code.

    The scenario's inputs are evaluated, the plant stepped, the outputs kept
    (every ``every``-th step and the last) and the events collected inside
    one compiled loop (:class:`plant_models.offline.Run`; for a plant whose
    step is Python, the same sequence from Python,
    :class:`plant_models.offline.StepwiseRun`), with the same
    inputs and steps as :func:`run_stepwise` (the server's lockstep
    sequence), bit for bit.  ``progress(k, n)``, when given, is called after
    chunks of about a tenth of a second (the chunks change nothing in the
    results); then Ctrl-C between two chunks ends the run early with the
    rows so far (``Trace.complete`` false).

    ``faults``: a fault schedule
    (:class:`server.realtime.fault_schedule.FaultSchedule` for this plant and
    ``compiled.dt``), started over here and cleared at the end; its faults are switched and applied
    as the real-time loop applies them, so the trace equals a lockstep run
    with the same faults bit for bit.  A compiled plant's run calls the fault
    stage inside its compiled loop, in chunks between the switches
    (:class:`plant_models.closed_loop.StagedRun`); a Python-step plant's is
    taken a step at a time (:class:`plant_models.offline.StepwiseRun`).
    """
    if faults is not None:
        faults.reset()
    try:
        start_status = plant.reset(compiled.start_inputs())
    except ValueError as exc:  # an input value the plant refuses (Signal.check)
        raise ConfigError(compiled.scenario.source, "inputs", f"initial value rejected: {exc}") from None
    from plant_models.offline import make_run  # loads numba: not for --help

    events = plant.new_events()  # a row engaged at reset that cannot hold breaks away at t = 0
    # compiled as a whole for a plant with a compiled step; a Python step is called a step at a time
    from plant_models.closed_loop import StagedRun, supports

    if faults is not None and supports(plant, kernel=False):  # the fault stage inside the compiled loop

        run = StagedRun(plant, compiled.table, compiled.dt, compiled.n_steps, every, faults)
    else:
        run = make_run(plant, compiled.table, compiled.dt, compiled.n_steps, every, faults=faults)
    t0 = time.perf_counter()
    complete = True
    if progress is None:
        run.advance()
    else:
        chunk = 1000
        try:
            while not run.done:
                t1 = time.perf_counter()
                run.advance(chunk)
                took = time.perf_counter() - t1
                progress(run.k, run.n_steps)
                chunk = max(100, min(4 * chunk, int(chunk * 0.1 / took))) if took > 0 else 4 * chunk
        except KeyboardInterrupt:  # keep what was computed: the rows and events so far
            complete = False
    wall = time.perf_counter() - t0
    if faults is not None:  # the plant is left without the schedule's clutch overlays (a reset keeps them)
        faults.reset()
    events += run.events()
    rows = run.rows
    steps = compiled.n_steps if complete else int(run.out_step[rows - 1])
    trace = run_trace(plant, run.out_step[:rows].astype(float) * compiled.dt, run.out[:rows], events,
                   run.status_or | start_status, start_status, wall, every, steps, run.events_lost)
    trace.complete = complete
    return trace


def run_stepwise(plant: Plant, compiled: CompiledScenario) -> Trace:
    """The same run a step at a time from Python, through the run pipeline's stepper, as the server's lockstep mode.

    The reference :func:`run_offline` is tested against (and the baseline of
    ``bench/bench_simulate.py``): the outputs go into one preallocated
    array; events are drained from the plant whenever its counter moved.
    """
    n_steps = compiled.n_steps
    values = np.empty((n_steps + 1, plant.n_out))
    time_s = np.arange(n_steps + 1, dtype=float) * compiled.dt
    try:
        start_status = plant.reset(compiled.initial_inputs())
    except ValueError as exc:
        raise ConfigError(compiled.scenario.source, "inputs", f"initial value rejected: {exc}") from None
    values[0] = plant.y
    counters = plant.counters
    events = plant.new_events()
    seen = [int(counters[CNT_EVENTS])]
    y = plant.y

    def collect(k: int) -> None:
        if counters[CNT_EVENTS] != seen[0]:
            events.extend(plant.new_events())
            seen[0] = int(counters[CNT_EVENTS])

    def row(k: int) -> None:
        values[k + 1] = y

    step = Stepper(plant, compiled.dt, {"inputs": lambda k: compiled.apply(plant, k), "events": collect, "row": row},
                   "offline").step
    status_or = start_status
    t0 = time.perf_counter()
    for k in range(n_steps):
        status_or |= step(k)
    wall = time.perf_counter() - t0
    return run_trace(plant, time_s, values, events, status_or, start_status, wall, 1, n_steps, 0)


def status_bit_names(plant: Plant, status: int) -> list[str]:
    """Names of the status bits set in ``status`` (shared, solver and plant bits), as the plant names them."""
    return plant.status_names(status)


def events_document(plant: Plant, trace: Trace, config: str, scenario: str, dt: float) -> dict:
    """The content of events.json."""
    return {
        "format": EVENTS_FORMAT,
        "plant": plant.kind,
        "config": str(config),
        "scenario": str(scenario),
        "dt_s": dt,
        "steps": trace.steps,
        "complete": trace.complete,
        "every": trace.every,
        "rows": trace.rows_written or len(trace.time),
        "duration_s": float(trace.time[-1]),
        "wall_time_s": trace.wall_time_s,
        "realtime_factor": (float(trace.time[-1]) / trace.wall_time_s) if trace.wall_time_s > 0 else None,
        "status_bits_seen": status_bit_names(plant, trace.status_or),
        "start_status_bits": status_bit_names(plant, trace.start_status),
        "counters": trace.counters,
        "clutches": plant.row_names(),
        "events_lost": trace.events_lost,
        "events": [dict(time=e["time"], clutch=e["clutch"], type=e["type"]) for e in trace.events],
    }
