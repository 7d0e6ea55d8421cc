"""The J1939-21 transport protocol of the emulated nodes, frame by frame: RTS/CTS and BAM, both directions.

Every frame is checked byte by byte against J1939-21 (TP.CM control bytes 16 RTS, 17 CTS, 19
EndOfMsgAck, 32 BAM, 255 Abort; TP.DT: a sequence number and 7 bytes).  Times are plant times in ms,
passed in, so the timeouts are exact.
"""

from __future__ import annotations

import pytest

from io_adapters.can import j1939 as j
from io_adapters.can import j1939_tp as tp
from j1939_support import PROP_A, TCU, Engine, claimed, feed, pgn3


def cm_to_tcu(*b):  # TP.CM from the engine (0x00) to the TCU, priority 7
    return 0x1CEC0300, bytes(b)


def rts(size, packets, most, pgn, to=0x00, sa=TCU):
    return 0x1CEC0000 | to << 8 | sa, bytes((16, size & 0xFF, size >> 8, packets, most, pgn & 0xFF, pgn >> 8 & 0xFF,
                                            pgn >> 16))


def dt(seq, chunk, to=0x00, sa=TCU):
    return 0x1CEB0000 | to << 8 | sa, bytes((seq,)) + chunk + b"\xff" * (7 - len(chunk))


MSG20 = bytes(range(1, 21))  # 20 bytes: 3 packets


def test_rts_cts_received_reassembled_and_acknowledged():
    eng = claimed()
    assert feed(eng, rts(20, 3, 0xFF, PROP_A), 300.0) == [cm_to_tcu(17, 3, 1, 0xFF, 0xFF, *pgn3(PROP_A))]
    assert feed(eng, dt(1, MSG20[:7]), 301.0) == []
    assert feed(eng, dt(2, MSG20[7:14]), 302.0) == []
    assert feed(eng, dt(3, MSG20[14:]), 303.0) == [cm_to_tcu(19, 20, 0, 3, 0xFF, *pgn3(PROP_A))]
    assert eng.messages == [(PROP_A, MSG20, TCU, 0x00)] and eng.received == {PROP_A: MSG20}
    c = eng.tp.counts
    assert (c["rts_received"], c["cts_sent"], c["eoma_sent"], c["cmdt_received"]) == (1, 1, 1, 1)
    assert eng.tp.status()["receiving"] == 0 and sum(eng.tp.aborts_sent.values()) == 0


def test_rts_cts_in_windows_of_the_senders_most_packets_per_cts():
    eng = claimed()
    data = bytes(range(100, 133))  # 33 bytes: 5 packets, at most 2 per CTS
    assert feed(eng, rts(33, 5, 2, PROP_A), 300.0) == [cm_to_tcu(17, 2, 1, 0xFF, 0xFF, *pgn3(PROP_A))]
    out = []
    for k in range(1, 6):
        out.append(feed(eng, dt(k, data[7 * (k - 1):7 * k]), 300.0 + k))
    assert out == [[], [cm_to_tcu(17, 2, 3, 0xFF, 0xFF, *pgn3(PROP_A))], [],
                   [cm_to_tcu(17, 1, 5, 0xFF, 0xFF, *pgn3(PROP_A))], [cm_to_tcu(19, 33, 0, 5, 0xFF, *pgn3(PROP_A))]]
    assert eng.received[PROP_A] == data and eng.tp.counts["cts_sent"] == 3


@pytest.mark.parametrize("size,packets,reason", [(2000, 255, 9), (20, 2, 250), (8, 2, 250), (0, 0, 250)])
def test_an_rts_the_node_cannot_take_is_aborted_with_its_reason(size, packets, reason):
    eng = claimed()
    assert feed(eng, rts(size, packets, 0xFF, PROP_A), 300.0) == [
        cm_to_tcu(255, reason, 0xFF, 0xFF, 0xFF, *pgn3(PROP_A))]
    assert eng.tp.aborts_sent[tp.ABORT_REASONS[reason]] == 1 and not eng.tp.rx


def test_second_rts_same_pgn_restarts_other_pgn_busy_and_at_most_four_senders():
    eng = claimed()
    feed(eng, rts(20, 3, 0xFF, PROP_A), 300.0)
    feed(eng, dt(1, MSG20[:7]), 301.0)
    # another PGN from the same sender while its session runs: busy (1), the running session goes on
    assert feed(eng, rts(20, 3, 0xFF, 0xFECA), 302.0) == [cm_to_tcu(255, 1, 0xFF, 0xFF, 0xFF, 0xCA, 0xFE, 0)]
    # the same PGN again: the newer RTS replaces the older, no abort (J1939-21)
    assert feed(eng, rts(20, 3, 0xFF, PROP_A), 303.0) == [cm_to_tcu(17, 3, 1, 0xFF, 0xFF, *pgn3(PROP_A))]
    for k in range(3):
        feed(eng, dt(k + 1, MSG20[7 * k:7 * k + 7]), 304.0 + k)
    assert eng.received[PROP_A] == MSG20 and eng.tp.counts["cmdt_received"] == 1
    for sa in (0x10, 0x11, 0x12, 0x13):
        assert feed(eng, rts(20, 3, 0xFF, PROP_A, sa=sa), 400.0)[0][1][0] == 17
    assert feed(eng, rts(20, 3, 0xFF, PROP_A, sa=0x14), 400.0) == [
        (0x1CEC1400, bytes((255, 1, 0xFF, 0xFF, 0xFF)) + pgn3(PROP_A))]
    assert eng.tp.aborts_sent["busy"] == 2 and len(eng.tp.rx) == tp.MAX_RX_SESSIONS


def test_packets_out_of_order_or_repeated_abort_the_session():
    eng = claimed()
    feed(eng, rts(20, 3, 0xFF, PROP_A), 300.0)
    assert feed(eng, dt(2, MSG20[7:14]), 301.0) == [cm_to_tcu(255, 7, 0xFF, 0xFF, 0xFF, *pgn3(PROP_A))]
    feed(eng, rts(20, 3, 0xFF, PROP_A), 310.0)
    feed(eng, dt(1, MSG20[:7]), 311.0)
    assert feed(eng, dt(1, MSG20[:7]), 312.0) == [cm_to_tcu(255, 8, 0xFF, 0xFF, 0xFF, *pgn3(PROP_A))]
    assert feed(eng, dt(2, MSG20[7:14]), 313.0) == []  # no session any more: counted, not answered
    assert eng.messages == [] and eng.tp.counts["unexpected_dt"] == 1
    assert (eng.tp.aborts_sent["bad_sequence"], eng.tp.aborts_sent["duplicate_sequence"]) == (1, 1)


def test_receive_timeouts_t2_after_a_cts_and_t1_between_packets():
    eng = claimed()
    feed(eng, rts(20, 3, 0xFF, PROP_A), 300.0)
    assert eng.poll(300.0 + tp.T2_MS) == []  # exactly T2: still waiting
    assert eng.poll(300.0 + tp.T2_MS + 1) == [cm_to_tcu(255, 3, 0xFF, 0xFF, 0xFF, *pgn3(PROP_A))]
    feed(eng, rts(20, 3, 0xFF, PROP_A), 2000.0)
    feed(eng, dt(1, MSG20[:7]), 2001.0)
    assert [f for f in eng.poll(2001.0 + tp.T1_MS) if f[0] == 0x1CEC0300] == []
    assert eng.poll(2002.0 + tp.T1_MS) == [cm_to_tcu(255, 3, 0xFF, 0xFF, 0xFF, *pgn3(PROP_A))]
    assert eng.tp.counts["timeouts"] == 2 and eng.tp.aborts_sent["timeout"] == 2 and eng.messages == []


def test_bam_received_from_another_node_and_its_faults_ignored_without_answer():
    eng = claimed()
    bam = (0x1CECFF21, bytes((32, 20, 0, 3, 0xFF)) + pgn3(0xFEDA))
    assert feed(eng, bam, 300.0) == []
    for k in range(3):
        assert feed(eng, (0x1CEBFF21, dt(k + 1, MSG20[7 * k:7 * k + 7])[1]), 350.0 + 50 * k) == []
    assert eng.messages == [(0xFEDA, MSG20, 0x21, 0xFF)] and eng.tp.counts["bam_received"] == 1
    feed(eng, bam, 500.0)
    assert feed(eng, (0x1CEBFF21, dt(2, MSG20[7:14])[1]), 550.0) == []  # out of order: dropped, no abort
    feed(eng, bam, 600.0)
    feed(eng, (0x1CEBFF21, dt(1, MSG20[:7])[1]), 650.0)
    assert eng.poll(650.0 + tp.T1_MS + 1) == [] and eng.tp.counts["timeouts"] == 1
    assert eng.tp.counts["bam_received"] == 1 and len(eng.messages) == 1


def _dm1_engine():
    dm1 = j.Dm1(dtcs=[(190, 2, 1), (100, 1, 3)], amber_lamp=1)
    eng = Engine(dm1=dm1)
    eng.start(0.0)
    eng.next_dm1_ms = 1e9  # no cyclic DM1 in these tests
    eng.poll(250.0)
    return eng


DM1_BODY = bytes((0x04, 0xFF, 0xBE, 0x00, 0x02, 0x01, 0x64, 0x00, 0x01, 0x03))
DM1_RTS = cm_to_tcu(16, 10, 0, 2, 0xFF, 0xCA, 0xFE, 0x00)


def test_a_request_to_the_node_alone_is_answered_by_rts_cts_to_the_requester():
    eng = _dm1_engine()
    assert feed(eng, (0x18EA0003, pgn3(j.PGN_DM1)), 300.0) == [DM1_RTS]
    assert eng.counts["requests_answered"] == 1 and eng.counts["dm1_sent"] == 1
    assert feed(eng, (0x1CEC0003, bytes((17, 2, 1, 0xFF, 0xFF, 0xCA, 0xFE, 0))), 310.0) == [
        (0x1CEB0300, bytes((1,)) + DM1_BODY[:7]), (0x1CEB0300, bytes((2,)) + DM1_BODY[7:] + b"\xff" * 4)]
    # a second request meanwhile waits for the connection; the EndOfMsgAck ends it and starts the next
    assert feed(eng, (0x18EA0003, pgn3(j.PGN_DM1)), 311.0) == []
    assert feed(eng, (0x1CEC0003, bytes((19, 10, 0, 2, 0xFF, 0xCA, 0xFE, 0))), 320.0) == [DM1_RTS]
    assert eng.tp.counts["cmdt_sent"] == 1 and eng.counts["requests_answered"] == 2
    # the requester asks for packet 1 again, then holds (CTS of 0 packets), then lets T4 run out
    feed(eng, (0x1CEC0003, bytes((17, 2, 1, 0xFF, 0xFF, 0xCA, 0xFE, 0))), 330.0)
    assert feed(eng, (0x1CEC0003, bytes((17, 1, 1, 0xFF, 0xFF, 0xCA, 0xFE, 0))), 331.0) == [
        (0x1CEB0300, bytes((1,)) + DM1_BODY[:7])]
    assert eng.tp.counts["packets_resent"] == 1
    assert feed(eng, (0x1CEC0003, bytes((17, 0, 0xFF, 0xFF, 0xFF, 0xCA, 0xFE, 0))), 340.0) == []
    assert eng.poll(340.0 + tp.T4_MS) == []
    assert eng.poll(341.0 + tp.T4_MS) == [cm_to_tcu(255, 3, 0xFF, 0xFF, 0xFF, 0xCA, 0xFE, 0)]
    assert eng.tp.counts["timeouts"] == 1 and not eng.tp.tx


def test_cmdt_send_aborts_on_t3_and_on_a_cts_beyond_the_message_and_ends_on_the_requesters_abort():
    eng = _dm1_engine()
    feed(eng, (0x18EA0003, pgn3(j.PGN_DM1)), 300.0)
    assert eng.poll(300.0 + tp.T3_MS + 1) == [cm_to_tcu(255, 3, 0xFF, 0xFF, 0xFF, 0xCA, 0xFE, 0)]
    feed(eng, (0x18EA0003, pgn3(j.PGN_DM1)), 2000.0)
    assert feed(eng, (0x1CEC0003, bytes((17, 2, 3, 0xFF, 0xFF, 0xCA, 0xFE, 0))), 2001.0) == [
        cm_to_tcu(255, 250, 0xFF, 0xFF, 0xFF, 0xCA, 0xFE, 0)]
    feed(eng, (0x18EA0003, pgn3(j.PGN_DM1)), 2100.0)
    assert feed(eng, (0x1CEC0003, bytes((255, 1, 0xFF, 0xFF, 0xFF, 0xCA, 0xFE, 0))), 2101.0) == []
    assert eng.tp.counts["tx_aborted_by_receiver"] == 1 and not eng.tp.tx
    assert eng.tp.counts["rts_sent"] == 3 and eng.tp.counts["cmdt_sent"] == 0
    # a CTS or EndOfMsgAck without a connection, a CTS broadcast: counted, not answered
    assert feed(eng, (0x1CEC0003, bytes((19, 10, 0, 2, 0xFF, 0xCA, 0xFE, 0))), 2200.0) == []
    assert feed(eng, (0x1CECFF03, bytes((17, 2, 1, 0xFF, 0xFF, 0xCA, 0xFE, 0))), 2201.0) == []
    assert eng.tp.counts["unexpected_cm"] == 2


def test_nothing_of_the_transport_before_the_claim_stands_or_after_it_is_lost():
    eng = Engine()
    eng.start(0.0)
    assert feed(eng, rts(20, 3, 0xFF, PROP_A), 100.0) == [] and eng.tp.counts["rts_received"] == 0
    eng.poll(250.0)
    feed(eng, rts(20, 3, 0xFF, PROP_A), 300.0)
    eng.lose_claim()
    assert not eng.tp.rx and feed(eng, dt(1, MSG20[:7]), 301.0) == [] and eng.poll(5000.0) == []
