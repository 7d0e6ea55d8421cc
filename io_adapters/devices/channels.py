"""Channel types of the device layer: what one pin (or pin group) of an I/O front-end does.

A device is opened with a :class:`DeviceLayout`, an ordered tuple of
channels; each kind of channel gets its own slot range in the preallocated
:class:`Targets` (what the hardware must do during the next tick) and
:class:`Measurements` (what it measured from the TCU).  Names are resolved to
slots once, in :meth:`DeviceLayout.index`; the tick works on slots.

Pin faults are a channel too: a :class:`FaultSwitch` sits in series with one
other channel's pin and is set each tick like any output (``PIN_OK``,
``PIN_OPEN``, ``PIN_SHORT_GND``, ``PIN_SHORT_BAT``).  Their effect is the
same in every backend (docs/electrical.md, "Device layer"): an open pin
gives no edges and no current, a short to ground or battery holds the line
at its stuck level.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from plant_models.errors import ConfigError

# pin states of a FaultSwitch (uint8 in Targets.pin_fault)
PIN_OK = 0  # the pin is connected
PIN_OPEN = 1  # open circuit: no edges, no current, resistance reads infinite
PIN_SHORT_GND = 2  # short to ground: level stuck low, no current
PIN_SHORT_BAT = 3  # short to battery: level stuck high
PIN_STATES = {"ok": PIN_OK, "open": PIN_OPEN, "short_gnd": PIN_SHORT_GND, "short_bat": PIN_SHORT_BAT}

# pulse-train modes (uint8 in Targets.pulse_mode)
PULSE_EDGES = 0  # exact edge times within the next tick (Targets.edge_ns / edge_count)
PULSE_FREQUENCY = 1  # a frequency and phase target, applied at the next tooth boundary


@dataclass(frozen=True)
class PulseOut:
    """A speed sensor's pulse train to the TCU (one tooth wheel).

    ``max_edges`` bounds the edges a tick may carry (60 teeth at 10 000 rpm
    over a 1 ms tick is 10 edges); a tick with more is clipped and counted.
    """

    name: str
    max_edges: int = 32
    kind: ClassVar[str] = "pulse_out"


@dataclass(frozen=True)
class PwmIn:
    """A solenoid driver output of the TCU: its PWM duty (0..1) and the coil current it drives, A."""

    name: str
    kind: ClassVar[str] = "pwm_in"


@dataclass(frozen=True)
class ResistanceOut:
    """A simulated resistor to the TCU's input (an NTC), ohm; ``safe_ohm`` in the safe state."""

    name: str
    min_ohm: float = 10.0
    max_ohm: float = 1.0e6
    safe_ohm: float = 1.0e6
    kind: ClassVar[str] = "resistance_out"


@dataclass(frozen=True)
class DigitalOut:
    """A digital line to the TCU (a range-selector contact, a relay); ``safe_level`` in the safe state."""

    name: str
    safe_level: int = 0
    kind: ClassVar[str] = "digital_out"


@dataclass(frozen=True)
class DigitalIn:
    """A digital line from the TCU (a relay driver, a lamp)."""

    name: str
    kind: ClassVar[str] = "digital_in"


@dataclass(frozen=True)
class AnalogOut:
    """A voltage to the TCU (a pressure sensor, KL30 through an amplifier), V; ``safe_V`` in the safe state."""

    name: str
    min_V: float = 0.0
    max_V: float = 5.0
    safe_V: float = 0.0
    kind: ClassVar[str] = "analog_out"


@dataclass(frozen=True)
class AnalogIn:
    """A voltage from the TCU (a sensor supply), V."""

    name: str
    kind: ClassVar[str] = "analog_in"


@dataclass(frozen=True)
class FaultSwitch:
    """A failure-insertion switch in series with the pin of channel ``channel``."""

    name: str
    channel: str
    kind: ClassVar[str] = "fault_switch"


CHANNEL_TYPES = (PulseOut, PwmIn, ResistanceOut, DigitalOut, DigitalIn, AnalogOut, AnalogIn, FaultSwitch)
KINDS = tuple(t.kind for t in CHANNEL_TYPES)


@dataclass(frozen=True)
class DeviceLayout:
    """The channels of one device, in order; each kind numbered from 0 in that order."""

    channels: tuple
    _slots: dict = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        slots: dict[str, tuple[str, int]] = {}
        counts = dict.fromkeys(KINDS, 0)
        for ch in self.channels:
            if not isinstance(ch, CHANNEL_TYPES):
                raise ConfigError("device layout", "", f"not a device channel: {ch!r}")
            if ch.name in slots:
                raise ConfigError("device layout", ch.name, "declared twice")
            slots[ch.name] = (ch.kind, counts[ch.kind])
            counts[ch.kind] += 1
        for ch in self.channels:
            if isinstance(ch, FaultSwitch):
                if ch.channel not in slots or slots[ch.channel][0] == "fault_switch":
                    raise ConfigError("device layout", ch.name, f"no channel {ch.channel!r} to switch")
            if isinstance(ch, PulseOut) and not 1 <= ch.max_edges <= 255:
                raise ConfigError("device layout", ch.name, f"max_edges must be 1..255, not {ch.max_edges}")
        object.__setattr__(self, "_slots", slots)

    def of_kind(self, kind: str) -> list:
        """The channels of one kind, in slot order."""
        return [ch for ch in self.channels if ch.kind == kind]

    def count(self, kind: str) -> int:
        """How many channels of ``kind``."""
        return sum(1 for ch in self.channels if ch.kind == kind)

    def index(self, name: str, kind: str | None = None) -> int:
        """The slot of channel ``name`` within its kind (checked against ``kind`` when given).  Not for the tick."""
        if name not in self._slots:
            raise ConfigError("device layout", name, f"no such channel; channels: {', '.join(self._slots) or 'none'}")
        got_kind, slot = self._slots[name]
        if kind is not None and got_kind != kind:
            raise ConfigError("device layout", name, f"device channel {name!r} is a {got_kind}, not a {kind}")
        return slot

    def switch_targets(self) -> list[tuple[str, int]]:
        """For each fault switch in slot order: the (kind, slot) of the channel it switches."""
        return [self._slots[ch.channel] for ch in self.of_kind("fault_switch")]

    @property
    def max_edges(self) -> int:
        """The widest pulse channel's ``max_edges`` (the edge array's width), at least 1."""
        return max([ch.max_edges for ch in self.of_kind("pulse_out")] + [1])


class Targets:
    """What the device must do during the next tick, in preallocated arrays (written by the plant side).

    Attributes (one row or entry per channel of the kind, in slot order)
    ----------
    pulse_mode : uint8
        :data:`PULSE_EDGES` or :data:`PULSE_FREQUENCY`.
    edge_ns : int64 (n_pulse, max_edges)
        Edge times from the next tick's start, ns (integer so every backend is bit-exact).
    edge_count : int32
        Valid edges in each row of ``edge_ns``.
    frequency_Hz, phase_turn : float64
        The frequency target and the phase (fraction of a tooth period) at the next tooth boundary.
    resistance_ohm, analog_V : float64
    digital : uint8
        Digital outputs, 0 or 1.
    pin_fault : uint8
        One :data:`PIN_OK` ... :data:`PIN_SHORT_BAT` per fault switch.
    """

    def __init__(self, layout: DeviceLayout):
        n_pulse = layout.count("pulse_out")
        self.pulse_mode = np.zeros(n_pulse, dtype=np.uint8)
        self.edge_ns = np.zeros((n_pulse, layout.max_edges), dtype=np.int64)
        self.edge_count = np.zeros(n_pulse, dtype=np.int32)
        self.frequency_Hz = np.zeros(n_pulse)
        self.phase_turn = np.zeros(n_pulse)
        self.resistance_ohm = np.array([ch.safe_ohm for ch in layout.of_kind("resistance_out")], dtype=np.float64)
        self.digital = np.array([ch.safe_level for ch in layout.of_kind("digital_out")], dtype=np.uint8)
        self.analog_V = np.array([ch.safe_V for ch in layout.of_kind("analog_out")], dtype=np.float64)
        self.pin_fault = np.zeros(layout.count("fault_switch"), dtype=np.uint8)

    def set_safe(self, layout: DeviceLayout) -> None:
        """Write the safe values: no edges, resistances, levels and voltages at their ``safe_*``, pins as wired."""
        self.pulse_mode[:] = PULSE_EDGES
        self.edge_count[:] = 0
        self.frequency_Hz[:] = 0.0
        for i, ch in enumerate(layout.of_kind("resistance_out")):
            self.resistance_ohm[i] = ch.safe_ohm
        for i, ch in enumerate(layout.of_kind("digital_out")):
            self.digital[i] = ch.safe_level
        for i, ch in enumerate(layout.of_kind("analog_out")):
            self.analog_V[i] = ch.safe_V
        self.pin_fault[:] = PIN_OK

    def copy_from(self, other: "Targets") -> None:
        """Copy every array of ``other`` (same layout) into this one, allocating nothing."""
        for name in _TARGET_ARRAYS:
            getattr(self, name)[...] = getattr(other, name)


_TARGET_ARRAYS = ("pulse_mode", "edge_ns", "edge_count", "frequency_Hz", "phase_turn", "resistance_ohm", "digital",
                  "analog_V", "pin_fault")


class Measurements:
    """What the device measured from the TCU, in preallocated arrays (read by the plant side).

    Attributes
    ----------
    tick : int
        The tick whose targets the device last applied (-1: none yet).
    safe : bool
        True while the device layer is in its safe state (currents then read 0).
    duty, current_A : float64, one per PWM channel
    edges_out : int64, one per pulse channel
        Edges the device actually put out in the last tick (after clipping and pin faults).
    digital : uint8, one per digital input
    analog_V : float64, one per analog input
    """

    def __init__(self, layout: DeviceLayout):
        self.tick = -1
        self.safe = False
        self.duty = np.zeros(layout.count("pwm_in"))
        self.current_A = np.zeros(layout.count("pwm_in"))
        self.edges_out = np.zeros(layout.count("pulse_out"), dtype=np.int64)
        self.digital = np.zeros(layout.count("digital_in"), dtype=np.uint8)
        self.analog_V = np.zeros(layout.count("analog_in"))

    def copy_from(self, other: "Measurements") -> None:
        """Copy ``other`` (same layout) into this one, allocating nothing."""
        self.tick = other.tick
        self.safe = other.safe
        for name in ("duty", "current_A", "edges_out", "digital", "analog_V"):
            getattr(self, name)[...] = getattr(other, name)

    def set_safe(self) -> None:
        """The safe reading: solenoid currents and duties 0, digital inputs 0, ``safe`` set."""
        self.safe = True
        self.duty[:] = 0.0
        self.current_A[:] = 0.0
        self.digital[:] = 0
