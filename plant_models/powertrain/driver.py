"""The driver: pedal and brake that follow a target speed (feed-forward + PI), sampled once per step.

As the driver models of HIL benches do, the driver acts at the plant's
step rate: at the start of each step it reads the vehicle speed (the force
law's last evaluation, at the previous step's final state) and the target
speed (an input; its rate is the target acceleration), and holds its pedal
and brake over the step.  Its integral is plant data (``DF_LAW``), so
snapshots hold it.  The pedal reaches the engine through the law's bus
(``B_PEDAL_ON``, ``B_PEDAL``), the brake the core through
:func:`core_inputs`.  Equations: docs/powertrain.md, section 4b.
"""

from __future__ import annotations

from dataclasses import dataclass

from numba import njit

from ..clutch import BAR
from ..core.api import JIT_STAGE, L
from . import vehicle as V
from .law import B_PEDAL, B_PEDAL_ON, H_N_IN, data_of, floats_of
from .slots import Slots

KIND = "driver"
SLOTS = Slots(ints=(
    ("in_target", "input index of the target speed, m/s"),
    ("in_on", "input index of the driver's enable (>= 0.5: the driver commands)"),
    ("in_grade", "input index of the road grade, %"),
    ("brake_row", "core row of the service brake"),
    ("speed", "offset in DF_LAW of the vehicle's speed at the law's last evaluation"),
), floats=(
    ("kp", "pedal per m/s of speed error"),
    ("ki", "pedal per m of integrated speed error"),
    ("full", "force at the wheels the feed-forward takes for full pedal, N"),
    ("brake", "brake pressure per unit of negative command, bar"),
    ("mg", "the vehicle's weight m g, N"),
    ("aero", "the vehicle's 1/2 rho cd A, N per (m/s)^2"),
    ("roll", "the vehicle's rolling resistance force c_r m g, N"),
), data=(
    ("int", "the driver's integral of the speed error, m"),
    ("brake", "the driver's brake pressure for this step, bar"),
))
globals().update(SLOTS.constants())


@dataclass(frozen=True)
class Driver:
    """A driver following a target speed: feed-forward of the road load plus PI on the speed error."""

    kp: float  # pedal per m/s
    ki: float  # pedal per m
    full_pedal_force: float  # N at the wheels at full pedal (the feed-forward's scale)
    brake_bar: float  # bar of brake pressure at a command of -1


# -- compiled ---------------------------------------------------------------------------------------------------
@njit(**JIT_STAGE)
def before_step(mf, mi, df, dt, ri):
    """The driver's pedal and brake for the step of dt seconds that begins.  Called in the real-time loop.

    u = (m a_t + F_roll + F_aero(v_t) + F_grade) / F_full + kp e + ki integral(e),  e = v_t - v;
    pedal = clamp(u, 0, 1), brake = clamp(-u, 0, 1) times the brake gain.  The integral stops while
    the command saturates and the error drives it further (conditional integration); it is reset
    while the driver is off.  A target of standstill (zero speed, not rising) holds the full brake.
    """
    fo = floats_of(mi, ri)
    od = data_of(mi, ri)
    ob = mi[L.DF_LAW]
    op = mi[L.DF_PLANT]
    n_in = mi[mi[L.MI_LAW] + H_N_IN]
    kt = mi[ri + I_IN_TARGET]  # noqa: F821
    kon = mi[ri + I_IN_ON]  # noqa: F821
    probe = (df[op + kt] - df[op + kt]) + (df[op + n_in + kt] - df[op + n_in + kt]) + (df[op + kon] - df[op + kon])
    if probe != 0.0:
        return  # a non-finite input: the step is refused (the plant's input check), the driver's state kept
    if df[op + kon] < 0.5:
        df[ob + B_PEDAL_ON] = 0.0
        df[od + D_INT] = 0.0  # noqa: F821
        return
    df[ob + B_PEDAL_ON] = 1.0
    vt = df[op + kt]
    at = df[op + n_in + kt]
    gr = 0.01 * df[op + mi[ri + I_IN_GRADE]]  # noqa: F821
    mg = mf[fo + F_MG]  # noqa: F821
    v = df[mi[L.DF_LAW] + mi[ri + I_SPEED]]  # noqa: F821
    e = vt - v
    f_ff = mg / V.GRAVITY * at + mf[fo + F_ROLL] + mf[fo + F_AERO] * vt * abs(vt) + mg * gr / (1.0 + gr * gr) ** 0.5  # noqa: F821,E501
    u = f_ff / mf[fo + F_FULL] + mf[fo + F_KP] * e + mf[fo + F_KI] * df[od + D_INT]  # noqa: F821
    if not ((u >= 1.0 and e > 0.0) or (u <= -1.0 and e < 0.0)):
        df[od + D_INT] += e * dt  # noqa: F821
    if vt == 0.0 and at <= 0.0:
        u = -1.0  # a target of standstill: stop and hold on the full brake command (the integral is kept)
    df[ob + B_PEDAL] = min(max(u, 0.0), 1.0)
    df[od + D_BRAKE] = mf[fo + F_BRAKE] * min(max(-u, 0.0), 1.0)  # noqa: F821


@njit(**JIT_STAGE)
def commands_core_inputs(mi, df, ri):
    """Does the driver command a core input (the brake) in this step?  Called in the real-time loop."""
    return df[mi[L.DF_LAW] + B_PEDAL_ON] == 1.0


@njit(**JIT_STAGE)
def core_inputs(mi, df, ri):
    """The driver's brake pressure in place of p_brake while it commands.  Called in the real-time loop."""
    if df[mi[L.DF_LAW] + B_PEDAL_ON] == 1.0:
        row = mi[ri + I_BRAKE_ROW]  # noqa: F821
        df[mi[L.DF_U_ACT] + row] = df[data_of(mi, ri) + D_BRAKE] * BAR  # noqa: F821
        df[mi[L.DF_U_ACT_RATE] + row] = 0.0


@njit(**JIT_STAGE)
def write_outputs(mf, mi, df, s, q, ri):
    """driver_pedal, driver_brake (0 while off) from df[q].  Called in the real-time loop."""
    ob = mi[L.DF_LAW]
    on = df[ob + B_PEDAL_ON] == 1.0
    df[q] = df[ob + B_PEDAL] if on else 0.0
    df[q + 1] = df[data_of(mi, ri) + D_BRAKE] if on else 0.0  # noqa: F821
    return q + 2


# -- Python side ------------------------------------------------------------------------------------------------
def members(pt) -> tuple[int, ...]:
    return ()


def add_ports(d: Driver, pt, inputs, outputs) -> dict[str, int]:
    return {"target_speed": inputs.add("target_speed", "m/s", -100.0, 100.0, 0.0, "the driver's target speed"),
            "driver_on": inputs.add("driver_on", "-", 0, 1, 0, "1: the driver commands pedal and brake "
                                    "(the pedal and p_brake inputs are then ignored)", integer=True),
            "driver_pedal": outputs.add("driver_pedal", "-", 0.0, 1.0, 0.0, "the driver's pedal (0 while off)"),
            "driver_brake": outputs.add("driver_brake", "bar", 0.0, 1.0e3, 0.0,
                                        "the driver's brake pressure (0 while off)")}


def pack(d: Driver, pt, ctx) -> None:
    v = pt.vehicle
    ctx.ints[I_IN_TARGET] = ctx.input("target_speed")  # noqa: F821
    ctx.ints[I_IN_ON] = ctx.input("driver_on")  # noqa: F821
    ctx.ints[I_IN_GRADE] = ctx.input("grade_percent")  # noqa: F821
    ctx.ints[I_BRAKE_ROW] = pt.brake_row  # noqa: F821
    ctx.ints[I_SPEED] = ctx.data_of(V.KIND) + V.D_SPEED  # noqa: F821
    ctx.floats[:] = [d.kp, d.ki, d.full_pedal_force, d.brake_bar, v.mass * V.GRAVITY,
                     0.5 * v.air_density * v.drag_area, v.rolling_coefficient * v.mass * V.GRAVITY]


def describe(d: Driver, pt, names) -> dict:
    return dict(kp=d.kp, ki=d.ki, full_pedal_force_N=d.full_pedal_force,
                inputs=["target_speed", "driver_on"], outputs=["driver_pedal", "driver_brake"])
