"""Compiled runs with a fault stage and a controller's kernel: the run pipeline's compiled stages, no Python per step.

:class:`plant_models.offline.Run` is an open-loop run: the compiled
offline loop (:func:`plant_models.run.offline_compiled.run_compiled`) over
the ``inputs``, ``events`` and ``row`` stages' compiled forms.
:class:`StagedRun` is the same loop over more of the stage list, each
optional:

* a **fault schedule**'s stages around the step, as the real-time tick has
  them: the faulted inputs before the step, the faulted outputs and the
  commanded inputs back after it (:mod:`plant_models.run.fault_tables`, on
  the schedule's tables); :class:`StagedRun` takes the steps in chunks
  between the schedule's switch times and makes each switch between two
  chunks (the ``switch`` stage, from Python), as a lockstep server's
  ``fault_set`` between two ticks;
* a **controller's kernel** (the controller interface,
  ``server/offline/controller.py``): the closed-loop ``inputs`` stage (the
  table's values for the inputs the controller does not own, its commands
  for those it owns, every rate 0) and the ``controller`` stage, after
  every ``period``-th step ``kernel(t_s, y, u, state, params)`` on copies
  of the outputs and inputs, its commands taken from the owned places.

The same floats in the same order as the Python step loops
(:class:`plant_models.offline.StepwiseRun` with a schedule,
:func:`server.offline.controller.closed_loop` through ``update``), so the
rows are the same bit for bit.  The loop and every stage but the
controller's are compiled once and cached; the controller stage is a
``cfunc`` that calls the kernel, compiled once per kernel in a process (a
kernel is the user's code: nothing to cache).  A kernel needs a plant on
the friction core (its time is a slot of ``df``).
"""

from __future__ import annotations

import numpy as np
from numba import carray, cfunc

from .contract.compiled import CompiledPlant
from .core.api import L
from .input_table import TAB_CONST, TI_KIND, InputTable
from .offline import (ACC_EV_READ, ACC_EVENTS, ACC_LEN, ACC_ROWS, ACC_STATUS, CompiledCounters, kernel_address,
                      output_buffer, run_chunks)
from .offline_stages import closed_inputs, events, rows, table_inputs
from .run.compiled import STAGE_SIGNATURE, CompiledStage, f64_at, i64_at
from .run.offline_compiled import OfflinePlan, compiled_run_possible

# the controller stage's ctx
(C_DF, C_TIME, C_OUT_AT, C_N_OUT, C_IN_AT, C_N_IN, C_Y, C_U, C_STATE, C_N_STATE, C_PARAMS, C_N_PARAMS, C_OWNED,
 C_N_OWNED, C_HELD, C_NEXT, C_PERIOD, C_FLAGS) = range(18)
_CONTROLLER_STAGES: dict = {}  # kernel -> its controller stage (a cfunc), compiled once per kernel in a process


def controller_stage_of(kernel):
    """The compiled ``controller`` stage that calls ``kernel`` (a numba-compiled function, the controller
    interface's ``kernel(t_s, y, u, state, params)``, float64 arrays).

    ``ctx`` (:func:`controller_stage`): [df, index of the time in df, of output 0, n_out, of input 0, n_in,
    y, u, state, its length, params, its length, owned, n_owned, held, next, period, flags].  After step k
    with k + 1 == ``next[0]``: ``y``, ``u`` the outputs and inputs, the kernel called, its commands for the
    owned inputs into ``held``, ``flags[0]`` (the inputs stage's rewrite) set, ``next[0]`` a period on.
    """
    fn = _CONTROLLER_STAGES.get(kernel)
    if fn is not None:
        return fn

    def controller_stage(ctx, k, now_ns, dt, carry):
        nxt = i64_at(ctx[C_NEXT])
        if k + 1 != nxt[0]:
            return 0
        nxt[0] += ctx[C_PERIOD]
        df = f64_at(ctx[C_DF])
        n_out, n_in = ctx[C_N_OUT], ctx[C_N_IN]
        y, u = carray(f64_at(ctx[C_Y]), (n_out,)), carray(f64_at(ctx[C_U]), (n_in,))
        for j in range(n_out):
            y[j] = df[ctx[C_OUT_AT] + j]
        for i in range(n_in):
            u[i] = df[ctx[C_IN_AT] + i]
        kernel(df[ctx[C_TIME]], y, u, carray(f64_at(ctx[C_STATE]), (ctx[C_N_STATE],)),
               carray(f64_at(ctx[C_PARAMS]), (ctx[C_N_PARAMS],)))
        owned, held = i64_at(ctx[C_OWNED]), f64_at(ctx[C_HELD])
        for j in range(ctx[C_N_OWNED]):
            held[owned[j]] = u[owned[j]]
        i64_at(ctx[C_FLAGS])[0] = 1
        return 0

    fn = _CONTROLLER_STAGES[kernel] = cfunc(STAGE_SIGNATURE)(controller_stage)
    return fn


def supports(plant, kernel: bool = True) -> bool:
    """Whether :class:`StagedRun` can run ``plant``: a compiled step (on the friction core, for a kernel), and no
    stage of the run pipeline that only Python runs
    (:func:`plant_models.run.offline_compiled.compiled_run_possible`)."""
    return (isinstance(plant, CompiledPlant) and (not kernel or getattr(plant, "core", None) is not None)
            and compiled_run_possible())


class StagedRun(CompiledCounters):
    """A whole run in compiled chunks with a fault schedule and/or a controller's kernel, after the plant's reset.

    Parameters
    ----------
    plant, table, dt, n_steps, every
        As :class:`plant_models.offline.Run`.
    faults
        A fault schedule (:class:`plant_models.run.schedule.FaultSchedule`:
        ``switch(k)``, ``next_step``, ``n_signal``, ``fi``, ``ff``); the
        run is taken in chunks between its switches, each switch made
        between two chunks.
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
        self.acc = np.zeros(ACC_LEN, dtype=np.int64)
        self.acc[ACC_EV_READ] = plant.di[plant.event_log()[3]]
        self.acc[ACC_ROWS] = 1
        _, self.out, self.out_step = output_buffer(plant, self.n_steps, self.every, None)
        self.out_u = np.empty((self.out.shape[0], plant.n_in))
        self.out_u[0] = plant.u
        n_ev = max(64, 2 * plant.event_log()[4])
        self._ev = [np.empty(n_ev), np.empty(n_ev, dtype=np.int64), np.empty(n_ev, dtype=np.int64)]
        self._next_row, self._next_call = np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64)
        self._flags = np.zeros(2, dtype=np.int64)  # the closed-loop inputs stage's [rewrite, always]
        ev_stage, room = events(plant, self.acc, self._ev)
        stages = {"events": ev_stage, "row": rows(plant, self.acc, self.out, self.out_step, self.out_u, self.every,
                                                  self.n_steps, self._next_row)}
        self.period, self.held_only = 0, False
        if controller is None:
            stages["inputs"] = table_inputs(self.kind, self.times, self.values, plant.df, plant.input_offset)
        else:
            stages.update(self._closed_loop(controller))
        if faults is not None:
            if faults.set.plant is not plant:
                raise ValueError("the fault schedule was made for another plant")
            # the same compiled forms as the real-time tick's; they read the fault set's row count at every step
            stages.update({s.stage: s for s in faults.set.compiled_stages()})
        self.plan = OfflinePlan(kernel_address(plant.compiled["step"]), plant, self.dt, stages,
                                self.acc[ACC_STATUS:ACC_STATUS + 1], self.every, self.n_steps, self.period, room,
                                "offline" if controller is None else "closed_loop")

    def _closed_loop(self, controller: tuple) -> dict[str, CompiledStage]:
        """The closed loop's ``inputs`` and ``controller`` stages."""
        p = self.plant
        owned, held, kernel, kstate, kparams, period = controller
        self.period = int(period)
        mine = {int(i) for i in owned}
        self.held_only = all(self.kind[i, TI_KIND] == TAB_CONST for i in range(p.n_in) if i not in mine)
        self.owned = np.ascontiguousarray(owned, dtype=np.int64)
        self.owned_mask = np.zeros(p.n_in, dtype=np.int64)
        self.owned_mask[self.owned] = 1
        self.held = np.array(held, dtype=np.float64)
        self.ybuf, self.ubuf = np.empty(p.n_out), np.empty(p.n_in)
        self.kernel, self.kstate, self.kparams = kernel, kstate, kparams
        ctl = CompiledStage.of("controller", controller_stage_of(kernel), (
            p.df, p.mi[L.DF_TIME], p.output_offset, p.n_out, p.input_offset, p.n_in, self.ybuf, self.ubuf, kstate,
            kstate.shape[0], kparams, kparams.shape[0], self.owned, self.owned.shape[0], self.held,
            self._next_call, self.period, self._flags))
        return {"inputs": closed_inputs(self.kind, self.times, self.values, p.df, p.input_offset, self.owned_mask,
                                        self.held, self._flags), "controller": ctl}

    @property
    def done(self) -> bool:
        return self.k >= self.n_steps

    def begin_call(self, k: int) -> None:
        """Before a call from step k: the rows', the controller's next steps and the inputs written in full."""
        self._next_row[0] = (k // self.every + 1) * self.every
        if self.period:
            self._next_call[0] = (k // self.period + 1) * self.period
        self._flags[0] = 1  # a call's first step writes every input (Python may have changed them between calls)

    def advance(self, steps: int | None = None) -> int:
        """Take the next ``steps`` steps (all that remain by default); returns the steps taken so far."""
        f = self.faults
        end = self.n_steps if steps is None else min(self.n_steps, self.k + int(steps))
        while self.k < end:
            k1, nf = end, 0
            if f is not None:
                f.switch(self.k)  # between two steps, as a lockstep server's fault_set
                nxt = f.next_step
                k1, nf = (end if nxt is None else min(end, nxt)), f.n_signal
            self._flags[1] = int(nf > 0 or not self.held_only)  # the inputs move at every step
            self.k = run_chunks(self, k1)
        if self.done:
            self.plant.mark_events_read()
        return self.k

    @property
    def updates(self) -> int:
        return self.k // self.period if self.period else 0

    def events(self) -> list[dict]:
        n = int(self.acc[ACC_EVENTS])
        raw = zip(self._ev[0][:n].tolist(), self._ev[1][:n].tolist(), self._ev[2][:n].tolist())
        return self.plant.name_events(list(raw))


__all__ = ["StagedRun", "controller_stage_of", "supports"]
