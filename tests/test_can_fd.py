"""CAN FD: 64-byte frames in both directions when the adapter runs with ``fd = true``.

One FD command frame carries all eight clutch pressures and the engine
torque; one FD sensor frame carries the four axle speeds and the eight
actual pressures.  Without ``fd = true`` the adapter refuses such a set.
"""

from __future__ import annotations

import can
import cantools
import pytest

from can_support import Harness
from io_adapters.base import AdapterError
from io_adapters.can.e2e import E2EDecoder, E2EEncoder

FD_DBC = """VERSION ""
NS_ :
BS_:
BU_: TCU HIL
BO_ 1024 TCU_FdCmd: 64 TCU
 SG_ FdCmd_CRC : 0|8@1+ (1,0) [0|255] "" HIL
 SG_ FdCmd_Counter : 8|4@1+ (1,0) [0|15] "" HIL
{cmd}
 SG_ EngineTorque : 496|16@1- (0.25,0) [-1000|5000] "Nm" HIL
BO_ 1280 HIL_FdSensors: 64 HIL
 SG_ FdSensors_CRC : 0|8@1+ (1,0) [0|255] "" TCU
 SG_ FdSensors_Counter : 8|4@1+ (1,0) [0|15] "" TCU
{speeds}
{press}
BA_DEF_ BO_ "GenMsgCycleTime" INT 0 65535;
BA_DEF_ BO_ "VFrameFormat" ENUM "StandardCAN","ExtendedCAN","reserved","reserved","reserved","reserved","reserved","reserved","reserved","reserved","reserved","reserved","reserved","reserved","StandardCAN_FD","ExtendedCAN_FD";
BA_DEF_DEF_ "GenMsgCycleTime" 0;
BA_DEF_DEF_ "VFrameFormat" "StandardCAN";
BA_ "GenMsgCycleTime" BO_ 1024 10;
BA_ "GenMsgCycleTime" BO_ 1280 10;
BA_ "VFrameFormat" BO_ 1024 14;
BA_ "VFrameFormat" BO_ 1280 14;
""".format(
    cmd="\n".join(f' SG_ PressureCmd_C{c} : {16 + 16 * (c - 1)}|16@1+ (0.001,0) [0|40] "bar" HIL' for c in range(1, 9)),
    speeds="\n".join(f' SG_ Speed_{j} : {16 + 32 * (j - 1)}|32@1- (0.001,0) [-2000000|2000000] "rad/s" TCU'
                     for j in range(1, 5)),
    press="\n".join(f' SG_ Pressure_C{c} : {144 + 16 * (c - 1)}|16@1+ (0.001,0) [0|65.535] "bar" TCU'
                    for c in range(1, 9)))

FD_SET = """dbc = "{dbc}"
[rx.TCU_FdCmd]
checksum = "FdCmd_CRC"
counter = "FdCmd_Counter"
[rx.TCU_FdCmd.signals]
{cmd}
EngineTorque = "engine_torque"
[tx.HIL_FdSensors]
checksum = "FdSensors_CRC"
counter = "FdSensors_Counter"
[tx.HIL_FdSensors.signals]
{speeds}
{press}
"""


@pytest.fixture
def fd_set(tmp_path):
    dbc = tmp_path / "fd.dbc"
    dbc.write_text(FD_DBC)
    ms = tmp_path / "io_can_fd.toml"
    ms.write_text(FD_SET.format(dbc=dbc.as_posix(),
                                cmd="\n".join(f'PressureCmd_C{c} = "p_c{c}"' for c in range(1, 9)),
                                speeds="\n".join(f'Speed_{j} = "w_{j}"' for j in range(1, 5)),
                                press="\n".join(f'Pressure_C{c} = "pressure_c{c}"' for c in range(1, 9))))
    return dbc, ms


def test_fd_frames_both_ways(fd_set):
    dbc_path, ms = fd_set
    db = cantools.database.load_file(str(dbc_path))
    cmd, sensors = db.get_message_by_name("TCU_FdCmd"), db.get_message_by_name("HIL_FdSensors")
    assert cmd.is_fd and sensors.is_fd
    with Harness(options={"fd": True, "message_set": str(ms)}) as h:
        bus = h.peer()
        try:
            enc = E2EEncoder(cmd, "FdCmd_CRC", "FdCmd_Counter")
            values = {f"PressureCmd_C{c}": 1.5 * c for c in range(1, 9)}
            values["EngineTorque"] = 321.25
            bus.send(can.Message(arbitration_id=cmd.frame_id, is_extended_id=False, is_fd=True,
                                 data=enc.encode(values)))
            h.wait_frames(1)
            h.run(10)
            frames = []
            while (m := bus.recv(0.05)) is not None:
                frames.append(m)
        finally:
            bus.shutdown()
        u = h.plant.input_dict()
        assert [u[f"p_c{c}"] for c in range(1, 9)] == [1.5 * c for c in range(1, 9)]
        assert u["engine_torque"] == 321.25
        assert len(frames) == 1 and frames[0].is_fd and len(frames[0].data) == 64
        v = E2EDecoder(sensors, "FdSensors_CRC", "FdSensors_Counter").decode(bytes(frames[0].data))
        assert v is not None
        y = h.plant.output_dict()
        for j in range(1, 5):
            assert v[f"Speed_{j}"] == pytest.approx(y[f"w_{j}"], abs=0.0005)


def test_fd_set_needs_fd_enabled(fd_set):
    _, ms = fd_set
    with pytest.raises(AdapterError, match=r"^can: messages TCU_FdCmd, HIL_FdSensors are CAN FD frames; "
                                           r"set fd = true$"):
        Harness(options={"message_set": str(ms)})


def test_classic_frame_for_an_fd_message_is_rejected(fd_set):
    _, ms = fd_set
    with Harness(options={"fd": True, "message_set": str(ms)}) as h:
        bus = h.peer()
        try:
            bus.send(can.Message(arbitration_id=0x400, is_extended_id=False, data=bytes(8)))
            h.wait_frames(1)
        finally:
            bus.shutdown()
        assert h.adapter.status()["rx"]["rejected"]["dlc"] == 1
        assert h.adapter.last_reject == "TCU_FdCmd (0x400): classic frame where the DBC has a CAN FD data frame"
