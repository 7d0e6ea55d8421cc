"""Step cost of the 8HP car (engine, torque converter, lock-up, vehicle, brake) against the bare 8HP, same run.

Every figure is the cost of one plant step (input mapping, core step with its
events and the force law at every stage point, outputs) timed with the CPU's
cycle counter inside a compiled loop (``bench/bench_core.py``'s
``_time_plant_steps``), in microseconds:

* baseline: the bare 8HP (``configs/zf8hp.toml``) through ``scenarios/zf8hp_shifts.toml``;
* the 8HP car (``configs/zf8hp_car.toml``) through ``scenarios/zf8hp_car_drive.toml``
  (launch through the converter, four shifts, lock-up, brake to standstill);
* the 8HP car with clutch hydraulics on its five shift elements
  (``configs/zf8hp_car_hydraulics.toml``: dead time, valve lag, fill) through the same drive;
* the 8HP car as a P2 hybrid (``configs/zf8hp_car_p2.toml``: an electric motor on the engine's member)
  through ``scenarios/zf8hp_car_p2_launch.toml``;
* the bare 8HP held in 5th, and the car cruising in 4th locked up (pedal held, no event).

Run: ``PYTHONPATH=. python bench/bench_powertrain.py [--repeat N]``.  The
numbers depend on the machine and its load; compare the ratios measured in
the same run.

``--hydraulics [--rounds N]``: the Powershift through ``scenarios/powershift_swaps.toml`` and the DCT plant
through ``scenarios/dct_upshift.toml``, each without and with clutch hydraulics on all its clutches
(``configs/powershift_hydraulics.toml``, ``configs/dct_hydraulics.toml``), alternately in N rounds of the same
run; the median over the rounds of each round's median, p90 and p99, and the ratio with / without.

``--ab COMMIT [--rounds N]``: the existing plants' steps (the Powershift's
core and plant step, the DCT plant, the bare 8HP through its shifts and held
in 5th, the 8HP car) measured alternately in a ``git archive`` of COMMIT
(its own numba cache, warmed first) and in this tree, N rounds, so that both
see the same machine load; medians in us, base / this.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_core import _time_plant_steps, ns_per_cycle, stats  # noqa: E402
from bench_transmission import time_in_gear, time_scenario  # noqa: E402

from plant_models.core import layout as L  # noqa: E402
from plant_models.registry import load_plant  # noqa: E402
from _host import host_line  # noqa: E402  (bench/ is first on the path)


def time_car_cruising(repeat: int, npc: float, steps: int = 5000):
    """The car in 4th, locked up, 30 % pedal at 16 m/s: 4 rows stuck, the law's three components active."""
    from plant_models.plants.transmission import transmission_step

    samples = []
    for _ in range(repeat):
        plant = load_plant("zf8hp_car")
        inputs = {f"p_{e}": (12.0 if e in "BDE" else 0.0) for e in "ABCDE"}
        inputs.update(p_lockup=8.0, pedal=0.3)
        plant.reset(inputs)
        plant.start_in_gear("4", 16.0 / 0.33 * 3.15 * plant.gear_ratio("4"))
        c = plant.core
        coords = plant.params.reduction.coordinates
        d = plant.params.description
        c.omega[coords.index(d.member_index("engine"))] = plant.member_speeds()[d.member_index("input")]
        plant.start()
        U = np.tile(plant.u.copy(), (steps, 1))
        R = np.zeros_like(U)
        cyc = np.empty(steps, dtype=np.int64)
        st = _time_plant_steps(transmission_step, c.mf, c.mi, c.df, c.di, U, R, 1e-3, int(c.mi[L.DF_PLANT]),
                               plant.n_in, cyc)
        assert st & (L.ST_BAD_INPUT | L.ST_NONFINITE) == 0
        assert plant.output_dict()["stuck_lockup"] == 1.0
        samples.append(cyc * npc / 1000.0)
    return stats(np.concatenate(samples)), f"{repeat} x {steps} steps"


def report(repeat: int) -> str:
    from plant_models.plants.transmission import transmission_step

    npc = ns_per_cycle()
    rows = [("bare 8HP, zf8hp_shifts (baseline)",
             *time_scenario("zf8hp", "zf8hp_shifts", transmission_step, 15000, repeat, npc)),
            ("8HP car, zf8hp_car_drive (all components)",
             *time_scenario("zf8hp_car", "zf8hp_car_drive", transmission_step, 16000, repeat, npc,
                            allowed=L.ST_LOCKED)),
            ("8HP car with clutch hydraulics, zf8hp_car_drive",
             *time_scenario("zf8hp_car_hydraulics", "zf8hp_car_drive", transmission_step, 16000, repeat, npc,
                            allowed=L.ST_LOCKED)),
            ("8HP car as a P2 hybrid, zf8hp_car_p2_launch (motor boost and recuperation)",
             *time_scenario("zf8hp_car_p2", "zf8hp_car_p2_launch", transmission_step, 8000, repeat, npc,
                            allowed=L.ST_LOCKED)),
            ("bare 8HP held in 5th", *time_in_gear(repeat, npc)),
            ("8HP car cruising in 4th, locked up", *time_car_cruising(repeat, npc))]
    base = rows[0][1]["median"]
    lines = [f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
             f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} at the end, "
             f"{npc:.4f} ns per cycle-counter tick", "",
             "| step | median [us] | p90 | p99 | max | / baseline median | runs |", "|---|---|---|---|---|---|---|"]
    for name, s, note in rows:
        lines.append(f"| {name} | {s['median']:.3f} | {s['p90']:.3f} | {s['p99']:.3f} | {s['max']:.1f} | "
                     f"{s['median'] / base:.2f} | {note} |")
    return "\n".join(lines)


def existing_plants(repeat: int) -> dict[str, float]:
    """Median step of each existing plant (configs that exist at the base commit too), us."""
    from bench_core import compiled_loop

    from plant_models.plants.transmission import transmission_step

    npc = ns_per_cycle()
    rows = compiled_loop(repeat, npc)
    rows += [("transmission_step, zf8hp_shifts",
              *time_scenario("zf8hp", "zf8hp_shifts", transmission_step, 15000, repeat, npc)),
             ("transmission_step, zf8hp held in 5th", *time_in_gear(repeat, npc)),
             ("transmission_step, zf8hp_car_drive",
              *time_scenario("zf8hp_car", "zf8hp_car_drive", transmission_step, 16000, repeat, npc,
                             allowed=L.ST_LOCKED))]
    return {name.split(" (")[0]: s["median"] for name, s, _ in rows}


def ab(base: str, rounds: int, repeat: int, keep: str | None = None) -> str:
    """Same-run A/B of :func:`existing_plants` against a ``git archive`` of ``base`` (in ``keep``, a folder
    kept for the next A/B against the same commit with its warm numba cache, or a fresh temporary one)."""
    root = Path(__file__).resolve().parent.parent
    tmp = Path(keep) if keep else Path(tempfile.mkdtemp(prefix="gearbox-hil-ab-"))
    if not (tmp / "base").exists():
        archive = subprocess.run(["git", "-C", str(root), "archive", base], check=True, capture_output=True).stdout
        (tmp / "base").mkdir(parents=True)
        subprocess.run(["tar", "-x", "-C", str(tmp / "base")], input=archive, check=True)
    trees = {"base": tmp / "base", "this": root}
    env = {"base": dict(os.environ, PYTHONPATH=str(tmp / "base"), NUMBA_CACHE_DIR=str(tmp / "numba-base")),
           "this": dict(os.environ, PYTHONPATH=str(root))}
    for name in trees:
        subprocess.run([sys.executable, "-m", "server.cli.warmup"], cwd=trees[name], env=env[name], check=True,
                       stdout=subprocess.DEVNULL)
    script = Path(__file__).resolve()  # this tree's measurement, on either tree's plants and core
    medians: dict[str, list] = {}
    for _ in range(rounds):
        for name in ("base", "this"):
            out = subprocess.run([sys.executable, str(script), "--existing", "--repeat", str(repeat)],
                                 cwd=trees[name], env=env[name], check=True, capture_output=True, text=True).stdout
            for k, v in json.loads(out.strip().splitlines()[-1]).items():  # after the host line
                medians.setdefault(k, []).append(v)
    lines = [f"base {base} (git archive, own numba cache) / this tree, {rounds} rounds alternating, medians in us; "
             f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} at the end", "",
             "| step | " + " | ".join(f"round {r + 1}" for r in range(rounds)) + " |",
             "|---|" + "---|" * rounds]
    for k, v in medians.items():
        lines.append(f"| {k} | " + " | ".join(f"{v[2 * r]:.3f} / {v[2 * r + 1]:.3f}" for r in range(rounds)) + " |")
    return "\n".join(lines)


def hydraulic_kinds(rounds: int, repeat: int) -> str:
    """The Powershift and the DCT plant without and with clutch hydraulics, alternately, same run."""
    from plant_models.plants.dct import dct_step
    from plant_models.plants.powershift import powershift_step

    npc = ns_per_cycle()
    cases = (("Powershift, powershift_swaps", "powershift", "powershift_swaps", powershift_step, 3500),
             ("Powershift with clutch hydraulics (8 clutches), powershift_swaps", "powershift_hydraulics",
              "powershift_swaps", powershift_step, 3500),
             ("DCT plant, dct_upshift", "dct", "dct_upshift", dct_step, 4000),
             ("DCT plant with clutch hydraulics (c1, c2), dct_upshift", "dct_hydraulics", "dct_upshift", dct_step,
              4000))
    samples: dict[str, list] = {c[0]: [] for c in cases}
    notes = {}
    for _ in range(rounds):
        for name, cfg, scen, fn, steps in cases:
            s, notes[name] = time_scenario(cfg, scen, fn, steps, repeat, npc)
            samples[name].append(s)
    lines = [f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, {rounds} rounds alternating, "
             f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} at the end", "",
             "| step | median [us] | p90 | p99 | rounds' medians | with / without | runs per round |",
             "|---|---|---|---|---|---|---|"]

    def over_rounds(name, key):  # the median over the rounds of a statistic of each round
        return float(np.median([s[key] for s in samples[name]]))
    for k, (name, *_rest) in enumerate(cases):
        med = over_rounds(name, "median")
        ratio = f"{med / over_rounds(cases[k - 1][0], 'median'):.3f}" if k % 2 else "baseline"
        each = " ".join(f"{s['median']:.3f}" for s in samples[name])
        lines.append(f"| {name} | {med:.3f} | {over_rounds(name, 'p90'):.3f} | {over_rounds(name, 'p99'):.3f} | "
                     f"{each} | {ratio} | {notes[name]} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5, help="runs per measurement (default 5)")
    ap.add_argument("--ab", metavar="COMMIT", help="A/B of the existing plants' steps against COMMIT")
    ap.add_argument("--rounds", type=int, default=3, help="rounds of the A/B (default 3)")
    ap.add_argument("--ab-dir", metavar="DIR", help="keep the A/B's archive and its numba cache in DIR (reused)")
    ap.add_argument("--existing", action="store_true", help=argparse.SUPPRESS)  # one side of the A/B, as JSON
    ap.add_argument("--hydraulics", action="store_true",
                    help="the Powershift and the DCT plant without and with clutch hydraulics, same run")
    args = ap.parse_args(argv)
    if args.hydraulics:
        print(hydraulic_kinds(args.rounds, args.repeat))
    elif args.existing:
        print(json.dumps(existing_plants(args.repeat)))
    elif args.ab:
        print(ab(args.ab, args.rounds, args.repeat, args.ab_dir))
    else:
        print(report(args.repeat))
    return 0


if __name__ == "__main__":
    print(host_line(), flush=True)
    sys.exit(main())
