"""The whole WLTC (1800 s at dt = 1 ms) offline with the 8HP car, every component and the reference TCU, against
the same plant replaying the TCU's commands open loop: real-time factor, same run.

* closed loop: ``examples/reference_tcu.py``'s kernel inside the compiled loop
  (``server.offline.controller.closed_loop``, ``plant_models.closed_loop.StagedRun``), a call every 10 ticks;
* baseline: the bare plant (no controller) through the same 1.8 million steps, its inputs the commands the TCU gave
  (held over each 10 ms period, a table of steps) in the compiled open-loop run (``plant_models.offline.Run``):
  the same trajectory, shifts and events, without the controller.

Rows every 1000 steps in both.  Wall time of the loop only (the plant's step compiled and cached, the closed loop's
own compile excluded by a warm-up run).  Run: ``PYTHONPATH=. python bench/bench_drive_cycle.py [--repeat N]``.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
from reference_tcu import ZF8HP_CAR, ReferenceTcu  # noqa: E402

from plant_models.offline import InputTable, Run  # noqa: E402
from plant_models.registry import load_plant  # noqa: E402
from server.offline.controller import closed_loop  # noqa: E402
from _host import host_line  # noqa: E402  (bench/ is first on the path)

DT, DURATION = 1e-3, 1800.0


def closed(duration: float, every: int = 1000):
    plant = load_plant("zf8hp_car")
    tcu = ReferenceTcu(ZF8HP_CAR)
    r = closed_loop(plant, None, tcu, every=every, duration_s=duration, dt=DT)
    return r.wall_time_s, r, tcu


def commands(duration: float):
    """The TCU's commands of each 10 ms period (rows every 10 steps: the inputs of the period's last step)."""
    _, r, tcu = closed(duration, every=10)
    return r, tcu


def open_loop(r, tcu, duration: float) -> float:
    plant = load_plant("zf8hp_car")
    plant.reset(tcu.initial_inputs())
    table = InputTable(plant.n_in)
    t_start = np.maximum(r.time[1:] - 10 * DT, 0.0)  # the period each row's inputs were held over
    for i in range(plant.n_in):
        table.set_points(i, t_start, r.inputs[1:, i], integer=True, first_order_hold=False)
    n = int(round(duration / DT))
    run = Run(plant, table, DT, n, 1000)
    t0 = time.perf_counter()
    run.advance()
    wall = time.perf_counter() - t0
    v_open = run.out[-1, [s.name for s in plant.outputs].index("vehicle_speed")]
    return wall, float(v_open)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--duration", type=float, default=DURATION)
    a = ap.parse_args(argv)
    closed(2.0)  # compiles the closed loop for this process
    r10, tcu10 = commands(a.duration)
    tc, to = [], []
    for _ in range(a.repeat):
        w, _, tcu = closed(a.duration)
        tc.append(w)
        w, v = open_loop(r10, tcu10, a.duration)
        to.append(w)
    n = int(round(a.duration / DT))
    mc, mo = float(np.median(tc)), float(np.median(to))
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} cores, numba; "
          f"{a.duration:.0f} s at dt = {DT * 1e3:.0f} ms ({n} steps), median of {a.repeat}; shifts {tcu10.shifts}")
    print("| run | wall s (median) | min .. max | us per step | real-time factor |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, ts, m in (("8HP car + reference TCU, closed loop (kernel)", tc, mc),
                        ("8HP car, bare plant replaying the TCU's commands (baseline)", to, mo)):
        print(f"| {name} | {m:.2f} | {min(ts):.2f} .. {max(ts):.2f} | {m / n * 1e6:.2f} | {a.duration / m:.0f}x |")
    print(f"closed / baseline: {mc / mo:.3f}")
    return 0


if __name__ == "__main__":
    print(host_line(), flush=True)
    raise SystemExit(main())
