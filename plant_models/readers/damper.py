"""Reading a damper-clutch config (``plant = "damper"``, configs/damper.toml) into :class:`DamperParams`."""

from __future__ import annotations

import math

from ..config import ConfigReader
from ..plants.damper import DEG, DamperParams
from .common import read_settings


def read_damper(cfg: ConfigReader) -> DamperParams:
    sh = cfg.sub("shafts")
    inertia = tuple(sh.numbers("inertia_kg_m2", 3, positive=True))
    drag = tuple(sh.numbers("drag_N_m_s_per_rad", 3, nonnegative=True))
    sh.reject_unknown()
    cl = cfg.sub("clutch", required=False)
    cr = cl.number("static_to_kinetic_ratio", 1.0, lo=1.0)
    cl.reject_unknown()
    dp = cfg.sub("damper")
    k23 = dp.number("friction_torque_N_m", nonnegative=True)
    dr = dp.number("friction_static_to_kinetic_ratio", 1.0, lo=1.0)
    damping = dp.number("damping_N_m_s_per_rad", 0.0, nonnegative=True)
    has_k = dp.has("stiffness_N_m_per_rad")
    has_t = dp.has("characteristic_deg_N_m")
    if has_k == has_t:
        raise dp.error("stiffness_N_m_per_rad", "give exactly one of stiffness_N_m_per_rad (linear) and "
                       "characteristic_deg_N_m (piecewise linear)")
    stiffness = 0.0
    table: tuple[tuple[float, float], ...] = ()
    if has_k:
        stiffness = dp.number("stiffness_N_m_per_rad", positive=True)
    else:
        table = _characteristic(dp, "characteristic_deg_N_m")
    dp.reject_unknown()
    ini = cfg.sub("initial", required=False)
    w0 = tuple(ini.numbers("speeds_rad_s", 3, [0.0, 0.0, 0.0]))
    tw0 = ini.number("damper_twist_deg", 0.0) * DEG
    ini.reject_unknown()
    return DamperParams(inertia, drag, cr, k23, dr, stiffness, damping, table, w0, tw0,
                        read_settings(cfg))


def _characteristic(dp: ConfigReader, key: str) -> tuple[tuple[float, float], ...]:
    """A piecewise-linear damper characteristic: [twist_deg, torque_N_m] points -> (rad, N m)."""
    pts = dp.raw(key)
    if not isinstance(pts, list) or len(pts) < 2:
        raise dp.error(key, "must be a list of at least two [twist_deg, torque_N_m] points")
    out = []
    for j, pt in enumerate(pts):
        if (not isinstance(pt, list) or len(pt) != 2
                or any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in pt)
                or not all(math.isfinite(v) for v in pt)):
            raise dp.error(f"{key}[{j}]", f"must be a [twist_deg, torque_N_m] pair of finite numbers, got {pt!r}")
        if out and pt[0] * DEG <= out[-1][0]:
            raise dp.error(f"{key}[{j}]", "twist must increase strictly from point to point")
        if out and pt[1] < out[-1][1]:
            raise dp.error(f"{key}[{j}]", "torque must not decrease with twist (a spring stores energy)")
        out.append((float(pt[0]) * DEG, float(pt[1])))
    return tuple(out)
