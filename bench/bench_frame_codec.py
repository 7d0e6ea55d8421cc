#!/usr/bin/env python3
"""The compiled CAN frame codec per call: ``tx_pack`` per tick and ``rx_frame`` per frame, this tree against a base.

The Powershift plant's CAN adapter (``io_can_powershift``, E2E on every
message; ``--message-set`` for another) is opened in lockstep; its transmit
layout is then also compiled as a loopback codec (transmit and receive
tables the same), so every frame ``tx_pack`` packs is a valid frame for
``rx_frame`` (CRC, counter, ranges): the full receive path runs, mailbox
post included.  Per round and tick: the plant steps, ``tx_pack`` packs the
due messages, each is copied into the receive buffer and checked by
``rx_frame``.  Timed per call with ``perf_counter_ns`` (wall clock, the
dispatch from Python included, as the adapter calls them), and the process
CPU time of the round's codec calls.

With ``--base DIR`` (another checkout of the project, e.g. the main branch)
the same rounds run in a worker process on each tree, alternating, so both
see the same load; reported are the medians over rounds of each round's
median and p99, the ratio this tree / base per round, and a digest of the
codec buffers after every round (equal digests: both trees computed the
same frames, verdicts and counters bit for bit).

Usage::

    .venv/bin/python bench/bench_frame_codec.py --base ../main --rounds 8 --ticks 4000
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def worker(tree: str, message_set: str) -> None:
    """Serve rounds on stdin ("<ticks>\\n" -> one JSON line), importing the packages of ``tree``."""
    sys.path.insert(0, tree)
    import uuid

    import numpy as np

    from io_adapters.base import LoopContext, create_adapter, new_tick_info
    from io_adapters.can import frames
    from plant_models.registry import load_plant

    plant = load_plant("powershift")
    ctx = LoopContext(period_s=0.001, feed_watchdog=lambda ns: None, status=lambda: {}, tick_info=new_tick_info(),
                      mode="lockstep")
    a = create_adapter("can", "can", {"interface": "virtual", "channel": f"bench-{uuid.uuid4().hex[:8]}",
                                      "message_set": message_set})
    a.open(plant, ctx)
    lay = a.ms.tx
    loop = frames.FrameCodec(lay, lay, plant.n_in, plant.input_offset, plant.output_offset)
    ci, cf, cb, df = loop.ci, loop.cf, loop.cb, plant.df
    ti = new_tick_info()
    due = loop.due
    rx_buf = loop.rx_buf
    tx_buf = loop.tx_buf
    lens = [int(x) for x in lay.M[:, frames.M_LEN]]
    tx_pack, rx_frame = frames.tx_pack, frames.rx_frame
    clock = time.perf_counter_ns
    tick = 0
    print(json.dumps({"ready": tree}), flush=True)
    for line in sys.stdin:
        ticks = int(line)
        tx_ns = np.zeros(ticks)
        rx_ns = []
        cpu = 0
        for k in range(ticks):
            plant.step(0.001)
            c0 = time.process_time_ns()
            t0 = clock()
            n_due = tx_pack(tick, ci, cf, cb, df, ti)
            tx_ns[k] = clock() - t0
            for i in range(n_due):
                m = int(due[i])
                n = lens[m]
                rx_buf[:n] = tx_buf[m, :n]
                t0 = clock()
                rx_frame(m, n, ci, cf, cb)
                rx_ns.append(clock() - t0)
            cpu += time.process_time_ns() - c0
            tick += 1
        rx = np.asarray(rx_ns)
        digest = hashlib.sha256(ci.tobytes() + cf.tobytes() + cb.tobytes()).hexdigest()[:16]
        print(json.dumps({"tx_med": float(np.median(tx_ns)), "tx_p99": float(np.percentile(tx_ns, 99)),
                          "rx_med": float(np.median(rx)), "rx_p99": float(np.percentile(rx, 99)),
                          "frames": int(rx.size), "cpu_ns_per_tick": cpu / ticks, "digest": digest,
                          "verdicts": loop.counts.sum(axis=0).tolist()}), flush=True)
    a.close()


def start(tree: Path, message_set: str) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--worker", str(tree),
                          "--message-set", message_set], cwd=str(tree), stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    json.loads(p.stdout.readline())
    return p


def ask(p: subprocess.Popen, ticks: int) -> dict:
    p.stdin.write(f"{ticks}\n")
    p.stdin.flush()
    return json.loads(p.stdout.readline())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", help="another checkout to compare with (same rounds, alternating)")
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--ticks", type=int, default=4000)
    ap.add_argument("--message-set", default="io_can_powershift.toml")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args.worker, args.message_set)
        return 0
    trees = {"this": ROOT} | ({"base": Path(args.base).resolve()} if args.base else {})
    procs = {name: start(tree, args.message_set) for name, tree in trees.items()}
    for p in procs.values():
        ask(p, 200)  # warm: every kernel loaded, caches touched
    rows = {name: [] for name in procs}
    for r in range(args.rounds):
        order = list(procs) if r % 2 == 0 else list(procs)[::-1]
        for name in order:
            rows[name].append(ask(procs[name], args.ticks))
    for p in procs.values():
        p.stdin.close()
        p.wait()

    import numpy as np

    def med(name, key):
        return float(np.median([x[key] for x in rows[name]]))

    print(f"{args.rounds} rounds of {args.ticks} ticks, message set {args.message_set}, "
          f"{rows['this'][0]['frames']} frames a round")
    print("| tree | tx_pack median, ns | tx_pack p99, ns | rx_frame median, ns | rx_frame p99, ns "
          "| codec CPU per tick, ns |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name in procs:
        print(f"| {name} | {med(name, 'tx_med'):.0f} | {med(name, 'tx_p99'):.0f} | {med(name, 'rx_med'):.0f} "
              f"| {med(name, 'rx_p99'):.0f} | {med(name, 'cpu_ns_per_tick'):.0f} |")
    if "base" in rows:
        for key in ("tx_med", "rx_med", "cpu_ns_per_tick"):
            ratios = [t[key] / b[key] for t, b in zip(rows["this"], rows["base"])]
            print(f"this / base, {key}, per round: median {np.median(ratios):.3f} "
                  f"(min {min(ratios):.3f}, max {max(ratios):.3f})")
        same = all(t["digest"] == b["digest"] for t, b in zip(rows["this"], rows["base"]))
        print(f"buffers after every round bit-identical: {same}; verdict counts "
              f"{rows['this'][-1]['verdicts']} / {rows['base'][-1]['verdicts']}")
    return 0


if __name__ == "__main__":
    if "--worker" not in sys.argv:  # a worker's stdout carries its JSON lines only
        sys.path.insert(0, str(ROOT / "bench"))
        from _host import host_line
        print(host_line(), flush=True)
    raise SystemExit(main())
