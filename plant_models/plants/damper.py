"""Clutch with a torsional damper-spring.

Section 5 of Zanasi, Sandoni & Morselli, "Simulation of variable dynamic
dimension systems: the clutch example".

Three inertias on the friction core: the engine shaft J1, the clutch disk
with the damper's input plate J2, and the gearbox input (transmission)
shaft J3.  The clutch couples 1 and 2 with a Coulomb friction k12 modulated
from outside (normal force on the disk); between 2 and 3 the damper's
spring phi_e(theta_d) acts in parallel with its friction (hysteresis)
k23::

    J1 w1' = C1 - b1 w1 - k12 sgn(w1 - w2)
    J2 w2' = -b2 w2 + k12 sgn(w1 - w2) - k23 sgn(w2 - w3) - phi(theta_d, w2 - w3)
    J3 w3' = C3 - b3 w3 + k23 sgn(w2 - w3) + phi(theta_d, w2 - w3)
    theta_d' = w2 - w3

with ``phi = phi_e(theta_d) + c_d (w2 - w3)``; ``phi_e`` is linear
(``k_d theta_d``) or piecewise linear through configured points (multi-stage
dampers), extended linearly beyond the last points.  At zero relative speed
each friction acts as static friction up to its capacity (the core solves
both rows together, exactly).  ``C3 = -load_torque``: a positive load
resists the transmission shaft.

Mapping onto the core: shafts (engine, disk, transmission); rows ``clutch``
[1, -1] between 0 and 1 with capacity = the ``clutch_capacity`` input, and
``damper_friction`` [1, -1] between 1 and 2 with the constant capacity k23;
one spring ``damper`` between 1 and 2 (twist = theta_2 - theta_3).  The
transmitted friction torques are ``tau_12 = -mu_clutch`` and ``tau_23 =
-mu_damper_friction`` (the paper's k sgn(...) terms, or the static values).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from numba import njit

from ..core.api import JIT, L, CoreSpec, Row, Settings, Spring, y_omega, y_row_work, y_twist
from ..contract.columns import Columns
from ..friction_plant import FrictionPlant, friction_kernels
from ..plant import Param, Ports, Signal
from . import friction_step

DEG = math.pi / 180.0  # rad per degree

# plant float parameters (MF_PLANT block)
PLANT_FLOATS = Columns("the damper's float parameters (MF_PLANT block)", (
    ("PF_K23", "Coulomb amplitude of the damper friction k23, N m"),
), count="PF_LEN")
globals().update(PLANT_FLOATS.constants())  # PF_K23; PF_LEN

ROWS = Columns("the core's friction rows", (
    ("ROW_CLUTCH", "the clutch between shafts 1 and 2"),
    ("ROW_DAMPER_FRICTION", "the damper's Coulomb friction between shafts 2 and 3"),
))
globals().update(ROWS.constants())  # ROW_CLUTCH, ROW_DAMPER_FRICTION


@dataclass(frozen=True)
class DamperParams:
    """Validated parameters (SI units; the characteristic in rad and N m)."""

    inertia: tuple[float, float, float] = (9.0, 5.0, 13.0)
    drag: tuple[float, float, float] = (12.0, 1.0, 7.0)
    clutch_static_to_kinetic: float = 1.0
    damper_friction_N_m: float = 50.0
    damper_static_to_kinetic: float = 1.0
    damper_stiffness_N_m_per_rad: float = 2000.0
    damper_damping_N_m_s_per_rad: float = 0.0
    damper_characteristic: tuple[tuple[float, float], ...] = ()  # (twist rad, torque N m)
    initial_speeds: tuple[float, float, float] = (0.0, 0.0, 0.0)
    initial_twist_rad: float = 0.0
    settings: Settings = Settings()


INPUTS = Ports()
IN_ENGINE = INPUTS.add("engine_torque", "N m", -2000.0, 5000.0, 0.0, "engine torque C1 on the engine shaft")
IN_CLUTCH = INPUTS.add("clutch_capacity", "N m", 0.0, 1.0e4, 0.0,
                       "clutch Coulomb friction amplitude k12 (set by the normal force on the disk)")
IN_LOAD = INPUTS.add("load_torque", "N m", -1.0e4, 1.0e4, 0.0,
                     "load on the transmission shaft; positive resists (C3 = -load)")
N_IN = len(INPUTS)

OUTPUTS = Ports()
OUT_W = OUTPUTS.add_block([  # engine, disk, transmission shaft
    Signal("w_engine", "rad/s", -2000.0, 2000.0, 0.0, "engine shaft speed w1"),
    Signal("w_disk", "rad/s", -2000.0, 2000.0, 0.0, "clutch disk / damper input speed w2"),
    Signal("w_transmission", "rad/s", -2000.0, 2000.0, 0.0, "transmission shaft speed w3")])
OUT_TWIST = OUTPUTS.add("damper_twist", "deg", -90.0, 90.0, 0.0, "damper twist theta_d = theta_2 - theta_3")
OUT_DAMPER_TQ = OUTPUTS.add("damper_torque", "N m", -1.0e5, 1.0e5, 0.0, "damper spring torque phi (elastic + damping)")
OUT_CLUTCH_TQ = OUTPUTS.add("clutch_torque", "N m", -1.0e4, 1.0e4, 0.0,
                            "friction torque tau_12 the engine passes to the disk")
OUT_CLUTCH_SLIP = OUTPUTS.add("clutch_slip", "rad/s", -4000.0, 4000.0, 0.0, "w1 - w2")
OUT_CLUTCH_STUCK = OUTPUTS.add("clutch_stuck", "-", 0, 1, 0, "clutch stuck (1) or slipping/open (0)", integer=True)
OUT_CLUTCH_CAP = OUTPUTS.add("clutch_capacity_static", "N m", 0.0, 1.0e5, 0.0, "clutch static capacity")
OUT_CLUTCH_ENERGY = OUTPUTS.add("clutch_energy", "J", -1.0e9, 1.0e9, 0.0, "clutch friction work (negative: dissipated)")
OUT_DF_TQ = OUTPUTS.add("damper_friction_torque", "N m", -1.0e4, 1.0e4, 0.0,
                        "damper friction torque tau_23 (disk to shaft)")
OUT_DF_SLIP = OUTPUTS.add("damper_slip", "rad/s", -4000.0, 4000.0, 0.0, "w2 - w3")
OUT_DF_STUCK = OUTPUTS.add("damper_friction_stuck", "-", 0, 1, 0, "damper friction stuck (1) or slipping (0)",
                           integer=True)
OUT_SYNC = OUTPUTS.add("synchronised", "-", 0, 1, 0, "1 when all three inertias turn together", integer=True)
OUT_ENGINE_IN = OUTPUTS.add("engine_torque_applied", "N m", -2000.0, 5000.0, 0.0, "C1 in effect at the end of the step")
OUT_CLUTCH_IN = OUTPUTS.add("clutch_capacity_applied", "N m", 0.0, 1.0e4, 0.0, "k12 in effect at the end of the step")
OUT_LOAD_IN = OUTPUTS.add("load_torque_applied", "N m", -1.0e4, 1.0e4, 0.0,
                          "load torque in effect at the end of the step")
OUT_STATUS = OUTPUTS.add("status", "-", 0, 2 ** 16, 0, "core status bits (see docs/method.md)", integer=True)


@njit(**JIT)
def _inputs(mf, mi, df, di):
    """Inputs to the core (values and first-order-hold rates).  Called in the real-time loop."""
    op = mi[L.DF_PLANT]
    out = mi[L.DF_U_TAU]
    outr = mi[L.DF_U_TAU_RATE]
    oua = mi[L.DF_U_ACT]
    ouar = mi[L.DF_U_ACT_RATE]
    df[out] = df[op + IN_ENGINE]
    df[outr] = df[op + N_IN + IN_ENGINE]
    df[out + 1] = 0.0
    df[outr + 1] = 0.0
    df[out + 2] = -df[op + IN_LOAD]
    df[outr + 2] = -df[op + N_IN + IN_LOAD]
    df[oua + ROW_CLUTCH] = df[op + IN_CLUTCH]  # noqa: F821
    df[ouar + ROW_CLUTCH] = df[op + N_IN + IN_CLUTCH]  # noqa: F821
    df[oua + ROW_DAMPER_FRICTION] = mf[mi[L.MF_PLANT] + PF_K23]  # noqa: F821
    df[ouar + ROW_DAMPER_FRICTION] = 0.0  # noqa: F821
    return 0


@njit(**JIT)
def _outputs(mf, mi, df, di, st, h):
    """Plant outputs from the core state, h s after the step start.  Called in the real-time loop."""
    oy = mi[L.DF_PLANT] + 2 * N_IN
    ow = y_omega(mi)
    for j in range(3):
        df[oy + OUT_W + j] = df[ow + j]
    df[oy + OUT_TWIST] = df[y_twist(mi)] / DEG
    df[oy + OUT_DAMPER_TQ] = df[mi[L.DF_SPRING_TQ]]
    omu = mi[L.DF_MU]
    odelta = mi[L.DF_DELTA]
    omode = mi[L.DI_MODE]
    df[oy + OUT_CLUTCH_TQ] = -df[omu + ROW_CLUTCH]  # noqa: F821
    df[oy + OUT_CLUTCH_SLIP] = df[odelta + ROW_CLUTCH]  # noqa: F821
    c_stuck = di[omode + ROW_CLUTCH] == L.MODE_STUCK  # noqa: F821
    d_stuck = di[omode + ROW_DAMPER_FRICTION] == L.MODE_STUCK  # noqa: F821
    df[oy + OUT_CLUTCH_STUCK] = 1.0 if c_stuck else 0.0
    df[oy + OUT_CLUTCH_CAP] = df[mi[L.DF_CAP_S] + ROW_CLUTCH]  # noqa: F821
    df[oy + OUT_CLUTCH_ENERGY] = df[y_row_work(mi) + ROW_CLUTCH]  # noqa: F821
    df[oy + OUT_DF_TQ] = -df[omu + ROW_DAMPER_FRICTION]  # noqa: F821
    df[oy + OUT_DF_SLIP] = df[odelta + ROW_DAMPER_FRICTION]  # noqa: F821
    df[oy + OUT_DF_STUCK] = 1.0 if d_stuck else 0.0
    df[oy + OUT_SYNC] = 1.0 if (c_stuck and d_stuck) else 0.0
    # the inputs as the core applied them at the end of the step (value + rate * dt of the hold)
    out = mi[L.DF_U_TAU]
    outr = mi[L.DF_U_TAU_RATE]
    oua = mi[L.DF_U_ACT]
    ouar = mi[L.DF_U_ACT_RATE]
    df[oy + OUT_ENGINE_IN] = df[out] + df[outr] * h
    df[oy + OUT_CLUTCH_IN] = df[oua + ROW_CLUTCH] + df[ouar + ROW_CLUTCH] * h  # noqa: F821
    df[oy + OUT_LOAD_IN] = -(df[out + 2] + df[outr + 2] * h)
    df[oy + OUT_STATUS] = float(st)


# the step (inputs -> core step -> outputs) and the refresh: the one sequence of plants/friction_step.py
damper_step, damper_refresh = friction_step.plant_kernels(globals(), "damper")


class DamperClutchPlant(FrictionPlant):
    """Clutch with torsional damper-spring (Zanasi, Sandoni & Morselli): 3 inertias, 2 frictions, 1 spring."""

    kind = "damper"
    description = "Clutch with torsional damper-spring, 3 inertias (Zanasi, Sandoni & Morselli, section 5)"
    params_type = DamperParams
    input_ports = INPUTS
    output_ports = OUTPUTS
    kernels = friction_kernels(damper_step, damper_refresh)
    plant_nf = PF_LEN  # noqa: F821

    def __init__(self, params: DamperParams | None = None, source: str = ""):
        super().__init__(params or DamperParams(), source)

    @classmethod
    def build_spec(cls, p: DamperParams) -> CoreSpec:
        rows = (
            Row("clutch", 0, 1, 1.0, -1.0, gain_static=p.clutch_static_to_kinetic, gain_kinetic=1.0),
            Row("damper_friction", 1, 2, 1.0, -1.0, gain_static=p.damper_static_to_kinetic, gain_kinetic=1.0),
        )
        spring = Spring("damper", 1, 2, 1.0, -1.0, stiffness=p.damper_stiffness_N_m_per_rad,
                        damping=p.damper_damping_N_m_s_per_rad, table=p.damper_characteristic)
        return CoreSpec(shaft_names=("engine", "disk", "transmission"), inertia=p.inertia, drag=p.drag,
                        rows=rows, springs=(spring,), settings=p.settings)

    def _fill_model(self) -> None:
        self.core.plant_f[PF_K23] = self.params.damper_friction_N_m  # noqa: F821

    def tunable_parameters(self) -> list[Param]:
        """The core's parameters and the damper friction k23 (read afresh at every step)."""
        pf = self.core.plant_f
        return super().tunable_parameters() + [
            Param("damper.friction_torque", "N m", 0.0, 1.0e5, "k23, Coulomb amplitude of the damper friction",
                  lambda: float(pf[PF_K23]), lambda v: pf.__setitem__(PF_K23, v))]  # noqa: F821

    def _initial_state(self) -> None:
        c = self.core
        c.omega[:] = self.params.initial_speeds
        c.twist[0] = self.params.initial_twist_rad
        c.act[ROW_CLUTCH] = self.u[IN_CLUTCH]  # noqa: F821
        c.act[ROW_DAMPER_FRICTION] = self.params.damper_friction_N_m  # noqa: F821
