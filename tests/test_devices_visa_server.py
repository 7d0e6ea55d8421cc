"""The ``visa`` backend inside a running server: the device adapter of a lockstep server drives pyvisa-sim
instruments (tests/data/instruments_sim.yaml): a function generator follows the input shaft's tooth wheel, a
power supply gives KL30; ``fault_set`` and ``adapter_set`` reach the instruments through the control channel."""

import math
from pathlib import Path

import pytest

pytest.importorskip("pyvisa_sim", reason="pyvisa-sim is in the test extra")

from io_adapters.devices.visa import pulse_frequency_Hz  # noqa: E402
from server.realtime.runtime import build  # noqa: E402

YAML = Path(__file__).parent / "data" / "instruments_sim.yaml"
FG, PS = "USB0::0x1111::0x2222::FG1::INSTR", "TCPIP0::127.0.0.1::inst0::INSTR"
IO = f"""[loop]
mode = "lockstep"
status_line = false
[initial_inputs]
engine_torque = 300.0
load_torque = 3500.0
i_c1 = 0.84
i_c3 = 0.84
i_c6 = 0.84
[[adapters]]
type = "device"
name = "device"
backend = "visa"
channels = "io_device_powershift.toml"
[adapters.backend_options]
visa_library = "{YAML}@sim"
[[adapters.backend_options.instruments]]
role = "function_generator"
resource = "{FG}"
channel = "n_in"
[[adapters.backend_options.instruments]]
role = "power_supply"
resource = "{PS}"
channel = "kl30_sense"
"""


@pytest.fixture()
def server(tmp_path):
    io = tmp_path / "io_visa.toml"
    io.write_text(IO)
    srv = build("powershift_electrical", io, mode="lockstep", status_line=False)
    srv.open()
    assert srv.control.handle_now({"cmd": "start"})["ok"]
    try:
        yield srv
    finally:
        srv.close()


def _step(srv, n):
    rep = srv.control.handle_now({"cmd": "step", "n": n})
    assert rep["ok"], rep


def test_a_lockstep_server_drives_the_simulated_instruments_through_the_device_adapter(server):
    srv = server
    dev = next(a for a in srv.loop.adapters if a.type_name == "device")
    assert dev.backend == "visa" and not dev._fused
    gen, supply = dev.device.instruments
    assert gen.idn == "SIM,FG-1,1,1.0" and supply.idn == "SIM,PS-1,1,1.0"
    slot = dev.layout.index("n_in", "pulse_out")
    w_1 = srv.plant.output_index("w_1")
    for _ in range(3):
        _step(srv, 100)
        assert dev.device.flush()
        # the generator plays the 60-tooth input wheel's frequency from its edge periods (about one edge a tick
        # here: the period from the last tick's edge): the shaft's speed (it accelerates: within 1 %)
        freq = float(gen.handle.query("FREQ?"))
        assert freq == pytest.approx(dev.device._periods.frequency_Hz[slot], abs=1e-6)
        assert freq == pytest.approx(srv.plant.y[w_1] * 60 / (2 * math.pi), rel=0.01)
        if dev.targets.edge_count[slot] >= 2:
            assert freq == pytest.approx(pulse_frequency_Hz(dev.targets, slot), abs=1e-6)
        assert gen.handle.query("OUTP?") == "1"
        assert float(supply.handle.query("MEAS:VOLT?")) == 13.5 and supply.handle.query("OUTP?") == "1"
    # a pin fault through the control channel turns the generator's output off; a KL30 sweep step reaches the supply
    rep = srv.control.handle_now({"cmd": "fault_set", "fault": {"target": "device", "kind": "open", "pin": "n_in"}})
    assert rep["ok"], rep
    rep = srv.control.handle_now({"cmd": "adapter_set", "adapter": "device", "set": {"supply_mV": 11800}})
    assert rep["ok"], rep
    _step(srv, 2)
    assert dev.device.flush()
    assert gen.handle.query("OUTP?") == "0" and float(supply.handle.query("MEAS:VOLT?")) == 11.8
    rep = srv.control.handle_now({"cmd": "fault_clear", "name": "device:n_in:open"})
    assert rep["ok"], rep
    _step(srv, 2)
    assert dev.device.flush() and gen.handle.query("OUTP?") == "1"
    st = srv.report.status()["adapters"]["device"]
    assert st["backend"] == "visa" and st["device"]["instrument_errors"] == 0 and st["device"]["commands"] > 2
    assert st["device"]["ticks"] == 304 and st["supply_V"] == 11.8


def test_the_server_closes_the_instruments_outputs_when_it_stops(server):
    srv = server
    dev = next(a for a in srv.loop.adapters if a.type_name == "device")
    _step(srv, 20)
    assert dev.device.flush()
    gen = dev.device.instruments[0]
    assert gen.handle.query("OUTP?") == "1"
    writes = []
    real_write = gen.handle.write
    gen.handle.write = lambda cmd: (writes.append(cmd), real_write(cmd))[1]
    srv.close()  # the loop closes its adapters: every output off, then the instruments closed
    assert dev.device._thread is None and writes == ["OUTP 0"]


def test_the_generator_follows_a_scenarios_own_step(server):
    """A lockstep scenario with a dt_s of its own (0.5 ms) changes the loop's step between runs: the generator's
    edge periods across ticks are timed with it (a 60-tooth wheel below 2000 rpm has at most one edge in most
    0.5 ms ticks, so its frequency comes from the period since an earlier tick's edge), and it still plays the
    wheel's frequency."""
    srv = server
    dev = next(a for a in srv.loop.adapters if a.type_name == "device")
    slot = dev.layout.index("n_in", "pulse_out")
    w_1 = srv.plant.output_index("w_1")
    start = {"engine_torque": 300.0, "load_torque": 3500.0, "i_c1": 0.84, "i_c3": 0.84, "i_c6": 0.84}
    scenario = {"duration_s": 0.4, "dt_s": 0.0005, "inputs": start}
    rep = srv.control.handle_now({"cmd": "load_scenario", "scenario": scenario})
    assert rep["ok"], rep
    assert srv.loop.dt == 0.0005
    _step(srv, 300)
    singles = 0
    for _ in range(60):  # tick by tick: those with one edge play the period from the last tick's edge
        _step(srv, 1)
        assert dev.device.flush()
        if dev.targets.edge_count[slot] == 1:
            singles += 1
            freq = float(dev.device.instruments[0].handle.query("FREQ?"))
            assert freq == pytest.approx(srv.plant.y[w_1] * 60 / (2 * math.pi), rel=0.01)
    assert singles >= 10
    from io_adapters.devices.stage import X_DT

    assert dev.device._periods.tick_ns == 500_000 and dev.state.misc[X_DT] == 0.0005  # the wheel model's step too
