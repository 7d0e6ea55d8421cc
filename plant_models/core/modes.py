"""Stage 2 of the method: which rows stay stuck.

All rows stuck at the same time are solved together: the partition problem
of Morselli, Zanasi & Ferracin (eq. 18) is the box-constrained QP
``min 1/2 l^T W l + b^T l,  -K <= l <= K`` with ``W = R_c M^-1 R_c^T``,
strictly convex when the stuck rows are independent and solved exactly by a
primal active-set method with a fixed iteration cap (:func:`_box_qp`).

The stuck set is cached: the constrained inverse inertia ``P``, the force
map of the stuck rows, and a spanning forest (or, for rows of other than two
entries, a substitution order) of the stuck rows from which the speeds of
each stuck group are rebuilt from its root shaft, so that a stuck row reads
``delta == 0.0`` exactly and never drifts (:mod:`.stuckset`,
:func:`.tree._build_tree`).  Redundant rows get the
minimum-norm split of their force; cycles with inconsistent ratios lock
their shafts.  Transitions are logged in the event ring.

Everything works on raw pointers into the flat buffers of :mod:`.layout`
and is called in the real-time loop.
"""

from __future__ import annotations

import numpy as np

from .jit import JIT, JIT_STAGE, call_solve_at, kernel
from .tree import _build_tree
from .linalg import _box_qp, _chol_solve, _cholesky, _delassus, _fill_rows
from .dynamics import ORIENT_HYPER, _caps, _forces, _hyper_parent_sum, _sizes, _slip, _yoff
from .stuckset import _build_cache, _mass_times, _reconstruct, _stuck_lambda  # noqa: F401  (re-exported)
from .layout import (
    CNT_EVENTS, CNT_SOLVER_ITER_LAST, CNT_SOLVER_ITER_MAX, DF_A, DF_BV, DF_CAPK_T, DF_CAPS_T, DF_CH, DF_DIR,
    DF_DRIVE_ACC, DF_EV_TIME, DF_F, DF_GRAD, DF_HI, DF_L, DF_LAMBDA_REQ, DF_LAMW, DF_LO, DF_MU, DF_P, DF_PREV_DIR,
    DF_RHO, DF_SPLIT_C, DF_SPLIT_G, DF_TMPN, DF_TMPN2, DF_W, DF_XV, DI_BND, DI_CAND, DI_CBND, DI_COUNTERS, DI_DRIVE,
    DI_DRV_LIST, DI_EV_KIND, DI_EV_ROW, DI_FLAGS, DI_IDX, DI_LOCKED, DI_MODE, DI_NSTUCK, DI_NTREE, DI_ORIENT,
    DI_PREV_MODE, DI_STUCK, DI_TREE_C, DI_TREE_P, DI_TREE_R, EV_BREAKAWAY, EV_REVERSAL, EV_STICK, FLAG_CACHE_VALID,
    FLAG_LOCKED, FLAG_OVERCONSTRAINED, H_EVCAP, H_G, H_MAX_ITER, H_N, MF_INERTIA, MF_INV_INERTIA, MF_SETTINGS,
    MF_STRIBECK_VS, MODE_FREE, MODE_SLIP, MODE_STUCK, SET_BREAK_MARGIN, SET_RANK_TOL, SET_REG, SET_SOLVER_TOL,
    ST_LOCKED, ST_OVERCONSTRAINED, ST_SOLVER_LIMIT, W_IMPULSE, DF_AM, DF_TMPN3, FLAG_HELD, FLAG_TREE_PARTIAL,
    H_DENSE, H_FN_SOLVE, MF_MASS, MF_MINV, MI_ONEWAY,
)

# the stuck set's caches, tree and exact reconstruction are in .stuckset (imported above; the stages
# that import _build_cache, _reconstruct and _stuck_lambda from here get them through this module)

@kernel(**JIT)
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
    dense = mi[H_DENSE] == 1
    for j in range(n):
        df[ow0 + j] = df[oy + j]
    if dense:
        _mass_times(mf, mi, df, oy, otmp)
    else:
        for j in range(n):
            df[otmp + j] = mf[oJ + j] * df[oy + j]
    for r in range(n):
        acc = 0.0
        for c in range(n):
            acc += df[oP + r * n + c] * df[otmp + c]
        df[oy + r] = acc
    _reconstruct(mf, mi, df, di, oy)
    # an M-orthogonal projection removes exactly 1/2 |w0 - w1|_M^2 (computed so, not as a
    # difference of two large energies, it cannot come out positive by rounding)
    loss = 0.0
    if dense:
        om = mi[MF_MASS]
        for j in range(n):
            dj = df[ow0 + j] - df[oy + j]
            for k in range(n):
                loss += dj * mf[om + j * n + k] * (df[ow0 + k] - df[oy + k])
        if loss < 0.0:
            loss = 0.0
    else:
        for j in range(n):
            dw = df[ow0 + j] - df[oy + j]
            loss += mf[oJ + j] * dw * dw
    df[oy + ow + W_IMPULSE] -= 0.5 * loss


@kernel(**JIT)
def _log_event(mi, df, di, t, row, kind):
    """Append an event to the ring log (overwriting the oldest when full).  Called in the real-time loop."""
    E = mi[H_EVCAP]
    oc = mi[DI_COUNTERS]
    k = di[oc + CNT_EVENTS] % E
    df[mi[DF_EV_TIME] + k] = t
    di[mi[DI_EV_ROW] + k] = row
    di[mi[DI_EV_KIND] + k] = kind
    di[oc + CNT_EVENTS] += 1


@kernel(**JIT)
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


@kernel(**JIT)
def _mode_prepare(mf, mi, df, di, s_abs, oy, force_full):
    """Save the modes, give non-stuck rows the direction of their slip; say if a full solve is due.

    A full solve is due when a stuck row lost its capacity, a non-stuck row
    with capacity has exactly zero relative speed (a candidate), the caches
    are invalid, or the caller asks for it.  A row without capacity whose
    slip changed sign since its direction was last set (its crossing is not
    located) takes the new direction as its previous one too, so no
    reversal is logged for it.  Called in the real-time loop.
    """
    n, g, s = _sizes(mi)
    omode = mi[DI_MODE]
    odir = mi[DF_DIR]
    opm = mi[DI_PREV_MODE]
    opd = mi[DF_PREV_DIR]
    ocs = mi[DF_CAPS_T]
    ock = mi[DF_CAPK_T]
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
        if d > 0.0 or d < 0.0:
            di[omode + i] = MODE_SLIP
            df[odir + i] = 1.0 if d > 0.0 else -1.0
            if df[ocs + i] <= 0.0 and df[ock + i] <= 0.0:
                # an open row's zero crossing is no friction event (nothing located it, nothing acts
                # there): its new direction is not a reversal for _commit_mode to log
                df[opd + i] = df[odir + i]
        elif df[ocs + i] > 0.0:
            need = True
        elif di[omode + i] != MODE_SLIP:
            di[omode + i] = MODE_FREE
            df[odir + i] = 0.0
    return need


@kernel(**JIT)
def _mode_full(mf, mi, df, di, s_abs, oy, t_abs, forced):
    """Solve which rows stay stuck (box-constrained QP); log transitions; rebuild caches.

    Call _mode_prepare first.  Candidates are the rows with static capacity
    that are stuck or have exactly zero relative speed.  A row at a bound
    with a non-zero relative acceleration breaks away in that direction.
    When a breaking row's force drops from K to k < K, the solve is repeated
    with it slipping, so cascades resolve in the same instant.  Returns
    status bits.  Called in the real-time loop.
    """
    g = mi[H_G]
    st = 0
    m = _collect_candidates(mi, df, di, oy, forced)
    passes = 0
    while m > 0 and passes <= g:
        passes += 1
        m, nleave, drop, st_pass = _solve_candidates(mf, mi, df, di, s_abs, oy, m)
        st |= st_pass
        if nleave == 0 or not drop:
            break
    return st | _commit_mode(mf, mi, df, di, oy, t_abs, m)


@kernel(**JIT_STAGE)
def _collect_candidates(mi, df, di, oy, forced):
    """List the rows that may be stuck after this solve (DI_CAND); returns their number.

    Driven rows that slip enter as equalities with their prescribed
    acceleration (marked in DI_DRV_LIST); a stuck row without capacity is
    released.  Called in the real-time loop.
    """
    g = mi[H_G]
    omode = mi[DI_MODE]
    odir = mi[DF_DIR]
    opm = mi[DI_PREV_MODE]
    obnd = mi[DI_BND]
    ocs = mi[DF_CAPS_T]
    olreq = mi[DF_LAMBDA_REQ]
    olam = mi[DF_LAMW]
    ocand = mi[DI_CAND]
    ocb = mi[DI_CBND]
    odrv = mi[DI_DRIVE]
    omk = mi[DI_DRV_LIST]  # 1: a driven candidate (prescribed acceleration, unbounded force)
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
    return m


@kernel(**JIT_STAGE)
def _cascade_one(mf, mi, df, di, m, reg, tol):
    """Whether only one row may break away in this pass, and which (its index among the candidates).

    When one of several rows that break at once drops from K to a Coulomb
    force k < K, the others were decided with its force at K, which it no
    longer exerts.  Then only the dropping row that breaks most clearly
    (relative acceleration per unit of the acceleration its capacity gives)
    leaves, and the others are solved again with it slipping, one at a time
    as :func:`_enforce_capacity` does (at most g passes).  Called in the
    real-time loop.
    """
    omk = mi[DI_DRV_LIST]
    ocand = mi[DI_CAND]
    ocb = mi[DI_CBND]
    ograd = mi[DF_GRAD]
    obv = mi[DF_BV]
    oW = mi[DF_W]
    ohi = mi[DF_HI]
    ocs = mi[DF_CAPS_T]
    ock = mi[DF_CAPK_T]
    ovs = mi[MF_STRIBECK_VS]
    nleave = 0
    drop = False
    first = -1
    best = -1.0
    for k in range(m):
        i = di[ocand + k]
        if di[omk + i] == 1:
            continue
        bk = di[ocb + k]
        gk = df[ograd + k]
        thr = tol * (abs(df[obv + k]) + (df[oW + k * m + k] - reg) * df[ohi + k]) + 1e-300
        if (bk == 1 and gk < -thr) or (bk == -1 and gk > thr):
            nleave += 1
            if df[ock + i] < df[ocs + i] and mf[ovs + i] <= 0.0:
                drop = True
                score = abs(gk) / ((df[oW + k * m + k] - reg) * df[ohi + k] + 1e-300)
                if score > best:
                    best = score
                    first = k
    return drop and nleave > 1, first


@kernel(**JIT_STAGE)
def _solve_candidates(mf, mi, df, di, s_abs, oy, m):
    """One pass of the friction solve over the m candidates; the rows that break away leave the list.

    The steps of eq. (18) of Morselli, Zanasi & Ferracin: the free forces
    f (:func:`.dynamics._forces`, stuck rows excluded), the candidates' rows A and
    W = A M^-1 A^T, the box (:func:`_candidate_box`), a regularisation of
    redundant candidates (:func:`_regularise_redundant`), the box QP
    (:func:`.linalg._box_qp`) and the breakaway test (:func:`_break_away`).
    Returns (candidates kept, rows that broke away, whether one of them
    dropped from static to a lower Coulomb force, status bits).  Called in
    the real-time loop.
    """
    n, g, s = _sizes(mi)
    st = 0
    oidx = mi[DI_IDX]
    oA = mi[DF_A]
    oW = mi[DF_W]
    max_iter = mi[H_MAX_ITER]
    tol = mf[mi[MF_SETTINGS] + SET_SOLVER_TOL]
    ox0 = oy + 2 * n + s
    _forces(mf, mi, df, di, s_abs, 0.0, 0, oy, ox0)
    _fill_rows(mi, df, di, mi[DI_CAND], m, oA)
    _delassus(mf, mi, df, oA, m, oW)
    _candidate_box(mf, mi, df, di, m)
    redundant, reg = _regularise_redundant(mf, mi, df, di, m)
    if redundant:
        st |= ST_OVERCONSTRAINED
    it = _box_qp(df, di, oW, mi[DF_BV], mi[DF_LO], mi[DF_HI], m, mi[DF_LAMW], mi[DI_CBND], max_iter, tol,
                 mi[DF_CH], oidx, mi[DF_XV], mi[DF_GRAD])
    if it < 0:
        st |= ST_SOLVER_LIMIT
        it = max_iter
    ocnt = mi[DI_COUNTERS]
    di[ocnt + CNT_SOLVER_ITER_LAST] = it
    if it > di[ocnt + CNT_SOLVER_ITER_MAX]:
        di[ocnt + CNT_SOLVER_ITER_MAX] = it
    keep, nleave, drop = _break_away(mf, mi, df, di, m, reg, tol)
    return keep, nleave, drop, st


@kernel(**JIT_STAGE)
def _candidate_box(mf, mi, df, di, m):
    """The QP's linear term and box for the m candidates: b = A M^-1 f (rad/s^2) and lo <= l <= hi (N m).

    b (DF_BV) is the candidates' relative acceleration under the free
    forces f (DF_F); a driven candidate's prescribed acceleration is
    subtracted and its force unbounded.  Box: +-K (static capacity,
    DF_CAPS_T), 0 <= l <= K for a freewheel (one-way row).  DI_IDX: 0..m-1.
    """
    n = mi[H_N]
    ocs = mi[DF_CAPS_T]
    of = mi[DF_F]
    ocand = mi[DI_CAND]
    oidx = mi[DI_IDX]
    oA = mi[DF_A]
    obv = mi[DF_BV]
    olo = mi[DF_LO]
    ohi = mi[DF_HI]
    oinv = mi[MF_INV_INERTIA]
    omk = mi[DI_DRV_LIST]
    oacc_t = mi[DF_DRIVE_ACC]
    dense = mi[H_DENSE] == 1
    oam = mi[DF_AM]
    oow = mi[MI_ONEWAY]
    for k in range(m):
        acc = 0.0
        if dense:
            for c in range(n):
                acc += df[oam + k * n + c] * df[of + c]
        else:
            for c in range(n):
                acc += df[oA + k * n + c] * mf[oinv + c] * df[of + c]
        df[obv + k] = acc
        cap = df[ocs + di[ocand + k]]
        if di[omk + di[ocand + k]] == 1:
            df[obv + k] -= df[oacc_t + di[ocand + k]]
            cap = np.inf
        # a freewheel holds its relative speed from going negative only: 0 <= force <= K
        df[olo + k] = 0.0 if mi[oow + di[ocand + k]] == 1 else -cap
        df[ohi + k] = cap
        di[oidx + k] = k


@kernel(**JIT_STAGE)
def _regularise_redundant(mf, mi, df, di, m):
    """Whether the candidates are redundant (W singular to SET_RANK_TOL), and the regularisation added to W's diagonal.

    Redundant candidates get the minimum-norm split of their forces through
    a small regularisation SET_REG * max W_kk (1/(kg m^2)); returns
    (redundant, reg), reg 0.0 when they are independent.
    """
    oW = mi[DF_W]
    oLc = mi[DF_CH]
    oset = mi[MF_SETTINGS]
    wmax = 0.0
    for k in range(m):
        wmax = max(wmax, df[oW + k * m + k])
    redundant = not _cholesky(df, di, oW, m, mi[DI_IDX], m, oLc, 0.0)
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
    return redundant, reg


@kernel(**JIT_STAGE)
def _break_away(mf, mi, df, di, m, reg, tol):
    """The rows at a bound whose relative acceleration points away from zero break away (slip); the rest stay.

    A row at +K (-K) with W l + b < 0 (> 0) beyond ``tol`` slips in that
    direction (eq. 18's KKT conditions violated: its static capacity
    cannot hold it); only one at a time when :func:`_cascade_one` says so.
    The candidates that stay are compacted to the front of DI_CAND with
    their bound states and multipliers.  Returns (kept, broke away,
    whether one dropped from static to a lower Coulomb force).
    """
    omode = mi[DI_MODE]
    odir = mi[DF_DIR]
    ocs = mi[DF_CAPS_T]
    ock = mi[DF_CAPK_T]
    ovs = mi[MF_STRIBECK_VS]
    olreq = mi[DF_LAMBDA_REQ]
    olam = mi[DF_LAMW]
    ocand = mi[DI_CAND]
    ocb = mi[DI_CBND]
    oW = mi[DF_W]
    obv = mi[DF_BV]
    ograd = mi[DF_GRAD]
    ohi = mi[DF_HI]
    omk = mi[DI_DRV_LIST]
    nleave = 0
    drop = False
    one, first = _cascade_one(mf, mi, df, di, m, reg, tol)
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
        if ((bk == 1 and gk < -thr) or (bk == -1 and gk > thr)) and (not one or k == first):
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
    return keep, nleave, drop


@kernel(**JIT_STAGE)
def _commit_mode(mf, mi, df, di, oy, t_abs, m):
    """Make the solved mode the current one: bound states, logged transitions, caches.

    Driven candidates slip again (their direction was set by _mode_prepare).
    Returns status bits.  Called in the real-time loop.
    """
    g = mi[H_G]
    st = 0
    omode = mi[DI_MODE]
    odir = mi[DF_DIR]
    opm = mi[DI_PREV_MODE]
    opd = mi[DF_PREV_DIR]
    obnd = mi[DI_BND]
    ocand = mi[DI_CAND]
    ocb = mi[DI_CBND]
    ofl = mi[DI_FLAGS]
    omk = mi[DI_DRV_LIST]
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


@kernel(**JIT)
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
            if mi[mi[MI_ONEWAY] + i] == 1 and lam < 0.0:
                rel = (-lam - cap * margin) / (cap + 1e-300)  # a freewheel pulled the wrong way overruns
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


@kernel(**JIT)
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
# the mode solver as an entry point of its own
# ==========================================================================
SOLVE_CACHE = 0  # solve_entry's op: rebuild the stuck set's caches (_build_cache)
SOLVE_MODE = 1  # solve_entry's op: the friction mode (_mode_full, then _enforce_capacity)


def solve_entry(mf, mi, df, di, op, s_abs, oy, t_abs):
    """The mode solver, compiled as a C entry point of its own (:mod:`.entry`); returns status bits.

    The step and the start call it through its address (``H_FN_SOLVE``):
    it runs only where a mode changes, never in a step without events, and
    compiled apart it is not optimised again inside the step's entry point,
    so a warm-up compiles it in a second process beside the step (about
    40 % of the core's compile).  ``op``: ``SOLVE_CACHE`` or ``SOLVE_MODE``
    (prepare the candidates first: :func:`_mode_prepare`).
    """
    if op == SOLVE_CACHE:
        return _build_cache(mf, mi, df, di)
    st = _mode_full(mf, mi, df, di, s_abs, oy, t_abs, -1)
    return st | _enforce_capacity(mf, mi, df, di, s_abs, oy, t_abs)


@kernel(**JIT)
def _solve_cache(mf, mi, df, di):
    """:func:`_build_cache` through the solver's entry point.  Called in the real-time loop."""
    return call_solve_at(mi[H_FN_SOLVE], mf, mi, df, di, SOLVE_CACHE, 0.0, 0, 0.0)


@kernel(**JIT)
def _solve_mode(mf, mi, df, di, s_abs, oy, t_abs):
    """:func:`_mode_full` and :func:`_enforce_capacity` through the solver's entry point (call
    :func:`_mode_prepare` first).  Called in the real-time loop."""
    return call_solve_at(mi[H_FN_SOLVE], mf, mi, df, di, SOLVE_MODE, s_abs, oy, t_abs)
