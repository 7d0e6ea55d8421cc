"""Multiplexed DBC messages (simple and extended multiplexing) through the compiled codec and the CAN adapter.

cantools is the reference: every page the plant sends must be byte for byte
what ``Message.encode`` builds from the values it decodes, and every frame
cantools encodes, for every multiplexer value, must reach the plant as the
values ``Message.decode`` returns.  A multiplexer value the DBC does not
define is rejected and counted; a multiplexed command is fresh only while
every page that carries a mapped signal keeps arriving.
"""

from __future__ import annotations

import itertools

import can
import cantools
import numpy as np
import pytest

from can_support import ROOT, Harness
from io_adapters.can import frames, layouts
from io_adapters.can.e2e import E2EDecoder, E2EEncoder
from io_adapters.can.message_set import _multiplexing

MUX_DBC = """VERSION ""
NS_ :
BS_:
BU_: A B
BO_ 300 Simple: 8 A
 SG_ Sel M : 0|3@1+ (1,0) [0|7] "" B
 SG_ Always : 3|5@1- (1,0) [-16|15] "" B
 SG_ P0a m0 : 8|12@1+ (0.5,-10) [0|0] "" B
 SG_ P0b m0 : 39|16@0- (0.01,0) [0|0] "" B
 SG_ P2a m2 : 8|20@1- (1,0) [0|0] "" B
 SG_ P2b m2 : 28|9@1+ (2,1) [0|0] "" B
 SG_ P5 m5 : 31|30@0+ (1,0) [0|0] "" B
BO_ 2364539904 Extended: 8 A
 SG_ Top M : 0|2@1+ (1,0) [0|3] "" B
 SG_ Sub m1M : 2|3@1+ (1,0) [0|7] "" B
 SG_ T0 m0 : 8|16@1+ (1,0) [0|0] "" B
 SG_ S3 m3 : 8|24@1- (0.1,0) [0|0] "" B
 SG_ S4 m4 : 16|40@1+ (1,0) [0|0] "" B
 SG_ S4b m4 : 5|3@1+ (1,0) [0|0] "" B
 SG_ T2 m2 : 23|8@0+ (1,0) [0|0] "" B
SG_MUL_VAL_ 2364539904 Sub Top 1-1;
SG_MUL_VAL_ 2364539904 T0 Top 0-0;
SG_MUL_VAL_ 2364539904 T2 Top 2-2;
SG_MUL_VAL_ 2364539904 S3 Sub 3-3;
SG_MUL_VAL_ 2364539904 S4 Sub 4-4;
SG_MUL_VAL_ 2364539904 S4b Sub 4-4;
"""

NO_LOOP = np.zeros(4, dtype=np.int64)


@pytest.fixture(scope="module")
def db():
    return cantools.database.load_string(MUX_DBC, database_format="dbc", strict=True)


def _layouts(db):
    """Every signal that is not a multiplexer mapped to the value of its own index; multiplexing from the DBC."""
    msgs, k = [], 0
    for m in db.messages:
        sigs = []
        for s in m.signals:
            lo, hi = layouts.raw_bounds(s.length, s.is_signed)
            sigs.append(layouts.SignalLayout(s.name, s.start, s.length, s.byte_order == "little_endian",
                                             s.is_signed, float(s.scale), float(s.offset), lo, hi))
        pages = _multiplexing(m, sigs)
        for lay in sigs:
            if not lay.mux_values:
                lay.target = k
            k += 1
        msgs.append(layouts.MessageLayout(m.name, m.frame_id, m.is_extended_frame, False, m.length, sigs,
                                          period_ticks=1, timeout_ticks=10, pages=pages))
    return layouts.compile_layout(msgs), k


def _codec(rx, tx, n):
    return frames.FrameCodec(rx, tx, n, 0, 2 * n), np.zeros(3 * n)


def _pages(msg) -> list[dict]:
    """Every page of a cantools message as {multiplexer: value}, walking its signal tree."""
    def walk(tree):
        choices = [[{}]]
        for node in tree:
            if isinstance(node, dict):
                for mux, branches in node.items():
                    choices.append([{mux: v, **p} for v, sub in sorted(branches.items()) for p in walk(sub)])
        return [dict(itertools.chain.from_iterable(d.items() for d in combo))
                for combo in itertools.product(*choices)]
    return walk(msg.signal_tree)


def _raw_random(rng, sig):
    lo, hi = layouts.raw_bounds(sig.length, sig.is_signed)
    return int(rng.integers(lo, hi, endpoint=True))


def test_the_pages_are_those_of_the_dbc(db):
    simple, ext = db.get_message_by_name("Simple"), db.get_message_by_name("Extended")
    rx, _ = _layouts(db)
    names = {m.name: [s.name for s in m.signals] for m in (simple, ext)}
    got = {m.name: [{names[m.name][i]: v for i, v in page} for page in m.pages] for m in rx.messages}
    assert got["Simple"] == [{"Sel": 0}, {"Sel": 2}, {"Sel": 5}] == _pages(simple)
    assert got["Extended"] == [{"Top": 0}, {"Top": 1, "Sub": 3}, {"Top": 1, "Sub": 4}, {"Top": 2}]
    assert sorted(map(sorted, got["Extended"])) == sorted(map(sorted, _pages(ext)))


def test_every_page_the_plant_sends_is_what_cantools_encodes(db):
    """Pages go out in turn; each frame decodes (cantools) to the plant's values and re-encodes bit for bit."""
    _, n = _layouts(db)
    tx, _ = _layouts(db)
    codec, df = _codec(layouts.compile_layout([]), tx, n)
    y = df[2 * n:]
    rng = np.random.default_rng(38)
    msgs = [db.get_message_by_name(m.name) for m in tx.messages]
    mapped = [(lay, msg.get_signal_by_name(lay.name)) for m, msg in zip(tx.messages, msgs) for lay in m.signals
              if lay.target >= 0]
    seen = {m.name: set() for m in msgs}
    for tick in range(40):
        raws = {}
        for lay, sig in mapped:
            raws[lay.name] = _raw_random(rng, sig)
            y[lay.target] = raws[lay.name] * lay.scale + lay.offset
        assert frames.tx_pack(tick, codec.ci, codec.cf, codec.cb, df, NO_LOOP) == len(msgs)
        for k, msg in enumerate(msgs):
            data = codec.payload(k)
            decoded = msg.decode(data, decode_choices=False, scaling=False)
            page = tuple((s, decoded[s]) for s in sorted(decoded) if msg.get_signal_by_name(s).is_multiplexer)
            seen[msg.name].add(page)
            expected_page = tx.messages[k].pages[tick % len(tx.messages[k].pages)]
            assert page == tuple(sorted((msg.signals[i].name, v) for i, v in expected_page))
            for name, raw in decoded.items():
                if not msg.get_signal_by_name(name).is_multiplexer:
                    assert raw == raws[name], (msg.name, name)
            assert msg.encode(decoded, scaling=False, strict=True) == data
    assert {k: len(v) for k, v in seen.items()} == {"Simple": 3, "Extended": 4}


def test_every_multiplexer_value_cantools_encodes_reaches_the_plant_exactly(db):
    rx, n = _layouts(db)
    codec, df = _codec(rx, layouts.compile_layout([]), n)
    rng = np.random.default_rng(39)
    u = df[:n]
    tick = 0
    for m, lay in enumerate(rx.messages):
        msg = db.get_message_by_name(lay.name)
        for _ in range(20):
            for page in _pages(msg):
                before = u.copy()
                values = dict(page)
                for sig in msg.signals:
                    if not sig.is_multiplexer:
                        values[sig.name] = _raw_random(rng, sig)
                data = msg.encode(values, scaling=False, strict=False)
                assert codec.receive(m, data) == frames.RX_OK
                frames.rx_apply(tick, True, True, codec.ci, codec.cf, df)
                tick += 1
                decoded = msg.decode(data, decode_choices=False, scaling=True)
                changed = set()
                for j, sl in enumerate(lay.signals):
                    if sl.target < 0:
                        continue
                    if sl.name in decoded:
                        assert u[sl.target] == decoded[sl.name], (lay.name, sl.name, page)
                        changed.add(sl.target)
                others = [t for t in range(n) if t not in changed]
                assert np.array_equal(u[others], before[others])  # the other pages' values stay as they were
    assert codec.counts[:, frames.RX_OK].sum() == 20 * 7
    assert codec.counts[:, frames.RX_MUX].sum() == 0


def test_an_unknown_multiplexer_value_is_rejected_and_counted(db):
    rx, n = _layouts(db)
    codec, df = _codec(rx, layouts.compile_layout([]), n)
    simple = db.get_message_by_name("Simple")
    good = simple.encode({"Sel": 2, "Always": 3, "P2a": -5, "P2b": 7}, scaling=False, strict=False)
    assert codec.receive(0, good) == frames.RX_OK
    values = codec.values.copy()
    for sel in (1, 3, 4, 6, 7):  # not defined in the DBC
        bad = bytes([(good[0] & ~0x07) | sel]) + good[1:]
        assert codec.receive(0, bad) == frames.RX_MUX
        assert tuple(codec.detail[:2]) == (0, sel)  # the multiplexer's row and the value it had
    assert np.array_equal(codec.values, values)  # a rejected frame posts nothing
    ext = db.get_message_by_name("Extended")
    good_ext = ext.encode({"Top": 1, "Sub": 4, "S4": 99, "S4b": 2}, scaling=False, strict=False)
    assert codec.receive(1, good_ext) == frames.RX_OK
    values = codec.values.copy()
    for top, sub in ((3, 0), (1, 0), (1, 7), (1, 2)):  # an unknown top value; unknown values of the sub-multiplexer
        bad = bytes([(good_ext[0] & ~0x1F) | top | (sub << 2)]) + good_ext[1:]
        assert codec.receive(1, bad) == frames.RX_MUX
    assert np.array_equal(codec.values, values)
    # a sub-multiplexer value is only checked where its page is present: Top = 0 does not carry Sub
    assert codec.receive(1, bytes([0x1C]) + good_ext[1:]) == frames.RX_OK
    assert codec.counts[0, frames.RX_MUX] == 5 and codec.counts[1, frames.RX_MUX] == 4
    assert codec.counts[:, frames.RX_OK].sum() == 3


# -- the shipped example on the bus -----------------------------------------------------------

MUX_SET = str(ROOT / "configs" / "io_can_powershift_mux.toml")
DB = cantools.database.load_file(str(ROOT / "configs" / "powershift_mux.dbc"))
CMD = DB.get_message_by_name("TCU_ClutchCmd")
ENG = DB.get_message_by_name("ENG_Torque")


class MuxTcu:
    def __init__(self, h: Harness):
        self.h = h
        self.bus = h.peer()
        self.cmd = E2EEncoder(CMD, "ClutchCmd_CRC", "ClutchCmd_Counter", 0x0100)
        self.eng = E2EEncoder(ENG, "EngTorque_CRC", "EngTorque_Counter", 0x0110)
        self.sent = 0

    def send(self, msg, data: bytes) -> None:
        self.bus.send(can.Message(arbitration_id=msg.frame_id, is_extended_id=False, data=data))
        self.sent += 1
        self.h.wait_frames(self.sent)

    def page(self, group: int, pressures: list[float]) -> bytes:
        first = 1 + 4 * group
        vals = {"ClutchGroup": group, **{f"PressureCmd_C{first + i}": p for i, p in enumerate(pressures)}}
        return self.cmd.encode(vals)


@pytest.fixture
def rig():
    h = Harness(options={"message_set": MUX_SET}, mode="lockstep")
    tcu = MuxTcu(h)
    yield h, tcu
    tcu.bus.shutdown()
    h.close()


def test_the_shipped_example_commands_the_plant_page_by_page_and_counts_unknown_pages(rig):
    h, tcu = rig
    p0 = [12.5, 0.0, 16.0, 0.25]
    p1 = [0.0, 3.5, 0.0, 40.0]
    tcu.send(CMD, tcu.page(0, p0))
    h.run(1)
    u = h.plant.input_dict()
    assert [u[f"p_c{i}"] for i in range(1, 5)] == pytest.approx(p0, abs=1e-9)  # bar, as the plant takes them
    assert [u[f"p_c{i}"] for i in range(5, 9)] == [0.0] * 4
    tcu.send(CMD, tcu.page(1, p1))
    h.run(1)
    u = h.plant.input_dict()
    assert [u[f"p_c{i}"] for i in range(1, 9)] == pytest.approx(p0 + p1, abs=1e-9)
    data = bytearray(tcu.page(0, p0))
    data[1] = (data[1] & 0x0F) | (9 << 4)  # ClutchGroup 9: not in the DBC; counter and CRC stay right
    from io_adapters.can.e2e import crc8_sae_j1850
    data[0] = crc8_sae_j1850(bytes(data), 0x0100, 0)
    tcu.send(CMD, bytes(data))
    h.run(1)
    st = h.adapter.status()
    assert st["rx"]["rejected"]["unknown_mux"] == 1
    assert st["rejected"]["by_reason"]["unknown_mux"] == 1
    assert st["rx"]["messages"]["TCU_ClutchCmd"]["unknown_mux"] == 1
    assert "ClutchGroup = 9" in st["rx"]["last_reject"]
    assert st["rx"]["accepted"] == 2
    # the count goes out too: HIL_Info, InfoPage 1, DiagGroup 2 (pages every 50 ms in turn: 0, (1, 0), (1, 1), (1, 2))
    info = DB.get_message_by_name("HIL_Info")
    rx = h.peer()
    try:
        h.run(200)
        pages = [info.decode(bytes(m.data)) for m in iter(lambda: rx.recv(0.05), None) if m.arbitration_id == 0x300]
    finally:
        rx.shutdown()
    assert [p["UnknownMux"] for p in pages if p["InfoPage"] == 1 and p["DiagGroup"] == 2] == [1]


def test_a_multiplexed_command_is_fresh_only_while_every_page_arrives(rig):
    h, tcu = rig

    def cycle(pages, eng=True):
        for k in range(10):  # 10 ms: each 5 ms one command page, each 10 ms the engine torque
            if k % 5 == 0 and pages:
                g = pages[(k // 5) % len(pages)]
                tcu.send(CMD, tcu.page(g, [1.0] * 4))
            if k == 0 and eng:
                tcu.send(ENG, tcu.eng.encode({"EngineTorque": 100.0}))
            h.run(1)

    for _ in range(5):
        cycle([0, 1])
    st = h.adapter.status()
    assert st["commands_fresh"] and not st["rx"]["messages"]["TCU_ClutchCmd"]["stale"]
    for _ in range(4):  # 40 ms with page 0 only: page 1's clutches 5-8 are 40 ms old (the timeout is 30 ms)
        cycle([0, 0])
    st = h.adapter.status()
    assert not st["commands_fresh"] and st["rx"]["messages"]["TCU_ClutchCmd"]["stale"]
    assert st["rx"]["messages"]["TCU_ClutchCmd"]["timeouts"] == 1
    for _ in range(2):
        cycle([0, 1])
    assert h.adapter.status()["commands_fresh"]


def test_the_plants_multiplexed_frames_decode_with_cantools(rig):
    h, tcu = rig
    rx = h.peer()
    try:
        h.run(100)
        got = {}
        while (m := rx.recv(0.2)) is not None:
            got.setdefault(m.arbitration_id, []).append(bytes(m.data))
    finally:
        rx.shutdown()
    press = DB.get_message_by_name("HIL_ClutchPress")
    info = DB.get_message_by_name("HIL_Info")
    dec = E2EDecoder(press, "Press_CRC", "Press_Counter", 0x0210)
    groups = [dec.decode(d)["PressGroup"] for d in got[press.frame_id]]
    assert len(groups) == 20 and groups == [0, 1] * 10 and dec.crc_errors == dec.counter_errors == 0
    pages = []
    idec = E2EDecoder(info, "Info_CRC", "Info_Counter", 0x0300)
    for d in got[info.frame_id]:
        v = idec.decode(d)
        pages.append((v["InfoPage"], v.get("DiagGroup")))
        assert info.encode(v, scaling=False, strict=True) == d
    assert pages == [(0, None), (1, 0)] and idec.crc_errors == 0  # ticks 5 and 55 of the 100: the first two pages


def test_a_multiplexer_cannot_be_mapped_and_a_multiplexed_counter_is_refused(tmp_path):
    from plant_models.config import ConfigError
    from plant_models.registry import load_plant
    from io_adapters.can.message_set import load_message_set

    text = (ROOT / "configs" / "io_can_powershift_mux.toml").read_text()
    (tmp_path / "powershift_mux.dbc").write_text((ROOT / "configs" / "powershift_mux.dbc").read_text())
    bad = tmp_path / "bad.toml"
    bad.write_text(text.replace('PressureCmd_C1 = "p_c1"', 'ClutchGroup = "p_c1"'))
    with pytest.raises(ConfigError, match="ClutchGroup: is a multiplexer"):
        load_message_set(bad, load_plant("powershift"), 0.001)
    bad.write_text(text.replace('counter = "ClutchCmd_Counter"', 'counter = "PressureCmd_C5"')
                   .replace('PressureCmd_C5 = "p_c5"\n', ""))
    with pytest.raises(ConfigError, match="PressureCmd_C5 is multiplexed"):
        load_message_set(bad, load_plant("powershift"), 0.001)


def test_the_rest_bus_sends_its_network_management_frame_with_constant_values(rig):
    """NM_HIL (AUTOSAR CAN NM PDU): source node 0x10 and the active-wakeup bit, every 100 ms, from `{ value = }`."""
    h, tcu = rig
    nm = DB.get_message_by_name("NM_HIL")
    rx = h.peer()
    try:
        h.run(250)
        got = []
        while (m := rx.recv(0.2)) is not None:
            if m.arbitration_id == nm.frame_id:
                got.append(bytes(m.data))
    finally:
        rx.shutdown()
    assert got == [bytes([0x10, 0x08, 0, 0, 0, 0, 0, 0])] * 3  # ticks 7, 107, 207
    assert nm.decode(got[0]) == {"NM_SourceNodeId": 16, "NM_RepeatMessageRequest": 0, "NM_ActiveWakeup": 1,
                                 "NM_PartialNetworkInfo": 0}


@pytest.mark.parametrize("edit, error", [
    (("NM_SourceNodeId = { value = 0x10 }", "NM_SourceNodeId = { value = 300 }"),
     "NM_SourceNodeId: value 300 is not a raw step of the signal inside its range"),
    (('PressureCmd_C1 = "p_c1"', "PressureCmd_C1 = { value = 1.0 }"),
     "PressureCmd_C1: a constant value is for sent signals"),
])
def test_constant_values_are_checked(tmp_path, edit, error):
    from plant_models.config import ConfigError
    from plant_models.registry import load_plant
    from io_adapters.can.message_set import load_message_set

    (tmp_path / "powershift_mux.dbc").write_text((ROOT / "configs" / "powershift_mux.dbc").read_text())
    bad = tmp_path / "bad.toml"
    bad.write_text((ROOT / "configs" / "io_can_powershift_mux.toml").read_text().replace(*edit))
    with pytest.raises(ConfigError, match=error):
        load_message_set(bad, load_plant("powershift"), 0.001)


def test_ten_thousand_fuzzed_multiplexed_frames_are_counted_exactly_and_only_valid_ones_reach_the_mailbox():
    """Valid pages mutated at random (bits, the multiplexer, the length), each with a correct or broken CRC."""
    from plant_models.registry import load_plant
    from io_adapters.can.e2e import crc8_sae_j1850
    from io_adapters.can.message_set import load_message_set

    plant = load_plant("powershift")
    ms = load_message_set(MUX_SET, plant, 0.001)
    codec = frames.FrameCodec(ms.rx, ms.tx, plant.n_in, plant.input_offset, plant.output_offset)
    m = [x.name for x in ms.rx.messages].index("TCU_ClutchCmd")
    lay = ms.rx.messages[m]
    s0 = int(ms.rx.M[m, frames.M_SIG0])
    rng = np.random.default_rng(3838)
    counter = 0
    verdicts = np.zeros(frames.RX_COLS, dtype=np.int64)
    for i in range(10_000):
        group = int(rng.integers(0, 2))
        first = 1 + 4 * group
        vals = {"ClutchGroup": group, "ClutchCmd_Counter": counter, "ClutchCmd_CRC": 0,
                **{f"PressureCmd_C{first + k}": float(rng.integers(0, 4001)) / 100 for k in range(4)}}
        data = bytearray(CMD.encode(vals, strict=False))
        kind = int(rng.integers(0, 4))
        if kind == 1:
            data[1] = (data[1] & 0x0F) | (int(rng.integers(2, 16)) << 4)  # an unknown multiplexer value
        elif kind == 2:
            data[int(rng.integers(2, 8))] ^= 1 << int(rng.integers(0, 8))  # a bit flipped in the signals
        data[0] = crc8_sae_j1850(bytes(data), 0x0100, 0)
        if kind == 3:
            data = data[:int(rng.integers(0, 8))] if rng.random() < 0.5 else data + bytes(1)
        elif rng.random() < 0.1:
            data[0] ^= 0xFF  # a wrong CRC
        before = codec.values.copy()
        v = codec.receive(m, bytes(data))
        verdicts[v] += 1
        if v == frames.RX_OK:
            counter = (counter + 1) % 16
            decoded = CMD.decode(bytes(data), decode_choices=False)
            assert decoded["ClutchGroup"] in (0, 1)
            for j, sl in enumerate(lay.signals):
                if sl.target >= 0 and sl.name in decoded:
                    assert codec.values[s0 + j] == decoded[sl.name]
                elif sl.target >= 0:
                    assert codec.values[s0 + j] == before[s0 + j]  # another page's value stays
        else:
            assert np.array_equal(codec.values, before)  # a rejected frame posts nothing
            if v in (frames.RX_MUX, frames.RX_RANGE):
                counter = (counter + 1) % 16  # it passed the E2E checks: its counter is the reference now
        if v == frames.RX_MUX:
            assert kind == 1
        if kind == 1 and v not in (frames.RX_CRC, frames.RX_DLC):
            assert v == frames.RX_MUX
    counts = codec.counts[m]
    assert counts[:frames.RX_LOST].sum() + counts[frames.RX_MUX] == 10_000
    assert np.array_equal(counts[[0, 1, 2, 3, 4, 5, 7]], verdicts[[0, 1, 2, 3, 4, 5, 7]])
    assert min(verdicts[frames.RX_OK], verdicts[frames.RX_MUX], verdicts[frames.RX_DLC], verdicts[frames.RX_CRC]) > 500
