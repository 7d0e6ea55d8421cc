"""The compiled core as three C entry points that every plant shares: compiled once, on first use.

The step (:func:`.step.step_entry`), the start (:func:`.step.start_entry`)
and the mode solver (:func:`.modes.solve_entry`, which the step and the
start call by address) are compiled into three C-callable functions (numba
``cfunc``, cached on disk like every kernel).  A
:class:`~plant_models.core.handle.Core` writes their addresses into its
model header (``H_FN_STEP``, ``H_FN_START``, ``H_FN_SOLVE``) and every
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

from numba import njit, types
from numba.core import event, sigutils
from numba.core.ccallback import CFunc

from .jit import JIT, EntryCompiler, call_start_at, call_step_at, raw_f, raw_i
from .layout import H_FN_START, H_FN_STEP

_FP = types.CPointer(types.float64)
_IP = types.CPointer(types.int64)
STEP_SIGNATURE = types.int64(_FP, _IP, _FP, _IP, types.float64)  # (mf, mi, df, di, dt) -> status word
START_SIGNATURE = types.int64(_FP, _IP, _FP, _IP)  # (mf, mi, df, di) -> status word
# (mf, mi, df, di, s, oy, of) -> power, W: a force law (see ForceLaw)
LAW_SIGNATURE = types.float64(_FP, _IP, _FP, _IP, types.float64, types.int64, types.int64)

# (mf, mi, df, di, op, s_abs, oy, t_abs) -> status bits: the mode solver (modes.solve_entry)
SOLVE_SIGNATURE = types.int64(_FP, _IP, _FP, _IP, types.int64, types.float64, types.int64, types.float64)


def compile_solve_entry() -> None:
    """Compile (or load) the mode solver's C entry point alone into numba's cache (a warm-up's second process).

    The step calls the solver through its address, so the two compile
    apart: the solver (about 40 % of the core's compile) in a second
    process while the first compiles the step; the first then loads it.
    """
    from . import modes

    _compile_entry(modes.solve_entry, SOLVE_SIGNATURE, dict(error_model=JIT["error_model"]))


def compile_start_entry() -> None:
    """Compile (or load) the start's C entry point alone into numba's cache (a warm-up's second process).

    The first process compiles the step's entry point (most of a cold
    compile) and then the start's (about 2 s more, its kernels shared with
    the step); compiled beside it, the start's loads from the cache there.
    """
    from . import step

    _compile_entry(step.start_entry, START_SIGNATURE, dict(error_model=JIT["error_model"]))


_lock = threading.Lock()
_compiled: list = []  # [step cfunc, start cfunc, solver cfunc] once built; kept for the life of the process


def entry_points() -> tuple:
    """``(py_func, signature)`` of each C entry point, in the order of :func:`entry_addresses`: the step, the
    start and the mode solver (a compile-progress display counts them: :func:`.api.kernel_count`)."""
    from . import modes, step

    return ((step.step_entry, STEP_SIGNATURE), (step.start_entry, START_SIGNATURE),
            (modes.solve_entry, SOLVE_SIGNATURE))


def entry_addresses() -> tuple[int, int, int]:
    """Addresses ``(step, start, mode solver)`` of the compiled entry points, compiling or loading them on the
    first call (the step first: a warm-up's second process compiles the others meanwhile).

    A cold compile takes about half a minute (see :mod:`plant_models.compiling`
    for the progress a caller can show).  Thread-safe; later calls return at once.
    """
    with _lock:
        if not _compiled:
            options = dict(error_model=JIT["error_model"])  # cached on disk: see _compile_entry
            _compiled[:] = [_compile_entry(func, signature, options) for func, signature in entry_points()]
        return _compiled[0].address, _compiled[1].address, _compiled[2].address


class ForceLaw:
    """A plant's (or a component's) force law, compiled once as a C function the core calls by address.

    ``py_func(mf, mi, df, di, s, oy, of) -> power`` receives raw pointers to
    the four buffers, the time ``s`` into the current step (s; the inputs'
    first-order hold is ``value + rate * s``), the offset ``oy`` in ``df``
    of the state vector to evaluate at (a stage state of RK4, the state at
    an event, the step's end; it reads the speeds, angles, spring twists and
    its own states there, never the core's work accounts, which a stage
    state does not hold) and the offset ``of`` of the generalised
    forces, one per shaft (N m; in the reduced coordinates for a reduced
    system), to which it *adds* its torques.  It returns the power those
    torques deliver at that state, ``sum_j f_j w_j`` (W), which the core
    integrates into the law's work account, and it writes the time
    derivatives of its own states (``DF_LAW_ZDOT``, read from the state
    vector at ``oy + ny - nz``).  It must be a pure function of its
    arguments and the buffers (the core calls it at every stage point, in
    trial steps of the event search and in the mode solves), allocate
    nothing and hold no Python object.  Its parameters live in ``MF_LAW``
    / ``MI_LAW``, its scratch in ``DF_LAW``.

    Compiled (or loaded from numba's on-disk cache) on first use of
    :attr:`address`.
    """

    def __init__(self, py_func):
        self.py_func = py_func
        self._cfunc = None

    @property
    def address(self) -> int:
        with _lock:
            if self._cfunc is None:
                self._cfunc = _compile_entry(self.py_func, LAW_SIGNATURE, dict(error_model=JIT["error_model"]))
            return self._cfunc.address


class _EntryCompile:
    """What a compile event of a C entry point carries (numba's own events cover only dispatchers)."""

    def __init__(self, py_func):
        self.py_func = py_func


class _ReportedCFunc(CFunc):
    """numba's C callback, whose compilation (not a load from the cache) is reported like a dispatcher's."""

    def _compile_uncached(self):
        with event.trigger_event("numba:compile", data=dict(dispatcher=_EntryCompile(self._pyfunc), args=self._sig)):
            cres = super()._compile_uncached()
            # numba optimises and emits the whole linked module (the core's step: every stage it calls) when
            # the result is first used, after this event; done here, a progress display counts it to the entry
            cres.library._ensure_finalized()
            return cres


def _compile_entry(py_func, signature, options):
    """One C entry point, compiled or loaded from the cache (its kernels bound to its own copies: EntryCompiler)."""
    entry_point = _ReportedCFunc(py_func, sigutils.normalize_signature(signature), locals={}, options=options,
                                 pipeline_class=EntryCompiler)
    entry_point.enable_caching()
    entry_point.compile()
    return entry_point


@njit(**JIT)
def step_arrays(mf, mi, df, di, dt):
    """One step of the core whose buffers these are, given as arrays (its entry addresses set by :class:`Core`).

    What :meth:`Core.step` calls from Python; a plant's compiled step calls the core on raw pointers through
    :func:`plant_models.core.api.core_step` instead.

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
