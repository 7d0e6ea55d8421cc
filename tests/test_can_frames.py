"""The compiled CAN frame codec against cantools, and the CRC against published check values.

cantools is the reference: every frame the compiled packer builds must be
byte-for-byte what ``Message.encode`` builds from the same values, and
every frame must unpack to what ``Message.decode`` returns, for Intel and
Motorola signals, signed and unsigned, crossing byte boundaries, of 1 to 52
bits (the widest a float64 carries exactly), in classic and 64-byte FD frames.
"""

from __future__ import annotations

import cantools
import numpy as np
import pytest

from io_adapters.can import e2e as can_e2e
from io_adapters.can import frames, layouts

TEST_DBC = """VERSION ""
NS_ :
BS_:
BU_: A B
BO_ 291 Mixed: 8 A
 SG_ MotoA : 7|12@0+ (1,0) [0|4095] "" B
 SG_ Flag : 8|1@1+ (1,0) [0|1] "" B
 SG_ IntelSigned : 17|10@1- (0.5,-3) [-259|252.5] "rpm" B
 SG_ MotoSigned : 39|13@0- (0.1,2) [-407.6|411.5] "" B
 SG_ IntelTail : 48|16@1+ (0.01,-100) [-100|555.35] "" B
BO_ 2566844926 Extended: 8 A
 SG_ Wide : 0|52@1+ (1,0) [0|0] "" B
 SG_ Top : 63|1@1+ (1,0) [0|0] "" B
BO_ 1110 Fd64: 64 A
 SG_ Lo : 0|16@1- (1,0) [0|0] "" B
 SG_ Far : 500|11@1+ (2,1) [0|0] "" B
 SG_ MotoFar : 263|40@0- (1,0) [0|0] "" B
"""


def _layouts(db, source=frames.SOURCE_PLANT):
    """Every signal mapped to the value of the same index (all signals of all messages in order)."""
    msgs = []
    k = 0
    for m in db.messages:
        sigs = []
        for s in m.signals:
            lo, hi = layouts.raw_bounds(s.length, s.is_signed)
            sigs.append(layouts.SignalLayout(s.name, s.start, s.length, s.byte_order == "little_endian",
                                             s.is_signed, float(s.scale), float(s.offset), lo, hi, target=k,
                                             source=source))
            k += 1
        msgs.append(layouts.MessageLayout(m.name, m.frame_id, m.is_extended_frame, m.is_fd, m.length, sigs,
                                          period_ticks=1, timeout_ticks=10))
    return layouts.compile_layout(msgs)


def _codec(rx, tx, n_values):
    """A codec on a stand-in plant data buffer: inputs at 0, their rates, then outputs at 2 * n_values."""
    return frames.FrameCodec(rx, tx, n_values, 0, 2 * n_values), np.zeros(3 * n_values)


NO_LOOP = np.zeros(4, dtype=np.int64)  # the loop's tick_info: no watchdog trip, no scenario, no overruns


@pytest.fixture(scope="module")
def db():
    return cantools.database.load_string(TEST_DBC, database_format="dbc", strict=True)


def test_crc8_sae_j1850_check_values():
    """AUTOSAR's CRC-8 SAE J1850 test vectors (SWS CRC Library) and the catalogue check value 0x4B."""
    vectors = {"00000000": 0x59, "F20183": 0x37, "0FAA0055": 0x79, "00FF5511": 0xB8,
               "332255AABBCCDDEEFF": 0xCB, "926B55": 0x8C, "FFFFFFFF": 0x74, b"123456789".hex(): 0x4B}
    for hexdata, crc in vectors.items():
        data = bytes.fromhex(hexdata)
        arr = np.frombuffer(data, dtype=np.uint8)
        assert frames.crc8_j1850(arr, len(data), -1, -1, frames.CRC8_J1850_TABLE) == crc
        assert can_e2e.crc8_sae_j1850(data) == crc


def test_crc_variant_of_autosar_e2e_profile_1():
    """E2E profile 1 chains Crc_CalculateCRC8 so that the CRC starts at 0x00 with no final XOR.

    Check value 0x37 (CRC-8/GSM-A parameters); the profile 1 vectors (data ID 0x123, DataIDMode BOTH,
    eight zero bytes with the counter 0 or 1 in byte 1) are those of the autosar-e2e package's tests.
    """
    init, xorout = frames.CRC_VARIANTS["autosar_p01"]
    check = np.frombuffer(b"123456789", dtype=np.uint8)
    assert frames.crc8_j1850(check, 9, -1, -1, frames.CRC8_J1850_TABLE, init, xorout) == 0x37
    for counter, crc in ((0, 0xCC), (1, 0x91)):
        frame = bytes([0, counter, 0, 0, 0, 0, 0, 0])
        arr = np.frombuffer(frame, dtype=np.uint8)
        assert frames.crc8_j1850(arr, 8, 0, 0x123, frames.CRC8_J1850_TABLE, init, xorout) == crc
        assert can_e2e.crc8_sae_j1850(frame, 0x123, 0, init, xorout) == crc


def test_crc_covers_the_data_id_and_skips_the_crc_byte():
    payload = bytes([0x00, 0x1A, 0x40, 0x06, 0x00, 0x64, 0x00, 0x00])
    arr = np.frombuffer(payload, dtype=np.uint8)
    expected = can_e2e.crc8_sae_j1850(bytes([0x00, 0x01]) + payload[1:])  # data ID 0x0100 low byte first
    assert frames.crc8_j1850(arr, 8, 0, 0x0100, frames.CRC8_J1850_TABLE) == expected
    assert can_e2e.crc8_sae_j1850(payload, 0x0100, 0) == expected
    changed = bytes([0xEE]) + payload[1:]  # the CRC byte itself does not enter the CRC
    assert can_e2e.crc8_sae_j1850(changed, 0x0100, 0) == expected


def test_motorola_bit_positions_follow_the_dbc_sawtooth():
    # a 12-bit Motorola signal with start bit 7: MSB is bit 7 of byte 0, LSB bit 4 of byte 1
    pos = layouts.signal_bit_positions(7, 12, little_endian=False)
    assert pos[-1] == 7 and pos[0] == 12
    assert layouts.segments(pos) == [(1, 4, 4, 0), (0, 0, 8, 4)]
    assert layouts.segments(layouts.signal_bit_positions(12, 10, True)) == [(1, 4, 4, 0), (2, 0, 6, 4)]


def test_pack_matches_cantools_encode(db):
    tx = _layouts(db)
    codec, df = _codec(layouts.compile_layout([]), tx, tx.n_sig)
    y = df[2 * tx.n_sig:]
    rng = np.random.default_rng(7)
    for trial in range(300):
        expected = []
        s = 0
        for m in db.messages:
            values = {}
            for sig in m.signals:
                lo, hi = layouts.raw_bounds(sig.length, sig.is_signed)
                if sig.minimum is not None:
                    lo, hi = layouts.raw_range(sig.length, sig.is_signed, sig.scale, sig.offset, sig.minimum,
                                               sig.maximum)
                raw = int(rng.integers(lo, hi, endpoint=True)) if trial else hi  # first trial: the extremes
                y[s] = raw * sig.scale + sig.offset
                values[sig.name] = raw if (sig.scale == 1 and sig.offset == 0) else raw * sig.scale + sig.offset
                s += 1
            expected.append(m.encode(values, strict=False))
        n = frames.tx_pack(trial, codec.ci, codec.cf, codec.cb, df, NO_LOOP)
        assert n == tx.n_msg and list(codec.due[:n]) == list(range(n)) and codec.saturated.sum() == 0
        for k, m in enumerate(db.messages):
            assert codec.payload(k) == expected[k], (m.name, trial)


def test_unpack_matches_cantools_decode(db):
    rx = _layouts(db)
    codec, df = _codec(rx, layouts.compile_layout([]), rx.n_sig)
    rng = np.random.default_rng(11)
    for trial in range(300):
        for k, m in enumerate(db.messages):
            data = rng.integers(0, 256, m.length, dtype=np.uint8).tobytes()
            assert codec.receive(k, data) == frames.RX_OK
            ref = m.decode(data, decode_choices=False, scaling=True)
            s0 = rx.M[k, frames.M_SIG0]
            for j, sig in enumerate(m.signals):
                want = float(ref[sig.name])
                assert codec.values[s0 + j] == pytest.approx(want, rel=1e-12, abs=1e-9), (m.name, sig.name)
        # the tick takes the values into the plant inputs
        frames.rx_apply(trial, True, True, codec.ci, codec.cf, df)
        assert np.array_equal(df[:rx.n_sig], codec.values)
    assert codec.counts[:, frames.RX_OK].tolist() == [300] * rx.n_msg


def test_tx_pack_clamps_to_the_dbc_range_and_counts_it(db):
    m = db.get_message_by_name("Mixed")
    tx = _layouts(cantools.database.load_string(TEST_DBC.split("BO_ 2566844926")[0], database_format="dbc"))
    sig = m.get_signal_by_name("IntelSigned")  # [-259, 252.5] rpm at 0.5 rpm/bit, offset -3
    j = [s.name for s in m.signals].index("IntelSigned")
    tx.S[j, frames.S_RAW_LO], tx.S[j, frames.S_RAW_HI] = layouts.raw_range(
        sig.length, sig.is_signed, sig.scale, sig.offset, sig.minimum, sig.maximum)
    codec, df = _codec(layouts.compile_layout([]), tx, tx.n_sig)
    for value, expect, n_sat in ((1e6, 252.5, 1), (-1e6, -259.0, 2), (np.nan, -3.0, 3), (10.2, 10.0, 3)):
        df[2 * tx.n_sig + j] = value
        frames.tx_pack(0, codec.ci, codec.cf, codec.cb, df, NO_LOOP)
        got = m.decode(codec.payload(0), decode_choices=False)["IntelSigned"]
        assert got == expect and codec.saturated[0] == n_sat
