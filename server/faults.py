"""Fault injection: broken sensors and actuators, worn and stuck clutches, a bus that loses frames.

A fault is described by a plain map (the ``fault`` of a ``fault_set``
control request, an entry of a test file's fault schedule, the argument of
:meth:`FaultSet.set`); the format is ``docs/faults.md``::

    {"target": "signal", "signal": "w_out", "kind": "offset", "value": 5.0}
    {"target": "clutch", "clutch": 2, "kind": "stuck_closed"}
    {"target": "can", "message": "HIL_Speeds", "kind": "drop"}
    {"target": "zmq", "kind": "drop_commands"}

:func:`parse_fault` checks such a map against a plant (and the adapters)
and returns a :class:`FaultSpec`; :class:`FaultSet` holds the active
faults of one loop and applies them.

How each target acts, and why there
-----------------------------------
* **signal** faults (any input or output of the plant: force, freeze,
  offset, gain, seeded noise, drop-out) live in two preallocated tables
  (:attr:`FaultSet.fi`, :attr:`FaultSet.ff`) that three compiled functions
  walk in the tick: :func:`fault_inputs` after the adapters' read (and the
  scenario's inputs), just before the plant step, replaces each faulted
  input by its faulted value (clamped to the input's declared range, so a
  fault never hands the plant a value it would refuse) and keeps the clean
  value; after the step :func:`fault_push` replaces each faulted output
  (:func:`fault_outputs`), writes the state-ring row and puts the clean
  inputs back (:func:`fault_restore`), so between ticks ``plant.u`` holds
  what was commanded and a command or a ``set`` request is never mixed with
  a fault's value.  The
  ring row (and so the state stream) shows the inputs the step used and the
  outputs as the faulty sensors report them.  Setting or clearing a fault
  only writes table rows between ticks; the tick does no per-fault Python
  work, and with no signal fault active it calls neither of the two (the
  plain ring push instead of :func:`fault_push`).
* **clutch** faults change the friction core's model floats of the row
  (static and Coulomb capacity gains, actuator preload and lag), which the
  core reads afresh at every step (the reuse check of
  ``plant_models/core/step.py`` compares them), between ticks when the
  fault is set or cleared: nothing at all per tick.  The original floats
  are kept and every change recomputes the row from them and the faults
  still active on it, so faults on one clutch stack and clear in any order.
  ``pressure_bias`` is a signal fault (an offset) on the clutch's pressure
  output.
* **can** and **zmq** faults are handed to the adapter of that transport
  (:meth:`io_adapters.base.Adapter.set_fault`), which keeps them as flags of
  its own compiled codec or of its command intake.

A ``reset`` clears every fault.  Every status message carries the list
(``status()["faults"]``) and every state row the number of active faults
(``tick_info[TI_FAULTS]``: the ``faults`` field of the state stream).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
from numba import njit

from io_adapters.base import TI_FAULTS
from io_adapters.ring import ring_push
from plant_models.errors import FaultError
from plant_models.plant import Plant

MAX_FAULTS = 32  # signal faults active at once (the tables are preallocated)

# -- signal fault kinds (FI_KIND) ----------------------------------------------------------------------------
K_FORCE = 1  # value = the forced value
K_HOLD = 2  # the held value is captured when the fault is set (freeze, drop-out "last")
K_OFFSET = 3  # value = added
K_GAIN = 4  # value = factor
K_NOISE = 5  # value = standard deviation; seeded Gaussian noise added

SIGNAL_KINDS = ("force", "freeze", "offset", "gain", "noise", "dropout")
CLUTCH_KINDS = ("stuck_closed", "no_torque", "worn", "slow_actuator", "pressure_bias")
CAN_KINDS = ("drop", "delay", "freeze_alive", "corrupt_crc", "wrong_dlc", "out_of_range", "ignore_rx")
ZMQ_KINDS = ("drop_commands", "delay_commands")
TARGETS = ("signal", "clutch", "can", "zmq")

# -- table columns -------------------------------------------------------------------------------------------
FI_ACTIVE = 0
FI_SIDE = 1  # 0: input, 1: output
FI_INDEX = 2  # the signal's value in the plant's df
FI_RATE = 3  # an input's rate in df (-1 for an output)
FI_KIND = 4
FI_RNG = 5  # a noise fault's xorshift64* state (uint64 bits)
N_FI = 6
FF_VALUE = 0
FF_HELD = 1
FF_CLEAN = 2  # an input's clean value and rate during the step; the value an output fault got
FF_CLEAN_RATE = 3
FF_LO = 4  # an input's declared range: faulted values are clamped to it
FF_HI = 5
N_FF = 6

# A stuck-closed clutch: its static capacity per unit normal force is multiplied by this, and its normal force
# held at least at its largest commanded value, so it holds any torque the drive line can put on it and a
# slipping one closes at its full Coulomb torque.
STUCK_STATIC_FACTOR = 1.0e6

JIT = dict(cache=True)  # not nogil: called from the tick, which keeps the GIL (see io_adapters/ring.py)


@njit(**JIT)
def _uniform(fi, f):
    """The next number in (0, 1) of fault f's xorshift64* stream (53 bits).  Called in the real-time loop."""
    x = np.uint64(fi[f, FI_RNG])  # the same 64 bits, read as unsigned
    x ^= x >> np.uint64(12)
    x ^= x << np.uint64(25)
    x ^= x >> np.uint64(27)
    fi[f, FI_RNG] = np.int64(x)
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
    k = fi[f, FI_KIND]
    v = ff[f, FF_VALUE]
    if k == K_FORCE:
        return v
    if k == K_HOLD:
        return ff[f, FF_HELD]
    if k == K_OFFSET:
        return x + v
    if k == K_GAIN:
        return x * v
    return x + v * _normal(fi, f)


@njit(**JIT)
def fault_inputs(fi, ff, df, n):
    """Replace the faulted inputs by their faulted values, keeping the clean ones.  Called in the real-time loop.

    Faults are applied in table order (two on one input compose); rates:
    0 for a forced or held input, scaled by a gain, unchanged otherwise.
    """
    for f in range(n):
        if fi[f, FI_ACTIVE] == 0 or fi[f, FI_SIDE] != 0:
            continue
        i = fi[f, FI_INDEX]
        r = fi[f, FI_RATE]
        x = df[i]
        ff[f, FF_CLEAN] = x
        ff[f, FF_CLEAN_RATE] = df[r]
        y = _faulted(fi, ff, f, x)
        lo = ff[f, FF_LO]
        hi = ff[f, FF_HI]
        if y < lo:
            y = lo
        elif y > hi:
            y = hi
        elif y != y:
            y = x
        df[i] = y
        k = fi[f, FI_KIND]
        if k == K_FORCE or k == K_HOLD:
            df[r] = 0.0
        elif k == K_GAIN:
            df[r] = df[r] * ff[f, FF_VALUE]


@njit(**JIT)
def fault_outputs(fi, ff, df, n):
    """Replace the faulted outputs by what the faulty sensors report.  Called in the real-time loop."""
    for f in range(n):
        if fi[f, FI_ACTIVE] == 0 or fi[f, FI_SIDE] != 1:
            continue
        i = fi[f, FI_INDEX]
        x = df[i]
        ff[f, FF_CLEAN] = x  # what this fault saw: for the first fault on a signal, the true value
        df[i] = _faulted(fi, ff, f, x)


@njit(**JIT)
def fault_restore(fi, ff, df, n):
    """Put the clean inputs back after the step (last fault first).  Called in the real-time loop."""
    for f in range(n - 1, -1, -1):
        if fi[f, FI_ACTIVE] == 0 or fi[f, FI_SIDE] != 0:
            continue
        df[fi[f, FI_INDEX]] = ff[f, FF_CLEAN]
        df[fi[f, FI_RATE]] = ff[f, FF_CLEAN_RATE]


@njit(**JIT)
def fault_push(fi, ff, df, head, ints, floats, tick_info, n, tick, now_ns, t):
    """After the step: the faulted outputs, the state-ring row, then the commanded inputs back, in one call.

    One compiled call instead of three (each call from Python costs more
    than the work of ten faults).  Called in the real-time loop.
    """
    fault_outputs(fi, ff, df, n)
    ring_push(head, ints, floats, tick_info, df, tick, now_ns, t)
    fault_restore(fi, ff, df, n)


@dataclass(frozen=True)
class FaultSpec:
    """One fault, checked against a plant: ``target``, ``kind`` and what it acts on.

    ``raw`` is the map it was parsed from (what ``fault_list`` reports);
    ``name`` identifies it (``fault_clear`` takes it).  For a signal fault
    ``side`` is ``"input"`` or ``"output"`` and ``index`` the signal's index
    among those; for a clutch fault ``index`` is the friction row.
    """

    name: str
    target: str
    kind: str
    value: float = 0.0
    signal: str = ""
    side: str = ""
    index: int = -1
    seed: int = 0
    hold_last: bool = False
    message: str = ""
    cycles: int = 0
    raw: dict = field(default_factory=dict, compare=False)


def _err(where: str, msg: str) -> FaultError:
    return FaultError(f"{where}: {msg}")


def _number(d: dict, key: str, where: str, default: float | None = None, lo: float = -math.inf,
            hi: float = math.inf) -> float:
    if key not in d:
        if default is None:
            raise _err(where, f"needs {key!r} (a number)")
        return default
    v = d[key]
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise _err(where, f"{key!r} must be a finite number, got {v!r}")
    if not lo <= v <= hi:
        raise _err(where, f"{key!r} must be in [{lo:g}, {hi:g}], got {v!r}")
    return float(v)


def _integer(d: dict, key: str, where: str, default: int, lo: int, hi: int) -> int:
    v = d.get(key, default)
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise _err(where, f"{key!r} must be an integer in {lo}..{hi}, got {v!r}")
    return v


def _keys(d: dict, allowed: Sequence[str], where: str) -> None:
    for k in d:
        if k not in ("target", "kind", "name", *allowed):
            raise _err(where, f"unknown key {k!r}; allowed: target, kind, name, " + ", ".join(allowed))


def clutch_row(plant: Plant, clutch: Any, where: str) -> int:
    """The friction row of ``clutch``: a row name (``"C2"``) or a number n >= 1 (row ``C<n>``, else the n-th row)."""
    names = plant.row_names()
    if isinstance(clutch, str):
        if clutch in names:
            return names.index(clutch)
        raise _err(where, f"no clutch {clutch!r}; clutches are {', '.join(names) or 'none'}")
    if isinstance(clutch, bool) or not isinstance(clutch, int):
        raise _err(where, f"'clutch' must be a clutch name or a number, got {clutch!r}")
    if f"C{clutch}" in names:
        return names.index(f"C{clutch}")
    if 1 <= clutch <= len(names):
        return clutch - 1
    raise _err(where, f"no clutch number {clutch}; clutches are {', '.join(names) or 'none'}")


def parse_fault(d: Any, plant: Plant, where: str = "fault", adapter_check=None) -> FaultSpec:
    """Check a fault map against ``plant``; returns the :class:`FaultSpec` or raises ``FaultError`` (one line).

    ``adapter_check(spec)``, if given, checks a CAN or ZeroMQ fault against
    the running adapters (message names) and raises ``FaultError``.
    """
    if not isinstance(d, dict):
        raise _err(where, f"a fault must be a map, got {type(d).__name__}")
    target = d.get("target")
    if target not in TARGETS:
        raise _err(where, f"'target' must be one of {', '.join(TARGETS)}, got {target!r}")
    kind = d.get("kind")
    kinds = {"signal": SIGNAL_KINDS, "clutch": CLUTCH_KINDS, "can": CAN_KINDS, "zmq": ZMQ_KINDS}[target]
    if kind not in kinds:
        raise _err(where, f"'kind' of a {target} fault must be one of {', '.join(kinds)}, got {kind!r}")
    name = d.get("name")
    if name is not None and (not isinstance(name, str) or not name or len(name) > 64):
        raise _err(where, "'name' must be a string of 1 to 64 characters")
    raw = dict(d)
    if target == "signal":
        spec = _parse_signal(d, plant, kind, where)
    elif target == "clutch":
        spec = _parse_clutch(d, plant, kind, where)
    elif target == "can":
        _keys(d, ("message", "cycles", "signal", "value"), where)
        msg = d.get("message")
        if not isinstance(msg, str) or not msg:
            raise _err(where, "a can fault needs 'message' (a message name of the DBC)")
        cycles = _integer(d, "cycles", where, 1, 1, 1000)
        for k, only in (("cycles", "delay"), ("signal", "out_of_range"), ("value", "out_of_range")):
            if k in d and kind != only:
                raise _err(where, f"{k!r} is for {only} faults")
        sig = d.get("signal", "")
        if kind == "out_of_range" and (not isinstance(sig, str) or not sig):
            raise _err(where, "an out_of_range fault needs 'signal' (a signal of the message)")
        spec = FaultSpec("", "can", kind, value=_number(d, "value", where, 0.0), message=msg, cycles=cycles,
                         signal=sig if isinstance(sig, str) else "")
    else:
        _keys(d, ("cycles",), where)
        cycles = _integer(d, "cycles", where, 1, 1, 10000)
        if "cycles" in d and kind != "delay_commands":
            raise _err(where, "'cycles' is for delay_commands faults")
        spec = FaultSpec("", "zmq", kind, cycles=cycles)
    if adapter_check is not None and target in ("can", "zmq"):
        adapter_check(spec)
    return FaultSpec(**{**spec.__dict__, "name": name or _default_name(spec, d), "raw": raw})


def fault_catalogue() -> dict[str, dict]:
    """Every fault target: its kinds and the keys a fault map of it takes besides target, kind and name.

    For a form that lists every fault (``describe`` -> ``plant.fault_kinds``, the web workspace).
    """
    return {
        "signal": {"kinds": list(SIGNAL_KINDS), "keys": ["signal", "value", "seed", "mode"]},
        "clutch": {"kinds": list(CLUTCH_KINDS), "keys": ["clutch", "value"]},
        "can": {"kinds": list(CAN_KINDS), "keys": ["message", "cycles", "signal", "value"]},
        "zmq": {"kinds": list(ZMQ_KINDS), "keys": ["cycles"]},
    }


def _default_name(s: FaultSpec, d: dict) -> str:
    """``target:what:kind``, e.g. ``signal:w_out:offset``, ``clutch:2:stuck_closed``."""
    what = {"signal": s.signal, "clutch": str(d.get("clutch")), "can": s.message, "zmq": "commands"}[s.target]
    return f"{s.target}:{what}:{s.kind}"


def _parse_signal(d: dict, plant: Plant, kind: str, where: str) -> FaultSpec:
    _keys(d, ("signal", "value", "seed", "mode"), where)
    sig = d.get("signal")
    if not isinstance(sig, str):
        raise _err(where, "a signal fault needs 'signal' (an input or output name of the plant)")
    ins = [s.name for s in plant.inputs]
    outs = [s.name for s in plant.outputs]
    if sig in ins:
        side, index, s = "input", ins.index(sig), plant.inputs[ins.index(sig)]
    elif sig in outs:
        side, index, s = "output", outs.index(sig), plant.outputs[outs.index(sig)]
    else:
        from plant_models.config import did_you_mean

        raise _err(where, f"no signal {sig!r} in the plant{did_you_mean(sig, ins + outs)}")
    if side == "input" and s.integer and kind in ("offset", "gain", "noise"):
        raise _err(where, f"{sig} is an integer input (a selector): it takes force, freeze or dropout faults")
    hold_last = False
    seed = 0
    value = 0.0
    if kind == "force":
        value = _number(d, "value", where)
        if side == "input" and s.check(value):
            raise _err(where, s.check(value))
    elif kind == "offset":
        value = _number(d, "value", where)
    elif kind == "gain":
        value = _number(d, "value", where)
    elif kind == "noise":
        value = _number(d, "value", where, lo=0.0)
        seed = _integer(d, "seed", where, 1, 0, 2 ** 62)
    elif kind == "dropout":
        mode = d.get("mode", "zero")
        if mode not in ("zero", "last"):
            raise _err(where, f"'mode' of a dropout must be 'zero' or 'last', got {mode!r}")
        hold_last = mode == "last"
    else:
        hold_last = True  # freeze
    if kind not in ("force", "offset", "gain", "noise") and "value" in d:
        raise _err(where, f"a {kind} fault takes no 'value'")
    if kind != "noise" and "seed" in d:
        raise _err(where, "'seed' is for noise faults")
    if kind != "dropout" and "mode" in d:
        raise _err(where, "'mode' is for dropout faults")
    return FaultSpec("", "signal", kind, value=value, signal=sig, side=side, index=index, seed=seed,
                     hold_last=hold_last)


def _parse_clutch(d: dict, plant: Plant, kind: str, where: str) -> FaultSpec:
    if plant.core is None:  # the contract: the friction core the rows live in, or None
        raise _err(where, f"clutch faults need a plant on the friction core; {plant.kind} has none")
    _keys(d, ("clutch", "value"), where)
    if "clutch" not in d:
        raise _err(where, "a clutch fault needs 'clutch' (a clutch name or number)")
    row = clutch_row(plant, d["clutch"], where)
    kin = plant.core.spec.rows[row].kinematic_shift_time > 0
    value = 0.0
    if kind == "worn":
        value = _number(d, "value", where, lo=0.0, hi=1.0)
    elif kind == "slow_actuator":
        value = _number(d, "value", where, lo=1.0, hi=1000.0)
        if kin:
            raise _err(where, "slow_actuator: a kinematic clutch has no pressure lag")
    elif kind == "pressure_bias":
        value = _number(d, "value", where)
        sig = _pressure_output(plant, row)
        if sig is None:
            raise _err(where, f"pressure_bias: {plant.kind} has no pressure output for clutch {d['clutch']!r}")
        spec = FaultSpec("", "clutch", kind, value=value, signal=sig, side="output",
                         index=plant.output_index(sig))
        return spec
    elif "value" in d:
        raise _err(where, f"a {kind} fault takes no 'value'")
    if kind == "stuck_closed" and kin:
        raise _err(where, "stuck_closed: not for a kinematic clutch (its capacity follows its phase)")
    return FaultSpec("", "clutch", kind, value=value, index=row)


def _pressure_output(plant: Plant, row: int) -> str | None:
    name = plant.row_names()[row]
    outs = {s.name for s in plant.outputs}
    for cand in (f"pressure_{name.lower()}", f"pressure_{name}", f"pressure_c{row + 1}"):
        if cand in outs:
            return cand
    return None


class FaultSet:
    """The active faults of one plant (and its adapters), with the tables the tick reads.

    Parameters
    ----------
    plant
        The plant faulted.
    tick_info
        The loop's per-tick slots; ``TI_FAULTS`` holds the number of active
        faults (copied into every state row).
    adapters
        The transports that take CAN and ZeroMQ faults
        (:meth:`io_adapters.base.Adapter.set_fault`).

    Attributes
    ----------
    n_signal
        The number of table rows in use (0: the tick calls no fault function).
    """

    def __init__(self, plant: Plant, tick_info: np.ndarray | None = None, adapters: Sequence = ()):
        self.plant = plant
        self.tick_info = tick_info if tick_info is not None else np.zeros(TI_FAULTS + 1, dtype=np.int64)
        self.adapters = tuple(adapters)
        self.fi = np.zeros((MAX_FAULTS, N_FI), dtype=np.int64)
        self.ff = np.zeros((MAX_FAULTS, N_FF))
        self.n_signal = 0
        self.active: list[FaultSpec] = []
        self.set_total = 0
        self._rows = {}  # clutch row -> its original model floats (while a fault acts on it)
        self._table_specs: list[FaultSpec] = []  # the fault of each signal-table row in use
        self._lo = np.array([s.lo for s in plant.inputs], dtype=float)
        self._hi = np.array([s.hi for s in plant.inputs], dtype=float)
        # compile (or load from numba's cache) now, with no fault active, so the first faulted tick pays nothing
        fault_inputs(self.fi, self.ff, plant.df, 0)
        fault_outputs(self.fi, self.ff, plant.df, 0)
        fault_restore(self.fi, self.ff, plant.df, 0)

    # ------------------------------------------------------------------ between ticks
    def parse(self, d: Any, where: str = "fault") -> FaultSpec:
        """:func:`parse_fault` against this plant and these adapters."""
        return parse_fault(d, self.plant, where, self._adapter_check)

    def set(self, fault: dict | FaultSpec) -> FaultSpec:
        """Activate a fault (a map or a parsed spec) from the next tick on; returns it.

        A fault with the name of an active one replaces it.  Raises
        ``FaultError`` for a bad map or a full table, changing nothing.
        """
        spec = fault if isinstance(fault, FaultSpec) else self.parse(fault)
        old = [f for f in self.active if f.name == spec.name]
        uses_table = spec.target == "signal" or spec.kind == "pressure_bias"
        if uses_table and sum(1 for f in self.active if f.target == "signal" or f.kind == "pressure_bias"
                              ) - len([f for f in old if f.target == "signal" or f.kind == "pressure_bias"]
                                      ) >= MAX_FAULTS:
            raise FaultError(f"fault: at most {MAX_FAULTS} signal faults at once")
        for f in old:  # first, so a replaced transport fault's flag does not clear the new one's
            self._remove(f)
        if spec.target in ("can", "zmq"):
            self._adapter(spec).set_fault(spec)  # checked when parsed: does not fail here
        self.active.append(spec)
        self._rebuild()
        self.set_total += 1
        return spec

    def clear(self, name: str | None = None) -> list[str]:
        """Clear the fault called ``name`` (None: every fault); returns the names cleared.

        Raises ``KeyError`` for a name not active.
        """
        if name is None:
            gone = list(self.active)
        else:
            gone = [f for f in self.active if f.name == name]
            if not gone:
                raise KeyError(f"no active fault {name!r}; active: {', '.join(f.name for f in self.active) or 'none'}")
        for f in gone:
            self._remove(f)
        self._rebuild()
        return [f.name for f in gone]

    def listing(self) -> list[dict]:
        """The active faults: name and the map each was set with (what status and ``fault_list`` report)."""
        return [dict(f.raw, name=f.name) for f in self.active]

    def _remove(self, f: FaultSpec) -> None:
        self.active.remove(f)
        if f.target in ("can", "zmq"):
            self._adapter(f).clear_fault(f)

    def _rebuild(self) -> None:
        """Write the signal table and the clutch rows from the active faults (between ticks)."""
        fi, ff = self.fi, self.ff
        plant = self.plant
        # a fault kept across a rebuild keeps its held value and its noise stream (by the spec object, so a
        # fault replaced under the same name starts afresh)
        prev = {id(f): (float(ff[k, FF_HELD]), int(fi[k, FI_RNG])) for k, f in enumerate(self._table_specs)}
        # between ticks a faulted output holds what its sensor reported; its true value of the last tick is
        # what the first fault on it saw (a freeze set now holds the true value, not another fault's)
        true_y = {}
        for k in range(self.n_signal - 1, -1, -1):
            if fi[k, FI_SIDE] == 1:
                true_y[int(fi[k, FI_INDEX])] = float(ff[k, FF_CLEAN])
        self._table_specs = []
        fi[:] = 0
        n = 0
        for f in self.active:
            if f.target != "signal" and f.kind != "pressure_bias":
                continue
            inp = f.side == "input"
            base = plant.input_offset if inp else plant.output_offset
            fi[n, FI_ACTIVE] = 1
            fi[n, FI_SIDE] = 0 if inp else 1
            fi[n, FI_INDEX] = base + f.index
            fi[n, FI_RATE] = plant.input_offset + plant.n_in + f.index if inp else -1
            kind = {"force": K_FORCE, "freeze": K_HOLD, "offset": K_OFFSET, "gain": K_GAIN, "noise": K_NOISE,
                    "pressure_bias": K_OFFSET}.get(f.kind, K_HOLD if f.hold_last else K_FORCE)
            fi[n, FI_KIND] = kind
            ff[n, FF_VALUE] = f.value
            ff[n, FF_LO] = self._lo[f.index] if inp else -math.inf
            ff[n, FF_HI] = self._hi[f.index] if inp else math.inf
            self._table_specs.append(f)
            if not inp:  # until the next tick writes it
                ff[n, FF_CLEAN] = true_y.get(base + f.index, plant.y[f.index])
            if id(f) in prev:
                ff[n, FF_HELD], fi[n, FI_RNG] = prev[id(f)]
            else:
                ff[n, FF_HELD] = plant.u[f.index] if inp else true_y.get(base + f.index, plant.y[f.index])
                fi[n, FI_RNG] = _seed_state(f.seed)
            n += 1
        self.n_signal = n
        self._apply_clutches()
        self.tick_info[TI_FAULTS] = len(self.active)

    def _apply_clutches(self) -> None:
        from plant_models.core.api import L

        plant = self.plant
        if plant.core is None:  # the contract: the friction core the rows live in, or None
            return
        mf, mi = plant.mf, plant.mi
        slots = (L.MF_GAIN_STATIC, L.MF_GAIN_KINETIC, L.MF_ACT_PRELOAD, L.MF_ACT_LAG, L.MF_KIN_CAP)
        rows = {f.index for f in self.active if f.target == "clutch" and f.kind != "pressure_bias"}
        for r in rows:
            if r not in self._rows:
                self._rows[r] = [float(mf[int(mi[s]) + r]) for s in slots]
        for r in list(self._rows):
            gs, gk, pre, lag, kcap = self._rows[r]
            for f in self.active:
                if f.target != "clutch" or f.index != r:
                    continue
                if f.kind == "no_torque":
                    gs, gk, kcap = 0.0, 0.0, 0.0
                elif f.kind == "worn":
                    gs, gk, kcap = gs * f.value, gk * f.value, kcap * f.value
                elif f.kind == "slow_actuator":
                    lag = lag * f.value
                elif f.kind == "stuck_closed":
                    pre = pre - self._full_force(r)
                    gs = gs * STUCK_STATIC_FACTOR
            for s, v in zip(slots, (gs, gk, pre, lag, kcap)):
                mf[int(mi[s]) + r] = v
            if r not in rows:
                del self._rows[r]
        # the lag factors are cached per sub-step length; NaN never equals it, so they are recomputed
        plant.df[int(mi[L.DF_EXP_H])] = math.nan

    def _full_force(self, r: int) -> float:
        """Normal force of row r at the top of its command range (the pressure input's upper bound)."""
        from plant_models.core.api import L
        from plant_models.plants.clutch import BAR

        plant = self.plant
        gain = float(plant.mf[int(plant.mi[L.MF_ACT_GAIN]) + r])
        name = plant.row_names()[r]
        for cand in (f"p_{name.lower()}", f"p_c{r + 1}"):
            if cand in (s.name for s in plant.inputs):
                return gain * plant.input_signal(cand).hi * BAR
        return gain * 30.0 * BAR  # no pressure input found: 30 bar, above any shipped clutch's range

    def _adapter_check(self, spec: FaultSpec) -> None:
        self._adapter(spec).check_fault(spec)

    def _adapter(self, spec: FaultSpec):
        want = {"can": "can", "zmq": "zmq"}[spec.target]
        for a in self.adapters:
            if a.type_name == want:
                return a
        raise FaultError(f"fault: a {spec.target} fault needs the {spec.target} adapter, which this server "
                        "does not run")

    # ------------------------------------------------------------------ snapshots
    def get_state(self) -> dict:
        """Everything needed to continue bit-exactly: the faults, the tables (held values, noise streams) and the
        clutch rows' original model floats (the plant's model floats themselves are in the plant's snapshot)."""
        return {"active": [dict(f.raw, name=f.name) for f in self.active], "fi": self.fi.copy(),
                "ff": self.ff.copy(), "n": self.n_signal,
                "rows": {int(r): list(v) for r, v in self._rows.items()}}

    def clear_for_restore(self) -> None:
        """Clear every fault (clutch rows back to their original floats) before a snapshot's model floats return."""
        self.clear()

    def set_state(self, st: dict) -> None:
        """Restore :meth:`get_state` after :meth:`clear_for_restore` and the plant's model floats.

        The faults are parsed again (CAN and ZeroMQ ones handed to their
        adapters again); the tables and the clutch rows' originals are copied
        back as they were, not recomputed, since the restored model floats
        already carry the clutch faults.  Raises ``FaultError`` if a fault no
        longer fits (then no fault is active).
        """
        specs = [self.parse(dict(d), "snapshot fault") for d in st["active"]]
        try:
            for spec in specs:
                if spec.target in ("can", "zmq"):
                    self._adapter(spec).set_fault(spec)
                self.active.append(spec)
        except Exception:
            for spec in self.active:
                if spec.target in ("can", "zmq"):
                    self._adapter(spec).clear_fault(spec)
            self.active = []
            raise
        self._rows = {int(r): list(v) for r, v in st["rows"].items()}
        self._table_specs = [f for f in self.active if f.target == "signal" or f.kind == "pressure_bias"]
        self.fi[:] = st["fi"]
        self.ff[:] = st["ff"]
        self.n_signal = int(st["n"])
        self.tick_info[TI_FAULTS] = len(self.active)

    def status(self) -> list[dict]:
        return self.listing()


def warm_up() -> None:
    """Compile (or load from numba's cache) the three fault kernels, with one fault of each side active."""
    fi = np.zeros((2, N_FI), dtype=np.int64)
    ff = np.zeros((2, N_FF))
    df = np.zeros(4)
    fi[:, FI_ACTIVE] = 1
    fi[1, FI_SIDE] = 1
    fi[:, FI_KIND] = K_NOISE
    fi[0, FI_RATE] = 1
    ff[:, FF_HI] = 1.0
    fi[:, FI_RNG] = 1
    fault_inputs(fi, ff, df, 2)
    fault_outputs(fi, ff, df, 2)
    fault_restore(fi, ff, df, 2)
    from io_adapters.ring import StateRing

    ring = StateRing(1, 1, 0, 2, 4)
    fault_push(fi, ff, df, ring.head, ring.ints, ring.floats, np.zeros(8, dtype=np.int64), 2, 1, 0, 0.0)


def _seed_state(seed: int) -> int:
    """A non-zero xorshift state from a seed (splitmix64 of it), as the int64 with its bits."""
    z = (int(seed) + 0x9E3779B97F4A7C15) & 0xFFFF_FFFF_FFFF_FFFF
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFF_FFFF_FFFF_FFFF
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & 0xFFFF_FFFF_FFFF_FFFF
    z ^= z >> 31
    z = z or 1
    return z - (1 << 64) if z >= 1 << 63 else z  # the uint64 bits as an int64


__all__ = ["FaultSpec", "FaultSet", "parse_fault", "warm_up", "fault_inputs", "fault_outputs", "fault_restore",
           "fault_push", "MAX_FAULTS",
           "SIGNAL_KINDS", "CLUTCH_KINDS", "CAN_KINDS", "ZMQ_KINDS", "TARGETS", "fault_catalogue"]
