"""The CAN FD message sets of the DCT and the 8-speed automatic (64-byte frames, E2E profile 5).

The profile-5 CRC is CRC-16/CCITT-FALSE; both implementations (the compiled
codec and the plain-Python one the TCU side uses) are checked against the
catalogue check value and against crccheck, an independent CRC library.
"""

from __future__ import annotations

import random

import can
import cantools
import numpy as np
import pytest
from crccheck.crc import Crc16CcittFalse

from can_support import ROOT, Harness, load_example, wait_until
from io_adapters.can import frames
from io_adapters.can.e2e import E2EDecoder, E2EEncoder, crc16_ccitt_false, e2e_p05_crc
from io_adapters.can.message_set import load_message_set
from plant_models.registry import load_plant

DctTcu = load_example("ecu_emulator").DctTcu
DCT_FD = cantools.database.load_file(str(ROOT / "configs" / "dct_fd.dbc"))
SETS = (("dct", "io_can_dct_fd", "io_can_dct"), ("zf8hp", "io_can_zf8hp_fd", "io_can_zf8hp"))


def test_crc16_check_value_and_an_independent_library():
    assert crc16_ccitt_false(b"123456789") == 0x29B1  # CRC-16/CCITT-FALSE catalogue check value
    buf = np.frombuffer(b"123456789", dtype=np.uint8).copy()
    assert frames.crc16_ccitt(buf, 9, -10, -1) == 0x29B1
    rng = random.Random(5)
    for _ in range(200):
        n = rng.randrange(3, 65)
        data = bytes(rng.randrange(256) for _ in range(n))
        did = rng.randrange(0x10000)
        pos = rng.randrange(n - 1)
        body = data[:pos] + data[pos + 2:] + bytes((did & 0xFF, did >> 8))
        want = Crc16CcittFalse.calc(body)
        assert e2e_p05_crc(data, did, pos) == want
        assert frames.crc16_ccitt(np.frombuffer(data, dtype=np.uint8).copy(), n, pos, did) == want


@pytest.mark.parametrize("plant,fd_set,classic", SETS)
def test_fd_set_carries_every_signal_of_the_classic_set(plant, fd_set, classic):
    p = load_plant(plant)
    fd, cl = load_message_set(fd_set, p, 0.001), load_message_set(classic, p, 0.001)

    def mapped(layout):  # (plant output or status source, index) of every transmitted signal
        return {(s.source, s.target) for m in layout.messages for s in m.signals if s.target >= 0}
    assert {s.target for m in cl.rx.messages for s in m.signals if s.target >= 0} == \
        {s.target for m in fd.rx.messages for s in m.signals if s.target >= 0}
    assert mapped(cl.tx) == mapped(fd.tx)
    db = cantools.database.load_file(fd.dbc_path)
    for m in db.messages:
        assert m.is_fd and m.length == 64 and m.dbc.attributes["CANFD_BRS"].value == 1
    for m in fd.rx.messages + fd.tx.messages:
        assert m.crc_bits == 16 and m.counter_modulus == 256


def test_dct_fd_frames_are_64_bytes_with_brs_and_profile_5():
    with Harness("dct", options={"fd": True, "message_set": "io_can_dct_fd"}) as h:
        bus = h.peer()
        try:
            h.run(10)
            got = []
            while (m := bus.recv(0.05)) is not None:
                got.append(m)
        finally:
            bus.shutdown()
    sensors = DCT_FD.get_message_by_name("HIL_DctSensorsFd")
    mine = [m for m in got if m.arbitration_id == sensors.frame_id]
    assert len(mine) == 1 and all(m.is_fd and m.bitrate_switch and len(m.data) == 64 for m in got)
    data = bytes(mine[0].data)
    assert data[0] | (data[1] << 8) == Crc16CcittFalse.calc(data[2:] + b"\x80\x02")  # data ID 0x0280, low byte first
    assert data[2] == 0  # first alive counter
    v = E2EDecoder(sensors, "DctSensorsFd_CRC", "DctSensorsFd_Counter", 0x0280, "autosar_p05").decode(data)
    assert v is not None and v["PlantStatus"] == h.plant.output_dict()["status"]


def test_dct_fd_rejections_are_counted_per_reason():
    cmd = DCT_FD.get_message_by_name("TCU_DctCmdFd")
    enc = E2EEncoder(cmd, "DctCmdFd_CRC", "DctCmdFd_Counter", 0x0180, "autosar_p05")
    vals = {"GearOddCmd": 1, "GearEvenCmd": 2, "PressureCmd_C1": 3.25, "PressureCmd_C2": 0.0}
    with Harness("dct", options={"fd": True, "message_set": "io_can_dct_fd"}) as h:
        bus = h.peer()
        try:
            good = enc.encode(vals)
            frames_ = [good, enc.encode(vals, corrupt_crc=True), good,  # crc, then a frozen counter
                       enc.encode(dict(vals, GearOddCmd=2), counter=1),  # out of range (the next counter)
                       enc.encode(vals)[:48]]  # wrong length
            for k, data in enumerate(frames_):
                bus.send(can.Message(arbitration_id=cmd.frame_id, is_extended_id=False, is_fd=True,
                                     bitrate_switch=True, data=data))
                h.wait_frames(k + 1)
        finally:
            bus.shutdown()
        rej = h.adapter.status()["rx"]["rejected"]
        assert (rej["crc"], rej["counter_frozen"], rej["out_of_range"], rej["dlc"]) == (1, 1, 1, 1)
        assert h.adapter.status()["rx"]["messages"]["TCU_DctCmdFd"]["accepted"] == 1
        h.run(1)
        assert h.plant.input_dict()["p_c1"] == pytest.approx(3.25)


def test_dct_launch_closed_over_can_fd_in_lockstep():
    with Harness("dct", options={"fd": True, "message_set": "io_can_dct_fd"}, mode="lockstep") as h:
        bus = can.Bus(interface="virtual", channel=h.options["channel"], fd=True)
        try:
            tcu = DctTcu(bus, fd=True)
            sent = 0
            for c in range(150):  # 1.5 s, ten plant ticks per 10 ms TCU task
                sent += tcu.cycle(c * 0.01)
                wait_until(lambda: h.adapter.rx_handled >= sent, what="the command cycle")
                h.run(10)
            tcu.receive()
        finally:
            bus.shutdown()
        assert tcu.e2e_errors == 0 and h.adapter.status()["rx"]["rejected_total"] == 0
        assert tcu.engaged_at_s is not None and 0.5 < tcu.engaged_at_s < 1.4
        st = tcu.rx["HIL_DctState"]
        assert (st["GearActual"], st["Stuck_C1"], st["SyncOddLocked"], st["SelectedOdd"]) == (1, 1, 1, 1)
        assert st["EngineSpeed"] == st["OddShaftSpeed"]  # clutch 1 stuck
        assert st["OddShaftSpeed"] / st["OutputSpeed"] == pytest.approx(3.5 * 4.0, rel=1e-4)  # 0.01 rpm steps


def test_zf8hp_first_gear_held_over_can_fd():
    """The 8-speed automatic on its FD set: one 64-byte command frame, the sensor frame back (profile 5)."""
    db = cantools.database.load_file(str(ROOT / "configs" / "zf8hp_fd.dbc"))
    p5 = "autosar_p05"
    cmd = E2EEncoder(db.get_message_by_name("TCU_ShiftCmdFd"), "ShiftCmdFd_CRC", "ShiftCmdFd_Counter", 0x0180, p5)
    eng = E2EEncoder(db.get_message_by_name("ENG_TorqueFd"), "EngTorqueFd_CRC", "EngTorqueFd_Counter", 0x0190, p5)
    dec = E2EDecoder(db.get_message_by_name("HIL_SensorsFd"), "SensorsFd_CRC", "SensorsFd_Counter", 0x0280, p5)
    got = None
    with Harness("zf8hp", options={"fd": True, "message_set": "io_can_zf8hp_fd"}) as h:
        bus = h.peer()
        sent = 0
        try:
            for _ in range(100):  # 1 s of 10 ms command cycles
                for enc, values in ((cmd, {"PressureCmd_A": 12.0, "PressureCmd_B": 12.0, "PressureCmd_C": 12.0,
                                           "PressureCmd_D": 0.0, "PressureCmd_E": 0.0}),
                                    (eng, {"EngineTorque": 150.0})):
                    bus.send(can.Message(arbitration_id=enc.message.frame_id, is_extended_id=False, is_fd=True,
                                         bitrate_switch=True, data=enc.encode(values)))
                sent += 2
                wait_until(lambda: h.adapter.rx_handled >= sent, what="the command cycle")
                h.run(10)
                while (msg := bus.recv(0.0)) is not None:
                    if msg.arbitration_id == dec.message.frame_id:
                        got = dec.decode(bytes(msg.data))
                        assert got is not None
        finally:
            bus.shutdown()
        assert h.adapter.status()["rx"]["rejected_total"] == 0 and dec.crc_errors == dec.counter_errors == 0
        u = h.plant.input_dict()
        assert (u["p_A"], u["p_B"], u["p_C"], u["p_D"], u["input_torque"]) == (12.0, 12.0, 12.0, 0.0, 150.0)
    assert (got["GearActual"], got["Stuck_A"], got["Stuck_B"], got["Stuck_C"], got["Stuck_D"]) == (1, 1, 1, 1, 0)
    assert got["InputSpeed"] / got["OutputSpeed"] == pytest.approx(108 / 23, rel=1e-3)  # 0.01 rpm steps
    assert got["Ratio"] == pytest.approx(108 / 23, abs=1e-4)


Zf8hpTcu = load_example("ecu_emulator").Zf8hpTcu
RATIO_1, RATIO_2 = 108 / 23, 72 / 23  # 8HP70 1st and 2nd (docs/transmissions.md)


def _check_upshift_1_2(tcu) -> None:
    """The 1 -> 2 swap went through its phases, closed on the received slip of E, and the plant says 2nd."""
    assert [p for _, p in tcu.phases] == ["hold", "torque", "inertia", "lock"]
    assert tcu.closed_at_s is not None and tcu.e2e_errors == 0
    rx = tcu.rx
    assert (rx["GearActual"], rx["Stuck_A"], rx["Stuck_B"], rx["Stuck_C"], rx["Stuck_E"]) == (2, 1, 1, 0, 1)
    assert rx["InputSpeed"] / rx["OutputSpeed"] == pytest.approx(RATIO_2, rel=1e-3)  # 0.01 rpm steps
    assert rx["Ratio"] == pytest.approx(RATIO_2, abs=1e-4)
    assert abs(tcu.slip_e_rpm()) < 0.05  # E stuck: ring 2 / sun 3 turns with sun 4 / ring 3


def test_zf8hp_upshift_1_2_closed_over_can_fd_in_lockstep():
    with Harness("zf8hp", options={"fd": True, "message_set": "io_can_zf8hp_fd"}, mode="lockstep") as h:
        bus = can.Bus(interface="virtual", channel=h.options["channel"], fd=True)
        try:
            tcu = Zf8hpTcu(bus, fd=True, shift_at_s=0.5)
            sent = 0
            ratio_before = None
            for c in range(120):  # 1.2 s, ten plant ticks per 10 ms TCU task
                sent += tcu.cycle(c * 0.01)
                wait_until(lambda: h.adapter.rx_handled >= sent, what="the command cycle")
                if c == 49:
                    ratio_before = tcu.rx["InputSpeed"] / tcu.rx["OutputSpeed"]
                h.run(10)
            tcu.receive()
        finally:
            bus.shutdown()
        assert ratio_before == pytest.approx(RATIO_1, rel=1e-3) and tcu.rx["GearActual"] == 2
        _check_upshift_1_2(tcu)
        y = h.plant.output_dict()
        assert (y["gear"], y["stuck_A"], y["stuck_B"], y["stuck_C"], y["stuck_E"]) == (2, 1, 1, 0, 1)
        assert 0.6 < tcu.closed_at_s < 1.1
        st = h.adapter.status()["rx"]
        assert st["rejected_total"] == 0 and st["accepted"] == tcu.commands_sent


def test_zf8hp_upshift_1_2_closed_over_can_fd_in_realtime():
    """The same shift with the real-time loop at 1 kHz and the TCU on its own 10 ms clock."""
    import threading

    from io_adapters.can.adapter import CanAdapter
    from server.realtime.loop_config import LoopConfig
    from server.realtime.runtime import assemble
    from server.realtime.watchdog import WatchdogConfig

    ch = f"rt-{random.getrandbits(32):08x}"
    plant = load_plant("zf8hp")
    ad = CanAdapter("can", {"interface": "virtual", "channel": ch, "fd": True, "message_set": "io_can_zf8hp_fd"})
    loop = assemble(plant, [ad], LoopConfig(mode="realtime", rate_hz=1000.0, duration_s=1.6, status_interval_s=0.0),
                    WatchdogConfig(timeout_s=0.1, hold_s=0.05, ramp_s=0.1)).loop
    loop.open()
    bus = can.Bus(interface="virtual", channel=ch, fd=True)
    runner = threading.Thread(target=loop.run, daemon=True)
    runner.start()
    try:
        tcu = Zf8hpTcu(bus, fd=True, shift_at_s=0.5)
        tcu.run(1.3)
    finally:
        runner.join(timeout=10)
        bus.shutdown()
        st = ad.status()["rx"]
        loop.close()
    _check_upshift_1_2(tcu)  # what the plant sent while the TCU ran (after it, the watchdog takes over)
    assert st["rejected_total"] == 0
