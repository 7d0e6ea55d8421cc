"""Electro-hydraulic position servo with load-dependent dry friction and hard stops.

The flap actuator of Borello & Dalla Vedova, "A dry friction model and
robust computational algorithm for reversible or irreversible motion
transmissions", sections 3-6: a
proportional position controller drives a two-stage servovalve, the valve
feeds a hydraulic motor, and the motor moves a control surface through a
transmission whose dry friction depends on the load through two
efficiencies.  The surface travels between two mechanical hard stops.  One
degree of freedom; it does not use the shaft/row friction core but its own
fixed-step algorithm (the paper's Table 1), compiled into one step function
on buffers of its own (a :class:`~plant_models.contract.compiled.CompiledPlant`).

Why one file of over 600 lines: the parameters, the compiled sub-step of the
paper's Table 1 (friction with its two efficiencies, the hard stops and their
events) and the plant class that lays out its buffers share one buffer
layout; split, every part would import the others' offsets.

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

Why this file is longer than 600 lines and ``_substep`` longer than 80: the
servo is the one plant with its own compiled integrator (the paper's Table 1
fixed step with its dry-friction cases and hard stops), and ``_substep`` is
that algorithm's one sub-step, case by case in the paper's order; cut into
pieces it would no longer read against the paper, and each piece would be a
numba call with a dozen scalar arguments.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numba import njit

from ..contract.vocabulary import (CNT_EVENTS, CNT_ROLLBACKS, CNT_STEPS, EV_BREAKAWAY, EV_STICK, N_COUNTERS,
                                   SHARED_EVENTS, SHARED_STATUS, ST_BAD_INPUT, ST_NONFINITE, ST_OK)
from ..core.api import BUFS, JIT, raw_f, raw_i
from ..plant import CompiledPlant, EventRing, Kernel, Param, Ports

DEG = math.pi / 180.0  # rad per degree
MPA = 1.0e6  # Pa per MPa

# --------------------------------------------------------------------------
# the model buffer mf: float parameters (the int model buffer mi is unused)
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
PF_INERTIA = 13  # inertia of motor, transmission and surface J_M, kg m^2
PF_VISCOUS = 14  # viscous coefficient C_M, N m s/rad
PF_TFR0 = 15  # load-independent friction torque T_FR0, N m
PF_ETO = 16  # efficiency with opposing load EtO, -
PF_ETA = 17  # efficiency with aiding load EtA, -
PF_FSD = 18  # static-to-dynamic friction ratio FSD, -
PF_XJ_MIN = 19  # lower hard stop, rad
PF_XJ_MAX = 20  # upper hard stop, rad
# -- numerics
PF_H_MAX = 21  # longest internal sub-step, s
PF_LEN = 22


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


# --------------------------------------------------------------------------
# ports
# --------------------------------------------------------------------------
def _travel_deg(p: ServoParams) -> tuple[float, float, float]:
    """Lower and upper hard stop and their distance, deg."""
    lo_deg = p.travel_min_rad / DEG
    hi_deg = p.travel_max_rad / DEG
    return lo_deg, hi_deg, hi_deg - lo_deg


def _command_lo(p: ServoParams) -> float:
    lo, hi, span = _travel_deg(p)
    return lo - span


def _command_hi(p: ServoParams) -> float:
    lo, hi, span = _travel_deg(p)
    return hi + span


INPUTS = Ports()
IN_COMMAND = INPUTS.add("position_command", "deg", _command_lo, _command_hi, 0.0,
                        "commanded surface position Com (beyond the stops is allowed: the stops hold)")
IN_SUPPLY = INPUTS.add("supply_pressure", "MPa", 0.0, 40.0, lambda p: p.supply_nominal_MPa,
                       "differential supply-return pressure PSR")
IN_LOAD = INPUTS.add("load_torque", "N m", -1.0e6, 1.0e6, 0.0,
                     "external load T_LD on the surface; positive opposes deploying (positive motion)")
N_IN = len(INPUTS)

OUTPUTS = Ports()
OUT_POSITION = OUTPUTS.add("position", "deg", lambda p: _travel_deg(p)[0], lambda p: _travel_deg(p)[1], 0.0,
                           "surface position XJ")
OUT_RATE = OUTPUTS.add("rate", "deg/s", -1.0e4, 1.0e4, 0.0, "surface rate DXJ")
OUT_ERROR = OUTPUTS.add("position_error", "deg", lambda p: -2 * _travel_deg(p)[2], lambda p: 2 * _travel_deg(p)[2],
                        0.0, "Com - XJ")
OUT_CURRENT = OUTPUTS.add("current", "mA", lambda p: -1.0e3 * p.current_max_A, lambda p: 1.0e3 * p.current_max_A,
                          0.0, "servovalve current Cor")
OUT_FLAPPER = OUTPUTS.add("flapper_position", "um", lambda p: -1.0e6 * p.flapper_travel_m,
                          lambda p: 1.0e6 * p.flapper_travel_m, 0.0, "first-stage flapper position XF")
OUT_SPOOL = OUTPUTS.add("spool_position", "um", lambda p: -1.0e6 * p.spool_travel_m,
                        lambda p: 1.0e6 * p.spool_travel_m, 0.0, "second-stage spool position XS")
OUT_PRESSURE = OUTPUTS.add("load_pressure", "MPa", -1.0e3, 1.0e3, 0.0, "differential pressure P12 across the motor")
OUT_MOTOR_TQ = OUTPUTS.add("motor_torque", "N m", -1.0e7, 1.0e7, 0.0, "hydraulic motor torque T_M = Dis * P12")
OUT_FRICTION_TQ = OUTPUTS.add("friction_torque", "N m", -1.0e7, 1.0e7, 0.0,
                              "dry friction torque T_FR (subtracted from the active torque)")
OUT_STOP_TQ = OUTPUTS.add("stop_torque", "N m", -1.0e7, 1.0e7, 0.0,
                          "torque the hard stop carries (positive: pushed into the upper stop)")
OUT_STUCK = OUTPUTS.add("stuck", "-", 0, 1, 0, "1 while the surface is at rest", integer=True)
OUT_AT_STOP = OUTPUTS.add("at_stop", "-", -1, 1, 0, "-1 on the lower stop, +1 on the upper stop, 0 between",
                          integer=True)
OUT_COMMAND_IN = OUTPUTS.add("position_command_applied", "deg", _command_lo, _command_hi, 0.0,
                             "position command in effect at the end of the step")
OUT_SUPPLY_IN = OUTPUTS.add("supply_pressure_applied", "MPa", 0.0, 40.0, 0.0,
                            "supply pressure in effect at the end of the step")
OUT_LOAD_IN = OUTPUTS.add("load_torque_applied", "N m", -1.0e6, 1.0e6, 0.0,
                          "load torque in effect at the end of the step")
OUT_STATUS = OUTPUTS.add("status", "-", 0, 2 ** 16, 0, "step status bits (bad_input 32, nonfinite_rolled_back 16)",
                         integer=True)
N_OUT = len(OUTPUTS)

# --------------------------------------------------------------------------
# the data buffers: df (float) and di (int), laid out once, fixed
# --------------------------------------------------------------------------
EVENT_CAPACITY = 4096  # events kept in the ring log until read
DF_TIME = 0  # simulated time, s
DF_U = 1  # [N_IN] inputs, then [N_IN] their first-order-hold rates (per s)
DF_Y = DF_U + 2 * N_IN  # [N_OUT] outputs
DF_STATE = DF_Y + N_OUT  # [N_STATE] state, see S_*
S_W = 0  # surface rate DXJ, rad/s
S_X = 1  # surface position XJ, rad
S_XF = 2  # flapper position, m
S_DXF = 3  # flapper velocity, m/s
S_XS = 4  # spool position, m
S_COR = 5  # last current, A
S_P12 = 6  # last load pressure, Pa
S_TM = 7  # last motor torque, N m
S_TFR = 8  # last friction torque, N m
S_TSTOP = 9  # last hard-stop torque, N m
N_STATE = 10
DF_EV_TIME = DF_STATE + N_STATE  # [EVENT_CAPACITY] event times, s
DF_LEN = DF_EV_TIME + EVENT_CAPACITY

DI_COUNTERS = 0  # [N_COUNTERS] the contract's counters (contract.vocabulary.CNT_*): steps, events, ..., rollbacks
DI_STATUS = DI_COUNTERS + N_COUNTERS  # status word of the last step
DI_AT_STOP = DI_STATUS + 1  # -1 / 0 / +1
DI_STUCK = DI_STATUS + 2  # 1 while at rest
DI_EV_SOURCE = DI_STATUS + 3  # [EVENT_CAPACITY] event source, see EVENT_SOURCES
DI_EV_KIND = DI_EV_SOURCE + EVENT_CAPACITY  # [EVENT_CAPACITY] event kind, see EVENT_NAMES
DI_LEN = DI_EV_KIND + EVENT_CAPACITY

# event kinds (source: 0 = transmission friction, 1 = lower stop, 2 = upper stop)
EVENTS = SHARED_EVENTS.extend("the servo plant")
# EV_STICK: the moving surface came to rest (friction); EV_BREAKAWAY: the resting surface started to move
EV_STOP_HIT = EVENTS.allocate("stop_hit", "the surface reached a hard stop")  # 4
EV_STOP_RELEASE = EVENTS.allocate("stop_release", "the surface left a hard stop")  # 5
EVENT_NAMES = EVENTS.names()
EVENT_SOURCES = ("transmission", "lower_stop", "upper_stop")


# ==========================================================================
# compiled step
# ==========================================================================
@njit(**JIT)
def _log(df, di, t, source, kind):
    """Append an event to the ring log.  Called in the real-time loop."""
    k = di[DI_COUNTERS + CNT_EVENTS] % EVENT_CAPACITY
    df[DF_EV_TIME + k] = t
    di[DI_EV_SOURCE + k] = source
    di[DI_EV_KIND + k] = kind
    di[DI_COUNTERS + CNT_EVENTS] += 1


@njit(**JIT)
def _outputs(mf, mi, df, di, h, status):
    """Write the plant outputs from the state, h s after the step start.  Called in the real-time loop."""
    oy = DF_Y
    os_ = DF_STATE
    w = df[os_ + S_W]
    x = df[os_ + S_X]
    com = df[DF_U + IN_COMMAND] + df[DF_U + N_IN + IN_COMMAND] * h
    df[oy + OUT_COMMAND_IN] = com
    df[oy + OUT_SUPPLY_IN] = max(df[DF_U + IN_SUPPLY] + df[DF_U + N_IN + IN_SUPPLY] * h, 0.0)
    df[oy + OUT_LOAD_IN] = df[DF_U + IN_LOAD] + df[DF_U + N_IN + IN_LOAD] * h
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
    df[oy + OUT_STUCK] = float(di[DI_STUCK])
    df[oy + OUT_AT_STOP] = float(di[DI_AT_STOP])
    df[oy + OUT_STATUS] = float(status)


@njit(**JIT)
def _log_changes(df, di, t_end, stuck_new, stop):
    """Log the sticks, breakaways and hard-stop hits and releases of a sub-step ending at t_end.

    Called in the real-time loop.
    """
    stuck_old = di[DI_STUCK]
    if stuck_new != stuck_old:
        _log(df, di, t_end, 0, EV_STICK if stuck_new == 1 else EV_BREAKAWAY)
        di[DI_STUCK] = stuck_new
    old_stop = di[DI_AT_STOP]
    if stop != old_stop:
        if old_stop != 0:
            _log(df, di, t_end, 1 if old_stop < 0 else 2, EV_STOP_RELEASE)
        if stop != 0:
            _log(df, di, t_end, 1 if stop < 0 else 2, EV_STOP_HIT)
        di[DI_AT_STOP] = stop


@njit(**JIT)
def _substep(mf, mi, df, di, h, t_end, com, psr, tld):
    """One fixed sub-step of the actuator (the paper's Table 1 plus the servovalve).  Called in the real-time loop.

    com in rad, psr in Pa, tld in N m.  Logs stick / breakaway / stop events at t_end.
    """
    w = df[DF_STATE + S_W]  # DXJ, rad/s
    x = df[DF_STATE + S_X]  # XJ, rad
    # -- controller
    cor = mf[PF_AMP_GAIN] * (com - x)
    imax = mf[PF_CURRENT_MAX]
    if cor > imax:
        cor = imax
    elif cor < -imax:
        cor = -imax
    # -- first stage: semi-implicit Euler, flapper stops inelastic
    xf = df[DF_STATE + S_XF]
    vf = df[DF_STATE + S_DXF]
    xs = df[DF_STATE + S_XS]
    wf = mf[PF_WF]
    inet = cor - xs / mf[PF_KXS]
    af = wf * wf * (mf[PF_GF] * inet - xf) - 2.0 * mf[PF_ZF] * wf * vf
    vf += h * af
    xf += h * vf
    xfm = mf[PF_XF_MAX]
    if xf >= xfm:
        xf = xfm
        if vf > 0.0:
            vf = 0.0
    elif xf <= -xfm:
        xf = -xfm
        if vf < 0.0:
            vf = 0.0
    # -- second stage: spool integrates the flapper, spool stops
    xs += h * mf[PF_GS] * xf
    xsm = mf[PF_XS_MAX]
    if xs > xsm:
        xs = xsm
    elif xs < -xsm:
        xs = -xsm
    df[DF_STATE + S_XF] = xf
    df[DF_STATE + S_DXF] = vf
    df[DF_STATE + S_XS] = xs
    df[DF_STATE + S_COR] = cor
    # -- pressure: saturated pressure gain minus the loss of the total flow
    ps = mf[PF_GP] * xs
    if ps > psr:
        ps = psr
    elif ps < -psr:
        ps = -psr
    rq = mf[PF_RQ]
    dis = mf[PF_DIS]
    den = 1.0 + rq * mf[PF_CLEAK]
    d_valve = dis * dis * rq / den  # velocity-proportional torque of the valve loss, N m s/rad
    d_tot = d_valve + mf[PF_VISCOUS]
    t_drive = dis * ps / den - tld  # active torque without the velocity-proportional part
    act = t_drive - d_tot * w  # Table 1, statement 1
    # -- friction (statements 2-10)
    a_tld = abs(tld)
    tfr0 = mf[PF_TFR0]
    fdo = tfr0 + (1.0 / mf[PF_ETO] - 1.0) * a_tld
    fda = tfr0 + (1.0 - mf[PF_ETA]) * a_tld
    fsd = mf[PF_FSD]
    jm = mf[PF_INERTIA]
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
    x_lo = mf[PF_XJ_MIN]
    x_hi = mf[PF_XJ_MAX]
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
    df[DF_STATE + S_W] = w_new
    df[DF_STATE + S_X] = x_new
    df[DF_STATE + S_P12] = (ps - rq * dis * w_new) / den
    df[DF_STATE + S_TM] = dis * df[DF_STATE + S_P12]
    df[DF_STATE + S_TFR] = tfr
    df[DF_STATE + S_TSTOP] = t_stop
    _log_changes(df, di, t_end, 1 if w_new == 0.0 else 0, stop)


@njit(**JIT)
def _servo_step(mf, mi, df, di, dt):
    """Implementation of servo_step on raw pointers.  Called in the real-time loop."""
    ok = dt > 0.0 and math.isfinite(dt)
    for k in range(2 * N_IN):
        ok = ok and math.isfinite(df[DF_U + k])
    if not ok:
        di[DI_STATUS] = ST_BAD_INPUT
        df[DF_Y + OUT_STATUS] = float(ST_BAD_INPUT)
        return ST_BAD_INPUT
    nsub = int(math.ceil(dt / mf[PF_H_MAX] - 1e-9))
    if nsub < 1:
        nsub = 1
    h = dt / nsub
    t0 = df[DF_TIME]
    com0 = df[DF_U + IN_COMMAND]
    com_r = df[DF_U + N_IN + IN_COMMAND]
    psr0 = df[DF_U + IN_SUPPLY]
    psr_r = df[DF_U + N_IN + IN_SUPPLY]
    tld0 = df[DF_U + IN_LOAD]
    tld_r = df[DF_U + N_IN + IN_LOAD]
    # roll-back copy of the integrated state
    w0 = df[DF_STATE + S_W]
    x0 = df[DF_STATE + S_X]
    xf0 = df[DF_STATE + S_XF]
    vf0 = df[DF_STATE + S_DXF]
    xs0 = df[DF_STATE + S_XS]
    for k in range(nsub):
        s = k * h  # inputs are sampled at the sub-step start (explicit, as in Table 1)
        com = (com0 + com_r * s) * DEG
        psr = (psr0 + psr_r * s) * MPA
        if psr < 0.0:
            psr = 0.0
        tld = tld0 + tld_r * s
        _substep(mf, mi, df, di, h, t0 + (k + 1) * h, com, psr, tld)
    st = ST_OK
    if not (math.isfinite(df[DF_STATE + S_W]) and math.isfinite(df[DF_STATE + S_X])
            and math.isfinite(df[DF_STATE + S_XS]) and math.isfinite(df[DF_STATE + S_XF])
            and math.isfinite(df[DF_STATE + S_DXF])):
        df[DF_STATE + S_W] = w0
        df[DF_STATE + S_X] = x0
        df[DF_STATE + S_XF] = xf0
        df[DF_STATE + S_DXF] = vf0
        df[DF_STATE + S_XS] = xs0
        di[DI_COUNTERS + CNT_ROLLBACKS] += 1
        st = ST_NONFINITE
    else:
        df[DF_TIME] = t0 + dt
    di[DI_COUNTERS + CNT_STEPS] += 1
    di[DI_STATUS] = st
    _outputs(mf, mi, df, di, dt if st == ST_OK else 0.0, st)
    return st


@njit(**JIT)
def servo_step(mf, mi, df, di, dt):
    """Map the inputs, take the sub-steps of one plant step, write the outputs.  Called in the real-time loop.

    Non-finite inputs or dt leave the state untouched (status bad_input); a
    step that produced a non-finite state is rolled back (nonfinite_rolled_back).
    """
    return _servo_step(raw_f(mf), raw_i(mi), raw_f(df), raw_i(di), dt)


@njit(**JIT)
def servo_refresh(mf, mi, df, di):
    """Recompute the outputs from the state without stepping (at the start)."""
    _outputs(raw_f(mf), raw_i(mi), raw_f(df), raw_i(di), 0.0, 0)
    return 0


# ==========================================================================
# plant
# ==========================================================================
class ServoActuatorPlant(CompiledPlant):
    """Electro-hydraulic flap servo with load-dependent dry friction and hard stops (Borello & Dalla Vedova)."""

    kind = "servo"
    description = ("Electro-hydraulic position servo: proportional control, two-stage servovalve, "
                   "load-dependent dry friction with efficiencies, hard stops (Borello & Dalla Vedova)")
    params_type = ServoParams
    input_ports = INPUTS
    output_ports = OUTPUTS
    kernels = (Kernel("step", servo_step, "int64(" + BUFS + ", float64)"),
               Kernel("refresh", servo_refresh, "int64(" + BUFS + ")"))
    status_bits = SHARED_STATUS  # the step sets only the shared bits (bad_input, nonfinite_rolled_back)
    event_kinds = EVENTS

    def __init__(self, params: ServoParams, source: str = ""):
        params.validate()
        super().__init__(params, source)
        p = params
        mf = self.mf
        mf[PF_AMP_GAIN] = p.amp_gain_A_per_rad
        mf[PF_CURRENT_MAX] = p.current_max_A
        mf[PF_WF] = p.first_stage_freq_rad_s
        mf[PF_ZF] = p.first_stage_damping
        mf[PF_GF] = p.flapper_gain_m_per_A
        mf[PF_XF_MAX] = p.flapper_travel_m
        mf[PF_GS] = p.spool_velocity_gain_per_s
        mf[PF_KXS] = p.spool_per_current_m_per_A
        mf[PF_XS_MAX] = p.spool_travel_m
        mf[PF_GP] = p.pressure_gain_Pa_per_m
        mf[PF_RQ] = p.pressure_flow_Pa_s_per_m3
        mf[PF_CLEAK] = p.leakage_m3_per_s_Pa
        mf[PF_DIS] = p.displacement_m3_per_rad
        mf[PF_INERTIA] = p.inertia_kg_m2
        mf[PF_VISCOUS] = p.viscous_N_m_s_per_rad
        mf[PF_TFR0] = p.friction_load_independent_N_m
        mf[PF_ETO] = p.efficiency_opposing
        mf[PF_ETA] = p.efficiency_aiding
        mf[PF_FSD] = p.static_to_dynamic
        mf[PF_XJ_MIN] = p.travel_min_rad
        mf[PF_XJ_MAX] = p.travel_max_rad
        mf[PF_H_MAX] = p.internal_step_s
        self._events = EventRing(self.df, self.di, DF_EV_TIME, DI_EV_SOURCE, DI_EV_KIND,
                                 DI_COUNTERS + CNT_EVENTS, EVENT_CAPACITY)
        self.reset()

    @classmethod
    def description_of(cls, params: ServoParams, source: str = "") -> dict:
        d = super().description_of(params, source)
        d["transmission"] = "reversible" if params.reversible else "irreversible"
        return d

    # -- buffers -------------------------------------------------------------------------------------
    def _allocate(self):
        return np.zeros(PF_LEN), np.zeros(1, dtype=np.int64), np.zeros(DF_LEN), np.zeros(DI_LEN, dtype=np.int64)

    @property
    def input_offset(self) -> int:
        return DF_U

    def _clear(self) -> None:
        self.df[:] = 0.0
        self.di[:] = 0
        self._events.clear()

    # -- life cycle ----------------------------------------------------------------------------------
    def _initial_state(self) -> None:
        """At rest at the commanded position (clamped to the stops), servovalve settled at null."""
        p = self.params
        x = min(max(float(self.u[IN_COMMAND]) * DEG, p.travel_min_rad), p.travel_max_rad)
        self.df[DF_STATE:DF_STATE + N_STATE] = 0.0
        self.df[DF_STATE + S_X] = x
        self.di[DI_STUCK] = 1
        self.di[DI_AT_STOP] = -1 if x <= p.travel_min_rad else (1 if x >= p.travel_max_rad else 0)

    def start(self) -> int:
        self.compiled["refresh"](self.mf, self.mi, self.df, self.di)
        return 0

    @property
    def time(self) -> float:
        return float(self.df[DF_TIME])

    @property
    def counters(self) -> np.ndarray:
        return self.di[DI_COUNTERS:DI_COUNTERS + N_COUNTERS]

    @property
    def state(self) -> np.ndarray:
        """The state block (view): rate, position, valve states and the last torques, see ``S_*``."""
        return self.df[DF_STATE:DF_STATE + N_STATE]

    def _drain_events(self) -> list[tuple[float, int, int]]:
        return self._events.drain()

    @property
    def events_lost(self) -> int:
        """Events overwritten in the ring log before they were read, since the last reset."""
        return self._events.lost

    def event_log(self) -> tuple[int, int, int, int, int]:
        return DF_EV_TIME, DI_EV_SOURCE, DI_EV_KIND, DI_COUNTERS + CNT_EVENTS, EVENT_CAPACITY

    def mark_events_read(self) -> None:
        self._events.mark_all_read()

    def name_events(self, raw: list[tuple[float, int, int]]) -> list[dict]:
        """Stick / breakaway / hard-stop events, named by their source (shaft, stop)."""
        out = []
        for t, r, k in raw:
            src = EVENT_SOURCES[r] if 0 <= r < len(EVENT_SOURCES) else str(r)
            # 'clutch' names the element for tools written for the clutch plants
            out.append(dict(time=t, clutch=src, source=src, row=r, type=EVENT_NAMES.get(k, str(k))))
        return out

    def set_state(self, state) -> None:
        df, di = state
        if df.shape != self.df.shape or di.shape != self.di.shape:
            raise ValueError("state does not belong to this plant")
        self.df[:] = df
        self.di[:] = di
        self._events.mark_all_read()

    def tunable_parameters(self) -> list[Param]:
        """Friction and controller parameters a running server may change (read afresh every sub-step)."""
        mf = self.mf

        def slot(name, unit, lo, hi, doc, idx):
            return Param(name, unit, lo, hi, doc, lambda: float(mf[idx]), lambda v: mf.__setitem__(idx, v))

        return [
            # C_M, named as the viscous drag of a shaft like the friction plants' shafts
            slot("shaft.surface.drag", "N m s/rad", 0.0, 1e9, "viscous drag of shaft surface to ground", PF_VISCOUS),
            slot("friction.efficiency_opposing", "-", 1e-3, 1.0, "EtO, efficiency with an opposing load (eq. 3)",
                 PF_ETO),
            slot("friction.efficiency_aiding", "-", -10.0, 1.0,
                 "EtA, efficiency with an aiding load (eq. 4); <= 0 irreversible", PF_ETA),
            slot("friction.static_to_dynamic_ratio", "-", 1.0, 10.0, "FSD, static / dynamic friction", PF_FSD),
            slot("friction.load_independent", "N m", 0.0, 1.0e7, "T_FR0, load-independent friction torque", PF_TFR0),
            slot("controller.gain", "A/rad", 0.0, 100.0, "servo-amplifier gain (proportional law)", PF_AMP_GAIN),
        ]
