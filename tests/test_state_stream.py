"""The ZeroMQ state stream read from the state ring: every tick, in order, the same content; losses visible.

* In lockstep every state of a scenario arrives, in tick order, with
  consecutive sequence numbers, and equals the offline simulation bit for
  bit, also when the ring is much shorter than the step request.
* Sequence numbers count the rows of the stream's decimation: a consumer
  that falls a ring's length behind shows the loss as a jump in ``seq``
  equal to the ``state_dropped`` count.
* The ack of a command survives the int64 ring as the full uint64 ``seq``.
* A command that arrives while the realtime loop sleeps before its next
  deadline wakes it, is decoded then, and is applied by that next tick.
"""

from __future__ import annotations

import random
import subprocess
import sys
import time

import msgpack
import numpy as np
import pytest
import zmq

from io_adapters.base import AdapterError, LoopContext, new_tick_info
from plant_models.run.ring import StateRing
from io_adapters.zmq.adapter import ZmqAdapter
from io_adapters.zmq.codec import encode
from plant_models.registry import load_plant
from server.offline.run import read_trace_csv

from server_support import ROOT, ServerProcess, wait_until

SMALL_RING = "ring_rows = 64"
FREE = {"state_endpoint": "tcp://127.0.0.1:*", "command_endpoint": "tcp://127.0.0.1:*",
        "control_endpoint": "tcp://127.0.0.1:*", "status_publish_s": 0.0, "publish_events": False}


def test_lockstep_stream_carries_every_tick_in_order_and_equals_the_offline_run(tmp_path):
    out = tmp_path / "offline"
    subprocess.run([sys.executable, "-m", "server.cli", "simulate", "powershift", "--scenario",
                    "powershift_single_swap", "--out", str(out), "--quiet"], cwd=ROOT, check=True, timeout=600)
    header, offline = read_trace_csv(out / "trace.csv")
    names = header[1:]
    with ServerProcess(tmp_path, mode="lockstep", loop=SMALL_RING) as srv:
        with srv.client() as hil:
            hil.subscribe(("state",))
            info = hil.load_scenario("powershift_single_swap")
            n = info["n_steps"]
            assert n > 10 * 64  # the request covers the ring many times over
            r = hil.step(n)  # one request: the states go out while it runs, before its reply
            states = [hil.recv_state(30.0) for _ in range(n)]
            assert hil.recv_state(0.2) is None  # nothing more
            assert [s.tick for s in states] == list(range(1, n + 1)) and r.tick == n
            seq0 = states[0].seq
            assert [s.seq for s in states] == list(range(seq0, seq0 + n))
            for s in states:
                row = offline[s.tick]
                assert s.t == pytest.approx(row[0], rel=1e-12)
                got = np.array([s.y[k] for k in names])
                assert np.array_equal(got.view(np.int64), row[1:].view(np.int64)), s.tick
                assert s.ack == 0 and s.watchdog is False
            zs = hil.status()["adapters"]["zmq"]
            assert zs["state_dropped"] == 0 and zs["send_errors"] == 0 and zs["state_sent"] >= n
        srv.shutdown()


def _open_adapter(ring_rows: int, every: int = 1, mode: str = "lockstep", period_s: float = 0.001, **options):
    plant = load_plant("powershift")
    ring = StateRing.for_plant(plant, ring_rows)
    ctx = LoopContext(period_s=period_s, feed_watchdog=lambda ns: None, status=dict, mode=mode,
                      tick_info=new_tick_info(), ring=ring)
    a = ZmqAdapter("zmq", dict(FREE, publish_every=every, **options))
    a.open(plant, ctx)
    return plant, ring, ctx, a


class _Ticks:
    """``push()`` writes the row of the next tick (1, 2, ...) into the ring, as the loop's tick does."""

    def __init__(self, plant, ring: StateRing, ctx: LoopContext):
        self.plant, self.ring, self.ctx, self.tick = plant, ring, ctx, 0

    def __call__(self) -> None:
        self.tick += 1
        self.ring.push(self.ctx.tick_info, self.plant.df, self.tick, 0, 0.001 * self.tick)


def _subscriber(a: ZmqAdapter, push) -> zmq.Socket:
    """A SUB socket that receives the adapter's states (rows pushed and pumped until one arrives)."""
    sub = zmq.Context.instance().socket(zmq.SUB)
    sub.setsockopt(zmq.LINGER, 0)
    sub.connect(a.endpoints["state"])
    sub.subscribe(b"state")
    assert wait_until(lambda: (push(), a.pump(0), sub.poll(20))[2], 30.0), "no state reached the subscriber"
    while sub.poll(200):
        sub.recv_multipart()
    return sub


def test_a_consumer_that_falls_a_ring_behind_shows_the_loss_as_a_seq_jump_equal_to_the_dropped_count():
    plant, ring, ctx, a = _open_adapter(ring_rows=16, every=2)
    push = _Ticks(plant, ring, ctx)

    try:
        sub = _subscriber(a, push)
        push()
        push()
        a.pump(0)
        first = msgpack.unpackb(sub.recv_multipart()[1])
        assert first["tick"] % 2 == 0
        for _ in range(60):  # 30 states of this decimation, of which the ring keeps the last 7 or 8
            push()
        a.pump(0)
        got = []
        while sub.poll(500):
            got.append(msgpack.unpackb(sub.recv_multipart()[1]))
        dropped = a.status()["state_dropped"]
        assert dropped > 0 and len(got) + dropped == 30
        assert got[0]["seq"] == first["seq"] + dropped + 1  # the jump is exactly the loss
        assert [m["seq"] for m in got] == list(range(got[0]["seq"], got[0]["seq"] + len(got)))
        assert all(m["tick"] - first["tick"] == 2 * (m["seq"] - first["seq"]) for m in got)  # seq follows ticks
        sub.close(0)
    finally:
        a.close()


def test_a_pump_past_its_deadline_sends_a_few_rows_and_leaves_the_rest_in_order_for_the_next_gap():
    """A backlog goes out over several gaps between ticks instead of running one batch into the next deadline."""
    from io_adapters.zmq.adapter import ROWS_PER_CHECK

    plant, ring, ctx, a = _open_adapter(ring_rows=64)
    push = _Ticks(plant, ring, ctx)

    try:
        sub = _subscriber(a, push)
        for _ in range(20):
            push()
        sent0 = a.sent
        a.pump(1)  # a deadline long past: one take of rows, then the pump returns
        assert a.sent - sent0 == ROWS_PER_CHECK
        a.pump(0)  # no deadline: the rest
        assert a.sent - sent0 == 20
        got = []
        while sub.poll(500):
            got.append(msgpack.unpackb(sub.recv_multipart()[1]))
        assert [m["tick"] for m in got] == list(range(push.tick - 19, push.tick + 1))
        assert [m["seq"] for m in got] == list(range(got[0]["seq"], got[0]["seq"] + 20))
        sub.close(0)
    finally:
        a.close()


def _received(sub: zmq.Socket, wait_ms: int = 300) -> list[dict]:
    got = []
    while sub.poll(wait_ms):
        got.append(msgpack.unpackb(sub.recv_multipart()[1]))
    return got


def test_a_realtime_publisher_sends_bursts_of_publish_batch_states_and_a_pump_without_deadline_sends_all():
    """At 10 kHz the default burst is the states of 1 ms (10); a burst cut by its deadline goes on at the next
    gap although fewer than 10 then wait; every state arrives once, in tick order, with consecutive ``seq``."""
    from io_adapters.zmq.adapter import ROWS_PER_CHECK

    plant, ring, ctx, a = _open_adapter(ring_rows=64, mode="realtime", period_s=1e-4)
    push = _Ticks(plant, ring, ctx)
    later = time.monotonic_ns() + 3_600 * 10**9  # a deadline that never comes
    try:
        assert a.publish_batch == 10 and a.status()["publish_batch"] == 10
        sub = _subscriber(a, push)
        tick0 = push.tick
        for _ in range(9):
            push()
        a.pump(later)
        assert _received(sub) == []  # 9 states wait for the tenth
        push()
        a.pump(later)
        burst = _received(sub)
        assert [m["tick"] for m in burst] == list(range(tick0 + 1, tick0 + 11))
        sent0 = a.sent
        for _ in range(10):
            push()
        a.pump(1)  # a deadline long past: one take of rows, then the pump returns mid-burst
        assert a.sent - sent0 == ROWS_PER_CHECK
        push()
        a.pump(later)  # 7 wait, fewer than a burst: the burst goes on
        assert a.sent - sent0 == 11
        for _ in range(3):
            push()
        a.pump(0)  # no deadline (pause, shutdown, lockstep): whatever waits
        rest = _received(sub)
        got = burst + rest
        assert [m["tick"] for m in got] == list(range(tick0 + 1, push.tick + 1))
        assert [m["seq"] for m in got] == list(range(got[0]["seq"], got[0]["seq"] + len(got)))
        sub.close(0)
    finally:
        a.close()


@pytest.mark.parametrize("mode, period_s, every, batch", [
    ("realtime", 1e-3, 1, 1), ("realtime", 1e-4, 10, 1), ("realtime", 1e-4, 2, 5), ("realtime", 2e-3, 1, 1),
    ("realtime", 1 / 3000, 1, 3)])
def test_the_default_burst_is_about_a_millisecond_of_states(mode, period_s, every, batch):
    plant, ring, ctx, a = _open_adapter(ring_rows=64, every=every, mode=mode, period_s=period_s)
    try:
        assert a.publish_batch == batch
    finally:
        a.close()


def test_a_burst_longer_than_half_the_ring_is_refused_when_the_adapter_opens():
    with pytest.raises(AdapterError, match="publish_batch = 100 states of every 10 ticks.*ring_rows = 1024"):
        _open_adapter(ring_rows=1024, every=10, mode="realtime", period_s=1e-4, publish_batch=100)
    plant, ring, ctx, a = _open_adapter(ring_rows=1024, every=10, mode="lockstep", period_s=1e-4, publish_batch=100)
    a.close()  # lockstep sends no bursts: nothing to refuse


def test_lockstep_and_a_burst_of_one_send_each_state_at_the_first_pump():
    for mode, period_s, options in (("lockstep", 1e-4, {}), ("realtime", 1e-4, {"publish_batch": 1})):
        plant, ring, ctx, a = _open_adapter(ring_rows=64, mode=mode, period_s=period_s, **options)
        push = _Ticks(plant, ring, ctx)
        try:
            sub = _subscriber(a, push)
            push()
            a.pump(time.monotonic_ns() + 10**9)
            assert [m["tick"] for m in _received(sub)] == [push.tick], mode
            sub.close(0)
        finally:
            a.close()


def test_the_ack_of_a_command_is_its_full_uint64_seq():
    plant, ring, ctx, a = _open_adapter(ring_rows=64)
    push_sock = zmq.Context.instance().socket(zmq.PUSH)
    push_sock.setsockopt(zmq.LINGER, 0)
    push_sock.connect(a.endpoints["command"])
    tick = [0]

    def push():
        tick[0] += 1
        ring.push(ctx.tick_info, plant.df, tick[0], 0, 0.0)

    try:
        sub = _subscriber(a, push)
        push_sock.send(encode({"v": 1, "seq": 2 ** 64 - 1, "set": {"engine_torque": 123.0}}))
        assert wait_until(lambda: (a.pump(0), a.rows.waiting())[1], 30.0)
        a.read(tick[0], 0)  # the tick's copy
        assert plant.u[plant.input_index("engine_torque")] == 123.0 and a.ack == 2 ** 64 - 1
        push()
        a.pump(0)
        assert msgpack.unpackb(sub.recv_multipart()[1])["ack"] == 2 ** 64 - 1
        assert a.status()["last_ack"] == 2 ** 64 - 1 and a.status()["applied"] == 1
        sub.close(0)
    finally:
        push_sock.close(0)
        a.close()


def test_a_rehearsal_changes_nothing_of_the_adapter_and_the_command_decoded_around_it_is_applied():
    """The spin wait's rehearsal of the command decoding (scratch decoder, scratch rows) leaves the adapter's
    queue, decoder, counters and the plant as they were, also between a command's decoding and its tick."""
    plant, ring, ctx, a = _open_adapter(ring_rows=64)
    push_sock = zmq.Context.instance().socket(zmq.PUSH)
    push_sock.setsockopt(zmq.LINGER, 0)
    push_sock.connect(a.endpoints["command"])

    def observed():
        v = a.decoder.validator
        return ([x.copy() for x in (a.rows.q, a.rows.meta, a.rows.idx, a.rows.val, v.idx, v.val, plant.u, plant.df)]
                + [a.decoder.seq, v.count, a.status()])

    def same(x, y):
        return all(np.array_equal(p, q) if isinstance(p, np.ndarray) else p == q for p, q in zip(x, y))

    try:
        before = observed()
        for _ in range(10):
            a.rehearse()
        assert a._dry_rows.q[0] == 10  # it did rehearse: ten rows went through the scratch queue
        assert same(observed(), before)
        push_sock.send(encode({"v": 1, "seq": 7, "set": {"engine_torque": 123.0, "p_c2": 4.5}}))
        assert wait_until(lambda: (a.pump(0), a.rows.waiting())[1], 30.0)
        decoded = observed()
        a.rehearse()  # between the decoding and the tick, as in the loop
        assert same(observed(), decoded)
        a.read(1, 0)
        assert plant.u[plant.input_index("engine_torque")] == 123.0 and plant.u[plant.input_index("p_c2")] == 4.5
        assert a.ack == 7 and a.status()["received"] == 1 and a.status()["applied"] == 1
    finally:
        push_sock.close(0)
        a.close()


def test_a_command_that_arrives_while_the_loop_sleeps_is_applied_by_the_next_tick(tmp_path):
    # 100 Hz: the loop sleeps most of each 10 ms period.  Commands are decoded between ticks; if the loop did not
    # wake for them, one sent a few ms after a tick would be decoded only after the next tick and applied by the
    # tick after that, every time.
    with ServerProcess(tmp_path, loop="rate_hz = 100.0") as srv:
        with srv.client() as hil:
            hil.subscribe(("state",))
            time.sleep(0.3)
            next_tick = 0
            for k in range(20):
                while hil.recv_state(0.0) is not None:  # drain: the next state is a fresh one
                    pass
                last = hil.recv_state(5.0)
                time.sleep(random.uniform(0.001, 0.004))  # well inside the period that follows it
                seq = hil.set_inputs(engine_torque=100.0 + k)
                s = hil.wait_for(lambda st: st.ack >= seq, 5.0)
                assert s is not None and s.ack == seq
                next_tick += s.tick == last.tick + 1
            assert next_tick >= 15, next_tick  # a machine stall may delay a few, not most
        srv.shutdown()
