"""The torque converter component: K(SR) and TR(SR) tables, coast by the symmetric rule, lock-up clutch as
an exact friction row (docs/powertrain.md)."""

from __future__ import annotations

import numpy as np
import pytest

from plant_models.core import layout as L
from plant_models.powertrain.components import RPM, work_accounts
from plant_models.registry import load_plant

from test_powertrain_engine import ENGINE

SR = [0.0, 0.2, 0.4, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95]
K_RPM = [120.0, 121.0, 123.0, 128.0, 134.0, 146.0, 160.0, 195.0, 300.0]
TR = [2.0, 1.8, 1.57, 1.35, 1.24, 1.12, 1.05, 1.0, 1.0]
CONVERTER = f'''
[torque_converter]
speed_ratio = {SR}
capacity_factor_rpm_per_sqrt_N_m = {K_RPM}
torque_ratio = {TR}
[torque_converter.lockup]
piston_area_m2 = 0.01
return_spring_N = 1000.0
friction_static = 0.13
friction_kinetic = 0.11
surfaces = 4
mean_radius_m = 0.12
pressure_lag_s = 0.0
'''


def converter_config(tmp_path, engine_rpm=2000.0):
    """Engine, converter and a brake B that can hold the turbine (the transmission input) at stall."""
    text = f'''
plant = "transmission"
name = "converter on a one-brake box"
[[member]]
name = "input"
inertia_kg_m2 = 0.06
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
name = "B"
kind = "brake"
members = ["input"]
[[element]]
name = "C"
kind = "clutch"
members = ["input", "output"]
[input]
member = "input"
[output]
member = "output"
[gears]
1 = ["C"]
[initial]
speeds_rad_s = {{ engine = {engine_rpm * RPM}, input = 0.0, output = 0.0 }}
{ENGINE}
{CONVERTER}
'''
    p = tmp_path / "converter.toml"
    p.write_text(text)
    return str(p)


def test_stall_gives_the_capacity_factor_and_torque_ratio_at_zero_speed_ratio(tmp_path):
    """Turbine held by brake B (SR = 0): impeller torque (w/K(0))^2, turbine torque TR(0) times that, and the
    brake holds exactly the turbine torque."""
    plant = load_plant(converter_config(tmp_path))
    plant.reset({"p_B": 20.0, "p_C": 0.0, "p_lockup": 0.0, "pedal": 1.0})
    k0 = K_RPM[0] * RPM
    for _ in range(300):
        y = plant.output_dict()
        assert y["w_input"] == 0.0 and y["stuck_B"] == 1.0
        w = y["w_engine"]
        assert y["speed_ratio"] == 0.0
        assert y["impeller_torque"] == pytest.approx((w / k0) ** 2, rel=1e-14)
        assert y["turbine_torque"] == pytest.approx(TR[0] * (w / k0) ** 2, rel=1e-14)
        assert -y["torque_B"] == pytest.approx(y["turbine_torque"], rel=1e-12)
        plant.step(1e-3)
    # full load against the stalled converter: the engine runs up to the stall speed, where the
    # impeller absorbs the full-load torque (400 N m: 120 rpm * sqrt(400) = 2400 rpm)
    for _ in range(3000):
        plant.step(1e-3)
    assert plant.output_dict()["w_engine"] == pytest.approx(2400.0 * RPM, rel=1e-3)


@pytest.mark.parametrize("sr", [0.4, 0.7, 0.9])
def test_drive_point_at_a_breakpoint_reads_the_tables(tmp_path, sr):
    plant = load_plant(converter_config(tmp_path))
    plant.reset({"p_B": 0.0, "p_C": 0.0, "p_lockup": 0.0})
    c = plant.core
    wp = 2000.0 * RPM
    coords = plant.params.reduction.coordinates
    d = plant.params.description
    c.omega[coords.index(d.member_index("engine"))] = wp
    c.omega[coords.index(d.member_index("input"))] = sr * wp
    plant.start()
    y = plant.output_dict()
    k = K_RPM[SR.index(sr)] * RPM
    tr = TR[SR.index(sr)]
    assert y["speed_ratio"] == pytest.approx(sr, rel=1e-14)
    assert y["impeller_torque"] == pytest.approx((wp / k) ** 2, rel=1e-13)
    assert y["turbine_torque"] == pytest.approx(tr * (wp / k) ** 2, rel=1e-13)


def test_between_breakpoints_the_capacity_is_monotone_and_zero_at_coupling(tmp_path):
    """C = 1/K^2 falls monotonically (no overshoot of the cubic) to 0 at SR = 1, where drive and coast meet."""
    plant = load_plant(converter_config(tmp_path))
    plant.reset({"p_B": 0.0, "p_C": 0.0, "p_lockup": 0.0})
    c = plant.core
    coords = plant.params.reduction.coordinates
    d = plant.params.description
    ie, ii = coords.index(d.member_index("engine")), coords.index(d.member_index("input"))
    caps = []
    for sr in np.linspace(0.0, 1.0, 201):
        c.omega[ie], c.omega[ii] = 200.0, 200.0 * sr
        plant.start()
        caps.append(plant.output_dict()["impeller_torque"] / 200.0 ** 2)
    caps = np.array(caps)
    assert np.all(np.diff(caps) <= 0.0)
    assert caps[0] == pytest.approx((1.0 / (K_RPM[0] * RPM)) ** 2, rel=1e-14) and caps[-1] == 0.0


def test_coast_exchanges_the_roles(tmp_path):
    """Turbine faster than the impeller: the turbine loses (w_t/K(SR'))^2, the impeller gains TR(SR') times
    that, SR' = w_p / w_t; the converter's power is a loss."""
    plant = load_plant(converter_config(tmp_path))
    plant.reset({"p_B": 0.0, "p_C": 0.0, "p_lockup": 0.0})
    c = plant.core
    coords = plant.params.reduction.coordinates
    d = plant.params.description
    wp, wt = 900.0 * RPM, 1500.0 * RPM
    c.omega[coords.index(d.member_index("engine"))] = wp
    c.omega[coords.index(d.member_index("input"))] = wt
    plant.start()
    y = plant.output_dict()
    srp = wp / wt
    assert srp == pytest.approx(0.6, rel=1e-15)  # a breakpoint
    tabs = (wt / (K_RPM[3] * RPM)) ** 2
    assert y["turbine_torque"] == pytest.approx(-tabs, rel=1e-13)
    assert y["impeller_torque"] == pytest.approx(-TR[3] * tabs, rel=1e-13)
    assert y["turbine_torque"] * wt - y["impeller_torque"] * wp < 0.0


def test_lockup_clutch_closes_exactly_and_the_balance_closes(tmp_path):
    """Driving through the converter, the lock-up clutch engages: impeller and turbine stick at exactly zero
    slip; engine work = converter and clutch losses + kinetic energy (+ drags), to 1e-9."""
    plant = load_plant(converter_config(tmp_path, engine_rpm=1500.0))
    plant.reset({"p_B": 0.0, "p_C": 12.0, "p_lockup": 0.0, "pedal": 0.4})
    c = plant.core
    ke0 = c.kinetic_energy()
    for _ in range(1500):
        plant.step(1e-3)
    lockup = [e.name for e in plant.params.description.elements].index("lockup")
    assert c.mode[lockup] != L.MODE_STUCK
    plant.set_input("p_lockup", 8.0)
    for _ in range(1500):
        plant.step(1e-3)
    y = plant.output_dict()
    assert c.mode[lockup] == L.MODE_STUCK and y["slip_lockup"] == 0.0
    assert y["w_engine"] == y["w_input"]
    work = float(np.sum(c.work) + c.law_work[0])
    assert c.kinetic_energy() - ke0 == pytest.approx(work, rel=1e-9)
    z = work_accounts(plant.params.powertrain, c.law_z)
    assert c.law_work[0] == pytest.approx(z["work_engine"] + z["work_converter"], rel=1e-12)
    assert z["work_converter"] < 0.0 and z["work_engine"] > 0.0
