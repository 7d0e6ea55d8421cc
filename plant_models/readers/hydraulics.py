"""Reading a transmission's ``[hydraulics]`` table (:mod:`plant_models.powertrain.hydraulics`).

::

    [hydraulics]
    elements = ["A", "B"]          # default: every clutch and brake of the gear set (not the lock-up, not the
                                   # service brake)
    dead_time_steps = 5
    fill_volume_cm3 = 12.0
    fill_flow_l_per_min = 3.0
    drain_flow_l_per_min = 6.0
    rest_pressure_bar = 0.5        # return spring preload / piston area; the kiss point is the clutch's
    time_constant_s = 0.02         # chamber pressure once full (replaces the clutch's pressure_lag_s)
    valve_time_constant_s = 0.0    # > 0: a valve lag in series (second order)
    valve_current_A = [...]        # optional valve map: the commands are then currents i_<element>, A
    valve_pressure_bar = [...]
    [hydraulics.element.A]         # optional per-element values of the keys above (not the valve map)
"""

from __future__ import annotations

from dataclasses import replace

from ..clutch import BAR
from ..config import ConfigReader
from ..drivetrain import Element
from ..powertrain.components import BRAKE, LOCKUP
from ..powertrain.hydraulics import ClutchHydraulics, Hydraulics

CM3 = 1.0e-6  # m^3
L_PER_MIN = 1.0e-3 / 60.0  # m^3/s
PER_ELEMENT = ("dead_time_steps", "fill_volume_cm3", "fill_flow_l_per_min", "drain_flow_l_per_min",
               "rest_pressure_bar", "time_constant_s", "valve_time_constant_s")


def read_hydraulics(cfg: ConfigReader, elements: list[Element]) -> tuple[list[Element], Hydraulics | None]:
    """(elements with their pressure lag set to the hydraulics', Hydraulics or None)."""
    if not cfg.has("hydraulics"):
        return elements, None
    r = cfg.sub("hydraulics")
    names = [e.name for e in elements]
    if r.has("elements"):
        raw = r.raw("elements")
        if not isinstance(raw, list) or not raw or any(not isinstance(x, str) for x in raw):
            raise r.error("elements", "must be a list of element names")
        chosen = []
        for k, x in enumerate(raw):
            if x not in names or elements[names.index(x)].clutch is None or x == BRAKE:
                ok = ", ".join(n for n, e in zip(names, elements) if e.clutch is not None and n != BRAKE)
                raise r.error(f"elements[{k}]", f"must name a clutch or brake of the gear set ({ok}), got {x!r}")
            chosen.append(names.index(x))
    else:
        chosen = [k for k, e in enumerate(elements) if e.clutch is not None and e.name not in (LOCKUP, BRAKE)]
    per = r.sub("element", required=False)
    out = list(elements)
    clutches = []
    for k in chosen:
        e = elements[k]
        if e.clutch.model == "kinematic":
            raise r.error("elements", f"{e.name} is a kinematic clutch: it has no pressure to fill")
        over = per.sub(e.name) if per.has(e.name) else None
        h = _clutch(r, over, e)
        clutches.append(h)
        out[k] = replace(e, clutch=replace(e.clutch, pressure_lag_s=h.time_constant_s))
        if over is not None:
            over.reject_unknown(PER_ELEMENT)
    for name in per.data:
        if name not in {elements[k].name for k in chosen}:
            raise per.error(name, "is not an element with hydraulics")
    cur, pres = (), ()
    if r.has("valve_current_A") or r.has("valve_pressure_bar"):
        cur = tuple(r.numbers("valve_current_A", nonnegative=True))
        pres = tuple(r.numbers("valve_pressure_bar", len(cur), nonnegative=True))
        if len(cur) < 2 or any(b <= a for a, b in zip(cur, cur[1:])):
            raise r.error("valve_current_A", "must list at least two increasing currents")
    r.reject_unknown(PER_ELEMENT + ("elements", "element", "valve_current_A", "valve_pressure_bar"))
    return out, Hydraulics(tuple(chosen), tuple(clutches), cur, pres)


def _clutch(base: ConfigReader, over: ConfigReader | None, e: Element) -> ClutchHydraulics:
    def get(name, kind="number", **kw):
        src = over if over is not None and over.has(name) else base
        return getattr(src, kind)(name, **kw)

    kiss = e.clutch.return_spring_N / e.clutch.piston_area_m2
    rest = get("rest_pressure_bar", nonnegative=True) * BAR
    if rest >= kiss:
        src = over if over is not None and over.has("rest_pressure_bar") else base
        raise src.error("rest_pressure_bar", f"must lie below {e.name}'s kiss point ({kiss / BAR:g} bar)")
    return ClutchHydraulics(
        dead_time_steps=get("dead_time_steps", "integer", default=0, lo=0, hi=10000),
        fill_volume_m3=get("fill_volume_cm3", positive=True) * CM3,
        fill_flow_m3_s=get("fill_flow_l_per_min", positive=True) * L_PER_MIN,
        drain_flow_m3_s=get("drain_flow_l_per_min", positive=True) * L_PER_MIN,
        rest_pressure_Pa=rest, kiss_pressure_Pa=kiss,
        time_constant_s=get("time_constant_s", positive=True),
        valve_time_constant_s=get("valve_time_constant_s", default=0.0, nonnegative=True))
