"""The ``mcu`` backend: its wire protocol byte by byte, the host against the device emulator on a
pseudo-terminal, the counted errors and the safe state, and 10 000 fuzzed frames."""

import os
import random
import struct
import time
import tty

import numpy as np
import pytest
from crccheck.crc import Crc16CcittFalse

from devices_layout import bench_layout
from io_adapters.devices import PIN_OPEN, Measurements, Targets, create_device
from io_adapters.devices.mcu import McuEmulator
from io_adapters.devices.wire import (FLAG_SAFE, T_MEASUREMENTS, T_TARGETS, FrameParser, PayloadError, crc16_ccitt,
                                      decode_targets, encode_measurements, encode_targets, frame, max_frame,
                                      measurements_length)


def test_crc_is_ccitt_false():
    data = bytes(range(256)) * 3
    assert crc16_ccitt(b"123456789") == 0x29B1 == Crc16CcittFalse.calc(b"123456789")
    assert crc16_ccitt(data) == Crc16CcittFalse.calc(data)


def test_frame_bytes():
    buf = bytearray(16)
    buf[5:8] = b"\x01\x02\x03"
    n = frame(buf, 0x81, 258, 3)
    crc = Crc16CcittFalse.calc(bytes([0x03, 0x00, 0x81, 0x02, 1, 2, 3]))
    assert bytes(buf[:n]) == bytes([0xA5, 0x03, 0x00, 0x81, 0x02, 1, 2, 3, crc >> 8, crc & 0xFF])


def test_targets_round_trip_bit_exact():
    layout = bench_layout()
    t, back = Targets(layout), Targets(layout)
    rng = np.random.default_rng(1)
    t.edge_ns[0, :10] = np.sort(rng.integers(0, 1_000_000, 10))
    t.edge_count[0] = 10
    t.pulse_mode[1] = 1
    t.frequency_Hz[1] = 2345.678
    t.phase_turn[1] = 0.25
    t.resistance_ohm[0] = 3456.789
    t.digital[:] = [1, 0, 1, 1]
    t.analog_V[0] = 13.5
    t.pin_fault[1] = PIN_OPEN
    buf = bytearray(max_frame(layout))
    n = encode_targets(buf, 7, 123456, FLAG_SAFE, t)
    assert buf[0] == 0xA5 and buf[3] == T_TARGETS and buf[4] == 7
    assert struct.unpack_from("<H", buf, 1)[0] == n - 7
    assert decode_targets(memoryview(buf)[5:n - 2], back) == (123456, FLAG_SAFE)
    assert np.array_equal(back.edge_ns[0, :10], t.edge_ns[0, :10]) and back.edge_count[0] == 10
    assert back.frequency_Hz[1] == 2345.678 and back.phase_turn[1] == 0.25
    assert back.resistance_ohm[0] == 3456.789 and list(back.digital) == [1, 0, 1, 1]
    assert back.analog_V[0] == 13.5 and back.pin_fault[1] == PIN_OPEN


class Bench:
    """The host on a pseudo-terminal's master, the emulator on its slave."""

    def __init__(self, **options):
        self.layout = bench_layout()
        self.master, self.slave = os.openpty()
        tty.setraw(self.slave)
        self.emu = McuEmulator(self.slave, self.layout).start()
        self.host = create_device("mcu", "front-end", self.layout, {"fd": self.master, **options})
        self.host.open()
        self.targets = self.host.new_targets()
        self.tick = 0

    def step(self, expect_answer=True):
        """One tick: send targets, wait (test only) for the emulator, then read the measurements."""
        applied, frames_in = self.emu.targets_applied, self.host.counters["frames_in"]
        self.host.write_targets(self.tick, self.targets)
        self.tick += 1
        deadline = time.monotonic() + 60.0  # a bound for a broken emulator, not a timing check
        while self.emu.targets_applied == applied and time.monotonic() < deadline:
            time.sleep(0.001)
        assert self.emu.targets_applied == applied + 1
        if expect_answer:
            while self.host.counters["frames_in"] == frames_in and time.monotonic() < deadline:
                time.sleep(0.001)
        else:
            time.sleep(0.02)
        return self.host.read_measurements()

    def close(self):
        self.host.close()
        self.emu.stop()
        os.close(self.master)
        os.close(self.slave)


@pytest.fixture
def bench():
    b = Bench(stall_ticks=3, recover_frames=3)
    yield b
    b.close()


def test_round_trip_through_the_emulator(bench):
    # safe until three good frames: the emulator sees the safe values, the host reads currents 0
    bench.emu.sim.tcu_drive_pwm(4, 0.5, 0.75)
    bench.targets.edge_ns[0, :2] = [1000, 2000]
    bench.targets.edge_count[0] = 2
    for _ in range(2):
        m = bench.step()
        assert m.safe and m.current_A[4] == 0.0 and len(bench.emu.sim.tcu_edges(0)) == 0
    m = bench.step()
    assert not m.safe
    for k in range(20):
        edges = np.arange(1, 11, dtype=np.int64) * 99_999 + k
        bench.targets.edge_ns[2, :10] = edges
        bench.targets.edge_count[2] = 10
        bench.targets.resistance_ohm[0] = 250.0 + k
        bench.emu.sim.tcu_drive_pwm(4, 0.5, 0.75 + k * 1e-3)
        bench.emu.sim.tcu_drive_digital(0, k % 2)
        m = bench.step()
        assert np.array_equal(bench.emu.sim.tcu_edges(2), edges)
        assert bench.emu.sim.tcu_resistance_ohm(0) == 250.0 + k
        assert m.tick == bench.tick and m.edges_out[2] == 10 and m.digital[0] == k % 2
        assert m.duty[4] == round(0.5 * 65535) / 65535 and m.current_A[4] == round((0.75 + k * 1e-3) * 1e6) / 1e6
    s = bench.host.status()
    assert (s["crc_errors"], s["lost_frames"], s["stalls"], s["bad_frames"], s["tx_dropped"]) == (0, 0, 0, 0, 0)
    assert s["safe"] is False and s["frames_in"] == 23


def _recover(bench):
    """Three good frames lift the safe state; the fourth tick sends the real targets again."""
    for _ in range(3):
        m = bench.step()
    assert not m.safe and m.current_A[0] == 0.5
    return bench.step()


def test_crc_error_is_counted_and_answered_by_the_safe_state(bench):
    bench.emu.sim.tcu_drive_pwm(0, 0.3, 0.5)
    bench.targets.digital[2] = 1
    _recover(bench)
    assert bench.emu.sim.tcu_digital(2) == 1
    bench.emu.corrupt_answers = 1
    m = bench.step(expect_answer=False)
    assert bench.host.counters["crc_errors"] == 1 and m.safe and m.current_A[0] == 0.0 and m.duty[0] == 0.0
    m = bench.step()  # the outputs go to their safe values
    assert m.safe and bench.emu.sim.tcu_digital(2) == 0 and bench.emu.status & FLAG_SAFE
    _recover(bench)
    assert bench.emu.sim.tcu_digital(2) == 1
    assert bench.host.counters["safe_entries"] == 1 and bench.host.counters["lost_frames"] == 0


def test_lost_frame_is_counted_and_answered_by_the_safe_state(bench):
    bench.emu.sim.tcu_drive_pwm(0, 0.3, 0.5)
    _recover(bench)
    bench.emu.drop_answers = 2
    bench.step(expect_answer=False)
    bench.step(expect_answer=False)
    m = bench.step()
    assert bench.host.counters["lost_frames"] == 2 and m.safe and m.current_A[0] == 0.0
    _recover(bench)
    assert bench.host.counters["crc_errors"] == 0 and bench.host.counters["stalls"] == 0


def test_stalled_device_is_counted_and_answered_by_the_safe_state(bench):
    bench.emu.sim.tcu_drive_pwm(0, 0.3, 0.5)
    _recover(bench)
    bench.emu.stalled = True
    for k in range(2):
        m = bench.step(expect_answer=False)
        assert not m.safe and m.current_A[0] == 0.5  # the last value holds for fewer than stall_ticks ticks
    m = bench.step(expect_answer=False)
    assert bench.host.counters["stalls"] == 1 and m.safe and m.current_A[0] == 0.0
    bench.step(expect_answer=False)
    assert bench.host.counters["stalls"] == 1  # one stall, however long
    bench.emu.stalled = False
    _recover(bench)


def test_the_emulator_goes_safe_by_itself_when_the_host_falls_silent():
    b = Bench(stall_ticks=3, recover_frames=1)
    try:
        b.targets.digital[1] = 1
        b.step()
        b.step()
        assert b.emu.sim.tcu_digital(1) == 1
        b.emu.watchdog_s = 0.05  # armed now: the host sends nothing more
        deadline = time.monotonic() + 10.0
        while b.emu.watchdog_trips == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert b.emu.watchdog_trips == 1 and b.emu.sim.tcu_digital(1) == 0 and b.emu.status & FLAG_SAFE
    finally:
        b.close()


def _good_measurement_frame(layout, seq, tick, current_A):
    m = Measurements(layout)
    m.tick = tick
    m.current_A[:] = current_A
    m.duty[:] = 0.5
    buf = bytearray(max_frame(layout))
    n = encode_measurements(buf, seq, 0, m)
    return bytes(buf[:n])


def _fuzzed(rng, good):
    kind = rng.randrange(5)
    if kind == 0:  # noise
        return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 80)))
    if kind == 1:  # a good frame with a few bytes changed
        f = bytearray(good)
        for _ in range(rng.randrange(1, 4)):
            f[rng.randrange(len(f))] ^= rng.randrange(1, 256)
        return bytes(f)
    if kind == 2:  # a well-formed frame of another type or length
        length = rng.randrange(0, 120)
        buf = bytearray(5 + length + 2)
        buf[5:5 + length] = bytes(rng.randrange(256) for _ in range(length))
        ftype = rng.choice([0x00, 0x01, 0x02, 0x7F, 0xFF, T_MEASUREMENTS])
        if ftype == T_MEASUREMENTS and length == len(good) - 7:
            length -= 1
        n = frame(buf, ftype, rng.randrange(256), length)
        return bytes(buf[:n])
    if kind == 3:  # a truncated good frame
        return good[: rng.randrange(1, len(good))]
    return bytes([0xA5, 0xFF, 0xFF]) + good[3:]  # an absurd length


def test_ten_thousand_fuzzed_frames_change_nothing_and_crash_nothing():
    layout = bench_layout()
    host = create_device("mcu", "front-end", layout, {"fd": -1, "recover_frames": 3})
    for seq in range(3):
        host.feed(_good_measurement_frame(layout, seq, seq, 0.625))
    before = host.read_measurements()
    assert not before.safe and before.current_A[0] == 0.625
    frames_in = host.counters["frames_in"]
    rng = random.Random(36)
    good = _good_measurement_frame(layout, 3, 3, 1.0)
    for _ in range(10_000):
        host.feed(_fuzzed(rng, good))
    host.feed(bytes(2 * max_frame(layout)))  # flush whatever a last fuzzed length still waits for
    assert host.counters["frames_in"] == frames_in  # not one fuzzed frame got through
    m = host.read_measurements()
    assert m.safe and m.current_A[0] == 0.0  # the CRC errors were answered by the safe state
    assert host._latest.current_A[0] == 0.625 and host._latest.tick == 2  # and the values are untouched
    assert host.counters["crc_errors"] > 1000 and host.counters["bad_frames"] > 1000
    for seq in range(3, 6):  # in sequence again: good frames still decode, and the host recovers
        host.feed(_good_measurement_frame(layout, seq, seq, 0.875))
    m = host.read_measurements()
    assert not m.safe and m.current_A[0] == 0.875 and m.tick == 5


def test_ten_thousand_fuzzed_target_payloads_leave_the_targets_untouched():
    layout = bench_layout()
    rng = random.Random(37)
    t = Targets(layout)
    t.edge_ns[0, :3] = [1, 2, 3]
    t.edge_count[0] = 3
    buf = bytearray(max_frame(layout))
    n = encode_targets(buf, 0, 9, 0, t)
    good = bytes(buf[5:n - 2])
    got = Targets(layout)
    rejected = 0
    for _ in range(10_000):
        p = bytearray(good)
        if rng.random() < 0.5:
            p = p[: rng.randrange(len(p))] + bytes(rng.randrange(256) for _ in range(rng.randrange(4)))
        else:
            for _ in range(rng.randrange(1, 3)):
                p[rng.randrange(len(p))] = rng.randrange(256)
        snapshot = {k: getattr(got, k).copy() for k in ("edge_ns", "edge_count", "resistance_ohm", "pin_fault")}
        try:
            decode_targets(bytes(p), got)
        except PayloadError:
            rejected += 1
            assert all(np.array_equal(getattr(got, k), v) for k, v in snapshot.items())
        assert got.edge_count.max() <= got.edge_ns.shape[1] and got.pin_fault.max() <= 3
    assert rejected > 3000


def test_parser_is_bounded_and_resynchronises():
    frames = []
    p = FrameParser(lambda ftype, seq, payload: frames.append((ftype, seq, bytes(payload))), max_payload=64)
    buf = bytearray(80)
    buf[5:9] = b"abcd"
    good = bytes(buf[:frame(buf, 0x81, 5, 4)])
    p.feed(b"\xa5\x00" + good[:4])  # a false start byte, then half a frame
    p.feed(good[4:] + b"\x00\xa5" + good)
    assert frames == [(0x81, 5, b"abcd")] * 2
    p.feed(bytes(10 * p.capacity))
    assert p.overflow_bytes == 9 * p.capacity and p.used < p.capacity
    assert measurements_length(bench_layout()) == 5 + 6 * 8 + 2 * 3 + 1 + 4


def test_compiled_encoder_bytes_and_non_finite_values():
    from io_adapters.devices import AnalogOut, DeviceLayout, DigitalOut, ResistanceOut
    layout = DeviceLayout((DigitalOut("a"), DigitalOut("b"), ResistanceOut("r"), AnalogOut("v")))
    t = Targets(layout)
    t.digital[:] = [0, 1]
    t.resistance_ohm[0] = float("nan")
    t.analog_V[0] = -1.5
    buf = np.zeros(max_frame(layout), dtype=np.uint8)
    n = encode_targets(buf, 300, 0x01020304, 0, t)
    payload = bytes([4, 3, 2, 1, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0b10]) + struct.pack("<i", -1_500_000)
    crc = Crc16CcittFalse.calc(bytes([len(payload), 0, T_TARGETS, 300 & 0xFF]) + payload)
    assert bytes(buf[:n]) == bytes([0xA5, len(payload), 0, T_TARGETS, 44]) + payload + bytes([crc >> 8, crc & 0xFF])
    t.analog_V[0] = float("inf")
    n = encode_targets(buf, 0, 0, 0, t)
    assert struct.unpack_from("<i", buf, n - 6)[0] == 0  # a non-finite voltage goes out as 0 V
