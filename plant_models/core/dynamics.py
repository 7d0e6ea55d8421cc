"""Stage 1 of the method: the dynamics at a fixed friction mode.

With the mode fixed (which rows are stuck, which slip in which direction)
the motion is smooth: this module evaluates the time derivative of the
state vector ``y = [omega | theta | twist | act | work]`` for the
port-Hamiltonian model of Morselli, Zanasi & Ferracin (eq. 13)::

    M dw/dt = tau(t, w, theta, twist) + R^T mu,      delta = R w

* actuator states and capacities along a sub-step (first-order lag
  integrated exactly, normal force ``max(0, gain x - preload)``, static
  capacity ``K`` and Coulomb amplitude ``k``), kiss points included;
* the generalised force without the stuck rows' constraint forces: inputs,
  drag, spring-dampers, slipping rows' Coulomb/Stribeck/viscous forces,
  driven rows (prescribed relative acceleration);
* the accelerations ``P f`` through the constrained inverse inertia of the
  stuck set (built by :mod:`.modes`).

The forces of rows with further entries and of driven rows are in
:mod:`.rowforces`; the phases of the kinematic clutch rows, which turn an
engage command into the capacity the rows above see, in :mod:`.kinematic`.

Everything works on raw pointers into the flat buffers of :mod:`.layout`
and is called in the real-time loop.  :func:`_forces` collects every force
on the shafts at one stage point, in the order its stages (inlined into it)
add them: inputs and drag, the plant's force law, springs, slipping rows,
then the driven rows of :mod:`.rowforces`.
"""

from __future__ import annotations

import math


from .actuator import _caps_held, _caps_substep_held
from .jit import JIT, JIT_STAGE, call_law_at, kernel
from .layout import (
    H_ACT_HOLD, H_HYPER, DF_CAPK_T, DF_CAPS_T, DF_COEF_A, DF_COEF_B, DF_DIR, DF_DRIVE_ACC, DF_DRV_WS, DF_DT, DF_EXP_FULL,
    DF_EXP_H, DF_EXP_HALF, DF_F, DF_KIN_BACKUP, DF_KIN_CMD, DF_KIN_HOLD, DF_KIN_T0, DF_MU, DF_P, DF_POW, DF_PROW,
    DF_RHO, DF_TIME, DF_U_ACT, DF_U_ACT_RATE, DF_U_TAU, DF_U_TAU_RATE, DF_XACT, DF_Y, DI_DRIVE, DI_DRV_LIST,
    DI_FLAGS, DI_KIN_BACKUP, DI_KIN_PHASE, DI_MODE, DI_NSTUCK, DI_ORIENT, FLAG_DRIVE_REDUNDANT, H_G, H_N, H_P, H_S,
    KIN_DISENGAGED, KIN_DISENGAGING, KIN_ENGAGED, KIN_ENGAGING, MF_ACT_GAIN, MF_ACT_LAG, MF_ACT_PRELOAD, MF_DRAG,
    MF_GAIN_KINETIC, MF_GAIN_STATIC, MF_INV_INERTIA, MF_KIN_CAP, MF_KIN_SHIFT, MF_KIN_THRESH, MF_ROW_VISC,
    MF_SPRING_C, MF_SPRING_CA, MF_SPRING_CB, MF_SPRING_K, MF_SPRING_TX, MF_SPRING_TY, MF_STRIBECK_ALPHA,
    MF_STRIBECK_VS, MI_ROW_A, MI_ROW_B, MI_SPRING_A, MI_SPRING_B, MI_SPRING_NPTS, MODE_STUCK, W_DAMP, W_DRAG,
    W_IMPULSE, W_INPUT, W_ROW0, DF_COEF_X, DF_RHO_AB, DF_RHO_X, DI_CHILD, H_DENSE, MF_DRAGM, MF_MINV, MI_ROW_NX,
    MI_ROW_XOFF, MI_ROW_XSHAFT,
)
from .layout import DF_LAW_POW, DF_LAW_ZDOT, H_FN_LAW, H_LAW_NZ
from .rowforces import _drive_forces, _extra_force

ORIENT_HYPER = 3  # DI_ORIENT of a stuck tree row with other than two entries (its child: DI_CHILD)

# Every field is addressed as buffer[mi[SLOT] + index] on raw pointers; why: see .jit.


@kernel(**JIT)
def _sizes(mi):
    """(n shafts, g rows, s springs).  Called in the real-time loop."""
    return mi[H_N], mi[H_G], mi[H_S]


@kernel(**JIT)
def _yoff(n, g, s):
    """Offsets of the omega, theta, twist, act and work blocks inside a state vector.

    Called in the real-time loop.
    """
    return 0, n, 2 * n, 2 * n + s, 2 * n + s + g




# ==========================================================================
# small kernels
# ==========================================================================
@kernel(**JIT)
def _row_delta(mi, df, di, i, oy):
    """Relative speed of row i for the state vector at df[oy].

    A stuck tree row is evaluated in its tree orientation, child + rho*parent,
    which is exactly the expression the reconstruction zeroes, so it reads
    0.0 exactly; any other row uses ca*w_a + cb*w_b (the same value in exact
    arithmetic).  Called in the real-time loop.
    """
    a = mi[mi[MI_ROW_A] + i]
    b = mi[mi[MI_ROW_B] + i]
    o = di[mi[DI_ORIENT] + i]
    if o == 1:
        return df[mi[DF_COEF_B] + i] * (df[oy + b] + df[mi[DF_RHO] + i] * df[oy + a])
    if o == -1:
        return df[mi[DF_COEF_A] + i] * (df[oy + a] + df[mi[DF_RHO] + i] * df[oy + b])
    if o == ORIENT_HYPER:
        return _hyper_tree_delta(mi, df, di, i, oy)
    d = df[mi[DF_COEF_A] + i] * df[oy + a] + df[mi[DF_COEF_B] + i] * df[oy + b]
    if mi[mi[MI_ROW_NX] + i] > 0:
        d += _extra_sum(mi, df, i, oy)
    return d


@kernel(**JIT)
def _extra_sum(mi, df, i, oy):
    """Sum of coefficient times speed over the entries of row i beyond a and b, in their order.

    Called in the real-time loop.
    """
    ox = mi[MI_ROW_XOFF] + i
    q0 = mi[ox]
    oxs = mi[MI_ROW_XSHAFT]
    ocx = mi[DF_COEF_X]
    acc = 0.0
    for q in range(q0, q0 + mi[mi[MI_ROW_NX] + i]):
        acc += df[ocx + q] * df[oy + mi[oxs + q]]
    return acc


@kernel(**JIT)
def _hyper_parent_sum(mi, df, di, i, oy):
    """sum over the entries of stuck tree row i except its child of rho_e * w_e (rho_e = c_e / c_child).

    The one expression both the reconstruction (child = 0 - sum) and the
    relative speed (c_child * (child + sum)) use, term by term in the same
    order, so the row reads exactly 0.0 after the reconstruction.  Called in
    the real-time loop.
    """
    child = di[mi[DI_CHILD] + i]
    orab = mi[DF_RHO_AB] + 2 * i
    acc = 0.0
    if child != 0:
        acc += df[orab] * df[oy + mi[mi[MI_ROW_A] + i]]
    nx = mi[mi[MI_ROW_NX] + i]
    if child != 1 and nx >= 0:
        acc += df[orab + 1] * df[oy + mi[mi[MI_ROW_B] + i]]
    if nx > 0:
        q0 = mi[mi[MI_ROW_XOFF] + i]
        oxs = mi[MI_ROW_XSHAFT]
        orx = mi[DF_RHO_X]
        for q in range(nx):
            if child != 2 + q:
                acc += df[orx + q0 + q] * df[oy + mi[oxs + q0 + q]]
    return acc


@kernel(**JIT)
def _entry_shaft_coef(mi, df, i, e):
    """(shaft, current coefficient) of entry e of row i (0 a, 1 b, 2 + q further entry q).

    Called in the real-time loop.
    """
    if e == 0:
        return mi[mi[MI_ROW_A] + i], df[mi[DF_COEF_A] + i]
    if e == 1:
        return mi[mi[MI_ROW_B] + i], df[mi[DF_COEF_B] + i]
    q = mi[mi[MI_ROW_XOFF] + i] + e - 2
    return mi[mi[MI_ROW_XSHAFT] + q], df[mi[DF_COEF_X] + q]


@kernel(**JIT)
def _hyper_tree_delta(mi, df, di, i, oy):
    """Relative speed of a stuck tree row with other than two entries, in its substitution form
    c_child * (w_child + sum_e rho_e w_e): exactly 0.0 after the reconstruction.  Called in the real-time loop."""
    j, c = _entry_shaft_coef(mi, df, i, di[mi[DI_CHILD] + i])
    return c * (df[oy + j] + _hyper_parent_sum(mi, df, di, i, oy))


@kernel(**JIT)
def _abs_terms(mi, df, i, oy):
    """sum |c_e w_e| over the entries of row i: the scale of its rounding.  Called in the real-time loop."""
    ta = df[mi[DF_COEF_A] + i] * df[oy + mi[mi[MI_ROW_A] + i]]
    tb = df[mi[DF_COEF_B] + i] * df[oy + mi[mi[MI_ROW_B] + i]]
    acc = abs(ta) + abs(tb)
    nx = mi[mi[MI_ROW_NX] + i]
    if nx > 0:
        q0 = mi[mi[MI_ROW_XOFF] + i]
        for q in range(q0, q0 + nx):
            acc += abs(df[mi[DF_COEF_X] + q] * df[oy + mi[mi[MI_ROW_XSHAFT] + q]])
    return acc


@kernel(**JIT)
def _slip(mi, df, di, i, oy):
    """Relative speed of row i with rounding noise read as exactly zero.

    Right after a breakaway, or for a row leaving a closed cycle of stuck
    rows, the relative speed is the rounding error of a vanishing sum
    (a few ulp of the shaft speed terms) and its sign means nothing; it is
    taken as 0.0 so that the direction the friction solve chose stands.
    Used for mode decisions only, not in the dynamics.  Called in the real-time loop.
    """
    d = _row_delta(mi, df, di, i, oy)
    if mi[mi[MI_ROW_NX] + i] != 0:
        # a row over several shafts sums more terms, each rebuilt through a chain of substitutions:
        # 64 ulp of its terms
        if abs(d) <= 1.4210854715202004e-14 * _abs_terms(mi, df, i, oy):
            return 0.0
        return d
    ta = df[mi[DF_COEF_A] + i] * df[oy + mi[mi[MI_ROW_A] + i]]
    tb = df[mi[DF_COEF_B] + i] * df[oy + mi[mi[MI_ROW_B] + i]]
    if abs(d) <= 8.881784197001252e-16 * (abs(ta) + abs(tb)):  # 4 ulp
        return 0.0
    return d


@kernel(**JIT)
def _spring_elastic(mf, mi, j, phi):
    """Elastic torque of spring j at twist phi: linear, or piecewise linear extended linearly.

    Called in the real-time loop.
    """
    m = mi[mi[MI_SPRING_NPTS] + j]
    if m == 0:
        return mf[mi[MF_SPRING_K] + j] * phi
    P = mi[H_P]
    ox = mi[MF_SPRING_TX] + j * P
    oyy = mi[MF_SPRING_TY] + j * P
    if m == 1:
        return mf[oyy]
    q = 1
    while q < m - 1 and phi > mf[ox + q]:
        q += 1
    x0 = mf[ox + q - 1]
    y0 = mf[oyy + q - 1]
    return y0 + (mf[oyy + q] - y0) / (mf[ox + q] - x0) * (phi - x0)


@kernel(**JIT)
def _lag_factors(mf, mi, df, h):
    """Cache exp(-h/2T) and exp(-h/T) of every lagged actuator for sub-steps of length h.

    Called in the real-time loop.
    """
    if df[mi[DF_EXP_H]] == h:
        return
    g = mi[H_G]
    olag = mi[MF_ACT_LAG]
    oh = mi[DF_EXP_HALF]
    of = mi[DF_EXP_FULL]
    for i in range(g):
        T = mf[olag + i]
        if T > 0.0:
            e = math.exp(-0.5 * h / T)
            df[oh + i] = e
            df[of + i] = e * e
        else:
            df[oh + i] = 0.0
            df[of + i] = 0.0
    df[mi[DF_EXP_H]] = h


@kernel(**JIT)
def _caps(mf, mi, df, s_abs, h, stage, ox0):
    """Actuator states and capacities at one stage point of the current sub-step.

    stage 0, 1, 2 = time 0, h/2, h into the sub-step that starts s_abs after
    the step start; ox0 = offset of the actuator states at the sub-step
    start.  Results go to block ``stage`` of DF_XACT, DF_CAPS_T, DF_CAPK_T.
    The command is u(s) = u0 + rate*s; a lag x' = (u - x)/T is advanced with
    its closed-form solution (factors from _lag_factors), so any lag is stable
    at any step.  F_N = max(0, gain*x - preload) is zero below the kiss point;
    K = gain_static*F_N, k = gain_kinetic*F_N.  Capacities depend on time
    only, so each stage point is computed once per sub-step.  Called in the
    real-time loop.
    """
    g = mi[H_G]
    tau = 0.0 if stage == 0 else (0.5 * h if stage == 1 else h)
    olag = mi[MF_ACT_LAG]
    ogain = mi[MF_ACT_GAIN]
    opre = mi[MF_ACT_PRELOAD]
    ogs = mi[MF_GAIN_STATIC]
    ogk = mi[MF_GAIN_KINETIC]
    ou0 = mi[DF_U_ACT]
    our = mi[DF_U_ACT_RATE]
    ox = mi[DF_XACT] + stage * g
    ocs = mi[DF_CAPS_T] + stage * g
    ock = mi[DF_CAPK_T] + stage * g
    ofac = mi[DF_EXP_HALF] if stage == 1 else mi[DF_EXP_FULL]
    for i in range(g):
        r = df[our + i]
        v_start = df[ou0 + i] + r * s_abs
        T = mf[olag + i]
        if T > 0.0:
            if stage == 0:
                x = df[ox0 + i]
            else:
                x = v_start + r * tau - r * T + (df[ox0 + i] - v_start + r * T) * df[ofac + i]
        else:
            x = v_start + r * tau
        df[ox + i] = x
        fn = mf[ogain + i] * x - mf[opre + i]
        if fn < 0.0:
            fn = 0.0
        df[ocs + i] = mf[ogs + i] * fn
        df[ock + i] = mf[ogk + i] * fn
    if stage != 0 and mi[H_ACT_HOLD] == 1:  # rows on a fill ramp (core/actuator.py), after the loop left as it was
        _caps_held(mf, mi, df, s_abs, tau, stage, ox0)

@kernel(**JIT)
def _caps_substep(mf, mi, df, s_abs, h, ox0):
    """Actuator states and capacities at all three stage points (0, h/2, h) of a sub-step.

    The same values as _caps for stages 0, 1 and 2 (call _lag_factors(h)
    first), in one pass; a row whose command is held (rate 0) and whose
    actuator has settled (no lag, or the state equals the command) has the
    same capacity at all three points and is computed once.  Returns True
    when some row's normal force changes sign between the stage points (a
    kiss point may lie inside: see _kiss_scan).  Called in the real-time loop.
    """
    g = mi[H_G]
    olag = mi[MF_ACT_LAG]
    ogain = mi[MF_ACT_GAIN]
    opre = mi[MF_ACT_PRELOAD]
    ogs = mi[MF_GAIN_STATIC]
    ogk = mi[MF_GAIN_KINETIC]
    ou0 = mi[DF_U_ACT]
    our = mi[DF_U_ACT_RATE]
    ox = mi[DF_XACT]
    ocs = mi[DF_CAPS_T]
    ock = mi[DF_CAPK_T]
    oeh = mi[DF_EXP_HALF]
    oef = mi[DF_EXP_FULL]
    hh = 0.5 * h
    kiss = False
    for i in range(g):
        r = df[our + i]
        v = df[ou0 + i] + r * s_abs
        T = mf[olag + i]
        gn = mf[ogain + i]
        pre = mf[opre + i]
        if T > 0.0:
            x0 = df[ox0 + i]
            if r == 0.0 and x0 == v:
                x1 = x0
                x2 = x0
            else:
                c = x0 - v + r * T
                x1 = v + r * hh - r * T + c * df[oeh + i]
                x2 = v + r * h - r * T + c * df[oef + i]
        else:
            x0 = v
            x1 = v + r * hh
            x2 = v + r * h
        df[ox + i] = x0
        df[ox + g + i] = x1
        df[ox + 2 * g + i] = x2
        f0 = gn * x0 - pre
        gs = mf[ogs + i]
        gk = mf[ogk + i]
        fn = f0 if f0 > 0.0 else 0.0
        df[ocs + i] = gs * fn
        df[ock + i] = gk * fn
        if x1 == x0 and x2 == x0:
            df[ocs + g + i] = df[ocs + i]
            df[ock + g + i] = df[ock + i]
            df[ocs + 2 * g + i] = df[ocs + i]
            df[ock + 2 * g + i] = df[ock + i]
            continue
        f1 = gn * x1 - pre
        f2 = gn * x2 - pre
        if (f0 > 0.0) != (f1 > 0.0) or (f0 > 0.0) != (f2 > 0.0):
            kiss = True
        fn = f1 if f1 > 0.0 else 0.0
        df[ocs + g + i] = gs * fn
        df[ock + g + i] = gk * fn
        fn = f2 if f2 > 0.0 else 0.0
        df[ocs + 2 * g + i] = gs * fn
        df[ock + 2 * g + i] = gk * fn
    if mi[H_ACT_HOLD] == 1:  # rows on a fill ramp (core/actuator.py), after the loop left as it was
        kiss = _caps_substep_held(mf, mi, df, s_abs, h, ox0) or kiss
    return kiss


@kernel(**JIT_STAGE)
def _spring_forces(mf, mi, df, oy, of, n, s):
    """Add the spring-dampers' torques to DF_F (at ``of``); returns their damping power (<= 0).

    Part of :func:`_forces`.  Called in the real-time loop.
    """
    p_damp = 0.0
    osa = mi[MI_SPRING_A]
    osb = mi[MI_SPRING_B]
    osca = mi[MF_SPRING_CA]
    oscb = mi[MF_SPRING_CB]
    osc = mi[MF_SPRING_C]
    otw = oy + 2 * n
    for j in range(s):
        a = mi[osa + j]
        b = mi[osb + j]
        fa = mf[osca + j]
        fb = mf[oscb + j]
        rate = fa * df[oy + a] + fb * df[oy + b]
        c = mf[osc + j]
        tq = _spring_elastic(mf, mi, j, df[otw + j]) + c * rate
        df[of + a] -= fa * tq
        df[of + b] -= fb * tq
        p_damp -= c * rate * rate
    return p_damp


@kernel(**JIT)
def _forces(mf, mi, df, di, s_abs, h, stage, oy, ox0):
    """Generalised force on the shafts without the stuck rows' constraint forces.

    tau + R^T mu of eq. (13) of Morselli, Zanasi & Ferracin, mu the slipping rows' (eq. 15) and driven rows'
    forces, with the capacities of the given stage point (from _caps).  Fills DF_F, DF_MU (friction force of
    every non-stuck row), DF_PROW (its power), DF_DT (its relative speed) and DF_POW (input, drag, damping
    power).  Called in the real-time loop.
    """
    n, g, s = _sizes(mi)
    tau = 0.0 if stage == 0 else (0.5 * h if stage == 1 else h)
    of = mi[DF_F]
    p_in, p_drag = _input_drag_forces(mf, mi, df, oy, of, n, s_abs + tau)
    if mi[H_FN_LAW] != 0:
        # the plant's force law adds its torques here, before the rows: the mode solve, the events and
        # the driven rows see them as they see the inputs (s_abs + tau: time into the step, as for the inputs)
        df[mi[DF_LAW_POW]] = call_law_at(mi[H_FN_LAW], mf, mi, df, di, s_abs + tau, oy, of)
    p_damp = _spring_forces(mf, mi, df, oy, of, n, s) if s > 0 else 0.0
    nd = _slip_row_forces(mf, mi, df, di, oy, of, g, stage)
    if nd > 0:
        _drive_forces(mf, mi, df, di, nd)
    op = mi[DF_POW]
    df[op] = p_in
    df[op + 1] = p_drag
    df[op + 2] = p_damp


@kernel(**JIT_STAGE)
def _input_drag_forces(mf, mi, df, oy, of, n, t):
    """DF_F = inputs - drag (N m); returns (input power, drag power), W.

    Inputs ramp over the step (DF_U_TAU + DF_U_TAU_RATE t, t the time into the step, s); drag is b w (MF_DRAG,
    N m s/rad), or a reduced system's matrix T^T diag(b) T over its independent speeds.
    """
    out = mi[DF_U_TAU]
    outr = mi[DF_U_TAU_RATE]
    p_in = 0.0
    p_drag = 0.0
    if mi[H_DENSE] == 1:
        odm = mi[MF_DRAGM]
        for j in range(n):
            w = df[oy + j]
            tq = df[out + j] + df[outr + j] * t
            bw = 0.0
            for k in range(n):
                bw += mf[odm + j * n + k] * df[oy + k]
            df[of + j] = tq - bw
            p_in += tq * w
            p_drag -= bw * w
    else:
        odrag = mi[MF_DRAG]
        for j in range(n):
            w = df[oy + j]
            tq = df[out + j] + df[outr + j] * t
            b = mf[odrag + j]
            df[of + j] = tq - b * w
            p_in += tq * w
            p_drag -= b * w * w
    return p_in, p_drag


@kernel(**JIT_STAGE)
def _slip_row_forces(mf, mi, df, di, oy, of, g, stage):
    """Friction forces of the slipping rows onto DF_F; lists the driven rows in DI_DRV_LIST, returns their number.

    Each row not stuck gets its relative speed delta (DF_DT, rad/s) and, unless driven, the force
    mu = -k sign(delta) - c delta (N m; eq. 15 of Morselli, Zanasi & Ferracin: k the stage point's Coulomb
    amplitude, raised towards the static capacity K by the Stribeck law, Biagiotti & Zanasi eq. 2; c viscous,
    MF_ROW_VISC) into DF_MU, its power mu delta (W) into DF_PROW; a stuck row's are 0.0.
    """
    omode = mi[DI_MODE]
    odir = mi[DF_DIR]
    omu = mi[DF_MU]
    oprow = mi[DF_PROW]
    odt = mi[DF_DT]
    ocs = mi[DF_CAPS_T] + stage * g
    ock = mi[DF_CAPK_T] + stage * g
    ovs = mi[MF_STRIBECK_VS]
    oal = mi[MF_STRIBECK_ALPHA]
    ovisc = mi[MF_ROW_VISC]
    ora = mi[MI_ROW_A]
    orb = mi[MI_ROW_B]
    oca = mi[DF_COEF_A]
    ocb = mi[DF_COEF_B]
    oor = mi[DI_ORIENT]
    orho = mi[DF_RHO]
    odrv = mi[DI_DRIVE]
    odl = mi[DI_DRV_LIST]
    onx = mi[MI_ROW_NX]
    hyper = mi[H_HYPER] > 0
    nd = 0
    for i in range(g):
        if di[omode + i] == MODE_STUCK:
            df[omu + i] = 0.0
            df[oprow + i] = 0.0
            continue
        # _row_delta with the offsets hoisted out of the loop
        ca = df[oca + i]
        cb = df[ocb + i]
        wa = df[oy + mi[ora + i]]
        wb = df[oy + mi[orb + i]]
        o = di[oor + i]
        nx = mi[onx + i] if hyper else 0
        if o == 0:
            d = ca * wa + cb * wb
            if nx > 0:
                d += _extra_sum(mi, df, i, oy)
        elif o == 1:
            d = cb * (wb + df[orho + i] * wa)
        elif o == -1:
            d = ca * (wa + df[orho + i] * wb)
        else:
            d = _hyper_tree_delta(mi, df, di, i, oy)
        df[odt + i] = d
        if di[odrv + i] == 1:
            di[odl + nd] = i  # force from the prescribed acceleration, below
            nd += 1
            continue
        sg = df[odir + i]
        if sg == 0.0:
            sg = 1.0 if d > 0.0 else (-1.0 if d < 0.0 else 0.0)
        kin = df[ock + i]
        vs = mf[ovs + i]
        if vs > 0.0:  # Stribeck law, Biagiotti & Zanasi, eq. (2)
            kin += (df[ocs + i] - kin) * math.exp(-(abs(d / vs) ** mf[oal + i]))
        m_i = -kin * sg - mf[ovisc + i] * d
        df[omu + i] = m_i
        df[oprow + i] = m_i * d
        df[of + mi[ora + i]] += ca * m_i
        df[of + mi[orb + i]] += cb * m_i
        if nx > 0:
            _extra_force(mi, df, i, m_i)
    return nd


@kernel(**JIT)
def _accel(mf, mi, df, di, oacc):
    """Shaft accelerations from DF_F: P f with stuck rows, M^-1 f without.  Called in the real-time loop."""
    n = mi[H_N]
    of = mi[DF_F]
    if di[mi[DI_NSTUCK]] == 0 and mi[H_DENSE] == 1:
        om = mi[MF_MINV]
        for r in range(n):
            a = 0.0
            for c in range(n):
                a += mf[om + r * n + c] * df[of + c]
            df[oacc + r] = a
    elif di[mi[DI_NSTUCK]] == 0:
        oinv = mi[MF_INV_INERTIA]
        for j in range(n):
            df[oacc + j] = df[of + j] * mf[oinv + j]
    else:
        oP = mi[DF_P]
        for r in range(n):
            a = 0.0
            for c in range(n):
                a += df[oP + r * n + c] * df[of + c]
            df[oacc + r] = a


@kernel(**JIT)
def _deriv_finish(mf, mi, df, di, oy, ody):
    """Derivative of the state at df[oy] from the last _forces evaluation (at that state).

    Called in the real-time loop.
    """
    n, g, s = _sizes(mi)
    oo, ot, otw, oa, ow = _yoff(n, g, s)
    _accel(mf, mi, df, di, ody)
    for j in range(n):
        df[ody + ot + j] = df[oy + j]
    if s > 0:
        osa = mi[MI_SPRING_A]
        osb = mi[MI_SPRING_B]
        osca = mi[MF_SPRING_CA]
        oscb = mi[MF_SPRING_CB]
        for j in range(s):
            df[ody + otw + j] = mf[osca + j] * df[oy + mi[osa + j]] + mf[oscb + j] * df[oy + mi[osb + j]]
    oprow = mi[DF_PROW]
    for i in range(g):
        df[ody + ow + W_ROW0 + i] = df[oprow + i]
    op = mi[DF_POW]
    df[ody + ow + W_INPUT] = df[op]
    df[ody + ow + W_DRAG] = df[op + 1]
    df[ody + ow + W_DAMP] = df[op + 2]
    df[ody + ow + W_IMPULSE] = 0.0
    if mi[H_FN_LAW] != 0:
        # the law's work account ends the work block; its states follow it
        ol = ody + ow + W_ROW0 + g
        df[ol] = df[mi[DF_LAW_POW]]
        oz = mi[DF_LAW_ZDOT]
        for k in range(mi[H_LAW_NZ]):
            df[ol + 1 + k] = df[oz + k]


@kernel(**JIT)
def _deriv(mf, mi, df, di, s_abs, h, stage, oy, ox0, ody):
    """Time derivative of the state at df[oy] in the current (fixed) friction mode.  Called in the real-time loop."""
    _forces(mf, mi, df, di, s_abs, h, stage, oy, ox0)
    _deriv_finish(mf, mi, df, di, oy, ody)
