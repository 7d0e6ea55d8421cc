"""Shared pieces of the server tests: a server in a subprocess on free ports, and I/O configs.

Servers bind ``tcp://127.0.0.1:*`` (the kernel picks free ports) and report
their endpoints in a ready file, so tests never collide on ports
(:mod:`server.local_server`, shared with the test bench and the
benchmarks).  Waits are generous: other processes may be compiling on the
same two cores.
"""

from __future__ import annotations

import time
from pathlib import Path

from server.local_server import FREE_PORTS, LocalServer, write_io

ROOT = Path(__file__).resolve().parent.parent


class ServerProcess(LocalServer):
    """``gearbox-hil serve`` in a subprocess (:class:`server.local_server.LocalServer`); a context manager."""

    def __init__(self, tmp: Path, plant: str = "powershift", mode: str = "realtime", loop: str = "",
                 extra: str = "", args: tuple[str, ...] = (), ready_timeout_s: float = 300.0,
                 adapters: str = FREE_PORTS, io: str = ""):
        """``io``: a shipped I/O config by name, run as it is (with ``--zmq-port 0`` in ``args`` for free
        ports); else one written from ``loop``, ``extra`` and ``adapters``."""
        self.tmp = Path(tmp)
        self.tmp.mkdir(parents=True, exist_ok=True)
        self.io = io or write_io(self.tmp / f"io_{mode}.toml", loop, extra, adapters)
        super().__init__(self.tmp, plant, self.io, mode, args, ready_timeout_s)
        self.control = self.info["endpoints"]["zmq.control"]


def wait_until(predicate, timeout_s: float = 30.0, interval_s: float = 0.02):
    """Poll ``predicate()`` until it returns a true value (returned) or the timeout passes (None)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        v = predicate()
        if v:
            return v
        time.sleep(interval_s)
    return None


__all__ = ["FREE_PORTS", "ROOT", "ServerProcess", "wait_until", "write_io"]
