"""The workspace's tools in a real headless Chromium: cursors, XY plot, capture files, references, gauges, parameter
sets, layout files (io_adapters/web/workspace_tools.js).

One lockstep server and one browser for the module, as tests/test_web_browser.py; every value the page shows is
checked against the ZeroMQ state stream of the same ticks, bit for bit.
"""

from __future__ import annotations

import io
import json
import time
import urllib.request

import numpy as np
import pytest

pytest.importorskip("aiohttp")
pytest.importorskip("selenium.webdriver")

from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.support.ui import Select  # noqa: E402

from server_support import FREE_PORTS, wait_until  # noqa: E402
from browser_support import GEAR1, READY_TOOLS, needs_browser, plotted, served_page, stream  # noqa: E402

pytestmark = needs_browser


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("tools")
    # relative folders: from the I/O config's folder (tmp), not the working directory
    adapters = FREE_PORTS + '\n[web]\nport = 0\nlayouts = "layouts"\nparameter_sets = "parameter sets"\n'
    with served_page(tmp, adapters, ready=READY_TOOLS) as (s, drv):
        yield s, drv, tmp


def _plot(drv, pattern: str) -> None:
    box = drv.find_element(By.ID, "pattern")
    box.clear()
    box.send_keys(pattern)
    drv.find_element(By.ID, "pick").click()
    names = [n.strip() for n in pattern.replace(";", ",").split(",")]
    assert wait_until(lambda: set(names) <= set(drv.execute_script("return workspace.subscribed") or []), 10)


def _type(drv, box_id: str, text: str) -> None:
    box = drv.find_element(By.ID, box_id)
    box.clear()
    box.send_keys(text)
    box.send_keys(Keys.TAB)  # the change event


def _run(s, n: int = 300) -> dict[int, dict]:
    with s.client() as zc:
        zc.subscribe(("state",))
        time.sleep(0.3)
        zc.reset(GEAR1)
        return stream(zc, n)


def _shown_up_to(drv, tick: int):
    return wait_until(lambda: (p := plotted(drv).get("w_out")) and max(p) >= tick and p, 20)


def test_cursors_read_each_signal_at_a_and_b_and_their_difference(served):
    s, drv, _ = served
    _plot(drv, "w_out, slip_c1")
    states = _run(s)
    assert _shown_up_to(drv, 300)
    _type(drv, "cura", "0.1")
    _type(drv, "curb", "0.2501")  # snaps to the nearest row drawn: tick 250
    rows = wait_until(lambda: (r := drv.execute_script("return workspace.cursorRows")) and r[0]["b"] and r, 10)
    assert [r["name"] for r in rows] == ["w_out", "slip_c1"]
    for r in rows:
        assert (r["a"]["tick"], r["b"]["tick"]) == (100, 250)
        a, b = states[100][r["name"]], states[250][r["name"]]
        assert (r["a"]["y"], r["b"]["y"]) == (a, b)
        assert r["delta"] == b - a  # the same float64 subtraction
    assert drv.find_element(By.ID, "curdt").text.endswith("150 ticks")
    assert len(drv.find_elements(By.CSS_SELECTOR, "#curtable tbody tr")) == 2
    shapes = drv.execute_script("return document.getElementById('plot').layout.shapes.map((s) => s.x0)")
    assert shapes == [0.1, 0.2501]
    # a click on a plot places the chosen cursor (plotly's click event, as a mouse click raises it)
    drv.find_element(By.CSS_SELECTOR, "input[name=curwhich][value=a]").click()
    drv.execute_script("document.getElementById('plot').emit('plotly_click', {points: [{x: 0.05}]})")
    assert wait_until(lambda: drv.execute_script("return workspace.cursorRows[0].a.tick") == 50, 10)
    drv.find_element(By.ID, "curclear").click()


def test_the_xy_plot_draws_y_over_x_sample_by_sample_of_the_same_tick(served):
    s, drv, _ = served
    _plot(drv, "w_out")
    Select(drv.find_element(By.ID, "xyx")).select_by_visible_text("w_1")
    drv.find_element(By.ID, "xyy").send_keys("w_out, slip_c?")
    drv.find_element(By.ID, "xyshow").click()
    assert wait_until(lambda: "slip_c8" in (drv.execute_script("return workspace.subscribed") or []), 10)
    states = _run(s)
    traces = wait_until(lambda: (d := drv.execute_script(
        "const d = document.getElementById('xyplot').data || [];"
        "return d.map((t) => [t.name, Array.from(t.customdata), Array.from(t.x), Array.from(t.y)]);"))
        and d[0][1] and max(d[0][1]) >= 300 and d, 20)
    assert traces, drv.get_log("browser")
    assert [t[0].split(" [")[0] for t in traces] == ["w_out", *(f"slip_c{k}" for k in range(1, 9))]
    for name, ticks, xs, ys in traces:
        mine = [(t, x, y) for t, x, y in zip(ticks, xs, ys) if t in states]
        assert len(mine) >= 30
        for tick, x, y in mine:
            assert (x, y) == (states[tick]["w_1"], states[tick][name.split(" [")[0]]), (name, tick)
    assert drv.find_element(By.ID, "xyplot").is_displayed()
    drv.find_element(By.ID, "xyclear").click()
    assert wait_until(lambda: not drv.find_element(By.ID, "xyplot").is_displayed(), 10)


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=30) as r:
        return r.read()


def test_a_capture_downloads_as_parquet_and_mf4_equal_to_the_stream_and_overlays_as_a_reference(served, tmp_path):
    import pyarrow.parquet as pq
    from asammdf import MDF

    s, drv, _ = served
    _plot(drv, "w_out, engine_torque")
    Select(drv.find_element(By.ID, "trigsignal")).select_by_visible_text("w_out")
    Select(drv.find_element(By.ID, "trigcond")).select_by_visible_text("above")
    _type(drv, "triglevel", "-1e300")  # the first tick after arming
    _type(drv, "trigpre", "0")
    _type(drv, "trigpost", "0.2")
    with s.client() as zc:
        zc.subscribe(("state",))
        time.sleep(0.3)
        zc.reset(GEAR1)
        before = len(drv.execute_script("return workspace.captures"))
        drv.find_element(By.ID, "trigarm").click()
        assert wait_until(lambda: drv.execute_script("return workspace.armed"), 10)
        states = stream(zc, 400)
    cap = wait_until(lambda: (c := drv.execute_script("return workspace.captures")) and len(c) > before and c[-1], 20)
    assert cap and cap["first_tick"] == 1 and cap["last_tick"] == 201
    links = {a.text: a.get_attribute("href") for a in drv.find_elements(By.CSS_SELECTOR, "#captures .capture:first-child a")}
    assert set(links) >= {"Parquet", "MF4"}
    ticks = list(range(1, 202))
    table = pq.read_table(io.BytesIO(_get(links["Parquet"])))
    assert table.column("tick").to_pylist() == ticks
    for name in ("t", "w_out", "engine_torque"):
        assert table.column(name).to_pylist() == [states[k][name] if name in states[k] else GEAR1[name]
                                                  for k in ticks]
    with MDF(io.BytesIO(_get(links["MF4"]))) as mdf:
        w = mdf.get("w_out")
        assert w.unit == "rad/s"
        assert w.samples.tolist() == [states[k]["w_out"] for k in ticks]
        assert w.timestamps.tolist() == [states[k]["t"] for k in ticks]
    # the capture as a reference: drawn dashed in the plot of its signal, at its run time
    drv.find_element(By.CSS_SELECTOR, "#captures .capture:first-child .capref").click()
    label = f"w_out (capture {cap['id']})"
    ref = wait_until(lambda: drv.execute_script(
        "const t = (document.getElementById('plot').data || []).find((t) => t.name === arguments[0]);"
        "return t ? [Array.from(t.customdata), Array.from(t.x), Array.from(t.y), t.line.dash] : null;", label), 10)
    assert ref, drv.find_element(By.ID, "error").text
    assert ref[0] == ticks and ref[3] == "dash"
    assert ref[1] == [states[k]["t"] for k in ticks] and ref[2] == [states[k]["w_out"] for k in ticks]
    # and a capture's CSV file, chosen from the disk, with an offset
    path = tmp_path / "earlier.csv"
    path.write_bytes(_get(links["Parquet"].replace(".parquet", ".csv")))
    _type(drv, "refoffset", "0.5")
    drv.find_element(By.ID, "reffile").send_keys(str(path))
    ref = wait_until(lambda: drv.execute_script(
        "const t = (document.getElementById('plot').data || []).find((t) => t.name === 'w_out (earlier.csv)');"
        "return t ? [Array.from(t.x), Array.from(t.y)] : null;"), 10)
    assert ref, drv.find_element(By.ID, "error").text
    assert ref[1] == [states[k]["w_out"] for k in ticks]
    assert ref[0] == [states[k]["t"] + 0.5 for k in ticks]
    drv.find_element(By.ID, "refclear").click()
    _type(drv, "refoffset", "0")
    assert wait_until(lambda: not any("(" in t for t in drv.execute_script(
        "return document.getElementById('plot').data.map((t) => t.name)")), 10)


def test_gauges_and_lamps_show_the_value_against_their_limits(served):
    s, drv, _ = served
    Select(drv.find_element(By.ID, "gsignal")).select_by_visible_text("w_out")
    Select(drv.find_element(By.ID, "gkind")).select_by_visible_text("gauge")
    _type(drv, "glo", "0")
    _type(drv, "ghi", "1000")
    drv.find_element(By.ID, "gadd").click()
    Select(drv.find_element(By.ID, "gkind")).select_by_visible_text("lamp")
    _type(drv, "glo", "")
    states = _run(s, 10)
    limit = states[10]["w_out"]  # the lamp's limit: between the values at ticks 10 and 300 (w_out rises)
    _type(drv, "ghi", repr(limit))
    drv.find_element(By.ID, "gadd").click()
    assert len(drv.find_elements(By.CSS_SELECTOR, "#gauges .gauge")) == 2
    gauges = wait_until(lambda: (g := drv.execute_script("return workspace.gaugeStates")) and len(g) == 2
                        and g[1]["value"] == limit and g, 10)
    assert gauges and gauges[1]["state"] == "ok"  # at the limit: inside
    with s.client() as zc:
        zc.step(290)
        w = zc.get()["y"]["w_out"]
    assert w > limit
    gauges = wait_until(lambda: (g := drv.execute_script("return workspace.gaugeStates")) and g[0]["value"] == w
                        and g, 10)
    assert gauges == [{"name": "w_out", "kind": "gauge", "value": w, "state": "ok" if 0 <= w <= 1000 else "alarm"},
                      {"name": "w_out", "kind": "lamp", "value": w, "state": "alarm"}]
    lamp = drv.find_elements(By.CSS_SELECTOR, "#gauges .gauge")[1]
    assert "alarm" in lamp.get_attribute("class")
    assert lamp.find_element(By.CLASS_NAME, "lamp").value_of_css_property("background-color") == "rgba(221, 34, 34, 1)"
    bar = drv.find_element(By.CSS_SELECTOR, "#gauges .gauge .gbar div").get_attribute("style")
    assert f"{100 * min(1.0, max(0.0, w / 1000)):.1f}%" in bar


def _float_param(zc):
    return next((n, p) for n, p in zc.get_params().items() if p["type"] == "float" and np.isfinite(p["max"])
                and np.isfinite(p["min"]) and p["max"] > p["min"] and p["min"] <= p["value"] <= p["max"])


def test_a_parameter_set_saved_from_the_page_is_compared_and_applied_showing_old_and_new(served):
    s, drv, tmp = served
    with s.client() as zc:
        base = {n: p["value"] for n, p in zc.get_params().items()}
        name, p = _float_param(zc)
        drv.find_element(By.ID, "psetname").send_keys("base line")
        drv.find_element(By.ID, "psetsave").click()
        path = tmp / "parameter sets" / "base line.json"
        assert wait_until(path.is_file, 10), drv.find_element(By.ID, "error").text
        assert json.loads(path.read_text())["params"] == base
        changed = (p["value"] + p["max"]) / 2 if p["value"] != p["max"] else (p["value"] + p["min"]) / 2
        zc.set_params({name: changed})
        assert wait_until(lambda: "base line" in drv.find_element(By.ID, "psetlist").text, 10)  # listed again
        Select(drv.find_element(By.ID, "psetlist")).select_by_visible_text("base line")
        drv.find_element(By.ID, "psetcompare").click()
        cmp_ = wait_until(lambda: drv.execute_script("return workspace.paramCompare"), 10)
        assert [(r["name"], r["now"], r["set"]) for r in cmp_["rows"] if r["differs"]] == [(name, changed, p["value"])]
        assert [r.get_attribute("data-param") for r in drv.find_elements(By.CSS_SELECTOR, "#psettable tr.differs")] == [name]
        drv.find_element(By.ID, "psetapply").click()
        change = wait_until(lambda: drv.execute_script("return workspace.paramChange"), 10)
        assert change == [{"name": name, "old": changed, "new": p["value"]}]
        assert {n: q["value"] for n, q in zc.get_params().items()} == base  # round trip
        cells = drv.find_element(By.CSS_SELECTOR, f"#psettable tr[data-param='{name}']").find_elements(By.TAG_NAME, "td")
        assert [float(c.text) for c in cells[1:3]] == [float(f"{changed:.8g}"), float(f"{p['value']:.8g}")]


def test_a_layout_exported_to_a_file_imports_identically_with_its_tools(served, tmp_path):
    s, drv, _ = served
    _plot(drv, "w_out, gear; slip_c1")
    _type(drv, "cura", "0.01")
    _type(drv, "curb", "0.02")
    Select(drv.find_element(By.ID, "xyx")).select_by_visible_text("w_1")
    drv.find_element(By.ID, "xyy").clear()
    drv.find_element(By.ID, "xyy").send_keys("w_out")
    drv.find_element(By.ID, "xyshow").click()
    Select(drv.find_element(By.ID, "gsignal")).select_by_visible_text("slip_c1")
    Select(drv.find_element(By.ID, "gkind")).select_by_visible_text("lamp")
    _type(drv, "glo", "-1")
    _type(drv, "ghi", "1")
    drv.find_element(By.ID, "gadd").click()
    n_gauges = len(drv.find_elements(By.CSS_SELECTOR, "#gauges .gauge"))
    shown = "return [document.getElementById('pattern').value, workspace.picked, workspace.tools.layoutPart()]"
    want = drv.execute_script(shown)
    drv.find_element(By.ID, "layoutexport").click()
    text = wait_until(lambda: drv.execute_script("return workspace.exportedLayout"), 10)
    exported = json.loads(text)
    assert exported["signals"] == "w_out, gear; slip_c1" and exported["xy"] == {"x": "w_1", "y": "w_out"}
    assert exported["cursors"] == {"a": 0.01, "b": 0.02} and len(exported["gauges"]) == n_gauges
    assert exported["gauges"][-1] == {"name": "slip_c1", "kind": "lamp", "lo": -1, "hi": 1}
    path = tmp_path / "bench layout.json"
    path.write_text(text)
    _plot(drv, "w_out")
    drv.find_element(By.ID, "curclear").click()
    drv.find_element(By.ID, "xyclear").click()
    while drv.find_elements(By.CSS_SELECTOR, "#gauges .gdel"):  # each click draws the list anew
        drv.find_elements(By.CSS_SELECTOR, "#gauges .gdel")[0].click()
    assert drv.execute_script(shown) != want
    drv.find_element(By.ID, "layoutimport").send_keys(str(path))
    assert wait_until(lambda: drv.execute_script("return workspace.imported") == "bench layout.json", 10), \
        drv.find_element(By.ID, "error").text
    assert drv.execute_script(shown) == want
    assert len(drv.find_elements(By.CSS_SELECTOR, "#gauges .gauge")) == n_gauges
    # not a layout: refused with its reason, the page unchanged
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    drv.find_element(By.ID, "layoutimport").send_keys(str(bad))
    assert wait_until(lambda: "a layout is a JSON object" in drv.find_element(By.ID, "error").text, 10)
    assert drv.execute_script(shown) == want


def test_paused_the_plot_shows_the_history_held_beyond_the_window_and_stands(served):
    s, drv, _ = served
    _plot(drv, "w_out")
    drv.find_element(By.ID, "curclear").click()  # an earlier layout may have set cursors
    _type(drv, "window", "2")  # the page holds 60 s (hold), draws 2 s live
    try:
        states = _run(s, 5000)
        live = wait_until(lambda: (p := plotted(drv).get("w_out")) and max(p) == 5000 and p, 20)
        assert live and min(live) in (3000, 3010), min(live or {0: 0})
        drv.find_element(By.ID, "pause").click()
        held = wait_until(lambda: (p := plotted(drv).get("w_out")) and min(p) == 10 and p, 10)
        assert held and sorted(held) == list(range(10, 5001, 10))  # every row held since the reset
        assert all(held[t] == states[t]["w_out"] for t in held)
        end = states[5000]["t"]
        assert drv.execute_script("return document.getElementById('plot').layout.xaxis.range") == [end - 2, end]
        with s.client() as zc:
            zc.step(100)
        assert wait_until(lambda: drv.execute_script("return workspace.lastTick") == 5100, 10)
        _type(drv, "cura", "1.0")  # a cursor placed while paused: drawn, and the plot still stands at the click
        assert wait_until(lambda: drv.execute_script(
            "return document.getElementById('plot').layout.shapes.length") == 1, 10)
        assert max(plotted(drv)["w_out"]) == 5000
        assert drv.execute_script("return workspace.cursorRows[0].a.tick") == 1000
    finally:
        if drv.find_element(By.ID, "pause").is_selected():
            drv.find_element(By.ID, "pause").click()
        drv.find_element(By.ID, "curclear").click()
        _type(drv, "window", "5")
    # live again, over the 5 s window: the rows before the 2 s window come from the server's ring after the
    # window's change, so the plot can show the newest row over the old window first
    back = wait_until(lambda: (p := plotted(drv).get("w_out")) and max(p) == 5100 and min(p) in (100, 110) and p, 10)
    assert back, plotted(drv).get("w_out")
