"""Campaign throughput on Dask against the bare compiled runs, with 1 and 2 workers, in one run.

For the worked example (``campaigns/powershift_swap_1_2.toml``, Powershift
1 -> 2 swaps, 1.2 s at dt = 1 ms each) this measures, in one invocation and
alternating so that both see the same machine load:

* ``bare``: the same runs in this process, one after the other, without
  Dask (:func:`server.campaign.engine.run_bare`: apply the parameters,
  build the plant, run compiled, metrics) -- the baseline;
* ``bare, 2 processes``: the same runs split between two plain processes
  started together (no Dask) -- what two cores of this machine give at
  its current load, the ceiling of any 2-worker scaling;
* ``dask 1 worker`` and ``dask 2 workers``: the whole campaign through
  :func:`server.campaign.engine.execute` with the embedded LocalCluster,
  from scratch each time (``restart``): the wall time of the whole
  execution (cluster start, warm-up of the workers, the runs, the parts and
  the table) and the time from the first task submitted to the last result
  (throughput);
* ``2 workers, one task each`` (``--batch`` of half the runs): the two
  workers' concurrency without Dask's traffic between tasks;

and reports medians, the throughput ratio 2 workers / 1 worker (of the
medians and per repeat), and the
Dask overhead per run: (task time with 1 worker) / runs - bare time per run.
``--malloc`` also times the bare runs in new processes with and without
``MALLOC_TRIM_THRESHOLD_=65536`` (what Dask sets in its workers by
default), alternating.

Run: ``.venv/bin/python bench/bench_campaign.py [--repeat 3] [--runs 1200]``;
``--campaign campaigns/closed_loop_swap_1_3.toml`` measures the same for the
closed-loop worked example (a test file as the base: the example controller
in process, a scheduled fault, its expectations judged in every run).
The JIT cache must be warm (``gearbox-hil warmup``).  Numbers depend on
the machine and its load (printed with each result).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from server.campaign.engine import execute, run_bare
from server.campaign.spec import load_campaign
from _host import host_line  # noqa: E402  (bench/ is first on the path)


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _half(campaign: str, runs: int, part: int, barrier, queue) -> None:
    spec = replace(load_campaign(campaign), runs=runs)
    mine = list(range(part, runs, 2))
    run_bare(spec, mine[:2])  # code loaded in this process
    barrier.wait()
    t0 = time.perf_counter()
    run_bare(spec, mine)
    queue.put((t0, time.perf_counter()))


def two_processes(campaign: str, runs: int) -> float:
    """Wall time of the runs split between two plain processes that start together."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    barrier, queue = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=_half, args=(campaign, runs, k, barrier, queue)) for k in (0, 1)]
    for p in procs:
        p.start()
    spans = [queue.get() for _ in procs]
    for p in procs:
        p.join()
    # perf_counter is the same clock (CLOCK_MONOTONIC) in both processes
    return max(b for _, b in spans) - min(a for a, _ in spans)


def _bare_per_run(campaign: str, runs: int) -> None:
    spec = replace(load_campaign(campaign), runs=runs)
    run_bare(spec, [0, 1])
    t0 = time.perf_counter()
    run_bare(spec, list(range(runs)))
    print((time.perf_counter() - t0) / runs)


def malloc_effect(campaign: str, runs: int, repeat: int) -> None:
    import subprocess
    import sys

    code = f"import bench_campaign as b; b._bare_per_run({campaign!r}, {runs})"
    out = {False: [], True: []}
    for _ in range(repeat):
        for trim in (False, True):
            env = {k: v for k, v in os.environ.items() if k != "MALLOC_TRIM_THRESHOLD_"}
            if trim:
                env["MALLOC_TRIM_THRESHOLD_"] = "65536"
            env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).parent), env.get("PYTHONPATH", "")])
            res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
            out[trim].append(float(res.stdout.split()[-1]))
    a, b = statistics.median(out[False]), statistics.median(out[True])
    print(f"bare run in a new process: {a * 1e3:.2f} ms; with MALLOC_TRIM_THRESHOLD_=65536: {b * 1e3:.2f} ms "
          f"(+{(b - a) * 1e3:.2f} ms; {repeat} alternating pairs of {runs} runs; load {load()})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--campaign", default="powershift_swap_1_2")
    ap.add_argument("--runs", type=int, default=None, help="runs of the campaign to make (default: all)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--malloc", action="store_true", help="also the MALLOC_TRIM_THRESHOLD_ comparison")
    args = ap.parse_args()
    spec = load_campaign(args.campaign)
    if args.runs:
        spec = replace(spec, runs=args.runs)
    n = spec.runs
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, Python "
          f"{platform.python_version()}; campaign {Path(spec.source).name}, {n} runs, {args.repeat} repeats; "
          f"load average before: {load()}")
    bare, bare2, walls, tasks, inside = [], [], {1: [], 2: []}, {1: [], 2: []}, {1: [], 2: []}
    one_task = []  # 2 workers, one task each: the workers' concurrency without Dask's traffic between tasks
    with tempfile.TemporaryDirectory() as tmp:
        run_bare(spec, [0, 1])  # code loaded in this process
        for r in range(args.repeat):
            t0 = time.perf_counter()
            res = run_bare(spec, list(range(n)))
            bare.append(time.perf_counter() - t0)
            assert all(x.status == "ok" for x in res)
            bare2.append(two_processes(args.campaign, n))
            for w in (1, 2):
                o = execute(spec, Path(tmp) / f"w{w}", workers=w, restart=True)
                assert o.ok == n and o.workers == w
                walls[w].append(o.wall_s)
                tasks[w].append(o.tasks_s)
                inside[w].append(o.run_s)
            o = execute(spec, Path(tmp) / "w2one", workers=2, restart=True, batch=-(-n // 2))
            assert o.ok == n
            one_task.append(o.tasks_s)
            print(f"repeat {r + 1}: bare {bare[-1]:.2f} s, 2 processes {bare2[-1]:.2f} s; "
                  f"1 worker {walls[1][-1]:.2f} s wall "
                  f"({tasks[1][-1]:.2f} s tasks); 2 workers {walls[2][-1]:.2f} s wall ({tasks[2][-1]:.2f} s tasks), "
                  f"one task each {one_task[-1]:.2f} s; ratios: 2 workers / 1 {tasks[1][-1] / tasks[2][-1]:.2f}x, "
                  f"2 processes / 1 {bare[-1] / bare2[-1]:.2f}x; load {load()}")
    med = statistics.median
    b = med(bare)
    print()
    print("| what | runs | wall (median) | runs/s | per run | vs bare |")
    print("| --- | --- | --- | --- | --- | --- |")
    print(f"| bare compiled runs, this process, no Dask (baseline) | {n} | {b:.2f} s | {n / b:.0f} | "
          f"{b / n * 1e3:.2f} ms | 1.00 |")
    b2 = med(bare2)
    print(f"| bare compiled runs, two plain processes (no Dask) | {n} | {b2:.2f} s | {n / b2:.0f} | "
          f"{b2 / n * 1e3:.2f} ms | {b / b2:.2f} |")
    for w in (1, 2):
        t, wall = med(tasks[w]), med(walls[w])
        print(f"| Dask, {w} worker{'s' * (w > 1)}: first task to last result | {n} | {t:.2f} s | {n / t:.0f} | "
              f"{t / n * 1e3:.2f} ms | {b / t:.2f} |")
        print(f"| Dask, {w} worker{'s' * (w > 1)}: whole execution (cluster start, warm-up, table) | {n} | "
              f"{wall:.2f} s | {n / wall:.0f} | {wall / n * 1e3:.2f} ms | {b / wall:.2f} |")
    print()
    print(f"throughput 2 workers / 1 worker (task time): {med(tasks[1]) / med(tasks[2]):.2f}x; "
          f"whole execution: {med(walls[1]) / med(walls[2]):.2f}x; two plain processes / one: {b / b2:.2f}x")
    pair = [t1 / t2 for t1, t2 in zip(tasks[1], tasks[2])]
    pair_plain = [a / b_ for a, b_ in zip(bare, bare2)]
    print(f"same-repeat ratios, median (min-max): 2 workers / 1 worker {med(pair):.2f}x ({min(pair):.2f}-"
          f"{max(pair):.2f}); two plain processes / one {med(pair_plain):.2f}x ({min(pair_plain):.2f}-"
          f"{max(pair_plain):.2f}); 2 workers with one task each / 1 worker "
          f"{med([t1 / t for t1, t in zip(tasks[1], one_task)]):.2f}x")
    print(f"Dask overhead per run, 1 worker: {(med(tasks[1]) - b) / n * 1e3:.3f} ms "
          f"({(med(tasks[1]) - b) / b * 100:.1f} % of a bare run)")
    for w in (1, 2):
        print(f"time of a run measured inside the worker ({w} worker{'s' * (w > 1)}): "
              f"{med(inside[w]) / n * 1e3:.2f} ms (bare: {b / n * 1e3:.2f} ms)")
    if args.malloc:
        malloc_effect(args.campaign, min(n, 600), max(3, args.repeat))
    print(f"load average after: {load()}")


if __name__ == "__main__":
    print(host_line(), flush=True)
    main()
