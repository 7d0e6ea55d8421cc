"""The workspace server's checks of what arrives: the ``Host`` names it accepts, bounded JSON, and a lingering close.

* :func:`loopback_name`: ``localhost`` or a loopback address *parsed as
  one* (127.0.0.0/8, ::1); a name such as ``127.0.0.1.evil.example``, which
  another site can rebind to 127.0.0.1, is not one.
* :func:`parse_json`: JSON nested at most :data:`MAX_JSON_DEPTH` levels
  (the decoder's own recursion beyond a few thousand levels is caught
  too), refused with one line otherwise.
* :class:`LingeringWebSocket`: after an oversize message it reads the rest
  before closing, so the close frame (1009) is not destroyed by a reset.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json

from aiohttp import web

MAX_JSON_DEPTH = 32  # nesting of a request's JSON (arrays and objects); deeper is refused, never recursed into
LINGER_S = 2.0  # after an oversize message: how long the rest of it is read (and dropped) before the close
LINGER_BYTES = 1 << 26  # ... and how much of it at most


def host_name(host_header: str) -> str:
    """The host of a ``Host`` header or an origin's authority, without its port (``[::1]:80`` -> ``::1``)."""
    h = host_header.strip()
    if h.startswith("["):
        end = h.find("]")
        return h[1:end] if end > 0 else h
    return h.rsplit(":", 1)[0] if h.count(":") == 1 else h


def loopback_name(name: str) -> bool:
    """``name`` is ``localhost`` or a loopback address literal (127.0.0.0/8, ::1); ``127.0.0.1.example`` is not."""
    if name.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:  # a name: whatever it resolves to, another site may rebind it
        return False


class BadJSON(ValueError):
    """A request that is not JSON, or JSON nested deeper than :data:`MAX_JSON_DEPTH`."""


def parse_json(data: str | bytes):
    """The JSON value of ``data``; :class:`BadJSON` (with a one-line reason) if it is not one a request may be."""
    deep = f"JSON nested deeper than {MAX_JSON_DEPTH} levels"
    try:
        obj = json.loads(data)
    except RecursionError:  # the decoder recursed thousands of levels: refused as any too deep value
        raise BadJSON(deep) from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadJSON(f"not JSON: {exc}") from None
    stack = [(obj, 1)]  # depth checked without recursion
    while stack:
        o, depth = stack.pop()
        if isinstance(o, dict):
            o = o.values()
        elif not isinstance(o, list):
            continue
        if depth > MAX_JSON_DEPTH:
            raise BadJSON(deep)
        stack.extend((v, depth + 1) for v in o)
    return obj


class _Drain(asyncio.Protocol):
    """Reads and drops what a client still sends after its connection was closed for an oversize message.

    Closing a socket with unread data makes the kernel send a reset, which
    can destroy the close frame (1009) on its way; so the rest is read until
    the client closes its side, :data:`LINGER_BYTES` or :data:`LINGER_S`.
    """

    def __init__(self, transport, close, before):
        self.transport, self._close, self.left, self.before = transport, close, LINGER_BYTES, before
        self._timer = asyncio.get_running_loop().call_later(LINGER_S, self.done)

    # the close frame may still wait for the client to read: aiohttp's writer hears of it through its protocol
    def pause_writing(self) -> None:
        self.before.pause_writing()

    def resume_writing(self) -> None:
        self.before.resume_writing()

    def data_received(self, data: bytes) -> None:
        self.left -= len(data)
        if self.left <= 0:
            self.done()

    def eof_received(self) -> bool:
        self.done()
        return False

    def connection_lost(self, exc) -> None:
        self._timer.cancel()
        self.before.connection_lost(exc)

    def done(self) -> None:
        self._timer.cancel()
        self._close()


class LingeringWebSocket(web.WebSocketResponse):
    """aiohttp's WebSocket whose close after an oversize message (1009) lingers (:class:`_Drain`)."""

    sent_code = None
    _draining = False

    async def close(self, *, code: int = 1000, message: bytes = b"", drain: bool = True) -> bool:
        if not self.closed:
            self.sent_code = code
            if code == 1009:  # read (and drop) the rest first: a client blocked sending it would not read the close
                self._drain()
        return await super().close(code=code, message=message, drain=drain)

    def _drain(self) -> None:
        tr = self._req.transport if self._req is not None else None
        if tr is None or tr.is_closing() or self._draining:
            return
        self._draining = True
        close = tr.close
        tr.close = lambda: None  # aiohttp closes it again once the handler returns: the drain closes it
        tr.set_protocol(_Drain(tr, close, tr.get_protocol()))
        tr.resume_reading()

    def _close_transport(self) -> None:
        tr = self._req.transport if self._req is not None else None
        if not self._draining or tr is None or tr.is_closing():
            super()._close_transport()
            return
        if tr.can_write_eof():
            tr.write_eof()  # after the close frame: the client sees the end and closes its side


__all__ = ["BadJSON", "LingeringWebSocket", "MAX_JSON_DEPTH", "host_name", "loopback_name", "parse_json"]
