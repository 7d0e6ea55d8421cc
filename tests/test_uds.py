"""UDS on the bench: the TCU emulator's server (examples/ecu_diagnostics.py), the tester, the test files' dtc/did
expectations, the udsoncan client in lockstep, tester present over 30 min of plant time, fuzzed frames."""

from __future__ import annotations

import random
import sys
import uuid
from pathlib import Path

import can
import pytest

from io_adapters.can import uds_server as us
from plant_models.config import ConfigError
from server.testbench.uds import LockstepConnection, UdsTester, UdsTesterConfig

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "examples" / "benches" / "uds_speed_sensor_dtc.toml"
sys.path.insert(0, str(ROOT / "examples"))

from ecu_diagnostics import DTC_SPEED_SENSOR, DTCS, VIN, DiagnosticTcu, DiagnosticTcuController  # noqa: E402
from uds_support import run_periods, single_frame  # noqa: E402


# -- the DTC memory ------------------------------------------------------------------------------------------------
def test_status_bits_follow_iso_14229():
    mem = us.DtcMemory((us.Dtc(0x123456, "x", confirm_after=3, warning_lamp=True),))
    assert mem.status[0] == 0x50  # not completed since clear / this cycle
    mem.report(0, True)
    mem.report(0, True)
    assert mem.status[0] == us.TEST_FAILED | us.TEST_FAILED_THIS_CYCLE | us.PENDING | us.FAILED_SINCE_CLEAR == 0x27
    mem.report(0, True)  # the third in a row confirms, with the lamp
    assert mem.status[0] == 0x27 | us.CONFIRMED | us.WARNING_INDICATOR == 0xAF
    mem.report(0, False)
    assert mem.status[0] == 0x2E  # testFailed and the lamp off; confirmed, pending, this cycle's failure stay
    mem.new_cycle()
    assert mem.status[0] == 0x6C  # a new cycle: not completed this cycle; failed in the last one: still pending
    mem.report(0, False)
    mem.new_cycle()
    assert mem.status[0] == 0x68  # a cycle completed without failure: no longer pending; confirmed stays
    assert mem.matching(us.CONFIRMED) == [(0x123456, 0x68)] and mem.matching(us.TEST_FAILED) == []
    mem.clear(0xFFFFFF)
    assert mem.status[0] == 0x50 and mem.failed_in_row[0] == 0
    with pytest.raises(us.Nrc) as exc:
        mem.clear(0x000001)
    assert exc.value.code == 0x31


# -- services and negative responses, the TCU without a plant -----------------------------------------------------
class Rig:
    """The diagnostic TCU (``server_only``: its UDS server alone, without the shift task's frames) and a tester
    on a virtual bus of their own, on one 10 ms clock."""

    def __init__(self, server_only: bool = False, tester: UdsTesterConfig = UdsTesterConfig()):
        ch = f"uds-{uuid.uuid4().hex[:8]}"
        self.ecu_bus = can.Bus(interface="virtual", channel=ch, receive_own_messages=False)
        self.bus = can.Bus(interface="virtual", channel=ch, receive_own_messages=False)
        self.tcu = DiagnosticTcu(self.ecu_bus)
        self.server_only = server_only
        if server_only:
            self.tcu.uds = us.UdsServer(self.ecu_bus, DTCS, clock_ns=self.clock_ns)
        self.k = 0
        self.conn = LockstepConnection(self.bus, tester, self.advance, self.clock_ns).open()

    def clock_ns(self) -> int:
        return self.k * 10_000_000

    def advance(self) -> None:
        self.k += 1
        if not self.server_only:
            self.tcu.cycle(self.k * 0.01, 0.01)
            return
        while (m := self.ecu_bus.recv(0.0)) is not None:
            self.tcu.take(m)
        self.tcu.uds.cycle()

    def ask(self, payload: bytes, functional: bool = False) -> bytes | None:
        if functional:
            self.bus.send(can.Message(arbitration_id=0x7DF, is_extended_id=False,
                                      data=bytes((len(payload),)) + payload + b"\xCC" * (7 - len(payload))))
        else:
            self.conn.send(payload)
        try:
            return self.conn.wait_frame(0.1, exception=True)
        except Exception:
            return None

    def close(self) -> None:
        self.bus.shutdown()
        self.ecu_bus.shutdown()


@pytest.fixture
def rig():
    r = Rig()
    yield r
    r.close()


CASES = [  # (request, answer); None: no answer (suppressed)
    ("1001", "5001003201f4"), ("1002", "7f1012"), ("10", "7f1013"), ("100301", "7f1013"),
    ("22f190", "62f190" + VIN.hex()), ("221234", "7f2231"), ("22f1", "7f2213"),
    ("2e01200064", "7f2e7f"),  # write needs the extended session
    ("3101 0201", "7f317f"), ("1901ff", "5901ff010002"), ("190208", "5902ff"), ("1905", "7f1912"), ("1902", "7f1913"),
    ("14ffffff", "54"), ("14123456", "7f1431"), ("14ff", "7f1413"), ("3e00", "7e00"), ("3e01", "7f3e12"),
    ("3e80", None), ("85", "7f8511"), ("1104", "7f1112"),
    ("1083", None),  # to the extended session, silently
    ("2e01200064", "6e0120"), ("22 0120", "620120 0064"), ("2e01200005", "7f2e31"), ("2e012000", "7f2e13"),
    ("2ef19041", "7f2e31"), ("31030201", "7f3124"), ("31010201", "7101020100"), ("31030201", "7103020100"),
    ("31020201", "7f3112"), ("31019999", "7f3131"), ("3101", "7f3113"), ("2e01", "7f2e13"),
    ("1001", "5001003201f4"), ("31030201", "7f317f"),  # the default session: no routine control
    ("1003", "5003003201f4"), ("31030201", "7f3124"),  # the routine ended with the last extended session
    ("1101", "5101"), ("2e01200064", "7f2e7f"), ("2e01", "7f2e7f"),  # the reset: the default session again
]


def test_services_and_negative_responses(rig):
    for req, want in CASES:
        got = rig.ask(bytes.fromhex(req.replace(" ", "")))
        assert (got.hex() if got is not None else None) == (want.replace(" ", "") if want else None), req
    st = rig.tcu.uds.status()
    assert st["requests"] == len(CASES) and st["resets"] == 1 and st["session"] == 1
    assert st["positive"] + sum(st["negative"].values()) + st["suppressed"] == st["requests"]
    assert st["suppressed"] == 2 and st["transport_errors"] == {} and st["busy"] == 0


# can-isotp waits STmin before the first consecutive frame too, and until more than STmin has passed: at the ECU's
# 10 ms task, 20 ms spaces the frames 30 ms apart; a block size of 1 adds a flow control (a task) per frame
@pytest.mark.parametrize("stmin_ms, block_size, tasks", [(0, 0, 2), (0, 1, 3), (20, 0, 8), (25, 1, 9)])
def test_the_testers_stmin_and_block_size_time_the_answer_in_plant_time(stmin_ms, block_size, tasks):
    """The VIN's answer is a first frame and two consecutive frames; the flow control's STmin and block size
    spread them over the ECU's 10 ms tasks, the same way every run."""
    r = Rig(tester=UdsTesterConfig(stmin_ms=stmin_ms, block_size=block_size))
    try:
        k0 = r.k
        assert r.ask(bytes.fromhex("22f190")) == bytes.fromhex("62f190") + VIN
        assert r.k - k0 == tasks
    finally:
        r.close()


def test_functional_requests_keep_silent_on_the_codes_iso_14229_says(rig):
    assert rig.ask(bytes.fromhex("3e80"), functional=True) is None
    assert rig.ask(bytes.fromhex("221234"), functional=True) is None  # 0x31: silent when functional
    assert rig.ask(bytes.fromhex("85"), functional=True) is None  # 0x11: silent
    assert rig.ask(bytes.fromhex("190208"), functional=True).hex() == "5902ff"
    assert rig.ask(bytes.fromhex("2e01200064"), functional=True) is None  # 0x7F: silent
    st = rig.tcu.uds.status()
    assert st["functional_frames"] == 5 and st["suppressed"] == 4 and st["positive"] == 1


def test_s3_timeout_drops_to_the_default_session(rig):
    assert rig.ask(bytes.fromhex("1003"))[:2] == b"\x50\x03"
    for _ in range(499):  # 4.99 s: still within S3
        rig.advance()
    assert rig.tcu.uds.session == 3
    for _ in range(3):
        rig.advance()
    assert rig.tcu.uds.session == 1 and rig.tcu.uds.counters.s3_timeouts == 1


# -- test files -----------------------------------------------------------------------------------------------------
def _bench(tmp_path: Path, text: str | None = None) -> Path:
    ch = f"uds-{uuid.uuid4().hex[:8]}"
    io = BENCH.parent / "io_uds_lockstep.toml"
    (tmp_path / io.name).write_text(io.read_text().replace("gearbox-hil-uds", ch))
    p = tmp_path / BENCH.name
    p.write_text((text or BENCH.read_text()).replace("gearbox-hil-uds", ch).replace('"../ecu_diagnostics.py',
                                                                                 f'"{ROOT / "examples" / "ecu_diagnostics.py"}'))
    return p


def test_speed_sensor_loss_confirms_the_dtc_within_500_ms_and_without_the_fault_fails(tmp_path):
    from server.testbench.runner import run_test
    from server.testbench.spec import load_test

    res = run_test(load_test(_bench(tmp_path)))
    assert res.passed, [v.message for v in res.verdicts if not v.passed]
    first = res.verdicts[0]
    assert first.name.startswith("speed sensor DTC confirmed within 0.5 s")
    # no valid speed frame for 100 ms fails the test, ten failures in a row confirm: about 0.2 s, seen at a 50 ms poll
    t_conf = float(first.message.split("reached at t = ")[1].split(" s")[0])
    assert 1.2 <= t_conf <= 1.3

    text = BENCH.read_text()
    start = text.index("[[faults]]")
    no_fault = text[:start] + text[text.index("[[expect]]"):]
    no_fault = no_fault.replace("after = { fault = 0 }", "after = 1.0")
    res = run_test(load_test(_bench(tmp_path, no_fault)))
    failed = [v for v in res.verdicts if not v.passed]
    assert [v.name for v in failed] == [first.name] and not failed[0].error
    assert "not reached within 0.5 s" in failed[0].message


@pytest.mark.parametrize("edit, key, problem", [
    (("[uds]", "[udsx]"), "expect[0].dtc", "reads the ECU through the UDS tester: give the file a [uds] table"),
    (('status = "confirmedDTC"', 'status = "confirmed"'), "expect[0].status", "must be one of 'testFailed'"),
    (('status = "confirmedDTC"', 'status = "confirmedDTC"\neq = 1'), "expect[0].eq", "takes no bound"),
    (("after = { fault = 0 }", "after = { fault = 1 }"), "expect[0].after.fault", "there is no faults[1]"),
    (("dtc = 0x071531\nstatus", 'expr = "gear"\ndtc = 0x071531\nstatus'), "expect[0].expr", "not both"),
    (("did = 0x0100\neq = 3", "did = 0x0100"), "expect[2].did", "needs eq (a number or a text), min or max"),
    (("did = 0x0100", "did = 0x10000"), "expect[2].did", "must be <= 65535"),
    (("tester_present_s = 2.0", "tester_present_s = 5.0"), "uds.tester_present_s", "within S3"),
    (("response_id = 0x7E8", "response_id = 0x7E0"), "uds.response_id", "must differ"),
    (("p2_ms = 50.0", "p2_ms = 50.0\np3 = 1"), "uds.p3", "unknown key"),
    (('mode = "lockstep"', 'mode = "realtime"'), "uds", "needs mode = \"lockstep\""),
])
def test_bad_uds_specs_are_one_line(tmp_path, edit, key, problem):
    from server.testbench.spec import load_test

    text = BENCH.read_text()
    assert edit[0] in text
    if "realtime" in edit[1]:  # a controller class is refused in realtime before [uds] is read: give a command
        text = text.replace('class = "../ecu_diagnostics.py:DiagnosticTcuController"\nparams = { channel = '
                            '"gearbox-hil-uds" }', 'command = ["{python}", "x.py"]')
    with pytest.raises(ConfigError) as exc:
        load_test(_bench(tmp_path, text.replace(edit[0], edit[1], 1)))
    assert exc.value.key == key and problem in exc.value.problem, str(exc.value)
    assert "\n" not in str(exc.value)


# -- the udsoncan client in lockstep ------------------------------------------------------------------------------
def _io(tmp_path: Path) -> tuple[Path, str]:
    ch = f"uds-{uuid.uuid4().hex[:8]}"
    io = tmp_path / "io.toml"
    io.write_text((BENCH.parent / "io_uds_lockstep.toml").read_text().replace("gearbox-hil-uds", ch))
    return io, ch


def test_a_udsoncan_client_reads_the_dtc_within_50_ms_of_the_request(tmp_path):
    from server.testbench.uds_bench import UdsBench

    io, ch = _io(tmp_path)
    with UdsBench("powershift", io, DiagnosticTcuController(channel=ch)) as bench:
        bench.run_for(0.3)
        bench.hil.set_fault({"target": "can", "message": "HIL_SpeedsA", "kind": "drop"})
        bench.run_for(0.3)
        import udsoncan

        with bench.uds_client(data_identifiers={0xF190: udsoncan.AsciiCodec(17)}) as client:
            t0 = bench.t_s
            rsp = client.get_dtc_by_status_mask(0x08)
            took = bench.t_s - t0
            dtcs = {d.id: d.status.get_byte_as_int() for d in rsp.service_data.dtcs}
            assert dtcs == {DTC_SPEED_SENSOR: 0xAF}  # failed, confirmed, pending, lamp
            assert abs(took - 0.01) < 1e-9  # answered in the TCU's next 10 ms task (plant time: the same every run)
            assert client.read_data_by_identifier_first(0xF190) == VIN.decode()
            client.clear_dtc(0xFFFFFF)
            assert client.get_dtc_by_status_mask(0x08).service_data.dtcs == []
            bench.run_for(0.15)  # still failing: ten failed results in a row confirm it again
            rsp = client.get_dtc_by_status_mask(0x08)
            assert [d.id for d in rsp.service_data.dtcs] == [DTC_SPEED_SENSOR]


# -- tester present over 30 min of lockstep plant time --------------------------------------------------------------
def _hold_session(minutes: float, stop_tester_at_s: float | None) -> tuple[dict, dict]:
    """The TCU's UDS server (the same object its task runs, without the shift task's frames: a 10 ms task costs
    tens of microseconds, so 30 min of plant time take seconds) and the tester, ``minutes`` of plant time."""
    rig = Rig(server_only=True)
    cfg = UdsTesterConfig(session="extended", tester_present_s=2.0)
    tester = UdsTester(rig.bus, cfg, rig.clock_ns)
    try:
        for k in range(int(minutes * 60 * 100)):
            rig.advance()
            if stop_tester_at_s is None or rig.k * 0.01 < stop_tester_at_s:
                tester.update()
        return rig.tcu.uds.status(), tester.status()
    finally:
        rig.close()


def test_tester_present_holds_the_extended_session_for_30_minutes():
    srv, tst = _hold_session(30.0, None)
    assert srv["session"] == 3 and srv["s3_timeouts"] == 0
    # 0x10 0x03 at 0.01 s, then 0x3E 0x80 every 2 s: at 2.01, 4.01, ... 1798.01 s
    assert tst["session"] == 3 and tst["tester_present"] == 899 and tst["requests"] == 900
    assert srv["suppressed"] == tst["tester_present"] and srv["requests"] == tst["requests"]
    # the same without the tester after 60 s: the session drops 5 s after its last tester present
    srv, _ = _hold_session(2.0, 60.0)
    assert srv["session"] == 1 and srv["s3_timeouts"] == 1


# -- fuzzed frames --------------------------------------------------------------------------------------------------
VALID = [bytes.fromhex(h) for h in ("3e00", "1001", "1003", "190208", "1901ff", "22f190", "220100", "1101",
                                      "14ffffff", "31010201", "2e01200064", "3e80", "1083")]


def _single_frames(rng: random.Random, n: int) -> list[bytes]:
    """Single frames of requests: half of them well-formed (of every service), half random bytes after a SID."""
    sids = [0x10, 0x11, 0x14, 0x19, 0x22, 0x2E, 0x31, 0x3E, 0x85, 0x27]
    out = []
    for _ in range(n):
        if rng.random() < 0.5:
            body = rng.choice(VALID)
        else:
            body = bytes([rng.choice(sids + [rng.randrange(256)])]) + bytes(rng.randrange(256)
                                                                           for _ in range(rng.randrange(0, 7)))
        out.append(bytes((len(body),)) + body)
    return out


def test_fuzzed_frames_no_crash_exact_counters_plant_untouched(tmp_path):
    """10 348 frames on the TCU's UDS IDs while it holds gear 1 on CAN: counted exactly, the plant's run unchanged."""
    from server.testbench.uds_bench import UdsBench

    rng = random.Random(1234)
    runs = []
    for fuzz in (False, True):
        io, ch = _io(tmp_path)
        ctl = DiagnosticTcuController(channel=ch, shift_at_s=100.0)  # constant commands: gear 1 held
        sent = {"phys": 0, "func": 0, "func_sf": 0}

        def send(k: int, fuzzer: can.BusABC) -> None:
            if not fuzz or k == 0:  # the TCU opens its bus in its first task
                return
            frames = [(0x7E0 if rng.random() < 0.8 else 0x7DF, data)  # valid single frames: any service
                      for data in _single_frames(rng, 26)]
            frames += [(rng.choice((0x7E0, 0x7DF)), bytes(rng.randrange(256) for _ in range(rng.randrange(0, 9))))
                       for _ in range(26)]  # anything: first/consecutive/flow-control frames, bad lengths
            for can_id, data in frames:
                fuzzer.send(can.Message(arbitration_id=can_id, data=data, is_extended_id=False))
                sent["phys" if can_id == 0x7E0 else "func"] += 1
                sent["func_sf"] += can_id == 0x7DF and single_frame(data)

        with UdsBench("powershift", io, ctl) as bench:
            rows = run_periods(bench, ctl, 200, send)
            st = ctl.tcu.uds.status()
            runs.append((rows, st, sent, ctl.tcu.result.commands_sent))
    (rows0, st0, _, cmds0), (rows1, st1, sent, cmds1) = runs
    assert sent["phys"] + sent["func"] >= 10_000
    # counters exact: every frame of the physical ID taken by ISO-TP, every functional one counted
    assert st1["frames_in"] == sent["phys"] and st1["inbox_dropped"] == 0
    assert st1["functional_frames"] == sent["func"]
    assert st1["functional_ignored"] == sent["func"] - sent["func_sf"] and st1["functional_dropped"] == 0
    assert st1["requests"] == st1["positive"] + sum(st1["negative"].values()) + st1["suppressed"] + st1["busy"]
    assert st1["requests"] >= sent["func_sf"] and st1["positive"] > 0 and sum(st1["negative"].values()) > 0
    assert sum(st1["transport_errors"].values()) > 0  # the random frames did upset the transport, and were counted
    # the plant untouched: the same inputs and outputs in every period as without the fuzz
    assert cmds0 == cmds1 and rows0[5:] == rows1[5:]
    assert st0["requests"] == 0


def test_more_signals_than_a_tester_reads_is_one_line(tmp_path):
    from server.testbench.spec import load_test

    extra = "".join(f"\n[[expect]]\ndid = {0x1000 + i}\neq = 1\nat = 1.0\n" for i in range(60))
    with pytest.raises(ConfigError) as exc:
        load_test(_bench(tmp_path, BENCH.read_text() + extra))  # 5 + 60 signals
    assert exc.value.key == "expect" and "read 65 DTC bits and DIDs; a UDS tester reads at most 64" in exc.value.problem
