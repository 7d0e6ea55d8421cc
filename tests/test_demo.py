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

from server.cli import warmup_progress

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
    assert re.search(r"warmup: compiling \d+ of \d+: core \d+/\d+, server \d+/\d+, plant \d+/\d+ \(\d+ s so far",
                     r.stdout), "no compile progress (n of m, per stage) shown"
    assert "shift gear 1 -> gear 3: done" in r.stdout
    assert "demo: done:" in r.stdout and "timing summary (realtime mode)" not in r.stdout  # it is in the log:
    assert "timing summary (realtime mode)" in (clone / "out" / "demo" / "server.log").read_text()
    assert "FAILED" not in out and "Traceback" not in out
    assert re.search(r"demo: timing: \d+ ticks, .* missed after the start-up grace \(\d+\.\d %\)", r.stdout)
    status = json.loads((clone / "out" / "demo" / "server_status.json").read_text())
    assert status["timing_check"]["tolerance_pct"] == 5.0
    # a busy machine (the check's problems) is a warning with the numbers, not a failure
    assert ("demo: WARNING: the machine was too busy" in out) == bool(status["timing_check"]["problems"])
    assert status["timing"]["ticks"] > 1000
    assert (clone / "out" / "demo" / "closed_loop_swap.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _silence_bound_s(t: float) -> float:
    """The longest silence after a line at ``t`` s that still counts as alive: three times the interval the
    progress aims at (warmup_progress.PIPE_EVERY_S, or PIPE_SHARE of the time so far) and 10 s more.

    Generous on purpose: the intervals are what the set-up and the warm-up aim at, and a busy machine (a
    compile step holding the interpreter's lock, a descheduled process) delays lines; a hung set-up is
    still caught."""
    return 3 * max(warmup_progress.PIPE_EVERY_S, warmup_progress.PIPE_SHARE * t) + 10.0


def test_the_first_demo_stays_alive_while_it_sets_up_and_compiles(first_run):
    """Set-up (its first part, then the background install's lines) and compiling: lines keep coming."""
    _, _, r, _, stamped = first_run
    if r.returncode != 0:
        pytest.skip("the first demo run failed (reported by the test above)")
    end = next(t for t, line in stamped if line.startswith("warmup: ready in"))
    shown = [(t, line) for t, line in stamped if t <= end]
    times = [0.0] + [t for t, _ in shown]
    for (a, b), line in zip(zip(times, times[1:]), [""] + [ln for _, ln in shown]):
        assert b - a <= _silence_bound_s(a), f"silent for {b - a:.1f} s after {a:.1f} s: {line!r}"
    began = next(t for t, line in shown if "first start with this code" in line)
    compiling = [line for t, line in shown if t >= began and line.startswith("warmup: compiling ")]
    assert len(compiling) >= 1 + int((end - began) / _silence_bound_s(end)), compiling  # and their count
    assert "[set-up] installing what compiling needs first: numpy numba msgpack" in r.stdout
    assert re.search(r"\[set-up\] gearbox-hil\[plot\] installed \(in the background, \d+\.\d s\)", r.stdout)


def test_the_first_demo_is_short_and_names_no_internal_function(first_run):
    """At most 60 lines for the whole first demo, and no compiled function's name (they are for -v)."""
    _, _, r, _, _ = first_run
    if r.returncode != 0:
        pytest.skip("the first demo run failed (reported by the test above)")
    out = r.stdout + r.stderr
    print(f"the first demo wrote {len(out.splitlines())} lines")
    assert len(out.splitlines()) <= 60, out
    profile = warmup_progress.load_profile(warmup_progress.profile_key(["powershift"], serve_only=True))
    names = {key.split(":")[2] for key in profile["shares"]}
    named = sorted(n for n in names if re.search(rf"(?<![\w./-]){re.escape(n)}(?![\w.])", out))
    assert not named, (named, out)
    counts = [tuple(map(int, m)) for m in re.findall(r"\b(?:core|server|plant) (\d+)/(\d+)", out)]
    assert counts and all(n <= total for n, total in counts), counts


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


class _Hogs:
    """``with _Hogs():`` a busy loop per core (``stress --cpu N``), each its own process, stopped at the end."""

    def __enter__(self):
        code = "while True:\n    pass"
        self.procs = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(os.cpu_count() or 1)]
        return self

    def __exit__(self, *exc):
        for proc in self.procs:
            proc.kill()
            proc.wait()


def test_demo_under_a_cpu_hog_on_each_core_succeeds_and_strict_timing_decides_by_its_numbers(first_run):
    """With a busy loop on every core the demo (set-up done, the code compiled) exits 0 when the shift is done,
    warning iff the run fell outside its timing tolerance; ``--strict-timing`` fails it exactly then.

    Whether a hog pushes the run outside the tolerance depends on the machine (the server may get a
    real-time priority, the kernel may spread the load): the verdict is checked against the run's own
    numbers, both ways, not assumed.  (The first run's compile is not repeated under load here: the
    real-time run starts after it, and its verdict depends on the real-time run alone.)"""
    clone, env, r, _, _ = first_run
    if r.returncode != 0:
        pytest.skip("the first demo run failed (reported by the test above)")
    status_file = clone / "out" / "demo" / "server_status.json"
    for strict in (False, True):
        status_file.unlink(missing_ok=True)
        with _Hogs():
            proc = subprocess.run(["./demo.sh"] + (["--strict-timing"] if strict else []), cwd=clone, env=env,
                                  capture_output=True, text=True, timeout=900)
        out = proc.stdout + proc.stderr
        assert "shift gear 1 -> gear 3: done" in proc.stdout, out
        problems = json.loads(status_file.read_text())["timing_check"]["problems"]
        warned = [ln for ln in proc.stderr.splitlines() if ln.startswith("demo: WARNING:")]
        failed = [ln for ln in proc.stderr.splitlines() if ln.startswith("demo: FAILED")]
        print(f"under a hog per core, strict={strict}: exit {proc.returncode}, timing problems {problems}")
        if strict:
            assert (proc.returncode, len(failed)) == ((1, 1) if problems else (0, 0)), out
            assert not warned, out
        else:
            assert proc.returncode == 0 and not failed, out
            assert len(warned) == (1 if problems else 0), out
        assert "Traceback" not in out, out
