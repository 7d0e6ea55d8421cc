#!/usr/bin/env python3
"""What injected faults cost per tick: the loop's tick with 10 active signal faults against none, in one run.

The server's own tick (:meth:`server.realtime.loop.Loop._tick`: the run
pipeline's stages, adapters' read, the faulted inputs, the plant step, the
faulted outputs, the state-ring row, the inputs restored) of the Powershift plant in lockstep
mode, in process, in blocks of ``--block`` ticks taken in turn without faults, with the
faults set, and without faults again, so that drift of the machine's load
hits all alike; the two fault-free kinds measured against each other give
the run's noise floor.  The
plant runs in gear 1 at constant inputs throughout.

The 10 faults, 5 on outputs (offset, gain, seeded noise, freeze, force) and
5 on inputs (force, freeze, drop-out, offset, gain), are chosen so that the
values the plant receives stay those of the fault-free run (forced to the
commanded 0 bar, an offset of 0 bar, a gain of 1, ...): each fault does its
full work in the kernels, but the physics, and so the plant step's own cost,
is the same with and without them, so the difference is the faults' cost
alone.  Clutch faults cost nothing per tick (they change model floats when
set) and are not in the set.

Also reported: the fault stages of a faulted tick alone (the run pipeline's
``fault_inputs``, ``fault_outputs`` and ``fault_restore``, each one compiled
call, around the state-ring row), back to back in a tight loop, against the
plain ring push alone.

    python bench/bench_faults.py --blocks 40 --block 2000
    python bench/bench_faults.py --blocks 40 --block 2000 --tick-path python   # the Python stepper
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from plant_models.registry import load_plant  # noqa: E402
from server.realtime.loop_config import LoopConfig  # noqa: E402
from server.realtime.runtime import assemble  # noqa: E402
from _host import host_line, with_host  # noqa: E402  (bench/ is first on the path)
from _support import FAULT_INITIAL as INITIAL, SIGNAL_FAULTS as FAULTS  # noqa: E402



def pct(x) -> dict:
    x = np.asarray(x, dtype=float) / 1000.0
    p999 = float(np.percentile(x, 99.9))
    return {"p50_us": round(float(np.percentile(x, 50)), 3), "p99_us": round(float(np.percentile(x, 99)), 3),
            "p999_us": round(p999, 3), "max_us": round(float(x.max()), 3), "mean_us": round(float(x.mean()), 3),
            "mean_below_p999_us": round(float(x[x <= p999].mean()), 3), "n": int(x.size)}


def time_blocks(lp, blocks: int, block: int) -> tuple[dict, str]:
    """Three kinds of block in turn: no faults (A), 10 faults, no faults again (A'): A against A' is the
    same-run noise floor of every difference (the same code measured twice).  Tick times per kind, ns, and the
    tick path taken with the faults."""
    tick = lp._tick
    mono = time.perf_counter_ns
    samples = {0: [], 10: [], -1: []}
    gc.collect()
    gc.disable()  # as the loop does while it runs
    for b in range(3 * blocks):
        n = (0, 10, -1)[b % 3]
        if n > 0:
            for f in FAULTS:
                lp.set_fault(f)
        buf = np.empty(block, dtype=np.int64)
        for j in range(block):
            t0 = mono()
            tick(lp.sim_ns())
            buf[j] = mono() - t0
        samples[n].append(buf)
        if n > 0:
            assert len(lp.faults.active) == 10 and lp.status_word == 0
            faulted_path = lp.tick_path
            lp.clear_fault()
    gc.enable()
    return samples, faulted_path


def time_fault_calls(lp, reps: int = 200_000) -> tuple[int, float, float]:
    """The fault stages' calls alone and a plain ring push alone, ns per tick, with the 10 faults set; and the
    fault table's rows used."""
    mono = time.perf_counter_ns
    fs = lp.faults
    for f in FAULTS:
        lp.set_fault(f)
    rows_used = fs.n_signal
    fin, fout, frestore, push = fs.inputs, fs.outputs, fs.restore, lp._ring_push
    t0 = mono()
    for k in range(reps):
        fin(k)
        fout(k)
        push(k, 0, 0.0)
        frestore(k)
    stage_ns = (mono() - t0) / reps
    t0 = mono()
    for k in range(reps):
        push(k, 0, 0.0)
    push_ns = (mono() - t0) / reps
    lp.clear_fault()
    return rows_used, stage_ns, push_ns


def report(samples: dict, faulted_path: str, rows_used: int, stage_ns: float, push_ns: float) -> dict:
    """The result: percentiles per kind of block, their differences and the same-run noise floor, us."""
    none = np.concatenate(samples[0])
    ten = np.concatenate(samples[10])
    again = np.concatenate(samples[-1])
    # per block pair: the difference of medians (robust against slow drift of the machine's load)
    pair_diff = [float(np.median(a) - np.median(b)) / 1000.0 for a, b in zip(samples[10], samples[0])]
    aa_diff = [float(np.median(a) - np.median(b)) / 1000.0 for a, b in zip(samples[-1], samples[0])]
    return {
        "command": "python bench/bench_faults.py " + " ".join(sys.argv[1:]),
        "loadavg": list(os.getloadavg()),
        "tick_path_with_faults": faulted_path,
        "tick_no_faults": pct(none),
        "tick_10_faults": pct(ten),
        "tick_no_faults_again": pct(again),
        "p50_difference_us": round((float(np.median(ten)) - float(np.median(none))) / 1000.0, 3),
        "mean_difference_us": round((float(ten.mean()) - float(none.mean())) / 1000.0, 3),
        "mean_below_p999_difference_us": round(pct(ten)["mean_below_p999_us"] - pct(none)["mean_below_p999_us"], 3),
        "block_pair_median_difference_us": {"median": round(float(np.median(pair_diff)), 3),
                                            "p10": round(float(np.percentile(pair_diff, 10)), 3),
                                            "p90": round(float(np.percentile(pair_diff, 90)), 3)},
        "noise_floor_no_faults_again_minus_no_faults_us": {
            "p50": round((float(np.median(again)) - float(np.median(none))) / 1000.0, 3),
            "mean": round((float(again.mean()) - float(none.mean())) / 1000.0, 3),
            "mean_below_p999": round(pct(again)["mean_below_p999_us"] - pct(none)["mean_below_p999_us"], 3),
            "block_pair_median": round(float(np.median(aa_diff)), 3)},
        "fault_calls_alone_us_per_tick": round(stage_ns / 1000.0, 3),
        "plain_ring_push_alone_us_per_tick": round(push_ns / 1000.0, 3),
        "signal_faults": len(FAULTS), "table_rows_used": rows_used,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--blocks", type=int, default=40, help="blocks of each kind (taken in turn)")
    ap.add_argument("--block", type=int, default=2000, help="ticks per block")
    ap.add_argument("--tick-path", default="auto", choices=("auto", "python"),
                    help="auto: the compiled tick (with the fault stages' compiled forms); python: the stepper")
    ap.add_argument("--json", type=Path, help="write the result here")
    args = ap.parse_args()

    plant = load_plant("powershift")
    srv = assemble(plant, [], LoopConfig(mode="lockstep"), initial_inputs=INITIAL)
    lp = srv.loop
    lp.choose_tick_path(args.tick_path)
    lp.start()
    lp.step(2000)  # settle in gear 1
    for f in FAULTS:
        lp.set_fault(f)
    lp.step(500)  # warm the fault path
    lp.clear_fault()
    lp.step(500)
    samples, faulted_path = time_blocks(lp, args.blocks, args.block)
    res = report(samples, faulted_path, *time_fault_calls(lp))
    text = json.dumps(with_host(res), indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    return 0

if __name__ == "__main__":
    print(host_line(), flush=True)
    raise SystemExit(main())
