"""What one task of the TCU emulator's UDS server costs (``UdsServer.cycle``, examples/ecu_diagnostics.py), and how
long a DTC read takes in realtime.

Three loads, same run, on a virtual bus of its own (no plant): idle (no frame), one request per task (0x19 0x02
0xFF from a tester, answered in that task), and the worst case the bound allows: a full inbox of 64 random
frames on the physical ID plus 16 functional single frames every task.  Prints median, p99 and max per task (us)
and the ratios to idle.

``--realtime N``: then the bench in realtime: the server at 1 kHz in this process (the UDS bench's I/O config with
a ``uds`` adapter), the TCU emulator's 10 ms task on the wall clock in a thread, the speed frames dropped so the
DTC is confirmed; N reads of the DTCs by status mask 0x08 by a ``udsoncan`` client (can-isotp's ``CanStack`` on the
virtual bus, as against a real TCU), and N by the control channel (``uds_request`` with ``wait``).  Prints the wall
time from request to answer (ms: median, p99, max, how many within 50 ms) and the process's CPU time per read.

    python bench/bench_uds.py [--tasks 5000] [--realtime 200]
"""

from __future__ import annotations

import argparse
import random
import tempfile
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


def _summary(name: str, ms: np.ndarray, cpu_s: float) -> None:
    print(f"  {name:28s} n {len(ms)}  median {np.median(ms):6.2f}  p99 {np.percentile(ms, 99):6.2f}  "
          f"max {ms.max():6.2f} ms  within 50 ms: {int((ms <= 50.0).sum())}/{len(ms)}  "
          f"CPU {cpu_s / len(ms) * 1e3:.2f} ms/read")


def realtime(n: int) -> None:
    """The DTC read in realtime, by a udsoncan client and by the control channel (module docstring)."""
    import threading

    import isotp
    import udsoncan
    from udsoncan.client import Client
    from udsoncan.connections import PythonIsoTpConnection

    from ecu_diagnostics import DTC_SPEED_SENSOR, DiagnosticTcu
    from io_adapters.zmq.client import HilClient
    from server.testbench.uds_bench import InProcessServer

    ch = f"bench-uds-rt-{uuid.uuid4().hex[:8]}"
    io = Path(tempfile.mkdtemp()) / "io.toml"
    io.write_text((ROOT / "examples/benches/io_uds_lockstep.toml").read_text().replace("gearbox-hil-uds", ch)
                  + f'\n[[adapters]]\ntype = "uds"\nname = "uds"\ninterface = "virtual"\nchannel = "{ch}"\n'
                  + "p2_ms = 1000\n")
    with InProcessServer("powershift", io, mode="realtime") as srv, \
            HilClient(srv.control, timeout_s=30.0).connect() as hil:
        ecu_bus = can.Bus(interface="virtual", channel=ch, receive_own_messages=False)
        tcu = DiagnosticTcu(ecu_bus, shift_at_s=1e9)
        stop = threading.Event()

        def tcu_task() -> None:  # the TCU's 10 ms task on absolute deadlines of the wall clock
            start = deadline = time.monotonic()
            while not stop.is_set():
                tcu.cycle(deadline - start, 0.01)
                deadline += 0.01
                time.sleep(max(0.0, deadline - time.monotonic()))

        task = threading.Thread(target=tcu_task, daemon=True)
        task.start()
        bus = can.Bus(interface="virtual", channel=ch, receive_own_messages=False)
        stack = isotp.CanStack(bus, address=isotp.Address(isotp.AddressingMode.Normal_11bits, txid=0x7E0, rxid=0x7E8),
                               params={"tx_padding": 0xCC, "blocking_send": False})
        try:
            time.sleep(1.0)
            hil.set_fault({"target": "can", "message": "HIL_SpeedsA", "kind": "drop"})
            time.sleep(0.5)
            with Client(PythonIsoTpConnection(stack), config={**udsoncan.configs.default_client_config,
                                                              "request_timeout": 2.0, "p2_timeout": 1.0}) as client:
                ms, c0 = [], time.process_time()
                for _ in range(n):
                    t0 = time.perf_counter()
                    rsp = client.get_dtc_by_status_mask(0x08)
                    ms.append((time.perf_counter() - t0) * 1e3)
                    assert [d.id for d in rsp.service_data.dtcs] == [DTC_SPEED_SENSOR]
                    time.sleep(0.013)  # the next read at another phase of the TCU's 10 ms task
                _summary("udsoncan client", np.array(ms), time.process_time() - c0)
            ms, c0 = [], time.process_time()
            for _ in range(n):
                t0 = time.perf_counter()
                r = hil.request("uds_request", service="read_dtc", mask=8, wait=True)
                ms.append((time.perf_counter() - t0) * 1e3)
                assert [d["dtc"] for d in r["dtcs"]] == [DTC_SPEED_SENSOR]
                time.sleep(0.013)
            _summary("control channel (wait)", np.array(ms), time.process_time() - c0)
            st = hil.status()
            print(f"  server: overruns {st['timing']['overruns']} of {st['timing']['ticks']} ticks, "
                  f"tet p99 {st['timing']['tet_us']['p99']} us")
        finally:
            stop.set()
            task.join(timeout=5.0)
            bus.shutdown()
            hil.shutdown()
            ecu_bus.shutdown()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", type=int, default=5000)
    ap.add_argument("--realtime", type=int, default=0, metavar="N", help="also N DTC reads in realtime")
    args = ap.parse_args()
    if args.realtime:
        print(f"DTC read in realtime, wall time request -> answer ({args.realtime} each; this machine's load included)")
        realtime(args.realtime)
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
