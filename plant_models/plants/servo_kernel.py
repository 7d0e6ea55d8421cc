"""The compiled step of the servo plant (:mod:`.servo`, where the model is written out) and its buffers' layout.

The paper's Table 1 fixed step (Borello & Dalla Vedova): the float
parameters ``PF_*`` in ``mf``, the ports, the data buffers ``df`` / ``di``
(time, inputs and their rates, outputs, state ``S_*``, the event ring) and
the event kinds, then the kernels: one sub-step, one plant step of
``ceil(dt / internal_step_s)`` sub-steps with its roll-back, the refresh.

Why the kernels and the layout are one module apart from the plant class:
numba folds module constants into a kernel and keys the kernel's on-disk
cache to the kernel's own source file, and :mod:`plant_models.core.cache`
adds only the core's sources to a plant module's stamp, not the other plant
modules'.  So every kernel of the plant and every constant one folds in
live here: an edit of this file recompiles them (numba's own check), an
edit of :mod:`.servo` (Python only) recompiles nothing.

Why ``_substep`` is longer than 80 lines: the servo is the one plant with
its own compiled integrator (the paper's Table 1 fixed step with its
dry-friction cases and hard stops), and ``_substep`` is that algorithm's one
sub-step, case by case in the paper's order; cut into pieces it would no
longer read against the paper, and each piece would be a numba call with a
dozen scalar arguments.
"""

from __future__ import annotations

import math

from numba import njit

from ..contract.vocabulary import (CNT_EVENTS, CNT_ROLLBACKS, CNT_STEPS, EV_BREAKAWAY, EV_STICK, N_COUNTERS,
                                   SHARED_EVENTS, ST_BAD_INPUT, ST_NONFINITE, ST_OK)
from ..core.api import JIT, raw_f, raw_i
from ..plant import Ports

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

# --------------------------------------------------------------------------
# ports
# --------------------------------------------------------------------------
# p below: the plant's ServoParams (plants/servo.py; not imported here, which imports this module)
def _travel_deg(p) -> tuple[float, float, float]:
    """Lower and upper hard stop and their distance, deg."""
    lo_deg = p.travel_min_rad / DEG
    hi_deg = p.travel_max_rad / DEG
    return lo_deg, hi_deg, hi_deg - lo_deg


def _command_lo(p) -> float:
    lo, hi, span = _travel_deg(p)
    return lo - span


def _command_hi(p) -> float:
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
