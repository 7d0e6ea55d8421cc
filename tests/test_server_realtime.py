"""The realtime server over ZeroMQ: a timed run, a closed-loop shift, the watchdog, bad input.

No tight timing asserts: other processes may share the two cores.  Waits
are generous and checks are about counts and states, not microseconds.
"""

from __future__ import annotations

import math
import sys
import time

import msgpack
import pytest

from io_adapters.zmq.client import ServerError
from server_support import ROOT, ServerProcess, wait_until

sys.path.insert(0, str(ROOT / "examples"))
import closed_loop_swap  # noqa: E402

WATCHDOG = """
[watchdog]
timeout_ms = 100.0
hold_ms = 100.0
ramp_ms = 200.0
[watchdog.inputs.load_torque]
supervised = false
"""


# What a HIL bench does: the loop asks for SCHED_FIFO and locked memory, so other processes on these two
# shared cores do not preempt it and page faults do not stall it (without the privilege the server warns and
# runs with normal scheduling).
REALTIME_PRIORITY = """
[realtime]
sched_fifo_priority = 50
lock_memory = true
"""


def test_two_seconds_at_1khz_complete_with_the_tick_count_and_telemetry(tmp_path):
    with ServerProcess(tmp_path, extra=REALTIME_PRIORITY, args=("--duration", "2", "--rate", "1000")) as srv:
        assert srv.proc.wait(timeout=120) == 0, srv.output()
        summary = srv.shutdown()
    tm = summary["timing"]
    # 2 s at 1 kHz: 2000 deadlines within 1 %, every one either run or counted as missed.  The ticks actually
    # run are checked loosely: a host stall of 20-100 ms (this machine has them; cyclictest sees them too)
    # takes ticks away that no loop can run, and the telemetry's job is to count them.
    assert abs(tm["ticks"] + tm["missed_ticks"] - 2000) <= 20, (tm, summary["realtime"])
    assert tm["ticks"] + tm["missed_ticks"] == pytest.approx(tm["run_time_s"] * 1000, abs=2)
    assert tm["ticks"] >= 1800, tm
    assert 2.0 <= tm["run_time_s"] < 2.2, tm
    for key in ("lateness_us", "tet_us", "step_us"):
        st = tm[key]
        assert st["p50"] <= st["p99"] <= st["p999"] <= st["max"], (key, st)
        assert st["p50"] > 0
    assert tm["rate_hz_target"] == 1000.0 and tm["rate_hz_actual"] == pytest.approx(tm["ticks"] / tm["run_time_s"])
    assert isinstance(tm["overruns"], int) and isinstance(tm["missed_ticks"], int)
    assert summary["sim_time_s"] == pytest.approx(tm["ticks"] * 1e-3, rel=1e-9)
    text = srv.output()
    assert "timing summary (realtime mode)" in text and "wake-up lateness" in text and "TET" in text


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    srv = ServerProcess(tmp_path_factory.mktemp("realtime"), extra=WATCHDOG)
    yield srv
    srv.shutdown()


def test_a_client_closes_the_loop_over_zeromq_and_sees_the_gear_ratio_change(server):
    with server.client() as hil:
        ctl = closed_loop_swap.SwapController(closed_loop_swap.SwapPlan(duration_s=1.2))
        res = closed_loop_swap.run_realtime(hil, ctl, timeout_s=60.0)
        hil.reset()
    assert res.gears[0] == 1 and res.gears[-1] == 3, res.gear_changes
    ratios = [r for _, g, r in res.gear_changes if g]
    assert ratios[0] == pytest.approx(48.0, rel=1e-9) and ratios[-1] == pytest.approx(32.0, rel=1e-9)
    assert [ph for _, ph in res.timeline] == ["hold", "torque", "inertia", "lock"]
    assert res.commands_sent > 20 and res.states_received > 100


def test_watchdog_trips_ramps_to_safe_and_recovers(server):
    with server.client() as hil:
        hil.subscribe(("state",))
        hil.reset()
        seq = 0
        for _ in range(10):  # a controller that commands for a while, then goes silent
            seq = hil.set_inputs(p_c1=16.0, p_c3=16.0, p_c6=16.0, engine_torque=200.0, load_torque=1000.0)
            time.sleep(0.01)
        assert hil.wait_for(lambda s: s.ack >= seq, 30.0) is not None
        tripped = hil.wait_for(lambda s: s.watchdog, 30.0)
        assert tripped is not None
        st = hil.status()["watchdog"]
        assert st["tripped"] and st["trips"] >= 1 and st["armed"]

        def safe():
            g = hil.get()
            return g if g["u"]["p_c1"] == 0.0 and g["u"]["engine_torque"] == 0.0 else None

        g = wait_until(safe, timeout_s=30.0)
        assert g is not None
        assert g["u"]["load_torque"] == 1000.0  # not supervised: left alone
        assert hil.status()["watchdog"]["phase"] == "safe"
        seq = hil.set_inputs(p_c1=5.0)
        back = hil.wait_for(lambda s: s.ack >= seq and not s.watchdog, 30.0)
        assert back is not None
        st = hil.status()["watchdog"]
        assert not st["tripped"] and st["recoveries"] >= 1 and hil.get()["u"]["p_c1"] == 5.0
        hil.set_params({"watchdog.enabled": False})  # leave the shared server quiet
        hil.reset()


def test_every_kind_of_bad_input_is_rejected_counted_and_harmless(server):
    with server.client() as hil:
        hil.set_params({"watchdog.enabled": False})
        hil.reset()
        seq = hil.set_inputs(p_c1=3.0, engine_torque=10.0)
        hil.subscribe(("state",))
        assert hil.wait_for(lambda s: s.ack >= seq, 30.0) is not None
        before = hil.status()["adapters"]["zmq"]["rejected"]["by_reason"]
        bad = {
            "malformed": [b"\xc1", b"\x93\x01", b""],
            "wrong_type": [msgpack.packb({"v": 1, "set": {"p_c1": v}}) for v in ("1", None, [1.0], {"a": 1}, True)],
            "unknown_signal": [msgpack.packb({"v": 1, "set": {"p_c1": 1.0, "turbo": 1.0}})],
            "not_finite": [msgpack.packb({"v": 1, "set": {"p_c1": v}}) for v in (math.nan, math.inf, -math.inf)],
            "out_of_range": [msgpack.packb({"v": 1, "set": {"p_c1": v}}) for v in (-0.5, 40.01, 1e300)],
            "oversized": [msgpack.packb({"v": 1, "set": {"p_c1": 1.0}, "x": b"\0" * 10_000})],
        }
        for payloads in bad.values():
            for p in payloads:
                hil.send_raw_command(p)
        n = sum(len(v) for v in bad.values())
        after = wait_until(lambda: _if_total(hil, before, n), timeout_s=30.0)
        assert after is not None
        assert {k: after[k] - before.get(k, 0) for k in bad} == {k: len(v) for k, v in bad.items()}
        # control requests get an error reply each
        for req, code in (({"v": 1, "cmd": "set", "set": {"p_c1": math.nan}}, "not_finite"),
                          ({"v": 1, "cmd": "set", "set": {"p_c1": 99.0}}, "out_of_range"),
                          ({"v": 1, "cmd": "set", "set": {"nope": 1.0}}, "unknown_signal"),
                          ({"v": 1, "cmd": "set", "set": {"p_c1": "x"}}, "wrong_type"),
                          ({"v": 1, "cmd": "step", "n": 1}, "wrong_mode")):
            with pytest.raises(ServerError) as ei:
                hil.request(req.pop("cmd"), **{k: v for k, v in req.items() if k != "v"})
            assert ei.value.code == code
        # the plant kept the last good command and keeps running
        g = hil.get()
        assert g["u"]["p_c1"] == 3.0 and g["u"]["engine_torque"] == 10.0
        assert all(math.isfinite(v) for v in g["y"].values())
        t0 = g["t"]
        assert wait_until(lambda: hil.get()["t"] > t0 + 0.05, 30.0)
        assert hil.status()["state"] == "running"
        hil.reset()


def _if_total(hil, before, n):
    by = hil.status()["adapters"]["zmq"]["rejected"]["by_reason"]
    return by if sum(by.values()) - sum(before.values()) >= n else None


def test_status_is_published_and_pause_freezes_time(server):
    with server.client() as hil:
        hil.subscribe(("status",))
        msg = hil.recv(timeout_s=30.0)
        assert isinstance(msg, dict) and msg["topic"] == "status"
        tm = msg["status"]["timing"]
        assert tm["ticks"] > 0 and "lateness_us" in tm and "tet_us" in tm and "overruns" in tm
        hil.pause()
        t1 = hil.get()["t"]
        time.sleep(0.2)
        assert hil.get()["t"] == t1
        with pytest.raises(ServerError) as ei:
            hil.pause()
        assert ei.value.code == "bad_state"
        hil.start()
        assert wait_until(lambda: hil.get()["t"] > t1, 30.0)
