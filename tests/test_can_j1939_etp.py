"""The J1939-21 extended transport protocol (ETP) of the emulated nodes, frame by frame, both directions.

Every frame is checked byte by byte (ETP.CM control bytes 20 RTS, 21 CTS, 22 DPO, 23 EndOfMsgAck, 255
Abort; ETP.DT: a sequence number counted from the DPO's offset and 7 bytes).  Times are plant times in ms,
passed in, so the timeouts are exact.  The last test sends 10 000 fuzzed ETP frames while the plant runs.
"""

from __future__ import annotations

import random

import can
import pytest

from can_support import Rest
from io_adapters.can import j1939 as j
from io_adapters.can import j1939_etp as etp
from j1939_support import PROP_A, TCU, claimed, feed, fuzzed_run, interleave, pgn3

PEER_NAME = j.name_pack(1002, 0x123, function=3, industry_group=2)
LONG = bytes((k * 7 + k // 251) & 0xFF for k in range(3000))  # 3000 bytes: 429 packets, the last of 4 bytes


def cm(ctrl, *rest, pgn=PROP_A, to=0x00, sa=TCU):
    """An ETP.CM frame (priority 7) from ``sa`` to ``to``: control byte, bytes 2-5, the PGN."""
    body = bytes((ctrl,)) + bytes(rest)
    return 0x1CC80000 | to << 8 | sa, body + b"\xff" * (5 - len(body)) + pgn3(pgn)


def rts(size, pgn=PROP_A, sa=TCU):
    return cm(20, *size.to_bytes(4, "little"), pgn=pgn, sa=sa)


def dpo(n, offset, pgn=PROP_A, sa=TCU):
    return cm(22, n, *offset.to_bytes(3, "little"), pgn=pgn, sa=sa)


def dt(seq, chunk, to=0x00, sa=TCU):
    return 0x1CC70000 | to << 8 | sa, bytes((seq,)) + chunk + b"\xff" * (7 - len(chunk))


def from_engine(ctrl, *rest, pgn=PROP_A, to=TCU):
    """What the engine (0x00) sends to ``to`` on ETP.CM."""
    body = bytes((ctrl,)) + bytes(rest)
    return 0x1CC80000 | to << 8 | 0x00, body + b"\xff" * (5 - len(body)) + pgn3(pgn)


def send_window(eng, data, offset, n, now, sa=TCU):
    """A DPO and its ``n`` packets from packet ``offset + 1``: the node's answers to the last packet."""
    assert feed(eng, dpo(n, offset, sa=sa), now) == []
    out = []
    for k in range(1, n + 1):
        out = feed(eng, dt(k, data[7 * (offset + k - 1):7 * (offset + k)], sa=sa), now)
        if k < n:
            assert out == []
    return out


def test_etp_received_in_windows_of_16_reassembled_and_acknowledged():
    eng = claimed()
    out = feed(eng, rts(len(LONG)), 300.0)
    assert out == [from_engine(21, 16, 1, 0, 0)]  # CTS: 16 packets from packet 1
    offset = 0
    while True:
        out = send_window(eng, LONG, offset, min(16, 429 - offset), 300.0)
        offset += min(16, 429 - offset)
        if offset == 429:
            break
        assert out == [from_engine(21, min(16, 429 - offset), *(offset + 1).to_bytes(3, "little"))]
    assert out == [from_engine(23, *len(LONG).to_bytes(4, "little"))]  # EndOfMsgAck: 3000 bytes
    assert eng.messages == [(PROP_A, LONG, TCU, 0x00)]
    c = eng.etp.counts
    assert (c["rts_received"], c["cts_sent"], c["dpo_received"], c["eoma_sent"], c["received"]) == (1, 27, 27, 1, 1)
    assert c["dt_received"] == 429 and sum(eng.etp.aborts_sent.values()) == 0 and eng.etp.status()["receiving"] == 0


@pytest.mark.parametrize("size, reason", [(1785, 250), (etp.ETP_MAX_BYTES + 1, 2)])
def test_an_rts_for_tp_sizes_or_beyond_the_bound_is_aborted(size, reason):
    eng = claimed()
    assert feed(eng, rts(size), 300.0) == [from_engine(255, reason, 0xFF, 0xFF, 0xFF)]
    assert eng.etp.aborts_sent[etp.ETP_ABORT_REASONS[reason]] == 1 and eng.etp.rx == {}


def test_one_connection_per_sender_and_at_most_two_senders():
    eng = claimed()
    feed(eng, rts(2000), 300.0)
    assert feed(eng, rts(2000, pgn=0xEF00 | 0x10000), 300.0) == [from_engine(255, 1, 0xFF, 0xFF, 0xFF,
                                                                             pgn=0x1EF00)]
    assert feed(eng, rts(2500), 301.0) == [from_engine(21, 16, 1, 0, 0)]  # the same PGN again: restarted
    assert eng.etp.counts["rts_replaced"] == 1 and eng.etp.rx[TCU].size == 2500
    feed(eng, rts(2000, sa=0x10), 301.0)
    out = feed(eng, rts(2000, sa=0x11), 301.0)
    assert out == [(0x1CC81100, bytes((255, 1, 0xFF, 0xFF, 0xFF)) + pgn3(PROP_A))]


@pytest.mark.parametrize("frames, reason", [
    ([dpo(16, 0, pgn=0xEE00)], 10),  # the DPO's PGN is not the RTS's
    ([dpo(17, 0)], 11),  # more packets than the CTS allowed
    ([dpo(16, 5)], 12),  # not from the packet the CTS asked for
    ([dt(1, LONG[:7])], 6),  # a packet before its DPO
    ([dpo(16, 0), dt(1, LONG[:7]), dpo(16, 0)], 9),  # a DPO while packets of the last one are due
    ([dpo(16, 0), dt(2, LONG[7:14])], 7),  # out of order
    ([dpo(16, 0), dt(1, LONG[:7]), dt(1, LONG[:7])], 8),  # the previous packet again
])
def test_a_broken_dpo_or_packet_aborts_the_connection_with_its_reason(frames, reason):
    eng = claimed()
    feed(eng, rts(len(LONG)), 300.0)
    outs = [feed(eng, f, 300.0) for f in frames]
    assert outs[-1] == [from_engine(255, reason, 0xFF, 0xFF, 0xFF)] and all(o == [] for o in outs[:-1])
    assert eng.etp.aborts_sent[etp.ETP_ABORT_REASONS[reason]] == 1 and eng.etp.rx == {}
    assert eng.messages == []


def test_receive_timeouts_t2_after_a_cts_and_t1_between_packets():
    eng = claimed()
    feed(eng, rts(len(LONG)), 300.0)
    assert eng.poll(300.0 + 1250.0) == []
    assert eng.poll(300.0 + 1250.5) == [from_engine(255, 3, 0xFF, 0xFF, 0xFF)]
    feed(eng, rts(len(LONG)), 2000.0)
    feed(eng, dpo(16, 0), 2000.0)
    feed(eng, dt(1, LONG[:7]), 2100.0)
    assert eng.poll(2850.0) == []
    assert eng.poll(2850.5) == [from_engine(255, 3, 0xFF, 0xFF, 0xFF)]
    assert eng.etp.counts["timeouts"] == 2 and eng.etp.aborts_sent["timeout"] == 2


def test_a_long_answer_to_a_request_of_the_node_alone_goes_by_etp_windows_the_receiver_chooses():
    """4000 bytes (572 packets) requested by the TCU: the RTS; each CTS (255 packets from 1, 255 from 256, 62
    from 511) gives a DPO of the offset before its first packet and the packets numbered 1.. from there; the
    message is whole after three windows, done at the EndOfMsgAck."""
    payload = bytes(random.Random(1).randbytes(4000))  # 572 packets
    eng = claimed(payload=payload)
    out = feed(eng, (0x18EA0003, pgn3(PROP_A)), 300.0)
    assert out == [from_engine(20, *(4000).to_bytes(4, "little"))]
    got = bytearray()
    for n, first in ((255, 1), (255, 256), (62, 511)):
        out = feed(eng, (0x1CC80003, bytes((21, n)) + first.to_bytes(3, "little") + pgn3(PROP_A)), 400.0)
        assert out[0] == from_engine(22, n, *(first - 1).to_bytes(3, "little"))
        assert [d[0] for _, d in out[1:]] == list(range(1, n + 1))
        assert all(fid == 0x1CC70300 for fid, _ in out[1:])
        got += b"".join(d[1:] for _, d in out[1:])
    assert bytes(got[:4000]) == payload and got[4000:] == b"\xff" * 4
    assert feed(eng, (0x1CC80003, bytes((23,)) + (4000).to_bytes(4, "little") + pgn3(PROP_A)), 500.0) == []
    c = eng.etp.counts
    assert (c["rts_sent"], c["dpo_sent"], c["packets_sent"], c["sent"]) == (1, 3, 572, 1)
    assert eng.counts["requests_answered"] == 1 and eng.etp.status()["sending"] == 0


@pytest.mark.parametrize("cts, reason", [
    (bytes((21, 10)) + (570).to_bytes(3, "little") + pgn3(PROP_A), 15),  # packets 570..579 of 572
    (bytes((21, 10, 0, 0, 0)) + pgn3(PROP_A), 15),  # from packet 0
    (bytes((21, 10, 1, 0, 0)) + pgn3(0xEE00), 14),  # another PGN
])
def test_a_cts_beyond_the_message_or_of_another_pgn_aborts_the_send(cts, reason):
    eng = claimed(payload=bytes(4000))
    feed(eng, (0x18EA0003, pgn3(PROP_A)), 300.0)
    assert feed(eng, (0x1CC80003, cts), 300.0) == [from_engine(255, reason, 0xFF, 0xFF, 0xFF)]
    assert eng.etp.tx == {} and eng.etp.aborts_sent[etp.ETP_ABORT_REASONS[reason]] == 1


def test_send_timeouts_t3_and_hold_t4_and_the_receivers_abort():
    eng = claimed(payload=bytes(4000))
    feed(eng, (0x18EA0003, pgn3(PROP_A)), 300.0)
    assert eng.poll(1550.0) == [] and eng.poll(1550.5) == [from_engine(255, 3, 0xFF, 0xFF, 0xFF)]
    feed(eng, (0x18EA0003, pgn3(PROP_A)), 2000.0)
    feed(eng, (0x1CC80003, bytes((21, 0, 1, 0, 0)) + pgn3(PROP_A)), 2100.0)  # hold
    assert eng.poll(3150.0) == [] and eng.poll(3150.5) == [from_engine(255, 3, 0xFF, 0xFF, 0xFF)]
    feed(eng, (0x18EA0003, pgn3(PROP_A)), 4000.0)
    assert feed(eng, (0x1CC80003, bytes((255, 1, 0xFF, 0xFF, 0xFF)) + pgn3(PROP_A)), 4001.0) == []
    assert eng.etp.counts["tx_aborted_by_receiver"] == 1 and eng.etp.counts["timeouts"] == 2
    assert feed(eng, (0x18EA0003, pgn3(PROP_A)), 4002.0)[0][1][0] == 20  # free again: a new RTS


def test_a_long_message_asked_of_everyone_is_not_broadcast():
    eng = claimed(payload=bytes(2000))
    assert feed(eng, (0x18EAFF03, pgn3(PROP_A)), 300.0) == []
    assert eng.counts["too_long_to_broadcast"] == 1 and eng.counts["requests_answered"] == 0


def test_one_node_sends_another_receives_20000_bytes_over_etp():
    """The engine's ETP sender against a second node's ETP receiver, frames passed between them: the
    receiver's CTS windows of 16, the sender's DPOs, 2858 packets, the message whole at the receiver."""
    payload = bytes(random.Random(2).randbytes(20000))
    eng, peer = claimed(payload=payload), claimed(name=PEER_NAME, address=TCU)
    to_eng = peer._send_message(0xEA00, 6, pgn3(PROP_A), 0x00, 300.0)  # the peer's request
    now, rounds = 300.0, 0
    while to_eng:
        to_peer = [f for fr in to_eng for f in feed(eng, fr, now)]
        to_eng = [f for fr in to_peer for f in feed(peer, fr, now)]
        now += 1.0
        rounds += 1
    assert peer.messages == [(PROP_A, payload, 0x00, TCU)]
    assert eng.etp.counts["sent"] == 1 and eng.etp.counts["dpo_sent"] == peer.etp.counts["cts_sent"] == 179
    assert rounds == 181 and eng.etp.counts["packets_sent"] == 2858 == peer.etp.counts["dt_received"]


def _fuzz_session(rng: random.Random) -> list[tuple[int, bytes]]:
    """An ETP RTS and its windows (DPO and packets) from one sender, perhaps broken, or one noise frame."""
    sa = rng.choice((0x03, 0x10, 0x11, 0x12, 0x80))
    da = rng.choice((0x00, 0x00, 0x21, 0x21, 0xFF, 0x05))
    if rng.random() < 0.3:  # noise: any control byte, any length, or a packet
        if rng.random() < 0.3:
            return [(0x1CC70000 | da << 8 | sa, rng.randbytes(rng.randint(0, 8)))]
        data = bytes((rng.choice((20, 21, 22, 23, 255, rng.randint(0, 255))),)) + rng.randbytes(rng.randint(0, 7))
        return [(0x1CC80000 | da << 8 | sa, data)]
    size = rng.randint(1786, 2000) if rng.random() < 0.9 else rng.choice((rng.randint(0, 1785), 70000))
    packets = (size + 6) // 7
    pgn = rng.choice((0xEF00, 0xFEDA))
    out = [(0x1CC80000 | da << 8 | sa, bytes((20,)) + size.to_bytes(4, "little") + pgn3(pgn))]
    whole = rng.random() < 0.3  # else cut short after a few windows: the sender aborts, or falls silent
    windows = (packets + 15) // 16 if whole else rng.randint(0, 3)
    if not whole and rng.random() < 0.5:
        sa = rng.randint(0x90, 0xEF)  # a sender heard only once: the receiver's timeout ends it
        out[0] = (out[0][0] & ~0xFF | sa, out[0][1])
    bad = rng.random() < (0.3 if whole else 0.6)
    bad_window = rng.randrange(max(windows, 1)) if bad else -1  # the window with a bad DPO or packet
    bad_seq = rng.choice((0, 0, 1, 2, 16))  # 0: the DPO, else that packet of the window
    for w, offset in enumerate(range(0, min(packets, 16 * windows, 300), 16)):
        n, off, p = min(16, packets - offset), offset, pgn
        if w == bad_window and bad_seq == 0:
            n, off, p = rng.choice(((n + 1, off, p), (n, off + 1, p), (n, off, p ^ 0x100), (0, 0, 0)))
            if n == 0:  # the DPO twice
                n, off, p = min(16, packets - offset), offset, pgn
                out.append((0x1CC80000 | da << 8 | sa, bytes((22, n)) + off.to_bytes(3, "little") + pgn3(p)))
        out.append((0x1CC80000 | da << 8 | sa, bytes((22, n & 0xFF)) + off.to_bytes(3, "little") + pgn3(p)))
        for seq in range(1, n + 1):
            if w == bad_window and seq == bad_seq:
                seq = rng.choice((seq - 1, seq + 1, 0)) if seq > 1 else rng.choice((0, 2))
            out.append((0x1CC70000 | da << 8 | sa, bytes((seq & 0xFF,)) + rng.randbytes(7)))
    if not whole and sa < 0x90 and rng.random() < 0.5:
        out.append((0x1CC80000 | da << 8 | sa, bytes((255, 250, 0xFF, 0xFF, 0xFF)) + pgn3(pgn)))
    return out


def test_fuzzed_etp_frames_no_crash_counters_exact_plant_untouched():
    """10 000 ETP frames while the plant runs: every frame counted where it went, every answer counted by its
    kind and reason, every connection opened ended one way, the plant's state bit for bit a twin's."""
    frames = interleave(_fuzz_session, random.Random(3938), 10000, senders=3)
    with fuzzed_run(frames) as (fuzzed, sent_back):
        total_received = 0
        seen = dict.fromkeys(etp.ETP_ABORT_REASONS.values(), 0)
        for node in fuzzed.j.nodes:
            c, a = node.etp.counts, node.etp.aborts_sent
            mine = [(fid, d) for fid, d in frames
                    if fid & 0xFF != node.address and (fid >> 8 & 0xFF) in (node.address, 0xFF)]
            assert c["cm_received"] == sum(fid >> 16 & 0xFF == 0xC8 for fid, _ in mine)
            assert c["dt_received"] == sum(fid >> 16 & 0xFF == 0xC7 for fid, _ in mine)
            assert c["rts_received"] == sum(fid >> 16 & 0xFF == 0xC8 and fid >> 8 & 0xFF == node.address
                                            and len(d) == 8 and d[0] == 20 for fid, d in mine)
            cm_out = [d for fid, d in sent_back if fid & 0xFF == node.address and fid >> 16 & 0xFF == 0xC8]
            assert c["cts_sent"] == sum(d[0] == 21 for d in cm_out)
            assert c["eoma_sent"] == sum(d[0] == 23 for d in cm_out) == c["received"]
            for code, reason in etp.ETP_ABORT_REASONS.items():
                assert a[reason] == sum(d[0] == 255 and d[1] == code for d in cm_out), reason
            opened = c["rts_received"] - a["busy"] - a["resources"] - a["other"]
            ended = (c["received"] + c["rx_aborted_by_sender"] + c["rts_replaced"]
                     + sum(a[r] for r in ("timeout", "unexpected_dt", "bad_sequence", "duplicate_sequence",
                                          "unexpected_dpo", "bad_dpo_pgn", "dpo_beyond_cts", "bad_dpo_offset")))
            assert opened == ended and node.etp.status()["receiving"] == 0
            assert c["received"] == node.counts["tp_messages_received"]
            total_received += c["received"]
            for reason, n in a.items():
                seen[reason] += n
            assert node.state == "claimed"
        assert total_received > 0 and len(frames) == 10000
        assert all(seen[r] > 0 for r in ("busy", "resources", "timeout", "unexpected_dt", "bad_sequence",
                                         "duplicate_sequence", "unexpected_dpo", "bad_dpo_pgn", "dpo_beyond_cts",
                                         "bad_dpo_offset", "other")), seen


def test_etp_over_the_bus_to_the_rest_bus_and_its_status():
    """A sender on the rest-bus's virtual bus sends 2000 bytes to the engine by ETP, window by window as the
    engine's CTS ask (plant time standing): the EndOfMsgAck on the bus, the message in the status by its size
    and SHA-256 (not its bytes: longer than TP's 1785), the etp counters in the status."""
    import hashlib

    r = Rest()
    bus = can.Bus(interface="virtual", channel=r.channel)
    payload = random.Random(4).randbytes(2000)  # 286 packets
    try:
        r.run(300)
        bus.send(can.Message(arbitration_id=rts(2000)[0], is_extended_id=True, data=rts(2000)[1]))
        eoma, pumps = None, 0
        while eoma is None:
            pumps += 1
            assert pumps < 100_000, "no EndOfMsgAck"
            r.j.pump(0)
            for m in iter(lambda: bus.recv(0.0), None):
                if m.arbitration_id != 0x1CC80300:
                    continue
                d = bytes(m.data)
                assert d[0] in (21, 23), d
                if d[0] == 23:
                    eoma = d
                    break
                n, first = d[1], int.from_bytes(d[2:5], "little")
                for fid, data in [dpo(n, first - 1)] + [dt(k, payload[7 * (first - 2 + k):7 * (first - 1 + k)])
                                                         for k in range(1, n + 1)]:
                    bus.send(can.Message(arbitration_id=fid, is_extended_id=True, data=data))
        assert eoma == bytes((23,)) + (2000).to_bytes(4, "little") + pgn3(PROP_A)
        st = r.j.status()["nodes"]["engine"]
        assert st["received"][str(PROP_A)] == f"2000 bytes, sha256 {hashlib.sha256(payload).hexdigest()}"
        assert (st["etp"]["received"], st["etp"]["cts_sent"], st["etp"]["dt_received"]) == (1, 18, 286)
        assert r.j.engine.received[PROP_A] == payload
    finally:
        bus.shutdown()
        r.j.close()
