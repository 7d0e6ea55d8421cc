"""What the device adapter declares to the server: its pin faults (target ``device``); no command-line option.

Imports no device backend (``serve --help`` and fault checks stay cheap);
see :mod:`io_adapters.declaration`.  A fault map names the pin by its
channel name in the channel map; the running adapter checks it
(:meth:`io_adapters.devices.adapter.DeviceAdapter.check_fault`).

Kinds (docs/faults.md, docs/electrical.md):

* ``open``, ``short_gnd``, ``short_bat``: the fault switch in series with
  the pin (open circuit, short to ground, short to battery); their effect
  per channel type is the table of :mod:`io_adapters.devices.sim`;
* ``signal_loss``: a speed sensor that gives no signal while its wiring is
  intact (a dead sensor, a wheel out of the air gap);
* ``missing_tooth``: tooth ``tooth`` of a speed sensor's wheel is absent
  (0 .. teeth - 1).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..declaration import AdapterDeclaration, TransportFault, fault_error, fault_integer, fault_keys

PIN_KINDS = ("open", "short_gnd", "short_bat")
SENSOR_KINDS = ("signal_loss", "missing_tooth")
FAULT_KINDS = PIN_KINDS + SENSOR_KINDS


@dataclass(frozen=True)
class DeviceFault(TransportFault):
    """A fault of one pin (``what``: the channel's name); ``tooth`` for a ``missing_tooth``."""

    tooth: int = -1

    @property
    def pin(self) -> str:
        return self.what


class DeviceDeclaration(AdapterDeclaration):
    type_name = "device"
    fault_kinds = FAULT_KINDS

    def parse_fault(self, d: dict, where: str) -> DeviceFault:
        kind = d["kind"]
        fault_keys(d, ("pin", "tooth"), where)
        pin = d.get("pin")
        if not isinstance(pin, str) or not pin:
            raise fault_error(where, "a device fault needs 'pin' (a channel name of the channel map)")
        if "tooth" in d and kind != "missing_tooth":
            raise fault_error(where, "'tooth' is for missing_tooth faults")
        if kind == "missing_tooth" and "tooth" not in d:
            raise fault_error(where, "a missing_tooth fault needs 'tooth' (0 .. teeth - 1)")
        tooth = fault_integer(d, "tooth", where, -1, 0, 999) if "tooth" in d else -1
        return DeviceFault("device", kind, pin, tooth=tooth)


DECLARATION = DeviceDeclaration()

__all__ = ["DECLARATION", "DeviceDeclaration", "DeviceFault", "FAULT_KINDS", "PIN_KINDS", "SENSOR_KINDS"]
