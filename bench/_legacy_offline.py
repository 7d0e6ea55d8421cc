"""The compiled offline loops as they were written by hand before they were built from the stage list (commit
11d4578, ``plant_models/offline.py``'s ``run_steps`` and ``plant_models/closed_loop.py``'s ``run_staged_steps``,
copied unchanged but for their imports), for the same-run A/B of ``bench/bench_offline_pipeline.py``.

Not used by the server: only the benchmark calls them, on the same plants, tables and fault tables as the runs of
this tree, so both versions see the same machine load in one process.
"""

from __future__ import annotations

from numba import njit

from plant_models.core.api import JIT, L, call_step_at, raw_f, raw_i
from plant_models.input_table import TAB_CONST, TI_FIRST, TI_KIND, TI_LEN, input_value, write_inputs
from plant_models.run.offline_compiled import end_call, run_hints

LOOP_JIT = {k: v for k, v in JIT.items() if k != "cache"}  # compiled per kernel and fault stage: nothing to cache

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

LAY_TIME = LAY_LEN  # index in df of the plant's time, s
LAY_PERIOD = LAY_LEN + 1  # the kernel is called after every N-th step (0: no controller)
LAY_CLOSED = LAY_LEN + 2  # 1: closed-loop inputs (every rate 0, the owned inputs from the commands)
LAY_HELD_ONLY = LAY_LEN + 3  # 1: closed, and every input the controller does not own a constant: the inputs move
#                              only when the controller commands (at a call), so between calls they are not rewritten
LAY_STAGED = LAY_LEN + 4


@njit(**JIT)
def no_kernel(t_s, y, u, state, params):
    """The kernel of a run without a controller (never called: its period is 0)."""


@njit(**JIT)
def no_stage(fi, ff, df, n):
    """The fault stage of a run without a fault schedule (never called: its row count is 0)."""


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
