"""SAE J1939 essentials for the rest-bus nodes the bench plays: identifiers, address claim, requests, DM1/BAM.

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
(its NAME from the null address 254) and goes silent.

Requests (J1939-21, PGN 59904): a node answers a request addressed to it or
to everyone for a PGN it owns; for a PGN it does not own, a request
addressed to it alone gets a NACK (acknowledgement PGN 59392, control byte
1), a global one is not answered.

DM1 (J1939-73, PGN 65226): lamp status and the active DTCs, every second.
Up to one DTC fits a single frame; more go by the broadcast announce message
(J1939-21 transport, BAM): a TP.CM frame (control byte 32) announces size,
packet count and PGN, then TP.DT packets of 7 bytes follow, 50 ms apart
(J1939-21 allows 50-200 ms), the last one padded with 0xFF.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

PGN_TSC1 = 0x0000
PGN_TC1 = 0x0100
PGN_ACK = 0xE800  # 59392
PGN_REQUEST = 0xEA00  # 59904
PGN_TP_DT = 0xEB00  # 60160
PGN_TP_CM = 0xEC00  # 60416
PGN_ADDRESS_CLAIMED = 0xEE00  # 60928
PGN_ETC1 = 0xF002
PGN_EEC2 = 0xF003
PGN_EEC1 = 0xF004
PGN_ETC2 = 0xF005
PGN_DM1 = 0xFECA  # 65226
PGN_CCVS1 = 0xFEF1  # 65265
ADDR_NULL = 254
ADDR_GLOBAL = 255
TP_BAM = 32  # TP.CM control byte of a broadcast announce message
BAM_PACKET_MS = 50  # TP.DT spacing of a BAM (J1939-21: 50 .. 200 ms)
MAX_BAM_QUEUE = 4  # transfers waiting behind a running BAM (one per PGN)
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


def dtc_bytes(spn: int, fmi: int, occurrences: int) -> bytes:
    """One DTC of DM1 (J1939-73, SPN conversion method 0): SPN low, mid, (SPN high 3 bits | FMI), OC."""
    return bytes((spn & 0xFF, (spn >> 8) & 0xFF, ((spn >> 16) & 0x7) << 5 | (fmi & 0x1F), occurrences & 0x7F))


@dataclass
class Dm1:
    """Active DTCs and lamps of one node; ``payload()`` is the DM1 data (J1939-73)."""

    dtcs: list[tuple[int, int, int]] = field(default_factory=list)  # (SPN, FMI, occurrence count)
    amber_lamp: int = 0  # 0 off, 1 on
    red_lamp: int = 0
    mil: int = 0
    protect_lamp: int = 0

    def payload(self) -> bytes:
        lamps = (self.protect_lamp & 3) | (self.amber_lamp & 3) << 2 | (self.red_lamp & 3) << 4 | (self.mil & 3) << 6
        if not self.dtcs:  # no active DTC: SPN 0, FMI 0, OC 0, bytes 7-8 0xFF
            return bytes((lamps, 0xFF, 0, 0, 0, 0, 0xFF, 0xFF))
        body = bytes((lamps, 0xFF)) + b"".join(dtc_bytes(*d) for d in self.dtcs)
        return body + b"\xff" * (8 - len(body)) if len(body) < 8 else body


class Bam:
    """Sender side of one broadcast announce message: TP.CM, then TP.DT packets ``BAM_PACKET_MS`` apart."""

    def __init__(self, source: int, pgn: int, data: bytes, now_ms: float):
        self.source, self.pgn, self.data = source, pgn, bytes(data)
        self.packets = (len(self.data) + 6) // 7
        self.next_seq = 0  # 0: the announcement is due; k >= 1: TP.DT packet k
        self.due_ms = now_ms

    @property
    def done(self) -> bool:
        return self.next_seq > self.packets

    def poll(self, now_ms: float) -> Frame | None:
        """The next frame of the transfer if it is due."""
        if self.done or now_ms < self.due_ms:
            return None
        k = self.next_seq
        self.next_seq += 1
        self.due_ms = now_ms + BAM_PACKET_MS
        if k == 0:
            n = len(self.data)
            cm = bytes((TP_BAM, n & 0xFF, n >> 8, self.packets, 0xFF, self.pgn & 0xFF, (self.pgn >> 8) & 0xFF,
                        (self.pgn >> 16) & 0xFF))
            return frame_id(7, PGN_TP_CM, self.source, ADDR_GLOBAL), cm
        chunk = self.data[7 * (k - 1):7 * k]
        return frame_id(7, PGN_TP_DT, self.source, ADDR_GLOBAL), bytes((k,)) + chunk + b"\xff" * (7 - len(chunk))


class Node:
    """One emulated J1939 node: its address claim, the requests it answers, its DM1 (module docstring).

    ``owned`` maps each PGN the node answers requests for to a function giving
    ``(priority, payload)``.  ``claim_lost`` (a bench fault) makes the node
    behave as if a competing claim with a lower NAME had come in.
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
        self.bam: Bam | None = None
        self.bam_queue: list[list[int]] = []  # [PGN, requests it answers] waiting for the running BAM to end
        self.dm1_suppressed = False  # a bench fault: no DM1 at all
        self.counts = {"claims_sent": 0, "contentions_won": 0, "requests_answered": 0, "nacks": 0,
                       "dm1_sent": 0, "bam_transfers": 0, "bam_queue_full": 0}

    @property
    def can_send(self) -> bool:
        return self.state == "claimed"

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
        self.bam = None
        self.bam_queue.clear()
        return [self.cannot_claim_frame()]

    def on_frame(self, arbitration_id: int, data: bytes, now_ms: float) -> list[Frame]:
        """React to one received extended frame; returns the frames to send."""
        _, pgn, da, sa = parse_id(arbitration_id)
        if pgn == PGN_ADDRESS_CLAIMED and sa == self.address and len(data) == 8 and self.state != "lost":
            other = int.from_bytes(bytes(data), "little")
            if other == self.name:
                return []  # our own claim, echoed by the bus
            if self.name < other:
                self.counts["contentions_won"] += 1
                self.counts["claims_sent"] += 1
                return [self.claim_frame()]
            return self.lose_claim()
        if pgn == PGN_REQUEST and len(data) >= 3 and da in (self.address, ADDR_GLOBAL) and sa != self.address:
            return self._answer(int.from_bytes(bytes(data[:3]), "little"), da, sa, now_ms)
        return []

    def _answer(self, requested: int, da: int, requester: int, now_ms: float) -> list[Frame]:
        if requested == PGN_ADDRESS_CLAIMED:
            self.counts["requests_answered"] += 1
            return [self.cannot_claim_frame() if self.state == "lost" else self.claim_frame()]
        if not self.can_send:
            return []
        if requested in self.owned:
            prio, payload = self.owned[requested]()
            self.counts["requests_answered"] += 1
            return [(frame_id(prio, requested, self.address, requester), payload)]
        if requested == PGN_DM1 and self.dm1 is not None and not self.dm1_suppressed:
            return self._dm1_frames(now_ms, requests=1)
        if da == self.address:  # J1939-21: a destination-specific request for an unknown PGN is NACKed
            self.counts["nacks"] += 1
            ack = bytes((1, 0xFF, 0xFF, 0xFF, requester, requested & 0xFF, (requested >> 8) & 0xFF,
                         (requested >> 16) & 0xFF))
            return [(frame_id(6, PGN_ACK, self.address, ADDR_GLOBAL), ack)]
        return []

    def _dm1_frames(self, now_ms: float, requests: int = 0) -> list[Frame]:
        """DM1 now (one frame, or a BAM when none runs), else queued behind the running BAM.

        ``requests``: how many requests this DM1 answers; they are counted when
        the DM1 goes out, so a queued answer is not counted before it is sent.
        """
        data = self.dm1.payload()
        if len(data) > 8 and self.bam is not None and not self.bam.done:
            for entry in self.bam_queue:  # one answer, the same data, serves every request waiting for it
                if entry[0] == PGN_DM1:
                    entry[1] += requests
                    return []
            if len(self.bam_queue) >= MAX_BAM_QUEUE:
                self.counts["bam_queue_full"] += 1
                return []
            self.bam_queue.append([PGN_DM1, requests])
            return []
        self.counts["dm1_sent"] += 1
        self.counts["requests_answered"] += requests
        if len(data) <= 8:
            return [(frame_id(6, PGN_DM1, self.address, ADDR_GLOBAL), data)]
        self.counts["bam_transfers"] += 1
        self.bam = Bam(self.address, PGN_DM1, data, now_ms)
        first = self.bam.poll(now_ms)
        return [first] if first is not None else []

    def poll(self, now_ms: float) -> list[Frame]:
        """Time-driven work: the claim standing after 250 ms, the DM1 cycle, the packets of a running BAM."""
        out: list[Frame] = []
        if self.state == "claiming" and now_ms - self.claim_ms >= CLAIM_WAIT_MS:
            self.state = "claimed"
        if not self.can_send:
            return out
        if self.bam is not None:
            f = self.bam.poll(now_ms)
            if f is not None:
                out.append(f)
            elif self.bam.done and self.bam_queue and now_ms >= self.bam.due_ms:  # 50 ms after the last packet
                _, requests = self.bam_queue.pop(0)
                self.bam = None
                out += self._dm1_frames(now_ms, requests)
        if self.dm1 is not None and not self.dm1_suppressed and now_ms >= self.next_dm1_ms:
            self.next_dm1_ms = now_ms + self.dm1_period_ms
            out += self._dm1_frames(now_ms)
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
