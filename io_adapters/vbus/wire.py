"""One CAN frame in one fixed-size datagram: the encoding of the local virtual bus.

Every datagram is exactly :data:`FRAME_SIZE` bytes, little-endian::

    offset size  field
     0     2     magic b"VB"
     2     1     version (1)
     3     1     flags: EXTENDED 1, FD 2, BRS 4, ESI 8, ERROR 16, REMOTE 32
     4     4     arbitration id (11 or 29 bits; an error frame's error class)
     8     8     timestamp, s since the epoch (the sender's time.time() at send)
    16     8     sent_ns: the sender's CLOCK_MONOTONIC at send, ns (one clock for every process of the machine)
    24     4     sender: a random id of the sending bus instance
    28     4     seq: the sender's frame counter (a gap at a receiver = frames lost on the way)
    32     1     dlc: data bytes of a data frame (0..8, FD: 0..8,12,16,20,24,32,48,64); requested length of a remote frame
    33     3     zero
    36    64     data, zero-padded

A datagram of any other size, another magic or version, unknown flag bits,
an identifier that does not fit its format, a length CAN does not have or a
timestamp that is not finite is refused by :func:`decode` (None), so a
receiver counts it as bad and reads on.
"""

from __future__ import annotations

import math
import struct

MAGIC = b"VB"
VERSION = 1

F_EXTENDED = 1
F_FD = 2
F_BRS = 4
F_ESI = 8
F_ERROR = 16
F_REMOTE = 32
F_KNOWN = F_EXTENDED | F_FD | F_BRS | F_ESI | F_ERROR | F_REMOTE

MAX_DATA = 64
FD_LENGTHS = frozenset((0, 1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 20, 24, 32, 48, 64))

_FRAME = struct.Struct("<2sBBIdqIIB3x64s")
FRAME_SIZE = _FRAME.size  # 100 bytes
_HEAD = struct.Struct("<2sBBIdqIIB3x")  # the fields before the data


class WireError(ValueError):
    """A frame that the bus cannot carry (data longer than 64 bytes, an 11-bit id above 0x7FF, ...)."""


def _check(flags: int, arbitration_id: int, dlc: int) -> str:
    """'' if the fields describe a frame CAN can carry, else what is wrong with them."""
    if flags & ~F_KNOWN:
        return f"unknown flag bits 0x{flags & ~F_KNOWN:02X}"
    if not 0 <= arbitration_id <= 0x1FFFFFFF:
        return f"arbitration id 0x{arbitration_id:X} has more than 29 bits"
    if not flags & (F_EXTENDED | F_ERROR) and arbitration_id > 0x7FF:
        return f"standard (11-bit) arbitration id 0x{arbitration_id:X} is above 0x7FF"
    fd = flags & F_FD
    if not fd and flags & (F_BRS | F_ESI):
        return "bit rate switch or error state indicator on a classic frame"
    if fd and flags & F_REMOTE:
        return "a CAN FD frame cannot be a remote frame"
    if fd and dlc not in FD_LENGTHS:
        return f"{dlc} data bytes is not a CAN FD length"
    if not fd and dlc > 8:
        return f"{dlc} data bytes on a classic frame"
    return ""


def encode(msg, sender: int, seq: int, timestamp: float, sent_ns: int) -> bytes:
    """The datagram of python-can message ``msg``; WireError if the bus cannot carry it."""
    flags = ((F_EXTENDED if msg.is_extended_id else 0) | (F_FD if msg.is_fd else 0)
             | (F_BRS if msg.bitrate_switch else 0) | (F_ESI if msg.error_state_indicator else 0)
             | (F_ERROR if msg.is_error_frame else 0) | (F_REMOTE if msg.is_remote_frame else 0))
    data = bytes(msg.data) if msg.data is not None and not msg.is_remote_frame else b""
    dlc = int(msg.dlc) if msg.is_remote_frame else len(data)
    if len(data) > MAX_DATA:
        raise WireError(f"{len(data)} data bytes; a CAN frame carries at most {MAX_DATA}")
    problem = _check(flags, int(msg.arbitration_id), dlc)
    if problem:
        raise WireError(problem)
    return _FRAME.pack(MAGIC, VERSION, flags, int(msg.arbitration_id), timestamp, sent_ns, sender & 0xFFFFFFFF,
                       seq & 0xFFFFFFFF, dlc, data)


def decode(datagram: bytes) -> tuple | None:
    """(flags, arbitration_id, timestamp, sent_ns, sender, seq, dlc, data) of a valid datagram, else None.

    ``data`` is empty for a remote frame (``dlc`` is then the requested length).
    """
    if len(datagram) != FRAME_SIZE:
        return None
    magic, version, flags, arbitration_id, timestamp, sent_ns, sender, seq, dlc = _HEAD.unpack_from(datagram)
    if magic != MAGIC or version != VERSION or _check(flags, arbitration_id, dlc) or not math.isfinite(timestamp):
        return None
    n = 0 if flags & F_REMOTE else dlc
    return flags, arbitration_id, timestamp, sent_ns, sender, seq, dlc, datagram[36:36 + n]


__all__ = ["FRAME_SIZE", "MAX_DATA", "FD_LENGTHS", "WireError", "encode", "decode", "F_EXTENDED", "F_FD", "F_BRS",
           "F_ESI", "F_ERROR", "F_REMOTE"]
