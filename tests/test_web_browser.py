"""The web workspace in a real headless Chromium (Debian's ``chromium`` and ``chromium-driver``, Selenium).

Few and bounded: one lockstep server and one browser for the module.  Where
no browser is installed the tests skip and say so (``.ci/run`` installs it
in CI).
"""

from __future__ import annotations

import time

import pytest

pytest.importorskip("aiohttp")
pytest.importorskip("selenium.webdriver")

from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.support.ui import Select  # noqa: E402

from browser_support import GEAR1, chrome, needs_browser, open_page, plotted, served_page, stream  # noqa: E402
from server_support import FREE_PORTS, ServerProcess, wait_until  # noqa: E402

pytestmark = needs_browser


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    adapters = FREE_PORTS + '\n[[adapters]]\ntype = "web"\nname = "web"\nport = 0\n'
    with served_page(tmp_path_factory.mktemp("browser"), adapters) as page:
        yield page


def test_the_page_loads_and_plots_the_state_streams_values(served):
    s, drv = served
    box = drv.find_element(By.ID, "pattern")
    box.clear()
    box.send_keys("w_out, slip_c?")  # a name and a glob
    drv.find_element(By.ID, "pick").click()
    assert drv.find_element(By.ID, "matched").text == "9 signal(s)"
    assert wait_until(lambda: "slip_c8" in (drv.execute_script("return workspace.subscribed") or []), 10)
    with s.client() as zc:
        zc.subscribe(("state",))
        time.sleep(0.3)
        zc.reset(GEAR1)
        zc.step(300)
        states = {}
        while 300 not in states:
            st = zc.recv_state(5.0)
            assert st is not None
            states[st.tick] = st
    shown = wait_until(lambda: (p := plotted(drv)) and max(p.get("w_out") or {0: 0}) >= 300 and p, 20)
    assert shown, drv.get_log("browser")
    assert set(shown) == {"w_out", *(f"slip_c{k}" for k in range(1, 9))}
    ticks = [t for t in shown["w_out"] if t <= 300]
    assert ticks == list(range(10, 301, 10))
    for name, values in shown.items():
        for tick in ticks:
            assert values[tick] == states[tick].y[name], (name, tick)
    # the transmission at a glance: gear 1 with clutches 1, 3, 6 applied (the traces share the page's arrays, so
    # the values above can be there a redraw before the panels: at most draws/s redraws a second)
    assert wait_until(lambda: drv.find_element(By.ID, "gear").text == "1", 10)
    state = drv.execute_script("const out = {}; for (const r of document.querySelectorAll('#clutches tbody tr'))"
                               " out[r.dataset.clutch] = r.cells[1].textContent; return out;")
    assert state["C2"] == "open" and state["C8"] == "open"
    assert {state["C1"], state["C3"], state["C6"]} <= {"stuck", "slipping"}
    # the timing panel draws the run's whole TET histogram (while it is on the screen): its bins hold every tick of
    # the status shown
    drv.execute_script("document.getElementById('histo').scrollIntoView()")
    drawn = wait_until(lambda: drv.execute_script(
        "const d = document.getElementById('histo').data, s = window.workspace.status;"
        "if (!d || !d.length || !s || s.tick < 300 || workspace.histoDrawn !== s.timing_histograms) return null;"
        "const x = d[0].x, y = d[0].y, tops = [];"  # a bin is its flat top: two points at its count
        "for (let i = 0; i + 1 < x.length; i++) if (y[i] === y[i + 1] && x[i] < x[i + 1] && y[i] >= 1) tops.push(y[i]);"
        "return [tops.reduce((a, b) => a + b, 0), s.timing.ticks, tops, s.timing_histograms.tet_us.count];"), 20)
    assert drawn, drv.get_log("browser")
    assert drawn[0] == drawn[1] >= 300 and drawn[2] == drawn[3], drawn


def test_a_fault_set_from_the_page_acts_at_the_next_tick_and_shows(served):
    s, drv = served
    Select(drv.find_element(By.ID, "ftarget")).select_by_visible_text("signal")
    Select(drv.find_element(By.ID, "fkind")).select_by_visible_text("force")
    Select(drv.find_element(By.ID, "fwhat")).select_by_visible_text("w_out")
    drv.find_element(By.ID, "fvalue").send_keys("55.5")
    drv.find_element(By.ID, "fset").click()
    with s.client() as zc:
        assert wait_until(lambda: zc.faults(), 10)
        assert zc.step(1).y["w_out"] == 55.5
        zc.step(9)
        shown = wait_until(lambda: drv.find_elements(By.CSS_SELECTOR, "#faults tbody tr")
                           and drv.find_element(By.ID, "nfaults").text == "1", 10)
        assert shown, drv.find_element(By.ID, "error").text
        drv.find_element(By.ID, "fclearall").click()
        assert wait_until(lambda: not zc.faults(), 10)


def test_an_out_of_range_parameter_edit_shows_the_error_and_changes_nothing(served):
    s, drv = served
    with s.client() as zc:
        before = zc.get_params()
        name, p = next((n, p) for n, p in before.items() if p["type"] == "float" and p["max"] < 1e6)
        row = drv.find_element(By.CSS_SELECTOR, f"#params tr[data-param='{name}']")
        box = row.find_element(By.TAG_NAME, "input")
        box.clear()
        box.send_keys(str(p["max"] * 10 + 1))
        row.find_element(By.CLASS_NAME, "pset").click()
        err = wait_until(lambda: drv.find_element(By.ID, "error").text, 10)
        assert err and name in err and "outside" in err
        assert zc.get_params() == before


def test_the_page_offers_the_scenario_folders_files_and_loads_the_chosen_one(served):
    from server.offline.scenario import ScenarioFolders

    s, drv = served
    offered = wait_until(lambda: [o.get_attribute("value") for o in
                                  drv.find_elements(By.CSS_SELECTOR, "#scenario option")], 10)
    assert offered == [e["path"] for e in ScenarioFolders.default().listing()[0]]  # the server's folders only
    assert "powershift_double_swap.toml" in offered
    Select(drv.find_element(By.ID, "scenario")).select_by_value("powershift_double_swap.toml")
    drv.find_element(By.ID, "load").click()
    with s.client() as zc:
        assert wait_until(lambda: (zc.status().get("scenario") or {}).get("source", "").endswith(
            "powershift_double_swap.toml"), 10), drv.find_element(By.ID, "error").text
        zc.request("unload_scenario")


def test_lockstep_has_no_rate_and_a_narrow_window_keeps_the_adapter_names_whole(served):
    s, drv = served
    # the rows' texts read in one script: the page redraws the table at every status, and an element found by
    # one call could be gone by the next (StaleElementReferenceException)
    rate = wait_until(lambda: [t for t in drv.execute_script(
        "return Array.from(document.querySelectorAll('#timing tr')).map((r) => r.innerText);")
        if t.startswith("rate")], 10)
    assert rate and "n/a in lockstep" in rate[0] and "actual" not in rate[0]
    drv.set_window_size(640, 900)
    try:
        time.sleep(1.0)  # the next status redraws the tables at the new width
        # each name is one line (it used to wrap letter by letter), and the counters wrap between words
        cells = wait_until(lambda: drv.execute_script(
            "const rows = document.querySelectorAll('#adapters tr'), lines = (td) => {"
            " const r = document.createRange(); r.selectNodeContents(td); return r.getClientRects().length; };"
            "return rows.length ? Array.from(rows).map((r) => [r.cells[0].textContent, lines(r.cells[0]),"
            " r.cells[0].scrollWidth <= r.cells[0].clientWidth, lines(r.cells[1]),"
            " r.cells[1].textContent.split(' ').filter((w) => w.length).length]) : null;"), 10)
        assert {c[0] for c in cells} == {"zmq", "web"}
        for name, name_lines, fits, counter_lines, words in cells:
            assert name_lines == 1 and fits, (name, name_lines)
            assert 1 <= counter_lines < words / 2, (name, counter_lines, words)  # not a word or a letter a line
    finally:
        drv.set_window_size(1600, 1000)


def test_the_page_reconnects_after_a_server_restart(served, tmp_path):
    s, _ = served
    port = _free_port()
    adapters = FREE_PORTS + f'\n[web]\nport = {port}\n'
    first = ServerProcess(tmp_path / "a", mode="lockstep", adapters=adapters)
    drv = chrome(1000, 700)
    try:
        open_page(drv, first.info["endpoints"]["web.url"])
        first.shutdown()
        assert wait_until(lambda: not drv.execute_script("return workspace.connected"), 10)
        with ServerProcess(tmp_path / "b", mode="lockstep", adapters=adapters) as second:
            assert wait_until(lambda: drv.execute_script("return workspace.connected"), 20)
            with second.client() as zc:
                assert wait_until(lambda: zc.status()["adapters"]["web"]["clients"] == 1, 10)
                assert wait_until(lambda: "w_out" in (drv.execute_script("return workspace.subscribed") or []), 20)
                zc.step(50)
            assert wait_until(lambda: max(plotted(drv).get("w_out") or {0: 0}) >= 50, 10)
            second.shutdown()
    finally:
        drv.quit()
        first.kill()


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _cpu_row(drv):
    rows = drv.execute_script("return Array.from(document.querySelectorAll('#timing tr')).map((r) => r.innerText);")
    return next((r for r in rows if r.startswith("CPU")), None)


def test_the_timing_panel_shows_both_processes_cpu(served):
    import re

    s, drv = served
    row = wait_until(lambda: (r := _cpu_row(drv)) and re.search(r"\d+(\.\d+)? / \d+(\.\d+)?$", r) and r, 20)
    assert row, _cpu_row(drv)
    assert "server / workspace" in row


def test_un_pausing_redraws_at_once_in_lockstep(served):
    s, drv = served
    shown = lambda: max(plotted(drv).get("w_out") or {0: 0})  # noqa: E731
    drv.find_element(By.ID, "pause").click()
    try:
        before = shown()
        with s.client() as zc:
            target = zc.step(100).tick
        assert wait_until(lambda: drv.execute_script("return workspace.lastTick") == target, 10)
        time.sleep(0.5)  # frames pass while paused: the plot stands
        assert shown() == before != target
    finally:
        drv.find_element(By.ID, "pause").click()  # no step after this: only the un-pausing can redraw
    assert wait_until(lambda: shown() == target, 10)


def test_with_a_token_the_page_loads_without_a_console_error(tmp_path):
    token = "s3cret-token-for-the-tests-0123456789"
    with ServerProcess(tmp_path, mode="lockstep", adapters=FREE_PORTS + f'\n[web]\nport = 0\ntoken = "{token}"\n') as s:
        drv = chrome(1000, 700)
        try:
            open_page(drv, s.info["endpoints"]["web.url"] + f"?token={token}")
            time.sleep(1.0)  # an icon request, if any, has been answered
            severe = [e for e in drv.get_log("browser") if e["level"] == "SEVERE"]
            assert severe == []
        finally:
            drv.quit()
            s.shutdown()


def test_the_page_reconnects_by_itself_after_the_workspace_process_was_killed(tmp_path):
    import os
    import signal

    with ServerProcess(tmp_path, mode="lockstep", adapters=FREE_PORTS + '\n[web]\nport = 0\n') as s:
        drv = chrome(1000, 700)
        try:
            open_page(drv, s.info["endpoints"]["web.url"])
            with s.client() as zc:
                os.kill(zc.status()["adapters"]["web"]["pid"], signal.SIGKILL)
                assert wait_until(lambda: not drv.execute_script("return workspace.connected"), 10)
                assert wait_until(lambda: drv.execute_script("return workspace.connected"), 60)
                assert wait_until(lambda: zc.status()["adapters"]["web"].get("clients") == 1, 20)
                assert wait_until(lambda: "w_out" in (drv.execute_script("return workspace.subscribed") or []), 20)
                zc.step(50)
            assert wait_until(lambda: max(plotted(drv).get("w_out") or {0: 0}) >= 50, 10)
        finally:
            drv.quit()
            s.shutdown()


def test_a_slider_moves_an_input_and_the_plant_follows_it_on_the_zmqstream(served):

    s, drv = served
    Select(drv.find_element(By.ID, "instinput")).select_by_visible_text("engine_torque")
    drv.find_element(By.ID, "instadd").click()
    row = drv.find_element(By.CSS_SELECTOR, "#instruments tr[data-instrument='engine_torque']")
    slider = row.find_element(By.CLASS_NAME, "instslider")
    assert (slider.get_attribute("min"), slider.get_attribute("max")) == ("-1000", "5000")  # the input's range
    assert "N m" in row.text
    with s.client() as zc:
        zc.subscribe(("state",))
        time.sleep(0.3)
        zc.reset(GEAR1)
        slider.click()  # the thumb jumps to the middle of the range
        for _ in range(3):
            slider.send_keys(Keys.ARROW_RIGHT)
        value = float(slider.get_attribute("value"))
        assert value not in (GEAR1["engine_torque"], 0.0)
        assert wait_until(lambda: zc.get()["u"]["engine_torque"] == value, 10), drv.find_element(By.ID, "error").text
        assert float(row.find_element(By.CLASS_NAME, "instval").get_attribute("value")) == value
        by_page = stream(zc, 200)
        zc.reset(GEAR1)
        zc.set_inputs_acked(engine_torque=value)  # the same value from a ZeroMQ client
        by_zmq = stream(zc, 200)
        zc.reset(GEAR1)
        unchanged = stream(zc, 200)
    assert by_page == by_zmq  # bit for bit: one command path
    assert by_page[200]["w_out"] != unchanged[200]["w_out"]  # and the plant did follow the slider


def test_an_instruments_value_outside_the_range_is_refused_and_changes_nothing(served):
    s, drv = served
    if not drv.find_elements(By.CSS_SELECTOR, "#instruments tr[data-instrument='p_c2']"):
        Select(drv.find_element(By.ID, "instinput")).select_by_visible_text("p_c2")
        drv.find_element(By.ID, "instadd").click()
    row = drv.find_element(By.CSS_SELECTOR, "#instruments tr[data-instrument='p_c2']")
    with s.client() as zc:
        before = zc.get()["u"]["p_c2"]
        box = row.find_element(By.CLASS_NAME, "instval")
        box.clear()
        box.send_keys("400")
        row.find_element(By.CLASS_NAME, "instset").click()
        err = wait_until(lambda: drv.find_element(By.ID, "error").text, 10)
        assert err.startswith("set: p_c2") and "outside" in err
        assert zc.get()["u"]["p_c2"] == before


def _open(url: str):
    drv = chrome(1200, 900)
    open_page(drv, url)
    return drv


def _shown(drv) -> dict:
    return drv.execute_script(
        "return {pattern: document.getElementById('pattern').value, window: document.getElementById('window').value,"
        " picked: workspace.picked, instruments: workspace.instruments.map((i) => [i.name, i.value]),"
        " rows: Array.from(document.querySelectorAll('#instruments tr')).map((r) => r.dataset.instrument)};")


def test_a_saved_layout_is_restored_on_reload_and_after_a_server_restart(tmp_path):
    import json as _json
    import urllib.error
    import urllib.request

    folder = tmp_path / "layouts"
    adapters = FREE_PORTS + f'\n[web]\nport = 0\nlayouts = "{folder}"\n'
    with ServerProcess(tmp_path / "a", mode="lockstep", adapters=adapters) as s:
        url = s.info["endpoints"]["web.url"]
        drv = _open(url)
        try:
            drv.find_element(By.ID, "pattern").clear()
            drv.find_element(By.ID, "pattern").send_keys("w_out, gear")
            drv.find_element(By.ID, "pick").click()
            drv.find_element(By.ID, "window").clear()
            drv.find_element(By.ID, "window").send_keys("3")
            Select(drv.find_element(By.ID, "instinput")).select_by_visible_text("p_c2")
            drv.find_element(By.ID, "instadd").click()
            drv.find_element(By.ID, "layoutsavename").send_keys("bench one")
            drv.find_element(By.ID, "layoutsave").click()
            assert wait_until(lambda: (folder / "bench one.json").is_file(), 10), drv.find_element(By.ID, "error").text
            saved = _json.loads((folder / "bench one.json").read_text())
            assert saved["signals"] == "w_out, gear" and saved["window"] == 3
            assert [i["name"] for i in saved["instruments"]] == ["p_c2"]
            want = _shown(drv)
            assert want["picked"] == ["w_out", "gear"] and want["rows"] == ["p_c2"]
            drv.refresh()
            assert wait_until(lambda: drv.execute_script("return workspace.connected && workspace.layout"), 30)
            assert _shown(drv) == want
            # names never leave the folder
            (tmp_path / "outside.json").write_text('{"signals": "secret"}')
            (folder / "link.json").symlink_to(tmp_path / "outside.json")

            def status(path, data=None):
                req = urllib.request.Request(url + path, data=data, method="POST" if data else "GET")
                try:
                    with urllib.request.urlopen(req, timeout=10) as r:
                        return r.status, _json.loads(r.read())
                except urllib.error.HTTPError as exc:
                    return exc.code, _json.loads(exc.read())

            assert status("api/layouts/link")[0] == 404
            assert status("api/layouts/..%2Foutside")[0] in (400, 404)
            assert status("api/layouts/.last")[0] == 400
            assert status("api/layouts/..%2Fescape", b'{"a": 1}')[0] in (400, 404)
            assert status("api/layouts/x", b"[1, 2]")[0] == 400  # a layout is an object
            listed = status("api/layouts")[1]
            assert listed["layouts"] == ["bench one"] and listed["last"] == "bench one"
            assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "layouts", "outside.json"]
        finally:
            drv.quit()
            s.shutdown()
    (folder / "link.json").unlink()
    with ServerProcess(tmp_path / "b", mode="lockstep", adapters=adapters) as s:
        drv = _open(s.info["endpoints"]["web.url"])
        try:
            assert wait_until(lambda: drv.execute_script("return workspace.layout"), 20)
            assert _shown(drv) == want
        finally:
            drv.quit()
            s.shutdown()


def _axes(drv, div_id: str):
    """[(trace name, its y axis, that axis's title)] of one plot, and how many plots the page has."""
    return drv.execute_script(
        "const d = document.getElementById(arguments[0]); if (!d || !d.data) return null;"
        "const ax = (a) => d.layout[a === 'y' ? 'yaxis' : 'yaxis' + a.slice(1)];"
        "return [d.data.map((t) => [t.name.split(' [')[0], t.yaxis || 'y', ax(t.yaxis || 'y').title.text]),"
        " document.getElementById('plots').children.length];", div_id)


def test_several_plots_each_with_one_y_axis_per_unit(served):
    s, drv = served
    box = drv.find_element(By.ID, "pattern")
    box.clear()
    box.send_keys("w_out, slip_c1; pressure_c2, engine_torque, p_c2; gear")
    drv.find_element(By.ID, "pick").click()
    assert drv.find_element(By.ID, "matched").text == "6 signal(s) in 3 plots"
    with s.client() as zc:
        zc.reset(GEAR1)
        zc.subscribe(("state",))
        time.sleep(0.3)
        states = stream(zc, 100)
    first = wait_until(lambda: (a := _axes(drv, "plot")) and len(a[0]) == 2 and a, 10)
    assert first and first[1] == 3, _axes(drv, "plot")
    assert first[0] == [["w_out", "y", "rad/s"], ["slip_c1", "y", "rad/s"]]  # one unit: one axis
    second = _axes(drv, "plot1")[0]
    assert second == [["pressure_c2", "y", "bar"], ["engine_torque", "y2", "N m"], ["p_c2", "y", "bar"]]
    assert [t[1] for t in _axes(drv, "plot2")[0]] == ["y"]
    # each plot draws the stream's values
    drawn = wait_until(lambda: (v := drv.execute_script(
        "const t = document.getElementById('plot1').data[0];"
        "return [Array.from(t.customdata), Array.from(t.y)];")) and v[0] and max(v[0]) == 100 and v, 10)  # this run's rows, not an earlier one's
    assert drawn
    for tick, y in zip(*drawn):
        if tick in states:
            assert y == states[tick]["pressure_c2"]
    box.clear()
    box.send_keys("w_out, slip_c?")
    drv.find_element(By.ID, "pick").click()
    assert wait_until(lambda: (a := _axes(drv, "plot")) and a[1] == 1 and len(a[0]) == 9, 10)


def test_a_level_trigger_captures_the_pre_and_post_window_and_the_csv_equals_thestream(served):
    import csv
    import io
    import urllib.request

    s, drv = served
    box = drv.find_element(By.ID, "pattern")
    box.clear()
    box.send_keys("w_out, slip_c1, engine_torque")
    drv.find_element(By.ID, "pick").click()
    with s.client() as zc:
        zc.subscribe(("state",))
        time.sleep(0.3)
        zc.reset(GEAR1)
        first = stream(zc, 600)
        level = (first[300]["w_out"] + first[301]["w_out"]) / 2  # w_out rises: it crosses between ticks 300 and 301
        assert first[300]["w_out"] < level <= first[301]["w_out"]
        Select(drv.find_element(By.ID, "trigsignal")).select_by_visible_text("w_out")
        Select(drv.find_element(By.ID, "trigcond")).select_by_visible_text("rising")
        for box_id, text in (("triglevel", repr(level)), ("trigpre", "0.05"), ("trigpost", "0.1")):
            drv.find_element(By.ID, box_id).clear()
            drv.find_element(By.ID, box_id).send_keys(text)
        zc.reset(GEAR1)
        drv.find_element(By.ID, "trigarm").click()
        assert wait_until(lambda: drv.execute_script("return workspace.armed"), 10), drv.find_element(By.ID, "error").text
        second = stream(zc, 600)
    assert second == first  # the same run: the stream is the reference
    cap = wait_until(lambda: drv.execute_script("return workspace.captures.length ? workspace.captures[0] : null"), 10)
    assert cap and cap["tick"] == 301 and (cap["first_tick"], cap["last_tick"]) == (251, 401)
    link = drv.find_element(By.CSS_SELECTOR, "#captures a").get_attribute("href")
    with urllib.request.urlopen(link, timeout=10) as r:
        rows = list(csv.reader(io.StringIO(r.read().decode())))
    assert rows[0] == ["tick", "t", "w_out", "slip_c1", "engine_torque"]
    ticks = [int(r[0]) for r in rows[1:]]
    assert ticks == list(range(251, 402))  # 50 ticks before the crossing, the crossing, 100 after
    for r in rows[1:]:  # bit for bit: the CSV's text reads back as the stream's float64
        y = second[int(r[0])]
        assert [float(v) for v in r[1:]] == [y["t"], y["w_out"], y["slip_c1"], GEAR1["engine_torque"]]
    assert drv.find_element(By.ID, "trigstate").text.startswith("captured")


def test_the_server_decimates_to_the_rows_a_second_the_page_asks_for(served):
    s, drv = served
    box = drv.find_element(By.ID, "pattern")
    box.clear()
    box.send_keys("w_out")
    drv.find_element(By.ID, "pick").click()
    rate = drv.find_element(By.ID, "rate")
    rate.send_keys("20")  # 1 kHz plant: one row every 50 ticks
    rate.send_keys(Keys.TAB)
    try:
        assert wait_until(lambda: drv.execute_script("return workspace.rate && workspace.rate.every") == 50, 10)
        with s.client() as zc:
            zc.subscribe(("state",))
            time.sleep(0.3)
            zc.reset(GEAR1)
            states = stream(zc, 400)
        got = wait_until(lambda: (p := plotted(drv).get("w_out")) and min(p) >= 50 and max(p) >= 400 and p, 10)
        assert sorted(got) == list(range(50, 401, 50))  # only the rows drawn came over the socket
        assert all(got[t] == states[t]["w_out"] for t in got)
    finally:
        rate.clear()
        drv.execute_script("workspace.ws.send(JSON.stringify({op: 'rate', rows_per_s: 1000}));")


SCROLL_JS = """
const mk = () => { const d = document.createElement('div'); d.style.cssText = 'width: 700px; height: 220px';
                   document.body.appendChild(d); return d; };
const a = mk(), b = mk(), dt = 0.001, win = 1.0;
const t = [], y1 = [], y2 = [];
for (let k = 0; k < 4000; k++) { t.push(k * dt); y1.push(Math.sin(k / 37) * 50 + (k % 97 === 0 ? 80 : 0));
                                 y2.push(k % 500 < 250 ? 3 : -2); }
const layout = (n) => ({xaxis: {title: {text: 't [s]'}, range: [Math.max(0, t[n - 1] - win), t[n - 1]]},
                        yaxis: {title: {text: 'u'}, range: [-60, 140]}, yaxis2: {title: {text: 'v'}, range: [-3, 4]}});
const traces = (n) => [{x: t.slice(0, n), y: y1.slice(0, n), name: 'one', yaxis: 'y'},
                       {x: t.slice(0, n), y: y2.slice(0, n), name: 'two', yaxis: 'y2'}];
for (let n = 1000; n <= 4000; n += 37) stripChart(a, traces(n), layout(n));
stripChart(a, traces(4000), layout(4000));
stripChart(b, traces(4000), layout(4000));
const pa = a._strip.ctx.getImageData(0, 0, a._strip.w, a._strip.h).data, pb = b._strip.ctx.getImageData(0, 0, b._strip.w, b._strip.h).data;
let differ = 0, most = 0;  // pixels differing by 8 levels or more; the largest difference
for (let i = 0; i < pa.length; i += 4) {
  const m = Math.max(Math.abs(pa[i] - pb[i]), Math.abs(pa[i + 1] - pb[i + 1]), Math.abs(pa[i + 2] - pb[i + 2]));
  if (m >= 8) differ++;
  most = Math.max(most, m);
}
const out = {pixels: pa.length / 4, differ: differ, most: most, scrolled: a._strip.scrolled || 0, full: a._strip.full || 0};
a.remove(); b.remove();
return out;
"""


def test_a_scrolled_live_plot_looks_as_the_plot_drawn_whole(served):
    """The canvas scrolls by whole pixel columns and draws only the new ones; the image it ends with is the one a
    whole redraw of the same rows makes, up to the antialiasing's rounding (Skia's coverage of a line drawn in pieces
    differs by a few levels from the line drawn at once; a column drawn at the wrong place would differ by hundreds)."""
    _, drv = served
    got = drv.execute_script(SCROLL_JS)
    assert got["scrolled"] >= 70 and got["full"] <= 2, got  # the scroll path ran: 82 redraws, the first one whole
    assert got["most"] < 64 and got["differ"] <= 0.001 * got["pixels"], got


OFF_SCREEN_JS = """
const done = arguments[arguments.length - 1], frames = (n) => new Promise((ok) => {
  const f = () => (n-- > 0 ? requestAnimationFrame(f) : setTimeout(ok, 50)); f(); });
const pad = document.createElement('div'); pad.style.height = '3000px'; document.body.appendChild(pad);
const d = document.createElement('div'); d.style.cssText = 'width: 600px; height: 200px'; document.body.appendChild(d);
const shown = [], was = stripChart.onShow; stripChart.onShow = (div) => shown.push(div === d);
const traces = (n) => [{x: [0, 0.5, n], y: [0, 1, n], name: 'one', yaxis: 'y'}];
const layout = (n) => ({xaxis: {range: [n - 1, n]}, yaxis: {title: {text: 'u'}, range: [-1, 10]}});
(async () => {
  try {
    window.scrollTo(0, 0);
    stripChart(d, traces(1), layout(1));  // the first draw, before the observer's first report
    await frames(3);
    const before = {full: d._strip.full || 0, scrolled: d._strip.scrolled || 0};
    for (let n = 2; n <= 5; n++) stripChart(d, traces(n), layout(n));  // off the screen: not drawn
    const off = {full: d._strip.full || 0, scrolled: d._strip.scrolled || 0, skipped: d._strip.offScreen || 0,
                 data: d.data[0].x[2], shownYet: stripChart.shown(d)};
    d.scrollIntoView();
    await frames(3);
    const back = {full: d._strip.full || 0, scrolled: d._strip.scrolled || 0, shownNow: stripChart.shown(d), shown: shown};
    done({before: before, off: off, back: back});
  } finally { stripChart.onShow = was; d.remove(); pad.remove(); window.scrollTo(0, 0); }
})();
"""


def test_a_live_plot_off_the_screen_is_not_drawn_and_is_drawn_whole_when_back(served):
    """A canvas scrolled out of the window costs the compositor a copy at every frame it changes: the page keeps the
    newest traces (the plot's data) but draws nothing until the plot is back on the screen, then draws it whole at
    once and asks the page for its newest rows (stripChart.onShow)."""
    _, drv = served
    got = drv.execute_async_script(OFF_SCREEN_JS)
    full = got["before"]["full"]  # the first draw, and the one after the ResizeObserver's first report
    assert 1 <= full <= 2 and got["before"]["scrolled"] == 0, got
    assert got["off"] == {"full": full, "scrolled": 0, "skipped": 4, "data": 5, "shownYet": False}, got
    assert got["back"]["full"] == full + 1 and got["back"]["scrolled"] == 0 and got["back"]["shownNow"] is True, got
    assert got["back"]["shown"] == [True], got
