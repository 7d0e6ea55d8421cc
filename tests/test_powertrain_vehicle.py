"""The vehicle around a described transmission: road load as the force law, rolling resistance and service
brake as exact friction rows (docs/powertrain.md)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from plant_models.core import layout as L
from plant_models.powertrain.components import work_accounts
from plant_models.powertrain.components import GRAVITY
from plant_models.registry import load_plant

MASS, RADIUS, FD, CDA, RHO = 1500.0, 0.30, 3.0, 0.7, 1.2
J_OUT = 0.5  # the output member's own inertia, kg m^2
PER_BAR = 40.0  # brake torque per bar at the wheels, N m


def vehicle_config(tmp_path, rolling=0.012, drag_area=CDA, extra=""):
    """Two members, an open clutch between them (no oil drag), the vehicle on the output."""
    text = f'''
plant = "transmission"
name = "vehicle on a one-clutch box"
[[member]]
name = "input"
inertia_kg_m2 = 0.2
[[member]]
name = "output"
inertia_kg_m2 = {J_OUT}
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
[input]
member = "input"
[output]
member = "output"
[gears]
1 = ["C"]
[vehicle]
mass_kg = {MASS}
wheel_radius_m = {RADIUS}
final_drive = {FD}
drag_area_m2 = {drag_area}
air_density_kg_m3 = {RHO}
rolling_coefficient = {rolling}
[vehicle.brake]
torque_per_bar_N_m = {PER_BAR}
{extra}
'''
    p = tmp_path / "vehicle.toml"
    p.write_text(text)
    return str(p)


def _m_eff():
    """The mass the road load accelerates: every inertia on the output, seen at the wheels' rim, kg."""
    rfd = RADIUS / FD
    return (J_OUT + MASS * rfd ** 2) / rfd ** 2


def coast(path, v0, dt, t_end):
    plant = load_plant(path)
    plant.reset({"p_C": 0.0, "p_brake": 0.0, "grade_percent": 0.0})
    c = plant.core
    out = plant.params.reduction.coordinates.index(plant.params.description.member_index("output"))
    c.omega[out] = v0 * FD / RADIUS
    plant.start()
    for _ in range(int(round(t_end / dt))):
        plant.step(dt)
    return plant, plant.output_dict()["vehicle_speed"]


def analytic_speed(v0, t, rolling):
    a = rolling * MASS * GRAVITY / _m_eff()
    b = 0.5 * RHO * CDA / _m_eff()
    return math.sqrt(a / b) * math.tan(math.atan(v0 * math.sqrt(b / a)) - math.sqrt(a * b) * t)


def test_vehicle_is_reflected_onto_the_output(tmp_path):
    plant = load_plant(vehicle_config(tmp_path))
    d = plant.params.description
    assert d.members[d.member_index("output")].inertia == pytest.approx(J_OUT + MASS * (RADIUS / FD) ** 2, rel=1e-15)
    assert [e.name for e in d.elements] == ["C", "brake", "rolling"]
    names = [s.name for s in plant.inputs]
    assert "grade_percent" in names and "p_brake" in names
    assert plant.core.mi[L.H_FN_LAW] != 0


def test_coast_down_matches_the_closed_form_and_converges(tmp_path):
    """v' = -(a + b v^2) over 20 s: 4th order in dt (RK4 on the aerodynamic drag; the rolling resistance is
    a slipping friction row of constant force); at a real-time step the error is rounding."""
    path = vehicle_config(tmp_path)
    v0, t_end = 35.0, 20.0
    exact = analytic_speed(v0, t_end, 0.012)
    assert exact > 10.0
    errors = []
    for dt in (0.8, 0.4, 0.2):
        plant, v = coast(path, v0, dt, t_end)
        errors.append(abs(v - exact))
        assert plant.core.mode[2] == L.MODE_SLIP  # rolling resistance: Coulomb friction while rolling
    orders = [math.log2(a / b) for a, b in zip(errors, errors[1:])]
    assert all(3.7 < q < 4.3 for q in orders), orders
    _, v = coast(path, v0, 1e-3, t_end)
    assert abs(v - exact) < 1e-12 * exact


def test_coast_down_energy_balance(tmp_path):
    plant, _ = coast(vehicle_config(tmp_path), 35.0, 2e-3, 10.0)
    c = plant.core
    v0 = 35.0
    ke0 = 0.5 * _m_eff() * v0 ** 2 + 0.0
    ke = c.kinetic_energy()
    work = float(np.sum(c.work) + c.law_work[0])
    assert ke - ke0 == pytest.approx(work, rel=1e-9)
    # the law's account is the sum of its components' (aerodynamic drag, grade 0)
    z = work_accounts(plant.params.powertrain, c.law_z)
    assert c.law_work[0] == pytest.approx(z["work_aero"] + z["work_grade"], rel=1e-12)
    assert z["work_aero"] < 0.0


@pytest.mark.parametrize("dt", [1e-3, 2.5e-4])
def test_brake_holds_on_a_grade_and_breaks_away_in_the_step_where_the_grade_exceeds_it(tmp_path, dt):
    plant = load_plant(vehicle_config(tmp_path, rolling=0.0))
    pressure, rate = 20.0, 4.0  # bar; grade rises 4 %/s
    plant.reset({"p_C": 0.0, "p_brake": pressure, "grade_percent": 0.0})
    brake = [e.name for e in plant.params.description.elements].index("brake")
    c = plant.core
    assert c.mode[brake] == L.MODE_STUCK
    cap = PER_BAR * pressure / FD  # at the output member
    rfd = RADIUS / FD
    sin_star = cap / (MASS * GRAVITY * rfd)
    t_star = 100.0 * math.tan(math.asin(sin_star)) / rate
    k_star = int(t_star / dt)
    assert k_star * dt < t_star < (k_star + 1) * dt
    gi = plant.input_index("grade_percent")
    ys = []
    for k in range(k_star + 3):
        plant.u[gi] = rate * k * dt
        plant.u_rate[gi] = rate
        plant.step(dt)
        ys.append(plant.output_dict())
        if k < k_star:
            assert c.mode[brake] == L.MODE_STUCK
            assert ys[-1]["vehicle_speed"] == 0.0 and math.copysign(1.0, ys[-1]["vehicle_speed"]) == 1.0
            assert ys[-1]["torque_brake"] == pytest.approx(MASS * GRAVITY * rfd * (rate * (k + 1) * dt / 100.0)
                                                           / math.hypot(1.0, rate * (k + 1) * dt / 100.0),
                                                           rel=1e-12)
    for y in ys[k_star:]:
        assert y["vehicle_speed"] < 0.0  # rolls back
    ev = [e for e in c.new_events() if e[1] == brake]
    assert [kind for _, _, kind in ev] == [L.EV_BREAKAWAY]
    assert ev[0][0] == pytest.approx(t_star, abs=1e-9 * t_star)
    assert k_star * dt < ev[0][0] < (k_star + 1) * dt
