"""Visible progress while numba compiles: which function, n of m, how long.

The first start on a machine compiles the friction core (about 50 kernels),
the plant's own kernels and the loop's and codecs' kernels; later starts
load them from numba's on-disk cache in about a second.  So that a first
start never looks hung, the command line runs its set-up inside a
:class:`CompileProgress` block, which writes one line per function numba
actually compiles.  Loading from the cache compiles nothing and writes
nothing.

Functions are grouped by where they live: the core's kernels (with their
known number, so a line reads ``core 12/47``), the plants' kernels, and the
server's and transports' kernels.
"""

from __future__ import annotations

import time
from typing import Callable

from numba.core import event

from .core.api import STAGE_MODULES as CORE_STAGE_MODULES
from .core.api import kernel_count as core_kernel_count  # how many functions a cold compile of the core goes through


def silent(line: str) -> None:
    """A progress sink that prints nothing (``--quiet``)."""


def _group(module: str) -> str:
    if module in CORE_STAGE_MODULES:
        return "core"
    if module.startswith(("plant_models.plants", "plant_models.friction_plant", "plant_models.core")):
        return "plant"
    if module.startswith("io_adapters"):
        return "codecs"
    if module.startswith(("server", "plant_models")):
        return "loop"
    return "other"


class CompileProgress(event.Listener):
    """``with CompileProgress(write):`` writes a line per function numba compiles inside the block.

    ``write`` takes one line (no newline).  The first line says why there is
    a wait; the last one (on leaving the block) how long compiling took, if
    anything was compiled.
    """

    def __init__(self, write: Callable[[str], None]):
        self.write = write
        self.count = {"core": 0, "plant": 0, "loop": 0, "codecs": 0, "other": 0}
        self.expected = {"core": 0}
        self.began = 0.0
        self._stack: list[float] = []
        self._compiled = 0

    def __enter__(self) -> "CompileProgress":
        self.began = time.perf_counter()
        event.register("numba:compile", self)
        return self

    def __exit__(self, *exc) -> bool:
        event.unregister("numba:compile", self)
        if self._compiled:
            self.write(f"compiled {self._compiled} functions in {time.perf_counter() - self.began:.1f} s; "
                       "later starts load them from the cache")
        return False

    @property
    def compiled(self) -> int:
        """Functions compiled inside the block so far."""
        return self._compiled

    def on_start(self, ev) -> None:
        if not self._compiled and not self._stack:
            self.write("first start with this code on this machine: compiling (cached for later starts)")
            self.expected["core"] = core_kernel_count()
        self._stack.append(time.perf_counter())

    def on_end(self, ev) -> None:
        took = time.perf_counter() - self._stack.pop()
        func = getattr(ev.data.get("dispatcher"), "py_func", None)
        group = _group(getattr(func, "__module__", "") or "")
        self.count[group] += 1
        self._compiled += 1
        expected = self.expected.get(group, 0)
        of = f"/{expected}" if expected and self.count[group] <= expected else ""
        self.write(f"  {group} {self.count[group]}{of}: {getattr(func, '__name__', '?')} ({took:.1f} s; "
                   f"{time.perf_counter() - self.began:.0f} s elapsed)")


__all__ = ["CompileProgress", "core_kernel_count"]
