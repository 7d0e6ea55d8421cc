"""The wet multi-plate clutch shared by the Powershift and DCT plants.

Pressure -> normal force -> capacity, as in seed 003, section 5: the piston
pushes with ``A p`` against the return spring, so ``F_N = A p - F_spring``
(zero below the kiss point ``p = F_spring / A``), and the static and
Coulomb amplitudes are ``K = F_N eta_s n_c r_m / r_c``,
``k = F_N eta_c n_c r_m / r_c``, with ``r_c`` the radius the row's force acts
at (1 for rows written in torque units).  The commanded pressure reaches the
piston through a first-order lag.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..config import ConfigReader
from ..core import Row
from ..plant import BAR, pressure_capacity_gains


@dataclass(frozen=True)
class WetClutch:
    """One wet clutch.  Speed-dependent terms are in the units of its row.

    ``stribeck_velocity`` and ``viscous`` are per unit of the row's relative
    speed: m/s and N s/m for a gear row written in radii (Powershift), rad/s
    and N m s/rad for a row written in torque units (DCT).
    """

    piston_area_m2: float
    return_spring_N: float
    friction_static: float
    friction_kinetic: float
    surfaces: int
    mean_radius_m: float
    pressure_lag_s: float
    stribeck_velocity: float
    stribeck_exponent: float
    viscous: float
    model: str = "friction"  # or "kinematic" (seed 001)
    shift_time_s: float = 0.0  # kinematic: engagement / disengagement time
    kinematic_capacity_N_m: float = 1.0e6  # kinematic: most torque the engaged clutch holds
    engage_pressure_bar: float = 0.0  # kinematic: engaged while the command is at least this

    @property
    def kiss_point_bar(self) -> float:
        return self.return_spring_N / self.piston_area_m2 / BAR

    def capacity_at(self, pressure_bar: float, force_radius_m: float = 1.0) -> float:
        """Static capacity at a settled pressure: N m for torque rows, N at ``force_radius_m`` for gear rows."""
        fn = max(0.0, self.piston_area_m2 * pressure_bar * BAR - self.return_spring_N)
        return fn * self.friction_static * self.surfaces * self.mean_radius_m / force_radius_m

    def max_capacity(self, pressure_bar: float) -> float:
        """The most torque the clutch holds, N m: at ``pressure_bar`` for a friction clutch, its
        ``kinematic_capacity_N_m`` for a kinematic one (for the ranges of capacity outputs)."""
        if self.model == "kinematic":
            return self.kinematic_capacity_N_m
        return self.capacity_at(pressure_bar)

    def row(self, name: str, shaft_a: int, shaft_b: int, coef_a: float, coef_b: float,
            force_radius_m: float = 1.0) -> Row:
        """The core row of this clutch (its capacity driven by the pressure command in Pa)."""
        gs, gk = pressure_capacity_gains(self.mean_radius_m, self.surfaces, self.friction_static,
                                         self.friction_kinetic, force_radius_m)
        if self.model == "kinematic":
            return Row(name, shaft_a, shaft_b, coef_a, coef_b, viscous=self.viscous,
                       kinematic_shift_time=self.shift_time_s,
                       kinematic_capacity=self.kinematic_capacity_N_m / force_radius_m,
                       kinematic_threshold=self.engage_pressure_bar * BAR)
        return Row(name, shaft_a, shaft_b, coef_a, coef_b, act_lag_s=self.pressure_lag_s,
                   act_gain=self.piston_area_m2, act_preload=self.return_spring_N, gain_static=gs,
                   gain_kinetic=gk, stribeck_velocity=self.stribeck_velocity,
                   stribeck_exponent=self.stribeck_exponent, viscous=self.viscous)


def read_wet_clutch(base: ConfigReader, over: ConfigReader | None, *, speed_unit: str, viscous_unit: str) -> WetClutch:
    """Read one clutch from the common ``[clutch]`` table and its optional override table.

    A key in ``over`` replaces the same key of ``base``; errors name the table
    the value came from.  ``speed_unit`` / ``viscous_unit`` are the key
    suffixes of the speed-dependent terms (e.g. ``"m_s"`` and ``"N_s_per_m"``).
    Unknown keys in ``over`` are rejected here; the caller rejects those of
    ``base`` once every clutch was read.
    """

    def get(name, kind="number", **kw):
        src = over if over is not None and over.has(name) else base
        return getattr(src, kind)(name, **kw)

    c = WetClutch(
        piston_area_m2=get("piston_area_m2", positive=True),
        return_spring_N=get("return_spring_N", nonnegative=True),
        friction_static=get("friction_static", positive=True),
        friction_kinetic=get("friction_kinetic", nonnegative=True),
        surfaces=get("surfaces", "integer", lo=1),
        mean_radius_m=get("mean_radius_m", positive=True),
        pressure_lag_s=get("pressure_lag_s", nonnegative=True),
        stribeck_velocity=get(f"stribeck_velocity_{speed_unit}", default=0.0, nonnegative=True),
        stribeck_exponent=get("stribeck_exponent", default=2.0, positive=True),
        viscous=get(f"viscous_{viscous_unit}", default=0.0, nonnegative=True),
        model=get("model", "string", default="friction", choices=("friction", "kinematic")),
    )
    if c.model == "kinematic":
        kiss = c.kiss_point_bar
        c = replace(c, shift_time_s=get("shift_time_s", positive=True),
                    kinematic_capacity_N_m=get("kinematic_capacity_N_m", default=1.0e6, positive=True),
                    engage_pressure_bar=get("engage_pressure_bar", default=kiss if kiss > 0 else 1.0, positive=True))
    # (the kinematic keys on a friction clutch are left unread: reject_unknown names them)
    if c.friction_kinetic > c.friction_static:
        src = over if over is not None and over.has("friction_kinetic") else base
        raise src.error("friction_kinetic", f"must not exceed friction_static ({c.friction_static})")
    return c
