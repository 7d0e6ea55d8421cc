"""Shared pieces of the server tests: a server in a subprocess on free ports, and I/O configs.

Servers bind ``tcp://127.0.0.1:*`` (the kernel picks free ports) and report
their endpoints in a ready file, so tests never collide on ports.  Waits are
generous: other processes may be compiling on the same two cores.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from io_adapters.zmq.client import HilClient

ROOT = Path(__file__).resolve().parent.parent

FREE_PORTS = """
[[adapters]]
type = "zmq"
name = "zmq"
state_endpoint = "tcp://127.0.0.1:*"
command_endpoint = "tcp://127.0.0.1:*"
control_endpoint = "tcp://127.0.0.1:*"
"""


def write_io(path: Path, loop: str = "", extra: str = "", adapters: str = FREE_PORTS) -> Path:
    """An I/O config with the given [loop] body and extra tables, ZeroMQ on free loopback ports."""
    text = "[loop]\nstatus_line = false\n" + loop + "\n" + extra + "\n" + adapters
    path.write_text(text)
    return path


class ServerProcess:
    """``gearbox-hil serve`` in a subprocess; use as a context manager."""

    def __init__(self, tmp: Path, plant: str = "powershift", mode: str = "realtime", loop: str = "",
                 extra: str = "", args: tuple[str, ...] = (), ready_timeout_s: float = 300.0,
                 adapters: str = FREE_PORTS, io: str = ""):
        """``io``: a shipped I/O config by name, run as it is (with ``--zmq-port 0`` in ``args`` for free
        ports); else one written from ``loop``, ``extra`` and ``adapters``."""
        self.tmp = Path(tmp)
        self.tmp.mkdir(parents=True, exist_ok=True)
        self.io = io or write_io(self.tmp / f"io_{mode}.toml", loop, extra, adapters)
        self.ready = self.tmp / f"ready_{mode}.json"
        self.summary = self.tmp / f"summary_{mode}.json"
        self.log = self.tmp / f"server_{mode}.log"
        for p in (self.ready, self.summary):
            if p.exists():
                p.unlink()
        cmd = [sys.executable, "-m", "server.cli", "serve", plant, "--io", str(self.io), "--mode", mode,
               "--ready-file", str(self.ready), "--summary-json", str(self.summary), "--quiet", *args]
        self._logfh = open(self.log, "w")
        self.proc = subprocess.Popen(cmd, cwd=ROOT, stdout=self._logfh, stderr=subprocess.STDOUT,
                                     env={**os.environ, "PYTHONUNBUFFERED": "1"})
        deadline = time.monotonic() + ready_timeout_s
        while not self.ready.exists():
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}:\n{self.output()}")
            if time.monotonic() > deadline:
                self.kill()
                raise TimeoutError(f"server not ready in {ready_timeout_s} s:\n{self.output()}")
            time.sleep(0.05)
        self.info = json.loads(self.ready.read_text())
        self.control = self.info["endpoints"]["zmq.control"]

    def client(self, timeout_s: float = 30.0) -> HilClient:
        return HilClient(self.control, timeout_s=timeout_s).connect()

    def output(self) -> str:
        if not self._logfh.closed:
            self._logfh.flush()
        return self.log.read_text() if self.log.exists() else ""

    def shutdown(self, timeout_s: float = 60.0) -> dict:
        """Ask the server to shut down; returns its final status (the --summary-json file)."""
        if self.proc.poll() is None:
            with self.client() as c:
                c.shutdown()
            self.proc.wait(timeout=timeout_s)
        self._logfh.close()
        return json.loads(self.summary.read_text()) if self.summary.exists() else {}

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)
        if not self._logfh.closed:
            self._logfh.close()

    def __enter__(self) -> "ServerProcess":
        return self

    def __exit__(self, *exc) -> None:
        self.kill()


def wait_until(predicate, timeout_s: float = 30.0, interval_s: float = 0.02):
    """Poll ``predicate()`` until it returns a true value (returned) or the timeout passes (None)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        v = predicate()
        if v:
            return v
        time.sleep(interval_s)
    return None
