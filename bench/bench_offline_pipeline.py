#!/usr/bin/env python3
"""Same-run A/B of the compiled offline run: the loop over the stage list's compiled forms against the hand-written
loops it replaced, in one process, on the same plants, tables and fault tables.

``plant_models.offline.Run`` and ``plant_models.closed_loop.StagedRun`` now step through
``plant_models.run.offline_compiled.run_compiled`` (the stages' compiled forms, called by address).  The loops
they replaced (``run_steps``, ``run_staged_steps``, commit 11d4578) are kept in ``bench/_legacy_offline.py``;
this script swaps the runs' ``advance`` between the two, round after round (A, B, A, B, ...), so drift of the
machine's load hits both alike, and checks that both give the same rows, bit for bit.  Measured per run: the
process's CPU time and the wall time of ``advance`` (the whole compiled loop; the plant's reset and the trace
outside), a short run repeated until a measurement takes ``--min-cpu`` seconds (the mean per run kept).  Cases:

* open loop (``run_offline``, ``Run``): the Powershift's swaps, the DCT's upshift, the 4-mass chain, every step a row;
* long open loops (``Run`` alone, ``--steps`` steps of the Powershift's and the chain's tables, held after their
  end, a row every 1000 steps: the per-step cost of the loop, most steps' outputs unread);
* with a fault schedule (``run_offline`` with faults, ``StagedRun``): the Powershift's single swap, a noisy speed
  sensor and an offset on the engine torque;
* closed loop (``closed_loop``, ``StagedRun`` with a kernel): the 8HP car with the reference TCU's kernel over
  the first ``--wltc`` seconds of the WLTC, rows every 1000 steps (``bench/bench_drive_cycle.py``'s run).

    PYTHONPATH=. python bench/bench_offline_pipeline.py --rounds 7 --wltc 120
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))
import _legacy_offline as legacy  # noqa: E402  (bench/ is first on the path)
from _host import host_line  # noqa: E402

from plant_models import closed_loop as closed_loop_module, offline  # noqa: E402
from plant_models.core.api import L  # noqa: E402
from plant_models.input_table import TAB_CONST, TI_KIND  # noqa: E402
from plant_models.registry import load_plant  # noqa: E402
from plant_models.run.compiled import P_STEP_AT  # noqa: E402
from plant_models.run.fault_tables import fault_inputs, fault_outputs, fault_restore  # noqa: E402

TIMES: list[tuple[float, float]] = []  # (CPU s, wall s) of each advance


def _timed(advance):
    def timed(self, steps=None):
        c0, w0 = time.process_time(), time.perf_counter()
        k = advance(self, steps)
        TIMES.append((time.process_time() - c0, time.perf_counter() - w0))
        return k
    return timed


def legacy_run_advance(self, steps=None):
    """``Run.advance`` through the hand-written ``run_steps``."""
    k1 = self.n_steps if steps is None else min(self.n_steps, self.k + int(steps))
    p = self.plant
    t_at, src_at, kind_at, count_at, cap = p.event_log()
    lay = np.array([p.input_offset, p.output_offset, p.n_out, self.every, self.n_steps, t_at, src_at, kind_at,
                    count_at, cap, p.run_hints_slot()], dtype=np.int64)
    step_at = int(self.plan.plan[P_STEP_AT])
    while self.k < k1:
        self.k = int(legacy.run_steps(step_at, p.mf, p.mi, p.df, p.di, self.kind, self.times, self.values, self.dt,
                                      self.k, k1, lay, self.acc, self.out, self.out_step, *self._ev))
        if self.k < k1:
            self._ev = [np.resize(a, 2 * a.shape[0]) for a in self._ev]
    if self.done:
        p.mark_events_read()
    return self.k


def legacy_staged_advance(self, steps=None):
    """``StagedRun.advance`` through the hand-written ``run_staged_steps``."""
    p, f = self.plant, self.faults
    t_at, src_at, kind_at, count_at, cap = p.event_log()
    lay = np.zeros(legacy.LAY_STAGED, dtype=np.int64)
    lay[:legacy.LAY_LEN] = (p.input_offset, p.output_offset, p.n_out, self.every, self.n_steps, t_at, src_at,
                            kind_at, count_at, cap, p.run_hints_slot())
    if self.period:
        owned, owned_mask, held = self.owned, self.owned_mask, self.held
        kernel, kstate, kparams, ybuf, ubuf = self.kernel, self.kstate, self.kparams, self.ybuf, self.ubuf
        mine = {int(i) for i in owned}
        lay[legacy.LAY_TIME], lay[legacy.LAY_PERIOD], lay[legacy.LAY_CLOSED] = p.mi[L.DF_TIME], self.period, 1
        lay[legacy.LAY_HELD_ONLY] = int(all(self.kind[i, TI_KIND] == TAB_CONST for i in range(p.n_in)
                                            if i not in mine))
    else:
        owned, owned_mask, held = np.zeros(0, np.int64), np.zeros(p.n_in, np.int64), np.array(p.u)
        kernel, kstate, kparams, ybuf, ubuf = legacy.no_kernel, np.zeros(1), np.zeros(1), np.empty(p.n_out), \
            np.empty(p.n_in)
    if f is None:
        stage = (legacy.no_stage, legacy.no_stage, legacy.no_stage, np.zeros((1, 1), np.int64), np.zeros((1, 1)))
    else:
        stage = (fault_inputs, fault_outputs, fault_restore, f.fi, f.ff)
    step_at = int(self.plan.plan[P_STEP_AT])
    end = self.n_steps if steps is None else min(self.n_steps, self.k + int(steps))
    while self.k < end:
        k1, nf = end, 0
        if f is not None:
            f.switch(self.k)
            nxt = f.next_step
            k1, nf = (end if nxt is None else min(end, nxt)), f.n_signal
        k = int(legacy.run_staged_steps(kernel, *stage, nf, step_at, p.mf, p.mi, p.df, p.di, self.kind, self.times,
                                        self.values, self.dt, self.k, k1, lay, self.acc, self.out, self.out_u,
                                        self.out_step, *self._ev, owned, owned_mask, held, ybuf, ubuf, kstate,
                                        kparams))
        if k < k1:
            self._ev = [np.resize(a, 2 * a.shape[0]) for a in self._ev]
        self.k = k
    if self.done:
        p.mark_events_read()
    return self.k


VERSIONS = {"stage list": (offline.Run.advance, closed_loop_module.StagedRun.advance),
            "hand-written": (legacy_run_advance, legacy_staged_advance)}


def use(version: str) -> None:
    run_adv, staged_adv = VERSIONS[version]
    offline.Run.advance = _timed(run_adv)
    closed_loop_module.StagedRun.advance = _timed(staged_adv)


def cases(wltc_s: float, long_steps: int):
    from reference_tcu import ZF8HP_CAR, ReferenceTcu

    from server.offline.controller import closed_loop
    from server.offline.run import run_offline
    from server.offline.scenario import load_scenario
    from server.realtime.fault_schedule import FaultSchedule

    def open_loop(plant_name, scenario):
        plant = load_plant(plant_name)
        compiled = load_scenario(scenario).compile(plant)
        return lambda: run_offline(plant, compiled).values

    def long_run(plant_name, scenario, n_steps, every):
        plant = load_plant(plant_name)
        compiled = load_scenario(scenario).compile(plant)

        def one():
            plant.reset(compiled.start_inputs())
            run = offline.Run(plant, compiled.table, compiled.dt, n_steps, every)
            run.advance()
            return run.out
        return one

    def with_faults():
        plant = load_plant("powershift")
        compiled = load_scenario("powershift_single_swap").compile(plant)
        faults = [({"target": "signal", "signal": "w_out", "kind": "noise", "value": 2.0}, 0.1, None),
                  ({"target": "signal", "signal": "engine_torque", "kind": "offset", "value": 20.0}, 0.2, 0.6)]
        return lambda: run_offline(plant, compiled, faults=FaultSchedule(plant, faults, compiled.dt)).values

    def wltc():
        plant = load_plant("zf8hp_car")

        def one():
            r = closed_loop(plant, None, ReferenceTcu(ZF8HP_CAR), every=1000, duration_s=wltc_s, dt=1e-3)
            return np.hstack([r.outputs, r.inputs])
        return one

    return {"powershift_swaps (open loop)": open_loop("powershift", "powershift_swaps"),
            "dct_upshift (open loop)": open_loop("dct", "dct_upshift"),
            "chain_4mass (open loop)": open_loop("chain", "chain_4mass"),
            f"powershift_swaps' table, {long_steps} steps, a row every 1000": long_run(
                "powershift", "powershift_swaps", long_steps, 1000),
            f"chain_4mass' table, {long_steps} steps, a row every 1000": long_run("chain", "chain_4mass", long_steps,
                                                                                 1000),
            "powershift_single_swap + 2 signal faults": with_faults(),
            f"8HP car + reference TCU kernel, WLTC first {wltc_s:.0f} s": wltc()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--wltc", type=float, default=120.0, help="simulated seconds of the WLTC closed loop")
    ap.add_argument("--steps", type=int, default=200_000, help="steps of the long open-loop runs")
    ap.add_argument("--min-cpu", type=float, default=0.3, help="CPU seconds a measurement takes at least (a short "
                    "run is repeated that many times and the mean of one run kept)")
    ap.add_argument("--only", default="", help="run only the cases whose name holds this text")
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args(argv)
    results = {}
    for name, fn in cases(a.wltc, a.steps).items():
        if a.only and a.only not in name:
            continue
        per: dict[str, list[tuple[float, float]]] = {v: [] for v in VERSIONS}
        rows = {}
        for version in VERSIONS:  # warm-up: compiles (the closed loop's kernel stage, the legacy loops)
            use(version)
            rows[version] = fn()
        same = rows["stage list"].tobytes() == rows["hand-written"].tobytes()
        TIMES.clear()
        fn()
        inner = max(1, int(np.ceil(a.min_cpu / max(sum(t[0] for t in TIMES), 1e-4))))  # runs per measurement
        for r in range(a.rounds):
            for version in (VERSIONS if r % 2 == 0 else reversed(list(VERSIONS))):
                use(version)
                TIMES.clear()
                for _ in range(inner):
                    fn()
                per[version].append((sum(t[0] for t in TIMES) / inner, sum(t[1] for t in TIMES) / inner))
        new, old = np.array(per["stage list"]), np.array(per["hand-written"])
        results[name] = {"bit_identical": same, "runs_per_measurement": inner, "cpu_s_new": new[:, 0].tolist(), "cpu_s_old": old[:, 0].tolist(),
                         "wall_s_new": new[:, 1].tolist(), "wall_s_old": old[:, 1].tolist()}
        cn, co = float(np.median(new[:, 0])), float(np.median(old[:, 0]))
        paired = float(np.median(new[:, 0] / old[:, 0]))
        print(f"| {name} | {'yes' if same else 'NO'} | {co * 1e3:.1f} | {cn * 1e3:.1f} | {cn / co:.3f} | "
              f"{paired:.3f} | {np.median(old[:, 1]) * 1e3:.1f} | {np.median(new[:, 1]) * 1e3:.1f} |", flush=True)
    if a.json:
        a.json.write_text(json.dumps({"host": host_line(), "rounds": a.rounds, "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    print(host_line(), flush=True)
    print("| case | rows bit-identical | CPU ms hand-written (median) | CPU ms stage list (median) | ratio of medians "
          "| median of paired ratios | wall ms hand-written | wall ms stage list |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    raise SystemExit(main())
