"""Reading a kinematic-clutch config (``plant = "kinematic"``, configs/kinematic.toml) into :class:`KinematicParams`."""

from __future__ import annotations

from ..config import ConfigReader
from ..plants.kinematic import KinematicParams
from .common import read_settings


def read_kinematic(cfg: ConfigReader) -> KinematicParams:
    sh = cfg.sub("shafts")
    inertia = tuple(sh.numbers("inertia_kg_m2", 2, positive=True))
    drag = tuple(sh.numbers("drag_N_m_s_per_rad", 2, [0.0, 0.0], nonnegative=True))
    sh.reject_unknown()
    cl = cfg.sub("clutch")
    shift = cl.number("shift_time_s", positive=True)
    cap = cl.number("capacity_N_m", 1.0e4, positive=True)
    cl.reject_unknown()
    ini = cfg.sub("initial", required=False)
    w0 = tuple(ini.numbers("speeds_rad_s", 2, [0.0, 0.0]))
    engaged = ini.boolean("engaged", False)
    ini.reject_unknown()
    if engaged and w0[0] != w0[1]:
        raise ini.error("engaged", f"an engaged clutch needs equal initial speeds, got {list(w0)}")
    return KinematicParams(inertia, drag, shift, cap, w0, engaged, read_settings(cfg))
