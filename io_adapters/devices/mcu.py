"""Backend ``mcu``: a microcontroller I/O front-end over USB serial, speaking the protocol of :mod:`.wire`.

The host side never blocks the tick.  :meth:`McuDevice.write_targets`
encodes the targets into a preallocated frame buffer and writes it with a
non-blocking ``os.write`` (a frame that does not fit the port's buffer is
dropped and counted: the device then answers nothing and the stall rule
below applies).  A reader thread waits on the port with ``select``, feeds a
bounded :class:`~.wire.FrameParser` and decodes each measurement frame into a
spare :class:`~.channels.Measurements`, then copies it into the latest one
under a lock held only for that copy; :meth:`McuDevice.read_measurements`
copies the latest into the tick's own object under the same lock.

Errors, each counted in :meth:`McuDevice.status`, and the safe state that
answers them:

* ``crc_errors``: a frame with a bad CRC (the parser resynchronises on the
  next start byte);
* ``lost_frames``: a gap in the device's sequence numbers (frames missing
  without a trace; a frame dropped for its CRC is counted there only);
* ``stalls``: no measurement frame for ``stall_ticks`` ticks (default 5);
* ``bad_frames``: a frame of unknown type or wrong length for the layout.

After a CRC error, a lost frame or a stall the device layer is in its
**safe state** until ``recover_frames`` (default 3) consecutive good
in-sequence measurement frames have arrived: the targets sent carry
``FLAG_SAFE`` and the safe values (no edges, resistances, levels and
voltages at their ``safe_*``, no pin faults), the measurements read duty and
current 0, digital inputs 0, and ``Measurements.safe`` (the status bit) is
set.  ``safe_entries`` counts how often it was entered.

:class:`McuEmulator` is the device side in Python (what the firmware must
do), run in tests on a pseudo-terminal.
"""

from __future__ import annotations

import os
import select
import threading
import time
import termios
import tty

import numpy as np

from .base import Device, DeviceError
from .channels import DeviceLayout, Measurements, Targets
from .sim import SimDevice
from .wire import (FLAG_SAFE, ST_CRC_ERROR, ST_SAFE, ST_SEQ_GAP, T_MEASUREMENTS, T_TARGETS, FrameParser,
                   PayloadError, decode_measurements, decode_targets, encode_measurements, encode_targets, max_frame,
                   measurements_length, warm_up)


def open_port(path: str) -> int:
    """Open a serial port (or a pseudo-terminal) raw and non-blocking; its file descriptor."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK)
    except OSError as exc:
        raise DeviceError(f"cannot open serial port {path!r}: {exc.strerror}") from exc
    if os.isatty(fd):
        tty.setraw(fd, termios.TCSANOW)
    return fd


class McuDevice(Device):
    """The host side.  Options: ``port`` (device path, e.g. ``/dev/ttyACM0``, or a file descriptor ``fd``),
    ``stall_ticks`` (5), ``recover_frames`` (3)."""

    type_name = "mcu"

    def __init__(self, name: str, layout: DeviceLayout, options: dict | None = None):
        super().__init__(name, layout, options)
        if "port" not in self.options and "fd" not in self.options:
            raise DeviceError(f"device {name!r} (mcu): give a serial 'port'")
        self.stall_ticks = int(self.options.get("stall_ticks", 5))
        self.recover_frames = int(self.options.get("recover_frames", 3))
        if self.stall_ticks < 1 or self.recover_frames < 1:
            raise DeviceError(f"device {name!r} (mcu): stall_ticks and recover_frames must be >= 1")
        self._tx = np.zeros(max_frame(layout), dtype=np.uint8)
        self._safe_targets = Targets(layout)
        self._spare = Measurements(layout)
        self._latest = Measurements(layout)
        self._meas_len = measurements_length(layout)
        self._lock = threading.Lock()
        self._tx_view = memoryview(self._tx)
        self._parser = FrameParser(self._on_frame, max_payload=len(self._tx))
        self._fd = -1
        self._own_fd = False
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._tx_seq = 0
        self._rx_seq = -1
        self._fresh = 0  # measurement frames since the tick last read (under the lock)
        self._good_run = 0  # consecutive good in-sequence frames
        self._safe_pending = True  # safe until the device has answered recover_frames times
        self._ticks_silent = 0
        self._stalled = False
        self._crc_since_frame = 0  # CRC errors since the last good frame (they explain a sequence gap)
        self.device_status = 0
        self.counters.update(crc_errors=0, lost_frames=0, stalls=0, bad_frames=0, safe_entries=0, frames_in=0,
                             frames_out=0, tx_dropped=0, overflow_bytes=0)

    # -- life cycle ----------------------------------------------------------------------------------------
    def open(self) -> None:
        warm_up(self.layout)  # the codec's kernels compiled now, not at the first tick's frame
        if "fd" in self.options:
            self._fd, self._own_fd = int(self.options["fd"]), False
            os.set_blocking(self._fd, False)
        else:
            self._fd, self._own_fd = open_port(str(self.options["port"])), True
        self._stop.clear()
        self._thread = threading.Thread(target=self._reader, name=f"device-{self.name}", daemon=True)
        self._thread.start()

    def close(self) -> None:
        if self._fd < 0:
            return
        self._safe_targets.set_safe(self.layout)
        self._send(-1, FLAG_SAFE, self._safe_targets)
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=1.0)
        if self._own_fd:
            os.close(self._fd)
        self._fd = -1

    # -- the tick ------------------------------------------------------------------------------------------
    def write_targets(self, tick: int, targets: Targets) -> None:
        """Send the targets of tick ``tick + 1`` (the safe values while in the safe state).  Never blocks."""
        self.counters["ticks"] += 1
        if self._safe_pending or self._stalled:  # a plain bool read: no lock needed
            self._send(tick, FLAG_SAFE, self._safe_targets)
        else:
            self._send(tick, 0, targets)

    def _send(self, tick: int, flags: int, targets: Targets) -> None:
        n = encode_targets(self._tx, self._tx_seq, tick, flags, targets)
        self._tx_seq = (self._tx_seq + 1) & 0xFF
        try:
            written = os.write(self._fd, self._tx_view[:n])
        except BlockingIOError:
            written = 0
        except OSError:
            written = 0
        if written == n:
            self.counters["frames_out"] += 1
        else:
            self.counters["tx_dropped"] += 1

    def read_measurements(self) -> Measurements:
        """The latest measurements, or the safe reading while in the safe state.  Never blocks for long:
        the lock is held by the reader only while it copies one frame's values."""
        m = self.measurements
        with self._lock:
            fresh, self._fresh = self._fresh, 0
            if fresh:
                m.copy_from(self._latest)
            safe = self._safe_pending
        if fresh:
            self._ticks_silent = 0
            self._stalled = False
        else:
            self._ticks_silent += 1
            if self._ticks_silent >= self.stall_ticks and not self._stalled:
                self._stalled = True
                self.counters["stalls"] += 1
                self._enter_safe()
                safe = True
        if safe or self._stalled:
            m.set_safe()
        else:
            m.safe = False
        return m

    def _enter_safe(self) -> None:
        with self._lock:
            if not self._safe_pending:
                self.counters["safe_entries"] += 1
            self._safe_pending = True
            self._good_run = 0

    # -- the reader thread ---------------------------------------------------------------------------------
    def _reader(self) -> None:
        while not self._stop.is_set():
            try:
                ready, _, _ = select.select([self._fd], [], [], 0.05)
                if not ready:
                    continue
                data = os.read(self._fd, 4096)
            except (BlockingIOError, InterruptedError):
                continue
            except (OSError, ValueError):
                break  # port gone: the stall rule puts the layer in its safe state
            if data:
                self.feed(data)

    def feed(self, data: bytes) -> None:
        """Bytes from the port into the parser (the reader thread's path; tests call it directly)."""
        p = self._parser
        crc0 = p.crc_errors
        p.feed(data)
        self.counters["overflow_bytes"] = p.overflow_bytes
        if p.crc_errors != crc0:
            self.counters["crc_errors"] = p.crc_errors
            self._crc_since_frame += p.crc_errors - crc0
            self._enter_safe()

    def _on_frame(self, ftype: int, seq: int, payload) -> None:
        if ftype != T_MEASUREMENTS or len(payload) != self._meas_len:
            self.counters["bad_frames"] += 1
            return
        self.device_status = decode_measurements(payload, self._spare)
        self.counters["frames_in"] += 1
        gap = 0 if self._rx_seq < 0 else (seq - self._rx_seq - 1) & 0xFF
        self._rx_seq = seq
        if gap:  # frames already counted as CRC errors are not counted again as lost
            self.counters["lost_frames"] += max(gap - self._crc_since_frame, 0)
            self._enter_safe()
        self._crc_since_frame = 0
        with self._lock:
            self._latest.copy_from(self._spare)
            self._fresh += 1
            if not gap:
                self._good_run += 1
                if self._good_run >= self.recover_frames:
                    self._safe_pending = False


class McuEmulator:
    """The device side of the protocol in Python: what the firmware must do, run in tests on a pseudo-terminal.

    It answers each ``T_TARGETS`` with one ``T_MEASUREMENTS``: the targets are
    applied to an inner :class:`~.sim.SimDevice` (``self.sim``; the TCU side
    reads its pins and drives its PWM there) -- the safe values when the
    frame's ``FLAG_SAFE`` is set -- and the measurement is what the TCU drives
    after the pin faults.  Test hooks: ``stalled`` (answer nothing),
    ``corrupt_answers`` (flip a CRC byte in that many answers), ``drop_answers``
    (skip that many answers, still advancing the sequence number).

    ``watchdog_s``: with no targets frame for that long the emulator goes to
    its safe state by itself, as the firmware must (None: off).
    """

    def __init__(self, fd: int, layout: DeviceLayout, supply_V: float = 13.5, watchdog_s: float | None = None):
        self.fd = fd
        self.layout = layout
        self.sim = SimDevice("emulated", layout, {"supply_V": supply_V})
        self.sim.open()
        self._rx = Targets(layout)
        self._tx = bytearray(max_frame(layout))
        self._parser = FrameParser(self._on_frame, max_payload=len(self._tx))
        self._seq = 0
        self._host_seq = -1
        self.status = 0
        self.stalled = False
        self.corrupt_answers = 0
        self.drop_answers = 0
        self.targets_applied = 0
        self.bad_payloads = 0
        self.watchdog_s = watchdog_s
        self.watchdog_trips = 0
        self._last_rx = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="mcu-emulator", daemon=True)

    def start(self) -> "McuEmulator":
        warm_up(self.layout)
        os.set_blocking(self.fd, False)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=1.0)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                ready, _, _ = select.select([self.fd], [], [], 0.02)
                if ready:
                    data = os.read(self.fd, 4096)
                    crc0 = self._parser.crc_errors
                    self._parser.feed(data)
                    if self._parser.crc_errors != crc0:
                        self.status |= ST_CRC_ERROR
                elif (self.watchdog_s is not None and not self.status & ST_SAFE
                      and time.monotonic() - self._last_rx > self.watchdog_s):
                    self._rx.set_safe(self.layout)
                    self.sim.write_targets(-1, self._rx)
                    self.status |= ST_SAFE
                    self.watchdog_trips += 1
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                break

    def _on_frame(self, ftype: int, seq: int, payload) -> None:
        if ftype != T_TARGETS:
            self.bad_payloads += 1
            return
        try:
            tick, flags = decode_targets(payload, self._rx)
        except PayloadError:
            self.bad_payloads += 1
            return
        if self._host_seq >= 0 and (seq - self._host_seq - 1) & 0xFF:
            self.status |= ST_SEQ_GAP
        self._host_seq = seq
        self._last_rx = time.monotonic()
        if flags & FLAG_SAFE:
            self._rx.set_safe(self.layout)
            self.status |= ST_SAFE
        else:
            self.status &= ~ST_SAFE
        self.sim.write_targets(tick, self._rx)
        self.targets_applied += 1
        m = self.sim.read_measurements()  # its tick: tick + 1, the tick these targets are for
        if self.stalled:
            return
        n = encode_measurements(self._tx, self._seq, self.status, m)
        self._seq = (self._seq + 1) & 0xFF
        if self.drop_answers > 0:
            self.drop_answers -= 1
            return
        if self.corrupt_answers > 0:
            self.corrupt_answers -= 1
            self._tx[n - 1] ^= 0xFF
        try:
            os.write(self.fd, memoryview(self._tx)[:n])
        except OSError:
            pass
