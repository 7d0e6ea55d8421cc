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


def test_a_test_file_with_a_fault_schedule_is_refused_with_one_line(tmp_path):
    faulted = ROOT / "tests" / "benches" / "failing" / "swap_tie_up_fails.toml"
    text = CAMPAIGN.replace("RUNS", "4").replace(str(SWAP), str(faulted))
    with pytest.raises(ConfigError, match=r"test: .*fault schedule"):
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
