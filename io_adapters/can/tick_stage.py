"""The CAN adapter's part of the compiled tick, and the mailbox lock it shares with the receive thread.

The receive thread posts checked frames into the codec's mailbox
(:func:`~io_adapters.can.frames.rx_frame`) while holding the mailbox lock;
the tick takes the mailbox's new values (:func:`~io_adapters.can.frames.rx_apply`)
only if it can take the lock at once, and otherwise applies nothing new this
tick (the values wait for the next one): a tick never waits.  The lock is an
int64 word taken with a compare-and-swap (:func:`plant_models.run.compiled.try_lock_at`),
so compiled code can try it as well as Python: :class:`MailboxLock`.

:func:`can_read_stage` and :func:`can_write_stage` are the compiled forms
(:mod:`plant_models.run.compiled`) of :meth:`CanAdapter.read` and of its
``write`` in realtime mode (pack the due messages, keep them in a recording's
bus log, queue them for sending between ticks).
"""

from __future__ import annotations

import time

import numpy as np
from numba import carray, cfunc, njit

from plant_models.core.api import raw_i
from plant_models.run.compiled import (FED, STAGE_SIGNATURE, CompiledStage, f64_at, i64_at, try_lock, try_lock_at,
                                       u8_at, unlock, unlock_at)
from plant_models.run.ring import TI_SCENARIO, TICK_INFO_SLOTS

from . import frames
from .frames import JIT_TICK, Q_COLS, Q_HEAD, rx_apply, tx_enqueue, tx_log, tx_pack


class MailboxLock:
    """The mailbox lock: an int64 word (0 free, 1 taken) in :attr:`word`.

    The receive thread takes it with ``with lock:`` (it waits, yielding, while
    the tick holds it, about a microsecond); the tick only tries it
    (:func:`rx_apply_locked`).
    """

    def __init__(self):
        self.word = np.zeros(1, dtype=np.int64)

    def __enter__(self) -> "MailboxLock":
        while not try_lock(self.word):
            time.sleep(0)
        return self

    def __exit__(self, *exc) -> None:
        unlock(self.word)


@njit(**JIT_TICK)
def rx_apply_locked(word, tick, drive, ci, cf, df):
    """:func:`~io_adapters.can.frames.rx_apply`, taking the mailbox's new values only if the lock word is free
    now (else the values wait for the next tick).  Called in the real-time loop."""
    p = raw_i(word)
    # one call with the lock's outcome (a bool), not one call each with the constant True and False: numba compiled
    # rx_apply for each constant, twice more than the Python caller's (bool) specialisation
    took = try_lock_at(p)
    r = rx_apply(tick, took, drive, ci, cf, df)
    if took:
        unlock_at(p)
    return r


@cfunc(STAGE_SIGNATURE, cache=True)
def can_read_stage(ctx, k, now_ns, dt, carry):
    """Stage ``commanded``: :func:`rx_apply_locked` of step k; ``FED`` while every required message is fresh.

    ``ctx``: [lock word, ci, ci's length, cf, cf's length, df, df's length, tick_info] (:func:`read_stage`).
    Called in the real-time loop.
    """
    drive = i64_at(ctx[7])[TI_SCENARIO] == 0
    fresh = rx_apply_locked(carray(i64_at(ctx[0]), (1,)), k, drive, carray(i64_at(ctx[1]), (ctx[2],)),
                            carray(f64_at(ctx[3]), (ctx[4],)), carray(f64_at(ctx[5]), (ctx[6],)))
    return FED if fresh else 0


@cfunc(STAGE_SIGNATURE, cache=True)
def can_write_stage(ctx, k, now_ns, dt, carry):
    """Stage ``send`` in realtime: pack the messages due at tick k + 1, keep them in the bus log (when one
    records), queue them for sending between ticks.

    ``ctx``: [ci, ci's length, cf, cf's length, cb, cb's length, df, df's length, tick_info, queue rows,
    queue ids, queue payloads, queue state, bus log on, log rows, log meta, log payloads, log state, marks'
    length, marks' queue heads, marks' clocks, marks written] (:func:`write_stage`): after queueing, the
    queue's head and the tick's clock go into the next mark (the adapter's count of how long a frame waited
    to be sent).  Called in the real-time loop.
    """
    ci, cf = carray(i64_at(ctx[0]), (ctx[1],)), carray(f64_at(ctx[2]), (ctx[3],))
    cb = carray(u8_at(ctx[4]), (ctx[5],))
    n_due = tx_pack(k + 1, ci, cf, cb, carray(f64_at(ctx[6]), (ctx[7],)), carray(i64_at(ctx[8]), (TICK_INFO_SLOTS,)))
    if n_due == 0:
        return 0
    if ctx[13]:
        rows = ctx[14]
        tx_log(ci, cb, n_due, k + 1, carray(i64_at(ctx[15]), (rows, 2)),
               carray(u8_at(ctx[16]), (rows, frames.MAX_PAYLOAD)), carray(i64_at(ctx[17]), (Q_COLS,)))
    q_rows = ctx[9]
    q_state = carray(i64_at(ctx[12]), (Q_COLS,))
    tx_enqueue(ci, cb, n_due, carray(i64_at(ctx[10]), (q_rows,)), carray(u8_at(ctx[11]), (q_rows, frames.MAX_PAYLOAD)),
               q_state)
    n_marks = ctx[18]
    written = carray(i64_at(ctx[21]), (1,))
    m = written[0]
    carray(i64_at(ctx[19]), (n_marks,))[m % n_marks] = q_state[Q_HEAD]
    carray(i64_at(ctx[20]), (n_marks,))[m % n_marks] = now_ns
    written[0] = m + 1
    return 0


def read_stage(lock: MailboxLock, codec, df: np.ndarray, tick_info: np.ndarray) -> CompiledStage:
    """The compiled form of the adapter's ``read``."""
    return CompiledStage.of("commanded", can_read_stage, (
        lock.word, codec.ci, codec.ci.shape[0], codec.cf, codec.cf.shape[0], df, df.shape[0], tick_info))


def write_stage(codec, df: np.ndarray, tick_info: np.ndarray, q_msg: np.ndarray, q_data: np.ndarray,
                q_state: np.ndarray, spool, marks: tuple[np.ndarray, np.ndarray, np.ndarray]) -> CompiledStage:
    """The compiled form of the adapter's ``write`` in realtime (``spool``: the recording's bus log, or None;
    ``marks``: the queue heads, clocks and count of the ticks that queued frames)."""
    log = (1, spool.meta.shape[0], spool.meta, spool.data, spool.state) if spool is not None else \
        (0, 1, q_state, q_state, q_state)  # no log: addresses never read
    return CompiledStage.of("send", can_write_stage, (
        codec.ci, codec.ci.shape[0], codec.cf, codec.cf.shape[0], codec.cb, codec.cb.shape[0], df, df.shape[0],
        tick_info, q_msg.shape[0], q_msg, q_data, q_state) + log + (marks[0].shape[0],) + marks)


__all__ = ["MailboxLock", "can_read_stage", "can_write_stage", "read_stage", "rx_apply_locked", "write_stage"]
