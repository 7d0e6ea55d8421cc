"""Reading the ``[hydraulics]`` table (:mod:`plant_models.powertrain.hydraulics`) of a transmission
description, a Powershift (``plant = "powershift"``, clutches ``c1`` .. ``c8``) or a DCT plant
(``plant = "dct"``, clutches ``c1``, ``c2``).

::

    [hydraulics]
    elements = ["A", "B"]          # default: every clutch and brake of the gear set (not the lock-up, not the
                                   # service brake); the Powershift's and the DCT's: all their clutches
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

from ..clutch import BAR, WetClutch
from ..config import ConfigReader
from ..drivetrain import Element
from ..powertrain.components import BRAKE, LOCKUP
from ..powertrain.hydraulics import ClutchHydraulics, Hydraulics

CM3 = 1.0e-6  # m^3
L_PER_MIN = 1.0e-3 / 60.0  # m^3/s
PER_ELEMENT = ("dead_time_steps", "fill_volume_cm3", "fill_flow_l_per_min", "drain_flow_l_per_min",
               "rest_pressure_bar", "time_constant_s", "valve_time_constant_s")


def read_hydraulics(cfg: ConfigReader, elements: list[Element]) -> tuple[list[Element], Hydraulics | None]:
    """A transmission's: (elements with their pressure lag set to the hydraulics', Hydraulics or None)."""
    names = [e.name for e in elements]
    default = [e.clutch is not None and e.name not in (LOCKUP, BRAKE) for e in elements]
    clutches, h = read_clutch_hydraulics(cfg, names, [e.clutch if e.name != BRAKE else None for e in elements],
                                         default, "a clutch or brake of the gear set")
    if h is None:
        return elements, None
    return [replace(e, clutch=c) if k in h.elements else e for k, (e, c) in enumerate(zip(elements, clutches))], h


def read_clutch_hydraulics(cfg: ConfigReader, names: list[str], clutches: list[WetClutch | None],
                           default: list[bool], what: str) -> tuple[list[WetClutch | None], Hydraulics | None]:
    """The ``[hydraulics]`` table of any plant whose rows ``names`` are wet clutches (None: a row that cannot
    carry hydraulics): (the clutches with their pressure lag set to the hydraulics', Hydraulics or None).

    ``default``: the rows that get hydraulics when ``elements`` is not given; ``what`` names the rows that
    may in an error message.  The elements' indices are the rows'.
    """
    if not cfg.has("hydraulics"):
        return list(clutches), None
    r = cfg.sub("hydraulics")
    if r.has("elements"):
        raw = r.raw("elements")
        if not isinstance(raw, list) or not raw or any(not isinstance(x, str) for x in raw):
            raise r.error("elements", "must be a list of element names")
        chosen = []
        for k, x in enumerate(raw):
            if x not in names or clutches[names.index(x)] is None:
                ok = ", ".join(n for n, c in zip(names, clutches) if c is not None)
                raise r.error(f"elements[{k}]", f"must name {what} ({ok}), got {x!r}")
            chosen.append(names.index(x))
    else:
        chosen = [k for k, ok in enumerate(default) if ok]
    per = r.sub("element", required=False)
    out = list(clutches)
    hyd = []
    for k in chosen:
        c = clutches[k]
        if c.model == "kinematic":
            raise r.error("elements", f"{names[k]} is a kinematic clutch: it has no pressure to fill")
        over = per.sub(names[k]) if per.has(names[k]) else None
        h = _clutch(r, over, names[k], c)
        hyd.append(h)
        out[k] = replace(c, pressure_lag_s=h.time_constant_s)
        if over is not None:
            over.reject_unknown(PER_ELEMENT)
    for name in per.data:
        if name not in {names[k] for k in chosen}:
            raise per.error(name, "is not an element with hydraulics")
    cur, pres = (), ()
    if r.has("valve_current_A") or r.has("valve_pressure_bar"):
        cur = tuple(r.numbers("valve_current_A", nonnegative=True))
        pres = tuple(r.numbers("valve_pressure_bar", len(cur), nonnegative=True))
        if len(cur) < 2 or any(b <= a for a, b in zip(cur, cur[1:])):
            raise r.error("valve_current_A", "must list at least two increasing currents")
    r.reject_unknown(PER_ELEMENT + ("elements", "element", "valve_current_A", "valve_pressure_bar"))
    return out, Hydraulics(tuple(chosen), tuple(hyd), cur, pres)


def _clutch(base: ConfigReader, over: ConfigReader | None, name: str, clutch: WetClutch) -> ClutchHydraulics:
    def get(name, kind="number", **kw):
        src = over if over is not None and over.has(name) else base
        return getattr(src, kind)(name, **kw)

    kiss = clutch.return_spring_N / clutch.piston_area_m2
    rest = get("rest_pressure_bar", nonnegative=True) * BAR
    if rest >= kiss:
        src = over if over is not None and over.has("rest_pressure_bar") else base
        raise src.error("rest_pressure_bar", f"must lie below {name}'s kiss point ({kiss / BAR:g} bar)")
    return ClutchHydraulics(
        dead_time_steps=get("dead_time_steps", "integer", default=0, lo=0, hi=10000),
        fill_volume_m3=get("fill_volume_cm3", positive=True) * CM3,
        fill_flow_m3_s=get("fill_flow_l_per_min", positive=True) * L_PER_MIN,
        drain_flow_m3_s=get("drain_flow_l_per_min", positive=True) * L_PER_MIN,
        rest_pressure_Pa=rest, kiss_pressure_Pa=kiss,
        time_constant_s=get("time_constant_s", positive=True),
        valve_time_constant_s=get("valve_time_constant_s", default=0.0, nonnegative=True))
