"""The wet multi-plate clutch shared by the Powershift and DCT plants.

Pressure -> normal force -> capacity, as in section 5 of Morselli, Zanasi &
Ferracin, "Modeling and simulation of static and Coulomb friction in a
class of automotive systems": the piston pushes with ``A p`` against the
return spring, so ``F_N = A p - F_spring`` (zero below the kiss point
``p = F_spring / A``), and the static and Coulomb amplitudes are
``K = F_N eta_s n_c r_m / r_c``, ``k = F_N eta_c n_c r_m / r_c``, with
``r_c`` the radius the row's force acts at (1 for rows written in torque
units).  The commanded pressure reaches the piston through a first-order
lag.  Reading a clutch from a config file is in :mod:`plant_models.readers.common`.

It sits on the contract floor of ``plant_models`` (beside :mod:`.drivetrain`,
whose elements carry a clutch), below the plants that build rows from it.
"""

from __future__ import annotations

from dataclasses import dataclass

from .core.api import Row

BAR = 1.0e5  # Pa per bar


def pressure_capacity_gains(mean_radius_m: float, surfaces: int, mu_static: float, mu_kinetic: float,
                            gear_radius_m: float) -> tuple[float, float]:
    """Static and Coulomb force per newton of normal force at the gear mesh (Morselli, Zanasi & Ferracin, section 5).

    ``K = F_N * eta_s * n_c * r_m / r_c`` and ``k = F_N * eta_c * n_c * r_m / r_c``.
    For rows written in torque units (coefficients 1 and a ratio) use
    ``gear_radius_m = 1``: the result is then the clutch torque per newton.
    """
    return (mu_static * surfaces * mean_radius_m / gear_radius_m,
            mu_kinetic * surfaces * mean_radius_m / gear_radius_m)


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
    model: str = "friction"  # or "kinematic" ("Clutch Modeling - Part II: Kinematic Clutches")
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
