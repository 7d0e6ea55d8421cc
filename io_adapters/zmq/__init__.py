"""The ZeroMQ transport (docs/protocol.md).

* ``adapter``: :class:`ZmqAdapter`, the server side (state PUB, command
  PULL, control ROUTER), with ``curve`` for CURVE authentication;
* ``codec``: the msgpack encoding of the protocol (:class:`StateEncoder`,
  :class:`CommandDecoder`, ``decode_request``, ``encode``);
* ``client``: :class:`HilClient`, the Python client for controller
  developers and CI scripts (``python -m io_adapters.zmq.client``).

The public names are handed on here and imported on first use, so that the
client does not load the server side.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "ZmqAdapter": ".adapter",
    "StateEncoder": ".codec", "CommandDecoder": ".codec", "decode_state": ".codec", "decode_request": ".codec",
    "encode": ".codec",
    "HilClient": ".client", "State": ".client", "StepResult": ".client", "ServerError": ".client",
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
