"""Clutch hydraulics on the Powershift and DCT plant kinds (plant_models/powertrain/hydraulics.py,
hydraulics_plant.py; docs/powertrain.md, "Clutch hydraulics"): the fill reaches the kiss point when the fill
volume and the flow limit say, no torque below the return spring's pressure, a swap delayed by exactly the fill
time, the faults, snapshots through a fill, lockstep = offline bit for bit, and a bad command refused."""

from __future__ import annotations

import math

import numpy as np
import pytest

from plant_models.core import layout as L
from plant_models.errors import ConfigError
from plant_models.registry import describe_config, load_plant
from server.offline.run import run_offline
from server.offline.scenario import load_scenario
from server.realtime.faults import FaultSet
from server_support import ROOT, ServerProcess

DT = 1e-3
CONFIGS = ROOT / "configs"
# the Powershift's clutch c2 (configs/powershift.toml): kiss point 1800 N / 0.012 m^2 = 1.5 bar, lag 0.03 s
P_KISS = 1.5  # bar
P_REST = 0.5  # bar
Q_FILL = 10.0e-3 / 60.0  # m^3/s
T_LAG = 0.03  # s
GEAR1 = {"p_c1": 16.0, "p_c3": 16.0, "p_c6": 16.0}


def _powershift(tmp_path, name: str, hydraulics: str, extra: str = ""):
    p = tmp_path / f"{name}.toml"
    p.write_text(f'extends = "{CONFIGS / "powershift.toml"}"\n{extra}\n[hydraulics]\n{hydraulics}')
    return load_plant(p)


def _inputs(**kw) -> dict:
    u = {f"p_c{i}": 0.0 for i in range(1, 9)}
    u.update(GEAR1)
    u.update(kw)
    return u


def _trace(plant, n, schedule=None, faults=None, names=("pressure_c2", "fill_c2", "capacity_c2", "torque_c2"),
           fs=None):
    """Step n times; ``schedule`` {step: {input: value}} and ``faults`` {step: fault map or None: clear} apply
    (through the fault set ``fs``) before that step; rows: the time after each step, then ``names``."""
    out = [s.name for s in plant.outputs]
    fs = fs or FaultSet(plant)
    rows = []
    for k in range(n):
        for nm, v in (schedule or {}).get(k, {}).items():
            plant.set_input(nm, v)
        if faults and k in faults:
            fs.set(faults[k]) if faults[k] else fs.clear()
        plant.step(DT)
        rows.append([plant.time] + [plant.y[out.index(nm)] for nm in names])
    return np.array(rows)


def test_the_fill_reaches_the_kiss_point_at_fill_volume_over_flow_on_the_powershift(tmp_path):
    dead, v_fill = 4, 18.0123e-6  # the fill ends 0.07 of a step past a step boundary
    plant = _powershift(tmp_path, "fill", f"elements = [\"c2\"]\ndead_time_steps = {dead}\n"
                        f"fill_volume_cm3 = {v_fill * 1e6!r}\nfill_flow_l_per_min = 10.0\n"
                        f"drain_flow_l_per_min = 15.0\nrest_pressure_bar = {P_REST}\ntime_constant_s = {T_LAG}\n")
    plant.reset(_inputs(engine_torque=300.0))
    r = _trace(plant, 400, {50: {"p_c2": 8.0}})
    t = r[:, 0]
    k_valve = 50 + dead  # the first step that sees the command
    t_valve = k_valve * DT
    t_kiss = t_valve + v_fill / Q_FILL
    assert 0.05 < (t_kiss / DT) % 1.0 < 0.95
    assert np.all(r[:k_valve, 1] == 0.0) and np.all(r[:k_valve, 2] == 0.0)
    filling = (np.arange(len(t)) >= k_valve) & (t < t_kiss)
    assert filling.sum() == math.floor((t_kiss - t_valve) / DT)
    assert np.allclose(r[filling, 2], Q_FILL * (t[filling] - t_valve) / v_fill, rtol=0, atol=1e-12)
    assert np.allclose(r[filling, 1], P_REST + (P_KISS - P_REST) * r[filling, 2], rtol=0, atol=1e-12)
    assert np.all(r[t < t_kiss, 3] == 0.0)  # no capacity before the kiss point
    full = t > t_kiss
    assert np.all(r[full, 2] == 1.0) and np.all(r[full, 3] > 0.0)
    want = 8.0 + (P_KISS - 8.0) * np.exp(-(t[full] - t_kiss) / T_LAG)  # the chamber's lag from the kiss point
    assert np.max(np.abs(r[full, 1] - want)) < 1e-11


def test_no_torque_below_the_return_spring_pressure(tmp_path):
    """A command between the rest pressure and the kiss point strokes the piston to where the spring balances
    it: the chamber reads the command, the clutch has no capacity and passes no torque (no viscous drag here)."""
    plant = _powershift(tmp_path, "spring", f"elements = [\"c2\"]\nfill_volume_cm3 = 18.0\n"
                        f"fill_flow_l_per_min = 10.0\ndrain_flow_l_per_min = 15.0\nrest_pressure_bar = {P_REST}\n"
                        f"time_constant_s = {T_LAG}\n", extra="[clutch]\nviscous_N_s_per_m = 0.0\n")
    plant.reset(_inputs(engine_torque=300.0))
    r = _trace(plant, 600, {10: {"p_c2": 1.4}})
    assert np.all(r[:, 3] == 0.0) and np.all(r[:, 4] == 0.0)
    assert r[-1, 2] == pytest.approx((1.4 - P_REST) / (P_KISS - P_REST), abs=1e-12)
    assert r[-1, 1] == pytest.approx(1.4, abs=1e-12)
    r = _trace(plant, 300, {0: {"p_c2": 1.6}})  # just above the kiss point: the rest of the stroke, then torque
    assert r[-1, 2] == 1.0 and r[-1, 3] > 0.0 and r[-1, 4] != 0.0


def test_no_torque_below_the_kiss_point_on_the_dct(tmp_path):
    """The DCT plant with c1 held between its rest pressure (0.3 bar) and its kiss point (1 bar) in 1st gear
    under the engine's torque: no capacity, no clutch torque, and the car stays at exactly 0.0 speed."""
    p = tmp_path / "dct_spring.toml"
    p.write_text(f'extends = "{CONFIGS / "dct_hydraulics.toml"}"\n[clutch]\nviscous_N_m_s_per_rad = 0.0\n')
    plant = load_plant(p)
    plant.reset({"gear_odd": 1.0, "engine_torque": 50.0, "p_c1": 0.0})
    r = _trace(plant, 800, {5: {"p_c1": 0.9}}, names=("pressure_c1", "fill_c1", "capacity_c1", "torque_c1",
                                                       "w_wheel", "w_engine"))
    assert np.all(r[:, 3] == 0.0) and np.all(r[:, 4] == 0.0) and np.all(r[:, 5] == 0.0)
    assert r[-1, 6] > 84.0  # the engine runs up, the car does not move
    assert r[-1, 2] == pytest.approx((0.9 - 0.3) / (1.0 - 0.3), abs=1e-12)
    r = _trace(plant, 400, {0: {"p_c1": 3.0}}, names=("pressure_c1", "fill_c1", "capacity_c1", "torque_c1",
                                                       "w_wheel"))
    assert r[-1, 2] == 1.0 and r[-1, 3] > 0.0 and r[-1, 5] > 0.0  # above it: the car moves off


def _equilibrium_load(plant, inputs) -> float:
    """The load torque at which the Powershift in gear 1 under ``inputs`` does not accelerate (the start's
    accelerations are linear in the load)."""
    a = []
    for load in (0.0, 1000.0):
        plant.reset(dict(inputs, load_torque=load))
        a.append(plant.core.accel[0])
    return -a[0] * 1000.0 / (a[1] - a[0])


def _swap(plant, inputs, k_c2, k_c1, n):
    """Gear 1 -> 3 (c1 -> c2) from a steady state: c2 to 10 bar before step k_c2, c1 to 0 before k_c1; the
    events (time, row, kind) and the last outputs."""
    plant.reset(inputs)
    plant.core.new_events()
    events = []
    for k in range(n):
        if k == k_c2:
            plant.set_input("p_c2", 10.0)
        if k == k_c1:
            plant.set_input("p_c1", 0.0)
        plant.step(DT)
        events += plant.core.new_events()
    return events, plant.output_dict()


def test_a_swap_with_hydraulics_closes_later_by_exactly_the_fill_time(tmp_path):
    """The swap 1 -> 3 without hydraulics, c2 waiting at its kiss point, against the same swap with c2's
    hydraulics (no dead time or valve, the same chamber lag) from an empty chamber, c1 released when the fill
    ends: from a steady state both are one trajectory, the second later by V / Q = 108 ms: c1's breakaway and
    c2's stick (the shift's end) come exactly that much later, and both shifts close in gear 3."""
    v_fill = 18.0e-6  # 108 ms: c1's release lands on a step
    t_fill = v_fill / Q_FILL
    plain = load_plant("powershift")
    hyd = _powershift(tmp_path, "swap", f"elements = [\"c2\"]\nfill_volume_cm3 = {v_fill * 1e6!r}\n"
                      f"fill_flow_l_per_min = 10.0\ndrain_flow_l_per_min = 15.0\nrest_pressure_bar = {P_REST}\n"
                      f"time_constant_s = {T_LAG}\n")
    load = _equilibrium_load(plain, _inputs(engine_torque=300.0, p_c2=P_KISS))
    k0, n = 100, 500
    ev_a, end_a = _swap(plain, _inputs(engine_torque=300.0, p_c2=P_KISS, load_torque=load), k0, k0, n)
    ev_b, end_b = _swap(hyd, _inputs(engine_torque=300.0, p_c2=0.0, load_torque=load), k0, k0 + round(t_fill / DT),
                        n)
    assert [(row, kind) for _, row, kind in ev_a] == [(0, L.EV_BREAKAWAY), (1, L.EV_STICK)]
    assert [(row, kind) for _, row, kind in ev_b] == [(0, L.EV_BREAKAWAY), (1, L.EV_STICK)]
    for (ta, _, _), (tb, _, _) in zip(ev_a, ev_b):
        assert tb - ta == pytest.approx(t_fill, abs=1e-12)
    shift_a = ev_a[1][0] - k0 * DT  # from the command to c2 stuck
    assert ev_b[1][0] - k0 * DT == pytest.approx(shift_a + t_fill, abs=1e-12)
    for end in (end_a, end_b):
        assert end["gear"] == 3.0 and end["stuck_c2"] == 1.0 and end["capacity_c1"] == 0.0 and end["w_1"] > 0.0


def test_the_hydraulic_faults_act_on_the_powershift_and_the_dct():
    ps = load_plant("powershift_hydraulics")  # c2: 18 cm^3 at 10 L/min, dead time 5 steps, valve lag 5 ms
    t_fill = 18.0e-6 / Q_FILL
    fs = FaultSet(ps)

    def kiss_time(fault):
        ps.reset(_inputs(engine_torque=300.0))
        r = _trace(ps, 400, {10: {"p_c2": 8.0}}, faults={0: fault}, fs=fs)
        assert r[-1, 3] > 0.0
        return r[np.argmax(r[:, 3] > 0.0), 0]
    # slow fill at half the flow: the kiss point comes one fill time later (to within the step it falls in)
    late = kiss_time({"target": "clutch", "clutch": "c2", "kind": "slow_fill", "value": 0.5}) - kiss_time(None)
    assert abs(late - t_fill) <= DT
    dct = load_plant("dct_hydraulics")
    dct.reset({"gear_odd": 1.0, "engine_torque": 50.0})
    fs = FaultSet(dct)
    names = ("pressure_c1", "fill_c1", "capacity_c1")
    # leakage: the chamber settles the leak below the command
    r = _trace(dct, 600, {0: {"p_c1": 6.0}}, faults={0: {"target": "clutch", "clutch": "c1", "kind": "leakage",
                                                        "value": 2.0}}, names=names, fs=fs)
    assert r[-1, 1] == pytest.approx(4.0, abs=1e-9)
    # a stuck valve keeps its output (6 bar, the leak cleared): the command drops to 0, the chamber stays full and
    # goes on to the valve's 6 bar; cleared, it drains
    r = _trace(dct, 800, {100: {"p_c1": 0.0}}, faults={0: None, 50: {"target": "clutch", "clutch": "c1",
                                                                      "kind": "valve_stuck"}, 400: None}, names=names,
               fs=fs)
    assert r[399, 1] == pytest.approx(6.0, abs=1e-6) and r[399, 2] == 1.0 and r[399, 3] > 0.0  # on to 6 bar
    assert r[-1, 2] < 1.0 and r[-1, 3] == 0.0


def test_a_non_finite_command_is_refused_and_does_not_enter_the_dead_time_ring():
    """Before the fix the NaN step was taken, the NaN entered the ring, and from the dead time on every step
    was refused."""
    for cfg, name in (("powershift_hydraulics", "p_c2"), ("dct_hydraulics", "p_c1"), ("zf8hp_car_hydraulics", "p_A")):
        plant = load_plant(cfg)
        plant.reset({})
        for _ in range(10):
            plant.step(DT)
        k = plant.input_index(name)
        plant.u[k] = math.nan
        assert plant.step(DT) & L.ST_BAD_INPUT
        plant.u[k] = 0.0
        assert all(plant.step(DT) & L.ST_BAD_INPUT == 0 for _ in range(20)), cfg


def test_describe_and_the_ports(tmp_path):
    h = describe_config("powershift_hydraulics")["components"]["hydraulics"]
    assert h["elements"] == [f"c{i}" for i in range(1, 9)] and h["outputs"] == [f"fill_c{i}" for i in range(1, 9)]
    assert h["fill_time_s"].startswith("c1 0.108, c2 0.108, c3 0.144")
    plain, hyd = load_plant("dct"), load_plant("dct_hydraulics")
    # the fill outputs follow the plant's own, which keep their indices
    assert [s.name for s in hyd.outputs] == [s.name for s in plain.outputs] + ["fill_c1", "fill_c2"]
    p = tmp_path / "current.toml"
    p.write_text(f'extends = "{CONFIGS / "dct_hydraulics.toml"}"\n[hydraulics]\nvalve_current_A = [0.0, 0.2, 1.0]\n'
                 "valve_pressure_bar = [0.0, 0.0, 16.0]\n")
    cur = load_plant(p)
    assert [s.name for s in cur.inputs][:2] == ["i_c1", "i_c2"]
    cur.reset({"gear_odd": 1.0})
    _trace(cur, 800, {0: {"i_c1": 0.6}}, names=())
    assert cur.output_dict()["pressure_c1"] == pytest.approx(8.0, abs=1e-9)  # 0.6 A: 8 bar on the map


def test_hydraulics_config_errors(tmp_path):
    with pytest.raises(ConfigError, match=r"must name a clutch \(c1, c2, c3"):
        _powershift(tmp_path, "bad_name", 'elements = ["C9"]\nfill_volume_cm3 = 1.0\nfill_flow_l_per_min = 1.0\n'
                    "drain_flow_l_per_min = 1.0\nrest_pressure_bar = 0.5\ntime_constant_s = 0.03\n")
    with pytest.raises(ConfigError, match="must lie below c2's kiss point"):
        _powershift(tmp_path, "bad_rest", 'elements = ["c2"]\nfill_volume_cm3 = 1.0\nfill_flow_l_per_min = 1.0\n'
                    "drain_flow_l_per_min = 1.0\nrest_pressure_bar = 1.5\ntime_constant_s = 0.03\n")


def test_a_snapshot_in_the_middle_of_a_fill_continues_bit_exactly():
    """The Powershift through its swaps with hydraulics, saved while c2 fills for the first swap: the run on
    from the restored snapshot gives the same rows and the same buffers."""
    from plant_models.offline import Run
    from server.realtime.snapshots import from_bytes, to_bytes

    plant = load_plant("powershift_hydraulics")
    sc = load_scenario("powershift_swaps").compile(plant, DT)
    plant.reset(sc.start_inputs())
    run = Run(plant, sc.table, sc.dt, sc.n_steps)
    run.advance(560)
    fill = plant.output_dict()["fill_c2"]
    assert 0.0 < fill < 1.0  # mid-stroke
    snap = run.snapshot()
    run.advance(600)
    first = run.out[561:1161].copy()
    df_end = plant.df.copy()
    run.restore(from_bytes(to_bytes(snap)))
    assert plant.output_dict()["fill_c2"] == fill
    run.advance(600)
    assert np.array_equal(run.out[561:1161], first)
    assert np.array_equal(plant.df, df_end)


@pytest.mark.parametrize("config, scenario", [("powershift_hydraulics", "powershift_swaps"),
                                              ("dct_hydraulics", "dct_upshift")])
def test_lockstep_equals_offline_with_hydraulics(tmp_path, config, scenario):
    plant = load_plant(config)
    sc = load_scenario(scenario).compile(plant)
    plant.reset(sc.start_inputs())
    offline = run_offline(plant, sc)
    names = list(offline.names)
    fills = [nm for nm in names if nm.startswith("fill_")]
    assert {0.0, 1.0} <= set(offline.values[:, names.index(fills[1])])  # a clutch fills in the run
    srv = ServerProcess(tmp_path, plant=config, mode="lockstep")
    try:
        with srv.client() as hil:
            assert hil.output_names == names
            n = hil.load_scenario(scenario)["n_steps"]
            k = 0
            while k < n:
                k = (r := hil.step(min(700, n - k))).tick
                got = np.array([r.y[nm] for nm in names])
                bad = [nm for nm, a, b in zip(names, got, offline.values[k]) if a.view(np.int64) != b.view(np.int64)]
                assert not bad, f"tick {k}: lockstep differs from the offline run in {bad}"
    finally:
        srv.shutdown()
