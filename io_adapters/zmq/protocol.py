"""msgpack codecs of the ZeroMQ protocol (docs/protocol.md), compiled once at start-up.

Three pieces, all resolved from the plant's declared signals when the server
starts (cantools-style), so the real-time tick only packs and unpacks:

* :class:`StateEncoder` builds the byte template of a state message once;
  each tick writes the sequence number, tick, time and outputs into fixed
  slots of that template (float64 / uint64 in big-endian, as msgpack
  requires) with numpy views.  The result is ordinary msgpack that any
  decoder reads; no Python object is built per tick.
* :class:`CommandDecoder` decodes one command message (a partial update of
  input signals by name) and validates every value against the plant's
  declared range before anything is applied.  A message is applied whole or
  not at all.
* :class:`RejectLog` counts rejected messages per reason and logs them,
  rate-limited, outside the tick.

Error reasons are short stable codes (``REASONS``) that clients and status
counters share; the accompanying message says what exactly was wrong.
"""

from __future__ import annotations

import logging
import math
import time
import zlib
from typing import Any, Iterable, Sequence

import msgpack
import numpy as np

from plant_models.plant import Signal

PROTOCOL_VERSION = 1
"""Version of the message formats in docs/protocol.md; carried as ``v`` in every message."""

# Why a message was rejected.  Status counters carry one entry per reason.
REASONS = (
    "oversized",        # longer than the configured limit
    "malformed",        # not decodable as msgpack
    "bad_message",      # decodable, but not the documented structure (not a map, missing or unknown keys)
    "bad_version",      # "v" is not the protocol version
    "wrong_type",       # a value is not a number (strings, bools, lists, maps, nil)
    "unknown_signal",   # no plant input of that name
    "not_finite",       # NaN or +-inf
    "out_of_range",     # outside the input's declared [min, max]
    "not_allowed",      # an integer input given a fraction, or a value not in its allowed set
    "scenario_active",  # the inputs are driven by a loaded scenario
)

MAX_SIGNALS_PER_COMMAND = 256


class ProtocolError(ValueError):
    """A message that does not follow docs/protocol.md; ``reason`` is one of :data:`REASONS` (or a control error code)."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason
        self.message = message


def schema_id(names: Iterable[str]) -> int:
    """CRC-32 of the newline-joined output names: identifies the order of an array-format state message."""
    return zlib.crc32("\n".join(names).encode("utf-8")) & 0xFFFFFFFF


# ---------------------------------------------------------------------------
# state messages
# ---------------------------------------------------------------------------
class StateEncoder:
    """Fixed-layout msgpack encoder of the state message.

    The message is the map ``{"v", "seq", "tick", "t", "ack", "wd", "st",
    "schema", "y"}`` (see docs/protocol.md); ``y`` is either a map of output
    name -> float64 (``fmt="map"``) or an array of float64 in the plant's
    declared output order (``fmt="array"``).  Every variable field has a
    fixed-width encoding (uint64, int64, float64, bool), so its bytes sit at a
    fixed offset and are written in place.

    Parameters
    ----------
    output_names
        The plant's output signal names, in declared order.
    fmt
        ``"map"`` (self-describing, the default) or ``"array"`` (compact).
    """

    def __init__(self, output_names: Sequence[str], fmt: str = "map"):
        if fmt not in ("map", "array"):
            raise ValueError(f"state format must be 'map' or 'array', got {fmt!r}")
        self.fmt = fmt
        self.names = tuple(output_names)
        self.n = len(self.names)
        self.schema = schema_id(self.names)
        pk = msgpack.Packer()
        parts: list[bytes] = [pk.pack_map_header(9)]
        slots: dict[str, int] = {}

        def key(name: str) -> None:
            parts.append(pk.pack(name))

        def fixed(tag: int, width: int, field: str) -> None:
            parts.append(bytes([tag]))
            slots[field] = sum(len(p) for p in parts)
            parts.append(bytes(width))

        key("v")
        parts.append(pk.pack(PROTOCOL_VERSION))
        key("seq")
        fixed(0xCF, 8, "seq")       # uint 64
        key("tick")
        fixed(0xCF, 8, "tick")
        key("t")
        fixed(0xCB, 8, "t")         # float 64
        key("ack")
        fixed(0xCF, 8, "ack")
        key("wd")
        slots["wd"] = sum(len(p) for p in parts)
        parts.append(b"\xc2")       # false; true is 0xc3
        key("st")
        fixed(0xD3, 8, "st")        # int 64
        key("schema")
        fixed(0xCE, 4, "schema")    # uint 32
        key("y")
        y_pos: list[int] = []
        if fmt == "map":
            parts.append(pk.pack_map_header(self.n))
            for name in self.names:
                key(name)
                parts.append(b"\xcb")
                y_pos.append(sum(len(p) for p in parts))
                parts.append(bytes(8))
        else:
            parts.append(pk.pack_array_header(self.n))
            for _ in self.names:
                parts.append(b"\xcb")
                y_pos.append(sum(len(p) for p in parts))
                parts.append(bytes(8))
        template = b"".join(parts)
        self.buffer = np.frombuffer(bytearray(template), dtype=np.uint8)
        self.size = len(template)
        buf = self.buffer.data

        def view(field: str, dtype: str) -> np.ndarray:
            return np.ndarray((1,), dtype=dtype, buffer=buf, offset=slots[field])

        self._seq = view("seq", ">u8")
        self._tick = view("tick", ">u8")
        self._t = view("t", ">f8")
        self._ack = view("ack", ">u8")
        self._st = view("st", ">i8")
        self._wd_off = slots["wd"]
        np.ndarray((1,), dtype=">u4", buffer=buf, offset=slots["schema"])[0] = self.schema
        # Outputs: a strided view when the slots are evenly spaced (array
        # format), else a byte scatter through a big-endian scratch array.
        self._y_strided = None
        self._y_scratch = np.zeros(self.n, dtype=">f8")
        self._y_bytes = self._y_scratch.view(np.uint8)
        if self.n and (self.n == 1 or len(set(np.diff(y_pos))) == 1):
            stride = y_pos[1] - y_pos[0] if self.n > 1 else 9
            self._y_strided = np.ndarray((self.n,), dtype=">f8", buffer=buf, offset=y_pos[0], strides=(stride,))
        self._y_index = (np.asarray(y_pos, dtype=np.intp)[:, None] + np.arange(8, dtype=np.intp)).ravel()
        self.view = memoryview(self.buffer)

    def encode(self, seq: int, tick: int, t: float, ack: int, wd: bool, status: int, y: np.ndarray) -> memoryview:
        """Write one state message into the template and return it (valid until the next call).

        Called in the real-time loop.
        """
        self._seq[0] = seq
        self._tick[0] = tick
        self._t[0] = t
        self._ack[0] = ack
        self._st[0] = status
        self.buffer[self._wd_off] = 0xC3 if wd else 0xC2
        if self._y_strided is not None:
            self._y_strided[:] = y
        else:
            np.copyto(self._y_scratch, y)
            self.buffer[self._y_index] = self._y_bytes
        return self.view


def decode_state(payload: bytes, names: Sequence[str] | None = None) -> dict:
    """Decode a state message; with ``names``, an array-format ``y`` becomes a name -> value map."""
    msg = msgpack.unpackb(payload, raw=False)
    if names is not None and isinstance(msg.get("y"), list):
        msg["y"] = dict(zip(names, msg["y"]))
    return msg


# ---------------------------------------------------------------------------
# command messages
# ---------------------------------------------------------------------------
def check_input(sig: Signal, value: Any) -> tuple[str, str] | None:
    """``(reason, message)`` when ``value`` is not acceptable for input ``sig``, else None.

    Stricter than :meth:`Signal.check` on types: booleans are not numbers here.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "wrong_type", f"{sig.name}: expected a number, got {_type_name(value)}"
    try:
        v = float(value)
    except OverflowError:
        return "out_of_range", f"{sig.name}: {value} outside [{sig.lo:g}, {sig.hi:g}] {sig.unit}"
    if not math.isfinite(v):
        return "not_finite", f"{sig.name}: not finite ({value})"
    if v < sig.lo or v > sig.hi:
        return "out_of_range", f"{sig.name}: {value} outside [{sig.lo:g}, {sig.hi:g}] {sig.unit}"
    if sig.integer and v != round(v):
        return "not_allowed", f"{sig.name}: must be a whole number, got {value}"
    if sig.allowed and v not in sig.allowed:
        return "not_allowed", f"{sig.name}: {value} is not one of {', '.join(f'{a:g}' for a in sig.allowed)}"
    return None


def _type_name(value: Any) -> str:
    if value is None:
        return "nil"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (bytes, bytearray)):
        return "binary"
    if isinstance(value, (list, tuple)):
        return "array"
    if isinstance(value, dict):
        return "map"
    return type(value).__name__


class InputValidator:
    """Validates partial input updates ``{name: value}`` against the plant's declared inputs.

    Validated updates land in preallocated index/value arrays, so applying
    them is a short loop over numbers.
    """

    def __init__(self, inputs: Sequence[Signal]):
        self.inputs = tuple(inputs)
        self.index = {s.name: k for k, s in enumerate(self.inputs)}
        self.idx = np.zeros(max(len(self.inputs), 1), dtype=np.int64)
        self.val = np.zeros(max(len(self.inputs), 1), dtype=np.float64)
        self.count = 0

    def validate(self, updates: Any) -> tuple[str, str] | None:
        """Check ``updates`` (a map name -> number); on success fill ``idx/val/count`` and return None.

        A name given twice keeps its last value.  Called in the real-time loop
        (for command messages).
        """
        if not isinstance(updates, dict):
            return "bad_message", f"'set' must be a map of signal name to number, got {_type_name(updates)}"
        if len(updates) > MAX_SIGNALS_PER_COMMAND:
            return "bad_message", f"'set' has {len(updates)} entries, more than {MAX_SIGNALS_PER_COMMAND}"
        n = 0
        index = self.index
        for name, value in updates.items():
            k = index.get(name) if isinstance(name, str) else None
            if k is None:
                if not isinstance(name, str):
                    return "bad_message", f"signal names must be strings, got {_type_name(name)}"
                return "unknown_signal", f"no input signal {name!r}; inputs are {', '.join(self.index)}"
            err = check_input(self.inputs[k], value)
            if err is not None:
                return err
            self.idx[n] = k
            self.val[n] = value
            n += 1
        self.count = n
        return None

    def apply(self, u: np.ndarray, u_rate: np.ndarray) -> None:
        """Write the last validated update into the plant inputs (held constant: rate 0).

        Called in the real-time loop.
        """
        for j in range(self.count):
            k = self.idx[j]
            u[k] = self.val[j]
            u_rate[k] = 0.0

    def as_dict(self) -> dict[str, float]:
        return {self.inputs[int(self.idx[j])].name: float(self.val[j]) for j in range(self.count)}


class CommandDecoder:
    """Decodes and validates command messages ``{"v": 1, "seq": n, "set": {name: value}}``.

    Parameters
    ----------
    inputs
        The plant's input signals.
    max_bytes
        Longer messages are rejected as ``oversized`` before decoding.
    """

    _KEYS = frozenset(("v", "seq", "set"))

    def __init__(self, inputs: Sequence[Signal], max_bytes: int = 65536):
        self.validator = InputValidator(inputs)
        self.max_bytes = int(max_bytes)
        self.seq = 0
        # msgpack limits keep a hostile message from allocating much before we reject it
        self._unpack_kw = dict(raw=False, strict_map_key=True, max_str_len=self.max_bytes, max_bin_len=self.max_bytes,
                               max_array_len=MAX_SIGNALS_PER_COMMAND, max_map_len=MAX_SIGNALS_PER_COMMAND,
                               max_ext_len=0)

    def decode(self, payload: bytes) -> tuple[str, str] | None:
        """Decode and validate one command; on success the update waits in ``validator`` and ``seq`` is set.

        Returns ``(reason, message)`` for a rejected message.  Called in the
        real-time loop.
        """
        if len(payload) > self.max_bytes:
            return "oversized", f"message of {len(payload)} bytes exceeds the limit of {self.max_bytes}"
        try:
            msg = msgpack.unpackb(payload, **self._unpack_kw)
        except Exception as exc:  # msgpack raises several unrelated types for bad input
            return "malformed", f"not valid msgpack ({type(exc).__name__})"
        if not isinstance(msg, dict):
            return "bad_message", f"a command must be a map, got {_type_name(msg)}"
        v = msg.get("v")
        if type(v) is not int or v != PROTOCOL_VERSION:
            return "bad_version", f"protocol version {v!r} is not supported (this server speaks {PROTOCOL_VERSION})"
        for k in msg:
            if k not in self._KEYS:
                return "bad_message", f"unknown key {k!r} in a command (keys: v, seq, set)"
        seq = msg.get("seq", 0)
        if isinstance(seq, bool) or not isinstance(seq, int) or not 0 <= seq < 2 ** 64:
            return "bad_message", f"'seq' must be an unsigned integer, got {_type_name(seq)} {seq!r}"
        if "set" not in msg:
            return "bad_message", "a command needs a 'set' map of signal name to value"
        err = self.validator.validate(msg["set"])
        if err is not None:
            return err
        self.seq = seq
        return None


def decode_request(payload: bytes, max_bytes: int) -> dict:
    """Decode a control request; raises :class:`ProtocolError` with the reason."""
    if len(payload) > max_bytes:
        raise ProtocolError("oversized", f"request of {len(payload)} bytes exceeds the limit of {max_bytes}")
    try:
        msg = msgpack.unpackb(payload, raw=False, strict_map_key=True, max_ext_len=0)
    except Exception as exc:
        raise ProtocolError("malformed", f"not valid msgpack ({type(exc).__name__})") from None
    if not isinstance(msg, dict):
        raise ProtocolError("bad_message", f"a request must be a map, got {_type_name(msg)}")
    v = msg.get("v")
    if type(v) is not int or v != PROTOCOL_VERSION:
        raise ProtocolError("bad_version", f"protocol version {v!r} is not supported (this server speaks "
                            f"{PROTOCOL_VERSION})")
    cmd = msg.get("cmd")
    if not isinstance(cmd, str):
        raise ProtocolError("bad_message", "a request needs a 'cmd' string")
    return msg


def encode(obj: Any) -> bytes:
    """msgpack with float64 floats and str/bin kept apart (the protocol's encoding)."""
    return msgpack.packb(obj, use_bin_type=True, use_single_float=False)


# ---------------------------------------------------------------------------
# rejects: counted always, logged rate-limited outside the tick
# ---------------------------------------------------------------------------
class RejectLog:
    """Counts rejected messages by reason and logs them with the reason, at most ``max_per_s`` lines a second.

    :meth:`reject` only counts and stores the text (it may be called in the
    tick); :meth:`flush` writes the log lines and is called between ticks.
    """

    def __init__(self, logger: logging.Logger, what: str, reasons: Iterable[str] = REASONS,
                 max_per_s: float = 10.0, keep: int = 8):
        self.logger = logger
        self.what = what
        self.counts = {r: 0 for r in reasons}
        self.total = 0
        self.last: list[str] = []
        self._keep = keep
        self._pending: list[str] = []
        self._suppressed = 0
        self._max_per_s = max_per_s
        self._window_start = 0.0
        self._window_lines = 0

    def reject(self, reason: str, message: str) -> None:
        """Count one rejected message.  Called in the real-time loop (error path only)."""
        self.counts[reason] = self.counts.get(reason, 0) + 1
        self.total += 1
        text = f"{reason}: {message}"
        if len(self.last) >= self._keep:
            del self.last[0]
        self.last.append(text)
        if len(self._pending) < 64:
            self._pending.append(text)
        else:
            self._suppressed += 1

    def flush(self) -> None:
        """Log pending rejects, rate-limited.  Called between ticks."""
        if not self._pending and not self._suppressed:
            return
        now = time.monotonic()
        if now - self._window_start >= 1.0:
            if self._suppressed:
                self.logger.warning("%s: %d more rejected messages not logged (see the status counters)",
                                    self.what, self._suppressed)
                self._suppressed = 0
            self._window_start = now
            self._window_lines = 0
        while self._pending and self._window_lines < self._max_per_s:
            self.logger.warning("%s rejected: %s", self.what, self._pending.pop(0))
            self._window_lines += 1
        self._suppressed += len(self._pending)
        self._pending.clear()

    def status(self) -> dict:
        return {"total": self.total, "by_reason": dict(self.counts), "last": list(self.last)}
