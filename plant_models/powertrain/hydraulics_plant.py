"""Clutch hydraulics on a plant of the friction core: ports, buffer sizes, settling at reset, faults.

The compiled stage is :mod:`plant_models.powertrain.hydraulics` (``hydraulics_before`` and
``hydraulics_after`` around the core's step, ``write_fill_outputs``); this is its Python side, shared by
every plant kind that carries a ``[hydraulics]`` table (the transmission description, the Powershift,
the DCT plant), so the three hold one copy of it.  A plant using :class:`HydraulicsPlant` has
``params.hydraulics`` (a :class:`~plant_models.powertrain.hydraulics.Hydraulics` or None, its elements
the core's rows) and says where its compiled step finds the hydraulics' blocks
(:meth:`HydraulicsPlant._hydraulics_offsets`) and each row's command input
(:meth:`HydraulicsPlant._command_input`).
"""

from __future__ import annotations

from typing import Any, ClassVar, Sequence

from ..clutch import BAR
from ..contract.faults import PlantFault, PlantFaults, clutch_fault_row, fault_error, fault_number
from ..core.api import L
from ..plant import Signal
from .hydraulics import (H_FIRST, HP_FLOW, HP_LEAK, HP_LEN, HP_STUCK, Hydraulics, data_length, initial_data,
                         param_length)


def current_signal(h: Hydraulics, name: str, what: str) -> Signal:
    """The solenoid-current input ``i_<name>`` (A) that replaces a pressure command with a valve map."""
    return Signal(f"i_{name}", "A", h.valve_current_A[0], h.valve_current_A[-1], h.valve_current_A[0],
                  f"{what} {name} solenoid current (valve map)")


def fill_signal(name: str) -> Signal:
    """The output ``fill_<name>``: the piston's filled volume over its fill volume (0 .. 1)."""
    return Signal(f"fill_{name}", "-", 0.0, 1.0, 0.0, f"{name} piston stroke: filled volume / fill volume")


def hydraulic_signals(h: Hydraulics | None, inputs: tuple[Signal, ...], outputs: tuple[Signal, ...],
                      ports: list[int], names: list[str], what: str = "clutch"
                      ) -> tuple[tuple[Signal, ...], tuple[Signal, ...]]:
    """A plant's signals with hydraulics: with a valve map each element's pressure command (input index
    ``ports[k]`` of element ``h.elements[k]``) becomes its current, at the same index; the fill outputs are
    appended after the plant's own (so no output of the plant without hydraulics moves).  ``names``: the
    rows' names in the config.  Unchanged without hydraulics."""
    if h is None:
        return inputs, outputs
    ins = list(inputs)
    if h.current_commands:
        for e, k in zip(h.elements, ports):
            ins[k] = current_signal(h, names[e], what)
    return tuple(ins), tuple(outputs) + tuple(fill_signal(names[e]) for e in h.elements)


# (fill flow factor, leak bar, valve stuck) with no fault: what set_hydraulics_fault clears a row to
NO_HYDRAULICS_FAULT = (1.0, 0.0, False)


class HydraulicFaults(PlantFaults):
    """The faults of a clutch's hydraulics (docs/faults.md): ``slow_fill`` (the fill flow times ``value`` in
    (0, 1]), ``leakage`` (``value`` bar lost at the piston), ``valve_stuck`` (the valve keeps its last output);
    only on a clutch with hydraulics (a ``[hydraulics]`` table).  Put on the plant's hydraulics parameters
    (:meth:`HydraulicsPlant.set_hydraulics_fault`) between steps."""

    target = "clutch"
    kinds = ("slow_fill", "leakage", "valve_stuck")

    def parse_fault(self, d: dict, plant: Any, where: str) -> PlantFault:
        kind = d["kind"]
        row = clutch_fault_row(d, plant, where)
        if not plant.has_hydraulics(row):
            raise fault_error(where, f"{kind}: clutch {d['clutch']!r} has no hydraulics (a [hydraulics] table)")
        value = 0.0
        if kind == "slow_fill":
            value = fault_number(d, "value", where, lo=1e-6, hi=1.0)
        elif kind == "leakage":
            value = fault_number(d, "value", where, lo=0.0, hi=1000.0)
        elif "value" in d:
            raise fault_error(where, f"a {kind} fault takes no 'value'")
        return PlantFault("clutch", kind, plant.row_names()[row], value=value, row=row)

    def apply(self, plant: Any, faults: Sequence[PlantFault], touched: frozenset[int]) -> frozenset[int]:
        """Each row's faults stacked (flow factors multiply, leaks add) to the plant; other rows cleared."""
        hyd = {}  # row -> (fill flow factor, leak bar, valve stuck)
        for f in faults:
            flow, leak, stuck = hyd.get(f.row, NO_HYDRAULICS_FAULT)
            hyd[f.row] = (flow * f.value if f.kind == "slow_fill" else flow,
                          leak + f.value if f.kind == "leakage" else leak, stuck or f.kind == "valve_stuck")
        for r in sorted(set(touched) | set(hyd)):
            plant.set_hydraulics_fault(r, *hyd.get(r, NO_HYDRAULICS_FAULT))
        return frozenset(hyd)


HYDRAULIC_FAULTS = HydraulicFaults()


class HydraulicsPlant:
    """The Python side of clutch hydraulics for a :class:`~plant_models.friction_plant.FrictionPlant`.

    Mixed in before ``FrictionPlant``; without hydraulics every method here leaves the plant as it was.
    A plant whose blocks and command inputs sit at fixed places (the
    Powershift, the DCT plant) names them in the three class attributes; one
    that lays them out from its description overrides the two methods that
    read them (the described transmission).
    """

    hydraulics_param_slot: ClassVar[int] = -1  # the parameter block's offset in the plant's float block (MF_PLANT)
    hydraulics_data_slot: ClassVar[int] = -1  # the plant's int parameter (MI_PLANT) holding the data block's offset
    first_command_input: ClassVar[int] = -1  # input index of row 0's command; row r's is this + r
    # the faults of its clutches' hydraulics, after the friction plant's own clutch faults (docs/faults.md)
    fault_declarations = (HYDRAULIC_FAULTS,)

    @classmethod
    def fixed_hydraulic_signals(cls, params, inputs: tuple[Signal, ...], outputs: tuple[Signal, ...],
                                names: list[str]) -> tuple[tuple[Signal, ...], tuple[Signal, ...]]:
        """:func:`hydraulic_signals` for a plant whose row r's command is input ``first_command_input + r``."""
        h = params.hydraulics
        return hydraulic_signals(h, inputs, outputs, [] if h is None else [cls.first_command_input + k
                                                                           for k in h.elements], names)

    def _hydraulics_offsets(self) -> tuple[int, int]:
        """(offset in ``mf`` of the hydraulics' parameter block, offset in ``df`` of its data block)."""
        return (int(self.mi[L.MF_PLANT]) + self.hydraulics_param_slot,
                int(self.mi[L.DF_PLANT]) + int(self.core.plant_i[self.hydraulics_data_slot]))

    def _command_input(self, row: int) -> int:
        """Input index of row ``row``'s command (its pressure in bar, or its current through the valve map)."""
        return self.first_command_input + row

    def _extra_blocks(self) -> tuple[int, int, bool]:
        """The hydraulics' parameter and data floats, and the core's actuator hold (FrictionPlant._allocate)."""
        hyd = self.params.hydraulics
        return (0, 0, False) if hyd is None else (param_length(hyd), data_length(hyd), True)

    def command_pressure(self, row: int) -> float:
        """The pressure row ``row`` is commanded now, bar (through the valve map for a current)."""
        hyd = self.params.hydraulics
        v = float(self.u[self._command_input(row)])
        if hyd is not None and hyd.current_commands and row in hyd.elements:
            return hyd.pressure_of_current(v)
        return v

    def has_hydraulics(self, row: int) -> bool:
        return self.params.hydraulics is not None and row in self.params.hydraulics.elements

    def _hydraulics_blocks(self):
        """Views of the hydraulics' parameter block (mf) and data block (df)."""
        hyd = self.params.hydraulics
        of, od = self._hydraulics_offsets()
        return self.mf[of:of + param_length(hyd)], self.df[od:od + data_length(hyd)]

    def _settle_hydraulics(self) -> None:
        """Hydraulics settled at the current commands (ring full, valve settled, piston stroked to balance)."""
        hyd = self.params.hydraulics
        if hyd is None:
            return
        _, data = self._hydraulics_blocks()
        data[:] = initial_data(hyd, [self.command_pressure(k) * BAR for k in hyd.elements])

    def set_hydraulics_fault(self, row: int, fill_flow: float = 1.0, leak_bar: float = 0.0,
                             stuck: bool = False) -> None:
        """Faults of a row's hydraulics (between steps): fill flow factor (``slow_fill``), pressure lost
        at the piston (``leakage``, bar), valve stuck at its last output (``valve_stuck``); the neutral values
        clear them.  ValueError for a row without hydraulics."""
        hyd = self.params.hydraulics
        if not self.has_hydraulics(row):
            raise ValueError(f"{self.row_names()[row]} has no hydraulics")
        params, _ = self._hydraulics_blocks()
        b = H_FIRST + hyd.elements.index(row) * HP_LEN
        params[b + HP_FLOW], params[b + HP_LEAK], params[b + HP_STUCK] = fill_flow, leak_bar * BAR, float(stuck)
