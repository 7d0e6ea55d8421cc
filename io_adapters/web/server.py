"""The workspace's HTTP and WebSocket server: aiohttp in the workspace process (:mod:`io_adapters.web.process`).

It never touches the plant or the loop: it reads the state ring in shared
memory through its own decimated cursor, and hands control requests to the
server process through a :class:`~io_adapters.web.process.Link`, whose
replies, status maps and events come back the same way.

Routes (all behind the same checks):

* ``GET /``: the page (``workspace.html``, one file of HTML and JS);
* ``GET /plotly.min.js``: the plotting library, served from the installed
  ``plotly`` package (``plotly/package_data/plotly.min.js``);
* ``GET /workspace_plot.js``: the live plots' canvas renderer;
* ``GET /workspace_tools.js``: the page's cursors, XY plot, reference
  traces, gauges and lamps, parameter sets and layout files;
* ``GET /api/meta``: the signals (name, unit, input or output), the display
  decimation and the loop's period;
* ``GET /api/status``: the newest status map;
* ``POST /api/control``: one control request (JSON, the vocabulary of
  docs/protocol.md), answered with its reply;
* ``GET /ws``: the WebSocket: rows of the subscribed signals, status,
  events, and control requests with their replies (docs/workspace.md);
* ``GET /api/layouts``, ``GET`` and ``POST /api/layouts/NAME``: the named
  layouts, and ``/api/paramsets``, the parameter sets, the same way
  (:mod:`io_adapters.web.layouts`);
* ``GET /api/capture/ID.csv`` (``.parquet``, ``.mf4``): a capture
  (:mod:`io_adapters.web.exports`);
* ``GET /favicon.ico``: 204, the one route without the token (browsers ask
  for it on their own; the page names an inline icon anyway).

Checks, in this order, before any route: the ``Host`` header is a loopback
address (127.0.0.0/8 or ::1, parsed as an address, not a name that starts
with ``127.``), ``localhost`` or a name of ``allowed_hosts`` when no token
is set (a page of another site that rebinds its name to 127.0.0.1 is
refused); the access token, when set (``Authorization: Bearer TOKEN`` or
``?token=TOKEN``), else 401; the ``Origin`` of a WebSocket or a POST, when
the browser sends one, is the page's own on an allowed host (any host with a
token) or one of ``allowed_origins``, else 403.  Bodies and WebSocket
messages are capped at ``max_request_bytes`` (413, or the WebSocket closed
with 1009 after the rest of the message was read, so the close is not
destroyed by a TCP reset), their JSON at :data:`~io_adapters.web.guard.MAX_JSON_DEPTH` levels
(:mod:`io_adapters.web.guard`).
Every refusal is counted by reason (:meth:`WebServer.counters`).

Every request on the WebSocket gets exactly one answer (``subscribed``,
``reply`` or ``error``); answers wait in a queue of their own that is never
dropped (at most :data:`MAX_PENDING` requests of a page are read ahead of
their answers), while the updates (rows, status, events) of a page that
does not keep up are dropped and counted.
"""

from __future__ import annotations

import asyncio
import collections
import hmac
import time
from pathlib import Path

import numpy as np
from aiohttp import WSMsgType, web

from plant_models.run.ring import C_EVERY, C_NEXT, C_READ, F_TIME, I_FAULTS, I_STATUS, I_TICK, I_WATCHDOG, Cursor
from .archive import Archive, History
from .capture import MAX_KEPT, Trigger, TriggerError
from .exports import FORMATS, ExportError, capture_file
from .guard import BadJSON, LingeringWebSocket, host_name, loopback_name, parse_json
from .layouts import Layouts
from .messages import clean, column, dumps, plotly_js

PAGE = Path(__file__).with_name("workspace.html")
SCRIPTS = ("workspace_plot.js", "workspace_tools.js")  # the page's scripts besides plotly, served as they are
FLUSH_S = 0.1  # rows, status and events go to the pages 10 times a second (each message wakes the browser) ...
POLL_S = 0.01  # ... checked this often, so that a fast lockstep run's rows are taken before the ring overruns
CLIENT_QUEUE = 16  # updates (rows, status, events) waiting for one slow page; more are dropped (counted)
MAX_PENDING = 64  # requests of one page read and not yet answered; beyond, its socket is not read until one is
MAX_SIGNALS = 256  # signals one page may subscribe to
CONTROL_TIMEOUT_S = 60.0
REFUSALS = ("host", "token", "origin", "too_large", "bad_message", "too_many_clients")
INT_COLUMNS = (I_TICK, I_STATUS, I_FAULTS, I_WATCHDOG)  # the int columns a page sees with each row
MAX_FLUSH_ROWS = 4096  # display rows one update carries at most; the rest wait for the next one


class Client:
    """One open WebSocket: its subscription, its answers (never dropped) and its bounded queue of updates."""

    def __init__(self, ws: web.WebSocketResponse):
        self.ws = ws
        self.names: list[str] = []
        self.cols: list[int] = []
        self.updates: collections.deque = collections.deque()  # rows, status, events: at most CLIENT_QUEUE
        self.answers: collections.deque = collections.deque()  # (text, holds a slot): sent before any update
        self.slots = asyncio.Semaphore(MAX_PENDING)  # a request read takes one, its answer sent frees it
        self.wake = asyncio.Event()
        self.tasks: set = set()  # control requests on their way (held: a bare task may be collected)
        self.trigger: Trigger | None = None  # armed by the page (io_adapters.web.capture)
        self.every = 1  # ticks between two rows sent to this page: a multiple of the display cursor's (op rate)
        self.dropped = 0
        self.dropped_rows = 0

    def offer(self, text: str, rows: int = 0) -> None:
        """Queue an update ``text`` (carrying ``rows`` display rows), or drop and count it if the page lags."""
        if len(self.updates) >= CLIENT_QUEUE:
            self.dropped += 1
            self.dropped_rows += rows
            return
        self.updates.append(text)
        self.wake.set()

    def answer(self, text: str, slot: bool = True) -> None:
        """Queue the answer to a request (its slot freed once sent); never dropped."""
        self.answers.append((text, slot))
        self.wake.set()


class WebServer:
    """The aiohttp application of the workspace process; :meth:`serve` runs it until :meth:`stop`.

    Parameters
    ----------
    link
        The connection to the server process (control requests, status,
        events, counters): a :class:`~io_adapters.web.process.Link`.
    meta
        What a page learns first (signals with their ring columns, period, mode).
    ring
        The server's state ring, attached in shared memory.
    every
        Display decimation: one row every ``every`` ticks.
    """

    def __init__(self, link, meta: dict, ring, every: int, *, host: str, port: int, token: str,
                 max_request_bytes: int, max_clients: int, allowed_origins: tuple[str, ...], status_hz: float, log,
                 allowed_hosts: tuple[str, ...] = (), layouts: str | None = None, parameter_sets: str | None = None,
                 history_s: float = 0.0, recordings: str | None = None, max_download_bytes: int = 1 << 30):
        self.link = link
        self.meta = meta
        self.by_name = {s["name"]: s["col"] for s in meta["signals"]}
        self.host, self.port, self.token = host, port, token
        self.max_request_bytes = max_request_bytes
        self.max_clients = max_clients
        self.allowed_origins = allowed_origins
        self.allowed_hosts = tuple(h.lower() for h in allowed_hosts)
        self.layouts = Layouts(layouts, max_request_bytes, parse_json)
        self.paramsets = Layouts(parameter_sets, max_request_bytes, parse_json, kind="parameter set",
                                 route="/api/paramsets", option="parameter_sets")
        self.units = {s["name"]: s.get("unit", "") for s in meta["signals"]}
        self.ring = ring
        self.captures: collections.OrderedDict = collections.OrderedDict()  # id -> Capture, the newest MAX_KEPT
        self.status_hz = status_hz
        self.log = log
        self.refused = {r: 0 for r in REFUSALS}
        self.http_requests = 0
        self.clients: list[Client] = []
        self.closed_dropped = [0, 0]  # messages and rows dropped for pages closed since
        self.url = ""
        self.cursor = Cursor(ring, every=every, batch=256)
        self.archive = Archive(History(history_s, every * meta["period_s"], self.cursor.floats.shape[1], F_TIME),
                               self.by_name, recordings, max_download_bytes, column, dumps)  # history, recordings
        self._start_seq = int(self.cursor.state[C_NEXT])
        self._stop = asyncio.Event()
        self._page = PAGE.read_bytes()
        self._scripts = {n: Path(__file__).with_name(n).read_bytes() for n in SCRIPTS}
        self._plotly = plotly_js()
        self._status_sent = 0
        self._counters_soon = False
        self._cpu = (time.monotonic(), time.process_time())
        self._cpu_pct = None

    def stop(self) -> None:
        self._stop.set()

    def counters(self) -> dict:
        """Row, client and request counters (sent to the server process for its status)."""
        st = self.cursor.state
        seen = int(st[C_NEXT]) - self._start_seq
        now, cpu = time.monotonic(), time.process_time()
        if now - self._cpu[0] >= 0.5:  # this process's CPU time, % of one core, over the last half second or more
            self._cpu_pct = round(100.0 * (cpu - self._cpu[1]) / (now - self._cpu[0]), 1)
            self._cpu = (now, cpu)
        return {"clients": len(self.clients), "cpu_pct": self._cpu_pct, "display_every": int(st[C_EVERY]), "rows_shown": int(st[C_READ]),
                "rows_lost": self.cursor.lost, "rows_skipped": max(0, seen - int(st[C_READ]) - self.cursor.lost),
                "rows_dropped": self.closed_dropped[1] + sum(c.dropped_rows for c in self.clients),
                "http": {"requests": self.http_requests, "refused": dict(self.refused),
                         "client_messages_dropped": self.closed_dropped[0] + sum(c.dropped for c in self.clients)}}

    def _send_counters(self) -> None:
        """Counters to the server process at once, when pages open or close or a request is refused.

        Otherwise they ride on the status requests (:meth:`_status_forever`),
        so the loop serves no message of its own for them.
        """
        if not self._counters_soon:  # coalesce the refusals of one request
            self._counters_soon = True
            asyncio.get_running_loop().call_soon(self._send_counters_now)

    def _send_counters_now(self) -> None:
        self._counters_soon = False
        self.link.send_counters(self.counters())

    async def serve(self, on_listening) -> None:
        """Listen, call ``on_listening(url)``, serve until :meth:`stop` (a bind failure raises)."""
        app = web.Application(client_max_size=self.max_request_bytes, middlewares=[self._guard])
        app.router.add_get("/", self._page_handler)
        app.router.add_get("/plotly.min.js", self._plotly_handler)
        app.router.add_get("/api/meta", self._meta_handler)
        app.router.add_get("/api/status", self._status_handler)
        app.router.add_post("/api/control", self._control_handler)
        app.router.add_get("/ws", self._ws_handler)
        app.router.add_get("/favicon.ico", self._icon_handler)
        for name in SCRIPTS:
            app.router.add_get("/" + name, self._script_handler)
        self.layouts.add_routes(app.router)
        self.paramsets.add_routes(app.router)
        self.archive.add_routes(app.router)
        app.router.add_get("/api/capture/{id:[0-9]+}.{fmt:csv|parquet|mf4}", self._capture_handler)
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        try:
            site = web.TCPSite(runner, self.host, self.port, reuse_address=True)
            await site.start()
            port = site._server.sockets[0].getsockname()[1]
            host = f"[{self.host}]" if ":" in self.host else self.host
            self.url = f"http://{host}:{port}/"
            on_listening(self.url)
            tasks = [asyncio.ensure_future(self._flush_forever()), asyncio.ensure_future(self._status_forever())]
            await self._stop.wait()
            for t in tasks:
                t.cancel()
            for c in list(self.clients):
                await c.ws.close()
        finally:
            await runner.cleanup()

    async def _status_forever(self) -> None:
        """The server's status map about ``status_hz`` times a second while a page is open."""
        while True:
            await asyncio.sleep(1.0 / self.status_hz)
            if self.clients:
                await self.link.request_status(self.counters())

    # ------------------------------------------------------------------ checks
    def _refuse(self, reason: str, status: int, message: str) -> web.Response:
        self.refused[reason] += 1
        self._send_counters()
        return web.json_response({"ok": False, "error": {"code": reason, "message": message}}, status=status)

    def host_allowed(self, host_header: str) -> bool:
        """A loopback address, ``localhost`` or a name of ``allowed_hosts`` (with or without a port)."""
        name = host_name(host_header)
        return loopback_name(name) or name.lower() in self.allowed_hosts

    def _origin_ok(self, request: web.Request) -> bool:
        origin = request.headers.get("Origin")
        if origin is None:  # not a browser (a script or a test client): the Host and the token are its checks
            return True
        origin = origin.rstrip("/")
        if origin in self.allowed_origins:
            return True
        own = origin == f"{request.scheme}://{request.host}"
        return own and (bool(self.token) or self.host_allowed(origin.split("://", 1)[-1]))

    @web.middleware
    async def _guard(self, request: web.Request, handler):
        self.http_requests += 1
        if not self.token and not self.host_allowed(request.host):
            return self._refuse("host", 403, f"Host {request.host!r} is not a loopback address, localhost or a "
                                "name of allowed_hosts")
        if self.token and not (request.method == "GET" and request.path == "/favicon.ico"):
            auth = request.headers.get("Authorization", "")
            given = auth[7:] if auth.startswith("Bearer ") else request.query.get("token", "")
            if not hmac.compare_digest(given.encode(), self.token.encode()):
                return self._refuse("token", 401, "missing or wrong access token (?token=... or Authorization: "
                                    "Bearer ...)")
        if (request.method == "POST" or request.path == "/ws") and not self._origin_ok(request):
            return self._refuse("origin", 403, f"origin {request.headers.get('Origin')!r} is not allowed")
        try:
            return await handler(request)
        except web.HTTPRequestEntityTooLarge:
            return self._refuse("too_large", 413, f"the request is larger than {self.max_request_bytes} bytes")

    # ------------------------------------------------------------------ routes
    async def _page_handler(self, request: web.Request) -> web.Response:
        return web.Response(body=self._page, content_type="text/html", headers={
            "Content-Security-Policy": "default-src 'self'; script-src 'self' 'unsafe-inline'; "
                                       "style-src 'self' 'unsafe-inline'; connect-src 'self'; img-src 'self' data:",
            "X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer", "Cache-Control": "no-store"})

    async def _icon_handler(self, request: web.Request) -> web.Response:
        return web.Response(status=204, headers={"Cache-Control": "max-age=86400"})

    async def _capture_handler(self, request: web.Request) -> web.Response:
        cap = self.captures.get(int(request.match_info["id"]))
        if cap is None:
            return web.json_response({"ok": False, "error": {"code": "capture", "message": "no such capture (the "
                                      f"newest {MAX_KEPT} are kept)"}}, status=404)
        fmt = request.match_info["fmt"]
        try:  # Parquet and MF4 take a while for a large capture: off the event loop
            body = await asyncio.get_running_loop().run_in_executor(None, capture_file, cap, fmt, self.units)
        except ExportError as exc:
            return web.json_response({"ok": False, "error": {"code": "capture", "message": str(exc)}}, status=501)
        return web.Response(body=body, content_type=FORMATS[fmt], headers={
            "Content-Disposition": f'attachment; filename="capture-{cap.id}-tick{cap.at}.{fmt}"'})

    async def _script_handler(self, request: web.Request) -> web.Response:
        return web.Response(body=self._scripts[request.path.lstrip("/")], content_type="text/javascript", headers={"Cache-Control": "no-store"})

    async def _plotly_handler(self, request: web.Request) -> web.StreamResponse:
        return web.FileResponse(self._plotly, headers={"Cache-Control": "max-age=3600"})

    async def _meta_handler(self, request: web.Request) -> web.Response:
        return web.json_response(dict(self.meta, url=self.url))

    async def _status_handler(self, request: web.Request) -> web.Response:
        return web.Response(text=dumps(clean(self.link.status or {})), content_type="application/json")

    async def _control_handler(self, request: web.Request) -> web.Response:
        try:
            req = parse_json(await request.read())
        except BadJSON as exc:
            return self._refuse("bad_message", 400, f"the body is {exc}" if str(exc).startswith("not")
                                else f"the body is refused: {exc}")
        reply = await self.control(req)
        return web.Response(text=dumps(clean(reply)), content_type="application/json")

    async def control(self, req) -> dict:
        """Execute ``req`` in the server process through its control handler; its reply (never raises)."""
        if not isinstance(req, dict) or not isinstance(req.get("cmd"), str):
            self.refused["bad_message"] += 1
            self._send_counters()
            return {"v": 1, "ok": False, "error": {"code": "bad_message",
                                                   "message": "a request is a JSON object with a 'cmd' string"}}
        try:
            return await asyncio.wait_for(self.link.control(req), CONTROL_TIMEOUT_S)
        except asyncio.TimeoutError:
            return {"v": 1, "cmd": req.get("cmd"), "ok": False,
                    "error": {"code": "internal", "message": f"no reply within {CONTROL_TIMEOUT_S:g} s"}}
        except ConnectionError as exc:
            return {"v": 1, "cmd": req.get("cmd"), "ok": False,
                    "error": {"code": "internal", "message": f"the server process is gone: {exc}"}}

    # ------------------------------------------------------------------ WebSocket
    async def _ws_handler(self, request: web.Request) -> web.StreamResponse:
        if len(self.clients) >= self.max_clients:
            return self._refuse("too_many_clients", 503, f"{self.max_clients} pages are open already")
        # no permessage-deflate: it costs the workspace CPU for every update (a few kB/s, mostly to loopback), and
        # aiohttp deflates a large message in a task of its own whose error, when the page closes meanwhile, was
        # logged as "Task exception was never retrieved"
        ws = LingeringWebSocket(max_msg_size=self.max_request_bytes, heartbeat=20.0, compress=False)
        await ws.prepare(request)
        client = Client(ws)
        self.clients.append(client)
        self._send_counters()
        sender = asyncio.ensure_future(self._send_forever(client))
        client.answer(dumps(dict(self.meta, op="hello", url=self.url)), slot=False)
        if self.link.status is not None:
            client.offer(dumps({"op": "status", "status": clean(self.link.status)}))
        try:
            async for msg in ws:
                if msg.type == WSMsgType.ERROR:
                    self.refused["too_large" if ws.sent_code == 1009 else "bad_message"] += 1
                    self._send_counters()
                    continue
                await client.slots.acquire()  # a page that does not read its answers is not read either
                if msg.type == WSMsgType.TEXT:
                    await self._ws_message(client, msg.data)
                else:
                    self.refused["bad_message"] += 1
                    self._send_counters()
                    client.answer(dumps({"op": "error", "message": "messages are JSON text"}))
        finally:
            self.clients.remove(client)
            self.closed_dropped[0] += client.dropped
            self.closed_dropped[1] += client.dropped_rows
            if not self.clients and not self.archive.history.capacity:  # counted before the count says none is open
                self.cursor.skip_to_now()
            self._send_counters()
            sender.cancel()
            for t in client.tasks:
                t.cancel()
        return ws

    async def _send_forever(self, client: Client) -> None:
        """Answers first, then updates, as the page takes them."""
        try:
            while True:
                if not client.answers and not client.updates:
                    client.wake.clear()
                    await client.wake.wait()
                    continue
                text, slot = client.answers.popleft() if client.answers else (client.updates.popleft(), False)
                try:
                    await client.ws.send_str(text)
                finally:
                    if slot:
                        client.slots.release()
        except (ConnectionError, RuntimeError):
            pass
        finally:  # nothing will be sent any more: a reader waiting for a slot must not wait for ever
            for _ in range(MAX_PENDING):
                client.slots.release()

    async def _ws_message(self, client: Client, data: str) -> None:
        """Serve one message of a page: exactly one answer, whatever it holds."""
        try:
            msg = parse_json(data)
        except BadJSON as exc:
            self.refused["bad_message"] += 1
            self._send_counters()
            client.answer(dumps({"op": "error", "message": str(exc)}))
            return
        try:
            op = msg.get("op") if isinstance(msg, dict) else None
            if op == "subscribe":
                self._subscribe(client, msg.get("signals"))
            elif op == "arm":
                try:
                    client.trigger = Trigger(self.ring, self.by_name, float(self.meta["period_s"]), msg.get("trigger"))
                except TriggerError as exc:
                    self.refused["bad_message"] += 1
                    client.answer(dumps({"op": "error", "message": str(exc)}))
                else:
                    client.answer(dumps({"op": "armed", "trigger": client.trigger.spec,
                                         "signals": client.trigger.names}))
            elif op == "rate":
                self._rate(client, msg.get("rows_per_s"))
            elif op == "disarm":
                client.trigger = None
                client.answer(dumps({"op": "disarmed"}))
            elif op == "control":
                task = asyncio.ensure_future(self._ws_control(client, msg.get("id"), msg.get("req")))
                client.tasks.add(task)
                task.add_done_callback(client.tasks.discard)
            else:
                self.refused["bad_message"] += 1
                self._send_counters()
                client.answer(dumps({"op": "error", "message": f"unknown op {clean(op)!r}; ops are subscribe, "
                                                               "control, rate, arm, disarm"}))
        except Exception as exc:  # a defect here must not drop the page's socket: it gets its answer
            self.log.exception("the workspace failed to serve a message")
            client.answer(dumps({"op": "error", "message": f"internal error: {type(exc).__name__}"}))

    def _subscribe(self, client: Client, names) -> None:
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names) or len(names) > MAX_SIGNALS:
            self.refused["bad_message"] += 1
            client.answer(dumps({"op": "error", "message": f"subscribe: 'signals' is a list of at most "
                                                           f"{MAX_SIGNALS} signal names"}))
            return
        unknown = [n for n in names if n not in self.by_name]
        if unknown:
            self.refused["bad_message"] += 1
            client.answer(dumps({"op": "error", "message": f"subscribe: unknown signal(s) {', '.join(unknown[:5])}"}))
            return
        names = list(dict.fromkeys(names))
        client.names, client.cols = names, [self.by_name[n] for n in names]
        client.answer(dumps({"op": "subscribed", "signals": names}))

    def _rate(self, client: Client, rows_per_s) -> None:
        """A page's rows a second of run time: at most the display's, one row every multiple of its ticks."""
        every = int(self.cursor.state[C_EVERY])
        full = 1.0 / (float(self.meta["period_s"]) * every)  # the display cursor's rows a second
        if isinstance(rows_per_s, bool) or not isinstance(rows_per_s, (int, float)) or not 0 < rows_per_s < 1e9:
            self.refused["bad_message"] += 1
            client.answer(dumps({"op": "error", "message": "rate: 'rows_per_s' is a number > 0"}))
            return
        client.every = every * max(1, int(round(full / rows_per_s)))
        client.answer(dumps({"op": "rate", "every": client.every,
                             "rows_per_s": 1.0 / (float(self.meta["period_s"]) * client.every)}))

    async def _ws_control(self, client: Client, rid, req) -> None:
        try:
            reply = await self.control(req)
            text = dumps({"op": "reply", "id": rid if isinstance(rid, (int, str)) else None, "reply": clean(reply)})
        except Exception as exc:  # the request still gets its answer
            self.log.exception("the workspace failed to answer a control request")
            text = dumps({"op": "reply", "id": rid if isinstance(rid, (int, str)) else None, "reply": {
                "v": 1, "ok": False, "error": {"code": "internal", "message": f"{type(exc).__name__}"}}})
        client.answer(text)

    async def _flush_forever(self) -> None:
        due = 0.0  # every FLUSH_S; sooner while an eighth of the ring waits (a fast lockstep run would overrun it)
        while True:
            await asyncio.sleep(POLL_S)
            if time.monotonic() < due and self.cursor.pending() < self.cursor.ring.capacity // 8:
                continue
            due = time.monotonic() + FLUSH_S
            try:
                self._flush()
            except Exception:  # one bad flush must not end the page's updates
                self.log.exception("the workspace failed to send an update")

    def _take_rows(self):
        """The display rows written since the last update as (ints, floats); None: no page (kept in the history)."""
        cur = self.cursor
        if not self.clients and not self.archive.history.capacity:
            cur.skip_to_now()
            return None
        ints, floats, n_all = [], [], 0
        while n_all < MAX_FLUSH_ROWS:
            n = cur.take()
            if not n:
                break
            ints.append(cur.ints[:n, INT_COLUMNS])  # fancy index: a copy
            floats.append(cur.floats[:n].copy())
            n_all += n
        if not ints:
            return None
        ints, floats = np.concatenate(ints), np.concatenate(floats)
        self.archive.history.add(ints[:, 0], floats)
        return (ints, floats) if self.clients else None

    def _captures(self) -> None:
        """Feed the armed triggers; a capture completed goes to its page as ``captured`` (never dropped)."""
        for c in self.clients:
            if c.trigger is None:
                continue
            for cap in c.trigger.feed():
                self.captures[cap.id] = cap
                while len(self.captures) > MAX_KEPT:
                    self.captures.popitem(last=False)
                c.answer(dumps({"op": "captured", "capture": clean(cap.summary(f"api/capture/{cap.id}.csv"))}),
                         slot=False)
            if c.trigger.done:
                c.trigger = None

    @staticmethod
    def _rows_head(ints: np.ndarray, floats: np.ndarray, every: int):
        """The display rows whose tick is a multiple of ``every`` (a page's own decimation), with their head."""
        if every > 1:
            keep = ints[:, 0] % every == 0
            ints, floats = ints[keep], floats[keep]
        return ({"op": "rows", "tick": ints[:, 0].tolist(), "status": ints[:, 1].tolist(),
                 "faults": ints[:, 2].tolist(), "watchdog": ints[:, 3].tolist(), "t": column(floats[:, F_TIME])},
                ints, floats)

    def _flush(self) -> None:
        self._captures()
        rows = self._take_rows()
        link = self.link
        events = []
        while link.events:
            events.append(link.events.popleft())
        if not self.clients:
            return
        if rows is not None:
            heads = {}  # one head per decimation the pages asked for
            for c in self.clients:
                if c.every not in heads:
                    heads[c.every] = self._rows_head(*rows, c.every)
                head, ints, floats = heads[c.every]
                if len(ints):
                    c.offer(dumps(dict(head, values={n: column(floats[:, k]) for n, k in zip(c.names, c.cols)})),
                            len(ints))
        if events:
            text = dumps({"op": "events", "events": clean(events)})
            for c in self.clients:
                c.offer(text)
        if link.status is not None and link.status_version != self._status_sent:
            self._status_sent = link.status_version
            text = dumps({"op": "status", "status": clean(link.status)})
            for c in self.clients:
                c.offer(text)


__all__ = ["WebServer", "plotly_js", "clean"]
