"""Controllers in process: one controller object offline, in lockstep and in a test file, with the same results.

The offline closed loop (:func:`server.offline.controller.closed_loop`) and the lockstep one over the
client (:func:`server.testbench.closed_loop.closed_loop_lockstep`) must give the same rows bit for bit,
with a scenario, with a fault schedule, and without either.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from plant_models.config import ConfigError
from plant_models.registry import load_plant
from server.offline.controller import (Controller, ControllerError, bind_controller, closed_loop, row_steps,
                                      run_closed_loop)
from server.testbench.spec import load_test

ROOT = Path(__file__).resolve().parent.parent
SWAP = "examples/closed_loop_swap.py:SwapController"


def _example():
    spec = importlib.util.spec_from_file_location("closed_loop_swap_t", ROOT / "examples" / "closed_loop_swap.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def lockstep(tmp_path_factory):
    from io_adapters.zmq.client import HilClient
    from server.testbench.runner import ServerRun

    with ServerRun("powershift", "lockstep", tmp_path_factory.mktemp("lockstep")) as server:
        with HilClient(server.control, timeout_s=30.0).connect() as client:
            yield client


def _same(a, b):
    assert a.output_names == b.output_names and a.input_names == b.input_names
    assert a.time.tobytes() == b.time.tobytes()
    for j, nm in enumerate(a.output_names):
        assert a.outputs[:, j].tobytes() == b.outputs[:, j].tobytes(), nm
    for i, nm in enumerate(a.input_names):
        assert a.inputs[:, i].tobytes() == b.inputs[:, i].tobytes(), nm
    assert a.updates == b.updates


def test_the_swap_controller_offline_equals_lockstep_bit_for_bit(lockstep):
    from server.testbench.closed_loop import closed_loop_lockstep

    ex = _example()
    off_ctl = ex.SwapController(ex.SwapPlan(duration_s=1.0))
    off = closed_loop(load_plant("powershift"), None, off_ctl, duration_s=1.0, dt=1e-3)
    lock_ctl = ex.SwapController(ex.SwapPlan(duration_s=1.0))
    lock = closed_loop_lockstep(lockstep, lock_ctl, duration_s=1.0)
    _same(off, lock)
    assert off.updates == 500 and off_ctl.timeline == lock_ctl.timeline
    assert [ph for _, ph in off_ctl.timeline] == ["hold", "torque", "inertia", "lock"]
    gear = off.outputs[:, off.output_names.index("gear")]
    assert gear[0] == 1 and gear[-1] == 3  # the controller made the shift


def test_with_a_scenario_and_faults_offline_equals_lockstep_bit_for_bit(lockstep):
    """The scenario drives the inputs the controller does not own; faults on a sensor it reads and a clutch."""
    from server.offline.scenario import parse_scenario
    from server.realtime.fault_schedule import FaultSchedule
    from server.testbench.closed_loop import closed_loop_lockstep

    ex = _example()
    data = {"duration_s": 0.9, "dt_s": 0.001, "inputs": {
        "engine_torque": [[0.0, 250.0], [0.4, 320.0]], "load_torque": 3500.0, "p_c3": 16.0, "p_c6": 16.0,
        "p_c4": 0.0, "p_c5": 0.0, "p_c7": 0.0, "p_c8": 0.0, "p_c1": 3.0, "p_c2": 5.0}}
    faults = [({"target": "signal", "signal": "slip_c2", "kind": "offset", "value": 0.3}, 0.55, 0.7),
              ({"target": "clutch", "clutch": 2, "kind": "worn", "value": 0.8}, 0.5, None)]
    plant = load_plant("powershift")
    compiled = parse_scenario(data, "test").compile(plant)
    sched = FaultSchedule(plant, faults, compiled.dt)
    off_log, lock_log = [], []
    sched.log = off_log
    off = closed_loop(plant, compiled, ex.SwapController(ex.SwapPlan(duration_s=0.9), period_ticks=3), sched)
    lock = closed_loop_lockstep(lockstep, ex.SwapController(ex.SwapPlan(duration_s=0.9), period_ticks=3),
                                compiled, faults=faults, log=lock_log)
    _same(off, lock)
    assert off_log == lock_log and len(off_log) == 3
    # the scenario's ramp reached the plant (not its first-order hold: a closed-loop step holds its inputs)
    k = off.input_names.index("engine_torque")
    assert off.inputs[1, k] == 250.0 and off.inputs[201, k] == 250.0 + 70.0 * 0.2 / 0.4
    # the owned inputs are the controller's, not the scenario's
    assert off.inputs[1, off.input_names.index("p_c1")] == 16.0
    # the faulted sensor changed what the controller did: without the faults the run differs
    clean = closed_loop(plant, compiled, ex.SwapController(ex.SwapPlan(duration_s=0.9), period_ticks=3))
    assert not np.array_equal(clean.outputs, off.outputs)


class Stairs(Controller):
    """p_c2 = 0.1 bar per call: shows when a command applies."""

    owned_inputs = ("p_c2",)

    def __init__(self, period_ticks=3):
        self.period_ticks = period_ticks
        self.calls: list[float] = []

    def bind(self, output_names, input_names):
        super().bind(output_names, input_names)
        self.i = self.input_index["p_c2"]

    def update(self, t_s, y, u):
        self.calls.append(t_s)
        u[self.i] = 0.1 * len(self.calls)


def test_update_is_called_after_every_period_and_its_commands_apply_from_the_next_tick():
    plant = load_plant("powershift")
    ctl = Stairs(3)
    r = closed_loop(plant, None, ctl, duration_s=0.02, dt=1e-3)
    assert ctl.calls == [pytest.approx(3e-3 * (j + 1), rel=1e-12) for j in range(6)]
    p_c2 = r.inputs[:, r.input_names.index("p_c2")]
    # row j > 0 holds the inputs of step j - 1: step k is commanded 0.1 * (k // 3) bar
    assert p_c2.tolist() == [0.0] + [0.1 * (k // 3) for k in range(20)]
    trace = run_closed_loop(plant, None, Stairs(3), duration_s=0.02, dt=1e-3, every=5)
    assert trace.time.tolist() == pytest.approx([0.0, 0.005, 0.01, 0.015, 0.02]) and trace.steps == 20
    assert trace.values.tobytes() == r.outputs[::5].tobytes()


class _Bare:
    period_ticks = 1
    owned_inputs = ("p_c2",)

    def bind(self, outs, ins):
        pass

    def update(self, t, y, u):
        pass


@pytest.mark.parametrize("change,message", [
    (dict(period_ticks=0), "controller _Bare: period_ticks must be an integer >= 1, got 0"),
    (dict(period_ticks=1.5), "controller _Bare: period_ticks must be an integer >= 1, got 1.5"),
    (dict(period_ticks=True), "controller _Bare: period_ticks must be an integer >= 1, got True"),
    (dict(owned_inputs=("p_c22",)), "controller _Bare: owned input 'p_c22' is not an input of the plant; did you "
     "mean 'p_c2'?; its inputs are p_c1, p_c2, p_c3, p_c4, p_c5, p_c6, p_c7, p_c8, engine_torque, load_torque"),
    (dict(owned_inputs="p_c2"), "controller _Bare: owned_inputs must be a tuple of input names, got 'p_c2'"),
    (dict(owned_inputs=("p_c2", "p_c2")), "controller _Bare: owned_inputs names an input twice: ['p_c2', 'p_c2']"),
    (dict(initial_inputs=lambda: {"w_out": 1.0}), "controller _Bare: initial input 'w_out' is not an input"),
    (dict(initial_inputs=lambda: {"p_c1": float("nan")}), "controller _Bare: initial input p_c1 must be a finite"),
    (dict(kernel=lambda *a: None), "controller _Bare: a kernel needs kernel_state, a 1-d float64 array"),
])
def test_a_controller_that_does_not_fit_is_a_one_line_error(change, message):
    plant = load_plant("powershift")
    ctl = _Bare()
    for k, v in change.items():
        setattr(ctl, k, v)
    with pytest.raises(ControllerError) as ei:
        bind_controller(ctl, [s.name for s in plant.outputs], [s.name for s in plant.inputs])
    assert str(ei.value).startswith(message) and "\n" not in str(ei.value)


TEST_FILE = '''name = "swap by the controller in process ({mode})"
plant = "powershift"
mode = "{mode}"
duration_s = 1.0
{controller}
[[faults]]
at = 0.3
until = 0.45
target = "signal"
signal = "w_out"
kind = "noise"
value = 0.2
seed = 3

[[expect]]
name = "gear 3 within 0.3 s of the shift"
expr = "gear"
eq = 3
within_s = 0.3
after = {{ command = "p_c2" }}

[[expect]]
name = "clutch 2 holds at the end"
expr = "stuck_c2 == 1"
at = 1.0
'''
CONTROLLER = f'[controller]\nclass = "{SWAP}"\nparams = {{ shift_at_s = 0.6, period_ticks = 4 }}\n'


def test_a_test_file_runs_a_controller_class_offline_and_in_lockstep_with_the_same_recording(tmp_path):
    from server.testbench.runner import run_in_process, run_test

    recs = {}
    for mode in ("offline", "lockstep"):
        p = tmp_path / f"{mode}.toml"
        p.write_text(TEST_FILE.format(mode=mode, controller=CONTROLLER))
        spec = load_test(p)
        assert spec.controller_class.target == SWAP and spec.controller_class.params == {"shift_at_s": 0.6,
                                                                                         "period_ticks": 4}
        log: list[str] = []
        (tmp_path / mode).mkdir()
        recs[mode] = run_in_process(spec, tmp_path / mode, log)
        assert log[0].startswith("t = 0.3 s: fault set faults[0]") and len(log) == 2
    off, lock = recs["offline"], recs["lockstep"]
    assert off.signals.keys() == lock.signals.keys()
    for nm in off.signals:
        assert off.signals[nm].tobytes() == lock.signals[nm].tobytes(), nm
    p_c2 = off.signals["p_c2"]
    assert p_c2[599] == 0.0 and p_c2[604] > 0.0  # the shift began at 0.6 s, as the parameter said
    res = run_test(load_test(tmp_path / "offline.toml"))
    assert res.passed, [v.message for v in res.verdicts]
    assert res.verdicts[0].message.startswith("gear == 3 reached at t = ")


@pytest.mark.parametrize("body,key,message", [
    ('controller = "examples/closed_loop_swap.py:NoSuch"', "controller",
     "controller 'examples/closed_loop_swap.py:NoSuch': no class NoSuch in examples/closed_loop_swap.py"),
    ('controller = "examples/no_such_file.py:SwapController"', "controller",
     "controller 'examples/no_such_file.py:SwapController': no file examples/no_such_file.py"),
    (f'[controller]\nclass = "{SWAP}"\nparams = {{ shift_at = 0.6 }}', "controller.class",
     f"controller '{SWAP}': parameters {{'shift_at': 0.6}}: "),
    (f'[controller]\nclass = "{SWAP}"\nparams = {{ period_ticks = 0 }}', "controller.class",
     "controller SwapController: period_ticks must be an integer >= 1, got 0"),
])
def test_a_bad_controller_class_in_a_test_file_is_one_line_before_anything_runs(tmp_path, body, key, message):
    p = tmp_path / "bad.toml"
    p.write_text(TEST_FILE.format(mode="offline", controller=body))
    with pytest.raises(ConfigError) as ei:
        load_test(p)
    assert str(ei.value).startswith(f"{p}: {key}: {message}"), str(ei.value)


def test_a_controller_class_is_refused_in_realtime_mode(tmp_path):
    p = tmp_path / "rt.toml"
    p.write_text(TEST_FILE.format(mode="realtime", controller=f'controller = "{SWAP}"'))
    with pytest.raises(ConfigError) as ei:
        load_test(p)
    assert str(ei.value).startswith(f"{p}: controller: a controller class runs in process in offline and lockstep")


def _pi():
    spec = importlib.util.spec_from_file_location("slip_pi_controller_t", ROOT / "examples" / "slip_pi_controller.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


PI_INITIAL = {"p_c3": 16.0, "p_c6": 16.0, "engine_torque": 300.0, "load_torque": 0.0}


def test_a_controller_kernel_in_the_compiled_loop_equals_its_update_path_and_lockstep(lockstep):
    """The kernel called inside the compiled run, the same kernel through update offline, and in lockstep."""
    from server.offline.scenario import parse_scenario
    from server.testbench.closed_loop import closed_loop_lockstep

    pi = _pi()
    plant = load_plant("powershift")
    data = {"duration_s": 1.5, "dt_s": 0.001, "leave_at_default": ["p_c1", "p_c2", "p_c4", "p_c5", "p_c7", "p_c8"],
            "inputs": {"engine_torque": [[0.0, 250.0], [1.0, 320.0]], "load_torque": 0.0, "p_c3": 16.0,
                       "p_c6": 16.0}}
    compiled = parse_scenario(data, "test").compile(plant)
    for source in (None, compiled):
        args = dict(duration_s=1.5, dt=1e-3) if source is None else {}
        fast_ctl = pi.SlipPIController(period_ticks=3, initial=PI_INITIAL)
        fast = closed_loop(plant, source, fast_ctl, every=1, **args)
        slow_ctl = pi.SlipPIController(period_ticks=3, initial=PI_INITIAL)
        slow = closed_loop(plant, source, slow_ctl, every=1, use_kernel=False, **args)
        _same(fast, slow)
        assert fast_ctl.kernel_state.tobytes() == slow_ctl.kernel_state.tobytes()
        assert fast.status_or == slow.status_or
        assert [(e["time"], e["type"]) for e in fast.events] == [(e["time"], e["type"]) for e in slow.events]
        slip = fast.outputs[:, fast.output_names.index("slip_c2")]
        assert abs(abs(slip[-1]) - 5.0) < 0.2  # the PI loop holds the target slip
    lock = closed_loop_lockstep(lockstep, pi.SlipPIController(period_ticks=3, initial=PI_INITIAL), compiled)
    _same(fast, lock)
    # with a fault schedule: the fault stage inside the compiled loop, chunked at the switches
    from server.realtime.fault_schedule import FaultSchedule

    faults = [({"target": "signal", "signal": "slip_c2", "kind": "noise", "value": 0.5, "seed": 5}, 0.6, 0.9),
              ({"target": "signal", "signal": "engine_torque", "kind": "offset", "value": 30.0}, 0.7, None),
              ({"target": "clutch", "clutch": 2, "kind": "slow_actuator", "value": 2.0}, 0.8, 1.2)]
    runs = []
    for kernel in (True, False):
        sched = FaultSchedule(plant, faults, compiled.dt)
        runs.append(closed_loop(plant, compiled, pi.SlipPIController(period_ticks=3, initial=PI_INITIAL), sched,
                                use_kernel=kernel))
    _same(*runs)
    lock = closed_loop_lockstep(lockstep, pi.SlipPIController(period_ticks=3, initial=PI_INITIAL), compiled,
                                faults=faults)
    _same(runs[0], lock)
    assert not np.array_equal(runs[0].outputs, fast.outputs)  # the faults acted
    # every 7th row, compiled: the same rows
    thin = closed_loop(plant, compiled, pi.SlipPIController(period_ticks=3, initial=PI_INITIAL), every=7)
    assert thin.outputs.tobytes() == fast.outputs[row_steps(1500, 7)].tobytes()


def test_record_offline_takes_another_plant_controller_and_faults_for_a_campaign(tmp_path):
    """The file's run on a plant made once, with its controller's parameters and its fault's times varied."""
    from dataclasses import replace

    from server.testbench.runner import record_offline

    p = tmp_path / "base.toml"
    p.write_text(TEST_FILE.format(mode="offline", controller=CONTROLLER))
    spec = load_test(p)
    plant = load_plant(spec.plant_config)
    base = record_offline(spec, plant, None)
    assert base.signals["p_c2"][599] == 0.0 and base.signals["p_c2"][604] > 0.0  # shift_at_s = 0.6 of the file
    later = record_offline(spec, plant, None, controller=spec.controller_class.build(shift_at_s=0.7))
    assert later.signals["p_c2"][699] == 0.0 and later.signals["p_c2"][704] > 0.0
    log: list[str] = []
    moved = (replace(spec.faults[0], at=0.1, until=0.2),)
    record_offline(spec, plant, None, log, faults=moved)
    assert log[0].startswith("t = 0.1 s: fault set") and log[1].startswith("t = 0.2 s: fault cleared")
    # the same plant object again: nothing of the runs before is left in it
    assert record_offline(spec, plant, None).signals["w_out"].tobytes() == base.signals["w_out"].tobytes()


class _LaggingServer:
    """A stand-in for a realtime server's client whose plant advances ``slowdown`` times slower than the wall clock,
    as a loop that misses ticks on a loaded machine does (each state: one tick, 1 ms of plant time)."""

    output_names = ("w_out",)
    input_names = ("p_c2",)

    def __init__(self, slowdown: float):
        import time

        self._clock, self._t0, self.tick, self._slow = time.monotonic, time.monotonic(), 0, slowdown

    def subscribe(self, topics):
        """Nothing to choose: the stand-in sends its one state stream."""

    def reset(self, inputs):
        """Nothing to reset: the stand-in's plant time runs from its construction."""

    def get(self):
        return {"u": {"p_c2": 0.0}}

    def set_inputs(self, values):
        return 1

    def _state(self):
        from types import SimpleNamespace

        self.tick = int((self._clock() - self._t0) / (1e-3 * self._slow))
        return SimpleNamespace(t=self.tick * 1e-3, tick=self.tick, seq=self.tick, ack=1, y={"w_out": 0.0})

    def wait_for(self, predicate, timeout_s):
        return self._state()

    def latest_state(self, timeout_s):
        import time

        time.sleep(1e-3)
        return self._state()


def test_a_realtime_closed_loop_runs_to_the_plants_duration_when_the_plant_falls_behind_the_wall_clock():
    """Ending on the wall clock would cut the run short by the ticks the loop missed (it did: a whole WLTC on a
    loaded machine ended at 1734 s of plant time); the run ends at the plant's duration, or says how far it got."""
    from server.testbench.closed_loop import closed_loop_realtime

    st = closed_loop_realtime(_LaggingServer(1.5), _Bare(), duration_s=0.2, timeout_s=0.05)
    assert st.t_end_s >= 0.2  # 0.3 s of wall time: more than timeout_s + duration_s
    with pytest.raises(TimeoutError, match=r"the plant reached t = 0\.\d+ s of 0\.1 s within 0\.25 s of wall"):
        closed_loop_realtime(_LaggingServer(4.0), _Bare(), duration_s=0.1, timeout_s=0.05)  # 0.4 s needed
