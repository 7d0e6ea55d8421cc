"""UDS in the J1939 TCU emulator (examples/ecu_emulator_j1939.py): ISO-TP with normal fixed addressing (PGN 0xDA00),
its DTC memory fed by its own speed monitor, on the J1939 bench in lockstep; ETC2's gear ratio."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

import can
import pytest

from io_adapters.can import uds_server as us
from io_adapters.can.j1939_uds import j1939_addressing
from io_adapters.can.uds_tester import normal_fixed_ids

ROOT = Path(__file__).resolve().parent.parent
BENCHES = ROOT / "examples" / "benches"
BENCH = BENCHES / "uds_j1939_speed_sensor_dtc.toml"
sys.path.insert(0, str(ROOT / "examples"))

from ecu_diagnostics import DTC_SPEED_SENSOR, VIN  # noqa: E402
from ecu_emulator_j1939 import J1939TcuController, gear_ratio  # noqa: E402

CHANNEL = "gearbox-hil-j1939-uds"


def _bench(tmp_path: Path, text: str | None = None) -> tuple[Path, str]:
    """The J1939 UDS test file and its I/O config on a fresh virtual channel, in ``tmp_path``."""
    ch = f"j1939-uds-{uuid.uuid4().hex[:8]}"
    io = BENCHES / "io_uds_j1939_lockstep.toml"
    (tmp_path / io.name).write_text(io.read_text().replace(CHANNEL, ch))
    p = tmp_path / BENCH.name
    p.write_text((text or BENCH.read_text()).replace(CHANNEL, ch).replace(
        '"../ecu_emulator_j1939.py', f'"{ROOT / "examples" / "ecu_emulator_j1939.py"}'))
    return p, ch


def test_normal_fixed_ids():
    a = j1939_addressing(0x03)
    assert (a.request_id, a.response_id, a.functional_id, a.extended_id, a.fixed) == \
        (0x18DA03F1, 0x18DAF103, 0x18DBFFF1, True, True)
    assert normal_fixed_ids(0x03, 0xF9)["response_id"] == 0x18DAF903
    with pytest.raises(ValueError):
        normal_fixed_ids(0x03, 0x03)
    assert gear_ratio(1800.0, 37.5) == 48.0 and gear_ratio(1800.0, 5.0) == 0.0 and gear_ratio(None, 10.0) == 0.0
    assert gear_ratio(1800.0, -37.5) == 0.0 and gear_ratio(8000.0, 20.0) == 64.255  # SPN 526's range


def test_the_dtc_within_500_ms_of_the_speed_loss_on_the_j1939_bench_and_without_the_fault_fails(tmp_path):
    from server.testbench.runner import run_test
    from server.testbench.spec import load_test

    path, _ = _bench(tmp_path)
    res = run_test(load_test(path))
    assert res.passed, [v.message for v in res.verdicts if not v.passed]
    first = res.verdicts[0]
    t_conf = float(first.message.split("reached at t = ")[1].split(" s")[0])
    assert 1.2 <= t_conf <= 1.3  # ten failed 10 ms results after 100 ms without a speed frame, seen at a 50 ms poll

    text = BENCH.read_text()
    no_fault = text[:text.index("[[faults]]")] + text[text.index("[[expect]]"):]
    no_fault = no_fault.replace("after = { fault = 0 }", "after = 1.0")
    path, _ = _bench(tmp_path, no_fault)
    res = run_test(load_test(path))
    failed = [v for v in res.verdicts if not v.passed]
    assert [v.name for v in failed] == [first.name] and not failed[0].error
    assert "not reached within 0.5 s" in failed[0].message


def test_a_udsoncan_client_on_normal_fixed_addressing_and_etc2_carries_the_plants_ratio(tmp_path):
    """udsoncan over can-isotp's NormalFixed_29bits reads the DTC 10 ms of plant time after the request; the
    frames are on 0x18DA03F1 / 0x18DAF103; ETC2 carries the plant's ratio (input over output speed)."""
    import udsoncan

    from server.testbench.uds import UdsTesterConfig
    from server.testbench.uds_bench import UdsBench

    path, ch = _bench(tmp_path)
    io = path.parent / "io_uds_j1939_lockstep.toml"
    tester = UdsTesterConfig(**normal_fixed_ids(0x03, 0xF1))
    ctl = J1939TcuController(channel=ch)
    with UdsBench("powershift", io, ctl, tester) as bench:
        spy = can.Bus(interface="virtual", channel=ch, receive_own_messages=False)
        try:
            bench.run_for(1.5)  # address claim, TC1 asks for gear 3, the shift closes
            y = bench.last.y
            etc2 = bench.hil.status()["adapters"]["j1939"]["tcu"]["ETC2"]
            assert y["gear"] == 3 and ctl.tcu.result.gear_actual == 3
            # sent at most 100 ms ago in gear 3 (a fixed ratio); speeds as received over CAN, 0.001 resolution
            assert etc2["TransActualGearRatio"] == pytest.approx(y["ratio"], rel=2e-3) and y["ratio"] > 1.0
            bench.hil.set_fault({"target": "can", "message": "HIL_SpeedsA", "kind": "drop"})
            bench.run_for(0.3)
            while spy.recv(0.0) is not None:
                pass
            with bench.uds_client(data_identifiers={0xF190: udsoncan.AsciiCodec(17)}) as client:
                t0 = bench.t_s
                rsp = client.get_dtc_by_status_mask(us.CONFIRMED)
                assert bench.t_s - t0 == pytest.approx(0.01, abs=1e-9)  # the TCU's next 10 ms task
                assert {d.id: d.status.get_byte_as_int() for d in rsp.service_data.dtcs} == {DTC_SPEED_SENSOR: 0xAF}
                ids = set()
                while (m := spy.recv(0.0)) is not None:
                    if m.arbitration_id >> 16 & 0xFF in (0xDA, 0xDB):
                        ids.add(m.arbitration_id)
                assert ids == {0x18DA03F1, 0x18DAF103}
                assert client.read_data_by_identifier_first(0xF190) == VIN.decode()
                client.clear_dtc(0xFFFFFF)
                assert client.get_dtc_by_status_mask(us.CONFIRMED).service_data.dtcs == []
            st = ctl.tcu.uds.status()
            assert st["positive"] == 4 and st["negative"] == {} and st["transport_errors"] == {}
            j = bench.hil.status()["adapters"]["j1939"]
            assert sum(j["decode_errors_by_reason"].values()) == 0  # the rest-bus's nodes left the UDS frames alone
        finally:
            spy.shutdown()
