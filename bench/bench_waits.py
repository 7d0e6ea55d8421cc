#!/usr/bin/env python3
"""Missed ticks by waiting strategy: ``bench/bench_loop.py`` run in alternating blocks of each strategy, same run.

Each strategy is a set of ``bench_loop.py`` options (the wait, the spin
margin, the rehearsal's lead is the default of ``server/realtime/waits.py``,
SCHED_FIFO, CPU affinity); they run one after another, ``--blocks`` times
round, so every strategy sees the same machine load.  Every run has its own
bare sleeper beside it (``cyclictest`` when rt-tests is installed, else a
Python sleeper on absolute deadlines in another process, during the loop):
the wake-ups it gets more than 500 us / 1 ms late are the host's floor,
which no waiting strategy of a process can go below unless it does not sleep.

A *missed tick* is a deadline the loop skipped because a tick ended after
the next deadline (``server/realtime/loop.py``): a wake-up more than about a
period late, whatever made it late.

    python bench/bench_waits.py --duration 20 --blocks 2
    python bench/bench_waits.py --duration 20 --blocks 2 --only sleep_spin spin_pinned --clients sub
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from _host import host_line, with_host  # noqa: E402

# name -> bench_loop.py options.  The last CPU is the one pinned to (the first one takes interrupts more often).
LAST_CPU = str((os.cpu_count() or 1) - 1)
STRATEGIES = {
    "sleep": ["--wait", "sleep"],
    "sleep_spin": ["--wait", "sleep_spin"],  # the default: adaptive margin, tick rehearsed 30 us before
    "sleep_spin_fifo": ["--wait", "sleep_spin", "--fifo", "50"],
    "sleep_spin_fifo_pinned": ["--wait", "sleep_spin", "--fifo", "50", "--cpu", LAST_CPU],
    "spin": ["--wait", "spin"],
    "spin_pinned": ["--wait", "spin", "--cpu", LAST_CPU],
}


def run_one(name: str, args, out: Path) -> dict:
    cmd = [sys.executable, str(ROOT / "bench" / "bench_loop.py"), *STRATEGIES[name], "--duration", str(args.duration),
           "--rate", str(args.rate), "--clients", args.clients, "--json", str(out)]
    subprocess.run(cmd, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    return json.loads(out.read_text())


def row(name: str, block: int, res: dict) -> dict:
    L, b = res["loop"], res.get("baseline", {})
    over = L["late_ticks_over_us"]
    b_over = b.get("over_us", {})
    return {"strategy": name, "block": block, "load": res["load_avg_before"][0], "missed_pct": L["missed_pct"],
            "missed": L["missed_ticks"], "ticks": L["ticks"], "late_500": over["500"], "late_1000": over["1000"],
            "late_5000": over["5000"], "sleeper_500": b_over.get("500"), "sleeper_1000": b_over.get("1000"),
            "sleeper_5000": b_over.get("5000"), "sleeper_n": b.get("n"), "tet_p50": L["tet_us"]["p50"],
            "tet_p99": L["tet_us"]["p99"], "late_p99": L["lateness_us"]["p99"],
            "cpu_pct": L["cpu_pct_of_one_core"], "steal_pct": L["hypervisor_steal_pct"],
            "invol_ctx": L["invol_ctx_switches"], "applied": L["realtime"].get("applied"),
            "warnings": L["realtime"].get("warnings")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration", type=float, default=20.0, help="s per run")
    ap.add_argument("--rate", type=float, default=1000.0)
    ap.add_argument("--blocks", type=int, default=2, help="rounds of every strategy")
    ap.add_argument("--clients", default="sub", choices=("none", "sub"))
    ap.add_argument("--only", nargs="*", choices=tuple(STRATEGIES), help="these strategies (default: all)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    names = args.only or list(STRATEGIES)
    tmp = Path(tempfile.mkdtemp(prefix="bench-waits-"))
    rows = []
    for block in range(1, args.blocks + 1):
        for name in names:
            print(f"block {block}: {name} ...", file=sys.stderr, flush=True)
            rows.append(row(name, block, run_one(name, args, tmp / f"{name}_{block}.json")))
    print(f"{args.duration:g} s runs at {args.rate:g} Hz, clients {args.clients}, {args.blocks} blocks; JSON in {tmp}\n")
    print("| strategy | block | load | missed % | wake-ups > 0.5 / 1 / 5 ms late | sleeper > 0.5 / 1 / 5 ms | "
          "TET p50 / p99 us | lateness p99 us | CPU % of a core | steal % |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['strategy']} | {r['block']} | {r['load']:.1f} | {r['missed_pct']:.3f} | {r['late_500']} / "
              f"{r['late_1000']} / {r['late_5000']} | {r['sleeper_500']} / {r['sleeper_1000']} / {r['sleeper_5000']} | "
              f"{r['tet_p50']:.1f} / {r['tet_p99']:.1f} | {r['late_p99']:.0f} | {r['cpu_pct']:.0f} | "
              f"{r['steal_pct']:.2f} |")
    print("\ntotals over the blocks (missed ticks / ticks; the sleeper's wake-ups over 1 ms / its wake-ups):")
    for name in names:
        mine = [r for r in rows if r["strategy"] == name]
        missed, ticks = sum(r["missed"] for r in mine), sum(r["ticks"] + r["missed"] for r in mine)
        s1, sn = sum(r["sleeper_1000"] or 0 for r in mine), sum(r["sleeper_n"] or 0 for r in mine)
        print(f"- {name}: missed {missed} / {ticks} = {100 * missed / max(ticks, 1):.3f} %; sleeper over 1 ms "
              f"{s1} / {sn} = {100 * s1 / max(sn, 1):.3f} %; applied {mine[0]['applied']}"
              + (f"; warnings {mine[0]['warnings']}" if mine[0]["warnings"] else ""))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(with_host({"args": vars(args) | {"json": str(args.json)}, "rows": rows}),
                                        indent=2))
    return 0


if __name__ == "__main__":
    print(host_line(), flush=True)
    sys.exit(main())
