"""The adapter's virtual bus offered on loopback to tools that speak python-can-remote.

The local virtual bus (:mod:`io_adapters.vbus`, ``interface = "vbus"``) is
how other processes join the plant's bus without vcan; this share remains
for tools that speak python-can-remote's websocket protocol, over either
bus.

python-can's ``virtual`` bus connects buses inside one process only, and
SocketCAN's vcan needs a kernel module that some CI kernels (and many
containers) lack.  :class:`LoopbackShare` runs a python-can-remote server
(a websocket bridge) inside the plant server, bound to 127.0.0.1, that
opens one more virtual bus on the adapter's channel for each connecting
process.  A TCU emulator, a test or CANoe-less tooling in another process
then uses an ordinary python-can bus::

    bus = can.Bus(interface="remote", channel="ws://127.0.0.1:54701/")

python-can-remote listens on 0.0.0.0 unless told otherwise; this class
binds to loopback and refuses any other address unless the configuration
says ``allow_non_loopback = true``: the bridge has no authentication, and a
CAN bus that drives clutch pressures must not be reachable from the network
by accident.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
import threading
import time

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 54701


class ShareError(RuntimeError):
    """The loopback bridge cannot be started (bad host, port in use, package missing)."""


def is_loopback(host: str) -> bool:
    """True if every address ``host`` resolves to is a loopback address."""
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except socket.gaierror:
        return False
    addrs = {info[4][0] for info in infos}
    return bool(addrs) and all(ipaddress.ip_address(a.split("%")[0]).is_loopback for a in addrs)


class RelayMeter:
    """What the share's relay threads did, for the adapter status: a stale command told apart from a late relay.

    ``to_clients``: frames of the bus written to a client's websocket;
    ``from_clients``: frames a client sent, put on the bus; ``delay_max_us``
    / ``delay_last_us``: from the bus's send (the frame's timestamp, the
    sender's ``time.time()``) to the websocket write, the relay's own
    delay; ``late_1ms``: frames relayed more than 1 ms after they were sent;
    ``relay_errors``: connections the relay closed on an error; ``client_resets``:
    connections a client dropped without a websocket close (its process ended
    while a frame was on its way: a disconnect, not a relay error).
    """

    def __init__(self):
        self._lock = threading.Lock()
        self.to_clients = 0
        self.from_clients = 0
        self.delay_max_s = 0.0
        self.delay_last_s = 0.0
        self.late_1ms = 0
        self.relay_errors = 0
        self.client_resets = 0

    def relayed_to_client(self, sent_at_s: float) -> None:
        delay = time.time() - sent_at_s
        with self._lock:
            self.to_clients += 1
            if 0.0 <= delay < 3600.0:  # one wall clock for the bus and the relay; else a forged timestamp
                self.delay_last_s = delay
                if delay > self.delay_max_s:
                    self.delay_max_s = delay
                if delay > 1e-3:
                    self.late_1ms += 1

    def relayed_from_client(self) -> None:
        with self._lock:
            self.from_clients += 1

    def counts(self) -> dict:
        with self._lock:
            return {"to_clients": self.to_clients, "from_clients": self.from_clients,
                    "delay_max_us": round(self.delay_max_s * 1e6, 1),
                    "delay_last_us": round(self.delay_last_s * 1e6, 1), "late_1ms": self.late_1ms, "relay_errors": self.relay_errors,
                    "client_resets": self.client_resets}


def _metered_protocol(base, meter: RelayMeter):
    """python-can-remote's server protocol, counting what it relays each way into ``meter``."""
    import can

    class MeteredProtocol(base):
        def send_msg(self, msg):
            super().send_msg(msg)
            meter.relayed_to_client(msg.timestamp)

        def recv(self, timeout=None):
            event = super().recv(timeout)
            if isinstance(event, can.Message):
                meter.relayed_from_client()
            return event

        def terminate(self, exc):
            with meter._lock:
                if isinstance(exc, ConnectionError):  # reset, broken pipe, aborted: the client went away
                    meter.client_resets += 1
                else:
                    meter.relay_errors += 1
            super().terminate(exc)

    return MeteredProtocol


def _websocket_only(base, protocol_class):
    """python-can-remote's request handler without its trace web page, relaying through ``protocol_class``.

    The page handler joins the request path to its package folder unchecked,
    so ``GET /../../../etc/passwd`` would read any file the server can; the
    bridge serves CAN over websocket and nothing else (404 otherwise).
    """
    from can_remote.websocket import WebSocket, get_accept_key

    class WebsocketOnlyHandler(base):
        def send_trace_webpage(self):
            self.send_error(404)

        def start_websocket(self):
            # python-can-remote's own, with the metered protocol (its class is a module global there)
            self.send_response(101)
            self.send_header("Upgrade", "WebSocket")
            self.send_header("Connection", "Upgrade")
            self.send_header("Sec-WebSocket-Accept", get_accept_key(self.headers["Sec-WebSocket-Key"]))
            offered = [p.strip() for p in self.headers.get("Sec-WebSocket-Protocol", "can.json.v1").split(",")]
            chosen = "can.binary+json.v1" if "can.binary+json.v1" in offered else "can.json.v1"
            self.send_header("Sec-WebSocket-Protocol", chosen)
            self.end_headers()
            protocol = protocol_class(self.server.config, WebSocket(None, chosen, sock=self.request))
            self.server.clients.append(protocol)
            try:
                protocol.run()
            finally:
                self.server.clients.remove(protocol)

    return WebsocketOnlyHandler


class LoopbackShare:
    """A python-can-remote server exposing a virtual CAN channel of this process.

    Parameters
    ----------
    channel
        The channel to share (the adapter's channel).
    interface
        ``"virtual"`` (python-can's bus of this process) or ``"vbus"`` (the
        local virtual bus, which other processes can also join directly).
    host, port
        Listening address; ``port = 0`` picks a free port (see :attr:`port`).
    allow_non_loopback
        Permit a host that is not a loopback address.
    rx_queue_size
        Frames buffered per connected client before the bus reports the
        client's queue full (a stalled client must not grow memory forever).
    """

    def __init__(self, channel, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, allow_non_loopback: bool = False,
                 rx_queue_size: int = 10000, log: logging.Logger | None = None, interface: str = "virtual"):
        self.log = log or logging.getLogger(__name__)
        if not allow_non_loopback and not is_loopback(host):
            raise ShareError(f"share host {host!r} is not a loopback address; the bridge has no authentication "
                             "(set allow_non_loopback = true to expose it anyway)")
        if allow_non_loopback and not is_loopback(host):
            self.log.warning("CAN share listens on %s: any host that reaches it can drive the plant's CAN bus", host)
        try:
            from can_remote import RemoteServer
            from can_remote.server import ClientRequestHandler, RemoteServerProtocol
        except ImportError:
            raise ShareError("the CAN share needs the python-can-remote package (pip install python-can-remote)") \
                from None
        # The server overrides whatever bus configuration a client asks for.
        if interface == "vbus":  # each client joins the local virtual bus as a member of its own
            from ..vbus import register

            register()
            config = dict(interface="vbus", channel=channel, receive_own_messages=False)
        else:
            config = dict(interface="virtual", channel=channel, receive_own_messages=False,
                          rx_queue_size=rx_queue_size)
        try:
            self._server = RemoteServer(host=host, port=port, **config)
        except OSError as exc:
            raise ShareError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
        self.meter = RelayMeter()
        self._server.RequestHandlerClass = _websocket_only(ClientRequestHandler,
                                                           _metered_protocol(RemoteServerProtocol, self.meter))
        self.host = host
        self.port = int(self._server.server_port)
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs=dict(poll_interval=0.1),
                                        name="can-share", daemon=True)
        self._thread.start()
        self._closed = False
        self.log.info("CAN share: other processes connect with can.Bus(interface='remote', channel=%r)", self.url)

    @property
    def url(self) -> str:
        return f"ws://{self.host}:{self.port}/"

    def clients(self) -> int:
        return len(self._server.clients)

    def close(self) -> None:
        """Stop accepting, disconnect every client, release the port.  Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._server.shutdown()
        for proto in list(self._server.clients):
            proto.running = False
            try:
                proto.close()  # websocket close handshake; the client's reply ends the handler thread
            except OSError:
                pass
        self._server.server_close()
        self._thread.join(timeout=2.0)

    def queued(self) -> int:
        """Frames of the bus waiting in the clients' queues for their relay threads now."""
        total = 0
        for proto in list(self._server.clients):
            bus = getattr(proto, "bus", None)
            try:
                if hasattr(bus, "queued_frames"):  # the local virtual bus
                    total += bus.queued_frames()
                elif hasattr(bus, "queue"):  # python-can's virtual bus
                    total += bus.queue.qsize()
            except Exception:  # a client leaving meanwhile
                pass
        return total

    def status(self) -> dict:
        """URL, clients, and the relay's counters (:class:`RelayMeter`) with ``queued`` (:meth:`queued`)."""
        return {"url": self.url, "clients": self.clients(), "queued": self.queued(), **self.meter.counts()}
