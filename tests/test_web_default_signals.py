"""The workspace's default signals on a plant without the Powershift's clutches c1..c6 (headless Chromium).

The page's default pattern named ``slip_c1, slip_c3``; on the 8-speed
automatic (elements A..E) it silently shrank to two signals.  The default
is now the plant's own: the output speed, the gear and its first two
slips, and a pattern entry that matches nothing is said.
"""

from __future__ import annotations

import pytest

from test_web_browser import CHROMIUM, DRIVER, chrome  # noqa: F401  (the skip when no browser)

from server_support import FREE_PORTS, ServerProcess, wait_until

pytestmark = pytest.mark.skipif(CHROMIUM is None or DRIVER is None,
                                reason="no headless browser: install Debian's chromium and chromium-driver")


def test_the_default_signals_are_the_plants_own_and_an_unmatched_name_is_said(tmp_path):
    adapters = FREE_PORTS + '\n[[adapters]]\ntype = "web"\nname = "web"\nport = 0\n'
    with ServerProcess(tmp_path, plant="zf8hp", mode="lockstep", adapters=adapters) as s:
        drv = chrome()
        try:
            drv.get(s.info["endpoints"]["web.url"])
            assert wait_until(lambda: drv.execute_script(
                "return window.workspace && workspace.connected && workspace.plant !== null"), 30)
            assert drv.execute_script("return workspace.picked") == ["w_out", "gear", "slip_A", "slip_B"]
            assert drv.execute_script("return document.getElementById('pattern').value") == \
                "w_out, gear, slip_A, slip_B"
            drv.execute_script("const p = document.getElementById('pattern'); p.value = 'w_out, slip_c3'; "
                               "document.getElementById('pick').click();")
            assert wait_until(lambda: "slip_c3" in drv.execute_script(
                "return document.getElementById('matched').textContent"), 10)
            assert "matches no signal" in drv.execute_script("return document.getElementById('matched').textContent")
            assert drv.execute_script("return workspace.picked") == ["w_out"]
        finally:
            drv.quit()
            s.shutdown()
