"""The browser tests' start-up, written once: a headless Chromium and the workspace page open in it.

tests/test_web_browser.py, tests/test_web_browser_tools.py and tests/test_web_browser_archive.py drive the workspace
in Debian's ``chromium`` through ``chromium-driver`` and Selenium (the test extra); where either is missing their
tests skip with the reason (:data:`needs_browser`; ``.ci/run`` installs both).  The browser's options are the
benchmarks' (:data:`server.testbench.workspace_page.CHROMIUM_ARGS`), so a test sees the page as a benchmark
measures it.
"""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path

import pytest

from server.testbench.workspace_page import CHROMIUM_ARGS
from server_support import ServerProcess, wait_until

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")
needs_browser = pytest.mark.skipif(CHROMIUM is None or DRIVER is None,
                                   reason="no headless browser: install Debian's chromium and chromium-driver")
"""The mark of a module or test that drives a browser."""

GEAR1 = {"p_c1": 16.0, "p_c3": 16.0, "p_c6": 16.0, "engine_torque": 300.0, "load_torque": 3500.0}
"""The Powershift's inputs in gear 1 with load (every plotted signal moves)."""

READY = "return window.workspace && workspace.connected && workspace.plant !== null"
"""The page is connected and knows its plant."""
READY_TOOLS = READY + " && !!workspace.tools"
"""... and its tools (workspace_tools.js) are loaded."""


def chrome(width: int = 1600, height: int = 1000):
    """A headless Chromium driven by chromedriver, at ``width`` x ``height``."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    for a in (*CHROMIUM_ARGS, f"--window-size={width},{height}"):
        opts.add_argument(a)
    opts.binary_location = CHROMIUM
    drv = webdriver.Chrome(service=Service(DRIVER), options=opts)
    drv.set_page_load_timeout(30)
    drv.set_script_timeout(30)
    return drv


def open_page(drv, url: str, ready: str = READY, timeout_s: float = 30.0) -> None:
    """Load the workspace at ``url`` in ``drv`` and wait until the script ``ready`` returns true (else fail, with the
    browser's console)."""
    drv.get(url)
    assert wait_until(lambda: drv.execute_script(ready), timeout_s), drv.get_log("browser")


@contextlib.contextmanager
def served_page(tmp: Path, adapters: str, extra: str = "", ready: str = READY, size: tuple[int, int] = (1600, 1000),
                plant: str = "powershift"):
    """A lockstep ``plant`` server (``adapters``, ``extra`` tables in its I/O config) with its workspace open in a
    headless Chromium: yields (server, driver); both are stopped on the way out."""
    with ServerProcess(tmp, plant, mode="lockstep", adapters=adapters, extra=extra) as s:
        drv = chrome(*size)
        try:
            open_page(drv, s.info["endpoints"]["web.url"], ready)
            yield s, drv
        finally:
            drv.quit()
            s.shutdown()


def plotted(drv) -> dict[str, dict[int, float]]:
    """name -> {tick: value} of the traces drawn in the signal plot."""
    traces = drv.execute_script("const d = document.getElementById('plot').data || [];"
                                "return d.map((t) => [t.name, Array.from(t.customdata), Array.from(t.y)]);")
    return {name.split(" [")[0]: dict(zip(ticks, ys)) for name, ticks, ys in traces}


def stream(zc, n: int) -> dict[int, dict]:
    """Step ``n`` ticks; the ZeroMQ state stream's outputs and time (``t``) by tick."""
    end = zc.step(n).tick
    states = {}
    while end not in states:
        st = zc.recv_state(5.0)
        assert st is not None, f"the state stream stopped at tick {max(states, default=0)}"
        states[st.tick] = dict(st.y, t=st.t)
    return states


__all__ = ["CHROMIUM", "DRIVER", "GEAR1", "READY", "READY_TOOLS", "chrome", "needs_browser", "open_page", "plotted",
           "served_page", "stream"]
