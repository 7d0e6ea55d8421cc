"""Reading a Powershift config (``plant = "powershift"``, configs/powershift.toml) into :class:`PowershiftParams`."""

from __future__ import annotations

from ..config import ConfigReader
from ..plants.powershift import CLUTCH_NAMES, N_AXLES, N_CLUTCH, PowershiftParams
from .common import read_settings, read_wet_clutch
from .hydraulics import read_clutch_hydraulics


def read_powershift(cfg: ConfigReader) -> PowershiftParams:
    ax = cfg.sub("axles")
    inertia = tuple(ax.numbers("inertia_kg_m2", N_AXLES, positive=True))
    drag = tuple(ax.numbers("drag_N_m_s_per_rad", N_AXLES, nonnegative=True))
    ax.reject_unknown()
    R = _gear_radii(cfg.sub("gears"))
    clutches, sides = _clutches(cfg)
    # [hydraulics] (docs/powertrain.md): default on every clutch that has a pressure (not a kinematic one)
    clutches, hydraulics = read_clutch_hydraulics(cfg, CLUTCH_NAMES, list(clutches),
                                                  [c.model != "kinematic" for c in clutches], "a clutch")
    ini = cfg.sub("initial")
    w0 = ini.number("engine_speed_rad_s")
    eng = ini.raw("engaged", [])
    if not isinstance(eng, list) or not all(isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= N_CLUTCH
                                            for v in eng):
        raise ini.error("engaged", f"must be a list of clutch numbers 1..{N_CLUTCH}, got {eng!r}")
    ini.reject_unknown()
    settings = read_settings(cfg)
    return PowershiftParams(inertia, drag, R, tuple(clutches), sides, w0, tuple(v - 1 for v in eng), settings,
                            hydraulics)


def _gear_radii(gr: ConfigReader) -> tuple[tuple[float, ...], ...]:
    """The ``[gears]`` table: R in units of ``radius_unit_m``, each row coupling exactly two axles; m."""
    unit = gr.number("radius_unit_m", positive=True)
    rows = gr.raw("R")
    if not isinstance(rows, list) or len(rows) != N_CLUTCH:
        raise gr.error("R", f"must be a list of {N_CLUTCH} rows of {N_AXLES} numbers")
    R = []
    for i, row in enumerate(rows):
        if not isinstance(row, list) or len(row) != N_AXLES or not all(
                isinstance(v, (int, float)) and not isinstance(v, bool) for v in row):
            raise gr.error(f"R[{i}]", f"must be a list of {N_AXLES} numbers")
        nz = [k for k, v in enumerate(row) if v != 0]
        if len(nz) != 2:
            raise gr.error(f"R[{i}]", f"each row couples exactly two axles (two non-zero radii), got {row}")
        R.append(tuple(float(v) * unit for v in row))
    gr.reject_unknown()
    return tuple(R)


def _clutches(cfg: ConfigReader):
    """``[clutch]`` holds the common data; ``[clutch.cN]`` tables or a ``clutches`` list override single values."""
    base = cfg.sub("clutch")
    per = cfg.raw("clutches", [])
    if not isinstance(per, list) or (per and len(per) != N_CLUTCH):
        raise cfg.error("clutches", f"optional per-clutch overrides: a list of {N_CLUTCH} tables")
    clutches = []
    sides = []
    for i in range(N_CLUTCH):
        # overrides of single values for clutch i: a [clutch.cN] sub-table, or entry i of the list
        over = None
        if base.has(f"c{i + 1}"):
            if per:
                raise base.error(f"c{i + 1}", "give per-clutch overrides either as [clutch.cN] tables "
                                 "or as the clutches list, not both")
            over = base.sub(f"c{i + 1}")
        elif per:
            over = ConfigReader(per[i], cfg.source, f"clutches[{i}]")

        c = read_wet_clutch(base, over, speed_unit="m_s", viscous_unit="N_s_per_m")
        side_src = over if over is not None and over.has("side") else base
        sides.append(side_src.string("side", "b", choices=("a", "b")))
        if over is not None:
            over.reject_unknown()
        clutches.append(c)
    base.reject_unknown()
    return tuple(clutches), tuple(sides)
