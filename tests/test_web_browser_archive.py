"""Switches, the history from the server and the recordings, in a real headless Chromium (as tests/test_web_browser.py).

One lockstep server with a ``[recording]`` folder and one browser for the module; every value the page shows is
checked against the ZeroMQ state stream of the same ticks, bit for bit.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request

import pytest

pytest.importorskip("aiohttp")
pytest.importorskip("selenium.webdriver")

from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import Select  # noqa: E402

from server_support import FREE_PORTS, wait_until  # noqa: E402
from browser_support import GEAR1, READY_TOOLS, needs_browser, open_page, served_page, stream  # noqa: E402

pytestmark = needs_browser


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("archive")
    adapters = FREE_PORTS + '\n[web]\nport = 0\nlayouts = "layouts"\nmax_download_bytes = 65536\n'
    extra = '[recording]\nfolder = "rec"\nchunk_s = 0.1\n'
    with served_page(tmp, adapters, extra, ready=READY_TOOLS) as (s, drv):
        yield s, drv, tmp


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=20) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def test_a_switch_toggles_an_input_between_its_two_values_and_the_plant_follows(served):
    s, drv, _ = served
    Select(drv.find_element(By.ID, "instinput")).select_by_visible_text("p_c2")
    Select(drv.find_element(By.ID, "instkind")).select_by_visible_text("switch")
    drv.find_element(By.ID, "instadd").click()
    row = drv.find_element(By.CSS_SELECTOR, "#instruments tr[data-instrument='p_c2'][data-kind='switch']")
    button = row.find_element(By.CLASS_NAME, "instswitch")
    assert button.text == "off" and button.get_attribute("aria-pressed") == "false"
    on = row.find_element(By.CLASS_NAME, "inston")
    on.clear()
    on.send_keys("12.5")
    with s.client() as zc:
        zc.subscribe(("state",))
        time.sleep(0.3)
        zc.reset(GEAR1)
        button.click()
        assert wait_until(lambda: zc.get()["u"]["p_c2"] == 12.5, 10), drv.find_element(By.ID, "error").text
        assert wait_until(lambda: button.text == "on" and button.get_attribute("aria-pressed") == "true", 10)
        by_page = stream(zc, 200)
        zc.reset(GEAR1)
        zc.set_inputs_acked(p_c2=12.5)  # the same value from a ZeroMQ client
        by_zmq = stream(zc, 200)
        assert by_page == by_zmq  # bit for bit: one command path
        button.click()  # off again: the off value, 0 bar
        assert wait_until(lambda: zc.get()["u"]["p_c2"] == 0.0 and button.text == "off", 10)
        # an on value outside the input's range is refused by the server and changes nothing
        on.clear()
        on.send_keys("400")
        button.click()
        err = wait_until(lambda: drv.find_element(By.ID, "error").text, 10)
        assert err.startswith("set: p_c2") and "outside" in err
        assert zc.get()["u"]["p_c2"] == 0.0 and button.text == "off"
        on.clear()
        on.send_keys("12.5")
    # kept in layouts: kind and both values, restored as a switch
    layout = drv.execute_script("return currentLayout()")
    assert {"name": "p_c2", "kind": "switch", "value": 0, "off": 0, "on": 12.5} in layout["instruments"]
    drv.execute_script("workspace.instruments = []; buildInstruments(); applyLayout(arguments[0]);", layout)
    assert drv.find_element(By.CSS_SELECTOR, "#instruments tr[data-kind='switch'] .inston").get_attribute("value") \
        == "12.5"
    drv.find_element(By.CSS_SELECTOR, "#instruments tr[data-instrument='p_c2'] .instdel").click()


def test_history_from_the_server_holds_rows_the_page_never_received(served):
    s, drv, _ = served
    with s.client() as zc:
        zc.subscribe(("state",))
        time.sleep(0.3)
        zc.reset(GEAR1)
        drv.execute_script("workspace.ws.onclose = null; workspace.ws.close();")  # the page receives nothing now
        states = stream(zc, 2000)
    # the page has none of these rows; the server's history has every display row of them
    assert not any(t >= 1000 for t in drv.execute_script("return workspace.data.w_out.tick"))
    open_page(drv, drv.current_url)  # a new page: loaded again
    box = drv.find_element(By.ID, "pattern")
    box.clear()
    box.send_keys("w_out, slip_c1")
    drv.find_element(By.ID, "pick").click()
    secs = drv.find_element(By.ID, "histsecs")
    secs.clear()
    secs.send_keys("1.495")  # from t = 0.505 s: tick 510
    drv.find_element(By.ID, "histload").click()
    got = wait_until(lambda: drv.execute_script("return workspace.history"), 10)
    assert got, drv.find_element(By.ID, "error").text
    ticks = drv.execute_script("return workspace.data.w_out.tick")
    assert ticks == list(range(510, 2001, 10)) and (got["first_tick"], got["last_tick"]) == (510, 2000)
    for name in ("w_out", "slip_c1"):
        ys = drv.execute_script("return workspace.data[arguments[0]].y", name)
        assert ys == [states[k][name] for k in ticks], name  # bit for bit
    assert float(drv.find_element(By.ID, "hold").get_attribute("value")) >= 1.495
    # bounded and checked
    url = s.info["endpoints"]["web.url"]
    assert _get(url + "api/history?seconds=1&signals=nope")[0] == 400
    assert _get(url + "api/history?seconds=-1&signals=w_out")[0] == 400
    assert _get(url + "api/history?seconds=1e9&signals=w_out")[0] == 400
    status, body = _get(url + "api/history?seconds=0.105&every=50&signals=w_out")
    assert status == 200 and json.loads(body)["tick"] == [1900, 1950, 2000]


def test_recordings_are_listed_and_downloaded_only_from_the_recording_folder(served):
    s, drv, tmp = served
    with s.client() as zc:
        zc.reset(GEAR1)
        zc.request("record_start", signals=["w_out"], every=50, name="page")
        zc.step(250)
        zc.request("record_stop")
        assert wait_until(lambda: zc.status()["recording"]["writer_state"] == "closed", 60)
    folder = tmp / "rec"
    files = sorted(p.name for p in folder.glob("page_*.mf4"))
    assert files
    drv.find_element(By.ID, "reclist").click()
    listed = wait_until(lambda: (r := drv.execute_script("return workspace.recordings")) and
                        {x["name"] for x in r} >= set(files) and r, 10)
    assert listed, drv.find_element(By.ID, "error").text
    link = drv.find_element(By.CSS_SELECTOR, f"#recordings tr[data-recording='{files[0]}'] a")
    status, body = _get(link.get_attribute("href"))
    assert status == 200 and body == (folder / files[0]).read_bytes()
    url = s.info["endpoints"]["web.url"] + "api/recordings/"
    (tmp / "secret.mf4").write_bytes(b"x" * 100)
    (folder / "link.mf4").symlink_to(tmp / "secret.mf4")
    (folder / "big.mf4").write_bytes(b"x" * 70000)  # beyond max_download_bytes (65536)
    (folder / "notes.txt").write_text("not a recording")
    assert _get(url + "link.mf4")[0] == 404  # a link out of the folder is absent
    assert _get(url + "..%2Fsecret.mf4")[0] in (400, 404)
    assert _get(url + "notes.txt")[0] == 400
    assert _get(url + "big.mf4")[0] == 413
    listed = json.loads(_get(s.info["endpoints"]["web.url"] + "api/recordings")[1])["recordings"]
    assert {r["name"] for r in listed} == set(files) | {"big.mf4"}
