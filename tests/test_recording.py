"""Signal recording to MF4: exact rows by control request, decimation, globs, kill -9 and signals, errors."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import numpy as np
import pytest

from io_adapters.zmq.client import ServerError
from plant_models.config import ConfigError
from server.recording import read_recording, recording_files
from server.realtime.runtime import load_io_config

from server_support import ServerProcess, wait_until

asammdf = pytest.importorskip("asammdf")


def _recording(folder: str = "rec", chunk_s: float = 0.1, autostart: bool = False, extra: str = "") -> str:
    return (f'[recording]\nfolder = "{folder}"\nchunk_s = {chunk_s}\nautostart = {str(autostart).lower()}\n'
            + extra)


def _closed(client) -> dict:
    def done():
        st = client.status()["recording"]
        return st if not st["active"] and not st["stopping"] and st["writer_state"] == "closed" else None

    st = wait_until(done, 60)
    assert st, client.status()["recording"]
    return st


def test_lockstep_start_stop_records_exactly_the_ticks_between(tmp_path):
    with ServerProcess(tmp_path, mode="lockstep", extra=_recording()) as srv:
        with srv.client() as c:
            c.reset({"p_c1": 16.0, "p_c3": 16.0, "p_c6": 16.0, "engine_torque": 300.0, "load_torque": 3500.0})
            c.step(100)
            job = c.request("record_start", signals=["w_*", "gear", "p_c1"], every=2, name="a")["recording"]
            assert job["signals"] == ["w_1", "w_2", "w_3", "w_4", "w_out", "gear", "p_c1"]
            assert job["chunk_rows"] == 50  # 0.1 s at every 2nd tick of 1 ms
            r = c.step(250)  # ticks 101..350
            c.request("record_stop")
            c.step(50)  # not recorded
            st = _closed(c)
        srv.shutdown()
    folder = tmp_path / "rec"
    assert [f.name for f in recording_files(folder, "a")] == ["a_0001.mf4", "a_0002.mf4", "a_0003.mf4"]
    d = read_recording(folder, "a")
    assert np.array_equal(d["tick"], np.arange(102, 351, 2))  # every 2nd tick, one row each
    assert st["rows"] == 125 and st["lost"] == 0 and st["files"] == 3
    assert np.allclose(d["t"], d["tick"] * 1e-3, rtol=0, atol=1e-12)
    assert d["w_1"][-1] == r.y["w_1"] and d["gear"][-1] == r.y["gear"] == 1  # bit for bit
    assert np.all(d["p_c1"] == 16.0)
    with asammdf.MDF(folder / "a_0001.mf4") as mdf:
        assert mdf.get("w_out").unit == "rad/s" and len(mdf.get("w_out").samples) == 50


def test_request_errors(tmp_path):
    with ServerProcess(tmp_path, mode="lockstep", extra=_recording()) as srv:
        with srv.client() as c:
            for args, code, text in [
                ({"name": "../evil"}, "bad_request", "files stay in the configured folder"),
                ({"signals": ["nope*"]}, "bad_request", "signal 'nope*' matches no output or input"),
                ({"every": 0}, "bad_request", "every must be an integer in 1..1000000"),
            ]:
                with pytest.raises(ServerError) as ei:
                    c.request("record_start", **args)
                assert ei.value.code == code and text in str(ei.value)
            with pytest.raises(ServerError) as ei:
                c.request("record_stop")
            assert ei.value.code == "bad_state" and "no recording is running" in str(ei.value)
            c.request("record_start")
            with pytest.raises(ServerError) as ei:
                c.request("record_start")
            assert "a recording is running (rec)" in str(ei.value)
        srv.shutdown()
    with ServerProcess(tmp_path / "none", mode="lockstep") as srv:
        with srv.client() as c:
            with pytest.raises(ServerError) as ei:
                c.request("record_start")
            assert ei.value.code == "bad_state" and "recording is not configured" in str(ei.value)
        srv.shutdown()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_closes_cleanly_with_one_row_per_tick(tmp_path, sig):
    with ServerProcess(tmp_path, mode="realtime", extra=_recording(chunk_s=0.25, autostart=True)) as srv:
        time.sleep(1.5)
        srv.proc.send_signal(sig)
        srv.proc.wait(timeout=60)
        summary = srv.shutdown()
    rec = summary["recording"]
    d = read_recording(tmp_path / "rec")
    # every tick of the run, in order, none lost: the first ticks before the writer attached come from the ring
    assert rec["lost"] == 0 and rec["writer_state"] == "closed" and rec["writer_exit_code"] == 0
    assert np.array_equal(d["tick"], np.arange(1, summary["tick"] + 1))
    assert rec["rows"] == summary["tick"] == summary["timing"]["ticks"]


def test_kill_9_of_the_writer_loses_at_most_the_last_chunk(tmp_path):
    with ServerProcess(tmp_path, mode="realtime", extra=_recording(chunk_s=0.2, autostart=True)) as srv:
        status_file = tmp_path / "rec" / "rec.json"
        assert wait_until(lambda: status_file.exists() and len(json.loads(status_file.read_text())["files"]) >= 3, 60)
        os.kill(json.loads(status_file.read_text())["pid"], signal.SIGKILL)
        with srv.client() as c:
            st = wait_until(lambda: (lambda s: s if not s["active"] else None)(c.status()["recording"]), 30)
            tick_at_kill = c.status()["tick"]
        srv.shutdown()
    assert st["writer_exit_code"] == -signal.SIGKILL
    files = recording_files(tmp_path / "rec")
    d = read_recording(tmp_path / "rec")  # every file on disk opens whole
    assert len(d["tick"]) == 200 * len(files)
    assert np.array_equal(d["tick"], np.arange(1, len(d["tick"]) + 1))
    assert tick_at_kill - len(d["tick"]) < 4096  # what is lost is the chunk being filled (and the ring's rows)


def test_kill_9_of_the_server_the_writer_saves_what_the_ring_holds(tmp_path):
    with ServerProcess(tmp_path, mode="realtime", extra=_recording(chunk_s=0.25, autostart=True)) as srv:
        status_file = tmp_path / "rec" / "rec.json"
        assert wait_until(lambda: status_file.exists() and len(json.loads(status_file.read_text())["files"]) >= 2, 60)
        srv.proc.kill()
        srv.proc.wait(timeout=30)
        st = wait_until(lambda: (lambda s: s if s["state"] == "closed" else None)(json.loads(status_file.read_text())),
                        30)
    assert st and st["lost"] == 0
    d = read_recording(tmp_path / "rec")
    assert len(d["tick"]) == st["rows"] >= 500
    assert np.array_equal(d["tick"], np.arange(1, st["rows"] + 1))


def test_config_errors(tmp_path):
    p = tmp_path / "io.toml"
    for body, msg in [('every = 0', "recording.every: must be >= 1, got 0"),
                      ('name = "a/b"', "recording.name: must be 1-64 letters"),
                      ('signals = "w_*"', "recording.signals: must be a list of signal names or globs"),
                      ('chunk = 3', "recording.chunk: unknown key")]:
        p.write_text(f"[recording]\n{body}\n")
        with pytest.raises(ConfigError) as ei:
            load_io_config(p)
        assert msg in str(ei.value)
    p.write_text('[recording]\nfolder = "out"\n')
    assert load_io_config(p).recording.folder == Path(tmp_path / "out")
