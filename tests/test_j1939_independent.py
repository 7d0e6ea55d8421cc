"""The rest-bus against an independent J1939 stack (``can-j1939``) and against fuzzed transport frames.

The outside stack plays the TCU (0x03) on the same python-can virtual bus.  Plant time stands still
while the test waits for it (the adapter is pumped, not ticked), so the rest-bus's timeouts, which run
on plant time, cannot fire while the outside stack's thread is slow; nothing here measures time.
"""

from __future__ import annotations

import random

import can
import pytest

from can_support import Rest, wait_until
from io_adapters.can import j1939 as j
from io_adapters.can import j1939_dm as dm
from io_adapters.can import j1939_tp as tp
from j1939_support import fuzzed_run, interleave

outside = pytest.importorskip("j1939")  # the can-j1939 package (the test extra)
DTCS = [[190, 2, 1], [100, 1, 3], [110, 0, 7], [97, 3, 2], [520000, 31, 127]]  # DM1 of 22 bytes: 4 packets


@pytest.fixture
def tcu_stack():
    made = []

    def make(rest: Rest, max_cmdt_packets: int = 2):
        ecu = outside.ElectronicControlUnit(max_cmdt_packets=max_cmdt_packets)
        ecu.connect(interface="virtual", channel=rest.channel)
        got = []
        ecu.subscribe(lambda prio, pgn, sa, ts, data: got.append((pgn, sa, bytes(data))), device_address=0x03)
        made.append(ecu)
        return ecu, got

    yield make
    for ecu in made:
        ecu.disconnect()
        ecu.stop()


def test_the_outside_stack_reassembles_the_engines_dm1_sent_to_it_by_rts_cts(tcu_stack):
    r = Rest(engine_dtcs=DTCS)
    try:
        r.run(600)  # claims stand; the cyclic DM1's BAM of 250 ms ends
        ecu, got = tcu_stack(r)
        body = j.Dm1(dtcs=[tuple(d) for d in DTCS], amber_lamp=1).payload()
        assert len(body) == 22
        ecu.send_pgn(0, 0xEA, 0x00, 6, 0x03, [0xCA, 0xFE, 0x00])  # DM1, please, to the engine alone
        wait_until(r.pumped(lambda: r.j.engine.tp.counts["cmdt_sent"] == 1), what="the EndOfMsgAck")
        assert (j.PGN_DM1, 0x00, body) in got
        eng = r.j.status()["nodes"]["engine"]
        assert eng["requests_answered"] == 1 and eng["tp"]["rts_sent"] == 1 and eng["tp"]["timeouts"] == 0
        assert sum(eng["tp"]["aborts_sent"].values()) == 0 and eng["tp"]["sending"] == 0
    finally:
        r.j.close()


def test_the_engine_reassembles_what_the_outside_stack_sends_it_by_rts_cts_and_by_bam(tcu_stack):
    r = Rest()
    try:
        r.run(300)
        ecu, _ = tcu_stack(r)
        long_msg = list(range(1, 41))  # 40 bytes: 6 packets, 2 per CTS
        ecu.send_pgn(0, 0xEF, 0x00, 6, 0x03, long_msg)  # proprietary A to the engine: RTS/CTS
        wait_until(r.pumped(lambda: 0xEF00 in r.j.engine.received), what="the engine's reassembly")
        assert r.j.engine.received[0xEF00] == bytes(long_msg)
        c = r.j.engine.tp.counts
        assert (c["rts_received"], c["cts_sent"], c["eoma_sent"], c["cmdt_received"]) == (1, 3, 1, 1)
        ecu.send_pgn(0, 0xFE, 0xDA, 6, 0x03, list(range(200, 220)))  # software identification, broadcast
        wait_until(r.pumped(lambda: 0xFEDA in r.j.vehicle.received), what="the vehicle ECU's BAM reassembly")
        assert r.j.vehicle.received[0xFEDA] == bytes(range(200, 220)) == r.j.engine.received[0xFEDA]
        st = r.j.status()["nodes"]
        assert st["engine"]["received"]["61184"] == bytes(long_msg).hex()
        assert st["vehicle"]["tp"]["bam_received"] == 1 and st["vehicle"]["tp"]["cmdt_received"] == 0
    finally:
        r.j.close()


def _fuzz_session(rng: random.Random) -> list[tuple[int, bytes]]:
    """An RTS or BAM and its packets from one sender, perhaps broken (sizes, order, cut short), or one noise frame."""
    sa = rng.choice((0x03, 0x10, 0x11, 0x12, 0x13, 0x14, 0x80))
    da = rng.choice((0x00, 0x00, 0x21, 0xFF, 0x05))
    if rng.random() < 0.4:  # noise: any control byte, any length
        pgn = rng.choice((tp.PGN_TP_CM, tp.PGN_TP_DT))
        data = bytes((rng.choice((16, 17, 19, 32, 255, rng.randint(0, 255))),)) + rng.randbytes(rng.randint(0, 7))
        return [(j.frame_id(7, pgn, sa, da), data)]
    size = rng.randint(9, 60) if rng.random() < 0.9 else rng.randint(0, 2000)
    packets = (size + 6) // 7 if rng.random() < 0.9 else rng.randint(0, 255)
    out = [(j.frame_id(7, tp.PGN_TP_CM, sa, da), bytes((32 if da == 0xFF else 16, size & 0xFF, size >> 8 & 0xFF,
                                                          packets & 0xFF, 255, 0x00, rng.choice((0xEF, 0xFE)), 0)))]
    seq, n = 1, packets & 0xFF
    if rng.random() < 0.1:  # cut short, from a sender heard only once: the receiver's timeout ends it
        n = rng.randint(0, n)
        out[0] = (out[0][0] & ~0xFF | rng.randint(0x90, 0xEF), out[0][1])
    for _ in range(min(n, 40)):
        if rng.random() < 0.05:
            seq = rng.choice((seq - 1, seq + 1, rng.randint(0, 255))) & 0xFF
        out.append((j.frame_id(7, tp.PGN_TP_DT, sa, da), bytes((seq,)) + rng.randbytes(7)))
        seq = (seq + 1) & 0xFF
    return out


def test_fuzzed_transport_frames_no_crash_counters_exact_plant_untouched():
    """10 000 transport frames while the plant runs: every frame is counted where it went, every frame the
    nodes answered with is counted by its kind, and the plant's state is bit for bit that of a twin run
    without them."""
    frames = interleave(_fuzz_session, random.Random(38), 10000, senders=6)  # 20 every 4 ticks: 2 s of plant time
    with fuzzed_run(frames, engine_dtcs=DTCS[:2]) as (fuzzed, sent_back):
        for node in fuzzed.j.nodes:
            c, a = node.tp.counts, node.tp.aborts_sent
            mine = [(fid, d) for fid, d in frames
                    if fid & 0xFF != node.address and (fid >> 8 & 0xFF) in (node.address, 0xFF)]
            assert c["cm_received"] == sum(fid >> 16 & 0xFF == 0xEC for fid, _ in mine)
            assert c["dt_received"] == sum(fid >> 16 & 0xFF == 0xEB for fid, _ in mine)
            assert c["rts_received"] == sum(fid >> 16 & 0xFF == 0xEC and fid >> 8 & 0xFF == node.address
                                            and len(d) == 8 and d[0] == 16 for fid, d in mine)
            cm_out = [d for fid, d in sent_back if fid & 0xFF == node.address and fid >> 16 & 0xFF == 0xEC
                      and fid >> 8 & 0xFF != 0xFF]
            assert c["cts_sent"] == sum(d[0] == 17 for d in cm_out)
            assert c["eoma_sent"] == sum(d[0] == 19 for d in cm_out)
            for code, reason in tp.ABORT_REASONS.items():
                assert a[reason] == sum(d[0] == 255 and d[1] == code for d in cm_out), reason
            # every RTS opened a session or was refused; every session ended exactly one way
            opened = c["rts_received"] - a["busy"] - a["too_big"] - a["other"]
            ended = (c["cmdt_received"] + a["bad_sequence"] + a["duplicate_sequence"] + a["timeout"]
                     + c["rx_aborted_by_sender"] + c["rts_replaced"])
            assert opened == ended and node.tp.status()["receiving"] == 0
            assert c["cmdt_received"] + c["bam_received"] == node.counts["tp_messages_received"]
            assert min(c["cmdt_received"], c["bam_received"], a["busy"], a["bad_sequence"], a["timeout"]) > 0
        assert len(frames) == 10000
        assert fuzzed.j.status()["nodes"]["engine"]["state"] == "claimed"


def test_the_outside_stack_gets_each_node_service_answered(tcu_stack):
    """can-j1939 as the TCU asks the rest-bus for DM2, the identifications and engine hours, clears DM2 with
    DM3: each answer reassembled by it (BAM for a global request, RTS/CTS for one to a node alone)."""
    r = Rest(engine_hours_h=10.0)
    try:
        r.run(300)
        ad = r.j
        ad.set_values(ad.check_values({"engine_dtc_spn": 190, "engine_dtc_fmi": 2, "engine_dtc_active": 1}))
        ad.set_values(ad.check_values({"engine_dtc_spn": 190, "engine_dtc_fmi": 2, "engine_dtc_active": 0}))
        ecu, got = tcu_stack(r)

        def step():  # plant time moves for BAMs (50 ms a packet), stands while a connection waits for the peer
            if any(n.tp.tx for n in ad.nodes):
                ad.pump(0)
            else:
                r.run(1)

        asked = [(dm.PGN_DM2, 0x00, 0x00), (dm.PGN_SOFTWARE_ID, 0xFF, 0x00), (dm.PGN_SOFTWARE_ID, 0xFF, 0x21),
                 (dm.PGN_COMPONENT_ID, 0x21, 0x21), (dm.PGN_ECU_ID, 0x00, 0x00), (dm.PGN_ENGINE_HOURS, 0x00, 0x00)]
        for pgn, dest, node_sa in asked:
            node = ad.engine if node_sa == 0 else ad.vehicle
            want = node.tp_payload(pgn)
            ecu.send_pgn(0, 0xEA, dest, 6, 0x03, list(pgn.to_bytes(3, "little")))
            wait_until(lambda: (step(), (pgn, node_sa, want) in got)[1], timeout_s=30.0,
                       what=f"PGN {pgn} from 0x{node_sa:02X}")
        assert int.from_bytes(ad.engine.tp_payload(dm.PGN_ENGINE_HOURS)[:4], "little") == 200  # 10 h, 0.05 h/bit
        assert ad.engine.tp.counts["cmdt_sent"] == 1 and ad.vehicle.tp.counts["cmdt_sent"] == 1  # ECU id, comp. id
        ecu.send_pgn(0, 0xEA, 0x00, 6, 0x03, list(dm.PGN_DM3.to_bytes(3, "little")))
        ack = (j.PGN_ACK, 0x00, bytes((0, 0xFF, 0xFF, 0xFF, 0x03, 0xCC, 0xFE, 0x00)))
        wait_until(r.pumped(lambda: ack in got), what="the positive acknowledgement of DM3")
        assert ad.engine.dm1.previous == [] and ad.engine.counts["nacks"] == 0
        for node in ad.nodes:
            assert sum(node.tp.aborts_sent.values()) == 0 and node.tp.counts["timeouts"] == 0
    finally:
        r.j.close()


# -- the node's services one by one, each answer asserted byte for byte ----------------------------------------------
@pytest.fixture
def watched():
    """A rest-bus and a plain python-can bus on its channel: every frame the nodes send, in order, at once."""
    r = Rest(engine_dtcs=[[190, 2, 1]])
    bus = can.Bus(interface="virtual", channel=r.channel)
    yield r, bus
    bus.shutdown()
    r.j.close()


def _drain(bus) -> list[tuple[int, bytes]]:
    out = []
    while (m := bus.recv(0.0)) is not None:
        out.append((m.arbitration_id, bytes(m.data)))
    return out


class _ClaimLog(outside.ControllerApplication):
    """A controller application of the outside stack that keeps every address claim it hears (source, NAME)."""

    def __init__(self, name: int, address: int):
        super().__init__(outside.Name(value=name), address)
        self.claims: list[tuple[int, int]] = []

    def _process_addressclaim(self, mid, data, timestamp):
        self.claims.append((mid.source_address, int.from_bytes(bytes(data), "little")))
        super()._process_addressclaim(mid, data, timestamp)


def _sent_by_nodes(bus) -> list[tuple[int, bytes]]:
    """What the rest-bus's nodes (0x00, 0x21) sent since the last look, the outside stack's frames left out."""
    return [(fid, d) for fid, d in _drain(bus) if fid & 0xFF in (0x00, 0x21)]


def test_address_claims_heard_by_the_outside_stack_and_contended_by_its_applications(watched):
    """The outside stack's applications claim addresses by its own J1939-81 logic: the TCU (0x03) hears both
    nodes' claims at power-up and again on its global request for PGN 60928; a rival with a higher NAME for the
    engine's 0x00 loses to the engine's repeated claim (the rival cannot claim); one with a lower NAME for the
    vehicle ECU's 0x21 wins: the vehicle ECU sends Cannot Claim from 254 and falls silent."""
    r, bus = watched
    names = {0x00: r.j.names["engine"], 0x21: r.j.names["vehicle"]}
    ecu = outside.ElectronicControlUnit()
    ecu.connect(interface="virtual", channel=r.channel)
    normal, cannot = outside.ControllerApplication.State.NORMAL, outside.ControllerApplication.State.CANNOT_CLAIM
    try:
        tcu = _ClaimLog(0x7FFF_FFFF_FFFF_FFFF, 0x03)
        ecu.add_ca(controller_application=tcu)
        tcu.start()
        wait_until(r.pumped(lambda: tcu.state == normal), what="the outside TCU's claim")
        r.run(1)
        wait_until(lambda: sorted(tcu.claims) == sorted(names.items()), what="both claims at the TCU")
        r.run(300)
        tcu.claims.clear()
        tcu.send_request(0, j.PGN_ADDRESS_CLAIMED, 0xFF)
        wait_until(r.pumped(lambda: sorted(tcu.claims) == sorted(names.items())), what="the claims requested")
        rival = _ClaimLog(names[0x00] + 1, 0x00)
        ecu.add_ca(controller_application=rival)
        rival.start()
        wait_until(r.pumped(lambda: rival.state == cannot), timeout_s=5.0, what="the rival giving up")
        assert r.j.engine.state == "claimed" and r.j.engine.counts["contentions_won"] == 1
        cannot_claims = [d for fid, d in _drain(bus) if fid == j.frame_id(6, j.PGN_ADDRESS_CLAIMED, 0xFE)]
        assert cannot_claims == [(names[0x00] + 1).to_bytes(8, "little")]  # the rival's, on the bus
        usurper = _ClaimLog(names[0x21] - 1, 0x21)
        ecu.add_ca(controller_application=usurper)
        usurper.start()
        wait_until(r.pumped(lambda: (0xFE, names[0x21]) in tcu.claims), timeout_s=5.0, what="cannot claim")
        wait_until(r.pumped(lambda: usurper.state == normal), timeout_s=5.0, what="the usurper's address")
        assert r.j.vehicle.state == "lost" and r.j.engine.state == "claimed"
        _drain(bus)
        r.run(500)
        assert [fid for fid, _ in _drain(bus) if fid & 0xFF == 0x21] == []  # silent at its old address
        # requested: both; against the rival: the engine's again; the vehicle ECU's Cannot Claim (the outside
        # stack's own applications do not hear each other: one bus connection)
        assert tcu.claims == [(0x00, names[0x00]), (0x21, names[0x21]), (0x00, names[0x00]), (0xFE, names[0x21])]
    finally:
        ecu.disconnect()
        ecu.stop()


def test_each_pgn_the_nodes_own_answered_to_the_outside_stack_exactly(tcu_stack, watched):
    """A request to the node alone and to everyone for every PGN a node answers: the outside stack gets the
    node's payload exactly once (one frame, or reassembled from RTS/CTS or BAM); another PGN asked of the node
    alone is NACKed with the requester and PGN in the acknowledgement, asked of everyone it is not answered."""
    r, bus = watched
    r.run(1100)  # claims stand; the cyclic DM1 went
    ad = r.j
    ecu, got = tcu_stack(r)

    def step():  # plant time moves for BAM packets (50 ms apart) only: a one-frame answer is of the time asked
        if any(n.tp.bam for n in ad.nodes):
            r.run(1)
        else:
            ad.pump(0)

    cyclic = {j.parse_id(c[1])[1] for c in ad._cyclic.values()} | {j.PGN_DM1}
    for node in ad.nodes:
        pgns = sorted({*node.owned, j.PGN_DM1, dm.PGN_DM2})
        assert {j.PGN_DM1, dm.PGN_DM2, dm.PGN_SOFTWARE_ID, dm.PGN_COMPONENT_ID, dm.PGN_ECU_ID} <= set(pgns)
        for pgn in pgns:
            for dest in (node.address, 0xFF):
                want = node.tp_payload(pgn)
                before = node.counts["requests_answered"]
                got.clear()
                ecu.send_pgn(0, 0xEA, dest, 6, 0x03, list(pgn.to_bytes(3, "little")))
                wait_until(lambda: (step(), node.counts["requests_answered"] == before + 1
                                    and (pgn, node.address, want) in got)[1], timeout_s=30.0,
                           what=f"PGN {pgn} from 0x{node.address:02X} asked of 0x{dest:02X}")
                if pgn not in cyclic:  # a cyclic message may also come by its cycle meanwhile
                    assert [g for g in got if g[:2] == (pgn, node.address)] == [(pgn, node.address, want)]
    assert ad.engine.tp_payload(dm.PGN_ENGINE_HOURS) is not None and dm.PGN_ENGINE_HOURS not in ad.vehicle.owned
    got.clear()
    ecu.send_pgn(0, 0xEA, 0x00, 6, 0x03, [0x34, 0x12, 0x00])  # PGN 0x1234: not the engine's
    nack = (j.PGN_ACK, 0x00, bytes((1, 0xFF, 0xFF, 0xFF, 0x03, 0x34, 0x12, 0x00)))
    wait_until(r.pumped(lambda: nack in got), what="the NACK")
    ecu.send_pgn(0, 0xEA, 0xFF, 6, 0x03, [0x34, 0x12, 0x00])
    r.pumped(lambda: None)()
    assert ad.engine.counts["nacks"] == 1 and ad.vehicle.counts["nacks"] == 0
    assert [fid for fid, _ in _drain(bus) if fid >> 16 & 0xFF == 0xE8] == [j.frame_id(6, j.PGN_ACK, 0x00)]
    for node in ad.nodes:
        assert sum(node.tp.aborts_sent.values()) == 0 and node.tp.counts["timeouts"] == 0


def test_dm11_and_dm3_clears_acknowledged_and_dm1_dm2_after_them_exact(tcu_stack, watched):
    """The engine's DTC 190/2 active: DM11 asked of the engine alone clears it (positive ACK), DM1 then has no
    DTC; a DTC set inactive over the control channel is in DM2 until DM3 clears it (positive ACK)."""
    r, bus = watched
    r.run(300)
    ad = r.j
    ecu, got = tcu_stack(r)
    assert ad.engine.dm1.payload() == bytes((0x04, 0xFF)) + j.dtc_bytes(190, 2, 1) + b"\xff\xff"  # amber lamp on

    def ask(pgn: int, answer: tuple) -> None:
        got.clear()
        ecu.send_pgn(0, 0xEA, 0x00, 6, 0x03, list(pgn.to_bytes(3, "little")))
        wait_until(r.pumped(lambda: answer in got), what=f"the answer to PGN {pgn}")

    ask(dm.PGN_DM11, (j.PGN_ACK, 0x00, bytes((0, 0xFF, 0xFF, 0xFF, 0x03, 0xD3, 0xFE, 0x00))))
    ask(j.PGN_DM1, (j.PGN_DM1, 0x00, bytes((0, 0xFF, 0, 0, 0, 0, 0xFF, 0xFF))))  # no DTC, the lamp off
    ad.set_values(ad.check_values({"engine_dtc_spn": 100, "engine_dtc_fmi": 1, "engine_dtc_active": 1}))
    ad.set_values(ad.check_values({"engine_dtc_spn": 100, "engine_dtc_fmi": 1, "engine_dtc_active": 0}))
    ask(dm.PGN_DM2, (dm.PGN_DM2, 0x00, bytes((0, 0xFF)) + j.dtc_bytes(100, 1, 1) + b"\xff\xff"))
    ask(dm.PGN_DM3, (j.PGN_ACK, 0x00, bytes((0, 0xFF, 0xFF, 0xFF, 0x03, 0xCC, 0xFE, 0x00))))
    ask(dm.PGN_DM2, (dm.PGN_DM2, 0x00, bytes((0, 0xFF, 0, 0, 0, 0, 0xFF, 0xFF))))
    c = ad.engine.counts
    assert (c["dm11_clears"], c["dm3_clears"], c["nacks"]) == (1, 1, 0)


def _tsc1(mode: int, speed_raw: int, torque_raw: int, priority: int = 3) -> list[int]:
    return [mode | priority << 4 | 0xC0, speed_raw & 0xFF, speed_raw >> 8, torque_raw, 0xFF, 0xFF, 0xFF, 0xFF]


def test_tsc1_from_the_outside_stack_obeyed_or_refused_by_reason(tcu_stack, watched):
    """TSC1 torque control to the engine: 20 % (raw 145) is 200 N m of the 1000 N m reference in the plant's
    input by the next tick and the outside stack's address in EEC1's SPN 1483; a torque byte 0xFF (not
    available), 0xFE (error) or 0xFB (above 125 %) is refused by its reason and the 200 N m stand."""
    r, bus = watched
    r.run(300)
    ad = r.j
    ecu, got = tcu_stack(r)
    u = r.plant.input_index(ad.torque_input)
    demand = r.plant.u[u]
    ecu.send_pgn(0, 0x00, 0x00, 3, 0x03, _tsc1(2, 0xFFFF, 125 + 30))  # 30 %: 300 N m
    wait_until(r.pumped(lambda: ad.counts["tsc1_applied"] == 1), what="the TSC1")
    r.run(1)
    assert r.plant.u[u] == 300.0 != demand and ad.tsc1_source == 0x03
    _drain(bus)
    r.run(10)
    eec1 = [d for fid, d in _drain(bus) if fid >> 8 & 0xFFFF == j.PGN_EEC1]
    assert eec1 and eec1[-1][5] == 0x03  # SPN 1483, the source address of the controlling device
    for raw, reason in ((0xFF, "not_available"), (0xFE, "error_indicator"), (0xFB, "out_of_range")):
        before = dict(ad.tsc1_rejected)
        ecu.send_pgn(0, 0x00, 0x00, 3, 0x03, _tsc1(2, 0xFFFF, raw))
        wait_until(r.pumped(lambda: ad.tsc1_rejected[reason] == before[reason] + 1), what=reason)
        r.run(1)
        assert r.plant.u[u] == 300.0 and ad.counts["tsc1_applied"] == 1
    assert ad.command_counts().applied == 1 and sum(ad.command_counts().rejected.values()) == 3
    ecu.send_pgn(0, 0x00, 0x00, 3, 0x03, _tsc1(2, 0xFFFF, 125 + 20)[:5])  # 5 bytes: too short
    wait_until(r.pumped(lambda: ad.tsc1_rejected["dlc"] == 1), what="the short TSC1")
    r.run(200)  # no valid TSC1 for 3 cycles: released
    assert r.plant.u[u] == demand and ad.tsc1_source == 0xFF


def test_dm13_stop_and_start_broadcast_from_the_outside_stack(tcu_stack, watched):
    """DM13 to everyone, network 1 stop: no cyclic message and no DM1 from either node while the stop holds
    (requests still answered); start: EEC1 again at once, every 10 ms; a stop without hold signal ends after 6 s."""
    r, bus = watched
    r.run(300)
    ad = r.j
    ecu, got = tcu_stack(r)
    stop, start = [0xFC, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF], [0xFD, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]
    ecu.send_pgn(0, 0xDF, 0xFF, 6, 0x03, stop)
    wait_until(r.pumped(lambda: all(n.counts["dm13_stops"] == 1 for n in ad.nodes)), what="the stop")
    _sent_by_nodes(bus)
    r.run(2000)
    assert _sent_by_nodes(bus) == []
    ecu.send_pgn(0, 0xEA, 0x00, 6, 0x03, [0x04, 0xF0, 0x00])  # EEC1 requested: answered during the stop
    wait_until(r.pumped(lambda: ad.engine.counts["requests_answered"] == 1), what="the request")
    assert [fid >> 8 & 0xFFFF for fid, _ in _sent_by_nodes(bus)] == [j.PGN_EEC1]
    ecu.send_pgn(0, 0xDF, 0xFF, 6, 0x03, start)
    wait_until(r.pumped(lambda: all(n.counts["dm13_starts"] == 1 for n in ad.nodes)), what="the start")
    r.run(100)
    sent = _sent_by_nodes(bus)
    assert sum(fid >> 8 & 0xFFFF == j.PGN_EEC1 for fid, _ in sent) == 10
    assert any(fid >> 8 & 0xFFFF == j.PGN_DM1 and fid & 0xFF == 0x00 for fid, _ in sent)  # DM1 at once
    ecu.send_pgn(0, 0xDF, 0xFF, 6, 0x03, stop)
    wait_until(r.pumped(lambda: ad.engine.counts["dm13_stops"] == 2), what="the second stop")
    r.run(5990)
    assert _sent_by_nodes(bus) == []
    r.run(20)
    assert sum(fid >> 8 & 0xFFFF == j.PGN_EEC1 for fid, _ in _sent_by_nodes(bus)) >= 1  # the 6 s without hold ran out


def test_an_rts_of_the_outside_stack_is_refused_with_abort_busy_while_four_connections_run(tcu_stack, watched):
    """Four other senders hold the engine's four receive connections (an RTS each, no packets yet); the outside
    stack's RTS/CTS message to the engine is refused with Connection Abort reason 1 (busy), its PGN in the abort,
    and nothing is delivered; once those connections time out (T2), the same message is reassembled."""
    r, bus = watched
    r.run(300)
    ad = r.j
    for sa in (0x10, 0x11, 0x12, 0x13):
        bus.send(can.Message(arbitration_id=j.frame_id(7, tp.PGN_TP_CM, sa, 0x00), is_extended_id=True,
                             data=bytes((16, 20, 0, 3, 255, 0x00, 0xEF, 0x00))))
    r.pumped(lambda: None)()
    assert ad.engine.tp.status()["receiving"] == 4
    ecu, _ = tcu_stack(r)
    _drain(bus)
    msg = list(range(1, 31))  # 30 bytes: RTS/CTS
    ecu.send_pgn(0, 0xEF, 0x00, 6, 0x03, msg)
    wait_until(r.pumped(lambda: ad.engine.tp.aborts_sent["busy"] == 1), what="the busy abort")
    aborts = [d for fid, d in _drain(bus) if fid == j.frame_id(7, tp.PGN_TP_CM, 0x00, 0x03)]
    assert aborts == [bytes((255, 1, 0xFF, 0xFF, 0xFF, 0x00, 0xEF, 0x00))]
    assert 0xEF00 not in ad.engine.received
    r.run(1300)  # T2: the four connections that never sent a packet end with an abort each (reason 3)
    assert ad.engine.tp.aborts_sent["timeout"] == 4 and ad.engine.tp.status()["receiving"] == 0
    # the outside stack drops its aborted transfer when its job thread next runs: until then it refuses a new one
    wait_until(lambda: ecu.send_pgn(0, 0xEF, 0x00, 6, 0x03, msg) is not False, timeout_s=10.0, what="a new send")
    wait_until(r.pumped(lambda: ad.engine.received.get(0xEF00) == bytes(msg)), what="the reassembly")
    assert ad.engine.tp.counts["cmdt_received"] == 1 and ad.engine.tp.aborts_sent["busy"] == 1
