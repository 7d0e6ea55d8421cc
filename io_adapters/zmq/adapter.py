"""ZeroMQ adapter: state stream (PUB), commands (PULL), control (ROUTER); msgpack everywhere.

The wire format is specified in docs/protocol.md.  Three sockets, all bound
by the server (127.0.0.1 by default, endpoints from the I/O config):

* **state** (XPUB): every ``publish_every``-th tick a two-frame message
  ``[b"state", msgpack]``; also ``[b"status", ...]`` every
  ``status_publish_s``, ``[b"event", ...]`` when clutches stick or break
  away, and the answer to a ``hello/<token>`` subscription (:mod:`.hello`).
* **command** (PULL): partial updates of input signals by name, each
  validated whole before it is applied.
* **control** (ROUTER): request/reply, served between ticks.  A ROUTER
  answers each request on the connection it came from, whatever any other
  peer sends; a REP socket serves its peers in a strict receive/send
  alternation that a broken peer (raw TCP noise on the port) could leave
  waiting, so an honest client's next request went unanswered.  A request
  is one body frame after its routing envelope; more frames are one
  ``bad_message`` reply.

Every socket caps the size of what a peer can make it hold
(``ZMQ_MAXMSGSIZE``, also on the state socket, where a subscription is an
inbound message: a 4 MiB subscription otherwise stalls the sending thread
while ZeroMQ builds its prefix tree); ZeroMQ drops the connection of a peer
that sends more.  With ``curve_secret_key`` set, every socket is a CURVE
server and a ZAP handler (:mod:`zmq.auth`) admits only the public keys in
``curve_clients`` (docs/protocol.md, section 8).

Nothing of this runs in the tick except two copies.  The tick writes its
state into the loop's state ring (:mod:`plant_models.run.ring`); between ticks,
:meth:`ZmqAdapter.pump` reads the ring through the adapter's own cursor,
packs each due row into the state message (one compiled call) and sends
it, and drains the command socket, decoding and validating each message
into a preallocated row of a :class:`~io_adapters.handover.CommandRows`
queue.  In the tick, :meth:`ZmqAdapter._read_internal` copies the waiting
rows into the plant's inputs (at most ``max_commands_per_tick`` a tick) and
``write`` does nothing.  The sequence number of a state message counts the
rows of its decimation, so rows the publisher lost (it fell a ring's length
behind) appear as a gap in ``seq`` and are counted as ``state_dropped``.

All sockets use LINGER 0 and non-blocking calls, so the loop never waits on
a peer; a slow subscriber loses state messages (PUB drops at its
high-water mark, ``send_hwm``) instead of stalling the loop.  The messages
queued for a slow subscriber take up to ``send_hwm`` times the message size
of memory, taken from the heap the first time a subscriber falls that far
behind and kept by the C allocator for reuse afterwards (a step in the
server's RSS, once per new high-water mark); so in realtime mode the default
``send_hwm`` is one second of states, and 10000 messages in lockstep and
afap, whose bursts of states (a ``step`` of many ticks) must not be dropped.

The words of the protocol (reasons, error codes, the input check) come from
:mod:`io_adapters.protocol`, their msgpack bytes from
:mod:`io_adapters.zmq.codec`; the scenario gate and the watchdog feed are the
base class's :meth:`~io_adapters.base.Adapter.read`, which calls
:meth:`ZmqAdapter._read_internal` here.
"""

from __future__ import annotations

import collections
import logging
import select
import time

import zmq

from plant_models.config import ConfigReader
from plant_models.plant import Plant

from ..base import TI_SCENARIO, Adapter, AdapterError, CommandCounts, LoopContext
from ..handover import Q_GOT, Q_PUT, CommandRows
from ..protocol import (COMMAND_ERRORS, ERROR_CODES, PROTOCOL_VERSION, PendingReply, ProtocolError, RejectLog,
                        error_reply)
from . import curve
from plant_models.run.ring import F_TIME, I_AUX, I_FAULTS, I_STATUS, I_TICK, I_WATCHDOG
from .codec import CommandDecoder, StateEncoder, acceptable_command, decode_request, encode
from .declaration import DECLARATION, DEFAULTS, ZmqFault  # noqa: F401 (DEFAULTS: re-exported)
from .endpoints import bind, describe_with_endpoints, endpoint_options, is_loopback, remote_options, short_name
from .hello import HelloResponder

log = logging.getLogger("gearbox_hil.zmq")

TOPIC_STATE = b"state"
TOPIC_STATUS = b"status"
TOPIC_EVENT = b"event"

MAX_ENVELOPE_FRAMES = 8  # routing frames before a control request's body (REQ sends 2, with REQ_CORRELATE 3)


def split_envelope(identity: bytes, rest: list) -> tuple[list, list]:
    """A ROUTER message as (routing envelope, body frames).

    The envelope is the peer's identity and, when an empty delimiter frame
    follows within :data:`MAX_ENVELOPE_FRAMES` frames (REQ, and a DEALER that
    imitates it), every frame up to and including it; a DEALER without a
    delimiter sends its body right after the identity.  Frames dropped by
    ``_recv_rest`` are ``None`` and count as body frames.
    """
    for i, f in enumerate(rest[:MAX_ENVELOPE_FRAMES]):
        if f == b"":
            return [identity, *rest[: i + 1]], rest[i + 1:]
    return [identity], rest


ROWS_PER_CHECK = 4  # state rows published between two reads of the clock when the pump has a deadline
BURST_PERIOD_S = 1e-3  # publish_batch = 0: the states of about this much time per burst (1 below 1 kHz)
MAX_DELAYED = 4096  # commands an injected delay may hold back at once (more are dropped and counted)


class ZmqAdapter(Adapter):
    """The ZeroMQ transport (``[[adapters]] type = "zmq"``).

    Options (all optional): ``state_endpoint``, ``command_endpoint``,
    ``control_endpoint`` (``tcp://host:port``; port ``0`` or ``*`` picks a
    free one, reported in :attr:`endpoints`), ``publish_every`` (ticks per state message, >= 1),
    ``publish_batch`` (realtime: states per send burst; 0, the default: about 1 ms of states),
    ``state_format`` (``"map"`` or ``"array"``), ``max_command_bytes``, ``max_request_bytes``,
    ``max_commands_per_tick``, ``status_publish_s`` (0: never),
    ``publish_events``, ``send_hwm``, ``receive_hwm``,
    ``max_subscription_bytes``; authentication: ``curve_secret_key`` (the
    server's secret key file), ``curve_clients`` (a folder of the allowed
    clients' public key files), ``insecure_remote`` (bind beyond loopback
    without CURVE; warns at every start).  It needs the loop's state ring
    (``LoopContext.ring``).

    Raises
    ------
    ConfigError
        A bad option, or an endpoint beyond loopback without CURVE and
        without ``insecure_remote = true``.
    """

    type_name = "zmq"
    declaration = DECLARATION  # --zmq-port and the endpoint options, the fault kinds

    def __init__(self, name: str, options: dict):
        super().__init__(name, options)
        cfg = ConfigReader(dict(options), "", "")
        self.endpoints_cfg = endpoint_options(cfg)
        self.publish_every = cfg.integer("publish_every", 1, lo=1, hi=1_000_000)
        self.state_format = cfg.string("state_format", "map", choices=("map", "array"))
        # 0: as many states as about 1 ms of ticks gives (resolved in open(), where the period is known)
        self.publish_batch = cfg.integer("publish_batch", 0, lo=0, hi=1000)
        self.max_command_bytes = cfg.integer("max_command_bytes", 4096, lo=64, hi=1 << 24)
        self.max_request_bytes = cfg.integer("max_request_bytes", 1 << 20, lo=1024, hi=1 << 28)
        self.max_commands_per_tick = cfg.integer("max_commands_per_tick", 64, lo=1, hi=100_000)
        self.status_publish_s = cfg.number("status_publish_s", 1.0, nonnegative=True)
        self.events_enabled = cfg.boolean("publish_events", True)
        # None: one second of states in realtime (bounds the memory a slow subscriber can take), else 10000
        self.send_hwm = cfg.integer("send_hwm", 0, lo=1) if cfg.has("send_hwm") else None
        self.receive_hwm = cfg.integer("receive_hwm", 10_000, lo=1)
        # the cap also applies to the CURVE handshake's commands (INITIATE is about 300 bytes): not below 512
        self.max_subscription_bytes = cfg.integer("max_subscription_bytes", 1024, lo=512, hi=1 << 16)
        self.curve = curve.server_config(cfg)
        self.insecure_remote = cfg.boolean("insecure_remote", False)
        cfg.reject_unknown()
        self.remote = remote_options(cfg, self.endpoints_cfg, self.curve is not None, self.insecure_remote)
        self._auth = None
        self._pending: list = []  # (envelope, PendingReply) of requests whose work runs off the loop's thread
        self.endpoints: dict[str, str] = {}
        self._zctx: zmq.Context | None = None
        self._pub = self._pull = self._ctl = None
        self._open = False
        self._rows_q = (0, 0)  # the command-row counters once open (nothing waits before)
        # injected faults (server/realtime/faults.py): drop commands, or hold them back a number of ticks
        self._drop_commands = False
        self._delay_ticks = 0
        self._delayed: collections.deque = collections.deque()
        self.fault_dropped = 0

    # ------------------------------------------------------------------ life cycle
    def open(self, plant: Plant, ctx: LoopContext) -> None:
        super().open(plant, ctx)
        ring = ctx.ring
        if ring is None:
            raise AdapterError(f"{self.name}: the ZeroMQ adapter publishes from the loop's state ring; "
                               "LoopContext.ring is None")
        self.ring = ring
        self.encoder = StateEncoder([s.name for s in plant.outputs], self.state_format)
        self.decoder = CommandDecoder(plant.inputs, self.max_command_bytes)
        self.command_rejects = RejectLog(log, f"{self.name} command")
        self.control_rejects = RejectLog(log, f"{self.name} control request", reasons=ERROR_CODES)
        # the ack (seq of the last applied command) is an aux column of the ring, written by the tick
        self._ack_aux = ring.claim_aux(f"{self.name}.ack")
        ring.aux[self._ack_aux] = 0
        self.encoder.bind_columns(I_TICK, I_WATCHDOG, I_STATUS, I_AUX + self._ack_aux, F_TIME, ring.f_y, I_FAULTS)
        self.cursor = ring.cursor(every=self.publish_every)
        if self.publish_batch == 0:
            self.publish_batch = max(1, int(BURST_PERIOD_S / (ctx.period_s * self.publish_every) + 1e-9))
        # realtime: once publish_batch states wait (rows of every tick before the decimation), send them all;
        # lockstep and afap send every state before the reply to a step / at once
        self._burst_rows = (self.publish_batch * self.publish_every
                            if ctx.mode == "realtime" and self.publish_batch > 1 else 0)
        if self._burst_rows > ring.capacity // 2:  # a burst would wait for rows the ring no longer holds
            raise AdapterError(f"{self.name}: publish_batch = {self.publish_batch} states of every "
                               f"{self.publish_every} ticks wait for {self._burst_rows} ticks, more than half the "
                               f"state ring ([loop] ring_rows = {ring.capacity}); lower publish_batch or raise "
                               "ring_rows")
        self._bursting = False
        self.rows = CommandRows(plant.n_in, 2 * self.max_commands_per_tick, ring.head, ring.aux_slot(self._ack_aux))
        self._rows_q = memoryview(self.rows.q)  # plain-int reads of the row counters in the tick
        # rehearse(): a decoder and a two-row queue of its own, and a command they accept
        self._dry_decoder = CommandDecoder(plant.inputs, self.max_command_bytes)
        self._dry_rows = CommandRows(plant.n_in, 2)
        self._dry_command = acceptable_command(plant, self._dry_decoder)
        self._scenario_seen = 0
        self.received = 0
        self.sent = 0
        self.send_errors = 0
        self.requests = 0
        self._last_status_pub = 0.0
        if self.send_hwm is None:
            self.send_hwm = (max(100, int(round(1.0 / (ctx.period_s * self.publish_every))))
                             if ctx.mode == "realtime" else 10_000)
        self._zctx = zmq.Context()
        try:  # options before bind: they apply to the connections peers make later
            if self.curve is not None:
                self._auth = curve.start_authenticator(self._zctx, self.curve)
            elif self.remote:
                log.warning("%s: insecure_remote = true: %s listen beyond loopback WITHOUT authentication; any "
                            "peer that reaches them can command the plant and shut the server down", self.name,
                            ", ".join(self.endpoints_cfg[k] for k in self.remote))
            # a subscription is an inbound message of the PUB socket: capped like every other one
            self._pub = self._socket(zmq.XPUB, "state_endpoint", {
                zmq.SNDHWM: self.send_hwm, zmq.MAXMSGSIZE: self.max_subscription_bytes})
            self._pull = self._socket(zmq.PULL, "command_endpoint", {
                zmq.RCVHWM: self.receive_hwm, zmq.MAXMSGSIZE: max(16 * self.max_command_bytes, 1 << 16)})
            self._ctl = self._socket(zmq.ROUTER, "control_endpoint", {
                zmq.MAXMSGSIZE: 4 * self.max_request_bytes, zmq.RCVHWM: 1000, zmq.SNDHWM: 1000})
        except BaseException:
            self.close()
            raise
        # The command socket's notification fd is readable when its events may have changed; polling it
        # (0.4 us) is much cheaper than asking zmq for its events (1.5-3 us) at every pump.
        self._pull_fd = self._pull.getsockopt(zmq.FD)
        self._ctl_fd = self._ctl.getsockopt(zmq.FD)
        self._pub_fd = self._pub.getsockopt(zmq.FD)  # the XPUB: readable when a subscription (a hello) arrives
        self._hello = HelloResponder(self._pub, ctx.mode == "realtime")
        self._fd_poll = select.poll()
        self._fd_poll.register(self._pull_fd, select.POLLIN)
        self._more_waiting = True
        self._noblock = zmq.NOBLOCK
        self._sndmore = zmq.SNDMORE | zmq.NOBLOCK
        self._open = True
        log.info("%s: state %s, commands %s, control %s", self.name, self.endpoints["state"],
                 self.endpoints["command"], self.endpoints["control"])

    def _socket(self, kind: int, key: str, options: dict):
        s, self.endpoints[short_name(key)] = bind(self._zctx, kind, key, self.endpoints_cfg[key], self.curve, options)
        return s

    def close(self) -> None:
        if self._pub is not None and self._open:
            try:
                self._publish_rows(0)  # the states of the last ticks, before the socket goes
            except Exception:  # closing must go on
                log.exception("%s: publishing the last states failed", self.name)
        for s in (self._pub, self._pull, self._ctl):
            if s is not None:
                s.close(0)
        self._pub = self._pull = self._ctl = None
        if self._auth is not None:
            self._auth.stop()
            self._auth = None
        if self._zctx is not None:
            self._zctx.term()
            self._zctx = None
        self._open = False

    def idle_fds(self) -> list[int]:
        """The control socket's and the state socket's notification descriptors (the command socket's is in
        :meth:`wake_fds`); the state socket (an XPUB) receives the subscriptions a hello answers."""
        return [self._ctl_fd, self._pub_fd] if self._ctl is not None else []

    def idle_pending(self) -> bool:
        """A control request or a subscription already queued (ZeroMQ's descriptors signal changes, not levels;
        asking re-arms them).

        Not the command socket's events: :meth:`pump` tracks its descriptor (asking would consume the change).
        """
        if self._ctl is None:
            return False
        return bool(self._ctl.getsockopt(zmq.EVENTS) & zmq.POLLIN) or bool(self._pub.getsockopt(zmq.EVENTS) & zmq.POLLIN)

    # ------------------------------------------------------------------ real-time path
    def read(self, tick: int, now_ns: int) -> None:
        """The base template (scenario gate, watchdog feed) when commands wait; else nothing, at once.

        Called in the real-time loop.
        """
        q = self._rows_q
        if q[Q_PUT] != q[Q_GOT]:
            Adapter.read(self, tick, now_ns)

    def compiled_read(self):
        """The command rows' compiled stage (:meth:`~io_adapters.handover.CommandRows.compiled_stage`): the same
        as :meth:`read`, in the compiled tick.  None before :meth:`open` or for a subclass that reads otherwise."""
        cls = type(self)
        if self._pull is None or cls.read is not ZmqAdapter.read or cls._read_internal is not ZmqAdapter._read_internal:
            return None
        plant = self.plant
        return self.rows.compiled_stage(plant.u, plant.u_rate, self._tick_info, self.max_commands_per_tick)

    def _read_internal(self, tick: int, now_ns: int, drive: bool) -> int:
        """Copy the commands decoded since the last tick into the inputs (if ``drive``); return how many.

        At most ``max_commands_per_tick``, in arrival order; while a scenario
        drives the inputs (not ``drive``) they are taken and dropped, and
        reported as rejected (``scenario_active``) between ticks.  Called in
        the real-time loop.
        """
        plant = self.plant
        return self.rows.apply(plant.u, plant.u_rate, drive, self.max_commands_per_tick)

    # ------------------------------------------------------------------ between ticks
    def wake_fds(self) -> list[int]:
        return [self._pull_fd] if self._pull is not None else []

    def pump(self, until_ns: int = 0) -> None:
        """Between ticks: decode arrived commands into rows for the tick, publish the rows the ticks wrote.

        Works until ``time.monotonic_ns()`` reaches ``until_ns`` (0: until
        done), but always publishes at least one due row.
        """
        if self._pull is None:
            return
        self._take_commands(until_ns)
        self._publish_rows(until_ns)
        dropped = self.rows.scenario_rejected()
        while self._scenario_seen < dropped:  # rows the tick dropped while a scenario drove the inputs
            self._scenario_seen += 1
            self._reject_scenario()

    def _reject_scenario(self) -> None:
        self.command_rejects.reject("scenario_active", "the inputs are driven by the loaded scenario; send "
                                    "unload_scenario first")

    def rehearse(self) -> None:
        """A canned command through a scratch decoder and a scratch row queue (see :meth:`Adapter.rehearse`)."""
        if self._dry_command is None:
            return
        dec = self._dry_decoder
        dec.decode(self._dry_command)
        v = dec.validator
        rows = self._dry_rows
        rows.put(dec.seq, v.idx, v.val, v.count)
        rows.q[Q_GOT] = rows.q[Q_PUT]  # taken at once: the scratch queue never fills

    def _take_commands(self, until_ns: int) -> None:
        """Drain the command socket into the command rows while rows are free (never blocks)."""
        if self._delayed:  # held back by an injected delay: hand over those now due, in order
            now = self.ring.written
            delayed, rows = self._delayed, self.rows
            while delayed and delayed[0][0] <= now and rows.free() > 0:
                _, seq, idx, v, n = delayed.popleft()
                rows.put(seq, idx, v, n)
        if not self._more_waiting and not self._fd_poll.poll(0):
            return
        # Drain until zmq says empty: only then does the fd signal the next arrival (it is edge-triggered).
        self._more_waiting = True
        pull = self._pull
        dec = self.decoder
        val = dec.validator
        rows = self.rows
        mono = time.monotonic_ns
        delayed = self._delayed
        while rows.free() > 0:
            try:
                raw = pull.recv(self._noblock)
            except zmq.Again:
                self._more_waiting = False
                return
            self.received += 1
            if pull.rcvmore:  # a multipart message is one bad message, never several commands
                n = len(self._recv_rest(pull, 0)) + 1
                self.command_rejects.reject("bad_message", f"a command is one frame, got a message of {n} frames")
                continue
            try:
                dec.decode(raw)
            except COMMAND_ERRORS as exc:
                self.command_rejects.reject(exc.reason, exc.message)
                continue
            if self._tick_slots[TI_SCENARIO]:
                self._reject_scenario()
                continue
            seq = dec.seq
            if self._drop_commands or self._delay_ticks:
                if self._drop_commands or len(delayed) >= MAX_DELAYED:
                    self.fault_dropped += 1
                else:
                    delayed.append((self.ring.written + self._delay_ticks, seq - (1 << 64) if seq >= 1 << 63 else seq,
                                    val.idx[:val.count].copy(), val.val[:val.count].copy(), val.count))
                continue
            rows.put(seq - (1 << 64) if seq >= 1 << 63 else seq, val.idx, val.val, val.count)  # uint64 bits
            if until_ns and mono() >= until_ns:
                return

    def _send_reply(self, envelope: list, reply: dict) -> None:
        try:  # to a peer that is gone or does not read, ROUTER drops the reply (never blocks)
            self._ctl.send_multipart([*envelope, encode(reply)], zmq.NOBLOCK)
        except zmq.ZMQError as exc:
            log.warning("%s: control reply not sent: %s", self.name, exc)

    def _send_ready_replies(self) -> bool:
        """Send the first finished deferred reply; True if one was sent (one piece of work)."""
        for i, (envelope, pending) in enumerate(self._pending):
            if pending.ready():
                del self._pending[i]
                reply = pending.reply()
                if not reply.get("ok"):
                    err = reply.get("error", {})
                    self.control_rejects.reject(err.get("code", "internal"),
                                                f"{reply.get('cmd')}: {err.get('message')}")
                self._send_reply(envelope, reply)
                return True
        return False

    @staticmethod
    def _recv_rest(sock, keep: int) -> list:
        """The remaining frames of a multipart message: the first ``keep`` kept, the others received and
        dropped (counted as ``None``)."""
        rest: list = []
        while sock.rcvmore:
            f = sock.recv(zmq.NOBLOCK)  # the frames of a message arrive together: never Again here
            rest.append(f if len(rest) < keep else None)
        return rest

    def _publish_rows(self, until_ns: int) -> None:
        """Send the state messages of the rows written since the last call, oldest first."""
        cur = self.cursor
        enc = self.encoder
        pub = self._pub
        mono = time.monotonic_ns
        # With a deadline, a few rows per take and the clock read after each take: a backlog (a tick rate
        # above the publishing rate for a moment) is sent over several gaps between ticks instead of one
        # batch running into the next deadline.
        max_rows = ROWS_PER_CHECK if until_ns else None
        if until_ns and self._burst_rows and not self._bursting:
            # A burst: each message sent wakes ZeroMQ's I/O thread and each subscriber; at 10 kHz, one
            # message a tick kept the other core so busy that the spinning loop was preempted (BENCHMARKS.md)
            if cur.pending() < self._burst_rows:
                return
            self._bursting = True
        while True:
            n = cur.take(max_rows)
            if n == 0:
                self._bursting = False
                return
            seq0 = cur.selected - n
            for j in range(n):
                buf = enc.encode_row(seq0 + j + 1, cur.ints, cur.floats, j)
                try:
                    pub.send(TOPIC_STATE, self._sndmore)
                    pub.send(buf, self._noblock)
                    self.sent += 1
                except zmq.ZMQError:
                    self.send_errors += 1
            if until_ns and mono() >= until_ns:
                return

    def poll_control(self, now_ns: int) -> None:
        """Answer hello subscriptions, serve at most one control request, publish the status when due, flush logs."""
        ctl = self._ctl
        if self._pub is not None:
            self._hello.serve(self.cursor.selected)
        if self._pending and self._send_ready_replies():
            return
        if ctl is not None and ctl.getsockopt(zmq.EVENTS) & zmq.POLLIN:
            try:
                first = ctl.recv(zmq.NOBLOCK)
            except zmq.Again:
                first = None
            if first is not None:
                self.requests += 1
                envelope, body = split_envelope(first, self._recv_rest(ctl, MAX_ENVELOPE_FRAMES + 2))
                if len(body) != 1 or body[0] is None:
                    msg = f"a request is one frame after its routing envelope, got {len(body)} frames"
                    self.control_rejects.reject("bad_message", msg)
                    reply = error_reply("bad_message", msg)
                else:
                    reply = self._handle_request(body[0])
                if isinstance(reply, PendingReply):
                    self._pending.append((envelope, reply))
                else:
                    self._send_reply(envelope, reply)
                return  # one piece of work per call: the loop checks its slack between calls
        if self.status_publish_s > 0 and self._pub is not None:
            now = time.monotonic()
            if now - self._last_status_pub >= self.status_publish_s:
                self._last_status_pub = now
                self._publish(TOPIC_STATUS, {"v": PROTOCOL_VERSION, "status": self.ctx.status()})
        self.command_rejects.flush()
        self.control_rejects.flush()

    def _handle_request(self, raw: bytes) -> dict:
        try:
            req = decode_request(raw, self.max_request_bytes)
        except ProtocolError as exc:
            self.control_rejects.reject(exc.reason, exc.message)
            return error_reply(exc.reason, exc.message)
        if self.ctx.control is None:
            return error_reply("internal", "this server has no control handler", req)
        reply = self.ctx.control(req)
        if isinstance(reply, PendingReply):
            return reply
        if not reply.get("ok"):
            err = reply.get("error", {})
            self.control_rejects.reject(err.get("code", "internal"), f"{req.get('cmd')}: {err.get('message')}")
        elif req.get("cmd") == "describe":
            describe_with_endpoints(reply, self.endpoints)
        return reply

    def publish_events(self, events: list[dict]) -> None:
        if self.events_enabled and self._pub is not None:
            self._publish(TOPIC_EVENT, {"v": PROTOCOL_VERSION, "events": events})

    def _publish(self, topic: bytes, obj: dict) -> None:
        try:
            self._pub.send_multipart([topic, encode(obj)], zmq.NOBLOCK)
        except zmq.ZMQError:
            self.send_errors += 1

    @property
    def ack(self) -> int:
        """``seq`` of the last command the tick applied (0: none)."""
        return int(self.ring.aux[self._ack_aux]) & 0xFFFF_FFFF_FFFF_FFFF if hasattr(self, "ring") else 0

    @property
    def applied(self) -> int:
        """Commands the tick applied."""
        return self.rows.applied if hasattr(self, "rows") else 0

    # ------------------------------------------------------------------ injected faults (between ticks)
    def check_fault(self, spec: ZmqFault) -> None:
        """``drop_commands``, or ``delay_commands`` by 1..10000 ticks: both fit (the declaration checked the map)."""

    def set_fault(self, spec: ZmqFault) -> None:
        """Valid commands are dropped (counted) or held back ``cycles`` ticks, from the next pump on."""
        self.check_fault(spec)
        if spec.kind == "drop_commands":
            self._drop_commands = True
        else:
            self._delay_ticks = int(spec.cycles)

    def clear_fault(self, spec: ZmqFault) -> None:
        """Back to normal; commands still held back are handed over at the next pump, before newer ones."""
        if spec.kind == "drop_commands":
            self._drop_commands = False
        else:
            self._delay_ticks = 0
            self._delayed = collections.deque((0,) + item[1:] for item in self._delayed)

    def command_counts(self) -> CommandCounts | None:
        if not hasattr(self, "decoder"):
            return None
        rej = self.command_rejects
        return CommandCounts(self.applied, dict(rej.counts), tuple(rej.last))

    def _status_internal(self) -> dict:
        if not hasattr(self, "decoder"):
            return {"open": False}
        return {
            "type": self.type_name, "open": self._open, "endpoints": dict(self.endpoints),
            "state_format": self.state_format, "publish_every": self.publish_every,
            "publish_batch": self.publish_batch,
            "received": self.received, "last_ack": self.ack, "dropped_by_fault": self.fault_dropped,
            "delayed_by_fault": len(self._delayed),
            "state_sent": self.sent, "state_dropped": self.cursor.lost, "send_errors": self.send_errors,
            "hellos_answered": self._hello.answered,
            "control_requests": self.requests, "control_errors": self.control_rejects.status(),
        }


__all__ = ["ZmqAdapter", "is_loopback"]  # is_loopback: from endpoints.py, re-exported
