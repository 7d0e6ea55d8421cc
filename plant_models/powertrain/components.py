"""Parameters of the powertrain components, their ports, and the packing of the force law's blocks.

A component that is a friction row (the lock-up clutch, the service brake,
the rolling resistance) becomes an element of the transmission's
description when the file is read (:mod:`plant_models.readers.powertrain`);
what depends on the state beyond friction (engine torque, converter
torques, aerodynamic drag, grade) is the force law of :mod:`.law`, whose
parameters are packed here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..plant import Ports
from . import law as W

RPM = 2.0 * math.pi / 60.0  # rad/s per rpm
GRAVITY = 9.81  # m/s^2

ENGINE_MEMBER = "engine"  # the member a converter's impeller and the engine's crank make
LOCKUP = "lockup"  # the lock-up clutch element
BRAKE = "brake"  # the service brake element
ROLLING = "rolling"  # the rolling-resistance element


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


def monotone_slopes(xs, ys) -> list[float]:
    """Slopes at the breakpoints of the monotone cubic Hermite interpolant (Fritsch and Carlson, SIAM J.
    Numer. Anal. 17, 1980; the weighted harmonic mean of Fritsch and Butland): no overshoot between
    breakpoints, a flat slope where the data turn."""
    n = len(xs)
    h = [xs[k + 1] - xs[k] for k in range(n - 1)]
    dl = [(ys[k + 1] - ys[k]) / h[k] for k in range(n - 1)]
    d = [dl[0]] + [0.0] * (n - 2) + [dl[-1]]
    for k in range(1, n - 1):
        if dl[k - 1] * dl[k] > 0.0:
            w1, w2 = 2.0 * h[k] + h[k - 1], h[k] + 2.0 * h[k - 1]
            d[k] = (w1 + w2) / (w1 / dl[k - 1] + w2 / dl[k])
    for k in (0, n - 1):  # end slopes no steeper than three times the secant (monotone)
        j = 0 if k == 0 else n - 2
        if d[k] * dl[j] <= 0.0:
            d[k] = 0.0
        elif abs(d[k]) > 3.0 * abs(dl[j]):
            d[k] = 3.0 * dl[j]
    return d


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


@dataclass(frozen=True)
class Driver:
    """A driver following a target speed: feed-forward of the road load plus PI on the speed error."""

    kp: float  # pedal per m/s
    ki: float  # pedal per m
    full_pedal_force: float  # N at the wheels at full pedal (the feed-forward's scale)
    brake_bar: float  # bar of brake pressure at a command of -1


@dataclass(frozen=True)
class Pto:
    """A power take-off: a shaft driven from the crank at a fixed ratio, loaded by an implement."""

    ratio: float  # crank speed / PTO shaft speed
    load: tuple[tuple[float, float], ...]  # (PTO shaft speed rad/s, torque N m at full load), from (0, 0)

    def crank_table(self) -> tuple[tuple[float, ...], tuple[float, ...]]:
        """The load seen at the crank: (crank speed rad/s, torque N m) = (ratio w, T / ratio)."""
        return (tuple(self.ratio * w for w, _ in self.load), tuple(t / self.ratio for _, t in self.load))


@dataclass(frozen=True)
class Powertrain:
    """The components present (None: absent) and the members they act on (member indices)."""

    engine: Engine | None
    converter: TorqueConverter | None
    vehicle: Vehicle | None
    engine_member: int  # the engine's crank (the impeller with a converter; else the transmission input)
    turbine_member: int  # the transmission input
    output_member: int
    output_sign: float
    driver: Driver | None = None
    brake_row: int = -1  # the service brake's element (core row)
    pto: Pto | None = None

    @property
    def law_states(self) -> int:
        """Number of the law's states z (a PTO adds its work account)."""
        return W.NZ_PTO if self.pto is not None else W.NZ


def add_ports(pt: Powertrain, inputs: Ports, outputs: Ports) -> dict[str, int]:
    """The components' input and output ports; returns {name: index} of each."""
    idx = {}
    if pt.engine is not None:
        e = pt.engine
        idx["pedal"] = inputs.add("pedal", "-", 0.0, 1.0, 0.0, "accelerator pedal, 0 (released) .. 1 (full load)")
        idx["torque_limit"] = inputs.add(
            "torque_limit", "N m", -1.0e4, 1.0e4, float(e.max_torque),
            "torque intervention: the engine torque is held at most at this limit (after its response time)")
        idx["engine_torque"] = outputs.add("engine_torque", "N m", -1.0e4, 1.0e4, 0.0, "engine torque on the crank")
    if pt.converter is not None:
        idx["impeller_torque"] = outputs.add("impeller_torque", "N m", -1.0e4, 1.0e4, 0.0,
                                             "torque the converter takes from the impeller")
        idx["turbine_torque"] = outputs.add("turbine_torque", "N m", -1.0e4, 1.0e4, 0.0,
                                            "torque the converter gives the turbine (transmission input)")
        idx["speed_ratio"] = outputs.add("speed_ratio", "-", -100.0, 100.0, 0.0,
                                         "converter speed ratio w_turbine / w_impeller (0 with the impeller at rest)")
    if pt.vehicle is not None:
        idx["grade_percent"] = inputs.add("grade_percent", "%", -50.0, 50.0, 0.0,
                                          "road grade, positive uphill (100 tan of the slope angle)")
        if pt.vehicle.drawbar:
            idx["drawbar_force"] = inputs.add("drawbar_force", "N", -2.0e5, 2.0e5, 0.0,
                                              "drawbar pull of the implement, positive resists forward motion")
        idx["vehicle_speed"] = outputs.add("vehicle_speed", "m/s", -100.0, 100.0, 0.0, "vehicle speed, forward positive")
        idx["aero_force"] = outputs.add("aero_force", "N", -1.0e5, 1.0e5, 0.0, "aerodynamic drag force")
        idx["grade_force"] = outputs.add("grade_force", "N", -1.0e5, 1.0e5, 0.0, "grade force, positive resists")
    if pt.driver is not None:
        idx["target_speed"] = inputs.add("target_speed", "m/s", -100.0, 100.0, 0.0, "the driver's target speed")
        idx["driver_on"] = inputs.add("driver_on", "-", 0, 1, 0, "1: the driver commands pedal and brake "
                                      "(the pedal and p_brake inputs are then ignored)", integer=True)
        idx["driver_pedal"] = outputs.add("driver_pedal", "-", 0.0, 1.0, 0.0, "the driver's pedal (0 while off)")
        idx["driver_brake"] = outputs.add("driver_brake", "bar", 0.0, 1.0e3, 0.0,
                                          "the driver's brake pressure (0 while off)")
    if pt.pto is not None:
        idx["pto_load"] = inputs.add("pto_load", "-", 0.0, 1.0, 0.0,
                                     "PTO implement load, 0 (disengaged) .. 1 (its full-load torque curve)")
        idx["pto_torque"] = outputs.add("pto_torque", "N m", -1.0e4, 1.0e4, 0.0,
                                        "torque the PTO load takes from the crank")
    return idx


def law_tables(pt: Powertrain, T: np.ndarray, coordinates: tuple[int, ...], n_in: int,
               ports: dict[str, int]) -> tuple[list[int], list[float]]:
    """The law's int and float blocks (layout: the LI_* / LF_* slots of :mod:`.law`)."""
    ints = [0] * W.LI_LEN
    floats = [0.0] * W.N_LF_SCALARS
    n = T.shape[1]
    members = (pt.engine_member, pt.turbine_member, pt.output_member)
    for k, m in enumerate(members):
        ints[W.LI_COORD + k] = coordinates.index(m) if m in coordinates else -1
    for m in members:
        floats.extend(float(v) for v in T[m])
    ints[W.LI_N_IN] = n_in
    ints[W.LI_IN_PEDAL] = ports.get("pedal", 0)
    ints[W.LI_IN_LIMIT] = ports.get("torque_limit", 0)
    ints[W.LI_IN_GRADE] = ports.get("grade_percent", 0)
    ints[W.LI_IN_DRAWBAR] = ports.get("drawbar_force", -1)
    # -1 without a driver: only the driver reads them (when it exists), and the law's finite-input check skips
    # -1, where 0 would have it probe another input (p_A on the 8HP car) as the driver's
    ints[W.LI_IN_TARGET] = ports.get("target_speed", -1)
    ints[W.LI_IN_DRIVER_ON] = ports.get("driver_on", -1)
    ints[W.LI_BRAKE_ROW] = pt.brake_row
    ints[W.LI_IN_PTO] = ports.get("pto_load", -1)

    def table(k, xs, ys, cubic=False):
        ints[W.LI_TAB + k] = len(floats)
        ints[W.LI_TAB_N + k] = len(xs)
        floats.extend(float(x) for x in xs)
        floats.extend(float(y) for y in ys)
        if cubic:
            floats.extend(monotone_slopes(xs, ys))

    e, c, v = pt.engine, pt.converter, pt.vehicle
    if e is not None:
        ints[W.LI_ENGINE] = 1
        floats[W.LF_IDLE], floats[W.LF_KP], floats[W.LF_KI] = e.idle_speed, e.governor_kp, e.governor_ki
        floats[W.LF_REV], floats[W.LF_REV_BAND], floats[W.LF_INT_T] = e.rev_limit, e.rev_band, e.intervention_time
        table(W.TAB_FULL, *zip(*e.full_load))
        table(W.TAB_DRAG, *zip(*e.drag))
    if c is not None:
        ints[W.LI_CONVERTER] = 1
        sr, cap, tr = c.capacity_table()
        table(W.TAB_K, sr, cap, cubic=True)
        table(W.TAB_TR, sr, tr, cubic=True)
    if v is not None:
        ints[W.LI_VEHICLE] = 1
        floats[W.LF_AERO] = 0.5 * v.air_density * v.drag_area
        floats[W.LF_RFD] = v.radius_per_ratio
        floats[W.LF_MG] = v.mass * GRAVITY
        floats[W.LF_SIGN] = pt.output_sign
        floats[W.LF_ROLL] = v.rolling_coefficient * v.mass * GRAVITY
    if pt.driver is not None:
        ints[W.LI_DRIVER] = 1
        dr = pt.driver
        floats[W.LF_DRV_KP], floats[W.LF_DRV_KI] = dr.kp, dr.ki
        floats[W.LF_DRV_FULL], floats[W.LF_DRV_BRAKE] = dr.full_pedal_force, dr.brake_bar
    if pt.pto is not None:
        ints[W.LI_PTO] = 1
        xs, ys = pt.pto.crank_table()
        ints[W.LI_PTO_TAB], ints[W.LI_PTO_N] = len(floats), len(xs)
        floats.extend(xs)
        floats.extend(ys)
    return ints, floats


def describe(pt: Powertrain, names: list[str]) -> dict:
    """What ``describe`` shows of the components."""
    out = {}
    if pt.engine is not None:
        e = pt.engine
        out["engine"] = dict(member=names[pt.engine_member], idle_rpm=round(e.idle_speed / RPM, 1),
                             rev_limit_rpm=round(e.rev_limit / RPM, 1), max_torque_N_m=e.max_torque,
                             inputs=["pedal", "torque_limit"], outputs=["engine_torque"])
    if pt.converter is not None:
        c = pt.converter
        out["torque_converter"] = dict(impeller=names[pt.engine_member], turbine=names[pt.turbine_member],
                                       stall_K_rpm_per_sqrt_N_m=round(c.capacity_factor[0] / RPM, 2),
                                       stall_torque_ratio=c.torque_ratio[0], lockup_element=LOCKUP,
                                       inputs=[f"p_{LOCKUP}"],
                                       outputs=["impeller_torque", "turbine_torque", "speed_ratio"])
    if pt.vehicle is not None:
        v = pt.vehicle
        out["vehicle"] = dict(member=names[pt.output_member], mass_kg=v.mass, wheel_radius_m=v.wheel_radius,
                              final_drive=v.final_drive, drag_area_m2=v.drag_area,
                              rolling_coefficient=v.rolling_coefficient,
                              reflected_inertia_kg_m2=round(v.reflected_inertia, 4),
                              elements=[BRAKE] + ([ROLLING] if v.rolling_coefficient > 0 else []),
                              inputs=["grade_percent", f"p_{BRAKE}"] + (["drawbar_force"] if v.drawbar else []),
                              outputs=["vehicle_speed", "aero_force", "grade_force"])
    if pt.pto is not None:
        out["pto"] = dict(member=names[pt.engine_member], ratio=pt.pto.ratio,
                          full_load_kW=round(max(w * t for w, t in pt.pto.load) / 1e3, 2),
                          inputs=["pto_load"], outputs=["pto_torque"])
    if pt.driver is not None:
        out["driver"] = dict(kp=pt.driver.kp, ki=pt.driver.ki, full_pedal_force_N=pt.driver.full_pedal_force,
                             inputs=["target_speed", "driver_on"], outputs=["driver_pedal", "driver_brake"])
    return out
