"""A full disk under an MF4 recording: one clear error line, the writer's state "failed", exact row counts.

The writer is run in this process on a shared state ring of 450 rows with
100-row chunks; asammdf's save writes part of the third file under its
hidden name and then raises ``OSError(ENOSPC)``, as a full disk does.
"""

from __future__ import annotations

import errno
import json
import os

import numpy as np
import pytest

pytest.importorskip("asammdf")

from plant_models.run.ring import StateRing  # noqa: E402
from io_adapters.base import new_tick_info  # noqa: E402
from server.recording import writer  # noqa: E402


def _ring(rows: int) -> StateRing:
    ring = StateRing(2, 0, 0, 0, 1024, ("a", "b"), (), shared=True)
    ti = new_tick_info()
    for k in range(1, rows + 1):
        ring.push(ti, np.array([float(k), -float(k)]), k, 1000 * k, 1e-3 * k)
    return ring


def test_a_full_disk_stops_the_recording_with_one_error_and_exact_counts(tmp_path, monkeypatch, capsys):
    from asammdf import MDF

    ring = _ring(450)
    saves = {"n": 0}
    real_save = MDF.save

    def save(self, dst, *args, **kwargs):
        saves["n"] += 1
        if saves["n"] == 3:  # the disk fills while the third file is written
            with open(dst, "wb") as f:
                f.write(b"MDF     partial")
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_save(self, dst, *args, **kwargs)

    monkeypatch.setattr(MDF, "save", save)
    monkeypatch.setattr(writer.signal, "signal", lambda *a: None)  # the test's own handlers stay
    (tmp_path / ".rec.stop").write_text("450")  # the server's stop: every row up to 450
    job = {"shm": ring.shm_name, "folder": str(tmp_path), "name": "rec", "signals": ["a", "b"], "units": ["", ""],
           "cols": [ring.f_y, ring.f_y + 1], "every": 1, "chunk_rows": 100, "start_seq": 1,
           "parent_pid": os.getppid()}
    try:
        code = writer.main([json.dumps(job)])
    finally:
        ring.close(unlink=True)
    err = capsys.readouterr().err
    assert code == writer.EXIT_WRITE_FAILED
    errors = [ln for ln in err.splitlines() if ": error:" in ln]
    assert len(errors) == 1, err
    assert "rec_0003.mf4" in errors[0] and "No space left on device" in errors[0] and "Traceback" not in err
    st = json.loads((tmp_path / "rec.json").read_text())
    assert st["state"] == "failed" and "No space left on device" in st["error"]
    assert st["files"] == ["rec_0001.mf4", "rec_0002.mf4"]
    assert st["rows"] == st["rows_in_files"] == 200  # what the files hold, exactly
    assert st["lost"] == 250  # the failed chunk's 100 rows and the 150 after the failure
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []  # no hidden partial chunk
    from server.recording import read_recording

    rec = read_recording(tmp_path, "rec")
    assert np.array_equal(rec["a"], np.arange(1.0, 201.0))


def test_the_server_side_status_never_reads_recording_after_the_writer_failed(tmp_path):
    from server.recording import Recorder

    r = Recorder.__new__(Recorder)  # only the status logic: a writer that exited with the failure code
    r.job = {"folder": str(tmp_path), "name": "rec", "signals": ["a"], "every": 1}
    (tmp_path / "rec.json").write_text(json.dumps({"state": "recording", "files": [], "rows": 3, "lost": 0}))
    r.proc, r._stopping, r.started, r.exit_code, r.last = None, None, 1, writer.EXIT_WRITE_FAILED, None
    r.bus_spools = {}
    r.cfg = type("C", (), {"folder": tmp_path})()
    r.last = r._read_status()
    assert r.status()["writer_state"] == "failed"
