"""A closed-loop run in compiled code: the plant's step and a controller's kernel in one loop, no Python per step.

The controller interface (``server/offline/controller.py``) lets a
controller carry a numba kernel ``kernel(t_s, y, u, state, params)`` that
does what its ``update`` does.  :func:`run_closed_steps` is the closed-loop
step sequence of :func:`server.offline.controller.closed_loop` compiled as
a whole: before step k the scenario's values of step k (the
:class:`~plant_models.offline.InputTable` evaluation of the compiled run,
:func:`~plant_models.offline._write_inputs`) for the inputs the controller
does not own and its commands for those it owns, every rate 0; the plant's
step through its address; events and rows as in
:func:`~plant_models.offline.run_steps`; after every ``period``-th step the
kernel with the plant's time, a copy of its outputs and of its inputs, its
commands taken from the owned places.  The same floats in the same order as
the Python ``update`` path, so the two give the same rows bit for bit.

The kernel is an argument of the loop (a first-class function), so the
loop is compiled once per kernel (not cached: a kernel is the caller's); the
plant's step is called through its address as in the open-loop run.  Only
plants on the friction core (their time is a slot of ``df``).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .contract.compiled import CompiledPlant
from .core.api import JIT, L, call_step_at
from .offline import (ACC_EV_READ, ACC_EVENTS, ACC_LEN, ACC_LOST, ACC_ROWS, ACC_STATUS, LAY_EV_CAP, LAY_EV_COUNT,
                      LAY_EV_KIND, LAY_EV_SOURCE, LAY_EV_TIME, LAY_EVERY, LAY_IN, LAY_LAST, LAY_LEN, LAY_N_OUT,
                      LAY_OUT, InputTable, _write_inputs, kernel_address, output_buffer)

LAY_TIME = LAY_LEN  # index in df of the plant's time, s
LAY_PERIOD = LAY_LEN + 1  # the kernel is called after every N-th step
LAY_CLOSED = LAY_LEN + 2

LOOP_JIT = {k: v for k, v in JIT.items() if k != "cache"}  # compiled per kernel: nothing to cache


@njit(**LOOP_JIT)
def run_closed_steps(kernel, step_at, mf, mi, df, di, kind, times, values, dt, k0, k1, lay, acc, out, out_u, out_step,
                     ev_time, ev_source, ev_kind, owned, held, ybuf, ubuf, kstate, kparams):
    """Steps ``k0 .. k1 - 1`` of a closed-loop run; returns the next step (k1, or earlier when the event arrays
    are full).  ``owned`` are the owned inputs' indices, ``held`` the commands (all inputs, float64)."""
    at_in = lay[LAY_IN]
    at_out = lay[LAY_OUT]
    n_out = lay[LAY_N_OUT]
    n_in = ubuf.shape[0]
    every = lay[LAY_EVERY]
    last = lay[LAY_LAST]
    period = lay[LAY_PERIOD]
    t_at = lay[LAY_TIME]
    cap = lay[LAY_EV_CAP]
    status = acc[ACC_STATUS]
    for k in range(k0, k1):
        if acc[ACC_EVENTS] + cap > ev_time.shape[0]:
            acc[ACC_STATUS] = status
            return k
        _write_inputs(kind, times, values, dt, k, df, at_in)
        for i in range(n_in):
            df[at_in + n_in + i] = 0.0
        for j in range(owned.shape[0]):
            df[at_in + owned[j]] = held[owned[j]]
        status |= call_step_at(step_at, mf, mi, df, di, dt)
        total = di[lay[LAY_EV_COUNT]]
        if total != acc[ACC_EV_READ]:
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
        if (k + 1) % every == 0 or k + 1 == last:
            r = acc[ACC_ROWS]
            for j in range(n_out):
                out[r, j] = df[at_out + j]
            for i in range(n_in):
                out_u[r, i] = df[at_in + i]
            out_step[r] = k + 1
            acc[ACC_ROWS] = r + 1
        if (k + 1) % period == 0:
            for j in range(n_out):
                ybuf[j] = df[at_out + j]
            for i in range(n_in):
                ubuf[i] = df[at_in + i]
            kernel(df[t_at], ybuf, ubuf, kstate, kparams)
            for j in range(owned.shape[0]):
                held[owned[j]] = ubuf[owned[j]]
    acc[ACC_STATUS] = status
    return k1


def supports(plant) -> bool:
    """Whether :class:`ClosedRun` can run ``plant``: a compiled step on the friction core."""
    return isinstance(plant, CompiledPlant) and getattr(plant, "core", None) is not None


class ClosedRun:
    """A whole closed-loop run with a controller's kernel, after the plant's reset, in compiled chunks.

    ``out`` / ``out_u`` [rows, n_out / n_in] hold the outputs and the
    commanded inputs at t = 0 and after every ``every``-th step and the
    last; ``held`` [n_in] starts as the inputs after the reset (the owned
    ones are the controller's initial commands).
    """

    def __init__(self, plant, table: InputTable, dt: float, n_steps: int, owned: np.ndarray, held: np.ndarray,
                 kernel, kernel_state: np.ndarray, kernel_params: np.ndarray, period: int, every: int = 1):
        if not supports(plant):
            raise TypeError(f"the compiled closed loop needs a compiled plant on the friction core; {plant.kind} "
                            "is not (use the update path)")
        self.plant, self.kernel = plant, kernel
        self.dt, self.n_steps, self.k = float(dt), int(n_steps), 0
        self.kind, self.times, self.values = table.arrays()
        self._step_at = kernel_address(plant.compiled["step"])
        t_at, src_at, kind_at, count_at, cap = plant.event_log()
        lay = np.zeros(LAY_CLOSED, dtype=np.int64)
        lay[[LAY_IN, LAY_OUT, LAY_N_OUT, LAY_EVERY, LAY_LAST]] = (plant.input_offset, plant.output_offset,
                                                                 plant.n_out, every, self.n_steps)
        lay[[LAY_EV_TIME, LAY_EV_SOURCE, LAY_EV_KIND, LAY_EV_COUNT, LAY_EV_CAP]] = (t_at, src_at, kind_at, count_at,
                                                                                    cap)
        lay[LAY_TIME] = plant.mi[L.DF_TIME]
        lay[LAY_PERIOD] = int(period)
        self.lay = lay
        self.acc = np.zeros(ACC_LEN, dtype=np.int64)
        self.acc[ACC_EV_READ] = plant.di[count_at]
        self.acc[ACC_ROWS] = 1
        _, self.out, self.out_step = output_buffer(plant, self.n_steps, int(every), None)
        self.out_u = np.empty((self.out.shape[0], plant.n_in))
        self.out_u[0] = plant.u
        self.owned = np.ascontiguousarray(owned, dtype=np.int64)
        self.held = np.array(held, dtype=np.float64)
        self.ybuf, self.ubuf = np.empty(plant.n_out), np.empty(plant.n_in)
        self.kstate, self.kparams = kernel_state, kernel_params
        n_ev = max(64, 2 * cap)
        self._ev = [np.empty(n_ev), np.empty(n_ev, dtype=np.int64), np.empty(n_ev, dtype=np.int64)]

    def advance(self) -> int:
        """Take every remaining step; returns the steps taken."""
        p = self.plant
        while self.k < self.n_steps:
            self.k = int(run_closed_steps(self.kernel, self._step_at, p.mf, p.mi, p.df, p.di, self.kind, self.times,
                                          self.values, self.dt, self.k, self.n_steps, self.lay, self.acc, self.out,
                                          self.out_u, self.out_step, *self._ev, self.owned, self.held, self.ybuf,
                                          self.ubuf, self.kstate, self.kparams))
            if self.k < self.n_steps:  # the event arrays are nearly full: twice the room, and on
                self._ev = [np.resize(a, 2 * a.shape[0]) for a in self._ev]
        p.mark_events_read()
        return self.k

    @property
    def status_or(self) -> int:
        return int(self.acc[ACC_STATUS])

    @property
    def updates(self) -> int:
        return self.n_steps // int(self.lay[LAY_PERIOD])

    def events(self) -> list[dict]:
        n = int(self.acc[ACC_EVENTS])
        raw = zip(self._ev[0][:n].tolist(), self._ev[1][:n].tolist(), self._ev[2][:n].tolist())
        return self.plant.name_events(list(raw))


__all__ = ["ClosedRun", "run_closed_steps", "supports"]
