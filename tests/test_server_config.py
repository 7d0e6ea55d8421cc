"""I/O config and CLI errors: one clear line naming file, key and problem; never a traceback."""

from __future__ import annotations

import socket
import subprocess
import sys
import time

import pytest

from plant_models.config import ConfigError
from server.realtime import runtime
from server_support import FREE_PORTS, ROOT, ServerProcess


def build(tmp_path, text: str, **over):
    p = tmp_path / "io.toml"
    p.write_text(text)
    return runtime.build("powershift", p, **over), str(p)


@pytest.mark.parametrize("text, key, problem", [
    ('[loop]\nmode = "fast"\n', "loop.mode", "must be one of 'realtime', 'lockstep', 'afap', got 'fast'"),
    ("[loop]\nrate_hz = 50\n", "loop.rate_hz", "must be between 100 and 10000 Hz, got 50"),
    ("[loop]\nrate_hz = 20000\n", "loop.rate_hz", "must be between 100 and 10000 Hz, got 20000"),
    ("[loop]\nrat_hz = 500\n", "loop.rat_hz", "unknown key (check the spelling; see the default config for the keys)"),
    ('[loop]\nwait = "busy"\n', "loop.wait", "must be one of 'sleep', 'sleep_spin', 'spin', got 'busy'"),
    ('[loop]\nstatus_outputs = ["w_9"]\n', "loop.status_outputs", "'w_9' is not an output of the powershift plant"),
    ("[loop]\nring_rows = 8\n", "loop.ring_rows", "must be between 16 and 10000000 rows, got 8"),
    ('[[adapters]]\ntype = "zmq"\nsend_hwm = 0\n', "adapters[0].send_hwm", "must be >= 1, got 0"),
    ("[realtime]\nsched_fifo_priority = 120\n", "realtime.sched_fifo_priority", "must be <= 99, got 120"),
    ('[loop]\nwait = "spin"\n[realtime]\nsched_fifo_priority = 10\n', "realtime.sched_fifo_priority",
     'SCHED_FIFO with wait = "spin" starves the CPU'),
    ("[watchdog]\ntimeout_ms = 0\n", "watchdog.timeout_ms", "must be >= 0.1, got 0"),
    ('[watchdog]\nmodes = ["turbo"]\n', "watchdog.modes", "must be a list of loop modes (realtime, lockstep, afap)"),
    ("[watchdog.inputs.p_c9]\nsafe_value = 0.0\n", "watchdog.inputs.p_c9", "not an input of the powershift plant"),
    ("[watchdog.inputs.p_c1]\nsafe_value = 80.0\n", "watchdog.inputs.p_c1.safe_value",
     "p_c1: 80.0 outside [0, 40] bar"),
    ("[initial_inputs]\np_c1 = -2.0\n", "initial_inputs.p_c1", "p_c1: -2.0 outside [0, 40] bar"),
    ("[initial_inputs]\nturbo = 1.0\n", "initial_inputs.turbo", "not an input of the powershift plant"),
    ('[[adapters]]\ntype = "serial"\n', "adapters[0].type", "unknown adapter type 'serial'"),
    ('[[adapters]]\ntype = "zmq"\npublish_evry = 2\n', "adapters[0].publish_evry", "unknown key"),
    ('[[adapters]]\ntype = "zmq"\nstate_format = "json"\n', "adapters[0].state_format",
     "must be one of 'map', 'array', got 'json'"),
    ('[[adapters]]\ntype = "zmq"\nstate_endpoint = "localhost:5556"\n', "adapters[0].state_endpoint",
     "must be a ZeroMQ endpoint such as tcp://127.0.0.1:5556, got 'localhost:5556'"),
    ('[[adapters]]\ntype = "zmq"\n[[adapters]]\ntype = "zmq"\n', "adapters[1].name",
     "adapter name 'zmq' is used twice"),
    ("[loops]\nmode = 1\n", "loops", "unknown key"),
])
def test_config_errors_name_file_key_and_problem(tmp_path, text, key, problem):
    with pytest.raises(ConfigError) as ei:
        build(tmp_path, text)
    err = ei.value
    assert err.source == str(tmp_path / "io.toml") and err.key == key, str(err)
    assert problem in err.problem, str(err)


@pytest.mark.parametrize("text, overrides, option, problem", [
    ("", dict(rate_hz=50.0), "--rate", "must be between 100 and 10000 Hz, got 50"),
    ("", dict(duration_s=-1.0), "--duration", "must be >= 0 s, got -1"),
    ("[realtime]\nsched_fifo_priority = 10\n", dict(wait="spin"), "--wait", 'SCHED_FIFO with wait = "spin" starves'),
])
def test_command_line_overrides_are_checked_with_the_file_and_name_the_option(tmp_path, text, overrides, option,
                                                                              problem):
    with pytest.raises(ConfigError) as ei:
        build(tmp_path, text, **overrides)
    assert ei.value.source == option and ei.value.key == "" and ei.value.problem.startswith(problem), str(ei.value)


def test_the_default_io_config_is_loopback_zeromq_and_builds():
    io = runtime.load_io_config(None)
    assert io.source.endswith("configs/io_default.toml")
    zmq = [a for a in io.adapters if a.type == "zmq"]
    assert zmq and all("127.0.0.1" in v for k, v in zmq[0].options.items() if k.endswith("_endpoint"))
    assert io.loop.mode == "realtime" and io.loop.rate_hz == 1000.0 and io.loop.wait == "sleep_spin"
    assert io.loop.realtime.sched_fifo_priority == 0  # no privilege needed by default


def test_the_10khz_io_config_steps_at_100_us_and_sends_every_state_in_bursts_of_ten(tmp_path):
    """configs/io_10khz.toml in realtime: every state arrives, in order, although the publisher sends ten at a
    time; a pause sends the states of an unfinished burst, so the last one received is the paused tick's."""
    io = runtime.load_io_config("io_10khz")
    assert io.loop.rate_hz == 10000.0 and io.loop.wait == "spin"
    assert [a.type for a in io.adapters] == ["zmq"]
    assert all("127.0.0.1" in v for k, v in io.adapters[0].options.items() if k.endswith("_endpoint"))
    with ServerProcess(tmp_path, io="io_10khz", args=("--zmq-port", "0")) as srv:
        with srv.client() as hil:
            assert hil.describe()["period_s"] == pytest.approx(1e-4)
            zs = hil.status()["adapters"]["zmq"]
            assert zs["publish_batch"] == 10 and zs["publish_every"] == 1
            hil.subscribe(("state",))
            time.sleep(0.5)  # the subscription reaches the server; thousands of ticks
            hil.pause()
            tick = hil.status()["tick"]
            states = []
            while (s := hil.recv_state(1.0)) is not None:
                states.append(s)
            assert len(states) > 100 and states[-1].tick == tick  # nothing of the last burst held back
            assert [s.tick for s in states] == list(range(states[0].tick, tick + 1))
            assert [s.seq for s in states] == list(range(states[0].seq, states[0].seq + len(states)))
        srv.shutdown()


def test_disabled_adapters_are_skipped(tmp_path):
    srv, _ = build(tmp_path, '[[adapters]]\ntype = "serial"\nenabled = false\n')
    assert srv.loop.adapters == ()


def _serve(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "server.cli", "serve", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout)


def test_cli_errors_are_one_line_and_exit_2(tmp_path):
    r = _serve("powershift", "--rate", "50")
    assert r.returncode == 2 and r.stderr.strip() == "gearbox-hil: error: --rate: must be between 100 and 10000 Hz, got 50"
    r = _serve("no_such_plant")
    assert r.returncode == 2 and "no_such_plant" in r.stderr and "Traceback" not in r.stderr
    bad = tmp_path / "io.toml"
    bad.write_text("[loop]\nmode = 3\n")
    r = _serve("powershift", "--io", str(bad))
    assert r.returncode == 2 and r.stderr.strip() == f"gearbox-hil: error: {bad}: loop.mode: must be a string, got number 3"


def test_a_port_in_use_is_a_clear_error(tmp_path):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    port = s.getsockname()[1]
    try:
        io = tmp_path / "io.toml"
        io.write_text(FREE_PORTS.replace('control_endpoint = "tcp://127.0.0.1:*"',
                                         f'control_endpoint = "tcp://127.0.0.1:{port}"'))
        r = _serve("powershift", "--io", str(io), "--duration", "1")
    finally:
        s.close()
    assert r.returncode == 2, r.stderr
    assert f"gearbox-hil: error: control_endpoint: cannot bind tcp://127.0.0.1:{port}: Address already in use" in r.stderr
    assert "Traceback" not in r.stderr
