#!/usr/bin/env python3
"""A transmission control unit on CAN, closing a clutch-to-clutch shift against the plant server.

It is what a TCU does on a HIL bench, reduced to one shift: every 10 ms it sends the clutch pressure commands
and the engine torque, encoded from the DBC with cantools and E2E-protected (alive counter, CRC-8 SAE J1850),
and it reads the shaft speeds, clutch states and the server status the plant sends back (checking their E2E
protection too).

Powershift (``--plant powershift``): gear 1 (clutches 1, 3, 6) to gear 3 (clutches 2, 3, 6), a swap of the
first stage from clutch 1 (gear pair 1:3) to clutch 2 (gear pair 1:2):

1. *hold*: gear 1 at full pressure until ``--shift-at``;
2. *torque phase*: clutch 1 ramps down while clutch 2 fills and ramps up;
3. *inertia phase*: clutch 2 pressure rises until the slip of clutch 2,
   computed from the received speeds (``EngineSpeed + 2 * Shaft2Speed``,
   since the 1:2 pair locks ``w_1 + 2 w_2 = 0``), falls below the sync
   threshold: the shift is closed on measured speeds, as a TCU closes it;
4. *lock*: clutch 2 to full pressure.

DCT (``--plant dct``): a launch in 1st gear as in the paper's scenario (scenarios/dct_upshift.toml): 1st gear
preselected on the odd shaft; once the plant reports the synchronizer locked, engine torque to 200 N m and
clutch 1 from the kiss point to 5 bar in 0.2 s; when the plant reports 1st gear engaged (clutch 1 stuck),
12 bar.  ``--plant dct --fd`` does the same over the CAN FD set (configs/dct_fd.dbc; the server runs
``--io io_canfd_dct``).

8-speed automatic (``--plant zf8hp``, ``--fd`` for the CAN FD set, the server running ``--io io_zf8hp`` or ``--io
io_canfd_zf8hp``): a clutch-to-clutch upshift 1 -> 2 under load, clutch C off and clutch E on (1st: A, B, C; 2nd:
A, B, E).  With brakes A and B holding sun 1/2 and ring 1, set 2 turns ring 2 / sun 3 at 1.5 x the input speed, so
the slip of clutch E is ``1.5 * InputSpeed - Sun4Speed`` from the received speeds: torque phase (C down, E filled
to its torque pressure), inertia phase (E rising until that slip is below the sync threshold), then E locked at
full pressure.

On the local virtual bus (``io_adapters/vbus``, the default: ``--interface vbus --channel gearbox-hil``)::

    gearbox-hil serve powershift --io io_can     # configs/io_can.toml: the local virtual bus (vbus)
    python examples/ecu_emulator.py

or through a python-can-remote share (``--interface remote --channel ws://127.0.0.1:54701/``), on SocketCAN
(``--interface socketcan --channel vcan0``) or a real interface.  It prints the shift's timeline and exits 0 if
the shift closed.  ``--reset-control ENDPOINT`` (Powershift): the plant is reset through the server's control
endpoint once the bus is open, so the plant's clock starts with the task, however late this process started.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import can
import cantools

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from io_adapters.can.e2e import E2EDecoder, E2EEncoder  # noqa: E402

DBC_POWERSHIFT = ROOT / "configs" / "powershift.dbc"
DBC_DCT = ROOT / "configs" / "dct.dbc"
DBC_DCT_FD = ROOT / "configs" / "dct_fd.dbc"
DBC_ZF8HP = ROOT / "configs" / "zf8hp.dbc"
DBC_ZF8HP_FD = ROOT / "configs" / "zf8hp_fd.dbc"


@dataclass
class ShiftResult:
    """What the TCU saw (all values from CAN frames, speeds in rpm)."""

    phases: list = field(default_factory=list)  # (time s, phase)
    closed_at_s: float | None = None
    gear_actual: int | None = None
    stuck: dict = field(default_factory=dict)
    engine_rpm: float | None = None
    shaft2_rpm: float | None = None
    output_rpm: float | None = None
    watchdog_state: int | None = None
    commands_fresh: int | None = None
    hil_tick: int | None = None
    rx_diag: dict = field(default_factory=dict)
    frames_received: int = 0
    e2e_errors: int = 0
    commands_sent: int = 0
    cycles_silent: int = 0  # 10 ms cycles without commands because of a deliberate silence (--silence)
    late_max_ms: float = 0.0  # the latest start of a 10 ms task after its deadline (this process stalled)
    speeds_lost_at_s: float | None = None  # when the speed frames stopped and the TCU went silent (safe state)

    def as_dict(self) -> dict:
        return dict(self.__dict__)


class PowershiftTcu:
    """TCU + engine rest-bus of the Powershift message set (see the module docstring).

    Parameters
    ----------
    bus
        Any python-can bus on which the plant server is.
    shift_at_s
        Start of the shift (s, on the TCU's clock, which starts at the first command).
    engine_torque_Nm
        Engine torque sent on ENG_Torque throughout.
    speed_timeout_s
        A TCU's sensor check (0: off): when no valid ``HIL_SpeedsA`` frame has
        arrived while the plant's clock (``HIL_Status`` Tick, ms) ran this long
        (a starved process is no lost sensor), the shift logic has no speeds
        to close on, so the TCU enters its safe state and stops commanding; the
        server's command watchdog then takes the clutches to their safe pressures.
    silences_s
        Deliberate silences ``(start, duration)`` in s on the TCU's clock: the
        task keeps reading and deciding but sends no command frame, so a test
        knows how many command timeouts and watchdog trips the plant must
        count (each 10 ms message times out once per silence longer than its
        timeout; the watchdog trips once per silence longer than its own).
    """

    P_FULL = 16.0  # bar
    P_FILL = 2.0  # bar, on-coming clutch at the start of the torque phase
    P_TORQUE_END = 6.0  # bar, on-coming clutch at the end of the torque phase
    TORQUE_PHASE_S = 0.2
    INERTIA_RATE = 30.0  # bar/s
    SYNC_RPM = 10.0

    def __init__(self, bus: can.BusABC, dbc: str | Path = DBC_POWERSHIFT, shift_at_s: float = 0.5,
                 engine_torque_Nm: float = 200.0, speed_timeout_s: float = 0.0,
                 silences_s: tuple[tuple[float, float], ...] = ()):
        self.bus = bus
        self.silences_s = tuple((float(a), float(d)) for a, d in silences_s)
        self.speed_timeout_s = speed_timeout_s
        self._speeds_at: int | None = None  # the plant's Tick (ms) when the last valid HIL_SpeedsA came
        self.speeds_valid = 0  # valid HIL_SpeedsA frames received (a monitor on the TCU's own clock counts them)
        self.db = cantools.database.load_file(str(dbc))
        msg = self.db.get_message_by_name
        self.tx = {
            "TCU_ClutchCmdA": E2EEncoder(msg("TCU_ClutchCmdA"), "ClutchCmdA_CRC", "ClutchCmdA_Counter", 0x0100),
            "TCU_ClutchCmdB": E2EEncoder(msg("TCU_ClutchCmdB"), "ClutchCmdB_CRC", "ClutchCmdB_Counter", 0x0101),
            "ENG_Torque": E2EEncoder(msg("ENG_Torque"), "EngTorque_CRC", "EngTorque_Counter", 0x0110),
        }
        self.rx = {}
        for name, crc, cnt, did in (("HIL_SpeedsA", "SpeedsA_CRC", "SpeedsA_Counter", 0x200),
                                    ("HIL_SpeedsB", "SpeedsB_CRC", "SpeedsB_Counter", 0x201),
                                    ("HIL_ClutchState", "ClutchState_CRC", "ClutchState_Counter", 0x220),
                                    ("HIL_Status", "Status_CRC", "Status_Counter", 0x300),
                                    ("HIL_RxDiag", "RxDiag_CRC", "RxDiag_Counter", 0x301)):
            m = msg(name)
            self.rx[m.frame_id] = (name, E2EDecoder(m, crc, cnt, did))
        self.shift_at_s = shift_at_s
        self.engine_torque = engine_torque_Nm
        self.phase = "hold"
        self.p = [0.0] * 8
        self.p[0] = self.p[2] = self.p[5] = self.P_FULL
        self.result = ShiftResult()
        self._t_phase = 0.0

    # -- receiving -------------------------------------------------------------------
    def receive(self) -> None:
        """Take every frame waiting on the bus (non-blocking) and keep the newest values."""
        while True:
            m = self.bus.recv(0.0)
            if m is None:
                return
            self.take(m)

    def take(self, m: can.Message) -> None:
        """Decode one received frame of the message set (others are ignored)."""
        entry = self.rx.get(m.arbitration_id) if not m.is_extended_id else None
        if entry is None:
            return
        name, dec = entry
        r = self.result
        r.frames_received += 1
        values = dec.decode(bytes(m.data))
        if values is None:
            r.e2e_errors += 1
            return
        if name == "HIL_SpeedsA":
            self._speeds_at = r.hil_tick or 0
            self.speeds_valid += 1
            r.engine_rpm = float(values["EngineSpeed"])
            r.shaft2_rpm = float(values["Shaft2Speed"])
        elif name == "HIL_SpeedsB":
            r.output_rpm = float(values["OutputSpeed"])
        elif name == "HIL_ClutchState":
            r.gear_actual = int(values["GearActual"])
            r.stuck = {c: int(values[f"Stuck_C{c}"]) for c in range(1, 9)}
        elif name == "HIL_Status":
            r.watchdog_state = int(values["WatchdogState"])
            r.commands_fresh = int(values["CommandsFresh"])
            r.hil_tick = int(values["Tick"])
        elif name == "HIL_RxDiag":
            r.rx_diag = {k: int(v) for k, v in values.items() if not k.startswith("RxDiag_")}

    # -- the shift ----------------------------------------------------------------------
    def _enter(self, phase: str, t: float) -> None:
        self.phase = phase
        self._t_phase = t
        self.result.phases.append((round(t, 4), phase))

    def update(self, t: float, dt: float) -> None:
        """Advance the shift logic to time ``t`` (s) on the latest received speeds."""
        if not self.result.phases:
            self.result.phases.append((round(t, 4), "hold"))
        p = self.p
        if self.phase == "hold" and t >= self.shift_at_s:
            self._enter("torque", t)
        if self.phase == "torque":
            f = min((t - self._t_phase) / self.TORQUE_PHASE_S, 1.0)
            p[0] = self.P_FULL * (1.0 - f)
            p[1] = self.P_FILL + (self.P_TORQUE_END - self.P_FILL) * f
            if f >= 1.0:
                self._enter("inertia", t)
        elif self.phase == "inertia":
            p[1] = min(p[1] + self.INERTIA_RATE * dt, 40.0)
            r = self.result
            if r.engine_rpm is not None and abs(r.engine_rpm + 2.0 * r.shaft2_rpm) < self.SYNC_RPM:
                r.closed_at_s = round(t, 4)
                self._enter("lock", t)
        if self.phase == "lock":
            p[1] = self.P_FULL

    def send(self) -> None:
        """Send one cycle of commands (ClutchCmdA, ClutchCmdB, ENG_Torque)."""
        p = self.p
        frames = (
            ("TCU_ClutchCmdA", {f"PressureCmd_C{c}": p[c - 1] for c in (1, 2, 3, 4)}),
            ("TCU_ClutchCmdB", {f"PressureCmd_C{c}": p[c - 1] for c in (5, 6, 7, 8)}),
            ("ENG_Torque", {"EngineTorque": self.engine_torque}),
        )
        for name, values in frames:
            enc = self.tx[name]
            self.bus.send(can.Message(arbitration_id=enc.message.frame_id, is_extended_id=False,
                                      data=enc.encode(values)))
            self.result.commands_sent += 1

    def cycle(self, t: float, dt: float) -> None:
        """One 10 ms task of the TCU: read, check the speed sensors, decide, send (or stay silent)."""
        self.receive()
        r = self.result
        if r.speeds_lost_at_s is None and self.speed_timeout_s > 0 and self._speeds_at is not None \
                and (r.hil_tick or 0) - self._speeds_at > 1000 * self.speed_timeout_s:
            r.speeds_lost_at_s = round(t, 4)
            r.phases.append((round(t, 4), "safe state: speed frames lost"))
        if r.speeds_lost_at_s is not None:
            return  # safe state: no commands (a TCU that lost its sensors lets the plant's watchdog act)
        self.update(t, dt)
        if any(a <= t < a + d for a, d in self.silences_s):
            r.cycles_silent += 1
            return  # a deliberate silence: the test knows what the plant must count
        self.send()

    def wait_for_plant(self, timeout_s: float = 30.0) -> bool:
        """Wait until the plant's speed frames arrive (a TCU waits for its sensors before it drives)."""
        end = time.monotonic() + timeout_s
        while self.result.engine_rpm is None:
            if time.monotonic() > end:
                return False
            time.sleep(0.005)
            self.receive()
        return True

    def run(self, duration_s: float, period_s: float = 0.01, reset_control: str | None = None) -> ShiftResult:
        """Reset the plant through ``reset_control`` (a server's control endpoint), if given, wait for the plant,
        then run the TCU task on absolute deadlines for ``duration_s``."""
        if reset_control:  # the plant's time then starts with this task's (and faults set before are cleared)
            from io_adapters.zmq.client import HilClient

            with HilClient(reset_control, timeout_s=30.0).connect() as client:
                client.reset()
        if not self.wait_for_plant():
            return self.result
        period_ns = int(period_s * 1e9)
        start = time.monotonic_ns()
        deadline = start
        k = 0
        while k * period_s < duration_s:
            late_ms = (time.monotonic_ns() - deadline) / 1e6  # this process's own scheduling delay
            self.result.late_max_ms = max(self.result.late_max_ms, round(late_ms, 3))
            self.cycle(k * period_s, period_s)
            k += 1
            deadline += period_ns
            rem = deadline - time.monotonic_ns()
            if rem > 0:
                time.sleep(rem / 1e9)
        # the server's view of this TCU as last reported while it was still commanding: once it
        # stops, its commands go stale after 3 cycles and the status frames rightly say so
        # (the receive diagnostics too: a status frame sent after the commands went stale counts their timeout)
        self.receive()
        wd, fresh, diag = self.result.watchdog_state, self.result.commands_fresh, dict(self.result.rx_diag)
        time.sleep(3 * period_s)
        self.receive()
        self.result.watchdog_state, self.result.commands_fresh, self.result.rx_diag = wd, fresh, diag
        return self.result


class _RestBusTask:
    """What the DCT's and the 8-speed automatic's emulated TCUs share: their frames out, and their task.

    A subclass sets ``bus``, ``fd``, ``rx``, ``commands_sent`` and defines ``receive()`` and ``cycle(t, dt)``."""

    def _send(self, frames: list) -> int:
        """Encode and send ``(encoder, values)`` pairs (FD frames with bit-rate switch on an FD set); their number."""
        for enc, values in frames:
            self.bus.send(can.Message(arbitration_id=enc.message.frame_id, is_extended_id=False, is_fd=self.fd,
                                      bitrate_switch=self.fd, data=enc.encode(values)))
        self.commands_sent += len(frames)
        return len(frames)

    def _run_task(self, ready_key: str, duration_s: float, period_s: float) -> None:
        """Wait (up to 30 s) until ``ready_key`` was received, then run ``cycle`` on absolute deadlines."""
        end = time.monotonic() + 30.0
        while ready_key not in self.rx and time.monotonic() < end:
            time.sleep(0.005)
            self.receive()
        period_ns = int(period_s * 1e9)
        deadline = time.monotonic_ns()
        k = 0
        while k * period_s < duration_s:
            self.cycle(k * period_s, period_s)
            k += 1
            deadline += period_ns  # absolute deadlines: a late cycle does not shift the ones after it
            rem = deadline - time.monotonic_ns()
            if rem > 0:
                time.sleep(rem / 1e9)


class DctTcu(_RestBusTask):
    """TCU + engine and road-load rest-bus of the DCT message set: a launch in 1st gear (module docstring).

    ``engaged_at_s`` is when the plant reported 1st gear engaged (from HIL_DctState).  ``fd = True``
    runs the CAN FD set (configs/dct_fd.dbc: 64-byte frames with bit-rate switch, E2E profile 5);
    its one sensor frame is kept under each classic sensor frame's name, so the logic is the same.
    """

    def __init__(self, bus: can.BusABC, dbc: str | Path | None = None, launch_at_s: float = 0.3, fd: bool = False):
        self.bus = bus
        self.fd = fd
        self.db = cantools.database.load_file(str(dbc or (DBC_DCT_FD if fd else DBC_DCT)))
        msg = self.db.get_message_by_name
        self.dec = {}
        if fd:
            p5 = {"crc_variant": "autosar_p05"}
            self.cmd = E2EEncoder(msg("TCU_DctCmdFd"), "DctCmdFd_CRC", "DctCmdFd_Counter", 0x0180, **p5)
            self.eng = E2EEncoder(msg("ENG_TorqueFd"), "EngTorqueFd_CRC", "EngTorqueFd_Counter", 0x0190, **p5)
            self.load = E2EEncoder(msg("ENV_RoadLoadFd"), "RoadLoadFd_CRC", "RoadLoadFd_Counter", 0x01A0, **p5)
            for names, prefix, did in ((("HIL_DctSpeeds", "HIL_DctOutput", "HIL_DctState"), "DctSensorsFd", 0x280),
                                       (("HIL_Status",), "StatusFd", 0x300)):
                m = msg(f"HIL_{prefix}")
                self.dec[m.frame_id] = (names, E2EDecoder(m, f"{prefix}_CRC", f"{prefix}_Counter", did, **p5))
        else:
            self.cmd = E2EEncoder(msg("TCU_DctCmd"), "DctCmd_CRC", "DctCmd_Counter", 0x0100)
            self.eng = E2EEncoder(msg("ENG_Torque"), "EngTorque_CRC", "EngTorque_Counter", 0x0110)
            self.load = E2EEncoder(msg("ENV_RoadLoad"), "RoadLoad_CRC", "RoadLoad_Counter", 0x0120)
            for name, prefix, did in (("HIL_DctSpeeds", "DctSpeeds", 0x200), ("HIL_DctOutput", "DctOutput", 0x201),
                                      ("HIL_DctState", "DctState", 0x220), ("HIL_Status", "Status", 0x300)):
                m = msg(name)
                self.dec[m.frame_id] = ((name,), E2EDecoder(m, f"{prefix}_CRC", f"{prefix}_Counter", did))
        self.rx: dict = {}
        self.e2e_errors = 0
        self.frames_received = 0
        self.commands_sent = 0
        self.launch_at_s = launch_at_s
        self.p_c1 = 0.0
        self.engaged_at_s: float | None = None

    def receive(self) -> None:
        """Take every frame waiting on the bus (non-blocking) and keep the newest values per message."""
        while (m := self.bus.recv(0.0)) is not None:
            if m.arbitration_id in self.dec:
                names, dec = self.dec[m.arbitration_id]
                self.frames_received += 1
                v = dec.decode(bytes(m.data))
                if v is None or bool(m.is_fd) != self.fd:
                    self.e2e_errors += 1
                else:
                    for name in names:
                        self.rx[name] = v

    def cycle(self, t: float, dt: float = 0.01) -> int:
        """One 10 ms task at TCU time ``t`` (s): read, decide, send; returns the number of frames sent."""
        self.receive()
        state = self.rx.get("HIL_DctState")
        f = min(max((t - self.launch_at_s) / 0.2, 0.0), 1.0)
        if t >= self.launch_at_s and state is not None and state["SyncOddLocked"] == 1:  # 1st gear in
            if state["GearActual"] == 1 and self.engaged_at_s is None:
                self.engaged_at_s = round(t, 4)
            self.p_c1 = 12.0 if self.engaged_at_s is not None else 1.0 + 4.0 * f
        frames = [(self.cmd, {"GearOddCmd": 1, "GearEvenCmd": 0, "PressureCmd_C1": self.p_c1, "PressureCmd_C2": 0.0}),
                  (self.eng, {"EngineTorque": 200.0 * f})]
        if round(t / dt) % 10 == 0:
            frames.append((self.load, {"RoadLoad": 55.0 * f}))
        return self._send(frames)

    def run(self, duration_s: float, period_s: float = 0.01) -> dict:
        """Wait for the plant's frames, then run the task on absolute deadlines for ``duration_s``."""
        self._run_task("HIL_DctSpeeds", duration_s, period_s)
        time.sleep(3 * period_s)
        self.receive()
        return {"engaged_at_s": self.engaged_at_s, "frames_received": self.frames_received,
                "e2e_errors": self.e2e_errors, "commands_sent": self.commands_sent, **self.rx}


class Zf8hpTcu(_RestBusTask):
    """TCU + engine and load rest-bus of the 8-speed automatic: the upshift 1 -> 2 (module docstring).

    ``fd = True`` runs the CAN FD set (configs/zf8hp_fd.dbc: 64-byte frames with bit-rate switch,
    E2E profile 5), else the classic set (configs/zf8hp.dbc, CRC-8).  The received values of all
    sensor frames are merged into ``rx`` (the FD set carries them in one frame).  ``phases`` lists
    (time s, phase); ``closed_at_s`` is when the slip of clutch E fell below ``SYNC_RPM``.
    """

    P_FULL = 12.0  # bar
    P_FILL = 1.8  # bar, clutch E at its kiss point when the torque phase starts
    P_TORQUE_END = 5.5  # bar, clutch E at the end of the torque phase
    TORQUE_PHASE_S = 0.1
    INERTIA_RATE = 10.0  # bar/s, clutch E during the inertia phase
    SYNC_RPM = 10.0
    INPUT_TORQUE_NM = 250.0
    LOAD_NM = 60.0

    def __init__(self, bus: can.BusABC, fd: bool = True, shift_at_s: float = 0.5):
        self.bus = bus
        self.fd = fd
        self.db = cantools.database.load_file(str(DBC_ZF8HP_FD if fd else DBC_ZF8HP))
        msg = self.db.get_message_by_name
        sfx, p5 = ("Fd", {"crc_variant": "autosar_p05"}) if fd else ("", {})
        base = 0x180 if fd else 0x100
        self.cmd = E2EEncoder(msg(f"TCU_ShiftCmd{sfx}"), f"ShiftCmd{sfx}_CRC", f"ShiftCmd{sfx}_Counter", base, **p5)
        self.eng = E2EEncoder(msg(f"ENG_Torque{sfx}"), f"EngTorque{sfx}_CRC", f"EngTorque{sfx}_Counter",
                              base + 0x10, **p5)
        self.load = E2EEncoder(msg(f"ENV_Load{sfx}"), f"EnvLoad{sfx}_CRC", f"EnvLoad{sfx}_Counter", base + 0x20, **p5)
        rx = ((("SensorsFd", 0x280), ("StatusFd", 0x300)) if fd else
              (("Speeds", 0x200), ("Pressures", 0x210), ("ShiftState", 0x220), ("Status", 0x300)))
        self.dec = {}
        for prefix, did in rx:
            m = msg(f"HIL_{prefix}")
            self.dec[m.frame_id] = E2EDecoder(m, f"{prefix}_CRC", f"{prefix}_Counter", did, **p5)
        self.rx: dict = {}
        self.e2e_errors = self.frames_received = self.commands_sent = 0
        self.shift_at_s = shift_at_s
        self.p = {"A": self.P_FULL, "B": self.P_FULL, "C": self.P_FULL, "D": 0.0, "E": 0.0}
        self.phase = "hold"
        self.phases: list = []
        self.closed_at_s: float | None = None
        self._t_phase = 0.0

    def receive(self) -> None:
        """Take every frame waiting on the bus (non-blocking) and keep the newest values."""
        while (m := self.bus.recv(0.0)) is not None:
            dec = self.dec.get(m.arbitration_id) if not m.is_extended_id else None
            if dec is None:
                continue
            self.frames_received += 1
            v = dec.decode(bytes(m.data))
            if v is None or bool(m.is_fd) != self.fd:
                self.e2e_errors += 1
            else:
                self.rx.update(v)

    def slip_e_rpm(self) -> float | None:
        """Slip of clutch E (ring 2 / sun 3 against sun 4 / ring 3) from the received speeds, rpm."""
        if "InputSpeed" not in self.rx:
            return None
        return 1.5 * self.rx["InputSpeed"] - self.rx["Sun4Speed"]

    def _enter(self, phase: str, t: float) -> None:
        self.phase, self._t_phase = phase, t
        self.phases.append((round(t, 4), phase))

    def update(self, t: float, dt: float) -> None:
        """Advance the shift logic to time ``t`` (s) on the latest received speeds."""
        if not self.phases:
            self.phases.append((round(t, 4), "hold"))
        p = self.p
        if self.phase == "hold" and t >= self.shift_at_s and self.rx.get("GearActual") == 1:
            self._enter("torque", t)
        if self.phase == "torque":
            f = min((t - self._t_phase) / self.TORQUE_PHASE_S, 1.0)
            p["C"] = self.P_FULL * (1.0 - f)
            p["E"] = self.P_FILL + (self.P_TORQUE_END - self.P_FILL) * f
            if f >= 1.0:
                self._enter("inertia", t)
        elif self.phase == "inertia":
            p["E"] = min(p["E"] + self.INERTIA_RATE * dt, self.P_FULL)
            slip = self.slip_e_rpm()
            if slip is not None and slip < self.SYNC_RPM:
                self.closed_at_s = round(t, 4)
                self._enter("lock", t)
        if self.phase == "lock":
            p["E"] = self.P_FULL

    def cycle(self, t: float, dt: float = 0.01) -> int:
        """One 10 ms task at TCU time ``t`` (s): read, decide, send; returns the number of frames sent."""
        self.receive()
        self.update(t, dt)
        ramp = min(t / 0.3, 1.0)  # input torque up over the first 0.3 s, as scenarios/zf8hp_shifts.toml
        frames = [(self.cmd, {f"PressureCmd_{e}": v for e, v in self.p.items()}),
                  (self.eng, {"EngineTorque": self.INPUT_TORQUE_NM * ramp})]
        if round(t / dt) % 10 == 0:
            frames.append((self.load, {"LoadTorque": self.LOAD_NM}))
        return self._send(frames)

    def run(self, duration_s: float, period_s: float = 0.01) -> dict:
        """Wait for the plant's frames, then run the task on absolute deadlines for ``duration_s``."""
        self._run_task("InputSpeed", duration_s, period_s)
        self.receive()
        return {"phases": self.phases, "closed_at_s": self.closed_at_s, "frames_received": self.frames_received,
                "e2e_errors": self.e2e_errors, "commands_sent": self.commands_sent, **self.rx}


def open_bus(interface: str, channel: str, **options) -> can.BusABC:
    """``can.Bus``; the local virtual bus also from a checkout where the project is not installed."""
    if interface == "vbus":
        from io_adapters.vbus import register  # adds the interface name the installed entry point gives

        register()
    return can.Bus(interface=interface, channel=channel, **options)


def _silence(text: str) -> tuple[float, float]:
    """``START:DURATION`` in s, both >= 0, for ``--silence``."""
    try:
        start, duration = (float(x) for x in text.split(":"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected START:DURATION in s, e.g. 0.2:0.15") from None
    if not (start >= 0.0 and duration > 0.0):
        raise argparse.ArgumentTypeError(f"{text!r}: START must be >= 0 and DURATION > 0")
    return start, duration


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--plant", choices=("powershift", "dct", "zf8hp"), default="powershift",
                    help="message set to drive")
    ap.add_argument("--interface", default="vbus", help="python-can interface (vbus, remote, socketcan, pcan, ...)")
    ap.add_argument("--channel", default="gearbox-hil", help="channel (vbus channel, share URL, vcan0, can0, ...)")
    ap.add_argument("--bitrate", type=int, default=500000)
    ap.add_argument("--fd", action="store_true",
                    help="DCT and zf8hp: the CAN FD set (serve dct --io io_canfd_dct, zf8hp --io io_canfd_zf8hp)")
    ap.add_argument("--duration", type=float, default=1.5, help="seconds to run")
    ap.add_argument("--shift-at", type=float, default=0.5, help="start of the shift, s")
    ap.add_argument("--engine-torque", type=float, default=200.0, help="engine torque, N m")
    ap.add_argument("--speed-timeout", type=float, default=0.0,
                    help="safe state (stop commanding) when no speed frame for this long, s (0: off)")
    ap.add_argument("--silence", action="append", default=[], type=_silence, metavar="START:DURATION",
                    help="Powershift: send no commands for DURATION s from START s (repeatable)")
    ap.add_argument("--connect-timeout", type=float, default=30.0, help="keep trying to open the bus this long, s")
    ap.add_argument("--reset-control", metavar="ENDPOINT", help="Powershift: reset the plant through this control "
                    "endpoint once the bus is open (its time then starts with the task's)")
    ap.add_argument("--json", action="store_true", help="print the result as JSON")
    args = ap.parse_args(argv)
    end = time.monotonic() + args.connect_timeout
    while True:  # the server may still be starting
        try:
            fd = {"fd": True, "data_bitrate": 2000000} if args.fd else {}
            bus = open_bus(args.interface, args.channel, bitrate=args.bitrate, **fd)
            break
        except Exception as exc:
            if time.monotonic() > end:
                print(f"ecu_emulator: cannot open {args.interface} {args.channel}: {exc}", file=sys.stderr)
                return 2
            time.sleep(0.2)
    try:
        if args.plant == "dct":
            out = DctTcu(bus, fd=args.fd).run(args.duration)
        elif args.plant == "zf8hp":
            out = Zf8hpTcu(bus, fd=args.fd, shift_at_s=args.shift_at).run(args.duration)
        else:
            tcu = PowershiftTcu(bus, shift_at_s=args.shift_at, engine_torque_Nm=args.engine_torque,
                                speed_timeout_s=args.speed_timeout, silences_s=tuple(args.silence))
            res = tcu.run(args.duration, reset_control=args.reset_control)
    finally:
        bus.shutdown()
    if args.plant == "zf8hp":
        print(json.dumps(out) if args.json else "phases: " + ", ".join(f"{p} at {t:.3f} s" for t, p in out["phases"])
              + f"\nshift 1 -> 2 closed at {out['closed_at_s']} s; gear actual {out.get('GearActual')}; "
              f"input {out.get('InputSpeed')} rpm, output {out.get('OutputSpeed')} rpm; frames received "
              f"{out['frames_received']}, E2E errors {out['e2e_errors']}")
        return 0 if out["closed_at_s"] is not None and out.get("GearActual") == 2 else 1
    if args.plant == "dct":
        print(json.dumps(out) if args.json else f"1st gear engaged at {out['engaged_at_s']} s; "
              f"frames received {out['frames_received']}, E2E errors {out['e2e_errors']}; last state "
              f"{out.get('HIL_DctState')}; speeds {out.get('HIL_DctSpeeds')}")
        return 0 if out["engaged_at_s"] is not None else 1
    if args.json:
        print(json.dumps(res.as_dict()))
    else:
        print("phases:", ", ".join(f"{p} at {t:.3f} s" for t, p in res.phases))
        print(f"shift closed at: {res.closed_at_s} s; gear actual {res.gear_actual}; "
              f"engine {res.engine_rpm} rpm, shaft 2 {res.shaft2_rpm} rpm")
        print(f"frames received {res.frames_received}, E2E errors {res.e2e_errors}, "
              f"server watchdog {res.watchdog_state}, server rx diag {res.rx_diag}")
        if res.speeds_lost_at_s is not None:
            print(f"speed frames lost at {res.speeds_lost_at_s} s: safe state, commands stopped")
    return 0 if res.closed_at_s is not None else 1


if __name__ == "__main__":
    sys.exit(main())
