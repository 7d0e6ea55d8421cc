"""What the benchmarks share: a server in a subprocess on free loopback ports, and its I/O template; a server with
the web workspace and a headless Chromium showing its page.

One implementation for the test bench, the tests and the benchmarks
(:mod:`server.testbench.local_server`, :mod:`server.testbench.workspace_page`); the scripts import it as
``_support`` (they run as ``python bench/NAME.py``, with ``bench/`` first on the path).
"""

from __future__ import annotations

from pathlib import Path

from server.testbench.local_server import FREE_ENDPOINTS, FREE_PORTS, LocalServer, write_io
from server.testbench.workspace_page import chromium, cpu_s, open_workspace, serve_workspace, web_process_pid

ROOT = Path(__file__).resolve().parent.parent

__all__ = ["ROOT", "FREE_ENDPOINTS", "FREE_PORTS", "LocalServer", "write_io", "chromium", "cpu_s", "open_workspace",
           "serve_workspace", "web_process_pid"]
