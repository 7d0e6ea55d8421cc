"""The compiled assembly (plant_models/fmi/compiled.py): a plant with FMUs (FMI 2.0 and 3.0, co-simulation and model
exchange) stepped in one compiled call that calls the FMUs' C functions by address.  Its offline run (the compiled loop) and its tick equal
the Python assembly's (the stepwise run) bit for bit: outputs, status words, events, failures and their messages,
snapshots."""

from __future__ import annotations

import math

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("fmpy", reason="needs the fmi extra (pip install 'gearbox-hil[fmi]')")

from fmu_build import build_first_order, build_first_order3, build_me, compiler, python_assembly  # noqa: E402
from plant_models.fmi.assembly import FmuAssembly  # noqa: E402
from plant_models.fmi.compiled import CompiledFmuAssembly  # noqa: E402
from plant_models.offline import Run, StepwiseRun  # noqa: E402
from plant_models.registry import load_plant  # noqa: E402
from server.offline.run import run_offline  # noqa: E402
from server.offline.scenario import parse_scenario  # noqa: E402

pytestmark = pytest.mark.skipif(compiler() is None, reason="needs a C compiler (cc) to build the test FMU")

ROOT = Path(__file__).resolve().parents[1]
DT = 1e-3
GEAR_1 = {"p_c1": 16.0, "p_c3": 16.0, "p_c6": 16.0}
# a torque ramp through the FMU, a load step and a shift (clutch 3 out, clutch 2 in): slips, events
SCENARIO = {"duration_s": 0.6, "dt_s": DT, "interpolation": "linear",
            "inputs": {"engine.torque_cmd": [[0.0, 100.0], [0.3, 400.0]], "load_torque": [[0.0, 3500.0], [0.2, 0.0]],
                       "p_c1": 16.0, "p_c6": 16.0, "p_c3": [[0.0, 16.0], [0.35, 16.0], [0.4, 0.0]],
                       "p_c2": [[0.0, 0.0], [0.35, 0.0], [0.45, 16.0]]}}


@pytest.fixture(scope="module")
def fmu_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("fmu")
    build_first_order(d / "engine.fmu")
    build_first_order(d / "typed2.fmu", typed=True)
    build_me(d / "lag.fmu", "lag")
    build_me(d / "ball.fmu", "ball")
    build_first_order3(d / "typed3.fmu")
    build_me(d / "ball3.fmu", "ball", version=3)
    build_me(d / "lag3.fmu", "lag", version=3)
    return d


def config(d: Path, name: str, file: str = "engine.fmu", start: str = "tau = 0.05", extra: str = "",
           to_plant: str = 'torque = "engine_torque"') -> Path:
    p = d / name
    p.write_text(f'extends = "{ROOT / "configs" / "powershift.toml"}"\n\n[[fmu]]\nname = "engine"\nfile = "{file}"\n'
                 f'start = {{ {start} }}\nto_plant = {{ {to_plant} }}\n{extra}')
    return p


def both(cfg: Path):
    compiled, python = load_plant(cfg), python_assembly(cfg)
    assert type(compiled) is CompiledFmuAssembly and type(python) is FmuAssembly
    return compiled, python


def offline(plant, content=SCENARIO, every=1):
    return run_offline(plant, parse_scenario(content, "inline").compile(plant), every)


def same_trace(a, b) -> None:
    assert a.values.shape == b.values.shape and a.values.tobytes() == b.values.tobytes()  # bit for bit, NaN too
    assert np.array_equal(a.time, b.time)
    assert a.events == b.events and a.status_or == b.status_or


@pytest.mark.parametrize("file, start, every", [("engine.fmu", "tau = 0.05", 1), ("engine.fmu", "tau = 0.05", 7),
                                                ("typed2.fmu", "tau = 0.05, divider = 3, enabled = true", 1)])
def test_the_compiled_offline_run_equals_the_stepwise_run_bit_for_bit(fmu_dir, file, start, every):
    """Every 7th row: the compiled run tells the inner plant its outputs go unread (run hints) at the others."""
    compiled, python = both(config(fmu_dir, f"ps_{file}.toml", file, start))
    scenario = parse_scenario(SCENARIO, "inline")
    from plant_models.offline import make_run
    for plant, kind in ((compiled, Run), (python, StepwiseRun)):  # the run each takes
        plant.reset(scenario.compile(plant).start_inputs())
        c = scenario.compile(plant)
        assert type(make_run(plant, c.table, c.dt, c.n_steps)) is kind
    a, b = offline(compiled, every=every), offline(python, every=every)
    same_trace(a, b)
    assert len(a.events) > 0  # the shift's slips and lock-ups went through the event mirror
    torque = a.values[:, compiled.output_index("engine.torque")]
    assert torque[-1] > 300.0  # the FMU followed its command: it was stepped
    if file == "typed2.fmu":  # the Integer output counts the steps the FMU took (the divider's count)
        assert a.values[-1, compiled.output_index("engine.step_count")] > 0


def test_the_compiled_tick_equals_the_python_tick_and_the_offline_run(fmu_dir):
    compiled, python = both(config(fmu_dir, "tick.toml"))
    rows = {}
    for plant in (compiled, python):
        plant.reset({"engine.torque_cmd": 300.0, "load_torque": 1000.0, **GEAR_1})
        out = [plant.y.copy()]
        for k in range(300):
            plant.u[plant.input_index("engine.torque_cmd")] = 300.0 + k
            plant.step(DT)
            out.append(plant.y.copy())
        rows[type(plant)] = np.array(out)
        assert plant.time == pytest.approx(0.3)
    assert rows[CompiledFmuAssembly].tobytes() == rows[FmuAssembly].tobytes()
    assert compiled.step(float("nan")) == python.step(float("nan")) != 0  # refused, nothing stepped
    assert compiled.time == python.time and compiled.y.tobytes() == python.y.tobytes()


@pytest.mark.parametrize("safe", ["", "safe = { torque = 0.0 }\n"])
def test_an_fmu_error_in_compiled_code_is_the_python_paths_failure(fmu_dir, safe):
    cfg = config(fmu_dir, f"fail{len(safe)}.toml", start="tau = 0.05, fail_at = 0.1", extra=safe)
    compiled, python = both(cfg)
    a, b = offline(compiled), offline(python)
    same_trace(a, b)
    bit = compiled.ST_FMU_ERROR
    assert a.status_or & bit
    held = "its safe values are out, the others hold" if safe else "its outputs hold"
    message = f"fmu engine: fmi2DoStep returned error at t = 0.100000 s; {held} from now on"
    assert compiled.fmu_errors == python.fmu_errors == [message]
    assert compiled.fmu_faults == python.fmu_faults == {"engine": 1}
    (st,) = compiled.fmu_status()
    assert st["stepped"] is False and st["faults"] == 1 and st["last_error"] == message
    torque = a.values[:, compiled.output_index("engine.torque")]
    k = int(round(0.1 / DT))
    assert (torque[k + 1:] == (0.0 if safe else torque[k])).all()
    compiled.reset({"engine.torque_cmd": 10.0, **GEAR_1})  # a reset steps the FMU again
    assert compiled.fmu_errors == [] and compiled.step(DT) & bit == 0 and compiled.slots[0].failed is False


def test_a_snapshot_of_the_compiled_assembly_repeats_the_rest_bit_for_bit(fmu_dir):
    plant = load_plant(config(fmu_dir, "snap.toml", start="tau = 0.05, fail_at = 0.25"))
    assert isinstance(plant, CompiledFmuAssembly)
    c = parse_scenario(SCENARIO, "inline").compile(plant)
    plant.reset(c.start_inputs())
    run = Run(plant, c.table, c.dt, c.n_steps)
    run.advance(200)
    snap = run.snapshot()
    run.advance()
    first, events = run.out[201:].copy(), run.events()
    assert plant.fmu_errors and plant.slots[0].failed
    run.restore(snap)
    assert not plant.slots[0].failed  # the restored FMU steps again until it fails again
    run.advance()
    assert run.out[201:].tobytes() == first.tobytes() and run.events() == events
    assert len(plant.fmu_errors) == 2 and plant.fmu_faults == {"engine": 2}


def test_a_closed_compiled_assembly_steps_its_plant_without_the_fmus(fmu_dir):
    plant = load_plant(config(fmu_dir, "close.toml"))
    plant.reset({"engine.torque_cmd": 300.0, **GEAR_1})
    plant.step(DT)
    held = plant.y[plant.output_index("engine.torque")]
    plant.close()
    t = plant.time
    plant.step(DT)  # the FMU is freed: the compiled step must not call it
    assert plant.time == pytest.approx(t + DT) and plant.y[plant.output_index("engine.torque")] == held


def test_an_assembly_the_compiled_step_cannot_take_stays_in_python(fmu_dir):
    plant = load_plant(config(fmu_dir, "own.toml", extra='process = "own"\ntimeout_s = 5.0\n'))
    try:
        assert type(plant) is FmuAssembly
    finally:
        plant.close()


def test_constant_inputs_through_a_settled_fmu_equal_the_stepwise_run(fmu_dir):
    """The FMU's output stays exactly 0 (command 0 from 0): the inner plant's inputs repeat bit for bit, so the
    compiled run tells it so (run hints) from the second step of each call on; the results do not change."""
    compiled, python = both(config(fmu_dir, "settled.toml"))
    content = dict(SCENARIO, inputs=dict(SCENARIO["inputs"], **{"engine.torque_cmd": 0.0, "load_torque": 500.0,
                                                                "p_c3": 16.0, "p_c2": 0.0}))
    a, b = offline(compiled, content, every=5), offline(python, content, every=5)
    same_trace(a, b)
    assert (a.values[:, compiled.output_index("engine.torque")] == 0.0).all()


@pytest.mark.parametrize("file, start, to_plant", [
    ("lag.fmu", "tau = 0.05, boost_at = 0.0105", 'torque = "engine_torque"'),  # a time event inside a step
    ("ball.fmu", "", ""),  # state events located by bisection, the event iteration
])
def test_a_model_exchange_fmu_in_compiled_code_equals_the_python_integration_bit_for_bit(fmu_dir, file, start,
                                                                                          to_plant):
    compiled, python = both(config(fmu_dir, f"me_{file}.toml", file, start, to_plant=to_plant))
    content = dict(SCENARIO, duration_s=2.0)  # the ball bounces at 0.45, 1.17 and 1.75 s
    if file == "ball.fmu":
        content = dict(content, inputs={k: v for k, v in SCENARIO["inputs"].items() if k != "engine.torque_cmd"})
    a, b = offline(compiled, content), offline(python, content)
    same_trace(a, b)
    events = compiled.slots[0].events
    assert events == python.slots[0].events and events >= (1 if file == "lag.fmu" else 3)


def test_signal_faults_on_the_compiled_assembly_equal_the_python_run_bit_for_bit(fmu_dir):
    """With a fault schedule the compiled assembly runs in the compiled loop with the fault stage
    (plant_models.closed_loop.StagedRun), the Python one a step at a time: the same trace."""
    from plant_models.closed_loop import supports
    from server.realtime.fault_schedule import FaultSchedule
    faults = [({"target": "signal", "signal": "engine.torque_cmd", "kind": "gain", "value": 0.5}, 0.1, 0.3),
              ({"target": "signal", "signal": "engine.torque", "kind": "offset", "value": -20.0}, 0.2, 0.4),
              ({"target": "signal", "signal": "w_1", "kind": "freeze"}, 0.25, None)]
    compiled, python = both(config(fmu_dir, "faults.toml"))
    assert supports(compiled, kernel=False) and not supports(python, kernel=False)
    traces = []
    for plant in (compiled, python):
        c = parse_scenario(SCENARIO, "inline").compile(plant)
        traces.append(run_offline(plant, c, faults=FaultSchedule(plant, faults, c.dt)))
    same_trace(*traces)
    j = compiled.output_index("engine.torque")
    clean = offline(compiled).values[:, j]
    faulted = traces[0].values[:, j]
    assert (faulted[:101] == clean[:101]).all() and faulted[250] < clean[250] - 20.0  # halved command, offset


# -- FMI 3.0 from compiled code --------------------------------------------------------------------------------
TYPED = dict(SCENARIO, inputs=dict(SCENARIO["inputs"], **{
    "engine.divider": [[0.0, 1.0], [0.1, 3.0]],  # Int32 input: 1, 2, 3 (rounded)
    "engine.enabled": [[0.0, 1.0], [0.4, 1.0], [0.41, 0.0]]}))  # Boolean input: false from 0.41 s


def test_an_fmi3_fmu_in_compiled_code_equals_the_python_path_and_its_fmi2_twin_bit_for_bit(fmu_dir):
    """fmi3SetFloat64 / SetInt32 / SetBoolean, fmi3DoStep, fmi3GetFloat64 / GetInt64 / GetBoolean by address: the
    Python slot's numbers; and the FMI 2.0 twin's, whose compiled step calls the fmi2 functions."""
    start = "tau = 0.05, divider = 1, enabled = true"
    c3, p3 = both(config(fmu_dir, "typed3.toml", "typed3.fmu", start))
    c2 = load_plant(config(fmu_dir, "typed2c.toml", "typed2.fmu", start))
    assert type(c2) is CompiledFmuAssembly and c3.slots[0].fmu.version == 3 and c2.slots[0].fmu.version == 2
    a, b, twin = offline(c3, TYPED), offline(p3, TYPED), offline(c2, TYPED)
    same_trace(a, b)
    assert a.values.tobytes() == twin.values.tobytes()
    col = {n: a.values[:, c3.output_index(f"engine.{n}")] for n in ("torque", "step_count", "settled")}
    assert np.array_equal(col["step_count"], np.arange(len(a.time), dtype=float))  # Int64: one a step
    assert set(np.unique(col["settled"])) == {0.0, 1.0}  # the Boolean output both ways
    # the closed form of the FMU's exact lag of the command held over each step: torque_cmd / divider (Int32,
    # rounded) while enabled (Boolean), else 0
    t = a.time[:-1]
    cmd = np.interp(t, [0.0, 0.3], [100.0, 400.0]) / np.rint(np.interp(t, [0.0, 0.1], [1.0, 3.0]))
    cmd = np.where(np.interp(t, [0.0, 0.4, 0.41], [1.0, 1.0, 0.0]) != 0.0, cmd, 0.0)
    expected = np.zeros(len(a.time))
    for i in range(len(t)):
        expected[i + 1] = cmd[i] + (expected[i] - cmd[i]) * math.exp(-DT / 0.05)
    assert np.allclose(col["torque"], expected, rtol=0.0, atol=1e-9)


def test_an_fmi3_error_in_compiled_code_is_the_python_paths_failure(fmu_dir):
    cfg = config(fmu_dir, "fail3.toml", "typed3.fmu", "tau = 0.05, fail_at = 0.1", extra="safe = { torque = 0.0 }\n")
    compiled, python = both(cfg)
    a, b = offline(compiled, TYPED), offline(python, TYPED)
    same_trace(a, b)
    message = ("fmu engine: fmi3DoStep returned error at t = 0.100000 s; its safe values are out, the others hold "
               "from now on")
    assert compiled.fmu_errors == python.fmu_errors == [message]
    assert a.status_or & compiled.ST_FMU_ERROR


@pytest.mark.parametrize("model, start, to_plant", [
    ("lag", "tau = 0.05, boost_at = 0.0105", 'torque = "engine_torque"'),  # a time event (nextEventTime) in a step
    ("ball", "", ""),  # state events located by bisection
])
def test_an_fmi3_model_exchange_fmu_in_compiled_code_equals_python_and_its_fmi2_twin_bit_for_bit(fmu_dir, model,
                                                                                                   start, to_plant):
    """fmi3UpdateDiscreteStates by address (its flags one byte each, the next time event), fmi3CompletedIntegratorStep:
    the Python Me3Slot's numbers and the FMI 2.0 twin's."""
    content = dict(SCENARIO, duration_s=2.0)
    if model == "ball":
        content = dict(content, inputs={k: v for k, v in SCENARIO["inputs"].items() if k != "engine.torque_cmd"})
    c3, p3 = both(config(fmu_dir, f"{model}3.toml", f"{model}3.fmu", start, to_plant=to_plant))
    c2 = load_plant(config(fmu_dir, f"{model}2c.toml", f"{model}.fmu", start, to_plant=to_plant))
    assert type(c2) is CompiledFmuAssembly
    a, b, twin = offline(c3, content), offline(p3, content), offline(c2, content)
    same_trace(a, b)
    assert a.values.tobytes() == twin.values.tobytes()
    events = c3.slots[0].events
    assert events == p3.slots[0].events == c2.slots[0].events and events >= (1 if model == "lag" else 3)


@pytest.mark.parametrize("make", [python_assembly, load_plant], ids=["python", "compiled"])
def test_a_snapshot_keeps_each_fmus_failed_flag(fmu_dir, make):
    """Two FMUs, the first failed at 0.1 s: restored at 0.2 s, the second steps on (it was held as failed too when
    the state kept one flag for all FMUs) and the rest repeats bit for bit."""
    aux = '\n[[fmu]]\nname = "aux"\nfile = "engine.fmu"\nstart = { tau = 0.05 }\n'
    plant = make(config(fmu_dir, "two.toml", start="tau = 0.05, fail_at = 0.1", extra=aux))
    plant.reset({"engine.torque_cmd": 300.0, "aux.torque_cmd": 200.0, "load_torque": 1000.0, **GEAR_1})

    def run(n):
        rows = []
        for _ in range(n):
            plant.step(DT)
            rows.append(plant.y.copy())
        return np.array(rows)
    run(200)
    assert [st["stepped"] for st in plant.fmu_status()] == [False, True]
    snap = plant.get_state()
    first = run(100)
    plant.set_state(snap)
    assert [st["stepped"] for st in plant.fmu_status()] == [False, True]
    again = run(100)
    assert again.tobytes() == first.tobytes()
    j = plant.output_index("aux.torque")
    assert again[-1, j] > again[0, j]  # the healthy FMU stepped after the restore
