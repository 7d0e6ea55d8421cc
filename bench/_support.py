"""What the benchmarks share: a server in a subprocess on free loopback ports, and its I/O template.

One implementation for the test bench, the tests and the benchmarks
(:mod:`server.local_server`); the scripts import it as ``_support`` (they
run as ``python bench/NAME.py``, with ``bench/`` first on the path).
"""

from __future__ import annotations

from pathlib import Path

from server.local_server import FREE_ENDPOINTS, FREE_PORTS, LocalServer, write_io

ROOT = Path(__file__).resolve().parent.parent

__all__ = ["ROOT", "FREE_ENDPOINTS", "FREE_PORTS", "LocalServer", "write_io"]
