"""``gearbox-hil test``: the test files of tests/benches/ through the command line, JUnit XML, verdicts, errors."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from plant_models.config import ConfigError
from server.testbench.expr import Expr, ExprError
from server.testbench.spec import load_test
from server.testbench.verdict import Recording, evaluate

ROOT = Path(__file__).resolve().parent.parent
BENCHES = ROOT / "tests" / "benches"
FAILING = BENCHES / "failing"  # the files that fail on purpose
PASSING = ["swap_1_3.toml", "swap_1_3_lockstep.toml", "swap_1_3_realtime.toml", "closed_loop_lockstep.toml",
           "closed_loop_realtime.toml", "closed_loop_in_process.toml"]


_ARTIFACTS = tempfile.TemporaryDirectory(prefix="gearbox-hil-artifacts-")  # not in the checkout


def _cli(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if "--artifacts" not in args:
        args = (*args, "--artifacts", _ARTIFACTS.name)
    return subprocess.run([sys.executable, "-m", "server.cli", "test", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout, env=env)


def _cases(xml_path: Path) -> dict[str, ET.Element]:
    root = ET.parse(xml_path).getroot()
    assert root.tag == "testsuites"
    return {f"{s.get('name')}::{c.get('name')}": c for s in root.findall("testsuite") for c in s.findall("testcase")}


def test_passing_files_pass_with_junit(tmp_path):
    report = tmp_path / "report.xml"
    r = _cli(*(str(BENCHES / f) for f in PASSING), "--junit", str(report))
    assert r.returncode == 0, r.stdout + r.stderr
    root = ET.parse(report).getroot()
    suites = root.findall("testsuite")
    assert [s.get("file") for s in suites] == [str(BENCHES / f) for f in PASSING]
    assert {s.find("properties/property[@name='mode']").get("value") for s in suites} == {
        "offline", "lockstep", "realtime"}
    n = sum(len(s.findall("testcase")) for s in suites)
    assert n == int(root.get("tests")) >= 27
    assert root.get("failures") == "0" and root.get("errors") == "0"
    # the README's `gearbox-hil test tests/benches/*.toml` runs exactly these: the failing ones are apart
    assert sorted(p.name for p in BENCHES.glob("*.toml")) == sorted(PASSING)
    assert sorted(p.name for p in FAILING.glob("*.toml")) == ["can_speeds_dropped_fails.toml",
                                                              "swap_tie_up_fails.toml", "swap_too_slow_fails.toml"]
    assert not root.findall(".//failure") and not root.findall(".//error")
    assert r.stdout.strip().splitlines()[-1].startswith(f"PASSED: {n} passed, 0 failed, 0 errors in 6 test file(s)")


def test_each_file_is_announced_before_it_runs():
    """A server run takes seconds to start: the first line says what runs before its verdicts arrive."""
    r = _cli(str(BENCHES / "swap_1_3.toml"), str(BENCHES / "swap_1_3.toml"))
    lines = r.stdout.splitlines()
    assert r.returncode == 0, r.stdout + r.stderr
    assert lines[0] == f"[1/2] running {BENCHES / 'swap_1_3.toml'} (offline, 1.2 s simulated) ..."
    assert lines[1].startswith(f"{BENCHES / 'swap_1_3.toml'}: powershift swap 1 -> 3 (offline")
    assert sum(ln.startswith("[2/2] running ") for ln in lines) == 1


def test_failing_file_reports_expectation_time_and_value(tmp_path):
    """The deliberately failing case: the report names each failed expectation with its first failing time/value."""
    from plant_models.registry import load_plant
    from server.offline.scenario import load_scenario
    from server.offline.run import run_stepwise

    report = tmp_path / "fail.xml"
    r = _cli(str(FAILING / "swap_too_slow_fails.toml"), "--junit", str(report))
    assert r.returncode == 1, r.stdout + r.stderr
    # the reference: the same scenario stepped independently
    plant = load_plant("powershift")
    sc = load_scenario("powershift_single_swap")
    tr = run_stepwise(plant, sc.compile(plant, warn=False))
    t, w1, gear = tr.time, tr.values[:, plant.output_index("w_1")], tr.values[:, plant.output_index("gear")]
    i_gear = int(np.argmin(np.abs(t - 0.6)))  # within 0.1 s of the p_c2 command at 0.5 s: the deadline is 0.6 s
    sel = np.flatnonzero((t >= 0.6 - 5e-4) & (w1 < 155.0))
    i_w1 = int(sel[0])
    assert gear[i_gear] == 1 and 0.6 < t[i_w1] < 0.7

    cases = _cases(report)
    name = "powershift swap 1 -> 3, too strict (fails on purpose)"
    f1 = cases[f"{name}::gear 3 within 0.1 s"].find("failure")
    assert float(f1.get("time_s")) == pytest.approx(0.6, abs=1e-12) and float(f1.get("value")) == gear[i_gear]
    f2 = cases[f"{name}::engine not pulled below 155 rad/s in the inertia phase"].find("failure")
    assert float(f2.get("time_s")) == pytest.approx(t[i_w1], abs=1e-12)
    assert float(f2.get("value")) == pytest.approx(w1[i_w1], rel=1e-8)
    assert cases[f"{name}::clutch 2 sticks"].find("failure") is None
    out = r.stdout
    assert "FAIL  gear 3 within 0.1 s: not reached within 0.1 s of the first change of input p_c2 (t = 0.5 s): " \
           "at t = 0.6 s value 1; expected gear == 3" in out
    assert f"FAIL  engine not pulled below 155 rad/s in the inertia phase: first outside at t = {t[i_w1]:.6g} s" in out
    assert out.strip().splitlines()[-1].startswith("FAILED: 1 passed, 2 failed, 0 errors")


def test_tie_up_case(tmp_path):
    """Clutch 2 stuck closed early (a fault set over the control channel at 0.3 s): the tie-up is caught.

    Gear 1 is lost at the first tick with the fault (the step after 0.3 s), and the output speed falls
    below its value at the fault while clutch 1 drags; both failures carry their time and value.
    """
    from server.realtime.control import ControlHandler

    assert "fault_set" in ControlHandler.KEYS
    report = tmp_path / "tie.xml"
    r = _cli(str(FAILING / "swap_tie_up_fails.toml"), "--junit", str(report))
    assert r.returncode == 1, r.stdout + r.stderr
    cases = _cases(report)
    name = "powershift swap 1 -> 3 with clutch 2 stuck closed early (fails on purpose)"
    f = cases[f"{name}::gear 1 until the shift"].find("failure")
    assert float(f.get("time_s")) == pytest.approx(0.301, abs=1e-9) and float(f.get("value")) != 1
    f = cases[f"{name}::the output keeps its speed through the shift"].find("failure")
    assert 0.4 < float(f.get("time_s")) < 0.5 and float(f.get("value")) < 2.48
    assert f"first outside at t = {float(f.get('time_s')):.6g} s" in f.get("message")
    for ok in ("gear 3 within 0.5 s", "tie-up: clutch 1 slips against the stuck clutch 2"):
        assert cases[f"{name}::{ok}"].find("failure") is None
    assert "note  t = 0.3 s: fault set faults[0]" in r.stdout


def test_can_speed_frame_dropped_case(tmp_path):
    """The TCU on CAN loses its speed frame (a CAN fault at 3 s): the watchdog expectation catches it.

    The ECU emulator's sensor check (300 ms of the plant's clock) puts it in its safe state, it stops commanding, and the
    server's command watchdog (500 ms) trips: the expectation fails with the time of the trip and value 1,
    shortly after the fault: not before the TCU's check, within 1.4 s (the watchdog's 500 ms are on the wall
    clock, which a loaded machine that starves the TCU stretches); the shift before it passed.  The TCU resets the plant once its
    bus is open (--reset-control), so these times are on the plant's clock from the TCU's start, however long its
    process took to start.
    """
    report = tmp_path / "can.xml"
    r = _cli(str(FAILING / "can_speeds_dropped_fails.toml"), "--junit", str(report), "--keep", str(tmp_path / "k"))
    assert r.returncode == 1, r.stdout + r.stderr
    cases = _cases(report)
    name = "TCU over CAN with the speed frame dropped (fails on purpose)"
    assert cases[f"{name}::the TCU closes the swap into gear 3"].find("failure") is None, r.stdout
    f = cases[f"{name}::the TCU keeps the command watchdog fed"].find("failure")
    assert f is not None, r.stdout
    assert 3.3 <= float(f.get("time_s")) < 4.4 and float(f.get("value")) == 1.0, r.stdout
    assert "note  t = 3" in r.stdout and "fault set faults[0]" in r.stdout

    # the control: the same file without the fault passes (the watchdog stays fed on a healthy bus)
    text = (FAILING / "can_speeds_dropped_fails.toml").read_text()
    head, rest = text.split("[[faults]]", 1)
    healthy = head + "[[expect]]" + rest.split("[[expect]]", 1)[1]
    healthy = healthy.replace('"../io/can_vbus.toml"', repr(str(BENCHES / "io" / "can_vbus.toml")).replace("'", '"'))
    healthy = healthy.replace('"../../../examples/ecu_emulator.py"',
                              repr(str(ROOT / "examples" / "ecu_emulator.py")).replace("'", '"'))
    ok = tmp_path / "healthy.toml"
    ok.write_text(healthy)
    r = _cli(str(ok))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "PASS  the TCU keeps the command watchdog fed" in r.stdout


def test_a_fault_schedule_runs_offline_with_the_lockstep_verdicts(tmp_path):
    """The tie-up file in offline mode: the same failures at the same times as in lockstep (test_tie_up_case)."""
    p = tmp_path / "tie_offline.toml"
    p.write_text((FAILING / "swap_tie_up_fails.toml").read_text().replace('mode = "lockstep"', 'mode = "offline"'))
    report = tmp_path / "tie.xml"
    r = _cli(str(p), "--junit", str(report))
    assert r.returncode == 1, r.stdout + r.stderr
    cases = _cases(report)
    name = "powershift swap 1 -> 3 with clutch 2 stuck closed early (fails on purpose)"
    f = cases[f"{name}::gear 1 until the shift"].find("failure")
    assert float(f.get("time_s")) == pytest.approx(0.301, abs=1e-9) and float(f.get("value")) != 1
    assert cases[f"{name}::tie-up: clutch 1 slips against the stuck clutch 2"].find("failure") is None
    assert "note  t = 0.3 s: fault set faults[0]" in r.stdout


LOCKSTEP_FAULT = 'mode = "lockstep"\n[[faults]]\nat = 0.3\n'
BAD_FAULTS = [
    ('target = "clutch"\nclutch = 2\nkind = "stuk_closed"', "faults[0]: 'kind' of a clutch fault must be one of "
     "stuck_closed, no_torque, worn, slow_actuator, pressure_bias, slow_fill, leakage, valve_stuck, "
     "got 'stuk_closed'"),
    ('target = "clutch"\nclutch = 9\nkind = "stuck_closed"',
     "faults[0]: no clutch number 9; clutches are C1, C2, C3, C4, C5, C6, C7, C8"),
    ('target = "clutch"\nclutch = "C9"\nkind = "stuck_closed"', "faults[0]: no clutch 'C9'; clutches are C1, C2"),
    ('target = "signal"\nsignal = "w_ot"\nkind = "freeze"', "faults[0]: no signal 'w_ot' in the plant; did you "
     "mean 'w_out'?"),
    ('target = "clutsh"\nkind = "freeze"', "faults[0]: 'target' must be one of signal, clutch, zmq, can, j1939, device, got 'clutsh'"),
    ('target = "clutch"\nclutch = 2\nkind = "worn"', "faults[0]: "),  # a worn clutch needs its value
]


@pytest.mark.parametrize("body,message", BAD_FAULTS)
def test_bad_faults_are_one_line_errors_before_anything_runs(tmp_path, body, message):
    p = tmp_path / "bad.toml"
    p.write_text(f'plant = "powershift"\nscenario = "powershift_single_swap"\n{LOCKSTEP_FAULT}{body}\n'
                 '[[expect]]\nexpr = "gear"\neq = 1\nat = 0.2\n')
    with pytest.raises(ConfigError) as ei:
        load_test(p)
    assert str(ei.value).startswith(f"{p}: {message}"), str(ei.value)
    assert "\n" not in str(ei.value)


def test_a_good_fault_by_clutch_name_loads(tmp_path):
    p = tmp_path / "ok.toml"
    p.write_text(f'plant = "powershift"\nscenario = "powershift_single_swap"\n{LOCKSTEP_FAULT}'
                 'target = "clutch"\nclutch = "C2"\nkind = "stuck_closed"\n'
                 '[[expect]]\nexpr = "gear"\neq = 1\nat = 0.2\n')
    assert load_test(p).faults[0].fault == {"target": "clutch", "clutch": "C2", "kind": "stuck_closed"}


BAD = [
    ('expr = "gaer"\neq = 3\nat = 1.0', "expect[0].expr: 'gaer': unknown signal 'gaer'; did you mean 'gear'?"),
    ('expr = "gear"\neq = 3', "expect[0].expr: needs exactly one of at, during, always, eventually, never, within_s"),
    ('expr = "gear"\nat = 1.0', "expect[0].expr: 'gear' has no bound: give eq, min or max, or write a condition"),
    ('expr = "gear"\neq = 3\nat = 5.0', "expect[0].at: 5 s is after the end of the run (1.2 s)"),
    ('expr = "gear"\nmin = 3\nmax = 1\nat = 1.0', "expect[0].min: is above max (3 > 1)"),
    ('expr = "__import__(\'os\')"\neq = 1\nat = 1.0', "Call is not allowed"),
    ('expr = "gear"\neq = 3\nwithin_s = 0.5\nafter = { command = "p_c9" }', "expect[0].after.command: must be one of"),
    ('expr = "gear"\neq = 3\nduring = [1.0, 0.5]', "expect[0].during: the window ends before it starts"),
]


@pytest.mark.parametrize("body,message", BAD)
def test_bad_expectations_are_one_line_errors(tmp_path, body, message):
    p = tmp_path / "bad.toml"
    p.write_text(f'plant = "powershift"\nscenario = "powershift_single_swap"\n[[expect]]\n{body}\n')
    with pytest.raises(ConfigError) as ei:
        load_test(p)
    assert str(ei.value).startswith(f"{p}: ") and message in str(ei.value)


BAD_TOP = [
    ('mode = "offline"\n[controller]\ncommand = ["true"]', "controller: a controller process needs a server"),
    ('mode = "lockstep"\n[[faults]]\nat = 0.5\nuntil = 0.2\ntarget = "clutch"\nkind = "worn"',
     "faults[0].until: must be after at"),
    ('mode = "lockstep"\n[[faults]]\nat = 0.5\nkind = "worn"', "faults[0].target: is required"),
    ('mode = "lockstep"\n[[faults]]\nat = 9.0\ntarget = "clutch"\nclutch = 2\nkind = "worn"\nvalue = 0.5',
     "faults[0].at: 9 s is after the end of the run"),
    ('mode = "lokstep"',
     "mode: must be one of 'offline', 'lockstep', 'realtime', got 'lokstep'; did you mean 'lockstep'?"),
    ('speed = 3', "speed: unknown key"),
]


@pytest.mark.parametrize("body,message", BAD_TOP)
def test_bad_files_are_one_line_errors(tmp_path, body, message):
    p = tmp_path / "bad.toml"
    p.write_text(f'plant = "powershift"\nscenario = "powershift_single_swap"\n{body}\n'
                 '[[expect]]\nexpr = "gear"\neq = 1\nat = 0.2\n')
    with pytest.raises(ConfigError) as ei:
        load_test(p)
    assert message in str(ei.value)


def test_cli_bad_file_exit_2_before_running_anything(tmp_path):
    p = tmp_path / "bad.toml"
    p.write_text('plant = "powershfit"\nscenario = "powershift_single_swap"\n'
                 '[[expect]]\nexpr = "gear"\neq = 1\nat = 0.2\n')
    r = _cli(str(BENCHES / "swap_1_3.toml"), str(p))
    assert r.returncode == 2
    assert r.stdout == ""  # the good file did not run either
    assert r.stderr.count("\n") == 1 and "plant" in r.stderr and "did you mean" in r.stderr


# -- verdicts on a synthetic recording (exact times, tolerances) ----------------------------------------------
def _rec() -> Recording:
    t = np.arange(11) * 0.1
    x = np.array([0, 1, 2, 3, 4, 5, 4, 3, 2, 1, 0], dtype=float)
    cmd = np.array([0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1], dtype=float)
    return Recording(t, {"x": x, "cmd": cmd}, 0.1)


def _exp(tmp_path, body: str):
    p = tmp_path / "e.toml"
    p.write_text(f'plant = "powershift"\nscenario = "powershift_single_swap"\n[[expect]]\n{body}\n')
    e = load_test(p).expectations[0]
    # the synthetic signals stand in for the plant's: rebuild the expression over their names
    object.__setattr__(e, "expr", Expr(e.expr.text.replace("w_1", "x").replace("p_c1", "cmd"), ["x", "cmd"]))
    if e.after is not None and e.after.when is not None:
        object.__setattr__(e.after, "when", Expr(e.after.when.text.replace("w_1", "x"), ["x"]))
    if e.after is not None and e.after.command:
        object.__setattr__(e.after, "command", "cmd")
    return e


@pytest.mark.parametrize("body,passed,t,value", [
    ('expr = "w_1"\neq = 3\nat = 0.3', True, 0.3, 3.0),
    ('expr = "w_1"\neq = 3.05\ntol = 0.04\nat = 0.3', False, 0.3, 3.0),
    ('expr = "w_1"\neq = 3.05\ntol = 0.05\nat = 0.3', True, 0.3, 3.0),
    ('expr = "w_1"\neq = 2.9\nrel_tol = 0.04\nat = 0.3', True, 0.3, 3.0),
    ('expr = "w_1"\nmax = 3.5\nduring = [0.0, 0.5]', False, 0.4, 4.0),
    ('expr = "w_1"\nmax = 4\ntol = 0.5\nduring = [0.0, 1.0]', False, 0.5, 5.0),
    ('expr = "w_1"\nmin = 0\nalways = true', True, None, None),
    ('expr = "w_1 > 4.5"\nnever = true', False, 0.5, 1.0),
    ('expr = "w_1 > 4.5"\nnever = true\nwindow = [0.6, 1.0]', True, None, None),
    ('expr = "w_1 >= 5"\neventually = true\nwindow = [0.0, 0.4]', False, 0.4, 0.0),
    ('expr = "w_1"\neq = 5\nwithin_s = 0.15\nafter = { command = "p_c1" }', False, 0.4, 4.0),
    ('expr = "w_1"\neq = 5\nwithin_s = 0.2\nafter = { command = "p_c1" }', True, 0.5, 5.0),
    ('expr = "w_1"\neq = 1\nwithin_s = 0.3\nafter = { when = "w_1 >= 5" }', False, 0.8, 2.0),
    ('expr = "w_1"\nmax = 2\nwithin_s = 0.4\nafter = 0.5', True, 0.8, 2.0),
])
def test_verdicts(tmp_path, body, passed, t, value):
    v = evaluate(_exp(tmp_path, body), _rec())
    assert v.passed is passed, v.message
    if t is not None:
        assert v.t == pytest.approx(t, abs=1e-12) and v.value == value, v.message


def test_nan_fails_every_bound(tmp_path):
    rec = _rec()
    rec.signals["x"] = rec.signals["x"].copy()
    rec.signals["x"][2] = np.nan
    v = evaluate(_exp(tmp_path, 'expr = "w_1"\nmin = -100\nalways = true'), rec)
    assert not v.passed and v.t == pytest.approx(0.2) and np.isnan(v.value)


@pytest.mark.parametrize("text", ["x.__class__", "[x]", "x if x else 1", "lambda: 1", "'a'", "open(x)", "True"])
def test_expressions_outside_the_subset_are_refused(text):
    with pytest.raises(ExprError):
        Expr(text, ["x"])


def test_inline_stimulus_and_inputs_in_expressions(tmp_path):
    """An inline [stimulus], a duration override, and an input in an expression (offline, in this process)."""
    from server.testbench.runner import run_test

    p = tmp_path / "inline.toml"
    p.write_text('plant = "powershift"\nduration_s = 0.3\n'
                 '[stimulus]\ndt_s = 0.001\nleave_at_default = ["p_c2", "p_c4", "p_c5", "p_c7", "p_c8"]\n'
                 '[stimulus.inputs]\np_c1 = 16.0\np_c3 = 16.0\np_c6 = 16.0\nload_torque = 3500.0\n'
                 'engine_torque = [[0.0, 0.0], [0.1, 0.0], [0.2, 300.0]]\n'
                 '[[expect]]\nname = "ramp"\nexpr = "engine_torque"\neq = 150.0\ntol = 1e-9\nat = 0.15\n'
                 '[[expect]]\nname = "gear 1 holds"\nexpr = "gear == 1"\nalways = true\n'
                 '[[expect]]\nname = "the load slows the engine"\nexpr = "w_1"\nmax = 79.95\n'
                 'within_s = 0.01\nafter = { command = "engine_torque" }\n')
    res = run_test(load_test(p))
    assert [v.passed for v in res.verdicts] == [True, True, True], [v.message for v in res.verdicts]
    assert res.spec.duration_s == 0.3 and res.spec.scenario.duration == 0.3
    assert res.verdicts[2].t == pytest.approx(0.101)  # the ramp's first step: the input of step 101 is the first > 0


def test_watchdog_signal_of_a_realtime_run(tmp_path):
    """A controller that sends one command and goes silent: the server's watchdog trips, and `watchdog` shows it."""
    from server.testbench.runner import run_test

    ctl = tmp_path / "silent.py"
    ctl.write_text("import sys, time\nfrom io_adapters.zmq.client import HilClient\n"
                   "with HilClient(sys.argv[1]).connect() as c:\n"
                   "    c.set_inputs(engine_torque=100.0)\n    time.sleep(5.0)\n")
    p = tmp_path / "wd.toml"
    p.write_text('plant = "powershift"\nmode = "realtime"\nduration_s = 4.0\n'
                 '[controller]\ncommand = ["{python}", "silent.py", "{control}"]\ntimeout_s = 30\n'
                 '[[expect]]\nname = "trips"\nexpr = "watchdog == 1"\neventually = true\n'
                 '[[expect]]\nname = "never trips"\nexpr = "watchdog == 1"\nnever = true\n')
    res = run_test(load_test(p))
    trips, never = res.verdicts
    assert trips.passed, trips.message
    assert not never.passed and not never.error and 0.1 < never.t < 4.0 and never.value == 1.0, never.message
