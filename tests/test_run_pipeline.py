"""The run pipeline: the stage list declared once, one stepper, and every way a plant is stepped goes through it.

A stage planted in the list (one declaration with a ``make``, the way a new
stage is added) shows up in the real-time loop (realtime and lockstep), the
offline runs (open loop, with faults), the test bench, the closed loop and a
campaign's runs, once per step, in step order, after the plant's step; and
a run that takes it step by step gives the compiled run's rows bit for bit.

Planted with a compiled form as well (``make_compiled``), the same stage is
in every compiled loop: the compiled offline loop
(``plant_models/run/offline_compiled.py``: the compiled open-loop run, the
compiled run with a fault schedule, the compiled closed loop and a
campaign's runs take it at every step, with the rows of the runs without it
bit for bit) and the real-time loop's compiled tick (realtime and lockstep
stay on the compiled tick path and take it at every tick, the same calls as
the offline run's), while a lockstep server on the Python tick path and the
test bench run its Python form.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from numba import cfunc

from plant_models.registry import load_plant
from plant_models.run import stages
from plant_models.run.compiled import STAGE_SIGNATURE, CompiledStage, f64_at
from plant_models.run.stages import AFTER, Stage
from plant_models.run.stepper import Stepper

ROOT = Path(__file__).resolve().parents[1]
SWAP_TEST = ROOT / "tests" / "benches" / "swap_1_3.toml"


@cfunc(STAGE_SIGNATURE)
def probe_stage(ctx, k, now_ns, dt, carry):
    """The probe's compiled form: (k, the plant's time in df) appended to the log ``ctx[0]`` (its element 0 the
    count; ``ctx[1]`` its length, ``ctx[2]`` df, ``ctx[3]`` the time's index in df)."""
    log, df = f64_at(ctx[0]), f64_at(ctx[2])
    n = int(log[0])
    if 2 * n + 2 < ctx[1]:
        log[2 * n + 1] = float(k)
        log[2 * n + 2] = df[ctx[3]]
    log[0] = n + 1.0
    return 0


def plant_probe(monkeypatch, compiled: bool = False) -> list[tuple[str, int, float]]:
    """Declare a stage ``probe`` right after the step (one ``Stage`` with a ``make``, and with ``compiled`` a
    ``make_compiled``); returns the list each of its calls appends (mode, step k, plant time after the step) to.
    The compiled form's calls are appended as ``"<mode> compiled"`` when :func:`harvest` is called."""
    calls: list[tuple[str, int, float]] = []

    def make(stepper):
        plant, mode = stepper.plant, stepper.mode
        return lambda k: calls.append((mode, k, plant.time))

    def make_compiled(plan):
        log = np.zeros(2 * max(plan.last, 1000) + 2)  # a lockstep server's plan has no last tick (0)
        LOGS.append((plan.mode, log))
        return CompiledStage.of("probe", probe_stage, (log, log.shape[0], plan.plant.df, plan.plant.time_index()))

    at = stages.stage_names().index("step") + 1
    probe = Stage("probe", AFTER, "records every step it sees", make=make,
                  make_compiled=make_compiled if compiled else None)
    monkeypatch.setattr(stages, "STAGES", stages.STAGES[:at] + (probe,) + stages.STAGES[at:])
    LOGS.clear()
    return calls


LOGS: list[tuple[str, np.ndarray]] = []  # the compiled probes' logs, by the mode of the plan that made them


def harvest(calls) -> None:
    """The compiled probes' calls so far into ``calls`` (as ``"<mode> compiled"``), their logs emptied."""
    for mode, log in LOGS:
        n = int(log[0])
        assert 2 * n + 2 <= log.shape[0]
        calls += [(f"{mode} compiled", int(log[2 * j + 1]), float(log[2 * j + 2])) for j in range(n)]
        log[:] = 0.0


def _steps_of(calls, mode: str, dt: float) -> list[int]:
    """The steps the probe saw in ``mode``; each call's plant time is the time after that step."""
    ks = [k for m, k, _ in calls if m == mode]
    assert all(t == pytest.approx((k + 1) * dt, rel=1e-12) for m, k, t in calls if m == mode)
    return ks


def test_the_stepper_runs_what_it_is_given_in_the_declared_order():
    plant = load_plant("chain")
    seen = []
    given = ("send", "row", "fault_inputs", "inputs", "switch", "controller")
    st = Stepper(plant, 1e-3, {name: (lambda k, n=name: seen.append((n, k))) for name in given}, "offline")
    assert st.step(0) == 0 and plant.time == pytest.approx(1e-3, rel=1e-12)
    assert [n for n, _ in seen] == ["switch", "inputs", "fault_inputs", "row", "controller", "send"]
    assert st.stages == ("switch", "inputs", "fault_inputs", "step", "row", "controller", "send")
    with pytest.raises(ValueError, match="no stage called probe"):
        Stepper(plant, 1e-3, {"probe": print}, "offline")


def test_compiled_order_is_the_stage_lists_for_every_compiled_run(monkeypatch):
    made = []
    plan = object()

    def make_compiled(given):
        made.append(given)
        return "probe form"

    at = stages.stage_names().index("step") + 1
    probe = Stage("probe", AFTER, "a compiled form only", make_compiled=make_compiled)
    monkeypatch.setattr(stages, "STAGES", stages.STAGES[:at] + (probe,) + stages.STAGES[at:])
    run, before, after = stages.compiled_order({"send": ("w1", "w2"), "state_row": "row", "commanded": ["r1", "q"],
                                                "inputs": None, "fault_inputs": "fi"}, plan)
    assert run == ("commanded", "fault_inputs", "step", "probe", "state_row", "send") and made == [plan]
    assert before == ["r1", "q", "fi"] and after == ["probe form", "row", "w1", "w2"]
    _, _, after = stages.compiled_order({"probe": "given"}, plan)  # what a run gives wins over the declaration
    assert after == ["given"] and made == [plan]
    with pytest.raises(ValueError, match="no stage called nope"):
        stages.compiled_order({"nope": "x"}, plan)
    monkeypatch.setattr(stages, "STAGES", stages.STAGES + (Stage("py", AFTER, "Python only", make=print),))
    assert stages.python_only_stages() == ("py",)
    with pytest.raises(ValueError, match="stage py has no compiled form"):
        stages.compiled_order({}, plan)


def test_a_planted_stage_runs_in_the_realtime_and_lockstep_ticks(monkeypatch):
    from server.realtime.loop_config import LoopConfig
    from server.realtime.runtime import assemble

    calls = plant_probe(monkeypatch)
    srv = assemble(load_plant("chain"), [], LoopConfig(mode="lockstep", rate_hz=1000.0, status_interval_s=0.0))
    srv.loop.step(40)
    assert "probe" in srv.loop.stepper.stages
    assert srv.loop.tick_path == "python" and "stage probe" in srv.loop.tick_path_reason
    assert _steps_of(calls, "lockstep", 1e-3) == list(range(40))
    srv = assemble(load_plant("chain"), [], LoopConfig(mode="realtime", rate_hz=1000.0, duration_s=0.05,
                                                       status_interval_s=0.0))
    srv.open()
    try:
        srv.run()
    finally:
        srv.close()
    ks = _steps_of(calls, "realtime", 1e-3)
    assert ks and ks == list(range(srv.loop.tick))


def test_a_planted_stage_runs_in_offline_runs_which_equal_the_compiled_run_bit_for_bit(monkeypatch):
    from server.offline.run import run_offline
    from server.offline.scenario import load_scenario
    from server.realtime.fault_schedule import FaultSchedule

    plant = load_plant("powershift")
    compiled = load_scenario("powershift_single_swap").compile(plant)
    fault = ({"target": "signal", "signal": "w_out", "kind": "offset", "value": 5.0}, 0.2, 0.4)
    ref = run_offline(plant, compiled)  # the compiled run: no Python per step
    ref_f = run_offline(plant, compiled, faults=FaultSchedule(plant, [fault], compiled.dt))  # compiled, faults
    calls = plant_probe(monkeypatch)
    got = run_offline(plant, compiled)
    assert _steps_of(calls, "offline", compiled.dt) == list(range(compiled.n_steps))
    np.testing.assert_array_equal(got.values, ref.values)
    assert got.values.tobytes() == ref.values.tobytes() and got.events == ref.events
    calls.clear()
    got_f = run_offline(plant, compiled, faults=FaultSchedule(plant, [fault], compiled.dt))
    assert _steps_of(calls, "offline", compiled.dt) == list(range(compiled.n_steps))
    assert got_f.values.tobytes() == ref_f.values.tobytes()
    assert got_f.values.tobytes() != got.values.tobytes()  # the fault acted


def test_a_planted_stage_runs_in_the_test_bench_and_the_closed_loop(monkeypatch):
    from server.offline.controller import closed_loop
    from server.testbench.runner import run_spec_offline
    from server.testbench.spec import load_test

    spec_path = ROOT / "examples" / "slip_pi_controller.py"
    mod_spec = importlib.util.spec_from_file_location("slip_pi_pipeline_t", spec_path)
    mod = importlib.util.module_from_spec(mod_spec)
    sys.modules[mod_spec.name] = mod
    mod_spec.loader.exec_module(mod)
    ref = closed_loop(load_plant("powershift"), None, mod.SlipPIController(), duration_s=0.3, dt=1e-3)  # compiled
    calls = plant_probe(monkeypatch)
    rec = run_spec_offline(load_test(SWAP_TEST), [])
    n = len(rec.t) - 1
    assert n > 100 and _steps_of(calls, "testbench", rec.dt) == list(range(n))
    got = closed_loop(load_plant("powershift"), None, mod.SlipPIController(), duration_s=0.3, dt=1e-3)
    assert _steps_of(calls, "closed_loop", 1e-3) == list(range(300))
    assert got.outputs.tobytes() == ref.outputs.tobytes() and got.inputs.tobytes() == ref.inputs.tobytes()
    assert got.updates == ref.updates > 0


def test_a_planted_stage_runs_in_a_campaigns_runs(monkeypatch, tmp_path):
    from server.campaign.engine import run_bare
    from server.campaign.spec import load_campaign

    camp = tmp_path / "c.toml"
    camp.write_text(f'test = "{SWAP_TEST}"\n[design]\nmethod = "lhs"\nruns = 2\nseed = 3\n'
                    '[parameters.friction_scale]\npaths = ["config.clutch.friction_static"]\nmode = "scale"\n'
                    'range = [0.9, 1.1]\n')
    spec = load_campaign(camp)
    calls = plant_probe(monkeypatch)
    results = run_bare(spec, [0, 1])
    assert [r.status for r in results] == ["ok", "ok"]
    ks = [k for m, k, _ in calls if m == "offline"]
    n = ks.index(0, 1)  # the next run starts at step 0 again (the campaign's warm-up takes a run too)
    assert n > 100 and len(ks) // n >= 2 and ks == list(range(n)) * (len(ks) // n)


def _offline_runs_and_the_closed_loop_take_the_compiled_form(monkeypatch) -> list:
    """The compiled offline run (plain and with faults) and the compiled closed loop call the planted stage's
    compiled form at every step, with the results of the runs without the probe bit for bit: the probe's calls
    (cleared)."""
    from server.offline.controller import closed_loop
    from server.offline.run import run_offline
    from server.offline.scenario import load_scenario
    from server.realtime.fault_schedule import FaultSchedule

    plant = load_plant("powershift")
    scenario = load_scenario("powershift_single_swap").compile(plant)
    fault = ({"target": "signal", "signal": "w_out", "kind": "offset", "value": 5.0}, 0.2, 0.4)
    spec_path = ROOT / "examples" / "slip_pi_controller.py"
    mod_spec = importlib.util.spec_from_file_location("slip_pi_pipeline_c", spec_path)
    mod = importlib.util.module_from_spec(mod_spec)
    sys.modules[mod_spec.name] = mod
    mod_spec.loader.exec_module(mod)
    refs = (run_offline(plant, scenario), run_offline(plant, scenario, faults=FaultSchedule(plant, [fault],
                                                                                          scenario.dt)),
            closed_loop(load_plant("powershift"), None, mod.SlipPIController(), duration_s=0.3, dt=1e-3))
    calls = plant_probe(monkeypatch, compiled=True)
    n = scenario.n_steps
    got = run_offline(plant, scenario)  # the compiled Run, with the probe in its loop
    harvest(calls)
    assert _steps_of(calls, "offline compiled", scenario.dt) == list(range(n)) and not _steps_of(calls, "offline",
                                                                                                  scenario.dt)
    assert got.values.tobytes() == refs[0].values.tobytes() and got.events == refs[0].events
    calls.clear()
    got = run_offline(plant, scenario, faults=FaultSchedule(plant, [fault], scenario.dt))  # StagedRun, faults
    harvest(calls)
    assert _steps_of(calls, "offline compiled", scenario.dt) == list(range(n))
    assert got.values.tobytes() == refs[1].values.tobytes() != refs[0].values.tobytes()
    calls.clear()
    got = closed_loop(load_plant("powershift"), None, mod.SlipPIController(), duration_s=0.3, dt=1e-3)
    harvest(calls)
    assert _steps_of(calls, "closed_loop compiled", 1e-3) == list(range(300))
    assert got.outputs.tobytes() == refs[2].outputs.tobytes() and got.inputs.tobytes() == refs[2].inputs.tobytes()
    calls.clear()
    return calls


def _the_realtime_and_lockstep_ticks_take_the_compiled_form(calls: list) -> None:
    """The real-time loop's and the lockstep loop's compiled ticks call the compiled form at every tick, the
    lockstep loop's Python tick path the Python form, each with the offline run's calls for the same steps."""
    from server.offline.run import run_offline
    from server.offline.scenario import load_scenario
    from server.realtime.loop_config import LoopConfig
    from server.realtime.runtime import assemble

    # the real-time loop's compiled tick takes the compiled form: at every tick of a realtime server, with the
    # calls of the offline run of the same plant for the same steps
    chain = load_plant("chain")
    run_offline(chain, load_scenario("chain_4mass").compile(chain))
    harvest(calls)
    offline = [(k, t) for m, k, t in calls if m == "offline compiled"]
    calls.clear()
    srv = assemble(load_plant("chain"), [], LoopConfig(mode="realtime", rate_hz=1000.0, duration_s=0.05,
                                                       status_interval_s=0.0))
    srv.open()
    try:
        assert srv.loop.tick_path == "compiled", srv.loop.tick_path_reason
        srv.run()
    finally:
        srv.close()
    harvest(calls)
    ks = _steps_of(calls, "realtime compiled", 1e-3)
    assert ks and ks == list(range(srv.loop.tick)) and srv.loop.python_ticks == 0
    assert not _steps_of(calls, "realtime", 1e-3)  # no tick ran the Python form
    assert [(k, t) for m, k, t in calls if m == "realtime compiled"] == offline[:len(ks)]
    calls.clear()
    # lockstep: the compiled tick takes the compiled form; on the Python tick path, the Python form, the same calls
    srv = assemble(load_plant("chain"), [], LoopConfig(mode="lockstep", rate_hz=1000.0, status_interval_s=0.0))
    assert srv.loop.tick_path == "compiled" and any(s.stage == "probe" for s in srv.loop.compiled_tick.stages)
    srv.loop.step(40)
    harvest(calls)
    assert _steps_of(calls, "lockstep compiled", 1e-3) == list(range(40)) and not _steps_of(calls, "lockstep", 1e-3)
    srv = assemble(load_plant("chain"), [], LoopConfig(mode="lockstep", rate_hz=1000.0, status_interval_s=0.0))
    srv.loop.choose_tick_path("python")
    srv.loop.step(40)
    assert _steps_of(calls, "lockstep", 1e-3) == list(range(40))
    assert [(k, t) for m, k, t in calls if m == "lockstep"] == [(k, t) for m, k, t in calls
                                                                if m == "lockstep compiled"] == offline[:40]


def test_a_planted_compiled_stage_runs_in_every_compiled_run_and_its_python_form_elsewhere(monkeypatch, tmp_path):
    from server.campaign.engine import run_bare
    from server.campaign.spec import load_campaign
    from server.testbench.runner import run_spec_offline
    from server.testbench.spec import load_test

    calls = _offline_runs_and_the_closed_loop_take_the_compiled_form(monkeypatch)
    _the_realtime_and_lockstep_ticks_take_the_compiled_form(calls)
    # the test bench takes the stage's Python form
    rec = run_spec_offline(load_test(SWAP_TEST), [])
    assert _steps_of(calls, "testbench", rec.dt) == list(range(len(rec.t) - 1))
    calls.clear()
    camp = tmp_path / "c.toml"
    camp.write_text(f'test = "{SWAP_TEST}"\n[design]\nmethod = "lhs"\nruns = 2\nseed = 3\n'
                    '[parameters.friction_scale]\npaths = ["config.clutch.friction_static"]\nmode = "scale"\n'
                    'range = [0.9, 1.1]\n')
    results = run_bare(load_campaign(camp), [0, 1])
    assert [r.status for r in results] == ["ok", "ok"]
    harvest(calls)
    ks = [k for m, k, _ in calls if m == "offline compiled"]
    n = ks.index(0, 1)
    assert n > 100 and len(ks) // n >= 2 and ks == list(range(n)) * (len(ks) // n)
    assert not [m for m, _, _ in calls if m == "offline"]  # no campaign run went step by step
