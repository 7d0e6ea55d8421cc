"""The electric motor component (plant_models/powertrain/motor.py; docs/powertrain.md, section 4e) on the 8HP
car as a P2 hybrid (configs/zf8hp_car_p2.toml): its torque on the limit curve, its efficiency map's closed
form, and the energy balance with its electrical energy, from the outputs alone, to 1e-9."""

from __future__ import annotations

import math

import numpy as np
import pytest

from plant_models.config import repo_root
from plant_models.registry import describe_config, load_plant
from server.offline.run import run_offline
from server.offline.scenario import load_scenario
from test_powertrain_modules import _balance

ROOT = repo_root()
RPM = 2.0 * math.pi / 60.0
T_MAX, W_BASE = 250.0, 3170.0 * RPM  # configs/zf8hp_car_p2.toml
K_C, K_I, K_W = 0.05, 2.0, 1.0e-6


@pytest.fixture(scope="module")
def car():
    return load_plant("zf8hp_car_p2")


def _at(plant, w: float, command: float) -> dict:
    """The outputs with the engine member (the rotor) at speed w (rad/s) and the motor's command (N m)."""
    plant.reset({"motor_torque_command": command, "p_brake": 30.0})
    c = plant.core
    d = plant.params.description
    coords = plant.params.reduction.coordinates
    c.omega[coords.index(d.member_index("engine"))] = w
    plant.compiled["refresh"](plant.mf, plant.mi, plant.df, plant.di, 0)
    return plant.output_dict()


def test_the_motor_is_a_component_of_the_p2_car():
    comp = describe_config("zf8hp_car_p2")["components"]
    assert comp["motor"]["member"] == "engine"
    assert comp["motor"]["max_power_kW"] == pytest.approx(T_MAX * W_BASE / 1e3, abs=0.01)
    assert set(comp) == {"engine", "torque_converter", "vehicle", "motor"}


@pytest.mark.parametrize("rpm", [0.0, 800.0, 2000.0, 3170.0, 3500.0, 5000.0, 7000.0])
def test_the_torque_follows_the_limit_curve(car, rpm):
    """Constant torque to the base speed, constant power above: a command beyond the limit gives exactly the
    limit, either sign; a command inside it is applied as it is."""
    w = rpm * RPM
    limit = T_MAX if w <= W_BASE else T_MAX * W_BASE / w
    y = _at(car, w, 1.0e4)
    assert y["motor_torque_limit"] == pytest.approx(limit, rel=1e-15)
    assert y["motor_torque"] == y["motor_torque_limit"]
    if w > W_BASE:
        assert y["motor_torque"] * w == pytest.approx(T_MAX * W_BASE, rel=1e-14)  # the constant power
    assert _at(car, w, -1.0e4)["motor_torque"] == -y["motor_torque_limit"]
    assert _at(car, w, 0.5 * limit)["motor_torque"] == 0.5 * limit


@pytest.mark.parametrize("rpm,torque", [(1000.0, 200.0), (2865.0, 150.0), (3170.0, 250.0), (5000.0, -100.0),
                                        (1500.0, -250.0), (3000.0, 0.0)])
def test_the_electrical_power_is_the_closed_form_of_the_loss_map(car, rpm, torque):
    """P_el = T w + k_c T^2 + k_i |w| + k_w |w|^3 (Larminie and Lowry); efficiency T w / P_el motoring,
    P_el / (T w) generating."""
    w = rpm * RPM
    y = _at(car, w, torque)
    assert y["motor_torque"] == torque
    p_el = torque * w + K_C * torque ** 2 + K_I * w + K_W * w ** 3
    assert y["motor_electrical_power"] == pytest.approx(p_el, rel=1e-13)
    if torque > 0.0:
        assert 0.0 < torque * w / y["motor_electrical_power"] < 1.0
    elif torque < 0.0:
        assert 0.0 < y["motor_electrical_power"] / (torque * w) < 1.0


def test_the_documented_efficiencies():
    """The config's comment and docs/powertrain.md: 95.6 % at full torque at the base speed, 96.3 % at 150 N m
    and 2865 rpm."""
    def eff(t, w):
        return t * w / (t * w + K_C * t * t + K_I * w + K_W * w ** 3)
    assert round(eff(T_MAX, W_BASE), 3) == 0.956
    assert round(eff(150.0, 2865.0 * RPM), 3) == 0.963


@pytest.fixture(scope="module")
def launch():
    plant = load_plant("zf8hp_car_p2")
    sc = load_scenario("zf8hp_car_p2_launch").compile(plant)
    plant.reset(sc.start_inputs())
    return plant, run_offline(plant, sc)


def _col(res, name):
    return res.values[:, list(res.names).index(name)]


def test_the_launch_boosts_at_the_limit_and_recuperates(launch):
    plant, res = launch
    t = res.time
    torque, limit = _col(res, "motor_torque"), _col(res, "motor_torque_limit")
    boost = (t > 0.9) & (t < 2.0)
    assert np.array_equal(torque[boost], limit[boost])  # a command of 300 N m held at the limit
    w = _col(res, "w_engine")[boost]
    curve = np.where(np.abs(w) <= W_BASE, T_MAX, T_MAX * W_BASE / np.abs(w))
    assert np.allclose(limit[boost], curve, rtol=1e-14, atol=0.0)  # the limit curve at the rotor's speed
    assert (limit[boost] == T_MAX).any() and (limit[boost] < T_MAX).any()  # both regions: the engine revs past
    e = _col(res, "work_motor_electrical")
    assert e[t <= 2.5][-1] > 1e5  # the boost drew over 100 kJ
    regen = (t > 4.9) & (t < 6.0)
    assert np.all(_col(res, "motor_electrical_power")[regen] < 0.0)  # generating: energy returned
    assert e[-1] < e[t <= 4.8][-1]
    assert _col(res, "gear")[-1] == 2 and _col(res, "vehicle_speed")[-1] >= 0.0


def test_the_energy_balance_closes_with_the_electrical_energy(launch):
    """engine work + electrical energy = dissipated energies + the motor's loss + converter, drag, impulse and
    road work + change of kinetic energy, at every row, to 1e-9 of the sources, from the outputs alone."""
    plant, res = launch
    names = list(res.names)
    sources, residual = _balance(names, res.values)
    assert np.abs(residual).max() <= 1e-9 * np.abs(sources).max()
    loss = _col(res, "work_motor_electrical") - _col(res, "work_motor")
    assert np.all(np.diff(loss) >= -1e-9)  # the motor's loss only grows


def test_a_motor_on_a_member_that_is_no_independent_speed(tmp_path):
    """Any member is a port: on a member geared to others (read and driven through its row of T) the balance
    closes as well, and the motor's speed is the member's."""
    plant = load_plant("zf8hp_car")
    d, coords = plant.params.description, plant.params.reduction.coordinates
    member = next(m.name for k, m in enumerate(d.members) if k not in coords)
    base = (ROOT / "configs" / "zf8hp_car.toml").as_posix()
    (tmp_path / "geared.toml").write_text(
        f'extends = "{base}"\n[motor]\nmember = "{member}"\nmax_torque_N_m = 80.0\nbase_speed_rpm = 3000.0\n'
        f"copper_loss_W_per_N2_m2 = 0.05\niron_loss_W_s_per_rad = 2.0\nwindage_loss_W_s3_per_rad3 = 1e-6\n")
    plant = load_plant(tmp_path / "geared.toml")
    sc = load_scenario("zf8hp_car_p2_launch").compile(plant)
    plant.reset(sc.start_inputs())
    res = run_offline(plant, sc)
    w = _col(res, f"w_{member}")
    p0 = _col(res, "motor_electrical_power") - _col(res, "motor_torque") * w
    tq = _col(res, "motor_torque")
    expected = K_C * tq ** 2 + K_I * np.abs(w) + K_W * np.abs(w) ** 3
    assert np.allclose(p0, expected, rtol=1e-9, atol=1e-6)
    assert np.abs(tq).max() > 0.0
    sources, residual = _balance(list(res.names), res.values)
    assert np.abs(residual).max() <= 1e-9 * np.abs(sources).max()


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    from server_support import ServerProcess

    srv = ServerProcess(tmp_path_factory.mktemp("zf8hp_car_p2_lockstep"), plant="zf8hp_car_p2", mode="lockstep")
    yield srv
    srv.shutdown()


def test_the_served_p2_car_equals_the_offline_run_bit_for_bit(served, launch):
    """Lockstep = offline with the motor boosting, at its limit and generating: every output, every 500th tick."""
    _, offline = launch
    with served.client() as hil:
        names = hil.output_names
        assert names == list(offline.names)
        n = hil.load_scenario("zf8hp_car_p2_launch")["n_steps"]
        assert n == offline.values.shape[0] - 1
        k = 0
        while k < n:
            r = hil.step(min(500, n - k))
            k = r.tick
            got = np.array([r.y[nm] for nm in names])
            bad = [nm for nm, a, b in zip(names, got, offline.values[k]) if a.view(np.int64) != b.view(np.int64)]
            assert not bad, f"tick {k}: lockstep differs from the offline run in {bad}"
        assert r.scenario_finished is True
