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

    python bench/bench_fmi.py --ticks 20000 [--kind cs2|cs3|me]

``--kind``: the FMU's FMI version and kind: ``cs2`` the FMI 2.0
co-simulation source (default), ``cs3`` its FMI 3.0 twin
(``first_order3.c``), ``me`` the FMI 2.0 model-exchange lag
(``me_model.c``, integrated by RK4 in the assembly: four derivative
evaluations a tick), ``me3`` its FMI 3.0 twin (``me_model3.c``).  ``--process``: where the FMU runs, ``server`` (in
this process, default), ``own`` (``process = "own"``: a child process, one
round trip over a socket pair a tick) or ``both`` (the two interleaved with
the bare plant in one run).  Each row also gives this process's CPU time
per tick (``process_time``); with ``own``, the child's CPU from ``/proc``.

    python bench/bench_fmi.py --ticks 20000 --process both

``--broken``: an FMU in its own process that segfaults (and one that hangs,
``timeout_s`` 5 ms) at t = 0.1 s, stepped back to back: the time of the
tick in which the fault is caught (the socket's end and the reaping, or the
deadline and the kill), five loads each, against the median tick before and
after (the FMU skipped).

    python bench/bench_fmi.py --broken --ticks 300

With ``--export``: the exported Powershift FMU (``gearbox-hil fmu``, its
plant in a process of its own) stepped by FMPy's ``FMU2Slave`` in this
process, a communication step being set inputs (10), ``fmi2DoStep``, get
outputs (56), against the bare plant's step in interleaved blocks; and the
time from ``fmi2Instantiate`` to a ready instance and of ``fmi2FreeInstance``.

    python bench/bench_fmi.py --export --ticks 5000

With a ``cs2`` FMU in this process the assembly's step is one compiled
call (``plant_models/fmi/compiled.py``); the default run then times the
assembly stepped from Python (``plant + FMU (Python step)``, the code before
the compiled step) beside it.  ``--offline N``: ``run_offline`` of N steps
with the FMU, the Python assembly (a step at a time) against the compiled
one (the compiled loop), and for the floor the bare plant in the compiled
loop fed the torque the FMU gave; wall and CPU time, ``--repeat`` runs
each, interleaved, and whether the two runs' outputs are equal bit for bit.

    python bench/bench_fmi.py --offline 20000 --repeat 5

``--offline N --base COMMIT``: the same offline run against the code of
another commit (the issue's "today's stepwise run"), same run: the commit
is exported (``git archive``, as ``bench/bench_ab.py`` does) with its own
numba cache, and ``--rounds`` times a process of each tree runs the
offline run ``--repeat`` times after a warm-up (the base: its assembly, a
step at a time; this tree: the compiled assembly and the Python one,
interleaved); CPU and wall time per step, and whether the outputs equal the
base's bit for bit.

    python bench/bench_fmi.py --offline 20000 --repeat 5 --base 2d6af9c --rounds 3
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from types import SimpleNamespace

import numpy as np
from _host import host_line  # noqa: E402  (bench/ is first on the path)

ROOT = Path(__file__).resolve().parents[1]
# the tree whose code runs: this checkout, or (--offline-worker under --base) the base commit's export
TREE = Path(os.environ.get("GEARBOX_HIL_BENCH_TREE", ROOT))
sys.path[:0] = [str(TREE), str(TREE / "tests")]  # that tree first, then its tests' FMU builder


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


def _children_cpu_s(plant) -> float:
    """CPU seconds (user + system) of the FMU processes of an assembly (0 for FMUs in this process)."""
    total = 0.0
    for slot in getattr(plant, "slots", ()):
        proc = getattr(slot, "proc", None)
        if proc is not None:
            fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def broken(ticks: int) -> int:
    """The tick in which an FMU in its own process segfaults or hangs, against the ticks around it."""
    from fmu_build import build_first_order
    from plant_models.registry import load_plant
    dt, fail_at, timeout = 1e-3, 0.1, 0.005
    gear = {"p_c1": 16.0, "p_c3": 16.0, "p_c6": 16.0}
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        for how in ("crash", "hang"):
            build_first_order(d / f"{how}.fmu", fail_by=how)
            cfg = d / f"{how}.toml"
            cfg.write_text(f'extends = "{ROOT / "configs" / "powershift.toml"}"\n\n[[fmu]]\nname = "engine"\n'
                           f'file = "{how}.fmu"\nstart = {{ tau = 0.05, fail_at = {fail_at} }}\n'
                           f'to_plant = {{ torque = "engine_torque" }}\nprocess = "own"\ntimeout_s = {timeout}\n')
            worst, k_fail = [], int(round(fail_at / dt))
            for _ in range(5):
                p = load_plant(cfg)
                p.reset({"engine.torque_cmd": 300.0, **gear})
                t = timed(p, ticks, dt) / 1e3
                worst.append(t[k_fail])
                before, after = np.median(t[:k_fail]), np.median(t[k_fail + 1:])
                p.close()
            print(f"{how}: the tick of the fault {', '.join(f'{x:.0f}' for x in worst)} us (5 loads; timeout_s "
                  f"{timeout} for the hang); last load: median tick before {before:.2f} us, after {after:.2f} us "
                  f"(the FMU skipped); {p.fmu_errors[0]}")
    return 0


def exported(ticks: int, block: int) -> int:
    """The exported FMU's communication step against the bare plant step (see the module docstring)."""
    import os
    import fmpy
    from fmpy.fmi2 import FMU2Slave
    from plant_models.registry import load_plant
    from server.cli.fmu import export
    os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])  # this checkout
    dt, gear = 1e-3, {"p_c1": 16.0, "p_c3": 16.0, "p_c6": 16.0}
    with tempfile.TemporaryDirectory() as tmp:
        fmu = export("powershift", Path(tmp) / "ps.fmu")
        md = fmpy.read_model_description(str(fmu))
        unzipped = fmpy.extract(str(fmu))
        ins = [v for v in md.modelVariables if v.causality == "input"]
        vr_in = [v.valueReference for v in ins]
        vr_out = [v.valueReference for v in md.modelVariables if v.causality == "output"]
        u = [gear.get(v.name, 300.0 if v.name == "engine_torque" else 0.0) for v in ins]
        starts, frees = [], []
        for k in range(4):  # the first start loads the kernels from numba's cache; the others are what a run sees
            t0 = time.perf_counter()
            s = FMU2Slave(guid=md.guid, unzipDirectory=unzipped, modelIdentifier=md.coSimulation.modelIdentifier,
                          instanceName=f"bench{k}")
            s.instantiate()
            s.setupExperiment(startTime=0.0)
            s.setReal(vr_in, u)
            s.enterInitializationMode()
            s.exitInitializationMode()
            starts.append(time.perf_counter() - t0)
            if k < 3:
                t0 = time.perf_counter()
                s.terminate()
                s.freeInstance()
                frees.append(time.perf_counter() - t0)
        bare = load_plant("powershift")
        bare.reset({"engine_torque": 300.0, **gear})
        clock = time.perf_counter_ns

        def fmu_steps(n: int, k0: int) -> np.ndarray:
            out = np.empty(n, dtype=np.int64)
            for k in range(n):
                t0 = clock()
                s.setReal(vr_in, u)
                s.doStep((k0 + k) * dt, dt)
                s.getReal(vr_out)
                out[k] = clock() - t0
            return out
        fmu_steps(500, 0), timed(bare, 500, dt)  # warm-up
        tb, tf = [], []
        for j in range(ticks // block):
            tb.append(timed(bare, block, dt))
            tf.append(fmu_steps(block, 500 + j * block))
        s.terminate()
        s.freeInstance()
    tb, tf = np.concatenate(tb) / 1e3, np.concatenate(tf) / 1e3
    pb, pf = np.percentile(tb, [50, 99]), np.percentile(tf, [50, 99])
    print(f"steps {len(tb)} each, dt = 1 ms; load average {os.getloadavg()[0]:.1f}")
    print(f"bare plant step (in process):          p50 {pb[0]:7.2f} us   p99 {pb[1]:7.2f} us")
    print(f"exported FMU step (set, doStep, get):  p50 {pf[0]:7.2f} us   p99 {pf[1]:7.2f} us   "
          f"ratio p50 {pf[0] / pb[0]:.1f}")
    print(f"instantiate to ready: first {starts[0]:.2f} s, then {', '.join(f'{x:.2f}' for x in starts[1:])} s; "
          f"free {', '.join(f'{1e3 * x:.0f}' for x in frees)} ms")
    return 0


def builders(kind: str):
    """The FMU builder of ``--kind``: the co-simulation source (FMI 2.0, 3.0) or the model-exchange lag (2.0, 3.0)."""
    from fmu_build import build_first_order, build_first_order3, build_me
    return {"cs2": build_first_order, "cs3": build_first_order3, "me": lambda out: build_me(out, "lag"),
            "me3": lambda out: build_me(out, "lag", version=3)}[kind]


def offline_runs(n_steps: int, repeat: int, kind: str = "cs2") -> int:
    """An offline run of ``n_steps`` with the FMU as ``run_offline`` takes it (the plant's reset, ``make_run``, all
    steps): the Python assembly (a step at a time, StepwiseRun) against the compiled one (the compiled loop, Run);
    for the floor, the bare plant in the compiled loop with the torque the FMU gave, held over each step (the same
    physics without the FMU).  Interleaved, ``repeat`` runs each; wall and CPU time.  ``kind``: ``cs2`` the
    co-simulation lag, ``me`` the model-exchange one (``cs3``, ``me3``: their FMI 3.0 twins)."""
    from fmu_build import python_assembly
    from plant_models.offline import InputTable, make_run
    from plant_models.registry import load_plant
    from server.offline.run import run_offline
    from server.offline.scenario import parse_scenario
    dt = 1e-3
    fixed = {"load_torque": 3500.0, "p_c1": 16.0, "p_c3": 16.0, "p_c6": 16.0}
    scenario = {"duration_s": n_steps * dt, "dt_s": dt, "interpolation": "linear",
                "leave_at_default": ["p_c2", "p_c4", "p_c5", "p_c7", "p_c8"],
                "inputs": {"engine.torque_cmd": [[0.0, 100.0], [n_steps * dt, 400.0]], **fixed}}
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        builders(kind)(d / "engine.fmu")
        cfg = d / "ps.toml"
        cfg.write_text(f'extends = "{ROOT / "configs" / "powershift.toml"}"\n\n[[fmu]]\nname = "engine"\n'
                       'file = "engine.fmu"\nstart = { tau = 0.05 }\nto_plant = { torque = "engine_torque" }\n')
        plants = {"Python step, StepwiseRun": python_assembly(cfg), "compiled step, Run": load_plant(cfg)}
        runs = {k: (parse_scenario(scenario, "inline").compile(p), None) for k, p in plants.items()}

        def one(k):
            p, (c, start) = plants[k], runs[k]
            p.reset(start or c.start_inputs())
            run = make_run(p, c.table, dt, n_steps)
            run.advance()
            return run
        out = {k: one(k).out for k in plants}  # warm-up, and the FMU's torque for the floor
        torque = out["compiled step, Run"][1:, plants["compiled step, Run"].output_index("engine.torque")]
        bare = load_plant("powershift")
        table = InputTable(bare.n_in)
        for name, v in fixed.items():
            table.set_const(bare.input_index(name), v)
        table.set_points(bare.input_index("engine_torque"), np.arange(n_steps) * dt, torque, integer=True,
                         first_order_hold=False)  # held: the value the assembly applied over each step
        plants["bare plant, the FMU's torque"] = bare
        runs["bare plant, the FMU's torque"] = (SimpleNamespace(table=table), {**fixed, "engine_torque": torque[0]})
        wall = {k: [] for k in plants}
        cpu = {k: [] for k in plants}
        for _ in range(repeat):
            for k in plants:
                w0, c0 = time.perf_counter(), time.process_time()
                out[k] = one(k).out
                wall[k].append(time.perf_counter() - w0)
                cpu[k].append(time.process_time() - c0)
        whole = {k: [] for k in list(plants)[:2]}  # server.offline.run.run_offline: the same, and the trace made
        for _ in range(repeat):
            for k in whole:
                w0 = time.perf_counter()
                run_offline(plants[k], runs[k][0])
                whole[k].append(time.perf_counter() - w0)
        same = out["Python step, StepwiseRun"].tobytes() == out["compiled step, Run"].tobytes()
        floor_same = np.array_equal(out["bare plant, the FMU's torque"][:, 0], out["compiled step, Run"][:, 0])
        for p in plants.values():
            getattr(p, "close", lambda: None)()
    print(f"FMU: {kind}; offline run of {n_steps} steps (dt = 1 ms), {repeat} runs each, interleaved; load average "
          f"{os.getloadavg()[0]:.1f}; Python and compiled outputs equal bit for bit: {same}; the floor's first "
          f"output equal to the compiled run's: {floor_same}")
    med = {k: (float(np.median(wall[k])), float(np.median(cpu[k]))) for k in plants}
    for k in plants:
        print(f"{k:30s} wall median {med[k][0] * 1e3:8.1f} ms ({med[k][0] / n_steps * 1e6:6.2f} us/step)   "
              f"CPU median {med[k][1] * 1e3:8.1f} ms ({med[k][1] / n_steps * 1e6:6.2f} us/step, "
              f"least {min(cpu[k]) / n_steps * 1e6:6.2f})")
    a, b = med["Python step, StepwiseRun"], med["compiled step, Run"]
    c = med["bare plant, the FMU's torque"]
    print(f"ratio Python / compiled: wall {a[0] / b[0]:.1f}x, CPU {a[1] / b[1]:.1f}x; compiled with the FMU / bare "
          f"plant: wall {b[0] / c[0]:.2f}, CPU {b[1] / c[1]:.2f}")
    wa, wb = (float(np.median(whole[k])) for k in whole)
    print(f"run_offline (the same, then the trace): Python {wa * 1e3:.1f} ms, compiled {wb * 1e3:.1f} ms (wall "
          f"medians); ratio {wa / wb:.1f}x")
    return 0 if same else 1


AB_FIXED = {"load_torque": 3500.0, "p_c1": 16.0, "p_c3": 16.0, "p_c6": 16.0}


def offline_worker(n_steps: int, repeat: int, out: Path) -> int:
    """In the tree on the path (``GEARBOX_HIL_BENCH_TREE``): the cs2 FMU's offline run as ``load_plant`` makes the
    plant, and (where the tree has it) the Python assembly a step at a time; a warm-up, then ``repeat`` runs each
    interleaved; CPU and wall seconds per run and a digest of the outputs into the JSON ``out``.  Uses only what
    both trees have (``load_plant``, ``parse_scenario``, ``make_run``)."""
    import hashlib
    import json

    import fmu_build
    from plant_models.offline import make_run
    from plant_models.registry import load_plant
    from server.offline.scenario import parse_scenario
    dt = 1e-3
    scenario = {"duration_s": n_steps * dt, "dt_s": dt, "interpolation": "linear",
                "leave_at_default": ["p_c2", "p_c4", "p_c5", "p_c7", "p_c8"],
                "inputs": {"engine.torque_cmd": [[0.0, 100.0], [n_steps * dt, 400.0]], **AB_FIXED}}
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        fmu_build.build_first_order(d / "engine.fmu")
        cfg = d / "ps.toml"
        cfg.write_text(f'extends = "{TREE / "configs" / "powershift.toml"}"\n\n[[fmu]]\nname = "engine"\n'
                       'file = "engine.fmu"\nstart = { tau = 0.05 }\nto_plant = { torque = "engine_torque" }\n')
        plants = {"load_plant": load_plant(cfg)}
        if hasattr(fmu_build, "python_assembly") and type(plants["load_plant"]).__name__ != "FmuAssembly":
            plants["Python step"] = fmu_build.python_assembly(cfg)

        def one(p):
            c = parse_scenario(scenario, "inline").compile(p)
            p.reset(c.start_inputs())
            run = make_run(p, c.table, dt, n_steps)
            w0, c0 = time.perf_counter(), time.process_time()
            run.advance()
            return time.process_time() - c0, time.perf_counter() - w0, run
        res = {k: dict(run=type(one(p)[2]).__name__, cpu_s=[], wall_s=[]) for k, p in plants.items()}  # warm-up
        for _ in range(repeat):
            for k, p in plants.items():
                c, w, run = one(p)
                res[k]["cpu_s"].append(c)
                res[k]["wall_s"].append(w)
                res[k]["outputs_sha256"] = hashlib.sha256(run.out.tobytes()).hexdigest()
        for p in plants.values():
            getattr(p, "close", lambda: None)()
    out.write_text(json.dumps(dict(tree=str(TREE), load=os.getloadavg()[0], n_steps=n_steps, runs=res)))
    return 0


def offline_against(base: str, n_steps: int, repeat: int, rounds: int) -> int:
    """``--offline N --base COMMIT``: :func:`offline_worker` in the base commit's export and in this tree, in
    alternating processes, ``rounds`` times (module docstring)."""
    import json
    import subprocess

    from bench_ab import export
    tmp = Path(tempfile.mkdtemp(prefix="gearbox-hil-fmi-ab-"))
    export(base, tmp / "base")
    trees = {"base": (tmp / "base", {"NUMBA_CACHE_DIR": str(tmp / "numba-base")}), "this": (ROOT, {})}
    rows = []
    for rnd in range(1, rounds + 1):
        for name, (tree, env) in trees.items():
            print(f"round {rnd}: {name} ...", file=sys.stderr, flush=True)
            out = tmp / f"{name}_{rnd}.json"
            subprocess.run([sys.executable, str(Path(__file__).resolve()), "--offline-worker", str(n_steps), "--repeat",
                            str(repeat), "--json", str(out)], check=True, stdout=subprocess.DEVNULL,
                           env=dict(os.environ, PYTHONPATH=str(tree), GEARBOX_HIL_BENCH_TREE=str(tree), **env))
            rows.append((rnd, name, json.loads(out.read_text())))
    print(f"offline run of {n_steps} steps with the cs2 FMU (dt = 1 ms); base {base} against this tree; {repeat} runs "
          f"per process after a warm-up, medians; JSON in {tmp}\n")
    print("| round | load | base: stepwise CPU / wall per step | this: stepwise CPU / wall | this: compiled CPU / wall "
          "| base stepwise / compiled: CPU, wall | this stepwise / compiled: CPU, wall | outputs = base's |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    by_round = {}
    for rnd, name, res in rows:
        by_round.setdefault(rnd, {})[name] = res
    for rnd, r in by_round.items():
        b, t = r["base"]["runs"]["load_plant"], r["this"]["runs"]
        c, s = t["load_plant"], t["Python step"]

        def med(x, key):
            return float(np.median(x[key])) / n_steps * 1e6
        cells = [f"{med(x, 'cpu_s'):.2f} / {med(x, 'wall_s'):.2f} us ({x['run']})" for x in (b, s, c)]
        ratio = [f"{med(x, 'cpu_s') / med(c, 'cpu_s'):.1f}x, {med(x, 'wall_s') / med(c, 'wall_s'):.1f}x" for x in (b, s)]
        same = b["outputs_sha256"] == c["outputs_sha256"]
        print(f"| {rnd} | {r['base']['load']:.1f} / {r['this']['load']:.1f} | {' | '.join(cells)} | {' | '.join(ratio)} "
              f"| {same} |")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ticks", type=int, default=20000)
    ap.add_argument("--block", type=int, default=1000)
    ap.add_argument("--export", action="store_true", help="time the exported FMU instead (module docstring)")
    ap.add_argument("--kind", choices=("cs2", "cs3", "me", "me3"), default="cs2",
                    help="the FMU's FMI version and kind")
    ap.add_argument("--broken", action="store_true", help="the tick in which an FMU in its own process crashes or "
                                                          "hangs (a segfault and a hang at t = 0.1 s)")
    ap.add_argument("--process", choices=("server", "own", "both"), default="server",
                    help="where the FMU runs: the server's process, its own (docs/fmi.md), or both in one run")
    ap.add_argument("--offline", type=int, default=0, metavar="N",
                    help="an offline run of N steps with the FMU: the Python assembly against the compiled one")
    ap.add_argument("--repeat", type=int, default=5, help="runs of each for --offline")
    ap.add_argument("--base", default=None, metavar="COMMIT", help="with --offline: against that commit's code")
    ap.add_argument("--rounds", type=int, default=3, help="with --base: processes of each tree, alternating")
    ap.add_argument("--offline-worker", type=int, default=0, metavar="N", help=argparse.SUPPRESS)
    ap.add_argument("--json", type=Path, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.offline_worker:
        return offline_worker(args.offline_worker, args.repeat, args.json)
    if args.offline and args.base:
        return offline_against(args.base, args.offline, args.repeat, args.rounds)
    if args.export:
        return exported(args.ticks, args.block)
    if args.broken:
        return broken(max(args.ticks, 200))
    if args.offline:
        return offline_runs(args.offline, args.repeat, args.kind)
    return step_times(args.kind, args.process, args.ticks, args.block)


def step_times(kind: str, process: str, ticks: int, block: int) -> int:
    """The bare plant's step against the plant with the FMU (in the server's process: the Python assembly's
    step and the compiled one; in its own process), in interleaved blocks: wall and CPU times, allocations."""
    from fmu_build import python_assembly
    from plant_models.registry import load_plant
    dt = 1e-3
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        builders(kind)(d / "engine.fmu")
        print(f"FMU: {kind}")
        gear = {"p_c1": 16.0, "p_c3": 16.0, "p_c6": 16.0}
        bare = load_plant("powershift")
        bare.reset({"engine_torque": 300.0, **gear})
        plants = {"bare plant step": bare}
        for where in ("server", "own") if process == "both" else (process,):
            cfg = d / f"ps_{where}.toml"
            cfg.write_text(f'extends = "{ROOT / "configs" / "powershift.toml"}"\n\n[[fmu]]\nname = "engine"\n'
                           'file = "engine.fmu"\nstart = { tau = 0.05 }\nto_plant = { torque = "engine_torque" }\n'
                           f'process = "{where}"\n' + ('timeout_s = 60.0\n' if where == "own" else ""))
            fmu = load_plant(cfg)
            fmu.reset({"engine.torque_cmd": 300.0, **gear})
            if where == "server" and type(fmu).__name__ == "CompiledFmuAssembly":  # before: the step from Python
                py = python_assembly(cfg)
                py.reset({"engine.torque_cmd": 300.0, **gear})
                plants["plant + FMU (Python step)"] = py
                plants["plant + FMU (compiled step)"] = fmu
            else:
                plants[f"plant + FMU ({where} process)"] = fmu
        for p in plants.values():
            timed(p, 2000, dt)  # warm-up
        wall = {k: [] for k in plants}
        cpu = dict.fromkeys(plants, 0)
        child_cpu = 0.0
        for _ in range(ticks // block):
            for k, p in plants.items():
                c0, h0 = time.process_time_ns(), _children_cpu_s(p)
                wall[k].append(timed(p, block, dt))
                cpu[k] += time.process_time_ns() - c0
                if "own" in k:
                    child_cpu += _children_cpu_s(p) - h0
        allocs = {k: allocations(p, 1000, dt) for k, p in plants.items()}
        for p in plants.values():
            if p is not bare:
                p.close()
    n = len(np.concatenate(wall["bare plant step"]))
    print(f"ticks {n} each, dt = 1 ms (stepped back to back, not on the wall clock), interleaved blocks of "
          f"{block}; load average {os.getloadavg()[0]:.1f}")
    base = np.percentile(np.concatenate(wall["bare plant step"]) / 1e3, [50, 99])
    for k in plants:
        w = np.percentile(np.concatenate(wall[k]) / 1e3, [50, 99])
        extra = "" if k == "bare plant step" else (f"   FMU per tick p50 {w[0] - base[0]:6.2f} us   p99 "
                                                   f"{w[1] - base[1]:6.2f} us")
        print(f"{k:28s} p50 {w[0]:6.2f} us   p99 {w[1]:6.2f} us   server CPU {cpu[k] / n / 1e3:6.2f} us/tick{extra}")
        print(f"{'':28s} allocations over 1000 ticks (tracemalloc, blocks kept): {allocs[k][0]} ({allocs[k][1]} B)")
    if process in ("own", "both"):
        print(f"{'':28s} the FMU's process: CPU {1e6 * child_cpu / n:6.2f} us/tick (/proc, 10 ms resolution)")
    return 0


if __name__ == "__main__":
    if "--offline-worker" not in sys.argv:
        print(host_line(), flush=True)
    raise SystemExit(main())
