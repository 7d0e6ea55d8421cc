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

    python bench/bench_vbus.py --seconds 10 --rounds 3 [--raw] [--fifo 80] [--wait sleep_spin]

``--raw`` adds the local virtual bus between two bare processes (a sender
at 1 kHz, 4 frames a tick, no plant server): the transport without the
server's load.  ``--fifo PRIO`` adds, in the same rounds, vbus (and the
bare pair with ``--raw``) with the server's loop under ``[realtime]
sched_fifo_priority = PRIO`` and the receiver under SCHED_FIFO PRIO too (as
a HIL PC would run them; needs root or CAP_SYS_NICE): what the host's
scheduling costs, the variants alternated as the transports are.
``--wait`` sets the server loop's wait strategy (default: the config's).

Where a vbus frame's delay goes (the ``where`` table, vbus rows):

* ``tick -> send``: from the start of the tick that queued the frame to
  the adapter's ``bus.send`` between ticks (the server's status,
  ``tx.queue_wait_us``: per send between ticks, its oldest frame's wait;
  shown as the share of pumps at or above 0.5 ms and 1 ms and the max);
* ``send -> read``: from ``bus.send`` (the sender's ``CLOCK_MONOTONIC`` in
  the packet) to the receiver's ``recv`` system call returning it: the
  kernel and the scheduling of the receiving process;
* ``read -> app``: python-can in the receiver (decode, ``can.Message``,
  filters) until ``recv`` returns to the program;
* the server loop's own wake-up lateness (p99, max) in the same run: when
  the host is late to wake the server, it is late to wake the receiver too.

The first table's delay is ``send -> app`` (the two last ones together).
It prints Markdown tables and, with ``--json``, the same numbers as JSON.
"""

from __future__ import annotations

import argparse
import contextlib
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
from io_adapters.vbus import LocalBus, register, wire  # noqa: E402
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


class TracingBus(LocalBus):
    """The local virtual bus, noting for each packet when it was read and when it was sent (monotonic ns)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.last_read_ns = 0
        self.last_sent_ns = 0

    def _message(self, packet: bytes):
        self.last_read_ns = time.monotonic_ns()
        fields = wire.decode(packet)
        self.last_sent_ns = fields[3] if fields is not None else 0
        return super()._message(packet)


def receiver_bus(kind: str, endpoints: dict) -> can.BusABC:
    if kind == "vbus":
        register()  # a checkout not installed has no entry point; installed, this does nothing
        return TracingBus(endpoints["can.vbus"])  # what can.Bus(interface="vbus", channel=...) makes, traced
    if kind == "remote":
        return can.Bus(interface="remote", channel=endpoints["can.share"])
    return can.Bus(interface="socketcan", channel="vcan0")


@contextlib.contextmanager
def fifo(priority: int):
    """This thread under SCHED_FIFO ``priority`` (0: unchanged) for the block, then as it was."""
    if not priority:
        yield
        return
    old = (os.sched_getscheduler(0), os.sched_getparam(0))
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
    except PermissionError:
        sys.exit(f"bench_vbus: --fifo {priority}: SCHED_FIFO refused (needs root, CAP_SYS_NICE or an rtprio limit)")
    try:
        yield
    finally:
        os.sched_setscheduler(0, old[0], old[1])


def measure(kind: str, seconds: float, folder: Path, priority: int = 0, wait: str = "") -> dict:
    """Every sensor frame received in ``seconds`` from a running server: its delays (s), and the server's status."""
    realtime = f"[realtime]\nsched_fifo_priority = {priority}\n" if priority else ""
    io = write_io(folder / f"io_{kind}.toml", "", WATCHDOG + realtime + IO[kind], FREE_PORTS)
    args = ("--wait", wait) if wait else ()
    with LocalServer(folder, "powershift", io, "realtime", args, 300.0) as srv:
        bus = receiver_bus(kind, srv.info["endpoints"])
        traced = isinstance(bus, TracingBus)
        try:
            delays, wire_ns, app_ns = [], [], []
            with fifo(priority):
                warm_end = time.monotonic() + 1.0  # the first second: connection set-up, not measured
                end = warm_end + seconds
                cpu0 = time.thread_time()
                while True:
                    now_m = time.monotonic()
                    if now_m >= end:
                        break
                    msg = bus.recv(0.1)
                    if msg is None:
                        continue
                    ret_ns = time.monotonic_ns()
                    d = time.time() - msg.timestamp
                    if now_m >= warm_end:
                        delays.append(d)
                        if traced:
                            wire_ns.append(bus.last_read_ns - bus.last_sent_ns)
                            app_ns.append(ret_ns - bus.last_read_ns)
                cpu_s = time.thread_time() - cpu0
            with srv.client() as c:
                st = c.status()
        finally:
            bus.shutdown()
        srv.shutdown()
    adapters = st["adapters"]
    can_st = next(a for a in (adapters.values() if isinstance(adapters, dict) else adapters) if a.get("type") == "can")
    return {"delays": np.asarray(delays), "wire_ns": np.asarray(wire_ns), "app_ns": np.asarray(app_ns),
            "can": can_st, "timing": st.get("timing", {}), "receiver_cpu_s": cpu_s,
            "fifo_applied": bool((st.get("realtime") or {}).get("applied", {}).get("sched_fifo_priority"))
            if priority else False}


RAW_SENDER = """
import os, sys, time
sys.path.insert(0, sys.argv[1])
import can
from io_adapters.vbus import LocalBus
if int(sys.argv[4]):
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(int(sys.argv[4])))
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


def measure_raw(seconds: float, priority: int = 0) -> dict:
    """vbus only, no server: a sender process at 1 kHz (4 frames a tick) and this process receiving."""
    import subprocess

    channel = f"raw-{os.getpid()}"
    bus = TracingBus(channel)
    root = str(Path(__file__).resolve().parent.parent)
    p = subprocess.Popen([sys.executable, "-c", RAW_SENDER, root, channel, str(seconds), str(priority)])
    delays, wire_ns, app_ns = [], [], []
    try:
        with fifo(priority):
            timeout = 120.0  # the sender's interpreter starts first (slow on a loaded machine)
            cpu0 = time.thread_time()
            while True:
                msg = bus.recv(timeout)
                ret_ns = time.monotonic_ns()
                timeout = 5.0
                if msg is None or msg.arbitration_id == 0x7FF:
                    break
                delays.append(time.time() - msg.timestamp)
                wire_ns.append(bus.last_read_ns - bus.last_sent_ns)
                app_ns.append(ret_ns - bus.last_read_ns)
            cpu_s = time.thread_time() - cpu0
    finally:
        p.wait(timeout=60)
        bus.shutdown()
    return {"delays": np.asarray(delays), "wire_ns": np.asarray(wire_ns), "app_ns": np.asarray(app_ns), "can": {},
            "timing": {}, "receiver_cpu_s": cpu_s, "fifo_applied": bool(priority)}


def variants(args, kinds: list[str]) -> list[tuple[str, str, int, str]]:
    """(label, transport or "raw", SCHED_FIFO priority, server wait) of every measurement of a round."""
    waits = args.wait.split(",") if args.wait else [""]
    out = [(k, k, 0, waits[0]) for k in kinds]
    out += [(f"vbus, wait {w}", "vbus", 0, w) for w in waits[1:]]
    if args.fifo:
        out.append((f"vbus, SCHED_FIFO {args.fifo}", "vbus", args.fifo, waits[0]))
    if args.raw:
        out.append(("vbus, two bare processes", "raw", 0, ""))
        if args.fifo:
            out.append((f"vbus, two bare processes, SCHED_FIFO {args.fifo}", "raw", args.fifo, ""))
    return out


def _pct(a: np.ndarray, q: float) -> float:
    return float(np.percentile(a, q)) if a.size else float("nan")


def summarize(label: str, runs: list[dict]) -> dict:
    """The pooled numbers of one variant over its rounds (ms unless named otherwise)."""
    a = np.concatenate([r["delays"] for r in runs]) * 1e3
    w = np.concatenate([r["wire_ns"] for r in runs]) / 1e6
    app = np.concatenate([r["app_ns"] for r in runs]) / 1e6
    row = {"frames": int(a.size), "p50_ms": _pct(a, 50), "p99_ms": _pct(a, 99), "p999_ms": _pct(a, 99.9),
           "max_ms": float(a.max()) if a.size else float("nan"),
           "round_max_ms": [float(r["delays"].max() * 1e3) if r["delays"].size else None for r in runs],
           "sender_drops": sum(int(r["can"].get("bus", {}).get("dropped", 0)) + int(r["can"].get("tx", {}).get(
               "errors", 0)) for r in runs),
           "send_read_p99_ms": _pct(w, 99), "send_read_max_ms": float(w.max()) if w.size else None,
           "read_app_p99_ms": _pct(app, 99), "read_app_max_ms": float(app.max()) if app.size else None,
           "receiver_cpu_us_per_frame": sum(r["receiver_cpu_s"] for r in runs) / max(a.size, 1) * 1e6,
           "fifo_applied": all(r["fifo_applied"] for r in runs)}
    bins: dict[str, int] = {}
    for r in runs:
        for k, v in r["can"].get("tx", {}).get("queue_wait_us", {}).items():
            bins[k] = bins.get(k, 0) + int(v)
    if bins:
        total = sum(bins.values()) or 1
        late1 = sum(v for k, v in bins.items() if k in ("1000-2000", "2000-5000", ">=5000"))
        late05 = late1 + bins.get("500-1000", 0)
        row.update(tick_send_pumps=sum(bins.values()), tick_send_bins=bins,
                   tick_send_ge_0_5ms=late05 / total, tick_send_ge_1ms=late1 / total,
                   tick_send_max_ms=max(r["can"]["tx"].get("queue_wait_max_us", 0.0) for r in runs) / 1e3)
    lat = [r["timing"].get("lateness_us", {}) for r in runs if r["timing"]]
    if lat:
        row.update(loop_late_p99_us=max(x.get("p99") or 0.0 for x in lat),
                   loop_late_max_us=max(x.get("max") or 0.0 for x in lat),
                   loop_overruns=sum(int(r["timing"].get("overruns", 0)) for r in runs if r["timing"]))
    return row


def _f(x, fmt: str = ".3f") -> str:
    return "-" if x is None or (isinstance(x, float) and np.isnan(x)) else format(x, fmt)


def print_tables(rows: dict, args) -> None:
    load = os.getloadavg()
    print(f"CPU: {cpu_model()}, {os.cpu_count()} cores; load average at the end {load[0]:.1f} / {load[1]:.1f} / "
          f"{load[2]:.1f} (1/5/15 min); {args.rounds} rounds x {args.seconds:g} s per variant; "
          f"sender: gearbox-hil serve powershift, 1 kHz realtime loop (wait: {args.wait or 'as configured'})")
    print()
    print("| transport | frames | p50 ms | p99 ms | p99.9 ms | max ms | sender's drops + errors |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for label, x in rows.items():
        print(f"| {label} | {x['frames']} | {_f(x['p50_ms'])} | {_f(x['p99_ms'])} | {_f(x['p999_ms'])} | "
              f"{_f(x['max_ms'])} | {x['sender_drops']} |")
    traced = {k: x for k, x in rows.items() if not np.isnan(x["send_read_p99_ms"])}
    if traced:
        print()
        print("Where the vbus delay goes (ms; tick -> send: per pump, its oldest frame; the loop's lateness: us)")
        print()
        print("| variant | tick -> send >= 0.5 ms | >= 1 ms | max | send -> read p99 | max | read -> app p99 | "
              "max | receiver CPU us/frame | loop late p99 / max us | overruns |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for label, x in traced.items():
            ts = ("-", "-", "-") if "tick_send_pumps" not in x else (
                f"{x['tick_send_ge_0_5ms'] * 100:.2f} %", f"{x['tick_send_ge_1ms'] * 100:.2f} %",
                _f(x["tick_send_max_ms"]))
            loop = f"{_f(x.get('loop_late_p99_us'), '.0f')} / {_f(x.get('loop_late_max_us'), '.0f')}" \
                if "loop_late_p99_us" in x else "-"
            fifo_note = "" if x["fifo_applied"] or "FIFO" not in label else " (FIFO NOT applied)"
            print(f"| {label}{fifo_note} | {ts[0]} | {ts[1]} | {ts[2]} | {_f(x['send_read_p99_ms'])} | "
                  f"{_f(x['send_read_max_ms'])} | {_f(x['read_app_p99_ms'])} | {_f(x['read_app_max_ms'])} | "
                  f"{_f(x['receiver_cpu_us_per_frame'], '.1f')} | {loop} | {x.get('loop_overruns', '-')} |")
    if "vcan" not in rows:
        print("\n(vcan: not available on this kernel)")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=10.0, help="measured seconds per variant and round")
    ap.add_argument("--rounds", type=int, default=3, help="rounds (each measures every variant once)")
    ap.add_argument("--json", metavar="PATH", help="also write the numbers as JSON")
    ap.add_argument("--raw", action="store_true", help="also vbus between two bare processes (no server)")
    ap.add_argument("--fifo", type=int, default=0, metavar="PRIO",
                    help="also vbus with the server loop and the receiver under SCHED_FIFO PRIO (1..99)")
    ap.add_argument("--wait", default="", metavar="WAIT[,WAIT...]",
                    help="the server loop's wait strategy (sleep, sleep_spin, spin; default: the config's); more "
                    "than one: vbus also with each further one, in the same rounds")
    ap.add_argument("--transports", default="", help="comma-separated subset of vbus,remote,vcan (default: all)")
    args = ap.parse_args(argv)
    if not 0 <= args.fifo <= 99:
        ap.error("--fifo: a priority 1..99 (0: none)")
    if args.wait and not set(args.wait.split(",")) <= {"sleep", "sleep_spin", "spin"}:
        ap.error("--wait: sleep, sleep_spin or spin, comma-separated")
    kinds = ["vbus", "remote"] + (["vcan"] if vcan_available() else [])
    if args.transports:
        kinds = [k for k in kinds if k in args.transports.split(",")]
    plan = variants(args, kinds)
    runs: dict[str, list[dict]] = {label: [] for label, _, _, _ in plan}
    with tempfile.TemporaryDirectory(prefix="vbb") as tmp:
        os.environ.setdefault("GEARBOX_VBUS_DIR", os.path.join(tmp, "bus"))
        for r in range(args.rounds):
            for n, (label, kind, prio, wait) in enumerate(plan if r % 2 == 0 else plan[::-1]):
                if kind == "raw":
                    res = measure_raw(args.seconds, prio)
                else:
                    folder = Path(tmp) / f"{kind}_{r}_{n}"
                    folder.mkdir()
                    res = measure(kind, args.seconds, folder, prio, wait)
                runs[label].append(res)
                d = res["delays"]
                print(f"round {r + 1} {label}: {len(d)} frames, p50 {_pct(d, 50) * 1e3:.3f} ms, "
                      f"p99 {_pct(d, 99) * 1e3:.3f} ms, max {d.max() * 1e3 if d.size else float('nan'):.3f} ms",
                      file=sys.stderr)
    rows = {label: summarize(label, rs) for label, rs in runs.items()}
    print_tables(rows, args)
    if args.json:
        Path(args.json).write_text(json.dumps(with_host({
            "cpu": cpu_model(), "seconds": args.seconds, "rounds": args.rounds, "loadavg": os.getloadavg(),
            "wait": args.wait or "config", "fifo": args.fifo, "transports": rows}), indent=1))
    return 0


if __name__ == "__main__":
    print(host_line(), flush=True)
    sys.exit(main())
