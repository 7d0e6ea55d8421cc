"""Campaigns on Dask: the same table with 1 and 2 workers, after an interruption and through --scheduler."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from plant_models.config import repo_root
from server.campaign.engine import TABLE, run_bare, start_client
from server.campaign.spec import case_values, load_campaign
from server.cli import main

ROOT = repo_root()
CAMPAIGN = f"""
description = "a small campaign of Powershift 1 -> 2 swaps"
config = "{ROOT / 'configs' / 'powershift.toml'}"
scenario = "{ROOT / 'scenarios' / 'powershift_single_swap.toml'}"
dt_s = 0.002

[design]
method = "lhs"
runs = RUNS
seed = 7

[parameters.friction_scale]
paths = ["config.clutch.friction_static", "config.clutch.friction_kinetic"]
mode = "scale"
range = [0.8, 1.2]
[parameters.lag_s]
path = "config.clutch.pressure_lag_s"
range = [0.01, 0.05]
[parameters.engine_torque_N_m]
path = "scenario.inputs.engine_torque"
range = [150.0, 450.0]
[parameters.c2_offset_s]
path = "scenario.inputs.p_c2"
mode = "shift"
range = [-0.08, 0.08]

[shift]
start_s = 0.5
window_s = 0.5
off_going = "C1"
on_coming = "C2"
engine_speed = "w_1"
output_speed = "w_out"
reaction_torque = "torque_c6"

[metrics]
builtin = ["shift_time", "final_gear", "flare", "peak_reaction_torque", "rms_reaction_torque", "clutch_energy",
           "max_slip"]
[metrics.expressions]
torque_overshoot = "peak_reaction_torque / abs(at(torque_c6, start_s))"

[traces]
keep = [3, 5]
every = 4
"""


@pytest.fixture()
def small(tmp_path):
    p = tmp_path / "small.toml"
    p.write_text(CAMPAIGN.replace("RUNS", "40"))
    return p


def table(folder):
    return pq.read_table(folder / TABLE)


def assert_same_bits(a, b):
    """Two campaign tables hold the same runs, values and metrics, bit for bit."""
    assert a.schema.equals(b.schema, check_metadata=True)
    for name in a.column_names:
        x, y = a.column(name).to_numpy(zero_copy_only=False), b.column(name).to_numpy(zero_copy_only=False)
        if x.dtype.kind == "f":
            assert np.array_equal(x.view(np.int64), y.view(np.int64)), name  # NaN payloads and signs too
        else:
            assert list(x) == list(y), name


@pytest.mark.slow
def test_one_and_two_workers_give_the_same_table_bit_for_bit_and_the_bare_runs(small, tmp_path):
    assert main(["campaign", str(small), "--out", str(tmp_path / "one"), "--workers", "1", "--quiet"]) == 0
    assert main(["campaign", str(small), "--out", str(tmp_path / "two"), "--workers", "2", "--batch", "3",
                 "--quiet"]) == 0
    one, two = table(tmp_path / "one"), table(tmp_path / "two")
    assert one.num_rows == 40 and one.column("run").to_pylist() == list(range(40))
    assert set(one.column("status").to_pylist()) == {"ok"}
    assert_same_bits(one, two)
    assert (tmp_path / "one" / TABLE).read_bytes() == (tmp_path / "two" / TABLE).read_bytes()
    assert json.loads((tmp_path / "two" / "campaign.json").read_text())["last_execution"]["workers"] == 2
    # and the metrics are those of the same runs made in this process without Dask
    spec = load_campaign(small)
    bare = run_bare(spec, list(range(40)))
    for m in spec.metric_names:
        got = one.column(m).to_numpy()
        assert np.array_equal(got, np.array([r.metrics[m] for r in bare]), equal_nan=True), m
    values = case_values(spec, range(40))
    assert one.column("lag_s").to_pylist() == [v[1] for v in values]
    # the kept traces: runs 3 and 5, every 4th row
    from server.offline.traces import read_trace_parquet

    names, data, meta = read_trace_parquet(tmp_path / "one" / "traces" / "run_000005.parquet")
    assert sorted(p.name for p in (tmp_path / "one" / "traces").iterdir()) == ["run_000003.parquet",
                                                                                  "run_000005.parquet"]
    assert meta["run"] == "5" and data[1, 0] == pytest.approx(4 * 0.002) and names[0] == "t"


@pytest.mark.slow
def test_a_resumed_campaign_runs_only_what_is_missing_and_gives_the_same_table(small, tmp_path):
    full, cut = tmp_path / "full", tmp_path / "cut"
    assert main(["campaign", str(small), "--out", str(full), "--workers", "1", "--quiet"]) == 0
    assert main(["campaign", str(small), "--out", str(cut), "--workers", "2", "--batch", "4", "--quiet"]) == 0
    # As if the client had saved 5 of the 10 batches of 4 runs and was writing a sixth when interrupted: the
    # parts of runs 4-7, 12-15, ... are kept, the others gone, one of them half written.
    written = pq.read_table(cut / "parts")
    for p in (cut / "parts").iterdir():
        p.unlink()
    for first in range(4, 40, 8):
        kept = written.filter(pc.and_(pc.greater_equal(written["run"], first), pc.less(written["run"], first + 4)))
        assert kept.num_rows == 4
        pq.write_table(kept, cut / "parts" / f"runs_{first:07d}_4.parquet")
    (cut / "parts" / "runs_0000008_4.parquet.tmp").write_bytes(b"PAR1 half a file")
    (cut / TABLE).unlink()
    assert main(["campaign", str(small), "--out", str(cut), "--workers", "2", "--quiet"]) == 0
    doc = json.loads((cut / "campaign.json").read_text())["last_execution"]
    assert doc["runs_done_before"] == 20 and doc["runs_ran"] == 20
    assert_same_bits(table(full), table(cut))
    # nothing left to do: a third start runs nothing and starts no cluster
    assert main(["campaign", str(small), "--out", str(cut), "--quiet"]) == 0
    assert json.loads((cut / "campaign.json").read_text())["last_execution"]["runs_ran"] == 0


@pytest.mark.slow
def test_an_interrupted_campaign_keeps_its_finished_batches_and_resumes(tmp_path):
    n = 4000  # about 8 s on one worker: the client saves a part about every second, so the interrupt
    # after the first part arrives with seconds to spare even on a loaded machine
    camp = tmp_path / "long.toml"
    camp.write_text(CAMPAIGN.replace("RUNS", str(n)))
    out = tmp_path / "out"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "server.cli", "campaign", str(camp), "--out", str(out),
                             "--workers", "1", "--batch", "5"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if (out / "parts").is_dir() and len(list((out / "parts").glob("*.parquet"))) >= 1:
            break
        time.sleep(0.01)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "campaign interrupted" in err and "the same command resumes it" in err and "Traceback" not in err
    done = sum(pq.read_table(p).num_rows for p in (out / "parts").glob("*.parquet"))
    assert 0 < done < n and not (out / TABLE).exists()
    assert main(["campaign", str(camp), "--out", str(out), "--workers", "2", "--quiet"]) == 0
    doc = json.loads((out / "campaign.json").read_text())["last_execution"]
    assert doc["runs_done_before"] == done and doc["runs_ran"] == n - done
    resumed = table(out)
    assert resumed.column("run").to_pylist() == list(range(n))
    # the same runs made afresh, in this process: every metric equal
    spec = load_campaign(camp)
    sample = list(range(0, n, 97))
    for r in run_bare(spec, sample):
        for m in spec.metric_names:
            x, y = resumed.column(m)[r.run].as_py(), r.metrics[m]
            assert x == y or (np.isnan(x) and np.isnan(y)), (r.run, m)


@pytest.mark.slow
def test_the_scheduler_path_runs_on_an_existing_two_worker_cluster(small, tmp_path):
    from distributed import LocalCluster

    assert main(["campaign", str(small), "--out", str(tmp_path / "local"), "--workers", "1", "--quiet"]) == 0
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None) as cluster:
        assert main(["campaign", str(small), "--out", str(tmp_path / "remote"), "--scheduler",
                     cluster.scheduler_address, "--quiet"]) == 0
        # the cluster lives on: the campaign closed its client only
        assert len(cluster.workers) == 2
    doc = json.loads((tmp_path / "remote" / "campaign.json").read_text())["last_execution"]
    assert doc["workers"] == 2 and doc["scheduler"].startswith("tcp://127.0.0.1:")
    assert_same_bits(table(tmp_path / "local"), table(tmp_path / "remote"))


@pytest.mark.slow
def test_the_embedded_cluster_listens_on_loopback_only():
    """Every listening socket of the scheduler (in this process), the nannies and the workers is on 127.0.0.1."""
    import psutil

    me = psutil.Process()
    before = {c.laddr for c in me.net_connections("inet") if c.status == psutil.CONN_LISTEN}
    client, cluster = start_client(2, None)
    try:
        info = client.scheduler_info()
        assert len(info["workers"]) == 2
        assert all(a.startswith("tcp://127.0.0.1:") for a in [cluster.scheduler_address, *info["workers"]])
        listening = []
        for proc in [me, *me.children(recursive=True)]:
            listening += [c.laddr for c in proc.net_connections("inet") if c.status == psutil.CONN_LISTEN]
        new = [a for a in listening if a not in before]
        assert len(new) >= 5  # scheduler, its HTTP server, two nannies, two workers
        assert all(a.ip in ("127.0.0.1", "::1") for a in new), new
    finally:
        client.close()
        cluster.close()


def test_results_of_another_campaign_are_not_mixed_in(small, tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "campaign.json").write_text(json.dumps({"digest": "something else"}))
    assert main(["campaign", str(small), "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err == (f"gearbox-hil: error: {out}: --out: holds the results of another campaign (or this file, its config "
                   "or its scenario changed since); use a new --out, or --restart to replace them\n")
