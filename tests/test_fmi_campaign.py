"""FMU parameters and start values as first-class parameters: ``describe`` (the config's description and the
server's ``describe`` command) lists an FMU's ports and parameters from its model description, the same ports
the built assembly has; a campaign varies an FMU's start value by ``fmu.NAME.VARIABLE`` and each run equals a
plain offline run of the config with that start value, bit for bit."""

from __future__ import annotations

import argparse
import tomllib
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("fmpy", reason="needs the fmi extra (pip install 'gearbox-hil[fmi]')")

from fmu_build import build_first_order, compiler  # noqa: E402
from plant_models.config import ConfigError  # noqa: E402
from plant_models.registry import describe_config, load_plant  # noqa: E402
from server.campaign import paths as P  # noqa: E402
from server.campaign.engine import run_bare  # noqa: E402
from server.campaign.spec import load_campaign  # noqa: E402
from server.offline.run import run_offline  # noqa: E402
from server.offline.scenario import parse_scenario  # noqa: E402
from server.realtime.loop_config import LoopConfig  # noqa: E402
from server.realtime.runtime import assemble  # noqa: E402

pytestmark = pytest.mark.skipif(compiler() is None, reason="needs a C compiler (cc) to build the test FMU")

ROOT = Path(__file__).resolve().parents[1]
TAU = 0.05
GEAR_1 = {"p_c1": 16.0, "p_c3": 16.0, "p_c6": 16.0}
SCENARIO = ('duration_s = 0.2\ndt_s = 0.001\ninterpolation = "linear"\n[inputs]\n"engine.torque_cmd" = 300.0\n'
            'load_torque = 3500.0\np_c1 = 16.0\np_c3 = 16.0\np_c6 = 16.0\n')


@pytest.fixture(scope="module")
def d(tmp_path_factory):
    d = tmp_path_factory.mktemp("fmu_campaign")
    build_first_order(d / "engine.fmu")
    (d / "ps.toml").write_text(f'extends = "{(ROOT / "configs" / "powershift.toml").as_posix()}"\n\n[[fmu]]\n'
                               f'name = "engine"\nfile = "engine.fmu"\nstart = {{ tau = {TAU} }}\n'
                               f'to_plant = {{ torque = "engine_torque" }}\nsafe = {{ torque = 0.0 }}\n')
    (d / "s.toml").write_text(SCENARIO)
    return d


def test_describe_lists_the_fmus_ports_and_parameters_as_the_built_assembly_has_them(d):
    desc = describe_config(d / "ps.toml")
    plant = load_plant(d / "ps.toml")
    assert [s["name"] for s in desc["inputs"]] == [s.name for s in plant.inputs]
    assert [s["name"] for s in desc["outputs"]] == [s.name for s in plant.outputs]
    assert "engine_torque" not in [s["name"] for s in desc["inputs"]]  # driven by the FMU
    (fmu,) = desc["fmus"]
    assert (fmu["name"], fmu["fmi"], fmu["kind"], fmu["process"]) == ("engine", "2.0", "co-simulation", "server")
    assert fmu["to_plant"] == {"torque": "engine_torque"} and fmu["safe"] == {"torque": 0.0}
    rows = {r["name"]: r for r in fmu["parameters"]}
    assert rows["engine.tau"] == dict(name="engine.tau", unit="s", min=1e-6, max=1e300, value=TAU, tunable=True,
                                      type="Real", doc="time constant of the lag")
    assert rows["engine.fail_at"]["tunable"] is False and rows["engine.fail_at"]["value"] == -1.0
    # the running plant describes its FMUs the same way, and its tunable ones are the server's parameters
    assert plant.describe()["fmus"] == desc["fmus"]
    srv = assemble(plant, [], LoopConfig(mode="lockstep", status_interval_s=0.0))
    rep = srv.control.handle({"v": 1, "cmd": "describe"})
    assert rep["ok"] and rep["plant"]["fmus"] == desc["fmus"] and "engine.tau" in rep["plant"]["params"]
    plant.close()


def test_the_describe_command_prints_the_fmus_and_their_parameters(d, capsys):
    from server.cli.describe import run
    assert run(argparse.Namespace(config=str(d / "ps.toml"), json=False)) == 0
    out = capsys.readouterr().out
    assert "engine.torque_cmd" in out and "engine.torque " in out
    assert "fmu engine: FMI 2.0 co-simulation, in the server's process" in out
    assert "engine.tau" in out and "tunable" in out and "time constant of the lag" in out


def test_an_fmu_start_value_path_sets_and_scales_the_named_table():
    config = {"fmu": [{"name": "pump", "start": {"k": 2.0}}, {"name": "engine"}]}
    P.apply(config, {}, "fmu.engine.tau", "set", 0.02)
    P.apply(config, {}, "fmu.pump.k", "scale", 1.5)
    assert config["fmu"] == [{"name": "pump", "start": {"k": 3.0}}, {"name": "engine", "start": {"tau": 0.02}}]
    with pytest.raises(ValueError, match=r"no \[\[fmu\]\] table named 'motor'"):
        P.apply(config, {}, "fmu.motor.tau", "set", 1.0)
    with pytest.raises(ValueError, match="scale needs a start value for 'x'"):
        P.apply(config, {}, "fmu.engine.x", "scale", 2.0)
    with pytest.raises(ValueError, match=r"an FMU's start value is fmu\.NAME\.VARIABLE"):
        P.check("fmu.engine", "set")


def test_a_campaign_over_an_fmu_start_value_equals_plain_runs_with_that_value(d):
    (d / "c.toml").write_text(f'config = "ps.toml"\nscenario = "s.toml"\n[design]\nmethod = "list"\n'
                              f'[parameters.tau_s]\npath = "fmu.engine.tau"\nvalues = [0.02, 0.05, 0.1]\n'
                              f'[metrics.expressions]\nw_end = "final(w_1)"\n')
    spec = load_campaign(d / "c.toml")
    results = run_bare(spec, [0, 1, 2])
    assert [r.status for r in results] == ["ok"] * 3, [r.error for r in results]
    for r, tau in zip(results, (0.02, 0.05, 0.1)):
        cfg = d / f"ps_{r.run}.toml"
        cfg.write_text((d / "ps.toml").read_text().replace(f"tau = {TAU}", f"tau = {tau}"))
        plant = load_plant(cfg)
        trace = run_offline(plant, parse_scenario(tomllib.loads(SCENARIO), "s").compile(plant))
        w = trace.values[:, plant.output_index("w_1")]
        assert r.metrics["w_end"] == w[-1]  # bit for bit
    # a faster lag gives more torque sooner: the shaft ends faster
    assert results[0].metrics["w_end"] > results[1].metrics["w_end"] > results[2].metrics["w_end"]


def test_a_campaign_start_value_outside_the_fmus_range_is_one_line(d):
    (d / "bad.toml").write_text('config = "ps.toml"\nscenario = "s.toml"\n[design]\nmethod = "list"\n'
                                '[parameters.tau_s]\npath = "fmu.engine.tau"\nvalues = [-1.0]\n'
                                '[metrics.expressions]\nw_end = "final(w_1)"\n')
    with pytest.raises(ConfigError, match=r"fmu\[0\]\.start\.tau: fmu engine: start value -1\.0 outside the "
                                          r"variable's range \[1e-06, inf\]"):
        load_campaign(d / "bad.toml")
