"""A member held to the housing: a planetary set's sun (the Lepelletier front set) and a freewheel to the housing.

configs/zf6hp.toml is a 6-speed Lepelletier automatic: a simple set with its
sun held to the housing ahead of a Ravigneaux set (a simple and a
double-pinion set on one carrier and one ring).  Its seven ratios must equal
the Willis fractions exactly.
"""

from __future__ import annotations

from fractions import Fraction

import pytest

from plant_models.config import ConfigError
from plant_models.registry import describe_config, load_plant, read_config
from server.offline.run import run_offline
from server.offline.scenario import parse_scenario

from server_support import ROOT

ZF6 = ROOT / "configs" / "zf6hp.toml"

TWO_SPEED = """
plant = "transmission"
name = "front set, sun held"
[[member]]
name = "input"
inertia_kg_m2 = 0.1
[[member]]
name = "carrier"
inertia_kg_m2 = 0.05
[[member]]
name = "output"
inertia_kg_m2 = 1.0
[[planetary]]
name = "front"
sun = "housing"
ring = "input"
carrier = "carrier"
sun_teeth = 37
ring_teeth = 71
[clutch]
piston_area_m2 = 0.01
return_spring_N = 1500.0
friction_static = 0.13
friction_kinetic = 0.11
surfaces = 8
mean_radius_m = 0.075
pressure_lag_s = 0.03
[[element]]
name = "A"
kind = "clutch"
members = ["carrier", "output"]
[[element]]
name = "F"
kind = "freewheel"
members = ["output", "housing"]
holding_N_m = 2000.0
[[torque]]
name = "input_torque"
member = "input"
[[torque]]
name = "load_torque"
member = "output"
resists = true
[input]
member = "input"
[output]
member = "output"
[gears]
1 = ["A"]
[initial]
gear = "1"
speeds_rad_s = { input = 50.0 }
"""


def test_a_sun_held_to_the_housing_gives_the_willis_ratio(tmp_path):
    p = tmp_path / "front.toml"
    p.write_text(TWO_SPEED)
    red = read_config(p).params.reduction
    # sun at rest: w_R z_R = (z_S + z_R) w_C  ->  w_in / w_out = (z_S + z_R) / z_R
    assert red.gears[0].ratio == Fraction(37 + 71, 71)
    d = describe_config(p)
    docs = {o["name"]: o["doc"] for o in d["outputs"]}
    assert docs["torque_front_carrier"] == "torque the teeth of front put on its carrier (carrier; its sun is held " \
        "to the housing)"
    assert "torque_front_sun" not in docs  # the housing takes the sun's tooth force


def test_housing_is_refused_where_it_cannot_be(tmp_path):
    bad = TWO_SPEED.replace('ring = "input"', 'ring = "housing"')
    (tmp_path / "two.toml").write_text(bad)
    with pytest.raises(ConfigError, match="only one of sun, ring and carrier"):
        read_config(tmp_path / "two.toml")
    bad = TWO_SPEED.replace('name = "carrier"\n', 'name = "housing"\n', 1)
    (tmp_path / "named.toml").write_text(bad)
    with pytest.raises(ConfigError, match="'housing' is reserved"):
        read_config(tmp_path / "named.toml")
    bad = TWO_SPEED.replace('members = ["carrier", "output"]', 'members = ["housing"]').replace(
        'kind = "clutch"', 'kind = "brake"')
    (tmp_path / "brake.toml").write_text(bad)
    with pytest.raises(ConfigError, match="must name a member"):
        read_config(tmp_path / "brake.toml")


def test_the_lepelletier_six_speed_ratios_equal_the_willis_fractions():
    red = read_config(ZF6).params.reduction
    zs1, zr1, zs2, zs3, zr2 = 37, 71, 38, 31, 85  # front sun/ring; Ravigneaux large sun, small sun, ring
    front = Fraction(zs1 + zr1, zr1)  # w_in / w_front_carrier, sun held
    expected = {
        "1": front * Fraction(zr2, zs3),  # small sun driven, carrier held (double pinion): ring = sun z_S3 / z_R2
        "2": front * Fraction(zr2 * (zs2 + zs3), zs3 * (zs2 + zr2)),  # small sun driven, large sun held
        "3": front,  # rear set locked (A + B): output at the front carrier's speed
        "4": Fraction(zr2 * (zs1 + zr1), zr2 * (zs1 + zr1) - zs1 * zs3),  # small sun at front speed, carrier at input
        "5": Fraction(zr2 * (zs1 + zr1), zr2 * (zs1 + zr1) + zs1 * zs2),  # large sun at front speed, carrier at input
        "6": Fraction(zr2, zs2 + zr2),  # large sun held, carrier at input
        "R": -front * Fraction(zr2, zs2),  # large sun driven, carrier held: ring against the sun
    }
    got = {g.name: g.ratio for g in red.gears}
    assert set(got) == set(expected)
    for name, r in expected.items():
        assert got[name] == r, name  # exact fractions
        assert abs(float(got[name]) - float(r)) <= 1e-12 * abs(float(r))
    # the published 6HP26 ratios, to their printed digits
    printed = {"1": 4.171, "2": 2.340, "3": 1.521, "4": 1.143, "5": 0.867, "6": 0.691, "R": -3.403}
    for name, r in printed.items():
        assert float(got[name]) == pytest.approx(r, abs=6e-4), name


def test_the_lepelletier_first_gear_holds_on_its_freewheel_and_overruns_in_coast():
    plant = load_plant(ZF6)
    sc = parse_scenario({"duration_s": 0.3, "dt_s": 0.001,
                         "inputs": {"p_A": 12.0, "input_torque": 200.0, "load_torque": 0.0}}, "t")
    tr = run_offline(plant, sc.compile(plant, warn=False))
    assert tr.column("stuck_F")[-1] == 1 and tr.column("gear")[-1] == 1
    r1 = float(next(g.ratio for g in read_config(ZF6).params.reduction.gears if g.name == "1"))
    assert tr.column("w_input")[-1] / tr.column("w_out")[-1] == pytest.approx(r1, rel=1e-9)
    # engine braking: the freewheel overruns, so the input no longer drives the output at the 1st-gear ratio
    sc = parse_scenario({"duration_s": 0.3, "dt_s": 0.001,
                         "inputs": {"p_A": 12.0, "input_torque": -150.0, "load_torque": 0.0}}, "t")
    tr = run_offline(plant, sc.compile(plant, warn=False))
    assert tr.column("stuck_F")[-1] == 0
