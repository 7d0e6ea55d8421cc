"""Mistakes in CAN message sets and adapter options end in one clear line: file, key, problem."""

from __future__ import annotations

import re

import pytest

from can_support import ROOT
from io_adapters.base import AdapterError, LoopContext, new_tick_info
from io_adapters.can.adapter import CanAdapter
from io_adapters.can.message_set import load_message_set, unit_gain
from plant_models.config import ConfigError
from plant_models.registry import load_plant

DBC = (ROOT / "configs" / "powershift.dbc").as_posix()
BASE = (ROOT / "configs" / "io_can_powershift.toml").read_text().replace('dbc = "powershift.dbc"', f'dbc = "{DBC}"')


@pytest.fixture(scope="module")
def plant():
    return load_plant("powershift")


def _write(tmp_path, text):
    p = tmp_path / "io_can_test.toml"
    p.write_text(text)
    return p


def _error(tmp_path, plant, text, period_s=0.001) -> str:
    path = _write(tmp_path, text)
    with pytest.raises(ConfigError) as exc:
        load_message_set(path, plant, period_s)
    return str(exc.value).replace(str(path), "FILE")


def test_shipped_message_sets_resolve():
    for kind in ("powershift", "dct"):
        ms = load_message_set(f"io_can_{kind}", load_plant(kind), 0.001)
        assert ms.rx.n_msg >= 3 and ms.tx.n_msg == 7
        assert all(m.crc_signal >= 0 and m.counter_signal >= 0 for m in ms.rx.messages + ms.tx.messages)


def test_unit_conversions():
    assert unit_gain("rpm", "rad/s") == pytest.approx(0.10471975511965977)
    assert unit_gain("Nm", "N m") == 1.0 and unit_gain("kPa", "bar") == pytest.approx(0.01)
    assert unit_gain("km/h", "m/s") == pytest.approx(1 / 3.6)
    assert unit_gain("rpm", "bar") is None and unit_gain("furlong", "m") is None


def test_unknown_message(tmp_path, plant):
    msg = _error(tmp_path, plant, BASE + "\n[rx.TCU_Nope.signals]\nX = \"p_c1\"\n")
    assert msg.startswith("FILE: rx.TCU_Nope: no message 'TCU_Nope' in the DBC; its messages are ENG_Torque, ")


def test_unknown_signal_and_unknown_port(tmp_path, plant):
    msg = _error(tmp_path, plant, BASE.replace('PressureCmd_C1 = "p_c1"', 'PressureCmd_C9 = "p_c1"'))
    assert msg == ("FILE: rx.TCU_ClutchCmdA.signals.PressureCmd_C9: message TCU_ClutchCmdA has no signal "
                   "'PressureCmd_C9'; its signals are ClutchCmdA_CRC, ClutchCmdA_Counter, PressureCmd_C1, "
                   "PressureCmd_C2, PressureCmd_C3, PressureCmd_C4")
    msg = _error(tmp_path, plant, BASE.replace('PressureCmd_C1 = "p_c1"', 'PressureCmd_C1 = "p_c9"'))
    assert msg.startswith("FILE: rx.TCU_ClutchCmdA.signals.PressureCmd_C1: powershift: no input signal 'p_c9'; "
                          "inputs are p_c1, ")


def test_incompatible_units(tmp_path, plant):
    msg = _error(tmp_path, plant, BASE.replace('EngineSpeed = "w_1"', 'EngineSpeed = "pressure_c1"'))
    assert msg == ("FILE: tx.HIL_SpeedsA.signals.EngineSpeed: unit 'rpm' of the DBC signal does not convert to unit "
                   "'bar' of pressure_c1; give { port = \"pressure_c1\", factor = ... } "
                   "(plant value = factor * DBC value + bias)")


def test_checksum_cannot_be_mapped(tmp_path, plant):
    msg = _error(tmp_path, plant, BASE.replace('PressureCmd_C1 = "p_c1"', 'ClutchCmdA_CRC = "p_c1"'))
    assert msg == ("FILE: rx.TCU_ClutchCmdA.signals.ClutchCmdA_CRC: is the message's checksum or counter; "
                   "the adapter fills and checks it")


def test_cycle_time_must_be_whole_ticks(tmp_path, plant):
    msg = _error(tmp_path, plant, BASE, period_s=0.0003)
    assert msg == "FILE: tx.HIL_SpeedsA.cycle_ms: cycle time 10 ms is not a whole number of 0.3 ms ticks"


def test_missing_dbc(tmp_path, plant):
    msg = _error(tmp_path, plant, BASE.replace(DBC, "/nonexistent/x.dbc"))
    assert msg == "FILE: dbc: DBC file /nonexistent/x.dbc not found"


def test_integer_port_needs_integer_scaling(tmp_path, plant):
    dct = load_plant("dct")
    text = (ROOT / "configs" / "io_can_dct.toml").read_text().replace(
        'dbc = "dct.dbc"', f'dbc = "{(ROOT / "configs" / "dct.dbc").as_posix()}"').replace(
        'GearOddCmd = "gear_odd"', 'GearOddCmd = { port = "gear_odd", factor = 0.5 }')
    msg = _error(tmp_path, dct, text)
    assert msg == ("FILE: rx.TCU_DctCmd.signals.GearOddCmd: gear_odd takes whole numbers; the signal's scaling "
                   "(factor 1, offset 0) gives fractions")


def test_adapter_options_are_checked_at_creation():
    with pytest.raises(ConfigError, match=r"^adapter 'can': bitrate: must be >= 10000, got 5$"):
        CanAdapter("can", {"bitrate": 5})
    with pytest.raises(ConfigError, match=r"^adapter 'can': bitrat: unknown key"):
        CanAdapter("can", {"bitrat": 500000})
    with pytest.raises(ConfigError, match=r"^adapter 'can': channel: must be a string or an integer"):
        CanAdapter("can", {"channel": [1]})


def test_io_config_errors_name_the_file_and_the_adapter(tmp_path):
    from server.realtime.runtime import create_adapters, load_io_config

    io = tmp_path / "io.toml"
    io.write_text('[[adapters]]\ntype = "can"\nname = "can"\nbitrate = "fast"\n')
    with pytest.raises(ConfigError) as exc:
        create_adapters(load_io_config(io))
    assert str(exc.value) == f"{io}: adapters[0].bitrate: must be an integer, got string 'fast'"


def test_unknown_interface_is_an_adapter_error(plant):
    a = CanAdapter("can", {"interface": "nosuch", "channel": "x"})
    ctx = LoopContext(period_s=0.001, feed_watchdog=lambda ns: None, status=lambda: {},
                      tick_info=new_tick_info())
    with pytest.raises(AdapterError, match=re.escape("can: cannot open CAN interface 'nosuch' channel 'x': ")):
        a.open(plant, ctx)
    a.close()
