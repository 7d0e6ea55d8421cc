"""An ECU emulator closes a Powershift shift over CAN (virtual bus always, vcan where available).

The emulator encodes its commands from the DBC with cantools (an encoder
independent of the adapter's compiled layouts), protects them with its own
CRC and counter, closes the shift on the speeds it receives, and checks the
E2E protection of every frame the plant sends.
"""

from __future__ import annotations

import math

import pytest

from can_support import BACKENDS, Harness, load_example, wait_until

tcu_mod = load_example("ecu_emulator")

RPM = 60.0 / (2.0 * math.pi)


def drive(h: Harness, tcu, seconds: float) -> None:
    """TCU task every 10 ms, plant tick every 1 ms; each command cycle is received before the next tick."""
    cycles = int(round(seconds / 0.01))
    for c in range(cycles):
        before = h.adapter.rx_handled
        tcu.cycle(c * 0.01, 0.01)
        wait_until(lambda: h.adapter.rx_handled >= before + 3, what="the command cycle")
        h.run(10)
    tcu.receive()


@pytest.mark.parametrize("backend", BACKENDS)
def test_ecu_emulator_closes_a_shift(backend):
    with Harness(backend=backend) as h:
        bus = h.peer()
        try:
            tcu = tcu_mod.PowershiftTcu(bus, shift_at_s=0.3, engine_torque_Nm=200.0)
            drive(h, tcu, 1.0)
        finally:
            bus.shutdown()
        r = tcu.result
        y = h.plant.output_dict()
        # the shift went through every phase and closed on the measured slip
        assert [p for _, p in r.phases] == ["hold", "torque", "inertia", "lock"]
        assert r.closed_at_s is not None and 0.5 <= r.closed_at_s <= 0.9
        # the plant is in gear 3 = clutches 2, 3, 6 (paper's R: stage pairs 1:2, 1:4, 1:4)
        assert h.plant.gear_clutches(3) == (2, 3, 6)
        assert y["gear"] == 3 and y["stuck_c1"] == 0 and y["stuck_c2"] == 1
        # ...and the TCU saw it on CAN: gear actual, stuck flags, the 1:2 pair's speed ratio
        assert r.gear_actual == 3
        assert r.stuck == {1: 0, 2: 1, 3: 1, 4: 0, 5: 0, 6: 1, 7: 0, 8: 0}
        assert r.shaft2_rpm == pytest.approx(-r.engine_rpm / 2.0, abs=1.0)  # 0.5 rpm quantisation
        # every command was accepted, every plant frame passed the TCU's E2E check
        st = h.adapter.status()
        assert st["rx"]["accepted"] == r.commands_sent == 300
        assert st["rx"]["rejected_total"] == 0 and st["rx"]["timeouts"] == 0
        # 1 s of HIL_SpeedsA, HIL_SpeedsB, HIL_ClutchState (10 ms) and HIL_Status, HIL_RxDiag (100 ms)
        assert r.e2e_errors == 0 and r.frames_received == 3 * 100 + 2 * 10
        assert r.watchdog_state == 0 and r.commands_fresh == 1
        assert len(h.feeds) >= 990  # fed on every tick once all three command messages were fresh


@pytest.mark.parametrize("backend", BACKENDS)
def test_speed_frames_carry_the_plant_speeds(backend):
    """The last HIL_SpeedsA frame holds w_1..w_3 of the tick that sent it, in rpm at 0.5 rpm/bit."""
    import cantools

    with Harness(backend=backend) as h:
        bus = h.peer()
        try:
            db = cantools.database.load_file(str(tcu_mod.DBC_POWERSHIFT))
            speeds = db.get_message_by_name("HIL_SpeedsA")
            h.run(20)  # writes of ticks 1..20
            frames = []
            while (m := bus.recv(0.05)) is not None:
                frames.append(m)
        finally:
            bus.shutdown()
        got = [f for f in frames if f.arbitration_id == speeds.frame_id]
        # ticks 10 and 20 are due (offset 0, period 10); the last one is from tick 20, the current state
        assert len(got) == 2
        v = speeds.decode(bytes(got[-1].data))
        y = h.plant.output_dict()
        for sig, port in (("EngineSpeed", "w_1"), ("Shaft2Speed", "w_2"), ("Shaft3Speed", "w_3")):
            assert v[sig] == round(y[port] * RPM / 0.5) * 0.5
