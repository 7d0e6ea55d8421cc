"""Recording CAN traffic to BLF, ASC (or any python-can log format) off the real-time thread.

The tick and the receive thread only put frames into an unbounded queue
(one ``SimpleQueue.put``, which never blocks); a writer thread takes them
out and hands them to python-can's writer (``can.Logger`` picks BLFWriter,
ASCWriter, ... from the file suffix).  :meth:`FrameRecorder.close` queues an
end marker behind the last frame, waits until the writer has written
everything before it and then closes the file, so no frame sent or received
before the adapter closed is lost.
"""

from __future__ import annotations

import logging
import queue
import threading
from pathlib import Path

import can

from . import lazy_mf4

_STOP = object()


class RecorderError(RuntimeError):
    """The recording file cannot be opened (unknown suffix, no permission, ...)."""


class FrameRecorder:
    """Writes frames to a python-can log file from a background thread.

    Parameters
    ----------
    path
        Output file; the suffix selects the format (``.blf``, ``.asc``,
        ``.log``, ``.csv``, ``.trc``, ...).  Parent folders are created.
    channel
        Channel number written with each frame (BLF/ASC channels count from 1).
    """

    def __init__(self, path: str | Path, channel: int = 1, log: logging.Logger | None = None):
        self.path = Path(path)
        self.channel = channel
        self.log = log or logging.getLogger(__name__)
        try:
            if ".mf4" in (sfx.lower() for sfx in self.path.suffixes):
                lazy_mf4.enable()  # python-can's MF4 writer, loaded only now (see lazy_mf4)
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._writer = can.Logger(str(self.path))
        except (ValueError, OSError, ImportError) as exc:
            raise RecorderError(f"cannot record to {self.path}: {exc}") from None
        self._q: queue.SimpleQueue = queue.SimpleQueue()
        self.queued = 0
        self.written = 0
        self.errors = 0
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="can-recorder", daemon=True)
        self._thread.start()

    # -- producers -----------------------------------------------------------------
    def put_tx(self, timestamp: float, arbitration_id: int, extended: bool, fd: bool, data: bytes) -> None:
        """Queue a transmitted frame.  Never blocks.  Called in the real-time loop."""
        self._q.put((timestamp, arbitration_id, extended, fd, data))
        self.queued += 1

    def put_rx(self, msg: can.Message) -> None:
        """Queue a received frame (from the receive thread).  Never blocks."""
        self._q.put(msg)
        self.queued += 1

    # -- writer thread ----------------------------------------------------------------
    def _run(self) -> None:
        while True:
            item = self._q.get()
            if item is _STOP:
                return
            if isinstance(item, tuple):
                ts, fid, ext, fd, data = item
                msg = can.Message(timestamp=ts, arbitration_id=fid, is_extended_id=ext, is_fd=fd, data=data,
                                  is_rx=False, channel=self.channel)
            else:
                msg = item
                msg.channel = self.channel
            try:
                self._writer.on_message_received(msg)
                self.written += 1
            except Exception as exc:  # a full disk must not take the server down
                self.errors += 1
                if self.errors <= 3:
                    self.log.error("CAN recording %s: cannot write a frame: %s", self.path, exc)

    def close(self) -> None:
        """Write every queued frame, then close the file.  Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._q.put(_STOP)
        self._thread.join()
        try:
            self._writer.stop()
        except Exception as exc:
            self.errors += 1
            self.log.error("CAN recording %s: closing failed: %s", self.path, exc)

    def status(self) -> dict:
        return {"file": str(self.path), "queued": self.queued, "written": self.written, "errors": self.errors}
