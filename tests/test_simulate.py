"""``gearbox-hil simulate``: trace, events, plots, lockstep equivalence and user errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from plant_models.config import repo_root
from plant_models.registry import load_plant
from server.cli import main
from server.offline.scenario import load_scenario, offline_step
from server.offline.run import read_trace_csv, run_offline

ROOT = repo_root()
CHAIN = ("configs/chain.toml", "scenarios/chain_4mass.toml")
DCT = ("configs/dct.toml", "scenarios/dct_upshift.toml")
POWERSHIFT = ("configs/powershift.toml", "scenarios/powershift_swaps.toml")


def simulate(config, scenario, out, *extra) -> int:
    return main(["simulate", str(ROOT / config), "--scenario", str(ROOT / scenario), "--out", str(out), "--quiet",
                 *extra])


def offline(config, scenario, dt=None):
    plant = load_plant(ROOT / config)
    return plant, run_offline(plant, load_scenario(ROOT / scenario).compile(plant, dt))


@pytest.mark.parametrize("case", [CHAIN, DCT], ids=["chain", "dct"])
def test_trace_csv_holds_every_step_bit_for_bit(case, tmp_path):
    assert simulate(*case, tmp_path) == 0
    plant, tr = offline(*case)
    names, data = read_trace_csv(tmp_path / "trace.csv")
    assert names == ["t"] + [s.name for s in plant.outputs]
    assert data.shape == (len(tr.time), 1 + plant.n_out)
    assert data[0, 0] == 0.0 and data[-1, 0] == pytest.approx(tr.time[-1])
    # the CSV reads back to exactly the floats of an in-process run
    assert np.array_equal(data[:, 0], tr.time)
    assert np.array_equal(data[:, 1:], tr.values)
    # row 0 is the state after the reset, before any step
    plant.reset(load_scenario(ROOT / case[1]).compile(plant).initial_inputs())
    assert np.array_equal(data[0, 1:], plant.y)


@pytest.mark.parametrize("case", [DCT, POWERSHIFT], ids=["dct", "powershift"])
def test_offline_step_sequence_is_the_whole_run(case):
    """The lockstep mode repeats reset + offline_step: it must reproduce run_offline exactly."""
    _, tr = offline(*case)
    plant = load_plant(ROOT / case[0])
    compiled = load_scenario(ROOT / case[1]).compile(plant)
    plant.reset(compiled.initial_inputs())
    rows = [plant.y.copy()]
    for k in range(compiled.n_steps):
        offline_step(plant, compiled, k)
        rows.append(plant.y.copy())
    assert np.array_equal(np.array(rows), tr.values)


def test_events_json_lists_every_event_with_the_run_metadata(tmp_path):
    assert simulate(*DCT, tmp_path) == 0
    doc = json.loads((tmp_path / "events.json").read_text())
    plant, tr = offline(*DCT)
    assert doc["plant"] == "dct"
    assert doc["config"].endswith("configs/dct.toml") and doc["scenario"].endswith("scenarios/dct_upshift.toml")
    assert doc["dt_s"] == 0.001 and doc["steps"] == 4000 and doc["duration_s"] == pytest.approx(4.0)
    assert doc["wall_time_s"] > 0.0 and doc["status_bits_seen"] == []
    assert doc["clutches"] == ["C1", "C2", "S_odd", "S_even"]
    assert doc["events"] == [dict(time=e["time"], clutch=e["clutch"], type=e["type"]) for e in tr.events]
    assert [(e["clutch"], e["type"]) for e in doc["events"]] == [
        ("S_even", "stick"), ("C1", "stick"), ("C1", "breakaway"), ("C2", "stick"), ("S_odd", "breakaway"),
        ("S_odd", "stick"), ("C2", "breakaway"), ("C1", "stick")]
    assert doc["counters"]["steps"] == 4000 and doc["counters"]["rollbacks"] == 0


def test_dt_option_overrides_the_scenario_step(tmp_path):
    assert simulate(*CHAIN, tmp_path, "--dt", "0.0005") == 0
    doc = json.loads((tmp_path / "events.json").read_text())
    assert doc["dt_s"] == 0.0005 and doc["steps"] == 8000
    names, data = read_trace_csv(tmp_path / "trace.csv")
    assert data.shape[0] == 8001 and data[1, 0] == 0.0005


@pytest.mark.parametrize("case,figures", [
    (CHAIN, ["velocities.png", "relative_velocities.png", "friction.png"]),
    (DCT, ["speeds.png", "clutch_friction.png", "ratio.png"]),
    (POWERSHIFT, ["speeds.png", "stage_ratios.png", "overall_ratio.png", "friction_c1_c2.png", "friction_c3_c5.png",
                  "friction_c6_c8.png"]),
], ids=["chain", "dct", "powershift"])
def test_plot_writes_the_papers_figures(case, figures, tmp_path):
    assert simulate(*case, tmp_path, "--plot", "--dt", "0.002") == 0
    pngs = sorted(p.name for p in tmp_path.glob("*.png"))
    assert pngs == sorted(figures)
    for name in figures:
        data = (tmp_path / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000


# -- user errors: one line naming file, key and problem; exit code 2; never a traceback -----------------
def scenario_file(tmp_path, text) -> Path:
    p = tmp_path / "s.toml"
    p.write_text(text)
    return p


ERROR_CASES = {
    "missing config": (lambda tmp: ["nope/missing.toml", "--scenario", str(ROOT / CHAIN[1])],
                       "gearbox-hil: error: nope/missing.toml: file not found"),
    "missing scenario": (lambda tmp: [str(ROOT / CHAIN[0]), "--scenario", "nope/missing.toml"],
                         "gearbox-hil: error: nope/missing.toml: file not found"),
    "bad duration": (lambda tmp: [str(ROOT / CHAIN[0]), "--scenario",
                                  str(scenario_file(tmp, "duration_s = -1.0\ndt_s = 0.001\n"))],
                     "s.toml: duration_s: must be > 0, got -1.0"),
    "unknown input": (lambda tmp: [str(ROOT / DCT[0]), "--scenario",
                                   str(scenario_file(tmp, "duration_s = 1.0\ndt_s = 0.001\n[inputs]\np_c3 = 1.0\n"))],
                      "s.toml: inputs.p_c3: not an input of the dct plant; its inputs are p_c1, p_c2, engine_torque"),
    "gear on the wrong shaft": (lambda tmp: [str(ROOT / DCT[0]), "--scenario", str(scenario_file(
        tmp, "duration_s = 1.0\ndt_s = 0.001\n[inputs]\ngear_odd = [[0.0, 1], [0.5, 2]]\n"))],
        "s.toml: inputs.gear_odd: 2 is not an allowed value; allowed: 0, 1, 3, 5, 7"),
    "pressure out of range": (lambda tmp: [str(ROOT / DCT[0]), "--scenario", str(scenario_file(
        tmp, "duration_s = 1.0\ndt_s = 0.001\n[inputs]\np_c1 = [[0.0, 1.0], [0.5, 99.0]]\n"))],
        "s.toml: inputs.p_c1: values span [1, 99] bar, outside the declared range [0, 25]"),
    "bad TOML": (lambda tmp: [str(ROOT / CHAIN[0]), "--scenario", str(scenario_file(tmp, "duration_s = = 1\n"))],
                 "s.toml: not valid TOML"),
}


@pytest.mark.parametrize("name", list(ERROR_CASES))
def test_bad_files_give_one_clear_line_and_exit_2(name, tmp_path, capsys):
    argv, expected = ERROR_CASES[name]
    code = main(["simulate", *argv(tmp_path), "--out", str(tmp_path / "out")])
    out, err = capsys.readouterr()
    assert code == 2
    assert expected in err
    assert err.count("\n") == 1 and err.startswith("gearbox-hil: error: ") and "Traceback" not in err
    assert not (tmp_path / "out" / "trace.csv").exists()


def test_an_out_path_that_cannot_be_a_directory_is_reported(tmp_path, capsys):
    blocker = tmp_path / "file.txt"
    blocker.write_text("x")
    code = main(["simulate", str(ROOT / CHAIN[0]), "--scenario", str(ROOT / CHAIN[1]), "--out", str(blocker)])
    err = capsys.readouterr().err
    assert code == 2 and f"{blocker}: --out: exists and is not a directory" in err
    code = main(["simulate", str(ROOT / CHAIN[0]), "--scenario", str(ROOT / CHAIN[1]), "--out",
                 str(blocker / "sub")])
    err = capsys.readouterr().err
    assert code == 2 and "--out: cannot create the output directory (Not a directory)" in err


@pytest.mark.parametrize("argv,expected", [
    (["--dt", "-0.001"], "argument --dt: step must be between 5e-05 and 0.01 s, got -0.001"),
    (["--dt", "0"], "argument --dt: step must be between 5e-05 and 0.01 s, got 0"),
    (["--dt", "fast"], "argument --dt: not a number: 'fast'"),
    (["--dt", "nan"], "argument --dt: step must be between"),
])
def test_bad_arguments_exit_2(argv, expected, tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["simulate", str(ROOT / CHAIN[0]), "--scenario", str(ROOT / CHAIN[1]), "--out", str(tmp_path), *argv])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert expected in err and "Traceback" not in err


def test_the_installed_command_reports_errors_without_a_traceback(tmp_path):
    exe = Path(sys.executable).parent / "gearbox-hil"
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "server.cli"]
    res = subprocess.run(cmd + ["simulate", "configs/missing.toml", "--scenario", "chain_4mass", "--out",
                                str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert res.returncode == 2
    assert res.stderr == "gearbox-hil: error: configs/missing.toml: file not found\n"
    assert not (tmp_path / "trace.csv").exists()


def test_configs_and_scenarios_can_be_named_without_their_folders(tmp_path, capsys):
    assert main(["simulate", "chain", "--scenario", "chain_4mass", "--out", str(tmp_path)]) == 0
    assert "chain: 4000 steps of 0.001 s" in capsys.readouterr().out and (tmp_path / "trace.csv").exists()


def test_other_plants_get_speeds_friction_and_an_output_grid(tmp_path):
    """A plant kind without its own figures: speeds, friction against its bounds, every output."""
    from server.plots import plot_trace

    plant, tr = offline(CHAIN[0], CHAIN[1], dt=0.004)
    plant.kind = "other"  # instance attribute: this plant only
    # rename the chain's friction signals the way other plants name theirs
    tr.names = [n.replace("friction_", "torque_").replace("static_limit_", "capacity_") for n in tr.names]
    files = plot_trace(plant, tr, tmp_path, title="a long title " * 20)
    assert [f.name for f in files] == ["speeds.png", "friction.png", "outputs.png"]
    for f in files:
        assert f.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
