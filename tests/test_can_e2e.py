"""Bad frames of every kind are rejected, counted and explained; stale commands stop feeding the watchdog.

Each case sends one frame from the TCU side of the bus, waits until the
adapter's receive thread has handled it, runs a tick and checks: the plant
input did not change, the counter of that reason went up by one, and the
logged explanation is exactly the expected sentence.
"""

from __future__ import annotations

import can
import cantools
import pytest

from can_support import BACKENDS, Harness, ROOT
from io_adapters.base import TI_OVERRUNS, TI_SCENARIO, TI_WATCHDOG
from io_adapters.can.e2e import E2EDecoder, E2EEncoder

DBC = cantools.database.load_file(str(ROOT / "configs" / "powershift.dbc"))
CMD_A = DBC.get_message_by_name("TCU_ClutchCmdA")
ENG = DBC.get_message_by_name("ENG_Torque")
PRESSURES = {"PressureCmd_C1": 12.5, "PressureCmd_C2": 0.0, "PressureCmd_C3": 16.0, "PressureCmd_C4": 0.0}


class Tcu:
    """The TCU side: protected ClutchCmdA frames, sent one at a time."""

    def __init__(self, h: Harness):
        self.h = h
        self.bus = h.peer()
        self.enc = E2EEncoder(CMD_A, "ClutchCmdA_CRC", "ClutchCmdA_Counter", 0x0100)
        self.sent = 0

    def send_raw(self, data: bytes, frame_id: int = CMD_A.frame_id, extended: bool = False, **kw) -> None:
        self.bus.send(can.Message(arbitration_id=frame_id, is_extended_id=extended, data=data, **kw))
        self.sent += 1
        self.h.wait_frames(self.sent)
        self.h.run(1)

    def send(self, values=None, **kw) -> None:
        self.send_raw(self.enc.encode(dict(PRESSURES, **(values or {})), **kw))

    def close(self):
        self.bus.shutdown()


@pytest.fixture(params=BACKENDS)
def rig(request):
    h = Harness(backend=request.param)
    tcu = Tcu(h)
    yield h, tcu
    tcu.close()
    h.close()


def rejected(h: Harness) -> dict:
    return h.adapter.status()["rx"]["rejected"]


def test_valid_frame_is_applied(rig):
    h, tcu = rig
    tcu.send()
    assert h.plant.input_dict()["p_c1"] == 12.5 and h.plant.input_dict()["p_c3"] == 16.0
    st = h.adapter.status()["rx"]
    assert st["accepted"] == 1 and st["rejected_total"] == 0


def test_wrong_checksum(rig):
    h, tcu = rig
    tcu.send()
    data = bytearray(tcu.enc.encode(dict(PRESSURES, PressureCmd_C1=30.0)))
    good = data[0]
    data[0] ^= 0x01
    tcu.send_raw(bytes(data))
    assert h.plant.input_dict()["p_c1"] == 12.5
    assert rejected(h) == {"crc": 1, "counter_frozen": 0, "counter_jump": 0, "dlc": 0, "unknown_id": 0,
                           "out_of_range": 0, "unknown_mux": 0}
    assert h.adapter.last_reject == (f"TCU_ClutchCmdA (0x100): wrong checksum 0x{good ^ 1:02X}, "
                                     f"expected 0x{good:02X}")


def test_frozen_counter(rig):
    h, tcu = rig
    tcu.send(counter=5)
    tcu.send({"PressureCmd_C1": 30.0}, counter=5)  # correct CRC, but the same counter again
    assert h.plant.input_dict()["p_c1"] == 12.5
    assert rejected(h)["counter_frozen"] == 1
    assert h.adapter.last_reject == "TCU_ClutchCmdA (0x100): alive counter frozen at 5"
    tcu.send({"PressureCmd_C1": 30.0}, counter=6)  # the sequence goes on
    assert h.plant.input_dict()["p_c1"] == 30.0


def test_jumping_counter_costs_one_frame(rig):
    h, tcu = rig
    tcu.send(counter=14)
    tcu.send({"PressureCmd_C1": 30.0}, counter=3)  # 14 -> 3 is a step of 5 (mod 16)
    assert h.plant.input_dict()["p_c1"] == 12.5
    assert rejected(h)["counter_jump"] == 1
    assert h.adapter.last_reject == "TCU_ClutchCmdA (0x100): alive counter jumped to 3, expected 15"
    tcu.send({"PressureCmd_C1": 31.0}, counter=4)  # a restarted sender is accepted from its second frame
    assert h.plant.input_dict()["p_c1"] == 31.0
    assert h.adapter.status()["rx"]["messages"]["TCU_ClutchCmdA"]["accepted"] == 2


def test_counter_wraps_from_15_to_0(rig):
    h, tcu = rig
    tcu.send(counter=15)
    tcu.send({"PressureCmd_C1": 20.0}, counter=0)
    assert h.plant.input_dict()["p_c1"] == 20.0 and h.adapter.status()["rx"]["rejected_total"] == 0


def test_wrong_dlc(rig):
    h, tcu = rig
    tcu.send()
    tcu.send_raw(tcu.enc.encode(dict(PRESSURES, PressureCmd_C1=30.0))[:7])
    assert h.plant.input_dict()["p_c1"] == 12.5
    assert rejected(h)["dlc"] == 1
    assert h.adapter.last_reject == "TCU_ClutchCmdA (0x100): 7 data bytes, the DBC says 8"


def test_remote_frame_is_a_dlc_error(rig):
    h, tcu = rig
    tcu.send_raw(b"", is_remote_frame=True, dlc=8)
    assert rejected(h)["dlc"] == 1
    assert h.adapter.last_reject == "TCU_ClutchCmdA (0x100): remote frame where the DBC has a classic data frame"


def test_unknown_id(rig):
    h, tcu = rig
    tcu.send_raw(bytes(8), frame_id=0x7FF)
    tcu.send_raw(bytes(8), frame_id=0x100, extended=True)  # the same number as an extended ID is another frame
    assert rejected(h)["unknown_id"] == 2
    assert h.adapter.last_reject == "frame ID 0x100 is not in the message set"
    assert h.plant.input_dict()["p_c1"] == 0.0


def test_out_of_range_pressure(rig):
    h, tcu = rig
    tcu.send()
    # 40.95 bar fits the 12-bit signal but not its DBC range [0, 40] (nor the plant's)
    tcu.send_raw(tcu.enc.encode(dict(PRESSURES, PressureCmd_C2=40.95)))
    assert h.plant.input_dict()["p_c2"] == 0.0
    assert rejected(h)["out_of_range"] == 1
    assert h.adapter.last_reject == "TCU_ClutchCmdA (0x100): PressureCmd_C2 = 40.95 is outside [0, 40]"


def test_out_of_range_engine_torque(rig):
    h, tcu = rig
    enc = E2EEncoder(ENG, "EngTorque_CRC", "EngTorque_Counter", 0x0110)
    tcu.send_raw(enc.encode({"EngineTorque": 250.0}), frame_id=ENG.frame_id)
    tcu.send_raw(enc.encode({"EngineTorque": -1000.25}), frame_id=ENG.frame_id)
    assert h.plant.input_dict()["engine_torque"] == 250.0
    assert h.adapter.last_reject == "ENG_Torque (0x110): EngineTorque = -1000.25 is outside [-1000, 5000]"


def test_every_reason_is_counted_in_status_and_on_the_diag_frame(rig):
    """One bad frame of each kind; HIL_RxDiag (100 ms) and status() report the same counts."""
    h, tcu = rig
    tcu.send(counter=0)
    tcu.send(counter=1, corrupt_crc=True)
    tcu.send(counter=1)
    tcu.send(counter=1)  # frozen
    tcu.send(counter=9)  # jump
    tcu.send_raw(bytes(3))  # dlc
    tcu.send_raw(bytes(8), frame_id=0x555)  # unknown
    tcu.send_raw(tcu.enc.encode(dict(PRESSURES, PressureCmd_C4=40.5)))  # range
    assert rejected(h) == {"crc": 1, "counter_frozen": 1, "counter_jump": 1, "dlc": 1, "unknown_id": 1,
                           "out_of_range": 1, "unknown_mux": 0}
    assert h.adapter.status()["rx"]["accepted"] == 2
    diag = DBC.get_message_by_name("HIL_RxDiag")
    dec = E2EDecoder(diag, "RxDiag_CRC", "RxDiag_Counter", 0x0301)
    while tcu.bus.recv(0.0) is not None:
        pass
    h.run(100)  # HIL_RxDiag is sent once per 100 ms
    frames = []
    while (m := tcu.bus.recv(0.05)) is not None:
        if m.arbitration_id == diag.frame_id:
            frames.append(dec.decode(bytes(m.data)))
    assert len(frames) == 1 and frames[0] is not None
    v = frames[0]
    assert (v["CrcErrors"], v["CounterErrors"], v["DlcErrors"], v["UnknownIds"], v["RangeErrors"]) == (1, 2, 1, 1, 1)


def test_stale_command_stops_feeding_the_watchdog(rig):
    """All three command messages fresh: fed every tick.  One stops: not fed after its 30 ms timeout."""
    h, tcu = rig
    enc_b = E2EEncoder(DBC.get_message_by_name("TCU_ClutchCmdB"), "ClutchCmdB_CRC", "ClutchCmdB_Counter", 0x0101)
    enc_e = E2EEncoder(ENG, "EngTorque_CRC", "EngTorque_Counter", 0x0110)
    b_values = {f"PressureCmd_C{c}": 0.0 for c in (5, 6, 7, 8)}

    def cycle(with_b: bool):
        frames = [(CMD_A.frame_id, tcu.enc.encode(PRESSURES)), (ENG.frame_id, enc_e.encode({"EngineTorque": 100.0}))]
        if with_b:
            frames.append((0x101, enc_b.encode(b_values)))
        for fid, data in frames:
            tcu.bus.send(can.Message(arbitration_id=fid, is_extended_id=False, data=data))
            tcu.sent += 1
        h.wait_frames(tcu.sent)
        h.run(10)

    cycle(False)
    assert h.feeds == []  # not before every required message was seen once (ENV_Load is optional)
    for _ in range(5):
        cycle(True)  # ticks 10..59, ClutchCmdB last applied at tick 50
    assert len(h.feeds) == 50 and h.adapter.status()["commands_fresh"]
    for _ in range(6):
        cycle(False)  # ticks 60..119
    # the 30 ms timeout: fresh while at most 30 ticks old, i.e. up to tick 80; stale from tick 81 on
    assert len(h.feeds) == 50 + 21
    st = h.adapter.status()
    assert not st["commands_fresh"]
    assert st["rx"]["messages"]["TCU_ClutchCmdB"]["stale"] and st["rx"]["messages"]["TCU_ClutchCmdB"]["timeouts"] == 1
    assert st["rx"]["timeouts"] == 1 and not st["rx"]["messages"]["TCU_ClutchCmdA"]["stale"]
    cycle(True)  # back: fed again from the next tick
    assert len(h.feeds) == 50 + 21 + 10


def test_scenario_active_commands_are_taken_not_applied(rig):
    h, tcu = rig
    h.tick_info[TI_SCENARIO] = 1
    tcu.send()
    assert h.plant.input_dict()["p_c1"] == 0.0
    assert h.adapter.status()["rx"]["ignored_scenario_active"] == 1 and h.feeds == []
    h.tick_info[TI_SCENARIO] = 0
    tcu.send({"PressureCmd_C1": 3.0})
    assert h.plant.input_dict()["p_c1"] == 3.0


def test_status_frame_reports_the_loops_watchdog_and_overruns(rig):
    """HIL_Status carries tick_info's watchdog flag and overrun count, as the loop last wrote them."""
    h, tcu = rig
    status = DBC.get_message_by_name("HIL_Status")
    dec = E2EDecoder(status, "Status_CRC", "Status_Counter", 0x0300)
    h.tick_info[TI_WATCHDOG] = 1
    h.tick_info[TI_OVERRUNS] = 1234
    h.run(100)
    seen = []
    while (m := tcu.bus.recv(0.05)) is not None:
        if m.arbitration_id == status.frame_id:
            seen.append(dec.decode(bytes(m.data)))
    assert seen and seen[-1] is not None
    assert (seen[-1]["WatchdogState"], seen[-1]["Overruns"]) == (1, 1234)


def test_autosar_profile_1_variant(tmp_path):
    """crc_variant = "autosar_p01": profile 1 CRCs pass, SAE J1850 ones fail, counter 15 of a 0..14 counter fails."""
    dbc = tmp_path / "p01.dbc"
    dbc.write_text((ROOT / "configs" / "powershift.dbc").read_text().replace(
        'SG_ ClutchCmdA_Counter : 8|4@1+ (1,0) [0|15]', 'SG_ ClutchCmdA_Counter : 8|4@1+ (1,0) [0|14]'))
    ms = tmp_path / "io_can_p01.toml"
    ms.write_text((ROOT / "configs" / "io_can_powershift.toml").read_text().replace(
        'dbc = "powershift.dbc"', f'dbc = "{dbc.as_posix()}"').replace(
        "max_delta_counter = 1 ", 'max_delta_counter = 1\ncrc_variant = "autosar_p01" '))
    p01_db = cantools.database.load_file(str(dbc))
    with Harness(options={"message_set": str(ms)}) as h:
        tcu = Tcu(h)
        try:
            tcu.enc = E2EEncoder(p01_db.get_message_by_name("TCU_ClutchCmdA"), "ClutchCmdA_CRC",
                                 "ClutchCmdA_Counter", 0x0100, crc_variant="autosar_p01")
            tcu.send(counter=13)
            assert h.plant.input_dict()["p_c1"] == 12.5
            tcu.send({"PressureCmd_C1": 20.0}, counter=14)
            tcu.send({"PressureCmd_C1": 21.0}, counter=0)  # 14 -> 0: the counter runs 0..14
            assert h.plant.input_dict()["p_c1"] == 21.0
            tcu.send({"PressureCmd_C1": 22.0}, counter=15)
            assert h.adapter.last_reject == "TCU_ClutchCmdA (0x100): alive counter jumped to 15, expected 1"
            j1850 = E2EEncoder(p01_db.get_message_by_name("TCU_ClutchCmdA"), "ClutchCmdA_CRC", "ClutchCmdA_Counter",
                               0x0100)
            tcu.send_raw(j1850.encode(dict(PRESSURES, PressureCmd_C1=23.0), counter=1))
            assert rejected(h)["crc"] == 1 and rejected(h)["counter_jump"] == 1
            assert h.plant.input_dict()["p_c1"] == 21.0
        finally:
            tcu.close()


def test_a_range_rejected_frame_moves_the_counter_reference_as_e2e_senders_expect(rig):
    """docs/can.md: a value out of range passed the end-to-end checks, so its counter is the reference."""
    h, tcu = rig
    tcu.send(counter=4)
    tcu.send({"PressureCmd_C2": 40.95}, counter=5)  # out of range: rejected
    assert rejected(h)["out_of_range"] == 1 and h.plant.input_dict()["p_c2"] == 0.0
    tcu.send({"PressureCmd_C2": 20.0}, counter=5)  # the same counter again: frozen
    assert rejected(h)["counter_frozen"] == 1 and h.plant.input_dict()["p_c2"] == 0.0
    tcu.send({"PressureCmd_C2": 20.0}, counter=6)  # the next counter: accepted, nothing lost
    assert h.plant.input_dict()["p_c2"] == 20.0
    st = h.adapter.status()["rx"]["messages"]["TCU_ClutchCmdA"]
    assert st["accepted"] == 2 and st["lost"] == 0 and rejected(h)["counter_jump"] == 0


def test_a_crc_rejected_frame_does_not_move_the_reference(rig):
    h, tcu = rig
    tcu.send(counter=7)
    tcu.send({"PressureCmd_C1": 30.0}, counter=9, corrupt_crc=True)  # a counter that cannot be trusted
    tcu.send({"PressureCmd_C1": 30.0}, counter=8)  # the next after 7: accepted
    assert h.plant.input_dict()["p_c1"] == 30.0 and rejected(h)["crc"] == 1
    assert rejected(h)["counter_frozen"] == rejected(h)["counter_jump"] == 0


def test_diag_counters_wrap_modulo_256_instead_of_sticking(rig):
    """300 frames of a wrong length: HIL_RxDiag carries 300 mod 256 = 44, the status the full count."""
    h, tcu = rig
    for _ in range(300):
        tcu.bus.send(can.Message(arbitration_id=CMD_A.frame_id, is_extended_id=False, data=bytes(3)))
    tcu.sent += 300
    tcu.h.wait_frames(tcu.sent)
    assert rejected(h)["dlc"] == 300
    diag = DBC.get_message_by_name("HIL_RxDiag")
    dec = E2EDecoder(diag, "RxDiag_CRC", "RxDiag_Counter", 0x0301)
    while tcu.bus.recv(0.0) is not None:
        pass
    h.run(100)
    got = []
    while (m := tcu.bus.recv(0.05)) is not None:
        if m.arbitration_id == diag.frame_id:
            got.append(dec.decode(bytes(m.data)))
    assert len(got) == 1 and got[0]["DlcErrors"] == 300 % 256
    assert h.adapter.status()["tx"]["saturated"] == 0  # a wrapped counter is not a clamped value
