"""Fault injection (server/realtime/faults.py, docs/faults.md): signal faults, clutch faults, control requests, visibility.

Most tests run a lockstep loop in this process and compare it with a twin
loop without the fault, stepped the same way: a sensor fault must change
only what the sensor reports, an input fault only what the plant receives,
a clutch fault the clutch's physics, and clearing a fault must leave the
model exactly as it was.
"""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

from io_adapters.base import TI_FAULTS
from plant_models.run.ring import I_FAULTS
from plant_models.core.api import L
from plant_models.errors import FaultError
from plant_models.registry import load_plant
from server.realtime.faults import MAX_FAULTS, parse_fault
from server.realtime.loop_config import LoopConfig
from server.realtime.runtime import assemble

from server_support import ServerProcess

GEAR1 = {"p_c1": 16.0, "p_c3": 16.0, "p_c6": 16.0, "engine_torque": 300.0, "load_torque": 500.0}


def _server(config="powershift", inputs=None):
    plant = load_plant(config)
    srv = assemble(plant, [], LoopConfig(mode="lockstep"), initial_inputs=inputs or {})
    srv.loop.start()
    return srv


def _pair(inputs=GEAR1, warm=200):
    a, b = _server(inputs=inputs), _server(inputs=inputs)
    a.loop.step(warm)
    b.loop.step(warm)
    return a, b


def _state(plant):
    """The core's state vector (speeds, twists, actuator states, work)."""
    o = int(plant.mi[L.DF_Y])
    return plant.df[o:o + int(plant.mi[L.H_NY])]


def _ring_row(loop):
    r = loop.ring
    j = (r.written - 1) % r.capacity
    return r.ints[j], r.floats[j]


# ---------------------------------------------------------------------------------------------------------
# signal faults on outputs: the sensor lies, the plant does not change
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("fault,expect", [
    ({"kind": "offset", "value": 5.0}, lambda clean, held: clean + 5.0),
    ({"kind": "gain", "value": -2.0}, lambda clean, held: clean * -2.0),
    ({"kind": "force", "value": 123.0}, lambda clean, held: np.full_like(clean, 123.0)),
    ({"kind": "freeze"}, lambda clean, held: np.full_like(clean, held)),
    ({"kind": "dropout"}, lambda clean, held: np.zeros_like(clean)),
    ({"kind": "dropout", "mode": "last"}, lambda clean, held: np.full_like(clean, held)),
])
def test_an_output_fault_changes_only_what_the_sensor_reports(fault, expect):
    a, b = _pair()
    k = a.plant.output_index("w_out")
    held = float(a.plant.y[k])
    a.loop.set_fault({"target": "signal", "signal": "w_out", **fault})
    clean, faulty = [], []
    for _ in range(300):
        a.loop.step(1)
        b.loop.step(1)
        faulty.append(a.plant.y[k])
        clean.append(b.plant.y[k])
        other = np.arange(a.plant.n_out) != k
        assert np.array_equal(a.plant.y[other], b.plant.y[other])
        assert np.array_equal(_state(a.plant), _state(b.plant))  # the physics is untouched
        ints, floats = _ring_row(a.loop)
        assert floats[a.loop.ring.f_y + k] == a.plant.y[k] and ints[I_FAULTS] == 1  # the stream shows it
    clean = np.array(clean)
    assert np.ptp(clean) > 0.1  # the shaft accelerates: a frozen value differs from the live one
    assert np.array_equal(np.array(faulty), expect(clean, held))


def test_a_cleared_output_fault_reports_the_true_value_again_at_the_next_tick():
    a, b = _pair()
    a.loop.set_fault({"target": "signal", "signal": "w_out", "kind": "offset", "value": 5.0, "name": "bias"})
    a.loop.step(50)
    b.loop.step(50)
    assert a.loop.clear_fault("bias") == ["bias"]
    a.loop.step(1)
    b.loop.step(1)
    assert np.array_equal(a.plant.df, b.plant.df)


def test_faults_on_one_signal_compose_in_the_order_they_were_set_and_a_replaced_one_starts_afresh():
    a, b = _pair()
    k = a.plant.output_index("w_out")
    a.loop.set_fault({"target": "signal", "signal": "w_out", "kind": "offset", "value": 1.0, "name": "o"})
    a.loop.set_fault({"target": "signal", "signal": "w_out", "kind": "gain", "value": 2.0, "name": "g"})
    a.loop.step(3)
    b.loop.step(3)
    assert a.plant.y[k] == (b.plant.y[k] + 1.0) * 2.0
    # inputs too, and after the step the command is back, whatever the order
    j = a.plant.input_index("engine_torque")
    a.loop.set_fault({"target": "signal", "signal": "engine_torque", "kind": "gain", "value": 0.5, "name": "ig"})
    a.loop.set_fault({"target": "signal", "signal": "engine_torque", "kind": "offset", "value": 50.0, "name": "io"})
    a.loop.step(1)
    assert _ring_row(a.loop)[1][a.loop.ring.f_u + j] == 300.0 * 0.5 + 50.0 and a.plant.u[j] == 300.0
    a.loop.clear_fault()
    a.loop.set_fault({"target": "signal", "signal": "w_out", "kind": "freeze", "name": "f"})
    held = a.plant.y[k]
    a.loop.step(20)
    assert a.plant.y[k] == held
    a.loop.set_fault({"target": "signal", "signal": "w_out", "kind": "freeze", "name": "f"})  # replaced: held anew
    a.loop.step(1)
    assert a.plant.y[k] != held


def test_seeded_noise_is_reproducible_and_has_the_requested_spread():
    runs = []
    for seed in (7, 7, 8):
        a = _server(inputs=GEAR1)
        a.loop.set_fault({"target": "signal", "signal": "ratio", "kind": "noise", "value": 0.25, "seed": seed})
        b = _server(inputs=GEAR1)
        d = []
        for _ in range(4000):
            a.loop.step(1)
            b.loop.step(1)
            d.append(a.plant.y[a.plant.output_index("ratio")] - b.plant.y[b.plant.output_index("ratio")])
        runs.append(np.array(d))
    assert np.array_equal(runs[0], runs[1]) and not np.array_equal(runs[0], runs[2])
    for d in runs:  # standard normal scaled by 0.25: mean within 5 standard errors, spread within 5 %
        assert abs(d.mean()) < 5 * 0.25 / math.sqrt(d.size)
        assert abs(d.std() / 0.25 - 1.0) < 0.05


# ---------------------------------------------------------------------------------------------------------
# signal faults on inputs: the plant receives the faulted command, the command itself is kept
# ---------------------------------------------------------------------------------------------------------
def test_a_forced_input_steps_the_plant_exactly_as_that_command_would_and_the_command_survives():
    a, b = _pair()
    a.loop.set_fault({"target": "signal", "signal": "engine_torque", "kind": "force", "value": 900.0})
    b.plant.u[b.plant.input_index("engine_torque")] = 900.0
    for _ in range(200):
        a.loop.step(1)
        b.loop.step(1)
        assert np.array_equal(_state(a.plant), _state(b.plant))
        assert np.array_equal(a.plant.y, b.plant.y)
    k = a.plant.input_index("engine_torque")
    assert a.plant.u[k] == 300.0  # between ticks the command, not the fault's value
    _, floats = _ring_row(a.loop)
    assert floats[a.loop.ring.f_u + k] == 900.0  # the state row shows what the step used
    a.loop.clear_fault()
    b.plant.u[k] = 300.0
    a.loop.step(20)
    b.loop.step(20)
    assert np.array_equal(_state(a.plant), _state(b.plant))


def test_a_faulted_input_is_clamped_to_its_declared_range():
    a, b = _pair()
    a.loop.set_fault({"target": "signal", "signal": "p_c1", "kind": "offset", "value": 1e6})
    hi = a.plant.input_signal("p_c1").hi
    b.plant.u[b.plant.input_index("p_c1")] = hi
    a.loop.step(30)
    b.loop.step(30)
    assert a.loop.status_word == 0
    assert np.array_equal(_state(a.plant), _state(b.plant))


def test_an_input_fault_works_under_a_scenario_and_a_fault_free_run_stays_bit_identical():
    a, b = _server(), _server()
    for s in (a, b):
        assert s.control.handle_now({"cmd": "load_scenario", "path": "powershift_single_swap"})["ok"]
        s.loop.start()
    # set and cleared before the first tick: the model floats and tables go back exactly; nothing differs
    a.loop.set_fault({"target": "clutch", "clutch": 2, "kind": "worn", "value": 0.3})
    a.loop.set_fault({"target": "signal", "signal": "p_c2", "kind": "gain", "value": 0.5})
    a.loop.clear_fault()
    a.loop.step(1500)
    b.loop.step(1500)
    assert np.array_equal(a.plant.df, b.plant.df) and np.array_equal(a.plant.mf, b.plant.mf)
    a.loop.set_fault({"target": "signal", "signal": "p_c2", "kind": "freeze"})
    k = a.plant.input_index("p_c2")
    frozen = a.plant.u[k]
    for _ in range(100):
        a.loop.step(1)
        b.loop.step(1)
        assert _ring_row(a.loop)[1][a.loop.ring.f_u + k] == frozen
        assert a.plant.u[k] == b.plant.u[k]  # the scenario's value, restored after the step


# ---------------------------------------------------------------------------------------------------------
# clutch faults: through the core's model floats
# ---------------------------------------------------------------------------------------------------------
def _floats(plant, row):
    mf, mi = plant.mf, plant.mi
    return [float(mf[int(mi[s]) + row]) for s in (L.MF_GAIN_STATIC, L.MF_GAIN_KINETIC, L.MF_ACT_PRELOAD,
                                                   L.MF_ACT_LAG)]


def test_no_torque_and_worn_scale_the_clutch_capacity_and_clearing_restores_every_model_float():
    a, b = _pair()
    mf0 = a.plant.mf.copy()
    a.loop.set_fault({"target": "clutch", "clutch": 3, "kind": "worn", "value": 0.5})
    a.loop.step(1)
    b.loop.step(1)
    cap = a.plant.output_index("capacity_c3")
    assert a.plant.y[cap] == pytest.approx(0.5 * b.plant.y[cap], rel=1e-12)
    a.loop.set_fault({"target": "clutch", "clutch": 3, "kind": "no_torque"})
    a.loop.step(200)
    # no clamping torque left: only the open clutch's viscous drag (well under 0.1 % of the 300 N m it held)
    assert a.plant.y[cap] == 0.0 and abs(a.plant.y[a.plant.output_index("torque_c3")]) < 0.3
    assert a.plant.y[a.plant.output_index("gear")] == 0  # with C3 open gear 1 is lost
    assert len(a.loop.faults.active) == 2 and a.loop.tick_info[TI_FAULTS] == 2
    a.loop.clear_fault()
    assert np.array_equal(a.plant.mf[~np.isnan(mf0)], mf0[~np.isnan(mf0)])


def test_a_slow_actuator_scales_the_pressure_lag_first_order_response():
    """A step in the command: the pressure reaches 1 - 1/e of it after one (scaled) lag time."""
    s = _server(inputs={"engine_torque": 0.0})
    plant = s.plant
    lag = _floats(plant, 1)[3]
    s.loop.set_fault({"target": "clutch", "clutch": 2, "kind": "slow_actuator", "value": 4.0})
    assert _floats(plant, 1)[3] == 4.0 * lag
    assert s.control.handle({"cmd": "set", "set": {"p_c2": 10.0}})["ok"]
    n = int(round(4.0 * lag / s.loop.dt))
    s.loop.step(n)
    p = plant.y[plant.output_index("pressure_c2")]
    assert p == pytest.approx(10.0 * (1.0 - math.exp(-n * s.loop.dt / (4.0 * lag))), rel=1e-9)
    assert p == pytest.approx(10.0 * (1.0 - math.exp(-1.0)), rel=2e-2)


def test_a_pressure_sensor_bias_offsets_only_the_pressure_output():
    a, b = _pair()
    a.loop.set_fault({"target": "clutch", "clutch": 1, "kind": "pressure_bias", "value": 0.75})
    a.loop.step(10)
    b.loop.step(10)
    k = a.plant.output_index("pressure_c1")
    assert a.plant.y[k] == b.plant.y[k] + 0.75
    assert np.array_equal(_state(a.plant), _state(b.plant))


def test_a_clutch_stuck_closed_ties_up_the_gearbox():
    """Gear 1 under drive torque; C8 stuck closed locks a second path (a tie-up): the output decelerates to
    standstill, C8 carries a large reaction torque, and the clutches of gear 1 keep slipping against it."""
    a, b = _pair(inputs={**GEAR1, "engine_torque": 600.0, "load_torque": 0.0}, warm=500)
    w = a.plant.output_index("w_out")
    w0 = a.plant.y[w]
    a.loop.set_fault({"target": "clutch", "clutch": "C8", "kind": "stuck_closed"})
    trace = []
    for _ in range(6):
        a.loop.step(50)
        b.loop.step(50)
        trace.append(a.plant.y[w])
    assert b.plant.y[w] > w0 + 1.0  # unfaulted: still accelerating
    assert trace[0] < w0 and all(np.diff(trace) <= 1e-9) and abs(trace[-1]) < 1e-6  # decelerates, then locked
    assert a.plant.y[a.plant.output_index("stuck_c8")] == 1.0
    assert abs(a.plant.y[a.plant.output_index("torque_c8")]) > 5000.0
    assert a.loop.status_word & L.ST_BAD_INPUT == 0


def test_clutch_faults_stack_and_clear_in_any_order():
    s = _server(inputs=GEAR1)
    orig = _floats(s.plant, 4)
    s.loop.set_fault({"target": "clutch", "clutch": 5, "kind": "worn", "value": 0.5, "name": "w"})
    s.loop.set_fault({"target": "clutch", "clutch": 5, "kind": "slow_actuator", "value": 2.0, "name": "s"})
    now = _floats(s.plant, 4)
    assert now == [orig[0] * 0.5, orig[1] * 0.5, orig[2], orig[3] * 2.0]
    s.loop.clear_fault("w")
    assert _floats(s.plant, 4) == [orig[0], orig[1], orig[2], orig[3] * 2.0]
    s.loop.clear_fault("s")
    assert _floats(s.plant, 4) == orig


# ---------------------------------------------------------------------------------------------------------
# control requests, status, reset, errors
# ---------------------------------------------------------------------------------------------------------
def test_fault_requests_set_list_clear_and_a_reset_clears_everything():
    s = _server(inputs=GEAR1)
    h = s.control.handle
    rep = h({"cmd": "fault_set", "fault": {"target": "signal", "signal": "w_out", "kind": "freeze"}})
    assert rep["ok"] and rep["name"] == "signal:w_out:freeze"
    assert h({"cmd": "fault_set", "fault": {"target": "clutch", "clutch": 2, "kind": "no_torque"}})["ok"]
    names = [f["name"] for f in h({"cmd": "fault_list"})["faults"]]
    assert names == ["signal:w_out:freeze", "clutch:C2:no_torque"]
    st = h({"cmd": "status"})["status"]
    assert [f["name"] for f in st["faults"]] == names
    assert "FAULTS 2" in s.report.status_line()
    assert h({"cmd": "fault_clear", "name": "signal:w_out:freeze"})["cleared"] == ["signal:w_out:freeze"]
    err = h({"cmd": "fault_clear", "name": "nope"})
    assert not err["ok"] and err["error"]["code"] == "fault_error" and "clutch:C2:no_torque" in err["error"]["message"]
    h({"cmd": "step", "n": 5})
    assert h({"cmd": "reset"})["ok"]
    assert h({"cmd": "fault_list"})["faults"] == [] and s.loop.tick_info[TI_FAULTS] == 0
    assert h({"cmd": "status"})["status"]["faults"] == []


@pytest.mark.parametrize("fault,message", [
    ({"target": "signal", "signal": "w_ot", "kind": "offset", "value": 1}, "no signal 'w_ot'"),
    ({"target": "signal", "signal": "w_out", "kind": "offset"}, "needs 'value'"),
    ({"target": "signal", "signal": "w_out", "kind": "freeze", "value": 1}, "takes no 'value'"),
    ({"target": "signal", "signal": "p_c1", "kind": "force", "value": 1e9}, "p_c1"),
    ({"target": "signal", "signal": "w_out", "kind": "noise", "value": -1}, "'value' must be in"),
    ({"target": "signal", "signal": "w_out", "kind": "offset", "value": float("nan")}, "finite"),
    ({"target": "signal", "signal": "w_out", "kind": "offset", "value": 1, "extra": 1}, "unknown key 'extra'"),
    ({"target": "clutch", "clutch": 9, "kind": "worn", "value": 0.5}, "no clutch number 9"),
    ({"target": "clutch", "clutch": 1, "kind": "worn", "value": 1.5}, "'value' must be in [0, 1]"),
    ({"target": "clutch", "clutch": 1, "kind": "melted"}, "'kind' of a clutch fault"),
    ({"target": "brakes", "kind": "x"}, "'target' must be one of"),
    ({"target": "can", "message": "HIL_Speeds", "kind": "drop"}, "needs the can adapter"),
    ({"target": "zmq", "kind": "drop_commands"}, "needs the zmq adapter"),
    ("offset", "a fault must be a map"),
])
def test_a_bad_fault_is_refused_with_one_line_and_changes_nothing(fault, message):
    s = _server(inputs=GEAR1)
    mf0 = s.plant.mf.copy()
    rep = s.control.handle({"cmd": "fault_set", "fault": fault})
    assert not rep["ok"] and rep["error"]["code"] == "fault_error"
    assert message in rep["error"]["message"] and "\n" not in rep["error"]["message"]
    assert s.loop.faults.active == [] and np.array_equal(s.plant.mf, mf0, equal_nan=True)


def test_the_signal_table_is_bounded():
    s = _server(inputs=GEAR1)
    for j in range(MAX_FAULTS):
        s.loop.set_fault({"target": "signal", "signal": "w_out", "kind": "offset", "value": 1.0, "name": f"f{j}"})
    with pytest.raises(FaultError, match=f"at most {MAX_FAULTS}"):
        s.loop.set_fault({"target": "signal", "signal": "w_out", "kind": "offset", "value": 1.0, "name": "one more"})
    s.loop.step(1)
    # a same-named fault replaces the old one, even with the table full
    s.loop.set_fault({"target": "signal", "signal": "w_out", "kind": "offset", "value": 2.0, "name": "f0"})
    assert len(s.loop.faults.active) == MAX_FAULTS


def test_parse_fault_names_and_clutch_numbers():
    plant = load_plant("dct")
    names = plant.row_names()
    spec = parse_fault({"target": "clutch", "clutch": names[0], "kind": "no_torque"}, plant)
    assert spec.row == 0 and spec.name == f"clutch:{names[0]}:no_torque"
    assert parse_fault({"target": "clutch", "clutch": 1, "kind": "no_torque"}, plant).row == 0


# ---------------------------------------------------------------------------------------------------------
# over the control channel of a running server
# ---------------------------------------------------------------------------------------------------------
def test_a_fault_set_over_the_control_channel_is_active_at_the_next_tick(tmp_path):
    """Realtime at 1 kHz: the tick after the one the reply names already has the fault, the one before not."""
    with ServerProcess(tmp_path, mode="realtime", extra="[watchdog]\nenabled = false") as srv:
        with srv.client() as hil:
            hil.subscribe(("state",))
            time.sleep(0.3)
            for attempt in range(3):
                rep = hil.request("fault_set", fault={"target": "signal", "signal": "w_out", "kind": "force",
                                                      "value": 123.0})
                k = rep["tick"]
                seen = {}
                deadline = time.monotonic() + 10
                while k + 1 not in seen and time.monotonic() < deadline:
                    s = hil.recv_state(1.0)
                    if s is not None and s.tick in (k, k + 1):
                        seen[s.tick] = s
                assert k + 1 in seen
                after = seen[k + 1]
                assert after.faults == 1 and after.y["w_out"] == 123.0
                if k in seen:  # the tick before the request (not yet consumed when subscribing late: retry)
                    assert seen[k].faults == 0 and seen[k].y["w_out"] != 123.0
                    break
                hil.clear_fault()
                time.sleep(0.05)
            else:
                pytest.fail("never saw the tick before the request on the stream")
            assert hil.clear_fault() == ["signal:w_out:force"]
            s = hil.recv_state(2.0)
            while s is not None and s.faults:
                s = hil.recv_state(2.0)
            assert s is not None and s.y["w_out"] != 123.0
