"""docs/transmissions.md's complete example file: read from the guide as it stands, described, and run.

A new user had to find the top-level key ``name`` in configs/zf8hp.toml: the guide had no whole file.
"""

from __future__ import annotations

import re

import pytest

from plant_models.registry import describe_config, load_plant
from server.scenario import parse_scenario
from server.simulate import run_offline

from server_support import ROOT


def example_file(tmp_path):
    text = (ROOT / "docs" / "transmissions.md").read_text()
    section = text.split("## A complete example", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```toml\n(.*?)```", section, re.S).group(1)
    path = tmp_path / "two_speed.toml"
    path.write_text(block)
    return path


def test_the_example_describes_its_two_gears(tmp_path):
    d = describe_config(example_file(tmp_path))
    assert d["kind"] == "transmission" and d["description"].startswith("2-speed planetary: ")
    assert [(g["name"], g["engaged"]) for g in d["gears"]] == [("1", ["B1"]), ("2", ["C2"])]
    assert d["gears"][0]["ratio"] == pytest.approx(1 + 78 / 30, rel=1e-12)  # ring held: 1 + z_R / z_S
    assert d["gears"][1]["ratio"] == pytest.approx(1.0, rel=1e-12)  # sun and carrier locked: direct
    assert {s["name"] for s in d["inputs"]} == {"p_B1", "p_C2", "input_torque", "load_torque"}


def test_the_example_runs_in_gear_1_at_its_ratio(tmp_path):
    plant = load_plant(example_file(tmp_path))
    sc = parse_scenario({"duration_s": 0.2, "dt_s": 0.001,
                         "inputs": {"p_B1": 16.0, "p_C2": 0.0, "input_torque": 100.0, "load_torque": 50.0}}, "t")
    tr = run_offline(plant, sc.compile(plant, warn=False))
    assert tr.column("gear")[-1] == 1 and tr.column("stuck_B1")[-1] == 1
    assert tr.column("w_input")[-1] / tr.column("w_out")[-1] == pytest.approx(3.6, rel=1e-9)
    assert tr.column("w_input")[-1] > 100.0  # the input torque accelerates the box
