"""J1939-21 transport protocol of one emulated node: BAM and RTS/CTS, sending and receiving.

A message of 9 to 1785 bytes goes as a connection-management frame
(TP.CM, PGN 60416) and data packets (TP.DT, PGN 60160) of a sequence
number and 7 bytes, the last padded with 0xFF:

* **BAM** (broadcast, control byte 32): the announcement, then the packets
  50 ms apart; no handshake.  A node sends one BAM at a time.
* **RTS/CTS** (to one address): the sender's RTS (16: size, packets, the
  most packets per CTS, PGN), the receiver's CTS (17: how many packets,
  from which), those packets, further CTS, and the receiver's
  EndOfMsgAck (19).  Either side may send a Connection Abort (255, with a
  reason).  One session per pair of addresses and direction.

Timeouts (J1939-21, in ms of plant time, so a lockstep run is
deterministic): T1 750 between packets, T2 1250 from a CTS to its first
packet, T3 1250 from the last packet sent (or the RTS) to a CTS or the
EndOfMsgAck, T4 1050 from a CTS of 0 packets (hold) to the next CTS.

Sizes are bounded: at most :data:`MAX_RX_SESSIONS` connections and
:data:`MAX_BAM_RX` broadcasts received at once, :data:`TP_MAX_BYTES` per
message, :data:`MAX_TX_QUEUE` transfers waiting to be sent.  No state
machine here reads a clock; the node passes the time in.
"""

from __future__ import annotations

from typing import Protocol

TP_RTS, TP_CTS, TP_EOMA, TP_BAM, TP_ABORT = 16, 17, 19, 32, 255
PGN_TP_DT = 0xEB00  # 60160
PGN_TP_CM = 0xEC00  # 60416
ADDR_GLOBAL = 255
TP_MAX_BYTES = 1785  # 255 packets of 7 bytes
BAM_PACKET_MS = 50  # TP.DT spacing of a BAM (J1939-21: 50 .. 200 ms)
T1_MS, T2_MS, T3_MS, T4_MS = 750.0, 1250.0, 1250.0, 1050.0
CTS_WINDOW = 16  # packets this node allows per CTS
MAX_RX_SESSIONS = 4  # RTS/CTS connections received at once
MAX_BAM_RX = 8  # broadcasts received at once (one per sender)
MAX_TX_QUEUE = 8  # transfers waiting behind a running one

# Connection Abort reasons (J1939-21 table of control byte 255); the ones this node sends are marked
ABORT_REASONS = {1: "busy",  # sent: already in a session with the sender, or at MAX_RX_SESSIONS
                 2: "resources",  # sent: the node gives its sessions up (its address changes)
                 3: "timeout",  # sent: T1, T2, T3 or T4 ran out
                 4: "cts_while_dt", 5: "retransmit_limit", 6: "unexpected_dt",
                 7: "bad_sequence",  # sent: a packet out of order
                 8: "duplicate_sequence",  # sent: the previous packet again
                 9: "too_big",  # sent: an RTS for more than 1785 bytes
                 250: "other"}  # sent: an RTS whose size and packet count disagree, a CTS beyond the message


class Owner(Protocol):
    """What the transport needs of its node."""

    address: int

    def tp_payload(self, pgn: int) -> bytes | None: ...

    def tp_started(self, pgn: int, requests: int) -> None: ...

    def tp_deliver(self, pgn: int, data: bytes, source: int, destination: int, now_ms: float) -> list: ...


def _cm_id(source: int, destination: int) -> int:
    return (7 << 26) | (PGN_TP_CM << 8) | ((destination & 0xFF) << 8) | (source & 0xFF)


def _dt_id(source: int, destination: int) -> int:
    return (7 << 26) | (PGN_TP_DT << 8) | ((destination & 0xFF) << 8) | (source & 0xFF)


def _pgn3(pgn: int) -> bytes:
    return bytes((pgn & 0xFF, (pgn >> 8) & 0xFF, (pgn >> 16) & 0xFF))


def _packet(data: bytes, k: int) -> bytes:
    chunk = data[7 * (k - 1):7 * k]
    return bytes((k,)) + chunk + b"\xff" * (7 - len(chunk))


class _Tx:
    """One transfer being sent: a BAM (``destination`` 255) or an RTS/CTS connection."""

    def __init__(self, pgn: int, data: bytes, destination: int, due_ms: float):
        self.pgn, self.data, self.destination = pgn, bytes(data), destination
        self.packets = (len(self.data) + 6) // 7
        self.next_seq = 1  # BAM: the next packet to send
        self.due_ms = due_ms  # BAM: when the next packet goes; RTS/CTS: the deadline of T3/T4
        self.highest_sent = 0


class _Rx:
    """One message being received: its size, packets, PGN, the packets so far, the next expected."""

    def __init__(self, pgn: int, size: int, packets: int, window: int, deadline_ms: float):
        self.pgn, self.size, self.packets, self.window = pgn, size, packets, window
        self.buf = bytearray()
        self.expected = 1
        self.window_end = min(window, packets)  # the last packet of the current CTS
        self.deadline_ms = deadline_ms


class Transport:
    """The transport protocol of one node (module docstring); frames in, frames out, time passed in."""

    COUNT_KEYS = ("cm_received", "dt_received", "rts_received", "rts_replaced", "cts_sent", "eoma_sent",
                  "cmdt_received", "bam_received", "rts_sent", "cmdt_sent", "bam_sent", "packets_resent",
                  "rx_aborted_by_sender", "tx_aborted_by_receiver", "timeouts", "unexpected_dt", "unexpected_cm",
                  "malformed_cm", "bam_rx_busy", "queue_full")

    def __init__(self, owner: Owner):
        self.owner = owner
        self.rx: dict[int, _Rx] = {}  # RTS/CTS sessions by sender
        self.bam_rx: dict[int, _Rx] = {}  # BAMs by sender
        self.tx: dict[int, _Tx] = {}  # RTS/CTS sessions by destination
        self.bam: _Tx | None = None
        self.queue: list[list[int]] = []  # [PGN, destination, requests] waiting
        self.counts = dict.fromkeys(self.COUNT_KEYS, 0)
        self.aborts_sent = {r: 0 for r in ABORT_REASONS.values()}

    # -- sending ---------------------------------------------------------------------------------------
    def send(self, pgn: int, destination: int, now_ms: float, requests: int = 0) -> list:
        """Send the owner's ``pgn`` (its payload taken when the transfer starts) to ``destination``.

        Starts at once if the BAM (``destination`` 255) or the connection to
        ``destination`` is free, else waits in the queue; a transfer of the
        same PGN to the same destination already waiting takes the
        ``requests`` on instead.  A full queue drops it (``queue_full``).
        """
        busy = self.bam is not None if destination == ADDR_GLOBAL else destination in self.tx
        waiting = [e for e in self.queue if e[0] == pgn and e[1] == destination]
        if waiting:
            waiting[0][2] += requests
            return []
        if busy:
            if len(self.queue) >= MAX_TX_QUEUE:
                self.counts["queue_full"] += 1
                return []
            self.queue.append([pgn, destination, requests])
            return []
        return self._start(pgn, destination, now_ms, requests)

    def _start(self, pgn: int, destination: int, now_ms: float, requests: int) -> list:
        data = self.owner.tp_payload(pgn)
        if data is None:
            return []
        self.owner.tp_started(pgn, requests)
        src = self.owner.address
        if len(data) <= 8:  # it shrank meanwhile (e.g. DTCs cleared): one frame, as any short message
            return [(_frame_id(pgn, src, destination), data)]
        head = bytes((len(data) & 0xFF, len(data) >> 8, (len(data) + 6) // 7))
        if destination == ADDR_GLOBAL:
            self.bam = _Tx(pgn, data, ADDR_GLOBAL, now_ms + BAM_PACKET_MS)
            self.counts["bam_sent"] += 1
            return [(_cm_id(src, ADDR_GLOBAL), bytes((TP_BAM,)) + head + b"\xff" + _pgn3(pgn))]
        self.tx[destination] = _Tx(pgn, data, destination, now_ms + T3_MS)
        self.counts["rts_sent"] += 1
        return [(_cm_id(src, destination), bytes((TP_RTS,)) + head + b"\xff" + _pgn3(pgn))]

    def _next_queued(self, destination: int, now_ms: float) -> list:
        for k, (pgn, dest, requests) in enumerate(self.queue):
            if dest == destination:
                del self.queue[k]
                return self._start(pgn, dest, now_ms, requests)
        return []

    def _on_cts(self, sa: int, data: bytes, pgn: int, now_ms: float) -> list:
        s = self.tx.get(sa)
        if s is None or s.pgn != pgn:
            self.counts["unexpected_cm"] += 1
            return []
        n, first = data[1], data[2]
        if n == 0:  # hold the connection open (J1939-21): the next CTS within T4
            s.due_ms = now_ms + T4_MS
            return []
        if not 1 <= first <= s.packets:
            return self._abort_tx(sa, 250)
        last = min(first + n - 1, s.packets)
        self.counts["packets_resent"] += max(0, min(last, s.highest_sent) - first + 1)
        s.highest_sent = max(s.highest_sent, last)
        s.due_ms = now_ms + T3_MS
        return [(_dt_id(self.owner.address, sa), _packet(s.data, k)) for k in range(first, last + 1)]

    def _abort_tx(self, destination: int, code: int) -> list:
        s = self.tx.pop(destination)
        self.aborts_sent[ABORT_REASONS[code]] += 1
        return [(_cm_id(self.owner.address, destination), bytes((TP_ABORT, code, 0xFF, 0xFF, 0xFF)) + _pgn3(s.pgn))]

    # -- receiving -------------------------------------------------------------------------------------
    def on_cm(self, sa: int, da: int, data: bytes, now_ms: float) -> list:
        """A TP.CM frame from ``sa`` to ``da`` (this node or global)."""
        self.counts["cm_received"] += 1
        if len(data) != 8:
            self.counts["malformed_cm"] += 1
            return []
        ctrl, pgn = data[0], int.from_bytes(data[5:8], "little")
        if da == ADDR_GLOBAL:
            if ctrl == TP_BAM:
                return self._on_bam(sa, data, pgn, now_ms)
            self.counts["unexpected_cm"] += 1  # only a BAM is broadcast
            return []
        if ctrl == TP_RTS:
            return self._on_rts(sa, data, pgn, now_ms)
        if ctrl == TP_CTS:
            return self._on_cts(sa, data, pgn, now_ms)
        if ctrl == TP_EOMA:
            s = self.tx.get(sa)
            if s is None or s.pgn != pgn:
                self.counts["unexpected_cm"] += 1
                return []
            del self.tx[sa]
            self.counts["cmdt_sent"] += 1
            return self._next_queued(sa, now_ms)
        if ctrl == TP_ABORT:
            return self._on_abort(sa, pgn, now_ms)
        self.counts["malformed_cm"] += 1
        return []

    def _on_abort(self, sa: int, pgn: int, now_ms: float) -> list:
        if sa in self.rx and self.rx[sa].pgn == pgn:
            del self.rx[sa]
            self.counts["rx_aborted_by_sender"] += 1
            return []
        if sa in self.tx and self.tx[sa].pgn == pgn:
            del self.tx[sa]
            self.counts["tx_aborted_by_receiver"] += 1
            return self._next_queued(sa, now_ms)
        self.counts["unexpected_cm"] += 1
        return []

    def _size_refusal(self, size: int, packets: int) -> int:
        """0 if ``size`` bytes in ``packets`` packets can be received, else the abort reason."""
        if size > TP_MAX_BYTES:
            return 9
        return 0 if size >= 9 and packets == (size + 6) // 7 else 250

    def _on_rts(self, sa: int, data: bytes, pgn: int, now_ms: float) -> list:
        self.counts["rts_received"] += 1
        size, packets, most = data[1] | data[2] << 8, data[3], data[4]
        code = self._size_refusal(size, packets)
        old = self.rx.get(sa)
        if not code and old is not None and old.pgn != pgn:
            code = 1  # one connection per sender: the running one goes on
        elif not code and old is None and len(self.rx) >= MAX_RX_SESSIONS:
            code = 1
        if code:
            self.aborts_sent[ABORT_REASONS[code]] += 1
            return [(_cm_id(self.owner.address, sa), bytes((TP_ABORT, code, 0xFF, 0xFF, 0xFF)) + _pgn3(pgn))]
        # the same PGN again: the newer RTS replaces the older (J1939-21), no abort for the older
        self.counts["rts_replaced"] += old is not None
        s = self.rx[sa] = _Rx(pgn, size, packets, min(CTS_WINDOW, most or 255), now_ms + T2_MS)
        self.counts["cts_sent"] += 1
        return [(_cm_id(self.owner.address, sa), bytes((TP_CTS, s.window_end, 1, 0xFF, 0xFF)) + _pgn3(pgn))]

    def _on_bam(self, sa: int, data: bytes, pgn: int, now_ms: float) -> list:
        size, packets = data[1] | data[2] << 8, data[3]
        if self._size_refusal(size, packets):
            self.counts["malformed_cm"] += 1  # a BAM is never answered, not even with an abort
            return []
        if sa not in self.bam_rx and len(self.bam_rx) >= MAX_BAM_RX:
            self.counts["bam_rx_busy"] += 1
            return []
        self.bam_rx[sa] = _Rx(pgn, size, packets, packets, now_ms + T1_MS)  # a new BAM replaces an unfinished one
        return []

    def on_dt(self, sa: int, da: int, data: bytes, now_ms: float) -> list:
        """A TP.DT frame from ``sa`` to ``da``."""
        self.counts["dt_received"] += 1
        table = self.bam_rx if da == ADDR_GLOBAL else self.rx
        s = table.get(sa)
        if s is None or len(data) != 8:
            self.counts["unexpected_dt"] += 1
            return []
        if data[0] != s.expected or s.expected > s.window_end:
            del table[sa]
            if da == ADDR_GLOBAL:
                self.counts["unexpected_dt"] += 1
                return []
            code = 8 if data[0] == s.expected - 1 else 7
            self.aborts_sent[ABORT_REASONS[code]] += 1
            return [(_cm_id(self.owner.address, sa), bytes((TP_ABORT, code, 0xFF, 0xFF, 0xFF)) + _pgn3(s.pgn))]
        s.buf += data[1:]
        s.expected += 1
        s.deadline_ms = now_ms + T1_MS
        if s.expected <= s.packets:
            if s.expected <= s.window_end:
                return []
            s.window_end = min(s.expected + s.window - 1, s.packets)  # the next CTS
            s.deadline_ms = now_ms + T2_MS
            self.counts["cts_sent"] += 1
            return [(_cm_id(self.owner.address, sa),
                     bytes((TP_CTS, s.window_end - s.expected + 1, s.expected, 0xFF, 0xFF)) + _pgn3(s.pgn))]
        del table[sa]
        out = []
        if da == ADDR_GLOBAL:
            self.counts["bam_received"] += 1
        else:
            self.counts["cmdt_received"] += 1
            self.counts["eoma_sent"] += 1
            out.append((_cm_id(self.owner.address, sa),
                        bytes((TP_EOMA, s.size & 0xFF, s.size >> 8, s.packets, 0xFF)) + _pgn3(s.pgn)))
        return out + self.owner.tp_deliver(s.pgn, bytes(s.buf[:s.size]), sa, da, now_ms)

    # -- time ------------------------------------------------------------------------------------------
    def poll(self, now_ms: float) -> list:
        """The BAM's next packet when due, the queue, and every timeout (an abort for a connection)."""
        out = []
        for sa in [sa for sa, s in self.rx.items() if now_ms > s.deadline_ms]:
            pgn = self.rx.pop(sa).pgn
            self.counts["timeouts"] += 1
            self.aborts_sent["timeout"] += 1
            out.append((_cm_id(self.owner.address, sa), bytes((TP_ABORT, 3, 0xFF, 0xFF, 0xFF)) + _pgn3(pgn)))
        for sa in [sa for sa, s in self.bam_rx.items() if now_ms > s.deadline_ms]:
            del self.bam_rx[sa]
            self.counts["timeouts"] += 1
        for da in [da for da, s in self.tx.items() if now_ms > s.due_ms]:
            self.counts["timeouts"] += 1
            out += self._abort_tx(da, 3)
            out += self._next_queued(da, now_ms)
        b = self.bam
        if b is not None and now_ms >= b.due_ms:
            if b.next_seq <= b.packets:
                out.append((_dt_id(self.owner.address, ADDR_GLOBAL), _packet(b.data, b.next_seq)))
                b.next_seq += 1
                b.due_ms = now_ms + BAM_PACKET_MS
            else:  # 50 ms after the last packet the next BAM may start
                self.bam = None
                out += self._next_queued(ADDR_GLOBAL, now_ms)
        return out

    def reset(self) -> None:
        """Forget every transfer (the node gave up its address): nothing more is sent or answered."""
        self.rx.clear()
        self.bam_rx.clear()
        self.tx.clear()
        self.bam = None
        self.queue.clear()

    def give_up(self) -> list:
        """Abort every connection with reason 2 (resources needed elsewhere), then :meth:`reset`."""
        out = []
        for sa, s in self.rx.items():
            self.aborts_sent["resources"] += 1
            out.append((_cm_id(self.owner.address, sa), bytes((TP_ABORT, 2, 0xFF, 0xFF, 0xFF)) + _pgn3(s.pgn)))
        for da, s in self.tx.items():
            self.aborts_sent["resources"] += 1
            out.append((_cm_id(self.owner.address, da), bytes((TP_ABORT, 2, 0xFF, 0xFF, 0xFF)) + _pgn3(s.pgn)))
        self.reset()
        return out

    def status(self) -> dict:
        return {**self.counts, "aborts_sent": dict(self.aborts_sent), "receiving": len(self.rx) + len(self.bam_rx),
                "sending": len(self.tx) + (self.bam is not None), "queued": len(self.queue)}


def _frame_id(pgn: int, source: int, destination: int, priority: int = 6) -> int:
    pf = (pgn >> 8) & 0xFF
    ps = (destination if pf < 240 else pgn) & 0xFF
    return ((priority & 7) << 26) | (((pgn >> 16) & 3) << 24) | (pf << 16) | (ps << 8) | (source & 0xFF)
