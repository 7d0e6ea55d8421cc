"""The driver component: pedal and brake following a target speed (docs/powertrain.md, section 4b)."""

from __future__ import annotations

import numpy as np
import pytest

from plant_models.core import layout as L
from plant_models.config import repo_root
from plant_models.registry import load_plant


def driver_car(tmp_path):
    p = tmp_path / "car_driver.toml"
    p.write_text(f'''extends = "{repo_root() / "configs" / "zf8hp_car.toml"}"
[driver]
kp_per_m_s = 1.0
ki_per_m = 0.5
full_pedal_force_N = 8000.0
brake_bar_at_full_command = 100.0
''')
    return load_plant(str(p))


def target(t):
    """(speed m/s, rate m/s^2): up to 5 m/s in 4 s, held to 8 s, down to 0 by 10 s, held."""
    if t < 4.0:
        return 1.25 * t, 1.25
    if t < 8.0:
        return 5.0, 0.0
    if t < 10.0:
        return 5.0 - 2.5 * (t - 8.0), -2.5
    return 0.0, 0.0


def drive(plant, t0, t1, dt=1e-3, record=None):
    for k in range(int(round((t1 - t0) / dt))):
        v, r = target(t0 + k * dt)
        plant.set_input("target_speed", v, r)
        plant.step(dt)
        if record is not None:
            record.append((t0 + (k + 1) * dt, plant.output_dict()))


def test_driver_follows_the_target_and_brakes_to_a_standstill(tmp_path):
    plant = driver_car(tmp_path)
    plant.reset({"p_A": 12.0, "p_B": 12.0, "p_C": 12.0, "p_brake": 0.0, "driver_on": 1, "pedal": 1.0})
    rec = []
    drive(plant, 0.0, 12.0, record=rec)
    # on the ramp within 0.1 m/s; holding 5 m/s, the error falls (integral action) below 0.05 m/s
    ramp = [abs(y["vehicle_speed"] - target(t)[0]) for t, y in rec if 2.0 <= t <= 4.0]
    assert max(ramp) < 0.1
    hold = [abs(y["vehicle_speed"] - target(t)[0]) for t, y in rec if 6.5 <= t <= 7.999]
    assert max(hold) < 0.05 and hold[-1] < hold[0]
    y = rec[-1][1]
    assert y["vehicle_speed"] == 0.0 and y["stuck_brake"] == 1.0 and y["driver_brake"] > 0.0
    assert max(y["driver_pedal"] for _, y in rec) <= 1.0
    # the pedal input (1.0) was ignored while the driver commanded: the engine never saw full load
    assert max(y["engine_torque"] for _, y in rec) < 300.0


def test_driver_state_is_in_the_snapshot_and_off_gives_the_inputs_back(tmp_path):
    plant = driver_car(tmp_path)
    plant.reset({"p_A": 12.0, "p_B": 12.0, "p_C": 12.0, "driver_on": 1})
    drive(plant, 0.0, 3.0)
    snap = plant.get_state()
    drive(plant, 3.0, 4.0)
    after = plant.df.copy()
    plant.set_state(snap)
    drive(plant, 3.0, 4.0)
    assert np.array_equal(plant.df.view(np.int64), after.view(np.int64))
    plant.set_input("driver_on", 0)
    plant.set_input("pedal", 0.0)
    plant.set_input("p_brake", 0.0)
    plant.step(1e-3)
    y = plant.output_dict()
    assert y["driver_pedal"] == 0.0 and y["driver_brake"] == 0.0
    brake = [e.name for e in plant.params.description.elements].index("brake")
    assert plant.core.u_act[brake] == 0.0  # p_brake is the brake's command again
