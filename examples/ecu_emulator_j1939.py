#!/usr/bin/env python3
"""A tractor TCU on J1939, closing a Powershift 1 -> 3 shift the operator requests.

The plant server plays the engine ECU and the vehicle ECU
(``gearbox-hil serve powershift --io io_j1939_powershift``); this TCU:

* claims address 0x03 with its NAME (J1939-81) at start-up;
* waits for the vehicle ECU's TC1 to request gear 3 (SPN 525), then shifts
  as ``examples/ecu_emulator.py`` does (clutch 1 to clutch 2, closed on the
  slip computed from the received speeds), its valve commands on the
  proprietary frames of configs/powershift.dbc;
* during the torque and inertia phases limits the engine torque with TSC1
  (override mode 3, speed/torque limit, ``--torque-limit`` percent of the
  engine's reference torque) and releases it (mode 0) when the shift is done;
* sends ETC1 every 10 ms (shift in process, input and output shaft speeds)
  and ETC2 every 100 ms (selected and current gear, and the actual gear
  ratio: input over output speed as received, the plant's ``ratio``);
* reads the engine speed from EEC1 and the wheel-based speed from CCVS1;
* answers UDS (the diagnostics of ``examples/ecu_diagnostics.py``: DTCs fed by
  its own monitoring, e.g. the speed sensor's signal lost, DIDs, a routine)
  over ISO-TP with normal fixed addressing, 0x18DA03F1 / 0x18DAF103 for the
  tester at 0xF1 (:mod:`io_adapters.can.j1939_uds`).

Run against the server on the local virtual bus (the default here:
``--interface vbus --channel gearbox-hil``)::

    gearbox-hil serve powershift --io io_j1939_powershift
    python examples/ecu_emulator_j1939.py

The request for gear 3 comes from the server's vehicle ECU (its
``requested_gear`` option or ``J1939Adapter.request_gear``).  Exits 0 if the
shift closed.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import can
import cantools

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples"))

from ecu_diagnostics import DiagnosticTcu, DiagnosticTcuController  # noqa: E402
from ecu_emulator import open_bus  # noqa: E402
from io_adapters.can import j1939 as j  # noqa: E402
from io_adapters.can.j1939_uds import TESTER_ADDRESS, j1939_addressing  # noqa: E402

DBC_J1939 = ROOT / "configs" / "powershift_j1939.dbc"
TCU_NAME = j.name_pack(3, 0x2A, function=3, industry_group=2)  # agricultural group, transmission function
RPM_PER_RAD_S = 60.0 / (2.0 * 3.141592653589793)
RATIO_MIN_OUTPUT_RPM = 1.0 * RPM_PER_RAD_S  # below it the ratio is 0, as the plant's ``ratio`` output
ETC2_RATIO_MAX = 64.255  # SPN 526's range


def gear_ratio(input_rpm: float | None, output_rpm: float | None) -> float:
    """ETC2's actual gear ratio (SPN 526): input over output speed, 0 below 1 rad/s output speed, in 0..64.255."""
    if input_rpm is None or output_rpm is None or abs(output_rpm) <= RATIO_MIN_OUTPUT_RPM:
        return 0.0
    return min(max(input_rpm / output_rpm, 0.0), ETC2_RATIO_MAX)


class J1939Tcu(DiagnosticTcu):
    """The Powershift TCU of examples/ecu_emulator.py on a J1939 network, with the UDS server of
    examples/ecu_diagnostics.py on normal fixed addressing (module docstring)."""

    ADDRESS = 0x03

    def __init__(self, bus: can.BusABC, torque_limit_pct: float = 15.0, target_gear: int = 3,
                 tester_address: int = TESTER_ADDRESS):
        super().__init__(bus, shift_at_s=float("inf"), addressing=j1939_addressing(self.ADDRESS, tester_address))
        self.j = cantools.database.load_file(str(DBC_J1939))
        self.node = j.Node("tcu", TCU_NAME, self.ADDRESS, {})
        self.torque_limit_pct = torque_limit_pct
        self.target_gear = target_gear
        self.requested_gear: int | None = None
        self.eec1: dict = {}
        self.ccvs1: dict = {}
        self.claims_seen: dict[int, int] = {}  # source address -> NAME of every address claim seen
        self._now_ms = 0.0
        self._k = 0

    def take(self, m: can.Message) -> None:
        if not m.is_extended_id or self.uds.accepts(m):  # UDS (PGN 0xDA00 / 0xDB00) before J1939's own handling
            super().take(m)
            return
        self._send_all(self.node.on_frame(m.arbitration_id, bytes(m.data), self._now_ms))
        _, pgn, da, sa = j.parse_id(m.arbitration_id)
        if pgn == j.PGN_ADDRESS_CLAIMED and len(m.data) == 8:
            self.claims_seen[sa] = int.from_bytes(bytes(m.data), "little")
        elif pgn == j.PGN_TC1 and da == self.ADDRESS:
            self.requested_gear = int(self.j.get_message_by_name("TC1").decode(bytes(m.data))["TransRequestedGear"])
        elif pgn == j.PGN_EEC1:
            self.eec1 = self.j.get_message_by_name("EEC1").decode(bytes(m.data), decode_choices=False)
        elif pgn == j.PGN_CCVS1:
            self.ccvs1 = self.j.get_message_by_name("CCVS1").decode(bytes(m.data), decode_choices=False)

    def _send_all(self, frames) -> None:
        for fid, data in frames:
            self.bus.send(can.Message(arbitration_id=fid, is_extended_id=True, data=data))

    def update(self, t: float, dt: float) -> None:
        r = self.result
        if self.phase == "hold" and self.node.can_send and self.requested_gear == self.target_gear \
                and r.gear_actual == 1 and self.shift_at_s == float("inf"):
            self.shift_at_s = t
        super().update(t, dt)

    def send(self) -> None:
        """Valve commands (proprietary frames, no engine torque: the engine is on J1939), TSC1, ETC1, ETC2."""
        p = self.p
        for name, values in (("TCU_ClutchCmdA", {f"PressureCmd_C{c}": p[c - 1] for c in (1, 2, 3, 4)}),
                             ("TCU_ClutchCmdB", {f"PressureCmd_C{c}": p[c - 1] for c in (5, 6, 7, 8)})):
            enc = self.tx[name]
            self.bus.send(can.Message(arbitration_id=enc.message.frame_id, is_extended_id=False,
                                      data=enc.encode(values)))
            self.result.commands_sent += 1
        if not self.node.can_send:
            return
        shifting = self.phase in ("torque", "inertia")
        msg = self.j.get_message_by_name
        # ETC1's shaft speeds span 0 .. 8031.875 rpm (SPNs 191, 161): a faster shaft is sent at the top of the range
        rpm_in = min(max(self.result.engine_rpm or 0.0, 0.0), 8031.875)
        rpm_out = min(abs(self.result.output_rpm or 0.0), 8031.875)
        frames = [(msg("TSC1"), {"EngOverrideCtrlMode": 3 if shifting else 0, "EngRqedSpeedCtrlConditions": 0,
                                 "OverrideCtrlModePriority": 1, "EngRqedSpeed_SpeedLimit": 8031.875,
                                 "EngRqedTorque_TorqueLimit": self.torque_limit_pct if shifting else 125}),
                  (msg("ETC1"), {"TransDrivelineEngaged": 1, "TorqueConverterLockupEngaged": 3,
                                 "TransShiftInProcess": 1 if shifting else 0, "TransOutputShaftSpeed": rpm_out,
                                 "PercentClutchSlip": 0, "EngMomentaryOverspeedEnable": 0,
                                 "ProgressiveShiftDisable": 0, "TransInputShaftSpeed": rpm_in,
                                 "SrcAddrssOfCntrllngDvcForTrnsCtrl": 255})]
        if self._k % 10 == 0:
            gear = self.result.gear_actual or 0
            frames.append((msg("ETC2"), {"TransSelectedGear": self.requested_gear or gear,
                                         "TransActualGearRatio": gear_ratio(self.result.engine_rpm,
                                                                            self.result.output_rpm),
                                         "TransCurrentGear": gear,
                                         "TransRequestedRange": 0xFFFF, "TransCurrentRange": 0xFFFF}))
        for m, values in frames:
            self.bus.send(can.Message(arbitration_id=m.frame_id, is_extended_id=True,
                                      data=m.encode(values, strict=False)))

    def cycle(self, t: float, dt: float) -> None:
        """One 10 ms task: J1939 address claim and state, then the shift logic of the parent."""
        self._now_ms = t * 1e3
        if self.node.state == "off":
            self._send_all(self.node.start(self._now_ms))
        self._send_all(self.node.poll(self._now_ms))
        super().cycle(t, dt)
        self._k += 1


class J1939TcuController(DiagnosticTcuController):
    """:class:`J1939Tcu` as a controller class of a lockstep test file (its 10 ms task after every ten ticks on the
    server's virtual bus ``channel``): ``examples/benches/uds_j1939_speed_sensor_dtc.toml``."""

    def __init__(self, channel: str = "gearbox-hil-j1939-uds", torque_limit_pct: float = 15.0):
        super().__init__(channel)
        self.torque_limit_pct = torque_limit_pct

    def make_tcu(self, bus: can.BusABC) -> J1939Tcu:
        return J1939Tcu(bus, torque_limit_pct=self.torque_limit_pct)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--interface", default="vbus", help="python-can interface (vbus, remote, socketcan, pcan, ...)")
    ap.add_argument("--channel", default="gearbox-hil", help="channel (vbus channel, share URL, vcan0, can0, ...)")
    ap.add_argument("--bitrate", type=int, default=250000)
    ap.add_argument("--duration", type=float, default=2.0, help="seconds to run")
    ap.add_argument("--torque-limit", type=float, default=15.0, help="TSC1 torque limit during the shift, %%")
    ap.add_argument("--json", action="store_true", help="print the result as JSON")
    args = ap.parse_args(argv)
    bus = open_bus(args.interface, args.channel, bitrate=args.bitrate)
    try:
        tcu = J1939Tcu(bus, torque_limit_pct=args.torque_limit)
        res = tcu.run(args.duration)
    finally:
        bus.shutdown()
    out = {**res.as_dict(), "requested_gear": tcu.requested_gear, "address_state": tcu.node.state,
           "eec1": tcu.eec1, "ccvs1": tcu.ccvs1}
    print(json.dumps(out) if args.json else f"shift closed at {res.closed_at_s} s, gear {res.gear_actual}; "
          f"phases {res.phases}; address 0x03 {tcu.node.state}; EEC1 {tcu.eec1}")
    return 0 if res.closed_at_s is not None else 1


if __name__ == "__main__":
    sys.exit(main())
