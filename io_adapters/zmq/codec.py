"""The msgpack encoding of the ZeroMQ protocol (docs/protocol.md), compiled once at start-up.

The vocabulary (version, rejection reasons, error codes, the input check) is
transport-neutral and lives in :mod:`io_adapters.protocol`; this module turns
it into msgpack bytes and back.  Resolved from the plant's declared signals
when the server starts (cantools-style), so the real-time tick only packs
and unpacks:

* :class:`StateEncoder` builds the byte template of a state message once;
  each tick writes the sequence number, tick, time and outputs into fixed
  slots of that template (float64 / uint64 in big-endian, as msgpack
  requires).  The result is ordinary msgpack that any decoder reads.
  :meth:`StateEncoder.encode_row` fills it from a row of the state ring
  (:mod:`plant_models.run.ring`) in one compiled call, which is how the server
  publishes; :meth:`StateEncoder.encode` fills it from Python values.
* :class:`CommandDecoder` decodes one command message (a partial update of
  input signals by name) and validates every value against the plant's
  declared range before anything is applied (raising the typed errors of
  :data:`~io_adapters.protocol.COMMAND_ERRORS`).  A message is applied whole
  or not at all.
* :func:`decode_request`, :func:`encode` and :func:`decode_state` for control
  requests, replies and clients; :func:`unpack_message`, the decoding step
  of commands and control requests alike (one size rule for their maps).

Why ``StateEncoder.__init__`` is longer than 80 lines: it lays out the
state message's msgpack bytes once (a fixed template with the header, every
output's float slot and the status fields at known offsets), so that the
encoder only copies numbers into it between ticks; the template's building
steps and their offsets must stay together to stay consistent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

import msgpack
import numpy as np
from numba import njit

from plant_models.contract.columns import Columns

from ..protocol import (COMMAND_ERRORS, MAX_SIGNALS_PER_COMMAND, PROTOCOL_VERSION, InputValidator, ProtocolError,
                        schema_id, wire_type_name)

if TYPE_CHECKING:  # pragma: no cover
    from plant_models.plant import Plant, Signal


# ---------------------------------------------------------------------------
# state messages
# ---------------------------------------------------------------------------
# slots of StateEncoder.layout (int64): byte offsets of the fixed fields in the template, then the outputs
STATE_LAYOUT = Columns("StateEncoder.layout's slots (int64)", (
    ("LAY_SEQ", "byte offset of seq"),
    ("LAY_TICK", "byte offset of tick"),
    ("LAY_T", "byte offset of t"),
    ("LAY_ACK", "byte offset of ack"),
    ("LAY_ST", "byte offset of the status word"),
    ("LAY_WD", "byte offset of the watchdog flag"),
    ("LAY_N", "number of outputs"),
    ("LAY_FLT", "byte offset of the active fault count"),
    ("LAY_Y", "byte offset of output j's 8 bytes at LAY_Y + j", 0),
))
globals().update(STATE_LAYOUT.constants())  # LAY_SEQ = 0 .. LAY_Y = 8


@njit(cache=True)
def _put_be64(buf, off, bits):
    for b in range(8):
        buf[off + b] = (bits >> (56 - 8 * b)) & 0xFF


@njit("void(uint8[::1], int64[::1], float64[::1], int64[::1], int64, int64[:, ::1], float64[:, ::1], int64, int64, "
      "int64, int64, int64, int64, int64, int64)", cache=True)
def pack_state_row(buf, lay, scratch_f, scratch_i, seq, ints, floats, j, c_tick, c_wd, c_st, c_ack, f_t, f_y, c_flt):
    """Write row ``j`` of a state-ring copy into the template ``buf`` (columns given by index; ``c_ack``,
    ``c_flt`` < 0: 0).

    Not called in the tick: the publisher calls it between ticks.
    """
    _put_be64(buf, lay[LAY_SEQ], seq)  # noqa: F821
    _put_be64(buf, lay[LAY_TICK], ints[j, c_tick])  # noqa: F821
    scratch_f[0] = floats[j, f_t]
    _put_be64(buf, lay[LAY_T], scratch_i[0])  # noqa: F821
    _put_be64(buf, lay[LAY_ACK], ints[j, c_ack] if c_ack >= 0 else 0)  # noqa: F821
    _put_be64(buf, lay[LAY_ST], ints[j, c_st])  # noqa: F821
    buf[lay[LAY_WD]] = 0xC3 if ints[j, c_wd] != 0 else 0xC2  # noqa: F821
    _put_be64(buf, lay[LAY_FLT], ints[j, c_flt] if c_flt >= 0 else 0)  # noqa: F821
    for k in range(lay[LAY_N]):  # noqa: F821
        scratch_f[0] = floats[j, f_y + k]
        _put_be64(buf, lay[LAY_Y + k], scratch_i[0])  # noqa: F821


def _state_template(names: Sequence[str], fmt: str) -> tuple[bytes, dict[str, int], list[int]]:
    """The state message's bytes with every variable field zero, the byte offset of each field (``slots``) and of
    each output's float64 (``y_pos``, in declared order): :class:`StateEncoder` writes the values in place."""
    pk = msgpack.Packer()
    parts: list[bytes] = [pk.pack_map_header(10)]
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
    key("faults")
    fixed(0xCF, 8, "faults")    # uint 64: the number of active injected faults
    key("schema")
    fixed(0xCE, 4, "schema")    # uint 32
    key("y")
    y_pos: list[int] = []
    if fmt == "map":
        parts.append(pk.pack_map_header(len(names)))
        for name in names:
            key(name)
            parts.append(b"\xcb")
            y_pos.append(sum(len(p) for p in parts))
            parts.append(bytes(8))
    else:
        parts.append(pk.pack_array_header(len(names)))
        for _ in names:
            parts.append(b"\xcb")
            y_pos.append(sum(len(p) for p in parts))
            parts.append(bytes(8))
    return b"".join(parts), slots, y_pos


class StateEncoder:
    """Fixed-layout msgpack encoder of the state message.

    The message is the map ``{"v", "seq", "tick", "t", "ack", "wd", "st",
    "faults", "schema", "y"}`` (see docs/protocol.md); ``y`` is either a map of output
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
        template, slots, y_pos = _state_template(self.names, fmt)
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
        self._flt = view("faults", ">u8")
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
        self.layout = np.zeros(LAY_Y + self.n, dtype=np.int64)  # noqa: F821
        for slot, field in ((LAY_SEQ, "seq"), (LAY_TICK, "tick"), (LAY_T, "t"), (LAY_ACK, "ack"), (LAY_ST, "st"),  # noqa: F821
                            (LAY_WD, "wd"), (LAY_FLT, "faults")):  # noqa: F821
            self.layout[slot] = slots[field]
        self.layout[LAY_N] = self.n  # noqa: F821
        self.layout[LAY_Y:] = y_pos  # noqa: F821
        self._scratch_f = np.zeros(1)
        self._scratch_i = self._scratch_f.view(np.int64)
        self._columns = (0, 0, 0, -1, 0, 0, -1)

    def bind_columns(self, c_tick: int, c_wd: int, c_st: int, c_ack: int, f_t: int, f_y: int,
                     c_faults: int = -1) -> None:
        """Where :meth:`encode_row` finds the fields in a row: int columns tick, watchdog, status, ack (-1: none);
        float columns time and output 0 (the outputs follow in declared order); int column of the number of
        active faults (-1: none)."""
        self._columns = (int(c_tick), int(c_wd), int(c_st), int(c_ack), int(f_t), int(f_y), int(c_faults))

    def encode_row(self, seq: int, ints: np.ndarray, floats: np.ndarray, j: int) -> memoryview:
        """Write row ``j`` of ``ints``/``floats`` (laid out as :meth:`bind_columns` says) as message ``seq``.

        The ``ack`` column holds the uint64 ``seq`` of a command as int64
        bits.  Returns the message (valid until the next call).
        """
        pack_state_row(self.buffer, self.layout, self._scratch_f, self._scratch_i, seq, ints, floats, j,
                       *self._columns)
        return self.view

    def encode(self, seq: int, tick: int, t: float, ack: int, wd: bool, status: int, y: np.ndarray,
               faults: int = 0) -> memoryview:
        """Write one state message into the template and return it (valid until the next call).

        Called in the real-time loop.
        """
        self._seq[0] = seq
        self._tick[0] = tick
        self._t[0] = t
        self._ack[0] = ack
        self._st[0] = status
        self._flt[0] = faults
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

    def __init__(self, inputs: Sequence["Signal"], max_bytes: int = 65536):
        self.validator = InputValidator(inputs)
        self.max_bytes = int(max_bytes)
        self.seq = 0
        # msgpack limits keep a hostile message from allocating much before we reject it; a command holds no
        # array (a value that is one is wrong_type), so arrays get the maps' limit
        self._unpack_kw = dict(max_str_len=self.max_bytes, max_bin_len=self.max_bytes,
                               max_array_len=MAX_SIGNALS_PER_COMMAND)

    def decode(self, payload: bytes) -> None:
        """Decode and validate one command; on success the update waits in ``validator`` and ``seq`` is set.

        Called in the real-time loop.

        Raises
        ------
        ProtocolError
            The message is oversized, not msgpack, not a command map, of
            another protocol version, or names an unknown signal.
        InputError
            A value its input does not accept (from ``Signal.validate``).
        """
        if len(payload) > self.max_bytes:
            raise ProtocolError("oversized", f"message of {len(payload)} bytes exceeds the limit of {self.max_bytes}")
        msg = unpack_message(payload, **self._unpack_kw)
        if not isinstance(msg, dict):
            raise ProtocolError("bad_message", f"a command must be a map, got {wire_type_name(msg)}")
        v = msg.get("v")
        if type(v) is not int or v != PROTOCOL_VERSION:
            raise ProtocolError("bad_version", f"protocol version {v!r} is not supported (this server speaks "
                                f"{PROTOCOL_VERSION})")
        for k in msg:
            if k not in self._KEYS:
                raise ProtocolError("bad_message", f"unknown key {k!r} in a command (keys: v, seq, set)")
        seq = msg.get("seq", 0)
        if isinstance(seq, bool) or not isinstance(seq, int) or not 0 <= seq < 2 ** 64:
            raise ProtocolError("bad_message", f"'seq' must be an unsigned integer, got {wire_type_name(seq)} "
                                f"{seq!r}")
        if "set" not in msg:
            raise ProtocolError("bad_message", "a command needs a 'set' map of signal name to value")
        self.validator.validate(msg["set"])
        self.seq = seq


def unpack_message(payload: bytes, **limits: int) -> Any:
    """Decode a command or a control request with the protocol's rules for its shape.

    The one decoding step of both sockets: every map is counted as sent, so
    a map of more than :data:`~io_adapters.protocol.MAX_SIGNALS_PER_COMMAND`
    entries is ``bad_message`` even when its names repeat (a dict would keep
    one of them); so is a map key that is not a string.  ``limits``: further
    msgpack limits (``max_array_len`` and the like; one exceeded is
    ``bad_message`` too).  Called in the real-time loop (for command messages).

    Raises
    ------
    ProtocolError
        ``malformed`` (not msgpack) or ``bad_message``.
    """
    try:
        return msgpack.unpackb(payload, raw=False, strict_map_key=True, max_ext_len=0,
                               max_map_len=MAX_SIGNALS_PER_COMMAND, **limits)
    except ValueError as exc:
        if "exceeds max_" in str(exc):  # decodable, but more entries than a message may hold
            raise ProtocolError("bad_message", f"more than {MAX_SIGNALS_PER_COMMAND} entries in a map or array "
                                f"({exc})") from None
        if "not allowed for map key" in str(exc):  # decodable, but a name that is not a string
            raise ProtocolError("bad_message", f"map keys (signal names) must be strings ({exc})") from None
        raise ProtocolError("malformed", f"not valid msgpack ({type(exc).__name__})") from None
    except Exception as exc:  # msgpack raises several unrelated types for bad input
        raise ProtocolError("malformed", f"not valid msgpack ({type(exc).__name__})") from None


def decode_request(payload: bytes, max_bytes: int) -> dict:
    """Decode a control request (the maps' size rule of :func:`unpack_message`); raises :class:`ProtocolError`."""
    if len(payload) > max_bytes:
        raise ProtocolError("oversized", f"request of {len(payload)} bytes exceeds the limit of {max_bytes}")
    msg = unpack_message(payload)
    if not isinstance(msg, dict):
        raise ProtocolError("bad_message", f"a request must be a map, got {wire_type_name(msg)}")
    v = msg.get("v")
    if type(v) is not int or v != PROTOCOL_VERSION:
        raise ProtocolError("bad_version", f"protocol version {v!r} is not supported (this server speaks "
                            f"{PROTOCOL_VERSION})")
    cmd = msg.get("cmd")
    if not isinstance(cmd, str):
        raise ProtocolError("bad_message", "a request needs a 'cmd' string")
    return msg


def acceptable_command(plant: "Plant", decoder: CommandDecoder) -> bytes | None:
    """A command message setting one input to its current value, if ``decoder`` accepts it (for rehearsals)."""
    for k, sig in enumerate(plant.inputs):
        msg = encode({"v": PROTOCOL_VERSION, "seq": 1, "set": {sig.name: float(plant.u[k])}})
        try:
            decoder.decode(msg)
        except COMMAND_ERRORS:
            continue
        return msg
    return None


def encode(obj: Any) -> bytes:
    """msgpack with float64 floats and str/bin kept apart (the protocol's encoding)."""
    return msgpack.packb(obj, use_bin_type=True, use_single_float=False)


__all__ = ["StateEncoder", "CommandDecoder", "decode_state", "decode_request", "unpack_message", "acceptable_command",
           "encode"]
