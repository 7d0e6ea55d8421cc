"""``gearbox-hil simulate --every N --format csv|parquet|auto``: traces that read back bit for bit, and the summary."""

from __future__ import annotations

import json

import numpy as np
import pytest

from plant_models.config import repo_root
from plant_models.registry import load_plant
from server.cli import main
from server.scenario import load_scenario
from server.simulate import run_offline
from server.traces import AUTO_PARQUET_VALUES, read_trace, read_trace_csv, read_trace_parquet

ROOT = repo_root()
DCT = ("configs/dct.toml", "scenarios/dct_upshift.toml")


def simulate(out, *extra, config=DCT[0], scenario=DCT[1]) -> int:
    return main(["simulate", str(ROOT / config), "--scenario", str(ROOT / scenario), "--out", str(out), *extra])


def reference(every=1):
    plant = load_plant(ROOT / DCT[0])
    return plant, run_offline(plant, load_scenario(ROOT / DCT[1]).compile(plant), every=every)


def test_parquet_trace_reads_back_bit_for_bit_with_units_and_run_metadata(tmp_path):
    assert simulate(tmp_path, "--format", "parquet", "--quiet") == 0
    assert not (tmp_path / "trace.csv").exists()
    names, data, meta = read_trace_parquet(tmp_path / "trace.parquet")
    plant, tr = reference()
    assert names == ["t"] + tr.names
    assert np.array_equal(data[:, 0], tr.time) and np.array_equal(data[:, 1:], tr.values)
    assert meta["plant"] == "dct" and meta["every"] == "1" and float(meta["dt_s"]) == 0.001
    import pyarrow.parquet as pq

    schema = pq.read_schema(tmp_path / "trace.parquet")
    assert schema.field("t").metadata[b"unit"] == b"s"
    assert schema.field("w_engine").metadata[b"unit"] == plant.output_signal("w_engine").unit.encode()
    doc = json.loads((tmp_path / "events.json").read_text())
    assert doc["trace_file"] == "trace.parquet" and doc["rows"] == len(tr.time)


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_every_n_keeps_every_nth_step_and_the_last_in_either_format(fmt, tmp_path):
    assert simulate(tmp_path, "--every", "300", "--format", fmt, "--quiet") == 0
    names, data = read_trace(tmp_path / f"trace.{fmt}")
    _, full = reference()
    steps = list(range(0, 4001, 300)) + [4000]
    assert data.shape == (len(steps), 1 + len(full.names))
    assert np.array_equal(data[:, 0], full.time[steps]) and np.array_equal(data[:, 1:], full.values[steps])
    doc = json.loads((tmp_path / "events.json").read_text())
    assert doc["every"] == 300 and doc["steps"] == 4000 and doc["rows"] == len(steps)
    assert len(doc["events"]) == 8  # events are never decimated


def test_auto_writes_csv_for_small_runs_and_parquet_for_large_ones(tmp_path):
    assert simulate(tmp_path / "small", "--quiet") == 0
    assert (tmp_path / "small" / "trace.csv").exists()
    # 4000 steps at 50 us x 17 outputs is under the threshold; at --dt 5e-5 the DCT run has 80001 rows
    plant, tr = reference()
    rows_fine = 4.0 / 5e-5 + 1
    assert rows_fine * (1 + len(tr.names)) > AUTO_PARQUET_VALUES or pytest.skip("threshold above this run")
    assert simulate(tmp_path / "large", "--dt", "5e-5", "--quiet") == 0
    assert (tmp_path / "large" / "trace.parquet").exists() and not (tmp_path / "large" / "trace.csv").exists()
    assert simulate(tmp_path / "forced", "--dt", "5e-5", "--format", "csv", "--quiet") == 0
    names, data = read_trace_csv(tmp_path / "forced" / "trace.csv")
    names_p, data_p = read_trace(tmp_path / "large" / "trace.parquet")
    assert names == names_p and np.array_equal(data, data_p)


def test_the_summary_gives_the_steps_rate_and_the_whole_wall_time(tmp_path, capsys):
    assert simulate(tmp_path, "--every", "10") == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("dct: 4000 steps of 0.001 s (4 s simulated) in ") and "x real time); 8 events" in out[0]
    assert out[1].startswith(f"wrote {tmp_path / 'trace.csv'} (401 rows), ")
    assert " s wall in all (set-up " in out[2] and ", run " in out[2] and ", writing " in out[2]


@pytest.mark.parametrize("argv,expected", [
    (["--every", "0"], "argument --every: must be at least 1, got 0"),
    (["--every", "2.5"], "argument --every: not a whole number: '2.5'"),
    (["--format", "mf4"], "argument --format: invalid choice: 'mf4'"),
])
def test_bad_trace_options_exit_2_with_one_line(argv, expected, tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        simulate(tmp_path, *argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert expected in err and "Traceback" not in err


def test_on_a_terminal_simulate_shows_progress_with_simulated_time_and_rate(tmp_path):
    """The bar is drawn on a terminal only (a pseudo-terminal here); piped output gets the summary alone."""
    import os
    import pty
    import subprocess
    import sys

    args = [sys.executable, "-m", "server.cli", "simulate", str(ROOT / DCT[0]), "--scenario", str(ROOT / DCT[1]),
            "--dt", "5e-5", "--every", "100", "--out", str(tmp_path / "tty")]
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="120")
    leader, follower = pty.openpty()
    proc = subprocess.Popen(args, cwd=ROOT, env=env, stdin=follower, stdout=subprocess.PIPE, stderr=follower)
    os.close(follower)
    seen = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # the terminal closed with the process
            break
        if not chunk:
            break
        seen += chunk
    out, _ = proc.communicate(timeout=120)
    os.close(leader)
    assert proc.returncode == 0
    text = seen.decode(errors="replace")
    assert "dct" in text and "s simulated" in text and "x real time" in text, text[-500:]
    assert b"steps of 5e-05 s" in out  # the summary on stdout
    piped = subprocess.run(args[:-1] + [str(tmp_path / "pipe")], cwd=ROOT, env=env, capture_output=True, text=True,
                           timeout=120)
    assert piped.returncode == 0 and "simulated" not in piped.stderr and "x real time" not in piped.stderr


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process, s (Linux /proc)."""
    import os

    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_ctrl_c_ends_a_long_run_early_and_keeps_the_trace_so_far(tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    long = tmp_path / "long.toml"
    long.write_text((ROOT / DCT[1]).read_text().replace("duration_s = 4.0", "duration_s = 600.0"))
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "server.cli", "simulate", str(ROOT / DCT[0]), "--scenario",
                             str(long), "--dt", "5e-5", "--every", "1000", "--out", str(out)], cwd=ROOT,
                            env=dict(os.environ, PYTHONPATH=str(ROOT)), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    # start-up takes about 1.5 s of CPU time (imports, the plant from the cache), the 12 million steps
    # more than 10 s: interrupt after 3.5 s of the process's own CPU time, however busy the host is
    # (a wall-clock sleep interrupted a start-up slowed down by other work)
    deadline = time.monotonic() + 120
    while _cpu_seconds(proc.pid) < 3.5 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    assert "simulate interrupted at t = " in stderr and "Traceback" not in stderr
    doc = json.loads((out / "events.json").read_text())
    assert doc["complete"] is False and 0 < doc["steps"] < 12_000_000
    names, data = read_trace(out / "trace.csv")
    assert data[-1, 0] == pytest.approx(doc["steps"] * 5e-5) and data.shape[0] == doc["rows"]
    # what was kept is the run itself: the same rows as a run of that length
    plant = load_plant(ROOT / DCT[0])
    full = run_offline(plant, load_scenario(ROOT / DCT[1]).compile(plant, 5e-5), every=1000)  # the first 4 s
    n = min(len(full.time), data.shape[0])
    assert np.array_equal(data[:n, 1:], full.values[:n])
