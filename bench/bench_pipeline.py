#!/usr/bin/env python3
"""Same-run A/B of the run pipeline: the 1 kHz tick and the offline runs, this tree against a base commit.

Each round runs a child process in the base tree and one in this tree, in
turn, so both see the same machine load.  A child measures, in process:

* the server's tick (``Loop._tick``, lockstep, the Powershift in gear 1, no
  adapters) in blocks taken in turn: commands held (``plain``), a scenario
  playing (``scenario``, ``powershift_single_swap`` restarted every block),
  10 signal faults active (``faults``, ``_support.SIGNAL_FAULTS``); per tick
  the wall time (TET: p50, p99) and per block the thread's CPU time / tick
  (the median block and the least disturbed one);
* the offline runs, CPU time per step (the least of ``--repeat`` calls): the Python-step reference run of
  ``simulate`` (``run_stepwise``), the step-by-step run with a fault
  schedule (``StepwiseRun``), the compiled run (``run_offline``), the
  closed loop through ``update`` (the slip PI controller, Python path);
* the WLTC's first ``--wltc-s`` seconds with the 8HP car and the reference
  TCU's kernel in the compiled closed loop: the real-time factor on CPU time.

CPU times and same-run ratios (this / base) are what to read on a loaded
machine; the table gives each round's medians and the median ratio.

    python bench/bench_pipeline.py --baseline 6d27a44 --rounds 3 --json bench/results/pipeline.json

``--base-tree``/``--base-cache`` reuse an exported base (``git archive``) and
its warmed numba cache; otherwise the base is exported and warmed here.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))
from _host import host_line, with_host  # noqa: E402  (bench/ is first on the path)
# bench/bench_faults.py's plant state and faults: plain data (_support imports no package of this tree unless
# asked for its server helpers, so the base's child keeps the base's packages)
from _support import FAULT_INITIAL as INITIAL, SIGNAL_FAULTS as FAULTS  # noqa: E402

KINDS = ("plain", "scenario", "faults")
OFFLINE = ("run_stepwise", "stepwise_faults", "run_offline", "closed_loop_update")


def _tick_blocks(blocks: int, block: int) -> dict:
    import numpy as np

    from plant_models.registry import load_plant
    from server.offline.scenario import load_scenario
    from server.realtime.loop_config import LoopConfig
    from server.realtime.runtime import assemble

    plant = load_plant("powershift")
    srv = assemble(plant, [], LoopConfig(mode="lockstep", status_interval_s=0.0), initial_inputs=INITIAL)
    lp = srv.loop
    lp.start()
    sc = load_scenario("powershift_single_swap")
    tick, mono, cpu = lp._tick, time.perf_counter_ns, time.thread_time_ns
    wall = {k: [] for k in KINDS}
    per_tick_cpu = {k: [] for k in KINDS}

    def setup(kind: str) -> None:
        if kind == "scenario":
            lp.player.load(sc.compile(plant), sc.compile(plant), lp.period_ns)
        elif lp.player.loaded is not None:
            lp.player.unload()
        lp.reset(INITIAL)
        lp.step(500)  # settle (and warm this kind's path)
        if kind == "faults":
            for f in FAULTS:
                lp.set_fault(f)

    for kind in KINDS:  # warm every path once
        setup(kind)
        lp.step(block)
    gc.collect()
    gc.disable()  # as the loop does while it runs
    for b in range(blocks * len(KINDS)):
        kind = KINDS[b % len(KINDS)]
        setup(kind)
        buf = np.empty(block, dtype=np.int64)
        c0 = cpu()
        for j in range(block):
            t0 = mono()
            tick(lp.sim_ns())
            buf[j] = mono() - t0
        per_tick_cpu[kind].append((cpu() - c0) / block / 1000.0)
        wall[kind].append(buf)
    gc.enable()
    out = {}
    for kind in KINDS:
        w = np.concatenate(wall[kind]) / 1000.0
        out[kind] = {"tet_p50_us": float(np.percentile(w, 50)), "tet_p99_us": float(np.percentile(w, 99)),
                     "cpu_us_per_tick": float(np.median(per_tick_cpu[kind])),
                     "cpu_us_per_tick_min": float(min(per_tick_cpu[kind])), "ticks": int(w.size)}
    return out


def _cpu_per_step(fn, steps: int, repeat: int) -> float:
    """The least over ``repeat`` calls of fn's process CPU time per step, us (the call least disturbed by the
    other processes of a loaded machine)."""
    times = []
    for _ in range(repeat):
        c0 = time.process_time()
        fn()
        times.append((time.process_time() - c0) / steps * 1e6)
    return min(times)


def _offline(repeat: int, wltc_s: float) -> dict:
    sys.path.insert(0, str(Path.cwd() / "examples"))
    from plant_models.offline import StepwiseRun
    from plant_models.registry import load_plant
    from reference_tcu import ZF8HP_CAR, ReferenceTcu
    from server.offline.controller import closed_loop
    from server.offline.run import run_offline, run_stepwise
    from server.offline.scenario import load_scenario
    from server.realtime.fault_schedule import FaultSchedule
    from slip_pi_controller import SlipPIController

    plant = load_plant("powershift")
    compiled = load_scenario("powershift_single_swap").compile(plant)
    n = compiled.n_steps
    fault = ({"target": "signal", "signal": "w_out", "kind": "offset", "value": 5.0}, 0.2, None)

    def stepwise_faults():
        schedule = FaultSchedule(plant, [fault], compiled.dt)
        plant.reset(compiled.start_inputs())
        StepwiseRun(plant, compiled.table, compiled.dt, n, 1, None, schedule).advance()
        schedule.reset()

    res = {"run_stepwise": _cpu_per_step(lambda: run_stepwise(plant, compiled), n, repeat),
           "stepwise_faults": _cpu_per_step(stepwise_faults, n, repeat),
           "run_offline": _cpu_per_step(lambda: run_offline(plant, compiled), n, repeat),
           "closed_loop_update": _cpu_per_step(
               lambda: closed_loop(plant, None, SlipPIController(), duration_s=1.0, dt=1e-3, use_kernel=False),
               1000, repeat)}
    car = load_plant("zf8hp_car")
    closed_loop(car, None, ReferenceTcu(ZF8HP_CAR), every=1000, duration_s=1.0, dt=1e-3)  # compiles the loop
    c0 = time.process_time()
    closed_loop(car, None, ReferenceTcu(ZF8HP_CAR), every=1000, duration_s=wltc_s, dt=1e-3)
    res["wltc_realtime_factor_cpu"] = wltc_s / (time.process_time() - c0)
    return res


def child(args) -> int:
    res = {"tick": _tick_blocks(args.blocks, args.block), "offline_cpu_us_per_step": _offline(args.repeat, args.wltc_s),
           "load_avg": list(os.getloadavg())}
    args.json.write_text(json.dumps(with_host(res)))
    return 0


def _export_and_warm(commit: str) -> tuple[Path, Path]:
    tmp = Path(tempfile.mkdtemp(prefix="gearbox-hil-pipeline-ab-"))
    tree, cache = tmp / "base", tmp / "numba-base"
    tree.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    subprocess.run([sys.executable, "-m", "server.cli.warmup"], cwd=tree, check=True, stdout=subprocess.DEVNULL,
                   env=dict(os.environ, PYTHONPATH=str(tree), NUMBA_CACHE_DIR=str(cache)))
    return tree, cache


def _run_child(tree: Path, cache: Path | None, args, out: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(tree))
    if cache is not None:
        env["NUMBA_CACHE_DIR"] = str(cache)
    # this script is run from this tree in both: it imports only the tree's public names, the same in both
    subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", "--json", str(out), "--blocks",
                    str(args.blocks), "--block", str(args.block), "--repeat", str(args.repeat), "--wltc-s",
                    str(args.wltc_s)], cwd=tree, env=env, check=True, stdout=subprocess.DEVNULL)
    return json.loads(out.read_text())


def _median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2] if len(xs) % 2 else 0.5 * (xs[len(xs) // 2 - 1] + xs[len(xs) // 2])


def _rows(results: list[tuple[int, str, dict]]) -> list[tuple[str, float, float, float]]:
    """(measure, base median, this median, median of the rounds' ratios this / base)."""
    def measures(r: dict) -> dict:
        m = {}
        for kind in KINDS:
            t = r["tick"][kind]
            m[f"tick {kind}: CPU us/tick, median block"] = t["cpu_us_per_tick"]
            m[f"tick {kind}: CPU us/tick, least block"] = t["cpu_us_per_tick_min"]
            m[f"tick {kind}: TET p50 us"] = t["tet_p50_us"]
            m[f"tick {kind}: TET p99 us"] = t["tet_p99_us"]
        for k in OFFLINE:
            m[f"{k}: CPU us/step"] = r["offline_cpu_us_per_step"][k]
        m["WLTC part, 8HP + reference TCU: real-time factor (CPU)"] = r["offline_cpu_us_per_step"][
            "wltc_realtime_factor_cpu"]
        return m

    rounds = sorted({rnd for rnd, _, _ in results})
    by = {(rnd, name): measures(r) for rnd, name, r in results}
    rows = []
    for key in by[(rounds[0], "base")]:
        base = [by[(rnd, "base")][key] for rnd in rounds]
        this = [by[(rnd, "this")][key] for rnd in rounds]
        rows.append((key, _median(base), _median(this), _median([t / b for t, b in zip(this, base)])))
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", default="HEAD", help="the base commit (exported with git archive and warmed)")
    ap.add_argument("--base-tree", type=Path, help="an exported base tree to reuse (with --base-cache)")
    ap.add_argument("--base-cache", type=Path, help="the base tree's warmed numba cache")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--blocks", type=int, default=8, help="tick blocks of each kind per child")
    ap.add_argument("--block", type=int, default=2000, help="ticks per block")
    ap.add_argument("--repeat", type=int, default=3, help="calls of each offline run per child (median)")
    ap.add_argument("--wltc-s", type=float, default=60.0, help="seconds of the WLTC run closed loop")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args)
    if args.base_tree is not None:
        tree, cache = args.base_tree, args.base_cache
    else:
        tree, cache = _export_and_warm(args.baseline)
    out = Path(tempfile.mkdtemp(prefix="gearbox-hil-pipeline-runs-"))
    results = []
    for rnd in range(1, args.rounds + 1):
        for name, t, c in (("base", tree, cache), ("this", ROOT, None)):
            print(f"round {rnd}: {name} ...", file=sys.stderr, flush=True)
            results.append((rnd, name, _run_child(t, c, args, out / f"{name}_{rnd}.json")))
    rows = _rows(results)
    loads = [r["load_avg"][0] for _, _, r in results]
    print(f"\nbase {args.baseline}, this tree; {args.rounds} rounds; load average during the runs "
          f"{min(loads):.1f}-{max(loads):.1f}\n")
    print("| measure | base (median of rounds) | this | this / base (median of rounds) |")
    print("| --- | --- | --- | --- |")
    for key, b, t, ratio in rows:
        print(f"| {key} | {b:.3f} | {t:.3f} | {ratio:.3f} |")
    if args.json:
        doc = {"command": "python bench/bench_pipeline.py " + " ".join(sys.argv[1:]), "baseline": args.baseline,
               "rounds": [{"round": rnd, "version": name, **r} for rnd, name, r in results],
               "summary": [{"measure": k, "base": b, "this": t, "ratio": q} for k, b, t, q in rows]}
        args.json.write_text(json.dumps(with_host(doc), indent=1) + "\n")
    return 0


if __name__ == "__main__":
    print(host_line(), flush=True)
    sys.exit(main())
