"""The loop itself (in-process): absolute deadlines, skip-and-count overruns without catch-up, the stop
policy and its grace period, afap and lockstep tick counts, wait strategies, best-effort OS settings.

A test adapter makes chosen ticks slow; the checks use the loop's own
per-tick samples (wake-up time minus lateness is the tick's deadline), so
they hold however loaded the machine is.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from io_adapters.base import Adapter
from plant_models.registry import load_plant
from server.realtime.loop import Loop
from server.realtime.loop_config import LoopConfig
from server.realtime.rtsetup import RealtimeConfig
from server.realtime.runtime import Server, assemble


class SlowTicks(Adapter):
    """Sleeps ``slow_s`` in ``write`` on every ``every``-th tick; records every wake-up time."""

    type_name = "test"

    def __init__(self, every: int, slow_s: float, capacity: int = 100_000):
        super().__init__("slow", {})
        self.every, self.slow_s = every, slow_s
        self.wakes = np.zeros(capacity, dtype=np.int64)
        self.n = 0

    def open(self, plant, ctx):
        self.plant = plant

    def read(self, tick, now_ns):
        self.wakes[self.n] = now_ns
        self.n += 1

    def write(self, tick, now_ns):
        if self.every and tick % self.every == 0:
            time.sleep(self.slow_s)

    def close(self):
        pass


def run_server(adapter=None, **cfg) -> Server:
    base = dict(mode="realtime", rate_hz=1000.0, status_interval_s=0.0, sample_capacity=100_000,
                startup_grace_s=0.0)
    base.update(cfg)
    srv = assemble(load_plant("powershift"), [adapter] if adapter else [], LoopConfig(**base))
    srv.open()
    try:
        srv.run()
    finally:
        srv.close()
    return srv


def run_loop(adapter=None, **cfg) -> Loop:
    return run_server(adapter, **cfg).loop


def deadlines(loop: Loop, adapter: SlowTicks) -> np.ndarray:
    lateness = loop.telemetry.sample_array()[:, 0]
    return adapter.wakes[:adapter.n] - lateness


def test_overruns_skip_the_covered_deadlines_without_a_catch_up_burst():
    slow = SlowTicks(every=50, slow_s=0.0035)
    loop = run_loop(slow, duration_s=1.0)
    tm = loop.telemetry.summary()
    d = deadlines(loop, slow)
    period = 1_000_000
    gaps = np.diff(d)
    # every tick runs at its own deadline on the original grid: absolute deadlines, phase kept
    assert np.all(gaps % period == 0) and np.all(gaps >= period)
    # the deadlines a slow tick covered were skipped, not run late one after another: every deadline of the
    # grid up to where the run ended is either a tick or a missed tick
    assert (loop.next_deadline_ns - d[0]) // period == tm["ticks"] + tm["missed_ticks"]
    assert int((gaps // period - 1).sum()) <= tm["missed_ticks"]
    n_slow = slow.n // 50
    assert tm["overruns"] >= n_slow and tm["missed_ticks"] >= 3 * n_slow  # a 3.5 ms tick covers >= 3 deadlines
    after_slow = np.flatnonzero(np.arange(1, slow.n) % 50 == 0)  # index of the tick after each slow tick
    assert np.all(gaps[after_slow] >= 3 * period)
    # every deadline of the run is either a tick or a missed tick
    assert tm["ticks"] == slow.n and tm["ticks"] + tm["missed_ticks"] == pytest.approx(tm["run_time_s"] * 1000, abs=2)


def test_stop_policy_ends_the_run_after_n_overruns_outside_the_grace_period():
    slow = SlowTicks(every=10, slow_s=0.003)
    loop = run_loop(slow, duration_s=5.0, overrun_policy="stop", max_overruns=3)
    tm = loop.telemetry.summary()
    assert loop.exit_code == 3 and "stopped after 3 overruns" in loop.stop_reason
    assert tm["overruns"] == 3 and tm["ticks"] < 1000

    slow = SlowTicks(every=10, slow_s=0.003)
    loop = run_loop(slow, duration_s=0.3, overrun_policy="stop", max_overruns=3, startup_grace_s=60.0)
    tm = loop.telemetry.summary()
    assert loop.exit_code == 0 and loop.stop_reason == "duration reached"
    assert tm["overruns"] == 0 and tm["overruns_in_grace"] >= 3


@pytest.mark.parametrize("wait", ["sleep", "sleep_spin", "spin"])
def test_every_wait_strategy_ticks_on_the_grid(wait):
    probe = SlowTicks(every=0, slow_s=0.0)
    loop = run_loop(probe, wait=wait, duration_s=0.3, rate_hz=2000.0)
    d = deadlines(loop, probe)
    assert np.all(np.diff(d) % 500_000 == 0)
    tm = loop.telemetry.summary()
    assert (loop.next_deadline_ns - d[0]) // 500_000 == tm["ticks"] + tm["missed_ticks"]
    assert tm["ticks"] + tm["missed_ticks"] == pytest.approx(tm["run_time_s"] * 2000, abs=2)
    assert tm["lateness_us"]["p50"] is not None and tm["tet_us"]["max"] > 0


class Rehearsing(SlowTicks):
    """Counts the loop's calls of its rehearsal."""

    def __init__(self):
        super().__init__(every=0, slow_s=0.0)
        self.rehearsals = 0

    def rehearse(self):
        self.rehearsals += 1


@pytest.mark.parametrize("wait", ["sleep_spin", "spin"])
def test_the_spin_wait_rehearses_the_adapters_and_the_sleeping_waits_do_not(wait):
    probe = Rehearsing()
    loop = run_loop(probe, wait=wait, duration_s=0.3, rate_hz=2000.0)
    ticks = loop.telemetry.summary()["ticks"]
    if wait == "spin":  # before nearly every tick (not when the slack was under 30 us)
        assert ticks * 0.5 < probe.rehearsals <= ticks + 1
    else:
        assert probe.rehearsals == 0


class FailingRehearsal(Rehearsing):
    def rehearse(self):
        self.rehearsals += 1
        raise RuntimeError("planted")


def test_a_rehearsal_that_raises_is_logged_once_and_dropped_and_the_loop_goes_on(caplog):
    probe = FailingRehearsal()
    with caplog.at_level("ERROR", logger="gearbox_hil.loop"):
        loop = run_loop(probe, wait="spin", duration_s=0.3, rate_hz=2000.0)
    assert probe.rehearsals == 1
    assert loop.telemetry.summary()["ticks"] > 100 and probe.n == loop.telemetry.summary()["ticks"]
    assert [r.message for r in caplog.records].count(
        "rehearsal of an adapter's decoding failed; it is not rehearsed any more") == 1


def test_afap_and_lockstep_take_exactly_the_simulated_duration():
    loop = run_loop(mode="afap", duration_s=0.75)
    assert loop.tick == 750 and loop.plant.time == pytest.approx(0.75, rel=1e-12)
    assert loop.telemetry.summary()["lateness_us"]["p50"] is None  # no deadlines, no lateness

    srv = assemble(load_plant("powershift"), [], LoopConfig(mode="lockstep", duration_s=0.01, status_interval_s=0.0))
    srv.loop.start()
    rep = srv.control.handle({"v": 1, "cmd": "step", "n": 10})
    assert rep["ok"] and rep["tick"] == 10 and srv.loop.shutdown_requested  # duration reached: the server will exit


def test_os_settings_that_cannot_be_applied_are_warnings_not_failures():
    srv = run_server(duration_s=0.1, realtime=RealtimeConfig(cpu_affinity=(4096,)))
    rt = srv.report.status()["realtime"]
    assert any("CPU affinity" in w for w in rt["warnings"])
    assert srv.loop.exit_code == 0 and srv.loop.tick > 50


def test_fifo_with_pure_spin_is_refused_unless_allowed():
    with pytest.raises(ValueError, match="real-time throttling"):
        LoopConfig(wait="spin", duration_s=0.05, status_interval_s=0.0, realtime=RealtimeConfig(sched_fifo_priority=10))
    cfg = LoopConfig(wait="spin", duration_s=0.05, status_interval_s=0.0,
                     realtime=RealtimeConfig(sched_fifo_priority=10, allow_fifo_with_spin=True))
    assert cfg.wait == "spin"


def test_gc_is_disabled_while_running_and_restored_after():
    import gc

    class GcProbe(SlowTicks):
        def read(self, tick, now_ns):
            self.seen = gc.isenabled()

    probe = GcProbe(every=0, slow_s=0.0)
    was = gc.isenabled()
    run_loop(probe, duration_s=0.05)
    assert probe.seen is False and gc.isenabled() == was


def test_a_scenario_played_in_realtime_equals_the_offline_run_across_table_blocks():
    from server.offline.scenario import BLOCK, parse_scenario
    from server.offline.run import run_offline

    content = {"duration_s": 1.0, "inputs": {
        "engine_torque": 300.0, "load_torque": 3500.0, "p_c3": 16.0, "p_c6": 16.0,
        "p_c1": [[0.0, 16.0], [0.5, 16.0], [0.6, 0.0]], "p_c2": [[0.0, 0.0], [0.5, 2.0], [0.6, 7.0], [0.7, 16.0]]}}
    rate = 5000.0
    n = int(round(content["duration_s"] * rate))
    assert n > BLOCK  # the run crosses a block of the scenario's input table

    class Snapshot(SlowTicks):
        def write(self, tick, now_ns):
            if tick == n:
                self.y = self.plant.y.copy()
                loop.request_shutdown("scenario done")

    snap = Snapshot(every=0, slow_s=0.0)
    srv = assemble(load_plant("powershift"), [snap], LoopConfig(mode="realtime", rate_hz=rate, duration_s=60.0,
                                                                status_interval_s=0.0))
    loop = srv.loop
    rep = srv.control.handle({"v": 1, "cmd": "load_scenario", "scenario": content})
    assert rep["ok"], rep
    srv.open()
    try:
        srv.run()
    finally:
        srv.close()
    plant = load_plant("powershift")
    ref = run_offline(plant, parse_scenario(content, "inline").compile(plant, 1.0 / rate))
    assert np.array_equal(snap.y, ref.values[-1])
    assert srv.report.status()["scenario"]["finished"] is True
    assert srv.player.prefetches >= 1  # the next block was filled between ticks, not in a tick


class LateWrites(Adapter):
    """Every tick's ``write`` takes ``slow_s`` (less slack than the service budget is left); logs writes and pumps."""

    type_name = "test"

    def __init__(self, slow_s: float):
        super().__init__("late", {})
        self.slow_s = slow_s
        self.events: list[str] = []

    def open(self, plant, ctx):
        self.plant = plant

    def read(self, tick, now_ns):
        pass

    def write(self, tick, now_ns):
        self.events.append("w")
        time.sleep(self.slow_s)

    def pump(self, until_ns=0):
        self.events.append("p")

    def close(self):
        pass


def test_what_a_late_tick_queued_is_pumped_before_the_next_tick():
    """With less slack than the service budget the loop does not serve, but it still pumps what the tick left
    (CAN frames, states): a frame waits for the host, not for a period more."""
    late = LateWrites(slow_s=0.0007)  # 1 kHz, budget 300 us: 0.3 ms or less left after each tick
    run_loop(late, duration_s=0.3)
    writes = "".join(late.events).split("w")[1:-1]  # what happened after each write but the last
    assert len(writes) > 50
    assert all("p" in after for after in writes), [i for i, after in enumerate(writes) if "p" not in after][:10]
