"""Transports between the plant's ports and the outside world (the middle floor).

Modules, by what they hold:

* ``base``: the :class:`Adapter` interface with its per-tick template, the
  typed :class:`LoopContext` and its ``tick_info`` slots (``TI_*``), the
  adapter table :data:`ADAPTERS` and :func:`create_adapter`;
* ``declaration``: what an adapter type declares before it opens (its
  ``serve`` options, its fault kinds), read from light modules
  (``zmq/declaration.py``, ``can/declaration.py``) that import no transport;
* ``protocol``: the transport-neutral command and control vocabulary
  (``PROTOCOL_VERSION``, rejection ``REASONS``, ``ERROR_CODES``,
  ``error_reply``, ``schema_id``, the input check :class:`InputValidator`);
* ``zmq``: the ZeroMQ transport (``adapter``, ``declaration``, ``codec`` =
  the msgpack encoding, ``client`` = the Python client ``HilClient``);
* ``can``: the CAN transport (``adapter``, ``declaration``, ``message_set`` = DBC + mapping,
  ``layouts`` = DBC signals to tables, ``frames`` = the compiled frame codec,
  ``e2e``, ``share``, ``recorder``).

The names of ``base`` and ``protocol`` are handed on here.  They are imported
on first use, so that importing a light module such as the client does not
load the plant models.  This floor imports from ``plant_models`` only, never
from ``server``.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    **{name: ".base" for name in (
        "Adapter", "AdapterError", "UnknownAdapterType", "LoopContext", "CommandCounts", "ADAPTERS",
        "register_adapter", "adapter_types", "create_adapter", "TI_WATCHDOG", "TI_STATUS", "TI_SCENARIO",
        "TI_OVERRUNS")},
    **{name: ".protocol" for name in (
        "PROTOCOL_VERSION", "REASONS", "ERROR_CODES", "ProtocolError", "COMMAND_ERRORS", "error_reply",
        "schema_id", "InputValidator")},
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
