"""Per-tick cost of the device layer from Python: the ``sim`` device and the ``mcu`` host's send path.

The layout is the bench's: 3 tooth wheels (10 edges a tick each, 60 teeth near
10 000 rpm), 8 solenoids, 4 range-code bits, an NTC, an analog output, 5 fault
switches.  Measured per call with ``perf_counter_ns`` over N ticks:

* ``sim``: ``write_targets`` + ``read_measurements`` (what a tick would add);
* ``mcu send``: ``write_targets`` of the host into a pseudo-terminal whose other end is drained
  (compiled encode and CRC, non-blocking write); ``mcu encode``: the compiled frame encoding alone;
  ``crc``: the CRC of that frame, compiled (the send path's) and pure Python (the parser's);
* ``visa EdgePeriods.update``: what the ``visa`` backend's ``write_targets`` adds per tick to place a function
  generator's frequency from the edges across ticks (3 wheels; 10 edges a tick, and 1 edge a tick);
* baseline, same run: ``Targets.copy_from`` (the arrays copied once, no logic).

* ``device adapter read + write``: the device adapter of ``configs/io_device_powershift.toml`` (3 tooth wheels,
  8 solenoids, range code, NTC, KL30, 15 fault switches) on the ``sim`` backend: both compiled stages, models and
  pins, as the tick calls them (the plant is not stepped: the figure is the adapter's alone);
* ``tick A/B`` (``--tick-ticks``): the server's real tick (``Loop._tick``: adapters, plant step, ring) of
  ``powershift_electrical`` in lockstep, in alternating blocks of 500 ticks with the device adapter in the tick
  (A) and taken out of it (B, the solenoid currents then hold), timed per tick; the difference of the medians is
  what the device adds to the tick's TET p50.

Run: ``python bench/bench_devices.py [--ticks 20000] [--tick-ticks 20000]``.
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
from io_adapters.devices.visa import EdgePeriods  # noqa: E402
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
    ap.add_argument("--tick-ticks", type=int, default=20000, help="ticks of the tick A/B (0: skip it)")
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
    one_edge = Targets(layout)
    one_edge.edge_count[:3] = 1
    one_edge.edge_ns[:3, 0] = 400_000
    periods, periods_1 = EdgePeriods(3, 1_000_000), EdgePeriods(3, 1_000_000)
    rows["visa EdgePeriods.update, 10 edges a tick"] = lambda k: periods.update(k, t)
    rows["visa EdgePeriods.update, 1 edge a tick"] = lambda k: periods_1.update(k, one_edge)
    plant, adapter = _device_adapter()
    rows["device adapter read + write (sim, 3+8+NTC+range+KL30)"] = lambda k: (adapter.read(k, 0),
                                                                              adapter.write(k + 1, 0))
    for _ in range(2):  # warm-up and measured pass, interleaved so load hits every row alike
        results = {name: _time(fn, args.ticks) for name, fn in rows.items()}
    stop.set()
    base = np.percentile(results["baseline Targets.copy_from"], 50)
    for name, ns in results.items():
        print(f"{name:46s} {_stats(ns)}   p50/baseline {np.percentile(ns, 50) / base:6.1f}x")
    print(f"frame {n} bytes; tx_dropped {mcu.counters['tx_dropped']} of {mcu.counters['ticks']}")
    adapter.close()
    if args.tick_ticks:
        tick_ab(args.tick_ticks)


def _device_adapter():
    from io_adapters.base import LoopContext, create_adapter
    from plant_models.registry import load_plant

    plant = load_plant("powershift_electrical")
    plant.reset({"engine_torque": 300.0, "load_torque": 3500.0, "i_c1": 0.84, "i_c3": 0.84, "i_c6": 0.84})
    ad = create_adapter("device", "device", {"backend": "sim", "channels": "io_device_powershift.toml"})
    ad.open(plant, LoopContext(period_s=1e-3, feed_watchdog=lambda ns: None, status=dict, mode="lockstep"))
    plant.y[plant.output_index("w_1")] = 1047.0  # 10 000 rpm: 10 edges a tick on the 60-tooth wheel
    plant.y[plant.output_index("w_2")] = 500.0
    plant.y[plant.output_index("w_out")] = 300.0
    return plant, ad


IO_DEVICE_ONLY = """[loop]
status_line = false
mode = "lockstep"
[initial_inputs]
engine_torque = 300.0
load_torque = 3500.0
i_c1 = 0.84
i_c3 = 0.84
i_c6 = 0.84
[[adapters]]
type = "device"
name = "device"
channels = "io_device_powershift.toml"
"""


def tick_ab(ticks: int, block: int = 500) -> None:
    """The loop's tick with the device adapter in it (A) and out of it (B), alternating blocks, same run."""
    import tempfile

    from server.realtime.runtime import build

    with tempfile.TemporaryDirectory() as tmp:
        io = Path(tmp) / "io.toml"
        io.write_text(IO_DEVICE_ONLY)
        srv = build("powershift_electrical", io)
    loop = srv.loop
    loop.open()
    dev = next(a for a in loop.adapters if a.type_name == "device")
    for s, slot in enumerate((0, 2, 5)):  # the TCU holds gear 1 (a TCU's duties, no TCU code in the tick)
        dev.device.tcu_drive_pwm(slot, 0.84 * 6.18 / 13.5, 0.84)
    loop.start()
    with_dev = (loop._readers, loop._writers)
    without = (tuple(a for a in loop._readers if a is not dev), tuple(a for a in loop._writers if a is not dev))
    clock = time.perf_counter_ns
    out = {"A": [], "B": []}
    tick = loop._tick
    for j in range(2 * (ticks // block) + 2):
        label = "A" if j % 2 == 0 else "B"
        loop._readers, loop._writers = with_dev if label == "A" else without
        ns = np.empty(block, dtype=np.int64)
        for k in range(block):
            t0 = clock()
            tick(loop.sim_ns())
            ns[k] = clock() - t0
        if j >= 2:  # the first pair warms up
            out[label].append(ns)
    loop._readers, loop._writers = with_dev
    loop.close()
    a, b = np.concatenate(out["A"]), np.concatenate(out["B"])
    print(f"tick A/B, {len(a)} + {len(b)} ticks of powershift_electrical in blocks of {block} (lockstep, Loop._tick):")
    print(f"  A with the device adapter    {_stats(a)}")
    print(f"  B without                    {_stats(b)}")
    d50 = (np.percentile(a, 50) - np.percentile(b, 50)) / 1000.0
    print(f"  the device adds {d50:.2f} us to the tick's p50; per-block median differences (us): "
          + " ".join(f"{(np.median(x) - np.median(y)) / 1000:.2f}" for x, y in zip(out["A"], out["B"])))


if __name__ == "__main__":
    print(host_line(), flush=True)
    main()
