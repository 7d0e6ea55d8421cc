"""Dynamic DAQ: the lists a master allocates and fills, and the DTO packets built from state-ring rows.

Configuration (FREE_DAQ, ALLOC_DAQ, ALLOC_ODT, ALLOC_ODT_ENTRY, SET_DAQ_PTR,
WRITE_DAQ, SET_DAQ_LIST_MODE, START_STOP_*) is checked here command by
command; each method returns 0 or the standard's error code, and a refused
command changes nothing.  An ODT entry may point only into the measurement
area (:data:`~.memory.MEAS_BASE`), so a DTO is a gather of bytes from one
ring row.

Packets are built off the tick, by the adapter's thread, for many rows at
once: for each running list a template row of its packets (Ethernet header,
PID) is copied for every row on which the list fires, the data bytes of all
ODTs are gathered from the rows' float64 bytes in one numpy indexing, the
timestamp (plant time: ``tick * period`` in 1 us units, 4 bytes, wrapping)
goes after the PID of each list's first ODT, and the transport counters are
numbered in send order.  A list fires on ticks that are multiples of
``event.every * prescaler``, so a lockstep run gives the same packets
every time.  Identification is the absolute ODT number (one PID byte);
bit 7 of the PID set means packets of this list's event were lost before it
(OVERLOAD_INDICATION_PID).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import codes as C
from .a2l import MAX_DAQ, MAX_DTO, MAX_ODT_ENTRIES, MAX_ODT_ENTRY_SIZE, MAX_ODT_TOTAL
from .memory import MEAS_BASE, AddressMap

HEADER = 4  # XCP on Ethernet: LEN (2 bytes) and CTR (2 bytes), little endian
TS_BYTES = 4


@dataclass
class DaqList:
    odts: list = field(default_factory=list)  # per ODT: list of [size, byte offset] entries (size 0: unused)
    mode: int = 0
    event: int = 0
    prescaler: int = 1
    priority: int = 0
    selected: bool = False
    running: bool = False
    first_pid: int = 0
    overload: bool = False  # set the overload bit in the next packet's PID


@dataclass
class _Plan:
    """The compiled packets of one running list."""

    number: int
    every: int  # fires on ticks that are multiples of this
    event: int
    template: np.ndarray  # uint8, one row of its packets with headers and PIDs
    dst: np.ndarray  # intp: columns of the data bytes in the row
    src: np.ndarray  # intp: the bytes of the ring row they come from
    ctr_cols: np.ndarray  # intp: the low byte of each packet's CTR
    pid_cols: np.ndarray  # intp: each packet's PID
    ts_col: int  # the timestamp's first byte, -1: none
    bounds: tuple  # (start, end) of each packet in the row (for one datagram per packet)


class Daq:
    """The DAQ lists of one connection (see the module docstring)."""

    def __init__(self, amap: AddressMap):
        self.amap = amap
        self.lists: list[DaqList] = []
        self._alloc = 0  # 0 freed, 1 lists, 2 ODTs, 3 entries (the order the standard requires)
        self._ptr: tuple[int, int, int] | None = None
        self.plans: list[_Plan] = []
        self.lost = [0] * len(amap.events)  # packets of each event lost (ring overrun, send failure)

    # ------------------------------------------------------------------ allocation
    @property
    def running(self) -> bool:
        return any(d.running for d in self.lists)

    def free(self) -> int:
        self.lists = []
        self._alloc = 0
        self._ptr = None
        self.plans = []
        return 0

    def alloc_daq(self, n: int) -> int:
        if self._alloc != 0:
            return C.ERR_SEQUENCE
        if n > MAX_DAQ:
            return C.ERR_MEMORY_OVERFLOW
        self.lists = [DaqList() for _ in range(n)]
        self._alloc = 1
        return 0

    def alloc_odt(self, daq: int, n: int) -> int:
        if self._alloc not in (1, 2):
            return C.ERR_SEQUENCE
        if not 0 <= daq < len(self.lists):
            return C.ERR_OUT_OF_RANGE
        if sum(len(d.odts) for d in self.lists) - len(self.lists[daq].odts) + n > MAX_ODT_TOTAL:
            return C.ERR_MEMORY_OVERFLOW
        self.lists[daq].odts = [[] for _ in range(n)]
        self._alloc = 2
        return 0

    def alloc_odt_entry(self, daq: int, odt: int, n: int) -> int:
        if self._alloc not in (2, 3):
            return C.ERR_SEQUENCE
        if not 0 <= daq < len(self.lists) or not 0 <= odt < len(self.lists[daq].odts):
            return C.ERR_OUT_OF_RANGE
        used = sum(len(o) for d in self.lists for o in d.odts) - len(self.lists[daq].odts[odt])
        if used + n > MAX_ODT_ENTRIES:
            return C.ERR_MEMORY_OVERFLOW
        self.lists[daq].odts[odt] = [[0, 0] for _ in range(n)]
        self._alloc = 3
        return 0

    # ------------------------------------------------------------------ entries
    def set_ptr(self, daq: int, odt: int, entry: int) -> int:
        if not 0 <= daq < len(self.lists):
            return C.ERR_OUT_OF_RANGE
        d = self.lists[daq]
        if d.running:
            return C.ERR_DAQ_ACTIVE
        if not 0 <= odt < len(d.odts) or not 0 <= entry < len(d.odts[odt]):
            return C.ERR_OUT_OF_RANGE
        self._ptr = (daq, odt, entry)
        return 0

    def write(self, bit_offset: int, size: int, ext: int, address: int) -> int:
        """WRITE_DAQ at the pointer, which then moves to the next entry."""
        if self._ptr is None:
            return C.ERR_SEQUENCE
        daq, odt, entry = self._ptr
        d = self.lists[daq]
        if d.running:
            return C.ERR_DAQ_ACTIVE
        if entry >= len(d.odts[odt]):
            return C.ERR_OUT_OF_RANGE
        if bit_offset != 0xFF or ext != 0 or not 1 <= size <= MAX_ODT_ENTRY_SIZE:
            return C.ERR_OUT_OF_RANGE
        off = address - MEAS_BASE
        if off < 0 or off + size > self.amap.meas_size:
            return C.ERR_OUT_OF_RANGE
        entries = d.odts[odt]
        payload = sum(e[0] for i, e in enumerate(entries) if i != entry) + size
        if 1 + payload > MAX_DTO:
            return C.ERR_DAQ_CONFIG
        entries[entry][:] = [size, off]
        self._ptr = (daq, odt, entry + 1)
        return 0

    # ------------------------------------------------------------------ modes
    def set_mode(self, mode: int, daq: int, event: int, prescaler: int, priority: int) -> int:
        if not 0 <= daq < len(self.lists):
            return C.ERR_OUT_OF_RANGE
        d = self.lists[daq]
        if d.running:
            return C.ERR_DAQ_ACTIVE
        if mode & (C.DAQ_MODE_DIRECTION | C.DAQ_MODE_PID_OFF | C.DAQ_MODE_DTO_CTR) or mode & 0x01:
            return C.ERR_MODE_NOT_VALID  # STIM, PID off, DTO counters and alternating display are not offered
        if not 0 <= event < len(self.amap.events) or prescaler < 1:
            return C.ERR_OUT_OF_RANGE
        d.mode, d.event, d.prescaler, d.priority = mode & C.DAQ_MODE_TIMESTAMP, event, prescaler, priority
        return 0

    def get_mode(self, daq: int) -> tuple[int, DaqList | None]:
        if not 0 <= daq < len(self.lists):
            return C.ERR_OUT_OF_RANGE, None
        return 0, self.lists[daq]

    def _first_pid(self, daq: int) -> int:
        return sum(len(d.odts) for d in self.lists[:daq])

    def _check(self, daq: int) -> int:
        d = self.lists[daq]
        if not d.odts:
            return C.ERR_DAQ_CONFIG
        for i, entries in enumerate(d.odts):
            size = sum(e[0] for e in entries)
            if 1 + size + (TS_BYTES if i == 0 and d.mode & C.DAQ_MODE_TIMESTAMP else 0) > MAX_DTO:
                return C.ERR_DAQ_CONFIG
        return 0

    def start_stop(self, mode: int, daq: int) -> tuple[int, int]:
        """START_STOP_DAQ_LIST: (error, first PID)."""
        if not 0 <= daq < len(self.lists):
            return C.ERR_OUT_OF_RANGE, 0
        if mode > 2:
            return C.ERR_MODE_NOT_VALID, 0
        d = self.lists[daq]
        if mode in (1, 2):
            err = self._check(daq)
            if err:
                return err, 0
        d.first_pid = self._first_pid(daq)
        if mode == 0:
            d.running = False
        elif mode == 1:
            d.running = True
        else:
            d.selected = True
        self._compile()
        return 0, d.first_pid

    def synch(self, mode: int) -> int:
        """START_STOP_SYNCH: 0 stop all, 1 start selected, 2 stop selected."""
        if mode > 2:
            return C.ERR_MODE_NOT_VALID
        for d in self.lists:
            if mode == 0:
                d.running = False
            elif d.selected:
                d.running = mode == 1
                d.selected = False
        self._compile()
        return 0

    # ------------------------------------------------------------------ packets
    def _compile(self) -> None:
        plans = []
        events = self.amap.events
        for k, d in enumerate(self.lists):
            if d.running:
                plans.append(self._plan(k, d, events[d.event].every * d.prescaler))
        self.plans = plans

    def _plan(self, k: int, d: DaqList, every: int) -> _Plan:
        row: list[int] = []
        dst: list[int] = []
        src: list[int] = []
        ctr_cols, pid_cols, bounds = [], [], []
        ts_col = -1
        for i, entries in enumerate(d.odts):
            start = len(row)
            data = [(size, off) for size, off in entries if size]
            n = 1 + sum(s for s, _ in data) + (TS_BYTES if i == 0 and d.mode & C.DAQ_MODE_TIMESTAMP else 0)
            row += [n & 0xFF, n >> 8, 0, 0, (d.first_pid + i) & 0x7F]
            ctr_cols.append(start + 2)
            pid_cols.append(start + 4)
            if i == 0 and d.mode & C.DAQ_MODE_TIMESTAMP:
                ts_col = len(row)
                row += [0] * TS_BYTES
            for size, off in data:
                dst += range(len(row), len(row) + size)
                src += range(off, off + size)
                row += [0] * size
            bounds.append((start, len(row)))
        return _Plan(k, every, d.event, np.array(row, dtype=np.uint8), np.array(dst, dtype=np.intp),
                     np.array(src, dtype=np.intp), np.array(ctr_cols, dtype=np.intp),
                     np.array(pid_cols, dtype=np.intp), ts_col, tuple(bounds))

    def build(self, ticks: np.ndarray, row_bytes: np.ndarray, ctr: int) -> tuple[list, int]:
        """The packets of ``n`` rows (``ticks``: int64 (n,), ``row_bytes``: uint8 (n, row width)).

        Returns ``(blocks, ctr)``: the packet blocks in send order, each
        ``(plan, uint8 array of one row's packets)``, and the next transport
        counter.  Called by the adapter's thread, never by the tick.
        """
        parts = []
        for p in self.plans:
            fire = np.flatnonzero(ticks % p.every == 0)
            if fire.size == 0:
                continue
            buf = np.empty((fire.size, p.template.size), dtype=np.uint8)
            buf[:] = p.template
            if p.src.size:
                buf[:, p.dst] = row_bytes[fire][:, p.src]
            if p.ts_col >= 0:
                ts = ((ticks[fire] * self.amap.timestamp_us) & 0xFFFF_FFFF).astype("<u4")
                buf[:, p.ts_col:p.ts_col + TS_BYTES] = ts.view(np.uint8).reshape(-1, TS_BYTES)
            d = self.lists[p.number]
            if d.overload:
                buf[0, p.pid_cols[0]] |= C.OVERLOAD_PID_BIT
                d.overload = False
            parts.append((p, fire, buf))
        if not parts:
            return [], ctr
        if len(parts) == 1:
            p, fire, buf = parts[0]
            n_pk = p.ctr_cols.size
            seq = (ctr + np.arange(fire.size * n_pk, dtype=np.int64)).reshape(fire.size, n_pk) & 0xFFFF
            buf[:, p.ctr_cols] = (seq & 0xFF).astype(np.uint8)
            buf[:, p.ctr_cols + 1] = (seq >> 8).astype(np.uint8)
            return [(p, buf)], (ctr + fire.size * n_pk) & 0xFFFF
        order = sorted((int(fire[j]), i, j) for i, (_, fire, _) in enumerate(parts) for j in range(fire.size))
        blocks = []
        for _, i, j in order:
            p, _, buf = parts[i]
            blk = buf[j:j + 1]
            for c in p.ctr_cols:
                blk[0, c], blk[0, c + 1] = ctr & 0xFF, (ctr >> 8) & 0xFF
                ctr = (ctr + 1) & 0xFFFF
            blocks.append((p, blk))
        return blocks, ctr

    def note_lost(self, event_lost: list[int]) -> None:
        """Rows lost per event: their packets are counted, and the next packet of each list on such an event
        carries the overload bit."""
        for e, n in enumerate(event_lost):
            if n:
                for d in self.lists:
                    if d.running and d.event == e:
                        self.lost[e] += n * len(d.odts)
                        d.overload = True


__all__ = ["Daq", "DaqList", "HEADER", "TS_BYTES"]
