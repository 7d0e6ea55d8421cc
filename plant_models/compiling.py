"""Visible progress while numba compiles: which function, n of m, how long.

The first start on a machine compiles the friction core (about 50 kernels),
the plant's own kernels and the loop's and codecs' kernels; later starts
load them from numba's on-disk cache in about a second.  So that a first
start never looks hung, the command line runs its set-up inside a
:class:`CompileProgress` block, which writes one line per function numba
actually compiles (with ``-v``; by default the commands pass its events to
the stages and counts of :mod:`server.cli.warmup_progress` instead).
Loading from the cache compiles nothing and writes nothing.

Functions are grouped by where they live: the core's kernels (with their
known number and the time left at the pace so far, so a line reads ``core
12/47: _caps (0.6 s; 10 s elapsed, about 29 s left)``), the plants'
kernels, the server loop's kernels and the CAN and ZeroMQ codecs'.  numba's own helpers (its ``impl`` and
``<lambda>`` implementations of numpy and string operations) are counted in
the total but get no line: their names mean nothing to a user.  So that no
wait looks like a hang, a line ``still compiling NAME (N s)`` follows
:data:`HEARTBEAT_S` seconds without a line while numba works (one function
can take half a minute: the core's step, which is compiled with everything
it calls).
"""

from __future__ import annotations

import threading
import time
from typing import Callable

from numba.core import event

from .core.api import STAGE_MODULES as CORE_STAGE_MODULES
from .core.api import kernel_count as core_kernel_count  # how many functions a cold compile of the core goes through


HEARTBEAT_S = 1.0  # s without a line while compiling before a "still compiling" line (1.5 s left gaps of 2.04 s at load 5)


def silent(line: str) -> None:
    """A progress sink that prints nothing (``--quiet``)."""


LABELS = {"core": "core", "plant": "plant", "loop": "server loop", "codecs": "CAN/ZeroMQ codec", "other": "other"}


def _group(module: str) -> str:
    if module in CORE_STAGE_MODULES:
        return "core"
    if module.startswith("plant_models"):  # the plants, their components (powertrain), the compiled runs
        return "plant"
    if module.startswith("io_adapters"):
        return "codecs"
    if module.startswith("server"):
        return "loop"
    if module == "numba" or module.startswith("numba."):
        return "numba"
    return "other"


class CompileProgress(event.Listener):
    """``with CompileProgress(write):`` writes a line per function numba compiles inside the block.

    ``write`` takes one line (no newline).  The first line says why there is
    a wait; the last one (on leaving the block) how long compiling took, if
    anything was compiled.
    """

    def __init__(self, write: Callable[[str], None], on_done: Callable[[str, str], None] | None = None):
        """``on_done(group, name)``, if given, is called as each function (numba's helpers too) is compiled."""
        self._write = write
        self._on_done = on_done
        self.count = {"core": 0, "plant": 0, "loop": 0, "codecs": 0, "other": 0, "numba": 0}
        self.count_here = dict(self.count)  # not counting those of another process (external)
        self.expected = {"core": core_kernel_count()}
        self.began = 0.0
        self._stack: list[tuple[float, str]] = []
        self._group_began: dict[str, float] = {}  # when each group's first function began compiling
        self._compiled = 0
        self._lock = threading.Lock()
        self._last = 0.0  # time of the last line written
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None

    def write(self, line: str) -> None:
        with self._lock:
            self._last = time.perf_counter()
            self._write(line)

    def __enter__(self) -> "CompileProgress":
        self.began = time.perf_counter()
        event.register("numba:compile", self)
        return self

    def __exit__(self, *exc) -> bool:
        event.unregister("numba:compile", self)
        self._stop.set()
        if self._beat is not None:
            self._beat.join()
        if self._compiled:
            self.write(f"compiled {self._compiled} functions in {time.perf_counter() - self.began:.1f} s; "
                       "later starts load them from the cache")
        return False

    @property
    def compiled(self) -> int:
        """Functions compiled inside the block so far."""
        return self._compiled

    def add_compiled(self, n: int) -> None:
        """Count ``n`` functions compiled elsewhere for this block (a second process) in the total."""
        with self._lock:
            self._compiled += n

    def _heartbeat(self) -> None:
        """A line after HEARTBEAT_S s of silence while a function compiles (or between two of them)."""
        while not self._stop.wait(0.1):
            now = time.perf_counter()
            if now - self._last < HEARTBEAT_S:
                continue
            named = [(t0, name) for t0, name in list(self._stack) if name]
            if named:  # the innermost function of ours that numba works on
                t0, name = named[-1]
                self.write(f"  still compiling {name} ({now - t0:.0f} s so far; {now - self.began:.0f} s elapsed)")
            else:
                self.write(f"  still working: loading, linking ({now - self.began:.0f} s elapsed)")

    def on_start(self, ev) -> None:
        if not self._compiled and not self._stack:
            self.write("first start with this code on this machine: compiling (cached for later starts)")
            if self._beat is None:
                self._beat = threading.Thread(target=self._heartbeat, name="compile-progress", daemon=True)
                self._beat.start()
        func = getattr(ev.data.get("dispatcher"), "py_func", None)
        group = _group(getattr(func, "__module__", "") or "")
        name = getattr(func, "__name__", "") if group != "numba" else ""
        now = time.perf_counter()
        self._group_began.setdefault(group, now)
        self._stack.append((now, name))

    def on_end(self, ev) -> None:
        took = time.perf_counter() - self._stack.pop()[0]
        func = getattr(ev.data.get("dispatcher"), "py_func", None)
        group = _group(getattr(func, "__module__", "") or "")
        self.count[group] += 1
        self.count_here[group] += 1
        self._compiled += 1
        if self._on_done is not None:
            self._on_done(group, getattr(func, "__name__", "?"))
        if group == "numba":  # numba's own helpers: counted, not named
            return
        self._line(group, getattr(func, "__name__", "?"), took)

    def external(self, group: str, name: str, took: float) -> None:
        """A function of ``group`` compiled by another process for this block: counted and shown like ours.

        (Its total is added by :meth:`add_compiled`.)
        """
        with self._lock:
            self.count[group] += 1
            self._group_began.setdefault(group, time.perf_counter() - took)
        self._line(group, name, took)

    def _line(self, group: str, name: str, took: float) -> None:
        n, now = self.count[group], time.perf_counter()
        expected = self.expected.get(group, 0)
        if expected and n > expected:  # a count never passes its total: more than the core's known kernels
            expected = self.expected[group] = n  # (another numba version, an entry point compiled on its own)
        of = left = ""
        if expected:
            of = f"/{expected}"
            if n < expected:  # at the pace of this group so far: kernels take 0.1-10 s each, an estimate
                left = f", about {(now - self._group_began[group]) / n * (expected - n):.0f} s left"
        self.write(f"  {LABELS[group]} {n}{of}: {name} ({took:.1f} s; {now - self.began:.0f} s elapsed{left})")


__all__ = ["CompileProgress", "core_kernel_count"]
