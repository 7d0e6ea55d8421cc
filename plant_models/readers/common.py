"""What several plant configs share: the ``[solver]`` table and the wet clutch tables."""

from __future__ import annotations

from dataclasses import replace

from ..config import ConfigReader
from ..core.api import Settings
from ..clutch import WetClutch


def read_settings(cfg: ConfigReader) -> Settings:
    """The optional ``[solver]`` table: numerical settings of the friction core."""
    if not cfg.has("solver"):
        return Settings()
    sv = cfg.sub("solver")
    d = Settings()
    s = Settings(
        event_tol=sv.number("event_tol", d.event_tol, positive=True),
        max_event_substeps=sv.integer("max_event_substeps", d.max_event_substeps, lo=0),
        max_solver_iter=sv.integer("max_solver_iter", d.max_solver_iter, lo=0),
        max_locate_iter=sv.integer("max_locate_iter", d.max_locate_iter, lo=1),
    )
    sv.reject_unknown()
    return s


def read_wet_clutch(base: ConfigReader, over: ConfigReader | None, *, speed_unit: str, viscous_unit: str) -> WetClutch:
    """Read one clutch from the common ``[clutch]`` table and its optional override table.

    A key in ``over`` replaces the same key of ``base``; errors name the table
    the value came from.  ``speed_unit`` / ``viscous_unit`` are the key
    suffixes of the speed-dependent terms (e.g. ``"m_s"`` and ``"N_s_per_m"``).
    Unknown keys in ``over`` are rejected here; the caller rejects those of
    ``base`` once every clutch was read.
    """

    def get(name, kind="number", **kw):
        src = over if over is not None and over.has(name) else base
        return getattr(src, kind)(name, **kw)

    c = WetClutch(
        piston_area_m2=get("piston_area_m2", positive=True),
        return_spring_N=get("return_spring_N", nonnegative=True),
        friction_static=get("friction_static", positive=True),
        friction_kinetic=get("friction_kinetic", nonnegative=True),
        surfaces=get("surfaces", "integer", lo=1),
        mean_radius_m=get("mean_radius_m", positive=True),
        pressure_lag_s=get("pressure_lag_s", nonnegative=True),
        stribeck_velocity=get(f"stribeck_velocity_{speed_unit}", default=0.0, nonnegative=True),
        stribeck_exponent=get("stribeck_exponent", default=2.0, positive=True),
        viscous=get(f"viscous_{viscous_unit}", default=0.0, nonnegative=True),
        model=get("model", "string", default="friction", choices=("friction", "kinematic")),
    )
    if c.model == "kinematic":
        kiss = c.kiss_point_bar
        c = replace(c, shift_time_s=get("shift_time_s", positive=True),
                    kinematic_capacity_N_m=get("kinematic_capacity_N_m", default=1.0e6, positive=True),
                    engage_pressure_bar=get("engage_pressure_bar", default=kiss if kiss > 0 else 1.0, positive=True))
    # (the kinematic keys on a friction clutch are left unread: reject_unknown names them)
    if c.friction_kinetic > c.friction_static:
        src = over if over is not None and over.has("friction_kinetic") else base
        raise src.error("friction_kinetic", f"must not exceed friction_static ({c.friction_static})")
    return c
