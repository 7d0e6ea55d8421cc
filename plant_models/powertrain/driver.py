"""The driver: pedal and brake that follow a target speed (feed-forward + PI), sampled once per step.

As the driver models of HIL benches do, the driver acts at the plant's
step rate: at the start of each step it reads the vehicle speed (the force
law's last evaluation, at the previous step's final state) and the target
speed (an input; its rate is the target acceleration), and holds its pedal
and brake over the step.  Its integral is plant data (``DF_LAW``), so
snapshots hold it.  Equations: docs/powertrain.md, section 4b.
"""

from __future__ import annotations

from numba import njit

from ..core.api import JIT, L
from .components import GRAVITY
from .law import (LD_DRV_BRAKE, LD_DRV_INT, LD_DRV_ON, LD_DRV_PEDAL, LD_SPEED, LF_AERO, LF_DRV_BRAKE, LF_DRV_FULL,
                  LF_DRV_KI, LF_DRV_KP, LF_MG, LF_ROLL, LI_DRIVER, LI_IN_DRIVER_ON, LI_IN_GRADE, LI_IN_TARGET, LI_N_IN)


@njit(**JIT)
def driver_update(mf, mi, df, dt):
    """The driver's pedal and brake for the step of dt seconds that begins.  Called in the real-time loop.

    u = (m a_t + F_roll + F_aero(v_t) + F_grade) / F_full + kp e + ki integral(e),  e = v_t - v;
    pedal = clamp(u, 0, 1), brake = clamp(-u, 0, 1) times the brake gain.  The integral stops while
    the command saturates and the error drives it further (conditional integration); it is reset
    while the driver is off.  A target of standstill (zero speed, not rising) holds the full brake.
    """
    oli = mi[L.MI_LAW]
    if mi[oli + LI_DRIVER] != 1:
        return
    ol = mi[L.MF_LAW]
    od = mi[L.DF_LAW]
    op = mi[L.DF_PLANT]
    n_in = mi[oli + LI_N_IN]
    kt = mi[oli + LI_IN_TARGET]
    kon = mi[oli + LI_IN_DRIVER_ON]
    probe = (df[op + kt] - df[op + kt]) + (df[op + n_in + kt] - df[op + n_in + kt]) + (df[op + kon] - df[op + kon])
    if probe != 0.0:
        return  # a non-finite input: the step is refused (the plant's input check), the driver's state kept
    if df[op + kon] < 0.5:
        df[od + LD_DRV_ON] = 0.0
        df[od + LD_DRV_INT] = 0.0
        return
    df[od + LD_DRV_ON] = 1.0
    vt = df[op + kt]
    at = df[op + n_in + kt]
    gr = 0.01 * df[op + mi[oli + LI_IN_GRADE]]
    mg = mf[ol + LF_MG]
    v = df[od + LD_SPEED]
    e = vt - v
    f_ff = mg / GRAVITY * at + mf[ol + LF_ROLL] + mf[ol + LF_AERO] * vt * abs(vt) + mg * gr / (1.0 + gr * gr) ** 0.5
    u = f_ff / mf[ol + LF_DRV_FULL] + mf[ol + LF_DRV_KP] * e + mf[ol + LF_DRV_KI] * df[od + LD_DRV_INT]
    if not ((u >= 1.0 and e > 0.0) or (u <= -1.0 and e < 0.0)):
        df[od + LD_DRV_INT] += e * dt
    if vt == 0.0 and at <= 0.0:
        u = -1.0  # a target of standstill: stop and hold on the full brake command (the integral is kept)
    df[od + LD_DRV_PEDAL] = min(max(u, 0.0), 1.0)
    df[od + LD_DRV_BRAKE] = mf[ol + LF_DRV_BRAKE] * min(max(-u, 0.0), 1.0)
