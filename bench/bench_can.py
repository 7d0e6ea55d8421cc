#!/usr/bin/env python3
"""CAN adapter benchmarks: per-tick cost at 1 kHz and the command -> speed-frame round trip.

One run = the Powershift plant in the real-time loop (``server.realtime.loop.Loop``,
1 kHz, realtime mode) with the CAN adapter and its full message set (4
command messages in, 7 sensor/status messages out, all E2E-protected) on
python-can's virtual bus, and a TCU in a second thread of the same process
(``--share``: in a second process, over the loopback share) that

* sends TCU_ClutchCmdA/B and ENG_Torque every 10 ms (ENV_Load every 100 ms),
  all clutches open, and flips the engine torque between +T and -T every
  40 ms;
* timestamps every flip just before the ENG_Torque frame goes out, and the
  arrival of the first HIL_SpeedsA frame whose engine speed *reflects* it:
  with open clutches the engine accelerates at +-T/J, so the speed's second
  difference between consecutive frames jumps at the first frame computed
  with the new torque (a physical detection, no instrumentation).

Per-tick cost = the time spent in the adapter's ``read`` + ``write`` per
tick (measured around the calls), with the plant step and a cantools
dict-based codec doing the same work (``encode_message``/``decode_message``
per frame) as baselines in the same run.

Usage::

    .venv/bin/python bench/bench_can.py                 # 20 s, speeds at the DBC's 10 ms and at 1 ms
    .venv/bin/python bench/bench_can.py --seconds 5 --share
    .venv/bin/python bench/bench_can.py --markdown bench/results/can.md
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import can  # noqa: E402
import cantools  # noqa: E402

import io_adapters.can.adapter  # noqa: E402,F401
from io_adapters.base import Adapter  # noqa: E402
from io_adapters.can.e2e import E2EEncoder, crc8_sae_j1850  # noqa: E402
from plant_models.registry import load_plant  # noqa: E402
from server.realtime.loop_config import LoopConfig  # noqa: E402
from server.realtime.runtime import assemble  # noqa: E402
from server.realtime.telemetry import C_OVERRUNS  # noqa: E402
from server.realtime.watchdog import WatchdogConfig  # noqa: E402
from _host import host_line  # noqa: E402  (bench/ is first on the path)

DBC_PATH = ROOT / "configs" / "powershift.dbc"
MS_PATH = ROOT / "configs" / "io_can_powershift.toml"
TORQUE = 1000.0  # N m, engine torque amplitude of the flips
FLIP_CYCLES = 4  # flip every 4 TCU cycles (40 ms)


class TimedAdapter(Adapter):
    """Wraps an adapter and records the duration of every read and write (ns) in preallocated arrays."""

    def __init__(self, inner: Adapter, capacity: int):
        super().__init__(inner.name, {})
        self.inner = inner
        self.read_ns = np.zeros(capacity, dtype=np.int64)
        self.write_ns = np.zeros(capacity, dtype=np.int64)
        self.pump_ns = np.zeros(4 * capacity, dtype=np.int64)  # between ticks: the frames the ticks queued sent
        self.n_read = 0
        self.n_write = 0
        self.n_pump = 0

    def open(self, plant, ctx):
        self.inner.open(plant, ctx)

    def read(self, tick, now_ns):
        t0 = time.perf_counter_ns()
        self.inner.read(tick, now_ns)
        i = self.n_read
        if i < self.read_ns.shape[0]:
            self.read_ns[i] = time.perf_counter_ns() - t0
            self.n_read = i + 1

    def write(self, tick, now_ns):
        t0 = time.perf_counter_ns()
        self.inner.write(tick, now_ns)
        i = self.n_write
        if i < self.write_ns.shape[0]:
            self.write_ns[i] = time.perf_counter_ns() - t0
            self.n_write = i + 1

    def pump(self, until_ns=0):
        t0 = time.perf_counter_ns()
        self.inner.pump(until_ns)
        i = self.n_pump
        if i < self.pump_ns.shape[0]:
            self.pump_ns[i] = time.perf_counter_ns() - t0
            self.n_pump = i + 1

    def close(self):
        self.inner.close()

    def status(self):
        return self.inner.status()


# -- the TCU side -------------------------------------------------------------------------------------------------

def tcu_task(bus: can.BusABC, seconds: float, stop: threading.Event | None = None) -> dict:
    """Cyclic commands, torque flips, and detection of the speed frame reflecting each flip (see module doc)."""
    db = cantools.database.load_file(str(DBC_PATH))
    msg = db.get_message_by_name
    enc_a = E2EEncoder(msg("TCU_ClutchCmdA"), "ClutchCmdA_CRC", "ClutchCmdA_Counter", 0x0100)
    enc_b = E2EEncoder(msg("TCU_ClutchCmdB"), "ClutchCmdB_CRC", "ClutchCmdB_Counter", 0x0101)
    enc_e = E2EEncoder(msg("ENG_Torque"), "EngTorque_CRC", "EngTorque_Counter", 0x0110)
    enc_l = E2EEncoder(msg("ENV_Load"), "EnvLoad_CRC", "EnvLoad_Counter", 0x0120)
    speeds = msg("HIL_SpeedsA")
    zero_a = {f"PressureCmd_C{c}": 0.0 for c in (1, 2, 3, 4)}
    zero_b = {f"PressureCmd_C{c}": 0.0 for c in (5, 6, 7, 8)}
    period = 10_000_000
    latencies = []
    sign = 1.0
    t_flip = None
    prev_speed = prev_delta = None
    frames_since_flip = 0
    k = 0
    start = time.perf_counter_ns()
    next_send = start
    end = start + int(seconds * 1e9)
    while time.perf_counter_ns() < end and not (stop is not None and stop.is_set()):
        now = time.perf_counter_ns()
        if now >= next_send:
            flip = k > 0 and k % FLIP_CYCLES == 0
            if flip:
                sign = -sign
            bus.send(can.Message(arbitration_id=0x100, is_extended_id=False, data=enc_a.encode(zero_a)))
            bus.send(can.Message(arbitration_id=0x101, is_extended_id=False, data=enc_b.encode(zero_b)))
            data_e = enc_e.encode({"EngineTorque": sign * TORQUE})
            t_send = time.perf_counter_ns()
            bus.send(can.Message(arbitration_id=0x110, is_extended_id=False, data=data_e))
            if k % 10 == 0:
                bus.send(can.Message(arbitration_id=0x120, is_extended_id=False,
                                     data=enc_l.encode({"LoadTorque": 0.0})))
            if flip and k > 2 * FLIP_CYCLES:  # let the first flips settle the slope history
                t_flip = t_send
                frames_since_flip = 0
            k += 1
            next_send += period
        timeout = max(0.0, (next_send - time.perf_counter_ns()) / 1e9)
        m = bus.recv(timeout)
        if m is None or m.arbitration_id != speeds.frame_id:
            continue
        t_rx = time.perf_counter_ns()
        v = speeds.decode(bytes(m.data))["EngineSpeed"]
        if prev_speed is not None:
            delta = v - prev_speed
            if t_flip is not None:
                frames_since_flip += 1
                # new torque changes the per-frame speed change by 2 T / J * frame period >= 12.7 rpm per tick
                if prev_delta is not None and abs(delta - prev_delta) > 4.0:
                    latencies.append(t_rx - t_flip)
                    t_flip = None
                elif frames_since_flip > 50:
                    t_flip = None  # lost (counted below)
            prev_delta = delta
        prev_speed = v
    return {"latencies_ns": latencies, "flips": max(0, (k - 2 * FLIP_CYCLES - 1) // FLIP_CYCLES)}


def tcu_process_main(url: str, seconds: float, out: str) -> None:
    bus = can.Bus(interface="remote", channel=url)
    try:
        time.sleep(0.3)
        res = tcu_task(bus, seconds)
    finally:
        bus.shutdown()
    Path(out).write_text(json.dumps(res))


# -- the plant side ----------------------------------------------------------------------------------------------

def message_set_with_speed_cycle(cycle_ms: float, folder: Path) -> Path:
    text = MS_PATH.read_text().replace('dbc = "powershift.dbc"', f'dbc = "{DBC_PATH.as_posix()}"')
    if cycle_ms != 10:
        text = text.replace("[tx.HIL_SpeedsA]\n", f"[tx.HIL_SpeedsA]\ncycle_ms = {cycle_ms:g}\n")
    path = folder / f"io_can_bench_{cycle_ms:g}ms.toml"
    path.write_text(text)
    return path


def run_once(seconds: float, speed_cycle_ms: float, share: bool, folder: Path,
             adapter_cls=io_adapters.can.adapter.CanAdapter) -> dict:
    plant = load_plant("powershift")
    channel = f"bench-{uuid.uuid4().hex[:8]}"
    opts = {"interface": "virtual", "channel": channel,
            "message_set": str(message_set_with_speed_cycle(speed_cycle_ms, folder))}
    if share:
        opts["share"] = {"port": 0}
    inner = adapter_cls("can", opts)
    n = int(seconds * 1000) + 2000
    timed = TimedAdapter(inner, n)
    cfg = LoopConfig(mode="realtime", rate_hz=1000.0, duration_s=seconds + (2.0 if share else 0.5),
                     status_interval_s=0.0, sample_capacity=n, startup_grace_s=0.5)
    loop = assemble(plant, [timed], cfg, WatchdogConfig(timeout_s=0.1)).loop
    loop.open()
    result: dict = {}
    stop = threading.Event()
    proc = None
    if share:
        out = folder / "tcu.json"
        proc = subprocess.Popen([sys.executable, __file__, "--tcu-process", inner.share_url, str(seconds), str(out)])
    else:
        tcu_bus = can.Bus(interface="virtual", channel=channel)

        def tcu():
            time.sleep(0.3)
            result.update(tcu_task(tcu_bus, seconds, stop))

        th = threading.Thread(target=tcu, daemon=True)
        th.start()
    try:
        loop.run()
    finally:
        stop.set()
        if proc is not None:
            proc.wait(timeout=60)
            result.update(json.loads((folder / "tcu.json").read_text()))
        else:
            th.join(timeout=5)
            tcu_bus.shutdown()
        status = inner.status()
        loop.close()
    samples = loop.telemetry.sample_array()
    k0 = 500  # skip the first half second (start-up)
    n_rw = min(timed.n_read, timed.n_write)
    rw = timed.read_ns[k0:n_rw] + timed.write_ns[k0:n_rw]
    pump_per_tick_ns = float(timed.pump_ns[:timed.n_pump].sum()) / max(n_rw, 1)
    return {"read_ns": timed.read_ns[k0:n_rw], "write_ns": timed.write_ns[k0:n_rw],
            "pump_per_tick_ns": pump_per_tick_ns,
            "rw_ns": rw, "step_ns": samples[k0:, 2], "tet_ns": samples[k0:, 1], "lat_ns": samples[k0:, 0],
            "round_trip_ns": np.asarray(result.get("latencies_ns", []), dtype=np.int64),
            "flips": result.get("flips", 0), "status": status, "overruns": int(loop.telemetry.counters[C_OVERRUNS])}


class NaiveCantoolsAdapter(io_adapters.can.adapter.CanAdapter):
    """Baseline: the same frames with cantools' dict codec in the tick (what the precompiled layouts replace).

    Reception, E2E checks and the bus are the adapter's; ``read`` decodes the
    newest frame of each command message with ``db.decode_message`` and sets
    the plant inputs by name (``_read_internal``, under the base class's
    ``read`` like the adapter's own), ``write`` builds a dict of values by name for
    each due message, encodes it with ``db.encode_message`` and adds counter
    and CRC in Python.
    """

    def open(self, plant, ctx):
        super().open(plant, ctx)
        import tomllib

        self.db = cantools.database.load_file(str(DBC_PATH))
        ms = tomllib.loads(Path(self.ms.source).read_text())
        self.rx_map = {self.db.get_message_by_name(n).frame_id: t for n, t in ms["rx"].items()}
        self.tx_list = []
        for k, (n, t) in enumerate(ms["tx"].items()):
            m = self.db.get_message_by_name(n)
            self.tx_list.append((m, t, int(self.ms.tx.M[k, 8]), int(self.ms.tx.M[k, 9])))
        self.latest = {}
        self.taken = {}
        self.counters = {m.name: 0 for m, *_ in self.tx_list}
        self.rpm = {m.name: {s.name for s in m.signals if s.unit == "rpm"} for m, *_ in self.tx_list}

    def _on_frame(self, msg):
        super()._on_frame(msg)
        if msg.arbitration_id in self.rx_map:
            self.latest[msg.arbitration_id] = (self.rx_handled, bytes(msg.data))

    def _read_internal(self, tick, now_ns, drive):
        fresh_all = True
        for fid, tab in self.rx_map.items():
            item = self.latest.get(fid)
            if item is None:
                fresh_all = False if tab.get("required", True) else fresh_all
                continue
            if self.taken.get(fid) != item[0]:
                self.taken[fid] = item[0]
                if drive:
                    vals = self.db.decode_message(fid, item[1])
                    for sig, port in tab["signals"].items():
                        self.plant.set_input(port, float(vals[sig]))
        return 1 if fresh_all and drive else 0  # the base class's read feeds the watchdog

    def write(self, tick, now_ns):
        y = None
        for m, tab, period, off in self.tx_list:
            if tick >= off and (tick - off) % period == 0:
                if y is None:
                    y = self.plant.output_dict()
                vals = {s.name: 0 for s in m.signals}
                rpm = self.rpm[m.name]
                for sig, port in tab["signals"].items():
                    v = y.get(port, 0.0) if isinstance(port, str) else 0.0
                    vals[sig] = v * 60.0 / (2 * math.pi) if sig in rpm else v
                vals[tab["counter"]] = self.counters[m.name]
                self.counters[m.name] = (self.counters[m.name] + 1) % 16
                data = bytearray(self.db.encode_message(m.frame_id, vals, strict=False))
                data[0] = crc8_sae_j1850(bytes(data), tab["data_id"], 0)
                try:
                    self._bus.send(can.Message(arbitration_id=m.frame_id, is_extended_id=False, data=data), 0.0)
                except can.CanError:
                    pass  # a full queue drops the frame, as a real bus would; the benchmark counts received frames


# -- the message sets side by side: classic, CAN FD, J1939 rest-bus (--sets) ---------------------------------------

TCU_GAPS: list[float] = []  # ms between two task starts of the TCU thread, where more than 30 ms (this run)


def _set_tcu(kind: str, bus: can.BusABC, seconds: float, stop: threading.Event, j1939=None) -> None:
    """The example TCU of the set, every 10 ms on absolute deadlines (in a thread)."""
    sys.path.insert(0, str(ROOT / "examples"))
    if kind == "fd":
        from ecu_emulator import DctTcu
        tcu = DctTcu(bus, fd=True)
    elif kind == "fd8hp":
        from ecu_emulator import Zf8hpTcu
        tcu = Zf8hpTcu(bus, fd=True, shift_at_s=0.5)  # the upshift 1 -> 2 at 0.5 s, closed on the received slip
    elif kind in ("j1939", "j1939_tractor"):
        from ecu_emulator_j1939 import J1939Tcu
        tcu = J1939Tcu(bus)
    else:
        from ecu_emulator import PowershiftTcu
        tcu = PowershiftTcu(bus, shift_at_s=0.5)
    t0 = time.monotonic()
    k = 0
    last = None
    while not stop.is_set() and k * 0.01 < seconds:
        if j1939 is not None and k == 50:
            j1939.request_gear(3)  # the operator's request: the TCU shifts 1 -> 3 under a TSC1 limit
        now = time.monotonic()
        if last is not None and now - last > 0.03:  # more than the rest-bus's 3 x 10 ms: ETC1/TSC1 go stale
            TCU_GAPS.append(round((now - last) * 1e3, 1))
        last = now
        tcu.cycle(k * 0.01, 0.01)
        k += 1
        rem = t0 + k * 0.01 - time.monotonic()
        if rem > 0:
            time.sleep(rem)


def run_set(kind: str, seconds: float) -> dict:
    """Per-tick cost of one message set in the real-time loop at 1 kHz, with its example TCU on the bus."""
    from io_adapters.can.restbus import J1939Adapter

    channel = f"bench-{uuid.uuid4().hex[:8]}"
    TCU_GAPS.clear()
    bus_opts = {"interface": "virtual", "channel": channel}
    n = int(seconds * 1000) + 2000
    j1939 = None
    if kind == "fd":
        plant = load_plant("dct")
        adapters = [io_adapters.can.adapter.CanAdapter("can", {**bus_opts, "fd": True,
                                                               "message_set": "io_can_dct_fd"})]
    elif kind == "fd8hp":
        plant = load_plant("zf8hp")
        adapters = [io_adapters.can.adapter.CanAdapter("can", {**bus_opts, "fd": True,
                                                               "message_set": "io_can_zf8hp_fd"})]
    elif kind in ("j1939", "j1939_tractor"):
        plant = load_plant("powershift" if kind == "j1939" else "powershift_tractor")
        j1939 = J1939Adapter("j1939", dict(bus_opts))
        adapters = [io_adapters.can.adapter.CanAdapter("can", {**bus_opts, "receive_filters": True,
                                                               "message_set": "io_can_powershift_j1939"}), j1939]
    else:
        plant = load_plant("powershift")
        adapters = [io_adapters.can.adapter.CanAdapter("can", dict(bus_opts))]
    timed = [TimedAdapter(a, n) for a in adapters]
    cfg = LoopConfig(mode="realtime", rate_hz=1000.0, duration_s=seconds + 0.5, status_interval_s=0.0,
                     sample_capacity=n, startup_grace_s=0.5)
    loop = assemble(plant, timed, cfg, WatchdogConfig(timeout_s=0.1)).loop
    loop.open()
    stop = threading.Event()
    tcu_bus = can.Bus(interface="virtual", channel=channel, fd=kind.startswith("fd"))
    th = threading.Thread(target=lambda: (time.sleep(0.3), _set_tcu(kind, tcu_bus, seconds, stop, j1939)),
                          daemon=True)
    th.start()
    try:
        loop.run()
    finally:
        stop.set()
        th.join(timeout=5)
        tcu_bus.shutdown()
        status = [a.status() for a in adapters]
        loop.close()
    k0 = 500
    m = min(min(t.n_read, t.n_write) for t in timed)
    rw = sum(t.read_ns[k0:m] + t.write_ns[k0:m] for t in timed)
    pump = sum(float(t.pump_ns[:t.n_pump].sum()) for t in timed) / max(m, 1)
    return {"rw_ns": rw, "pump_per_tick_ns": pump, "step_ns": loop.telemetry.sample_array()[k0:, 2],
            "status": status}


def sets_table(seconds: float) -> list[str]:
    """Classic, CAN FD (DCT, 8HP) and J1939 (gearbox, tractor) sets in one run (one after the other, same process)."""
    rows = ["| set | ticks | p50 | p99 | p99.9 | max | mean | between ticks, per tick |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for kind, label in (("classic", "classic: Powershift, 4 in / 7 out, CRC-8"),
                        ("fd", "CAN FD: DCT, 3 in / 2 out of 64 bytes, E2E profile 5"),
                        ("fd8hp", "CAN FD: 8HP, 3 in / 2 out of 64 bytes, E2E profile 5, upshift 1 -> 2"),
                        ("j1939", "J1939: Powershift valve set (2 in / 7 out) + engine and vehicle ECU"),
                        ("j1939_tractor", "J1939: as above, the tractor (TSC1 on the engine's intervention)")):
        r = run_set(kind, seconds)
        st = r["status"][0]
        extra = ""
        if kind.startswith("j1939"):
            js = r["status"][1]
            extra = (f"; j1939 rx {js['rx_frames']}, tx {js['tx_frames']}, TSC1 applied {js['tsc1_applied']}, "
                     f"timeouts {js['timeouts']} {js['timeouts_by_pgn']}, TCU task gaps > 30 ms {TCU_GAPS}, "
                     f"nodes {[v['state'] for v in js['nodes'].values()]}")
        print(f"{kind}: rx accepted {st['rx']['accepted']}, rejected {st['rx']['rejected_total']}, "
              f"tx {st['tx']['frames']}{extra}", flush=True)
        rows.append(stats_row(label, r["rw_ns"]) + f" {r['pump_per_tick_ns'] / 1000:.1f} |")
        rows.append(stats_row("  plant step, same run", r["step_ns"]) + " |")
    return rows


def pct(a: np.ndarray, q: float) -> float:
    return float(np.percentile(a, q)) / 1000.0 if len(a) else math.nan


def stats_row(label: str, a_ns: np.ndarray) -> str:
    return (f"| {label} | {len(a_ns)} | {pct(a_ns, 50):.1f} | {pct(a_ns, 99):.1f} | {pct(a_ns, 99.9):.1f} | "
            f"{(a_ns.max() / 1000.0 if len(a_ns) else math.nan):.1f} | {(a_ns.mean() / 1000.0 if len(a_ns) else math.nan):.1f} |")


def main(argv=None) -> int:
    if argv is None and len(sys.argv) > 1 and sys.argv[1] == "--tcu-process":
        tcu_process_main(sys.argv[2], float(sys.argv[3]), sys.argv[4])
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=20.0, help="measured seconds per run")
    ap.add_argument("--share", action="store_true", help="also run with the TCU in a second process (loopback share)")
    ap.add_argument("--markdown", help="write the result tables to this file")
    ap.add_argument("--sets", action="store_true",
                    help="only the per-tick cost of the classic, CAN FD and J1939 sets, one after the other")
    args = ap.parse_args(argv)
    if args.sets:
        text = "\n".join(["Per-tick CAN cost (read + write in the tick; the J1939 protocol and the sends run "
                          "between ticks), microseconds:", ""] + sets_table(args.seconds)) + "\n"
        print(text)
        if args.markdown:
            Path(args.markdown).write_text(text)
        return 0
    lines = [f"Command: `.venv/bin/python bench/bench_can.py --seconds {args.seconds:g}"
             f"{' --share' if args.share else ''}`", "",
             f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
             f"Python {platform.python_version()}, python-can {can.__version__}, cantools {cantools.__version__}; "
             "normal scheduling (no SCHED_FIFO), other work running on the machine.", ""]
    runs = [("virtual bus, TCU thread in-process", 10.0, False), ("virtual bus, TCU thread in-process", 1.0, False)]
    if args.share:
        runs += [("loopback share, TCU in a second process", 10.0, True),
                 ("loopback share, TCU in a second process", 1.0, True)]
    cost_rows, rt_rows = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for label, cyc, share in runs:
            r = run_once(args.seconds, cyc, share, Path(tmp))
            st = r["status"]
            print(f"{label}, HIL_SpeedsA every {cyc:g} ms: rx accepted {st['rx']['accepted']}, rejected "
                  f"{st['rx']['rejected_total']}, tx {st['tx']['frames']}, tx errors {st['tx']['errors']}, "
                  f"round trips {len(r['round_trip_ns'])}/{r['flips']}, loop overruns {r['overruns']}", flush=True)
            if not share and cyc == 10.0:
                nb = run_once(args.seconds, cyc, False, Path(tmp), NaiveCantoolsAdapter)
                base = nb["rw_ns"]
                cost_rows += [stats_row("CAN read + write (adapter)", r["rw_ns"]),
                              stats_row("  of which read", r["read_ns"]),
                              stats_row("  of which write", r["write_ns"]),
                              f"| frames sent between ticks (outside the TET), per tick | - | - | - | - | - | "
                              f"{r['pump_per_tick_ns'] / 1000:.1f} |",
                              stats_row("plant step (baseline)", r["step_ns"]),
                              stats_row("whole tick, TET (read + step + write + loop)", r["tet_ns"]),
                              stats_row("cantools dict codec in the tick, same frames (baseline run)", base),
                              stats_row("  plant step in the baseline run", nb["step_ns"])]
                ratio_step = np.median(r["rw_ns"]) / np.median(r["step_ns"])
                # the adapter sends between ticks what the baseline sends in the tick: both in the comparison
                ratio_ct = np.mean(base) / (np.mean(r["rw_ns"]) + r["pump_per_tick_ns"])
                cost_rows.append("")
                cost_rows.append(f"CAN read + write = {ratio_step:.2f} x the plant step (medians); the cantools "
                                 f"dict codec doing the same frames costs {ratio_ct:.1f} x the adapter (means; the adapter's "
                                 f"sends between ticks included). "
                                 f"Frames: {st['rx']['accepted']} commands accepted, {st['tx']['frames']} sent, "
                                 f"{st['rx']['rejected_total']} rejected, {st['tx']['errors']} send errors.")
            if share and cyc == 10.0:
                cost_rows += ["", "With the TCU in a second process over the loopback share (the share's "
                              "websocket threads run in the server process):", "",
                              "| what | ticks | p50 | p99 | p99.9 | max | mean |",
                              "| --- | --- | --- | --- | --- | --- | --- |",
                              stats_row("CAN read + write (adapter)", r["rw_ns"]),
                              stats_row("plant step (baseline)", r["step_ns"])]
            rt_rows.append(stats_row(f"{label}, HIL_SpeedsA every {cyc:g} ms", r["round_trip_ns"]))
    lines += ["Per-tick CAN cost at 1 kHz, full Powershift message set (4 messages in, 7 out, E2E on all), "
              "in microseconds:", "",
              "| what | ticks | p50 | p99 | p99.9 | max | mean |", "| --- | --- | --- | --- | --- | --- | --- |"]
    lines += cost_rows
    lines += ["", "Round trip TCU command -> first HIL_SpeedsA frame whose engine speed reflects it, in "
              "microseconds (a flip of the engine torque every 40 ms, detected physically):", "",
              "| set-up | round trips | p50 | p99 | p99.9 | max | mean |", "| --- | --- | --- | --- | --- | --- | --- |"]
    lines += rt_rows
    text = "\n".join(lines) + "\n"
    print(text)
    if args.markdown:
        Path(args.markdown).parent.mkdir(parents=True, exist_ok=True)
        Path(args.markdown).write_text(text)
    return 0


if __name__ == "__main__":
    print(host_line(), flush=True)
    sys.exit(main())
