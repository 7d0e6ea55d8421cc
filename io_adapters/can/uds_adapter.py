"""The UDS tester adapter: UDS services against the TCU on the bench, asked for over the control channel.

Adapter type ``uds`` (``[[adapters]] type = "uds"``) beside a ``can`` adapter
on the same bus (it opens its own connection to the channel, as the J1939
rest-bus does; ``--can-channel`` moves it with the CAN adapter)::

    [[adapters]]
    type = "uds"
    name = "uds"
    interface = "virtual"          # as the can adapter's
    channel = "gearbox-hil"
    addressing = "normal"          # request_id 0x7E0, response_id 0x7E8, functional_id 0x7DF (extended_id)
    # addressing = "normal_fixed"  # J1939: ecu_address 0x03, tester_address 0xF1 (IDs 0x18DA<TA><SA>)
    p2_ms = 50                     # how long an answer is waited for, plant time (P2* after a 0x78: p2_star_ms)
    tester_present_s = 2.0         # in a non-default session, within S3 (5 s)

Its tester is :class:`~io_adapters.can.uds_tester.DiagnosticTester`: one
request at a time, P2 / P2*, and while a session other than the default is
held (a positive answer to a ``session`` request), tester present every
``tester_present_s``.  It runs in :meth:`UdsAdapter.pump`, between ticks, on
plant time (monotonic over resets): in lockstep the pump after each request,
so the answer to a request sent after one ``step`` is read by the pump after
the next ``step`` that let the ECU answer.

Control requests (docs/protocol.md, 5.1; served through
:meth:`UdsAdapter.handle_request`, the control handler's adapter requests):

* ``uds_request`` ``{service, ...}``: queues one service and replies with its
  ``ticket``; with ``wait = true`` (realtime only: in lockstep nothing would
  step the ECU while the client waits) the reply comes when the answer is
  there or P2 passed, as ``uds_result`` gives it.  Services (:data:`SERVICES`):
  ``read_dtc`` (``mask``, 0x19 0x02), ``clear_dtc`` (``group``, 0x14),
  ``read_did`` / ``write_did`` (``did``, ``data`` in hex, 0x22 / 0x2E),
  ``routine`` (``routine``, ``control`` start/stop/results, ``data``, 0x31),
  ``session`` (default/extended, 0x10), ``reset`` (hard/key_off_on/soft,
  0x11), ``tester_present`` (0x3E 0x00).
* ``uds_result`` ``{ticket}``: ``state`` (``pending``, ``answered``, ``timeout``)
  and, once answered, the answer decoded.

At most :data:`MAX_OUTSTANDING` requests wait for answers (a further one is
``bad_state``); the last :data:`MAX_RESULTS` results are kept.  Every bad
request is refused before anything is queued, with ``bad_request`` naming the
key, and counted (``requests_rejected`` in the status); nothing the tester
reads reaches the plant.
"""

from __future__ import annotations

from collections import OrderedDict

import can

from plant_models.config import ConfigReader
from plant_models.plant import Plant

from ..base import Adapter, AdapterError, LoopContext
from ..protocol import PROTOCOL_VERSION, PendingReply, ProtocolError
from .declaration import resolve_channel
from .uds_declaration import DECLARATION
from .uds_server import NRC, STATUS_BITS
from .uds_tester import S3_S, DiagnosticTester, UdsLink, normal_fixed_ids

MAX_OUTSTANDING = 8  # requests queued or waiting for an answer
MAX_RESULTS = 64  # results kept for uds_result (oldest forgotten first)
MAX_DATA_BYTES = 256  # a write's or a routine's data, bytes
MAX_FRAMES_PER_PUMP = 4096  # frames taken off the bus per pump (the rest in the next)
NRC_NAMES = {v: k for k, v in NRC.items()} | {0x78: "requestCorrectlyReceivedResponsePending"}
# service -> (SID, its argument keys)
SERVICES = {"read_dtc": (0x19, ("mask",)), "clear_dtc": (0x14, ("group",)), "read_did": (0x22, ("did",)),
            "write_did": (0x2E, ("did", "data")), "routine": (0x31, ("routine", "control", "data")),
            "session": (0x10, ("session",)), "reset": (0x11, ("reset",)), "tester_present": (0x3E, ())}
REQUEST_KEYS = ("adapter", "service", "wait", "mask", "group", "did", "data", "routine", "control", "session", "reset")
SUBFUNCTIONS = {"session": {"default": 0x01, "extended": 0x03},
                "reset": {"hard": 0x01, "key_off_on": 0x02, "soft": 0x03},
                "control": {"start": 0x01, "stop": 0x02, "results": 0x03}}


def _bad(message: str) -> ProtocolError:
    return ProtocolError("bad_request", message)


def _integer(req: dict, key: str, lo: int, hi: int, default: int | None = None) -> int:
    v = req.get(key, default)
    if v is None:
        raise _bad(f"uds_request: {req.get('service')} needs {key!r} (an integer {lo} .. 0x{hi:X})")
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise _bad(f"uds_request: {key!r} must be an integer {lo} .. 0x{hi:X}, got {v!r}")
    return v


def _hex(req: dict, key: str, required: bool) -> bytes:
    v = req.get(key)
    if v is None and not required:
        return b""
    if not isinstance(v, str) or len(v) > 2 * MAX_DATA_BYTES:
        raise _bad(f"uds_request: {key!r} must be a hex string of at most {MAX_DATA_BYTES} bytes")
    try:
        out = bytes.fromhex(v)
    except ValueError:
        raise _bad(f"uds_request: {key!r} is not hex: {v[:40]!r}") from None
    if required and not out:
        raise _bad(f"uds_request: {key!r} must hold at least one byte")
    return out


def _choice(req: dict, key: str, default: str | None = None) -> int:
    v = req.get(key, default)
    table = SUBFUNCTIONS[key]
    if v not in table:
        raise _bad(f"uds_request: {key!r} must be one of {', '.join(table)}, got {v!r}")
    return table[v]


def service_payload(req: dict) -> bytes:
    """The UDS request of a ``uds_request`` map, checked whole (ProtocolError ``bad_request`` naming the key)."""
    service = req.get("service")
    if service not in SERVICES:
        raise _bad(f"uds_request: 'service' must be one of {', '.join(SERVICES)}, got {service!r}")
    sid, keys = SERVICES[service]
    for k in req:
        if k in REQUEST_KEYS and k not in ("adapter", "service", "wait") + keys:
            raise _bad(f"uds_request: {service} takes {', '.join(keys) or 'no argument'}, not {k!r}")
    if service == "read_dtc":
        return bytes((sid, 0x02, _integer(req, "mask", 0, 0xFF, 0xFF)))
    if service == "clear_dtc":
        return bytes((sid,)) + _integer(req, "group", 0, 0xFFFFFF, 0xFFFFFF).to_bytes(3, "big")
    if service == "read_did":
        return bytes((sid,)) + _integer(req, "did", 0, 0xFFFF).to_bytes(2, "big")
    if service == "write_did":
        return bytes((sid,)) + _integer(req, "did", 0, 0xFFFF).to_bytes(2, "big") + _hex(req, "data", True)
    if service == "routine":
        return (bytes((sid, _choice(req, "control"))) + _integer(req, "routine", 0, 0xFFFF).to_bytes(2, "big")
                + _hex(req, "data", False))
    if service == "session":
        return bytes((sid, _choice(req, "session")))
    if service == "reset":
        return bytes((sid, _choice(req, "reset", "hard")))
    return b"\x3E\x00"


def decode_answer(service: str, ans: bytes) -> dict:
    """What a client reads of an answer: ``positive``, the bytes in hex, and per service the decoded fields."""
    out: dict = {"positive": ans[:1] != b"\x7F", "response": ans.hex()}
    if not out["positive"]:
        code = ans[2] if len(ans) >= 3 else -1
        return {**out, "nrc": code, "nrc_name": NRC_NAMES.get(code, "")}
    body = ans[1:]
    if service == "read_dtc" and len(body) >= 2:
        recs = body[2:]
        out["dtcs"] = [{"dtc": int.from_bytes(recs[k:k + 3], "big"), "status": recs[k + 3],
                        "bits": [n for n, b in STATUS_BITS.items() if recs[k + 3] & b]}
                       for k in range(0, len(recs) - 3, 4)]
    elif service == "read_did" and len(body) >= 2:
        data = body[2:]
        out.update(did=int.from_bytes(body[:2], "big"), data=data.hex())
        if 0 < len(data) <= 8:
            out["value"] = int.from_bytes(data, "big")
        if data and all(32 <= b < 127 for b in data):
            out["text"] = data.decode("ascii")
    elif service == "routine" and len(body) >= 3:
        out["record"] = body[3:].hex()
    elif service == "session" and len(body) >= 5:
        out.update(session=body[0], p2_ms=int.from_bytes(body[1:3], "big"),
                   p2_star_ms=10 * int.from_bytes(body[3:5], "big"))
    return out


class _Ticket:
    __slots__ = ("number", "service", "payload", "state", "answer", "requested_t", "answered_t")

    def __init__(self, number: int, service: str, payload: bytes, t: float):
        self.number, self.service, self.payload = number, service, payload
        self.state, self.answer, self.requested_t, self.answered_t = "pending", None, t, None

    def result(self) -> dict:
        out = {"ticket": self.number, "service": self.service, "request": self.payload.hex(), "state": self.state,
               "requested_t": self.requested_t, "answered_t": self.answered_t}
        if self.answer is not None:
            out.update(decode_answer(self.service, self.answer))
        return out


class _Wait(PendingReply):
    """A ``uds_request`` with ``wait``: replied when its answer is there or P2 passed."""

    def __init__(self, req: dict, ticket: _Ticket):
        self.req, self.ticket = req, ticket

    def ready(self) -> bool:
        return self.ticket.state in ("answered", "timeout")

    def reply(self) -> dict:
        return {"v": PROTOCOL_VERSION, "id": self.req.get("id"), "cmd": self.req.get("cmd"), "ok": True,
                **self.ticket.result()}


class UdsAdapter(Adapter):
    """A UDS tester on the bench's CAN bus, driven by control requests (module docstring)."""

    type_name = "uds"
    declaration = DECLARATION
    reads_commands = False  # it commands no plant input: the tick never calls it

    def __init__(self, name: str, options: dict):
        super().__init__(name, options)
        cfg = ConfigReader({k: v for k, v in options.items() if k not in ("type", "name", "enabled")},
                           f"adapter {name!r}")
        self.interface = cfg.string("interface", "virtual")
        self.channel_option = cfg.raw("channel", "gearbox-hil")  # vbus "*": the server's fresh channel (open)
        self.channel = self.channel_option
        self.bitrate = cfg.integer("bitrate", 500000, lo=10000, hi=1000000)
        self.link = _parse_link(cfg)
        cfg.reject_unknown()
        self.bus = self.tester = None
        self._tickets: OrderedDict[int, _Ticket] = OrderedDict()
        self._next_ticket = 1
        self._clock = 0  # ns of plant time, monotonic over resets
        self._last_plant_ns = 0
        self._stepped_ns = -1
        self.rejected: dict[str, int] = {}
        self.served = 0

    def open(self, plant: Plant, ctx: LoopContext) -> None:
        super().open(plant, ctx)
        self.channel = resolve_channel(self.interface, self.channel_option, ctx.fresh_channels)
        kwargs = dict(interface=self.interface, channel=self.channel, bitrate=self.bitrate)
        if self.interface == "socketcan":  # the kernel's filter: the tester's pump sees its answers only
            ln = self.link
            kwargs["can_filters"] = [dict(can_id=ln.response_id, can_mask=0x1FFFFFFF if ln.extended_id else 0x7FF,
                                          extended=ln.extended_id)]
        try:
            if self.interface == "vbus":
                from ..vbus import register

                register()
            self.bus = can.Bus(**kwargs)
        except Exception as exc:  # python-can raises many types for a missing interface
            raise AdapterError(f"{self.name}: cannot open {self.interface} {self.channel}: {exc}") from None
        self.tester = DiagnosticTester(self.bus, self.link, self.clock_ns)

    def clock_ns(self) -> int:
        """Plant time in ns, monotonic: a reset (plant time back to 0) does not turn the tester's timers back."""
        now = int(round(self.plant.time * 1e9))
        if now > self._last_plant_ns:
            self._clock += now - self._last_plant_ns
        self._last_plant_ns = now
        return self._clock

    # -- between ticks --------------------------------------------------------------------------------------
    def pump(self, until_ns: int = 0) -> None:
        """The answers off the bus, then the tester's task when something came or 1 ms of plant time passed."""
        t = self.tester
        if t is None:
            return
        fed = t.tp.frames_in + t.counters.other_frames
        t.pump(MAX_FRAMES_PER_PUMP)
        now = self.clock_ns()
        busy = not t.idle()
        if busy or t.tp.frames_in + t.counters.other_frames != fed or now - self._stepped_ns >= 1_000_000 \
                or self._stepped_ns < 0:
            self._stepped_ns = now
            t.step()

    # -- control requests -----------------------------------------------------------------------------------
    def control_requests(self) -> dict[str, tuple[str, ...]]:
        return {"uds_request": REQUEST_KEYS, "uds_result": ("adapter", "ticket")}

    def handle_request(self, cmd: str, req: dict):
        try:
            out = self._request(req) if cmd == "uds_request" else self._result(req)
        except ProtocolError as exc:
            self.rejected[exc.reason] = self.rejected.get(exc.reason, 0) + 1
            raise
        self.served += 1
        return out

    def _request(self, req: dict):
        payload = service_payload(req)
        wait = req.get("wait", False)
        if not isinstance(wait, bool):
            raise _bad(f"uds_request: 'wait' must be true or false, got {wait!r}")
        if wait and self.ctx.mode != "realtime":
            raise ProtocolError("wrong_mode", f"uds_request: 'wait' is for realtime; in {self.ctx.mode} the ECU "
                                "answers while the plant steps: send the request, step, then ask uds_result")
        if self.tester is None:
            raise ProtocolError("bad_state", f"uds_request: the {self.name} adapter is not open")
        waiting = sum(k.state == "pending" for k in self._tickets.values())
        if waiting >= MAX_OUTSTANDING:
            raise ProtocolError("bad_state", f"uds_request: {waiting} requests are waiting for answers already "
                                f"(at most {MAX_OUTSTANDING}); ask uds_result, step, and send it again")
        tk = _Ticket(self._next_ticket, req["service"], payload, round(self.plant.time, 9))
        self._next_ticket += 1
        self.tester.request(payload, lambda ans, tk=tk: self._answered(tk, ans))
        self._tickets[tk.number] = tk
        while len(self._tickets) > MAX_RESULTS:
            self._tickets.popitem(last=False)
        if wait:
            return _Wait(req, tk)
        return {"ticket": tk.number, "request": payload.hex(), "requested_t": tk.requested_t}

    def _answered(self, tk: _Ticket, ans: bytes | None) -> None:
        tk.state, tk.answer, tk.answered_t = ("timeout", None, None) if ans is None else \
            ("answered", ans, round(self.plant.time, 9))

    def _result(self, req: dict) -> dict:
        n = req.get("ticket")
        if isinstance(n, bool) or not isinstance(n, int):
            raise _bad(f"uds_result: 'ticket' must be the integer uds_request replied, got {n!r}")
        tk = self._tickets.get(n)
        if tk is None:
            raise _bad(f"uds_result: no ticket {n} (the last {MAX_RESULTS} are kept; the next is "
                       f"{self._next_ticket})")
        return tk.result()

    # -- life cycle and status --------------------------------------------------------------------------------
    def close(self) -> None:
        if self.bus is not None:
            self.bus.shutdown()
            self.bus = None
        self.tester = None

    def _status_internal(self) -> dict:
        t = self.tester
        ln = self.link
        return {"type": "uds", "channel": str(self.channel), "request_id": ln.request_id,
                "response_id": ln.response_id, "served": self.served, "requests_rejected": dict(self.rejected),
                "tickets": self._next_ticket - 1, **(t.status() if t is not None else {"open": False})}


def _parse_link(cfg: ConfigReader) -> UdsLink:
    """The tester's addressing and timing from the adapter's table (ConfigError naming the key)."""
    d = UdsLink()
    addressing = cfg.string("addressing", "normal", choices=("normal", "normal_fixed"))
    if addressing == "normal_fixed":
        try:
            ids = normal_fixed_ids(cfg.integer("ecu_address", 0x03, lo=0, hi=0xFD),
                                   cfg.integer("tester_address", 0xF1, lo=0, hi=0xFD))
        except ValueError as exc:
            raise cfg.error("tester_address", str(exc)) from None
    else:
        ext = cfg.boolean("extended_id", False)
        ids = {key: cfg.integer(key, getattr(d, key), lo=0, hi=0x1FFFFFFF if ext else 0x7FF)
               for key in ("request_id", "response_id", "functional_id")}
        if len(set(ids.values())) != 3:
            raise cfg.error("response_id", "the request, response and functional IDs must differ")
        ids["extended_id"] = ext
    link = UdsLink(**ids, stmin_ms=cfg.integer("stmin_ms", 0, lo=0, hi=127),
                   block_size=cfg.integer("block_size", 0, lo=0, hi=255),
                   p2_ms=cfg.number("p2_ms", d.p2_ms, positive=True),
                   p2_star_ms=cfg.number("p2_star_ms", d.p2_star_ms, positive=True),
                   tester_present_s=cfg.number("tester_present_s", d.tester_present_s, positive=True))
    if link.tester_present_s >= S3_S:
        raise cfg.error("tester_present_s", f"{link.tester_present_s:g} s: tester present must come within S3 (5 s)")
    return link


__all__ = ["UdsAdapter", "SERVICES", "MAX_OUTSTANDING", "MAX_RESULTS", "decode_answer", "service_payload"]
