"""The PTO load (configs/powershift_tractor_pto.toml, scenarios/powershift_tractor_pto.toml): the implement's
torque over speed through the PTO ratio at every step, and the tractor's energy balance with the PTO's work
account closed to 1e-9 of the engine work (docs/powertrain.md)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from plant_models.core import layout as L
from plant_models.powertrain.components import work_accounts
from plant_models.registry import describe_config, load_plant
from server.offline.run import run_offline
from server.offline.scenario import load_scenario

RATIO = 2.1
SPEED_RPM = [0.0, 200.0, 500.0, 800.0, 1000.0, 1200.0]
TORQUE = [0.0, 90.0, 180.0, 250.0, 290.0, 320.0]


@pytest.fixture(scope="module")
def pull():
    plant = load_plant("powershift_tractor_pto")
    sc = load_scenario("powershift_tractor_pto").compile(plant)
    plant.reset(sc.start_inputs())
    ke0 = plant.core.kinetic_energy()
    res = run_offline(plant, sc)
    return SimpleNamespace(plant=plant, res=res, ke0=ke0)


def _col(res, name):
    return res.values[:, list(res.names).index(name)]


def test_the_pto_takes_the_implement_torque_through_its_ratio(pull):
    r = pull.res
    w = _col(r, "w_1")  # the engine's member: axle 1
    t = np.arange(len(w)) * 1e-3
    load = np.interp(t, [0.0, 0.3, 0.8, 2.5, 2.7], [0.0, 0.0, 1.0, 1.0, 0.0])
    pto_rpm = w / RATIO * 60.0 / (2.0 * math.pi)
    want = load * np.interp(pto_rpm, SPEED_RPM, TORQUE) / RATIO
    got = _col(r, "pto_torque")
    assert np.max(np.abs(got - want)) < 1e-9 * max(TORQUE)
    assert got[1500] > 130.0 and got[0] == 0.0 and got[-1] == 0.0
    assert set(_col(r, "gear")[2000:].astype(int)) == {3}  # shifted under drawbar and PTO load


def test_engine_work_balances_with_the_pto_work(pull):
    c = pull.plant.core
    z = work_accounts(pull.plant.params.powertrain, c.law_z)
    assert len(pull.plant.core.law_z) == sum(m.N_Z for m, _ in pull.plant.params.powertrain.present())
    engine, pto = z["work_engine"], -z["work_pto"]
    assert pto > 0.3 * engine  # the implement takes a good share of the engine's work
    losses = (-sum(c.work[L.W_ROW0:]) - c.work[L.W_DRAG] - c.work[L.W_DAMP] - c.work[L.W_IMPULSE]
              - z["work_aero"] - z["work_grade"] - z["work_drawbar"])
    assert abs(engine - pto - losses - (c.kinetic_energy() - pull.ke0)) <= 1e-9 * engine
    assert c.law_work[0] == pytest.approx(sum(z[k] for k in ("work_engine", "work_converter", "work_aero",
                                                            "work_grade", "work_drawbar", "work_pto")), rel=1e-12)


def test_describe_shows_the_pto():
    pto = describe_config("powershift_tractor_pto")["components"]["pto"]
    assert pto["ratio"] == RATIO and pto["inputs"] == ["pto_load"] and pto["outputs"] == ["pto_torque", "work_pto"]
