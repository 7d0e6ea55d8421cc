"""The CAN adapter in the real-time loop (server.realtime.loop.Loop): stale commands put the plant in its safe state.

A TCU (this test's thread) sends the three required command messages every
10 ms.  When one of them (TCU_ClutchCmdB) stops, the adapter stops feeding
the loop's command watchdog although ClutchCmdA keeps arriving; the
watchdog trips, holds, then ramps every input to its safe value, so clutch
1 loses its 16 bar.  The TCU sees all of it on CAN: HIL_Status reports the
tripped watchdog and stale commands, HIL_ClutchPressA the falling pressure.
When ClutchCmdB comes back, commands drive the plant again.  The phases
advance on what the plant reports (its frames and their Tick, the plant's
clock), so a loaded machine makes them longer, not different.
"""

from __future__ import annotations

import threading
import time
import uuid

import can
import cantools

from can_support import ROOT
from io_adapters.base import TI_OVERRUNS
from io_adapters.can.adapter import CanAdapter
from io_adapters.can.e2e import E2EDecoder, E2EEncoder
from plant_models.registry import load_plant
from server.realtime.loop_config import LoopConfig
from server.realtime.runtime import assemble
from server.realtime.watchdog import WatchdogConfig

DBC = cantools.database.load_file(str(ROOT / "configs" / "powershift.dbc"))


def test_stale_command_message_trips_the_watchdog_and_recovers():
    channel = f"loop-{uuid.uuid4().hex[:8]}"
    plant = load_plant("powershift")
    adapter = CanAdapter("can", {"interface": "virtual", "channel": channel})
    server = assemble(plant, [adapter], LoopConfig(mode="realtime", rate_hz=1000.0, duration_s=0.0,
                                                   status_interval_s=0.0),
                      WatchdogConfig(timeout_s=0.1, hold_s=0.05, ramp_s=0.1))
    loop = server.loop
    loop.open()
    bus = can.Bus(interface="virtual", channel=channel)
    msg = DBC.get_message_by_name
    enc = {0x100: E2EEncoder(msg("TCU_ClutchCmdA"), "ClutchCmdA_CRC", "ClutchCmdA_Counter", 0x0100),
           0x101: E2EEncoder(msg("TCU_ClutchCmdB"), "ClutchCmdB_CRC", "ClutchCmdB_Counter", 0x0101),
           0x110: E2EEncoder(msg("ENG_Torque"), "EngTorque_CRC", "EngTorque_Counter", 0x0110)}
    values = {0x100: {"PressureCmd_C1": 16.0, "PressureCmd_C2": 0.0, "PressureCmd_C3": 16.0, "PressureCmd_C4": 0.0},
              0x101: {"PressureCmd_C5": 0.0, "PressureCmd_C6": 16.0, "PressureCmd_C7": 0.0, "PressureCmd_C8": 0.0},
              0x110: {"EngineTorque": 100.0}}
    dec = {0x300: E2EDecoder(msg("HIL_Status"), "Status_CRC", "Status_Counter", 0x0300),
           0x210: E2EDecoder(msg("HIL_ClutchPressA"), "PressA_CRC", "PressA_Counter", 0x0210)}
    runner = threading.Thread(target=loop.run, daemon=True)
    runner.start()
    try:
        seen = _tcu_phases(bus, enc, values, dec)  # (phase, frame ID, decoded values)
    finally:
        loop.request_shutdown("test over")
        runner.join(timeout=10)
        status = server.report.status()
        loop.close()
        bus.shutdown()

    def status_frames(phase):
        return [v for p, fid, v in seen if p == phase and fid == 0x300]

    def pressures(phase):
        return [v["Pressure_C1"] for p, fid, v in seen if p == phase and fid == 0x210]

    # all commands fresh: clutch 1 at its 16 bar (after the 30 ms valve lag), the watchdog quiet at the phase's end
    assert pressures("all")[-1] == 16.0 and status_frames("all")[-1]["WatchdogState"] == 0
    # ClutchCmdB missing: commands stale, watchdog tripped, clutch 1 ramped to 0 bar although ClutchCmdA still says 16
    b_missing = status_frames("b_missing")
    tripped = [v for v in b_missing if v["WatchdogState"] == 1]
    assert tripped and all(v["CommandsFresh"] == 0 for v in tripped)
    assert b_missing[-1]["WatchdogState"] == 1
    assert pressures("b_missing")[-1] < 0.5
    # back: the next valid commands end the trip (recovery = "auto") and drive the plant again
    assert status_frames("back")[-1]["WatchdogState"] == 0 and status_frames("back")[-1]["CommandsFresh"] == 1
    assert pressures("back")[-1] == 16.0
    # the plant kept stepping through the trip and the recovery (the frames' Tick, the plant's clock, never goes
    # back and moves on in every phase); how long the watchdog waits is on the wall clock in realtime, where a
    # loaded machine skips ticks, so its timing is tests/test_watchdog.py's (exact, on a clock of its own)
    ticks = [v["Tick"] for p, fid, v in seen if fid == 0x300]
    assert all(b >= a for a, b in zip(ticks, ticks[1:]))
    recovered = next(v for v in status_frames("back") if v["WatchdogState"] == 0)
    assert status_frames("all")[-1]["Tick"] < tripped[0]["Tick"] < recovered["Tick"] < status_frames("back")[-1]["Tick"]
    # the status frame's Overruns reads the loop's overrun slot of tick_info, which the loop keeps equal to its
    # own overrun counter (it can only grow after the frame)
    from server.realtime.telemetry import C_OVERRUNS
    assert adapter._tick_info is loop.tick_info
    assert loop.tick_info[TI_OVERRUNS] == loop.telemetry.counters[C_OVERRUNS]
    assert status_frames("back")[-1]["Overruns"] <= status["timing"]["overruns"]
    # the loop publishes the adapter's counters: ClutchCmdB timed out (once, unless this test's own thread
    # stalled for 30 ms on a loaded machine), nothing rejected
    can_status = status["adapters"]["can"]
    assert can_status["rx"]["messages"]["TCU_ClutchCmdB"]["timeouts"] >= 1
    assert can_status["rx"]["rejected_total"] == 0
    assert status["watchdog"]["trips"] >= 1 and status["watchdog"]["recoveries"] == status["watchdog"]["trips"]


def _tcu_phases(bus, enc, values, dec, bound_s: float = 60.0) -> list:
    """The TCU's 10 ms task through the phases "all" (every command), "b_missing" (ClutchCmdB left out), "back";
    every plant frame received, with the phase it came in.

    The phases advance on what the plant reports on CAN (its own frames and their Tick, the plant's clock), not
    on this thread's wall clock: on a loaded machine a phase simply lasts longer.  Each has a generous wall-clock
    bound, only to fail rather than hang when the behaviour is broken.
    """
    seen, last = [], {}  # last: the newest decoded status and pressure frames
    phase, entered, steady = "all", {}, 0
    started = deadline = time.monotonic()
    while phase != "done":
        assert time.monotonic() - started < bound_s, f"phase {phase!r} not over within {bound_s} s: {last}"
        for fid, e in enc.items():
            if fid == 0x101 and phase == "b_missing":
                continue
            bus.send(can.Message(arbitration_id=fid, is_extended_id=False, data=e.encode(values[fid])))
        while (m := bus.recv(0.0)) is not None:
            if m.arbitration_id in dec:
                v = dec[m.arbitration_id].decode(bytes(m.data))
                assert v is not None, "E2E check of a plant frame failed"
                seen.append((phase, m.arbitration_id, v))
                last[m.arbitration_id] = v
        status, press = last.get(0x300), last.get(0x210)
        if status is not None and press is not None:
            entered.setdefault(phase, status["Tick"])
            quiet = status["WatchdogState"] == 0 and status["CommandsFresh"] == 1 and press["Pressure_C1"] == 16.0
            steady = steady + 1 if quiet else 0
            if phase == "all" and quiet and status["Tick"] - entered["all"] >= 300:  # 0.3 s of plant time
                phase = "b_missing"
            elif phase == "b_missing" and status["WatchdogState"] == 1 and press["Pressure_C1"] < 0.5:
                phase = "back"
            elif phase == "back" and steady >= 10:  # ten rounds in a row: commands drive the plant again
                phase = "done"
        deadline += 0.01
        time.sleep(max(0.0, deadline - time.monotonic()))
    return seen
