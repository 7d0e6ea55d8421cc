"""The CAN adapter: a DBC message set on any python-can bus, driven by the loop's tick.

Configured in the I/O file as ``[[adapters]] type = "can"`` (see
``docs/can.md``)::

    [[adapters]]
    type = "can"
    name = "can"
    interface = "vbus"             # any python-can interface: vbus, virtual, socketcan, pcan, kvaser, ...
    channel = "gearbox-hil"        # vcan0 / can0 / PCAN_USBBUS1 / 0 ...; vbus: "*" is a fresh channel
    bitrate = 500000
    fd = false                     # CAN FD (then data_bitrate)
    message_set = "io_can_powershift.toml"   # default: io_can_<plant kind>.toml
    record = "runs/can.blf"        # optional: .blf, .asc, ... (python-can loggers)
    [adapters.share]               # optional, interface "virtual" only: python-can-remote on loopback
    port = 54701

Per tick (read -> step -> write):

* ``read`` (the base class's template around :meth:`CanAdapter._read_internal`,
  with the scenario gate) takes the values that the receive thread
  validated since the last tick out of a latest-value mailbox (one compiled
  call, under a lock it only *tries* to take: if the receive thread holds
  it, the values wait one tick), updates the freshness of every command
  message and feeds the loop's command watchdog only while every required
  command message is fresh.  A rejected or stale command never reaches the
  plant.
* ``write`` packs the messages whose cycle is due this tick (one compiled
  call, precompiled layouts, alive counter and CRC).  In realtime mode a
  second compiled call copies the packed frames into a preallocated send
  queue, and :meth:`CanAdapter.pump` sends them between ticks, a few
  microseconds after their tick: ``bus.send`` is a system call on
  SocketCAN and takes a lock that the receiving side also takes on the
  virtual bus, neither of which belongs in the tick (out of it, the write
  stage fell from about 6 to 3 us at the median, BENCHMARKS.md).  A queue
  full because the loop had no time between ticks for a long while drops
  frames and counts them (``tx.queue_dropped`` in the status).  In lockstep and afap ``write`` sends at once, so
  the reply to a ``step`` request follows the frames of its ticks.  Either
  way frames are sent with a zero timeout: a full transmit queue of the bus
  is counted, never waited for.

Receiving runs in a background thread: it blocks in ``bus.recv``, checks
every frame (ID, length, CRC-8 SAE J1850, alive counter, ranges) in
compiled code and posts accepted values to the mailbox.  Rejected frames
are counted by reason and logged (rate-limited), never raised.

The compiled frame codec is :mod:`io_adapters.can.frames`, the tables it
runs on come from :mod:`io_adapters.can.message_set` (DBC + mapping) through
:mod:`io_adapters.can.layouts`.

Why this file is longer than 600 lines: the adapter's receive thread, its send queue, the re-timing and the
fault hooks share the bus and the mailbox lock, and are kept in one class so that every use of that lock reads in
one file; the reject explanations and the fault hooks are the parts to move out first when it grows.
"""

from __future__ import annotations

import logging
import os
import secrets
import threading
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from plant_models.config import ConfigReader, resolve_config
from plant_models.plant import Plant

from ..base import Adapter, AdapterError, CommandCounts, LoopContext, new_tick_info
from . import frames, layouts
from .tick_stage import MailboxLock, read_stage, rx_apply_locked, write_stage
from .declaration import DECLARATION, CanFault
from .message_set import AUX_SOURCES, MessageSet, load_message_set
from .nm import CanNm

DEFAULT_CHANNEL = "gearbox-hil"
VBUS_INTERFACE = "vbus"  # the local virtual bus between processes (io_adapters/vbus)
TX_QUEUE_FRAMES = 4096  # realtime send queue: 50 ms of 80 frames a tick at 1 kHz (the loop serves at least every 50 ms)
TX_MARKS = 256  # ticks whose queued frames are remembered with the tick's clock (the send queue's wait, status)
TX_WAIT_EDGES_US = (50, 100, 200, 500, 1000, 2000, 5000)  # the histogram of that wait: below each edge, then above

assert [n for n, _ in AUX_SOURCES] == [
    "hil.tick", "hil.overruns", "hil.watchdog", "can.commands_fresh", "can.crc_errors", "can.counter_errors",
    "can.dlc_errors", "can.unknown_ids", "can.range_errors", "can.timeouts", "can.rx_ok", "can.tx_errors",
    "can.unknown_mux",
] and len(AUX_SOURCES) == frames.N_AUX  # the compiled code fills them in this order


def _tx_message_class():
    """A can.Message whose deep copy is cheap (python-can's virtual bus deep-copies every frame it sends).

    ``Message.__deepcopy__`` rebuilds the message through its keyword
    constructor and deep-copies channel and data, about 4x the cost of
    filling the slots directly.  Receivers get plain ``can.Message`` objects.
    """
    import can

    class TxMessage(can.Message):
        __slots__ = ()

        def __deepcopy__(self, memo):
            m = can.Message.__new__(can.Message)
            m.timestamp = self.timestamp
            m.arbitration_id = self.arbitration_id
            m.is_extended_id = self.is_extended_id
            m.is_remote_frame = self.is_remote_frame
            m.is_error_frame = self.is_error_frame
            m.channel = self.channel
            m.dlc = self.dlc
            m.data = bytearray(self.data)
            m.is_fd = self.is_fd
            m.is_rx = self.is_rx
            m.bitrate_switch = self.bitrate_switch
            m.error_state_indicator = self.error_state_indicator
            return m

    return TxMessage


class _RateLimitedLog:
    """Logs the first few occurrences of each kind of problem, then every 1000th."""

    def __init__(self, log: logging.Logger, first: int = 5, every: int = 1000):
        self.log = log
        self.first = first
        self.every = every
        self.seen: dict = {}

    def __call__(self, key, text: str) -> None:
        n = self.seen.get(key, 0) + 1
        self.seen[key] = n
        if n <= self.first or n % self.every == 0:
            self.log.warning("%s%s", text, f" ({n} so far)" if n > self.first else "")


class CanAdapter(Adapter):
    """DBC message set <-> plant ports over a python-can bus (see the module docstring)."""

    type_name = "can"
    declaration = DECLARATION  # --can-share, the fault kinds

    def __init__(self, name: str, options: dict):
        super().__init__(name, options)
        self._bus = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._recorder = None
        self._bus_log = None  # the recording's bus frames (bus_spool.py), while the server records
        self._share = None
        self._closed = False
        self._opened = False
        self._idle_reason = ""  # set when the plant has no message set: the adapter does nothing
        self._txq_state = None  # the realtime send queue's counters (frames.Q_*), allocated with the message set
        self._parse_options()

    # -- configuration ------------------------------------------------------------------
    def _parse_options(self) -> None:
        """Validate the adapter's table of the I/O config (keys as in the module docstring).

        Raises ConfigError with the key and the problem; the runtime adds the
        file and the ``adapters[i]`` prefix.
        """
        opts = {k: v for k, v in self.options.items() if k not in ("type", "name", "enabled")}
        cfg = ConfigReader(opts, f"adapter {self.name!r}")
        self.interface = cfg.string("interface", "virtual")
        channel = cfg.raw("channel", DEFAULT_CHANNEL)
        if isinstance(channel, bool) or not isinstance(channel, (str, int)):
            raise cfg.error("channel", f"must be a string or an integer, got {channel!r}")
        if self.interface == VBUS_INTERFACE and channel == "*":  # a channel of its own, as port 0 is a free port
            channel = f"hil-{os.getpid()}-{secrets.token_hex(3)}"
        self.channel = channel
        self.bitrate = cfg.integer("bitrate", 500000, lo=10000, hi=1000000)
        self.fd = cfg.boolean("fd", False)
        self.data_bitrate = cfg.integer("data_bitrate", 2000000, lo=self.bitrate, hi=15000000) if self.fd else None
        self.bus_options = cfg.raw("bus_options", {})
        if not isinstance(self.bus_options, dict):
            raise cfg.error("bus_options", "must be a table of extra python-can bus arguments")
        self.receive_filters = cfg.boolean("receive_filters", False)
        self.message_set_name = cfg.string("message_set", "") or None
        self.record_path = cfg.string("record", "")
        self.share_options = None
        if cfg.has("share"):
            sc = cfg.sub("share")
            self.share_options = dict(host=sc.string("host", "127.0.0.1"),
                                      port=sc.integer("port", 54701, lo=0, hi=65535),
                                      allow_non_loopback=sc.boolean("allow_non_loopback", False))
            sc.reject_unknown()
            if self.interface not in ("virtual", VBUS_INTERFACE):
                raise cfg.error("share", f"shares a virtual bus only (interface is {self.interface!r}; "
                                "other processes open a real or vcan interface directly)")
        cfg.reject_unknown()

    def open(self, plant: Plant, ctx: LoopContext) -> None:
        """Resolve the message set against the plant, open the bus, start receiving."""
        import can

        super().open(plant, ctx)
        self.log = ctx.log
        ms_name = self.message_set_name or f"io_can_{plant.kind}.toml"
        if self.message_set_name is None and not resolve_config(ms_name).exists():
            # the built-in defaults enable CAN for every plant; plants without a message set run without it
            self._idle_reason = f"no CAN message set for the {plant.kind} plant (configs/{ms_name})"
            self.log.warning("CAN %s: idle: %s", self.name, self._idle_reason)
            return
        channel, fd = self.channel, self.fd
        self.ms: MessageSet = load_message_set(ms_name, plant, ctx.period_s)
        for note in self.ms.notes:
            self.log.debug("CAN message set: %s", note)
        if not fd:
            fd_msgs = [m.name for m in self.ms.rx.messages + self.ms.tx.messages if m.fd or m.length > 8]
            if fd_msgs:
                raise AdapterError(f"{self.name}: messages {', '.join(fd_msgs)} are CAN FD frames; set fd = true")
        self._allocate()

        kwargs = dict(self.bus_options)
        kwargs.update(interface=self.interface, channel=channel, bitrate=self.bitrate)
        if fd:
            kwargs.update(fd=True, data_bitrate=self.data_bitrate)
        if self.receive_filters:
            kwargs["can_filters"] = [dict(can_id=m.frame_id, can_mask=0x1FFFFFFF if m.extended else 0x7FF,
                                          extended=m.extended) for m in self.ms.rx.messages]
        try:
            self._bus = self._open_bus(kwargs)
        except Exception as exc:  # python-can backends raise many types (CanError, OSError, ImportError, ...)
            raise AdapterError(f"{self.name}: cannot open CAN interface {self.interface!r} channel {channel!r}: "
                               f"{exc}") from None
        try:
            if self.record_path:
                from .recorder import FrameRecorder, RecorderError
                try:
                    self._recorder = FrameRecorder(self.record_path, log=self.log)
                except RecorderError as exc:
                    raise AdapterError(f"{self.name}: {exc}") from None
            if self.share_options is not None:
                from .share import LoopbackShare, ShareError
                try:
                    self._share = LoopbackShare(channel, log=self.log, interface=self.interface,
                                                **self.share_options)
                except ShareError as exc:
                    raise AdapterError(f"{self.name}: {exc}") from None
            if self.interface == VBUS_INTERFACE:  # one server per channel, as one server per share port
                owner = self._bus.claim()
                if owner:
                    raise AdapterError(f"{self.name}: the vbus channel {channel!r} is served by {owner}; give this "
                                       "server another channel (channel = \"*\": a fresh one)")
        except Exception:
            self.close()
            raise
        self._bind_loop(ctx)
        self._warm_up()
        self._stop.clear()
        self._thread = threading.Thread(target=self._rx_loop, name=f"can-rx-{self.name}", daemon=True)
        self._thread.start()
        self._opened = True
        self.log.info("CAN %s: %s channel %r, %d command and %d sensor messages from %s", self.name, self.interface,
                      channel, self.ms.rx.n_msg, self.ms.tx.n_msg, Path(self.ms.dbc_path).name)

    @staticmethod
    def _open_bus(kwargs: dict):
        """The python-can bus (the local virtual bus also from a checkout whose entry point is not installed)."""
        import can

        if kwargs["interface"] == VBUS_INTERFACE:
            from ..vbus import register

            register()
        return can.Bus(**kwargs)

    def _allocate(self) -> None:
        rx, tx = self.ms.rx, self.ms.tx
        p = self.plant
        # the compiled codec writes commands and reads outputs in the plant's df by offset
        self.codec = frames.FrameCodec(rx, tx, p.n_in, p.input_offset, p.output_offset)
        self._lock = MailboxLock()  # an int64 word the compiled tick can try too (tick_stage.py)
        self._lut = self.ms.frame_ids()
        self._rx_fd = [m.fd for m in rx.messages]
        self.error_frames = 0
        self.bus_errors = 0
        self.rx_frames = 0
        self.rx_handled = 0
        self.last_reject = ""
        self._tx_sent = np.zeros(max(tx.n_msg, 1), dtype=np.int64)
        self._txq_msg = np.zeros(TX_QUEUE_FRAMES, dtype=np.int64)
        self._txq_data = np.zeros((TX_QUEUE_FRAMES, frames.MAX_PAYLOAD), dtype=np.uint8)
        self._txq_state = np.zeros(frames.Q_COLS, dtype=np.int64)
        self._txq_bytes = memoryview(self._txq_data.reshape(-1))  # payload slices for bytearray assignment
        # per tick that queued frames: the queue's head after it and the tick's clock (ring of TX_MARKS), so that
        # a pump knows how long its oldest frame waited; written by the tick, read between ticks
        self._txq_mark_head = np.zeros(TX_MARKS, dtype=np.int64)
        self._txq_mark_ns = np.zeros(TX_MARKS, dtype=np.int64)
        self._txq_marks = np.zeros(1, dtype=np.int64)  # marks written (an array: the compiled write stage counts too)
        self._txq_mark_r = 0  # the first mark whose frames are not all sent
        self._txq_wait_hist = np.zeros(len(TX_WAIT_EDGES_US) + 1, dtype=np.int64)  # oldest frame's wait per pump
        self._txq_wait_max_ns = 0
        self._txq_depth_max = 0
        self._tx_msgs = []
        self._tx_views = []
        tx_message = _tx_message_class()
        for k, m in enumerate(tx.messages):
            self._tx_msgs.append(tx_message(arbitration_id=m.frame_id, is_extended_id=m.extended, is_fd=m.fd,
                                            bitrate_switch=m.fd, data=bytearray(m.length), is_rx=False))
            self._tx_views.append(memoryview(self.codec.tx_buf[k, :m.length]))
        self._rate_log = _RateLimitedLog(self.log)
        self._tx_msgs_ok = list(self._tx_msgs)  # the frames as the DBC has them (a wrong-DLC fault swaps its own in)
        self._tx_views_ok = list(self._tx_views)
        self._rx_ignore = [False] * rx.n_msg  # injected: the receive thread drops this message's frames
        self.rx_ignored = 0
        self._nm = None  # the rest-bus's CanNm state machine, if the message set has [nm]
        if self.ms.nm is not None:
            k = [m.name for m in tx.messages].index(self.ms.nm.pdu_name)
            self._nm = CanNm(replace(self.ms.nm, pdu=k), tx.n_msg, tx.messages[k].frame_id)

    def _warm_up(self) -> None:
        """Call every compiled function once on scratch copies, so the first tick loads no machine code."""
        c = self.codec
        ci, cf, cb, df = c.ci.copy(), c.cf.copy(), c.cb.copy(), self.plant.df.copy()
        if c.rx.n_msg:
            frames.rx_frame(0, 0, ci, cf, cb)
        frames.rx_apply(0, True, False, ci, cf, df)
        frames.tx_pack(-1, ci, cf, cb, df, new_tick_info())
        frames.tx_enqueue(ci, cb, 0, self._txq_msg.copy(), self._txq_data.copy(), self._txq_state.copy())
        frames.tx_log(ci, cb, 0, 0, np.zeros((1, 2), dtype=np.int64), np.zeros((1, frames.MAX_PAYLOAD), np.uint8),
                      np.zeros(frames.Q_COLS, dtype=np.int64))  # a recording may start mid-run

    def _bind_loop(self, ctx: LoopContext) -> None:
        """Time messages in ticks of the loop's period; the first tick starts the freshness count afresh.

        The loop's ``tick_info`` (watchdog, scenario, overruns) is kept by the
        base class and passed to the compiled transmit code as it is.
        """
        self._period_s = ctx.period_s
        self.codec.adapter[frames.A_PREV_TICK] = -1
        self._queue_tx = ctx.mode == "realtime"

    def _retime(self) -> None:
        """Cycle times and timeouts in ticks of the loop's new period (rare: between runs)."""
        self._period_s = self.ctx.period_s
        for note in layouts.retime(self.ms.rx, self._period_s) + layouts.retime(self.ms.tx, self._period_s):
            self.log.warning("CAN %s: %s", self.name, note)

    # -- receive thread -----------------------------------------------------------------
    def _rx_loop(self) -> None:
        import can

        bus = self._bus
        while not self._stop.is_set():
            try:
                msg = bus.recv(0.05)
            except can.CanError as exc:
                if self._stop.is_set():
                    break
                self.bus_errors += 1
                self._rate_log("bus", f"CAN {self.name}: receive error: {exc}")
                time.sleep(0.01)
                continue
            except Exception as exc:  # a backend failing in an unexpected way must not kill the thread
                if self._stop.is_set():
                    break
                self.bus_errors += 1
                self._rate_log("bus", f"CAN {self.name}: receive failed: {type(exc).__name__}: {exc}")
                time.sleep(0.01)
                continue
            if msg is None:
                continue
            try:
                self._on_frame(msg)
            except Exception as exc:  # defensive: one odd frame must not stop reception
                self.bus_errors += 1
                self._rate_log("frame", f"CAN {self.name}: frame not processed: {type(exc).__name__}: {exc}")
            self.rx_handled += 1  # after the mailbox post: a frame counted here is visible to the next tick
        # Closing: frames the bus already holds go to the recording (not to the plant), so none is lost.
        if self._recorder is not None:
            while True:
                try:
                    msg = bus.recv(0.0)
                except Exception:
                    break
                if msg is None:
                    break
                self.rx_frames += 1
                self._recorder.put_rx(msg)

    def _on_frame(self, msg) -> None:
        """Check one received frame and post it to the mailbox.  Runs in the receive thread."""
        self.rx_frames += 1
        if self._recorder is not None:
            self._recorder.put_rx(msg)
        spool = self._bus_log
        if spool is not None:  # the tick whose read takes it: the one after the last read
            spool.put_rx(int(self.codec.adapter[frames.A_PREV_TICK]) + 2, msg)
        if msg.is_error_frame:
            self.error_frames += 1
            self._rate_log("error_frame", f"CAN {self.name}: error frame on the bus")
            return
        nm = self._nm
        if nm is not None:
            nm.rx_any += 1  # any frame wakes the network from bus sleep
        m = self._lut.get((msg.arbitration_id, bool(msg.is_extended_id)), -1)
        if m < 0 and nm is not None and nm.heard(msg.arbitration_id, bool(msg.is_extended_id), msg.data):
            return  # another node's NM PDU: it keeps the network awake
        if m >= 0 and self._rx_ignore[m]:  # an injected fault: the message seems never to arrive
            self.rx_ignored += 1
            return
        if m < 0:
            self.codec.adapter[frames.A_UNKNOWN] += 1
            text = f"frame ID 0x{msg.arbitration_id:X} is not in the message set"
            self.last_reject = text
            self._rate_log("unknown", f"CAN {self.name}: {text}")  # one key: random IDs must not grow memory
            return
        data = msg.data
        n = len(data) if data is not None else 0
        lay = self.ms.rx.messages[m]
        if msg.is_remote_frame or n > frames.MAX_PAYLOAD or bool(msg.is_fd) != self._rx_fd[m]:
            with self._lock:
                self.codec.counts[m, frames.RX_DLC] += 1
            kind = "remote frame" if msg.is_remote_frame else ("CAN FD frame" if msg.is_fd else "classic frame")
            self._reject(m, frames.RX_DLC, f"{lay.name} (0x{lay.frame_id:X}): {kind} where the DBC has a "
                         f"{'CAN FD' if lay.fd else 'classic'} data frame")
            return
        c = self.codec
        with self._lock:
            if n:
                c.rx_buf[:n] = np.frombuffer(data, dtype=np.uint8, count=n)
            verdict = frames.rx_frame(m, n, c.ci, c.cf, c.cb)
        if verdict != frames.RX_OK:
            self._reject(m, verdict, self._explain(m, verdict))

    def _explain(self, m: int, verdict: int) -> str:
        lay = self.ms.rx.messages[m]
        d0, d1 = int(self.codec.detail[0]), int(self.codec.detail[1])
        head = f"{lay.name} (0x{lay.frame_id:X})"
        if verdict == frames.RX_DLC:
            return f"{head}: {d1} data bytes, the DBC says {d0}"
        if verdict == frames.RX_CRC:
            return f"{head}: wrong checksum 0x{d1:02X}, expected 0x{d0:02X}"
        if verdict == frames.RX_COUNTER_FROZEN:
            return f"{head}: alive counter frozen at {d1}"
        if verdict == frames.RX_COUNTER_JUMP:
            return f"{head}: alive counter jumped to {d1}, expected {d0}"
        if verdict == frames.RX_RANGE:
            s = int(self.codec.detail[2])
            sig = lay.signals[s - int(self.ms.rx.M[m, frames.M_SIG0])]
            phys = d1 * sig.scale + sig.offset
            lo = sig.raw_lo * sig.scale + sig.offset
            hi = sig.raw_hi * sig.scale + sig.offset
            port = self.plant.inputs[sig.target].name
            what = f"not an allowed value of {port}" if sig.allowed_raw and sig.raw_lo <= d1 <= sig.raw_hi \
                else f"outside [{min(lo, hi):g}, {max(lo, hi):g}]"
            return f"{head}: {sig.name} = {phys:g} is {what}"
        if verdict == frames.RX_MUX:
            sig = lay.signals[int(self.codec.detail[2]) - int(self.ms.rx.M[m, frames.M_SIG0])]
            return f"{head}: multiplexer {sig.name} = {d1}, the DBC defines {list(sig.mux_values)}"
        return f"{head}: rejected ({frames.RX_REASONS[verdict]})"

    def _reject(self, m: int, verdict: int, text: str) -> None:
        self.last_reject = text
        self._rate_log((m, verdict), f"CAN {self.name}: {text}")

    # -- real-time path --------------------------------------------------------------------
    def _read_internal(self, tick: int, now_ns: int, drive: bool) -> int:
        """Apply commands validated since the last tick if ``drive``; 1 while every required one is fresh.

        While a scenario drives the inputs (not ``drive``) commands are taken
        from the mailbox but not applied, and counted as ignored.  Called in
        the real-time loop.
        """
        if self._idle_reason:
            return 0
        c = self.codec
        if self.ctx.period_s != self._period_s:  # the loop changed its step between runs (lockstep scenario)
            self._retime()
        return rx_apply_locked(self._lock.word, tick, drive, c.ci, c.cf, self.plant.df)

    def compiled_read(self):
        """The compiled form of :meth:`read` (:func:`~io_adapters.can.tick_stage.can_read_stage`); None while
        idle or for a subclass that reads otherwise.  Between ticks."""
        cls = type(self)
        if (self._idle_reason or not self._opened or cls.read is not Adapter.read
                or cls._read_internal is not CanAdapter._read_internal):
            return None
        if self.ctx.period_s != self._period_s:
            self._retime()
        return read_stage(self._lock, self.codec, self.plant.df, self._tick_info)

    def compiled_write(self):
        """The compiled form of :meth:`write` in realtime, where the frames are queued for sending between
        ticks (:func:`~io_adapters.can.tick_stage.can_write_stage`); None otherwise, and with a network
        management state machine (``[nm]``), whose step on the plant's clock is Python.  Between ticks."""
        if (self._idle_reason or not self._opened or not self._queue_tx or self._nm is not None
                or type(self).write is not CanAdapter.write):
            return None
        return write_stage(self.codec, self.plant.df, self._tick_info, self._txq_msg, self._txq_data,
                           self._txq_state, self._bus_log, (self._txq_mark_head, self._txq_mark_ns, self._txq_marks))

    def write(self, tick: int, now_ns: int) -> None:
        """Pack the messages due this tick; queue them (realtime) or send them.  Called in the real-time loop."""
        if self._idle_reason:
            return
        c = self.codec
        if self._nm is not None:  # on the plant's clock: which messages may go from this tick on
            self._nm.step(tick * self._period_s * 1e3)
        n_due = frames.tx_pack(tick, c.ci, c.cf, c.cb, self.plant.df, self._tick_info)
        if n_due == 0:
            return
        spool = self._bus_log
        if spool is not None:
            spool.log_tx(c, tick, n_due)
        if self._queue_tx:
            frames.tx_enqueue(c.ci, c.cb, n_due, self._txq_msg, self._txq_data, self._txq_state)
            m = int(self._txq_marks[0])
            self._txq_mark_head[m % TX_MARKS] = self._txq_state[frames.Q_HEAD]
            self._txq_mark_ns[m % TX_MARKS] = now_ns
            self._txq_marks[0] = m + 1
            return
        due = c.due
        for i in range(n_due):
            k = due[i]
            self._send(k, self._tx_views[k])

    def pump(self, until_ns: int = 0) -> None:
        """Between ticks: send the frames the ticks queued, oldest first, until ``until_ns`` (0: all).

        At least one frame goes out per call, and the clock is read every 8 frames.
        """
        q = self._txq_state
        if q is None:
            return
        head = int(q[frames.Q_HEAD])
        tail = int(q[frames.Q_TAIL])
        if tail == head:
            return
        cap = TX_QUEUE_FRAMES
        mono = time.monotonic_ns
        self._note_wait(tail, head, mono())
        q_msg, q_bytes, width = self._txq_msg, self._txq_bytes, frames.MAX_PAYLOAD
        while tail < head:
            slot = tail % cap
            k = int(q_msg[slot])
            self._send(k, q_bytes[slot * width:slot * width + len(self._tx_views[k])])
            tail += 1
            q[frames.Q_TAIL] = tail
            if until_ns and tail % 8 == 0 and mono() >= until_ns:
                return

    def _note_wait(self, tail: int, head: int, now_ns: int) -> None:
        """Count how long the oldest queued frame (queue index ``tail``) waited since its tick, and the queue's depth.

        Its tick is the first mark whose head is beyond ``tail``; a tick
        older than the last TX_MARKS is taken as the oldest one kept (the
        wait is then under-counted; the loop serves at least every 50 ms).
        """
        r, w = self._txq_mark_r, int(self._txq_marks[0])
        r = max(r, w - TX_MARKS)
        while r < w - 1 and self._txq_mark_head[r % TX_MARKS] <= tail:
            r += 1
        self._txq_mark_r = r
        if r >= w:
            return
        wait_ns = now_ns - int(self._txq_mark_ns[r % TX_MARKS])
        if wait_ns > self._txq_wait_max_ns:
            self._txq_wait_max_ns = wait_ns
        b = 0
        for edge in TX_WAIT_EDGES_US:
            if wait_ns < edge * 1000:
                break
            b += 1
        self._txq_wait_hist[b] += 1
        if head - tail > self._txq_depth_max:
            self._txq_depth_max = head - tail

    def _send(self, k: int, payload) -> None:
        """Send transmit message ``k`` with ``payload``; a failure is counted, never raised."""
        nm = self._nm
        if nm is not None:
            if not nm.allow[k]:  # ready sleep holds the NM PDU, (prepare) bus sleep every frame
                nm.held += 1
                return
            if k == nm.cfg.pdu:
                nm.pdu_sent()
        msg = self._tx_msgs[k]
        msg.data[:] = payload
        try:
            self._bus.send(msg, 0.0)
        except Exception:  # CanError, OSError: counted (and visible in status), never raised into the loop
            self.codec.adapter[frames.A_TX_ERRORS] += 1
            return
        self._tx_sent[k] += 1
        rec = self._recorder
        if rec is not None:
            rec.put_tx(time.time(), msg.arbitration_id, msg.is_extended_id, msg.is_fd, bytes(msg.data))

    # -- the recording's bus frames (server/recording) ----------------------------------------------
    def start_bus_log(self, path) -> dict | None:
        """Spool every frame sent and received from now to ``path`` with its tick; what the recording needs to
        decode them (None while idle).  Between ticks."""
        if self._idle_reason or not self._opened:
            return None
        from .bus_spool import F_BRS, F_EXTENDED, F_FD, BusSpool

        self.stop_bus_log()
        tx = self.ms.tx.messages
        flags = [(F_EXTENDED if m.extended else 0) | (F_FD | F_BRS if m.fd else 0) for m in tx]
        self._bus_log = BusSpool(path, [m.frame_id for m in tx], flags, [m.length for m in tx])
        self.ctx.restage()  # the compiled tick's write keeps the bus log too
        return {"adapter": self.name, "spool": str(path), "dbc": self.ms.dbc_path, "fd": bool(self.fd),
                "module": "io_adapters.can.bus_mdf"}  # what turns the spool into the files' bus logging

    def stop_bus_log(self) -> dict | None:
        """Write the spool's last frames and its end record; its counts (None if none ran).  Between ticks."""
        spool, self._bus_log = self._bus_log, None
        if spool is None:
            return None
        if getattr(self, "ctx", None) is not None:
            self.ctx.restage()  # before the spool closes: no tick writes into it after this
        return spool.close()

    # -- life cycle ---------------------------------------------------------------------------
    def close(self) -> None:
        """Stop receiving, close the share and the bus, then flush and close the recording.  Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._bus is not None and self._opened and not self._idle_reason:
            self.pump(0)  # frames the last ticks queued (the loop sends them at the end of a run; here for others)
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
        if self._share is not None:
            self._share.close()
        if self._bus is not None:
            try:
                self._bus.shutdown()
            except Exception as exc:
                self.log.warning("CAN %s: shutting the bus down: %s", self.name, exc)
        if self._recorder is not None:
            self._recorder.close()
        self.stop_bus_log()

    # -- injected faults (kinds and keys: declaration.py; docs/faults.md), between ticks ----------------
    TX_FAULTS = {"drop": frames.TF_DROP, "delay": frames.TF_DELAY, "freeze_alive": frames.TF_FREEZE,
                 "corrupt_crc": frames.TF_BAD_CRC}

    def _fault_message(self, spec) -> tuple[str, int]:
        """("rx" or "tx", message index) of a fault, or FaultError saying why it does not fit."""
        from plant_models.errors import FaultError

        if self._idle_reason or not hasattr(self, "ms"):
            raise FaultError(f"fault: the CAN adapter {self.name!r} is not running a message set")
        side = self.ms.rx if spec.kind == "ignore_rx" else self.ms.tx
        names = [m.name for m in side.messages]
        what = "receive (command)" if spec.kind == "ignore_rx" else "transmit (sensor)"
        if spec.message not in names:
            raise FaultError(f"fault: {spec.kind}: no {what} message {spec.message!r}; they are {', '.join(names)}")
        k = names.index(spec.message)
        lay = side.messages[k]
        if spec.kind == "freeze_alive" and lay.counter_signal < 0:
            raise FaultError(f"fault: {spec.message} has no alive counter")
        if spec.kind == "corrupt_crc" and lay.crc_signal < 0:
            raise FaultError(f"fault: {spec.message} has no checksum")
        if spec.kind == "delay" and not 1 <= spec.cycles <= frames.DELAY_MAX:
            raise FaultError(f"fault: delay: 'cycles' must be 1..{frames.DELAY_MAX}, got {spec.cycles}")
        return ("rx" if spec.kind == "ignore_rx" else "tx"), k

    def _out_of_range_raw(self, spec, k: int) -> tuple[int, int]:
        """(signal row, raw value outside the DBC range) of an out_of_range fault."""
        from plant_models.errors import FaultError

        lay = self.ms.tx.messages[k]
        names = [sg.name for sg in lay.signals]
        if spec.signal not in names:
            raise FaultError(f"fault: out_of_range: {spec.message} has no signal {spec.signal!r}; it has "
                            f"{', '.join(names)}")
        j = names.index(spec.signal)
        sg = lay.signals[j]
        lo, hi = layouts.raw_bounds(sg.length, sg.signed)
        if spec.value is not None:
            raw = int(round((spec.value - sg.offset) / sg.scale))
            if not lo <= raw <= hi:
                raise FaultError(f"fault: out_of_range: {spec.value} does not fit the {sg.length} bits of "
                                f"{spec.signal}")
        elif sg.raw_hi < hi:
            raw = sg.raw_hi + 1
        elif sg.raw_lo > lo:
            raw = sg.raw_lo - 1
        else:
            raise FaultError(f"fault: out_of_range: the DBC range of {spec.signal} covers all its raw values")
        if sg.raw_lo <= raw <= sg.raw_hi:
            raise FaultError(f"fault: out_of_range: {spec.value} is inside the DBC range of {spec.signal}")
        return int(self.codec.tx.M[k, frames.M_SIG0]) + j, raw

    def check_fault(self, spec: CanFault) -> None:
        """A CAN fault must name a message of this message set (and a signal, counter or CRC it has)."""
        from plant_models.errors import FaultError

        if spec.target != "can":
            raise FaultError(f"fault: the CAN adapter {self.name!r} injects no {spec.target} faults")
        side, k = self._fault_message(spec)
        if spec.kind == "out_of_range":
            self._out_of_range_raw(spec, k)

    def set_fault(self, spec: CanFault) -> None:
        """Set the message's fault flag in the compiled codec (from the next tick on)."""
        self.check_fault(spec)
        side, k = self._fault_message(spec)
        tf = self.codec.tx_faults
        if spec.kind == "ignore_rx":
            self._rx_ignore[k] = True
        elif spec.kind == "wrong_dlc":
            m = self.ms.tx.messages[k]
            n = m.length - 1 if m.length > 1 else m.length + 1
            if m.fd and m.length > 8:  # the next shorter length a CAN FD frame can have
                n = max(x for x in (8, 12, 16, 20, 24, 32, 48) if x < m.length)
            self._tx_msgs[k] = _tx_message_class()(arbitration_id=m.frame_id, is_extended_id=m.extended,
                                                     is_fd=m.fd, bitrate_switch=m.fd, data=bytearray(n), is_rx=False)
            self._tx_views[k] = memoryview(self.codec.tx_buf[k, :n])
        elif spec.kind == "out_of_range":
            tf[k, frames.TF_OOR_SIG], tf[k, frames.TF_OOR_RAW] = self._out_of_range_raw(spec, k)
        elif spec.kind == "delay":
            tf[k, frames.TF_WRITTEN] = 0
            tf[k, frames.TF_DELAY] = spec.cycles
        else:
            tf[k, self.TX_FAULTS[spec.kind]] = 1

    def clear_fault(self, spec: CanFault) -> None:
        """Clear the message's fault flag."""
        try:
            side, k = self._fault_message(spec)
        except Exception:
            return
        tf = self.codec.tx_faults
        if spec.kind == "ignore_rx":
            self._rx_ignore[k] = False
        elif spec.kind == "wrong_dlc":
            self._tx_msgs[k] = self._tx_msgs_ok[k]
            self._tx_views[k] = self._tx_views_ok[k]
        elif spec.kind == "out_of_range":
            tf[k, frames.TF_OOR_SIG] = -1
        else:
            tf[k, self.TX_FAULTS[spec.kind]] = 0

    def settable(self) -> dict[str, tuple[int, int]]:
        """``nm_request`` (1 requests the network, 0 releases it) when the message set has a CanNm ([nm])."""
        return {"nm_request": (0, 1)} if getattr(self, "_nm", None) is not None else {}

    def set_values(self, values: dict[str, int]) -> None:
        if "nm_request" in values and self._nm is not None:
            self._nm.request(bool(values["nm_request"]))

    # -- reporting ------------------------------------------------------------------------------
    def _rejected_by_reason(self) -> dict[str, int]:
        """Rejected command frames by reason (the status keys of docs/can.md)."""
        cd = self.codec
        c, n = cd.counts, self.ms.rx.n_msg
        return {"crc": int(c[:n, frames.RX_CRC].sum()), "counter_frozen": int(c[:n, frames.RX_COUNTER_FROZEN].sum()),
                "counter_jump": int(c[:n, frames.RX_COUNTER_JUMP].sum()), "dlc": int(c[:n, frames.RX_DLC].sum()),
                "unknown_id": int(cd.adapter[frames.A_UNKNOWN]), "out_of_range": int(c[:n, frames.RX_RANGE].sum()),
                "unknown_mux": int(c[:n, frames.RX_MUX].sum())}

    def command_counts(self) -> CommandCounts | None:
        """Command frames accepted by the receive checks, and rejected by reason; None while idle or closed."""
        if self._idle_reason or not self._opened and self._bus is None:
            return None
        n = self.ms.rx.n_msg
        return CommandCounts(int(self.codec.counts[:n, frames.RX_OK].sum()), self._rejected_by_reason())

    def _status_internal(self) -> dict:
        """Counters for the status channel: every rejection reason, timeouts, transmit counts."""
        if self._idle_reason:
            return {"type": "can", "open": False, "idle": self._idle_reason}
        if not self._opened and self._bus is None:
            return {"type": "can", "open": False}
        cd = self.codec
        c = cd.counts
        rx_msgs = {}
        for k, m in enumerate(self.ms.rx.messages):
            rx_msgs[m.name] = {"accepted": int(c[k, frames.RX_OK]), "crc": int(c[k, frames.RX_CRC]),
                               "counter_frozen": int(c[k, frames.RX_COUNTER_FROZEN]),
                               "counter_jump": int(c[k, frames.RX_COUNTER_JUMP]), "dlc": int(c[k, frames.RX_DLC]),
                               "out_of_range": int(c[k, frames.RX_RANGE]), "lost": int(c[k, frames.RX_LOST]),
                               "unknown_mux": int(c[k, frames.RX_MUX]),
                               "timeouts": int(cd.timeouts[k]), "stale": bool(cd.stale[k]),
                               "required": m.required}
        n = self.ms.rx.n_msg
        rejected = self._rejected_by_reason()
        tx_msgs = {m.name: {"sent": int(self._tx_sent[k]), "saturated": int(cd.saturated[k]),
                            "dropped_by_fault": int(cd.tx_faults[k, frames.TF_DROPPED])}
                   for k, m in enumerate(self.ms.tx.messages)}
        out = {
            "type": "can",
            "interface": self.interface,
            "channel": self.channel,
            "message_set": self.ms.source,
            "dbc": self.ms.dbc_path,
            "commands_fresh": bool(cd.adapter[frames.A_FRESH]),
            "rx": {"frames": int(self.rx_frames), "accepted": int(c[:n, frames.RX_OK].sum()), "rejected": rejected,
                   "rejected_total": sum(rejected.values()), "lost": int(c[:n, frames.RX_LOST].sum()),
                   "timeouts": int(cd.timeouts[:n].sum()), "error_frames": int(self.error_frames),
                   "bus_errors": int(self.bus_errors), "mailbox_busy": int(cd.adapter[frames.A_BUSY]),
                   "ignored_scenario_active": int(cd.adapter[frames.A_IGNORED]),
                   "ignored_by_fault": int(self.rx_ignored),
                   "last_reject": self.last_reject, "messages": rx_msgs},
            "tx": {"frames": int(self._tx_sent.sum()), "errors": int(cd.adapter[frames.A_TX_ERRORS]),
                   "saturated": int(cd.saturated.sum()),
                   "queued": int(self._txq_state[frames.Q_HEAD] - self._txq_state[frames.Q_TAIL]),
                   "queue_dropped": int(self._txq_state[frames.Q_DROPPED]), "queue_max": int(self._txq_depth_max),
                   "queue_wait_max_us": round(self._txq_wait_max_ns / 1000.0, 1),
                   "queue_wait_us": self._wait_histogram(), "messages": tx_msgs},
        }
        if self._nm is not None:
            out["nm"] = self._nm.status()
        if self._recorder is not None:
            out["recording"] = self._recorder.status()
        bus_stats = getattr(self._bus, "statistics", None)
        if self.interface == VBUS_INTERFACE and bus_stats is not None:
            out["bus"] = bus_stats()  # the bus's own counters: a late or dropped frame is told from a silent TCU
            out["endpoints"] = {"vbus": str(self.channel)}  # other processes: can.Bus(interface="vbus", channel=...)
        if self._share is not None:
            out["share"] = self._share.status()
            # frames a member's full queue refused: on python-can's virtual bus a send fails for that only
            out["share"]["dropped"] = out["bus"]["dropped"] if "bus" in out else int(cd.adapter[frames.A_TX_ERRORS])
            out["endpoints"] = {"share": self._share.url}  # listed by `gearbox-hil serve` and its ready file
        return out

    def _wait_histogram(self) -> dict[str, int]:
        """Pumps by how long their oldest frame waited since its tick, us: ``"<50"``, ``"50-100"``, ..., ``">=5000"``."""
        e = TX_WAIT_EDGES_US
        names = [f"<{e[0]}"] + [f"{a}-{b}" for a, b in zip(e, e[1:])] + [f">={e[-1]}"]
        return {n: int(v) for n, v in zip(names, self._txq_wait_hist)}

    @property
    def share_url(self) -> str | None:
        """Where other processes connect (``can.Bus(interface="remote", channel=...)``), if shared."""
        return self._share.url if self._share is not None else None


__all__ = ["CanAdapter"]
