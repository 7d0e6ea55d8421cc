"""Compiled runs with a fault stage and a controller's kernel: no Python per step.

:class:`plant_models.offline.Run` is an open-loop run in one compiled loop.
:func:`run_staged_steps` is the same loop with two more stages, each
optional:

* a **fault schedule**'s stage around the step, as the real-time tick has
  it: the faulted inputs before the step, the faulted outputs and the
  commanded inputs back after it (the compiled functions of
  ``plant_models/run/fault_tables.py``, handed in by the schedule); :class:`StagedRun` takes the steps in
  chunks between the schedule's switch times and makes each switch between
  two chunks, as a lockstep server's ``fault_set`` between two ticks;
* a **controller's kernel** (the controller interface,
  ``server/offline/controller.py``): the closed-loop inputs (the table's
  values for the inputs the controller does not own, its commands for those
  it owns, every rate 0) and after every ``period``-th step
  ``kernel(t_s, y, u, state, params)`` on copies of the outputs and inputs,
  its commands taken from the owned places.

The same floats in the same order as the Python step loops
(:class:`plant_models.offline.StepwiseRun` with a schedule,
:func:`server.offline.controller.closed_loop` through ``update``), so the
rows are the same bit for bit.  The kernel and the fault functions are
arguments of the loop (first-class functions), so the loop is compiled once
per combination in a process (not cached); the plant's step is called
through its address as in :class:`~plant_models.offline.Run`.  A kernel
needs a plant on the friction core (its time is a slot of ``df``).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .contract.compiled import CompiledPlant
from .core.api import JIT, L, call_step_at, raw_f, raw_i
from .run.stages import python_only_stages
from .offline import (ACC_EV_READ, ACC_EVENTS, ACC_LEN, ACC_LOST, ACC_ROWS, ACC_STATUS, LAY_EV_CAP, LAY_EV_COUNT,
                      LAY_EV_KIND, LAY_EV_SOURCE, LAY_EV_TIME, LAY_EVERY, LAY_IN, LAY_LAST, LAY_LEN, LAY_N_OUT,
                      LAY_OUT, LAY_HINTS, TAB_CONST, TI_FIRST, TI_KIND, TI_LEN, CompiledCounters, InputTable, end_call,
                      input_value, kernel_address, run_hints, write_inputs,
                      output_buffer)

LAY_TIME = LAY_LEN  # index in df of the plant's time, s
LAY_PERIOD = LAY_LEN + 1  # the kernel is called after every N-th step (0: no controller)
LAY_CLOSED = LAY_LEN + 2  # 1: closed-loop inputs (every rate 0, the owned inputs from the commands)
LAY_HELD_ONLY = LAY_LEN + 3  # 1: closed, and every input the controller does not own a constant: the inputs move
#                              only when the controller commands (at a call), so between calls they are not rewritten
LAY_STAGED = LAY_LEN + 4

LOOP_JIT = {k: v for k, v in JIT.items() if k != "cache"}  # compiled per kernel and fault stage: nothing to cache


@njit(**JIT)
def no_kernel(t_s, y, u, state, params):
    """The kernel of a run without a controller (never called: its period is 0)."""


@njit(**JIT)
def no_stage(fi, ff, df, n):
    """The fault stage of a run without a fault schedule (never called: its row count is 0)."""


@njit(**JIT)
def _inputs(kind, times, values, dt, k, df, at_in, n_in, closed, owned, held):
    """The inputs of step k: the table's; closed loop: every rate 0 and the owned inputs' commands.

    ``owned[i]`` 1 for an input the controller commands.  Arrays as raw
    pointers (see plant_models.offline.write_inputs).  Closed, the values
    are those :func:`~plant_models.offline.write_inputs` gives (a table's
    rate is not evaluated: it is 0).  Returns whether any value or rate
    differs from the previous step's (as ``write_inputs``).
    """
    if not closed:
        return write_inputs(kind, n_in, times, values, dt, k, df, at_in)
    t0 = float(k) * dt
    changed = False
    for i in range(n_in):
        if owned[i] != 0:
            v = held[i]
        elif kind[i * TI_LEN + TI_KIND] == TAB_CONST:
            v = values[kind[i * TI_LEN + TI_FIRST]]
        else:
            v = input_value(kind, times, values, i, t0, True)
        changed = changed or not (df[at_in + i] == v and df[at_in + n_in + i] == 0.0)
        df[at_in + i] = v
        df[at_in + n_in + i] = 0.0
    return changed


@njit(**JIT)
def _collect(df, di, lay, acc, ev_time, ev_source, ev_kind):
    """The events the plant logged in the step into the event arrays (raw pointers but the event arrays)."""
    total = di[lay[LAY_EV_COUNT]]
    if total != acc[ACC_EV_READ]:
        cap = lay[LAY_EV_CAP]
        first = max(acc[ACC_EV_READ], total - cap)
        acc[ACC_LOST] += first - acc[ACC_EV_READ]
        m = acc[ACC_EVENTS]
        for q in range(first, total):
            slot = q % cap
            ev_time[m] = df[lay[LAY_EV_TIME] + slot]
            ev_source[m] = di[lay[LAY_EV_SOURCE] + slot]
            ev_kind[m] = di[lay[LAY_EV_KIND] + slot]
            m += 1
        acc[ACC_EVENTS] = m
        acc[ACC_EV_READ] = total


@njit(**LOOP_JIT)
def run_staged_steps(kernel, f_in, f_out, f_restore, fi, ff, nf, step_at, mf, mi, df, di, kind, times, values, dt,
                     k0, k1, lay, acc, out, out_u, out_step, ev_time, ev_source, ev_kind, owned, owned_mask, held, ybuf,
                     ubuf,
                     kstate, kparams):
    """Steps ``k0 .. k1 - 1``; returns the next step (k1, or earlier when the event arrays are full).

    Per step: the inputs (:func:`_inputs`), with ``nf`` fault rows the
    faulted inputs (``f_in``), the plant's step through its address, the
    faulted outputs (``f_out``) and the commanded inputs back
    (``f_restore``), the events, the row (outputs as the sensors report
    them, the commanded inputs), and after every ``lay[LAY_PERIOD]``-th step
    the kernel on copies of the outputs and inputs, its commands taken from
    the owned places into ``held``.  Without fault rows, the plant may skip
    the outputs of a step that neither a row nor the kernel reads (see
    :func:`plant_models.offline.run_steps`).
    """
    at_in = lay[LAY_IN]
    at_out = lay[LAY_OUT]
    n_out = lay[LAY_N_OUT]
    n_in = ubuf.shape[0]
    every = lay[LAY_EVERY]
    period = lay[LAY_PERIOD]
    closed = lay[LAY_CLOSED] != 0
    held_only = closed and lay[LAY_HELD_ONLY] != 0
    rewrite = True  # a call's first step writes every input (Python may have changed them between calls)
    hints_at = lay[LAY_HINTS]
    status = acc[ACC_STATUS]
    pk, pt, pv, pdf, pdi = raw_i(kind), raw_f(times), raw_f(values), raw_f(df), raw_i(di)
    pmask, pheld, play, pacc = raw_i(owned_mask), raw_f(held), raw_i(lay), raw_i(acc)
    # the next step counts (k + 1) with a row and with a kernel call: counted, not divided (two 64-bit divisions
    # a step were a few per cent of the 8HP car's step)
    next_row = (k0 // every + 1) * every
    next_call = (k0 // period + 1) * period if period > 0 else -1
    for k in range(k0, k1):
        if acc[ACC_EVENTS] + lay[LAY_EV_CAP] > ev_time.shape[0]:
            acc[ACC_STATUS] = status
            return end_call(pdi, hints_at, k)
        if rewrite or nf or not held_only:
            changed = _inputs(pk, pt, pv, dt, k, pdf, at_in, n_in, closed, pmask, pheld)
            rewrite = False
        else:
            changed = False  # no command since the last step, every other input a constant: all as written
        row = k + 1 == next_row or k + 1 == lay[LAY_LAST]
        call = k + 1 == next_call
        if hints_at >= 0:  # a fault stage (nf > 0) acts on every step's inputs and outputs
            pdi[hints_at] = run_hints(k, k0, nf > 0 or row or call or k + 1 == k1, nf == 0 and not changed)
        if nf:
            f_in(fi, ff, df, nf)
        status |= call_step_at(step_at, mf, mi, df, di, dt)
        if nf:
            f_out(fi, ff, df, nf)
            f_restore(fi, ff, df, nf)
        if pdi[play[LAY_EV_COUNT]] != pacc[ACC_EV_READ]:  # an event: a call with arrays, and its reference counts
            _collect(pdf, pdi, play, pacc, ev_time, ev_source, ev_kind)
        if k + 1 == next_row:
            next_row += every
        if row:
            r = acc[ACC_ROWS]
            for j in range(n_out):
                out[r, j] = df[at_out + j]
            for i in range(n_in):
                out_u[r, i] = df[at_in + i]
            out_step[r] = k + 1
            acc[ACC_ROWS] = r + 1
        if call:
            next_call += period
            for j in range(n_out):
                ybuf[j] = df[at_out + j]
            for i in range(n_in):
                ubuf[i] = df[at_in + i]
            kernel(df[lay[LAY_TIME]], ybuf, ubuf, kstate, kparams)
            for j in range(owned.shape[0]):
                held[owned[j]] = ubuf[owned[j]]
            rewrite = True
    acc[ACC_STATUS] = status
    return end_call(pdi, hints_at, k1)


def supports(plant, kernel: bool = True) -> bool:
    """Whether :class:`StagedRun` can run ``plant``: a compiled step (on the friction core, for a kernel), and no
    stage of the run pipeline that only Python runs (:func:`plant_models.run.stages.python_only_stages`)."""
    return (isinstance(plant, CompiledPlant) and (not kernel or getattr(plant, "core", None) is not None)
            and not python_only_stages())


class StagedRun(CompiledCounters):
    """A whole run in compiled chunks with a fault schedule and/or a controller's kernel, after the plant's reset.

    Parameters
    ----------
    plant, table, dt, n_steps, every
        As :class:`plant_models.offline.Run`.
    faults
        A fault schedule (:class:`plant_models.run.schedule.FaultSchedule`:
        ``switch(k)``, ``next_step``, ``n_signal``, ``fi``, ``ff`` and
        ``stage``, its three compiled functions); the run is taken in
        chunks between its switches, each switch made between two chunks.
    controller
        ``(owned, held, kernel, kernel_state, kernel_params, period_ticks)``
        for a closed loop (``held``: the inputs after the reset, the owned
        ones the initial commands), or None (the table's inputs with their
        first-order-hold rates, as :class:`~plant_models.offline.Run`).

    ``out`` / ``out_u`` [rows, n_out / n_in] hold the outputs and the
    commanded inputs at t = 0 and after every ``every``-th step and the last.
    """

    def __init__(self, plant, table: InputTable, dt: float, n_steps: int, every: int = 1, faults=None,
                 controller: tuple | None = None):
        if not supports(plant, kernel=controller is not None):
            raise TypeError(f"a compiled run with a fault stage or a kernel needs a compiled plant (on the friction "
                            f"core, for a kernel); {plant.kind} is not")
        self.plant, self.faults = plant, faults
        self.dt, self.n_steps, self.every, self.k = float(dt), int(n_steps), int(every), 0
        self.kind, self.times, self.values = table.arrays()
        self._step_at = kernel_address(plant.compiled["step"])
        t_at, src_at, kind_at, count_at, cap = plant.event_log()
        lay = np.zeros(LAY_STAGED, dtype=np.int64)
        lay[[LAY_IN, LAY_OUT, LAY_N_OUT, LAY_EVERY, LAY_LAST]] = (plant.input_offset, plant.output_offset,
                                                                 plant.n_out, every, self.n_steps)
        lay[[LAY_EV_TIME, LAY_EV_SOURCE, LAY_EV_KIND, LAY_EV_COUNT, LAY_EV_CAP]] = (t_at, src_at, kind_at, count_at,
                                                                                    cap)
        lay[LAY_HINTS] = plant.run_hints_slot()
        if controller is None:
            owned, held, self.kernel, kstate, kparams = np.zeros(0, np.int64), np.array(plant.u), no_kernel, None, None
        else:
            owned, held, self.kernel, kstate, kparams, period = controller
            lay[LAY_TIME], lay[LAY_PERIOD], lay[LAY_CLOSED] = plant.mi[L.DF_TIME], int(period), 1
            mine = {int(i) for i in owned}
            lay[LAY_HELD_ONLY] = int(all(self.kind[i, TI_KIND] == TAB_CONST for i in range(plant.n_in) if i not in mine))
        self.lay = lay
        self.acc = np.zeros(ACC_LEN, dtype=np.int64)
        self.acc[ACC_EV_READ] = plant.di[count_at]
        self.acc[ACC_ROWS] = 1
        _, self.out, self.out_step = output_buffer(plant, self.n_steps, self.every, None)
        self.out_u = np.empty((self.out.shape[0], plant.n_in))
        self.out_u[0] = plant.u
        self.owned = np.ascontiguousarray(owned, dtype=np.int64)
        self.owned_mask = np.zeros(plant.n_in, dtype=np.int64)
        self.owned_mask[self.owned] = 1
        self.held = np.array(held, dtype=np.float64)
        self.ybuf, self.ubuf = np.empty(plant.n_out), np.empty(plant.n_in)
        self.kstate = kstate if kstate is not None else np.zeros(1)
        self.kparams = kparams if kparams is not None else np.zeros(1)
        if faults is None:
            self._stage = (no_stage, no_stage, no_stage, np.zeros((1, 1), np.int64), np.zeros((1, 1)))
        else:
            self._stage = (*faults.stage, faults.fi, faults.ff)
        n_ev = max(64, 2 * cap)
        self._ev = [np.empty(n_ev), np.empty(n_ev, dtype=np.int64), np.empty(n_ev, dtype=np.int64)]

    @property
    def done(self) -> bool:
        return self.k >= self.n_steps

    def advance(self, steps: int | None = None) -> int:
        """Take the next ``steps`` steps (all that remain by default); returns the steps taken so far."""
        p, f = self.plant, self.faults
        end = self.n_steps if steps is None else min(self.n_steps, self.k + int(steps))
        while self.k < end:
            k1, nf = end, 0
            if f is not None:
                f.switch(self.k)  # between two steps, as a lockstep server's fault_set
                nxt = f.next_step
                k1, nf = (end if nxt is None else min(end, nxt)), f.n_signal
            k = int(run_staged_steps(self.kernel, *self._stage[:3], *self._stage[3:], nf, self._step_at, p.mf, p.mi,
                                     p.df, p.di, self.kind, self.times, self.values, self.dt, self.k, k1, self.lay,
                                     self.acc, self.out, self.out_u, self.out_step, *self._ev, self.owned,
                                     self.owned_mask, self.held,
                                     self.ybuf, self.ubuf, self.kstate, self.kparams))
            if k < k1:  # the event arrays are nearly full: twice the room, and on
                self._ev = [np.resize(a, 2 * a.shape[0]) for a in self._ev]
            self.k = k
        if self.done:
            p.mark_events_read()
        return self.k

    @property
    def updates(self) -> int:
        period = int(self.lay[LAY_PERIOD])
        return self.k // period if period else 0

    def events(self) -> list[dict]:
        n = int(self.acc[ACC_EVENTS])
        raw = zip(self._ev[0][:n].tolist(), self._ev[1][:n].tolist(), self._ev[2][:n].tolist())
        return self.plant.name_events(list(raw))


__all__ = ["StagedRun", "no_kernel", "no_stage", "run_staged_steps", "supports"]
