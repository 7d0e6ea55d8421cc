"""An offline run with the devices of an I/O config: the plant and its device adapters stepped as the server's tick.

A test file or a campaign whose I/O config (``io = "..."``) has ``device``
adapters runs them in this process: each is made from the config and opened
on the plant (the ``sim`` backend only: an offline run drives no hardware),
and the run pipeline's stepper calls them where the server's tick does
(:mod:`server.realtime.tick`): ``read`` in the ``commanded`` stage before
the step, ``write`` in the ``send`` stage after it.  A TCU emulator named
by the device (``tcu``, :mod:`io_adapters.devices.tcu`) closes the loop over
the pins, as in ``serve``.  There is no scenario: the plant starts from
the I/O config's ``[initial_inputs]`` (as a server does) and the devices
drive it; the step is the I/O config's period (``1 / rate_hz``).

A fault schedule's pin faults (target ``device``) go to the device adapter
through the fault set (:class:`server.realtime.fault_schedule.FaultSchedule`
with the run's adapters), switched before the step they name, exactly as
``fault_set`` switches them between a lockstep server's ticks: the same
fault at the same tick gives the same run bit for bit.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from plant_models.errors import ConfigError
from plant_models.plant import Plant
from plant_models.run.stepper import Stepper

DEVICE = "device"


def device_specs(io) -> list:
    """The ``device`` adapters of an I/O config (:class:`server.realtime.runtime.IoConfig`), checked for an
    offline run: the ``sim`` backend only (``ConfigError`` naming the adapter's key)."""
    out = []
    for spec in io.adapters:
        if spec.type != DEVICE:
            continue
        backend = spec.options.get("backend", "sim")
        if backend != "sim":
            raise ConfigError(io.source, f"{spec.key}.backend", f"an offline run drives the sim device only, not "
                              f"{backend!r} (hardware needs a server: mode \"lockstep\" or \"realtime\")")
        out.append(spec)
    return out


def has_devices(io_config: str | Path | None) -> bool:
    """Whether the I/O config (a path or a name; None: none) has a ``device`` adapter."""
    if io_config is None:
        return False
    from server.realtime.runtime import load_io_config

    return any(a.type == DEVICE for a in load_io_config(io_config).adapters)


@dataclass
class DeviceRun:
    """The rows of a run with devices: every step's outputs and inputs (row 0: after the reset)."""

    output_names: list[str]
    input_names: list[str]
    time: np.ndarray
    outputs: np.ndarray
    inputs: np.ndarray  # the inputs of step k at row k (the last step's again at the end)
    status_or: int
    start_status: int
    wall_time_s: float
    events: list = field(default_factory=list)


def open_devices(plant: Plant, io, dt: float) -> list:
    """The I/O config's device adapters, made and opened on ``plant`` at step ``dt`` (lockstep: simulated time)."""
    from io_adapters.base import LoopContext
    from server.realtime.runtime import create_adapters

    specs = device_specs(io)
    sub = replace(io, adapters=tuple(specs))
    adapters = create_adapters(sub)
    opened = []
    try:
        for a in adapters:
            a.open(plant, LoopContext(period_s=dt, feed_watchdog=lambda ns: None, status=dict, mode="lockstep"))
            opened.append(a)
    except Exception:
        for a in opened:
            a.close()
        raise
    return opened


def run_with_devices(plant: Plant, io_config: str | Path, duration_s: float,
                     faults: Sequence[tuple[dict, float, float | None]] = (), log: list[str] | None = None,
                     after_tick: Callable[[int, list], None] | None = None) -> DeviceRun:
    """Run ``plant`` with the devices of ``io_config`` for ``duration_s`` (module docstring).

    ``faults``: ``(fault map, at_s, until_s)`` each, as a test file's
    schedule (pin faults included); ``log`` gets a line per switch.
    ``after_tick(k, adapters)``, if given, is called after step k's writes
    (a test reads the pins there).  Raises ``ConfigError`` for an I/O
    config that does not fit, ``FaultError`` for a fault no part of the run
    takes.
    """
    from server.realtime.fault_schedule import FaultSchedule
    from server.realtime.runtime import _check_against_plant, load_io_config

    io = load_io_config(io_config)
    _check_against_plant(io, plant)
    dt = io.loop.period_ns / 1e9
    n = int(round(duration_s / dt))
    start_status = plant.reset(dict(io.initial_inputs))
    adapters = open_devices(plant, io, dt)
    try:
        schedule = FaultSchedule(plant, list(faults), dt, log, adapters=adapters) if faults else None
        Y = np.empty((n + 1, plant.n_out))
        U = np.empty((n + 1, plant.n_in))
        Y[0] = plant.y
        y, u = plant.y, plant.u
        period_ns = io.loop.period_ns

        def commanded(k: int) -> None:
            for a in adapters:
                a.read(k, k * period_ns)

        def row(k: int) -> None:
            Y[k + 1] = y
            U[k] = u

        def send(k: int) -> None:
            for a in adapters:
                a.write(k + 1, k * period_ns)
            if after_tick is not None:
                after_tick(k, adapters)

        stages = {"commanded": commanded, "row": row, "send": send}
        if schedule is not None:
            stages.update(schedule.stages())
        step = Stepper(plant, dt, stages, "device_run").step
        status = int(start_status)
        events = plant.new_events()
        t0 = time.perf_counter()
        for k in range(n):
            status |= step(k)
        wall = time.perf_counter() - t0
        events += plant.new_events()
        U[n] = U[n - 1] if n else u
        if schedule is not None:
            schedule.reset()
    finally:
        for a in adapters:
            a.close()
    return DeviceRun([s.name for s in plant.outputs], [s.name for s in plant.inputs], np.arange(n + 1) * dt, Y, U,
                     status, int(start_status), wall, events)


def device_trace(plant: Plant, r: DeviceRun):
    """The run as a :class:`~server.offline.traces.Trace` (every step), for a campaign's metrics and tables."""
    from server.offline.traces import run_trace

    return run_trace(plant, r.time, r.outputs, r.events, r.status_or, r.start_status, r.wall_time_s, 1,
                     len(r.time) - 1, plant.events_lost)


def device_recording(r: DeviceRun):
    """The run as the test bench's :class:`~server.testbench.verdict.Recording` (inputs of step k at sample k)."""
    from server.testbench.spec import WATCHDOG
    from server.testbench.verdict import Recording

    sig = {nm: r.inputs[:, i].copy() for i, nm in enumerate(r.input_names)}
    sig.update({nm: r.outputs[:, j].copy() for j, nm in enumerate(r.output_names)})
    sig.setdefault(WATCHDOG, np.zeros(len(r.time)))  # no command watchdog offline
    dt = float(r.time[1] - r.time[0]) if len(r.time) > 1 else 0.0
    return Recording(r.time, sig, dt)


__all__ = ["DeviceRun", "device_recording", "device_specs", "device_trace", "has_devices", "open_devices",
           "run_with_devices"]
