"""The whole WLTC class 3b with the 8HP car, closed by the reference TCU over ZeroMQ against a realtime server.

The server ticks at 1 kHz on the wall clock; the TCU runs in this process on the server's state stream
(``server.testbench.closed_loop.closed_loop_realtime``), every 10 ms of plant time, and sends its commands
back as a controller developer's script would.  Printed: the largest speed error against the cycle (every
state received), the shift count against the offline run's, and the server's timing (ticks, missed ticks,
the tick's execution time and lateness).  Too long for the test suite (30 minutes of wall time for the
whole cycle); tests/test_reference_tcu.py runs the cycle offline and 22 s of it in lockstep.

Run: ``PYTHONPATH=. python scripts/wltc_realtime_check.py [duration_s] [--json FILE]``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))
from reference_tcu import ZF8HP_CAR, ReferenceTcu  # noqa: E402

from io_adapters.zmq.client import HilClient  # noqa: E402
from plant_models.registry import load_plant  # noqa: E402
from server.offline.controller import closed_loop  # noqa: E402
from server.testbench.closed_loop import closed_loop_realtime  # noqa: E402
from server.testbench.runner import ServerRun  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("duration_s", nargs="?", type=float, default=1800.0)
    ap.add_argument("--json", help="write the figures to this file")
    args = ap.parse_args(argv)
    dur = args.duration_s
    off_tcu = ReferenceTcu(ZF8HP_CAR)
    closed_loop(load_plant("zf8hp_car"), None, off_tcu, every=1000, duration_s=dur, dt=1e-3)
    t_s, v_m_s, gears = [], [], []

    def seen(s) -> None:
        t_s.append(s.t)
        v_m_s.append(s.y["vehicle_speed"])
        gears.append(s.y["gear"])

    rt_tcu = ReferenceTcu(ZF8HP_CAR)
    with tempfile.TemporaryDirectory() as tmp:
        with ServerRun("zf8hp_car", "realtime", Path(tmp)) as server:
            with HilClient(server.control, timeout_s=30.0).connect() as client:
                client.start()
                t0 = time.perf_counter()
                stats = closed_loop_realtime(client, rt_tcu, duration_s=dur, on_state=seen)
                wall = time.perf_counter() - t0
                timing = client.status().get("timing", {})
    t, v = np.asarray(t_s), np.asarray(v_m_s)
    tt, vv = rt_tcu.cycle[0], rt_tcu.cycle[1]
    err = (v - np.interp(t, tt, vv)) * 3.6
    out = {
        "duration_s": dur, "plant_time_reached_s": round(stats.t_end_s, 3), "wall_s": round(wall, 1), "states_seen": int(len(t)), "sequence_gaps": stats.gaps,
        "tcu_updates": stats.updates, "commands_sent": stats.commands,
        "max_abs_speed_error_km_h": round(float(np.abs(err).max()), 3),
        "max_abs_speed_error_at_s": round(float(t[int(np.argmax(np.abs(err)))]), 3),
        "largest_gap_between_states_s": round(float(np.diff(t).max()), 4) if len(t) > 1 else 0.0,
        "seconds_outside_2_km_h": round(float(np.sum(np.abs(err) > 2.0) * np.median(np.diff(t))), 3)
        if len(t) > 1 else 0.0,
        "p99_abs_speed_error_km_h": round(float(np.percentile(np.abs(err), 99)), 3),
        "shifts_realtime": rt_tcu.shifts, "shifts_offline": off_tcu.shifts,
        "timing": {k: timing.get(k) for k in ("ticks", "missed_ticks", "missed_ticks_in_grace", "tet_us",
                                              "lateness_us") if k in timing},
    }
    print(json.dumps(out, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
    return 0 if out["max_abs_speed_error_km_h"] <= 2.0 and stats.t_end_s >= dur else 1


if __name__ == "__main__":
    raise SystemExit(main())
