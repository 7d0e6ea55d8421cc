"""The DCT car (configs/dct_car.toml: the wet dual-clutch gear set with an engine and a vehicle, no converter):
a launch on clutch c1 and a 1-2 shift clutch to clutch (scenarios/dct_car_launch.toml), with the energy
balance closed to 1e-9 of the engine work (docs/powertrain.md)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from plant_models.core import layout as L
from plant_models.powertrain import law as W
from plant_models.registry import describe_config, load_plant
from server.offline.run import run_offline
from server.offline.scenario import load_scenario


@pytest.fixture(scope="module")
def drive():
    plant = load_plant("dct_car")
    sc = load_scenario("dct_car_launch").compile(plant)
    plant.reset(sc.start_inputs())
    ke0 = plant.core.kinetic_energy()
    return SimpleNamespace(plant=plant, res=run_offline(plant, sc), ke0=ke0)


def _col(res, name):
    return res.values[:, list(res.names).index(name)]


def test_the_car_launches_on_c1_and_shifts_to_second_on_c2(drive):
    r = drive.res
    gear, speed = _col(r, "gear"), _col(r, "vehicle_speed")
    assert np.all(speed[:400] == 0.0) and _col(r, "stuck_brake")[0] == 1.0  # held on its brake
    launch = slice(700, 1200)  # c1 slips while the car moves off
    assert np.all(_col(r, "slip_c1")[launch] > 0.0) and np.all(speed[launch] > 0.0)
    assert _col(r, "w_engine")[launch].min() > 0.85 * 83.8  # the launch does not pull the engine down
    assert set(gear[1600:3000].astype(int)) == {1} and _col(r, "stuck_c1")[2900] == 1.0
    assert set(gear[3600:].astype(int)) == {2} and _col(r, "stuck_c2")[-1] == 1.0
    assert _col(r, "selected_S_odd")[-1] == 3.0 and _col(r, "locked_S_odd")[-1] == 1.0  # 3rd preselected
    # the shift's inertia phase: the engine is pulled from 1st's speed down to 2nd's
    ratio = (3.5 / 2.1)
    assert _col(r, "w_engine")[2999] == pytest.approx(ratio * _col(r, "w_engine")[3599] * speed[2999] / speed[3599],
                                                      rel=0.02)


def test_engine_work_balances_losses_and_the_change_of_energy(drive):
    """Engine work = clutch and synchronizer losses + brake + rolling + drags + aerodynamic drag + change of
    kinetic energy, to 1e-9 of the engine work."""
    c = drive.plant.core
    rows = c.work[L.W_ROW0:]
    z = c.law_z
    engine = z[W.Z_W_ENGINE]
    names = drive.plant.clutch_names(drive.plant.params)
    assert names == ["c1", "c2", "brake", "rolling", "S_odd", "S_even"]
    friction = -sum(rows)
    assert min(-rows[0], -rows[1], -rows[4], -rows[3], engine) > 0.0  # both clutches, a synchronizer, rolling
    assert z[W.Z_W_CONVERTER] == 0.0 and c.work[L.W_INPUT] == 0.0  # no converter, no torque input
    drag = -(c.work[L.W_DRAG] + c.work[L.W_DAMP] + c.work[L.W_IMPULSE])
    aero, potential = -z[W.Z_W_AERO], -z[W.Z_W_GRADE]
    balance = engine - (friction + drag + aero + potential + c.kinetic_energy() - drive.ke0)
    assert abs(balance) <= 1e-9 * engine


def test_describe_shows_the_components():
    comp = describe_config("dct_car")["components"]
    assert set(comp) == {"engine", "vehicle"}
    assert comp["engine"]["member"] == "engine" and comp["vehicle"]["member"] == "output"
