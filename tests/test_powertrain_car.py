"""The 8HP car (configs/zf8hp_car.toml) with every component active: energy balance over a drive
(scenarios/zf8hp_car_drive.toml) and lockstep = offline bit for bit (docs/powertrain.md)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from plant_models.core import layout as L
from plant_models.powertrain.components import work_accounts
from plant_models.registry import describe_config, load_plant
from server.offline.scenario import load_scenario
from server.offline.run import run_offline
from server_support import ServerProcess

CHUNK = 700


@pytest.fixture(scope="module")
def drive():
    plant = load_plant("zf8hp_car")
    ke0 = None

    sc = load_scenario("zf8hp_car_drive").compile(plant)
    plant.reset(sc.start_inputs())
    ke0 = plant.core.kinetic_energy()
    res = run_offline(plant, sc)
    return SimpleNamespace(plant=plant, res=res, ke0=ke0)


def _col(res, name):
    return res.values[:, list(res.names).index(name)]


def test_the_drive_uses_every_component(drive):
    r = drive.res
    gears = set(_col(r, "gear").astype(int))
    assert {1, 2, 3, 4} <= gears
    assert _col(r, "stuck_lockup").max() == 1.0  # locked up in 4th
    assert _col(r, "speed_ratio")[:2000].min() == 0.0  # launched from the stalled converter
    assert _col(r, "vehicle_speed").max() > 17.0
    assert _col(r, "vehicle_speed")[-1] == 0.0  # braked to a standstill on the 5 % grade, held exactly
    assert _col(r, "stuck_brake")[-1] == 1.0
    assert _col(r, "engine_torque").min() < 0.0 < _col(r, "engine_torque").max()
    assert _col(r, "grade_force")[-1] > 0.0


def test_engine_work_balances_losses_and_the_change_of_energy(drive):
    """Engine work = clutch, brake, rolling and converter losses + drags + aerodynamic drag
    + change of kinetic energy + change of potential energy, to 1e-9 of the engine work."""
    plant = drive.plant
    c = plant.core
    names = [e.name for e in plant.params.description.elements]
    rows = c.work[L.W_ROW0:]
    z = work_accounts(plant.params.powertrain, c.law_z)
    engine = z["work_engine"]
    clutches = -sum(rows[i] for i, nm in enumerate(names) if nm not in ("brake", "rolling"))
    brake = -rows[names.index("brake")]
    rolling = -rows[names.index("rolling")]
    converter = -z["work_converter"]
    drag = -(c.work[L.W_DRAG] + c.work[L.W_DAMP])
    impulse = -c.work[L.W_IMPULSE]
    aero = -z["work_aero"]
    potential = -z["work_grade"]
    kinetic = c.kinetic_energy() - drive.ke0
    assert c.work[L.W_INPUT] == 0.0  # no torque input: the engine is the only source
    assert min(clutches, brake, rolling, converter, drag, aero, potential, engine) > 0.0
    balance = engine - (clutches + brake + rolling + converter + drag + impulse + aero + potential + kinetic)
    assert abs(balance) <= 1e-9 * engine
    # the law's account is the sum of its components' accounts
    assert c.law_work[0] == pytest.approx(z["work_engine"] + z["work_converter"] + z["work_aero"] + z["work_grade"],
                                          rel=1e-12)


def test_describe_shows_the_components_and_their_ports():
    d = describe_config("zf8hp_car")
    comp = d["components"]
    assert set(comp) == {"engine", "torque_converter", "vehicle"}
    assert comp["torque_converter"]["impeller"] == "engine" and comp["torque_converter"]["turbine"] == "input"
    assert comp["vehicle"]["elements"] == ["brake", "rolling"]
    inputs = {s["name"] if isinstance(s, dict) else s.name for s in d["inputs"]}
    assert {"pedal", "torque_limit", "grade_percent", "p_lockup", "p_brake"} <= inputs


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    srv = ServerProcess(tmp_path_factory.mktemp("zf8hp_car_lockstep"), plant="zf8hp_car", mode="lockstep")
    yield srv
    srv.shutdown()


def test_the_served_car_equals_the_offline_run_bit_for_bit(served, drive):
    offline = drive.res
    with served.client() as hil:
        names = hil.output_names
        assert names == list(offline.names)
        info = hil.load_scenario("zf8hp_car_drive")
        n = info["n_steps"]
        assert n == offline.values.shape[0] - 1
        k = 0
        while k < n:
            r = hil.step(min(CHUNK, n - k))
            k = r.tick
            got = np.array([r.y[nm] for nm in names])
            want = offline.values[k]
            bad = [nm for nm, a, b in zip(names, got, want) if a.view(np.int64) != b.view(np.int64)]
            assert not bad, f"tick {k}: lockstep differs from the offline run in {bad}"
        assert r.scenario_finished is True


def test_a_snapshot_of_the_car_continues_bit_exactly():
    """Save in the middle of the 2-3 shift under torque intervention (law states mid-response), run on,
    restore, run again: the same rows and the same data buffer."""
    from plant_models.offline import Run
    from server.realtime.snapshots import from_bytes, to_bytes

    plant = load_plant("zf8hp_car")
    sc = load_scenario("zf8hp_car_drive").compile(plant, 0.001)
    plant.reset(sc.start_inputs())
    run = Run(plant, sc.table, sc.dt, sc.n_steps)
    run.advance(4560)
    snap = run.snapshot()
    run.advance(1000)
    first = run.out[4561:5561].copy()
    df_end = plant.df.copy()
    run.restore(from_bytes(to_bytes(snap)))
    run.advance(1000)
    assert np.array_equal(run.out[4561:5561], first)
    assert np.array_equal(plant.df, df_end)


def _cruise_with_pedal_steps(reuse: bool) -> np.ndarray:
    """The car in 4th, locked up; the pedal jumps every 50 ms (rate 0), the grade every 70 ms."""
    plant = load_plant("zf8hp_car")
    assert plant.mi[L.H_REUSE] == 1  # the powertrain checks its law's inputs, so the core may reuse
    plant.mi[L.H_REUSE] = 1 if reuse else 0
    inputs = {f"p_{e}": (12.0 if e in "BDE" else 0.0) for e in "ABCDE"}
    inputs.update(p_lockup=8.0, pedal=0.3)
    plant.reset(inputs)
    plant.start_in_gear("4", 16.0 / 0.33 * 3.15 * plant.gear_ratio("4"))
    rows = []
    for k in range(600):
        if k % 50 == 0:
            plant.set_input("pedal", 0.3 + 0.1 * ((k // 50) % 3))
        if k % 70 == 0:
            plant.set_input("grade_percent", float((k // 70) % 4))
        plant.step(1e-3)
        rows.append(plant.y.copy())
    return np.array(rows)


def test_starting_steps_from_the_last_end_evaluation_changes_nothing(drive):
    """A step may start from the previous step's end evaluation only when the law's inputs are those that
    evaluation used (the plant checks them): with jumps in the pedal and the grade, the run with that reuse
    equals the run without it, bit for bit (and the offline drive too)."""
    with_reuse = _cruise_with_pedal_steps(True)
    assert np.array_equal(with_reuse.view(np.int64), _cruise_with_pedal_steps(False).view(np.int64))
    plant = load_plant("zf8hp_car")
    plant.mi[L.H_REUSE] = 0
    fresh = run_offline(plant, load_scenario("zf8hp_car_drive").compile(plant))
    assert np.array_equal(fresh.values.view(np.int64), drive.res.values.view(np.int64))


def test_outputs_after_a_step_are_the_law_at_the_final_state():
    """The components' outputs after a step come from the core's last evaluation of the law, which is at
    the step's final state: the same values as an evaluation made there."""
    from plant_models.powertrain import converter, engine, vehicle
    from plant_models.powertrain.assembly import evaluate_at_state
    from plant_models.powertrain.components import data_offsets

    plant = load_plant("zf8hp_car")
    sc = load_scenario("zf8hp_car_drive").compile(plant, 0.001)
    plant.reset(sc.start_inputs())
    from plant_models.offline import Run

    run = Run(plant, sc.table, sc.dt, sc.n_steps)
    od = int(plant.mi[L.DF_LAW])
    offsets = data_offsets(plant.params.powertrain, plant.core.sizes.n)
    LD_ENGINE_TQ = offsets["engine"] + engine.D_TORQUE
    LD_TURBINE_TQ = offsets["torque_converter"] + converter.D_TURBINE_TQ
    LD_SPEED = offsets["vehicle"] + vehicle.D_SPEED
    checked = 0
    for _ in range(40):
        run.advance(400)
        y = plant.output_dict()
        evaluate_at_state(plant.mf, plant.mi, plant.df, plant.di, 0.001)
        assert y["engine_torque"] == pytest.approx(plant.df[od + LD_ENGINE_TQ], rel=1e-12, abs=1e-9)
        assert y["turbine_torque"] == pytest.approx(plant.df[od + LD_TURBINE_TQ], rel=1e-12, abs=1e-9)
        assert y["vehicle_speed"] == pytest.approx(plant.df[od + LD_SPEED], rel=1e-12, abs=1e-12)
        checked += 1
    assert checked == 40


def test_a_non_finite_pedal_is_refused_and_changes_nothing():
    """A NaN (or infinite) value of an input the force law reads, past the ports' checks: the step is
    refused with ST_BAD_INPUT, the state stays bit for bit, and the next good step goes on."""
    plant = load_plant("zf8hp_car")
    plant.reset({"p_A": 12.0, "p_B": 12.0, "p_C": 12.0, "pedal": 0.3})
    for _ in range(50):
        plant.step(1e-3)
    y_before = plant.core.y.copy()
    k = plant.input_index("pedal")
    for bad in (float("nan"), float("inf")):
        plant.u[k] = bad
        assert plant.step(1e-3) == L.ST_BAD_INPUT
        assert np.array_equal(plant.core.y.view(np.int64), y_before.view(np.int64))
        assert np.isfinite(plant.output_dict()["engine_torque"])
    plant.u[k] = 0.3
    plant.u_rate[plant.input_index("grade_percent")] = float("nan")
    assert plant.step(1e-3) == L.ST_BAD_INPUT
    plant.u_rate[plant.input_index("grade_percent")] = 0.0
    assert plant.step(1e-3) & (L.ST_BAD_INPUT | L.ST_NONFINITE) == 0
    assert plant.core.time[0] == pytest.approx(0.051, rel=1e-12)


def test_a_car_standing_on_its_brake_keeps_its_mode_without_a_solve_per_step():
    """Standing on the brake in 1st with the engine idling against the stalled converter, the rolling-resistance
    row slips at exactly zero speed beside the stuck brake (a redundant pair).  Its speed is held by the stuck
    rows, so the mode the start solved still fits every later step: no step spends a sub-step on a mode solve
    (the core's sub-step count stays 0), the car stays at exactly 0.0 and the step still reports the
    redundant set (ST_OVERCONSTRAINED) as the solve did."""
    plant = load_plant("zf8hp_car")
    inputs = {f"p_{e}": (12.0 if e in "ABC" else 0.0) for e in "ABCDE"}
    inputs.update(p_lockup=0.0, p_brake=120.0, pedal=0.0)
    plant.reset(inputs)
    plant.start()
    status = 0
    for _ in range(200):
        status |= plant.step(1e-3)
    out = plant.output_dict()
    assert out["vehicle_speed"] == 0.0 and out["stuck_brake"] == 1.0 and out["stuck_rolling"] == 0.0
    assert out["slip_rolling"] == 0.0 and out["capacity_rolling"] > 0.0
    assert status & L.ST_OVERCONSTRAINED
    assert int(plant.core.counters[L.CNT_SUBSTEPS_MAX]) == 0


def test_the_laws_input_check_reads_only_the_laws_inputs_on_a_car_without_a_driver():
    """The car has no driver: the law's finite-input check must not take another input (p_A, input 0) for the
    driver's target; a bad pedal is still the law's."""
    import math

    from plant_models.powertrain.law import inputs_finite
    from plant_models.registry import load_plant

    plant = load_plant("zf8hp_car")
    names = [s.name for s in plant.inputs]
    assert "target_speed" not in names and names[0] == "p_A"
    assert inputs_finite(plant.mi, plant.df)
    plant.u[0] = math.nan
    assert inputs_finite(plant.mi, plant.df)  # p_A is the core's input, checked by the core
    plant.u[names.index("pedal")] = math.nan
    assert not inputs_finite(plant.mi, plant.df)
