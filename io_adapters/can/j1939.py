"""SAE J1939 essentials for the rest-bus nodes the bench plays: identifiers, address claim, requests, DM1.

Pure protocol state machines, no bus and no clock of their own: a node is
fed the frames it receives (:meth:`Node.on_frame`) and polled with the time
(:meth:`Node.poll`), and both return the frames to send as ``(arbitration
ID, payload)`` pairs.  The adapter drives them between ticks, never in the
real-time tick.

Identifiers (J1939-21): 29 bits, ``priority (3) | EDP (1) | DP (1) | PF (8)
| PS (8) | SA (8)``.  A PDU1 group (PF < 240) is sent to a destination
address in PS, and its PGN has PS = 0; a PDU2 group (PF >= 240) is a
broadcast whose PGN includes PS.

Address claim (J1939-81): each node claims its preferred address with its
64-bit NAME at start-up, answers a request for PGN 60928 with its claim and,
when another node claims the same address, compares NAMEs: the lower NAME
wins; the winner repeats its claim, a loser that cannot take another address
(the nodes here are not arbitrary-address capable) sends *cannot claim*
(its NAME from the null address 254) and goes silent.  It answers a request
for PGN 60928 with *cannot claim* after a pseudo-random 0..153 ms, and
claims its address again when nobody claimed it within 250 ms of a global
such request (the winner is gone), or at a commanded address (PGN 65240).

Requests (J1939-21, PGN 59904): a node answers a request addressed to it or
to everyone for a PGN it owns; for a PGN it does not own, a request
addressed to it alone gets a NACK (acknowledgement PGN 59392, control byte
1), a global one is not answered.

DM1 (J1939-73, PGN 65226): lamp status and the active DTCs, every second.
Up to one DTC fits a single frame; more go by the transport protocol
(:mod:`io_adapters.can.j1939_tp`): by BAM to everyone, by RTS/CTS to a
node that asked this node alone.  The transport also reassembles what
other nodes send to this node (RTS/CTS) or to everyone (BAM) and hands it
to :meth:`Node.on_message`.  A message of more than 1785 bytes goes, and
comes, by the extended transport protocol to one address
(:mod:`io_adapters.can.j1939_etp`); it cannot be broadcast.
"""

from __future__ import annotations

from typing import Callable

from . import j1939_dm as dm
from .j1939_dm import Dm1, dtc_bytes  # noqa: F401  (the DTC memory, here for the nodes' users)
from .j1939_etp import PGN_ETP_CM, PGN_ETP_DT, ExtendedTransport
from .j1939_tp import PGN_TP_CM, PGN_TP_DT, TP_MAX_BYTES, Transport

PGN_TSC1 = 0x0000
PGN_TC1 = 0x0100
PGN_ACK = 0xE800  # 59392
PGN_REQUEST = 0xEA00  # 59904
PGN_ADDRESS_CLAIMED = 0xEE00  # 60928
PGN_ETC1 = 0xF002
PGN_EEC2 = 0xF003
PGN_EEC1 = 0xF004
PGN_ETC2 = 0xF005
PGN_DM1 = dm.PGN_DM1
PGN_CCVS1 = 0xFEF1  # 65265
ADDR_NULL = 254
ADDR_GLOBAL = 255
MAX_KEPT_PGNS = 16  # PGNs whose last reassembled message a node keeps
CLAIM_WAIT_MS = 250  # a claim stands when no contending claim came within 250 ms (J1939-81)

Frame = tuple[int, bytes]


def frame_id(priority: int, pgn: int, source: int, destination: int = ADDR_GLOBAL) -> int:
    """The 29-bit identifier of ``pgn`` from ``source`` (to ``destination`` if the PGN is PDU1)."""
    pf = (pgn >> 8) & 0xFF
    ps = (destination if pf < 240 else pgn) & 0xFF
    return ((priority & 7) << 26) | (((pgn >> 16) & 3) << 24) | (pf << 16) | (ps << 8) | (source & 0xFF)


def parse_id(arbitration_id: int) -> tuple[int, int, int, int]:
    """(priority, PGN, destination, source) of a 29-bit identifier (destination 255 for PDU2 groups)."""
    pf = (arbitration_id >> 16) & 0xFF
    ps = (arbitration_id >> 8) & 0xFF
    dp = (arbitration_id >> 24) & 3
    if pf < 240:
        return (arbitration_id >> 26) & 7, (dp << 16) | (pf << 8), ps, arbitration_id & 0xFF
    return (arbitration_id >> 26) & 7, (dp << 16) | (pf << 8) | ps, ADDR_GLOBAL, arbitration_id & 0xFF


def name_pack(identity: int, manufacturer: int, function: int, *, ecu_instance: int = 0, function_instance: int = 0,
              vehicle_system: int = 0, vehicle_system_instance: int = 0, industry_group: int = 0,
              arbitrary_address_capable: bool = False) -> int:
    """The 64-bit NAME (J1939-81) from its fields; sent little-endian in the address claim."""
    return ((identity & 0x1FFFFF) | ((manufacturer & 0x7FF) << 21) | ((ecu_instance & 7) << 32)
            | ((function_instance & 0x1F) << 35) | ((function & 0xFF) << 40) | ((vehicle_system & 0x7F) << 49)
            | ((vehicle_system_instance & 0xF) << 56) | ((industry_group & 7) << 60)
            | (int(bool(arbitrary_address_capable)) << 63))


class Node:
    """One emulated J1939 node: its address claim, the requests it answers, its DM1, its transport (docstring).

    ``owned`` maps each PGN the node answers requests for to a function giving
    ``(priority, payload)``; a payload longer than 8 bytes goes by the
    transport protocol (BAM to everyone, RTS/CTS to a requester that asked
    this node alone).  ``claim_lost`` (a bench fault) makes the node behave
    as if a competing claim with a lower NAME had come in.
    """

    def __init__(self, label: str, name: int, address: int, owned: dict[int, Callable[[], tuple[int, bytes]]],
                 dm1: Dm1 | None = None, dm1_period_ms: float = 1000.0):
        self.label, self.name, self.address = label, name, address
        self.owned = dict(owned)
        self.dm1 = dm1
        self.dm1_period_ms = dm1_period_ms
        self.state = "off"  # off -> claiming -> claimed, or lost
        self.claim_ms = 0.0
        self.next_dm1_ms = 0.0
        self.tp = Transport(self)
        self.etp = ExtendedTransport(self)
        self.received: dict[int, bytes] = {}  # the last message of each PGN that came by the transport protocol
        self.dm1_suppressed = False  # a bench fault: no DM1 at all
        self.suspended_until_ms = -1.0  # DM13: no broadcast before this time
        self.cannot_claim_ms: float | None = None  # lost: when the delayed Cannot Claim goes
        self.reclaim_ms: float | None = None  # lost: when the address counts as free (nobody claimed it)
        self.held_lost = False  # a bench fault holds the address taken: no re-claim
        self.counts = {"claims_sent": 0, "contentions_won": 0, "requests_answered": 0, "nacks": 0,
                       "dm1_sent": 0, "tp_messages_received": 0, "received_not_kept": 0, "dm3_clears": 0,
                       "dm11_clears": 0, "dm13_stops": 0, "dm13_starts": 0, "commanded_address": 0,
                       "reclaims": 0, "too_long_to_broadcast": 0}

    @property
    def can_send(self) -> bool:
        return self.state == "claimed"

    def broadcasting(self, now_ms: float) -> bool:
        """The node sends its cyclic messages (claimed, and no DM13 stop holds)."""
        return self.state == "claimed" and now_ms >= self.suspended_until_ms

    def claim_frame(self) -> Frame:
        return frame_id(6, PGN_ADDRESS_CLAIMED, self.address, ADDR_GLOBAL), self.name.to_bytes(8, "little")

    def cannot_claim_frame(self) -> Frame:
        return frame_id(6, PGN_ADDRESS_CLAIMED, ADDR_NULL, ADDR_GLOBAL), self.name.to_bytes(8, "little")

    def start(self, now_ms: float) -> list[Frame]:
        """Power-up: claim the preferred address."""
        self.state = "claiming"
        self.claim_ms = now_ms
        self.next_dm1_ms = now_ms + CLAIM_WAIT_MS
        self.counts["claims_sent"] += 1
        return [self.claim_frame()]

    def lose_claim(self) -> list[Frame]:
        """Give the address up (not arbitrary-address capable): cannot claim from the null address."""
        self.state = "lost"
        self.tp.reset()
        self.etp.reset()
        self.reclaim_ms = None
        return [self.cannot_claim_frame()]

    @property
    def cannot_claim_delay_ms(self) -> float:
        """The pseudo-random 0 .. 153 ms before a Cannot Claim answers a request (J1939-81), from the NAME."""
        return float((self.name ^ self.name >> 21 ^ self.name >> 40) % 154)

    def on_frame(self, arbitration_id: int, data: bytes, now_ms: float) -> list[Frame]:
        """React to one received extended frame; returns the frames to send."""
        _, pgn, da, sa = parse_id(arbitration_id)
        if pgn == PGN_ADDRESS_CLAIMED and sa == self.address and self.state == "lost":
            self.reclaim_ms = None  # the address is still taken
            return []
        if pgn == PGN_ADDRESS_CLAIMED and sa == self.address and len(data) == 8:
            other = int.from_bytes(bytes(data), "little")
            if other == self.name:
                return []  # our own claim, echoed by the bus
            if self.name < other:
                self.counts["contentions_won"] += 1
                self.counts["claims_sent"] += 1
                return [self.claim_frame()]
            return self.lose_claim()
        if da not in (self.address, ADDR_GLOBAL) or sa == self.address:
            return []
        if pgn == PGN_REQUEST and len(data) >= 3:
            return self._answer(int.from_bytes(bytes(data[:3]), "little"), da, sa, now_ms)
        if not self.can_send and not (self.state == "lost" and da == ADDR_GLOBAL):
            return []  # a lost node still hears broadcasts (a commanded address comes by BAM), it sends nothing
        if pgn == PGN_TP_CM:
            return self.tp.on_cm(sa, da, bytes(data), now_ms)
        if pgn == PGN_TP_DT:
            return self.tp.on_dt(sa, da, bytes(data), now_ms)
        if pgn == PGN_ETP_CM:
            return self.etp.on_cm(sa, da, bytes(data), now_ms) if self.can_send else []
        if pgn == PGN_ETP_DT:
            return self.etp.on_dt(sa, da, bytes(data), now_ms) if self.can_send else []
        return self.on_message(pgn, bytes(data), sa, da, now_ms)

    def on_message(self, pgn: int, data: bytes, source: int, destination: int, now_ms: float) -> list[Frame]:
        """A whole message for this node (one frame, or reassembled): DM13 and the commanded address."""
        if pgn == dm.PGN_DM13:
            what = dm.dm13_command(data)
            if what == "stop":
                self.counts["dm13_stops"] += 1
                self.suspended_until_ms = now_ms + dm.dm13_duration_ms(data)
            elif what == "start":
                self.counts["dm13_starts"] += 1
                self.suspended_until_ms = -1.0
                self.next_dm1_ms = now_ms  # broadcasts resume now
            elif what == "hold" and now_ms < self.suspended_until_ms:
                self.suspended_until_ms = max(self.suspended_until_ms, now_ms + dm.DM13_HOLD_MS)
            return []
        if pgn == dm.PGN_COMMANDED_ADDRESS and len(data) >= 9 and int.from_bytes(data[:8], "little") == self.name:
            return self.command_address(data[8], now_ms)
        return []

    def command_address(self, address: int, now_ms: float) -> list[Frame]:
        """Move to ``address`` (J1939-81 commanded address): sessions aborted, then a claim of the new address."""
        if address > 253:
            return []
        self.counts["commanded_address"] += 1
        out = self.tp.give_up() + self.etp.give_up() if self.can_send else []
        self.tp.reset()
        self.etp.reset()
        self.address = address
        return out + self.start(now_ms)

    # -- the transport's side of the node (j1939_tp.Owner) -----------------------------------------------
    def tp_payload(self, pgn: int) -> bytes | None:
        """The data of ``pgn`` now (a transfer starts), None if the node no longer sends it."""
        if pgn == PGN_DM1:
            return self.dm1.payload() if self.dm1 is not None and not self.dm1_suppressed else None
        if pgn == dm.PGN_DM2:
            return self.dm1.dm2_payload() if self.dm1 is not None else None
        f = self.owned.get(pgn)
        return f()[1] if f is not None else None

    def tp_started(self, pgn: int, requests: int) -> None:
        """A transfer of ``pgn`` that answers ``requests`` requests went out: they count as answered now."""
        self.counts["requests_answered"] += requests
        if pgn == PGN_DM1:
            self.counts["dm1_sent"] += 1

    def tp_deliver(self, pgn: int, data: bytes, source: int, destination: int, now_ms: float) -> list[Frame]:
        """A message the transport reassembled: kept (the last of each PGN, at most 16 PGNs), then handled."""
        self.counts["tp_messages_received"] += 1
        if pgn in self.received or len(self.received) < MAX_KEPT_PGNS:
            self.received[pgn] = data
        else:
            self.counts["received_not_kept"] += 1
        return self.on_message(pgn, data, source, destination, now_ms)

    # -- requests ------------------------------------------------------------------------------------------
    def _answer(self, requested: int, da: int, requester: int, now_ms: float) -> list[Frame]:
        if requested == PGN_ADDRESS_CLAIMED:
            self.counts["requests_answered"] += 1
            if self.state != "lost":
                return [self.claim_frame()]
            # J1939-81: Cannot Claim after a pseudo-random delay (several such answers do not collide); the
            # answers to this request show whether the address is still taken: if nobody claims it, re-claim
            self.cannot_claim_ms = now_ms + self.cannot_claim_delay_ms
            if da == ADDR_GLOBAL and not self.held_lost:
                self.reclaim_ms = now_ms + CLAIM_WAIT_MS
            return []
        if not self.can_send:
            return []
        # J1939-21: the answer to a request for this node alone goes to the requester (RTS/CTS if long)
        to = requester if da == self.address else ADDR_GLOBAL
        if requested in self.owned:
            prio, payload = self.owned[requested]()
            return self._send_message(requested, prio, payload, to, now_ms, requests=1)
        if requested == PGN_DM1 and self.dm1 is not None and not self.dm1_suppressed:
            return self._send_message(PGN_DM1, 6, self.dm1.payload(), to, now_ms, requests=1)
        if requested == dm.PGN_DM2 and self.dm1 is not None:
            return self._send_message(dm.PGN_DM2, 6, self.dm1.dm2_payload(), to, now_ms, requests=1)
        if requested in (dm.PGN_DM3, dm.PGN_DM11) and self.dm1 is not None:
            if requested == dm.PGN_DM3:
                self.dm1.previous.clear()
                self.counts["dm3_clears"] += 1
            else:
                self.dm1.dtcs.clear()
                self.counts["dm11_clears"] += 1
                self.on_dtcs_cleared()
            self.counts["requests_answered"] += 1
            # J1939-73: a clear requested of this node alone is acknowledged positively, a global one is not
            return self.ack(0, requested, requester) if da == self.address else []
        if da == self.address:  # J1939-21: a destination-specific request for an unknown PGN is NACKed
            return self.nack(requested, requester)
        return []

    def nack(self, pgn: int, requester: int) -> list[Frame]:
        """The negative acknowledgement of a request for ``pgn`` (PGN 59392, control byte 1)."""
        self.counts["nacks"] += 1
        return self.ack(1, pgn, requester)

    def ack(self, control: int, pgn: int, requester: int) -> list[Frame]:
        """An acknowledgement (PGN 59392): control byte 0 positive, 1 negative; to everyone (J1939-21)."""
        data = bytes((control, 0xFF, 0xFF, 0xFF, requester, pgn & 0xFF, (pgn >> 8) & 0xFF, (pgn >> 16) & 0xFF))
        return [(frame_id(6, PGN_ACK, self.address, ADDR_GLOBAL), data)]

    def on_dtcs_cleared(self) -> None:
        """DM11 cleared the active DTCs; the adapter re-raises those whose cause (a fault) is still there."""

    def _send_message(self, pgn: int, priority: int, payload: bytes, to: int, now_ms: float,
                      requests: int = 0) -> list[Frame]:
        """``payload`` in one frame, or by the transport protocol when longer than 8 bytes (queued if busy)."""
        if len(payload) > TP_MAX_BYTES:  # the extended transport, to one address only
            if to == ADDR_GLOBAL:
                self.counts["too_long_to_broadcast"] += 1
                return []
            return self.etp.send(pgn, to, now_ms, requests)
        if len(payload) > 8:
            return self.tp.send(pgn, to, now_ms, requests)
        self.tp_started(pgn, requests)
        return [(frame_id(priority, pgn, self.address, to), payload)]

    def poll(self, now_ms: float) -> list[Frame]:
        """Time-driven work: the claim standing after 250 ms, the DM1 cycle, the transport's packets and timeouts."""
        out: list[Frame] = []
        if self.state == "claiming" and now_ms - self.claim_ms >= CLAIM_WAIT_MS:
            self.state = "claimed"
        if self.state == "lost":
            if self.cannot_claim_ms is not None and now_ms >= self.cannot_claim_ms:
                self.cannot_claim_ms = None
                out.append(self.cannot_claim_frame())
            if self.reclaim_ms is not None and now_ms >= self.reclaim_ms and not self.held_lost:
                self.reclaim_ms = None
                self.counts["reclaims"] += 1
                out += self.start(now_ms)
            else:
                out += self.tp.poll(now_ms)  # only broadcasts are received while lost: their timeouts, no frame
        if not self.can_send:
            return out
        out += self.tp.poll(now_ms) + self.etp.poll(now_ms)
        if self.dm1 is not None and not self.dm1_suppressed and now_ms >= self.next_dm1_ms \
                and now_ms >= self.suspended_until_ms:
            self.next_dm1_ms = now_ms + self.dm1_period_ms
            out += self._send_message(PGN_DM1, 6, self.dm1.payload(), ADDR_GLOBAL, now_ms)
        return out


def dbc_table_markdown(dbc_name: str) -> str:
    """Markdown tables of a J1939 DBC (for docs/can.md): parameter groups, then signals with their SPNs."""
    import cantools
    from cantools import j1939 as cj

    from plant_models.config import resolve_config

    path = resolve_config(dbc_name)
    db = cantools.database.load_file(str(path), strict=True)
    lines = [f"Generated from `configs/{path.name}`.", "",
             "| message | PGN | priority | source | destination | ID | DLC | cycle, ms | sender |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for m in db.messages:
        prio, pgn, da, sa = parse_id(m.frame_id)
        if cj.pgn_from_frame_id(m.frame_id) != pgn:  # the same reading as cantools', or the DBC is no J1939 set
            raise ValueError(f"{path.name}: {m.name}: PGN {pgn} here, {cj.pgn_from_frame_id(m.frame_id)} in cantools")
        dest = "global" if da == ADDR_GLOBAL else f"0x{da:02X}"
        lines.append(f"| {m.name} | {pgn} (0x{pgn:04X}) | {prio} | 0x{sa:02X} | {dest} | 0x{m.frame_id:08X} | "
                     f"{m.length} | {m.cycle_time or 'on request / event'} | {', '.join(m.senders)} |")
    lines += ["", "| message | signal | SPN | bits (start\\|length) | factor, offset | range | unit |",
              "| --- | --- | --- | --- | --- | --- | --- |"]
    for m in db.messages:
        for s in m.signals:
            rng = f"{s.minimum:g} .. {s.maximum:g}" if s.minimum is not None and s.maximum is not None else ""
            lines.append(f"| {m.name} | {s.name} | {s.spn or ''} | {s.start}\\|{s.length} | {s.scale:g}, "
                         f"{s.offset:g} | {rng} | {s.unit or ''} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    import sys

    for arg in sys.argv[1:] or ["powershift_j1939.dbc"]:
        sys.stdout.write(dbc_table_markdown(arg))
