"""The stuck rows' substitution order: how the speeds of a stuck set are rebuilt exactly.

For rows of two entries it is a spanning forest of the stuck rows
(:func:`_build_tree`): each stuck group's speeds are rebuilt from its root
shaft, so a stuck row reads ``delta == 0.0`` exactly and never drifts; a
cycle whose ratio product is not the identity locks its shafts.  For rows of
one or of three or more entries (brakes, clutches between members of a
reduced planetary gear train) it is the peeling order of
:func:`_build_tree_hyper`.  Part of stage 2 of the method (:mod:`.modes`
builds the stuck-set cache with it and runs the reconstruction).

Everything works on raw pointers into the flat buffers of :mod:`.layout`
and is called in the real-time loop.

Length: :func:`_build_tree` (a breadth-first search over the stuck rows
with the cycle test on each closing row) and :func:`_build_tree_hyper` (the
peeling loop with its locked-shaft test) are each one graph traversal over
shared queues and marks; split, each piece would take the traversal's
whole state as arguments.
"""

from __future__ import annotations

from .jit import JIT, kernel
from .dynamics import ORIENT_HYPER, _entry_shaft_coef, _sizes
from .layout import (
    DF_COEF_A, DF_COEF_B, DF_P, DF_RHO, DF_TMPN, DI_COMP, DI_FLAGS, DI_IDX, DI_LOCKED, DI_NSTUCK, DI_NTREE,
    DI_ORIENT, DI_QUEUE, DI_STUCK, DI_TREE_C, DI_TREE_P, DI_TREE_R, MF_INV_INERTIA, MF_SETTINGS, MI_ROW_A, MI_ROW_B,
    SET_CYCLE_TOL, DF_RHO_AB, DF_RHO_X, DI_CHILD, DI_PEEL, FLAG_TREE_PARTIAL, H_DENSE, H_HYPER, MF_MINV, MI_ROW_NX,
    MI_ROW_XOFF,
)


@kernel(**JIT)
def _build_tree(mf, mi, df, di, r):
    """Spanning forest of the stuck rows, cycle consistency and locked groups.

    A group whose stuck rows close a cycle with a ratio product other than the
    identity (e.g. two different gears between the same two shafts) can only
    turn at zero speed: it is marked locked.  When a stuck row has other than
    two entries the substitution order is built by :func:`_build_tree_hyper`
    instead (``r``: the first r rows of DI_IDX are the independent stuck
    rows).  Returns 2 if a shaft is locked, 1 if shafts are only held at zero by rows to the
    housing on them alone (brakes: zeroed, no status), else 0.  Called in the real-time loop.
    """
    n, g, s = _sizes(mi)
    di[mi[DI_FLAGS] + FLAG_TREE_PARTIAL] = 0
    if mi[H_HYPER] > 0:
        ost = mi[DI_STUCK]
        onx = mi[MI_ROW_NX]
        for k in range(di[mi[DI_NSTUCK]]):
            if mi[onx + di[ost + k]] != 0:
                return _build_tree_hyper(mf, mi, df, di, r)
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
    return 2 if any_locked else 0


@kernel(**JIT)
def _build_tree_hyper(mf, mi, df, di, r):
    """Substitution order of a stuck set with rows of other than two entries; locked shafts.

    A shaft the stuck rows hold at zero speed (its row of the constrained
    inverse inertia P vanishes: a braked shaft, a tie-up) is locked and set
    to exactly 0.0.  The independent stuck rows are then peeled: a shaft
    that appears (unlocked) in exactly one remaining row is that row's
    child, determined by the row from its other shafts; the row leaves and
    the peeling goes on (the highest-numbered shaft first, so low-numbered
    shafts stay roots).  Run backwards, the peeled rows give each child
    from shafts already final (:func:`_reconstruct`), and each reads
    c_child * (w_child + sum rho_e w_e) = 0.0 exactly
    (:func:`.dynamics._hyper_tree_delta`).  For two-entry rows this is the
    spanning tree.  Independent rows the peeling cannot reach (each of
    their shafts shared with another remaining row) are held by projecting
    the speeds onto the stuck rows first (FLAG_TREE_PARTIAL), to rounding.
    Returns 2 if a shaft is locked (ST_LOCKED), 1 if the only shafts held at
    zero are each held by a stuck row to the housing on it alone (a brake on
    an independent speed: that is its job, not a lock), else 0.  Called in
    the real-time loop.
    """
    n, g, s = _sizes(mi)
    oor = mi[DI_ORIENT]
    olock = mi[DI_LOCKED]
    otc = mi[DI_TREE_C]
    otr = mi[DI_TREE_R]
    otp = mi[DI_TREE_P]
    ost = mi[DI_STUCK]
    oidx = mi[DI_IDX]
    och = mi[DI_CHILD]
    ocnt = mi[DI_PEEL]
    orow = ocnt + n
    onx = mi[MI_ROW_NX]
    oP = mi[DF_P]
    ctol = mf[mi[MF_SETTINGS] + SET_CYCLE_TOL]
    held = 0
    ora = mi[MI_ROW_A]
    for j in range(n):
        mjj = mf[mi[MF_MINV] + j * n + j] if mi[H_DENSE] == 1 else mf[mi[MF_INV_INERTIA] + j]
        di[olock + j] = 0
        di[ocnt + j] = 0
        if df[oP + j * n + j] <= ctol * mjj:
            di[olock + j] = 1
            braked = False
            for k in range(di[mi[DI_NSTUCK]]):
                i = di[ost + k]
                if mi[onx + i] == -1 and mi[ora + i] == j:
                    braked = True
            held = max(held, 1 if braked else 2)
    for i in range(g):
        di[oor + i] = 0
        di[orow + i] = 0
    for q in range(r):
        i = di[ost + di[oidx + q]]
        di[orow + i] = 1
        ne = 2 + mi[onx + i] if mi[onx + i] >= 0 else 1
        for e in range(ne):
            j, c = _entry_shaft_coef(mi, df, i, e)
            if di[olock + j] == 0:
                di[ocnt + j] += 1
    ntree = 0
    while True:
        child = -1
        for j in range(n - 1, -1, -1):
            if di[ocnt + j] == 1:
                child = j
                break
        if child < 0:
            break
        row = -1
        ec = -1
        for k in range(di[mi[DI_NSTUCK]]):
            i = di[ost + k]
            if di[orow + i] != 1:
                continue
            ne = 2 + mi[onx + i] if mi[onx + i] >= 0 else 1
            for e in range(ne):
                j, c = _entry_shaft_coef(mi, df, i, e)
                if j == child:
                    row = i
                    ec = e
            if row >= 0:
                break
        di[orow + row] = 0
        di[oor + row] = ORIENT_HYPER
        di[och + row] = ec
        jc, cc = _entry_shaft_coef(mi, df, row, ec)
        ne = 2 + mi[onx + row] if mi[onx + row] >= 0 else 1
        for e in range(ne):
            j, c = _entry_shaft_coef(mi, df, row, e)
            rho = c / cc
            if e < 2:
                df[mi[DF_RHO_AB] + 2 * row + e] = rho
            else:
                df[mi[DF_RHO_X] + mi[mi[MI_ROW_XOFF] + row] + e - 2] = rho
            if di[olock + j] == 0:
                di[ocnt + j] -= 1
        di[otc + ntree] = child
        di[otr + ntree] = row
        di[otp + ntree] = -1
        ntree += 1
    # the reconstruction runs the peeled rows backwards
    for e in range(ntree // 2):
        f = ntree - 1 - e
        di[otc + e], di[otc + f] = di[otc + f], di[otc + e]
        di[otr + e], di[otr + f] = di[otr + f], di[otr + e]
    di[mi[DI_NTREE]] = ntree
    for j in range(n):
        if di[ocnt + j] > 0:
            di[mi[DI_FLAGS] + FLAG_TREE_PARTIAL] = 1
    return held
