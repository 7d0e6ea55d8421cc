"""The compiled tick: the run pipeline's stages and the plant's step in one compiled call.

A stage implementation may offer a *compiled form* (:class:`CompiledStage`):
the address of a compiled function of one uniform signature,
:data:`STAGE_SIGNATURE`,

    ``int64 stage(int64* ctx, int64 k, int64 now_ns, float64 dt, int64 carry)``

and its context ``ctx``: an int64 array holding the addresses of the arrays
the stage touches (the arrays themselves stay alive in the
:class:`CompiledStage`) and its sizes and settings.  ``k`` is the index of
the step, ``now_ns`` the tick's clock, ``dt`` the step; ``carry`` is, for
a stage before the step, the OR of the words the stages before it returned
(:data:`FED`: commands were applied, which feeds the command watchdog), and
for a stage after the step the step's status word.

:func:`tick_run` is one fixed compiled function (compiled once, kept in
numba's cache for every configuration: nothing is generated per
configuration): it calls the stages before the step by address, the
plant's compiled step by address (:func:`plant_models.core.api.call_step_at`)
timed with the monotonic clock, the stages after the step, and returns the
status word.  :class:`CompiledTick` holds the plan (the addresses, in the
order of :mod:`plant_models.run.stages`) and the bound call.

A tick :func:`tick_run` cannot take returns :data:`NEED_PYTHON` before it
changes anything (a scenario drives the inputs and the plan's *gate*, a
stage of the same signature, does not pass the tick), and the caller takes
that tick through the Python
:class:`~plant_models.run.stepper.Stepper`, which gives the same states bit
for bit (tests/test_compiled_tick.py).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
from llvmlite import ir
from numba import carray, cfunc, njit, types
from numba.extending import intrinsic

from ..contract.columns import Columns
from ..core.api import call_step_at, raw_i
from .ring import H_WRITTEN, N_INT, TI_SCENARIO, TI_STATUS, TICK_INFO_SLOTS, StateRing, ring_push

# int64 stage(int64* ctx, int64 k, int64 now_ns, float64 dt, int64 carry)
STAGE_SIGNATURE = types.int64(types.CPointer(types.int64), types.int64, types.int64, types.float64, types.int64)
FED = 1  # a stage before the step applied commands: the command watchdog is fed (carry bit)
CHANGED = 2  # carry bit: the stage changed the step's inputs (or acts on them: a fault stage), so they are not the last step's
READS = 4  # carry bit: the outputs of this step are read after it (a fault stage on the outputs)
NEED_PYTHON = -1  # tick_run took no step: this tick goes through the Python stepper

# the plan: an int64 array
PLAN = Columns("the compiled tick's plan (int64)", (
    ("P_STEP_AT", "address of the plant's compiled step (its C wrapper)"),
    ("P_N_BEFORE", "stages before the step"),
    ("P_N_AFTER", "stages after the step"),
    (None, "spare", 1),
    ("P_STEP_NS", "written by the tick: the duration of its step, ns"),
    ("P_BUFFERS", "the plant's mf, mi, df, di: (address, length) pairs", 8),
    ("P_TICK_INFO", "tick_info's address"),
    ("P_GATE", "0, or the address of a stage that says whether a tick a scenario drives may run compiled (0: yes)"),
    ("P_GATE_CTX", "its ctx's address"),
    ("P_STAGES", "(address, ctx address) pairs: the stages before the step, then after it (2 * MAX_STAGES)", 0),
))
globals().update(PLAN.constants())  # P_STEP_AT = 0 .. P_STAGES = 16
MAX_STAGES = 24


@intrinsic
def i64_at(typingctx, address):
    """An int64 address as a typed pointer.  Called in the real-time loop."""
    sig = types.CPointer(types.int64)(types.int64)

    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], context.get_value_type(signature.return_type))
    return sig, codegen


@intrinsic
def f64_at(typingctx, address):
    """An int64 address as a float64 pointer.  Called in the real-time loop."""
    sig = types.CPointer(types.float64)(types.int64)

    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], context.get_value_type(signature.return_type))
    return sig, codegen


@intrinsic
def u8_at(typingctx, address):
    """An int64 address as a uint8 pointer.  Called in the real-time loop."""
    sig = types.CPointer(types.uint8)(types.int64)

    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], context.get_value_type(signature.return_type))
    return sig, codegen


@intrinsic
def _compare_and_swap(typingctx, ptr, expected, new):
    """Atomically: ``old = *ptr; if old == expected: *ptr = new``; returns ``old`` (sequentially consistent)."""
    sig = types.int64(ptr, expected, new)

    def codegen(context, builder, signature, args):
        pair = builder.cmpxchg(args[0], args[1], args[2], "seq_cst", "seq_cst")
        return builder.extract_value(pair, 0)
    return sig, codegen


@intrinsic
def _store_release(typingctx, ptr, value):
    """Atomically ``*ptr = value`` with release ordering (every write before it is seen before it)."""
    sig = types.void(ptr, value)

    def codegen(context, builder, signature, args):
        builder.store_atomic(args[1], args[0], "release", 8)
        return context.get_dummy_value()
    return sig, codegen


@njit(cache=True, inline="always")
def try_lock_at(word):
    """Take the lock word at ``word`` (an int64 pointer: 0 free, 1 taken) if it is free; never waits.  Called in
    the real-time loop."""
    return _compare_and_swap(word, 0, 1) == 0


@njit(cache=True, inline="always")
def unlock_at(word):
    """Free the lock word taken with :func:`try_lock_at`.  Called in the real-time loop."""
    _store_release(word, 0)


@njit("boolean(int64[::1])", cache=True)
def try_lock(word):
    """:func:`try_lock_at` on ``word[0]`` (from Python: a thread that shares a mailbox with the tick)."""
    return try_lock_at(raw_i(word))


@njit("void(int64[::1])", cache=True)
def unlock(word):
    """:func:`unlock_at` on ``word[0]``."""
    unlock_at(raw_i(word))


@intrinsic
def call_stage_at(typingctx, address, ctx, k, now_ns, dt, carry):
    """Call the compiled stage at ``address`` (:data:`STAGE_SIGNATURE`).  Called in the real-time loop."""
    sig = types.int64(address, ctx, k, now_ns, dt, carry)

    def codegen(context, builder, signature, llargs):
        fnty = ir.FunctionType(ir.IntType(64), [context.get_value_type(t) for t in signature.args[1:]])
        return builder.call(builder.inttoptr(llargs[0], fnty.as_pointer()), llargs[1:])
    return sig, codegen


@intrinsic
def monotonic_ns(typingctx):
    """CLOCK_MONOTONIC in ns (the C library's ``clock_gettime``, as ``time.monotonic_ns``).  Called in the
    real-time loop."""
    sig = types.int64()

    def codegen(context, builder, signature, args):
        i64 = ir.IntType(64)
        spec_t = ir.LiteralStructType([i64, i64])
        fnty = ir.FunctionType(ir.IntType(32), [ir.IntType(32), spec_t.as_pointer()])
        fn = builder.module.globals.get("clock_gettime") or ir.Function(builder.module, fnty, "clock_gettime")
        spec = builder.alloca(spec_t)
        builder.call(fn, [ir.Constant(ir.IntType(32), 1), spec])  # 1: CLOCK_MONOTONIC (Linux)
        sec = builder.load(builder.gep(spec, [ir.Constant(ir.IntType(32), 0), ir.Constant(ir.IntType(32), 0)]))
        nsec = builder.load(builder.gep(spec, [ir.Constant(ir.IntType(32), 0), ir.Constant(ir.IntType(32), 1)]))
        return builder.add(builder.mul(sec, ir.Constant(i64, 1_000_000_000)), nsec)
    return sig, codegen


@njit("int64(int64[::1], int64, int64, float64)", cache=True)
def tick_run(plan, k, now_ns, dt):
    """One tick: the stages before the step, the plant's step, the stages after it; returns the status word.

    Every array comes from the addresses in ``plan`` (one array argument: each costs the call from Python
    about 50 ns).  ``plan[P_STEP_NS]`` receives the step's duration, ns.  Returns :data:`NEED_PYTHON`, having
    changed nothing, when a scenario drives the inputs and the plan's gate (a stage of the scenario player)
    does not pass this tick, or the plan has none.  Called in the real-time loop.
    """
    tick_info = i64_at(plan[P_TICK_INFO])  # noqa: F821
    if tick_info[TI_SCENARIO] != 0 and (plan[P_GATE] == 0 or call_stage_at(  # noqa: F821
            plan[P_GATE], i64_at(plan[P_GATE_CTX]), k, now_ns, dt, 0) != 0):  # noqa: F821
        return NEED_PYTHON
    n_before = plan[P_N_BEFORE]  # noqa: F821
    carry = 0
    for j in range(n_before):
        at = P_STAGES + 2 * j  # noqa: F821
        carry |= call_stage_at(plan[at], i64_at(plan[at + 1]), k, now_ns, dt, carry)
    b = P_BUFFERS  # noqa: F821
    mf, mi = carray(f64_at(plan[b]), (plan[b + 1],)), carray(i64_at(plan[b + 2]), (plan[b + 3],))
    df, di = carray(f64_at(plan[b + 4]), (plan[b + 5],)), carray(i64_at(plan[b + 6]), (plan[b + 7],))
    t0 = monotonic_ns()
    st = call_step_at(plan[P_STEP_AT], mf, mi, df, di, dt)  # noqa: F821
    plan[P_STEP_NS] = monotonic_ns() - t0  # noqa: F821
    tick_info[TI_STATUS] = st
    for j in range(n_before, n_before + plan[P_N_AFTER]):  # noqa: F821
        at = P_STAGES + 2 * j  # noqa: F821
        call_stage_at(plan[at], i64_at(plan[at + 1]), k, now_ns, dt, st)
    return st


@cfunc(STAGE_SIGNATURE, cache=True)
def queued_inputs_stage(ctx, k, now_ns, dt, carry):
    """Stage ``commanded``, its second part: the inputs queued by a request (held: rate 0), then none queued.

    ``ctx``: [count, idx, val, u, u_rate] addresses (see :func:`queued_inputs_ctx`).  Called in the real-time loop.
    """
    count = i64_at(ctx[0])
    n = count[0]
    if n:
        idx, val, u, u_rate = i64_at(ctx[1]), f64_at(ctx[2]), f64_at(ctx[3]), f64_at(ctx[4])
        for j in range(n):
            u[idx[j]] = val[j]
            u_rate[idx[j]] = 0.0
        count[0] = 0
    return 0


@cfunc(STAGE_SIGNATURE, cache=True)
def state_row_stage(ctx, k, now_ns, dt, carry):
    """Stage ``state_row``: :func:`plant_models.run.ring.ring_push` of the row after step k (tick k + 1, the
    tick's clock, the plant's time from ``df``), on array views of the addresses in ``ctx``.

    ``ctx``: [head, ints, floats, tick_info, df, index of the time in df, rows, float columns, header slots,
    df's length] (:func:`state_row_ctx`).  Called in the real-time loop.
    """
    rows = ctx[6]
    df = carray(f64_at(ctx[4]), (ctx[9],))
    ring_push(carray(i64_at(ctx[0]), (ctx[8],)), carray(i64_at(ctx[1]), (rows, N_INT)),
              carray(f64_at(ctx[2]), (rows, ctx[7])), carray(i64_at(ctx[3]), (TICK_INFO_SLOTS,)), df, k + 1,
              now_ns, df[ctx[5]])
    return 0


@cfunc(STAGE_SIGNATURE, cache=True)
def warm_stage(ctx, k, now_ns, dt, carry):
    """The rehearsal's one stage (:attr:`CompiledTick.rehearse`): copies the plant's data buffers into the
    scratch ones the rehearsed step runs on, then reads a byte of every cache line of the tick's other memory
    (the stages' contexts and small arrays, the first bytes of each stage's code, the state ring's next row), so
    the next tick finds them in the caches.  Changes nothing the tick reads.

    ``ctx``: [copies, (source, target, bytes) per copy, regions, (address, bytes) per region, 1 or 0, the state
    ring's head, its ints, an int row's bytes, its floats, a float row's bytes, its rows; a sink slot]
    (:func:`warm_ctx`).  Called in the real-time loop, between ticks.
    """
    j = 1
    for _ in range(ctx[0]):
        src, dst = u8_at(ctx[j]), u8_at(ctx[j + 1])
        for b in range(ctx[j + 2]):
            dst[b] = src[b]
        j += 3
    n = ctx[j]
    j += 1
    acc = 0
    for _ in range(n):
        at = u8_at(ctx[j])
        for b in range(0, ctx[j + 1], 64):
            acc += at[b]
        j += 2
    if ctx[j]:  # the state ring's next row (the ring is too large to keep in the caches; its next row is not)
        r = i64_at(ctx[j + 1])[H_WRITTEN] % ctx[j + 6]  # the row ring_push writes next
        for at, nbytes in ((ctx[j + 2] + r * ctx[j + 3], ctx[j + 3]), (ctx[j + 4] + r * ctx[j + 5], ctx[j + 5])):
            row = u8_at(at)
            for b in range(0, nbytes, 64):
                acc += row[b]
    ctx[j + 7] = acc  # the reads are used: the compiler keeps them
    return 0


WARM_ARRAY_MAX_BYTES = 16384  # arrays larger than this (the ring, a scenario's tables) are not read whole
WARM_CODE_BYTES = 256  # the first bytes of each stage's code read by the rehearsal (never past its page)
PAGE_BYTES = 4096  # the smallest page: a read that stays inside the page of a function's first byte is mapped


def warm_ctx(copies: Sequence[tuple[np.ndarray, np.ndarray]], regions: Sequence[tuple[int, int]],
             ring: StateRing | None = None) -> np.ndarray:
    """The context of :func:`warm_stage`: ``copies`` (source, target) of equal size, ``regions`` (address,
    bytes), the state ring whose next row is read (None: none)."""
    ctx = [len(copies)]
    for src, dst in copies:
        if src.nbytes != dst.nbytes:
            raise ValueError("a rehearsal copy needs a target of the source's size")
        ctx += [address(src), address(dst), src.nbytes]
    ctx.append(len(regions))
    for at, nbytes in regions:
        ctx += [int(at), int(nbytes)]
    if ring is None:
        ctx += [0] * 7
    else:
        rows = ring.ints.shape[0]
        ctx += [1, address(ring.head), address(ring.ints), ring.ints.nbytes // rows, address(ring.floats),
                ring.floats.nbytes // rows, rows]
    ctx.append(0)  # the sink
    return np.array(ctx, dtype=np.int64)


def address(a: np.ndarray) -> int:
    """The address of a contiguous array's data (the array must outlive every use of it)."""
    if not a.flags.c_contiguous:
        raise ValueError("a compiled stage takes contiguous arrays only")
    return int(a.ctypes.data)


@dataclass(frozen=True)
class CompiledStage:
    """The compiled form of a stage implementation.

    Attributes
    ----------
    stage
        The stage's name in :data:`plant_models.run.stages.STAGES`.
    address
        The address of its compiled function (:data:`STAGE_SIGNATURE`; a ``numba.cfunc``'s ``address``).
    ctx
        Its context: an int64 array (addresses of its arrays, sizes, settings).
    keep
        The arrays whose addresses ``ctx`` holds, kept alive with it.
    """

    stage: str
    address: int
    ctx: np.ndarray
    keep: tuple = field(default=(), repr=False)

    @classmethod
    def of(cls, stage: str, fn, values: Sequence) -> "CompiledStage":
        """A stage of the cfunc ``fn`` whose context is ``values``: arrays (their addresses go in) and integers."""
        ctx = np.array([address(v) if isinstance(v, np.ndarray) else int(v) for v in values], dtype=np.int64)
        return cls(stage, int(fn.address), ctx, tuple(v for v in values if isinstance(v, np.ndarray)))


def queued_inputs_ctx(count: np.ndarray, idx: np.ndarray, val: np.ndarray, u: np.ndarray,
                      u_rate: np.ndarray) -> CompiledStage:
    """The compiled form of the queued inputs (``count[0]`` of ``idx``/``val``, into ``u`` and ``u_rate``)."""
    return CompiledStage.of("commanded", queued_inputs_stage, (count, idx, val, u, u_rate))


def state_row_ctx(ring: StateRing, tick_info: np.ndarray, df: np.ndarray, time_index: int) -> CompiledStage:
    """The compiled form of the state ring's row (``df[time_index]``: the plant's simulated time, s)."""
    if ring.ints.shape[1] != N_INT or not ring.ints.flags.c_contiguous or not ring.floats.flags.c_contiguous:
        raise ValueError("the state ring's rows are not laid out as ring.py declares")
    return CompiledStage.of("state_row", state_row_stage, (
        ring.head, ring.ints, ring.floats, tick_info, df, time_index, ring.ints.shape[0], ring.floats.shape[1],
        ring.head.shape[0], df.shape[0]))


@dataclass(frozen=True)
class TickPlan:
    """What a stage's ``make_compiled`` (:attr:`plant_models.run.stages.Stage.make_compiled`) is given when the
    real-time loop builds its compiled tick: the names :class:`~plant_models.run.offline_compiled.OfflinePlan`
    gives an offline run's stages.

    Attributes
    ----------
    plant
        The plant (its four buffers are bound to the tick).
    dt
        The tick's step, s.
    mode
        ``"realtime"``, ``"lockstep"`` or ``"afap"``.
    last
        The tick count the run ends at (its ``duration_s``), 0: none (the tick count is not bounded).
    """

    plant: object
    dt: float
    mode: str
    last: int


class CompiledTick:
    """A tick as one compiled call: the plan of :func:`tick_run` for a plant and its compiled stages.

    Parameters
    ----------
    step_at
        The address of the plant's compiled step (:func:`plant_models.offline.kernel_address`).
    plant
        The plant (its four buffers are bound to the call).
    tick_info
        The loop's tick-info slots (``TI_*``).
    stages
        The compiled stages in the order of the stage list, before the step then after it; ``after`` says how
        many of the last ones run after it.
    gate
        None, or a stage called before the others while a scenario drives the inputs: non-zero sends the tick
        to the Python stepper, before anything changed (a tick that swaps or refills the scenario's table, or
        ends the scenario).
    ring
        The state ring the ``state_row`` stage writes, whose next row the rehearsal reads (None: none).

    Attributes
    ----------
    run
        ``run(k, now_ns, dt) -> status`` (:data:`NEED_PYTHON`: the tick was not taken).  Called in the
        real-time loop.
    step_ns
        ``step_ns[0]``: the duration of the last step, ns (a memoryview of the plan's slot).
    rehearse
        ``rehearse(k, now_ns, dt)``: the tick's call on scratch copies, changing nothing the tick reads
        (:meth:`_rehearsal`).  Called in the real-time loop, before a deadline.
    """

    def __init__(self, step_at: int, plant, tick_info: np.ndarray, stages: Sequence[CompiledStage], after: int,
                 gate: CompiledStage | None = None, ring: StateRing | None = None):
        if len(stages) > MAX_STAGES:
            raise ValueError(f"a compiled tick takes at most {MAX_STAGES} stages, not {len(stages)}")
        self.stages = tuple(stages)
        self.gate = gate
        self.plan = np.zeros(P_STAGES + 2 * MAX_STAGES, dtype=np.int64)  # noqa: F821
        self.plan[P_STEP_AT] = step_at  # noqa: F821
        self.plan[P_N_BEFORE] = len(stages) - after  # noqa: F821
        self.plan[P_N_AFTER] = after  # noqa: F821
        if gate is not None:
            self.plan[P_GATE] = gate.address  # noqa: F821
            self.plan[P_GATE_CTX] = address(gate.ctx)  # noqa: F821
        for j, s in enumerate(stages):
            self.plan[P_STAGES + 2 * j] = s.address  # noqa: F821
            self.plan[P_STAGES + 2 * j + 1] = address(s.ctx)  # noqa: F821
        for j, buf in enumerate((plant.mf, plant.mi, plant.df, plant.di)):
            self.plan[P_BUFFERS + 2 * j] = address(buf)  # noqa: F821
            self.plan[P_BUFFERS + 2 * j + 1] = buf.shape[0]  # noqa: F821
        self.plan[P_TICK_INFO] = address(tick_info)  # noqa: F821
        self.buffers = (plant.mf, plant.mi, plant.df, plant.di, tick_info)  # alive while the plan has their addresses
        self.step_ns = memoryview(self.plan)[P_STEP_NS:P_STEP_NS + 1]  # noqa: F821 a plain int per read
        self.run = functools.partial(tick_run, self.plan)
        self.rehearse = self._rehearsal(plant, tick_info, ring)

    def _rehearsal(self, plant, tick_info: np.ndarray, ring: StateRing | None):
        """``rehearse(k, now_ns, dt)``: the tick's compiled call on a scratch plan, before a deadline.

        The same :func:`tick_run` called the same way (its dispatch from
        Python, its code), the plant's step on scratch copies of ``df`` and
        ``di`` (the model buffers are only read) with a scratch ``tick_info``,
        and one stage, :func:`warm_stage`, that makes the copies and reads
        the tick's stages' contexts, their small arrays, the start of their
        code and the state ring's next row; no stage of the tick runs,
        nothing the tick reads changes.  A loop that slept calls it 30 us
        before its deadline (:mod:`server.realtime.waits`) so the tick after a sleep
        finds its code and data in the caches.
        """
        self._dry_df, self._dry_di = np.empty_like(plant.df), np.empty_like(plant.di)
        self._dry_tick_info = np.zeros_like(tick_info)
        regions = [(address(self.plan), self.plan.nbytes), (address(tick_info), tick_info.nbytes)]
        for s in self.stages + ((self.gate,) if self.gate is not None else ()):
            regions.append((address(s.ctx), s.ctx.nbytes))
            # the code's first bytes, within its page (the next page need not be mapped)
            regions.append((s.address, min(WARM_CODE_BYTES, PAGE_BYTES - s.address % PAGE_BYTES)))
            regions += [(address(a), a.nbytes) for a in s.keep if a.nbytes <= WARM_ARRAY_MAX_BYTES]
        self._warm_ctx = warm_ctx(((plant.df, self._dry_df), (plant.di, self._dry_di)), regions, ring)
        dry = np.zeros_like(self.plan)
        dry[P_STEP_AT] = self.plan[P_STEP_AT]  # noqa: F821
        dry[P_N_BEFORE], dry[P_N_AFTER] = 1, 0  # noqa: F821
        for j, buf in enumerate((plant.mf, plant.mi, self._dry_df, self._dry_di)):
            dry[P_BUFFERS + 2 * j], dry[P_BUFFERS + 2 * j + 1] = address(buf), buf.shape[0]  # noqa: F821
        dry[P_TICK_INFO] = address(self._dry_tick_info)  # noqa: F821
        dry[P_STAGES], dry[P_STAGES + 1] = int(warm_stage.address), address(self._warm_ctx)  # noqa: F821
        self.dry_plan = dry
        return functools.partial(tick_run, dry)


__all__ = ["FED", "NEED_PYTHON", "STAGE_SIGNATURE", "CompiledStage", "CompiledTick", "address", "call_stage_at",
           "f64_at", "i64_at", "monotonic_ns", "queued_inputs_ctx", "queued_inputs_stage", "state_row_ctx",
           "state_row_stage", "TickPlan", "tick_run", "try_lock", "try_lock_at", "u8_at", "unlock", "unlock_at", "warm_ctx",
           "warm_stage"]
