"""The warm-up's time-left estimate against the actual end, on cold compiles of the first demo's set.

Each run compiles ``powershift --serve-only`` (what ``./demo.sh`` compiles)
into an empty numba cache, as the first demo does, with its output piped
(a line every few seconds, :mod:`server.cli.warmup_progress`).  For every
line that says ``about N s left`` the actual time left is the time from
that line to the warm-up's ``ready in`` line; the error is
``estimate / actual - 1``.  Below 5 s the line says ``under 5 s left`` or
``finishing`` instead (:func:`server.cli.warmup_progress.time_left_words`):
a bounded claim, counted as right (error 0) when the actual time left is
within the bound, else as ``bound / actual - 1`` (how far short the bound
fell).  The same is computed for the estimate at every compiled function
(the warm-up's ``--record-progress`` file; an estimate there under 5 s
counted as the bound the line would show): denser than the lines a person
sees, the same estimator.

``--record N`` first runs N cold warm-ups and writes their mean shares (the
share of its process's compile time at which each function was finished:
the warm-up compiles in two processes) to
``server/cli/warmup_profile.json``: the profile the estimate scales.  The
runs measured afterwards are other runs than those the profile came from.

Run: ``.venv/bin/python bench/bench_warmup_eta.py [--record N] [--runs N] [--json PATH]``
(30-120 s per run, depending on the load).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _host import host_line, with_host  # noqa: E402  (bench/ is first on the path)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from server.cli.warmup_progress import SHORT_LEFT_S  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
KEY = "powershift --serve-only"
LEFT = re.compile(r"about (\d+) s left|under (\d+) s left|(finishing)")


def cold_warmup(tmp: Path) -> dict:
    """One cold warm-up of the demo's set: its stamped output lines, the record, wall time, load before."""
    cache, record = tmp / "cache", tmp / "record.json"
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache), "PYTHONUNBUFFERED": "1"}
    load = os.getloadavg()[0]
    began = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "server.cli.warmup", "powershift", "--serve-only",
                             "--record-progress", str(record)], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, bufsize=1)
    lines = [(time.monotonic() - began, line.rstrip("\n")) for line in proc.stdout]
    if proc.wait():
        raise SystemExit("the warm-up failed:\n" + "\n".join(text for _, text in lines))
    return {"lines": lines, "record": json.loads(record.read_text()), "wall_s": time.monotonic() - began,
            "load_before": load}


def claim_error(estimate_s: float, actual_s: float, bounded: bool) -> float:
    """Relative error of a time-left claim: ``estimate / actual - 1``; a bound (``under N s left``,
    ``finishing``: ``estimate_s`` is then the bound) is right (0) when the actual time left is within it."""
    if bounded:
        return 0.0 if actual_s <= estimate_s else estimate_s / actual_s - 1
    return estimate_s / actual_s - 1


def errors(run: dict) -> tuple[list[float], list[float]]:
    """Relative errors of the shown estimates (lines) and of those at every function (record), in the last
    90 % of the compile (the first estimates rest on a few functions)."""
    end = next(t for t, text in run["lines"] if "ready in" in text)
    first = next((t for t, text in run["lines"] if "first start" in text), 0.0)
    shown = []
    for t, text in run["lines"]:
        m = LEFT.search(text)
        if m and t - first >= 0.1 * (end - first) and end - t > 0:
            about, under, _ = m.groups()
            shown.append(claim_error(float(about or under or SHORT_LEFT_S), end - t, about is None))
    rec = run["record"]
    dense = [claim_error(max(left, SHORT_LEFT_S), rec["end_s"] - t, left < SHORT_LEFT_S)
             for t, _, left in rec["done"]
             if left is not None and t >= 0.1 * rec["end_s"] and rec["end_s"] - t > 0.5]
    return shown, dense


def record_profile(runs: list[dict]) -> dict:
    """Mean shares of the compile's wall time at which each function was finished, and the stages' totals."""
    shares: dict[str, list[float]] = {}
    for run in runs:
        done = run["record"]["done"]
        ends: dict[str, float] = {}  # each process on its own timeline: the time its last function was finished
        for t, key, _ in done:
            ends[key.split(":")[0]] = max(t, ends.get(key.split(":")[0], 0.0))
        for t, key, _ in done:
            shares.setdefault(key, []).append(t / ends[key.split(":")[0]])
    totals = runs[0]["record"]["totals"]
    assert all(run["record"]["totals"] == totals for run in runs), [run["record"]["totals"] for run in runs]
    return {"totals": totals, "shares": {k: round(statistics.fmean(v), 4) for k, v in sorted(shares.items())
                                         if len(v) == len(runs)}}


def summary(values: list[float]) -> dict:
    if not values:
        return {"n": 0}
    a = sorted(abs(v) for v in values)
    return {"n": len(values), "within_30pct": sum(v <= 0.30 for v in a) / len(a),
            "median_abs_err": statistics.median(a), "p90_abs_err": a[int(0.9 * (len(a) - 1))],
            "median_err": statistics.median(values), "worst_err": max(values, key=abs)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--record", type=int, default=0, metavar="N", help="record the profile from N runs first")
    ap.add_argument("--runs", type=int, default=3, help="runs to measure the estimate on")
    ap.add_argument("--json", type=Path, help="write the results here")
    args = ap.parse_args()
    if args.record:
        recorded = []
        for i in range(args.record):
            with tempfile.TemporaryDirectory() as tmp:
                recorded.append(cold_warmup(Path(tmp)))
            print(f"profile run {i + 1}: {recorded[-1]['wall_s']:.1f} s (load {recorded[-1]['load_before']:.2f})")
        path = ROOT / "server" / "cli" / "warmup_profile.json"
        profiles = json.loads(path.read_text()) if path.exists() else {}
        profiles[KEY] = record_profile(recorded)
        path.write_text(json.dumps(profiles, indent=1, sort_keys=True) + "\n")
        print(f"profile of {KEY!r} written to {path.relative_to(ROOT)}")
    results = []
    for i in range(args.runs):
        with tempfile.TemporaryDirectory() as tmp:
            run = cold_warmup(Path(tmp))
        shown, dense = errors(run)
        n_lines = sum(1 for _, text in run["lines"])
        times = [0.0] + [t for t, _ in run["lines"]]
        gap = max(b - a for a, b in zip(times, times[1:]))
        results.append({"wall_s": run["wall_s"], "load_before": run["load_before"], "lines": n_lines,
                        "largest_gap_s": gap, "shown": shown, "dense": dense})
        print(f"run {i + 1}: {run['wall_s']:.1f} s, load {run['load_before']:.2f}, {n_lines} lines, largest gap "
              f"{gap:.1f} s; shown estimates {summary(shown)}; at every function {summary(dense)}")
    shown = [e for r in results for e in r["shown"]]
    dense = [e for r in results for e in r["dense"]]
    print(f"all runs: shown {summary(shown)}")
    print(f"all runs: at every function {summary(dense)}")
    if args.json:
        args.json.write_text(json.dumps(with_host({"runs": results, "shown": summary(shown),
                                                   "dense": summary(dense)}), indent=1))


if __name__ == "__main__":
    print(host_line())
    main()
