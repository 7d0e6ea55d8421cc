"""The web workspace adapter (``[[adapters]] type = "web"``, ``gearbox-hil serve --web [PORT]``).

The page, its plotting library and a WebSocket are served by an aiohttp
server (:mod:`io_adapters.web.server`) in a process of its own, the
workspace process (:mod:`io_adapters.web.process`), so that nothing it does
holds the real-time loop's interpreter lock.  The adapter, in the server
process, starts it, and between the two there are only:

* **the state ring in shared memory**: the workspace process reads it
  through a cursor of its own, decimated for display (one row every
  ``every`` ticks, about ``display_hz`` rows a second of run time), and
  counts the rows it skips by decimation (or because no page is open) and
  those it lost (the ring overran it).  The loop's process does nothing per
  tick for the web: the adapter has no ``read``, ``write`` or ``pump`` work
  (the loop leaves it out of its tick, see :attr:`Adapter.reads_commands`).
* **one Unix socket** (a JSON object a line, see
  :mod:`io_adapters.web.process`): a control request from a page arrives
  there, wakes the idle loop (:meth:`WebAdapter.idle_fds`) and is executed
  between ticks in :meth:`WebAdapter.poll_control` by the same
  :class:`server.realtime.control.ControlHandler` as the ZeroMQ control
  socket (``LoopContext.control``), a file read (a
  :class:`~io_adapters.protocol.PendingReply`) answered once it is done.  The
  status map goes back when the workspace asks for it (about ``status_hz``
  times a second while a page is open), the plant's events while a page is
  open, and the workspace's counters come the other way for the adapter's
  status.

Security (docs/workspace.md): the server listens on 127.0.0.1 by default;
beyond loopback it needs an access token (``token`` or ``token_file``), or
refuses to start.  The token goes to the workspace process through the
socket, not its command line.  The checks themselves are in
:mod:`io_adapters.web.server`.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from plant_models.config import ConfigError, ConfigReader
from plant_models.plant import Plant

from ..base import Adapter, AdapterError, LoopContext
from ..protocol import PendingReply, error_reply
from plant_models.run.ring import F_TIME
from .declaration import DECLARATION, DEFAULT_PORT

log = logging.getLogger("gearbox_hil.web")

START_TIMEOUT_S = 60.0  # the workspace process imports aiohttp and numpy and binds its port within this
STOP_TIMEOUT_S = 5.0
RESTART_FIRST_S = 1.0  # a workspace process that died is started again after this, doubled at each failure ...
RESTART_MAX_S = 30.0  # ... up to this; the back-off starts over once one has served for RESTART_STABLE_S
RESTART_STABLE_S = 60.0
MAX_OUTBOX = 1 << 24  # bytes waiting for a workspace process that does not read; beyond, it is stopped


def _jsonable(obj):
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, (bytes, bytearray)):
        return obj.hex()
    if isinstance(obj, (set, frozenset)):
        return sorted(obj)
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"{type(obj).__name__} is not JSON")


def _finite(x: float) -> float | None:
    return float(x) if np.isfinite(x) else None


def _input_range(sig) -> dict:
    """An input's accepted range for the page (``lo``/``hi`` None when unbounded; ``allowed``: its only values)."""
    return {"lo": _finite(sig.lo), "hi": _finite(sig.hi), "default": _finite(sig.default), "integer": bool(sig.integer),
            "allowed": [float(v) for v in sig.allowed], "doc": sig.doc}


def _line(obj) -> bytes:
    return json.dumps(obj, separators=(",", ":"), default=_jsonable).encode() + b"\n"


def is_loopback_host(host: str) -> bool:
    """``host`` is reachable from this machine only (127.x, ::1, localhost)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:  # "0.0.0.0" parses; a name or "" does not: not provably loopback
        return False


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
    the page's own), ``allowed_hosts`` (``Host`` names besides the loopback
    ones accepted without a token), ``layouts`` (the folder of the named
    layouts, created when the first is saved), ``parameter_sets`` (the
    folder of the named parameter sets, likewise), ``history_s`` (seconds
    of display rows the workspace process keeps for a page to load, default
    120; 0: none), ``max_download_bytes`` (the largest recording the page
    may download, default 1 GiB; the recordings are the I/O config's
    ``[recording] folder``'s).  ``token_file``,
    ``layouts`` and ``parameter_sets`` are relative to the I/O config's
    folder (the declaration's ``path_options``; an adapter made without a
    config: the working directory).

    Raises
    ------
    ConfigError
        A bad option, or a host beyond loopback without a token.
    """

    type_name = "web"
    declaration = DECLARATION  # --web [PORT], the [web] table
    reads_commands = False  # the tick does not call read: the page sends control requests only
    shares_ring = True  # the workspace process reads the state ring in shared memory

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
        hosts = cfg.raw("allowed_hosts", [])
        if not isinstance(hosts, list) or not all(isinstance(h, str) and h and not any(c in h for c in " :/[]@")
                                                  for h in hosts):
            raise cfg.error("allowed_hosts", "must be a list of host names without port, such as \"bench-pc.lab\" "
                            "(names besides the loopback ones a browser may use for the workspace)")
        self.allowed_hosts = tuple(h.lower() for h in hosts)
        layouts, psets = cfg.string("layouts", ""), cfg.string("parameter_sets", "")
        self.layouts = str(Path(layouts).expanduser().resolve()) if layouts else None
        self.parameter_sets = str(Path(psets).expanduser().resolve()) if psets else None
        self.history_s = cfg.number("history_s", 120.0, lo=0.0, hi=3600.0)
        self.max_download_bytes = cfg.integer("max_download_bytes", 1 << 30, lo=1024, hi=1 << 40)
        cfg.reject_unknown()
        if not is_loopback_host(self.host) and not self.token:
            raise cfg.error("host", f"the workspace would listen on {self.host}, beyond loopback, without an access "
                            "token; set token_file (or token) in the web adapter's table")
        self.url = ""
        self.proc: subprocess.Popen | None = None
        self.sock: socket.socket | None = None
        self._inbox = b""
        self._outbox = bytearray()
        self._pending: list = []  # (PendingReply, request id) of requests whose work runs off the loop thread
        self.remote: dict = {}  # the workspace process's last counters
        self.requests = 0
        self.request_errors = 0
        self.every = 1
        self.restarts = 0  # times the workspace process was started again after it died
        self._job: dict | None = None
        self._fd: int | None = None  # the descriptor number the idle loop waits on, the same across restarts
        self._quiet: socket.socket | None = None  # keeps that number open and silent while no process serves
        self._restart_at: float | None = None  # monotonic time of the next start; None: none planned
        self._backoff_s = RESTART_FIRST_S
        self._started_at = 0.0
        self._starting_until: float | None = None  # a restart waits for its `ready` until then
        self._cpu = (time.monotonic(), time.process_time())
        self.cpu_pct: float | None = None

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
        if ring is None or ring.shm_name is None:
            raise AdapterError(f"{self.name}: the web workspace reads the loop's state ring from another process; "
                               "the ring must be in shared memory (LoopContext.ring)")
        try:
            import aiohttp  # noqa: F401  (checked here: the workspace process would fail later and less clearly)
        except ImportError as exc:
            raise AdapterError(f"{self.name}: the web workspace needs aiohttp and plotly "
                               f"(pip install 'gearbox-hil[web]'): {exc}") from None
        self.every = max(1, int(round(1.0 / (ctx.period_s * self.display_hz))))
        units = {s.name: s.unit for s in (*plant.outputs, *plant.inputs)}
        signals = [{"name": n, "unit": units.get(n, ""), "kind": kind, "col": ring.f_y + k if kind == "output"
                    else ring.f_u + k}
                   for kind, names in (("output", ring.output_names), ("input", ring.input_names))
                   for k, n in enumerate(names)]
        ranges = {s.name: _input_range(s) for s in plant.inputs}
        for sig in signals:  # an instrument bound to an input offers its range (the server checks it again)
            if sig["kind"] == "input" and sig["name"] in ranges:
                sig.update(ranges[sig["name"]])
        meta = {"period_s": ctx.period_s, "mode": ctx.mode, "every": self.every, "signals": signals,
                "columns": {"t": F_TIME, "ints": ["tick", "status", "faults", "watchdog"]}}
        options = {"host": self.host, "port": self.port, "token": self.token, "status_hz": self.status_hz,
                   "max_request_bytes": self.max_request_bytes, "max_clients": self.max_clients,
                   "allowed_origins": list(self.allowed_origins), "allowed_hosts": list(self.allowed_hosts),
                   "layouts": self.layouts, "parameter_sets": self.parameter_sets, "history_s": self.history_s,
                   "recordings": ctx.recording_folder, "max_download_bytes": self.max_download_bytes}
        job = {"op": "job", "shm": ring.shm_name, "every": self.every, "meta": meta, "options": options,
               "parent_pid": os.getpid(), "cpus": self._cpus(ctx.loop_cpus)}
        try:
            self.url = self._start(job)
        except Exception:
            self.close()
            raise
        # a restart serves the same URL, also when port 0 let the kernel choose it
        self._job = dict(job, options=dict(options, port=int(self.url.rsplit(":", 1)[1].strip("/"))))
        log.info("%s: workspace at %s%s", self.name, self.url, " (with ?token=<the access token>)" if self.token else "")

    @staticmethod
    def _cpus(loop_cpus: tuple[int, ...]) -> list[int] | None:
        """The CPUs the workspace process may run on: this process's, less the loop's (None: no change).

        Taken when the adapter opens, before the loop pins its thread; a
        restart (from the loop's thread) gets the same set.  A loop pinned to
        every CPU leaves nothing else: the workspace then shares them.
        """
        if not loop_cpus or not hasattr(os, "sched_getaffinity"):
            return None
        rest = sorted(os.sched_getaffinity(0) - set(loop_cpus))
        return rest or None

    def _start(self, job: dict) -> str:
        """Start the workspace process, hand it the job, wait for its URL (or its reason not to serve)."""
        mine = self._spawn(job)
        mine.settimeout(START_TIMEOUT_S)
        end = time.monotonic() + START_TIMEOUT_S
        while b"\n" not in self._inbox:
            try:
                part = mine.recv(1 << 16)
            except socket.timeout:
                part = None
            if not part or time.monotonic() > end:
                code = self.proc.poll()
                raise AdapterError(f"{self.name}: the workspace process " + (
                    f"exited with {code} before it served" if code is not None else
                    f"did not serve within {START_TIMEOUT_S:g} s"))
            self._inbox += part
        line, self._inbox = self._inbox.split(b"\n", 1)
        msg = json.loads(line)
        mine.setblocking(False)
        if msg.get("op") != "ready":
            raise AdapterError(f"{self.name}: {msg.get('error', msg)}")
        return msg["url"]

    def _spawn(self, job: dict) -> socket.socket:
        """Start the workspace process and hand it ``job``; the socket to it (at the same number as before)."""
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        if self._fd is None:
            self._fd = mine.fileno()
        else:  # the idle loop waits on this number: the new socket takes it over
            os.dup2(mine.fileno(), self._fd)
            mine.close()
            mine = socket.socket(fileno=self._fd)
            if self._quiet is not None:
                self._quiet.close()
                self._quiet = None
        self.sock = mine
        self._inbox, self._outbox = b"", bytearray()
        root = Path(__file__).resolve().parents[2]
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(root), os.environ.get("PYTHONPATH", ""))
                                                          if p))
        try:
            self.proc = subprocess.Popen([sys.executable, "-m", "io_adapters.web.process", str(theirs.fileno())],
                                         pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, env=env)
        finally:
            theirs.close()
        self._started_at = time.monotonic()
        mine.sendall(_line(job))
        return mine

    def close(self) -> None:
        self._restart_at = None
        self._stop_process(final=True)
        if self._quiet is not None:
            self._quiet.close()
            self._quiet = None

    def _stop_process(self, final: bool) -> None:
        """Stop the workspace process; unless ``final``, its socket's number stays open (silent) for a restart."""
        proc, sock = self.proc, self.sock
        self.proc = self.sock = None
        self._starting_until = None
        if sock is not None:
            try:
                sock.setblocking(True)
                sock.settimeout(1.0)
                sock.sendall(bytes(self._outbox) + _line({"op": "stop"}))
            except OSError:  # the workspace process is gone already
                pass
            if final:
                sock.close()
            else:  # a socket pair whose other end stays open: never readable, so the idle loop does not spin
                quiet, self._quiet = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
                os.dup2(quiet.fileno(), sock.fileno())
                quiet.close()
                sock.detach()
        if proc is not None:
            try:
                proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                log.warning("%s: the workspace process did not stop within %g s; killed", self.name, STOP_TIMEOUT_S)
                proc.kill()
                proc.wait()

    def idle_fds(self) -> list[int]:
        """The socket to the workspace process (a level: readable while a message waits)."""
        return [self.sock.fileno()] if self.sock is not None else []

    def read(self, tick: int, now_ns: int) -> None:
        """Nothing: the page sends no commands, only control requests (the loop does not call it)."""

    # ------------------------------------------------------------------ between ticks
    def poll_control(self, now_ns: int) -> None:
        """Serve one message of the workspace process (a control request, a status request, its counters).

        Also sends what waits for it and the replies of finished file reads.
        """
        if self.sock is None:
            if self._restart_at is not None and time.monotonic() >= self._restart_at:
                self._restart()
            return
        if self._starting_until is not None and time.monotonic() > self._starting_until:
            self._lost(f"did not serve within {START_TIMEOUT_S:g} s of its start")
            return
        self._flush_outbox()
        for i, (pending, rid) in enumerate(self._pending):
            if pending.ready():
                del self._pending[i]
                self._answer(pending.reply(), rid)
                return
        if b"\n" not in self._inbox:
            try:
                part = self.sock.recv(1 << 16)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                part = b""
            if not part:
                self._lost("closed the link")
                return
            self._inbox += part
            if b"\n" not in self._inbox:
                return
        line, self._inbox = self._inbox.split(b"\n", 1)
        self._serve(json.loads(line))

    def idle_pending(self) -> bool:
        """A whole message already read waits (the socket would not signal it again)."""
        return b"\n" in self._inbox

    def _serve(self, msg: dict) -> None:
        op = msg.get("op")
        if op == "control":
            self.requests += 1
            req = msg.get("req")
            if self.ctx.control is None:
                reply = error_reply("internal", "this server has no control handler", req)
            else:
                reply = self.ctx.control(req)
            if isinstance(reply, PendingReply):
                self._pending.append((reply, msg.get("id")))
            else:
                self._answer(reply, msg.get("id"))
        elif op == "status":
            if msg.get("counters"):
                self.remote = msg["counters"]
            self._measure_cpu()
            self._send({"op": "status", "status": self.ctx.status()})
        elif op == "counters":
            self.remote = msg.get("counters") or {}
        elif op == "ready" and self._starting_until is not None:
            self._starting_until = None
            self.restarts += 1
            log.warning("%s: the workspace process was started again (pid %d) at %s", self.name, msg.get("pid", 0),
                        msg.get("url"))
        elif op == "failed":
            self._lost(f"cannot serve: {msg.get('error')}")

    def _restart(self) -> None:
        """Start the workspace process again; its ``ready`` (or ``failed``) arrives as a message (no wait here)."""
        self._restart_at = None
        self.remote = {}
        try:
            self._spawn(self._job)
        except OSError as exc:
            self._lost(f"could not be started again: {exc}")
            return
        self.sock.setblocking(False)
        self._starting_until = time.monotonic() + START_TIMEOUT_S

    def _answer(self, reply: dict, rid) -> None:
        if not reply.get("ok"):
            self.request_errors += 1
        self._send({"op": "reply", "id": rid, "reply": reply})

    def _send(self, obj) -> None:
        self._outbox += _line(obj)
        if len(self._outbox) > MAX_OUTBOX:
            self._lost(f"took no message for {len(self._outbox)} bytes")
            return
        self._flush_outbox()

    def _flush_outbox(self) -> None:
        if self._outbox and self.sock is not None:
            try:
                n = self.sock.send(self._outbox)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                self._lost("closed the link")
                return
            del self._outbox[:n]

    def _lost(self, why: str) -> None:
        """The workspace process died or misbehaves: stop it, start it again after a back-off; the server runs on."""
        code = self.proc.poll() if self.proc is not None else None
        if time.monotonic() - self._started_at >= RESTART_STABLE_S:
            self._backoff_s = RESTART_FIRST_S
        self._stop_process(final=False)
        if self._job is None:
            return
        self._restart_at = time.monotonic() + self._backoff_s
        log.error("%s: the workspace process %s%s; the server runs on, the workspace starts again in %g s", self.name,
                  why, f" (exit code {code})" if code is not None else "", self._backoff_s)
        self._backoff_s = min(RESTART_MAX_S, 2 * self._backoff_s)

    def _measure_cpu(self) -> None:
        """The server process's CPU time since the last status request, in % of one core (all its threads)."""
        now, cpu = time.monotonic(), time.process_time()
        wall = now - self._cpu[0]
        if wall >= 0.05:
            self.cpu_pct = round(100.0 * (cpu - self._cpu[1]) / wall, 1)
            self._cpu = (now, cpu)

    def publish_events(self, events: list[dict]) -> None:
        if self.sock is not None and self.remote.get("clients"):
            self._send({"op": "events", "events": events})

    def _status_internal(self) -> dict:
        if self.sock is None or self._starting_until is not None:
            return {"type": self.type_name, "open": False, "restarts": self.restarts,
                    "restart_in_s": None if self._restart_at is None else max(0.0, self._restart_at - time.monotonic())}
        r = self.remote
        return {
            "type": self.type_name, "open": True, "endpoints": {"url": self.url},
            "pid": self.proc.pid if self.proc is not None else None,
            "clients": r.get("clients", 0), "display_every": self.every,
            "rows_shown": r.get("rows_shown", 0), "rows_lost": r.get("rows_lost", 0),
            "rows_skipped": r.get("rows_skipped", 0),
            "rows_dropped": r.get("rows_dropped", 0),
            "control_requests": self.requests, "control_errors": self.request_errors, "restarts": self.restarts,
            "cpu_pct": {"server": self.cpu_pct, "workspace": r.get("cpu_pct")},
            "http": r.get("http", {"requests": 0, "refused": {}, "client_messages_dropped": 0}),
        }


__all__ = ["WebAdapter", "DEFAULT_PORT", "is_loopback_host"]
