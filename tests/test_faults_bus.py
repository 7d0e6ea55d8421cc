"""Injected CAN and ZeroMQ faults: what the transmission controller sees on the bus, what the plant receives.

CAN faults act per DBC message in the compiled frame codec (drop, delay by n
cycles, frozen alive counter, corrupt CRC, wrong DLC, a signal out of range)
and in the receive thread (a command message ignored); a lockstep loop with
the CAN adapter on python-can's virtual bus and a TCU node on the same
channel (this test) shows each on the wire, checked with the TCU-side E2E
decoder.  ZeroMQ faults drop or hold back incoming commands.
"""

from __future__ import annotations

import time
import uuid

import can
import cantools
import pytest

from can_support import ROOT
from io_adapters.can.adapter import CanAdapter
from io_adapters.can.e2e import E2EDecoder, E2EEncoder
from plant_models.registry import load_plant
from server.realtime.loop_config import LoopConfig
from server.realtime.runtime import assemble
from server.realtime.watchdog import WatchdogConfig

from server_support import ServerProcess

DBC = cantools.database.load_file(str(ROOT / "configs" / "powershift.dbc"))
SPEEDS_A = 0x200


@pytest.fixture
def bench():
    channel = f"flt-{uuid.uuid4().hex[:8]}"
    plant = load_plant("powershift")
    adapter = CanAdapter("can", {"interface": "virtual", "channel": channel})
    srv = assemble(plant, [adapter], LoopConfig(mode="lockstep", status_interval_s=0.0),
                   WatchdogConfig(enabled=False),
                   initial_inputs={"p_c1": 16.0, "p_c3": 16.0, "p_c6": 16.0, "engine_torque": 300.0})
    srv.loop.open()
    tcu = can.Bus(interface="virtual", channel=channel)
    srv.loop.start()
    yield srv, adapter, tcu
    tcu.shutdown()
    srv.loop.close()


def _frames(tcu, ident=SPEEDS_A):
    """Every frame with this ID (None: any) the TCU has received so far."""
    out = []
    while True:
        m = tcu.recv(0.05)
        if m is None:
            return out
        if ident is None or m.arbitration_id == ident:
            out.append(m)


def _sent(srv, message="HIL_SpeedsA"):
    return srv.loop.adapters[0].status()["tx"]["messages"][message]["sent"]


def _run(srv, tcu, ticks, ident=SPEEDS_A):
    """Step ``ticks``; the frames with this ID the TCU received from them: waited for until as many as the
    adapter counts sent have arrived (within a generous bound, not a fixed pause a loaded machine can outlast),
    and any more."""
    _frames(tcu, ident)
    sent = _sent(srv)
    srv.loop.step(ticks)
    want, out = _sent(srv) - sent, []
    end = time.monotonic() + 30.0
    while len(out) < want and time.monotonic() < end:
        m = tcu.recv(0.1)
        if m is not None and m.arbitration_id == ident:
            out.append(m)
    return out + _frames(tcu, ident)


def _heard(adapter, tcu, message):
    """The TCU sends ``message``; returns once the adapter's receive thread has handled it (a frame handled is
    visible to the next tick)."""
    from can_support import wait_until

    handled = adapter.rx_handled
    tcu.send(message)
    wait_until(lambda: adapter.rx_handled > handled, 30.0, "the adapter's receive thread to handle the frame")


def _decoder():
    return E2EDecoder(DBC.get_message_by_name("HIL_SpeedsA"), "SpeedsA_CRC", "SpeedsA_Counter", 0x0200)


def _set(srv, fault):
    rep = srv.control.handle({"cmd": "fault_set", "fault": fault})
    assert rep["ok"], rep
    return rep["name"]


def test_a_dropped_message_is_not_sent_and_the_others_are(bench):
    srv, adapter, tcu = bench
    before = _run(srv, tcu, 100)
    assert len(before) == 10  # every 10 ms
    _set(srv, {"target": "can", "message": "HIL_SpeedsA", "kind": "drop"})
    _frames(tcu)
    speeds_b = _sent(srv, "HIL_SpeedsB")
    srv.loop.step(100)
    want, seen = _sent(srv, "HIL_SpeedsB") - speeds_b, []
    end = time.monotonic() + 30.0
    while seen.count(0x201) < want and time.monotonic() < end:  # every HIL_SpeedsB of the 100 ticks arrived
        if (m := tcu.recv(0.1)) is not None:
            seen.append(m.arbitration_id)
    seen += [m.arbitration_id for m in _frames(tcu, None)]
    assert want == 10 and SPEEDS_A not in seen and seen.count(0x201) == 10  # HIL_SpeedsB still goes out
    assert adapter.status()["tx"]["messages"]["HIL_SpeedsA"]["dropped_by_fault"] == 10
    srv.control.handle({"cmd": "fault_clear"})
    after = _run(srv, tcu, 100)
    assert len(after) == 10
    # the frames lost on the bus were packed: the TCU sees the alive counter jump by the 10 it missed, plus 1
    assert ((after[0].data[1] & 0x0F) - (before[-1].data[1] & 0x0F)) % 16 == 11


def test_a_delayed_message_arrives_n_cycles_late_with_its_old_content(bench):
    srv, adapter, tcu = bench
    before = _run(srv, tcu, 100)
    last = bytes(before[-1].data)
    _set(srv, {"target": "can", "message": "HIL_SpeedsA", "kind": "delay", "cycles": 3})
    frames = _run(srv, tcu, 100)
    assert len(frames) == 7  # the first 3 cycles fill the delay line
    dec = _decoder()
    dec.decode(last)
    for f in frames:  # counters continue by one: every packed frame goes out, only later
        assert dec.decode(bytes(f.data)) is not None
    srv.control.handle({"cmd": "fault_clear"})
    after = _run(srv, tcu, 100)
    assert len(after) == 10


def test_a_frozen_alive_counter_and_a_corrupt_crc_are_caught_by_the_tcu(bench):
    srv, adapter, tcu = bench
    dec = _decoder()
    for f in _run(srv, tcu, 50):
        assert dec.decode(bytes(f.data)) is not None
    name = _set(srv, {"target": "can", "message": "HIL_SpeedsA", "kind": "freeze_alive"})
    frames = _run(srv, tcu, 50)
    counters = {f.data[1] & 0x0F for f in frames}
    assert len(frames) == 5 and len(counters) == 1
    for f in frames:
        dec.decode(bytes(f.data))
    assert dec.counter_errors >= 4 and dec.crc_errors == 0
    srv.control.handle({"cmd": "fault_clear", "name": name})
    _set(srv, {"target": "can", "message": "HIL_SpeedsA", "kind": "corrupt_crc"})
    for f in _run(srv, tcu, 50):
        assert dec.decode(bytes(f.data)) is None
    assert dec.crc_errors == 5


def test_wrong_dlc_and_an_out_of_range_signal(bench):
    srv, adapter, tcu = bench
    _set(srv, {"target": "can", "message": "HIL_SpeedsA", "kind": "wrong_dlc"})
    frames = _run(srv, tcu, 30)
    assert frames and all(len(f.data) == 7 for f in frames)
    srv.control.handle({"cmd": "fault_clear"})
    assert all(len(f.data) == 8 for f in _run(srv, tcu, 30))
    _set(srv, {"target": "can", "message": "HIL_SpeedsA", "kind": "out_of_range", "signal": "EngineSpeed"})
    dec = _decoder()
    for f in _run(srv, tcu, 30):
        v = dec.decode(bytes(f.data))
        assert v is not None and v["EngineSpeed"] == 16000.5  # one raw step above the DBC maximum, CRC valid
    _set(srv, {"target": "can", "message": "HIL_SpeedsA", "kind": "out_of_range", "signal": "Shaft2Speed",
               "value": -16200.0})
    for f in _run(srv, tcu, 30):  # one out-of-range signal per message: the new fault replaced the first
        v = dec.decode(bytes(f.data))
        assert v is not None and v["Shaft2Speed"] == -16200.0 and abs(v["EngineSpeed"]) < 16000.0
    assert len(srv.loop.faults.active) == 1


def test_an_ignored_command_message_never_reaches_the_plant(bench):
    srv, adapter, tcu = bench
    msg = DBC.get_message_by_name("TCU_ClutchCmdA")
    enc = E2EEncoder(msg, "ClutchCmdA_CRC", "ClutchCmdA_Counter", 0x0100)
    values = {"PressureCmd_C1": 16.0, "PressureCmd_C2": 7.0, "PressureCmd_C3": 16.0, "PressureCmd_C4": 0.0}
    _set(srv, {"target": "can", "message": "TCU_ClutchCmdA", "kind": "ignore_rx"})
    for _ in range(5):
        _heard(adapter, tcu, can.Message(arbitration_id=0x100, data=enc.encode(values), is_extended_id=False))
        srv.loop.step(10)
    assert srv.plant.u[srv.plant.input_index("p_c2")] == 0.0
    assert adapter.status()["rx"]["ignored_by_fault"] == 5
    srv.control.handle({"cmd": "fault_clear"})
    _heard(adapter, tcu, can.Message(arbitration_id=0x100, data=enc.encode(values), is_extended_id=False))
    srv.loop.step(1)
    assert srv.plant.u[srv.plant.input_index("p_c2")] == 7.0


@pytest.mark.parametrize("fault,problem", [
    ({"target": "can", "message": "HIL_Nope", "kind": "drop"}, "no transmit (sensor) message 'HIL_Nope'"),
    ({"target": "can", "message": "TCU_ClutchCmdA", "kind": "drop"}, "no transmit (sensor) message"),
    ({"target": "can", "message": "HIL_SpeedsA", "kind": "ignore_rx"}, "no receive (command) message"),
    ({"target": "can", "message": "HIL_SpeedsA", "kind": "delay", "cycles": 99}, "'cycles' must be 1..16"),
    ({"target": "can", "message": "HIL_SpeedsA", "kind": "out_of_range", "signal": "Shaft2Speed", "value": 10.0},
     "inside the DBC range"),
    ({"target": "can", "message": "HIL_SpeedsA", "kind": "out_of_range", "signal": "Nope"}, "has no signal 'Nope'"),
])
def test_a_can_fault_that_does_not_fit_the_message_set_is_refused(bench, fault, problem):
    srv, adapter, tcu = bench
    rep = srv.control.handle({"cmd": "fault_set", "fault": fault})
    assert not rep["ok"] and problem in rep["error"]["message"], rep
    assert srv.loop.faults.active == []


def test_zmq_commands_dropped_or_delayed(tmp_path):
    with ServerProcess(tmp_path, mode="lockstep") as srv:
        with srv.client() as hil:
            hil.step(1)
            hil.set_fault({"target": "zmq", "kind": "drop_commands"})
            hil.set_inputs(engine_torque=123.0)
            time.sleep(0.2)
            assert hil.step(5).tick == 6 and hil.get()["u"]["engine_torque"] != 123.0
            assert hil.status()["adapters"]["zmq"]["dropped_by_fault"] == 1
            hil.clear_fault()
            hil.set_fault({"target": "zmq", "kind": "delay_commands", "cycles": 20})
            hil.set_inputs(engine_torque=321.0)
            time.sleep(0.2)
            hil.step(1)  # taken in before this tick, held back 20 ticks
            u = []
            for _ in range(25):
                hil.step(1)
                u.append(hil.get()["u"]["engine_torque"])
            first = u.index(321.0)
            assert 18 <= first <= 20 and all(x == 321.0 for x in u[first:])
            assert hil.faults()[0]["kind"] == "delay_commands"
            hil.request("reset")
            assert hil.faults() == []
