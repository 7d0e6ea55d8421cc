"""The Python client: endpoint discovery, array-format states decoded by name, errors and timeouts."""

from __future__ import annotations

import time

import pytest
import zmq

from io_adapters.zmq.client import HilClient, ServerError, State
from server_support import ServerProcess

ARRAY_FORMAT = """
[[adapters]]
type = "zmq"
name = "zmq"
state_endpoint = "tcp://127.0.0.1:*"
command_endpoint = "tcp://127.0.0.1:*"
control_endpoint = "tcp://127.0.0.1:*"
state_format = "array"
publish_every = 2
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    srv = ServerProcess(tmp_path_factory.mktemp("client"), mode="lockstep")
    yield srv
    srv.shutdown()


def test_client_discovers_endpoints_and_reads_the_plant(server):
    with server.client() as hil:
        assert set(hil.endpoints) == {"state", "command", "control", "zmq.state", "zmq.command", "zmq.control"}
        assert hil.endpoints["control"] == server.control
        d = hil.describe()
        assert d["kind"] == "powershift" and d["mode"] == "lockstep" and d["protocol"] == 1
        assert hil.input_names == [s["name"] for s in d["inputs"]]
        assert {"unit", "min", "max", "default"} <= set(d["inputs"][0])
        assert hil.ping()["server"] == "gearbox-hil"


def test_describe_names_each_adapters_endpoints_and_sends_a_client_to_its_own_sockets(tmp_path):
    """Two ZeroMQ adapters and a CAN share: no adapter's endpoint hides another's (each named ``<adapter>.<key>``),
    and each control socket's ``describe`` gives its own state and command sockets un-named."""
    second = ARRAY_FORMAT.replace('name = "zmq"', 'name = "zmq2"')
    share = '[[adapters]]\ntype = "can"\nname = "can"\ninterface = "virtual"\nchannel = "describe-test"\n' \
            '[adapters.share]\nport = 0\n'
    srv = ServerProcess(tmp_path, mode="lockstep", extra=share + second)
    try:
        ready = srv.endpoints
        for name in ("zmq", "zmq2"):
            with HilClient(ready[f"{name}.control"]).connect() as hil:
                ep = hil.plant["endpoints"]
                assert {k: ep[k] for k in ("state", "command", "control")} == \
                    {k: ready[f"{name}.{k}"] for k in ("state", "command", "control")}
                assert {k: v for k, v in ep.items() if "." in k} == ready  # the ready file's names and values
                assert ep["share"] == ready["can.share"]
                hil.subscribe(("state",))  # waits for the hello answer of the state socket it was sent to
        assert ready["zmq.state"] != ready["zmq2.state"]
    finally:
        srv.shutdown()


def test_state_stream_in_lockstep_carries_every_published_tick_and_the_ack(server):
    with server.client() as hil:
        hil.subscribe(("state",))
        hil.reset({"p_c1": 16.0, "p_c3": 16.0, "p_c6": 16.0})  # gear 1 engaged and held from t = 0
        seq = hil.set_inputs(engine_torque=200.0)
        # The command socket is not ordered with the control socket: step until a tick has applied it.
        for _ in range(200):
            r = hil.step(1)
            if hil.get()["u"]["engine_torque"] == 200.0:
                break
        else:
            pytest.fail("the command was never applied")
        k = r.tick
        s = hil.wait_for(lambda st: st.tick == k, 30.0)
        assert isinstance(s, State) and s.ack == seq and s.y == r.y and s.t == r.t
        before = hil.wait_for(lambda st: False, 0.05)  # nothing else is published without steps
        assert before is None
        r5 = hil.step(5)
        ticks = [hil.recv_state(30.0).tick for _ in range(5)]
        assert ticks == list(range(k + 1, k + 6)) and r5.tick == k + 5  # every tick, in order, none lost
        assert r5.y["gear"] == 1.0


def test_errors_are_typed_and_the_socket_survives_them(server):
    with server.client() as hil:
        with pytest.raises(ServerError) as ei:
            hil.set_params({"row.C1.gain_static": -1.0})
        assert ei.value.code == "param_error" and "row.C1.gain_static" in ei.value.message
        with pytest.raises(ServerError) as ei:
            hil.load_scenario(path="no/such/file.toml")
        assert ei.value.code == "scenario_error" and "no such scenario" in ei.value.message
        assert hil.ping()["ok"] is True  # the REQ socket is still usable


def test_a_missing_server_is_a_timeout_not_a_hang():
    ctx = zmq.Context.instance()
    s = ctx.socket(zmq.ROUTER)  # a peer that accepts connections and never answers
    port = s.bind_to_random_port("tcp://127.0.0.1")
    try:
        hil = HilClient(f"tcp://127.0.0.1:{port}", timeout_s=0.3)
        t0 = time.monotonic()
        with pytest.raises(TimeoutError, match="no reply"):
            hil.connect()
        assert time.monotonic() - t0 < 10.0
        hil.close()
    finally:
        s.close(0)


def test_array_format_states_decode_by_name_after_the_schema_check(tmp_path):
    with ServerProcess(tmp_path, mode="lockstep", adapters=ARRAY_FORMAT) as srv:
        with srv.client() as hil:
            hil.subscribe(("state",))
            r = hil.step(4, inputs={"p_c1": 16.0, "p_c3": 16.0, "p_c6": 16.0})
            s = hil.wait_for(lambda st: st.tick == 4, 30.0)
            assert s is not None and s.y == r.y  # names restored from the schema-checked order
            assert hil.status()["adapters"]["zmq"]["state_sent"] == 2  # every second tick
        srv.shutdown()


def test_subscribe_returns_once_the_subscription_is_live_so_the_first_step_loses_no_state(server):
    """The slow joiner: a SUB socket's subscription reaches the server some time after subscribe() returned, and
    the states published before it are lost.  subscribe() waits for the server's answer to a hello subscription
    (docs/protocol.md, 3.3): connect, subscribe, step 5 gets all 5 states, every time."""
    for _ in range(20):
        with server.client() as hil:
            hil.subscribe()
            r = hil.step(5)
            ticks = []
            for _ in range(5):
                s = hil.recv_state(2.0)
                ticks.append(None if s is None else s.tick)
            assert ticks == list(range(r.tick - 4, r.tick + 1))
            assert hil.recv_state(0.05) is None  # nothing else: no state twice


def test_a_subscriber_waits_for_the_hello_with_plain_pyzmq(server):
    """The handshake as docs/protocol.md 3.3 writes it, without the Python client."""
    import msgpack

    with server.client() as hil:
        ctx = zmq.Context.instance()
        sub = ctx.socket(zmq.SUB)
        sub.setsockopt(zmq.LINGER, 0)
        sub.connect(hil.endpoints["state"])
        try:
            sub.setsockopt(zmq.SUBSCRIBE, b"state")
            sub.setsockopt(zmq.SUBSCRIBE, b"hello/0123456789abcdef")
            assert sub.poll(10_000)
            topic, body = sub.recv_multipart()
            assert topic == b"hello/0123456789abcdef"
            hello = msgpack.unpackb(body)
            assert set(hello) == {"v", "seq"} and hello["v"] == 1
            sub.setsockopt(zmq.UNSUBSCRIBE, b"hello/0123456789abcdef")
            hil.step(3)
            states = [msgpack.unpackb(sub.recv_multipart()[1]) for _ in range(3) if sub.poll(5_000)]
            assert [s["seq"] for s in states] == [hello["seq"] + 1, hello["seq"] + 2, hello["seq"] + 3]
        finally:
            sub.close(0)
        assert hil.ping()["revision"] == 1 and hil.describe()["revision"] == 1
