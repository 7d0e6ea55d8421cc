"""Force laws for the tests of the core's force-law seam (plant_models.core.entry.ForceLaw).

Each adds generalised torques to ``df[of + j]`` at the state ``df[oy ...]``
and returns their power.  Parameters in MF_LAW, inputs in DF_LAW.
"""

from __future__ import annotations

from plant_models.core.api import ForceLaw, L


def _torque_inputs(mf, mi, df, di, s, oy, of):
    """Torque on each shaft j: DF_LAW[2j] + DF_LAW[2j + 1] * s (value and rate, the inputs' first-order hold)."""
    n = mi[L.H_N]
    od = mi[L.DF_LAW]
    p = 0.0
    for j in range(n):
        tq = df[od + 2 * j] + df[od + 2 * j + 1] * s
        df[of + j] += tq
        p += tq * df[oy + j]
    return p


def _ground_springs(mf, mi, df, di, s, oy, of):
    """A linear spring of stiffness MF_LAW[j] (N m/rad) from each shaft's angle to the housing."""
    n = mi[L.H_N]
    ok = mi[L.MF_LAW]
    p = 0.0
    for j in range(n):
        tq = -mf[ok + j] * df[oy + n + j]
        df[of + j] += tq
        p += tq * df[oy + j]
    return p


def _clock_and_work(mf, mi, df, di, s, oy, of):
    """Torque MF_LAW[0] on shaft 0; state z0' = 1 (a clock) and z1' = the power (a work account of its own)."""
    tq = mf[mi[L.MF_LAW]]
    df[of] += tq
    p = tq * df[oy]
    oz = mi[L.DF_LAW_ZDOT]
    df[oz] = 1.0
    df[oz + 1] = p
    return p


TORQUE_INPUTS = ForceLaw(_torque_inputs)
GROUND_SPRINGS = ForceLaw(_ground_springs)
CLOCK_AND_WORK = ForceLaw(_clock_and_work)
