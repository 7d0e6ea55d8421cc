"""Exact static/Coulomb friction core for shafts coupled by gear/clutch rows.

The model is eq. (13) of Morselli, Zanasi & Ferracin (seed 003)::

    M dw/dt = tau(t, w, theta, twist) + R^T mu,      delta = R w

with ``n`` shafts of inertia ``M = diag(J)``, ``g`` rows of ``R`` (each row
couples two shafts: chain rows ``[1, -1]``, gear rows ``[r_a, r_b]`` with
radii, reverse gears with a negative entry) and one friction force ``mu_i``
per row.  ``tau`` holds the external torques, viscous drag to ground and the
spring-damper couplings (driveline compliance, torsional dampers).

Friction per row
    * slipping (``delta_i != 0``): ``mu_i = -k_i(delta_i) sign(delta_i) - c_i delta_i``
      with Coulomb amplitude ``k_i`` (optionally the Stribeck law of seed 000,
      eq. 2) and viscous row drag ``c_i``;
    * stuck (``delta_i == 0``): ``mu_i = lambda_i``, the constraint force that
      keeps ``delta_i`` at zero, valid while ``|lambda_i| <= K_i`` (static
      capacity).  All rows stuck at the same time are solved together: the
      partition problem of eq. (18) is the box-constrained QP
      ``min 1/2 l^T W l + b^T l,  -K <= l <= K`` with ``W = R_c M^-1 R_c^T``
      (a strictly convex problem with a unique solution when the stuck rows
      are independent), solved exactly by a primal active-set method with a
      fixed iteration cap.

Capacities come from an actuator per row: command ``u`` (clutch pressure, Pa)
-> optional first-order lag (integrated exactly) -> normal force
``F_N = max(0, gain * x - preload)`` (piston area times pressure minus the
return spring, zero below the kiss point) -> ``K = gain_static * F_N``,
``k = gain_kinetic * F_N``.

Integration (fixed outer step, exact events inside it)
    Between events the friction mode (which rows are stuck, which slip in
    which direction) is fixed and the dynamics are smooth; they are integrated
    with the classical 4th-order Runge-Kutta method, the stuck rows enforced
    through the constrained inverse inertia ``P`` (``dw/dt = P f``).  After a
    trial step the core checks two kinds of event: a slipping row whose
    relative speed reached zero (also when it dipped through zero and back
    within the step, seen on the RK4 dense output), and a stuck row whose
    required force exceeded its capacity.  The earliest one is located inside
    the step (regula falsi, Illinois variant, each trial an RK4 sub-step from
    the sub-step start, switching to whichever row a trial shows crossing
    first), the state is advanced to it, the mode is solved again there, and
    integration continues with the rest of the step.  Kiss points (a clutch's
    normal force crossing zero, a kink of its friction force in time) end a
    sub-step too; they depend on time only and are located on the
    actuator's closed form.  The number of event sub-steps and of solver
    iterations per step is capped, so a step's cost is bounded.

Exactness
    Shaft speeds of a stuck group are rebuilt from the group's root shaft
    along a spanning tree of its stuck rows, and the relative speed of a tree
    row is evaluated in the same orientation, so a stuck row reports
    ``delta == 0.0`` exactly (not 1e-16) and never drifts.

Everything here is compiled with ``@njit(cache=True, nogil=True)``, works on
the preallocated flat buffers of :mod:`plant_models.core.layout`, allocates
nothing per step and holds no Python object.  Public entry points have
explicit signatures, so compilation happens at import, never during a run.
"""

from __future__ import annotations

import hashlib
import math
import os
from pathlib import Path

import numpy as np
from numba import njit, types
from numba.extending import intrinsic

from .layout import (  # noqa: F401  (slot constants are compile-time constants)
    CNT_BUDGET_HITS, CNT_EVENTS, CNT_LOCATE_ITER_MAX, CNT_ROLLBACKS, CNT_SOLVER_ITER_LAST,
    CNT_SOLVER_ITER_MAX, CNT_STEPS, CNT_SUBSTEPS_MAX, DF_A, DF_ACCEL, DF_BACKUP, DF_BV,
    DF_CAP_K, DF_CAP_S, DF_CAPK_T, DF_CAPS_T, DF_CH, DF_COEF_A, DF_COEF_B, DF_DELTA, DF_DIR, DF_DT,
    DF_EV_TIME, DF_EXP_FULL, DF_EXP_H, DF_EXP_HALF, DF_F, DF_GEV0, DF_GEV1, DF_GEVC, DF_GRAD, DF_HI,
    DF_K1, DF_K2, DF_K3, DF_K4, DF_REUSE_MF, DF_REUSE_U, DF_REUSE_Y, DF_SPLIT_C, DF_SPLIT_G,
    DF_L, DF_LAMBDA_REQ, DF_LAMW, DF_LO, DF_MU, DF_P, DF_POW, DF_PREV_DIR, DF_PROW, DF_RHO,
    DF_SPRING_TQ, DF_TIME, DF_TMPN, DF_TMPN2, DF_U_ACT, DF_U_ACT_RATE, DF_U_TAU,
    DF_U_TAU_RATE, DF_W, DF_XACT, DF_XV, DF_Y, DF_Y0, DF_YS, DF_YT, DI_BACKUP, DI_BND,
    DI_CAND, DI_CBND, DI_COMP, DI_COUNTERS, DI_EV_KIND, DI_EV_ROW, DI_FLAGS, DI_IDX,
    DI_LOCKED, DI_MODE, DI_NSTUCK, DI_NTREE, DI_ORIENT, DI_PREV_MODE, DI_QUEUE,
    DI_SAVED_MODE, DI_STUCK, DI_TREE_C, DI_TREE_P, DI_TREE_R, EV_BREAKAWAY, EV_REVERSAL,
    EV_STICK, FLAG_CACHE_VALID, FLAG_COEF_DIRTY, FLAG_LOCKED, FLAG_OVERCONSTRAINED, FLAG_REUSE, H_REUSE,
    FLAG_STATUS, H_EVCAP, H_G, H_MAX_EVENTS, H_MAX_ITER, H_MAX_LOCATE, H_N, H_NY, H_P, H_S,
    MF_ACT_GAIN, MF_ACT_LAG, MF_ACT_PRELOAD, MF_DRAG, MF_GAIN_KINETIC, MF_GAIN_STATIC,
    MF_INERTIA, MF_INV_INERTIA, MF_ROW_VISC, MF_SETTINGS, MF_SPRING_C, MF_SPRING_CA,
    MF_SPRING_CB, MF_SPRING_K, MF_SPRING_TX, MF_SPRING_TY, MF_STRIBECK_ALPHA,
    MF_STRIBECK_VS, MI_ROW_A, MI_ROW_B, MI_SPRING_A, MI_SPRING_B, MI_SPRING_NPTS,
    MODE_FREE, MODE_SLIP, MODE_STUCK, N_SETTINGS, SET_BREAK_MARGIN, SET_CYCLE_TOL, SET_EVENT_TOL,
    SET_RANK_TOL, SET_REG, SET_SOLVER_TOL, ST_BAD_INPUT, ST_EVENT_BUDGET, ST_LOCKED,
    ST_NONFINITE, ST_OVERCONSTRAINED, ST_SOLVER_LIMIT, W_DAMP, W_DRAG, W_IMPULSE, W_INPUT,
    W_ROW0, DF_DRIVE_ACC, DI_DRIVE, DF_KIN_T0, DF_KIN_HOLD, DI_KIN_PHASE, DF_KIN_CMD, DF_DRV_WS,
    DI_DRV_LIST, MF_KIN_SHIFT, MF_KIN_CAP, MF_KIN_THRESH, H_NKIN, KIN_DISENGAGED, KIN_ENGAGING,
    KIN_ENGAGED, KIN_DISENGAGING, ST_DRIVE_REDUNDANT, FLAG_DRIVE_REDUNDANT,
)

def _drop_stale_plant_caches() -> None:
    """Delete the cached kernels of the plant modules when the core's sources changed.

    numba checks a cached function against its own source file only.  The
    plants' compiled steps inline ``_step`` from this module, so after a
    change here their caches would keep running the old core.  The hash of
    this package's sources is kept next to the plants' caches; when it
    differs, their cache files are removed and compile again on import.
    """
    here = Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for path in sorted(here.glob("*.py")):
        try:
            digest.update(path.read_bytes())
        except OSError:
            return
    stamp = digest.hexdigest()
    plants = here.parent / "plants"
    folders = [plants / "__pycache__"]
    user_dir = os.environ.get("NUMBA_CACHE_DIR")
    if user_dir:
        # numba names a package's cache folder after the package and a hash of its path
        folders += [p for p in Path(user_dir).glob("plants_*") if p.is_dir()]
    for folder in folders:
        marker = folder / "core_sources.sha256"
        try:
            if marker.read_text() == stamp:
                continue
        except OSError:
            pass
        for f in list(folder.glob("*.nbi")) + list(folder.glob("*.nbc")):
            try:
                f.unlink()
            except OSError:
                pass
        try:
            folder.mkdir(parents=True, exist_ok=True)
            marker.write_text(stamp)
        except OSError:
            pass


_drop_stale_plant_caches()

JIT = dict(cache=True, nogil=True, error_model="numpy")
# The functions of the real-time path are plain calls, not numba's IR-level inlining
# (``inline="always"``): LLVM inlines them where it pays when it links a caller,
# the step runs as fast (bench/bench_core.py), and compiling the core takes
# about a fifth of the time (IR inlining re-typed every inlined body at every call site).
HOT = JIT
JIT_SUMS = dict(JIT, fastmath={"reassoc"})  # for bit-exact comparisons by summed differences only

BUFS = "float64[::1], int64[::1], float64[::1], int64[::1]"


@intrinsic
def _data_ptr(typingctx, arr):
    """The data pointer of a contiguous array (a typed pointer: indexing it is a plain load/store).

    Called in the real-time loop.
    """
    sig = types.CPointer(arr.dtype)(arr)

    def codegen(context, builder, signature, args):
        return context.make_array(signature.args[0])(context, builder, args[0]).data
    return sig, codegen


@njit(**JIT)
def _raw_f(a):
    """The float64 buffer as a raw pointer: indexed without a reference-counted owner or a
    negative-index fix-up (every index the core uses is non-negative).  Called in the real-time loop."""
    return _data_ptr(a)


@njit(**JIT)
def _raw_i(a):
    """The int64 buffer as a raw pointer (see _raw_f).  Called in the real-time loop."""
    return _data_ptr(a)


# Every field is addressed as buffer[mi[SLOT] + index]: the compiled code
# creates no array views, and the public entry points hand the internal
# functions raw typed pointers to the four buffers (_raw_f/_raw_i).  An array
# argument costs a reference-count update (an atomic operation) at every call
# and every array index a negative-index fix-up (a shift, a mask and an add);
# together they cost more than the arithmetic of a step.  A pointer has
# neither.  The entry points' own array arguments keep the buffers alive for
# the duration of the call.  State vectors (y, y0, trial, stage) all live in
# df and are passed around by their offset.


@njit(**HOT)
def _sizes(mi):
    """(n shafts, g rows, s springs).  Called in the real-time loop."""
    return mi[H_N], mi[H_G], mi[H_S]


@njit(**HOT)
def _yoff(n, g, s):
    """Offsets of the omega, theta, twist, act and work blocks inside a state vector.

    Called in the real-time loop.
    """
    return 0, n, 2 * n, 2 * n + s, 2 * n + s + g




# ==========================================================================
# small kernels
# ==========================================================================
@njit(**HOT)
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
    return df[mi[DF_COEF_A] + i] * df[oy + a] + df[mi[DF_COEF_B] + i] * df[oy + b]


@njit(**HOT)
def _slip(mi, df, di, i, oy):
    """Relative speed of row i with rounding noise read as exactly zero.

    Right after a breakaway, or for a row leaving a closed cycle of stuck
    rows, the relative speed is the rounding error of a vanishing sum
    (a few ulp of the shaft speed terms) and its sign means nothing; it is
    taken as 0.0 so that the direction the friction solve chose stands.
    Used for mode decisions only, not in the dynamics.  Called in the real-time loop.
    """
    d = _row_delta(mi, df, di, i, oy)
    ta = df[mi[DF_COEF_A] + i] * df[oy + mi[mi[MI_ROW_A] + i]]
    tb = df[mi[DF_COEF_B] + i] * df[oy + mi[mi[MI_ROW_B] + i]]
    if abs(d) <= 8.881784197001252e-16 * (abs(ta) + abs(tb)):  # 4 ulp
        return 0.0
    return d


@njit(**HOT)
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


@njit(**HOT)
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


@njit(**HOT)
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

@njit(**HOT)
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
    return kiss


@njit(**HOT)
def _forces(mf, mi, df, di, s_abs, h, stage, oy, ox0):
    """Generalised force on the shafts without the stuck rows' constraint forces.

    Uses the capacities of the given stage point (computed by _caps).  Fills
    DF_F, DF_MU (friction force of every non-stuck row), DF_PROW (its power),
    DF_DT (its relative speed) and DF_POW (input, drag, damping power).
    Called in the real-time loop.
    """
    n, g, s = _sizes(mi)
    tau = 0.0 if stage == 0 else (0.5 * h if stage == 1 else h)
    of = mi[DF_F]
    odrag = mi[MF_DRAG]
    out = mi[DF_U_TAU]
    outr = mi[DF_U_TAU_RATE]
    p_in = 0.0
    p_drag = 0.0
    for j in range(n):
        w = df[oy + j]
        tq = df[out + j] + df[outr + j] * (s_abs + tau)
        b = mf[odrag + j]
        df[of + j] = tq - b * w
        p_in += tq * w
        p_drag -= b * w * w
    p_damp = 0.0
    if s > 0:
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
        if o == 0:
            d = ca * wa + cb * wb
        elif o == 1:
            d = cb * (wb + df[orho + i] * wa)
        else:
            d = ca * (wa + df[orho + i] * wb)
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
        if vs > 0.0:  # Stribeck law, seed 000 eq. (2)
            kin += (df[ocs + i] - kin) * math.exp(-(abs(d / vs) ** mf[oal + i]))
        m_i = -kin * sg - mf[ovisc + i] * d
        df[omu + i] = m_i
        df[oprow + i] = m_i * d
        df[of + mi[ora + i]] += ca * m_i
        df[of + mi[orb + i]] += cb * m_i
    if nd > 0:
        _drive_forces(mf, mi, df, di, nd)
    op = mi[DF_POW]
    df[op] = p_in
    df[op + 1] = p_drag
    df[op + 2] = p_damp


@njit(**HOT)
def _drive_forces(mf, mi, df, di, nd):
    """Forces of the driven rows in DI_DRV_LIST: the constraint forces that give them their
    prescribed relative accelerations (seed 001's kinematic clutch while engaging).

    With the other forces f in DF_F and the stuck set's projector P (M^-1
    when nothing is stuck), driven rows D need R_D P (f + R_D^T mu) = a, a
    small dense system (nd x nd, usually 1 x 1) solved by Gaussian
    elimination with partial pivoting.  A driven row whose relative speed the
    stuck rows already fix (a zero pivot) cannot be prescribed: all driven
    forces are then zero and FLAG_DRIVE_REDUNDANT is set.  Adds the forces to
    DF_F and writes DF_MU and DF_PROW.  Called in the real-time loop.
    """
    n = mi[H_N]
    g = mi[H_G]
    of = mi[DF_F]
    odl = mi[DI_DRV_LIST]
    ows = mi[DF_DRV_WS]
    opv = ows  # [nd*n] P r_k^T
    oD = ows + g * n  # [nd*nd]
    ob = oD + g * g  # [nd]
    ora = mi[MI_ROW_A]
    orb = mi[MI_ROW_B]
    oca = mi[DF_COEF_A]
    ocb = mi[DF_COEF_B]
    oinv = mi[MF_INV_INERTIA]
    oP = mi[DF_P]
    oacc = mi[DF_DRIVE_ACC]
    stuck = di[mi[DI_NSTUCK]] > 0
    for k in range(nd):
        i = di[odl + k]
        a = mi[ora + i]
        b = mi[orb + i]
        ca = df[oca + i]
        cb = df[ocb + i]
        acc = 0.0
        for r in range(n):
            if stuck:
                v = df[oP + r * n + a] * ca + df[oP + r * n + b] * cb
            else:
                v = 0.0
                if r == a:
                    v = ca * mf[oinv + a]
                elif r == b:
                    v = cb * mf[oinv + b]
            df[opv + k * n + r] = v
            acc += v * df[of + r]
        df[ob + k] = df[oacc + i] - acc
    scale = 0.0
    for k in range(nd):
        for q in range(nd):
            iq = di[odl + q]
            v = df[oca + iq] * df[opv + k * n + mi[ora + iq]] + df[ocb + iq] * df[opv + k * n + mi[orb + iq]]
            df[oD + q * nd + k] = v
        scale = max(scale, abs(df[oD + k * nd + k]))
    ok = scale > 0.0
    for c in range(nd):
        if not ok:
            break
        piv = c
        for r in range(c + 1, nd):
            if abs(df[oD + r * nd + c]) > abs(df[oD + piv * nd + c]):
                piv = r
        if abs(df[oD + piv * nd + c]) <= 1e-12 * scale:
            ok = False
            break
        if piv != c:
            for q in range(nd):
                df[oD + c * nd + q], df[oD + piv * nd + q] = df[oD + piv * nd + q], df[oD + c * nd + q]
            df[ob + c], df[ob + piv] = df[ob + piv], df[ob + c]
        for r in range(c + 1, nd):
            fac = df[oD + r * nd + c] / df[oD + c * nd + c]
            for q in range(c, nd):
                df[oD + r * nd + q] -= fac * df[oD + c * nd + q]
            df[ob + r] -= fac * df[ob + c]
    omu = mi[DF_MU]
    oprow = mi[DF_PROW]
    odt = mi[DF_DT]
    if not ok:
        di[mi[DI_FLAGS] + FLAG_DRIVE_REDUNDANT] = 1
        for k in range(nd):
            i = di[odl + k]
            df[omu + i] = 0.0
            df[oprow + i] = 0.0
        return
    for c in range(nd - 1, -1, -1):
        v = df[ob + c]
        for q in range(c + 1, nd):
            v -= df[oD + c * nd + q] * df[ob + q]
        df[ob + c] = v / df[oD + c * nd + c]
    for k in range(nd):
        i = di[odl + k]
        m_i = df[ob + k]
        df[omu + i] = m_i
        df[oprow + i] = m_i * df[odt + i]
        df[of + mi[ora + i]] += df[oca + i] * m_i
        df[of + mi[orb + i]] += df[ocb + i] * m_i


@njit(**HOT)
def _accel(mf, mi, df, di, oacc):
    """Shaft accelerations from DF_F: P f with stuck rows, M^-1 f without.  Called in the real-time loop."""
    n = mi[H_N]
    of = mi[DF_F]
    if di[mi[DI_NSTUCK]] == 0:
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


@njit(**HOT)
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


@njit(**HOT)
def _deriv(mf, mi, df, di, s_abs, h, stage, oy, ox0, ody):
    """Time derivative of the state at df[oy] in the current (fixed) friction mode.  Called in the real-time loop."""
    _forces(mf, mi, df, di, s_abs, h, stage, oy, ox0)
    _deriv_finish(mf, mi, df, di, oy, ody)


# ==========================================================================
# stuck set: caches, tree and exact reconstruction
# ==========================================================================
@njit(**JIT)
def _fill_rows(mi, df, di, olist, m, oA):
    """Dense m x n rows of R (into df[oA]) for the row indices listed at di[olist].  Called in the real-time loop."""
    n = mi[H_N]
    ora = mi[MI_ROW_A]
    orb = mi[MI_ROW_B]
    oca = mi[DF_COEF_A]
    ocb = mi[DF_COEF_B]
    for k in range(m):
        i = di[olist + k]
        for c in range(n):
            df[oA + k * n + c] = 0.0
        df[oA + k * n + mi[ora + i]] += df[oca + i]
        df[oA + k * n + mi[orb + i]] += df[ocb + i]


@njit(**JIT)
def _delassus(mf, mi, df, oA, m, oW):
    """W = A M^-1 A^T (m x m, stride m).  Called in the real-time loop."""
    n = mi[H_N]
    oinv = mi[MF_INV_INERTIA]
    for r in range(m):
        for c in range(r, m):
            acc = 0.0
            for q in range(n):
                acc += df[oA + r * n + q] * mf[oinv + q] * df[oA + c * n + q]
            df[oW + r * m + c] = acc
            df[oW + c * m + r] = acc


@njit(**JIT)
def _cholesky(df, di, oW, m, oidx, k, oLc, reg):
    """Cholesky factor (k x k, stride k, at df[oLc]) of W[idx, idx] + reg*I.

    idx = di[oidx : oidx+k].  Returns False at a pivot that is not positive.  Called in the real-time loop.
    """
    for r in range(k):
        ir = di[oidx + r]
        for c in range(r + 1):
            acc = df[oW + ir * m + di[oidx + c]]
            if r == c:
                acc += reg
            for q in range(c):
                acc -= df[oLc + r * k + q] * df[oLc + c * k + q]
            if r == c:
                if acc <= 0.0:
                    return False
                df[oLc + r * k + r] = math.sqrt(acc)
            else:
                df[oLc + r * k + c] = acc / df[oLc + c * k + c]
    return True


@njit(**JIT)
def _chol_solve(df, oLc, k, stride, ox):
    """Solve (Lc Lc^T) x = x in place (Lc: k x k lower triangular, given row stride).

    Called in the real-time loop.
    """
    for r in range(k):
        acc = df[ox + r]
        for q in range(r):
            acc -= df[oLc + r * stride + q] * df[ox + q]
        df[ox + r] = acc / df[oLc + r * stride + r]
    for r in range(k - 1, -1, -1):
        acc = df[ox + r]
        for q in range(r + 1, k):
            acc -= df[oLc + q * stride + r] * df[ox + q]
        df[ox + r] = acc / df[oLc + r * stride + r]


@njit(**JIT)
def _build_tree(mf, mi, df, di):
    """Spanning forest of the stuck rows, cycle consistency and locked groups.

    A group whose stuck rows close a cycle with a ratio product other than the
    identity (e.g. two different gears between the same two shafts) can only
    turn at zero speed: it is marked locked.  Returns True if any shaft is
    locked.  Called in the real-time loop.
    """
    n, g, s = _sizes(mi)
    ora = mi[MI_ROW_A]
    orb = mi[MI_ROW_B]
    oca = mi[DF_COEF_A]
    ocb = mi[DF_COEF_B]
    oor = mi[DI_ORIENT]
    orho = mi[DF_RHO]
    otp = mi[DI_TREE_P]
    otc = mi[DI_TREE_C]
    otr = mi[DI_TREE_R]
    ocomp = mi[DI_COMP]
    olock = mi[DI_LOCKED]
    oq = mi[DI_QUEUE]
    ogain = mi[DF_TMPN]
    ost = mi[DI_STUCK]
    ns = di[mi[DI_NSTUCK]]
    ctol = mf[mi[MF_SETTINGS] + SET_CYCLE_TOL]
    for i in range(g):
        di[oor + i] = 0
    for v in range(n):
        di[ocomp + v] = -1
        di[olock + v] = 0
    ntree = 0
    any_locked = False
    for root in range(n):
        if di[ocomp + root] != -1:
            continue
        di[ocomp + root] = root
        df[ogain + root] = 1.0
        qh = 0
        qt = 1
        di[oq] = root
        while qh < qt:
            v = di[oq + qh]
            qh += 1
            for k in range(ns):
                i = di[ost + k]
                if di[oor + i] != 0:
                    continue
                if mi[ora + i] == v:
                    other = mi[orb + i]
                    cv = df[oca + i]
                    co = df[ocb + i]
                    o = 1
                elif mi[orb + i] == v:
                    other = mi[ora + i]
                    cv = df[ocb + i]
                    co = df[oca + i]
                    o = -1
                else:
                    continue
                if di[ocomp + other] == -1:
                    di[ocomp + other] = root
                    di[oor + i] = o
                    rho = cv / co
                    df[orho + i] = rho
                    df[ogain + other] = -rho * df[ogain + v]
                    di[otp + ntree] = v
                    di[otc + ntree] = other
                    di[otr + ntree] = i
                    ntree += 1
                    di[oq + qt] = other
                    qt += 1
                else:
                    di[oor + i] = 2  # seen, not a tree row
    for k in range(ns):
        i = di[ost + k]
        if di[oor + i] == 2:
            di[oor + i] = 0
            ta = df[oca + i] * df[ogain + mi[ora + i]]
            tb = df[ocb + i] * df[ogain + mi[orb + i]]
            if abs(ta + tb) > ctol * (abs(ta) + abs(tb)):
                root = di[ocomp + mi[ora + i]]
                for v in range(n):
                    if di[ocomp + v] == root:
                        di[olock + v] = 1
                any_locked = True
    di[mi[DI_NTREE]] = ntree
    return any_locked


@njit(**HOT)
def _reconstruct(mf, mi, df, di, oy):
    """Rebuild the speeds of stuck groups from their roots so stuck rows read exactly zero.

    Called in the real-time loop.
    """
    if di[mi[DI_NSTUCK]] == 0:
        return
    n = mi[H_N]
    olock = mi[DI_LOCKED]
    if di[mi[DI_FLAGS] + FLAG_LOCKED] == 1:
        for v in range(n):
            if di[olock + v] == 1:
                df[oy + v] = 0.0
    otp = mi[DI_TREE_P]
    otc = mi[DI_TREE_C]
    otr = mi[DI_TREE_R]
    orho = mi[DF_RHO]
    for e in range(di[mi[DI_NTREE]]):
        c = di[otc + e]
        if di[olock + c] == 1:
            continue
        df[oy + c] = -(df[orho + di[otr + e]] * df[oy + di[otp + e]])


@njit(**JIT)
def _build_cache(mf, mi, df, di):
    """Constrained inverse inertia P, force map L and spanning tree of the stuck list.

    Redundant stuck rows (R_nu not of full row rank) are detected by an
    incremental Cholesky factorisation with a relative pivot test: P comes
    from an independent subset I (the motion is unique), and the forces of
    all stuck rows are the minimum-norm split of the force the subset needs
    (exact, see below).  Returns status bits (overconstrained, locked).  Called in the real-time loop.
    """
    n, g, s = _sizes(mi)
    st = 0
    m = di[mi[DI_NSTUCK]]
    ofl = mi[DI_FLAGS]
    di[ofl + FLAG_CACHE_VALID] = 1
    di[ofl + FLAG_OVERCONSTRAINED] = 0
    di[ofl + FLAG_LOCKED] = 0
    if m == 0:
        _build_tree(mf, mi, df, di)
        return 0
    oset = mi[MF_SETTINGS]
    oinv = mi[MF_INV_INERTIA]
    oA = mi[DF_A]
    oW = mi[DF_W]
    oLc = mi[DF_CH]
    oP = mi[DF_P]
    oL = mi[DF_L]
    oidx = mi[DI_IDX]
    ox = mi[DF_XV]
    _fill_rows(mi, df, di, mi[DI_STUCK], m, oA)
    _delassus(mf, mi, df, oA, m, oW)
    # greedy independent subset: extend a factor (stride g) row by row
    r = 0
    rtol = mf[oset + SET_RANK_TOL]
    for k in range(m):
        di[oidx + r] = k
        for c in range(r):
            a = df[oW + k * m + di[oidx + c]]
            for q in range(c):
                a -= df[oLc + r * g + q] * df[oLc + c * g + q]
            df[oLc + r * g + c] = a / df[oLc + c * g + c]
        d = df[oW + k * m + k]
        for q in range(r):
            d -= df[oLc + r * g + q] * df[oLc + r * g + q]
        if d > rtol * df[oW + k * m + k]:
            df[oLc + r * g + r] = math.sqrt(d)
            r += 1
    # P = M^-1 - Z^T (A_I M^-1 A_I^T)^-1 Z,  Z = A_I M^-1
    for a in range(n):
        for b in range(n):
            df[oP + a * n + b] = mf[oinv + a] if a == b else 0.0
    for col in range(n):
        for q in range(r):
            df[ox + q] = df[oA + di[oidx + q] * n + col] * mf[oinv + col]
        _chol_solve(df, oLc, r, g, ox)
        for a in range(n):
            acc = 0.0
            for q in range(r):
                acc += df[oA + di[oidx + q] * n + a] * df[ox + q]
            df[oP + a * n + col] -= acc * mf[oinv + a]
    if r == n:
        for a in range(n * n):
            df[oP + a] = 0.0
    if r == m:
        # independent rows: L = -W^-1 A M^-1 (the factor of W is the one just built)
        for col in range(n):
            for k in range(m):
                df[ox + k] = df[oA + k * n + col] * mf[oinv + col]
            _chol_solve(df, oLc, m, g, ox)
            for k in range(m):
                df[oL + k * n + col] = -df[ox + k]
    else:
        # redundant rows: A = C A_I with C = W[:, I] W_II^-1.  The independent subset alone
        # needs lambda_I = L_I f, L_I = -W_II^-1 A_I M^-1; every split with the same effect
        # satisfies C^T lambda = lambda_I, and the one of minimum norm is
        # lambda = C (C^T C)^-1 lambda_I.  Exact, no regularisation.
        di[ofl + FLAG_OVERCONSTRAINED] = 1
        st |= ST_OVERCONSTRAINED
        oC = mi[DF_SPLIT_C]
        oG = mi[DF_SPLIT_G]
        for k in range(m):
            for q in range(r):
                df[ox + q] = df[oW + k * m + di[oidx + q]]
            _chol_solve(df, oLc, r, g, ox)
            for q in range(r):
                df[oC + k * g + q] = df[ox + q]
        # L_I into the first r rows of L
        for col in range(n):
            for q in range(r):
                df[ox + q] = df[oA + di[oidx + q] * n + col] * mf[oinv + col]
            _chol_solve(df, oLc, r, g, ox)
            for q in range(r):
                df[oL + q * n + col] = -df[ox + q]
        # G = C^T C and its factor (in place, stride g)
        for a in range(r):
            for b in range(a + 1):
                acc = 0.0
                for k in range(m):
                    acc += df[oC + k * g + a] * df[oC + k * g + b]
                df[oG + a * g + b] = acc
        for a in range(r):
            for b in range(a + 1):
                acc = df[oG + a * g + b]
                for q in range(b):
                    acc -= df[oG + a * g + q] * df[oG + b * g + q]
                if a == b:
                    df[oG + a * g + a] = math.sqrt(acc if acc > 0.0 else 1e-300)
                else:
                    df[oG + a * g + b] = acc / df[oG + b * g + b]
        # Y = G^-1 L_I (in place in the first r rows of L), then L = C Y into A, then copy
        for col in range(n):
            for q in range(r):
                df[ox + q] = df[oL + q * n + col]
            _chol_solve(df, oG, r, g, ox)
            for q in range(r):
                df[oL + q * n + col] = df[ox + q]
        for k in range(m):
            for col in range(n):
                acc = 0.0
                for q in range(r):
                    acc += df[oC + k * g + q] * df[oL + q * n + col]
                df[oA + k * n + col] = acc
        for k in range(m * n):
            df[oL + k] = df[oA + k]
    if _build_tree(mf, mi, df, di):
        st |= ST_LOCKED
        di[ofl + FLAG_LOCKED] = 1
    return st


@njit(**HOT)
def _stuck_lambda(mi, df, di):
    """Constraint force of each stuck row (stuck-list order, into DF_LAMW) from DF_F.

    Called in the real-time loop.
    """
    n = mi[H_N]
    oL = mi[DF_L]
    of = mi[DF_F]
    olam = mi[DF_LAMW]
    for k in range(di[mi[DI_NSTUCK]]):
        acc = 0.0
        for c in range(n):
            acc += df[oL + k * n + c] * df[of + c]
        df[olam + k] = acc


@njit(**JIT)
def _project(mf, mi, df, di, oy):
    """Project the speeds onto the stuck constraints, w <- P M w (an inelastic impulse).

    The kinetic energy it removes is booked as impulse work, so the energy
    balance stays closed.  Called in the real-time loop.
    """
    if di[mi[DI_NSTUCK]] == 0:
        return
    n, g, s = _sizes(mi)
    oo, ot, otw, oa, ow = _yoff(n, g, s)
    oJ = mi[MF_INERTIA]
    oP = mi[DF_P]
    otmp = mi[DF_TMPN2]
    ow0 = mi[DF_TMPN]
    for j in range(n):
        w = df[oy + j]
        df[ow0 + j] = w
        df[otmp + j] = mf[oJ + j] * w
    for r in range(n):
        acc = 0.0
        for c in range(n):
            acc += df[oP + r * n + c] * df[otmp + c]
        df[oy + r] = acc
    _reconstruct(mf, mi, df, di, oy)
    # an M-orthogonal projection removes exactly 1/2 |w0 - w1|_M^2 (computed so, not as a
    # difference of two large energies, it cannot come out positive by rounding)
    loss = 0.0
    for j in range(n):
        dw = df[ow0 + j] - df[oy + j]
        loss += mf[oJ + j] * dw * dw
    df[oy + ow + W_IMPULSE] -= 0.5 * loss


# ==========================================================================
# box-constrained friction solve (partition problem, eq. 18 of seed 003)
# ==========================================================================
@njit(**JIT)
def _box_qp(df, di, oW, ob, olo, ohi, m, olam, obnd, max_iter, tol, oLc, oidx, ox, ograd):
    """Exact solution of min 1/2 l^T W l + b^T l subject to lo <= l <= hi.

    This is eq. (18) of seed 003: its KKT conditions say that a free row has
    zero relative acceleration (W l + b)_k = 0 with |l_k| <= K_k, and a row at
    +K (-K) has a relative acceleration <= 0 (>= 0), i.e. it slips against
    its friction force.  W is positive definite for independent rows, so the
    solution is unique.

    Primal active-set method (Nocedal & Wright, Alg. 16.3) on a box, warm
    started from the bound states di[obnd] (-1 lower, 0 free, +1 upper): each
    iteration solves the free rows exactly (Cholesky), then either blocks at
    a bound or releases the bound row with the most violated multiplier.  The
    objective decreases strictly, so no working set repeats.  On exit
    df[ograd] = W l + b.  Returns the iteration count, or -1 when max_iter
    was reached (the iterate is then feasible but not proven optimal).  Called in the real-time loop.
    """
    for k in range(m):
        bk = di[obnd + k]
        if bk == 1:
            df[olam + k] = df[ohi + k]
        elif bk == -1:
            df[olam + k] = df[olo + k]
        else:
            if df[olam + k] > df[ohi + k]:
                df[olam + k] = df[ohi + k]
            if df[olam + k] < df[olo + k]:
                df[olam + k] = df[olo + k]
    it = 0
    while it < max_iter:
        it += 1
        nf = 0
        for k in range(m):
            if di[obnd + k] == 0:
                di[oidx + nf] = k
                nf += 1
        if nf > 0:
            if not _cholesky(df, di, oW, m, oidx, nf, oLc, 0.0):
                wmax = 0.0
                for k in range(m):
                    wmax = max(wmax, df[oW + k * m + k])
                _cholesky(df, di, oW, m, oidx, nf, oLc, 1e-10 * wmax + 1e-300)
            for q in range(nf):
                kq = di[oidx + q]
                acc = -df[ob + kq]
                for k in range(m):
                    if di[obnd + k] != 0:
                        acc -= df[oW + kq * m + k] * df[olam + k]
                df[ox + q] = acc
            _chol_solve(df, oLc, nf, nf, ox)
            # ratio test on the segment from lam to the subspace minimiser
            alpha = 1.0
            block = -1
            side = 0
            for q in range(nf):
                kq = di[oidx + q]
                xq = df[ox + q]
                lq = df[olam + kq]
                step = xq - lq
                if xq > df[ohi + kq] and step > 0.0:
                    a = (df[ohi + kq] - lq) / step
                    if a < alpha:
                        alpha = a
                        block = kq
                        side = 1
                elif xq < df[olo + kq] and step < 0.0:
                    a = (df[olo + kq] - lq) / step
                    if a < alpha:
                        alpha = a
                        block = kq
                        side = -1
            if alpha < 0.0:
                alpha = 0.0
            for q in range(nf):
                kq = di[oidx + q]
                df[olam + kq] = df[olam + kq] + alpha * (df[ox + q] - df[olam + kq])
            if block >= 0:
                di[obnd + block] = side
                df[olam + block] = df[ohi + block] if side == 1 else df[olo + block]
                continue
        # optimal on this working set: check the multipliers of the bound rows
        for k in range(m):
            acc = df[ob + k]
            for c in range(m):
                acc += df[oW + k * m + c] * df[olam + c]
            df[ograd + k] = acc
        worst = -1
        wval = 0.0
        for k in range(m):
            bk = di[obnd + k]
            if bk == 0:
                continue
            thr = tol * (abs(df[ob + k]) + df[oW + k * m + k] * df[ohi + k]) + 1e-300
            gk = df[ograd + k]
            viol = 0.0
            if bk == 1 and gk > thr:
                viol = gk
            elif bk == -1 and gk < -thr:
                viol = -gk
            if viol > wval:
                wval = viol
                worst = k
        if worst < 0:
            return it
        di[obnd + worst] = 0
    for k in range(m):
        acc = df[ob + k]
        for c in range(m):
            acc += df[oW + k * m + c] * df[olam + c]
        df[ograd + k] = acc
    return -1


# ==========================================================================
# mode solve
# ==========================================================================
@njit(**JIT)
def _log_event(mi, df, di, t, row, kind):
    """Append an event to the ring log (overwriting the oldest when full).  Called in the real-time loop."""
    E = mi[H_EVCAP]
    oc = mi[DI_COUNTERS]
    k = di[oc + CNT_EVENTS] % E
    df[mi[DF_EV_TIME] + k] = t
    di[mi[DI_EV_ROW] + k] = row
    di[mi[DI_EV_KIND] + k] = kind
    di[oc + CNT_EVENTS] += 1


@njit(**JIT)
def _set_stuck_list(mi, di):
    """Rebuild the list of stuck rows from the row modes.  Called in the real-time loop."""
    g = mi[H_G]
    omode = mi[DI_MODE]
    ost = mi[DI_STUCK]
    m = 0
    for i in range(g):
        if di[omode + i] == MODE_STUCK:
            di[ost + m] = i
            m += 1
    di[mi[DI_NSTUCK]] = m


@njit(**JIT)
def _mode_prepare(mf, mi, df, di, s_abs, oy, force_full):
    """Save the modes, give non-stuck rows the direction of their slip; say if a full solve is due.

    A full solve is due when a stuck row lost its capacity, a non-stuck row
    with capacity has exactly zero relative speed (a candidate), the caches
    are invalid, or the caller asks for it.  Called in the real-time loop.
    """
    n, g, s = _sizes(mi)
    omode = mi[DI_MODE]
    odir = mi[DF_DIR]
    opm = mi[DI_PREV_MODE]
    opd = mi[DF_PREV_DIR]
    ocs = mi[DF_CAPS_T]
    for i in range(g):
        di[opm + i] = di[omode + i]
        df[opd + i] = df[odir + i]
    _caps(mf, mi, df, s_abs, 0.0, 0, oy + 2 * n + s)
    need = force_full or di[mi[DI_FLAGS] + FLAG_CACHE_VALID] == 0
    for i in range(g):
        if di[omode + i] == MODE_STUCK:
            if df[ocs + i] <= 0.0:
                need = True
            continue
        d = _slip(mi, df, di, i, oy)
        if d > 0.0:
            di[omode + i] = MODE_SLIP
            df[odir + i] = 1.0
        elif d < 0.0:
            di[omode + i] = MODE_SLIP
            df[odir + i] = -1.0
        elif df[ocs + i] > 0.0:
            need = True
        elif di[omode + i] != MODE_SLIP:
            di[omode + i] = MODE_FREE
            df[odir + i] = 0.0
    return need


@njit(**JIT)
def _mode_full(mf, mi, df, di, s_abs, oy, t_abs, forced):
    """Solve which rows stay stuck (box-constrained QP); log transitions; rebuild caches.

    Call _mode_prepare first.  Candidates are the rows with static capacity
    that are stuck or have exactly zero relative speed.  A row at a bound
    with a non-zero relative acceleration breaks away in that direction.
    When a breaking row's force drops from K to k < K, the solve is repeated
    with it slipping, so cascades resolve in the same instant.  Returns
    status bits.  Called in the real-time loop.
    """
    n, g, s = _sizes(mi)
    st = 0
    omode = mi[DI_MODE]
    odir = mi[DF_DIR]
    opm = mi[DI_PREV_MODE]
    opd = mi[DF_PREV_DIR]
    obnd = mi[DI_BND]
    ocs = mi[DF_CAPS_T]
    ock = mi[DF_CAPK_T]
    ovs = mi[MF_STRIBECK_VS]
    of = mi[DF_F]
    olreq = mi[DF_LAMBDA_REQ]
    olam = mi[DF_LAMW]
    ocand = mi[DI_CAND]
    ocb = mi[DI_CBND]
    oidx = mi[DI_IDX]
    oA = mi[DF_A]
    oW = mi[DF_W]
    oLc = mi[DF_CH]
    obv = mi[DF_BV]
    oxv = mi[DF_XV]
    ograd = mi[DF_GRAD]
    olo = mi[DF_LO]
    ohi = mi[DF_HI]
    oinv = mi[MF_INV_INERTIA]
    oset = mi[MF_SETTINGS]
    ocnt = mi[DI_COUNTERS]
    ofl = mi[DI_FLAGS]
    max_iter = mi[H_MAX_ITER]
    tol = mf[oset + SET_SOLVER_TOL]
    ox0 = oy + 2 * n + s
    odrv = mi[DI_DRIVE]
    omk = mi[DI_DRV_LIST]  # 1: a driven candidate (prescribed acceleration, unbounded force)
    oacc_t = mi[DF_DRIVE_ACC]
    m = 0
    for i in range(g):
        di[omk + i] = 0
    for i in range(g):
        cap = df[ocs + i]
        if i == forced:
            continue  # set slipping by the caller (see _enforce_capacity)
        if di[odrv + i] == 1 and di[omode + i] != MODE_STUCK and _slip(mi, df, di, i, oy) != 0.0:
            # its force enters the solve as an equality with its prescribed acceleration, so
            # the stuck rows' forces account for it; it is not stuck afterwards
            di[omk + i] = 1
            di[ocand + m] = i
            di[ocb + m] = 0
            df[olam + m] = df[mi[DF_MU] + i]
            m += 1
        elif cap > 0.0 and (di[omode + i] == MODE_STUCK or _slip(mi, df, di, i, oy) == 0.0):
            was = di[opm + i] == MODE_STUCK
            di[ocand + m] = i
            di[ocb + m] = di[obnd + i] if was else 0
            df[olam + m] = df[olreq + i] if was else 0.0
            m += 1
        elif di[omode + i] == MODE_STUCK:  # no capacity left: released
            di[omode + i] = MODE_FREE
            df[odir + i] = 0.0
    for k in range(m):
        di[omode + di[ocand + k]] = MODE_STUCK  # excluded from the free force below
    passes = 0
    while m > 0 and passes <= g:
        passes += 1
        _forces(mf, mi, df, di, s_abs, 0.0, 0, oy, ox0)
        _fill_rows(mi, df, di, ocand, m, oA)
        _delassus(mf, mi, df, oA, m, oW)
        for k in range(m):
            acc = 0.0
            for c in range(n):
                acc += df[oA + k * n + c] * mf[oinv + c] * df[of + c]
            df[obv + k] = acc
            cap = df[ocs + di[ocand + k]]
            if di[omk + di[ocand + k]] == 1:
                df[obv + k] -= df[oacc_t + di[ocand + k]]
                cap = np.inf
            df[olo + k] = -cap
            df[ohi + k] = cap
            di[oidx + k] = k
        # redundant candidates: minimum-norm split through a small regularisation
        wmax = 0.0
        for k in range(m):
            wmax = max(wmax, df[oW + k * m + k])
        redundant = not _cholesky(df, di, oW, m, oidx, m, oLc, 0.0)
        if not redundant:
            for k in range(m):
                piv = df[oLc + k * m + k]
                if piv * piv <= mf[oset + SET_RANK_TOL] * df[oW + k * m + k]:
                    redundant = True
        reg = 0.0
        if redundant:
            reg = mf[oset + SET_REG] * wmax
            for k in range(m):
                df[oW + k * m + k] += reg
            st |= ST_OVERCONSTRAINED
        it = _box_qp(df, di, oW, obv, olo, ohi, m, olam, ocb, max_iter, tol, oLc, oidx, oxv, ograd)
        if it < 0:
            st |= ST_SOLVER_LIMIT
            it = max_iter
        di[ocnt + CNT_SOLVER_ITER_LAST] = it
        if it > di[ocnt + CNT_SOLVER_ITER_MAX]:
            di[ocnt + CNT_SOLVER_ITER_MAX] = it
        # a row at a bound whose relative acceleration points away from zero breaks away
        nleave = 0
        drop = False
        keep = 0
        for k in range(m):
            i = di[ocand + k]
            bk = di[ocb + k]
            gk = df[ograd + k]
            if di[omk + i] == 1:
                di[ocand + keep] = i
                di[ocb + keep] = 0
                df[olam + keep] = df[olam + k]
                keep += 1
                continue
            thr = tol * (abs(df[obv + k]) + (df[oW + k * m + k] - reg) * df[ohi + k]) + 1e-300
            if (bk == 1 and gk < -thr) or (bk == -1 and gk > thr):
                di[omode + i] = MODE_SLIP
                df[odir + i] = 1.0 if gk > 0.0 else -1.0
                nleave += 1
                if df[ock + i] < df[ocs + i] and mf[ovs + i] <= 0.0:
                    drop = True
            else:
                di[ocand + keep] = i
                di[ocb + keep] = bk
                df[olam + keep] = df[olam + k]
                df[olreq + i] = df[olam + k]
                keep += 1
        m = keep
        if nleave == 0 or not drop:
            break
    # driven candidates slip again (their direction was set by _mode_prepare)
    keep = 0
    for k in range(m):
        i = di[ocand + k]
        if di[omk + i] == 1:
            di[omode + i] = MODE_SLIP
        else:
            di[ocand + keep] = i
            di[ocb + keep] = di[ocb + k]
            keep += 1
    m = keep
    for i in range(g):
        di[obnd + i] = 0
    for k in range(m):
        di[obnd + di[ocand + k]] = di[ocb + k]
    changed = di[ofl + FLAG_CACHE_VALID] == 0
    for i in range(g):
        now = di[omode + i]
        was = di[opm + i]
        if now == MODE_STUCK and was != MODE_STUCK:
            _log_event(mi, df, di, t_abs, i, EV_STICK)
            changed = True
        elif was == MODE_STUCK and now != MODE_STUCK:
            _log_event(mi, df, di, t_abs, i, EV_BREAKAWAY)
            changed = True
        elif was == MODE_SLIP and now == MODE_SLIP and df[opd + i] != 0.0 and df[odir + i] == -df[opd + i]:
            _log_event(mi, df, di, t_abs, i, EV_REVERSAL)
    _set_stuck_list(mi, di)
    if changed:
        st |= _build_cache(mf, mi, df, di)
        _reconstruct(mf, mi, df, di, oy)
    else:
        if di[ofl + FLAG_OVERCONSTRAINED] == 1:
            st |= ST_OVERCONSTRAINED
        if di[ofl + FLAG_LOCKED] == 1:
            st |= ST_LOCKED
    return st


@njit(**JIT)
def _enforce_capacity(mf, mi, df, di, s_abs, oy, t_abs):
    """After a mode solve: a stuck row whose force still exceeds K (1 + margin) is made to slip.

    The solve decides a row at its bound by the sign of its slip
    acceleration, with a rounding tolerance; for nearly dependent stuck rows
    (a small Schur complement) the acceleration that a force excess of the
    event margin produces can fall below that tolerance, and the row would
    stay stuck above its capacity.  The row with the largest relative excess
    is then taken out (slipping against its force, as at a breakaway) and
    the others are solved again, at most g times.  Returns status bits.  Called in the real-time loop.
    """
    n, g, s = _sizes(mi)
    st = 0
    ost = mi[DI_STUCK]
    olam = mi[DF_LAMW]
    ocs = mi[DF_CAPS_T]
    omode = mi[DI_MODE]
    odir = mi[DF_DIR]
    margin = mf[mi[MF_SETTINGS] + SET_BREAK_MARGIN]
    ox0 = oy + 2 * n + s
    for _ in range(g):
        m = di[mi[DI_NSTUCK]]
        if m == 0:
            break
        _caps(mf, mi, df, s_abs, 0.0, 0, ox0)
        _forces(mf, mi, df, di, s_abs, 0.0, 0, oy, ox0)
        _stuck_lambda(mi, df, di)
        worst = -1
        wrel = 0.0
        wsign = 0.0
        for k in range(m):
            i = di[ost + k]
            lam = df[olam + k]
            cap = df[ocs + i]
            rel = (abs(lam) - cap * (1.0 + margin)) / (cap + 1e-300)
            if rel > wrel:
                worst = i
                wrel = rel
                wsign = 1.0 if lam > 0.0 else -1.0
        if worst < 0:
            break
        _mode_prepare(mf, mi, df, di, s_abs, oy, True)
        di[omode + worst] = MODE_SLIP
        df[odir + worst] = -wsign
        st |= _mode_full(mf, mi, df, di, s_abs, oy, t_abs, worst)
    return st


@njit(**JIT)
def _cache_status(mi, di):
    """Status bits of the cached stuck set (over-constrained, locked).  Called in the real-time loop."""
    st = 0
    ofl = mi[DI_FLAGS]
    if di[ofl + FLAG_OVERCONSTRAINED] == 1:
        st |= ST_OVERCONSTRAINED
    if di[ofl + FLAG_LOCKED] == 1:
        st |= ST_LOCKED
    return st


# ==========================================================================
# integration with events inside a step
# ==========================================================================
@njit(**HOT)
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
    # stage states: speeds and spring twists (the angles are not read at the stage points)
    for q in range(n):
        df[oys + q] = df[oy0 + q] + hh * df[ok1 + q]
    for q in range(otw, oa):
        df[oys + q] = df[oy0 + q] + hh * df[ok1 + q]
    _deriv(mf, mi, df, di, s_abs, h, 1, oys, ox0, ok2)
    for q in range(n):
        df[oys + q] = df[oy0 + q] + hh * df[ok2 + q]
    for q in range(otw, oa):
        df[oys + q] = df[oy0 + q] + hh * df[ok2 + q]
    _deriv(mf, mi, df, di, s_abs, h, 1, oys, ox0, ok3)
    for q in range(n):
        df[oys + q] = df[oy0 + q] + h * df[ok3 + q]
    for q in range(otw, oa):
        df[oys + q] = df[oy0 + q] + h * df[ok3 + q]
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


@njit(**JIT)
def _rk4_call(mf, mi, df, di, s_abs, h, oy0, ok1, oyout):
    """_rk4 as a called function, for the rare paths (event location's last step, budget exhausted).

    Called in the real-time loop.
    """
    _rk4(mf, mi, df, di, s_abs, h, oy0, ok1, oyout, False)


@njit(**HOT)
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


@njit(**HOT)
def _start_consistent(mi, df, di, oy):
    """Does the mode still fit the state at a sub-step start?  (Uses the stage-0 evaluation.)

    Returns 0 when it does; 2 when a stuck row lost its capacity or needs
    more force than its capacity (the inputs jumped between steps: a full
    mode solve is due); 3 when a slipping row with friction moves against
    its direction (its zero crossing was missed: after an exhausted event
    budget, or a state written from outside), which is handled like an
    event now; 1 for the other misfits, which _mode_prepare sorts out (a
    row without friction moving against its direction, a free row with
    speed and capacity, a row at zero speed that acquired capacity; the
    last one makes _mode_prepare ask for the full solve itself).  Called in the real-time loop.
    """
    g = mi[H_G]
    omode = mi[DI_MODE]
    odir = mi[DF_DIR]
    odt = mi[DF_DT]
    ocs = mi[DF_CAPS_T]
    ost = mi[DI_STUCK]
    olam = mi[DF_LAMW]
    ock = mi[DF_CAPK_T]
    for k in range(di[mi[DI_NSTUCK]]):
        cap = df[ocs + di[ost + k]]
        if cap <= 0.0 or abs(df[olam + k]) > cap:
            return 2
    misfit = 0
    for i in range(g):
        md = di[omode + i]
        if md == MODE_STUCK:
            continue
        d = df[odt + i]
        if d != 0.0 and df[odir + i] * d <= 0.0:
            d = _slip(mi, df, di, i, oy)  # a wrong sign may be rounding noise at zero
        if d == 0.0:
            if df[ocs + i] > 0.0:
                misfit = 1
        elif md == MODE_SLIP:
            if df[odir + i] * d < 0.0:
                if df[ocs + i] > 0.0 or df[ock + i] > 0.0:
                    return 3
                misfit = 1
        elif df[ocs + i] > 0.0:
            misfit = 1
    return misfit


@njit(**JIT)
def _act_normal_force(mf, mi, df, i, s_abs, tau, ox0):
    """Unclamped normal force gain*x - preload of row i, tau into the sub-step starting s_abs after the step start.

    The same closed form as _caps, with the exponential taken directly.  Called in the real-time loop.
    """
    r = df[mi[DF_U_ACT_RATE] + i]
    v = df[mi[DF_U_ACT] + i] + r * s_abs
    T = mf[mi[MF_ACT_LAG] + i]
    if T > 0.0:
        x = v + r * tau - r * T + (df[ox0 + i] - v + r * T) * math.exp(-tau / T)
    else:
        x = v + r * tau
    return mf[mi[MF_ACT_GAIN] + i] * x - mf[mi[MF_ACT_PRELOAD] + i]


@njit(**HOT)
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


@njit(**HOT)
def _first_crossing(g, oga, ogb, t_a, t_b, df):
    """The row whose event function went from >= 0 (at t_a) to <= 0 (at t_b) first, by linear estimate.

    Returns (row, estimated time), row -1 if none.  Called in the real-time loop.
    """
    first = -1
    sfirst = t_b
    for i in range(g):
        gb = df[ogb + i]
        ga = df[oga + i]
        if gb <= 0.0 and gb < ga and ga >= 0.0:
            si = t_a + (t_b - t_a) * ga / (ga - gb)
            if first < 0 or si < sfirst:
                first = i
                sfirst = si
    return first, sfirst


@njit(**HOT)
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


@njit(**JIT)
def _trial(mf, mi, df, di, s_abs, c, oy0, ok1, oyt, ox0, ogev, caps_ready):
    """RK4 from the sub-step start over c into df[oyt], then the forces and event functions there.

    Called in the real-time loop.
    """
    _rk4(mf, mi, df, di, s_abs, c, oy0, ok1, oyt, caps_ready)
    _forces(mf, mi, df, di, s_abs, c, 2, oyt, ox0)
    _event_values(mf, mi, df, di, oyt, 2, ogev)


@njit(**HOT)
def _integrate_substep(mf, mi, df, di, s_abs, h, check_start, reuse):
    """Integrate DF_Y from s_abs over at most h, stopping just past the first event.

    ``reuse``: the previous step's end evaluation (see _reuse_valid) serves as
    the first stage.  Returns (time advanced, code): code 0 = reached the end with no event (the
    last force evaluation is at the final state), 1 = stopped at an event,
    2 / 4 / 5 = the mode does not fit the state at the start (nothing was
    advanced; 4: a stuck row is over its capacity, a full mode solve is
    due; 5: a slipping row crossed zero unseen, handle it as an event),
    3 = stopped at a kiss point (no mode change by itself; the caller checks
    the mode there).

    Events: a row's event function changing sign over the trial, or a
    slipping row's relative speed dipping through zero and back inside it
    (see _dip_time).  The earliest event of any row is located by regula
    falsi (Illinois) on the event function of the row that crosses first,
    each trial an RK4 sub-step from the sub-step start, with a bisection
    safeguard; whenever a trial shows another row crossing earlier, the
    search switches to that row, so the located event is the first one.  Called in the real-time loop.
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
    ocnt = mi[DI_COUNTERS]
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
    if check_start:
        misfit = _start_consistent(mi, df, di, oy0)
        if misfit != 0:
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
        return hk, end_code
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
    _rk4_call(mf, mi, df, di, s_abs, hi, oy0, ok1, oyt)
    for q in range(ny):
        df[oy + q] = df[oyt + q]
    return hi, 1

@njit(**JIT)
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
        _build_cache(mf, mi, df, di)
        _project(mf, mi, df, di, oy)
        for i in range(g):
            di[omode + i] = di[osv + i]
        _set_stuck_list(mi, di)
        di[mi[DI_FLAGS] + FLAG_CACHE_VALID] = 0
    # the mode solve takes each crossing row's direction from before the crossing, so a
    # reversal is recognised; _mode_prepare keeps MODE_SLIP rows at zero speed as they are
    _mode_prepare(mf, mi, df, di, s_abs, oy, True)
    st = _mode_full(mf, mi, df, di, s_abs, oy, t_abs, -1)
    return st | _enforce_capacity(mf, mi, df, di, s_abs, oy, t_abs)


@njit(**HOT)
def _outputs(mf, mi, df, di, s_abs, fresh):
    """Outputs at the end of the step (inputs of this step held).

    ``fresh``: the last evaluation (forces, capacities at stage 2, stuck
    forces) was made at the final state, so it is reused.  Called in the real-time loop.
    """
    n, g, s = _sizes(mi)
    oy = mi[DF_Y]
    stage = 2
    if not fresh:
        stage = 0
        _caps(mf, mi, df, s_abs, 0.0, 0, oy + 2 * n + s)
        _forces(mf, mi, df, di, s_abs, 0.0, 0, oy, oy + 2 * n + s)
        _stuck_lambda(mi, df, di)
        _accel(mf, mi, df, di, mi[DF_ACCEL])
    else:
        # the derivative at the final state: the accelerations, and the next step's first stage
        ok1 = mi[DF_K1]
        _deriv_finish(mf, mi, df, di, oy, ok1)
        oacc = mi[DF_ACCEL]
        for j in range(n):
            df[oacc + j] = df[ok1 + j]
    ocs = mi[DF_CAPS_T] + stage * g
    ock = mi[DF_CAPK_T] + stage * g
    ocso = mi[DF_CAP_S]
    ocko = mi[DF_CAP_K]
    odelta = mi[DF_DELTA]
    odt = mi[DF_DT]
    olreq = mi[DF_LAMBDA_REQ]
    omu = mi[DF_MU]
    olam = mi[DF_LAMW]
    omode = mi[DI_MODE]
    ost = mi[DI_STUCK]
    for i in range(g):
        df[ocso + i] = df[ocs + i]
        df[ocko + i] = df[ock + i]
        if di[omode + i] != MODE_STUCK:
            df[olreq + i] = 0.0
            df[odelta + i] = df[odt + i] + 0.0  # + 0.0: a zero reads +0.0, never -0.0
    oor = mi[DI_ORIENT]
    for k in range(di[mi[DI_NSTUCK]]):
        i = di[ost + k]
        df[olreq + i] = df[olam + k]
        df[omu + i] = df[olam + k]
        # tree rows read exactly zero by construction; the other stuck rows (redundant ones,
        # consistent cycles) hold because the tree does, up to the rounding of their own sum
        df[odelta + i] = _row_delta(mi, df, di, i, oy) + 0.0 if di[oor + i] != 0 else 0.0
    if s > 0:
        osa = mi[MI_SPRING_A]
        osb = mi[MI_SPRING_B]
        osca = mi[MF_SPRING_CA]
        oscb = mi[MF_SPRING_CB]
        osc = mi[MF_SPRING_C]
        ostq = mi[DF_SPRING_TQ]
        otw = oy + 2 * n
        for j in range(s):
            rate = mf[osca + j] * df[oy + mi[osa + j]] + mf[oscb + j] * df[oy + mi[osb + j]]
            df[ostq + j] = _spring_elastic(mf, mi, j, df[otw + j]) + mf[osc + j] * rate

# ==========================================================================
# kinematic rows (seed 001): phases on top of the friction rows
# ==========================================================================
@njit(**JIT)
def _kin_begin(mf, mi, df, di, t):
    """Take the engage commands of the kinematic rows, advance their phases, and put each
    row's torque capacity in place of its command for this step (_kin_end restores it).

    A kinematic row is a friction row whose capacity the phase sets: zero when
    disengaged; MF_KIN_CAP when engaging or engaged; while engaging it is also
    driven (DI_DRIVE), its relative speed falling linearly to zero over the
    shift time (a_close = -delta/shift_time, the article's equation), and its
    zero crossing is an ordinary stick event located inside the step; when
    disengaging, the capacity ramps from the force held at the command to zero
    over the shift time (its end is a kiss point located inside the step).
    The command is the row's actuator input u: engaged while u >= MF_KIN_THRESH.
    Returns True when a prescription changed (the mode must be solved again).
    Called in the real-time loop.
    """
    g = mi[H_G]
    oy = mi[DF_Y]
    osh = mi[MF_KIN_SHIFT]
    oth = mi[MF_KIN_THRESH]
    oua = mi[DF_U_ACT]
    oph = mi[DI_KIN_PHASE]
    ot0 = mi[DF_KIN_T0]
    ohold = mi[DF_KIN_HOLD]
    odrv = mi[DI_DRIVE]
    oacc = mi[DF_DRIVE_ACC]
    omode = mi[DI_MODE]
    omu = mi[DF_MU]
    changed = False
    for i in range(g):
        T = mf[osh + i]
        if T <= 0.0:
            continue
        cmd = df[oua + i] >= mf[oth + i]
        ph = di[oph + i]
        stuck = di[omode + i] == MODE_STUCK
        if cmd and (ph == KIN_DISENGAGED or ph == KIN_DISENGAGING):
            d = 0.0 if stuck else _slip(mi, df, di, i, oy)
            if d == 0.0:
                ph = KIN_ENGAGED
                di[odrv + i] = 0
            else:
                ph = KIN_ENGAGING
                df[oacc + i] = -d / T
                di[odrv + i] = 1
            df[ot0 + i] = t
            changed = True
        elif not cmd and (ph == KIN_ENGAGING or ph == KIN_ENGAGED):
            ph = KIN_DISENGAGING
            df[ohold + i] = abs(df[omu + i])
            df[ot0 + i] = t
            di[odrv + i] = 0
            changed = True
        elif ph == KIN_ENGAGED and di[odrv + i] == 1:
            di[odrv + i] = 0  # the stick event ended the engagement (a stuck row is not driven)
        elif ph == KIN_DISENGAGING and t - df[ot0 + i] >= T * (1.0 - 1e-12):
            ph = KIN_DISENGAGED
        di[oph + i] = ph
        _kin_capacity(mf, mi, df, di, i, t)
    return changed


@njit(**JIT)
def _kin_capacity(mf, mi, df, di, i, t):
    """Save kinematic row i's command (for _kin_end) and put its phase's capacity in its place.

    Called in the real-time loop.
    """
    g = mi[H_G]
    oua = mi[DF_U_ACT]
    ouar = mi[DF_U_ACT_RATE]
    ocmd = mi[DF_KIN_CMD]
    df[ocmd + i] = df[oua + i]
    df[ocmd + g + i] = df[ouar + i]
    ph = di[mi[DI_KIN_PHASE] + i]
    v = 0.0
    rate = 0.0
    if ph == KIN_ENGAGING or ph == KIN_ENGAGED:
        v = mf[mi[MF_KIN_CAP] + i]
    elif ph == KIN_DISENGAGING:
        hold = df[mi[DF_KIN_HOLD] + i]
        r = hold / mf[mi[MF_KIN_SHIFT] + i]
        v = hold - r * (t - df[mi[DF_KIN_T0] + i])
        if v > 0.0:
            rate = -r  # the ramp's zero inside a step is a kiss point, located there
        else:
            v = 0.0
    df[oua + i] = v
    df[ouar + i] = rate


@njit(**JIT)
def _kin_start(mf, mi, df, di):
    """Phases at a start: rows that start stuck are engaged, the others disengaged; capacities
    in place of the commands as in _kin_begin.  Called by _start."""
    t = df[mi[DF_TIME]]
    for i in range(mi[H_G]):
        if mf[mi[MF_KIN_SHIFT] + i] <= 0.0:
            continue
        di[mi[DI_DRIVE] + i] = 0
        di[mi[DI_KIN_PHASE] + i] = KIN_ENGAGED if di[mi[DI_MODE] + i] == MODE_STUCK else KIN_DISENGAGED
        _kin_capacity(mf, mi, df, di, i, t)


@njit(**JIT)
def _kin_end(mf, mi, df, di):
    """Give the kinematic rows their callers' commands back (see _kin_begin); an engagement
    that ended with a stick event in this step reads as engaged.  Called in the real-time loop."""
    g = mi[H_G]
    osh = mi[MF_KIN_SHIFT]
    oua = mi[DF_U_ACT]
    ouar = mi[DF_U_ACT_RATE]
    ocmd = mi[DF_KIN_CMD]
    oph = mi[DI_KIN_PHASE]
    for i in range(g):
        if mf[osh + i] > 0.0:
            df[oua + i] = df[ocmd + i]
            df[ouar + i] = df[ocmd + g + i]
            if di[oph + i] == KIN_ENGAGING and di[mi[DI_MODE] + i] == MODE_STUCK:
                di[oph + i] = KIN_ENGAGED  # reported at once; _kin_begin then clears the drive


# ==========================================================================
# step and start
# ==========================================================================
@njit(**JIT)
def _outputs_call(mf, mi, df, di, s_abs, fresh):
    """_outputs as a called function, for the rare paths (start, roll-back).  Called in the real-time loop."""
    _outputs(mf, mi, df, di, s_abs, fresh)


@njit(**JIT)
def _backup(mi, df, di):
    """Save what a roll-back restores (state, directions, coefficients, time, modes).

    Called in the real-time loop.
    """
    n, g, s = _sizes(mi)
    ny = mi[H_NY]
    oy = mi[DF_Y]
    obk = mi[DF_BACKUP]
    obki = mi[DI_BACKUP]
    odir = mi[DF_DIR]
    oca = mi[DF_COEF_A]
    ocb = mi[DF_COEF_B]
    omode = mi[DI_MODE]
    obnd = mi[DI_BND]
    for q in range(ny):
        df[obk + q] = df[oy + q]
    for i in range(g):
        df[obk + ny + i] = df[odir + i]
        df[obk + ny + g + i] = df[oca + i]
        df[obk + ny + 2 * g + i] = df[ocb + i]
        di[obki + i] = di[omode + i]
        di[obki + g + i] = di[obnd + i]
    df[obk + ny + 3 * g] = df[mi[DF_TIME]]


@njit(**JIT_SUMS)
def _reuse_valid(mf, mi, df):
    """Is the last step's end evaluation valid for this step's start?  (A bit-exact test.)

    It is when the state, the input values (torques, commands of unlagged
    actuators) and the model floats are exactly those that evaluation used;
    the caller checks the flags (modes, caches, coefficients).  The model
    floats are compared because plants and the server may retune drag,
    gains or lags between steps; a changed copy is refreshed here.  The
    differences are summed (vectorised: this function may reassociate sums;
    a NaN or inf difference makes the sum non-zero too).  Called in the
    real-time loop.
    """
    n, g, s = _sizes(mi)
    ny = mi[H_NY]
    oy = mi[DF_Y]
    ory = mi[DF_REUSE_Y]
    oru = mi[DF_REUSE_U]
    acc = 0.0
    for q in range(ny):
        acc += abs(df[oy + q] - df[ory + q])
    out = mi[DF_U_TAU]
    for j in range(n):
        acc += abs(df[out + j] - df[oru + j])
    oua = mi[DF_U_ACT]
    olag = mi[MF_ACT_LAG]
    for i in range(g):
        if mf[olag + i] <= 0.0:
            acc += abs(df[oua + i] - df[oru + n + i])
    om = mi[MF_INERTIA]
    orm = mi[DF_REUSE_MF]
    nm = mi[MF_SETTINGS] + N_SETTINGS - om
    macc = 0.0
    for q in range(nm):
        macc += abs(mf[om + q] - df[orm + q])
    if macc != 0.0:
        for q in range(nm):
            df[orm + q] = mf[om + q]
        return False
    return acc == 0.0


@njit(**HOT)
def _reuse_store(mf, mi, df, di, s_abs, h):
    """Remember what the end evaluation of the sub-step (s_abs, h) used (its derivative is in DF_K1).

    Called in the real-time loop.
    """
    n, g, s = _sizes(mi)
    ny = mi[H_NY]
    oy = mi[DF_Y]
    ory = mi[DF_REUSE_Y]
    oru = mi[DF_REUSE_U]
    for q in range(ny):
        df[ory + q] = df[oy + q]
    out = mi[DF_U_TAU]
    outr = mi[DF_U_TAU_RATE]
    for j in range(n):
        df[oru + j] = df[out + j] + df[outr + j] * (s_abs + h)  # as _forces computed it
    oxa = mi[DF_XACT] + 2 * g
    for i in range(g):
        df[oru + n + i] = df[oxa + i]
    di[mi[DI_FLAGS] + FLAG_REUSE] = 1


@njit(**JIT)
def _step(mf, mi, df, di, dt):
    """Implementation of core_step (on owner-less buffers).  Called in the real-time loop."""
    n, g, s = _sizes(mi)
    ny = mi[H_NY]
    oy = mi[DF_Y]
    ot = mi[DF_TIME]
    ofl = mi[DI_FLAGS]
    ocnt = mi[DI_COUNTERS]
    omode = mi[DI_MODE]
    odir = mi[DF_DIR]
    oca = mi[DF_COEF_A]
    ocb = mi[DF_COEF_B]
    out = mi[DF_U_TAU]
    outr = mi[DF_U_TAU_RATE]
    oua = mi[DF_U_ACT]
    ouar = mi[DF_U_ACT_RATE]
    # x - x is 0 for a finite x and NaN for inf or NaN: one test for all inputs
    probe = 0.0
    for j in range(n):
        probe += (df[out + j] - df[out + j]) + (df[outr + j] - df[outr + j])
    for i in range(g):
        probe += ((df[oua + i] - df[oua + i]) + (df[ouar + i] - df[ouar + i])
                  + (df[oca + i] - df[oca + i]) + (df[ocb + i] - df[ocb + i]))
    ok = dt > 0.0 and math.isfinite(dt) and probe == 0.0
    if not ok:
        di[ofl + FLAG_STATUS] = ST_BAD_INPUT
        return ST_BAD_INPUT
    di[ofl + FLAG_DRIVE_REDUNDANT] = 0
    nkin = mi[H_NKIN]
    if nkin > 0 and _kin_begin(mf, mi, df, di, df[ot]):
        di[ofl + FLAG_CACHE_VALID] = 0
    reuse = False
    if di[ofl + FLAG_REUSE] == 1:
        di[ofl + FLAG_REUSE] = 0
        reuse = (mi[H_REUSE] == 1 and di[ofl + FLAG_COEF_DIRTY] == 0 and di[ofl + FLAG_CACHE_VALID] == 1
                 and _reuse_valid(mf, mi, df))
    # the backup is taken lazily, before the first change of modes or coefficients;
    # a step without events can be rolled back from DF_Y0 alone
    backed_up = False
    st = 0
    t0 = df[ot]
    if di[ofl + FLAG_COEF_DIRTY] == 1:
        # a plant changed row coefficients (e.g. a new gear preselected): a stuck row
        # whose relative speed is not zero under the new ratio starts slipping
        _backup(mi, df, di)
        backed_up = True
        di[ofl + FLAG_COEF_DIRTY] = 0
        ora = mi[MI_ROW_A]
        orb = mi[MI_ROW_B]
        for i in range(g):
            if di[omode + i] == MODE_STUCK:
                wa = df[oca + i] * df[oy + mi[ora + i]]
                wb = df[ocb + i] * df[oy + mi[orb + i]]
                if abs(wa + wb) > 1e-12 * (abs(wa) + abs(wb)):
                    di[omode + i] = MODE_SLIP
                    df[odir + i] = 1.0 if wa + wb > 0.0 else -1.0
                    _log_event(mi, df, di, t0, i, EV_BREAKAWAY)
        _set_stuck_list(mi, di)
        st |= _build_cache(mf, mi, df, di)
        _reconstruct(mf, mi, df, di, oy)
    if di[ofl + FLAG_CACHE_VALID] == 0:
        if not backed_up:
            _backup(mi, df, di)
            backed_up = True
        _mode_prepare(mf, mi, df, di, 0.0, oy, True)
        st |= _mode_full(mf, mi, df, di, 0.0, oy, t0, -1)
        st |= _enforce_capacity(mf, mi, df, di, 0.0, oy, t0)
    st |= _cache_status(mi, di)
    check_start = True
    used = 0.0
    nsub = 0
    fresh = False
    last_s = 0.0
    last_h = 0.0
    max_events = mi[H_MAX_EVENTS]
    while True:
        remaining = dt - used
        if remaining <= 1e-12 * dt:
            break
        if nsub >= max_events:
            # out of budget: finish the step without locating further events
            st |= ST_EVENT_BUDGET
            di[ocnt + CNT_BUDGET_HITS] += 1
            _mode_prepare(mf, mi, df, di, used, oy, False)
            oy0 = mi[DF_Y0]
            ok1 = mi[DF_K1]
            for q in range(ny):
                df[oy0 + q] = df[oy + q]
            _caps(mf, mi, df, used, remaining, 0, oy0 + 2 * n + s)
            _deriv(mf, mi, df, di, used, remaining, 0, oy0, oy0 + 2 * n + s, ok1)
            _rk4_call(mf, mi, df, di, used, remaining, oy0, ok1, oy)
            fresh = False
            break
        h_used, code = _integrate_substep(mf, mi, df, di, used, remaining, check_start, reuse)
        check_start = False
        reuse = False
        if code == 0:
            fresh = True
            last_s = used
            last_h = h_used
            break
        if not backed_up:
            # DF_Y0 still holds the state at the step start
            oy0 = mi[DF_Y0]
            for q in range(ny):
                df[oy0 + q], df[oy + q] = df[oy + q], df[oy0 + q]
            _backup(mi, df, di)
            for q in range(ny):
                df[oy0 + q], df[oy + q] = df[oy + q], df[oy0 + q]
            backed_up = True
        nsub += 1
        if code == 2 or code == 4:
            # the mode no longer fits the state: solve it here, then integrate
            if _mode_prepare(mf, mi, df, di, used, oy, code == 4):
                st |= _mode_full(mf, mi, df, di, used, oy, t0 + used, -1)
                st |= _enforce_capacity(mf, mi, df, di, used, oy, t0 + used)
            continue
        if code == 5:
            # a missed zero crossing: handled as an event here
            st |= _handle_event(mf, mi, df, di, used, t0 + used)
            continue
        used += h_used
        if code == 3:
            # a kiss point: the mode is checked (and solved if it no longer fits) there
            check_start = True
            continue
        st |= _handle_event(mf, mi, df, di, used, t0 + used)
    if nsub > di[ocnt + CNT_SUBSTEPS_MAX]:
        di[ocnt + CNT_SUBSTEPS_MAX] = nsub
    df[ot] = t0 + dt
    _outputs(mf, mi, df, di, dt, fresh)
    finite = True
    for q in range(ny):
        if not math.isfinite(df[oy + q]):
            finite = False
            break
    if not finite:
        if backed_up:
            obk = mi[DF_BACKUP]
            obki = mi[DI_BACKUP]
            obnd = mi[DI_BND]
            for q in range(ny):
                df[oy + q] = df[obk + q]
            for i in range(g):
                df[odir + i] = df[obk + ny + i]
                df[oca + i] = df[obk + ny + g + i]
                df[ocb + i] = df[obk + ny + 2 * g + i]
                di[omode + i] = di[obki + i]
                di[obnd + i] = di[obki + g + i]
        else:
            oy0 = mi[DF_Y0]
            for q in range(ny):
                df[oy + q] = df[oy0 + q]
        df[ot] = t0
        _set_stuck_list(mi, di)
        _build_cache(mf, mi, df, di)
        _outputs_call(mf, mi, df, di, 0.0, False)
        di[ocnt + CNT_ROLLBACKS] += 1
        st = ST_NONFINITE
    elif fresh and mi[H_REUSE] == 1:
        _reuse_store(mf, mi, df, di, last_s, last_h)
    if di[ofl + FLAG_DRIVE_REDUNDANT] == 1:
        st |= ST_DRIVE_REDUNDANT
    if nkin > 0:
        _kin_end(mf, mi, df, di)
    di[ocnt + CNT_STEPS] += 1
    di[ofl + FLAG_STATUS] = st
    return st

@njit(**JIT)
def _start(mf, mi, df, di):
    """Implementation of core_start.  Prepare a freshly set state; rows marked MODE_STUCK in DI_MODE start engaged.

    The speeds of each engaged group are rebuilt from its root shaft (the
    lowest index), the mode is solved and the outputs are computed, so they
    are valid before the first step.  Engagement at the start is not logged
    as an event; a requested row that cannot hold is logged as a breakaway.
    Returns the status word.
    """
    n, g, s = _sizes(mi)
    oy = mi[DF_Y]
    omode = mi[DI_MODE]
    odir = mi[DF_DIR]
    for i in range(g):
        if di[omode + i] != MODE_STUCK:
            di[omode + i] = MODE_FREE
            df[odir + i] = 0.0
    if mi[H_NKIN] > 0:
        _kin_start(mf, mi, df, di)
    _set_stuck_list(mi, di)
    st = _build_cache(mf, mi, df, di)
    _reconstruct(mf, mi, df, di, oy)
    t = df[mi[DF_TIME]]
    ocnt = mi[DI_COUNTERS]
    before = di[ocnt + CNT_EVENTS]
    _mode_prepare(mf, mi, df, di, 0.0, oy, True)
    st |= _mode_full(mf, mi, df, di, 0.0, oy, t, -1)
    st |= _enforce_capacity(mf, mi, df, di, 0.0, oy, t)
    E = mi[H_EVCAP]
    okind = mi[DI_EV_KIND]
    orow = mi[DI_EV_ROW]
    otime = mi[DF_EV_TIME]
    keep = before
    for q in range(before, di[ocnt + CNT_EVENTS]):
        k = q % E
        if di[okind + k] != EV_STICK:
            kk = keep % E
            di[okind + kk] = di[okind + k]
            di[orow + kk] = di[orow + k]
            df[otime + kk] = df[otime + k]
            keep += 1
    di[ocnt + CNT_EVENTS] = keep
    _outputs_call(mf, mi, df, di, 0.0, False)
    if mi[H_NKIN] > 0:
        _kin_end(mf, mi, df, di)
    di[mi[DI_FLAGS] + FLAG_STATUS] = st
    return st


# ==========================================================================
# public entry points (explicit signatures: compiled at import, never in a run)
# ==========================================================================
@njit("int64(" + BUFS + ", float64)", **JIT)
def core_step(mf, mi, df, di, dt):
    """Advance the core by one fixed step of dt seconds.  Returns the status word.

    Reads DF_U_TAU / DF_U_ACT (+ rates); writes DF_DELTA, DF_MU, DF_CAP_S,
    DF_CAP_K, DF_ACCEL, DF_SPRING_TQ, DF_LAMBDA_REQ and the event log.  Bad
    inputs (non-finite, dt <= 0) leave the state untouched; a step that would
    produce a non-finite state is rolled back.  Called in the real-time loop.
    """
    return _step(_raw_f(mf), _raw_i(mi), _raw_f(df), _raw_i(di), dt)


@njit("int64(" + BUFS + ")", **JIT)
def core_start(mf, mi, df, di):
    """Prepare a freshly set state; rows marked MODE_STUCK in DI_MODE start engaged (see _start)."""
    return _start(_raw_f(mf), _raw_i(mi), _raw_f(df), _raw_i(di))


@njit("int64(" + BUFS + ", float64[::1])", **JIT)
def core_run(mf, mi, df, di, dts):
    """Take len(dts) steps with the inputs held; returns the OR of the status words.

    For benchmarks and tests that need many steps without Python in the loop.
    """
    rmf, rmi, rdf, rdi = _raw_f(mf), _raw_i(mi), _raw_f(df), _raw_i(di)
    st = 0
    for k in range(dts.shape[0]):
        st |= _step(rmf, rmi, rdf, rdi, dts[k])
    return st
