"""Precompiled CAN frame layouts and AUTOSAR-style end-to-end protection.

cantools describes each DBC signal (start bit, length, byte order, sign,
scale, offset, range).  At start-up, :func:`compile_layout` turns the message
set into a few flat integer and float tables; the real-time tick and the
receive thread then only run the compiled functions of this module, which
pack and unpack bits with integer arithmetic, compute the checksum and check
the alive counter.  No dict, no name and no cantools object is touched per
frame (cantools' own ``encode``/``decode`` build dicts and look up signals by
name, which is what this module exists to avoid).

Bit layout
    Every signal is split once into *segments*: runs of its raw bits that lie
    in one byte of the frame.  A segment is ``(byte, shift, nbits, rawshift)``:
    ``nbits`` bits of the raw value, starting at raw bit ``rawshift``, sit in
    ``byte`` starting at bit ``shift`` (bit 0 = least significant).  Intel
    (little-endian) and Motorola (big-endian) signals differ only in their
    segments, so packing needs no byte-order branch.

End-to-end protection (AUTOSAR E2E profile 1/2 style)
    The checksum is CRC-8 SAE J1850 (polynomial 0x1D, initial value 0xFF,
    final XOR 0xFF; check value 0x4B for ``b"123456789"``), computed over the
    16-bit data ID (low byte, then high byte) followed by every payload byte
    except the checksum byte.  The alive counter counts modulo ``DBC maximum
    + 1`` (0..15 for a 4-bit counter).  A receiver accepts a counter that
    advanced by 1..``max_delta_counter``; an unchanged counter is *frozen*, a
    larger step is a *jump*.  After a jump the new counter becomes the
    reference, so a restarted sender costs one rejected frame, not a full
    counter wrap.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numba import njit

JIT = dict(cache=True, nogil=True)

MAX_PAYLOAD = 64  # bytes, CAN FD

# -- per-message table (int64), one row per message ---------------------------
M_LEN = 0  # payload length, bytes (the DLC the message must arrive with)
M_SIG0 = 1  # index of the message's first signal in the signal tables
M_NSIG = 2  # number of signals
M_CRC_BYTE = 3  # byte holding the CRC-8, -1 = no checksum
M_CNT_SIG = 4  # signal index of the alive counter, -1 = no counter
M_CNT_MOD = 5  # counter modulus (DBC maximum + 1)
M_DATA_ID = 6  # 16-bit E2E data ID mixed into the checksum
M_MAX_DELTA = 7  # largest accepted counter step (receive side)
M_PERIOD = 8  # cycle time, ticks (transmit) / 0 = not cyclic
M_OFFSET = 9  # first tick of the cycle (transmit)
M_TIMEOUT = 10  # ticks without a valid frame before the message is stale (receive)
M_REQUIRED = 11  # 1: the command watchdog needs this message fresh (receive)
M_COLS = 12

# -- per-signal tables ----------------------------------------------------------
S_SEG0 = 0  # first segment
S_NSEG = 1  # number of segments
S_LEN = 2  # length, bits
S_SIGNED = 3  # 1: two's complement
S_RAW_LO = 4  # smallest accepted (receive) / transmitted (transmit) raw value
S_RAW_HI = 5  # largest accepted / transmitted raw value
S_TARGET = 6  # receive: plant input index; transmit: source index; -1 = not mapped
S_SOURCE = 7  # transmit: 0 = plant output y, 1 = auxiliary value (loop/adapter status)
S_ALLOW0 = 8  # first allowed raw value in the allowed-values table
S_NALLOW = 9  # number of allowed raw values, 0 = any value in range
S_COLS = 10

SF_SCALE = 0  # DBC factor: physical = raw * scale + offset (DBC units)
SF_OFFSET = 1  # DBC offset
SF_GAIN = 2  # plant value = gain * DBC physical value + bias (unit conversion)
SF_BIAS = 3
SF_COLS = 4

SEG_BYTE = 0
SEG_SHIFT = 1
SEG_NBITS = 2
SEG_RAWSHIFT = 3
SEG_COLS = 4

SOURCE_PLANT = 0
SOURCE_AUX = 1

# -- receive verdicts (also the columns of the per-message counter table) -------
RX_OK = 0
RX_CRC = 1  # wrong checksum
RX_COUNTER_FROZEN = 2  # alive counter did not advance
RX_COUNTER_JUMP = 3  # alive counter advanced by more than max_delta_counter
RX_DLC = 4  # payload length differs from the DBC's
RX_RANGE = 5  # a value outside the DBC range, the plant's range or its allowed values
RX_LOST = 6  # frames missed inside the accepted counter step (counted, not rejected)
RX_COLS = 7
RX_REASONS = ("ok", "crc", "counter_frozen", "counter_jump", "dlc", "out_of_range", "lost")

# state of the counter check, per message
CNT_LAST = 0
CNT_VALID = 1
CNT_COLS = 2


def _crc8_table(poly: int) -> np.ndarray:
    table = np.zeros(256, dtype=np.uint8)
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = ((crc << 1) ^ poly) & 0xFF if crc & 0x80 else (crc << 1) & 0xFF
        table[byte] = crc
    return table


CRC8_J1850_TABLE = _crc8_table(0x1D)


@njit(**JIT)
def crc8_j1850(data, n, skip_byte, data_id, table):
    """CRC-8 SAE J1850 over the data ID (low, high byte) and ``data[:n]`` without ``skip_byte``.

    Init 0xFF, final XOR 0xFF.  ``data_id < 0`` leaves the data ID out (used
    by the check-value test).  Called in the real-time loop.
    """
    crc = 0xFF
    if data_id >= 0:
        crc = table[crc ^ (data_id & 0xFF)]
        crc = table[crc ^ ((data_id >> 8) & 0xFF)]
    for i in range(n):
        if i != skip_byte:
            crc = table[crc ^ data[i]]
    return crc ^ 0xFF


@njit(**JIT)
def unpack_raw(data, s, S, SEG):
    """Raw integer value of signal ``s`` in ``data``.  Called in the real-time loop."""
    raw = 0
    g0 = S[s, S_SEG0]
    for g in range(g0, g0 + S[s, S_NSEG]):
        nb = SEG[g, SEG_NBITS]
        raw |= ((data[SEG[g, SEG_BYTE]] >> SEG[g, SEG_SHIFT]) & ((1 << nb) - 1)) << SEG[g, SEG_RAWSHIFT]
    if S[s, S_SIGNED] == 1:
        n = S[s, S_LEN]
        if (raw >> (n - 1)) & 1:
            raw -= 1 << n
    return raw


@njit(**JIT)
def pack_raw(data, s, raw, S, SEG):
    """OR the raw value of signal ``s`` into ``data`` (bits must be clear).  Called in the real-time loop."""
    raw &= (1 << S[s, S_LEN]) - 1  # two's complement of negative values
    g0 = S[s, S_SEG0]
    for g in range(g0, g0 + S[s, S_NSEG]):
        nb = SEG[g, SEG_NBITS]
        part = (raw >> SEG[g, SEG_RAWSHIFT]) & ((1 << nb) - 1)
        b = SEG[g, SEG_BYTE]
        data[b] = data[b] | (part << SEG[g, SEG_SHIFT])


@njit(**JIT)
def rx_frame(m, data, n, M, S, SF, SEG, ALLOW, crc_table, cnt_state, counts, values, seq, detail):
    """Check one received frame of message ``m`` and, if valid, post its values to the mailbox.

    Parameters
    ----------
    m : message row; data : uint8 payload buffer; n : received length, bytes.
    cnt_state : int64 (n_msg, CNT_COLS), the counter check's memory.
    counts : int64 (n_msg, RX_COLS), verdict counters (incremented here).
    values : float64 (n_sig,), mailbox of plant-unit values; seq : int64 (n_msg,),
        bumped once per accepted frame so the tick sees new data.
    detail : int64 (3,), what went wrong: (expected, received, signal index).

    Returns
    -------
    int
        ``RX_OK`` or the reason of the rejection.  A rejected frame changes no
        mailbox value.  Runs in the receive thread, under the mailbox lock.
    """
    if n != M[m, M_LEN]:
        counts[m, RX_DLC] += 1
        detail[0] = M[m, M_LEN]
        detail[1] = n
        return RX_DLC
    cb = M[m, M_CRC_BYTE]
    if cb >= 0:
        crc = crc8_j1850(data, n, cb, M[m, M_DATA_ID], crc_table)
        if crc != data[cb]:
            counts[m, RX_CRC] += 1
            detail[0] = crc
            detail[1] = data[cb]
            return RX_CRC
    cs = M[m, M_CNT_SIG]
    if cs >= 0:
        c = unpack_raw(data, cs, S, SEG)
        if cnt_state[m, CNT_VALID] == 1:
            delta = (c - cnt_state[m, CNT_LAST]) % M[m, M_CNT_MOD]
            detail[0] = (cnt_state[m, CNT_LAST] + 1) % M[m, M_CNT_MOD]
            detail[1] = c
            if delta == 0:
                counts[m, RX_COUNTER_FROZEN] += 1
                return RX_COUNTER_FROZEN
            cnt_state[m, CNT_LAST] = c
            if delta > M[m, M_MAX_DELTA]:
                counts[m, RX_COUNTER_JUMP] += 1
                return RX_COUNTER_JUMP
            counts[m, RX_LOST] += delta - 1
        else:
            cnt_state[m, CNT_LAST] = c
            cnt_state[m, CNT_VALID] = 1
    s0 = M[m, M_SIG0]
    for s in range(s0, s0 + M[m, M_NSIG]):
        if S[s, S_TARGET] < 0:
            continue
        raw = unpack_raw(data, s, S, SEG)
        bad = raw < S[s, S_RAW_LO] or raw > S[s, S_RAW_HI]
        na = S[s, S_NALLOW]
        if not bad and na > 0:
            bad = True
            a0 = S[s, S_ALLOW0]
            for a in range(a0, a0 + na):
                if ALLOW[a] == raw:
                    bad = False
        if bad:
            counts[m, RX_RANGE] += 1
            detail[0] = s
            detail[1] = raw
            detail[2] = s
            return RX_RANGE
    for s in range(s0, s0 + M[m, M_NSIG]):
        if S[s, S_TARGET] >= 0:
            raw = unpack_raw(data, s, S, SEG)
            values[s] = SF[s, SF_GAIN] * (raw * SF[s, SF_SCALE] + SF[s, SF_OFFSET]) + SF[s, SF_BIAS]
    seq[m] += 1
    counts[m, RX_OK] += 1
    return RX_OK


@njit(**JIT)
def rx_apply(tick, take, apply, M, S, values, seq, seen, last_tick, stale, timeouts, u, u_rate):
    """Apply new mailbox values to the plant inputs and update message freshness.

    ``take`` is False when the mailbox lock was busy: nothing is taken this
    tick, freshness is still updated.  With ``apply`` False new values are
    taken (and count as fresh) but not written to the plant (a scenario
    drives the inputs).  A message is stale when no valid frame
    arrived for more than ``M_TIMEOUT`` ticks (or none ever did); each change
    from fresh to stale counts one timeout.

    Returns
    -------
    int
        ``2 * messages taken + 1`` if every required message is fresh,
        ``2 * messages taken`` otherwise.  Called in the real-time loop.
    """
    applied = 0
    fresh = 1
    n_req = 0
    for m in range(M.shape[0]):
        if take and seq[m] != seen[m]:
            seen[m] = seq[m]
            last_tick[m] = tick
            s0 = M[m, M_SIG0]
            if apply:
                for s in range(s0, s0 + M[m, M_NSIG]):
                    t = S[s, S_TARGET]
                    if t >= 0:
                        u[t] = values[s]
                        u_rate[t] = 0.0
            applied += 1
        if last_tick[m] < 0 or tick - last_tick[m] > M[m, M_TIMEOUT]:
            if stale[m] == 0:
                stale[m] = 1
                timeouts[m] += 1
        else:
            stale[m] = 0
        if M[m, M_REQUIRED] == 1:
            n_req += 1
            if stale[m] == 1:
                fresh = 0
    if n_req == 0:
        fresh = 0
    return 2 * applied + fresh


@njit(**JIT)
def tx_pack(tick, M, S, SF, SEG, y, aux, crc_table, counter, buf, due, saturated):
    """Pack every message due at ``tick`` into its row of ``buf``; list them in ``due``.

    Values come from the plant outputs ``y`` or the auxiliary values ``aux``
    (loop and adapter status), are converted to DBC units, rounded to the
    nearest raw value and clamped to the DBC range (``saturated[m]`` counts
    clamped or non-finite values).  The alive counter advances per frame and
    the CRC is computed last.

    Returns
    -------
    int
        Number of due messages (``due[:n]`` holds their rows).  Called in the real-time loop.
    """
    n_due = 0
    for m in range(M.shape[0]):
        period = M[m, M_PERIOD]
        if period <= 0 or tick < M[m, M_OFFSET] or (tick - M[m, M_OFFSET]) % period != 0:
            continue
        n = M[m, M_LEN]
        for i in range(n):
            buf[m, i] = 0
        s0 = M[m, M_SIG0]
        for s in range(s0, s0 + M[m, M_NSIG]):
            t = S[s, S_TARGET]
            if t < 0:
                continue
            v = y[t] if S[s, S_SOURCE] == SOURCE_PLANT else aux[t]
            x = ((v - SF[s, SF_BIAS]) / SF[s, SF_GAIN] - SF[s, SF_OFFSET]) / SF[s, SF_SCALE]
            lo = S[s, S_RAW_LO]
            hi = S[s, S_RAW_HI]
            if not math.isfinite(x):
                raw = 0 if lo <= 0 <= hi else lo
                saturated[m] += 1
            elif x < lo:
                raw = lo
                saturated[m] += 1
            elif x > hi:
                raw = hi
                saturated[m] += 1
            else:
                raw = int(math.floor(x + 0.5))
                if raw > hi:
                    raw = hi
            pack_raw(buf[m], s, raw, S, SEG)
        cs = M[m, M_CNT_SIG]
        if cs >= 0:
            pack_raw(buf[m], cs, counter[m], S, SEG)
            counter[m] = (counter[m] + 1) % M[m, M_CNT_MOD]
        cb = M[m, M_CRC_BYTE]
        if cb >= 0:
            buf[m, cb] = crc8_j1850(buf[m], n, cb, M[m, M_DATA_ID], crc_table)
        due[n_due] = m
        n_due += 1
    return n_due


# -- start-up: from DBC signals to tables ------------------------------------------

def signal_bit_positions(start: int, length: int, little_endian: bool) -> list[int]:
    """Frame bit (``8 * byte + bit``) of each raw bit, least significant first.

    ``start`` is the DBC start bit: the least significant bit of an Intel
    signal, the most significant bit of a Motorola signal (DBC "sawtooth"
    numbering, where a Motorola signal runs from bit 7 of a byte into bit 0
    of the same byte, then on to bit 7 of the next byte).
    """
    if little_endian:
        return [start + j for j in range(length)]
    msb_first = []
    p = start
    for _ in range(length):
        msb_first.append(p)
        p = p + 15 if p % 8 == 0 else p - 1
    return msb_first[::-1]


def segments(positions: list[int]) -> list[tuple[int, int, int, int]]:
    """Group raw bits into byte segments ``(byte, shift, nbits, rawshift)``."""
    segs: list[list[int]] = []
    for j, p in enumerate(positions):
        byte, bit = divmod(p, 8)
        if segs and segs[-1][0] == byte and segs[-1][1] + segs[-1][2] == bit and segs[-1][3] + segs[-1][2] == j:
            segs[-1][2] += 1
        else:
            segs.append([byte, bit, 1, j])
    return [tuple(s) for s in segs]


@dataclass
class SignalLayout:
    """One DBC signal as the compiled code sees it (built by the message-set loader)."""

    name: str
    start: int
    length: int
    little_endian: bool
    signed: bool
    scale: float
    offset: float
    raw_lo: int
    raw_hi: int
    target: int = -1  # plant input (receive) or source (transmit) index; -1 = not mapped
    source: int = SOURCE_PLANT
    gain: float = 1.0
    bias: float = 0.0
    allowed_raw: tuple[int, ...] = ()


@dataclass
class MessageLayout:
    """One message of the set: frame data and its signals in table order."""

    name: str
    frame_id: int
    extended: bool
    fd: bool
    length: int
    signals: list[SignalLayout]
    crc_signal: int = -1  # index into ``signals``
    counter_signal: int = -1
    counter_modulus: int = 16
    data_id: int = 0
    max_delta: int = 1
    period_ticks: int = 0
    offset_ticks: int = 0
    timeout_ticks: int = 0
    required: bool = True
    cycle_ms: float = 0.0  # the times in ms the tick counts above come from (see :func:`retime`)
    start_delay_ms: float | None = None  # None: staggered
    timeout_ms: float = 0.0


@dataclass
class CompiledLayout:
    """The flat tables of one direction (receive or transmit) of a message set."""

    M: np.ndarray
    S: np.ndarray
    SF: np.ndarray
    SEG: np.ndarray
    ALLOW: np.ndarray
    messages: list[MessageLayout]

    @property
    def n_msg(self) -> int:
        return self.M.shape[0]

    @property
    def n_sig(self) -> int:
        return self.S.shape[0]


def compile_layout(messages: list[MessageLayout]) -> CompiledLayout:
    """Build the tables of :func:`rx_frame`, :func:`rx_apply` and :func:`tx_pack`."""
    n_sig = sum(len(m.signals) for m in messages)
    M = np.zeros((len(messages), M_COLS), dtype=np.int64)
    S = np.zeros((max(n_sig, 1), S_COLS), dtype=np.int64)
    SF = np.zeros((max(n_sig, 1), SF_COLS), dtype=np.float64)
    seg_rows: list[tuple[int, int, int, int]] = []
    allow: list[int] = []
    s = 0
    for k, msg in enumerate(messages):
        if not 0 < msg.length <= MAX_PAYLOAD:
            raise ValueError(f"{msg.name}: payload length {msg.length} outside 1..{MAX_PAYLOAD}")
        M[k, M_LEN] = msg.length
        M[k, M_SIG0] = s
        M[k, M_NSIG] = len(msg.signals)
        M[k, M_CRC_BYTE] = -1
        M[k, M_CNT_SIG] = -1
        M[k, M_CNT_MOD] = max(msg.counter_modulus, 1)
        M[k, M_DATA_ID] = msg.data_id
        M[k, M_MAX_DELTA] = msg.max_delta
        M[k, M_PERIOD] = msg.period_ticks
        M[k, M_OFFSET] = msg.offset_ticks
        M[k, M_TIMEOUT] = msg.timeout_ticks
        M[k, M_REQUIRED] = 1 if msg.required else 0
        for j, sig in enumerate(msg.signals):
            if not 1 <= sig.length <= 63:
                raise ValueError(f"{msg.name}.{sig.name}: length {sig.length} bits is not supported (1..63)")
            pos = signal_bit_positions(sig.start, sig.length, sig.little_endian)
            if min(pos) < 0 or max(pos) >= 8 * msg.length:
                raise ValueError(f"{msg.name}.{sig.name}: bits outside the {msg.length}-byte payload")
            segs = segments(pos)
            S[s, S_SEG0] = len(seg_rows)
            S[s, S_NSEG] = len(segs)
            seg_rows.extend(segs)
            S[s, S_LEN] = sig.length
            S[s, S_SIGNED] = 1 if sig.signed else 0
            S[s, S_RAW_LO] = sig.raw_lo
            S[s, S_RAW_HI] = sig.raw_hi
            S[s, S_TARGET] = sig.target
            S[s, S_SOURCE] = sig.source
            S[s, S_ALLOW0] = len(allow)
            S[s, S_NALLOW] = len(sig.allowed_raw)
            allow.extend(sig.allowed_raw)
            SF[s, SF_SCALE] = sig.scale
            SF[s, SF_OFFSET] = sig.offset
            SF[s, SF_GAIN] = sig.gain
            SF[s, SF_BIAS] = sig.bias
            if j == msg.crc_signal:
                if sig.length != 8 or pos[0] % 8 != 0 or segs != [(pos[0] // 8, 0, 8, 0)]:
                    raise ValueError(f"{msg.name}.{sig.name}: the checksum must fill one whole byte")
                M[k, M_CRC_BYTE] = pos[0] // 8
            if j == msg.counter_signal:
                M[k, M_CNT_SIG] = s
            s += 1
    SEG = np.array(seg_rows if seg_rows else [(0, 0, 0, 0)], dtype=np.int64).reshape(-1, SEG_COLS)
    ALLOW = np.array(allow if allow else [0], dtype=np.int64)
    return CompiledLayout(M, S, SF, SEG, ALLOW, messages)


def retime(layout: CompiledLayout, period_s: float) -> list[str]:
    """Recompute the tick counts of every message for a new loop period, in place.

    Cycle times that are no whole number of ticks are rounded (to at least
    one tick); the returned notes name them.  Not for the tick itself: the
    loop changes its period only between runs.
    """
    notes = []
    for k, m in enumerate(layout.messages):
        if m.cycle_ms > 0 and layout.M[k, M_PERIOD] > 0:
            exact = m.cycle_ms * 1e-3 / period_s
            n = max(1, round(exact))
            if abs(exact - n) > 1e-6 * exact:
                notes.append(f"{m.name}: cycle {m.cycle_ms:g} ms sent every {n} ticks of {period_s * 1e3:g} ms")
            layout.M[k, M_PERIOD] = n
            if m.start_delay_ms is not None:
                layout.M[k, M_OFFSET] = round(m.start_delay_ms * 1e-3 / period_s)
            else:
                layout.M[k, M_OFFSET] = k % n
        if m.timeout_ms > 0:
            layout.M[k, M_TIMEOUT] = max(1, math.ceil(m.timeout_ms * 1e-3 / period_s - 1e-9))
    return notes


def raw_bounds(length: int, signed: bool) -> tuple[int, int]:
    """Smallest and largest raw value a signal of ``length`` bits can carry."""
    if signed:
        return -(1 << (length - 1)), (1 << (length - 1)) - 1
    return 0, (1 << length) - 1


def raw_range(length: int, signed: bool, scale: float, offset: float, lo: float | None, hi: float | None
              ) -> tuple[int, int]:
    """Raw bounds of the physical range [lo, hi] (None = unbounded), within the bit range.

    Rounded inwards with a tolerance of 1e-9 raw steps, so a range limit that
    is a whole number of steps (e.g. 40 bar at 0.01 bar/bit) stays accepted.
    """
    rlo, rhi = raw_bounds(length, signed)
    a = b = None
    if lo is not None:
        a = (lo - offset) / scale
    if hi is not None:
        b = (hi - offset) / scale
    if scale < 0:
        a, b = b, a
    if a is not None:
        rlo = max(rlo, math.ceil(a - 1e-9))
    if b is not None:
        rhi = min(rhi, math.floor(b + 1e-9))
    return rlo, rhi
