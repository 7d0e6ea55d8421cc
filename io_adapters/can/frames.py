"""The compiled CAN frame codec: flat buffers, bit packing and AUTOSAR-style end-to-end protection.

cantools describes each DBC signal (start bit, length, byte order, sign,
scale, offset, range).  At start-up the message-set loader turns them into
flat tables (:mod:`io_adapters.can.layouts`) and :class:`FrameCodec` packs
both directions into three flat buffers; the real-time tick and the receive
thread then only run the compiled functions of this module, which pack and
unpack bits with integer arithmetic, compute the checksum and check the
alive counter.  No dict, no name and no cantools object is touched per frame
(cantools' own ``encode``/``decode`` build dicts and look up signals by name,
which is what this module exists to avoid).

Per frame and per tick:

* :func:`rx_frame` (receive thread) checks one received frame and posts its
  values to the mailbox;
* :func:`rx_apply` (tick, ``read``) moves new mailbox values to the plant
  inputs and tracks the freshness of every command message;
* :func:`tx_pack` (tick, ``write``) packs the messages due this tick;
* :func:`tx_enqueue` (tick, ``write``, realtime) copies them into the send
  queue that the adapter empties between ticks.

The table columns (``M_*``, ``S_*``, ...) and buffer slots (``CI_*``, ...)
are defined here, beside the kernels that read them, because numba's cache
keys a kernel on its own source file only: a constant changed in another
file would leave stale machine code behind.  That is also why the codec
stays one file of over 600 lines: the kernels, the CRCs and the table
layout they index must change together.

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
    counter wrap.  The reference is the counter of the last frame that
    passed the end-to-end checks (length, CRC, counter), as in AUTOSAR E2E:
    a frame rejected for a value out of range still moves it, because its
    sender advances the counter with every frame it sends; a frame with a
    wrong length or CRC does not (its counter cannot be trusted).  So a
    corrected value goes out with the next counter: a resend with the same
    counter is ``counter_frozen``.

Multiplexed messages
    A signal of a multiplexed DBC message carries its chain of multiplexer
    conditions (``S_MUXC``: every multiplexer up to the top one, with the
    values that select it), a multiplexer signal its known values
    (``S_MUXK``), a transmit message its pages (``M_PAGES``), all in the
    direction's MUX table.  Receiving checks the multiplexer values after the
    E2E checks (``RX_MUX``) and posts the signals of the frame's page only;
    transmitting packs one page per cycle, in turn.  A message without
    multiplexing pays one comparison per signal.

Long frames (AUTOSAR E2E profile 5 style, ``crc_variant = "autosar_p05"``)
    CRC-16/CCITT-FALSE (polynomial 0x1021, initial value 0xFFFF, no final
    XOR; check value 0x29B1) over the payload without its two CRC bytes,
    then the data ID's low and high byte, stored low byte first; the
    counter rules above are the same (an 8-bit counter counts 0..255).  A
    CRC-8 detects every error of up to 3 bits only in short frames; over a
    64-byte payload profile 5's CRC-16 is the AUTOSAR choice.

Why this file is longer than 600 lines and ``rx_frame`` and ``tx_pack``
longer than 80: they are the compiled frame codec, one receive path and one
transmit path over the preallocated layout tables, with the E2E checks
(CRC-8 and profile 5's CRC-16, alive counters) inline so a frame is decoded
or packed in one compiled call without allocations; split into helpers, each
helper would take the same dozen table arrays as arguments, and the order of
the checks (which decides which rejection is counted) would be spread over
several functions.
"""

from __future__ import annotations

import math
import numpy as np
from numba import njit

# The loop's per-tick slots.  Compiled in as constants: they are a fixed contract of io_adapters.base.
from ..base import TI_OVERRUNS, TI_WATCHDOG

JIT = dict(cache=True, nogil=True)
# The functions the tick calls keep the GIL.  A nogil call releases the GIL on entry and must win it
# back on exit; with the receive thread (and, in-process, share or TCU threads) waiting for it, the
# tick then waits up to a switch interval for a few microseconds of work (bench/bench_can.py measured
# it).  Holding the GIL for their ~1-3 us also keeps the mailbox copy atomic w.r.t. those threads.
JIT_TICK = dict(cache=True, nogil=False)

MAX_PAYLOAD = 64  # bytes, CAN FD

# -- per-message table (int64), one row per message ---------------------------
M_LEN = 0  # payload length, bytes (the DLC the message must arrive with)
M_SIG0 = 1  # index of the message's first signal in the signal tables
M_NSIG = 2  # number of signals
M_CRC_BYTE = 3  # byte holding the CRC-8 (CRC-16: its low byte, the high byte follows), -1 = no checksum
M_CNT_SIG = 4  # signal index of the alive counter, -1 = no counter
M_CNT_MOD = 5  # counter modulus (DBC maximum + 1)
M_DATA_ID = 6  # 16-bit E2E data ID mixed into the checksum
M_MAX_DELTA = 7  # largest accepted counter step (receive side)
M_PERIOD = 8  # cycle time, ticks (transmit) / 0 = not cyclic
M_OFFSET = 9  # first tick of the cycle (transmit)
M_TIMEOUT = 10  # ticks without a valid frame before the message is stale (receive)
M_REQUIRED = 11  # 1: the command watchdog needs this message fresh (receive)
M_CRC_INIT = 12  # CRC initial value (0xFF: CRC-8 SAE J1850; 0x00: AUTOSAR E2E profile 1)
M_CRC_XOR = 13  # CRC final XOR (0xFF; 0x00)
M_CRC_BITS = 14  # 8: CRC-8 (poly 0x1D); 16: CRC-16/CCITT-FALSE (AUTOSAR E2E profile 5)
M_PAGES = 15  # transmit, multiplexed: offset of the page list in the direction's MUX table; -1 = not multiplexed
M_MUXED = 16  # 1: multiplexed (receive: freshness per mapped signal, each page must keep arriving)
M_COLS = 17

CRC_VARIANTS = {"sae_j1850": (0xFF, 0xFF), "autosar_p01": (0x00, 0x00), "autosar_p05": (0xFFFF, 0x0000)}
"""Initial value and final XOR of the CRC-8 (polynomial 0x1D) per variant name.

``sae_j1850`` is CRC-8 SAE J1850 as AUTOSAR's ``Crc_CalculateCRC8`` computes
it in one call; ``autosar_p01`` is what E2E profile 1 computes when it
chains those calls (start value 0x00, no final XOR; CRC-8/GSM-A parameters).
"""
CRC_BITS = {"sae_j1850": 8, "autosar_p01": 8, "autosar_p05": 16}
"""Width of the checksum per variant.  ``autosar_p05`` is AUTOSAR E2E profile 5 for long (CAN FD)
frames: CRC-16/CCITT-FALSE (polynomial 0x1021, initial value 0xFFFF, no reflection, no final XOR;
check value 0x29B1) over the payload without the two CRC bytes, then the data ID's low and high
byte; the CRC is stored low byte first, the 8-bit counter follows it."""


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
S_MUXC = 10  # offset of the signal's presence conditions in the MUX table; -1 = in every frame (not multiplexed)
S_MUXK = 11  # a multiplexer signal: offset of its known values in the MUX table; -1 = not a multiplexer
S_COLS = 12

# The MUX table of a direction (int64, offsets relative to its start), records of variable length:
#   presence conditions of a signal: [n, then n times: multiplexer signal row, k, k accepted values]
#     (the whole chain up to the top multiplexer, so extended multiplexing needs no recursion);
#   known values of a multiplexer signal: [k, k values];
#   pages of a transmit message: [n_pages, offset of page 0, ...]; a page: [n, then n times: multiplexer row, raw].

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
RX_MUX = 7  # a multiplexer value the DBC does not define for that message
RX_COLS = 8
RX_REASONS = ("ok", "crc", "counter_frozen", "counter_jump", "dlc", "out_of_range", "lost", "unknown_mux")

# state of the counter check, per message
CNT_LAST = 0
CNT_VALID = 1
CNT_COLS = 2

# -- the flat buffers of a FrameCodec (MuJoCo style, as the friction core's layout) ------------
# ci (int64): a header of sizes and offset slots, then the tables and the counters.
# cf (float64): signal scalings, the receive mailbox, the auxiliary transmit values.
# cb (uint8): the CRC table, the receive frame, one 64-byte row per transmit message.
CI_NRX = 0  # receive messages
CI_NTX = 1  # transmit messages
CI_N_IN = 2  # plant inputs
CI_P_U = 3  # offset of the plant inputs in the plant's df (their rates follow at + n_in)
CI_P_Y = 4  # offset of the plant outputs in df
CI_RX_M = 10  # offset slots (ci[slot] = offset of the field)
CI_RX_S = 11
CI_RX_SEG = 12
CI_RX_ALLOW = 13
CI_TX_M = 14
CI_TX_S = 15
CI_TX_SEG = 16
CI_CNT = 17  # [n_rx * CNT_COLS] counter-check memory
CI_COUNTS = 18  # [n_rx * RX_COLS] verdict counters
CI_SEQ = 19  # [n_rx] mailbox sequence numbers (receive thread)
CI_SEEN = 20  # [n_rx] last sequence number the tick took
CI_LAST = 21  # [n_rx] tick of the last valid frame, -1 = none yet
CI_STALE = 22  # [n_rx] 1 = stale
CI_TIMEOUTS = 23  # [n_rx] fresh -> stale transitions
CI_TXCNT = 24  # [n_tx] next alive counter
CI_DUE = 25  # [n_tx] rows due this tick
CI_SAT = 26  # [n_tx] clamped or non-finite values
CI_DETAIL = 27  # [3] why the last frame was rejected
CI_ADAPTER = 28  # [A_COLS] adapter counters
CI_F_RX_SF = 29  # offsets into cf
CI_F_VALUES = 30
CI_F_TX_SF = 31
CI_F_AUX = 32
CI_TX_FLT = 33  # [n_tx * TF_COLS] injected transmit faults (server/realtime/faults.py, docs/faults.md)
CI_RX_MUX = 34  # the receive direction's MUX table
CI_TX_MUX = 35  # the transmit direction's MUX table
CI_SPOST = 36  # [n_rx_sig] mailbox sequence number of the frame that last carried the signal (multiplexed pages)
CI_SLAST = 37  # [n_rx_sig] tick that last took the signal, -1 = none yet (freshness of multiplexed messages)
CI_TXPAGE = 38  # [n_tx] page a multiplexed transmit message sends next
CI_HEADER = 40

# -- injected faults of a transmit message (TF_*), set between ticks by the adapter -----------
TF_DROP = 0  # 1: the frame is packed (its counter advances) but not sent
TF_DELAY = 1  # n > 0: each frame goes out n cycles late (a delay line of DELAY_MAX frames per message)
TF_FREEZE = 2  # 1: the alive counter does not advance
TF_BAD_CRC = 3  # 1: the checksum is sent inverted
TF_OOR_SIG = 4  # signal index forced to TF_OOR_RAW (-1: none)
TF_OOR_RAW = 5
TF_WRITTEN = 6  # frames put into the delay line since the delay was set
TF_DROPPED = 7  # frames not sent because of TF_DROP
TF_COLS = 8
DELAY_MAX = 16

A_UNKNOWN = 0  # frames with an ID outside the message set
A_TX_ERRORS = 1  # frames the bus refused
A_FRESH = 2  # 1 while every required command message is fresh (and applied)
A_BUSY = 3  # ticks that found the mailbox lock taken
A_IGNORED = 4  # valid command messages taken but not applied (a scenario drives the inputs)
A_PREV_TICK = 5  # the tick number of the last read
A_COLS = 8

CB_CRC = 0  # [256] CRC-8 SAE J1850 table
CB_RX = 256  # [64] the frame being checked
CB_TX = 320  # [n_tx * 64] transmit payloads

# auxiliary transmit values (io_adapters/can/message_set.py AUX_SOURCES names them in this order)
AUX_TICK = 0
AUX_OVERRUNS = 1
AUX_WATCHDOG = 2
AUX_FRESH = 3
AUX_CRC = 4
AUX_COUNTER = 5
AUX_DLC = 6
AUX_UNKNOWN = 7
AUX_RANGE = 8
AUX_TIMEOUTS = 9
AUX_RX_OK = 10
AUX_TX_ERRORS = 11
AUX_UNKNOWN_MUX = 12
N_AUX = 13


def _crc8_table(poly: int) -> np.ndarray:
    table = np.zeros(256, dtype=np.uint8)
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = ((crc << 1) ^ poly) & 0xFF if crc & 0x80 else (crc << 1) & 0xFF
        table[byte] = crc
    return table


CRC8_J1850_TABLE = _crc8_table(0x1D)


def _crc16_table(poly: int) -> np.ndarray:
    table = np.zeros(256, dtype=np.int64)
    for byte in range(256):
        crc = byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ poly) & 0xFFFF if crc & 0x8000 else (crc << 1) & 0xFFFF
        table[byte] = crc
    return table


CRC16_CCITT_TABLE = _crc16_table(0x1021)  # a global array: compiled into the kernels as a constant


@njit(**JIT)
def crc16_ccitt(data, n, skip_byte, data_id, init=0xFFFF, xorout=0x0000):
    """CRC-16/CCITT-FALSE of ``data[:n]`` without bytes ``skip_byte`` and ``skip_byte + 1``, then the data ID.

    The order of AUTOSAR E2E profile 5: payload first, then the data ID's
    low and high byte; ``data_id < 0`` leaves it out (check-value tests).
    """
    return _crc16(data, 0, n, skip_byte, data_id, init, xorout)


@njit(**JIT)
def _crc16(buf, d0, n, skip_byte, data_id, init, xorout):
    """CRC-16/CCITT-FALSE of ``buf[d0:d0 + n]`` (CRC bytes skipped), then the data ID.  Called in the loop."""
    crc = init
    for i in range(n):
        if i != skip_byte and i != skip_byte + 1:
            crc = ((crc << 8) & 0xFFFF) ^ CRC16_CCITT_TABLE[((crc >> 8) ^ buf[d0 + i]) & 0xFF]
    if data_id >= 0:
        crc = ((crc << 8) & 0xFFFF) ^ CRC16_CCITT_TABLE[((crc >> 8) ^ (data_id & 0xFF)) & 0xFF]
        crc = ((crc << 8) & 0xFFFF) ^ CRC16_CCITT_TABLE[((crc >> 8) ^ ((data_id >> 8) & 0xFF)) & 0xFF]
    return crc ^ xorout


@njit(**JIT)
def _frame_crc(cb, d0, n, ci, oM):
    """The checksum message row ``oM`` needs over ``cb[d0:d0 + n]`` (CRC-8 or CRC-16, by M_CRC_BITS)."""
    if ci[oM + M_CRC_BITS] == 16:
        return _crc16(cb, d0, n, ci[oM + M_CRC_BYTE], ci[oM + M_DATA_ID], ci[oM + M_CRC_INIT], ci[oM + M_CRC_XOR])
    return _crc8(cb, d0, n, ci[oM + M_CRC_BYTE], ci[oM + M_DATA_ID], cb, np.int64(CB_CRC), ci[oM + M_CRC_INIT],
                 ci[oM + M_CRC_XOR])


@njit(**JIT)
def _frame_crc_read(cb, d0, ci, oM):
    """The checksum the frame carries (CRC-16: low byte first)."""
    b = d0 + ci[oM + M_CRC_BYTE]
    if ci[oM + M_CRC_BITS] == 16:
        return np.int64(cb[b]) | (np.int64(cb[b + 1]) << 8)
    return np.int64(cb[b])


@njit(**JIT)
def crc8_j1850(data, n, skip_byte, data_id, table, init=0xFF, xorout=0xFF):
    """CRC-8 (polynomial 0x1D) over the data ID (low, high byte) and ``data[:n]`` without ``skip_byte``.

    Init 0xFF, final XOR 0xFF: CRC-8 SAE J1850 (see :data:`CRC_VARIANTS`).
    ``data_id < 0`` leaves the data ID out (used by the check-value tests).
    """
    # int64 arguments, not literal constants: numba compiles a function again for every literal it is called with
    return _crc8(data, np.int64(0), n, skip_byte, data_id, table, np.int64(0), np.int64(init), np.int64(xorout))


@njit(**JIT)
def _crc8(buf, d0, n, skip_byte, data_id, table, t0, init, xorout):
    """CRC-8 (poly 0x1D, table at ``table[t0:t0 + 256]``) of ``buf[d0:d0 + n]``.  Called in the real-time loop."""
    crc = init
    if data_id >= 0:
        crc = table[t0 + (crc ^ (data_id & 0xFF))]
        crc = table[t0 + (crc ^ ((data_id >> 8) & 0xFF))]
    for i in range(n):
        if i != skip_byte:
            crc = table[t0 + (crc ^ buf[d0 + i])]
    return crc ^ xorout


@njit(**JIT)
def _unpack(buf, d0, ci, oS, oSEG, s):
    """Raw integer value of signal row ``s`` in the payload at ``buf[d0:]``.  Called in the real-time loop."""
    raw = 0
    r = oS + s * S_COLS
    g0 = ci[r + S_SEG0]
    for g in range(g0, g0 + ci[r + S_NSEG]):
        q = oSEG + g * SEG_COLS
        nb = ci[q + SEG_NBITS]
        raw |= ((buf[d0 + ci[q + SEG_BYTE]] >> ci[q + SEG_SHIFT]) & ((1 << nb) - 1)) << ci[q + SEG_RAWSHIFT]
    if ci[r + S_SIGNED] == 1:
        n = ci[r + S_LEN]
        if (raw >> (n - 1)) & 1:
            raw -= 1 << n
    return raw


@njit(**JIT)
def _pack(buf, d0, ci, oS, oSEG, s, raw):
    """OR the raw value of signal row ``s`` into the payload at ``buf[d0:]`` (bits must be clear).

    Called in the real-time loop.
    """
    r = oS + s * S_COLS
    raw &= (1 << ci[r + S_LEN]) - 1  # two's complement of negative values
    g0 = ci[r + S_SEG0]
    for g in range(g0, g0 + ci[r + S_NSEG]):
        q = oSEG + g * SEG_COLS
        nb = ci[q + SEG_NBITS]
        part = (raw >> ci[q + SEG_RAWSHIFT]) & ((1 << nb) - 1)
        b = d0 + ci[q + SEG_BYTE]
        buf[b] = buf[b] | (part << ci[q + SEG_SHIFT])


@njit(**JIT)
def _present(buf, d0, ci, oS, oSEG, oX, s):
    """Whether signal row ``s`` is in the frame at ``buf[d0:]``: every multiplexer of its chain holds one of
    the values that select it.  Always True for a signal that is not multiplexed.  Called in the real-time loop.
    """
    c = ci[oS + s * S_COLS + S_MUXC]
    if c < 0:
        return True
    p = oX + c
    for _ in range(ci[p]):
        raw = _unpack(buf, d0, ci, oS, oSEG, ci[p + 1])
        nv = ci[p + 2]
        hit = False
        for j in range(nv):
            if ci[p + 3 + j] == raw:
                hit = True
        if not hit:
            return False
        p += 2 + nv
    return True


@njit(**JIT)
def _known_mux(buf, d0, ci, oS, oSEG, oX, s0, s1, od):
    """0 if every multiplexer signal present in the frame holds a value the DBC defines, else 1 (``detail``:
    the signal row and its value).  Called in the real-time loop.
    """
    for s in range(s0, s1):
        k = ci[oS + s * S_COLS + S_MUXK]
        if k < 0 or not _present(buf, d0, ci, oS, oSEG, oX, s):
            continue
        raw = _unpack(buf, d0, ci, oS, oSEG, s)
        p = oX + k
        ok = False
        for j in range(ci[p]):
            if ci[p + 1 + j] == raw:
                ok = True
        if not ok:
            ci[od] = s
            ci[od + 1] = raw
            ci[od + 2] = s
            return 1
    return 0


@njit(**JIT_TICK)  # keeps the GIL too: the mailbox lock is then held for ~1 us, not for a GIL hand-over
def rx_frame(m, n, ci, cf, cb):
    """Check the frame of receive message ``m`` in the receive buffer (``n`` bytes); post it if valid.

    Checks, in this order: length, CRC-8, alive counter, the multiplexer
    values (each must be one the DBC defines), the range (and allowed values)
    of every mapped signal the frame carries (a multiplexed frame carries the
    signals of its page).  A valid frame's values, in plant units, go to the
    mailbox and its sequence number advances, so the tick sees new data; a
    rejected frame changes no mailbox value.  The counter of
    the verdict advances; ``detail`` says what was wrong (expected,
    received, signal row).

    Returns
    -------
    int
        ``RX_OK`` or the reason of the rejection.  Runs in the receive thread,
        under the mailbox lock.
    """
    oM = ci[CI_RX_M] + m * M_COLS
    oS = ci[CI_RX_S]
    oSEG = ci[CI_RX_SEG]
    oC = ci[CI_COUNTS] + m * RX_COLS
    oK = ci[CI_CNT] + m * CNT_COLS
    od = ci[CI_DETAIL]
    d0 = np.int64(CB_RX)  # not the literal constant: the helpers below then compile once for rx and tx (int64)
    if n != ci[oM + M_LEN]:
        ci[oC + RX_DLC] += 1
        ci[od] = ci[oM + M_LEN]
        ci[od + 1] = n
        return RX_DLC
    if ci[oM + M_CRC_BYTE] >= 0:
        crc = _frame_crc(cb, d0, n, ci, oM)
        got = _frame_crc_read(cb, d0, ci, oM)
        if crc != got:
            ci[oC + RX_CRC] += 1
            ci[od] = crc
            ci[od + 1] = got
            return RX_CRC
    cs = ci[oM + M_CNT_SIG]
    if cs >= 0:
        c = _unpack(cb, d0, ci, oS, oSEG, cs)
        mod = ci[oM + M_CNT_MOD]
        if c >= mod:  # e.g. 15 where the counter runs 0..14 (E2E profile 1): invalid, never a valid step
            ci[oC + RX_COUNTER_JUMP] += 1
            ci[od] = (ci[oK + CNT_LAST] + 1) % mod
            ci[od + 1] = c
            return RX_COUNTER_JUMP
        if ci[oK + CNT_VALID] == 1:
            delta = (c - ci[oK + CNT_LAST]) % mod
            ci[od] = (ci[oK + CNT_LAST] + 1) % mod
            ci[od + 1] = c
            if delta == 0:
                ci[oC + RX_COUNTER_FROZEN] += 1
                return RX_COUNTER_FROZEN
            ci[oK + CNT_LAST] = c
            if delta > ci[oM + M_MAX_DELTA]:
                ci[oC + RX_COUNTER_JUMP] += 1
                return RX_COUNTER_JUMP
            ci[oC + RX_LOST] += delta - 1
        else:
            ci[oK + CNT_LAST] = c
            ci[oK + CNT_VALID] = 1
    s0 = ci[oM + M_SIG0]
    s1 = s0 + ci[oM + M_NSIG]
    oA = ci[CI_RX_ALLOW]
    oX = ci[CI_RX_MUX]
    if ci[oM + M_MUXED] == 1 and _known_mux(cb, d0, ci, oS, oSEG, oX, s0, s1, od) != 0:
        ci[oC + RX_MUX] += 1
        return RX_MUX
    for s in range(s0, s1):
        r = oS + s * S_COLS
        if ci[r + S_TARGET] < 0 or not _present(cb, d0, ci, oS, oSEG, oX, s):
            continue
        raw = _unpack(cb, d0, ci, oS, oSEG, s)
        bad = raw < ci[r + S_RAW_LO] or raw > ci[r + S_RAW_HI]
        na = ci[r + S_NALLOW]
        if not bad and na > 0:
            bad = True
            a0 = oA + ci[r + S_ALLOW0]
            for a in range(a0, a0 + na):
                if ci[a] == raw:
                    bad = False
        if bad:
            ci[oC + RX_RANGE] += 1
            ci[od] = s
            ci[od + 1] = raw
            ci[od + 2] = s
            return RX_RANGE
    oSF = ci[CI_F_RX_SF]
    oV = ci[CI_F_VALUES]
    seq = ci[ci[CI_SEQ] + m] + 1
    ospost = ci[CI_SPOST]
    for s in range(s0, s1):
        if ci[oS + s * S_COLS + S_TARGET] >= 0 and _present(cb, d0, ci, oS, oSEG, oX, s):
            raw = _unpack(cb, d0, ci, oS, oSEG, s)
            f = oSF + s * SF_COLS
            cf[oV + s] = cf[f + SF_GAIN] * (raw * cf[f + SF_SCALE] + cf[f + SF_OFFSET]) + cf[f + SF_BIAS]
            ci[ospost + s] = seq
    ci[ci[CI_SEQ] + m] = seq
    ci[oC + RX_OK] += 1
    return RX_OK


@njit(**JIT)
def _restart_ages(ci):
    """The plant was reset: every command message and signal is stale, as if never received.  Called in the loop."""
    for m in range(ci[CI_NRX]):
        ci[ci[CI_LAST] + m] = -1
        ci[ci[CI_STALE] + m] = 1
        oM = ci[CI_RX_M] + m * M_COLS
        for s in range(ci[oM + M_SIG0], ci[oM + M_SIG0] + ci[oM + M_NSIG]):
            ci[ci[CI_SLAST] + s] = -1


@njit(**JIT)
def _oldest_page(ci, oS, oslast, s0, s1, last):
    """The tick of the oldest mapped signal of a multiplexed message (-1: one never came).  Called in the loop."""
    for s in range(s0, s1):
        if ci[oS + s * S_COLS + S_TARGET] >= 0:
            ls = ci[oslast + s]
            if ls < 0:
                return -1
            if ls < last:
                last = ls
    return last


@njit(**JIT_TICK)
def rx_apply(tick, take, drive, ci, cf, df):
    """Apply new mailbox values to the plant inputs and update message freshness.

    ``take`` is False when the mailbox lock was busy: nothing is taken this
    tick, freshness is still updated.  While ``drive`` is False (a scenario
    drives the inputs) new values are taken (and count as fresh and as
    ignored) but not written to the plant.  A message is stale when no
    valid frame arrived for more than its timeout in ticks (or none ever
    did); each change from fresh to stale counts one timeout.  Only the
    signals the new frames carried are written (a multiplexed message's
    other pages keep their values), and a multiplexed message is fresh only
    while every mapped signal, so every page that carries one, is.  A tick number
    lower than the last one means the plant was reset: message ages restart
    without counting timeouts.  ``df`` is the plant's data buffer: inputs at
    ``ci[CI_P_U]``, their rates ``n_in`` further.

    Returns
    -------
    int
        1 if every required message is fresh and ``drive`` (feed the
        watchdog), else 0.  Called in the real-time loop.
    """
    applied = 0
    fresh = 1
    n_req = 0
    oS = ci[CI_RX_S]
    oV = ci[CI_F_VALUES]
    oseq = ci[CI_SEQ]
    oseen = ci[CI_SEEN]
    olast = ci[CI_LAST]
    ostale = ci[CI_STALE]
    otmo = ci[CI_TIMEOUTS]
    oad = ci[CI_ADAPTER]
    ou = ci[CI_P_U]
    our = ou + ci[CI_N_IN]
    apply = drive
    nrx = ci[CI_NRX]
    ospost = ci[CI_SPOST]
    oslast = ci[CI_SLAST]
    if tick < ci[oad + A_PREV_TICK]:
        _restart_ages(ci)
    ci[oad + A_PREV_TICK] = tick
    for m in range(nrx):
        oM = ci[CI_RX_M] + m * M_COLS
        s0 = ci[oM + M_SIG0]
        s1 = s0 + ci[oM + M_NSIG]
        if take and ci[oseq + m] != ci[oseen + m]:
            prev = ci[oseen + m]
            ci[oseen + m] = ci[oseq + m]
            ci[olast + m] = tick
            for s in range(s0, s1):
                t = ci[oS + s * S_COLS + S_TARGET]
                if t >= 0 and ci[ospost + s] > prev:  # carried by a frame since the last take
                    ci[oslast + s] = tick
                    if apply:
                        df[ou + t] = cf[oV + s]
                        df[our + t] = 0.0
            applied += 1
        last = ci[olast + m]
        if ci[oM + M_MUXED] == 1:
            last = _oldest_page(ci, oS, oslast, s0, s1, last)
        if last < 0 or tick - last > ci[oM + M_TIMEOUT]:
            if ci[ostale + m] == 0:
                ci[ostale + m] = 1
                ci[otmo + m] += 1
        else:
            ci[ostale + m] = 0
        if ci[oM + M_REQUIRED] == 1:
            n_req += 1
            if ci[ostale + m] == 1:
                fresh = 0
    if n_req == 0:
        fresh = 0
    if not take:
        ci[oad + A_BUSY] += 1
    if not apply:
        ci[oad + A_IGNORED] += applied
        fresh = 0  # commands do not drive the plant now: nothing to feed the watchdog for
    ci[oad + A_FRESH] = fresh
    return fresh


@njit(**JIT)
def _refresh_aux(ci, cf, tick, tick_info):
    """Loop and adapter status as values for transmit signals (see message_set.AUX_SOURCES).

    Called in the real-time loop.
    """
    oa = ci[CI_F_AUX]
    oad = ci[CI_ADAPTER]
    crc = cnt = dlc = rng = ok = mux = 0
    oC = ci[CI_COUNTS]
    for m in range(ci[CI_NRX]):
        r = oC + m * RX_COLS
        mux += ci[r + RX_MUX]
        crc += ci[r + RX_CRC]
        cnt += ci[r + RX_COUNTER_FROZEN] + ci[r + RX_COUNTER_JUMP]
        dlc += ci[r + RX_DLC]
        rng += ci[r + RX_RANGE]
        ok += ci[r + RX_OK]
    tmo = 0
    for m in range(ci[CI_NRX]):
        tmo += ci[ci[CI_TIMEOUTS] + m]
    cf[oa + AUX_TICK] = tick
    cf[oa + AUX_OVERRUNS] = tick_info[TI_OVERRUNS]
    cf[oa + AUX_WATCHDOG] = tick_info[TI_WATCHDOG]
    cf[oa + AUX_FRESH] = ci[oad + A_FRESH]
    cf[oa + AUX_CRC] = crc
    cf[oa + AUX_COUNTER] = cnt
    cf[oa + AUX_DLC] = dlc
    cf[oa + AUX_UNKNOWN] = ci[oad + A_UNKNOWN]
    cf[oa + AUX_RANGE] = rng
    cf[oa + AUX_TIMEOUTS] = tmo
    cf[oa + AUX_RX_OK] = ok
    cf[oa + AUX_TX_ERRORS] = ci[oad + A_TX_ERRORS]
    cf[oa + AUX_UNKNOWN_MUX] = mux


@njit(**JIT_TICK)
def tx_pack(tick, ci, cf, cb, df, tick_info):
    """Pack every transmit message due at ``tick`` into its row of the transmit buffer.

    Values come from the plant outputs (``df`` at ``ci[CI_P_Y]``) or the
    auxiliary values (loop and adapter status, refreshed here from the loop's
    ``tick_info``, overruns included, and the receive counters), are
    converted to DBC units, rounded to the nearest raw value and clamped to the DBC range (clamped or non-finite
    values are counted per message), except the auxiliary counters (tick,
    overruns, the receive and transmit error counts) in a signal whose range
    starts at 0: they wrap modulo the range + 1 (an 8-bit signal carries the
    count modulo 256), so a receiver sees every new error as a change.  The
    alive counter advances per frame;
    the CRC is computed last.  A multiplexed message sends its pages in
    turn, one per cycle: the page's multiplexer values, then the signals it
    carries.

    Returns
    -------
    int
        Number of due messages; their rows are listed at ``ci[CI_DUE]``.
        Called in the real-time loop.
    """
    _refresh_aux(ci, cf, tick, tick_info)
    n_due = 0
    oS = ci[CI_TX_S]
    oSEG = ci[CI_TX_SEG]
    oSF = ci[CI_F_TX_SF]
    oy = ci[CI_P_Y]
    oa = ci[CI_F_AUX]
    odue = ci[CI_DUE]
    osat = ci[CI_SAT]
    ocnt = ci[CI_TXCNT]
    oX = ci[CI_TX_MUX]
    otxpage = ci[CI_TXPAGE]
    for m in range(ci[CI_NTX]):
        oM = ci[CI_TX_M] + m * M_COLS
        period = ci[oM + M_PERIOD]
        off = ci[oM + M_OFFSET]
        if period <= 0 or tick < off or (tick - off) % period != 0:
            continue
        n = ci[oM + M_LEN]
        d0 = CB_TX + m * MAX_PAYLOAD
        for i in range(n):
            cb[d0 + i] = 0
        s0 = ci[oM + M_SIG0]
        of = ci[CI_TX_FLT] + m * TF_COLS
        pg = ci[oM + M_PAGES]
        if pg >= 0:  # the multiplexer values of this cycle's page first: the presence of the others follows
            pl = oX + pg
            page = ci[otxpage + m]
            p = oX + ci[pl + 1 + page]
            for a in range(ci[p]):
                _pack(cb, d0, ci, oS, oSEG, ci[p + 1 + 2 * a], ci[p + 2 + 2 * a])
            ci[otxpage + m] = (page + 1) % ci[pl]
        for s in range(s0, s0 + ci[oM + M_NSIG]):
            r = oS + s * S_COLS
            if pg >= 0 and (ci[r + S_MUXK] >= 0 or not _present(cb, d0, ci, oS, oSEG, oX, s)):
                continue  # a multiplexer (set above) or a signal of another page
            if s == ci[of + TF_OOR_SIG]:
                _pack(cb, d0, ci, oS, oSEG, s, ci[of + TF_OOR_RAW])
                continue
            t = ci[r + S_TARGET]
            if t < 0:
                continue
            v = df[oy + t] if ci[r + S_SOURCE] == SOURCE_PLANT else cf[oa + t]
            f = oSF + s * SF_COLS
            x = ((v - cf[f + SF_BIAS]) / cf[f + SF_GAIN] - cf[f + SF_OFFSET]) / cf[f + SF_SCALE]
            lo = ci[r + S_RAW_LO]
            hi = ci[r + S_RAW_HI]
            if not math.isfinite(x):
                raw = 0 if lo <= 0 <= hi else lo
                ci[osat + m] += 1
            elif x < lo:
                raw = lo
                ci[osat + m] += 1
            elif x > hi:
                if ci[r + S_SOURCE] == SOURCE_AUX and t != AUX_WATCHDOG and t != AUX_FRESH and lo == 0:
                    raw = int(math.floor(x + 0.5)) % (hi + 1)  # counters wrap (docs/can.md), never stick at the top
                else:
                    raw = hi
                    ci[osat + m] += 1
            else:
                raw = int(math.floor(x + 0.5))
                if raw > hi:
                    raw = hi
            _pack(cb, d0, ci, oS, oSEG, s, raw)
        cs = ci[oM + M_CNT_SIG]
        if cs >= 0:
            _pack(cb, d0, ci, oS, oSEG, cs, ci[ocnt + m])
            if ci[of + TF_FREEZE] == 0:
                ci[ocnt + m] = (ci[ocnt + m] + 1) % ci[oM + M_CNT_MOD]
        cbb = ci[oM + M_CRC_BYTE]
        if cbb >= 0:
            crc = _frame_crc(cb, d0, n, ci, oM)
            if ci[of + TF_BAD_CRC] != 0:
                crc = crc ^ 0xFFFF
            cb[d0 + cbb] = crc & 0xFF
            if ci[oM + M_CRC_BITS] == 16:
                cb[d0 + cbb + 1] = (crc >> 8) & 0xFF
        dl = ci[of + TF_DELAY]
        if dl > 0:  # into the delay line; out comes the frame packed dl cycles ago, if there is one yet
            line = CB_TX + ci[CI_NTX] * MAX_PAYLOAD + m * (DELAY_MAX + 1) * MAX_PAYLOAD
            w = ci[of + TF_WRITTEN]
            q = line + (w % (dl + 1)) * MAX_PAYLOAD
            for i in range(n):
                cb[q + i] = cb[d0 + i]
            ci[of + TF_WRITTEN] = w + 1
            if w < dl:
                continue
            q = line + ((w - dl) % (dl + 1)) * MAX_PAYLOAD
            for i in range(n):
                cb[d0 + i] = cb[q + i]
        if ci[of + TF_DROP] != 0:
            ci[of + TF_DROPPED] += 1
            continue
        ci[odue + n_due] = m
        n_due += 1
    return n_due


# -- frames packed by the tick, sent between ticks (realtime) ---------------------------------
Q_HEAD = 0  # frames queued since the adapter opened
Q_TAIL = 1  # frames taken out to be sent
Q_DROPPED = 2  # frames not queued because the queue was full (the sender was starved)
Q_COLS = 3


@njit(**JIT_TICK)
def tx_enqueue(ci, cb, n_due, q_msg, q_data, q_state):
    """Copy the payloads of the ``n_due`` messages :func:`tx_pack` just packed into the send queue.

    ``q_msg[slot]`` is the transmit row, ``q_data[slot]`` the payload (MAX_PAYLOAD bytes); ``q_state`` holds
    the counters ``Q_*``.  A full queue drops the frame and counts it.  Called in the real-time loop.
    """
    cap = q_msg.shape[0]
    odue = ci[CI_DUE]
    for i in range(n_due):
        head = q_state[Q_HEAD]
        if head - q_state[Q_TAIL] >= cap:
            q_state[Q_DROPPED] += 1
            continue
        m = ci[odue + i]
        slot = head % cap
        q_msg[slot] = m
        d0 = CB_TX + m * MAX_PAYLOAD
        for j in range(MAX_PAYLOAD):
            q_data[slot, j] = cb[d0 + j]
        q_state[Q_HEAD] = head + 1


@njit(**JIT_TICK)
def tx_log(ci, cb, n_due, tick, l_meta, l_data, l_state):
    """Copy the ``n_due`` frames :func:`tx_pack` just packed, with ``tick``, into a recording's bus-log ring.

    ``l_meta[slot]`` is ``(tick, transmit row)``, ``l_data[slot]`` the payload; ``l_state`` holds the
    counters ``Q_*`` (io_adapters/can/bus_spool.py empties it).  A full ring drops the frame and counts
    it.  Called in the real-time loop.
    """
    cap = l_meta.shape[0]
    odue = ci[CI_DUE]
    for i in range(n_due):
        head = l_state[Q_HEAD]
        if head - l_state[Q_TAIL] >= cap:
            l_state[Q_DROPPED] += 1
            continue
        m = ci[odue + i]
        slot = head % cap
        l_meta[slot, 0] = tick
        l_meta[slot, 1] = m
        d0 = CB_TX + m * MAX_PAYLOAD
        for j in range(ci[ci[CI_TX_M] + m * M_COLS + M_LEN]):
            l_data[slot, j] = cb[d0 + j]
        l_state[Q_HEAD] = head + 1


# -- the buffers the kernels work on ----------------------------------------------------------

class FrameCodec:
    """Both directions of a message set in three flat buffers, with named views for Python code.

    The compiled functions take ``(ci, cf, cb)`` (plus the plant's ``df``):
    a handful of arrays instead of a dozen tables, because every array
    argument costs time at each call from the tick.  After construction the
    ``M``, ``S``, ``SF``, ``SEG`` and ``ALLOW`` of ``rx`` and ``tx`` are
    views into the buffers, so :func:`~io_adapters.can.layouts.retime` and
    status reports read and write the same memory as the compiled code.

    Parameters
    ----------
    rx, tx : io_adapters.can.layouts.CompiledLayout
        The compiled receive and transmit tables.
    n_in
        Number of plant inputs.
    u_offset, y_offset
        Offsets of the plant inputs and outputs in the plant's ``df``.
    """

    def __init__(self, rx, tx, n_in: int, u_offset: int, y_offset: int):
        self.rx, self.tx = rx, tx
        nr, nt = rx.n_msg, tx.n_msg
        sizes = [
            (CI_RX_M, rx.M.size), (CI_RX_S, rx.S.size), (CI_RX_SEG, rx.SEG.size), (CI_RX_ALLOW, rx.ALLOW.size),
            (CI_TX_M, tx.M.size), (CI_TX_S, tx.S.size), (CI_TX_SEG, tx.SEG.size),
            (CI_CNT, nr * CNT_COLS), (CI_COUNTS, nr * RX_COLS), (CI_SEQ, nr), (CI_SEEN, nr), (CI_LAST, nr),
            (CI_STALE, nr), (CI_TIMEOUTS, nr), (CI_TXCNT, nt), (CI_DUE, nt), (CI_SAT, nt), (CI_DETAIL, 3),
            (CI_ADAPTER, A_COLS), (CI_TX_FLT, nt * TF_COLS), (CI_RX_MUX, rx.MUX.size), (CI_TX_MUX, tx.MUX.size),
            (CI_SPOST, rx.n_sig), (CI_SLAST, rx.n_sig), (CI_TXPAGE, nt),
        ]
        off = CI_HEADER
        slots = {}
        for slot, size in sizes:
            slots[slot] = off
            off += max(size, 1)
        ci = np.zeros(off, dtype=np.int64)
        for slot, o in slots.items():
            ci[slot] = o
        ci[CI_NRX], ci[CI_NTX], ci[CI_N_IN], ci[CI_P_U], ci[CI_P_Y] = nr, nt, n_in, u_offset, y_offset
        consts = list(getattr(tx, "constants", None) or [])  # constant transmit values follow the status values
        fsizes = [(CI_F_RX_SF, rx.SF.size), (CI_F_VALUES, rx.n_sig), (CI_F_TX_SF, tx.SF.size),
                  (CI_F_AUX, N_AUX + len(consts))]
        foff = 0
        for slot, size in fsizes:
            ci[slot] = foff
            foff += max(size, 1)
        cf = np.zeros(foff, dtype=np.float64)
        # the transmit rows, then a delay line of DELAY_MAX + 1 frames per transmit message (injected delays)
        cb = np.zeros(CB_TX + max(nt, 1) * MAX_PAYLOAD * (DELAY_MAX + 2), dtype=np.uint8)
        cb[CB_CRC:CB_CRC + 256] = CRC8_J1850_TABLE
        self.ci, self.cf, self.cb = ci, cf, cb

        def iv(slot, shape):
            o = ci[slot]
            n = int(np.prod(shape))
            return ci[o:o + n].reshape(shape)

        def fv(slot, shape):
            o = ci[slot]
            n = int(np.prod(shape))
            return cf[o:o + n].reshape(shape)

        for lay, sl in ((rx, (CI_RX_M, CI_RX_S, CI_RX_SEG, CI_RX_ALLOW, CI_F_RX_SF, CI_RX_MUX)),
                        (tx, (CI_TX_M, CI_TX_S, CI_TX_SEG, None, CI_F_TX_SF, CI_TX_MUX))):
            v = iv(sl[0], lay.M.shape)
            v[:] = lay.M
            lay.M = v
            v = iv(sl[1], lay.S.shape)
            v[:] = lay.S
            lay.S = v
            v = iv(sl[2], lay.SEG.shape)
            v[:] = lay.SEG
            lay.SEG = v
            if sl[3] is not None:
                v = iv(sl[3], lay.ALLOW.shape)
                v[:] = lay.ALLOW
                lay.ALLOW = v
            v = fv(sl[4], lay.SF.shape)
            v[:] = lay.SF
            lay.SF = v
            v = iv(sl[5], lay.MUX.shape)
            v[:] = lay.MUX
            lay.MUX = v
        self._name_views(iv, fv, nr, nt, consts)

    def _name_views(self, iv, fv, nr: int, nt: int, consts: list) -> None:
        """Named views of the state in the buffers; the constants of the transmit values filled in."""
        rx, cb = self.rx, self.cb
        self.cnt_state = iv(CI_CNT, (nr, CNT_COLS))
        self.counts = iv(CI_COUNTS, (nr, RX_COLS))
        self.seq = iv(CI_SEQ, (nr,))
        self.seen = iv(CI_SEEN, (nr,))
        self.last_tick = iv(CI_LAST, (nr,))
        self.stale = iv(CI_STALE, (nr,))
        self.timeouts = iv(CI_TIMEOUTS, (nr,))
        self.tx_counter = iv(CI_TXCNT, (nt,))
        self.due = iv(CI_DUE, (nt,))
        self.saturated = iv(CI_SAT, (nt,))
        self.detail = iv(CI_DETAIL, (3,))
        self.adapter = iv(CI_ADAPTER, (A_COLS,))
        self.tx_faults = iv(CI_TX_FLT, (nt, TF_COLS))
        self.tx_faults[:, TF_OOR_SIG] = -1
        self.values = fv(CI_F_VALUES, (rx.n_sig,))
        self.aux = fv(CI_F_AUX, (N_AUX,))
        fv(CI_F_AUX, (N_AUX + len(consts),))[N_AUX:] = consts
        self.rx_buf = cb[CB_RX:CB_RX + MAX_PAYLOAD]
        self.tx_buf = cb[CB_TX:CB_TX + nt * MAX_PAYLOAD].reshape(nt, MAX_PAYLOAD)
        self.tx_page = iv(CI_TXPAGE, (nt,))
        self.last_tick[:] = -1
        iv(CI_SLAST, (rx.n_sig,))[:] = -1
        self.stale[:] = 1  # never received: stale, but not a timeout

    def receive(self, m: int, data) -> int:
        """Copy a payload into the receive buffer and check it (:func:`rx_frame`); returns the verdict."""
        n = len(data)
        if n > MAX_PAYLOAD:
            return RX_DLC
        if n:
            self.rx_buf[:n] = np.frombuffer(bytes(data), dtype=np.uint8)
        return rx_frame(m, n, self.ci, self.cf, self.cb)

    def payload(self, m: int) -> bytes:
        """The packed payload of transmit message ``m`` (after :func:`tx_pack`)."""
        return bytes(self.tx_buf[m, :self.tx.M[m, M_LEN]])
