"""The DCT car (configs/dct_car.toml: the wet dual-clutch gear set with an engine and a vehicle, no converter;
configs/dct_car_hydraulics.toml with clutch hydraulics on c1 and c2):
a launch on clutch c1 and a 1-2 shift clutch to clutch (scenarios/dct_car_launch.toml), with the energy
balance closed to 1e-9 of the engine work (docs/powertrain.md)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from plant_models.core import layout as L
from plant_models.powertrain.components import work_accounts
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
    z = work_accounts(drive.plant.params.powertrain, c.law_z)
    engine = z["work_engine"]
    names = drive.plant.clutch_names(drive.plant.params)
    assert names == ["c1", "c2", "brake", "rolling", "S_odd", "S_even"]
    friction = -sum(rows)
    assert min(-rows[0], -rows[1], -rows[4], -rows[3], engine) > 0.0  # both clutches, a synchronizer, rolling
    assert z["work_converter"] == 0.0 and c.work[L.W_INPUT] == 0.0  # no converter, no torque input
    drag = -(c.work[L.W_DRAG] + c.work[L.W_DAMP] + c.work[L.W_IMPULSE])
    aero, potential = -z["work_aero"], -z["work_grade"]
    balance = engine - (friction + drag + aero + potential + c.kinetic_energy() - drive.ke0)
    assert abs(balance) <= 1e-9 * engine


def test_the_energy_balance_closes_from_the_outputs_alone_synchronizers_included(drive):
    """Every term from the output table (what a state stream or an MF4 carries), at every row, to 1e-9 of the
    engine work (docs/powertrain.md, section 5): engine work = the friction energy of both clutches, the brake,
    the rolling resistance and both synchronizers + drags + impulses + aerodynamic drag + grade + drawbar +
    change of kinetic energy.  The synchronizer of the odd shaft dissipates 640 J (4e-3 of the engine work) as
    it locks 1st: without its ``energy_S_odd`` output a balance from the outputs missed exactly that."""
    r = drive.res
    names = list(r.names)
    dissipated = [n for n in names if n.startswith("energy_")]
    assert dissipated == ["energy_c1", "energy_c2", "energy_brake", "energy_rolling", "energy_S_odd",
                          "energy_S_even"]
    assert not {"work_converter", "work_pto", "work_motor", "work_motor_electrical"} & set(names)  # absent here
    engine = _col(r, "work_engine")
    sinks = (sum(_col(r, n) for n in dissipated) - _col(r, "work_drag") - _col(r, "work_impulse")
             - _col(r, "work_aero") - _col(r, "work_grade") - _col(r, "work_drawbar")
             + _col(r, "kinetic_energy") - drive.ke0)
    residual = engine + _col(r, "work_input") - sinks
    assert np.all(_col(r, "work_input") == 0.0) and engine[-1] > 1.0e5
    assert _col(r, "energy_S_odd")[-1] > 1.0e-3 * engine[-1]  # the term is not negligible
    assert np.abs(residual).max() <= 1e-9 * engine[-1]
    # the outputs are the core's accounts: each synchronizer's energy is minus its row's friction work
    rows = drive.plant.core.work[L.W_ROW0:]
    assert _col(r, "energy_S_odd")[-1] == -rows[4] and _col(r, "energy_S_even")[-1] == max(-rows[5], 0.0)


def test_describe_shows_the_components():
    comp = describe_config("dct_car")["components"]
    assert set(comp) == {"engine", "vehicle"}
    assert comp["engine"]["member"] == "engine" and comp["vehicle"]["member"] == "output"


@pytest.fixture(scope="module")
def hydraulic_drive():
    plant = load_plant("dct_car_hydraulics")
    sc = load_scenario("dct_car_launch").compile(plant)
    plant.reset(sc.start_inputs())
    ke0 = plant.core.kinetic_energy()
    return SimpleNamespace(plant=plant, res=run_offline(plant, sc), ke0=ke0)


def test_the_car_with_clutch_hydraulics_launches_shifts_and_its_energy_balances(hydraulic_drive, drive):
    """configs/dct_car_hydraulics.toml through the same launch: c1 fills before it takes torque, the launch and
    the 1-2 shift each close later than without hydraulics, and engine work = losses + change of energy to
    1e-9 (the hydraulics do no work of their own)."""
    r, plant = hydraulic_drive.res, hydraulic_drive.plant
    fill_c1, fill_c2 = _col(r, "fill_c1"), _col(r, "fill_c2")
    assert fill_c1[400] == 0.0 and fill_c1[1000] == 1.0 and fill_c2[2990] == 0.0 and fill_c2[-1] == 1.0
    assert np.all(_col(r, "capacity_c1")[fill_c1 < 1.0] == 0.0)  # no torque before the kiss point
    gear, gear0 = _col(r, "gear"), _col(drive.res, "gear")
    assert set(gear[3600:].astype(int)) == {2} and _col(r, "stuck_c2")[-1] == 1.0
    first = [int(np.argmax(g == k)) for g in (gear0, gear) for k in (1, 2)]
    assert first[2] > first[0] and first[3] > first[1]  # 1st and 2nd each engage later
    c = plant.core
    z = work_accounts(plant.params.powertrain, c.law_z)
    engine = z["work_engine"]
    drag = -(c.work[L.W_DRAG] + c.work[L.W_DAMP] + c.work[L.W_IMPULSE])
    balance = engine - (-sum(c.work[L.W_ROW0:]) + drag - z["work_aero"] - z["work_grade"] + c.kinetic_energy()
                        - hydraulic_drive.ke0)
    assert engine > 1.0e5 and abs(balance) <= 1e-9 * engine


def test_lockstep_equals_offline_with_hydraulics(tmp_path, hydraulic_drive):
    from server_support import ServerProcess

    offline = hydraulic_drive.res
    names = list(offline.names)
    srv = ServerProcess(tmp_path, plant="dct_car_hydraulics", mode="lockstep")
    try:
        with srv.client() as hil:
            assert hil.output_names == names
            n = hil.load_scenario("dct_car_launch")["n_steps"]
            k = 0
            while k < n:
                k = (r := hil.step(min(1500, n - k))).tick
                got = np.array([r.y[nm] for nm in names])
                bad = [nm for nm, a, b in zip(names, got, offline.values[k]) if a.view(np.int64) != b.view(np.int64)]
                assert not bad, f"tick {k}: lockstep differs from the offline run in {bad}"
    finally:
        srv.shutdown()
