"""The recording's MF4 files hold the CAN frames beside the signals, as ASAM MDF bus logging with the DBC attached.

asammdf's ``extract_bus_logging``, given the DBC the files carry, must decode
every frame into the values of the signal channels at the same time: the
plant's outputs for the frames it sent (as the frame's scaling rounds them),
its inputs for the commands it received, tick for tick, with no frame left
over; and the files must hold every frame the adapter sent and received
while recording, the last ones included.
"""

from __future__ import annotations

import math
import uuid

import can
import cantools
import numpy as np
import pytest

from can_support import ROOT, wait_until
from io_adapters.can.adapter import CanAdapter
from io_adapters.can.e2e import E2EEncoder
from plant_models.registry import load_plant
from server.recording import RecordingConfig, read_recording, recording_files
from server.realtime.loop_config import LoopConfig
from server.realtime.runtime import assemble

asammdf = pytest.importorskip("asammdf")

RPM = 60.0 / (2.0 * math.pi)  # rad/s -> rpm


def _sent_value(x: float, scale: float) -> float:
    """What the plant's codec puts on the bus for a value ``x`` in DBC units: the nearest raw step."""
    return math.floor(x / scale + 0.5) * scale


SETS = {
    "classic": ("io_can_powershift.toml", "powershift.dbc",
                [("TCU_ClutchCmdA", "ClutchCmdA", {"PressureCmd_C1": "p_c1", "PressureCmd_C3": "p_c3"}),
                 ("TCU_ClutchCmdB", "ClutchCmdB", {"PressureCmd_C6": "p_c6"})]),
    "multiplexed": ("io_can_powershift_mux.toml", "powershift_mux.dbc",
                    [("TCU_ClutchCmd", "ClutchCmd", {"PressureCmd_C1": "p_c1", "PressureCmd_C3": "p_c3"}),
                     ("TCU_ClutchCmd", "ClutchCmd", {"PressureCmd_C6": "p_c6"})]),
}


def _send_cycle(tcu, db, encoders: dict, eng, commands, kind: str, cycle: int) -> int:
    """One 5 ms cycle of the TCU's command frames (values changing with ``cycle``) and, every other cycle, the
    engine's torque frame: the frames sent."""
    sent = 0
    for k, (msg_name, _, mapping) in enumerate(commands):
        vals = {sig: round(0.37 * cycle + 2.0 * j + k, 2) for j, sig in enumerate(mapping)}
        if kind == "multiplexed":
            vals["ClutchGroup"] = k
        else:
            other = {"TCU_ClutchCmdA": ["PressureCmd_C2", "PressureCmd_C4"],
                     "TCU_ClutchCmdB": ["PressureCmd_C5", "PressureCmd_C7", "PressureCmd_C8"]}[msg_name]
            vals.update({s: 0.0 for s in other})
        if kind == "multiplexed":
            first = 1 + 4 * k
            vals.update({f"PressureCmd_C{first + i}": vals.get(f"PressureCmd_C{first + i}", 0.0)
                         for i in range(4)})
        tcu.send(can.Message(arbitration_id=db.get_message_by_name(msg_name).frame_id,
                             is_extended_id=False, data=encoders[msg_name].encode(vals)))
        sent += 1
    if cycle % 2 == 0:
        tcu.send(can.Message(arbitration_id=0x110, is_extended_id=False,
                             data=eng.encode({"EngineTorque": 150.0 + 4.25 * cycle})))
        sent += 1
    return sent


def _check_file(f, dbc_copy, dbc_name: str, row_of: dict, rows: dict, commands, total: dict, checked: dict) -> int:
    """One recorded file: its attached DBC is the config's, its frames (counted per direction in ``total``) decode
    through that DBC into the recorded rows' values at the same times (checked values counted in ``checked``):
    the values that did not match."""
    unmatched = 0
    with asammdf.MDF(f) as mdf:
        (att,) = [a for a in mdf.attachments]
        assert att.file_name == dbc_name
        data, _, _ = mdf.extract_attachment(0)
        assert data == (ROOT / "configs" / dbc_name).read_bytes()
        dbc_copy.write_bytes(data)
        direction = mdf.get("CAN_DataFrame.Dir").samples
        for d in (0, 1):
            total[d] += int(np.count_nonzero(direction == d))
        decoded = mdf.extract_bus_logging({"CAN": [(str(dbc_copy), 0)]})
        info = mdf.last_call_info["CAN"]
        assert info["unknown_id_count"] == 0
        for name, port, scale, conv in (("EngineSpeed", "w_1", 0.5, RPM), ("OutputSpeed", "w_out", 0.5, RPM),
                                        ("Pressure_C1", "pressure_c1", 0.02, 1.0)):
            sig = decoded.get(name)
            assert len(sig.samples) > 0
            for t, v in zip(sig.timestamps, sig.samples):
                i = row_of.get(round(float(t), 9))
                if i is None or v != _sent_value(rows[port][i] * conv, scale):
                    unmatched += 1
                checked["tx"] += 1
        for _, _, mapping in commands:
            for name, port in mapping.items():
                sig = decoded.get(name)
                for t, v in zip(sig.timestamps, sig.samples):
                    i = row_of.get(round(float(t), 9))
                    if i is None or v != pytest.approx(rows[port][i], abs=1e-12):
                        unmatched += 1
                    checked["rx"] += 1
        sig = decoded.get("EngineTorque")
        for t, v in zip(sig.timestamps, sig.samples):
            i = row_of.get(round(float(t), 9))
            if i is None or v != rows["engine_torque"][i]:
                unmatched += 1
    return unmatched


@pytest.mark.parametrize("kind", sorted(SETS))
def test_bus_frames_decode_into_the_recorded_signals_tick_for_tick(tmp_path, kind):
    ms, dbc_name, commands = SETS[kind]
    db = cantools.database.load_file(str(ROOT / "configs" / dbc_name))
    channel = f"rec-{uuid.uuid4().hex[:8]}"
    plant = load_plant("powershift")
    adapter = CanAdapter("can", {"interface": "virtual", "channel": channel, "message_set": ms})
    folder = tmp_path / "rec"
    server = assemble(plant, [adapter], LoopConfig(mode="lockstep", rate_hz=1000.0, status_interval_s=0.0),
                      recording=RecordingConfig(folder=folder, chunk_s=0.05))
    loop = server.loop
    loop.open()
    tcu = can.Bus(interface="virtual", channel=channel)
    encoders = {}
    for msg_name, stem, _ in commands:
        if msg_name not in encoders:
            encoders[msg_name] = E2EEncoder(db.get_message_by_name(msg_name), f"{stem}_CRC", f"{stem}_Counter",
                                            db.get_message_by_name(msg_name).frame_id)
    eng = E2EEncoder(db.get_message_by_name("ENG_Torque"), "EngTorque_CRC", "EngTorque_Counter", 0x0110)
    sent = 0
    try:
        loop.step(20)  # before the recording: not in the files
        job = server.recorder.start(signals=["w_1", "w_out", "pressure_c1", "p_c1", "p_c3", "p_c6", "engine_torque"])
        assert job["bus"] == ["can"]
        for cycle in range(30):  # 150 ms: three files of 50 ms, commands changing every 5 ms
            sent += _send_cycle(tcu, db, encoders, eng, commands, kind, cycle)
            wait_until(lambda: adapter.rx_handled >= sent, what=f"{sent} frames")
            loop.step(5)
        n_tx = adapter.status()["tx"]["frames"]
        server.recorder.stop(wait=True)
        status = server.recorder.status()
        loop.step(10)  # after the stop: not in the files
    finally:
        tcu.shutdown()
        server.close()
    files = recording_files(folder)
    assert len(files) == 3
    rows = read_recording(folder)
    assert status["lost"] == 0 and status["writer_state"] == "closed"
    assert status["bus_spools"]["can"]["dropped"] == 0 and status["bus_spools"]["can"]["errors"] == 0
    row_of = {round(t, 9): i for i, t in enumerate(rows["t"])}
    total = {0: 0, 1: 0}
    unmatched = 0
    checked = {"tx": 0, "rx": 0}
    for f in files:
        unmatched += _check_file(f, tmp_path / f"attached_{dbc_name}", dbc_name, row_of, rows, commands, total,
                                 checked)
    assert unmatched == 0
    assert checked == {"tx": 3 * 15, "rx": 3 * 30}  # 150 ticks: 15 frames of each 10 ms message; 30 commands each
    assert total[0] == sent  # every command frame received while recording, the last ones included
    assert total[1] == n_tx - _tx_before(kind)  # every frame sent while recording
    assert status["bus_frames"]["can"]["frames"] == sent + total[1]


def _tx_before(kind: str) -> int:
    """Frames the plant sent in the 20 ticks before the recording started."""
    plant_counts = {"classic": _count_due(20, "io_can_powershift"), "multiplexed": _count_due(20, "io_can_powershift_mux")}
    return plant_counts[kind]


def _count_due(ticks: int, ms: str) -> int:
    from io_adapters.can.message_set import load_message_set

    s = load_message_set(ms, load_plant("powershift"), 0.001)
    return sum(1 for tick in range(1, ticks + 1) for m in s.tx.messages
               if tick >= m.offset_ticks and (tick - m.offset_ticks) % m.period_ticks == 0)


def test_can_fd_frames_are_logged_as_fd_and_decode_into_the_recorded_signals(tmp_path):
    """The DCT on CAN FD (64-byte frames, bit-rate switch, E2E profile 5): EDL, BRS and the FD DLC code 15."""
    db = cantools.database.load_file(str(ROOT / "configs" / "dct_fd.dbc"))
    channel = f"recfd-{uuid.uuid4().hex[:8]}"
    plant = load_plant("dct")
    adapter = CanAdapter("can", {"interface": "virtual", "channel": channel, "fd": True,
                                 "message_set": "io_can_dct_fd.toml"})
    folder = tmp_path / "rec"
    server = assemble(plant, [adapter], LoopConfig(mode="lockstep", rate_hz=1000.0, status_interval_s=0.0),
                      recording=RecordingConfig(folder=folder, chunk_s=1.0))
    server.loop.open()
    tcu = can.Bus(interface="virtual", channel=channel, fd=True)
    cmd = E2EEncoder(db.get_message_by_name("TCU_DctCmdFd"), "DctCmdFd_CRC", "DctCmdFd_Counter", 0x0180,
                     crc_variant="autosar_p05")
    sent = 0
    try:
        server.recorder.start(signals=["w_engine", "p_c1"])
        for cycle in range(20):
            data = cmd.encode({"PressureCmd_C1": 0.125 * cycle, "PressureCmd_C2": 0.0, "GearOddCmd": 1,
                               "GearEvenCmd": 0})
            tcu.send(can.Message(arbitration_id=0x180, is_extended_id=False, is_fd=True, bitrate_switch=True,
                                 data=data))
            sent += 1
            wait_until(lambda: adapter.rx_handled >= sent, what=f"{sent} frames")
            server.loop.step(10)
        server.recorder.stop(wait=True)
    finally:
        tcu.shutdown()
        server.close()
    rows = read_recording(folder)
    row_of = {round(t, 9): i for i, t in enumerate(rows["t"])}
    (f,) = recording_files(folder)
    with asammdf.MDF(f) as mdf:
        data, name, _ = mdf.extract_attachment(0)
        dbc_copy = tmp_path / "dct_fd.dbc"
        dbc_copy.write_bytes(data)
        assert np.all(mdf.get("CAN_DataFrame.EDL").samples == 1) and np.all(mdf.get("CAN_DataFrame.BRS").samples == 1)
        assert np.all(mdf.get("CAN_DataFrame.DLC").samples == 15)
        assert np.all(mdf.get("CAN_DataFrame.DataLength").samples == 64)
        decoded = mdf.extract_bus_logging({"CAN": [(str(dbc_copy), 0)]})
    speeds = decoded.get("EngineSpeed")
    cmds = decoded.get("PressureCmd_C1")
    assert len(speeds.samples) == 20 and len(cmds.samples) == 20
    assert [v == _sent_value(rows["w_engine"][row_of[round(float(t), 9)]] * RPM, 0.01)
            for t, v in zip(speeds.timestamps, speeds.samples)] == [True] * 20
    assert [v == pytest.approx(rows["p_c1"][row_of[round(float(t), 9)]], abs=1e-12)
            for t, v in zip(cmds.timestamps, cmds.samples)] == [True] * 20


def test_j1939_frames_are_logged_and_decode_into_the_recorded_signals(tmp_path):
    """The J1939 rest-bus (29-bit IDs, a J1939 DBC): EEC1's engine speed is the plant's, TSC1's torque the input."""
    from io_adapters.can import j1939 as j

    db = cantools.database.load_file(str(ROOT / "configs" / "powershift_j1939.dbc"))
    channel = f"recj-{uuid.uuid4().hex[:8]}"
    plant = load_plant("powershift")
    from io_adapters.base import create_adapter

    j1939 = create_adapter("j1939", "j1939", {"interface": "virtual", "channel": channel})
    folder = tmp_path / "rec"
    server = assemble(plant, [j1939], LoopConfig(mode="lockstep", rate_hz=1000.0, status_interval_s=0.0),
                      recording=RecordingConfig(folder=folder, chunk_s=1.0))
    server.loop.open()
    tcu = can.Bus(interface="virtual", channel=channel)
    sent = 0
    try:
        for _ in range(400):  # address claims done (250 ms), the cyclic messages running
            server.loop.step(1)
        while tcu.recv(0.0) is not None:
            pass
        assert server.recorder.start(signals=["w_1", "engine_torque"])["bus"] == ["j1939"]
        for cycle in range(20):
            pct = 10 + cycle
            tcu.send(can.Message(arbitration_id=j.frame_id(3, j.PGN_TSC1, 0x03, 0x00), is_extended_id=True,
                                 data=bytes((2 | 1 << 4 | 0xC0, 0xFF, 0xFF, pct + 125, 0xFF, 0xFF, 0xFF, 0xFF))))
            sent += 1
            for _ in range(10):
                server.loop.step(1)  # the rest-bus works between ticks, as the server's lockstep does
        received_by_tcu = 0
        while tcu.recv(0.0) is not None:
            received_by_tcu += 1
        server.recorder.stop(wait=True)
        status = server.recorder.status()
    finally:
        tcu.shutdown()
        server.close()
    rows = read_recording(folder)
    row_of = {round(t, 9): i for i, t in enumerate(rows["t"])}
    (f,) = recording_files(folder)
    with asammdf.MDF(f) as mdf:
        data, name, _ = mdf.extract_attachment(0)
        assert str(name).endswith("powershift_j1939.dbc")
        dbc_copy = tmp_path / "powershift_j1939.dbc"
        dbc_copy.write_bytes(data)
        assert np.all(mdf.get("CAN_DataFrame.IDE").samples == 1)
        direction = mdf.get("CAN_DataFrame.Dir").samples
        decoded = mdf.extract_bus_logging({"CAN": [(str(dbc_copy), 0)]})
    assert int(np.count_nonzero(direction == 0)) == sent
    assert int(np.count_nonzero(direction == 1)) == received_by_tcu  # every frame the rest-bus sent, none lost
    assert status["bus_frames"]["j1939"]["frames"] == sent + received_by_tcu
    eng_speed = db.get_message_by_name("EEC1").get_signal_by_name("EngSpeed")
    speeds = decoded.get("EngSpeed")
    assert len(speeds.samples) == 20  # EEC1 every 10 ms for 200 ms
    for t, v in zip(speeds.timestamps, speeds.samples):
        w = rows["w_1"][row_of[round(float(t), 9)]] * RPM
        assert v == eng_speed.conversion.raw_to_scaled(eng_speed.conversion.scaled_to_raw(min(max(w, 0.0), 8031.875)))
    torque = decoded.get("EngRqedTorque_TorqueLimit")
    assert len(torque.samples) == 20
    for t, v in zip(torque.timestamps, torque.samples):
        assert rows["engine_torque"][row_of[round(float(t), 9)]] == v * 1000.0 / 100.0  # % of 1000 N m reference
