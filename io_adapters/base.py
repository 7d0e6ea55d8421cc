"""The one small interface every transport implements (python-can's BusABC in spirit).

The real-time loop calls, each tick, ``read`` on every adapter, steps the
plant, then ``write`` on every adapter (read -> update -> write).  Both must
return quickly and never block: receiving happens in the background into a
latest-value mailbox (or with non-blocking polls), and sending uses
non-blocking calls.  All name look-ups (signal names to plant indices, DBC
signals, message layouts) happen once in ``open``.

Adapters are chosen by name in the I/O config (``[[adapters]] type = "zmq"``)
from the explicit table :data:`ADAPTERS` through :func:`create_adapter`.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Callable

from plant_models.plant import Plant

# Slots of ``LoopContext.tick_info`` (int64), written by the loop, read by adapters in read/write.
TI_WATCHDOG = 0  # 1 while the command watchdog is tripped
TI_STATUS = 1  # status word of the last plant step
TI_SCENARIO = 2  # 1 while a loaded scenario drives the inputs (commands are rejected, reason scenario_active)
TI_OVERRUNS = 3  # the loop's overrun count (copied there whenever the loop counts an overrun)
N_TICK_INFO = 4


@dataclass
class LoopContext:
    """What the loop shares with its adapters.

    ``feed_watchdog(now_ns)`` is called by an adapter when it applied a valid
    command (it keeps the command watchdog from tripping).  ``status()``
    returns the loop's status dict (timing telemetry, watchdog, counters), for
    adapters that publish it.  ``control(request)`` executes a control request
    (start/stop/step/...) and returns the reply dict; adapters that carry a
    control channel forward requests to it.

    ``tick_info`` is a small int64 array the loop updates every tick, cheap
    for adapters to read in ``read``/``write``: ``[0]`` 1 while the command
    watchdog is tripped, ``[1]`` the status word of the last plant step,
    ``[2]`` 1 while a loaded scenario drives the inputs (commands are then
    rejected with reason ``scenario_active``).  ``mode`` is the loop mode
    (``realtime``, ``lockstep`` or ``afap``); in lockstep and afap the
    ``now_ns`` the loop passes is simulated time.
    """

    period_s: float
    feed_watchdog: Callable[[int], None]
    status: Callable[[], dict]
    control: Callable[[dict], dict] | None = None
    log: Any = None
    extra: dict = field(default_factory=dict)
    tick_info: Any = None
    mode: str = "realtime"


class AdapterError(RuntimeError):
    """An adapter could not be opened (bad endpoint, missing interface, bad DBC, ...)."""


class UnknownAdapterType(AdapterError):
    """An I/O config asks for an adapter type that is not in :data:`ADAPTERS`."""


class Adapter(ABC):
    """A transport between the plant's ports and the outside world."""

    type_name: str = ""

    def __init__(self, name: str, options: dict):
        self.name = name
        self.options = options

    @abstractmethod
    def open(self, plant: Plant, ctx: LoopContext) -> None:
        """Resolve signal mappings, open sockets/buses, start background receivers."""

    @abstractmethod
    def read(self, tick: int, now_ns: int) -> None:
        """Apply the newest valid commands to ``plant.u``.  Non-blocking.  Called in the real-time loop."""

    @abstractmethod
    def write(self, tick: int, now_ns: int) -> None:
        """Publish ``plant.y`` (if due this tick).  Non-blocking.  Called in the real-time loop."""

    @abstractmethod
    def close(self) -> None:
        """Stop background work, flush recordings, release resources.  Idempotent."""

    def poll_control(self, now_ns: int) -> None:
        """Serve pending control requests (called between ticks, outside the timed part)."""

    def wait_handles(self) -> list:
        """Sockets or file descriptors the loop may wait on while idle (paused, stopped, lockstep).

        When one becomes readable the loop calls :meth:`poll_control` at once
        instead of after its idle timeout.  Accepts what ``zmq.Poller``
        accepts: zmq sockets and plain file descriptors.
        """
        return []

    def publish_events(self, events: list[dict]) -> None:
        """Plant events (clutch stick/breakaway/reversal) since the last call; called between ticks."""

    def status(self) -> dict:
        """Counters for the status channel (received, rejected by reason, sent, ...)."""
        return {}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


# type name in the I/O config -> (module, class); the module is imported when a config asks for the type
ADAPTERS: dict[str, tuple[str, str]] = {
    "zmq": ("io_adapters.zmq.adapter", "ZmqAdapter"),
    "can": ("io_adapters.can.adapter", "CanAdapter"),
}

_ADAPTERS: dict[str, Callable[[str, dict], Adapter]] = {}


def register_adapter(type_name: str, factory: Callable[[str, dict], Adapter]) -> None:
    _ADAPTERS[type_name] = factory


def adapter_types() -> list[str]:
    return sorted(set(ADAPTERS) | set(_ADAPTERS))


def create_adapter(type_name: str, name: str, options: dict) -> Adapter:
    """An adapter of type ``type_name``; raises :class:`UnknownAdapterType` listing every known type."""
    if type_name in _ADAPTERS:
        return _ADAPTERS[type_name](name, options)
    if type_name not in ADAPTERS:
        raise UnknownAdapterType(f"unknown adapter type {type_name!r}; known types: {', '.join(adapter_types())}")
    module, cls = ADAPTERS[type_name]
    return getattr(importlib.import_module(module), cls)(name, options)
