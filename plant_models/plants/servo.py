"""Electro-hydraulic position servo with load-dependent dry friction and hard stops (seed 002).

Borello & Dalla Vedova's flap actuator (seed 002, sections 3-6): a
proportional position controller drives a two-stage servovalve, the valve
feeds a hydraulic motor, and the motor moves a control surface through a
transmission whose dry friction depends on the load through two
efficiencies.  The surface travels between two mechanical hard stops.  One
degree of freedom; it does not use the shaft/row friction core but its own
fixed-step algorithm (the paper's Table 1), compiled into one step function.

Signs: positions, rates and torques are positive in the deploy direction.
A positive ``load_torque`` T_LD acts against positive motion (the
aerodynamic hinge moment of a deploying flap): it *opposes* a positive rate
and *aids* a negative one.

Model, per internal sub-step of length h (the plant step dt is split into
``ceil(dt / internal_step_s)`` equal sub-steps; inputs follow a first-order
hold over dt):

Controller (pure proportional law, as in the paper's runs)
    ``Err = Com - XJ``, ``Cor = sat(G_amp * Err, +-I_max)`` [A].
Servovalve first stage (second order, flapper stops +-XF_max)
    ``XF'' = wF^2 (G_F (Cor - XS / K_XS) - XF) - 2 zF wF XF'``: the torque
    motor moves the flapper in proportion to the current minus the spool's
    feedback spring, which makes the spool position proportional to the
    current in steady state (``XS = K_XS * Cor``).
Second stage (first order: integrator, spool stops +-XS_max)
    ``XS' = G_S * XF`` (the flapper's differential nozzle pressure moves the
    spool); with the feedback loop the spool follows the current with the
    time constant ``K_XS / (G_S G_F)``.
Pressure (the paper's simplification: pressure gain with saturation, losses
from the total flow)
    ``P12 = sat(G_P XS, +-PSR) - R_Q (Q_J + Q_L)``, ``Q_J = Dis * DXJ``,
    ``Q_L = C_L * P12`` (leakage through the piston seals), hence
    ``P12 = (sat(G_P XS, +-PSR) - R_Q Dis DXJ) / (1 + R_Q C_L)``.  ``R_Q =
    G_P / G_Q`` is the valve's pressure-flow coefficient; the supply-return
    pressure PSR is an input.
Motor and transmission (Table 1)
    ``T_M = Dis * P12``; ``Act = T_M - T_LD - C_M DXJ``;
    ``FDO = T_FR0 + (1/EtO - 1)|T_LD|`` (opposing load, eq. 3),
    ``FDA = T_FR0 + (1 - EtA)|T_LD|`` (aiding load, eq. 4).
    Moving (DXJ != 0): ``T_FR = sign(DXJ) FDO``, or ``sign(DXJ) FDA`` when the
    load aids the motion (DXJ * T_LD < 0).
    At rest: ``T_FR = clamp(Act, -FSD*FDA, FSD*FDO)`` for T_LD >= 0 and
    ``clamp(Act, -FSD*FDO, FSD*FDA)`` for T_LD < 0, i.e. the static limit of
    the breakaway direction (statements 8-9).
    ``D2XJ = (Act - T_FR) / J_M``; a velocity sign change inside a sub-step
    stops the element (statement 14; the next sub-step decides between
    staying stuck and breaking away the other way); the position is
    integrated with the trapezoidal rule and clamped to the hard stops,
    where the impact is inelastic and only motion away from the stop is kept
    (statements 15-17).

One deviation from the listing, for robustness: the two velocity-
proportional torques (C_M DXJ and the valve's pressure-flow loss
``Dis^2 R_Q / (1 + R_Q C_L) * DXJ``) are integrated implicitly (linearly
implicit Euler), so a sub-step stays stable for any inertia; everything else
is the explicit fixed step of Table 1.  With that loss the valve damps the
surface far more than C_M does (about 1e6 N m s/rad with the defaults).

EtO must lie in (0, 1]; EtA <= 1: 0 < EtA <= 1 is a reversible
transmission, EtA <= 0 an irreversible one (the load alone cannot move it:
with EtA = -0.5 the friction produced by a load is 1.5 times the load).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numba import njit

from ..core import layout as L
from ..config import ConfigReader
from ..core import CoreSpec, Settings
from ..core.api import BUFS, JIT, raw_f as _raw_f, raw_i as _raw_i
from ..plant import Plant, Signal

DEG = math.pi / 180.0  # rad per degree
MPA = 1.0e6  # Pa per MPa

# --------------------------------------------------------------------------
# plant float parameters (offsets inside the MF_PLANT block)
# --------------------------------------------------------------------------
# -- controller
PF_AMP_GAIN = 0  # servo-amplifier gain G_amp, A per rad of position error
PF_CURRENT_MAX = 1  # current saturation I_max, A
# -- servovalve first stage
PF_WF = 2  # first-stage natural frequency wF, rad/s
PF_ZF = 3  # first-stage damping ratio zF, -
PF_GF = 4  # flapper displacement per net current G_F, m/A
PF_XF_MAX = 5  # flapper travel (hard stops at +-), m
# -- second stage
PF_GS = 6  # spool velocity per flapper displacement G_S, 1/s
PF_KXS = 7  # steady-state spool position per current K_XS, m/A
PF_XS_MAX = 8  # spool travel (hard stops at +-), m
PF_GP = 9  # pressure gain G_P, Pa/m
PF_RQ = 10  # pressure-flow coefficient R_Q = G_P/G_Q, Pa s/m^3
PF_CLEAK = 11  # leakage coefficient C_L, m^3/(s Pa)
# -- motor and transmission
PF_DIS = 12  # motor displacement referred to the surface, m^3/rad
# (J_M and C_M are the core's inertia and drag of the 'surface' shaft: MF_INERTIA, MF_DRAG)
PF_TFR0 = 15  # load-independent friction torque T_FR0, N m
PF_ETO = 16  # efficiency with opposing load EtO, -
PF_ETA = 17  # efficiency with aiding load EtA, -
PF_FSD = 18  # static-to-dynamic friction ratio FSD, -
PF_XJ_MIN = 19  # lower hard stop, rad
PF_XJ_MAX = 20  # upper hard stop, rad
# -- numerics
PF_H_MAX = 21  # longest internal sub-step, s
PF_LEN = 22

# --------------------------------------------------------------------------
# inputs / outputs (indices into the plant's u / y)
# --------------------------------------------------------------------------
IN_COMMAND = 0  # position command Com, deg
IN_SUPPLY = 1  # supply-return pressure PSR, MPa
IN_LOAD = 2  # load torque T_LD, N m (positive opposes deploying)
N_IN = 3

OUT_POSITION = 0  # XJ, deg
OUT_RATE = 1  # DXJ, deg/s
OUT_ERROR = 2  # Com - XJ, deg
OUT_CURRENT = 3  # Cor, mA
OUT_FLAPPER = 4  # XF, um
OUT_SPOOL = 5  # XS, um
OUT_PRESSURE = 6  # P12, MPa
OUT_MOTOR_TQ = 7  # T_M, N m
OUT_FRICTION_TQ = 8  # T_FR, N m (the torque the transmission friction exerts, opposing motion / Act)
OUT_STOP_TQ = 9  # torque carried by a hard stop, N m (0 off the stops)
OUT_STUCK = 10  # 1 while the surface is at rest (friction sticking or held on a stop)
OUT_AT_STOP = 11  # -1 on the lower stop, +1 on the upper stop, 0 between
OUT_COMMAND_IN = 12  # Com in effect at the end of the step, deg
OUT_SUPPLY_IN = 13  # PSR in effect at the end of the step, MPa
OUT_LOAD_IN = 14  # T_LD in effect at the end of the step, N m
OUT_STATUS = 15
N_OUT = 16

# --------------------------------------------------------------------------
# plant state (float, after the io block)
# --------------------------------------------------------------------------
S_XF = 0  # flapper position, m
S_DXF = 1  # flapper velocity, m/s
S_XS = 2  # spool position, m
S_COR = 3  # last current, A
S_P12 = 4  # last load pressure, Pa
S_TM = 5  # last motor torque, N m
S_TFR = 6  # last friction torque, N m
S_TSTOP = 7  # last hard-stop torque, N m
N_STATE = 8

# plant int data
DI_AT_STOP = 0  # -1 / 0 / +1
DI_STUCK = 1  # 1 while at rest
N_DI = 2

# event kinds (row field: 0 = transmission friction, 1 = lower stop, 2 = upper stop)
EV_STICK = L.EV_STICK  # the moving surface came to rest (friction)
EV_BREAKAWAY = L.EV_BREAKAWAY  # the resting surface started to move
EV_STOP_HIT = 4  # the surface reached a hard stop
EV_STOP_RELEASE = 5  # the surface left a hard stop
EVENT_NAMES = {EV_STICK: "stick", EV_BREAKAWAY: "breakaway", EV_STOP_HIT: "stop_hit",
               EV_STOP_RELEASE: "stop_release"}
EVENT_SOURCES = ("transmission", "lower_stop", "upper_stop")


@dataclass(frozen=True)
class ServoParams:
    """Validated parameters of the servo actuator, SI units (angles in rad)."""

    amp_gain_A_per_rad: float
    current_max_A: float
    first_stage_freq_rad_s: float
    first_stage_damping: float
    flapper_gain_m_per_A: float
    flapper_travel_m: float
    spool_velocity_gain_per_s: float
    spool_per_current_m_per_A: float
    spool_travel_m: float
    pressure_gain_Pa_per_m: float
    pressure_flow_Pa_s_per_m3: float
    leakage_m3_per_s_Pa: float
    displacement_m3_per_rad: float
    inertia_kg_m2: float
    viscous_N_m_s_per_rad: float
    friction_load_independent_N_m: float
    efficiency_opposing: float
    efficiency_aiding: float
    static_to_dynamic: float
    travel_min_rad: float
    travel_max_rad: float
    internal_step_s: float = 1.0e-5
    supply_nominal_MPa: float = 26.0

    def validate(self, where=None) -> None:
        """Raise ValueError (or the reader's ConfigError, when ``where`` is given) on bad values."""
        def bad(key, problem):
            if where is not None:
                raise where(key, problem)
            raise ValueError(f"{key}: {problem}")

        if not (0.0 < self.efficiency_opposing <= 1.0):
            bad("efficiency_opposing", f"must lie in (0, 1] so that the motor can drive the load, "
                f"got {self.efficiency_opposing}")
        if not (-10.0 <= self.efficiency_aiding <= 1.0):
            bad("efficiency_aiding", f"must lie in [-10, 1] (> 0 reversible, <= 0 irreversible), "
                f"got {self.efficiency_aiding}")
        if not self.static_to_dynamic >= 1.0:
            bad("static_to_dynamic_ratio", f"must be >= 1, got {self.static_to_dynamic}")
        if not self.travel_min_rad < self.travel_max_rad:
            bad("travel_max_deg", "must be greater than travel_min_deg")
        if not (1e-7 <= self.internal_step_s <= 1e-3):
            bad("internal_step_s", f"must lie in [1e-7, 1e-3] s, got {self.internal_step_s}")
        # the explicit first stage needs wF h well inside its stability limit
        if self.first_stage_freq_rad_s * self.internal_step_s > 0.5:
            bad("internal_step_s", f"too long for the first stage: 2 pi f h = "
                f"{self.first_stage_freq_rad_s * self.internal_step_s:.3g} must be <= 0.5")

    @property
    def reversible(self) -> bool:
        return self.efficiency_aiding > 0.0

    @staticmethod
    def from_config(cfg: ConfigReader) -> "ServoParams":
        c = cfg.sub("controller")
        amp = c.number("gain_A_per_rad", positive=True)
        imax = c.number("current_limit_A", positive=True)
        c.reject_unknown()
        v = cfg.sub("servovalve")
        p = dict(
            first_stage_freq_rad_s=2.0 * math.pi * v.number("first_stage_frequency_Hz", positive=True),
            first_stage_damping=v.number("first_stage_damping", positive=True),
            flapper_gain_m_per_A=v.number("flapper_gain_m_per_A", positive=True),
            flapper_travel_m=v.number("flapper_travel_m", positive=True),
            spool_velocity_gain_per_s=v.number("spool_velocity_gain_per_s", positive=True),
            spool_per_current_m_per_A=v.number("spool_per_current_m_per_A", positive=True),
            spool_travel_m=v.number("spool_travel_m", positive=True),
            pressure_gain_Pa_per_m=v.number("pressure_gain_Pa_per_m", positive=True),
            pressure_flow_Pa_s_per_m3=v.number("pressure_flow_coefficient_Pa_s_per_m3", positive=True),
            leakage_m3_per_s_Pa=v.number("leakage_m3_per_s_per_Pa", nonnegative=True),
        )
        v.reject_unknown()
        m = cfg.sub("motor")
        dis = m.number("displacement_m3_per_rad", positive=True)
        m.reject_unknown()
        t = cfg.sub("transmission")
        tr = dict(
            inertia_kg_m2=t.number("inertia_kg_m2", positive=True),
            viscous_N_m_s_per_rad=t.number("viscous_N_m_s_per_rad", nonnegative=True),
            friction_load_independent_N_m=t.number("friction_load_independent_N_m", nonnegative=True),
            efficiency_opposing=t.number("efficiency_opposing"),
            efficiency_aiding=t.number("efficiency_aiding"),
            static_to_dynamic=t.number("static_to_dynamic_ratio"),
            travel_min_rad=t.number("travel_min_deg") * DEG,
            travel_max_rad=t.number("travel_max_deg") * DEG,
        )
        n = cfg.sub("numerics", required=False)
        h = n.number("internal_step_s", 1.0e-5, positive=True)
        n.reject_unknown()
        s = cfg.sub("supply", required=False)
        psr = s.number("nominal_MPa", 26.0, positive=True)
        s.reject_unknown()
        params = ServoParams(amp_gain_A_per_rad=amp, current_max_A=imax, displacement_m3_per_rad=dis,
                             internal_step_s=h, supply_nominal_MPa=psr, **p, **tr)

        def where(key, problem):
            sub = n if key == "internal_step_s" else t
            return sub.error(key, problem)

        params.validate(where)
        t.reject_unknown()
        return params


def _signals(p: ServoParams):
    lo_deg = p.travel_min_rad / DEG
    hi_deg = p.travel_max_rad / DEG
    span = hi_deg - lo_deg
    inputs = (
        Signal("position_command", "deg", lo_deg - span, hi_deg + span, 0.0,
               "commanded surface position Com (beyond the stops is allowed: the stops hold)"),
        Signal("supply_pressure", "MPa", 0.0, 40.0, p.supply_nominal_MPa,
               "differential supply-return pressure PSR"),
        Signal("load_torque", "N m", -1.0e6, 1.0e6, 0.0,
               "external load T_LD on the surface; positive opposes deploying (positive motion)"),
    )
    outputs = (
        Signal("position", "deg", lo_deg, hi_deg, 0.0, "surface position XJ"),
        Signal("rate", "deg/s", -1.0e4, 1.0e4, 0.0, "surface rate DXJ"),
        Signal("position_error", "deg", -2 * span, 2 * span, 0.0, "Com - XJ"),
        Signal("current", "mA", -1.0e3 * p.current_max_A, 1.0e3 * p.current_max_A, 0.0,
               "servovalve current Cor"),
        Signal("flapper_position", "um", -1.0e6 * p.flapper_travel_m, 1.0e6 * p.flapper_travel_m, 0.0,
               "first-stage flapper position XF"),
        Signal("spool_position", "um", -1.0e6 * p.spool_travel_m, 1.0e6 * p.spool_travel_m, 0.0,
               "second-stage spool position XS"),
        Signal("load_pressure", "MPa", -1.0e3, 1.0e3, 0.0, "differential pressure P12 across the motor"),
        Signal("motor_torque", "N m", -1.0e7, 1.0e7, 0.0, "hydraulic motor torque T_M = Dis * P12"),
        Signal("friction_torque", "N m", -1.0e7, 1.0e7, 0.0,
               "dry friction torque T_FR (subtracted from the active torque)"),
        Signal("stop_torque", "N m", -1.0e7, 1.0e7, 0.0,
               "torque the hard stop carries (positive: pushed into the upper stop)"),
        Signal("stuck", "-", 0, 1, 0, "1 while the surface is at rest", integer=True),
        Signal("at_stop", "-", -1, 1, 0, "-1 on the lower stop, +1 on the upper stop, 0 between", integer=True),
        Signal("position_command_applied", "deg", lo_deg - span, hi_deg + span, 0.0,
               "position command in effect at the end of the step"),
        Signal("supply_pressure_applied", "MPa", 0.0, 40.0, 0.0, "supply pressure in effect at the end of the step"),
        Signal("load_torque_applied", "N m", -1.0e6, 1.0e6, 0.0, "load torque in effect at the end of the step"),
        Signal("status", "-", 0, 2 ** 16, 0, "step status bits (bad_input 32, nonfinite_rolled_back 16)",
               integer=True),
    )
    return inputs, outputs


# ==========================================================================
# compiled step
# ==========================================================================
@njit(**JIT)
def _log(mi, df, di, t, source, kind):
    E = mi[L.H_EVCAP]
    oc = mi[L.DI_COUNTERS]
    k = di[oc + L.CNT_EVENTS] % E
    df[mi[L.DF_EV_TIME] + k] = t
    di[mi[L.DI_EV_ROW] + k] = source
    di[mi[L.DI_EV_KIND] + k] = kind
    di[oc + L.CNT_EVENTS] += 1


@njit(**JIT)
def _outputs(mf, mi, df, di, h, status):
    """Write the plant outputs from the state, h s after the step start.  Called in the real-time loop."""
    op = mi[L.DF_PLANT]
    oy = op + 2 * N_IN
    os_ = oy + N_OUT
    opi = mi[L.DI_PLANT]
    oyc = mi[L.DF_Y]
    w = df[oyc]
    x = df[oyc + 1]
    com = df[op + IN_COMMAND] + df[op + N_IN + IN_COMMAND] * h
    df[oy + OUT_COMMAND_IN] = com
    df[oy + OUT_SUPPLY_IN] = max(df[op + IN_SUPPLY] + df[op + N_IN + IN_SUPPLY] * h, 0.0)
    df[oy + OUT_LOAD_IN] = df[op + IN_LOAD] + df[op + N_IN + IN_LOAD] * h
    df[oy + OUT_POSITION] = x / DEG
    df[oy + OUT_RATE] = w / DEG
    df[oy + OUT_ERROR] = com - x / DEG
    df[oy + OUT_CURRENT] = df[os_ + S_COR] * 1.0e3
    df[oy + OUT_FLAPPER] = df[os_ + S_XF] * 1.0e6
    df[oy + OUT_SPOOL] = df[os_ + S_XS] * 1.0e6
    df[oy + OUT_PRESSURE] = df[os_ + S_P12] / MPA
    df[oy + OUT_MOTOR_TQ] = df[os_ + S_TM]
    df[oy + OUT_FRICTION_TQ] = df[os_ + S_TFR]
    df[oy + OUT_STOP_TQ] = df[os_ + S_TSTOP]
    df[oy + OUT_STUCK] = float(di[opi + DI_STUCK])
    df[oy + OUT_AT_STOP] = float(di[opi + DI_AT_STOP])
    df[oy + OUT_STATUS] = float(status)


@njit(**JIT)
def _substep(mf, mi, df, di, h, t_end, com, psr, tld):
    """One fixed sub-step of the actuator (Table 1 of seed 002 plus the servovalve).  Called in the real-time loop.

    com in rad, psr in Pa, tld in N m.  Logs stick / breakaway / stop events at t_end.
    """
    opf = mi[L.MF_PLANT]
    op = mi[L.DF_PLANT]
    os_ = op + 2 * N_IN + N_OUT
    opi = mi[L.DI_PLANT]
    oyc = mi[L.DF_Y]
    w = df[oyc]  # DXJ, rad/s
    x = df[oyc + 1]  # XJ, rad
    # -- controller
    cor = mf[opf + PF_AMP_GAIN] * (com - x)
    imax = mf[opf + PF_CURRENT_MAX]
    if cor > imax:
        cor = imax
    elif cor < -imax:
        cor = -imax
    # -- first stage: semi-implicit Euler, flapper stops inelastic
    xf = df[os_ + S_XF]
    vf = df[os_ + S_DXF]
    xs = df[os_ + S_XS]
    wf = mf[opf + PF_WF]
    inet = cor - xs / mf[opf + PF_KXS]
    af = wf * wf * (mf[opf + PF_GF] * inet - xf) - 2.0 * mf[opf + PF_ZF] * wf * vf
    vf += h * af
    xf += h * vf
    xfm = mf[opf + PF_XF_MAX]
    if xf >= xfm:
        xf = xfm
        if vf > 0.0:
            vf = 0.0
    elif xf <= -xfm:
        xf = -xfm
        if vf < 0.0:
            vf = 0.0
    # -- second stage: spool integrates the flapper, spool stops
    xs += h * mf[opf + PF_GS] * xf
    xsm = mf[opf + PF_XS_MAX]
    if xs > xsm:
        xs = xsm
    elif xs < -xsm:
        xs = -xsm
    df[os_ + S_XF] = xf
    df[os_ + S_DXF] = vf
    df[os_ + S_XS] = xs
    df[os_ + S_COR] = cor
    # -- pressure: saturated pressure gain minus the loss of the total flow
    ps = mf[opf + PF_GP] * xs
    if ps > psr:
        ps = psr
    elif ps < -psr:
        ps = -psr
    rq = mf[opf + PF_RQ]
    dis = mf[opf + PF_DIS]
    den = 1.0 + rq * mf[opf + PF_CLEAK]
    d_valve = dis * dis * rq / den  # velocity-proportional torque of the valve loss, N m s/rad
    d_tot = d_valve + mf[mi[L.MF_DRAG]]
    t_drive = dis * ps / den - tld  # active torque without the velocity-proportional part
    act = t_drive - d_tot * w  # Table 1, statement 1
    # -- friction (statements 2-10)
    a_tld = abs(tld)
    tfr0 = mf[opf + PF_TFR0]
    fdo = tfr0 + (1.0 / mf[opf + PF_ETO] - 1.0) * a_tld
    fda = tfr0 + (1.0 - mf[opf + PF_ETA]) * a_tld
    fsd = mf[opf + PF_FSD]
    jm = mf[mi[L.MF_INERTIA]]
    if w != 0.0:
        tfr = fdo if w > 0.0 else -fdo
        if w * tld < 0.0:
            tfr = fda if w > 0.0 else -fda
        # statements 11-13 with the velocity-proportional torque implicit
        w_new = (jm * w + h * (t_drive - tfr)) / (jm + h * d_tot)
    else:
        if tld >= 0.0:
            lo = -fsd * fda
            hi = fsd * fdo
        else:
            lo = -fsd * fdo
            hi = fsd * fda
        tfr = act
        if tfr < lo:
            tfr = lo
        elif tfr > hi:
            tfr = hi
        w_new = h * (act - tfr) / (jm + h * d_tot)
    # statement 14: a sign change inside the sub-step stops the element
    if w * w_new < 0.0:
        w_new = 0.0
    # statements 15-17: trapezoidal position, hard stops (inelastic), departure only away from a stop
    x_new = x + 0.5 * (w + w_new) * h
    x_lo = mf[opf + PF_XJ_MIN]
    x_hi = mf[opf + PF_XJ_MAX]
    stop = 0
    if x_new <= x_lo:
        x_new = x_lo
        stop = -1
        if w_new < 0.0:
            w_new = 0.0
    elif x_new >= x_hi:
        x_new = x_hi
        stop = 1
        if w_new > 0.0:
            w_new = 0.0
    # torque the stop carries: the excess of the active torque over friction pushing into it
    t_stop = 0.0
    if stop != 0 and w_new == 0.0:
        net = act - tfr
        if stop * net > 0.0:
            t_stop = net
    df[oyc] = w_new
    df[oyc + 1] = x_new
    df[os_ + S_P12] = (ps - rq * dis * w_new) / den
    df[os_ + S_TM] = dis * df[os_ + S_P12]
    df[os_ + S_TFR] = tfr
    df[os_ + S_TSTOP] = t_stop
    # -- events
    stuck_new = 1 if w_new == 0.0 else 0
    stuck_old = di[opi + DI_STUCK]
    if stuck_new != stuck_old:
        _log(mi, df, di, t_end, 0, EV_STICK if stuck_new == 1 else EV_BREAKAWAY)
        di[opi + DI_STUCK] = stuck_new
    old_stop = di[opi + DI_AT_STOP]
    if stop != old_stop:
        if old_stop != 0:
            _log(mi, df, di, t_end, 1 if old_stop < 0 else 2, EV_STOP_RELEASE)
        if stop != 0:
            _log(mi, df, di, t_end, 1 if stop < 0 else 2, EV_STOP_HIT)
        di[opi + DI_AT_STOP] = stop


@njit(**JIT)
def _servo_step(mf, mi, df, di, dt):
    """Implementation of servo_step on owner-less buffers.  Called in the real-time loop."""
    op = mi[L.DF_PLANT]
    opf = mi[L.MF_PLANT]
    ot = mi[L.DF_TIME]
    ofl = mi[L.DI_FLAGS]
    ok = dt > 0.0 and math.isfinite(dt)
    for k in range(2 * N_IN):
        ok = ok and math.isfinite(df[op + k])
    if not ok:
        di[ofl + L.FLAG_STATUS] = L.ST_BAD_INPUT
        df[op + 2 * N_IN + OUT_STATUS] = float(L.ST_BAD_INPUT)
        return L.ST_BAD_INPUT
    nsub = int(math.ceil(dt / mf[opf + PF_H_MAX] - 1e-9))
    if nsub < 1:
        nsub = 1
    h = dt / nsub
    t0 = df[ot]
    com0 = df[op + IN_COMMAND]
    com_r = df[op + N_IN + IN_COMMAND]
    psr0 = df[op + IN_SUPPLY]
    psr_r = df[op + N_IN + IN_SUPPLY]
    tld0 = df[op + IN_LOAD]
    tld_r = df[op + N_IN + IN_LOAD]
    # roll-back copy of the integrated state
    oyc = mi[L.DF_Y]
    os_ = op + 2 * N_IN + N_OUT
    w0 = df[oyc]
    x0 = df[oyc + 1]
    xf0 = df[os_ + S_XF]
    vf0 = df[os_ + S_DXF]
    xs0 = df[os_ + S_XS]
    for k in range(nsub):
        s = k * h  # inputs are sampled at the sub-step start (explicit, as in Table 1)
        com = (com0 + com_r * s) * DEG
        psr = (psr0 + psr_r * s) * MPA
        if psr < 0.0:
            psr = 0.0
        tld = tld0 + tld_r * s
        _substep(mf, mi, df, di, h, t0 + (k + 1) * h, com, psr, tld)
    st = L.ST_OK
    if not (math.isfinite(df[oyc]) and math.isfinite(df[oyc + 1]) and math.isfinite(df[os_ + S_XS])
            and math.isfinite(df[os_ + S_XF]) and math.isfinite(df[os_ + S_DXF])):
        df[oyc] = w0
        df[oyc + 1] = x0
        df[os_ + S_XF] = xf0
        df[os_ + S_DXF] = vf0
        df[os_ + S_XS] = xs0
        di[mi[L.DI_COUNTERS] + L.CNT_ROLLBACKS] += 1
        st = L.ST_NONFINITE
    else:
        df[ot] = t0 + dt
    di[mi[L.DI_COUNTERS] + L.CNT_STEPS] += 1
    di[ofl + L.FLAG_STATUS] = st
    _outputs(mf, mi, df, di, dt if st == L.ST_OK else 0.0, st)
    return st


@njit("int64(" + BUFS + ", float64)", **JIT)
def servo_step(mf, mi, df, di, dt):
    """Map the inputs, take the sub-steps of one plant step, write the outputs.  Called in the real-time loop.

    Non-finite inputs or dt leave the state untouched (status bad_input); a
    step that produced a non-finite state is rolled back (nonfinite_rolled_back).
    """
    return _servo_step(_raw_f(mf), _raw_i(mi), _raw_f(df), _raw_i(di), dt)


@njit("int64(" + BUFS + ")", **JIT)
def servo_refresh(mf, mi, df, di):
    """Recompute the outputs from the state without stepping (after a reset)."""
    rmf, rmi, rdf, rdi = _raw_f(mf), _raw_i(mi), _raw_f(df), _raw_i(di)
    _outputs(rmf, rmi, rdf, rdi, 0.0, 0)
    return 0


# ==========================================================================
# plant
# ==========================================================================
class ServoActuatorPlant(Plant):
    """Electro-hydraulic flap servo with load-dependent dry friction and hard stops (Borello & Dalla Vedova)."""

    kind = "servo"
    description = ("Electro-hydraulic position servo: proportional control, two-stage servovalve, "
                   "load-dependent dry friction with efficiencies, hard stops (Borello & Dalla Vedova)")

    def __init__(self, params: ServoParams, source: str = ""):
        params.validate()
        self.params = params
        # the surface is the one 'shaft' of a trivial core spec: the step keeps its rate and
        # position in the core's omega/theta, so core views and state copies stay meaningful
        spec = CoreSpec(shaft_names=("surface",), inertia=(params.inertia_kg_m2,),
                        drag=(params.viscous_N_m_s_per_rad,), rows=(), settings=Settings(event_capacity=4096))
        inputs, outputs = _signals(params)
        super().__init__(spec, inputs, outputs, servo_step, plant_nf=PF_LEN, plant_nstate=N_STATE,
                         plant_ndi=N_DI, source=source)
        p = params
        pf = self.core.plant_f
        pf[PF_AMP_GAIN] = p.amp_gain_A_per_rad
        pf[PF_CURRENT_MAX] = p.current_max_A
        pf[PF_WF] = p.first_stage_freq_rad_s
        pf[PF_ZF] = p.first_stage_damping
        pf[PF_GF] = p.flapper_gain_m_per_A
        pf[PF_XF_MAX] = p.flapper_travel_m
        pf[PF_GS] = p.spool_velocity_gain_per_s
        pf[PF_KXS] = p.spool_per_current_m_per_A
        pf[PF_XS_MAX] = p.spool_travel_m
        pf[PF_GP] = p.pressure_gain_Pa_per_m
        pf[PF_RQ] = p.pressure_flow_Pa_s_per_m3
        pf[PF_CLEAK] = p.leakage_m3_per_s_Pa
        pf[PF_DIS] = p.displacement_m3_per_rad
        pf[PF_TFR0] = p.friction_load_independent_N_m
        pf[PF_ETO] = p.efficiency_opposing
        pf[PF_ETA] = p.efficiency_aiding
        pf[PF_FSD] = p.static_to_dynamic
        pf[PF_XJ_MIN] = p.travel_min_rad
        pf[PF_XJ_MAX] = p.travel_max_rad
        pf[PF_H_MAX] = p.internal_step_s
        self.reset()

    @classmethod
    def from_config(cls, cfg: ConfigReader) -> "ServoActuatorPlant":
        return cls(ServoParams.from_config(cfg), source=cfg.source)

    def tunable_parameters(self) -> list:
        """Friction and controller parameters a running server may change (read afresh every sub-step).

        The viscous coefficient C_M is the core's drag of shaft 'surface' (``shaft.surface.drag``).
        """
        from server.params import Param

        pf = self.core.plant_f

        def slot(idx):
            return (lambda: float(pf[idx])), (lambda v: pf.__setitem__(idx, v))

        out = []
        for name, unit, lo, hi, doc, idx in (
                ("friction.efficiency_opposing", "-", 1e-3, 1.0, "EtO, efficiency with an opposing load (eq. 3)",
                 PF_ETO),
                ("friction.efficiency_aiding", "-", -10.0, 1.0,
                 "EtA, efficiency with an aiding load (eq. 4); <= 0 irreversible", PF_ETA),
                ("friction.static_to_dynamic_ratio", "-", 1.0, 10.0, "FSD, static / dynamic friction", PF_FSD),
                ("friction.load_independent", "N m", 0.0, 1.0e7, "T_FR0, load-independent friction torque",
                 PF_TFR0),
                ("controller.gain", "A/rad", 0.0, 100.0, "servo-amplifier gain (proportional law)", PF_AMP_GAIN)):
            get, set_ = slot(idx)
            out.append(Param(name, unit, lo, hi, doc, get, set_))
        return out

    def _bind_views(self) -> None:
        super()._bind_views()
        self.state_view = self.plant_state[:N_STATE]
        self.int_state = self.core.plant_di

    def _initial_state(self) -> None:
        """At rest at the commanded position (clamped to the stops), servovalve settled at null."""
        p = self.params
        x = min(max(float(self.u[IN_COMMAND]) * DEG, p.travel_min_rad), p.travel_max_rad)
        self.core.theta[0] = x
        self.core.omega[0] = 0.0
        self.plant_state[:] = 0.0
        self.int_state[DI_STUCK] = 1
        self.int_state[DI_AT_STOP] = -1 if x <= p.travel_min_rad else (1 if x >= p.travel_max_rad else 0)

    def _start_fn(self) -> int:
        servo_refresh(self.mf, self.mi, self.df, self.di)
        return 0

    def new_events(self) -> list[dict]:
        """Stick / breakaway / hard-stop events since the last call (not for the real-time tick)."""
        out = []
        for t, r, k in self.core.new_events():
            src = EVENT_SOURCES[r] if 0 <= r < len(EVENT_SOURCES) else str(r)
            # 'clutch' names the element for tools written for the clutch plants
            out.append(dict(time=t, clutch=src, source=src, row=r, type=EVENT_NAMES.get(k, str(k))))
        return out

    def describe(self) -> dict:
        d = super().describe()
        d["transmission"] = "reversible" if self.params.reversible else "irreversible"
        return d

    def plot_figures(self, trace, out_dir, title: str = "") -> list:
        """PNG figures of an offline run in the paper's style (seed 002 figs. 6-17); see servo_plots."""
        from server.plots.servo import plot

        return plot(self, trace, out_dir, title)
