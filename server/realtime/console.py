"""Console output that cannot stall the loop: status lines and log records written by a thread of their own.

The loop thread prints a status line every status window and logs between
ticks.  Written directly, a line to a pipe whose reader has stopped reading
(a test harness that captures the output and never drains it, a pager held
open) blocks once the pipe's buffer (64 KiB on Linux) is full, and with it
the loop, the clients' requests and the watchdog.  A :class:`ConsoleWriter`
takes the text into a bounded queue and returns at once; a daemon thread
writes it.  When the queue is full, further text is dropped and counted
(``dropped``, in the status as ``console``).  The thread blocks in the
write system call without the GIL; it takes the GIL only to move a line.

``serve`` routes its status lines and its log records (:class:`ConsoleLogHandler`)
through one writer per stream; the in-process API and the tests keep plain
writes unless they ask for a writer.
"""

from __future__ import annotations

import collections
import logging
import os
import threading
from typing import TextIO

DEFAULT_CAPACITY = 512  # texts (lines) that may wait at once; a status line a window, log records in bursts


class ConsoleWriter:
    """Writes text to ``stream`` from a daemon thread; :meth:`write` never blocks.

    Parameters
    ----------
    stream
        A text stream (``sys.stdout``, ``sys.stderr``).
    capacity
        Texts that may wait; more are dropped and counted in :attr:`dropped`.
    """

    def __init__(self, stream: TextIO, capacity: int = DEFAULT_CAPACITY, name: str = "console"):
        self.stream = stream
        self.capacity = int(capacity)
        self._dropped_full = 0  # counted by the writing thread (the loop): the queue was full
        self._dropped_broken = 0  # counted by the writer thread: the stream had failed
        self.written = 0
        self.broken = False  # the stream failed (closed, reader gone): later texts are dropped too
        self._texts: collections.deque[str] = collections.deque()
        self._closing = False
        # The thread sleeps in os.read on this pipe without the GIL; write() wakes it with a byte and
        # never blocks on it (a full wake pipe means the thread has wake-ups waiting already).
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_w, False)
        self._thread = threading.Thread(target=self._run, name=f"gearbox-hil {name} writer", daemon=True)
        self._thread.start()

    def write(self, text: str) -> None:
        """Queue ``text`` for the stream (dropped and counted when the queue is full or the writer closed)."""
        if self._closing or len(self._texts) >= self.capacity:
            self._dropped_full += 1
            return
        self._texts.append(text)  # deque.append is atomic; the thread only pops from the other end
        self._wake()

    def _wake(self) -> bool:
        """Wake the thread; False when the wake pipe is full (wake-ups wait already) or closed."""
        try:
            os.write(self._wake_w, b"\0")
        except OSError:  # BlockingIOError: full, the thread will find this text with the earlier wake-ups
            return False
        return True

    @property
    def dropped(self) -> int:
        """Texts not written: the queue was full (the reader is not reading), or the stream had failed."""
        return self._dropped_full + self._dropped_broken

    def status(self) -> dict:
        return {"written": self.written, "dropped": self.dropped, "waiting": len(self._texts),
                "broken": self.broken}

    def close(self, timeout_s: float = 2.0) -> bool:
        """Write what waits (for at most ``timeout_s``), then stop; True when everything was written."""
        if not self._closing:
            self._closing = True
            self._wake()
        self._thread.join(timeout_s)
        done = not self._thread.is_alive()
        if done and self._wake_r >= 0:  # a thread still blocked in its write keeps its pipe (ends with the process)
            os.close(self._wake_r)
            os.close(self._wake_w)
            self._wake_r = self._wake_w = -1
        return done and not self._texts

    def _run(self) -> None:
        texts = self._texts
        while True:
            try:
                os.read(self._wake_r, 4096)
            except OSError:
                return
            while texts:
                text = texts.popleft()
                if self.broken:
                    self._dropped_broken += 1
                    continue
                try:
                    self.stream.write(text)
                    self.stream.flush()
                    self.written += 1
                except (OSError, ValueError):  # closed, or its reader went away: keep running, drop the rest
                    self.broken = True
                    self._dropped_broken += 1
            if self._closing:
                return


class ConsoleLogHandler(logging.Handler):
    """A logging handler that formats in the caller's thread and writes through a :class:`ConsoleWriter`."""

    def __init__(self, writer: ConsoleWriter, level: int = logging.NOTSET):
        super().__init__(level)
        self.writer = writer

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.writer.write(self.format(record) + "\n")
        except Exception:  # formatting errors are reported the way logging reports them
            self.handleError(record)


__all__ = ["ConsoleLogHandler", "ConsoleWriter", "DEFAULT_CAPACITY"]
