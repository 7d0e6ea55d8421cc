"""UDS from the control channel: the ``uds`` adapter's tester, asked for by ZeroMQ control requests, against the
TCU emulator (examples/ecu_diagnostics.py) on the server's bus, in lockstep; bad requests; the held session."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

import can
import pytest

from io_adapters.can import uds_server as us
from io_adapters.can.uds_adapter import MAX_OUTSTANDING, decode_answer, service_payload
from io_adapters.protocol import ProtocolError
from io_adapters.zmq.client import ServerError

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))

from ecu_diagnostics import DTC_SPEED_SENSOR, DTCS, VIN, DiagnosticTcuController  # noqa: E402
from uds_support import run_periods  # noqa: E402

UDS_TABLE = '\n[[adapters]]\ntype = "uds"\nname = "uds"\ninterface = "virtual"\nchannel = "{ch}"\n'


def _io(tmp_path: Path, can_adapter: bool = True) -> tuple[Path, str]:
    """The UDS bench's I/O config with a uds adapter on a fresh virtual channel (no can adapter: ZeroMQ and uds)."""
    ch = f"uds-{uuid.uuid4().hex[:8]}"
    text = (ROOT / "examples" / "benches" / "io_uds_lockstep.toml").read_text().replace("gearbox-hil-uds", ch)
    if not can_adapter:
        text = text[:text.index('[[adapters]]\ntype = "can"')]
    io = tmp_path / f"io_{ch}.toml"
    io.write_text(text + UDS_TABLE.format(ch=ch))
    return io, ch


def _ask(bench, service: str, steps: int = 1, **args) -> dict:
    """One service through the control channel: the request, ``steps`` ECU periods, its result."""
    t = bench.hil.request("uds_request", service=service, **args)["ticket"]
    for _ in range(steps):
        bench.advance()
    return bench.hil.request("uds_result", ticket=t)


@pytest.mark.parametrize("fault", [True, False])
def test_a_zmq_client_reads_the_tcus_dtc_after_a_speed_sensor_loss(tmp_path, fault):
    from server.testbench.uds_bench import UdsBench

    io, ch = _io(tmp_path)
    with UdsBench("powershift", io, DiagnosticTcuController(channel=ch)) as bench:
        bench.run_for(0.3)
        if fault:
            bench.hil.set_fault({"target": "can", "message": "HIL_SpeedsA", "kind": "drop"})
        bench.run_for(0.3)
        r = _ask(bench, "read_dtc", mask=us.CONFIRMED)
        assert r["state"] == "answered" and r["positive"] and r["request"] == "190208"
        # sent by the pump after the request, answered in the TCU's next 10 ms task: one period of plant time
        assert r["answered_t"] - r["requested_t"] == pytest.approx(0.01, abs=1e-9)
        if not fault:
            assert r["dtcs"] == [] and r["response"] == "5902ff"
            return
        assert r["dtcs"] == [{"dtc": DTC_SPEED_SENSOR, "status": 0xAF,
                              "bits": ["testFailed", "testFailedThisOperationCycle", "pendingDTC", "confirmedDTC",
                                       "testFailedSinceLastClear", "warningIndicatorRequested"]}]
        vin = _ask(bench, "read_did", did=0xF190, steps=2)  # two consecutive frames: one period more
        assert vin["text"] == VIN.decode() and vin["did"] == 0xF190
        assert _ask(bench, "clear_dtc")["response"] == "54"
        assert _ask(bench, "read_dtc", mask=us.CONFIRMED)["dtcs"] == []
        # the extended session, a write and the routine; a reset returns the tester to the default session
        s = _ask(bench, "session", session="extended")
        assert (s["session"], s["p2_ms"], s["p2_star_ms"]) == (3, 50, 5000)
        assert _ask(bench, "write_did", did=0x0120, data="00c8")["response"] == "6e0120"
        assert _ask(bench, "read_did", did=0x0120)["value"] == 200
        assert _ask(bench, "routine", routine=0x0201, control="start")["record"] == "01"  # speeds lost
        bad = _ask(bench, "write_did", did=0x0120, data="0001")
        assert (bad["positive"], bad["nrc"], bad["nrc_name"]) == (False, 0x31, "requestOutOfRange")
        assert _ask(bench, "tester_present")["response"] == "7e00"
        assert _ask(bench, "reset", reset="soft")["response"] == "5103"
        st = bench.hil.status()["adapters"]["uds"]
        assert st["session"] == 1 and st["timeouts"] == 0 and st["answers"] == st["requests"] == 11
        assert ch and st["requests_rejected"] == {}
        assert bench.controller.tcu.uds.status()["session"] == 1


BAD = [  # (arguments of uds_request, error code, a part of the message)
    ({}, "bad_request", "'service' must be one of read_dtc, clear_dtc"),
    ({"service": "format_disk"}, "bad_request", "'service' must be one of"),
    ({"service": "read_dtc", "mask": 256}, "bad_request", "'mask' must be an integer 0 .. 0xFF, got 256"),
    ({"service": "read_dtc", "mask": True}, "bad_request", "'mask' must be an integer"),
    ({"service": "read_dtc", "did": 1}, "bad_request", "read_dtc takes mask, not 'did'"),
    ({"service": "read_did"}, "bad_request", "read_did needs 'did'"),
    ({"service": "read_did", "did": -1}, "bad_request", "'did' must be an integer 0 .. 0xFFFF"),
    ({"service": "write_did", "did": 0x120, "data": "zz"}, "bad_request", "'data' is not hex"),
    ({"service": "write_did", "did": 0x120, "data": "00" * 257}, "bad_request", "at most 256 bytes"),
    ({"service": "write_did", "did": 0x120, "data": ""}, "bad_request", "at least one byte"),
    ({"service": "write_did", "did": 0x120, "data": 12}, "bad_request", "'data' must be a hex string"),
    ({"service": "routine", "routine": 0x201, "control": "jump"}, "bad_request", "'control' must be one of start"),
    ({"service": "session", "session": "programming"}, "bad_request", "'session' must be one of default, extended"),
    ({"service": "reset", "reset": 7}, "bad_request", "'reset' must be one of hard, key_off_on, soft"),
    ({"service": "clear_dtc", "group": 1 << 24}, "bad_request", "'group' must be an integer 0 .. 0xFFFFFF"),
    ({"service": "tester_present", "wait": "yes"}, "bad_request", "'wait' must be true or false"),
    ({"service": "tester_present", "wait": True}, "wrong_mode", "'wait' is for realtime"),
    ({"service": "tester_present", "adapter": "can"}, "bad_request", "no adapter 'can' serves it"),
    ({"service": "tester_present", "colour": 1}, "bad_request", "unknown key 'colour'"),
]


def test_bad_uds_requests_get_clear_errors_counted_and_the_server_goes_on(tmp_path):
    from server.testbench.uds_bench import UdsBench

    io, ch = _io(tmp_path)
    with UdsBench("powershift", io, DiagnosticTcuController(channel=ch)) as bench:
        bench.run_for(0.1)
        for args, code, text in BAD:
            with pytest.raises(ServerError) as exc:
                bench.hil.request("uds_request", **args)
            assert exc.value.code == code and text in exc.value.message, (args, exc.value.message)
        for ticket, text in ((1, "no ticket 1"), ("1", "'ticket' must be the integer"), (None, "must be the integer")):
            with pytest.raises(ServerError) as exc:
                bench.hil.request("uds_result", ticket=ticket)
            assert exc.value.code == "bad_request" and text in exc.value.message
        # at most MAX_OUTSTANDING waiting: the next is refused, nothing queued for it
        tickets = [bench.hil.request("uds_request", service="tester_present")["ticket"] for _ in range(MAX_OUTSTANDING)]
        with pytest.raises(ServerError) as exc:
            bench.hil.request("uds_request", service="tester_present")
        assert exc.value.code == "bad_state" and "8 requests are waiting" in exc.value.message
        for _ in range(MAX_OUTSTANDING + 1):  # one request a period: each answered in the TCU's next task
            bench.advance()
        assert [bench.hil.request("uds_result", ticket=t)["response"] for t in tickets] == ["7e00"] * MAX_OUTSTANDING
        st = bench.hil.status()["adapters"]
        u = st["uds"]
        # every refusal counted where it was made: the unknown key and the adapter no uds adapter has are the
        # control handler's, the rest the adapter's (16 of BAD, 3 uds_result, the one beyond MAX_OUTSTANDING)
        assert u["requests_rejected"] == {"bad_request": 16 + 3, "wrong_mode": 1, "bad_state": 1}
        assert u["tickets"] == MAX_OUTSTANDING and u["requests"] == u["answers"] == MAX_OUTSTANDING
        assert st["zmq"]["control_errors"]["total"] == len(BAD) + 3 + 1
        before = bench.ticks
        bench.advance()  # still stepping, the TCU still driving the plant through CAN
        assert bench.last.tick == before + 10 and st["can"]["rx"]["accepted"] > 0


def test_request_and_answer_codecs():
    assert service_payload({"service": "routine", "routine": 0x0201, "control": "results"}) == bytes.fromhex("31030201")
    assert service_payload({"service": "write_did", "did": 0x0120, "data": "00C8"}) == bytes.fromhex("2e012000c8")
    assert service_payload({"service": "reset"}) == b"\x11\x01" and service_payload(
        {"service": "clear_dtc"}) == bytes.fromhex("14ffffff")
    with pytest.raises(ProtocolError):
        service_payload({"service": "read_did", "did": 1.5})
    d = decode_answer("read_did", bytes.fromhex("620100ff"))
    assert d == {"positive": True, "response": "620100ff", "did": 0x0100, "data": "ff", "value": 255}
    assert decode_answer("read_dtc", bytes.fromhex("7f1913"))["nrc_name"] == "incorrectMessageLengthOrInvalidFormat"
    assert decode_answer("read_dtc", bytes.fromhex("5902ff07153108"))["dtcs"] == [
        {"dtc": 0x071531, "status": 8, "bits": ["confirmedDTC"]}]


def test_the_held_session_survives_30_minutes_of_lockstep_plant_time(tmp_path):
    """The control channel opens the extended session; the adapter's tester keeps it with tester present for 30
    minutes of lockstep plant time (1 s steps; P2 2 s, so an answer read a step later is in time), the TCU's UDS
    server alone (no shift task: seconds, not minutes) answering once per plant second.  The same session opened
    by another tester's raw frame, which the adapter does not hold, drops once after S3 (a minute suffices).
    The plant is the single-clutch kinematic one: its steps are the cheapest, and the TCU needs none of them."""
    from server.testbench.uds_bench import InProcessServer
    from io_adapters.zmq.client import HilClient

    for through_adapter in (True, False):
        io, ch = _io(tmp_path, can_adapter=False)
        text = io.read_text().replace('control_endpoint = "tcp://127.0.0.1:*"\n',  # no state message per tick
                                      'control_endpoint = "tcp://127.0.0.1:*"\npublish_every = 1000\n')
        io.write_text(text + "p2_ms = 2000\n")
        with InProcessServer("kinematic", io) as srv, HilClient(srv.control, timeout_s=30.0).connect() as hil:
            ecu = can.Bus(interface="virtual", channel=ch, receive_own_messages=False)
            t_ns = [0]
            uds = us.UdsServer(ecu, DTCS, clock_ns=lambda: t_ns[0])
            try:
                hil.reset()
                if through_adapter:
                    t = hil.request("uds_request", service="session", session="extended")["ticket"]
                else:
                    other = can.Bus(interface="virtual", channel=ch, receive_own_messages=False)
                    other.send(can.Message(arbitration_id=0x7E0, is_extended_id=False, data=b"\x02\x10\x03"))
                    other.shutdown()
                for k in range(1, (30 * 60 if through_adapter else 60) + 1):  # one plant second a request
                    hil.step(1000, outputs=False)
                    t_ns[0] = k * 1_000_000_000
                    while (m := ecu.recv(0.0)) is not None:
                        if uds.accepts(m):
                            uds.feed(m)
                    uds.cycle()
                    if k == 1 and through_adapter:
                        r = hil.request("uds_result", ticket=t)  # the pump before the request read the answer
                        assert (r["state"], r["session"], r["answered_t"]) == ("answered", 3, 1.0)
                st = hil.status()["adapters"]["uds"]
                srv_st = uds.status()
            finally:
                ecu.shutdown()
        if through_adapter:
            assert srv_st["session"] == 3 and srv_st["s3_timeouts"] == 0
            # 0x10 0x03 at 0 s, answered at 1 s; then tester present once 2 s passed at a pump: after each step,
            # and mid-step when the state ring is half full, so each within 3 s of the last (S3: 5 s)
            n = st["tester_present"]
            assert 1800 / 3 < n <= 900 and srv_st["suppressed"] == n and st["session"] == 3
            assert st["requests"] == n + 1 and st["answers"] == 1 and st["timeouts"] == 0
        else:
            assert srv_st["session"] == 1 and srv_st["s3_timeouts"] == 1
            assert st["tester_present"] == 0 and st["unexpected"] == 1  # the answer to the other tester


def test_realtime_a_waiting_request_is_answered_by_the_tcu_on_its_own_clock(tmp_path):
    """Realtime: the TCU emulator runs its 10 ms task on the wall clock in a thread, the server ticks at 1 kHz; a
    request with ``wait`` is replied when its answer is there (no time is asserted: bench/bench_uds.py measures)."""
    import threading
    import time

    from server.testbench.uds_bench import InProcessServer
    from io_adapters.zmq.client import HilClient
    from ecu_diagnostics import DiagnosticTcu

    io, ch = _io(tmp_path)
    io.write_text(io.read_text() + "p2_ms = 1000\n")  # a loaded machine may hold the TCU's thread for a while
    with InProcessServer("powershift", io, mode="realtime") as srv, HilClient(srv.control, timeout_s=30.0).connect() \
            as hil:
        bus = can.Bus(interface="virtual", channel=ch, receive_own_messages=False)
        tcu = DiagnosticTcu(bus, shift_at_s=100.0)
        task = threading.Thread(target=tcu.run, args=(6.0,), daemon=True)
        try:
            task.start()
            vin = hil.request("uds_request", service="read_did", did=0xF190, wait=True)
            assert vin["state"] == "answered" and vin["text"] == VIN.decode()
            assert hil.request("uds_request", service="read_dtc", mask=us.TEST_FAILED, wait=True)["dtcs"] == []
            hil.set_fault({"target": "can", "message": "HIL_SpeedsA", "kind": "drop"})
            end = time.monotonic() + 4.0
            while time.monotonic() < end:  # confirmed 100 ms after the loss, on the TCU's clock
                dtcs = hil.request("uds_request", service="read_dtc", mask=us.CONFIRMED, wait=True)["dtcs"]
                if dtcs:
                    break
                time.sleep(0.05)
            assert [d["dtc"] for d in dtcs] == [DTC_SPEED_SENSOR]
            assert hil.status()["adapters"]["uds"]["requests_rejected"] == {}
        finally:
            task.join(timeout=10)
            bus.shutdown()
            hil.shutdown()


def test_fuzzed_answers_at_the_control_channels_tester_no_crash_exact_counters_plant_untouched(tmp_path):
    """10 200 random frames on the tester's response ID (0x7E8) while the control channel keeps a DTC read in flight
    every period: the uds adapter counts every frame, every ticket ends, the plant's run is the run without them."""
    import random

    from server.testbench.uds_bench import UdsBench

    rng = random.Random(3838)
    runs = []
    for fuzz in (False, True):
        io, ch = _io(tmp_path)
        ctl = DiagnosticTcuController(channel=ch, shift_at_s=100.0)  # constant commands: gear 1 held
        count = {"sent": 0, "refused": 0}
        tickets: list[int] = []
        with UdsBench("powershift", io, ctl) as bench:

            def send(k: int, fuzzer: can.BusABC) -> None:
                try:  # a single-frame answer: answered in the TCU's next task, unless the fuzz upset it
                    tickets.append(bench.hil.request("uds_request", service="read_dtc", mask=8)["ticket"])
                except ServerError as exc:  # eight still waiting (answers the fuzz garbled wait out P2)
                    assert exc.code == "bad_state"
                    count["refused"] += 1
                for _ in range(51 if fuzz else 0):  # any frame kind and length: single, first, consecutive, FC
                    data = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 9)))
                    fuzzer.send(can.Message(arbitration_id=0x7E8, data=data, is_extended_id=False))
                    count["sent"] += 1

            bench.advance()  # the TCU opens its bus in its first task
            assert bench.wait_commands(ctl.tcu.result.commands_sent)
            rows = run_periods(bench, ctl, 200, send)
            for _ in range(10):  # the last requests' answers
                bench.advance()
            results = [bench.hil.request("uds_result", ticket=t)["state"] for t in tickets[-64:]]
            u = bench.hil.status()["adapters"]["uds"]
        runs.append((rows, u, count["sent"], results, ctl.tcu.uds.status(), ctl.tcu.result.commands_sent,
                     count["refused"]))
    (rows0, u0, _, res0, _, cmds0, refused0), (rows1, u1, sent, res1, tcu1, cmds1, refused1) = runs
    assert sent == 200 * 51
    # every frame of the response ID counted: the fuzz and the TCU's own answers; none dropped by the bound
    assert u1["frames_in"] == sent + tcu1["frames_out"] and u1["inbox_dropped"] == 0
    # each request sent ended once, or waits; each ticket's request was sent or is queued
    assert u1["requests"] == u1["answers"] + u1["timeouts"] + u1["waiting"]
    assert u1["tickets"] == u1["requests"] + u1["queued"]
    assert u1["unexpected"] > 0 and sum(u1["transport_errors"].values()) > 0
    assert u1["requests_rejected"] == ({"bad_state": refused1} if refused1 else {}) and u1["tickets"] == 200 - refused1
    assert set(res1) <= {"answered", "timeout", "pending"} and res1.count("pending") == u1["queued"] + u1["waiting"]
    assert res0 == ["answered"] * 64 and u0["transport_errors"] == {}
    assert refused0 == 0 and u0["requests"] == u0["answers"] == 200
    assert cmds0 == cmds1 and rows0[5:] == rows1[5:]  # the plant untouched
