#!/usr/bin/env python3
"""What the GIL forces: the state stream published by the loop's thread, by a second thread, or by a process.

The tick writes its state into the state ring in every variant; what
differs is who packs and sends the state messages:

* ``loop``: the server as shipped: the loop's own thread, between ticks
  (:meth:`ZmqAdapter.pump` in the slack);
* ``thread``: a publisher thread in the server process, woken through an
  eventfd after every tick (and by arriving commands, which it decodes),
  owning the state and command sockets;
* ``process``: a publisher process reading the ring from shared memory,
  woken through an eventfd after every tick, with its own PUB socket (the
  server process keeps commands and control);
* ``busy_thread``: the shipped design plus an unrelated Python thread that
  works 20 us every millisecond, out of step with the tick (what any second
  thread does to the tick: the CAN receive thread, a recorder thread, ...).

Each variant runs with the bench client (``bench/load_client.py``: a
subscriber that checks sequence numbers, a command every 10 ms, a status
request every second) at the given rates; status messages and events on the
state socket are off in every variant (a thread may not share the loop's
socket).  Reported per run: TET, wake-up lateness, missed ticks, states the
subscriber lost, and CPU (server process, plus the publisher process).

    python bench/bench_publisher.py --duration 30 --rate 1000 --rate 10000
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _support import FREE_ENDPOINTS  # noqa: E402
from plant_models.run.ring import F_TIME, I_AUX, I_STATUS, I_TICK, I_WATCHDOG, StateRing  # noqa: E402
from io_adapters.zmq.adapter import ZmqAdapter  # noqa: E402
from io_adapters.zmq.codec import StateEncoder  # noqa: E402
from _host import host_line, with_host  # noqa: E402  (bench/ is first on the path)

VARIANTS = ("loop", "thread", "process", "busy_thread")
INITIAL = {"p_c1": 16.0, "p_c3": 16.0, "p_c6": 16.0, "engine_torque": 300.0, "load_torque": 3500.0}
OPTIONS = {**FREE_ENDPOINTS, "status_publish_s": 0.0, "publish_events": False}


def pct(x) -> dict:
    x = np.asarray(x, dtype=float)
    return {"p50": float(np.percentile(x, 50)), "p99": float(np.percentile(x, 99)),
            "p999": float(np.percentile(x, 99.9)), "max": float(x.max()), "mean": float(x.mean())}


class ThreadedZmq(ZmqAdapter):
    """The ZeroMQ adapter with its data path in a thread: the loop's pump only wakes the thread."""

    def open(self, plant, ctx) -> None:
        super().open(plant, ctx)
        self._efd = os.eventfd(0, os.EFD_NONBLOCK)
        self._stop = False
        self._thread = threading.Thread(target=self._run, name="zmq-publisher", daemon=True)
        self._thread.start()

    def wake_fds(self) -> list[int]:
        return []  # the thread takes the commands

    def pump(self, until_ns: int = 0) -> None:
        os.eventfd_write(self._efd, 1)

    def _run(self) -> None:
        p = select.poll()
        p.register(self._efd, select.POLLIN)
        p.register(self._pull_fd, select.POLLIN)
        while not self._stop:
            p.poll(50)
            try:
                os.eventfd_read(self._efd)
            except BlockingIOError:
                pass
            self._take_commands(0)
            self._publish_rows(0)

    def close(self) -> None:
        if getattr(self, "_thread", None) is not None:
            self._stop = True
            os.eventfd_write(self._efd, 1)
            self._thread.join(2.0)
            self._thread = None
        super().close()


class ProcessZmq(ZmqAdapter):
    """The ZeroMQ adapter whose state stream a separate process publishes from the shared ring."""

    def open(self, plant, ctx) -> None:
        super().open(plant, ctx)
        self._efd = os.eventfd(0, os.EFD_NONBLOCK)
        names = ",".join(s.name for s in plant.outputs)
        self.proc = subprocess.Popen([sys.executable, __file__, "--publisher-process", ctx.ring.shm_name,
                                      str(self._efd), names, str(self._ack_aux), self.state_format],
                                     pass_fds=(self._efd,), stdout=subprocess.PIPE, text=True, cwd=ROOT)
        self.endpoints["state"] = self.proc.stdout.readline().strip()

    def _publish_rows(self, until_ns: int) -> None:
        os.eventfd_write(self._efd, 1)  # the process packs and sends

    def close(self) -> None:
        if getattr(self, "proc", None) is not None:
            self.proc.send_signal(signal.SIGTERM)
            out, _ = self.proc.communicate(timeout=10)
            self.publisher = json.loads(out.strip().splitlines()[-1]) if out.strip() else None
            self.proc = None
        super().close()


def publisher_process(shm_name: str, efd: int, names: str, ack_aux: int, fmt: str) -> int:
    """The publisher process: wait for the eventfd, pack and send every new row of the shared ring."""
    import zmq

    stop = []
    signal.signal(signal.SIGTERM, lambda *a: stop.append(1))
    ring = StateRing.attach(shm_name)
    cur = ring.cursor()
    enc = StateEncoder(names.split(","), fmt)
    enc.bind_columns(I_TICK, I_WATCHDOG, I_STATUS, I_AUX + ack_aux, F_TIME, ring.f_y)
    ctx = zmq.Context()
    pub = ctx.socket(zmq.PUB)
    pub.setsockopt(zmq.LINGER, 0)
    pub.setsockopt(zmq.SNDHWM, 1000)
    port = pub.bind_to_random_port("tcp://127.0.0.1")
    print(f"tcp://127.0.0.1:{port}", flush=True)
    p = select.poll()
    p.register(efd, select.POLLIN)
    sent = 0
    while not stop:
        p.poll(50)
        try:
            os.eventfd_read(efd)
        except BlockingIOError:
            pass
        while True:
            n = cur.take()
            if n == 0:
                break
            seq0 = cur.selected - n
            for j in range(n):
                pub.send(b"state", zmq.SNDMORE | zmq.NOBLOCK)
                pub.send(enc.encode_row(seq0 + j + 1, cur.ints, cur.floats, j), zmq.NOBLOCK)
                sent += 1
    r = resource.getrusage(resource.RUSAGE_SELF)
    pub.close(0)
    ctx.term()
    ring.close()
    print(json.dumps({"sent": sent, "lost": cur.lost, "cpu_s": r.ru_utime + r.ru_stime}), flush=True)
    return 0


def busy_thread(stop: threading.Event) -> None:
    """Python work of about 20 us every millisecond, out of step with the tick."""
    x = 0
    while not stop.is_set():
        t_end = time.perf_counter_ns() + 20_000
        while time.perf_counter_ns() < t_end:
            x += 1
        time.sleep(0.001)


def one_run(variant: str, rate: float, duration: float) -> dict:
    from plant_models.registry import load_plant
    from server.realtime.loop_config import LoopConfig
    from server.realtime.runtime import assemble

    sys.path.insert(0, str(ROOT / "bench"))
    from bench_tick_stages import start_clients, stop_clients

    n = int(duration * rate) + 100
    wait = "spin" if rate > 2000 else "sleep_spin"
    cfg = LoopConfig(mode="realtime", rate_hz=rate, wait=wait, duration_s=duration, status_interval_s=0.5,
                     status_line=False, sample_capacity=n, startup_grace_s=1.0, autostart=False)
    cls = {"thread": ThreadedZmq, "process": ProcessZmq}.get(variant, ZmqAdapter)
    zmqa = cls("zmq", dict(OPTIONS))
    plant = load_plant("powershift")
    ring = StateRing.for_plant(plant, cfg.ring_rows, shared=variant == "process")  # the same ring, shared or not
    server = assemble(plant, [zmqa], cfg, initial_inputs=INITIAL, ring=ring)
    loop = server.loop
    loop.open()
    stop = threading.Event()
    busy = None
    if variant == "busy_thread":
        busy = threading.Thread(target=busy_thread, args=(stop,), daemon=True)
        busy.start()
    proc = start_clients(zmqa.endpoints["control"], "sub")
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    w0 = time.monotonic()
    la0 = os.getloadavg()[0]
    try:
        loop.run()
    finally:
        wall = time.monotonic() - w0
        r1 = resource.getrusage(resource.RUSAGE_SELF)
        la1 = os.getloadavg()[0]
        stop.set()
        client = stop_clients(proc)
        loop.close()
        if variant == "process":
            loop.ring.close(unlink=True)
    s = loop.telemetry.sample_array() / 1000.0
    tm = loop.telemetry.summary()
    pub = getattr(zmqa, "publisher", None)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return {"variant": variant, "rate": rate, "load_avg": [la0, la1], "tet_us": pct(s[:, 1]),
            "lateness_us": pct(s[:, 0]), "step_us": pct(s[:, 2]), "ticks": tm["ticks"],
            "missed_pct": 100.0 * tm["missed_ticks"] / max(1, tm["ticks"] + tm["missed_ticks"]),
            "server_cpu_pct": 100.0 * cpu / wall,
            "publisher_cpu_pct": 100.0 * pub["cpu_s"] / wall if pub else None, "client": client,
            "publisher": pub}


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--publisher-process":
        a = sys.argv[2:]
        return publisher_process(a[0], int(a[1]), a[2], int(a[3]), a[4])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration", type=float, default=30.0)
    ap.add_argument("--rate", type=float, action="append", help="default: 1000 and 10000")
    ap.add_argument("--variant", action="append", choices=VARIANTS, help="default: all")
    ap.add_argument("--rounds", type=int, default=1, help="repeat the variants in turn, so each sees the same load")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    res = {"args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
           "load_avg_before": os.getloadavg(), "runs": []}
    for rate in args.rate or [1000.0, 10000.0]:
        for rnd in range(args.rounds):
            for v in args.variant or VARIANTS:
                print(f"{rate:g} Hz, {v}, round {rnd + 1} ({args.duration:g} s) ...", file=sys.stderr, flush=True)
                res["runs"].append(dict(one_run(v, rate, args.duration), round=rnd + 1))
    res["load_avg_after"] = os.getloadavg()
    print(json.dumps(res, indent=2))
    print("\n| rate | round | variant | load | TET p50 | p99 | p99.9 | lateness p99 | missed % | states lost | CPU server "
          "(+ publisher) |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in res["runs"]:
        c, t = r["client"], r["tet_us"]
        lost = f"{c['lost']} of {c['states'] + c['lost']}" if c else "-"
        cpu = f"{r['server_cpu_pct']:.1f} %" + (f" + {r['publisher_cpu_pct']:.1f} %" if r["publisher_cpu_pct"]
                                                 is not None else "")
        print(f"| {r['rate']:g} | {r['round']} | {r['variant']} | {r['load_avg'][0]:.2f} | {t['p50']:.1f} | {t['p99']:.1f} | "
              f"{t['p999']:.1f} | {r['lateness_us']['p99']:.1f} | {r['missed_pct']:.3f} | {lost} | {cpu} |")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(with_host(res), indent=2))
    return 0


if __name__ == "__main__":
    print(host_line(), flush=True)
    sys.exit(main())
