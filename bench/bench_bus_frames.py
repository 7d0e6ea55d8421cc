#!/usr/bin/env python3
"""The CAN adapter's ``write`` per tick with and without the recording's bus-frame spool, classic and multiplexed.

The Powershift plant and the CAN adapter on python-can's virtual bus (no
receiver), ticked by hand in lockstep (read, step, write); the time of the
adapter's ``write`` (pack, then send the due frames) is taken per tick.
Rounds alternate four cases in the same process: the classic message set
(``io_can_powershift``) and the multiplexed one (``io_can_powershift_mux``),
each without and with the bus spool running (``start_bus_log``: the
compiled copy of the packed frames into the spool's ring, and the spool's
thread writing them to a file).  Reported: per case the median of the
rounds' medians and p99s in microseconds, and the ratio to the classic set
without spool of the same round.

Usage::

    .venv/bin/python bench/bench_bus_frames.py --rounds 6 --ticks 5000
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import uuid
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

sys.path.insert(0, str(ROOT / "bench"))
from _host import host_line  # noqa: E402
from _support import can_write_us  # noqa: E402

CASES = [("classic", "io_can_powershift.toml", False), ("classic+spool", "io_can_powershift.toml", True),
         ("mux", "io_can_powershift_mux.toml", False), ("mux+spool", "io_can_powershift_mux.toml", True)]


def one_case(message_set: str, spool: bool, ticks: int, folder: Path) -> np.ndarray:
    """``write`` per tick, us, of ``message_set``, with the bus spool running into ``folder`` if ``spool``."""
    start = (lambda a: a.start_bus_log(folder / f"{uuid.uuid4().hex[:8]}.frames")) if spool else None
    return can_write_us(message_set, ticks, opened=start)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--ticks", type=int, default=5000)
    args = ap.parse_args()
    res = {name: {"median": [], "p99": [], "ratio": []} for name, _, _ in CASES}
    with tempfile.TemporaryDirectory() as tmp:
        one_case("io_can_powershift.toml", True, 200, Path(tmp))  # compile / load every kernel once
        for r in range(args.rounds):
            base = None
            for name, ms, spool in CASES:
                us = one_case(ms, spool, args.ticks, Path(tmp))
                med = float(np.median(us))
                base = med if base is None else base
                res[name]["median"].append(med)
                res[name]["p99"].append(float(np.percentile(us, 99)))
                res[name]["ratio"].append(med / base)
    print(f"{args.rounds} rounds of {args.ticks} ticks per case")
    print("| case | write median, us | write p99, us | median / classic (same round) |")
    print("| --- | --- | --- | --- |")
    for name, _, _ in CASES:
        d = res[name]
        print(f"| {name} | {np.median(d['median']):.2f} | {np.median(d['p99']):.2f} | {np.median(d['ratio']):.2f} |")
    return 0


if __name__ == "__main__":
    print(host_line())
    raise SystemExit(main())
