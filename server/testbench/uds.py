"""The bench's UDS tester: ISO-TP (``can-isotp``) and UDS (``udsoncan``) against an ECU on the server's bus.

Two ways to use it, both on the same transport (:class:`~io_adapters.can.isotp_clock.ClockedIsoTp`, timed by
the caller's clock, the plant's in lockstep):

* :class:`UdsTester`, driven by a task (:meth:`UdsTester.update` once per period, never blocking): the test
  files' tester.  It keeps the session it was told (``session = "extended"``: 0x10 0x03 first), sends tester
  present (0x3E with the suppress bit) whenever no request went out for ``tester_present_s`` (within S3),
  and every ``poll_s`` reads the DTCs by status mask (0x19 0x02) and the DIDs its probes name (0x22), each
  request waiting for its answer up to P2 (P2* after a response-pending 0x78).  Requests and answers are
  encoded and decoded with udsoncan's service classes.  What it read becomes signals of the run
  (:class:`Probe`): ``dtc_<code>_<status bit>`` (1 while the DTC's last read status has the bit, 0 when it
  is not reported), ``did_<did>`` (the DID's bytes as an unsigned big-endian integer) and
  ``did_<did>_is_<k>`` (1 while it equals the k-th string a test file expects); NaN before the first answer.
* :class:`LockstepConnection`, a udsoncan connection for ``udsoncan.client.Client``: its wait for an answer
  advances the bench (a callable that steps the plant and runs the ECU's task) until the answer is there or
  the timeout has passed in plant time (:mod:`server.testbench.uds_bench`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

import can
import numpy as np
from udsoncan import Request, Response, services
from udsoncan.connections import BaseConnection
from udsoncan.exceptions import TimeoutException

from io_adapters.can.uds_server import STATUS_BITS
from io_adapters.can.uds_tester import S3_S, SESSIONS, DiagnosticTester, UdsLink, normal_fixed_ids

MAX_PROBES = 64  # signals one tester makes (a poll reads each DID once: at most this many requests)


@dataclass(frozen=True)
class UdsTesterConfig(UdsLink):
    """The ``[uds]`` table of a test file: the tester's link (addressing, transport settings, timing, session), the
    bus it joins and how often it reads what the file expects."""

    channel: str | None = None  # the server's virtual bus (None: the channel of the I/O config's can adapter)
    poll_s: float = 0.05


def parse_uds(cfg) -> UdsTesterConfig:
    """The ``[uds]`` table (a :class:`plant_models.config.ConfigReader`); a bad value is a one-line ConfigError."""
    d = UdsTesterConfig()
    addressing = cfg.string("addressing", "normal", choices=("normal", "normal_fixed"))
    if addressing == "normal_fixed":  # J1939: 0x18DA<TA><SA>, the IDs follow from the two source addresses
        for key in ("request_id", "response_id", "functional_id", "extended_id"):
            if cfg.has(key):
                raise cfg.error(key, "normal_fixed addressing takes ecu_address and tester_address, not IDs")
        try:
            ids = normal_fixed_ids(cfg.integer("ecu_address", 0x03, lo=0, hi=0xFD),
                                   cfg.integer("tester_address", 0xF1, lo=0, hi=0xFD))
        except ValueError as exc:
            raise cfg.error("tester_address", str(exc)) from None
        ext = True
    else:
        ids = {}
        for key in ("request_id", "response_id", "functional_id"):
            ids[key] = cfg.integer(key, getattr(d, key), lo=0)
        ext = cfg.boolean("extended_id", False)
        for key, v in ids.items():
            if v > (0x1FFFFFFF if ext else 0x7FF):
                raise cfg.error(key, f"0x{v:X} is not a {'29' if ext else '11'}-bit CAN ID")
        if len(set(ids.values())) != 3:
            raise cfg.error("response_id", "the request, response and functional IDs must differ")
        ids["extended_id"] = ext
    channel = cfg.string("channel") if cfg.has("channel") else None
    out = UdsTesterConfig(
        channel=channel, **ids,
        stmin_ms=cfg.integer("stmin_ms", d.stmin_ms, lo=0, hi=127), block_size=cfg.integer("block_size", 0, lo=0, hi=255),
        p2_ms=cfg.number("p2_ms", d.p2_ms, positive=True), p2_star_ms=cfg.number("p2_star_ms", d.p2_star_ms, positive=True),
        tester_present_s=cfg.number("tester_present_s", d.tester_present_s, positive=True),
        session=cfg.string("session", d.session, choices=tuple(SESSIONS)),
        poll_s=cfg.number("poll_s", d.poll_s, positive=True))
    if out.tester_present_s >= S3_S:
        raise cfg.error("tester_present_s", f"{out.tester_present_s:g} s: tester present must come within S3 (5 s)")
    cfg.reject_unknown()
    return out


@dataclass(frozen=True)
class Probe:
    """A signal the tester makes from what it reads: a DTC's status bit, a DID's number, or a DID equal to a string."""

    name: str
    dtc: int | None = None
    bit: int = 0
    did: int | None = None
    text: bytes | None = None

    @staticmethod
    def for_dtc(code: int, status: str) -> "Probe":
        return Probe(f"dtc_{code:06X}_{status}", dtc=code, bit=STATUS_BITS[status])

    @staticmethod
    def for_did(did: int, text: str | None = None, k: int = 0) -> "Probe":
        if text is None:
            return Probe(f"did_{did:04X}", did=did)
        return Probe(f"did_{did:04X}_is_{k}", did=did, text=text.encode("latin-1"))


def uds_expectation(cfg, uds: UdsTesterConfig | None, k: int):
    """A ``dtc`` or ``did`` expectation as (its probe, the expression over the probe's signal, a reader of the
    rest of the table: bounds and timing, checked as any expectation's).

    ``dtc = 0x071531`` with ``status`` (an ISO 14229 status bit name, default confirmedDTC): holds while the
    tester's last read showed that bit set (no bound; ``never = true`` for "not set").  ``did = 0x0100`` with
    ``eq``, ``min``/``max`` (numbers: the DID's bytes as an unsigned big-endian integer) or ``eq = "text"``.
    """
    from plant_models.config import ConfigReader

    if uds is None:
        raise cfg.error("dtc" if cfg.has("dtc") else "did", "reads the ECU through the UDS tester: give the file a "
                        "[uds] table (docs/testing.md, \"UDS\")")
    if cfg.has("expr"):
        raise cfg.error("expr", "give either expr or dtc / did, not both")
    if cfg.has("dtc") and cfg.has("did"):
        raise cfg.error("did", "give either dtc or did, not both")
    rest = {key: v for key, v in cfg.data.items() if key not in ("dtc", "status", "did")}
    if cfg.has("dtc"):
        code = cfg.integer("dtc", lo=0, hi=0xFFFFFF)
        status = cfg.string("status", "confirmedDTC", choices=tuple(STATUS_BITS))
        for key in ("eq", "min", "max", "tol", "rel_tol"):
            if cfg.has(key):
                raise cfg.error(key, "a dtc expectation holds while the status bit is set: it takes no bound "
                                "(never = true: the bit must not be set)")
        probe = Probe.for_dtc(code, status)
        return probe, f"{probe.name} == 1", ConfigReader(rest, cfg.source, cfg.prefix)
    did = cfg.integer("did", lo=0, hi=0xFFFF)
    eq = cfg.data.get("eq")
    if isinstance(eq, str):
        if len(eq) > 4000 or any(ord(ch) > 255 for ch in eq):
            raise cfg.error("eq", "a DID's text must be at most 4000 single-byte (latin-1) characters")
        rest.pop("eq")
        probe = Probe.for_did(did, eq, k)
        return probe, f"{probe.name} == 1", ConfigReader(rest, cfg.source, cfg.prefix)
    if not any(cfg.has(key) for key in ("eq", "min", "max")):
        raise cfg.error("did", "needs eq (a number or a text), min or max")
    probe = Probe.for_did(did)
    return probe, probe.name, ConfigReader(rest, cfg.source, cfg.prefix)


class UdsTester(DiagnosticTester):
    """The test files' tester (module docstring): the task-driven tester of
    :class:`~io_adapters.can.uds_tester.DiagnosticTester` with the polls of its probes.  ``clock_ns``: the
    caller's time in ns."""

    def __init__(self, bus: can.BusABC, config: UdsTesterConfig, clock_ns: Callable[[], int],
                 probes: tuple[Probe, ...] = ()):
        if len(probes) > MAX_PROBES:
            raise ValueError(f"a UDS tester reads at most {MAX_PROBES} DTC bits and DIDs, got {len(probes)}")
        super().__init__(bus, config, clock_ns)
        self.config = config
        self.probes = tuple(probes)
        self.samples: dict[str, list[tuple[float, float]]] = {p.name: [] for p in self.probes}
        self._next_poll_ns = 0

    # -- polls and probes --------------------------------------------------------------------------------
    def _due(self, now: int) -> None:
        if now >= self._next_poll_ns and self.probes:
            self._next_poll_ns = now + int(self.config.poll_s * 1e9)
            self._queue_polls(now)

    def _queue_polls(self, now: int) -> None:
        if self._queue:  # the last poll's requests are still waiting: no queue growing behind a slow ECU
            self.counters.polls_skipped += 1
            return
        if any(p.dtc is not None for p in self.probes):
            req = Request(services.ReadDTCInformation, subfunction=0x02, data=b"\xFF")
            self.request(req.get_payload(), self._dtcs)
        for did in sorted({p.did for p in self.probes if p.did is not None}):
            self.request(bytes((0x22,)) + did.to_bytes(2, "big"), lambda ans, did=did: self._did(did, ans))

    def _stamp(self) -> float:
        return self.clock_ns() / 1e9

    def _dtcs(self, ans: bytes | None) -> None:
        if ans is None or ans[:1] != b"\x59":
            return
        rsp = Response.from_payload(ans)
        services.ReadDTCInformation.interpret_response(rsp, subfunction=0x02)
        status = {d.id: d.status.get_byte_as_int() for d in rsp.service_data.dtcs}
        t = self._stamp()
        for p in self.probes:
            if p.dtc is not None:
                self.samples[p.name].append((t, float(bool(status.get(p.dtc, 0) & p.bit))))

    def _did(self, did: int, ans: bytes | None) -> None:
        if ans is None or len(ans) < 3 or ans[0] != 0x62 or int.from_bytes(ans[1:3], "big") != did:
            return
        data, t = ans[3:], self._stamp()
        for p in self.probes:
            if p.did == did:
                v = float(data == p.text) if p.text is not None else float(int.from_bytes(data, "big"))
                self.samples[p.name].append((t, v))

    def signals(self, time_s: np.ndarray) -> dict[str, np.ndarray]:
        """Each probe as a signal on ``time_s``: the last value read at or before each sample, NaN before."""
        out = {}
        for p in self.probes:
            s = self.samples[p.name]
            v = np.full(len(time_s), np.nan)
            if s:
                ts = np.array([a for a, _ in s])
                vals = np.array([b for _, b in s])
                k = np.searchsorted(ts, time_s + 1e-12, side="right") - 1
                v[k >= 0] = vals[k[k >= 0]]
            out[p.name] = v
        return out


class LockstepConnection(BaseConnection):
    """A udsoncan connection over :class:`ClockedIsoTp` whose wait advances the bench (plant time).

    ``advance()`` steps the bench by one task (the plant's ticks and the ECU's task); ``clock_ns`` is its
    time.  ``wait_frame(timeout)`` advances until an answer is there or ``timeout`` s of plant time passed.
    """

    def __init__(self, bus: can.BusABC, config: UdsTesterConfig, advance: Callable[[], None],
                 clock_ns: Callable[[], int], max_tasks: int = 1_000_000):
        super().__init__("lockstep")
        self.config, self.advance, self.clock_ns, self.max_tasks = config, advance, clock_ns, max_tasks
        self.tester = DiagnosticTester(bus, replace(config, session="default"), clock_ns)
        self._rx: list[bytes] = []
        self._open = False

    def open(self) -> "LockstepConnection":
        self._open = True
        return self

    def close(self) -> None:
        self._open = False

    def is_open(self) -> bool:
        return self._open

    def __exit__(self, *exc) -> None:
        self.close()

    def specific_send(self, payload: bytes, timeout: float | None = None) -> None:
        self.tester.tp.send(bytes(payload))
        self.tester.tp.process()

    def _poll(self) -> None:
        self.tester.pump()
        self._rx += self.tester.tp.step()

    def specific_wait_frame(self, timeout: float | None = None) -> bytes | None:
        end = self.clock_ns() + int((timeout if timeout is not None else 1.0) * 1e9)
        for _ in range(self.max_tasks):
            self._poll()
            if self._rx:
                return self._rx.pop(0)
            if self.clock_ns() >= end:
                break
            self.advance()
        raise TimeoutException(f"no answer within {timeout} s of plant time")

    def empty_rxqueue(self) -> None:
        self._poll()
        self._rx.clear()


__all__ = ["LockstepConnection", "Probe", "UdsTester", "UdsTesterConfig", "parse_uds", "uds_expectation", "SESSIONS"]
