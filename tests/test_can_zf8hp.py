"""The 8-speed automatic's message set (configs/io_can_zf8hp.toml, configs/zf8hp.dbc) on the bus.

A TCU holds 1st gear over CAN (brakes A and B and clutch C at 12 bar, in the
one command frame) with the engine driving; the plant's frames then report
1st gear engaged, its three elements stuck, and speeds in the ratio of 1st
(108/23, from the 8HP70's tooth counts) to the 0.5 rpm resolution of the
speed signals.  The same run through an I/O config names the message set,
since every described transmission is plant kind "transmission".
"""

from __future__ import annotations

import can
import cantools
import pytest

from can_support import BACKENDS, ROOT, Harness, wait_until
from io_adapters.can.e2e import E2EDecoder, E2EEncoder
from io_adapters.can.message_set import load_message_set
from plant_models.registry import load_plant
from server.realtime.runtime import load_io_config

DBC = cantools.database.load_file(str(ROOT / "configs" / "zf8hp.dbc"))
CMD, ENG = DBC.get_message_by_name("TCU_ShiftCmd"), DBC.get_message_by_name("ENG_Torque")


def test_the_message_set_resolves_against_the_8hp_and_the_io_config_names_it():
    ms = load_message_set("io_can_zf8hp", load_plant("zf8hp"), 0.001)
    assert ms.rx.n_msg == 3 and ms.tx.n_msg == 5
    assert all(m.crc_signal >= 0 and m.counter_signal >= 0 for m in ms.rx.messages + ms.tx.messages)
    io = load_io_config("io_zf8hp")
    assert next(a for a in io.adapters if a.type == "can").options["message_set"] == "io_can_zf8hp.toml"


@pytest.mark.parametrize("backend", BACKENDS)
def test_first_gear_held_over_can(backend):
    with Harness("zf8hp", options={"message_set": "io_can_zf8hp"}, backend=backend) as h:
        bus = h.peer()
        cmd = E2EEncoder(CMD, "ShiftCmd_CRC", "ShiftCmd_Counter", 0x0100)
        eng = E2EEncoder(ENG, "EngTorque_CRC", "EngTorque_Counter", 0x0110)
        rx = {name: E2EDecoder(DBC.get_message_by_name(name), f"{crc}_CRC", f"{crc}_Counter", data_id)
              for name, crc, data_id in (("HIL_Speeds", "Speeds", 0x0200), ("HIL_ShiftState", "ShiftState", 0x0220))}
        got: dict[str, dict] = {}
        sent = 0
        try:
            for c in range(100):  # 1 s of 10 ms command cycles
                bus.send(can.Message(arbitration_id=CMD.frame_id, is_extended_id=False, data=cmd.encode(
                    {"PressureCmd_A": 12.0, "PressureCmd_B": 12.0, "PressureCmd_C": 12.0, "PressureCmd_D": 0.0,
                     "PressureCmd_E": 0.0})))
                bus.send(can.Message(arbitration_id=ENG.frame_id, is_extended_id=False,
                                     data=eng.encode({"EngineTorque": 150.0})))
                sent += 2
                wait_until(lambda: h.adapter.rx_handled >= sent, what="the command cycle")
                h.run(10)
                while (msg := bus.recv(0.0)) is not None:
                    name = DBC.get_message_by_frame_id(msg.arbitration_id).name
                    if name in rx:
                        got[name] = rx[name].decode(bytes(msg.data))
        finally:
            bus.shutdown()
        assert h.adapter.status()["rx"]["rejected_total"] == 0
        u = h.plant.input_dict()
        assert (u["p_A"], u["p_B"], u["p_C"], u["p_D"], u["input_torque"]) == (12.0, 12.0, 12.0, 0.0, 150.0)
        st, sp = got["HIL_ShiftState"], got["HIL_Speeds"]
        assert (st["GearActual"], st["Stuck_A"], st["Stuck_B"], st["Stuck_C"], st["Stuck_D"], st["Stuck_E"]) == (
            1, 1, 1, 1, 0, 0)
        assert sp["InputSpeed"] / sp["OutputSpeed"] == pytest.approx(108 / 23, rel=0.01)  # 0.5 rpm steps
        assert st["Ratio"] == pytest.approx(108 / 23, abs=0.006)
