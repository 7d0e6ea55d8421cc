"""The stuck set's caches: constrained inverse inertia, force map, substitution order, exact reconstruction.

For the rows stuck at the same time (the list ``DI_STUCK``, chosen by
:mod:`.modes`) :func:`_build_cache` builds the constrained inverse inertia
``P`` (``acc = P f``), the map ``L`` from the other forces to the stuck rows'
forces, and a spanning forest (or, for rows of other than two entries, a
substitution order, :func:`.tree._build_tree`) from which
:func:`_reconstruct` rebuilds the speeds of each stuck group from its root
shaft, so that a stuck row reads ``delta == 0.0`` exactly and never drifts.
Redundant stuck rows get the minimum-norm split of their force
(:func:`_split_redundant`).

Everything works on raw pointers into the flat buffers of :mod:`.layout`
and is called in the real-time loop.  The steps of :func:`_build_cache`
(independent subset and its factor, P, L) are stages inlined into it
(``JIT_STAGE``); they share the subset (DI_IDX) and its factor (DF_CH).
"""

from __future__ import annotations

import math

from .jit import JIT, JIT_STAGE, kernel
from .tree import _build_tree
from .linalg import _chol_solve, _delassus, _fill_rows
from .dynamics import ORIENT_HYPER, _hyper_parent_sum, _sizes
from .layout import (
    DF_A, DF_AM, DF_CH, DF_F, DF_L, DF_LAMW, DF_P, DF_RHO, DF_SPLIT_C, DF_SPLIT_G, DF_TMPN3, DF_W, DF_XV, DI_FLAGS,
    DI_IDX, DI_LOCKED, DI_NSTUCK, DI_NTREE, DI_ORIENT, DI_STUCK, DI_TREE_C, DI_TREE_P, DI_TREE_R, FLAG_CACHE_VALID,
    FLAG_HELD, FLAG_LOCKED, FLAG_OVERCONSTRAINED, FLAG_TREE_PARTIAL, H_DENSE, H_G, H_N, MF_INERTIA, MF_INV_INERTIA,
    MF_MASS, MF_MINV, MF_SETTINGS, SET_RANK_TOL, ST_LOCKED, ST_OVERCONSTRAINED,
    DF_COEF_A, DF_COEF_B, DF_COEF_X, H_HYPER, MI_ROW_A, MI_ROW_B, MI_ROW_NX, MI_ROW_XOFF, MI_ROW_XSHAFT,
)


@kernel(**JIT)
def _mass_times(mf, mi, df, oy, oout):
    """df[oout] = M df[oy] (speeds only; M diagonal, or the full matrix of a reduced system).

    Called in the real-time loop.
    """
    n = mi[H_N]
    if mi[H_DENSE] == 1:
        om = mi[MF_MASS]
        for r in range(n):
            acc = 0.0
            for c in range(n):
                acc += mf[om + r * n + c] * df[oy + c]
            df[oout + r] = acc
    else:
        oJ = mi[MF_INERTIA]
        for j in range(n):
            df[oout + j] = mf[oJ + j] * df[oy + j]


@kernel(**JIT)
def _reconstruct(mf, mi, df, di, oy):
    """Rebuild the speeds of stuck groups from their roots so stuck rows read exactly zero.

    Called in the real-time loop.
    """
    if di[mi[DI_NSTUCK]] == 0:
        return
    n = mi[H_N]
    olock = mi[DI_LOCKED]
    if di[mi[DI_FLAGS] + FLAG_TREE_PARTIAL] == 1:
        # stuck rows outside the substitution order: project onto all stuck rows first (w <- P M w)
        otmp = mi[DF_TMPN3]
        oP = mi[DF_P]
        _mass_times(mf, mi, df, oy, otmp)
        for r in range(n):
            acc = 0.0
            for c in range(n):
                acc += df[oP + r * n + c] * df[otmp + c]
            df[oy + r] = acc
    if di[mi[DI_FLAGS] + FLAG_LOCKED] == 1 or di[mi[DI_FLAGS] + FLAG_HELD] == 1:
        for v in range(n):
            if di[olock + v] == 1:
                df[oy + v] = 0.0
    otp = mi[DI_TREE_P]
    otc = mi[DI_TREE_C]
    otr = mi[DI_TREE_R]
    orho = mi[DF_RHO]
    oor = mi[DI_ORIENT]
    for e in range(di[mi[DI_NTREE]]):
        c = di[otc + e]
        if di[olock + c] == 1:
            continue
        row = di[otr + e]
        if di[oor + row] == ORIENT_HYPER:
            df[oy + c] = 0.0 - _hyper_parent_sum(mi, df, di, row, oy)
        else:
            df[oy + c] = -(df[orho + row] * df[oy + di[otp + e]])


@kernel(**JIT_STAGE)
def _split_redundant(mf, mi, df, di, m, r):
    """Force map L of m stuck rows of which only r are independent (the first r of DI_IDX, factor in DF_CH).

    Called in the real-time loop.
    """
    n, g, s = _sizes(mi)
    oinv = mi[MF_INV_INERTIA]
    oA = mi[DF_A]
    oW = mi[DF_W]
    oLc = mi[DF_CH]
    oL = mi[DF_L]
    oidx = mi[DI_IDX]
    ox = mi[DF_XV]
    # redundant rows: A = C A_I with C = W[:, I] W_II^-1.  The independent subset alone
    # needs lambda_I = L_I f, L_I = -W_II^-1 A_I M^-1; every split with the same effect
    # satisfies C^T lambda = lambda_I, and the one of minimum norm is
    # lambda = C (C^T C)^-1 lambda_I.  Exact, no regularisation.
    oC = mi[DF_SPLIT_C]
    oG = mi[DF_SPLIT_G]
    for k in range(m):
        for q in range(r):
            df[ox + q] = df[oW + k * m + di[oidx + q]]
        _chol_solve(df, oLc, r, g, ox)
        for q in range(r):
            df[oC + k * g + q] = df[ox + q]
    # L_I into the first r rows of L
    dense = mi[H_DENSE] == 1
    oam = mi[DF_AM]
    for col in range(n):
        for q in range(r):
            if dense:
                df[ox + q] = df[oam + di[oidx + q] * n + col]
            else:
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


@kernel(**JIT)
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
    di[ofl + FLAG_HELD] = 0
    if m == 0:
        _build_tree(mf, mi, df, di, 0)
        return 0
    oA = mi[DF_A]
    oW = mi[DF_W]
    _fill_rows(mi, df, di, mi[DI_STUCK], m, oA)
    _delassus(mf, mi, df, oA, m, oW)
    r = _independent_subset(mf, mi, df, di, m)
    # P = M^-1 - Z^T (A_I M^-1 A_I^T)^-1 Z,  Z = A_I M^-1
    if mi[H_DENSE] == 1:
        _build_p_dense(mf, mi, df, di, r)
    else:
        _build_p_diagonal(mf, mi, df, di, r)
    if r == n:
        oP = mi[DF_P]
        for a in range(n * n):
            df[oP + a] = 0.0
    if r == m:
        _force_map_independent(mf, mi, df, di, m)
    else:
        di[ofl + FLAG_OVERCONSTRAINED] = 1
        st |= ST_OVERCONSTRAINED
        _split_redundant(mf, mi, df, di, m, r)
    held = _build_tree(mf, mi, df, di, r)
    if held == 2:
        st |= ST_LOCKED
        di[ofl + FLAG_LOCKED] = 1
    elif held == 1:
        di[ofl + FLAG_HELD] = 1
    return st


@kernel(**JIT_STAGE)
def _independent_subset(mf, mi, df, di, m):
    """Greedy independent subset of the m stuck rows and the Cholesky factor of its W_II; returns its size r.

    Row k joins the subset (DI_IDX) when its pivot after the rows already
    in it exceeds SET_RANK_TOL times W_kk (W = A M^-1 A^T in DF_W,
    1/(kg m^2)); the factor grows row by row in DF_CH (stride g).
    """
    g = mi[H_G]
    oW = mi[DF_W]
    oLc = mi[DF_CH]
    oidx = mi[DI_IDX]
    rtol = mf[mi[MF_SETTINGS] + SET_RANK_TOL]
    r = 0
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
    return r


@kernel(**JIT_STAGE)
def _build_p_diagonal(mf, mi, df, di, r):
    """P = M^-1 - Z^T W_II^-1 Z, Z = A_I M^-1, for a diagonal M (1/(kg m^2)); the factor of W_II in DF_CH.

    The constrained inverse inertia of the stuck set: the accelerations
    are P f for the other forces f (the stuck rows' constraint forces of
    eq. 16-17 of Morselli, Zanasi & Ferracin eliminated).
    """
    n = mi[H_N]
    g = mi[H_G]
    oinv = mi[MF_INV_INERTIA]
    oA = mi[DF_A]
    oLc = mi[DF_CH]
    oP = mi[DF_P]
    oidx = mi[DI_IDX]
    ox = mi[DF_XV]
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


@kernel(**JIT_STAGE)
def _force_map_independent(mf, mi, df, di, m):
    """Force map of m independent stuck rows: L = -W^-1 A M^-1 into DF_L (lambda = L f, dimensionless).

    The factor of W is the one :func:`_independent_subset` built (all m rows in the subset).
    """
    n = mi[H_N]
    g = mi[H_G]
    dense = mi[H_DENSE] == 1
    oinv = mi[MF_INV_INERTIA]
    oA = mi[DF_A]
    oam = mi[DF_AM]
    oLc = mi[DF_CH]
    oL = mi[DF_L]
    ox = mi[DF_XV]
    for col in range(n):
        for k in range(m):
            if dense:
                df[ox + k] = df[oam + k * n + col]
            else:
                df[ox + k] = df[oA + k * n + col] * mf[oinv + col]
        _chol_solve(df, oLc, m, g, ox)
        for k in range(m):
            df[oL + k * n + col] = -df[ox + k]


@kernel(**JIT)
def _build_p_dense(mf, mi, df, di, r):
    """P = M^-1 - (A_I M^-1)^T W_II^-1 (A_I M^-1) for a full M (A M^-1 in DF_AM, the factor of W_II in DF_CH).

    Called in the real-time loop.
    """
    n, g, s = _sizes(mi)
    oP = mi[DF_P]
    om = mi[MF_MINV]
    oam = mi[DF_AM]
    oidx = mi[DI_IDX]
    oLc = mi[DF_CH]
    ox = mi[DF_XV]
    for a in range(n * n):
        df[oP + a] = mf[om + a]
    for col in range(n):
        for q in range(r):
            df[ox + q] = df[oam + di[oidx + q] * n + col]
        _chol_solve(df, oLc, r, g, ox)
        for a in range(n):
            acc = 0.0
            for q in range(r):
                acc += df[oam + di[oidx + q] * n + a] * df[ox + q]
            df[oP + a * n + col] -= acc


@kernel(**JIT)
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


@kernel(**JIT)
def _held_by_stuck(mf, mi, df, di, i):
    """Is row i's relative acceleration zero whatever the forces, because the stuck rows hold it (R_i P = 0)?

    Then a row the last mode solve left slipping at zero speed (a row
    redundant with the stuck set: a car's rolling resistance beside its
    stuck brake) stays at zero speed and its direction stands: the solve
    would come to the same answer.  R_i P is rounding noise then, so it is
    compared with the same sum over the unconstrained inverse inertia.
    Needs stuck rows (P valid).  Called in the real-time loop.
    """
    n = mi[H_N]
    oP = mi[DF_P]
    dense = mi[H_DENSE] == 1
    om = mi[MF_MINV]
    oinv = mi[MF_INV_INERTIA]
    nx = mi[mi[MI_ROW_NX] + i] if mi[H_HYPER] > 0 else 0
    q0 = mi[mi[MI_ROW_XOFF] + i] if nx > 0 else 0
    num = 0.0
    den = 0.0
    for j in range(n):
        v = 0.0
        for e in range(2 + nx):
            if e == 0:
                sh, c = mi[mi[MI_ROW_A] + i], df[mi[DF_COEF_A] + i]
            elif e == 1:
                sh, c = mi[mi[MI_ROW_B] + i], df[mi[DF_COEF_B] + i]
            else:
                sh, c = mi[mi[MI_ROW_XSHAFT] + q0 + e - 2], df[mi[DF_COEF_X] + q0 + e - 2]
            v += c * df[oP + sh * n + j]
            if dense:
                den += abs(c * mf[om + sh * n + j])
            elif sh == j:
                den += abs(c * mf[oinv + j])
        num += abs(v)
    return den > 0.0 and num <= 1e-9 * den
