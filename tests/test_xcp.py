"""The XCP-on-Ethernet adapter with pyxcp as the master (docs/xcp.md), against a lockstep server.

Connect, the A2L uploaded over GET_ID and parsed by pya2ldb, uploads equal to
the ZeroMQ state at the same tick, calibration bit-identical to
``set_params`` and refused out of range with nothing changed, atomic groups,
the reference page.  DAQ and fuzzing are in test_xcp_daq.py.
"""

from __future__ import annotations

import logging
import struct

import pytest

pytest.importorskip("pyxcp")
pytest.importorskip("pya2l")

from pyxcp.types import XcpResponseError  # noqa: E402

from io_adapters.xcp import codes as C  # noqa: E402
from tests.xcp_support import error_code, pyxcp_master, xcp_server  # noqa: E402

DRIVE = {"engine_torque": 300.0, "p_c1": 4.0}  # C1 half engaged: it slips, so its kinetic gain acts
GAIN = "row.C1.gain_kinetic"


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    s = xcp_server(tmp_path_factory.mktemp("xcp"))
    yield s
    s.shutdown()


@pytest.fixture(scope="module")
def a2l(srv, tmp_path_factory):
    """The A2L uploaded over GET_ID type 4, and its pya2ldb session."""
    import pya2l.model as model
    from pya2l import import_a2l

    with pyxcp_master(srv) as x:
        text = x.identifier(4)
        name = x.identifier(1)
    path = tmp_path_factory.mktemp("a2l") / f"{name}.a2l"
    path.write_text(text, encoding="latin-1")
    errors = _Errors()
    logging.getLogger().addHandler(errors)
    try:
        session = import_a2l(str(path), in_memory=True)
    finally:
        logging.getLogger().removeHandler(errors)
    assert errors.records == [], errors.records
    addresses = {m.name: m.ecu_address.address for m in session.query(model.Measurement)}
    addresses.update({c.name: c.address for c in session.query(model.Characteristic)})
    return text, name, addresses


class _Errors(logging.Handler):
    def __init__(self):
        super().__init__(logging.ERROR)
        self.records: list[str] = []

    def emit(self, record):
        self.records.append(record.getMessage())


def _value(x, address: int) -> float:
    return struct.unpack("<d", x.shortUpload(8, address, 0)[:8])[0]


def _write(x, address: int, value: float) -> None:
    x.shortDownload(address, 0, struct.pack("<d", value))


def test_connect_reports_the_limits_and_the_a2l_names_every_signal(srv, a2l):
    text, name, addresses = a2l
    assert name == "gearbox_hil_powershift"
    with pyxcp_master(srv) as x:
        props = x.slaveProperties
        assert (props.maxCto, props.maxDto, props.supportsDaq, props.supportsCalpag) == (252, 1400, True, True)
        assert x.getStatus().sessionStatus.daqRunning is False
    with srv.client() as c:
        got = c.get()
        params = c.get_params()
    assert len(got["y"]) == 56
    assert all(f"y.{o}" in addresses for o in got["y"]) and all(f"u.{i}" in addresses for i in got["u"])
    assert all(p in addresses for p in params if not p.startswith("watchdog."))
    assert "EPK" in text and "XCP_ON_UDP_IP" in text and "XCP_ON_TCP_IP" in text and "TYPEDEF_" not in text


def test_uploads_equal_the_zeromq_state_at_the_same_tick(srv, a2l):
    _, _, addresses = a2l
    with srv.client() as c:
        c.reset()
        states = c.subscribe()
        step = c.step(37, inputs=DRIVE)
        last = None
        while last is None or last.tick < step.tick:
            last = c.recv_state(timeout_s=10.0)
            assert last is not None, "no state message"
        got = c.get()
        with pyxcp_master(srv) as x:
            values = {name: _value(x, addresses[f"y.{name}"]) for name in got["y"]}
            inputs = {name: _value(x, addresses[f"u.{name}"]) for name in got["u"]}
            t = _value(x, addresses["time_s"])
            clock = x.getDaqClock().timestamp
        del states
    assert last.tick == got["tick"] == 37
    assert values == last.y == got["y"]  # float equality: bit for bit
    assert inputs == got["u"]
    assert t == last.t == got["t"]
    assert clock == 37 * 1000  # plant time in 1 us units


def _slipping_snapshot(c):
    c.reset()
    c.set_params({GAIN: 0.05})
    c.step(150, inputs=DRIVE)
    y = c.get()["y"]
    assert y["stuck_c1"] == 0.0 and abs(y["slip_c1"]) > 1e-3, "C1 must slip for its kinetic gain to act"
    c.snapshot_save("slipping")


def test_calibration_acts_on_the_next_tick_bit_identical_to_set_params(srv, a2l):
    _, _, addresses = a2l
    new = 0.03
    with srv.client() as c:
        _slipping_snapshot(c)
        base = c.step(1).y
        c.snapshot_restore("slipping")
        c.set_params({GAIN: 0.05})
        with pyxcp_master(srv) as x:
            _write(x, addresses[GAIN], new)
            assert _value(x, addresses[GAIN]) == new
        assert c.get_params([GAIN])[GAIN]["value"] == new
        by_xcp = [c.step(1).y, c.step(49).y]
        c.snapshot_restore("slipping")
        c.set_params({GAIN: new})
        by_params = [c.step(1).y, c.step(49).y]
        c.set_params({GAIN: 0.05})
    assert by_xcp == by_params
    assert base["torque_c1"] != by_xcp[0]["torque_c1"], "the new gain acts on the next tick"


def test_a_write_out_of_range_is_refused_and_changes_nothing(srv, a2l):
    _, _, addresses = a2l
    with srv.client() as c:
        _slipping_snapshot(c)
        before_params = c.get_params()
        before = c.get()
        with pyxcp_master(srv) as x:
            static = before_params["row.C1.gain_static"]["value"]
            for value in (-1.0, float("nan"), 2e9, static * 1.1):  # above gain_static: set_params' at_most bound
                with pytest.raises(XcpResponseError) as exc:
                    _write(x, addresses[GAIN], value)
                assert error_code(exc.value) == C.ERR_OUT_OF_RANGE
            assert _value(x, addresses[GAIN]) == 0.05
            with pytest.raises(XcpResponseError) as exc:  # measurements are read-only
                _write(x, addresses["y.w_1"], 1.0)
            assert error_code(exc.value) == C.ERR_WRITE_PROTECTED
        assert c.get_params() == before_params
        after = c.get()
        assert {k: after[k] for k in ("tick", "t", "u", "y")} == {k: before[k] for k in ("tick", "t", "u", "y")}


def test_a_calibration_group_applies_whole_or_not_at_all(srv, a2l):
    _, _, addresses = a2l
    static = "row.C1.gain_static"
    with srv.client() as c:
        _slipping_snapshot(c)
        old = {k: v["value"] for k, v in c.get_params([static, GAIN]).items()}
        with pyxcp_master(srv) as x:
            x.userCmd(C.USER_CAL_BEGIN, b"")
            _write(x, addresses[static], 0.5)
            _write(x, addresses[GAIN], -3.0)  # refused only at the end, with the whole group
            assert c.get_params([static])[static]["value"] == old[static]  # nothing applied before the end
            with pytest.raises(XcpResponseError) as exc:
                x.userCmd(C.USER_CAL_END, b"")
            assert error_code(exc.value) == C.ERR_OUT_OF_RANGE
            assert {k: v["value"] for k, v in c.get_params([static, GAIN]).items()} == old
            # a group whose values only fit together: kinetic above the old static, below the new one
            x.userCmd(C.USER_CAL_BEGIN, b"")
            _write(x, addresses[GAIN], old[static] * 1.5)
            _write(x, addresses[static], old[static] * 2.0)
            x.userCmd(C.USER_CAL_END, b"")
        got = {k: v["value"] for k, v in c.get_params([static, GAIN]).items()}
        assert got == {static: old[static] * 2.0, GAIN: old[static] * 1.5}
        c.set_params(old)


def test_the_reference_page_holds_the_values_at_start(srv, a2l):
    from plant_models.registry import load_plant

    _, _, addresses = a2l
    ref = {p.name: p.get() for p in load_plant("powershift").tunable_parameters()}[GAIN]  # the config's value
    work = ref * 0.5

    def running():
        return c.get_params([GAIN])[GAIN]["value"]

    with srv.client() as c:
        c.reset()
        with pyxcp_master(srv) as x:
            _write(x, addresses[GAIN], work)
            assert x.getPagProcessorInfo().maxSegments == 1
            x.setCalPage(C.CAL_MODE_XCP, 0, C.PAGE_REFERENCE)  # the master looks at the reference page
            assert _value(x, addresses[GAIN]) == ref
            with pytest.raises(XcpResponseError) as exc:
                _write(x, addresses[GAIN], 0.01)
            assert error_code(exc.value) == C.ERR_WRITE_PROTECTED
            assert running() == work  # the plant still runs on the working page
            x.setCalPage(C.CAL_MODE_ECU | C.CAL_MODE_XCP, 0, C.PAGE_REFERENCE)  # the plant runs on the reference
            assert x.getCalPage(C.CAL_MODE_ECU, 0) == C.PAGE_REFERENCE
            assert running() == ref
            x.setCalPage(C.CAL_MODE_XCP, 0, C.PAGE_WORKING)
            assert _value(x, addresses[GAIN]) == work  # the working page is kept meanwhile
            with pytest.raises(XcpResponseError) as exc:  # but not written while the plant runs the reference
                _write(x, addresses[GAIN], 0.01)
            assert error_code(exc.value) == C.ERR_ACCESS_DENIED
            x.setCalPage(C.CAL_MODE_ECU | C.CAL_MODE_XCP, 0, C.PAGE_WORKING)  # back: the working values again
            assert running() == work
            x.copyCalPage(0, C.PAGE_REFERENCE, 0, C.PAGE_WORKING)
            assert running() == ref and _value(x, addresses[GAIN]) == ref
            with pytest.raises(XcpResponseError) as exc:
                x.copyCalPage(0, C.PAGE_WORKING, 0, C.PAGE_REFERENCE)
            assert error_code(exc.value) == C.ERR_WRITE_PROTECTED


def test_the_a2l_command_writes_what_the_server_uploads(srv, a2l, tmp_path):
    from server.cli import main

    text, _, _ = a2l
    port = int(srv.endpoints["xcp.udp"].rsplit(":", 1)[1])
    out = tmp_path / "plant.a2l"
    assert main(["xcp-a2l", "powershift", "--port", str(port), "-o", str(out)]) == 0
    assert out.read_text(encoding="latin-1") == text


def test_a_bind_beyond_loopback_needs_insecure_remote():
    from io_adapters.xcp.adapter import XcpAdapter
    from plant_models.config import ConfigError

    with pytest.raises(ConfigError, match="insecure_remote"):
        XcpAdapter("xcp", {"host": "0.0.0.0"})
    XcpAdapter("xcp", {"host": "0.0.0.0", "insecure_remote": True})
    with pytest.raises(ConfigError, match="unknown|not allowed|allowed"):
        XcpAdapter("xcp", {"prot": 5555})


def test_the_command_line_option_adds_the_adapter(tmp_path):
    from server.testbench.local_server import LocalServer, write_io

    io = write_io(tmp_path / "io.toml")  # ZeroMQ only
    srv = LocalServer(tmp_path, "powershift", io, "lockstep", args=("--xcp-port", "0"))
    try:
        assert srv.endpoints["xcp.udp"].split(":")[-1] == srv.endpoints["xcp.tcp"].split(":")[-1]
        with pyxcp_master(srv, "UDP") as x:
            assert x.identifier(1) == "gearbox_hil_powershift"
    finally:
        srv.shutdown()
