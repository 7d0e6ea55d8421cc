"""The web workspace adapter (``[[adapters]] type = "web"``, ``gearbox-hil serve --web [PORT]``).

The page, its plotting library and a WebSocket are served by an aiohttp
server (:mod:`io_adapters.web.server`) in a thread of its own with its own
asyncio loop; it never runs in the loop's thread and never touches the plant.
What crosses between the two threads goes through a :class:`Bridge`:

* **states**: the adapter reads the state ring in :meth:`WebAdapter.pump`,
  between ticks, through a cursor of its own decimated for display (one row
  every ``every`` ticks, about ``display_hz`` rows a second of run time), and
  hands copies of the rows to the web thread.  The ring is read on the loop's
  thread because its reader (:func:`io_adapters.ring.ring_take`) is meant for
  the time between ticks (a reader in another thread of the same process
  would hold the GIL in the middle of a period).  The rows it skips by
  decimation, those it lost (the ring overran it) and those the web thread
  dropped (no page took them) are counted.  With no page open the cursor just
  skips to the newest row.
* **control**: a request from the page is queued with its reply callback and
  the loop is woken through a pipe (:meth:`WebAdapter.idle_fds`); the
  loop's thread executes it in :meth:`WebAdapter.poll_control` with the same
  :class:`server.realtime.control.ControlHandler` as the ZeroMQ control socket
  (``LoopContext.control``), one request per call, a file read (a
  :class:`~io_adapters.protocol.PendingReply`) answered once it is done.
* **status and events**: the loop's status map about ``status_hz`` times a
  second while a page is open, and the plant's events as they are collected.

Security (docs/workspace.md): the server listens on 127.0.0.1 by default;
beyond loopback it needs an access token (``token`` or ``token_file``), or
refuses to start.  The checks themselves are in :mod:`io_adapters.web.server`.
"""

from __future__ import annotations

import collections
import ipaddress
import logging
import os
import threading
import time
from pathlib import Path

import numpy as np

from plant_models.config import ConfigError, ConfigReader
from plant_models.plant import Plant

from ..base import Adapter, AdapterError, LoopContext
from ..protocol import PendingReply, error_reply
from ..ring import C_NEXT, C_READ, F_TIME, I_FAULTS, I_STATUS, I_TICK, I_WATCHDOG
from .declaration import DECLARATION, DEFAULT_PORT

log = logging.getLogger("gearbox_hil.web")

MAX_CHUNKS = 512  # row chunks waiting for the web thread; older ones are dropped (and counted) beyond this
INT_COLUMNS = (I_TICK, I_STATUS, I_FAULTS, I_WATCHDOG)  # the int columns a page sees with each row


def is_loopback_host(host: str) -> bool:
    """``host`` is reachable from this machine only (127.x, ::1, localhost)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:  # "0.0.0.0" parses; a name or "" does not: not provably loopback
        return False


class Bridge:
    """What the loop's thread and the web thread hand each other (each field has one writer).

    ``deque`` appends and pops are atomic, so neither side takes a lock.
    """

    def __init__(self, wake_fd: int):
        self._wake_fd = wake_fd
        self.requests: collections.deque = collections.deque()  # (request, reply callback), web -> loop
        self.chunks: collections.deque = collections.deque()  # (ints, floats) row copies, loop -> web
        self.events: collections.deque = collections.deque(maxlen=1000)  # plant events, loop -> web
        self.status: dict | None = None  # the newest status map, loop -> web
        self.status_version = 0
        self.clients = 0  # open WebSockets, written by the web thread
        self.chunks_dropped_rows = 0  # rows of chunks dropped because the web thread did not take them

    def submit(self, req: dict, on_reply) -> None:
        """Queue a control request (web thread); ``on_reply(reply)`` is called on the loop's thread."""
        self.requests.append((req, on_reply))
        try:
            os.write(self._wake_fd, b"!")
        except (BlockingIOError, OSError):  # the pipe is full: the loop is awake already (or closing)
            pass

    def put_rows(self, ints: np.ndarray, floats: np.ndarray) -> None:
        """Hand over copies of state rows (loop thread)."""
        while len(self.chunks) >= MAX_CHUNKS:
            self.chunks_dropped_rows += len(self.chunks.popleft()[0])
        self.chunks.append((ints, floats))


class WebAdapter(Adapter):
    """The web workspace (``[[adapters]] type = "web"``).

    Options (all optional): ``host`` (default ``127.0.0.1``), ``port``
    (default 8765; 0: any free port, reported in :attr:`url`), ``token`` or
    ``token_file`` (the access token, at least 16 characters; required
    beyond loopback), ``display_hz`` (rows a second of run time sent to the
    page, 1..1000, default 100), ``status_hz`` (status maps a second while a
    page is open, default 2), ``max_request_bytes`` (largest HTTP body or
    WebSocket message taken, default 64 KiB), ``max_clients`` (open
    WebSockets, default 8), ``allowed_origins`` (WebSocket origins besides
    the page's own).

    Raises
    ------
    ConfigError
        A bad option, or a host beyond loopback without a token.
    """

    type_name = "web"
    declaration = DECLARATION  # --web [PORT], the [web] table

    def __init__(self, name: str, options: dict):
        super().__init__(name, options)
        cfg = ConfigReader(dict(options), "", "")
        self.host = cfg.string("host", "127.0.0.1")
        self.port = cfg.integer("port", DEFAULT_PORT, lo=0, hi=65535)
        self.token = self._read_token(cfg)
        self.display_hz = cfg.number("display_hz", 100.0, positive=True)
        if not 1.0 <= self.display_hz <= 1000.0:
            raise cfg.error("display_hz", f"must be 1..1000 rows a second, got {self.display_hz:g}")
        self.status_hz = cfg.number("status_hz", 2.0, positive=True)
        self.max_request_bytes = cfg.integer("max_request_bytes", 1 << 16, lo=1024, hi=1 << 22)
        self.max_clients = cfg.integer("max_clients", 8, lo=1, hi=256)
        origins = cfg.raw("allowed_origins", [])
        if not isinstance(origins, list) or not all(isinstance(o, str) for o in origins):
            raise cfg.error("allowed_origins", "must be a list of origins such as \"http://bench-pc:8765\"")
        self.allowed_origins = tuple(o.rstrip("/") for o in origins)
        cfg.reject_unknown()
        if not is_loopback_host(self.host) and not self.token:
            raise cfg.error("host", f"the workspace would listen on {self.host}, beyond loopback, without an access "
                            "token; set token_file (or token) in the web adapter's table")
        self.url = ""
        self._server = None
        self._wake_r = self._wake_w = -1
        self._pending: list = []  # (PendingReply, reply callback) of requests whose work runs off the loop thread
        self._last_status = 0.0
        self.requests = 0
        self.request_errors = 0

    @staticmethod
    def _read_token(cfg: ConfigReader) -> str:
        token = cfg.string("token", "")
        path = cfg.string("token_file", "")
        if token and path:
            raise cfg.error("token_file", "set token or token_file, not both")
        if path:
            try:
                token = Path(path).expanduser().read_text().strip()
            except OSError as exc:
                raise cfg.error("token_file", f"cannot read {path}: {exc.strerror}") from None
        if token and (len(token) < 16 or any(c.isspace() for c in token)):
            raise cfg.error("token", "an access token is at least 16 characters without spaces "
                            "(e.g. python -c 'import secrets; print(secrets.token_urlsafe())')")
        return token

    # ------------------------------------------------------------------ life cycle
    def open(self, plant: Plant, ctx: LoopContext) -> None:
        super().open(plant, ctx)
        ring = ctx.ring
        if ring is None:
            raise AdapterError(f"{self.name}: the web workspace reads the loop's state ring; LoopContext.ring is None")
        try:
            from .server import WebServer
        except ImportError as exc:
            raise AdapterError(f"{self.name}: the web workspace needs aiohttp and plotly "
                               f"(pip install 'gearbox-hil[web]'): {exc}") from None
        self.ring = ring
        self.every = max(1, int(round(1.0 / (ctx.period_s * self.display_hz))))
        self.cursor = ring.cursor(every=self.every, batch=256)
        self._start_seq = int(self.cursor.state[C_NEXT])
        units = {s.name: s.unit for s in (*plant.outputs, *plant.inputs)}
        self.signals = [{"name": n, "unit": units.get(n, ""), "kind": kind, "col": ring.f_y + k if kind == "output"
                         else ring.f_u + k}
                        for kind, names in (("output", ring.output_names), ("input", ring.input_names))
                        for k, n in enumerate(names)]
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self.bridge = Bridge(self._wake_w)
        meta = {"period_s": ctx.period_s, "mode": ctx.mode, "every": self.every, "signals": self.signals,
                "columns": {"t": F_TIME, "ints": ["tick", "status", "faults", "watchdog"]}}
        try:
            self._server = WebServer(self.bridge, meta, host=self.host, port=self.port, token=self.token,
                                     max_request_bytes=self.max_request_bytes, max_clients=self.max_clients,
                                     allowed_origins=self.allowed_origins, log=log)
        except (ImportError, OSError) as exc:  # plotly missing, or its package without plotly.min.js
            self.close()
            raise AdapterError(f"{self.name}: the workspace's plotting library: {exc} "
                               "(pip install 'gearbox-hil[web]')") from None
        try:
            self.url = self._server.start()
        except Exception as exc:
            self.close()
            raise AdapterError(f"{self.name}: cannot serve the workspace on {self.host}:{self.port}: {exc}") from None
        log.info("%s: workspace at %s%s", self.name, self.url, " (with ?token=<the access token>)" if self.token else "")

    def close(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None
        for fd in (self._wake_r, self._wake_w):
            if fd >= 0:
                os.close(fd)
        self._wake_r = self._wake_w = -1

    def idle_fds(self) -> list[int]:
        """The pipe the web thread writes to when a control request waits (a level: readable until drained)."""
        return [self._wake_r] if self._wake_r >= 0 else []

    def read(self, tick: int, now_ns: int) -> None:
        """Nothing: the page sends no commands, only control requests (between ticks).  Called in the real-time loop."""

    # ------------------------------------------------------------------ between ticks
    def pump(self, until_ns: int = 0) -> None:
        """Copy the display rows written since the last call to the web thread (nothing while no page is open)."""
        cur = self.cursor
        if not self.bridge.clients:
            if cur.pending():
                cur.skip_to_now()
            return
        mono = time.monotonic_ns
        while cur.pending():
            n = cur.take()
            if n:
                self.bridge.put_rows(cur.ints[:n, INT_COLUMNS], cur.floats[:n].copy())  # fancy index: a copy
            if until_ns and mono() >= until_ns:
                return

    def poll_control(self, now_ns: int) -> None:
        """Serve one control request from the page (or send a finished one), refresh the page's status."""
        try:
            while os.read(self._wake_r, 4096):
                pass
        except (BlockingIOError, OSError):
            pass
        for i, (pending, on_reply) in enumerate(self._pending):
            if pending.ready():
                del self._pending[i]
                self._answer(pending.reply(), on_reply)
                return
        b = self.bridge
        if b.requests:
            req, on_reply = b.requests.popleft()
            self.requests += 1
            if self.ctx.control is None:
                reply = error_reply("internal", "this server has no control handler", req)
            else:
                reply = self.ctx.control(req)
            if isinstance(reply, PendingReply):
                self._pending.append((reply, on_reply))
            else:
                self._answer(reply, on_reply)
            return
        if b.clients:
            now = time.monotonic()
            if now - self._last_status >= 1.0 / self.status_hz:
                self._last_status = now
                st = self.ctx.status()
                st["workspace"] = self._status_internal()
                b.status = st
                b.status_version += 1

    def _answer(self, reply: dict, on_reply) -> None:
        if not reply.get("ok"):
            self.request_errors += 1
        on_reply(reply)

    def publish_events(self, events: list[dict]) -> None:
        if self._server is not None and self.bridge.clients:
            self.bridge.events.extend(events)

    def _status_internal(self) -> dict:
        if self._server is None:
            return {"type": self.type_name, "open": False}
        st = self.cursor.state
        seen = int(st[C_NEXT]) - self._start_seq
        return {
            "type": self.type_name, "open": True, "endpoints": {"url": self.url},
            "clients": self.bridge.clients, "display_every": self.every,
            "rows_shown": int(st[C_READ]), "rows_lost": self.cursor.lost,
            "rows_skipped": max(0, seen - int(st[C_READ]) - self.cursor.lost),
            "rows_dropped": self.bridge.chunks_dropped_rows,
            "control_requests": self.requests, "control_errors": self.request_errors,
            "http": self._server.counters(),
        }


__all__ = ["WebAdapter", "Bridge", "DEFAULT_PORT", "is_loopback_host"]
