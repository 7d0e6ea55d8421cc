"""One-way CAN frame latency between two processes: the local virtual bus beside python-can-remote, same run.

The sending process is ``gearbox-hil serve powershift`` with its 1 kHz
real-time loop running and the CAN adapter sending the plant's sensor
frames; the receiving process is this script, a python-can program.  Both
transports stamp a frame with the sender's ``time.time()`` at ``bus.send``
(python-can's virtual bus under the share does, and so does the local
virtual bus), and the receiver subtracts it from its own ``time.time()``
when ``recv`` returns: the one-way delay through the transport and the
receiving process, one clock for both processes.

Transports, alternated in rounds so the machine's load falls on both alike:

* ``vbus``: ``interface = "vbus"`` (io_adapters/vbus), the receiver on
  ``can.Bus(interface="vbus", channel=...)``;
* ``remote``: ``interface = "virtual"`` with the python-can-remote share,
  the receiver on ``can.Bus(interface="remote", channel="ws://...")``;
* ``vcan``: SocketCAN vcan0, only where the kernel has it.

Run::

    python bench/bench_vbus.py --seconds 10 --rounds 3 [--raw]

``--raw`` adds the local virtual bus between two bare processes (a sender
at 1 kHz, 4 frames a tick, no plant server): the transport without the
server's load.

It prints a Markdown table (p50, p99, max of the delay and the frames
counted) and, with ``--json``, the same numbers as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import can  # noqa: E402

from _support import FREE_PORTS, LocalServer, write_io  # noqa: E402
from io_adapters.vbus import register  # noqa: E402
from _host import cpu_model, host_line, with_host  # noqa: E402

IO = {
    "vbus": """
[[adapters]]
type = "can"
name = "can"
interface = "vbus"
channel = "*"
""",
    "remote": """
[[adapters]]
type = "can"
name = "can"
interface = "virtual"
channel = "bench-vbus-remote"
[adapters.share]
port = 0
""",
    "vcan": """
[[adapters]]
type = "can"
name = "can"
interface = "socketcan"
channel = "vcan0"
""",
}
WATCHDOG = "[watchdog]\nenabled = false\n"


def vcan_available() -> bool:
    if not hasattr(socket, "AF_CAN"):
        return False
    try:
        s = socket.socket(socket.AF_CAN, socket.SOCK_RAW, socket.CAN_RAW)
        s.bind(("vcan0",))
        s.close()
        return True
    except OSError:
        return False


def receiver_bus(kind: str, endpoints: dict) -> can.BusABC:
    if kind == "vbus":
        register()  # a checkout not installed has no entry point; installed, this does nothing
        return can.Bus(interface="vbus", channel=endpoints["can.vbus"])
    if kind == "remote":
        return can.Bus(interface="remote", channel=endpoints["can.share"])
    return can.Bus(interface="socketcan", channel="vcan0")


def measure(kind: str, seconds: float, folder: Path) -> tuple[np.ndarray, dict]:
    """Delays (s) of every sensor frame received in ``seconds`` from a running server, and its CAN status."""
    io = write_io(folder / f"io_{kind}.toml", "", WATCHDOG + IO[kind], FREE_PORTS)
    with LocalServer(folder, "powershift", io, "realtime", (), 300.0) as srv:
        bus = receiver_bus(kind, srv.info["endpoints"])
        try:
            delays = []
            warm_end = time.monotonic() + 1.0  # the first second: connection set-up, not measured
            end = warm_end + seconds
            while True:
                now_m = time.monotonic()
                if now_m >= end:
                    break
                msg = bus.recv(0.1)
                if msg is None:
                    continue
                d = time.time() - msg.timestamp
                if now_m >= warm_end:
                    delays.append(d)
            with srv.client() as c:
                st = c.status()
        finally:
            bus.shutdown()
        srv.shutdown()
    adapters = st["adapters"]
    can_st = next(a for a in (adapters.values() if isinstance(adapters, dict) else adapters) if a.get("type") == "can")
    return np.asarray(delays), can_st


RAW_SENDER = """
import sys, time
sys.path.insert(0, sys.argv[1])
import can
from io_adapters.vbus import LocalBus
bus = LocalBus(sys.argv[2])
time.sleep(0.5)  # the receiver is there already; let its listing settle
msg = can.Message(arbitration_id=0x18FEF100, is_extended_id=True, data=bytes(8))
period_ns, n = 1_000_000, int(float(sys.argv[3]) * 1000)
due = time.monotonic_ns()
for _ in range(n):  # 1 kHz on absolute deadlines, 4 frames a tick
    due += period_ns
    while time.monotonic_ns() < due:
        time.sleep(max(0.0, (due - time.monotonic_ns()) / 1e9 - 0.0002))
    for _ in range(4):
        bus.send(msg)
bus.send(can.Message(arbitration_id=0x7FF, is_extended_id=False))
bus.shutdown()
"""


def measure_raw(seconds: float) -> np.ndarray:
    """vbus only, no server: a sender process at 1 kHz (4 frames a tick) and this process receiving."""
    import subprocess

    from io_adapters.vbus import LocalBus

    channel = f"raw-{os.getpid()}"
    bus = LocalBus(channel)
    root = str(Path(__file__).resolve().parent.parent)
    p = subprocess.Popen([sys.executable, "-c", RAW_SENDER, root, channel, str(seconds)])
    delays = []
    try:
        timeout = 120.0  # the sender's interpreter starts first (slow on a loaded machine)
        while True:
            msg = bus.recv(timeout)
            timeout = 5.0
            if msg is None or msg.arbitration_id == 0x7FF:
                break
            delays.append(time.time() - msg.timestamp)
    finally:
        p.wait(timeout=60)
        bus.shutdown()
    return np.asarray(delays)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=10.0, help="measured seconds per transport and round")
    ap.add_argument("--rounds", type=int, default=3, help="rounds (each measures every transport once)")
    ap.add_argument("--json", metavar="PATH", help="also write the numbers as JSON")
    ap.add_argument("--raw", action="store_true", help="also vbus between two bare processes (no server)")
    args = ap.parse_args(argv)
    kinds = ["vbus", "remote"] + (["vcan"] if vcan_available() else [])
    pooled: dict[str, list[np.ndarray]] = {k: [] for k in kinds}
    tx_lost: dict[str, int] = {k: 0 for k in kinds}
    with tempfile.TemporaryDirectory(prefix="vbb") as tmp:
        os.environ.setdefault("GEARBOX_VBUS_DIR", os.path.join(tmp, "bus"))
        for r in range(args.rounds):
            for kind in (kinds if r % 2 == 0 else kinds[::-1]):
                folder = Path(tmp) / f"{kind}_{r}"
                folder.mkdir()
                d, st = measure(kind, args.seconds, folder)
                pooled[kind].append(d)
                tx_lost[kind] += int(st.get("bus", {}).get("dropped", 0)) + int(st["tx"]["errors"])
                print(f"round {r + 1} {kind}: {len(d)} frames, p50 {np.percentile(d, 50) * 1e3:.3f} ms, "
                      f"p99 {np.percentile(d, 99) * 1e3:.3f} ms, max {d.max() * 1e3:.3f} ms", file=sys.stderr)
            if args.raw:
                d = measure_raw(args.seconds)
                pooled.setdefault("vbus, no server", []).append(d)
                tx_lost["vbus, no server"] = 0
                print(f"round {r + 1} vbus without a server: {len(d)} frames, p99 {np.percentile(d, 99) * 1e3:.3f} ms",
                      file=sys.stderr)
    if args.raw:
        kinds.append("vbus, no server")
    rows = {}
    load = os.getloadavg()
    print(f"CPU: {cpu_model()}, {os.cpu_count()} cores; load average at the end {load[0]:.1f} / {load[1]:.1f} / "
          f"{load[2]:.1f} (1/5/15 min); {args.rounds} rounds x {args.seconds:g} s per transport; "
          "sender: gearbox-hil serve powershift, 1 kHz realtime loop")
    print()
    print("| transport | frames | p50 ms | p99 ms | p99.9 ms | max ms | sender's drops + errors |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for kind in kinds:
        a = np.concatenate(pooled[kind]) * 1e3
        rows[kind] = {"frames": int(a.size), "p50_ms": float(np.percentile(a, 50)),
                      "p99_ms": float(np.percentile(a, 99)), "p999_ms": float(np.percentile(a, 99.9)),
                      "max_ms": float(a.max()), "round_max_ms": [float(x.max() * 1e3) for x in pooled[kind]],
                      "sender_drops": tx_lost[kind]}
        x = rows[kind]
        print(f"| {kind} | {x['frames']} | {x['p50_ms']:.3f} | {x['p99_ms']:.3f} | {x['p999_ms']:.3f} | "
              f"{x['max_ms']:.3f} | {x['sender_drops']} |")
    if "vcan" not in kinds:
        print("\n(vcan: not available on this kernel)")
    if args.json:
        Path(args.json).write_text(json.dumps(with_host({"cpu": cpu_model(), "seconds": args.seconds,
                                                         "rounds": args.rounds, "loadavg": load,
                                                         "transports": rows}), indent=1))
    return 0


if __name__ == "__main__":
    print(host_line(), flush=True)
    sys.exit(main())
