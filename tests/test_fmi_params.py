"""An FMU's tunable parameters are parameters of the server: listed by ``get_params`` with their units and
ranges, set by ``set_params`` between ticks (the lag's time constant changes mid-run: the closed form with the
new constant from there), checked against their ranges, kept over a reset."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("fmpy", reason="needs the fmi extra (pip install 'gearbox-hil[fmi]')")

from fmu_build import build_first_order, compiler  # noqa: E402
from plant_models.registry import load_plant  # noqa: E402
from server.realtime.loop_config import LoopConfig  # noqa: E402
from server.realtime.runtime import assemble  # noqa: E402

pytestmark = pytest.mark.skipif(compiler() is None, reason="needs a C compiler (cc) to build the test FMU")

ROOT = Path(__file__).resolve().parents[1]
T_CMD, TAU, TAU2, DT = 300.0, 0.05, 0.02, 1e-3
GEAR_1 = {"p_c1": 16.0, "p_c3": 16.0, "p_c6": 16.0}


@pytest.fixture
def server(tmp_path):
    build_first_order(tmp_path / "engine.fmu")
    cfg = tmp_path / "ps.toml"
    cfg.write_text(f'extends = "{(ROOT / "configs" / "powershift.toml").as_posix()}"\n\n[[fmu]]\nname = "engine"\n'
                   f'file = "engine.fmu"\nstart = {{ tau = {TAU} }}\nto_plant = {{ torque = "engine_torque" }}\n')
    plant = load_plant(cfg)
    srv = assemble(plant, [], LoopConfig(mode="lockstep", status_interval_s=0.0),
                   initial_inputs={"engine.torque_cmd": T_CMD, "load_torque": 3500.0, **GEAR_1})
    srv.loop.start()
    return srv


def ask(srv, **req):
    rep = srv.control.handle({"v": 1, **req})
    return rep


def test_get_params_lists_the_fmus_tunable_parameters_with_unit_and_range(server):
    rep = ask(server, cmd="get_params")
    assert rep["ok"], rep
    p = rep["params"]
    assert p["engine.tau"] == {"value": TAU, "unit": "s", "min": 1e-6, "max": 1e300, "doc": "time constant of the lag",
                               "type": "float"}
    assert "engine.torque_start" not in p and "engine.fail_at" not in p  # fixed parameters are not tunable
    assert "row.C1.gain_static" in p  # the plant's own stay


def test_set_params_changes_the_time_constant_between_ticks_and_a_reset_keeps_it(server):
    plant = server.loop.plant
    k = plant.output_index("engine.torque")
    for _ in range(250):
        server.loop.step(1)
    t0, T0 = plant.time, float(plant.y[k])
    assert T0 == pytest.approx(T_CMD * -math.expm1(-t0 / TAU), abs=1e-9)
    rep = ask(server, cmd="set_params", params={"engine.tau": TAU2})
    assert rep["ok"] and rep["params"]["engine.tau"]["value"] == TAU2, rep
    rows = []
    for _ in range(100):
        server.loop.step(1)
        rows.append((plant.time, float(plant.y[k])))
    t, T = np.array(rows).T
    assert np.allclose(T, T_CMD + (T0 - T_CMD) * np.exp(-(t - t0) / TAU2), rtol=0, atol=1e-9)  # the new constant
    bad = ask(server, cmd="set_params", params={"engine.tau": 0.0})
    assert not bad["ok"] and bad["error"]["code"] == "param_error", bad
    assert bad["error"]["message"] == "engine.tau: 0.0 outside [1e-06, 1e+300] s"
    assert ask(server, cmd="get_params", names=["engine.tau"])["params"]["engine.tau"]["value"] == TAU2
    rep = ask(server, cmd="reset")
    assert rep["ok"], rep
    server.loop.start()
    server.loop.step(10)
    assert plant.y[k] == pytest.approx(T_CMD * -math.expm1(-plant.time / TAU2), abs=1e-9)  # kept over the reset
