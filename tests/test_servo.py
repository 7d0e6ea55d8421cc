"""Electro-hydraulic servo with load-dependent dry friction and hard stops (Borello & Dalla Vedova).

Closed forms of the friction law (eqs. 3-4, FSD) on the bare mechanism, and
the paper's qualitative results (section 6) on the full servomechanism run
through the scenario files.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from plant_models.core import layout as L
from plant_models.config import ConfigError, ConfigReader
from plant_models.registry import load_plant
from plant_models.plants.servo import DEG, DF_STATE, DF_TIME, N_STATE, ServoActuatorPlant
from plant_models.readers.servo import read_servo
from server.offline.scenario import load_scenario

DT = 1.0e-3


def run_scenario(plant, scenario: str, dt: float = DT):
    """Run a scenario file through a plant; returns (time, outputs [steps+1, n_out], events)."""
    sc = load_scenario(scenario).compile(plant, dt)
    plant.reset(sc.initial_inputs())
    t = np.arange(sc.n_steps + 1) * sc.dt
    y = np.empty((sc.n_steps + 1, plant.n_out))
    y[0] = plant.y
    status = 0
    for k in range(sc.n_steps):
        sc.apply(plant, k)
        status |= plant.step(sc.dt)
        y[k + 1] = plant.y
    assert status == 0, L.status_names(status)
    return t, y, plant.new_events()


def col(plant, y, name):
    return y[:, plant.output_index(name)]


def with_params(plant, **changes) -> ServoActuatorPlant:
    return ServoActuatorPlant(dataclasses.replace(plant.params, **changes))


def hold(plant, seconds: float, dt: float = DT, **inputs):
    """Hold constant inputs for a while; returns positions (deg) and rates (deg/s) after each step."""
    for name, v in inputs.items():
        plant.set_input(name, v)
    n = int(round(seconds / dt))
    x = np.empty(n)
    w = np.empty(n)
    for k in range(n):
        assert plant.step(dt) == 0
        x[k] = plant.y[plant.output_index("position")]
        w[k] = plant.y[plant.output_index("rate")]
    return x, w


def stick_phases(events, t0, t1, min_length=2e-3):
    """(start, end) of the rest phases of the transmission between t0 and t1 lasting over min_length."""
    phases, start = [], None
    for e in events:
        if e["source"] != "transmission":
            continue
        if e["type"] == "stick":
            start = e["time"]
        elif e["type"] == "breakaway" and start is not None:
            if e["time"] - start > min_length and t0 < start < t1:
                phases.append((start, e["time"]))
            start = None
    return phases


@pytest.fixture(scope="module")
def rev():
    return load_plant("servo")


@pytest.fixture(scope="module")
def irr():
    return load_plant("servo_irreversible")


# --------------------------------------------------------------------------
# the friction law on the bare mechanism (supply pressure zero: no motor drive)
# --------------------------------------------------------------------------
def test_default_configs_are_one_reversible_and_one_irreversible(rev, irr):
    assert rev.params.reversible and rev.describe()["transmission"] == "reversible"
    assert not irr.params.reversible and irr.describe()["transmission"] == "irreversible"


@pytest.mark.parametrize("load", [74500.0, -74500.0, 1.0e6])
def test_irreversible_does_not_move_under_load_alone(irr, load):
    p = with_params(irr)
    p.reset({"position_command": 2.0, "supply_pressure": 0.0})
    x, w = hold(p, 1.0, load_torque=load)
    assert np.all(x == 2.0) and np.all(w == 0.0)
    # the static friction balances the load exactly: T_FR = Act = -T_LD
    assert p.y[p.output_index("friction_torque")] == pytest.approx(-load, rel=1e-12)
    assert p.y[p.output_index("stuck")] == 1
    assert not [e for e in p.new_events() if e["type"] == "breakaway"]


def test_reversible_breakaway_under_load_alone_at_the_static_limit(rev):
    """At rest the aiding load must exceed FSD * FDA = FSD (T_FR0 + (1 - EtA) |T_LD|) (eq. 4, statement 8)."""
    pr = rev.params
    threshold = pr.static_to_dynamic * pr.friction_load_independent_N_m / (
        1.0 - pr.static_to_dynamic * (1.0 - pr.efficiency_aiding))
    for factor, moves in ((0.999, False), (1.001, True)):
        p = with_params(rev)
        p.reset({"position_command": 0.0, "supply_pressure": 0.0})
        x, _ = hold(p, 0.2, load_torque=factor * threshold)
        assert (x[-1] < 0.0) == moves, factor


def test_reversible_back_driven_at_the_closed_form_rate(rev):
    """Sliding with an aiding load: J w' = -T_LD + FDA - D w, so w -> -(T_LD - FDA) / D (eq. 4).

    D = C_M + Dis^2 R_Q / (1 + R_Q C_L): with no supply the valve only resists the flow.
    """
    pr = rev.params
    load = 50000.0
    fda = pr.friction_load_independent_N_m + (1.0 - pr.efficiency_aiding) * load
    d = pr.viscous_N_m_s_per_rad + pr.displacement_m3_per_rad ** 2 * pr.pressure_flow_Pa_s_per_m3 / (
        1.0 + pr.pressure_flow_Pa_s_per_m3 * pr.leakage_m3_per_s_Pa)
    p = with_params(rev)
    p.reset({"position_command": 5.0, "supply_pressure": 0.0})
    _, w = hold(p, 0.05, load_torque=load)
    assert w[-1] == pytest.approx(-(load - fda) / d / DEG, rel=1e-9)
    assert p.y[p.output_index("friction_torque")] == pytest.approx(-fda, rel=1e-12)


def test_opposing_and_aiding_dynamic_friction_use_their_own_efficiency(rev):
    """With a negative load the same negative motion is opposed: the friction is FDO (eq. 3)."""
    pr = rev.params
    load = -20000.0  # pushes towards positive positions
    fdo = pr.friction_load_independent_N_m + (1.0 / pr.efficiency_opposing - 1.0) * abs(load)
    fda = pr.friction_load_independent_N_m + (1.0 - pr.efficiency_aiding) * abs(load)
    p = with_params(rev)
    p.reset({"position_command": 0.0, "supply_pressure": 0.0})
    _, w = hold(p, 0.05, load_torque=load)
    assert w[-1] > 0.0  # aided by the load
    assert p.y[p.output_index("friction_torque")] == pytest.approx(fda, rel=1e-12)
    # now drive it the other way with the servo against the same load: opposed, friction FDO
    p.set_input("supply_pressure", 26.0)
    p.set_input("position_command", -5.0)
    _, w = hold(p, 0.3)
    assert w[-1] < 0.0
    assert p.y[p.output_index("friction_torque")] == pytest.approx(-fdo, rel=1e-12)


# --------------------------------------------------------------------------
# the paper's runs (section 6)
# --------------------------------------------------------------------------
def test_load_step_moves_the_reversible_servo_but_not_the_irreversible_one(rev, irr):
    """Figs. 11-12: a 74 500 N m load step at 0.02 s; the ramp command starts at 0.07 s."""
    t, y, _ = run_scenario(rev, "servo_load_step_ramp")
    x = col(rev, y, "position")
    before = x[t <= 0.02]
    assert np.all(before == 0.1)
    assert x[int(round(0.06 / DT))] < 0.1 - 0.01  # yields to the load until the servo stiffness balances it
    t, y, _ = run_scenario(irr, "servo_load_step_ramp")
    x = col(irr, y, "position")
    assert np.all(x[t <= 0.07] == 0.1)  # no movement at all under the load step
    # with a negative ramp and the load aiding, the irreversible servo breaks away only once the
    # error is negative (the motor has to drive), the reversible one with a positive error (Figs. 11-12)
    err = col(irr, y, "position_error")
    w = col(irr, y, "rate")
    first = np.argmax(w < 0.0)
    assert 0.07 < t[first] < 0.2 and err[first] < 0.0
    assert np.all(err[(t > 0.12) & (t < 0.2)] < 0.0)
    t, y, _ = run_scenario(rev, "servo_load_step_ramp")
    assert np.all(col(rev, y, "position_error")[(t > 0.12) & (t < 0.2)] > 0.0)  # the load leads: brake
    # without load both errors take the sign of the ramp slope
    for plant in (rev, irr):
        t, y, _ = run_scenario(plant, "servo_load_step_ramp")
        assert np.all(col(plant, y, "position_error")[t > 0.3] < 0.0)


def test_ramp_tracking_reversible_leads_with_aiding_load(rev, irr):
    """Figs. 14-15: the reversible servo lags less than the irreversible one; with the load aiding a slow
    ramp (ramping down against a positive load) the reversible position even leads the command."""
    t, y, _ = run_scenario(rev, "servo_ramp_tracking")
    e_rev = col(rev, y, "position_error")
    t, y, _ = run_scenario(irr, "servo_ramp_tracking")
    e_irr = col(irr, y, "position_error")
    up = (t > 0.2) & (t < 0.5)
    down = (t > 0.6) & (t < 0.9)
    assert 0.0 < e_rev[up].mean() < e_irr[up].mean()  # opposing load: both lag, the reversible less
    assert e_rev[down].mean() > 0.0 > e_irr[down].mean()  # aiding: reversible leads, irreversible lags


def test_reversible_servo_is_back_driven_when_the_supply_pressure_drops(rev):
    """Fig. 6: deploying against 74 500 N m, PSR 26 -> 5 MPa: stop, reverse (load wins), stop, recover."""
    t, y, ev = run_scenario(rev, "servo_deploy_pressure_drop")
    x, w = col(rev, y, "position"), col(rev, y, "rate")
    drop = (t > 0.35) & (t < 0.65)
    assert w[(t > 0.15) & (t < 0.3)].min() > 1.0  # deploying at a steady rate before the drop
    assert w[drop].min() < -0.5  # back-driven by the load
    assert x[t > 0.3].min() < x[np.argmin(np.abs(t - 0.3))] - 0.1
    assert np.all(w[t > 0.85] >= 0.0)  # recovered
    assert x[-1] == pytest.approx(1.5, abs=0.1)  # reached, with the error the load and friction leave
    kinds = [e["type"] for e in ev if 0.3 < e["time"] < 0.8]
    assert kinds[:3] == ["stick", "breakaway", "stick"]


def test_irreversible_servo_holds_when_the_supply_pressure_drops(irr):
    """Fig. 8: the same run with an irreversible transmission stalls and holds: no back movement."""
    t, y, _ = run_scenario(irr, "servo_deploy_pressure_drop")
    x, w = col(irr, y, "position"), col(irr, y, "rate")
    assert np.all(w >= 0.0)
    stall = (t > 0.4) & (t < 0.6)
    assert np.all(col(irr, y, "stuck")[stall] == 1)
    assert np.ptp(x[stall]) == 0.0
    assert x[-1] > 1.4


def test_retraction_with_aiding_load_and_supply_drop(rev, irr):
    """Figs. 7, 9, 10: reversible and mildly irreversible (EtA = -0.2) keep moving, EtA = -0.4 stalls."""
    t, y, _ = run_scenario(rev, "servo_retract_pressure_drop")
    drop = (t > 0.3) & (t < 0.8)
    assert col(rev, y, "rate")[drop].max() < -1.0
    t, y, _ = run_scenario(irr, "servo_retract_4deg_pressure_drop")
    assert irr.params.efficiency_aiding == -0.2
    assert col(irr, y, "rate")[drop].max() < -0.1
    strong = with_params(irr, efficiency_aiding=-0.4)
    t, y, _ = run_scenario(strong, "servo_retract_4deg_pressure_drop")
    stuck = col(strong, y, "stuck")
    assert np.all(stuck[(t > 0.45) & (t < 0.6)] == 1)
    assert col(strong, y, "position")[-1] < 1.5  # the recovery brings it on towards 0


def test_slow_ramp_gives_stick_slip_steps_bigger_at_lower_efficiency(rev, irr):
    """Figs. 16-17: +-0.025 deg/s ramps under 25 000 N m: stick-slip steps; bigger for the irreversible
    (lower efficiency) transmission, and bigger when the load aids the motion."""
    sizes = {}
    for name, plant in (("reversible", rev), ("irreversible", irr)):
        t, y, ev = run_scenario(plant, "servo_slow_ramp_stick_slip")
        x = col(plant, y, "position")
        for half, (a, b) in (("opposing", (0.3, 2.0)), ("aiding", (2.3, 3.95))):
            phases = stick_phases(ev, a, b)
            assert len(phases) >= 3, (name, half)
            rest = [x[np.argmin(np.abs(t - 0.5 * (s + e)))] for s, e in phases]
            steps = np.abs(np.diff(rest))
            assert steps.min() > 0.5 * steps.mean()  # regular steps, not noise
            sizes[name, half] = steps.mean()
    for half in ("opposing", "aiding"):
        assert sizes["irreversible", half] > 1.1 * sizes["reversible", half]
    for name in ("reversible", "irreversible"):
        assert sizes[name, "aiding"] > sizes[name, "opposing"]


def test_stick_slip_steps_converge_with_the_internal_step(rev):
    sizes = []
    for h in (2.0e-5, 5.0e-6):
        p = with_params(rev, internal_step_s=h)
        t, y, ev = run_scenario(p, "servo_slow_ramp_stick_slip")
        x = col(p, y, "position")
        rest = [x[np.argmin(np.abs(t - 0.5 * (s + e)))] for s, e in stick_phases(ev, 0.3, 2.0)]
        sizes.append((len(rest), np.abs(np.diff(rest)).mean()))
    assert sizes[0][0] == sizes[1][0]
    assert sizes[0][1] == pytest.approx(sizes[1][1], rel=1e-3)


def test_position_converges_at_first_order_in_the_internal_step(rev):
    """Table 1 is a first-order scheme: halving the sub-step halves the error."""
    finals = []
    for h in (4.0e-5, 2.0e-5, 1.0e-5):
        p = with_params(rev, internal_step_s=h)
        t, y, _ = run_scenario(p, "servo_deploy_pressure_drop")
        finals.append(col(p, y, "position")[int(round(0.35 / DT))])
    e1, e2 = abs(finals[0] - finals[1]), abs(finals[1] - finals[2])
    assert 1.5 < e1 / e2 < 2.7


def test_hard_stops_hold_and_release(rev):
    t, y, ev = run_scenario(rev, "servo_hard_stops")
    x, w = col(rev, y, "position"), col(rev, y, "rate")
    at_stop = col(rev, y, "at_stop")
    stop_tq = col(rev, y, "stop_torque")
    assert x.max() == 10.0 and x.min() == -10.0  # never beyond, exactly on the stop
    upper = (t > 2.4) & (t < 3.0)
    assert np.all(x[upper] == 10.0) and np.all(w[upper] == 0.0) and np.all(at_stop[upper] == 1)
    assert np.all(stop_tq[upper] > 0.0)  # pushed into the upper stop
    lower = (t > 6.3) & (t < 7.5)
    assert np.all(x[lower] == -10.0) and np.all(w[lower] == 0.0) and np.all(at_stop[lower] == -1)
    assert np.all(stop_tq[lower] < 0.0)
    # released promptly by the reversed commands (spool lag ~10 ms), and moving away at once
    stops = [(e["time"], e["source"], e["type"]) for e in ev if e["source"] != "transmission"]
    assert [s[1:] for s in stops] == [("upper_stop", "stop_hit"), ("upper_stop", "stop_release"),
                                      ("lower_stop", "stop_hit"), ("lower_stop", "stop_release")]
    assert 3.0 < stops[1][0] < 3.05 and 7.5 < stops[3][0] < 7.55
    assert w[np.argmin(np.abs(t - 3.1))] < -1.0 and w[np.argmin(np.abs(t - 7.6))] > 1.0


def test_hard_stop_releases_a_load_driven_surface(rev):
    """No supply: a reversible surface pushed onto the lower stop by the load leaves it when the load reverses."""
    p = with_params(rev)
    p.reset({"position_command": -9.9, "supply_pressure": 0.0})
    x, w = hold(p, 0.5, load_torque=60000.0)
    assert x[-1] == -10.0 and w[-1] == 0.0 and p.y[p.output_index("at_stop")] == -1
    x, w = hold(p, 0.05, load_torque=-60000.0)
    assert x[-1] > -10.0 and w[-1] > 0.0 and p.y[p.output_index("at_stop")] == 0


# --------------------------------------------------------------------------
# robustness and state
# --------------------------------------------------------------------------
def test_bad_inputs_leave_the_state_untouched(rev):
    p = with_params(rev)
    p.reset({"position_command": 1.0})
    hold(p, 0.05, position_command=2.0)
    before = p.get_state()
    for k, v in ((0, math.nan), (1, math.inf), (2, -math.inf)):
        saved = p.u[k]
        p.u[k] = v
        assert p.step(DT) == L.ST_BAD_INPUT
        p.u[k] = saved
    assert p.step(0.0) == L.ST_BAD_INPUT and p.step(math.nan) == L.ST_BAD_INPUT
    after = p.get_state()
    state = slice(DF_STATE, DF_STATE + N_STATE)  # rate, position, valve states
    assert np.array_equal(before[0][state], after[0][state])
    assert p.time == before[0][DF_TIME]
    assert p.step(DT) == 0


def test_state_round_trip_is_bit_exact(rev):
    p = with_params(rev)
    p.reset({"position_command": 0.0})
    p.set_input("load_torque", 25000.0)
    p.set_input("position_command", 0.01, rate=0.025)
    for _ in range(300):
        p.step(DT)
    saved = p.get_state()
    a = [p.step(DT) or p.y.copy() for _ in range(200)]
    p.set_state(saved)
    b = [p.step(DT) or p.y.copy() for _ in range(200)]
    assert all(np.array_equal(u, v) for u, v in zip(a, b))


@pytest.mark.parametrize("key,value,message", [
    ("efficiency_opposing", 0.0, "must lie in (0, 1]"),
    ("efficiency_opposing", 1.2, "must lie in (0, 1]"),
    ("efficiency_aiding", 1.5, "must lie in [-10, 1]"),
    ("static_to_dynamic_ratio", 0.9, "must be >= 1"),
    ("travel_max_deg", -20.0, "must be greater than travel_min_deg"),
    ("inertia_kg_m2", -1.0, "must be > 0"),
    ("efficiency_opposing", "high", "must be a number"),
])
def test_config_errors_name_file_key_and_problem(key, value, message):
    from plant_models.config import load_toml, resolve_config

    path = resolve_config("servo")
    data = load_toml(path)
    data["transmission"][key] = value
    with pytest.raises(ConfigError) as exc:
        read_servo(ConfigReader(data, "servo.toml"))
    assert str(exc.value).startswith(f"servo.toml: transmission.{key}: ")
    assert message in str(exc.value)


def test_config_rejects_unknown_keys_and_a_too_long_internal_step():
    from plant_models.config import load_toml, resolve_config

    data = load_toml(resolve_config("servo"))
    data["servovalve"]["pressure_gain"] = 1.0
    with pytest.raises(ConfigError, match=r"servovalve.pressure_gain: unknown key"):
        read_servo(ConfigReader(data, "servo.toml"))
    data = load_toml(resolve_config("servo"))
    data["numerics"]["internal_step_s"] = 5e-4
    with pytest.raises(ConfigError, match=r"numerics.internal_step_s: too long for the first stage"):
        read_servo(ConfigReader(data, "servo.toml"))


def test_offline_run_and_figures(tmp_path, irr):
    """The simulator's run loop serves the plant; the plant's own figures are written."""
    from server.plots import plot_trace
    from server.offline.run import events_document, run_offline

    sc = load_scenario("servo_deploy_pressure_drop")
    trace = run_offline(irr, sc.compile(irr))
    doc = events_document(irr, trace, "servo_irreversible", sc.source, 1e-3)
    assert doc["events"][0] == dict(time=doc["events"][0]["time"], clutch="transmission", type="breakaway")
    files = plot_trace(irr, trace, tmp_path, sc.description)  # the figures chosen for its kind
    assert [f.name for f in files] == ["servo.png", "servo_friction.png"]
    assert all(f.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and f.stat().st_size > 20000 for f in files)
