"""The command and control vocabulary of the server, independent of the transport (docs/protocol.md).

What a client may ask and what it is told back, whatever carries the bytes:

* :data:`PROTOCOL_VERSION`, carried as ``v`` in every message;
* :data:`REASONS`, why a command message is rejected (every transport's
  status counters list them), and :data:`ERROR_CODES`, the codes of failed
  control replies (a superset: the command reasons plus the control ones);
* :class:`ProtocolError`, the typed error of a message that does not follow
  the protocol, and :data:`COMMAND_ERRORS`, every error a rejected command
  raises (``ProtocolError`` for the message, the plant's
  :class:`~plant_models.errors.InputError` for a value); both carry
  ``reason`` and ``message``;
* :class:`InputValidator`, the one check of a partial input update
  ``{name: value}`` (each value through the plant's ``Signal.validate``);
* :func:`error_reply`, the reply to a failed control request, and
  :func:`schema_id`, the identifier of the output order of a state message;
* :class:`RejectLog`, rejected messages counted by reason and logged
  rate-limited outside the tick.

The msgpack encoding of these messages for ZeroMQ is in
:mod:`io_adapters.zmq.codec`; the server's control handler and every
transport import their vocabulary from here, so no upper floor defines it.
"""

from __future__ import annotations

import abc

import logging
import time
import zlib
from typing import TYPE_CHECKING, Any, Iterable, Sequence

import numpy as np

from plant_models.errors import INPUT_REASONS, GearboxHilError, InputError
from plant_models.plant import wire_type_name

if TYPE_CHECKING:  # pragma: no cover
    from plant_models.plant import Signal

PROTOCOL_VERSION = 1
"""Version of the message formats in docs/protocol.md; carried as ``v`` in every message."""

PROTOCOL_REVISION = 1
"""Additions to version 1 that change none of its messages, reported by ``ping`` and ``describe`` as ``revision``.

0 (no ``revision`` key): the first servers of version 1.  1: the state
socket answers a ``hello/<token>`` subscription, so a subscriber knows when
its subscriptions are live (docs/protocol.md, section 3.3)."""

# Why a command message was rejected.  Status counters carry one entry per reason, in this order.
REASONS = (
    "oversized",        # longer than the configured limit
    "malformed",        # not decodable
    "bad_message",      # decodable, but not the documented structure (not a map, missing or unknown keys)
    "bad_version",      # "v" is not the protocol version
    "wrong_type",       # a value is not a number (strings, bools, lists, maps, nil)
    "unknown_signal",   # no plant input of that name
    "not_finite",       # NaN or +-inf
    "out_of_range",     # outside the input's declared [min, max]
    "not_allowed",      # an integer input given a fraction, or a value not in its allowed set
    "scenario_active",  # the inputs are driven by a loaded scenario
)

# Error codes of failed control replies (docs/protocol.md section 5.3): the command reasons above plus
# the control channel's own.  Status counters of control errors carry one entry per code, in this order.
ERROR_CODES = ("oversized", "malformed", "bad_message", "bad_version", "unknown_command", "bad_request",
               "wrong_mode", "bad_state", "unknown_signal", "wrong_type", "not_finite", "out_of_range",
               "not_allowed", "scenario_active", "param_error", "scenario_error", "fault_error", "snapshot_error",
               "internal")

assert set(INPUT_REASONS) <= set(REASONS) <= set(ERROR_CODES)

MAX_SIGNALS_PER_COMMAND = 256
"""Most entries of a map in a message (an input map: a command's ``set``, a request's ``set`` / ``inputs``).

Counted as sent by the decoder (:func:`io_adapters.zmq.codec.unpack_message`:
a name repeated 257 times is 257 entries); :class:`InputValidator` checks the
same number of keys for maps made in-process."""


class ProtocolError(GearboxHilError, ValueError):
    """A message that does not follow docs/protocol.md; ``reason`` is one of :data:`REASONS` (or an error code)."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason
        self.message = message


COMMAND_ERRORS = (ProtocolError, InputError)
"""Every error a rejected command raises; catch this tuple and count ``exc.reason`` with ``exc.message``."""


def schema_id(names: Iterable[str]) -> int:
    """CRC-32 of the newline-joined output names: identifies the order of an array-format state message."""
    return zlib.crc32("\n".join(names).encode("utf-8")) & 0xFFFFFFFF


def error_reply(code: str, message: str, request: Any = None) -> dict:
    """The reply to a control request that failed (also for requests that could not be decoded).

    ``id`` and ``cmd`` of ``request`` are echoed when they are valid (an
    integer or string id, a string command).
    """
    rep: dict = {"v": PROTOCOL_VERSION, "ok": False, "error": {"code": code, "message": message}}
    if isinstance(request, dict):
        rid = request.get("id")
        if rid is None or isinstance(rid, (int, str)) and not isinstance(rid, bool):
            rep["id"] = rid
        if isinstance(request.get("cmd"), str):
            rep["cmd"] = request["cmd"]
    return rep


class InputValidator:
    """Validates partial input updates ``{name: value}`` against the plant's declared inputs.

    Each value goes through its input's ``Signal.validate`` (the plant's one
    rule for an acceptable value).  Validated updates land in preallocated
    index/value arrays, so applying them is a short loop over numbers.

    Parameters
    ----------
    inputs
        The plant's input signals, in declared order.
    """

    def __init__(self, inputs: Sequence["Signal"]):
        self.inputs = tuple(inputs)
        self.index = {s.name: k for k, s in enumerate(self.inputs)}
        self.idx = np.zeros(max(len(self.inputs), 1), dtype=np.int64)
        self.val = np.zeros(max(len(self.inputs), 1), dtype=np.float64)
        self.count = 0

    def validate(self, updates: Any) -> None:
        """Check ``updates`` (a map name -> number) whole; on success fill ``idx/val/count``.

        A name given twice keeps its last value.  On failure ``count`` is 0,
        so nothing waits to be applied.  Called in the real-time loop (for
        command messages).

        Raises
        ------
        ProtocolError
            ``bad_message`` (not a map, too many entries, a name that is not
            a string) or ``unknown_signal``.
        InputError
            A value the input does not accept (``wrong_type``,
            ``not_finite``, ``out_of_range``, ``not_allowed``).
        """
        self.count = 0
        if not isinstance(updates, dict):
            raise ProtocolError("bad_message", "'set' must be a map of signal name to number, got "
                                f"{wire_type_name(updates)}")
        if len(updates) > MAX_SIGNALS_PER_COMMAND:
            raise ProtocolError("bad_message", f"'set' has {len(updates)} entries, more than "
                                f"{MAX_SIGNALS_PER_COMMAND}")
        n = 0
        index = self.index
        for name, value in updates.items():
            k = index.get(name) if isinstance(name, str) else None
            if k is None:
                if not isinstance(name, str):
                    raise ProtocolError("bad_message", f"signal names must be strings, got {wire_type_name(name)}")
                raise ProtocolError("unknown_signal", f"no input signal {name!r}; inputs are {', '.join(index)}")
            self.val[n] = self.inputs[k].validate(value)
            self.idx[n] = k
            n += 1
        self.count = n

    def apply(self, u: np.ndarray, u_rate: np.ndarray) -> None:
        """Write the last validated update into the plant inputs (held constant: rate 0).

        Called in the real-time loop.
        """
        for j in range(self.count):
            k = self.idx[j]
            u[k] = self.val[j]
            u_rate[k] = 0.0

    def as_dict(self) -> dict[str, float]:
        """The last validated update by name (not for the tick)."""
        return {self.inputs[int(self.idx[j])].name: float(self.val[j]) for j in range(self.count)}


class PendingReply(abc.ABC):
    """A control reply that is not ready yet: work that must not run on the loop's thread (reading a file).

    A control handler may return one instead of a reply map; the transport
    keeps the request's return address, asks :meth:`ready` between ticks and
    sends :meth:`reply` once it is.  ``ready`` and ``reply`` are called on the
    loop's thread; ``reply`` never raises.
    """

    @abc.abstractmethod
    def ready(self) -> bool:
        """The reply can be sent now."""

    @abc.abstractmethod
    def reply(self) -> dict:
        """The reply map (called once :meth:`ready` is true)."""


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
        """``total``, ``by_reason`` (every reason, zeros included) and ``last`` (the newest texts)."""
        return {"total": self.total, "by_reason": dict(self.counts), "last": list(self.last)}


__all__ = ["PROTOCOL_VERSION", "PROTOCOL_REVISION", "REASONS", "ERROR_CODES", "MAX_SIGNALS_PER_COMMAND",
           "ProtocolError", "COMMAND_ERRORS", "InputError", "schema_id", "error_reply", "wire_type_name", "InputValidator",
           "RejectLog", "PendingReply"]
