"""The device layer: the plant's electrical channels carried to pins (docs/electrical.md, "Device layer").

:mod:`.channels` declares the channel types and the preallocated targets and
measurements; :mod:`.base` the one small :class:`~.base.Device` interface and
the backend table :data:`~.base.DEVICES` (``sim``, ``mcu``, ``visa``, ``gpiod``);
:mod:`.wire` the microcontroller's wire protocol; :mod:`.adapter` the ``device``
adapter that runs the electrical models each tick between the plant's ports
and a device (:mod:`.channel_map`, :mod:`.stage`, :mod:`.arena`;
:mod:`.declaration` its pin faults).
"""

from .base import DEVICES, Device, DeviceError, UnknownDeviceType, create_device, device_types
from .channels import (PIN_OK, PIN_OPEN, PIN_SHORT_BAT, PIN_SHORT_GND, PIN_STATES, PULSE_EDGES, PULSE_FREQUENCY,
                       AnalogIn, AnalogOut, DeviceLayout, DigitalIn, DigitalOut, FaultSwitch, Measurements, PulseOut,
                       PwmIn, ResistanceOut, Targets)

__all__ = ["DEVICES", "Device", "DeviceError", "UnknownDeviceType", "create_device", "device_types", "PIN_OK",
           "PIN_OPEN", "PIN_SHORT_BAT", "PIN_SHORT_GND", "PIN_STATES", "PULSE_EDGES", "PULSE_FREQUENCY", "AnalogIn",
           "AnalogOut", "DeviceLayout", "DigitalIn", "DigitalOut", "FaultSwitch", "Measurements", "PulseOut", "PwmIn",
           "ResistanceOut", "Targets"]
