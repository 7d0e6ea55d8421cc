"""Backend ``gpiod``: Linux GPIO lines (libgpiod v2) for the range code, relays and the TCU's switched outputs.

Options::

    chip = "/dev/gpiochip0"
    [lines]                  # channel name -> line offset on the chip
    range_bit0 = 5           # a digital_out channel: an output line
    relay = 12               # a digital_in channel: an input line

Digital outputs are driven, digital inputs read; other channel kinds are not
GPIO and are refused.  Pin faults of the layout's fault switches act on the
levels as in every backend (short to battery: high; open or short to
ground: low), before they reach the line.  Setting and reading lines are
single ``ioctl`` calls on the chip, which do not wait; the outputs are
written only when a level changed.  ``open()`` and ``close()`` put every
output at its channel's ``safe_level``.
"""

from __future__ import annotations

import numpy as np

from .base import Device, DeviceError
from .channels import DeviceLayout, Measurements, Targets
from .sim import PinView, apply_input_faults, apply_targets


class GpiodDevice(Device):
    """GPIO lines of one chip; see the module doc for the options."""

    type_name = "gpiod"

    def __init__(self, name: str, layout: DeviceLayout, options: dict | None = None):
        super().__init__(name, layout, options)
        lines = dict(self.options.get("lines") or {})
        if "chip" not in self.options or not lines:
            raise DeviceError(f"device {name!r} (gpiod): give a 'chip' and a [lines] table")
        by_name = {ch.name: ch for ch in layout.channels}
        self.out_offsets, self.in_offsets = [], []
        for ch in layout.channels:
            if ch.kind in ("digital_out", "digital_in") and ch.name not in lines:
                raise DeviceError(f"device {name!r} (gpiod): channel {ch.name!r} has no line in [lines]")
            if ch.kind not in ("digital_out", "digital_in", "fault_switch"):
                raise DeviceError(f"device {name!r} (gpiod): channel {ch.name!r} is a {ch.kind}, not a GPIO line")
        for ch_name in lines:
            if ch_name not in by_name:
                raise DeviceError(f"device {name!r} (gpiod): [lines] names no channel {ch_name!r}")
        self.out_offsets = [int(lines[ch.name]) for ch in layout.of_kind("digital_out")]
        self.in_offsets = [int(lines[ch.name]) for ch in layout.of_kind("digital_in")]
        if len(set(self.out_offsets + self.in_offsets)) != len(self.out_offsets + self.in_offsets):
            raise DeviceError(f"device {name!r} (gpiod): two channels on one line")
        self.pins = PinView(layout)
        self._driven = Measurements(layout)
        self._clipped = np.zeros(1, dtype=np.int64)
        self._sent = np.full(len(self.out_offsets), -1, dtype=np.int64)
        self._request = None
        self._values = None
        self.counters.update(line_writes=0, line_errors=0)

    def open(self) -> None:
        try:
            import gpiod
            from gpiod.line import Direction, Value
        except ImportError as exc:
            raise DeviceError("the gpiod device needs the gpiod package (libgpiod v2 bindings)") from exc
        self._values = (Value.INACTIVE, Value.ACTIVE)
        safe = [ch.safe_level for ch in self.layout.of_kind("digital_out")]
        config = {off: gpiod.LineSettings(direction=Direction.OUTPUT, output_value=self._values[level])
                  for off, level in zip(self.out_offsets, safe)}
        config.update({off: gpiod.LineSettings(direction=Direction.INPUT) for off in self.in_offsets})
        try:
            self._request = gpiod.request_lines(str(self.options["chip"]), consumer=f"gearbox-hil-{self.name}",
                                                config=config)
        except (OSError, ValueError) as exc:
            raise DeviceError(f"device {self.name!r} (gpiod): cannot request lines on {self.options['chip']}: "
                              f"{exc}") from exc
        self._sent[:] = safe

    def close(self) -> None:
        if self._request is None:
            return
        try:
            self._request.set_values({off: self._values[ch.safe_level] for off, ch in
                                      zip(self.out_offsets, self.layout.of_kind("digital_out"))})
        finally:
            self._request.release()
            self._request = None

    def write_targets(self, tick: int, targets: Targets) -> None:
        """Drive the output lines whose level changed (pin faults applied).  Called in the real-time loop."""
        apply_targets(self.pins, targets, 0.0, self._clipped)
        self.counters["ticks"] += 1
        self.measurements.tick = tick + 1
        levels = self.pins.targets.digital
        for i, off in enumerate(self.out_offsets):
            if levels[i] != self._sent[i]:
                try:
                    self._request.set_value(off, self._values[int(levels[i])])
                    self._sent[i] = levels[i]
                    self.counters["line_writes"] += 1
                except OSError:
                    self.counters["line_errors"] += 1

    def read_measurements(self) -> Measurements:
        """The input lines' levels (pin faults applied).  Called in the real-time loop."""
        if self.in_offsets:
            try:
                values = self._request.get_values(self.in_offsets)
                for i, v in enumerate(values):
                    self._driven.digital[i] = 1 if v == self._values[1] else 0
            except OSError:
                self.counters["line_errors"] += 1
        apply_input_faults(self.pins, self._driven, self.measurements, 0.0)
        return self.measurements
