"""The compiled forms of the offline runs' stages: inputs from an input table, the events, the rows kept.

Each is a stage of the protocol of :mod:`plant_models.run.compiled`
(``int64 stage(int64* ctx, int64 k, int64 now_ns, float64 dt, int64 carry)``),
which the compiled offline run (:func:`plant_models.run.offline_compiled.run_compiled`)
calls by address in the order of the stage list:

* ``inputs``: the input table's inputs of step k (:func:`table_inputs_stage`),
  or the closed loop's (:func:`closed_inputs_stage`: the table's values for
  the inputs a controller does not own, its held commands for those it owns,
  every rate 0); they return
  :data:`~plant_models.run.offline_compiled.CHANGED` when an input differs
  from the last step's;
* ``events``: the events the plant logged in the step into arrays
  (:func:`events_stage`), and the room check that ends a call before a step
  when the arrays could overflow (:func:`events`);
* ``row``: the outputs (and, for the closed loop, the commanded inputs)
  after every ``every``-th step and the last (:func:`row_stage`).

and the open loop's fused loop (:func:`run_table_events_row`): those three
stages' bodies (:func:`table_inputs_at`, :func:`events_at`, :func:`row_at`,
the ones their cfuncs call) in :func:`~plant_models.run.offline_compiled.run_compiled`'s
loop, called directly, registered for exactly that stage sequence
(:func:`~plant_models.run.offline_compiled.register_fused`).

What a run carries between its calls is an int64 array ``acc`` (``ACC_*`` of
:mod:`plant_models.run.offline_compiled`).
Arrays are reached through raw pointers (``i64_at``/``f64_at``): a stage is
called at every step, and array views with reference counts would cost
more than the stage.
"""

from __future__ import annotations

import numpy as np
from numba import carray, cfunc, njit

from .core.api import JIT, JIT_STAGE, call_step_at
from .input_table import TAB_CONST, TI_FIRST, TI_KIND, TI_LEN, input_value, write_inputs_kept
from .run.compiled import P_BUFFERS, P_STAGES, P_STEP_AT, READS, STAGE_SIGNATURE, CompiledStage, f64_at, i64_at
from .run.offline_compiled import (ACC_EV_READ, ACC_EVENTS, ACC_LOST, ACC_ROWS, CHANGED, O_EVERY, O_HINTS, O_LAST,
                                   O_PERIOD, O_ROOM_AT, O_ROOM_LIMIT, O_STATUS_AT, end_call, register_fused,
                                   run_hints)


@njit(**JIT_STAGE)
def table_inputs_at(ctx, k, dt):
    """The body of :func:`table_inputs_stage` (``ctx`` a typed pointer), for it and the fused loop."""
    changed = write_inputs_kept(i64_at(ctx[0]), ctx[1], f64_at(ctx[2]), f64_at(ctx[3]), dt, k, f64_at(ctx[4]), ctx[5],
                                f64_at(ctx[6]), i64_at(ctx[7]))
    return CHANGED if changed else 0


@cfunc(STAGE_SIGNATURE, cache=True)
def table_inputs_stage(ctx, k, now_ns, dt, carry):
    """Stage ``inputs``: the table's inputs of step k (values, first-order-hold rates) into ``df``.

    ``ctx``: [kind, n_in, times, values, df, index in df of input 0, kept, kept_k] (:func:`table_inputs`; ``kept``,
    ``kept_k``: the values :func:`~plant_models.input_table.write_inputs_kept` keeps for the next step).  Returns
    :data:`CHANGED` when a value or rate differs from what ``df`` held.
    """
    return table_inputs_at(ctx, k, dt)


@njit(**JIT)
def _closed_inputs(kind, times, values, dt, k, df, at_in, n_in, owned, held):
    """The closed loop's inputs of step k, raw pointers but the sizes; returns whether any differs from ``df``'s.

    ``owned[i]`` 1 for an input the controller commands.  The values are
    those :func:`~plant_models.input_table.write_inputs` gives (a table's
    rate is not evaluated: it is 0).
    """
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


@cfunc(STAGE_SIGNATURE, cache=True)
def closed_inputs_stage(ctx, k, now_ns, dt, carry):
    """Stage ``inputs`` of the closed loop: the owned inputs' held commands, the others the table's, rates 0.

    ``ctx``: [kind, n_in, times, values, df, index of input 0, owned mask, held, flags] (:func:`closed_inputs`);
    ``flags``: [rewrite, always].  The inputs are written when ``always`` (a fault stage acts, or an input
    the controller does not own moves) or ``rewrite`` (a call's first step, or a command since the last
    step), else they are as the last step wrote them.
    """
    flags = i64_at(ctx[8])
    if flags[0] == 0 and flags[1] == 0:
        return 0
    flags[0] = 0
    changed = _closed_inputs(i64_at(ctx[0]), f64_at(ctx[2]), f64_at(ctx[3]), dt, k, f64_at(ctx[4]), ctx[5], ctx[1],
                             i64_at(ctx[6]), f64_at(ctx[7]))
    return CHANGED if changed else 0


@njit(**JIT_STAGE)
def events_at(ctx):
    """The body of :func:`events_stage` (``ctx`` a typed pointer), for it and the fused loop."""
    di, acc = i64_at(ctx[1]), i64_at(ctx[2])
    total = di[ctx[9]]
    if total != acc[ACC_EV_READ]:
        df, ev_time, ev_source, ev_kind = f64_at(ctx[0]), f64_at(ctx[3]), i64_at(ctx[4]), i64_at(ctx[5])
        cap = ctx[10]
        first = max(acc[ACC_EV_READ], total - cap)
        acc[ACC_LOST] += first - acc[ACC_EV_READ]
        m = acc[ACC_EVENTS]
        for q in range(first, total):
            slot = q % cap
            ev_time[m] = df[ctx[6] + slot]
            ev_source[m] = di[ctx[7] + slot]
            ev_kind[m] = di[ctx[8] + slot]
            m += 1
        acc[ACC_EVENTS] = m
        acc[ACC_EV_READ] = total
    return 0


@cfunc(STAGE_SIGNATURE, cache=True)
def events_stage(ctx, k, now_ns, dt, carry):
    """Stage ``events``: the events the plant logged in the step, from its ring log into the event arrays.

    ``ctx``: [df, di, acc, ev_time, ev_source, ev_kind, index in df of the ring's times, in di of its sources,
    of its kinds, of the count logged, the ring's capacity] (:func:`events`).
    """
    return events_at(ctx)


@njit(**JIT_STAGE)
def row_at(ctx, k):
    """The body of :func:`row_stage` (``ctx`` a typed pointer), for it and the fused loop."""
    nxt = i64_at(ctx[11])
    row = k + 1 == nxt[0] or k + 1 == ctx[10]
    if k + 1 == nxt[0]:
        nxt[0] += ctx[9]
    if row:
        df, acc = f64_at(ctx[0]), i64_at(ctx[1])
        r = acc[ACC_ROWS]
        n_out, n_u = ctx[5], ctx[6]
        out = f64_at(ctx[2])
        for j in range(n_out):
            out[r * n_out + j] = df[ctx[7] + j]
        if n_u:
            out_u = f64_at(ctx[4])
            for i in range(n_u):
                out_u[r * n_u + i] = df[ctx[8] + i]
        i64_at(ctx[3])[r] = k + 1
        acc[ACC_ROWS] = r + 1
    return 0


@cfunc(STAGE_SIGNATURE, cache=True)
def row_stage(ctx, k, now_ns, dt, carry):
    """Stage ``row``: after step k, when k + 1 is the next row's step count or the run's last, the outputs (and
    ``n_u`` inputs) into the next row of ``out`` (``out_u``) and k + 1 into ``out_step``.

    ``ctx``: [df, acc, out, out_step, out_u, n_out, n_u, index of output 0, of input 0, every, last, next]
    (:func:`rows`); ``next[0]``: the next multiple of ``every``, which the run sets before each call.
    """
    return row_at(ctx, k)


@njit(cache=True, nogil=True)  # compiled (or loaded from the cache) at its first call
def run_table_events_row(plan, k0, k1, dt):
    """:func:`~plant_models.run.offline_compiled.run_compiled` for a plan whose stages are ``inputs``
    (:func:`table_inputs_stage`) before the step, ``events`` (:func:`events_stage`) and ``row``
    (:func:`row_stage`) after it, and no other: the same plan, the same order, the stages' bodies called
    directly (inlined: no indirect call, the contexts' addresses read once a call, not once a step).

    Registered for that sequence (:func:`~plant_models.run.offline_compiled.register_fused`); what
    :func:`~plant_models.run.offline_compiled.run_compiled` does is done here line for line, so the two give the
    same results bit for bit (tests/test_offline_fused.py).
    """
    b = P_BUFFERS
    mf, mi = carray(f64_at(plan[b]), (plan[b + 1],)), carray(i64_at(plan[b + 2]), (plan[b + 3],))
    df, di = carray(f64_at(plan[b + 4]), (plan[b + 5],)), carray(i64_at(plan[b + 6]), (plan[b + 7],))
    step_at = plan[P_STEP_AT]
    room_at, room_limit = plan[O_ROOM_AT], plan[O_ROOM_LIMIT]
    room = i64_at(room_at)
    hints_at, every, last, period = plan[O_HINTS], plan[O_EVERY], plan[O_LAST], plan[O_PERIOD]
    status_word = i64_at(plan[O_STATUS_AT])
    status = status_word[0]
    c_inputs, c_events, c_row = i64_at(plan[P_STAGES + 1]), i64_at(plan[P_STAGES + 3]), i64_at(plan[P_STAGES + 5])
    next_row = (k0 // every + 1) * every
    next_call = (k0 // period + 1) * period if period > 0 else -1
    for k in range(k0, k1):
        if room_at != 0 and room[0] > room_limit:
            status_word[0] = status
            return end_call(di, hints_at, k)
        carry = table_inputs_at(c_inputs, k, dt)
        read = (carry & READS) != 0 or k + 1 == next_row or k + 1 == last or k + 1 == next_call or k + 1 == k1
        if k + 1 == next_row:
            next_row += every
        if k + 1 == next_call:
            next_call += period
        if hints_at >= 0:
            di[hints_at] = run_hints(k, k0, read, (carry & CHANGED) == 0)
        st = call_step_at(step_at, mf, mi, df, di, dt)
        status |= st
        events_at(c_events)
        row_at(c_row, k)
    status_word[0] = status
    return end_call(di, hints_at, k1)


register_fused((table_inputs_stage,), (events_stage, row_stage), run_table_events_row)


def table_inputs(kind: np.ndarray, times: np.ndarray, values: np.ndarray, df: np.ndarray,
                 at_in: int) -> CompiledStage:
    """The compiled ``inputs`` stage of an input table's arrays (:meth:`InputTable.arrays`), which must not change
    while the stage is used (it keeps values for the next step: :func:`~plant_models.input_table.write_inputs_kept`)."""
    n_in = kind.shape[0]
    kept, kept_k = np.zeros(n_in), np.full(n_in, -1, dtype=np.int64)  # -1: no step
    return CompiledStage.of("inputs", table_inputs_stage, (kind, n_in, times, values, df, at_in, kept, kept_k))


def closed_inputs(kind, times, values, df, at_in, owned_mask, held, flags) -> CompiledStage:
    """The compiled ``inputs`` stage of the closed loop (``flags``: [rewrite, always], int64)."""
    return CompiledStage.of("inputs", closed_inputs_stage, (kind, kind.shape[0], times, values, df, at_in,
                                                            owned_mask, held, flags))


def events(plant, acc: np.ndarray, ev: list[np.ndarray]) -> tuple[CompiledStage, tuple[np.ndarray, int]]:
    """The compiled ``events`` stage into the arrays ``ev`` (times, sources, kinds), and the room check of the
    run's plan (:meth:`~plant_models.run.offline_compiled.OfflinePlan.set_room`): a call ends before a step when
    fewer places are left than the plant's ring holds."""
    t_at, src_at, kind_at, count_at, cap = plant.event_log()
    stage = CompiledStage.of("events", events_stage, (plant.df, plant.di, acc, *ev, t_at, src_at, kind_at, count_at,
                                                      cap))
    return stage, (acc[ACC_EVENTS:ACC_EVENTS + 1], ev[0].shape[0] - cap)


def rows(plant, acc: np.ndarray, out: np.ndarray, out_step: np.ndarray, out_u: np.ndarray | None, every: int,
         last: int, nxt: np.ndarray) -> CompiledStage:
    """The compiled ``row`` stage into ``out`` [rows, n_out] (and ``out_u`` [rows, n_in]) and ``out_step``."""
    if not (out.flags.c_contiguous and out.shape[1] == plant.n_out and out_step.shape[0] >= out.shape[0]):
        raise ValueError("the output rows must be a contiguous [rows, n_out] array")
    u = out_u if out_u is not None else np.zeros((1, 1))
    return CompiledStage.of("row", row_stage, (plant.df, acc, out, out_step, u, plant.n_out,
                                               0 if out_u is None else plant.n_in, plant.output_offset,
                                               plant.input_offset, every, last, nxt))


__all__ = ["closed_inputs", "closed_inputs_stage", "events", "events_at", "events_stage", "row_at", "row_stage", "rows",
           "run_table_events_row", "table_inputs", "table_inputs_at", "table_inputs_stage"]
