"""Test files whose I/O config has a device with a TCU on its pins: the run offline, and the lockstep run's inputs.

A test file with ``io = "..."`` naming an I/O config whose ``device``
adapter carries a TCU emulator (``tcu``, :mod:`io_adapters.devices.tcu`)
needs no scenario and no controller: the TCU drives the plant over the
pins, from the I/O config's ``[initial_inputs]``, for ``duration_s``.

* offline (:func:`run_devices_offline`): the plant and the device adapters
  in this process (:func:`server.testbench.device_run.run_with_devices`), the
  fault schedule's pin faults handed to the device adapter through the
  fault set before the step they name;
* lockstep (:func:`server.testbench.runner.run_lockstep`, with no stimulus):
  a ``gearbox-hil serve --mode lockstep`` process on that I/O config,
  stepped one tick at a time at the I/O config's step
  (:func:`device_steps`), each scheduled fault switched by the
  ``fault_set`` / ``fault_clear`` request between exactly the ticks the
  offline run switches it, the inputs recorded as the server ran them
  (:class:`DeviceInputs`).

The two give the same recording bit for bit: the same fault at the same
tick acts the same way through a schedule and through ``fault_set``.
"""

from __future__ import annotations

import numpy as np

from .spec import TestSpec
from .verdict import Recording


def run_devices_offline(spec: TestSpec, log: list[str]) -> Recording:
    """The test file's run with its I/O config's devices in this process (module docstring).  Raises
    ``FaultError`` for a switch the fault set refuses (a pin the device does not have)."""
    from plant_models.registry import load_plant

    from server.testbench.device_run import device_recording, run_with_devices

    plant = load_plant(spec.plant_config)
    faults = [(f.fault, f.at, f.until) for f in spec.faults]
    return device_recording(run_with_devices(plant, spec.io_config, spec.duration_s, faults, log))


def device_steps(spec: TestSpec) -> tuple[float, int]:
    """(step s, number of steps) of a run driven by the test's device TCU: the I/O config's period."""
    from server.realtime.runtime import load_io_config

    dt = load_io_config(spec.io_config).loop.period_ns / 1e9
    return dt, int(round(spec.duration_s / dt))


class DeviceInputs:
    """The inputs a lockstep server ran each step with (the device's solenoid currents), asked after the step."""

    def __init__(self, client, n: int):
        self.client, self.names = client, list(client.input_names)
        self.u = np.empty((n + 1, len(self.names)))

    def record(self, k: int) -> None:
        """After step k: the inputs it ran with (they stay until the next step's read)."""
        u = self.client.get()["u"]
        self.u[k] = [u[nm] for nm in self.names]

    def table(self) -> dict[str, np.ndarray]:
        """Per input, step k's value at sample k (the last step's again at the end)."""
        n = len(self.u) - 1
        self.u[n] = self.u[n - 1] if n else [self.client.get()["u"][nm] for nm in self.names]
        return {nm: self.u[:, i].copy() for i, nm in enumerate(self.names)}


__all__ = ["DeviceInputs", "device_steps", "run_devices_offline"]
