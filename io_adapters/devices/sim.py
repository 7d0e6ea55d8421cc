"""Backend ``sim``: an in-process device for CI, deterministic and bit-exact.

It holds the targets of the next tick exactly as written (integer edge
times in ns, so nothing is rounded) with the pin faults applied, and lets a
TCU emulator (test code, the example TCU) read the pins it would see and
write the PWM duties, currents and levels it drives, which the plant side
then reads with :meth:`SimDevice.read_measurements`.

Pin faults (a :class:`~io_adapters.devices.channels.FaultSwitch` per pin):

=============== ======================= ===================== ===================
channel         open                    short to ground       short to battery
=============== ======================= ===================== ===================
pulse_out       no edges, level 0       no edges, level 0     no edges, level 1
digital_out     level 0 (pulled down)   level 0               level 1
resistance_out  +inf ohm                0 ohm                 +inf ohm, level 1
analog_out      0 V                     0 V                   ``supply_V``
pwm_in          duty kept, current 0    duty 0, current 0     duty 1
digital_in      0                       0                     1
analog_in       0 V                     0 V                   ``supply_V``
=============== ======================= ===================== ===================
"""

from __future__ import annotations

import math

import numpy as np

from .base import Device
from .channels import (PIN_OK, PIN_OPEN, PIN_SHORT_BAT, PIN_SHORT_GND, PULSE_EDGES, DeviceLayout, Measurements,
                       Targets)


class PinView:
    """The pins as the TCU sees them, after the pin faults; filled by :func:`apply_targets`."""

    def __init__(self, layout: DeviceLayout):
        self.targets = Targets(layout)
        n_pulse = layout.count("pulse_out")
        self.pulse_level = np.full(n_pulse, -1, dtype=np.int8)  # -1 toggling; 0/1 stuck by a pin fault
        self.resistance_ohm = self.targets.resistance_ohm
        self.digital = self.targets.digital
        self.analog_V = self.targets.analog_V
        self.fault = {kind: np.zeros(layout.count(kind), dtype=np.uint8) for kind in
                      ("pulse_out", "digital_out", "resistance_out", "analog_out", "pwm_in", "digital_in", "analog_in")}
        self.switched = layout.switch_targets()


def apply_targets(pins: PinView, targets: Targets, supply_V: float, clipped: np.ndarray) -> None:
    """Copy ``targets`` into ``pins`` and apply the pin faults of ``targets.pin_fault`` (table in the module doc).

    Edge counts above a row's width are clipped; ``clipped[0]`` counts the edges dropped.
    """
    t = pins.targets
    t.copy_from(targets)
    width = t.edge_ns.shape[1]
    for i in range(t.edge_count.shape[0]):
        if t.edge_count[i] > width or t.edge_count[i] < 0:
            clipped[0] += max(int(t.edge_count[i]) - width, 0)
            t.edge_count[i] = min(max(int(t.edge_count[i]), 0), width)
    for arr in pins.fault.values():
        arr[:] = PIN_OK
    for s, (kind, slot) in enumerate(pins.switched):
        pins.fault[kind][slot] = targets.pin_fault[s]
    pins.pulse_level[:] = -1
    for i, f in enumerate(pins.fault["pulse_out"]):
        if f != PIN_OK:
            t.edge_count[i] = 0
            t.frequency_Hz[i] = 0.0
            pins.pulse_level[i] = 1 if f == PIN_SHORT_BAT else 0
    for i, f in enumerate(pins.fault["digital_out"]):
        if f != PIN_OK:
            t.digital[i] = 1 if f == PIN_SHORT_BAT else 0
    for i, f in enumerate(pins.fault["resistance_out"]):
        if f != PIN_OK:
            t.resistance_ohm[i] = 0.0 if f == PIN_SHORT_GND else math.inf
    for i, f in enumerate(pins.fault["analog_out"]):
        if f != PIN_OK:
            t.analog_V[i] = supply_V if f == PIN_SHORT_BAT else 0.0


def apply_input_faults(pins: PinView, driven: Measurements, out: Measurements, supply_V: float) -> None:
    """``out`` = what the device measures of the TCU's outputs ``driven``, after the pin faults."""
    out.copy_from(driven)
    for i, f in enumerate(pins.fault["pwm_in"]):
        if f == PIN_OPEN:
            out.current_A[i] = 0.0
        elif f == PIN_SHORT_GND:
            out.duty[i] = 0.0
            out.current_A[i] = 0.0
        elif f == PIN_SHORT_BAT:
            out.duty[i] = 1.0
    for i, f in enumerate(pins.fault["digital_in"]):
        if f != PIN_OK:
            out.digital[i] = 1 if f == PIN_SHORT_BAT else 0
    for i, f in enumerate(pins.fault["analog_in"]):
        if f != PIN_OK:
            out.analog_V[i] = supply_V if f == PIN_SHORT_BAT else 0.0


class SimDevice(Device):
    """The in-process device.  Options: ``supply_V`` (the battery a short to battery pulls to, default 13.5).

    The TCU side: :meth:`tcu_edges`, :meth:`tcu_pulse_level`, :meth:`tcu_resistance_ohm`,
    :meth:`tcu_digital`, :meth:`tcu_analog_V` read the pins; :meth:`tcu_drive_pwm`,
    :meth:`tcu_drive_digital`, :meth:`tcu_drive_analog` write the TCU's outputs.
    """

    type_name = "sim"

    def __init__(self, name: str, layout: DeviceLayout, options: dict | None = None):
        super().__init__(name, layout, options)
        self.supply_V = float(self.options.get("supply_V", 13.5))
        self.pins = PinView(layout)
        self.driven = Measurements(layout)  # what the TCU drives, before pin faults
        self._clipped = np.zeros(1, dtype=np.int64)
        self._opened = False
        self.counters.update(edges_clipped=0)

    def open(self) -> None:
        """Nothing to connect; the pins start at the safe values."""
        self.pins.targets.set_safe(self.layout)
        self._opened = True

    def close(self) -> None:
        """Back to the safe values."""
        self.pins.targets.set_safe(self.layout)
        self._opened = False

    def write_targets(self, tick: int, targets: Targets) -> None:
        """The pins show ``targets`` (pin faults applied) from now on.  Called in the real-time loop."""
        apply_targets(self.pins, targets, self.supply_V, self._clipped)
        self.counters["edges_clipped"] = int(self._clipped[0])
        self.counters["ticks"] += 1
        self.measurements.tick = tick + 1

    def read_measurements(self) -> Measurements:
        """What the TCU drives, after the pin faults.  Called in the real-time loop."""
        tick = self.measurements.tick
        apply_input_faults(self.pins, self.driven, self.measurements, self.supply_V)
        self.measurements.tick = tick
        t = self.pins.targets
        for i in range(t.edge_count.shape[0]):
            self.measurements.edges_out[i] = t.edge_count[i] if t.pulse_mode[i] == PULSE_EDGES else 0
        return self.measurements

    # -- the TCU's side ------------------------------------------------------------------------------
    def tcu_edges(self, slot: int) -> np.ndarray:
        """Edge times (ns from the tick's start) of pulse channel ``slot`` in the current tick (a view)."""
        t = self.pins.targets
        if t.pulse_mode[slot] != PULSE_EDGES:
            return t.edge_ns[slot, :0]
        return t.edge_ns[slot, : t.edge_count[slot]]

    def tcu_frequency_Hz(self, slot: int) -> float:
        """The frequency target of pulse channel ``slot`` (0 unless in frequency mode and not faulted)."""
        return float(self.pins.targets.frequency_Hz[slot])

    def tcu_pulse_level(self, slot: int) -> int:
        """-1 while pulse channel ``slot`` toggles; 0 or 1 while a pin fault holds it."""
        return int(self.pins.pulse_level[slot])

    def tcu_resistance_ohm(self, slot: int) -> float:
        return float(self.pins.targets.resistance_ohm[slot])

    def tcu_digital(self, slot: int) -> int:
        return int(self.pins.targets.digital[slot])

    def tcu_analog_V(self, slot: int) -> float:
        return float(self.pins.targets.analog_V[slot])

    def tcu_drive_pwm(self, slot: int, duty: float, current_A: float) -> None:
        """The TCU drives PWM channel ``slot`` at ``duty`` (0..1) and measures ``current_A`` itself."""
        self.driven.duty[slot] = duty
        self.driven.current_A[slot] = current_A

    def tcu_drive_digital(self, slot: int, level: int) -> None:
        self.driven.digital[slot] = 1 if level else 0

    def tcu_drive_analog(self, slot: int, volts: float) -> None:
        self.driven.analog_V[slot] = volts
