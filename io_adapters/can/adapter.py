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

The adapter's parts that do not share its bus and mailbox lock are modules of their own: the transport
fault hooks (:mod:`io_adapters.can.adapter_faults`), the wiring of the network management
(:mod:`io_adapters.can.adapter_nm`) and the reject explanations and status counters
(:mod:`io_adapters.can.adapter_report`).  The receive thread, the send queue and the re-timing, which do share
them, stay in this class, so that every use of that lock reads in one file.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np

from plant_models.config import ConfigReader, resolve_config
from plant_models.plant import Plant

from ..base import Adapter, AdapterError, CommandCounts, LoopContext, new_tick_info
from . import adapter_nm, adapter_report, frames, layouts
from .adapter_bus import VBUS_INTERFACE, open_bus, tx_message_class
from .adapter_report import RateLimitedLog
from .adapter_send_queue import TX_MARKS, TX_QUEUE_FRAMES, TX_WAIT_EDGES_US, CanSendQueue  # noqa: F401 (re-exported)
from .adapter_faults import TX_FAULTS, CanTransportFaults, check_target
from .tick_stage import MailboxLock, read_stage, rx_apply_locked, write_stage
from .declaration import DECLARATION, CanFault, resolve_channel
from .message_set import AUX_SOURCES, MessageSet, load_message_set

DEFAULT_CHANNEL = "gearbox-hil"

assert [n for n, _ in AUX_SOURCES] == [
    "hil.tick", "hil.overruns", "hil.watchdog", "can.commands_fresh", "can.crc_errors", "can.counter_errors",
    "can.dlc_errors", "can.unknown_ids", "can.range_errors", "can.timeouts", "can.rx_ok", "can.tx_errors",
    "can.unknown_mux",
] and len(AUX_SOURCES) == frames.N_AUX  # the compiled code fills them in this order


class CanAdapter(CanSendQueue, Adapter):
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
        self._nm = None  # the rest-bus's CanNm state machine, if the message set has [nm] (adapter_nm.py)
        self._faults: CanTransportFaults | None = None  # the fault hooks, with the message set (adapter_faults.py)
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
        self.channel_option = channel  # vbus "*": a fresh channel, one per server, chosen at open (resolve_channel)
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
        # the vbus's "*": the channel every adapter of this server given "*" opens (the J1939 rest-bus too)
        self.channel = channel = resolve_channel(self.interface, self.channel_option, ctx.fresh_channels)
        fd = self.fd
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
            self._bus = open_bus(kwargs)
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
        self._allocate_send_queue()
        self._tx_msgs = []
        self._tx_views = []
        tx_message = tx_message_class()
        for k, m in enumerate(tx.messages):
            self._tx_msgs.append(tx_message(arbitration_id=m.frame_id, is_extended_id=m.extended, is_fd=m.fd,
                                            bitrate_switch=m.fd, data=bytearray(m.length), is_rx=False))
            self._tx_views.append(memoryview(self.codec.tx_buf[k, :m.length]))
        self._rate_log = RateLimitedLog(self.log)
        self._faults = CanTransportFaults(self.name, self.ms, self.codec, self._tx_msgs, self._tx_views, tx_message)
        self._rx_ignore = self._faults.rx_ignore  # the list the fault hooks switch, read by the receive thread
        self.rx_ignored = 0
        self._nm = adapter_nm.nm_of(self.ms)

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
        m = self._lut.get((msg.arbitration_id, bool(msg.is_extended_id)), -1)
        if self._nm is not None and adapter_nm.heard(self._nm, msg, m):
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
        return adapter_report.explain_reject(self.ms, self.codec, self.plant.inputs, m, verdict)

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
            adapter_nm.step(self._nm, tick, self._period_s)
        n_due = frames.tx_pack(tick, c.ci, c.cf, c.cb, self.plant.df, self._tick_info)
        if n_due == 0:
            return
        spool = self._bus_log
        if spool is not None:
            spool.log_tx(c, tick, n_due)
        if self._queue_tx:
            frames.tx_enqueue(c.ci, c.cb, n_due, self._txq_msg, self._txq_data, self._txq_state)
            self._mark_queued(now_ns)
            return
        due = c.due
        for i in range(n_due):
            k = due[i]
            self._send(k, self._tx_views[k])

    def _send(self, k: int, payload) -> None:
        """Send transmit message ``k`` with ``payload``; a failure is counted, never raised."""
        if self._nm is not None and not adapter_nm.may_send(self._nm, k):
            return
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

    # -- injected faults (kinds and keys: declaration.py; docs/faults.md; the hooks: adapter_faults.py) ----------
    TX_FAULTS = TX_FAULTS  # the kinds that are one flag of the codec's fault table

    def check_fault(self, spec: CanFault) -> None:
        """A CAN fault must name a message of this message set (and a signal, counter or CRC it has)."""
        check_target(self.name, spec, self._faults).check(spec)

    def set_fault(self, spec: CanFault) -> None:
        """Set the message's fault flag in the compiled codec (from the next tick on)."""
        check_target(self.name, spec, self._faults).set(spec)

    def clear_fault(self, spec: CanFault) -> None:
        """Clear the message's fault flag."""
        if self._faults is not None:
            self._faults.clear(spec)

    def settable(self) -> dict[str, tuple[int, int]]:
        """``nm_request`` (1 requests the network, 0 releases it) when the message set has a CanNm ([nm])."""
        return adapter_nm.settable(self._nm)

    def set_values(self, values: dict[str, int]) -> None:
        adapter_nm.set_values(self._nm, values)

    # -- reporting ------------------------------------------------------------------------------
    def _rejected_by_reason(self) -> dict[str, int]:
        """Rejected command frames by reason (the status keys of docs/can.md)."""
        return adapter_report.rejected_by_reason(self.codec, self.ms.rx.n_msg)

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
        out = {
            "type": "can", "interface": self.interface, "channel": self.channel, "message_set": self.ms.source,
            "dbc": self.ms.dbc_path, "commands_fresh": bool(cd.adapter[frames.A_FRESH]),
            "rx": adapter_report.rx_status(self.ms, cd, frames_seen=self.rx_frames, error_frames=self.error_frames,
                                           bus_errors=self.bus_errors, ignored_by_fault=self.rx_ignored,
                                           last_reject=self.last_reject),
            "tx": adapter_report.tx_status(self.ms, cd, self._tx_sent, self._txq_state, depth_max=self._txq_depth_max,
                                           wait_max_ns=self._txq_wait_max_ns, wait_us=self._wait_histogram()),
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

    @property
    def share_url(self) -> str | None:
        """Where other processes connect (``can.Bus(interface="remote", channel=...)``), if shared."""
        return self._share.url if self._share is not None else None


__all__ = ["CanAdapter", "TX_MARKS", "TX_QUEUE_FRAMES", "TX_WAIT_EDGES_US", "VBUS_INTERFACE"]
