"""Command watchdog: trips after the timeout, holds, ramps every input to its safe value in a straight line, recovers.

The loop runs in lockstep with the watchdog enabled there, so its clock is
simulated time and every instant below is exact (1 ms ticks).
"""

from __future__ import annotations

import numpy as np
import pytest

from io_adapters.base import TI_WATCHDOG
from plant_models.registry import load_plant
from server.realtime.loop_config import LoopConfig
from server.realtime.runtime import Server, assemble
from server.realtime.watchdog import InputPolicy, WatchdogConfig


def make_server(plant="powershift", **wd) -> Server:
    cfg = dict(timeout_s=0.05, hold_s=0.03, ramp_s=0.1, modes=("lockstep",),
               inputs=(("load_torque", InputPolicy(0.0, 0.0, supervised=False)),) if plant == "powershift" else ())
    cfg.update(wd)
    srv = assemble(load_plant(plant), [], LoopConfig(mode="lockstep", status_interval_s=0.0), WatchdogConfig(**cfg))
    srv.loop.start()
    return srv


def ctl(srv, cmd, **kw):
    rep = srv.control.handle({"v": 1, "cmd": cmd, **kw})
    assert rep["ok"], rep
    return rep


def run(srv, n, names):
    """Step n ticks; returns u[name] and u_rate[name] applied during each step, and the tripped flag."""
    loop = srv.loop
    idx = [loop.plant.input_index(nm) for nm in names]
    u, r, trip = [], [], []
    for _ in range(n):
        loop.step(1)
        u.append(loop.plant.u[idx].copy())
        r.append(loop.plant.u_rate[idx].copy())
        trip.append(bool(loop.tick_info[TI_WATCHDOG]))
    return np.array(u), np.array(r), np.array(trip)


def test_trip_hold_straight_ramp_to_defaults_and_recovery():
    srv = make_server()
    ctl(srv, "set", set={"p_c1": 16.0, "p_c3": 16.0, "engine_torque": 400.0, "load_torque": 3500.0})
    u, r, trip = run(srv, 300, ["p_c1", "engine_torque", "load_torque"])
    k_trip = 51  # first tick whose start is more than 50 ms after the command at t = 0
    assert not trip[:k_trip].any() and trip[k_trip:].all()
    assert srv.watchdog.trips == 1
    # hold: the last commands, unchanged, for 30 ms
    assert np.all(u[:81, 0] == 16.0) and np.all(r[:81] == 0.0)
    # ramp: exact straight lines to 0 in 100 ms (16 bar at 160 bar/s, 400 N m at 4000 N m/s)
    j = np.arange(100)
    assert np.allclose(u[81:181, 0], 16.0 - 0.16 * j, rtol=0, atol=1e-12)
    assert np.all(r[81:180, 0] == -160.0) and np.allclose(r[81:181, 1], -4000.0)
    assert np.allclose(u[81:181, 1], 400.0 - 4.0 * j, rtol=0, atol=1e-10)
    # safe: exactly the declared defaults, held still
    assert np.all(u[181:, :2] == 0.0) and np.all(r[181:, :2] == 0.0)
    # unsupervised input untouched
    assert np.all(u[:, 2] == 3500.0)
    assert srv.report.status()["watchdog"]["phase"] == "safe"
    # the plant obeys: clutch 1 has no friction capacity once its pressure has decayed below the kiss point
    # (only the oil-shear drag of the open clutch remains)
    y = srv.plant.output_dict()
    assert y["pressure_c1"] < 1.5 and y["capacity_c1"] == 0.0 and y["stuck_c1"] == 0.0
    assert abs(y["torque_c1"]) < 0.01
    # recovery: the next valid command ends the trip and takes over
    ctl(srv, "set", set={"p_c1": 10.0})
    u2, r2, trip2 = run(srv, 20, ["p_c1", "engine_torque"])
    assert not trip2.any() and np.all(u2[:, 0] == 10.0) and np.all(u2[:, 1] == 0.0)
    st = srv.report.status()["watchdog"]
    assert st["recoveries"] == 1 and st["phase"] == "ok" and st["trips"] == 1


def test_manual_recovery_keeps_the_safe_action_until_cleared():
    srv = make_server(recovery="manual", hold_s=0.0, ramp_s=0.01)
    ctl(srv, "set", set={"p_c1": 16.0})
    run(srv, 100, ["p_c1"])
    ctl(srv, "set", set={"p_c1": 12.0})  # a command alone does not end a manual trip
    u, _, trip = run(srv, 10, ["p_c1"])
    assert trip.all() and np.all(u[:, 0] == 0.0)
    assert ctl(srv, "clear_watchdog")["was_tripped"] is True
    ctl(srv, "set", set={"p_c1": 12.0})
    u, _, trip = run(srv, 10, ["p_c1"])
    assert not trip.any() and np.all(u[:, 0] == 12.0)


def test_gear_selectors_go_to_neutral_only_after_the_clutches_are_open():
    srv = make_server("dct", timeout_s=0.02, hold_s=0.01, ramp_s=0.05)
    ctl(srv, "set", set={"p_c1": 20.0, "gear_odd": 1, "gear_even": 2, "engine_torque": 100.0})
    u, _, trip = run(srv, 120, ["p_c1", "gear_odd", "gear_even"])
    k_ramp = 21 + 10  # trip at 21 ms, ramp from 31 ms
    arrive = k_ramp + 50  # 20 bar in 50 ms
    assert np.all(u[:arrive, 1] == 1.0) and np.all(u[:arrive, 2] == 2.0)
    assert u[arrive - 1, 0] > 0.0 and u[arrive, 0] == 0.0
    assert np.all(u[arrive:, 1] == 0.0) and np.all(u[arrive:, 2] == 0.0)


def test_watchdog_stays_out_of_modes_it_is_not_configured_for():
    srv = make_server(modes=("realtime",))
    ctl(srv, "set", set={"p_c1": 16.0})
    u, _, trip = run(srv, 200, ["p_c1"])
    assert not trip.any() and np.all(u[:, 0] == 16.0)
    assert srv.report.status()["watchdog"]["active"] is False


def test_watchdog_is_disarmed_by_reset_and_tunable_at_run_time():
    srv = make_server()
    ctl(srv, "set", set={"p_c1": 16.0})
    run(srv, 10, ["p_c1"])
    ctl(srv, "reset")
    _, _, trip = run(srv, 200, ["p_c1"])
    assert not trip.any()  # no command since the reset: not armed
    ctl(srv, "set_params", params={"watchdog.timeout_s": 0.2})
    ctl(srv, "set", set={"p_c1": 16.0})
    _, _, trip = run(srv, 250, ["p_c1"])
    assert not trip[:200].any() and trip[201:].all()
    rep = srv.control.handle({"v": 1, "cmd": "set_params", "params": {"watchdog.timeout_s": -1.0}})
    assert not rep["ok"] and rep["error"]["code"] == "param_error"
    assert srv.params.describe(["watchdog.timeout_s"])["watchdog.timeout_s"]["value"] == pytest.approx(0.2)


def test_trips_and_recoveries_are_logged_between_ticks(caplog):
    srv = make_server()
    caplog.set_level("WARNING", logger="gearbox_hil.watchdog")
    ctl(srv, "set", set={"p_c1": 16.0})
    run(srv, 100, ["p_c1"])
    assert srv.watchdog.trips == 1 and not caplog.records  # the tick only counts
    srv.watchdog.log_changes()
    ctl(srv, "set", set={"p_c1": 16.0})  # recovery = "auto": the next valid command
    srv.watchdog.log_changes()
    srv.watchdog.log_changes()  # nothing new: nothing logged
    text = [r.getMessage() for r in caplog.records]
    assert len(text) == 2, text
    assert text[0].startswith("command watchdog tripped: no valid command for more than 50.0 ms") and "(trip 1)" in text[0]
    assert text[1].startswith("command watchdog recovered (a valid command; 1 recoveries)")
