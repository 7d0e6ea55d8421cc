"""The rest-bus's AUTOSAR CanNm state machine (io_adapters/can/nm.py) on the plant's clock, over the CAN adapter.

The shipped multiplexed set (configs/io_can_powershift_mux.toml) sends NM_HIL (0x510) every 100 ms with
an [nm] table: repeat message 1.5 s, NM timeout 2 s, wait bus sleep 1.5 s.  Each test runs the adapter
in lockstep tick by tick (1 ms) and asserts the tick of every state change and what the bus carried.
"""

from __future__ import annotations

import can
import pytest

from can_support import ROOT, Harness, wait_until
from io_adapters.can import nm as canm

MUX_SET = "io_can_powershift_mux"
NM_ID = 0x510
TCU_NM_ID = 0x503  # the TCU's NM PDU (node 3), inside rx_ids


@pytest.fixture
def rig():
    h = Harness(options={"message_set": MUX_SET}, mode="lockstep")
    bus = h.peer()
    yield h, bus
    bus.shutdown()
    h.close()


def run_watching(h, bus, n: int) -> tuple[list[tuple[int, str]], list[tuple[int, int]]]:
    """``n`` ticks: the (tick, state) changes and the (tick, frame ID) of every frame the rest-bus sent."""
    changes, frames_seen = [], []
    last = h.adapter.status()["nm"]["state"]
    for _ in range(n):
        h.run(1)
        while (m := bus.recv(0.0)) is not None:
            frames_seen.append((h.tick, m.arbitration_id))
        state = h.adapter._nm.status()["state"]
        if state != last:
            changes.append((h.tick, state))
            last = state
    return changes, frames_seen


def heard(h, bus, frame_id: int, data: bytes) -> None:
    """Another node's frame, handled by the adapter's receive thread before the next tick."""
    before = h.adapter.rx_handled
    bus.send(can.Message(arbitration_id=frame_id, is_extended_id=False, data=data))
    wait_until(lambda: h.adapter.rx_handled > before, what="the frame received")


def test_requested_repeat_message_then_normal_then_released_ready_sleep_prepare_bus_sleep_bus_sleep(rig):
    """Requested from the start: repeat message for 1.5 s, normal operation; NM_HIL every 100 ms in both.
    Released: ready sleep at once (NM_HIL no more, the other messages still), prepare bus sleep 2 s after the
    last NM_HIL sent (nothing sent), bus sleep 1.5 s later (nothing sent)."""
    h, bus = rig
    changes, sent = run_watching(h, bus, 3000)
    assert changes == [(1, "repeat_message"), (1501, "normal_operation")]  # the first tick starts it
    nm_ticks = [t for t, fid in sent if fid == NM_ID]
    assert nm_ticks == list(range(nm_ticks[0], 3001, 100)) and len(nm_ticks) == 30
    h.adapter.set_values(h.adapter.check_values({"nm_request": 0}))
    changes, sent = run_watching(h, bus, 4000)
    last_nm = nm_ticks[-1]
    assert changes == [(3001, "ready_sleep"), (last_nm + 2000, "prepare_bus_sleep"),
                       (last_nm + 3500, "bus_sleep")]
    assert [t for t, fid in sent if fid == NM_ID] == []
    assert {fid for t, fid in sent} and max(t for t, _ in sent) < last_nm + 2000  # silent from prepare bus sleep
    st = h.adapter.status()["nm"]
    assert st["frames_held"] > 0 and st["state"] == "bus_sleep" and st["timeouts"] == 0


def test_bus_sleep_woken_by_a_frame_ready_sleep_kept_by_the_tcus_nm_pdus(rig):
    """Not requested, the rest-bus sleeps and sends nothing; a frame wakes it: repeat message (NM_HIL sent) for
    1.5 s, then ready sleep; the TCU's NM PDU every 100 ms keeps it there; 2 s after the TCU's last one, prepare
    bus sleep."""
    h, bus = rig
    h.adapter.set_values({"nm_request": 0})  # before the first tick: the rest-bus starts asleep and stays so
    changes, sent = run_watching(h, bus, 500)
    assert changes == [] and sent == [] and h.adapter.status()["nm"]["state"] == "bus_sleep"
    heard(h, bus, 0x123, bytes(8))  # any frame (not of the message set: also counted as unknown)
    woke = h.tick + 1
    changes, sent = run_watching(h, bus, 1600)
    assert changes == [(woke, "repeat_message"), (woke + 1500, "ready_sleep")]
    assert sum(fid == NM_ID for _, fid in sent) == 15
    for _ in range(30):  # 3 s of the TCU's NM PDUs
        heard(h, bus, TCU_NM_ID, bytes((0x03, 0x10, 0, 0, 0, 0, 0, 0)))
        changes, sent = run_watching(h, bus, 100)
        assert changes == [] and all(fid != NM_ID for _, fid in sent)
    last_heard = h.tick - 100 + 1
    changes, _ = run_watching(h, bus, 2100)
    assert changes == [(last_heard + 2000, "prepare_bus_sleep")]
    st = h.adapter.status()
    assert st["nm"]["nm_pdus_heard"] == 30 and st["rx"]["rejected"]["unknown_id"] == 1  # the NM PDUs are not


def test_a_repeat_message_request_of_another_node_brings_normal_operation_back_to_repeat_message(rig):
    h, bus = rig
    run_watching(h, bus, 1600)
    assert h.adapter.status()["nm"]["state"] == "normal_operation"
    heard(h, bus, TCU_NM_ID, bytes((0x03, 0x11, 0, 0, 0, 0, 0, 0)))  # control bit vector: repeat message request
    at = h.tick + 1
    changes, _ = run_watching(h, bus, 1600)
    assert changes == [(at, "repeat_message"), (at + 1500, "normal_operation")]
    assert h.adapter.status()["nm"]["repeat_requests_heard"] == 1


def test_short_or_empty_nm_pdus_are_heard_and_never_crash(rig):
    h, bus = rig
    for data in (b"", b"\x03", bytes(8)):
        heard(h, bus, TCU_NM_ID, data)
    run_watching(h, bus, 10)
    assert h.adapter.status()["nm"]["nm_pdus_heard"] == 3 and h.adapter.status()["rx"]["rejected_total"] == 0


@pytest.mark.parametrize("edit, key", [
    (('pdu = "NM_HIL"', 'pdu = "TCU_ClutchCmd"'), "pdu"),  # a received message
    (("rx_ids = [0x500, 0x5FF]", "rx_ids = [0x600, 0x500]"), "rx_ids"),
    (("timeout_ms = 2000 ", "timeout_ms = 0 "), "timeout_ms"),
    (("request = true", "request = 1"), "request"),
    (("request = true", "request = true\nsleep = 1"), "sleep"),
])
def test_nm_table_errors_name_the_key(tmp_path, edit, key):
    from plant_models.config import ConfigError
    from plant_models.registry import load_plant

    from io_adapters.can.message_set import load_message_set

    text = (ROOT / "configs" / "io_can_powershift_mux.toml").read_text()
    assert edit[0] in text
    bad = tmp_path / "io_bad.toml"
    bad.write_text(text.replace(edit[0], edit[1]))
    (tmp_path / "powershift_mux.dbc").write_bytes((ROOT / "configs" / "powershift_mux.dbc").read_bytes())
    with pytest.raises(ConfigError, match=r"nm\." + key):
        load_message_set(bad, load_plant("powershift"), 0.001)


def test_state_machine_alone_on_a_clock():
    """The machine without a bus: the NM timeout restarts on every NM PDU sent or heard, and runs out in
    normal operation only when neither comes (counted, restarted)."""
    cfg = canm.NmConfig(0, "NM", 0x500, 0x5FF, 1500.0, 2000.0, 1500.0, True)
    nm = canm.CanNm(cfg, 2, 0x510)
    nm.step(0.0)
    assert nm.state == canm.REPEAT_MESSAGE and list(nm.allow) == [True, True]
    nm.step(1500.0)
    assert nm.state == canm.NORMAL_OPERATION
    nm.step(1999.0)
    assert nm.timeouts == 0
    nm.step(2000.0)
    assert nm.timeouts == 1  # nothing sent or heard for 2 s in network mode
    nm.step(2500.0)
    nm.pdu_sent()
    nm.step(2501.0)
    nm.step(4499.0)
    assert nm.timeouts == 1
    nm.request(False)
    nm.step(4500.0)
    assert nm.state == canm.READY_SLEEP and list(nm.allow) == [False, True]
    assert nm.heard(0x520, False, b"\x20\x00") and not nm.heard(0x510, False, b"") and not nm.heard(0x520, True, b"")
    nm.step(4600.0)
    nm.step(6599.0)
    assert nm.state == canm.READY_SLEEP
    nm.step(6600.0)
    assert nm.state == canm.PREPARE_BUS_SLEEP and list(nm.allow) == [False, False]


def test_a_realtime_tick_with_nm_takes_the_python_write_so_the_state_machine_steps():
    """The compiled ``send`` stage has no NM step: with ``[nm]`` the adapter offers none, and the loop's tick
    takes the Python stepper (its reason names the adapter); without ``[nm]`` it offers one."""
    with_nm = Harness(options={"message_set": MUX_SET}, mode="realtime")
    without = Harness(mode="realtime")
    try:
        assert with_nm.adapter._nm is not None and with_nm.adapter.compiled_write() is None
        assert without.adapter._nm is None and without.adapter.compiled_write() is not None
    finally:
        with_nm.close()
        without.close()
