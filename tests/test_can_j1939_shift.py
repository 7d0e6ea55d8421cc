"""A Powershift 1 -> 3 shift over J1939 in lockstep: the operator's request on TC1, TSC1 honoured, ETC2 read back.

The plant runs a ``can`` adapter (the TCU's valve commands, the sensor
frames) and a ``j1939`` adapter (engine and vehicle ECU) on one virtual bus;
the TCU of examples/ecu_emulator_j1939.py claims its address, shifts when
TC1 requests gear 3 and limits the engine torque with TSC1 meanwhile.
"""

from __future__ import annotations

import math
import uuid

import can
import pytest

from can_support import load_example, wait_until
from io_adapters.base import LoopContext, create_adapter, new_tick_info
from io_adapters.can import j1939 as j
from plant_models.registry import load_plant

J1939Tcu = load_example("ecu_emulator_j1939").J1939Tcu
PERIOD = 0.001


class Bench:
    """The plant with a can and a j1939 adapter on one virtual bus, ticked as the loop does; ``bus`` is the TCU's."""

    def __init__(self, j1939_options: dict | None = None):
        self.plant = load_plant("powershift")
        ch = f"test-{uuid.uuid4().hex[:8]}"
        self.ctx = LoopContext(period_s=PERIOD, feed_watchdog=lambda ns: None, status=lambda: {},
                               tick_info=new_tick_info(), mode="lockstep")
        self.can = create_adapter("can", "can", {"interface": "virtual", "channel": ch, "receive_filters": True,
                                                 "message_set": "io_can_powershift_j1939"})
        self.j = create_adapter("j1939", "j1939", {"interface": "virtual", "channel": ch, **(j1939_options or {})})
        self.can.open(self.plant, self.ctx)
        self.j.open(self.plant, self.ctx)
        self.bus = can.Bus(interface="virtual", channel=ch)
        self.tick = 0
        self.torque_after_tick: list[float] = []

    def run(self, n):
        for _ in range(n):
            now = self.tick * int(PERIOD * 1e9)
            self.can.read(self.tick, now)
            self.j.read(self.tick, now)
            self.torque_after_tick.append(self.plant.input_dict()["engine_torque"])
            self.plant.step(PERIOD)
            self.tick += 1
            self.can.write(self.tick, now)
            self.can.pump(0)
            self.j.pump(0)

    def close(self):
        self.bus.shutdown()
        self.can.close()
        self.j.close()


def test_powershift_1_to_3_over_j1939_in_lockstep():
    b = Bench()
    try:
        tcu = J1939Tcu(b.bus, torque_limit_pct=15.0)
        sent = 0
        tsc1_limit_tick = None
        for c in range(200):  # 2 s, ten plant ticks per 10 ms TCU task
            if c == 40:
                b.j.request_gear(3)  # the operator's request, carried by the vehicle ECU's TC1
            phase_before = tcu.phase
            tcu.cycle(c * 0.01, 0.01)
            sent += 2
            wait_until(lambda: b.can.rx_handled >= sent, what="the command cycle")
            b.j.pump(0)  # the TCU's J1939 frames of this cycle, between ticks
            if tsc1_limit_tick is None and tcu.phase == "torque" and phase_before == "hold":
                tsc1_limit_tick = b.tick
            b.run(10)
        tcu.receive()
    finally:
        b.close()
    r = tcu.result
    assert [p for _, p in r.phases] == ["hold", "torque", "inertia", "lock"]
    assert r.closed_at_s is not None and r.gear_actual == 3
    assert b.plant.output_dict()["gear"] == 3
    # the TSC1 limit (mode 3, 15 % of 1000 N m) is in the plant input from the first tick after it arrived
    assert tsc1_limit_tick is not None and b.torque_after_tick[tsc1_limit_tick] == 150.0
    assert b.torque_after_tick[tsc1_limit_tick - 1] == 200.0
    assert b.torque_after_tick[-1] == 200.0  # released after the shift (mode 0)
    st = b.j.status()
    assert st["tcu"]["ETC2"]["TransCurrentGear"] == 3 and st["tcu"]["TSC1"]["EngOverrideCtrlMode"] == 0
    assert st["timeouts"] == 0 and st["decode_errors"] == 0
    assert {k: v["state"] for k, v in st["nodes"].items()} == {"engine": "claimed", "vehicle": "claimed"}
    assert tcu.node.state == "claimed" and set(tcu.claims_seen) == {0x00, 0x21}  # the engine and vehicle ECU
    assert tcu.requested_gear == 3
    assert tcu.eec1["EngSpeed"] == pytest.approx(b.plant.output_dict()["w_1"] * 60 / (2 * 3.141592653589793),
                                                 abs=60.0)  # one 10 ms EEC1 cycle of engine deceleration
    assert b.can.status()["rx"]["rejected_total"] == 0


def test_tsc1_timeout_counted_and_override_released():
    b = Bench()
    try:
        b.run(300)  # address claims stand
        tsc1 = j.frame_id(3, j.PGN_TSC1, 0x03, 0x00)
        b.bus.send(can.Message(arbitration_id=tsc1, is_extended_id=True, data=bytes((0x03, 0xFF, 0xFF, 125 + 10,
                                                                                     0xFF, 0xFF, 0xFF, 0xFF))))
        b.j.pump(0)
        b.run(1)
        assert b.torque_after_tick[-1] == 100.0  # 10 % of 1000 N m
        b.run(29)
        assert b.j.status()["timeouts_by_pgn"]["TSC1"] == 0 and b.torque_after_tick[-1] == 100.0
        b.run(3)  # more than 3 x 10 ms without TSC1: stale, counted once, released
        st = b.j.status()
        assert st["timeouts_by_pgn"]["TSC1"] == 1 and st["timeouts"] == 1
        assert b.torque_after_tick[-1] == 200.0
        b.run(100)
        assert b.j.status()["timeouts"] == 1
    finally:
        b.close()


def test_powershift_1_to_3_over_j1939_in_realtime():
    """The same shift with the real-time loop at 1 kHz and the TCU in a thread on its own 10 ms clock."""
    import threading
    import time

    from io_adapters.can.adapter import CanAdapter
    from io_adapters.can.restbus import J1939Adapter
    from server.realtime.loop_config import LoopConfig
    from server.realtime.runtime import assemble
    from server.realtime.watchdog import WatchdogConfig

    ch = f"rt-{uuid.uuid4().hex[:8]}"
    plant = load_plant("powershift")
    can_ad = CanAdapter("can", {"interface": "virtual", "channel": ch, "receive_filters": True,
                                "message_set": "io_can_powershift_j1939"})
    j_ad = J1939Adapter("j1939", {"interface": "virtual", "channel": ch})
    loop = assemble(plant, [can_ad, j_ad], LoopConfig(mode="realtime", rate_hz=1000.0, duration_s=3.5,
                                                      status_interval_s=0.0),
                    WatchdogConfig(timeout_s=0.1, hold_s=0.05, ramp_s=0.1)).loop
    loop.open()
    bus = can.Bus(interface="virtual", channel=ch)
    tcu = J1939Tcu(bus, torque_limit_pct=15.0)
    runner = threading.Thread(target=loop.run, daemon=True)
    runner.start()
    try:
        assert tcu.wait_for_plant(10.0)
        t0 = time.monotonic()
        k = 0
        while k < 250:  # 2.5 s of 10 ms cycles on absolute deadlines
            if k == 50:
                j_ad.request_gear(3)
            tcu.cycle(k * 0.01, 0.01)
            k += 1
            rem = t0 + k * 0.01 - time.monotonic()
            if rem > 0:
                time.sleep(rem)
            if not runner.is_alive():
                break
        tcu.receive()
    finally:
        runner.join(timeout=10)
        bus.shutdown()
        st = j_ad.status()
        loop.close()
    r = tcu.result
    assert [p for _, p in r.phases] == ["hold", "torque", "inertia", "lock"] and r.gear_actual == 3
    assert st["tsc1_applied"] > 0 and st["tcu"]["ETC2"]["TransCurrentGear"] == 3
    assert {v["state"] for v in st["nodes"].values()} == {"claimed"} and tcu.node.state == "claimed"


def test_tc1_requested_gear_set_by_the_control_channel_byte_by_byte():
    """``adapter_set`` on the control channel sets the gear the vehicle ECU's TC1 requests (SPN 525).

    TC1 (PGN 256, priority 3, from the vehicle ECU 0x21 to the TCU 0x03): byte 0 shift inhibit (00),
    lock-up disable (11: not available), driveline disengage (00), its top 2 bits unused (11); byte 1
    requested clutch slip; byte 2 the requested gear + 125 (J1939-71 offset -125); bytes 3-7 unused,
    0xFF as J1939-71 wants undefined bits.  A bad request changes nothing.
    """
    from io_adapters.can.adapter import CanAdapter
    from io_adapters.can.restbus import J1939Adapter
    from server.realtime.loop_config import LoopConfig
    from server.realtime.runtime import assemble

    ch = f"ctl-{uuid.uuid4().hex[:8]}"
    plant = load_plant("powershift")
    j_ad = J1939Adapter("j1939", {"interface": "virtual", "channel": ch})
    srv = assemble(plant, [CanAdapter("can", {"interface": "virtual", "channel": ch, "receive_filters": True,
                                              "message_set": "io_can_powershift_j1939"}), j_ad],
                   LoopConfig(mode="lockstep", rate_hz=1000.0))
    srv.loop.open()
    srv.loop.start()
    bus = can.Bus(interface="virtual", channel=ch)
    tc1_id = j.frame_id(3, j.PGN_TC1, 0x21, 0x03)
    assert tc1_id == 0x0C010321  # priority 3, PF 0x01 (PDU1), destination 0x03, source 0x21

    def tc1_frames(ticks: int) -> list[bytes]:
        out = []
        for _ in range(ticks // 10):  # 10 ms steps, as a lockstep client that serves a 10 ms TCU task
            assert srv.control.handle_now({"cmd": "step", "n": 10, "outputs": False})["ok"]
            while (m := bus.recv(0.0)) is not None:
                if m.arbitration_id == tc1_id:
                    out.append(bytes(m.data))
        return out

    try:
        before = tc1_frames(400)  # address claims stand after 250 ms, then TC1 every 50 ms
        assert before and set(before) == {bytes((0xCC, 0x00, 125 + 1)) + b"\xff" * 5}  # option requested_gear = 1
        rep = srv.control.handle_now({"cmd": "adapter_set", "adapter": "j1939", "set": {"requested_gear": 3}})
        assert rep["ok"] and rep["set"] == {"requested_gear": 3}
        after = tc1_frames(100)
        assert len(after) == 2 and set(after) == {bytes((0xCC, 0x00, 125 + 3)) + b"\xff" * 5}
        for bad, why in (({"requested_gear": 126}, "must be an integer in -125 .. 125"),
                         ({"requested_gear": 2.5}, "must be an integer"),
                         ({"gear": 2}, "has no settable value 'gear'"), ({}, "non-empty map")):
            rep = srv.control.handle_now({"cmd": "adapter_set", "adapter": "j1939", "set": bad})
            assert not rep["ok"] and why in rep["error"]["message"]
        rep = srv.control.handle_now({"cmd": "adapter_set", "adapter": "can", "set": {"requested_gear": 2}})
        assert not rep["ok"] and "takes none" in rep["error"]["message"]
        rep = srv.control.handle_now({"cmd": "adapter_set", "adapter": "nope", "set": {"requested_gear": 2}})
        assert not rep["ok"] and "no adapter 'nope'" in rep["error"]["message"]
        assert set(tc1_frames(100)) == {bytes((0xCC, 0x00, 125 + 3)) + b"\xff" * 5}  # unchanged by the bad ones
        srv.control.handle_now({"cmd": "adapter_set", "adapter": "j1939", "set": {"requested_gear": -1}})
        assert set(tc1_frames(100)) == {bytes((0xCC, 0x00, 125 - 1)) + b"\xff" * 5}  # reverse
    finally:
        bus.shutdown()
        srv.loop.close()


@pytest.mark.parametrize("response_s", [0.0, 0.05])
def test_tsc1_limit_acts_on_the_tractor_engine_intervention_by_the_next_tick(tmp_path, response_s):
    """On the tractor with its engine, TSC1 (mode 3) sets the engine's torque intervention input from the next tick.

    With an immediate intervention the engine torque is at the limit in that very tick; with the shipped
    50 ms response the run equals, bit for bit, a run whose torque_limit input is set directly at that tick.
    """
    from plant_models.config import resolve_config

    text = resolve_config("powershift_tractor").read_text()
    cfg = tmp_path / "tractor.toml"
    cfg.write_text(text.replace("intervention_time_s = 0.05", f"intervention_time_s = {response_s}"))
    plant, ref = load_plant(str(cfg)), load_plant(str(cfg))
    ch = f"tsc1-{uuid.uuid4().hex[:8]}"
    ctx = LoopContext(period_s=PERIOD, feed_watchdog=lambda ns: None, status=lambda: {}, tick_info=new_tick_info(),
                      mode="lockstep")
    ad = create_adapter("j1939", "j1939", {"interface": "virtual", "channel": ch})
    ad.open(plant, ctx)
    bus = can.Bus(interface="virtual", channel=ch)
    lim, i_t = plant.input_index("torque_limit"), plant.output_index("engine_torque")
    torques, ref_torques, limits = [], [], []
    try:
        assert ad.intervention and plant.u[lim] == 600.0
        for p in (plant, ref):
            p.u[p.input_index("pedal")] = 1.0
        for k in range(400):
            if k == 300:  # 20 % of the 1000 N m reference torque, from the TCU at 0x03 to the engine at 0x00
                bus.send(can.Message(arbitration_id=j.frame_id(3, j.PGN_TSC1, 0x03, 0x00), is_extended_id=True,
                                     data=bytes((0x03, 0xFF, 0xFF, 125 + 20, 0xFF, 0xFF, 0xFF, 0xFF))))
                ad.pump(0)
                ref.u[ref.input_index("torque_limit")] = 200.0
            ad.read(k, k * 1_000_000)
            limits.append(float(plant.u[lim]))
            plant.step(PERIOD)
            ref.step(PERIOD)
            torques.append(float(plant.y[i_t]))
            ref_torques.append(float(ref.y[i_t]))
            if k < 300:
                ad.pump(0)
    finally:
        bus.shutdown()
        ad.close()
    assert limits[299] == 600.0 and limits[300] == 200.0 and ad.counts["tsc1_applied"] == 1
    assert torques[299] > 250.0  # full pedal before the limit
    assert torques == ref_torques  # the bus path applies exactly what a direct input does, at the same tick
    if response_s == 0.0:
        assert torques[300] <= 200.0 and max(torques[300:]) <= 200.0
    else:
        assert 200.0 < torques[300] < torques[299]  # the limit's first-order response has begun
        # 100 ticks later the cap has closed in on 200 N m as 600 -> 200 with a 50 ms time constant (the engine's
        # own torque at full pedal is above it throughout)
        assert torques[-1] == pytest.approx(200.0 + 400.0 * math.exp(-0.1 / 0.05), rel=1e-3)


def test_tcu_sends_etc1_with_shaft_speeds_beyond_its_range_at_the_top_of_it():
    """A shaft faster than ETC1's 8031.875 rpm (a runaway engine in a long bench run) is sent as 8031.875 rpm
    (raw 0xFAFF, bytes 1-2 and 5-6), instead of the TCU's task dying on an encoder overflow."""
    ch = f"etc1-{uuid.uuid4().hex[:8]}"
    bus, rx = can.Bus(interface="virtual", channel=ch), can.Bus(interface="virtual", channel=ch)
    try:
        tcu = J1939Tcu(bus)
        tcu.node.state = "claimed"  # the address claim stood
        tcu.result.engine_rpm, tcu.result.output_rpm = 9000.0, -8500.0
        tcu.send()
        etc1 = j.frame_id(3, j.PGN_ETC1, 0x03, 0xFF)
        got = [bytes(m.data) for m in iter(lambda: rx.recv(0.05), None) if m.arbitration_id == etc1]
    finally:
        bus.shutdown()
        rx.shutdown()
    assert len(got) == 1 and got[0][1:3] == b"\xff\xfa" and got[0][5:7] == b"\xff\xfa"


def test_only_a_pause_of_the_tcu_itself_makes_its_10_ms_messages_stale():
    """The signature of the bench's extra timeouts: a TCU that skips its 10 ms task for more than 3 cycles
    makes ETC1 and TSC1 stale once each and ETC2 (100 ms, stale after 300 ms) not; a loop that stops ticking
    and pumping while the TCU keeps sending counts nothing (the frames are read, then the clock is checked)."""
    b = Bench()
    try:
        tcu = J1939Tcu(b.bus, torque_limit_pct=15.0)
        sent, c = 0, 0

        def task(ticks: int = 10, skip: bool = False):
            nonlocal sent, c
            if not skip:
                tcu.cycle(c * 0.01, 0.01)
                sent += 2
                wait_until(lambda: b.can.rx_handled >= sent, what="the command cycle")
                b.j.pump(0)
            c += 1
            b.run(ticks)

        for _ in range(60):  # address claims stand, ETC1/TSC1 every 10 ms, ETC2 every 100 ms
            task()
        assert b.j.status()["timeouts"] == 0 and b.j.status()["tcu"]["TSC1"]
        for _ in range(2):  # 2 tasks skipped: 30 ms between frames, not more than 3 cycles
            task(skip=True)
        for _ in range(10):
            task()
        assert b.j.status()["timeouts"] == 0
        for _ in range(4):  # 4 tasks skipped: 50 ms between frames
            task(skip=True)
        for _ in range(10):
            task()
        assert b.j.status()["timeouts_by_pgn"] == {"ETC1": 1, "ETC2": 0, "TSC1": 1}
        for _ in range(10):  # the loop stalls (no tick, no pump) for 10 TCU tasks, then catches the frames
            tcu.cycle(c * 0.01, 0.01)
            c += 1
        b.run(10)
        b.j.pump(0)
        b.run(10)
        assert b.j.status()["timeouts_by_pgn"] == {"ETC1": 1, "ETC2": 0, "TSC1": 1}
    finally:
        b.close()


def _tsc1(b: Bench, mode: int, torque_raw: int, *, speed_raw: int = 0xFAFF, prio: int = 1, source: int = 0x03,
          data: bytes | None = None) -> None:
    """One TSC1 from ``source`` to the engine, read by the next pump."""
    if data is None:
        data = bytes((mode | 0 << 2 | prio << 4 | 0xC0, speed_raw & 0xFF, speed_raw >> 8, torque_raw,
                      0xFF, 0xFF, 0xFF, 0xFF))
    b.bus.send(can.Message(arbitration_id=j.frame_id(3, j.PGN_TSC1, source, 0x00), is_extended_id=True, data=data))
    b.j.pump(0)


def test_tsc1_torque_not_available_error_or_out_of_range_refused_counted_and_the_previous_value_kept():
    """J1939-71: a torque byte of 0xFF is *not available*, 0xFE an *error indicator*, 0xFB-0xFD out of the range
    -125 .. 125 %.  Such a TSC1 is refused like a classic frame out of its DBC range (counted by reason, the
    shutdown summary's line), the torque of the last valid TSC1 stays, and the refused frame keeps no
    message fresh."""
    b = Bench()
    try:
        b.run(300)
        _tsc1(b, 3, 125 + 10)
        b.run(1)
        assert b.torque_after_tick[-1] == 100.0
        for raw in (0xFF, 0xFE, 0xFB, 0xFD):
            _tsc1(b, 2, raw)
            b.run(1)
            assert b.torque_after_tick[-1] == 100.0  # not 1300 N m (0xFF read as 130 %)
        _tsc1(b, 2, 0, data=bytes((0xC2, 0xFF, 0xFA, 125)))  # 4 bytes: too short to decode
        b.run(1)
        st = b.j.status()
        assert st["applied"] == 1
        assert st["rejected"] == {"total": 5, "by_reason": {"dlc": 1, "not_available": 1, "error_indicator": 1,
                                                            "out_of_range": 2}}
        assert st["decode_errors"] == 1 and st["decode_errors_by_reason"] == {"dlc": 1, "malformed": 0}
        assert st["tsc1_applied"] == 1 and b.torque_after_tick[-1] == 100.0
        b.run(30)  # 30 ms after the last valid TSC1 (the refused ones do not refresh it): stale, released
        assert b.j.status()["timeouts_by_pgn"]["TSC1"] == 1 and b.torque_after_tick[-1] == 200.0
    finally:
        b.close()


def test_the_shutdown_summary_has_a_j1939_line():
    from io_adapters.can.restbus import J1939Adapter
    from server.realtime.loop_config import LoopConfig
    from server.realtime.runtime import assemble

    ch = f"sum-{uuid.uuid4().hex[:8]}"
    srv = assemble(load_plant("powershift"), [J1939Adapter("rest", {"interface": "virtual", "channel": ch})],
                   LoopConfig(mode="lockstep", rate_hz=1000.0))
    srv.loop.open()
    srv.loop.start()
    bus = can.Bus(interface="virtual", channel=ch)
    try:
        assert srv.control.handle_now({"cmd": "step", "n": 300, "outputs": False})["ok"]
        tsc1 = j.frame_id(3, j.PGN_TSC1, 0x03, 0x00)
        for torque in (125 + 10, 0xFF, 0xFF):
            bus.send(can.Message(arbitration_id=tsc1, is_extended_id=True,
                                 data=bytes((0xD3, 0xFF, 0xFA, torque, 0xFF, 0xFF, 0xFF, 0xFF))))
            assert srv.control.handle_now({"cmd": "step", "n": 1, "outputs": False})["ok"]
        lines = srv.report.summary_text().splitlines()
        assert f"  {'rest':<16} 1 commands applied, 2 rejected not_available 2" in lines
    finally:
        bus.shutdown()
        srv.loop.close()
