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
are declared here as column tables (:class:`plant_models.contract.columns.Columns`:
one row per column, name and doc; the numbers and counts are generated,
``MESSAGE.describe()`` lists them), beside the kernels that read them,
because numba's cache keys a kernel on its own source file only: a constant
changed in another file would leave stale machine code behind.  The names
come from ``globals().update(...)``, so a line that uses one says
``# noqa: F821`` to static checkers.  That is also why the codec stays one
file of over 600 lines: the kernels, the CRCs and the table layout they
index must change together.

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

The receive path is :func:`rx_frame` over three compiled stages in the
order of the checks (:func:`_rx_e2e`: length, CRC, counter;
:func:`_rx_values`: multiplexer and ranges; :func:`_rx_post`: the mailbox);
a stage returns its verdict and :func:`rx_frame` alone counts it, so the
order that decides which rejection is counted stays in one place.  The
transmit path is :func:`tx_pack` over :func:`_tx_signals` (:func:`_tx_raw`
per value), :func:`_tx_protect` (counter, CRC) and :func:`_tx_delay`.  The
stages take the flat buffers ``(ci, cf, cb)`` and a few offsets, no table
arrays, and allocate nothing.
"""

from __future__ import annotations

import math
import numpy as np
from numba import njit

from plant_models.contract.columns import Columns

# The loop's per-tick slots.  Compiled in as constants: they are a fixed contract of io_adapters.base.
from ..base import TI_OVERRUNS, TI_WATCHDOG

JIT = dict(cache=True, nogil=True)
# The functions the tick calls keep the GIL.  A nogil call releases the GIL on entry and must win it
# back on exit; with the receive thread (and, in-process, share or TCU threads) waiting for it, the
# tick then waits up to a switch interval for a few microseconds of work (bench/bench_can.py measured
# it).  Holding the GIL for their ~1-3 us also keeps the mailbox copy atomic w.r.t. those threads.
JIT_TICK = dict(cache=True, nogil=False)
# The stages of rx_frame and tx_pack: inlined into them (numba's IR), so the split costs no call per frame.
JIT_STAGE = dict(JIT, inline="always")

MAX_PAYLOAD = 64  # bytes, CAN FD

# -- the table layouts: generated from the tables below (plant_models.contract.columns), so no
# column number is written by hand; plain ints in this module's globals, which numba compiles in.
MESSAGE = Columns("a message's row of the int table M (both directions)", (
    ("M_LEN", "payload length, bytes (the DLC the message must arrive with)"),
    ("M_SIG0", "index of the message's first signal in the signal tables"),
    ("M_NSIG", "number of signals"),
    ("M_CRC_BYTE", "byte holding the CRC-8 (CRC-16: its low byte, the high byte follows), -1 = no checksum"),
    ("M_CNT_SIG", "signal index of the alive counter, -1 = no counter"),
    ("M_CNT_MOD", "counter modulus (DBC maximum + 1)"),
    ("M_DATA_ID", "16-bit E2E data ID mixed into the checksum"),
    ("M_MAX_DELTA", "largest accepted counter step (receive side)"),
    ("M_PERIOD", "cycle time, ticks (transmit) / 0 = not cyclic"),
    ("M_OFFSET", "first tick of the cycle (transmit)"),
    ("M_TIMEOUT", "ticks without a valid frame before the message is stale (receive)"),
    ("M_REQUIRED", "1: the command watchdog needs this message fresh (receive)"),
    ("M_CRC_INIT", "CRC initial value (0xFF: CRC-8 SAE J1850; 0x00: AUTOSAR E2E profile 1)"),
    ("M_CRC_XOR", "CRC final XOR (0xFF; 0x00)"),
    ("M_CRC_BITS", "8: CRC-8 (poly 0x1D); 16: CRC-16/CCITT-FALSE (AUTOSAR E2E profile 5)"),
    ("M_PAGES", "transmit, multiplexed: offset of the page list in the direction's MUX table; -1 = not multiplexed"),
    ("M_MUXED", "1: multiplexed (receive: freshness per mapped signal, each page must keep arriving)"),
), count="M_COLS")
globals().update(MESSAGE.constants())  # M_LEN .. M_MUXED; M_COLS

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
SIGNAL = Columns("a signal's row of the int table S", (
    ("S_SEG0", "first segment"),
    ("S_NSEG", "number of segments"),
    ("S_LEN", "length, bits"),
    ("S_SIGNED", "1: two's complement"),
    ("S_RAW_LO", "smallest accepted (receive) / transmitted (transmit) raw value"),
    ("S_RAW_HI", "largest accepted / transmitted raw value"),
    ("S_TARGET", "receive: plant input index; transmit: source index; -1 = not mapped"),
    ("S_SOURCE", "transmit: SOURCE_PLANT (a plant output y) or SOURCE_AUX (an auxiliary value)"),
    ("S_ALLOW0", "first allowed raw value in the allowed-values table"),
    ("S_NALLOW", "number of allowed raw values, 0 = any value in range"),
    ("S_MUXC", "offset of the signal's presence conditions in the MUX table; -1 = in every frame (not multiplexed)"),
    ("S_MUXK", "a multiplexer signal: offset of its known values in the MUX table; -1 = not a multiplexer"),
), count="S_COLS")
globals().update(SIGNAL.constants())  # S_SEG0 .. S_MUXK; S_COLS

# The MUX table of a direction (int64, offsets relative to its start), records of variable length:
#   presence conditions of a signal: [n, then n times: multiplexer signal row, k, k accepted values]
#     (the whole chain up to the top multiplexer, so extended multiplexing needs no recursion);
#   known values of a multiplexer signal: [k, k values];
#   pages of a transmit message: [n_pages, offset of page 0, ...]; a page: [n, then n times: multiplexer row, raw].

SCALING = Columns("a signal's row of the float table SF", (
    ("SF_SCALE", "DBC factor: physical = raw * scale + offset (DBC units)"),
    ("SF_OFFSET", "DBC offset"),
    ("SF_GAIN", "plant value = gain * DBC physical value + bias (unit conversion)"),
    ("SF_BIAS", "the bias of that conversion, plant units"),
), count="SF_COLS")
globals().update(SCALING.constants())  # SF_SCALE .. SF_BIAS; SF_COLS

SEGMENT = Columns("a segment's row of the SEG table (see 'Bit layout' above)", (
    ("SEG_BYTE", "byte of the frame the segment lies in"),
    ("SEG_SHIFT", "its first bit in that byte (0 = least significant)"),
    ("SEG_NBITS", "number of bits"),
    ("SEG_RAWSHIFT", "raw bit of the signal's value the segment starts at"),
), count="SEG_COLS")
globals().update(SEGMENT.constants())  # SEG_BYTE .. SEG_RAWSHIFT; SEG_COLS

SOURCE_PLANT = 0
SOURCE_AUX = 1

# -- receive verdicts (also the columns of the per-message counter table) -------
VERDICT = Columns("the receive verdicts; also the columns of a message's row of counters at ci[CI_COUNTS]", (
    ("RX_OK", "accepted"),
    ("RX_CRC", "wrong checksum"),
    ("RX_COUNTER_FROZEN", "alive counter did not advance"),
    ("RX_COUNTER_JUMP", "alive counter advanced by more than max_delta_counter"),
    ("RX_DLC", "payload length differs from the DBC's"),
    ("RX_RANGE", "a value outside the DBC range, the plant's range or its allowed values"),
    ("RX_LOST", "frames missed inside the accepted counter step (counted, not rejected)"),
    ("RX_MUX", "a multiplexer value the DBC does not define for that message"),
), count="RX_COLS")
globals().update(VERDICT.constants())  # RX_OK .. RX_MUX; RX_COLS
RX_REASONS = ("ok", "crc", "counter_frozen", "counter_jump", "dlc", "out_of_range", "lost", "unknown_mux")

# state of the counter check, per message
COUNTER_CHECK = Columns("a receive message's counter-check memory, at ci[CI_CNT]", (
    ("CNT_LAST", "the alive counter of the last frame that passed the end-to-end checks"),
    ("CNT_VALID", "1 once CNT_LAST holds a received counter"),
), count="CNT_COLS")
globals().update(COUNTER_CHECK.constants())  # CNT_LAST, CNT_VALID; CNT_COLS

# -- the flat buffers of a FrameCodec (MuJoCo style, as the friction core's layout) ------------
# ci (int64): a header of sizes and offset slots, then the tables and the counters.
# cf (float64): signal scalings, the receive mailbox, the auxiliary transmit values.
# cb (uint8): the CRC table, the receive frame, one 64-byte row per transmit message.
CI_SLOTS = Columns("the header of ci: sizes, and offset slots (ci[slot] = offset of the field)", (
    ("CI_NRX", "receive messages"),
    ("CI_NTX", "transmit messages"),
    ("CI_N_IN", "plant inputs"),
    ("CI_P_U", "offset of the plant inputs in the plant's df (their rates follow at + n_in)"),
    ("CI_P_Y", "offset of the plant outputs in df"),
    (None, "spare", 5),
    ("CI_RX_M", "[n_rx * M_COLS] receive message table"),
    ("CI_RX_S", "[n_rx_sig * S_COLS] receive signal table"),
    ("CI_RX_SEG", "[* SEG_COLS] receive segment table"),
    ("CI_RX_ALLOW", "receive allowed-values table"),
    ("CI_TX_M", "[n_tx * M_COLS] transmit message table"),
    ("CI_TX_S", "[n_tx_sig * S_COLS] transmit signal table"),
    ("CI_TX_SEG", "[* SEG_COLS] transmit segment table"),
    ("CI_CNT", "[n_rx * CNT_COLS] counter-check memory"),
    ("CI_COUNTS", "[n_rx * RX_COLS] verdict counters"),
    ("CI_SEQ", "[n_rx] mailbox sequence numbers (receive thread)"),
    ("CI_SEEN", "[n_rx] last sequence number the tick took"),
    ("CI_LAST", "[n_rx] tick of the last valid frame, -1 = none yet"),
    ("CI_STALE", "[n_rx] 1 = stale"),
    ("CI_TIMEOUTS", "[n_rx] fresh -> stale transitions"),
    ("CI_TXCNT", "[n_tx] next alive counter"),
    ("CI_DUE", "[n_tx] rows due this tick"),
    ("CI_SAT", "[n_tx] clamped or non-finite values"),
    ("CI_DETAIL", "[3] why the last frame was rejected"),
    ("CI_ADAPTER", "[A_COLS] adapter counters"),
    ("CI_F_RX_SF", "offset in cf: [n_rx_sig * SF_COLS] receive scalings"),
    ("CI_F_VALUES", "offset in cf: [n_rx_sig] the receive mailbox, plant units"),
    ("CI_F_TX_SF", "offset in cf: [n_tx_sig * SF_COLS] transmit scalings"),
    ("CI_F_AUX", "offset in cf: [N_AUX + constants] auxiliary transmit values"),
    ("CI_TX_FLT", "[n_tx * TF_COLS] injected transmit faults (server/realtime/faults.py, docs/faults.md)"),
    ("CI_RX_MUX", "the receive direction's MUX table"),
    ("CI_TX_MUX", "the transmit direction's MUX table"),
    ("CI_SPOST", "[n_rx_sig] mailbox sequence number of the frame that last carried the signal (multiplexed pages)"),
    ("CI_SLAST", "[n_rx_sig] tick that last took the signal, -1 = none yet (freshness of multiplexed messages)"),
    ("CI_TXPAGE", "[n_tx] page a multiplexed transmit message sends next"),
    (None, "spare", 1),
), count="CI_HEADER")
globals().update(CI_SLOTS.constants())  # CI_NRX .. CI_TXPAGE; CI_HEADER (the fields start there)

# -- injected faults of a transmit message (TF_*), set between ticks by the adapter -----------
TX_FAULT = Columns("a transmit message's row of injected faults, at ci[CI_TX_FLT]", (
    ("TF_DROP", "1: the frame is packed (its counter advances) but not sent"),
    ("TF_DELAY", "n > 0: each frame goes out n cycles late (a delay line of DELAY_MAX frames per message)"),
    ("TF_FREEZE", "1: the alive counter does not advance"),
    ("TF_BAD_CRC", "1: the checksum is sent inverted"),
    ("TF_OOR_SIG", "signal index forced to TF_OOR_RAW (-1: none)"),
    ("TF_OOR_RAW", "the raw value that signal is sent with"),
    ("TF_WRITTEN", "frames put into the delay line since the delay was set"),
    ("TF_DROPPED", "frames not sent because of TF_DROP"),
), count="TF_COLS")
globals().update(TX_FAULT.constants())  # TF_DROP .. TF_DROPPED; TF_COLS
DELAY_MAX = 16

ADAPTER = Columns("the adapter counters, at ci[CI_ADAPTER]", (
    ("A_UNKNOWN", "frames with an ID outside the message set"),
    ("A_TX_ERRORS", "frames the bus refused"),
    ("A_FRESH", "1 while every required command message is fresh (and applied)"),
    ("A_BUSY", "ticks that found the mailbox lock taken"),
    ("A_IGNORED", "valid command messages taken but not applied (a scenario drives the inputs)"),
    ("A_PREV_TICK", "the tick number of the last read"),
    (None, "spare", 2),
), count="A_COLS")
globals().update(ADAPTER.constants())  # A_UNKNOWN .. A_PREV_TICK; A_COLS

CB_SLOTS = Columns("the byte buffer cb", (
    ("CB_CRC", "[256] CRC-8 SAE J1850 table", 256),
    ("CB_RX", "[MAX_PAYLOAD] the frame being checked", MAX_PAYLOAD),
    ("CB_TX", "[n_tx * MAX_PAYLOAD] transmit payloads, then the delay lines (sized at run time)", 0),
))
globals().update(CB_SLOTS.constants())  # CB_CRC = 0, CB_RX = 256, CB_TX = 320

# auxiliary transmit values (io_adapters/can/message_set.py AUX_SOURCES names them in this order)
AUX = Columns("the auxiliary transmit values, in cf at ci[CI_F_AUX] (message_set.AUX_SOURCES names them)", (
    ("AUX_TICK", "hil.tick: loop tick number since start"),
    ("AUX_OVERRUNS", "hil.overruns: ticks that missed their deadline"),
    ("AUX_WATCHDOG", "hil.watchdog: 0 = commands fresh, 1 = tripped"),
    ("AUX_FRESH", "can.commands_fresh: 1 when every required command message is fresh"),
    ("AUX_CRC", "can.crc_errors: frames rejected for a wrong checksum"),
    ("AUX_COUNTER", "can.counter_errors: frames rejected for a frozen or jumping alive counter"),
    ("AUX_DLC", "can.dlc_errors: frames rejected for a wrong length"),
    ("AUX_UNKNOWN", "can.unknown_ids: frames with an ID outside the message set"),
    ("AUX_RANGE", "can.range_errors: frames rejected for a value out of range"),
    ("AUX_TIMEOUTS", "can.timeouts: command messages that went stale"),
    ("AUX_RX_OK", "can.rx_ok: frames accepted"),
    ("AUX_TX_ERRORS", "can.tx_errors: frames the bus refused to send"),
    ("AUX_UNKNOWN_MUX", "can.unknown_mux: frames rejected for an undefined multiplexer value"),
), count="N_AUX")
globals().update(AUX.constants())  # AUX_TICK .. AUX_UNKNOWN_MUX; N_AUX


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
    if ci[oM + M_CRC_BITS] == 16:  # noqa: F821
        return _crc16(cb, d0, n, ci[oM + M_CRC_BYTE], ci[oM + M_DATA_ID],  # noqa: F821
                      ci[oM + M_CRC_INIT], ci[oM + M_CRC_XOR])  # noqa: F821
    return _crc8(cb, d0, n, ci[oM + M_CRC_BYTE], ci[oM + M_DATA_ID], cb, np.int64(CB_CRC),  # noqa: F821
                 ci[oM + M_CRC_INIT], ci[oM + M_CRC_XOR])  # noqa: F821


@njit(**JIT)
def _frame_crc_read(cb, d0, ci, oM):
    """The checksum the frame carries (CRC-16: low byte first)."""
    b = d0 + ci[oM + M_CRC_BYTE]  # noqa: F821
    if ci[oM + M_CRC_BITS] == 16:  # noqa: F821
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
    r = oS + s * S_COLS  # noqa: F821
    g0 = ci[r + S_SEG0]  # noqa: F821
    for g in range(g0, g0 + ci[r + S_NSEG]):  # noqa: F821
        q = oSEG + g * SEG_COLS  # noqa: F821
        nb = ci[q + SEG_NBITS]  # noqa: F821
        bits = (buf[d0 + ci[q + SEG_BYTE]] >> ci[q + SEG_SHIFT]) & ((1 << nb) - 1)  # noqa: F821
        raw |= bits << ci[q + SEG_RAWSHIFT]  # noqa: F821
    if ci[r + S_SIGNED] == 1:  # noqa: F821
        n = ci[r + S_LEN]  # noqa: F821
        if (raw >> (n - 1)) & 1:
            raw -= 1 << n
    return raw


@njit(**JIT)
def _pack(buf, d0, ci, oS, oSEG, s, raw):
    """OR the raw value of signal row ``s`` into the payload at ``buf[d0:]`` (bits must be clear).

    Called in the real-time loop.
    """
    r = oS + s * S_COLS  # noqa: F821
    raw &= (1 << ci[r + S_LEN]) - 1  # noqa: F821  two's complement of negative values
    g0 = ci[r + S_SEG0]  # noqa: F821
    for g in range(g0, g0 + ci[r + S_NSEG]):  # noqa: F821
        q = oSEG + g * SEG_COLS  # noqa: F821
        nb = ci[q + SEG_NBITS]  # noqa: F821
        part = (raw >> ci[q + SEG_RAWSHIFT]) & ((1 << nb) - 1)  # noqa: F821
        b = d0 + ci[q + SEG_BYTE]  # noqa: F821
        buf[b] = buf[b] | (part << ci[q + SEG_SHIFT])  # noqa: F821


@njit(**JIT)
def _present(buf, d0, ci, oS, oSEG, oX, s):
    """Whether signal row ``s`` is in the frame at ``buf[d0:]``: every multiplexer of its chain holds one of
    the values that select it.  Always True for a signal that is not multiplexed.  Called in the real-time loop.
    """
    c = ci[oS + s * S_COLS + S_MUXC]  # noqa: F821
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
        k = ci[oS + s * S_COLS + S_MUXK]  # noqa: F821
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


@njit(**JIT_STAGE)
def _rx_e2e(n, ci, cb, oM, oC, oK, od):
    """The end-to-end checks of the frame in the receive buffer: length, CRC, alive counter.

    Returns ``RX_OK`` or the reason of the rejection (``detail`` at ``od`` set: expected, received).
    The counter reference moves as the module's docstring says; frames missed inside an accepted
    counter step are counted here (``RX_LOST``), the rejection by :func:`rx_frame`.
    """
    d0 = np.int64(CB_RX)  # noqa: F821  an int64, not the literal: the helpers compile once for rx and tx
    if n != ci[oM + M_LEN]:  # noqa: F821
        ci[od] = ci[oM + M_LEN]  # noqa: F821
        ci[od + 1] = n
        return RX_DLC  # noqa: F821
    if ci[oM + M_CRC_BYTE] >= 0:  # noqa: F821
        crc = _frame_crc(cb, d0, n, ci, oM)
        got = _frame_crc_read(cb, d0, ci, oM)
        if crc != got:
            ci[od] = crc
            ci[od + 1] = got
            return RX_CRC  # noqa: F821
    cs = ci[oM + M_CNT_SIG]  # noqa: F821
    if cs >= 0:
        c = _unpack(cb, d0, ci, ci[CI_RX_S], ci[CI_RX_SEG], cs)  # noqa: F821
        mod = ci[oM + M_CNT_MOD]  # noqa: F821
        if c >= mod:  # e.g. 15 where the counter runs 0..14 (E2E profile 1): invalid, never a valid step
            ci[od] = (ci[oK + CNT_LAST] + 1) % mod  # noqa: F821
            ci[od + 1] = c
            return RX_COUNTER_JUMP  # noqa: F821
        if ci[oK + CNT_VALID] == 1:  # noqa: F821
            delta = (c - ci[oK + CNT_LAST]) % mod  # noqa: F821
            ci[od] = (ci[oK + CNT_LAST] + 1) % mod  # noqa: F821
            ci[od + 1] = c
            if delta == 0:
                return RX_COUNTER_FROZEN  # noqa: F821
            ci[oK + CNT_LAST] = c  # noqa: F821
            if delta > ci[oM + M_MAX_DELTA]:  # noqa: F821
                return RX_COUNTER_JUMP  # noqa: F821
            ci[oC + RX_LOST] += delta - 1  # noqa: F821
        else:
            ci[oK + CNT_LAST] = c  # noqa: F821
            ci[oK + CNT_VALID] = 1  # noqa: F821
    return RX_OK  # noqa: F821


@njit(**JIT_STAGE)
def _rx_values(ci, cb, oM, od):
    """The value checks of a frame that passed :func:`_rx_e2e`: its multiplexer values, then the range
    (and allowed values) of every mapped signal it carries.  Returns ``RX_OK``, ``RX_MUX`` or ``RX_RANGE``
    (``detail``: signal row, raw value, signal row)."""
    d0 = np.int64(CB_RX)  # noqa: F821  an int64, not the literal: the helpers compile once for rx and tx
    oS = ci[CI_RX_S]  # noqa: F821
    oSEG = ci[CI_RX_SEG]  # noqa: F821
    s0 = ci[oM + M_SIG0]  # noqa: F821
    s1 = s0 + ci[oM + M_NSIG]  # noqa: F821
    oA = ci[CI_RX_ALLOW]  # noqa: F821
    oX = ci[CI_RX_MUX]  # noqa: F821
    if ci[oM + M_MUXED] == 1 and _known_mux(cb, d0, ci, oS, oSEG, oX, s0, s1, od) != 0:  # noqa: F821
        return RX_MUX  # noqa: F821
    for s in range(s0, s1):
        r = oS + s * S_COLS  # noqa: F821
        if ci[r + S_TARGET] < 0 or not _present(cb, d0, ci, oS, oSEG, oX, s):  # noqa: F821
            continue
        raw = _unpack(cb, d0, ci, oS, oSEG, s)
        bad = raw < ci[r + S_RAW_LO] or raw > ci[r + S_RAW_HI]  # noqa: F821
        na = ci[r + S_NALLOW]  # noqa: F821
        if not bad and na > 0:
            bad = True
            a0 = oA + ci[r + S_ALLOW0]  # noqa: F821
            for a in range(a0, a0 + na):
                if ci[a] == raw:
                    bad = False
        if bad:
            ci[od] = s
            ci[od + 1] = raw
            ci[od + 2] = s
            return RX_RANGE  # noqa: F821
    return RX_OK  # noqa: F821


@njit(**JIT_STAGE)
def _rx_post(m, ci, cf, cb, oM):
    """Post the values of a valid frame of receive message ``m``, in plant units, to the mailbox, and
    advance its sequence number (and that of each signal it carried) so the tick takes them."""
    d0 = np.int64(CB_RX)  # noqa: F821  an int64, not the literal: the helpers compile once for rx and tx
    oS = ci[CI_RX_S]  # noqa: F821
    oSEG = ci[CI_RX_SEG]  # noqa: F821
    oX = ci[CI_RX_MUX]  # noqa: F821
    s0 = ci[oM + M_SIG0]  # noqa: F821
    s1 = s0 + ci[oM + M_NSIG]  # noqa: F821
    oSF = ci[CI_F_RX_SF]  # noqa: F821
    oV = ci[CI_F_VALUES]  # noqa: F821
    seq = ci[ci[CI_SEQ] + m] + 1  # noqa: F821
    ospost = ci[CI_SPOST]  # noqa: F821
    for s in range(s0, s1):
        if ci[oS + s * S_COLS + S_TARGET] >= 0 and _present(cb, d0, ci, oS, oSEG, oX, s):  # noqa: F821
            raw = _unpack(cb, d0, ci, oS, oSEG, s)
            f = oSF + s * SF_COLS  # noqa: F821
            cf[oV + s] = cf[f + SF_GAIN] * (raw * cf[f + SF_SCALE] + cf[f + SF_OFFSET]) + cf[f + SF_BIAS]  # noqa: F821
            ci[ospost + s] = seq
    ci[ci[CI_SEQ] + m] = seq  # noqa: F821


@njit(**JIT_TICK)  # keeps the GIL too: the mailbox lock is then held for ~1 us, not for a GIL hand-over
def rx_frame(m, n, ci, cf, cb):
    """Check the frame of receive message ``m`` in the receive buffer (``n`` bytes); post it if valid.

    Checks, in this order: length, CRC-8, alive counter (:func:`_rx_e2e`), the multiplexer
    values (each must be one the DBC defines), the range (and allowed values)
    of every mapped signal the frame carries (:func:`_rx_values`; a multiplexed frame carries the
    signals of its page).  A valid frame's values, in plant units, go to the
    mailbox and its sequence number advances (:func:`_rx_post`), so the tick sees new data; a
    rejected frame changes no mailbox value.  The counter of
    the verdict advances; ``detail`` says what was wrong (expected,
    received, signal row).

    Returns
    -------
    int
        ``RX_OK`` or the reason of the rejection.  Runs in the receive thread,
        under the mailbox lock.
    """
    oM = ci[CI_RX_M] + m * M_COLS  # noqa: F821
    oC = ci[CI_COUNTS] + m * RX_COLS  # noqa: F821
    od = ci[CI_DETAIL]  # noqa: F821
    verdict = _rx_e2e(n, ci, cb, oM, oC, ci[CI_CNT] + m * CNT_COLS, od)  # noqa: F821
    if verdict == RX_OK:  # noqa: F821
        verdict = _rx_values(ci, cb, oM, od)
    if verdict == RX_OK:  # noqa: F821
        _rx_post(m, ci, cf, cb, oM)
    ci[oC + verdict] += 1
    return verdict


@njit(**JIT)
def _restart_ages(ci):
    """The plant was reset: every command message and signal is stale, as if never received.  Called in the loop."""
    for m in range(ci[CI_NRX]):  # noqa: F821
        ci[ci[CI_LAST] + m] = -1  # noqa: F821
        ci[ci[CI_STALE] + m] = 1  # noqa: F821
        oM = ci[CI_RX_M] + m * M_COLS  # noqa: F821
        for s in range(ci[oM + M_SIG0], ci[oM + M_SIG0] + ci[oM + M_NSIG]):  # noqa: F821
            ci[ci[CI_SLAST] + s] = -1  # noqa: F821


@njit(**JIT)
def _oldest_page(ci, oS, oslast, s0, s1, last):
    """The tick of the oldest mapped signal of a multiplexed message (-1: one never came).  Called in the loop."""
    for s in range(s0, s1):
        if ci[oS + s * S_COLS + S_TARGET] >= 0:  # noqa: F821
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
    oS = ci[CI_RX_S]  # noqa: F821
    oV = ci[CI_F_VALUES]  # noqa: F821
    oseq = ci[CI_SEQ]  # noqa: F821
    oseen = ci[CI_SEEN]  # noqa: F821
    olast = ci[CI_LAST]  # noqa: F821
    ostale = ci[CI_STALE]  # noqa: F821
    otmo = ci[CI_TIMEOUTS]  # noqa: F821
    oad = ci[CI_ADAPTER]  # noqa: F821
    ou = ci[CI_P_U]  # noqa: F821
    our = ou + ci[CI_N_IN]  # noqa: F821
    apply = drive
    nrx = ci[CI_NRX]  # noqa: F821
    ospost = ci[CI_SPOST]  # noqa: F821
    oslast = ci[CI_SLAST]  # noqa: F821
    if tick < ci[oad + A_PREV_TICK]:  # noqa: F821
        _restart_ages(ci)
    ci[oad + A_PREV_TICK] = tick  # noqa: F821
    for m in range(nrx):
        oM = ci[CI_RX_M] + m * M_COLS  # noqa: F821
        s0 = ci[oM + M_SIG0]  # noqa: F821
        s1 = s0 + ci[oM + M_NSIG]  # noqa: F821
        if take and ci[oseq + m] != ci[oseen + m]:
            prev = ci[oseen + m]
            ci[oseen + m] = ci[oseq + m]
            ci[olast + m] = tick
            for s in range(s0, s1):
                t = ci[oS + s * S_COLS + S_TARGET]  # noqa: F821
                if t >= 0 and ci[ospost + s] > prev:  # carried by a frame since the last take
                    ci[oslast + s] = tick
                    if apply:
                        df[ou + t] = cf[oV + s]
                        df[our + t] = 0.0
            applied += 1
        last = ci[olast + m]
        if ci[oM + M_MUXED] == 1:  # noqa: F821
            last = _oldest_page(ci, oS, oslast, s0, s1, last)
        if last < 0 or tick - last > ci[oM + M_TIMEOUT]:  # noqa: F821
            if ci[ostale + m] == 0:
                ci[ostale + m] = 1
                ci[otmo + m] += 1
        else:
            ci[ostale + m] = 0
        if ci[oM + M_REQUIRED] == 1:  # noqa: F821
            n_req += 1
            if ci[ostale + m] == 1:
                fresh = 0
    if n_req == 0:
        fresh = 0
    if not take:
        ci[oad + A_BUSY] += 1  # noqa: F821
    if not apply:
        ci[oad + A_IGNORED] += applied  # noqa: F821
        fresh = 0  # commands do not drive the plant now: nothing to feed the watchdog for
    ci[oad + A_FRESH] = fresh  # noqa: F821
    return fresh


@njit(**JIT)
def _refresh_aux(ci, cf, tick, tick_info):
    """Loop and adapter status as values for transmit signals (see message_set.AUX_SOURCES).

    Called in the real-time loop.
    """
    oa = ci[CI_F_AUX]  # noqa: F821
    oad = ci[CI_ADAPTER]  # noqa: F821
    crc = cnt = dlc = rng = ok = mux = 0
    oC = ci[CI_COUNTS]  # noqa: F821
    for m in range(ci[CI_NRX]):  # noqa: F821
        r = oC + m * RX_COLS  # noqa: F821
        mux += ci[r + RX_MUX]  # noqa: F821
        crc += ci[r + RX_CRC]  # noqa: F821
        cnt += ci[r + RX_COUNTER_FROZEN] + ci[r + RX_COUNTER_JUMP]  # noqa: F821
        dlc += ci[r + RX_DLC]  # noqa: F821
        rng += ci[r + RX_RANGE]  # noqa: F821
        ok += ci[r + RX_OK]  # noqa: F821
    tmo = 0
    for m in range(ci[CI_NRX]):  # noqa: F821
        tmo += ci[ci[CI_TIMEOUTS] + m]  # noqa: F821
    cf[oa + AUX_TICK] = tick  # noqa: F821
    cf[oa + AUX_OVERRUNS] = tick_info[TI_OVERRUNS]  # noqa: F821
    cf[oa + AUX_WATCHDOG] = tick_info[TI_WATCHDOG]  # noqa: F821
    cf[oa + AUX_FRESH] = ci[oad + A_FRESH]  # noqa: F821
    cf[oa + AUX_CRC] = crc  # noqa: F821
    cf[oa + AUX_COUNTER] = cnt  # noqa: F821
    cf[oa + AUX_DLC] = dlc  # noqa: F821
    cf[oa + AUX_UNKNOWN] = ci[oad + A_UNKNOWN]  # noqa: F821
    cf[oa + AUX_RANGE] = rng  # noqa: F821
    cf[oa + AUX_TIMEOUTS] = tmo  # noqa: F821
    cf[oa + AUX_RX_OK] = ok  # noqa: F821
    cf[oa + AUX_TX_ERRORS] = ci[oad + A_TX_ERRORS]  # noqa: F821
    cf[oa + AUX_UNKNOWN_MUX] = mux  # noqa: F821


@njit(**JIT_STAGE)
def _tx_raw(x, lo, hi, wraps, ci, osat, m):
    """The raw value of a transmit signal whose value is ``x`` raw units: rounded to the nearest, clamped
    to [lo, hi]; clamped or non-finite values count at ``ci[osat + m]``; a counter that ``wraps`` (an
    auxiliary count in a signal whose range starts at 0) wraps modulo hi + 1 instead of sticking at hi."""
    if not math.isfinite(x):
        raw = 0 if lo <= 0 <= hi else lo
        ci[osat + m] += 1
    elif x < lo:
        raw = lo
        ci[osat + m] += 1
    elif x > hi:
        if wraps:
            raw = int(math.floor(x + 0.5)) % (hi + 1)  # counters wrap (docs/can.md), never stick at the top
        else:
            raw = hi
            ci[osat + m] += 1
    else:
        raw = int(math.floor(x + 0.5))
        if raw > hi:
            raw = hi
    return raw


@njit(**JIT_STAGE)
def _tx_signals(m, ci, cf, cb, df, oM, d0, of):
    """Pack the signals of transmit message ``m`` into its cleared row at ``d0``: a multiplexed message's
    page of this cycle first (its multiplexer values, then the signals it carries), an injected
    out-of-range raw value as is, every mapped signal from its plant output or auxiliary value."""
    oS = ci[CI_TX_S]  # noqa: F821
    oSEG = ci[CI_TX_SEG]  # noqa: F821
    oSF = ci[CI_F_TX_SF]  # noqa: F821
    oy = ci[CI_P_Y]  # noqa: F821
    oa = ci[CI_F_AUX]  # noqa: F821
    osat = ci[CI_SAT]  # noqa: F821
    oX = ci[CI_TX_MUX]  # noqa: F821
    otxpage = ci[CI_TXPAGE]  # noqa: F821
    s0 = ci[oM + M_SIG0]  # noqa: F821
    pg = ci[oM + M_PAGES]  # noqa: F821
    if pg >= 0:  # the multiplexer values of this cycle's page first: the presence of the others follows
        pl = oX + pg
        page = ci[otxpage + m]
        p = oX + ci[pl + 1 + page]
        for a in range(ci[p]):
            _pack(cb, d0, ci, oS, oSEG, ci[p + 1 + 2 * a], ci[p + 2 + 2 * a])
        ci[otxpage + m] = (page + 1) % ci[pl]
    for s in range(s0, s0 + ci[oM + M_NSIG]):  # noqa: F821
        r = oS + s * S_COLS  # noqa: F821
        if pg >= 0 and (ci[r + S_MUXK] >= 0 or not _present(cb, d0, ci, oS, oSEG, oX, s)):  # noqa: F821
            continue  # a multiplexer (set above) or a signal of another page
        if s == ci[of + TF_OOR_SIG]:  # noqa: F821
            _pack(cb, d0, ci, oS, oSEG, s, ci[of + TF_OOR_RAW])  # noqa: F821
            continue
        t = ci[r + S_TARGET]  # noqa: F821
        if t < 0:
            continue
        v = df[oy + t] if ci[r + S_SOURCE] == SOURCE_PLANT else cf[oa + t]  # noqa: F821
        f = oSF + s * SF_COLS  # noqa: F821
        x = ((v - cf[f + SF_BIAS]) / cf[f + SF_GAIN] - cf[f + SF_OFFSET]) / cf[f + SF_SCALE]  # noqa: F821
        lo = ci[r + S_RAW_LO]  # noqa: F821
        wraps = ci[r + S_SOURCE] == SOURCE_AUX and t != AUX_WATCHDOG and t != AUX_FRESH and lo == 0  # noqa: F821
        _pack(cb, d0, ci, oS, oSEG, s, _tx_raw(x, lo, ci[r + S_RAW_HI], wraps, ci, osat, m))  # noqa: F821


@njit(**JIT_STAGE)
def _tx_protect(m, n, ci, cb, oM, d0, of):
    """The alive counter (advanced per frame unless frozen by a fault), then the CRC over the packed row."""
    cs = ci[oM + M_CNT_SIG]  # noqa: F821
    ocnt = ci[CI_TXCNT]  # noqa: F821
    if cs >= 0:
        _pack(cb, d0, ci, ci[CI_TX_S], ci[CI_TX_SEG], cs, ci[ocnt + m])  # noqa: F821
        if ci[of + TF_FREEZE] == 0:  # noqa: F821
            ci[ocnt + m] = (ci[ocnt + m] + 1) % ci[oM + M_CNT_MOD]  # noqa: F821
    cbb = ci[oM + M_CRC_BYTE]  # noqa: F821
    if cbb >= 0:
        crc = _frame_crc(cb, d0, n, ci, oM)
        if ci[of + TF_BAD_CRC] != 0:  # noqa: F821
            crc = crc ^ 0xFFFF
        cb[d0 + cbb] = crc & 0xFF
        if ci[oM + M_CRC_BITS] == 16:  # noqa: F821
            cb[d0 + cbb + 1] = (crc >> 8) & 0xFF


@njit(**JIT_STAGE)
def _tx_delay(m, n, ci, cb, d0, of):
    """An injected delay of ``dl`` cycles: the packed row goes into the message's delay line and the row
    packed dl cycles ago comes out in its place.  Returns 0 while the line is still filling (nothing to
    send), else 1."""
    dl = ci[of + TF_DELAY]  # noqa: F821
    if dl > 0:
        line = CB_TX + ci[CI_NTX] * MAX_PAYLOAD + m * (DELAY_MAX + 1) * MAX_PAYLOAD  # noqa: F821
        w = ci[of + TF_WRITTEN]  # noqa: F821
        q = line + (w % (dl + 1)) * MAX_PAYLOAD
        for i in range(n):
            cb[q + i] = cb[d0 + i]
        ci[of + TF_WRITTEN] = w + 1  # noqa: F821
        if w < dl:
            return 0
        q = line + ((w - dl) % (dl + 1)) * MAX_PAYLOAD
        for i in range(n):
            cb[d0 + i] = cb[q + i]
    return 1


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
    carries.  Steps: :func:`_tx_signals`, :func:`_tx_protect`, then the injected
    faults (:func:`_tx_delay`, drop).

    Returns
    -------
    int
        Number of due messages; their rows are listed at ``ci[CI_DUE]``.
        Called in the real-time loop.
    """
    _refresh_aux(ci, cf, tick, tick_info)
    n_due = 0
    odue = ci[CI_DUE]  # noqa: F821
    for m in range(ci[CI_NTX]):  # noqa: F821
        oM = ci[CI_TX_M] + m * M_COLS  # noqa: F821
        period = ci[oM + M_PERIOD]  # noqa: F821
        off = ci[oM + M_OFFSET]  # noqa: F821
        if period <= 0 or tick < off or (tick - off) % period != 0:
            continue
        n = ci[oM + M_LEN]  # noqa: F821
        d0 = CB_TX + m * MAX_PAYLOAD  # noqa: F821
        for i in range(n):
            cb[d0 + i] = 0
        of = ci[CI_TX_FLT] + m * TF_COLS  # noqa: F821
        _tx_signals(m, ci, cf, cb, df, oM, d0, of)
        _tx_protect(m, n, ci, cb, oM, d0, of)
        if _tx_delay(m, n, ci, cb, d0, of) == 0:
            continue
        if ci[of + TF_DROP] != 0:  # noqa: F821
            ci[of + TF_DROPPED] += 1  # noqa: F821
            continue
        ci[odue + n_due] = m
        n_due += 1
    return n_due


# -- frames packed by the tick, sent between ticks (realtime) ---------------------------------
QUEUE = Columns("the counters of a send queue or bus-log ring (q_state, l_state)", (
    ("Q_HEAD", "frames queued since the adapter opened"),
    ("Q_TAIL", "frames taken out to be sent"),
    ("Q_DROPPED", "frames not queued because the queue was full (the sender was starved)"),
), count="Q_COLS")
globals().update(QUEUE.constants())  # Q_HEAD, Q_TAIL, Q_DROPPED; Q_COLS


@njit(**JIT_TICK)
def tx_enqueue(ci, cb, n_due, q_msg, q_data, q_state):
    """Copy the payloads of the ``n_due`` messages :func:`tx_pack` just packed into the send queue.

    ``q_msg[slot]`` is the transmit row, ``q_data[slot]`` the payload (MAX_PAYLOAD bytes); ``q_state`` holds
    the counters ``Q_*``.  A full queue drops the frame and counts it.  Called in the real-time loop.
    """
    cap = q_msg.shape[0]
    odue = ci[CI_DUE]  # noqa: F821
    for i in range(n_due):
        head = q_state[Q_HEAD]  # noqa: F821
        if head - q_state[Q_TAIL] >= cap:  # noqa: F821
            q_state[Q_DROPPED] += 1  # noqa: F821
            continue
        m = ci[odue + i]
        slot = head % cap
        q_msg[slot] = m
        d0 = CB_TX + m * MAX_PAYLOAD  # noqa: F821
        for j in range(MAX_PAYLOAD):
            q_data[slot, j] = cb[d0 + j]
        q_state[Q_HEAD] = head + 1  # noqa: F821


@njit(**JIT_TICK)
def tx_log(ci, cb, n_due, tick, l_meta, l_data, l_state):
    """Copy the ``n_due`` frames :func:`tx_pack` just packed, with ``tick``, into a recording's bus-log ring.

    ``l_meta[slot]`` is ``(tick, transmit row)``, ``l_data[slot]`` the payload; ``l_state`` holds the
    counters ``Q_*`` (io_adapters/can/bus_spool.py empties it).  A full ring drops the frame and counts
    it.  Called in the real-time loop.
    """
    cap = l_meta.shape[0]
    odue = ci[CI_DUE]  # noqa: F821
    for i in range(n_due):
        head = l_state[Q_HEAD]  # noqa: F821
        if head - l_state[Q_TAIL] >= cap:  # noqa: F821
            l_state[Q_DROPPED] += 1  # noqa: F821
            continue
        m = ci[odue + i]
        slot = head % cap
        l_meta[slot, 0] = tick
        l_meta[slot, 1] = m
        d0 = CB_TX + m * MAX_PAYLOAD  # noqa: F821
        for j in range(ci[ci[CI_TX_M] + m * M_COLS + M_LEN]):  # noqa: F821
            l_data[slot, j] = cb[d0 + j]
        l_state[Q_HEAD] = head + 1  # noqa: F821


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
            (CI_RX_M, rx.M.size), (CI_RX_S, rx.S.size), (CI_RX_SEG, rx.SEG.size),  # noqa: F821
            (CI_RX_ALLOW, rx.ALLOW.size),  # noqa: F821
            (CI_TX_M, tx.M.size), (CI_TX_S, tx.S.size), (CI_TX_SEG, tx.SEG.size),  # noqa: F821
            (CI_CNT, nr * CNT_COLS), (CI_COUNTS, nr * RX_COLS),  # noqa: F821
            (CI_SEQ, nr), (CI_SEEN, nr), (CI_LAST, nr),  # noqa: F821
            (CI_STALE, nr), (CI_TIMEOUTS, nr), (CI_TXCNT, nt), (CI_DUE, nt), (CI_SAT, nt),  # noqa: F821
            (CI_DETAIL, 3), (CI_ADAPTER, A_COLS), (CI_TX_FLT, nt * TF_COLS),  # noqa: F821
            (CI_RX_MUX, rx.MUX.size), (CI_TX_MUX, tx.MUX.size),  # noqa: F821
            (CI_SPOST, rx.n_sig), (CI_SLAST, rx.n_sig), (CI_TXPAGE, nt),  # noqa: F821
        ]
        off = CI_HEADER  # noqa: F821
        slots = {}
        for slot, size in sizes:
            slots[slot] = off
            off += max(size, 1)
        ci = np.zeros(off, dtype=np.int64)
        for slot, o in slots.items():
            ci[slot] = o
        ci[CI_NRX], ci[CI_NTX], ci[CI_N_IN], ci[CI_P_U], ci[CI_P_Y] = nr, nt, n_in, u_offset, y_offset  # noqa: F821
        consts = list(getattr(tx, "constants", None) or [])  # constant transmit values follow the status values
        fsizes = [(CI_F_RX_SF, rx.SF.size), (CI_F_VALUES, rx.n_sig), (CI_F_TX_SF, tx.SF.size),  # noqa: F821
                  (CI_F_AUX, N_AUX + len(consts))]  # noqa: F821
        foff = 0
        for slot, size in fsizes:
            ci[slot] = foff
            foff += max(size, 1)
        cf = np.zeros(foff, dtype=np.float64)
        # the transmit rows, then a delay line of DELAY_MAX + 1 frames per transmit message (injected delays)
        cb = np.zeros(CB_TX + max(nt, 1) * MAX_PAYLOAD * (DELAY_MAX + 2), dtype=np.uint8)  # noqa: F821
        cb[CB_CRC:CB_CRC + 256] = CRC8_J1850_TABLE  # noqa: F821
        self.ci, self.cf, self.cb = ci, cf, cb

        def iv(slot, shape):
            o = ci[slot]
            n = int(np.prod(shape))
            return ci[o:o + n].reshape(shape)

        def fv(slot, shape):
            o = ci[slot]
            n = int(np.prod(shape))
            return cf[o:o + n].reshape(shape)

        for lay, sl in ((rx, (CI_RX_M, CI_RX_S, CI_RX_SEG, CI_RX_ALLOW, CI_F_RX_SF, CI_RX_MUX)),  # noqa: F821
                        (tx, (CI_TX_M, CI_TX_S, CI_TX_SEG, None, CI_F_TX_SF, CI_TX_MUX))):  # noqa: F821
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
        self.cnt_state = iv(CI_CNT, (nr, CNT_COLS))  # noqa: F821
        self.counts = iv(CI_COUNTS, (nr, RX_COLS))  # noqa: F821
        self.seq = iv(CI_SEQ, (nr,))  # noqa: F821
        self.seen = iv(CI_SEEN, (nr,))  # noqa: F821
        self.last_tick = iv(CI_LAST, (nr,))  # noqa: F821
        self.stale = iv(CI_STALE, (nr,))  # noqa: F821
        self.timeouts = iv(CI_TIMEOUTS, (nr,))  # noqa: F821
        self.tx_counter = iv(CI_TXCNT, (nt,))  # noqa: F821
        self.due = iv(CI_DUE, (nt,))  # noqa: F821
        self.saturated = iv(CI_SAT, (nt,))  # noqa: F821
        self.detail = iv(CI_DETAIL, (3,))  # noqa: F821
        self.adapter = iv(CI_ADAPTER, (A_COLS,))  # noqa: F821
        self.tx_faults = iv(CI_TX_FLT, (nt, TF_COLS))  # noqa: F821
        self.tx_faults[:, TF_OOR_SIG] = -1  # noqa: F821
        self.values = fv(CI_F_VALUES, (rx.n_sig,))  # noqa: F821
        self.aux = fv(CI_F_AUX, (N_AUX,))  # noqa: F821
        fv(CI_F_AUX, (N_AUX + len(consts),))[N_AUX:] = consts  # noqa: F821
        self.rx_buf = cb[CB_RX:CB_RX + MAX_PAYLOAD]  # noqa: F821
        self.tx_buf = cb[CB_TX:CB_TX + nt * MAX_PAYLOAD].reshape(nt, MAX_PAYLOAD)  # noqa: F821
        self.tx_page = iv(CI_TXPAGE, (nt,))  # noqa: F821
        self.last_tick[:] = -1
        iv(CI_SLAST, (rx.n_sig,))[:] = -1  # noqa: F821
        self.stale[:] = 1  # never received: stale, but not a timeout

    def receive(self, m: int, data) -> int:
        """Copy a payload into the receive buffer and check it (:func:`rx_frame`); returns the verdict."""
        n = len(data)
        if n > MAX_PAYLOAD:
            return RX_DLC  # noqa: F821
        if n:
            self.rx_buf[:n] = np.frombuffer(bytes(data), dtype=np.uint8)
        return rx_frame(m, n, self.ci, self.cf, self.cb)

    def payload(self, m: int) -> bytes:
        """The packed payload of transmit message ``m`` (after :func:`tx_pack`)."""
        return bytes(self.tx_buf[m, :self.tx.M[m, M_LEN]])  # noqa: F821
