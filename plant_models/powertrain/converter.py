"""The torque converter: capacity-factor and torque-ratio tables over the speed ratio (Kotwicki's model) between
the impeller and the turbine (docs/powertrain.md, section 3).  Its lock-up clutch is an element of the
description (an ordinary friction row), added when the file is read."""

from __future__ import annotations

from dataclasses import dataclass

from numba import njit

from ..core.api import JIT_STAGE, L
from .law import LOCKUP, RPM, apply_torque, data_of, hermite, port_speed, state_of
from .slots import Slots

KIND = "torque_converter"
SLOTS = Slots(ints=(
    ("impeller", "port of the impeller (the engine's crank)"),
    ("turbine", "port of the turbine (the transmission input)"),
    ("cap", "offset in MF_LAW of C = 1/K^2 over the speed ratio (x, y, slopes: monotone cubic)"),
    ("tr", "offset in MF_LAW of TR over the same speed ratios (x, y, slopes)"),
    ("n_tab", "their number of breakpoints"),
), states=(
    ("work", "work of the converter's torques (<= 0: its loss), J", "work_converter"),
), data=(
    ("impeller_tq", "torque the converter takes from the impeller at the last evaluation, N m"),
    ("turbine_tq", "torque the converter gives the turbine, N m"),
    ("sr", "speed ratio w_turbine / w_impeller (0 with the impeller at rest)"),
))
globals().update(SLOTS.constants())


@dataclass(frozen=True)
class TorqueConverter:
    """A torque converter as capacity-factor and torque-ratio tables over the speed ratio.

    The tables end below the coupling point SR = 1, where the converter
    transmits no torque (K infinite): the model adds that point with TR = 1.
    """

    speed_ratio: tuple[float, ...]  # 0 .. below 1
    capacity_factor: tuple[float, ...]  # K, rad/s per sqrt(N m)
    torque_ratio: tuple[float, ...]  # TR

    def capacity_table(self) -> tuple[tuple[float, ...], tuple[float, ...], tuple[float, ...]]:
        """(SR, C = 1/K^2 in N m s^2/rad^2, TR) with the coupling point (1, 0, 1) added."""
        return (self.speed_ratio + (1.0,), tuple(1.0 / k ** 2 for k in self.capacity_factor) + (0.0,),
                self.torque_ratio + (1.0,))


# -- compiled ---------------------------------------------------------------------------------------------------
@njit(**JIT_STAGE)
def converter_tables(mf, mi, ri, sr):
    """(C(sr), TR(sr)): monotone cubic Hermite interpolation (Fritsch-Carlson slopes) in both tables at one
    speed ratio, held constant beyond their ends; the interval is searched once (both are packed over the
    same speed ratios).

    C1: a speed ratio crossing a breakpoint inside an RK4 sub-step costs no
    order of accuracy worth naming (a kink of a linear table did: 4e-4 J of
    energy residual per crossing of the capacity table's steepest kink at
    1 ms).  Called in the real-time loop.
    """
    ok = mi[L.MF_LAW] + mi[ri + I_CAP]  # noqa: F821
    otr = mi[L.MF_LAW] + mi[ri + I_TR]  # noqa: F821
    n = mi[ri + I_N_TAB]  # noqa: F821
    if sr <= mf[ok]:
        return mf[ok + n], mf[otr + n]
    if sr >= mf[ok + n - 1]:
        return mf[ok + 2 * n - 1], mf[otr + 2 * n - 1]
    q = 1
    while sr > mf[ok + q]:
        q += 1
    return hermite(mf, ok, n, q, sr), hermite(mf, otr, n, q, sr)


@njit(**JIT_STAGE)
def converter_torques(mf, mi, ri, wp, wt):
    """(torque taken from the impeller, torque given to the turbine), N m, at impeller and turbine speeds.

    Drive (wt <= wp): SR = wt/wp, impeller torque C(SR) wp^2 = (wp/K(SR))^2,
    turbine torque TR(SR) times that.  Coast (wt > wp): the same tables with
    the roles exchanged, SR' = wp/wt (the turbine drives the impeller).  At
    the coupling point SR = 1 the capacity C is zero, so both branches meet
    there.  Called in the real-time loop.
    """
    if (wp <= 0.0 and wt <= 0.0) or wt == wp:  # standing, or locked up: C(1) = 0
        return 0.0, 0.0
    if wt <= wp:
        c, tr = converter_tables(mf, mi, ri, max(wt / wp, 0.0))
        tp = c * wp * wp
        return tp, tr * tp
    c, tr = converter_tables(mf, mi, ri, max(wp / wt, 0.0))
    tt = c * wt * wt
    return -tr * tt, -tt


@njit(**JIT_STAGE)
def forces(mf, mi, df, s, oy, of, oz, ozd, ri):
    """The converter's torques on impeller and turbine; returns their power (<= 0), W.  Called in the
    real-time loop."""
    pi = mi[ri + I_IMPELLER]  # noqa: F821
    pt = mi[ri + I_TURBINE]  # noqa: F821
    wp = port_speed(mf, mi, df, pi, oy)
    wt = port_speed(mf, mi, df, pt, oy)
    tp, tt = converter_torques(mf, mi, ri, wp, wt)
    apply_torque(mf, mi, df, pi, of, -tp)
    apply_torque(mf, mi, df, pt, of, tt)
    pc = tt * wt - tp * wp
    df[ozd + state_of(mi, ri) + Z_WORK] = pc  # noqa: F821
    od = data_of(mi, ri)
    df[od + D_IMPELLER_TQ] = tp  # noqa: F821
    df[od + D_TURBINE_TQ] = tt  # noqa: F821
    # locked up (wt == wp exactly) the ratio is exactly 1: no division
    df[od + D_SR] = (1.0 if wt == wp else wt / wp) if wp > 0.0 else 0.0  # noqa: F821
    return pc


@njit(**JIT_STAGE)
def write_outputs(mf, mi, df, s, q, ri):
    """impeller_torque, turbine_torque, speed_ratio from df[q].  Called in the real-time loop."""
    od = data_of(mi, ri)
    df[q] = df[od + D_IMPELLER_TQ]  # noqa: F821
    df[q + 1] = df[od + D_TURBINE_TQ]  # noqa: F821
    df[q + 2] = df[od + D_SR]  # noqa: F821
    return q + 3


# -- Python side ------------------------------------------------------------------------------------------------
def members(pt) -> tuple[int, ...]:
    return (pt.engine_member, pt.turbine_member)


def add_ports(c: TorqueConverter, pt, inputs, outputs) -> dict[str, int]:
    return {"impeller_torque": outputs.add("impeller_torque", "N m", -1.0e4, 1.0e4, 0.0,
                                           "torque the converter takes from the impeller"),
            "turbine_torque": outputs.add("turbine_torque", "N m", -1.0e4, 1.0e4, 0.0,
                                          "torque the converter gives the turbine (transmission input)"),
            "speed_ratio": outputs.add("speed_ratio", "-", -100.0, 100.0, 0.0,
                                       "converter speed ratio w_turbine / w_impeller (0 with the impeller at rest)")}


def pack(c: TorqueConverter, pt, ctx) -> None:
    ctx.ints[I_IMPELLER] = ctx.port(pt.engine_member)  # noqa: F821
    ctx.ints[I_TURBINE] = ctx.port(pt.turbine_member)  # noqa: F821
    sr, cap, tr = c.capacity_table()
    ctx.table(I_CAP, I_N_TAB, sr, cap, cubic=True)  # noqa: F821
    ctx.table(I_TR, I_N_TAB, sr, tr, cubic=True)  # noqa: F821


def describe(c: TorqueConverter, pt, names) -> dict:
    return dict(impeller=names[pt.engine_member], turbine=names[pt.turbine_member],
                stall_K_rpm_per_sqrt_N_m=round(c.capacity_factor[0] / RPM, 2),
                stall_torque_ratio=c.torque_ratio[0], lockup_element=LOCKUP, inputs=[f"p_{LOCKUP}"],
                outputs=["impeller_torque", "turbine_torque", "speed_ratio", "work_converter"])
