"""The power take-off: a shaft geared to the crank driving an implement whose torque at full work is a table over
its speed, scaled by the load input (docs/powertrain.md, section 4c)."""

from __future__ import annotations

from dataclasses import dataclass

from numba import njit

from ..core.api import JIT_STAGE, L, y_omega
from .law import apply_torque, data_of, law_input, port_speed, state_of
from .slots import Slots

KIND = "pto"
SLOTS = Slots(ints=(
    ("crank", "port of the crank it is geared to"),
    ("in_load", "input index of the PTO load, 0..1"),
    ("tab", "offset in MF_LAW of its table: crank speed (rad/s), then torque on the crank at full load (N m)"),
    ("n_tab", "its number of breakpoints"),
), states=(
    ("work", "work of the PTO load (<= 0), J", "work_pto"),
), data=(
    ("load_end", "the PTO load the previous step's last evaluation used"),
))
globals().update(SLOTS.constants())


@dataclass(frozen=True)
class Pto:
    """A power take-off: a shaft driven from the crank at a fixed ratio, loaded by an implement."""

    ratio: float  # crank speed / PTO shaft speed
    load: tuple[tuple[float, float], ...]  # (PTO shaft speed rad/s, torque N m at full load), from (0, 0)

    def crank_table(self) -> tuple[tuple[float, ...], tuple[float, ...]]:
        """The load seen at the crank: (crank speed rad/s, torque N m) = (ratio w, T / ratio)."""
        return (tuple(self.ratio * w for w, _ in self.load), tuple(t / self.ratio for _, t in self.load))


# -- compiled ---------------------------------------------------------------------------------------------------
@njit(**JIT_STAGE)
def pto_torque(mf, mi, df, s, we, ri):
    """Torque the PTO takes from the crank at crank speed we (rad/s), N m: the load input (0..1) times the
    implement's full-load torque over speed, linear between breakpoints, 0 at rest, odd in we (a load
    resists either sense).  Called in the real-time loop."""
    ox = mi[L.MF_LAW] + mi[ri + I_TAB]  # noqa: F821
    n = mi[ri + I_N_TAB]  # noqa: F821
    a = abs(we)
    if a >= mf[ox + n - 1]:
        t = mf[ox + 2 * n - 1]
    else:
        q = 1
        while a > mf[ox + q]:
            q += 1
        x0 = mf[ox + q - 1]
        y0 = mf[ox + n + q - 1]
        t = y0 + (mf[ox + n + q] - y0) * (a - x0) / (mf[ox + q] - x0)
    t *= min(max(law_input(mi, df, mi[ri + I_IN_LOAD], s), 0.0), 1.0)  # noqa: F821
    return t if we >= 0.0 else -t


@njit(**JIT_STAGE)
def forces(mf, mi, df, s, oy, of, oz, ozd, ri):
    """The PTO's load torque on the crank; returns its power (<= 0), W.  Called in the real-time loop."""
    port = mi[ri + I_CRANK]  # noqa: F821
    we = port_speed(mf, mi, df, port, oy)
    tq = pto_torque(mf, mi, df, s, we, ri)
    apply_torque(mf, mi, df, port, of, -tq)
    df[ozd + state_of(mi, ri) + Z_WORK] = -tq * we  # noqa: F821
    return -(tq * we)


@njit(**JIT_STAGE)
def write_outputs(mf, mi, df, s, q, ri):
    """pto_torque from df[q], at the state the outputs are written for (the step's end).  Called in the
    real-time loop."""
    df[q] = pto_torque(mf, mi, df, s, port_speed(mf, mi, df, mi[ri + I_CRANK], y_omega(mi)), ri)  # noqa: F821
    return q + 1


@njit(**JIT_STAGE)
def keep_inputs(mi, df, s, ri):
    """Keep the load the last evaluation used.  Called in the real-time loop."""
    df[data_of(mi, ri) + D_LOAD_END] = law_input(mi, df, mi[ri + I_IN_LOAD], s)  # noqa: F821


@njit(**JIT_STAGE)
def inputs_changed(mi, df, ri):
    """Does the load at the step's start differ from the one kept?  Called in the real-time loop."""
    return df[data_of(mi, ri) + D_LOAD_END] != law_input(mi, df, mi[ri + I_IN_LOAD], 0.0)  # noqa: F821


# -- Python side ------------------------------------------------------------------------------------------------
def members(pt) -> tuple[int, ...]:
    return (pt.engine_member,)


def add_ports(p: Pto, pt, inputs, outputs) -> dict[str, int]:
    return {"pto_load": inputs.add("pto_load", "-", 0.0, 1.0, 0.0,
                                   "PTO implement load, 0 (disengaged) .. 1 (its full-load torque curve)"),
            "pto_torque": outputs.add("pto_torque", "N m", -1.0e4, 1.0e4, 0.0,
                                      "torque the PTO load takes from the crank")}


def pack(p: Pto, pt, ctx) -> None:
    ctx.ints[I_CRANK] = ctx.port(pt.engine_member)  # noqa: F821
    ctx.ints[I_IN_LOAD] = ctx.input("pto_load")  # noqa: F821
    ctx.table(I_TAB, I_N_TAB, *p.crank_table())  # noqa: F821


def describe(p: Pto, pt, names) -> dict:
    return dict(member=names[pt.engine_member], ratio=p.ratio,
                full_load_kW=round(max(w * t for w, t in p.load) / 1e3, 2),
                inputs=["pto_load"], outputs=["pto_torque", "work_pto"])
