"""Clutch hydraulics (plant_models/powertrain/hydraulics.py, docs/powertrain.md): dead time exact in steps, a
fill that reaches the kiss point when the fill volume and the flow limit say, the return spring's drain and
balance, the faults, and the 8HP car with hydraulics (energy balance, lockstep = offline bit for bit)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from plant_models.core import layout as L
from plant_models.errors import FaultError
from plant_models.powertrain.components import work_accounts
from plant_models.registry import describe_config, load_plant
from server.offline.run import run_offline
from server.offline.scenario import load_scenario
from server.realtime.faults import FaultSet
from server_support import ServerProcess

DT = 1e-3
DEAD = 7  # steps
V_FILL = 10.0123e-6  # m^3: the fill ends inside a step
Q_FILL = 2.5e-3 / 60.0  # m^3/s
Q_DRAIN = 5.0e-3 / 60.0
P_REST, P_KISS = 0.5, 1.5  # bar (kiss: 1500 N / 0.01 m^2)
T_LAG = 0.02  # s
J_IN, J_OUT = 0.1, 0.5
W0 = 100.0  # rad/s
GAIN_KINETIC = 0.11 * 8 * 0.075  # N m per N of normal force
AREA = 0.01

ONE_CLUTCH = f"""
plant = "transmission"
name = "one clutch with hydraulics"
[[member]]
name = "input"
inertia_kg_m2 = {J_IN}
[[member]]
name = "output"
inertia_kg_m2 = {J_OUT}
[clutch]
piston_area_m2 = {AREA}
return_spring_N = 1500.0
friction_static = 0.13
friction_kinetic = 0.11
surfaces = 8
mean_radius_m = 0.075
pressure_lag_s = 0.5
pressure_max_bar = 20.0
[[element]]
name = "C"
kind = "clutch"
members = ["input", "output"]
[input]
member = "input"
[output]
member = "output"
[initial]
speeds_rad_s = {{ input = {W0}, output = 0.0 }}
[hydraulics]
dead_time_steps = {DEAD}
fill_volume_cm3 = {V_FILL * 1e6!r}
fill_flow_l_per_min = 2.5
drain_flow_l_per_min = 5.0
rest_pressure_bar = {P_REST}
time_constant_s = {T_LAG}
"""


@pytest.fixture(scope="module")
def config(tmp_path_factory):
    p = tmp_path_factory.mktemp("hydraulics") / "one_clutch.toml"
    p.write_text(ONE_CLUTCH)
    return p


def _run(plant, schedule, n, faults=None):
    """Step n times, applying {step: p_C} before a step and {step: fault map} through a FaultSet; rows after
    each step: time, pressure, fill, capacity, w_input, w_output, torque."""
    out = {s.name: k for k, s in enumerate(plant.outputs)}
    fs = FaultSet(plant)
    rows = []
    for k in range(n):
        if k in schedule:
            plant.set_input("p_C", schedule[k])
        if faults and k in faults:
            f = faults[k]
            fs.set(f) if f else fs.clear()
        plant.step(DT)
        rows.append([plant.time] + [plant.y[out[nm]] for nm in
                                    ("pressure_C", "fill_C", "capacity_C", "w_input", "w_output", "torque_C")])
    return np.array(rows)


def _fresh(config):
    plant = load_plant(config)
    plant.reset({"p_C": 0.0})
    return plant


def test_dead_time_is_exact_in_steps_and_the_fill_reaches_the_kiss_point_at_fill_volume_over_flow(config):
    plant = _fresh(config)
    r = _run(plant, {100: 8.0}, 420)
    t_valve = (100 + DEAD) * DT  # the step that starts here is the first to see the command
    k_valve = 100 + DEAD
    # nothing moves before the dead time is over: the row after step k holds the state at (k + 1) dt
    assert np.all(r[:k_valve, 1] == 0.0) and np.all(r[:k_valve, 2] == 0.0)
    assert r[k_valve, 1] > P_REST and r[k_valve, 2] > 0.0
    t_kiss = t_valve + V_FILL / Q_FILL  # the closed form of the fill
    assert (t_kiss / DT) % 1.0 > 0.1  # inside a step, not on its boundary
    t = r[:, 0]
    after = np.arange(len(t)) >= k_valve  # rows of the steps from t_valve on
    filling = after & (t < t_kiss)
    # while it strokes: volume Q (t - t_valve), the spring's pressure, no capacity
    assert np.allclose(r[filling, 2], Q_FILL * (t[filling] - t_valve) / V_FILL, rtol=0, atol=1e-12)
    assert np.allclose(r[filling, 1], P_REST + (P_KISS - P_REST) * r[filling, 2], rtol=0, atol=1e-12)
    assert np.all(r[filling, 3] == 0.0) and np.all(r[filling, 5] == 0.0)
    # from the kiss point on: the chamber's lag from the kiss point, started at t_kiss
    full = after & (t > t_kiss)
    tau = t[full] - t_kiss
    want = 8.0 + (P_KISS - 8.0) * np.exp(-tau / T_LAG)
    assert np.all(r[full, 2] == 1.0)
    assert np.max(np.abs(r[full, 1] - want)) < 1e-11
    # and the clutch slips with the Coulomb torque of that pressure: the speeds are its closed-form integral, to
    # the RK4 error of integrating the exponential (a kink of the torque stepped over inside a step, not located,
    # would leave an error of order h^2 times its slope jump: about 1e-2 rad/s here)
    slipping = full & (r[:, 4] - r[:, 5] > 1.0)
    assert slipping.sum() > 10
    tau = t[slipping] - t_kiss
    impulse = GAIN_KINETIC * AREA * (8.0 - P_KISS) * 1e5 * (tau - T_LAG * (1.0 - np.exp(-tau / T_LAG)))
    assert np.max(np.abs(r[slipping, 5] - impulse / J_OUT)) < 1e-8 * W0
    assert np.max(np.abs(r[slipping, 4] - (W0 - impulse / J_IN))) < 1e-8 * W0


def test_the_return_spring_drains_the_chamber_and_balances_a_command_below_the_kiss_point(config):
    plant = _fresh(config)
    r = _run(plant, {0: 8.0, 500: 0.0, 800: 1.0}, 1200)
    t = r[:, 0]
    k_rel = 500 + DEAD
    x0 = r[k_rel - 1, 1]  # the chamber's pressure when the valve closes
    assert x0 > 7.9
    t_cross = k_rel * DT + T_LAG * math.log(x0 / P_KISS)  # the lag towards 0 crosses the kiss point
    full = (t > k_rel * DT) & (t < t_cross)
    assert np.max(np.abs(r[full, 1] - x0 * np.exp(-(t[full] - k_rel * DT) / T_LAG))) < 1e-11
    draining = (t > t_cross) & (t < t_cross + V_FILL / Q_DRAIN)
    assert draining.sum() > 50
    assert np.allclose(r[draining, 2], 1.0 - Q_DRAIN * (t[draining] - t_cross) / V_FILL, rtol=0, atol=1e-9)
    assert np.all(r[t > t_cross, 3] == 0.0)  # no capacity below the kiss point
    assert r[800 + DEAD - 1, 2] == 0.0  # empty
    # 1 bar, between the rest pressure and the kiss point: the piston strokes to where the spring balances it
    assert r[-1, 2] == pytest.approx((1.0 - P_REST) / (P_KISS - P_REST), abs=1e-12)
    assert r[-1, 1] == pytest.approx(1.0, abs=1e-12) and r[-1, 3] == 0.0


def test_slow_fill_leakage_and_a_stuck_valve(config):
    # slow fill: half the flow, twice the fill time
    r = _run(_fresh(config), {100: 8.0}, 700,
             faults={0: {"target": "clutch", "clutch": "C", "kind": "slow_fill", "value": 0.5}})
    t_kiss = (100 + DEAD) * DT + 2.0 * V_FILL / Q_FILL
    t = r[:, 0]
    assert np.all(r[t < t_kiss, 3] == 0.0) and np.all(r[t > t_kiss, 2] == 1.0)
    assert np.all(r[(t > t_kiss) & (t < t_kiss + 0.1), 3] > 0.0)
    # leakage: the chamber settles the leak below the command
    r = _run(_fresh(config), {0: 8.0}, 900,
             faults={0: {"target": "clutch", "clutch": "C", "kind": "leakage", "value": 2.0}})
    assert r[-1, 1] == pytest.approx(6.0, abs=1e-9)
    # a stuck valve keeps its output: the command drops to 0, the chamber stays full; cleared, it drains
    r = _run(_fresh(config), {0: 8.0, 600: 0.0}, 1200,
             faults={500: {"target": "clutch", "clutch": "C", "kind": "valve_stuck"}, 900: None})
    assert r[899, 1] == pytest.approx(r[599, 1], abs=1e-6) and r[899, 2] == 1.0 and r[899, 3] > 0.0
    assert r[-1, 2] < 1.0 and r[-1, 3] == 0.0


def test_hydraulic_faults_need_hydraulics():
    plant = load_plant("zf8hp_car")
    with pytest.raises(FaultError, match="no hydraulics"):
        FaultSet(plant).set({"target": "clutch", "clutch": "A", "kind": "slow_fill", "value": 0.5})


@pytest.fixture(scope="module")
def drive():
    plant = load_plant("zf8hp_car_hydraulics")
    sc = load_scenario("zf8hp_car_drive").compile(plant)
    plant.reset(sc.start_inputs())
    ke0 = plant.core.kinetic_energy()
    return SimpleNamespace(plant=plant, res=run_offline(plant, sc), ke0=ke0)


def test_the_car_with_hydraulics_shifts_and_its_energy_balances(drive):
    r, plant = drive.res, drive.plant
    names = list(r.names)
    gears = set(r.values[:, names.index("gear")].astype(int))
    assert {1, 2, 3, 4} <= gears
    fill_e = r.values[:, names.index("fill_E")]
    assert fill_e[2500] == 0.0 and fill_e[4000] == 1.0  # E fills for the 1-2 shift
    c = plant.core
    rows = c.work[L.W_ROW0:]
    z = work_accounts(plant.params.powertrain, c.law_z)
    engine = z["work_engine"]
    losses = (-sum(rows) - z["work_converter"] - c.work[L.W_DRAG] - c.work[L.W_DAMP] - c.work[L.W_IMPULSE]
              - z["work_aero"] - z["work_grade"])
    assert abs(engine - losses - (c.kinetic_energy() - drive.ke0)) <= 1e-9 * engine


def test_describe_shows_the_hydraulics():
    h = describe_config("zf8hp_car_hydraulics")["components"]["hydraulics"]
    assert h["elements"] == ["A", "B", "C", "D", "E"] and h["outputs"] == [f"fill_{e}" for e in "ABCDE"]
    assert h["fill_time_s"] == pytest.approx(0.12) and h["kiss_point_bar"] == pytest.approx(1.5)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    srv = ServerProcess(tmp_path_factory.mktemp("hydraulics_lockstep"), plant="zf8hp_car_hydraulics",
                        mode="lockstep")
    yield srv
    srv.shutdown()


def test_lockstep_equals_offline_with_hydraulics(served, drive):
    offline = drive.res
    with served.client() as hil:
        names = hil.output_names
        assert names == list(offline.names)
        n = hil.load_scenario("zf8hp_car_drive")["n_steps"]
        k = 0
        while k < n:
            r = hil.step(min(1500, n - k))
            k = r.tick
            got = np.array([r.y[nm] for nm in names])
            bad = [nm for nm, a, b in zip(names, got, offline.values[k]) if a.view(np.int64) != b.view(np.int64)]
            assert not bad, f"tick {k}: lockstep differs from the offline run in {bad}"


def test_a_snapshot_in_the_middle_of_a_fill_continues_bit_exactly():
    """The fill volumes, the valve and the dead-time rings are state: saved while E's command for the 1-2
    shift is in its dead-time ring, run on through the fill, restored, run again: the same rows."""
    from plant_models.offline import Run
    from server.realtime.snapshots import from_bytes, to_bytes

    plant = load_plant("zf8hp_car_hydraulics")
    sc = load_scenario("zf8hp_car_drive").compile(plant, 0.001)
    plant.reset(sc.start_inputs())
    run = Run(plant, sc.table, sc.dt, sc.n_steps)
    run.advance(2503)
    snap = run.snapshot()
    run.advance(400)
    first = run.out[2504:2904].copy()
    fill = first[:, [o.name for o in plant.outputs].index("fill_E")]
    df_end = plant.df.copy()
    run.restore(from_bytes(to_bytes(snap)))
    run.advance(400)
    assert np.array_equal(run.out[2504:2904], first)
    assert np.array_equal(plant.df, df_end)
    assert fill[0] == 0.0 < fill[-1] == 1.0  # saved while E's command was in the ring; it fills after


def test_a_solenoid_current_through_the_valve_map(tmp_path):
    p = tmp_path / "current.toml"
    p.write_text(ONE_CLUTCH + "valve_current_A = [0.0, 0.2, 1.0]\nvalve_pressure_bar = [0.0, 0.0, 16.0]\n")
    plant = load_plant(p)
    assert "i_C" in [s.name for s in plant.inputs] and "p_C" not in [s.name for s in plant.inputs]
    plant.reset({"i_C": 0.0})
    out = [s.name for s in plant.outputs]
    for k in range(1500):
        if k == 10:
            plant.set_input("i_C", 0.6)  # 8 bar on the map
        plant.step(DT)
    assert plant.y[out.index("fill_C")] == 1.0
    assert plant.y[out.index("pressure_C")] == pytest.approx(8.0, abs=1e-9)
