"""Reading the powertrain tables of a transmission description: ``[engine]``, ``[torque_converter]``, ``[vehicle]``,
``[driver]``, ``[pto]``.

The components that are friction rows become elements of the description
(``lockup``: a clutch between the engine member and the transmission
input; ``brake``: a brake on the output member; ``rolling``: the rolling
resistance, a friction row to the housing of constant capacity), the
converter adds the member ``engine`` (crank, flywheel, impeller) and the
vehicle's mass is added to the output member's inertia through the wheel
radius and the final drive.  Format and sources: docs/powertrain.md.
"""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

from ..config import ConfigReader
from ..drivetrain import Element, Member
from ..clutch import BAR, WetClutch
from ..powertrain.components import (BRAKE, ENGINE_MEMBER, LOCKUP, ROLLING, RPM, Driver, Engine, Powertrain, Pto,
                                     TorqueConverter, Vehicle)
from ..powertrain.table import COMPONENTS
from .common import read_wet_clutch

BRAKE_FRICTION_STATIC = 0.45  # pad on disc; the capacity per bar is the file's, this only sets kinetic/static


MIN_IDLE_RPM = 300.0  # below it an idle speed is a unit mistake (rad/s for rpm), not an engine

def read_powertrain(cfg: ConfigReader, members: list[Member], elements: list[Element], input_member: int,
                    output_member: int, output_sign: float):
    """(members, elements, Powertrain or None) with the components of the file added."""
    if not any(cfg.has(k) for k in ("engine", "torque_converter", "vehicle")):
        return members, elements, None
    members, elements = list(members), list(elements)
    taken = {e.name for e in elements}
    engine = _engine(cfg.sub("engine")) if cfg.has("engine") else None
    engine_member = input_member
    converter = None
    if cfg.has("torque_converter"):
        r = cfg.sub("torque_converter")
        if engine is None:
            raise r.error("lockup", "a torque converter needs an [engine] (its impeller is the engine's member)")
        if ENGINE_MEMBER in {m.name for m in members}:
            raise r.error("speed_ratio", f"the converter adds the member {ENGINE_MEMBER!r}; the description has one")
        converter = _converter(r)
        engine_member = len(members)
        members.append(Member(ENGINE_MEMBER, engine.inertia, _engine_drag(cfg)))
        lock = r.sub("lockup")
        clutch = read_wet_clutch(lock, None, speed_unit="rad_s", viscous_unit="N_m_s_per_rad")
        pmax = lock.number("pressure_max_bar", 20.0, positive=True)
        lock.reject_unknown()
        _add(elements, taken, Element(LOCKUP, "torque_converter.lockup", "clutch",
                                      ((engine_member, Fraction(1)), (input_member, Fraction(-1))), 1.0, clutch, pmax),
             r, "lockup")
        r.reject_unknown()
    elif engine is not None:
        m = members[input_member]
        members[input_member] = replace(m, inertia=m.inertia + engine.inertia, drag=m.drag + _engine_drag(cfg))
    vehicle = None
    if cfg.has("vehicle"):
        r = cfg.sub("vehicle")
        vehicle = _vehicle(r)
        m = members[output_member]
        members[output_member] = replace(m, inertia=m.inertia + vehicle.reflected_inertia)
        b = r.sub("brake")
        _add(elements, taken, Element(BRAKE, "vehicle.brake", "brake", ((output_member, Fraction(1)),), 1.0,
                                      _brake(b, vehicle), b.number("pressure_max_bar", 200.0, positive=True)),
             r, "brake")
        b.reject_unknown()
        if vehicle.rolling_coefficient > 0.0:
            _add(elements, taken, Element(ROLLING, "vehicle.rolling_coefficient", "rolling",
                                          ((output_member, Fraction(1)),), 1.0, None, 0.0, vehicle.rolling_torque),
                 r, "rolling_coefficient")
        r.reject_unknown()
    driver = None
    if cfg.has("driver"):
        r = cfg.sub("driver")
        if engine is None or vehicle is None:
            raise r.error("kp_per_m_s", "a driver needs an [engine] and a [vehicle]")
        driver = Driver(kp=r.number("kp_per_m_s", nonnegative=True), ki=r.number("ki_per_m", nonnegative=True),
                        full_pedal_force=r.number("full_pedal_force_N", positive=True),
                        brake_bar=r.number("brake_bar_at_full_command", positive=True))
        r.reject_unknown()
    pto = _pto(cfg.sub("pto"), engine) if cfg.has("pto") else None
    brake_row = [e.name for e in elements].index(BRAKE) if vehicle is not None else -1
    pt = Powertrain(engine, converter, vehicle, engine_member, input_member, output_member, output_sign, driver,
                    brake_row, pto)
    members, parts = _table_parts(cfg, members, pt)
    return members, elements, replace(pt, parts=parts)


def _table_parts(cfg: ConfigReader, members: list[Member], pt: Powertrain):
    """(members, parts): the components of the table that read their own TOML table (a module's ``read``:
    ``read(reader, members, pt) -> (members, parameters)``, in the table's order)."""
    parts = []
    for module in COMPONENTS:
        if hasattr(module, "read") and cfg.has(module.KIND):
            members, params = module.read(cfg.sub(module.KIND), members, pt)
            parts.append((module.KIND, params))
    return members, tuple(parts)


def _pto(r: ConfigReader, engine: Engine | None) -> Pto:
    """``[pto]``: a power take-off on the engine's member (``ratio`` = crank speed / PTO speed, the implement's
    full-load torque at the PTO shaft over its speed, starting at 0 rpm with 0 N m)."""
    if engine is None:
        raise r.error("ratio", "a PTO needs an [engine] (it is driven from the crank)")
    load = _curve(r, "speed_rpm", "torque_N_m", RPM)
    if load[0] != (0.0, 0.0) or any(t < 0.0 for _, t in load):
        raise r.error("torque_N_m", "must start at 0 N m at 0 rpm and be nonnegative (a load)")
    pto = Pto(ratio=r.number("ratio", positive=True), load=load)
    r.reject_unknown()
    return pto


def _add(elements, taken, e: Element, r: ConfigReader, key: str) -> None:
    if e.name in taken:
        raise r.error(key, f"adds the element {e.name!r}; the description already has one of that name")
    taken.add(e.name)
    elements.append(e)


def _curve(r: ConfigReader, x: str, y: str, scale_x: float) -> tuple[tuple[float, float], ...]:
    xs = r.numbers(x, nonnegative=True)
    ys = r.numbers(y, length=len(xs))
    if len(xs) < 2 or any(b <= a for a, b in zip(xs, xs[1:])):
        raise r.error(x, "must list at least two increasing values")
    return tuple((a * scale_x, b) for a, b in zip(xs, ys))


def _engine_drag(cfg: ConfigReader) -> float:
    return cfg.sub("engine").number("drag_N_m_s_per_rad", 0.0, nonnegative=True)


def _engine(r: ConfigReader) -> Engine:
    full = _curve(r, "full_load_speed_rpm", "full_load_torque_N_m", RPM)
    drag = _curve(r, "drag_speed_rpm", "drag_torque_N_m", RPM)
    if any(t > 0.0 for _, t in drag):
        raise r.error("drag_torque_N_m", "the motoring (drag) torque is negative or zero")
    idle_rpm = r.number("idle_speed_rpm", positive=True)
    if idle_rpm < MIN_IDLE_RPM:  # a speed in rad/s written as rpm: 73.3 rad/s is 700 rpm
        raise r.error("idle_speed_rpm", f"{idle_rpm:g} rpm is below {MIN_IDLE_RPM:g} rpm, slower than any engine "
                      f"idles; if it is in rad/s, write {idle_rpm / RPM:.0f} rpm")
    idle = idle_rpm * RPM
    limit = r.number("max_speed_rpm", positive=True) * RPM
    band = r.number("rev_limiter_band_rpm", 100.0, positive=True) * RPM
    if limit - band <= idle:
        raise r.error("max_speed_rpm", "the rev limiter's band must lie above the idle speed")
    e = Engine(inertia=r.number("inertia_kg_m2", positive=True), idle_speed=idle,
               governor_kp=r.number("governor_kp_N_m_s_per_rad", nonnegative=True),
               governor_ki=r.number("governor_ki_N_m_per_rad", nonnegative=True),
               rev_limit=limit, rev_band=band,
               intervention_time=r.number("intervention_time_s", 0.0, nonnegative=True),
               full_load=full, drag=drag, max_torque=max(t for _, t in full))
    r.number("drag_N_m_s_per_rad", 0.0, nonnegative=True)
    r.reject_unknown()
    return e


def _converter(r: ConfigReader) -> TorqueConverter:
    sr = r.numbers("speed_ratio", nonnegative=True)
    if len(sr) < 2 or sr[0] != 0.0 or sr[-1] >= 1.0 or any(b <= a for a, b in zip(sr, sr[1:])):
        raise r.error("speed_ratio", "must rise from 0 to below 1 (the coupling point 1, where the converter "
                      "transmits no torque, is added)")
    k = r.numbers("capacity_factor_rpm_per_sqrt_N_m", length=len(sr), positive=True)
    tr = r.numbers("torque_ratio", length=len(sr), positive=True)
    for s, t in zip(sr, tr):
        if s * t > 1.0:
            raise r.error("torque_ratio", f"at speed ratio {s:g} the efficiency SR * TR = {s * t:g} exceeds 1")
    return TorqueConverter(tuple(sr), tuple(x * RPM for x in k), tuple(tr))


def _vehicle(r: ConfigReader) -> Vehicle:
    return Vehicle(mass=r.number("mass_kg", positive=True), wheel_radius=r.number("wheel_radius_m", positive=True),
                   final_drive=r.number("final_drive", positive=True),
                   drag_area=r.number("drag_area_m2", 0.0, nonnegative=True),
                   air_density=r.number("air_density_kg_m3", 1.2, positive=True),
                   rolling_coefficient=r.number("rolling_coefficient", 0.0, nonnegative=True),
                   wheel_inertia=r.number("wheel_inertia_kg_m2", 0.0, nonnegative=True),
                   drawbar=r.boolean("drawbar", False))


def _brake(b: ConfigReader, v: Vehicle) -> WetClutch:
    """The service brake as a friction row on the output member: its capacity per bar at the wheels
    divided by the final drive, no return spring, a first-order pressure lag."""
    per_bar = b.number("torque_per_bar_N_m", positive=True) / v.final_drive  # at the output member
    ratio = b.number("kinetic_to_static", 0.9, positive=True, hi=1.0)
    return WetClutch(piston_area_m2=per_bar / (BRAKE_FRICTION_STATIC * BAR), return_spring_N=0.0,
                     friction_static=BRAKE_FRICTION_STATIC, friction_kinetic=BRAKE_FRICTION_STATIC * ratio,
                     surfaces=1, mean_radius_m=1.0, pressure_lag_s=b.number("pressure_lag_s", 0.0, nonnegative=True),
                     stribeck_velocity=0.0, stribeck_exponent=2.0, viscous=0.0)
