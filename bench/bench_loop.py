#!/usr/bin/env python3
"""Benchmark of the real-time loop: wake-up lateness, TET, missed ticks and CPU, against the machine's baseline.

Runs, in this order and in one invocation:

1. the loop: the Powershift plant with the ZeroMQ adapter publishing every
   tick, the configured wait strategy, for the duration; with ``--clients
   sub`` the bench client (``bench/load_client.py``) runs in another process:
   a subscriber that checks every sequence number, a command every 10 ms and
   a status request every second (else no client);
2. the baseline, by default *during* the loop: ``cyclictest`` (rt-tests) at
   the same period and the same scheduling policy, so the machine's own timer
   and scheduling noise (host stalls included) is measured next to the loop
   over the same seconds (without rt-tests: a minimal Python sleeper on
   absolute deadlines in another process, also during the loop).

Percentiles are exact (from every tick's sample, not from the histogram).
CPU is the process's user + system time over the run, in % of one core.

    python bench/bench_loop.py --duration 60 --rate 1000 --wait sleep_spin
    python bench/bench_loop.py --duration 60 --rate 1000 --wait sleep_spin --fifo 80
    python bench/bench_loop.py --duration 30 --rate 10000 --wait spin
    python bench/bench_loop.py --duration 600 --rate 1000 --wait sleep_spin --clients sub
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _support import FREE_ENDPOINTS  # noqa: E402
from io_adapters.zmq.adapter import ZmqAdapter  # noqa: E402
from plant_models.registry import load_plant  # noqa: E402
from server.realtime.loop_config import LoopConfig  # noqa: E402
from server.realtime.rtsetup import RealtimeConfig  # noqa: E402
from server.realtime.runtime import assemble  # noqa: E402
from _host import host_line, with_host  # noqa: E402  (bench/ is first on the path)


def pct(x: np.ndarray) -> dict:
    x = np.asarray(x, dtype=float)
    return {"p50": float(np.percentile(x, 50)), "p99": float(np.percentile(x, 99)),
            "p999": float(np.percentile(x, 99.9)), "max": float(x.max()), "mean": float(x.mean()), "n": int(x.size)}


def start_cyclictest(period_us: int, loops: int, fifo: int, hist: Path) -> subprocess.Popen | None:
    """Start cyclictest in the background (None without rt-tests)."""
    exe = shutil.which("cyclictest")
    if exe is None:
        return None
    cmd = [exe, "-q", "-m", "-i", str(period_us), "-l", str(loops), "-h", "20000", f"--histfile={hist}"]
    if fifo > 0:
        cmd += ["-p", str(fifo)]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def cyclictest_baseline(period_us: int, loops: int, fifo: int, proc=None, hist: Path | None = None) -> dict:
    """cyclictest's wake-up latency at this period (us), from its 1-us histogram.

    With ``proc``/``hist``, collects a run started earlier by :func:`start_cyclictest`; else runs it now.
    """
    if proc is None:
        d = tempfile.mkdtemp()
        hist = Path(d) / "hist.txt"
        proc = start_cyclictest(period_us, loops, fifo, hist)
        if proc is None:
            return python_sleeper_baseline(period_us, loops)
    proc.wait()
    counts = {}
    overflows = 0
    mx = float("nan")
    for line in hist.read_text().splitlines():
        if line.startswith("#"):
            m = re.match(r"# Histogram Overflows: (\d+)", line)
            if m:
                overflows = int(m.group(1))
            m = re.match(r"# Max Latencies: (\d+)", line)
            if m:
                mx = float(m.group(1))
            continue
        parts = line.split()
        if len(parts) >= 2 and parts[0].isdigit():
            counts[int(parts[0])] = int(parts[1])
    us = np.array(sorted(counts), dtype=float)
    n = np.array([counts[int(k)] for k in us], dtype=float)
    total = n.sum() + overflows
    cum = np.cumsum(n)

    def q(p):
        k = np.searchsorted(cum, p / 100.0 * total)
        return float(us[k]) if k < len(us) else float("inf")

    over = {str(th): int(n[us > th].sum() + overflows) for th in (50, 100, 500, 1000, 5000)}
    return {"over_us": over, "tool": f"cyclictest -m -i {period_us}" + (f" -p {fifo}" if fifo else "") + " (SCHED_"
            + ("FIFO" if fifo else "OTHER") + ", 1 us histogram)",
            "p50": q(50), "p99": q(99), "p999": q(99.9), "max": mx,
            "n": int(total), "overflows_over_20ms": overflows}


def python_sleeper_baseline(period_us: int, loops: int) -> dict:
    """A minimal sleeper: time.sleep to absolute deadlines, lateness in us (used without rt-tests)."""
    period = period_us * 1000
    lat = np.empty(loops)
    nxt = time.monotonic_ns() + period
    for k in range(loops):
        rem = nxt - time.monotonic_ns()
        if rem > 0:
            time.sleep(rem / 1e9)
        lat[k] = (time.monotonic_ns() - nxt) / 1000.0
        nxt += period
    over = {str(th): int(np.count_nonzero(lat > th)) for th in (50, 100, 500, 1000, 5000)}
    return {"tool": "python sleeper (time.sleep to absolute deadlines)", "over_us": over, **pct(lat)}


def start_python_sleeper(period_us: int, loops: int, fifo: int = 0) -> tuple[subprocess.Popen, Path]:
    """The Python sleeper in another process, during the loop (the baseline without rt-tests), at the loop's
    scheduling policy (SCHED_FIFO ``fifo`` when > 0, as cyclictest's ``-p``)."""
    out = Path(tempfile.mkdtemp()) / "sleeper.json"
    proc = subprocess.Popen([sys.executable, __file__, "--sleeper", str(period_us), str(loops), str(out), str(fifo)],
                            cwd=ROOT)
    return proc, out


def steal_s() -> float:
    """CPU time stolen by the hypervisor from all CPUs so far (/proc/stat), s; NaN where unavailable."""
    try:
        with open("/proc/stat") as fh:
            f = fh.readline().split()
        return int(f[8]) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return float("nan")


def run_loop(args) -> dict:
    n = int(args.duration * args.rate) + 10
    rt = RealtimeConfig(sched_fifo_priority=args.fifo, cpu_affinity=tuple(args.cpu),
                        allow_fifo_with_spin=args.allow_fifo_spin, lock_memory=args.fifo > 0)
    cfg = LoopConfig(mode="realtime", rate_hz=args.rate, wait=args.wait, spin_margin_us=args.spin_margin_us,
                     spin_margin_adapt=not args.fixed_margin,
                     duration_s=args.duration, status_interval_s=0.5, status_line=False, sample_capacity=n,
                     startup_grace_s=1.0, realtime=rt, autostart=args.clients == "none")
    zmq = ZmqAdapter("zmq", {**FREE_ENDPOINTS, "status_publish_s": 1.0,
                             "publish_every": args.publish_every,
                             "publish_batch": args.publish_batch})
    server = assemble(load_plant("powershift"), [zmq], cfg,
                      initial_inputs={"p_c1": 16.0, "p_c3": 16.0, "p_c6": 16.0, "engine_torque": 300.0,
                                      "load_torque": 3500.0})
    loop = server.loop
    loop.open()
    loop.choose_tick_path(args.tick_path)
    client = None
    if args.clients == "sub":  # it connects while the loop idles, then sends start
        sys.path.insert(0, str(ROOT / "bench"))
        from bench_tick_stages import start_clients, stop_clients
        client = start_clients(zmq.endpoints["control"], "sub", args.publish_every)
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    st0 = steal_s()
    w0 = time.monotonic()
    try:
        loop.run()
    finally:
        client_res = stop_clients(client) if client is not None else None
        zmq_status = zmq.status()
        loop.close()
    wall = time.monotonic() - w0
    steal = steal_s() - st0
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    s = loop.telemetry.sample_array() / 1000.0  # us
    tm = loop.telemetry.summary()
    late = s[:, 0]
    # Ticks woken more than 500 us late, grouped into episodes (late ticks less than 50 ms apart): a few
    # long episodes are machine stalls (host, hypervisor), many short ones would be the loop's own doing.
    idx = np.flatnonzero(late > 500.0)
    episodes = int(1 + np.count_nonzero(np.diff(idx) > 50 * args.rate / 1000.0)) if idx.size else 0
    return {
        "tick_path": loop.tick_path, "tick_path_reason": loop.tick_path_reason,
        "late_ticks_over_us": {str(th): int(np.count_nonzero(late > th)) for th in (50, 100, 500, 1000, 5000)},
        "late_episodes_over_500us": episodes,
        "hypervisor_steal_pct": 100.0 * steal / (wall * (os.cpu_count() or 1)),
        "lateness_us": pct(s[:, 0]), "tet_us": pct(s[:, 1]), "step_us": pct(s[:, 2]),
        "ticks": tm["ticks"], "missed_ticks": tm["missed_ticks"], "overruns": tm["overruns"],
        "overruns_in_grace": tm["overruns_in_grace"],
        "missed_pct": 100.0 * tm["missed_ticks"] / max(1, tm["ticks"] + tm["missed_ticks"]),
        "rate_hz_actual": tm["rate_hz_actual"], "cpu_pct_of_one_core": 100.0 * cpu / wall,
        "realtime": server.report.status()["realtime"], "vol_ctx_switches": r1.ru_nvcsw - r0.ru_nvcsw,
        "invol_ctx_switches": r1.ru_nivcsw - r0.ru_nivcsw, "client": client_res,
        "zmq": {k: zmq_status.get(k) for k in ("state_sent", "state_dropped", "send_errors", "received", "applied",
                                                     "publish_every", "publish_batch")},
    }


def _sleeper_mode(argv: list[str]) -> int:
    """``--sleeper PERIOD_US LOOPS OUT [FIFO]``: the concurrent Python sleeper, at the loop's policy."""
    period_us, loops, out = int(argv[2]), int(argv[3]), Path(argv[4])
    fifo = int(argv[5]) if len(argv) > 5 else 0
    if fifo > 0:  # the loop's policy; without the privilege the sleeper says so in its tool name
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(fifo))
        except OSError:
            fifo = 0
    res = python_sleeper_baseline(period_us, loops)
    res["tool"] += f", SCHED_FIFO {fifo}" if fifo else ", SCHED_OTHER"
    out.write_text(json.dumps(res))
    return 0


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration", type=float, default=60.0, help="seconds of each run")
    ap.add_argument("--rate", type=float, default=1000.0)
    ap.add_argument("--wait", default="sleep_spin", choices=("sleep", "sleep_spin", "spin"))
    ap.add_argument("--spin-margin-us", type=float, default=200.0)
    ap.add_argument("--fixed-margin", action="store_true", help="do not adapt the spin margin")
    ap.add_argument("--fifo", type=int, default=0, help="SCHED_FIFO priority for both runs (0: SCHED_OTHER)")
    ap.add_argument("--allow-fifo-spin", action="store_true")
    ap.add_argument("--cpu", type=int, nargs="*", default=[], help="pin the loop to these CPUs")
    ap.add_argument("--baseline", default="concurrent", choices=("concurrent", "before", "none"),
                    help="cyclictest during the loop (default), before it, or not at all")
    ap.add_argument("--publish-every", type=int, default=1,
                    help="ticks per state message (the ZeroMQ adapter's publish_every; 1: every state)")
    ap.add_argument("--publish-batch", type=int, default=0,
                    help="realtime: states per send burst (the ZeroMQ adapter's publish_batch; 0: about 1 ms)")
    ap.add_argument("--clients", default="none", choices=("none", "sub"),
                    help="sub: subscriber, commands at 100 Hz and status requests in another process")
    ap.add_argument("--tick-path", default="auto", choices=("auto", "python"),
                    help="auto: the tick as one compiled call (the default); python: the Python stepper")
    ap.add_argument("--json", type=Path, help="write the results here")
    return ap


def _print_report(res: dict) -> None:
    L = res["loop"]
    print(json.dumps(res, indent=2))
    print("\n| quantity | p50 | p99 | p99.9 | max |\n| --- | --- | --- | --- | --- |")
    if "baseline" in res:
        b = res["baseline"]
        print(f"| baseline lateness ({b['tool']}) | {b['p50']:.0f} | {b['p99']:.0f} | {b['p999']:.0f} | {b['max']:.0f} |")
    for k in ("lateness_us", "tet_us", "step_us"):
        v = L[k]
        print(f"| loop {k} | {v['p50']:.1f} | {v['p99']:.1f} | {v['p999']:.1f} | {v['max']:.1f} |")
    print(f"\nticks woken late by more than 50/100/500/1000/5000 us: loop {list(L['late_ticks_over_us'].values())}"
          + (f", baseline {list(res['baseline'].get('over_us', {}).values())}" if "baseline" in res else "")
          + f"; loop episodes over 500 us: {L['late_episodes_over_500us']}; hypervisor steal "
          f"{L['hypervisor_steal_pct']:.2f} % of the CPUs")
    print(f"tick path: {L['tick_path']} ({L['tick_path_reason']})")
    print(f"ticks {L['ticks']}, missed {L['missed_ticks']} ({L['missed_pct']:.3f} %), overruns {L['overruns']} "
          f"(+{L['overruns_in_grace']} in grace), CPU {L['cpu_pct_of_one_core']:.1f} % of one core, "
          f"load avg {res['load_avg_before'][0]:.2f} -> {res['load_avg_after'][0]:.2f}")
    c = L["client"]
    if c is not None:
        print(f"subscriber: {c['states']} states, {c['lost']} lost (sequence gaps), {c['out_of_order']} out of order; "
              f"{c['commands_sent']} commands sent, {L['zmq']['applied']} applied; state_dropped "
              f"{L['zmq']['state_dropped']}")


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--sleeper":
        return _sleeper_mode(sys.argv)
    args = _parser().parse_args()

    res = {"args": vars(args) | {"json": str(args.json) if args.json else None},
           "load_avg_before": os.getloadavg(), "cpus": os.cpu_count()}
    period_us = int(round(1e6 / args.rate))
    loops = int(args.duration * args.rate)
    proc = hist = None
    if args.baseline == "before":
        print(f"baseline: {args.duration:g} s at {period_us} us ...", flush=True)
        res["baseline"] = cyclictest_baseline(period_us, loops, args.fifo)
    elif args.baseline == "concurrent":
        # the same stalls hit both: cyclictest runs during the loop (it sleeps ~all the time)
        hist = Path(tempfile.mkdtemp()) / "hist.txt"
        proc = start_cyclictest(period_us, loops, args.fifo, hist)
        if proc is None:
            sleeper = start_python_sleeper(period_us, loops, args.fifo)
    print(f"loop: {args.duration:g} s at {args.rate:g} Hz, wait {args.wait}, fifo {args.fifo} ...", flush=True)
    res["loop"] = run_loop(args)
    if args.baseline == "concurrent":
        if proc is not None:
            res["baseline"] = cyclictest_baseline(period_us, loops, args.fifo, proc, hist)
        else:
            sleeper[0].wait()
            res["baseline"] = json.loads(sleeper[1].read_text())
        res["baseline"]["tool"] += ", concurrent with the loop"
    res["load_avg_after"] = os.getloadavg()
    _print_report(res)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(with_host(res), indent=2))
    return 0


if __name__ == "__main__":
    print(host_line(), flush=True)
    sys.exit(main())
