#!/usr/bin/env python3
"""What a controller call costs offline: Python ``update`` against its numba kernel in the compiled loop, one run.

The controller is ``examples/slip_pi_controller.py`` (a PI loop on clutch
2's slip; its ``update`` calls its kernel) on the Powershift plant, no
scenario, 1 ms steps.  Measured, in repeats taken in turn so that drift of
the machine's load hits all alike:

* a whole closed-loop run (``--seconds`` simulated, the controller every
  ``period_ticks`` = 2 ticks) through the Python step loop with ``update``
  (:func:`server.offline.controller.closed_loop` with ``use_kernel=False``)
  and through the compiled loop with the kernel
  (:class:`plant_models.closed_loop.StagedRun`);
* an open-loop run with a fault schedule (the single swap, a noisy speed
  sensor, an offset on the engine torque and a worn clutch):
  :func:`server.offline.run.run_offline` with the fault stage inside the
  compiled loop (:class:`plant_models.closed_loop.StagedRun`) against the
  same run a step at a time from Python (:class:`plant_models.offline.StepwiseRun`);
* one controller call alone, in a tight loop: ``update`` from Python (what
  the Python step loop, a lockstep or a realtime client pays per call) and
  the kernel from compiled code (what the compiled loop pays), with the
  same arrays and the PI branch taken.

    python bench/bench_closed_loop.py --repeats 15 --seconds 5
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
from numba import njit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from plant_models.registry import load_plant  # noqa: E402
from server.offline.controller import closed_loop  # noqa: E402
from _host import host_line, with_host  # noqa: E402  (bench/ is first on the path)

INITIAL = {"p_c3": 16.0, "p_c6": 16.0, "engine_torque": 300.0, "load_torque": 0.0}


def _example():
    spec = importlib.util.spec_from_file_location("slip_pi_controller", ROOT / "examples" / "slip_pi_controller.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def _run(pi, plant, seconds: float, period: int, kernel: bool) -> float:
    ctl = pi.SlipPIController(period_ticks=period, initial=INITIAL)
    r = closed_loop(plant, None, ctl, duration_s=seconds, dt=1e-3, use_kernel=kernel)
    return r.wall_time_s


def _update_alone(pi, plant, calls: int) -> float:
    ctl = pi.SlipPIController(initial=INITIAL)
    ctl.bind(tuple(s.name for s in plant.outputs), tuple(s.name for s in plant.inputs))
    y, u = np.array(plant.y), np.array(plant.u)
    t0 = time.perf_counter()
    for k in range(calls):
        ctl.update(0.5, y, u)
    return (time.perf_counter() - t0) / calls


FAULTS = [({"target": "signal", "signal": "w_out", "kind": "noise", "value": 0.5, "seed": 7}, 0.2, 0.8),
          ({"target": "signal", "signal": "engine_torque", "kind": "offset", "value": -30.0}, 0.4, None),
          ({"target": "clutch", "clutch": 3, "kind": "worn", "value": 0.8}, 0.3, None)]


def _faulted(plant, compiled, staged: bool) -> float:
    from plant_models.offline import StepwiseRun
    from server.offline.run import run_offline
    from server.realtime.fault_schedule import FaultSchedule

    sched = FaultSchedule(plant, FAULTS, compiled.dt)
    if staged:
        return run_offline(plant, compiled, faults=sched).wall_time_s / compiled.n_steps
    sched.reset()
    plant.reset(compiled.start_inputs())
    run = StepwiseRun(plant, compiled.table, compiled.dt, compiled.n_steps, 1, None, sched)
    t0 = time.perf_counter()
    run.advance()
    took = time.perf_counter() - t0
    sched.reset()
    return took / compiled.n_steps


@njit
def _kernel_loop(kernel, calls, y, u, state, params):
    for _ in range(calls):
        kernel(0.5, y, u, state, params)


def _kernel_alone(pi, plant, calls: int) -> float:
    ctl = pi.SlipPIController(initial=INITIAL)
    ctl.bind(tuple(s.name for s in plant.outputs), tuple(s.name for s in plant.inputs))
    y, u = np.array(plant.y), np.array(plant.u)
    t0 = time.perf_counter()
    _kernel_loop(ctl.kernel, calls, y, u, ctl.kernel_state, ctl.kernel_params)
    return (time.perf_counter() - t0) / calls


def _stats(a) -> dict:
    a = np.asarray(a)
    return {"median": float(np.median(a)), "p10": float(np.percentile(a, 10)), "p90": float(np.percentile(a, 90))}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--seconds", type=float, default=5.0, help="simulated time of a run, s")
    ap.add_argument("--json", type=Path, help="write the results here")
    args = ap.parse_args()
    pi = _example()
    plant = load_plant("powershift")
    n = int(round(args.seconds / 1e-3))
    from server.offline.scenario import ScenarioFolders

    swap = ScenarioFolders.default().read("powershift_single_swap").compile(plant, warn=False)
    for kernel in (False, True):  # compile and warm every path
        _run(pi, plant, 0.05, 2, kernel)
        _faulted(plant, swap, kernel)
    _update_alone(pi, plant, 1000)
    _kernel_alone(pi, plant, 1000)
    rows = {k: [] for k in ("python_step", "kernel_step", "update_call", "kernel_call", "faults_stepwise_step",
                            "faults_compiled_step")}
    for _ in range(args.repeats):
        rows["faults_stepwise_step"].append(_faulted(plant, swap, False))
        rows["faults_compiled_step"].append(_faulted(plant, swap, True))
        rows["python_step"].append(_run(pi, plant, args.seconds, 2, False) / n)
        rows["kernel_step"].append(_run(pi, plant, args.seconds, 2, True) / n)
        rows["update_call"].append(_update_alone(pi, plant, 20000))
        rows["kernel_call"].append(_kernel_alone(pi, plant, 1_000_000))
    us = {k: {q: v * 1e6 for q, v in _stats(a).items()} for k, a in rows.items()}
    ratio = _stats(np.array(rows["python_step"]) / np.array(rows["kernel_step"]))
    call_ratio = _stats(np.array(rows["update_call"]) / np.array(rows["kernel_call"]))
    fault_ratio = _stats(np.array(rows["faults_stepwise_step"]) / np.array(rows["faults_compiled_step"]))
    out = {"command": " ".join(sys.argv), "loadavg": list(os.getloadavg()), "steps_per_run": n,
           "us": us, "run_ratio_python_over_kernel": ratio, "call_ratio_python_over_kernel": call_ratio,
           "faults_ratio_stepwise_over_compiled": fault_ratio}
    print(json.dumps(out, indent=2))
    if args.json:
        args.json.write_text(json.dumps(with_host(out), indent=2) + "\n")
    return 0


if __name__ == "__main__":
    print(host_line(), flush=True)
    sys.exit(main())
