"""Kinematic clutch rows ("Clutch Modeling - Part II: Kinematic Clutches"): phases on top of the friction rows.

A kinematic row is a friction row whose capacity its phase sets (see
:data:`.layout.KIN_DISENGAGED` .. ``KIN_DISENGAGING``): the step
(:mod:`.step`) takes the engage commands at its start (:func:`_kin_begin`),
puts each row's capacity in place of its command for the step, gives the
commands back at its end (:func:`_kin_end`) and restores the phases when it
is rolled back (:func:`_kin_restore`).  The dynamics (:mod:`.dynamics`) see
ordinary rows with a capacity, and an engaging row as a driven row.

Everything works on raw pointers into the flat buffers of :mod:`.layout`
and is called in the real-time loop.
"""

from __future__ import annotations

from .jit import JIT, kernel
from .dynamics import _slip
from .layout import (
    DF_DRIVE_ACC, DF_KIN_BACKUP, DF_KIN_CMD, DF_KIN_HOLD, DF_KIN_T0, DF_MU, DF_TIME, DF_U_ACT, DF_U_ACT_RATE, DF_Y,
    DI_DRIVE, DI_KIN_BACKUP, DI_KIN_PHASE, DI_MODE, H_G, KIN_DISENGAGED, KIN_DISENGAGING, KIN_ENGAGED,
    KIN_ENGAGING, MF_KIN_CAP, MF_KIN_SHIFT, MF_KIN_THRESH, MODE_STUCK,
)


@kernel(**JIT)
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
    obk = mi[DF_KIN_BACKUP]
    obki = mi[DI_KIN_BACKUP]
    changed = False
    for i in range(g):
        T = mf[osh + i]
        if T <= 0.0:
            continue
        # the phase as the step found it: a step rolled back for a non-finite result restores it (_kin_restore)
        df[obk + i] = df[ot0 + i]
        df[obk + g + i] = df[ohold + i]
        df[obk + 2 * g + i] = df[oacc + i]
        di[obki + i] = di[oph + i]
        di[obki + g + i] = di[odrv + i]
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


@kernel(**JIT)
def _kin_restore(mf, mi, df, di):
    """Put the kinematic rows' phases back as _kin_begin found them (a step rolled back).

    Called in the real-time loop (on a roll-back only).
    """
    g = mi[H_G]
    osh = mi[MF_KIN_SHIFT]
    obk = mi[DF_KIN_BACKUP]
    obki = mi[DI_KIN_BACKUP]
    for i in range(g):
        if mf[osh + i] > 0.0:
            df[mi[DF_KIN_T0] + i] = df[obk + i]
            df[mi[DF_KIN_HOLD] + i] = df[obk + g + i]
            df[mi[DF_DRIVE_ACC] + i] = df[obk + 2 * g + i]
            di[mi[DI_KIN_PHASE] + i] = di[obki + i]
            di[mi[DI_DRIVE] + i] = di[obki + g + i]


@kernel(**JIT)
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


@kernel(**JIT)
def _kin_start(mf, mi, df, di):
    """Phases at a start: rows that start stuck are engaged, the others disengaged; capacities
    in place of the commands as in _kin_begin.  Called by start_entry."""
    t = df[mi[DF_TIME]]
    for i in range(mi[H_G]):
        if mf[mi[MF_KIN_SHIFT] + i] <= 0.0:
            continue
        di[mi[DI_DRIVE] + i] = 0
        di[mi[DI_KIN_PHASE] + i] = KIN_ENGAGED if di[mi[DI_MODE] + i] == MODE_STUCK else KIN_DISENGAGED
        _kin_capacity(mf, mi, df, di, i, t)


@kernel(**JIT)
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
