"""The workspace's default signals on a plant without the Powershift's clutches c1..c6 (headless Chromium).

The page's default pattern named ``slip_c1, slip_c3``; on the 8-speed
automatic (elements A..E) it silently shrank to two signals.  The default
is now the plant's own: the output speed, the gear and its first two
slips, and a pattern entry that matches nothing is said.
"""

from __future__ import annotations

import pytest

pytest.importorskip("selenium.webdriver")

from browser_support import needs_browser, served_page  # noqa: E402
from server_support import FREE_PORTS, wait_until  # noqa: E402

pytestmark = needs_browser


def test_the_default_signals_are_the_plants_own_and_an_unmatched_name_is_said(tmp_path):
    adapters = FREE_PORTS + '\n[[adapters]]\ntype = "web"\nname = "web"\nport = 0\n'
    with served_page(tmp_path, adapters, plant="zf8hp") as (s, drv):
        assert drv.execute_script("return workspace.picked") == ["w_out", "gear", "slip_A", "slip_B"]
        assert drv.execute_script("return document.getElementById('pattern').value") == \
            "w_out, gear, slip_A, slip_B"
        drv.execute_script("const p = document.getElementById('pattern'); p.value = 'w_out, slip_c3'; "
                           "document.getElementById('pick').click();")
        assert wait_until(lambda: "slip_c3" in drv.execute_script(
            "return document.getElementById('matched').textContent"), 10)
        assert "matches no signal" in drv.execute_script("return document.getElementById('matched').textContent")
        assert drv.execute_script("return workspace.picked") == ["w_out"]
