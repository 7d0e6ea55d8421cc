"""An electric motor on any member of the description: a P2 hybrid's motor between the engine and the converter
(on the member ``engine``), or on the transmission input, the output, any member (docs/powertrain.md, section 4e).

Torque: the command (an input, N m, positive drives the member forward),
held within the limit over speed ``w`` (rad/s):

    T_lim(w) = T_max                      |w| <= w_base     (constant torque)
             = T_max w_base / |w|         |w| >  w_base     (constant power P_max = T_max w_base)
    T = clamp(T_cmd, -T_lim(w), T_lim(w))

Electrical power drawn from the supply (W, negative: returned while
generating), a closed-form loss model (Larminie and Lowry, "Electric Vehicle
Technology Explained", 2nd ed., 2012, section 7.3: copper, iron and windage
losses):

    P_loss = k_c T^2 + k_i |w| + k_w |w|^3
    P_el   = T w + P_loss

so the efficiency is ``T w / P_el`` motoring (``T w > 0``) and ``P_el / (T w)``
generating.  The motor's mechanical work ``T w`` and its electrical energy
``P_el`` are two work accounts (``work_motor``, ``work_motor_electrical``):
the energy balance with the supply is ``work_motor_electrical + work_engine
= losses + change of energy`` with the motor's loss
``work_motor_electrical - work_motor``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from numba import njit

from ..core.api import JIT_STAGE
from .law import RPM, apply_torque, data_of, floats_of, law_input, port_speed, state_of
from .slots import Slots

KIND = "motor"
SLOTS = Slots(ints=(
    ("rotor", "port of the member the rotor turns with"),
    ("in_torque", "input index of the torque command, N m"),
), floats=(
    ("t_max", "torque limit up to the base speed, N m"),
    ("w_base", "base speed, rad/s (above it the limit is the constant power t_max w_base)"),
    ("k_c", "copper loss coefficient, W per (N m)^2"),
    ("k_i", "iron loss coefficient, W per rad/s"),
    ("k_w", "windage loss coefficient, W per (rad/s)^3"),
), states=(
    ("work", "mechanical work of the motor on its member, J", "work_motor"),
    ("electrical", "electrical energy the motor drew from its supply (negative: returned), J",
     "work_motor_electrical"),
), data=(
    ("torque", "the motor's torque at the last evaluation, N m"),
    ("limit", "its torque limit at that speed, N m"),
    ("power", "its electrical power, W (positive drawn from the supply)"),
    ("cmd_end", "the torque command the previous step's last evaluation used, N m"),
))
globals().update(SLOTS.constants())


@dataclass(frozen=True)
class Motor:
    """An electric motor: a torque limit over speed and a closed-form loss map."""

    member: int  # the member its rotor turns with
    rotor_inertia: float  # kg m^2 (added to the member's inertia when the file is read)
    max_torque: float  # N m, up to the base speed
    base_speed: float  # rad/s
    copper_loss: float  # k_c, W per (N m)^2
    iron_loss: float  # k_i, W per rad/s
    windage_loss: float  # k_w, W per (rad/s)^3

    def torque_limit(self, w: float) -> float:
        """T_lim(w), N m (the compiled law's closed form)."""
        return self.max_torque if abs(w) <= self.base_speed else self.max_torque * self.base_speed / abs(w)

    def electrical_power(self, t: float, w: float) -> float:
        """P_el = T w + k_c T^2 + k_i |w| + k_w |w|^3, W."""
        return t * w + self.copper_loss * t * t + self.iron_loss * abs(w) + self.windage_loss * abs(w) ** 3


# -- compiled ---------------------------------------------------------------------------------------------------
@njit(**JIT_STAGE)
def motor_torque(mf, mi, df, s, w, ri):
    """(torque, its limit) at speed w: the command clamped to the limit curve, N m.  Called in the real-time
    loop."""
    fo = floats_of(mi, ri)
    a = abs(w)
    wb = mf[fo + F_W_BASE]  # noqa: F821
    lim = mf[fo + F_T_MAX] if a <= wb else mf[fo + F_T_MAX] * wb / a  # noqa: F821
    return min(max(law_input(mi, df, mi[ri + I_IN_TORQUE], s), -lim), lim), lim  # noqa: F821


@njit(**JIT_STAGE)
def forces(mf, mi, df, s, oy, of, oz, ozd, ri):
    """The motor's torque on its member; returns its mechanical power, W (the electrical power is its second
    account).  Called in the real-time loop."""
    port = mi[ri + I_ROTOR]  # noqa: F821
    w = port_speed(mf, mi, df, port, oy)
    t, lim = motor_torque(mf, mi, df, s, w, ri)
    apply_torque(mf, mi, df, port, of, t)
    fo = floats_of(mi, ri)
    a = abs(w)
    pm = t * w
    pel = pm + mf[fo + F_K_C] * t * t + mf[fo + F_K_I] * a + mf[fo + F_K_W] * a * a * a  # noqa: F821
    zd = ozd + state_of(mi, ri)
    df[zd + Z_WORK] = pm  # noqa: F821
    df[zd + Z_ELECTRICAL] = pel  # noqa: F821
    od = data_of(mi, ri)
    df[od + D_TORQUE] = t  # noqa: F821
    df[od + D_LIMIT] = lim  # noqa: F821
    df[od + D_POWER] = pel  # noqa: F821
    return pm


@njit(**JIT_STAGE)
def write_outputs(mf, mi, df, s, q, ri):
    """motor_torque, motor_torque_limit, motor_electrical_power from df[q].  Called in the real-time loop."""
    od = data_of(mi, ri)
    df[q] = df[od + D_TORQUE]  # noqa: F821
    df[q + 1] = df[od + D_LIMIT]  # noqa: F821
    df[q + 2] = df[od + D_POWER]  # noqa: F821
    return q + 3


@njit(**JIT_STAGE)
def keep_inputs(mi, df, s, ri):
    """Keep the command the last evaluation used.  Called in the real-time loop."""
    df[data_of(mi, ri) + D_CMD_END] = law_input(mi, df, mi[ri + I_IN_TORQUE], s)  # noqa: F821


@njit(**JIT_STAGE)
def inputs_changed(mi, df, ri):
    """Does the command at the step's start differ from the one kept?  Called in the real-time loop."""
    return df[data_of(mi, ri) + D_CMD_END] != law_input(mi, df, mi[ri + I_IN_TORQUE], 0.0)  # noqa: F821


# -- Python side ------------------------------------------------------------------------------------------------
def read(r, members, pt):
    """``[motor]``: (members with the rotor's inertia added, Motor).  Keys: docs/powertrain.md, section 4e."""
    names = [m.name for m in members]
    default = "engine" if "engine" in names else names[pt.turbine_member]
    name = r.string("member", default)
    if name not in names:
        raise r.error("member", f"names no member; the members are {', '.join(names)}")
    k = names.index(name)
    rotor = r.number("rotor_inertia_kg_m2", 0.0, nonnegative=True)
    motor = Motor(member=k, rotor_inertia=rotor, max_torque=r.number("max_torque_N_m", positive=True),
                  base_speed=r.number("base_speed_rpm", positive=True) * RPM,
                  copper_loss=r.number("copper_loss_W_per_N2_m2", 0.0, nonnegative=True),
                  iron_loss=r.number("iron_loss_W_s_per_rad", 0.0, nonnegative=True),
                  windage_loss=r.number("windage_loss_W_s3_per_rad3", 0.0, nonnegative=True))
    r.reject_unknown()
    members = list(members)
    members[k] = replace(members[k], inertia=members[k].inertia + rotor)
    return members, motor


def members(pt) -> tuple[int, ...]:
    return (pt.part(KIND).member,)


def add_ports(m: Motor, pt, inputs, outputs) -> dict[str, int]:
    return {"motor_torque_command": inputs.add("motor_torque_command", "N m", -1.0e4, 1.0e4, 0.0,
                                               "electric motor torque command, positive drives its member forward "
                                               "(held within the limit over speed)"),
            "motor_torque": outputs.add("motor_torque", "N m", -1.0e4, 1.0e4, 0.0,
                                        "electric motor torque on its member"),
            "motor_torque_limit": outputs.add("motor_torque_limit", "N m", 0.0, 1.0e4, 0.0,
                                              "electric motor torque limit at its speed"),
            "motor_electrical_power": outputs.add("motor_electrical_power", "W", -1.0e6, 1.0e6, 0.0,
                                                  "electrical power the motor draws (negative: returns)")}


def pack(m: Motor, pt, ctx) -> None:
    ctx.ints[I_ROTOR] = ctx.port(m.member)  # noqa: F821
    ctx.ints[I_IN_TORQUE] = ctx.input("motor_torque_command")  # noqa: F821
    ctx.floats[:] = [m.max_torque, m.base_speed, m.copper_loss, m.iron_loss, m.windage_loss]


def describe(m: Motor, pt, names) -> dict:
    return dict(member=names[m.member], max_torque_N_m=m.max_torque, base_speed_rpm=round(m.base_speed / RPM, 1),
                max_power_kW=round(m.max_torque * m.base_speed / 1e3, 2), inputs=["motor_torque_command"],
                outputs=["motor_torque", "motor_torque_limit", "motor_electrical_power", "work_motor",
                         "work_motor_electrical"])
