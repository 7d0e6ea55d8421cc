"""The one small interface every transport implements (python-can's ``BusABC`` habit).

The real-time loop calls, each tick, ``read`` on every adapter, steps the
plant, writes the state into its state ring (:mod:`plant_models.run.ring`), then
``write`` on every adapter (read -> update -> write).  Both must return
quickly and never block: receiving happens outside the tick (between ticks
in :meth:`Adapter.pump`, or in a background thread) into preallocated rows
or a latest-value mailbox that the tick only copies, and sending uses
non-blocking calls; a transport that turns the state into messages reads the
ring in :meth:`Adapter.pump` between ticks, not in ``write``.  All name
look-ups (signal names to plant indices, DBC signals, message layouts)
happen once in ``open``.

What every transport shares is written here once:

* :meth:`Adapter.read` is a template, like python-can's ``BusABC.recv``
  around ``_recv_internal``: it applies the scenario gate (while a loaded
  scenario drives the inputs, commands are taken but not applied), calls the
  transport's :meth:`Adapter._read_internal` and feeds the command watchdog
  when valid commands drive the plant;
* :meth:`Adapter.status` adds the shared keys ``applied`` and ``rejected``
  (``total``, ``by_reason``) from the transport's :class:`CommandCounts`,
  which the loop's shutdown summary reads through
  :meth:`Adapter.command_counts`;
* :class:`LoopContext`, what the loop shares with its adapters, and the
  slots of its per-tick array ``tick_info`` (:data:`TI_WATCHDOG`, ...).

Adapters are chosen by type name in the I/O config (``[[adapters]] type =
"zmq"``) from the explicit table :data:`ADAPTERS` (python-can's
``BACKENDS``); a type from outside the project is added with
:func:`register_adapter`.  :func:`create_adapter` imports an adapter's module
only when a config asks for it.
"""

from __future__ import annotations

import importlib
import logging
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar

import numpy as np

from plant_models.errors import GearboxHilError
from plant_models.plant import Plant
# the slots of LoopContext.tick_info (int64), written by the loop, read by adapters each tick: declared with the
# state ring that copies them into every row, named here for the adapters
from plant_models.run.ring import (TI_FAULTS, TI_OVERRUNS, TI_SCENARIO, TI_STATUS, TI_WATCHDOG, TICK_INFO_SLOTS,
                                   new_tick_info)

from .declaration import AdapterDeclaration, TransportFault, register_declaration

@dataclass
class LoopContext:
    """What the loop shares with its adapters.

    Attributes
    ----------
    period_s
        The loop's step, s.  It may change between runs (a lockstep scenario
        with its own ``dt_s``); adapters that count time in ticks re-read it.
    feed_watchdog
        ``feed_watchdog(now_ns)``: valid commands drive the plant at
        ``now_ns`` (keeps the command watchdog from tripping).  Called by
        :meth:`Adapter.read`, not by transports themselves.
    status
        The loop's status dict (timing telemetry, watchdog, counters), for
        adapters that publish it.  Not for the tick.
    mode
        ``realtime``, ``lockstep`` or ``afap``; in lockstep and afap the
        ``now_ns`` the loop passes is simulated time.
    control
        ``control(request) -> reply`` executes a control request
        (start/stop/step/...); adapters that carry a control channel forward
        requests to it.  None: the server has no control handler.
    log
        The logger adapters write to.
    tick_info
        int64 array updated by the loop every tick, cheap to read in
        ``read``/``write``: slots :data:`TI_WATCHDOG`, :data:`TI_STATUS`,
        :data:`TI_SCENARIO`, :data:`TI_OVERRUNS`.
    ring
        The loop's state ring (:class:`plant_models.run.ring.StateRing`): one row
        per tick, read between ticks through a cursor of one's own.  None
        when no loop runs.
    loop_cpus
        The CPUs the loop's thread is pinned to (``[realtime]
        cpu_affinity``; empty: not pinned).  A process an adapter starts
        keeps off them, so that it never takes the loop's core.
    recording_folder
        The I/O config's ``[recording] folder`` (None: no recording), for
        adapters that offer its files (the web workspace lists them).
    restage
        ``restage()``: an adapter's compiled forms (:meth:`Adapter.compiled_read`,
        :meth:`Adapter.compiled_write`) changed; the loop builds its tick
        again.  Between ticks.
    fresh_channels
        What a config's ``channel = "*"`` became, by interface, made by the
        first adapter that opens with it: every adapter of one server given
        ``*`` is on the same bus (the CAN adapter and a J1939 rest-bus),
        as with ``--can-channel '*'``
        (:func:`io_adapters.can.declaration.resolve_channel`).
    """

    period_s: float
    feed_watchdog: Callable[[int], None]
    status: Callable[[], dict]
    mode: str = "realtime"
    control: Callable[[dict], dict] | None = None
    log: logging.Logger = field(default_factory=lambda: logging.getLogger("gearbox_hil.io"))
    tick_info: np.ndarray = field(default_factory=new_tick_info)
    ring: Any = None
    loop_cpus: tuple[int, ...] = ()
    recording_folder: str | None = None
    restage: Callable[[], None] = lambda: None
    fresh_channels: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        ti = self.tick_info
        if not isinstance(ti, np.ndarray) or ti.dtype != np.int64 or ti.shape != (TICK_INFO_SLOTS,):
            raise TypeError(f"tick_info must be an int64 array of {TICK_INFO_SLOTS} slots (io_adapters.base.TI_*)")


@dataclass(frozen=True)
class CommandCounts:
    """Commands a transport took from its peers since it opened.

    Attributes
    ----------
    applied
        Valid commands accepted (for a message transport: applied to the
        plant; for a cyclic bus: frames that passed every check).
    rejected
        reason -> count, every reason of the transport listed (zeros
        included), in the transport's order.
    recent
        The newest rejections as ``"reason: message"`` texts, if the
        transport keeps them (published as ``rejected.last``).
    """

    applied: int
    rejected: dict[str, int]
    recent: tuple[str, ...] | None = None

    @property
    def rejected_total(self) -> int:
        return sum(self.rejected.values())

    def as_status(self) -> dict:
        """The shared status keys: ``applied`` and ``rejected`` (``total``, ``by_reason`` [, ``last``])."""
        rejected: dict = {"total": self.rejected_total, "by_reason": dict(self.rejected)}
        if self.recent is not None:
            rejected["last"] = list(self.recent)
        return {"applied": self.applied, "rejected": rejected}


class AdapterError(GearboxHilError, RuntimeError):
    """An adapter could not be created or opened (bad endpoint, missing interface, bad DBC, ...)."""


class UnknownAdapterType(AdapterError):
    """No adapter of this type exists; the message lists every known type."""

    def __init__(self, type_name: str, known: list[str]):
        super().__init__(f"unknown adapter type {type_name!r}; known types: {', '.join(known) or 'none'}")
        self.type_name = type_name
        self.known = known


class Adapter(ABC):
    """A transport between the plant's ports and the outside world.

    A transport implements :meth:`open` (calling ``super().open(plant,
    ctx)`` first), :meth:`_read_internal`, :meth:`close`, and for its status
    :meth:`_status_internal` and :meth:`command_counts`; :meth:`write` if it
    sends something every tick, :meth:`pump` (with :meth:`wake_fds`) if it
    moves data between ticks.  The rest has defaults.

    What the server learns of the type before opening one (its
    command-line options, its fault kinds) is its ``declaration``
    (:mod:`io_adapters.declaration`); what the idle loop waits on, once
    open, is :meth:`wake_fds` and :meth:`idle_fds` (with :meth:`idle_pending`).
    """

    type_name: ClassVar[str] = ""
    declaration: ClassVar[AdapterDeclaration] = AdapterDeclaration()
    # False: the transport takes no commands, and the tick does not call its read (e.g. the web workspace)
    reads_commands: ClassVar[bool] = True
    # True: a process of the transport's own reads the state ring, so the server keeps it in shared memory
    shares_ring: ClassVar[bool] = False

    def __init__(self, name: str, options: dict):
        self.name = name
        self.options = options
        self._bind_tick_info(new_tick_info())
        self._feed_watchdog: Callable[[int], None] = _no_feed

    def _bind_tick_info(self, tick_info: np.ndarray) -> None:
        # The array for compiled code; a memoryview of it for Python code, whose items are plain ints
        # (about half the cost of ndarray.item, and no numpy scalar is made per tick).
        self._tick_info = tick_info
        self._tick_slots = memoryview(tick_info)

    def open(self, plant: Plant, ctx: LoopContext) -> None:
        """Resolve signal mappings, open sockets/buses, start background receivers.

        The base keeps ``plant``, ``ctx`` and what :meth:`read` needs each
        tick; transports extend this.
        """
        self.plant = plant
        self.ctx = ctx
        self._bind_tick_info(ctx.tick_info)
        self._feed_watchdog = ctx.feed_watchdog

    def read(self, tick: int, now_ns: int) -> None:
        """Take the newest commands from the transport; apply them unless a scenario drives the inputs.

        Transports drain their input even while a scenario drives the plant
        (``tick_info[TI_SCENARIO]``), so that old commands do not take over
        when the scenario ends; they count those commands as not applied.
        The watchdog is fed when :meth:`_read_internal` says valid commands
        drive the plant.  Non-blocking.  Called in the real-time loop.
        """
        if self._read_internal(tick, now_ns, not self._tick_slots[TI_SCENARIO]):
            self._feed_watchdog(now_ns)

    def _read_internal(self, tick: int, now_ns: int, drive: bool) -> int:
        """Receive and check commands; write the valid ones to the plant inputs if ``drive``.

        Returns
        -------
        int
            Non-zero when valid commands drive the plant after this read (the
            base then feeds the watchdog): for a message transport the
            number applied now, for a cyclic bus 1 while every required
            message is fresh.  Always 0 when not ``drive``.  Called in the
            real-time loop.
        """
        raise NotImplementedError(f"{type(self).__name__} implements neither read nor _read_internal")

    def compiled_read(self):
        """The compiled form of :meth:`read` (a :class:`plant_models.run.compiled.CompiledStage` of the
        ``commanded`` stage, returning ``FED`` when commands drive the plant), or None: the tick calls
        :meth:`read` from Python.  Asked between ticks, after :meth:`open`; the default has none."""
        return None

    def compiled_write(self):
        """The compiled form of :meth:`write` (a ``CompiledStage`` of the ``send`` stage), or None (the default)."""
        return None

    def write(self, tick: int, now_ns: int) -> None:
        """Send what is due this tick (e.g. cyclic CAN frames).  Non-blocking.  Called in the real-time loop.

        A transport that publishes the state as messages does not override
        it: it reads the state ring in :meth:`pump`, between ticks.  The loop
        calls only the adapters that override ``write``.
        """

    @abstractmethod
    def close(self) -> None:
        """Stop background work, flush recordings, release resources.  Idempotent."""

    def pump(self, until_ns: int = 0) -> None:
        """Between ticks: move data between the transport and the loop (never blocks).

        Take in and decode what arrived for the next tick, and send what the
        ticks left in the state ring.  Work until ``time.monotonic_ns()``
        reaches ``until_ns`` (0: until done), always making some progress.
        The loop calls it in its slack, before control requests, after every
        lockstep request, and when the ring is half full in lockstep and
        afap, so no row is lost there.
        """

    def rehearse(self) -> None:
        """Run :meth:`pump`'s decoding code on scratch data, changing nothing; optional (the default does nothing).

        The loop's ``spin`` wait (the wait of rates above a few kHz) calls it
        before spinning, when the slack allows.  A command that arrives
        after a hundred ticks without one otherwise finds its code cold: at
        10 kHz the ZeroMQ adapter's decode and hand-over of a command took
        about 40 us cold against 10 us rehearsed, in a period of 100 us
        (BENCHMARKS.md, "The tick").  Must not raise, block, or touch the
        adapter's real queues, counters or sockets.
        """

    def wake_fds(self) -> list[int]:
        """File descriptors whose readability means :meth:`pump` has input to take (e.g. a command arrived).

        The loop's sleep before a deadline waits on them too, so input that
        arrives while it sleeps is taken in at once and applied by the next
        tick.
        """
        return []

    def poll_control(self, now_ns: int) -> None:
        """Serve pending control requests (called between ticks, outside the timed part)."""

    def idle_fds(self) -> list[int]:
        """File descriptors the loop waits on while idle (paused, stopped, lockstep), besides :meth:`wake_fds`.

        When one becomes readable the loop calls :meth:`poll_control` at once
        instead of after its idle timeout.  Plain descriptors for
        ``select``; a transport whose descriptor signals edges, not levels
        (ZeroMQ's ``FD`` option), also implements :meth:`idle_pending`.
        """
        return []

    def idle_pending(self) -> bool:
        """Whether input already waits that the descriptors of :meth:`idle_fds` would not signal again.

        The loop asks it before it sleeps on them; True: it serves at once.
        """
        return False

    def publish_events(self, events: list[dict]) -> None:
        """Plant events (clutch stick/breakaway/reversal) since the last call; called between ticks."""

    def check_fault(self, spec: TransportFault) -> None:
        """Raise ``plant_models.errors.FaultError`` (one line) if this transport cannot inject ``spec``.

        ``spec`` is what this type's declaration parsed from a fault map of
        its target (:meth:`~io_adapters.declaration.AdapterDeclaration.parse_fault`);
        by default no fault is supported.  Between ticks.
        """
        from plant_models.errors import FaultError

        raise FaultError(f"fault: the {self.type_name or self.name} adapter {self.name!r} injects no "
                        f"{spec.target} faults")

    def set_fault(self, spec: TransportFault) -> None:
        """Start injecting ``spec`` (checked with :meth:`check_fault` first) from the next tick on.  Between ticks."""
        self.check_fault(spec)

    def clear_fault(self, spec: TransportFault) -> None:
        """Stop injecting ``spec``.  Between ticks."""

    def settable(self) -> dict[str, tuple[int, int]]:
        """Integer values of the transport a control request may set (``adapter_set``): name -> (min, max).

        E.g. the gear an emulated vehicle ECU requests on its bus.  None by default."""
        return {}

    def check_values(self, values: Any) -> dict[str, int]:
        """``values`` checked whole against :meth:`settable` (``ValueError`` naming the problem); changes nothing."""
        allowed = self.settable()
        if not isinstance(values, dict) or not values:
            raise ValueError("'set' must be a non-empty map of name -> integer; this adapter takes "
                             + (", ".join(allowed) or "none"))
        out = {}
        for k, v in values.items():
            if k not in allowed:
                raise ValueError(f"{self.name} has no settable value {k!r}; it takes " + (", ".join(allowed) or "none"))
            lo, hi = allowed[k]
            if isinstance(v, bool) or not isinstance(v, (int, float)) or v != int(v) or not lo <= v <= hi:
                raise ValueError(f"{k} = {v!r}: must be an integer in {lo} .. {hi}")
            out[k] = int(v)
        return out

    def set_values(self, values: dict[str, int]) -> None:
        """Set values checked by :meth:`check_values`, from the next tick on.  Between ticks."""

    def control_requests(self) -> dict[str, tuple[str, ...]]:
        """Control requests this transport serves itself: command -> its argument keys (besides ``v``, ``cmd``,
        ``id``).  E.g. the ``uds`` adapter's ``uds_request``.  None by default."""
        return {}

    def handle_request(self, cmd: str, req: dict):
        """Execute one of :meth:`control_requests` (its keys checked); the reply's result keys (a map) or an
        :class:`~io_adapters.protocol.PendingReply`.  A refused request raises
        :class:`~io_adapters.protocol.ProtocolError` with an error code of docs/protocol.md 5.3 and changes
        nothing.  Between ticks, on the loop's thread."""
        raise NotImplementedError(f"{type(self).__name__} declares control requests but serves none")

    def command_counts(self) -> CommandCounts | None:
        """Commands applied and rejected by reason since :meth:`open`; None before (or without) a transport."""
        return None

    def _status_internal(self) -> dict:
        """The transport's own status keys (endpoints, frames, ...)."""
        return {}

    def status(self) -> dict:
        """Counters for the status channel: the transport's keys plus ``applied`` and ``rejected``.

        Not for the tick.
        """
        out = self._status_internal()
        counts = self.command_counts()
        if counts is not None:
            out.update(counts.as_status())
        return out

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def _no_feed(now_ns: int) -> None:
    """The watchdog feed of an adapter that is not open."""


# -- the adapter types -------------------------------------------------------------------------------------
ADAPTERS: dict[str, tuple[str, str]] = {
    "zmq": ("io_adapters.zmq.adapter", "ZmqAdapter"),
    "can": ("io_adapters.can.adapter", "CanAdapter"),
    "j1939": ("io_adapters.can.restbus", "J1939Adapter"),
    "web": ("io_adapters.web.adapter", "WebAdapter"),
    "xcp": ("io_adapters.xcp.adapter", "XcpAdapter"),
    "device": ("io_adapters.devices.adapter", "DeviceAdapter"),
    "uds": ("io_adapters.can.uds_adapter", "UdsAdapter"),
}
"""Built-in adapter types: type name -> (module, class), imported when a config asks for the type."""

_REGISTERED: dict[str, Callable[[str, dict], Adapter]] = {}


def register_adapter(type_name: str, factory: Callable[[str, dict], Adapter]) -> None:
    """Add an adapter type from outside the project: ``factory(name, options)`` (e.g. the class) makes one.

    Raises ValueError for a name of :data:`ADAPTERS`; registering a name
    again replaces its factory.
    """
    if type_name in ADAPTERS:
        raise ValueError(f"adapter type {type_name!r} is built in ({ADAPTERS[type_name][0]})")
    _REGISTERED[type_name] = factory
    decl = getattr(factory, "declaration", None)
    if isinstance(decl, AdapterDeclaration):  # its command-line options and fault kinds
        register_declaration(type_name, decl)


def adapter_types() -> list[str]:
    """Every known adapter type name, sorted."""
    return sorted(set(ADAPTERS) | set(_REGISTERED))


def adapter_factory(type_name: str) -> Callable[[str, dict], Adapter]:
    """The class (or factory) of adapter type ``type_name``; imports a built-in module on first use.

    Raises
    ------
    UnknownAdapterType
        No such type.
    AdapterError
        The type's module cannot be imported (a missing package).
    """
    if type_name in _REGISTERED:
        return _REGISTERED[type_name]
    if type_name not in ADAPTERS:
        raise UnknownAdapterType(type_name, adapter_types())
    module_name, class_name = ADAPTERS[type_name]
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise AdapterError(f"adapter type {type_name!r} is not available: {exc}") from exc
    return getattr(module, class_name)


def create_adapter(type_name: str, name: str, options: dict) -> Adapter:
    """A new, not yet opened adapter of type ``type_name`` called ``name`` with its config ``options``.

    Raises :class:`UnknownAdapterType`, :class:`AdapterError`, or the
    ``ConfigError`` of the adapter's option check.
    """
    return adapter_factory(type_name)(name, options)


__all__ = ["Adapter", "AdapterError", "UnknownAdapterType", "LoopContext", "CommandCounts", "ADAPTERS",
           "register_adapter", "adapter_types", "adapter_factory", "create_adapter", "new_tick_info",
           "TI_WATCHDOG", "TI_STATUS", "TI_SCENARIO", "TI_OVERRUNS", "TI_FAULTS", "TICK_INFO_SLOTS"]
