"""The workspace's answers to hostile or careless clients (aiohttp's client against a lockstep server).

A page served under a name that merely starts with ``127.`` (DNS
rebinding) is refused; JSON nested thousands of levels deep gets a clean
error; every request gets its answer however many arrive at once; an
oversize WebSocket message closes the socket with 1009, not a reset; the
browser's icon request needs no token; a killed workspace process is
started again.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import struct
import time

import pytest

aiohttp = pytest.importorskip("aiohttp")

from server_support import FREE_PORTS, ServerProcess, wait_until  # noqa: E402

WEB = FREE_PORTS + '\n[[adapters]]\ntype = "web"\nname = "web"\nport = 0\nmax_request_bytes = 16384\n'
TOKEN = "s3cret-token-for-the-tests-0123456789"
REBOUND = "127.0.0.1.evil.example"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with ServerProcess(tmp_path_factory.mktemp("webhard"), mode="lockstep", adapters=WEB) as s:
        s.url = s.info["endpoints"]["web.url"]
        s.port = int(s.url.rsplit(":", 1)[1].strip("/"))
        yield s
        s.shutdown()


def _request(url: str, method: str = "GET", **kw):
    async def main():
        async with aiohttp.ClientSession() as http:
            async with http.request(method, url, **kw) as r:
                return r.status, await r.text()
    return asyncio.run(main())


def _ws_status(url: str, headers: dict) -> int:
    async def main():
        async with aiohttp.ClientSession() as http:
            try:
                async with http.ws_connect(url + "ws", headers=headers):
                    return 101
            except aiohttp.WSServerHandshakeError as exc:
                return exc.status
    return asyncio.run(main())


def _ping(url: str, host: str, origin: str | None = None) -> int:
    headers = {"Host": host} | ({"Origin": origin} if origin else {})
    return _request(url + "api/control", "POST", data=json.dumps({"cmd": "ping"}), headers=headers)[0]


def test_a_rebound_name_starting_with_127_is_refused_and_real_loopback_names_are_not(server):
    port = server.port
    bad = f"{REBOUND}:{port}"
    assert _ping(server.url, bad, f"http://{bad}") == 403
    assert _ping(server.url, bad) == 403
    assert _ws_status(server.url, {"Host": bad, "Origin": f"http://{bad}"}) == 403
    assert _request(server.url, headers={"Host": bad})[0] == 403
    for name in ("127.0.0.1", "127.1.2.3", "localhost", "[::1]"):  # 127.0.0.0/8, ::1 and localhost
        good = f"{name}:{port}"
        assert _ping(server.url, good, f"http://{good}") == 200, name
        assert _ws_status(server.url, {"Host": good, "Origin": f"http://{good}"}) == 101, name
    # an Origin must name an allowed host, even when the Host header is a loopback one
    assert _ping(server.url, f"127.0.0.1:{port}", f"http://{bad}") == 403
    with server.client() as c:  # the counters reach the server process a moment after the refusal
        refused = wait_until(lambda: (r := c.status()["adapters"]["web"]["http"]["refused"])["host"] >= 4
                             and r["origin"] >= 1 and r, 10)
    assert refused


def test_names_the_config_allows_are_accepted(tmp_path):
    adapters = FREE_PORTS + '\n[web]\nport = 0\nallowed_hosts = ["bench-pc.lab"]\n'
    with ServerProcess(tmp_path, mode="lockstep", adapters=adapters) as s:
        url = s.info["endpoints"]["web.url"]
        port = int(url.rsplit(":", 1)[1].strip("/"))
        assert _ping(url, f"bench-pc.lab:{port}", f"http://bench-pc.lab:{port}") == 200
        assert _ping(url, f"{REBOUND}:{port}", f"http://{REBOUND}:{port}") == 403
        s.shutdown()


def test_an_allowed_hosts_entry_must_be_a_list_of_names():
    from io_adapters.web.adapter import WebAdapter
    from plant_models.config import ConfigError

    with pytest.raises(ConfigError, match="allowed_hosts"):
        WebAdapter("web", {"allowed_hosts": "bench-pc"})
    with pytest.raises(ConfigError, match="allowed_hosts"):
        WebAdapter("web", {"allowed_hosts": ["bench pc:80"]})


def _deep(levels: int) -> str:
    return '{"cmd": "set_params", "params": ' + "[" * levels + "]" * levels + "}"


def test_deeply_nested_json_gets_a_clean_400_and_a_websocket_error(server):
    status, text = _request(server.url + "api/control", "POST", data=_deep(3000))
    assert status == 400 and "nested" in text

    async def main():
        async with aiohttp.ClientSession() as http:
            async with http.ws_connect(server.url + "ws") as ws:
                await ws.send_str('{"op": "control", "id": 1, "req": ' + _deep(3000) + "}")
                await ws.send_str(json.dumps({"op": "control", "id": 2, "req": {"cmd": "ping"}}))
                got = {}
                while len(got) < 2:
                    msg = await ws.receive(timeout=30)
                    assert msg.type == aiohttp.WSMsgType.TEXT, msg
                    m = json.loads(msg.data)
                    if m["op"] == "error":
                        got["error"] = m
                    elif m["op"] == "reply":
                        got["reply"] = m
                return got

    got = asyncio.run(main())
    assert "nested" in got["error"]["message"]
    assert got["reply"]["id"] == 2 and got["reply"]["reply"]["ok"]  # the socket stayed open and served on
    assert "Traceback" not in server.output() and "RecursionError" not in server.output()


def test_a_burst_of_100_bad_messages_gets_100_answers_and_a_request_after_them_its_reply(server):
    async def main():
        async with aiohttp.ClientSession() as http:
            async with http.ws_connect(server.url + "ws") as ws:
                for k in range(100):
                    await ws.send_str("{not json" if k % 2 else json.dumps({"op": f"nonsense{k}"}))
                await ws.send_str(json.dumps({"op": "control", "id": "last", "req": {"cmd": "ping"}}))
                errors, reply = 0, None
                while reply is None:
                    msg = await ws.receive(timeout=30)
                    assert msg.type == aiohttp.WSMsgType.TEXT, msg
                    m = json.loads(msg.data)
                    errors += m["op"] == "error"
                    if m["op"] == "reply":
                        reply = m
                return errors, reply

    errors, reply = asyncio.run(main())
    assert errors == 100
    assert reply["id"] == "last" and reply["reply"]["ok"]


def _handshake(port: int) -> tuple[socket.socket, bytes]:
    """An upgraded raw socket and the bytes after the 101 response read with it (the first frames, if any)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    sock.sendall(f"GET /ws HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                 "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head:
        part = sock.recv(4096)
        assert part, head
        head += part
    assert head.startswith(b"HTTP/1.1 101"), head
    return sock, head.split(b"\r\n\r\n", 1)[1]


def _close_code_after_oversize(port: int, size: int) -> int | str:
    """Send one masked text frame of ``size`` bytes; the close code the server answers with (or what went wrong)."""
    sock, data = _handshake(port)
    try:
        mask = b"\x01\x02\x03\x04"
        payload = bytes(b ^ mask[i % 4] for i, b in enumerate(b"x" * size))
        frame = b"\x81" + bytes([0x80 | 127]) + struct.pack(">Q", size) + mask + payload
        try:
            sock.sendall(frame)
        except OSError as exc:  # the server closed while the frame was on its way
            return f"send: {exc!r}"
        while True:
            try:
                part = sock.recv(1 << 16)
            except OSError as exc:
                return f"recv: {exc!r}"
            if not part:
                break
            data += part
        # the server's frames: skip text frames (hello, status), find the close frame
        k = 0
        while k + 2 <= len(data):
            op, n = data[k] & 0x0F, data[k + 1] & 0x7F
            k += 2
            if n == 126:
                n, k = struct.unpack(">H", data[k:k + 2])[0], k + 2
            elif n == 127:
                n, k = struct.unpack(">Q", data[k:k + 8])[0], k + 8
            if op == 0x8:
                return struct.unpack(">H", data[k:k + 2])[0]
            k += n
        return "no close frame"
    finally:
        sock.close()


def test_an_oversize_websocket_message_closes_with_1009_every_time(server):
    codes = [_close_code_after_oversize(server.port, size) for size in (20_000, 200_000, 1_000_000) * 3]
    assert codes == [1009] * 9


def test_the_icon_needs_no_token_and_the_page_names_an_inline_one(tmp_path):
    adapters = FREE_PORTS + f'\n[web]\nport = 0\ntoken = "{TOKEN}"\n'
    with ServerProcess(tmp_path, mode="lockstep", adapters=adapters) as s:
        url = s.info["endpoints"]["web.url"]
        assert _request(url + "favicon.ico")[0] in (200, 204)
        assert _request(url + "api/meta")[0] == 401  # the icon only
        status, page = _request(url + f"?token={TOKEN}")
        assert status == 200 and 'rel="icon" href="data:' in page
        s.shutdown()


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as fh:
            return not any(ln.startswith("State:") and "Z" in ln for ln in fh)
    except OSError:
        return False


def test_a_killed_workspace_process_is_started_again_on_the_same_port(tmp_path):
    with ServerProcess(tmp_path, mode="lockstep", adapters=WEB) as s:
        url = s.info["endpoints"]["web.url"]
        with s.client() as c:
            first = c.status()["adapters"]["web"]
            os.kill(first["pid"], signal.SIGKILL)
            assert wait_until(lambda: not _alive(first["pid"]), 20)
            again = wait_until(lambda: (w := c.status()["adapters"]["web"]).get("open") and w["pid"] != first["pid"]
                               and w, 60)
            assert again, c.status()["adapters"]["web"]
            assert again["endpoints"]["url"] == url and again["restarts"] == 1
        assert wait_until(lambda: _request(url)[0] == 200, 20)
        assert _ping(url, url.split("/")[2]) == 200
        out = s.output()
        assert "workspace process" in out and "started again" in out
        s.shutdown()
