"""What the rest-bus's CanNm costs the CAN adapter's write, and what a J1939 (E)TP transfer costs per frame.

Two parts, each against a baseline of the same round:

* the multiplexed set's ``write`` per tick (us, wall clock around the call) with its ``[nm]`` table and
  with the table removed (a copy of the set in a temporary folder), lockstep, 1 ms ticks;
* CPU time per frame of a transfer between two J1939 nodes in memory (no bus): 65 536 bytes by ETP
  against 1785 bytes by TP (RTS/CTS), the receiver's windows of 16 packets.

    python bench/bench_nm_etp.py [--rounds 5] [--ticks 4000]
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _host import host_line  # noqa: E402  (bench/ is first on the path)
from _support import can_write_us as write_us  # noqa: E402
from io_adapters.can import j1939 as j  # noqa: E402


class _Node(j.Node):
    def __init__(self, payload: bytes, name: int, address: int):
        super().__init__("n", name, address, {0xEF00: lambda: (6, payload)} if payload else {})
        self.got: list[bytes] = []

    def on_message(self, pgn, data, source, destination, now_ms):
        self.got.append(data)
        return []


def transfer_us_per_frame(size: int) -> float:
    """CPU us per frame of one request answered by a transfer of ``size`` bytes between two nodes."""
    payload = random.Random(size).randbytes(size)
    a, b = _Node(payload, 1, 0x00), _Node(b"", 2, 0x03)
    for n in (a, b):
        n.start(0.0)
        n.poll(250.0)
    t0 = time.process_time()
    to_a, frames = b._send_message(0xEA00, 6, bytes((0, 0xEF, 0)), 0x00, 300.0), 0
    while to_a:
        to_b = [f for fr in to_a for f in a.on_frame(fr[0], fr[1], 300.0)]
        to_a = [f for fr in to_b for f in b.on_frame(fr[0], fr[1], 300.0)]
        frames += len(to_a) + len(to_b)
    dt = time.process_time() - t0
    assert b.got == [payload], "the transfer did not arrive whole"
    return dt / frames * 1e6


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--ticks", type=int, default=4000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        text = (ROOT / "configs" / "io_can_powershift_mux.toml").read_text()
        no_nm = Path(tmp) / "io_mux_no_nm.toml"
        no_nm.write_text(text[:text.index("\n[nm]")] + "\n")
        shutil.copy(ROOT / "configs" / "powershift_mux.dbc", Path(tmp) / "powershift_mux.dbc")
        cases = [("mux without [nm]", str(no_nm)), ("mux with [nm]", "io_can_powershift_mux.toml")]
        write_us(cases[0][1], 200)  # compile / load every kernel once
        res = {name: {"median": [], "p99": [], "ratio": []} for name, _ in cases}
        etp, tp = [], []
        for _ in range(args.rounds):
            base = None
            for name, ms in cases:
                us = write_us(ms, args.ticks)
                med = float(np.median(us))
                base = med if base is None else base
                res[name]["median"].append(med)
                res[name]["p99"].append(float(np.percentile(us, 99)))
                res[name]["ratio"].append(med / base)
            tp.append(transfer_us_per_frame(1785))
            etp.append(transfer_us_per_frame(65536))
    print(f"{args.rounds} rounds of {args.ticks} ticks per case")
    print("| case | write median, us | write p99, us | median / without (same round) |")
    print("| --- | --- | --- | --- |")
    for name, _ in cases:
        d = res[name]
        print(f"| {name} | {np.median(d['median']):.2f} | {np.median(d['p99']):.2f} | {np.median(d['ratio']):.2f} |")
    ratio = np.median(np.array(etp) / np.array(tp))
    print(f"transfer CPU per frame, median of {args.rounds}: TP 1785 bytes {np.median(tp):.2f} us, "
          f"ETP 65536 bytes {np.median(etp):.2f} us (ETP / TP same round {ratio:.2f})")
    return 0


if __name__ == "__main__":
    print(host_line())
    raise SystemExit(main())
