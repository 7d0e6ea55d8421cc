"""A whole offline run in compiled code: the run pipeline's compiled stages and the plant's step, n steps a call.

An offline run (``gearbox-hil simulate``, a campaign's runs) is, step after
step, the stages of the run pipeline (:mod:`plant_models.run.stages`)
around the plant's step: the inputs of step k (values and first-order-hold
rates) into the plant's input ports, the step, the events collected, the
outputs kept.  Done from Python, the writing and copying cost more than the
physics (about 1.6-1.9 us a step against a 1-3 us step, ``BENCHMARKS.md``).
Here :class:`Run` takes whole chunks of steps in one compiled call,
:func:`plant_models.run.offline_compiled.run_compiled`: the loop the
real-time tick's stages run in, over the stages' compiled forms
(:mod:`plant_models.offline_stages`: the input table's ``inputs``
(:mod:`plant_models.input_table`), ``events``, ``row``; any stage the list
declares with a compiled form), in the order of the stage list:

* the plant's step is called through the address of its compiled
  function's C wrapper (:func:`kernel_address`; numba builds one for every
  compiled function, the same wrapper its first-class function types use),
  the habit of the core's entry points (:mod:`plant_models.core.entry`):
  the loop is compiled once for every plant kind, and a plant compiles
  nothing more for it;
* outputs go into a preallocated array, every ``every``-th step (and the
  last), events from the plant's ring log into arrays, and the status words
  are OR-ed.

A call runs from step ``k0`` until ``k1`` and stops early when the event
arrays could overflow; :class:`Run` drives it in chunks (for a progress
display and to grow the event arrays), which changes nothing in the
results: the plant's state lives in its buffers.

A plant without a compiled step (a Python step: see
:class:`~plant_models.contract.plant.Plant`), a fault schedule, or a stage
of the list with a Python form only runs through :class:`StepwiseRun`: the
same input rows (:func:`fill_inputs`), the same stages through the Python
stepper, the same outputs and events.  :func:`make_run` picks one.  The
fault schedule's compiled run is :class:`plant_models.closed_loop.StagedRun`.
"""

from __future__ import annotations

import numpy as np
from numba import types

from .contract.compiled import CompiledPlant
from .contract.plant import Plant
from .contract.vocabulary import CNT_EVENTS
from .input_table import (SINE_AMPLITUDE, SINE_OFFSET, SINE_OMEGA, SINE_PHASE, TAB_CONST, TAB_LINEAR, TAB_SINE,
                          TAB_STEPS, TI_COUNT, TI_FIRST, TI_KIND, TI_LEN, TI_RATE, InputTable, fill_inputs,
                          input_value, write_inputs)
from .run import offline_compiled
from .run.offline_compiled import (ACC_EV_READ, ACC_EVENTS, ACC_LEN, ACC_LOST, ACC_ROWS, ACC_STATUS, OfflinePlan,
                                   compiled_run_possible, end_call, run_hints)
from .run.stepper import Stepper

# -- the run ------------------------------------------------------------------------------------------
# The stages' compiled forms (plant_models.offline_stages) are imported when a run is made: they compile when they
# load, and a server that imports this module for kernel_address compiles none of them.
# the argument types of a plant step, (mf, mi, df, di, dt) (see plant_models.friction_plant.STEP_SIGNATURE)
STEP_ARGS = (types.float64[::1], types.int64[::1], types.float64[::1], types.int64[::1], types.float64)


def kernel_address(dispatcher) -> int:
    """Address of the C wrapper numba built for a compiled function (its one signature).

    The wrapper takes the arguments by value (arrays as numba's array
    structures) and returns the result, so the compiled run
    (:func:`plant_models.run.offline_compiled.run_compiled`) and the tick
    (:func:`plant_models.run.compiled.tick_run`) call it like the function itself.
    """
    signatures = dispatcher.signatures
    if len(signatures) != 1:
        raise ValueError(f"{dispatcher.__name__} must be compiled for exactly one signature, has {len(signatures)}")
    cres = dispatcher.overloads[signatures[0]]
    # the compiled loops call it with these types: anything else would be read as them
    if (tuple(signatures[0]) != STEP_ARGS or cres.signature.return_type != types.int64):
        raise TypeError(f"{dispatcher.__name__} is compiled as {cres.signature}; a plant step must be "
                        f"int64{STEP_ARGS}")
    return int(cres.library.get_pointer_to_function(cres.fndesc.llvm_cfunc_wrapper_name))


def output_rows(n_steps: int, every: int) -> int:
    """Rows of a run's outputs: t = 0, every ``every``-th step, and the last step."""
    return 1 + n_steps // every + (1 if n_steps % every else 0)


def output_buffer(plant: Plant, n_steps: int, every: int, buffer_rows: int | None):
    """(buffered, out, out_step) for a run: all of its output rows, or ``buffer_rows`` of them (at least
    two) when that is fewer; row 0 holds the plant's outputs at step 0."""
    rows = output_rows(n_steps, every)
    buffered = buffer_rows is not None and buffer_rows < rows
    out = np.empty((max(2, int(buffer_rows)) if buffered else rows, plant.n_out))
    out_step = np.empty(out.shape[0], dtype=np.int64)
    out[0] = plant.y
    out_step[0] = 0
    return buffered, out, out_step


class CompiledCounters:
    """The counters a compiled run keeps in its accumulator array ``acc`` (indices ``ACC_*``)."""

    acc: np.ndarray

    @property
    def rows(self) -> int:
        """Output rows written and not yet taken."""
        return int(self.acc[ACC_ROWS])

    @property
    def status_or(self) -> int:
        """OR of every step's status word so far."""
        return int(self.acc[ACC_STATUS])

    @property
    def events_lost(self) -> int:
        """Events overwritten in the plant's ring before the run read them."""
        return int(self.acc[ACC_LOST])


class Run(CompiledCounters):
    """A whole run of a plant, after its reset, through an :class:`InputTable`, in compiled chunks.

    ``out`` [rows, n_out] holds the outputs at t = 0 (the plant's outputs
    when the run was made) and after every ``every``-th step and the last;
    ``out_step`` the step count of each row.  :meth:`advance` takes the next
    steps; :meth:`events` names the events collected (see
    :meth:`Plant.name_events`).  With ``buffer_rows`` the output arrays
    hold that many rows (at least 2) and are emptied by :meth:`take_rows`:
    :meth:`advance` then stops where the buffer is full, so a run of any
    length is written out in chunks with bounded memory.

    The steps are :attr:`plan` (:class:`plant_models.run.offline_compiled.OfflinePlan`):
    the compiled ``inputs``, ``events`` and ``row`` stages, and any stage
    the list declares with a compiled form, around the plant's step.
    """

    def __init__(self, plant: CompiledPlant, table: InputTable, dt: float, n_steps: int, every: int = 1,
                 buffer_rows: int | None = None):
        if every < 1:
            raise ValueError(f"every must be >= 1, got {every}")
        if not isinstance(plant, CompiledPlant):
            raise TypeError(f"the compiled run needs a plant with a compiled step; {plant.kind} has a Python step "
                            "(use StepwiseRun, or make_run)")
        self.plant = plant
        self.dt = float(dt)
        self.n_steps = int(n_steps)
        self.every = int(every)
        self.k = 0
        self.kind, self.times, self.values = table.arrays()
        if self.kind.shape[0] != plant.n_in:
            raise ValueError(f"the input table has {self.kind.shape[0]} rows, the plant {plant.n_in} inputs")
        self.acc = np.zeros(ACC_LEN, dtype=np.int64)
        self.acc[ACC_EV_READ] = plant.di[plant.event_log()[3]]
        self.buffered, self.out, self.out_step = output_buffer(plant, self.n_steps, self.every, buffer_rows)
        self.acc[ACC_ROWS] = 1
        cap = plant.event_log()[4]
        self._ev = [np.empty(max(64, 2 * cap)), np.empty(max(64, 2 * cap), dtype=np.int64),
                    np.empty(max(64, 2 * cap), dtype=np.int64)]
        self._next_row = np.zeros(1, dtype=np.int64)
        from .offline_stages import events, rows, table_inputs  # compiled forms: loaded with the first run

        ev_stage, room = events(plant, self.acc, self._ev)
        implementations = {"inputs": table_inputs(self.kind, self.times, self.values, plant.df, plant.input_offset),
                           "events": ev_stage,
                           "row": rows(plant, self.acc, self.out, self.out_step, None, self.every, self.n_steps,
                                       self._next_row)}
        self.plan = OfflinePlan(kernel_address(plant.compiled["step"]), plant, self.dt, implementations,
                                self.acc[ACC_STATUS:ACC_STATUS + 1], self.every, self.n_steps, room=room)

    @property
    def done(self) -> bool:
        return self.k >= self.n_steps

    def advance(self, steps: int | None = None) -> int:
        """Take the next ``steps`` steps (all that remain by default); returns the steps taken so far."""
        k1 = self.n_steps if steps is None else min(self.n_steps, self.k + int(steps))
        if self.buffered:  # no more steps than rows left (a row per every-th step and one for the last)
            k1 = min(k1, self.k + (self.out.shape[0] - self.rows - 1) * self.every)
        self.k = run_chunks(self, k1)
        if self.done:
            self.plant.mark_events_read()
        return self.k

    def begin_call(self, k: int) -> None:
        """Before a call from step k: the row stage's next row."""
        self._next_row[0] = (k // self.every + 1) * self.every

    def snapshot(self) -> dict:
        """The run's position and the plant's whole state (model floats included), for :meth:`restore`."""
        df, di = self.plant.get_state()
        return {"format": 1, "k": self.k, "acc": self.acc.copy(), "mf": self.plant.mf.copy(), "df": df, "di": di}

    def restore(self, snap: dict) -> None:
        """Go back to a :meth:`snapshot` of this run: the next :meth:`advance` continues bit-exactly from there.

        Output rows and events after the snapshot are overwritten by the steps taken again.
        """
        self.plant.mf[:] = snap["mf"]
        self.plant.set_state((snap["df"], snap["di"]))
        self.acc[:] = snap["acc"]
        self.k = int(snap["k"])

    def take_rows(self) -> tuple[np.ndarray, np.ndarray]:
        """``(out_step, out)`` of the rows written since the last call (copies); the buffer is empty after."""
        r = self.rows
        taken = self.out_step[:r].copy(), self.out[:r].copy()
        self.acc[ACC_ROWS] = 0
        return taken

    def events(self) -> list[dict]:
        """The events collected so far, named by the plant (time, clutch, row, type)."""
        n = int(self.acc[ACC_EVENTS])
        raw = zip(self._ev[0][:n].tolist(), self._ev[1][:n].tolist(), self._ev[2][:n].tolist())
        return self.plant.name_events(list(raw))


def run_chunks(run, k1: int) -> int:
    """Steps ``run.k .. k1 - 1`` of a compiled run (``run.plan``, ``run.acc``, ``run._ev``,
    ``run.begin_call(k)``); returns k1.  Where the room check stops a call (the event arrays nearly full) the arrays
    get twice the room and the run goes on."""
    k = run.k
    while k < k1:
        run.begin_call(k)
        k = run.plan.run(k, k1)
        if k < k1:
            event_room(run, 2 * run._ev[0].shape[0])
    return k


def event_room(run, n: int) -> None:
    """Resize a compiled run's event arrays to ``n`` places (the events collected kept) and point its ``events``
    stage and room check at them."""
    from .offline_stages import events

    run._ev = [np.resize(a, n) for a in run._ev]
    stage, room = events(run.plant, run.acc, run._ev)
    run.plan.replace(stage)
    run.plan.set_room(*room)

class StepwiseRun:
    """A whole run of a plant whose step is not compiled, after its reset: :class:`Run`'s results, a step at a time.

    Each step is the run pipeline's stages (:class:`plant_models.run.stepper.Stepper`,
    the server tick's stepper): the inputs of :func:`fill_inputs` (the rows
    the server's scenario playback applies), ``plant.step(dt)``, the events
    and the outputs kept as :class:`Run` keeps them, so the trace of a
    Python-step plant has the same rows, events and status as its lockstep
    run, bit for bit.  Same attributes and methods as :class:`Run`
    (``snapshot``/``restore`` aside).

    ``faults``, if given, is a fault schedule
    (:class:`plant_models.run.schedule.FaultSchedule`): its ``switch`` stage
    and fault stages run as in the tick (the faulted inputs before the step,
    the faulted outputs after it, which the kept row shows, the commanded
    inputs back).  :func:`make_run` gives a run with faults this class; the
    compiled run with a fault schedule is
    :class:`plant_models.closed_loop.StagedRun`.
    """

    BLOCK = 256  # input rows evaluated at a time

    def __init__(self, plant: Plant, table: InputTable, dt: float, n_steps: int, every: int = 1,
                 buffer_rows: int | None = None, faults=None):
        if every < 1:
            raise ValueError(f"every must be >= 1, got {every}")
        self.plant = plant
        self.dt = float(dt)
        self.n_steps = int(n_steps)
        self.every = int(every)
        self.k = 0
        self.faults = faults
        self.kind, self.times, self.values = table.arrays()
        if self.kind.shape[0] != plant.n_in:
            raise ValueError(f"the input table has {self.kind.shape[0]} rows, the plant {plant.n_in} inputs")
        self.buffered, self.out, self.out_step = output_buffer(plant, self.n_steps, self.every, buffer_rows)
        self._rows = 1
        self._U = np.empty((self.BLOCK, plant.n_in))
        self._R = np.empty((self.BLOCK, plant.n_in))
        self._k0 = -self.BLOCK
        self._status = 0
        self._events: list[dict] = []
        self._seen = plant.events_logged
        self._lost0 = plant.events_lost
        stages = {"inputs": self._inputs, "events": self._collect, "row": self._row}
        if faults is not None:
            stages.update(faults.stages())
        self.stepper = Stepper(plant, self.dt, stages, "offline")

    @property
    def done(self) -> bool:
        return self.k >= self.n_steps

    def _inputs(self, k: int) -> None:
        """Stage ``inputs``: row k of the input table (evaluated :attr:`BLOCK` rows at a time)."""
        j = k - self._k0
        if not 0 <= j < self.BLOCK:
            self._k0 = k
            fill_inputs(self.kind, self.times, self.values, self.dt, k, self._U, self._R)
            j = 0
        self._u[:] = self._U[j]
        self._u_rate[:] = self._R[j]

    def _collect(self, k: int) -> None:
        """Stage ``events``: the events the plant logged in the step."""
        if self._counters[CNT_EVENTS] != self._seen:
            self._events.extend(self.plant.new_events())
            self._seen = int(self._counters[CNT_EVENTS])

    def _row(self, k: int) -> None:
        """Stage ``row``: the outputs after step k, when k + 1 is a multiple of ``every`` or the last step."""
        if (k + 1) % self.every == 0 or k + 1 == self.n_steps:
            self.out[self._rows] = self._y
            self.out_step[self._rows] = k + 1
            self._rows += 1

    def advance(self, steps: int | None = None) -> int:
        """Take the next ``steps`` steps (all that remain by default); returns the steps taken so far."""
        k1 = self.n_steps if steps is None else min(self.n_steps, self.k + int(steps))
        p = self.plant
        self._u, self._u_rate, self._y, self._counters = p.u, p.u_rate, p.y, p.counters  # views taken once a call
        step = self.stepper.step
        full = self.out.shape[0]
        while self.k < k1:
            self._status |= step(self.k)
            self.k += 1
            if self._rows == full:
                break  # a buffered run's rows are full: the caller takes them (take_rows) and goes on
        return self.k

    def take_rows(self) -> tuple[np.ndarray, np.ndarray]:
        """``(out_step, out)`` of the rows written since the last call (copies); the buffer is empty after."""
        r = self._rows
        taken = self.out_step[:r].copy(), self.out[:r].copy()
        self._rows = 0
        return taken

    @property
    def status_or(self) -> int:
        return int(self._status)

    @property
    def events_lost(self) -> int:
        return self.plant.events_lost - self._lost0

    @property
    def rows(self) -> int:
        return self._rows

    def events(self) -> list[dict]:
        """The events collected so far, named by the plant (time, clutch, row, type)."""
        return list(self._events)


def make_run(plant: Plant, table: InputTable, dt: float, n_steps: int, every: int = 1,
             buffer_rows: int | None = None, faults=None) -> Run | StepwiseRun:
    """The compiled :class:`Run` for a plant with a compiled step, else a :class:`StepwiseRun`.

    With a fault schedule (``faults``, see :class:`StepwiseRun`), or a stage
    of the run pipeline that every mode builds in Python and that has no
    compiled form (:func:`plant_models.run.offline_compiled.compiled_run_possible`),
    the run is a :class:`StepwiseRun` for any plant: the stages run around
    each step as the real-time tick runs them.
    """
    if faults is not None or not compiled_run_possible() or not isinstance(plant, CompiledPlant):
        return StepwiseRun(plant, table, dt, n_steps, every, buffer_rows, faults)
    return Run(plant, table, dt, n_steps, every, buffer_rows)


def warm_up() -> None:
    """Compile (or load from numba's cache) this module's compiled functions, taking no step (the stages'
    compiled forms are compiled when their module loads)."""
    from . import offline_stages  # noqa: F401  (its cfuncs compile, or load from the cache, as it loads)
    from .run import fault_tables  # noqa: F401  (the fault stages' compiled forms, for a run with faults)

    kind, times, values = InputTable(1).arrays()
    fill_inputs(kind, times, values, 1e-3, 0, np.empty((1, 1)), np.empty((1, 1)))
    offline_compiled.warm_up()


__all__ = ["InputTable", "Run", "StepwiseRun", "end_call", "fill_inputs", "input_value", "kernel_address", "make_run",
           "event_room", "output_rows", "run_chunks", "run_hints", "warm_up", "write_inputs"]
