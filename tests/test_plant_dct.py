"""DCT plant (Biagiotti & Zanasi, section 4): synchronizers, gear selection, upshifts, energy balance."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest

from plant_models.core import layout as L
from plant_models.config import ConfigReader, load_toml, repo_root
from plant_models.plants.dct import ROW_S_EVEN, ROW_S_ODD, ST_GEAR_REJECTED, DctPlant
from plant_models.readers.dct import read_dct
from references.reference_solutions import ReferenceSolver, network_from_spec
from server.offline.scenario import parse_scenario
from server.offline.run import run_offline

BASE = load_toml(repo_root() / "configs" / "dct.toml")
T_ENGINE = 200.0  # N m


def make_plant(**initial) -> DctPlant:
    """The default DCT with the [initial] table changed."""
    data = copy.deepcopy(BASE)
    data["initial"].update(initial)
    cfg = ConfigReader(data, "dct-test")
    assert cfg.string("plant") == "dct"
    plant = DctPlant(read_dct(cfg), source=cfg.source)
    cfg.reject_unknown()
    return plant


def run(plant: DctPlant, inputs: dict, duration: float, dt: float = 1e-3):
    scen = parse_scenario({"duration_s": duration, "dt_s": dt, "inputs": inputs}, "test-scenario")
    return run_offline(plant, scen.compile(plant))


def cruising_in_first() -> tuple[DctPlant, dict]:
    """30 km/h in 1st, clutch 1 closed at 12 bar, 200 N m."""
    plant = make_plant(vehicle_speed_km_h=30.0, clutch_engaged="c1")
    inputs = {"engine_torque": T_ENGINE, "p_c1": 12.0, "gear_odd": 1, "road_load": 55.0}
    return plant, inputs


# -- ports -------------------------------------------------------------------------------
def test_gear_inputs_accept_only_gears_of_their_shaft():
    plant = make_plant()
    odd, even = plant.input_signal("gear_odd"), plant.input_signal("gear_even")
    assert odd.allowed == (0, 1, 3, 5, 7) and even.allowed == (0, 2, 4, 6)
    for g in (0, 1, 3, 5, 7):
        assert odd.check(g) is None
    for g in (2, 4, 6, 8, -1, 1.5, math.nan):
        assert odd.check(g) is not None
    for g in (1, 3, 2.5, 8):
        assert even.check(g) is not None
    assert "is not one of" in odd.check(2)
    with pytest.raises(ValueError, match="gear_even"):
        plant.set_input("gear_even", 3)


def test_a_bad_gear_command_reaching_the_step_keeps_the_selection():
    """Transports check commands, but the compiled step must survive one that slipped through."""
    plant, inputs = cruising_in_first()
    plant.reset(inputs)
    plant.step(1e-3)
    k = plant.input_index("gear_odd")
    for bad in (2.0, 3.5, 9.0, -1.0, math.nan):
        before = plant.get_state()
        plant.u[k] = bad
        st = plant.step(1e-3)
        assert st & ST_GEAR_REJECTED
        y = plant.output_dict()
        assert y["selected_odd"] == 1 and y["gear"] == 1 and y["sync_odd_locked"] == 1
        assert np.all(np.isfinite(plant.core.y))
        assert plant.core.coef_b[ROW_S_ODD] == -plant.total_ratio(1)
        del before
    plant.u[k] = 1.0
    assert plant.step(1e-3) & ST_GEAR_REJECTED == 0


# -- reset --------------------------------------------------------------------------------
def test_reset_in_gear_gives_the_gear_ratio_exactly():
    plant, inputs = cruising_in_first()
    plant.reset(dict(inputs, gear_even=2))
    y = plant.output_dict()
    w_wheel = 30.0 / 3.6 / plant.params.wheel_radius
    assert y["w_wheel"] == pytest.approx(w_wheel, rel=1e-12)
    assert y["vehicle_speed"] == pytest.approx(30.0, rel=1e-12)
    assert y["gear"] == 1 and y["stuck_c1"] == 1 and y["stuck_c2"] == 0
    assert y["sync_odd_locked"] == 1 and y["sync_even_locked"] == 1
    assert y["w_odd"] == pytest.approx(plant.total_ratio(1) * y["w_out"], rel=1e-14)
    assert y["w_even"] == pytest.approx(plant.total_ratio(2) * y["w_out"], rel=1e-14)
    assert y["ratio"] == pytest.approx(plant.total_ratio(1), rel=1e-12)
    assert y["slip_c1"] == 0.0
    # the half-shafts start with the quasi-steady torque: output group and vehicle accelerate alike
    assert plant.core.accel[3] == pytest.approx(plant.core.accel[4], rel=1e-12)
    assert plant.core.accel[4] > 0.0
    # ...which is about the torque split of the two inertias (drags and the open clutch's oil shear,
    # left out here, take ~1.5 %)
    p = plant.params
    J_g = p.output_inertia + (p.engine_inertia + p.odd_inertia) * plant.total_ratio(1) ** 2 \
        + p.even_inertia * plant.total_ratio(2) ** 2
    assert y["driveshaft_torque"] == pytest.approx(
        (p.vehicle_inertia * T_ENGINE * plant.total_ratio(1) + J_g * (55.0 + p.vehicle_drag * w_wheel))
        / (J_g + p.vehicle_inertia), rel=2e-2)


# -- synchronizers -------------------------------------------------------------------------
def reference_sync_time(plant: DctPlant, tr, t_select: float) -> float:
    """When the even synchronizer sticks in an independent event-driven solution (tests/reference_solutions).

    The network is the plant's own CoreSpec (whose S_even row has gear 2's ratio), run from the
    plant's reset state with 1st engaged through clutch 1 and the cone capacity applied at t_select.
    """
    plant.reset(cruising_in_first()[1])
    twist0 = plant.core.twist.copy()
    w0 = plant.core.omega.copy()
    k_sync = plant.sync_capacity(2)
    p_c1 = 12.0 * 1e5
    commands = [lambda t: p_c1, lambda t: 0.0, lambda t: plant.params.dog_capacity,
                lambda t: k_sync if t >= t_select else 0.0]
    torque = lambda t: np.array([T_ENGINE, 0.0, 0.0, 0.0, -55.0])  # noqa: E731
    net = network_from_spec(plant.core.spec, torque, commands, breakpoints=[t_select])
    sol = ReferenceSolver(net).simulate(t_select + 0.1, w0, engaged=(0, 2), x0=[p_c1, 0.0, plant.params.dog_capacity,
                                                                             0.0], twist0=twist0)
    sticks = [t for t, row, kind in sol.events if row == ROW_S_EVEN and kind == "stick"]
    assert len(sticks) == 1
    return sticks[0]


def test_preselecting_a_gear_synchronises_the_free_shaft_through_the_cone():
    plant, inputs = cruising_in_first()
    tr = run(plant, dict(inputs, gear_even=[[0.0, 0], [0.2, 2]]), 0.5, dt=2.5e-4)
    t = tr.time
    sticks = [e for e in tr.events if e["clutch"] == "S_even"]
    assert [e["type"] for e in sticks] == ["stick"]
    t_stick = sticks[0]["time"]
    after = t > t_stick + 1e-3
    # locked: the even shaft turns at i_2 * i_final * w_out exactly; the dog teeth hold it
    w_even, w_out = tr.column("w_even"), tr.column("w_out")
    np.testing.assert_allclose(w_even[after], plant.total_ratio(2) * w_out[after], rtol=1e-12)
    assert np.all(tr.column("sync_even_locked")[after] == 1)
    assert np.all(tr.column("sync_even_locked")[t < 0.2] == 0)
    # the synchronising time against an independent reference solution of the same network
    t_ref = reference_sync_time(plant, tr, 0.2)
    assert t_stick == pytest.approx(t_ref, abs=1e-6)
    # ...and roughly the closed form J dw / k_cone of the shaft alone (the reaction on the output
    # group, the car's acceleration and the open clutch's drag move it by a few per cent)
    k0 = int(round(0.2 / tr.time[1]))
    slip0 = w_even[k0] - plant.total_ratio(2) * w_out[k0]
    k_cone = plant.sync_capacity(2) * plant.params.cone_kinetic_ratio
    assert slip0 > 50.0
    assert t_stick - 0.2 == pytest.approx(plant.params.even_inertia * slip0 / k_cone, rel=0.08)
    # the preselection did not disturb the engaged gear
    assert np.all(tr.column("gear") == 1)


def test_neutral_frees_the_shaft():
    plant, inputs = cruising_in_first()
    tr = run(plant, dict(inputs, gear_even=[[0.0, 2], [0.1, 0]]), 0.6)
    t = tr.time
    assert tr.column("sync_even_locked")[0] == 1
    free = t >= 0.1 + 1e-9
    assert np.all(tr.column("sync_even_locked")[free] == 0)
    assert np.all(tr.column("selected_even")[free] == 0)
    assert [(e["clutch"], e["type"]) for e in tr.events] == [("S_even", "breakaway")]
    # released, the even shaft is dragged towards the engine by the open wet clutch
    mismatch = tr.column("w_even") - plant.total_ratio(2) * tr.column("w_out")
    assert np.all(mismatch[free] > 0.0)
    assert mismatch[-1] > 5.0
    assert np.all(tr.column("slip_c2")[free] > 0)


def test_selecting_another_gear_on_an_engaged_shaft_rewrites_the_row():
    """1st -> 3rd on the odd shaft while it turns freely: the cone brings it to 3rd-gear speed."""
    plant, inputs = cruising_in_first()
    inputs = dict(inputs, p_c1=0.0, engine_torque=0.0)
    plant_c = make_plant(vehicle_speed_km_h=30.0, clutch_engaged="none")
    tr = run(plant_c, dict(inputs, gear_odd=[[0.0, 1], [0.1, 3]]), 0.4, dt=5e-4)
    ev = [(e["clutch"], e["type"]) for e in tr.events]
    assert ev[:2] == [("S_odd", "breakaway"), ("S_odd", "stick")]
    assert plant_c.core.coef_b[ROW_S_ODD] == -plant_c.total_ratio(3)
    assert tr.column("w_odd")[-1] == pytest.approx(plant_c.total_ratio(3) * tr.column("w_out")[-1], rel=1e-12)
    assert plant_c.core.coef_b[ROW_S_EVEN] == -plant_c.total_ratio(2)  # untouched


# -- shifts ---------------------------------------------------------------------------------
def upshift_inputs(overlap: bool) -> dict:
    """1 -> 2 power-on upshift at 200 N m from 30 km/h; 2nd preselected from the start.

    Clutch torque per bar above the 1 bar kiss point: 48.4 N m static, 44.6 N m sliding.
    Overlapped: clutch 1 falls from 5.5 bar (218 N m) to the kiss point while clutch 2 rises
    from the kiss point to 6 bar (223 N m), so K1 + k2 stays above the engine torque.
    Underlapped: clutch 1 is released before clutch 2 rises.
    """
    if overlap:
        p_c1 = [[0.0, 12.0], [0.2, 12.0], [0.3, 5.5], [0.45, 1.0], [0.5, 0.0]]
    else:
        p_c1 = [[0.0, 12.0], [0.2, 12.0], [0.25, 5.5], [0.3, 1.0], [0.32, 0.0]]
    p_c2 = [[0.0, 0.0], [0.3, 0.0], [0.3, 1.0], [0.45, 6.0], [0.6, 8.0], [0.8, 12.0]]
    return {"engine_torque": T_ENGINE, "road_load": 55.0, "gear_odd": 1, "gear_even": 2, "p_c1": p_c1,
            "p_c2": p_c2}


@pytest.fixture(scope="module")
def upshift():
    plant = make_plant(vehicle_speed_km_h=30.0, clutch_engaged="c1")
    return plant, run(plant, upshift_inputs(overlap=True), 1.2)


def test_upshift_1_2_completes(upshift):
    plant, tr = upshift
    t = tr.time
    gear = tr.column("gear")
    assert gear[0] == 1 and gear[-1] == 2
    changes = [(g0, g1) for g0, g1 in zip(gear[:-1], gear[1:]) if g0 != g1]
    assert changes == [(1, 0), (0, 2)]  # 1st, both clutches slipping, 2nd: never both
    ev = [(e["clutch"], e["type"]) for e in tr.events]
    assert ev == [("C1", "breakaway"), ("C2", "stick")]
    t_lock = tr.events[1]["time"]
    assert 0.45 < t_lock < 0.8
    # the engine came down to the 2nd-gear synchronous speed and stays there exactly
    after = t > t_lock + 1e-3
    w_e, w_out = tr.column("w_engine"), tr.column("w_out")
    np.testing.assert_allclose(w_e[after], plant.total_ratio(2) * w_out[after], rtol=1e-12)
    k0 = int(round(0.3 / tr.time[1]))
    assert w_e[k0] == pytest.approx(plant.total_ratio(1) * w_out[k0], rel=1e-12)
    assert w_e[after][0] < 0.8 * w_e[k0]


def test_overlapping_ramps_hand_the_torque_over_without_a_hole(upshift):
    plant, tr = upshift
    t = tr.time
    torque_phase = (t >= 0.3) & (t <= 0.45)
    passed = tr.column("torque_c1") + tr.column("torque_c2")
    # both clutches together keep passing the engine torque minus what accelerates the engine in 1st
    # (0.2 kg m^2 * 190 rad/s^2 = 38 N m before the shift)
    assert passed[torque_phase].min() > 0.75 * T_ENGINE
    # no tie-up: the off-going clutch never holds against the on-coming one by more than a few N m
    # (at the very end of the ramps clutch 2 passes a little more than the engine delivers)
    assert tr.column("torque_c1")[torque_phase].min() > -0.05 * T_ENGINE
    # and the engine does not flare: it stays on the 1st-gear line until the inertia phase
    w_first = plant.total_ratio(1) * tr.column("w_out")
    assert np.max(tr.column("w_engine")[torque_phase] - w_first[torque_phase]) < 2.0
    # the wheels keep being driven: the half-shaft torque stays near the gear's torque level
    level_2nd = T_ENGINE * plant.total_ratio(2)
    shift = (t >= 0.3) & (t <= 0.8)
    assert tr.column("driveshaft_torque")[shift].min() > 0.5 * level_2nd


def test_underlapped_ramps_leave_a_torque_hole_and_a_flare():
    """The same shift with clutch 1 released before clutch 2 rises: the checks above fail."""
    plant = make_plant(vehicle_speed_km_h=30.0, clutch_engaged="c1")
    tr = run(plant, upshift_inputs(overlap=False), 1.2)
    t = tr.time
    window = (t >= 0.3) & (t <= 0.45)
    passed = tr.column("torque_c1") + tr.column("torque_c2")
    assert passed[window].min() < 0.3 * T_ENGINE
    w_first = plant.total_ratio(1) * tr.column("w_out")
    assert np.max(tr.column("w_engine")[window] - w_first[window]) > 20.0  # the engine flares
    assert tr.column("gear")[-1] == 2  # the shift still completes


# -- physics -------------------------------------------------------------------------------------
def test_energy_balance_over_a_shift(upshift):
    """Kinetic + spring energy change = input + drag + damping + friction + impulse work."""
    plant, tr = upshift
    c = plant.core
    ke = c.kinetic_energy()
    pe = c.spring_energy()
    w = c.work
    # energy at the start (the same reset again)
    plant2 = make_plant(vehicle_speed_km_h=30.0, clutch_engaged="c1")
    plant2.reset(dict(upshift_inputs(True), p_c1=12.0, p_c2=0.0))
    e0 = plant2.core.kinetic_energy() + plant2.core.spring_energy()
    balance = (ke + pe) - e0 - float(np.sum(w))
    scale = float(np.sum(np.abs(w)))
    assert abs(balance) < 1e-8 * scale
    # the clutch energy outputs are the dissipated friction work
    y = plant.output_dict()
    assert y["energy_c1"] == pytest.approx(-w[L.W_ROW0 + 0], rel=1e-12)
    assert y["energy_c2"] == pytest.approx(-w[L.W_ROW0 + 1], rel=1e-12)
    assert y["energy_c1"] >= 0.0 and y["energy_c2"] > 1000.0  # the on-coming clutch slips most


def test_shift_converges_as_the_step_shrinks():
    """Lock-up time and final state converge at a high order (events are located inside the step)."""
    times, speeds = [], []
    for dt in (2e-3, 1e-3, 5e-4):
        plant = make_plant(vehicle_speed_km_h=30.0, clutch_engaged="c1")
        tr = run(plant, upshift_inputs(True), 1.0, dt=dt)
        times.append([e["time"] for e in tr.events if e["type"] == "stick"][0])
        speeds.append(tr.column("w_wheel")[-1])
    e1, e2 = abs(times[0] - times[2]), abs(times[1] - times[2])
    assert e2 < 2e-5 and e2 < e1 / 3.0
    assert abs(speeds[1] - speeds[2]) < 1e-6 * abs(speeds[2])


def test_a_launch_slips_the_clutch_then_locks_it():
    """From rest, engine at idle, 1st engaged: clutch 1 closes on the accelerating shaft."""
    plant = make_plant()
    inputs = {"engine_torque": [[0.0, 0.0], [0.1, 0.0], [0.3, 150.0]], "gear_odd": 1,
              "p_c1": [[0.0, 0.0], [0.1, 0.0], [0.1, 1.0], [0.3, 4.5], [1.5, 4.5], [1.6, 12.0]]}
    tr = run(plant, inputs, 2.0)
    assert tr.column("w_engine")[0] == 84.0 and tr.column("w_wheel")[0] == 0.0
    ev = [(e["clutch"], e["type"]) for e in tr.events]
    assert ("C1", "stick") in ev
    t_stick = next(e["time"] for e in tr.events if e["clutch"] == "C1")
    slipping = (tr.time > 0.35) & (tr.time < t_stick - 1e-3)
    # while it slips the clutch passes its Coulomb torque k = 0.12 * 8 * 0.075 * (A p - F_spring)
    # plus the oil-shear drag 0.02 N m s/rad * slip
    k = 0.12 * 8 * 0.075 * (0.0062 * tr.column("pressure_c1")[slipping] * 1e5 - 620.0)
    expected = k + 0.02 * tr.column("slip_c1")[slipping]
    np.testing.assert_allclose(tr.column("torque_c1")[slipping], expected, rtol=1e-12)
    assert tr.column("gear")[-1] == 1 and tr.column("vehicle_speed")[-1] > 10.0


def test_non_finite_input_leaves_the_state_untouched():
    """A NaN pressure or torque is refused by the core: no step, no change of state or gear selection."""
    plant, inputs = cruising_in_first()
    plant.reset(dict(inputs, gear_even=0))
    plant.step(1e-3)
    for name in ("p_c1", "p_c2", "engine_torque", "road_load"):
        df0, di0 = plant.get_state()
        k = plant.input_index(name)
        good = plant.u[k]
        plant.u[k] = math.nan
        plant.u[plant.input_index("gear_even")] = 2.0  # a valid new selection in the same refused step
        assert plant.step(1e-3) == L.ST_BAD_INPUT
        df1, di1 = plant.get_state()
        core = plant.core
        state = slice(int(plant.mi[L.DF_Y]), int(plant.mi[L.DF_Y]) + len(core.y))
        assert np.array_equal(df1[state], df0[state])
        assert np.array_equal(di1[int(plant.mi[L.DI_MODE]):int(plant.mi[L.DI_MODE]) + 4],
                              di0[int(plant.mi[L.DI_MODE]):int(plant.mi[L.DI_MODE]) + 4])
        assert plant.output_dict()["selected_even"] == 0 and plant.output_dict()["status"] == L.ST_BAD_INPUT
        assert core.coef_b[ROW_S_EVEN] == -plant.total_ratio(2)  # the spec's initial value, untouched
        plant.u[k] = good
        plant.u[plant.input_index("gear_even")] = 0.0
        assert plant.step(1e-3) == 0
