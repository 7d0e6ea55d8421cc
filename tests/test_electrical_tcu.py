"""The example TCU over electrical signals only (examples/electrical_tcu.py): it measures speeds from edge periods and
closes the Powershift 1 -> 3 swap through the sim device, stepwise, in lockstep (bit for bit the same) and realtime."""

import math
import sys

import numpy as np
import pytest

from plant_models.config import repo_root
from plant_models.registry import load_plant

sys.path.insert(0, str(repo_root() / "examples"))

import electrical_tcu as ex  # noqa: E402


@pytest.fixture(scope="module")
def io_path(tmp_path_factory):
    p = tmp_path_factory.mktemp("io") / "io_electrical_stepped.toml"
    p.write_text(ex.IO_STEPPED)
    return p


@pytest.fixture(scope="module")
def stepwise():
    tcu = ex.ElectricalTcu()
    return tcu, ex.run_stepwise(tcu)


def _names():
    return {s.name: k for k, s in enumerate(load_plant(ex.PLANT).outputs)}


def test_the_swap_closes_on_measured_speeds(stepwise):
    tcu, rows = stepwise
    ix = _names()
    assert tcu.phases == ["hold", "fill", "torque", "inertia", "lock"]
    t_lock = dict((p, t) for t, p in tcu.timeline)["lock"]
    assert 0.7 < t_lock < 1.0
    gear = rows[:, ix["gear"]]
    assert gear[int(0.5 / 1e-3)] == 1 and gear[-1] == 3 and rows[-1, ix["stuck_c2"]] == 1.0
    # the TCU locked once the plant's clutch 2 had stuck (its slip measured from the edges, not read)
    k_stuck = int(np.argmax(rows[:, ix["stuck_c2"]] >= 0.5))
    assert k_stuck * 1e-3 <= t_lock + 1e-9
    # what it measured from edge periods against the plant's speeds at the end (a 20 ms window on a shaft that
    # accelerates: the window's mean speed, within 1 %)
    assert tcu.trace[-1][1] == pytest.approx(rows[-1, ix["w_1"]], rel=0.01)
    assert tcu.trace[-1][2] == pytest.approx(abs(rows[-1, ix["w_2"]]), rel=0.01)
    assert tcu.oil_C == pytest.approx(80.0, abs=1e-9) and tcu.range_position == 3 and tcu.bad_range_codes == 0


def test_lockstep_equals_the_stepwise_run_bit_for_bit(stepwise, io_path):
    tcu, rows = stepwise
    tcu2 = ex.ElectricalTcu()
    rows2 = ex.run_lockstep(tcu2, io_path)
    assert rows2.shape == rows.shape and np.array_equal(rows2, rows)
    assert tcu2.timeline == tcu.timeline


def test_the_shift_closes_in_realtime_at_1khz(stepwise, io_path):
    tcu, rows = stepwise
    tcu3 = ex.ElectricalTcu()
    r = ex.run_realtime(tcu3, io_path)
    # the TCU runs inside the tick: whatever the wall clock did, the closed loop is the stepwise one
    assert r["ticks"] >= len(rows) and r["outputs"]["gear"] == 3
    assert tcu3.phases == ["hold", "fill", "torque", "inertia", "lock"] and tcu3.timeline == tcu.timeline
    assert r["status"]["mode"] == "realtime"


@pytest.mark.parametrize("rpm", [25.0, 100.0, 1000.0, 3000.0, 10000.0])
def test_a_60_tooth_wheel_is_measured_within_0p1_percent(rpm):
    from io_adapters.base import LoopContext, create_adapter

    plant = load_plant(ex.PLANT)
    plant.reset(dict(ex.INITIAL))
    ad = create_adapter("device", "device", {"backend": "sim", "channels": "io_device_powershift.toml"})
    ad.open(plant, LoopContext(period_s=1e-3, feed_watchdog=lambda ns: None, status=dict, mode="lockstep"))
    k_w1 = plant.output_index("w_1")
    sensor = ex.SpeedSensor(0, 60, window_ns=20_000_000, timeout_ns=200_000_000)
    omega = rpm * math.pi / 30.0
    ticks = 150  # three periods of the slowest wheel (40 ms a tooth at 25 rpm)
    for k in range(ticks):
        plant.y[k_w1] = omega  # the shaft at a held speed: the adapter reads the port, the plant need not step
        ad.write(k + 1, 0)
        sensor.capture((k + 1) * 1_000_000, ad.device.tcu_edges(0))
    ad.close()
    measured = sensor.speed_rad_s((ticks + 1) * 1_000_000)
    assert measured == pytest.approx(omega, rel=1e-3)


def test_a_reset_starts_the_electrical_side_afresh(io_path):
    """After the loop's reset (t back to 0) the wheels, coils and lever start as at the first run: a second run
    with a fresh TCU equals the first bit for bit."""
    srv, adapter = ex._server(io_path, "lockstep")
    runs = []
    try:
        srv.loop.start()
        for _ in range(2):
            tcu = ex.ElectricalTcu()
            tcu.attach(adapter)
            rows = []
            for _ in range(900):
                srv.loop.step(1)
                rows.append(srv.plant.y.copy())
            runs.append((np.array(rows), list(tcu.timeline), [e.copy() for e in (adapter.device.tcu_edges(0),)]))
            srv.loop.reset()
    finally:
        srv.loop.close()
    (a, ta, ea), (b, tb, eb) = runs
    assert np.array_equal(a, b) and ta == tb and np.array_equal(ea[0], eb[0])
    assert ta[-1][1] == "lock"


def test_the_io_configs_tcu_starts_afresh_at_a_reset_before_its_first_tick_is_read(tmp_path):
    """The TCU named in the I/O config (``tcu = ...``, made when the adapter opens) through a reset of the loop: the
    reset's first tick reads the duties the TCU drives at its start, not those it drove last (at 0.9 s, in lock:
    clutch 1 off, clutch 2 full), so the second run equals the first bit for bit from its first tick."""
    io = tmp_path / "io_tcu.toml"
    io.write_text(ex.IO_STEPPED + 'tcu = "examples/electrical_tcu.py:ElectricalTcu"\n')
    srv, adapter = ex._server(io, "lockstep")
    runs = []
    try:
        srv.loop.start()
        for _ in range(2):
            rows, inputs = [], []
            for _ in range(900):
                srv.loop.step(1)
                rows.append(srv.plant.y.copy())
                inputs.append(srv.plant.u.copy())
            runs.append((np.array(rows), np.array(inputs), list(adapter.tcu.timeline)))
            srv.loop.reset()
    finally:
        srv.loop.close()
    (a, ua, ta), (b, ub, tb) = runs
    assert ta[-1][1] == "lock" and tb == ta
    assert np.array_equal(ua[0], ub[0]), "the reset's first tick read the duties of the run before"
    assert np.array_equal(ua, ub) and np.array_equal(a, b)
