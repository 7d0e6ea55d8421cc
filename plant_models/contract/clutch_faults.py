"""The clutch faults of a plant on the friction core: their kinds, their checks and the overlay they make.

:class:`plant_models.friction_plant.FrictionPlant` declares them
(``fault_declarations``; ``docs/faults.md``, "Clutch faults").  The faults
active on a clutch become one overlay (a capacity factor, a static factor,
a lag factor, a preload offset: :data:`NEUTRAL_OVERLAY` is none), which
:meth:`~plant_models.friction_plant.FrictionPlant.set_clutch_overlay` turns
into the model floats the step reads whenever a fault is set or cleared:
nothing per tick.  So faults on one clutch stack and clear in any order, and
a parameter tuned with ``set_params`` during a fault is neither lost when
the fault clears nor overwritten by it.  ``pressure_bias`` changes no
physics: it is an offset on the clutch's pressure output (a sensor), and
``stuck_closed`` also saturates the clutch's capacity output at the top of
its declared range (its real capacity is beyond any the drive line can load,
and an output stays inside its declared range): the fault set gives both a
row of the run pipeline's signal table.
"""

from __future__ import annotations

from typing import Any, Sequence

from .faults import PlantFault, PlantFaults, clutch_fault_row, clutch_output, fault_error, fault_number

# A clutch's fault overlay with no fault: (capacity factor, static factor, lag factor, preload offset N)
NEUTRAL_OVERLAY = (1.0, 1.0, 1.0, 0.0)

# A stuck-closed clutch: its static capacity per unit normal force is multiplied by this, and its normal force
# held at least at its largest commanded value, so it holds any torque the drive line can put on it and a
# slipping one closes at its full Coulomb torque.
STUCK_STATIC_FACTOR = 1.0e6


class ClutchFaults(PlantFaults):
    """``stuck_closed``, ``no_torque``, ``worn``, ``slow_actuator``, ``pressure_bias`` on a friction row."""

    target = "clutch"
    kinds = ("stuck_closed", "no_torque", "worn", "slow_actuator", "pressure_bias")

    def parse_fault(self, d: dict, plant: Any, where: str) -> PlantFault:
        kind = d["kind"]
        row = clutch_fault_row(d, plant, where)
        name = plant.row_names()[row]
        kin = plant.is_kinematic_row(row)
        value = 0.0
        if kind == "worn":
            value = fault_number(d, "value", where, lo=0.0, hi=1.0)
        elif kind == "slow_actuator":
            value = fault_number(d, "value", where, lo=1.0, hi=1000.0)
            if kin:
                raise fault_error(where, "slow_actuator: a kinematic clutch has no pressure lag")
        elif kind == "pressure_bias":
            value = fault_number(d, "value", where)
            sig = clutch_output(plant, row, "pressure")
            if sig is None:
                raise fault_error(where, f"pressure_bias: {plant.kind} has no pressure output for clutch "
                                  f"{d['clutch']!r}")
            return PlantFault("clutch", kind, name, value=value, row=row, output=sig, output_action="offset")
        elif "value" in d:
            raise fault_error(where, f"a {kind} fault takes no 'value'")
        if kind == "stuck_closed":
            if kin:
                raise fault_error(where, "stuck_closed: not for a kinematic clutch (its capacity follows its phase)")
            sig = clutch_output(plant, row, "capacity")
            if sig is not None:  # saturated at the top of its declared range
                return PlantFault("clutch", kind, name, row=row, output=sig, output_action="clamp")
        return PlantFault("clutch", kind, name, value=value, row=row)

    @staticmethod
    def overlays(plant: Any, faults: Sequence[PlantFault]) -> dict[int, tuple[float, float, float, float]]:
        """The fault overlay of each row with a fault on its physics, the faults stacked in the order they were
        set."""
        out = {}
        for f in faults:
            if f.kind == "pressure_bias":  # a sensor's offset: no physics
                continue
            cap, stat, lag, pre = out.get(f.row, NEUTRAL_OVERLAY)
            if f.kind == "no_torque":
                cap = 0.0
            elif f.kind == "worn":
                cap = cap * f.value
            elif f.kind == "slow_actuator":
                lag = lag * f.value
            elif f.kind == "stuck_closed":
                pre = pre - plant.full_normal_force(f.row)
                stat = stat * STUCK_STATIC_FACTOR
            out[f.row] = (cap, stat, lag, pre)
        return out

    def apply(self, plant: Any, faults: Sequence[PlantFault], touched: frozenset[int]) -> frozenset[int]:
        """Each row's overlay to the plant (rows no fault acts on any more: the neutral one)."""
        ov = self.overlays(plant, faults)
        for r in sorted(set(touched) | set(ov)):
            plant.set_clutch_overlay(r, *ov.get(r, NEUTRAL_OVERLAY))
        return frozenset(ov)

    def snapshot_rows(self, plant: Any, touched: frozenset[int]) -> dict[int, list[float]]:
        """The tuned floats of the rows under an overlay (the plant's model floats carry the overlay)."""
        if not touched:
            return {}
        tuned = plant.tuned_state()
        return {int(r): [float(v) for v in tuned[:, r]] for r in sorted(touched)}


CLUTCH_FAULTS = ClutchFaults()

__all__ = ["ClutchFaults", "CLUTCH_FAULTS", "NEUTRAL_OVERLAY", "STUCK_STATIC_FACTOR"]
