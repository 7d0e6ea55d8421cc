"""Step cost of the damper-clutch and servo-actuator plants, against the bare core step in the same run.

* damper (scenarios/damper_clutch_engagement.toml): ``plant.step`` (input
  mapping, core step with its events, outputs) against ``core_step`` alone
  from the same saved state with the same inputs (baseline);
* servo (scenarios/servo_slow_ramp_stick_slip.toml, the stick-slip run):
  ``plant.step`` at dt = 1 ms for internal sub-steps of 20, 10 (default) and
  5 us, i.e. 50, 100 and 200 sub-steps per plant step; reported per step,
  per sub-step, and as a ratio to the damper's bare core step median.

Each step is timed with ``time.perf_counter_ns`` around one call; state
copies and input writes are outside the timed region.

Run: ``.venv/bin/python bench/bench_systems.py [--repeat N]``.  Numbers depend
on the machine and its load; compare the ratios measured in the same run.
"""

from __future__ import annotations

import argparse
import dataclasses
import platform
import time

import numpy as np

from plant_models.core import entry as fc
from plant_models.config import repo_root
from plant_models.plants.damper import damper_refresh
from plant_models.registry import load_plant
from plant_models.plants.servo import ServoActuatorPlant
from server.offline.scenario import load_scenario
from _host import host_line  # noqa: E402  (bench/ is first on the path)


def stats(ns: np.ndarray) -> dict:
    us = ns / 1000.0
    return {"median": float(np.median(us)), "p90": float(np.percentile(us, 90)), "p99": float(np.percentile(us, 99)),
            "p99.9": float(np.percentile(us, 99.9)), "max": float(us.max())}


def bench_damper(repeat: int) -> tuple[dict, dict, int]:
    root = repo_root()
    plant = load_plant(root / "configs" / "damper.toml")
    sc = load_scenario(root / "scenarios" / "damper_clutch_engagement.toml").compile(plant)
    n, dt = sc.n_steps, sc.dt
    t_plant = np.empty(n * repeat, dtype=np.int64)
    t_core = np.empty(n * repeat, dtype=np.int64)
    mf, mi, df, di = plant.mf, plant.mi, plant.df, plant.di
    q = 0
    for _ in range(repeat):
        plant.reset(sc.initial_inputs())
        for k in range(n):
            saved = plant.get_state()
            sc.apply(plant, k)
            a = time.perf_counter_ns()
            plant.step(dt)
            t_plant[q] = time.perf_counter_ns() - a
            after = plant.get_state()
            plant.set_state(saved)
            sc.apply(plant, k)
            damper_refresh(mf, mi, df, di, 0)  # inputs mapped to the core, outside the timing
            a = time.perf_counter_ns()
            fc.core_step(mf, mi, df, di, dt)
            t_core[q] = time.perf_counter_ns() - a
            plant.set_state(after)
            q += 1
    return stats(t_core), stats(t_plant), n


def bench_servo(repeat: int, h: float) -> tuple[dict, int, float]:
    root = repo_root()
    base = load_plant(root / "configs" / "servo.toml")
    plant = ServoActuatorPlant(dataclasses.replace(base.params, internal_step_s=h))
    sc = load_scenario(root / "scenarios" / "servo_slow_ramp_stick_slip.toml").compile(plant)
    n, dt = sc.n_steps, sc.dt
    t = np.empty(n * repeat, dtype=np.int64)
    q = 0
    wall = []
    for _ in range(repeat):
        plant.reset(sc.initial_inputs())
        w0 = time.perf_counter()
        for k in range(n):
            sc.apply(plant, k)
            a = time.perf_counter_ns()
            plant.step(dt)
            t[q] = time.perf_counter_ns() - a
            q += 1
        wall.append(time.perf_counter() - w0)
    return stats(t), int(np.ceil(dt / h - 1e-9)), float(np.median(wall))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    core, plant, n = bench_damper(args.repeat)
    print(f"# {platform.machine()}, Python {platform.python_version()}, numpy {np.__version__}; "
          f"{args.repeat} runs per case, dt = 1 ms")
    print("| plant (scenario) | per step | median us | p90 | p99 | p99.9 | max | median / core_step |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    base = core["median"]
    for name, s in (("core_step", core), ("plant.step", plant)):
        print(f"| damper (damper_clutch_engagement, {n} steps) | {name} | {s['median']:.2f} | {s['p90']:.2f} | "
              f"{s['p99']:.2f} | {s['p99.9']:.2f} | {s['max']:.1f} | {s['median'] / base:.2f} |")
    rows = []
    for h in (2e-5, 1e-5, 5e-6):
        s, nsub, wall = bench_servo(args.repeat, h)
        rows.append((h, s, nsub, wall))
        print(f"| servo (servo_slow_ramp_stick_slip, sub-step {h * 1e6:g} us = {nsub}/step) | plant.step | "
              f"{s['median']:.2f} | {s['p90']:.2f} | {s['p99']:.2f} | {s['p99.9']:.2f} | {s['max']:.1f} | "
              f"{s['median'] / base:.2f} |")
    print()
    print("| servo sub-step | median per step us | per sub-step ns | run wall (4 s simulated) | real-time factor |")
    print("| --- | --- | --- | --- | --- |")
    for h, s, nsub, wall in rows:
        print(f"| {h * 1e6:g} us | {s['median']:.2f} | {1000 * s['median'] / nsub:.1f} | {1000 * wall:.1f} ms | "
              f"{4.0 / wall:.0f} |")
    return 0


if __name__ == "__main__":
    print(host_line(), flush=True)
    raise SystemExit(main())
