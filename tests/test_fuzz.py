"""The fuzz harness of bench/fuzz.py, short: every ZeroMQ socket and CAN frames, a few hundred messages a class.

The full run (10,000 messages per class) is ``python bench/fuzz.py``; its
figures are in BENCHMARKS.md.  Every run asserts the server alive, no plant
state change from rejected input, and counters equal to what was sent.
"""

from __future__ import annotations

import json
import subprocess
import sys

from server_support import ROOT


def test_short_fuzz_of_every_socket_and_can_frames(tmp_path):
    out = tmp_path / "fuzz.json"
    r = subprocess.run([sys.executable, "bench/fuzz.py", "--n", "400", "--seed", "5", "--json", str(out)],
                       cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    res = json.loads(out.read_text())
    assert res["ok"] and res["server"] == {"alive_after": True, "exit_code": 0}
    for k in ("commands", "control", "state", "can"):
        assert res[k]["sent"] == 400 and res[k]["failures"] == []
    assert sum(res["commands"]["by_reason"].values()) == 400
    assert sum(res["control"]["by_code"].values()) == 400
    assert sum(res["can"]["by_reason"].values()) == 400
    assert res["canfd"]["sent"] == 400 and res["canfd"]["failures"] == []


def test_short_fuzz_of_can_fd_frames(tmp_path):
    """CAN FD frames of the DCT's FD set (E2E profile 5, 64 bytes): every defect kind, counted exactly."""
    out = tmp_path / "fuzz.json"
    r = subprocess.run([sys.executable, "bench/fuzz.py", "--only", "canfd", "--n", "500", "--seed", "5",
                        "--json", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    res = json.loads(out.read_text())
    assert res["ok"] and res["canfd"]["sent"] == 500 and res["canfd"]["failures"] == []
    assert {k: v for k, v in res["canfd"]["by_reason"].items() if v} == \
        {"crc": 100, "dlc": 100, "unknown_id": 100, "counter_frozen": 100, "out_of_range": 100}
