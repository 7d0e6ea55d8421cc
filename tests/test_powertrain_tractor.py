"""The Powershift in a tractor with a drawbar load (configs/powershift_tractor.toml): energy balance over a
pull with a swap under load, and lockstep = offline bit for bit (docs/powertrain.md)."""

from __future__ import annotations

import numpy as np
import pytest

from plant_models.core import layout as L
from plant_models.powertrain.components import work_accounts
from plant_models.registry import load_plant
from server.offline.scenario import load_scenario
from server.offline.run import run_offline
from server_support import ServerProcess


@pytest.fixture(scope="module")
def pull():
    plant = load_plant("powershift_tractor")
    sc = load_scenario("powershift_tractor_pull").compile(plant)
    plant.reset(sc.start_inputs())
    ke0 = plant.core.kinetic_energy()
    return plant, run_offline(plant, sc), ke0


def test_drawbar_pull_is_the_force_at_the_hitch(tmp_path):
    """Standing on its brake, the tractor holds the drawbar pull: the brake carries F r / i exactly."""
    plant = load_plant("powershift_tractor")
    plant.reset({"p_brake": 60.0, "p_c1": 0.0, "p_c3": 0.0, "p_c6": 0.0, "drawbar_force": 8000.0})
    v = plant.params.powertrain.vehicle
    c = plant.core
    c.omega[:] = 0.0
    plant.start()
    for _ in range(100):
        plant.step(1e-3)
        y = plant.output_dict()
        assert y["vehicle_speed"] == 0.0
        # brake and rolling resistance share what holds the pull (a redundant pair: minimum-norm split)
        assert abs(y["torque_brake"] + y["torque_rolling"]) == pytest.approx(8000.0 * v.radius_per_ratio, rel=1e-12)


def test_engine_work_balances_losses_drawbar_work_and_the_change_of_energy(pull):
    plant, res, ke0 = pull
    c = plant.core
    names = [e.name for e in plant.params.description.elements]
    rows = c.work[L.W_ROW0:]
    z = work_accounts(plant.params.powertrain, c.law_z)
    engine = z["work_engine"]
    clutches = -sum(rows[i] for i, nm in enumerate(names) if nm not in ("brake", "rolling"))
    rolling = -rows[names.index("rolling")]
    drawbar = -z["work_drawbar"]
    drag = -(c.work[L.W_DRAG] + c.work[L.W_DAMP])
    kinetic = c.kinetic_energy() - ke0
    assert c.work[L.W_INPUT] == 0.0 and z["work_converter"] == 0.0 and z["work_aero"] == 0.0
    assert min(clutches, rolling, drawbar, drag, engine) > 0.0
    assert drawbar > 0.3 * engine  # the implement takes a good part of the engine's work
    balance = engine - (clutches + rolling + drawbar + drag - c.work[L.W_IMPULSE] - z["work_grade"] + kinetic)
    assert abs(balance) <= 1e-9 * engine
    gear = res.values[:, list(res.names).index("gear")]
    assert gear[0] == 1.0 and gear[-1] == 3.0  # the swap under the pull took place


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    srv = ServerProcess(tmp_path_factory.mktemp("tractor_lockstep"), plant="powershift_tractor", mode="lockstep")
    yield srv
    srv.shutdown()


def test_the_served_tractor_equals_the_offline_run_bit_for_bit(served, pull):
    _, offline, _ = pull
    with served.client() as hil:
        names = hil.output_names
        assert names == list(offline.names)
        n = hil.load_scenario("powershift_tractor_pull")["n_steps"]
        k = 0
        while k < n:
            r = hil.step(min(400, n - k))
            k = r.tick
            got = np.array([r.y[nm] for nm in names])
            bad = [nm for nm, a, b in zip(names, got, offline.values[k]) if a.view(np.int64) != b.view(np.int64)]
            assert not bad, f"tick {k}: lockstep differs from the offline run in {bad}"
        assert r.scenario_finished is True
