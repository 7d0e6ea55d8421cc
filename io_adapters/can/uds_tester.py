"""A UDS tester's transport side: one request at a time over ISO-TP, P2 / P2*, the held session and tester present.

:class:`DiagnosticTester` is driven by a task (:meth:`DiagnosticTester.update`
once per period, never blocking) on a clock its owner gives (the plant's
in lockstep, so every timer is plant time): requests wait in a bounded queue
(:data:`MAX_QUEUED`), one goes out when the previous one has its final
answer or has waited P2 (P2* after a response-pending 0x78), and while a
session other than the default is held, tester present (0x3E with the
suppress bit) goes out whenever no request went out for
``tester_present_s`` (within S3).  A positive answer to 0x10 sets the held
session; one to 0x11 returns it to the default, as the ECU does.

Its users: the test files' tester (:class:`server.testbench.uds.UdsTester`,
which adds the polls and the signals a test file reads) and the ``uds``
adapter (:mod:`io_adapters.can.uds_adapter`), the same tester driven by
control requests.  The transport is
:class:`~io_adapters.can.isotp_clock.ClockedIsoTp` with normal (11 or 29 bit)
or normal fixed addressing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import can

from .isotp_clock import ClockedIsoTp, IsoTpTiming

MAX_QUEUED = 256  # requests waiting to be sent
SESSIONS = {"default": 0x01, "extended": 0x03}
S3_S = 5.0  # the ECU's session timeout: tester present must come more often


@dataclass(frozen=True)
class UdsLink:
    """Addressing, transport settings, timing and the session a tester keeps.

    ``request_id`` / ``response_id`` / ``functional_id``: CAN IDs (``extended_id``: 29-bit; ``fixed``: normal
    fixed addressing, IDs 0x18DA<TA><SA>); ``stmin_ms`` and ``block_size``: what this side's flow control asks
    of the ECU; ``p2_ms`` / ``p2_star_ms``: how long an answer is waited for (ms of the owner's clock);
    ``tester_present_s``: at most this long without a request in a non-default session; ``session``: the one
    to open and hold (``"default"``: none).
    """

    request_id: int = 0x7E0
    response_id: int = 0x7E8
    functional_id: int = 0x7DF
    extended_id: bool = False
    fixed: bool = False
    stmin_ms: int = 0
    block_size: int = 0
    p2_ms: float = 50.0
    p2_star_ms: float = 5000.0
    tester_present_s: float = 2.0
    session: str = "default"

    def timing(self) -> IsoTpTiming:
        return IsoTpTiming(stmin_ms=self.stmin_ms, block_size=self.block_size)


def normal_fixed_ids(ecu: int, tester: int, priority: int = 6) -> dict:
    """The IDs of normal fixed addressing (ISO 15765-2; J1939's PGN 0xDA00 physical, 0xDB00 functional to the
    global address 0xFF) between an ECU and a tester by their source addresses, as :class:`UdsLink` keys."""
    if not (0 <= ecu <= 0xFD and 0 <= tester <= 0xFD and ecu != tester):
        raise ValueError(f"source addresses 0x{ecu:X} (ECU) and 0x{tester:X} (tester) must differ and be 0..0xFD")
    p = (priority & 7) << 26
    return {"request_id": p | 0xDA0000 | ecu << 8 | tester, "response_id": p | 0xDA0000 | tester << 8 | ecu,
            "functional_id": p | 0xDB0000 | 0xFF << 8 | tester, "extended_id": True, "fixed": True}


@dataclass
class TesterCounters:
    requests: int = 0
    answers: int = 0
    negative: dict = field(default_factory=dict)  # (service, NRC) -> count
    timeouts: int = 0
    response_pending: int = 0
    tester_present: int = 0
    unexpected: int = 0  # payloads with no request waiting for them
    polls_skipped: int = 0  # polls not queued because the previous one's requests were still waiting
    dropped: int = 0  # requests not queued: MAX_QUEUED were already waiting
    other_frames: int = 0  # frames of other IDs the tester's own bus delivered (pump), ignored


class DiagnosticTester:
    """The task-driven tester (module docstring).  ``clock_ns``: the owner's time in ns.

    ``bus`` sends this side's frames; :meth:`pump` also receives from it (a tester with a bus of its own).  An
    owner that routes frames itself calls ``tp.feed`` with the frames of :meth:`accepts` instead.
    """

    def __init__(self, bus: can.BusABC, link: UdsLink, clock_ns: Callable[[], int]):
        self.bus, self.link, self.clock_ns = bus, link, clock_ns
        self.tp = ClockedIsoTp(bus, link.request_id, link.response_id, clock_ns, link.timing(), link.extended_id,
                               link.fixed)
        self.counters = TesterCounters()
        self.session = SESSIONS["default"]
        self._queue: list[tuple[bytes, Callable | None]] = []
        self._waiting: tuple[bytes, Callable | None, int] | None = None  # request, on_answer, deadline ns
        self._last_sent_ns = -(1 << 62)
        if link.session != "default":
            self.request(bytes((0x10, SESSIONS[link.session])))

    # -- the owner's side -----------------------------------------------------------------------------------------
    def request(self, payload: bytes, on_answer: Callable[[bytes | None], None] | None = None) -> bool:
        """Queue a request; ``on_answer(payload)`` gets its final answer (None after a timeout).  False: the queue
        was full, the request is counted as ``dropped`` and not kept."""
        if len(self._queue) >= MAX_QUEUED:
            self.counters.dropped += 1  # a caller queuing faster than the ECU answers: counted, not kept
            return False
        self._queue.append((bytes(payload), on_answer))
        return True

    def idle(self) -> bool:
        return self._waiting is None and not self._queue

    def pending(self) -> int:
        """Requests queued or waiting for their answer."""
        return len(self._queue) + (self._waiting is not None)

    def accepts(self, m: can.Message) -> bool:
        """Whether a frame is the ECU's answer to this tester (its response ID)."""
        ln = self.link
        return m.arbitration_id == ln.response_id and bool(m.is_extended_id) == ln.extended_id

    def pump(self, limit: int = 1 << 30) -> None:
        """Take the frames of the response ID waiting on the bus (non-blocking; at most ``limit`` frames)."""
        for _ in range(limit):
            m = self.bus.recv(0.0)
            if m is None:
                return
            if self.accepts(m):
                self.tp.feed(m)
            else:
                self.counters.other_frames += 1

    def update(self) -> None:
        """One task: answers in, timeouts, what is due (:meth:`_due`), tester present, at most one request out."""
        self.pump()
        self.step()

    def step(self) -> None:
        """:meth:`update` without :meth:`pump`: for an owner that feeds the frames itself."""
        now = self.clock_ns()
        for payload in self.tp.step():
            self._take(payload, now)
        if self._waiting is not None and now > self._waiting[2]:
            req, cb, _ = self._waiting
            self._waiting = None
            self.counters.timeouts += 1
            if cb is not None:
                cb(None)
        self._due(now)
        if self._waiting is None and self._queue:
            req, cb = self._queue.pop(0)
            self._send(req, now)
            self._waiting = (req, cb, now + int(self.link.p2_ms * 1e6))
        elif self.session != SESSIONS["default"] and now - self._last_sent_ns >= self.link.tester_present_s * 1e9:
            self._send(b"\x3E\x80", now)  # no answer to wait for
            self.counters.tester_present += 1
        self.tp.process()

    def _due(self, now: int) -> None:
        """Requests a subclass queues on its own schedule (the test files' polls); none here."""

    def _send(self, payload: bytes, now: int) -> None:
        self.tp.send(payload)
        self.counters.requests += 1
        self._last_sent_ns = now

    def _take(self, payload: bytes, now: int) -> None:
        if self._waiting is None:
            self.counters.unexpected += 1
            return
        req, cb, _ = self._waiting
        if len(payload) == 3 and payload[0] == 0x7F and payload[1] == req[0] and payload[2] == 0x78:
            self.counters.response_pending += 1
            self._waiting = (req, cb, now + int(self.link.p2_star_ms * 1e6))
            return
        self._waiting = None
        self.counters.answers += 1
        if payload[:1] == b"\x7F" and len(payload) >= 3:
            key = (payload[1], payload[2])
            self.counters.negative[key] = self.counters.negative.get(key, 0) + 1
        elif payload[:1] == b"\x50" and len(payload) >= 2:
            self.session = payload[1]  # the session the ECU is in now: held by tester present if not the default
        elif payload[:1] == b"\x51":
            self.session = SESSIONS["default"]  # after a reset the ECU is back in its default session
        if cb is not None:
            cb(payload)

    def status(self) -> dict:
        c = self.counters
        return {"requests": c.requests, "answers": c.answers, "timeouts": c.timeouts,
                "negative": {f"{s:02X}/{n:02X}": k for (s, n), k in c.negative.items()},
                "response_pending": c.response_pending, "tester_present": c.tester_present,
                "unexpected": c.unexpected, "polls_skipped": c.polls_skipped, "dropped": c.dropped,
                "other_frames": c.other_frames, "session": self.session, "queued": len(self._queue),
                "waiting": int(self._waiting is not None),
                "frames_in": self.tp.frames_in, "frames_out": self.tp.frames_out,
                "inbox_dropped": self.tp.inbox_dropped, "transport_errors": dict(self.tp.errors)}


__all__ = ["DiagnosticTester", "MAX_QUEUED", "S3_S", "SESSIONS", "TesterCounters", "UdsLink", "normal_fixed_ids"]
