"""The DCT message set: a launch in 1st gear closed over CAN, and gear commands outside the allowed set.

The TCU preselects 1st gear on the odd shaft, waits until the plant reports
the synchronizer locked, slips clutch 1 at 5 bar and clamps it at 12 bar
once the plant reports 1st gear engaged (HIL_DctState): a loop closed on
CAN feedback.  The speeds it receives then obey the
kinematics of the engaged gear: engine speed = odd shaft speed (clutch 1
stuck) = 3.5 x 4.0 output speed (gear 1 and final drive of configs/dct.toml).
"""

from __future__ import annotations

import math

import can
import cantools
import pytest

from can_support import BACKENDS, ROOT, Harness, wait_until
from io_adapters.can_e2e import E2EDecoder, E2EEncoder

DBC = cantools.database.load_file(str(ROOT / "configs" / "dct.dbc"))
CMD = DBC.get_message_by_name("TCU_DctCmd")
ENG = DBC.get_message_by_name("ENG_Torque")
LOAD = DBC.get_message_by_name("ENV_RoadLoad")


class DctTcu:
    def __init__(self, bus):
        self.bus = bus
        self.cmd = E2EEncoder(CMD, "DctCmd_CRC", "DctCmd_Counter", 0x0100)
        self.eng = E2EEncoder(ENG, "EngTorque_CRC", "EngTorque_Counter", 0x0110)
        self.load = E2EEncoder(LOAD, "RoadLoad_CRC", "RoadLoad_Counter", 0x0120)
        self.dec = {}
        for name, prefix, did in (("HIL_DctSpeeds", "DctSpeeds", 0x200), ("HIL_DctOutput", "DctOutput", 0x201),
                                  ("HIL_DctState", "DctState", 0x220)):
            m = DBC.get_message_by_name(name)
            self.dec[m.frame_id] = (name, E2EDecoder(m, f"{prefix}_CRC", f"{prefix}_Counter", did))
        self.rx: dict = {}
        self.e2e_errors = 0
        self.p_c1 = 0.0
        self.stuck_seen_at = None

    def receive(self):
        while (m := self.bus.recv(0.0)) is not None:
            if m.arbitration_id in self.dec:
                name, dec = self.dec[m.arbitration_id]
                v = dec.decode(bytes(m.data))
                if v is None:
                    self.e2e_errors += 1
                else:
                    self.rx[name] = v

    def cycle(self, t: float) -> int:
        """The 10 ms task: 1st gear preselected at once; from 0.3 s the launch of the paper's scenario
        (configs/dct.toml, scenarios/dct_upshift.toml): engine torque to 200 N m and clutch 1 from the
        kiss point to 5 bar in 0.2 s, then 12 bar once the plant reports 1st gear engaged."""
        self.receive()
        state = self.rx.get("HIL_DctState")
        f = min(max((t - 0.3) / 0.2, 0.0), 1.0)
        torque = 200.0 * f
        if t >= 0.3 and state is not None and state["SyncOddLocked"] == 1:  # 1st gear in: the clutch may close
            if state["GearActual"] == 1 and self.stuck_seen_at is None:
                self.stuck_seen_at = t
            self.p_c1 = 12.0 if self.stuck_seen_at is not None else 1.0 + 4.0 * f
        frames = [(CMD, self.cmd.encode({"GearOddCmd": 1, "GearEvenCmd": 0, "PressureCmd_C1": self.p_c1,
                                         "PressureCmd_C2": 0.0})),
                  (ENG, self.eng.encode({"EngineTorque": torque}))]
        if round(t * 100) % 10 == 0:
            frames.append((LOAD, self.load.encode({"RoadLoad": 55.0 * f})))
        for msg, data in frames:
            self.bus.send(can.Message(arbitration_id=msg.frame_id, is_extended_id=False, data=data))
        return len(frames)


@pytest.mark.parametrize("backend", BACKENDS)
def test_launch_in_first_gear_over_can(backend):
    with Harness("dct", backend=backend) as h:
        bus = h.peer()
        try:
            tcu = DctTcu(bus)
            sent = 0
            for c in range(150):  # 1.5 s
                sent += tcu.cycle(c * 0.01)
                wait_until(lambda: h.adapter.rx_handled >= sent, what="the command cycle")
                h.run(10)
            tcu.receive()
        finally:
            bus.shutdown()
        assert tcu.e2e_errors == 0 and h.adapter.status()["rx"]["rejected_total"] == 0
        assert tcu.stuck_seen_at is not None and 0.5 < tcu.stuck_seen_at < 1.4
        st = tcu.rx["HIL_DctState"]
        assert (st["GearActual"], st["Stuck_C1"], st["SyncOddLocked"], st["SelectedOdd"]) == (1, 1, 1, 1)
        sp, out = tcu.rx["HIL_DctSpeeds"], tcu.rx["HIL_DctOutput"]
        assert sp["EngineSpeed"] == sp["OddShaftSpeed"]  # clutch 1 stuck
        assert sp["OddShaftSpeed"] / out["OutputSpeed"] == pytest.approx(3.5 * 4.0, rel=0.01)  # 0.5 rpm steps
        # vehicle speed = wheel speed x 0.31 m dynamic radius, both from the same frame
        wheel_rad_s = out["WheelSpeed"] * 2.0 * math.pi / 60.0
        assert out["VehicleSpeed"] == pytest.approx(wheel_rad_s * 0.31 * 3.6, abs=0.02 + 0.26 * 2 * math.pi / 60 * 1.2)


@pytest.mark.parametrize("backend", BACKENDS)
def test_gear_commands_outside_the_allowed_set_are_rejected(backend):
    with Harness("dct", backend=backend) as h:
        bus = h.peer()
        enc = E2EEncoder(CMD, "DctCmd_CRC", "DctCmd_Counter", 0x0100)
        n = 0
        try:
            for odd, even, why in ((1, 2, None), (2, 2, "GearOddCmd = 2 is not an allowed value of gear_odd"),
                                   (3, 5, "GearEvenCmd = 5 is not an allowed value of gear_even"),
                                   (3, 4, None)):
                bus.send(can.Message(arbitration_id=CMD.frame_id, is_extended_id=False,
                                     data=enc.encode({"GearOddCmd": odd, "GearEvenCmd": even, "PressureCmd_C1": 0.0,
                                                      "PressureCmd_C2": 0.0})))
                n += 1
                h.wait_frames(n)
                h.run(1)
                u = h.plant.input_dict()
                if why is None:
                    assert (u["gear_odd"], u["gear_even"]) == (odd, even)
                else:
                    assert h.adapter.last_reject == f"TCU_DctCmd (0x100): {why}"
                    assert (u["gear_odd"], u["gear_even"]) == (1, 2)  # unchanged
        finally:
            bus.shutdown()
        assert h.adapter.status()["rx"]["rejected"]["out_of_range"] == 2
