"""The door of the friction core for plant kernels: the only module a plant imports from the core.

A plant's compiled step maps its inputs into the core's buffers, calls
:func:`core_step` and maps the core's state to its outputs, all on raw
pointers to the four flat buffers (``raw_f``/``raw_i``), so the step holds
no Python object and pays no reference counting (see :mod:`.jit`).

``JIT`` are the compile options every kernel uses and ``BUFS`` the numba
signature of the four buffers ``(mf, mi, df, di)``.  ``call_step_at``
calls a compiled step through its address (the compiled offline run,
:mod:`plant_models.offline`, calls a plant's step so).  ``L`` is the buffer
layout (slot names with shapes and units).  The Python-side specification
types are re-exported so a plant module needs no other import from the core.
"""

from __future__ import annotations

from numba import njit

from . import layout as L
from .entry import ForceLaw
from .handle import Core, LawBlocks
from .jit import BUFS, JIT, call_step_at, raw_f, raw_i
from .layout import H_FN_STEP
from .spec import GROUND, CoreSpec, Row, Settings, SpecError, Spring


@njit(**JIT)
def core_step(mf, mi, df, di, dt):
    """One step of the core, on the raw buffer pointers of a plant kernel; returns the status word.

    The core is called through the address its :class:`Core` wrote into
    the model header (see :mod:`.entry`), so a plant's compiled step contains
    only its own code.  Called in the real-time loop.
    """
    return call_step_at(mi[H_FN_STEP], mf, mi, df, di, dt)


__all__ = ["BUFS", "GROUND", "JIT", "L", "Core", "CoreSpec", "ForceLaw", "LawBlocks", "Row", "Settings", "SpecError", "Spring",
           "call_step_at", "core_step", "raw_f", "raw_i"]
