"""The workspace's HTTP and WebSocket server: aiohttp in a thread of its own, with its own asyncio loop.

It never touches the plant or the loop: control requests go to the loop's
thread through the :class:`~io_adapters.web.adapter.Bridge`, states and
status come back the same way (see :mod:`io_adapters.web.adapter`).

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
import threading
from pathlib import Path

import numpy as np
from aiohttp import WSMsgType, web

from ..ring import F_TIME

PAGE = Path(__file__).with_name("workspace.html")
FLUSH_S = 1.0 / 30.0  # rows, status and events go to the pages about 30 times a second
CLIENT_QUEUE = 16  # messages waiting for one slow page; more are dropped (counted) instead of held
MAX_SIGNALS = 256  # signals one page may subscribe to
CONTROL_TIMEOUT_S = 60.0
REFUSALS = ("host", "token", "origin", "too_large", "bad_message", "too_many_clients")


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

    def offer(self, text: str) -> None:
        try:
            self.queue.put_nowait(text)
        except asyncio.QueueFull:
            self.dropped += 1


class WebServer:
    """The aiohttp application in its thread; :meth:`start` returns the URL once it listens."""

    def __init__(self, bridge, meta: dict, *, host: str, port: int, token: str, max_request_bytes: int,
                 max_clients: int, allowed_origins: tuple[str, ...], log):
        self.bridge = bridge
        self.meta = meta
        self.by_name = {s["name"]: s["col"] for s in meta["signals"]}
        self.host, self.port, self.token = host, port, token
        self.max_request_bytes = max_request_bytes
        self.max_clients = max_clients
        self.allowed_origins = allowed_origins
        self.log = log
        self.refused = {r: 0 for r in REFUSALS}
        self.http_requests = 0
        self.clients: list[Client] = []
        self.url = ""
        self._aio: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None
        self._page = PAGE.read_bytes()
        self._plotly = plotly_js()
        self._status_sent = 0

    # ------------------------------------------------------------------ thread
    def start(self, timeout_s: float = 30.0) -> str:
        self._thread = threading.Thread(target=self._run, name="gearbox-hil-web", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout_s):
            raise TimeoutError(f"the web server did not listen within {timeout_s:g} s")
        if self._error is not None:
            raise self._error
        return self.url

    def stop(self) -> None:
        if self._aio is not None and self._stop is not None and not self._aio.is_closed():
            try:
                self._aio.call_soon_threadsafe(self._stop.set)
            except RuntimeError:  # the loop closed meanwhile
                pass
        if self._thread is not None:
            self._thread.join(5.0)
            self._thread = None

    def counters(self) -> dict:
        return {"requests": self.http_requests, "refused": dict(self.refused),
                "client_messages_dropped": sum(c.dropped for c in self.clients)}

    def _run(self) -> None:
        self._aio = asyncio.new_event_loop()
        asyncio.set_event_loop(self._aio)
        try:
            self._aio.run_until_complete(self._serve())
        except BaseException as exc:  # a failure to bind: reported by start()
            self._error = exc
            self._ready.set()
        finally:
            self._aio.close()

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
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
            self._ready.set()
            flusher = asyncio.ensure_future(self._flush_forever())
            await self._stop.wait()
            flusher.cancel()
            for c in list(self.clients):
                await c.ws.close()
        finally:
            await runner.cleanup()

    # ------------------------------------------------------------------ checks
    def _refuse(self, reason: str, status: int, message: str) -> web.Response:
        self.refused[reason] += 1
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
        return web.Response(text=dumps(clean(self.bridge.status or {})), content_type="application/json")

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
        """Execute ``req`` on the loop's thread through the control handler; its reply (never raises)."""
        if not isinstance(req, dict) or not isinstance(req.get("cmd"), str):
            self.refused["bad_message"] += 1
            return {"v": 1, "ok": False, "error": {"code": "bad_message",
                                                   "message": "a request is a JSON object with a 'cmd' string"}}
        aio = asyncio.get_running_loop()
        fut = aio.create_future()

        def on_reply(rep: dict) -> None:  # on the loop's thread
            try:
                aio.call_soon_threadsafe(lambda: fut.done() or fut.set_result(rep))
            except RuntimeError:  # the web server stopped meanwhile
                pass

        self.bridge.submit(req, on_reply)
        try:
            return await asyncio.wait_for(fut, CONTROL_TIMEOUT_S)
        except asyncio.TimeoutError:
            return {"v": 1, "cmd": req.get("cmd"), "ok": False,
                    "error": {"code": "internal", "message": f"no reply within {CONTROL_TIMEOUT_S:g} s"}}

    # ------------------------------------------------------------------ WebSocket
    async def _ws_handler(self, request: web.Request) -> web.StreamResponse:
        if len(self.clients) >= self.max_clients:
            return self._refuse("too_many_clients", 503, f"{self.max_clients} pages are open already")
        ws = web.WebSocketResponse(max_msg_size=self.max_request_bytes, heartbeat=20.0)
        await ws.prepare(request)
        client = Client(ws)
        self.clients.append(client)
        self.bridge.clients = len(self.clients)
        sender = asyncio.ensure_future(self._send_forever(client))
        client.offer(dumps(dict(self.meta, op="hello", url=self.url)))
        if self.bridge.status is not None:
            client.offer(dumps({"op": "status", "status": clean(self.bridge.status)}))
        try:
            async for msg in ws:
                if msg.type == WSMsgType.TEXT:
                    await self._ws_message(client, msg.data)
                elif msg.type == WSMsgType.ERROR:
                    self.refused["too_large" if "size" in str(ws.exception()).lower() else "bad_message"] += 1
                else:
                    self.refused["bad_message"] += 1
                    client.offer(dumps({"op": "error", "message": "messages are JSON text"}))
        finally:
            self.clients.remove(client)
            self.bridge.clients = len(self.clients)
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

    def _flush(self) -> None:
        b = self.bridge
        chunks = []
        while b.chunks:
            chunks.append(b.chunks.popleft())
        events = []
        while b.events:
            events.append(b.events.popleft())
        if not self.clients:
            return
        if chunks:
            ints = np.concatenate([c[0] for c in chunks])
            floats = np.concatenate([c[1] for c in chunks])
            head = {"op": "rows", "tick": ints[:, 0].tolist(), "status": ints[:, 1].tolist(),
                    "faults": ints[:, 2].tolist(), "watchdog": ints[:, 3].tolist(), "t": column(floats[:, F_TIME])}
            for c in self.clients:
                c.offer(dumps(dict(head, values={n: column(floats[:, k]) for n, k in zip(c.names, c.cols)})))
        if events:
            text = dumps({"op": "events", "events": clean(events)})
            for c in self.clients:
                c.offer(text)
        if b.status is not None and b.status_version != self._status_sent:
            self._status_sent = b.status_version
            text = dumps({"op": "status", "status": clean(b.status)})
            for c in self.clients:
                c.offer(text)


__all__ = ["WebServer", "plotly_js", "clean"]
