"""J1939-21 extended transport protocol (ETP) of one emulated node: messages of more than 1785 bytes, to one address.

ETP is the RTS/CTS connection of :mod:`io_adapters.can.j1939_tp` made
for long messages, never broadcast.  Its connection management goes as
ETP.CM (PGN 51200, 0xC800), its packets as ETP.DT (PGN 50944, 0xC700):

* RTS (control byte 20): the message size in bytes 2-5, the PGN in 6-8;
* CTS (21): how many packets the receiver takes next (byte 2, 0 holds the
  connection) and the number of the first of them (bytes 3-5);
* DPO, data packet offset (22): before each window the sender says how many
  packets follow (byte 2) and the offset they count from (bytes 3-5, the
  packet number before the first); a packet's sequence number (byte 1 of
  ETP.DT, 1..255) counts from that offset, so 255 packets go per window
  and up to 16 777 215 packets per message;
* EndOfMsgAck (23): the size received (bytes 2-5);
* Connection Abort (255): a reason (byte 2), as for TP.

Reasons the node sends: 1 ``busy`` (an RTS for another PGN from a sender
whose connection runs, or more than :data:`MAX_ETP_RX` senders), 2
``resources`` (a message over :data:`ETP_MAX_BYTES`, or the node gives its
connections up), 3 ``timeout``, 6 ``unexpected_dt`` (a packet before its
DPO), 7 ``bad_sequence``, 8 ``duplicate_sequence``, 9 ``unexpected_dpo`` (a
DPO while packets of the last one are still due), 10 ``bad_dpo_pgn``, 11
``dpo_beyond_cts`` (a DPO for more packets than the CTS allowed), 12
``bad_dpo_offset`` (not the packet the CTS asked for), 14 ``bad_cts_pgn``,
15 ``cts_beyond_message`` (a CTS for packets past the end), 250 ``other``
(an RTS of 1785 bytes or fewer: that is TP's job).

Timeouts as TP (J1939-21, plant time): T1 750 ms between packets, T2 1250
ms from a CTS to its DPO and packets, T3 1250 ms from the RTS or the last
packet sent to a CTS or the EndOfMsgAck, T4 1050 ms of hold.

Bounds: :data:`MAX_ETP_RX` connections received and one sent per address
at once; :data:`ETP_MAX_BYTES` per message either way (the protocol allows
117 MB; the nodes keep what they receive, so the bound is a memory bound).
A transfer to an address whose connection is busy is refused and counted
(``tx_busy``), not queued.
"""

from __future__ import annotations

from .j1939_tp import CTS_WINDOW, T1_MS, T2_MS, T3_MS, T4_MS, TP_MAX_BYTES, Owner, _frame_id, _pgn3

PGN_ETP_CM = 0xC800  # 51200
PGN_ETP_DT = 0xC700  # 50944
ETP_RTS, ETP_CTS, ETP_DPO, ETP_EOMA, ETP_ABORT = 20, 21, 22, 23, 255
ETP_MAX_BYTES = 65536  # per message, both ways (module docstring)
ETP_WINDOW = CTS_WINDOW  # packets this node asks for per CTS
MAX_ETP_RX = 2  # ETP connections received at once

ETP_ABORT_REASONS = {1: "busy", 2: "resources", 3: "timeout", 4: "cts_while_dt", 5: "retransmit_limit",
                     6: "unexpected_dt", 7: "bad_sequence", 8: "duplicate_sequence", 9: "unexpected_dpo",
                     10: "bad_dpo_pgn", 11: "dpo_beyond_cts", 12: "bad_dpo_offset", 14: "bad_cts_pgn",
                     15: "cts_beyond_message", 250: "other"}


def _cm(source: int, destination: int, data: bytes) -> tuple[int, bytes]:
    return _frame_id(PGN_ETP_CM, source, destination, 7), data


def _abort(source: int, destination: int, code: int, pgn: int) -> tuple[int, bytes]:
    return _cm(source, destination, bytes((ETP_ABORT, code, 0xFF, 0xFF, 0xFF)) + _pgn3(pgn))


class _Conn:
    """One ETP connection, either way: the message, its packets, the window, the deadline (plant ms)."""

    def __init__(self, pgn: int, size: int, deadline_ms: float, data: bytes = b""):
        self.pgn, self.size, self.data = pgn, size, data
        self.packets = (size + 6) // 7
        self.buf = bytearray()  # received so far
        self.window = 0  # packets of the current DPO (receiving) / CTS (for the DPO check)
        self.offset = 0  # packets before the current window
        self.seq = 0  # receiving: the last sequence number of this window received; 0 awaits a DPO
        self.allowed = 0  # receiving: packets the last CTS allowed
        self.deadline_ms = deadline_ms


class ExtendedTransport:
    """ETP of one node (module docstring): frames in, frames out, time passed in; no clock of its own."""

    COUNT_KEYS = ("cm_received", "dt_received", "rts_received", "rts_replaced", "cts_sent", "dpo_received",
                  "eoma_sent", "received", "rts_sent", "dpo_sent", "sent", "packets_sent", "rx_aborted_by_sender",
                  "tx_aborted_by_receiver", "timeouts", "unexpected_dt", "unexpected_cm", "malformed_cm", "tx_busy",
                  "tx_too_big")

    def __init__(self, owner: Owner):
        self.owner = owner
        self.rx: dict[int, _Conn] = {}  # by sender
        self.tx: dict[int, _Conn] = {}  # by destination
        self.counts = dict.fromkeys(self.COUNT_KEYS, 0)
        self.aborts_sent = {r: 0 for r in ETP_ABORT_REASONS.values()}

    def _abort_out(self, peer: int, code: int, pgn: int) -> list:
        self.aborts_sent[ETP_ABORT_REASONS[code]] += 1
        return [_abort(self.owner.address, peer, code, pgn)]

    # -- sending ---------------------------------------------------------------------------------------
    def send(self, pgn: int, destination: int, now_ms: float, requests: int = 0) -> list:
        """Send the owner's ``pgn`` (more than 1785 bytes) to ``destination``: the RTS, the rest on its CTS."""
        if destination in self.tx:
            self.counts["tx_busy"] += 1
            return []
        data = self.owner.tp_payload(pgn)
        if data is None:
            return []
        if len(data) > ETP_MAX_BYTES:
            self.counts["tx_too_big"] += 1
            return []
        self.owner.tp_started(pgn, requests)
        self.tx[destination] = _Conn(pgn, len(data), now_ms + T3_MS, bytes(data))
        self.counts["rts_sent"] += 1
        return [_cm(self.owner.address, destination, bytes((ETP_RTS,)) + len(data).to_bytes(4, "little")
                    + _pgn3(pgn))]

    def _on_cts(self, sa: int, data: bytes, pgn: int, now_ms: float) -> list:
        s = self.tx.get(sa)
        if s is None:
            self.counts["unexpected_cm"] += 1
            return []
        if pgn != s.pgn:
            del self.tx[sa]
            return self._abort_out(sa, 14, s.pgn)
        n, first = data[1], int.from_bytes(data[2:5], "little")
        if n == 0:  # hold (J1939-21): the next CTS within T4
            s.deadline_ms = now_ms + T4_MS
            return []
        if first < 1 or first + n - 1 > s.packets:
            del self.tx[sa]
            return self._abort_out(sa, 15, s.pgn)
        src = self.owner.address
        out = [_cm(src, sa, bytes((ETP_DPO, n)) + (first - 1).to_bytes(3, "little") + _pgn3(s.pgn))]
        self.counts["dpo_sent"] += 1
        for k in range(n):
            chunk = s.data[7 * (first - 1 + k):7 * (first + k)]
            out.append((_frame_id(PGN_ETP_DT, src, sa, 7), bytes((k + 1,)) + chunk + b"\xff" * (7 - len(chunk))))
        self.counts["packets_sent"] += n
        s.deadline_ms = now_ms + T3_MS
        return out

    # -- receiving -------------------------------------------------------------------------------------
    def on_cm(self, sa: int, da: int, data: bytes, now_ms: float) -> list:
        """An ETP.CM frame from ``sa`` to ``da``."""
        self.counts["cm_received"] += 1
        if len(data) != 8:
            self.counts["malformed_cm"] += 1
            return []
        if da == 0xFF:  # ETP is never broadcast
            self.counts["unexpected_cm"] += 1
            return []
        ctrl, pgn = data[0], int.from_bytes(data[5:8], "little")
        if ctrl == ETP_RTS:
            return self._on_rts(sa, data, pgn, now_ms)
        if ctrl == ETP_CTS:
            return self._on_cts(sa, data, pgn, now_ms)
        if ctrl == ETP_DPO:
            return self._on_dpo(sa, data, pgn, now_ms)
        if ctrl == ETP_EOMA:
            s = self.tx.get(sa)
            if s is None or s.pgn != pgn:
                self.counts["unexpected_cm"] += 1
                return []
            del self.tx[sa]
            self.counts["sent"] += 1
            return []
        if ctrl == ETP_ABORT:
            for table, key in ((self.rx, "rx_aborted_by_sender"), (self.tx, "tx_aborted_by_receiver")):
                if sa in table and table[sa].pgn == pgn:
                    del table[sa]
                    self.counts[key] += 1
                    return []
            self.counts["unexpected_cm"] += 1
            return []
        self.counts["malformed_cm"] += 1
        return []

    def _on_rts(self, sa: int, data: bytes, pgn: int, now_ms: float) -> list:
        self.counts["rts_received"] += 1
        size = int.from_bytes(data[1:5], "little")
        old = self.rx.get(sa)
        code = 250 if size <= TP_MAX_BYTES else 2 if size > ETP_MAX_BYTES else 0
        if not code and old is not None and old.pgn != pgn:
            code = 1  # one connection per sender: the running one goes on
        elif not code and old is None and len(self.rx) >= MAX_ETP_RX:
            code = 1
        if code:
            return self._abort_out(sa, code, pgn)
        self.counts["rts_replaced"] += old is not None  # the same PGN again: the newer RTS replaces the older
        s = self.rx[sa] = _Conn(pgn, size, now_ms + T2_MS)
        return self._cts(sa, s)

    def _cts(self, sa: int, s: _Conn) -> list:
        s.allowed = min(ETP_WINDOW, s.packets - s.offset)
        s.seq, s.window = 0, 0
        self.counts["cts_sent"] += 1
        return [_cm(self.owner.address, sa, bytes((ETP_CTS, s.allowed)) + (s.offset + 1).to_bytes(3, "little")
                    + _pgn3(s.pgn))]

    def _on_dpo(self, sa: int, data: bytes, pgn: int, now_ms: float) -> list:
        s = self.rx.get(sa)
        if s is None:
            self.counts["unexpected_cm"] += 1
            return []
        self.counts["dpo_received"] += 1
        n, offset = data[1], int.from_bytes(data[2:5], "little")
        code = (9 if s.window else 10 if pgn != s.pgn else 11 if not 1 <= n <= s.allowed
                else 12 if offset != s.offset else 0)
        if code:
            del self.rx[sa]
            return self._abort_out(sa, code, s.pgn)
        s.window = n
        s.deadline_ms = now_ms + T1_MS
        return []

    def on_dt(self, sa: int, da: int, data: bytes, now_ms: float) -> list:
        """An ETP.DT frame from ``sa`` to ``da``."""
        self.counts["dt_received"] += 1
        s = self.rx.get(sa) if da != 0xFF else None
        if s is None or len(data) != 8:
            self.counts["unexpected_dt"] += 1
            return []
        if not s.window:  # no DPO yet for these packets
            del self.rx[sa]
            return self._abort_out(sa, 6, s.pgn)
        if data[0] != s.seq + 1:
            del self.rx[sa]
            return self._abort_out(sa, 8 if data[0] == s.seq else 7, s.pgn)
        s.buf += data[1:]
        s.seq += 1
        s.deadline_ms = now_ms + T1_MS
        if s.seq < s.window:
            return []
        s.offset += s.window
        if s.offset < s.packets:  # the next window
            s.deadline_ms = now_ms + T2_MS
            return self._cts(sa, s)
        del self.rx[sa]
        self.counts["received"] += 1
        self.counts["eoma_sent"] += 1
        out = [_cm(self.owner.address, sa, bytes((ETP_EOMA,)) + s.size.to_bytes(4, "little") + _pgn3(s.pgn))]
        return out + self.owner.tp_deliver(s.pgn, bytes(s.buf[:s.size]), sa, da, now_ms)

    # -- time ------------------------------------------------------------------------------------------
    def poll(self, now_ms: float) -> list:
        """Every timeout, each ending its connection with an abort (reason 3)."""
        out = []
        for table in (self.rx, self.tx):
            for peer in [p for p, s in table.items() if now_ms > s.deadline_ms]:
                self.counts["timeouts"] += 1
                out += self._abort_out(peer, 3, table.pop(peer).pgn)
        return out

    def reset(self) -> None:
        """Forget every connection (the node gave up its address)."""
        self.rx.clear()
        self.tx.clear()

    def give_up(self) -> list:
        """Abort every connection with reason 2 (resources needed elsewhere), then :meth:`reset`."""
        out = []
        for table in (self.rx, self.tx):
            for peer, s in table.items():
                out += self._abort_out(peer, 2, s.pgn)
        self.reset()
        return out

    def status(self) -> dict:
        return {**self.counts, "aborts_sent": dict(self.aborts_sent), "receiving": len(self.rx),
                "sending": len(self.tx)}
