"""The step of a plant with FMUs as one compiled function: the FMUs' C entry points (FMI 2.0 and 3.0, co-simulation
and model exchange) by address.

:class:`.assembly.FmuAssembly` steps its FMUs through ctypes, three calls
a tick for a one-state FMU, each converting its arguments (about 5 us a
tick, ``BENCHMARKS.md``).  Here the whole assembly step of
:mod:`.assembly` (its order, its copies, its conversions, its failure
handling) is :func:`assembly_step`, a compiled function with a plant
step's signature ``int64(mf, mi, df, di, dt)``: it calls ``fmi2SetReal`` /
``fmi2SetInteger`` / ``fmi2SetBoolean``, ``fmi2DoStep`` and the getters
(FMI 3.0: ``fmi3SetFloat64`` / ``Int32`` / ``Int64`` / ``Boolean``,
``fmi3DoStep``, ...) through their addresses, taken once from the loaded library, on the value
arrays the slots allocated at load time, and the inner plant's compiled
step through its address (:func:`plant_models.offline.kernel_address`).
So the tick is one compiled call, and the compiled offline run
(:class:`plant_models.offline.Run`) runs a plant with FMUs as it runs any
compiled plant.

Everything the step needs that is not in the assembly's own ``df``/``di``
is in its int64 table ``mi`` (:func:`build_table`): the addresses and
lengths of the inner plant's buffers (allocated once, when the inner plant
was built, and alive as long as the assembly holds it), the port offsets,
and a record per FMU.  ``mf`` is the inner plant's (the tunable values
live there).  Nothing is allocated or looked up in the step.

A call whose status is above ``fmi2Warning`` marks the FMU failed in
``di`` (with the status, the call and the time in ``df``); its ``safe``
values, if any, replace its outputs and it is not called again until the
next reset, as in :mod:`.assembly`, which turns the record into the
message of :attr:`.assembly.FmuAssembly.fmu_errors`.

The inner plant's events are mirrored into the assembly's ``df``/``di``
after each step (a ring of the same capacity), so a compiled reader finds
them in the buffers it is given (:meth:`CompiledPlant.event_log`).
"""

from __future__ import annotations

import ctypes
import math

import numpy as np
from numba import carray, njit

from ..contract.compiled import CompiledPlant, Kernel
from ..contract.vocabulary import ST_BAD_INPUT
from ..core.api import JIT, L, call_step_at, raw_f, raw_i
from .assembly import FmuAssembly, failure_message
from .cabi import fmi2_array_call, fmi2_do_step, fmi3_array_call, fmi3_do_step, ptr_f64, ptr_i32, ptr_i64, ptr_u8
from .me_compiled import me_advance, me_words
from .slots import RC_FAILED

STEP_SIGNATURE = "int64(float64[::1], int64[::1], float64[::1], int64[::1], float64)"
# numba checks a cached kernel against its own source file only; what this module's kernels link besides it (the C
# calls of .cabi, the model-exchange advance of .me_compiled and its constants, the core's helpers and layout
# constants) is followed by plant_models/core/cache.py, which drops their cache when one of those files changes

# -- the table mi: a header, then the lists and records its entries point at -----------------------------
(MI_INNER_STEP, MI_INNER_MI, MI_INNER_MI_N, MI_INNER_DF, MI_INNER_DF_N, MI_INNER_DI, MI_INNER_DI_N,
 MI_INNER_IN, MI_INNER_NIN, MI_INNER_OUT, MI_INNER_NOUT, MI_INNER_TIME,
 MI_IN, MI_NIN, MI_OUT, MI_TIME,
 MI_N_FREE, MI_FREE_AT, MI_N_DRIVEN, MI_DRIVEN_AT, MI_N_SLOTS, MI_SLOTS_AT,
 MI_STATUS_AT, MI_ST_FMU_ERROR, MI_ST_BAD_INPUT,
 MI_FAILED_AT, MI_RC_AT, MI_CALL_AT, MI_FAIL_T_AT,
 MI_EV_T, MI_EV_SRC, MI_EV_KIND, MI_EV_COUNT, MI_EV_CAP, MI_MEV_T, MI_MEV_SRC, MI_MEV_KIND, MI_MEV_COUNT,
 MI_HINTS, MI_INNER_HINTS, MI_FED_ANY,
 MI_LEN) = range(42)
# a record per FMU: these words, then its lists (own inputs, fed inputs, safe outputs, groups)
(S_NEXT, S_IN, S_OUT, S_N_OUT, S_COMP, S_DO_STEP, S_N_OWN, S_N_FED, S_N_SAFE, S_SAFE_VALUES, S_N_IN_GROUPS,
 S_N_OUT_GROUPS, S_ME, S_V3, S_STEP_FLAGS, S_LEN) = range(16)
# S_ME: a model-exchange FMU's record (.me_compiled), from the record's start, or -1; S_V3: FMI 3.0 (1) or 2.0 (0);
# S_STEP_FLAGS: FMI 3.0 co-simulation, the address of fmi3DoStep's four out-pointers (an int64 table)
# a get or set group: these words, then its n port indices (G_V3: FMI 3.0's call, with nValues)
G_FN, G_VR, G_N, G_VAL, G_KIND, G_V3, G_LEN = range(7)
# the value array's C type: double; int32 (Integer, Int32); int32 (FMI 2.0 Boolean); int64 (Int64); bool (FMI 3.0)
KIND_REAL, KIND_INT, KIND_BOOL, KIND_INT64, KIND_BOOL8 = 0, 1, 2, 3, 4
RUN_MODEL_SAME, RUN_OUTPUTS_UNREAD, RUN_INPUTS_SAME = L.RUN_MODEL_SAME, L.RUN_OUTPUTS_UNREAD, L.RUN_INPUTS_SAME
CALL_DO_STEP, CALL_SET, CALL_GET = 0, 1, 1000  # di[call]: doStep, 1 + input group, 1000 + output group


# -- the step ------------------------------------------------------------------------------------------
@njit(**JIT)
def _put(pm, g, comp, np_in):
    """Input group at ``pm[g]``: the FMU inputs into its value array (Integer rounded, Boolean non-zero), then set."""
    n = pm[g + G_N]
    kind = pm[g + G_KIND]
    if kind == KIND_REAL:
        vf = ptr_f64(pm[g + G_VAL])
        for q in range(n):
            vf[q] = np_in[pm[g + G_LEN + q]]
    elif kind == KIND_INT64:
        vl = ptr_i64(pm[g + G_VAL])
        for q in range(n):
            vl[q] = np.int64(np.rint(np_in[pm[g + G_LEN + q]]))
    elif kind == KIND_BOOL8:
        vb = ptr_u8(pm[g + G_VAL])
        for q in range(n):
            vb[q] = np.uint8(1) if np_in[pm[g + G_LEN + q]] != 0.0 else np.uint8(0)
    else:
        vi = ptr_i32(pm[g + G_VAL])
        for q in range(n):
            x = np_in[pm[g + G_LEN + q]]
            vi[q] = np.int32(np.rint(x)) if kind == KIND_INT else (np.int32(1) if x != 0.0 else np.int32(0))
    if pm[g + G_V3]:
        return fmi3_array_call(pm[g + G_FN], comp, pm[g + G_VR], n, pm[g + G_VAL])
    return fmi2_array_call(pm[g + G_FN], comp, pm[g + G_VR], n, pm[g + G_VAL])


@njit(**JIT)
def _take(pm, g, comp, np_out):
    """Output group at ``pm[g]``: get, then its values into the FMU outputs (whatever the status, as the slots do)."""
    n = pm[g + G_N]
    if pm[g + G_V3]:
        rc = fmi3_array_call(pm[g + G_FN], comp, pm[g + G_VR], n, pm[g + G_VAL])
    else:
        rc = fmi2_array_call(pm[g + G_FN], comp, pm[g + G_VR], n, pm[g + G_VAL])
    kind = pm[g + G_KIND]
    if kind == KIND_REAL:
        vf = ptr_f64(pm[g + G_VAL])
        for q in range(n):
            np_out[pm[g + G_LEN + q]] = vf[q]
    elif kind == KIND_INT64:
        vl = ptr_i64(pm[g + G_VAL])
        for q in range(n):
            np_out[pm[g + G_LEN + q]] = float(vl[q])
    elif kind == KIND_BOOL8:
        vb = ptr_u8(pm[g + G_VAL])
        for q in range(n):
            np_out[pm[g + G_LEN + q]] = 1.0 if vb[q] != 0 else 0.0
    else:
        vi = ptr_i32(pm[g + G_VAL])
        for q in range(n):
            np_out[pm[g + G_LEN + q]] = float(vi[q])
    return rc


@njit(**JIT)
def _fmu_step(pm, at, pdf, ipdf, t, dt):
    """One FMU (record at ``pm[at]``): its inputs copied and set, ``fmi2DoStep``, its outputs got.

    Returns ``status * 4096 + call`` of the first call above fmi2Warning (CALL_*), or 0."""
    np_in = ptr_f64(pm[at + S_IN])
    np_out = ptr_f64(pm[at + S_OUT])
    comp = pm[at + S_COMP]
    a_in = pm[MI_IN]
    i_out = pm[MI_INNER_OUT]
    p = at + S_LEN
    for q in range(pm[at + S_N_OWN]):  # inputs of the assembly
        np_in[pm[p]] = pdf[a_in + pm[p + 1]]
        p += 2
    for q in range(pm[at + S_N_FED]):  # inner plant outputs at t
        np_in[pm[p]] = ipdf[i_out + pm[p + 1]]
        p += 2
    p += pm[at + S_N_SAFE]
    for q in range(pm[at + S_N_IN_GROUPS]):
        rc = _put(pm, p, comp, np_in)
        if rc > 1:
            return rc * 4096 + CALL_SET + q
        p += G_LEN + pm[p + G_N]
    if pm[at + S_ME] >= 0:
        rc = me_advance(pm, at + pm[at + S_ME], comp, t, dt)
    elif pm[at + S_V3]:
        rc = fmi3_do_step(pm[at + S_DO_STEP], comp, t, dt, pm[at + S_STEP_FLAGS])
        flags = ptr_i64(pm[at + S_STEP_FLAGS])
        if rc <= 1 and (ptr_u8(flags[1])[0] != 0 or ptr_u8(flags[2])[0] != 0):  # a stop or a step cut short
            rc = np.int32(RC_FAILED)
    else:
        rc = fmi2_do_step(pm[at + S_DO_STEP], comp, t, dt)
    if rc > 1:
        return rc * 4096 + CALL_DO_STEP
    for q in range(pm[at + S_N_OUT_GROUPS]):
        rc = _take(pm, p, comp, np_out)
        if rc > 1:
            return rc * 4096 + CALL_GET + q
        p += G_LEN + pm[p + G_N]
    return 0


@njit(**JIT)
def _fail(pm, at, k, pdf, pdi, t, code):
    """FMU k failed: recorded (status, call, time), its safe values out.  Taken once per failure."""
    pdi[pm[MI_FAILED_AT] + k] = 1
    pdi[pm[MI_RC_AT] + k] = code // 4096
    pdi[pm[MI_CALL_AT] + k] = code % 4096
    pdf[pm[MI_FAIL_T_AT] + k] = t
    np_out = ptr_f64(pm[at + S_OUT])
    safe = ptr_f64(pm[at + S_SAFE_VALUES])
    p = at + S_LEN + 2 * (pm[at + S_N_OWN] + pm[at + S_N_FED])
    for q in range(pm[at + S_N_SAFE]):
        np_out[pm[p + q]] = safe[q]


@njit(**JIT)
def _mirror_events(pm, pdf, pdi, ipdf, ipdi):
    """The inner plant's events logged since the last step, copied into the assembly's ring."""
    total = ipdi[pm[MI_EV_COUNT]]
    seen = pdi[pm[MI_MEV_COUNT]]
    if total == seen:
        return
    cap = pm[MI_EV_CAP]
    for q in range(max(seen, total - cap), total):
        s = q % cap
        pdf[pm[MI_MEV_T] + s] = ipdf[pm[MI_EV_T] + s]
        pdi[pm[MI_MEV_SRC] + s] = ipdi[pm[MI_EV_SRC] + s]
        pdi[pm[MI_MEV_KIND] + s] = ipdi[pm[MI_EV_KIND] + s]
    pdi[pm[MI_MEV_COUNT]] = total


@njit(**JIT)
def _drive_inner(pm, pdf, ipdf):
    """The inner plant's inputs: the free ones from the assembly's, the driven ones from the FMU outputs (rate 0).

    Returns whether every value and rate is the one it replaced, bit for bit (a NaN always differs)."""
    a_in, n_in = pm[MI_IN], pm[MI_NIN]
    i_in, i_n_in = pm[MI_INNER_IN], pm[MI_INNER_NIN]
    same = True
    p = pm[MI_FREE_AT]
    for q in range(pm[MI_N_FREE]):  # the free inputs are the assembly's first
        i = pm[p + q]
        v, r = pdf[a_in + q], pdf[a_in + n_in + q]
        same = same and ipdf[i_in + i] == v and ipdf[i_in + i_n_in + i] == r
        ipdf[i_in + i] = v
        ipdf[i_in + i_n_in + i] = r
    p = pm[MI_DRIVEN_AT]
    for q in range(pm[MI_N_DRIVEN]):  # (inner input, the FMU's output array, index): held over the step
        i = pm[p]
        v = ptr_f64(pm[p + 1])[pm[p + 2]]
        same = same and ipdf[i_in + i] == v and ipdf[i_in + i_n_in + i] == 0.0
        ipdf[i_in + i] = v
        ipdf[i_in + i_n_in + i] = 0.0
        p += 3
    return same


@njit(**JIT)
def _inner_hints(pm, hints, same):
    """The inner plant's run hints from the assembly's (``hints``, written by a compiled run; 0 in a tick):

    the model floats the same (they are the inner plant's); its outputs unread when the assembly's are and no
    FMU reads them; its inputs the same when they are bit for bit and the model is (not the first step of a
    compiled run's call, where Python may have changed the plant's state)."""
    out = hints & RUN_MODEL_SAME
    if (hints & RUN_OUTPUTS_UNREAD) != 0 and pm[MI_FED_ANY] == 0:
        out |= RUN_OUTPUTS_UNREAD
    if same and out & RUN_MODEL_SAME:
        out |= RUN_INPUTS_SAME
    return out


@njit(**JIT)
def assembly_step(mf, mi, df, di, dt):
    """One step of the assembly (the order of :meth:`.assembly.FmuAssembly.step`); returns the status word.

    ``mf`` is the inner plant's, ``mi`` the table of :func:`build_table`.  Called in the real-time loop.
    """
    pm, pdf, pdi = raw_i(mi), raw_f(df), raw_i(di)
    if not (dt > 0.0 and math.isfinite(dt)):
        return pm[MI_ST_BAD_INPUT]
    ipdf = ptr_f64(pm[MI_INNER_DF])
    ipdi = ptr_i64(pm[MI_INNER_DI])
    t = pdf[pm[MI_TIME]]
    status = 0
    at = pm[MI_SLOTS_AT]
    for k in range(pm[MI_N_SLOTS]):
        if pdi[pm[MI_FAILED_AT] + k] != 0:
            status |= pm[MI_ST_FMU_ERROR]
        else:
            code = _fmu_step(pm, at, pdf, ipdf, t, dt)
            if code != 0:
                _fail(pm, at, k, pdf, pdi, t, code)
                status |= pm[MI_ST_FMU_ERROR]
        at = pm[at + S_NEXT]
    same = _drive_inner(pm, pdf, ipdf)
    if pm[MI_INNER_HINTS] >= 0:
        ipdi[pm[MI_INNER_HINTS]] = _inner_hints(pm, pdi[pm[MI_HINTS]], same)
    imi = carray(ptr_i64(pm[MI_INNER_MI]), pm[MI_INNER_MI_N])
    idf = carray(ipdf, pm[MI_INNER_DF_N])
    idi = carray(ipdi, pm[MI_INNER_DI_N])
    status |= call_step_at(pm[MI_INNER_STEP], mf, imi, idf, idi, dt)
    pdf[pm[MI_TIME]] = ipdf[pm[MI_INNER_TIME]]
    _mirror_events(pm, pdf, pdi, ipdf, ipdi)
    a_out, i_out = pm[MI_OUT], pm[MI_INNER_OUT]
    n = pm[MI_INNER_NOUT]
    for j in range(n):
        pdf[a_out + j] = ipdf[i_out + j]
    o = a_out + n
    at = pm[MI_SLOTS_AT]
    for k in range(pm[MI_N_SLOTS]):  # each FMU's outputs, held or new
        np_out = ptr_f64(pm[at + S_OUT])
        for j in range(pm[at + S_N_OUT]):
            pdf[o + j] = np_out[j]
        o += pm[at + S_N_OUT]
        at = pm[at + S_NEXT]
    if pm[MI_STATUS_AT] >= 0:  # the step's status word, FMU bits included
        w = a_out + pm[MI_STATUS_AT]
        pdf[w] = float(np.int64(pdf[w]) | status)
    return status


# -- the table, built once when the assembly is -----------------------------------------------------------
def time_index(inner) -> int:
    """Index of the inner plant's time in its ``df``, or -1 (a plant whose ``time`` is not read from ``df``).

    Found by probing: ``df`` filled with distinct values for a moment, ``time`` read (the contract has no offset
    for it; every compiled plant keeps its time there)."""
    df = inner.df
    saved = df.copy()
    try:
        df[:] = np.arange(len(df), dtype=np.float64) + 0.5
        k = inner.time - 0.5
    except Exception:  # noqa: BLE001 -- a time computed otherwise: no compiled assembly
        return -1
    finally:
        df[:] = saved
    return int(k) if float(k).is_integer() and 0 <= k < len(df) else -1


def step_address(dispatcher) -> int:
    """Address of the C wrapper numba built for a plant's compiled step (as
    :func:`plant_models.offline.kernel_address`, which sits a floor above this package): its one signature must be
    a plant step's, which :func:`assembly_step` calls it with."""
    from numba.core import sigutils
    (sig,) = dispatcher.signatures
    cres = dispatcher.overloads[sig]
    args, ret = sigutils.normalize_signature(STEP_SIGNATURE)
    if tuple(sig) != tuple(args) or cres.signature.return_type != ret:
        raise TypeError(f"{dispatcher.__name__} is compiled as {cres.signature}; a plant step must be {STEP_SIGNATURE}")
    return int(cres.library.get_pointer_to_function(cres.fndesc.llvm_cfunc_wrapper_name))


def _address(fn) -> int:
    return int(ctypes.cast(fn, ctypes.c_void_p).value)


def _group_words(g) -> list[int]:
    idx = list(range(g.idx.start, g.idx.stop)) if isinstance(g.idx, slice) else [int(i) for i in g.idx]
    ctype = g.val._type_
    kind = (KIND_REAL if g.kind == "real" else KIND_INT64 if ctype is ctypes.c_int64 else
            KIND_BOOL8 if ctype is ctypes.c_bool else KIND_INT if g.kind == "int" else KIND_BOOL)
    return [_address(g.fn), ctypes.addressof(g.vr), g.n, ctypes.addressof(g.val), kind, int(bool(g.extra))] + idx


def _slot_words(a, k: int, s, keep: list) -> list[int]:
    own, ext = a._fmu_in[k]
    fed_a, fed_b = a._fed[k]
    safe = [(s.out_names.index(name), float(v)) for name, v in s.fmu.table.safe.items()]
    safe_values = np.array([v for _, v in safe] + [0.0])
    keep.append(safe_values)
    me, v3 = s.fmu.kind == "me", s.version == 3
    flags = 0
    if v3 and not me:  # fmi3DoStep's out-pointers: eventHandlingNeeded, terminateSimulation, earlyReturn, last time
        table = np.array([ctypes.addressof(f) for f in s._flags] + [ctypes.addressof(s._last_time)], dtype=np.int64)
        keep.append(table)
        flags = table.ctypes.data
    words = [0, s.np_in.ctypes.data, s.np_out.ctypes.data, s.n_out, int(s.comp.value),
             0 if me else _address(s.c_step), len(own), len(fed_a), len(safe), safe_values.ctypes.data,
             len(s.in_groups), len(s.out_groups), -1, int(v3), flags]
    for j, e in zip(own.tolist(), ext.tolist()):
        words += [j, e]
    for j, b in zip(fed_a.tolist(), fed_b.tolist()):
        words += [j, b]
    words += [j for j, _ in safe]
    for g in s.in_groups + s.out_groups:
        words += _group_words(g)
    if me:
        words[S_ME] = len(words)
        words += me_words(s, keep)
    return words


def build_table(a, layout: dict, keep: list) -> np.ndarray:
    """The int64 table ``mi`` of :func:`assembly_step` for the assembly ``a`` (its wiring done); ``layout``: where
    the failure records and the event mirror are in its ``df``/``di``; arrays the table points into go to ``keep``."""
    inner = a.inner
    head = np.zeros(MI_LEN, dtype=np.int64)
    step = inner.compile_kernels()["step"]
    head[[MI_INNER_STEP, MI_INNER_MI, MI_INNER_MI_N, MI_INNER_DF, MI_INNER_DF_N, MI_INNER_DI, MI_INNER_DI_N]] = [
        step_address(step), inner.mi.ctypes.data, len(inner.mi), inner.df.ctypes.data, len(inner.df),
        inner.di.ctypes.data, len(inner.di)]
    head[[MI_INNER_IN, MI_INNER_NIN, MI_INNER_OUT, MI_INNER_NOUT, MI_INNER_TIME]] = [
        inner.input_offset, inner.n_in, inner.output_offset, inner.n_out, layout["inner_time"]]
    head[[MI_IN, MI_NIN, MI_OUT, MI_TIME]] = [a.input_offset, a.n_in, a.output_offset, 0]
    head[[MI_STATUS_AT, MI_ST_FMU_ERROR, MI_ST_BAD_INPUT]] = [a._status_at, a.ST_FMU_ERROR, layout["bad_input"]]
    for key in ("FAILED_AT", "RC_AT", "CALL_AT", "FAIL_T_AT", "MEV_T", "MEV_SRC", "MEV_KIND", "MEV_COUNT"):
        head[globals()[f"MI_{key}"]] = layout[key.lower()]
    head[[MI_EV_T, MI_EV_SRC, MI_EV_KIND, MI_EV_COUNT, MI_EV_CAP]] = inner.event_log()
    head[[MI_HINTS, MI_INNER_HINTS, MI_FED_ANY]] = [layout["hints"], inner.run_hints_slot(),
                                                    int(any(len(fed) for fed, _ in a._fed))]
    words: list[int] = []
    head[MI_N_FREE], head[MI_FREE_AT] = len(a._free_in), MI_LEN
    words += a._free_in.tolist()
    head[MI_N_DRIVEN], head[MI_DRIVEN_AT] = len(a._driven), MI_LEN + len(words)
    for i, k, j in a._driven:
        words += [i, a.slots[k].np_out.ctypes.data, j]
    head[MI_N_SLOTS], head[MI_SLOTS_AT] = len(a.slots), MI_LEN + len(words)
    for k, s in enumerate(a.slots):
        record = _slot_words(a, k, s, keep)
        at = MI_LEN + len(words)
        record[S_NEXT] = at + len(record)
        words += record
    return np.concatenate([head, np.array(words, dtype=np.int64)])


def call_name(slot, call: int) -> str:
    """The FMI function of a failure record's call (CALL_*)."""
    if call == CALL_DO_STEP:
        return slot.advance_call
    groups, g = (slot.out_groups, call - CALL_GET) if call >= CALL_GET else (slot.in_groups, call - CALL_SET)
    return groups[g].fn.__name__


def supports(inner, fmus) -> bool:
    """Whether :class:`CompiledFmuAssembly` can step ``inner`` with ``fmus``: every FMU (FMI 2.0 or 3.0,
    co-simulation or model exchange) in this process, the inner plant's step its compiled function (nothing in
    Python around it), its time in ``df``."""
    return (all(f.version in (2, 3) and f.table.process != "own" for f in fmus)
            and isinstance(inner, CompiledPlant) and inner.rehearsable and time_index(inner) >= 0)


class CompiledFmuAssembly(FmuAssembly, CompiledPlant):
    """:class:`.assembly.FmuAssembly` whose step is :func:`assembly_step`: one compiled call a tick, and a
    :class:`~plant_models.contract.compiled.CompiledPlant`, so the compiled offline run takes it.

    Same ports, outputs, status, events, snapshots and messages as the
    Python step, bit for bit (tests/test_fmi_compiled.py).  Its FMUs'
    failures are recorded in ``di`` by the compiled step and turned into
    :attr:`fmu_errors` when they are read.  Not rehearsable: a step on
    scratch copies of ``df``/``di`` would still step the FMUs.
    """

    kernels = (Kernel("step", assembly_step, STEP_SIGNATURE),)
    step = CompiledPlant.step

    @property
    def rehearsable(self) -> bool:
        return False

    # -- buffers -------------------------------------------------------------------------------------
    def _extra_data(self) -> tuple[int, int]:
        """Per FMU the time of its failure (``df``), its failed flag, status and call (``di``); the event mirror."""
        n, cap = len(self.slots), self.inner.event_log()[4]
        return n + cap, 3 * n + 1 + 2 * cap + 1

    def _allocate_data(self):
        mf, df, di = FmuAssembly._allocate_data(self)
        n, cap = len(self.slots), self.inner.event_log()[4]
        ports = self._n_df - n - cap
        self._lay = dict(inner_time=time_index(self.inner), bad_input=ST_BAD_INPUT, failed_at=1, rc_at=1 + n,
                         call_at=1 + 2 * n, fail_t_at=ports, mev_t=ports + n, mev_count=1 + 3 * n,
                         mev_src=2 + 3 * n, mev_kind=2 + 3 * n + cap, hints=2 + 3 * n + 2 * cap)
        self._keep: list = []
        self.mi = build_table(self, self._lay, self._keep)
        return mf, df, di

    # -- life cycle, failures ------------------------------------------------------------------------
    def start(self) -> int:
        st = super().start()
        self.di[self._lay["mev_count"]] = self.inner.di[self.inner.event_log()[3]]  # the mirror from here on
        return st

    @property
    def fmu_errors(self) -> list[str]:
        self._report_failures()
        return self._errors

    @fmu_errors.setter
    def fmu_errors(self, value: list[str]) -> None:
        self._errors = value

    def _report_failures(self) -> None:
        """The failures the compiled step recorded since the last look: the FMU marked failed, counted, a message."""
        lay = self._lay
        for k, s in enumerate(getattr(self, "slots", ())):
            if self.di[lay["failed_at"] + k] and not s.failed:
                s.failed = True
                self.fmu_faults[s.name] += 1
                call = call_name(s, int(self.di[lay["call_at"] + k]))
                self._errors.append(failure_message(s, float(self.df[lay["fail_t_at"] + k]),
                                                    int(self.di[lay["rc_at"] + k]), call))

    def fmu_status(self) -> list[dict]:
        self._report_failures()
        return super().fmu_status()

    def get_state(self):
        self._report_failures()
        return super().get_state()

    def set_state(self, state) -> None:
        self._report_failures()
        super().set_state(state)
        for k, s in enumerate(self.slots):  # as the restored records say
            s.failed = bool(self.di[self._lay["failed_at"] + k])

    # -- for the compiled run: its hints, its event log (the mirror) ---------------------------------------
    def run_hints_slot(self) -> int:
        """The assembly's run-hints word: passed on to the inner plant's (:func:`_inner_hints`)."""
        return self._lay["hints"]

    def event_log(self) -> tuple[int, int, int, int, int]:
        lay = self._lay
        return lay["mev_t"], lay["mev_src"], lay["mev_kind"], lay["mev_count"], self.inner.event_log()[4]

    def mark_events_read(self) -> None:
        self.inner.mark_events_read()

    def close(self) -> None:
        """The FMUs freed; the compiled step then steps the inner plant alone (it points at no FMU any more)."""
        self.mi[MI_N_SLOTS] = 0
        self.mi[MI_N_DRIVEN] = 0
        super().close()


def assemble(inner, fmus) -> FmuAssembly:
    """The assembly of ``inner`` and ``fmus``: a :class:`CompiledFmuAssembly` (its step one compiled call) when
    :func:`supports` says so, else a :class:`.assembly.FmuAssembly` (the step from Python)."""
    if supports(inner, fmus):
        return CompiledFmuAssembly(inner, fmus)
    return FmuAssembly(inner, fmus)


__all__ = ["CompiledFmuAssembly", "assemble", "assembly_step", "build_table", "supports"]
