"""Step cost of transmissions described as data, against the Powershift plant's step in the same run.

Every figure is the cost of one plant step (input mapping, core step with its
events, outputs) timed with the CPU's cycle counter inside a compiled loop
(``bench/bench_core.py``'s ``_time_plant_steps``: the inputs of each step are
written outside the timed region), in microseconds:

* baseline: ``powershift_step`` through ``scenarios/powershift_swaps.toml``
  (the Powershift plant, 4 axles, 8 clutches);
* the Powershift as a description (``configs/powershift_described.toml``,
  the generic ``transmission_step``) through the same scenario: the cost of
  the generic plant for the same core;
* the 8-speed automatic (``configs/zf8hp.toml``: 8 members reduced to 4
  independent speeds, 5 shift elements over up to 4 of them) through
  ``scenarios/zf8hp_shifts.toml`` (14 swaps under load, 15 s), and held in
  5th gear (three elements stuck, no event).

Run: ``PYTHONPATH=. python bench/bench_transmission.py [--repeat N]``.  The
numbers depend on the machine and its load; compare the ratios to the
baseline measured in the same run.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_core import _time_plant_steps, ns_per_cycle, scenario_tables, stats  # noqa: E402

from plant_models.core import layout as L  # noqa: E402
from plant_models.registry import load_plant  # noqa: E402
from _host import host_line  # noqa: E402  (bench/ is first on the path)


def time_scenario(config: str, scenario: str, step_fn, steps: int, repeat: int, npc: float, allowed: int = 0):
    samples, events = [], 0
    for _ in range(repeat):
        plant = load_plant(config)
        comp, U, R = scenario_tables(plant, scenario, steps)
        plant.reset(comp.initial_inputs())
        c = plant.core
        cyc = np.empty(steps, dtype=np.int64)
        st = _time_plant_steps(step_fn, c.mf, c.mi, c.df, c.di, U, R, comp.dt, int(c.mi[L.DF_PLANT]), plant.n_in,
                               cyc)
        assert st & (L.ST_BAD_INPUT | L.ST_NONFINITE | L.ST_LOCKED) & ~allowed == 0
        events = int(c.counters[L.CNT_EVENTS])
        samples.append(cyc * npc / 1000.0)
    return stats(np.concatenate(samples)), f"{repeat} x {steps} steps, {events} events per run"


def time_in_gear(repeat: int, npc: float, steps: int = 5000):
    """The 8HP in 5th gear at 150 rad/s input, 300 N m in, 100 N m load: three rows stuck, no event."""
    from plant_models.plants.transmission import transmission_step

    samples = []
    for _ in range(repeat):
        plant = load_plant("zf8hp")
        inputs = {f"p_{e}": (12.0 if e in "BCD" else 0.0) for e in "ABCDE"}
        inputs.update(input_torque=300.0, load_torque=100.0)
        plant.reset(inputs)
        plant.start_in_gear("5", 150.0)
        c = plant.core
        ev0 = int(c.counters[L.CNT_EVENTS])  # the start counts as one
        U = np.tile(plant.u.copy(), (steps, 1))
        R = np.zeros_like(U)
        cyc = np.empty(steps, dtype=np.int64)
        st = _time_plant_steps(transmission_step, c.mf, c.mi, c.df, c.di, U, R, 1e-3, int(c.mi[L.DF_PLANT]),
                               plant.n_in, cyc)
        assert st & (L.ST_BAD_INPUT | L.ST_NONFINITE | L.ST_LOCKED) == 0
        assert int(c.counters[L.CNT_EVENTS]) == ev0
        samples.append(cyc * npc / 1000.0)
    return stats(np.concatenate(samples)), f"{repeat} x {steps} steps, no event"


def report(repeat: int) -> str:
    from plant_models.plants.powershift import powershift_step
    from plant_models.plants.transmission import transmission_step

    npc = ns_per_cycle()
    rows = [("powershift_step, powershift_swaps (baseline)",
             *time_scenario("powershift", "powershift_swaps", powershift_step, 3500, repeat, npc)),
            ("transmission_step, powershift_described, powershift_swaps",
             *time_scenario("powershift_described", "powershift_swaps", transmission_step, 3500, repeat, npc)),
            ("transmission_step, zf8hp, zf8hp_shifts (1 -> 8 -> 1 under load)",
             *time_scenario("zf8hp", "zf8hp_shifts", transmission_step, 15000, repeat, npc)),
            ("transmission_step, zf8hp held in 5th", *time_in_gear(repeat, npc))]
    base = rows[0][1]["median"]
    lines = [f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
             f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} at the end, "
             f"{npc:.4f} ns per cycle-counter tick", "",
             "| step | median [us] | p90 | p99 | max | / baseline median | runs |", "|---|---|---|---|---|---|---|"]
    for name, s, note in rows:
        lines.append(f"| {name} | {s['median']:.3f} | {s['p90']:.3f} | {s['p99']:.3f} | {s['max']:.1f} | "
                     f"{s['median'] / base:.2f} | {note} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5, help="runs per measurement (default 5)")
    args = ap.parse_args(argv)
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} at the start")
    print(report(args.repeat))
    return 0


if __name__ == "__main__":
    print(host_line(), flush=True)
    sys.exit(main())
