"""The door of the friction core: the only core module imported from outside the core (tests/test_layers.py).

A plant's compiled step maps its inputs into the core's buffers, calls
:func:`core_step` and maps the core's state to its outputs, all on raw
pointers to the four flat buffers (``raw_f``/``raw_i``), so the step holds
no Python object and pays no reference counting (see :mod:`.jit`).

``JIT`` are the compile options every kernel uses and ``BUFS`` the numba
signature of the four buffers ``(mf, mi, df, di)``.  ``call_step_at``
calls a compiled step through its address (the compiled offline run,
:mod:`plant_models.offline`, calls a plant's step so).  ``L`` is the buffer
layout (slot names with shapes and units): a field's offset is
``mi[L.SLOT]``.  The blocks of the integrated state vector (speeds, angles,
spring twists, actuator states, work accounts; see
:func:`.layout.y_offsets`) have no slot of their own: their offsets in
``df`` come from :func:`y_omega`, :func:`y_theta`, :func:`y_twist`,
:func:`y_act`, :func:`y_work` and :func:`y_row_work`, so that no plant
computes them from the sizes by hand.  ``STAGE_MODULES`` and
:func:`kernel_count` tell a compile-progress display
(:mod:`plant_models.compiling`) which compiled functions are the core's
and how many a cold compile goes through.  The Python-side specification
types are re-exported so a plant module needs no other import from the
core.
"""

from __future__ import annotations

from numba import njit

from . import actuator, dynamics, integrate, kinematic, linalg, modes, rowforces, step, stuckset, tree
from . import layout as L
from .entry import ForceLaw, compile_solve_entry, compile_start_entry, entry_points
from .handle import Core, LawBlocks
from .jit import BUFS, JIT, JIT_STAGE, PerTypeDispatcher, call_step_at, raw_f, raw_i
from .layout import DF_Y, H_FN_STEP, H_G, H_N, H_S, W_ROW0
from .spec import GROUND, CoreSpec, Row, Settings, SpecError, Spring

_STAGES = (actuator, rowforces, dynamics, kinematic, tree, stuckset, modes, linalg, integrate, step)
STAGE_MODULES = tuple(m.__name__ for m in _STAGES)  # the modules that hold the core's compiled stages


def kernel_count() -> int:
    """How many functions a cold compile of the core goes through (its kernels not inlined into a caller)."""
    count = 0
    for module in _STAGES:
        for obj in vars(module).values():
            if (isinstance(obj, PerTypeDispatcher) and obj.py_func.__module__ == module.__name__
                    and obj.targetoptions.get("inline") != "always"):
                count += 1
    return count + len(entry_points())  # and the C entry points (.entry: the step, the start, the mode solver)


@njit(**JIT)
def core_step(mf, mi, df, di, dt):
    """One step of the core, on the raw buffer pointers of a plant kernel; returns the status word.

    The core is called through the address its :class:`Core` wrote into
    the model header (see :mod:`.entry`), so a plant's compiled step contains
    only its own code.  Called in the real-time loop.
    """
    return call_step_at(mi[H_FN_STEP], mf, mi, df, di, dt)


# -- offsets in df of the blocks of the integrated state vector (layout.y_offsets), from the header in mi.
# Inlined into the caller: each is an integer load or two and an add.  Called in the real-time loop.
@njit(**JIT_STAGE)
def y_omega(mi):
    """Offset in ``df`` of the shaft speeds [n], rad/s (or m/s for a body)."""
    return mi[DF_Y]


@njit(**JIT_STAGE)
def y_theta(mi):
    """Offset in ``df`` of the shaft angles [n], rad (or m)."""
    return mi[DF_Y] + mi[H_N]


@njit(**JIT_STAGE)
def y_twist(mi):
    """Offset in ``df`` of the spring twists [s], rad."""
    return mi[DF_Y] + 2 * mi[H_N]


@njit(**JIT_STAGE)
def y_act(mi):
    """Offset in ``df`` of the actuator states [g] (actual pressure in Pa, or force)."""
    return mi[DF_Y] + 2 * mi[H_N] + mi[H_S]


@njit(**JIT_STAGE)
def y_work(mi):
    """Offset in ``df`` of the work accounts [4 + g], J.

    ``L.W_INPUT``, ``L.W_DRAG``, ``L.W_DAMP``, ``L.W_IMPULSE``, then the
    friction work of each row from ``L.W_ROW0``.
    """
    return mi[DF_Y] + 2 * mi[H_N] + mi[H_S] + mi[H_G]


@njit(**JIT_STAGE)
def y_row_work(mi):
    """Offset in ``df`` of the friction work of each row [g], J (<= 0: friction takes energy out)."""
    return mi[DF_Y] + 2 * mi[H_N] + mi[H_S] + mi[H_G] + W_ROW0


__all__ = ["BUFS", "GROUND", "JIT", "JIT_STAGE", "L", "STAGE_MODULES", "Core", "CoreSpec", "ForceLaw", "LawBlocks", "Row", "Settings", "SpecError",
           "compile_solve_entry", "compile_start_entry",
           "Spring", "call_step_at", "core_step", "kernel_count", "raw_f", "raw_i", "y_act", "y_omega", "y_row_work",
           "y_theta", "y_twist", "y_work"]
