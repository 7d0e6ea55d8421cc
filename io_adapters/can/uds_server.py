"""A small UDS server (ISO 14229-1) over ISO-TP for an emulated ECU: sessions, reset, tester present, DTC memory,
data identifiers, one kind of routine, negative responses with their codes.

An ECU emulator owns one :class:`UdsServer`: it routes the frames of the
physical request ID and of the functional ID to :meth:`UdsServer.feed`,
feeds its monitors' test results into :attr:`UdsServer.dtcs` (a
:class:`DtcMemory`) and calls :meth:`UdsServer.cycle` once per task with its
time (the plant's in lockstep, so a run is the same every time).  A cycle
does bounded work: at most :data:`~io_adapters.can.isotp_clock.INBOX_FRAMES`
frames per address, every request answered in the cycle it completes (no
response-pending), responses bounded by the transport's 4095 bytes.

Services: 0x10 (default 0x01, extended 0x03 session; P2 and P2* in the
reply), 0x11 (0x01 hard, 0x02 key off/on, 0x03 soft reset: the answer, then
the default session and a new operation cycle of the DTC memory), 0x3E
(zero sub-function), 0x19 (0x01 number and 0x02 list of DTCs by status
mask, 0x0A supported DTCs), 0x14 (group 0xFFFFFF or one DTC), 0x22 (one or
more DIDs), 0x2E and 0x31 (extended session only).  The suppress-positive-
response bit is honoured for 0x10, 0x11, 0x3E and 0x31; a functional request
(single frame on the functional ID) gets no 0x11, 0x12, 0x31, 0x7E or 0x7F
negative response (ISO 14229-1, 7.5).  A session other than the default
falls back to it when no request has come for S3 (5 s).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import can

from .isotp_clock import MAX_PAYLOAD, ClockedIsoTp, IsoTpTiming

# DTC status bits (ISO 14229-1, D.2)
TEST_FAILED = 0x01
TEST_FAILED_THIS_CYCLE = 0x02
PENDING = 0x04
CONFIRMED = 0x08
NOT_COMPLETED_SINCE_CLEAR = 0x10
FAILED_SINCE_CLEAR = 0x20
NOT_COMPLETED_THIS_CYCLE = 0x40
WARNING_INDICATOR = 0x80
STATUS_BITS = {"testFailed": TEST_FAILED, "testFailedThisOperationCycle": TEST_FAILED_THIS_CYCLE,
               "pendingDTC": PENDING, "confirmedDTC": CONFIRMED,
               "testNotCompletedSinceLastClear": NOT_COMPLETED_SINCE_CLEAR, "testFailedSinceLastClear": FAILED_SINCE_CLEAR,
               "testNotCompletedThisOperationCycle": NOT_COMPLETED_THIS_CYCLE,
               "warningIndicatorRequested": WARNING_INDICATOR}
STATUS_AVAILABILITY = 0xFF
STATUS_AFTER_CLEAR = NOT_COMPLETED_SINCE_CLEAR | NOT_COMPLETED_THIS_CYCLE

# negative response codes (ISO 14229-1, A.1)
NRC = {"generalReject": 0x10, "serviceNotSupported": 0x11, "subFunctionNotSupported": 0x12,
       "incorrectMessageLengthOrInvalidFormat": 0x13, "responseTooLong": 0x14, "conditionsNotCorrect": 0x22,
       "requestSequenceError": 0x24, "requestOutOfRange": 0x31,
       "subFunctionNotSupportedInActiveSession": 0x7E, "serviceNotSupportedInActiveSession": 0x7F}
FUNCTIONAL_SILENT = {0x11, 0x12, 0x31, 0x7E, 0x7F}

MAX_PENDING_ANSWERS = 4  # answers queued for sending; a request beyond is dropped and counted (busy)
MAX_FUNCTIONAL = 16  # functional requests taken per task
DEFAULT_SESSION, EXTENDED_SESSION = 0x01, 0x03
P2_MS, P2_STAR_MS, S3_S = 50, 5000, 5.0
SUPPRESS = 0x80
DTC_FORMAT_ISO14229 = 0x01


class Nrc(Exception):
    """A request answered negatively: ``code`` is the NRC."""

    def __init__(self, code: int):
        super().__init__(f"NRC 0x{code:02X}")
        self.code = code


@dataclass(frozen=True)
class Dtc:
    """A diagnostic trouble code: 3-byte number, what it means, how many consecutive failed results confirm it,
    whether a confirmed failure asks for the warning lamp."""

    code: int
    text: str
    confirm_after: int = 1
    warning_lamp: bool = False


class DtcMemory:
    """The status byte of every DTC (ISO 14229-1, D.2), driven by test results and operation cycles.

    :meth:`report` takes one completed test's result; a failed one sets testFailed, testFailedThisOperationCycle,
    pendingDTC and testFailedSinceLastClear, and confirmedDTC once ``confirm_after`` results in a row failed; a
    passed one clears testFailed (and the lamp).  Both clear the two test-not-completed bits.  A new operation
    cycle (:meth:`new_cycle`: power on, ECU reset) clears testFailedThisOperationCycle, sets
    testNotCompletedThisOperationCycle, and clears pendingDTC after a cycle that was completed without failure.
    """

    def __init__(self, dtcs: tuple[Dtc, ...]):
        self.dtcs = dtcs
        self.index = {d.code: i for i, d in enumerate(dtcs)}
        self.status = [STATUS_AFTER_CLEAR] * len(dtcs)
        self.failed_in_row = [0] * len(dtcs)

    def report(self, i: int, failed: bool) -> None:
        s = self.status[i] & ~(NOT_COMPLETED_SINCE_CLEAR | NOT_COMPLETED_THIS_CYCLE)
        if failed:
            self.failed_in_row[i] += 1
            s |= TEST_FAILED | TEST_FAILED_THIS_CYCLE | PENDING | FAILED_SINCE_CLEAR
            if self.failed_in_row[i] >= self.dtcs[i].confirm_after:
                s |= CONFIRMED
            if s & CONFIRMED and self.dtcs[i].warning_lamp:
                s |= WARNING_INDICATOR
        else:
            self.failed_in_row[i] = 0
            s &= ~(TEST_FAILED | WARNING_INDICATOR)
        self.status[i] = s

    def new_cycle(self) -> None:
        for i, s in enumerate(self.status):
            if not s & (TEST_FAILED_THIS_CYCLE | NOT_COMPLETED_THIS_CYCLE):
                s &= ~PENDING
            self.status[i] = (s & ~TEST_FAILED_THIS_CYCLE) | NOT_COMPLETED_THIS_CYCLE

    def clear(self, code: int) -> None:
        """ClearDiagnosticInformation: 0xFFFFFF (all) or one DTC; raises Nrc(0x31) for an unknown group."""
        if code == 0xFFFFFF:
            targets = range(len(self.dtcs))
        elif code in self.index:
            targets = (self.index[code],)
        else:
            raise Nrc(NRC["requestOutOfRange"])
        for i in targets:
            self.status[i] = STATUS_AFTER_CLEAR
            self.failed_in_row[i] = 0

    def matching(self, mask: int) -> list[tuple[int, int]]:
        """(code, status) of the DTCs whose status has a bit of ``mask``."""
        return [(d.code, self.status[i] & STATUS_AVAILABILITY) for i, d in enumerate(self.dtcs)
                if self.status[i] & mask & STATUS_AVAILABILITY]


@dataclass(frozen=True)
class DataIdentifier:
    """A DID: ``read()`` gives its bytes; ``write(data)`` (None: read-only) takes new bytes of ``length`` and
    raises Nrc for a value it refuses.  Writing needs the extended session."""

    did: int
    name: str
    read: Callable[[], bytes]
    write: Callable[[bytes], None] | None = None
    length: int | None = None


@dataclass(frozen=True)
class Routine:
    """A routine for RoutineControl: ``start(option bytes)`` returns the routine's status record (bytes);
    ``results()`` the result record.  Raises Nrc for what it refuses."""

    rid: int
    name: str
    start: Callable[[bytes], bytes]
    results: Callable[[], bytes]


@dataclass(frozen=True)
class UdsAddressing:
    """Physical request / response IDs and the functional request ID (11-bit by default: the OBD range).

    ``fixed``: normal fixed addressing (29-bit IDs 0x18DA<TA><SA> / 0x18DB<TA><SA>, the J1939 TCU's:
    :func:`io_adapters.can.j1939_uds.j1939_addressing`); the transport is can-isotp's ``NormalFixed_29bits``.
    """

    request_id: int = 0x7E0
    response_id: int = 0x7E8
    functional_id: int = 0x7DF
    extended_id: bool = False
    fixed: bool = False


@dataclass
class UdsCounters:
    requests: int = 0
    positive: int = 0
    negative: dict = field(default_factory=dict)  # NRC -> count
    suppressed: int = 0  # requests answered with nothing: SPRMIB set, or a functional NRC that stays silent
    functional_frames: int = 0
    functional_ignored: int = 0  # frames on the functional ID that are not a valid single frame
    functional_dropped: int = 0  # valid ones beyond MAX_FUNCTIONAL in one task
    s3_timeouts: int = 0
    resets: int = 0
    busy: int = 0  # requests dropped unanswered: answers still waiting to be sent (a tester not taking them)


class UdsServer:
    """See the module docstring.  ``clock_ns``: the owner's time (ns) for ISO-TP's timers and S3."""

    def __init__(self, bus: can.BusABC, dtcs: tuple[Dtc, ...], dids: tuple[DataIdentifier, ...] = (),
                 routines: tuple[Routine, ...] = (), addressing: UdsAddressing = UdsAddressing(),
                 clock_ns: Callable[[], int] = lambda: 0, timing: IsoTpTiming = IsoTpTiming()):
        self.addressing = a = addressing
        self.bus = bus
        self.dtcs = DtcMemory(dtcs)
        self.dids = {d.did: d for d in dids}
        self.routines = {r.rid: r for r in routines}
        self.clock_ns = clock_ns
        self.tp = ClockedIsoTp(bus, a.response_id, a.request_id, clock_ns, timing, a.extended_id, a.fixed)
        self.session = DEFAULT_SESSION
        self.counters = UdsCounters()
        self._functional: list[bytes] = []
        self._last_request_ns = 0
        self._started: set[int] = set()
        self._services = {0x10: self._session_control, 0x11: self._ecu_reset, 0x3E: self._tester_present,
                          0x19: self._read_dtc, 0x14: self._clear_dtc, 0x22: self._read_did,
                          0x2E: self._write_did, 0x31: self._routine}

    # -- frames in --------------------------------------------------------------------------
    def accepts(self, m: can.Message) -> bool:
        """Whether a frame is this server's (its physical or functional request ID)."""
        a = self.addressing
        return bool(m.is_extended_id) == a.extended_id and m.arbitration_id in (a.request_id, a.functional_id)

    def feed(self, m: can.Message) -> None:
        """A frame of :meth:`accepts`; the work is done in :meth:`cycle`."""
        if m.arbitration_id == self.addressing.request_id:
            self.tp.feed(m)
            return
        self.counters.functional_frames += 1
        d = bytes(m.data)
        n = d[0] & 0x0F if d else 0
        if not d or d[0] >> 4 != 0 or n == 0 or n > len(d) - 1:
            self.counters.functional_ignored += 1  # functional requests are single frames (ISO 15765-2)
            return
        if len(self._functional) >= MAX_FUNCTIONAL:
            self.counters.functional_dropped += 1
            return
        self._functional.append(d[1:1 + n])

    def cycle(self) -> None:
        """One task: the session's S3 timer, then every request completed since the last cycle, answered."""
        now = self.clock_ns()
        if self.session != DEFAULT_SESSION and now - self._last_request_ns > S3_S * 1e9:
            self.session = DEFAULT_SESSION
            self.counters.s3_timeouts += 1
        requests = [(p, False) for p in self.tp.step()] + [(p, True) for p in self._functional]
        self._functional.clear()
        for payload, functional in requests:
            self._last_request_ns = now
            if self.tp.tx_queue.qsize() >= MAX_PENDING_ANSWERS:
                self.counters.requests += 1
                self.counters.busy += 1  # bounded: no queue of answers behind one a tester does not take
                continue
            self._answer(payload, functional)
        if requests:
            self.tp.process()  # send the answers' first frames now, not a task later

    # -- requests -------------------------------------------------------------------------------
    def _answer(self, req: bytes, functional: bool) -> None:
        c = self.counters
        c.requests += 1
        sid = req[0] if req else 0
        after = None
        try:
            handler = self._services.get(sid)
            if handler is None:
                raise Nrc(NRC["serviceNotSupported"])
            rsp, after = handler(req)
        except Exception as exc:  # a DID's or a routine's own code failing must not take the ECU down
            if not isinstance(exc, Nrc):
                exc = Nrc(NRC["generalReject"])
            if functional and exc.code in FUNCTIONAL_SILENT:
                c.suppressed += 1
                return
            c.negative[exc.code] = c.negative.get(exc.code, 0) + 1
            self.tp.send(bytes((0x7F, sid, exc.code)))
            return
        if rsp is None:
            c.suppressed += 1
        else:
            c.positive += 1
            self.tp.send(rsp)
        if after is not None:
            after()

    def _subfunction(self, req: bytes, length: int | None = 2) -> tuple[int, bool]:
        if len(req) < 2 or (length is not None and len(req) != length):
            raise Nrc(NRC["incorrectMessageLengthOrInvalidFormat"])
        return req[1] & 0x7F, bool(req[1] & SUPPRESS)

    def _extended_only(self) -> None:
        if self.session != EXTENDED_SESSION:
            raise Nrc(NRC["serviceNotSupportedInActiveSession"])

    def _session_control(self, req: bytes):
        sub, quiet = self._subfunction(req)
        if sub not in (DEFAULT_SESSION, EXTENDED_SESSION):
            raise Nrc(NRC["subFunctionNotSupported"])
        if sub == DEFAULT_SESSION:
            self._started.clear()  # the extended session's routines end with it
        self.session = sub
        return (None if quiet else bytes((0x50, sub)) + P2_MS.to_bytes(2, "big")
                + (P2_STAR_MS // 10).to_bytes(2, "big")), None

    def _ecu_reset(self, req: bytes):
        sub, quiet = self._subfunction(req)
        if sub not in (0x01, 0x02, 0x03):
            raise Nrc(NRC["subFunctionNotSupported"])
        return (None if quiet else bytes((0x51, sub))), self._reset

    def _reset(self) -> None:
        """After the answer to 0x11: as after power on, the default session and a new operation cycle."""
        self.session = DEFAULT_SESSION
        self.dtcs.new_cycle()
        self._started.clear()
        self.counters.resets += 1

    def _tester_present(self, req: bytes):
        sub, quiet = self._subfunction(req)
        if sub != 0x00:
            raise Nrc(NRC["subFunctionNotSupported"])
        return (None if quiet else b"\x7E\x00"), None

    def _read_dtc(self, req: bytes):
        sub, _ = self._subfunction(req, None)
        if sub in (0x01, 0x02):
            if len(req) != 3:
                raise Nrc(NRC["incorrectMessageLengthOrInvalidFormat"])
            found = self.dtcs.matching(req[2])
            if sub == 0x01:
                return bytes((0x59, 0x01, STATUS_AVAILABILITY, DTC_FORMAT_ISO14229)) + len(found).to_bytes(2, "big"), None
        elif sub == 0x0A:
            if len(req) != 2:
                raise Nrc(NRC["incorrectMessageLengthOrInvalidFormat"])
            found = [(d.code, self.dtcs.status[i]) for i, d in enumerate(self.dtcs.dtcs)]
        else:
            raise Nrc(NRC["subFunctionNotSupported"])
        body = b"".join(code.to_bytes(3, "big") + bytes((status,)) for code, status in found)
        return bytes((0x59, sub, STATUS_AVAILABILITY)) + body, None

    def _clear_dtc(self, req: bytes):
        if len(req) != 4:
            raise Nrc(NRC["incorrectMessageLengthOrInvalidFormat"])
        self.dtcs.clear(int.from_bytes(req[1:4], "big"))
        return b"\x54", None

    def _read_did(self, req: bytes):
        if len(req) < 3 or len(req) % 2 != 1 or len(req) > 1 + 2 * 16:
            raise Nrc(NRC["incorrectMessageLengthOrInvalidFormat"])
        out = bytearray(b"\x62")
        for k in range(1, len(req), 2):
            did = int.from_bytes(req[k:k + 2], "big")
            d = self.dids.get(did)
            if d is None:
                raise Nrc(NRC["requestOutOfRange"])
            out += req[k:k + 2] + d.read()
        if len(out) > MAX_PAYLOAD:
            raise Nrc(NRC["responseTooLong"])
        return bytes(out), None

    def _write_did(self, req: bytes):
        self._extended_only()  # the session before the length (ISO 14229-1, the general order of checks)
        if len(req) < 4:
            raise Nrc(NRC["incorrectMessageLengthOrInvalidFormat"])
        did = int.from_bytes(req[1:3], "big")
        d = self.dids.get(did)
        if d is None or d.write is None:
            raise Nrc(NRC["requestOutOfRange"])
        if d.length is not None and len(req) - 3 != d.length:
            raise Nrc(NRC["incorrectMessageLengthOrInvalidFormat"])
        d.write(bytes(req[3:]))
        return b"\x6E" + req[1:3], None

    def _routine(self, req: bytes):
        self._extended_only()
        if len(req) < 4:
            raise Nrc(NRC["incorrectMessageLengthOrInvalidFormat"])
        sub, quiet = req[1] & 0x7F, bool(req[1] & SUPPRESS)
        rid = int.from_bytes(req[2:4], "big")
        r = self.routines.get(rid)
        if r is None:
            raise Nrc(NRC["requestOutOfRange"])
        if sub == 0x01:
            record = r.start(bytes(req[4:]))
            self._started.add(rid)
        elif sub == 0x03:
            if len(req) != 4:
                raise Nrc(NRC["incorrectMessageLengthOrInvalidFormat"])
            if rid not in self._started:
                raise Nrc(NRC["requestSequenceError"])
            record = r.results()
        else:
            raise Nrc(NRC["subFunctionNotSupported"])
        return (None if quiet else bytes((0x71, sub)) + req[2:4] + record), None

    def status(self) -> dict:
        """Counters for a status or a test: the server's and its transport's."""
        c = self.counters
        return {"session": self.session, "requests": c.requests, "positive": c.positive,
                "negative": dict(c.negative), "suppressed": c.suppressed, "functional_frames": c.functional_frames,
                "functional_ignored": c.functional_ignored,
                "functional_dropped": c.functional_dropped, "s3_timeouts": c.s3_timeouts, "resets": c.resets, "busy": c.busy,
                "frames_in": self.tp.frames_in, "frames_out": self.tp.frames_out,
                "inbox_dropped": self.tp.inbox_dropped, "transport_errors": dict(self.tp.errors),
                "dtcs": {f"{d.code:06X}": self.dtcs.status[i] for i, d in enumerate(self.dtcs.dtcs)}}


__all__ = ["CONFIRMED", "STATUS_BITS", "DataIdentifier", "Dtc", "DtcMemory", "Nrc", "NRC", "Routine",
           "UdsAddressing", "UdsServer", "DEFAULT_SESSION", "EXTENDED_SESSION", "S3_S", "P2_MS", "P2_STAR_MS"]
