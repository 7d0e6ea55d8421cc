"""Row forces beyond the two-entry arithmetic of :mod:`.dynamics`: further entries and driven rows.

:func:`_extra_force` adds a row's force along its entries beyond a and b
(rows of a reduced planetary transmission); :func:`_drive_forces` solves for
the forces of the driven rows, whose relative accelerations are prescribed
(a kinematic clutch while it engages, :mod:`.kinematic`).  Both add to the
generalised force ``DF_F`` that :func:`.dynamics._forces` collects.

Everything works on raw pointers into the flat buffers of :mod:`.layout`
and is called in the real-time loop.  The steps of :func:`_drive_forces`
(assemble, eliminate, substitute back, apply) are stages inlined into it
(``JIT_STAGE``) over its work space ``DF_DRV_WS``.
"""

from __future__ import annotations

from .jit import JIT, JIT_STAGE, kernel
from .layout import (
    DF_COEF_A, DF_COEF_B, DF_COEF_X, DF_DRIVE_ACC, DF_DRV_WS, DF_DT, DF_F, DF_MU, DF_P, DF_PROW, DI_DRV_LIST,
    DI_FLAGS, DI_NSTUCK, FLAG_DRIVE_REDUNDANT, H_DENSE, H_G, H_HYPER, H_N, MF_INV_INERTIA, MF_MINV, MI_ROW_A,
    MI_ROW_B, MI_ROW_NX, MI_ROW_XOFF, MI_ROW_XSHAFT,
)


@kernel(**JIT)
def _extra_force(mi, df, i, m_i):
    """Add row i's force m_i times its further coefficients to DF_F (the entries beyond a and b).

    Called in the real-time loop.
    """
    of = mi[DF_F]
    q0 = mi[mi[MI_ROW_XOFF] + i]
    oxs = mi[MI_ROW_XSHAFT]
    ocx = mi[DF_COEF_X]
    for q in range(q0, q0 + mi[mi[MI_ROW_NX] + i]):
        df[of + mi[oxs + q]] += df[ocx + q] * m_i


@kernel(**JIT)
def _drive_forces(mf, mi, df, di, nd):
    """Forces of the driven rows in DI_DRV_LIST: the constraint forces that give them their
    prescribed relative accelerations (the kinematic-clutch article's kinematic clutch while engaging).

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
    ows = mi[DF_DRV_WS]
    opv = ows  # [nd*n] P r_k^T
    oD = ows + g * n  # [nd*nd]
    ob = oD + g * g  # [nd]
    _drive_projections(mf, mi, df, di, nd, opv, ob)
    scale = _drive_matrix(mi, df, di, nd, opv, oD)
    if not (scale > 0.0 and _eliminate(df, oD, ob, nd, scale)):
        di[mi[DI_FLAGS] + FLAG_DRIVE_REDUNDANT] = 1
        odl = mi[DI_DRV_LIST]
        omu = mi[DF_MU]
        oprow = mi[DF_PROW]
        for k in range(nd):
            i = di[odl + k]
            df[omu + i] = 0.0
            df[oprow + i] = 0.0
        return
    _back_substitute(df, oD, ob, nd)
    _apply_drive_forces(mi, df, di, nd, ob)


@kernel(**JIT_STAGE)
def _drive_projections(mf, mi, df, di, nd, opv, ob):
    """For each driven row k: P r_k^T into df[opv + k n] and the right-hand side a_k - r_k P f into df[ob + k].

    P is the stuck set's constrained inverse inertia (DF_P), or M^-1 with
    nothing stuck (MF_MINV for a reduced system, the diagonal MF_INV_INERTIA
    otherwise), in 1/(kg m^2); f the other forces (DF_F, N m); a_k the
    prescribed relative acceleration (DF_DRIVE_ACC, rad/s^2).
    """
    n = mi[H_N]
    of = mi[DF_F]
    odl = mi[DI_DRV_LIST]
    ora = mi[MI_ROW_A]
    orb = mi[MI_ROW_B]
    oca = mi[DF_COEF_A]
    ocb = mi[DF_COEF_B]
    oinv = mi[MF_INV_INERTIA]
    oP = mi[DF_P]
    oacc = mi[DF_DRIVE_ACC]
    stuck = di[mi[DI_NSTUCK]] > 0
    hyper = mi[H_HYPER] > 0
    dense = mi[H_DENSE] == 1
    onx = mi[MI_ROW_NX]
    oxo = mi[MI_ROW_XOFF]
    oxs = mi[MI_ROW_XSHAFT]
    ocx = mi[DF_COEF_X]
    omv = mi[MF_MINV]  # a reduced system with nothing stuck: M^-1 (a full matrix) takes the place of P
    for k in range(nd):
        i = di[odl + k]
        a = mi[ora + i]
        b = mi[orb + i]
        ca = df[oca + i]
        cb = df[ocb + i]
        nx = mi[onx + i] if hyper else 0
        q0 = mi[oxo + i]
        acc = 0.0
        for r in range(n):
            if stuck:
                v = df[oP + r * n + a] * ca + df[oP + r * n + b] * cb
                for q in range(q0, q0 + max(nx, 0)):
                    v += df[oP + r * n + mi[oxs + q]] * df[ocx + q]
            elif dense:
                v = mf[omv + r * n + a] * ca + mf[omv + r * n + b] * cb
                for q in range(q0, q0 + max(nx, 0)):
                    v += mf[omv + r * n + mi[oxs + q]] * df[ocx + q]
            else:
                v = 0.0
                if r == a:
                    v = ca * mf[oinv + a]
                elif r == b:
                    v = cb * mf[oinv + b]
                for q in range(q0, q0 + max(nx, 0)):
                    if r == mi[oxs + q]:
                        v += df[ocx + q] * mf[oinv + r]
            df[opv + k * n + r] = v
            acc += v * df[of + r]
        df[ob + k] = df[oacc + i] - acc


@kernel(**JIT_STAGE)
def _drive_matrix(mi, df, di, nd, opv, oD):
    """The driven rows' system matrix D = R_D P R_D^T (nd x nd, 1/(kg m^2)) into df[oD]; returns max |D_kk|.

    Column k of D is R_D (P r_k^T), from the projections of :func:`_drive_projections`.
    """
    n = mi[H_N]
    odl = mi[DI_DRV_LIST]
    ora = mi[MI_ROW_A]
    orb = mi[MI_ROW_B]
    oca = mi[DF_COEF_A]
    ocb = mi[DF_COEF_B]
    hyper = mi[H_HYPER] > 0
    onx = mi[MI_ROW_NX]
    oxo = mi[MI_ROW_XOFF]
    oxs = mi[MI_ROW_XSHAFT]
    ocx = mi[DF_COEF_X]
    scale = 0.0
    for k in range(nd):
        for q in range(nd):
            iq = di[odl + q]
            v = df[oca + iq] * df[opv + k * n + mi[ora + iq]] + df[ocb + iq] * df[opv + k * n + mi[orb + iq]]
            nxq = mi[onx + iq] if hyper else 0
            for qq in range(mi[oxo + iq], mi[oxo + iq] + max(nxq, 0)):
                v += df[ocx + qq] * df[opv + k * n + mi[oxs + qq]]
            df[oD + q * nd + k] = v
        scale = max(scale, abs(df[oD + k * nd + k]))
    return scale


@kernel(**JIT_STAGE)
def _eliminate(df, oD, ob, nd, scale):
    """Gaussian elimination with partial pivoting of D x = b in place (D upper triangular after it).

    Returns False at a pivot at most 1e-12 ``scale`` (a driven row the
    stuck rows already fix), True otherwise.
    """
    for c in range(nd):
        piv = c
        for r in range(c + 1, nd):
            if abs(df[oD + r * nd + c]) > abs(df[oD + piv * nd + c]):
                piv = r
        if abs(df[oD + piv * nd + c]) <= 1e-12 * scale:
            return False
        if piv != c:
            for q in range(nd):
                df[oD + c * nd + q], df[oD + piv * nd + q] = df[oD + piv * nd + q], df[oD + c * nd + q]
            df[ob + c], df[ob + piv] = df[ob + piv], df[ob + c]
        for r in range(c + 1, nd):
            fac = df[oD + r * nd + c] / df[oD + c * nd + c]
            for q in range(c, nd):
                df[oD + r * nd + q] -= fac * df[oD + c * nd + q]
            df[ob + r] -= fac * df[ob + c]
    return True


@kernel(**JIT_STAGE)
def _back_substitute(df, oD, ob, nd):
    """Solve the upper triangular system of :func:`_eliminate` in place: df[ob + k] becomes force k, N m."""
    for c in range(nd - 1, -1, -1):
        v = df[ob + c]
        for q in range(c + 1, nd):
            v -= df[oD + c * nd + q] * df[ob + q]
        df[ob + c] = v / df[oD + c * nd + c]


@kernel(**JIT_STAGE)
def _apply_drive_forces(mi, df, di, nd, ob):
    """Each driven row's force mu (N m) into DF_MU, its power mu * delta (W) into DF_PROW, R_D^T mu onto DF_F."""
    of = mi[DF_F]
    odl = mi[DI_DRV_LIST]
    ora = mi[MI_ROW_A]
    orb = mi[MI_ROW_B]
    oca = mi[DF_COEF_A]
    ocb = mi[DF_COEF_B]
    hyper = mi[H_HYPER] > 0
    onx = mi[MI_ROW_NX]
    omu = mi[DF_MU]
    oprow = mi[DF_PROW]
    odt = mi[DF_DT]
    for k in range(nd):
        i = di[odl + k]
        m_i = df[ob + k]
        df[omu + i] = m_i
        df[oprow + i] = m_i * df[odt + i]
        df[of + mi[ora + i]] += df[oca + i] * m_i
        df[of + mi[orb + i]] += df[ocb + i] * m_i
        if hyper and mi[onx + i] > 0:
            _extra_force(mi, df, i, m_i)
