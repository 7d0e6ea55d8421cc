"""J1939 node services on the rest-bus: DM2/DM3/DM11, DM13, identification, engine hours, DTCs and lamps at run
time, the vehicle ECU's DM1 and EBC1, the commanded address, TSC1 speed control and override priorities.

Frames are checked byte by byte (J1939-21/-71/-73/-81); the plant runs in lockstep, the tester's frames are
read by the next pump, so every time here is plant time.
"""

from __future__ import annotations

import can
import pytest

from can_support import Rest
from io_adapters.can import j1939 as j
from io_adapters.can import j1939_dm as dm

ENG_NAME = j.name_pack(1001, 0x123, function=0, industry_group=2)
TCU = 0x03


def pgn3(pgn):
    return bytes((pgn & 0xFF, pgn >> 8 & 0xFF, pgn >> 16))


class Peer:
    """A frame-level peer on the rest-bus's channel."""

    def __init__(self, r: Rest):
        self.r = r
        self.bus = can.Bus(interface="virtual", channel=r.channel)

    def send(self, fid: int, data: bytes) -> None:
        self.bus.send(can.Message(arbitration_id=fid, is_extended_id=True, data=data))

    def request(self, pgn: int, to: int = 0xFF, sa: int = TCU) -> None:
        self.send(j.frame_id(6, j.PGN_REQUEST, sa, to), pgn3(pgn))

    def frames(self, ticks: int = 0) -> list[tuple[int, bytes]]:
        """What the nodes sent: the tester's frames read by a pump, then ``ticks`` ticks."""
        self.r.j.pump(0)
        self.r.run(ticks)
        out = []
        while (m := self.bus.recv(0.0)) is not None:
            out.append((m.arbitration_id, bytes(m.data)))
        return out

    def close(self):
        self.bus.shutdown()
        self.r.j.close()


@pytest.fixture
def bench():
    made = []

    def make(**options) -> Peer:
        t = Peer(Rest(**options))
        made.append(t)
        t.frames(300)  # the claims stand
        return t

    yield make
    for t in made:
        t.close()


def test_dm2_previously_active_dm3_and_dm11_clear_with_a_positive_ack_to_the_node_alone():
    eng = j.Node("engine", ENG_NAME, 0x00, {}, dm1=j.Dm1())
    eng.start(0.0)
    eng.next_dm1_ms = 1e9
    eng.poll(250.0)
    assert eng.dm1.activate(190, 2) and eng.dm1.activate(100, 1)
    eng.dm1.deactivate(190, 2)
    req = lambda pgn, to=0x00: eng.on_frame(j.frame_id(6, j.PGN_REQUEST, TCU, to), pgn3(pgn), 300.0)
    assert req(dm.PGN_DM2) == [(0x18FECB00, bytes((0, 0xFF, 0xBE, 0, 2, 1, 0xFF, 0xFF)))]  # SPN 190 FMI 2 OC 1
    assert req(j.PGN_DM1) == [(0x18FECA00, bytes((0, 0xFF, 100, 0, 1, 1, 0xFF, 0xFF)))]
    eng.dm1.activate(190, 2)  # again: its occurrence count goes on from the previously active one
    assert eng.dm1.dtcs == [(100, 1, 1), (190, 2, 2)] and eng.dm1.previous == []
    eng.dm1.deactivate(190, 2)
    assert req(dm.PGN_DM3) == [(0x18E8FF00, bytes((0, 0xFF, 0xFF, 0xFF, TCU, 0xCC, 0xFE, 0)))]  # positive ACK
    assert eng.dm1.previous == [] and req(dm.PGN_DM2)[0][1][2:6] == bytes(4)
    assert req(dm.PGN_DM11, to=0xFF) == [] and eng.dm1.dtcs == []  # global: cleared, no acknowledgement
    assert (eng.counts["dm3_clears"], eng.counts["dm11_clears"]) == (1, 1)


def test_dtcs_and_lamps_at_run_time_by_adapter_set_and_by_the_dtc_fault(bench):
    from io_adapters.can.j1939_declaration import DECLARATION

    t = bench()
    ad = t.r.j
    dm1 = lambda frames, sa=0x00: [d for fid, d in frames if fid == 0x18FECA00 | sa]
    assert dm1(t.frames(1000)) == [bytes((0, 0xFF, 0, 0, 0, 0, 0xFF, 0xFF))]
    ad.set_values(ad.check_values({"engine_dtc_spn": 190, "engine_dtc_fmi": 2, "engine_dtc_active": 1}))
    assert dm1(t.frames(1000)) == [bytes((0x04, 0xFF, 0xBE, 0, 2, 1, 0xFF, 0xFF))]  # amber lamp follows
    with pytest.raises(ValueError, match="engine_dtc_spn, engine_dtc_fmi and engine_dtc_active go together; "
                                         "missing engine_dtc_active"):
        ad.check_values({"engine_dtc_spn": 190, "engine_dtc_fmi": 2})
    with pytest.raises(ValueError, match="engine_red_lamp = 4: must be an integer in 0 .. 3"):
        ad.check_values({"engine_red_lamp": 4})
    ad.set_values(ad.check_values({"engine_red_lamp": 1, "engine_amber_lamp": 0}))
    assert dm1(t.frames(1000)) == [bytes((0x10, 0xFF, 0xBE, 0, 2, 1, 0xFF, 0xFF))]
    fault = DECLARATION.parse_fault({"target": "j1939", "kind": "dtc", "node": "vehicle", "spn": 84, "fmi": 5}, "t")
    ad.set_fault(fault)
    assert dm1(t.frames(1000), 0x21) == [bytes((0x04, 0xFF, 84, 0, 5, 1, 0xFF, 0xFF))]  # the vehicle ECU's DM1
    t.request(dm.PGN_DM11, to=0x21)  # a clear cannot clear a DTC whose fault is still set
    assert (0x18E8FF21, bytes((0, 0xFF, 0xFF, 0xFF, TCU, 0xD3, 0xFE, 0))) in t.frames()
    assert ad.vehicle.dm1.dtcs == [(84, 5, 1)]
    ad.clear_fault(fault)
    st = ad.status()["nodes"]["vehicle"]
    assert st["active_dtcs"] == [] and st["previous_dtcs"] == [[84, 5, 1]] and st["lamps"]["amber_lamp"] == 0
    ad.set_values(ad.check_values({"engine_dtc_spn": 190, "engine_dtc_fmi": 2, "engine_dtc_active": 0}))
    assert ad.engine.dm1.previous == [(190, 2, 1)] and ad.engine.dm1.red_lamp == 1  # the set lamp stays set


def test_dtc_fault_map_is_checked():
    from io_adapters.can.j1939_declaration import DECLARATION
    from plant_models.errors import FaultError

    with pytest.raises(FaultError, match="a j1939 dtc fault needs 'spn' and 'fmi'"):
        DECLARATION.parse_fault({"target": "j1939", "kind": "dtc", "node": "engine", "spn": 84}, "t")
    with pytest.raises(FaultError, match="fmi"):
        DECLARATION.parse_fault({"target": "j1939", "kind": "dtc", "node": "engine", "spn": 84, "fmi": 32}, "t")


def test_dm13_stops_and_starts_broadcasts_requests_still_answered(bench):
    t = bench()
    eec1 = lambda frames: [f for f in frames if f[0] & 0x00FFFF00 == 0x00F00400]
    stop = bytes((0x3C, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF))  # J1939 network 1: 00 stop; the rest: 11
    t.send(j.frame_id(6, dm.PGN_DM13, TCU, 0xFF), stop)
    frames = t.frames(1000)
    assert eec1(frames) == [] and not [f for f in frames if f[0] & 0xFF in (0x00, 0x21)]
    t.request(j.PGN_EEC1, to=0x00)  # a request is still answered
    assert len(eec1(t.frames())) == 1
    hold = bytes((0xFF, 0xFF, 0xFF, 0x0F, 0xFF, 0xFF, 0xFF, 0xFF))  # hold signal 0: all devices
    t.send(j.frame_id(6, dm.PGN_DM13, TCU, 0xFF), hold)
    assert eec1(t.frames(5999)) == []  # 6 s from the hold, not from the stop
    assert len(eec1(t.frames(100))) == 10  # then EEC1 again every 10 ms
    t.send(j.frame_id(6, dm.PGN_DM13, TCU, 0xFF), bytes((0xFC, 0xFF, 0xFF, 0xFF, 2, 0, 0xFF, 0xFF)))  # 2 s
    assert eec1(t.frames(1999)) == [] and len(eec1(t.frames(10))) == 1
    t.send(j.frame_id(6, dm.PGN_DM13, TCU, 0x00), stop)
    t.frames(50)
    t.send(j.frame_id(6, dm.PGN_DM13, TCU, 0x00), bytes((0x7D, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF)))  # start
    frames = t.frames(100)
    assert len(eec1(frames)) == 10 and any(fid == 0x18FEF121 for fid, _ in frames)  # the vehicle ECU went on
    assert t.r.j.engine.counts["dm13_stops"] == 3 and t.r.j.engine.counts["dm13_starts"] == 1


def test_identification_and_engine_hours_answered_by_bam_and_by_rts_cts(bench):
    t = bench(engine_hours_h=1234.5)
    ad = t.r.j
    w, rev0 = [], ad.engine_revolutions
    for _ in range(1000):
        t.r.run(1)
        w.append(float(t.r.plant.y[ad._w_eng]))  # the speed each pump integrates over its 1 ms
    t.request(dm.PGN_ENGINE_HOURS, to=0x00)
    (fid, data), = [f for f in t.frames() if f[0] & 0x00FFFF00 == 0x00FEE500]
    assert fid == 0x18FEE500 and int.from_bytes(data[:4], "little") == int((1234.5 + 1.3 / 3600) / 0.05)
    revs = sum(max(x, 0.0) for x in w) * 1e-3 / (2 * 3.141592653589793)
    assert ad.engine_revolutions - rev0 == pytest.approx(revs, rel=1e-12) and data[4:] == bytes(4)
    soft = dm.software_id("gearbox-hil engine ECU emulation 1.0")
    t.request(dm.PGN_SOFTWARE_ID)  # global: BAM from both nodes, 6 packets 50 ms apart
    frames = t.frames(400)
    bams = [d for fid, d in frames if fid in (0x1CECFF00, 0x1CECFF21)]
    assert bytes((32, len(soft), 0, (len(soft) + 6) // 7, 0xFF, 0xDA, 0xFE, 0)) in bams and len(bams) == 2
    body = b"".join(d[1:] for fid, d in frames if fid == 0x1CEBFF00)[:len(soft)]
    assert body == soft and soft[0] == 1 and soft.endswith(b"*")
    t.request(dm.PGN_COMPONENT_ID, to=0x21)  # to the vehicle ECU alone: RTS/CTS to the tester
    comp = dm.fields("gearbox-hil", "vehicle ECU", f"{ad.names['vehicle'] & 0x1FFFFF:07d}", "1")
    assert (0x1CEC0321, bytes((16, len(comp), 0, (len(comp) + 6) // 7, 0xFF, 0xEB, 0xFE, 0))) in t.frames()
    t.request(dm.PGN_ECU_ID, to=0x00, sa=0x04)  # another tester too: a connection per destination
    assert any(fid == 0x1CEC0400 and d[0] == 16 and d[5:] == pgn3(dm.PGN_ECU_ID) for fid, d in t.frames())
    assert ad.engine.counts["nacks"] == 0


def test_ebc1_from_the_vehicle_ecu_with_the_brake_pedal_set_at_run_time(bench):
    t = bench()
    ebc1 = lambda: [d for fid, d in t.frames(200) if fid == 0x18F00121]
    assert ebc1() == [bytes((0x00 | 0x00, 0, 0xFF, 0xFF, 0xFF, 0xFD, 0xFF, 0xFF))] * 2
    t.r.j.set_values(t.r.j.check_values({"brake_pedal_pct": 40}))
    assert ebc1() == [bytes((0x40, 100, 0xFF, 0xFF, 0xFF, 0xFD, 0xFF, 0xFF))] * 2  # switch 01, 40 % = 100 x 0.4


def _tsc1(t: Peer, sa: int, mode: int, prio: int, torque_pct: float = 0.0, rpm: float = 8031.875, to: int = 0):
    raw = round(rpm / 0.125)
    t.send(j.frame_id(3, j.PGN_TSC1, sa, to), bytes((mode | prio << 4 | 0xC0, raw & 0xFF, raw >> 8,
                                                     round(torque_pct) + 125, 0xFF, 0xFF, 0xFF, 0xFF)))


def test_tsc1_override_priority_between_senders_and_speed_control(bench):
    t = bench()
    ad = t.r.j
    _tsc1(t, TCU, 3, 1, 30.0)  # the TCU limits to 300 N m at priority 1 (high)
    _tsc1(t, 0x27, 2, 0, 10.0)  # a body controller commands 100 N m at priority 0 (highest)
    t.frames(1)
    assert ad.torque_Nm == 100.0 and ad.tsc1_source == 0x27
    eec1 = [d for fid, d in t.frames(10) if fid == 0x0CF00400][-1]
    assert eec1[5] == 0x27  # SPN 1483: the source of the controlling device
    _tsc1(t, TCU, 3, 1, 30.0)
    _tsc1(t, 0x28, 3, 1, 15.0)  # equal priority limits: the lowest torque
    t.frames(1)
    assert ad.torque_Nm == 100.0  # the priority 0 command stands while fresh
    for _ in range(4):
        _tsc1(t, TCU, 3, 1, 30.0)
        _tsc1(t, 0x28, 3, 1, 15.0)
        t.frames(10)  # 0x27 falls silent: 30 ms later its command no longer stands
    assert ad.torque_Nm == 150.0 and ad.tsc1_source == 0x28
    rpm = float(t.r.plant.y[ad._w_eng]) * 60 / (2 * 3.141592653589793)
    _tsc1(t, TCU, 1, 0, rpm=1500.0)  # speed control at the highest priority
    t.r.j.pump(0)
    assert ad.torque_Nm == pytest.approx(200.0 + 2.0 * (1500.0 - rpm)) and ad.tsc1_source == TCU
    _tsc1(t, TCU, 1, 0, rpm=8100.0)  # speed not in range: refused, the previous command stands
    t.r.j.pump(0)
    assert ad.status()["rejected"]["by_reason"]["out_of_range"] == 1
    t.frames(40)
    assert ad.torque_Nm == 200.0 and ad.tsc1_source == 0xFF and ad.status()["tsc1_senders"] == {}


def test_commanded_address_by_bam_moves_the_engine_which_claims_it(bench):
    t = bench()
    ad = t.r.j
    cmd = ad.engine.name.to_bytes(8, "little") + bytes((0x05,))
    t.send(0x1CECFF03, bytes((32, 9, 0, 2, 0xFF)) + pgn3(dm.PGN_COMMANDED_ADDRESS))
    t.send(0x1CEBFF03, bytes((1,)) + cmd[:7])
    t.send(0x1CEBFF03, bytes((2,)) + cmd[7:] + b"\xff" * 5)
    frames = t.frames(300)
    assert frames[0] == (0x18EEFF05, ad.engine.name.to_bytes(8, "little"))  # the claim of the new address
    assert not [f for f in frames if f[0] & 0xFF == 0x00]
    assert any(fid == 0x0CF00405 for fid, _ in frames)  # EEC1 from 0x05 once the claim stood
    _tsc1(t, TCU, 2, 1, 5.0, to=0x05)
    t.frames(1)
    assert ad.torque_Nm == 50.0 and ad.engine.counts["commanded_address"] == 1
    other = (ad.engine.name + 1).to_bytes(8, "little") + bytes((0x07,))  # another NAME: not for the engine
    t.send(0x1CECFF03, bytes((32, 9, 0, 2, 0xFF)) + pgn3(dm.PGN_COMMANDED_ADDRESS))
    t.send(0x1CEBFF03, bytes((1,)) + other[:7])
    t.send(0x1CEBFF03, bytes((2,)) + other[7:] + b"\xff" * 5)
    t.frames(10)
    assert ad.engine.address == 0x05


def test_dtcs_over_the_control_channel_and_a_dtc_fault_through_the_servers_fault_map():
    """``adapter_set`` and ``fault_set`` requests of a running lockstep server reach the nodes' DTC memory."""
    import uuid

    from io_adapters.can.restbus import J1939Adapter
    from plant_models.registry import load_plant
    from server.realtime.loop_config import LoopConfig
    from server.realtime.runtime import assemble

    ch = f"dtc-{uuid.uuid4().hex[:8]}"
    ad = J1939Adapter("j1939", {"interface": "virtual", "channel": ch})
    srv = assemble(load_plant("powershift"), [ad], LoopConfig(mode="lockstep", rate_hz=1000.0))
    srv.loop.open()
    srv.loop.start()
    bus = can.Bus(interface="virtual", channel=ch)
    ask = srv.control.handle_now
    try:
        assert ask({"cmd": "step", "n": 300, "outputs": False})["ok"]
        rep = ask({"cmd": "adapter_set", "adapter": "j1939",
                   "set": {"engine_dtc_spn": 4001, "engine_dtc_fmi": 7, "engine_dtc_active": 1}})
        assert rep["ok"] and rep["set"]["engine_dtc_spn"] == 4001
        rep = ask({"cmd": "adapter_set", "adapter": "j1939", "set": {"engine_dtc_spn": 4001}})
        assert not rep["ok"] and "go together" in rep["error"]["message"]
        rep = ask({"cmd": "fault_set", "fault": {"target": "j1939", "kind": "dtc", "node": "engine", "spn": 190,
                                                 "fmi": 0}})
        assert rep["ok"], rep
        while bus.recv(0.0) is not None:
            pass
        for _ in range(120):  # 10 ms per request: the adapter is pumped between requests, as a 10 ms client does
            assert ask({"cmd": "step", "n": 10, "outputs": False})["ok"]
        frames = []
        while (m := bus.recv(0.0)) is not None:
            frames.append((m.arbitration_id, bytes(m.data)))
        cm = [d for fid, d in frames if fid == 0x1CECFF00]  # two DTCs: DM1 by BAM
        body = b"".join(d[1:] for fid, d in frames if fid == 0x1CEBFF00)[:10]
        assert cm == [bytes((32, 10, 0, 2, 0xFF, 0xCA, 0xFE, 0))]
        assert body == bytes((0x04, 0xFF)) + j.dtc_bytes(4001, 7, 1) + j.dtc_bytes(190, 0, 1)
        st = srv.report.status()["adapters"]["j1939"]["nodes"]["engine"]
        assert st["active_dtcs"] == [[4001, 7, 1], [190, 0, 1]]
    finally:
        bus.shutdown()
        srv.loop.close()


def test_a_node_that_lost_its_address_comes_back_at_a_commanded_address():
    eng = j.Node("engine", ENG_NAME, 0x00, {})
    eng.start(0.0)
    eng.poll(250.0)
    lower = j.name_pack(7, 0x001, function=0, industry_group=2)
    assert eng.on_frame(0x18EEFF00, lower.to_bytes(8, "little"), 300.0)[0][0] == 0x18EEFFFE
    cmd = ENG_NAME.to_bytes(8, "little") + bytes((0x06,))
    assert eng.on_frame(0x1CECFF80, bytes((32, 9, 0, 2, 0xFF)) + pgn3(dm.PGN_COMMANDED_ADDRESS), 400.0) == []
    assert eng.on_frame(0x1CEBFF80, bytes((1,)) + cmd[:7], 450.0) == []
    assert eng.on_frame(0x1CEBFF80, bytes((2,)) + cmd[7:] + b"\xff" * 5, 500.0) == [
        (0x18EEFF06, ENG_NAME.to_bytes(8, "little"))]
    eng.poll(750.0)
    assert eng.can_send and eng.address == 0x06 and eng.counts["commanded_address"] == 1
    # while lost, a connection (RTS) is not answered: the node has no address to answer from
    eng.on_frame(0x18EEFF06, lower.to_bytes(8, "little"), 800.0)
    assert eng.on_frame(0x1CEC0603, bytes((16, 20, 0, 3, 0xFF, 0, 0xEF, 0)), 810.0) == []
