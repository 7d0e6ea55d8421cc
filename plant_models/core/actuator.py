"""A row's actuator state inside a sub-step: the closed forms the capacities and the kiss-point search share.

An actuator state ``x`` (a clutch's pressure) follows its command ``u(s) =
u0 + rate s`` (``s`` from the step start) through a first-order lag ``T``;
with no lag it is the command.  A plant with a hydraulic fill stage
(:mod:`plant_models.powertrain.hydraulics`) may hold a row's actuator on a
ramp ``x(s) = x(0) + DF_ACT_RAMP s`` until ``DF_ACT_HOLD`` into the step (the
piston stroking against its return spring at the flow limit), after which
the lag runs from the value the ramp reached.  The capacity at every stage
point, and the kiss point searched on the normal force, follow this one
trajectory, so a fill that ends inside a step reaches the kiss point where
the ramp ends.  Without ``H_ACT_HOLD`` nothing here is read beyond the lag.
"""

from __future__ import annotations

import math

from .jit import JIT, kernel
from .layout import (DF_ACT_HOLD, DF_ACT_RAMP, DF_CAPK_T, DF_CAPS_T, DF_U_ACT, DF_U_ACT_RATE, DF_XACT, H_ACT_HOLD,
                     H_G, MF_ACT_GAIN, MF_ACT_LAG, MF_ACT_PRELOAD, MF_GAIN_KINETIC, MF_GAIN_STATIC)


@kernel(**JIT)
def _act_held(mf, mi, df, i, s_abs, tau, x_start):
    """Actuator state of row i tau into the sub-step starting s_abs after the step start, from x_start there,
    for a sub-step that starts before the row's hold ends (s_abs < DF_ACT_HOLD).

    Ramp until the hold's end s1, then the lag's closed form from the value
    reached at s1, with the command u0 + rate s.  Called in the real-time loop.
    """
    s1 = df[mi[DF_ACT_HOLD] + i]
    s = s_abs + tau
    q = df[mi[DF_ACT_RAMP] + i]
    if s <= s1:
        return x_start + q * tau
    xf = x_start + q * (s1 - s_abs)
    r = df[mi[DF_U_ACT_RATE] + i]
    v1 = df[mi[DF_U_ACT] + i] + r * s1
    T = mf[mi[MF_ACT_LAG] + i]
    e = s - s1
    if T > 0.0:
        return v1 + r * e - r * T + (xf - v1 + r * T) * math.exp(-e / T)
    return v1 + r * e


@kernel(**JIT)
def _write_stage(mf, mi, df, i, stage, x):
    """Actuator state x of row i at a stage point and its capacities; returns its unclamped normal force."""
    g = mi[H_G]
    df[mi[DF_XACT] + stage * g + i] = x
    f = mf[mi[MF_ACT_GAIN] + i] * x - mf[mi[MF_ACT_PRELOAD] + i]
    fn = f if f > 0.0 else 0.0
    df[mi[DF_CAPS_T] + stage * g + i] = mf[mi[MF_GAIN_STATIC] + i] * fn
    df[mi[DF_CAPK_T] + stage * g + i] = mf[mi[MF_GAIN_KINETIC] + i] * fn
    return f


@kernel(**JIT)
def _caps_held(mf, mi, df, s_abs, tau, stage, ox0):
    """Stage point ``stage`` (1: h/2, 2: h, tau into the sub-step) of the rows whose hold has not ended at the
    sub-step's start: state and capacities rewritten on the ramp-then-lag form.  Called in the real-time loop."""
    ohold = mi[DF_ACT_HOLD]
    olag = mi[MF_ACT_LAG]
    for i in range(mi[H_G]):
        if s_abs < df[ohold + i] and mf[olag + i] > 0.0:
            _write_stage(mf, mi, df, i, stage, _act_held(mf, mi, df, i, s_abs, tau, df[ox0 + i]))


@kernel(**JIT)
def _caps_substep_held(mf, mi, df, s_abs, h, ox0):
    """Stage points 1 and 2 of the sub-step for the rows whose hold has not ended at its start (as
    :func:`_caps_held`); True if such a row's normal force changes sign between the stage points (a kiss
    point may lie inside).  Called in the real-time loop."""
    ohold = mi[DF_ACT_HOLD]
    olag = mi[MF_ACT_LAG]
    kiss = False
    for i in range(mi[H_G]):
        if s_abs < df[ohold + i] and mf[olag + i] > 0.0:
            x0 = df[ox0 + i]
            f0 = mf[mi[MF_ACT_GAIN] + i] * x0 - mf[mi[MF_ACT_PRELOAD] + i]
            f1 = _write_stage(mf, mi, df, i, 1, _act_held(mf, mi, df, i, s_abs, 0.5 * h, x0))
            f2 = _write_stage(mf, mi, df, i, 2, _act_held(mf, mi, df, i, s_abs, h, x0))
            if (f0 > 0.0) != (f1 > 0.0) or (f0 > 0.0) != (f2 > 0.0):
                kiss = True
    return kiss


@kernel(**JIT)
def _act_normal_force(mf, mi, df, i, s_abs, tau, ox0):
    """Unclamped normal force gain*x - preload of row i, tau into the sub-step starting s_abs after the step start.

    The same closed form as _caps, with the exponential taken directly.  Called in the real-time loop.
    """
    if mi[H_ACT_HOLD] == 1 and s_abs < df[mi[DF_ACT_HOLD] + i]:
        x = _act_held(mf, mi, df, i, s_abs, tau, df[ox0 + i])
        return mf[mi[MF_ACT_GAIN] + i] * x - mf[mi[MF_ACT_PRELOAD] + i]
    r = df[mi[DF_U_ACT_RATE] + i]
    v = df[mi[DF_U_ACT] + i] + r * s_abs
    T = mf[mi[MF_ACT_LAG] + i]
    if T > 0.0:
        x = v + r * tau - r * T + (df[ox0 + i] - v + r * T) * math.exp(-tau / T)
    else:
        x = v + r * tau
    return mf[mi[MF_ACT_GAIN] + i] * x - mf[mi[MF_ACT_PRELOAD] + i]
