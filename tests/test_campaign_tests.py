"""Campaigns over test files: every run judged by the test's expectations, the same table for any worker count."""

from __future__ import annotations

import json
import math

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from plant_models.config import ConfigError, repo_root
from server.campaign.engine import TABLE, run_bare
from server.campaign.spec import case_values, load_campaign
from server.cli import main
from test_campaign_dask import assert_same_bits

ROOT = repo_root()
SWAP = ROOT / "tests" / "benches" / "swap_1_3.toml"
CAMPAIGN = f"""
description = "the swap 1 -> 3 test over friction and the on-coming clutch's timing"
test = "{SWAP}"

[design]
method = "lhs"
runs = RUNS
seed = 3

[parameters.friction_scale]
paths = ["config.clutch.friction_static", "config.clutch.friction_kinetic"]
mode = "scale"
range = [0.8, 1.2]
[parameters.c2_delay_s]
path = "scenario.inputs.p_c2"
mode = "shift"
range = [-0.1, 0.6]

[shift]
start_s = 0.5
off_going = "C1"
on_coming = "C2"
engine_speed = "w_1"
output_speed = "w_out"
[metrics]
builtin = ["shift_time", "flare"]
"""


def write(tmp_path, text, name="c.toml"):
    p = tmp_path / name
    p.write_text(text)
    return p


@pytest.fixture()
def judged(tmp_path):
    return write(tmp_path, CAMPAIGN.replace("RUNS", "24"))


def test_a_test_file_as_the_base_gives_its_plant_stimulus_and_expectations(judged):
    spec = load_campaign(judged)
    assert spec.judged and spec.test_source == str(SWAP) and len(spec.expectations) == 5
    assert spec.expectations[1].name == "gear 3 within 0.5 s"
    assert spec.config_source.endswith("powershift.toml") and spec.scenario_data["duration_s"] == 1.2


def test_every_run_holds_each_expectations_verdict_with_the_first_failing_time_and_value(judged):
    """A late clutch 2 (delay above about 0.4 s) misses "gear 3 within 0.5 s" and "gear 3 at the end"."""
    spec = load_campaign(judged)
    results = run_bare(spec, list(range(24)))
    delays = {r: v[1] for r, v in enumerate(case_values(spec, range(24)))}
    late = [r.run for r in results if r.verdicts[2][0] == "fail"]
    assert late and len(late) < 24
    for r in results:
        assert r.status == "ok" and len(r.verdicts) == 5
        assert r.verdict == ("fail" if r.run in late else "pass")
        if r.run in late:
            assert delays[r.run] > 0.3
            label, t, value = r.verdicts[2]  # gear 3 at the end (t = 1.2 s): still gear 1, or between gears
            assert t == pytest.approx(1.2) and value != 3.0
            assert r.verdicts[1][0] == "fail"  # not within 0.5 s of the command either
        else:
            assert all(v[0] == "pass" and math.isnan(v[1]) and math.isnan(v[2]) for v in r.verdicts)


@pytest.mark.slow
def test_one_and_two_workers_and_a_resume_give_the_same_verdict_table_bit_for_bit(judged, tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    assert main(["campaign", str(judged), "--out", str(one), "--workers", "1", "--quiet"]) == 0
    assert main(["campaign", str(judged), "--out", str(two), "--workers", "2", "--batch", "3", "--quiet"]) == 0
    a, b = pq.read_table(one / TABLE), pq.read_table(two / TABLE)
    assert a.num_rows == 24 and "expect[4].fail_value" in a.column_names
    assert set(a.column("verdict").to_pylist()) == {"pass", "fail"}
    assert_same_bits(a, b)
    assert (one / TABLE).read_bytes() == (two / TABLE).read_bytes()
    assert json.loads(a.schema.metadata[b"expectations"])[1] == "gear 3 within 0.5 s"
    # an interruption after some batches: half the parts kept, one half written; the same command resumes
    written = pq.read_table(two / "parts")
    for p in (two / "parts").iterdir():
        p.unlink()
    for first in range(0, 24, 6):
        kept = written.filter(pc.and_(pc.greater_equal(written["run"], first), pc.less(written["run"], first + 3)))
        pq.write_table(kept, two / "parts" / f"runs_{first:07d}_3.parquet")
    (two / "parts" / "runs_0000003_3.parquet.tmp").write_bytes(b"PAR1 half a file")
    (two / TABLE).unlink()
    assert main(["campaign", str(judged), "--out", str(two), "--workers", "2", "--quiet"]) == 0
    doc = json.loads((two / "campaign.json").read_text())
    assert doc["last_execution"]["runs_done_before"] == 12 and doc["last_execution"]["runs_ran"] == 12
    assert doc["expectations"][2] == {"column": "expect[2]", "name": "gear 3 at the end", "expects": "gear == 3"}
    assert_same_bits(a, pq.read_table(two / TABLE))


def test_a_test_base_excludes_config_scenario_and_dt_and_needs_no_metrics(tmp_path):
    both = CAMPAIGN.replace("RUNS", "4").replace('test = "', 'config = "powershift"\ntest = "')
    with pytest.raises(ConfigError, match=r"config: comes from the test file"):
        load_campaign(write(tmp_path, both))
    bare = CAMPAIGN.replace("RUNS", "4")
    bare = bare[:bare.index("[shift]")]
    spec = load_campaign(write(tmp_path, bare, "bare.toml"))
    assert spec.metric_names == [] and spec.judged
    (r,) = run_bare(spec, [0])
    assert r.status == "ok" and r.metrics == {} and len(r.verdicts) == 5


def test_a_parameter_may_not_take_a_verdict_columns_name(tmp_path):
    text = CAMPAIGN.replace("RUNS", "4").replace("[parameters.c2_delay_s]", "[parameters.verdict]")
    with pytest.raises(ConfigError, match=r"verdict: is the name of a column of campaign tables"):
        load_campaign(write(tmp_path, text))


def test_a_failed_run_has_every_expectation_in_error(tmp_path):
    text = CAMPAIGN.replace("RUNS", "4").replace("range = [0.8, 1.2]", "values = [1.0, -1.0]")
    text = text.replace('method = "lhs"', 'method = "list"').replace("runs = 4\nseed = 3\n", "")
    text = text.replace("range = [-0.1, 0.6]", "values = [0.0, 0.0]")
    spec = load_campaign(write(tmp_path, text))
    ok, bad = run_bare(spec, [0, 1])
    assert ok.status == "ok" and bad.status == "failed" and "friction" in bad.error
    assert bad.verdict == "error" and all(v[0] == "error" and math.isnan(v[1]) for v in bad.verdicts)
    assert np.isnan(bad.metrics["flare"])


# -- the answer: pass rates, influence, worst runs, the region plot, the replay ------------------------------
@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A judged campaign of 40 runs, run on one worker, with its summary and figures."""
    folder = tmp_path_factory.mktemp("judged")
    camp = write(folder, CAMPAIGN.replace("RUNS", "40"))
    out = folder / "out"
    assert main(["campaign", str(camp), "--out", str(out), "--workers", "1", "--plot", "--quiet"]) == 0
    return camp, out, load_campaign(camp), pq.read_table(out / TABLE)


def test_the_summary_counts_pass_rates_ranks_influence_and_lists_the_worst_runs(finished):
    camp, out, spec, table = finished
    doc = json.loads((out / "summary.json").read_text())
    verdict = table.column("verdict").to_pylist()
    assert doc["runs"] == 40 and doc["passed"] == verdict.count("pass") and 0 < doc["passed"] < 40
    for k, rate in enumerate(doc["expectations"]):
        col = table.column(f"expect[{k}].verdict").to_pylist()
        assert (rate["passed"], rate["failed"], rate["errors"]) == (col.count("pass"), col.count("fail"),
                                                                    col.count("error"))
    # the on-coming clutch's delay decides failure; friction much less
    assert list(doc["influence"]) == ["c2_delay_s", "friction_scale"] and doc["region"] == list(doc["influence"])
    assert doc["influence"]["c2_delay_s"] > 0.8 > doc["influence"]["friction_scale"]
    # per expectation: "gear 3 within 0.5 s" fails on the delay alone; "gear 1 before the shift" never fails
    assert list(doc["influence_per_expectation"]["expect[1]"])[0] == "c2_delay_s"
    assert "expect[0]" not in doc["influence_per_expectation"]
    worst = doc["worst"]
    assert len(worst) == min(10, 40 - doc["passed"])
    counts = [len(w["failing"]) for w in worst]
    assert counts == sorted(counts, reverse=True)
    first = worst[0]
    row = table.filter(pc.equal(table["run"], first["run"])).to_pylist()[0]
    f0 = first["failing"][0]
    assert (row[f"{f0['column']}.fail_t_s"], row[f"{f0['column']}.fail_value"]) == (f0["t_s"], f0["value"])
    assert first["replay"] == f"gearbox-hil campaign {camp} --out {out} --replay {first['run']}"
    assert (out / "failing_region.png").stat().st_size > 10_000


def test_replay_reproduces_a_failing_runs_verdicts_times_and_values_exactly(finished, capsys):
    camp, out, spec, table = finished
    from server.testbench.runner import run_test
    from server.testbench.spec import load_test

    run = json.loads((out / "summary.json").read_text())["worst"][0]["run"]
    assert main(["campaign", str(camp), "--out", str(out), "--replay", str(run)]) == 1  # it fails, as in the table
    text = capsys.readouterr().out
    assert f"replay of run {run}: the same verdicts, failing times and values as the campaign table" in text
    # the written test file, run by the test bench, against the table's row: bit for bit
    result = run_test(load_test(out / "replay" / f"run_{run:06d}" / "test.toml"))
    row = table.filter(pc.equal(table["run"], run)).to_pylist()[0]
    failed = 0
    for k, v in enumerate(result.verdicts):
        label = "pass" if v.passed else "fail"
        assert row[f"expect[{k}].verdict"] == label
        if not v.passed:
            failed += 1
            assert np.float64(row[f"expect[{k}].fail_t_s"]).view(np.int64) == np.float64(v.t).view(np.int64)
            assert np.float64(row[f"expect[{k}].fail_value"]).view(np.int64) == np.float64(v.value).view(np.int64)
    assert failed >= 2


def test_a_replay_that_differs_from_the_table_says_so(finished, tmp_path, capsys):
    """The comparison can fail: a table whose failing value was changed in its last bit is caught."""
    import shutil

    camp, out, spec, table = finished
    run = json.loads((out / "summary.json").read_text())["worst"][0]["run"]
    other = tmp_path / "out"
    shutil.copytree(out, other)
    k = next(k for k in range(5) if table.column(f"expect[{k}].verdict")[run].as_py() == "fail")
    col = f"expect[{k}].fail_value"
    values = table.column(col).to_numpy().copy()
    values[run] = np.nextafter(values[run], np.inf)
    import pyarrow as pa
    pq.write_table(table.set_column(table.schema.get_field_index(col), col, pa.array(values)), other / TABLE)
    assert main(["campaign", str(camp), "--out", str(other), "--replay", str(run)]) == 3
    assert f"DIFFERS expect[{k}]" in capsys.readouterr().out


def test_replay_refuses_a_run_outside_the_campaign(finished, capsys):
    camp, out, spec, table = finished
    assert main(["campaign", str(camp), "--out", str(out), "--replay", "40"]) == 2
    assert "--replay: run 40 is not a run of this campaign (0 .. 39)" in capsys.readouterr().err


def test_the_toml_writer_reads_back_the_same_data_bit_for_bit():
    import tomllib

    from server.campaign.replay import dumps

    data = {"name": "a \"quoted\" name\n", "x": 0.1 + 0.2, "n": 3, "b": True, "tiny": 1e-300, "inf": math.inf,
            "list": [[0.0, 1.5], [0.59378845415217, -2.0]], "table": {"sub": {"deep": 1.0}, "k-1": "v"},
            "expect": [{"expr": "gear", "after": {"command": "p_c2"}}, {"expr": "w", "during": [0.1, 0.5]}],
            "inline": {"s": {"sine": {"amplitude": 2.0}}}, "odd key": 1}
    back = tomllib.loads(dumps(data))
    assert back == data and back["x"].hex() == (0.1 + 0.2).hex()


# -- a fault schedule in the base: its parameters vary like any other -----------------------------------------
FAULTED = f"""
description = "clutch 2 stuck closed: when does it break the swap"
test = "{ROOT / 'tests' / 'benches' / 'failing' / 'swap_tie_up_fails.toml'}"

[design]
method = "lhs"
runs = 12
seed = 5

[parameters.friction_scale]
paths = ["config.clutch.friction_static", "config.clutch.friction_kinetic"]
mode = "scale"
range = [0.8, 1.2]
[parameters.stuck_at_s]
path = "faults[0].at"
range = [0.05, 1.1]
"""


def _table_without_dask(spec, out):
    """The campaign's table made in this process (the same rows as any worker count: tests above)."""
    from server.campaign.engine import _store, assemble, prepare

    prepare(out, spec, True)
    runs = list(range(spec.runs))
    _store(out, spec, run_bare(spec, runs), dict(zip(runs, case_values(spec, runs))))
    return pq.read_table(assemble(out, spec))


def test_a_faults_onset_is_a_parameter_and_gear_1_is_lost_one_step_after_it(tmp_path, capsys):
    """Clutch 2 stuck closed before the shift (0.5 s) takes gear 1 away at once: "gear 1 until the shift"
    fails at the first sample after the fault's step, k dt + dt with k the step the schedule switches it at."""
    from plant_models.run.schedule import switch_step

    camp = write(tmp_path, FAULTED)
    spec = load_campaign(camp)
    table = _table_without_dask(spec, tmp_path / "out")
    rows = table.to_pylist()
    early = [r for r in rows if r["stuck_at_s"] < 0.5 - 0.001]
    late = [r for r in rows if r["stuck_at_s"] > 0.5 + 0.001]
    assert early and late
    for r in early:
        k = switch_step(r["stuck_at_s"], 0.001)
        assert r["expect[0].verdict"] == "fail" and r["expect[0].fail_t_s"] == (k + 1) * 0.001
        assert r["expect[0].fail_value"] != 1.0
    assert all(r["expect[0].verdict"] == "pass" for r in late)
    # and the replay of an early one, through the test bench's offline run with the same fault, agrees
    run = early[0]["run"]
    assert main(["campaign", str(camp), "--out", str(tmp_path / "out"), "--replay", str(run)]) == 1
    text = capsys.readouterr().out
    assert "the same verdicts, failing times and values as the campaign table" in text
    replayed = (tmp_path / "out" / "replay" / f"run_{run:06d}" / "test.toml").read_text()
    assert f"at = {early[0]['stuck_at_s']!r}" in replayed


def test_a_transport_fault_in_the_base_is_refused(tmp_path):
    test = tmp_path / "t.toml"
    test.write_text((ROOT / "tests" / "benches" / "swap_1_3.toml").read_text().replace(
        'mode = "offline"', 'mode = "lockstep"') + '\n[[faults]]\nat = 0.1\ntarget = "zmq"\nkind = "drop_commands"\n')
    text = CAMPAIGN.replace("RUNS", "4").replace(str(SWAP), str(test))
    with pytest.raises(ConfigError, match=r"test: .*faults\[0\]: a zmq fault acts on a transport"):
        load_campaign(write(tmp_path, text))


def test_an_adapter_set_in_the_base_is_refused(tmp_path):
    test = tmp_path / "t.toml"
    io = ROOT / "tests" / "data" / "io_j1939_lockstep.toml"
    test.write_text((ROOT / "tests" / "benches" / "swap_1_3.toml").read_text().replace(
        'mode = "offline"', f'mode = "lockstep"\nio = "{io}"')
        + '\n[[adapter_set]]\nat = 0.1\nadapter = "j1939"\nrequested_gear = 3\n')
    text = CAMPAIGN.replace("RUNS", "4").replace(str(SWAP), str(test))
    with pytest.raises(ConfigError, match=r"test: .*adapter_set\[0\]: an adapter set acts on a server's adapter"):
        load_campaign(write(tmp_path, text))


# -- closed loop: the worked example's controller class, its parameters varied ----------------------------------
def _closed_loop_campaign(tmp_path, runs: int):
    """The worked example (campaigns/closed_loop_swap_1_3.toml) with fewer runs."""
    text = (ROOT / "campaigns" / "closed_loop_swap_1_3.toml").read_text()
    text = text.replace('test = "tests/', f'test = "{ROOT / "campaigns" / "tests"}/').replace(
        "runs = 1000", f"runs = {runs}")
    return write(tmp_path, text, "closed_loop.toml")


@pytest.mark.slow
def test_a_closed_loop_campaign_gives_the_same_table_with_1_and_2_workers_and_after_a_resume(tmp_path):
    camp = _closed_loop_campaign(tmp_path, 24)
    one, two = tmp_path / "one", tmp_path / "two"
    assert main(["campaign", str(camp), "--out", str(one), "--workers", "1", "--quiet"]) == 0
    assert main(["campaign", str(camp), "--out", str(two), "--workers", "2", "--batch", "4", "--quiet"]) == 0
    a = pq.read_table(one / TABLE)
    assert set(a.column("status").to_pylist()) == {"ok"} and set(a.column("verdict").to_pylist()) == {"pass", "fail"}
    assert_same_bits(a, pq.read_table(two / TABLE))
    # interrupted after 3 of 6 batches, one part half written: the same command finishes it
    written = pq.read_table(two / "parts")
    for p in (two / "parts").iterdir():
        p.unlink()
    for first in (0, 8, 16):
        kept = written.filter(pc.and_(pc.greater_equal(written["run"], first), pc.less(written["run"], first + 4)))
        pq.write_table(kept, two / "parts" / f"runs_{first:07d}_4.parquet")
    (two / "parts" / "runs_0000004_4.parquet.tmp").write_bytes(b"PAR1 half a file")
    (two / TABLE).unlink()
    assert main(["campaign", str(camp), "--out", str(two), "--workers", "2", "--quiet"]) == 0
    assert json.loads((two / "campaign.json").read_text())["last_execution"]["runs_ran"] == 12
    assert_same_bits(a, pq.read_table(two / TABLE))


def test_a_closed_loop_runs_verdicts_are_replayed_exactly_and_its_parameters_reach_the_controller(tmp_path, capsys):
    """The controller's engine torque (a controller parameter) and the slow actuator's onset (a fault
    parameter) take effect: the replayed test file carries them, and its verdicts equal the table's."""
    camp = _closed_loop_campaign(tmp_path, 16)
    spec = load_campaign(camp)
    table = _table_without_dask(spec, tmp_path / "out")
    rows = table.to_pylist()
    failing = [r for r in rows if r["verdict"] == "fail"]
    assert failing and len(failing) < len(rows)
    run = failing[0]["run"]
    assert main(["campaign", str(camp), "--out", str(tmp_path / "out"), "--replay", str(run)]) == 1
    assert "the same verdicts, failing times and values as the campaign table" in capsys.readouterr().out
    replayed = (tmp_path / "out" / "replay" / f"run_{run:06d}" / "test.toml").read_text()
    assert f"engine_torque = {failing[0]['engine_torque_N_m']!r}" in replayed
    assert f"at = {failing[0]['fault_onset_s']!r}" in replayed
    # the engine torque reaches the plant's input through the controller's initial inputs, for the whole run
    from server.campaign.runner import _plant
    from server.campaign.spec import apply_all
    from server.campaign.testbase import run_test_case

    values = case_values(spec, [run])[0]
    case = apply_all(spec, values)
    assert case.controller["params"]["engine_torque"] == values[2] and case.faults[0]["at"] == values[3]
    trace, rec = run_test_case(spec, case, _plant(case.config, "test"), "")
    assert np.all(rec.signals["engine_torque"] == values[2]) and len(rec.t) == 1501
