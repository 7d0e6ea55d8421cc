"""The realtime timing summary says when its extremes happened and whether in the start-up grace; a quiet log.

A new user's summary showed a maximum lateness of 3.7 ms that came from the
start-up grace (caches warming up), without a word; and the server's log
opened with numexpr's thread count.
"""

from __future__ import annotations

import os
import subprocess
import sys

from server.telemetry import C_MISSED, Telemetry, format_summary, record_tick

from server_support import ROOT


def _run(tel: Telemetry, lateness_ns: dict[int, int], tet_ns: dict[int, int], missed_after: dict[int, int]):
    """3000 ticks at 1 kHz: 10 us late and 20 us long except where given; ``missed_after[k]`` ticks missed after k."""
    c, h, s = tel.counters, tel.hist, tel.samples
    for k in range(1, 3001):
        record_tick(c, h, s, lateness_ns.get(k, 10_000), tet_ns.get(k, 20_000), 5_000, 0, True)
        c[C_MISSED] += missed_after.get(k, 0)
    tel.add_run_time(3_000_000_000)


def test_the_summary_names_the_time_of_each_maximum_and_the_grace():
    tel = Telemetry(1_000_000)
    # the largest lateness at the 100th deadline (0.1 s, in the grace); the largest TET at the 2500th tick,
    # whose deadline is 2505 periods after the start: 5 deadlines were missed after tick 200
    _run(tel, {100: 3_700_000}, {2500: 500_000}, {200: 5})
    s = tel.summary()
    assert s["lateness_max_at_s"] == 0.1 and s["lateness_us"]["max"] == 3700.0
    assert s["tet_max_at_s"] == 2.505 and s["tet_us"]["max"] == 500.0
    text = format_summary(s, "realtime", 1.0)
    assert ("  maxima at        lateness t = 0.100 s (in the start-up grace), TET t = 2.505 s "
            "(start-up grace: the first 1 s)") in text.splitlines()
    # a maximum after the grace is not said to be in it
    tel = Telemetry(1_000_000)
    _run(tel, {1500: 3_700_000}, {}, {})
    assert "lateness t = 1.500 s, TET" in format_summary(tel.summary(), "realtime", 1.0)
    # untimed modes have no deadlines: no such line
    tel = Telemetry(1_000_000)
    record_tick(tel.counters, tel.hist, tel.samples, 0, 5_000, 3_000, 0, False)
    assert tel.summary()["lateness_max_at_s"] is None
    assert "maxima at" not in format_summary(tel.summary(), "lockstep", None)


def test_a_served_run_prints_the_maxima_line_and_no_numexpr_log_line(tmp_path):
    r = subprocess.run([sys.executable, "-m", "server.cli", "serve", "powershift", "--io", "io_can", "--zmq-port",
                        "0", "--can-share", "0", "--duration", "1.5"], cwd=ROOT, capture_output=True, text=True,
                       timeout=300, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert r.returncode == 0, r.stderr
    maxima = [ln for ln in r.stdout.splitlines() if ln.startswith("  maxima at ")]
    assert len(maxima) == 1 and maxima[0].endswith("(start-up grace: the first 1 s)"), r.stdout
    assert " INFO " in r.stderr  # the log is on (not --quiet) ...
    assert "numexpr" not in r.stderr, r.stderr  # ... without third-party start-up noise
    assert r.stderr.splitlines()[0].split()[3].startswith("gearbox_hil"), r.stderr
