"""Stage 3b of the method: the fixed step, its start, its roll-back, and the compiled entry points.

:func:`_step` reads as the list of its stages (as MuJoCo's ``mj_step``
does): check the inputs, apply a change of row coefficients, make sure the
mode fits the state, advance through the step's events
(:mod:`.integrate`), then finish (outputs, reuse bookkeeping) or roll back a
step whose result is not finite.  The number of event sub-steps and of
solver iterations per step is capped, so a step's cost is bounded.

Everything works on raw pointers into the flat buffers of :mod:`.layout`,
allocates nothing and holds no Python object.
"""

from __future__ import annotations

import math

from .jit import JIT, JIT_STAGE, JIT_SUMS, kernel
from .dynamics import (_abs_terms, _accel, _caps, _deriv, _deriv_finish, _extra_sum, _forces, _row_delta, _sizes, _slip,
                       _spring_elastic)
from .kinematic import _kin_begin, _kin_end, _kin_restore, _kin_start
from .modes import (
    _cache_status, _log_event, _mode_prepare, _reconstruct, _set_stuck_list, _solve_cache, _solve_mode, _stuck_lambda,
)
from .integrate import REDUNDANT, _handle_event, _integrate_substep, _rk4
from .layout import (
    CNT_BUDGET_HITS, CNT_EVENTS, CNT_ROLLBACKS, CNT_STEPS, CNT_SUBSTEPS_MAX, DF_ACCEL, DF_BACKUP, DF_CAPK_T,
    DF_CAPS_T, DF_CAP_K, DF_CAP_S, DF_COEF_A, DF_COEF_B, DF_DELTA, DF_DIR, DF_DT, DF_EV_TIME, DF_K1, DF_LAMBDA_REQ,
    DF_LAMW, DF_MU, DF_REUSE_MF, DF_REUSE_U, DF_REUSE_Y, DF_SPRING_TQ, DF_TIME, DF_U_ACT, DF_U_ACT_RATE, DF_U_TAU,
    DF_U_TAU_RATE, DF_XACT, DF_Y, DF_Y0, DI_BACKUP, DI_BND, DI_COUNTERS, DI_EV_KIND, DI_EV_ROW, DI_FLAGS, DI_MODE,
    DI_NSTUCK, DI_ORIENT, DI_STUCK, EV_BREAKAWAY, EV_STICK, FLAG_CACHE_VALID, FLAG_COEF_DIRTY, FLAG_DRIVE_REDUNDANT,
    FLAG_REUSE, FLAG_RUN_HINTS, FLAG_STATUS, H_EVCAP, H_MAX_EVENTS, H_NKIN, H_NY, H_REUSE, MF_ACT_LAG, MF_INERTIA,
    MF_SETTINGS, MF_SPRING_C, MF_SPRING_CA, MF_SPRING_CB, MI_ROW_A, MI_ROW_B, MI_ROW_NX, MI_SPRING_A, MI_SPRING_B,
    MODE_FREE, MODE_SLIP, MODE_STUCK, N_SETTINGS, RUN_CORE_INPUTS_SAME, RUN_MODEL_SAME, RUN_OUTPUTS_UNREAD,
    ST_BAD_INPUT, ST_DRIVE_REDUNDANT, ST_EVENT_BUDGET, ST_NONFINITE, ST_OVERCONSTRAINED, DF_BACKUP_X, DF_COEF_X, H_G,
    H_NX,
)


@kernel(**JIT)
def _outputs(mf, mi, df, di, s_abs, fresh):
    """Outputs at the end of the step (inputs of this step held).

    ``fresh``: the last evaluation (forces, capacities at stage 2, stuck
    forces) was made at the final state, so it is reused.  With
    ``RUN_OUTPUTS_UNREAD`` in the run hints only what the next step reads:
    the derivative at the final state (the next step's first stage) and the
    stuck rows' forces (:func:`_required_forces`).  Called in the real-time loop.
    """
    n, g, s = _sizes(mi)
    oy = mi[DF_Y]
    stage = 2
    if fresh and di[mi[DI_FLAGS] + FLAG_RUN_HINTS] & RUN_OUTPUTS_UNREAD:
        _deriv_finish(mf, mi, df, di, oy, mi[DF_K1])
        _required_forces(mi, df, di)
        return
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


@kernel(**JIT)
def _required_forces(mi, df, di):
    """The stuck rows' constraint forces into DF_LAMBDA_REQ (0 for the others) and DF_MU, as :func:`_outputs`
    writes them: the next mode solve starts from the former, a kinematic row's release holds the latter.

    Called in the real-time loop.
    """
    olreq = mi[DF_LAMBDA_REQ]
    omode = mi[DI_MODE]
    for i in range(mi[H_G]):
        if di[omode + i] != MODE_STUCK:
            df[olreq + i] = 0.0
    ost = mi[DI_STUCK]
    olam = mi[DF_LAMW]
    omu = mi[DF_MU]
    for k in range(di[mi[DI_NSTUCK]]):
        i = di[ost + k]
        df[olreq + i] = df[olam + k]
        df[omu + i] = df[olam + k]


# ==========================================================================
# step and start
# ==========================================================================
@kernel(**JIT)
def _backup(mi, df, di):
    """Save what a roll-back restores (state, directions, coefficients, time, modes).  Called in the real-time loop."""
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
    for q in range(mi[H_NX]):
        df[mi[DF_BACKUP_X] + q] = df[mi[DF_COEF_X] + q]


@kernel(**JIT_SUMS)
def _reuse_valid(mf, mi, df):
    """Is the last step's end evaluation valid for this step's start?  (A bit-exact test.)

    It is when the state and the input values (torques, commands of
    unlagged actuators) are exactly those that evaluation used; the caller
    checks the flags (modes, caches, coefficients) and the model floats
    (:func:`_model_changed`).  The differences are summed (vectorised: this
    function may reassociate sums; a NaN or inf difference makes the sum
    non-zero too).  Called in the real-time loop.
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
    return acc == 0.0


@kernel(**JIT_SUMS)
def _model_changed(mf, mi, df):
    """Do the model floats differ from those at the previous step's start?  Then its end evaluation is not
    this step's first stage.  The copy is refreshed here, at every step a run does not vouch for them.

    Plants and the server may retune drag, gains or lags between steps; a
    compiled offline run's own steps change none (``L.RUN_MODEL_SAME``).
    Compared at every step's start, never only when a reuse is possible: a
    change and its reversal between two comparisons would pass unseen.
    Called in the real-time loop.
    """
    om = mi[MF_INERTIA]
    orm = mi[DF_REUSE_MF]
    nm = mi[MF_SETTINGS] + N_SETTINGS - om
    macc = 0.0
    for q in range(nm):
        macc += abs(mf[om + q] - df[orm + q])
    if macc == 0.0:
        return False
    for q in range(nm):
        df[orm + q] = mf[om + q]
    return True


@kernel(**JIT)
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


def step_entry(mf, mi, df, di, dt):
    """One fixed step of dt seconds, as the list of its stages; returns the status word.

    Reads DF_U_TAU / DF_U_ACT (+ rates); writes DF_DELTA, DF_MU, DF_CAP_S,
    DF_CAP_K, DF_ACCEL, DF_SPRING_TQ, DF_LAMBDA_REQ and the event log.  Bad
    inputs (non-finite, dt <= 0) leave the state untouched; a step that would
    produce a non-finite state is rolled back.  Compiled as the core's C
    entry point by :mod:`.entry` (not a kernel of its own: that would
    compile the whole step twice).  Called in the real-time loop.
    """
    if not _inputs_finite(mi, df, dt, (di[mi[DI_FLAGS] + FLAG_RUN_HINTS] & RUN_CORE_INPUTS_SAME) != 0):
        di[mi[DI_FLAGS] + FLAG_STATUS] = ST_BAD_INPUT
        return ST_BAD_INPUT  # nothing changed
    t0 = df[mi[DF_TIME]]
    reuse = _begin(mf, mi, df, di)
    st, backed_up = _apply_coefficient_change(mf, mi, df, di, t0)
    st_mode, backed_up = _ensure_mode(mf, mi, df, di, t0, backed_up)
    st_events, fresh, last_s, last_h, backed_up = _advance_through_events(mf, mi, df, di, dt, t0, reuse, backed_up)
    return _finish_or_roll_back(mf, mi, df, di, dt, t0, st | st_mode | st_events, fresh, last_s, last_h, backed_up)


@kernel(**JIT_STAGE)
def _inputs_finite(mi, df, dt, accepted):
    """Are dt > 0 and every input, input rate and row coefficient finite?  ``accepted``: the plant kept the
    inputs this test passed at the previous step (RUN_CORE_INPUTS_SAME): dt alone.  Called in the real-time loop."""
    if accepted:
        return dt > 0.0 and math.isfinite(dt)
    n, g, s = _sizes(mi)
    out = mi[DF_U_TAU]
    outr = mi[DF_U_TAU_RATE]
    oua = mi[DF_U_ACT]
    ouar = mi[DF_U_ACT_RATE]
    oca = mi[DF_COEF_A]
    ocb = mi[DF_COEF_B]
    # x - x is 0 for a finite x and NaN for inf or NaN: one test for all inputs
    probe = 0.0
    for j in range(n):
        probe += (df[out + j] - df[out + j]) + (df[outr + j] - df[outr + j])
    for i in range(g):
        probe += ((df[oua + i] - df[oua + i]) + (df[ouar + i] - df[ouar + i])
                  + (df[oca + i] - df[oca + i]) + (df[ocb + i] - df[ocb + i]))
    ocx = mi[DF_COEF_X]
    for q in range(mi[H_NX]):
        probe += df[ocx + q] - df[ocx + q]
    return dt > 0.0 and math.isfinite(dt) and probe == 0.0


@kernel(**JIT_STAGE)
def _begin(mf, mi, df, di):
    """Take the kinematic rows' commands; say whether the step may start from the last step's end evaluation.

    Called in the real-time loop.
    """
    ofl = mi[DI_FLAGS]
    di[ofl + FLAG_DRIVE_REDUNDANT] = 0
    if mi[H_NKIN] > 0 and _kin_begin(mf, mi, df, di, df[mi[DF_TIME]]):
        di[ofl + FLAG_CACHE_VALID] = 0
    model_changed = (mi[H_REUSE] == 1 and (di[ofl + FLAG_RUN_HINTS] & RUN_MODEL_SAME) == 0
                     and _model_changed(mf, mi, df))
    reuse = False
    if di[ofl + FLAG_REUSE] == 1:
        di[ofl + FLAG_REUSE] = 0
        reuse = (mi[H_REUSE] == 1 and not model_changed and di[ofl + FLAG_COEF_DIRTY] == 0
                 and di[ofl + FLAG_CACHE_VALID] == 1 and _reuse_valid(mf, mi, df))
    return reuse


@kernel(**JIT_STAGE)
def _apply_coefficient_change(mf, mi, df, di, t0):
    """A plant changed row coefficients (e.g. a new gear preselected): a stuck row whose relative
    speed is not zero under the new ratio starts slipping.

    Returns (status bits, whether the roll-back backup was taken).  The
    backup is taken lazily, before the first change of modes or
    coefficients; a step without events can be rolled back from DF_Y0 alone.
    Called in the real-time loop.
    """
    ofl = mi[DI_FLAGS]
    if di[ofl + FLAG_COEF_DIRTY] != 1:
        return 0, False
    n, g, s = _sizes(mi)
    oy = mi[DF_Y]
    omode = mi[DI_MODE]
    odir = mi[DF_DIR]
    oca = mi[DF_COEF_A]
    ocb = mi[DF_COEF_B]
    _backup(mi, df, di)
    di[ofl + FLAG_COEF_DIRTY] = 0
    ora = mi[MI_ROW_A]
    orb = mi[MI_ROW_B]
    for i in range(g):
        if di[omode + i] == MODE_STUCK:
            wa = df[oca + i] * df[oy + mi[ora + i]]
            wb = df[ocb + i] * df[oy + mi[orb + i]]
            d = wa + wb
            if mi[H_NX] > 0 and mi[mi[MI_ROW_NX] + i] > 0:
                d += _extra_sum(mi, df, i, oy)
            if abs(d) > 1e-12 * (_abs_terms(mi, df, i, oy)):
                di[omode + i] = MODE_SLIP
                df[odir + i] = 1.0 if d > 0.0 else -1.0
                _log_event(mi, df, di, t0, i, EV_BREAKAWAY)
    _set_stuck_list(mi, di)
    st = _solve_cache(mf, mi, df, di)
    _reconstruct(mf, mi, df, di, oy)
    return st, True


@kernel(**JIT_STAGE)
def _ensure_mode(mf, mi, df, di, t0, backed_up):
    """Solve the friction mode at the step start unless the cached stuck set still fits.

    Returns (status bits, whether the roll-back backup was taken).  Called in the real-time loop.
    """
    st = 0
    if di[mi[DI_FLAGS] + FLAG_CACHE_VALID] == 0:
        if not backed_up:
            _backup(mi, df, di)
            backed_up = True
        oy = mi[DF_Y]
        _mode_prepare(mf, mi, df, di, 0.0, oy, True)
        st |= _solve_mode(mf, mi, df, di, 0.0, oy, t0)
    st |= _cache_status(mi, di)
    return st, backed_up


@kernel(**JIT_STAGE)
def _advance_through_events(mf, mi, df, di, dt, t0, reuse, backed_up):
    """Integrate the step sub-step by sub-step, handling each event where it happens.

    Returns (status bits, whether the last sub-step ended with a fresh end
    evaluation, its start and length, whether the roll-back backup was
    taken).  At most ``H_MAX_EVENTS`` event sub-steps; past that budget the
    rest of the step is integrated without locating events.  Called in the
    real-time loop.
    """
    ny = mi[H_NY]
    oy = mi[DF_Y]
    ocnt = mi[DI_COUNTERS]
    st = 0
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
            st |= ST_EVENT_BUDGET
            _finish_without_events(mf, mi, df, di, used, remaining)
            fresh = False
            break
        h_used, code = _integrate_substep(mf, mi, df, di, used, remaining, check_start, reuse)
        if code >= REDUNDANT:
            st |= ST_OVERCONSTRAINED
            code -= REDUNDANT
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
                st |= _solve_mode(mf, mi, df, di, used, oy, t0 + used)
            continue
        if code == 5:
            # a missed zero crossing: handled as an event here
            st |= _handle_event(mf, mi, df, di, used, t0 + used)
            continue
        used += h_used
        if code == 3:
            # a kiss point: the mode is checked (and solved if it no longer fits) there
            _open_crossings(mi, df, di, oy)
            check_start = True
            continue
        st |= _handle_event(mf, mi, df, di, used, t0 + used)
    if nsub > di[ocnt + CNT_SUBSTEPS_MAX]:
        di[ocnt + CNT_SUBSTEPS_MAX] = nsub
    return st, fresh, last_s, last_h, backed_up


@kernel(**JIT)
def _open_crossings(mi, df, di, oy):
    """At a kiss point: rows that were open through the sub-step and slipped through zero take their new direction.

    No friction acted at such a crossing, so nothing located or logged it;
    the kiss point now gives the row capacity while it slips the other way.
    Left alone, the check at the next sub-step's start would take it for a
    missed crossing of a row with friction and project its slip onto zero:
    a jump of relative speed that no force makes.  (A row with capacity at
    the sub-step's start cannot be here: its crossing would have ended the
    sub-step as an event before the kiss point.)  Called in the real-time loop.
    """
    n, g, s = _sizes(mi)
    omode = mi[DI_MODE]
    odir = mi[DF_DIR]
    ocs = mi[DF_CAPS_T]  # stage 0: the capacities at the sub-step's start
    ock = mi[DF_CAPK_T]
    for i in range(g):
        if di[omode + i] == MODE_SLIP and df[ocs + i] <= 0.0 and df[ock + i] <= 0.0:
            d = _slip(mi, df, di, i, oy)
            if df[odir + i] * d < 0.0:
                df[odir + i] = 1.0 if d > 0.0 else -1.0


@kernel(**JIT_STAGE)
def _finish_without_events(mf, mi, df, di, used, remaining):
    """Out of the event budget: integrate the rest of the step in one RK4 sub-step, events unlocated.

    Called in the real-time loop.
    """
    n, g, s = _sizes(mi)
    ny = mi[H_NY]
    oy = mi[DF_Y]
    di[mi[DI_COUNTERS] + CNT_BUDGET_HITS] += 1
    _mode_prepare(mf, mi, df, di, used, oy, False)
    oy0 = mi[DF_Y0]
    ok1 = mi[DF_K1]
    for q in range(ny):
        df[oy0 + q] = df[oy + q]
    _caps(mf, mi, df, used, remaining, 0, oy0 + 2 * n + s)
    _deriv(mf, mi, df, di, used, remaining, 0, oy0, oy0 + 2 * n + s, ok1)
    _rk4(mf, mi, df, di, used, remaining, oy0, ok1, oy, False)


@kernel(**JIT_STAGE)
def _finish_or_roll_back(mf, mi, df, di, dt, t0, st, fresh, last_s, last_h, backed_up):
    """End the step: outputs, reuse bookkeeping, counters; or roll a non-finite step back.

    Returns the status word.  Called in the real-time loop.
    """
    ny = mi[H_NY]
    oy = mi[DF_Y]
    ofl = mi[DI_FLAGS]
    ocnt = mi[DI_COUNTERS]
    df[mi[DF_TIME]] = t0 + dt
    _outputs(mf, mi, df, di, dt, fresh)
    if not _all_finite(df, oy, ny):
        _roll_back(mf, mi, df, di, t0, backed_up)
        st = ST_NONFINITE
    elif fresh and mi[H_REUSE] == 1:
        _reuse_store(mf, mi, df, di, last_s, last_h)
    if di[ofl + FLAG_DRIVE_REDUNDANT] == 1:
        st |= ST_DRIVE_REDUNDANT
    if mi[H_NKIN] > 0:
        _kin_end(mf, mi, df, di)
    di[ocnt + CNT_STEPS] += 1
    di[ofl + FLAG_STATUS] = st
    return st


@kernel(**JIT_SUMS)
def _all_finite(df, o, count):
    """Are df[o:o + count] all finite?  x - x is 0 for a finite x and NaN for inf or NaN; the sum of those
    (vectorised: this function may reassociate it) is 0 exactly when all are.  Called in the real-time loop."""
    probe = 0.0
    for q in range(count):
        probe += df[o + q] - df[o + q]
    return probe == 0.0


@kernel(**JIT_STAGE)
def _roll_back(mf, mi, df, di, t0, backed_up):
    """Restore the state at the step start (from the backup, or from DF_Y0 when no mode changed).

    Called in the real-time loop.
    """
    n, g, s = _sizes(mi)
    ny = mi[H_NY]
    oy = mi[DF_Y]
    odir = mi[DF_DIR]
    oca = mi[DF_COEF_A]
    ocb = mi[DF_COEF_B]
    omode = mi[DI_MODE]
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
        for q in range(mi[H_NX]):
            df[mi[DF_COEF_X] + q] = df[mi[DF_BACKUP_X] + q]
    else:
        oy0 = mi[DF_Y0]
        for q in range(ny):
            df[oy + q] = df[oy0 + q]
    df[mi[DF_TIME]] = t0
    if mi[H_NKIN] > 0:  # the phase changes _kin_begin made at this step's start belong to the step
        _kin_restore(mf, mi, df, di)
    _set_stuck_list(mi, di)
    _solve_cache(mf, mi, df, di)
    _outputs(mf, mi, df, di, 0.0, False)
    di[mi[DI_COUNTERS] + CNT_ROLLBACKS] += 1


def start_entry(mf, mi, df, di):
    """Prepare a freshly set state; rows marked MODE_STUCK in DI_MODE start engaged.

    The speeds of each engaged group are rebuilt from its root shaft (the
    lowest index), the mode is solved and the outputs are computed, so they
    are valid before the first step.  Engagement at the start is not logged
    as an event; a requested row that cannot hold is logged as a breakaway.
    Returns the status word.  Compiled as a C entry point by :mod:`.entry`.
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
    st = _solve_cache(mf, mi, df, di)
    _reconstruct(mf, mi, df, di, oy)
    t = df[mi[DF_TIME]]
    ocnt = mi[DI_COUNTERS]
    before = di[ocnt + CNT_EVENTS]
    _mode_prepare(mf, mi, df, di, 0.0, oy, True)
    st |= _solve_mode(mf, mi, df, di, 0.0, oy, t)
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
    _outputs(mf, mi, df, di, 0.0, False)
    if mi[H_NKIN] > 0:
        _kin_end(mf, mi, df, di)
    di[mi[DI_FLAGS] + FLAG_STATUS] = st
    return st

