"""Per-tick cost of the device layer from Python: the ``sim`` device and the ``mcu`` host's send path.

The layout is the bench's: 3 tooth wheels (10 edges a tick each, 60 teeth near
10 000 rpm), 8 solenoids, 4 range-code bits, an NTC, an analog output, 5 fault
switches.  Measured per call with ``perf_counter_ns`` over N ticks:

* ``sim``: ``write_targets`` + ``read_measurements`` (what a tick would add);
* ``mcu send``: ``write_targets`` of the host into a pseudo-terminal whose other end is drained
  (compiled encode and CRC, non-blocking write); ``mcu encode``: the compiled frame encoding alone;
  ``crc``: the CRC of that frame, compiled (the send path's) and pure Python (the parser's);
* baseline, same run: ``Targets.copy_from`` (the arrays copied once, no logic).

Run: ``python bench/bench_devices.py [--ticks 20000]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from _host import host_line  # noqa: E402
from devices_layout import bench_layout  # noqa: E402
from io_adapters.devices import Targets, create_device  # noqa: E402
from io_adapters.devices.wire import crc16_ccitt, encode_targets, max_frame  # noqa: E402


def _stats(ns):
    a = np.asarray(ns) / 1000.0
    return f"p50 {np.percentile(a, 50):7.2f} us  p90 {np.percentile(a, 90):7.2f}  p99 {np.percentile(a, 99):7.2f}"


def _time(fn, ticks):
    out = np.empty(ticks, dtype=np.int64)
    clock = time.perf_counter_ns
    for k in range(ticks):
        t0 = clock()
        fn(k)
        out[k] = clock() - t0
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ticks", type=int, default=20000)
    args = ap.parse_args()
    layout = bench_layout()
    t = Targets(layout)
    for w in range(3):
        t.edge_ns[w, :10] = np.arange(10) * 100_000 + 1234 * w
        t.edge_count[w] = 10
    spare = Targets(layout)
    sim = create_device("sim", "sim", layout)
    sim.open()
    master, slave = os.openpty()
    stop = threading.Event()

    def drain():
        os.set_blocking(slave, False)
        while not stop.is_set():
            try:
                os.read(slave, 65536)
            except BlockingIOError:
                time.sleep(0.0005)

    threading.Thread(target=drain, daemon=True).start()
    mcu = create_device("mcu", "mcu", layout, {"fd": master})  # not opened: the send path only, no reader
    mcu._fd = master
    mcu._safe_pending = False  # as after the device's first good answers: the real targets, edges and all
    os.set_blocking(master, False)
    buf = np.zeros(max_frame(layout), dtype=np.uint8)
    n = encode_targets(buf, 0, 0, 0, t)
    buf_py = bytearray(buf.tobytes())
    rows = {
        "baseline Targets.copy_from": lambda k: spare.copy_from(t),
        "sim write_targets + read_measurements": lambda k: (sim.write_targets(k, t), sim.read_measurements()),
        "mcu host write_targets (encode, CRC, write)": lambda k: mcu.write_targets(k, t),
        "mcu encode_targets alone": lambda k: encode_targets(buf, k, k, 0, t),
        f"CRC-16 of the {n}-byte frame, compiled": lambda k: crc16_ccitt(buf, 1, n - 2),
        f"CRC-16 of the {n}-byte frame, pure Python": lambda k: crc16_ccitt(buf_py, 1, n - 2),
    }
    for _ in range(2):  # warm-up and measured pass, interleaved so load hits every row alike
        results = {name: _time(fn, args.ticks) for name, fn in rows.items()}
    stop.set()
    base = np.percentile(results["baseline Targets.copy_from"], 50)
    for name, ns in results.items():
        print(f"{name:46s} {_stats(ns)}   p50/baseline {np.percentile(ns, 50) / base:6.1f}x")
    print(f"frame {n} bytes; tx_dropped {mcu.counters['tx_dropped']} of {mcu.counters['ticks']}")


if __name__ == "__main__":
    print(host_line(), flush=True)
    main()
