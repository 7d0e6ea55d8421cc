"""What one task of the TCU emulator's UDS server costs (``UdsServer.cycle``, examples/ecu_diagnostics.py).

Three loads, same run, on a virtual bus of its own (no plant): idle (no frame), one request per task (0x19 0x02
0xFF from a tester, answered in that task), and the worst case the bound allows: a full inbox of 64 random
frames on the physical ID plus 16 functional single frames every task.  Prints median, p99 and max per task (us)
and the ratios to idle.

    python bench/bench_uds.py [--tasks 5000]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
import uuid
from pathlib import Path

import can
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples"))

from ecu_diagnostics import DTCS  # noqa: E402

from io_adapters.can.uds_server import UdsServer  # noqa: E402
from _host import host_line  # noqa: E402  (bench/ is first on the path)


def run(load: str, tasks: int, rng: random.Random) -> np.ndarray:
    ch = f"bench-uds-{uuid.uuid4().hex[:8]}"
    ecu = can.Bus(interface="virtual", channel=ch, receive_own_messages=False)
    peer = can.Bus(interface="virtual", channel=ch, receive_own_messages=False)
    clock = [0]
    srv = UdsServer(ecu, DTCS, clock_ns=lambda: clock[0])
    out = np.empty(tasks)
    try:
        for k in range(tasks):
            clock[0] = k * 10_000_000
            if load == "one request":
                peer.send(can.Message(arbitration_id=0x7E0, is_extended_id=False, data=b"\x03\x19\x02\xFF" + b"\xCC" * 4))
            elif load == "full inbox":
                for _ in range(64):
                    peer.send(can.Message(arbitration_id=0x7E0, is_extended_id=False,
                                          data=bytes(rng.randrange(256) for _ in range(rng.randrange(9)))))
                for _ in range(16):
                    peer.send(can.Message(arbitration_id=0x7DF, is_extended_id=False, data=b"\x02\x3E\x00" + b"\xCC" * 5))
            frames = []
            while (m := ecu.recv(0.0)) is not None:
                frames.append(m)
            t0 = time.perf_counter_ns()
            for m in frames:  # what the TCU's receive does with them, then the task
                if srv.accepts(m):
                    srv.feed(m)
            srv.cycle()
            out[k] = (time.perf_counter_ns() - t0) / 1e3
            while peer.recv(0.0) is not None:
                pass
    finally:
        ecu.shutdown()
        peer.shutdown()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", type=int, default=5000)
    args = ap.parse_args()
    rng = random.Random(7)
    res = {load: run(load, args.tasks, rng) for load in ("idle", "one request", "full inbox")}
    base = float(np.median(res["idle"]))
    print(f"UdsServer.cycle per task, {args.tasks} tasks each (us)")
    for load, v in res.items():
        med = float(np.median(v))
        print(f"  {load:12s} median {med:8.1f}  p99 {np.percentile(v, 99):8.1f}  max {v.max():8.1f}  "
              f"x{med / base:.1f} idle")


if __name__ == "__main__":
    print(host_line(), flush=True)
    main()
