"""Fault kinds a plant declares: the faults of its own physics, as an adapter type declares its transport's.

A fault map (``docs/faults.md``) names a ``target`` and a ``kind``.  Signal
faults (any input or output) are the run pipeline's and fit every plant
(:mod:`plant_models.run.faults`); transport faults are declared by the
adapter types (:mod:`io_adapters.declaration`); the faults of a plant's own
physics (a worn clutch, a leaking piston) are declared by the plant: each
plant class lists :class:`PlantFaults` declarations in its class attribute
``fault_declarations``, and :func:`plant_fault_declarations` collects them
along the class's bases (base classes first, so a friction plant's clutch
kinds come before the hydraulics a mixin adds).

A declaration names its target and kinds, checks a map of one of its kinds
against the plant (:meth:`PlantFaults.parse_fault` -> :class:`PlantFault`)
and puts the active faults of its kinds on the plant between steps
(:meth:`PlantFaults.apply`).  The server's fault set only dispatches by the
declared kinds: it names no plant fault kind.

The key checks shared by every declaration (plant or transport) are here
too: :func:`fault_error`, :func:`fault_number`, :func:`fault_integer`,
:func:`fault_keys`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

from ..errors import FaultError


# -- checking the keys of a fault map (shared with the adapters' declarations, io_adapters/declaration.py) --------
def fault_error(where: str, msg: str) -> FaultError:
    return FaultError(f"{where}: {msg}")


def fault_number(d: dict, key: str, where: str, default: float | None = None, lo: float = -math.inf,
                 hi: float = math.inf) -> float:
    """``d[key]``, a finite number in [lo, hi] (``default`` when absent; None: required)."""
    if key not in d:
        if default is None:
            raise fault_error(where, f"needs {key!r} (a number)")
        return default
    v = d[key]
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise fault_error(where, f"{key!r} must be a finite number, got {v!r}")
    if not lo <= v <= hi:
        raise fault_error(where, f"{key!r} must be in [{lo:g}, {hi:g}], got {v!r}")
    return float(v)


def fault_integer(d: dict, key: str, where: str, default: int, lo: int, hi: int) -> int:
    """``d.get(key, default)``, an integer in lo..hi."""
    v = d.get(key, default)
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise fault_error(where, f"{key!r} must be an integer in {lo}..{hi}, got {v!r}")
    return v


def fault_keys(d: dict, allowed: Sequence[str], where: str) -> None:
    """Refuse a key other than ``target``, ``kind``, ``name`` and ``allowed``."""
    for k in d:
        if k not in ("target", "kind", "name", *allowed):
            raise fault_error(where, f"unknown key {k!r}; allowed: target, kind, name, " + ", ".join(allowed))


# -- what a plant declares ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PlantFault:
    """A fault of a plant's physics, checked against one plant (what :meth:`PlantFaults.parse_fault` returns).

    ``what`` names what it acts on (the default fault name is
    ``target:what:kind``: ``clutch:C2:worn``), ``row`` is that friction row
    (-1: none), ``value`` the map's value (0 when it takes none).  A fault
    that also acts on one of the plant's outputs as a sensor names it in
    ``output`` and says how in ``output_action``: ``"offset"`` (the output
    reads ``value`` higher) or ``"clamp"`` (the output saturates at the top
    of its declared range); the fault set gives it a row of the run
    pipeline's signal table.
    """

    target: str
    kind: str
    what: str
    value: float = 0.0
    row: int = -1
    output: str = ""
    output_action: str = ""


class PlantFaults:
    """A declaration of fault kinds of a plant's physics: its target, its kinds, their check and their physics.

    A plant class lists its declarations in ``fault_declarations``; a
    subclass implements :meth:`parse_fault` and :meth:`apply` (and
    :meth:`snapshot_rows` if what it changes is kept apart from the tuned
    parameters).  Declarations are stateless: the fault set keeps what each
    one acted on and hands it back.
    """

    target: str = ""
    kinds: tuple[str, ...] = ()

    def parse_fault(self, d: dict, plant: Any, where: str) -> PlantFault:
        """A fault map of this target with one of these kinds, checked against ``plant``; raises ``FaultError``."""
        raise fault_error(where, f"{type(self).__name__} checks no faults")

    def apply(self, plant: Any, faults: Sequence[PlantFault], touched: frozenset[int]) -> frozenset[int]:
        """Put ``faults`` (the active faults of these kinds, in the order they were set) on ``plant``, between
        steps.  ``touched`` is what the last call returned (the rows it acted on): a row no fault acts on any
        more goes back to no fault.  Returns the rows this call acts on."""
        return frozenset()

    def snapshot_rows(self, plant: Any, touched: frozenset[int]) -> dict[int, list[float]]:
        """The tuned floats of the rows under a fault, for a snapshot (``FrictionPlant.tuned_from_model``); none
        by default."""
        return {}


def plant_fault_declarations(plant: Any) -> tuple[PlantFaults, ...]:
    """The fault declarations of a plant (or plant class): each class's own ``fault_declarations`` along its
    bases, base classes first."""
    cls = plant if isinstance(plant, type) else type(plant)
    out: list[PlantFaults] = []
    for klass in reversed(cls.__mro__):
        for decl in klass.__dict__.get("fault_declarations", ()):
            if decl not in out:
                out.append(decl)
    return tuple(out)


def plant_fault_kinds(plant: Any) -> dict[str, list[str]]:
    """Target -> kinds of the faults a plant (or plant class) declares, in declaration order."""
    out: dict[str, list[str]] = {}
    for decl in plant_fault_declarations(plant):
        out.setdefault(decl.target, []).extend(k for k in decl.kinds if k not in out.get(decl.target, ()))
    return out


def plant_fault_declaration(plant: Any, target: str, kind: str) -> PlantFaults | None:
    """The declaration of ``plant`` that takes faults of ``target`` and ``kind`` (None: the plant declares none)."""
    for decl in plant_fault_declarations(plant):
        if decl.target == target and kind in decl.kinds:
            return decl
    return None


# -- shared by the clutch declarations (a friction plant's, its hydraulics') ------------------------------------------
def clutch_row(plant: Any, clutch: Any, where: str) -> int:
    """The friction row of ``clutch``: a row name in any case (``"C2"``, ``"c2"``) or a number n >= 1 (row
    ``C<n>``, else the n-th row)."""
    names = plant.row_names()
    if isinstance(clutch, str):
        if clutch in names:
            return names.index(clutch)
        folded = [n for n in names if n.casefold() == clutch.casefold()]
        if len(folded) == 1:
            return names.index(folded[0])
        raise fault_error(where, f"no clutch {clutch!r}; clutches are {', '.join(names) or 'none'}")
    if isinstance(clutch, bool) or not isinstance(clutch, int):
        raise fault_error(where, f"'clutch' must be a clutch name or a number, got {clutch!r}")
    if f"C{clutch}" in names:
        return names.index(f"C{clutch}")
    if 1 <= clutch <= len(names):
        return clutch - 1
    raise fault_error(where, f"no clutch number {clutch}; clutches are {', '.join(names) or 'none'}")


def clutch_output(plant: Any, row: int, what: str) -> str | None:
    """The output ``<what>_<clutch>`` of friction row ``row`` (``pressure_c2``, ``capacity_c2``), if there is one."""
    name = plant.row_names()[row]
    outs = {s.name for s in plant.outputs}
    for cand in (f"{what}_{name.lower()}", f"{what}_{name}", f"{what}_c{row + 1}"):
        if cand in outs:
            return cand
    return None


def clutch_fault_row(d: dict, plant: Any, where: str) -> int:
    """The row of a clutch fault map (keys ``clutch`` and ``value`` only), checked against a plant on the friction
    core."""
    if plant.core is None:  # the contract: the friction core the rows live in, or None
        raise fault_error(where, f"clutch faults need a plant on the friction core; {plant.kind} has none")
    fault_keys(d, ("clutch", "value"), where)
    if "clutch" not in d:
        raise fault_error(where, "a clutch fault needs 'clutch' (a clutch name or number)")
    return clutch_row(plant, d["clutch"], where)


__all__ = ["fault_error", "fault_number", "fault_integer", "fault_keys", "PlantFault", "PlantFaults",
           "plant_fault_declarations", "plant_fault_kinds", "plant_fault_declaration", "clutch_row", "clutch_output",
           "clutch_fault_row"]
