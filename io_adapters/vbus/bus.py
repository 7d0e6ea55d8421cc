"""The local virtual bus: a python-can interface whose members are processes of one machine.

Each bus instance listens on its own Unix-domain ``SOCK_SEQPACKET`` socket
in a folder of its channel::

    <bus dir>/<channel>/<pid>-<random>      one socket file per member

and holds one connection to every other member.  A frame sent is one packet
(:mod:`io_adapters.vbus.wire`) written on every connection without waiting:
a member whose queue is full misses the frame, and the sender counts it as
dropped.  Each connection has its own buffer, so a stalled receiver never
stalls the sender nor the other members.  A receiver waits in ``poll`` on
its connections; there is no relay process or thread, so a frame takes one
system call each way, microseconds.

Why connections and not datagrams: the kernel limits the queue of an unbound
Unix datagram receiver to ``net.unix.max_dgram_qlen`` packets (10 by
default), fewer than one tick of a plant's frames; a connection's queue is
limited by the sender's buffer only (hundreds of frames), as a vcan socket's
is, and the receiver can read its depth (``FIONREAD``).

Members find each other by listing the channel's folder; a sender reads it
again when the folder changes (its modification time, checked at each
send).  The socket file of a process that died without closing its bus
refuses connections; whoever meets it removes it.  The bus folder is made
mode 0700 and must belong to the user: only the user's own processes can
join, and nothing is reachable from the network.

The bus folder is, in order: the ``directory`` argument, the environment
variable ``GEARBOX_VBUS_DIR``, ``$XDG_RUNTIME_DIR/gearbox-vbus``, or
``<temp dir>/gearbox-vbus-<uid>``.  Processes meet only if they agree on it.
"""

from __future__ import annotations

import collections
import errno
import fcntl
import hashlib
import os
import re
import secrets
import select
import socket
import stat
import struct
import tempfile
import termios
import threading
import time

import can
from can.exceptions import CanInitializationError, CanOperationError

from . import wire

INTERFACE_NAME = "vbus"
ENV_DIR = "GEARBOX_VBUS_DIR"
SNDBUF_BYTES = 1 << 20  # per connection, asked for; the kernel caps it at net.core.wmem_max
CHECK_PERIOD_NS = 1_000_000  # a sender looks at the channel's folder at most this often (a stat costs microseconds)
REFRESH_WINDOW_NS = 50_000_000  # a folder changed less than this before its listing is listed again (coarse mtime)
_SAFE_CHANNEL = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,63}")
_MAX_SENDERS = 256  # distinct senders whose sequence is followed (beyond: forgotten and followed afresh)


def bus_directory(directory: str | os.PathLike | None = None) -> str:
    """The folder that holds the channels (see the module docstring), not created."""
    if directory:
        return os.fspath(directory)
    if os.environ.get(ENV_DIR):
        return os.environ[ENV_DIR]
    run = os.environ.get("XDG_RUNTIME_DIR")
    if run and os.path.isdir(run):
        return os.path.join(run, "gearbox-vbus")
    return os.path.join(tempfile.gettempdir(), f"gearbox-vbus-{os.getuid()}")


def channel_folder_name(channel) -> str:
    """The channel's folder name: the channel itself if it is a plain name, else a hash of it."""
    text = str(channel)
    if _SAFE_CHANNEL.fullmatch(text):
        return text
    return "h-" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:20]


def _private_dir(path: str) -> None:
    """Make ``path`` (mode 0700) or accept it if it is a folder of this user; else CanInitializationError."""
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
        st = os.lstat(path)
    except OSError as exc:
        raise CanInitializationError(f"vbus: cannot make the bus folder {path}: {exc.strerror or exc}") from None
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
        raise CanInitializationError(f"vbus: {path} is not a folder of this user; refusing to use it")


class LocalBus(can.BusABC):
    """A python-can bus shared by the processes of one machine over Unix-domain sockets.

    Parameters
    ----------
    channel
        The bus's name: every process opening the same channel (and bus
        folder) is on one bus.
    can_filters
        python-can filters (applied on receipt by :class:`can.BusABC`).
    receive_own_messages
        Also receive the frames this instance sends.
    directory
        The bus folder (see the module docstring).
    **kwargs
        Other python-can options (``bitrate``, ``fd``, ``data_bitrate``,
        ...) are accepted and have no effect: every member carries classic
        and CAN FD frames.
    """

    def __init__(self, channel="gearbox-hil", can_filters=None, receive_own_messages: bool = False,
                 directory: str | os.PathLike | None = None, **kwargs):
        if channel is None:  # can.Bus(interface="vbus") without a channel
            channel = "gearbox-hil"
        self.channel_id = str(channel)
        self.receive_own_messages = bool(receive_own_messages)
        self._open = False
        self._sock = None
        self._owner_fd = None
        self.channel_dir = os.path.join(bus_directory(directory), channel_folder_name(channel))
        _private_dir(os.path.dirname(self.channel_dir))
        _private_dir(self.channel_dir)
        self.member_name = f"{os.getpid()}-{secrets.token_hex(4)}"
        self.path = os.path.join(self.channel_dir, self.member_name)
        if len(os.fsencode(self.path)) + 1 > 107:  # + 1: the hidden name it is bound under first
            raise CanInitializationError(f"vbus: the socket path {self.path} is longer than 107 bytes; "
                                         f"set {ENV_DIR} to a shorter folder")
        self._sender_id = secrets.randbits(32)
        self._seq = 0
        self._send_lock = threading.Lock()
        self._peers: dict[str, socket.socket] = {}  # member name -> our connection to it (we send on it)
        self._conns: dict[int, socket.socket] = {}  # fd -> a member's connection to us (we receive on it)
        self._ready: collections.deque[int] = collections.deque()  # fds poll found readable, not yet drained
        self._dir_mtime_ns = -1
        self._listed_ns = 0
        self._checked_ns = time.monotonic_ns()
        self._last_seq: dict[int, int] = {}
        self.stats = dict(sent=0, delivered=0, dropped=0, peers_gone=0, stale_removed=0, received=0, bad=0,
                          lost=0, delay_max_us=0.0, delay_last_us=0.0, late_1ms=0, backlog_max=0)
        self._backlog = 0
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        # bound under a hidden name, listening, then renamed: a member's file appears only once it accepts,
        # so a sender never finds it refusing between bind and listen (and takes it for a dead member's file)
        hidden = os.path.join(self.channel_dir, "." + self.member_name)
        try:
            sock.bind(hidden)
            sock.listen(128)
            os.rename(hidden, self.path)
        except OSError as exc:
            sock.close()
            try:
                os.unlink(hidden)
            except OSError:
                pass
            raise CanInitializationError(f"vbus: cannot listen on {self.path}: {exc.strerror or exc}") from None
        sock.setblocking(False)
        self._sock = sock
        self._poll = select.poll()
        self._poll.register(sock.fileno(), select.POLLIN)
        self._open = True
        self.channel_info = f"vbus channel {self.channel_id!r} ({self.channel_dir})"
        self._refresh_peers(force=True)
        super().__init__(channel=channel, can_filters=can_filters, **kwargs)

    # -- members ------------------------------------------------------------------------------------
    def _refresh_peers(self, force: bool = False) -> None:
        """List the channel's folder again if it changed since the last listing (or ``force``)."""
        try:
            mtime = os.stat(self.channel_dir).st_mtime_ns
        except OSError:
            return
        now = time.time_ns()
        if not force and mtime == self._dir_mtime_ns and (now - mtime > REFRESH_WINDOW_NS
                                                          or now - self._listed_ns < 1_000_000):
            # unchanged: listed long enough after its last change that a coarse mtime cannot hide another
            # one, or listed again less than a millisecond ago
            return
        self._dir_mtime_ns = mtime
        self._listed_ns = now
        try:
            names = {n for n in os.listdir(self.channel_dir) if not n.startswith(".")}  # hidden: not yet listening
        except OSError:
            return
        if not self.receive_own_messages:
            names.discard(self.member_name)
        for gone in set(self._peers) - names:
            self._peers.pop(gone).close()
        for name in names - set(self._peers):
            self._connect(name)

    def _connect(self, name: str) -> None:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        s.setblocking(False)
        try:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SNDBUF_BYTES)
            s.connect(os.path.join(self.channel_dir, name))
        except ConnectionRefusedError:  # nobody listens: a member that died without closing its bus
            s.close()
            self._remove_stale(name)
            return
        except OSError:  # gone meanwhile, not a socket, or its backlog is full (tried again at the next change)
            s.close()
            self._dir_mtime_ns = -1
            return
        self._peers[name] = s

    def _remove_stale(self, name: str) -> None:
        path = os.path.join(self.channel_dir, name)
        if is_stale(path):
            try:
                os.unlink(path)
                self.stats["stale_removed"] += 1
            except OSError:
                pass

    def members(self) -> int:
        """Bus instances on this channel that this one sends to (itself too with ``receive_own_messages``)."""
        with self._send_lock:
            self._refresh_peers(force=True)
            return len(self._peers)

    # -- python-can interface ---------------------------------------------------------------------------
    def send(self, msg: can.Message, timeout: float | None = None) -> None:
        """Write ``msg`` to every member without waiting (``timeout`` is not used: the bus never blocks).

        A member whose queue is full misses the frame (``dropped`` in
        :meth:`statistics`); CanOperationError only for a closed bus or a
        frame CAN cannot carry.
        """
        if not self._open:
            raise CanOperationError("vbus: the bus is closed")
        with self._send_lock:
            self._seq += 1
            now_ns = time.monotonic_ns()
            try:
                packet = wire.encode(msg, self._sender_id, self._seq, time.time(), now_ns)
            except wire.WireError as exc:
                raise CanOperationError(f"vbus: cannot send: {exc}") from None
            if now_ns - self._checked_ns >= CHECK_PERIOD_NS:  # a member that joins hears us within this period
                self._checked_ns = now_ns
                self._refresh_peers()
            st = self.stats
            st["sent"] += 1
            for name, s in list(self._peers.items()):
                try:
                    s.send(packet)
                    st["delivered"] += 1
                except BlockingIOError:  # the member's queue is full (it is not reading)
                    st["dropped"] += 1
                except OSError:  # the member closed or died: forget it, and its file if it is left
                    st["peers_gone"] += 1
                    self._peers.pop(name).close()
                    self._remove_stale(name)

    def _recv_internal(self, timeout: float | None):
        if not self._open:
            raise CanOperationError("vbus: the bus is closed")
        deadline = None if timeout is None else time.monotonic() + max(timeout, 0.0)
        ready, listener = self._ready, self._sock.fileno()
        while True:
            while ready:
                fd = ready.popleft()
                if fd == listener:
                    self._accept()
                    continue
                conn = self._conns.get(fd)
                if conn is None:
                    continue
                try:
                    packet = conn.recv(wire.FRAME_SIZE + 1)  # one byte more: an oversized packet shows its size
                except BlockingIOError:
                    continue
                except OSError:
                    packet = b""
                if not packet:  # the member left
                    self._drop_conn(fd)
                    continue
                ready.append(fd)  # it may hold more; the other ready members are read first
                msg = self._message(packet)
                if msg is not None:
                    return msg, False
            self._backlog = 0
            if deadline is None:
                wait_ms = None
            else:
                wait_ms = max(0, int((deadline - time.monotonic()) * 1000.0 + 0.999))  # past it: look once
            try:
                events = self._poll.poll(wait_ms)
            except InterruptedError:
                events = []
            except (OSError, ValueError):
                if not self._open:
                    raise CanOperationError("vbus: the bus is closed") from None
                raise
            ready.extend(fd for fd, _ in events)
            if not events and deadline is not None and time.monotonic() >= deadline:
                return None, False

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:  # BlockingIOError: none waiting
                return
            conn.setblocking(False)
            self._conns[conn.fileno()] = conn
            self._poll.register(conn.fileno(), select.POLLIN)

    def _drop_conn(self, fd: int) -> None:
        conn = self._conns.pop(fd, None)
        if conn is not None:
            self._poll.unregister(fd)
            conn.close()

    def _message(self, packet: bytes) -> can.Message | None:
        """The received packet as a python-can message, counted; None (counted as bad) if invalid."""
        st = self.stats
        now_ns = time.monotonic_ns()
        fields = wire.decode(packet)
        if fields is None:
            st["bad"] += 1
            return None
        flags, arbitration_id, timestamp, sent_ns, sender, seq, dlc, data = fields
        st["received"] += 1
        self._backlog += 1
        if self._backlog > st["backlog_max"]:
            st["backlog_max"] = self._backlog
        delay_us = (now_ns - sent_ns) / 1000.0
        if 0.0 <= delay_us < 3.6e9:  # one clock for the machine; anything else is a forged sent_ns
            st["delay_last_us"] = delay_us
            if delay_us > st["delay_max_us"]:
                st["delay_max_us"] = delay_us
            if delay_us > 1000.0:
                st["late_1ms"] += 1
        prev = self._last_seq.get(sender)
        gap = (seq - prev) & 0xFFFFFFFF if prev is not None else 1
        if 1 < gap < 1 << 31:
            st["lost"] += gap - 1
        if prev is None and len(self._last_seq) >= _MAX_SENDERS:
            self._last_seq.clear()
        self._last_seq[sender] = seq
        return can.Message(timestamp=timestamp, arbitration_id=arbitration_id,
                           is_extended_id=bool(flags & wire.F_EXTENDED), is_remote_frame=bool(flags & wire.F_REMOTE),
                           is_error_frame=bool(flags & wire.F_ERROR), channel=self.channel_id, dlc=dlc,
                           data=data, is_fd=bool(flags & wire.F_FD), is_rx=True,
                           bitrate_switch=bool(flags & wire.F_BRS),
                           error_state_indicator=bool(flags & wire.F_ESI), check=False)

    def queued_frames(self) -> int:
        """Frames waiting in this member's receive queues now (their bytes / the packet size)."""
        total = 0
        for conn in list(self._conns.values()):
            try:
                total += struct.unpack("i", fcntl.ioctl(conn.fileno(), termios.FIONREAD, b"\0\0\0\0"))[0]
            except OSError:
                pass
        return total // wire.FRAME_SIZE

    def statistics(self) -> dict:
        """Counters of this bus instance (the adapter's status shows them; docs/can.md).

        ``sent`` frames, ``delivered`` packets (one per member and frame),
        ``dropped`` (a member's queue was full), ``peers_gone``,
        ``stale_removed`` (socket files of dead processes), ``received``,
        ``bad`` (packets refused by the decoder), ``lost`` (gaps in a
        sender's sequence: frames some queue dropped on the way here),
        ``delay_max_us`` / ``delay_last_us`` (send to receipt, by the
        machine's monotonic clock), ``late_1ms`` (received more than 1 ms
        after sending), ``backlog_max`` (most frames read in a row without
        waiting), ``queued`` (frames waiting to be read now on the
        connections this member has taken), ``members``
        (whom this instance sends to).
        """
        out = dict(self.stats)
        out["delay_max_us"] = round(out["delay_max_us"], 1)
        out["delay_last_us"] = round(out["delay_last_us"], 1)
        out["queued"] = self.queued_frames()
        out["members"] = len(self._peers)
        out["channel"] = self.channel_id
        return out

    def claim(self) -> str:
        """Become the channel's one owner (a plant server) while this bus is open: '' if done, else who owns it.

        An advisory lock (``flock``) on ``<channel folder>.owner``: the
        kernel releases it when the process ends, so a crashed owner leaves
        nothing behind.  Other members (TCUs, tools) do not claim.
        """
        path = self.channel_dir + ".owner"
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.pread(fd, 64, 0).decode("ascii", "replace").strip()
            os.close(fd)
            return f"process {holder}" if holder else "another process"
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        self._owner_fd = fd
        return ""

    def fileno(self) -> int:
        """The listening socket (readable when a member connects; frames arrive on the connections)."""
        return self._sock.fileno() if self._sock is not None else -1

    def shutdown(self) -> None:
        """Leave the channel: remove this member's socket file, close every connection.  Idempotent."""
        if self._open:
            self._open = False
            try:
                os.unlink(self.path)
            except OSError:
                pass
            with self._send_lock:
                for s in self._peers.values():
                    s.close()
                self._peers.clear()
            for conn in list(self._conns.values()):
                conn.close()
            self._conns.clear()
            self._sock.close()
            if self._owner_fd is not None:
                os.close(self._owner_fd)  # releases the owner lock
                self._owner_fd = None
        super().shutdown()

    @staticmethod
    def _detect_available_configs():
        """The channels with members in the default bus folder."""
        root = bus_directory()
        try:
            names = sorted(n for n in os.listdir(root) if os.listdir(os.path.join(root, n)))
        except OSError:
            return []
        return [{"interface": INTERFACE_NAME, "channel": n} for n in names]


def is_stale(path: str) -> bool:
    """True if ``path`` is a socket file nobody reads (its process died without closing its bus)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.setblocking(False)
    try:
        s.connect(path)
        return False
    except OSError as exc:
        return exc.errno == errno.ECONNREFUSED
    finally:
        s.close()


__all__ = ["LocalBus", "INTERFACE_NAME", "bus_directory", "channel_folder_name", "is_stale"]
