"""Make docs/figures/workspace.png and workspace_tools.png: the web workspace during the Powershift 1 -> 3 swap.

Starts ``gearbox-hil serve powershift --mode lockstep --web 0`` (ZeroMQ on
free ports), opens the workspace in a headless Chromium (Debian's
``chromium`` and ``chromium-driver``, Selenium from the test extra), loads
``scenarios/powershift_single_swap.toml`` from the page, plots the output
speed, the slips and pressures of clutches 1 and 2, and steps to 0.62 s in
lockstep (mid-swap: clutch 1 released, clutch 2 slipping) before the
screenshot.  The second figure (``workspace_tools.png`` beside the first)
adds the tools: cursors at 0.30 and 0.60 s, clutch 2's torque over its slip
in the XY plot, a gauge on the output speed and a lamp on clutch 2's slip,
in a taller window.  Run from the project folder::

    python scripts/workspace_screenshot.py [OUT.png]
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from server.testbench.workspace_page import chromium, open_workspace, serve_workspace  # noqa: E402


def wait(pred, timeout_s: float, what: str):
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(0.05)
    raise TimeoutError(what)


def page_step(drv, n: int) -> None:
    """Step ``n`` ticks from the page's own control (as a click on its step button does)."""
    rep = drv.execute_async_script("const done = arguments[arguments.length - 1];"
                                   f"act({{cmd: 'step', n: {n}}}).then(done);")
    if not rep.get("ok"):
        raise RuntimeError(f"step: {rep}")


def typed(drv, box_id: str, text: str) -> None:
    from selenium.webdriver.common.by import By

    box = drv.find_element(By.ID, box_id)
    box.clear()
    box.send_keys(text)
    drv.execute_script("arguments[0].dispatchEvent(new Event('change'))", box)


def tools_setup(drv) -> None:
    """Before the run (they show the rows that arrive after): an XY plot of torque over slip, a gauge, a lamp."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    Select(drv.find_element(By.ID, "xyx")).select_by_visible_text("slip_c2")
    drv.find_element(By.ID, "xyy").send_keys("torque_c2")
    drv.find_element(By.ID, "xyshow").click()
    for signal, kind, lo, hi in (("w_out", "gauge", "0", "200"), ("slip_c2", "lamp", "-50", "50")):
        Select(drv.find_element(By.ID, "gsignal")).select_by_visible_text(signal)
        Select(drv.find_element(By.ID, "gkind")).select_by_visible_text(kind)
        typed(drv, "glo", lo)
        typed(drv, "ghi", hi)
        drv.find_element(By.ID, "gadd").click()


def tools_shot(drv, out: Path) -> None:
    """The tools' figure: with cursors at 0.30 and 0.60 s, in a taller window."""
    typed(drv, "cura", "0.3")
    typed(drv, "curb", "0.6")
    drv.set_window_size(1600, 2300)
    time.sleep(1.5)  # redrawn at the new size
    drv.save_screenshot(str(out))
    print(f"wrote {out}")


def main(out: Path) -> None:
    from selenium.webdriver.common.by import By

    with tempfile.TemporaryDirectory() as tmp:
        srv = serve_workspace(Path(tmp), "lockstep")
        drv = None
        try:
            try:
                drv, _ = chromium(1600, 1250, ("--hide-scrollbars",))
            except RuntimeError as exc:
                sys.exit(f"workspace_screenshot: {exc}")
            open_workspace(drv, srv.info["endpoints"]["web.url"])
            for el, text in (("pattern", "w_out, slip_c1, slip_c2, pressure_c1, pressure_c2"), ("window", "1")):
                box = drv.find_element(By.ID, el)
                box.clear()
                box.send_keys(text)
            drv.find_element(By.ID, "pick").click()
            wait(lambda: drv.execute_script("return document.getElementById('scenario').value")
                 == "powershift_single_swap.toml", 30, "the page did not list the scenarios")
            drv.find_element(By.ID, "load").click()  # the list's default: powershift_single_swap.toml
            wait(lambda: drv.execute_script("return workspace.status && workspace.status.scenario && workspace.status.scenario.source"), 30,
                 "the scenario did not load")
            tools_setup(drv)
            for _ in range(31):  # 0.62 s in steps of 20 ms, so the plot fills as in a run
                page_step(drv, 20)
            time.sleep(1.5)  # the last rows, the status and a redraw reach the page
            out.parent.mkdir(parents=True, exist_ok=True)
            drv.save_screenshot(str(out))
            print(f"wrote {out}")
            tools_shot(drv, out.with_name(out.stem + "_tools.png"))
        finally:
            if drv is not None:
                drv.quit()
            srv.shutdown()


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs" / "figures" / "workspace.png")
