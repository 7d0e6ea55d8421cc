"""Pin faults in test files and campaigns: a test file whose I/O config has a device with a TCU on its pins
(examples/benches/zf8hp_pin_faults.toml: the 8HP's 1 -> 2 upshift closed by examples/electrical_tcu.py) schedules
``device`` faults offline, and they act exactly as ``fault_set`` makes them act in a lockstep server; a campaign
over that test file runs the same offline run."""

from dataclasses import replace

import numpy as np
import pytest

from plant_models.config import ConfigError, repo_root
from plant_models.errors import FaultError
from plant_models.registry import load_plant
from plant_models.run.schedule import switch_step
from server.testbench.device_run import run_with_devices
from server.testbench.device_bench import run_devices_offline
from server.testbench.runner import ServerRun, run_lockstep, run_test
from server.testbench.spec import load_test

ROOT = repo_root()
TEST_FILE = ROOT / "examples" / "benches" / "zf8hp_pin_faults.toml"
IO = ROOT / "examples" / "benches" / "io_electrical_zf8hp_lockstep.toml"
DT = 1e-3


@pytest.fixture(scope="module")
def spec():
    return load_test(TEST_FILE)


@pytest.fixture(scope="module")
def offline(spec):
    log: list[str] = []
    return run_devices_offline(spec, log), log


def test_the_test_file_reads_its_device_tcu_and_takes_pin_faults_offline(spec):
    assert spec.devices and spec.mode == "offline" and spec.scenario is None and spec.duration_s == 1.6
    assert [f.fault["kind"] for f in spec.faults] == ["missing_tooth", "open"]


def test_a_scheduled_pin_fault_acts_as_fault_set_in_a_lockstep_server_bit_for_bit(spec, offline, tmp_path):
    rec, log = offline
    ls_log: list[str] = []
    from io_adapters.zmq.client import HilClient

    ls_spec = replace(spec, mode="lockstep")  # a server process on the same I/O config; the faults by fault_set
    with ServerRun(ls_spec.plant_config, "lockstep", tmp_path, ls_spec.io_config) as server:
        with HilClient(server.control, timeout_s=30.0).connect() as client:
            ls = run_lockstep(ls_spec, client, ls_log)
    assert set(ls.signals) == set(rec.signals) and np.array_equal(ls.t, rec.t)
    for name in rec.signals:
        assert np.array_equal(ls.signals[name], rec.signals[name]), name
    # both switched the same faults at the same times
    assert [line.split(":")[0] for line in log] == [line.split(":")[0] for line in ls_log] == [
        "t = 0.1 s", "t = 0.72 s", "t = 0.76 s"]


def test_the_open_solenoid_carries_no_current_and_the_shift_still_completes(spec, offline):
    rec, _ = offline
    clean = run_devices_offline(replace(spec, faults=()), [])
    i_e, i_e_clean = rec.signals["i_E"], clean.signals["i_E"]
    k_open, k_close = switch_step(0.72, DT), switch_step(0.76, DT)
    # the same run up to the open pin (the missing tooth's effect on the TCU comes later: it measures the ratio
    # only in the inertia phase, and it has not locked by then)
    assert np.array_equal(rec.signals["w_input"][:k_open + 1], clean.signals["w_input"][:k_open + 1])
    # open: no current in the steps after the switch (the pins change with the write after the step it is switched
    # before, the measured inputs from the next step on) through the step the clear is switched before; then the
    # coil's current builds up again
    assert i_e[k_open] > 0.4 and np.all(i_e[k_open + 1:k_close + 1] == 0.0)
    assert np.all(i_e_clean[k_open + 1:k_close + 1] > 0.4)
    assert 0.0 < i_e[k_close + 1] and np.all(np.diff(i_e[k_close + 1:k_close + 30]) > 0.0)
    # clutch E's pressure falls behind the clean run's, the shift takes longer, and completes
    assert rec.signals["pressure_E"][k_close] < clean.signals["pressure_E"][k_close] - 1.0
    t_gear2 = [float(r.t[np.argmax(r.signals["gear"] == 2)]) for r in (rec, clean)]
    assert t_gear2[0] > t_gear2[1] > 0.7
    assert rec.signals["gear"][-1] == clean.signals["gear"][-1] == 2


def _edges(faults):
    """Every edge of the input wheel's sensor (ns from the start) over the first 0.65 s, the TCU in the loop."""
    plant = load_plant("zf8hp_electrical")
    out: list[int] = []

    def pins(k, adapters):
        dev = adapters[0].device
        out.extend(int(k * 1_000_000 + 1_000_000 + e) for e in dev.tcu_edges(0))  # tick k + 1's edges

    run_with_devices(plant, IO, 0.65, faults, after_tick=pins)
    return np.array(out)


def test_a_scheduled_missing_tooth_removes_exactly_that_teeths_edges():
    """Before the inertia phase the TCU's commands do not depend on what it measures, so the plant runs the same:
    the faulted wheel's edges are the clean wheel's without tooth 7's, from the switch on, and nothing else."""
    clean = _edges([])
    cut = _edges([({"target": "device", "kind": "missing_tooth", "pin": "n_in", "tooth": 7}, 0.1, None)])
    teeth = 60
    tooth = np.arange(len(clean)) % teeth  # the wheel starts at angle 0 (tooth 0's edge at t = 0) turning forward
    k_switch = switch_step(0.1, DT)
    gone = (tooth == 7) & (clean >= (k_switch + 1) * 1_000_000)
    assert gone.sum() >= 5  # about 16 turns a second
    assert np.array_equal(cut, clean[~gone])
    assert np.all(np.diff(clean) > 0) and clean[0] == 1_000_000  # tooth 0 at the start of the first tick played


def test_a_campaign_over_the_test_file_runs_the_test_benchs_offline_run(spec, offline):
    from server.campaign.runner import _plant
    from server.campaign.spec import apply_all, case_values, load_campaign
    from server.campaign.testbase import judge, run_test_case

    camp = load_campaign(ROOT / "campaigns" / "zf8hp_pin_faults.toml")
    values = case_values(camp, range(camp.runs))
    k = values.index((0.76, 7))  # the test file's own values
    case = apply_all(camp, values[k])
    trace, rec = run_test_case(camp, case, _plant(case.config, camp.config_source), "")
    ref, _ = offline
    for name in ref.signals:
        assert np.array_equal(rec.signals[name], ref.signals[name]), name
    assert np.array_equal(trace.values[:, trace.names.index("ratio")], ref.signals["ratio"])
    assert judge(camp.expectations, rec)[0] == "pass"
    # another run's values reach its faults: a longer open window, a later 2nd
    case2 = apply_all(camp, (1.12, 0))
    _, rec2 = run_test_case(camp, case2, _plant(case2.config, camp.config_source), "")
    assert np.argmax(rec2.signals["gear"] == 2) > np.argmax(ref.signals["gear"] == 2)


def test_pin_faults_offline_need_a_device_tcu_and_name_a_pin(tmp_path):
    text = TEST_FILE.read_text()
    no_tcu = tmp_path / "io.toml"
    no_tcu.write_text(IO.read_text().split("tcu = ")[0])
    t = tmp_path / "t.toml"
    t.write_text(text.replace('io = "io_electrical_zf8hp_lockstep.toml"', f'io = "{no_tcu}"'))
    with pytest.raises(ConfigError, match="scenario: is required"):
        load_test(t)
    t.write_text(text.replace('pin = "sol_E"', 'pin = "sol_X"').replace('io = "io_electrical_zf8hp_lockstep.toml"',
                                                                        f'io = "{IO}"'))
    bad = load_test(t)  # the pin is the device's to check, once it is open
    with pytest.raises(FaultError, match="no pin 'sol_X'"):
        run_devices_offline(bad, [])
    result = run_test(bad)  # the test bench reports it as the run's error
    assert not result.passed and result.verdicts[-1].error and "no pin 'sol_X'" in result.verdicts[-1].message


def test_a_campaign_runs_replay_names_the_device_tcus_io_and_gives_the_same_run(tmp_path):
    from server.campaign.replay import write_replay
    from server.campaign.runner import _plant
    from server.campaign.spec import apply_all, case_values, load_campaign
    from server.campaign.testbase import run_test_case

    camp = load_campaign(ROOT / "campaigns" / "zf8hp_pin_faults.toml")
    run = 5
    replayed = load_test(write_replay(camp, run, tmp_path))  # a test file in another folder: io by absolute path
    assert replayed.devices and replayed.io_config == IO.resolve()
    assert [f.fault.get("tooth") for f in replayed.faults] == [7, None] and replayed.faults[1].until == 0.9
    case = apply_all(camp, case_values(camp, [run])[0])
    _, rec = run_test_case(camp, case, _plant(case.config, camp.config_source), "")
    again = run_devices_offline(replayed, [])
    assert all(np.array_equal(again.signals[k], rec.signals[k]) for k in rec.signals)
