"""Stage 3a of the method: a fixed step integrated through its events.

Between events the mode is fixed and the dynamics (:mod:`.dynamics`) are
smooth; they are integrated with the classical 4th-order Runge-Kutta method.
After a trial sub-step two kinds of event are checked: a slipping row whose
relative speed reached zero (also when it dipped through zero and back
within the sub-step, seen on the RK4 dense output) and a stuck row whose
required force exceeded its capacity.  The earliest one is located inside
the sub-step (regula falsi, Illinois variant, each trial an RK4 sub-step
from the sub-step start, switching to whichever row a trial shows crossing
first), the state is advanced to it and the mode is solved there again
(:mod:`.modes`).  Kiss points (a clutch's normal force crossing zero)
end a sub-step too; they depend on time only and are located on the
actuator's closed form.

Everything works on raw pointers into the flat buffers of :mod:`.layout`
and is called in the real-time loop.
"""

from __future__ import annotations

import math

import numpy as np

from .jit import JIT, JIT_STAGE, kernel
from .actuator import _act_normal_force
from .dynamics import (
    _accel, _caps, _caps_substep, _deriv, _deriv_finish, _forces, _lag_factors, _sizes, _slip,
    _yoff,
)
from .modes import (
    _mode_prepare, _project, _reconstruct, _set_stuck_list, _solve_cache, _solve_mode, _stuck_lambda,
)
from .layout import (
    CNT_LOCATE_ITER_MAX, DF_CAPK_T, DF_CAPS_T, DF_COEF_A, DF_COEF_B, DF_DIR, DF_DT, DF_GEV0, DF_GEV1, DF_GEVC,
    DF_K1, DF_K2, DF_K3, DF_K4, DF_LAMW, DF_TMPN, DF_XACT, DF_Y, DF_Y0, DF_YS, DF_YT, DI_COUNTERS, DI_FLAGS,
    DI_MODE, DI_NSTUCK, DI_SAVED_MODE, DI_STUCK, FLAG_CACHE_VALID, H_G, H_MAX_LOCATE, H_NY, MF_ACT_GAIN,
    MF_ACT_PRELOAD, MF_GAIN_KINETIC, MF_GAIN_STATIC, MF_SETTINGS, MI_ROW_A, MI_ROW_B, MODE_SLIP, MODE_STUCK,
    SET_BREAK_MARGIN, SET_EVENT_TOL,
    DF_COEF_X, H_FN_LAW, H_HYPER, H_LAW_NZ, H_ONEWAY, MI_ONEWAY, MI_ROW_NX, MI_ROW_XOFF, MI_ROW_XSHAFT,
)
from .stuckset import _held_by_stuck

REDUNDANT = 8  # added to _integrate_substep's code: the mode fit for a redundant candidate set

# ==========================================================================
# integration with events inside a step
# ==========================================================================
@kernel(**JIT)
def _rk4(mf, mi, df, di, s_abs, h, oy0, ok1, oyout, caps_ready):
    """One classical RK4 sub-step of length h from df[oy0] (k1 at df[ok1] given) into df[oyout].

    The actuator block is not integrated: its states follow the closed form
    (stage points from _caps, computed here for h unless ``caps_ready`` says
    the caller already did).  Called in the real-time loop.
    """
    n, g, s = _sizes(mi)
    ny = mi[H_NY]
    oo, ot, otw, oa, ow = _yoff(n, g, s)
    ok2 = mi[DF_K2]
    ok3 = mi[DF_K3]
    ok4 = mi[DF_K4]
    oys = mi[DF_YS]
    ox0 = oy0 + oa
    if not caps_ready:
        _lag_factors(mf, mi, df, h)
        _caps(mf, mi, df, s_abs, h, 1, ox0)
        _caps(mf, mi, df, s_abs, h, 2, ox0)
    hh = 0.5 * h
    # stage states: speeds and spring twists (the core reads no angle at the stage points); a force law
    # may read the angles and its own states, so with a law those are staged too (never the work accounts)
    law = mi[H_FN_LAW] != 0
    oz = ny - mi[H_LAW_NZ]
    for q in range(n):
        df[oys + q] = df[oy0 + q] + hh * df[ok1 + q]
    for q in range(otw, oa):
        df[oys + q] = df[oy0 + q] + hh * df[ok1 + q]
    if law:
        _stage_law_states(df, oys, oy0, ok1, hh, ot, otw, oz, ny)
    _deriv(mf, mi, df, di, s_abs, h, 1, oys, ox0, ok2)
    for q in range(n):
        df[oys + q] = df[oy0 + q] + hh * df[ok2 + q]
    for q in range(otw, oa):
        df[oys + q] = df[oy0 + q] + hh * df[ok2 + q]
    if law:
        _stage_law_states(df, oys, oy0, ok2, hh, ot, otw, oz, ny)
    _deriv(mf, mi, df, di, s_abs, h, 1, oys, ox0, ok3)
    for q in range(n):
        df[oys + q] = df[oy0 + q] + h * df[ok3 + q]
    for q in range(otw, oa):
        df[oys + q] = df[oy0 + q] + h * df[ok3 + q]
    if law:
        _stage_law_states(df, oys, oy0, ok3, h, ot, otw, oz, ny)
    _deriv(mf, mi, df, di, s_abs, h, 2, oys, ox0, ok4)
    h6 = h / 6.0
    for q in range(oa):
        df[oyout + q] = df[oy0 + q] + h6 * (df[ok1 + q] + 2.0 * (df[ok2 + q] + df[ok3 + q]) + df[ok4 + q])
    for q in range(ow, ny):
        df[oyout + q] = df[oy0 + q] + h6 * (df[ok1 + q] + 2.0 * (df[ok2 + q] + df[ok3 + q]) + df[ok4 + q])
    oxa = mi[DF_XACT] + 2 * g
    for i in range(g):
        df[oyout + oa + i] = df[oxa + i]
    _reconstruct(mf, mi, df, di, oyout)


@kernel(**JIT)
def _stage_law_states(df, oys, oy0, ok, c, ot, otw, oz, ny):
    """Angles and law states (from oz) of an RK4 stage state (with a force law only).

    The work accounts are not staged: nothing evaluated at a stage point
    reads them.  Called in the real-time loop.
    """
    for q in range(ot, otw):
        df[oys + q] = df[oy0 + q] + c * df[ok + q]
    for q in range(oz, ny):
        df[oys + q] = df[oy0 + q] + c * df[ok + q]


@kernel(**JIT)
def _event_values(mf, mi, df, di, oy, stage, ogev):
    """Event function of each row from the last _forces evaluation (made at df[oy], at stage).

    Positive before the row's event, <= 0 once it happened.  Slipping row
    with friction: dir*delta (reaching zero is the event).  Stuck row:
    K*(1 + margin) - |lambda| (exceeding the capacity is the event; the small
    margin keeps the located point unambiguous for the solve that follows,
    which uses K itself).  Rows that cannot have an event: +inf.  Called in the real-time loop.
    """
    g = mi[H_G]
    omode = mi[DI_MODE]
    odir = mi[DF_DIR]
    odt = mi[DF_DT]
    ocs = mi[DF_CAPS_T] + stage * g
    ock = mi[DF_CAPK_T] + stage * g
    ost = mi[DI_STUCK]
    olam = mi[DF_LAMW]
    margin = mf[mi[MF_SETTINGS] + SET_BREAK_MARGIN]
    for i in range(g):
        v = np.inf
        if di[omode + i] == MODE_SLIP and (df[ocs + i] > 0.0 or df[ock + i] > 0.0):
            v = df[odir + i] * df[odt + i]
        df[ogev + i] = v
    m = di[mi[DI_NSTUCK]]
    if m > 0:
        _stuck_lambda(mi, df, di)
        for k in range(m):
            i = di[ost + k]
            df[ogev + i] = df[ocs + i] * (1.0 + margin) - abs(df[olam + k])
        if mi[H_ONEWAY] > 0:
            # a freewheel also releases where its force falls through zero (then it overruns)
            oow = mi[MI_ONEWAY]
            for k in range(m):
                i = di[ost + k]
                if mi[oow + i] == 1:
                    rel = df[olam + k] + df[ocs + i] * margin
                    if rel < df[ogev + i]:
                        df[ogev + i] = rel


@kernel(**JIT)
def _start_consistent(mf, mi, df, di, oy):
    """Does the mode still fit the state at a sub-step start?  (Uses the stage-0 evaluation.)

    Returns 0 when it does; 2 when a stuck row lost its capacity or needs
    more force than its capacity (the inputs jumped between steps: a full
    mode solve is due); 3 when a slipping row with friction moves against
    its direction (its zero crossing was missed: after an exhausted event
    budget, or a state written from outside), which is handled like an
    event now; 1 for the other misfits, which _mode_prepare sorts out (a
    row without friction moving against its direction, a free row with
    speed and capacity, a row at zero speed that acquired capacity; the
    last one makes _mode_prepare ask for the full solve itself).  A row the
    last solve left slipping at zero speed whose speed the stuck rows hold
    (:func:`.stuckset._held_by_stuck`) is no misfit: the solve would leave
    it so again; then 6 (the mode fits; the candidates the solve would see,
    that row with the stuck ones, are redundant).  Called in the real-time loop.
    """
    g = mi[H_G]
    omode = mi[DI_MODE]
    odir = mi[DF_DIR]
    odt = mi[DF_DT]
    ocs = mi[DF_CAPS_T]
    ost = mi[DI_STUCK]
    olam = mi[DF_LAMW]
    ock = mi[DF_CAPK_T]
    oneway = mi[H_ONEWAY] > 0
    oow = mi[MI_ONEWAY]
    for k in range(di[mi[DI_NSTUCK]]):
        cap = df[ocs + di[ost + k]]
        if cap <= 0.0 or abs(df[olam + k]) > cap:
            return 2
        if oneway and mi[oow + di[ost + k]] == 1 and df[olam + k] < -1e-10 * cap:
            return 2  # a freewheel whose force turned negative: it overruns
    misfit = 0
    held = False
    for i in range(g):
        md = di[omode + i]
        if md == MODE_STUCK:
            continue
        d = df[odt + i]
        if d != 0.0 and df[odir + i] * d <= 0.0:
            d = _slip(mi, df, di, i, oy)  # a wrong sign may be rounding noise at zero
        if d == 0.0:
            # a row at zero speed with capacity may stick: the solve decides, unless it already left the
            # row slipping there and the stuck rows hold its speed at zero
            if md == MODE_SLIP and df[ocs + i] > 0.0 and di[mi[DI_NSTUCK]] > 0 and _held_by_stuck(mf, mi, df, di, i):
                held = True
            elif df[ocs + i] > 0.0:
                misfit = 1
        elif md == MODE_SLIP:
            if df[odir + i] * d < 0.0:
                if df[ocs + i] > 0.0 or df[ock + i] > 0.0:
                    return 3
                misfit = 1
        elif df[ocs + i] > 0.0:
            misfit = 1
    return 6 if misfit == 0 and held else misfit


@kernel(**JIT)
def _kiss_scan(mf, mi, df, s_abs, h, ox0):
    """End of the sub-step at the first kiss point (normal force crossing zero) inside it, else h.

    The friction force has a kink where a clutch's normal force reaches zero
    (a slipping row's Coulomb force starts or stops growing; a free row at
    zero speed acquires capacity), so RK4 must not step across it.  The
    crossing depends on time only (closed-form actuator), so it is located
    on the closed form, without integrating.  Uses the stage points
    DF_XACT of the full sub-step (caps already computed for h).  The
    returned time is on the far side of the crossing (normal force zero or
    of the new sign), so the next sub-step does not find it again.  Called in the real-time loop.
    """
    g = mi[H_G]
    ogain = mi[MF_ACT_GAIN]
    opre = mi[MF_ACT_PRELOAD]
    ogs = mi[MF_GAIN_STATIC]
    ogk = mi[MF_GAIN_KINETIC]
    ox = mi[DF_XACT]
    tol = mf[mi[MF_SETTINGS] + SET_EVENT_TOL] * h
    maxit = mi[H_MAX_LOCATE]
    best = h
    for i in range(g):
        gn = mf[ogain + i]
        if gn == 0.0 or (mf[ogs + i] == 0.0 and mf[ogk + i] == 0.0):
            continue
        pre = mf[opre + i]
        f0 = gn * df[ox + i] - pre
        f1 = gn * df[ox + g + i] - pre
        f2 = gn * df[ox + 2 * g + i] - pre
        scale = abs(gn * df[ox + i]) + abs(pre) + 1e-300
        eps = 1e-9 * scale
        if f0 > eps:
            s0 = 1.0
        elif f0 < -eps:
            s0 = -1.0
        else:
            continue  # at the kiss point already (the sub-step starts on the kink)
        # "crossed" means clearly on the new side, so that rounding in the actuator's
        # closed form cannot put the sub-step end back on the old side
        shift = 1e-13 * scale * s0  # root of F + shift: just past the kiss point
        if s0 * (f1 + shift) < 0.0:
            hi = 0.5 * h
            fhi = f1 + shift
        elif s0 * (f2 + shift) < 0.0:
            hi = h
            fhi = f2 + shift
        else:
            continue
        lo = 0.0
        flo = f0 + shift
        side = 0
        it = 0
        while hi - lo > tol and it < maxit:
            it += 1
            c = (lo * fhi - hi * flo) / (fhi - flo)
            if not (c > lo and c < hi) or it % 4 == 0:
                c = 0.5 * (lo + hi)
            fc = _act_normal_force(mf, mi, df, i, s_abs, c, ox0) + shift
            if s0 * fc > 0.0:
                lo = c
                flo = fc
                if side == -1:
                    fhi *= 0.5
                side = -1
            else:
                hi = c
                fhi = fc
                if side == 1:
                    flo *= 0.5
                side = 1
        if hi < best:
            best = hi
    return best


@kernel(**JIT)
def _first_crossing(g, oga, ogb, t_a, t_b, df):
    """The row whose event function went from >= 0 (at t_a) to <= 0 (at t_b) first, by linear estimate.

    A row open at t_a (+inf) has no event before its kiss point, which ends the sub-step: <= 0 there means it
    slipped through zero while open (no event; the step turns its direction).  Returns (row, estimated time),
    row -1 if none.  Called in the real-time loop.
    """
    first = -1
    sfirst = t_b
    for i in range(g):
        gb = df[ogb + i]
        ga = df[oga + i]
        if gb <= 0.0 and gb < ga and ga >= 0.0 and ga < np.inf:
            si = t_a + (t_b - t_a) * ga / (ga - gb)
            if first < 0 or si < sfirst:
                first = i
                sfirst = si
    return first, sfirst


@kernel(**JIT)
def _dip_slopes(mi, df, i, ok1, oacc):
    """Relative accelerations of row i (more than two entries) at the sub-step start (DF_K1) and end.

    Called in the real-time loop.
    """
    a = mi[mi[MI_ROW_A] + i]
    b = mi[mi[MI_ROW_B] + i]
    ca = df[mi[DF_COEF_A] + i]
    cb = df[mi[DF_COEF_B] + i]
    s0 = ca * df[ok1 + a] + cb * df[ok1 + b]
    s1 = ca * df[oacc + a] + cb * df[oacc + b]
    q0 = mi[mi[MI_ROW_XOFF] + i]
    for q in range(q0, q0 + mi[mi[MI_ROW_NX] + i]):
        j = mi[mi[MI_ROW_XSHAFT] + q]
        c = df[mi[DF_COEF_X] + q]
        s0 += c * df[ok1 + j]
        s1 += c * df[oacc + j]
    return s0, s1


@kernel(**JIT)
def _dip_time(mf, mi, df, di, ok1, h):
    """Time of a suspected double zero crossing of a slipping row inside the sub-step, or -1.

    A slipping row can reach zero relative speed and leave it again within
    one sub-step, so its event function is positive at both ends.  The cubic
    Hermite interpolant of the event function (values and slopes at both
    ends, from the RK4 start derivative k1 and the acceleration at the
    trial end) shows such a dip; the caller confirms it with an RK4
    sub-step to the dip's minimum.  Uses the end-of-trial evaluation in
    DF_F and DF_GEV0 / DF_GEV1.  Called in the real-time loop.
    """
    g = mi[H_G]
    omode = mi[DI_MODE]
    odir = mi[DF_DIR]
    og0 = mi[DF_GEV0]
    og1 = mi[DF_GEV1]
    ora = mi[MI_ROW_A]
    orb = mi[MI_ROW_B]
    oca = mi[DF_COEF_A]
    ocb = mi[DF_COEF_B]
    oacc = mi[DF_TMPN]
    have_end = False
    best = -1.0
    for i in range(g):
        if di[omode + i] != MODE_SLIP:
            continue
        g0 = df[og0 + i]
        g1 = df[og1 + i]
        if not (g0 >= 0.0 and g1 > 0.0 and g1 < np.inf):
            continue
        if not have_end:
            _accel(mf, mi, df, di, oacc)
            have_end = True
        a = mi[ora + i]
        b = mi[orb + i]
        dirn = df[odir + i]
        ca = df[oca + i]
        cb = df[ocb + i]
        if mi[H_HYPER] > 0 and mi[mi[MI_ROW_NX] + i] > 0:
            s0, s1 = _dip_slopes(mi, df, i, ok1, oacc)
            s0 = dirn * s0 * h
            s1 = dirn * s1 * h
        else:
            s0 = dirn * (ca * df[ok1 + a] + cb * df[ok1 + b]) * h
            s1 = dirn * (ca * df[oacc + a] + cb * df[oacc + b]) * h
        if s0 >= 0.0 and s1 <= 0.0:
            continue  # no interior minimum
        # p(u) = c3 u^3 + c2 u^2 + s0 u + g0 on u in [0, 1]
        c3 = 2.0 * (g0 - g1) + s0 + s1
        c2 = 3.0 * (g1 - g0) - 2.0 * s0 - s1
        # critical points: 3 c3 u^2 + 2 c2 u + s0 = 0
        for r in range(2):
            if abs(c3) <= 1e-14 * (abs(c2) + abs(s0)):
                if r == 1 or c2 == 0.0:
                    continue
                u = -s0 / (2.0 * c2)
            else:
                disc = c2 * c2 - 3.0 * c3 * s0
                if disc < 0.0:
                    break
                sq = math.sqrt(disc)
                u = (-c2 - sq) / (3.0 * c3) if r == 0 else (-c2 + sq) / (3.0 * c3)
            if u > 0.0 and u < 1.0:
                val = ((c3 * u + c2) * u + s0) * u + g0
                if val < 0.0 and (best < 0.0 or u * h < best):
                    best = u * h
    return best


@kernel(**JIT)
def _trial(mf, mi, df, di, s_abs, c, oy0, ok1, oyt, ox0, ogev, caps_ready):
    """RK4 from the sub-step start over c into df[oyt], then the forces and event functions there.

    Called in the real-time loop.
    """
    _rk4(mf, mi, df, di, s_abs, c, oy0, ok1, oyt, caps_ready)
    _forces(mf, mi, df, di, s_abs, c, 2, oyt, ox0)
    _event_values(mf, mi, df, di, oyt, 2, ogev)


@kernel(**JIT_STAGE)
def _locate_event(mf, mi, df, di, s_abs, h, hi, first):
    """Time of the earliest event inside (0, hi] of the sub-step from s_abs, row ``first`` crossing first.

    Regula falsi (Illinois) on the event function of the row that crosses
    first, each trial an RK4 sub-step from the sub-step start (DF_Y0), with a
    bisection safeguard; whenever a trial shows another row crossing
    earlier, the search switches to that row.  On return DF_GEV0 / DF_GEV1
    hold the event functions just before and at the returned time.  Called
    in the real-time loop.
    """
    n, g, s = _sizes(mi)
    oy0 = mi[DF_Y0]
    ok1 = mi[DF_K1]
    oyt = mi[DF_YT]
    og0 = mi[DF_GEV0]
    og1 = mi[DF_GEV1]
    ogc = mi[DF_GEVC]
    ocnt = mi[DI_COUNTERS]
    ox0 = oy0 + 2 * n + s
    tol = mf[mi[MF_SETTINGS] + SET_EVENT_TOL] * h
    lo = 0.0
    row = first
    flo = df[og0 + row]
    fhi = df[og1 + row]
    side = 0
    maxit = mi[H_MAX_LOCATE]
    it = 0
    width_mark = hi - lo
    while hi - lo > tol and it < maxit:
        it += 1
        if flo > 0.0:
            c = (lo * fhi - hi * flo) / (fhi - flo)
        else:
            c = 0.5 * (lo + hi)
        if it % 4 == 0:
            if hi - lo > 0.5 * width_mark:
                c = 0.5 * (lo + hi)  # regula falsi stalled: bisect
            width_mark = hi - lo
        if not (c > lo and c < hi):
            c = 0.5 * (lo + hi)
        _trial(mf, mi, df, di, s_abs, c, oy0, ok1, oyt, ox0, ogc, False)
        nrow, snrow = _first_crossing(g, og0, ogc, lo, c, df)
        if nrow >= 0:
            hi = c
            for i in range(g):
                df[og1 + i] = df[ogc + i]
            if nrow != row:
                row = nrow
                side = 0
                flo = df[og0 + row]
            elif side == 1:
                flo *= 0.5
            fhi = df[ogc + row]
            side = 1
        else:
            lo = c
            for i in range(g):
                df[og0 + i] = df[ogc + i]
            flo = df[ogc + row]
            if side == -1:
                fhi *= 0.5
            side = -1
    if it > di[ocnt + CNT_LOCATE_ITER_MAX]:
        di[ocnt + CNT_LOCATE_ITER_MAX] = it
    return hi


@kernel(**JIT)
def _integrate_substep(mf, mi, df, di, s_abs, h, check_start, reuse):
    """Integrate DF_Y from s_abs over at most h, stopping just past the first event.

    ``reuse``: the previous step's end evaluation (see _reuse_valid) serves as the first stage.
    Returns (time advanced, code): code 0 = reached the end with no event (the last force evaluation
    is at the final state), 1 = stopped at an event, 2 / 4 / 5 = the mode does not fit the state at
    the start (nothing was advanced; 4: a stuck row is over its capacity, a full mode solve is due;
    5: a slipping row crossed zero unseen, handle it as an event), 3 = stopped at a kiss point (the
    caller checks the mode there); plus REDUNDANT when the start check found a row slipping at zero
    speed held by the stuck rows (see _start_consistent).

    Events: a row's event function changing sign over the trial, or a
    slipping row's relative speed dipping through zero and back inside it
    (see _dip_time); the earliest one is located by :func:`_locate_event`.
    Called in the real-time loop.
    """
    n, g, s = _sizes(mi)
    ny = mi[H_NY]
    oa = 2 * n + s
    oy = mi[DF_Y]
    ok1 = mi[DF_K1]
    oyt = mi[DF_YT]
    oy0 = mi[DF_Y0]
    og0 = mi[DF_GEV0]
    og1 = mi[DF_GEV1]
    ogc = mi[DF_GEVC]
    for q in range(ny):
        df[oy0 + q] = df[oy + q]
    ox0 = oy0 + oa
    # one evaluation at the start serves RK4's first stage and the consistency check
    _lag_factors(mf, mi, df, h)
    kiss = _caps_substep(mf, mi, df, s_abs, h, ox0)
    if reuse:
        # the last step ended with an evaluation at this very state and these inputs: its
        # forces, event functions and derivative (in DF_K1) are this sub-step's first stage
        for i in range(g):
            df[og0 + i] = df[og1 + i]
    else:
        _forces(mf, mi, df, di, s_abs, h, 0, oy0, ox0)
        _event_values(mf, mi, df, di, oy0, 0, og0)
    redundant = 0
    if check_start:
        misfit = _start_consistent(mf, mi, df, di, oy0)
        if misfit == 6:
            redundant = REDUNDANT  # reported as the solve the fit saved would have (ST_OVERCONSTRAINED)
        elif misfit != 0:
            return 0.0, 2 if misfit == 1 else (4 if misfit == 2 else 5)
    if not reuse:
        _deriv_finish(mf, mi, df, di, oy0, ok1)
    hk = _kiss_scan(mf, mi, df, s_abs, h, ox0) if kiss else h
    end_code = 0 if hk == h else 3
    _trial(mf, mi, df, di, s_abs, hk, oy0, ok1, oyt, ox0, og1, hk == h)
    first, sfirst = _first_crossing(g, og0, og1, 0.0, hk, df)
    hi = hk
    if first < 0:
        tdip = _dip_time(mf, mi, df, di, ok1, hk)
        if tdip > 0.0:
            _trial(mf, mi, df, di, s_abs, tdip, oy0, ok1, oyt, ox0, ogc, False)
            first, sfirst = _first_crossing(g, og0, ogc, 0.0, tdip, df)
            if first >= 0:
                hi = tdip
                for i in range(g):
                    df[og1 + i] = df[ogc + i]
            else:
                # not confirmed by the integration: take the sub-step as it was
                _trial(mf, mi, df, di, s_abs, hk, oy0, ok1, oyt, ox0, og1, False)
    if first < 0:
        for q in range(ny):
            df[oy + q] = df[oyt + q]
        return hk, end_code + redundant
    hi = _locate_event(mf, mi, df, di, s_abs, h, hi, first)
    _rk4(mf, mi, df, di, s_abs, hi, oy0, ok1, oyt, False)
    for q in range(ny):
        df[oy + q] = df[oyt + q]
    return hi, 1 + redundant


@kernel(**JIT)
def _handle_event(mf, mi, df, di, s_abs, t_abs):
    """At an event: project rows that reached zero speed onto exactly zero, then solve the mode.

    Called in the real-time loop.
    """
    n, g, s = _sizes(mi)
    oy = mi[DF_Y]
    omode = mi[DI_MODE]
    odir = mi[DF_DIR]
    ocs = mi[DF_CAPS_T]
    ock = mi[DF_CAPK_T]
    osv = mi[DI_SAVED_MODE]
    _caps(mf, mi, df, s_abs, 0.0, 0, oy + 2 * n + s)
    crossed = False
    for i in range(g):
        di[osv + i] = di[omode + i]
        if di[omode + i] == MODE_SLIP and (df[ocs + i] > 0.0 or df[ock + i] > 0.0):
            if df[odir + i] * _slip(mi, df, di, i, oy) <= 0.0:
                di[omode + i] = MODE_STUCK
                crossed = True
    if crossed:
        # momentum-consistent projection onto delta = 0 for the stuck and the crossing rows;
        # afterwards the crossing rows read exactly zero and the solve takes them as candidates
        _set_stuck_list(mi, di)
        _solve_cache(mf, mi, df, di)
        _project(mf, mi, df, di, oy)
        for i in range(g):
            di[omode + i] = di[osv + i]
        _set_stuck_list(mi, di)
        di[mi[DI_FLAGS] + FLAG_CACHE_VALID] = 0
    # the mode solve takes each crossing row's direction from before the crossing, so a
    # reversal is recognised; _mode_prepare keeps MODE_SLIP rows at zero speed as they are
    _mode_prepare(mf, mi, df, di, s_abs, oy, True)
    return _solve_mode(mf, mi, df, di, s_abs, oy, t_abs)
