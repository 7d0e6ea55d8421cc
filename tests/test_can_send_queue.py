"""Realtime CAN transmit: the tick packs and queues its frames, the adapter sends them between ticks.

``bus.send`` (a system call on SocketCAN, a lock shared with the receivers
on python-can's virtual bus) must not run in the tick.  In realtime mode
``write`` copies the packed frames into a preallocated queue and ``pump``
sends them; in lockstep and afap ``write`` sends at once.  Either way the
frames on the bus are the same, bit for bit and in the same order.
"""

from __future__ import annotations

import contextlib

import cantools
import pytest

from can_support import ROOT, Harness
from io_adapters.can import frames
from io_adapters.can.adapter import TX_QUEUE_FRAMES

DBC = cantools.database.load_file(str(ROOT / "configs" / "powershift.dbc"))


@contextlib.contextmanager
def _peer(h: Harness):
    """The other node of the harness's bus, shut down on exit."""
    bus = h.peer()
    try:
        yield bus
    finally:
        bus.shutdown()


def _queue_ticks(h: Harness, n: int) -> int:
    """``n`` ticks with nothing between them; the frames then waiting in the send queue."""
    for _ in range(n):
        h.tick_without_pump()
    return h.adapter.status()["tx"]["queued"]


def _drain(bus, first_wait_s: float = 0.3) -> list[tuple[int, bytes]]:
    out = []
    wait = first_wait_s
    while (m := bus.recv(wait)) is not None:
        out.append((m.arbitration_id, bytes(m.data)))
        wait = 0.05
    return out


class _CountingSend:
    """Wraps ``bus.send``: counts the calls."""

    def __init__(self, bus):
        self.inner, self.calls = bus.send, 0

    def __call__(self, msg, timeout=None):
        self.calls += 1
        return self.inner(msg, timeout)


def test_realtime_write_only_queues_and_the_pump_sends_the_same_frames_as_lockstep_sends_in_the_tick():
    ticks = 60
    with Harness("powershift", mode="lockstep") as direct, Harness("powershift") as queued:
        with _peer(direct) as peer_d, _peer(queued) as peer_q:
            send = _CountingSend(queued.adapter._bus)
            queued.adapter._bus.send = send
            for _ in range(ticks):
                direct.tick_without_pump()  # lockstep: sent in write
                before = send.calls
                queued.tick_without_pump()
                assert send.calls == before  # the realtime tick sends nothing
                queued.adapter.pump(0)
                assert queued.adapter.status()["tx"]["queued"] == 0
            assert send.calls > 0
            got_d, got_q = _drain(peer_d), _drain(peer_q)
        assert len(got_q) == queued.adapter.status()["tx"]["frames"] == send.calls > ticks // 10
        assert got_q == got_d  # ids and payloads (counters, CRCs, speeds) bit for bit, same order
        assert queued.adapter.status()["tx"]["queue_dropped"] == 0


def test_frames_of_many_ticks_without_a_pump_wait_in_order_and_a_full_queue_drops_and_counts():
    with Harness("powershift") as h, _peer(h) as peer:
        h.adapter._bus.send = _CountingSend(h.adapter._bus)
        while h.adapter.status()["tx"]["queued"] < TX_QUEUE_FRAMES:  # a loop with no slack between ticks
            h.tick_without_pump()
        assert h.adapter._bus.send.calls == 0
        h.tick_without_pump()  # frames beyond the queue: dropped, counted, nothing raised
        h.tick_without_pump()
        st = h.adapter.status()["tx"]
        assert st["queued"] == TX_QUEUE_FRAMES and st["queue_dropped"] > 0 and st["frames"] == 0
        later = 10**18  # a deadline that never comes: the pump sends all
        h.adapter.pump(later)
        got = _drain(peer)
        st = h.adapter.status()["tx"]
        assert st["queued"] == 0 and len(got) == st["frames"] == TX_QUEUE_FRAMES
        ids = [fid for fid, _ in got]
        layouts = {m.frame_id: m for m in h.adapter.ms.tx.messages}
        assert set(ids) <= set(layouts)
        # oldest first: per message, the alive counters of the frames received rise by one
        for fid, lay in layouts.items():
            if lay.counter_signal < 0:
                continue
            seen = [data for f, data in got if f == fid]
            assert len(seen) > 1
            name = lay.signals[lay.counter_signal].name
            counters = [DBC.decode_message(fid, data, decode_choices=False)[name] for data in seen]
            mod = DBC.get_message_by_frame_id(fid).get_signal_by_name(name).maximum + 1
            assert all((b - a) % mod == 1 for a, b in zip(counters, counters[1:])), lay.name


def test_a_pump_with_a_deadline_sends_at_least_one_frame_and_the_rest_at_the_next_gap():
    with Harness("powershift") as h, _peer(h) as peer:
        waiting = _queue_ticks(h, 40)
        assert waiting > 16
        h.adapter.pump(1)  # a deadline long past: 8 frames, then the clock stops it
        assert h.adapter.status()["tx"]["queued"] == waiting - 8
        h.adapter.pump(0)
        assert len(_drain(peer)) == waiting


def test_closing_sends_what_the_last_ticks_queued():
    h = Harness("powershift")
    with _peer(h) as peer:
        waiting = _queue_ticks(h, 20)
        assert waiting > 0
        h.close()
        assert len(_drain(peer)) == waiting


@pytest.mark.parametrize("mode", ["lockstep", "afap"])
def test_lockstep_and_afap_send_in_the_tick(mode):
    with Harness("powershift", mode=mode) as h, _peer(h) as peer:
        assert _queue_ticks(h, 20) == 0
        sent = h.adapter.status()["tx"]["frames"]
        assert sent > 0 and len(_drain(peer)) == sent


def test_the_queue_copy_is_compiled_when_the_adapter_opens_before_the_first_tick():
    with Harness("powershift"):
        assert frames.tx_enqueue.signatures


def _tick_at(h: Harness, now_ns: int) -> None:
    """One tick whose clock (the loop's wake-up, monotonic) is ``now_ns``, nothing between ticks."""
    a, p = h.adapter, h.plant
    a.read(h.tick, now_ns)
    p.step(h.period_s)
    h.tick += 1
    a.write(h.tick, now_ns)


def test_the_status_shows_how_long_the_oldest_queued_frame_waited_since_its_tick():
    """``tx.queue_wait_us`` (per pump, its oldest frame's wait), ``tx.queue_wait_max_us``, ``tx.queue_max``."""
    import time

    h = Harness("powershift")
    try:
        t = time.monotonic_ns()
        for ago_s in range(20, 0, -1):  # 20 ticks that ran 20 .. 1 s ago, their frames still queued
            _tick_at(h, t - ago_s * 1_000_000_000)
        st = h.adapter.status()["tx"]
        queued = st["queued"]
        assert queued > 8 and st["queue_wait_max_us"] == 0.0 and sum(st["queue_wait_us"].values()) == 0
        h.adapter.pump(1)  # a deadline long past: 8 frames, the oldest from 20 s ago
        assert h.adapter.status()["tx"]["queued"] == queued - 8
        h.adapter.pump(0)  # the rest: the oldest one of the tick that queued frame 9
        st = h.adapter.status()["tx"]
        assert st["queued"] == 0 and st["queue_max"] == queued
        assert st["queue_wait_us"][">=5000"] == 2 and sum(st["queue_wait_us"].values()) == 2
        assert 20e6 <= st["queue_wait_max_us"] < 20e6 + 60e6
        # a tick that pumps at once: one more pump, counted below 5 ms unless the machine stalls that long
        _tick_at(h, time.monotonic_ns())
        h.adapter.pump(0)
        st = h.adapter.status()["tx"]
        assert sum(st["queue_wait_us"].values()) == 3 and 20e6 <= st["queue_wait_max_us"] < 20e6 + 60e6
    finally:
        h.adapter.close()


def test_more_queued_ticks_than_the_marks_remember_count_from_the_oldest_one_kept():
    import time

    from io_adapters.can.adapter import TX_MARKS

    with Harness("powershift") as h:
        n = 4 * TX_MARKS  # the Powershift queues frames in about every second tick: about 2 * TX_MARKS marks
        t = time.monotonic_ns()
        for i in range(n):
            _tick_at(h, t - (n - i) * 1_000_000_000)  # 1 s apart, the last one 1 s ago
        h.adapter.pump(0)
        st = h.adapter.status()["tx"]
        assert st["queued"] == 0 and st["queue_dropped"] == 0 and st["queue_wait_us"][">=5000"] == 1
        # the oldest tick kept ran at least TX_MARKS s ago, the oldest of all n s ago: under-counted, never over
        assert h.adapter._txq_marks > TX_MARKS and TX_MARKS * 1e6 <= st["queue_wait_max_us"] < n * 1e6
