#!/usr/bin/env python3
"""Cost of an FMU in the loop: a one-state FMU (first-order torque source) on the Powershift's engine torque.

In one run, interleaved in blocks so both see the same machine load:

* the bare Powershift plant's ``step`` (gear 1, 300 N m, dt = 1 ms);
* the same plant inside ``FmuAssembly`` with the FMU driving ``engine_torque``
  (set inputs, ``fmi2DoStep``, get outputs, then the plant step);

each tick timed with ``perf_counter_ns``.  The FMU's cost per tick is the
difference of the medians (and of the 99th percentiles); its share is that
over the assembly's median.  Python allocations on the per-tick path are
counted with tracemalloc over 1000 ticks after warm-up.  The FMU is built
at run time from tests/fmu_src/first_order.c with the machine's C compiler.

    python bench/bench_fmi.py --ticks 20000
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np
from _host import host_line  # noqa: E402  (bench/ is first on the path)

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))


def timed(plant, n: int, dt: float) -> np.ndarray:
    out = np.empty(n, dtype=np.int64)
    clock = time.perf_counter_ns
    step = plant.step
    for k in range(n):
        t0 = clock()
        step(dt)
        out[k] = clock() - t0
    return out


def allocations(plant, n: int, dt: float) -> tuple[int, int]:
    tracemalloc.start()
    s0 = tracemalloc.take_snapshot()
    for _ in range(n):
        plant.step(dt)
    s1 = tracemalloc.take_snapshot()
    tracemalloc.stop()
    stats = s1.compare_to(s0, "filename")
    return sum(s.count_diff for s in stats if s.count_diff > 0), sum(s.size_diff for s in stats if s.size_diff > 0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ticks", type=int, default=20000)
    ap.add_argument("--block", type=int, default=1000)
    args = ap.parse_args()
    from fmu_build import build_first_order
    from plant_models.registry import load_plant
    dt = 1e-3
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        build_first_order(d / "engine.fmu")
        cfg = d / "ps.toml"
        cfg.write_text(f'extends = "{ROOT / "configs" / "powershift.toml"}"\n\n[[fmu]]\nname = "engine"\n'
                       'file = "engine.fmu"\nstart = { tau = 0.05 }\nto_plant = { torque = "engine_torque" }\n')
        gear = {"p_c1": 16.0, "p_c3": 16.0, "p_c6": 16.0}
        bare = load_plant("powershift")
        bare.reset({"engine_torque": 300.0, **gear})
        fmu = load_plant(cfg)
        fmu.reset({"engine.torque_cmd": 300.0, **gear})
        timed(bare, 2000, dt), timed(fmu, 2000, dt)  # warm-up
        tb, tf = [], []
        for _ in range(args.ticks // args.block):
            tb.append(timed(bare, args.block, dt))
            tf.append(timed(fmu, args.block, dt))
        tb, tf = np.concatenate(tb) / 1e3, np.concatenate(tf) / 1e3  # us
        n_alloc, bytes_alloc = allocations(fmu, 1000, dt)
        n_bare, bytes_bare = allocations(bare, 1000, dt)
        fmu.close()
    pb, pf = np.percentile(tb, [50, 99]), np.percentile(tf, [50, 99])
    print(f"ticks {len(tb)} each, dt = 1 ms (stepped back to back, not on the wall clock)")
    print(f"bare plant step:        p50 {pb[0]:6.2f} us   p99 {pb[1]:6.2f} us")
    print(f"plant + one-state FMU:  p50 {pf[0]:6.2f} us   p99 {pf[1]:6.2f} us")
    print(f"FMU cost per tick:      p50 {pf[0] - pb[0]:6.2f} us   p99 {pf[1] - pb[1]:6.2f} us   "
          f"share of the step (p50) {100 * (pf[0] - pb[0]) / pf[0]:.0f} %")
    print(f"allocations over 1000 ticks (tracemalloc, blocks kept): with FMU {n_alloc} ({bytes_alloc} B), "
          f"bare {n_bare} ({bytes_bare} B)")
    return 0


if __name__ == "__main__":
    print(host_line(), flush=True)
    raise SystemExit(main())
