"""Controllers in process: one interface, run offline, in lockstep and against the realtime server alike.

A controller is an object with

* ``period_ticks`` (int >= 1): it is called after every ``period_ticks``-th
  plant tick;
* ``bind(output_names, input_names)``: called once before the run with the
  plant's port names (indices are resolved here; nothing is looked up by
  name per call);
* ``initial_inputs() -> dict``: plant input values before tick 0 (they
  override the scenario's initial values);
* ``owned_inputs``: the plant inputs it commands (they override the
  scenario for the whole run);
* ``update(t_s, y, u)``: called after tick k when (k + 1) % period_ticks ==
  0, with ``t_s`` the plant's time after that tick (s), ``y`` the plant's
  output vector and ``u`` its input vector (float64, the plant's port units);
  it writes its commands into ``u`` at its owned inputs' indices, and they
  apply from tick k + 1 on: the order of a lockstep client that steps
  ``period_ticks`` ticks, reads the state and sends its commands;
* optionally ``kernel`` (a numba function ``kernel(t_s, y, u, state,
  params)`` with the arrays ``kernel_state`` and ``kernel_params``) doing
  what ``update`` does; such a controller implements ``update`` by calling it.

:class:`Controller` is a base class with those defaults; any object with
the attributes will do (:func:`bind_controller` checks them and raises
:class:`ControllerError` with one line).  :func:`run_closed_loop` runs a
controller against a plant in this process (a controller with a kernel, on a
plant of the friction core, inside one compiled loop:
:mod:`plant_models.closed_loop`); the lockstep and realtime runs
over ZeroMQ are :mod:`server.testbench.closed_loop`; the three give the
controller the same calls, so the same object runs unchanged in each.

The inputs of a closed-loop step
--------------------------------
Before step k: the scenario's values of step k for the inputs the
controller does not own, its last commands for those it owns, every rate 0
(a command holds its value through the step; so does a scenario's value
here, as it does when a lockstep client sends it), then a fault schedule's
faulted inputs, the step, its faulted outputs, the commanded inputs back.
A lockstep client can send exactly these values, so a lockstep closed-loop
run equals the offline one bit for bit.  Without a controller, the open-loop
runs (:func:`server.offline.run.run_offline`) keep a linear scenario's
first-order-hold rates.
"""

from __future__ import annotations

import importlib
import importlib.util
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from plant_models.config import did_you_mean
from plant_models.contract.vocabulary import CNT_EVENTS
from plant_models.run.stepper import Stepper
from plant_models.plant import Plant

from server.offline.scenario import CompiledScenario
from server.offline.traces import Trace, run_trace


class ControllerError(ValueError):
    """A controller that does not fit the interface or the plant (one line, naming what is wrong)."""


class Controller:
    """Base class of an in-process controller: the interface's defaults.

    Subclasses set ``period_ticks`` and ``owned_inputs`` (class or instance
    attributes), resolve their signal indices in :meth:`bind` (call
    ``super().bind`` to keep :attr:`output_index` / :attr:`input_index`) and
    write their commands in :meth:`update`.
    """

    period_ticks: int = 1
    owned_inputs: tuple[str, ...] = ()

    def bind(self, output_names: tuple[str, ...], input_names: tuple[str, ...]) -> None:
        """Keep the port names' indices (:attr:`output_index`, :attr:`input_index`: name -> index)."""
        self.output_index = {n: k for k, n in enumerate(output_names)}
        self.input_index = {n: k for k, n in enumerate(input_names)}

    def initial_inputs(self) -> dict[str, float]:
        """Input values before tick 0 (none: the scenario's, else the plant's defaults)."""
        return {}

    def update(self, t_s: float, y: np.ndarray, u: np.ndarray) -> None:
        """Write the commands for the outputs ``y`` at time ``t_s`` (s) into ``u`` at the owned inputs."""
        raise NotImplementedError(f"{type(self).__name__}.update")


@dataclass(frozen=True)
class Binding:
    """A controller checked against a plant's ports: what the runners need, resolved once."""

    controller: Any
    period_ticks: int
    owned: np.ndarray  # int64 indices of the owned inputs
    initial: dict  # initial_inputs(), checked (name -> float)


def bind_controller(ctl: Any, output_names: Sequence[str], input_names: Sequence[str]) -> Binding:
    """Check ``ctl`` against the interface and the ports, call its ``bind``; raises :class:`ControllerError`.

    Checked: ``period_ticks`` an int >= 1, ``owned_inputs`` names of the
    plant's inputs (each once), ``update`` callable, ``initial_inputs()``
    a map of input names to finite numbers, and a ``kernel``, if any, with
    float64 ``kernel_state`` and ``kernel_params`` arrays.
    """
    name = type(ctl).__name__
    outs, ins = tuple(output_names), tuple(input_names)
    period = getattr(ctl, "period_ticks", None)
    if isinstance(period, bool) or not isinstance(period, (int, np.integer)) or period < 1:
        raise ControllerError(f"controller {name}: period_ticks must be an integer >= 1, got {period!r}")
    owned = getattr(ctl, "owned_inputs", None)
    if isinstance(owned, str) or not isinstance(owned, (tuple, list)):
        raise ControllerError(f"controller {name}: owned_inputs must be a tuple of input names, got {owned!r}")
    for nm in owned:
        if nm not in ins:
            raise ControllerError(f"controller {name}: owned input {nm!r} is not an input of the plant"
                                  f"{did_you_mean(str(nm), ins)}; its inputs are {', '.join(ins)}")
    if len(set(owned)) != len(owned):
        raise ControllerError(f"controller {name}: owned_inputs names an input twice: {list(owned)}")
    if not callable(getattr(ctl, "update", None)) or not callable(getattr(ctl, "bind", None)):
        raise ControllerError(f"controller {name}: needs bind(output_names, input_names) and update(t_s, y, u)")
    kernel = getattr(ctl, "kernel", None)
    if kernel is not None:
        for attr in ("kernel_state", "kernel_params"):
            a = getattr(ctl, attr, None)
            if not isinstance(a, np.ndarray) or a.dtype != np.float64 or a.ndim != 1:
                raise ControllerError(f"controller {name}: a kernel needs {attr}, a 1-d float64 array")
    ctl.bind(outs, ins)
    init = ctl.initial_inputs() if callable(getattr(ctl, "initial_inputs", None)) else {}
    if not isinstance(init, dict):
        raise ControllerError(f"controller {name}: initial_inputs() must return a map, got {type(init).__name__}")
    checked = {}
    for nm, v in init.items():
        if nm not in ins:
            raise ControllerError(f"controller {name}: initial input {nm!r} is not an input of the plant"
                                  f"{did_you_mean(str(nm), ins)}")
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise ControllerError(f"controller {name}: initial input {nm} must be a finite number, got {v!r}")
        checked[nm] = float(v)
    return Binding(ctl, int(period), np.array([ins.index(nm) for nm in owned], dtype=np.int64), checked)


def load_controller(target: str, here: Path | None = None, params: dict | None = None) -> Any:
    """A controller from ``"path/to/file.py:ClassName"`` (or ``"package.module:ClassName"``), made with ``params``.

    A file path is looked up relative to ``here`` (a test file's folder),
    then to the repository; the class is called with ``params`` as keyword
    arguments.  Raises :class:`ControllerError` (one line) for a bad target.
    """
    from plant_models.config import repo_root

    if not isinstance(target, str) or target.count(":") != 1:
        raise ControllerError(f"controller {target!r}: must be \"file.py:ClassName\" or \"module:ClassName\"")
    where, cls_name = target.split(":")
    if where.endswith(".py"):
        cands = ([Path(here) / where] if here is not None else []) + [repo_root() / where]
        path = next((p.resolve() for p in cands if p.is_file()), None)
        if path is None:
            raise ControllerError(f"controller {target!r}: no file {where} (looked in "
                                  f"{', '.join(str(p.parent) for p in cands)})")
        mod_name = f"_controller_{path.stem}_{abs(hash(str(path))):x}"
        module = sys.modules.get(mod_name)
        if module is None:
            spec = importlib.util.spec_from_file_location(mod_name, path)
            module = importlib.util.module_from_spec(spec)
            sys.modules[mod_name] = module  # dataclasses look their module up
            try:
                spec.loader.exec_module(module)
            except Exception:
                del sys.modules[mod_name]
                raise
    else:
        try:
            module = importlib.import_module(where)
        except ImportError as exc:
            raise ControllerError(f"controller {target!r}: {exc}") from None
    cls = getattr(module, cls_name, None)
    if cls is None or not callable(cls):
        raise ControllerError(f"controller {target!r}: no class {cls_name} in {where}")
    try:
        return cls(**(params or {}))
    except TypeError as exc:
        raise ControllerError(f"controller {target!r}: parameters {params or {}}: {exc}") from None


@dataclass
class ClosedLoopResult:
    """A closed-loop run's rows: ``time`` [rows] s, ``outputs`` [rows, n_out], ``inputs`` [rows, n_in].

    Row 0 is the state after the reset; row j > 0 the outputs after a step
    (as the sensors report them, faults included) and the inputs that step
    was commanded (without the faults on inputs).  Rows are kept every
    ``every``-th step and after the last.
    """

    output_names: list[str]
    input_names: list[str]
    time: np.ndarray
    outputs: np.ndarray
    inputs: np.ndarray
    steps: int
    every: int = 1
    status_or: int = 0
    start_status: int = 0
    events: list[dict] = field(default_factory=list)
    wall_time_s: float = 0.0
    updates: int = 0  # calls of the controller's update


def row_steps(n_steps: int, every: int) -> np.ndarray:
    """The steps after which rows are kept: 0, every ``every``-th, and the last (as :func:`run_offline`)."""
    rows = np.arange(0, n_steps + 1, every, dtype=np.int64)
    return rows if rows[-1] == n_steps else np.append(rows, n_steps)


class ConstantInputs:
    """The inputs' values after the reset for every step: a closed-loop run without a scenario (duck-types the
    ``n_steps``, ``dt`` and ``inputs_at`` of a :class:`CompiledScenario`)."""

    def __init__(self, values: np.ndarray, dt: float, n_steps: int):
        self.values, self.dt, self.n_steps = np.array(values, dtype=float), float(dt), int(n_steps)
        self._zero = np.zeros_like(self.values)

    def inputs_at(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        return self.values, self._zero


def closed_loop_start(binding: Binding, compiled: CompiledScenario, input_names: Sequence[str]):
    """(initial inputs by name, the commands vector, the owned mask): the scenario's t = 0 values, the
    controller's initial inputs over them."""
    init = compiled.initial_inputs()
    init.update(binding.initial)
    held = np.array([init[nm] for nm in input_names], dtype=float)
    mask = np.zeros(len(input_names), dtype=bool)
    mask[binding.owned] = True
    return init, held, mask


def _closed_loop_stages(plant, compiled, held, mask, keep, Y, U, update, period, events) -> tuple[dict, list]:
    """The closed loop's implementations of the run pipeline's stages, by stage name, and a one-item list that
    counts the controller's calls.  Closures over what they share (the commands held, the rows kept)."""
    u, u_rate, y, counters = plant.u, plant.u_rate, plant.y, plant.counters
    cmd = np.empty(plant.n_in)  # what update sees and writes
    ybuf = np.empty(plant.n_out)  # a copy: the controller never holds the plant's own buffer
    seen = [int(counters[CNT_EVENTS])]
    next_row = [1]
    updates = [0]
    n_keep = len(keep)
    inputs_at = compiled.inputs_at

    def inputs(k: int) -> None:
        """The scenario's values of step k, the controller's held commands over them, every rate 0."""
        u_s, _ = inputs_at(k)
        np.copyto(u, u_s)
        u[mask] = held[mask]
        u_rate[:] = 0.0

    def collect(k: int) -> None:
        if counters[CNT_EVENTS] != seen[0]:
            events.extend(plant.new_events())
            seen[0] = int(counters[CNT_EVENTS])

    def row(k: int) -> None:
        r = next_row[0]
        if r < n_keep and keep[r] == k + 1:
            Y[r], U[r] = y, u
            next_row[0] = r + 1

    def controller(k: int) -> None:
        """After every ``period``-th step: ``update`` on copies of the outputs and inputs, its commands held."""
        if (k + 1) % period == 0:
            cmd[:] = u
            ybuf[:] = y
            update(plant.time, ybuf, cmd)
            held[mask] = cmd[mask]
            updates[0] += 1

    return {"inputs": inputs, "events": collect, "row": row, "controller": controller}, updates


def closed_loop(plant: Plant, compiled: CompiledScenario | None, controller: Any, faults=None, every: int = 1,
                duration_s: float | None = None, dt: float | None = None,
                use_kernel: bool = True) -> ClosedLoopResult:
    """Run ``controller`` against ``plant`` through ``compiled`` in this process (see the module's docstring).

    ``compiled`` None: no scenario; the inputs the controller does not own
    keep their values after the reset (the defaults, or the controller's
    initial inputs) for ``duration_s`` at step ``dt``.  ``faults``: a fault
    schedule (:class:`server.realtime.fault_schedule.FaultSchedule` of this
    plant at the run's step), started over here and cleared at the end.

    A controller with a ``kernel`` on a compiled plant of the friction core
    runs in one compiled loop, with the fault stage if any
    (:class:`plant_models.closed_loop.StagedRun`: no Python per step; the
    same rows bit for bit); ``use_kernel=False`` calls ``update`` instead.
    """
    if every < 1:
        raise ValueError(f"every must be >= 1, got {every}")
    ins = [s.name for s in plant.inputs]
    b = bind_controller(controller, [s.name for s in plant.outputs], ins)
    if faults is not None:
        faults.reset()
    if compiled is None:
        if duration_s is None or dt is None:
            raise ValueError("closed_loop: give a compiled scenario, or duration_s and dt")
        start_status = plant.reset(b.initial)
        compiled = ConstantInputs(plant.u, dt, int(round(duration_s / dt)))
        held, mask = compiled.values.copy(), np.zeros(len(ins), dtype=bool)
        mask[b.owned] = True
    else:
        init, held, mask = closed_loop_start(b, compiled, ins)
        start_status = plant.reset(init)
    n, period, update = compiled.n_steps, b.period_ticks, controller.update
    if use_kernel and getattr(controller, "kernel", None) is not None:
        from plant_models.closed_loop import supports

        if supports(plant):
            return _compiled_closed_loop(plant, compiled, b, held, every, start_status, faults)
    keep = row_steps(n, every)
    Y = np.empty((len(keep), plant.n_out))
    U = np.empty((len(keep), plant.n_in))
    Y[0], U[0] = plant.y, plant.u
    events = plant.new_events()
    stages, updates = _closed_loop_stages(plant, compiled, held, mask, keep, Y, U, update, period, events)
    if faults is not None:
        stages.update(faults.stages())
    step = Stepper(plant, compiled.dt, stages, "closed_loop").step
    status = start_status
    t0 = time.perf_counter()
    for k in range(n):
        status |= step(k)
    updates = updates[0]
    wall = time.perf_counter() - t0
    if faults is not None:
        faults.reset()
    return ClosedLoopResult([s.name for s in plant.outputs], ins, keep.astype(float) * compiled.dt, Y, U, n, every,
                            int(status), int(start_status), events, wall, updates)


def _compiled_closed_loop(plant, compiled, b: Binding, held: np.ndarray, every: int, start_status: int,
                          faults) -> ClosedLoopResult:
    """:func:`closed_loop` with the controller's kernel in the compiled loop (``plant_models.closed_loop``)."""
    from plant_models.closed_loop import StagedRun
    from plant_models.offline import InputTable

    if isinstance(compiled, ConstantInputs):
        table = InputTable(plant.n_in)
        for i, v in enumerate(compiled.values):
            table.set_const(i, float(v))
    else:
        table = compiled.table
    ctl = b.controller
    run = StagedRun(plant, table, compiled.dt, compiled.n_steps, every, faults,
                    (b.owned, held, ctl.kernel, ctl.kernel_state, ctl.kernel_params, b.period_ticks))
    events = plant.new_events()
    t0 = time.perf_counter()
    run.advance()
    wall = time.perf_counter() - t0
    if faults is not None:
        faults.reset()
    rows = run.rows
    return ClosedLoopResult([s.name for s in plant.outputs], [s.name for s in plant.inputs],
                            run.out_step[:rows].astype(float) * compiled.dt, run.out[:rows], run.out_u[:rows],
                            compiled.n_steps, every, run.status_or | int(start_status), int(start_status),
                            events + run.events(), wall, run.updates)


def run_closed_loop(plant: Plant, compiled: CompiledScenario | None, controller: Any, faults=None, every: int = 1,
                    duration_s: float | None = None, dt: float | None = None) -> Trace:
    """:func:`closed_loop` as a :class:`~server.offline.traces.Trace` (the layout of :func:`run_offline`)."""
    r = closed_loop(plant, compiled, controller, faults, every, duration_s, dt)
    return run_trace(plant, r.time, r.outputs, r.events, r.status_or, r.start_status, r.wall_time_s, every, r.steps,
                     plant.events_lost)


__all__ = ["Binding", "ClosedLoopResult", "Controller", "ControllerError", "bind_controller", "closed_loop",
           "closed_loop_start", "ConstantInputs", "load_controller", "row_steps", "run_closed_loop"]
