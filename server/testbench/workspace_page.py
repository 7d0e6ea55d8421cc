"""A server with the web workspace and a headless Chromium showing its page: the start-up the workspace's benchmarks
and figure script share (``bench/bench_workspace.py``, ``bench/bench_workspace_pages.py``,
``scripts/workspace_screenshot.py``; the benchmarks import it through ``bench/_support.py``).

The server is ``gearbox-hil serve PLANT --web 0`` with ZeroMQ on free loopback ports
(:class:`~server.testbench.local_server.LocalServer`); the browser is Debian's ``chromium`` driven by
``chromedriver`` through Selenium (the test extra), headless, without GPU, at a given window size.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from .local_server import FREE_PORTS, LocalServer, write_io

CHROMIUM_ARGS = ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu")


def serve_workspace(workdir: Path, mode: str = "realtime", args: tuple[str, ...] = (), plant: str = "powershift",
                    web: str = "", extra: str = "") -> LocalServer:
    """``gearbox-hil serve PLANT --mode MODE --web 0 ARGS`` with ZeroMQ on free ports, ready (``web``: the ``[web]``
    table's body, if any; ``extra``: more tables of the I/O config, such as ``[realtime]``)."""
    Path(workdir).mkdir(parents=True, exist_ok=True)
    io = write_io(Path(workdir) / f"io_{mode}.toml", extra=(f"[web]\n{web}\n" if web else "") + extra,
                  adapters=FREE_PORTS)
    return LocalServer(workdir, plant, io, mode, ("--web", "0", *args))


def cpu_s(pid: int) -> float | None:
    """CPU time (user + system) a process has used so far, s (None once it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def web_process_pid(server_pid: int) -> int:
    """The pid of a server's workspace process (its child running ``io_adapters.web.process``)."""
    for d in Path("/proc").iterdir():
        try:
            if d.name.isdigit() and int((d / "stat").read_text().rsplit(")", 1)[1].split()[1]) == server_pid \
                    and b"io_adapters.web.process" in (d / "cmdline").read_bytes():
                return int(d.name)
        except (OSError, ValueError, IndexError):
            continue
    raise RuntimeError("no workspace process found")


def chromium(width: int = 1600, height: int = 1000, extra: tuple[str, ...] = ()):
    """A headless Chromium driven by chromedriver; (driver, chromedriver's pid: the root of the browser's processes).

    Raises RuntimeError naming the Debian packages when either is missing.
    """
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    binary, driver = shutil.which("chromium") or shutil.which("chromium-browser"), shutil.which("chromedriver")
    if not binary or not driver:
        raise RuntimeError("needs Debian's chromium and chromium-driver (apt-get install chromium chromium-driver)")
    opts = webdriver.ChromeOptions()
    for a in (*CHROMIUM_ARGS, f"--window-size={width},{height}", *extra):
        opts.add_argument(a)
    opts.binary_location = binary
    service = Service(driver)
    drv = webdriver.Chrome(service=service, options=opts)
    drv.set_page_load_timeout(60)
    drv.set_script_timeout(60)
    return drv, service.process.pid


def open_workspace(drv, url: str, timeout_s: float = 60.0) -> None:
    """Load the workspace at ``url`` and wait until it is connected and knows its plant."""
    drv.get(url)
    end = time.monotonic() + timeout_s
    while not drv.execute_script("return !!(window.workspace && workspace.connected && workspace.plant)"):
        if time.monotonic() > end:
            raise TimeoutError(f"the page did not connect within {timeout_s:g} s")
        time.sleep(0.05)


__all__ = ["CHROMIUM_ARGS", "chromium", "cpu_s", "open_workspace", "serve_workspace", "web_process_pid"]
