"""The wire protocol of the microcontroller I/O front-end (backend ``mcu``), byte by byte.

Every frame::

    offset  size  field
    0       1     start byte 0xA5
    1       2     payload length N, little-endian, 0 .. MAX_PAYLOAD
    3       1     type
    4       1     sequence number (per sender, +1 a frame, wraps at 256)
    5       N     payload
    5+N     2     CRC-16/CCITT-FALSE (poly 0x1021, init 0xFFFF, no reflection, no xor-out)
                  over bytes 1 .. 4+N, big-endian

Host -> device, ``T_TARGETS`` (one a tick; what to do during the next tick)::

    u32 tick   u8 flags (bit 0: safe state -- the device must put out the safe values)
    per pulse channel:   u8 mode; mode 0: u8 count, count x u32 edge time from the tick's start, ns
                                   mode 1: u32 frequency, mHz; u32 phase at the next tooth boundary, 2^-32 turn
    per resistance out:  u32 resistance, milliohm (0xFFFFFFFF: open, +inf)
    digital outs:        ceil(n / 8) bytes, bit i of byte i // 8 = channel i
    per analog out:      i32 voltage, uV
    per fault switch:    u8 pin state (0 ok, 1 open, 2 short to ground, 3 short to battery)

Device -> host, ``T_MEASUREMENTS`` (one per ``T_TARGETS`` received)::

    u32 tick (of the last targets applied)   u8 status (bit 0 device in its safe state,
                                                         bit 1 a host sequence gap seen, bit 2 a CRC error seen)
    per PWM in:          u16 duty, 1/65535; i32 current, uA
    per pulse channel:   u16 edges put out in the last tick
    digital ins:         ceil(n / 8) bytes
    per analog in:       i32 voltage, uV

All integers little-endian.  A frame of unknown type, wrong payload length
for the layout or bad CRC is dropped and counted; the reader resynchronises
on the next start byte.
"""

from __future__ import annotations

import math
import struct

import numpy as np
from numba import njit

from .channels import PULSE_EDGES, PULSE_FREQUENCY, DeviceLayout, Measurements, Targets

START = 0xA5
HEADER = 5  # start, length (2), type, seq
TRAILER = 2  # CRC
MAX_PAYLOAD = 2048
T_TARGETS = 0x01
T_MEASUREMENTS = 0x81
FLAG_SAFE = 0x01
ST_SAFE = 0x01
ST_SEQ_GAP = 0x02
ST_CRC_ERROR = 0x04
OPEN_MILLIOHM = 0xFFFFFFFF


def _crc_table() -> np.ndarray:
    table = np.zeros(256, dtype=np.int64)
    for byte in range(256):
        crc = byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else (crc << 1)
        table[byte] = crc & 0xFFFF
    return table


_TABLE = _crc_table()
_TABLE_LIST = [int(v) for v in _TABLE]


@njit(cache=True)
def _crc_kernel(buf, start, end, table):
    crc = 0xFFFF
    for i in range(start, end):
        crc = ((crc << 8) & 0xFFFF) ^ table[((crc >> 8) ^ buf[i]) & 0xFF]
    return crc


def crc16_ccitt(data, start: int = 0, end: int | None = None) -> int:
    """CRC-16/CCITT-FALSE of ``data[start:end]`` (check value of ``b"123456789"``: 0x29B1)."""
    end = len(data) if end is None else end
    if isinstance(data, np.ndarray):
        return int(_crc_kernel(data, start, end, _TABLE))
    crc = 0xFFFF
    table = _TABLE_LIST
    for i in range(start, end):
        crc = ((crc << 8) & 0xFFFF) ^ table[((crc >> 8) ^ data[i]) & 0xFF]
    return crc


def frame(buf: bytearray, ftype: int, seq: int, payload_len: int) -> int:
    """Write the header and CRC around a payload already at ``buf[HEADER:HEADER+payload_len]``; the frame's length."""
    struct.pack_into("<BHBB", buf, 0, START, payload_len, ftype, seq & 0xFF)
    crc = crc16_ccitt(buf, 1, HEADER + payload_len)
    struct.pack_into(">H", buf, HEADER + payload_len, crc)
    return HEADER + payload_len + TRAILER


def max_frame(layout: DeviceLayout) -> int:
    """The longest frame either side may send for ``layout``, bytes."""
    targets = 5 + sum(2 + 4 * ch.max_edges for ch in layout.of_kind("pulse_out")) + 4 * layout.count(
        "resistance_out") + (layout.count("digital_out") + 7) // 8 + 4 * layout.count("analog_out") + layout.count(
        "fault_switch")
    return HEADER + max(targets, measurements_length(layout)) + TRAILER


def measurements_length(layout: DeviceLayout) -> int:
    """The payload length of ``T_MEASUREMENTS`` for ``layout``, bytes."""
    return 5 + 6 * layout.count("pwm_in") + 2 * layout.count("pulse_out") + (layout.count("digital_in") + 7) // 8 \
        + 4 * layout.count("analog_in")


def _micro(volts: float) -> int:
    if not math.isfinite(volts):
        return 0
    return max(-2**31, min(2**31 - 1, int(np.rint(volts * 1e6))))


@njit(cache=True)
def _put(buf, off, value, nbytes):
    """``value`` as ``nbytes`` little-endian bytes at ``buf[off]`` (two's complement); the next offset."""
    v = np.int64(value)
    for b in range(nbytes):
        buf[off + b] = (v >> (8 * b)) & 0xFF
    return off + nbytes


@njit(cache=True)
def _micro_kernel(volts):
    if not np.isfinite(volts):
        return 0
    return min(max(np.rint(volts * 1e6), -2147483648.0), 2147483647.0)


@njit(cache=True)
def _encode_targets_kernel(buf, seq, tick, flags, pulse_mode, edge_ns, edge_count, frequency_Hz, phase_turn,
                           resistance_ohm, digital, analog_V, pin_fault, table):
    off = _put(buf, HEADER, tick & 0xFFFFFFFF, 4)
    buf[off] = flags
    off += 1
    for i in range(pulse_mode.shape[0]):
        if pulse_mode[i] == PULSE_FREQUENCY:
            f = frequency_Hz[i]
            mhz = 0 if not (f > 0.0) else min(np.rint(f * 1000.0), 4294967295.0)
            ph = phase_turn[i] % 1.0 if np.isfinite(phase_turn[i]) else 0.0
            buf[off] = PULSE_FREQUENCY
            off = _put(buf, off + 1, np.int64(mhz), 4)
            off = _put(buf, off, np.int64(ph * 4294967296.0) & 0xFFFFFFFF, 4)
        else:
            n = min(max(edge_count[i], 0), edge_ns.shape[1])
            buf[off] = PULSE_EDGES
            buf[off + 1] = n
            off += 2
            for k in range(n):
                off = _put(buf, off, min(max(edge_ns[i, k], 0), 0xFFFFFFFF), 4)
    for r in range(resistance_ohm.shape[0]):
        ohm = resistance_ohm[r]
        if not np.isfinite(ohm):
            mo = OPEN_MILLIOHM
        else:
            mo = np.int64(min(max(np.rint(ohm * 1000.0), 0.0), OPEN_MILLIOHM - 1.0))
        off = _put(buf, off, mo, 4)
    nbytes = (digital.shape[0] + 7) // 8
    for b in range(nbytes):
        buf[off + b] = 0
    for i in range(digital.shape[0]):
        if digital[i]:
            buf[off + i // 8] |= 1 << (i % 8)
    off += nbytes
    for a in range(analog_V.shape[0]):
        off = _put(buf, off, np.int64(_micro_kernel(analog_V[a])), 4)
    for p in range(pin_fault.shape[0]):
        buf[off] = pin_fault[p]
        off += 1
    length = off - HEADER
    buf[0] = START
    buf[1] = length & 0xFF
    buf[2] = length >> 8
    buf[3] = T_TARGETS
    buf[4] = seq & 0xFF
    crc = _crc_kernel(buf, 1, off, table)
    buf[off] = crc >> 8
    buf[off + 1] = crc & 0xFF
    return off + TRAILER


def encode_targets(buf, seq: int, tick: int, flags: int, t: Targets) -> int:
    """A ``T_TARGETS`` frame into ``buf`` (a uint8 array, or a bytearray); its length.  Compiled; called in
    the real-time loop with a preallocated uint8 array.  Edge times are clipped to 0 .. 2^32-1 ns,
    non-finite voltages sent as 0, a non-finite resistance as open."""
    arr = buf if isinstance(buf, np.ndarray) else np.frombuffer(buf, dtype=np.uint8)
    return int(_encode_targets_kernel(arr, seq, tick, flags, t.pulse_mode, t.edge_ns, t.edge_count, t.frequency_Hz,
                                      t.phase_turn, t.resistance_ohm, t.digital, t.analog_V, t.pin_fault, _TABLE))


def _pack_bits(buf: bytearray, off: int, bits: np.ndarray) -> int:
    nbytes = (bits.shape[0] + 7) // 8
    for b in range(nbytes):
        buf[off + b] = 0
    for i in range(bits.shape[0]):
        if bits[i]:
            buf[off + i // 8] |= 1 << (i % 8)
    return off + nbytes


def _unpack_bits(payload, off: int, out: np.ndarray) -> int:
    for i in range(out.shape[0]):
        out[i] = (payload[off + i // 8] >> (i % 8)) & 1
    return off + (out.shape[0] + 7) // 8


class PayloadError(ValueError):
    """A payload whose length or contents do not fit the layout."""


def decode_targets(payload, t: Targets) -> tuple[int, int]:
    """Decode a ``T_TARGETS`` payload into ``t``; ``(tick, flags)``.  Raises :class:`PayloadError`, leaving
    ``t`` unchanged, when the payload does not fit the layout."""
    n = len(payload)
    try:
        tick, flags = struct.unpack_from("<IB", payload, 0)
        off = 5
        plan = []
        for i in range(t.pulse_mode.shape[0]):
            mode = payload[off]
            if mode == PULSE_EDGES:
                count = payload[off + 1]
                if count > t.edge_ns.shape[1]:
                    raise PayloadError(f"pulse channel {i}: {count} edges, at most {t.edge_ns.shape[1]}")
                plan.append((mode, off + 2, count))
                off += 2 + 4 * count
            elif mode == PULSE_FREQUENCY:
                plan.append((mode, off + 1, 0))
                off += 9
            else:
                raise PayloadError(f"pulse channel {i}: unknown mode {mode}")
        fixed = 4 * t.resistance_ohm.shape[0] + (t.digital.shape[0] + 7) // 8 + 4 * t.analog_V.shape[0] \
            + t.pin_fault.shape[0]
        if off + fixed != n:
            raise PayloadError(f"targets payload of {n} bytes, the layout needs {off + fixed}")
        for p in range(t.pin_fault.shape[0]):
            if payload[off + fixed - t.pin_fault.shape[0] + p] > 3:
                raise PayloadError(f"fault switch {p}: unknown pin state")
    except (IndexError, struct.error) as exc:
        raise PayloadError(f"targets payload of {n} bytes is too short") from exc
    for i, (mode, at, count) in enumerate(plan):  # checked: now apply
        t.pulse_mode[i] = mode
        if mode == PULSE_EDGES:
            t.edge_count[i] = count
            for k in range(count):
                t.edge_ns[i, k] = struct.unpack_from("<I", payload, at + 4 * k)[0]
        else:
            mhz, phase = struct.unpack_from("<II", payload, at)
            t.edge_count[i] = 0
            t.frequency_Hz[i] = mhz / 1000.0
            t.phase_turn[i] = phase / 4294967296.0
    for r in range(t.resistance_ohm.shape[0]):
        mo = struct.unpack_from("<I", payload, off)[0]
        t.resistance_ohm[r] = math.inf if mo == OPEN_MILLIOHM else mo / 1000.0
        off += 4
    off = _unpack_bits(payload, off, t.digital)
    for a in range(t.analog_V.shape[0]):
        t.analog_V[a] = struct.unpack_from("<i", payload, off)[0] / 1e6
        off += 4
    for p in range(t.pin_fault.shape[0]):
        t.pin_fault[p] = payload[off + p]
    return tick, flags


def encode_measurements(buf: bytearray, seq: int, status: int, m: Measurements) -> int:
    """A ``T_MEASUREMENTS`` frame into ``buf``; its length."""
    off = HEADER
    struct.pack_into("<IB", buf, off, max(m.tick, 0) & 0xFFFFFFFF, status)
    off += 5
    for i in range(m.duty.shape[0]):
        duty = int(round(min(max(m.duty[i], 0.0), 1.0) * 65535.0))
        struct.pack_into("<Hi", buf, off, duty, _micro(m.current_A[i]))
        off += 6
    for e in m.edges_out:
        struct.pack_into("<H", buf, off, min(int(e), 0xFFFF))
        off += 2
    off = _pack_bits(buf, off, m.digital)
    for v in m.analog_V:
        struct.pack_into("<i", buf, off, _micro(v))
        off += 4
    return frame(buf, T_MEASUREMENTS, seq, off - HEADER)


def decode_measurements(payload, m: Measurements) -> int:
    """Decode a ``T_MEASUREMENTS`` payload (length already checked) into ``m``; the status byte."""
    tick, status = struct.unpack_from("<IB", payload, 0)
    m.tick = tick
    off = 5
    for i in range(m.duty.shape[0]):
        duty, micro_A = struct.unpack_from("<Hi", payload, off)
        m.duty[i] = duty / 65535.0
        m.current_A[i] = micro_A / 1e6
        off += 6
    for i in range(m.edges_out.shape[0]):
        m.edges_out[i] = struct.unpack_from("<H", payload, off)[0]
        off += 2
    off = _unpack_bits(payload, off, m.digital)
    for i in range(m.analog_V.shape[0]):
        m.analog_V[i] = struct.unpack_from("<i", payload, off)[0] / 1e6
        off += 4
    return status


def warm_up(layout: DeviceLayout) -> None:
    """Compile (or load from numba's cache) the frame codec's kernels once, before a device's threads start:
    a first frame must not wait seconds for the compiler in the tick's path or a reader thread."""
    scratch = Targets(layout)
    buf = bytearray(max_frame(layout))
    n = encode_targets(buf, 0, 0, 0, scratch)
    decode_targets(memoryview(buf)[HEADER:n - 2], scratch)
    crc16_ccitt(buf, 0, n)


class FrameParser:
    """Splits a byte stream into checked frames, in a bounded buffer, resynchronising on bad frames.

    :meth:`feed` calls ``on_frame(type, seq, payload)`` for every frame whose
    length and CRC check; ``payload`` is a memoryview valid only during the
    call.  Counted: ``crc_errors``, ``bad_length`` (a length above
    ``max_payload``), ``skipped_bytes`` (bytes dropped while resynchronising),
    ``overflow_bytes`` (bytes dropped because the buffer was full).
    """

    def __init__(self, on_frame, max_payload: int = MAX_PAYLOAD):
        self.on_frame = on_frame
        self.max_payload = max_payload
        self.capacity = 4 * (HEADER + max_payload + TRAILER)
        self.buf = bytearray(self.capacity)
        self.used = 0
        self.crc_errors = 0
        self.bad_length = 0
        self.skipped_bytes = 0
        self.overflow_bytes = 0
        self.frames = 0

    def feed(self, data) -> None:
        """Take ``data`` (bytes) and hand every complete, checked frame to ``on_frame``."""
        room = self.capacity - self.used
        if len(data) > room:
            self.overflow_bytes += len(data) - room
            data = data[:room]
        self.buf[self.used:self.used + len(data)] = data
        self.used += len(data)
        self._scan()

    def _scan(self) -> None:
        buf, pos = self.buf, 0
        while True:
            start = buf.find(START, pos, self.used)
            if start < 0:
                self.skipped_bytes += self.used - pos
                pos = self.used
                break
            self.skipped_bytes += start - pos
            pos = start
            if self.used - pos < HEADER:
                break
            length = buf[pos + 1] | (buf[pos + 2] << 8)
            if length > self.max_payload:
                self.bad_length += 1
                pos += 1
                continue
            end = pos + HEADER + length + TRAILER
            if end > self.used:
                break
            crc = (buf[end - 2] << 8) | buf[end - 1]
            if crc16_ccitt(buf, pos + 1, end - 2) != crc:
                self.crc_errors += 1
                pos += 1  # resync: the next start byte may begin the real frame
                continue
            self.frames += 1
            with memoryview(buf) as mv:
                self.on_frame(buf[pos + 3], buf[pos + 4], mv[pos + HEADER:end - 2])
            pos = end
        if pos:
            buf[:self.used - pos] = buf[pos:self.used]
            self.used -= pos
