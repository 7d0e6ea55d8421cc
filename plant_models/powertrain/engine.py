"""The engine: a mean-value combustion engine (torque curves over crank speed) with an idle governor, a rev
limiter and a torque-intervention limit, on its crank member (docs/powertrain.md, section 2)."""

from __future__ import annotations

from dataclasses import dataclass

from numba import njit

from ..core.api import JIT_STAGE, L
from .law import (RPM, B_PEDAL, B_PEDAL_ON, apply_torque, data_of, floats_of, law_input, port_speed, state_of,
                  table_linear)
from .slots import Slots

KIND = "engine"
SLOTS = Slots(ints=(
    ("crank", "port of the crank (the impeller with a converter, else the transmission input)"),
    ("in_pedal", "input index of the pedal, 0..1"),
    ("in_limit", "input index of the torque-intervention limit, N m"),
    ("full", "offset in MF_LAW of the full-load curve (rad/s, then N m; linear)"),
    ("n_full", "its number of breakpoints"),
    ("drag", "offset in MF_LAW of the motoring curve (rad/s, then N m <= 0; linear)"),
    ("n_drag", "its number of breakpoints"),
), floats=(
    ("idle", "idle speed, rad/s"),
    ("kp", "idle governor proportional gain, N m per rad/s"),
    ("ki", "idle governor integral gain, N m per rad"),
    ("rev", "rev limiter: fuel cut complete at this speed, rad/s"),
    ("rev_band", "... and starting this much below it, rad/s"),
    ("int_t", "torque intervention: time constant of the limit's response, s (0: immediate)"),
), states=(
    ("gov", "idle governor integral of (idle speed - speed), rad"),
    ("limit", "torque-intervention limit after its first-order response, N m"),
    ("work", "work of the engine torque on the crank, J", "work_engine"),
), data=(
    ("torque", "engine torque at the last evaluation, N m"),
    ("pedal_end", "the pedal the previous step's last evaluation used"),
    ("limit_end", "the limit input the previous step's last evaluation used, N m"),
))
globals().update(SLOTS.constants())


@dataclass(frozen=True)
class Engine:
    """A combustion engine as torque curves over crank speed (no combustion cycle: a mean-value model)."""

    inertia: float  # crank, flywheel and (with a converter) impeller, kg m^2
    idle_speed: float  # rad/s
    governor_kp: float  # N m per rad/s
    governor_ki: float  # N m per rad
    rev_limit: float  # rad/s: fuel cut complete
    rev_band: float  # rad/s: fuel cut begins this far below the limit
    intervention_time: float  # s: first-order response of the torque-intervention limit (0: immediate)
    full_load: tuple[tuple[float, float], ...]  # (rad/s, N m)
    drag: tuple[tuple[float, float], ...]  # (rad/s, N m), motoring torque (<= 0)
    max_torque: float  # N m, the largest full-load torque (the default of the intervention limit)


# -- compiled ---------------------------------------------------------------------------------------------------
@njit(**JIT_STAGE)
def pedal_at(mi, df, ri, s):
    """The pedal in effect s into the step: the driver's (held over the step) or the input's, 0..1.

    Called in the real-time loop.
    """
    ob = mi[L.DF_LAW]
    if df[ob + B_PEDAL_ON] == 1.0:
        return df[ob + B_PEDAL]
    return min(max(law_input(mi, df, mi[ri + I_IN_PEDAL], s), 0.0), 1.0)  # noqa: F821


@njit(**JIT_STAGE)
def engine_torque(mf, mi, df, s, oz, ozd, w, ri):
    """Engine torque at crank speed w (rad/s), N m; writes the governor's and the limit's derivatives (its
    states at df[oz], their derivatives at df[ozd]).

    Pedal between the drag (motoring) curve and the full-load curve, plus
    the idle governor's PI torque (conditional integration: the integral
    stops while the governor saturates), cut back to the drag torque by the
    rev limiter over its band, then capped by the intervention limit (never
    below the drag torque).  Called in the real-time loop.
    """
    ol = mi[L.MF_LAW]
    fo = floats_of(mi, ri)
    full = table_linear(mf, ol + mi[ri + I_FULL], mi[ri + I_N_FULL], w)  # noqa: F821
    drag = table_linear(mf, ol + mi[ri + I_DRAG], mi[ri + I_N_DRAG], w)  # noqa: F821
    pedal = pedal_at(mi, df, ri, s)
    span = full - drag
    e = mf[fo + F_IDLE] - w  # noqa: F821
    u = mf[fo + F_KP] * e + mf[fo + F_KI] * df[oz + Z_GOV]  # noqa: F821
    gov = min(max(u, 0.0), span)
    if (u <= 0.0 and e < 0.0) or (u >= span and e > 0.0):
        df[ozd + Z_GOV] = 0.0  # noqa: F821
    else:
        df[ozd + Z_GOV] = e  # noqa: F821
    t = min(drag + pedal * span + gov, full)
    cut = min(max((mf[fo + F_REV] - w) / mf[fo + F_REV_BAND], 0.0), 1.0)  # noqa: F821
    t = drag + cut * (t - drag)
    limit = law_input(mi, df, mi[ri + I_IN_LIMIT], s)  # noqa: F821
    T = mf[fo + F_INT_T]  # noqa: F821
    if T > 0.0:
        df[ozd + Z_LIMIT] = (limit - df[oz + Z_LIMIT]) / T  # noqa: F821
        limit = df[oz + Z_LIMIT]  # noqa: F821
    else:
        df[ozd + Z_LIMIT] = 0.0  # noqa: F821
    return max(min(t, limit), drag)


@njit(**JIT_STAGE)
def forces(mf, mi, df, s, oy, of, oz, ozd, ri):
    """The engine torque on the crank; returns its power, W.  Called in the real-time loop."""
    zi = state_of(mi, ri)
    port = mi[ri + I_CRANK]  # noqa: F821
    we = port_speed(mf, mi, df, port, oy)
    te = engine_torque(mf, mi, df, s, oz + zi, ozd + zi, we, ri)
    apply_torque(mf, mi, df, port, of, te)
    pe = te * we
    df[ozd + zi + Z_WORK] = pe  # noqa: F821
    df[data_of(mi, ri) + D_TORQUE] = te  # noqa: F821
    return pe


@njit(**JIT_STAGE)
def write_outputs(mf, mi, df, s, q, ri):
    """engine_torque from df[q]; returns the next output's offset.  Called in the real-time loop."""
    df[q] = df[data_of(mi, ri) + D_TORQUE]  # noqa: F821
    return q + 1


@njit(**JIT_STAGE)
def keep_inputs(mi, df, s, ri):
    """Keep the pedal and limit the last evaluation used, s into the step.  Called in the real-time loop."""
    od = data_of(mi, ri)
    df[od + D_PEDAL_END] = pedal_at(mi, df, ri, s)  # noqa: F821
    df[od + D_LIMIT_END] = law_input(mi, df, mi[ri + I_IN_LIMIT], s)  # noqa: F821


@njit(**JIT_STAGE)
def inputs_changed(mi, df, ri):
    """Do the pedal or the limit at the step's start differ from those kept?  Called in the real-time loop."""
    od = data_of(mi, ri)
    return (df[od + D_PEDAL_END] != pedal_at(mi, df, ri, 0.0)  # noqa: F821
            or df[od + D_LIMIT_END] != law_input(mi, df, mi[ri + I_IN_LIMIT], 0.0))  # noqa: F821


# -- Python side ------------------------------------------------------------------------------------------------
def members(pt) -> tuple[int, ...]:
    return (pt.engine_member,)


def add_ports(e: Engine, pt, inputs, outputs) -> dict[str, int]:
    return {"pedal": inputs.add("pedal", "-", 0.0, 1.0, 0.0, "accelerator pedal, 0 (released) .. 1 (full load)"),
            "torque_limit": inputs.add(
                "torque_limit", "N m", -1.0e4, 1.0e4, float(e.max_torque),
                "torque intervention: the engine torque is held at most at this limit (after its response time)"),
            "engine_torque": outputs.add("engine_torque", "N m", -1.0e4, 1.0e4, 0.0, "engine torque on the crank")}


def pack(e: Engine, pt, ctx) -> None:
    """Ints, floats and tables into the law's blocks (``ctx``: :class:`.components.Packing`)."""
    ctx.ints[I_CRANK] = ctx.port(pt.engine_member)  # noqa: F821
    ctx.ints[I_IN_PEDAL] = ctx.input("pedal")  # noqa: F821
    ctx.ints[I_IN_LIMIT] = ctx.input("torque_limit")  # noqa: F821
    ctx.floats[:] = [e.idle_speed, e.governor_kp, e.governor_ki, e.rev_limit, e.rev_band, e.intervention_time]
    ctx.table(I_FULL, I_N_FULL, *zip(*e.full_load))  # noqa: F821
    ctx.table(I_DRAG, I_N_DRAG, *zip(*e.drag))  # noqa: F821


def settle(e: Engine, z, inputs: dict[str, float]) -> None:
    """At reset: the intervention limit starts at its input (settled)."""
    z[Z_LIMIT] = inputs["torque_limit"]  # noqa: F821


def describe(e: Engine, pt, names) -> dict:
    return dict(member=names[pt.engine_member], idle_rpm=round(e.idle_speed / RPM, 1),
                rev_limit_rpm=round(e.rev_limit / RPM, 1), max_torque_N_m=e.max_torque,
                inputs=["pedal", "torque_limit"], outputs=["engine_torque", "work_engine"])
