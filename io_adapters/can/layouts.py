"""From DBC signals to the flat tables of the compiled CAN frame codec (start-up only).

The message-set loader (:mod:`io_adapters.can.message_set`) describes each
message as a :class:`MessageLayout` of :class:`SignalLayout` (start bit,
length, byte order, scaling, accepted raw range, plant port).
:func:`compile_layout` turns one direction of the set into a
:class:`CompiledLayout`: flat integer and float tables with the columns
defined in :mod:`io_adapters.can.frames`, which
:class:`~io_adapters.can.frames.FrameCodec` packs into its buffers for the
compiled kernels.  :func:`retime` recomputes cycle times in ticks when the
loop's period changes.  Nothing here runs per frame or per tick.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..base import new_tick_info
from .frames import (CRC8_J1850_TABLE, MAX_PAYLOAD, M_CNT_MOD, M_CNT_SIG, M_COLS, M_CRC_BITS, M_CRC_BYTE,
                     M_CRC_INIT, M_CRC_XOR,
                     M_DATA_ID, M_LEN, M_MAX_DELTA, M_MUXED, M_NSIG, M_OFFSET, M_PAGES, M_PERIOD, M_REQUIRED,
                     M_SIG0, M_TIMEOUT, S_ALLOW0, S_COLS, S_LEN, S_MUXC, S_MUXK, S_NALLOW, S_NSEG, S_RAW_HI, S_RAW_LO, S_SEG0, S_SIGNED, S_SOURCE,
                     S_TARGET, SEG_COLS, SF_BIAS, SF_COLS, SF_GAIN, SF_OFFSET, SF_SCALE, SOURCE_PLANT, Q_COLS,
                     FrameCodec, crc8_j1850, rx_apply, tx_enqueue, tx_log, tx_pack)


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
    # multiplexing: the chain of (multiplexer signal index in the message, raw values selecting this signal) up to
    # the top multiplexer (empty: in every frame); a multiplexer signal's values the DBC defines (empty: none)
    mux_conditions: tuple[tuple[int, tuple[int, ...]], ...] = ()
    mux_values: tuple[int, ...] = ()


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
    crc_init: int = 0xFF
    crc_xor: int = 0xFF
    crc_bits: int = 8  # 16: CRC-16 (E2E profile 5) in two bytes, low byte first
    max_delta: int = 1
    period_ticks: int = 0
    offset_ticks: int = 0
    timeout_ticks: int = 0
    required: bool = True
    cycle_ms: float = 0.0  # the times in ms the tick counts above come from (see :func:`retime`)
    start_delay_ms: float | None = None  # None: staggered
    timeout_ms: float = 0.0
    # a multiplexed message: its pages, each the (multiplexer signal index, raw value) pairs that select it,
    # sent in turn one per cycle (transmit); empty for a message that is not multiplexed
    pages: list[tuple[tuple[int, int], ...]] = None

    @property
    def multiplexed(self) -> bool:
        return bool(self.pages) or any(s.mux_conditions or s.mux_values for s in self.signals)


@dataclass
class CompiledLayout:
    """The flat tables of one direction (receive or transmit) of a message set."""

    M: np.ndarray
    S: np.ndarray
    SF: np.ndarray
    SEG: np.ndarray
    ALLOW: np.ndarray
    messages: list[MessageLayout]
    MUX: np.ndarray = None  # multiplexing records (frames.py, "The MUX table")
    constants: list[float] = None  # transmit: constant signal values, DBC units (aux slots N_AUX, N_AUX + 1, ...)

    @property
    def n_msg(self) -> int:
        return self.M.shape[0]

    @property
    def n_sig(self) -> int:
        return self.S.shape[0]


def compile_layout(messages: list[MessageLayout]) -> CompiledLayout:
    """Build the tables that :class:`~io_adapters.can.frames.FrameCodec` packs for the compiled kernels."""
    n_sig = sum(len(m.signals) for m in messages)
    M = np.zeros((len(messages), M_COLS), dtype=np.int64)
    S = np.zeros((max(n_sig, 1), S_COLS), dtype=np.int64)
    SF = np.zeros((max(n_sig, 1), SF_COLS), dtype=np.float64)
    seg_rows: list[tuple[int, int, int, int]] = []
    allow: list[int] = []
    mux: list[int] = []
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
        M[k, M_CRC_INIT] = msg.crc_init
        M[k, M_CRC_XOR] = msg.crc_xor
        M[k, M_CRC_BITS] = msg.crc_bits
        M[k, M_PAGES] = _mux_pages(msg, s, mux)
        M[k, M_MUXED] = 1 if msg.multiplexed else 0
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
            S[s, S_MUXC] = S[s, S_MUXK] = -1
            if sig.mux_conditions:
                S[s, S_MUXC] = len(mux)
                mux.append(len(sig.mux_conditions))
                for i, values in sig.mux_conditions:
                    mux.extend([M[k, M_SIG0] + i, len(values), *values])
            if sig.mux_values:
                S[s, S_MUXK] = len(mux)
                mux.extend([len(sig.mux_values), *sig.mux_values])
            if j == msg.crc_signal:
                whole = [(pos[0] // 8 + b, 0, 8, 8 * b) for b in range(msg.crc_bits // 8)]
                if sig.length != msg.crc_bits or pos[0] % 8 != 0 or segs != whole:
                    raise ValueError(f"{msg.name}.{sig.name}: the checksum must fill {msg.crc_bits // 8} whole "
                                     "byte(s), low byte first")
                M[k, M_CRC_BYTE] = pos[0] // 8
            if j == msg.counter_signal:
                M[k, M_CNT_SIG] = s
            s += 1
    SEG = np.array(seg_rows if seg_rows else [(0, 0, 0, 0)], dtype=np.int64).reshape(-1, SEG_COLS)
    ALLOW = np.array(allow if allow else [0], dtype=np.int64)
    return CompiledLayout(M, S, SF, SEG, ALLOW, messages, np.array(mux if mux else [0], dtype=np.int64))


def _mux_pages(msg: MessageLayout, s0: int, mux: list[int]) -> int:
    """Append a message's page list to the MUX records; its offset, or -1 for a message without pages."""
    if not msg.pages:
        return -1
    head = len(mux)
    mux.extend([len(msg.pages)] + [0] * len(msg.pages))
    for p, page in enumerate(msg.pages):
        mux[head + 1 + p] = len(mux)
        mux.append(len(page))
        for i, raw in page:
            if not msg.signals[i].mux_values or raw not in msg.signals[i].mux_values:
                raise ValueError(f"{msg.name}: page value {raw} of {msg.signals[i].name} is not one it defines")
            mux.extend([s0 + i, raw])
    return head


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


def warm_up() -> None:
    """Compile (or load from numba's cache) every kernel of :mod:`~io_adapters.can.frames` on a one-message codec,
    and the adapter's compiled tick stages (:mod:`~io_adapters.can.tick_stage`).

    For ``python -m server.cli.warmup`` and container builds, so a server's first
    start does not compile.  The adapter also calls its kernels once in
    ``open``, outside the tick.
    """
    sig = SignalLayout("v", 16, 12, True, False, 0.01, 0.0, 0, 4000, target=0)
    crc = SignalLayout("crc", 0, 8, True, False, 1.0, 0.0, 0, 255)
    cnt = SignalLayout("cnt", 8, 4, True, False, 1.0, 0.0, 0, 15)
    rx = compile_layout([MessageLayout("rx", 0x100, False, False, 8, [crc, cnt, sig], crc_signal=0, counter_signal=1,
                                       timeout_ticks=30)])
    tx = compile_layout([MessageLayout("tx", 0x200, False, False, 8, [crc, cnt, sig], crc_signal=0, counter_signal=1,
                                       period_ticks=10)])
    codec = FrameCodec(rx, tx, 1, 0, 2)
    df = np.zeros(3)
    codec.receive(0, bytes(8))
    rx_apply(0, True, True, codec.ci, codec.cf, df)
    tx_pack(0, codec.ci, codec.cf, codec.cb, df, new_tick_info())
    # the realtime send queue's copy (the adapter's queue types: int64 rows, uint8 payloads), 0 frames due
    tx_enqueue(codec.ci, codec.cb, 0, np.zeros(1, dtype=np.int64), np.zeros((1, MAX_PAYLOAD), dtype=np.uint8),
               np.zeros(Q_COLS, dtype=np.int64))
    crc8_j1850(codec.rx_buf, 8, -1, -1, CRC8_J1850_TABLE)
    # the recording's bus-frame ring (bus_spool.py), 0 frames due
    tx_log(codec.ci, codec.cb, 0, 0, np.zeros((1, 2), dtype=np.int64), np.zeros((1, MAX_PAYLOAD), dtype=np.uint8),
           np.zeros(Q_COLS, dtype=np.int64))
    from . import tick_stage  # noqa: F401  (the adapter's compiled tick stages: compiled, or loaded, at import)


__all__ = ["SignalLayout", "MessageLayout", "CompiledLayout", "compile_layout", "signal_bit_positions",
           "segments", "raw_bounds", "raw_range", "retime", "warm_up"]
