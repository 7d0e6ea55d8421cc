"""Dense linear algebra of the mode solve, in place on offsets into the flat buffers.

The rows of R of a set of rows, the Delassus matrix ``W = A M^-1 A^T``, a
Cholesky factor of a principal submatrix and its solve, and the exact
solution of the box-constrained QP of the partition problem (Morselli,
Zanasi & Ferracin, eq. 18) by a primal active-set method with a fixed
iteration cap.  Nothing here allocates; every function is called in the
real-time loop.  The steps of one active-set iteration of :func:`_box_qp`
are stages inlined into it (``JIT_STAGE``).
"""

from __future__ import annotations

import math

from .jit import JIT, JIT_STAGE, kernel
from .layout import (
    DF_AM, DF_COEF_A, DF_COEF_B, DF_COEF_X, H_DENSE, H_HYPER, H_N, MF_INV_INERTIA, MF_MINV, MI_ROW_A, MI_ROW_B,
    MI_ROW_NX, MI_ROW_XOFF, MI_ROW_XSHAFT,
)


@kernel(**JIT)
def _fill_rows(mi, df, di, olist, m, oA):
    """Dense m x n rows of R (into df[oA]) for the row indices listed at di[olist].  Called in the real-time loop."""
    n = mi[H_N]
    ora = mi[MI_ROW_A]
    orb = mi[MI_ROW_B]
    oca = mi[DF_COEF_A]
    ocb = mi[DF_COEF_B]
    hyper = mi[H_HYPER] > 0
    onx = mi[MI_ROW_NX]
    oxo = mi[MI_ROW_XOFF]
    oxs = mi[MI_ROW_XSHAFT]
    ocx = mi[DF_COEF_X]
    for k in range(m):
        i = di[olist + k]
        for c in range(n):
            df[oA + k * n + c] = 0.0
        df[oA + k * n + mi[ora + i]] += df[oca + i]
        df[oA + k * n + mi[orb + i]] += df[ocb + i]
        if hyper:
            for q in range(mi[oxo + i], mi[oxo + i] + max(mi[onx + i], 0)):
                df[oA + k * n + mi[oxs + q]] += df[ocx + q]


@kernel(**JIT)
def _delassus(mf, mi, df, oA, m, oW):
    """W = A M^-1 A^T (m x m, stride m).

    For a reduced system (a full M) also A M^-1 into DF_AM, for the
    callers that need it.  Called in the real-time loop.
    """
    n = mi[H_N]
    if mi[H_DENSE] == 1:
        oam = mi[DF_AM]
        om = mi[MF_MINV]
        for r in range(m):
            for c in range(n):
                acc = 0.0
                for q in range(n):
                    acc += df[oA + r * n + q] * mf[om + q * n + c]
                df[oam + r * n + c] = acc
        for r in range(m):
            for c in range(r, m):
                acc = 0.0
                for q in range(n):
                    acc += df[oam + r * n + q] * df[oA + c * n + q]
                df[oW + r * m + c] = acc
                df[oW + c * m + r] = acc
        return
    oinv = mi[MF_INV_INERTIA]
    for r in range(m):
        for c in range(r, m):
            acc = 0.0
            for q in range(n):
                acc += df[oA + r * n + q] * mf[oinv + q] * df[oA + c * n + q]
            df[oW + r * m + c] = acc
            df[oW + c * m + r] = acc


@kernel(**JIT)
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


@kernel(**JIT)
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


@kernel(**JIT)
def _box_qp(df, di, oW, ob, olo, ohi, m, olam, obnd, max_iter, tol, oLc, oidx, ox, ograd):
    """Exact solution of min 1/2 l^T W l + b^T l subject to lo <= l <= hi.

    This is eq. (18) of Morselli, Zanasi & Ferracin: its KKT conditions say that a free row has
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
    _clamp_to_bounds(df, di, olo, ohi, m, olam, obnd)
    it = 0
    while it < max_iter:
        it += 1
        nf = 0
        for k in range(m):
            if di[obnd + k] == 0:
                di[oidx + nf] = k
                nf += 1
        if nf > 0:
            _solve_free_rows(df, di, oW, ob, m, olam, obnd, oLc, oidx, ox, nf)
            if _step_to_bound(df, di, olo, ohi, olam, obnd, oidx, ox, nf):
                continue
        # optimal on this working set: check the multipliers of the bound rows
        _qp_gradient(df, oW, ob, m, olam, ograd)
        worst = _most_violated(df, di, oW, ob, ohi, m, obnd, tol, ograd)
        if worst < 0:
            return it
        di[obnd + worst] = 0
    _qp_gradient(df, oW, ob, m, olam, ograd)
    return -1


@kernel(**JIT_STAGE)
def _clamp_to_bounds(df, di, olo, ohi, m, olam, obnd):
    """The warm start: each row at its bound state's bound (-1 lower, +1 upper), a free row clamped into [lo, hi]."""
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


@kernel(**JIT_STAGE)
def _solve_free_rows(df, di, oW, ob, m, olam, obnd, oLc, oidx, ox, nf):
    """Minimiser of the QP on the working set: W_FF x = -b_F - W_FB l_B for the nf free rows listed at di[oidx].

    Into df[ox]; the bound rows keep their multipliers l_B.  W_FF is
    factored by :func:`_cholesky`; a pivot that is not positive (free rows
    dependent to rounding) is retried with 1e-10 max W_kk on the diagonal.
    """
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


@kernel(**JIT_STAGE)
def _step_to_bound(df, di, olo, ohi, olam, obnd, oidx, ox, nf):
    """Move the free rows from l towards the minimiser x, as far as the box allows (the ratio test).

    Returns True when a row reached its bound on the way: it joins the
    bound rows (the working set grows), False when l reached x.
    """
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
        return True
    return False


@kernel(**JIT_STAGE)
def _qp_gradient(df, oW, ob, m, olam, ograd):
    """df[ograd] = W l + b: the rows' relative accelerations at the multipliers l."""
    for k in range(m):
        acc = df[ob + k]
        for c in range(m):
            acc += df[oW + k * m + c] * df[olam + c]
        df[ograd + k] = acc


@kernel(**JIT_STAGE)
def _most_violated(df, di, oW, ob, ohi, m, obnd, tol, ograd):
    """The bound row whose multiplier is most violated (its relative acceleration points into the box), or -1.

    A row at +K must not accelerate positively (nor one at -K negatively)
    by more than ``tol`` (|b_k| + W_kk K_k): else it is released.
    """
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
    return worst


# ==========================================================================
# mode solve
# ==========================================================================
