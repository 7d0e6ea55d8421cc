"""J1939-73 diagnostics and the identification messages of the emulated nodes: DTC memory, DM1-DM3, DM11, DM13.

* :class:`Dm1` holds one node's lamps, its active DTCs (DM1, PGN 65226)
  and its previously active ones (DM2, 65227).  A DTC that stops being
  active moves to the previously active list with its occurrence count;
  one that comes again counts one occurrence more (at most 126).
  DM3 (65228) clears the previously active DTCs, DM11 (65235) the active
  ones; both are requested (PGN 59904) and acknowledged positively when the
  request was addressed to the node alone.
* DM13 (57088) stops and starts broadcasts: byte 1 bits 1-2 (SAE J1939
  network 1) or bits 7-8 (the current data link) 00 stop, 01 start;
  a stop holds for 6 s unless a hold signal (byte 4 bits 5-8 = 0 or 1)
  comes again, or for the suspend duration of bytes 5-6 (s) when given.
* Identification: software (65242: the number of fields, then each field
  ended by ``*``), component (65259: make*model*serial*unit*), ECU
  (64965: part*serial*location*type*manufacturer*), engine hours and
  revolutions (65253: 0.05 h/bit and 1000 r/bit, 4 bytes each).
"""

from __future__ import annotations

from dataclasses import dataclass, field

PGN_DM1 = 0xFECA  # 65226
PGN_DM2 = 0xFECB  # 65227
PGN_DM3 = 0xFECC  # 65228
PGN_DM11 = 0xFED3  # 65235
PGN_DM13 = 0xDF00  # 57088
PGN_SOFTWARE_ID = 0xFEDA  # 65242
PGN_COMPONENT_ID = 0xFEEB  # 65259
PGN_ECU_ID = 0xFDC5  # 64965
PGN_ENGINE_HOURS = 0xFEE5  # 65253
PGN_COMMANDED_ADDRESS = 0xFED8  # 65240
DM13_HOLD_MS = 6000.0  # a stop without a hold signal lasts 6 s (J1939-73)
MAX_DTCS = 64  # per list: a DM of 64 DTCs is 258 bytes, well inside the transport's 1785
LAMPS = ("protect_lamp", "amber_lamp", "red_lamp", "mil")  # byte 1 of a DM, bits 1-2, 3-4, 5-6, 7-8


def dtc_bytes(spn: int, fmi: int, occurrences: int) -> bytes:
    """One DTC of a DM (J1939-73, SPN conversion method 0): SPN low, mid, (SPN high 3 bits | FMI), OC."""
    return bytes((spn & 0xFF, (spn >> 8) & 0xFF, ((spn >> 16) & 0x7) << 5 | (fmi & 0x1F), occurrences & 0x7F))


@dataclass
class Dm1:
    """Lamps, active and previously active DTCs ``(SPN, FMI, occurrence count)`` of one node (docstring)."""

    dtcs: list[tuple[int, int, int]] = field(default_factory=list)  # active
    amber_lamp: int = 0  # 0 off, 1 on
    red_lamp: int = 0
    mil: int = 0
    protect_lamp: int = 0
    previous: list[tuple[int, int, int]] = field(default_factory=list)

    def lamp_byte(self) -> int:
        return (self.protect_lamp & 3) | (self.amber_lamp & 3) << 2 | (self.red_lamp & 3) << 4 | (self.mil & 3) << 6

    def _payload(self, dtcs: list[tuple[int, int, int]]) -> bytes:
        if not dtcs:  # no DTC: SPN 0, FMI 0, OC 0, bytes 7-8 0xFF
            return bytes((self.lamp_byte(), 0xFF, 0, 0, 0, 0, 0xFF, 0xFF))
        body = bytes((self.lamp_byte(), 0xFF)) + b"".join(dtc_bytes(*d) for d in dtcs)
        return body + b"\xff" * (8 - len(body)) if len(body) < 8 else body

    def payload(self) -> bytes:
        """DM1: the lamps and the active DTCs."""
        return self._payload(self.dtcs)

    def dm2_payload(self) -> bytes:
        """DM2: the lamps and the previously active DTCs."""
        return self._payload(self.previous)

    def activate(self, spn: int, fmi: int) -> bool:
        """DTC ``(spn, fmi)`` active; False if the list is full (nothing changes)."""
        if any(d[:2] == (spn, fmi) for d in self.dtcs):
            return True
        if len(self.dtcs) >= MAX_DTCS:
            return False
        before = [d for d in self.previous if d[:2] == (spn, fmi)]
        self.previous = [d for d in self.previous if d[:2] != (spn, fmi)]
        self.dtcs.append((spn, fmi, min(before[0][2] + 1, 126) if before else 1))
        return True

    def deactivate(self, spn: int, fmi: int) -> None:
        """DTC ``(spn, fmi)`` no longer active: it moves to the previously active ones."""
        gone = [d for d in self.dtcs if d[:2] == (spn, fmi)]
        if gone:
            self.dtcs.remove(gone[0])
            self.previous = [d for d in self.previous if d[:2] != (spn, fmi)][:MAX_DTCS - 1] + [gone[0]]


def dm13_command(data: bytes) -> str:
    """What a DM13 asks of a node on this network: "stop", "start", "hold" or "" (nothing)."""
    if len(data) < 8:
        return ""
    link, net1 = data[0] >> 6 & 3, data[0] & 3
    if 0 in (link, net1):
        return "stop"
    if 1 in (link, net1):
        return "start"
    return "hold" if data[3] >> 4 in (0, 1) else ""


def dm13_duration_ms(data: bytes) -> float:
    """How long a stop lasts: the suspend duration of bytes 5-6 in s when given, else the 6 s of a hold."""
    s = data[4] | data[5] << 8
    return 1000.0 * s if s <= 64255 else DM13_HOLD_MS


def fields(*values: str) -> bytes:
    """Identification fields, each ended by ``*`` (ASCII)."""
    return b"".join(v.encode("ascii", "replace") + b"*" for v in values)


def software_id(*versions: str) -> bytes:
    """PGN 65242: the number of fields, then the fields."""
    return bytes((len(versions),)) + fields(*versions)


def engine_hours(hours: float, revolutions: float) -> bytes:
    """PGN 65253: total engine hours (0.05 h/bit) and total revolutions (1000 r/bit), each 4 bytes, little-endian."""
    h = min(max(int(hours / 0.05), 0), 4211081215)  # the largest valid 4-byte value of J1939-71
    r = min(max(int(revolutions / 1000.0), 0), 4211081215)
    return h.to_bytes(4, "little") + r.to_bytes(4, "little")
