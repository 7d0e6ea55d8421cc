"""Compile options and raw buffer pointers shared by every compiled kernel of the core and the plants.

Every field of the four flat buffers (:mod:`.layout`) is addressed as
``buffer[mi[SLOT] + index]``: the compiled code creates no array views, and
the entry points hand the internal functions raw typed pointers to the four
buffers (:func:`raw_f`, :func:`raw_i`).  An array argument costs a
reference-count update (an atomic operation) at every call and every array
index a negative-index fix-up (a shift, a mask and an add); together they
cost more than the arithmetic of a step.  A pointer has neither.  The entry
points' own array arguments keep the buffers alive for the duration of the
call.  State vectors (y, y0, trial, stage) all live in ``df`` and are passed
around by their offset.
"""

from __future__ import annotations

from numba import njit, types
from numba.extending import intrinsic

# ``error_model="numpy"``: a division by zero gives inf/NaN (caught by the step's
# finiteness check and rolled back) instead of raising, which compiled code cannot.
JIT = dict(cache=True, nogil=True, error_model="numpy")
JIT_SUMS = dict(JIT, fastmath={"reassoc"})  # for bit-exact comparisons by summed differences only

BUFS = "float64[::1], int64[::1], float64[::1], int64[::1]"  # (mf, mi, df, di) as numba types


@intrinsic
def _data_ptr(typingctx, arr):
    """The data pointer of a contiguous array (a typed pointer: indexing it is a plain load/store).

    Called in the real-time loop.
    """
    sig = types.CPointer(arr.dtype)(arr)

    def codegen(context, builder, signature, args):
        return context.make_array(signature.args[0])(context, builder, args[0]).data
    return sig, codegen


@njit(**JIT)
def raw_f(a):
    """The float64 buffer as a raw pointer: indexed without a reference-counted owner or a
    negative-index fix-up (every index the core uses is non-negative).  Called in the real-time loop."""
    return _data_ptr(a)


@njit(**JIT)
def raw_i(a):
    """The int64 buffer as a raw pointer (see raw_f).  Called in the real-time loop."""
    return _data_ptr(a)
