"""``./demo.sh`` on a fresh clone: set-up, compiling with an empty cache, the server, the shift.

A new user's first command.  The first test clones the repository under
test into a temporary folder and runs ``./demo.sh`` there as a new user
would: a new virtual environment, an empty numba cache (so everything
compiles, about a minute on two cores), the real-time server, the
controller's shift.  It must succeed the first time and say what it is
doing, with the real-time run's timing in numbers; on a busy machine that
timing is a WARNING, never a failure of a shift that worked.  The others
reuse that clone with a real-time run that misses too many ticks: the
server is stopped (SIGSTOP) for 0.6 s after its first second (the
start-up grace, whose missed ticks the check leaves out), which misses
about 600 of its 1 kHz ticks in a run of about 3 s.  The demo warns and
succeeds; with ``--strict-timing`` (CI) it fails with the reason.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow


def _env(tmp: Path) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "GEARBOX_HIL_VENV", "VIRTUAL_ENV", "NUMBA_CACHE_DIR", "PYTHONHOME")}
    env["NUMBA_CACHE_DIR"] = str(tmp / "numba-cache")  # empty: the first run compiles everything
    env["PYTHON"] = sys.executable  # the interpreter the new virtual environment is made from
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


@pytest.fixture(scope="module")
def first_run(tmp_path_factory):
    """A fresh clone and the result of its first ``./demo.sh`` (its output lines time-stamped as they came)."""
    tmp = tmp_path_factory.mktemp("fresh")
    clone = tmp / "clone"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True, timeout=300)
    env = _env(tmp)
    began = time.monotonic()
    proc = subprocess.Popen(["./demo.sh"], cwd=clone, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, bufsize=1)
    stamped = [(time.monotonic() - began, line) for line in proc.stdout]
    out = "".join(line for _, line in stamped)
    r = subprocess.CompletedProcess(proc.args, proc.wait(timeout=3600), stdout=out, stderr="")
    return clone, env, r, time.monotonic() - began, stamped


def test_demo_succeeds_the_first_time_on_a_fresh_clone_with_an_empty_cache(first_run):
    clone, _, r, took, _ = first_run
    out = r.stdout + r.stderr
    assert r.returncode == 0, f"demo.sh failed (exit {r.returncode}) after {took:.0f} s:\n{out[-6000:]}"
    steps = ["demo: [1/4] set-up", "demo: [2/4] compiling", "demo: [3/4] starting the server",
             "demo: [4/4] shifting gear 1 -> gear 3"]
    positions = [r.stdout.find(s) for s in steps]
    assert all(p >= 0 for p in positions) and positions == sorted(positions), r.stdout
    assert "[set-up] creating the virtual environment" in r.stdout
    assert re.search(r"core \d+/\d+: ", r.stdout), "no compile progress (n/m) shown"
    assert "shift gear 1 -> gear 3: done" in r.stdout
    assert "timing summary (realtime mode)" in r.stdout and "demo: done:" in r.stdout
    assert "FAILED" not in out and "Traceback" not in out
    assert re.search(r"demo: timing: \d+ ticks, .* missed after the start-up grace \(\d+\.\d %\)", r.stdout)
    status = json.loads((clone / "out" / "demo" / "server_status.json").read_text())
    assert status["timing_check"]["tolerance_pct"] == 5.0
    # a busy machine (the check's problems) is a warning with the numbers, not a failure
    assert ("demo: WARNING: the machine was too busy" in out) == bool(status["timing_check"]["problems"])
    assert status["timing"]["ticks"] > 1000
    assert (clone / "out" / "demo" / "closed_loop_swap.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_first_demo_is_never_silent_for_more_than_2_s_while_it_sets_up_and_compiles(first_run):
    """Set-up (its first part, then the background install's lines) and compiling: a line at least every 2 s."""
    _, _, r, _, stamped = first_run
    if r.returncode != 0:
        pytest.skip("the first demo run failed (reported by the test above)")
    end = next(t for t, line in stamped if line.startswith("warmup: ready in"))
    times = [0.0] + [t for t, _ in stamped if t <= end]
    gaps = [b - a for a, b in zip(times, times[1:])]
    assert max(gaps) <= 2.0, [line for t, line in stamped if t <= end][gaps.index(max(gaps)) - 1:][:3]
    assert "[set-up] installing what compiling needs first: numpy numba msgpack" in r.stdout
    assert re.search(r"\[set-up\] gearbox-hil\[plot\] installed \(in the background, \d+\.\d s\)", r.stdout)


def _demo_with_missed_ticks(clone, env, *args):
    """``./demo.sh ARGS`` with its server stopped for 0.6 s after the start-up grace: (proc, out, err)."""
    ready = clone / "out" / "demo" / "server_ready.json"
    ready.unlink(missing_ok=True)  # the previous run's
    proc = subprocess.Popen(["./demo.sh", *args], cwd=clone, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 600
        while not ready.exists():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.01)
        pid = json.loads(ready.read_text())["pid"]
        time.sleep(1.2)  # past the loop's start-up grace (1 s), whose missed ticks the check leaves out
        os.kill(pid, signal.SIGSTOP)  # the loop misses every deadline of the next 0.6 s
        time.sleep(0.6)
        os.kill(pid, signal.SIGCONT)
        out, err = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc, out, err


def test_demo_warns_and_succeeds_when_the_machine_is_too_busy_for_its_timing(first_run):
    clone, env, r, _, _ = first_run
    if r.returncode != 0:
        pytest.skip("the first demo run failed (reported by the test above)")
    proc, out, err = _demo_with_missed_ticks(clone, env)
    assert proc.returncode == 0, out + err
    assert "shift gear 1 -> gear 3: done" in out and "FAILED" not in out + err
    warn = [ln for ln in err.splitlines() if ln.startswith("demo: WARNING:")]
    assert len(warn) == 1 and "--strict-timing" in warn[0], err
    assert re.search(r"\d+\.\d % of the ticks were missed after the start-up grace \(\d+ of \d+\)", warn[0])


def test_demo_fails_with_the_reason_under_strict_timing_when_the_run_misses_too_many_ticks(first_run):
    clone, env, r, _, _ = first_run
    if r.returncode != 0:
        pytest.skip("the first demo run failed (reported by the test above)")
    proc, out, err = _demo_with_missed_ticks(clone, env, "--strict-timing")
    assert proc.returncode == 1, out + err
    assert "shift gear 1 -> gear 3: done" in out  # the shift itself still worked
    lines = [ln for ln in err.splitlines() if ln.startswith("demo: FAILED")]
    assert len(lines) == 1, err
    assert re.fullmatch(r"demo: FAILED: the real-time run fell outside the timing tolerance: .*\d+\.\d % of the "
                        r"ticks were missed after the start-up grace \(\d+ of \d+\).*", lines[0]), lines[0]
    status = json.loads((clone / "out" / "demo" / "server_status.json").read_text())
    assert status["timing"]["missed_ticks"] >= 400
