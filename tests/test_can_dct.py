"""The DCT message set: a launch in 1st gear closed over CAN, and gear commands outside the allowed set.

The TCU preselects 1st gear on the odd shaft, waits until the plant reports
the synchronizer locked, slips clutch 1 up to 5 bar and clamps it at 12 bar
once the plant reports 1st gear engaged (HIL_DctState): a loop closed on
CAN feedback.  The speeds it receives then obey the kinematics of the
engaged gear: engine speed = odd shaft speed (clutch 1 stuck) = 3.5 x 4.0
output speed (gear 1 and final drive of configs/dct.toml).
"""

from __future__ import annotations

import math

import can
import cantools
import pytest

from can_support import BACKENDS, ROOT, Harness, load_example, wait_until
from io_adapters.can.e2e import E2EEncoder

DBC = cantools.database.load_file(str(ROOT / "configs" / "dct.dbc"))
CMD = DBC.get_message_by_name("TCU_DctCmd")
DctTcu = load_example("ecu_emulator").DctTcu  # the example's DCT TCU (examples/ecu_emulator.py --plant dct)


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
        assert tcu.engaged_at_s is not None and 0.5 < tcu.engaged_at_s < 1.4
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
