"""The idle governor starts settled: a car standing at idle holds its engine speed from the first step
(plant_models/powertrain/idle.py, docs/powertrain.md section 2)."""

from __future__ import annotations

import numpy as np

from plant_models.config import repo_root
from plant_models.powertrain.components import RPM
from plant_models.powertrain.idle import governor_range
from plant_models.registry import load_plant

CAR = repo_root() / "configs" / "zf8hp_car.toml"
STANDING_IN_FIRST = dict(p_A=12.0, p_B=12.0, p_C=12.0, p_brake=30.0)  # zf8hp_car_drive.toml at t = 0


def _stand(plant, seconds: float = 1.0):
    """Engine speed (rad/s) and governor integral (rad) at reset and after every 1 ms step."""
    plant.reset(STANDING_IN_FIRST)
    w = plant.output_index("w_engine")
    speeds, integrals = [plant.y[w]], [plant.core.law_z[0]]
    for _ in range(round(seconds / 1e-3)):
        plant.step(1e-3)
        speeds.append(plant.y[w])
        integrals.append(plant.core.law_z[0])
    return np.array(speeds), np.array(integrals)


def test_a_car_standing_at_its_idle_speed_in_first_holds_it_for_a_second(tmp_path):
    """Started at exactly its idle speed against the stalled converter, brake on: nothing moves.  Before, the
    integral started at zero and the engine dipped from 700 to about 596 rpm in the first 0.1 s."""
    idle = 700.0 * RPM
    cfg = tmp_path / "car.toml"
    cfg.write_text(CAR.read_text().replace("speeds_rad_s = { engine = 73.3,", f"speeds_rad_s = {{ engine = {idle!r},"))
    speeds, integrals = _stand(load_plant(cfg))
    assert speeds[0] == idle
    assert np.max(np.abs(speeds - idle)) < 1e-9
    assert integrals[0] > 0.0  # the governor carries the converter's and the engine's drag: not zero
    assert np.max(np.abs(integrals - integrals[0])) < 1e-9


def test_the_shipped_car_starting_near_idle_moves_by_its_distance_from_idle_only():
    """configs/zf8hp_car.toml starts the engine at 73.3 rad/s, 0.0038 rad/s below 700 rpm: the governor closes
    that gap and the engine moves by no more than it (before: a dip of about 11 rad/s)."""
    speeds, integrals = _stand(load_plant(CAR))
    gap = 700.0 * RPM - 73.3
    assert np.max(np.abs(speeds - 73.3)) < 1.05 * gap
    assert abs(speeds[-1] - 700.0 * RPM) < 0.1 * gap
    assert np.max(np.abs(integrals - integrals[0])) < 1e-3 * integrals[0]


def test_the_settled_integral_balances_the_stalled_converter_and_the_engine_drag():
    """A closed form: at idle with the turbine held, the governor's torque ki g equals the impeller's
    (w / K(0))^2, the open lock-up clutch's oil shear c w (its viscous_N_m_s_per_rad, 0.005) and the drag
    curve's |T(w)|: the engine member has no other load (no drag of its own in the config)."""
    plant = load_plant(CAR)
    plant.reset(STANDING_IN_FIRST)
    e = plant.params.powertrain.engine
    w = plant.y[plant.output_index("w_engine")]
    k0 = 110.0 * RPM  # K(0), rad/s per sqrt(N m)
    shear = 0.005 * w  # the turbine stands: the lock-up clutch slips at w
    load = (w / k0) ** 2 + shear - np.interp(w, *zip(*e.drag))
    governor = e.governor_kp * (e.idle_speed - w) + e.governor_ki * plant.core.law_z[0]
    assert abs(governor - load) < 1e-9 * load
    impeller = plant.y[plant.output_index("impeller_torque")]
    assert abs(plant.y[plant.output_index("engine_torque")] - (impeller + shear)) < 1e-9 * load


def test_an_engine_started_away_from_idle_keeps_the_integral_at_zero(tmp_path):
    """No settled state off idle (the integral winds down as the engine returns): the start is unchanged."""
    cfg = tmp_path / "car.toml"
    cfg.write_text(CAR.read_text().replace("speeds_rad_s = { engine = 73.3,", "speeds_rad_s = { engine = 110.0,"))
    plant = load_plant(cfg)
    plant.reset(STANDING_IN_FIRST)
    assert plant.core.law_z[0] == 0.0
    e = plant.params.powertrain.engine
    assert governor_range(e, e.idle_speed * 1.02, 0.0) is None
    assert governor_range(e, e.idle_speed * 0.98, 0.0) is None
    lo, hi = governor_range(e, e.idle_speed, 0.0)
    assert lo == 0.0 and hi > 0.0
