"""XCP DAQ in lockstep with pyxcp as the master, and >= 10000 fuzzed packets (docs/xcp.md).

DAQ: 200 ODT entries (float64) on the tick event for 60 s of plant time in
lockstep: no packet lost, every timestamp = tick * dt, every value equal to
the ZeroMQ state stream's bit for bit.  The plant has 56 outputs, so the 200
entries are ``time_s`` and the outputs, repeated in order.
"""

from __future__ import annotations

import random
import struct
import threading

import numpy as np
import pytest

pytest.importorskip("pyxcp")

from pyxcp.transport.transport_ext import FrameAcquisitionPolicy, FrameCategory  # noqa: E402
from pyxcp.types import XcpResponseError  # noqa: E402

from io_adapters.xcp import codes as C  # noqa: E402
from io_adapters.xcp.memory import CAL_BASE, EPK_BASE, MEAS_BASE  # noqa: E402
from tests.xcp_support import RawXcp, error_code, pyxcp_master, xcp_port, xcp_server  # noqa: E402

ENTRIES = 200
TICKS = 60_000  # 60 s at 1 kHz
CHUNK = 1000  # ticks per lockstep step request (a quarter of the state ring)
ODT0 = (1400 - 1 - 4) // 8  # entries in the first ODT: PID and timestamp, then float64s up to MAX_DTO


class DaqFrames(FrameAcquisitionPolicy):
    """Keeps every DAQ packet pyxcp receives."""

    def __init__(self):
        super().__init__(filtered_out=None)
        self.frames: list[bytes] = []
        self.lock = threading.Lock()
        self.arrived = threading.Condition(self.lock)

    def feed(self, category, counter, timestamp, payload):
        if category == FrameCategory.DAQ:
            with self.arrived:
                self.frames.append(bytes(payload))
                self.arrived.notify_all()

    def wait_for(self, n: int, timeout_s: float = 60.0) -> None:
        with self.arrived:
            assert self.arrived.wait_for(lambda: len(self.frames) >= n, timeout_s), \
                f"{len(self.frames)} DAQ packets of {n}"

    def finalize(self, *args):
        pass


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    s = xcp_server(tmp_path_factory.mktemp("xcp_daq"))
    yield s
    s.shutdown()


def _configure(x, columns: list[int]) -> None:
    x.freeDaq()
    x.allocDaq(1)
    x.allocOdt(0, 2)
    x.allocOdtEntry(0, 0, ODT0)
    x.allocOdtEntry(0, 1, ENTRIES - ODT0)
    x.setDaqPtr(0, 0, 0)
    for k, col in enumerate(columns):
        if k == ODT0:
            x.setDaqPtr(0, 1, 0)
        x.writeDaq(0xFF, 8, 0, MEAS_BASE + 8 * col)
    x.setDaqListMode(C.DAQ_MODE_TIMESTAMP, 0, 0, 1, 0)


def test_daq_of_200_signals_in_lockstep_equals_the_state_stream_bit_for_bit(srv):
    with srv.client() as c:
        c.reset()
        names = list(c.get()["y"])
        columns = [k % (1 + len(names)) for k in range(ENTRIES)]  # time_s, then the outputs, repeated
        policy = DaqFrames()
        with pyxcp_master(srv, "TCP", policy) as x:
            _configure(x, columns)
            x.startStopDaqList(2, 0)  # select
            x.startStopSynch(1)  # start the selected lists
            c.subscribe(hwm=2 * TICKS)
            states = []
            for done in range(CHUNK, TICKS + 1, CHUNK):
                c.step(CHUNK, inputs={"engine_torque": 200.0 + done / 600.0, "p_c1": 3.0})
                policy.wait_for(2 * done)
                while len(states) < done:
                    s = c.recv_state(timeout_s=30.0)
                    assert s is not None, "the state stream stopped"
                    states.append(s)
            x.startStopSynch(0)
        status = c.status()["adapters"]["xcp"]
    frames = policy.frames
    assert len(frames) == 2 * TICKS and status["daq_lost"] == {"tick": 0, "10ms": 0, "100ms": 0}
    first = np.frombuffer(b"".join(f for f in frames[0::2]), dtype=np.uint8).reshape(TICKS, -1)
    second = np.frombuffer(b"".join(f for f in frames[1::2]), dtype=np.uint8).reshape(TICKS, -1)
    assert (first[:, 0] == 0).all() and (second[:, 0] == 1).all()  # PIDs 0 and 1, no overload bit
    stamps = first[:, 1:5].copy().view("<u4").ravel()
    ticks = np.array([s.tick for s in states], dtype=np.int64)
    assert (ticks == np.arange(1, TICKS + 1)).all()
    assert (stamps == ticks * 1000).all()  # plant time in us
    got = np.concatenate([first[:, 5:].copy().view("<f8"), second[:, 1:].copy().view("<f8")], axis=1)
    rows = np.array([[s.t, *(s.y[n] for n in names)] for s in states], dtype=np.float64)
    want = rows[:, columns]
    assert got.shape == want.shape
    assert (got.view(np.uint64) == want.view(np.uint64)).all()  # bit for bit


def _fuzz_packet(rng: random.Random, meas_size: int) -> bytes:
    """One command: random bytes, a real command with random fields, or one aimed at an edge."""
    kind = rng.random()
    if kind < 0.25:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 40)))
    if kind < 0.5:  # a known command with random fields and a random length (too short, too long)
        cmd = rng.choice([c for c in range(0xC0, 0x100)])
        return bytes((cmd, *(rng.randrange(256) for _ in range(rng.randrange(0, 12)))))
    if kind < 0.7:  # uploads past the end of an area, or in no area
        base = rng.choice((MEAS_BASE, EPK_BASE, CAL_BASE, 0, 0xF0000000, 0xFFFFFFF0))
        addr = base + rng.choice((0, meas_size - 8, meas_size - 1, rng.randrange(1 << 20)))
        return struct.pack("<BBBBI", C.SHORT_UPLOAD, rng.randrange(256), 0, rng.choice((0, 0, 1)), addr & 0xFFFFFFFF)
    if kind < 0.85:  # DAQ pointers and entries out of range
        cmd = rng.choice((C.SET_DAQ_PTR, C.WRITE_DAQ, C.ALLOC_ODT, C.ALLOC_ODT_ENTRY, C.START_STOP_DAQ_LIST,
                          C.SET_DAQ_LIST_MODE, C.GET_DAQ_LIST_MODE))
        return bytes((cmd, *(rng.randrange(256) for _ in range(7))))
    # writes: the measurement area (write-protected) or the calibration area with values that are no numbers
    if rng.random() < 0.5:
        return struct.pack("<BBBBId", C.SHORT_DOWNLOAD, 8, 0, 0, MEAS_BASE + 8 * rng.randrange(meas_size // 8), 1.0)
    return struct.pack("<BBBBId", C.SHORT_DOWNLOAD, 8, 0, 0, CAL_BASE + 8 * rng.randrange(4), float("nan"))


def test_fuzzed_packets_are_answered_with_errors_and_change_nothing(srv):
    from io_adapters.xcp.a2l import MAX_CTO

    rng = random.Random(37)
    connect = bytes((C.CONNECT, 0))
    with srv.client() as c:
        c.reset()
        c.step(25, inputs={"engine_torque": 150.0})
        before, params = c.get(), c.get_params()
        meas_size = 8 * (1 + len(before["y"]) + len(before["u"]))
        raw = RawXcp(xcp_port(srv))
        try:
            assert raw.request(connect)[0] == C.PID_RES
            answered = errors = 0
            for i in range(12_000):
                if i % 50 == 0:  # framing faults: a length past MAX_CTO, a truncated packet; both dropped
                    raw.send_raw(struct.pack("<HH", MAX_CTO + 1 + rng.randrange(1000), 0) + b"\x00" * 8)
                    raw.send_raw(struct.pack("<HH", 20, 0) + b"\xfd")
                packet = _fuzz_packet(rng, meas_size)
                if packet[0] == C.CONNECT and (len(packet) == 1 or packet[1] == 0):
                    packet = b"\xff\x01"  # a real CONNECT would answer like the end marker: a bad mode instead
                # the fuzzed packet, then CONNECT in the same datagram: its response marks the end of the answers
                raw.send_raw(raw.frame(packet) + raw.frame(connect))
                while True:
                    r = raw.recv()
                    if r[:1] == b"\xff" and len(r) == 8 and r[3] == MAX_CTO:
                        break
                    answered += 1
                    assert r[0] in (C.PID_RES, C.PID_ERR), r.hex()
                    if r[0] == C.PID_ERR:
                        errors += 1
                        assert r[1] in C.ERROR_NAMES, r.hex()
            # a DAQ list the fuzzer may have started is stopped by DISCONNECT
            assert raw.request(bytes((C.DISCONNECT,)))[0] == C.PID_RES
        finally:
            raw.close()
        assert answered > 10_000 and errors > 5_000
        after = c.get()
        assert {k: after[k] for k in ("tick", "t", "u", "y")} == {k: before[k] for k in ("tick", "t", "u", "y")}
        assert c.get_params() == params
        status = c.status()["adapters"]["xcp"]
        assert status["oversized"] >= 240 and status["truncated"] >= 240 and status["thread_errors"] == 0
        with pyxcp_master(srv) as x:  # still serving
            assert x.getStatus().sessionStatus.daqRunning is False
            with pytest.raises(XcpResponseError) as exc:
                x.shortUpload(16, MEAS_BASE + meas_size - 8, 0)  # past the end of the measurement area
            assert error_code(exc.value) == C.ERR_OUT_OF_RANGE


def test_daq_over_udp_on_the_10ms_event(srv):
    with srv.client() as c:
        c.reset()
        policy = DaqFrames()
        with pyxcp_master(srv, "UDP", policy) as x:
            info = x.getDaqEventInfo(1)
            assert (info.eventChannelTimeCycle, int(info.eventChannelTimeUnit)) == (100, 5)  # 100 x 100 us
            x.freeDaq()
            x.allocDaq(1)
            x.allocOdt(0, 1)
            x.allocOdtEntry(0, 0, 2)
            x.setDaqPtr(0, 0, 0)
            x.writeDaqMultiple([{"bitOffset": 0xFF, "size": 8, "address": MEAS_BASE, "addressExt": 0},
                                {"bitOffset": 0xFF, "size": 8, "address": MEAS_BASE + 8, "addressExt": 0}])
            x.setDaqListMode(C.DAQ_MODE_TIMESTAMP, 0, 1, 1, 0)
            assert x.startStopDaqList(1, 0).firstPid == 0
            steps = [c.step(10) for _ in range(50)]
            policy.wait_for(50)
            with pytest.raises(XcpResponseError) as exc:  # no new allocation while a list runs
                x.allocDaq(1)
            assert error_code(exc.value) == C.ERR_DAQ_ACTIVE
            x.startStopDaqList(0, 0)
    frames = policy.frames
    assert len(frames) == 50
    stamps = [struct.unpack_from("<I", f, 1)[0] for f in frames]
    assert stamps == [10_000 * k for k in range(1, 51)]
    assert [struct.unpack_from("<dd", f, 5) for f in frames] == [(r.t, r.y["w_1"]) for r in steps]
