"""The Powershift TCU emulator with diagnostics: its own monitoring of the plant feeds a UDS server's DTC memory.

:class:`DiagnosticTcu` is the TCU of ``ecu_emulator.py`` (the swap 1 -> 3 on
CAN) with a UDS server (:mod:`io_adapters.can.uds_server`, ISO-TP on
0x7E0 / 0x7E8, functional 0x7DF) and two monitors that run in its 10 ms task
on its own clock (the plant's in lockstep):

* **speed sensor** (DTC P0715-31, 0x071531, input speed sensor: no signal):
  no valid ``HIL_SpeedsA`` frame (missing, or rejected by its E2E check: a
  frozen alive counter is a stale frame) for ``speed_timeout_ms`` (100 ms,
  DID 0x0120) is a failed test, a valid frame in time a passed one; ten
  failed results in a row (100 ms) confirm it, and it asks for the warning
  lamp;
* **clutch engagement** (DTC P0733-92, 0x073392, gear 3: performance): in
  the shift 1 -> 3 the on-coming clutch 2 must report stuck
  (``HIL_ClutchState``) within ``engage_limit_s`` (0.5 s: fill, torque and
  inertia phase) of the start of the shift; one result per shift, a failure
  confirms at once.

Data identifiers: 0xF190 VIN (17 ASCII), 0xF195 software version (ASCII),
0x0100 current gear (uint8, 0xFF before the first ``HIL_ClutchState``),
0x0101 output speed (int16, rpm), 0x0120 the speed monitor's timeout (uint16
ms, 20..2000, writable in the extended session).  Routine 0x0201 (extended
session): the speed sensor check; its status and result record is one byte,
0 while speeds arrive, 1 while they are lost.

The diagnostics never change what the TCU commands: a tester's requests,
fuzzed or not, leave the plant's run as it is.  :class:`DiagnosticTcuController`
runs the TCU as a controller class of a test file (lockstep, the server in
the same process, its virtual bus: ``examples/benches/uds_speed_sensor_dtc.toml``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import can

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from ecu_emulator import PowershiftTcu  # noqa: E402

from io_adapters.can.uds_server import (DataIdentifier, Dtc, Nrc, NRC, Routine, UdsAddressing,  # noqa: E402
                                        UdsServer)

DTC_SPEED_SENSOR = 0x071531
DTC_CLUTCH_ENGAGE = 0x073392
DTCS = (Dtc(DTC_SPEED_SENSOR, "input speed sensor: no signal (HIL_SpeedsA missing or invalid)", confirm_after=10,
            warning_lamp=True),
        Dtc(DTC_CLUTCH_ENGAGE, "gear 3: clutch 2 not engaged within its time in the shift 1 -> 3", confirm_after=1))
VIN = b"WGBTCU0EMULAT0R01"
SOFTWARE_VERSION = b"gearbox-hil TCU 1.0"
DID_VIN, DID_SOFTWARE, DID_GEAR, DID_OUTPUT_SPEED, DID_SPEED_TIMEOUT = 0xF190, 0xF195, 0x0100, 0x0101, 0x0120
ROUTINE_SPEED_CHECK = 0x0201


class DiagnosticTcu(PowershiftTcu):
    """The Powershift TCU with monitors and a UDS server (module docstring).  ``cycle(t, dt)`` is its task."""

    def __init__(self, bus: can.BusABC, shift_at_s: float = 0.5, engine_torque_Nm: float = 200.0,
                 speed_timeout_ms: int = 100, engage_limit_s: float = 0.5,
                 addressing: UdsAddressing = UdsAddressing()):
        super().__init__(bus, shift_at_s=shift_at_s, engine_torque_Nm=engine_torque_Nm)
        self.speed_timeout_ms = int(speed_timeout_ms)
        self.engage_limit_s = engage_limit_s
        self.now_ns = 0
        self._speeds_t: float | None = None  # TCU time of the last valid HIL_SpeedsA
        self._shift_t: float | None = None  # start of the shift being monitored (None: no result due)
        dids = (DataIdentifier(DID_VIN, "VIN", lambda: VIN),
                DataIdentifier(DID_SOFTWARE, "software version", lambda: SOFTWARE_VERSION),
                DataIdentifier(DID_GEAR, "current gear", self._gear),
                DataIdentifier(DID_OUTPUT_SPEED, "output speed, rpm", self._output_speed),
                DataIdentifier(DID_SPEED_TIMEOUT, "speed monitor timeout, ms",
                               lambda: self.speed_timeout_ms.to_bytes(2, "big"), self._set_timeout, 2))
        check = Routine(ROUTINE_SPEED_CHECK, "speed sensor check", lambda option: self._speeds_lost(),
                        self._speeds_lost)
        self.uds = UdsServer(bus, DTCS, dids, (check,), addressing=addressing, clock_ns=lambda: self.now_ns)

    # -- data identifiers and the routine ------------------------------------------------------------
    def _gear(self) -> bytes:
        g = self.result.gear_actual
        return bytes((0xFF if g is None else g & 0xFF,))

    def _output_speed(self) -> bytes:
        rpm = self.result.output_rpm
        return min(max(int(round(rpm or 0.0)), -32768), 32767).to_bytes(2, "big", signed=True)

    def _set_timeout(self, data: bytes) -> None:
        ms = int.from_bytes(data, "big")
        if not 20 <= ms <= 2000:
            raise Nrc(NRC["requestOutOfRange"])
        self.speed_timeout_ms = ms

    def _speeds_lost(self) -> bytes:
        t = self.now_ns / 1e9
        return bytes((int(self._speeds_t is not None and t - self._speeds_t > self.speed_timeout_ms / 1000),))

    # -- the task -----------------------------------------------------------------------------------
    def take(self, m: can.Message) -> None:
        if self.uds.accepts(m):
            self.uds.feed(m)
        else:
            super().take(m)

    def cycle(self, t: float, dt: float) -> None:
        """Read, decide, send (``PowershiftTcu.cycle``), then the monitors on what was read, then the UDS server."""
        self.now_ns = int(round(t * 1e9))
        seen = self.speeds_valid
        super().cycle(t, dt)
        self._monitor(t, self.speeds_valid > seen)
        self.uds.cycle()

    def _monitor(self, t: float, speeds_now: bool) -> None:
        mem = self.uds.dtcs
        if speeds_now:
            self._speeds_t = t
        if self._speeds_t is not None:  # a sensor that never sent is not yet tested (the plant may be starting)
            mem.report(0, t - self._speeds_t > self.speed_timeout_ms / 1000)
        if self.phase == "torque" and self._shift_t is None and self.result.closed_at_s is None:
            self._shift_t = self._t_phase
        if self._shift_t is not None:
            if self.result.stuck.get(2) == 1 and self.phase == "lock":
                mem.report(1, False)
                self._shift_t = -1.0  # done for this shift
            elif self._shift_t >= 0 and t - self._shift_t > self.engage_limit_s:
                mem.report(1, True)
                self._shift_t = -1.0


class DiagnosticTcuController:
    """:class:`DiagnosticTcu` as a controller class: its 10 ms task after every ten 1 ms ticks, on the server's
    virtual bus ``channel`` (the server must run in this process).  It commands no plant input itself: its
    commands go on CAN."""

    period_ticks = 10
    owned_inputs: tuple[str, ...] = ()

    def __init__(self, channel: str = "gearbox-hil-uds", shift_at_s: float = 0.5, engine_torque_Nm: float = 200.0):
        self.channel, self.shift_at_s, self.engine_torque_Nm = channel, shift_at_s, engine_torque_Nm
        self.bus = self.tcu = None

    def make_tcu(self, bus: can.BusABC) -> DiagnosticTcu:
        """The TCU on the bus (a subclass makes another)."""
        return DiagnosticTcu(bus, shift_at_s=self.shift_at_s, engine_torque_Nm=self.engine_torque_Nm)

    def bind(self, output_names, input_names) -> None:
        # the controller interface's hook to resolve signal names; this TCU talks to the plant over CAN only
        return None

    def initial_inputs(self) -> dict[str, float]:
        return {}

    def update(self, t_s: float, y, u) -> None:
        if self.tcu is None:  # the bus is opened by the first task, not when the test file is checked
            self.bus = can.Bus(interface="virtual", channel=self.channel, receive_own_messages=False)
            self.tcu = self.make_tcu(self.bus)
        self.tcu.cycle(t_s, 0.01)

    def close(self) -> None:
        if self.bus is not None:
            self.bus.shutdown()
            self.bus = None
