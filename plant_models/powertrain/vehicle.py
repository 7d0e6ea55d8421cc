"""The vehicle's road load on the transmission's output member: aerodynamic drag, grade and a drawbar pull
(docs/powertrain.md, section 4).  Its mass is added to the member's inertia and its service brake and rolling
resistance are elements of the description (friction rows), both when the file is read."""

from __future__ import annotations

import math
from dataclasses import dataclass

from numba import njit

from ..core.api import JIT_STAGE
from .law import BRAKE, ROLLING, apply_torque, data_of, floats_of, law_input, port_speed, state_of
from .slots import Slots

KIND = "vehicle"
GRAVITY = 9.81  # m/s^2 (docs/powertrain.md, section 4: kept so that the measured figures the docs quote stay)
SLOTS = Slots(ints=(
    ("wheels", "port of the output member the vehicle is seen from"),
    ("in_grade", "input index of the road grade, %"),
    ("in_drawbar", "input index of the drawbar pull, N, or -1 (no drawbar)"),
), floats=(
    ("aero", "1/2 rho cd A, N per (m/s)^2"),
    ("rfd", "wheel radius / final drive ratio, m (v = sign * w_output * rfd)"),
    ("mg", "vehicle weight m g, N"),
    ("sign", "forward sense of the output member (+1 / -1)"),
    ("roll", "rolling resistance force c_r m g, N (the driver's feed-forward)"),
), states=(
    ("aero", "work of the aerodynamic drag, J", "work_aero"),
    ("grade", "work of the grade force (minus the change of potential energy), J", "work_grade"),
    ("drawbar", "work of the drawbar pull (<= 0 while pulling forward), J", "work_drawbar"),
), data=(
    ("speed", "vehicle speed at the last evaluation, m/s"),
    ("aero_f", "aerodynamic drag force, N (resisting forward motion when positive)"),
    ("grade_f", "grade force, N (resisting forward motion when positive)"),
    ("grade_end", "the grade the previous step's last evaluation used, %"),
    ("drawbar_end", "the drawbar pull the previous step's last evaluation used, N"),
))
globals().update(SLOTS.constants())


@dataclass(frozen=True)
class Vehicle:
    """A longitudinal vehicle seen from the transmission's output member."""

    mass: float  # kg
    wheel_radius: float  # m
    final_drive: float  # w_output / w_wheel
    drag_area: float  # cd A, m^2
    air_density: float  # kg/m^3
    rolling_coefficient: float  # rolling resistance per weight
    wheel_inertia: float  # all wheels, kg m^2 (at the wheels)
    drawbar: bool = False  # a drawbar pull input (a tractor's implement), N

    @property
    def radius_per_ratio(self) -> float:
        """m: v = w_output * r / i."""
        return self.wheel_radius / self.final_drive

    @property
    def reflected_inertia(self) -> float:
        """The vehicle's mass and wheels seen at the output member, kg m^2: (m r^2 + J_wheels) / i^2."""
        return (self.mass * self.wheel_radius ** 2 + self.wheel_inertia) / self.final_drive ** 2

    @property
    def rolling_torque(self) -> float:
        """Rolling resistance at the output member, N m: c_r m g r / i (the weight on level ground)."""
        return self.rolling_coefficient * self.mass * GRAVITY * self.radius_per_ratio


# -- compiled ---------------------------------------------------------------------------------------------------
@njit(**JIT_STAGE)
def forces(mf, mi, df, s, oy, of, oz, ozd, ri):
    """Aerodynamic drag, grade and drawbar pull on the output member; returns their power, W.  Called in the
    real-time loop."""
    fo = floats_of(mi, ri)
    port = mi[ri + I_WHEELS]  # noqa: F821
    wo = port_speed(mf, mi, df, port, oy)
    rfd = mf[fo + F_RFD]  # noqa: F821
    sign = mf[fo + F_SIGN]  # noqa: F821
    v = sign * wo * rfd
    fa = mf[fo + F_AERO] * v * abs(v)  # noqa: F821
    gr = 0.01 * law_input(mi, df, mi[ri + I_IN_GRADE], s)  # noqa: F821
    mg = mf[fo + F_MG]  # noqa: F821
    # m g sin(atan(grade)); on the flat sqrt(1 + 0) = 1 exactly, so the same value without the sqrt
    fg = mg * gr if gr == 0.0 else mg * gr / math.sqrt(1.0 + gr * gr)
    kd = mi[ri + I_IN_DRAWBAR]  # noqa: F821
    fd = law_input(mi, df, kd, s) if kd >= 0 else 0.0
    apply_torque(mf, mi, df, port, of, -sign * rfd * (fa + fg + fd))
    zd = ozd + state_of(mi, ri)
    df[zd + Z_AERO] = -fa * v  # noqa: F821
    df[zd + Z_GRADE] = -fg * v  # noqa: F821
    df[zd + Z_DRAWBAR] = -fd * v  # noqa: F821
    od = data_of(mi, ri)
    df[od + D_SPEED] = v  # noqa: F821
    df[od + D_AERO_F] = fa  # noqa: F821
    df[od + D_GRADE_F] = fg  # noqa: F821
    return -((fa + fg + fd) * v)


@njit(**JIT_STAGE)
def write_outputs(mf, mi, df, s, q, ri):
    """vehicle_speed, aero_force, grade_force from df[q].  Called in the real-time loop."""
    od = data_of(mi, ri)
    df[q] = df[od + D_SPEED] + 0.0  # noqa: F821  a standstill reads +0.0
    df[q + 1] = df[od + D_AERO_F]  # noqa: F821
    df[q + 2] = df[od + D_GRADE_F]  # noqa: F821
    return q + 3


@njit(**JIT_STAGE)
def keep_inputs(mi, df, s, ri):
    """Keep the grade and drawbar pull the last evaluation used.  Called in the real-time loop."""
    od = data_of(mi, ri)
    df[od + D_GRADE_END] = law_input(mi, df, mi[ri + I_IN_GRADE], s)  # noqa: F821
    kd = mi[ri + I_IN_DRAWBAR]  # noqa: F821
    if kd >= 0:
        df[od + D_DRAWBAR_END] = law_input(mi, df, kd, s)  # noqa: F821


@njit(**JIT_STAGE)
def inputs_changed(mi, df, ri):
    """Do the grade or the drawbar pull at the step's start differ from those kept?  Called in the real-time
    loop."""
    od = data_of(mi, ri)
    kd = mi[ri + I_IN_DRAWBAR]  # noqa: F821
    if kd >= 0 and df[od + D_DRAWBAR_END] != law_input(mi, df, kd, 0.0):  # noqa: F821
        return True
    return df[od + D_GRADE_END] != law_input(mi, df, mi[ri + I_IN_GRADE], 0.0)  # noqa: F821


# -- Python side ------------------------------------------------------------------------------------------------
def members(pt) -> tuple[int, ...]:
    return (pt.output_member,)


def add_ports(v: Vehicle, pt, inputs, outputs) -> dict[str, int]:
    idx = {"grade_percent": inputs.add("grade_percent", "%", -50.0, 50.0, 0.0,
                                       "road grade, positive uphill (100 tan of the slope angle)")}
    if v.drawbar:
        idx["drawbar_force"] = inputs.add("drawbar_force", "N", -2.0e5, 2.0e5, 0.0,
                                          "drawbar pull of the implement, positive resists forward motion")
    idx["vehicle_speed"] = outputs.add("vehicle_speed", "m/s", -100.0, 100.0, 0.0, "vehicle speed, forward positive")
    idx["aero_force"] = outputs.add("aero_force", "N", -1.0e5, 1.0e5, 0.0, "aerodynamic drag force")
    idx["grade_force"] = outputs.add("grade_force", "N", -1.0e5, 1.0e5, 0.0, "grade force, positive resists")
    return idx


def pack(v: Vehicle, pt, ctx) -> None:
    ctx.ints[I_WHEELS] = ctx.port(pt.output_member)  # noqa: F821
    ctx.ints[I_IN_GRADE] = ctx.input("grade_percent")  # noqa: F821
    ctx.ints[I_IN_DRAWBAR] = ctx.input("drawbar_force") if v.drawbar else -1  # noqa: F821
    ctx.floats[:] = [0.5 * v.air_density * v.drag_area, v.radius_per_ratio, v.mass * GRAVITY, pt.output_sign,
                     v.rolling_coefficient * v.mass * GRAVITY]


def describe(v: Vehicle, pt, names) -> dict:
    return dict(member=names[pt.output_member], mass_kg=v.mass, wheel_radius_m=v.wheel_radius,
                final_drive=v.final_drive, drag_area_m2=v.drag_area, rolling_coefficient=v.rolling_coefficient,
                reflected_inertia_kg_m2=round(v.reflected_inertia, 4),
                elements=[BRAKE] + ([ROLLING] if v.rolling_coefficient > 0 else []),
                inputs=["grade_percent", f"p_{BRAKE}"] + (["drawbar_force"] if v.drawbar else []),
                outputs=["vehicle_speed", "aero_force", "grade_force", "work_aero", "work_grade", "work_drawbar"])
