"""The XCP adapter in process: DTO packets lost to a ring overrun are counted per event and flag the next packet.

A small state ring is written past its length between two pumps, as a
realtime loop would when the pump falls behind; no server runs.
"""

from __future__ import annotations

import struct

import pytest

from io_adapters.base import LoopContext, new_tick_info
from plant_models.run.ring import StateRing
from io_adapters.xcp import codes as C
from io_adapters.xcp.adapter import XcpAdapter
from io_adapters.xcp.memory import MEAS_BASE
from tests.xcp_support import RawXcp


@pytest.fixture()
def served():
    from plant_models.registry import load_plant

    plant = load_plant("powershift")
    ring = StateRing.for_plant(plant, capacity=16)
    ctx = LoopContext(period_s=0.001, feed_watchdog=lambda now_ns: None, status=dict, mode="lockstep", ring=ring,
                      tick_info=new_tick_info())
    adapter = XcpAdapter("xcp", {"port": 0, "tcp": False})
    adapter.open(plant, ctx)
    raw = RawXcp(int(adapter.endpoints["udp"].rsplit(":", 1)[1]))
    tick = [0]

    def push(n):
        for _ in range(n):
            tick[0] += 1
            ring.push(ctx.tick_info, plant.df, tick[0], tick[0] * 1_000_000, tick[0] * 0.001)

    yield adapter, raw, push
    raw.close()
    adapter.close()


def _ok(raw, packet: bytes) -> None:
    r = raw.request(packet)
    assert r[0] == C.PID_RES, r.hex()


def test_rows_lost_to_the_ring_are_counted_per_event_and_set_the_overload_bit(served):
    adapter, raw, push = served
    _ok(raw, bytes((C.CONNECT, 0)))
    _ok(raw, struct.pack("<BBH", C.ALLOC_DAQ, 0, 1))
    _ok(raw, struct.pack("<BBHB", C.ALLOC_ODT, 0, 0, 1))
    _ok(raw, struct.pack("<BBHBB", C.ALLOC_ODT_ENTRY, 0, 0, 0, 1))
    _ok(raw, struct.pack("<BBHBB", C.SET_DAQ_PTR, 0, 0, 0, 0))
    _ok(raw, struct.pack("<BBBBI", C.WRITE_DAQ, 0xFF, 8, 0, MEAS_BASE))  # time_s
    _ok(raw, struct.pack("<BBHHBB", C.SET_DAQ_LIST_MODE, C.DAQ_MODE_TIMESTAMP, 0, 0, 1, 0))
    assert raw.request(struct.pack("<BBH", C.START_STOP_DAQ_LIST, 1, 0)) == bytes((C.PID_RES, 0))
    push(5)
    adapter.pump()
    got = [raw.recv() for _ in range(5)]
    assert [p[0] for p in got] == [0] * 5
    assert [struct.unpack_from("<I", p, 1)[0] for p in got] == [1000 * k for k in range(1, 6)]
    push(40)  # the ring keeps 15 rows: ticks 6 .. 30 are overwritten before the next pump
    adapter.pump()
    got = [raw.recv() for _ in range(15)]
    ticks = [struct.unpack_from("<I", p, 1)[0] // 1000 for p in got]
    assert ticks == list(range(31, 46))
    assert [p[0] for p in got] == [C.OVERLOAD_PID_BIT] + [0] * 14  # the first packet after the loss is flagged
    assert struct.unpack_from("<d", got[0], 5)[0] == pytest.approx(0.031)
    assert adapter.status()["daq_lost"] == {"tick": 25, "10ms": 0, "100ms": 0}
    _ok(raw, bytes((C.DISCONNECT,)))
    push(3)
    adapter.pump()  # no session: nothing is sent, nothing counted
    assert adapter.status()["daq_lost"] == {"tick": 25, "10ms": 0, "100ms": 0}
    assert adapter.status()["dto_sent"] == 20
