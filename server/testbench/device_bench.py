"""Test files whose I/O config has a device with a TCU on its pins: the run offline and in lockstep.

A test file with ``io = "..."`` naming an I/O config whose ``device``
adapter carries a TCU emulator (``tcu``, :mod:`io_adapters.devices.tcu`)
needs no scenario and no controller: the TCU drives the plant over the
pins, from the I/O config's ``[initial_inputs]``, for ``duration_s``.

* offline: the plant and the device adapters in this process
  (:func:`server.offline.device_run.run_with_devices`), the fault schedule's
  pin faults handed to the device adapter through the fault set before the
  step they name;
* lockstep: a ``gearbox-hil serve --mode lockstep`` process on that I/O
  config, stepped one tick at a time, each scheduled fault switched by the
  ``fault_set`` / ``fault_clear`` request between exactly the ticks the
  offline run switches it (the test bench's fault clock,
  :func:`server.testbench.runner.FaultClock`).

The two give the same recording bit for bit: the same fault at the same
tick acts the same way through a schedule and through ``fault_set``.
"""

from __future__ import annotations

import numpy as np

from .spec import WATCHDOG, TestSpec
from .verdict import Recording


def run_devices(spec: TestSpec, workdir, log: list[str]) -> Recording:
    """The test file's run: offline in this process, or against a lockstep server on its I/O config."""
    from io_adapters.zmq.client import HilClient

    from .runner import ServerRun

    if spec.mode == "offline":
        return run_devices_offline(spec, log)
    with ServerRun(spec.plant_config, "lockstep", workdir, spec.io_config) as server:
        with HilClient(server.control, timeout_s=30.0).connect() as client:
            return run_devices_lockstep(spec, client, log)


def run_devices_offline(spec: TestSpec, log: list[str]) -> Recording:
    """The test file's run with its I/O config's devices in this process (module docstring)."""
    from plant_models.errors import FaultError
    from plant_models.registry import load_plant

    from server.offline.device_run import device_recording, run_with_devices
    from .runner import RunError

    plant = load_plant(spec.plant_config)
    try:
        r = run_with_devices(plant, spec.io_config, spec.duration_s, [(f.fault, f.at, f.until) for f in spec.faults],
                             log)
    except FaultError as exc:  # a switch the fault set refuses
        raise RunError(str(exc)) from None
    return device_recording(r)


def run_devices_lockstep(spec: TestSpec, client, log: list[str]) -> Recording:
    """Step a lockstep server on the test's I/O config for ``duration_s``, switching the scheduled faults between
    exactly the ticks they name; every tick's outputs and inputs as the server reports them."""
    from server.realtime.runtime import load_io_config
    from .runner import FaultClock, Session, SetClock, _switch

    dt = load_io_config(spec.io_config).loop.period_ns / 1e9
    n = int(round(spec.duration_s / dt))
    in_names, out_names = client.input_names, client.output_names
    Y, U = np.empty((n + 1, len(out_names))), np.empty((n + 1, len(in_names)))
    wd = np.zeros(n + 1)
    g = client.get()
    Y[0] = [g["y"][nm] for nm in out_names]
    session = Session("lockstep", client)
    clock = FaultClock(spec.faults)
    sets = SetClock(spec.adapter_sets, session, log)
    eps = 0.5 * dt
    for k in range(n):
        _switch(session, clock, k * dt, eps, log)
        sets.send(k * dt, eps)
        r = client.step(1)
        g = client.get()  # the inputs step k ran with (the device's solenoid currents)
        Y[k + 1] = [r.y[nm] for nm in out_names]
        U[k] = [g["u"][nm] for nm in in_names]
        wd[k + 1] = r.watchdog
    U[n] = U[n - 1] if n else [g["u"][nm] for nm in in_names]
    sig = {nm: U[:, i].copy() for i, nm in enumerate(in_names)}
    sig.update({nm: Y[:, j].copy() for j, nm in enumerate(out_names)})
    sig.setdefault(WATCHDOG, wd)
    return Recording(np.arange(n + 1) * dt, sig, dt)


__all__ = ["run_devices", "run_devices_lockstep", "run_devices_offline"]
