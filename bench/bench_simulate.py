"""Cost of one offline/lockstep step per plant, against the bare core step in the same run.

For each plant and its paper scenario this measures, step by step with
``time.perf_counter_ns``:

* ``offline_step`` -- what ``gearbox-hil simulate`` and the server's lockstep
  mode do per step: write the scenario's inputs, map them to the core, step
  the core (with its events), write the outputs;
* ``plant.step`` -- the same plant step with the inputs already in place;
* ``core_step`` (baseline) -- the compiled core alone, same state, same
  inputs (mapped by the plant outside the timing).

Each step is timed three times from the same saved state, so all three see
the same events; the replayed plant step is checked to reproduce the
offline step bit for bit.

and reports median, 90th, 99th, 99.9th percentile and maximum per step,
the ratios to the baseline's median, and the real-time factor of a whole
run (simulated time / wall time, trace writing excluded) two ways:
``run_stepwise`` (``offline_step`` per step from Python, as lockstep; what
``run_offline`` was before the compiled run) and ``run_offline`` (the
whole run in one compiled loop, :mod:`plant_models.offline`).

Run: ``.venv/bin/python bench/bench_simulate.py [--repeat N]``.  Numbers
depend on the machine and its load; compare ratios, not absolute values.
"""

from __future__ import annotations

import argparse
import platform
import time

import numpy as np

from plant_models.core import entry as fc
from plant_models.plants.chain import chain_refresh
from plant_models.plants.dct import dct_refresh
from plant_models.plants.powershift import powershift_refresh
from plant_models.config import repo_root
from plant_models.registry import load_plant
from server.offline.scenario import load_scenario
from server.offline.run import run_offline, run_stepwise
from server.offline.scenario import offline_step
from _host import host_line  # noqa: E402  (bench/ is first on the path)

CASES = (("powershift", "powershift_swaps"), ("dct", "dct_upshift"), ("chain", "chain_4mass"))
# each plant's compiled "map inputs and write outputs without stepping"
REFRESH = {"powershift": powershift_refresh, "dct": dct_refresh, "chain": chain_refresh}


def percentiles(ns: np.ndarray) -> dict:
    us = ns / 1000.0
    return {"median": float(np.median(us)), "p90": float(np.percentile(us, 90)), "p99": float(np.percentile(us, 99)),
            "p99.9": float(np.percentile(us, 99.9)), "max": float(us.max())}


def measure(config: str, scenario: str, repeat: int) -> dict:
    root = repo_root()
    plant = load_plant(root / "configs" / f"{config}.toml")
    compiled = load_scenario(root / "scenarios" / f"{scenario}.toml").compile(plant)
    refresh = REFRESH[plant.kind]
    n = compiled.n_steps
    dt = compiled.dt
    t_off = np.empty(n * repeat, dtype=np.int64)
    t_plant = np.empty(n * repeat, dtype=np.int64)
    t_core = np.empty(n * repeat, dtype=np.int64)
    mf, mi, df, di = plant.mf, plant.mi, plant.df, plant.di
    before_f, before_i = df.copy(), di.copy()
    after_f, after_i = df.copy(), di.copy()
    clock = time.perf_counter_ns
    for r in range(repeat):
        plant.reset(compiled.initial_inputs())
        for k in range(n):
            np.copyto(before_f, df)
            np.copyto(before_i, di)
            t0 = clock()
            offline_step(plant, compiled, k)
            t_off[r * n + k] = clock() - t0
            np.copyto(after_f, df)
            np.copyto(after_i, di)
            # the same step again from the same state, inputs written outside the timing
            np.copyto(df, before_f)
            np.copyto(di, before_i)
            compiled.apply(plant, k)
            t0 = clock()
            plant.step(dt)
            t_plant[r * n + k] = clock() - t0
            if not np.array_equal(df, after_f):
                raise RuntimeError("replayed plant step differs from offline_step")
            # and the bare core step: the plant maps the inputs to the core (untimed), then the core steps
            np.copyto(df, before_f)
            np.copyto(di, before_i)
            compiled.apply(plant, k)
            refresh(mf, mi, df, di, 0)
            t0 = clock()
            fc.core_step(mf, mi, df, di, dt)
            t_core[r * n + k] = clock() - t0
            np.copyto(df, after_f)
            np.copyto(di, after_i)
    walls, step_walls = [], []
    for _ in range(repeat):
        tr = run_offline(plant, compiled)
        walls.append(tr.wall_time_s)
        step_walls.append(run_stepwise(plant, compiled).wall_time_s)
    wall = float(np.median(walls))
    step_wall = float(np.median(step_walls))
    return {"steps": n, "dt": dt, "offline_step": percentiles(t_off), "plant.step": percentiles(t_plant),
            "core_step": percentiles(t_core), "run_wall_s": wall, "realtime_factor": n * dt / wall,
            "stepwise_wall_s": step_wall, "stepwise_factor": n * dt / step_wall, "events": len(tr.events)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5, help="runs of each scenario (default 5)")
    args = ap.parse_args()
    print(f"# {platform.processor() or platform.machine()}, Python {platform.python_version()}, "
          f"numpy {np.__version__}; {args.repeat} runs per scenario")
    print("| plant (scenario, steps, events) | per step | median us | p90 | p99 | p99.9 | max | "
          "median / core_step |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    summary = []
    for config, scenario in CASES:
        r = measure(config, scenario, args.repeat)
        base = r["core_step"]["median"]
        for what in ("core_step", "plant.step", "offline_step"):
            p = r[what]
            print(f"| {config} ({scenario}, {r['steps']}, {r['events']}) | {what} | {p['median']:.2f} | "
                  f"{p['p90']:.2f} | {p['p99']:.2f} | {p['p99.9']:.2f} | {p['max']:.1f} | {p['median'] / base:.2f} |")
        summary.append((config, r))
    print()
    print("| plant | simulated | run_stepwise wall (median) | real-time factor | run_offline (compiled) wall | "
          "real-time factor | stepwise / compiled |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for config, r in summary:
        print(f"| {config} | {r['steps'] * r['dt']:g} s | {r['stepwise_wall_s'] * 1e3:.1f} ms | "
              f"{r['stepwise_factor']:.0f} | {r['run_wall_s'] * 1e3:.2f} ms | {r['realtime_factor']:.0f} | "
              f"{r['stepwise_wall_s'] / r['run_wall_s']:.1f} |")


if __name__ == "__main__":
    print(host_line(), flush=True)
    main()
