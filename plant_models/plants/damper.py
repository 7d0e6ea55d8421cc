"""Clutch with a torsional damper-spring (seed 004, section 5).

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

from ..core import layout as L
from ..config import ConfigReader
from ..core import CoreSpec, Row, Settings, Spring
from ..core.api import BUFS, JIT, core_step as _step, raw_f as _raw_f, raw_i as _raw_i
from ..plant import Plant, Signal
from .powershift import settings_from_config

DEG = math.pi / 180.0  # rad per degree

# plant float parameters (MF_PLANT block)
PF_K23 = 0  # Coulomb amplitude of the damper friction k23, N m
PF_LEN = 1

# inputs
IN_ENGINE = 0  # C1, N m
IN_CLUTCH = 1  # k12, N m
IN_LOAD = 2  # -C3, N m
N_IN = 3
# outputs
OUT_W = 0  # [3] speeds of engine, disk, transmission shaft, rad/s
OUT_TWIST = 3  # damper twist theta_d, deg
OUT_DAMPER_TQ = 4  # phi, N m
OUT_CLUTCH_TQ = 5  # tau_12, N m
OUT_CLUTCH_SLIP = 6  # w1 - w2, rad/s
OUT_CLUTCH_STUCK = 7
OUT_CLUTCH_CAP = 8  # static capacity of the clutch, N m
OUT_CLUTCH_ENERGY = 9  # friction work of the clutch, J (negative: dissipated)
OUT_DF_TQ = 10  # tau_23, N m
OUT_DF_SLIP = 11  # w2 - w3, rad/s
OUT_DF_STUCK = 12
OUT_SYNC = 13  # 1 when all three shafts turn together
OUT_ENGINE_IN = 14  # C1 in effect at the end of the step, N m
OUT_CLUTCH_IN = 15  # k12 in effect at the end of the step, N m
OUT_LOAD_IN = 16  # load torque in effect at the end of the step, N m
OUT_STATUS = 17
N_OUT = 18

ROW_CLUTCH = 0
ROW_DAMPER_FRICTION = 1


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

    @staticmethod
    def from_config(cfg: ConfigReader) -> "DamperParams":
        sh = cfg.sub("shafts")
        inertia = tuple(sh.numbers("inertia_kg_m2", 3, positive=True))
        drag = tuple(sh.numbers("drag_N_m_s_per_rad", 3, nonnegative=True))
        sh.reject_unknown()
        cl = cfg.sub("clutch", required=False)
        cr = cl.number("static_to_kinetic_ratio", 1.0, lo=1.0)
        cl.reject_unknown()
        dp = cfg.sub("damper")
        k23 = dp.number("friction_torque_N_m", nonnegative=True)
        dr = dp.number("friction_static_to_kinetic_ratio", 1.0, lo=1.0)
        damping = dp.number("damping_N_m_s_per_rad", 0.0, nonnegative=True)
        has_k = dp.has("stiffness_N_m_per_rad")
        has_t = dp.has("characteristic_deg_N_m")
        if has_k == has_t:
            raise dp.error("stiffness_N_m_per_rad", "give exactly one of stiffness_N_m_per_rad (linear) and "
                           "characteristic_deg_N_m (piecewise linear)")
        stiffness = 0.0
        table: tuple[tuple[float, float], ...] = ()
        if has_k:
            stiffness = dp.number("stiffness_N_m_per_rad", positive=True)
        else:
            table = _characteristic(dp, "characteristic_deg_N_m")
        dp.reject_unknown()
        ini = cfg.sub("initial", required=False)
        w0 = tuple(ini.numbers("speeds_rad_s", 3, [0.0, 0.0, 0.0]))
        tw0 = ini.number("damper_twist_deg", 0.0) * DEG
        ini.reject_unknown()
        return DamperParams(inertia, drag, cr, k23, dr, stiffness, damping, table, w0, tw0,
                            settings_from_config(cfg))


def _characteristic(dp: ConfigReader, key: str) -> tuple[tuple[float, float], ...]:
    pts = dp.raw(key)
    if not isinstance(pts, list) or len(pts) < 2:
        raise dp.error(key, "must be a list of at least two [twist_deg, torque_N_m] points")
    out = []
    for j, pt in enumerate(pts):
        if (not isinstance(pt, list) or len(pt) != 2
                or any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in pt)
                or not all(math.isfinite(v) for v in pt)):
            raise dp.error(f"{key}[{j}]", f"must be a [twist_deg, torque_N_m] pair of finite numbers, got {pt!r}")
        if out and pt[0] * DEG <= out[-1][0]:
            raise dp.error(f"{key}[{j}]", "twist must increase strictly from point to point")
        if out and pt[1] < out[-1][1]:
            raise dp.error(f"{key}[{j}]", "torque must not decrease with twist (a spring stores energy)")
        out.append((float(pt[0]) * DEG, float(pt[1])))
    return tuple(out)


def build_spec(p: DamperParams) -> CoreSpec:
    """The core network of the damper clutch (also used by the tests' references)."""
    rows = (
        Row("clutch", 0, 1, 1.0, -1.0, gain_static=p.clutch_static_to_kinetic, gain_kinetic=1.0),
        Row("damper_friction", 1, 2, 1.0, -1.0, gain_static=p.damper_static_to_kinetic, gain_kinetic=1.0),
    )
    spring = Spring("damper", 1, 2, 1.0, -1.0, stiffness=p.damper_stiffness_N_m_per_rad,
                    damping=p.damper_damping_N_m_s_per_rad, table=p.damper_characteristic)
    return CoreSpec(shaft_names=("engine", "disk", "transmission"), inertia=p.inertia, drag=p.drag,
                    rows=rows, springs=(spring,), settings=p.settings)


def _signals():
    inputs = (
        Signal("engine_torque", "N m", -2000.0, 5000.0, 0.0, "engine torque C1 on the engine shaft"),
        Signal("clutch_capacity", "N m", 0.0, 1.0e4, 0.0,
               "clutch Coulomb friction amplitude k12 (set by the normal force on the disk)"),
        Signal("load_torque", "N m", -1.0e4, 1.0e4, 0.0, "load on the transmission shaft; positive resists (C3 = -load)"),
    )
    outputs = (
        Signal("w_engine", "rad/s", -2000.0, 2000.0, 0.0, "engine shaft speed w1"),
        Signal("w_disk", "rad/s", -2000.0, 2000.0, 0.0, "clutch disk / damper input speed w2"),
        Signal("w_transmission", "rad/s", -2000.0, 2000.0, 0.0, "transmission shaft speed w3"),
        Signal("damper_twist", "deg", -90.0, 90.0, 0.0, "damper twist theta_d = theta_2 - theta_3"),
        Signal("damper_torque", "N m", -1.0e5, 1.0e5, 0.0, "damper spring torque phi (elastic + damping)"),
        Signal("clutch_torque", "N m", -1.0e4, 1.0e4, 0.0, "friction torque tau_12 the engine passes to the disk"),
        Signal("clutch_slip", "rad/s", -4000.0, 4000.0, 0.0, "w1 - w2"),
        Signal("clutch_stuck", "-", 0, 1, 0, "clutch stuck (1) or slipping/open (0)", integer=True),
        Signal("clutch_capacity_static", "N m", 0.0, 1.0e5, 0.0, "clutch static capacity"),
        Signal("clutch_energy", "J", -1.0e9, 1.0e9, 0.0, "clutch friction work (negative: dissipated)"),
        Signal("damper_friction_torque", "N m", -1.0e4, 1.0e4, 0.0, "damper friction torque tau_23 (disk to shaft)"),
        Signal("damper_slip", "rad/s", -4000.0, 4000.0, 0.0, "w2 - w3"),
        Signal("damper_friction_stuck", "-", 0, 1, 0, "damper friction stuck (1) or slipping (0)", integer=True),
        Signal("synchronised", "-", 0, 1, 0, "1 when all three inertias turn together", integer=True),
        Signal("engine_torque_applied", "N m", -2000.0, 5000.0, 0.0, "C1 in effect at the end of the step"),
        Signal("clutch_capacity_applied", "N m", 0.0, 1.0e4, 0.0, "k12 in effect at the end of the step"),
        Signal("load_torque_applied", "N m", -1.0e4, 1.0e4, 0.0, "load torque in effect at the end of the step"),
        Signal("status", "-", 0, 2 ** 16, 0, "core status bits (see docs/method.md)", integer=True),
    )
    return inputs, outputs


@njit(**JIT)
def _dc_inputs(mf, mi, df, di):
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
    df[oua + ROW_CLUTCH] = df[op + IN_CLUTCH]
    df[ouar + ROW_CLUTCH] = df[op + N_IN + IN_CLUTCH]
    df[oua + ROW_DAMPER_FRICTION] = mf[mi[L.MF_PLANT] + PF_K23]
    df[ouar + ROW_DAMPER_FRICTION] = 0.0


@njit(**JIT)
def _dc_outputs(mf, mi, df, di, st, h):
    """Plant outputs from the core state, h s after the step start.  Called in the real-time loop."""
    n = mi[L.H_N]
    g = mi[L.H_G]
    s = mi[L.H_S]
    oy = mi[L.DF_PLANT] + 2 * N_IN
    ow = mi[L.DF_Y]
    for j in range(3):
        df[oy + OUT_W + j] = df[ow + j]
    df[oy + OUT_TWIST] = df[ow + 2 * n] / DEG
    df[oy + OUT_DAMPER_TQ] = df[mi[L.DF_SPRING_TQ]]
    omu = mi[L.DF_MU]
    odelta = mi[L.DF_DELTA]
    omode = mi[L.DI_MODE]
    df[oy + OUT_CLUTCH_TQ] = -df[omu + ROW_CLUTCH]
    df[oy + OUT_CLUTCH_SLIP] = df[odelta + ROW_CLUTCH]
    c_stuck = di[omode + ROW_CLUTCH] == L.MODE_STUCK
    d_stuck = di[omode + ROW_DAMPER_FRICTION] == L.MODE_STUCK
    df[oy + OUT_CLUTCH_STUCK] = 1.0 if c_stuck else 0.0
    df[oy + OUT_CLUTCH_CAP] = df[mi[L.DF_CAP_S] + ROW_CLUTCH]
    df[oy + OUT_CLUTCH_ENERGY] = df[ow + 2 * n + s + g + L.W_ROW0 + ROW_CLUTCH]
    df[oy + OUT_DF_TQ] = -df[omu + ROW_DAMPER_FRICTION]
    df[oy + OUT_DF_SLIP] = df[odelta + ROW_DAMPER_FRICTION]
    df[oy + OUT_DF_STUCK] = 1.0 if d_stuck else 0.0
    df[oy + OUT_SYNC] = 1.0 if (c_stuck and d_stuck) else 0.0
    # the inputs as the core applied them at the end of the step (value + rate * dt of the hold)
    out = mi[L.DF_U_TAU]
    outr = mi[L.DF_U_TAU_RATE]
    oua = mi[L.DF_U_ACT]
    ouar = mi[L.DF_U_ACT_RATE]
    df[oy + OUT_ENGINE_IN] = df[out] + df[outr] * h
    df[oy + OUT_CLUTCH_IN] = df[oua + ROW_CLUTCH] + df[ouar + ROW_CLUTCH] * h
    df[oy + OUT_LOAD_IN] = -(df[out + 2] + df[outr + 2] * h)
    df[oy + OUT_STATUS] = float(st)


@njit("int64(" + BUFS + ", float64)", **JIT)
def damper_step(mf, mi, df, di, dt):
    """Map the inputs to the core, take one step, write the outputs.  Called in the real-time loop."""
    rmf, rmi, rdf, rdi = _raw_f(mf), _raw_i(mi), _raw_f(df), _raw_i(di)
    _dc_inputs(rmf, rmi, rdf, rdi)
    st = _step(rmf, rmi, rdf, rdi, dt)
    _dc_outputs(rmf, rmi, rdf, rdi, st, dt)
    return st


@njit("int64(" + BUFS + ", int64)", **JIT)
def damper_refresh(mf, mi, df, di, st):
    """Map inputs and recompute outputs without stepping (after a reset)."""
    rmf, rmi, rdf, rdi = _raw_f(mf), _raw_i(mi), _raw_f(df), _raw_i(di)
    _dc_inputs(rmf, rmi, rdf, rdi)
    _dc_outputs(rmf, rmi, rdf, rdi, st, 0.0)
    return 0


class DamperClutchPlant(Plant):
    """Clutch with torsional damper-spring (Zanasi, Sandoni & Morselli): 3 inertias, 2 frictions, 1 spring."""

    kind = "damper"
    description = "Clutch with torsional damper-spring, 3 inertias (Zanasi, Sandoni & Morselli, section 5)"

    def __init__(self, params: DamperParams | None = None, source: str = ""):
        self.params = params = params or DamperParams()
        inputs, outputs = _signals()
        super().__init__(build_spec(params), inputs, outputs, damper_step, plant_nf=PF_LEN, source=source)
        self.core.plant_f[PF_K23] = params.damper_friction_N_m
        self.reset()

    @classmethod
    def from_config(cls, cfg: ConfigReader) -> "DamperClutchPlant":
        return cls(DamperParams.from_config(cfg), source=cfg.source)

    def tunable_parameters(self) -> list:
        """The damper friction k23 (read afresh at every step) for a running server."""
        from server.params import Param

        pf = self.core.plant_f
        return [Param("damper.friction_torque", "N m", 0.0, 1.0e5, "k23, Coulomb amplitude of the damper friction",
                      lambda: float(pf[PF_K23]), lambda v: pf.__setitem__(PF_K23, v))]

    def _initial_state(self) -> None:
        c = self.core
        c.omega[:] = self.params.initial_speeds
        c.twist[0] = self.params.initial_twist_rad
        c.act[ROW_CLUTCH] = self.u[IN_CLUTCH]
        c.act[ROW_DAMPER_FRICTION] = self.params.damper_friction_N_m

    def _start_fn(self) -> int:
        damper_refresh(self.mf, self.mi, self.df, self.di, 0)
        # rows at zero relative speed with capacity start stuck if they can hold (the core decides)
        st = self.core.start([])
        damper_refresh(self.mf, self.mi, self.df, self.di, st)
        return st

    def plot_figures(self, trace, out_dir, title: str = "") -> list:
        """PNG figures of an offline run in the paper's style (seed 004 figs. 11-12); see damper_plots."""
        from server.plots.damper import plot

        return plot(self, trace, out_dir, title)
