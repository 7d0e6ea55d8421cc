"""Clutch faults as an overlay on the plant's tuned parameters (server/realtime/faults.py, FrictionPlant.set_clutch_overlay).

Three defects of clutch faults written straight into the core's model floats:
(a) ``set_params`` and a clutch fault wrote the same floats, so a value tuned
during a fault was lost when the fault cleared (and a fault set after a
tuning restored the floats of before it); (b) a clutch written ``6`` and
``"C6"`` made two faults that stacked, and ``"c6"`` was refused; (c) a
stuck-closed clutch reported a capacity millions of times above the declared
range of its output.
"""

from __future__ import annotations

import pytest

from plant_models.core.api import L
from plant_models.registry import load_plant
from server.realtime.loop_config import LoopConfig
from server.realtime.runtime import assemble

GEAR1 = {"p_c1": 16.0, "p_c3": 16.0, "p_c6": 16.0, "engine_torque": 300.0, "load_torque": 500.0}


def _server(inputs=GEAR1, warm=200):
    plant = load_plant("powershift")
    srv = assemble(plant, [], LoopConfig(mode="lockstep"), initial_inputs=inputs)
    srv.loop.start()
    srv.loop.step(warm)
    return srv


def _model(plant, slot, row):
    """The model float the compiled step reads."""
    return float(plant.mf[int(plant.mi[slot]) + row])


def _set_params(srv, params):
    rep = srv.control.handle({"cmd": "set_params", "params": params})
    assert rep["ok"], rep
    return rep


def _get(srv, name):
    rep = srv.control.handle({"cmd": "get_params", "names": [name]})
    assert rep["ok"], rep
    return rep["params"][name]["value"]


# ---------------------------------------------------------------------------------------------------------
# (a) set_params and clutch faults: both act, in any order
# ---------------------------------------------------------------------------------------------------------
def test_a_gain_tuned_during_a_worn_fault_is_kept_when_the_fault_clears():
    s = _server()
    plant = s.plant
    g0 = _model(plant, L.MF_GAIN_STATIC, 1)
    s.loop.set_fault({"target": "clutch", "clutch": "C2", "kind": "worn", "value": 0.5})
    tuned = 1.2 * g0
    _set_params(s, {"row.C2.gain_static": tuned})
    # the fault still acts on the new value, and get_params reports the tuned value, not the faulted one
    assert _model(plant, L.MF_GAIN_STATIC, 1) == tuned * 0.5
    assert _get(s, "row.C2.gain_static") == tuned
    s.loop.clear_fault()
    assert _model(plant, L.MF_GAIN_STATIC, 1) == tuned


def test_a_fault_replaced_after_a_tuning_acts_on_the_tuned_value_and_clearing_leaves_it():
    s = _server()
    plant = s.plant
    g0 = _model(plant, L.MF_GAIN_KINETIC, 2)
    tuned = 0.7 * g0
    s.loop.set_fault({"target": "clutch", "clutch": 3, "kind": "worn", "value": 0.5})
    _set_params(s, {"row.C3.gain_kinetic": tuned})
    s.loop.set_fault({"target": "clutch", "clutch": 3, "kind": "worn", "value": 0.25})  # same name: replaces
    assert _model(plant, L.MF_GAIN_KINETIC, 2) == tuned * 0.25
    s.loop.clear_fault()
    assert _model(plant, L.MF_GAIN_KINETIC, 2) == tuned
    assert _get(s, "row.C3.gain_kinetic") == tuned


def test_an_actuator_lag_tuned_during_a_slow_actuator_fault_shapes_the_pressure_after_it_clears():
    """The pressure's first-order response after the fault is the one of the tuned lag (a physical check)."""
    s = _server(inputs={"engine_torque": 0.0}, warm=10)
    plant = s.plant
    s.loop.set_fault({"target": "clutch", "clutch": 2, "kind": "slow_actuator", "value": 4.0})
    _set_params(s, {"row.C2.act_lag_s": 0.05})
    assert _model(plant, L.MF_ACT_LAG, 1) == 0.05 * 4.0
    s.loop.clear_fault()
    assert _model(plant, L.MF_ACT_LAG, 1) == 0.05
    assert s.control.handle({"cmd": "set", "set": {"p_c2": 10.0}})["ok"]
    s.loop.step(50)  # one lag time at 1 ms
    p = plant.y[plant.output_index("pressure_c2")]
    assert p == pytest.approx(10.0 * (1.0 - 2.718281828459045 ** -1.0), rel=2e-2)


# ---------------------------------------------------------------------------------------------------------
# (b) one clutch, one name
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("first,second", [(6, "C6"), ("C6", "c6"), ("c6", 6)])
def test_a_clutch_written_two_ways_is_one_fault_that_replaces_not_stacks(first, second):
    a, b = _server(), _server()
    cap = a.plant.output_index("capacity_c6")
    a.loop.set_fault({"target": "clutch", "clutch": first, "kind": "worn", "value": 0.5})
    a.loop.set_fault({"target": "clutch", "clutch": second, "kind": "worn", "value": 0.5})
    assert [f["name"] for f in a.loop.faults.listing()] == ["clutch:C6:worn"]
    a.loop.step(1)
    b.loop.step(1)
    assert a.plant.y[cap] == pytest.approx(0.5 * b.plant.y[cap], rel=1e-12)
    assert a.loop.clear_fault("clutch:C6:worn") == ["clutch:C6:worn"]


# ---------------------------------------------------------------------------------------------------------
# (c) an output stays inside its declared range
# ---------------------------------------------------------------------------------------------------------
def test_a_stuck_closed_clutch_reports_a_capacity_inside_the_declared_range_and_still_holds():
    s = _server(inputs={**GEAR1, "engine_torque": 600.0, "load_torque": 0.0}, warm=300)
    plant = s.plant
    k = plant.output_index("capacity_c2")
    sig = plant.outputs[k]
    s.loop.set_fault({"target": "clutch", "clutch": "C2", "kind": "stuck_closed"})
    ring = s.loop.ring
    for _ in range(200):
        s.loop.step(1)
        row = ring.floats[(ring.written - 1) % ring.capacity]
        assert sig.lo <= plant.y[k] <= sig.hi
        assert sig.lo <= row[ring.f_y + k] <= sig.hi
    assert plant.y[k] == sig.hi  # saturated: the stuck clutch holds more than the range can say
    assert plant.y[plant.output_index("stuck_c2")] == 1.0
    assert abs(plant.y[plant.output_index("torque_c2")]) > 1000.0  # it carries the tie-up's reaction torque
    s.loop.clear_fault()
    s.loop.step(1)
    assert plant.y[k] < sig.hi


# ---------------------------------------------------------------------------------------------------------
# a snapshot file of before the overlay still loads and continues as it did
# ---------------------------------------------------------------------------------------------------------
def test_a_snapshot_file_written_before_the_overlay_restores_and_continues_bit_exactly():
    """The file: Powershift in gear 1 (600 N m, no load), 300 ticks, then C3 worn 0.5, C8 stuck closed and noise
    on w_out, 50 ticks; the .npy: the outputs of the 100 ticks after it, as the version that wrote it ran them.
    Only the capacity of the stuck clutch differs: it now saturates at the top of its declared range; and the
    ``ratio``, which the file's version wrote as -w_4/w_1 and which is now input over output, -w_1/w_4 (issue
    35): it is checked against the file's own axle speeds."""
    from pathlib import Path

    import numpy as np

    from plant_models.plants.powershift import N_GEARS, PF_GEAR_RATIO, RATIO_LIMIT, RATIO_MIN_OUTPUT_SPEED
    from server.realtime.snapshots import from_bytes

    data = Path(__file__).parent / "data"
    snap = from_bytes((data / "snapshot_v0_clutch_faults.npz").read_bytes())
    then = np.load(data / "snapshot_v0_clutch_faults_next100.npy")
    s = _server(inputs={**GEAR1, "engine_torque": 600.0, "load_torque": 0.0}, warm=0)
    fresh = s.plant.mf.copy()
    s.loop.restore(snap)
    assert [f["name"] for f in s.loop.faults.listing()] == ["clutch:3:worn", "clutch:C8:stuck_closed",
                                                          "signal:w_out:noise"]
    assert np.array_equal(s.plant.mf, snap["plant"]["mf"])  # the overlays give back the file's model floats
    assert _get(s, "row.C3.gain_static") == fresh[int(s.plant.mi[L.MF_GAIN_STATIC]) + 2]  # the tuned value
    k = s.plant.output_index("capacity_c8")
    hi = s.plant.outputs[k].hi
    now = []
    for _ in range(100):
        s.loop.step(1)
        now.append(s.plant.y.copy())
    now = np.array(now)
    assert then[:, k].min() > hi and np.all(now[:, k] == hi)
    r = s.plant.output_index("ratio")
    other = (np.arange(s.plant.n_out) != k) & (np.arange(s.plant.n_out) != r)
    assert np.array_equal(now[:, other], then[:, other])
    w1, w4 = then[:, s.plant.output_index("w_1")], then[:, s.plant.output_index("w_4")]
    assert np.array_equal(then[:, r], np.where(np.abs(w1) > 1e-9, -w4 / w1, 0.0))  # the file's ratio: the old one
    # now: its inverse from the same speeds, 0 once the tie-up has stopped the output
    slow = np.abs(w4) <= RATIO_MIN_OUTPUT_SPEED
    assert slow.any() and not slow.all()
    with np.errstate(divide="ignore"):
        assert np.array_equal(now[:, r], np.clip(np.where(slow, 0.0, -w1 / w4), -RATIO_LIMIT, RATIO_LIMIT))
    s.loop.clear_fault()
    # the file's table of nominal gear ratios (read by no kernel) is output over input, now input over output
    table = slice(int(s.plant.mi[L.MF_PLANT]) + PF_GEAR_RATIO, int(s.plant.mi[L.MF_PLANT]) + PF_GEAR_RATIO + N_GEARS)
    assert np.array_equal(s.plant.mf[table], 1.0 / fresh[table])
    s.plant.mf[table] = fresh[table]
    assert np.array_equal(s.plant.mf[~np.isnan(fresh)], fresh[~np.isnan(fresh)])
