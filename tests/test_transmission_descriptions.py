"""Transmission descriptions: the Powershift and the DCT as data, a reverse gear, and the reader's errors.

* configs/powershift_described.toml runs every Powershift scenario bit for
  bit like the Powershift plant (every common output, every event);
* configs/dct_described.toml runs the DCT scenario like the dct plant to
  1e-12 (its half-shafts start with the quasi-steady torque computed
  generally, which differs from the dct plant's closed form by rounding),
  and has a reverse gear: the vehicle backs at the ratio of the idler;
* descriptions that contradict themselves or leave something free are
  refused with one line naming the file, the table and the problem.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from plant_models.config import ConfigError
from plant_models.registry import describe_config, load_plant, read_config
from server.offline.scenario import load_scenario
from server.offline.run import run_offline

ROOT = Path(__file__).resolve().parents[1]


def run(config: str, scenario: str, dt: float | None = None):
    plant = load_plant(ROOT / "configs" / config)
    return run_offline(plant, load_scenario(ROOT / "scenarios" / scenario).compile(plant, dt))


def events(trace):
    return [(e["time"], e["clutch"].lower(), e["type"]) for e in trace.events]


@pytest.mark.parametrize("scenario,dt", [("powershift_single_swap.toml", None), ("powershift_double_swap.toml", None),
                                         ("powershift_triple_swap.toml", None), ("powershift_swaps.toml", None),
                                         ("powershift_swaps.toml", 5e-5)])
def test_the_described_powershift_reproduces_the_powershift_plant_bit_for_bit(scenario, dt):
    a = run("powershift.toml", scenario, dt)
    b = run("powershift_described.toml", scenario, dt)
    common = [nm for nm in a.names if nm in b.names]
    assert len(common) == len(a.names)  # every output, the ratio (input over output speed in both) included
    for nm in common:
        assert np.array_equal(a.column(nm), b.column(nm)), nm
    assert events(a) == events(b)


DCT_NAMES = {"w_out": "w_output", "w_wheel": "w_vehicle", "sync_odd_locked": "locked_S_odd",
             "sync_even_locked": "locked_S_even", "selected_odd": "selected_S_odd",
             "selected_even": "selected_S_even", "driveshaft_torque": "torque_driveshaft"}


@pytest.mark.parametrize("dt", [None, 1e-4])
def test_the_described_dct_reproduces_the_dct_plant(dt):
    a = run("dct.toml", "dct_upshift.toml", dt)
    b = run("dct_described.toml", "dct_upshift.toml", dt)
    compared = 0
    for nm in a.names:
        nb = DCT_NAMES.get(nm, nm)
        if nb not in b.names:
            continue
        x, y = a.column(nm), b.column(nb)
        if nm in ("torque_c1", "torque_c2"):
            y = -y  # the dct plant reports the torque the clutch passes to its shaft, the description the
            # torque on its first member (the engine)
        assert np.abs(x - y).max() <= 1e-12 * (np.abs(x).max() + 1.0), nm
        compared += 1
    assert compared == len(a.names) - 1  # all but vehicle_speed (w_vehicle times the wheel radius)
    ea, eb = events(a), events(b)
    assert [(c, k) for _, c, k in ea] == [(c, k) for _, c, k in eb]
    assert max(abs(x[0] - y[0]) for x, y in zip(ea, eb)) <= 1e-12


def test_the_described_dct_backs_in_reverse_through_its_idler():
    p = load_plant(ROOT / "configs" / "dct_described.toml")
    assert p.gear_ratio("R") == pytest.approx(-3.2 * 4.0, rel=1e-15)
    p.reset({"gear_even": -1})
    assert p.output_dict()["locked_S_even"] == 1.0
    for k in range(3000):
        t = k * 1e-3
        p.set_input("engine_torque", min(150.0, 300.0 * t))
        p.set_input("p_c2", min(8.0, 1.0 + 14.0 * t))
        p.step(1e-3)
    y = p.output_dict()
    assert y["stuck_c2"] == 1.0 and y["gear"] == -1.0
    assert y["w_vehicle"] < -1.0 and y["w_engine"] > 0.0
    assert y["ratio"] == pytest.approx(-12.8, rel=1e-3)  # w_engine / w_wheel, the half-shafts wound up
    with pytest.raises(ValueError, match="gear_even: 3 is not one of -1, 0, 2, 4, 6"):
        p.set_input("gear_even", 3)


def test_describe_lists_the_independent_speeds_and_every_gear_with_its_ratio():
    d = describe_config(ROOT / "configs" / "zf8hp.toml")
    assert d["kind"] == "transmission"
    assert d["independent_speeds"] == ["input", "r1", "r2s3", "s4r3"]
    gears = {g["name"]: (g["engaged"], g["ratio"]) for g in d["gears"]}
    assert gears["1"] == (["A", "B", "C"], pytest.approx(108 / 23, rel=1e-15))
    assert gears["R"] == (["A", "B", "D"], pytest.approx(-1744 / 529, rel=1e-15))
    names = [s["name"] for s in d["inputs"]]
    assert names == ["p_A", "p_B", "p_C", "p_D", "p_E", "input_torque", "load_torque"]


# -- errors -------------------------------------------------------------------------------------
BASE = '''
plant = "transmission"
[[member]]
name = "in"
inertia_kg_m2 = 0.1
[[member]]
name = "s"
inertia_kg_m2 = 0.01
[[member]]
name = "r"
inertia_kg_m2 = 0.02
[[member]]
name = "o"
inertia_kg_m2 = 1.0
[[planetary]]
name = "ps"
sun = "s"
ring = "r"
carrier = "o"
sun_teeth = 30
ring_teeth = 70
[[mesh]]
name = "drive"
members = ["in", "s"]
ratio = 1.0
[clutch]
piston_area_m2 = 0.01
return_spring_N = 1000.0
friction_static = 0.13
friction_kinetic = 0.11
surfaces = 6
mean_radius_m = 0.08
pressure_lag_s = 0.0
[[element]]
name = "brake"
kind = "brake"
members = ["r"]
[[element]]
name = "lock"
kind = "clutch"
members = ["s", "r"]
[input]
member = "in"
[output]
member = "o"
[gears]
1 = ["brake"]
2 = ["lock"]
'''


def read(tmp_path, text: str):
    f = tmp_path / "t.toml"
    f.write_text(text)
    return read_config(f)


def test_a_small_description_reads_and_reduces(tmp_path):
    """A sun driven through a 1:1 mesh, ring braked: in / out = (z_S + z_R) / z_S = 10/3; locked: 1."""
    red = read(tmp_path, BASE).params.reduction
    assert [(g.name, g.ratio) for g in red.gears] == [("1", Fraction(10, 3)), ("2", Fraction(1))]
    assert len(red.coordinates) == 2 and red.dense


@pytest.mark.parametrize("change,message", [
    # a mesh that closes a loop with another ratio: the members can only stand still
    ('[[mesh]]\nname = "loop"\nmembers = ["in", "s"]\nratio = 2.0\n',
     r"t.toml: mesh\[1\]: mesh 'loop' contradicts mesh 'drive': together they let members 'in', 's' only "
     r"stand still"),
    # a member nothing touches
    ('[[member]]\nname = "spare"\ninertia_kg_m2 = 0.1\n',
     r"t.toml: member\[4\]: member 'spare' is free: no gear, element, spring or torque connects it to the rest"),
])
def test_contradictions_and_free_members_are_named(tmp_path, change, message):
    with pytest.raises(ConfigError, match=message):
        read(tmp_path, BASE.replace("[clutch]", change + "[clutch]"))


def test_gears_that_do_not_couple_the_output_to_the_input_are_named(tmp_path):
    with pytest.raises(ConfigError, match=r"t.toml: gears.3: gear '3' \(brake, lock\) holds the input member 'in' "
                                          r"still"):
        read(tmp_path, BASE.replace('2 = ["lock"]', '2 = ["lock"]\n3 = ["brake", "lock"]'))
    # a clutch from the output to a spare shaft: engaging it alone leaves the gear set free
    spare = ('[[member]]\nname = "x"\ninertia_kg_m2 = 0.1\n[[element]]\nname = "cx"\nkind = "clutch"\n'
             'members = ["o", "x"]\n')
    text = BASE.replace("[input]", spare + "[input]").replace('2 = ["lock"]', '2 = ["lock"]\n3 = ["cx"]')
    with pytest.raises(ConfigError, match=r"t.toml: gears.3: gear '3' \(cx\) leaves members 'r', 'o', 'x' free "
                                          r"of the input: it needs one more engaged element"):
        read(tmp_path, text)
    # the spare shaft left free by gears 1 and 2 is allowed (as a dual-clutch transmission's other shaft)
    ok = read(tmp_path, BASE.replace("[input]", spare + "[input]"))
    assert [float(g.ratio) for g in ok.params.reduction.gears] == [pytest.approx(10 / 3), 1.0]


def test_members_without_inertia_are_named(tmp_path):
    text = BASE.replace('name = "r"\ninertia_kg_m2 = 0.02', 'name = "r"\ninertia_kg_m2 = 0.0').replace(
        'name = "o"\ninertia_kg_m2 = 1.0', 'name = "o"\ninertia_kg_m2 = 0.0').replace(
        '[[mesh]]\nname = "drive"\nmembers = ["in", "s"]\nratio = 1.0\n', '[[mesh]]\nname = "drive"\n'
        'members = ["in", "s"]\nratio = 1.0\n')
    # the ring and the output carry no inertia, but the sun does: the carrier follows sun and ring, and one
    # motion (ring and carrier moving, sun still) has no inertia
    with pytest.raises(ConfigError, match=r"t.toml: member: members .*'r'.*'o'.* can move without any inertia"):
        read(tmp_path, text)


def test_wrong_names_and_numbers_name_the_key(tmp_path):
    with pytest.raises(ConfigError, match=r"t.toml: planetary\[0\].ring: must name a member \(in, s, r, o\) "
                                          r"or 'housing', got 'rr'"):
        read(tmp_path, BASE.replace('ring = "r"', 'ring = "rr"'))
    with pytest.raises(ConfigError, match=r"planetary\[0\].ring_teeth: a ring gear has more teeth than its sun"):
        read(tmp_path, BASE.replace("ring_teeth = 70", "ring_teeth = 20"))
    with pytest.raises(ConfigError, match=r"gears.2: 'clutch_x' is not an element \(brake, lock\)"):
        read(tmp_path, BASE.replace('2 = ["lock"]', '2 = ["clutch_x"]'))
    with pytest.raises(ConfigError, match=r"element\[0\].kind: must be one of 'clutch', 'brake', 'freewheel'"):
        read(tmp_path, BASE.replace('kind = "brake"', 'kind = "band"'))
    with pytest.raises(ConfigError, match=r"clutch.piston_aera_m2: unknown key"):
        read(tmp_path, BASE.replace("[clutch]\n", "[clutch]\npiston_aera_m2 = 1.0\n"))


def test_initial_speeds_must_fix_every_member(tmp_path):
    text = BASE + '\n[initial]\nspeeds_rad_s = { in = 50.0 }\n'
    with pytest.raises(ConfigError, match=r"t.toml: initial.speeds_rad_s: leaves members .*'r'.* without a speed"):
        read(tmp_path, text)
    ok = read(tmp_path, BASE + '\n[initial]\ngear = "1"\nspeeds_rad_s = { in = 50.0 }\n')
    assert ok.params.description.initial_engaged == (0,)


# -- the generic initial state --------------------------------------------------------------------
ZF8HP = (ROOT / "configs" / "zf8hp.toml").read_text()
ZF8HP_INITIAL = '[initial]\ngear = "1"\nspeeds_rad_s = { input = 80.0 }\n'


def zf8hp_starting(tmp_path, initial: str):
    assert ZF8HP_INITIAL in ZF8HP
    f = tmp_path / "zf8hp_start.toml"
    f.write_text(ZF8HP.replace(ZF8HP_INITIAL, initial))
    return f


def test_any_member_speeds_consistent_with_the_engaged_elements(tmp_path):
    """Brake B and clutch C engaged (half of 5th gear), input and output speeds given: the two elements
    start stuck with exactly zero slip, the listed members at their speeds, every planetary set obeys Willis."""
    p = load_plant(zf8hp_starting(tmp_path, '[initial]\nengaged = ["B", "C"]\n'
                                            'speeds_rad_s = { input = 100.0, output = 30.0 }\n'))
    p.reset({"p_B": 12.0, "p_C": 12.0})
    y = p.output_dict()
    assert (y["stuck_B"], y["stuck_C"], y["stuck_A"], y["stuck_D"], y["stuck_E"]) == (1.0, 1.0, 0.0, 0.0, 0.0)
    assert y["slip_B"] == 0.0 and y["slip_C"] == 0.0
    assert y["w_r1"] == 0.0 and y["w_input"] == y["w_s4r3"]
    assert y["w_input"] == pytest.approx(100.0, rel=1e-12) and y["w_output"] == pytest.approx(30.0, rel=1e-12)
    d = p.params.description
    w = p.member_speeds()
    for r in d.relations:
        assert abs(sum(float(c) * w[m] for m, c in r.coefs)) <= 1e-12 * 100.0 * sum(abs(float(c)) for _, c in r.coefs)
    assert y["gear"] == 0.0  # two of 5th gear's three elements: no gear
    # free members (nothing engaged): every independent speed listed
    p = load_plant(zf8hp_starting(tmp_path, '[initial]\nspeeds_rad_s = { input = 50.0, r1 = -10.0, r2s3 = 20.0, '
                                            's4r3 = 5.0 }\n'))
    y = p.output_dict()
    assert (y["w_input"], y["w_r1"], y["w_r2s3"], y["w_s4r3"]) == (50.0, -10.0, 20.0, 5.0)
    assert not any(y[f"stuck_{e}"] for e in "ABCDE")


def test_initial_speeds_that_the_engaged_elements_contradict_are_refused(tmp_path):
    with pytest.raises(ConfigError, match=r"zf8hp_start.toml: initial.speeds_rad_s: the listed speeds contradict "
                                          r"each other through the engaged elements"):
        read_config(zf8hp_starting(tmp_path, '[initial]\ngear = "1"\nspeeds_rad_s = { input = 100.0, output = 30.0 }\n'))
    with pytest.raises(ConfigError, match=r"initial.speeds_rad_s: leaves members .*'r2s3'.* without a speed"):
        read_config(zf8hp_starting(tmp_path, '[initial]\nengaged = ["B", "C"]\nspeeds_rad_s = { input = 100.0 }\n'))


def test_describe_prints_the_shift_table_with_the_ratios(capsys):
    from server.cli import main

    assert main(["describe", "zf8hp"]) == 0
    out = capsys.readouterr().out
    assert "independent speeds: input, r1, r2s3, s4r3" in out
    for name, engaged, ratio in (("R", "A, B, D", "-3.2968"), ("1", "A, B, C", "4.6957"), ("5", "B, C, D", "1.2845"),
                                 ("8", "A, D, E", "0.6667")):
        assert any(ln.replace(",", "").split() == [name, *engaged.replace(",", "").split(), ratio]
                   for ln in out.splitlines()), name
