"""The workspace's HTTP and WebSocket server: aiohttp in the workspace process (:mod:`io_adapters.web.process`).

It never touches the plant or the loop: it reads the state ring in shared
memory through its own decimated cursor, and hands control requests to the
server process through a :class:`~io_adapters.web.process.Link`, whose
replies, status maps and events come back the same way.

Routes (all behind the same checks):

* ``GET /``: the page (``workspace.html``, one file of HTML and JS);
* ``GET /plotly.min.js``: the plotting library, served from the installed
  ``plotly`` package (``plotly/package_data/plotly.min.js``);
* ``GET /api/meta``: the signals (name, unit, input or output), the display
  decimation and the loop's period;
* ``GET /api/status``: the newest status map;
* ``POST /api/control``: one control request (JSON, the vocabulary of
  docs/protocol.md), answered with its reply;
* ``GET /ws``: the WebSocket: rows of the subscribed signals, status,
  events, and control requests with their replies (docs/workspace.md).

Checks, in this order, before any route: the ``Host`` header names this
machine when no token is set (a page of another site that rebinds its name
to 127.0.0.1 is refused); the access token, when set (``Authorization:
Bearer TOKEN`` or ``?token=TOKEN``), else 401; the ``Origin`` of a
WebSocket or a POST, when the browser sends one, is the page's own or an
allowed one, else 403.  Bodies and WebSocket messages are capped at
``max_request_bytes`` (413, or the WebSocket closed with 1009).  Every
refusal is counted by reason (:meth:`WebServer.counters`).
"""

from __future__ import annotations

import asyncio
import hmac
import json
import math
from pathlib import Path

import numpy as np
from aiohttp import WSMsgType, web

from ..ring import C_EVERY, C_NEXT, C_READ, F_TIME, I_FAULTS, I_STATUS, I_TICK, I_WATCHDOG, Cursor

PAGE = Path(__file__).with_name("workspace.html")
FLUSH_S = 1.0 / 30.0  # rows, status and events go to the pages about 30 times a second
CLIENT_QUEUE = 16  # messages waiting for one slow page; more are dropped (counted) instead of held
MAX_SIGNALS = 256  # signals one page may subscribe to
CONTROL_TIMEOUT_S = 60.0
REFUSALS = ("host", "token", "origin", "too_large", "bad_message", "too_many_clients")
INT_COLUMNS = (I_TICK, I_STATUS, I_FAULTS, I_WATCHDOG)  # the int columns a page sees with each row
MAX_FLUSH_ROWS = 4096  # display rows one update carries at most; the rest wait for the next one


def plotly_js() -> Path:
    """The path of ``plotly.min.js`` in the installed plotly package."""
    import plotly

    path = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing (plotly {plotly.__version__})")
    return path


def clean(obj):
    """``obj`` with every non-finite float as None and tuples as lists (JSON that ``JSON.parse`` reads)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [clean(v) for v in obj]
    if isinstance(obj, np.generic):
        return clean(obj.item())
    if isinstance(obj, (bytes, bytearray)):
        return obj.hex()
    return obj


def column(a: np.ndarray) -> list:
    """A float column as a JSON-ready list (non-finite values as None)."""
    vals = a.tolist()
    if not np.isfinite(a).all():
        vals = [v if math.isfinite(v) else None for v in vals]
    return vals


def dumps(obj) -> str:
    return json.dumps(obj, separators=(",", ":"))


def _loopback_name(host_header: str) -> bool:
    host = host_header.rsplit(":", 1)[0] if not host_header.endswith("]") else host_header
    if host.startswith("[") and "]" in host:
        host = host[1:host.index("]")]
    return host == "localhost" or host == "::1" or host.startswith("127.")


class Client:
    """One open WebSocket: its subscription and its bounded send queue."""

    def __init__(self, ws: web.WebSocketResponse):
        self.ws = ws
        self.names: list[str] = []
        self.cols: list[int] = []
        self.queue: asyncio.Queue = asyncio.Queue(CLIENT_QUEUE)
        self.dropped = 0
        self.dropped_rows = 0

    def offer(self, text: str, rows: int = 0) -> None:
        """Queue ``text`` (carrying ``rows`` display rows) for the page, or drop and count it if the page lags."""
        try:
            self.queue.put_nowait(text)
        except asyncio.QueueFull:
            self.dropped += 1
            self.dropped_rows += rows


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
                 max_request_bytes: int, max_clients: int, allowed_origins: tuple[str, ...], status_hz: float, log):
        self.link = link
        self.meta = meta
        self.by_name = {s["name"]: s["col"] for s in meta["signals"]}
        self.host, self.port, self.token = host, port, token
        self.max_request_bytes = max_request_bytes
        self.max_clients = max_clients
        self.allowed_origins = allowed_origins
        self.status_hz = status_hz
        self.log = log
        self.refused = {r: 0 for r in REFUSALS}
        self.http_requests = 0
        self.clients: list[Client] = []
        self.closed_dropped = [0, 0]  # messages and rows dropped for pages closed since
        self.url = ""
        self.cursor = Cursor(ring, every=every, batch=256)
        self._start_seq = int(self.cursor.state[C_NEXT])
        self._stop = asyncio.Event()
        self._page = PAGE.read_bytes()
        self._plotly = plotly_js()
        self._status_sent = 0
        self._counters_soon = False

    def stop(self) -> None:
        self._stop.set()

    def counters(self) -> dict:
        """Row, client and request counters (sent to the server process for its status)."""
        st = self.cursor.state
        seen = int(st[C_NEXT]) - self._start_seq
        return {"clients": len(self.clients), "display_every": int(st[C_EVERY]), "rows_shown": int(st[C_READ]),
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
        app.router.add_get("/favicon.ico", lambda request: web.Response(status=204))
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

    def _origin_ok(self, request: web.Request) -> bool:
        origin = request.headers.get("Origin")
        if origin is None:  # not a browser (a script or a test client): the token is its check
            return True
        origin = origin.rstrip("/")
        return origin == f"{request.scheme}://{request.host}" or origin in self.allowed_origins

    @web.middleware
    async def _guard(self, request: web.Request, handler):
        self.http_requests += 1
        if not self.token and not _loopback_name(request.host):
            return self._refuse("host", 403, f"Host {request.host!r} is not this machine's loopback name")
        if self.token:
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

    async def _plotly_handler(self, request: web.Request) -> web.StreamResponse:
        return web.FileResponse(self._plotly, headers={"Cache-Control": "max-age=3600"})

    async def _meta_handler(self, request: web.Request) -> web.Response:
        return web.json_response(dict(self.meta, url=self.url))

    async def _status_handler(self, request: web.Request) -> web.Response:
        return web.Response(text=dumps(clean(self.link.status or {})), content_type="application/json")

    async def _control_handler(self, request: web.Request) -> web.Response:
        try:
            req = json.loads(await request.read())
        except web.HTTPRequestEntityTooLarge:
            raise
        except (ValueError, UnicodeDecodeError) as exc:
            return self._refuse("bad_message", 400, f"the body is not JSON: {exc}")
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
        ws = web.WebSocketResponse(max_msg_size=self.max_request_bytes, heartbeat=20.0)
        await ws.prepare(request)
        client = Client(ws)
        self.clients.append(client)
        self._send_counters()
        sender = asyncio.ensure_future(self._send_forever(client))
        client.offer(dumps(dict(self.meta, op="hello", url=self.url)))
        if self.link.status is not None:
            client.offer(dumps({"op": "status", "status": clean(self.link.status)}))
        try:
            async for msg in ws:
                if msg.type == WSMsgType.TEXT:
                    await self._ws_message(client, msg.data)
                elif msg.type == WSMsgType.ERROR:
                    self.refused["too_large" if "size" in str(ws.exception()).lower() else "bad_message"] += 1
                    self._send_counters()
                else:
                    self.refused["bad_message"] += 1
                    self._send_counters()
                    client.offer(dumps({"op": "error", "message": "messages are JSON text"}))
        finally:
            self.clients.remove(client)
            self.closed_dropped[0] += client.dropped
            self.closed_dropped[1] += client.dropped_rows
            if not self.clients:  # what was read for the last page is counted before the count says none is open
                self.cursor.skip_to_now()
            self._send_counters()
            sender.cancel()
        return ws

    async def _send_forever(self, client: Client) -> None:
        while True:
            text = await client.queue.get()
            try:
                await client.ws.send_str(text)
            except (ConnectionError, RuntimeError):
                return

    async def _ws_message(self, client: Client, data: str) -> None:
        try:
            msg = json.loads(data)
        except ValueError as exc:
            self.refused["bad_message"] += 1
            client.offer(dumps({"op": "error", "message": f"not JSON: {exc}"}))
            return
        op = msg.get("op") if isinstance(msg, dict) else None
        if op == "subscribe":
            self._subscribe(client, msg.get("signals"))
        elif op == "control":
            asyncio.ensure_future(self._ws_control(client, msg.get("id"), msg.get("req")))
        else:
            self.refused["bad_message"] += 1
            client.offer(dumps({"op": "error", "message": f"unknown op {op!r}; ops are subscribe, control"}))

    def _subscribe(self, client: Client, names) -> None:
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names) or len(names) > MAX_SIGNALS:
            self.refused["bad_message"] += 1
            client.offer(dumps({"op": "error", "message": f"subscribe: 'signals' is a list of at most "
                                                          f"{MAX_SIGNALS} signal names"}))
            return
        unknown = [n for n in names if n not in self.by_name]
        if unknown:
            self.refused["bad_message"] += 1
            client.offer(dumps({"op": "error", "message": f"subscribe: unknown signal(s) {', '.join(unknown[:5])}"}))
            return
        names = list(dict.fromkeys(names))
        client.names, client.cols = names, [self.by_name[n] for n in names]
        client.offer(dumps({"op": "subscribed", "signals": names}))

    async def _ws_control(self, client: Client, rid, req) -> None:
        reply = await self.control(req)
        client.offer(dumps({"op": "reply", "id": rid if isinstance(rid, (int, str)) else None, "reply": clean(reply)}))

    async def _flush_forever(self) -> None:
        while True:
            await asyncio.sleep(FLUSH_S)
            try:
                self._flush()
            except Exception:  # one bad flush must not end the page's updates
                self.log.exception("the workspace failed to send an update")

    def _take_rows(self):
        """The display rows written since the last update as (ints, floats), or None (no page: skip them)."""
        cur = self.cursor
        if not self.clients:
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
        return np.concatenate(ints), np.concatenate(floats)

    def _flush(self) -> None:
        rows = self._take_rows()
        link = self.link
        events = []
        while link.events:
            events.append(link.events.popleft())
        if not self.clients:
            return
        if rows is not None:
            ints, floats = rows
            head = {"op": "rows", "tick": ints[:, 0].tolist(), "status": ints[:, 1].tolist(),
                    "faults": ints[:, 2].tolist(), "watchdog": ints[:, 3].tolist(), "t": column(floats[:, F_TIME])}
            for c in self.clients:
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
