"""A server on a bench network: a control channel that answers whatever other peers send, bounded inputs.

One realtime server at 100 Hz serves these tests: a tick that a peer or a
file stalls shows as missed ticks (a 10 ms period leaves room for the
ordinary hiccups of a shared machine, while the stalls these tests guard
against lasted 0.5 to 3 s).  Waits are generous; the checks are counts.
"""

from __future__ import annotations

import os
import random
import socket
import subprocess
import sys
import time
from urllib.parse import urlsplit

import msgpack
import pytest
import zmq

from io_adapters.zmq.client import ServerError
from server_support import ROOT, ServerProcess, wait_until

SCENARIO_DIR_NAME = "scen"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hardening")
    folder = tmp / SCENARIO_DIR_NAME
    folder.mkdir()
    text = (ROOT / "scenarios" / "powershift_single_swap.toml").read_text()
    (folder / "inside.toml").write_text(text.replace("dt_s = 0.001", "dt_s = 0.01"))  # the server's 100 Hz
    # SCHED_FIFO (as a bench runs it): the peers' processes and others on these two cores do not preempt the loop
    extra = (f'[scenarios]\nfolders = ["{folder}"]\nmax_bytes = 65536\n'
             '[realtime]\nsched_fifo_priority = 50\nlock_memory = true\n')
    srv = ServerProcess(tmp, extra=extra, args=("--rate", "100"))
    srv.scenario_folder = folder
    yield srv
    srv.shutdown()


def _missed(hil) -> int:
    return hil.status()["timing"]["missed_ticks"]


def _no_stall(missed: int, control: int) -> bool:
    """Missed ticks while a peer misbehaved, against a same-run control of the same kind of work without it.

    A stall of the loop fails (those these tests guard against lasted 0.5 to 3 s: 50 to 300 ticks at 100 Hz);
    what a loaded machine takes from either half passes (CI runs saw a few ticks in one half and none in the
    other).  What the misbehaving peers cost in ticks is measured by bench/bench_zmq_hardening.py, not here.
    """
    return missed <= 2 * control + 25


def _missed_in(hil, seconds: float) -> int:
    """The control: ticks missed while nothing but the test's own status requests reaches the server."""
    before = _missed(hil)
    time.sleep(seconds)
    return _missed(hil) - before


def _host_port(endpoint: str) -> tuple[str, int]:
    u = urlsplit(endpoint)
    return u.hostname, u.port


def test_after_1_mib_of_raw_tcp_noise_every_request_on_an_existing_connection_is_answered(server):
    rng = random.Random(11)
    with server.client(timeout_s=10.0) as hil:
        hil.ping()
        host, port = _host_port(server.control)
        with socket.create_connection((host, port), timeout=10.0) as raw:
            sent = 0
            while sent < 1 << 20:  # 1 MiB of noise in 4 KiB writes; ZeroMQ may drop the connection midway
                try:
                    raw.sendall(rng.randbytes(4096))
                except OSError:
                    break
                sent += 4096
        # noise from several short connections too, some of them a valid greeting's length
        for n in (1, 10, 64, 512):
            with socket.create_connection((host, port), timeout=10.0) as raw:
                try:
                    raw.sendall(rng.randbytes(n))
                except OSError:
                    pass
        answered = 0
        for i in range(100):
            rep = hil.request("ping")
            answered += rep["ok"] is True
        assert answered == 100
    assert server.proc.poll() is None


def test_a_multi_frame_request_is_one_bad_message_and_executes_nothing(server):
    ctx = zmq.Context.instance()
    with server.client() as hil:
        before = hil.status()
        dealer = ctx.socket(zmq.DEALER)
        dealer.setsockopt(zmq.LINGER, 0)
        dealer.connect(server.control)
        try:
            pause = msgpack.packb({"v": 1, "cmd": "pause", "id": 1})
            dealer.send_multipart([b"", pause, pause])
            assert dealer.poll(10_000)
            frames = dealer.recv_multipart()
            assert frames[0] == b"" and len(frames) == 2
            rep = msgpack.unpackb(frames[1])
            assert rep["ok"] is False and rep["error"]["code"] == "bad_message"
            assert not dealer.poll(300)  # one reply, not one per frame
            # a DEALER without the delimiter frame is answered too
            dealer.send(msgpack.packb({"v": 1, "cmd": "ping", "id": 7}))
            assert dealer.poll(10_000)
            (body,) = dealer.recv_multipart()
            assert msgpack.unpackb(body)["id"] == 7
        finally:
            dealer.close(0)
        after = hil.status()
    assert after["state"] == before["state"] == "running"  # the pause frames did not run
    errs = after["adapters"]["zmq"]["control_errors"]["by_reason"]
    assert errs["bad_message"] == before["adapters"]["zmq"]["control_errors"]["by_reason"]["bad_message"] + 1


def test_a_multipart_command_is_one_bad_message_and_changes_no_input(server):
    with server.client() as hil:
        before = hil.status()["adapters"]["zmq"]
        u0 = hil.get()["u"]["p_c1"]
        hil._ensure_push()
        cmd = msgpack.packb({"v": 1, "seq": 1, "set": {"p_c1": u0 + 1.0}})
        hil._push.send_multipart([cmd, cmd, cmd])
        st = wait_until(lambda: (lambda a: a if a["received"] > before["received"] else None)(
            hil.status()["adapters"]["zmq"]), timeout_s=30)
        assert st is not None
        assert st["rejected"]["by_reason"]["bad_message"] == before["rejected"]["by_reason"]["bad_message"] + 1
        assert st["received"] == before["received"] + 1
        assert hil.get()["u"]["p_c1"] == u0


def test_more_than_256_entries_is_bad_message_on_both_sockets(server):
    with server.client() as hil:
        before = hil.status()["adapters"]["zmq"]["rejected"]["by_reason"]["bad_message"]
        big = {f"s{i}": 0 for i in range(300)}  # short enough to stay under max_command_bytes
        hil.send_raw_command(msgpack.packb({"v": 1, "seq": 2, "set": big}))
        assert wait_until(lambda: hil.status()["adapters"]["zmq"]["rejected"]["by_reason"]["bad_message"]
                          == before + 1, timeout_s=30)
        with pytest.raises(ServerError) as ei:
            hil.set_inputs_acked(big)
        assert ei.value.code == "bad_message"


def _entries(name: str, value: float, n: int) -> bytes:
    """A msgpack map of ``n`` entries that all name ``name`` (a decoded dict keeps one of them)."""
    return b"\xde" + n.to_bytes(2, "big") + (msgpack.packb(name) + msgpack.packb(value)) * n


def test_257_entries_of_one_repeated_name_are_bad_message_on_both_sockets(server):
    """The size rule counts the entries sent, so repeating a name does not get past it: the plant keeps p_c8."""
    ctx = zmq.Context.instance()
    with server.client() as hil:
        p0 = hil.get()["u"]["p_c8"]
        before = hil.status()["adapters"]["zmq"]["rejected"]["by_reason"]["bad_message"]
        hil.send_raw_command(b"\x83\xa1v\x01\xa3seq\x05\xa3set" + _entries("p_c8", 7.0, 257))
        assert wait_until(lambda: hil.status()["adapters"]["zmq"]["rejected"]["by_reason"]["bad_message"]
                          == before + 1, timeout_s=30)
        req = ctx.socket(zmq.REQ)
        req.setsockopt(zmq.LINGER, 0)
        req.connect(server.control)
        try:
            for cmd, key in (("set", "set"), ("reset", "inputs")):  # step's set: test_server_lockstep.py
                req.send(b"\x83\xa1v\x01\xa3cmd" + msgpack.packb(cmd) + msgpack.packb(key) + _entries("p_c8", 7.0, 257))
                assert req.poll(30_000)
                rep = msgpack.unpackb(req.recv())
                assert rep["ok"] is False and rep["error"]["code"] == "bad_message", (cmd, rep)
                assert rep["error"]["message"].startswith("more than 256 entries in a map"), (cmd, rep)
        finally:
            req.close()
        got = hil.get()
        assert got["u"]["p_c8"] == p0 and got["t"] > 0.0  # not set, and not reset


# A peer's process that subscribes with a 4 MiB prefix and pushes a 1 MiB command.  In a process of its own:
# libzmq 4.3.5 crashes the *subscriber's* process when such a SUB socket is closed (seen here; the server's PUB,
# which drops the connection at its size cap, is not affected).
FLOOD = """
import os, sys, time, zmq
ctx = zmq.Context()
sub = ctx.socket(zmq.SUB); sub.setsockopt(zmq.LINGER, 0); sub.connect(sys.argv[1])
sub.setsockopt(zmq.SUBSCRIBE, b"s" * (4 << 20))
push = ctx.socket(zmq.PUSH); push.setsockopt(zmq.LINGER, 0); push.connect(sys.argv[2])
push.send(b"\\x83\\xa1v\\x01\\xa3seq\\x03\\xa3set\\x80" + b"\\x00" * (1 << 20))
time.sleep(1.5)
os._exit(0)
"""
# The same peers with messages of a normal size: a 1-byte subscription and an empty map (a rejected command).
QUIET = (FLOOD.replace('b"s" * (4 << 20)', 'b"s"')
         .replace('b"\\x83\\xa1v\\x01\\xa3seq\\x03\\xa3set\\x80" + b"\\x00" * (1 << 20)', 'b"\\x80"'))


def test_a_4_mib_subscription_and_a_1_mib_command_are_dropped_unread_at_no_cost_in_ticks(server):
    """The oversized messages never reach the server (its received count is unchanged), the server goes on serving,
    and the loop loses at most a few ticks more than while the same peers' processes send normal messages.

    The control is needed because starting three Python processes on a 2-core machine is itself a load.  The tick
    bound (:func:`_no_stall`) is loose on purpose: on a loaded machine either half loses ticks to the host (a CI
    run saw 2 against 0, others more); the bound still catches a stall of the loop.  What the messages cost in
    time is measured by bench/bench_zmq_hardening.py, not here."""
    with server.client() as hil:

        def missed_while_running(script: str) -> int:
            before = _missed(hil)
            for _ in range(3):
                subprocess.run([sys.executable, "-c", script, hil.endpoints["state"], hil.endpoints["command"]],
                               timeout=120, capture_output=True)
            time.sleep(0.5)
            return _missed(hil) - before

        received0 = hil.status()["adapters"]["zmq"]["received"]
        control = missed_while_running(QUIET)
        assert hil.status()["adapters"]["zmq"]["received"] == received0 + 3
        received0 += 3
        flood = missed_while_running(FLOOD)
        assert _no_stall(flood, control), f"missed ticks: {flood} with the oversized messages, {control} without"
        st = hil.status()["adapters"]["zmq"]
        assert st["received"] == received0  # ZeroMQ dropped the 1 MiB messages before the server saw them
        # the server still serves a normal subscriber and normal commands
        hil.subscribe()
        assert hil.recv_state(10.0) is not None
        seq = hil.set_inputs(p_c1=0.0)
        assert hil.wait_for(lambda s: s.ack >= seq, 10.0) is not None
    assert server.proc.poll() is None


@pytest.mark.parametrize("kind", ["outside", "absolute", "dotdot", "fifo", "device", "symlink_out", "too_long"])
def test_load_scenario_reads_only_regular_files_inside_the_scenario_folders(server, tmp_path, kind):
    folder = server.scenario_folder
    outside = tmp_path / "valid.toml"
    outside.write_text((ROOT / "scenarios" / "powershift_single_swap.toml").read_text())
    if kind == "outside":
        path, why = "powershift_single_swap", "no such scenario"  # valid, in the project's folder: not configured
    elif kind == "absolute":
        path, why = str(outside), "absolute paths are not accepted"
    elif kind == "dotdot":
        path, why = os.path.relpath(outside, folder), "'..' is not accepted"
    elif kind == "fifo":
        fifo = folder / "fifo.toml"
        if not fifo.exists():
            os.mkfifo(fifo)
        path, why = "fifo.toml", "is a FIFO"
    elif kind == "device":
        if not os.path.exists("/dev/zero"):
            pytest.skip("no /dev/zero here")
        dev = folder / "endless.toml"
        if not os.path.lexists(dev):
            os.mknod(dev, 0o600 | __import__("stat").S_IFCHR, os.makedev(1, 5)) if os.geteuid() == 0 \
                else os.symlink("/dev/zero", dev)
        path, why = "endless.toml", "is a device" if os.geteuid() == 0 else "leads outside the scenario folder"
    elif kind == "symlink_out":
        link = folder / "link.toml"
        if not os.path.lexists(link):
            os.symlink(outside, link)
        path, why = "link.toml", "leads outside the scenario folder"
    else:
        big = folder / "big.toml"
        big.write_text(outside.read_text() + "#" * 70_000 + "\n")
        path, why = "big.toml", "more than the limit"
    with server.client(timeout_s=20.0) as hil:
        missed0 = _missed(hil)
        t0 = time.monotonic()
        with pytest.raises(ServerError) as ei:
            hil.load_scenario(path)
        assert ei.value.code == "scenario_error" and why in ei.value.message, ei.value.message
        assert hil.ping()["ok"] is True
        missed, took = _missed(hil) - missed0, time.monotonic() - t0
        # refused without blocking the loop: no stall beyond what the same time without the request loses
        control = _missed_in(hil, max(took, 0.2))
        assert _no_stall(missed, control), f"missed ticks: {missed} in the refused request's {took:.3f} s, " \
                                           f"{control} in the same time without it"
        assert hil.status()["scenario"] is None


def test_a_scenario_inside_the_folder_loads(server):
    with server.client(timeout_s=30.0) as hil:
        info = hil.load_scenario("inside")
        assert info["n_steps"] > 0 and info["source"].endswith("inside.toml")
        hil.unload_scenario()
        # a path that starts with the folder's own name (as written from the folder above it)
        info = hil.load_scenario(f"{SCENARIO_DIR_NAME}/inside.toml")
        assert info["source"] == str(server.scenario_folder / "inside.toml")
        hil.unload_scenario()
        for path, why in ((f"{SCENARIO_DIR_NAME}/../{SCENARIO_DIR_NAME}/inside.toml", "'..' is not accepted"),
                          (str(server.scenario_folder / "inside.toml"), "absolute paths are not accepted"),
                          (f"{SCENARIO_DIR_NAME}/insde.toml", "did you mean 'inside'?")):
            with pytest.raises(ServerError) as ei:
                hil.load_scenario(path)
            assert ei.value.code == "scenario_error" and why in ei.value.message, ei.value.message
        assert hil.status()["scenario"] is None
