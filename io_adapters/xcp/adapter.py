"""XCP on Ethernet (UDP and TCP): the plant as an ECU that CANape, INCA or pyxcp measure and calibrate.

The adapter takes no commands for the plant's inputs and the tick never
calls it.  Its own thread answers command packets with the XCP slave
(:mod:`.slave`).  While DAQ lists run, :meth:`XcpAdapter.pump` -- called by
the loop between ticks, like the ZeroMQ publisher -- reads the loop's state
ring through a cursor of its own and sends the DTO packets of the rows the
ticks wrote (:mod:`.daq`), without blocking: a TCP peer that does not read
leaves at most :data:`TX_CAP` bytes waiting, beyond which packets are
dropped, counted per event and flagged with the overload bit.  The tick's
only cost is the ring row it writes anyway.  Building packets in a thread of
its own was tried first: on a loaded machine a thread that is preempted
while it holds the GIL stalls the next tick for as long (BENCHMARKS.md,
"XCP DAQ on the tick").  The thread and the pump share the slave and the
sockets under one lock, which the pump only tries in realtime (when the
thread holds it, the rows wait in the ring for the next pump) and waits for
in lockstep and afap.

Calibration goes the other way through the loop: a write to the working
page becomes a ``set_params`` request that the thread queues and the loop
executes in :meth:`XcpAdapter.poll_control`, between two ticks, with the
parameter table's checks (range, ``at_most`` bounds).  The thread answers
the write once the loop applied it (positive response) or refused it
(ERR_OUT_OF_RANGE, nothing changed).  The queue's pipe is one of the
descriptors the idle loop waits on, so a lockstep server applies it at once.

Framing (XCP on Ethernet): every packet is ``LEN`` (2 bytes, little endian),
``CTR`` (2 bytes) and ``LEN`` bytes of XCP packet.  A UDP datagram may hold
several packets; a TCP stream is cut by ``LEN``.  A packet longer than
MAX_CTO is dropped (its bytes skipped) and counted; so are bytes that do not
form a whole packet at the end of a datagram.  One master at a time: while a
master is connected, packets from any other peer are ignored and counted.

Options (``[[adapters]] type = "xcp"`` or a ``[xcp]`` table): ``host``
(default ``127.0.0.1``), ``port`` (default 5558, UDP and TCP on the same
number; 0: a free port; XCP's usual 5555 is the ZeroMQ control port's
default), ``udp``, ``tcp`` (both true by default), ``insecure_remote``
(bind beyond loopback; XCP has no authentication here: anyone who reaches
the port can read every signal and change every parameter, so this must be
set explicitly and warns at every start).
"""

from __future__ import annotations

import ipaddress
import logging
import os
import queue
import select
import socket
import struct
import threading
import time

import numpy as np

from plant_models.config import ConfigReader
from plant_models.plant import Plant

from ..base import Adapter, AdapterError, LoopContext
from ..protocol import RejectLog
from plant_models.run.ring import I_TICK
from . import a2l
from . import codes as C
from .daq import HEADER
from .declaration import DECLARATION, DEFAULT_PORT
from .memory import AddressMap
from .slave import PENDING, Slave

log = logging.getLogger("gearbox_hil.xcp")

IDLE_WAIT_S = 0.02  # the thread's wait for packets while nothing else is due
BUSY_WAIT_S = 0.001  # its wait while a change waits for the loop
TX_CAP = 4 << 20  # bytes a TCP master may leave unread before DTO packets are dropped
RECV_BYTES = 65536


def is_loopback_host(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class XcpAdapter(Adapter):
    """The XCP-on-Ethernet server (see the module docstring)."""

    type_name = "xcp"
    declaration = DECLARATION
    reads_commands = False

    def __init__(self, name: str, options: dict):
        super().__init__(name, options)
        cfg = ConfigReader(dict(options), "", "")
        self.host = cfg.string("host", "127.0.0.1")
        self.port = cfg.integer("port", DEFAULT_PORT, lo=0, hi=65535)
        self.use_udp = cfg.boolean("udp", True)
        self.use_tcp = cfg.boolean("tcp", True)
        self.insecure_remote = cfg.boolean("insecure_remote", False)
        cfg.reject_unknown()
        if not (self.use_udp or self.use_tcp):
            raise cfg.error("udp", "the xcp adapter needs udp or tcp (or both)")
        if not is_loopback_host(self.host) and not self.insecure_remote:
            raise cfg.error("host", f"{self.host} listens beyond loopback, and XCP has no authentication here: "
                            "anyone who reaches the port reads every signal and changes every parameter; set "
                            "insecure_remote = true only on a network you trust")
        self._udp = self._tcp = self._conn = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()  # the slave, the sockets, the transport counter: thread and pump
        self._tx = bytearray()  # TCP bytes not yet taken by the socket
        self._requests: queue.SimpleQueue = queue.SimpleQueue()
        self._wake_r = self._wake_w = -1
        self.endpoints: dict[str, str] = {}
        self.a2l_text = ""
        # oversized, truncated and ignored packets and negative responses, logged at most 10 lines a second
        self.rejects = RejectLog(log, f"{name} XCP packet", reasons=("oversized", "truncated", "ignored"))
        self.counts = {"packets": 0, "ignored": 0, "oversized": 0, "truncated": 0, "dto_sent": 0,
                       "send_errors": 0, "calibrations_applied": 0, "calibrations_refused": 0, "thread_errors": 0}

    # ------------------------------------------------------------------ life cycle
    def open(self, plant: Plant, ctx: LoopContext) -> None:
        super().open(plant, ctx)
        if ctx.ring is None:
            raise AdapterError(f"{self.name}: the XCP adapter measures from the loop's state ring; LoopContext.ring "
                               "is None")
        self.ring = ctx.ring
        self.amap = AddressMap(plant.kind, plant.outputs, plant.inputs, plant.tunable_parameters(), ctx.period_s)
        self._bind()
        port = int(self.endpoints["udp" if self.use_udp else "tcp"].rsplit(":", 1)[1])
        self.a2l_text = a2l.generate(self.amap, port, self.host, self.use_udp, self.use_tcp)
        self.slave = Slave(self.amap, self.a2l_text, self._row_bytes, self._newest_tick)
        self.cursor = self.ring.cursor(every=1, batch=256)
        self._last_tick = -1
        self._ctr = 0
        self._peer = None  # ("udp", address) or ("tcp", None) of the connected master
        self._pending = None  # [result] of a change the loop has not answered yet
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        if not is_loopback_host(self.host):
            log.warning("%s: insecure_remote = true: XCP on %s port %d WITHOUT authentication; any peer that reaches "
                        "it reads every signal and changes every parameter", self.name, self.host, port)
        self._thread = threading.Thread(target=self._run, name=f"xcp-{self.name}", daemon=True)
        self._thread.start()
        log.info("%s: XCP on %s", self.name, ", ".join(self.endpoints.values()))

    def _bind(self) -> None:
        """UDP and TCP on one port number (port 0: a free one both can take)."""
        for _ in range(20):
            udp = tcp = None
            try:
                port = self.port
                if self.use_udp:
                    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                    udp.bind((self.host, port))
                    port = udp.getsockname()[1]
                if self.use_tcp:
                    tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                    tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                    tcp.bind((self.host, port))
                    tcp.listen(1)
                    port = tcp.getsockname()[1]
            except OSError as exc:
                for s in (udp, tcp):
                    if s is not None:
                        s.close()
                if self.port == 0:
                    continue  # the free UDP port is taken for TCP: try another
                raise AdapterError(f"{self.name}: cannot bind XCP on {self.host}:{self.port}: {exc.strerror}") from None
            self._udp, self._tcp = udp, tcp
            for kind, s in (("udp", udp), ("tcp", tcp)):
                if s is not None:
                    s.setblocking(False)
                    self.endpoints[kind] = f"{kind}://{self.host}:{port}"
            return
        raise AdapterError(f"{self.name}: found no port free for both UDP and TCP on {self.host}")

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)
            self._thread = None
        for s in (self._conn, self._tcp, self._udp):
            if s is not None:
                s.close()
        self._conn = self._tcp = self._udp = None
        for fd in (self._wake_r, self._wake_w):
            if fd >= 0:
                os.close(fd)
        self._wake_r = self._wake_w = -1

    def idle_fds(self) -> list[int]:
        """The pipe the thread writes to when a calibration change waits for the loop."""
        return [self._wake_r] if self._wake_r >= 0 else []

    # ------------------------------------------------------------------ between ticks (the loop's thread)
    def poll_control(self, now_ns: int) -> None:
        """Apply the waiting calibration changes through ``set_params`` (one request each, all or nothing)."""
        try:
            os.read(self._wake_r, 64)
        except (BlockingIOError, OSError):
            pass
        while True:
            try:
                params, result = self._requests.get_nowait()
            except queue.Empty:
                return
            reply = self.ctx.control({"cmd": "set_params", "params": params}) if self.ctx.control else {"ok": False}
            ok = bool(reply.get("ok"))
            if not ok:
                log.info("%s: calibration refused: %s", self.name, reply.get("error", {}).get("message"))
            self.counts["calibrations_applied" if ok else "calibrations_refused"] += 1
            result.append(ok)

    # ------------------------------------------------------------------ the adapter's thread
    def _row_bytes(self) -> bytes:
        w = self.ring.written
        if w == 0:
            return bytes(self.amap.meas_size)
        return self.ring.floats[(w - 1) % self.ring.capacity].tobytes()

    def _newest_tick(self) -> int:
        w = self.ring.written
        return int(self.ring.ints[(w - 1) % self.ring.capacity, I_TICK]) if w else 0

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._serve_once()
            except Exception:  # the thread must live: a bug in one packet's handling is logged and counted
                self.counts["thread_errors"] += 1
                log.exception("%s: XCP thread error", self.name)

    def _serve_once(self) -> None:
        fds = [s for s in (self._udp, self._tcp, self._conn) if s is not None]
        out = [self._conn] if self._tx and self._conn is not None else []
        ready, writable, _ = select.select(fds, out, (), BUSY_WAIT_S if self._pending is not None else IDLE_WAIT_S)
        with self._lock:
            for s in ready:
                if s is self._udp:
                    self._recv_udp()
                elif s is self._tcp:
                    self._accept()
                elif s is self._conn:
                    self._recv_tcp()
            if writable:
                self._flush()
            if self._pending is not None and self._pending[0]:
                self._respond(self.slave.calibration_done(self._pending[0][0]))
                self._pending = None
        self.rejects.flush()

    def _count(self, reason: str, message: str) -> None:
        """A packet dropped or ignored: counted in the status and logged (rate-limited)."""
        self.counts[reason] += 1
        self.rejects.reject(reason, message)

    def _recv_udp(self) -> None:
        for _ in range(64):
            try:
                data, addr = self._udp.recvfrom(RECV_BYTES)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:  # e.g. ICMP port unreachable of an earlier send
                continue
            if self._peer is not None and self._peer != ("udp", addr):
                self._count("ignored", f"a datagram from {addr[0]}:{addr[1]} while another master is connected")
                continue
            self._packets(data, ("udp", addr))

    def _accept(self) -> None:
        try:
            conn, _ = self._tcp.accept()
        except OSError:
            return
        if self._conn is not None or (self._peer is not None and self._peer[0] == "udp"):
            conn.close()  # one master at a time
            self._count("ignored", "a second TCP connection while a master is connected: closed")
            return
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn.setblocking(False)
        self._conn = conn
        self._tx = bytearray()
        self._tcp_buf = bytearray()
        self._tcp_skip = 0

    def _drop_tcp(self) -> None:
        if self._conn is not None:
            self._conn.close()
        self._conn = None
        self._tx = bytearray()
        if self._peer is not None and self._peer[0] == "tcp":
            self._peer = None
            self.slave.drop()  # as DISCONNECT: DAQ stops, the session ends

    def _recv_tcp(self) -> None:
        try:
            data = self._conn.recv(RECV_BYTES)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self._drop_tcp()
            return
        if self._tcp_skip:
            k = min(self._tcp_skip, len(data))
            self._tcp_skip -= k
            data = data[k:]
        buf = self._tcp_buf
        buf += data
        while len(buf) >= HEADER and self._conn is not None:
            n = buf[0] | buf[1] << 8
            if n > a2l.MAX_CTO:  # too long: skip it (the stream stays in step) and count it
                self._count("oversized", f"TCP packet of {n} bytes, more than MAX_CTO {a2l.MAX_CTO}: skipped")
                k = min(n, len(buf) - HEADER)
                self._tcp_skip = n - k
                del buf[:HEADER + k]
                continue
            if len(buf) < HEADER + n:
                return
            packet = bytes(buf[HEADER:HEADER + n])
            del buf[:HEADER + n]
            self._packet(packet, ("tcp", None))

    def _packets(self, data: bytes, peer) -> None:
        """The XCP packets of one UDP datagram."""
        i = 0
        while i + HEADER <= len(data):
            n = data[i] | data[i + 1] << 8
            if n > a2l.MAX_CTO:
                self._count("oversized", f"UDP packet of {n} bytes, more than MAX_CTO {a2l.MAX_CTO}: datagram dropped")
                return
            if i + HEADER + n > len(data):
                break
            self._packet(data[i + HEADER:i + HEADER + n], peer)
            i += HEADER + n
        if i < len(data):
            self._count("truncated", f"{len(data) - i} bytes at the end of a datagram are no whole packet: dropped")

    def _packet(self, packet: bytes, peer) -> None:
        self.counts["packets"] += 1
        if not packet:
            self._count("ignored", "an empty packet")
            return
        was = self.slave.connected
        if was and peer != self._peer:
            self._count("ignored", "a packet from another master while one is connected")
            return
        self._reply_to = peer
        res = self.slave.handle(packet)
        if self.slave.connected and not was:
            self._peer = peer
        elif was and not self.slave.connected:
            self._peer = None
        if res is None:
            if not self.slave.connected:
                self._count("ignored", f"command 0x{packet[0]:02X} before CONNECT")
            return
        if res is PENDING:
            self._pending = [[]]
            self._requests.put((self.slave.calibration_request(), self._pending[0]))
            try:
                os.write(self._wake_w, b"x")
            except (BlockingIOError, OSError):
                pass  # the pipe is full: the loop is already due to look
            return
        if res[0] == C.PID_ERR:
            self.rejects.reject(C.ERROR_NAMES.get(res[1], hex(res[1])), f"command 0x{packet[0]:02X}")
        self._respond(res)

    def _frame(self, packet: bytes) -> bytes:
        out = struct.pack("<HH", len(packet), self._ctr) + packet
        self._ctr = (self._ctr + 1) & 0xFFFF
        return out

    def _respond(self, packet: bytes) -> None:
        self._send(self._frame(packet), self._reply_to)

    def _send(self, data: bytes, peer, droppable: bool = False) -> bool:
        """Send without blocking; False: not sent (counted).

        ``droppable``: DTO packets, refused when the TCP backlog is full.
        """
        try:
            if peer[0] == "udp":
                self._udp.sendto(data, peer[1])
                return True
            if self._conn is None:
                return False
            if droppable and len(self._tx) + len(data) > TX_CAP:
                return False
            self._tx += data
            self._flush()
            return True
        except OSError:
            self.counts["send_errors"] += 1
            return False

    def _flush(self) -> None:
        """Hand the waiting TCP bytes to the socket, as many as it takes now."""
        try:
            while self._tx:
                n = self._conn.send(self._tx)
                del self._tx[:n]
        except (BlockingIOError, InterruptedError):
            pass
        except OSError:
            self.counts["send_errors"] += 1
            self._drop_tcp()

    # ------------------------------------------------------------------ DAQ (the loop's thread, between ticks)
    def pump(self, until_ns: int = 0) -> None:
        """Send the DTO packets of the rows written since the last call (never blocks on a socket).

        In realtime it only tries the lock: while the thread serves a command
        the rows wait in the ring for the next pump.  In lockstep and afap it
        waits for the lock (the thread holds it for one command, never across
        a blocking call), so the ring never overruns there.
        """
        if not self._lock.acquire(blocking=self.ctx.mode != "realtime"):
            return
        try:
            while self._send_daq():
                if until_ns and time.monotonic_ns() >= until_ns:
                    return
        finally:
            self._lock.release()

    def _send_daq(self) -> bool:
        """One batch of rows; False when none waited."""
        daq = self.slave.daq
        cur = self.cursor
        if not daq.plans or self._peer is None:
            cur.skip_to_now()
            self._last_tick = -1
            return False
        if self._tx and self._conn is not None:
            self._flush()
        lost_before = cur.lost
        n = cur.take()
        if n == 0:
            return False
        ticks = cur.ints[:n, I_TICK]
        if cur.lost != lost_before and self._last_tick >= 0:
            first = int(ticks[0])
            daq.note_lost([max(0, (first - 1) // e.every - self._last_tick // e.every) for e in self.amap.events])
        self._last_tick = int(ticks[-1])
        blocks, self._ctr = daq.build(ticks, cur.floats[:n].view(np.uint8), self._ctr)
        if self._peer[0] == "tcp":
            data = b"".join(b.tobytes() for _, b in blocks)
            if self._send(data, self._peer, droppable=True):
                self.counts["dto_sent"] += sum(b.shape[0] * len(p.bounds) for p, b in blocks)
            else:
                daq.note_lost(self._event_rows(blocks))
            return True
        for p, b in blocks:
            for row in b:
                for start, end in p.bounds:
                    if self._send(row[start:end].tobytes(), self._peer):
                        self.counts["dto_sent"] += 1
                    else:
                        daq.note_lost([1 if e.number == p.event else 0 for e in self.amap.events])
        return True

    def _event_rows(self, blocks) -> list[int]:
        rows = [0] * len(self.amap.events)
        for p, b in blocks:
            rows[p.event] += b.shape[0]
        return rows

    # ------------------------------------------------------------------ status
    def _status_internal(self) -> dict:
        if not hasattr(self, "slave"):
            return {"open": False}
        s = self.slave
        return {"type": self.type_name, "open": self._thread is not None, "endpoints": dict(self.endpoints),
                "connected": s.connected, "master": self._peer[0] if self._peer else None,
                "epk": self.amap.epk, **self.counts, "errors": dict(s.errors),
                "daq_running": s.daq.running,
                "daq_lost": {e.name: s.daq.lost[e.number] for e in self.amap.events},
                "ecu_page": s.ecu_page, "xcp_page": s.xcp_page}


__all__ = ["XcpAdapter", "is_loopback_host"]
