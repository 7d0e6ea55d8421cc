"""Faults offline: a test file's fault schedule in offline mode gives the lockstep run's trace with the same faults.

The schedules switch faults on and off between ticks (``at``/``until``); the
offline run applies them through :class:`server.realtime.fault_schedule.FaultSchedule`
around each step, the lockstep server through ``fault_set``/``fault_clear``
and its tick.  Every output must be equal bit for bit, and the faults must
have changed the run (or the equality would prove nothing).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from plant_models.config import ConfigError
from server.testbench.spec import load_test

HEAD = 'name = "{name}"\nplant = "powershift"\nmode = "{mode}"\nscenario = "powershift_single_swap"\nduration_s = 0.9\n'
EXPECT = '[[expect]]\nexpr = "gear"\nmin = 0\nat = 0.1\n'

SIGNAL_FAULTS = """
[[faults]]
at = 0.2
until = 0.55
target = "signal"
signal = "w_out"
kind = "noise"
value = 0.5
seed = 7
[[faults]]
at = 0.25
target = "signal"
signal = "w_1"
kind = "freeze"
[[faults]]
at = 0.45
until = 0.6
target = "signal"
signal = "p_c2"
kind = "gain"
value = 0.6
[[faults]]
at = 0.5
until = 0.7
target = "signal"
signal = "engine_torque"
kind = "offset"
value = -40.0
"""

CLUTCH_FAULTS = """
[[faults]]
at = 0.3
until = 0.62
target = "clutch"
clutch = 3
kind = "worn"
value = 0.7
[[faults]]
at = 0.4
target = "clutch"
clutch = "C2"
kind = "slow_actuator"
value = 3.0
[[faults]]
at = 0.35
until = 0.8
target = "clutch"
clutch = 2
kind = "pressure_bias"
value = 1.5
[[faults]]
at = 0.7
target = "clutch"
clutch = 5
kind = "stuck_closed"
"""


def _spec(tmp_path: Path, mode: str, faults: str, name: str = "faults"):
    p = tmp_path / f"{name}_{mode}.toml"
    p.write_text(HEAD.format(name=name, mode=mode) + faults + EXPECT)
    return load_test(p)


def _offline(spec):
    from server.testbench.runner import run_spec_offline

    log: list[str] = []
    return run_spec_offline(spec, log), log


def _lockstep(spec, tmp_path: Path):
    from server.testbench.runner import ServerRun, run_lockstep
    from io_adapters.zmq.client import HilClient

    log: list[str] = []
    with ServerRun(spec.plant_config, "lockstep", tmp_path / "srv") as server:
        with HilClient(server.control, timeout_s=30.0).connect() as client:
            return run_lockstep(spec, client, log), log


def _outputs(spec):
    from plant_models.registry import load_plant

    return [s.name for s in load_plant(spec.plant_config).outputs]


@pytest.mark.parametrize("faults", [SIGNAL_FAULTS, CLUTCH_FAULTS], ids=["signal", "clutch"])
def test_offline_faults_equal_lockstep_bit_for_bit(tmp_path, faults):
    (tmp_path / "srv").mkdir()
    off_spec = _spec(tmp_path, "offline", faults)
    off, off_log = _offline(off_spec)
    lock, lock_log = _lockstep(_spec(tmp_path, "lockstep", faults), tmp_path)
    clean, _ = _offline(_spec(tmp_path, "offline", "", "clean"))
    assert np.array_equal(off.t, lock.t)
    names = _outputs(off_spec)
    for nm in names + ["p_c2", "engine_torque"]:
        assert off.signals[nm].tobytes() == lock.signals[nm].tobytes(), nm
    # the faults acted: some outputs differ from the run without them
    changed = [nm for nm in names if not np.array_equal(off.signals[nm], clean.signals[nm])]
    assert "w_out" in changed and "w_1" in changed
    # the same switches, at the same times
    assert [line for line in off_log if "fault" in line] == [line for line in lock_log if "fault" in line]
    switches = len(off_spec.faults) + sum(f.until is not None for f in off_spec.faults)
    assert len([line for line in off_log if "fault" in line]) == switches


def test_compiled_offline_run_with_faults_equals_the_test_bench_offline_run(tmp_path):
    """``server.offline.run.run_offline`` (what ``simulate`` and campaigns call) with the same schedule."""
    from plant_models.offline import StepwiseRun, make_run
    from plant_models.registry import load_plant
    from server.offline.run import run_offline
    from server.realtime.fault_schedule import FaultSchedule

    spec = _spec(tmp_path, "offline", SIGNAL_FAULTS + CLUTCH_FAULTS)
    rec, _ = _offline(spec)
    plant = load_plant(spec.plant_config)
    compiled = spec.scenario.compile(plant, spec.dt_s, warn=False)
    sched = FaultSchedule(plant, [(f.fault, f.at, f.until) for f in spec.faults], compiled.dt)
    assert isinstance(make_run(plant, compiled.table, compiled.dt, 4, faults=sched), StepwiseRun)
    for every in (1, 7):
        trace = run_offline(plant, compiled, every=every, faults=sched)
        rows = np.arange(0, compiled.n_steps + 1, every)
        rows = np.unique(np.append(rows, compiled.n_steps))
        for j, nm in enumerate(trace.names):
            assert trace.values[:, j].tobytes() == rec.signals[nm][rows].tobytes(), nm
    # and without the schedule the compiled run gives the clean trace (no fault left behind in the plant)
    clean = run_offline(plant, compiled)
    assert not np.array_equal(clean.column("w_out"), trace.column("w_out"))
    assert clean.column("w_out").tobytes() == _offline(_spec(tmp_path, "offline", "", "clean"))[0].signals[
        "w_out"].tobytes()


def test_a_transport_fault_offline_is_refused_when_the_file_is_read(tmp_path):
    p = tmp_path / "t.toml"
    p.write_text(HEAD.format(name="t", mode="offline") + '[[faults]]\nat = 0.1\ntarget = "zmq"\n'
                 'kind = "drop_commands"\n' + EXPECT)
    with pytest.raises(ConfigError) as ei:
        load_test(p)
    assert str(ei.value) == (f"{p}: faults[0].target: a zmq fault acts on a transport: it needs a server "
                             "(mode \"lockstep\" or \"realtime\"); offline runs take signal and clutch faults")


def test_a_switch_the_fault_set_refuses_is_a_run_error_not_a_crash(tmp_path):
    """33 signal faults at once: the table holds 32; the run ends with an ERROR naming why (as lockstep's does)."""
    from server.testbench.runner import run_test

    many = "".join(f'[[faults]]\nat = 0.1\ntarget = "signal"\nsignal = "w_out"\nkind = "offset"\nvalue = 0.0\n'
                   f'name = "f{j}"\n' for j in range(33))
    res = run_test(_spec(tmp_path, "offline", many))
    assert not res.passed
    run = [v for v in res.verdicts if v.name == "run"]
    assert len(run) == 1 and run[0].error and run[0].message == "RunError: fault: at most 32 signal faults at once"
