"""The engine component: idle governor, torque intervention, rev limiter (docs/powertrain.md)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from plant_models.powertrain.components import work_accounts
from plant_models.powertrain.components import RPM
from plant_models.registry import load_plant

IDLE_RPM, KP, KI = 750.0, 3.0, 30.0
ENGINE = f'''
[engine]
inertia_kg_m2 = 0.15
idle_speed_rpm = {IDLE_RPM}
max_speed_rpm = 7000.0
rev_limiter_band_rpm = 150.0
governor_kp_N_m_s_per_rad = {KP}
governor_ki_N_m_per_rad = {KI}
intervention_time_s = 0.05
full_load_speed_rpm = [600.0, 1000.0, 1200.0, 5000.0, 5800.0, 7000.0]
full_load_torque_N_m = [150.0, 280.0, 400.0, 400.0, 370.0, 250.0]
drag_speed_rpm = [0.0, 800.0, 2000.0, 4000.0, 7000.0]
drag_torque_N_m = [-10.0, -15.0, -22.0, -35.0, -58.0]
'''


def engine_config(tmp_path):
    """An engine on the input member of a one-clutch box, a load torque on the input."""
    text = f'''
plant = "transmission"
name = "engine on a one-clutch box"
[[member]]
name = "input"
inertia_kg_m2 = 0.05
[[member]]
name = "output"
inertia_kg_m2 = 1.0
[clutch]
piston_area_m2 = 0.01
return_spring_N = 1000.0
friction_static = 0.13
friction_kinetic = 0.11
surfaces = 8
mean_radius_m = 0.08
pressure_lag_s = 0.0
[[element]]
name = "C"
kind = "clutch"
members = ["input", "output"]
[[torque]]
name = "load"
member = "input"
resists = true
min = -1000.0
max = 1000.0
[input]
member = "input"
[output]
member = "output"
[gears]
1 = ["C"]
[initial]
speeds_rad_s = {{ input = {IDLE_RPM * RPM}, output = 0.0 }}
{ENGINE}
'''
    p = tmp_path / "engine.toml"
    p.write_text(text)
    return str(p)


def run(plant, seconds, dt=1e-3, record=None):
    out = []
    for _ in range(int(round(seconds / dt))):
        plant.step(dt)
        if record:
            out.append(plant.output_dict()[record])
    return np.array(out)


def test_idle_governor_holds_idle_under_a_load_step(tmp_path):
    """PI governor: no steady-state error, and the dip of a load step d that the linear closed loop
    J e'' + c e' + Ki e = d' gives, e_max = d / (J w_d) exp(-zeta w_n t_p) sin(w_d t_p), with c = Kp minus the
    slope of the drag curve at idle; back within 0.5 rpm of idle 2 s after the step."""
    plant = load_plant(engine_config(tmp_path))
    plant.reset({"p_C": 0.0, "load": 0.0, "pedal": 0.0})
    idle = IDLE_RPM * RPM
    run(plant, 3.0)
    assert plant.output_dict()["w_input"] == pytest.approx(idle, abs=0.01 * RPM)
    # the engine torque is net of its own friction: the governor makes up the motoring drag, nothing more
    assert plant.output_dict()["engine_torque"] == pytest.approx(0.0, abs=1e-6)
    plant.set_input("load", 40.0)
    w = run(plant, 2.0, record="w_input")
    J, d = 0.2, 40.0
    c = KP + 5.0 / (800.0 * RPM)  # the drag falls from -10 to -15 N m between 0 and 800 rpm
    wn = math.sqrt(KI / J)
    zeta = c / (2.0 * math.sqrt(J * KI))
    wd = wn * math.sqrt(1.0 - zeta ** 2)
    tp = math.atan(math.sqrt(1.0 - zeta ** 2) / zeta) / wd
    dip = d / (J * wd) * math.exp(-zeta * wn * tp) * math.sin(wd * tp)
    assert idle - w.min() == pytest.approx(dip, rel=0.01)
    assert (np.argmin(w) + 1) * 1e-3 == pytest.approx(tp, abs=2e-3)
    assert abs(w[-1] - idle) < 0.5 * RPM
    assert plant.output_dict()["engine_torque"] == pytest.approx(40.0, abs=0.5)


def test_torque_intervention_follows_its_first_order_response(tmp_path):
    """Full pedal at 3000 rpm, held there by the load: the limit stepped to 150 N m brings the engine torque
    down as 150 + (400 - 150) exp(-t / 0.05)."""
    plant = load_plant(engine_config(tmp_path))
    plant.reset({"p_C": 0.0, "load": 400.0, "pedal": 1.0})
    plant.core.omega[0] = 3000.0 * RPM
    plant.start()
    assert plant.output_dict()["engine_torque"] == pytest.approx(400.0, rel=1e-12)
    plant.set_input("torque_limit", 150.0)
    plant.set_input("load", 150.0)
    dt = 1e-3
    for k in range(1, 201):
        plant.step(dt)
        expect = 150.0 + 250.0 * math.exp(-k * dt / 0.05)
        assert plant.output_dict()["engine_torque"] == pytest.approx(expect, rel=1e-9)


def test_rev_limiter_cuts_fuel_within_its_band(tmp_path):
    plant = load_plant(engine_config(tmp_path))
    plant.reset({"p_C": 0.0, "load": 0.0, "pedal": 1.0})
    w = run(plant, 3.0, record="w_input")
    assert w.max() < 7000.0 * RPM
    assert w[-1] > (7000.0 - 150.0) * RPM
    c = plant.core
    # the engine's work went into the kinetic energy (clutch open, no drag): balance closed
    ke = c.kinetic_energy()
    ke0 = 0.5 * 0.2 * (IDLE_RPM * RPM) ** 2
    assert ke - ke0 == pytest.approx(float(np.sum(c.work) + c.law_work[0]), rel=1e-9)
    assert c.law_work[0] == pytest.approx(work_accounts(plant.params.powertrain, c.law_z)["work_engine"], rel=1e-12)
