#!/usr/bin/env python3
"""Recording every output at 1 kHz to MF4 against no recording, in the same run.

Runs ``gearbox-hil serve CONFIG --mode realtime --duration S`` alternately
without and with a ``[recording]`` table (every output, every tick, one file
per ``--chunk`` s, autostart), ``--rounds`` times each, same ring size, so
both see the same machine load.  For each run: ticks, missed ticks,
wake-up lateness and TET percentiles from the server's summary; for the
recorded runs also the MF4 files read back with asammdf (the ``tick``
channel of every file: exactly one row per tick, in order, none missing),
the lost count and the bytes written.  The load average is recorded before
and after each run.

    python bench/bench_recording.py --duration 600 --rounds 1 --json out/bench_recording.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _host import host_line, with_host  # noqa: E402  (bench/ is first on the path)

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

IO = """[loop]
status_line = false
ring_rows = {ring}
{recording}
"""
RECORDING = """[recording]
folder = "rec"
chunk_s = {chunk}
autostart = true
"""


def one_run(tmp: Path, k: int, record: bool, args) -> dict:
    d = tmp / f"run{k}_{'on' if record else 'off'}"
    d.mkdir()
    io = d / "io.toml"
    io.write_text(IO.format(ring=args.ring, recording=RECORDING.format(chunk=args.chunk) if record else ""))
    summary = d / "summary.json"
    load0 = os.getloadavg()
    t0 = time.monotonic()
    subprocess.run([sys.executable, "-m", "server.cli", "serve", args.config, "--io", str(io), "--mode", "realtime",
                    "--duration", str(args.duration), "--quiet", "--summary-json", str(summary)], cwd=ROOT,
                   check=True, stdout=subprocess.DEVNULL, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    wall = time.monotonic() - t0
    load1 = os.getloadavg()
    s = json.loads(summary.read_text())
    tm = s["timing"]
    out = {"record": record, "ticks": tm["ticks"], "missed_ticks": tm["missed_ticks"],
           "missed_ticks_in_grace": tm["missed_ticks_in_grace"], "rate_hz_actual": tm["rate_hz_actual"],
           "lateness_us": tm["lateness_us"], "tet_us": tm["tet_us"], "load_before": load0, "load_after": load1,
           "wall_s": round(wall, 1)}
    if record:
        from asammdf import MDF

        from server.recording import recording_files

        files = recording_files(d / "rec")
        ticks = []
        for f in files:
            with MDF(f) as mdf:
                ticks.append(np.asarray(mdf.get("tick").samples))
        tick = np.concatenate(ticks) if ticks else np.zeros(0, dtype=np.int64)
        rec = s["recording"]
        every_tick = tick.size == tm["ticks"] and np.array_equal(tick, np.arange(1, tm["ticks"] + 1))
        out.update({"mf4_files": len(files), "mf4_rows": int(tick.size),
                    "mf4_bytes": sum(f.stat().st_size for f in files), "one_row_per_tick": bool(every_tick),
                    "lost": rec["lost"], "writer_exit_code": rec["writer_exit_code"], "signals": rec["signals"]})
        if not args.keep:
            for f in files:
                f.unlink()
    return out


def _fmt(r: dict) -> str:
    lat, tet = r["lateness_us"], r["tet_us"]
    line = (f"{'on ' if r['record'] else 'off'}  ticks {r['ticks']:>7}  missed {r['missed_ticks']:>5} "
            f"({r['missed_ticks_in_grace']} in grace)  lateness p50 {lat['p50']:.1f} p99 {lat['p99']:.1f} "
            f"p99.9 {lat['p999']:.1f} us  TET p99 {tet['p99']:.1f} us  load {r['load_before'][0]:.2f}->"
            f"{r['load_after'][0]:.2f}")
    if r["record"]:
        line += (f"  | mf4 {r['mf4_rows']} rows in {r['mf4_files']} files ({r['mf4_bytes'] / 1e6:.1f} MB), one row "
                 f"per tick: {r['one_row_per_tick']}, lost {r['lost']}")
    return line


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", default="powershift")
    ap.add_argument("--duration", type=float, default=60.0, help="seconds per run")
    ap.add_argument("--rounds", type=int, default=1, help="pairs of runs (off, on)")
    ap.add_argument("--chunk", type=float, default=10.0, help="seconds per MF4 file")
    ap.add_argument("--ring", type=int, default=16384, help="ring_rows of both runs")
    ap.add_argument("--keep", action="store_true", help="keep the MF4 files")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="gearbox-hil-bench-rec-"))
    runs = []
    for k in range(args.rounds):
        for record in (False, True):
            r = one_run(tmp, len(runs), record, args)
            runs.append(r)
            print(_fmt(r), flush=True)
    res = {"command": " ".join(sys.argv), "duration_s": args.duration, "config": args.config, "runs": runs,
           "cpus": os.cpu_count()}
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(with_host(res), indent=1))
    return 0 if all(r["one_row_per_tick"] and r["lost"] == 0 for r in runs if r["record"]) else 1


if __name__ == "__main__":
    print(host_line(), flush=True)
    sys.exit(main())
