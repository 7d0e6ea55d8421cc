"""The test file's ``[[adapter_set]]`` schedule: checked when the file is read, sent at its tick.

A TC1 gear request (the J1939 vehicle ECU's requested gear, SPN 525) set by
the test file at 0.4 s in lockstep, with the J1939 TCU of
examples/ecu_emulator_j1939.py on the bus closing the shift 1 -> 3.
"""

from __future__ import annotations

import threading
import uuid
from pathlib import Path

import pytest

from plant_models.config import ConfigError
from server.testbench.spec import load_test

DATA = Path(__file__).parent / "data"
FILE = DATA / "j1939_tc1_gear3.toml"
IO = DATA / "io_j1939_lockstep.toml"


def _copy(tmp_path: Path, text: str | None = None) -> tuple[Path, str]:
    """The test file and its I/O config in ``tmp_path`` on a bus channel of their own."""
    ch = f"tc1-{uuid.uuid4().hex[:8]}"
    (tmp_path / IO.name).write_text(IO.read_text().replace("gearbox-hil-tc1", ch))
    (tmp_path / "j1939_tcu_controller.py").write_text((DATA / "j1939_tcu_controller.py").read_text())
    p = tmp_path / FILE.name
    p.write_text((text if text is not None else FILE.read_text()).replace("gearbox-hil-tc1", ch))
    return p, ch


def test_tc1_gear_request_from_the_test_file_in_lockstep_closes_the_shift(tmp_path):
    from io_adapters.zmq.client import HilClient
    from server.realtime.runtime import build
    from server.testbench.closed_loop import closed_loop_lockstep
    from server.testbench.runner import closed_loop_recording
    from server.testbench.verdict import evaluate

    path, _ = _copy(tmp_path)
    spec = load_test(path)
    assert [(e.at, e.adapter, e.values) for e in spec.adapter_sets] == [(0.4, "j1939", {"requested_gear": 3})]
    srv = build(spec.plant_config, spec.io_config)
    srv.loop.open()
    j_ad = next(a for a in srv.loop.adapters if a.name == "j1939")
    control = next(a for a in srv.loop.adapters if a.name == "zmq").endpoints["control"]
    runner = threading.Thread(target=srv.loop.run, daemon=True)
    runner.start()
    log: list[str] = []
    ctl = spec.controller_class.build()
    try:
        with HilClient(control, timeout_s=30.0).connect() as client:
            assert j_ad.requested_gear == 1
            r = closed_loop_lockstep(client, ctl, None, duration_s=spec.duration_s, log=log,
                                     adapter_sets=spec.adapter_sets)
            client.shutdown()
    finally:
        runner.join(timeout=30)
        ctl.close()
        st = j_ad.status()
        srv.loop.close()
    # sent before tick 400 exactly (0.4 s at 1 kHz), so TC1 carries gear 3 from its next 50 ms cycle on
    assert log == ["t = 0.4 s: adapter_set adapter_set[0] j1939 {'requested_gear': 3} from tick 400"]
    assert j_ad.requested_gear == 3 and ctl.tcu.requested_gear == 3
    res = ctl.tcu.result
    assert [p for _, p in res.phases] == ["hold", "torque", "inertia", "lock"] and res.gear_actual == 3
    assert res.phases[0][0] < 0.4 + 1e-9 < res.phases[1][0] <= 0.4 + 0.05 + 0.02  # TC1 50 ms + one TCU task
    assert st["tsc1_applied"] > 0 and st["tcu"]["ETC2"]["TransCurrentGear"] == 3
    verdicts = [evaluate(e, closed_loop_recording(r)) for e in spec.expectations]
    assert all(v.passed for v in verdicts), [v.message for v in verdicts if not v.passed]


ENTRY = '[[adapter_set]]\nat = 0.4\nadapter = "j1939"\nrequested_gear = 3\n'


@pytest.mark.parametrize("old, new, key, problem", [
    ('adapter = "j1939"', 'adapter = "tc1"', "adapter_set[0].adapter",
     "no adapter 'tc1' in io_j1939_lockstep.toml; its adapters are zmq, can, j1939"),
    ("requested_gear = 3", "gear = 3", "adapter_set[0]", "j1939 has no settable value 'gear'; it takes requested_gear"),
    ("requested_gear = 3", "requested_gear = 126", "adapter_set[0]", "requested_gear = 126: must be an integer in "
     "-125 .. 125"),
    ("requested_gear = 3", "requested_gear = 2.5", "adapter_set[0]", "must be an integer in -125 .. 125"),
    ("at = 0.4", "at = 2.0", "adapter_set[0].at", "2 s is after the end of the run (1.5 s)"),
    (ENTRY, ENTRY + ENTRY.replace("0.4", "0.3"), "adapter_set[1].at",
     "0.3 s is before the previous entry's 0.4 s: give the entries in time order"),
    ('mode = "lockstep"', 'mode = "offline"', "adapter_set", "it needs a server"),
    ('io = "io_j1939_lockstep.toml"', "", "adapter_set", "give io ="),
])
def test_a_bad_adapter_set_schedule_is_one_line_before_anything_runs(tmp_path, old, new, key, problem):
    text = FILE.read_text()
    assert old in text
    if new.startswith('mode = "offline"') or old.startswith("io ="):  # no server: no controller class either
        text = text.split("[controller]")[0] + text[text.index("[[adapter_set]]"):]
        text = text.replace("duration_s = 1.5", 'duration_s = 1.5\n[stimulus]\ndt_s = 0.001\ninputs = { engine_torque = 100.0 }\n')
    path, _ = _copy(tmp_path, text.replace(old, new))
    with pytest.raises(ConfigError) as exc:
        load_test(path)
    assert exc.value.key == key and problem in exc.value.problem
    assert "\n" not in str(exc.value)


REALTIME = """name = "TC1 gear request over J1939 in realtime"
plant = "powershift"
mode = "realtime"
io = "io_j1939_share.toml"
duration_s = 5.5

[controller]
command = ["{python}", "ecu_emulator_j1939.py", "--interface", "remote", "--channel", "{endpoint:can.share}",
           "--duration", "5.5"]
cwd = "EXAMPLES"
timeout_s = 120

[[adapter_set]]
at = 4.0
adapter = "j1939"
requested_gear = 3

[[expect]]
name = "no shift before the request (the TCU may start late: gear 0 or 1 until then)"
expr = "gear == 3"
never = true
window = [0.0, 4.0]

[[expect]]
name = "gear 3 within 1 s of the request"
expr = "gear"
eq = 3
within_s = 1.0
after = 4.0
"""


def test_tc1_gear_request_from_the_test_file_in_realtime(tmp_path):
    """The runner sends the entry when the state stream reaches 4 s; the TCU process on the bus's share shifts."""
    from plant_models.config import repo_root
    from server.testbench.runner import run_test

    (tmp_path / "io_j1939_share.toml").write_text((DATA / "io_j1939_share.toml").read_text().replace(
        "gearbox-hil-tc1-share", f"tc1-{uuid.uuid4().hex[:8]}"))
    path = tmp_path / "tc1_realtime.toml"
    path.write_text(REALTIME.replace("EXAMPLES", str(repo_root() / "examples")))
    res = run_test(load_test(path), tmp_path / "work")
    assert res.passed, [v.message for v in res.verdicts if not v.passed]
    sets = [ln for ln in res.log if "adapter_set" in ln]
    assert len(sets) == 1 and sets[0].startswith("t = 4 s: adapter_set adapter_set[0] j1939 {'requested_gear': 3} "
                                                 "from tick ")
    tick = int(sets[0].rsplit(" ", 1)[1])
    assert 4000 <= tick < 4100  # the stream's latency in realtime: a few ticks on a loaded machine


def test_a_stimulus_in_lockstep_takes_the_entry_at_its_exact_tick(tmp_path):
    """The runner's tick-by-tick lockstep run (a stimulus, no controller) sends the entry before tick 250."""
    from server.testbench.runner import run_test

    text = FILE.read_text()
    text = text.split("[controller]")[0] + text[text.index("[[adapter_set]]"):]
    text = text.replace("duration_s = 1.5", "duration_s = 0.3\n[stimulus]\ndt_s = 0.001\n"
                        "inputs = { engine_torque = 100.0, p_c1 = 16.0, p_c3 = 16.0, p_c6 = 16.0 }\n")
    text = text.replace("at = 0.4", "at = 0.25").split("[[expect]]")[0]
    text += '[[expect]]\nname = "gear 1 (the stimulus drives the clutches)"\nexpr = "gear"\neq = 1\nat = 0.3\n'
    path, _ = _copy(tmp_path, text)
    res = run_test(load_test(path), tmp_path / "work")
    assert res.passed, [v.message for v in res.verdicts if not v.passed]
    assert res.log == ["t = 0.25 s: adapter_set adapter_set[0] j1939 {'requested_gear': 3} from tick 250"]


def test_a_test_file_schedules_a_dtc_of_the_rest_bus_and_an_incomplete_one_is_refused(tmp_path):
    """A DTC (SPN, FMI, active) and a lamp of a J1939 node on the test file's schedule, checked whole when the
    file is read: the three DTC values of a node come together."""
    dtc = ENTRY.replace("requested_gear = 3", "engine_dtc_spn = 190\nengine_dtc_fmi = 2\nengine_dtc_active = 1\n"
                        "engine_red_lamp = 1")
    path, _ = _copy(tmp_path, FILE.read_text().replace(ENTRY, dtc))
    spec = load_test(path)
    assert [(e.at, e.values) for e in spec.adapter_sets] == [
        (0.4, {"engine_dtc_spn": 190, "engine_dtc_fmi": 2, "engine_dtc_active": 1, "engine_red_lamp": 1})]
    path, _ = _copy(tmp_path, FILE.read_text().replace(ENTRY, dtc.replace("engine_dtc_active = 1\n", "")))
    with pytest.raises(ConfigError) as exc:
        load_test(path)
    assert exc.value.key == "adapter_set[0]" and "missing engine_dtc_active" in exc.value.problem
