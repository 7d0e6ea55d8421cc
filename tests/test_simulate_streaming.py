"""Long offline runs never allocate their whole trace: ``simulate`` streams it to the file in chunks.

A one-day scenario (the longest a scenario may be) of the Powershift at
dt = 1 ms would need a 36 GiB trace; it ended in ``Unable to allocate 36.0
GiB``, exit 1.  Now the run writes its trace a chunk at a time with its
memory bounded, and the streamed file equals, bit for bit, the one written
from a whole trace.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from plant_models.registry import load_plant
from server import trace_stream
from server.cli import main
from server.traces import read_trace, read_trace_parquet

from server_support import ROOT, wait_until

DAY = "duration_s = 86400.0\ndt_s = 0.001\nleave_at_default = [\"p_c2\", \"p_c4\", \"p_c5\", \"p_c7\", \"p_c8\"]\n" \
      "[inputs]\np_c1 = 16.0\np_c3 = 16.0\np_c6 = 16.0\nengine_torque = 300.0\nload_torque = 3500.0\n"


def test_the_size_rule():
    plant = load_plant("powershift")
    n = 86_400_000
    assert trace_stream.trace_bytes(plant, n, 1) == (n + 1) * (plant.n_out + 1) * 8 > 30 * 2**30
    assert trace_stream.needs_streaming(plant, n, 1)
    every = trace_stream.every_to_fit(plant, n, 1)
    assert not trace_stream.needs_streaming(plant, n, every) and trace_stream.needs_streaming(plant, n, every - 1)
    assert not trace_stream.needs_streaming(plant, 1200, 1)


@pytest.mark.parametrize("fmt, every", [("csv", 1), ("csv", 7), ("parquet", 1), ("parquet", 7)])
def test_a_streamed_trace_equals_the_whole_one_bit_for_bit(tmp_path, monkeypatch, capsys, fmt, every):
    args = ["simulate", "powershift", "--scenario", "powershift_single_swap", "--format", fmt, "--every",
            str(every)]
    assert main(args + ["--out", str(tmp_path / "whole"), "--quiet"]) == 0
    monkeypatch.setattr(trace_stream, "TRACE_MEMORY_BYTES", 1000)  # every trace streams
    monkeypatch.setattr(trace_stream, "CHUNK_ROWS", 50)  # in chunks of 50 rows
    assert main(args + ["--out", str(tmp_path / "streamed")]) == 0
    err = capsys.readouterr().err
    assert "written to" in err and "as the run goes" in err, err
    name = f"trace.{fmt}"
    if fmt == "csv":
        assert (tmp_path / "streamed" / name).read_bytes() == (tmp_path / "whole" / name).read_bytes()
    else:
        a, b = read_trace_parquet(tmp_path / "whole" / name), read_trace_parquet(tmp_path / "streamed" / name)
        assert a[0] == b[0] and a[2] == b[2] and np.array_equal(a[1], b[1])
    whole = json.loads((tmp_path / "whole" / "events.json").read_text())
    streamed = json.loads((tmp_path / "streamed" / "events.json").read_text())
    for doc in (whole, streamed):
        doc.pop("wall_time_s"), doc.pop("realtime_factor")
    assert streamed == whole and whole["rows"] == len(read_trace(tmp_path / "whole" / name)[1])


def test_plotting_a_trace_too_large_for_memory_is_refused_up_front_naming_every(tmp_path, capsys):
    sc = tmp_path / "day.toml"
    sc.write_text(DAY)
    plant = load_plant("powershift")
    every = trace_stream.every_to_fit(plant, 86_400_000, 1)
    gib = trace_stream.trace_bytes(plant, 86_400_000, 1) / 2**30
    assert 36 < gib < 37
    assert main(["simulate", "powershift", "--scenario", str(sc), "--out", str(tmp_path / "o"), "--plot"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"gearbox-hil: error: --plot: the trace of 86400000 steps is too large to plot from memory "
                   f"({gib:.1f} GiB); keep every N-th step with --every {every} or more"], err
    assert not (tmp_path / "o").exists()


def _peak_rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")


def test_a_one_day_run_streams_with_bounded_memory(tmp_path):
    """The run of the issue, stopped with Ctrl-C after some chunks: memory stays far below the trace's size."""
    sc = tmp_path / "day.toml"
    sc.write_text(DAY)
    out = tmp_path / "out"
    p = subprocess.Popen([sys.executable, "-m", "server.cli", "simulate", "powershift", "--scenario", str(sc),
                          "--out", str(out)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        path = out / "trace.parquet"
        # a few chunks written (the run takes minutes; a few seconds of it are enough)
        grew = wait_until(lambda: p.poll() is not None or (path.exists() and path.stat().st_size > 4e6), 60)
        assert grew and p.poll() is None, p.communicate()
        time.sleep(1.0)
        peak_kb = _peak_rss_kb(p.pid)
        p.send_signal(signal.SIGINT)
        stdout, stderr = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 130, stderr
    assert peak_kb < 1_000_000, f"peak RSS {peak_kb} kB"  # the whole trace would be 36 GiB
    assert "Traceback" not in stderr and "written to" in stderr, stderr
    names, data, meta = read_trace_parquet(path)
    doc = json.loads((out / "events.json").read_text())
    assert doc["complete"] is False and doc["rows"] == len(data) > 2 * trace_stream.CHUNK_ROWS
    assert np.array_equal(data[:, 0], np.arange(len(data)) * 0.001)  # every step, none lost between chunks
    assert names[0] == "t" and meta["plant"] == "powershift"
