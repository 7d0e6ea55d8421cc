"""Reading a DCT config (``plant = "dct"``, configs/dct.toml) into :class:`DctParams`."""

from __future__ import annotations

from ..config import ConfigReader
from ..clutch import WetClutch
from ..plants.dct import CLUTCH_NAMES, MAX_GEARS, DctParams
from .common import read_settings, read_wet_clutch
from .hydraulics import read_clutch_hydraulics


def read_dct(cfg: ConfigReader) -> DctParams:
    eng = cfg.sub("engine")
    engine_inertia = eng.number("inertia_kg_m2", positive=True)
    engine_drag = eng.number("drag_N_m_s_per_rad", 0.0, nonnegative=True)
    eng.reject_unknown()
    ins = cfg.sub("input_shafts")
    odd_inertia = ins.number("odd_inertia_kg_m2", positive=True)
    even_inertia = ins.number("even_inertia_kg_m2", positive=True)
    input_drag = ins.number("drag_N_m_s_per_rad", 0.0, nonnegative=True)
    ins.reject_unknown()
    gr = cfg.sub("gears")
    ratios = gr.numbers("ratios", positive=True)
    if not 2 <= len(ratios) <= MAX_GEARS:
        raise gr.error("ratios", f"must list 2 to {MAX_GEARS} forward gear ratios (gear 1 first), "
                       f"got {len(ratios)}")
    for k in range(1, len(ratios)):
        if not ratios[k] < ratios[k - 1]:
            raise gr.error(f"ratios[{k}]", f"gear {k + 1} must have a smaller ratio than gear {k} "
                           f"({ratios[k]} >= {ratios[k - 1]})")
    final = gr.number("final_drive", positive=True)
    gr.reject_unknown()
    out = cfg.sub("output")
    output_inertia = out.number("inertia_kg_m2", positive=True)
    output_drag = out.number("drag_N_m_s_per_rad", 0.0, nonnegative=True)
    out.reject_unknown()
    veh = cfg.sub("vehicle")
    mass = veh.number("mass_kg", positive=True)
    r_w = veh.number("wheel_radius_m", positive=True)
    j_w = veh.number("wheel_inertia_kg_m2", 0.0, nonnegative=True)
    b_v = veh.number("drag_N_m_s_per_rad", 0.0, nonnegative=True)
    veh.reject_unknown()
    ds = cfg.sub("driveshaft")
    k_ds = ds.number("stiffness_N_m_per_rad", positive=True)
    c_ds = ds.number("damping_N_m_s_per_rad", 0.0, nonnegative=True)
    ds.reject_unknown()
    clutches = _clutches(cfg)
    # [hydraulics] (docs/powertrain.md): default on both clutches (not on a kinematic one)
    clutches, hydraulics = read_clutch_hydraulics(cfg, CLUTCH_NAMES, list(clutches),
                                                  [c.model != "kinematic" for c in clutches], "a clutch")
    sy = cfg.sub("synchronizer")
    cone_raw = sy.raw("cone_torque_N_m")
    if isinstance(cone_raw, list):
        cone = sy.numbers("cone_torque_N_m", len(ratios), positive=True)
    else:
        cone = [sy.number("cone_torque_N_m", positive=True)] * len(ratios)
    cone_ratio = sy.number("kinetic_to_static", 1.0, positive=True, hi=1.0)
    dog = sy.number("dog_capacity_N_m", positive=True)
    sy.reject_unknown()
    ini = cfg.sub("initial")
    v0 = ini.number("vehicle_speed_km_h", 0.0, lo=-50.0, hi=300.0)
    w0 = ini.number("engine_speed_rad_s", lo=0.0, hi=1000.0)
    c0 = ini.string("clutch_engaged", "none", choices=("c1", "c2", "none"))
    ini.reject_unknown()
    settings = read_settings(cfg)
    return DctParams(engine_inertia, engine_drag, odd_inertia, even_inertia, input_drag, tuple(ratios), final,
                     output_inertia, output_drag, mass, r_w, j_w, b_v, k_ds, c_ds, tuple(clutches), tuple(cone),
                     cone_ratio, dog, v0, w0, c0, settings, hydraulics)


def _clutches(cfg: ConfigReader) -> tuple[WetClutch, WetClutch]:
    """[clutch] holds the common data; optional [clutch.c1] / [clutch.c2] override single values."""
    base = cfg.sub("clutch")
    out = []
    for over in (base.sub("c1", required=False), base.sub("c2", required=False)):
        out.append(read_wet_clutch(base, over, speed_unit="rad_s", viscous_unit="N_m_s_per_rad"))
        over.reject_unknown()
    base.reject_unknown()
    return out[0], out[1]
