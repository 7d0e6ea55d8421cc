"""The CAN transport (docs/can.md): a DBC message set on any python-can bus.

* ``adapter``: :class:`CanAdapter`, driven by the loop's tick;
* ``message_set``: a DBC file plus the mapping of its signals to plant
  ports, resolved once (:func:`load_message_set`; ``python -m
  io_adapters.can.message_set`` prints the tables of docs/can.md);
* ``layouts``: DBC signals to the flat tables of the frame codec
  (start-up only);
* ``frames``: the compiled frame codec (:class:`FrameCodec` and the kernels
  that check, unpack and pack frames with CRC-8 and alive counters);
* ``e2e``: plain-Python end-to-end protection for the other side of the bus
  (:class:`E2EEncoder`, :class:`E2EDecoder`);
* ``share``: the virtual bus offered to other processes on loopback;
* ``recorder``: BLF/ASC (any python-can format) recording off the real-time thread;
* ``lazy_mf4``: python-can without asammdf (pandas, pyarrow) until a
  recording to ``.mf4`` asks for it; installed here, before anything of
  this package imports python-can.

The public names are handed on here and imported on first use.
"""

from __future__ import annotations

import importlib

from . import lazy_mf4

lazy_mf4.install()

_EXPORTS = {
    "CanAdapter": ".adapter",
    "MessageSet": ".message_set", "load_message_set": ".message_set",
    "FrameCodec": ".frames",
    "E2EEncoder": ".e2e", "E2EDecoder": ".e2e", "crc8_sae_j1850": ".e2e",
    "LoopbackShare": ".share", "ShareError": ".share",
    "FrameRecorder": ".recorder", "RecorderError": ".recorder",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    try:
        module = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    return getattr(importlib.import_module(module, __name__), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
