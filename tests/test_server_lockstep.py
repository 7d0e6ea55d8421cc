"""Lockstep over ZeroMQ: bit-identical to ``gearbox-hil simulate``, a closed-loop shift, bad input without harm.

One lockstep server (a subprocess on free ports) serves the whole module.
"""

from __future__ import annotations

import subprocess
import sys

import msgpack
import numpy as np
import pytest

from io_adapters.zmq.client import ServerError
from server.offline.run import read_trace_csv

from server_support import ROOT, ServerProcess, wait_until

sys.path.insert(0, str(ROOT / "examples"))
import closed_loop_swap  # noqa: E402


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    srv = ServerProcess(tmp_path_factory.mktemp("lockstep"), mode="lockstep")
    yield srv
    srv.shutdown()


@pytest.fixture
def hil(server):
    c = server.client()
    yield c
    try:
        c.unload_scenario()
    except ServerError:
        pass
    c.close()


def _vector(y: dict, names: list[str]) -> np.ndarray:
    return np.array([y[n] for n in names])


@pytest.mark.parametrize("scenario", ["powershift_single_swap", "powershift_double_swap"])
def test_lockstep_run_equals_the_offline_simulation_bit_for_bit(hil, tmp_path, scenario):
    out = tmp_path / "offline"
    subprocess.run([sys.executable, "-m", "server.cli", "simulate", "powershift", "--scenario", scenario,
                    "--out", str(out), "--quiet"], cwd=ROOT, check=True, timeout=600)
    header, offline = read_trace_csv(out / "trace.csv")
    names = header[1:]
    assert names == hil.output_names
    info = hil.load_scenario(scenario)
    assert info["n_steps"] == offline.shape[0] - 1
    y0 = hil.get()
    assert y0["tick"] == 0 and np.array_equal(_vector(y0["y"], names), offline[0, 1:])
    for k in range(1, info["n_steps"] + 1):
        r = hil.step(1)
        assert r.tick == k
        row = offline[k]
        assert r.t == pytest.approx(row[0], rel=1e-12)
        got = _vector(r.y, names)
        if not np.array_equal(got.view(np.int64), row[1:].view(np.int64)):
            bad = [n for n, a, b in zip(names, got, row[1:]) if a != b]
            pytest.fail(f"step {k}: lockstep differs from the offline run in {bad}")
    assert r.scenario_finished is True


def test_stepping_in_chunks_reaches_the_same_state_as_single_steps(hil):
    scenario = {"duration_s": 0.9, "dt_s": 0.001, "inputs": {
        "engine_torque": 300.0, "load_torque": 3500.0, "p_c3": 16.0, "p_c6": 16.0,
        "p_c1": [[0.0, 16.0], [0.5, 16.0], [0.6, 0.0]], "p_c2": [[0.0, 0.0], [0.5, 2.0], [0.6, 7.0], [0.7, 16.0]]}}
    hil.load_scenario(scenario=scenario)
    singles = [hil.step(1).y for _ in range(900)]
    hil.reset()
    ticks = 0
    for n in (1, 2, 3, 7, 50, 137, 300, 400):
        r = hil.step(n)
        ticks += n
        assert r.tick == ticks
        assert r.y == singles[ticks - 1]
    assert ticks == 900 and r.scenario_finished is True


def test_a_client_closes_the_loop_in_lockstep_and_sees_the_ratio_change(hil):
    ctl = closed_loop_swap.SwapController(closed_loop_swap.SwapPlan(duration_s=1.2))
    res = closed_loop_swap.run_lockstep(hil, ctl)
    assert res.gears == [1, 0, 3]  # gear 1, both first-stage clutches slipping, gear 3
    ratios = [r for _, g, r in res.gear_changes if g]
    assert ratios[0] == pytest.approx(48.0, rel=1e-12) and ratios[-1] == pytest.approx(32.0, rel=1e-12)
    assert [ph for _, ph in res.timeline] == ["hold", "torque", "inertia", "lock"]
    t_lock = res.timeline[-1][0]
    assert res.gear_changes[-1][0] == pytest.approx(t_lock, abs=0.0021)  # gear 3 as the on-coming clutch sticks


def test_bad_input_is_rejected_counted_and_leaves_the_plant_exactly_as_without_it(hil, server):
    inputs = {"p_c1": 16.0, "p_c3": 16.0, "p_c6": 16.0, "engine_torque": 250.0, "load_torque": 3000.0}
    # reference: the same good inputs, no bad ones
    hil.reset()
    ref = [hil.step(5, inputs=inputs).y]
    ref += [hil.step(5, inputs={"p_c2": 4.0 + k}).y for k in range(6)]
    before = hil.status()["adapters"]["zmq"]["rejected"]["by_reason"]
    hil.reset()
    got = [hil.step(5, inputs=inputs).y]
    bad_commands = [
        (b"\xc1\xc1\xc1", "malformed"),
        (msgpack.packb({"v": 1, "set": {"p_c1": "high"}}), "wrong_type"),
        (msgpack.packb({"v": 1, "set": {"p_c99": 1.0}}), "unknown_signal"),
        (msgpack.packb({"v": 1, "set": {"p_c1": float("nan")}}), "not_finite"),
        (msgpack.packb({"v": 1, "set": {"engine_torque": float("inf")}}), "not_finite"),
        (msgpack.packb({"v": 1, "set": {"p_c1": 41.0}}), "out_of_range"),
        (msgpack.packb({"v": 1, "set": {"p_c1": 1.0, "pad": "x" * 5000}}), "oversized"),
        (msgpack.packb({"v": 9, "set": {"p_c1": 1.0}}), "bad_version"),
        (msgpack.packb([1, 2, 3]), "bad_message"),
    ]
    bad_requests = [
        ({"v": 1, "cmd": "step", "n": 5, "set": {"p_c2": float("nan")}}, "not_finite"),
        ({"v": 1, "cmd": "step", "n": 5, "set": {"p_c2": 100.0}}, "out_of_range"),
        ({"v": 1, "cmd": "step", "n": 5, "set": {"p_c2": 5.0, "p_cx": 1.0}}, "unknown_signal"),
        ({"v": 1, "cmd": "step", "n": "5"}, "bad_request"),
        ({"v": 1, "cmd": "step", "n": 0}, "bad_request"),
        ({"v": 1, "cmd": "set", "set": {"p_c2": [1]}}, "wrong_type"),
        ({"v": 1, "cmd": "reset", "inputs": {"p_c2": -1.0}}, "out_of_range"),
        ({"v": 1, "cmd": "set_params", "params": {"row.C1.gain_static": float("inf")}}, "param_error"),
        ({"v": 1, "cmd": "set_params", "params": {"row.C1.gain_static": 1.0, "row.C1.gain_kinetic": 5.0}},
         "param_error"),
        ({"v": 1, "cmd": "load_scenario", "scenario": {"duration_s": -1}}, "scenario_error"),
        ({"v": 1, "cmd": "load_scenario", "path": "no_such_scenario_file"}, "scenario_error"),
        ({"v": 1, "cmd": "launch"}, "unknown_command"),
        ({"v": 1, "cmd": "status", "extra": 1}, "bad_request"),
        ({"cmd": "status"}, "bad_version"),
    ]
    params_before = hil.get_params()
    for k in range(6):
        for payload, _ in bad_commands:
            hil.send_raw_command(payload)
        req, code = bad_requests[k % len(bad_requests)]
        _raw_request_error(hil, req, code)
        got.append(hil.step(5, inputs={"p_c2": 4.0 + k}).y)
    for req, code in bad_requests:
        _raw_request_error(hil, req, code)
    for raw, code in ((b"\xc1", "malformed"), (msgpack.packb({"v": 1, "cmd": "x", "pad": b"0" * (2 << 20)}),
                                               "oversized")):
        _raw_bytes_error(hil, raw, code)
    # commands travel on another socket: wait until the server has seen all of them
    n_expected = 6 * len(bad_commands)
    after = wait_until(lambda: _rejects_if_total(hil, before, n_expected), timeout_s=60.0)
    assert after is not None, hil.status()["adapters"]["zmq"]["rejected"]
    expected = {}
    for _, reason in bad_commands:
        expected[reason] = expected.get(reason, 0) + 6
    assert {k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k, 0)} == expected
    # the outputs of every step equal the run without bad input, bit for bit, and no parameter moved
    assert got == ref
    assert hil.get_params() == params_before
    assert hil.status()["state"] == "running"


def _rejects_if_total(hil, before, n):
    by = hil.status()["adapters"]["zmq"]["rejected"]["by_reason"]
    return by if sum(by.values()) - sum(before.values()) >= n else None


def _raw_request_error(hil, req, code):
    import zmq

    sock = hil._req
    sock.send(msgpack.packb(req))
    assert sock.poll(60_000), f"no reply to {req}"
    rep = msgpack.unpackb(sock.recv(), raw=False)
    assert rep["ok"] is False and rep["error"]["code"] == code, (req, rep)
    assert isinstance(rep["error"]["message"], str) and rep["error"]["message"]
    del zmq


def _raw_bytes_error(hil, raw, code):
    sock = hil._req
    sock.send(raw)
    assert sock.poll(60_000)
    rep = msgpack.unpackb(sock.recv(), raw=False)
    assert rep["ok"] is False and rep["error"]["code"] == code, rep


def test_257_entries_of_one_name_are_bad_message_in_step_reset_set_and_a_command(hil):
    """A map of 257 entries naming p_c8 is refused whole on both sockets (repeated names count), nothing changes."""
    def entries(n):
        return b"\xde" + n.to_bytes(2, "big") + (msgpack.packb("p_c8") + msgpack.packb(7.0)) * n

    hil.reset()
    r0 = hil.step(2)
    before = hil.status()["adapters"]["zmq"]["rejected"]["by_reason"]["bad_message"]
    hil.send_raw_command(b"\x82\xa1v\x01\xa3set" + entries(257))
    assert wait_until(lambda: hil.status()["adapters"]["zmq"]["rejected"]["by_reason"]["bad_message"]
                      == before + 1, timeout_s=30.0)
    for head in (b"\x84\xa1v\x01\xa3cmd\xa4step\xa1n\x01\xa3set", b"\x83\xa1v\x01\xa3cmd\xa3set\xa3set",
                 b"\x83\xa1v\x01\xa3cmd\xa5reset\xa6inputs"):
        _raw_bytes_error(hil, head + entries(257), "bad_message")
    got = hil.get()
    assert got["tick"] == r0.tick and got["u"]["p_c8"] == 0.0  # not stepped, not set, not reset
    r = hil.step(1, inputs={"p_c8": 7.0})  # a map within the rule is applied
    assert r.tick == r0.tick + 1 and hil.get()["u"]["p_c8"] == 7.0


def test_lockstep_rejects_realtime_only_requests_and_reports_state(hil):
    hil.pause()
    with pytest.raises(ServerError) as ei:
        hil.step(1)
    assert ei.value.code == "bad_state"
    hil.start()
    assert hil.step(3).tick >= 3
    hil.stop()
    assert hil.status()["state"] == "stopped"
    r = hil.start()
    assert r["tick"] == 0  # a start after stop begins a fresh run
    with pytest.raises(ServerError) as ei:
        hil.unload_scenario()
    assert ei.value.code == "bad_state"


def test_parameters_are_tunable_and_change_the_physics(hil):
    name = "row.C2.gain_static"
    params = hil.get_params([name, "row.C2.gain_kinetic"])
    assert 0.0 < params["row.C2.gain_kinetic"]["value"] <= params[name]["value"]
    inputs = {"p_c1": 16.0, "p_c3": 16.0, "p_c6": 16.0, "p_c2": 3.0, "engine_torque": 300.0}
    hil.reset()
    base = hil.step(200, inputs=inputs).y["torque_c2"]
    k0 = params["row.C2.gain_kinetic"]["value"]
    hil.set_params({"row.C2.gain_static": params[name]["value"] * 2, "row.C2.gain_kinetic": k0 * 2})
    try:
        hil.reset()
        doubled = hil.step(200, inputs=inputs).y["torque_c2"]
    finally:
        hil.set_params({"row.C2.gain_kinetic": k0, name: params[name]["value"]})
    # clutch 2 slips (it is the on-coming clutch against gear 1): its torque is the Coulomb force k F_N,
    # plus oil-shear drag; doubling k doubles the Coulomb part
    assert abs(doubled) > 1.8 * abs(base)
