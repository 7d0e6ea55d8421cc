"""The msgpack codecs: exact bytes of state messages, and every kind of bad command rejected with its reason."""

from __future__ import annotations

import math
import struct

import msgpack
import numpy as np
import pytest

from io_adapters.protocol import (COMMAND_ERRORS, PROTOCOL_VERSION, InputValidator, ProtocolError, RejectLog,
                                  schema_id)
from io_adapters.zmq.codec import CommandDecoder, StateEncoder, decode_request
from plant_models.errors import InputError
from plant_models.plant import Signal

INPUTS = (
    Signal("p_c1", "bar", 0.0, 40.0, 0.0),
    Signal("engine_torque", "N m", -1000.0, 5000.0, 0.0),
    Signal("gear_select", "-", 0, 6, 0, integer=True, allowed=(0, 1, 3, 5)),
)


def test_state_message_bytes_are_exactly_the_documented_msgpack():
    enc = StateEncoder(["w_1", "gear"], "map")
    y = np.array([104.5, 3.0])
    raw = bytes(enc.encode(seq=7, tick=123, t=0.123, ack=42, wd=True, status=2, y=y))
    f64 = lambda x: b"\xcb" + struct.pack(">d", x)  # noqa: E731
    u64 = lambda x: b"\xcf" + struct.pack(">Q", x)  # noqa: E731
    expected = (b"\x8a" + b"\xa1v\x01" + b"\xa3seq" + u64(7) + b"\xa4tick" + u64(123) + b"\xa1t" + f64(0.123)
                + b"\xa3ack" + u64(42) + b"\xa2wd\xc3" + b"\xa2st\xd3" + struct.pack(">q", 2)
                + b"\xa6faults" + u64(0)
                + b"\xa6schema\xce" + struct.pack(">I", schema_id(["w_1", "gear"]))
                + b"\xa1y\x82" + b"\xa3w_1" + f64(104.5) + b"\xa4gear" + f64(3.0))
    assert raw == expected
    msg = msgpack.unpackb(raw, raw=False)
    assert msg == {"v": PROTOCOL_VERSION, "seq": 7, "tick": 123, "t": 0.123, "ack": 42, "wd": True, "st": 2,
                   "faults": 0, "schema": schema_id(["w_1", "gear"]), "y": {"w_1": 104.5, "gear": 3.0}}


@pytest.mark.parametrize("fmt", ["map", "array"])
def test_state_values_round_trip_bit_for_bit_in_place(fmt):
    names = [f"out_{k}" for k in range(40)]  # more than 15 entries: map16/array16 headers
    enc = StateEncoder(names, fmt)
    rng = np.random.default_rng(1)
    for seq in range(1, 4):  # the same template is rewritten in place
        y = rng.standard_normal(40) * 10.0 ** rng.integers(-300, 300, 40)
        y[0], y[1] = -0.0, 5e-324
        msg = msgpack.unpackb(bytes(enc.encode(seq, 2 ** 63 + seq, 1e-3 * seq, 0, False, -5, y)), raw=False)
        vals = list(msg["y"].values()) if fmt == "map" else msg["y"]
        if fmt == "map":
            assert list(msg["y"]) == names
        assert np.array_equal(np.array(vals).view(np.int64), y.view(np.int64))  # bit for bit, incl. -0.0
        assert msg["seq"] == seq and msg["tick"] == 2 ** 63 + seq and msg["st"] == -5 and msg["wd"] is False
    assert enc.size == len(bytes(enc.view))


@pytest.mark.parametrize("fmt", ["map", "array"])
def test_a_state_ring_row_packs_to_the_same_bytes_as_the_values_it_holds(fmt):
    """The server packs state messages from ring rows (encode_row): byte for byte what encode makes of the values."""
    names = [f"out_{k}" for k in range(20)]
    rng = np.random.default_rng(3)
    ints = rng.integers(-2 ** 63, 2 ** 63 - 1, size=(4, 12), dtype=np.int64)
    floats = rng.standard_normal((4, 25)) * 10.0 ** rng.integers(-300, 300, (4, 25))
    floats[1, 3], floats[2, 4] = -0.0, np.nan
    ints[:, 1] = [0, 7, 2 ** 62, 123]  # tick
    ints[:, 5] = [0, 1, 0, 5]  # watchdog flag: any non-zero is true
    ints[:, 9] = [0, -1, 2 ** 63 - 1, -2 ** 63]  # ack: uint64 bits (2**64 - 1, ..., 2**63)
    ints[:, 7] = [0, 3, 1, 32]  # active faults
    by_row, by_value = StateEncoder(names, fmt), StateEncoder(names, fmt)
    by_row.bind_columns(c_tick=1, c_wd=5, c_st=6, c_ack=9, f_t=0, f_y=2, c_faults=7)
    for j in range(4):
        seq = 1 + j * 2 ** 61
        a = bytes(by_row.encode_row(seq, ints, floats, j))
        b = bytes(by_value.encode(seq, int(ints[j, 1]), float(floats[j, 0]), int(ints[j, 9]) & (2 ** 64 - 1),
                                  bool(ints[j, 5]), int(ints[j, 6]), floats[j, 2:22], int(ints[j, 7])))
        assert a == b, j
    assert msgpack.unpackb(a)["ack"] == 2 ** 63


def test_non_finite_outputs_are_encoded_not_dropped():
    enc = StateEncoder(["a", "b", "c"], "array")
    msg = msgpack.unpackb(bytes(enc.encode(1, 1, 0.0, 0, False, 16, np.array([np.nan, np.inf, -np.inf]))))
    a, b, c = msg["y"]
    assert math.isnan(a) and b == math.inf and c == -math.inf


def _cmd(obj) -> bytes:
    return msgpack.packb(obj, use_bin_type=True)


@pytest.mark.parametrize("payload, reason, message", [
    (b"\xc1\x00\xff", "malformed", "not valid msgpack (FormatError)"),
    (b"\x92\x01", "malformed", "not valid msgpack (ValueError)"),
    (_cmd([1, 2]), "bad_message", "a command must be a map, got array"),
    (_cmd({"set": {"p_c1": 1.0}}), "bad_version", "protocol version None is not supported (this server speaks 1)"),
    (_cmd({"v": 2, "set": {}}), "bad_version", "protocol version 2 is not supported (this server speaks 1)"),
    (_cmd({"v": True, "set": {}}), "bad_version", "protocol version True is not supported (this server speaks 1)"),
    (_cmd({"v": 1, "set": {}, "typo": 1}), "bad_message", "unknown key 'typo' in a command (keys: v, seq, set)"),
    (_cmd({"v": 1}), "bad_message", "a command needs a 'set' map of signal name to value"),
    (_cmd({"v": 1, "seq": -1, "set": {}}), "bad_message", "'seq' must be an unsigned integer, got int -1"),
    (_cmd({"v": 1, "set": [1.0]}), "bad_message", "'set' must be a map of signal name to number, got array"),
    (_cmd({"v": 1, "set": {"p_c1": "12"}}), "wrong_type", "p_c1: expected a number, got string"),
    (_cmd({"v": 1, "set": {"p_c1": True}}), "wrong_type", "p_c1: expected a number, got boolean"),
    (_cmd({"v": 1, "set": {"p_c1": None}}), "wrong_type", "p_c1: expected a number, got nil"),
    (_cmd({"v": 1, "set": {"p_c1": [1.0]}}), "wrong_type", "p_c1: expected a number, got array"),
    (_cmd({"v": 1, "set": {"p_c9": 1.0}}), "unknown_signal",
     "no input signal 'p_c9'; inputs are p_c1, engine_torque, gear_select"),
    (_cmd({"v": 1, "set": {"p_c1": float("nan")}}), "not_finite", "p_c1: not finite (nan)"),
    (_cmd({"v": 1, "set": {"engine_torque": float("-inf")}}), "not_finite", "engine_torque: not finite (-inf)"),
    (_cmd({"v": 1, "set": {"p_c1": 40.5}}), "out_of_range", "p_c1: 40.5 outside [0, 40] bar"),
    (_cmd({"v": 1, "set": {"p_c1": -1e-9}}), "out_of_range", "p_c1: -1e-09 outside [0, 40] bar"),
    (_cmd({"v": 1, "set": {"p_c1": 2 ** 64 - 1}}), "out_of_range",
     "p_c1: 18446744073709551615 outside [0, 40] bar"),
    (_cmd({"v": 1, "set": {"gear_select": 1.5}}), "not_allowed", "gear_select: must be a whole number, got 1.5"),
    (_cmd({"v": 1, "set": {"gear_select": 2}}), "not_allowed", "gear_select: 2 is not one of 0, 1, 3, 5"),
    (b"\x81\xa1v\x01" + b"\x00" * 5000, "oversized", "message of 5004 bytes exceeds the limit of 4096"),
])
def test_every_bad_command_is_rejected_with_its_reason(payload, reason, message):
    dec = CommandDecoder(INPUTS, max_bytes=4096)
    with pytest.raises(COMMAND_ERRORS) as ei:
        dec.decode(payload)
    assert (ei.value.reason, ei.value.message) == (reason, message)
    # a bad value is the plant's typed input error, a bad message the protocol's
    assert isinstance(ei.value, InputError if reason in ("wrong_type", "not_finite", "out_of_range", "not_allowed")
                      else ProtocolError)
    assert dec.validator.count == 0  # nothing waits to be applied


def test_a_command_with_one_bad_signal_applies_nothing():
    dec = CommandDecoder(INPUTS, max_bytes=4096)
    u = np.array([1.0, 2.0, 3.0])
    rate = np.array([0.5, 0.5, 0.5])
    with pytest.raises(InputError):
        dec.decode(_cmd({"v": 1, "seq": 9, "set": {"p_c1": 12.0, "engine_torque": 1e9}}))
    assert dec.validator.count == 0
    dec.validator.apply(u, rate)
    assert u.tolist() == [1.0, 2.0, 3.0] and rate.tolist() == [0.5, 0.5, 0.5]
    dec.decode(_cmd({"v": 1, "seq": 10, "set": {"p_c1": 12, "gear_select": 3}}))
    dec.validator.apply(u, rate)
    assert u.tolist() == [12.0, 2.0, 3.0] and rate.tolist() == [0.0, 0.5, 0.0] and dec.seq == 10


def test_control_requests_decode_or_raise_with_reason():
    assert decode_request(_cmd({"v": 1, "cmd": "status", "id": 3}), 1024)["cmd"] == "status"
    for payload, reason in ((b"\xc1", "malformed"), (_cmd({"v": 1}), "bad_message"), (_cmd("status"), "bad_message"),
                            (_cmd({"v": 7, "cmd": "x"}), "bad_version"), (b"\x90" * 2000, "oversized")):
        with pytest.raises(ProtocolError) as ei:
            decode_request(payload, 1024)
        assert ei.value.reason == reason


def test_reject_log_counts_everything_and_logs_rate_limited(caplog):
    import logging

    log = logging.getLogger("test.rejects")
    rl = RejectLog(log, "cmd", max_per_s=3)
    for k in range(10):
        rl.reject("out_of_range", f"value {k}")
    with caplog.at_level(logging.WARNING, logger="test.rejects"):
        rl.flush()
    assert rl.total == 10 and rl.counts["out_of_range"] == 10
    assert [r.getMessage() for r in caplog.records] == [f"cmd rejected: out_of_range: value {k}" for k in range(3)]
    assert rl.status()["last"][-1] == "out_of_range: value 9"


def test_validator_keeps_the_last_value_of_a_name_and_rejects_non_string_names():
    v = InputValidator(INPUTS)
    with pytest.raises(ProtocolError) as ei:
        v.validate({1: 2.0})
    assert (ei.value.reason, ei.value.message) == ("bad_message", "signal names must be strings, got int")
    v.validate({"p_c1": 1.0, "engine_torque": -3})
    assert v.as_dict() == {"p_c1": 1.0, "engine_torque": -3.0}


def _repeated_map(name: str, value: float, n: int) -> bytes:
    """A msgpack map of ``n`` entries that all name ``name`` (map16 header): a dict keeps one."""
    return b"\xde" + n.to_bytes(2, "big") + (msgpack.packb(name) + msgpack.packb(value)) * n


TOO_MANY = ("bad_message", "more than 256 entries in a map or array (257 exceeds max_map_len(256))")


def test_the_map_size_rule_counts_entries_as_sent_on_both_sockets():
    """257 entries naming one input are 257 entries, in a command and in a control request."""
    head = msgpack.packb("v") + msgpack.packb(1) + msgpack.packb("seq") + msgpack.packb(2) + msgpack.packb("set")
    dec = CommandDecoder(INPUTS, max_bytes=4096)
    dec.decode(b"\x83" + head + _repeated_map("p_c1", 5.0, 256))  # the limit itself is accepted
    assert dec.validator.count == 1 and dec.validator.val[0] == 5.0
    with pytest.raises(ProtocolError) as ei:
        dec.decode(b"\x83" + head + _repeated_map("p_c1", 6.0, 257))
    assert (ei.value.reason, ei.value.message) == TOO_MANY
    # the command map itself: 257 entries of which most repeat a key
    with pytest.raises(ProtocolError) as ei:
        dec.decode(b"\xde" + (257).to_bytes(2, "big") + (msgpack.packb("seq") + msgpack.packb(1)) * 255 + head[:3]
                   + msgpack.packb("set") + b"\x80")
    assert (ei.value.reason, ei.value.message) == TOO_MANY
    # control requests: set's, step's set and reset's inputs, decoded by the same step
    for cmd, key in (("set", "set"), ("step", "set"), ("reset", "inputs")):
        body = (msgpack.packb("v") + msgpack.packb(1) + msgpack.packb("cmd") + msgpack.packb(cmd)
                + msgpack.packb(key))
        assert decode_request(b"\x83" + body + _repeated_map("p_c1", 5.0, 256), 1 << 20)[key] == {"p_c1": 5.0}
        with pytest.raises(ProtocolError) as ei:
            decode_request(b"\x83" + body + _repeated_map("p_c1", 5.0, 257), 1 << 20)
        assert (ei.value.reason, ei.value.message) == TOO_MANY
    # arrays are not limited in a request (a scenario's points), only in a command
    long = {"v": 1, "cmd": "get_params", "names": ["x"] * 1000}
    assert decode_request(msgpack.packb(long), 1 << 20)["names"] == ["x"] * 1000
