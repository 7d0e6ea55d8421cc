"""The bus frames of a recording: every frame a CAN adapter sends or receives, with its tick, spooled to a file.

While the server records (``[recording]``, ``record_start``), each CAN
adapter writes its traffic to a spool file in the recording's folder; the
recording writer (:mod:`server.recording.writer`, another process) reads it
and puts the frames beside the signals of each MF4 file as ASAM MDF bus
logging (:mod:`io_adapters.can.bus_mdf`).  A frame carries the tick
whose row of the state ring holds its values:

* a sent frame, the tick that packed it (:func:`~io_adapters.can.frames.tx_log`
  copies the packed payloads into a preallocated ring in the same compiled
  call style as the send queue: the tick allocates nothing and waits for
  nothing; a full ring drops the frame and counts it);
* a received frame, the tick whose ``read`` takes it from the mailbox (the
  one after the last read, so the row after that tick's step shows it in the
  inputs); a tick that finds the mailbox busy takes it one tick later.

A thread of the adapter empties the ring and the receive queue into the
file every few milliseconds and flushes it, so the writer sees frames about
as soon as their rows.  :meth:`BusSpool.close` writes what is left and an
end record (``tick = -1``, ``frame_id`` = the number of frames before it),
so the writer knows it has every frame; without it (the server killed) the
writer takes what the file holds.

Records are :data:`RECORD` (80 bytes, little-endian), flags :data:`F_*`.
"""

from __future__ import annotations

import queue
import threading
from pathlib import Path

import numpy as np

from . import frames

RECORD = np.dtype([("tick", "<i8"), ("frame_id", "<u4"), ("flags", "u1"), ("length", "u1"), ("pad", "<u2"),
                   ("data", "u1", (frames.MAX_PAYLOAD,))])
F_EXTENDED = 1  # 29-bit identifier
F_FD = 2  # CAN FD frame
F_BRS = 4  # CAN FD bit-rate switch
F_RX = 8  # received by the adapter (else sent by it)
END_TICK = -1  # the end record: frame_id holds the number of frame records before it

TX_RING_FRAMES = 16384  # 16 ticks' worth of 1000 frames, or 2 s of the Powershift's ~8 frames a tick
FLUSH_S = 0.005


class BusSpool:
    """Spools one adapter's traffic to ``path`` (see the module docstring).

    Parameters
    ----------
    path
        The spool file (created; an existing one is replaced).
    tx_ids, tx_flags, tx_lengths
        Per transmit message row of the codec: frame ID, :data:`F_*` flags, payload length.
    """

    def __init__(self, path: str | Path, tx_ids, tx_flags, tx_lengths):
        self.path = Path(path)
        self._f = open(self.path, "wb")
        self._ids = np.asarray(tx_ids, dtype=np.uint32)
        self._flags = np.asarray(tx_flags, dtype=np.uint8)
        self._lengths = np.asarray(tx_lengths, dtype=np.uint8)
        self.meta = np.zeros((TX_RING_FRAMES, 2), dtype=np.int64)  # (tick, transmit row) per slot
        self.data = np.zeros((TX_RING_FRAMES, frames.MAX_PAYLOAD), dtype=np.uint8)
        self.state = np.zeros(frames.Q_COLS, dtype=np.int64)
        self._rx: queue.SimpleQueue = queue.SimpleQueue()
        self.written = 0
        self.rx_skipped = 0  # error and remote frames: bus logging here holds data frames
        self.errors = 0
        self.error: str | None = None
        self._stop = threading.Event()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="can-bus-spool", daemon=True)
        self._thread.start()

    # -- producers --------------------------------------------------------------------------
    def log_tx(self, codec, tick: int, n_due: int) -> None:
        """The ``n_due`` frames :func:`~io_adapters.can.frames.tx_pack` just packed.  Called in the real-time loop."""
        frames.tx_log(codec.ci, codec.cb, n_due, tick, self.meta, self.data, self.state)

    def put_rx(self, tick: int, msg) -> None:
        """A received frame (receive thread, or between ticks).  Never blocks."""
        if msg.is_error_frame or msg.is_remote_frame:
            self.rx_skipped += 1
            return
        flags = (F_RX | (F_EXTENDED if msg.is_extended_id else 0) | (F_FD if msg.is_fd else 0)
                 | (F_BRS if msg.bitrate_switch else 0))
        self._rx.put((tick, msg.arbitration_id, flags, bytes(msg.data or b"")[:frames.MAX_PAYLOAD]))

    def put_frame(self, tick: int, frame_id: int, flags: int, data: bytes) -> None:
        """A frame sent by Python code between ticks (the J1939 rest-bus); ``flags`` without F_RX.  Never blocks."""
        self._rx.put((tick, frame_id, flags, bytes(data)[:frames.MAX_PAYLOAD]))

    # -- the spool thread -------------------------------------------------------------------------
    def _drain(self) -> None:
        recs = []
        st = self.state
        head, tail = int(st[frames.Q_HEAD]), int(st[frames.Q_TAIL])
        if head > tail:
            slots = np.arange(tail, head) % TX_RING_FRAMES
            m = self.meta[slots, 1]
            r = np.zeros(len(slots), dtype=RECORD)
            r["tick"] = self.meta[slots, 0]
            r["frame_id"] = self._ids[m]
            r["flags"] = self._flags[m]
            r["length"] = self._lengths[m]
            r["data"] = self.data[slots]
            st[frames.Q_TAIL] = head
            recs.append(r)
        rx = []
        while True:
            try:
                rx.append(self._rx.get_nowait())
            except queue.Empty:
                break
        if rx:
            r = np.zeros(len(rx), dtype=RECORD)
            for k, (tick, fid, flags, data) in enumerate(rx):
                r["tick"][k] = tick
                r["frame_id"][k] = fid
                r["flags"][k] = flags
                r["length"][k] = len(data)
                r["data"][k, :len(data)] = np.frombuffer(data, dtype=np.uint8)
            recs.append(r)
        for r in recs:
            self._write(r)

    def _write(self, r: np.ndarray) -> None:
        if not len(r) or self.error is not None:
            if len(r):
                self.errors += len(r)
            return
        try:
            self._f.write(r.tobytes())
            self._f.flush()
            self.written += int(np.count_nonzero(r["tick"] != END_TICK))
        except OSError as exc:  # a full disk: counted, the recording's status says so
            self.errors += len(r)
            self.error = f"{self.path.name}: {exc.strerror or exc}"

    def _run(self) -> None:
        while not self._stop.wait(FLUSH_S):
            self._drain()

    def close(self) -> dict:
        """Write every frame logged so far and the end record, close the file; returns :meth:`status`.  Idempotent."""
        if not self._closed:
            self._closed = True
            self._stop.set()
            self._thread.join()
            self._drain()
            end = np.zeros(1, dtype=RECORD)
            end["tick"] = END_TICK
            end["frame_id"] = self.written
            self._write(end)
            try:
                self._f.close()
            except OSError as exc:
                self.error = self.error or f"{self.path.name}: {exc.strerror or exc}"
        return self.status()

    def status(self) -> dict:
        return {"file": self.path.name, "frames": self.written, "dropped": int(self.state[frames.Q_DROPPED]),
                "skipped": self.rx_skipped, "errors": self.errors, **({"error": self.error} if self.error else {})}


def read_records(path: str | Path, offset: int = 0) -> tuple[np.ndarray, int, bool]:
    """The whole records of a spool file from byte ``offset``: (frame records, next offset, end record seen)."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            raw = f.read()
    except FileNotFoundError:
        return np.zeros(0, dtype=RECORD), offset, False
    n = len(raw) // RECORD.itemsize
    recs = np.frombuffer(raw[:n * RECORD.itemsize], dtype=RECORD)
    ended = bool(n and (recs["tick"] == END_TICK).any())
    return recs[recs["tick"] != END_TICK].copy(), offset + n * RECORD.itemsize, ended


__all__ = ["BusSpool", "RECORD", "F_EXTENDED", "F_FD", "F_BRS", "F_RX", "END_TICK", "read_records"]
