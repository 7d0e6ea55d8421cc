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
  (:attr:`FaultSet.fi`, :attr:`FaultSet.ff`) that the run pipeline's three
  fault stages walk (:class:`plant_models.run.faults.FaultStage`, in the
  order of :mod:`plant_models.run.stages`): :func:`fault_inputs` after the
  adapters' read (and the scenario's inputs), just before the plant step,
  replaces each faulted input by its faulted value (clamped to the input's
  declared range, so a fault never hands the plant a value it would refuse)
  and keeps the clean value; after the step :func:`fault_outputs` replaces
  each faulted output, the state-ring row is written, and
  :func:`fault_restore` puts the clean inputs back, so between ticks
  ``plant.u`` holds what was commanded and a command or a ``set`` request is
  never mixed with a fault's value.  The ring row (and so the state stream)
  shows the inputs the step used and the outputs as the faulty sensors
  report them.  Setting or clearing a fault only writes table rows between
  ticks; the tick does no per-fault Python work, and with no signal fault
  active it calls no compiled fault function.
* faults of the plant's own physics (the **clutch** target) are declared
  by the plant, as transport faults are by the adapter types: each plant
  class lists :class:`plant_models.contract.faults.PlantFaults` declarations
  (a friction plant its clutches' overlay faults,
  :mod:`plant_models.contract.clutch_faults`; a plant with clutch hydraulics
  those of its hydraulics, :mod:`plant_models.powertrain.hydraulics_plant`).
  A declaration checks a map of its kinds against the plant and puts the
  active faults of its kinds on the plant between ticks (nothing per tick);
  a fault that also acts on an output as a sensor (an offset, a saturation)
  names the output, and takes a row of the signal table like a signal
  fault.  This module names no plant fault kind: it dispatches by the
  declared target and kind.  A clutch has one name however it is written
  (``6``, ``"C6"``, ``"c6"``): a fault's default name uses the row name the
  declaration reports.
* transport faults (**can**, **zmq**, the target is the adapter type) are
  declared by the adapter type: its declaration
  (:mod:`io_adapters.declaration`) lists the kinds and checks the map's
  keys, the running adapter checks the fault against its message set and
  keeps it (:meth:`io_adapters.base.Adapter.set_fault`) as flags of its own
  compiled codec or of its command intake.  This module names no transport.

A ``reset`` clears every fault.  Every status message carries the list
(``status()["faults"]``) and every state row the number of active faults
(``tick_info[TI_FAULTS]``: the ``faults`` field of the state stream).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from io_adapters.base import TI_FAULTS
from io_adapters.declaration import (TransportFault, declaration, fault_error, fault_integer, fault_keys,
                                     fault_number, fault_targets)
from plant_models.contract.faults import (PlantFault, PlantFaults, plant_fault_declaration, plant_fault_declarations,
                                          plant_fault_kinds)
from plant_models.errors import FaultError
from plant_models.plant import Plant

from plant_models.run.fault_tables import (FF_CLEAN, FF_HELD, FF_HI, FF_LO, FF_VALUE, FI_ACTIVE, FI_INDEX, FI_KIND,
                                           FI_RATE, FI_RNG, FI_SIDE, K_CLAMP, K_FORCE, K_GAIN, K_HOLD, K_NOISE, K_OFFSET,
                                           MAX_FAULTS, fault_inputs, fault_outputs, fault_restore, seed_state, warm_up)
from plant_models.run.faults import FaultStage

SIGNAL_KINDS = ("force", "freeze", "offset", "gain", "noise", "dropout")
# the targets: "signal", then those the plant declares (plant_fault_kinds), then every adapter type that declares
# fault kinds (fault_targets())


@dataclass(frozen=True)
class FaultSpec:
    """One fault, checked against a plant: ``target``, ``kind`` and what it acts on.

    ``raw`` is the map it was parsed from (what ``fault_list`` reports);
    ``name`` identifies it (``fault_clear`` takes it).  For a signal fault
    ``side`` is ``"input"`` or ``"output"`` and ``index`` the signal's index
    among those; for a fault the plant declares ``plant`` is what its
    declaration parsed, ``row`` its friction row (and ``signal``, ``side``
    and ``index`` the output it also acts on, if any); for a transport fault
    ``transport`` is what its adapter type parsed.
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
    row: int = -1
    transport: TransportFault | None = None
    plant: PlantFault | None = None
    raw: dict = field(default_factory=dict, compare=False)


def parse_fault(d: Any, plant: Plant, where: str = "fault", adapter_check=None) -> FaultSpec:
    """Check a fault map against ``plant``; returns the :class:`FaultSpec` or raises ``FaultError`` (one line).

    A transport fault's keys are checked by its adapter type's declaration;
    ``adapter_check(target, transport_fault)``, if given, checks it against
    the running adapter of that type (message names) and raises ``FaultError``.
    """
    if not isinstance(d, dict):
        raise fault_error(where, f"a fault must be a map, got {type(d).__name__}")
    target = d.get("target")
    declared = plant_fault_kinds(plant)
    targets = ("signal", *declared, *fault_targets())
    if target not in targets:
        raise fault_error(where, f"'target' must be one of {', '.join(targets)}, got {target!r}")
    kind = d.get("kind")
    kinds = SIGNAL_KINDS if target == "signal" else declared.get(target) or declaration(target).fault_kinds
    if kind not in kinds:
        raise fault_error(where, f"'kind' of a {target} fault must be one of {', '.join(kinds)}, got {kind!r}")
    name = d.get("name")
    if name is not None and (not isinstance(name, str) or not name or len(name) > 64):
        raise fault_error(where, "'name' must be a string of 1 to 64 characters")
    raw = dict(d)
    if target == "signal":
        spec = _parse_signal(d, plant, kind, where)
    elif target in declared:
        spec = _plant_spec(plant_fault_declaration(plant, target, kind).parse_fault(d, plant, where), plant)
    else:
        tf = declaration(target).parse_fault(d, where)
        if adapter_check is not None:
            adapter_check(tf)
        spec = FaultSpec("", target, kind, transport=tf)
    return FaultSpec(**{**spec.__dict__, "name": name or _default_name(spec, plant), "raw": raw})


def fault_catalogue(plant: Plant | type | None = None) -> dict[str, list[str]]:
    """Every fault target and its kinds: ``signal``, those ``plant`` (a plant or a plant class) declares
    (``clutch``), and each fault-taking adapter type's.

    For a form that lists every fault (``describe`` -> ``plant.fault_kinds``, the web workspace).
    """
    out = {"signal": list(SIGNAL_KINDS)}
    if plant is not None:
        out.update(plant_fault_kinds(plant))
    out.update({t: list(declaration(t).fault_kinds) for t in fault_targets()})
    return out


def _plant_spec(pf: PlantFault, plant: Plant) -> FaultSpec:
    """The spec of a fault the plant declared (with the output it also acts on as a sensor, if any)."""
    if pf.output:
        return FaultSpec("", pf.target, pf.kind, value=pf.value, signal=pf.output, side="output",
                         index=plant.output_index(pf.output), row=pf.row, plant=pf)
    return FaultSpec("", pf.target, pf.kind, value=pf.value, row=pf.row, plant=pf)


def _default_name(s: FaultSpec, plant: Plant) -> str:
    """``target:what:kind``, e.g. ``signal:w_out:offset``, ``clutch:C2:stuck_closed`` (the clutch by its row name,
    however the map wrote it, so that one clutch has one name), ``can:HIL_Speeds:drop``."""
    if s.plant is not None:
        what = s.plant.what
    elif s.transport is not None:
        what = s.transport.what
    else:
        what = s.signal
    return f"{s.target}:{what}:{s.kind}"


def _parse_signal(d: dict, plant: Plant, kind: str, where: str) -> FaultSpec:
    fault_keys(d, ("signal", "value", "seed", "mode"), where)
    sig = d.get("signal")
    if not isinstance(sig, str):
        raise fault_error(where, "a signal fault needs 'signal' (an input or output name of the plant)")
    ins = [s.name for s in plant.inputs]
    outs = [s.name for s in plant.outputs]
    if sig in ins:
        side, index, s = "input", ins.index(sig), plant.inputs[ins.index(sig)]
    elif sig in outs:
        side, index, s = "output", outs.index(sig), plant.outputs[outs.index(sig)]
    else:
        from plant_models.config import did_you_mean

        raise fault_error(where, f"no signal {sig!r} in the plant{did_you_mean(sig, ins + outs)}")
    if side == "input" and s.integer and kind in ("offset", "gain", "noise"):
        raise fault_error(where, f"{sig} is an integer input (a selector): it takes force, freeze or dropout faults")
    hold_last = False
    seed = 0
    value = 0.0
    if kind == "force":
        value = fault_number(d, "value", where)
        if side == "input" and s.check(value):
            raise fault_error(where, s.check(value))
    elif kind == "offset":
        value = fault_number(d, "value", where)
    elif kind == "gain":
        value = fault_number(d, "value", where)
    elif kind == "noise":
        value = fault_number(d, "value", where, lo=0.0)
        seed = fault_integer(d, "seed", where, 1, 0, 2 ** 62)
    elif kind == "dropout":
        mode = d.get("mode", "zero")
        if mode not in ("zero", "last"):
            raise fault_error(where, f"'mode' of a dropout must be 'zero' or 'last', got {mode!r}")
        hold_last = mode == "last"
    else:
        hold_last = True  # freeze
    if kind not in ("force", "offset", "gain", "noise") and "value" in d:
        raise fault_error(where, f"a {kind} fault takes no 'value'")
    if kind != "noise" and "seed" in d:
        raise fault_error(where, "'seed' is for noise faults")
    if kind != "dropout" and "mode" in d:
        raise fault_error(where, "'mode' is for dropout faults")
    return FaultSpec("", "signal", kind, value=value, signal=sig, side=side, index=index, seed=seed,
                     hold_last=hold_last)


def _in_table(f: FaultSpec) -> bool:
    """Whether a fault takes a row of the signal table (a signal fault, or a plant's fault on one of its outputs)."""
    return f.target == "signal" or (f.plant is not None and f.side == "output")


class FaultSet(FaultStage):
    """The active faults of one plant (and its adapters), with the tables the run pipeline's fault stages read.

    The tables and the stages are :class:`plant_models.run.faults.FaultStage`'s;
    this class fills them from fault maps, hands the faults the plant
    declares to their declarations (clutch overlays, hydraulics) and transport
    faults to the adapters.

    Parameters
    ----------
    plant
        The plant faulted.
    tick_info
        The loop's per-tick slots; ``TI_FAULTS`` holds the number of active
        faults (copied into every state row).
    adapters
        The transports that take transport faults (the first adapter of the
        fault's target type; :meth:`io_adapters.base.Adapter.set_fault`).
    """

    def __init__(self, plant: Plant, tick_info: np.ndarray | None = None, adapters: Sequence = ()):
        super().__init__(plant)
        self.tick_info = tick_info if tick_info is not None else np.zeros(TI_FAULTS + 1, dtype=np.int64)
        self.adapters = tuple(adapters)
        self.active: list[FaultSpec] = []
        self.set_total = 0
        # per fault declaration of the plant: the rows its faults act on now (what its last apply returned)
        self._touched: dict[PlantFaults, frozenset[int]] = {d: frozenset() for d in plant_fault_declarations(plant)}
        self._table_specs: list[FaultSpec] = []  # the fault of each signal-table row in use
        self._lo = np.array([s.lo for s in plant.inputs], dtype=float)
        self._hi = np.array([s.hi for s in plant.inputs], dtype=float)
        self._out_lo = np.array([s.lo for s in plant.outputs], dtype=float)
        self._out_hi = np.array([s.hi for s in plant.outputs], dtype=float)

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
        if _in_table(spec) and sum(map(_in_table, self.active)) - sum(map(_in_table, old)) >= MAX_FAULTS:
            raise FaultError(f"fault: at most {MAX_FAULTS} signal faults at once")
        for f in old:  # first, so a replaced transport fault's flag does not clear the new one's
            self._remove(f)
        if spec.transport is not None:
            self._adapter(spec.transport).set_fault(spec.transport)  # checked when parsed: does not fail here
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
        if f.transport is not None:
            self._adapter(f.transport).clear_fault(f.transport)

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
            if not _in_table(f):
                continue
            inp = f.side == "input"
            base = plant.input_offset if inp else plant.output_offset
            fi[n, FI_ACTIVE] = 1
            fi[n, FI_SIDE] = 0 if inp else 1
            fi[n, FI_INDEX] = base + f.index
            fi[n, FI_RATE] = plant.input_offset + plant.n_in + f.index if inp else -1
            # a plant's fault on an output acts as its declaration says (an offset, a clamp to the declared range)
            kind = {"force": K_FORCE, "freeze": K_HOLD, "offset": K_OFFSET, "gain": K_GAIN, "noise": K_NOISE,
                    "clamp": K_CLAMP}.get(f.kind if f.plant is None else f.plant.output_action,
                                          K_HOLD if f.hold_last else K_FORCE)
            fi[n, FI_KIND] = kind
            ff[n, FF_VALUE] = f.value
            if inp:
                ff[n, FF_LO], ff[n, FF_HI] = self._lo[f.index], self._hi[f.index]
            elif kind == K_CLAMP:
                ff[n, FF_LO], ff[n, FF_HI] = self._out_lo[f.index], self._out_hi[f.index]
            else:
                ff[n, FF_LO], ff[n, FF_HI] = -math.inf, math.inf
            self._table_specs.append(f)
            if not inp:  # until the next tick writes it
                ff[n, FF_CLEAN] = true_y.get(base + f.index, plant.y[f.index])
            if id(f) in prev:
                ff[n, FF_HELD], fi[n, FI_RNG] = prev[id(f)]
            else:
                ff[n, FF_HELD] = plant.u[f.index] if inp else true_y.get(base + f.index, plant.y[f.index])
                fi[n, FI_RNG] = seed_state(f.seed)
            n += 1
        self.n_signal = n
        self._apply_plant_faults()
        self.tick_info[TI_FAULTS] = len(self.active)
        self.changed()

    def _apply_plant_faults(self) -> None:
        """Hand each of the plant's fault declarations the active faults of its kinds (between ticks)."""
        for decl, touched in self._touched.items():
            faults = [f.plant for f in self.active
                      if f.plant is not None and plant_fault_declaration(self.plant, f.target, f.kind) is decl]
            self._touched[decl] = decl.apply(self.plant, faults, touched)

    def _adapter_check(self, tf: TransportFault) -> None:
        self._adapter(tf).check_fault(tf)

    def _adapter(self, tf: TransportFault):
        """The running adapter that takes faults of ``tf``'s target: the first of that type."""
        for a in self.adapters:
            if a.type_name == tf.target:
                return a
        raise FaultError(f"fault: a {tf.target} fault needs the {tf.target} adapter, which this server "
                        "does not run")

    # ------------------------------------------------------------------ snapshots
    def snapshot_state(self) -> dict:
        """Everything needed to continue bit-exactly: the faults, the tables (held values, noise streams) and the
        tuned model floats of the clutch rows under a fault (``rows``: the plant's model floats, in the plant's
        snapshot, carry the faults; the other rows' tuned values are those)."""
        return {"active": [dict(f.raw, name=f.name) for f in self.active], "fi": self.fi.copy(),
                "ff": self.ff.copy(), "n": self.n_signal, "rows": self._tuned_rows()}

    def _tuned_rows(self) -> dict[int, list[float]]:
        """The tuned floats of the rows under a fault of the plant's (its model floats carry the fault)."""
        out: dict[int, list[float]] = {}
        for decl, touched in self._touched.items():
            out.update(decl.snapshot_rows(self.plant, touched))
        return out

    def clear_for_restore(self) -> None:
        """Clear every fault (clutch rows back to their tuned floats) before a snapshot's model floats return."""
        self.clear()

    def check_state(self, st: dict) -> None:
        """Raise (``FaultError``, ``KeyError``, ``TypeError``, ``ValueError``) unless ``st`` is a
        :meth:`snapshot_state` that fits this plant and these adapters; changes nothing."""
        for key, arr in (("fi", self.fi), ("ff", self.ff)):
            a = st[key]
            if not isinstance(a, np.ndarray) or a.shape != arr.shape or a.dtype != arr.dtype:
                raise ValueError(f"faults.{key} of the wrong shape")
        specs = [self.parse(dict(d), "snapshot fault") for d in st["active"]]
        if not 0 <= int(st["n"]) <= len(specs):
            raise ValueError("faults.n out of range")
        if not isinstance(st["rows"], dict):
            raise TypeError("faults.rows must be a map")

    def restore_state(self, st: dict) -> None:
        """Restore :meth:`snapshot_state` (checked) after :meth:`clear_for_restore` and the plant's model floats.

        The faults are parsed again (transport faults handed to their
        adapters again) and the clutch overlays handed to the plant again
        (whose tuned floats are restored first, from the model floats and
        ``rows``); the tables are copied back as they were, not recomputed.
        Raises ``FaultError`` if a fault no longer fits (then no fault is
        active).
        """
        specs = [self.parse(dict(d), "snapshot fault") for d in st["active"]]
        self.plant_tuned_from(st)
        try:
            for spec in specs:
                if spec.transport is not None:
                    self._adapter(spec.transport).set_fault(spec.transport)
                self.active.append(spec)
        except Exception:
            for spec in self.active:
                if spec.transport is not None:
                    self._adapter(spec.transport).clear_fault(spec.transport)
            self.active = []
            raise
        self._apply_plant_faults()
        self._table_specs = [f for f in self.active if _in_table(f)]
        self.fi[:] = st["fi"]
        self.ff[:] = st["ff"]
        self.n_signal = int(st["n"])
        legacy = [f for f in self.active
                  if f.target == "signal" or (f.plant is not None and f.plant.output_action == "offset")]
        if self.n_signal != len(self._table_specs) and self.n_signal == len(legacy):
            # a snapshot of before a plant's fault clamped an output (a stuck clutch's saturated capacity): its
            # table lacks those rows; they are added, the rows it has keep their held values and noise streams
            self._table_specs = legacy
            self._rebuild()
        self.tick_info[TI_FAULTS] = len(self.active)
        self.changed()

    def plant_tuned_from(self, st: dict) -> None:
        """The plant's tuned clutch floats from its restored model floats and the snapshot's ``rows`` (the tuned
        floats of the rows under a fault).  No-op for a plant without clutch overlays."""
        if callable(getattr(self.plant, "tuned_from_model", None)):
            self.plant.tuned_from_model({int(r): [float(x) for x in v] for r, v in st["rows"].items()})

    def status(self) -> list[dict]:
        return self.listing()


__all__ = ["FaultSpec", "FaultSet", "parse_fault", "warm_up", "fault_inputs", "fault_outputs", "fault_restore",
           "MAX_FAULTS",
           "SIGNAL_KINDS", "fault_catalogue"]
