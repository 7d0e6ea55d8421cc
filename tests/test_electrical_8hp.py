"""The 8HP shift over pins (examples/electrical_tcu.py with its ZF8HP gearbox): the 8-speed automatic whose
shift elements take solenoid currents through a valve map (configs/zf8hp_electrical.toml), its speed sensors
and solenoids on the sim device (configs/io_device_zf8hp.toml), the example TCU closing the 1 -> 2 upshift
(clutch C out, clutch E in) on the speeds it measures from edge periods; stepwise and lockstep equal bit for
bit."""

import sys

import numpy as np
import pytest

from plant_models.config import repo_root
from plant_models.registry import load_plant
from server.realtime.runtime import build, load_io_config

sys.path.insert(0, str(repo_root() / "examples"))

import electrical_tcu as ex  # noqa: E402

GB = ex.ZF8HP
RATIO_1, RATIO_2 = 108.0 / 23.0, 72.0 / 23.0  # the 8HP70's 1st and 2nd (docs/transmissions.md)


@pytest.fixture(scope="module")
def io_path(tmp_path_factory):
    p = tmp_path_factory.mktemp("io") / "io_electrical_zf8hp_stepped.toml"
    p.write_text(ex.io_stepped(GB))
    return p


@pytest.fixture(scope="module")
def stepwise():
    tcu = ex.ElectricalTcu(gearbox=GB)
    return tcu, ex.run_stepwise(tcu)


def _ix():
    return {s.name: k for k, s in enumerate(load_plant(GB.plant).outputs)}


def test_the_config_takes_solenoid_currents_and_the_io_config_names_the_channel_map():
    plant = load_plant("zf8hp_electrical")
    assert [s.name for s in plant.inputs if s.unit == "A"] == ["i_A", "i_B", "i_C", "i_D", "i_E"]
    io = load_io_config("io_electrical_zf8hp")
    dev = next(a for a in io.adapters if a.type == "device")
    assert dev.options["channels"] == "io_device_zf8hp.toml"
    # 12 bar through the valve map (0.2 A -> 0 bar, 1.0 A -> 20 bar) is the configs' 0.68 A
    assert io.initial_inputs["i_C"] == pytest.approx(0.2 + 12.0 / 20.0 * 0.8, abs=1e-12)
    srv = build("zf8hp_electrical", "io_electrical_zf8hp", mode="lockstep", status_line=False)  # checked, not opened
    try:
        assert srv.plant.input_dict()["i_A"] == io.initial_inputs["i_A"]
    finally:
        srv.close()


def test_the_upshift_closes_on_measured_speeds_and_reaches_the_ratio_of_2nd(stepwise):
    tcu, rows = stepwise
    ix = _ix()
    assert tcu.phases == ["hold", "fill", "torque", "inertia", "lock"]
    t_lock = dict((p, t) for t, p in tcu.timeline)["lock"]
    gear, ratio = rows[:, ix["gear"]], rows[:, ix["ratio"]]
    k_before = int(0.4 / 1e-3)
    assert gear[k_before] == 1 and ratio[k_before] == pytest.approx(RATIO_1, rel=1e-12)
    # the shift completes: 2nd engaged (A, B, E stuck, C open), the input at 72/23 times the output
    assert gear[-1] == 2 and ratio[-1] == pytest.approx(RATIO_2, rel=1e-12)
    assert rows[-1, ix["w_input"]] == pytest.approx(RATIO_2 * rows[-1, ix["w_out"]], rel=1e-12)
    assert [rows[-1, ix[f"stuck_{e}"]] for e in "ABCDE"] == [1.0, 1.0, 0.0, 0.0, 1.0]
    assert rows[-1, ix["pressure_C"]] < 0.5 and rows[-1, ix["pressure_E"]] == pytest.approx(12.0, abs=1e-6)
    # the TCU locked on its own measurement, after the plant's clutch E had stuck (not read from the plant)
    k_stuck = int(np.argmax(rows[:, ix["stuck_E"]] >= 0.5))
    assert 0.6 < k_stuck * 1e-3 <= t_lock + 1e-9 < 1.0
    # what it measured from edge periods at the end, against the plant (a window on accelerating shafts: 1 %)
    assert tcu.trace[-1][1] == pytest.approx(rows[-1, ix["w_input"]], rel=0.01)
    assert tcu.trace[-1][3] == pytest.approx(rows[-1, ix["w_out"]], rel=0.01)
    assert tcu.trace[-1][1] / tcu.trace[-1][3] == pytest.approx(RATIO_2, rel=0.01)
    assert tcu.range_position == 3 and tcu.bad_range_codes == 0


def test_lockstep_equals_the_stepwise_run_bit_for_bit(stepwise, io_path):
    tcu, rows = stepwise
    tcu2 = ex.ElectricalTcu(gearbox=GB)
    rows2 = ex.run_lockstep(tcu2, io_path)
    assert rows2.shape == rows.shape and np.array_equal(rows2, rows)
    assert tcu2.timeline == tcu.timeline and tcu2.trace == tcu.trace


def test_the_example_runs_the_8hp_from_its_command_line(capsys):
    assert ex.main(["--gearbox", "zf8hp"]) == 0
    assert "gear 2" in capsys.readouterr().out


def test_the_upshift_closes_in_realtime_at_1khz(stepwise, io_path):
    tcu, rows = stepwise
    tcu3 = ex.ElectricalTcu(gearbox=GB)
    r = ex.run_realtime(tcu3, io_path)
    # the TCU runs inside the tick: whatever the wall clock did, the closed loop is the stepwise one
    assert r["ticks"] >= len(rows) and r["outputs"]["gear"] == 2 and r["status"]["mode"] == "realtime"
    assert tcu3.timeline == tcu.timeline


def test_describe_finds_the_8hps_channel_map_by_its_ports(capsys):
    """A described transmission is kind "transmission": describe takes the channel map whose ports the plant has."""
    import json

    from server.cli import describe

    describe.run(type("A", (), {"config": "zf8hp_electrical", "json": True})())
    d = json.loads(capsys.readouterr().out)
    assert d["device_channels_source"] == "configs/io_device_zf8hp.toml"
    assert [c["name"] for c in d["device_channels"]][:7] == ["n_in", "n_out", "sol_A", "sol_B", "sol_C", "sol_D",
                                                            "sol_E"]
    describe.run(type("A", (), {"config": "zf8hp", "json": False})())  # pressures: no map fits
    assert "device channels" not in capsys.readouterr().out
