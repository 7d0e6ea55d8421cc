"""The web workspace over HTTP and WebSocket (aiohttp's client) against lockstep servers.

What the page plots are the state ring's values, the same as the ZeroMQ state
stream's for the same ticks; control from the page goes through the server's
one control handler (a fault is active at the next tick, an out-of-range
parameter is refused and changes nothing, a snapshot restore repeats the run
bit for bit); and the security rules: token, Host, Origin, sizes, and no
start beyond loopback without a token.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time

import numpy as np
import pytest

aiohttp = pytest.importorskip("aiohttp")

from server_support import FREE_PORTS, ROOT, ServerProcess, wait_until  # noqa: E402

WEB = FREE_PORTS + '\n[[adapters]]\ntype = "web"\nname = "web"\nport = 0\n'
TOKEN = "s3cret-token-for-the-tests-0123456789"
GEAR1 = {"p_c1": 16.0, "p_c3": 16.0, "p_c6": 16.0, "engine_torque": 300.0, "load_torque": 3500.0}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with ServerProcess(tmp_path_factory.mktemp("web"), mode="lockstep", adapters=WEB) as s:
        s.url = s.info["endpoints"]["web.url"]
        yield s
        s.shutdown()


@pytest.fixture(scope="module")
def token_server(tmp_path_factory):
    # the [web] table form of the config, with a token
    with ServerProcess(tmp_path_factory.mktemp("webtoken"), mode="lockstep",
                       adapters=FREE_PORTS + f'\n[web]\nport = 0\ntoken = "{TOKEN}"\nmax_request_bytes = 4096\n') as s:
        s.url = s.info["endpoints"]["web.url"]
        yield s
        s.shutdown()


class Page:
    """A WebSocket session as the page has it: subscribe, control, collected rows and status."""

    def __init__(self, ws):
        self.ws = ws
        self.rows: dict[int, dict] = {}  # tick -> {signal: value, "t": ..., "faults": ...}
        self.status = None
        self.hello = None
        self._id = 0

    async def next_of(self, op: str, timeout_s: float = 30.0) -> dict:
        end = time.monotonic() + timeout_s
        while True:
            msg = await self.ws.receive(timeout=max(0.01, end - time.monotonic()))
            if msg.type != aiohttp.WSMsgType.TEXT:
                return {"op": "closed", "type": msg.type, "data": msg.data}
            m = json.loads(msg.data)
            self._note(m)
            if m["op"] == op:
                return m

    def _note(self, m: dict) -> None:
        if m["op"] == "hello":
            self.hello = m
        elif m["op"] == "status":
            self.status = m["status"]
        elif m["op"] == "rows":
            for j, tick in enumerate(m["tick"]):
                self.rows[tick] = {"t": m["t"][j], "faults": m["faults"][j],
                                   **{n: v[j] for n, v in m["values"].items()}}

    async def subscribe(self, names: list[str]) -> dict:
        await self.ws.send_str(json.dumps({"op": "subscribe", "signals": names}))
        m = await self.next_of("subscribed")
        return m

    async def control(self, cmd: str, **args) -> dict:
        self._id += 1
        await self.ws.send_str(json.dumps({"op": "control", "id": self._id, "req": {"v": 1, "cmd": cmd, **args}}))
        while True:
            m = await self.next_of("reply")
            if m["id"] == self._id:
                return m["reply"]

    async def rows_until(self, tick: int, timeout_s: float = 30.0) -> None:
        end = time.monotonic() + timeout_s
        while not self.rows or max(self.rows) < tick:
            await self.next_of("rows", max(0.01, end - time.monotonic()))


def run_page(url: str, body, token: str | None = None):
    """Run ``await body(page)`` in a WebSocket session to the workspace at ``url``."""

    async def main():
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        async with aiohttp.ClientSession(headers=headers) as http:
            async with http.ws_connect(url + "ws") as ws:
                page = Page(ws)
                await page.next_of("hello")
                return await body(page)

    return asyncio.run(main())


def test_plotted_values_equal_the_state_streams_values_for_the_same_ticks(server):
    names = ["w_out", "slip_c1", "slip_c2", "pressure_c2", "gear"]
    with server.client() as zc:
        zc.subscribe(("state",))
        time.sleep(0.3)  # the SUB socket's subscription reaches the server

        async def body(page):
            assert (await page.subscribe(names))["signals"] == names
            assert (await page.control("reset", inputs={}))["ok"]
            assert (await page.control("load_scenario", path="powershift_single_swap.toml"))["ok"]
            rep = await page.control("step", n=700)
            assert rep["ok"] and rep["tick"] == 700, rep
            await page.rows_until(700)
            return page

        page = run_page(server.url, body)
        states = {}
        while 700 not in states:
            s = zc.recv_state(5.0)
            assert s is not None, f"the state stream stopped at tick {max(states, default=0)}"
            states[s.tick] = s
        zc.unload_scenario()
    every = page.hello["every"]
    assert every == 10  # 1 kHz shown at the default display_hz of 100
    ticks = sorted(t for t in page.rows if 1 <= t <= 700)
    assert ticks == list(range(every, 701, every))  # every display row arrived, none twice, none skipped
    for tick in ticks:
        row, s = page.rows[tick], states[tick]
        assert row["t"] == s.t
        for n in names:
            assert row[n] == s.y[n], (tick, n)  # the same float64, bit for bit
    assert page.rows[700]["gear"] == states[700].y["gear"] == 3.0  # the 1 -> 3 swap is over by 0.7 s


def test_a_fault_set_from_the_page_is_active_at_the_next_tick_and_in_the_status(server):
    async def body(page):
        await page.subscribe(["w_out"])
        assert (await page.control("reset", inputs=GEAR1))["ok"]
        before = await page.control("step", n=10)
        rep = await page.control("fault_set", fault={"target": "signal", "kind": "force", "signal": "w_out",
                                                     "value": 123.25, "name": "web-force"})
        assert rep["ok"], rep
        after = await page.control("step", n=10)
        await page.rows_until(after["tick"])
        # the status the page receives lists it (sent a few times a second)
        end = time.monotonic() + 10
        while not any(f["name"] == "web-force" for f in (page.status or {}).get("faults", [])):
            assert time.monotonic() < end, page.status
            await page.next_of("status", 10)
        assert (await page.control("fault_clear", name="web-force"))["ok"]
        return before, after, page

    before, after, page = run_page(server.url, body)
    assert before["y"]["w_out"] != 123.25
    assert after["y"]["w_out"] == 123.25
    assert page.rows[after["tick"]]["w_out"] == 123.25 and page.rows[after["tick"]]["faults"] == 1
    assert page.rows[before["tick"]]["faults"] == 0


def test_an_out_of_range_parameter_edit_is_refused_and_changes_nothing(server):
    async def body(page):
        params = (await page.control("get_params"))["params"]
        name = next(n for n, p in params.items() if p["type"] == "float" and p["max"] < 1e6)
        bad = params[name]["max"] * 10 + 1
        rep = await page.control("set_params", params={name: bad})
        return name, params, rep, (await page.control("get_params"))["params"]

    name, before, rep, after = run_page(server.url, body)
    assert not rep["ok"] and rep["error"]["code"] == "param_error"
    assert name in rep["error"]["message"]
    assert after == before


def test_a_snapshot_restore_from_the_page_repeats_the_run_bit_for_bit(server):
    async def body(page):
        await page.subscribe(["w_out", "slip_c2"])
        assert (await page.control("reset", inputs=GEAR1))["ok"]
        await page.control("step", n=100)
        assert (await page.control("snapshot_save", name="web-test"))["ok"]
        first = await page.control("step", n=300)
        await page.rows_until(first["tick"])
        rows1 = {t: r for t, r in page.rows.items() if 100 < t <= 400}
        restored = await page.control("snapshot_restore", name="web-test")
        assert restored["ok"], restored
        page.rows.clear()
        second = await page.control("step", n=300)
        await page.rows_until(second["tick"])
        rows2 = {t: r for t, r in page.rows.items() if 100 < t <= 400}
        return first, second, rows1, rows2

    first, second, rows1, rows2 = run_page(server.url, body)
    assert first["tick"] == second["tick"] == 400
    assert first["y"] == second["y"]
    assert len(rows1) == 30 and rows1 == rows2


def test_bad_messages_get_an_error_and_change_nothing(server):
    async def body(page):
        t0 = (await page.control("get"))
        await page.ws.send_str("{not json")
        e1 = await page.next_of("error")
        await page.ws.send_str(json.dumps({"op": "subscribe", "signals": ["no_such_signal"]}))
        e2 = await page.next_of("error")
        bad = await page.control("step", n=-3)
        unknown = await page.control("launch_missiles")
        return t0, e1, e2, bad, unknown, await page.control("get")

    t0, e1, e2, bad, unknown, t1 = run_page(server.url, body)
    assert "not JSON" in e1["message"] and "no_such_signal" in e2["message"]
    assert not bad["ok"] and not unknown["ok"] and unknown["error"]["code"] == "unknown_command"
    assert t1["tick"] == t0["tick"] and t1["y"] == t0["y"]


def _get(url: str, **kw):
    async def main():
        async with aiohttp.ClientSession() as http:
            async with http.request(kw.pop("method", "GET"), url, **kw) as r:
                return r.status, await r.text()
    return asyncio.run(main())


def test_requests_without_the_token_are_refused(token_server):
    url = token_server.url
    assert _get(url)[0] == 401
    assert _get(url + "api/meta?token=wrong-token-of-the-same-size-000000")[0] == 401
    assert _get(url + f"?token={TOKEN}")[0] == 200
    assert _get(url + "api/meta", headers={"Authorization": f"Bearer {TOKEN}"})[0] == 200
    status, text = _get(url + "api/control", method="POST", data=json.dumps({"cmd": "step", "n": 5}))
    assert status == 401 and "token" in text

    async def ws_without_token():
        async with aiohttp.ClientSession() as http:
            with pytest.raises(aiohttp.WSServerHandshakeError) as exc:
                await http.ws_connect(url + "ws")
            return exc.value.status

    assert asyncio.run(ws_without_token()) == 401
    with token_server.client() as c:
        assert c.get()["tick"] == 0  # the refused step changed nothing


def test_a_foreign_origin_or_host_is_refused(server, token_server):
    async def ws_from(url, origin, token=None):
        headers = {"Origin": origin} | ({"Authorization": f"Bearer {token}"} if token else {})
        async with aiohttp.ClientSession(headers=headers) as http:
            try:
                async with http.ws_connect(url + "ws"):
                    return 101
            except aiohttp.WSServerHandshakeError as exc:
                return exc.status

    host = server.url.split("/")[2]
    assert asyncio.run(ws_from(server.url, "http://evil.example")) == 403
    assert asyncio.run(ws_from(server.url, f"http://{host}")) == 101
    assert asyncio.run(ws_from(token_server.url, "http://evil.example", TOKEN)) == 403
    status, _ = _get(server.url + "api/control", method="POST", data=json.dumps({"cmd": "ping"}),
                     headers={"Origin": "http://evil.example"})
    assert status == 403
    # a name rebound to 127.0.0.1 by another site: refused without a token
    assert _get(server.url + "api/meta", headers={"Host": "evil.example"})[0] == 403


def test_oversized_requests_and_messages_are_refused(token_server):
    url = token_server.url
    big = json.dumps({"cmd": "set", "set": {"engine_torque": 1.0}, "pad": "x" * 8000})
    status, text = _get(url + "api/control", method="POST", data=big,
                        headers={"Authorization": f"Bearer {TOKEN}"})
    assert status == 413 and "4096" in text

    async def body(page):
        await page.ws.send_str(json.dumps({"op": "control", "id": 1, "req": {"cmd": "ping", "pad": "x" * 8000}}))
        return await page.next_of("never", 10)

    closed = run_page(url, body, TOKEN)
    assert closed["op"] == "closed" and closed["type"] in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED,
                                                            aiohttp.WSMsgType.CLOSING)
    status, meta = _get(url + "api/status", headers={"Authorization": f"Bearer {TOKEN}"})
    with token_server.client() as c:
        web = c.status()["adapters"]["web"]
        assert c.get()["tick"] == 0
    assert web["http"]["refused"]["too_large"] >= 2


def test_a_bind_beyond_loopback_without_a_token_exits_2_with_one_line(tmp_path):
    io = tmp_path / "io.toml"
    io.write_text('[loop]\nstatus_line = false\n[web]\nhost = "0.0.0.0"\nport = 0\n')
    r = subprocess.run([sys.executable, "-m", "server.cli", "serve", "powershift", "--io", str(io), "--mode",
                        "lockstep"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 2
    lines = [ln for ln in r.stderr.splitlines() if not ln.startswith("gearbox-hil:   ")]
    assert len([ln for ln in lines if "error" in ln]) == 1, r.stderr
    assert "beyond loopback" in r.stderr and "token" in r.stderr


def test_the_ready_file_and_the_start_up_lines_name_the_workspace(server):
    assert server.url.startswith("http://127.0.0.1:") and server.url.endswith("/")
    assert server.url in server.output()
    assert wait_until(lambda: _get(server.url)[0] == 200, 10)


def test_the_web_option_adds_the_workspace_to_a_config_without_one():
    import argparse

    from server.realtime.runtime import apply_adapter_options, load_io_config
    from server.cli.serve import _adapter_options, add_arguments

    p = argparse.ArgumentParser()
    add_arguments(p)
    io = load_io_config(None)
    assert not any(a.type == "web" for a in io.adapters)
    for argv, options in ((["--web"], {}), (["--web", "0"], {"port": 0}), (["--web", "9000"], {"port": 9000})):
        out = apply_adapter_options(io, _adapter_options(p.parse_args(["powershift", *argv])))
        assert [(a.type, a.options) for a in out.adapters if a.type == "web"] == [("web", options)]
        assert out.adapters[:-1] == io.adapters
    with pytest.raises(SystemExit):
        p.parse_args(["powershift", "--web", "70000"])


def test_a_closed_page_costs_nothing(server):
    async def body(page):
        await page.subscribe(["w_out"])
        await page.control("reset", inputs=GEAR1)
        await page.control("step", n=100)
        await page.rows_until(100)

    run_page(server.url, body)  # the page closes here
    with server.client() as c:
        assert wait_until(lambda: c.status()["adapters"]["web"]["clients"] == 0, 10)
        before = c.status()["adapters"]["web"]
        c.step(500)
        after = c.status()["adapters"]["web"]
    assert before["rows_shown"] >= 10
    assert after["rows_shown"] == before["rows_shown"]  # no page: no row is copied for the web thread
    assert after["rows_dropped"] == before["rows_dropped"] and after["rows_lost"] == before["rows_lost"]


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as fh:
            return not any(ln.startswith("State:") and "Z" in ln for ln in fh)
    except OSError:
        return False


def test_the_web_server_runs_in_a_process_of_its_own_and_ends_with_a_killed_server(tmp_path):
    import os
    import signal

    with ServerProcess(tmp_path, mode="lockstep", adapters=WEB) as s:
        with s.client() as c:
            web = c.status()["adapters"]["web"]
        pid = web["pid"]
        assert pid != s.proc.pid
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            assert b"io_adapters.web.process" in fh.read()
        # the port is served by the workspace process: it closes when that process ends
        port = int(s.info["endpoints"]["web.url"].rsplit(":", 1)[1].strip("/"))
        assert _get(s.info["endpoints"]["web.url"])[0] == 200
        os.kill(s.proc.pid, signal.SIGKILL)
        s.proc.wait()
        assert wait_until(lambda: not _alive(pid), 20)  # the link closed: the workspace process ended too
        import socket

        with socket.socket() as probe:
            assert probe.connect_ex(("127.0.0.1", port)) != 0


def test_the_loop_leaves_the_workspace_out_of_its_tick():
    from io_adapters.base import Adapter
    from io_adapters.web.adapter import WebAdapter

    web = WebAdapter("web", {"port": 0})
    assert not web.reads_commands and web.shares_ring
    assert type(web).pump is Adapter.pump and type(web).write is Adapter.write


def test_the_page_gets_the_runs_whole_tet_histogram_with_the_status(server):
    async def body(page):
        await page.control("reset", inputs=GEAR1)
        await page.control("step", n=300)
        end = time.monotonic() + 10
        while not page.status or page.status["tick"] < 300:
            assert time.monotonic() < end, page.status
            await page.next_of("status", 10)
        return page.status

    st = run_page(server.url, body)
    h, timing = st["timing_histograms"]["tet_us"], st["timing"]
    assert h["total"] == sum(h["count"]) == timing["ticks"] >= 300
    rank = -(-99 * h["total"] // 100)  # nearest rank of p99
    k = next(j for j, acc in enumerate(np.cumsum(h["count"])) if acc >= rank)
    assert timing["tet_us"]["p99"] == min(h["upper_us"][k], timing["tet_us"]["max"])


def test_the_websocket_declines_compression_a_client_offers(server):
    """No permessage-deflate: the updates are small and mostly go to loopback; deflating them cost CPU."""

    async def main():
        async with aiohttp.ClientSession() as http:
            async with http.ws_connect(server.url + "ws", compress=15) as ws:
                page = Page(ws)
                await page.next_of("hello")
                return ws.compress

    assert asyncio.run(main()) == 0  # offered (15), not taken


def _cpus_of_threads(pid: int) -> list[set[int]]:
    import os

    return [os.sched_getaffinity(int(tid)) for tid in os.listdir(f"/proc/{pid}/task")]


@pytest.mark.skipif(len(__import__("os").sched_getaffinity(0)) < 2, reason="needs two CPUs to keep one for the loop")
def test_with_the_loop_pinned_the_workspace_process_keeps_off_its_cpu_also_after_a_restart(tmp_path):
    import os
    import signal

    loop_cpu = min(os.sched_getaffinity(0))
    with ServerProcess(tmp_path, mode="lockstep", adapters=WEB, extra=f"[realtime]\ncpu_affinity = [{loop_cpu}]\n") as s:
        with s.client() as c:
            assert wait_until(lambda: {loop_cpu} in _cpus_of_threads(s.proc.pid), 20)  # the loop's thread is pinned
            pid = c.status()["adapters"]["web"]["pid"]
            assert all(loop_cpu not in cpus and cpus for cpus in _cpus_of_threads(pid))
            os.kill(pid, signal.SIGKILL)  # started again from the loop's (pinned) thread: still off its CPU
            again = wait_until(lambda: (w := c.status()["adapters"]["web"]).get("open") and w["pid"] != pid
                               and w["pid"], 60)
            assert again
            assert all(loop_cpu not in cpus and cpus for cpus in _cpus_of_threads(again))
