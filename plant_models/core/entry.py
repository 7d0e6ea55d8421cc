"""The compiled core as two C entry points that every plant shares: compiled once, on first use.

The step (:func:`.step.step_entry`) and the start (:func:`.step.start_entry`)
are compiled into two C-callable functions (numba ``cfunc``, cached on disk
like every kernel).  A :class:`~plant_models.core.handle.Core` writes their
addresses into its model header (``H_FN_STEP``, ``H_FN_START``) and every
caller calls the core through that address: the Python entry points below
and the plants' own compiled steps (:func:`plant_models.core.api.core_step`).

Why: numba links a called function's code into each caller and optimises it
there again, so a plant step that called the core directly compiled the
whole core once more (about 15 s per plant on a cold cache).  Through an
address the core is compiled once per machine and a plant compiles only its
own input and output mapping.  Importing the core compiles nothing: the
first :class:`Core` built compiles the entry points or loads them from the
cache.  The call through an address costs one indirect call, about a
nanosecond against the few hundred of a step.
"""

from __future__ import annotations

import threading
import time
from typing import Callable

from numba import cfunc, njit, types

from .jit import JIT, call_start_at, call_step_at, compile_report, raw_f, raw_i
from .layout import H_FN_START, H_FN_STEP

_FP = types.CPointer(types.float64)
_IP = types.CPointer(types.int64)
STEP_SIGNATURE = types.int64(_FP, _IP, _FP, _IP, types.float64)  # (mf, mi, df, di, dt) -> status word
START_SIGNATURE = types.int64(_FP, _IP, _FP, _IP)  # (mf, mi, df, di) -> status word

_lock = threading.Lock()
_compiled: list = []  # [step cfunc, start cfunc] once built; kept for the life of the process


def entry_addresses(report: Callable[[str], None] | None = None) -> tuple[int, int]:
    """Addresses ``(step, start)`` of the compiled entry points, compiling or loading them on the first call.

    ``report`` receives a line per function compiled on a cold cache and a
    last line with the time taken.  Thread-safe; later calls return at once.
    """
    with _lock:
        if not _compiled:
            from . import step

            began = time.perf_counter()
            options = dict(cache=JIT["cache"], error_model=JIT["error_model"])
            with compile_report(report, "core") as progress:
                step_fn = cfunc(STEP_SIGNATURE, **options)(step.step_entry)
                start_fn = cfunc(START_SIGNATURE, **options)(step.start_entry)
            _compiled[:] = [step_fn, start_fn]
            if report is not None:
                how = f"compiled {progress.count} functions" if progress.count else "loaded from the cache"
                report(f"core: ready in {time.perf_counter() - began:.1f} s ({how})")
        return _compiled[0].address, _compiled[1].address


@njit(**JIT)
def core_step(mf, mi, df, di, dt):
    """One step of the core whose buffers these are (its entry addresses set by :class:`Core`).

    Returns the status word.  Called in the real-time loop.
    """
    return call_step_at(mi[H_FN_STEP], raw_f(mf), raw_i(mi), raw_f(df), raw_i(di), dt)


@njit(**JIT)
def core_start(mf, mi, df, di):
    """Prepare a freshly set state (see :func:`.step.start_entry`); returns the status word."""
    return call_start_at(mi[H_FN_START], raw_f(mf), raw_i(mi), raw_f(df), raw_i(di))


@njit(**JIT)
def core_run(mf, mi, df, di, dts):
    """Take len(dts) steps with the inputs held; returns the OR of the status words.

    For benchmarks and tests that need many steps without Python in the loop.
    """
    rmf, rmi, rdf, rdi = raw_f(mf), raw_i(mi), raw_f(df), raw_i(di)
    address = mi[H_FN_STEP]
    st = 0
    for k in range(dts.shape[0]):
        st |= call_step_at(address, rmf, rmi, rdf, rdi, dts[k])
    return st
