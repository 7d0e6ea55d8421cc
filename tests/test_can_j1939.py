"""J1939 essentials of the tractor's rest-bus: identifiers, the DBC, address claim, requests, DM1 with BAM.

Frames are checked byte by byte against J1939-21/-73/-81 as written there;
identifiers against cantools' J1939 helpers.
"""

from __future__ import annotations

import uuid

import cantools
import pytest
from cantools import j1939 as cj

from can_support import ROOT
from io_adapters.base import LoopContext, create_adapter, new_tick_info
from io_adapters.can import j1939 as j
from plant_models.registry import load_plant

DBC = cantools.database.load_file(str(ROOT / "configs" / "powershift_j1939.dbc"), strict=True)
ENG_NAME = j.name_pack(1001, 0x123, function=0, industry_group=2)  # engine (function 0), agricultural group 2
LOWER_NAME = j.name_pack(7, 0x001, function=0, industry_group=2)  # same fields but a lower identity: lower NAME


# (name, PGN, priority, source, destination) as J1939-71/-21/-73/-81 give them
EXPECTED = {"EEC1": (61444, 3, 0x00, 255), "EEC2": (61443, 3, 0x00, 255), "CCVS1": (65265, 6, 0x21, 255),
            "TC1": (256, 3, 0x21, 0x03), "ETC1": (61442, 3, 0x03, 255), "ETC2": (61445, 6, 0x03, 255),
            "TSC1": (0, 3, 0x03, 0x00), "DM1": (65226, 6, 0x00, 255), "RQST_TCU": (59904, 6, 0x03, 255),
            "ACL_ENG": (60928, 6, 0x00, 255), "ACL_VEH": (60928, 6, 0x21, 255), "ACL_TCU": (60928, 6, 0x03, 255),
            "TPCM_ENG": (60416, 7, 0x00, 255), "TPDT_ENG": (60160, 7, 0x00, 255)}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_dbc_frame_ids_from_priority_pgn_and_source(name):
    pgn, prio, sa, da = EXPECTED[name]
    m = DBC.get_message_by_name(name)
    assert m.protocol == "j1939" and m.is_extended_frame
    fi = cj.frame_id_unpack(m.frame_id)
    assert (fi.priority, fi.source_address, cj.pgn_from_frame_id(m.frame_id)) == (prio, sa, pgn)
    _, dp, pf, ps = cj.pgn_unpack(pgn)
    assert (fi.data_page, fi.pdu_format) == (dp, pf)
    assert fi.pdu_specific == (da if cj.is_pdu_format_1(pf) else ps)
    assert m.frame_id == j.frame_id(prio, pgn, sa, da)
    assert j.parse_id(m.frame_id) == (prio, pgn, da, sa)


def test_dbc_signals_carry_their_spns():
    spn = {s.name: s.spn for m in DBC.messages for s in m.signals}
    assert (spn["EngSpeed"], spn["ActualEngPercentTorque"], spn["WheelBasedVehicleSpeed"]) == (190, 513, 84)
    assert (spn["TransRequestedGear"], spn["TransCurrentGear"], spn["EngRqedTorque_TorqueLimit"]) == (525, 523, 518)
    assert DBC.get_message_by_name("EEC1").decode(bytes((0, 0x7D, 0xAF, 0x40, 0x1F, 0, 0, 0x7D)))["EngSpeed"] == 1000


def test_address_claim_and_the_lower_name_winning():
    eng = j.Node("engine", ENG_NAME, 0x00, {})
    assert eng.start(0.0) == [(0x18EEFF00, ENG_NAME.to_bytes(8, "little"))]
    assert not eng.can_send and eng.poll(249.0) == [] and not eng.can_send
    eng.poll(250.0)
    assert eng.can_send
    # a competing claim for 0x00 with a higher NAME: we win and repeat our claim
    higher = (ENG_NAME + 1).to_bytes(8, "little")
    assert eng.on_frame(0x18EEFF00, higher, 300.0) == [(0x18EEFF00, ENG_NAME.to_bytes(8, "little"))]
    assert eng.can_send
    # our own claim echoed: nothing
    assert eng.on_frame(0x18EEFF00, ENG_NAME.to_bytes(8, "little"), 301.0) == []
    # a claim with a lower NAME: we lose, send cannot-claim from 254, and fall silent
    out = eng.on_frame(0x18EEFF00, LOWER_NAME.to_bytes(8, "little"), 310.0)
    assert out == [(0x18EEFFFE, ENG_NAME.to_bytes(8, "little"))]
    assert eng.state == "lost" and eng.poll(5000.0) == []
    # a request for the address claim is answered with cannot-claim after the NAME's pseudo-random delay
    d = eng.cannot_claim_delay_ms
    assert 0 <= d <= 153 and d == (ENG_NAME ^ ENG_NAME >> 21 ^ ENG_NAME >> 40) % 154
    assert eng.on_frame(0x18EAFF03, bytes((0x00, 0xEE, 0x00)), 320.0) == []
    assert eng.poll(320.0 + d - 1) == [] if d else True
    assert eng.poll(320.0 + d) == [(0x18EEFFFE, ENG_NAME.to_bytes(8, "little"))]


def test_a_node_that_lost_its_address_reclaims_it_when_a_request_shows_it_free():
    """After a lost claim the node is silent.  A global Request for Address Claimed makes every node answer:
    if the winner answers with its claim of the address, the address is taken and the node stays silent;
    if nobody claims the address within 250 ms, the node claims it again (and may send 250 ms later)."""
    eng = j.Node("engine", ENG_NAME, 0x00, {j.PGN_EEC1: lambda: (3, bytes(8))})
    eng.start(0.0)
    eng.poll(250.0)
    eng.on_frame(0x18EEFF00, LOWER_NAME.to_bytes(8, "little"), 300.0)
    d = eng.cannot_claim_delay_ms
    eng.on_frame(0x18EAFF03, bytes((0x00, 0xEE, 0x00)), 400.0)
    eng.on_frame(0x18EEFF00, LOWER_NAME.to_bytes(8, "little"), 410.0)  # the winner answers: still taken
    assert eng.poll(400.0 + d) == [(0x18EEFFFE, ENG_NAME.to_bytes(8, "little"))]
    assert eng.poll(2000.0) == [] and eng.state == "lost"
    eng.on_frame(0x18EA0003, bytes((0x00, 0xEE, 0x00)), 2100.0)  # a request to address 0 alone: no conclusion
    assert eng.poll(2100.0 + d) == [(0x18EEFFFE, ENG_NAME.to_bytes(8, "little"))] and eng.poll(3000.0) == []
    eng.on_frame(0x18EAFF03, bytes((0x00, 0xEE, 0x00)), 3000.0)  # the winner is gone: nobody answers
    assert eng.poll(3000.0 + d) == [(0x18EEFFFE, ENG_NAME.to_bytes(8, "little"))]
    assert eng.poll(3249.0) == [] and eng.poll(3250.0) == [(0x18EEFF00, ENG_NAME.to_bytes(8, "little"))]
    assert eng.state == "claiming" and eng.counts["reclaims"] == 1
    eng.poll(3500.0)
    assert eng.can_send and eng.on_frame(0x18EAFF03, bytes((0x04, 0xF0, 0x00)), 3501.0) == [(0x0CF00400, bytes(8))]


def test_name_fields_in_the_claim_bytes():
    n = j.name_pack(0x1ABCDE, 0x2A5, function=0x81, ecu_instance=5, function_instance=3, vehicle_system=0x7F,
                    vehicle_system_instance=9, industry_group=2, arbitrary_address_capable=True)
    b = n.to_bytes(8, "little")
    v = DBC.get_message_by_name("ACL_ENG").decode(b)
    assert (v["IdentityNumber"], v["ManufacturerCode"], v["ECUInstance"], v["FunctionInstance"]) == (0x1ABCDE, 0x2A5,
                                                                                                     5, 3)
    assert (v["Function"], v["VehicleSystem"], v["VehicleSystemInstance"], v["IndustryGroup"]) == (0x81, 0x7F, 9, 2)
    assert v["ArbitraryAddressCapable"] == 1


def test_requests_answered_for_owned_pgns_nacked_for_others():
    eec1 = bytes((0xF0, 0x7D, 0x91, 0x40, 0x1F, 0xFF, 0xFF, 0x7D))
    eng = j.Node("engine", ENG_NAME, 0x00, {j.PGN_EEC1: lambda: (3, eec1)})
    eng.start(0.0)
    eng.poll(250.0)
    req = lambda pgn: pgn.to_bytes(3, "little")
    # global request from the TCU (0x03) for EEC1: answered broadcast
    assert eng.on_frame(0x18EAFF03, req(61444), 260.0) == [(0x0CF00400, eec1)]
    # destination-specific request for a PGN the engine does not own: NACK (J1939-21 acknowledgement)
    assert eng.on_frame(0x18EA0003, req(65265), 261.0) == [(0x18E8FF00, bytes((1, 0xFF, 0xFF, 0xFF, 0x03,
                                                                                  0xF1, 0xFE, 0x00)))]
    # global request for it: no answer
    assert eng.on_frame(0x18EAFF03, req(65265), 262.0) == []
    # request to another address: not ours
    assert eng.on_frame(0x18EA2103, req(61444), 263.0) == []
    assert eng.counts["requests_answered"] == 1 and eng.counts["nacks"] == 1


def test_dm1_single_frame_and_bam_for_more_than_one_dtc():
    dm1 = j.Dm1(dtcs=[(190, 2, 1)], amber_lamp=1)
    eng = j.Node("engine", ENG_NAME, 0x00, {}, dm1=dm1)
    eng.start(0.0)
    # one DTC: a single frame; SPN 190 = 0x0000BE, FMI 2, OC 1; amber lamp on (bits 3-2 = 01)
    assert eng.poll(250.0) == [(0x18FECA00, bytes((0x04, 0xFF, 0xBE, 0x00, 0x02, 0x01, 0xFF, 0xFF)))]
    assert eng.poll(1249.0) == []
    dm1.dtcs.append((520000, 31, 127))  # SPN 0x7EF40: high bits 0b111 -> byte (7 << 5) | 31 = 0xFF
    dm1.red_lamp = 1
    out = eng.poll(1250.0)
    data = bytes((0x14, 0xFF, 0xBE, 0x00, 0x02, 0x01, 0x40, 0xEF, 0xFF, 0x7F))  # 10 bytes: 2 packets
    assert out == [(0x1CECFF00, bytes((32, 10, 0, 2, 0xFF, 0xCA, 0xFE, 0x00)))]  # TP.CM BAM, PGN 65226
    assert eng.poll(1299.0) == []  # 50 ms between the BAM's frames
    assert eng.poll(1300.0) == [(0x1CEBFF00, bytes((1,)) + data[:7])]
    assert eng.poll(1349.0) == []
    assert eng.poll(1350.0) == [(0x1CEBFF00, bytes((2,)) + data[7:] + b"\xff" * 4)]
    assert eng.poll(1400.0) == [] and eng.tp.bam is None
    assert eng.tp.counts["bam_sent"] == 1


def test_no_dtc_dm1_and_a_dm1_request():
    eng = j.Node("engine", ENG_NAME, 0x00, {}, dm1=j.Dm1())
    eng.start(0.0)
    assert eng.poll(250.0) == [(0x18FECA00, bytes((0, 0xFF, 0, 0, 0, 0, 0xFF, 0xFF)))]
    assert eng.on_frame(0x18EA0003, (65226).to_bytes(3, "little"), 300.0) == [
        (0x18FECA00, bytes((0, 0xFF, 0, 0, 0, 0, 0xFF, 0xFF)))]


@pytest.mark.parametrize("plant,engine_input", [("powershift", "engine_torque"), ("powershift_tractor", "torque_limit")])
def test_the_shipped_j1939_config_serves_the_powershift_and_the_tractor(plant, engine_input):
    """configs/io_j1939_powershift.toml opens on both: the engine ECU drives the engine torque input of the bare
    gearbox and the torque intervention input of the tractor's engine."""
    from server.realtime.runtime import load_io_config

    from io_adapters.can.message_set import load_message_set

    io = load_io_config("io_j1939_powershift")
    can_opts = next(a for a in io.adapters if a.type == "can").options
    ms = load_message_set(can_opts["message_set"], load_plant(plant), 0.001)  # the valve and sensor frames resolve
    assert len(ms.rx.messages) == 2 and len(ms.tx.messages) == 7
    opts = dict(next(a for a in io.adapters if a.type == "j1939").options)
    opts["channel"] = f"cfg-{uuid.uuid4().hex[:8]}"
    ad = create_adapter("j1939", "j1939", opts)
    ad.open(load_plant(plant), LoopContext(period_s=0.001, feed_watchdog=lambda ns: None, status=lambda: {},
                                           tick_info=new_tick_info()))
    try:
        assert ad.torque_input == engine_input and ad.intervention == (engine_input == "torque_limit")
    finally:
        ad.close()


def test_a_dm1_request_during_the_nodes_own_bam_is_answered_after_it_and_counted_then():
    """J1939-21 allows one BAM at a time per sender: a DM1 request that comes while the node's DM1 BAM runs is
    answered by a second BAM after the first, and counted as answered when that BAM starts, not before."""
    dm1 = j.Dm1(dtcs=[(190, 2, 1), (100, 1, 3)], amber_lamp=1)
    eng = j.Node("engine", ENG_NAME, 0x00, {}, dm1=dm1)
    eng.start(0.0)
    cm = (0x1CECFF00, bytes((32, 10, 0, 2, 0xFF, 0xCA, 0xFE, 0x00)))
    body = bytes((0x04, 0xFF, 0xBE, 0x00, 0x02, 0x01, 0x64, 0x00, 0x01, 0x03))
    assert eng.poll(250.0) == [cm]
    assert eng.on_frame(0x18EAFF03, (65226).to_bytes(3, "little"), 260.0) == []  # global request: BAM busy
    assert eng.counts["requests_answered"] == 0 and eng.counts["dm1_sent"] == 1
    assert eng.poll(300.0) == [(0x1CEBFF00, bytes((1,)) + body[:7])]
    assert eng.poll(350.0) == [(0x1CEBFF00, bytes((2,)) + body[7:] + b"\xff" * 4)]
    assert eng.counts["requests_answered"] == 0
    assert eng.poll(399.0) == []
    assert eng.poll(400.0) == [cm]  # the answer: the next BAM, 50 ms after the last packet
    assert eng.counts["requests_answered"] == 1 and eng.counts["dm1_sent"] == 2 and eng.tp.counts["bam_sent"] == 2
    assert eng.poll(450.0) == [(0x1CEBFF00, bytes((1,)) + body[:7])]
    assert eng.poll(500.0) == [(0x1CEBFF00, bytes((2,)) + body[7:] + b"\xff" * 4)]
    assert eng.poll(1249.0) == [] and eng.poll(1250.0) == [cm]  # the cycle keeps its second grid
    # two requests during one BAM are answered by one BAM (the same data to everyone), each counted
    eng.on_frame(0x18EAFF03, (65226).to_bytes(3, "little"), 1260.0)
    eng.on_frame(0x18EAFF21, (65226).to_bytes(3, "little"), 1261.0)
    eng.poll(1300.0), eng.poll(1350.0)
    assert eng.poll(1400.0) == [cm] and eng.counts["requests_answered"] == 3 and eng.counts["dm1_sent"] == 4
