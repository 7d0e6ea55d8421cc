"""Fuzzing of every input a peer controls: the three ZeroMQ sockets and CAN command frames.

A seeded generator builds invalid messages of known classes (random bytes,
truncated and non-map msgpack, wrong versions, unknown keys, commands and
signals, wrong types, NaN and infinities, values out of range, too many
entries, oversized and multi-frame messages, bad arguments of every control
command, paths outside the scenario folders; CAN frames with a wrong
checksum, length or ID, a frozen or jumping alive counter, values out of
range; the same for CAN FD frames of the DCT's FD set, class ``canfd``, with
the profile-5 CRC-16, the other CAN FD lengths and classic frames).  Every run asserts what the issue asks of a hardened server:

* the server is alive afterwards and answers;
* no plant state changes from rejected input (inputs and outputs equal
  bit for bit before and after; the server runs in lockstep and no step is
  taken, so nothing else moves them);
* the counters equal what was sent: every command counted as received and
  rejected, by reason; every control request answered exactly once, with an
  error, and counted; every CAN frame rejected, by reason.

Usage::

    python bench/fuzz.py                       # 10,000 messages per class (about a minute)
    python bench/fuzz.py --n 500 --seed 3      # the short version the test suite runs
    python bench/fuzz.py --only can --json out.json

Exit code 0 when every assertion held, 1 otherwise (the failures are
printed).  ``tests/test_fuzz.py`` runs a short version.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import random
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

import msgpack
import zmq
from _support import ROOT, LocalServer, write_io
from _host import host_line, with_host  # noqa: E402  (bench/ is first on the path)

PLANT = "powershift"



def pack(obj) -> bytes:
    return msgpack.packb(obj, use_bin_type=True)


# ------------------------------------------------------------------ command messages
def command_cases(rng: random.Random, names: list[str], n: int) -> list[tuple[str | None, list[bytes]]]:
    """``n`` invalid command messages as (expected reason or None for "any", frames)."""
    good = names[0]

    def value_map(k=3):
        return {rng.choice(names): rng.uniform(0.0, 1.0) for _ in range(k)}

    kinds = [
        ("random", None), ("non_map", "bad_message"), ("version", "bad_version"), ("unknown_key", "bad_message"),
        ("wrong_type", "wrong_type"), ("unknown_signal", "unknown_signal"), ("not_finite", "not_finite"),
        ("out_of_range", "out_of_range"), ("too_many", "bad_message"), ("oversized", "oversized"),
        ("multipart", "bad_message"), ("truncated", "malformed"), ("seq", "bad_message"), ("no_set", "bad_message"),
        ("name_type", "bad_message"),
    ]
    out = []
    for i in range(n):
        kind, reason = kinds[i % len(kinds)]
        seq = rng.randrange(1, 1 << 40)
        if kind == "random":
            b = rng.randbytes(rng.randrange(0, 300))
            try:
                if isinstance(msgpack.unpackb(b, raw=False, strict_map_key=False), dict):
                    b = b"\xc1" + b  # 0xc1 is never valid msgpack: keep the class "not a command"
            except Exception:
                pass
            out.append((None, [b]))
            continue
        if kind == "non_map":
            msg = rng.choice([[1, 2], 7, "set", None, True, 1.5, [{"v": 1}]])
        elif kind == "version":
            msg = {"v": rng.choice([0, 2, -1, "1", 1.0, None]), "seq": seq, "set": value_map()}
        elif kind == "unknown_key":
            msg = {"v": 1, "seq": seq, "set": {}, rng.choice(["x", "sett", "V", "ack"]): 1}
        elif kind == "wrong_type":
            msg = {"v": 1, "seq": seq, "set": {good: rng.choice(["1.0", True, None, [1.0], {"a": 1}])}}
        elif kind == "unknown_signal":
            msg = {"v": 1, "seq": seq, "set": {good: 1.0, f"no_such_{rng.randrange(1000)}": 1.0}}
        elif kind == "not_finite":
            msg = {"v": 1, "seq": seq, "set": {good: 1.0, rng.choice(names): rng.choice([math.nan, math.inf,
                                                                                          -math.inf])}}
        elif kind == "out_of_range":
            msg = {"v": 1, "seq": seq, "set": {good: rng.choice([1e9, -1e9, 1e300])}}
        elif kind == "too_many":
            msg = {"v": 1, "seq": seq, "set": {f"s{k}": 0 for k in range(257 + rng.randrange(100))}}
        elif kind == "oversized":
            msg = {"v": 1, "seq": seq, "set": {good: 1.0}, "pad": "x" * rng.randrange(4100, 60_000)}
        elif kind == "multipart":
            one = pack({"v": 1, "seq": seq, "set": {good: 0.5}})
            out.append((reason, [one] * rng.randrange(2, 5)))
            continue
        elif kind == "truncated":
            full = pack({"v": 1, "seq": seq, "set": value_map()})
            out.append((reason, [full[: rng.randrange(1, len(full) - 1)]]))
            continue
        elif kind == "seq":
            msg = {"v": 1, "seq": rng.choice([-1, -(1 << 63), "7", 1.5, True]), "set": {}}
        elif kind == "no_set":
            msg = {"v": 1, "seq": seq, **({"set": rng.choice([[1], 1, "x", None])} if rng.random() < 0.7 else {})}
        else:  # name_type
            msg = {"v": 1, "seq": seq, "set": {1: 1.0}}
        try:
            b = pack(msg)
        except (TypeError, ValueError):
            b = b"\xc1"
        out.append((reason, [b]))
    return out


# ------------------------------------------------------------------ control requests
DANGEROUS = ["start", "pause", "stop", "shutdown", "reset", "step", "set", "set_params", "load_scenario",
             "unload_scenario", "clear_watchdog"]


def control_cases(rng: random.Random, names: list[str], n: int) -> list[tuple[str | None, list[bytes]]]:
    """``n`` invalid control requests as (expected error code or None for "any", body frames)."""
    kinds = [
        ("random", None), ("non_map", "bad_message"), ("version", "bad_version"), ("no_cmd", "bad_message"),
        ("unknown_cmd", "unknown_command"), ("unknown_key", "bad_request"), ("bad_id", "bad_message"),
        ("set_value", None), ("step_n", "bad_request"), ("params", "param_error"), ("scenario", "scenario_error"),
        ("multi", "bad_message"), ("truncated", "malformed"),
    ]
    out = []
    for i in range(n):
        kind, code = kinds[i % len(kinds)]
        rid = rng.randrange(1 << 30)
        if kind == "random":
            b = rng.randbytes(rng.randrange(0, 300))
            try:
                if isinstance(msgpack.unpackb(b, raw=False, strict_map_key=False), dict):
                    b = b"\xc1" + b
            except Exception:
                pass
            out.append((None, [b]))
            continue
        if kind == "non_map":
            req = rng.choice([[1], 3, "ping", None, False])
        elif kind == "version":
            req = {"v": rng.choice([0, 2, "1", None]), "cmd": "ping", "id": rid}
        elif kind == "no_cmd":
            req = {"v": 1, "id": rid, **({"cmd": rng.choice([1, None, ["ping"]])} if rng.random() < 0.7 else {})}
        elif kind == "unknown_cmd":
            req = {"v": 1, "cmd": rng.choice(["pong", "exec", "", "SHUTDOWN", "start "]), "id": rid}
        elif kind == "unknown_key":  # a harmful command with a typo'd key: refused before it runs
            req = {"v": 1, "cmd": rng.choice(DANGEROUS), "id": rid, rng.choice(["x", "force", "N", "sett"]): 1}
        elif kind == "bad_id":
            req = {"v": 1, "cmd": "stop", "id": rng.choice([1.5, [1], {"a": 1}, True])}
        elif kind == "set_value":
            req = {"v": 1, "cmd": "set", "id": rid, "set": rng.choice([
                {names[0]: math.nan}, {names[0]: 1e9}, {names[0]: "x"}, {"nope": 1.0}, [1.0], 3])}
        elif kind == "step_n":  # in lockstep: a bad n is refused before anything steps
            req = {"v": 1, "cmd": "step", "id": rid, "n": rng.choice([0, -1, "5", 1.5, True, 10 ** 12])}
        elif kind == "params":
            req = {"v": 1, "cmd": "set_params", "id": rid,
                   "params": rng.choice([{"no.such": 1.0}, {"watchdog.timeout_s": -1.0}, {"watchdog.enabled": "x"},
                                         {"row.C1.gain_static": math.nan}, [1]])}
        elif kind == "scenario":
            req = {"v": 1, "cmd": "load_scenario", "id": rid,
                   "path": rng.choice(["/etc/passwd", "../configs/powershift.toml", "/dev/zero", "no_such",
                                       "..", "x/../../etc/hostname", "\x00"])}
        elif kind == "multi":
            one = pack({"v": 1, "cmd": rng.choice(DANGEROUS), "id": rid})
            out.append((code, [one] * rng.randrange(2, 4)))
            continue
        else:  # truncated
            full = pack({"v": 1, "cmd": "ping", "id": rid})
            out.append((code, [full[: rng.randrange(1, len(full) - 1)]]))
            continue
        out.append((code, [pack(req)]))
    return out


# ------------------------------------------------------------------ the server
class Server:
    """``gearbox-hil serve`` in lockstep on free loopback ports (running, never stepped by the fuzzer)."""

    def __init__(self, tmp: Path):
        self.server = LocalServer(tmp, PLANT, write_io(tmp / "io_fuzz.toml"), mode="lockstep")
        self.proc = self.server.proc
        self.endpoints = self.server.endpoints
        self.ctx = zmq.Context()
        self.req = self.ctx.socket(zmq.DEALER)
        self.req.setsockopt(zmq.LINGER, 0)
        self.req.connect(self.endpoints["zmq.control"])

    def call(self, frames: list[bytes], timeout_s: float = 10.0) -> list:
        """Send one request (body frames after an empty delimiter); every reply that comes within the timeout."""
        self.req.send_multipart([b"", *frames])
        replies = []
        if self.req.poll(int(timeout_s * 1000)):
            replies.append(self.req.recv_multipart())
            while self.req.poll(0):  # a second reply to one request would be a bug
                replies.append(self.req.recv_multipart())
        return replies

    def request(self, cmd: str, **kw) -> dict:
        rep = self.call([pack({"v": 1, "cmd": cmd, "id": 0, **kw})])
        assert len(rep) == 1, f"{cmd}: {len(rep)} replies"
        return msgpack.unpackb(rep[0][-1], raw=False)

    def snapshot(self) -> tuple:
        g = self.request("get")
        return g["tick"], g["t"], g["u"], g["y"]

    def zmq_status(self) -> dict:
        return self.request("status")["status"]["adapters"]["zmq"]

    def close(self) -> int:
        try:
            self.request("shutdown")
        except AssertionError:  # no single reply: a server already gone, which the exit code below reports
            pass
        try:
            code = self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = -9
        self.req.close(0)
        self.ctx.term()
        self.server.kill()
        return code


def _same(a, b) -> bool:
    """Bit-for-bit equality of two snapshots (NaN-safe, -0.0 distinct)."""
    return json.dumps(a, sort_keys=True, default=repr) == json.dumps(b, sort_keys=True, default=repr) and all(
        math.copysign(1.0, x) == math.copysign(1.0, y) for d0, d1 in ((a[2], b[2]), (a[3], b[3]))
        for x, y in zip(d0.values(), d1.values()))


def fuzz_commands(srv: Server, rng: random.Random, n: int, names: list[str]) -> dict:
    cases = command_cases(rng, names, n)
    before = srv.snapshot()
    st0 = srv.zmq_status()
    push = srv.ctx.socket(zmq.PUSH)
    push.setsockopt(zmq.LINGER, 0)
    push.setsockopt(zmq.SNDHWM, 0)
    push.connect(srv.endpoints["zmq.command"])
    expect: dict[str, int] = {}
    t0 = time.monotonic()
    for reason, frames in cases:
        push.send_multipart(frames)
        if reason is not None:
            expect[reason] = expect.get(reason, 0) + 1
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        st = srv.zmq_status()
        if st["received"] - st0["received"] >= n:
            break
        time.sleep(0.05)
    elapsed = time.monotonic() - t0
    push.close(0)
    st = srv.zmq_status()
    after = srv.snapshot()
    got = {r: st["rejected"]["by_reason"][r] - st0["rejected"]["by_reason"].get(r, 0)
           for r in st["rejected"]["by_reason"]}
    failures = []
    if st["received"] - st0["received"] != n:
        failures.append(f"commands: received {st['received'] - st0['received']}, sent {n}")
    if st["rejected"]["total"] - st0["rejected"]["total"] != n:
        failures.append(f"commands: rejected {st['rejected']['total'] - st0['rejected']['total']} of {n}")
    if st["applied"] != st0["applied"]:
        failures.append(f"commands: {st['applied'] - st0['applied']} applied")
    n_any = sum(1 for r, _ in cases if r is None)
    for r, k in expect.items():
        if not k <= got.get(r, 0) <= k + n_any:
            failures.append(f"commands: reason {r}: counted {got.get(r, 0)}, sent {k} (+ up to {n_any} random)")
    if sum(got.values()) != n:
        failures.append(f"commands: counted {sum(got.values())} by reason, sent {n}")
    if not _same(before, after):
        failures.append("commands: the plant's inputs or outputs changed")
    return {"sent": n, "by_reason": {r: v for r, v in got.items() if v}, "s": round(elapsed, 2), "failures": failures}


def fuzz_control(srv: Server, rng: random.Random, n: int, names: list[str]) -> dict:
    cases = control_cases(rng, names, n)
    before = srv.snapshot()
    st0 = srv.zmq_status()
    failures = []
    codes: dict[str, int] = {}
    t0 = time.monotonic()
    for code, frames in cases:
        reps = srv.call(frames)
        if len(reps) != 1:
            failures.append(f"control: {len(reps)} replies to {frames[0][:40]!r}")
            continue
        rep = msgpack.unpackb(reps[0][-1], raw=False)
        if rep.get("ok") is not False:
            failures.append(f"control: {frames[0][:60]!r} succeeded")
            continue
        c = rep["error"]["code"]
        codes[c] = codes.get(c, 0) + 1
        if code is not None and c != code:
            failures.append(f"control: {frames[0][:60]!r}: {c}, expected {code}")
    elapsed = time.monotonic() - t0
    st = srv.zmq_status()
    after = srv.snapshot()
    if st["control_requests"] - st0["control_requests"] != n + 1:  # + the status request of st0... see below
        failures.append(f"control: counted {st['control_requests'] - st0['control_requests'] - 1} requests, sent {n}")
    errs = st["control_errors"]["total"] - st0["control_errors"]["total"]
    if errs != n:
        failures.append(f"control: {errs} errors counted, {n} sent")
    if not _same(before, after):
        failures.append("control: the plant's inputs or outputs changed")
    if srv.request("status")["status"]["state"] != "running":
        failures.append("control: the server is no longer running")
    return {"sent": n, "by_code": codes, "s": round(elapsed, 2), "failures": failures[:20]}


def fuzz_state(srv: Server, rng: random.Random, n: int) -> dict:
    """Random subscriptions (some beyond the cap), unsubscriptions and raw TCP noise on the state socket."""
    before = srv.snapshot()
    subs = []
    for _ in range(8):
        s = srv.ctx.socket(zmq.SUB)
        s.setsockopt(zmq.LINGER, 0)
        s.connect(srv.endpoints["zmq.state"])
        subs.append(s)
    u = urlsplit(srv.endpoints["zmq.state"])
    t0 = time.monotonic()
    oversized = 0
    for i in range(n):
        s = subs[i % len(subs)]
        size = rng.choice([0, 1, 5, 64, 600, 1000, 1100, 4000])
        oversized += size + 1 > 1024
        opt = zmq.SUBSCRIBE if rng.random() < 0.7 else zmq.UNSUBSCRIBE
        s.setsockopt(opt, rng.randbytes(size))
        if i % 1000 == 999:  # raw noise from a TCP peer that speaks no ZMTP
            with socket.create_connection((u.hostname, u.port), timeout=5) as raw:
                try:
                    raw.sendall(rng.randbytes(rng.randrange(1, 65536)))
                except OSError:
                    pass
    time.sleep(0.5)
    elapsed = time.monotonic() - t0
    failures = []
    after = srv.snapshot()
    if not _same(before, after):
        failures.append("state: the plant's inputs or outputs changed")
    # the stream still works: a fresh subscriber receives the states of 5 steps, in order
    sub = srv.ctx.socket(zmq.SUB)
    sub.setsockopt(zmq.LINGER, 0)
    sub.connect(srv.endpoints["zmq.state"])
    sub.subscribe(b"state")
    time.sleep(0.3)
    k0 = srv.request("get")["tick"]
    srv.request("step", n=5, outputs=False)
    ticks = []
    while len(ticks) < 5 and sub.poll(5000):
        _, body = sub.recv_multipart()
        ticks.append(msgpack.unpackb(body)["tick"])
    if ticks != list(range(k0 + 1, k0 + 6)):
        failures.append(f"state: after the fuzz a subscriber got ticks {ticks}")
    for s in subs + [sub]:
        s.close(0)
    return {"sent": n, "oversized": oversized, "s": round(elapsed, 2), "failures": failures}


# ------------------------------------------------------------------ CAN frames
CAN_PROFILES = {
    # classic CAN: the Powershift's 8-byte command frame, CRC-8 SAE J1850, 4-bit counter
    "can": {"plant": "powershift", "dbc": "powershift.dbc", "options": {}, "message": "TCU_ClutchCmdA",
            "crc": "ClutchCmdA_CRC", "counter": "ClutchCmdA_Counter", "data_id": 0x0100, "variant": "sae_j1850",
            "ok": {"PressureCmd_C1": 12.5, "PressureCmd_C2": 0.0, "PressureCmd_C3": 16.0, "PressureCmd_C4": 0.0},
            "pressures": ("PressureCmd_C1", "PressureCmd_C2", "PressureCmd_C3", "PressureCmd_C4"), "p_max": 40.0,
            "out_of_range": ("PressureCmd_C2", 40.95), "bad_lengths": (0, 1, 3, 7)},
    # CAN FD: the DCT's 64-byte command frame, E2E profile 5 (CRC-16), 8-bit counter; wrong lengths are
    # the other CAN FD lengths (and classic frames)
    "canfd": {"plant": "dct", "dbc": "dct_fd.dbc", "options": {"fd": True, "message_set": "io_can_dct_fd"},
              "message": "TCU_DctCmdFd", "crc": "DctCmdFd_CRC", "counter": "DctCmdFd_Counter", "data_id": 0x0180,
              "variant": "autosar_p05",
              "ok": {"GearOddCmd": 1, "GearEvenCmd": 2, "PressureCmd_C1": 12.5, "PressureCmd_C2": 0.0},
              "pressures": ("PressureCmd_C1", "PressureCmd_C2"), "p_max": 25.0,
              "out_of_range": ("PressureCmd_C1", 65.0), "bad_lengths": (0, 1, 8, 12, 16, 20, 24, 32, 48)},
}


def send_invalid_frames(rng: random.Random, n: int, bus, frame, frame_id: int, enc, pr: dict, fd: bool) -> dict:
    """Send ``n`` invalid command frames, the five kinds in turn (a bad CRC, a bad length, an unknown id, a
    frozen alive counter, a value out of its DBC range): how many of each kind were sent."""
    ok, mod = pr["ok"], enc.modulus
    expect = {"crc": 0, "dlc": 0, "unknown_id": 0, "counter_frozen": 0, "out_of_range": 0}
    ref = 0  # the alive-counter reference (docs/can.md: moved by every frame that passes the E2E checks)
    for i in range(n):
        kind = ("crc", "dlc", "unknown_id", "counter_frozen", "out_of_range")[i % 5]
        vals = dict(ok, **{k: rng.uniform(0.0, pr["p_max"]) for k in pr["pressures"]})
        fd_frame = fd
        if kind == "crc":
            data = enc.encode(vals, counter=rng.randrange(mod), corrupt_crc=True)
        elif kind == "dlc":
            data = rng.randbytes(rng.choice(pr["bad_lengths"]))
            if fd and rng.random() < 0.25:  # a classic frame where the DBC has a CAN FD frame
                data, fd_frame = rng.randbytes(8), False
        elif kind == "unknown_id":
            fid = rng.choice([0x7FF, 0x123, 0x555, 0x000])
            bus.send(frame(fid, rng.randbytes(64 if fd else 8)))
            expect[kind] += 1
            continue
        elif kind == "counter_frozen":
            data = enc.encode(vals, counter=ref)  # the counter of the last frame that passed the E2E checks
        else:
            sig, bad = pr["out_of_range"]
            vals[sig] = bad  # fits the signal's bits, not its DBC range
            ref = (ref + 1) % mod  # a valid counter step: it passes the E2E checks and becomes the reference
            data = enc.encode(vals, counter=ref)
        bus.send(frame(frame_id, data, fd_frame))
        expect[kind] += 1
    return expect


def fuzz_can(rng: random.Random, n: int, profile: str = "can") -> dict:
    """Invalid command frames of every kind into a CAN adapter on a virtual bus; all rejected, inputs unchanged."""
    import can
    import cantools

    from io_adapters.base import LoopContext, create_adapter, new_tick_info
    from io_adapters.can.e2e import E2EEncoder
    from plant_models.registry import load_plant

    pr = CAN_PROFILES[profile]
    db = cantools.database.load_file(str(ROOT / "configs" / pr["dbc"]))
    msg = db.get_message_by_name(pr["message"])
    plant = load_plant(pr["plant"])
    opts = {"interface": "virtual", "channel": f"fuzz-{os.getpid()}-{rng.randrange(1 << 30)}", **pr["options"]}
    quiet = logging.getLogger("gearbox_hil.fuzz.can")  # the adapter logs the first rejects of each kind
    quiet.setLevel(logging.ERROR)
    ctx = LoopContext(period_s=0.001, feed_watchdog=lambda ns: None, status=lambda: {}, tick_info=new_tick_info(),
                      log=quiet)
    ad = create_adapter("can", "can", opts)
    ad.open(plant, ctx)
    fd = bool(pr["options"].get("fd"))
    bus = can.Bus(interface="virtual", channel=opts["channel"], fd=fd)
    enc = E2EEncoder(msg, pr["crc"], pr["counter"], pr["data_id"], pr["variant"])
    ok = pr["ok"]

    def frame(fid, data, fd_frame=fd):
        return can.Message(arbitration_id=fid, is_extended_id=False, is_fd=fd_frame, bitrate_switch=fd_frame,
                           data=data)
    failures = []
    try:
        bus.send(frame(msg.frame_id, enc.encode(ok, counter=0)))
        deadline = time.monotonic() + 10
        while ad.rx_handled < 1 and time.monotonic() < deadline:
            time.sleep(0.001)
        ad.read(0, 0)
        u0 = plant.u.copy()
        st0 = ad.status()["rx"]
        t0 = time.monotonic()
        expect = send_invalid_frames(rng, n, bus, frame, msg.frame_id, enc, pr, fd)
        deadline = time.monotonic() + 60
        while ad.rx_handled < n + 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        elapsed = time.monotonic() - t0
        ad.read(1, 1_000_000)
        st = ad.status()["rx"]
        got = {r: st["rejected"][r] - st0["rejected"][r] for r in st["rejected"]}
        if st["accepted"] != st0["accepted"]:
            failures.append(f"{profile}: {st['accepted'] - st0['accepted']} frames accepted")
        for r, k in expect.items():
            if got.get(r, 0) != k:
                failures.append(f"{profile}: {r}: counted {got.get(r, 0)}, sent {k}")
        if sum(got.values()) != n:
            failures.append(f"{profile}: {sum(got.values())} rejected, {n} sent")
        if not (plant.u.tobytes() == u0.tobytes()):
            failures.append(f"{profile}: the plant's inputs changed")
        if not ad._thread.is_alive():
            failures.append(f"{profile}: the receive thread died")
    finally:
        bus.shutdown()
        ad.close()
    return {"sent": n, "by_reason": got, "s": round(elapsed, 2), "failures": failures}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=10_000, help="messages per class (default 10000)")
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--only", choices=("commands", "control", "state", "can", "canfd"), action="append",
                    help="run only these classes (repeatable)")
    ap.add_argument("--json", type=Path, help="write the results here")
    args = ap.parse_args(argv)
    classes = args.only or ["commands", "control", "state", "can", "canfd"]
    rng = random.Random(args.seed)
    results: dict = {"n": args.n, "seed": args.seed}
    if set(classes) & {"commands", "control", "state"}:
        with tempfile.TemporaryDirectory(prefix="gearbox-hil-fuzz-") as tmp:
            srv = Server(Path(tmp))
            try:
                names = [s["name"] for s in srv.request("describe")["plant"]["inputs"]]
                if "commands" in classes:
                    results["commands"] = fuzz_commands(srv, rng, args.n, names)
                if "control" in classes:
                    results["control"] = fuzz_control(srv, rng, args.n, names)
                if "state" in classes:
                    results["state"] = fuzz_state(srv, rng, args.n)
                alive = srv.request("ping")["ok"] is True
            finally:
                code = srv.close()
            results["server"] = {"alive_after": alive, "exit_code": code}
    for k in ("can", "canfd"):
        if k in classes:
            results[k] = fuzz_can(rng, args.n, k)
    failures = [f for k in ("commands", "control", "state", "can", "canfd") for f in results.get(k, {}).get("failures", [])]
    if "server" in results and not (results["server"]["alive_after"] and results["server"]["exit_code"] == 0):
        failures.append(f"server: {results['server']}")
    results["ok"] = not failures
    for k in ("commands", "control", "state", "can", "canfd"):
        if k in results:
            r = results[k]
            print(f"{k:9s} {r['sent']:6d} sent in {r['s']:6.2f} s   "
                  + json.dumps(r.get("by_reason") or r.get("by_code") or {"oversized": r.get("oversized")}))
    if "server" in results:
        print(f"server    alive after the fuzz: {results['server']['alive_after']}, exit code "
              f"{results['server']['exit_code']}")
    for f in failures:
        print("FAIL", f)
    if args.json:
        args.json.write_text(json.dumps(with_host(results), indent=2))
    print("ok" if not failures else f"{len(failures)} failures")
    return 0 if not failures else 1


if __name__ == "__main__":
    print(host_line(), flush=True)
    raise SystemExit(main())
