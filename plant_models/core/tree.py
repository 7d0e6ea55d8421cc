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
and is called in the real-time loop.  The steps of the two traversals are
stages inlined into them (``JIT_STAGE``): the queues and marks they share
live in ``di``, so a stage takes only the offsets it reads.
"""

from __future__ import annotations

from .jit import JIT, JIT_STAGE, kernel
from .dynamics import ORIENT_HYPER, _entry_shaft_coef, _sizes
from .layout import (
    DF_COEF_A, DF_COEF_B, DF_P, DF_RHO, DF_TMPN, DI_COMP, DI_FLAGS, DI_IDX, DI_LOCKED, DI_NSTUCK, DI_NTREE,
    DI_ORIENT, DI_QUEUE, DI_STUCK, DI_TREE_C, DI_TREE_P, DI_TREE_R, MF_INV_INERTIA, MF_SETTINGS, MI_ROW_A, MI_ROW_B,
    SET_CYCLE_TOL, DF_RHO_AB, DF_RHO_X, DI_CHILD, DI_PEEL, FLAG_TREE_PARTIAL, H_DENSE, H_HYPER, H_N, MF_MINV, MI_ROW_NX,
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
    if mi[H_HYPER] > 0 and _any_hyper_stuck(mi, di):
        return _build_tree_hyper(mf, mi, df, di, r)
    _clear_tree_marks(mi, di, n, g)
    ocomp = mi[DI_COMP]
    ntree = 0
    for root in range(n):
        if di[ocomp + root] == -1:
            ntree = _grow_group(mi, df, di, root, ntree)
    any_locked = _lock_inconsistent_cycles(mf, mi, df, di, n)
    di[mi[DI_NTREE]] = ntree
    return 2 if any_locked else 0


@kernel(**JIT_STAGE)
def _any_hyper_stuck(mi, di):
    """Whether a stuck row has other than two entries (then the peeling order replaces the spanning forest)."""
    ost = mi[DI_STUCK]
    onx = mi[MI_ROW_NX]
    for k in range(di[mi[DI_NSTUCK]]):
        if mi[onx + di[ost + k]] != 0:
            return True
    return False


@kernel(**JIT_STAGE)
def _clear_tree_marks(mi, di, n, g):
    """No row oriented (DI_ORIENT 0), no shaft in a group (DI_COMP -1) or locked (DI_LOCKED 0)."""
    oor = mi[DI_ORIENT]
    ocomp = mi[DI_COMP]
    olock = mi[DI_LOCKED]
    for i in range(g):
        di[oor + i] = 0
    for v in range(n):
        di[ocomp + v] = -1
        di[olock + v] = 0


@kernel(**JIT_STAGE)
def _grow_group(mi, df, di, root, ntree):
    """Breadth-first search over the stuck rows from ``root``: one tree of the spanning forest.

    Each shaft reached gets its group (DI_COMP = root) and its speed gain
    relative to the root (DF_TMPN, dimensionless: w_other = gain w_root,
    since a stuck row reads c_a w_a + c_b w_b = 0, eq. 16 of Morselli,
    Zanasi & Ferracin); each row that reaches it becomes a tree row
    (DI_TREE_P/C/R: parent, child, row; DI_ORIENT +-1 by which end is the
    parent; DF_RHO = c_parent / c_child).  A row between two shafts already
    reached closes a cycle: DI_ORIENT 2, tested by
    :func:`_lock_inconsistent_cycles`.  Returns the tree rows so far.
    """
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
    oq = mi[DI_QUEUE]
    ogain = mi[DF_TMPN]
    ost = mi[DI_STUCK]
    ns = di[mi[DI_NSTUCK]]
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
    return ntree


@kernel(**JIT_STAGE)
def _lock_inconsistent_cycles(mf, mi, df, di, n):
    """Lock the group of every cycle-closing stuck row (DI_ORIENT 2) whose ratio product is not the identity.

    With the gains of :func:`_grow_group`, a closing row holds when
    c_a gain_a + c_b gain_b = 0; it is taken as held to SET_CYCLE_TOL
    relative to |c_a gain_a| + |c_b gain_b|.  Otherwise every shaft of its
    group gets DI_LOCKED 1.  Resets the closing rows' DI_ORIENT to 0 and
    returns whether a group was locked.
    """
    ora = mi[MI_ROW_A]
    orb = mi[MI_ROW_B]
    oca = mi[DF_COEF_A]
    ocb = mi[DF_COEF_B]
    oor = mi[DI_ORIENT]
    ocomp = mi[DI_COMP]
    olock = mi[DI_LOCKED]
    ogain = mi[DF_TMPN]
    ost = mi[DI_STUCK]
    ns = di[mi[DI_NSTUCK]]
    ctol = mf[mi[MF_SETTINGS] + SET_CYCLE_TOL]
    any_locked = False
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
    return any_locked


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
    held = _lock_held_shafts(mf, mi, df, di, n)
    _count_row_shafts(mi, df, di, g, r)
    ocnt = mi[DI_PEEL]
    ntree = 0
    while True:
        child = -1
        for j in range(n - 1, -1, -1):
            if di[ocnt + j] == 1:
                child = j
                break
        if child < 0:
            break
        _peel_row(mi, df, di, child, ntree)
        ntree += 1
    _reverse_tree(mi, di, ntree)
    di[mi[DI_NTREE]] = ntree
    for j in range(n):
        if di[ocnt + j] > 0:
            di[mi[DI_FLAGS] + FLAG_TREE_PARTIAL] = 1
    return held


@kernel(**JIT_STAGE)
def _lock_held_shafts(mf, mi, df, di, n):
    """Lock (DI_LOCKED 1) each shaft the stuck rows hold at zero speed and clear the peel counts DI_PEEL.

    A shaft j is held when P_jj <= SET_CYCLE_TOL * (M^-1)_jj (P: the
    constrained inverse inertia, 1/(kg m^2) or 1/kg).  Returns 2 if a held
    shaft is not braked by a one-entry stuck row on it (a lock), 1 if every
    held shaft is (a brake), 0 if none is held.
    """
    olock = mi[DI_LOCKED]
    ocnt = mi[DI_PEEL]
    onx = mi[MI_ROW_NX]
    oP = mi[DF_P]
    ost = mi[DI_STUCK]
    ora = mi[MI_ROW_A]
    ctol = mf[mi[MF_SETTINGS] + SET_CYCLE_TOL]
    held = 0
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
    return held


@kernel(**JIT_STAGE)
def _count_row_shafts(mi, df, di, g, r):
    """Mark the r independent stuck rows as left to peel and count each unlocked shaft's rows among them.

    Clears DI_ORIENT of every row; the marks (1: left to peel) are the
    rows' entries after the counts (DI_PEEL + n), the counts DI_PEEL.
    """
    n = mi[H_N]
    oor = mi[DI_ORIENT]
    olock = mi[DI_LOCKED]
    ost = mi[DI_STUCK]
    oidx = mi[DI_IDX]
    ocnt = mi[DI_PEEL]
    orow = ocnt + n
    onx = mi[MI_ROW_NX]
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


@kernel(**JIT_STAGE)
def _peel_row(mi, df, di, child, ntree):
    """Peel the remaining row in which ``child`` appears: entry ``ntree`` of the substitution order.

    The row's ratios to its child (rho_e = c_e / c_child, dimensionless)
    go to DF_RHO_AB (entries a, b) and DF_RHO_X (further entries), its
    child entry to DI_CHILD, DI_ORIENT becomes ORIENT_HYPER; the row leaves
    and its unlocked shafts' counts drop by one.
    """
    n = mi[H_N]
    oor = mi[DI_ORIENT]
    olock = mi[DI_LOCKED]
    otc = mi[DI_TREE_C]
    otr = mi[DI_TREE_R]
    otp = mi[DI_TREE_P]
    ost = mi[DI_STUCK]
    och = mi[DI_CHILD]
    ocnt = mi[DI_PEEL]
    orow = ocnt + n
    onx = mi[MI_ROW_NX]
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


@kernel(**JIT_STAGE)
def _reverse_tree(mi, di, ntree):
    """Reverse the peeled rows' order in place (DI_TREE_C, DI_TREE_R): the reconstruction runs them backwards."""
    otc = mi[DI_TREE_C]
    otr = mi[DI_TREE_R]
    for e in range(ntree // 2):
        f = ntree - 1 - e
        di[otc + e], di[otc + f] = di[otc + f], di[otc + e]
        di[otr + e], di[otr + f] = di[otr + f], di[otr + e]
