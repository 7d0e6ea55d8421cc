"""Commands into the tick: validated input updates handed over as preallocated rows.

A transport decodes and validates each command message outside the tick
(between ticks, in the loop's slack) and puts the result, a partial input
update ``(seq, count, idx[count], val[count])``, into the next free row of a
:class:`CommandRows` queue.  The tick only copies: :meth:`CommandRows.apply`
is one compiled call that writes the waiting updates into the plant's inputs
in arrival order, records the ``seq`` of the last one in an ack slot and
frees the rows.  Nothing is allocated, decoded or looked up by name in the
tick.

The queue has one producer (the transport, between ticks) and one consumer
(the tick) and no lock: the producer fills a row, then advances ``put``;
the tick reads up to ``put``, then advances ``got``.  When every row is
taken the producer stops receiving, and further messages wait in the
transport's own bounded queue (ZeroMQ's receive high-water mark), so nothing
is dropped here.

While a scenario drives the inputs the tick takes the rows without applying
them and counts them (:meth:`CommandRows.scenario_rejected`); the transport
reports them as rejected with reason ``scenario_active`` between ticks.
"""

from __future__ import annotations

import numpy as np
from numba import carray, cfunc, njit

from plant_models.contract.columns import Columns

from plant_models.run.compiled import FED, STAGE_SIGNATURE, CompiledStage, f64_at, i64_at
from plant_models.run.ring import TI_SCENARIO

# Without nogil, like the state ring's writer: the tick keeps the GIL (see plant_models.run.ring).
JIT = dict(cache=True)

QUEUE_HEADER = Columns("the hand-over queue's header slots (int64)", (
    ("Q_PUT", "rows filled by the producer so far"),
    ("Q_GOT", "rows taken by the tick so far"),
    ("Q_SCENARIO", "rows taken but not applied because a scenario drove the inputs"),
    ("Q_APPLIED", "rows applied"),
    ("Q_ACK_AT", "index in the ack array where the seq of the last applied command goes (-1: nowhere)"),
    (None, "spare", 3),
), count="N_Q")
globals().update(QUEUE_HEADER.constants())  # Q_PUT .. Q_ACK_AT; N_Q = 8

ROW_META = Columns("a queued row's metadata columns (int64)", (
    ("M_SEQ", "the command's seq (0: none given)"),
    ("M_COUNT", "inputs set by this row"),
))
globals().update(ROW_META.constants())  # M_SEQ, M_COUNT


@njit("int64(int64[::1], int64[:, ::1], int64[:, ::1], float64[:, ::1], float64[::1], float64[::1], int64[::1], "
      "boolean, int64)", **JIT)
def apply_rows(q, meta, idx, val, u, u_rate, ack, drive, max_rows):
    """Apply (``drive``) or drop up to ``max_rows`` waiting rows in order; returns how many were applied.

    Each applied row sets its inputs (held: rate 0); the ``seq`` of the last
    applied row with a non-zero ``seq`` goes to ``ack[q[Q_ACK_AT]]``.
    Called in the real-time loop.
    """
    cap = meta.shape[0]
    got = q[Q_GOT]  # noqa: F821
    end = min(q[Q_PUT], got + max_rows)  # noqa: F821
    applied = 0
    while got < end:
        r = got % cap
        if drive:
            for j in range(meta[r, M_COUNT]):  # noqa: F821
                k = idx[r, j]
                u[k] = val[r, j]
                u_rate[k] = 0.0
            s = meta[r, M_SEQ]  # noqa: F821
            if s != 0 and q[Q_ACK_AT] >= 0:  # noqa: F821
                ack[q[Q_ACK_AT]] = s  # noqa: F821
            applied += 1
        else:
            q[Q_SCENARIO] += 1  # noqa: F821
        got += 1
    q[Q_GOT] = got  # noqa: F821
    q[Q_APPLIED] += applied  # noqa: F821
    return applied


@cfunc(STAGE_SIGNATURE, cache=True)
def apply_rows_stage(ctx, k, now_ns, dt, carry):
    """Stage ``commanded``: what the adapter's ``read`` does, as a compiled stage (``plant_models.run.compiled``):
    when rows wait, :func:`apply_rows` on array views of the addresses in ``ctx``, driving the inputs unless a
    scenario does (``tick_info[TI_SCENARIO]``); returns ``FED`` when it applied a row (the watchdog is fed).

    ``ctx``: [q, meta, idx, val, u, u_rate, ack, tick_info, rows, row width, max rows per tick, inputs, ack
    length] (:meth:`CommandRows.compiled_stage`).  Called in the real-time loop.
    """
    q = carray(i64_at(ctx[0]), (N_Q,))  # noqa: F821
    if q[Q_PUT] == q[Q_GOT]:  # noqa: F821
        return 0
    cap, width, n_in = ctx[8], ctx[9], ctx[11]
    applied = apply_rows(q, carray(i64_at(ctx[1]), (cap, 2)), carray(i64_at(ctx[2]), (cap, width)),
                         carray(f64_at(ctx[3]), (cap, width)), carray(f64_at(ctx[4]), (n_in,)),
                         carray(f64_at(ctx[5]), (n_in,)), carray(i64_at(ctx[6]), (ctx[12],)),
                         i64_at(ctx[7])[TI_SCENARIO] == 0, ctx[10])
    return FED if applied else 0


class CommandRows:
    """A queue of validated input updates from one transport to the tick.

    Parameters
    ----------
    n_in
        The plant's input count (the widest update).
    capacity
        Rows: updates that may wait for the tick at once.
    ack
        The int64 array whose slot ``ack_at`` receives the ``seq`` of the last
        applied command (the state ring's head, see
        :meth:`plant_models.run.ring.StateRing.claim_aux`); None: no ack.
    ack_at
        The slot in ``ack``.
    """

    def __init__(self, n_in: int, capacity: int = 64, ack: np.ndarray | None = None, ack_at: int = -1):
        self.capacity = int(capacity)
        self.q = np.zeros(N_Q, dtype=np.int64)  # noqa: F821
        self.meta = np.zeros((self.capacity, 2), dtype=np.int64)
        self.idx = np.zeros((self.capacity, max(n_in, 1)), dtype=np.int64)
        self.val = np.zeros((self.capacity, max(n_in, 1)), dtype=np.float64)
        self.ack = ack if ack is not None else np.zeros(1, dtype=np.int64)
        self.q[Q_ACK_AT] = ack_at if ack is not None else -1  # noqa: F821

    # -- the producer (between ticks) ----------------------------------------------------------------
    def free(self) -> int:
        """Rows the producer may still fill."""
        return self.capacity - (int(self.q[Q_PUT]) - int(self.q[Q_GOT]))  # noqa: F821

    def put(self, seq: int, idx: np.ndarray, val: np.ndarray, count: int) -> bool:
        """Hand over one validated update; False (nothing done) if every row is taken.  Not for the tick."""
        p = int(self.q[Q_PUT])  # noqa: F821
        if p - int(self.q[Q_GOT]) >= self.capacity:  # noqa: F821
            return False
        r = p % self.capacity
        self.meta[r, 0] = seq
        self.meta[r, 1] = count
        self.idx[r, :count] = idx[:count]
        self.val[r, :count] = val[:count]
        self.q[Q_PUT] = p + 1  # noqa: F821 last: the row is complete before the tick can see it
        return True

    def scenario_rejected(self) -> int:
        """Rows the tick dropped because a scenario drove the inputs (since the queue was made)."""
        return int(self.q[Q_SCENARIO])  # noqa: F821

    @property
    def applied(self) -> int:
        """Rows the tick applied (since the queue was made)."""
        return int(self.q[Q_APPLIED])  # noqa: F821

    # -- the consumer (the tick) ---------------------------------------------------------------------
    def waiting(self) -> bool:
        """Whether rows wait for the tick (the tick itself compares ``q[Q_PUT]`` and ``q[Q_GOT]``)."""
        return int(self.q[Q_PUT]) != int(self.q[Q_GOT])  # noqa: F821

    def compiled_stage(self, u: np.ndarray, u_rate: np.ndarray, tick_info: np.ndarray, max_rows: int) -> CompiledStage:
        """The compiled form of the ``commanded`` stage for this queue: what :meth:`apply` does, gated by
        ``tick_info[TI_SCENARIO]`` and feeding the watchdog as ``Adapter.read`` does (:func:`apply_rows_stage`)."""
        return CompiledStage.of("commanded", apply_rows_stage, (
            self.q, self.meta, self.idx, self.val, u, u_rate, self.ack, tick_info, self.capacity, self.idx.shape[1],
            max_rows, u.shape[0], self.ack.shape[0]))

    def apply(self, u: np.ndarray, u_rate: np.ndarray, drive: bool, max_rows: int) -> int:
        """Apply (or, not ``drive``, drop) the waiting rows; returns how many were applied.

        Called in the real-time loop.
        """
        return apply_rows(self.q, self.meta, self.idx, self.val, u, u_rate, self.ack, drive, max_rows)


__all__ = ["CommandRows", "apply_rows", "apply_rows_stage", "Q_PUT", "Q_GOT"]
