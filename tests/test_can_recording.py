"""CAN recordings (BLF, ASC) read back with python-can hold every frame sent and received.

The adapter is closed right after the last tick, with command frames still
arriving, to show that closing loses nothing: frames the tick sent, frames
the receive thread handled and frames still waiting in the bus queue are
all in the file.
"""

from __future__ import annotations

from collections import Counter

import can
import cantools
import pytest

from can_support import BACKENDS, Harness, ROOT
from io_adapters.can.e2e import E2EEncoder

DBC = cantools.database.load_file(str(ROOT / "configs" / "powershift.dbc"))


def _read_back(path):
    reader = can.BLFReader(str(path)) if path.suffix == ".blf" else can.ASCReader(str(path))
    return list(reader)


@pytest.mark.parametrize("suffix", [".blf", ".asc"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_recording_holds_every_frame(tmp_path, backend, suffix):
    path = tmp_path / "rec" / f"can{suffix}"
    h = Harness(backend=backend, options={"record": str(path)})
    tcu = h.peer()
    enc = E2EEncoder(DBC.get_message_by_name("TCU_ClutchCmdA"), "ClutchCmdA_CRC", "ClutchCmdA_Counter", 0x0100)
    sent = []
    try:
        for c in range(30):
            data = enc.encode({"PressureCmd_C1": 0.5 * c, "PressureCmd_C2": 0.0, "PressureCmd_C3": 16.0,
                               "PressureCmd_C4": 0.0})
            if c % 7 == 3:
                data = data[:5]  # rejected frames are recorded too
            tcu.send(can.Message(arbitration_id=0x100, is_extended_id=False, data=data))
            sent.append((0x100, bytes(data)))
            h.wait_frames(len(sent))
            h.run(10)
        for c in range(50):  # a burst nobody waits for, then close at once
            data = bytes([c]) * 8
            tcu.send(can.Message(arbitration_id=0x7A0, is_extended_id=False, data=data))
            sent.append((0x7A0, data))
        h.run(3)
        n_tx = h.adapter.status()["tx"]["frames"]
        received_by_tcu = []
        while (m := tcu.recv(0.05)) is not None:
            received_by_tcu.append((m.arbitration_id, bytes(m.data)))
    finally:
        tcu.shutdown()
        h.close()
    rec = h.adapter.status()["recording"]
    assert rec["errors"] == 0 and rec["written"] == rec["queued"] == len(sent) + n_tx
    frames = _read_back(path)
    rx = Counter((m.arbitration_id, bytes(m.data)) for m in frames if m.is_rx)
    tx = Counter((m.arbitration_id, bytes(m.data)) for m in frames if not m.is_rx)
    assert rx == Counter(sent)
    assert sum(tx.values()) == n_tx == 3 * 5 * 10 + 3 + 2 * 3  # 303 ticks: five 10 ms, two 100 ms messages
    assert tx == Counter(received_by_tcu)  # exactly what went on the bus, byte for byte
    assert all(m.channel in (0, 1) for m in frames)


def test_recording_to_an_unknown_format_is_an_error(tmp_path):
    from io_adapters.base import AdapterError

    with pytest.raises(AdapterError, match=r"can: cannot record to .*can\.xyz"):
        Harness(options={"record": str(tmp_path / "can.xyz")})


LAZY_MF4 = r"""
import sys, uuid
import server.cli, server.serve  # the server's own imports
from io_adapters.base import LoopContext, create_adapter, new_tick_info
from plant_models.registry import load_plant

HEAVY = ("asammdf", "pandas", "pyarrow", "polars")


def run(options):
    plant = load_plant("powershift")
    ctx = LoopContext(period_s=0.001, feed_watchdog=lambda now: None, status=lambda: {}, tick_info=new_tick_info(),
                      mode="realtime")
    a = create_adapter("can", "can", {"interface": "virtual", "channel": f"lazy-{uuid.uuid4().hex[:8]}", **options})
    a.open(plant, ctx)
    for k in range(30):
        a.read(k, k * 1_000_000)
        plant.step(0.001)
        a.write(k + 1, k * 1_000_000)
        a.pump(0)
    a.close()
    return a.status()["tx"]["frames"]


run({})
print("served", sorted(m for m in HEAVY if m in sys.modules))
if len(sys.argv) > 1:  # a recording to MF4 loads python-can's MF4 writer then, and works
    sent = run({"record": sys.argv[1]})
    import can
    print("recorded", len(list(can.LogReader(sys.argv[1]))), "of", sent, "asammdf" in sys.modules)
"""


def test_a_process_that_does_not_record_mf4_imports_no_asammdf_and_mf4_recording_still_works(tmp_path):
    """python-can imports asammdf (and pandas, pyarrow) with can.io.mf4 when it is installed: ~90 MB and 3 threads
    in the server.  io_adapters.can defers it until a CAN recording to .mf4 asks for it."""
    import subprocess
    import sys

    args = [sys.executable, "-c", LAZY_MF4]
    has_asammdf = __import__("importlib").util.find_spec("asammdf") is not None
    if has_asammdf:
        args.append(str(tmp_path / "can.mf4"))
    out = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "served []" in out.stdout.splitlines()
    if has_asammdf:
        # 30 ticks: five 10 ms messages 3 times, two 100 ms ones once, each frame in the file
        assert "recorded 17 of 17 True" in out.stdout.splitlines(), out.stdout
