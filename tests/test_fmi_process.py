"""FMUs in a process of their own (``process = "own"``): the same numbers as in the server's process, bit for bit,
offline, in lockstep and through snapshots; an FMU that segfaults or hangs mid-run ends or stalls its own
process only: the run goes on, ``fmu_error`` is set, the FMU's safe values are out, the log names the cause;
a reset starts a new process.  The broken FMUs are the torque source built with FAIL_BY_CRASH / FAIL_BY_HANG."""

from __future__ import annotations

import logging
import math
import os
import re
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("fmpy", reason="needs the fmi extra (pip install 'gearbox-hil[fmi]')")

from fmu_build import build_first_order, build_me, compiler  # noqa: E402
from plant_models.errors import ConfigError  # noqa: E402
from plant_models.registry import load_plant  # noqa: E402
from server.offline.run import run_offline  # noqa: E402
from server.offline.scenario import parse_scenario  # noqa: E402
from server.realtime.loop_config import LoopConfig  # noqa: E402
from server.realtime.runtime import assemble  # noqa: E402

pytestmark = pytest.mark.skipif(compiler() is None, reason="needs a C compiler (cc) to build the test FMU")

ROOT = Path(__file__).resolve().parents[1]
TAU, T_CMD, DT = 0.05, 300.0, 1e-3
GEAR_1 = {"p_c1": 16.0, "p_c3": 16.0, "p_c6": 16.0}
INPUTS = {"engine.torque_cmd": T_CMD, "load_torque": 3500.0, **GEAR_1}
SCENARIO = {"duration_s": 0.3, "dt_s": DT, "interpolation": "linear", "inputs": INPUTS}
FAIL_AT = 0.1  # s: the broken FMUs' first bad step starts here
K_FAIL = int(round(FAIL_AT / DT))


@pytest.fixture(scope="module")
def fmu_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("fmu_process")
    build_first_order(d / "engine.fmu")
    build_first_order(d / "crash.fmu", fail_by="crash")
    build_first_order(d / "hang.fmu", fail_by="hang")
    build_first_order(d / "abort.fmu", fail_by="load")
    build_me(d / "ball.fmu", "ball")
    return d


def config(d: Path, name: str, body: str) -> Path:
    p = d / name
    p.write_text(f'extends = "{(ROOT / "configs" / "powershift.toml").as_posix()}"\n\n[[fmu]]\nname = "engine"\n'
                 f'to_plant = {{ torque = "engine_torque" }}\n{body}\n')
    return p


def offline(plant, scenario=SCENARIO):
    return run_offline(plant, parse_scenario(scenario, "inline").compile(plant))


def child_pids(plant) -> list[int]:
    return [s.proc.pid for s in plant.slots if getattr(s, "proc", None) is not None and s.proc.poll() is None]


def test_an_fmu_in_its_own_process_equals_the_in_process_run_bit_for_bit(fmu_dir):
    here = load_plant(config(fmu_dir, "here.toml", f'file = "engine.fmu"\nstart = {{ tau = {TAU} }}'))
    own = load_plant(config(fmu_dir, "own.toml", f'file = "engine.fmu"\nstart = {{ tau = {TAU} }}\n'
                                                 f'process = "own"\ntimeout_s = 30.0'))
    try:
        assert type(own.slots[0]).__name__ == "ProcessSlot" and child_pids(own)
        a, b = offline(here), offline(own)
        assert np.array_equal(a.values, b.values)
        t = a.time
        torque = b.values[:, own.output_index("engine.torque")]
        assert np.allclose(torque, T_CMD * -np.expm1(-t / TAU), rtol=0, atol=1e-9)  # the lag's closed form
    finally:
        own.close()
    assert not child_pids(own)


def test_lockstep_with_an_fmu_in_its_own_process_equals_offline_and_a_snapshot_repeats_the_run(fmu_dir):
    cfg = config(fmu_dir, "own_ls.toml", f'file = "engine.fmu"\nstart = {{ tau = {TAU} }}\nprocess = "own"\n'
                                         f'timeout_s = 30.0')
    ref_plant = load_plant(cfg)
    ref = offline(ref_plant)
    ref_plant.close()
    plant = load_plant(cfg)
    srv = assemble(plant, [], LoopConfig(mode="lockstep", status_interval_s=0.0))
    try:
        assert srv.control.handle({"v": 1, "cmd": "load_scenario", "scenario": SCENARIO})["ok"]
        srv.loop.start()
        rows = [plant.y.copy()]
        for _ in range(100):
            srv.loop.step(1)
            rows.append(plant.y.copy())
        snap = srv.loop.snapshot()
        for _ in range(200):
            srv.loop.step(1)
            rows.append(plant.y.copy())
        assert np.array_equal(np.array(rows), ref.values)
        srv.loop.restore(snap)
        again = []
        for _ in range(200):
            srv.loop.step(1)
            again.append(plant.y.copy())
        assert np.array_equal(np.array(again), ref.values[101:])
    finally:
        plant.close()


# a crashed process is reaped in the tick if it has finished exiting within 2 ms (its exit status named), else
# at the next reset (then logged): which one depends on the machine's load
CRASHED = r"(ended by signal SIGSEGV|closed its socket \(its end is logged when reaped\))"


@pytest.mark.parametrize("broken, cause", [("crash", CRASHED),
                                           ("hang", r"did not answer within 2 s and was killed \(SIGKILL\)")])
def test_an_fmu_that_segfaults_or_hangs_mid_run_is_reported_and_the_run_goes_on(fmu_dir, caplog, broken, cause):
    plant = load_plant(config(fmu_dir, f"{broken}.toml", f'file = "{broken}.fmu"\n'
                              f'start = {{ tau = {TAU}, fail_at = {FAIL_AT} }}\nprocess = "own"\ntimeout_s = 2.0\n'
                              f'safe = {{ torque = 0.0 }}'))
    pid = child_pids(plant)[0]
    try:
        with caplog.at_level(logging.ERROR):
            trace = offline(plant)
        assert plant.counters[0] == 300 and trace.time[-1] == pytest.approx(0.3)  # every step taken
        status = trace.values[:, plant.output_index("status")].astype(int)
        bit = plant.ST_FMU_ERROR
        assert not (status[:K_FAIL + 1] & bit).any() and (status[K_FAIL + 1:] & bit).all()
        torque = trace.values[:, plant.output_index("engine.torque")]
        assert torque[K_FAIL] == pytest.approx(T_CMD * -math.expm1(-FAIL_AT / TAU), abs=1e-9)
        assert (torque[K_FAIL + 1:] == 0.0).all()  # the safe value, driving the plant from the next step
        (message,) = plant.fmu_errors
        assert re.fullmatch(f"fmu engine: its process {cause} at t = 0\\.100000 s; its safe values are out, the others "
                            f"hold from now on", message), message
        assert re.search(f"fmu engine: its process {cause}", caplog.text)
        # a reset reaps the old process (no zombie left behind) and starts a new one; the FMU runs again
        plant.reset(dict(INPUTS))
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
        assert "SIGSEGV" in caplog.text if broken == "crash" else "SIGKILL" in caplog.text
        assert child_pids(plant) and child_pids(plant)[0] != pid and not plant.slots[0].failed
        again = offline(plant, {**SCENARIO, "duration_s": 0.05})
        assert not (again.values[:, plant.output_index("status")].astype(int) & bit).any()
    finally:
        plant.close()


def test_a_realtime_server_keeps_ticking_when_its_fmu_segfaults(fmu_dir):
    plant = load_plant(config(fmu_dir, "rt_crash.toml", f'file = "crash.fmu"\n'
                              f'start = {{ tau = {TAU}, fail_at = 0.02 }}\nprocess = "own"\ntimeout_s = 5.0'))
    rate, n = 1000.0, 1000  # 1 s of wall clock: at high load far fewer ticks run (the fault is at tick 20)
    cfg = LoopConfig(mode="realtime", rate_hz=rate, duration_s=n / rate, status_interval_s=0.0, startup_grace_s=0.0)
    srv = assemble(plant, [], cfg, initial_inputs=dict(INPUTS))
    srv.open()
    try:
        srv.run()
        status = srv.report.status()
    finally:
        srv.close()
        plant.close()
    # how many ticks fit in the wall-clock duration depends on the machine's load: not asserted beyond the fault
    assert plant.time > 0.02 + DT and plant.counters[0] == srv.loop.tick
    assert int(plant.y[plant.output_index("status")]) & plant.ST_FMU_ERROR
    assert re.match(f"fmu engine: its process {CRASHED} at t = 0\\.02", plant.fmu_errors[0]), plant.fmu_errors
    (fmu,) = status["fmus"]  # the status object counts it
    assert (fmu["name"], fmu["process"], fmu["stepped"], fmu["faults"]) == ("engine", "own", False, 1)
    assert fmu["last_error"] == plant.fmu_errors[0]


def test_get_and_set_params_reach_an_fmu_in_its_own_process(fmu_dir):
    plant = load_plant(config(fmu_dir, "own_p.toml", f'file = "engine.fmu"\nstart = {{ tau = {TAU} }}\n'
                                                     f'process = "own"\ntimeout_s = 30.0'))
    try:
        prm = {p.name: p for p in plant.tunable_parameters()}["engine.tau"]
        assert prm.get() == TAU and prm.unit == "s"
        prm.set(0.02)
        assert prm.get() == 0.02
        plant.reset(dict(INPUTS))  # kept over a reset, as in the server's process
        assert prm.get() == 0.02
        trace = offline(plant, {**SCENARIO, "duration_s": 0.05})
        torque = trace.values[:, plant.output_index("engine.torque")]
        assert np.allclose(torque, T_CMD * -np.expm1(-trace.time / 0.02), rtol=0, atol=1e-9)
    finally:
        plant.close()


def test_a_model_exchange_fmu_in_its_own_process_equals_the_in_process_run(fmu_dir):
    body = 'file = "ball.fmu"\n'
    here = (ROOT / "configs" / "powershift.toml").as_posix()
    for name, extra in (("ball_here.toml", ""), ("ball_own.toml", 'process = "own"\ntimeout_s = 30.0\n')):
        (fmu_dir / name).write_text(f'extends = "{here}"\n\n[[fmu]]\nname = "ball"\n{body}{extra}')
    a, b = load_plant(fmu_dir / "ball_here.toml"), load_plant(fmu_dir / "ball_own.toml")
    try:
        scen = {**SCENARIO, "duration_s": 0.6, "inputs": {"engine_torque": 0.0, "load_torque": 0.0}}
        ra, rb = offline(a, scen), offline(b, scen)
        assert np.array_equal(ra.values, rb.values)
        assert rb.values[-1, b.output_index("ball.bounces")] == 1.0  # t1 = sqrt(2/9.81) = 0.45 s
    finally:
        b.close()


def test_an_fmu_that_aborts_as_it_loads_is_a_one_line_config_error_not_the_servers_end(fmu_dir):
    cfg = config(fmu_dir, "abort.toml", 'file = "abort.fmu"\nprocess = "own"\ntimeout_s = 30.0')
    with pytest.raises(ConfigError) as e:
        load_plant(cfg)
    assert str(e.value) == (f"{fmu_dir / 'abort.fmu'}: fmu[0].file: fmu engine: its process ended by signal SIGABRT "
                            f"while loading the FMU")


@pytest.mark.parametrize("body, message", [
    ('process = "thread"', 'fmu[0].process: fmu engine: must be "server" (in the server\'s process) or "own" '
                           '(a process of its own), not \'thread\''),
    ('process = "own"\ntimeout_s = 0', 'fmu[0].timeout_s: fmu engine: must be a number of seconds in (0, 3600]'),
    ('timeout_s = 1.0', 'fmu[0].timeout_s: fmu engine: applies only with process = "own"'),
    ('safe = { torque_cmd = 0.0 }', "fmu[0].safe.torque_cmd: fmu engine: variable 'torque_cmd' has causality "
                                    "input, needs output"),
    ('safe = { torque = 9000.0 }', "fmu[0].safe.torque: fmu engine: safe value 9000.0 outside plant input "
                                   "'engine_torque' range [-1000, 5000]"),
])
def test_a_bad_isolation_key_is_one_line(fmu_dir, body, message):
    cfg = config(fmu_dir, "bad_iso.toml", f'file = "engine.fmu"\n{body}')
    with pytest.raises(ConfigError) as e:
        load_plant(cfg)
    assert str(e.value) == f"{cfg}: {message}"
