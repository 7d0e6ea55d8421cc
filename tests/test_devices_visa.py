"""The ``visa`` backend against pyvisa-sim instruments (tests/data/instruments_sim.yaml)."""

from pathlib import Path

import pytest

pytest.importorskip("pyvisa_sim", reason="pyvisa-sim is in the test extra")

from io_adapters.devices import (PIN_OPEN, AnalogIn, AnalogOut, DeviceError, DeviceLayout, FaultSwitch, PulseOut,
                                 create_device)
from io_adapters.devices.visa import EdgePeriods, pulse_frequency_Hz

YAML = Path(__file__).parent / "data" / "instruments_sim.yaml"
FG, PS, LOAD = "USB0::0x1111::0x2222::FG1::INSTR", "TCPIP0::127.0.0.1::inst0::INSTR", "ASRL1::INSTR"


def _layout():
    return DeviceLayout((PulseOut("n_out"), AnalogOut("kl30", max_V=30.0), AnalogOut("load_A", max_V=40.0),
                         AnalogIn("kl30_meas"), AnalogIn("load_V"), FaultSwitch("fs_n_out", "n_out")))


def _device():
    return create_device("visa", "rack", _layout(), {"visa_library": f"{YAML}@sim", "instruments": [
        {"role": "function_generator", "resource": FG, "channel": "n_out"},
        {"role": "power_supply", "resource": PS, "channel": "kl30", "measure": "kl30_meas"},
        {"role": "electronic_load", "resource": LOAD, "channel": "load_A", "measure": "load_V"}]})


def _ask(dev, index, query):
    return dev.instruments[index].handle.query(query)


def test_generator_follows_a_wheel_and_the_supply_sweeps_kl30():
    with _device() as dev:
        t = dev.new_targets()
        for k in range(20):
            rpm = 500.0 + 100.0 * k  # a 60-tooth wheel: rpm Hz of teeth
            t.pulse_mode[0] = 1
            t.frequency_Hz[0] = rpm
            t.analog_V[0] = 6.0 + 0.5 * k  # a KL30 sweep 6 .. 15.5 V
            t.analog_V[1] = 2.0
            dev.write_targets(k, t)
            assert dev.flush()
            assert float(_ask(dev, 0, "FREQ?")) == pytest.approx(rpm, abs=1e-6)
            assert _ask(dev, 0, "OUTP?") == "1"
            m = dev.read_measurements()
            assert m.analog_V[0] == pytest.approx(6.0 + 0.5 * k, abs=1e-4) and m.analog_V[1] == 13.5
        assert float(_ask(dev, 2, "CURR?")) == 2.0 and _ask(dev, 2, "INP?") == "1"
        # an open pin turns the generator off; so does a tick without edges
        t.pin_fault[0] = PIN_OPEN
        dev.write_targets(20, t)
        assert dev.flush() and _ask(dev, 0, "OUTP?") == "0"
        t.pin_fault[0] = 0
        t.pulse_mode[0] = 0
        t.edge_ns[0, :4] = [0, 250_000, 500_000, 750_000]  # 4 kHz
        t.edge_count[0] = 4
        dev.write_targets(21, t)
        assert dev.flush() and float(_ask(dev, 0, "FREQ?")) == 4000.0 and _ask(dev, 0, "OUTP?") == "1"
        assert dev.status()["instrument_errors"] == 0
        handles = [ins.handle for ins in dev.instruments]
    assert pulse_frequency_Hz(t, 0) == 4000.0 and len(handles) == 3


def test_bad_options_are_clear_errors():
    with pytest.raises(DeviceError, match="give at least one"):
        create_device("visa", "rack", _layout(), {})
    with pytest.raises(DeviceError, match="role 'scope' is not one of function_generator, power_supply"):
        create_device("visa", "rack", _layout(), {"instruments": [{"role": "scope"}]})
    dev = create_device("visa", "rack", _layout(), {"visa_library": f"{YAML}@sim", "instruments": [
        {"role": "power_supply", "resource": "TCPIP0::10.9.9.9::inst0::INSTR", "channel": "kl30"}]})
    with pytest.raises(DeviceError, match="cannot open"):
        dev.open()


def test_a_wheel_with_fewer_than_two_edges_a_tick_plays_its_edge_period():
    """A 60-tooth wheel at 909 rpm on a 1 kHz tick: one edge a tick or none (a 1.1 ms period).  The generator
    plays 1 / period from the edge of an earlier tick, holds it through a tick without an edge, and stops two
    periods after the last edge; a reset (the tick back) starts over."""
    layout = DeviceLayout((PulseOut("n_in"),))
    periods = EdgePeriods(1, 1_000_000)
    t = create_device("sim", "s", layout).new_targets()
    period_ns = 1_100_000
    played = []
    for k in range(60):
        start = k * 1_000_000
        edges = [m * period_ns - start for m in range(0, 60) if start <= m * period_ns < start + 1_000_000
                 and m * period_ns < 40_000_000]  # the wheel stops after its edge at 39.6 ms
        t.edge_count[0] = len(edges)
        t.edge_ns[0, :len(edges)] = edges
        periods.update(k, t)
        played.append(periods.frequency_Hz[0])
    assert played[0] == 0.0  # one edge, none before it
    assert all(f == pytest.approx(1e9 / period_ns, rel=1e-12) for f in played[2:40])
    # the last edge at 39.6 ms: tick 40 (to 41 ms) holds, tick 41 (to 42 ms > 39.6 + 2 x 1.1 ms) stops
    assert played[40] == pytest.approx(1e9 / period_ns) and played[41] == 0.0
    periods.update(3, t)  # a reset
    assert periods.frequency_Hz[0] == 0.0
