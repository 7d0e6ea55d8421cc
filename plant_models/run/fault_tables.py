"""The compiled part of the fault stage: the signal-fault tables and the three functions a run calls.

A fault set (:class:`plant_models.run.faults.FaultStage`; the server's
:class:`server.realtime.faults.FaultSet`) writes the tables between steps (a
row per signal fault, and per clutch fault that acts on an output); the run
pipeline's fault stages walk them: :func:`fault_inputs` before the plant
step, :func:`fault_outputs` after it (what the faulty sensors report, which
the row shows) and :func:`fault_restore` after the row (the commanded inputs
back).  No Python work per fault in a step; none at all with no signal fault.
The three stages' compiled forms (:func:`compiled_fault_stages`) call the same
functions from the real-time loop's compiled tick
(:mod:`plant_models.run.compiled`), so a server with signal faults active
keeps its tick one compiled call, with the Python stepper's states bit for bit.
"""

from __future__ import annotations

import math

import numpy as np
from numba import carray, cfunc, njit

from ..contract.columns import Columns

from .compiled import CHANGED, READS, STAGE_SIGNATURE, CompiledStage, f64_at, i64_at

MAX_FAULTS = 32  # signal faults active at once (the tables are preallocated)

# -- signal fault kinds (FI_KIND) ----------------------------------------------------------------------------
K_FORCE = 1  # value = the forced value
K_HOLD = 2  # the held value is captured when the fault is set (freeze, drop-out "last")
K_OFFSET = 3  # value = added
K_GAIN = 4  # value = factor
K_NOISE = 5  # value = standard deviation; seeded Gaussian noise added
K_CLAMP = 6  # clamped to [FF_LO, FF_HI] (the capacity output of a stuck-closed clutch)

# -- table columns (fi: int64, ff: float64) -----------------------------------------------------------------
FAULT_INTS = Columns("an active fault's int row", (
    ("FI_ACTIVE", "1 while the row holds an active fault"),
    ("FI_SIDE", "0: input, 1: output"),
    ("FI_INDEX", "the signal's value in the plant's df"),
    ("FI_RATE", "an input's rate in df (-1 for an output)"),
    ("FI_KIND", "K_*"),
    ("FI_RNG", "a noise fault's xorshift64* state (uint64 bits)"),
), count="N_FI")
globals().update(FAULT_INTS.constants())  # FI_ACTIVE .. FI_RNG; N_FI
FAULT_FLOATS = Columns("an active fault's float row", (
    ("FF_VALUE", "the kind's value (forced value, offset, factor, noise standard deviation)"),
    ("FF_HELD", "the held value (captured when the fault is set)"),
    ("FF_CLEAN", "an input's clean value during the step; the value an output fault got"),
    ("FF_CLEAN_RATE", "an input's clean rate during the step"),
    ("FF_LO", "an input's declared range: faulted values are clamped to it"),
    ("FF_HI", "its upper end"),
), count="N_FF")
globals().update(FAULT_FLOATS.constants())  # FF_VALUE .. FF_HI; N_FF
JIT = dict(cache=True)  # not nogil: called from the tick, which keeps the GIL (see ring.py)


@njit(**JIT)
def _uniform(fi, f):
    """The next number in (0, 1) of fault f's xorshift64* stream (53 bits).  Called in the real-time loop."""
    x = np.uint64(fi[f, FI_RNG])  # noqa: F821  the same 64 bits, read as unsigned
    x ^= x >> np.uint64(12)
    x ^= x << np.uint64(25)
    x ^= x >> np.uint64(27)
    fi[f, FI_RNG] = np.int64(x)  # noqa: F821
    m = x * np.uint64(2685821657736338717)
    return (float(m >> np.uint64(11)) + 0.5) * (1.0 / 9007199254740992.0)


@njit(**JIT)
def _normal(fi, f):
    """A standard normal number from fault f's stream (Box-Muller on two draws; nothing allocated)."""
    u1 = _uniform(fi, f)
    u2 = _uniform(fi, f)
    return math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * u2)


@njit(**JIT)
def _faulted(fi, ff, f, x):
    k = fi[f, FI_KIND]  # noqa: F821
    v = ff[f, FF_VALUE]  # noqa: F821
    if k == K_FORCE:
        return v
    if k == K_HOLD:
        return ff[f, FF_HELD]  # noqa: F821
    if k == K_OFFSET:
        return x + v
    if k == K_GAIN:
        return x * v
    if k == K_CLAMP:
        return min(max(x, ff[f, FF_LO]), ff[f, FF_HI])  # noqa: F821
    return x + v * _normal(fi, f)


@njit(**JIT)
def fault_inputs(fi, ff, df, n):
    """Replace the faulted inputs by their faulted values, keeping the clean ones.  Called in the real-time loop.

    Faults are applied in table order (two on one input compose); rates:
    0 for a forced or held input, scaled by a gain, unchanged otherwise.
    """
    for f in range(n):
        if fi[f, FI_ACTIVE] == 0 or fi[f, FI_SIDE] != 0:  # noqa: F821
            continue
        i = fi[f, FI_INDEX]  # noqa: F821
        r = fi[f, FI_RATE]  # noqa: F821
        x = df[i]
        ff[f, FF_CLEAN] = x  # noqa: F821
        ff[f, FF_CLEAN_RATE] = df[r]  # noqa: F821
        y = _faulted(fi, ff, f, x)
        lo = ff[f, FF_LO]  # noqa: F821
        hi = ff[f, FF_HI]  # noqa: F821
        if y < lo:
            y = lo
        elif y > hi:
            y = hi
        elif y != y:
            y = x
        df[i] = y
        k = fi[f, FI_KIND]  # noqa: F821
        if k == K_FORCE or k == K_HOLD:
            df[r] = 0.0
        elif k == K_GAIN:
            df[r] = df[r] * ff[f, FF_VALUE]  # noqa: F821


@njit(**JIT)
def fault_outputs(fi, ff, df, n):
    """Replace the faulted outputs by what the faulty sensors report.  Called in the real-time loop."""
    for f in range(n):
        if fi[f, FI_ACTIVE] == 0 or fi[f, FI_SIDE] != 1:  # noqa: F821
            continue
        i = fi[f, FI_INDEX]  # noqa: F821
        x = df[i]
        ff[f, FF_CLEAN] = x  # noqa: F821  what this fault saw: for the first fault on a signal, the true value
        df[i] = _faulted(fi, ff, f, x)


@njit(**JIT)
def fault_restore(fi, ff, df, n):
    """Put the clean inputs back after the step (last fault first).  Called in the real-time loop."""
    for f in range(n - 1, -1, -1):
        if fi[f, FI_ACTIVE] == 0 or fi[f, FI_SIDE] != 0:  # noqa: F821
            continue
        df[fi[f, FI_INDEX]] = ff[f, FF_CLEAN]  # noqa: F821
        df[fi[f, FI_RATE]] = ff[f, FF_CLEAN_RATE]  # noqa: F821


# -- the compiled forms of the three stages (plant_models/run/compiled.py's protocol) ---------------------------
# ctx: [fi, ff, df, rows in use (an int64 array of one: the fault stage's live count), df's length]
C_FI, C_FF, C_DF, C_ROWS, C_DF_LEN = range(5)


@cfunc(STAGE_SIGNATURE, cache=True)
def fault_inputs_stage(ctx, k, now_ns, dt, carry):
    """Stage ``fault_inputs`` in the compiled tick and the compiled offline runs: :func:`fault_inputs` on the
    tables at ``ctx``'s addresses (nothing while no row is in use).  While rows are in use it returns the carry
    bits ``CHANGED | READS`` (it acts on the step's inputs, and the outputs it faults after the step are read: the
    offline run's hints; the tick passes them on unused).  Called in the real-time loop."""
    n = i64_at(ctx[C_ROWS])[0]
    if n == 0:
        return 0
    fault_inputs(carray(i64_at(ctx[C_FI]), (MAX_FAULTS, N_FI)),  # noqa: F821
                 carray(f64_at(ctx[C_FF]), (MAX_FAULTS, N_FF)),  # noqa: F821
                 carray(f64_at(ctx[C_DF]), (ctx[C_DF_LEN],)), n)
    return CHANGED | READS


@cfunc(STAGE_SIGNATURE, cache=True)
def fault_outputs_stage(ctx, k, now_ns, dt, carry):
    """Stage ``fault_outputs`` in the compiled tick (:func:`fault_outputs`).  Called in the real-time loop."""
    n = i64_at(ctx[C_ROWS])[0]
    if n:
        fault_outputs(carray(i64_at(ctx[C_FI]), (MAX_FAULTS, N_FI)),  # noqa: F821
                      carray(f64_at(ctx[C_FF]), (MAX_FAULTS, N_FF)),  # noqa: F821
                      carray(f64_at(ctx[C_DF]), (ctx[C_DF_LEN],)), n)
    return 0


@cfunc(STAGE_SIGNATURE, cache=True)
def fault_restore_stage(ctx, k, now_ns, dt, carry):
    """Stage ``fault_restore`` in the compiled tick (:func:`fault_restore`).  Called in the real-time loop."""
    n = i64_at(ctx[C_ROWS])[0]
    if n:
        fault_restore(carray(i64_at(ctx[C_FI]), (MAX_FAULTS, N_FI)),  # noqa: F821
                      carray(f64_at(ctx[C_FF]), (MAX_FAULTS, N_FF)),  # noqa: F821
                      carray(f64_at(ctx[C_DF]), (ctx[C_DF_LEN],)), n)
    return 0


def compiled_fault_stages(fi: np.ndarray, ff: np.ndarray, df: np.ndarray,
                          rows: np.ndarray) -> tuple[CompiledStage, CompiledStage, CompiledStage]:
    """The compiled forms of ``fault_inputs``, ``fault_outputs`` and ``fault_restore`` on these tables, the
    plant's ``df`` and ``rows`` (``rows[0]``: the table rows in use, read at every tick)."""
    shapes_ok = fi.shape == (MAX_FAULTS, N_FI) and ff.shape == (MAX_FAULTS, N_FF)  # noqa: F821
    if not shapes_ok or fi.dtype != np.int64 \
            or ff.dtype != np.float64 or rows.dtype != np.int64 or df.dtype != np.float64:
        raise ValueError("the fault tables are not laid out as fault_tables.py declares")
    values = (fi, ff, df, rows, df.shape[0])
    return (CompiledStage.of("fault_inputs", fault_inputs_stage, values),
            CompiledStage.of("fault_outputs", fault_outputs_stage, values),
            CompiledStage.of("fault_restore", fault_restore_stage, values))


def warm_up() -> None:
    """Compile (or load from numba's cache) the three fault kernels, with one fault of each side active."""
    fi = np.zeros((2, N_FI), dtype=np.int64)  # noqa: F821
    ff = np.zeros((2, N_FF))  # noqa: F821
    df = np.zeros(4)
    fi[:, FI_ACTIVE] = 1  # noqa: F821
    fi[1, FI_SIDE] = 1  # noqa: F821
    fi[:, FI_KIND] = K_NOISE  # noqa: F821
    fi[0, FI_RATE] = 1  # noqa: F821
    ff[:, FF_HI] = 1.0  # noqa: F821
    fi[:, FI_RNG] = 1  # noqa: F821
    fault_inputs(fi, ff, df, 2)
    fault_outputs(fi, ff, df, 2)
    fault_restore(fi, ff, df, 2)


def seed_state(seed: int) -> int:
    """A non-zero xorshift state from a seed (splitmix64 of it), as the int64 with its bits."""
    z = (int(seed) + 0x9E3779B97F4A7C15) & 0xFFFF_FFFF_FFFF_FFFF
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFF_FFFF_FFFF_FFFF
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & 0xFFFF_FFFF_FFFF_FFFF
    z ^= z >> 31
    z = z or 1
    return z - (1 << 64) if z >= 1 << 63 else z  # the uint64 bits as an int64


__all__ = ["MAX_FAULTS", "compiled_fault_stages", "fault_inputs", "fault_inputs_stage", "fault_outputs",
           "fault_outputs_stage", "fault_restore", "fault_restore_stage", "warm_up", "seed_state"]
