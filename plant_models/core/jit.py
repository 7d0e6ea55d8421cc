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

from llvmlite import ir
from numba import njit, types
from numba.core.registry import CPUDispatcher
from numba.extending import intrinsic

from .cache import drop_stale_caches

# every compiled module of the core and the plants imports this module first: stale caches go
# before any kernel is loaded from numba's cache
drop_stale_caches()

# ``error_model="numpy"``: a division by zero gives inf/NaN (caught by the step's
# finiteness check and rolled back) instead of raising, which compiled code cannot.
JIT = dict(cache=True, nogil=True, error_model="numpy")
JIT_SUMS = dict(JIT, fastmath={"reassoc"})  # for bit-exact comparisons by summed differences only
# A stage of a larger function, called from that one place only: numba inlines it into its caller.
# Compiled on its own, every function links the code of all it calls and optimises and emits it
# again; for a short stage that calls the mode solver, that repeated work cost seconds.
JIT_STAGE = dict(JIT, inline="always")

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


def _address_call(typingctx, address, *args):
    """Typing and code of a call through a function address (an int64) with the C calling convention."""
    sig = types.int64(address, *args)

    def codegen(context, builder, signature, llargs):
        fnty = ir.FunctionType(ir.IntType(64), [context.get_value_type(t) for t in signature.args[1:]])
        return builder.call(builder.inttoptr(llargs[0], fnty.as_pointer()), llargs[1:])
    return sig, codegen


@intrinsic
def call_step_at(typingctx, address, mf, mi, df, di, dt):
    """Call the compiled step entry at ``address`` (see :mod:`.entry`).  Called in the real-time loop."""
    return _address_call(typingctx, address, mf, mi, df, di, dt)


@intrinsic
def call_start_at(typingctx, address, mf, mi, df, di):
    """Call the compiled start entry at ``address`` (see :mod:`.entry`)."""
    return _address_call(typingctx, address, mf, mi, df, di)


@intrinsic
def call_law_at(typingctx, address, mf, mi, df, di, s, oy, of):
    """Call the compiled force law at ``address`` (see :mod:`.entry`, ``LAW_SIGNATURE``); returns its power, W.

    Called in the real-time loop.
    """
    sig = types.float64(address, mf, mi, df, di, s, oy, of)

    def codegen(context, builder, signature, llargs):
        fnty = ir.FunctionType(ir.DoubleType(), [context.get_value_type(t) for t in signature.args[1:]])
        return builder.call(builder.inttoptr(llargs[0], fnty.as_pointer()), llargs[1:])
    return sig, codegen


class PerTypeDispatcher(CPUDispatcher):
    """A numba dispatcher that compiles a called kernel once per argument *type*, not per constant value.

    When a compiled function calls another with a constant ``0`` or
    ``True``, numba types the argument as a literal and compiles a separate
    specialisation of the callee for each constant (``_caps`` three times
    for its three stage points, ``_mode_full`` twice, ...).  The core gains
    nothing from it (its constants select branches at run time), and it
    made a cold compile compile 76 functions instead of 52.  This dispatcher
    drops the literal part of the argument types before numba looks up or
    compiles the callee.
    """

    def get_call_template(self, args, kws):
        return super().get_call_template(tuple(types.unliteral(a) for a in args),
                                         {k: types.unliteral(v) for k, v in kws.items()})


def kernel(**options):
    """``@kernel(**JIT)``: like ``@njit(**JIT)``, compiled lazily, once per argument type (see above)."""
    options = dict(options)
    cache = options.pop("cache", False)

    def decorate(fn):
        dispatcher = PerTypeDispatcher(py_func=fn, locals={}, targetoptions=dict(options, nopython=True))
        if cache:
            dispatcher.enable_caching()
        return dispatcher
    return decorate
