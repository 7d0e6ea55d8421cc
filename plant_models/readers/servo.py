"""Reading a servo config (``plant = "servo"``, configs/servo.toml) into :class:`ServoParams`."""

from __future__ import annotations

import math

from ..config import ConfigReader
from ..plants.servo import DEG, ServoParams


def read_servo(cfg: ConfigReader) -> ServoParams:
    c = cfg.sub("controller")
    amp = c.number("gain_A_per_rad", positive=True)
    imax = c.number("current_limit_A", positive=True)
    c.reject_unknown()
    v = cfg.sub("servovalve")
    p = dict(
        first_stage_freq_rad_s=2.0 * math.pi * v.number("first_stage_frequency_Hz", positive=True),
        first_stage_damping=v.number("first_stage_damping", positive=True),
        flapper_gain_m_per_A=v.number("flapper_gain_m_per_A", positive=True),
        flapper_travel_m=v.number("flapper_travel_m", positive=True),
        spool_velocity_gain_per_s=v.number("spool_velocity_gain_per_s", positive=True),
        spool_per_current_m_per_A=v.number("spool_per_current_m_per_A", positive=True),
        spool_travel_m=v.number("spool_travel_m", positive=True),
        pressure_gain_Pa_per_m=v.number("pressure_gain_Pa_per_m", positive=True),
        pressure_flow_Pa_s_per_m3=v.number("pressure_flow_coefficient_Pa_s_per_m3", positive=True),
        leakage_m3_per_s_Pa=v.number("leakage_m3_per_s_per_Pa", nonnegative=True),
    )
    v.reject_unknown()
    m = cfg.sub("motor")
    dis = m.number("displacement_m3_per_rad", positive=True)
    m.reject_unknown()
    t = cfg.sub("transmission")
    tr = dict(
        inertia_kg_m2=t.number("inertia_kg_m2", positive=True),
        viscous_N_m_s_per_rad=t.number("viscous_N_m_s_per_rad", nonnegative=True),
        friction_load_independent_N_m=t.number("friction_load_independent_N_m", nonnegative=True),
        efficiency_opposing=t.number("efficiency_opposing"),
        efficiency_aiding=t.number("efficiency_aiding"),
        static_to_dynamic=t.number("static_to_dynamic_ratio"),
        travel_min_rad=t.number("travel_min_deg") * DEG,
        travel_max_rad=t.number("travel_max_deg") * DEG,
    )
    n = cfg.sub("numerics", required=False)
    h = n.number("internal_step_s", 1.0e-5, positive=True)
    n.reject_unknown()
    s = cfg.sub("supply", required=False)
    psr = s.number("nominal_MPa", 26.0, positive=True)
    s.reject_unknown()
    params = ServoParams(amp_gain_A_per_rad=amp, current_max_A=imax, displacement_m3_per_rad=dis,
                         internal_step_s=h, supply_nominal_MPa=psr, **p, **tr)

    def where(key, problem):
        sub = n if key == "internal_step_s" else t
        return sub.error(key, problem)

    params.validate(where)
    t.reject_unknown()
    return params
