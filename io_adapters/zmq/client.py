"""Python client of the gearbox-hil server, for controller developers and CI scripts.

>>> from io_adapters.zmq.client import HilClient
>>> with HilClient("tcp://127.0.0.1:5555") as hil:          # the control endpoint
...     hil.subscribe()                                     # the state stream
...     hil.set_inputs(p_c1=16.0, engine_torque=400.0)      # partial update by name
...     s = hil.latest_state(timeout_s=1.0)                 # newest state
...     print(s.tick, s.t, s.y["w_1"], s.y["gear"])

Lockstep (server started with ``--mode lockstep``): ``hil.step(10, inputs={...})``
applies the inputs, advances 10 ticks and returns the outputs after them.

With CURVE on the server (docs/protocol.md, section 8), pass this client's
key file and the server's public key: ``HilClient(endpoint,
client_key="keys/bench.key_secret", server_key="keys/server.key")``.

Every wait has a timeout: a control request that gets no reply raises
:class:`TimeoutError` (saying which request, which endpoint, how long, and
the likely causes), a state receive returns None.

Only the control endpoint is needed: the client asks the server for the
state and command endpoints (``describe``).  Everything here follows
docs/protocol.md; a client in another language can be written from that
document alone.
"""

from __future__ import annotations

import collections
import itertools
import secrets
import time
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping
from urllib.parse import urlsplit

import msgpack
import zmq

from ..protocol import PROTOCOL_VERSION, schema_id
from .codec import encode

__all__ = ["HilClient", "State", "StepResult", "ServerError"]


class ServerError(RuntimeError):
    """The server answered a control request with an error.

    Attributes
    ----------
    code : str
        The error code (``bad_request``, ``out_of_range``, ``wrong_mode``, ...; docs/protocol.md).
    message : str
        What exactly was wrong, for a human.
    """

    def __init__(self, cmd: str, code: str, message: str):
        super().__init__(f"{cmd}: {code}: {message}")
        self.cmd = cmd
        self.code = code
        self.message = message


@dataclass(frozen=True)
class State:
    """One state message.

    Attributes
    ----------
    seq : int
        Message sequence number (1, 2, ...; a gap means messages were dropped).
    tick : int
        Plant steps taken since the last reset.
    t : float
        Simulation time after those steps, s.
    ack : int
        ``seq`` of the last command message the server applied (0: none yet).
    watchdog : bool
        The command watchdog is tripped.
    status_word : int
        Status bits of the last plant step (0: nothing special).
    y : dict
        Output values by signal name, in their declared units.
    received_ns : int
        ``time.monotonic_ns()`` when the client received the message.
    faults : int
        Number of injected faults active in this tick (docs/faults.md).
    """

    seq: int
    tick: int
    t: float
    ack: int
    watchdog: bool
    status_word: int
    y: dict[str, float]
    received_ns: int = 0
    faults: int = 0


@dataclass(frozen=True)
class StepResult:
    """The reply to a lockstep ``step``: where the plant is after the steps, and its outputs."""

    tick: int
    t: float
    status_word: int
    status_or: int
    watchdog: bool
    y: dict[str, float] = field(default_factory=dict)
    scenario_finished: bool | None = None


class HilClient:
    """Connection to one gearbox-hil server.

    Parameters
    ----------
    control
        The server's control endpoint, e.g. ``"tcp://127.0.0.1:5555"``.
    timeout_s
        How long a control request may take before :class:`TimeoutError`.
        Lockstep steps of many ticks may need more (pass ``timeout_s`` to
        :meth:`step`).
    context
        A zmq context to share; by default the process-wide one.
    client_key
        This client's secret key file (``<name>.key_secret`` of
        ``gearbox-hil keys``), for a server with CURVE on.
    server_key
        The server's public key: its ``.key`` file or the 40-character Z85
        text.  Needed with ``client_key``.
    max_message_bytes
        Longest message this client accepts from the server (ZeroMQ drops
        the connection on a longer one); a ``describe`` of a large plant is
        a few tens of kB.
    """

    def __init__(self, control: str = "tcp://127.0.0.1:5555", timeout_s: float = 5.0,
                 context: zmq.Context | None = None, client_key: str | None = None,
                 server_key: str | bytes | None = None, max_message_bytes: int = 16 << 20):
        self.control_endpoint = control
        self.timeout_s = float(timeout_s)
        self._zctx = context or zmq.Context.instance()
        if (client_key is None) != (server_key is None):
            raise ValueError("client_key and server_key go together (CURVE needs both)")
        self.client_key = client_key
        self.server_key = server_key
        self.max_message_bytes = int(max_message_bytes)
        self._req: zmq.Socket | None = None
        self._push: zmq.Socket | None = None
        self._sub: zmq.Socket | None = None
        self._early: collections.deque = collections.deque()  # messages received while subscribe() waited
        self._ids = itertools.count(1)
        self._cmd_seq = itertools.count(1)
        self.plant: dict = {}
        self.endpoints: dict[str, str] = {}
        self.input_names: list[str] = []
        self.output_names: list[str] = []
        self.last_command_seq = 0

    # ------------------------------------------------------------------ connection
    def connect(self) -> "HilClient":
        """Open the control socket and ask the server for its plant and endpoints."""
        self._req = self._socket(zmq.REQ)
        self._req.setsockopt(zmq.REQ_RELAXED, 1)  # a timed-out request does not wedge the socket
        self._req.setsockopt(zmq.REQ_CORRELATE, 1)  # and its late reply is discarded
        self._req.connect(self.control_endpoint)
        rep = self.request("describe")
        self.plant = rep["plant"]
        self.input_names = list(self.plant["input_names"])
        self.output_names = list(self.plant["output_names"])
        self.endpoints = {k: self._reachable(v) for k, v in self.plant.get("endpoints", {}).items()}
        return self

    def _socket(self, kind: int) -> zmq.Socket:
        """A socket with LINGER 0, the message size cap and, if keys were given, CURVE (before connect)."""
        s = self._zctx.socket(kind)
        s.setsockopt(zmq.LINGER, 0)
        s.setsockopt(zmq.MAXMSGSIZE, self.max_message_bytes)
        if self.client_key is not None:
            from .curve import make_client

            make_client(s, self.client_key, self.server_key)
        return s

    def _reachable(self, endpoint: str) -> str:
        """A bound endpoint as this client can reach it (``0.0.0.0``/``*`` become the control host)."""
        u = urlsplit(endpoint)
        if u.scheme == "tcp" and u.hostname in ("0.0.0.0", "*", "::", None):
            host = urlsplit(self.control_endpoint).hostname or "127.0.0.1"
            return f"tcp://{host}:{u.port}"
        return endpoint

    def close(self) -> None:
        """Close all sockets (idempotent)."""
        for s in (self._req, self._push, self._sub):
            if s is not None:
                s.close(0)
        self._req = self._push = self._sub = None
        self._early.clear()

    def __enter__(self) -> "HilClient":
        return self.connect() if self._req is None else self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------ control
    def request(self, cmd: str, timeout_s: float | None = None, **args: Any) -> dict:
        """Send one control request and return its reply.

        Raises
        ------
        ServerError
            The server replied with ``ok: false``.
        TimeoutError
            No reply within the timeout.
        """
        if self._req is None:
            raise RuntimeError("not connected; call connect() first")
        rid = next(self._ids)
        msg = {"v": PROTOCOL_VERSION, "cmd": cmd, "id": rid}
        msg.update(args)
        self._req.send(encode(msg))
        t = self.timeout_s if timeout_s is None else timeout_s
        if not self._req.poll(int(t * 1000)):
            why = ("the server refuses this client's key, or is not running, busy or unreachable"
                   if self.client_key else "the server is not running, busy or unreachable, or it requires "
                   "CURVE keys (client_key, server_key)")
            raise TimeoutError(f"{cmd}: no reply from {self.control_endpoint} within {t:g} s ({why})")
        rep = msgpack.unpackb(self._req.recv(), raw=False)
        if not rep.get("ok"):
            err = rep.get("error", {})
            raise ServerError(cmd, err.get("code", "?"), err.get("message", ""))
        return rep

    def ping(self) -> dict:
        return self.request("ping")

    def describe(self) -> dict:
        """The plant's signals (names, units, ranges, defaults), the server's mode, period and endpoints."""
        return self.request("describe")["plant"]

    def status(self) -> dict:
        """State, timing telemetry (TET, lateness, overruns, rate), watchdog, scenario and adapter counters."""
        return self.request("status")["status"]

    def start(self) -> dict:
        return self.request("start")

    def pause(self) -> dict:
        return self.request("pause")

    def stop(self) -> dict:
        """Stop ticking; the next :meth:`start` begins a fresh run from t = 0."""
        return self.request("stop")

    def shutdown(self) -> dict:
        """End the server process (it prints its timing summary)."""
        return self.request("shutdown")

    def reset(self, inputs: Mapping[str, float] | None = None) -> dict:
        """Plant back to t = 0 (inputs to their defaults, then ``inputs``)."""
        return self.request("reset", inputs=dict(inputs)) if inputs else self.request("reset")

    def step(self, n: int = 1, inputs: Mapping[str, float] | None = None, outputs: bool = True,
             timeout_s: float | None = None) -> StepResult:
        """Lockstep: apply ``inputs`` (if any), advance ``n`` ticks, return the state after them."""
        args: dict[str, Any] = {"n": int(n), "outputs": outputs}
        if inputs:
            args["set"] = dict(inputs)
        rep = self.request("step", timeout_s=timeout_s, **args)
        return StepResult(tick=rep["tick"], t=rep["t"], status_word=rep["status_word"], status_or=rep["status_or"],
                          watchdog=rep["watchdog"], y=rep.get("y", {}), scenario_finished=rep.get("scenario_finished"))

    def set_inputs_acked(self, values: Mapping[str, float] | None = None, **kw: float) -> dict:
        """Set inputs through the control channel and wait for the server's confirmation."""
        upd = dict(values or {})
        upd.update(kw)
        return self.request("set", set=upd)

    def get(self) -> dict:
        """Current inputs ``u`` and outputs ``y`` by name, with ``tick`` and ``t``."""
        return self.request("get")

    def get_params(self, names: list[str] | None = None) -> dict[str, dict]:
        """Tunable parameters: ``{name: {value, unit, min, max, doc}}``."""
        return self.request("get_params", names=names)["params"] if names else self.request("get_params")["params"]

    def set_params(self, values: Mapping[str, float]) -> dict[str, dict]:
        """Change parameters at run time (all validated first; nothing changes on an error)."""
        return self.request("set_params", params=dict(values))["params"]

    def load_scenario(self, path: str | None = None, scenario: Mapping | None = None,
                      dt_s: float | None = None) -> dict:
        """Load a scenario (a file on the server, or its content as a dict); the plant resets to t = 0."""
        args: dict[str, Any] = {}
        if path is not None:
            args["path"] = path
        if scenario is not None:
            args["scenario"] = dict(scenario)
        if dt_s is not None:
            args["dt_s"] = dt_s
        return self.request("load_scenario", **args)["scenario"]

    def unload_scenario(self) -> dict:
        return self.request("unload_scenario")

    def clear_watchdog(self) -> bool:
        """End a watchdog trip (needed with ``recovery = "manual"``); returns whether it was tripped."""
        return bool(self.request("clear_watchdog")["was_tripped"])

    def set_fault(self, fault: Mapping[str, Any]) -> str:
        """Inject a fault (the map of docs/faults.md) from the server's next tick on; returns its name."""
        return self.request("fault_set", fault=dict(fault))["name"]

    def clear_fault(self, name: str | None = None) -> list[str]:
        """Clear the fault called ``name`` (None: every fault); returns the names cleared."""
        args = {} if name is None else {"name": name}
        return self.request("fault_clear", **args)["cleared"]

    def adapter_set(self, adapter: str, **values: int) -> dict:
        """Set values an adapter offers (e.g. ``adapter_set("j1939", requested_gear=3)``); returns those set."""
        return self.request("adapter_set", adapter=adapter, set=values)["set"]

    def faults(self) -> list[dict]:
        """The active faults, each the map it was set with plus its ``name``."""
        return self.request("fault_list")["faults"]

    def snapshot_save(self, name: str | None = None, path: str | None = None) -> dict:
        """Save the whole simulation state: in the server's memory under ``name``, or to ``path`` in its snapshot folder."""
        args = {k: v for k, v in (("name", name), ("path", path)) if v is not None}
        return self.request("snapshot_save", **args)

    def snapshot_restore(self, name: str | None = None, path: str | None = None) -> dict:
        """Continue from a snapshot (by ``name`` or ``path``, as saved); the run goes on bit-exactly as after the save."""
        args = {k: v for k, v in (("name", name), ("path", path)) if v is not None}
        return self.request("snapshot_restore", **args)

    # ------------------------------------------------------------------ commands (fire and forget)
    def set_inputs(self, values: Mapping[str, float] | None = None, **kw: float) -> int:
        """Send a partial input update on the command socket; returns its ``seq``.

        The server applies it at its next tick (or rejects it, counting the
        reason in its status); :attr:`State.ack` reports the last applied ``seq``.
        """
        self._ensure_push()
        upd = dict(values or {})
        upd.update(kw)
        seq = next(self._cmd_seq)
        self._push.send(encode({"v": PROTOCOL_VERSION, "seq": seq, "set": upd}), zmq.NOBLOCK)
        self.last_command_seq = seq
        return seq

    def send_raw_command(self, payload: bytes) -> None:
        """Send arbitrary bytes on the command socket (for testing the server's input checks)."""
        self._ensure_push()
        self._push.send(payload, zmq.NOBLOCK)

    def _ensure_push(self) -> None:
        if self._push is None:
            self._push = self._socket(zmq.PUSH)
            self._push.setsockopt(zmq.SNDHWM, 1000)
            self._push.connect(self.endpoints["command"])

    # ------------------------------------------------------------------ streams
    def subscribe(self, topics: tuple[str, ...] = ("state",), hwm: int = 100_000, wait: bool = True,
                  timeout_s: float | None = None) -> None:
        """Subscribe to the state socket's topics: ``"state"``, ``"status"``, ``"event"``.

        With ``wait`` (and a server of protocol revision 1 or later), returns
        once the server has the subscriptions: every message it publishes
        afterwards reaches this client, so a lockstep ``step`` right after it
        loses no state (docs/protocol.md, 3.3).  Messages that arrive
        meanwhile are kept for :meth:`recv`.  Without ``wait``, or with an
        older server, it returns at once and the first messages may be lost.

        Raises
        ------
        TimeoutError
            The server did not answer within ``timeout_s`` (default: the
            client's timeout).
        """
        if self._sub is None:
            self._sub = self._socket(zmq.SUB)
            self._sub.setsockopt(zmq.RCVHWM, hwm)
            self._sub.connect(self.endpoints["state"])
        for t in topics:
            self._sub.setsockopt(zmq.SUBSCRIBE, t.encode())
        if wait and self.plant.get("revision", 0) >= 1:
            self._hello(self.timeout_s if timeout_s is None else timeout_s)

    def _hello(self, timeout_s: float) -> None:
        """Subscribe to a topic of this call's own and wait for the server's answer on it (docs/protocol.md, 3.3)."""
        topic = b"hello/" + secrets.token_hex(8).encode()
        self._sub.setsockopt(zmq.SUBSCRIBE, topic)
        deadline = time.monotonic() + timeout_s
        try:
            while True:
                rem = deadline - time.monotonic()
                if rem <= 0 or not self._sub.poll(int(rem * 1000) + 1):
                    raise TimeoutError(f"subscribe: no answer from {self.endpoints['state']} within {timeout_s:g} s "
                                       "(the server is busy or gone)")
                frames = self._sub.recv_multipart()
                if frames[0] == topic:
                    return
                self._early.append((frames[0], frames[1], time.monotonic_ns()))
        finally:
            self._sub.setsockopt(zmq.UNSUBSCRIBE, topic)

    def _next_raw(self, timeout_s: float) -> tuple[bytes, bytes, int] | None:
        """The next (topic, body, arrival ns): kept ones first, then the socket's; None on timeout."""
        if self._early:
            return self._early.popleft()
        if not self._sub.poll(int(timeout_s * 1000)):
            return None
        topic, payload = self._sub.recv_multipart()
        return topic, payload, time.monotonic_ns()

    def _decode(self, topic: bytes, payload: bytes, now: int) -> State | dict:
        msg = msgpack.unpackb(payload, raw=False)
        if topic != b"state":
            msg["topic"] = topic.decode()
            return msg
        y = msg["y"]
        if isinstance(y, list):
            if msg.get("schema") != schema_id(self.output_names):
                raise ValueError("state message schema does not match the plant's outputs; reconnect")
            y = dict(zip(self.output_names, y))
        return State(seq=msg["seq"], tick=msg["tick"], t=msg["t"], ack=msg["ack"], watchdog=msg["wd"],
                     status_word=msg["st"], y=y, received_ns=now, faults=msg.get("faults", 0))

    def recv(self, timeout_s: float | None = None) -> State | dict | None:
        """The next message of a subscribed topic (a :class:`State`, or a dict with ``topic``); None on timeout."""
        if self._sub is None:
            raise RuntimeError("call subscribe() first")
        m = self._next_raw(self.timeout_s if timeout_s is None else timeout_s)
        return None if m is None else self._decode(*m)

    def recv_state(self, timeout_s: float | None = None) -> State | None:
        """The next state message (other topics are skipped); None on timeout."""
        deadline = time.monotonic() + (self.timeout_s if timeout_s is None else timeout_s)
        while True:
            rem = deadline - time.monotonic()
            if rem <= 0:
                return None
            m = self.recv(rem)
            if isinstance(m, State):
                return m
            if m is None:
                return None

    def latest_state(self, timeout_s: float | None = None) -> State | None:
        """The newest state: drains everything queued, waiting up to ``timeout_s`` if nothing is."""
        s = self.recv_state(timeout_s)
        if s is None:
            return None
        while (m := self._next_raw(0.0)) is not None:
            if m[0] == b"state":
                s = self._decode(*m)
        return s

    def states(self, timeout_s: float | None = None) -> Iterator[State]:
        """State messages as they arrive, until none comes within ``timeout_s``."""
        while True:
            s = self.recv_state(timeout_s)
            if s is None:
                return
            yield s

    def wait_for(self, predicate, timeout_s: float) -> State | None:
        """The first state for which ``predicate(state)`` is true, or None after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while True:
            rem = deadline - time.monotonic()
            if rem <= 0:
                return None
            s = self.recv_state(rem)
            if s is not None and predicate(s):
                return s


def main(argv: list[str] | None = None) -> int:
    """``python -m io_adapters.zmq.client [--control ENDPOINT] ping|describe|status|shutdown``: one request, JSON out.

    Exit code 0 on success, 1 on an error reply or a timeout (usable as a
    container health check).
    """
    import argparse
    import json
    import sys

    ap = argparse.ArgumentParser(prog="python -m io_adapters.zmq.client", description=main.__doc__.split("\n")[0])
    ap.add_argument("request", choices=("ping", "describe", "status", "shutdown"))
    ap.add_argument("--control", default="tcp://127.0.0.1:5555", help="the server's control endpoint")
    ap.add_argument("--timeout", type=float, default=5.0, help="seconds to wait for the reply")
    ap.add_argument("--client-key", help="this client's secret key file (CURVE; from `gearbox-hil keys`)")
    ap.add_argument("--server-key", help="the server's public key file or Z85 text (CURVE)")
    args = ap.parse_args(argv)
    try:
        c = HilClient(args.control, timeout_s=args.timeout, client_key=args.client_key, server_key=args.server_key)
        c._req = c._socket(zmq.REQ)
    except ValueError as exc:
        print(f"{args.request}: {exc}", file=sys.stderr)
        return 2
    c._req.connect(args.control)
    try:
        rep = c.request(args.request)
    except (ServerError, TimeoutError) as exc:
        print(f"{args.request}: {exc}", file=sys.stderr)
        return 1
    finally:
        c.close()
    print(json.dumps(rep, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
