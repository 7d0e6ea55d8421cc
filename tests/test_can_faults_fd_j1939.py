"""Bus faults of the test bench on the CAN FD sets (profile 5) and on the J1939 rest-bus."""

from __future__ import annotations

import can
import cantools
import pytest
from crccheck.crc import Crc16CcittFalse

from can_support import ROOT, Harness
from io_adapters.can.declaration import DECLARATION as CAN_DECL
from io_adapters.can.e2e import E2EDecoder
from io_adapters.can.j1939_declaration import DECLARATION as J_DECL
from plant_models.errors import FaultError

from test_can_j1939_shift import Bench

DCT_FD = cantools.database.load_file(str(ROOT / "configs" / "dct_fd.dbc"))
SENSORS = DCT_FD.get_message_by_name("HIL_DctSensorsFd")


def _sensor_frames(kind: str, n_ticks: int = 40, **extra) -> list[can.Message]:
    with Harness("dct", options={"fd": True, "message_set": "io_can_dct_fd"}) as h:
        bus = h.peer()
        try:
            h.adapter.set_fault(CAN_DECL.parse_fault({"target": "can", "kind": kind, "message": "HIL_DctSensorsFd",
                                                      **extra}, "test"))
            h.run(n_ticks)
            got = []
            while (m := bus.recv(0.05)) is not None:
                if m.arbitration_id == SENSORS.frame_id:
                    got.append(m)
        finally:
            bus.shutdown()
    return got


def test_fd_corrupt_crc_inverts_both_crc_bytes():
    got = _sensor_frames("corrupt_crc")
    assert len(got) == 4
    for m in got:
        d = bytes(m.data)
        assert d[0] | (d[1] << 8) == Crc16CcittFalse.calc(d[2:] + b"\x80\x02") ^ 0xFFFF
    dec = E2EDecoder(SENSORS, "DctSensorsFd_CRC", "DctSensorsFd_Counter", 0x0280, "autosar_p05")
    assert all(dec.decode(bytes(m.data)) is None for m in got) and dec.crc_errors == 4


def test_fd_frozen_counter_wrong_length_drop_and_delay():
    assert [m.data[2] for m in _sensor_frames("freeze_alive")] == [0, 0, 0, 0]
    short = _sensor_frames("wrong_dlc")
    assert [len(m.data) for m in short] == [48] * 4 and all(m.is_fd for m in short)
    assert _sensor_frames("drop") == []
    delayed = _sensor_frames("delay", cycles=2)
    assert [m.data[2] for m in delayed] == [0, 1]  # two cycles late: 2 of the 4 frames out so far


def _node_frames(b: Bench, ticks: int) -> list[can.Message]:
    """The J1939 frames of the emulated nodes over ``ticks`` ticks (the can adapter's 11-bit frames left out)."""
    b.run(ticks)
    out = []
    while (m := b.bus.recv(0.0)) is not None:
        if m.is_extended_id:
            out.append(m)
    return out


def test_j1939_lost_address_claim_then_reclaim():
    b = Bench()
    try:
        _node_frames(b, 300)
        f = J_DECL.parse_fault({"target": "j1939", "kind": "lost_address_claim", "node": "engine"}, "test")
        b.j.set_fault(f)
        frames = _node_frames(b, 100)
        name = b.j.engine.name.to_bytes(8, "little")
        assert frames[0].arbitration_id == 0x18EEFFFE and bytes(frames[0].data) == name  # cannot claim
        assert not [m for m in frames if m.arbitration_id & 0xFF == 0x00]  # the engine is silent
        assert any(m.arbitration_id == 0x18FEF121 for m in frames)  # the vehicle ECU still sends CCVS1
        # while the fault holds the address taken, a request that nobody answers for 0x00 does not free it
        b.bus.send(can.Message(arbitration_id=0x18EAFF03, is_extended_id=True, data=bytes((0x00, 0xEE, 0x00))))
        frames = _node_frames(b, 400)
        assert [m.arbitration_id for m in frames if m.arbitration_id & 0xFFFF00FF == 0x18EE0000] == []
        assert [m for m in frames if m.arbitration_id == 0x18EEFFFE] and b.j.engine.state == "lost"
        b.j.clear_fault(f)
        frames = _node_frames(b, 300)
        assert frames[0].arbitration_id == 0x18EEFF00 and bytes(frames[0].data) == name  # claims again
        assert any(m.arbitration_id == 0x0CF00400 for m in frames)  # EEC1 back after the 250 ms
    finally:
        b.close()


def test_j1939_missing_dm1_and_dropped_or_short_eec1():
    b = Bench()
    try:
        frames = _node_frames(b, 1300)
        assert sum(m.arbitration_id == 0x18FECA00 for m in frames) == 2  # at 250 ms and 1250 ms
        b.j.set_fault(J_DECL.parse_fault({"target": "j1939", "kind": "missing_dm1", "node": "engine"}, "t"))
        b.j.set_fault(J_DECL.parse_fault({"target": "j1939", "kind": "drop", "message": "EEC1"}, "t"))
        frames = _node_frames(b, 2000)
        assert not [m for m in frames if m.arbitration_id in (0x18FECA00, 0x0CF00400)]
        assert b.j.status()["dropped_by_fault"] == 200
        b.j.set_fault(J_DECL.parse_fault({"target": "j1939", "kind": "wrong_dlc", "message": "EEC1"}, "t"))
        frames = _node_frames(b, 100)
        assert [len(m.data) for m in frames if m.arbitration_id == 0x0CF00400] == [7] * 10
        with pytest.raises(FaultError, match="no cyclic message 'DM2'"):
            b.j.check_fault(J_DECL.parse_fault({"target": "j1939", "kind": "drop", "message": "DM2"}, "t"))
        with pytest.raises(FaultError, match="j1939 has no node 'brakes'; its nodes are engine, vehicle"):
            b.j.check_fault(J_DECL.parse_fault({"target": "j1939", "kind": "missing_dm1", "node": "brakes"}, "t"))
    finally:
        b.close()


def test_dm1_of_configured_dtcs_goes_by_bam_on_the_bus():
    b = Bench({"engine_dtcs": [[190, 2, 1], [100, 1, 3]]})  # two active engine DTCs in the options
    try:
        frames = [(m.arbitration_id, bytes(m.data)) for m in _node_frames(b, 400)
                  if m.arbitration_id in (0x1CECFF00, 0x1CEBFF00, 0x18FECA00)]
    finally:
        b.close()
    body = bytes((0x04, 0xFF, 0xBE, 0x00, 0x02, 0x01, 0x64, 0x00, 0x01, 0x03))  # amber lamp; SPN 190, SPN 100
    assert frames == [(0x1CECFF00, bytes((32, 10, 0, 2, 0xFF, 0xCA, 0xFE, 0x00))),
                      (0x1CEBFF00, bytes((1,)) + body[:7]), (0x1CEBFF00, bytes((2,)) + body[7:] + b"\xff" * 4)]


def test_server_fault_maps_reach_the_j1939_declaration():
    from server.realtime.faults import parse_fault

    from plant_models.registry import load_plant

    plant = load_plant("powershift")
    s = parse_fault({"target": "j1939", "kind": "lost_address_claim", "node": "vehicle"}, plant)
    assert (s.target, s.kind) == ("j1939", "lost_address_claim")
    with pytest.raises(FaultError, match="'kind' of a j1939 fault must be one of drop, wrong_dlc, "
                                         "lost_address_claim, missing_dm1, dtc, got 'freeze_alive'"):
        parse_fault({"target": "j1939", "kind": "freeze_alive", "message": "EEC1"}, plant)
    with pytest.raises(FaultError, match="unknown key 'node'; allowed: target, kind, name, message$"):
        parse_fault({"target": "j1939", "kind": "drop", "node": "engine"}, plant)
    with pytest.raises(FaultError, match="a j1939 missing_dm1 fault needs 'node'$"):
        parse_fault({"target": "j1939", "kind": "missing_dm1"}, plant)
