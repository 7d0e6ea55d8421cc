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

import numpy as np
from numba import njit

from .base import Device
from .channels import (PIN_OK, PIN_OPEN, PIN_SHORT_BAT, PIN_SHORT_GND, PULSE_EDGES, DeviceLayout, Measurements,
                       Targets)


# rows of PinView.fault: the pin state of each channel of a kind, after the fault switches
F_PULSE, F_DIGITAL_OUT, F_RESISTANCE, F_ANALOG_OUT, F_PWM, F_DIGITAL_IN, F_ANALOG_IN = range(7)
_FAULT_ROWS = ("pulse_out", "digital_out", "resistance_out", "analog_out", "pwm_in", "digital_in", "analog_in")


class PinView:
    """The pins as the TCU sees them, after the pin faults; filled by :func:`apply_targets`."""

    def __init__(self, layout: DeviceLayout):
        self.targets = Targets(layout)
        n_pulse = layout.count("pulse_out")
        self.pulse_level = np.full(n_pulse, -1, dtype=np.int8)  # -1 toggling; 0/1 stuck by a pin fault
        width = max([layout.count(kind) for kind in _FAULT_ROWS] + [1])
        self.fault = np.zeros((len(_FAULT_ROWS), width), dtype=np.uint8)
        switched = layout.switch_targets()
        self.switch_row = np.array([_FAULT_ROWS.index(kind) for kind, _ in switched], dtype=np.int64)
        self.switch_slot = np.array([slot for _, slot in switched], dtype=np.int64)


@njit(cache=True)
def _apply_targets_kernel(src_mode, src_edges, src_count, src_freq, src_phase, src_ohm, src_dig, src_volt,
                          src_fault, mode, edges, count, freq, phase, ohm, dig, volt, pin_fault, pulse_level,
                          fault, switch_row, switch_slot, supply_V, clipped):
    mode[:] = src_mode
    edges[:, :] = src_edges
    freq[:] = src_freq
    phase[:] = src_phase
    ohm[:] = src_ohm
    dig[:] = src_dig
    volt[:] = src_volt
    pin_fault[:] = src_fault
    width = edges.shape[1]
    for i in range(count.shape[0]):
        n = src_count[i]
        if n > width:
            clipped[0] += n - width
            n = width
        count[i] = max(n, 0)
    fault[:, :] = PIN_OK
    for s in range(switch_row.shape[0]):
        fault[switch_row[s], switch_slot[s]] = src_fault[s]
    for i in range(count.shape[0]):
        f = fault[F_PULSE, i]
        pulse_level[i] = -1
        if f != PIN_OK:
            count[i] = 0
            freq[i] = 0.0
            pulse_level[i] = 1 if f == PIN_SHORT_BAT else 0
    for i in range(dig.shape[0]):
        f = fault[F_DIGITAL_OUT, i]
        if f != PIN_OK:
            dig[i] = 1 if f == PIN_SHORT_BAT else 0
    for i in range(ohm.shape[0]):
        f = fault[F_RESISTANCE, i]
        if f != PIN_OK:
            ohm[i] = 0.0 if f == PIN_SHORT_GND else np.inf
    for i in range(volt.shape[0]):
        f = fault[F_ANALOG_OUT, i]
        if f != PIN_OK:
            volt[i] = supply_V if f == PIN_SHORT_BAT else 0.0


def apply_targets(pins: PinView, targets: Targets, supply_V: float, clipped: np.ndarray) -> None:
    """Copy ``targets`` into ``pins`` and apply the pin faults of ``targets.pin_fault`` (table in the module doc).

    Edge counts above a row's width are clipped; ``clipped[0]`` counts the edges dropped.  Compiled.
    """
    s, t = targets, pins.targets
    _apply_targets_kernel(s.pulse_mode, s.edge_ns, s.edge_count, s.frequency_Hz, s.phase_turn, s.resistance_ohm,
                          s.digital, s.analog_V, s.pin_fault, t.pulse_mode, t.edge_ns, t.edge_count, t.frequency_Hz,
                          t.phase_turn, t.resistance_ohm, t.digital, t.analog_V, t.pin_fault, pins.pulse_level,
                          pins.fault, pins.switch_row, pins.switch_slot, supply_V, clipped)


@njit(cache=True)
def _input_faults_kernel(duty, current, dig, volt, out_duty, out_current, out_dig, out_volt, fault, supply_V,
                         mode, count, edges_out):
    out_duty[:] = duty
    out_current[:] = current
    out_dig[:] = dig
    out_volt[:] = volt
    for i in range(duty.shape[0]):
        f = fault[F_PWM, i]
        if f == PIN_OPEN:
            out_current[i] = 0.0
        elif f == PIN_SHORT_GND:
            out_duty[i] = 0.0
            out_current[i] = 0.0
        elif f == PIN_SHORT_BAT:
            out_duty[i] = 1.0
    for i in range(dig.shape[0]):
        f = fault[F_DIGITAL_IN, i]
        if f != PIN_OK:
            out_dig[i] = 1 if f == PIN_SHORT_BAT else 0
    for i in range(volt.shape[0]):
        f = fault[F_ANALOG_IN, i]
        if f != PIN_OK:
            out_volt[i] = supply_V if f == PIN_SHORT_BAT else 0.0
    for i in range(count.shape[0]):
        edges_out[i] = count[i] if mode[i] == PULSE_EDGES else 0


def apply_input_faults(pins: PinView, driven: Measurements, out: Measurements, supply_V: float) -> None:
    """``out`` = what the device measures of the TCU's outputs ``driven``, after the pin faults; its
    ``edges_out`` the edges the pins put out.  Compiled; ``tick`` and ``safe`` are left as they are."""
    t = pins.targets
    _input_faults_kernel(driven.duty, driven.current_A, driven.digital, driven.analog_V, out.duty, out.current_A,
                         out.digital, out.analog_V, pins.fault, supply_V, t.pulse_mode, t.edge_count, out.edges_out)


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
        # the TCU emulator's per-tick step, called with the tick once the pins show its targets (None: no TCU)
        self.tcu = None

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
        if self.tcu is not None:
            self.tcu(tick)

    def adopt_into(self, arena, prefix_pins: str = "p_", prefix_driven: str = "d_", prefix_out: str = "m_") -> None:
        """Take the pins, what the TCU drives and the measurements into ``arena`` (:mod:`.arena`), in the order
        of :data:`io_adapters.devices.stage.MEMBERS`, so one compiled call updates them (the device adapter's
        tick).  The arrays are rebound: take no reference to them before."""
        t = self.pins.targets
        for name, label in (("pulse_mode", "mode"), ("edge_ns", "edges"), ("edge_count", "count"),
                            ("frequency_Hz", "freq"), ("phase_turn", "phase"), ("resistance_ohm", "ohm"),
                            ("digital", "dig"), ("analog_V", "volt"), ("pin_fault", "switch")):
            arena.adopt(t, name, prefix_pins + label)
        for name, label in (("pulse_level", "level"), ("fault", "fault"), ("switch_row", "row"),
                            ("switch_slot", "slot")):
            arena.adopt(self.pins, name, prefix_pins + label)
        arena.adopt(self, "_clipped", prefix_pins + "clipped")
        for obj, prefix in ((self.driven, prefix_driven), (self.measurements, prefix_out)):
            for name, label in (("duty", "duty"), ("current_A", "current"), ("edges_out", "edges_out"),
                                ("digital", "dig"), ("analog_V", "volt")):
                arena.adopt(obj, name, prefix + label)

    def read_measurements(self) -> Measurements:
        """What the TCU drives, after the pin faults.  Called in the real-time loop."""
        apply_input_faults(self.pins, self.driven, self.measurements, self.supply_V)
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
