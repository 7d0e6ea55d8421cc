"""The one small interface of an I/O device, and its backends chosen by name (like :data:`io_adapters.base.ADAPTERS`).

A device carries the plant's electrical channels to pins.  Each tick the
plant side fills a :class:`~io_adapters.devices.channels.Targets` (what the
hardware must do during the *next* tick: edge times, resistances, levels,
pin faults) and calls :meth:`Device.write_targets`; it reads what the device
last measured from the TCU (PWM duty and current, digital and analog inputs)
with :meth:`Device.read_measurements`.  Neither call blocks or allocates:
a backend that talks to hardware does so in its own thread or with
non-blocking calls, and hands data over through preallocated buffers.

Backends are chosen by name from :data:`DEVICES` (module, class), imported
only when asked for; :func:`create_device` makes one.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from typing import Any

from io_adapters.base import AdapterError

from .channels import DeviceLayout, Measurements, Targets


class DeviceError(AdapterError):
    """A device could not be created or opened (missing package, no such port, bad instrument answer)."""


class UnknownDeviceType(DeviceError):
    """No backend of this name; the message lists every known one."""

    def __init__(self, type_name: str, known: list[str]):
        super().__init__(f"unknown device type {type_name!r}; known types: {', '.join(known)}")
        self.type_name = type_name


class Device(ABC):
    """An I/O front-end with the channels of ``layout``.

    Subclasses implement :meth:`open`, :meth:`close`, :meth:`write_targets`
    and :meth:`read_measurements`; :meth:`status` returns their counters.
    A device is a context manager (open on enter, close on exit).
    """

    type_name = "?"

    def __init__(self, name: str, layout: DeviceLayout, options: dict[str, Any] | None = None):
        self.name = name
        self.layout = layout
        self.options = dict(options or {})
        self.measurements = Measurements(layout)
        self.counters: dict[str, int] = {"ticks": 0}

    def new_targets(self) -> Targets:
        """A preallocated :class:`Targets` for this device's layout, at the safe values.  Not for the tick."""
        return Targets(self.layout)

    @abstractmethod
    def open(self) -> None:
        """Connect to the hardware and put the outputs in the safe state."""

    @abstractmethod
    def close(self) -> None:
        """Put the outputs in the safe state and disconnect; safe to call twice."""

    @abstractmethod
    def write_targets(self, tick: int, targets: Targets) -> None:
        """Hand over the targets of tick ``tick + 1``.  Called in the real-time loop: never blocks."""

    @abstractmethod
    def read_measurements(self) -> Measurements:
        """The latest measurements (this device's own preallocated object).  Called in the real-time loop."""

    def set_tick_s(self, tick_s: float) -> None:
        """The loop's tick is now ``tick_s`` long (a lockstep scenario's own ``dt_s``; between ticks, before the
        first tick at that length).  A device that counts time in ticks follows it; by default nothing does."""

    def status(self) -> dict[str, Any]:
        """The device's counters (ticks, errors, safe-state entries ...) and whether it is in its safe state."""
        return {"type": self.type_name, "name": self.name, "safe": self.measurements.safe, **self.counters}

    def __enter__(self) -> "Device":
        self.open()
        return self

    def __exit__(self, *exc) -> None:
        self.close()


DEVICES: dict[str, tuple[str, str]] = {
    "sim": ("io_adapters.devices.sim", "SimDevice"),
    "mcu": ("io_adapters.devices.mcu", "McuDevice"),
    "visa": ("io_adapters.devices.visa", "VisaDevice"),
    "gpiod": ("io_adapters.devices.gpio", "GpiodDevice"),
}
"""Built-in device backends: type name -> (module, class), imported when asked for."""


def device_types() -> list[str]:
    """Every built-in device type name, sorted."""
    return sorted(DEVICES)


def create_device(type_name: str, name: str, layout: DeviceLayout, options: dict[str, Any] | None = None) -> Device:
    """A new, not yet opened device of backend ``type_name``.

    Raises
    ------
    UnknownDeviceType
        No such backend.
    DeviceError
        The backend's module cannot be imported (a missing package, e.g. pyvisa).
    """
    if type_name not in DEVICES:
        raise UnknownDeviceType(type_name, device_types())
    module_name, class_name = DEVICES[type_name]
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise DeviceError(f"device type {type_name!r} is not available: {exc}") from exc
    return getattr(module, class_name)(name, layout, options)
