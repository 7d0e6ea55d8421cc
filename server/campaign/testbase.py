"""A campaign whose base is a test file: its plant, stimulus and expectations, judged in every run.

A campaign file with ``test = "FILE"`` (instead of ``config`` and
``scenario``) takes the test file's plant config, its stimulus (a scenario
file or an inline ``[stimulus]``, with the test's ``duration_s`` and
``dt_s``), its fault schedule, its controller class and its expectations
(:mod:`server.testbench.spec`: read and checked by the test bench's own
reader).  The design's parameters apply to the plant config (``config.``),
the stimulus (``scenario.``), the fault schedule (``faults[N].``) and the
controller's table (``controller.params.``) (:mod:`.paths`).  Every run is
made offline: open loop in compiled code
(:func:`server.offline.run.run_offline`), closed loop by the test bench's
in-process runner (:func:`server.offline.controller.closed_loop`), each
with the fault schedule applied around each step as the real-time tick
applies it; both give the same outputs bit for bit as the test bench's
offline and lockstep runs.  The run's outputs and inputs become the test
bench's :class:`~server.testbench.verdict.Recording` exactly as the test
bench builds it (:func:`recording`), and every expectation is judged by the
test bench's :func:`~server.testbench.verdict.evaluate`, so a run's
verdicts are those ``gearbox-hil test`` gives for the same test file
(``--replay``, :mod:`.replay`, writes that file and runs it).

The table gets, after the run's columns, ``verdict`` (``pass``, ``fail``
or ``error``: the run's, over all expectations) and for expectation k (the
test file's ``expect[k]``) ``expect[k].verdict``, ``expect[k].fail_t_s``
and ``expect[k].fail_value``: the time and value the test bench reports
for a failure (NaN when it passed, or when the failure has none).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from plant_models.config import ConfigReader, load_toml

VERDICT = "verdict"  # the run's verdict column
LABELS = ("pass", "fail", "error")
PARTS = ("verdict", "fail_t_s", "fail_value")


def column(k: int, part: str) -> str:
    """The table column of expectation k: ``expect[k].verdict``, ``expect[k].fail_t_s`` or ``expect[k].fail_value``."""
    return f"expect[{k}].{part}"


def verdict_columns(n: int) -> list[tuple[str, str]]:
    """(name, type) of the verdict columns for n expectations: ``verdict``, then three per expectation."""
    cols = [(VERDICT, "string")]
    for k in range(n):
        cols += [(column(k, "verdict"), "string"), (column(k, "fail_t_s"), "float64"),
                 (column(k, "fail_value"), "float64")]
    return cols


def read_test_base(cfg: ConfigReader):
    """The test file named by the campaign's ``test`` key, read and checked by the test bench (a TestSpec)."""
    from server.testbench.spec import load_test

    name = cfg.string("test")
    p = Path(cfg.source).parent / name
    if not p.is_file():
        p = Path(name)
    if not p.is_file():
        raise cfg.error("test", f"no such test file {name!r} (next to the campaign file, or a path)")
    test = load_test(p)
    if test.controller is not None:
        raise cfg.error("test", f"{p}: the test's [controller] is a process beside a server; a campaign runs its "
                        "test file offline (name a controller class: [controller] class = \"file.py:Class\")")
    for f in test.faults:
        if f.fault["target"] not in ("signal", "clutch") + (("device",) if test.devices else ()):
            raise cfg.error("test", f"{p}: {f.key}: a {f.fault['target']} fault acts on a transport, which an "
                            "offline run does not have; a campaign runs its test file offline (signal and clutch "
                            "faults; pin faults with a device TCU of the test's io)")
    if test.adapter_sets:
        raise cfg.error("test", f"{p}: {test.adapter_sets[0].key}: an adapter set acts on a server's adapter (its "
                        "bus), which an offline run does not have; a campaign runs its test file offline")
    return test, load_toml(p)


def test_step(test) -> float | None:
    """The step of a test's runs, s: its ``dt_s``; else its scenario's (None here); else the test bench's default."""
    from server.testbench.runner import DEFAULT_DT_S

    if test.dt_s is not None:
        return test.dt_s
    return None if test.scenario is not None else DEFAULT_DT_S


def build_controller(spec, table: dict):
    """A fresh controller for one run from the test's [controller] table with the run's values (class, params)."""
    from server.offline.controller import load_controller

    target, params = table.get("class"), table.get("params", {})
    if not isinstance(target, str) or not isinstance(params, dict):
        raise ValueError(f"controller: class must be \"file.py:Class\" and params a table, got {table!r}")
    return load_controller(target, Path(spec.test_source).resolve().parent, params)


def run_test_case(spec, case, plant, where: str):
    """One run of a campaign over a test file: (its trace, the test bench's recording of it).

    Open loop: the compiled offline run (with the fault schedule, if any).
    With a controller class: the test bench's closed-loop run in process
    (:func:`server.offline.controller.closed_loop`, the controller made
    afresh with the run's parameters), recorded as the test bench records it.
    """
    from server.offline.run import run_offline
    from server.offline.scenario import parse_scenario

    io = device_io(spec)
    if io is not None:  # the test's I/O config has a device TCU: it drives the run, pin faults and all
        from server.testbench.device_run import device_recording, device_trace, run_with_devices

        r = run_with_devices(plant, io, spec.duration_s, fault_entries(case.faults))
        return device_trace(plant, r), device_recording(r)
    compiled = None
    if case.scenario is not None:
        compiled = parse_scenario(case.scenario, spec.scenario_source + where).compile(plant, spec.dt, warn=False)
    dt = compiled.dt if compiled is not None else spec.dt
    faults = fault_schedule(case.faults, plant, dt)
    if case.controller is None:
        trace = run_offline(plant, compiled, faults=faults)
        return trace, recording(plant, compiled, trace)
    from server.offline.controller import closed_loop
    from server.offline.traces import run_trace
    from server.testbench.runner import closed_loop_recording  # the test bench's own recording of such a run

    r = closed_loop(plant, compiled, build_controller(spec, case.controller), faults, duration_s=spec.duration_s,
                    dt=dt)
    trace = run_trace(plant, r.time, r.outputs, r.events, r.status_or, r.start_status, r.wall_time_s, r.every,
                      r.steps, plant.events_lost)
    return trace, closed_loop_recording(r)


def device_io(spec) -> Path | None:
    """The test's I/O config when it has a device with a TCU on its pins (the run is then that closed loop:
    :func:`server.testbench.device_run.run_with_devices`), else None."""
    name = (spec.test_data or {}).get("io")
    if not isinstance(name, str):
        return None
    from plant_models.config import find_config
    from server.testbench.spec import device_tcu

    p = Path(spec.test_source).resolve().parent / name
    if not p.is_file():
        p = find_config(name, folder="configs")
    return p if device_tcu(ConfigReader(spec.test_data, spec.test_source), p, "offline") else None


def fault_schedule(faults: list, plant, dt: float):
    """A run's fault schedule (:class:`server.realtime.fault_schedule.FaultSchedule`) from the test file's
    [[faults]] with the run's values; None without faults.  ValueError for a time out of place."""
    if not faults:
        return None
    from server.realtime.fault_schedule import FaultSchedule

    return FaultSchedule(plant, fault_entries(faults), dt)


def check_faults(spec, faults: list, plant, dt: float) -> None:
    """Check a run's faults as the run will take them: against the plant, and with a device TCU in the test's I/O
    config against its opened device adapters (pins, teeth).  Raises ``FaultError`` or ``ValueError``."""
    io = device_io(spec)
    if io is None:
        fault_schedule(faults, plant, dt)
        return
    from server.testbench.device_run import open_devices
    from server.realtime.fault_schedule import FaultSchedule
    from server.realtime.runtime import load_io_config

    cfg = load_io_config(io)
    adapters = open_devices(plant, cfg, cfg.loop.period_ns / 1e9)
    try:
        FaultSchedule(plant, fault_entries(faults), dt, adapters=adapters)
    finally:
        for a in adapters:
            a.close()


def fault_entries(faults: list) -> list[tuple[dict, float, float | None]]:
    """``(fault map, at_s, until_s)`` of the test file's [[faults]] with the run's values.  ValueError for a time
    out of place."""
    entries = []
    for k, f in enumerate(faults):
        at, until = f.get("at"), f.get("until")
        if not _time(at) or not (until is None or _time(until)):
            raise ValueError(f"faults[{k}]: at and until must be times >= 0 s, got at = {at!r}, until = {until!r}")
        if until is not None and until <= at:
            raise ValueError(f"faults[{k}].until: must be after at ({until:g} <= {at:g})")
        entries.append(({key: v for key, v in f.items() if key not in ("at", "until")}, float(at),
                        None if until is None else float(until)))
    return entries


def _time(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x >= 0.0


def recording(plant, compiled, trace):
    """The test bench's recording of a compiled offline run, built as its offline runner builds it.

    Times ``k * dt``; the inputs applied during step k at sample k (the
    last step's at the end); the outputs after step k at sample k + 1 (row
    0: after the reset); ``watchdog`` all zero (no command watchdog
    offline).  Outputs take precedence over inputs of the same name.
    """
    from plant_models.offline import fill_inputs

    from server.testbench.spec import WATCHDOG
    from server.testbench.verdict import Recording

    n = compiled.n_steps
    if trace.every != 1 or len(trace.time) != n + 1:
        raise ValueError("a test file's expectations need the run's every step")
    kind, times, values = compiled.table.arrays()
    u = np.empty((n + 1, plant.n_in))
    rates = np.empty((max(n, 1), plant.n_in))
    fill_inputs(kind, times, values, compiled.dt, 0, u[:max(n, 1)], rates)
    u[n] = u[n - 1] if n else u[0]
    sig = {s.name: u[:, i].copy() for i, s in enumerate(plant.inputs)}
    sig.update({name: trace.values[:, j].copy() for j, name in enumerate(trace.names)})
    sig.setdefault(WATCHDOG, np.zeros(n + 1))
    return Recording(np.arange(n + 1) * compiled.dt, sig, compiled.dt)


def judge(expectations, rec) -> tuple[str, tuple[tuple[str, float, float], ...]]:
    """The run's verdict and, per expectation, (``pass``/``fail``/``error``, failing time s, failing value)."""
    from server.testbench.verdict import evaluate

    out = []
    for exp in expectations:
        v = evaluate(exp, rec)
        label = "pass" if v.passed else ("error" if v.error else "fail")
        t = math.nan if v.passed or v.t is None else float(v.t)
        value = math.nan if v.passed or v.value is None else float(v.value)
        out.append((label, t, value))
    return overall([o[0] for o in out]), tuple(out)


def overall(labels) -> str:
    """``error`` when any expectation is in error, else ``fail`` when any failed, else ``pass``."""
    labels = list(labels)
    return "error" if "error" in labels else ("fail" if "fail" in labels else "pass")


def failed_row(n: int) -> tuple[str, tuple[tuple[str, float, float], ...]]:
    """The verdicts of a run that did not complete: every expectation in error."""
    return "error", tuple(("error", math.nan, math.nan) for _ in range(n))


__all__ = ["LABELS", "PARTS", "VERDICT", "build_controller", "check_faults", "column", "device_io", "failed_row",
           "fault_entries", "fault_schedule", "judge", "overall", "read_test_base", "recording", "run_test_case",
           "test_step", "verdict_columns"]
