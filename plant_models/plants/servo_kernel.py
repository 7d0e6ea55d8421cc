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

``_substep`` is the algorithm's one sub-step in the paper's order, over
three inlined stages named for the paper's statements (``_valve``: the
controller and the servovalve; ``_friction``: statements 2-13; ``_stops``:
14-17).  The layouts (``PF_*``, ``S_*``, ``DF_*``, ``DI_*``) are column
tables (:class:`~plant_models.contract.columns.Columns`) declared here, so
their numbers are generated and their cache follows this file.
"""

from __future__ import annotations

import math

from numba import njit

from ..contract.columns import Columns
from ..contract.vocabulary import (CNT_EVENTS, CNT_ROLLBACKS, CNT_STEPS, EV_BREAKAWAY, EV_STICK, N_COUNTERS,
                                   SHARED_EVENTS, ST_BAD_INPUT, ST_NONFINITE, ST_OK)
from ..core.api import JIT, JIT_STAGE, raw_f, raw_i
from ..plant import Ports

DEG = math.pi / 180.0  # rad per degree
MPA = 1.0e6  # Pa per MPa

# --------------------------------------------------------------------------
# the model buffer mf: float parameters (the int model buffer mi is unused)
# --------------------------------------------------------------------------
PARAMS = Columns("the servo's float parameters in mf", (
    # -- controller
    ("PF_AMP_GAIN", "servo-amplifier gain G_amp, A per rad of position error"),
    ("PF_CURRENT_MAX", "current saturation I_max, A"),
    # -- servovalve first stage
    ("PF_WF", "first-stage natural frequency wF, rad/s"),
    ("PF_ZF", "first-stage damping ratio zF, -"),
    ("PF_GF", "flapper displacement per net current G_F, m/A"),
    ("PF_XF_MAX", "flapper travel (hard stops at +-), m"),
    # -- second stage
    ("PF_GS", "spool velocity per flapper displacement G_S, 1/s"),
    ("PF_KXS", "steady-state spool position per current K_XS, m/A"),
    ("PF_XS_MAX", "spool travel (hard stops at +-), m"),
    ("PF_GP", "pressure gain G_P, Pa/m"),
    ("PF_RQ", "pressure-flow coefficient R_Q = G_P/G_Q, Pa s/m^3"),
    ("PF_CLEAK", "leakage coefficient C_L, m^3/(s Pa)"),
    # -- motor and transmission
    ("PF_DIS", "motor displacement referred to the surface, m^3/rad"),
    ("PF_INERTIA", "inertia of motor, transmission and surface J_M, kg m^2"),
    ("PF_VISCOUS", "viscous coefficient C_M, N m s/rad"),
    ("PF_TFR0", "load-independent friction torque T_FR0, N m"),
    ("PF_ETO", "efficiency with opposing load EtO, -"),
    ("PF_ETA", "efficiency with aiding load EtA, -"),
    ("PF_FSD", "static-to-dynamic friction ratio FSD, -"),
    ("PF_XJ_MIN", "lower hard stop, rad"),
    ("PF_XJ_MAX", "upper hard stop, rad"),
    # -- numerics
    ("PF_H_MAX", "longest internal sub-step, s"),
), count="PF_LEN")
globals().update(PARAMS.constants())  # PF_AMP_GAIN .. PF_H_MAX; PF_LEN

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
STATE = Columns("the servo's state, in df at DF_STATE", (
    ("S_W", "surface rate DXJ, rad/s"),
    ("S_X", "surface position XJ, rad"),
    ("S_XF", "flapper position, m"),
    ("S_DXF", "flapper velocity, m/s"),
    ("S_XS", "spool position, m"),
    ("S_COR", "last current, A"),
    ("S_P12", "last load pressure, Pa"),
    ("S_TM", "last motor torque, N m"),
    ("S_TFR", "last friction torque, N m"),
    ("S_TSTOP", "last hard-stop torque, N m"),
), count="N_STATE")
globals().update(STATE.constants())  # S_W .. S_TSTOP; N_STATE
DF_SLOTS = Columns("the float data buffer df", (
    ("DF_TIME", "simulated time, s"),
    ("DF_U", "[N_IN] inputs, then [N_IN] their first-order-hold rates (per s)", 2 * N_IN),
    ("DF_Y", "[N_OUT] outputs", N_OUT),
    ("DF_STATE", "[N_STATE] state, see S_*", N_STATE),  # noqa: F821
    ("DF_EV_TIME", "[EVENT_CAPACITY] event times, s", EVENT_CAPACITY),
), count="DF_LEN")
globals().update(DF_SLOTS.constants())  # DF_TIME .. DF_EV_TIME; DF_LEN
DI_SLOTS = Columns("the int data buffer di", (
    ("DI_COUNTERS", "[N_COUNTERS] the contract's counters (contract.vocabulary.CNT_*): steps, events, ..., rollbacks",
     N_COUNTERS),
    ("DI_STATUS", "status word of the last step"),
    ("DI_AT_STOP", "-1 / 0 / +1"),
    ("DI_STUCK", "1 while at rest"),
    ("DI_EV_SOURCE", "[EVENT_CAPACITY] event source, see EVENT_SOURCES", EVENT_CAPACITY),
    ("DI_EV_KIND", "[EVENT_CAPACITY] event kind, see EVENT_NAMES", EVENT_CAPACITY),
), count="DI_LEN")
globals().update(DI_SLOTS.constants())  # DI_COUNTERS .. DI_EV_KIND; DI_LEN

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
    k = di[DI_COUNTERS + CNT_EVENTS] % EVENT_CAPACITY  # noqa: F821
    df[DF_EV_TIME + k] = t  # noqa: F821
    di[DI_EV_SOURCE + k] = source  # noqa: F821
    di[DI_EV_KIND + k] = kind  # noqa: F821
    di[DI_COUNTERS + CNT_EVENTS] += 1  # noqa: F821


@njit(**JIT)
def _outputs(mf, mi, df, di, h, status):
    """Write the plant outputs from the state, h s after the step start.  Called in the real-time loop."""
    oy = DF_Y  # noqa: F821
    os_ = DF_STATE  # noqa: F821
    w = df[os_ + S_W]  # noqa: F821
    x = df[os_ + S_X]  # noqa: F821
    com = df[DF_U + IN_COMMAND] + df[DF_U + N_IN + IN_COMMAND] * h  # noqa: F821
    df[oy + OUT_COMMAND_IN] = com
    df[oy + OUT_SUPPLY_IN] = max(df[DF_U + IN_SUPPLY] + df[DF_U + N_IN + IN_SUPPLY] * h, 0.0)  # noqa: F821
    df[oy + OUT_LOAD_IN] = df[DF_U + IN_LOAD] + df[DF_U + N_IN + IN_LOAD] * h  # noqa: F821
    df[oy + OUT_POSITION] = x / DEG
    df[oy + OUT_RATE] = w / DEG
    df[oy + OUT_ERROR] = com - x / DEG
    df[oy + OUT_CURRENT] = df[os_ + S_COR] * 1.0e3  # noqa: F821
    df[oy + OUT_FLAPPER] = df[os_ + S_XF] * 1.0e6  # noqa: F821
    df[oy + OUT_SPOOL] = df[os_ + S_XS] * 1.0e6  # noqa: F821
    df[oy + OUT_PRESSURE] = df[os_ + S_P12] / MPA  # noqa: F821
    df[oy + OUT_MOTOR_TQ] = df[os_ + S_TM]  # noqa: F821
    df[oy + OUT_FRICTION_TQ] = df[os_ + S_TFR]  # noqa: F821
    df[oy + OUT_STOP_TQ] = df[os_ + S_TSTOP]  # noqa: F821
    df[oy + OUT_STUCK] = float(di[DI_STUCK])  # noqa: F821
    df[oy + OUT_AT_STOP] = float(di[DI_AT_STOP])  # noqa: F821
    df[oy + OUT_STATUS] = float(status)


@njit(**JIT)
def _log_changes(df, di, t_end, stuck_new, stop):
    """Log the sticks, breakaways and hard-stop hits and releases of a sub-step ending at t_end.

    Called in the real-time loop.
    """
    stuck_old = di[DI_STUCK]  # noqa: F821
    if stuck_new != stuck_old:
        _log(df, di, t_end, 0, EV_STICK if stuck_new == 1 else EV_BREAKAWAY)
        di[DI_STUCK] = stuck_new  # noqa: F821
    old_stop = di[DI_AT_STOP]  # noqa: F821
    if stop != old_stop:
        if old_stop != 0:
            _log(df, di, t_end, 1 if old_stop < 0 else 2, EV_STOP_RELEASE)
        if stop != 0:
            _log(df, di, t_end, 1 if stop < 0 else 2, EV_STOP_HIT)
        di[DI_AT_STOP] = stop  # noqa: F821


@njit(**JIT_STAGE)
def _valve(mf, df, h, com, x, psr):
    """Controller, servovalve's two stages and its saturated pressure, over one sub-step of h s.

    Updates the flapper, spool and current states; returns the pressure the spool opens for, Pa
    (the pressure gain times the spool position, saturated at the supply pressure ``psr``).
    """
    # -- controller
    cor = mf[PF_AMP_GAIN] * (com - x)  # noqa: F821
    imax = mf[PF_CURRENT_MAX]  # noqa: F821
    if cor > imax:
        cor = imax
    elif cor < -imax:
        cor = -imax
    # -- first stage: semi-implicit Euler, flapper stops inelastic
    xf = df[DF_STATE + S_XF]  # noqa: F821
    vf = df[DF_STATE + S_DXF]  # noqa: F821
    xs = df[DF_STATE + S_XS]  # noqa: F821
    wf = mf[PF_WF]  # noqa: F821
    inet = cor - xs / mf[PF_KXS]  # noqa: F821
    af = wf * wf * (mf[PF_GF] * inet - xf) - 2.0 * mf[PF_ZF] * wf * vf  # noqa: F821
    vf += h * af
    xf += h * vf
    xfm = mf[PF_XF_MAX]  # noqa: F821
    if xf >= xfm:
        xf = xfm
        if vf > 0.0:
            vf = 0.0
    elif xf <= -xfm:
        xf = -xfm
        if vf < 0.0:
            vf = 0.0
    # -- second stage: spool integrates the flapper, spool stops
    xs += h * mf[PF_GS] * xf  # noqa: F821
    xsm = mf[PF_XS_MAX]  # noqa: F821
    if xs > xsm:
        xs = xsm
    elif xs < -xsm:
        xs = -xsm
    df[DF_STATE + S_XF] = xf  # noqa: F821
    df[DF_STATE + S_DXF] = vf  # noqa: F821
    df[DF_STATE + S_XS] = xs  # noqa: F821
    df[DF_STATE + S_COR] = cor  # noqa: F821
    # -- pressure: saturated pressure gain (the loss of the total flow is the caller's)
    ps = mf[PF_GP] * xs  # noqa: F821
    if ps > psr:
        ps = psr
    elif ps < -psr:
        ps = -psr
    return ps


@njit(**JIT_STAGE)
def _friction(mf, h, w, act, t_drive, d_tot, tld):
    """Table 1, statements 2-13: the friction torque (N m) and the rate at the sub-step's end (rad/s).

    Moving: the dynamic friction of an opposing or aiding load, and the rate with the
    velocity-proportional torque implicit.  At rest: friction holds the active torque ``act`` up to
    the static limits, the excess accelerates.
    """
    a_tld = abs(tld)
    tfr0 = mf[PF_TFR0]  # noqa: F821
    fdo = tfr0 + (1.0 / mf[PF_ETO] - 1.0) * a_tld  # noqa: F821
    fda = tfr0 + (1.0 - mf[PF_ETA]) * a_tld  # noqa: F821
    fsd = mf[PF_FSD]  # noqa: F821
    jm = mf[PF_INERTIA]  # noqa: F821
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
    return tfr, w_new


@njit(**JIT_STAGE)
def _stops(mf, h, x, w, w_new):
    """Table 1, statements 14-17: a sign change inside the sub-step stops the element; trapezoidal
    position; hard stops (inelastic), departure only away from a stop.

    Returns the position (rad) and rate (rad/s) at the sub-step's end and the stop it is on
    (-1 lower, +1 upper, 0 none).
    """
    if w * w_new < 0.0:
        w_new = 0.0
    x_new = x + 0.5 * (w + w_new) * h
    x_lo = mf[PF_XJ_MIN]  # noqa: F821
    x_hi = mf[PF_XJ_MAX]  # noqa: F821
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
    return x_new, w_new, stop


@njit(**JIT)
def _substep(mf, mi, df, di, h, t_end, com, psr, tld):
    """One fixed sub-step of the actuator (the paper's Table 1 plus the servovalve).  Called in the real-time loop.

    com in rad, psr in Pa, tld in N m.  Logs stick / breakaway / stop events at t_end.  The paper's
    order: :func:`_valve` (controller, servovalve), the motor's active torque, :func:`_friction`
    (statements 2-13), :func:`_stops` (14-17), the torque a stop carries.
    """
    w = df[DF_STATE + S_W]  # noqa: F821  DXJ, rad/s
    x = df[DF_STATE + S_X]  # noqa: F821  XJ, rad
    ps = _valve(mf, df, h, com, x, psr)
    # -- the motor: the valve's pressure less the loss of the total flow
    rq = mf[PF_RQ]  # noqa: F821
    dis = mf[PF_DIS]  # noqa: F821
    den = 1.0 + rq * mf[PF_CLEAK]  # noqa: F821
    d_valve = dis * dis * rq / den  # velocity-proportional torque of the valve loss, N m s/rad
    d_tot = d_valve + mf[PF_VISCOUS]  # noqa: F821
    t_drive = dis * ps / den - tld  # active torque without the velocity-proportional part
    act = t_drive - d_tot * w  # Table 1, statement 1
    tfr, w_new = _friction(mf, h, w, act, t_drive, d_tot, tld)
    x_new, w_new, stop = _stops(mf, h, x, w, w_new)
    # torque the stop carries: the excess of the active torque over friction pushing into it
    t_stop = 0.0
    if stop != 0 and w_new == 0.0:
        net = act - tfr
        if stop * net > 0.0:
            t_stop = net
    df[DF_STATE + S_W] = w_new  # noqa: F821
    df[DF_STATE + S_X] = x_new  # noqa: F821
    df[DF_STATE + S_P12] = (ps - rq * dis * w_new) / den  # noqa: F821
    df[DF_STATE + S_TM] = dis * df[DF_STATE + S_P12]  # noqa: F821
    df[DF_STATE + S_TFR] = tfr  # noqa: F821
    df[DF_STATE + S_TSTOP] = t_stop  # noqa: F821
    _log_changes(df, di, t_end, 1 if w_new == 0.0 else 0, stop)


@njit(**JIT)
def _servo_step(mf, mi, df, di, dt):
    """Implementation of servo_step on raw pointers.  Called in the real-time loop."""
    ok = dt > 0.0 and math.isfinite(dt)
    for k in range(2 * N_IN):
        ok = ok and math.isfinite(df[DF_U + k])  # noqa: F821
    if not ok:
        di[DI_STATUS] = ST_BAD_INPUT  # noqa: F821
        df[DF_Y + OUT_STATUS] = float(ST_BAD_INPUT)  # noqa: F821
        return ST_BAD_INPUT
    nsub = int(math.ceil(dt / mf[PF_H_MAX] - 1e-9))  # noqa: F821
    if nsub < 1:
        nsub = 1
    h = dt / nsub
    t0 = df[DF_TIME]  # noqa: F821
    com0 = df[DF_U + IN_COMMAND]  # noqa: F821
    com_r = df[DF_U + N_IN + IN_COMMAND]  # noqa: F821
    psr0 = df[DF_U + IN_SUPPLY]  # noqa: F821
    psr_r = df[DF_U + N_IN + IN_SUPPLY]  # noqa: F821
    tld0 = df[DF_U + IN_LOAD]  # noqa: F821
    tld_r = df[DF_U + N_IN + IN_LOAD]  # noqa: F821
    # roll-back copy of the integrated state
    w0 = df[DF_STATE + S_W]  # noqa: F821
    x0 = df[DF_STATE + S_X]  # noqa: F821
    xf0 = df[DF_STATE + S_XF]  # noqa: F821
    vf0 = df[DF_STATE + S_DXF]  # noqa: F821
    xs0 = df[DF_STATE + S_XS]  # noqa: F821
    for k in range(nsub):
        s = k * h  # inputs are sampled at the sub-step start (explicit, as in Table 1)
        com = (com0 + com_r * s) * DEG
        psr = (psr0 + psr_r * s) * MPA
        if psr < 0.0:
            psr = 0.0
        tld = tld0 + tld_r * s
        _substep(mf, mi, df, di, h, t0 + (k + 1) * h, com, psr, tld)
    st = ST_OK
    if not (math.isfinite(df[DF_STATE + S_W]) and math.isfinite(df[DF_STATE + S_X])  # noqa: F821
            and math.isfinite(df[DF_STATE + S_XS]) and math.isfinite(df[DF_STATE + S_XF])  # noqa: F821
            and math.isfinite(df[DF_STATE + S_DXF])):  # noqa: F821
        df[DF_STATE + S_W] = w0  # noqa: F821
        df[DF_STATE + S_X] = x0  # noqa: F821
        df[DF_STATE + S_XF] = xf0  # noqa: F821
        df[DF_STATE + S_DXF] = vf0  # noqa: F821
        df[DF_STATE + S_XS] = xs0  # noqa: F821
        di[DI_COUNTERS + CNT_ROLLBACKS] += 1  # noqa: F821
        st = ST_NONFINITE
    else:
        df[DF_TIME] = t0 + dt  # noqa: F821
    di[DI_COUNTERS + CNT_STEPS] += 1  # noqa: F821
    di[DI_STATUS] = st  # noqa: F821
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
