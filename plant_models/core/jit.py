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

import hashlib

try:
    import fcntl
except ImportError:  # not on Windows: kernels compile there without the lock between processes
    fcntl = None

from llvmlite import binding as ll
from llvmlite import ir
from numba import njit, types
from numba.core import config, sigutils
from numba.core.codegen import JITCodeLibrary
from numba.core.compiler import Compiler
from numba.core.registry import CPUDispatcher
from numba.core.runtime.nrtopt import remove_redundant_nrt_refct
from numba.extending import intrinsic

from .cache import drop_stale_caches

# every compiled module of the core and the plants imports this module first: stale caches go
# before any kernel is loaded from numba's cache
drop_stale_caches()

# ``error_model="numpy"``: a division by zero gives inf/NaN (caught by the step's
# finiteness check and rolled back) instead of raising, which compiled code cannot.
JIT = dict(cache=True, nogil=True, error_model="numpy")
JIT_SUMS = dict(JIT, fastmath={"reassoc"})  # for bit-exact comparisons by summed differences only
# A stage of a larger function, called from that one place only, or a small helper the optimiser would leave
# as a call (a force law's table searches): numba inlines it into its caller.  Compiled on its own, every
# function links the code of all it calls and optimises and emits it again; for a short stage that calls the
# mode solver, that repeated work cost seconds.
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
def call_solve_at(typingctx, address, mf, mi, df, di, op, s_abs, oy, t_abs):
    """Call the compiled mode solver at ``address`` (see :mod:`.entry`, :func:`.modes.solve_entry`).

    Called in the real-time loop.
    """
    return _address_call(typingctx, address, mf, mi, df, di, op, s_abs, oy, t_abs)


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

    def compile(self, sig):
        """Compile (or load) ``sig``; while another process compiles this kernel, wait and load its result.

        Two processes of a warm-up compile the core's kernels at once (the
        step's entry point in one, the mode solver's and the start's in the
        other: ``server.cli.warmup``); without the lock both would compile
        the kernels they share.  The calls between
        kernels form no cycle, so neither waits for a kernel the other
        waits for.
        """
        index = getattr(getattr(self._cache, "_cache_file", None), "_index_path", None)
        if index is None or fcntl is None or tuple(sigutils.normalize_signature(sig)[0]) in self.overloads:
            return super().compile(sig)
        try:
            lock = open(index + ".lock", "a")
        except OSError:  # a read-only cache folder: numba loads or compiles as ever
            return super().compile(sig)
        with lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            return super().compile(sig)  # the lock goes with the file's closing


class _LinkedOnlyLibrary(JITCodeLibrary):
    """The code library of a kernel whose code runs linked into its callers: optimised once, not twice.

    numba optimises every compiled function's module twice (a "cheap"
    pipeline, then the full one), and again, whole, in every caller it is
    linked into.  A kernel of the core is called by the C entry points (and
    a few top-level functions); their modules, which hold the linked kernels,
    still get both pipelines over everything, so the code the tick runs
    gets the full optimisation as before.  Only the kernel's own copy, which
    only a direct call from Python runs (tests), gets the first pipeline
    alone: that halves the LLVM work of a cold compile of the core (about
    20 s of CPU of 48; ``BENCHMARKS.md``, cold start).
    """

    def _optimize_final_module(self):
        cheap, builder = self._codegen._module_pass_manager(
            loop_vectorize=self._codegen._loopvect, slp_vectorize=False, opt=self._codegen._opt_level, cost="cheap")
        with self._recorded_timings.record("Module passes (cheap optimization for refprune)", builder):
            cheap.run(self._final_module, builder)
        if not config.LLVM_REFPRUNE_PASS:
            self._final_module = remove_redundant_nrt_refct(self._final_module)


class _KernelCompiler(Compiler):
    """numba's compiler pipeline with the kernel's code library a :class:`_LinkedOnlyLibrary`."""

    def _compile_bytecode(self):
        if self.state.library is None:  # numba's lowering would create a plain one under the same name
            library = self.state.targetctx.codegen().create_library(self.state.func_id.func_qualname)
            if type(library) is JITCodeLibrary:  # another target's library (none in this project) stays as it is
                library.__class__ = _LinkedOnlyLibrary
            library.enable_object_caching()  # as numba's lowering does for the library it creates
            self.state.library = library
        return super()._compile_bytecode()


class _EntryLibrary(JITCodeLibrary):
    """The code library of a C entry point: its calls bind to its own, fully optimised copies of the kernels.

    numba links every called kernel into the caller's module as a
    ``linkonce_odr`` copy, which the loader treats as a weak definition: the
    copy a call is not inlined into is discarded in favour of the kernel's
    own module loaded before it, so the step called the kernels' own copies
    (``_forces`` nine times a sub-step), which :class:`_LinkedOnlyLibrary`
    optimises cheaply (numba's "cheap" pipeline is ``-O0`` with a few
    passes).  Made internal before the full optimisation, the linked copies
    are the entry's own: every call inside the entry point runs code
    optimised together with it, the optimiser may inline a copy that has one
    caller, and nothing it does not call is emitted.
    """

    def _optimize_final_module(self):
        functions = [fn for fn in self._final_module.functions if not fn.is_declaration]
        # a suffix of this entry's own (exported) names: the loader binds a call by name, and an internal copy
        # the optimiser may give another signature must never be taken for the kernel of that name
        own = sorted(fn.name for fn in functions if fn.linkage == ll.Linkage.external)
        suffix = ".entry." + hashlib.sha1("\n".join(own).encode()).hexdigest()[:12]
        for fn in functions:
            if fn.linkage == ll.Linkage.linkonce_odr:
                fn.linkage = ll.Linkage.internal
                fn.name = fn.name + suffix
        super()._optimize_final_module()


class EntryCompiler(Compiler):
    """numba's compiler pipeline with the code library an :class:`_EntryLibrary` (for the C entry points)."""

    def _compile_bytecode(self):
        if self.state.library is None:
            library = self.state.targetctx.codegen().create_library(self.state.func_id.func_qualname)
            if type(library) is JITCodeLibrary:
                library.__class__ = _EntryLibrary
            library.enable_object_caching()
            self.state.library = library
        return super()._compile_bytecode()


def kernel(**options):
    """``@kernel(**JIT)``: like ``@njit(**JIT)``, compiled lazily, once per argument type (see above).

    Its code is optimised once on its own and fully in the entry points it
    is linked into (:class:`_LinkedOnlyLibrary`), and it has no C-callable
    wrapper (nothing takes a kernel's address; numba would build, optimise
    and emit one for every kernel).
    """
    options = dict(options)
    cache = options.pop("cache", False)

    def decorate(fn):
        dispatcher = PerTypeDispatcher(py_func=fn, locals={}, pipeline_class=_KernelCompiler,
                                       targetoptions=dict(options, nopython=True, no_cfunc_wrapper=True))
        if cache:
            dispatcher.enable_caching()
        return dispatcher
    return decorate
