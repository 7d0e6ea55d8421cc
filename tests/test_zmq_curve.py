"""CURVE authentication of the ZeroMQ sockets, and the refusal to listen beyond loopback without it."""

from __future__ import annotations

import subprocess
import sys

import pytest
import zmq

from io_adapters.zmq.client import HilClient
from server_support import ROOT, ServerProcess, write_io

CURVE_PORTS = """
[[adapters]]
type = "zmq"
name = "zmq"
state_endpoint = "tcp://127.0.0.1:*"
command_endpoint = "tcp://127.0.0.1:*"
control_endpoint = "tcp://127.0.0.1:*"
curve_secret_key = "{keys}/server.key_secret"
curve_clients = "{keys}/clients"
"""


def _keys(folder, *args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "server.cli", "keys", *args, "--dir", str(folder)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def curve_server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("curve")
    keys = tmp / "keys"
    assert _keys(keys, "server").returncode == 0
    r = _keys(keys, "bench1", "--allow")
    assert r.returncode == 0, r.stderr
    assert _keys(keys, "stranger").returncode == 0  # a key pair, but not in the allow-list
    srv = ServerProcess(tmp, adapters=CURVE_PORTS.format(keys=keys))
    srv.keys = keys
    yield srv
    # shut down through an allowed client (ServerProcess.shutdown connects without keys)
    if srv.proc.poll() is None:
        with HilClient(srv.control, timeout_s=30, client_key=str(keys / "bench1.key_secret"),
                       server_key=str(keys / "server.key")) as c:
            c.shutdown()
        srv.proc.wait(timeout=60)
    srv.kill()


def test_keys_are_written_once_and_the_secret_is_private(curve_server):
    keys = curve_server.keys
    assert (keys / "clients" / "bench1.key").exists()
    assert (keys / "server.key_secret").stat().st_mode & 0o077 == 0
    again = _keys(keys, "server")
    assert again.returncode == 2 and "never overwritten" in again.stderr and again.stderr.count("\n") == 1


def test_an_allowed_client_commands_and_subscribes(curve_server):
    keys = curve_server.keys
    with HilClient(curve_server.control, timeout_s=30, client_key=str(keys / "bench1.key_secret"),
                   server_key=str(keys / "server.key")) as hil:
        assert hil.ping()["ok"] is True
        hil.subscribe()
        assert hil.recv_state(30.0) is not None
        seq = hil.set_inputs(p_c1=1.0)
        assert hil.wait_for(lambda s: s.ack >= seq, 30.0) is not None


@pytest.mark.parametrize("who", ["no keys", "unknown key"])
def test_a_client_without_an_allowed_key_is_refused(curve_server, who):
    keys = curve_server.keys
    kw = {} if who == "no keys" else {"client_key": str(keys / "stranger.key_secret"),
                                      "server_key": str(keys / "server.key")}
    c = HilClient(curve_server.control, timeout_s=2.0, **kw)
    with pytest.raises(TimeoutError) as ei:
        c.connect()
    c.close()
    assert "no reply" in str(ei.value)
    # nor does a raw subscriber without keys get a state
    sub = zmq.Context.instance().socket(zmq.SUB)
    sub.setsockopt(zmq.LINGER, 0)
    with HilClient(curve_server.control, timeout_s=30, client_key=str(keys / "bench1.key_secret"),
                   server_key=str(keys / "server.key")) as ok:
        sub.connect(ok.endpoints["state"])
        sub.subscribe(b"")
        assert not sub.poll(1500)
        st = ok.status()["adapters"]["zmq"]
    sub.close(0)
    assert st["received"] >= 0  # the server runs on


def test_a_bind_beyond_loopback_without_keys_refuses_to_start(tmp_path):
    plain = CURVE_PORTS.split("curve_secret_key")[0].replace("127.0.0.1", "0.0.0.0")
    io = write_io(tmp_path / "io.toml", adapters=plain)
    r = subprocess.run([sys.executable, "-m", "server.cli", "serve", "powershift", "--io", str(io), "--quiet"],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 2, r.stderr
    err = r.stderr.strip()
    assert err.count("\n") == 0 and str(io) in err and "without authentication" in err and "insecure_remote" in err


def test_insecure_remote_starts_and_warns(tmp_path):
    adapters = CURVE_PORTS.split("curve_secret_key")[0].replace("127.0.0.1", "0.0.0.0") + "insecure_remote = true\n"
    with ServerProcess(tmp_path, adapters=adapters) as srv:
        out = srv.output()
        srv.shutdown()
    assert "insecure_remote = true" in out and "WITHOUT authentication" in out


def test_the_docker_config_requires_its_keys():
    from plant_models.config import ConfigError
    from server.realtime import runtime

    io = runtime.load_io_config("io_docker")
    opts = io.adapters[0].options
    assert opts["curve_secret_key"] and opts["curve_clients"]
    if (ROOT / opts["curve_secret_key"]).exists():
        pytest.skip("this checkout has keys/ (a bench's own keys)")
    with pytest.raises(ConfigError) as ei:
        runtime.create_adapters(io)
    assert "curve_secret_key" in str(ei.value) and "cannot read the key file" in str(ei.value)
