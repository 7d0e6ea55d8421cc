"""The state ring: one preallocated row per tick, read by any number of consumers at their own pace.

The real-time tick ends by writing its state into the next row of a ring
(one compiled call: no allocation, no lock, no Python object) and returns.
Everything that turns that state into bytes for the outside world (the
ZeroMQ state stream, a recording of chosen signals, a dashboard) reads the
ring later, outside the tick, through its own :class:`Cursor`: each consumer
has its own read position and decimation, and counts the rows it lost when
it fell more than the ring's length behind.  The writer never waits for a
consumer and never knows how many there are.

Row layout
----------
Two arrays of ``capacity`` rows, the integers and the floats of a row:

``ints`` (int64), columns:

* :data:`I_SEQ`: row number since the ring was made, 1, 2, ...; never reset
  (a consumer that sees a jump lost rows);
* :data:`I_TICK`: plant steps taken since the last reset, after this tick;
* :data:`I_WALL_NS`: the time the tick began (``now_ns`` of the tick: the
  monotonic clock in ns in realtime mode, simulated time in ns in lockstep
  and afap);
* :data:`I_WATCHDOG`, :data:`I_STATUS`, :data:`I_SCENARIO`,
  :data:`I_OVERRUNS`, :data:`I_FAULTS`: the loop's ``tick_info`` slots after
  the step (the watchdog is tripped, the step's status word, a scenario
  drives the inputs, the loop's overrun count, the number of active injected
  faults);
* :data:`I_AUX` + k: aux value k, one per name claimed with
  :meth:`StateRing.claim_aux` before the first tick (the ZeroMQ adapter keeps
  the ``seq`` of the last command it applied there, its ``ack``); the tick's
  readers write ``ring.aux[k]`` and every row copies the current values.

``floats`` (float64), columns:

* :data:`F_TIME`: simulated time after this tick, s;
* :attr:`StateRing.f_y` + j: output j after this tick, in the plant's
  declared order and units;
* :attr:`StateRing.f_u` + i: input i as the step used it (the value at the
  end of the step for an input with a rate), declared order and units.

API
---
* ``StateRing.for_plant(plant, capacity)`` makes a ring for a plant's ports;
  :meth:`StateRing.claim_aux` reserves an aux column by name (at start-up);
* :meth:`StateRing.push` (the loop, once per tick, after the step; called in
  the real-time loop);
* ``ring.cursor(every=1)`` makes a :class:`Cursor`; ``cursor.take(max_rows)``
  copies the next rows (those whose tick is a multiple of ``every``) into the
  cursor's own preallocated arrays ``cursor.ints`` / ``cursor.floats`` and
  returns how many; ``cursor.lost`` counts the rows (of this decimation) that
  were overwritten before the consumer read them, ``cursor.selected`` every
  row of this decimation it consumed or lost, so ``selected - n + j + 1`` is
  a sequence number for row j of the last take that rises by one per row
  and jumps over lost ones; ``cursor.pending()`` is what is waiting.

Threads and processes
---------------------
In one process the writer and the cursors' copies are compiled calls that
keep the GIL, so a copy never sees half a row.  A consumer in another
process (a ring made with ``shared=True`` and opened with
:meth:`StateRing.attach`) may race the writer: :meth:`Cursor.take` checks the
row numbers it copied against the writer's count *after* the copy and drops
(and counts as lost) any row the writer may have been overwriting meanwhile.
The last row slot is kept free for that check, so a ring of ``capacity``
rows holds ``capacity - 1`` unread rows.

The recording of chosen signals at a decimation and a dashboard read it the
same way as the ZeroMQ adapter's publisher (:meth:`io_adapters.zmq.adapter.ZmqAdapter.pump`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import numpy as np
from numba import njit

from ..contract.columns import Columns

if TYPE_CHECKING:  # pragma: no cover
    from plant_models.plant import Plant

# -- the tick-info slots (int64), written by the loop, read by adapters each tick and copied into every row ------
# (here, in the ring's own file, because the compiled ring_push inlines them and numba keys its cache to this file)
TICK_INFO = Columns("the tick-info slots", (
    ("TI_WATCHDOG", "1 while the command watchdog is tripped"),
    ("TI_STATUS", "status word of the last plant step"),
    ("TI_SCENARIO", "1 while a loaded scenario drives the inputs (commands are not applied)"),
    ("TI_OVERRUNS", "the loop's overrun count, copied there whenever the loop counts an overrun"),
    ("TI_FAULTS", "number of active injected faults (server/realtime/faults.py), written when one is set or cleared"),
), count="TICK_INFO_SLOTS")
globals().update(TICK_INFO.constants())  # TI_WATCHDOG .. TI_FAULTS; TICK_INFO_SLOTS


def new_tick_info() -> np.ndarray:
    """A zeroed ``tick_info`` array (int64, :data:`TICK_INFO_SLOTS` slots)."""
    return np.zeros(TICK_INFO_SLOTS, dtype=np.int64)  # noqa: F821


# Compiled without nogil on purpose: called from the tick, a nogil function releases the GIL and any other
# thread waiting for it takes it, so the tick would wait to get it back.
JIT = dict(cache=True)

# -- header slots (int64) ------------------------------------------------------------------------------------
N_AUX = 8  # aux columns a ring has room for
HEADER = Columns("the ring's header (int64)", (
    ("H_WRITTEN", "rows written so far (= I_SEQ of the newest row)"),
    ("H_CAPACITY", "rows the ring holds"),
    ("H_N_INT", "int columns per row"),
    ("H_N_FLOAT", "float columns per row"),
    ("H_N_OUT", "plant outputs per row"),
    ("H_N_IN", "plant inputs per row"),
    ("H_Y_OFF", "index of output 0 in the plant's df"),
    ("H_U_OFF", "index of input 0 in the plant's df"),
    ("H_N_AUX", "aux columns per row"),
    (None, "spare", 7),
    ("H_AUX", "[N_AUX] aux values: the current value of every claimed aux column", N_AUX),
), count="N_HEADER")
globals().update(HEADER.constants())  # H_WRITTEN .. H_AUX; N_HEADER

# -- int columns ---------------------------------------------------------------------------------------------
INT_COLUMNS = Columns("a row's int columns", (
    ("I_SEQ", "row number since the ring was made (1, 2, ...)"),
    ("I_TICK", "plant steps since the last reset, after this tick"),
    ("I_WALL_NS", "the tick's now_ns: monotonic ns (realtime) or simulated ns (lockstep, afap)"),
    ("I_TI", "[TICK_INFO_SLOTS] the loop's tick_info slots, in their order (I_WATCHDOG, ... below)",
     TICK_INFO_SLOTS),  # noqa: F821
    ("I_AUX", "[N_AUX] aux column k is I_AUX + k", N_AUX),
), count="N_INT")
globals().update(INT_COLUMNS.constants())  # I_SEQ .. I_AUX; N_INT
# the tick-info slots within the row: I_WATCHDOG = I_TI + TI_WATCHDOG, I_STATUS, I_SCENARIO, I_OVERRUNS, I_FAULTS
globals().update(TICK_INFO.shifted(I_TI, "TI_", "I_"))  # noqa: F821

# -- float columns -------------------------------------------------------------------------------------------
FLOAT_COLUMNS = Columns("a row's float columns", (
    ("F_TIME", "simulated time after this tick, s"),
    ("F_Y", "outputs follow, then inputs (StateRing.f_y, StateRing.f_u); sized by the plant", 0),
))
globals().update(FLOAT_COLUMNS.constants())  # F_TIME, F_Y

# -- cursor slots (int64) ------------------------------------------------------------------------------------
CURSOR = Columns("a reader's cursor (int64)", (
    ("C_NEXT", "I_SEQ of the next row to read"),
    ("C_LOST", "rows of this decimation overwritten before they were read"),
    ("C_SELECTED", "rows of this decimation consumed or lost"),
    ("C_LAST_TICK", "I_TICK of the last row read (-1: none yet)"),
    ("C_EVERY", "decimation: rows whose tick is a multiple of this"),
    ("C_READ", "rows copied out"),
    (None, "spare", 2),
), count="N_CURSOR")
globals().update(CURSOR.constants())  # C_NEXT .. C_READ; N_CURSOR


@njit("void(int64[::1], int64[:, ::1], float64[:, ::1], int64[::1], float64[::1], int64, int64, float64)", **JIT)
def ring_push(head, ints, floats, tick_info, df, tick, now_ns, t):
    """Write the next row: tick, time, ``tick_info``, aux values, outputs and inputs.  Called in the real-time loop."""
    s = head[H_WRITTEN] + 1  # noqa: F821
    cap = ints.shape[0]
    r = (s - 1) % cap
    row = ints[r]
    row[I_SEQ] = -1  # noqa: F821  a reader in another process that copies this row now sees it as incomplete
    row[I_TICK] = tick  # noqa: F821
    row[I_WALL_NS] = now_ns  # noqa: F821
    for j in range(TICK_INFO_SLOTS):  # noqa: F821
        row[I_TI + j] = tick_info[j]  # noqa: F821
    for k in range(head[H_N_AUX]):  # noqa: F821
        row[I_AUX + k] = head[H_AUX + k]  # noqa: F821
    f = floats[r]
    f[F_TIME] = t  # noqa: F821
    n_out = head[H_N_OUT]  # noqa: F821
    y0 = head[H_Y_OFF]  # noqa: F821
    for j in range(n_out):
        f[F_Y + j] = df[y0 + j]  # noqa: F821
    u0 = head[H_U_OFF]  # noqa: F821
    for i in range(head[H_N_IN]):  # noqa: F821
        f[F_Y + n_out + i] = df[u0 + i]  # noqa: F821
    row[I_SEQ] = s  # noqa: F821
    head[H_WRITTEN] = s  # noqa: F821


@njit("int64(int64[::1], int64[:, ::1], float64[:, ::1], int64[::1], int64[:, ::1], float64[:, ::1], int64)", **JIT)
def ring_take(head, ints, floats, cur, out_i, out_f, max_rows):
    """Copy up to ``max_rows`` unread rows of the cursor's decimation into ``out_i``/``out_f``; returns how many.

    Rows overwritten before they were read are skipped and counted in
    ``cur[C_LOST]`` (in rows of the decimation: exact unless the plant was
    reset within the lost rows, then rounded up).
    """
    w = head[H_WRITTEN]  # noqa: F821
    cap = ints.shape[0]
    every = cur[C_EVERY]  # noqa: F821
    nxt = cur[C_NEXT]  # noqa: F821
    oldest = w - cap + 2  # one slot is kept free: the writer may be filling the slot of w + 1 - cap
    if oldest < 1:
        oldest = 1
    if nxt < oldest:
        lost_rows = oldest - nxt
        last_tick = cur[C_LAST_TICK]  # noqa: F821
        first_tick = ints[(oldest - 1) % cap, I_TICK]  # noqa: F821
        if every == 1:
            lost = lost_rows
        elif last_tick >= 0 and first_tick - last_tick == lost_rows + 1:
            lost = (first_tick - 1) // every - last_tick // every  # ticks strictly between: no reset among them
        else:
            lost = (lost_rows + every - 1) // every
        cur[C_LOST] += lost  # noqa: F821
        cur[C_SELECTED] += lost  # noqa: F821
        nxt = oldest
    n = 0
    limit = min(max_rows, out_i.shape[0])
    n_i, n_f = ints.shape[1], floats.shape[1]
    if out_i.shape[1] != n_i or out_f.shape[1] != n_f:
        raise ValueError("ring_take: the output rows are not as wide as the ring's")
    while nxt <= w and n < limit:
        r = (nxt - 1) % cap
        tick = ints[r, I_TICK]  # noqa: F821
        if tick % every == 0:
            # element by element: a row assignment (out_i[n] = ints[r]) makes numba compile some 40 helpers
            # of its own (for its shape-mismatch message), seconds of a first start
            for c in range(n_i):
                out_i[n, c] = ints[r, c]
            for c in range(n_f):
                out_f[n, c] = floats[r, c]
            n += 1
        cur[C_LAST_TICK] = tick  # noqa: F821
        nxt += 1
    cur[C_NEXT] = nxt  # noqa: F821
    cur[C_READ] += n  # noqa: F821
    cur[C_SELECTED] += n  # noqa: F821
    return n


@njit("int64(int64[::1], int64[::1], int64[:, ::1], int64)", **JIT)
def ring_check(head, cur, out_i, n):
    """After a copy in another process: drop copied rows the writer may have overwritten meanwhile.

    Returns how many of the ``n`` copied rows are whole; the dropped ones
    (always the first ones) are counted as lost.
    """
    w = head[H_WRITTEN]  # noqa: F821
    cap = head[H_CAPACITY]  # noqa: F821
    bad = 0
    for j in range(n):
        s = out_i[j, I_SEQ]  # noqa: F821
        if s < 0 or s <= w - cap + 1:
            bad = j + 1
    if bad:
        cur[C_LOST] += bad  # noqa: F821
        cur[C_READ] -= bad  # noqa: F821
        for j in range(n - bad):  # element by element: a row assignment makes numba compile some 40 helpers of
            for c in range(out_i.shape[1]):  # its own (for its shape-mismatch message), seconds of a first start
                out_i[j, c] = out_i[j + bad, c]
    return n - bad


class StateRing:
    """A ring of ``capacity`` state rows (see the module docstring for the layout).

    Parameters
    ----------
    n_out, n_in
        The plant's output and input counts.
    y_off, u_off
        Where output 0 and input 0 sit in the plant's ``df`` buffer.
    capacity
        Rows kept, >= 4 (one slot stays free, see the module docstring).
    output_names, input_names
        The signal names of the columns, for consumers.
    shared
        Put the ring in a ``multiprocessing.shared_memory`` block (its
        ``name`` is :attr:`shm_name`) for a consumer in another process.
    """

    def __init__(self, n_out: int, n_in: int, y_off: int, u_off: int, capacity: int = 4096,
                 output_names: Sequence[str] = (), input_names: Sequence[str] = (), shared: bool = False,
                 _attach: str | None = None):
        self._shm = None
        if _attach is not None:
            from multiprocessing import shared_memory

            self._shm = shared_memory.SharedMemory(name=_attach)
            # Before Python 3.13 every process that opens a block registers it for removal at its exit; the
            # block belongs to the process that made it.
            try:
                from multiprocessing import resource_tracker

                resource_tracker.unregister(self._shm._name, "shared_memory")
            except Exception:  # the tracker's interface is private; a failure only means the old behaviour
                pass
            head = np.ndarray((N_HEADER,), dtype=np.int64, buffer=self._shm.buf)  # noqa: F821
            capacity, n_out, n_in = int(head[H_CAPACITY]), int(head[H_N_OUT]), int(head[H_N_IN])  # noqa: F821
            y_off, u_off = int(head[H_Y_OFF]), int(head[H_U_OFF])  # noqa: F821
        if capacity < 4:
            raise ValueError(f"a state ring needs at least 4 rows, got {capacity}")
        self.capacity = int(capacity)
        self.n_out = int(n_out)
        self.n_in = int(n_in)
        self.f_y = F_Y  # noqa: F821
        self.f_u = F_Y + self.n_out  # noqa: F821
        self.n_float = F_Y + self.n_out + self.n_in  # noqa: F821
        self.output_names = tuple(output_names)
        self.input_names = tuple(input_names)
        n_bytes = 8 * (N_HEADER + self.capacity * (N_INT + self.n_float))  # noqa: F821
        if shared and _attach is None:
            from multiprocessing import shared_memory

            self._shm = shared_memory.SharedMemory(create=True, size=n_bytes)
        buf = self._shm.buf if self._shm is not None else bytearray(n_bytes)
        self.head = np.ndarray((N_HEADER,), dtype=np.int64, buffer=buf)  # noqa: F821
        self.ints = np.ndarray((self.capacity, N_INT), dtype=np.int64, buffer=buf, offset=8 * N_HEADER)  # noqa: F821
        self.floats = np.ndarray((self.capacity, self.n_float), dtype=np.float64, buffer=buf,
                                 offset=8 * (N_HEADER + self.capacity * N_INT))  # noqa: F821
        self.aux = self.head[H_AUX:H_AUX + N_AUX]  # noqa: F821
        self.aux_names: list[str] = []
        if _attach is None:
            # every page touched now, so the ring's memory is resident from the start, not as it fills
            self.head[:] = 0
            self.ints[:] = 0
            self.floats[:] = 0.0
            h = self.head
            h[H_CAPACITY], h[H_N_INT], h[H_N_FLOAT] = self.capacity, N_INT, self.n_float  # noqa: F821
            h[H_N_OUT], h[H_N_IN], h[H_Y_OFF], h[H_U_OFF] = self.n_out, self.n_in, y_off, u_off  # noqa: F821
        else:
            self.aux_names = [f"aux{k}" for k in range(int(self.head[H_N_AUX]))]  # noqa: F821

    @classmethod
    def for_plant(cls, plant: "Plant", capacity: int = 4096, shared: bool = False) -> "StateRing":
        """A ring for ``plant``'s ports (outputs and inputs in declared order)."""
        return cls(plant.n_out, plant.n_in, plant.output_offset, plant.input_offset, capacity,
                   [s.name for s in plant.outputs], [s.name for s in plant.inputs], shared)

    @classmethod
    def attach(cls, shm_name: str) -> "StateRing":
        """Open a shared ring made in another process (``shared=True``) by its :attr:`shm_name`."""
        return cls(0, 0, 0, 0, _attach=shm_name)

    @property
    def shm_name(self) -> str | None:
        """Name of the shared-memory block (None for a ring in private memory)."""
        return self._shm.name if self._shm is not None else None

    @property
    def written(self) -> int:
        """Rows written so far (the ``I_SEQ`` of the newest row)."""
        return int(self.head[H_WRITTEN])  # noqa: F821

    def claim_aux(self, name: str) -> int:
        """Reserve an aux column for ``name`` (at start-up, before the first tick); returns its index k.

        Its value is ``aux[k]`` (write it in the tick), copied into column
        ``I_AUX + k`` of every row.  Claiming a name again returns its index.
        """
        if name in self.aux_names:
            return self.aux_names.index(name)
        if len(self.aux_names) >= N_AUX:
            raise ValueError(f"the state ring has {N_AUX} aux columns, all claimed: {', '.join(self.aux_names)}")
        self.aux_names.append(name)
        self.head[H_N_AUX] = len(self.aux_names)  # noqa: F821
        return len(self.aux_names) - 1

    def aux_slot(self, k: int) -> int:
        """Index of aux value k in :attr:`head` (for compiled code that writes it through the head array)."""
        return H_AUX + int(k)  # noqa: F821

    def push(self, tick_info: np.ndarray, df: np.ndarray, tick: int, now_ns: int, t: float) -> None:
        """Write the state after this tick's step (see :func:`ring_push`).  Called in the real-time loop."""
        ring_push(self.head, self.ints, self.floats, tick_info, df, tick, now_ns, t)

    def cursor(self, every: int = 1, batch: int = 256, from_now: bool = True) -> "Cursor":
        """A new consumer with its own read position (from the next row written, or ``from_now=False``: the oldest)."""
        return Cursor(self, every, batch, from_now)

    def close(self, unlink: bool = False) -> None:
        """Release the shared-memory block (``unlink``: also remove it; the process that made it does)."""
        if self._shm is not None:
            self.head = self.ints = self.floats = self.aux = None
            self._shm.close()
            if unlink:
                self._shm.unlink()
            self._shm = None


class Cursor:
    """One consumer's read position in a :class:`StateRing`, with its decimation and lost-row count.

    Parameters
    ----------
    ring
        The ring read.
    every
        Take only rows whose tick is a multiple of ``every``.
    batch
        Rows one :meth:`take` copies at most (the size of :attr:`ints` and
        :attr:`floats`).
    from_now
        Start at the next row written (default) or at the oldest row held.
    """

    def __init__(self, ring: StateRing, every: int = 1, batch: int = 256, from_now: bool = True):
        if every < 1:
            raise ValueError(f"every must be >= 1, got {every}")
        self.ring = ring
        self.state = np.zeros(N_CURSOR, dtype=np.int64)  # noqa: F821
        self.state[C_EVERY] = every  # noqa: F821
        self.state[C_LAST_TICK] = -1  # noqa: F821
        w = ring.written
        self.state[C_NEXT] = w + 1 if from_now else max(1, w - ring.capacity + 2)  # noqa: F821
        self.ints = np.zeros((max(int(batch), 1), N_INT), dtype=np.int64)  # noqa: F821
        self.floats = np.zeros((max(int(batch), 1), ring.n_float), dtype=np.float64)
        self._remote = ring.shm_name is not None

    def take(self, max_rows: int | None = None) -> int:
        """Copy the next unread rows (at most ``max_rows``, at most the batch) into :attr:`ints`/:attr:`floats`.

        Returns the number of rows copied; lost rows are skipped and counted.
        Never waits.
        """
        r = self.ring
        n = ring_take(r.head, r.ints, r.floats, self.state, self.ints, self.floats,
                      self.ints.shape[0] if max_rows is None else max_rows)
        if self._remote and n:
            n = ring_check(r.head, self.state, self.ints, n)
        return n

    def pending(self) -> int:
        """Rows written and not yet read or skipped (of every tick, before decimation)."""
        return max(0, self.ring.written - int(self.state[C_NEXT]) + 1)  # noqa: F821

    def skip_to_now(self) -> None:
        """Forget the unread rows without counting them as lost (e.g. nobody was listening)."""
        self.state[C_NEXT] = self.ring.written + 1  # noqa: F821

    @property
    def lost(self) -> int:
        """Rows of this decimation overwritten before this consumer read them."""
        return int(self.state[C_LOST])  # noqa: F821

    @property
    def selected(self) -> int:
        """Rows of this decimation consumed or lost so far."""
        return int(self.state[C_SELECTED])  # noqa: F821

    @property
    def read(self) -> int:
        """Rows copied out so far."""
        return int(self.state[C_READ])  # noqa: F821


__all__ = ["TI_WATCHDOG", "TI_STATUS", "TI_SCENARIO", "TI_OVERRUNS", "TI_FAULTS", "TICK_INFO_SLOTS", "new_tick_info",
           "StateRing", "Cursor", "ring_push", "ring_take", "ring_check", "I_SEQ", "I_TICK", "I_WALL_NS",
           "I_WATCHDOG", "I_STATUS", "I_SCENARIO", "I_OVERRUNS", "I_FAULTS", "I_AUX", "N_INT", "F_TIME", "F_Y", "N_AUX"]
