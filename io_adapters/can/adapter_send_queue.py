"""The CAN adapter's realtime send queue: frames the tick packed, sent between ticks (a part of the adapter class).

In realtime the compiled write stage copies the frames due this tick into a
preallocated ring (``_txq_msg``: transmit row, ``_txq_data``: payload,
``_txq_state``: head, tail and drops, slots ``frames.Q_*``), and
:meth:`CanSendQueue.pump` sends them, oldest first, between ticks.  Per tick
that queued frames a *mark* keeps the queue's head after it and the tick's
clock, so that a pump knows how long its oldest frame waited (the status's
``queue_wait_us`` histogram and ``queue_wait_max_us``).

:class:`CanSendQueue` is a base class of
:class:`~io_adapters.can.adapter.CanAdapter` rather than an object of its
own: the compiled write stage, the tests and the status read the arrays as
the adapter's attributes, and a pump sends through the adapter's
``_send`` (which keeps the NM gate, the bus and the recording).
"""

from __future__ import annotations

import time

import numpy as np

from . import frames

TX_QUEUE_FRAMES = 4096  # realtime send queue: 50 ms of 80 frames a tick at 1 kHz (the loop serves at least every 50 ms)
TX_MARKS = 256  # ticks whose queued frames are remembered with the tick's clock (the send queue's wait, status)
TX_WAIT_EDGES_US = (50, 100, 200, 500, 1000, 2000, 5000)  # the histogram of that wait: below each edge, then above


class CanSendQueue:
    """The send queue's arrays, its pump and its wait statistics (module docstring); needs ``_send`` and
    ``_tx_views`` of the adapter class."""

    _txq_state = None  # allocated with the message set

    def _allocate_send_queue(self) -> None:
        self._txq_msg = np.zeros(TX_QUEUE_FRAMES, dtype=np.int64)
        self._txq_data = np.zeros((TX_QUEUE_FRAMES, frames.MAX_PAYLOAD), dtype=np.uint8)
        self._txq_state = np.zeros(frames.Q_COLS, dtype=np.int64)
        self._txq_bytes = memoryview(self._txq_data.reshape(-1))  # payload slices for bytearray assignment
        # per tick that queued frames: the queue's head after it and the tick's clock (ring of TX_MARKS), so that
        # a pump knows how long its oldest frame waited; written by the tick, read between ticks
        self._txq_mark_head = np.zeros(TX_MARKS, dtype=np.int64)
        self._txq_mark_ns = np.zeros(TX_MARKS, dtype=np.int64)
        self._txq_marks = np.zeros(1, dtype=np.int64)  # marks written (an array: the compiled write stage counts too)
        self._txq_mark_r = 0  # the first mark whose frames are not all sent
        self._txq_wait_hist = np.zeros(len(TX_WAIT_EDGES_US) + 1, dtype=np.int64)  # oldest frame's wait per pump
        self._txq_wait_max_ns = 0
        self._txq_depth_max = 0

    def _mark_queued(self, now_ns: int) -> None:
        """The tick that ran at ``now_ns`` queued frames up to the queue's current head (in the tick)."""
        m = int(self._txq_marks[0])
        self._txq_mark_head[m % TX_MARKS] = self._txq_state[frames.Q_HEAD]
        self._txq_mark_ns[m % TX_MARKS] = now_ns
        self._txq_marks[0] = m + 1

    def pump(self, until_ns: int = 0) -> None:
        """Between ticks: send the frames the ticks queued, oldest first, until ``until_ns`` (0: all).

        At least one frame goes out per call, and the clock is read every 8 frames.
        """
        q = self._txq_state
        if q is None:
            return
        head = int(q[frames.Q_HEAD])
        tail = int(q[frames.Q_TAIL])
        if tail == head:
            return
        cap = TX_QUEUE_FRAMES
        mono = time.monotonic_ns
        self._note_wait(tail, head, mono())
        q_msg, q_bytes, width = self._txq_msg, self._txq_bytes, frames.MAX_PAYLOAD
        while tail < head:
            slot = tail % cap
            k = int(q_msg[slot])
            self._send(k, q_bytes[slot * width:slot * width + len(self._tx_views[k])])
            tail += 1
            q[frames.Q_TAIL] = tail
            if until_ns and tail % 8 == 0 and mono() >= until_ns:
                return

    def _note_wait(self, tail: int, head: int, now_ns: int) -> None:
        """Count how long the oldest queued frame (queue index ``tail``) waited since its tick, and the queue's depth.

        Its tick is the first mark whose head is beyond ``tail``; a tick
        older than the last TX_MARKS is taken as the oldest one kept (the
        wait is then under-counted; the loop serves at least every 50 ms).
        """
        r, w = self._txq_mark_r, int(self._txq_marks[0])
        r = max(r, w - TX_MARKS)
        while r < w - 1 and self._txq_mark_head[r % TX_MARKS] <= tail:
            r += 1
        self._txq_mark_r = r
        if r >= w:
            return
        wait_ns = now_ns - int(self._txq_mark_ns[r % TX_MARKS])
        if wait_ns > self._txq_wait_max_ns:
            self._txq_wait_max_ns = wait_ns
        b = 0
        for edge in TX_WAIT_EDGES_US:
            if wait_ns < edge * 1000:
                break
            b += 1
        self._txq_wait_hist[b] += 1
        if head - tail > self._txq_depth_max:
            self._txq_depth_max = head - tail

    def _wait_histogram(self) -> dict[str, int]:
        """Pumps by how long their oldest frame waited since its tick, us: ``"<50"``, ``"50-100"``, .., ``">=5000"``."""
        e = TX_WAIT_EDGES_US
        names = [f"<{e[0]}"] + [f"{a}-{b}" for a, b in zip(e, e[1:])] + [f">={e[-1]}"]
        return {n: int(v) for n, v in zip(names, self._txq_wait_hist)}


__all__ = ["CanSendQueue", "TX_MARKS", "TX_QUEUE_FRAMES", "TX_WAIT_EDGES_US"]
