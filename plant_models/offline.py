"""A whole offline run in compiled code: inputs from tables, the plant's step through its address, outputs into arrays.

An offline run (``gearbox-hil simulate``, a campaign's runs) is, step after
step: write the inputs of step k (values and first-order-hold rates) into
the plant's input ports, step the plant, keep the outputs, collect the
events.  Done from Python, the writing and copying cost more than the
physics (about 1.6-1.9 us a step against a 1-3 us step, ``BENCHMARKS.md``).
Here the whole sequence runs in one compiled loop, :func:`run_steps`:

* the input histories are an :class:`InputTable` (constant, piecewise
  linear, piecewise constant, sine), evaluated inside the loop with the
  sampling rule of :mod:`server.offline.scenario` (the value just after t_k, and
  with a first-order hold the rate (u(t_k+1 -) - u(t_k +)) / dt);
  :func:`fill_inputs` is the same evaluation into a block of rows, which the
  server's scenario playback steps through one tick at a time, so a lockstep
  run and a compiled run write the same inputs bit for bit;
* the plant's step is called through the address of its compiled
  function's C wrapper (:func:`kernel_address`; numba builds one for every
  compiled function, the same wrapper its first-class function types use),
  the habit of the core's entry points (:mod:`plant_models.core.entry`):
  the loop is compiled once for every plant kind, and a plant compiles
  nothing more for it;
* outputs go into a preallocated array, every ``every``-th step (and the
  last), events from the plant's ring log into arrays, and the status words
  are OR-ed.

The loop runs from step ``k0`` until ``k1`` and stops early when the event
arrays could overflow; :class:`Run` drives it in chunks (for a progress
display and to grow the event arrays), which changes nothing in the
results: the plant's state lives in its buffers.

A plant without a compiled step (a Python step: see
:class:`~plant_models.contract.plant.Plant`) runs through
:class:`StepwiseRun`: the same input rows (:func:`fill_inputs`), the same
per-step sequence as the server's lockstep playback, the same outputs and
events, with its step called from Python.  :func:`make_run` picks one.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, types

from .core.api import JIT, L, call_step_at, raw_f, raw_i
from .contract.compiled import CompiledPlant
from .contract.plant import Plant
from .contract.vocabulary import CNT_EVENTS
from .run.stages import python_only_stages
from .run.stepper import Stepper

# -- input tables -------------------------------------------------------------------------------------
TAB_CONST = 0  # one value
TAB_LINEAR = 1  # piecewise linear through [time, value] points, last value held after the last point
TAB_STEPS = 2  # piecewise constant: a point holds until the next (integer inputs)
TAB_SINE = 3  # offset + amplitude sin(omega t + phase)
# columns of the int table, one row per plant input
TI_KIND = 0  # TAB_*
TI_FIRST = 1  # first entry of this input in the float tables
TI_COUNT = 2  # number of points (TAB_LINEAR / TAB_STEPS)
TI_RATE = 3  # 1: the step's rate is the first-order hold's slope; 0: rate 0 (hold, constants, integers)
TI_LEN = 4
# a sine's four numbers in the value table, from TI_FIRST
SINE_OFFSET, SINE_AMPLITUDE, SINE_OMEGA, SINE_PHASE = 0, 1, 2, 3


class InputTable:
    """The input histories of one run, one row per plant input, as arrays the compiled loop evaluates.

    ``kind`` [n_in, TI_LEN] int64 (see ``TI_*``); ``times`` / ``values``
    float64: the points of each input from its ``TI_FIRST`` (times in s,
    values in the input's unit); a constant is one value, a sine four
    (offset, amplitude, angular frequency rad/s, phase rad).  Every input
    starts as a constant at 0; the ``set_*`` methods replace one.
    """

    def __init__(self, n_in: int):
        self.n_in = n_in
        self._rows: list[tuple[int, list[float], list[float], int]] = [(TAB_CONST, [0.0], [0.0], 0)] * n_in

    def set_const(self, i: int, value: float) -> None:
        self._rows[i] = (TAB_CONST, [0.0], [float(value)], 0)

    def set_points(self, i: int, times, values, integer: bool, first_order_hold: bool) -> None:
        """Input ``i`` through [time, value] points: linear between them, or held (``integer``)."""
        kind = TAB_STEPS if integer else TAB_LINEAR
        rate = 1 if (first_order_hold and not integer) else 0
        self._rows[i] = (kind, [float(t) for t in times], [float(v) for v in values], rate)

    def set_sine(self, i: int, offset: float, amplitude: float, frequency_hz: float, phase_rad: float,
                 first_order_hold: bool) -> None:
        omega = 2.0 * math.pi * frequency_hz  # the same rounding as 2.0 * math.pi * f in Python
        self._rows[i] = (TAB_SINE, [0.0] * 4, [float(offset), float(amplitude), omega, float(phase_rad)],
                         1 if first_order_hold else 0)

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(kind, times, values)`` for :func:`fill_inputs` and :func:`run_steps`."""
        kind = np.zeros((self.n_in, TI_LEN), dtype=np.int64)
        times: list[float] = []
        values: list[float] = []
        for i, (k, ts, vs, rate) in enumerate(self._rows):
            kind[i] = (k, len(values), len(vs), rate)
            times += ts
            values += vs
        return kind, np.array(times + [0.0]), np.array(values + [0.0])


# The evaluation below works on raw pointers (plant_models.core.api.raw_f/raw_i): called once per input and
# step from the compiled loops, array arguments cost reference counting at every call (a profile of the WLTC's
# closed loop: 4 % of its time in NRT_incref/NRT_decref).  ``kind`` is the int table row-major, TI_LEN a row.
@njit(**JIT)
def _search(times, first, count, t, right):
    """numpy's searchsorted over ``times[first:first + count]``: the first index whose time is > t
    (``right``) or >= t (not ``right``), counted from ``first``."""
    lo = 0
    hi = count
    while lo < hi:
        mid = (lo + hi) >> 1
        tm = times[first + mid]
        if tm < t or (right and tm == t):
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(**JIT)
def input_value(kind, times, values, i, t, right):
    """Input i at time t: u(t+) when ``right``, else u(t-).  Called in the compiled run."""
    k = kind[i * TI_LEN + TI_KIND]
    first = kind[i * TI_LEN + TI_FIRST]
    if k == TAB_CONST:
        return values[first]
    if k == TAB_SINE:
        return values[first + SINE_OFFSET] + values[first + SINE_AMPLITUDE] * math.sin(
            values[first + SINE_OMEGA] * t + values[first + SINE_PHASE])
    n = kind[i * TI_LEN + TI_COUNT]
    j = _search(times, first, n, t, right)
    if k == TAB_STEPS:  # the last point at or before t (strictly before for u(t-))
        j -= 1
        if j < 0:
            j = 0
        return values[first + j]
    if j == 0:
        return values[first]
    if j >= n:
        return values[first + n - 1]
    t0 = times[first + j - 1]
    t1 = times[first + j]
    v0 = values[first + j - 1]
    w = (t - t0) / (t1 - t0)
    return v0 + w * (values[first + j] - v0)


@njit(**JIT)
def write_inputs(kind, n_in, times, values, dt, k, df, at):
    """The inputs of step k into ``df[at:]`` (values, then the rates), all arguments raw pointers but the sizes.

    Returns whether any value or rate differs from what ``df`` held (bit for
    bit: a NaN always differs).  Called in the compiled run.
    """
    t0 = float(k) * dt
    t1 = (float(k) + 1.0) * dt
    changed = False
    for i in range(n_in):
        rate = kind[i * TI_LEN + TI_RATE] != 0
        if kind[i * TI_LEN + TI_KIND] == TAB_CONST:  # what input_value gives, without the call
            v0 = values[kind[i * TI_LEN + TI_FIRST]]
            r = (v0 - v0) / dt if rate else 0.0
        else:
            v0 = input_value(kind, times, values, i, t0, True)
            r = (input_value(kind, times, values, i, t1, False) - v0) / dt if rate else 0.0
        changed = changed or not (df[at + i] == v0 and df[at + n_in + i] == r)
        df[at + i] = v0
        df[at + n_in + i] = r
    return changed


@njit(**JIT)
def fill_inputs(kind, times, values, dt, k0, U, R):
    """Rows ``k0 .. k0 + len(U) - 1`` of the input values ``U`` and rates ``R`` [steps, n_in].

    The evaluation of :func:`run_steps`, for the server's scenario playback,
    which applies a row per tick.
    """
    n_in = kind.shape[0]
    row = np.empty(2 * n_in)
    pk, pt, pv, prow = raw_i(kind), raw_f(times), raw_f(values), raw_f(row)
    for j in range(U.shape[0]):
        write_inputs(pk, n_in, pt, pv, dt, k0 + j, prow, 0)
        for i in range(n_in):
            U[j, i] = row[i]
            R[j, i] = row[n_in + i]


# -- the run ------------------------------------------------------------------------------------------
# the argument types of a plant step, (mf, mi, df, di, dt) (see plant_models.friction_plant.STEP_SIGNATURE)
STEP_ARGS = (types.float64[::1], types.int64[::1], types.float64[::1], types.int64[::1], types.float64)
# where things are, for run_steps: an int64 array
LAY_IN = 0  # index in df of input 0 (the rates follow)
LAY_OUT = 1  # index in df of output 0
LAY_N_OUT = 2  # number of outputs
LAY_EVERY = 3  # keep the outputs of every N-th step
LAY_LAST = 4  # the last step of the run (its outputs are always kept)
LAY_EV_TIME = 5  # the plant's event ring log: index in df of the times
LAY_EV_SOURCE = 6  # index in di of the sources (rows)
LAY_EV_KIND = 7  # index in di of the kinds
LAY_EV_COUNT = 8  # index in di of the count of events logged
LAY_EV_CAP = 9  # capacity of the ring
LAY_HINTS = 10  # index in di of the plant's run-hints word, -1: none (CompiledPlant.run_hints_slot)
LAY_LEN = 11
# what run_steps carries from one call to the next: an int64 array
ACC_ROWS = 0  # output rows written
ACC_EV_READ = 1  # the plant's event count read so far
ACC_EVENTS = 2  # events collected
ACC_LOST = 3  # events overwritten in the ring before they were read
ACC_STATUS = 4  # OR of every step's status word
ACC_LEN = 5


@njit(**JIT)
def run_steps(step_at, mf, mi, df, di, kind, times, values, dt, k0, k1, lay, acc, out, out_step, ev_time, ev_source,
              ev_kind):
    """Steps ``k0 .. k1 - 1`` of a run; returns the next step to take (k1, or earlier when the event arrays are full).

    ``step_at`` is the address of the plant's compiled step (:func:`kernel_address`);
    ``lay`` says where the ports and the event log are (``LAY_*``), ``acc``
    carries the counts between calls (``ACC_*``).  The outputs after step k
    go into row ``acc[ACC_ROWS]`` of ``out`` (and k + 1 into ``out_step``)
    when k + 1 is a multiple of ``lay[LAY_EVERY]`` or the last step.  Events
    go into ``ev_*``; the loop stops before a step when fewer than the ring's
    capacity of places are left.  Before each step it writes the plant's
    run hints (:func:`run_hints`), which it clears before it returns.
    """
    at_in = lay[LAY_IN]
    at_out = lay[LAY_OUT]
    n_out = lay[LAY_N_OUT]
    every = lay[LAY_EVERY]
    last = lay[LAY_LAST]
    t_at = lay[LAY_EV_TIME]
    src_at = lay[LAY_EV_SOURCE]
    kind_at = lay[LAY_EV_KIND]
    count_at = lay[LAY_EV_COUNT]
    cap = lay[LAY_EV_CAP]
    hints_at = lay[LAY_HINTS]
    status = acc[ACC_STATUS]
    n_in = kind.shape[0]
    pk, pt, pv, pdf, pdi = raw_i(kind), raw_f(times), raw_f(values), raw_f(df), raw_i(di)
    next_row = (k0 // every + 1) * every  # the next step count with a row: counted, not divided at every step
    for k in range(k0, k1):
        if acc[ACC_EVENTS] + cap > ev_time.shape[0]:
            acc[ACC_STATUS] = status
            return end_call(pdi, hints_at, k)
        changed = write_inputs(pk, n_in, pt, pv, dt, k, pdf, at_in)
        row = k + 1 == next_row or k + 1 == last
        if k + 1 == next_row:
            next_row += every
        if hints_at >= 0:
            pdi[hints_at] = run_hints(k, k0, row or k + 1 == k1, not changed)
        status |= call_step_at(step_at, mf, mi, df, di, dt)
        total = pdi[count_at]
        if total != acc[ACC_EV_READ]:
            first = max(acc[ACC_EV_READ], total - cap)
            acc[ACC_LOST] += first - acc[ACC_EV_READ]
            m = acc[ACC_EVENTS]
            for q in range(first, total):
                slot = q % cap
                ev_time[m] = df[t_at + slot]
                ev_source[m] = di[src_at + slot]
                ev_kind[m] = di[kind_at + slot]
                m += 1
            acc[ACC_EVENTS] = m
            acc[ACC_EV_READ] = total
        if row:
            r = acc[ACC_ROWS]
            for j in range(n_out):
                out[r, j] = df[at_out + j]
            out_step[r] = k + 1
            acc[ACC_ROWS] = r + 1
    acc[ACC_STATUS] = status
    return end_call(pdi, hints_at, k1)


@njit(**JIT)
def run_hints(k, k0, read, same_inputs):
    """The run hints (``L.RUN_*``) for step k of a call that started at step k0; ``read``: its outputs are read;
    ``same_inputs``: its inputs are the previous step's, bit for bit, and no fault stage acts on them.

    The model floats, and the inputs when they are the same, count as the
    previous step's from the call's second step on (Python may change them,
    and the plant's data, between calls; the steps change none).
    """
    unread = 0 if read else L.RUN_OUTPUTS_UNREAD
    if k == k0:
        return unread
    return L.RUN_MODEL_SAME | unread | (L.RUN_INPUTS_SAME if same_inputs else 0)


@njit(**JIT)
def end_call(di, hints_at, k):
    """End a compiled run's call before step k: the plant's run hints cleared (a step taken after the call
    gets none).  Returns k."""
    if hints_at >= 0:
        di[hints_at] = 0
    return k


def kernel_address(dispatcher) -> int:
    """Address of the C wrapper numba built for a compiled function (its one signature).

    The wrapper takes the arguments by value (arrays as numba's array
    structures) and returns the result, so :func:`run_steps` calls it like
    the function itself.
    """
    signatures = dispatcher.signatures
    if len(signatures) != 1:
        raise ValueError(f"{dispatcher.__name__} must be compiled for exactly one signature, has {len(signatures)}")
    cres = dispatcher.overloads[signatures[0]]
    # run_steps calls it with these types: anything else would be read as them
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
        self._step_at = kernel_address(plant.compiled["step"])
        t_at, src_at, kind_at, count_at, cap = plant.event_log()
        self.lay = np.array([plant.input_offset, plant.output_offset, plant.n_out, self.every, self.n_steps,
                             t_at, src_at, kind_at, count_at, cap, plant.run_hints_slot()], dtype=np.int64)
        self.acc = np.zeros(ACC_LEN, dtype=np.int64)
        self.acc[ACC_EV_READ] = plant.di[count_at]
        self.buffered, self.out, self.out_step = output_buffer(plant, self.n_steps, self.every, buffer_rows)
        self.acc[ACC_ROWS] = 1
        self._ev_time = np.empty(max(64, 2 * cap))
        self._ev_source = np.empty(self._ev_time.shape[0], dtype=np.int64)
        self._ev_kind = np.empty(self._ev_time.shape[0], dtype=np.int64)

    @property
    def done(self) -> bool:
        return self.k >= self.n_steps

    def advance(self, steps: int | None = None) -> int:
        """Take the next ``steps`` steps (all that remain by default); returns the steps taken so far."""
        k1 = self.n_steps if steps is None else min(self.n_steps, self.k + int(steps))
        if self.buffered:  # no more steps than rows left (a row per every-th step and one for the last)
            k1 = min(k1, self.k + (self.out.shape[0] - self.rows - 1) * self.every)
        p = self.plant
        while self.k < k1:
            self.k = int(run_steps(self._step_at, p.mf, p.mi, p.df, p.di, self.kind, self.times, self.values, self.dt,
                                   self.k, k1, self.lay, self.acc, self.out, self.out_step, self._ev_time,
                                   self._ev_source, self._ev_kind))
            if self.k < k1:  # the event arrays are nearly full: twice the room, and on
                n = 2 * self._ev_time.shape[0]
                self._ev_time = np.resize(self._ev_time, n)
                self._ev_source = np.resize(self._ev_source, n)
                self._ev_kind = np.resize(self._ev_kind, n)
        if self.done:
            p.mark_events_read()
        return self.k

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
        raw = zip(self._ev_time[:n].tolist(), self._ev_source[:n].tolist(), self._ev_kind[:n].tolist())
        return self.plant.name_events(list(raw))


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
    inputs back).  The compiled :class:`Run` has no fault stage:
    :func:`make_run` gives a run with faults this class.
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
    of the run pipeline that every mode builds in Python
    (:func:`plant_models.run.stages.python_only_stages`), the run is a
    :class:`StepwiseRun` for any plant: the stages run around each step as
    the real-time tick runs them.
    """
    if faults is not None or python_only_stages() or not isinstance(plant, CompiledPlant):
        return StepwiseRun(plant, table, dt, n_steps, every, buffer_rows, faults)
    return Run(plant, table, dt, n_steps, every, buffer_rows)


def warm_up() -> None:
    """Compile (or load from numba's cache) this module's compiled functions, taking no step."""
    kind, times, values = InputTable(1).arrays()
    fill_inputs(kind, times, values, 1e-3, 0, np.empty((1, 1)), np.empty((1, 1)))
    f, i = np.zeros(1), np.zeros(1, dtype=np.int64)
    lay = np.ones(LAY_LEN, dtype=np.int64)
    run_steps(0, f, i, f, i, kind, times, values, 1e-3, 0, 0, lay, np.zeros(ACC_LEN, dtype=np.int64),
              np.empty((1, 1)), i, f, i, i)  # k0 = k1: compiles, steps nothing


__all__ = ["InputTable", "Run", "StepwiseRun", "end_call", "fill_inputs", "input_value", "kernel_address", "make_run",
           "output_rows", "run_hints", "run_steps", "warm_up", "write_inputs"]
