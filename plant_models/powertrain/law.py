"""The powertrain's force law: engine, torque converter and road load, evaluated by the core at every
evaluation (RK4 stage points, event search, mode solves) through the core's force-law seam.

One compiled law serves every transmission with a powertrain: which
components are present, the members they act on and their parameters are
read from the law's blocks (``MI_LAW``, ``MF_LAW``; layout below), packed by
:mod:`plant_models.powertrain.components`.  Equations: docs/powertrain.md.

Members: the law acts on up to three members of the description, the
engine's (the converter's impeller), the turbine's (the transmission input)
and the output.  A member that is an independent speed of the reduced
system is read and driven directly; any other through its row of ``T``
(``w_m = T[m] q``, torque ``tau`` on it is ``T[m]^T tau`` on ``q``).

The law's own states ``z`` (integrated by the core with the speeds): the
idle governor's integral, the torque-intervention limit's first-order
response, and the work of each component (engine, converter, aerodynamic
drag, grade), so that an energy balance can name each term.
"""

from __future__ import annotations

import math

from numba import njit

from ..core.api import JIT, JIT_STAGE, L, ForceLaw, y_omega

# -- MI_LAW: the law's int parameters
LI_ENGINE = 0  # 1: an engine acts on port member PM_ENGINE
LI_CONVERTER = 1  # 1: a torque converter between PM_ENGINE (impeller) and PM_TURBINE
LI_VEHICLE = 2  # 1: road load (aerodynamic drag, grade) on PM_OUTPUT
LI_COORD = 3  # [3] independent speed each port member is, or -1 (then its row of T, LF_T)
LI_N_IN = 6  # number of plant inputs (their rates follow them in DF_PLANT)
LI_IN_PEDAL = 7  # input index of the pedal, 0..1
LI_IN_LIMIT = 8  # input index of the torque-intervention limit, N m
LI_IN_GRADE = 9  # input index of the road grade, %
LI_TAB = 10  # [4] offsets in MF_LAW of the tables: full load, drag (x values, then y values: linear),
#              C = 1/K^2, TR (x, y, then the slopes at x: monotone cubic)
LI_TAB_N = 14  # [4] their numbers of breakpoints
LI_IN_DRAWBAR = 18  # input index of the drawbar pull, N, or -1 (no drawbar)
LI_DRIVER = 19  # 1: a driver (powertrain/driver.py) may command pedal and brake
LI_IN_TARGET = 20  # input index of the driver's target speed, m/s
LI_IN_DRIVER_ON = 21  # input index of the driver's enable (>= 0.5: the driver commands)
LI_BRAKE_ROW = 22  # core row of the service brake
LI_PTO = 23  # 1: a power take-off loads the engine's member
LI_PTO_TAB = 24  # offset in MF_LAW of its table: engine speed (rad/s), then torque on the crank at full load (N m)
LI_PTO_N = 25  # its number of breakpoints
LI_IN_PTO = 26  # input index of the PTO load, 0..1, or -1 (no PTO)
LI_LEN = 27
TAB_FULL, TAB_DRAG, TAB_K, TAB_TR = 0, 1, 2, 3
PM_ENGINE, PM_TURBINE, PM_OUTPUT = 0, 1, 2

# -- MF_LAW: the law's float parameters (scalars, then the T rows, then the tables)
LF_IDLE = 0  # idle speed, rad/s
LF_KP = 1  # idle governor proportional gain, N m per rad/s
LF_KI = 2  # idle governor integral gain, N m per rad
LF_REV = 3  # rev limiter: fuel cut complete at this speed, rad/s
LF_REV_BAND = 4  # ... and starting this much below it, rad/s
LF_INT_T = 5  # torque intervention: time constant of the limit's response, s (0: immediate)
LF_AERO = 6  # 1/2 rho cd A, N per (m/s)^2
LF_RFD = 7  # wheel radius / final drive ratio, m (v = sign * w_output * LF_RFD)
LF_MG = 8  # vehicle weight m g, N
LF_SIGN = 9  # forward sense of the output member (+1 / -1)
LF_DRV_KP = 10  # driver: pedal per m/s of speed error
LF_DRV_KI = 11  # driver: pedal per m of integrated speed error
LF_DRV_FULL = 12  # driver: force at the wheels the feed-forward takes for full pedal, N
LF_DRV_BRAKE = 13  # driver: brake pressure per unit of negative command, bar
LF_ROLL = 14  # rolling resistance force c_r m g, N (the driver's feed-forward)
LF_T = 15  # [3 n] rows of T of the port members
N_LF_SCALARS = 15

# -- the law's states z (after its work account in the state vector)
Z_GOV = 0  # idle governor integral of (idle speed - speed), rad
Z_LIMIT = 1  # torque-intervention limit after its first-order response, N m
Z_W_ENGINE = 2  # work of the engine torque, J
Z_W_CONVERTER = 3  # work of the converter's torques (<= 0: its loss), J
Z_W_AERO = 4  # work of the aerodynamic drag, J
Z_W_GRADE = 5  # work of the grade force (minus the change of potential energy), J
Z_W_DRAWBAR = 6  # work of the drawbar pull (<= 0 while pulling forward), J
NZ = 7
Z_W_PTO = 7  # work of the PTO load (<= 0), J: a state only with a PTO (NZ_PTO states)
NZ_PTO = 8

# -- DF_LAW: values at the last evaluation, then a force scratch for the outputs' evaluation
LD_ENGINE_TQ = 0  # engine torque, N m
LD_IMPELLER_TQ = 1  # torque the converter takes from the impeller, N m
LD_TURBINE_TQ = 2  # torque the converter gives the turbine, N m
LD_SR = 3  # converter speed ratio w_turbine / w_impeller (0 with the impeller at rest)
LD_SPEED = 4  # vehicle speed, m/s
LD_AERO_F = 5  # aerodynamic drag force, N (resisting forward motion when positive)
LD_GRADE_F = 6  # grade force, N (resisting forward motion when positive)
LD_IN_PTO = 7  # the PTO load as the previous step's last evaluation used it
LD_IN_END = 8  # [4] pedal, limit, grade, drawbar as the previous step's last evaluation used them (value + rate dt)
LD_DRV_ON = 12  # 1.0: the driver commands pedal and brake in this step
LD_DRV_INT = 13  # the driver's integral of the speed error, m
LD_DRV_PEDAL = 14  # the driver's pedal for this step, 0..1
LD_DRV_BRAKE = 15  # the driver's brake pressure for this step, bar
LD_SCRATCH = 16  # [n] forces of an evaluation made for the outputs only
N_LD = 16

# The law's helpers below (JIT_STAGE) are inlined into it: the optimiser left calls to the table searches and
# the member mappings at every one of the law's four evaluations a step.


@njit(**JIT_STAGE)
def _table(mf, mi, k, x):
    """Linear interpolation in table k of MF_LAW, held constant beyond its ends.  Called in the real-time loop."""
    oli = mi[L.MI_LAW]
    ox = mi[L.MF_LAW] + mi[oli + LI_TAB + k]
    n = mi[oli + LI_TAB_N + k]
    if x <= mf[ox]:
        return mf[ox + n]
    if x >= mf[ox + n - 1]:
        return mf[ox + 2 * n - 1]
    q = 1
    while x > mf[ox + q]:
        q += 1
    x0 = mf[ox + q - 1]
    y0 = mf[ox + n + q - 1]
    return y0 + (mf[ox + n + q] - y0) * (x - x0) / (mf[ox + q] - x0)


@njit(**JIT_STAGE)
def _hermite(mf, ox, n, q, x):
    """The monotone cubic of the table at ox (n breakpoints) on its interval q (x in (x[q-1], x[q]]).

    Called in the real-time loop.
    """
    x0 = mf[ox + q - 1]
    h = mf[ox + q] - x0
    t = (x - x0) / h
    u = 1.0 - t
    y0 = mf[ox + n + q - 1]
    y1 = mf[ox + n + q]
    d0 = mf[ox + 2 * n + q - 1]
    d1 = mf[ox + 2 * n + q]
    return (y0 * (1.0 + 2.0 * t) + h * d0 * t) * u * u + (y1 * (3.0 - 2.0 * t) - h * d1 * u) * t * t


@njit(**JIT_STAGE)
def _converter_tables(mf, mi, sr):
    """(C(sr), TR(sr)): monotone cubic Hermite interpolation (Fritsch-Carlson slopes) in both converter
    tables at one speed ratio, held constant beyond their ends; the interval is searched once
    (:mod:`.components` packs both over the same speed ratios).

    C1: a speed ratio crossing a breakpoint inside an RK4 sub-step costs no
    order of accuracy worth naming (a kink of a linear table did: 4e-4 J of
    energy residual per crossing of the capacity table's steepest kink at
    1 ms).  Called in the real-time loop.
    """
    oli = mi[L.MI_LAW]
    ok = mi[L.MF_LAW] + mi[oli + LI_TAB + TAB_K]
    otr = mi[L.MF_LAW] + mi[oli + LI_TAB + TAB_TR]
    n = mi[oli + LI_TAB_N + TAB_K]
    if sr <= mf[ok]:
        return mf[ok + n], mf[otr + n]
    if sr >= mf[ok + n - 1]:
        return mf[ok + 2 * n - 1], mf[otr + 2 * n - 1]
    q = 1
    while sr > mf[ok + q]:
        q += 1
    return _hermite(mf, ok, n, q, sr), _hermite(mf, otr, n, q, sr)


@njit(**JIT_STAGE)
def _speed(mf, mi, df, k, oy):
    """Speed of port member k at the state df[oy], rad/s.  Called in the real-time loop."""
    c = mi[mi[L.MI_LAW] + LI_COORD + k]
    if c >= 0:
        return df[oy + c]
    n = mi[L.H_N]
    ot = mi[L.MF_LAW] + LF_T + k * n
    w = 0.0
    for j in range(n):
        w += mf[ot + j] * df[oy + j]
    return w


@njit(**JIT_STAGE)
def _apply(mf, mi, df, k, of, tq):
    """Add torque tq (N m) on port member k to the generalised forces at df[of].  Called in the real-time loop."""
    c = mi[mi[L.MI_LAW] + LI_COORD + k]
    if c >= 0:
        df[of + c] += tq
        return
    n = mi[L.H_N]
    ot = mi[L.MF_LAW] + LF_T + k * n
    for j in range(n):
        df[of + j] += mf[ot + j] * tq


@njit(**JIT_STAGE)
def _input(mi, df, slot, s):
    """A plant input at time s into the step (first-order hold: value + rate s).  Called in the real-time loop."""
    oli = mi[L.MI_LAW]
    op = mi[L.DF_PLANT]
    k = mi[oli + slot]
    return df[op + k] + df[op + mi[oli + LI_N_IN] + k] * s


@njit(**JIT_STAGE)
def pto_torque(mf, mi, df, s, we):
    """Torque the PTO takes from the crank at crank speed we (rad/s), N m: the load input (0..1) times the
    implement's full-load torque over speed, linear between breakpoints, 0 at rest, odd in we (a load
    resists either sense).  Called in the real-time loop."""
    oli = mi[L.MI_LAW]
    ox = mi[L.MF_LAW] + mi[oli + LI_PTO_TAB]
    n = mi[oli + LI_PTO_N]
    a = abs(we)
    if a >= mf[ox + n - 1]:
        t = mf[ox + 2 * n - 1]
    else:
        q = 1
        while a > mf[ox + q]:
            q += 1
        x0 = mf[ox + q - 1]
        y0 = mf[ox + n + q - 1]
        t = y0 + (mf[ox + n + q] - y0) * (a - x0) / (mf[ox + q] - x0)
    t *= min(max(_input(mi, df, LI_IN_PTO, s), 0.0), 1.0)
    return t if we >= 0.0 else -t


@njit(**JIT_STAGE)
def pedal_at(mi, df, s):
    """The pedal in effect s into the step: the driver's (held over the step) or the input's, 0..1.

    Called in the real-time loop.
    """
    od = mi[L.DF_LAW]
    if df[od + LD_DRV_ON] == 1.0:
        return df[od + LD_DRV_PEDAL]
    return min(max(_input(mi, df, LI_IN_PEDAL, s), 0.0), 1.0)


@njit(**JIT_STAGE)
def engine_torque(mf, mi, df, s, oz, ozd, w):
    """Engine torque at crank speed w (rad/s), N m; writes the governor's and the limit's derivatives.

    Pedal between the drag (motoring) curve and the full-load curve, plus
    the idle governor's PI torque (conditional integration: the integral
    stops while the governor saturates), cut back to the drag torque by the
    rev limiter over its band, then capped by the intervention limit (never
    below the drag torque).  Called in the real-time loop.
    """
    ol = mi[L.MF_LAW]
    full = _table(mf, mi, TAB_FULL, w)
    drag = _table(mf, mi, TAB_DRAG, w)
    pedal = pedal_at(mi, df, s)
    span = full - drag
    e = mf[ol + LF_IDLE] - w
    u = mf[ol + LF_KP] * e + mf[ol + LF_KI] * df[oz + Z_GOV]
    gov = min(max(u, 0.0), span)
    if (u <= 0.0 and e < 0.0) or (u >= span and e > 0.0):
        df[ozd + Z_GOV] = 0.0
    else:
        df[ozd + Z_GOV] = e
    t = min(drag + pedal * span + gov, full)
    cut = min(max((mf[ol + LF_REV] - w) / mf[ol + LF_REV_BAND], 0.0), 1.0)
    t = drag + cut * (t - drag)
    limit = _input(mi, df, LI_IN_LIMIT, s)
    T = mf[ol + LF_INT_T]
    if T > 0.0:
        df[ozd + Z_LIMIT] = (limit - df[oz + Z_LIMIT]) / T
        limit = df[oz + Z_LIMIT]
    else:
        df[ozd + Z_LIMIT] = 0.0
    return max(min(t, limit), drag)


@njit(**JIT_STAGE)
def converter_torques(mf, mi, wp, wt):
    """(torque taken from the impeller, torque given to the turbine), N m, at impeller and turbine speeds.

    Drive (wt <= wp): SR = wt/wp, impeller torque C(SR) wp^2 = (wp/K(SR))^2,
    turbine torque TR(SR) times that.  Coast (wt > wp): the same tables with
    the roles exchanged, SR' = wp/wt (the turbine drives the impeller).  At
    the coupling point SR = 1 the capacity C is zero, so both branches meet
    there.  Called in the real-time loop.
    """
    if (wp <= 0.0 and wt <= 0.0) or wt == wp:  # standing, or locked up: C(1) = 0
        return 0.0, 0.0
    if wt <= wp:
        c, tr = _converter_tables(mf, mi, max(wt / wp, 0.0))
        tp = c * wp * wp
        return tp, tr * tp
    c, tr = _converter_tables(mf, mi, max(wp / wt, 0.0))
    tt = c * wt * wt
    return -tr * tt, -tt


@njit(**JIT)
def powertrain_forces(mf, mi, df, di, s, oy, of):
    """The law: adds the components' torques at the state df[oy] to df[of]; returns their power, W.

    Also writes the law states' derivatives (DF_LAW_ZDOT) and the values of
    this evaluation (DF_LAW, LD_*).  Called in the real-time loop.
    """
    oli = mi[L.MI_LAW]
    ol = mi[L.MF_LAW]
    od = mi[L.DF_LAW]
    ozd = mi[L.DF_LAW_ZDOT]
    oz = oy + mi[L.H_NY] - mi[L.H_LAW_NZ]
    p = 0.0
    if mi[oli + LI_ENGINE] == 1:
        we = _speed(mf, mi, df, PM_ENGINE, oy)
        te = engine_torque(mf, mi, df, s, oz, ozd, we)
        _apply(mf, mi, df, PM_ENGINE, of, te)
        pe = te * we
        df[ozd + Z_W_ENGINE] = pe
        df[od + LD_ENGINE_TQ] = te
        p += pe
    if mi[oli + LI_PTO] == 1:
        we = _speed(mf, mi, df, PM_ENGINE, oy)
        tq = pto_torque(mf, mi, df, s, we)
        _apply(mf, mi, df, PM_ENGINE, of, -tq)
        df[ozd + Z_W_PTO] = -tq * we
        p -= tq * we
    if mi[oli + LI_CONVERTER] == 1:
        wp = _speed(mf, mi, df, PM_ENGINE, oy)
        wt = _speed(mf, mi, df, PM_TURBINE, oy)
        tp, tt = converter_torques(mf, mi, wp, wt)
        _apply(mf, mi, df, PM_ENGINE, of, -tp)
        _apply(mf, mi, df, PM_TURBINE, of, tt)
        pc = tt * wt - tp * wp
        df[ozd + Z_W_CONVERTER] = pc
        df[od + LD_IMPELLER_TQ] = tp
        df[od + LD_TURBINE_TQ] = tt
        # locked up (wt == wp exactly) the ratio is exactly 1: no division
        df[od + LD_SR] = (1.0 if wt == wp else wt / wp) if wp > 0.0 else 0.0
        p += pc
    if mi[oli + LI_VEHICLE] == 1:
        wo = _speed(mf, mi, df, PM_OUTPUT, oy)
        rfd = mf[ol + LF_RFD]
        sign = mf[ol + LF_SIGN]
        v = sign * wo * rfd
        fa = mf[ol + LF_AERO] * v * abs(v)
        gr = 0.01 * _input(mi, df, LI_IN_GRADE, s)
        # m g sin(atan(grade)); on the flat sqrt(1 + 0) = 1 exactly, so the same value without the sqrt
        fg = mf[ol + LF_MG] * gr if gr == 0.0 else mf[ol + LF_MG] * gr / math.sqrt(1.0 + gr * gr)
        fd = _input(mi, df, LI_IN_DRAWBAR, s) if mi[oli + LI_IN_DRAWBAR] >= 0 else 0.0
        _apply(mf, mi, df, PM_OUTPUT, of, -sign * rfd * (fa + fg + fd))
        df[ozd + Z_W_AERO] = -fa * v
        df[ozd + Z_W_GRADE] = -fg * v
        df[ozd + Z_W_DRAWBAR] = -fd * v
        df[od + LD_SPEED] = v
        df[od + LD_AERO_F] = fa
        df[od + LD_GRADE_F] = fg
        p -= (fa + fg + fd) * v
    return p


def _law(mf, mi, df, di, s, oy, of):
    return powertrain_forces(mf, mi, df, di, s, oy, of)


POWERTRAIN_LAW = ForceLaw(_law)


@njit(**JIT)
def evaluate_at_state(mf, mi, df, di, s):
    """Evaluate the law at the current state (DF_Y), s into the step, for the outputs: DF_LAW's LD_* values.

    The forces go to the scratch (DF_LAW + LD_SCRATCH), not to the core's
    DF_F.  Called in the real-time loop.
    """
    of = mi[L.DF_LAW] + LD_SCRATCH
    for j in range(mi[L.H_N]):
        df[of + j] = 0.0
    # the z derivatives this writes are overwritten by the next evaluation of the core
    powertrain_forces(mf, mi, df, di, s, y_omega(mi), of)


@njit(**JIT)
def write_outputs(mf, mi, df, di, s, oout):
    """The components' outputs from df[oout] on, in the order of components.add_ports (engine torque;
    impeller torque, turbine torque, speed ratio; vehicle speed, aerodynamic force, grade force).

    After a step (s = dt > 0) the core's last evaluation of the law was at
    the step's final state (the end evaluation of its last sub-step, or the
    one its outputs make), so its values stand; at a refresh (s = 0) the
    law is evaluated here.  Also keeps the law's input values that
    evaluation used (see :func:`inputs_changed`).  Called in the real-time loop.
    """
    if s == 0.0:
        evaluate_at_state(mf, mi, df, di, s)
    keep_law_inputs(mi, df, s)
    oli = mi[L.MI_LAW]
    od = mi[L.DF_LAW]
    q = oout
    if mi[oli + LI_ENGINE] == 1:
        df[q] = df[od + LD_ENGINE_TQ]
        q += 1
    if mi[oli + LI_CONVERTER] == 1:
        df[q] = df[od + LD_IMPELLER_TQ]
        df[q + 1] = df[od + LD_TURBINE_TQ]
        df[q + 2] = df[od + LD_SR]
        q += 3
    if mi[oli + LI_VEHICLE] == 1:
        df[q] = df[od + LD_SPEED] + 0.0  # a standstill reads +0.0
        df[q + 1] = df[od + LD_AERO_F]
        df[q + 2] = df[od + LD_GRADE_F]
        q += 3
    if mi[oli + LI_DRIVER] == 1:
        on = df[od + LD_DRV_ON] == 1.0
        df[q] = df[od + LD_DRV_PEDAL] if on else 0.0
        df[q + 1] = df[od + LD_DRV_BRAKE] if on else 0.0
        q += 2
    if mi[oli + LI_PTO] == 1:  # at the state the outputs are written for (the step's end)
        df[q] = pto_torque(mf, mi, df, s, _speed(mf, mi, df, PM_ENGINE, y_omega(mi)))


@njit(**JIT)
def keep_law_inputs(mi, df, s):
    """Keep the law's input values its last evaluation used, s into the step (see :func:`inputs_changed`).

    Part of :func:`write_outputs`, and all of it a step whose outputs nobody
    reads must still do: the next step's reuse test reads these.  Called in
    the real-time loop.
    """
    oli = mi[L.MI_LAW]
    od = mi[L.DF_LAW]
    df[od + LD_IN_END] = pedal_at(mi, df, s)
    df[od + LD_IN_END + 1] = _input(mi, df, LI_IN_LIMIT, s)
    df[od + LD_IN_END + 2] = _input(mi, df, LI_IN_GRADE, s)
    if mi[oli + LI_IN_DRAWBAR] >= 0:
        df[od + LD_IN_END + 3] = _input(mi, df, LI_IN_DRAWBAR, s)
    if mi[oli + LI_IN_PTO] >= 0:
        df[od + LD_IN_PTO] = _input(mi, df, LI_IN_PTO, s)


@njit(**JIT)
def inputs_finite(mi, df):
    """Are the values and rates of the law's inputs finite?  Called in the real-time loop."""
    oli = mi[L.MI_LAW]
    op = mi[L.DF_PLANT]
    n_in = mi[oli + LI_N_IN]
    probe = 0.0
    for slot in (LI_IN_PEDAL, LI_IN_LIMIT, LI_IN_GRADE, LI_IN_DRAWBAR, LI_IN_TARGET, LI_IN_DRIVER_ON, LI_IN_PTO):
        k = mi[oli + slot]
        if k >= 0:
            probe += (df[op + k] - df[op + k]) + (df[op + n_in + k] - df[op + n_in + k])
    return probe == 0.0  # x - x is NaN for inf or NaN


@njit(**JIT)
def inputs_changed(mi, df):
    """Do the law's inputs at the start of this step differ from those the previous step's end evaluation
    used?  Then that evaluation must not serve as this step's first stage (the core compares its own inputs
    and the state, not the plant's): the caller clears FLAG_REUSE.  Called in the real-time loop."""
    od = mi[L.DF_LAW]
    if mi[mi[L.MI_LAW] + LI_IN_DRAWBAR] >= 0 and df[od + LD_IN_END + 3] != _input(mi, df, LI_IN_DRAWBAR, 0.0):
        return True
    if mi[mi[L.MI_LAW] + LI_IN_PTO] >= 0 and df[od + LD_IN_PTO] != _input(mi, df, LI_IN_PTO, 0.0):
        return True
    return (df[od + LD_IN_END] != pedal_at(mi, df, 0.0)
            or df[od + LD_IN_END + 1] != _input(mi, df, LI_IN_LIMIT, 0.0)
            or df[od + LD_IN_END + 2] != _input(mi, df, LI_IN_GRADE, 0.0))
